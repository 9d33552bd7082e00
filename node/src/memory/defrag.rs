//! Active defragmentation: when the allocator's pages hold much more than
//! the live objects in them (`allocator_frag_bytes`: after evictions or
//! deletes of small values, or when value sizes shift), entries move out
//! of sparse slabs a slice of time at a time so the emptied pages go back
//! to the OS. Redis has the same (`activedefrag`), off by default; here it
//! is on, because a node in a pod must not drift towards its memory limit.

use crate::config::RuntimeConfig;
use crate::store::Keyspace;
use crate::sys::alloc::AllocatorStats;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};
use std::time::{Duration, Instant};

/// Longest slice of one worker's time per calibration (every 100 ms): 5%
/// of a core while fragmentation lasts, up to 25% (Redis's
/// `active-defrag-cycle-max`) when it exceeds `HEAVY_PERCENT` of what is
/// allocated, as after the value sizes of a full node shift.
const SLICE: Duration = Duration::from_millis(5);
const HEAVY_SLICE: Duration = Duration::from_millis(25);
const HEAVY_PERCENT: u64 = 20;

/// A pass over every partition that moved fewer than 1 block in this many
/// looked at: what fragmentation is left is not ours to fix (collections'
/// inner blocks, the allocator's own slack); rest this long, unless
/// fragmentation grows by half meanwhile.
const FUTILE_RATIO: u64 = 100;
const REST_MS: u64 = 2_000;

/// How often defragmentation looks at the allocator's figures: as often as
/// the budget's own calibration does.
const EVERY_MS: u64 = crate::memory::CALIBRATE_EVERY_MS;

#[derive(Default)]
pub struct ActiveDefrag {
    /// When a worker's tick last looked (unix ms): one of them does, every
    /// `EVERY_MS`, whoever read the allocator meanwhile. (It used to run
    /// after the tick's own calibration only; near the limit writes
    /// calibrate every few ms, the tick's then found nothing to do, and
    /// fragmentation grew unseen exactly while a full node churned.)
    looked_ms: AtomicU64,
    /// Next partition to visit: passes resume where the last one stopped.
    next: AtomicU32,
    running: AtomicBool,
    /// Blocks moved and blocks looked at but left (INFO's
    /// `active_defrag_hits` / `active_defrag_misses`).
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    /// This pass's figures, and until when to rest after a futile one.
    pass_hits: AtomicU64,
    pass_misses: AtomicU64,
    rest_until_ms: AtomicU64,
    rest_frag: AtomicU64,
}

impl ActiveDefrag {
    /// Whether fragmentation is over the configured thresholds.
    pub fn needed(rt: &RuntimeConfig, stats: &AllocatorStats) -> bool {
        let frag = stats.active.saturating_sub(stats.allocated);
        rt.activedefrag.load(Relaxed)
            && frag > rt.active_defrag_ignore_bytes.load(Relaxed)
            && frag * 100 > stats.allocated * rt.active_defrag_threshold_lower.load(Relaxed) as u64
    }

    /// A worker's periodic tick: every `EVERY_MS` (for one worker), reads
    /// the allocator's figures and defragments if they call for it.
    pub fn tick(&self, ks: &Keyspace, rt: &RuntimeConfig) {
        let now = crate::store::now_ms();
        let last = self.looked_ms.load(Relaxed);
        if now.saturating_sub(last) < EVERY_MS || self.looked_ms.compare_exchange(last, now, Relaxed, Relaxed).is_err()
        {
            return;
        }
        self.run(ks, rt, &crate::sys::alloc::stats());
    }

    /// With the allocator's figures `stats`: defragments for up to `SLICE`
    /// if fragmentation calls for it.
    pub fn run(&self, ks: &Keyspace, rt: &RuntimeConfig, stats: &AllocatorStats) {
        let now = crate::store::now_ms();
        let frag = stats.active.saturating_sub(stats.allocated);
        let resting = now < self.rest_until_ms.load(Relaxed) && frag < self.rest_frag.load(Relaxed) * 3 / 2;
        let needed = Self::needed(rt, stats) && !resting;
        self.running.store(needed, Relaxed);
        if !needed {
            return;
        }
        let slice = if frag * 100 > stats.allocated * HEAVY_PERCENT { HEAVY_SLICE } else { SLICE };
        let parts = ks.num_partitions() as u32;
        let started = Instant::now();
        for _ in 0..parts {
            let idx = self.next.fetch_add(1, Relaxed) % parts;
            let pass = ks.defrag_partition(idx);
            self.hits.fetch_add(pass.hits, Relaxed);
            self.misses.fetch_add(pass.misses, Relaxed);
            let hits = self.pass_hits.fetch_add(pass.hits, Relaxed) + pass.hits;
            let misses = self.pass_misses.fetch_add(pass.misses, Relaxed) + pass.misses;
            if idx == parts - 1 {
                // A whole pass is over.
                if hits * FUTILE_RATIO < misses {
                    self.rest_until_ms.store(now + REST_MS, Relaxed);
                    self.rest_frag.store(frag, Relaxed);
                }
                self.pass_hits.store(0, Relaxed);
                self.pass_misses.store(0, Relaxed);
            }
            if started.elapsed() >= slice {
                break;
            }
        }
    }

    /// INFO's `active_defrag_running`: 1 while fragmentation is being worked off.
    pub fn running(&self) -> bool {
        self.running.load(Relaxed)
    }
}
