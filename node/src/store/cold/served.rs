//! Values read from disk for one read-only command, and not kept in RAM.
//!
//! A read-only command (GET, HGETALL, ...) on a cold key that no command
//! read from disk lately is served from the read and the entry goes back to
//! cold at the same record: the value does not take a warm value's place in
//! RAM, which would cost a demotion write (and later a cleaner's move) for a
//! key that may not be read again soon. A key read from disk again while
//! its read is remembered ([`SeenOnce`]) is promoted, as is any key a write
//! or a transaction reads. So RAM holds what is read repeatedly, and a long
//! tail read once costs one disk read each, not a read and a write.

use crate::store::entry::ColdLoc;
use smallvec::SmallVec;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::Relaxed;

/// Entries made warm for the command about to run, to be made cold again
/// (at their record) once it has.
#[derive(Default)]
pub struct ServedOnce {
    pub(in crate::store) entries: SmallVec<[Served; 4]>,
}

/// One entry of [`ServedOnce`].
pub(in crate::store) struct Served {
    pub part: u32,
    pub db: usize,
    pub slot: u32,
    /// Its record.
    pub loc: ColdLoc,
    /// The key was forgotten: it is forgotten again.
    pub forgotten: bool,
}

impl ServedOnce {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Slots of [`SeenOnce`]: the keys served from disk lately, by hash.
const SEEN_SLOTS: usize = 1 << 15;

/// Which keys were served from disk without promotion lately: one tag of
/// each key's hash per slot (direct-mapped, so a newer key takes an older
/// one's slot; a collision only promotes a key early).
pub struct SeenOnce {
    tags: Box<[AtomicU32]>,
}

impl Default for SeenOnce {
    fn default() -> Self {
        SeenOnce { tags: (0..SEEN_SLOTS).map(|_| AtomicU32::new(0)).collect() }
    }
}

impl SeenOnce {
    /// Whether the key of `hash` was served from disk since its slot last
    /// changed; remembers it either way.
    pub fn again(&self, hash: u64) -> bool {
        let tag = (hash >> 32) as u32 | 1;
        self.tags[hash as usize & (SEEN_SLOTS - 1)].swap(tag, Relaxed) == tag
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_seen_again_until_another_takes_its_slot() {
        let seen = SeenOnce::default();
        let (a, b) = (0x1234_5678_0000_0001u64, 0x9abc_def0_0000_0001u64);
        assert!(!seen.again(a), "first time");
        assert!(seen.again(a), "second time");
        assert!(!seen.again(b), "same slot, another key");
        assert!(!seen.again(a), "forgotten");
    }
}
