//! Sorted-set values: a member → score dictionary plus a score-ordered tree.

use super::slab_table::{Keyed, SlabTable, hash_bytes};
use std::collections::BTreeSet;

const MEMBER_OVERHEAD: usize = 96;

/// A score with a total order (scores are never NaN: commands reject NaN).
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Score(pub f64);
impl Eq for Score {}
impl Ord for Score {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.partial_cmp(&other.0).unwrap_or(std::cmp::Ordering::Equal)
    }
}

#[derive(Clone)]
pub struct ZMember {
    pub name: Box<[u8]>,
    pub score: f64,
}

impl Keyed for ZMember {
    fn key(&self) -> &[u8] {
        &self.name
    }
}

#[derive(Default)]
pub struct ZSetValue {
    dict: SlabTable<ZMember>,
    /// Members ordered by (score, member bytes), as Redis orders them.
    tree: BTreeSet<(Score, Box<[u8]>)>,
    bytes: usize,
}

impl Clone for ZSetValue {
    fn clone(&self) -> Self {
        let mut z = ZSetValue::default();
        for (_, m) in self.dict.iter() {
            z.insert(&m.name, m.score);
        }
        z
    }
}

impl ZSetValue {
    pub fn len(&self) -> usize {
        self.dict.len()
    }
    pub fn is_empty(&self) -> bool {
        self.dict.is_empty()
    }
    pub fn mem_bytes(&self) -> usize {
        self.bytes
    }
    /// Redis 7.0: listpack for ≤128 members of ≤64 bytes, skiplist otherwise.
    pub fn encoding(&self) -> &'static str {
        if self.len() <= 128 && self.dict.iter().all(|(_, m)| m.name.len() <= 64) { "listpack" } else { "skiplist" }
    }
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        let slot = self.dict.find(hash_bytes(member), member)?;
        self.dict.get(slot).map(|m| m.score)
    }
    /// Sets a member's score; returns true when the member is new.
    pub fn insert(&mut self, member: &[u8], score: f64) -> bool {
        let h = hash_bytes(member);
        match self.dict.find(h, member) {
            Some(slot) => {
                let m = self.dict.get_mut(slot).expect("live slot");
                if m.score != score {
                    let old = Score(m.score);
                    m.score = score;
                    let name: Box<[u8]> = member.into();
                    self.tree.remove(&(old, name.clone()));
                    self.tree.insert((Score(score), name));
                }
                false
            }
            None => {
                self.bytes += 2 * member.len() + MEMBER_OVERHEAD;
                self.dict.insert_new(h, ZMember { name: member.into(), score });
                self.tree.insert((Score(score), member.into()));
                true
            }
        }
    }
    /// Removes a member; returns true when it existed.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        let Some(slot) = self.dict.find(hash_bytes(member), member) else {
            return false;
        };
        let m = self.dict.remove(slot).expect("live slot");
        self.tree.remove(&(Score(m.score), m.name));
        self.bytes -= 2 * member.len() + MEMBER_OVERHEAD;
        true
    }
    /// Members in (score, member) order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], f64)> {
        self.tree.iter().map(|(s, m)| (&**m, s.0))
    }
    pub fn dict(&self) -> &SlabTable<ZMember> {
        &self.dict
    }
}
