//! The memory budget: what the node holds (keyspace + connection buffers +
//! a fixed baseline, `used_memory`) against `maxmemory`, and reclaiming
//! before a write that may grow it.
//!
//! `ensure_memory` reclaims until the node is back under the limit:
//! TTL-expired keys first, whatever the policy (nothing live is evicted
//! while dead data still holds memory; this costs nothing while no
//! deadline has passed, see `store::expire`), then the eviction policy's
//! victims in a batch down to a little below the limit (see
//! `store::Keyspace::eviction_victims`), so that the writes that follow
//! do not each pay for a search. Under noeviction a write over the limit
//! costs one comparison before its OOM error.

use crate::config::RuntimeConfig;
use crate::store::expire::ActiveExpiry;
use crate::store::{Keyspace, StoreStats, Victim};
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

    /// `used_memory`: keyspace + connection buffers + baseline, and the
    /// rounding of huge-page-backed tables to whole pages: the keyspace's
    /// per-key estimate (`ENTRY_OVERHEAD`) stands for its tables, huge pages
    /// or not, so only what the pages add beyond the tables' own sizes is
    /// added here, and each byte is counted once.
    pub fn used(&self, ks: &Keyspace) -> u64 {
        ks.flush_mem();
        let huge_slack = crate::sys::hugepages::slack_bytes() as i64;
        (ks.used_memory() + self.connections.load(Relaxed).max(0) + BASE_MEMORY + huge_slack) as u64
    }

    /// Records `used` as the peak if it is the highest yet; returns the peak.
    pub fn note_peak(&self, used: u64) -> u64 {
        self.peak.fetch_max(used, Relaxed).max(used)
    }

    pub fn peak(&self) -> u64 {
        self.peak.load(Relaxed)
    }
}

/// Evicting in a batch (see `headroom`), each search of `maxmemory-samples`
/// candidates feeds a pool of the best ones seen, as Redis's eviction pool
/// does, and the best three of the pool go: the pool carries good
/// candidates over, so a victim costs a third of a search's sampling
/// (random slots are cache misses) without taking merely the third best
/// of five.
const VICTIMS_PER_SEARCH: usize = 3;
const POOL: usize = 16;

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
    let mut pool: Vec<(u64, Victim)> = Vec::with_capacity(POOL + samples);
    let mut evicted = 0;
    while evicted < MAX_EVICTIONS_PER_CALL {
        if budget.used(ks) <= target {
            return true;
        }
        ks.eviction_victims(samples, samples, &mut pool);
        if pool.is_empty() {
            return budget.used(ks) <= max;
        }
        pool.sort_by_key(|(score, _)| *score);
        // A key drawn again must not take two places in the pool.
        pool.dedup_by(|a, b| (a.1.part, a.1.db, a.1.slot) == (b.1.part, b.1.db, b.1.slot));
        let take = VICTIMS_PER_SEARCH.min(pool.len());
        for (_, victim) in pool.drain(..take) {
            ks.evict(&victim, stats);
            evicted += 1;
        }
        pool.truncate(POOL);
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
