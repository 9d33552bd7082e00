//! Hash values: field → value, on a `SlabTable` so HSCAN cursors are stable.
//!
//! Every mutation goes through a method here so `bytes` stays exactly the sum
//! of `cost()` over the fields.

use super::encoding;
use super::slab_table::{Keyed, SlabTable};
use crate::base::hash::hash_bytes;

const FIELD_OVERHEAD: usize = 48;

/// Redis 7.0's `hash-max-listpack-entries` / `hash-max-listpack-value`
/// defaults: the limits of its compact encoding.
pub const LISTPACK_MAX_ENTRIES: usize = encoding::HASH_MAX_LISTPACK_ENTRIES_DEFAULT;
pub const LISTPACK_MAX_VALUE: usize = encoding::HASH_MAX_LISTPACK_VALUE_DEFAULT;

#[derive(Clone)]
pub struct Field {
    pub name: Box<[u8]>,
    pub value: Vec<u8>,
}

impl Keyed for Field {
    fn key(&self) -> &[u8] {
        &self.name
    }
}

pub struct HashValue {
    table: SlabTable<Field>,
    bytes: usize,
    /// Whether Redis would still hold this hash as a listpack. Like Redis's
    /// conversion, it only ever goes from true to false. It decides
    /// OBJECT ENCODING and whether HSCAN returns everything in one call.
    compact: bool,
}

impl Default for HashValue {
    fn default() -> Self {
        HashValue { table: SlabTable::default(), bytes: 0, compact: true }
    }
}

impl Clone for HashValue {
    fn clone(&self) -> Self {
        let mut h = HashValue::default();
        for (_, f) in self.table.iter() {
            h.insert(&f.name, f.value.clone());
        }
        // A copy keeps its original's encoding, as in Redis.
        h.compact = self.compact;
        h
    }
}

impl HashValue {
    pub fn len(&self) -> usize {
        self.table.len()
    }
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
    pub fn mem_bytes(&self) -> usize {
        self.bytes
    }
    /// Redis 7.0 keeps small hashes as listpacks (≤512 fields of ≤64 bytes).
    pub fn encoding(&self) -> &'static str {
        if self.compact { "listpack" } else { "hashtable" }
    }
    /// True while Redis would keep this hash as a listpack.
    pub fn is_compact(&self) -> bool {
        self.compact
    }
    /// Takes the hashtable encoding for good (a value read back from the
    /// disk tier keeps the encoding it had).
    pub fn expand_encoding(&mut self) {
        self.compact = false;
    }
    fn cost(name: &[u8], value: &[u8]) -> usize {
        name.len() + value.len() + FIELD_OVERHEAD
    }
    pub fn get(&self, name: &[u8]) -> Option<&Vec<u8>> {
        let slot = self.table.find(hash_bytes(name), name)?;
        self.table.get(slot).map(|f| &f.value)
    }
    pub fn contains(&self, name: &[u8]) -> bool {
        self.table.find(hash_bytes(name), name).is_some()
    }
    /// Sets a field; returns true when the field is new.
    pub fn insert(&mut self, name: &[u8], value: Vec<u8>) -> bool {
        let h = hash_bytes(name);
        let max_value = encoding::get(&encoding::HASH_MAX_LISTPACK_VALUE);
        if self.compact && (name.len() > max_value || value.len() > max_value) {
            self.compact = false;
        }
        match self.table.find(h, name) {
            Some(slot) => {
                let f = self.table.get_mut(slot).expect("live slot");
                self.bytes = self.bytes + value.len() - f.value.len();
                f.value = value;
                false
            }
            None => {
                self.bytes += Self::cost(name, &value);
                self.table.insert_new(h, Field { name: name.into(), value });
                if self.table.len() > encoding::get(&encoding::HASH_MAX_LISTPACK_ENTRIES) {
                    self.compact = false;
                }
                true
            }
        }
    }
    /// Like `insert`, copying `value`; an existing field reuses its buffer
    /// when it fits snugly (HSET's hot path: no allocation on overwrite).
    pub fn insert_slice(&mut self, name: &[u8], value: &[u8]) -> bool {
        let h = hash_bytes(name);
        if let Some(slot) = self.table.find(h, name) {
            let f = self.table.get_mut(slot).expect("live slot");
            let cap = f.value.capacity();
            if value.len() <= cap && cap <= 2 * value.len() + 16 {
                if self.compact && value.len() > encoding::get(&encoding::HASH_MAX_LISTPACK_VALUE) {
                    self.compact = false;
                }
                self.bytes = self.bytes + value.len() - f.value.len();
                f.value.clear();
                f.value.extend_from_slice(value);
                return false;
            }
        }
        self.insert(name, value.to_vec())
    }
    /// Removes a field; returns its value when it existed.
    pub fn remove(&mut self, name: &[u8]) -> Option<Vec<u8>> {
        let slot = self.table.find(hash_bytes(name), name)?;
        let f = self.table.remove(slot)?;
        self.bytes -= Self::cost(&f.name, &f.value);
        Some(f.value)
    }
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.table.iter().map(|(_, f)| (&*f.name, f.value.as_slice()))
    }
    /// The underlying table, for cursor scans and random sampling.
    pub fn table(&self) -> &SlabTable<Field> {
        &self.table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accounted(h: &HashValue) -> usize {
        h.iter().map(|(n, v)| HashValue::cost(n, v)).sum()
    }

    #[test]
    fn bytes_follow_every_mutation() {
        let mut h = HashValue::default();
        assert!(h.insert(b"a", b"1".to_vec()));
        assert!(!h.insert(b"a", b"longer value".to_vec()));
        assert!(h.insert(b"b", Vec::new()));
        assert_eq!(h.mem_bytes(), accounted(&h));
        assert!(!h.insert_slice(b"a", b"other value!"));
        assert!(!h.insert_slice(b"a", b"a much longer value than before"));
        assert!(h.insert_slice(b"c", b"new"));
        assert_eq!(h.mem_bytes(), accounted(&h));
        assert_eq!(h.remove(b"c"), Some(b"new".to_vec()));
        assert!(!h.insert_slice(b"a", b"longer value"));
        assert_eq!(h.remove(b"a"), Some(b"longer value".to_vec()));
        assert_eq!(h.remove(b"a"), None);
        assert_eq!(h.mem_bytes(), accounted(&h));
        h.remove(b"b");
        assert_eq!(h.mem_bytes(), 0);
    }

    #[test]
    fn listpack_conversion_is_one_way() {
        let mut h = HashValue::default();
        for i in 0..LISTPACK_MAX_ENTRIES {
            h.insert(i.to_string().as_bytes(), b"v".to_vec());
        }
        assert_eq!(h.encoding(), "listpack");
        h.insert(b"one more", b"v".to_vec());
        assert_eq!(h.encoding(), "hashtable");
        h.remove(b"one more");
        assert_eq!(h.encoding(), "hashtable", "Redis never converts back");

        let mut h = HashValue::default();
        h.insert(b"f", vec![b'x'; LISTPACK_MAX_VALUE]);
        assert!(h.is_compact());
        h.insert(b"f", vec![b'x'; LISTPACK_MAX_VALUE + 1]);
        assert!(!h.is_compact());
        assert!(!h.clone().is_compact(), "a copy keeps the encoding");

        // Overwriting in place (buffer reuse) converts too.
        let mut h = HashValue::default();
        h.insert(b"f", Vec::with_capacity(100));
        h.insert_slice(b"f", &[b'x'; LISTPACK_MAX_VALUE + 1]);
        assert!(!h.is_compact());
    }
}
