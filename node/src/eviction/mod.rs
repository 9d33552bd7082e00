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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Entry, Location, Meta, Value, hash_bytes};

    /// Inserts `n` keys "k0".."k{n-1}" into db 0; key i gets last_access i.
    fn filled(partitions: usize, n: usize, ttl: impl Fn(usize) -> u64) -> Keyspace {
        let ks = Keyspace::new(partitions);
        for i in 0..n {
            let key = format!("k{i}");
            let h = hash_bytes(key.as_bytes());
            let mut part = ks.lock(ks.partition_of_key(key.as_bytes()));
            let meta = Meta { last_access: i as u32, freq: 5, visited: false, prev: u32::MAX, next: u32::MAX };
            let entry = Entry {
                key: key.as_bytes().into(),
                expire_at: ttl(i),
                meta,
                loc: Location::Ram(Value::Str(vec![b'v'; 10])),
            };
            part.dbs[0].insert(h, entry);
        }
        ks
    }

    fn evict_n(ks: &Keyspace, policy: &dyn EvictionPolicy, n: usize) -> Vec<String> {
        let stats = StoreStats::default();
        let mut names = Vec::new();
        for _ in 0..n {
            let v = policy.pick(ks, 5).expect("a victim");
            names.push(String::from_utf8(ks.lock(v.part).dbs[v.db].entry(v.slot).key.to_vec()).unwrap());
            evict(ks, v, &stats);
        }
        names
    }

    fn set_visited(ks: &Keyspace, key: &str) {
        let h = hash_bytes(key.as_bytes());
        let mut part = ks.lock(ks.partition_of_key(key.as_bytes()));
        let slot = part.dbs[0].find(h, key.as_bytes()).unwrap();
        part.dbs[0].entry_mut(slot).meta.visited = true;
    }

    #[test]
    fn sieve_spares_visited_keys_and_evicts_in_fifo_order() {
        // One partition: the exact SIEVE algorithm.
        let ks = filled(1, 10, |_| 0);
        for k in ["k0", "k2", "k4"] {
            set_visited(&ks, k);
        }
        let victims = evict_n(&ks, policy("sieve").unwrap(), 7);
        assert_eq!(victims, ["k1", "k3", "k5", "k6", "k7", "k8", "k9"]);
        // Bits were cleared on the way: the survivors go next, oldest first.
        let victims = evict_n(&ks, policy("sieve").unwrap(), 3);
        assert_eq!(victims, ["k0", "k2", "k4"]);
    }

    #[test]
    fn lru_prefers_the_least_recently_used() {
        let ks = filled(1, 100, |_| 0);
        // With every key sampled from one partition, 5 samples find an old key;
        // over many evictions the oldest half goes first on average.
        let victims = evict_n(&ks, policy("allkeys-lru").unwrap(), 50);
        let old = victims.iter().filter(|k| k[1..].parse::<usize>().unwrap() < 50).count();
        assert!(old >= 35, "only {old} of 50 LRU victims were from the older half");
    }

    #[test]
    fn volatile_policies_only_touch_keys_with_ttl() {
        for name in ["volatile-lru", "volatile-random", "volatile-ttl", "volatile-lfu"] {
            let ks = filled(8, 40, |i| if i % 2 == 0 { 10_000_000_000_000 + i as u64 } else { 0 });
            let victims = evict_n(&ks, policy(name).unwrap(), 20);
            assert!(victims.iter().all(|k| k[1..].parse::<usize>().unwrap() % 2 == 0), "{name}: {victims:?}");
            assert!(policy(name).unwrap().pick(&ks, 5).is_none(), "{name} found a persistent victim");
        }
        // volatile-ttl takes the nearest expiry first.
        let ks = filled(1, 40, |i| if i % 2 == 0 { 10_000_000_000_000 + i as u64 } else { 0 });
        let victims = evict_n(&ks, policy("volatile-ttl").unwrap(), 1);
        assert_eq!(victims, ["k0"]);
    }

    #[test]
    fn noeviction_has_no_policy() {
        assert!(policy("noeviction").is_none());
        for p in crate::config::POLICIES.iter().filter(|p| **p != "noeviction") {
            assert_eq!(policy(p).unwrap().name(), *p);
        }
    }
}
