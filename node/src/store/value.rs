//! The value stored under a key: one of Redis's five core types.
//!
//! Every collection type tracks its own heap footprint incrementally so that
//! memory accounting after a write is O(1) (see `EntryMut`).

use super::hash::HashValue;
use super::list::ListValue;
use super::set::SetValue;
use super::zset::ZSetValue;

pub enum Value {
    Str(Vec<u8>),
    List(ListValue),
    Hash(HashValue),
    Set(SetValue),
    ZSet(ZSetValue),
}

/// Redis's error for an operation against a key holding the wrong type.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

impl Value {
    /// Bytes on the heap owned by this value (approximate, O(1)).
    pub fn mem_bytes(&self) -> usize {
        match self {
            Value::Str(s) => s.capacity(),
            Value::List(l) => l.mem_bytes(),
            Value::Hash(h) => h.mem_bytes(),
            Value::Set(s) => s.mem_bytes(),
            Value::ZSet(z) => z.mem_bytes(),
        }
    }

    /// Lists and sorted sets can serve clients blocked on their key.
    #[inline]
    pub fn wakes_blocked(&self) -> bool {
        matches!(self, Value::List(_) | Value::ZSet(_))
    }

    /// The name TYPE reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::List(_) => "list",
            Value::Hash(_) => "hash",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
        }
    }

    /// A collection with no elements left: the key must be deleted, as Redis
    /// never keeps empty collections.
    pub fn is_empty_collection(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::List(l) => l.is_empty(),
            Value::Hash(h) => h.is_empty(),
            Value::Set(s) => s.is_empty(),
            Value::ZSet(z) => z.is_empty(),
        }
    }

    /// What OBJECT ENCODING reports, following Redis 7.0's rules so tools
    /// that inspect encodings see familiar answers.
    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Str(s) => {
                if s.len() <= 20 && crate::base::parse_i64(s).is_some() {
                    "int"
                } else if s.len() <= 44 {
                    "embstr"
                } else {
                    "raw"
                }
            }
            Value::List(l) => l.encoding(),
            Value::Hash(h) => h.encoding(),
            Value::Set(s) => s.encoding(),
            Value::ZSet(z) => z.encoding(),
        }
    }

    /// Deep copy (COPY command).
    pub fn duplicate(&self) -> Value {
        match self {
            Value::Str(s) => Value::Str(s.clone()),
            Value::List(l) => Value::List(l.clone()),
            Value::Hash(h) => Value::Hash(h.clone()),
            Value::Set(s) => Value::Set(s.clone()),
            Value::ZSet(z) => Value::ZSet(z.clone()),
        }
    }
}
