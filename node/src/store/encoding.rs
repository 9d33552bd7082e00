//! The thresholds of Redis's compact encodings (`hash-max-listpack-*`,
//! `set-max-intset-entries`, `zset-max-listpack-*`), which decide what
//! OBJECT ENCODING reports. Process-wide, as in Redis: CONFIG SET changes
//! them (relaxed atomics, read when a collection grows).

use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;

pub static HASH_MAX_LISTPACK_ENTRIES: AtomicUsize = AtomicUsize::new(super::hash::LISTPACK_MAX_ENTRIES);
pub static HASH_MAX_LISTPACK_VALUE: AtomicUsize = AtomicUsize::new(super::hash::LISTPACK_MAX_VALUE);
pub static SET_MAX_INTSET_ENTRIES: AtomicUsize = AtomicUsize::new(super::set::INTSET_MAX_ENTRIES);
pub static ZSET_MAX_LISTPACK_ENTRIES: AtomicUsize = AtomicUsize::new(super::zset::LISTPACK_MAX_ENTRIES);
pub static ZSET_MAX_LISTPACK_VALUE: AtomicUsize = AtomicUsize::new(super::zset::LISTPACK_MAX_VALUE);

/// Sets one threshold from its configured value (negative reads as 0).
pub fn set(threshold: &AtomicUsize, value: i64) {
    threshold.store(value.max(0) as usize, Relaxed);
}

#[inline]
pub fn get(threshold: &AtomicUsize) -> usize {
    threshold.load(Relaxed)
}
