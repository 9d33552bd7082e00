//! Eviction: keeping `used_memory` under `maxmemory`.
//!
//! Every policy implements `EvictionPolicy::pick`, which proposes one victim
//! (partition, database, slot). The driver (`ensure_memory`) removes victims
//! until memory is back under the limit, before the write that needs the
//! space proceeds. TTL-expired keys are always reclaimed first, so nothing
//! live is evicted while dead data still holds memory.

mod sampled;
mod sieve;

use crate::server::Shared;
use crate::store::{Keyspace, StoreStats};
use std::sync::atomic::Ordering::Relaxed;

/// A proposed victim.
#[derive(Clone, Copy, Debug)]
pub struct Victim {
    pub part: u32,
    pub db: usize,
    pub slot: u32,
}

pub trait EvictionPolicy: Send + Sync {
    /// Config name (`maxmemory-policy`).
    fn name(&self) -> &'static str;
    /// Proposes a victim, or None when nothing is evictable under this
    /// policy (e.g. volatile-* with no TTL keys).
    fn pick(&self, ks: &Keyspace, samples: usize) -> Option<Victim>;
}

/// The policy for a `maxmemory-policy` name (None = noeviction).
pub fn policy(name: &str) -> Option<&'static dyn EvictionPolicy> {
    use sampled::{Pool, Rank, Sampled};
    static ALLKEYS_LRU: Sampled = Sampled { name: "allkeys-lru", pool: Pool::AllKeys, rank: Rank::Lru };
    static ALLKEYS_LFU: Sampled = Sampled { name: "allkeys-lfu", pool: Pool::AllKeys, rank: Rank::Lfu };
    static ALLKEYS_RANDOM: Sampled = Sampled { name: "allkeys-random", pool: Pool::AllKeys, rank: Rank::Random };
    static VOLATILE_LRU: Sampled = Sampled { name: "volatile-lru", pool: Pool::Volatile, rank: Rank::Lru };
    static VOLATILE_LFU: Sampled = Sampled { name: "volatile-lfu", pool: Pool::Volatile, rank: Rank::Lfu };
    static VOLATILE_RANDOM: Sampled = Sampled { name: "volatile-random", pool: Pool::Volatile, rank: Rank::Random };
    static VOLATILE_TTL: Sampled = Sampled { name: "volatile-ttl", pool: Pool::Volatile, rank: Rank::Ttl };
    static SIEVE: sieve::Sieve = sieve::Sieve;
    let p: &'static dyn EvictionPolicy = match name {
        "allkeys-lru" => &ALLKEYS_LRU,
        "allkeys-lfu" => &ALLKEYS_LFU,
        "allkeys-random" => &ALLKEYS_RANDOM,
        "volatile-lru" => &VOLATILE_LRU,
        "volatile-lfu" => &VOLATILE_LFU,
        "volatile-random" => &VOLATILE_RANDOM,
        "volatile-ttl" => &VOLATILE_TTL,
        "sieve" => &SIEVE,
        _ => return None,
    };
    Some(p)
}

/// Most victims removed for one write before giving up (bounds latency when
/// one huge write needs a lot of room).
const MAX_EVICTIONS_PER_CALL: usize = 100_000;

/// Makes room before a write. Returns false when memory is over the limit
/// and nothing more can be evicted (the write must get the OOM error).
pub fn ensure_memory(shared: &Shared, stats: &StoreStats) -> bool {
    let max = shared.maxmemory();
    if max == 0 {
        return true;
    }
    if shared.used_memory() <= max {
        return true;
    }
    let rt = &shared.config.runtime;
    // Dead data goes first, whatever the policy.
    let now = crate::store::now_ms();
    let parts = shared.ks.num_partitions() as u32;
    shared.expiry.run_cycle(&shared.ks, stats, now, parts);
    if shared.used_memory() <= max {
        return true;
    }
    let Some(policy) = policy(rt.policy_name()) else {
        return false;
    };
    let samples = rt.maxmemory_samples.load(Relaxed);
    for _ in 0..MAX_EVICTIONS_PER_CALL {
        if shared.used_memory() <= max {
            return true;
        }
        let Some(v) = policy.pick(&shared.ks, samples) else {
            return false;
        };
        evict(&shared.ks, v, stats);
    }
    shared.used_memory() <= max
}

/// Removes a victim (if it is still there) and counts it.
fn evict(ks: &Keyspace, v: Victim, stats: &StoreStats) {
    let mut part = ks.lock(v.part);
    if part.dbs[v.db].table.get(v.slot).is_none() {
        return;
    }
    let freed = crate::store::evict_slot(ks, &mut part, v.db, v.slot);
    StoreStats::bump(&stats.evicted, 1);
    StoreStats::bump(&stats.evicted_bytes, freed as u64);
}
