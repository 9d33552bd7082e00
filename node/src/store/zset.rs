//! Sorted-set values.
//!
//! Members live in a `SlabTable` (member → node, with slots that never move
//! while a member lives, so ZSCAN cursors are slot numbers), and those same
//! nodes form an indexable skiplist ordered by (score, member) as in Redis:
//! every link records its span, the number of level-0 steps it covers, so
//! rank queries and access by rank are O(log n). Links are slot numbers.

use super::slab_table::{Keyed, NONE, SlabTable};
use crate::base::hash::hash_bytes;
use crate::base::random::fast_rand;
use smallvec::{SmallVec, smallvec};
use std::cmp::Ordering;

/// Redis's ZSKIPLIST_MAXLEVEL.
const MAX_LEVEL: usize = 32;
/// Redis 7.0's zset-max-listpack-entries / zset-max-listpack-value defaults.
pub const LISTPACK_MAX_ENTRIES: usize = super::encoding::ZSET_MAX_LISTPACK_ENTRIES_DEFAULT;
pub const LISTPACK_MAX_VALUE: usize = super::encoding::ZSET_MAX_LISTPACK_VALUE_DEFAULT;
/// Accounted bytes per member besides its name and links: slab slot, hash
/// index entry, score, back link and the boxed name's header.
const NODE_OVERHEAD: usize = 72;
/// The skiplist header, as a link origin ("position before the first node").
const HEAD: u32 = NONE - 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Link {
    /// Next node on this level, or `NONE`.
    next: u32,
    /// Level-0 steps from this node to `next` (to the last node when `next` is `NONE`).
    span: u32,
}

const END: Link = Link { next: NONE, span: 0 };

/// One member: an entry of the member dictionary and a skiplist node.
pub struct ZNode {
    name: Box<[u8]>,
    score: f64,
    /// Previous node on level 0, or `NONE` for the first.
    prev: u32,
    links: SmallVec<[Link; 2]>,
}

impl ZNode {
    pub fn name(&self) -> &[u8] {
        &self.name
    }
    pub fn score(&self) -> f64 {
        self.score
    }
    fn cost(&self) -> usize {
        self.name.len() + NODE_OVERHEAD + self.links.len() * std::mem::size_of::<Link>()
    }
    /// (score, member) order, the order of the skiplist.
    fn cmp_key(&self, score: f64, name: &[u8]) -> Ordering {
        match self.score.partial_cmp(&score) {
            Some(Ordering::Equal) | None => (*self.name).cmp(name),
            Some(o) => o,
        }
    }
}

impl Keyed for ZNode {
    fn key(&self) -> &[u8] {
        &self.name
    }
}

/// A score interval as ZRANGEBYSCORE takes it (`(` makes a bound exclusive).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreRange {
    pub min: f64,
    pub max: f64,
    pub min_ex: bool,
    pub max_ex: bool,
}

impl ScoreRange {
    pub fn gte_min(&self, v: f64) -> bool {
        if self.min_ex { v > self.min } else { v >= self.min }
    }
    pub fn lte_max(&self, v: f64) -> bool {
        if self.max_ex { v < self.max } else { v <= self.max }
    }
    /// True when no score can be inside (Redis answers these without looking).
    pub fn is_empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.min_ex || self.max_ex))
    }
}

/// One end of a lexicographic range: `-`, `+`, `[x` or `(x`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LexBound {
    /// `-`: below every string.
    Min,
    /// `+`: above every string.
    Max,
    Inclusive(Vec<u8>),
    Exclusive(Vec<u8>),
}

impl LexBound {
    /// Position of `v` relative to the bound's value (Redis's `sdscmplex`).
    fn cmp_value(&self, v: &[u8]) -> Ordering {
        match self {
            LexBound::Min => Ordering::Greater,
            LexBound::Max => Ordering::Less,
            LexBound::Inclusive(b) | LexBound::Exclusive(b) => v.cmp(b),
        }
    }
    /// `-` and `+` count as exclusive, as in Redis.
    fn exclusive(&self) -> bool {
        !matches!(self, LexBound::Inclusive(_))
    }
    fn rank(&self) -> u8 {
        match self {
            LexBound::Min => 0,
            LexBound::Inclusive(_) | LexBound::Exclusive(_) => 1,
            LexBound::Max => 2,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexRange {
    pub min: LexBound,
    pub max: LexBound,
}

impl LexRange {
    pub fn gte_min(&self, v: &[u8]) -> bool {
        let c = self.min.cmp_value(v);
        if self.min.exclusive() { c == Ordering::Greater } else { c != Ordering::Less }
    }
    pub fn lte_max(&self, v: &[u8]) -> bool {
        let c = self.max.cmp_value(v);
        if self.max.exclusive() { c == Ordering::Less } else { c != Ordering::Greater }
    }
    /// True when the bounds themselves leave no room (min above max, or equal and exclusive).
    pub fn is_empty(&self) -> bool {
        let c = match (&self.min, &self.max) {
            (LexBound::Inclusive(a) | LexBound::Exclusive(a), LexBound::Inclusive(b) | LexBound::Exclusive(b)) => {
                a.cmp(b)
            }
            (a, b) => a.rank().cmp(&b.rank()),
        };
        c == Ordering::Greater || (c == Ordering::Equal && (self.min.exclusive() || self.max.exclusive()))
    }
}

pub struct ZSetValue {
    dict: SlabTable<ZNode>,
    /// Header links, one per level in use (empty when the set is).
    head: Vec<Link>,
    /// Last node, or `NONE`.
    tail: u32,
    bytes: usize,
    /// Whether Redis 7.0 would still hold this set as a listpack: it starts
    /// so and converts for good once a member is over 64 bytes or there are
    /// over 128. Visible in OBJECT ENCODING, ZSCAN (one pass), a listpack's
    /// `-0` scores (stored as 0), and lex ranges over mixed scores.
    listpack: bool,
}

impl Default for ZSetValue {
    fn default() -> Self {
        ZSetValue { dict: SlabTable::default(), head: Vec::new(), tail: NONE, bytes: 0, listpack: true }
    }
}

impl Clone for ZSetValue {
    fn clone(&self) -> Self {
        let mut z = ZSetValue { listpack: self.listpack, ..Default::default() };
        for (m, s) in self.iter() {
            z.insert(m, s);
        }
        z
    }
}

/// Skiplist levels of a new node: level k+1 with probability 1/4^k.
fn random_level() -> usize {
    let mut level = 1;
    let mut r = fast_rand();
    while level < MAX_LEVEL && r & 3 == 0 {
        level += 1;
        r >>= 2;
    }
    level
}

impl ZSetValue {
    /// An empty set to receive `len` members whose longest is
    /// `max_member_len` bytes: a listpack when Redis would convert such a
    /// result to one (ZUNIONSTORE & co.), a skiplist otherwise.
    pub fn with_encoding_for(len: usize, max_member_len: usize) -> Self {
        ZSetValue {
            listpack: len <= super::encoding::get(&super::encoding::ZSET_MAX_LISTPACK_ENTRIES)
                && max_member_len <= super::encoding::get(&super::encoding::ZSET_MAX_LISTPACK_VALUE),
            ..Default::default()
        }
    }
    pub fn len(&self) -> usize {
        self.dict.len()
    }
    pub fn is_empty(&self) -> bool {
        self.dict.is_empty()
    }
    pub fn mem_bytes(&self) -> usize {
        self.bytes
    }
    /// What OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        if self.listpack { "listpack" } else { "skiplist" }
    }
    /// Takes the skiplist encoding for good (see `HashValue`).
    pub fn expand_encoding(&mut self) {
        self.listpack = false;
    }
    pub fn is_listpack(&self) -> bool {
        self.listpack
    }
    pub fn dict(&self) -> &SlabTable<ZNode> {
        &self.dict
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        let slot = self.dict.find(hash_bytes(member), member)?;
        Some(self.node(slot).score)
    }

    /// Sets a member's score; returns true when the member is new.
    pub fn insert(&mut self, member: &[u8], score: f64) -> bool {
        let h = hash_bytes(member);
        if let Some(slot) = self.dict.find(h, member) {
            let score = self.normalize(score);
            // 0 and -0 compare equal: like Redis, that is no change.
            if self.node(slot).score != score {
                self.set_score(slot, score);
            }
            return false;
        }
        let (max_entries, max_value) = (
            super::encoding::get(&super::encoding::ZSET_MAX_LISTPACK_ENTRIES),
            super::encoding::get(&super::encoding::ZSET_MAX_LISTPACK_VALUE),
        );
        if self.listpack && (self.len() + 1 > max_entries || member.len() > max_value) {
            self.listpack = false;
        }
        let score = self.normalize(score);
        let node = ZNode { name: member.into(), score, prev: NONE, links: smallvec![END; random_level()] };
        self.bytes += node.cost();
        let slot = self.dict.insert_new(h, node);
        self.link_in(slot);
        true
    }

    /// A listpack stores scores as text and reads "-0" back as the integer 0.
    fn normalize(&self, score: f64) -> f64 {
        if self.listpack && score == 0.0 { 0.0 } else { score }
    }

    /// Removes a member; returns true when it existed.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.dict.find(hash_bytes(member), member) {
            Some(slot) => {
                self.remove_slot(slot);
                true
            }
            None => false,
        }
    }

    /// Removes and returns the first (`max` false) or last member.
    pub fn pop(&mut self, max: bool) -> Option<(Box<[u8]>, f64)> {
        let slot = if max { self.tail } else { self.head.first()?.next };
        if slot == NONE {
            return None;
        }
        let node = self.remove_slot(slot);
        Some((node.name, node.score))
    }

    /// 0-based rank of `member` in ascending order.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let slot = self.dict.find(hash_bytes(member), member)?;
        let n = self.node(slot);
        let (found, rank) = self.last_where(|x| x.cmp_key(n.score, &n.name) != Ordering::Greater);
        debug_assert_eq!(found, slot);
        Some(rank - 1)
    }

    /// Members in ascending order from 0-based rank `start` (descending
    /// with `rev`, starting at that ascending rank).
    pub fn iter_from(&self, start: usize, rev: bool) -> ZIter<'_> {
        let cur = self.slot_at(start).unwrap_or(NONE);
        ZIter { z: self, cur, rev }
    }

    /// All members in ascending (score, member) order.
    pub fn iter(&self) -> ZIter<'_> {
        ZIter { z: self, cur: self.head.first().map_or(NONE, |l| l.next), rev: false }
    }

    /// The member at 0-based ascending rank `rank`.
    pub fn at_rank(&self, rank: usize) -> Option<(&[u8], f64)> {
        self.slot_at(rank).map(|s| {
            let n = self.node(s);
            (&*n.name, n.score)
        })
    }

    /// 0-based rank of the first member inside `r`.
    pub fn first_in_score_range(&self, r: &ScoreRange) -> Option<usize> {
        if r.is_empty() {
            return None;
        }
        let (at, rank) = self.last_where(|n| !r.gte_min(n.score));
        let next = self.link(at, 0).next;
        (next != NONE && r.lte_max(self.node(next).score)).then_some(rank)
    }

    /// 0-based rank of the last member inside `r`.
    pub fn last_in_score_range(&self, r: &ScoreRange) -> Option<usize> {
        if r.is_empty() {
            return None;
        }
        let (at, rank) = self.last_where(|n| r.lte_max(n.score));
        (at != HEAD && r.gte_min(self.node(at).score)).then(|| rank - 1)
    }

    /// Members inside `r`.
    pub fn count_in_score_range(&self, r: &ScoreRange) -> usize {
        match (self.first_in_score_range(r), self.last_in_score_range(r)) {
            (Some(first), Some(last)) if last >= first => last - first + 1,
            _ => 0,
        }
    }

    /// Quick rejection Redis applies before lex range searches: the last
    /// member must reach `min` and the first must not pass `max`.
    fn touches_lex_range(&self, r: &LexRange) -> bool {
        if r.is_empty() || self.is_empty() {
            return false;
        }
        let first = self.node(self.head[0].next);
        r.gte_min(&self.node(self.tail).name) && r.lte_max(&first.name)
    }

    /// 0-based rank of the first member inside `r`. Lex ranges assume equal
    /// scores; with mixed scores the answer follows Redis's listpack scan
    /// (small sets) or skiplist descent.
    pub fn first_in_lex_range(&self, r: &LexRange) -> Option<usize> {
        if !self.touches_lex_range(r) {
            return None;
        }
        if self.listpack {
            let (i, (m, _)) = self.iter().enumerate().find(|(_, (m, _))| r.gte_min(m))?;
            return r.lte_max(m).then_some(i);
        }
        let (at, rank) = self.last_where(|n| !r.gte_min(&n.name));
        let next = self.link(at, 0).next;
        (next != NONE && r.lte_max(&self.node(next).name)).then_some(rank)
    }

    /// 0-based rank of the last member inside `r` (see `first_in_lex_range`).
    pub fn last_in_lex_range(&self, r: &LexRange) -> Option<usize> {
        if !self.touches_lex_range(r) {
            return None;
        }
        if self.listpack {
            let last = self.len() - 1;
            let (i, (m, _)) = self.iter_from(last, true).enumerate().find(|(_, (m, _))| r.lte_max(m))?;
            return r.gte_min(m).then(|| last - i);
        }
        let (at, rank) = self.last_where(|n| r.lte_max(&n.name));
        (at != HEAD && r.gte_min(&self.node(at).name)).then(|| rank - 1)
    }

    /// Number of members from the first in `r` onwards that stay inside it.
    pub fn count_in_lex_range(&self, r: &LexRange) -> usize {
        let Some(first) = self.first_in_lex_range(r) else {
            return 0;
        };
        if self.listpack {
            return self.iter_from(first, false).take_while(|(m, _)| r.lte_max(m)).count();
        }
        match self.last_in_lex_range(r) {
            Some(last) if last >= first => last - first + 1,
            _ => 0,
        }
    }

    /// Removes up to `count` members from 0-based rank `start` on; returns
    /// how many were removed.
    pub fn remove_rank_range(&mut self, start: usize, count: usize) -> usize {
        let mut update = [HEAD; MAX_LEVEL];
        let mut x = HEAD;
        let mut traversed = 0usize;
        for i in (0..self.head.len()).rev() {
            loop {
                let l = self.link(x, i);
                if l.next != NONE && traversed + l.span as usize <= start {
                    traversed += l.span as usize;
                    x = l.next;
                } else {
                    break;
                }
            }
            update[i] = x;
        }
        let mut removed = 0;
        let mut cur = self.link(x, 0).next;
        while cur != NONE && removed < count {
            let next = self.node(cur).links[0].next;
            self.unlink(cur, &update);
            let node = self.dict.remove(cur).expect("live zset node");
            self.bytes -= node.cost();
            removed += 1;
            cur = next;
        }
        removed
    }

    /// A random member's slot (ZRANDMEMBER), or None when empty.
    pub fn random_slot(&self) -> Option<u32> {
        self.dict.random_slot(fast_rand())
    }

    /// The member in a dictionary slot (ZSCAN, ZRANDMEMBER).
    pub fn at_slot(&self, slot: u32) -> Option<(&[u8], f64)> {
        self.dict.get(slot).map(|n| (&*n.name, n.score))
    }

    // ---- skiplist internals ----

    fn node(&self, slot: u32) -> &ZNode {
        self.dict.get(slot).expect("live zset node")
    }

    fn node_mut(&mut self, slot: u32) -> &mut ZNode {
        self.dict.get_mut(slot).expect("live zset node")
    }

    fn link(&self, at: u32, level: usize) -> Link {
        if at == HEAD { self.head[level] } else { self.node(at).links[level] }
    }

    fn link_mut(&mut self, at: u32, level: usize) -> &mut Link {
        if at == HEAD { &mut self.head[level] } else { &mut self.node_mut(at).links[level] }
    }

    /// The node at 0-based rank `rank`.
    fn slot_at(&self, rank: usize) -> Option<u32> {
        if rank >= self.len() {
            return None;
        }
        let target = rank + 1;
        let mut x = HEAD;
        let mut traversed = 0usize;
        for i in (0..self.head.len()).rev() {
            loop {
                let l = self.link(x, i);
                if l.next != NONE && traversed + l.span as usize <= target {
                    traversed += l.span as usize;
                    x = l.next;
                } else {
                    break;
                }
            }
            if traversed == target {
                return Some(x);
            }
        }
        None
    }

    /// Descends to the last node satisfying `pred` (which must hold for a
    /// prefix of the order); returns it (or `HEAD`) and its 1-based rank.
    fn last_where(&self, pred: impl Fn(&ZNode) -> bool) -> (u32, usize) {
        let mut x = HEAD;
        let mut rank = 0usize;
        for i in (0..self.head.len()).rev() {
            loop {
                let l = self.link(x, i);
                if l.next != NONE && pred(self.node(l.next)) {
                    rank += l.span as usize;
                    x = l.next;
                } else {
                    break;
                }
            }
        }
        (x, rank)
    }

    /// Per level, the last position ordered before (score, name), and its rank.
    fn predecessors(&self, score: f64, name: &[u8]) -> ([u32; MAX_LEVEL], [u32; MAX_LEVEL]) {
        let mut update = [HEAD; MAX_LEVEL];
        let mut rank = [0u32; MAX_LEVEL];
        let mut x = HEAD;
        let mut r = 0u32;
        for i in (0..self.head.len()).rev() {
            loop {
                let l = self.link(x, i);
                if l.next != NONE && self.node(l.next).cmp_key(score, name) == Ordering::Less {
                    r += l.span;
                    x = l.next;
                } else {
                    break;
                }
            }
            update[i] = x;
            rank[i] = r;
        }
        (update, rank)
    }

    /// Links a node that is in the dictionary but not in the skiplist.
    fn link_in(&mut self, slot: u32) {
        let (update, rank) = {
            let n = self.node(slot);
            self.predecessors(n.score, &n.name)
        };
        let (mut update, mut rank) = (update, rank);
        let level = self.node(slot).links.len();
        // Linked nodes, not counting this one.
        let linked = (self.len() - 1) as u32;
        for i in self.head.len()..level {
            self.head.push(Link { next: NONE, span: linked });
            update[i] = HEAD;
            rank[i] = 0;
        }
        for i in 0..level {
            let before = self.link(update[i], i);
            let gap = rank[0] - rank[i];
            self.node_mut(slot).links[i] = Link { next: before.next, span: before.span - gap };
            *self.link_mut(update[i], i) = Link { next: slot, span: gap + 1 };
        }
        for (i, &up) in update.iter().enumerate().take(self.head.len()).skip(level) {
            self.link_mut(up, i).span += 1;
        }
        let prev = if update[0] == HEAD { NONE } else { update[0] };
        let next = self.node(slot).links[0].next;
        self.node_mut(slot).prev = prev;
        if next == NONE {
            self.tail = slot;
        } else {
            self.node_mut(next).prev = slot;
        }
    }

    /// Unlinks a node given its predecessors on every level.
    fn unlink(&mut self, slot: u32, update: &[u32; MAX_LEVEL]) {
        for (i, &up) in update.iter().enumerate().take(self.head.len()) {
            let l = self.link(up, i);
            if l.next == slot {
                let own = self.node(slot).links[i];
                *self.link_mut(up, i) = Link { next: own.next, span: l.span + own.span - 1 };
            } else {
                self.link_mut(up, i).span -= 1;
            }
        }
        let (prev, next) = {
            let n = self.node(slot);
            (n.prev, n.links[0].next)
        };
        if next == NONE {
            self.tail = prev;
        } else {
            self.node_mut(next).prev = prev;
        }
        while self.head.last().is_some_and(|l| l.next == NONE) {
            self.head.pop();
        }
    }

    fn remove_slot(&mut self, slot: u32) -> ZNode {
        let (update, _) = {
            let n = self.node(slot);
            self.predecessors(n.score, &n.name)
        };
        self.unlink(slot, &update);
        let node = self.dict.remove(slot).expect("live zset node");
        self.bytes -= node.cost();
        node
    }

    /// Changes a linked node's score, moving it only when its neighbours
    /// no longer bracket the new score (as Redis's zslUpdateScore).
    fn set_score(&mut self, slot: u32, score: f64) {
        let n = self.node(slot);
        let after_prev = n.prev == NONE || self.node(n.prev).cmp_key(score, &n.name) == Ordering::Less;
        let next = n.links[0].next;
        let before_next = next == NONE || self.node(next).cmp_key(score, &n.name) == Ordering::Greater;
        if after_prev && before_next {
            self.node_mut(slot).score = score;
            return;
        }
        let (update, _) = self.predecessors(n.score, &n.name);
        self.unlink(slot, &update);
        self.node_mut(slot).score = score;
        self.link_in(slot);
    }
}

/// Walks members along level 0, either way.
pub struct ZIter<'a> {
    z: &'a ZSetValue,
    cur: u32,
    rev: bool,
}

impl<'a> Iterator for ZIter<'a> {
    type Item = (&'a [u8], f64);
    fn next(&mut self) -> Option<Self::Item> {
        if self.cur == NONE {
            return None;
        }
        let n = self.z.node(self.cur);
        self.cur = if self.rev { n.prev } else { n.links[0].next };
        Some((&n.name, n.score))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::random::splitmix64;

    /// Checks every structural invariant against a plain sorted model.
    fn check(z: &ZSetValue, model: &[(f64, Vec<u8>)]) {
        assert_eq!(z.len(), model.len());
        let fwd: Vec<(f64, Vec<u8>)> = z.iter().map(|(m, s)| (s, m.to_vec())).collect();
        assert_eq!(fwd, model);
        let mut back: Vec<(f64, Vec<u8>)> = match model.len() {
            0 => vec![],
            n => z.iter_from(n - 1, true).map(|(m, s)| (s, m.to_vec())).collect(),
        };
        back.reverse();
        assert_eq!(back, model);
        for (i, (s, m)) in model.iter().enumerate() {
            assert_eq!(z.rank(m), Some(i));
            assert_eq!(z.at_rank(i), Some((&m[..], *s)));
            assert_eq!(z.score(m), Some(*s));
        }
        assert_eq!(z.at_rank(model.len()), None);
        // Spans on every level add up to the positions they reach.
        for level in 0..z.head.len() {
            let mut x = HEAD;
            let mut pos = 0usize;
            loop {
                let l = z.link(x, level);
                if l.next == NONE {
                    assert_eq!(pos + l.span as usize, model.len(), "span to end at level {level}");
                    break;
                }
                pos += l.span as usize;
                x = l.next;
                assert_eq!(z.rank(&z.node(x).name), Some(pos - 1));
            }
        }
        let bytes: usize = z.dict.iter().map(|(_, n)| n.cost()).sum();
        assert_eq!(z.mem_bytes(), bytes);
    }

    fn sorted_model(entries: &std::collections::HashMap<Vec<u8>, f64>) -> Vec<(f64, Vec<u8>)> {
        let mut v: Vec<(f64, Vec<u8>)> = entries.iter().map(|(m, s)| (*s, m.clone())).collect();
        v.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap().then_with(|| a.1.cmp(&b.1)));
        v
    }

    #[test]
    fn random_operations_keep_order_ranks_and_spans() {
        let mut z = ZSetValue::default();
        let mut model = std::collections::HashMap::new();
        let mut r = 7u64;
        for step in 0..6000 {
            r = splitmix64(r);
            let member = format!("m{}", r % 300).into_bytes();
            let score = ((r >> 20) % 50) as f64 - 25.0;
            match (r >> 40) % 5 {
                0..=2 => {
                    assert_eq!(z.insert(&member, score), model.insert(member.clone(), score).is_none());
                }
                3 => assert_eq!(z.remove(&member), model.remove(&member).is_some()),
                _ => {
                    let m = sorted_model(&model);
                    if !m.is_empty() {
                        let start = (r >> 8) as usize % m.len();
                        let count = (r >> 16) as usize % 5;
                        assert_eq!(z.remove_rank_range(start, count), count.min(m.len() - start));
                        for (_, name) in m.iter().skip(start).take(count) {
                            model.remove(name);
                        }
                    }
                }
            }
            if step % 97 == 0 {
                check(&z, &sorted_model(&model));
            }
        }
        check(&z, &sorted_model(&model));
        while let Some((name, _)) = z.pop(step_is_odd(z.len())) {
            model.remove(&name[..]);
        }
        check(&z, &[]);
        assert!(model.is_empty());
        assert_eq!(z.mem_bytes(), 0);
    }

    fn step_is_odd(n: usize) -> bool {
        n % 2 == 1
    }

    #[test]
    fn equal_scores_order_by_member_and_updates_move_nodes() {
        let mut z = ZSetValue::default();
        for m in ["c", "a", "b"] {
            z.insert(m.as_bytes(), 1.0);
        }
        assert_eq!(z.iter().map(|(m, _)| m.to_vec()).collect::<Vec<_>>(), [b"a", b"b", b"c"]);
        z.insert(b"a", 5.0);
        z.insert(b"c", f64::NEG_INFINITY);
        assert_eq!(z.iter().map(|(m, _)| m.to_vec()).collect::<Vec<_>>(), [b"c", b"b", b"a"]);
        assert_eq!(z.rank(b"a"), Some(2));
        assert_eq!(z.pop(true), Some((b"a".to_vec().into_boxed_slice(), 5.0)));
        assert_eq!(z.pop(false), Some((b"c".to_vec().into_boxed_slice(), f64::NEG_INFINITY)));
    }

    #[test]
    fn score_ranges() {
        let mut z = ZSetValue::default();
        for (i, m) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            z.insert(m.as_bytes(), i as f64 + 1.0);
        }
        let r = |min, max, min_ex, max_ex| ScoreRange { min, max, min_ex, max_ex };
        assert_eq!(z.first_in_score_range(&r(2.0, 4.0, false, false)), Some(1));
        assert_eq!(z.last_in_score_range(&r(2.0, 4.0, false, false)), Some(3));
        assert_eq!(z.count_in_score_range(&r(2.0, 4.0, true, true)), 1);
        assert_eq!(z.count_in_score_range(&r(f64::NEG_INFINITY, f64::INFINITY, false, false)), 5);
        assert_eq!(z.count_in_score_range(&r(3.0, 3.0, true, false)), 0);
        assert_eq!(z.count_in_score_range(&r(5.5, 9.0, false, false)), 0);
        assert_eq!(z.first_in_score_range(&r(4.0, 2.0, false, false)), None);
    }

    #[test]
    fn lex_ranges() {
        let mut z = ZSetValue::default();
        for m in ["a", "b", "c", "d"] {
            z.insert(m.as_bytes(), 0.0);
        }
        let inc = |s: &str| LexBound::Inclusive(s.as_bytes().to_vec());
        let exc = |s: &str| LexBound::Exclusive(s.as_bytes().to_vec());
        let all = LexRange { min: LexBound::Min, max: LexBound::Max };
        assert_eq!(z.count_in_lex_range(&all), 4);
        assert_eq!(z.count_in_lex_range(&LexRange { min: inc("b"), max: exc("d") }), 2);
        assert_eq!(z.first_in_lex_range(&LexRange { min: exc("a"), max: LexBound::Max }), Some(1));
        assert_eq!(z.last_in_lex_range(&LexRange { min: LexBound::Min, max: exc("c") }), Some(1));
        assert!(LexRange { min: LexBound::Max, max: LexBound::Min }.is_empty());
        assert!(LexRange { min: LexBound::Min, max: LexBound::Min }.is_empty());
        assert!(LexRange { min: exc("a"), max: inc("a") }.is_empty());
        assert!(!LexRange { min: inc("a"), max: inc("a") }.is_empty());
        // Large sets use the skiplist descent; same answers on equal scores.
        for i in 0..200 {
            z.insert(format!("x{i:03}").as_bytes(), 0.0);
        }
        assert!(!z.is_listpack());
        assert_eq!(z.count_in_lex_range(&LexRange { min: inc("b"), max: exc("d") }), 2);
        assert_eq!(z.count_in_lex_range(&LexRange { min: inc("x100"), max: LexBound::Max }), 100);
    }

    #[test]
    fn listpack_flag_and_negative_zero() {
        let mut z = ZSetValue::default();
        z.insert(b"m", -0.0);
        assert!(z.score(b"m").unwrap().is_sign_positive(), "listpack stores -0 as 0");
        for i in 0..128 {
            z.insert(format!("k{i}").as_bytes(), 1.0);
        }
        assert_eq!(z.encoding(), "skiplist");
        z.insert(b"n", -0.0);
        assert!(z.score(b"n").unwrap().is_sign_negative());
        for i in 0..128 {
            z.remove(format!("k{i}").as_bytes());
        }
        assert_eq!(z.encoding(), "skiplist", "Redis never converts back");
        let mut small = ZSetValue::default();
        small.insert(&[b'x'; 65], 1.0);
        assert_eq!(small.encoding(), "skiplist");
    }
}
