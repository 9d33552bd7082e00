//! The memory budget: keeping `used_memory` under `maxmemory`.
//!
//! Before a write that may grow memory, `ensure_memory` reclaims until the
//! node is back under the limit: TTL-expired keys first, whatever the
//! policy (nothing live is evicted while dead data still holds memory),
//! then the eviction policy's victims (see `store::Keyspace::eviction_victim`).

use crate::server::Shared;
use crate::store::StoreStats;
use std::sync::atomic::Ordering::Relaxed;

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
    let kind = rt.policy();
    if !kind.evicts() {
        return false;
    }
    if shared.ks.policy_kind() != kind {
        // CONFIG SET changed the policy: the keyspace's instances follow.
        shared.ks.set_policy(kind);
    }
    let samples = rt.maxmemory_samples.load(Relaxed);
    for _ in 0..MAX_EVICTIONS_PER_CALL {
        if shared.used_memory() <= max {
            return true;
        }
        let Some(victim) = shared.ks.eviction_victim(samples) else {
            return false;
        };
        shared.ks.evict(&victim, stats);
    }
    shared.used_memory() <= max
}
