//! The thresholds of Redis's compact encodings (`hash-max-listpack-*`,
//! `set-max-intset-entries`, `zset-max-listpack-*`), which decide what
//! OBJECT ENCODING reports. Process-wide, as in Redis: CONFIG SET changes
//! them (relaxed atomics, read when a collection grows).

use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;

/// Redis 7.0's defaults of the thresholds below.
pub const HASH_MAX_LISTPACK_ENTRIES_DEFAULT: usize = 512;
pub const HASH_MAX_LISTPACK_VALUE_DEFAULT: usize = 64;
pub const SET_MAX_INTSET_ENTRIES_DEFAULT: usize = 512;
pub const ZSET_MAX_LISTPACK_ENTRIES_DEFAULT: usize = 128;
pub const ZSET_MAX_LISTPACK_VALUE_DEFAULT: usize = 64;

pub static HASH_MAX_LISTPACK_ENTRIES: AtomicUsize = AtomicUsize::new(HASH_MAX_LISTPACK_ENTRIES_DEFAULT);
pub static HASH_MAX_LISTPACK_VALUE: AtomicUsize = AtomicUsize::new(HASH_MAX_LISTPACK_VALUE_DEFAULT);
pub static SET_MAX_INTSET_ENTRIES: AtomicUsize = AtomicUsize::new(SET_MAX_INTSET_ENTRIES_DEFAULT);
pub static ZSET_MAX_LISTPACK_ENTRIES: AtomicUsize = AtomicUsize::new(ZSET_MAX_LISTPACK_ENTRIES_DEFAULT);
pub static ZSET_MAX_LISTPACK_VALUE: AtomicUsize = AtomicUsize::new(ZSET_MAX_LISTPACK_VALUE_DEFAULT);

/// Sets one threshold from its configured value (negative reads as 0).
pub fn set(threshold: &AtomicUsize, value: i64) {
    threshold.store(value.max(0) as usize, Relaxed);
}

#[inline]
pub fn get(threshold: &AtomicUsize) -> usize {
    threshold.load(Relaxed)
}
