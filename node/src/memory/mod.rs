//! The memory budget: what the node holds (`used_memory`, measured by the
//! allocator, see `Budget`) against `maxmemory`, and reclaiming before a
//! write that may grow it.
//!
//! `ensure_memory` reclaims until the node is back under the limit:
//! TTL-expired keys first, whatever the policy (nothing live is evicted
//! while dead data still holds memory; this costs nothing while no
//! deadline has passed, see `store::expire`), then victims in a batch
//! down to a little below the limit (see
//! `store::Keyspace::eviction_victims`), so that the writes that follow
//! do not each pay for a search.
//!
//! With a disk tier (`--max-disk`) victims are demoted under every policy:
//!
//! | policy        | no tier: at the limit             | with a tier: at the limit                                                              |
//! |---------------|-----------------------------------|----------------------------------------------------------------------------------------|
//! | allkeys-*, sieve | evict the policy's victims     | demote the policy's victims; evict those the tier does not take (full, admission)      |
//! | volatile-*    | evict keys with a TTL; else OOM   | demote any key, least recently (volatile-lfu: frequently) used first; once the tier takes nothing, evict keys with a TTL; else OOM |
//! | noeviction    | OOM                               | demote any key, least recently used first; OOM once the tier is full                    |
//!
//! A search that found nothing to free is remembered (see `store::evict`):
//! until something changes, a command over the limit costs one comparison
//! more, not a search; under noeviction without a tier, none.

pub mod defrag;

use crate::config::RuntimeConfig;
use crate::policy::PolicyKind;
use crate::store::expire::ActiveExpiry;
use crate::store::{Evicted, Keyspace, Ranking, StoreStats, Victim};
use crate::sys::alloc::AllocatorStats;
use crate::sys::file::BufferGauge;
use std::cell::RefCell;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicI64, AtomicU64};
use std::sync::{Arc, OnceLock};

/// How often the estimate is set right against the allocator's statistics:
/// every tick, and much more often while writes run close to the limit,
/// where what the per-write estimate misses (allocator metadata, buffers)
/// would otherwise add up over a tick of pipelined writes.
pub const CALIBRATE_EVERY_MS: u64 = 100;
const CALIBRATE_NEAR_LIMIT_MS: u64 = 2;
/// Readings of the allocator one calibration may take to find the logs'
/// buffers unchanged across one.
const STEADY_READING_TRIES: usize = 3;

/// Most victims removed for one write before giving up (bounds latency when
/// one huge write needs a lot of room).
const MAX_EVICTIONS_PER_CALL: usize = 100_000;
/// Victims between two looks at the allocator's figures within one call.
const RECHECK_EVERY: usize = 64;

/// The memory budget's figures. `used_memory` is what the process really
/// holds: jemalloc's allocated bytes (less the freed blocks its thread
/// caches keep for reuse, which may be a few hundred KiB at any moment
/// and are free memory to the program) and its metadata, plus the fixed part
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
///
/// Counted in `used_memory` but left out of the eviction decision, as
/// Redis leaves out its AOF and replication buffers
/// (`freeMemoryGetNotCountedMemory`): the buffers of the durability
/// journal and of the cold tier's log (staged records, writes and reads in
/// flight, a segment read whole for replay or cleaning). They are bounded
/// (see `tier::log` and `durability`), come and go with the disk's pace,
/// and evicting keys would not shrink them: counting them would evict a
/// small cache whole each time a segment is read. The same for a slot
/// migration's batch on its source (values read from the disk tier and
/// the RESTOREs queued for the target: at most one batch, `cluster::
/// migration`), which goes once it is sent. INFO shows them
/// (`mem_aof_buffer`, `strata_mem_cold_tier_buffer`,
/// `strata_mem_migration_buffer`, `mem_not_counted_for_evict`).
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
    /// The process's RSS outside the allocator, measured once, at the first
    /// reading (a restarted node takes it before its replay, as a fresh
    /// node does before its first writes).
    process_base: OnceLock<u64>,
    /// The side buffers' gauges, in `SideBuffers`' order (None: no such
    /// owner).
    side: [Option<Arc<BufferGauge>>; 3],
    /// What they held at the last calibration, when `correction` was set:
    /// the part of `used` left out of the eviction decision.
    not_counted: [AtomicU64; 3],
    pub defrag: defrag::ActiveDefrag,
}

/// Bytes in the buffers left out of the eviction decision, by owner.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SideBuffers {
    /// The durability journal's.
    pub journal: u64,
    /// The cold tier's log.
    pub cold: u64,
    /// The batch of the slot migrations this node sends.
    pub migration: u64,
}

impl SideBuffers {
    pub fn total(&self) -> u64 {
        self.journal + self.cold + self.migration
    }
}

impl Budget {
    /// A budget that leaves these owners' buffers out of the eviction
    /// decision (None: the node has no such owner).
    pub fn with_side_buffers(
        journal: Option<Arc<BufferGauge>>,
        cold: Option<Arc<BufferGauge>>,
        migration: Option<Arc<BufferGauge>>,
    ) -> Budget {
        Budget { side: [journal, cold, migration], ..Budget::default() }
    }

    /// Bytes in the side buffers at the last calibration: the part of
    /// `used` they are (INFO, `/metrics`).
    pub fn side_buffers(&self) -> SideBuffers {
        let [journal, cold, migration] = self.not_counted.each_ref().map(|a| a.load(Relaxed));
        SideBuffers { journal, cold, migration }
    }

    fn side_buffers_now(&self) -> [u64; 3] {
        self.side.each_ref().map(|g| g.as_ref().map_or(0, |g| g.bytes()))
    }

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

    /// What the eviction decision compares with `maxmemory`: `used` less
    /// the logs' buffers it held at the last calibration.
    pub fn used_for_eviction(&self, ks: &Keyspace) -> u64 {
        self.used(ks).saturating_sub(self.side_buffers().total())
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
        // Read on both sides of the allocator's figures: a buffer that came
        // or went meanwhile is not left out. Such a reading counts the
        // buffer (up to a 2 MiB flush chunk) as data until the next one,
        // so it is taken again, a few times, for one the buffers held
        // still across.
        let (mut before, mut stats, mut after);
        let mut tries = 0;
        loop {
            before = self.side_buffers_now();
            stats = crate::sys::alloc::stats();
            after = self.side_buffers_now();
            tries += 1;
            if before == after || tries == STEADY_READING_TRIES {
                break;
            }
        }
        if stats.allocated == 0 {
            return Some(stats);
        }
        let base = *self.process_base.get_or_init(|| crate::sys::process::rss_bytes().saturating_sub(stats.resident));
        let real = stats.allocated.saturating_sub(stats.thread_cached)
            + stats.metadata
            + crate::sys::hugepages::mapped_bytes() as u64
            + base;
        self.correction.store(real as i64 - self.estimate(ks), Relaxed);
        let mut apart = 0;
        for (i, slot) in self.not_counted.iter().enumerate() {
            let bytes = before[i].min(after[i]).min(real - apart);
            slot.store(bytes, Relaxed);
            apart += bytes;
        }
        let dirty = stats.resident.saturating_sub(stats.active + stats.metadata);
        if max > 0 && real - apart + max / 8 > max && dirty > max / 64 {
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
/// Searches more a write makes when the pool holds only keys whose values
/// are on disk (disk tier), before it evicts one of those.
const COLD_RETRIES: usize = 8;
const POOL: usize = 16;

/// A pool unused for longer than this (keyspace clock seconds) starts
/// afresh: its scores are too old to compare with new samples.
const POOL_IDLE_SECS: u32 = 2;

/// Rounds of victims in a row that freed nothing (the tier full, keys the
/// policy keeps) before a call gives up on a ranking.
const FUTILE_ROUNDS: usize = 4;

/// Each thread's eviction pool, kept from one batch to the next (as Redis
/// keeps its pool): with small batches, a pool that started empty every
/// time would often have only the first few samples to choose from.
struct Pool {
    /// The keyspace (address), policy and ranking the candidates were
    /// scored for, and the clock second of the last search.
    owner: (usize, PolicyKind, Ranking),
    clock: u32,
    /// Sorted by score, lower first.
    victims: Vec<(u64, Victim)>,
}

thread_local! {
    static EVICTION_POOL: RefCell<Pool> = const {
        RefCell::new(Pool { owner: (0, PolicyKind::NoEviction, Ranking::Policy), clock: 0, victims: Vec::new() })
    };
}

/// How the first search of a call ranks victims: with a disk tier under a
/// policy that may not discard every key, any key by recency (volatile-lfu:
/// frequency), to demote; otherwise the policy's own victims.
fn first_ranking(kind: PolicyKind, tier: bool) -> Ranking {
    match kind {
        _ if !tier || (kind.evicts() && !kind.is_volatile()) => Ranking::Policy,
        PolicyKind::VolatileLfu => Ranking::Frequency,
        _ => Ranking::Recency,
    }
}

/// Partitions a write at the limit sweeps for expired keys per window.
const RECLAIM_WINDOW: u32 = 32;

/// Room made below the limit once eviction starts, so that the writes that
/// follow do not each pay for a victim search: 1/8192 of the limit (8 KiB
/// for 64 MiB, some 60 small keys), at most 64 KiB. Larger batches cost
/// more per victim, not less: the memory they free is reused long after,
/// out of the caches, and the allocator holds more freed chunks meanwhile
/// (glibc's fast bins, walked whole when a table grows). They also make one
/// write in many wait for all of it.
fn headroom(max: u64) -> u64 {
    (max / 8192).min(64 * 1024)
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
    let used = budget.used_for_eviction(ks);
    if used + max / 16 > max {
        budget.calibrate(ks, max, CALIBRATE_NEAR_LIMIT_MS);
    }
    if budget.used_for_eviction(ks) <= max {
        return true;
    }
    // Dead data goes first, whatever the policy; only when some key's
    // deadline has passed since the last sweep.
    if let Some(now) = ks.expired_by_now() {
        expiry.reclaim(ks, stats, now, RECLAIM_WINDOW, || budget.used_for_eviction(ks) <= max);
        if budget.used_for_eviction(ks) <= max {
            return true;
        }
    }
    // A tier busy for a moment (its cleaner freeing a segment) keeps every
    // victim where it is: no search (a client's write waits for the tier
    // at its gate; anything else gets the OOM error meanwhile).
    if ks.cold().is_some_and(|t| t.busy()) {
        return fits_after_fresh_reading(ks, budget, max);
    }
    let kind = rt.policy();
    let now = crate::store::now_ms();
    // A tier that refused a demotion lately (full) is not asked again
    // until it has room (or a little later).
    let tier = ks.cold().is_some() && !ks.tier_refused(now);
    if !kind.evicts() && !tier {
        return false;
    }
    if ks.policy_kind() != kind {
        // CONFIG SET changed the policy inside EXEC: the keyspace follows now.
        ks.set_policy(kind);
    }
    // The last search found nothing and nothing changed since: no search
    // per command at the limit (volatile-* without TTL keys, a node whose
    // own overhead is over the limit, a full tier under noeviction).
    if ks.search_known_futile(now) {
        return false;
    }
    // Keys on disk only may keep half of what the budget leaves the
    // keyspace (beyond the node's own overhead and client buffers) for
    // their index: the other half stays for values in RAM.
    let overhead = budget.used_for_eviction(ks).saturating_sub(ks.used_memory() as u64);
    ks.set_forget_limit(max.saturating_sub(overhead) / 2);
    let samples = rt.maxmemory_samples.load(Relaxed);
    let target = max - headroom(max);
    let mut ranking = first_ranking(kind, tier);
    let token = ks.begin_search();
    EVICTION_POOL.with_borrow_mut(|pool| {
        let clock = ks.clock_secs();
        if clock.wrapping_sub(pool.clock) > POOL_IDLE_SECS {
            pool.victims.clear();
        }
        pool.clock = clock;
        let mut evicted = 0;
        let mut futile_rounds = 0;
        while evicted < MAX_EVICTIONS_PER_CALL {
            let owner = (ks as *const Keyspace as usize, kind, ranking);
            if pool.owner != owner {
                pool.victims.clear();
                pool.owner = owner;
            }
            let pool = &mut pool.victims;
            if budget.used_for_eviction(ks) <= target {
                // The estimate says done; the allocator has the last word
                // when its figures are older than a near-limit reading
                // (a reading costs microseconds: not one per batch).
                budget.calibrate(ks, max, CALIBRATE_NEAR_LIMIT_MS);
                if budget.used_for_eviction(ks) <= target {
                    return true;
                }
            }
            if evicted % RECHECK_EVERY == RECHECK_EVERY - 1 {
                // A reading taken while a buffer came or went (the cleaner's,
                // a read window) counts it until the next one: evicting
                // against it would empty RAM of warm values.
                budget.calibrate(ks, max, CALIBRATE_NEAR_LIMIT_MS);
            }
            // The tier refused a demotion: not asked again in this call.
            let refused = ranking != Ranking::Policy && ks.tier_refused(now);
            if !refused {
                ks.victims_by(ranking, samples, samples, pool);
            }
            if refused || pool.is_empty() || futile_rounds >= FUTILE_ROUNDS {
                pool.clear();
                // Nothing more to demote: what the policy may discard.
                if ranking != Ranking::Policy && kind.evicts() {
                    ranking = Ranking::Policy;
                    futile_rounds = 0;
                    continue;
                }
                ks.note_futile_search(token, now);
                return fits_after_fresh_reading(ks, budget, max);
            }
            pool.sort_by_key(|(score, _)| *score);
            // Only keys already on disk found (they sort last): look again
            // before taking one, as warm values are what RAM is for.
            for _ in 0..COLD_RETRIES {
                if !pool[0].1.cold {
                    break;
                }
                ks.victims_by(ranking, samples, samples, pool);
                pool.sort_by_key(|(score, _)| *score);
            }
            // A key drawn again must not take two places in the pool.
            pool.dedup_by(|a, b| a.1 == b.1);
            // With a disk tier, keys whose values are already on disk go
            // only when the pool has nothing else (they sort last): RAM then
            // holds little but indexes.
            let take = VICTIMS_PER_SEARCH.min(pool.len());
            let take = match pool[..take].iter().take_while(|(_, v)| !v.cold).count() {
                0 => 1,
                warm => warm,
            };
            // A round counts as futile only when a victim had to stay (not
            // when all were stale: taken by another thread's search).
            let (mut freed, mut kept) = (false, false);
            for (_, victim) in pool.drain(..take) {
                match ks.evict_victim(&victim, stats) {
                    Evicted::Freed(_) => freed = true,
                    Evicted::Kept => kept = true,
                    Evicted::Stale => {}
                }
                evicted += 1;
            }
            if freed {
                futile_rounds = 0;
            } else if kept {
                futile_rounds += 1;
            }
            pool.truncate(POOL);
        }
        fits_after_fresh_reading(ks, budget, max)
    })
}

/// The last word before an OOM error: the allocator's figures read now,
/// not up to `CALIBRATE_NEAR_LIMIT_MS` ago.
fn fits_after_fresh_reading(ks: &Keyspace, budget: &Budget, max: u64) -> bool {
    budget.used_for_eviction(ks) <= max || {
        budget.calibrate(ks, max, 0);
        budget.used_for_eviction(ks) <= max
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Cli, Config, EvictionPolicy};
    use crate::store::{KeyAccess, Value};
    use crate::sys::clock::thread_cpu_ns;
    use smallvec::SmallVec;

    thread_local! {
        /// Time spent in `ensure_memory` by `write` (wall clock).
        static ROOM_NS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    /// One SET as a command runs it: room first, then the write.
    fn write(
        ks: &Keyspace,
        budget: &Budget,
        rt: &RuntimeConfig,
        expiry: &ActiveExpiry,
        stats: &StoreStats,
        i: u64,
        ttl: bool,
    ) -> bool {
        let t = std::time::Instant::now();
        let room = ensure_memory(ks, budget, rt, expiry, stats);
        ROOM_NS.with(|c| c.set(c.get() + t.elapsed().as_nanos() as u64));
        if !room {
            return false;
        }
        let key = format!("key:{:012}", crate::base::random::splitmix64(i) % 10_000_000);
        let mut parts: SmallVec<[u32; 8]> = smallvec::smallvec![ks.partition_of_key(key.as_bytes())];
        let now = crate::store::now_ms();
        let mut k = KeyAccess { ks, locked: ks.lock_set(&mut parts), db: 0, now_ms: now, touch: true, stats };
        k.set(key.as_bytes(), Value::Str(vec![b'x'; 32]), if ttl { now + 100_000_000 } else { 0 }, false);
        true
    }

    /// Not a test of speed (nothing timed is asserted): prints the CPU time
    /// of a write (a SET of a new key, as `bench/limit.sh` sends) on an empty
    /// keyspace and at a 64 MiB limit, per policy, without a network or a
    /// client in the way; see bench/README.md.
    /// `cargo test --release -p strata-node --lib write_cost -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn write_cost_empty_vs_at_limit() {
        for policy in ["noeviction", "allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "sieve"] {
            let config =
                Config::from_cli(Cli::parse_from(["strata-node", "--maxmemory", "64mb", "--maxmemory-policy", policy]))
                    .unwrap();
            let rt = &config.runtime;
            let ks = Keyspace::new(1024);
            ks.set_policy(EvictionPolicy::parse(policy).unwrap());
            let (budget, expiry, stats) = (Budget::default(), ActiveExpiry::default(), StoreStats::default());
            let ttl = policy.starts_with("volatile");
            // As the node's first tick does: what the estimate leaves out
            // (here, the test process) is measured from the start.
            budget.calibrate(&ks, rt.maxmemory.load(Relaxed), 0);
            let n = 200_000u64;
            let t = thread_cpu_ns();
            for i in 0..n {
                assert!(write(&ks, &budget, rt, &expiry, &stats, i, ttl));
            }
            let empty = (thread_cpu_ns() - t) as f64 / n as f64;
            let mut i = n;
            while stats.evicted.load(Relaxed) == 0 && budget.used(&ks) < rt.maxmemory.load(Relaxed) {
                write(&ks, &budget, rt, &expiry, &stats, i, ttl);
                i += 1;
            }
            ROOM_NS.with(|c| c.set(0));
            let t = thread_cpu_ns();
            let mut refused = 0;
            for j in 0..n {
                refused += !write(&ks, &budget, rt, &expiry, &stats, i + j, ttl) as u64;
            }
            let full = (thread_cpu_ns() - t) as f64 / n as f64;
            let room = ROOM_NS.with(|c| c.get()) as f64 / n as f64;
            println!(
                "{policy:15} CPU ns/write: empty {empty:5.0}, at the limit {full:5.0} ({room:4.0} in ensure_memory): {:.2}",
                empty / full
            );
            // Each write made room before it went in (noeviction: one write may go past).
            let (used, max) = (budget.used(&ks), rt.maxmemory.load(Relaxed));
            assert!(used <= max + 4096, "{policy}: used {used} max {max}");
            assert_eq!(refused > n / 2, policy == "noeviction", "{policy}: {refused} refused");
        }
    }

    /// The side buffers (a log's, a migration's batch) are part of
    /// `used_memory` and left out of what eviction compares with
    /// `maxmemory`, by what they held at the calibration that measured them.
    #[test]
    fn side_buffers_count_in_used_memory_but_not_for_eviction() {
        let (journal, migration) = (Arc::new(BufferGauge::default()), Arc::new(BufferGauge::default()));
        let budget = Budget::with_side_buffers(Some(journal.clone()), None, Some(migration.clone()));
        let ks = Keyspace::new(16);
        let buf = crate::sys::file::AlignedBuf::zeroed_in(8 << 20, &journal);
        // A migration's batch: allocated by its owner, which says so.
        let batch = vec![7u8; 4 << 20];
        migration.resize(0, batch.capacity());
        budget.calibrate(&ks, 0, 0);
        let side = budget.side_buffers();
        assert!(side.journal >= 8 << 20 && side.cold == 0 && side.migration == 4 << 20, "{side:?}");
        assert_eq!(budget.used(&ks) - budget.used_for_eviction(&ks), side.total());
        assert!(budget.used(&ks) >= side.total());
        drop(buf);
        migration.resize(batch.capacity(), 0);
        drop(batch);
        // Until the next calibration the figures stay those of the last one.
        assert_eq!(budget.side_buffers(), side);
        budget.calibrate(&ks, 0, 0);
        assert_eq!(budget.side_buffers(), SideBuffers::default());
        assert_eq!(budget.used(&ks), budget.used_for_eviction(&ks));
    }

    #[test]
    fn headroom_is_small() {
        assert_eq!(headroom(64 << 20), 8 << 10);
        assert_eq!(headroom(1 << 40), 64 << 10);
        assert_eq!(headroom(0), 0);
    }
}
