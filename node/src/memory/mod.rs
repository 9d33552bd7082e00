//! The memory budget: what the node holds (`used_memory`, measured by the
//! allocator, see `Budget`) against `maxmemory`, and reclaiming before a
//! write that may grow it.
//!
//! `ensure_memory` reclaims until the node is back under the limit:
//! TTL-expired keys first, whatever the policy (nothing live is evicted
//! while dead data still holds memory; this costs nothing while no
//! deadline has passed, see `store::expire`), then the eviction policy's
//! victims in a batch down to a little below the limit (see
//! `store::Keyspace::eviction_victims`), so that the writes that follow
//! do not each pay for a search. Under noeviction a write over the limit
//! costs one comparison before its OOM error.

pub mod defrag;

use crate::config::RuntimeConfig;
use crate::store::expire::ActiveExpiry;
use crate::store::{Keyspace, StoreStats, Victim};
use crate::sys::alloc::AllocatorStats;
use std::sync::OnceLock;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicI64, AtomicU64};

/// How often the estimate is set right against the allocator's statistics:
/// every tick, and much more often while writes run close to the limit,
/// where what the per-write estimate misses (allocator metadata, buffers)
/// would otherwise add up over a tick of pipelined writes.
pub const CALIBRATE_EVERY_MS: u64 = 100;
const CALIBRATE_NEAR_LIMIT_MS: u64 = 2;

/// Most victims removed for one write before giving up (bounds latency when
/// one huge write needs a lot of room).
const MAX_EVICTIONS_PER_CALL: usize = 100_000;

/// The memory budget's figures. `used_memory` is what the process really
/// holds: jemalloc's allocated bytes and its metadata, plus the fixed part
/// of the process outside the heap (code, thread stacks: its RSS beyond
/// the allocator's resident pages, measured once at start-up), so that
/// `maxmemory` bounds RSS whatever the value sizes. The keyspace and
/// connection buffers keep an exact running estimate of their own bytes
/// (jemalloc size classes, updated by every write, so the limit holds
/// between two readings of the allocator); every `CALIBRATE_EVERY_MS`
/// the difference between the real figure and that estimate (tables,
/// runtime, whatever is not counted per key) is measured and added.
///
/// Not counted: fragmentation inside the allocator's pages (INFO's
/// `allocator_frag_*`). Evicting more would not reduce it — a page is
/// freed only when all its objects are — so counting it could evict a
/// whole cache after a mass delete; it is reported instead.
#[derive(Default)]
pub struct Budget {
    /// Bytes held in connection buffers (query and output).
    connections: AtomicI64,
    /// Highest `used_memory` seen (sampled every tick and on INFO).
    peak: AtomicU64,
    /// Allocator-measured minus estimated bytes at the last calibration.
    correction: AtomicI64,
    /// When the last calibration ran (unix ms).
    calibrated_ms: AtomicU64,
    /// The process's RSS outside the allocator, measured once.
    process_base: OnceLock<u64>,
    pub defrag: defrag::ActiveDefrag,
}

impl Budget {
    /// A connection's buffers grew (or shrank, negative) by `delta` bytes.
    pub fn add_connection_bytes(&self, delta: i64) {
        self.connections.fetch_add(delta, Relaxed);
    }

    pub fn connection_bytes(&self) -> u64 {
        self.connections.load(Relaxed).max(0) as u64
    }

    /// What the node counts itself: keyspace + connection buffers.
    fn estimate(&self, ks: &Keyspace) -> i64 {
        ks.flush_mem();
        ks.used_memory() + self.connections.load(Relaxed).max(0)
    }

    /// `used_memory`: the estimate set right by the last calibration.
    pub fn used(&self, ks: &Keyspace) -> u64 {
        (self.estimate(ks) + self.correction.load(Relaxed)).max(0) as u64
    }

    /// Reads the allocator's statistics (plus the huge pages mapped outside
    /// it, see `sys::hugepages`) and resets the correction, at most every `CALIBRATE_EVERY_MS`
    /// (0: now). Near the limit `max`, pages the allocator freed but
    /// still maps go back to the OS at once, so RSS follows `used_memory`.
    /// Returns the statistics when it read them.
    pub fn calibrate(&self, ks: &Keyspace, max: u64, every_ms: u64) -> Option<AllocatorStats> {
        let force = every_ms == 0;
        let now = crate::store::now_ms();
        let last = self.calibrated_ms.load(Relaxed);
        if !force && now.saturating_sub(last) < every_ms {
            return None;
        }
        if self.calibrated_ms.compare_exchange(last, now, Relaxed, Relaxed).is_err() && !force {
            return None; // another worker is calibrating
        }
        let stats = crate::sys::alloc::stats();
        if stats.allocated == 0 {
            return Some(stats);
        }
        let base = *self.process_base.get_or_init(|| crate::sys::process::rss_bytes().saturating_sub(stats.resident));
        let real = stats.allocated + stats.metadata + crate::sys::hugepages::mapped_bytes() as u64 + base;
        self.correction.store(real as i64 - self.estimate(ks), Relaxed);
        let dirty = stats.resident.saturating_sub(stats.active + stats.metadata);
        if max > 0 && real + max / 8 > max && dirty > max / 64 {
            crate::sys::alloc::purge();
        }
        Some(stats)
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
    if max == 0 {
        return true;
    }
    let used = budget.used(ks);
    if used + max / 16 > max {
        budget.calibrate(ks, max, CALIBRATE_NEAR_LIMIT_MS);
    }
    if budget.used(ks) <= max {
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
