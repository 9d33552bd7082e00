//! `KeylessTable`: the index of keys whose value *and key* are on disk
//! only ("forgotten" keys), in 16 bytes a slot.
//!
//! A cold entry in the slab still holds its key (~100 B of RAM per key with
//! the slab's slot and index). A forgotten key keeps only what finds its
//! record again: 24 bits of its hash, the record's address and length, the
//! value's type, the key's cluster slot (for per-slot counts) and its
//! deadline rounded up to the minute, in one open-addressing slot with
//! linear probing. The key itself is checked when the record is read back:
//! a lookup that matches a slot's hash bits is a *candidate*, resolved by
//! reading the record (see `forget.rs`), which also holds the exact
//! deadline. 24 bits make a false candidate (one extra read) about one
//! lookup of a missing key in ten million per key probed.
//!
//! Layout of a slot (`[u64; 2]`):
//! - word 0: hash bits (24) | record length (23) | value kind (3) | cluster slot (14)
//! - word 1: record offset (24) | segment (16) | deadline, minutes since 2025 (24; 0: none)
//!
//! A slot is empty when its length is 0 (records are never empty). The
//! bucket is the hash bits scaled to the capacity (`hash × capacity >> 24`),
//! so growing needs no key, and a table grows by half, not double: RAM per
//! key stays between 16 / 0.875 and 16 / 0.58, about 18 to 27 bytes.
//! Deletion shifts the following run back (no tombstones). A key whose
//! record or deadline a slot cannot hold stays in the slab.

use crate::store::entry::{ColdLoc, ValueKind};

/// The longest record a slot can address (the disk tier's segments are
/// at most 8 MiB).
const MAX_LEN: u32 = (1 << 23) - 1;
/// The highest offset and segment id a slot can address.
const MAX_OFFSET: u32 = (1 << 24) - 1;
const MAX_SEGMENT: u32 = (1 << 16) - 1;
const HASH_BITS: u32 = (1 << 24) - 1;
/// Deadlines count minutes from 2025-01-01 (24 bits: until 2056).
const DEADLINE_BASE_MS: u64 = 1_735_689_600_000;
const MINUTE_MS: u64 = 60_000;
const MAX_DEADLINE: u32 = (1 << 24) - 1;

const MIN_CAPACITY: usize = 16;

/// One forgotten key, as the table knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forgotten {
    /// `hash32` of the key.
    pub hash: u32,
    /// The key's cluster hash slot (0..16384).
    pub key_slot: u16,
    pub loc: ColdLoc,
    /// The key's deadline rounded up to the minute (`deadline_of`); 0: no
    /// TTL.
    pub deadline: u32,
}

/// The hash bits a forgotten key is found by: 24 bits from the top of its
/// 64-bit hash (the slab index uses the bottom bits for its buckets).
#[inline]
pub fn hash32(hash: u64) -> u32 {
    (hash >> 40) as u32
}

/// A deadline (unix ms, 0: none) as a slot keeps it: minutes since 2025,
/// rounded up, so a slot's deadline is never before the key's. None when
/// a slot cannot hold it.
pub fn deadline_of(expire_at: u64) -> Option<u32> {
    if expire_at == 0 {
        return Some(0);
    }
    let minutes = expire_at.checked_sub(DEADLINE_BASE_MS)?.div_ceil(MINUTE_MS).max(1);
    u32::try_from(minutes).ok().filter(|&m| m <= MAX_DEADLINE)
}

fn deadline_ms(deadline: u32) -> u64 {
    DEADLINE_BASE_MS + u64::from(deadline) * MINUTE_MS
}

impl Forgotten {
    /// Whether a table slot can hold this location.
    pub fn fits(loc: &ColdLoc) -> bool {
        loc.len != 0 && loc.len <= MAX_LEN && loc.offset <= MAX_OFFSET && loc.segment <= MAX_SEGMENT
    }

    /// True when the key has certainly expired by `now_ms` (its exact
    /// deadline, in its record, is at or before the slot's).
    pub fn expired_by(&self, now_ms: u64) -> bool {
        self.deadline != 0 && deadline_ms(self.deadline) <= now_ms
    }

    fn encode(&self) -> [u64; 2] {
        debug_assert!(Self::fits(&self.loc) && self.deadline <= MAX_DEADLINE);
        let w0 = u64::from(self.hash & HASH_BITS)
            | u64::from(self.loc.len) << 24
            | (self.loc.kind as u64) << 47
            | u64::from(self.key_slot) << 50;
        let w1 = u64::from(self.loc.offset) | u64::from(self.loc.segment) << 24 | u64::from(self.deadline) << 40;
        [w0, w1]
    }

    fn decode(w: [u64; 2]) -> Forgotten {
        let loc = ColdLoc {
            segment: (w[1] >> 24) as u32 & MAX_SEGMENT,
            offset: w[1] as u32 & MAX_OFFSET,
            len: (w[0] >> 24) as u32 & MAX_LEN,
            kind: ValueKind::from_byte((w[0] >> 47) as u8 & 7),
        };
        Forgotten { hash: hash_of(&w), key_slot: (w[0] >> 50) as u16, loc, deadline: (w[1] >> 40) as u32 }
    }
}

#[inline]
fn is_empty(w: &[u64; 2]) -> bool {
    (w[0] >> 24) as u32 & MAX_LEN == 0
}

#[inline]
fn hash_of(w: &[u64; 2]) -> u32 {
    w[0] as u32 & HASH_BITS
}

#[derive(Default)]
pub struct KeylessTable {
    slots: Vec<[u64; 2]>,
    len: usize,
    /// Keys with a deadline, and a lower bound of their deadlines (the
    /// active expiry skips the table before it).
    expiring: usize,
    soonest: u32,
}

impl KeylessTable {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Heap bytes of the table (what RAM accounting charges for it).
    pub fn bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<[u64; 2]>()
    }

    /// The bucket of hash bits `hash`: their share of the capacity.
    #[inline]
    fn home(&self, hash: u32) -> usize {
        ((u64::from(hash & HASH_BITS) * self.slots.len() as u64) >> 24) as usize
    }

    #[inline]
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() { 0 } else { i + 1 }
    }

    /// Probes from `from` to `to`, around the end.
    #[inline]
    fn distance(&self, from: usize, to: usize) -> usize {
        if to >= from { to - from } else { to + self.slots.len() - from }
    }

    /// Keys with a deadline.
    pub fn expiring(&self) -> usize {
        self.expiring
    }

    /// Whether some key may have expired by `now_ms`.
    pub fn may_have_expired(&self, now_ms: u64) -> bool {
        self.expiring != 0 && deadline_ms(self.soonest) <= now_ms
    }

    /// The soonest deadline (unix ms, a lower bound), if any key has one.
    pub fn soonest_deadline(&self) -> Option<u64> {
        (self.expiring != 0).then(|| deadline_ms(self.soonest))
    }

    /// Adds a forgotten key (the caller knows the key is in no other
    /// index of its database).
    pub fn insert(&mut self, f: Forgotten) {
        if (self.len + 1) * 8 > self.slots.len() * 7 {
            self.resize((self.slots.len() + self.slots.len() / 2).max(MIN_CAPACITY));
        }
        self.place(f.encode());
        self.len += 1;
        if f.deadline != 0 {
            self.soonest = if self.expiring == 0 { f.deadline } else { self.soonest.min(f.deadline) };
            self.expiring += 1;
        }
    }

    /// The keys that have certainly expired by `now_ms`; the table's
    /// soonest deadline is exact again after this walk (for the others).
    pub fn expired(&mut self, now_ms: u64) -> Vec<Forgotten> {
        let mut soonest = u32::MAX;
        let mut out = Vec::new();
        for (_, f) in self.iter() {
            if f.expired_by(now_ms) {
                out.push(f);
            } else if f.deadline != 0 {
                soonest = soonest.min(f.deadline);
            }
        }
        self.soonest = soonest;
        out
    }

    fn place(&mut self, w: [u64; 2]) {
        let mut i = self.home(hash_of(&w));
        while !is_empty(&self.slots[i]) {
            i = self.next(i);
        }
        self.slots[i] = w;
    }

    fn resize(&mut self, capacity: usize) {
        let old = std::mem::replace(&mut self.slots, vec![[0; 2]; capacity]);
        for w in old {
            if !is_empty(&w) {
                self.place(w);
            }
        }
    }

    /// Positions of the keys whose hash bits are `hash`: candidates for a
    /// key with that hash, to be checked against their records.
    pub fn candidates(&self, hash: u32) -> impl Iterator<Item = usize> + '_ {
        let start = if self.slots.is_empty() { 0 } else { self.home(hash) };
        let mut i = start;
        let mut done = self.slots.is_empty();
        std::iter::from_fn(move || {
            while !done {
                let w = self.slots[i];
                if is_empty(&w) {
                    done = true;
                    return None;
                }
                let at = i;
                i = self.next(i);
                if i == start {
                    done = true;
                }
                if hash_of(&w) == hash & HASH_BITS {
                    return Some(at);
                }
            }
            None
        })
    }

    /// The first candidate for `hash`, if any.
    pub fn first_candidate(&self, hash: u32) -> Option<usize> {
        self.candidates(hash).next()
    }

    /// The position of the key with hash bits `hash` whose record is at
    /// (`segment`, `offset`).
    pub fn find_loc(&self, hash: u32, segment: u32, offset: u32) -> Option<usize> {
        self.candidates(hash).find(|&i| {
            let l = self.get(i).loc;
            (l.segment, l.offset) == (segment, offset)
        })
    }

    pub fn get(&self, pos: usize) -> Forgotten {
        Forgotten::decode(self.slots[pos])
    }

    /// Points the key at `pos` to its record's new address (the cleaner
    /// moved it). False when the new address does not fit a slot.
    pub fn set_loc(&mut self, pos: usize, loc: ColdLoc) -> bool {
        if !Forgotten::fits(&loc) {
            return false;
        }
        let f = Forgotten { loc, ..self.get(pos) };
        self.slots[pos] = f.encode();
        true
    }

    /// Removes the key at `pos`, shifting back the run after it so that
    /// every key stays reachable from its bucket.
    pub fn remove(&mut self, pos: usize) -> Forgotten {
        let removed = self.get(pos);
        let mut hole = pos;
        let mut i = self.next(pos);
        loop {
            let w = self.slots[i];
            if is_empty(&w) {
                break;
            }
            let home = self.home(hash_of(&w));
            // The entry at i may fill the hole when its home is not in the
            // cyclic range (hole, i].
            if self.distance(home, i) >= self.distance(hole, i) {
                self.slots[hole] = w;
                hole = i;
            }
            i = self.next(i);
        }
        self.slots[hole] = [0; 2];
        self.len -= 1;
        if removed.deadline != 0 {
            self.expiring -= 1;
        }
        if self.len == 0 {
            self.slots = Vec::new();
        } else if self.slots.len() > MIN_CAPACITY && self.len * 4 < self.slots.len() {
            self.resize((self.slots.len() / 2).max(MIN_CAPACITY));
        }
        removed
    }

    /// Every forgotten key, with its position (positions are valid until
    /// the next insert or remove).
    pub fn iter(&self) -> impl Iterator<Item = (usize, Forgotten)> + '_ {
        self.slots.iter().enumerate().filter(|(_, w)| !is_empty(w)).map(|(i, w)| (i, Forgotten::decode(*w)))
    }

    /// A uniformly drawn occupied position, if any (RANDOMKEY).
    pub fn random(&self, mut rand: u64) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let n = self.slots.len();
        loop {
            let i = rand as usize % n;
            if !is_empty(&self.slots[i]) {
                return Some(i);
            }
            rand = crate::base::random::splitmix64(rand);
        }
    }

    /// Empties the table, returning what it held.
    pub fn take_all(&mut self) -> Vec<Forgotten> {
        let all = self.iter().map(|(_, f)| f).collect();
        *self = KeylessTable::default();
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn f(hash: u32, segment: u32, offset: u32) -> Forgotten {
        Forgotten {
            hash: hash & HASH_BITS,
            key_slot: (hash % 16384) as u16,
            loc: ColdLoc { segment, offset, len: 40, kind: ValueKind::Hash },
            deadline: 0,
        }
    }

    #[test]
    fn a_slot_keeps_every_field() {
        let x = Forgotten {
            hash: HASH_BITS,
            key_slot: 16383,
            loc: ColdLoc { segment: MAX_SEGMENT, offset: MAX_OFFSET, len: MAX_LEN, kind: ValueKind::Stream },
            deadline: MAX_DEADLINE,
        };
        assert_eq!(Forgotten::decode(x.encode()), x);
        let y = Forgotten {
            hash: 1,
            key_slot: 1,
            loc: ColdLoc { segment: 1, offset: 1, len: 1, kind: ValueKind::Str },
            deadline: 1,
        };
        assert_eq!(Forgotten::decode(y.encode()), y);
        assert!(!Forgotten::fits(&ColdLoc { segment: 0, offset: MAX_OFFSET + 1, len: 1, kind: ValueKind::Str }));
        assert!(!Forgotten::fits(&ColdLoc { segment: MAX_SEGMENT + 1, offset: 0, len: 1, kind: ValueKind::Str }));
        assert!(!Forgotten::fits(&ColdLoc { segment: 0, offset: 0, len: MAX_LEN + 1, kind: ValueKind::Str }));
        assert_eq!(std::mem::size_of::<[u64; 2]>(), 16);
    }

    #[test]
    fn deadlines_round_up_and_expire_certainly() {
        let at = DEADLINE_BASE_MS + 10 * MINUTE_MS + 1;
        let d = deadline_of(at).unwrap();
        assert_eq!(d, 11);
        let x = Forgotten { deadline: d, ..f(1, 1, 1) };
        assert!(!x.expired_by(at), "not before the minute ends");
        assert!(!x.expired_by(DEADLINE_BASE_MS + 11 * MINUTE_MS - 1));
        assert!(x.expired_by(DEADLINE_BASE_MS + 11 * MINUTE_MS));
        assert_eq!(deadline_of(0), Some(0));
        assert_eq!(deadline_of(DEADLINE_BASE_MS - 1), None);
        assert_eq!(deadline_of(DEADLINE_BASE_MS + (MAX_DEADLINE as u64 + 1) * MINUTE_MS), None);
        let mut t = KeylessTable::default();
        t.insert(x);
        t.insert(Forgotten { deadline: 20, ..f(2, 2, 2) });
        t.insert(f(3, 3, 3));
        assert_eq!(t.expiring(), 2);
        assert!(!t.may_have_expired(DEADLINE_BASE_MS + 10 * MINUTE_MS));
        assert!(t.may_have_expired(DEADLINE_BASE_MS + 11 * MINUTE_MS));
        assert_eq!(t.expired(DEADLINE_BASE_MS + 11 * MINUTE_MS), vec![x]);
        let pos = t.find_loc(1, 1, 1).unwrap();
        t.remove(pos);
        assert_eq!(t.expiring(), 1);
        assert!(!t.may_have_expired(DEADLINE_BASE_MS + 19 * MINUTE_MS));
        assert!(t.may_have_expired(DEADLINE_BASE_MS + 20 * MINUTE_MS));
    }

    #[test]
    fn colliding_hashes_are_all_candidates() {
        let mut t = KeylessTable::default();
        for i in 0..5 {
            t.insert(f(7, i, i * 100));
        }
        t.insert(f(8, 9, 9));
        let c: Vec<_> = t.candidates(7).map(|p| t.get(p).loc.segment).collect();
        assert_eq!(c.len(), 5);
        assert_eq!(t.find_loc(7, 3, 300).map(|p| t.get(p).loc.offset), Some(300));
        assert_eq!(t.find_loc(7, 3, 301), None);
        assert_eq!(t.candidates(9).count(), 0);
    }

    /// Random inserts, removes and moves against a model: every key stays
    /// findable through resizes and back-shifts, and the table's memory
    /// per key stays near 16 / load bytes.
    #[test]
    fn random_operations_match_a_model() {
        let mut t = KeylessTable::default();
        let mut model: HashMap<(u32, u32), Forgotten> = HashMap::new();
        let mut r = 42u64;
        for step in 0..200_000u32 {
            r = crate::base::random::splitmix64(r);
            // Few hash values in the small phase force long runs and collisions.
            let hash = if step < 50_000 { (r % 64) as u32 } else { (r >> 16) as u32 & HASH_BITS };
            match r % 7 {
                0..=3 => {
                    let x = f(hash, step % 1000, step);
                    t.insert(x);
                    model.insert((hash, step), x);
                }
                4 | 5 => {
                    if let Some((&k, _)) = model.iter().next() {
                        let pos = t.find_loc(k.0, k.1 % 1000, k.1).expect("present");
                        assert_eq!(t.remove(pos), model.remove(&k).unwrap());
                    }
                }
                _ => {
                    if let Some((&k, x)) = model.iter_mut().next() {
                        let pos = t.find_loc(k.0, k.1 % 1000, k.1).expect("present");
                        x.loc.len += 1;
                        assert!(t.set_loc(pos, x.loc));
                    }
                }
            }
            assert_eq!(t.len(), model.len());
        }
        for (k, x) in &model {
            let pos = t.find_loc(k.0, k.1 % 1000, k.1).expect("every key findable");
            assert_eq!(t.get(pos), *x);
        }
        assert_eq!(t.iter().count(), model.len());
        let per_key = t.bytes() as f64 / t.len() as f64;
        assert!(per_key <= 16.0 / 0.55, "{per_key} bytes per key");
        let all = t.take_all();
        assert_eq!(all.len(), model.len());
        assert!(t.is_empty() && t.bytes() == 0);
    }

    /// Growing by half keeps RAM per key under 28 bytes at every size.
    #[test]
    fn ram_per_key_stays_under_28_bytes_as_the_table_grows() {
        let mut t = KeylessTable::default();
        let mut r = 7u64;
        for i in 0..200_000u32 {
            r = crate::base::random::splitmix64(r);
            t.insert(f(r as u32 & HASH_BITS, i % 1000, i));
            if t.len() >= 64 {
                let per_key = t.bytes() as f64 / t.len() as f64;
                assert!(per_key < 28.0, "{per_key:.1} bytes per key at {} keys", t.len());
            }
        }
    }

    #[test]
    fn random_draws_only_occupied_positions() {
        let mut t = KeylessTable::default();
        assert_eq!(t.random(1), None);
        for i in 0..100 {
            t.insert(f(i * 7919, i, i));
        }
        for r in 0..1000 {
            let p = t.random(r).unwrap();
            assert_eq!(t.get(p).loc.len, 40);
        }
    }
}
