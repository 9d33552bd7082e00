//! Forgotten keys: cold keys whose key leaves RAM too, so that a key on
//! disk only costs a 16-byte slot of a `KeylessTable` instead of its slab
//! entry (~100 B).
//!
//! - **Forgetting.** A victim demoted at the memory limit is forgotten at
//!   once when it can be (an address and a deadline a slot can hold), and
//!   so is a cold entry drawn as a victim later. The tables of forgotten
//!   keys may take at most half of what `maxmemory` leaves the keyspace
//!   (`Keyspace::set_forget_limit`): beyond that cold entries are evicted,
//!   as before, and values in RAM keep the other half.
//! - **Finding one.** A lookup that misses the slab checks the database's
//!   table for slots with the key's 32 hash bits. Each such *candidate* is
//!   resolved by reading its record, which holds the key: the key looked
//!   for comes back warm with its value (one read, as any cold read), any
//!   other key comes back as a cold entry with its key (a "recall"). On the
//!   pending path the read is asynchronous and shared as other cold reads
//!   (`pending.rs`); keys a command did not declare are read at once.
//!   Blind writes (SET, DEL) must resolve too: a key cannot be written
//!   while an older copy of it may hide in the table.
//! - **Whole-keyspace commands** (KEYS, SCAN, RANDOMKEY) need keys: they
//!   recall a partition's forgotten keys (one read each) before walking it.
//! - **Expiry.** A slot keeps the key's deadline rounded up to the minute;
//!   the record keeps it exact and a recalled key gets it back. A key whose
//!   slot says it has certainly expired goes without a read, on lookup or
//!   in the active expiry's sweep (which skips a table before its soonest
//!   deadline); its record is read only when someone listens for the
//!   `expired` event or tracks keys. Until the minute ends a lookup reads
//!   the record, and the exact deadline decides.
//! - Nothing here is a change of a key: forgetting and recalling write no
//!   journal record, bump no WATCH and keep per-slot counts. A forgotten
//!   key that goes (the cleaner evicts its record, FLUSHDB, expiry)
//!   settles like any removed key, with the key from its record where one
//!   is needed.

use super::disk::{ColdRecord, ColdState, Relocated};
use super::keyless::{Forgotten, deadline_of, hash32};
use super::pending::PendingRead;
use super::recall::{BATCH_MIN, HELD_MAX, RecallBatch};
use super::values::{SharedRead, decode};
use crate::base::hash::hash_bytes;
use crate::base::slot::key_slot;
use crate::policy::EntryState;
use crate::store::Keyspace;
use crate::store::entry::Entry;
use crate::store::journal::ChangeKind;
use crate::store::partition::Partition;
use std::io;
use std::sync::atomic::Ordering::Relaxed;

impl Keyspace {
    /// Calls `f` with the key of every forgotten key of database `db`
    /// (KEYS), reading the disk tier's segments in order. Takes each key's
    /// partition lock briefly: call it holding none.
    /// Runs `walk` (a listing of keys in RAM and on disk) while no key is
    /// forgotten, so that none slips from one list to the other unseen.
    pub fn without_forgetting<R>(&self, walk: impl FnOnce() -> R) -> R {
        self.walks.fetch_add(1, Relaxed);
        let r = walk();
        self.walks.fetch_sub(1, Relaxed);
        r
    }

    /// Whether keys may be forgotten now.
    pub(in crate::store) fn may_forget(&self) -> bool {
        self.walks.load(Relaxed) == 0
    }

    /// The records on disk that may be forgotten keys (KEYS), read in one
    /// pass with no partition lock taken: (address, key) of each record
    /// whose deadline has not passed by `now`. Which are live forgotten keys
    /// of a database is for `Partition::is_forgotten_at` to say.
    pub fn forgotten_key_candidates(&self, now: u64) -> Vec<(crate::store::entry::ColdLoc, Vec<u8>)> {
        let mut out = Vec::new();
        if self.cold_stats.forgotten.load(Relaxed) == 0 {
            return out;
        }
        let Some(tier) = self.cold() else { return out };
        tier.scan_records(&mut |loc, key, expire_at| {
            if expire_at == 0 || expire_at > now {
                out.push((loc, key.to_vec()));
            }
        });
        out
    }

    /// The most RAM the tables of forgotten keys may take (set by the
    /// memory budget before it evicts: half of the keyspace's share).
    pub fn set_forget_limit(&self, bytes: u64) {
        if self.forget_limit.load(Relaxed) != bytes {
            self.forget_limit.store(bytes, Relaxed);
        }
    }
}

impl Partition {
    /// Forgets the key of the cold entry in `slot`: its index moves to the
    /// database's keyless table. Returns the RAM bytes freed; None when the
    /// entry cannot be forgotten (warm, a TTL, the tables' limit reached).
    pub(in crate::store) fn forget_key(&mut self, ks: &Keyspace, db: usize, slot: u32) -> Option<usize> {
        let e = self.dbs[db].entry(slot);
        let loc = e.cold_loc()?;
        let deadline = deadline_of(e.expire_at())?;
        if !Forgotten::fits(&loc) {
            return None;
        }
        if ks.cold_stats.forgotten_bytes.load(Relaxed) >= ks.forget_limit.load(Relaxed) || !ks.may_forget() {
            return None;
        }
        let hash = hash_bytes(e.key());
        let f = Forgotten { hash: hash32(hash), key_slot: key_slot(e.key()), loc, deadline };
        let d = &mut self.dbs[db];
        let (tables, keyless) = (d.table.overhead_bytes() as i64, d.forgotten.bytes() as i64);
        let entry_mem = d.remove(slot).mem() as i64;
        d.forgotten.insert(f);
        let keyless_delta = d.forgotten.bytes() as i64 - keyless;
        let delta = d.table.overhead_bytes() as i64 - tables + keyless_delta - entry_mem;
        self.account(ks, delta);
        add_signed(&ks.cold_stats.forgotten_bytes, keyless_delta);
        ks.cold_stats.forgotten.fetch_add(1, Relaxed);
        ks.cold_stats.forgets.fetch_add(1, Relaxed);
        Some((-delta).max(0) as usize)
    }

    /// Resolves every candidate for `key` now, reading their records
    /// (keys a command did not declare, blind writes). True when any was
    /// found: the key may be in the slab now.
    pub(in crate::store) fn recall_now(&mut self, ks: &Keyspace, db: usize, key: &[u8], hash: u64, now: u64) -> bool {
        let h = hash32(hash);
        let mut any = false;
        while let Some(pos) = self.dbs[db].forgotten.first_candidate(h) {
            let f = self.dbs[db].forgotten.get(pos);
            if f.expired_by(now) {
                self.expire_forgotten(ks, db, f);
                continue;
            }
            let result = self.read_now(ks, &(db as u8, Box::<[u8]>::from(key)), f.loc);
            self.recall(ks, db, pos, result, Some(key));
            any = true;
        }
        any
    }

    /// The pending path's check of a key missing from the slab: Ready when
    /// no forgotten key may be it (any candidates resolved already), or the
    /// read to wait for. Partition locked.
    /// With `served` (a read-only command; partition `idx`), the key's
    /// value is in RAM for that command only unless it was read lately
    /// (`cold/served.rs`): the key is forgotten again after it.
    pub(in crate::store) fn forgotten_check(
        &mut self,
        ks: &Keyspace,
        db: usize,
        key: &[u8],
        hash: u64,
        now: u64,
        mut served: Option<(&mut super::ServedOnce, u32)>,
    ) -> ColdState {
        let h = hash32(hash);
        loop {
            let Some(pos) = self.dbs[db].forgotten.first_candidate(h) else { return ColdState::Ready };
            let f = self.dbs[db].forgotten.get(pos);
            if f.expired_by(now) {
                self.expire_forgotten(ks, db, f);
                continue;
            }
            let id = (db as u8, Box::<[u8]>::from(key));
            match self.shared_read(ks, &id, f.loc) {
                SharedRead::Pending(read) => return ColdState::Wait(read),
                SharedRead::Done(result) => {
                    let once = served.as_mut().filter(|_| ks.serves_once(hash));
                    match once {
                        Some((served, idx)) => {
                            let loc = f.loc;
                            if let Some(slot) = self.recall_as(ks, db, pos, result, Some(key), false) {
                                served.entries.push(super::served::Served {
                                    part: *idx,
                                    db,
                                    slot,
                                    loc,
                                    forgotten: true,
                                });
                            }
                        }
                        None => {
                            self.recall(ks, db, pos, result, Some(key));
                        }
                    }
                    continue;
                }
                SharedRead::Absent => {}
            }
            return match self.start_cold_read(ks, id, f.loc) {
                Some(read) => ColdState::Wait(read),
                None => ColdState::Ready,
            };
        }
    }

    /// Brings the forgotten key at `pos` back into the slab from its
    /// record: warm with its value when it is `wanted`, else cold with its
    /// key. A record that cannot be read loses the key (logged). Returns
    /// the slot, if the key is in the slab now.
    fn recall(
        &mut self,
        ks: &Keyspace,
        db: usize,
        pos: usize,
        result: io::Result<ColdRecord>,
        wanted: Option<&[u8]>,
    ) -> Option<u32> {
        self.recall_as(ks, db, pos, result, wanted, true)
    }

    /// [`Self::recall`]; with `keep` false a wanted value is in RAM for one
    /// command only: its record stays the key's (`KeyAccess::end_served`
    /// makes the key cold and forgotten again).
    fn recall_as(
        &mut self,
        ks: &Keyspace,
        db: usize,
        pos: usize,
        result: io::Result<ColdRecord>,
        wanted: Option<&[u8]>,
        keep: bool,
    ) -> Option<u32> {
        let f = self.dbs[db].forgotten.get(pos);
        let rec = result.and_then(|rec| {
            let hash = hash_bytes(&rec.key);
            if hash32(hash) != f.hash {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "the record holds a key of another hash"));
            }
            let value = if wanted == Some(&rec.key[..]) { Some(decode(&rec.value)?) } else { None };
            Ok((rec.key, hash, value, rec.expire_at))
        });
        let keyless = self.dbs[db].forgotten.bytes() as i64;
        self.dbs[db].forgotten.remove(pos);
        let keyless_delta = self.dbs[db].forgotten.bytes() as i64 - keyless;
        add_signed(&ks.cold_stats.forgotten_bytes, keyless_delta);
        ks.cold_stats.forgotten.fetch_sub(1, Relaxed);
        match rec {
            Ok((key, hash, value, expire_at)) => {
                let clock = ks.policy_clock();
                let warm = value.is_some();
                let entry = match value {
                    Some(v) => Entry::new(&key, v, expire_at, EntryState::new(&clock)),
                    None => Entry::new_cold(&key, f.loc, expire_at, EntryState::new(&clock)),
                };
                if expire_at != 0 {
                    ks.note_deadline(expire_at);
                }
                let mem = entry.mem() as i64;
                let d = &mut self.dbs[db];
                let tables = d.table.overhead_bytes() as i64;
                let slot = if warm { d.insert(hash, entry, &clock) } else { d.insert_unlinked(hash, entry) };
                let delta = mem + d.table.overhead_bytes() as i64 - tables + keyless_delta;
                self.account(ks, delta);
                ks.note_db_used(db);
                if warm && keep {
                    ks.cold_stats.promoted.fetch_add(1, Relaxed);
                    ks.forget_cold(f.loc);
                } else if warm {
                    ks.cold_stats.served_once.fetch_add(1, Relaxed);
                } else {
                    ks.cold_stats.recalls.fetch_add(1, Relaxed);
                }
                Some(slot)
            }
            Err(e) => {
                self.account(ks, keyless_delta);
                tracing::error!(
                    db,
                    "cannot read a forgotten key's record back from the disk tier: {e}; the key is lost"
                );
                ks.cold_stats.read_errors.fetch_add(1, Relaxed);
                ks.forget_cold(f.loc);
                self.count_key_slot(f.key_slot, -1);
                None
            }
        }
    }

    /// Removes the forgotten key `f`, which has certainly expired. Its
    /// record is read for the key only when the key must be named (the
    /// `expired` event, client tracking).
    pub(in crate::store) fn expire_forgotten(&mut self, ks: &Keyspace, db: usize, f: Forgotten) {
        let t = &mut self.dbs[db].forgotten;
        let Some(pos) = t.find_loc(f.hash, f.loc.segment, f.loc.offset) else { return };
        let keyless = t.bytes() as i64;
        t.remove(pos);
        let keyless_delta = t.bytes() as i64 - keyless;
        self.account(ks, keyless_delta);
        add_signed(&ks.cold_stats.forgotten_bytes, keyless_delta);
        ks.cold_stats.forgotten.fetch_sub(1, Relaxed);
        let named = ks.key_events_on(crate::config::keyspace_events::EXPIRED)
            || !self.tracked.is_empty()
            || ks.is_broadcasting();
        let key = if named { ks.read_record(f.loc).ok().map(|r| r.key) } else { None };
        ks.forget_cold(f.loc);
        self.count_key_slot(f.key_slot, -1);
        self.bump_watches_matching(db, |h| h == f.hash);
        if let Some(key) = key.filter(|k| hash32(hash_bytes(k)) == f.hash) {
            self.tracked_key_changed(ks, &key);
            ks.key_event(crate::config::keyspace_events::EXPIRED, "expired", db, &key);
        }
    }

    /// Removes the forgotten keys of `db` that have certainly expired by
    /// `now` (the active expiry); returns how many.
    pub fn expire_forgotten_due(&mut self, ks: &Keyspace, db: usize, now: u64) -> u64 {
        if !self.dbs[db].forgotten.may_have_expired(now) {
            return 0;
        }
        let due = self.dbs[db].forgotten.expired(now);
        for &f in &due {
            self.expire_forgotten(ks, db, f);
        }
        due.len() as u64
    }

    /// Demotes every value of this partition to the disk tier and forgets
    /// every key that can be (DEBUG DEMOTE: tests run commands on keys on
    /// disk only). Returns the values demoted.
    pub fn demote_all(&mut self, ks: &Keyspace) -> usize {
        let mut n = 0;
        for db in 0..crate::store::NUM_DBS {
            let slots: Vec<u32> = self.dbs[db].table.iter().map(|(slot, _)| slot).collect();
            for slot in slots {
                if matches!(ks.try_demote(self, db, slot, true), super::values::Demotion::Done(_)) {
                    n += 1;
                }
                if self.dbs[db].entry(slot).is_cold() && ks.may_forget() {
                    // Beyond the tables' budget too: this is a test's request.
                    let limit = ks.forget_limit.swap(u64::MAX, Relaxed);
                    self.forget_key(ks, db, slot);
                    ks.forget_limit.store(limit, Relaxed);
                }
            }
        }
        n
    }

    /// Recalls every forgotten key of database `db` (KEYS, SCAN,
    /// RANDOMKEY: they need keys); returns the keys recalled.
    /// Records a batch read meanwhile (`recall_all_later`) are used; the
    /// rest are read now.
    pub fn recall_all(&mut self, ks: &Keyspace, db: usize) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        let all: Vec<Forgotten> = self.dbs[db].forgotten.iter().map(|(_, f)| f).collect();
        let mut batched = match self.recall.take() {
            Some(b) if b.db == db && b.finished() => b.take_records(),
            Some(b) if !b.finished() => {
                self.recall = Some(b); // another database's, still reading
                Default::default()
            }
            _ => Default::default(),
        };
        let mut records: Vec<Option<io::Result<ColdRecord>>> =
            all.iter().map(|f| batched.remove(&(f.loc.segment, f.loc.offset))).collect();
        let unread: Vec<usize> = (0..all.len()).filter(|&i| records[i].is_none()).collect();
        if !unread.is_empty() {
            ks.cold_stats.sync_reads.fetch_add(unread.len() as u64, Relaxed);
            let read = ks.read_records(&unread.iter().map(|&i| all[i].loc).collect::<Vec<_>>());
            for (i, r) in unread.into_iter().zip(read) {
                records[i] = Some(r);
            }
        }
        for (f, result) in all.into_iter().zip(records.into_iter().flatten()) {
            let Some(pos) = self.dbs[db].forgotten.find_loc(f.hash, f.loc.segment, f.loc.offset) else { continue };
            if let Some(slot) = self.recall(ks, db, pos, result, None) {
                keys.push(self.dbs[db].entry(slot).key().to_vec());
            }
        }
        keys
    }

    /// For a command that may wait and needs every key of `db` (SCAN):
    /// when many are forgotten, the wait for their records, read without
    /// this partition's lock (`recall.rs`), after which `recall_all` runs
    /// from memory; None when `recall_all` may run now.
    pub fn recall_all_later(&mut self, ks: &Keyspace, db: usize) -> Option<PendingRead> {
        if self.dbs[db].forgotten.len() < BATCH_MIN || ks.recall_held.load(Relaxed) > HELD_MAX {
            return None;
        }
        match &self.recall {
            Some(b) if b.finished() && b.db == db => return None,
            Some(b) if !b.finished() => return Some(b.wait()),
            _ => {}
        }
        let locs: Vec<_> = self.dbs[db].forgotten.iter().map(|(_, f)| f.loc).collect();
        ks.cold_stats.batch_reads.fetch_add(locs.len() as u64, Relaxed);
        let batch = RecallBatch::start(ks.cold()?.clone(), ks.recall_held.clone(), db, locs);
        let wait = batch.wait();
        self.recall = Some(batch);
        Some(wait)
    }

    /// Recalls one forgotten key of `db`, drawn at random, when a draw over
    /// all of the database's keys lands on one (RANDOMKEY).
    /// The key may have expired: the caller purges before it answers.
    pub fn recall_random(&mut self, ks: &Keyspace, db: usize, rand: u64) -> Option<Vec<u8>> {
        let d = &self.dbs[db];
        let total = (d.len() + d.forgotten.len()) as u64;
        if d.forgotten.is_empty() || rand % total < d.len() as u64 {
            return None;
        }
        let pos = d.forgotten.random(crate::base::random::splitmix64(rand))?;
        let loc = d.forgotten.get(pos).loc;
        ks.cold_stats.sync_reads.fetch_add(1, Relaxed);
        let result = ks.read_record(loc);
        let slot = self.recall(ks, db, pos, result, None)?;
        Some(self.dbs[db].entry(slot).key().to_vec())
    }

    /// The cleaner moved (or could not move) the record of a forgotten
    /// `key` at `from`: Moved when the slot follows it to `move_to`'s
    /// address, Evicted or Kept (the policy may not discard it: the record
    /// stays where it is) when it cannot, None when no forgotten key of any
    /// database has that record.
    pub(in crate::store) fn relocate_forgotten(
        &mut self,
        ks: &Keyspace,
        db: usize,
        key: &[u8],
        from: (u32, u32),
        move_to: impl FnOnce() -> Option<(u32, u32, u32)>,
    ) -> Option<Relocated> {
        let h = hash32(hash_bytes(key));
        let (db, pos) = std::iter::once(db)
            .chain(0..crate::store::NUM_DBS)
            .filter(|&d| d < crate::store::NUM_DBS)
            .find_map(|d| self.dbs[d].forgotten.find_loc(h, from.0, from.1).map(|p| (d, p)))?;
        if let Some((segment, offset, len)) = move_to() {
            let loc = crate::store::entry::ColdLoc { segment, offset, len, ..self.dbs[db].forgotten.get(pos).loc };
            if self.dbs[db].forgotten.set_loc(pos, loc) {
                return Some(Relocated::Moved);
            }
            // An address no slot can hold: the new record is dead at once.
            ks.forget_cold(loc);
            ks.cold_stats.keys.fetch_add(1, Relaxed);
        }
        // The key goes, if the policy may discard it (by its slot's deadline:
        // 0 only for a key without a TTL).
        if !ks.may_discard(u64::from(self.dbs[db].forgotten.get(pos).deadline)) {
            return Some(Relocated::Kept);
        }
        ks.cold_stats.evicted_cold.fetch_add(1, Relaxed);
        self.remove_forgotten(ks, db, pos, key, ChangeKind::Evicted);
        Some(Relocated::Evicted)
    }

    /// Removes the forgotten `key` at `pos` as any removed key is settled.
    fn remove_forgotten(&mut self, ks: &Keyspace, db: usize, pos: usize, key: &[u8], kind: ChangeKind) {
        let keyless = self.dbs[db].forgotten.bytes() as i64;
        let f = self.dbs[db].forgotten.remove(pos);
        let keyless_delta = self.dbs[db].forgotten.bytes() as i64 - keyless;
        self.account(ks, keyless_delta);
        add_signed(&ks.cold_stats.forgotten_bytes, keyless_delta);
        ks.cold_stats.forgotten.fetch_sub(1, Relaxed);
        ks.forget_cold(f.loc);
        self.key_removed(ks, db, key, kind);
    }

    /// Forgotten keys' records of database `db`, read now (the journal's
    /// compaction rewrites them), values in `store::dump`'s encoding.
    pub fn forgotten_records(&self, ks: &Keyspace, db: usize) -> Vec<io::Result<ColdRecord>> {
        let read = |f: Forgotten| {
            ks.read_record(f.loc).map(|r| ColdRecord { value: super::values::dump_bytes(&r.value).to_vec(), ..r })
        };
        self.dbs[db].forgotten.iter().map(|(_, f)| read(f)).collect()
    }

    /// Empties database `db`'s keyless table (FLUSHDB): the keys removed,
    /// their table's bytes; watchers of keys that may have been among them
    /// are told.
    pub(in crate::store) fn clear_forgotten(&mut self, ks: &Keyspace, db: usize) -> (usize, i64) {
        let bytes = self.dbs[db].forgotten.bytes() as i64;
        let all = self.dbs[db].forgotten.take_all();
        for f in &all {
            ks.forget_cold(f.loc);
            self.count_key_slot(f.key_slot, -1);
        }
        self.bump_watches_matching(db, |h| all.iter().any(|f| f.hash == h));
        add_signed(&ks.cold_stats.forgotten_bytes, -bytes);
        ks.cold_stats.forgotten.fetch_sub(all.len() as u64, Relaxed);
        (all.len(), bytes)
    }

    /// Brings `key` back to the slab if it is a forgotten key of `db`
    /// (commands that look a key up outside `KeyAccess`: MEMORY USAGE).
    pub fn recall_key(&mut self, ks: &Keyspace, db: usize, key: &[u8]) {
        if !self.dbs[db].forgotten.is_empty() {
            self.recall_now(ks, db, key, hash_bytes(key), crate::store::now_ms());
        }
    }

    /// Where the records of database `db`'s forgotten keys whose slot
    /// passes `wanted` are (a slot migration reads them).
    pub fn forgotten_locs(&self, db: usize, wanted: impl Fn(u16) -> bool) -> Vec<crate::store::entry::ColdLoc> {
        self.dbs[db].forgotten.iter().filter(|(_, f)| wanted(f.key_slot)).map(|(_, f)| f.loc).collect()
    }

    /// Whether `key` is a forgotten key of `db` whose record is at `loc`.
    pub fn is_forgotten_at(&self, db: usize, key: &[u8], loc: crate::store::entry::ColdLoc) -> bool {
        self.dbs[db].forgotten.find_loc(hash32(hash_bytes(key)), loc.segment, loc.offset).is_some()
    }
}

fn add_signed(counter: &std::sync::atomic::AtomicU64, delta: i64) {
    if delta >= 0 {
        counter.fetch_add(delta as u64, Relaxed);
    } else {
        let _ = counter.fetch_update(Relaxed, Relaxed, |v| Some(v.saturating_sub(delta.unsigned_abs())));
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_tier::{HeldTier, access, demote, value};
    use super::*;
    use crate::store::entry::ColdLoc;
    use crate::store::{KeyAccess, StoreStats};
    use std::sync::Arc;

    /// A keyspace with a held tier, forgetting allowed.
    fn setup() -> (Arc<HeldTier>, Keyspace, StoreStats) {
        let tier = Arc::new(HeldTier::default());
        let ks = Keyspace::new(4);
        ks.set_cold(tier.clone());
        ks.set_forget_limit(u64::MAX);
        (tier, ks, StoreStats::default())
    }

    fn forget(ks: &Keyspace, key: &[u8]) {
        demote(ks, key);
        let mut part = ks.lock(ks.partition_of_key(key));
        let slot = part.dbs[0].find(hash_bytes(key), key).unwrap();
        assert!(part.forget_key(ks, 0, slot).is_some());
        assert!(part.dbs[0].find(hash_bytes(key), key).is_none(), "the key left the slab");
    }

    fn dbsize(ks: &Keyspace) -> usize {
        (0..ks.num_partitions() as u32).map(|i| ks.lock(i).db_len(0)).sum()
    }

    #[test]
    fn a_forgotten_key_is_found_by_one_shared_read_and_comes_back_warm() {
        let (tier, ks, stats) = setup();
        access(&ks, &stats, b"k").set_str(b"k", b"value", 0, false);
        forget(&ks, b"k");
        assert_eq!(dbsize(&ks), 1, "still counted");
        assert_eq!(ks.cold_stats().forgotten.load(Relaxed), 1);
        let w1 = access(&ks, &stats, b"k").pending([&b"k"[..]]);
        let w2 = access(&ks, &stats, b"k").pending([&b"k"[..]]);
        assert!(w1.is_some() && w2.is_some(), "readers wait for the record");
        assert_eq!(tier.reads.lock().len(), 1, "one read for both");
        tier.complete_all();
        assert!(access(&ks, &stats, b"k").pending([&b"k"[..]]).is_none());
        assert_eq!(value(&ks, &stats, b"k"), b"value");
        assert_eq!(ks.cold_stats().forgotten.load(Relaxed), 0);
        assert_eq!(ks.cold_stats().keys.load(Relaxed), 0);
        assert_eq!(ks.cold_stats().forgotten_bytes.load(Relaxed), 0);
        assert_eq!(dbsize(&ks), 1);
        // A key never written finds no candidate and reads nothing.
        assert!(access(&ks, &stats, b"other").pending([&b"other"[..]]).is_none());
    }

    #[test]
    fn a_blind_write_resolves_the_forgotten_copy_first() {
        let (tier, ks, stats) = setup();
        access(&ks, &stats, b"k").set_str(b"k", b"old", 0, false);
        forget(&ks, b"k");
        // Even a command that will not read the value waits for the record.
        let wait = access(&ks, &stats, b"k").pending_for([&b"k"[..]], false);
        assert!(wait.is_some());
        tier.complete_all();
        assert!(access(&ks, &stats, b"k").pending_for([&b"k"[..]], false).is_none());
        access(&ks, &stats, b"k").set_str(b"k", b"new", 0, false);
        assert_eq!(dbsize(&ks), 1, "no hidden second copy");
        assert_eq!(value(&ks, &stats, b"k"), b"new");
        // Undeclared: DEL resolves synchronously and the key is gone for good.
        forget(&ks, b"k");
        assert!(access(&ks, &stats, b"k").delete(b"k"));
        assert_eq!(dbsize(&ks), 0);
        assert!(!access(&ks, &stats, b"k").contains(b"k"));
    }

    #[test]
    fn a_candidate_of_another_key_is_recalled_with_its_key_and_the_lookup_misses() {
        let (tier, ks, stats) = setup();
        // Two keys in one partition; b's record is planted under a's hash bits.
        // Two keys of one partition sharing their 32 hash bits (a birthday
        // search: about ten such pairs among 300,000 keys).
        let mut seen = std::collections::HashMap::new();
        let (a, b) = (0..300_000u32)
            .find_map(|i| {
                let k = format!("{{t}}{i}").into_bytes();
                seen.insert(hash32(hash_bytes(&k)), k.clone()).map(|other| (k, other))
            })
            .expect("a collision");
        let (a, b) = (&a[..], &b[..]);
        access(&ks, &stats, b).set_str(b, b"bee", 0, false);
        forget(&ks, b);
        let idx = ks.partition_of_key(b);
        let wait = access(&ks, &stats, a).pending([a]);
        assert!(wait.is_some(), "a's lookup must check the candidate");
        tier.complete_all();
        assert!(access(&ks, &stats, a).pending([a]).is_none());
        assert!(access(&ks, &stats, a).get(a).is_none(), "a does not exist");
        // b is back in the index, with its key, its value still on disk.
        let part = ks.lock(idx);
        let e = part.find_entry(0, b).expect("b recalled");
        assert!(e.is_cold());
        assert_eq!(part.db_len(0), 1);
        drop(part);
        assert_eq!(ks.cold_stats().recalls.load(Relaxed), 1);
        assert_eq!(value(&ks, &stats, b), b"bee");
    }

    #[test]
    fn whole_keyspace_walks_recall_keys_and_flush_and_cleaner_settle_them() {
        let (_tier, ks, stats) = setup();
        let keys: Vec<Vec<u8>> = (0..50).map(|i| format!("{{p}}key{i}").into_bytes()).collect();
        for k in &keys {
            access(&ks, &stats, k).set_str(k, k, 0, false);
            forget(&ks, k);
        }
        let idx = ks.partition_of_key(&keys[0]);
        assert_eq!(ks.lock(idx).db_len(0), 50);
        assert_eq!(ks.keys_in_slot(crate::base::slot::key_slot(&keys[0])), 50);
        let mut recalled = ks.lock(idx).recall_all(&ks, 0);
        recalled.sort();
        let mut want = keys.clone();
        want.sort();
        assert_eq!(recalled, want);
        assert_eq!(ks.cold_stats().forgotten.load(Relaxed), 0);
        // Forgotten again: the cleaner moves one record and evicts another.
        for k in &keys {
            let mut part = ks.lock(idx);
            let slot = part.dbs[0].find(hash_bytes(k), k).unwrap();
            assert!(part.forget_key(&ks, 0, slot).is_some());
        }
        let loc_of = |k: &[u8]| {
            let part = ks.lock(idx);
            let t = &part.dbs[0].forgotten;
            let pos = t.candidates(hash32(hash_bytes(k))).next().unwrap();
            t.get(pos).loc
        };
        let l0 = loc_of(&keys[0]);
        let moved = ks.relocate_cold(0, &keys[0], (l0.segment, l0.offset), || Some((0, 1000, l0.len)));
        assert_eq!(moved, Some(Relocated::Moved));
        assert_eq!(loc_of(&keys[0]), ColdLoc { offset: 1000, ..l0 });
        let stale = ks.relocate_cold(0, &keys[1], (l0.segment, l0.offset), || unreachable!());
        assert_eq!(stale, None, "not the key's record");
        let l1 = loc_of(&keys[1]);
        // noeviction: a key the cleaner cannot move stays, its record too.
        assert_eq!(ks.relocate_cold(0, &keys[1], (l1.segment, l1.offset), || None), Some(Relocated::Kept));
        assert_eq!(ks.lock(idx).db_len(0), 50);
        ks.set_policy(crate::policy::PolicyKind::AllKeysLru);
        assert_eq!(ks.relocate_cold(0, &keys[1], (l1.segment, l1.offset), || None), Some(Relocated::Evicted));
        assert_eq!(ks.lock(idx).db_len(0), 49);
        assert_eq!(ks.keys_in_slot(crate::base::slot::key_slot(&keys[0])), 49);
        // FLUSHDB: every forgotten key goes, counts and memory with them.
        ks.flush_mem();
        let used = ks.used_memory();
        assert_eq!(ks.lock(idx).clear_db(&ks, 0), 49);
        ks.flush_mem();
        assert!(ks.used_memory() < used);
        assert_eq!(ks.lock(idx).db_len(0), 0);
        assert_eq!(ks.keys_in_slot(crate::base::slot::key_slot(&keys[0])), 0);
        assert_eq!(ks.cold_stats().keys.load(Relaxed), 0);
        assert_eq!(ks.cold_stats().forgotten_bytes.load(Relaxed), 0);
    }

    /// A policy whose queues hold only warm entries (SIEVE) still yields a
    /// victim when RAM holds nothing but cold keys that cannot be forgotten
    /// (the index's budget is spent): no OOM while something can go.
    #[test]
    fn cold_keys_are_victims_when_nothing_warm_is_left() {
        let (_tier, ks, stats) = setup();
        ks.set_policy(crate::policy::PolicyKind::Sieve);
        ks.set_forget_limit(0);
        for i in 0..50 {
            let k = format!("k{i}").into_bytes();
            access(&ks, &stats, &k).set_str(&k, b"v", 0, false);
            demote(&ks, &k);
        }
        let v = ks.eviction_victim(5).expect("a cold key is a victim");
        assert!(v.cold);
        assert!(ks.evict(&v, &stats).is_some());
        assert_eq!(dbsize(&ks), 49);
    }

    /// The goal of the index on disk: RAM per key on disk only, measured
    /// as the keyspace accounts it, with the slab's freed slots reused by
    /// warm keys (as at the memory limit).
    #[test]
    fn a_forgotten_key_costs_at_most_32_bytes_of_ram() {
        let (_tier, ks, stats) = setup();
        let n = 20_000;
        for i in 0..n {
            let k = format!("key:{i:08}").into_bytes();
            access(&ks, &stats, &k).set_str(&k, &[b'x'; 100], 0, false);
            forget(&ks, &k);
        }
        // Warm keys take the slots the forgotten ones left.
        for i in 0..n {
            let k = format!("warm:{i:08}").into_bytes();
            access(&ks, &stats, &k).set_str(&k, &[b'x'; 100], 0, false);
        }
        ks.flush_mem();
        let with_both = ks.used_memory();
        let warm_only = Keyspace::new(4);
        for i in 0..n {
            let k = format!("warm:{i:08}").into_bytes();
            access(&warm_only, &stats, &k).set_str(&k, &[b'x'; 100], 0, false);
        }
        warm_only.flush_mem();
        let per_key = (with_both - warm_only.used_memory()) as f64 / n as f64;
        assert!(per_key <= 32.0, "{per_key:.1} bytes of RAM per key on disk only");
        // A new key whose 24 hash bits match a forgotten one's recalls that
        // one (about one insert in 3,000 here, 5,000 keys per table).
        let recalled = ks.cold_stats().recalls.load(Relaxed);
        assert!(recalled <= n as u64 / 200, "{recalled} recalled");
        assert_eq!(ks.cold_stats().forgotten.load(Relaxed) + recalled, n as u64);
    }

    #[test]
    fn a_forgotten_key_keeps_its_exact_ttl_and_expires_without_a_read() {
        let (tier, ks, stats) = setup();
        let now = crate::store::now_ms();
        let at = now + 600_000 + 7;
        access(&ks, &stats, b"t").set_str(b"t", b"v", at, false);
        forget(&ks, b"t");
        let mut figures = vec![crate::metrics::DbFigures::default(); crate::store::NUM_DBS];
        ks.lock(ks.partition_of_key(b"t")).add_db_figures(now, &mut figures);
        assert_eq!((figures[0].keys, figures[0].expires), (1, 1), "counted with its TTL");
        assert!(access(&ks, &stats, b"t").pending([&b"t"[..]]).is_some());
        tier.complete_all();
        assert!(access(&ks, &stats, b"t").pending([&b"t"[..]]).is_none());
        assert_eq!(access(&ks, &stats, b"t").get(b"t").unwrap().expire_at(), at, "the record's exact deadline");

        // Certainly expired (its minute is over): gone without a read.
        access(&ks, &stats, b"x").set_str(b"x", b"v", now + 1_000, false);
        forget(&ks, b"x");
        let reads = tier.reads.lock().len();
        let idx = ks.partition_of_key(b"x");
        let later = now + 3 * 60_000;
        KeyAccess::purge_expired(&ks, &mut ks.lock(idx), 0, later, &stats);
        assert_eq!(tier.reads.lock().len(), reads, "no read");
        assert_eq!(ks.lock(idx).db_len(0), if idx == ks.partition_of_key(b"t") { 1 } else { 0 });
        assert_eq!(ks.cold_stats().forgotten.load(Relaxed), 0);
        assert_eq!(stats.expired.load(Relaxed), 1);

        // Over the tables' limit: the key stays in the slab.
        access(&ks, &stats, b"n").set_str(b"n", b"v", 0, false);
        demote(&ks, b"n");
        ks.set_forget_limit(0);
        let idx = ks.partition_of_key(b"n");
        let slot = ks.lock(idx).dbs[0].find(hash_bytes(b"n"), b"n").unwrap();
        assert!(ks.lock(idx).forget_key(&ks, 0, slot).is_none(), "over the tables' limit");
    }
}
