//! `KeyAccess`: how commands read and write keys.
//!
//! It wraps the partitions a command has locked and applies, in one place,
//! everything Redis does around a key lookup: lazy expiry, hit/miss counting,
//! access-time updates for eviction, WATCH invalidation, marking keys ready
//! for blocked clients (and serving them before the locks are released),
//! deleting collections that became empty, and memory accounting.
//! Writes go through `EntryMut`, whose `Drop` settles the bookkeeping so no
//! command can forget it. A write that may turn out to change nothing (SADD
//! of a member already there, a failed INCR) goes through `update`, whose
//! closure declares what it did by its return value (`Changed`), so an
//! early return cannot leave a write that never happened journaled or
//! firing WATCH.

use super::StoreStats;
use super::entry::Entry;
use super::journal::ChangeKind;
use super::partition::{Partition, Serve, Waiter};
use super::value::Value;
use super::{Keyspace, Locked};
use crate::base::hash::hash_bytes;
use crate::policy::EntryState;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

pub struct KeyAccess<'a> {
    pub ks: &'a Keyspace,
    pub locked: Locked<'a>,
    /// The selected database.
    pub db: usize,
    /// Time of this command, in unix ms (Redis also freezes time per command).
    pub now_ms: u64,
    /// Update access metadata on lookups (false for CLIENT NO-TOUCH).
    pub touch: bool,
    pub stats: &'a StoreStats,
}

/// Located key: partition index and slot.
#[derive(Clone, Copy)]
struct Loc {
    part: u32,
    slot: u32,
}

/// `key`'s slot in the slab, after resolving any forgotten key that may be
/// it (read now: the pending path resolves declared keys beforehand).
#[inline]
fn find_or_recall(ks: &Keyspace, part: &mut Partition, db: usize, key: &[u8], hash: u64, now: u64) -> Option<u32> {
    match part.dbs[db].find(hash, key) {
        Some(slot) => Some(slot),
        None if part.dbs[db].forgotten.is_empty() => None,
        None => {
            if part.recall_now(ks, db, key, hash, now) {
                part.dbs[db].find(hash, key)
            } else {
                None
            }
        }
    }
}

impl<'a> KeyAccess<'a> {
    #[inline]
    fn part_mut(&mut self, key: &[u8]) -> (u32, &mut Partition) {
        // A command holding one partition declared all its keys in it (the
        // common case): no need to hash the key again.
        if let Some(idx) = self.locked.only() {
            debug_assert_eq!(idx, self.ks.partition_of_key(key), "key outside the command's partition");
            return (idx, self.locked.get(idx));
        }
        let idx = self.ks.partition_of_key(key);
        (idx, self.locked.get(idx))
    }

    /// Finds a live key, deleting it first if it has expired.
    fn locate(&mut self, key: &[u8]) -> Option<Loc> {
        self.locate_hashed(key, hash_bytes(key))
    }

    /// `locate` for callers that go on to insert with the same hash.
    fn locate_hashed(&mut self, key: &[u8], hash: u64) -> Option<Loc> {
        self.locate_with(key, hash, true)
    }

    /// `locate` for a caller that replaces or deletes the value without
    /// reading it: a value on disk only stays there (no read).
    fn locate_blind(&mut self, key: &[u8], hash: u64) -> Option<Loc> {
        self.locate_with(key, hash, false)
    }

    fn locate_with(&mut self, key: &[u8], hash: u64, load: bool) -> Option<Loc> {
        let db = self.db;
        let now = self.now_ms;
        let stats = self.stats;
        let ks = self.ks;
        let (part_idx, part) = self.part_mut(key);
        let slot = find_or_recall(ks, part, db, key, hash, now)?;
        let exp = part.dbs[db].entry(slot).expire_at();
        if exp != 0 && exp <= now {
            part.remove_entry(ks, db, slot, None, ChangeKind::Expired);
            StoreStats::bump(&stats.expired, 1);
            return None;
        }
        // A value on disk only that the command did not declare (or that
        // was demoted again between its read and now): read it here.
        if load && part.dbs[db].entry(slot).is_cold() && !part.cold_load_now(ks, db, slot, stats) {
            return None;
        }
        Some(Loc { part: part_idx, slot })
    }

    /// A live key, leaving an expired one in place (reads while CLIENT
    /// PAUSE holds deletions back).
    fn locate_unexpired(&mut self, key: &[u8]) -> Option<Loc> {
        let (db, now, ks) = (self.db, self.now_ms, self.ks);
        let (part_idx, part) = self.part_mut(key);
        let slot = find_or_recall(ks, part, db, key, hash_bytes(key), now)?;
        let exp = part.dbs[db].entry(slot).expire_at();
        (exp == 0 || exp > now).then_some(Loc { part: part_idx, slot })
    }

    /// Read lookup: counts a hit or miss and updates access metadata.
    pub fn get(&mut self, key: &[u8]) -> Option<&Entry> {
        self.read(key, self.touch, true)
    }

    /// Read lookup that counts hit/miss but leaves access metadata alone
    /// (TYPE, TTL, OBJECT, EXISTS do this in Redis).
    pub fn get_notouch(&mut self, key: &[u8]) -> Option<&Entry> {
        self.read(key, false, true)
    }

    /// `get_notouch` that announces no `keymiss` (OBJECT, as in Redis).
    pub fn get_notouch_quiet(&mut self, key: &[u8]) -> Option<&Entry> {
        self.read(key, false, false)
    }

    fn read(&mut self, key: &[u8], touch: bool, announce_miss: bool) -> Option<&Entry> {
        let found = if self.ks.expiry_paused(self.now_ms) { self.locate_unexpired(key) } else { self.locate(key) };
        let Some(loc) = found else {
            StoreStats::bump(&self.stats.misses, 1);
            // Redis announces a read miss where it counts one (`m`).
            if announce_miss {
                self.notify(crate::config::keyspace_events::KEY_MISS, "keymiss", key);
            }
            return None;
        };
        StoreStats::bump(&self.stats.hits, 1);
        let db = self.db;
        let clock = if touch { Some(self.ks.policy_clock()) } else { None };
        let d = &mut self.locked.get(loc.part).dbs[db];
        if let Some(clock) = clock {
            d.touch(loc.slot, &clock, false);
        }
        Some(d.entry(loc.slot))
    }

    /// Lookup that neither counts stats nor touches (internal checks).
    pub fn peek(&mut self, key: &[u8]) -> Option<&Entry> {
        let loc = self.locate(key)?;
        let db = self.db;
        Some(self.locked.get(loc.part).dbs[db].entry(loc.slot))
    }

    /// True when the key exists (after lazy expiry), without stats.
    pub fn contains(&mut self, key: &[u8]) -> bool {
        self.locate_blind(key, hash_bytes(key)).is_some()
    }

    /// Write lookup: the returned guard settles memory, WATCH and wake-ups
    /// when dropped, and always counts as a change to the key. A write that
    /// may change nothing goes through `update` instead.
    pub fn get_mut(&mut self, key: &[u8]) -> Option<EntryMut<'_>> {
        let loc = self.locate(key)?;
        Some(self.entry_mut_at(loc))
    }

    /// Runs `write` on the entry at `key` (None when the key is missing).
    /// The key counts as changed — journaled, WATCH invalidated — only when
    /// `write` returns `Changed::Yes`, or `Ok(Changed::Yes)`: an error or
    /// `Changed::No` leaves it unmodified for clients (memory and a
    /// collection it emptied are settled either way).
    pub fn update<O: WriteOutcome>(
        &mut self,
        key: &[u8],
        write: impl FnOnce(&mut EntryMut<'_>) -> O,
    ) -> Option<O::Output> {
        let mut e = self.get_mut(key)?;
        let outcome = write(&mut e);
        Some(e.settle(outcome))
    }

    /// `update` that first creates the key with `make()` when it is missing.
    /// Creating it is a change of its own (journaled at the insert); a new
    /// collection the write leaves empty is deleted again, as any emptied
    /// collection is.
    pub fn update_or_create<O: WriteOutcome>(
        &mut self,
        key: &[u8],
        make: impl FnOnce() -> Value,
        write: impl FnOnce(&mut EntryMut<'_>) -> O,
    ) -> O::Output {
        let mut e = self.get_or_insert_with(key, make);
        let outcome = write(&mut e);
        e.settle(outcome)
    }

    /// Write access to a located key, touching its access metadata.
    fn entry_mut_at(&mut self, loc: Loc) -> EntryMut<'_> {
        let clock = if self.touch { Some(self.ks.policy_clock()) } else { None };
        let db = self.db;
        let ks = self.ks;
        let part = self.locked.get(loc.part);
        if let Some(clock) = clock {
            part.dbs[db].touch(loc.slot, &clock, true);
        }
        let old_mem = part.dbs[db].entry(loc.slot).mem();
        EntryMut { ks, part, db, slot: loc.slot, old_mem, modified: true, written: false, expire_set: false }
    }

    /// Write lookup that creates the key with `make()` when it is missing
    /// (commands use `update_or_create`).
    pub(super) fn get_or_insert_with(&mut self, key: &[u8], make: impl FnOnce() -> Value) -> EntryMut<'_> {
        // Hash once for both the lookup and a possible insert.
        let hash = hash_bytes(key);
        if let Some(loc) = self.locate_hashed(key, hash) {
            return self.entry_mut_at(loc);
        }
        // New key: guard the slot the insert returned instead of looking it up again.
        let (part, slot) = self.insert_new_hashed(key, hash, make(), 0);
        let db = self.db;
        let ks = self.ks;
        let part = self.locked.get(part);
        let old_mem = part.dbs[db].entry(slot).mem();
        // The insert journaled the new key; the guard journals what the
        // command then writes into it.
        EntryMut { ks, part, db, slot, old_mem, modified: true, written: false, expire_set: false }
    }

    /// Inserts a key known to be absent (callers check with `contains`);
    /// returns its partition and slot.
    fn insert_new(&mut self, key: &[u8], value: Value, expire_at: u64) -> (u32, u32) {
        self.insert_new_hashed(key, hash_bytes(key), value, expire_at)
    }

    fn insert_new_hashed(&mut self, key: &[u8], hash: u64, value: Value, expire_at: u64) -> (u32, u32) {
        let clock = self.ks.policy_clock();
        let db = self.db;
        let ks = self.ks;
        let (part_idx, part) = self.part_mut(key);
        let entry = Entry::new(key, value, expire_at, EntryState::new(&clock));
        let slot = part.insert_entry(ks, db, hash, entry, &clock);
        (part_idx, slot)
    }

    /// Sets `key` to `value` (SET semantics: any old value and type is
    /// replaced). `expire_at` 0 = no TTL; with `keep_ttl` the old TTL stays.
    pub fn set(&mut self, key: &[u8], value: Value, expire_at: u64, keep_ttl: bool) {
        let hash = hash_bytes(key);
        if let Some(loc) = self.locate_blind(key, hash) {
            self.discard_cold(loc);
            let mut e = self.entry_mut_at(loc);
            e.replace_value(value);
            let new_exp = if keep_ttl { e.expire_at() } else { expire_at };
            e.set_expire(new_exp);
            return;
        }
        self.insert_new_hashed(key, hash, value, expire_at);
    }

    /// `set` for a string given as bytes: copied once, into the entry.
    pub fn set_str(&mut self, key: &[u8], value: &[u8], expire_at: u64, keep_ttl: bool) {
        let hash = hash_bytes(key);
        if let Some(loc) = self.locate_blind(key, hash) {
            self.discard_cold(loc);
            let mut e = self.entry_mut_at(loc);
            e.replace_string(value);
            let new_exp = if keep_ttl { e.expire_at() } else { expire_at };
            e.set_expire(new_exp);
            return;
        }
        let clock = self.ks.policy_clock();
        let db = self.db;
        let ks = self.ks;
        let (_, part) = self.part_mut(key);
        let entry = Entry::new_string(key, value, expire_at, EntryState::new(&clock));
        part.insert_entry(ks, db, hash, entry, &clock);
    }

    /// Deletes a key; true when it existed. A value on disk only is not
    /// read first.
    pub fn delete(&mut self, key: &[u8]) -> bool {
        let Some(loc) = self.locate_blind(key, hash_bytes(key)) else { return false };
        let db = self.db;
        let ks = self.ks;
        self.locked.get(loc.part).remove_entry(ks, db, loc.slot, None, ChangeKind::Delete);
        true
    }

    /// A value about to be overwritten need not come back from disk: the
    /// entry becomes an empty string in RAM (the caller replaces it).
    fn discard_cold(&mut self, loc: Loc) {
        let (ks, db) = (self.ks, self.db);
        let part = self.locked.get(loc.part);
        if part.dbs[db].entry(loc.slot).is_cold() {
            part.discard_cold(ks, db, loc.slot);
        }
    }

    /// Removes a key and returns its entry (GETDEL, RENAME, MOVE).
    pub fn take(&mut self, key: &[u8]) -> Option<Entry> {
        let loc = self.locate(key)?;
        let db = self.db;
        let ks = self.ks;
        let part = self.locked.get(loc.part);
        Some(part.remove_entry(ks, db, loc.slot, None, ChangeKind::Delete))
    }

    /// Puts back an entry taken with `take` under `key` (overwriting), with
    /// the entry's value and expiry. Used by RENAME, MOVE and COPY.
    pub fn put_entry(&mut self, key: &[u8], value: Value, expire_at: u64) {
        self.delete(key);
        self.insert_new(key, value, expire_at);
    }

    /// Queues `waiter` on each of `keys`, behind the clients already
    /// blocked there. The keys' partitions are locked, so no push can slip
    /// in between the command's check and this registration.
    pub fn block_on(&mut self, keys: &[&[u8]], waiter: &Arc<dyn Waiter>) {
        let db = self.db;
        for key in keys {
            let (_, part) = self.part_mut(key);
            let queue = part.blocked.entry((db as u8, (*key).into())).or_default();
            // A key named twice (BLPOP k k 0) queues the client once, as in Redis.
            if !queue.back().is_some_and(|w| Arc::ptr_eq(w, waiter)) {
                queue.push_back(waiter.clone());
            }
        }
    }

    /// Serves the clients blocked on keys this command made ready, in the
    /// order the keys became ready and, per key, in the order the clients
    /// blocked — while the command still holds its partitions, so no other
    /// client sees the data in between. A waiter that moves data to another
    /// key (BLMOVE) makes that key ready in turn; it is served in the same
    /// pass. Costs one empty-vector check per held partition when no key
    /// became ready.
    pub fn serve_ready(&mut self) {
        // The usual case, checked inline: no key became ready.
        if self.locked.deferred.is_empty() && self.locked.guards.iter().all(|(_, p)| p.ready.is_empty()) {
            return;
        }
        self.serve_held();
        // Whole-keyspace commands (SWAPDB) hold no partition here; serve
        // the ones they left ready one at a time.
        while let Some(idx) = self.locked.deferred.pop() {
            let held = std::mem::replace(&mut self.locked, self.ks.lock_one(idx));
            self.serve_held();
            self.locked = held;
        }
    }

    fn serve_held(&mut self) {
        while let Some((part, (db, key))) = self.locked.pop_ready() {
            let saved_db = std::mem::replace(&mut self.db, db as usize);
            self.serve_key(part, &(db, key));
            self.db = saved_db;
        }
    }

    /// Offers one ready key to its waiters, first come first served.
    fn serve_key(&mut self, part: u32, qkey: &super::partition::DbKey) {
        let mut i = 0;
        while let Some(waiter) = self.locked.get(part).blocked.get(qkey).and_then(|q| q.get(i)).cloned() {
            match waiter.serve(self, &qkey.1) {
                Serve::Skip => i += 1,
                Serve::Stop => break,
                Serve::Dequeue => {
                    let p = self.locked.get(part);
                    if let Some(queue) = p.blocked.get_mut(qkey) {
                        if queue.get(i).is_some_and(|w| Arc::ptr_eq(w, &waiter)) {
                            queue.remove(i);
                        }
                        if queue.is_empty() {
                            p.blocked.remove(qkey);
                        }
                    }
                }
            }
        }
    }

    /// Makes sure the partition of `key` is held, taking its lock only if it
    /// is free right now (a blocked BLMOVE served from a push needs its
    /// destination). False when another command holds it.
    pub fn hold_partition_of(&mut self, key: &[u8]) -> bool {
        let idx = self.ks.partition_of_key(key);
        self.locked.try_hold(self.ks, idx)
    }

    /// Runs `f` on every partition: the held guards when all are locked
    /// (inside EXEC), otherwise locking one partition at a time.
    pub fn for_each_partition(&mut self, mut f: impl FnMut(&mut Partition)) {
        if self.locked.is_all() {
            for i in 0..self.ks.num_partitions() as u32 {
                f(self.locked.get(i));
            }
        } else {
            debug_assert!(self.locked.is_empty(), "partial locks with a whole-keyspace command");
            for i in 0..self.ks.num_partitions() as u32 {
                let mut part = self.ks.lock(i);
                f(&mut part);
                if !part.ready.is_empty() {
                    self.locked.deferred.push(i);
                }
            }
        }
    }

    /// Like `for_each_partition` for one partition index (SCAN cursors).
    pub fn with_partition<R>(&mut self, idx: u32, f: impl FnOnce(&mut Partition) -> R) -> R {
        if self.locked.holds(idx) { f(self.locked.get(idx)) } else { f(&mut self.ks.lock(idx)) }
    }

    /// Removes expired keys from a database view before it is listed
    /// (KEYS, SCAN, RANDOMKEY must not return expired keys).
    pub fn purge_expired(ks: &Keyspace, part: &mut Partition, db: usize, now: u64, stats: &StoreStats) {
        let mut n = 0;
        while let Some((at, slot)) = part.dbs[db].expires.soonest() {
            if at > now {
                break;
            }
            part.remove_entry(ks, db, slot, None, ChangeKind::Expired);
            n += 1;
        }
        n += part.expire_forgotten_due(ks, db, now);
        if n > 0 {
            StoreStats::bump(&stats.expired, n);
        }
    }
}

/// Empties one database of one partition (FLUSHDB/FLUSHALL); returns keys removed.
pub fn clear_db(ks: &Keyspace, part: &mut Partition, db: usize) -> usize {
    part.clear_db(ks, db)
}

/// What a write did to its key, declared by the code that made it (the
/// closure of `KeyAccess::update`), with what it has to report: `Yes`
/// journals the key and invalidates WATCH, `No` leaves both alone.
#[must_use]
pub enum Changed<R = ()> {
    Yes(R),
    No(R),
}

impl<R> Changed<R> {
    /// `Yes(result)` when `changed`, `No(result)` otherwise.
    pub fn when(changed: bool, result: R) -> Changed<R> {
        if changed { Changed::Yes(result) } else { Changed::No(result) }
    }
}

/// What an `update` closure returns: a `Changed`, or for a write that can
/// fail a `Result` of one, whose error changes nothing.
pub trait WriteOutcome {
    /// What `update` hands back: `R`, or `Result<R, E>`.
    type Output;
    /// Whether the key changed, and the output.
    fn split(self) -> (bool, Self::Output);
}

impl<R> WriteOutcome for Changed<R> {
    type Output = R;
    fn split(self) -> (bool, R) {
        match self {
            Changed::Yes(r) => (true, r),
            Changed::No(r) => (false, r),
        }
    }
}

impl<R, E> WriteOutcome for Result<Changed<R>, E> {
    type Output = Result<R, E>;
    fn split(self) -> (bool, Result<R, E>) {
        match self {
            Ok(c) => {
                let (changed, r) = c.split();
                (changed, Ok(r))
            }
            Err(e) => (false, Err(e)),
        }
    }
}

/// Write access to one entry; settles bookkeeping on drop.
pub struct EntryMut<'a> {
    ks: &'a Keyspace,
    part: &'a mut Partition,
    db: usize,
    slot: u32,
    old_mem: usize,
    modified: bool,
    /// The entry was borrowed mutably (its value may have changed).
    written: bool,
    expire_set: bool,
}

impl EntryMut<'_> {
    /// Sets or clears (0) the TTL.
    pub fn set_expire(&mut self, expire_at: u64) {
        if expire_at != 0 {
            self.ks.note_deadline(expire_at);
        }
        self.part.dbs[self.db].set_expire(self.slot, expire_at);
        self.expire_set = true;
    }

    /// Takes what an `update` closure declared: a write that changed
    /// nothing (or failed) is not announced to WATCH or the journal.
    fn settle<O: WriteOutcome>(&mut self, outcome: O) -> O::Output {
        let (changed, output) = outcome.split();
        if !changed {
            self.modified = false;
        }
        output
    }
}

impl Deref for EntryMut<'_> {
    type Target = Entry;
    fn deref(&self) -> &Entry {
        self.part.dbs[self.db].entry(self.slot)
    }
}

impl DerefMut for EntryMut<'_> {
    fn deref_mut(&mut self) -> &mut Entry {
        self.written = true;
        self.part.dbs[self.db].entry_mut(self.slot)
    }
}

impl Drop for EntryMut<'_> {
    fn drop(&mut self) {
        let db = self.db;
        if self.written {
            self.part.dbs[db].entry_mut(self.slot).compact();
        }
        let e = self.part.dbs[db].entry(self.slot);
        if e.value().is_empty_collection() {
            // What was accounted for this key is `old_mem`, from before the write.
            self.part.remove_entry(self.ks, db, self.slot, Some(self.old_mem), ChangeKind::Delete);
            return;
        }
        let delta = e.mem() as i64 - self.old_mem as i64;
        if self.modified {
            let kind = if self.expire_set && !self.written { ChangeKind::Expire } else { ChangeKind::Write };
            self.part.settle_update(self.ks, db, self.slot, delta, kind);
        } else if delta != 0 {
            // Unchanged for clients, but e.g. a buffer was trimmed.
            self.part.account(self.ks, delta);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::store::list::ListValue;
    use parking_lot::Mutex;
    use smallvec::SmallVec;

    type Log = Arc<Mutex<Vec<(u32, Vec<u8>)>>>;

    /// A waiter that records each offer and answers as told.
    struct Probe {
        id: u32,
        answer: fn() -> Serve,
        log: Log,
    }

    impl Waiter for Probe {
        fn serve(&self, _keys: &mut KeyAccess<'_>, key: &[u8]) -> Serve {
            self.log.lock().push((self.id, key.to_vec()));
            (self.answer)()
        }
    }

    fn probe(id: u32, answer: fn() -> Serve, log: &Log) -> Arc<dyn Waiter> {
        Arc::new(Probe { id, answer, log: log.clone() })
    }

    fn access<'a>(ks: &'a Keyspace, stats: &'a StoreStats, keys: &[&[u8]]) -> KeyAccess<'a> {
        let mut parts: SmallVec<[u32; 8]> = keys.iter().map(|k| ks.partition_of_key(k)).collect();
        let locked = ks.lock_set(&mut parts);
        KeyAccess { ks, locked, db: 0, now_ms: 1, touch: true, stats }
    }

    fn rpush(keys: &mut KeyAccess<'_>, key: &[u8]) {
        let mut e = keys.get_or_insert_with(key, || Value::List(ListValue::default()));
        if let Value::List(list) = e.value_mut() {
            list.push_back(b"x".to_vec());
        }
    }

    fn queued(ks: &Keyspace, key: &[u8]) -> usize {
        ks.lock(ks.partition_of_key(key)).blocked.get(&(0, key.into())).map_or(0, |q| q.len())
    }

    /// Two keys in different partitions.
    fn keys_apart(ks: &Keyspace) -> (Vec<u8>, Vec<u8>) {
        let a = b"a".to_vec();
        let b = (0..).map(|i| format!("b{i}").into_bytes()).find(|b| ks.partition_of_key(b) != ks.partition_of_key(&a));
        (a, b.expect("some key lands elsewhere"))
    }

    #[test]
    fn waiters_are_offered_a_ready_key_first_come_first_served() {
        let (ks, stats, log) = (Keyspace::new(16), StoreStats::default(), Log::default());
        let mut keys = access(&ks, &stats, &[b"k"]);
        let waiters = [probe(1, || Serve::Dequeue, &log), probe(2, || Serve::Dequeue, &log)];
        for w in &waiters {
            keys.block_on(&[b"k", b"k"], w);
        }
        keys.serve_ready();
        assert!(log.lock().is_empty(), "blocking alone makes nothing ready");
        rpush(&mut keys, b"k");
        keys.serve_ready();
        drop(keys);
        assert_eq!(*log.lock(), [(1, b"k".to_vec()), (2, b"k".to_vec())]);
        assert_eq!(queued(&ks, b"k"), 0, "served waiters leave the queue");
    }

    #[test]
    fn skip_keeps_a_waiter_queued_and_stop_ends_the_offers() {
        let (ks, stats, log) = (Keyspace::new(16), StoreStats::default(), Log::default());
        let mut keys = access(&ks, &stats, &[b"k"]);
        for w in [probe(1, || Serve::Skip, &log), probe(2, || Serve::Stop, &log), probe(3, || Serve::Dequeue, &log)] {
            keys.block_on(&[b"k"], &w);
        }
        rpush(&mut keys, b"k");
        keys.serve_ready();
        drop(keys);
        let ids: Vec<u32> = log.lock().iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, [1, 2]);
        assert_eq!(queued(&ks, b"k"), 3);
    }

    #[test]
    fn keys_are_served_in_the_order_they_became_ready_across_partitions() {
        let (ks, stats) = (Keyspace::new(16), StoreStats::default());
        let (a, b) = keys_apart(&ks);
        for (first, second) in [(&a, &b), (&b, &a)] {
            let log = Log::default();
            let mut keys = access(&ks, &stats, &[&a, &b]);
            keys.block_on(&[&a], &probe(1, || Serve::Dequeue, &log));
            keys.block_on(&[&b], &probe(2, || Serve::Dequeue, &log));
            rpush(&mut keys, first);
            rpush(&mut keys, second);
            keys.serve_ready();
            let served: Vec<Vec<u8>> = log.lock().iter().map(|(_, k)| k.clone()).collect();
            assert_eq!(served, [first.clone(), second.clone()]);
        }
    }

    #[test]
    fn whole_keyspace_commands_serve_after_releasing_each_partition() {
        let (ks, stats, log) = (Keyspace::new(16), StoreStats::default(), Log::default());
        access(&ks, &stats, &[b"k"]).block_on(&[b"k"], &probe(1, || Serve::Dequeue, &log));
        let mut keys = KeyAccess { ks: &ks, locked: ks.lock_none(), db: 0, now_ms: 1, touch: true, stats: &stats };
        keys.for_each_partition(|part| part.signal_ready(0, b"k"));
        assert!(log.lock().is_empty(), "nothing is served while a partition is being walked");
        keys.serve_ready();
        assert_eq!(*log.lock(), [(1, b"k".to_vec())]);
    }

    #[test]
    fn a_partition_held_elsewhere_is_not_waited_for() {
        let (ks, stats) = (Keyspace::new(16), StoreStats::default());
        let (a, b) = keys_apart(&ks);
        let mut keys = access(&ks, &stats, &[&a]);
        let busy = ks.lock(ks.partition_of_key(&b));
        assert!(!keys.hold_partition_of(&b));
        drop(busy);
        assert!(keys.hold_partition_of(&b));
        assert!(keys.locked.holds(ks.partition_of_key(&b)));
        assert!(ks.try_lock(ks.partition_of_key(&b)).is_none(), "now held by the command");
    }
}
