//! One partition of the keyspace: its index for each database, expiry
//! bookkeeping, eviction metadata, WATCH versions, blocked clients and its
//! memory counter. A partition is only ever touched under its own lock.

use super::cold::keyless::KeylessTable;
use super::entry::Entry;
use super::expiry_index::ExpiryIndex;
use super::journal::{Change, ChangeKind};
use super::slab_table::{Keyed, SlabTable};
use super::{KeyAccess, Keyspace};
use crate::base::hash::hash_bytes;
use crate::base::slot::{SLOTS, key_slot};
use crate::metrics::DbFigures;
use crate::policy::{AnyPolicy, Clock, Entries, EntryState, Policy, PolicyKind};
use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// Number of logical databases (SELECT 0..15).
pub const NUM_DBS: usize = crate::config::DATABASES;

impl Keyed for Entry {
    #[inline]
    fn key(&self) -> &[u8] {
        Entry::key(self)
    }
}

/// One logical database's share of a partition.
pub struct Db {
    pub(super) table: SlabTable<Entry>,
    /// (expire_at, slot) for every key with a TTL: exact active expiry and
    /// volatile-ttl eviction without sampling.
    pub(super) expires: ExpiryIndex,
    /// The eviction policy's instance for this table: owns its queues.
    policy: AnyPolicy,
    /// Keys whose key and value are both on disk only (`cold/forget.rs`).
    pub(super) forgotten: KeylessTable,
}

/// What the policy sees of a database: its entries' states, sampling and
/// expiry order. Borrowed apart from the policy so both can be mutable.
struct DbEntries<'a> {
    table: &'a mut SlabTable<Entry>,
    expires: &'a ExpiryIndex,
}

/// Random draws a sampling policy makes past cold entries before it takes
/// one (RAM then holds little but indexes).
const COLD_SKIPS: usize = 16;

impl Entries for DbEntries<'_> {
    #[inline]
    fn state(&self, slot: u32) -> &EntryState {
        &self.table.get(slot).expect("live slot").meta
    }

    #[inline]
    fn state_mut(&mut self, slot: u32) -> &mut EntryState {
        &mut self.table.get_mut(slot).expect("live slot").meta
    }

    fn len(&self) -> usize {
        self.table.len()
    }

    fn random_slot(&self, rand: u64) -> Option<u32> {
        // Cold entries (values on disk) are no victims while warm ones are
        // around: look a few more times before settling for one.
        let mut r = rand;
        let mut found = None;
        for _ in 0..COLD_SKIPS {
            let slot = self.table.random_slot(r)?;
            if !self.table.get(slot).is_some_and(Entry::is_cold) {
                return Some(slot);
            }
            found = Some(slot);
            r = crate::base::random::splitmix64(r);
        }
        found
    }

    fn probe_slot(&self, rand: u64) -> Option<u32> {
        self.table.probe_slot(rand)
    }

    fn expire_at(&self, slot: u32) -> u64 {
        self.table.get(slot).map_or(0, Entry::expire_at)
    }

    fn soonest_expiring(&self) -> Option<u32> {
        self.expires.soonest().map(|(_, s)| s)
    }

    fn random_expiring(&self, rand: u64) -> Option<u32> {
        self.expires.random_among_soonest(self.table, rand)
    }

    fn expiring_len(&self) -> usize {
        self.expires.len()
    }

    fn size(&self, slot: u32) -> usize {
        self.table.get(slot).map_or(0, Entry::usage)
    }
}

impl Db {
    pub fn new(policy: PolicyKind, seed: u64) -> Self {
        Db {
            table: SlabTable::default(),
            expires: ExpiryIndex::default(),
            policy: AnyPolicy::with_seed(policy, seed),
            forgotten: KeylessTable::default(),
        }
    }

    /// Splits the database into its policy and the policy's view of it.
    #[inline]
    fn policy_and_entries(&mut self) -> (&mut AnyPolicy, DbEntries<'_>) {
        (&mut self.policy, DbEntries { table: &mut self.table, expires: &self.expires })
    }

    /// Keys in the slab (forgotten ones not included: see `key_count`).
    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Every key of the database, forgotten ones included (DBSIZE).
    pub fn key_count(&self) -> usize {
        self.table.len() + self.forgotten.len()
    }

    #[inline]
    pub fn find(&self, hash: u64, key: &[u8]) -> Option<u32> {
        self.table.find(hash, key)
    }

    #[inline]
    pub fn entry(&self, slot: u32) -> &Entry {
        self.table.get(slot).expect("live slot")
    }

    #[inline]
    pub(super) fn entry_mut(&mut self, slot: u32) -> &mut Entry {
        self.table.get_mut(slot).expect("live slot")
    }

    /// Inserts an entry for a key known to be absent (its `meta` already
    /// set); the policy queues it and the expiry set takes its TTL.
    pub(super) fn insert(&mut self, hash: u64, entry: Entry, clock: &Clock) -> u32 {
        let expire_at = entry.expire_at();
        let slot = self.table.insert_new(hash, entry);
        let (policy, mut entries) = self.policy_and_entries();
        policy.on_insert(&mut entries, slot, clock);
        if expire_at != 0 {
            self.expires.insert(expire_at, slot);
        }
        slot
    }

    /// Inserts a cold entry that stays out of the policy's queues.
    pub(super) fn insert_unlinked(&mut self, hash: u64, entry: Entry) -> u32 {
        debug_assert!(entry.is_cold());
        let expire_at = entry.expire_at();
        let slot = self.table.insert_new(hash, entry);
        if expire_at != 0 {
            self.expires.insert(expire_at, slot);
        }
        slot
    }

    /// Removes the entry in `slot` from the policy, expiry set and index.
    pub(super) fn remove(&mut self, slot: u32) -> Entry {
        // A cold entry left the policy when it was demoted.
        if !self.entry(slot).is_cold() {
            let (policy, mut entries) = self.policy_and_entries();
            policy.on_remove(&mut entries, slot);
        }
        let expire_at = self.entry(slot).expire_at();
        let entry = self.table.remove(slot).expect("live slot");
        if expire_at != 0 {
            self.expires.forget(expire_at, slot, &self.table);
        }
        entry
    }

    /// A demoted entry leaves the policy's queues (`cold/values.rs`).
    pub(super) fn unlink(&mut self, slot: u32) {
        let (policy, mut entries) = self.policy_and_entries();
        policy.on_remove(&mut entries, slot);
    }

    /// A promoted entry joins them again, as a new one.
    pub(super) fn relink(&mut self, slot: u32, clock: &Clock) {
        let (policy, mut entries) = self.policy_and_entries();
        policy.on_insert(&mut entries, slot, clock);
    }

    /// Counts a read (`write` false) or write access for the policy.
    #[inline]
    pub(super) fn touch(&mut self, slot: u32, clock: &Clock, write: bool) {
        let (policy, mut entries) = self.policy_and_entries();
        if write {
            policy.on_update(&mut entries, slot, clock);
        } else {
            policy.on_access(&mut entries, slot, clock);
        }
    }

    /// The policy's best victim here, as (score, slot): lower goes first.
    pub(super) fn eviction_candidate(
        &mut self,
        samples: usize,
        clock: &Clock,
        rand: &mut dyn FnMut() -> u64,
    ) -> Option<(u64, u32)> {
        let (policy, mut entries) = self.policy_and_entries();
        policy.candidate(&mut entries, samples, clock, rand)
    }

    /// Starts loading the entry `eviction_candidate` will read first if its
    /// random source starts with `rand` (see `Policy::first_look`).
    pub(super) fn prefetch_candidate(&mut self, rand: u64) {
        let (policy, entries) = self.policy_and_entries();
        if let Some(slot) = policy.first_look(&entries, rand) {
            self.table.prefetch(slot);
        }
    }

    /// Switches to another policy, which re-links every entry.
    pub(super) fn set_policy(&mut self, kind: PolicyKind, seed: u64, clock: &Clock) {
        if self.policy.kind() == kind {
            return;
        }
        self.policy = AnyPolicy::with_seed(kind, seed);
        let live: Vec<u32> = self.table.iter().map(|(slot, _)| slot).collect();
        let (policy, mut entries) = self.policy_and_entries();
        policy.rebuild(&mut entries, &mut live.into_iter(), clock);
    }

    pub fn policy_kind(&self) -> PolicyKind {
        self.policy.kind()
    }

    /// Changes a key's expiry (0 = persist), keeping the expiry set in step.
    pub(super) fn set_expire(&mut self, slot: u32, expire_at: u64) {
        let old = self.entry(slot).expire_at();
        if old == expire_at {
            return;
        }
        self.entry_mut(slot).set_expire_at(expire_at);
        if expire_at != 0 {
            self.expires.insert(expire_at, slot);
        }
        if old != 0 {
            self.expires.forget(old, slot, &self.table);
        }
    }
}

/// WATCH bookkeeping for one key: bumped on every modification.
#[derive(Default)]
pub struct WatchState {
    version: u64,
    watchers: u32,
}

/// A key in one database: (db index, key bytes).
pub type DbKey = (u8, Box<[u8]>);

/// One partition's tracked keys (CLIENT TRACKING, see `tracking.rs`): key
/// → ids of clients that read it.
pub type TrackedKeys = HashMap<Box<[u8]>, smallvec::SmallVec<[u64; 2]>>;

/// A client blocked on keys (BLPOP & co.), as the store queues it. The
/// store decides when and in which order waiters are offered a key; the
/// waiter decides whether it can take something from it.
pub trait Waiter: Send + Sync {
    /// Offers `key` (in `keys.db`), just written, to this waiter, whose
    /// partitions `keys` holds locked.
    fn serve(&self, keys: &mut KeyAccess<'_>, key: &[u8]) -> Serve;
}

/// What the queue of a ready key does after offering it to one waiter.
pub enum Serve {
    /// Remove the waiter: it was served, or is no longer waiting.
    Dequeue,
    /// The key holds a type this waiter does not want: it stays queued and
    /// the next waiter is offered the key.
    Skip,
    /// The key has nothing left to give: stop offering it.
    Stop,
}

thread_local! {
    /// Order in which keys became ready. Keys are served in that order
    /// (Redis's ready list), and a command's keys are all signalled and
    /// served by the thread running it, so a per-thread counter suffices.
    static READY_SEQ: Cell<u64> = const { Cell::new(0) };
}

pub struct Partition {
    pub(super) dbs: Box<[Db]>,
    /// Bytes accounted to keys in this partition.
    mem: i64,
    /// Keys some client WATCHes, with their modification versions.
    watched: HashMap<DbKey, WatchState>,
    /// Keys tracking clients read (CLIENT TRACKING), see `tracking.rs`.
    pub(super) tracked: TrackedKeys,
    /// Clients blocked (BLPOP & co.) on each key, in the order they blocked.
    pub(super) blocked: HashMap<DbKey, VecDeque<Arc<dyn Waiter>>>,
    /// Keys with waiters written since this partition was last served,
    /// tagged with their `READY_SEQ`.
    pub(super) ready: Vec<(u64, DbKey)>,
    /// This partition's index in the keyspace (journal records name it).
    index: u32,
    /// Sequence number of the last change journaled here.
    seq: u64,
    /// Keys per hash slot this partition owns (over all databases); slot
    /// `s` is at `s / partitions`.
    slot_keys: Box<[u32]>,
    /// Keys whose next access must first wait (see `pending`): the test
    /// stand-in for a value that is on disk only. Key → delay in ms.
    pub(super) delayed: HashMap<DbKey, u64>,
    /// Disk reads of cold values in flight or done but not yet promoted
    /// (see `cold/values.rs`).
    pub(super) cold_reads: HashMap<DbKey, Arc<super::cold::disk::ColdRead>>,
    /// Forgotten keys being read back for a SCAN (see `cold/recall.rs`).
    pub(super) recall: Option<Arc<super::cold::recall::RecallBatch>>,
}

impl Partition {
    /// An empty partition owning `slots` hash slots.
    pub fn new(index: u32, slots: usize, policy: PolicyKind) -> Self {
        Partition {
            dbs: (0..NUM_DBS).map(|db| Db::new(policy, policy_seed(index, db))).collect(),
            mem: 0,
            watched: HashMap::new(),
            tracked: Default::default(),
            blocked: HashMap::new(),
            ready: Vec::new(),
            index,
            seq: 0,
            slot_keys: vec![0; slots].into_boxed_slice(),
            delayed: HashMap::new(),
            cold_reads: HashMap::new(),
            recall: None,
        }
    }

    /// Marks `key` ready when clients are blocked on it: the command that
    /// wrote it serves them before releasing this partition
    /// (`KeyAccess::serve_ready`).
    #[inline]
    pub(super) fn signal_ready(&mut self, db: usize, key: &[u8]) {
        if self.blocked.is_empty() {
            return;
        }
        let k = (db as u8, Box::<[u8]>::from(key));
        if !self.blocked.contains_key(&k) || self.ready.iter().any(|(_, r)| *r == k) {
            return;
        }
        let seq = READY_SEQ.with(|c| {
            c.set(c.get() + 1);
            c.get()
        });
        self.ready.push((seq, k));
    }

    /// Adds this partition's keys, TTL keys and remaining TTLs per
    /// database to `out` (INFO keyspace, `strata_keys`).
    pub fn add_db_figures(&self, now_ms: u64, out: &mut [DbFigures]) {
        for (f, d) in out.iter_mut().zip(self.dbs.iter()) {
            f.keys += d.key_count() as u64;
            f.expires += (d.expires.len() + d.forgotten.expiring()) as u64;
            f.index_bytes += (d.table.overhead_bytes() + d.forgotten.bytes()) as u64;
            f.ttl_sum_ms +=
                d.expires.live_pairs(&d.table).map(|(at, _)| at.saturating_sub(now_ms) as u128).sum::<u128>();
        }
    }

    /// Keys of database `db` in this partition.
    pub fn db_len(&self, db: usize) -> usize {
        self.dbs[db].key_count()
    }

    /// Live entries of database `db`, with their slots (KEYS).
    pub fn entries(&self, db: usize) -> impl Iterator<Item = (u32, &Entry)> {
        self.dbs[db].table.iter()
    }

    /// Slots of database `db`, live or free: SCAN cursors run below it.
    pub fn slot_count(&self, db: usize) -> usize {
        self.dbs[db].table.slot_count()
    }

    /// The live entry in `slot` of database `db`, if any (SCAN).
    pub fn entry_at(&self, db: usize, slot: u32) -> Option<&Entry> {
        self.dbs[db].table.get(slot)
    }

    /// A random live entry of database `db` (RANDOMKEY).
    pub fn random_entry(&self, db: usize, rand: u64) -> Option<&Entry> {
        let table = &self.dbs[db].table;
        table.get(table.random_slot(rand)?)
    }

    /// `key`'s slot in database `db`'s slab, if it is there.
    pub fn find_slot(&self, db: usize, hash: u64, key: &[u8]) -> Option<u32> {
        self.dbs[db].find(hash, key)
    }

    /// `key`'s entry in database `db`, expired or not (MEMORY USAGE).
    pub fn find_entry(&self, db: usize, key: &[u8]) -> Option<&Entry> {
        let d = &self.dbs[db];
        d.find(hash_bytes(key), key).map(|slot| d.entry(slot))
    }

    /// Registers a WATCH of `key`; returns its modification version.
    pub fn watch(&mut self, db: usize, key: &[u8]) -> u64 {
        let w = self.watched.entry((db as u8, key.into())).or_default();
        w.watchers += 1;
        w.version
    }

    /// Drops one WATCH of `key`.
    pub fn unwatch(&mut self, db: usize, key: &[u8]) {
        let k = (db as u8, Box::<[u8]>::from(key));
        if let Some(w) = self.watched.get_mut(&k) {
            w.watchers -= 1;
            if w.watchers == 0 {
                self.watched.remove(&k);
            }
        }
    }

    /// The modification version of a watched key (None when nobody watches it).
    pub fn watch_version(&self, db: usize, key: &[u8]) -> Option<u64> {
        self.watched.get(&(db as u8, Box::<[u8]>::from(key))).map(|w| w.version)
    }

    /// Keys in hash slot `slot`, which this partition must own.
    pub fn slot_keys(&self, slot: u16) -> u32 {
        self.slot_keys[self.slot_index(slot)]
    }

    /// Writes the key count of every hash slot this partition owns into
    /// `out` (indexed by slot, `SLOTS` long): partition `p` of `n` owns the
    /// slots `p, p + n, p + 2n, ...`, at `s / n` in its own table.
    pub fn write_slot_keys(&self, out: &mut [u32]) {
        let n = SLOTS / self.slot_keys.len();
        for (i, &keys) in self.slot_keys.iter().enumerate() {
            out[i * n + self.index as usize] = keys;
        }
    }

    #[inline]
    fn slot_index(&self, slot: u16) -> usize {
        slot as usize / (SLOTS / self.slot_keys.len())
    }

    #[inline]
    fn count_key(&mut self, key: &[u8], delta: i32) {
        self.count_key_slot(key_slot(key), delta);
    }

    #[inline]
    pub(super) fn count_key_slot(&mut self, slot: u16, delta: i32) {
        let i = self.slot_index(slot);
        self.slot_keys[i] = self.slot_keys[i].wrapping_add_signed(delta);
    }

    /// Bumps the WATCH version of every watched key of `db` whose 32 hash
    /// bits `matches` says may be among keys that went without their key
    /// being known (forgotten keys flushed).
    pub(super) fn bump_watches_matching(&mut self, db: usize, matches: impl Fn(u32) -> bool) {
        for ((d, key), w) in self.watched.iter_mut() {
            if *d as usize == db && matches(super::cold::keyless::hash32(hash_bytes(key))) {
                w.version += 1;
            }
        }
    }

    // The mutation funnel. Every change to the keyspace goes through one of
    // the functions below, which settle memory, per-slot counts, WATCH and
    // the journal in one place.

    #[inline]
    fn journal(&mut self, ks: &Keyspace, db: usize, key: &[u8], kind: ChangeKind, entry: Option<&Entry>) {
        self.seq += 1;
        ks.slot_watch.note(db, key);
        if let Some(j) = ks.journal() {
            j.record(&Change { seq: self.seq, partition: self.index, db, key, kind, entry });
        }
    }

    /// Adds an entry for a key known to be absent; returns its slot.
    pub(super) fn insert_entry(&mut self, ks: &Keyspace, db: usize, hash: u64, entry: Entry, clock: &Clock) -> u32 {
        let mem = entry.mem() as i64;
        self.count_key(entry.key(), 1);
        if entry.expire_at() != 0 {
            ks.note_deadline(entry.expire_at());
        }
        let tables = self.dbs[db].table.overhead_bytes() as i64;
        let slot = self.dbs[db].insert(hash, entry, clock);
        // The tables' growth, exactly: a first key in an empty table pays
        // for its smallest tables, a doubling index for its new buckets.
        let mem = mem + self.dbs[db].table.overhead_bytes() as i64 - tables;
        ks.note_db_used(db);
        self.mem += mem;
        ks.add_mem(mem);
        // A new key: a victim for a search that found none.
        ks.victims_may_have_changed();
        self.settle_write(ks, db, slot, ChangeKind::Write);
        let key = self.dbs[db].entry(slot).key();
        ks.key_event(crate::config::keyspace_events::NEW, "new", db, key);
        slot
    }

    /// WATCH, wake-ups and the journal after a key was written.
    pub(super) fn settle_write(&mut self, ks: &Keyspace, db: usize, slot: u32, kind: ChangeKind) {
        let e = self.dbs[db].entry(slot);
        bump_watch(&mut self.watched, db, e.key());
        // Copies the key only when someone tracks it (the entry is borrowed).
        if (!self.tracked.is_empty() && self.tracked.contains_key(e.key())) || ks.is_broadcasting() {
            let key: Box<[u8]> = e.key().into();
            self.tracked_key_changed(ks, &key);
        }
        let e = self.dbs[db].entry(slot);
        // Any write offers the key to its waiters (who check its type): a
        // stream group reader must learn that its key became another type.
        if !self.blocked.is_empty() {
            let key: Box<[u8]> = e.key().into();
            self.signal_ready(db, &key);
        }
        self.seq += 1;
        ks.slot_watch.note(db, self.dbs[db].entry(slot).key());
        if let Some(j) = ks.journal() {
            let e = self.dbs[db].entry(slot);
            j.record(&Change { seq: self.seq, partition: self.index, db, key: e.key(), kind, entry: Some(e) });
        }
    }

    /// Counts `delta` more bytes held by this partition's keys.
    #[inline]
    pub(super) fn account(&mut self, ks: &Keyspace, delta: i64) {
        if delta != 0 {
            self.mem += delta;
            ks.add_mem(delta);
            if delta > 0 {
                // Something new in RAM (a key, a promoted value): a victim.
                ks.victims_may_have_changed();
            }
        }
    }

    /// Drops the value of the entry in `slot` from RAM: it is at `loc` on
    /// disk. Not a change of the key (no journal record, no WATCH bump).
    /// Returns the bytes freed.
    pub(super) fn demote_entry(&mut self, ks: &Keyspace, db: usize, slot: u32, loc: super::entry::ColdLoc) -> usize {
        let d = &mut self.dbs[db];
        d.unlink(slot);
        let before = d.entry(slot).mem();
        d.entry_mut(slot).make_cold(loc);
        let after = d.entry(slot).mem();
        let freed = before.saturating_sub(after);
        self.account(ks, after as i64 - before as i64);
        freed
    }

    /// Settles an entry whose value changed in place by `mem_delta` bytes.
    pub(super) fn settle_update(&mut self, ks: &Keyspace, db: usize, slot: u32, mem_delta: i64, kind: ChangeKind) {
        self.account(ks, mem_delta);
        self.settle_write(ks, db, slot, kind);
    }

    /// Removes the entry in `slot`; `accounted` is what it was counted as
    /// in memory (its size before the command that emptied it, if any).
    pub(super) fn remove_entry(
        &mut self,
        ks: &Keyspace,
        db: usize,
        slot: u32,
        accounted: Option<usize>,
        kind: ChangeKind,
    ) -> Entry {
        let tables = self.dbs[db].table.overhead_bytes() as i64;
        let entry = self.dbs[db].remove(slot);
        if let Some(loc) = entry.cold_loc() {
            ks.forget_cold(loc);
        }
        let shrunk = tables - self.dbs[db].table.overhead_bytes() as i64;
        let mem = accounted.unwrap_or_else(|| entry.mem()) as i64 + shrunk;
        self.mem -= mem;
        ks.add_mem(-mem);
        self.key_removed(ks, db, entry.key(), kind);
        entry
    }

    /// Per-slot counts, WATCH, tracking, waiters, the journal and keyspace
    /// events after `key` left database `db`.
    pub(super) fn key_removed(&mut self, ks: &Keyspace, db: usize, key: &[u8], kind: ChangeKind) {
        self.count_key(key, -1);
        bump_watch(&mut self.watched, db, key);
        self.tracked_key_changed(ks, key);
        // Waiters learn that the key is gone (a stream group reader fails).
        self.signal_ready(db, key);
        self.journal(ks, db, key, kind, None);
        if let Some((class, event)) = super::events::removal_event(kind) {
            ks.key_event(class, event, db, key);
        }
    }

    /// Empties database `db` of this partition (FLUSHDB, FLUSHALL);
    /// returns the keys removed. As Redis 7.0, WATCH is invalidated only for
    /// watched keys that existed.
    pub fn clear_db(&mut self, ks: &Keyspace, db: usize) -> usize {
        let n = self.dbs[db].key_count();
        if n == 0 {
            return 0;
        }
        let (_, keyless_bytes) = self.clear_forgotten(ks, db);
        self.mem -= keyless_bytes;
        ks.add_mem(-keyless_bytes);
        let fresh = Db::new(self.dbs[db].policy_kind(), policy_seed(self.index, db));
        let old = std::mem::replace(&mut self.dbs[db], fresh);
        let mut mem = old.table.overhead_bytes() as i64;
        for (_, e) in old.table.iter() {
            if let Some(loc) = e.cold_loc() {
                ks.forget_cold(loc);
            }
            mem += e.mem() as i64;
            self.count_key(e.key(), -1);
            bump_watch(&mut self.watched, db, e.key());
        }
        self.mem -= mem;
        ks.add_mem(-mem);
        let waiting: Vec<DbKey> = self.blocked.keys().filter(|(d, _)| *d as usize == db).cloned().collect();
        for (d, key) in waiting {
            self.signal_ready(d as usize, &key);
        }
        self.journal(ks, db, &[], ChangeKind::FlushDb, None);
        n
    }

    /// Swaps databases `a` and `b` of this partition (SWAPDB). WATCHers of
    /// keys that exist in either are invalidated; clients blocked on either
    /// database retry.
    pub fn swap_dbs(&mut self, ks: &Keyspace, a: usize, b: usize) {
        self.dbs.swap(a, b);
        ks.note_dbs_swapped(a, b);
        let Partition { dbs, watched, blocked, .. } = self;
        for ((d, key), w) in watched.iter_mut() {
            let d = *d as usize;
            let exists = |x: usize| {
                let hash = hash_bytes(key);
                dbs[x].find(hash, key).is_some()
                    || dbs[x].forgotten.first_candidate(super::cold::keyless::hash32(hash)).is_some()
            };
            if (d == a || d == b) && (exists(a) || exists(b)) {
                w.version += 1;
            }
        }
        let waiting: Vec<DbKey> =
            blocked.keys().filter(|(d, _)| *d as usize == a || *d as usize == b).cloned().collect();
        for (d, key) in waiting {
            self.signal_ready(d as usize, &key);
        }
        self.journal(ks, a, &[], ChangeKind::SwapDb(b), None);
    }
}

/// A seed per (partition, database), so policies' coin flips differ.
fn policy_seed(partition: u32, db: usize) -> u64 {
    ((partition as u64) << 8 | db as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
}

/// Bumps the WATCH version of `key`, if anyone watches it.
#[inline]
fn bump_watch(watched: &mut HashMap<DbKey, WatchState>, db: usize, key: &[u8]) {
    if watched.is_empty() {
        return;
    }
    // Avoids allocating a key on every write by probing with a borrowed key
    // only when watches exist at all (rare).
    if let Some(w) = watched.get_mut(&(db as u8, Box::<[u8]>::from(key))) {
        w.version += 1;
    }
}
