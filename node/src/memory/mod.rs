//! The memory budget: what the node holds (keyspace + connection buffers +
//! a fixed baseline, `used_memory`) against `maxmemory`, and reclaiming
//! before a write that may grow it.
//!
//! `ensure_memory` reclaims until the node is back under the limit:
//! TTL-expired keys first, whatever the policy (nothing live is evicted
//! while dead data still holds memory), then the eviction policy's victims
//! (see `store::Keyspace::eviction_victim`).

use crate::config::RuntimeConfig;
use crate::store::expire::ActiveExpiry;
use crate::store::{Keyspace, StoreStats};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicI64, AtomicU64};

/// Fixed memory the node uses regardless of data (tables, runtime): part of
/// `used_memory` as in Redis, so an empty node does not report 0.
const BASE_MEMORY: i64 = 1024 * 1024;

/// Most victims removed for one write before giving up (bounds latency when
/// one huge write needs a lot of room).
const MAX_EVICTIONS_PER_CALL: usize = 100_000;

/// The memory that is not the keyspace's: connection buffers, and the
/// highest total seen.
#[derive(Default)]
pub struct Budget {
    /// Bytes held in connection buffers (query and output).
    connections: AtomicI64,
    /// Highest `used_memory` seen (sampled every tick and on INFO).
    peak: AtomicU64,
}

impl Budget {
    /// A connection's buffers grew (or shrank, negative) by `delta` bytes.
    pub fn add_connection_bytes(&self, delta: i64) {
        self.connections.fetch_add(delta, Relaxed);
    }

    pub fn connection_bytes(&self) -> u64 {
        self.connections.load(Relaxed).max(0) as u64
    }

    /// `used_memory`: keyspace + connection buffers + baseline.
    pub fn used(&self, ks: &Keyspace) -> u64 {
        ks.flush_mem();
        (ks.used_memory() + self.connections.load(Relaxed).max(0) + BASE_MEMORY) as u64
    }

    /// Records `used` as the peak if it is the highest yet; returns the peak.
    pub fn note_peak(&self, used: u64) -> u64 {
        self.peak.fetch_max(used, Relaxed).max(used)
    }

    pub fn peak(&self) -> u64 {
        self.peak.load(Relaxed)
    }
}

/// Partitions a write at the limit sweeps for expired keys per window.
const RECLAIM_WINDOW: u32 = 32;

/// Room made below the limit once eviction starts, so that the writes that
/// follow do not each pay for a victim search: a small fraction of the
/// limit, at most 256 KiB.
fn headroom(max: u64) -> u64 {
    (max / 1024).min(256 * 1024)
}

/// Makes room before a write. Returns false when memory is over the limit
/// and nothing more can be evicted (the write must get the OOM error).
pub fn ensure_memory(
    ks: &Keyspace,
    budget: &Budget,
    rt: &RuntimeConfig,
    expiry: &ActiveExpiry,
    stats: &StoreStats,
) -> bool {
    let max = rt.maxmemory.load(Relaxed);
    if max == 0 || budget.used(ks) <= max {
        return true;
    }
    // Dead data goes first, whatever the policy; only when some key's
    // deadline has passed since the last sweep.
    let now = crate::store::now_ms();
    if ks.may_have_expired(now) {
        expiry.reclaim(ks, stats, now, RECLAIM_WINDOW, || budget.used(ks) <= max);
        if budget.used(ks) <= max {
            return true;
        }
    }
    let kind = rt.policy();
    if !kind.evicts() {
        return false;
    }
    if ks.policy_kind() != kind {
        // CONFIG SET changed the policy inside EXEC: the keyspace follows now.
        ks.set_policy(kind);
    }
    let samples = rt.maxmemory_samples.load(Relaxed);
    let target = max - headroom(max);
    for _ in 0..MAX_EVICTIONS_PER_CALL {
        if budget.used(ks) <= target {
            return true;
        }
        let Some(victim) = ks.eviction_victim(samples) else {
            return budget.used(ks) <= max;
        };
        ks.evict(&victim, stats);
    }
    budget.used(ks) <= max
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headroom_is_small() {
        assert_eq!(headroom(64 << 20), 64 << 10);
        assert_eq!(headroom(1 << 40), 256 << 10);
        assert_eq!(headroom(0), 0);
    }
}
