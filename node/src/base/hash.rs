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

/// Austin Appleby's MurmurHash64A, as Redis's HyperLogLog hashes elements
/// (little-endian word reads, like Redis on x86 and ARM).
pub fn murmur64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4a7935bd1e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let mut k = u64::from_le_bytes(w.try_into().expect("8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}
