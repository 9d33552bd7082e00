//! Hash values: field → value, on a `SlabTable` so HSCAN cursors are stable.

use super::slab_table::{Keyed, SlabTable, hash_bytes};

const FIELD_OVERHEAD: usize = 48;

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

#[derive(Default)]
pub struct HashValue {
    table: SlabTable<Field>,
    bytes: usize,
}

impl Clone for HashValue {
    fn clone(&self) -> Self {
        let mut h = HashValue::default();
        for (_, f) in self.table.iter() {
            h.insert(&f.name, f.value.clone());
        }
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
    /// Redis 7.0 keeps small hashes as listpacks (≤128 fields of ≤64 bytes).
    pub fn encoding(&self) -> &'static str {
        if self.len() <= 128 && self.table.iter().all(|(_, f)| f.name.len() <= 64 && f.value.len() <= 64) {
            "listpack"
        } else {
            "hashtable"
        }
    }
    fn cost(name: &[u8], value: &[u8]) -> usize {
        name.len() + value.len() + FIELD_OVERHEAD
    }
    pub fn get(&self, name: &[u8]) -> Option<&Vec<u8>> {
        let slot = self.table.find(hash_bytes(name), name)?;
        self.table.get(slot).map(|f| &f.value)
    }
    /// Sets a field; returns true when the field is new.
    pub fn insert(&mut self, name: &[u8], value: Vec<u8>) -> bool {
        let h = hash_bytes(name);
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
                true
            }
        }
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
