//! Set values: members on a `SlabTable` so SSCAN cursors are stable.
//!
//! Every mutation goes through a method here so `bytes` stays exactly the sum
//! of `cost()` over the members.

use super::encoding;
use super::slab_table::{Keyed, SlabTable};
use crate::base::hash::hash_bytes;
use crate::base::parse_i64;

const MEMBER_OVERHEAD: usize = 40;

/// Redis 7.0's `set-max-intset-entries` default.
pub const INTSET_MAX_ENTRIES: usize = encoding::SET_MAX_INTSET_ENTRIES_DEFAULT;

#[derive(Clone)]
pub struct Member(pub Box<[u8]>);

impl Keyed for Member {
    fn key(&self) -> &[u8] {
        &self.0
    }
}

pub struct SetValue {
    table: SlabTable<Member>,
    bytes: usize,
    /// Whether Redis would hold this set as an intset (only integers, at
    /// most 512). Like Redis's conversion it only goes from true to false,
    /// except when SPOP rebuilds the set (`recheck_compact`). It decides
    /// OBJECT ENCODING and whether SSCAN returns everything in one call.
    compact: bool,
}

impl Default for SetValue {
    fn default() -> Self {
        SetValue { table: SlabTable::default(), bytes: 0, compact: true }
    }
}

impl Clone for SetValue {
    fn clone(&self) -> Self {
        let mut s = SetValue::default();
        for (_, m) in self.table.iter() {
            s.insert(&m.0);
        }
        // A copy keeps its original's encoding, as in Redis.
        s.compact = self.compact;
        s
    }
}

impl SetValue {
    pub fn len(&self) -> usize {
        self.table.len()
    }
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
    pub fn mem_bytes(&self) -> usize {
        self.bytes
    }
    /// Redis 7.0: intset for ≤512 integer members, hashtable otherwise.
    pub fn encoding(&self) -> &'static str {
        if self.compact { "intset" } else { "hashtable" }
    }
    /// True while Redis would keep this set as an intset.
    pub fn is_compact(&self) -> bool {
        self.compact
    }
    /// Takes the hashtable encoding for good (see `HashValue`).
    pub fn expand_encoding(&mut self) {
        self.compact = false;
    }
    /// Re-derives the encoding from the members, as Redis's SPOP does when
    /// it rebuilds a set from the members that remain.
    pub fn recheck_compact(&mut self) {
        self.compact = self.len() <= encoding::get(&encoding::SET_MAX_INTSET_ENTRIES)
            && self.iter().all(|m| parse_i64(m).is_some());
    }
    fn cost(m: &[u8]) -> usize {
        m.len() + MEMBER_OVERHEAD
    }
    pub fn contains(&self, m: &[u8]) -> bool {
        self.table.find(hash_bytes(m), m).is_some()
    }
    /// Adds a member; returns true when it is new.
    #[inline]
    pub fn insert(&mut self, m: &[u8]) -> bool {
        let h = hash_bytes(m);
        if self.table.find(h, m).is_some() {
            return false;
        }
        self.bytes += Self::cost(m);
        self.table.insert_new(h, Member(m.into()));
        if self.compact
            && (self.table.len() > encoding::get(&encoding::SET_MAX_INTSET_ENTRIES) || parse_i64(m).is_none())
        {
            self.compact = false;
        }
        true
    }
    /// Removes a member; returns true when it existed.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match self.table.find(hash_bytes(m), m) {
            Some(slot) => {
                self.table.remove(slot);
                self.bytes -= Self::cost(m);
                true
            }
            None => false,
        }
    }
    /// Removes the member in `slot` (from `table()`), returning it.
    pub fn remove_slot(&mut self, slot: u32) -> Option<Box<[u8]>> {
        let m = self.table.remove(slot)?;
        self.bytes -= Self::cost(&m.0);
        Some(m.0)
    }
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.table.iter().map(|(_, m)| &*m.0)
    }
    pub fn table(&self) -> &SlabTable<Member> {
        &self.table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accounted(s: &SetValue) -> usize {
        s.iter().map(SetValue::cost).sum()
    }

    #[test]
    fn bytes_follow_every_mutation() {
        let mut s = SetValue::default();
        assert!(s.insert(b"a"));
        assert!(!s.insert(b"a"));
        assert!(s.insert(b"bcd"));
        assert_eq!(s.mem_bytes(), accounted(&s));
        let slot = s.table().find(hash_bytes(b"a"), b"a").unwrap();
        assert_eq!(s.remove_slot(slot).as_deref(), Some(&b"a"[..]));
        assert!(!s.remove(b"a"));
        assert_eq!(s.mem_bytes(), accounted(&s));
        assert!(s.remove(b"bcd"));
        assert_eq!(s.mem_bytes(), 0);
    }

    #[test]
    fn intset_rules() {
        let mut s = SetValue::default();
        for i in 0..INTSET_MAX_ENTRIES {
            s.insert(i.to_string().as_bytes());
        }
        assert_eq!(s.encoding(), "intset");
        s.insert(b"-0");
        assert_eq!(s.encoding(), "hashtable", "-0 is not an integer for Redis");
        s.remove(b"-0");
        assert_eq!(s.encoding(), "hashtable", "conversion is one way");
        s.remove(b"0");
        s.recheck_compact();
        assert_eq!(s.encoding(), "intset");
        s.insert(b"600");
        s.insert(b"601");
        assert_eq!(s.encoding(), "hashtable", "more than 512 members");
    }
}
