//! `SlabTable`: a hash index over a slab of items.
//!
//! Items live in a `Vec` of slots and never move while they are alive; the
//! hash index maps a key's hash to a slot number. That gives us three things
//! a plain `HashMap` cannot:
//! - SCAN-style cursors that are just slot numbers: an item present for the
//!   whole scan is returned exactly once, however the index grows or shrinks
//!   (Redis promises "at least once"; we do better);
//! - O(1) random sampling for eviction (`random_slot`);
//! - stable slot ids that eviction lists (SIEVE) and expiry sets can point to.
//!
//! Used for the keyspace and for hash, set and sorted-set members.

use crate::base::random::splitmix64;
use crate::sys::hugepages::HugeAlloc;
use hashbrown::HashTable;

/// Keyed items stored in a `SlabTable`.
pub trait Keyed {
    fn key(&self) -> &[u8];
}

enum Slot<T> {
    Used {
        /// 32 bits of the key's hash (see `spread`): enough to skip
        /// comparing keys that merely share an index group, and it lets a
        /// keyspace slot be 40 bytes instead of 48.
        hash: u32,
        item: T,
    },
    /// Next free slot, or `NONE`.
    Free(u32),
}

pub const NONE: u32 = u32::MAX;

/// The 64-bit hash the index sees for a stored 32-bit one: the index takes
/// its bucket from the low bits and its 7-bit tag from the top ones, so
/// both come from the stored bits and a resize needs no key.
#[inline]
fn spread(h: u32) -> u64 {
    (h as u64) << 32 | h as u64
}

/// Both containers allocate through [`HugeAlloc`]: once one outgrows a huge
/// page it moves to huge pages (`hugepages` setting); smaller ones, as most
/// collections' tables are, stay with the global allocator at no cost.
pub struct SlabTable<T> {
    index: HashTable<u32, HugeAlloc>,
    slots: allocator_api2::vec::Vec<Slot<T>, HugeAlloc>,
    free_head: u32,
    len: usize,
}

impl<T> Default for SlabTable<T> {
    fn default() -> Self {
        SlabTable {
            index: HashTable::new_in(HugeAlloc),
            slots: allocator_api2::vec::Vec::new_in(HugeAlloc),
            free_head: NONE,
            len: 0,
        }
    }
}

impl<T: Keyed> SlabTable<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of slots (live or free): the upper bound for scan cursors.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Heap bytes of the index and slab themselves, with their spare
    /// capacity, as the allocator counts them.
    pub fn overhead_bytes(&self) -> usize {
        use crate::sys::alloc::size_class;
        size_class(self.index.allocation_size()) + size_class(self.slots.capacity() * std::mem::size_of::<Slot<T>>())
    }

    #[inline]
    pub fn find(&self, hash: u64, key: &[u8]) -> Option<u32> {
        let hash = hash as u32;
        let slots = &self.slots;
        self.index
            .find(spread(hash), |&i| match &slots[i as usize] {
                Slot::Used { hash: h, item } => *h == hash && item.key() == key,
                Slot::Free(_) => false,
            })
            .copied()
    }

    #[inline]
    pub fn get(&self, slot: u32) -> Option<&T> {
        match self.slots.get(slot as usize) {
            Some(Slot::Used { item, .. }) => Some(item),
            _ => None,
        }
    }

    /// The stored 32 bits of the hash of the item in `slot`, if the slot
    /// is live.
    #[inline]
    pub fn hash_of(&self, slot: u32) -> Option<u32> {
        match self.slots.get(slot as usize) {
            Some(Slot::Used { hash, .. }) => Some(*hash),
            _ => None,
        }
    }

    #[inline]
    pub fn get_mut(&mut self, slot: u32) -> Option<&mut T> {
        match self.slots.get_mut(slot as usize) {
            Some(Slot::Used { item, .. }) => Some(item),
            _ => None,
        }
    }

    /// Inserts an item whose key is known to be absent; returns its slot.
    pub fn insert_new(&mut self, hash: u64, item: T) -> u32 {
        let hash = hash as u32;
        let slot = if self.free_head != NONE {
            let s = self.free_head;
            if let Slot::Free(next) = self.slots[s as usize] {
                self.free_head = next;
            }
            self.slots[s as usize] = Slot::Used { hash, item };
            s
        } else {
            assert!(self.slots.len() < NONE as usize, "slab table full");
            if self.slots.len() == self.slots.capacity() {
                // Grow by a quarter, not double: a table whose size drifts
                // a little past a power of two (partitions' sizes wander
                // under eviction) must not pay for twice its slots.
                self.slots.reserve_exact((self.slots.len() / 4).max(4));
            }
            self.slots.push(Slot::Used { hash, item });
            (self.slots.len() - 1) as u32
        };
        let slots = &self.slots;
        self.index.insert_unique(spread(hash), slot, |&i| match &slots[i as usize] {
            Slot::Used { hash, .. } => spread(*hash),
            Slot::Free(_) => unreachable!("index points at a free slot"),
        });
        self.len += 1;
        slot
    }

    /// Removes the item in `slot` and returns it.
    pub fn remove(&mut self, slot: u32) -> Option<T> {
        let hash = match self.slots.get(slot as usize) {
            Some(Slot::Used { hash, .. }) => *hash,
            _ => return None,
        };
        if let Ok(e) = self.index.find_entry(spread(hash), |&i| i == slot) {
            e.remove();
        }
        let old = std::mem::replace(&mut self.slots[slot as usize], Slot::Free(self.free_head));
        self.free_head = slot;
        self.len -= 1;
        if self.len == 0 {
            // Start afresh: frees the memory of a table that emptied out.
            *self = SlabTable::default();
        } else {
            self.maybe_shrink_index();
        }
        match old {
            Slot::Used { item, .. } => Some(item),
            Slot::Free(_) => None,
        }
    }

    fn maybe_shrink_index(&mut self) {
        let cap = self.index.capacity();
        if cap > 64 && self.len * 8 < cap {
            let slots = &self.slots;
            self.index.shrink_to(self.len * 2, |&i| match &slots[i as usize] {
                Slot::Used { hash, .. } => spread(*hash),
                Slot::Free(_) => 0,
            });
        }
    }

    /// The first live slot at or after `from`, for cursor iteration.
    pub fn next_used(&self, from: u32) -> Option<u32> {
        let start = from as usize;
        self.slots.get(start..)?.iter().position(|s| matches!(s, Slot::Used { .. })).map(|off| (start + off) as u32)
    }

    /// The slot `random_slot(rand)` looks at first (live or not), without
    /// reading it; None when empty.
    #[inline]
    pub fn probe_slot(&self, rand: u64) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        Some((rand % self.slots.len() as u64) as u32)
    }

    /// Starts loading `slot` into the cache (see `sys::cpu::prefetch`).
    #[inline]
    pub fn prefetch(&self, slot: u32) {
        if let Some(s) = self.slots.get(slot as usize) {
            crate::sys::cpu::prefetch_value(s);
        }
    }

    /// A random live slot, or None when empty. `rand` is any random number.
    pub fn random_slot(&self, rand: u64) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        let n = self.slots.len() as u64;
        let mut r = rand;
        // Dense tables hit a live slot almost at once; sparse ones fall back
        // to a scan from a random point so this always terminates quickly.
        // The first look is `probe_slot(rand)`.
        for _ in 0..8 {
            let s = (r % n) as u32;
            if matches!(self.slots[s as usize], Slot::Used { .. }) {
                return Some(s);
            }
            r = splitmix64(r);
        }
        let start = (r % n) as u32;
        self.next_used(start).or_else(|| self.next_used(0))
    }

    /// Iterates live items with their slot numbers, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| match s {
            Slot::Used { item, .. } => Some((i as u32, item)),
            Slot::Free(_) => None,
        })
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut T)> {
        self.slots.iter_mut().enumerate().filter_map(|(i, s)| match s {
            Slot::Used { item, .. } => Some((i as u32, item)),
            Slot::Free(_) => None,
        })
    }

    /// Removes every item.
    pub fn clear(&mut self) {
        *self = SlabTable::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::hash::hash_bytes;

    impl Keyed for Vec<u8> {
        fn key(&self) -> &[u8] {
            self
        }
    }

    fn put(t: &mut SlabTable<Vec<u8>>, k: &[u8]) -> u32 {
        t.insert_new(hash_bytes(k), k.to_vec())
    }

    #[test]
    fn a_keyspace_slot_is_40_bytes() {
        assert_eq!(std::mem::size_of::<Slot<crate::store::Entry>>(), 40);
    }

    #[test]
    fn insert_find_remove_reuse() {
        let mut t = SlabTable::default();
        let a = put(&mut t, b"a");
        let b = put(&mut t, b"b");
        assert_eq!(t.find(hash_bytes(b"a"), b"a"), Some(a));
        assert_eq!(t.find(hash_bytes(b"zz"), b"zz"), None);
        assert_eq!(t.remove(a), Some(b"a".to_vec()));
        assert_eq!(t.find(hash_bytes(b"a"), b"a"), None);
        let c = put(&mut t, b"c");
        assert_eq!(c, a, "free slot is reused");
        assert_eq!(t.get(b), Some(&b"b".to_vec()));
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn slots_are_stable_across_growth() {
        let mut t = SlabTable::default();
        let first = put(&mut t, b"stable");
        for i in 0..10_000u32 {
            put(&mut t, &i.to_be_bytes());
        }
        assert_eq!(t.find(hash_bytes(b"stable"), b"stable"), Some(first));
        for i in 0..10_000u32 {
            let s = t.find(hash_bytes(&i.to_be_bytes()), &i.to_be_bytes()).unwrap();
            t.remove(s);
        }
        assert_eq!(t.find(hash_bytes(b"stable"), b"stable"), Some(first));
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn cursor_walk_visits_each_live_item_once() {
        let mut t = SlabTable::default();
        for i in 0..1000u32 {
            put(&mut t, &i.to_be_bytes());
        }
        let mut seen = 0;
        let mut cur = 0;
        while let Some(s) = t.next_used(cur) {
            seen += 1;
            // Deleting and inserting during the walk must not hide survivors.
            if s % 3 == 0 {
                t.remove(s);
                put(&mut t, &(s + 5000).to_be_bytes());
            }
            cur = s + 1;
        }
        assert!(seen >= 1000);
    }

    #[test]
    fn random_slot_looks_first_where_probe_slot_says() {
        let mut t = SlabTable::default();
        assert_eq!(t.probe_slot(7), None, "empty");
        let slots: Vec<u32> = (0..100u32).map(|i| put(&mut t, &i.to_be_bytes())).collect();
        for r in 0..200 {
            let r = splitmix64(r);
            assert_eq!(t.random_slot(r), t.probe_slot(r), "a full table: the first look is live");
        }
        t.remove(slots[42]);
        let r = (0..).map(splitmix64).find(|&r| t.probe_slot(r) == Some(42)).unwrap();
        assert_ne!(t.random_slot(r), Some(42), "a free slot is never drawn");
    }

    #[test]
    fn random_slot_finds_live_items_in_sparse_table() {
        let mut t = SlabTable::default();
        let slots: Vec<u32> = (0..1000u32).map(|i| put(&mut t, &i.to_be_bytes())).collect();
        for &s in &slots[..999] {
            t.remove(s);
        }
        for r in 0..50 {
            assert_eq!(t.random_slot(splitmix64(r)), Some(slots[999]));
        }
    }
}
