//! The value stored under a key: one of Redis's core types (streams included).
//!
//! Every collection type tracks its own heap footprint incrementally so that
//! memory accounting after a write is O(1) (see `EntryMut`).

use super::hash::HashValue;
use super::list::ListValue;
use super::set::SetValue;
use super::stream::StreamValue;
use super::zset::ZSetValue;

pub enum Value {
    Str(Vec<u8>),
    List(ListValue),
    Hash(HashValue),
    Set(SetValue),
    ZSet(ZSetValue),
    Stream(Box<StreamValue>),
}

/// Redis's error for an operation against a key holding the wrong type.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// A value as readers see it: a string's bytes wherever they are stored
/// (see `store::entry`), or a collection.
#[derive(Clone, Copy)]
pub enum ValueRef<'a> {
    Str(&'a [u8]),
    List(&'a ListValue),
    Hash(&'a HashValue),
    Set(&'a SetValue),
    ZSet(&'a ZSetValue),
    Stream(&'a StreamValue),
}

impl<'a> ValueRef<'a> {
    /// The name TYPE reports.
    pub fn type_name(self) -> &'static str {
        match self {
            ValueRef::Str(_) => "string",
            ValueRef::List(_) => "list",
            ValueRef::Hash(_) => "hash",
            ValueRef::Set(_) => "set",
            ValueRef::ZSet(_) => "zset",
            ValueRef::Stream(_) => "stream",
        }
    }

    /// A collection with no elements left: the key must be deleted, as Redis
    /// never keeps empty collections.
    pub fn is_empty_collection(self) -> bool {
        match self {
            ValueRef::Str(_) => false,
            ValueRef::List(l) => l.is_empty(),
            ValueRef::Hash(h) => h.is_empty(),
            ValueRef::Set(s) => s.is_empty(),
            ValueRef::ZSet(z) => z.is_empty(),
            // Redis keeps streams with no entries (their IDs and groups matter).
            ValueRef::Stream(_) => false,
        }
    }

    /// What OBJECT ENCODING reports, following Redis 7.0's rules so tools
    /// that inspect encodings see familiar answers.
    pub fn encoding(self) -> &'static str {
        match self {
            ValueRef::Str(s) => {
                if s.len() <= 20 && crate::base::parse_i64(s).is_some() {
                    "int"
                } else if s.len() <= 44 {
                    "embstr"
                } else {
                    "raw"
                }
            }
            ValueRef::List(l) => l.encoding(),
            ValueRef::Hash(h) => h.encoding(),
            ValueRef::Set(s) => s.encoding(),
            ValueRef::ZSet(z) => z.encoding(),
            ValueRef::Stream(s) => s.encoding(),
        }
    }

    /// Bytes the value's data takes on the heap (see `Value::mem_bytes`).
    pub fn mem_bytes(self) -> usize {
        match self {
            ValueRef::Str(s) => crate::sys::alloc::size_class(s.len()),
            ValueRef::List(l) => l.mem_bytes(),
            ValueRef::Hash(h) => h.mem_bytes(),
            ValueRef::Set(s) => s.mem_bytes(),
            ValueRef::ZSet(z) => z.mem_bytes(),
            ValueRef::Stream(s) => s.mem_bytes() + std::mem::size_of::<StreamValue>(),
        }
    }

    /// Deep copy (COPY command).
    pub fn to_owned(self) -> Value {
        match self {
            ValueRef::Str(s) => Value::Str(s.to_vec()),
            ValueRef::List(l) => Value::List(l.clone()),
            ValueRef::Hash(h) => Value::Hash(h.clone()),
            ValueRef::Set(s) => Value::Set(s.clone()),
            ValueRef::ZSet(z) => Value::ZSet(z.clone()),
            ValueRef::Stream(s) => Value::Stream(Box::new(s.clone())),
        }
    }
}

impl Value {
    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Value::Str(s) => ValueRef::Str(s),
            Value::List(l) => ValueRef::List(l),
            Value::Hash(h) => ValueRef::Hash(h),
            Value::Set(s) => ValueRef::Set(s),
            Value::ZSet(z) => ValueRef::ZSet(z),
            Value::Stream(s) => ValueRef::Stream(s),
        }
    }

    /// Bytes on the heap owned by this value, as the allocator counts them
    /// for strings (size classes; approximate and O(1) for collections).
    pub fn mem_bytes(&self) -> usize {
        match self {
            Value::Str(s) => crate::sys::alloc::size_class(s.capacity()),
            Value::List(l) => l.mem_bytes(),
            Value::Hash(h) => h.mem_bytes(),
            Value::Set(s) => s.mem_bytes(),
            Value::ZSet(z) => z.mem_bytes(),
            Value::Stream(s) => s.mem_bytes() + std::mem::size_of::<StreamValue>(),
        }
    }

    pub fn type_name(&self) -> &'static str {
        self.as_ref().type_name()
    }

    pub fn encoding(&self) -> &'static str {
        self.as_ref().encoding()
    }
}
