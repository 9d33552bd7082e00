//! List values: a deque of byte strings with an O(1) memory figure.
//!
//! Every mutation goes through a method here so `bytes` stays exactly the sum
//! of `cost()` over the elements.

use std::collections::VecDeque;
use std::ops::Range;

/// Per-element bookkeeping beyond the bytes themselves (Vec header + slot).
const ELEM_OVERHEAD: usize = 32;

#[derive(Clone, Default)]
pub struct ListValue {
    items: VecDeque<Vec<u8>>,
    bytes: usize,
}

impl ListValue {
    pub fn len(&self) -> usize {
        self.items.len()
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    pub fn mem_bytes(&self) -> usize {
        self.bytes
    }
    /// Total length of the elements' bytes (sizing reply buffers).
    pub fn payload_bytes(&self) -> usize {
        self.bytes - self.items.len() * ELEM_OVERHEAD
    }
    pub fn encoding(&self) -> &'static str {
        "quicklist"
    }
    fn cost(v: &[u8]) -> usize {
        v.len() + ELEM_OVERHEAD
    }
    pub fn push_front(&mut self, v: Vec<u8>) {
        self.bytes += Self::cost(&v);
        self.items.push_front(v);
    }
    pub fn push_back(&mut self, v: Vec<u8>) {
        self.bytes += Self::cost(&v);
        self.items.push_back(v);
    }
    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        let v = self.items.pop_front()?;
        self.bytes -= Self::cost(&v);
        Some(v)
    }
    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        let v = self.items.pop_back()?;
        self.bytes -= Self::cost(&v);
        Some(v)
    }
    pub fn get(&self, i: usize) -> Option<&Vec<u8>> {
        self.items.get(i)
    }
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Vec<u8>> + ExactSizeIterator {
        self.items.iter()
    }
    /// The elements in `range` (must be within bounds), front to back.
    pub fn range(&self, range: Range<usize>) -> impl DoubleEndedIterator<Item = &Vec<u8>> + ExactSizeIterator {
        self.items.range(range)
    }

    /// Replaces the element at `i`; false when `i` is out of range.
    pub fn set(&mut self, i: usize, v: Vec<u8>) -> bool {
        let Some(slot) = self.items.get_mut(i) else { return false };
        self.bytes = self.bytes - Self::cost(slot) + Self::cost(&v);
        *slot = v;
        true
    }

    /// Inserts `v` so that it ends up at index `i` (`i <= len`).
    pub fn insert(&mut self, i: usize, v: Vec<u8>) {
        self.bytes += Self::cost(&v);
        self.items.insert(i, v);
    }

    /// Removes elements equal to `elem`: the first `count` from the head
    /// (count > 0), the last `|count|` from the tail (count < 0), or all
    /// (count = 0). Returns how many were removed.
    pub fn remove_matching(&mut self, elem: &[u8], count: i64) -> usize {
        let limit = if count == 0 { usize::MAX } else { usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX) };
        // Matches at indexes from `first_removable` on may go (tail-first
        // removal only differs from a head-first one by where it starts).
        let mut first_removable = 0;
        if count < 0 {
            let mut seen = 0;
            for (i, v) in self.items.iter().enumerate().rev() {
                if v.as_slice() == elem {
                    seen += 1;
                    first_removable = i;
                    if seen == limit {
                        break;
                    }
                }
            }
        }
        let mut removed = 0;
        let mut freed = 0;
        let mut index = 0;
        self.items.retain(|v| {
            let i = index;
            index += 1;
            if removed < limit && i >= first_removable && v.as_slice() == elem {
                removed += 1;
                freed += Self::cost(v);
                false
            } else {
                true
            }
        });
        self.bytes -= freed;
        removed
    }

    /// Keeps only the elements in `keep` (clamped to the list).
    pub fn retain_range(&mut self, keep: Range<usize>) {
        let len = self.items.len();
        let end = keep.end.min(len);
        let start = keep.start.min(end);
        let freed: usize = self.items.range(end..).chain(self.items.range(..start)).map(|v| Self::cost(v)).sum();
        self.items.truncate(end);
        self.items.drain(..start);
        self.bytes -= freed;
    }

    /// Moves the element at one end to the other end (LMOVE/RPOPLPUSH with
    /// the same source and destination). Memory is unchanged.
    pub fn rotate(&mut self, from_front: bool, to_front: bool) -> Option<&Vec<u8>> {
        let v = if from_front { self.items.pop_front()? } else { self.items.pop_back()? };
        if to_front {
            self.items.push_front(v);
            self.items.front()
        } else {
            self.items.push_back(v);
            self.items.back()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> ListValue {
        let mut l = ListValue::default();
        for i in items {
            l.push_back(i.as_bytes().to_vec());
        }
        l
    }

    fn contents(l: &ListValue) -> Vec<String> {
        l.iter().map(|v| String::from_utf8_lossy(v).into_owned()).collect()
    }

    /// The accounted bytes must always equal a recount from scratch.
    fn check_bytes(l: &ListValue) {
        let expected: usize = l.iter().map(|v| v.len() + ELEM_OVERHEAD).sum();
        assert_eq!(l.mem_bytes(), expected);
        assert_eq!(l.payload_bytes(), l.iter().map(|v| v.len()).sum::<usize>());
    }

    #[test]
    fn remove_matching_head_tail_all() {
        let mut l = list(&["a", "b", "a", "c", "a", "a"]);
        assert_eq!(l.remove_matching(b"a", 2), 2);
        assert_eq!(contents(&l), ["b", "c", "a", "a"]);
        check_bytes(&l);
        let mut l = list(&["a", "b", "a", "c", "a", "a"]);
        assert_eq!(l.remove_matching(b"a", -3), 3);
        assert_eq!(contents(&l), ["a", "b", "c"]);
        check_bytes(&l);
        let mut l = list(&["a", "b", "a"]);
        assert_eq!(l.remove_matching(b"a", 0), 2);
        assert_eq!(contents(&l), ["b"]);
        check_bytes(&l);
        let mut l = list(&["a", "b", "a"]);
        assert_eq!(l.remove_matching(b"a", i64::MIN), 2);
        assert_eq!(l.remove_matching(b"zz", -1), 0);
        assert_eq!(contents(&l), ["b"]);
        check_bytes(&l);
    }

    #[test]
    fn retain_range_set_insert_rotate_keep_bytes_exact() {
        let mut l = list(&["a", "bb", "ccc", "dddd", "eeeee"]);
        l.retain_range(1..4);
        assert_eq!(contents(&l), ["bb", "ccc", "dddd"]);
        check_bytes(&l);
        assert!(l.set(1, b"xxxxxxxx".to_vec()));
        assert!(!l.set(3, b"x".to_vec()));
        check_bytes(&l);
        l.insert(0, b"first".to_vec());
        l.insert(4, b"last".to_vec());
        assert_eq!(contents(&l), ["first", "bb", "xxxxxxxx", "dddd", "last"]);
        check_bytes(&l);
        assert_eq!(l.rotate(false, true).map(|v| v.as_slice()), Some(&b"last"[..]));
        assert_eq!(contents(&l), ["last", "first", "bb", "xxxxxxxx", "dddd"]);
        check_bytes(&l);
        l.retain_range(7..9);
        assert!(l.is_empty());
        assert_eq!(l.mem_bytes(), 0);
    }
}
