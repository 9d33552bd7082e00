//! Cold values: values demoted to disk at the memory limit and promoted
//! back when a command needs them.
//!
//! - Every key keeps its index entry in RAM; a cold entry holds its key,
//!   expiry and the value's address on disk instead of the value
//!   (`Entry::make_cold`). Cold entries leave the eviction policy's queues:
//!   a policy proposes only keys whose values are in RAM, so demoting one
//!   victim never makes another key's index the next victim; sampling
//!   policies look past cold entries (`DbEntries::random_slot`). When RAM
//!   holds almost nothing but indexes, cold entries go too (evicted).
//! - A command whose declared keys are cold waits (the pending path): the
//!   first waiter starts one read, later ones share it (`ColdRead`); the
//!   command runs again once it is done and promotes the value under the
//!   partition lock, if the entry is still cold at the same address — a
//!   write made meanwhile (which promoted the key itself, or replaced it) is
//!   never overwritten by an older value.
//! - A key reached without being declared (SORT's BY/GET patterns, keys a
//!   script did not declare) is read synchronously: correct, but it holds
//!   the worker for one disk read.
//! - What is on disk and how it is read is the tier's business
//!   ([`ColdTier`], implemented by `tier::cold_log`); this layer sees bytes in
//!   the DUMP value encoding of `store::dump`.

use super::disk::{ColdRead, ColdRecord, ColdState, ColdStats, ColdTier, Relocated};
use crate::store::dump;
use crate::store::entry::{ColdLoc, ValueKind};
use crate::store::journal::ChangeKind;
use crate::store::partition::Partition;
use crate::store::{Keyspace, StoreStats};
use parking_lot::Mutex;
use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

impl Keyspace {
    /// Installs the disk tier (once, at start-up).
    pub fn set_cold(&self, tier: Arc<dyn ColdTier>) {
        let _ = self.seen_once.set(Default::default());
        let _ = self.cold.set(tier);
    }

    /// Whether a read-only command's value just read from disk for the key
    /// of `hash` is served once and left there: not read from disk lately
    /// (`cold/served.rs`); remembered either way.
    pub(in crate::store) fn serves_once(&self, hash: u64) -> bool {
        self.seen_once.get().is_some_and(|s| !s.again(hash))
    }

    #[inline]
    pub fn cold(&self) -> Option<&Arc<dyn ColdTier>> {
        self.cold.get()
    }

    pub fn cold_stats(&self) -> &ColdStats {
        &self.cold_stats
    }

    /// Demotes the entry in `slot` instead of evicting it, when there is a
    /// tier and it is worth it (`keep`: whatever its use, the key may not
    /// be discarded instead).
    pub(in crate::store) fn try_demote(&self, part: &mut Partition, db: usize, slot: u32, keep: bool) -> Demotion {
        let Some(tier) = self.cold() else { return Demotion::Declined };
        let e = part.dbs[db].entry(slot);
        if e.is_cold() {
            return Demotion::Declined;
        }
        if !keep && crate::policy::hits_hint(&e.meta) != crate::policy::Hits::Many && !tier.admits_rarely_used() {
            tier.not_admitted();
            return Demotion::Declined;
        }
        let kind = ValueKind::of(e.value());
        let Some((segment, offset, len)) = ENCODE_BUF.with(|buf| {
            let mut buf = buf.borrow_mut();
            buf.clear();
            encode(e.value(), &mut buf);
            tier.demote(db, e.key(), e.expire_at(), &buf)
        }) else {
            if tier.busy() {
                return Demotion::Later;
            }
            // Full or failing: not tried again for a while.
            self.note_tier_refused();
            return Demotion::Declined;
        };
        let freed = part.demote_entry(self, db, slot, ColdLoc { segment, offset, len, kind });
        self.cold_stats.keys.fetch_add(1, Relaxed);
        self.cold_stats.demoted.fetch_add(1, Relaxed);
        self.cold_stats.demoted_bytes.fetch_add(freed as u64, Relaxed);
        Demotion::Done(freed)
    }

    /// The cleaner moves the record at `from` (segment, offset) of `key`:
    /// if the key's value is still that record, `move_to` appends a copy
    /// and the entry points to it (Moved); if there is no room, the key is
    /// evicted (Evicted) when the policy may discard it, else it stays with
    /// its record (Kept: the segment must not be recycled); None: the
    /// record is not the key's value any more (nothing to do).
    pub fn relocate_cold(
        &self,
        db: usize,
        key: &[u8],
        from: (u32, u32),
        move_to: impl FnOnce() -> Option<(u32, u32, u32)>,
    ) -> Option<Relocated> {
        let mut part = self.lock(self.partition_of_key(key));
        let hash = crate::store::hash_bytes(key);
        // The record names the database the key was in when it was demoted;
        // SWAPDB may have moved it since.
        let found =
            std::iter::once(db).chain(0..crate::store::NUM_DBS).filter(|&d| d < crate::store::NUM_DBS).find_map(|d| {
                let slot = part.dbs[d].find(hash, key)?;
                let loc = part.dbs[d].entry(slot).cold_loc().filter(|l| (l.segment, l.offset) == from)?;
                Some((d, slot, loc))
            });
        let Some((db, slot, loc)) = found else {
            return part.relocate_forgotten(self, db, key, from, move_to);
        };
        match move_to() {
            Some((segment, offset, len)) => {
                part.dbs[db].entry_mut(slot).make_cold(ColdLoc { segment, offset, len, ..loc });
                Some(Relocated::Moved)
            }
            None if !self.may_discard(part.dbs[db].entry(slot).expire_at()) => Some(Relocated::Kept),
            None => {
                self.cold_stats.evicted_cold.fetch_add(1, Relaxed);
                part.remove_entry(self, db, slot, None, ChangeKind::Evicted);
                Some(Relocated::Evicted)
            }
        }
    }

    /// The value of `e` in `store::dump`'s encoding, appended to `out`,
    /// whether it is in RAM or on disk (read now, waiting): for a pass over
    /// every key such as the journal's compaction. False when a cold value
    /// cannot be read.
    pub fn encode_entry_value(&self, e: &crate::store::Entry, out: &mut Vec<u8>) -> bool {
        match e.cold_loc() {
            None => {
                dump::encode_value(e.value(), out);
                true
            }
            Some(loc) => match self.read_record(loc) {
                Ok(rec) if rec.key == e.key() => {
                    out.extend_from_slice(dump_bytes(&rec.value));
                    true
                }
                _ => false,
            },
        }
    }

    /// The record at `loc`, read now, waiting.
    pub(in crate::store) fn read_record(&self, loc: ColdLoc) -> io::Result<ColdRecord> {
        match self.cold() {
            Some(t) => t.read_blocking(loc),
            None => Err(io::Error::other("no disk tier")),
        }
    }

    /// The records at `locs`, read now (see [`ColdTier::read_all`]).
    pub(in crate::store) fn read_records(&self, locs: &[ColdLoc]) -> Vec<io::Result<ColdRecord>> {
        match self.cold() {
            Some(t) => t.read_all(locs),
            None => locs.iter().map(|_| Err(io::Error::other("no disk tier"))).collect(),
        }
    }

    /// A cold entry is going away (deleted, expired, evicted, overwritten).
    pub(in crate::store) fn forget_cold(&self, loc: ColdLoc) {
        // Dead bytes on disk: the cleaner may make room for demotions.
        self.victims_may_have_changed();
        self.cold_stats.keys.fetch_sub(1, Relaxed);
        if let Some(t) = self.cold() {
            t.forget(loc);
        }
    }
}

/// A cold record's value: a byte of flags, then the value in
/// `store::dump`'s encoding. The flags keep what DUMP does not: a
/// collection that took its large encoding keeps it (Redis never converts
/// one back), so OBJECT ENCODING reads the same after a trip to disk.
const EXPANDED: u8 = 1;

/// The cold record's value for `v`.
/// What became of a victim's value offered to the tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::store) enum Demotion {
    /// On disk: the RAM bytes freed.
    Done(usize),
    /// No tier, not worth a write, already on disk, or the tier refused
    /// (full, failing): the policy may evict the key instead.
    Declined,
    /// The tier is busy for a moment ([`ColdTier::busy`]): the key stays.
    Later,
}

pub(in crate::store) fn encode(v: crate::store::ValueRef<'_>, out: &mut Vec<u8>) {
    let expanded = match v {
        crate::store::ValueRef::Hash(h) => !h.is_compact(),
        crate::store::ValueRef::Set(s) => !s.is_compact(),
        crate::store::ValueRef::ZSet(z) => !z.is_listpack(),
        _ => false,
    };
    out.push(if expanded { EXPANDED } else { 0 });
    dump::encode_value(v, out);
}

/// The value's DUMP encoding in a cold record's value (flags dropped).
pub(in crate::store) fn dump_bytes(bytes: &[u8]) -> &[u8] {
    bytes.get(1..).unwrap_or_default()
}

/// A cold record's value, decoded.
pub(in crate::store) fn decode(bytes: &[u8]) -> io::Result<crate::store::Value> {
    let bad = |e| io::Error::new(io::ErrorKind::InvalidData, format!("{e:?}"));
    let (&flags, dumped) = bytes.split_first().ok_or_else(|| bad(dump::DumpError::Format))?;
    let mut value = dump::decode_value(dumped).map_err(bad)?;
    if flags & EXPANDED != 0 {
        match &mut value {
            crate::store::Value::Hash(h) => h.expand_encoding(),
            crate::store::Value::Set(s) => s.expand_encoding(),
            crate::store::Value::ZSet(z) => z.expand_encoding(),
            _ => {}
        }
    }
    Ok(value)
}

thread_local! {
    static ENCODE_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The read of `loc` for a key, as the key's commands share it.
pub(in crate::store) enum SharedRead {
    /// Under way: wait for it.
    Pending(Arc<ColdRead>),
    /// Over: its result, taken by this command.
    Done(io::Result<ColdRecord>),
    /// None of `loc` (none at all, or of an older address: the key was
    /// promoted and demoted again, or moved by the cleaner, since).
    Absent,
}

impl Partition {
    /// The read of `loc` the key `id` has under way or done, if any.
    pub(in crate::store) fn shared_read(
        &mut self,
        ks: &Keyspace,
        id: &crate::store::partition::DbKey,
        loc: ColdLoc,
    ) -> SharedRead {
        let Some(read) = self.cold_reads.get(id).cloned() else { return SharedRead::Absent };
        if read.loc == loc && !read.finished() {
            ks.cold_stats.shared_reads.fetch_add(1, Relaxed);
            return SharedRead::Pending(read);
        }
        self.cold_reads.remove(id);
        match read.result.lock().take() {
            Some(result) if read.loc == loc => {
                let waited = crate::store::mono_ns().saturating_sub(read.completed_ns.load(Relaxed));
                ks.cold_stats.read_wake_latency.record(waited / 1000);
                SharedRead::Done(result)
            }
            _ => SharedRead::Absent,
        }
    }

    /// The result of a finished read of `loc` for `id`, or a read made now
    /// (the synchronous path: keys a command did not declare).
    pub(in crate::store) fn read_now(
        &mut self,
        ks: &Keyspace,
        id: &crate::store::partition::DbKey,
        loc: ColdLoc,
    ) -> io::Result<ColdRecord> {
        let shared = self.cold_reads.remove(id).filter(|r| r.loc == loc && r.finished());
        match shared.and_then(|r| r.result.lock().take()) {
            Some(result) => result,
            None => {
                ks.cold_stats.sync_reads.fetch_add(1, Relaxed);
                ks.read_record(loc)
            }
        }
    }

    /// Makes a cold key ready, or starts (or joins) its read. Partition
    /// locked; `slot` holds a live entry of `db`. With `served` (a
    /// read-only command: partition `idx`), a value read from disk is
    /// there for that command only, unless the key was read lately
    /// (`cold/served.rs`).
    pub(in crate::store) fn cold_check(
        &mut self,
        ks: &Keyspace,
        db: usize,
        slot: u32,
        stats: &StoreStats,
        served: Option<(&mut super::ServedOnce, u32)>,
    ) -> ColdState {
        let Some(loc) = self.dbs[db].entry(slot).cold_loc() else { return ColdState::Ready };
        let key: Box<[u8]> = self.dbs[db].entry(slot).key().into();
        let id = (db as u8, key);
        match self.shared_read(ks, &id, loc) {
            SharedRead::Pending(read) => return ColdState::Wait(read),
            SharedRead::Done(result) => {
                let once = served.filter(|_| ks.serves_once(crate::store::hash_bytes(&id.1)));
                match once {
                    Some((served, idx)) => {
                        if self.bring_back(ks, db, slot, loc, result, stats, false) {
                            served.entries.push(super::served::Served { part: idx, db, slot, loc, forgotten: false });
                        }
                    }
                    None => {
                        self.promote(ks, db, slot, loc, result, stats);
                    }
                }
                return ColdState::Ready;
            }
            SharedRead::Absent => {}
        }
        match self.start_cold_read(ks, id, loc) {
            Some(read) => ColdState::Wait(read),
            None => ColdState::Ready,
        }
    }

    /// Read-ahead's [`Self::cold_check`]: starts or joins the read of the
    /// cold value at `loc` (the entry in `slot`), and never promotes — a
    /// finished read waits for the key's own command.
    pub(in crate::store) fn cold_read_ahead(&mut self, ks: &Keyspace, db: usize, slot: u32, loc: ColdLoc) -> ColdState {
        let id = (db as u8, Box::<[u8]>::from(self.dbs[db].entry(slot).key()));
        if let Some(read) = self.cold_reads.get(&id)
            && read.loc == loc
        {
            return ColdState::Wait(read.clone());
        }
        match self.start_cold_read(ks, id, loc) {
            Some(read) => ColdState::Wait(read),
            None => ColdState::Ready,
        }
    }

    /// Starts the read of the record at `loc` for the key `id`, which the
    /// key's commands share until one of them takes the result.
    pub(in crate::store) fn start_cold_read(
        &mut self,
        ks: &Keyspace,
        id: crate::store::partition::DbKey,
        loc: ColdLoc,
    ) -> Option<Arc<ColdRead>> {
        let tier = ks.cold()?;
        let read = Arc::new(ColdRead {
            loc,
            result: Mutex::new(None),
            over: std::sync::atomic::AtomicBool::new(false),
            completed_ns: Default::default(),
            waiters: Default::default(),
        });
        self.cold_reads.insert(id, read.clone());
        ks.cold_stats.reads.fetch_add(1, Relaxed);
        let r = read.clone();
        tier.read_soon(
            loc,
            Box::new(move |result| {
                r.complete(result, crate::store::mono_ns());
            }),
        );
        Some(read)
    }

    /// Reads a cold key now, waiting (keys a command did not declare).
    /// Returns false when the key was lost to a read error.
    pub(in crate::store) fn cold_load_now(&mut self, ks: &Keyspace, db: usize, slot: u32, stats: &StoreStats) -> bool {
        let Some(loc) = self.dbs[db].entry(slot).cold_loc() else { return true };
        let key: Box<[u8]> = self.dbs[db].entry(slot).key().into();
        let result = self.read_now(ks, &(db as u8, key), loc);
        self.promote(ks, db, slot, loc, result, stats)
    }

    /// Puts a value read from `loc` back into RAM; a failed read loses the
    /// key (deleted, logged). False when the key is gone.
    fn promote(
        &mut self,
        ks: &Keyspace,
        db: usize,
        slot: u32,
        loc: ColdLoc,
        result: io::Result<ColdRecord>,
        stats: &StoreStats,
    ) -> bool {
        self.bring_back(ks, db, slot, loc, result, stats, true)
    }

    /// [`Self::promote`], or with `keep` false the value in RAM for one
    /// command only: the record stays the key's (not forgotten), and
    /// [`KeyAccess::end_served`] makes the entry cold at it again.
    #[allow(clippy::too_many_arguments)]
    fn bring_back(
        &mut self,
        ks: &Keyspace,
        db: usize,
        slot: u32,
        loc: ColdLoc,
        result: io::Result<ColdRecord>,
        stats: &StoreStats,
        keep: bool,
    ) -> bool {
        let key = self.dbs[db].entry(slot).key();
        let value = result.and_then(|rec| {
            if rec.key != key {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "the record holds another key"));
            }
            decode(&rec.value)
        });
        match value {
            Ok(value) => {
                let clock = ks.policy_clock();
                let d = &mut self.dbs[db];
                let before = d.entry(slot).mem() as i64;
                d.entry_mut(slot).warm_up(value);
                d.relink(slot, &clock);
                let after = d.entry(slot).mem() as i64;
                self.account(ks, after - before);
                if keep {
                    ks.cold_stats.promoted.fetch_add(1, Relaxed);
                    ks.forget_cold(loc);
                } else {
                    ks.cold_stats.served_once.fetch_add(1, Relaxed);
                }
                true
            }
            Err(e) => {
                let key = String::from_utf8_lossy(self.dbs[db].entry(slot).key()).into_owned();
                tracing::error!(db, key = %key, "cannot read a value back from the disk tier: {e}; the key is lost");
                ks.cold_stats.read_errors.fetch_add(1, Relaxed);
                self.remove_entry(ks, db, slot, None, ChangeKind::Evicted);
                StoreStats::bump(&stats.evicted, 1);
                false
            }
        }
    }

    /// Forgets the disk copy of a cold entry about to be overwritten: it
    /// becomes an empty string in RAM, back in the policy's queues.
    pub(in crate::store) fn discard_cold(&mut self, ks: &Keyspace, db: usize, slot: u32) {
        let Some(loc) = self.dbs[db].entry(slot).cold_loc() else { return };
        let clock = ks.policy_clock();
        let d = &mut self.dbs[db];
        let before = d.entry(slot).mem() as i64;
        d.entry_mut(slot).warm_up(crate::store::Value::Str(Vec::new()));
        d.relink(slot, &clock);
        let after = d.entry(slot).mem() as i64;
        self.account(ks, after - before);
        ks.forget_cold(loc);
    }

    /// Drops reads nobody waits for any more (their commands' connections
    /// went away): called now and then.
    pub fn sweep_cold_reads(&mut self) {
        if !self.cold_reads.is_empty() {
            self.cold_reads.retain(|_, r| !r.finished() || Arc::strong_count(r) > 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_tier::{HeldTier, access, demote, value};
    use super::*;

    #[test]
    fn a_read_finishing_after_a_write_never_brings_back_the_old_value() {
        let tier = Arc::new(HeldTier::default());
        let ks = Keyspace::new(4);
        ks.set_cold(tier.clone());
        let stats = StoreStats::default();
        access(&ks, &stats, b"k").set_str(b"k", b"old", 0, false);
        demote(&ks, b"k");
        assert_eq!(ks.cold_stats().keys.load(Relaxed), 1);
        // A reader waits for the disk; meanwhile a writer replaces the value.
        let wait = access(&ks, &stats, b"k").pending([&b"k"[..]]);
        assert!(wait.is_some(), "a cold key makes its reader wait");
        access(&ks, &stats, b"k").set_str(b"k", b"new", 0, false);
        tier.complete_all();
        // The reader runs again: nothing to wait for, and the new value stands.
        assert!(access(&ks, &stats, b"k").pending([&b"k"[..]]).is_none());
        assert_eq!(value(&ks, &stats, b"k"), b"new");
        // Demoted again (a new address): the old read is not used either.
        demote(&ks, b"k");
        let wait = access(&ks, &stats, b"k").pending([&b"k"[..]]);
        assert!(wait.is_some());
        tier.complete_all();
        assert!(access(&ks, &stats, b"k").pending([&b"k"[..]]).is_none());
        assert_eq!(value(&ks, &stats, b"k"), b"new");
        assert_eq!(ks.cold_stats().keys.load(Relaxed), 0);
        assert_eq!(ks.cold_stats().read_errors.load(Relaxed), 0);
    }

    /// A read-only command's value read from disk is in RAM while it runs,
    /// then its entry is cold again at the same record (nothing forgotten,
    /// nothing written); the key's next read from disk promotes it. A
    /// command that waits for another key keeps what it read.
    #[test]
    fn a_value_read_once_is_served_and_left_on_disk_and_promoted_when_read_again() {
        use crate::store::ServedOnce;
        let tier = Arc::new(HeldTier::default());
        let ks = Keyspace::new(4);
        ks.set_cold(tier.clone());
        let stats = StoreStats::default();
        access(&ks, &stats, b"k").set_str(b"k", b"value", 0, false);
        demote(&ks, b"k");
        let loc = |ks: &Keyspace| {
            let part = ks.lock(ks.partition_of_key(b"k"));
            let slot = part.dbs[0].find(crate::store::hash_bytes(b"k"), b"k").unwrap();
            part.dbs[0].entry(slot).cold_loc()
        };
        let on_disk = loc(&ks).expect("cold");
        let read_once = |ks: &Keyspace| {
            let mut served = ServedOnce::default();
            let mut a = access(ks, &stats, b"k");
            if let Some(wait) = a.pending_serving([&b"k"[..]], true, Some(&mut served)) {
                drop(a);
                tier.complete_all();
                tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(wait);
                a = access(ks, &stats, b"k");
                assert!(a.pending_serving([&b"k"[..]], true, Some(&mut served)).is_none());
            }
            let got = match a.get(b"k").unwrap().value() {
                crate::store::ValueRef::Str(s) => s.to_vec(),
                _ => panic!("a string"),
            };
            a.end_served(&mut served);
            got
        };
        assert_eq!(read_once(&ks), b"value");
        assert_eq!(loc(&ks), Some(on_disk), "cold again, at its record");
        assert_eq!(ks.cold_stats().served_once.load(Relaxed), 1);
        assert_eq!(ks.cold_stats().promoted.load(Relaxed), 0);
        assert_eq!(ks.cold_stats().keys.load(Relaxed), 1);
        assert!(tier.forgotten.lock().is_empty(), "the record is still the key's");
        // Read from disk again soon: promoted.
        assert_eq!(read_once(&ks), b"value");
        assert_eq!(loc(&ks), None, "in RAM");
        assert_eq!(ks.cold_stats().promoted.load(Relaxed), 1);
        assert_eq!(ks.cold_stats().keys.load(Relaxed), 0);
        assert_eq!(*tier.forgotten.lock(), vec![on_disk]);

        // Two keys, the second still being read: the first stays in RAM.
        for k in [&b"x"[..], b"y"] {
            access(&ks, &stats, k).set_str(k, b"1", 0, false);
            demote(&ks, k);
        }
        let mut served = ServedOnce::default();
        let mut parts: smallvec::SmallVec<[u32; 8]> =
            smallvec::smallvec![ks.partition_of_key(b"x"), ks.partition_of_key(b"y")];
        let two = |parts: &mut smallvec::SmallVec<[u32; 8]>| crate::store::KeyAccess {
            ks: &ks,
            locked: ks.lock_set(parts),
            db: 0,
            now_ms: 1,
            touch: true,
            stats: &stats,
        };
        assert!(two(&mut parts).pending_serving([&b"x"[..]], true, Some(&mut served)).is_some());
        tier.complete_all();
        let wait = two(&mut parts).pending_serving([&b"x"[..], b"y"], true, Some(&mut served));
        assert!(wait.is_some(), "y is read now");
        assert!(served.is_empty());
        let part = ks.lock(ks.partition_of_key(b"x"));
        let slot = part.dbs[0].find(crate::store::hash_bytes(b"x"), b"x").unwrap();
        assert!(!part.dbs[0].entry(slot).is_cold(), "x was promoted: not read again");
    }

    #[test]
    fn waiters_share_one_read_and_all_see_the_value() {
        let tier = Arc::new(HeldTier::default());
        let ks = Keyspace::new(4);
        ks.set_cold(tier.clone());
        let stats = StoreStats::default();
        access(&ks, &stats, b"k").set_str(b"k", &[b'v'; 500], 0, false);
        demote(&ks, b"k");
        let waits: Vec<_> = (0..5).map(|_| access(&ks, &stats, b"k").pending([&b"k"[..]]).unwrap()).collect();
        assert_eq!(tier.reads.lock().len(), 1, "one read for five waiters");
        assert_eq!(ks.cold_stats().shared_reads.load(Relaxed), 4);
        tier.complete_all();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        for w in waits {
            rt.block_on(w);
            assert!(access(&ks, &stats, b"k").pending([&b"k"[..]]).is_none());
            assert_eq!(value(&ks, &stats, b"k"), vec![b'v'; 500]);
        }
        assert_eq!(ks.cold_stats().promoted.load(Relaxed), 1);
    }

    #[test]
    fn an_undeclared_cold_key_is_read_at_once_and_a_blind_write_reads_nothing() {
        let tier = Arc::new(HeldTier::default());
        let ks = Keyspace::new(4);
        ks.set_cold(tier.clone());
        let stats = StoreStats::default();
        access(&ks, &stats, b"a").set_str(b"a", b"1", 0, false);
        access(&ks, &stats, b"b").set_str(b"b", b"2", 0, false);
        demote(&ks, b"a");
        demote(&ks, b"b");
        // No pending step (a key a command did not declare): read at once.
        assert_eq!(value(&ks, &stats, b"a"), b"1");
        assert_eq!(ks.cold_stats().sync_reads.load(Relaxed), 1);
        // DEL and SET replace without reading.
        let mut b = access(&ks, &stats, b"b");
        assert!(b.pending_for([&b"b"[..]], false).is_none());
        assert!(b.contains(b"b"));
        assert!(b.delete(b"b"));
        drop(b);
        assert_eq!(ks.cold_stats().sync_reads.load(Relaxed), 1);
        assert!(tier.reads.lock().is_empty());
        assert_eq!(ks.cold_stats().keys.load(Relaxed), 0);
    }
}
