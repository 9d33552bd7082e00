//! Reading keys out for a slot migration (`cluster::migration`): names
//! first (one walk of a partition under its lock), then each key's current
//! state as a DUMP payload. A value on disk only is read from disk outside
//! the partition's lock and is never promoted into RAM: a migration of cold
//! slots does not grow the source's memory. Keys whose very name is only on
//! disk (forgotten keys) are found by their slot in the keyless table.

use super::Keyspace;
use super::cold::values::dump_bytes;
use super::dump;
use super::entry::ColdLoc;
use crate::base::slot::{SlotSet, key_slot};

/// Where a partition's keys of the migrating slots are.
#[derive(Default)]
pub struct Names {
    /// Keys in the index.
    pub indexed: Vec<Box<[u8]>>,
    /// Records of keys known by their slot only (forgotten).
    pub forgotten: Vec<ColdLoc>,
}

/// A key's state for the target.
pub enum Exported {
    /// A DUMP payload and the deadline (unix ms, 0: none).
    Value { payload: Vec<u8>, expire_at: u64 },
    /// The key does not exist (or has expired).
    Missing,
}

impl Keyspace {
    /// The keys of database 0 in partition `idx` whose slot is in `slots`.
    pub fn export_names(&self, idx: u32, slots: &SlotSet) -> Names {
        let p = self.lock(idx);
        let mut names = Names::default();
        for (_, e) in p.entries(0) {
            if slots.contains(key_slot(e.key())) {
                names.indexed.push(e.key().into());
            }
        }
        names.forgotten = p.forgotten_locs(0, |slot| slots.contains(slot));
        names
    }

    /// `key`'s current state (database 0).
    pub fn export_key(&self, key: &[u8], now_ms: u64) -> Exported {
        let idx = self.partition_of_key(key);
        // A value on disk is read without the lock, then checked again
        // under it: the key may have been written meanwhile.
        for _ in 0..8 {
            let loc = {
                let mut p = self.lock(idx);
                p.recall_key(self, 0, key);
                let Some(e) = p.find_entry(0, key) else { return Exported::Missing };
                let expire_at = e.expire_at();
                if expire_at != 0 && expire_at <= now_ms {
                    return Exported::Missing;
                }
                match e.cold_loc() {
                    Some(loc) => (loc, expire_at),
                    _ => {
                        let mut payload = Vec::new();
                        if !self.encode_entry_value(e, &mut payload) {
                            return Exported::Missing;
                        }
                        dump::seal(&mut payload);
                        return Exported::Value { payload, expire_at };
                    }
                }
            };
            if let Ok(rec) = self.read_record(loc.0)
                && rec.key == key
            {
                let p = self.lock(idx);
                if p.find_entry(0, key).is_some_and(|e| e.cold_loc() == Some(loc.0) && e.expire_at() == loc.1) {
                    let mut payload = dump_bytes(&rec.value).to_vec();
                    dump::seal(&mut payload);
                    return Exported::Value { payload, expire_at: loc.1 };
                }
            }
        }
        // Written over and over while read: read it under the lock.
        let p = self.lock(idx);
        match p.find_entry(0, key) {
            Some(e) if e.expire_at() == 0 || e.expire_at() > now_ms => {
                let mut payload = Vec::new();
                if !self.encode_entry_value(e, &mut payload) {
                    return Exported::Missing;
                }
                dump::seal(&mut payload);
                Exported::Value { payload, expire_at: e.expire_at() }
            }
            _ => Exported::Missing,
        }
    }

    /// The key whose record is at `loc` (a forgotten key's), and its
    /// current state, when its slot is in `slots`. None: the record could
    /// not be read or is another slot's (the cleaner moved it and its
    /// segment was reused); the caller looks for the key's new place.
    pub fn export_forgotten(&self, loc: ColdLoc, slots: &SlotSet, now_ms: u64) -> Option<(Vec<u8>, Exported)> {
        let rec = self.read_record(loc).ok()?;
        if !slots.contains(key_slot(&rec.key)) {
            return None;
        }
        let p = self.lock(self.partition_of_key(&rec.key));
        if !p.is_forgotten_at(0, &rec.key, loc) {
            // Written, deleted or recalled since: its state now, by name.
            drop(p);
            let state = self.export_key(&rec.key, now_ms);
            return Some((rec.key, state));
        }
        drop(p);
        if rec.expire_at != 0 && rec.expire_at <= now_ms {
            return Some((rec.key, Exported::Missing));
        }
        let mut payload = dump_bytes(&rec.value).to_vec();
        dump::seal(&mut payload);
        Some((rec.key, Exported::Value { payload, expire_at: rec.expire_at }))
    }
}
