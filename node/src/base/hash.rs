//! Hashing keys for the index (hash flooding resistant); the hash slot of
//! a key is in `slot`.

use std::hash::BuildHasher;
use std::sync::LazyLock;

/// The process-wide hasher: randomly seeded at start-up so that clients
/// cannot pick keys that all collide (hash flooding).
static HASHER: LazyLock<foldhash::fast::RandomState> = LazyLock::new(Default::default);

#[inline]
pub fn hash_bytes(key: &[u8]) -> u64 {
    HASHER.hash_one(key)
}
