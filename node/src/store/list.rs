//! List values: a deque of byte strings with an O(1) memory figure.

use std::collections::VecDeque;

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
}
