//! The pending path: a command whose keys are not all ready to be served
//! from RAM does not run; the store hands back a future instead, the
//! connection awaits it (its worker keeps serving other connections) and
//! then runs the command again from the start. Handlers never block on I/O
//! and need not know about it.
//!
//! What makes a key wait: a value that is on disk only, read once for all
//! waiters (`values.rs`), or a test hook, `KeyAccess::delay_next_access`
//! (`DEBUG PENDING-DELAY`): the key's next command waits the given time,
//! once, as a first read of a cold value would.

use super::disk::{ColdRead, ColdState};
use crate::base::hash::hash_bytes;
use crate::store::{KeyAccess, Keyspace};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// What a waiting command awaits before it runs again.
pub type PendingRead = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Reads one connection started for requests further along its pipeline
/// (`Keyspace::read_ahead`), held until those requests have run: a held
/// read survives `sweep_cold_reads`, and what all connections hold is
/// counted against one bound.
pub struct ReadAhead {
    reads: Vec<Arc<ColdRead>>,
    bytes: u64,
    /// The keyspace's count of record bytes held this way.
    held: Arc<AtomicU64>,
}

/// Reads one connection may hold ahead of the request it waits on: deep
/// enough for a device's parallelism (an MGET of 100 keys reads 100 at
/// once), few enough that a connection cannot pin much.
pub const READ_AHEAD_KEYS: usize = 128;
/// Record bytes one connection may hold ahead.
const READ_AHEAD_BYTES: u64 = 2 << 20;
/// Record bytes every connection together may hold ahead, at most: read-ahead
/// values wait outside the keyspace's accounting until their commands
/// promote them, so this is what it may add to the node's RSS (a sixteenth
/// of `maxmemory` below that, see [`read_ahead_limit`]).
const READ_AHEAD_HELD_MAX: u64 = 16 << 20;

/// What all connections may hold ahead on a node with `maxmemory` (0: none).
pub fn read_ahead_limit(maxmemory: u64) -> u64 {
    if maxmemory == 0 { READ_AHEAD_HELD_MAX } else { (maxmemory / 16).clamp(1 << 20, READ_AHEAD_HELD_MAX) }
}

impl ReadAhead {
    pub fn new(ks: &Keyspace) -> ReadAhead {
        ReadAhead { reads: Vec::new(), bytes: 0, held: ks.cold_stats.ahead_held.clone() }
    }

    /// Reads held now.
    pub fn len(&self) -> usize {
        self.reads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.reads.is_empty()
    }

    /// Whether another read fits this connection's share and the node's
    /// (`limit` bytes).
    fn has_room(&self, limit: u64) -> bool {
        self.reads.len() < READ_AHEAD_KEYS && self.bytes < READ_AHEAD_BYTES && self.held.load(Relaxed) < limit
    }

    fn hold(&mut self, read: Arc<ColdRead>) {
        if self.reads.iter().any(|r| Arc::ptr_eq(r, &read)) {
            return;
        }
        let len = u64::from(read.loc.len);
        self.bytes += len;
        self.held.fetch_add(len, Relaxed);
        self.reads.push(read);
    }

    /// Lets go of every read (their requests ran, or the connection left).
    pub fn clear(&mut self) {
        self.reads.clear();
        self.held.fetch_sub(std::mem::take(&mut self.bytes), Relaxed);
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        self.clear();
    }
}

impl Keyspace {
    /// True when some key may make a command wait (one shared read).
    #[inline]
    pub fn may_pend(&self) -> bool {
        self.delayed_keys.load(Relaxed) != 0 || self.cold_stats.keys.load(Relaxed) != 0 || self.slot_watch.any_sealed()
    }
}

impl Keyspace {
    /// Starts (or joins) the disk reads that `keys` of database `db` will
    /// need, for requests further along a connection's pipeline than the
    /// one it waits on, so that the device serves them together instead of
    /// one per round trip. Only reads: nothing is promoted or changed here
    /// (a read's value goes into RAM when its own command runs, and only if
    /// the key still holds that record), so commands still run, and see
    /// each other's writes, in order. Stops when `ahead` is full, or all
    /// connections hold `limit` bytes ([`read_ahead_limit`]); returns the
    /// reads started.
    pub fn read_ahead<'k>(
        &self,
        db: usize,
        now_ms: u64,
        keys: impl IntoIterator<Item = &'k [u8]>,
        ahead: &mut ReadAhead,
        limit: u64,
    ) -> usize {
        let cold = self.cold_stats.keys.load(Relaxed) != 0;
        let forgotten = self.cold_stats.forgotten.load(Relaxed) != 0;
        if !cold && !forgotten {
            return 0;
        }
        let mut started = 0;
        for key in keys {
            if !ahead.has_room(limit) {
                break;
            }
            let mut part = self.lock(self.partition_of_key(key));
            let hash = hash_bytes(key);
            let state = match part.dbs[db].find(hash, key) {
                Some(slot) => {
                    let e = part.dbs[db].entry(slot);
                    let Some(loc) = e.cold_loc() else { continue };
                    if e.expire_at() != 0 && e.expire_at() <= now_ms {
                        continue;
                    }
                    part.cold_read_ahead(self, db, slot, loc)
                }
                None if forgotten && !part.dbs[db].forgotten.is_empty() => {
                    part.forgotten_check(self, db, key, hash, now_ms, None)
                }
                None => continue,
            };
            drop(part);
            if let ColdState::Wait(read) = state {
                started += 1;
                ahead.hold(read);
            }
        }
        self.cold_stats.ahead_reads.fetch_add(started as u64, Relaxed);
        started
    }
}

impl KeyAccess<'_> {
    /// Makes the next command on `key` (selected database, partition held)
    /// wait `delay_ms` before it runs: the test hook for the pending path.
    pub fn delay_next_access(&mut self, key: &[u8], delay_ms: u64) {
        let db = self.db as u8;
        let part = self.locked.get(self.ks.partition_of_key(key));
        if part.delayed.insert((db, key.into()), delay_ms).is_none() {
            self.ks.delayed_keys.fetch_add(1, Relaxed);
        }
    }

    /// The wait, if any of `keys` (in the selected database, partitions
    /// held) is not ready to be served: a test delay (taken away: after the
    /// wait the command runs) or a value on disk only (its read started or
    /// joined; after it the command runs again and promotes it).
    pub fn pending<'k>(&mut self, keys: impl IntoIterator<Item = &'k [u8]>) -> Option<PendingRead> {
        self.pending_for(keys, true)
    }

    /// [`Self::pending`] for a command that may not read its keys' values
    /// (`reads_values` false: it overwrites or deletes them): cold values are not
    /// read back for it.
    pub fn pending_for<'k>(
        &mut self,
        keys: impl IntoIterator<Item = &'k [u8]>,
        reads_values: bool,
    ) -> Option<PendingRead> {
        self.pending_serving(keys, reads_values, None)
    }

    /// [`Self::pending_for`] for a read-only command: with `served`, a
    /// value its keys wait for is in RAM for this command only (unless its
    /// key was read from disk lately): [`Self::end_served`] once it ran.
    pub fn pending_serving<'k>(
        &mut self,
        keys: impl IntoIterator<Item = &'k [u8]>,
        reads_values: bool,
        mut served: Option<&mut super::ServedOnce>,
    ) -> Option<PendingRead> {
        if !self.ks.may_pend() {
            return None;
        }
        let mut longest = None;
        let mut reads: Vec<Arc<ColdRead>> = Vec::new();
        let (ks, db, stats) = (self.ks, self.db, self.stats);
        let cold = reads_values && ks.cold_stats.keys.load(Relaxed) != 0;
        // A forgotten key may be any key missing from the slab: resolved
        // even for a blind write (an older copy must not hide there).
        let forgotten = ks.cold_stats.forgotten.load(Relaxed) != 0;
        for key in keys {
            let idx = ks.partition_of_key(key);
            if !self.locked.holds(idx) {
                continue;
            }
            // A slot at its handover to another node: the command runs
            // again once it is over (and is then sent where the slot went).
            if ks.slot_watch.is_sealed(key) {
                return Some(crate::store::slot_watch::SlotWatch::wait_unsealed(ks.slot_watch_arc(), key));
            }
            let part = self.locked.get(idx);
            if !part.delayed.is_empty()
                && let Some(ms) = part.delayed.remove(&(db as u8, key.into()))
            {
                ks.delayed_keys.fetch_sub(1, Relaxed);
                longest = longest.max(Some(ms));
            }
            if !cold && !forgotten {
                continue;
            }
            let hash = hash_bytes(key);
            let mut slot = part.dbs[db].find(hash, key);
            if slot.is_none() && forgotten && !part.dbs[db].forgotten.is_empty() {
                match part.forgotten_check(ks, db, key, hash, self.now_ms, served.as_deref_mut().map(|s| (s, idx))) {
                    ColdState::Wait(read) => {
                        if !reads.iter().any(|r| Arc::ptr_eq(r, &read)) {
                            reads.push(read);
                        }
                        continue;
                    }
                    ColdState::Ready => slot = part.dbs[db].find(hash, key),
                }
            }
            if cold && let Some(slot) = slot {
                let exp = part.dbs[db].entry(slot).expire_at();
                if (exp == 0 || exp > self.now_ms)
                    && let ColdState::Wait(read) =
                        part.cold_check(ks, db, slot, stats, served.as_deref_mut().map(|s| (s, idx)))
                    && !reads.iter().any(|r| Arc::ptr_eq(r, &read))
                {
                    reads.push(read);
                }
            }
        }
        if longest.is_none() && reads.is_empty() {
            return None;
        }
        let delay = longest.map(Duration::from_millis);
        self.end_served_early(served);
        Some(Box::pin(async move {
            if let Some(d) = delay {
                tokio::time::sleep(d).await;
            }
            for r in reads {
                r.wait().await;
            }
        }))
    }

    /// The command did not run (it waits for another key): what
    /// `pending_serving` brought into RAM for it stays there (promoted), or
    /// it would be read again when the command runs again, and two keys
    /// could take turns at that for good.
    fn end_served_early(&mut self, served: Option<&mut super::ServedOnce>) {
        let Some(served) = served else { return };
        let stats = &self.ks.cold_stats;
        for super::served::Served { loc, .. } in served.entries.drain(..) {
            stats.served_once.fetch_sub(1, Relaxed);
            stats.promoted.fetch_add(1, Relaxed);
            self.ks.forget_cold(loc);
        }
    }

    /// After the read-only command for which [`Self::pending_serving`]
    /// brought values into RAM: each entry is cold again at its record
    /// (partitions still held, so nothing else saw it warm).
    pub fn end_served(&mut self, served: &mut super::ServedOnce) {
        let ks = self.ks;
        for super::served::Served { part: idx, db, slot, loc, forgotten } in served.entries.drain(..) {
            let part = self.locked.get(idx);
            match part.dbs[db].table.get(slot) {
                Some(e) if !e.is_cold() => {
                    part.demote_entry(ks, db, slot, loc);
                    if forgotten {
                        part.forget_key(ks, db, slot);
                    }
                }
                // Not for a read-only command; if it happened, the record
                // is nobody's any more.
                _ => ks.forget_cold(loc),
            }
        }
    }
}
