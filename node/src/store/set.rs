//! Set values: members on a `SlabTable` so SSCAN cursors are stable.

use super::slab_table::{Keyed, SlabTable, hash_bytes};

const MEMBER_OVERHEAD: usize = 40;

#[derive(Clone)]
pub struct Member(pub Box<[u8]>);

impl Keyed for Member {
    fn key(&self) -> &[u8] {
        &self.0
    }
}

#[derive(Default)]
pub struct SetValue {
    table: SlabTable<Member>,
    bytes: usize,
}

impl Clone for SetValue {
    fn clone(&self) -> Self {
        let mut s = SetValue::default();
        for (_, m) in self.table.iter() {
            s.insert(&m.0);
        }
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
        if self.len() <= 512 && self.table.iter().all(|(_, m)| crate::util::parse_i64(&m.0).is_some()) {
            "intset"
        } else {
            "hashtable"
        }
    }
    pub fn contains(&self, m: &[u8]) -> bool {
        self.table.find(hash_bytes(m), m).is_some()
    }
    /// Adds a member; returns true when it is new.
    pub fn insert(&mut self, m: &[u8]) -> bool {
        let h = hash_bytes(m);
        if self.table.find(h, m).is_some() {
            return false;
        }
        self.bytes += m.len() + MEMBER_OVERHEAD;
        self.table.insert_new(h, Member(m.into()));
        true
    }
    /// Removes a member; returns true when it existed.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match self.table.find(hash_bytes(m), m) {
            Some(slot) => {
                self.table.remove(slot);
                self.bytes -= m.len() + MEMBER_OVERHEAD;
                true
            }
            None => false,
        }
    }
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.table.iter().map(|(_, m)| &*m.0)
    }
    pub fn table(&self) -> &SlabTable<Member> {
        &self.table
    }
}
