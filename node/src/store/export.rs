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

impl Exported {
    pub fn payload_len(&self) -> usize {
        match self {
            Exported::Value { payload, .. } => payload.capacity(),
            Exported::Missing => 0,
        }
    }
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

    /// [`Self::export_key`] for the first of `keys`, as many as hold
    /// about `max_bytes` (at least one): the values on disk are read
    /// together (the device serves many reads at a time), then each
    /// checked again under its partition's lock. What it holds at most is
    /// `max_bytes` and one value, so a caller can count it before.
    pub fn export_keys(&self, keys: &[Box<[u8]>], now_ms: u64, max_bytes: usize) -> Vec<Exported> {
        let mut out: Vec<Option<Exported>> = Vec::new();
        // (index in keys, where its value is, its deadline)
        let mut cold: Vec<(usize, ColdLoc, u64)> = Vec::new();
        let mut bytes = 0;
        for (i, key) in keys.iter().enumerate() {
            if bytes >= max_bytes {
                break;
            }
            out.push(None);
            let mut p = self.lock(self.partition_of_key(key));
            p.recall_key(self, 0, key);
            let state = match p.find_entry(0, key) {
                None => Exported::Missing,
                Some(e) if e.expire_at() != 0 && e.expire_at() <= now_ms => Exported::Missing,
                Some(e) => match e.cold_loc() {
                    Some(loc) => {
                        bytes += loc.len as usize;
                        cold.push((i, loc, e.expire_at()));
                        continue;
                    }
                    None => {
                        let mut payload = Vec::new();
                        if !self.encode_entry_value(e, &mut payload) {
                            Exported::Missing
                        } else {
                            dump::seal(&mut payload);
                            Exported::Value { payload, expire_at: e.expire_at() }
                        }
                    }
                },
            };
            bytes += state.payload_len();
            out[i] = Some(state);
        }
        let locs: Vec<ColdLoc> = cold.iter().map(|c| c.1).collect();
        for ((i, loc, expire_at), rec) in cold.into_iter().zip(self.read_records(&locs)) {
            let key = &keys[i];
            let current = rec.ok().filter(|r| r.key[..] == key[..]).filter(|_| {
                let p = self.lock(self.partition_of_key(key));
                p.find_entry(0, key).is_some_and(|e| e.cold_loc() == Some(loc) && e.expire_at() == expire_at)
            });
            out[i] = Some(match current {
                Some(rec) => {
                    let mut payload = dump_bytes(&rec.value).to_vec();
                    dump::seal(&mut payload);
                    Exported::Value { payload, expire_at }
                }
                // Changed while read: one at a time.
                None => self.export_key(key, now_ms),
            });
        }
        out.into_iter().map(|s| s.unwrap_or(Exported::Missing)).collect()
    }

    /// [`Self::export_forgotten`] for many records at once (read together).
    pub fn export_forgotten_all(
        &self,
        locs: &[ColdLoc],
        slots: &SlotSet,
        now_ms: u64,
    ) -> Vec<Option<(Vec<u8>, Exported)>> {
        let recs = self.read_records(locs);
        locs.iter()
            .zip(recs)
            .map(|(&loc, rec)| {
                let rec = rec.ok()?;
                if !slots.contains(key_slot(&rec.key)) {
                    return None;
                }
                let still = self.lock(self.partition_of_key(&rec.key)).is_forgotten_at(0, &rec.key, loc);
                if !still {
                    let state = self.export_key(&rec.key, now_ms);
                    return Some((rec.key, state));
                }
                if rec.expire_at != 0 && rec.expire_at <= now_ms {
                    return Some((rec.key, Exported::Missing));
                }
                let mut payload = dump_bytes(&rec.value).to_vec();
                dump::seal(&mut payload);
                Some((rec.key, Exported::Value { payload, expire_at: rec.expire_at }))
            })
            .collect()
    }
}
