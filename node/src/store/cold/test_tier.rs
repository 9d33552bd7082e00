//! Test support for the cold folder: a disk tier in RAM whose reads
//! complete when the test says so, and helpers that write, demote and read
//! one key.

use super::disk::{ColdRecord, ColdTier};
use crate::store::entry::{ColdLoc, ValueKind};
use crate::store::{KeyAccess, Keyspace, Locked, StoreStats, ValueRef};
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::io;

type Done = Box<dyn FnOnce(io::Result<ColdRecord>) + Send>;

/// A disk tier in RAM whose reads complete when the test says so.
#[derive(Default)]
pub(in crate::store) struct HeldTier {
    pub records: Mutex<Vec<ColdRecord>>,
    pub reads: Mutex<Vec<(ColdLoc, Done)>>,
    pub forgotten: Mutex<Vec<ColdLoc>>,
    /// Demotions declined: for a moment (busy) or as a full tier's.
    pub declines: Mutex<Option<Decline>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::store) enum Decline {
    Busy,
    Full,
}

impl HeldTier {
    pub fn complete_all(&self) {
        let reads: Vec<_> = self.reads.lock().drain(..).collect();
        for (loc, done) in reads {
            done(Ok(self.records.lock()[loc.offset as usize].clone()));
        }
    }
}

impl ColdTier for HeldTier {
    fn demote(&self, _: usize, key: &[u8], expire_at: u64, encoded: &[u8]) -> Option<(u32, u32, u32)> {
        if self.declines.lock().is_some() {
            return None;
        }
        let mut r = self.records.lock();
        r.push(ColdRecord { key: key.to_vec(), value: encoded.to_vec(), expire_at });
        Some((0, r.len() as u32 - 1, encoded.len() as u32 + 1))
    }
    fn busy(&self) -> bool {
        *self.declines.lock() == Some(Decline::Busy)
    }
    fn read(&self, loc: ColdLoc, done: Done) {
        self.reads.lock().push((loc, done));
    }
    fn read_blocking(&self, loc: ColdLoc) -> io::Result<ColdRecord> {
        Ok(self.records.lock()[loc.offset as usize].clone())
    }
    fn forget(&self, loc: ColdLoc) {
        self.forgotten.lock().push(loc);
    }
    fn scan_records(&self, visit: &mut dyn FnMut(ColdLoc, &[u8], u64)) {
        let records = self.records.lock().clone();
        for (i, r) in records.iter().enumerate() {
            let loc = ColdLoc { segment: 0, offset: i as u32, len: r.value.len() as u32 + 1, kind: ValueKind::Other };
            visit(loc, &r.key, r.expire_at);
        }
    }
}

pub(in crate::store) fn access<'a>(ks: &'a Keyspace, stats: &'a StoreStats, key: &[u8]) -> KeyAccess<'a> {
    let mut parts: SmallVec<[u32; 8]> = smallvec::smallvec![ks.partition_of_key(key)];
    let locked: Locked<'a> = ks.lock_set(&mut parts);
    KeyAccess { ks, locked, db: 0, now_ms: 1, touch: true, stats }
}

pub(in crate::store) fn demote(ks: &Keyspace, key: &[u8]) {
    let mut part = ks.lock(ks.partition_of_key(key));
    let slot = part.dbs[0].find(crate::store::hash_bytes(key), key).unwrap();
    assert!(matches!(ks.try_demote(&mut part, 0, slot, true), super::values::Demotion::Done(_)));
    assert!(part.dbs[0].entry(slot).is_cold());
}

pub(in crate::store) fn value(ks: &Keyspace, stats: &StoreStats, key: &[u8]) -> Vec<u8> {
    let mut a = access(ks, stats, key);
    let e = a.get(key).unwrap();
    match e.value() {
        ValueRef::Str(s) => s.to_vec(),
        _ => panic!("not a string"),
    }
}
