//! The keyspace: every key of every database, partitioned by Redis Cluster
//! hash slot (`CRC16(key or {tag}) mod 16384`), so a slot lives in exactly
//! one partition and moving a slot (cluster mode) moves whole partitions' worth
//! of bookkeeping, never splits one.
//!
//! There is no global lock: each partition has its own short mutex, and a
//! command locks only the partitions its keys' slots map to, always in
//! ascending partition order (so multi-key commands and EXEC cannot deadlock).

mod access;
pub mod cold;
mod defrag;
pub mod dump;
pub mod encoding;
pub mod entry;
pub mod events;
mod evict;
pub mod expire;
mod expiry_index;
pub mod export;
pub mod hash;
pub mod hll;
pub mod journal;
pub mod list;
pub mod listpack;
pub mod partition;
mod rdb;
pub mod set;
pub mod slab_table;
pub mod slot_watch;
pub mod stream;
mod stream_rdb;
pub mod tracking;
pub mod value;
pub mod zset;

pub use crate::base::hash::hash_bytes;
pub use crate::base::random::fast_rand;
pub use crate::metrics::StoreStats;
pub use access::{Changed, EntryMut, KeyAccess, WriteOutcome, clear_db};
pub use cold::{
    ColdRecord, ColdStats, ColdTier, PendingRead, READ_AHEAD_KEYS, ReadAhead, Relocated, ServedOnce, WakeInbox,
    read_ahead_limit,
};
pub use defrag::DefragPass;
pub use entry::{Entry, Meta};
pub use events::KeyEvents;
pub use evict::{Evicted, Ranking, Victim};
pub use journal::{Change, ChangeKind, Journal};
pub use partition::{Db, NUM_DBS, Partition, Serve, Waiter};
pub use tracking::KeyTracker;
pub use value::{Value, ValueRef, WRONGTYPE};

use crate::base::slot::{SLOTS, key_slot};
use crate::metrics::DbFigures;
use crate::policy::{Clock, LFU_DEFAULT_DECAY_MINUTES, LFU_DEFAULT_LOG_FACTOR, PolicyKind};
pub use crate::sys::clock::{command_ns, mono_ns, now_ms};
use parking_lot::{Mutex, MutexGuard};
use smallvec::SmallVec;
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

pub struct Keyspace {
    parts: Box<[Mutex<Partition>]>,
    mask: u64,
    /// Bytes used by keys and values, summed over partitions. Updated in
    /// batches per thread (see `add_mem`), so it can lag by a few KiB per thread.
    used: OwnLine<AtomicI64>,
    /// No key's deadline is before this (unix ms; MAX: no TTL seen since the
    /// last sweep): writes at the limit skip reclaiming while it is ahead.
    /// See `expire.rs`.
    ttl_due: OwnLine<AtomicU64>,
    /// The same bound, being rebuilt by the sweep in progress.
    ttl_due_next: OwnLine<AtomicU64>,
    started: Instant,
    /// Seconds since start, refreshed by the workers' periodic tick: the
    /// LRU clock, read on every access without a system call.
    clock: AtomicU32,
    /// LFU counter growth (`lfu-log-factor`): higher = slower growth.
    lfu_log_factor: AtomicU32,
    /// Idle minutes per LFU counter decrement (`lfu-decay-time`); 0 = none.
    lfu_decay_minutes: AtomicU32,
    /// Told about every change (the durability log), if any.
    journal: Option<Arc<dyn Journal>>,
    /// The eviction policy every database's instance runs (as `u8`).
    policy: AtomicU8,
    /// Keys marked to make their next command wait (`pending`), over all
    /// partitions: lets commands skip the per-key check when none are.
    delayed_keys: AtomicUsize,
    /// Bit `db` set once database `db` has held a key (see `evict.rs`).
    dbs_used: AtomicU64,
    /// The disk tier values are demoted to, if any (`cold/`).
    cold: std::sync::OnceLock<Arc<dyn ColdTier>>,
    cold_stats: ColdStats,
    /// Keys served from disk lately without promotion (`cold/served.rs`):
    /// made with the tier.
    seen_once: std::sync::OnceLock<cold::served::SeenOnce>,
    /// The most bytes the tables of forgotten keys may take (`cold/forget.rs`).
    forget_limit: AtomicU64,
    /// KEYS walks in progress: no key is forgotten meanwhile.
    walks: AtomicU32,
    /// What searches for victims found (`evict.rs`): a generation, bumped
    /// by a change while either bit is set, a bit "a search is under way"
    /// and a bit "the last search found nothing"; and when that was found
    /// (unix ms).
    futile: AtomicU64,
    futile_at: AtomicU64,
    /// Until when (unix ms) demotions are not tried: the tier refused one
    /// (full, its writer behind). Cleared when the cleaner frees a segment.
    tier_refused_until: AtomicU64,
    /// Searches for victims made (INFO `strata_eviction_searches`).
    searches: OwnLine<AtomicU64>,
    /// Bytes the batches of recalled keys hold (`cold/recall.rs`), bounded.
    recall_held: Arc<AtomicU64>,
    /// Client-side caching: the tracker and the tracking table's totals,
    /// on lines of their own: their counters change on tracked reads, while
    /// every write reads the broadcast flag.
    tracking: OwnLine<tracking::TrackingState>,
    /// Until this unix ms (CLIENT PAUSE) expired keys read as missing but
    /// are not deleted, and the active expiry does not run, as in Redis 7.0.
    expiry_paused_until: AtomicU64,
    /// Keyspace notifications: the flags and who publishes (`events.rs`).
    events: events::EventsState,
    /// Slots being migrated: changes noted, commands held at the handover.
    slot_watch: Arc<slot_watch::SlotWatch>,
}

/// A field that writers on every core update, on cache lines of its own
/// (two: the CPU fetches lines in pairs), so that its writes do not take
/// the read-mostly fields next to it (the partitions, the policy, the
/// clock, read by every command and eviction) away from the other cores'
/// caches.
#[repr(align(128))]
struct OwnLine<T>(T);

impl<T> std::ops::Deref for OwnLine<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Batch size for folding a thread's memory deltas into the global counter:
/// small enough for an exact-feeling `maxmemory`, large enough that writers
/// on different cores rarely touch the shared cache line.
const MEM_BATCH: i64 = 16 * 1024;

thread_local! {
    static PENDING_MEM: Cell<i64> = const { Cell::new(0) };
}

impl Keyspace {
    /// `partitions` is rounded up to a power of two, at most one per slot.
    pub fn new(partitions: usize) -> Self {
        let n = partitions.clamp(1, SLOTS).next_power_of_two();
        Keyspace {
            parts: (0..n).map(|i| Mutex::new(Partition::new(i as u32, SLOTS / n, PolicyKind::NoEviction))).collect(),
            mask: (n - 1) as u64,
            used: OwnLine(AtomicI64::new(0)),
            ttl_due: OwnLine(AtomicU64::new(u64::MAX)),
            ttl_due_next: OwnLine(AtomicU64::new(u64::MAX)),
            started: Instant::now(),
            clock: AtomicU32::new(0),
            lfu_log_factor: AtomicU32::new(LFU_DEFAULT_LOG_FACTOR),
            lfu_decay_minutes: AtomicU32::new(LFU_DEFAULT_DECAY_MINUTES),
            journal: None,
            policy: AtomicU8::new(0),
            delayed_keys: AtomicUsize::new(0),
            dbs_used: AtomicU64::new(0),
            cold: std::sync::OnceLock::new(),
            cold_stats: ColdStats::default(),
            seen_once: std::sync::OnceLock::new(),
            forget_limit: AtomicU64::new(0),
            walks: AtomicU32::new(0),
            futile: AtomicU64::new(0),
            futile_at: AtomicU64::new(0),
            tier_refused_until: AtomicU64::new(0),
            searches: OwnLine(AtomicU64::new(0)),
            recall_held: Arc::new(AtomicU64::new(0)),
            tracking: OwnLine(Default::default()),
            expiry_paused_until: AtomicU64::new(0),
            events: Default::default(),
            slot_watch: Default::default(),
        }
    }

    /// A keyspace that reports every change to `journal`.
    pub fn with_journal(partitions: usize, journal: Arc<dyn Journal>) -> Self {
        Keyspace { journal: Some(journal), ..Keyspace::new(partitions) }
    }

    #[inline]
    pub(crate) fn journal(&self) -> Option<&dyn Journal> {
        self.journal.as_deref()
    }

    pub fn num_partitions(&self) -> usize {
        self.parts.len()
    }

    /// The partition that owns a hash slot: slot mod partitions, so each
    /// partition owns the slots `p, p + n, p + 2n, ...`.
    #[inline]
    pub fn partition_of_slot(&self, slot: u16) -> u32 {
        (slot as u64 & self.mask) as u32
    }

    #[inline]
    pub fn partition_of_key(&self, key: &[u8]) -> u32 {
        self.partition_of_slot(key_slot(key))
    }

    /// Key counts of every database, one partition lock at a time.
    pub fn db_figures(&self, now_ms: u64) -> [DbFigures; NUM_DBS] {
        let mut out = [DbFigures::default(); NUM_DBS];
        for i in 0..self.parts.len() as u32 {
            self.lock(i).add_db_figures(now_ms, &mut out);
        }
        out
    }

    /// Keys (over all databases) in one hash slot.
    pub fn keys_in_slot(&self, slot: u16) -> u64 {
        let part = self.lock(self.partition_of_slot(slot));
        part.slot_keys(slot) as u64
    }

    /// Keys (over all databases) of every hash slot, indexed by slot: each
    /// partition is locked once, for all the slots it owns.
    pub fn slot_key_counts(&self) -> Vec<u32> {
        let mut out = vec![0; SLOTS];
        for i in 0..self.parts.len() as u32 {
            self.lock(i).write_slot_keys(&mut out);
        }
        out
    }

    pub fn lock(&self, idx: u32) -> MutexGuard<'_, Partition> {
        self.parts[idx as usize].lock()
    }

    pub fn try_lock(&self, idx: u32) -> Option<MutexGuard<'_, Partition>> {
        self.parts[idx as usize].try_lock()
    }

    /// Locks the given partitions (any order, duplicates allowed) in
    /// ascending order.
    pub fn lock_set(&self, idx: &mut SmallVec<[u32; 8]>) -> Locked<'_> {
        idx.sort_unstable();
        idx.dedup();
        let guards = idx.iter().map(|&i| (i, self.lock(i))).collect();
        Locked { guards, all: false, deferred: SmallVec::new() }
    }

    /// Locks one partition.
    pub fn lock_one(&self, idx: u32) -> Locked<'_> {
        let mut guards = SmallVec::new();
        guards.push((idx, self.lock(idx)));
        Locked { guards, all: false, deferred: SmallVec::new() }
    }

    /// Locks every partition (commands that see the whole keyspace inside EXEC).
    pub fn lock_all(&self) -> Locked<'_> {
        let guards = (0..self.parts.len() as u32).map(|i| (i, self.lock(i))).collect();
        Locked { guards, all: true, deferred: SmallVec::new() }
    }

    /// No partitions locked: for commands that lock one partition at a time.
    pub fn lock_none(&self) -> Locked<'_> {
        Locked { guards: SmallVec::new(), all: false, deferred: SmallVec::new() }
    }

    /// Takes `waiter` off the queues of `keys` in `db` (it timed out, left,
    /// or was served through another key). Locks one partition at a time.
    pub fn forget_waiter(&self, db: usize, keys: &[Vec<u8>], waiter: &Arc<dyn Waiter>) {
        for key in keys {
            let mut part = self.lock(self.partition_of_key(key));
            let k = (db as u8, key.clone().into_boxed_slice());
            if let Some(queue) = part.blocked.get_mut(&k) {
                queue.retain(|w| !Arc::ptr_eq(w, waiter));
                if queue.is_empty() {
                    part.blocked.remove(&k);
                }
            }
        }
    }

    /// Adds a memory delta; folded into the shared counter in batches.
    #[inline]
    pub fn add_mem(&self, delta: i64) {
        PENDING_MEM.with(|p| {
            let v = p.get() + delta;
            if v.abs() >= MEM_BATCH {
                self.used.fetch_add(v, Ordering::Relaxed);
                p.set(0);
            } else {
                p.set(v);
            }
        });
    }

    /// Folds this thread's pending delta now (before reporting or deciding
    /// on eviction).
    pub fn flush_mem(&self) {
        PENDING_MEM.with(|p| {
            let v = p.replace(0);
            if v != 0 {
                self.used.fetch_add(v, Ordering::Relaxed);
            }
        });
    }

    /// Bytes used by the keyspace (keys, values, index).
    pub fn used_memory(&self) -> i64 {
        self.used.load(Ordering::Relaxed).max(0)
    }

    /// Seconds since start-up: the clock for LRU idle times (cached; at
    /// most one tick old).
    #[inline]
    pub fn clock_secs(&self) -> u32 {
        self.clock.load(Ordering::Relaxed)
    }

    pub fn lfu_log_factor(&self) -> u32 {
        self.lfu_log_factor.load(Ordering::Relaxed)
    }

    pub fn lfu_decay_minutes(&self) -> u32 {
        self.lfu_decay_minutes.load(Ordering::Relaxed)
    }

    pub fn set_lfu_log_factor(&self, factor: u32) {
        self.lfu_log_factor.store(factor, Ordering::Relaxed);
    }

    pub fn set_lfu_decay_minutes(&self, minutes: u32) {
        self.lfu_decay_minutes.store(minutes, Ordering::Relaxed);
    }

    /// An entry's LFU counter as of `clock`: decremented by one per
    /// `lfu-decay-time` minutes idle, as Redis does before reading it.
    pub fn lfu_counter(&self, meta: &Meta, clock: u32) -> u8 {
        crate::policy::lfu_decayed(meta.freq, meta.last_access, clock, self.lfu_decay_minutes())
    }

    /// The eviction policy the databases run.
    pub fn policy_kind(&self) -> PolicyKind {
        PolicyKind::from_index(self.policy.load(Ordering::Relaxed))
    }

    /// What the eviction policy's hooks need to know of time and tuning.
    #[inline]
    pub fn policy_clock(&self) -> Clock {
        Clock {
            now_secs: self.clock_secs(),
            lfu_log_factor: self.lfu_log_factor(),
            lfu_decay_minutes: self.lfu_decay_minutes(),
        }
    }

    /// Switches every database of every partition to eviction policy
    /// `kind` (start-up, CONFIG SET), one partition lock at a time. Each
    /// policy re-links the entries it finds.
    pub fn set_policy(&self, kind: PolicyKind) {
        self.policy.store(kind as u8, Ordering::Relaxed);
        self.victims_may_have_changed();
        let clock = self.policy_clock();
        for i in 0..self.parts.len() as u32 {
            let mut part = self.lock(i);
            for db in part.dbs.iter_mut() {
                db.set_policy(kind, fast_rand(), &clock);
            }
        }
    }

    /// Holds expired keys back from deletion until `until_ms` (0: no more).
    pub fn pause_expiry(&self, until_ms: u64) {
        self.expiry_paused_until.store(until_ms, Ordering::Relaxed);
    }

    #[inline]
    pub fn expiry_paused(&self, now_ms: u64) -> bool {
        now_ms < self.expiry_paused_until.load(Ordering::Relaxed)
    }

    /// Refreshes the cached LRU clock (called every 100 ms by the workers).
    pub fn tick_clock(&self) {
        self.clock.store(self.started.elapsed().as_secs() as u32, Ordering::Relaxed);
    }
}

/// The set of partitions a command holds locked.
pub struct Locked<'a> {
    guards: SmallVec<[(u32, MutexGuard<'a, Partition>); 4]>,
    all: bool,
    /// Partitions a whole-keyspace command locked one at a time and left
    /// with ready keys: served when the command ends.
    deferred: SmallVec<[u32; 4]>,
}

impl<'a> Locked<'a> {
    /// The locked partition `idx`. Panics if the command did not declare a
    /// key in it: that is a command-table bug, never a client error.
    #[inline]
    pub fn get(&mut self, idx: u32) -> &mut Partition {
        if self.all {
            return &mut self.guards[idx as usize].1;
        }
        for (i, g) in self.guards.iter_mut() {
            if *i == idx {
                return g;
            }
        }
        panic!("partition {idx} not locked by this command");
    }

    /// The one partition held, when exactly one is.
    #[inline]
    pub fn only(&self) -> Option<u32> {
        match self.guards.as_slice() {
            [(idx, _)] if !self.all => Some(*idx),
            _ => None,
        }
    }

    pub fn is_all(&self) -> bool {
        self.all
    }

    pub fn is_empty(&self) -> bool {
        self.guards.is_empty()
    }

    pub fn holds(&self, idx: u32) -> bool {
        self.all || self.guards.iter().any(|(i, _)| *i == idx)
    }

    /// Adds partition `idx` to the held set if it is free right now. Never
    /// waits, so it cannot deadlock whatever order the held locks are in.
    fn try_hold(&mut self, ks: &'a Keyspace, idx: u32) -> bool {
        if self.holds(idx) {
            return true;
        }
        match ks.try_lock(idx) {
            Some(guard) => {
                self.guards.push((idx, guard));
                true
            }
            None => false,
        }
    }

    /// Removes and returns the ready key signalled first among the held
    /// partitions, with its partition.
    fn pop_ready(&mut self) -> Option<(u32, partition::DbKey)> {
        let mut first: Option<(u64, usize, usize)> = None;
        for (g, (_, part)) in self.guards.iter().enumerate() {
            for (pos, (seq, _)) in part.ready.iter().enumerate() {
                if first.is_none_or(|(s, _, _)| *seq < s) {
                    first = Some((*seq, g, pos));
                }
            }
        }
        let (_, g, pos) = first?;
        let (idx, part) = &mut self.guards[g];
        Some((*idx, part.ready.remove(pos).1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_lives_in_one_partition_and_its_keys_are_counted() {
        let ks = Keyspace::new(64);
        let stats = StoreStats::default();
        let keys: Vec<Vec<u8>> = (0..500).map(|i| format!("{{tag{}}}:{i}", i % 7).into_bytes()).collect();
        for (i, key) in keys.iter().enumerate() {
            let mut parts: SmallVec<[u32; 8]> = smallvec::smallvec![ks.partition_of_key(key)];
            let mut k = KeyAccess {
                ks: &ks,
                locked: ks.lock_set(&mut parts),
                db: i % 3,
                now_ms: 1,
                touch: true,
                stats: &stats,
            };
            k.set(key, Value::Str(b"v".to_vec()), 0, false);
        }
        // Keys sharing a hash tag share a slot, hence a partition.
        for t in 0..7 {
            let tagged: Vec<&Vec<u8>> =
                keys.iter().filter(|k| k.starts_with(format!("{{tag{t}}}").as_bytes())).collect();
            let slot = key_slot(tagged[0]);
            assert!(tagged.iter().all(|k| key_slot(k) == slot && ks.partition_of_key(k) == ks.partition_of_slot(slot)));
            assert_eq!(ks.keys_in_slot(slot), tagged.len() as u64, "counted over every database");
        }
        let total: u64 = (0..SLOTS as u16).map(|s| ks.keys_in_slot(s)).sum();
        assert_eq!(total, 500);
        // One walk over the partitions gives every slot's count, in slot order.
        let counts = ks.slot_key_counts();
        assert_eq!(counts.len(), SLOTS);
        for slot in 0..SLOTS as u16 {
            assert_eq!(counts[slot as usize] as u64, ks.keys_in_slot(slot), "slot {slot}");
        }
        assert_eq!(counts.iter().filter(|&&n| n > 0).count(), 7, "seven hash tags, seven slots");
        for i in 0..ks.num_partitions() as u32 {
            let mut part = ks.lock(i);
            for db in 0..NUM_DBS {
                part.clear_db(&ks, db);
            }
        }
        assert_eq!((0..SLOTS as u16).map(|s| ks.keys_in_slot(s)).sum::<u64>(), 0);
    }
}
