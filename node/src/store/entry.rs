//! A key's index entry: key, expiry, value and eviction state in as few
//! bytes as the RAM budget allows. Every key has one, in its database's
//! slab, and the disk tier will keep it in RAM for keys whose value is on
//! disk only, so its size is the floor of RAM per key.
//!
//! Layout: the slab slot holds a 16-byte `Body` and the policy's 16-byte
//! `EntryState`. A string — most keys of most caches — lives with its key
//! and expiry in one exactly sized allocation (`Packed`), as Redis's embstr
//! does for short values but for any length: one allocation, one cache
//! miss per lookup. Other types, and a string being modified in place
//! (APPEND, SETRANGE, SETBIT grow it with amortized doubling), keep the
//! same head beside a `Value` (`Boxed`); a small string goes back to the
//! packed form once the write is over (`compact`).
//!
//! The head: `[flags][expire_at: u64 LE, if HAS_EXPIRE][key length:
//! LEB128][key]`, followed in the packed form by the string's bytes.

use super::value::{Value, ValueRef};
use crate::policy::EntryState;
use crate::sys::alloc::{moved, size_class, worth_moving};

/// Eviction metadata kept in every index entry: the policy's fixed-size
/// per-entry state (access time, LFU counter, policy bits and links).
pub type Meta = EntryState;

/// Flag bit: the head carries an expiry time.
const HAS_EXPIRE: u8 = 1;
/// Flag bit (packed form only): the value is on disk only; the bytes after
/// the key are its `ColdLoc`, not a string.
const COLD: u8 = 2;

/// Where a value demoted to the disk tier lives: its record's address in
/// the tier's log, and the value's type (TYPE and SCAN's TYPE filter answer
/// without reading it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ColdLoc {
    pub segment: u32,
    pub offset: u32,
    pub len: u32,
    pub kind: ValueKind,
}

/// A value's type, as a cold entry remembers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ValueKind {
    Str = 0,
    List = 1,
    Hash = 2,
    Set = 3,
    ZSet = 4,
    Stream = 5,
    Other = 6,
}

impl ValueKind {
    pub fn of(v: ValueRef<'_>) -> ValueKind {
        match v {
            ValueRef::Str(_) => ValueKind::Str,
            ValueRef::List(_) => ValueKind::List,
            ValueRef::Hash(_) => ValueKind::Hash,
            ValueRef::Set(_) => ValueKind::Set,
            ValueRef::ZSet(_) => ValueKind::ZSet,
            ValueRef::Stream(_) => ValueKind::Stream,
        }
    }

    pub(super) fn from_byte(b: u8) -> ValueKind {
        match b {
            0 => ValueKind::Str,
            1 => ValueKind::List,
            2 => ValueKind::Hash,
            3 => ValueKind::Set,
            4 => ValueKind::ZSet,
            5 => ValueKind::Stream,
            _ => ValueKind::Other,
        }
    }
}

/// Bytes a `ColdLoc` takes after the key.
const COLD_LOC_LEN: usize = 13;

impl ColdLoc {
    fn encode(&self) -> [u8; COLD_LOC_LEN] {
        let mut b = [0u8; COLD_LOC_LEN];
        b[..4].copy_from_slice(&self.segment.to_le_bytes());
        b[4..8].copy_from_slice(&self.offset.to_le_bytes());
        b[8..12].copy_from_slice(&self.len.to_le_bytes());
        b[12] = self.kind as u8;
        b
    }

    fn decode(b: &[u8]) -> ColdLoc {
        let u = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        ColdLoc { segment: u(0), offset: u(4), len: u(8), kind: ValueKind::from_byte(b[12]) }
    }
}

/// Strings up to this length go back to the packed form after a write.
/// Longer ones being modified stay in a growable buffer, as Redis keeps
/// a string raw once APPEND made it so.
const PACK_AFTER_WRITE_MAX: usize = 256;

/// A key's share of its database's tables, on average: its slot (body,
/// policy state and hash) and an index bucket (a 4-byte slot number and a
/// control byte, at about 7/8 load). Memory accounting counts the tables
/// exactly as they grow and shrink (`Partition`); this is for MEMORY USAGE
/// and the size-aware policies.
pub const INDEX_BYTES_PER_KEY: usize = 40 + 6;

/// Bytes a TTL adds: its 8 bytes in the head and its node in the
/// database's expiry set (16-byte elements in B-tree nodes about 2/3 full).
pub const EXPIRY_BYTES: usize = 8 + 24;

pub struct Entry {
    body: Body,
    pub meta: Meta,
}

enum Body {
    /// A string: head and value in one allocation.
    Packed(Box<[u8]>),
    /// Any other value, or a string being modified.
    Boxed(Box<Boxed>),
}

struct Boxed {
    head: Box<[u8]>,
    value: Value,
}

/// Builds a head (and packed value): exactly sized, no spare capacity.
fn encode(key: &[u8], expire_at: u64, value: &[u8]) -> Box<[u8]> {
    let expire_len = if expire_at != 0 { 8 } else { 0 };
    let mut out = Vec::with_capacity(1 + expire_len + leb128_len(key.len()) + key.len() + value.len());
    out.push(if expire_at != 0 { HAS_EXPIRE } else { 0 });
    if expire_at != 0 {
        out.extend_from_slice(&expire_at.to_le_bytes());
    }
    let mut n = key.len();
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    }
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    debug_assert_eq!(out.len(), out.capacity());
    out.into_boxed_slice()
}

fn leb128_len(n: usize) -> usize {
    (usize::BITS - (n | 1).leading_zeros()).div_ceil(7) as usize
}

/// Where the key starts and ends in a head.
#[inline]
fn key_range(head: &[u8]) -> (usize, usize) {
    let mut i = if head[0] & HAS_EXPIRE != 0 { 9 } else { 1 };
    let mut len = 0usize;
    let mut shift = 0;
    loop {
        let byte = head[i];
        i += 1;
        len |= ((byte & 0x7f) as usize) << shift;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    (i, i + len)
}

impl Entry {
    pub fn new(key: &[u8], value: Value, expire_at: u64, meta: Meta) -> Entry {
        let body = match value {
            Value::Str(s) => Body::Packed(encode(key, expire_at, &s)),
            value => Body::Boxed(Box::new(Boxed { head: encode(key, expire_at, &[]), value })),
        };
        Entry { body, meta }
    }

    /// A string entry built from borrowed bytes (SET's path: one copy).
    pub fn new_string(key: &[u8], value: &[u8], expire_at: u64, meta: Meta) -> Entry {
        Entry { body: Body::Packed(encode(key, expire_at, value)), meta }
    }

    #[inline]
    fn head(&self) -> &[u8] {
        match &self.body {
            Body::Packed(b) => b,
            Body::Boxed(b) => &b.head,
        }
    }

    /// Where the entry's own block starts (key, expiry, a string's value),
    /// for a prefetch: reading the key would wait for that very block.
    #[inline]
    pub fn block_addr(&self) -> *const u8 {
        match &self.body {
            Body::Packed(b) => b.as_ptr(),
            Body::Boxed(b) => (&**b as *const Boxed).cast(),
        }
    }

    #[inline]
    pub fn key(&self) -> &[u8] {
        let head = self.head();
        let (start, end) = key_range(head);
        &head[start..end]
    }

    /// Absolute expiry in unix milliseconds; 0 = persistent.
    #[inline]
    pub fn expire_at(&self) -> u64 {
        let head = self.head();
        if head[0] & HAS_EXPIRE == 0 {
            return 0;
        }
        u64::from_le_bytes(head[1..9].try_into().expect("8 bytes"))
    }

    /// The value. A cold entry has none in RAM: the store promotes a key
    /// before any command sees it, so this is never asked of one (if it
    /// were, an empty string, not a crash).
    #[inline]
    pub fn value(&self) -> ValueRef<'_> {
        match &self.body {
            Body::Packed(b) if b[0] & COLD != 0 => {
                debug_assert!(false, "value() of a cold entry");
                ValueRef::Str(&[])
            }
            Body::Packed(b) => ValueRef::Str(&b[key_range(b).1..]),
            Body::Boxed(b) => b.value.as_ref(),
        }
    }

    /// The value for writing in place. A packed string moves to a growable
    /// buffer first (`compact` packs it again after the write).
    pub fn value_mut(&mut self) -> &mut Value {
        debug_assert!(!self.is_cold(), "value_mut() of a cold entry");
        if let Body::Packed(b) = &self.body {
            let end = key_range(b).1;
            let value = Value::Str(b[end..].to_vec());
            let head: Box<[u8]> = b[..end].into();
            self.body = Body::Boxed(Box::new(Boxed { head, value }));
        }
        match &mut self.body {
            Body::Boxed(b) => &mut b.value,
            Body::Packed(_) => unreachable!("unpacked above"),
        }
    }

    /// The value of a string kept packed with its key (small strings), if
    /// this entry holds one in RAM.
    #[inline]
    pub fn packed_string(&self) -> Option<&[u8]> {
        match &self.body {
            Body::Packed(b) if b[0] & COLD == 0 => Some(&b[key_range(b).1..]),
            _ => None,
        }
    }

    /// Replaces a packed string ([`Self::packed_string`]) with `value`: in
    /// place when the length stays (INCR's usual case), else packed anew.
    pub fn overwrite_packed_string(&mut self, value: &[u8]) {
        if let Body::Packed(b) = &mut self.body {
            let end = key_range(b).1;
            if b[0] & COLD == 0 && b.len() - end == value.len() {
                b[end..].copy_from_slice(value);
                return;
            }
        }
        self.replace_string(value);
    }

    /// Replaces the value with a string, keeping key and expiry.
    pub fn replace_string(&mut self, value: &[u8]) {
        let key_end = key_range(self.head()).1;
        let mut packed = Vec::with_capacity(key_end + value.len());
        packed.extend_from_slice(&self.head()[..key_end]);
        packed.extend_from_slice(value);
        self.body = Body::Packed(packed.into_boxed_slice());
    }

    /// Replaces the value, keeping key and expiry (SET over a key).
    pub fn replace_value(&mut self, value: Value) {
        let key_end = key_range(self.head()).1;
        match value {
            Value::Str(s) => self.replace_string(&s),
            value => self.body = Body::Boxed(Box::new(Boxed { head: self.head()[..key_end].into(), value })),
        }
    }

    /// Sets the expiry in the head (0 = persistent). Callers keep the
    /// database's expiry set in step (`Db::set_expire`).
    pub(super) fn set_expire_at(&mut self, expire_at: u64) {
        if self.expire_at() == expire_at {
            return;
        }
        let (start, end) = key_range(self.head());
        match &mut self.body {
            Body::Packed(b) => {
                let cold = b[0] & COLD;
                *b = encode(&b[start..end], expire_at, &b[end..]);
                b[0] |= cold;
            }
            Body::Boxed(b) => b.head = encode(&b.head[start..end], expire_at, &[]),
        }
    }

    /// After a write: a small string goes back to the packed form; a
    /// growable buffer keeps at most a little spare capacity.
    pub(super) fn compact(&mut self) {
        let Body::Boxed(b) = &mut self.body else { return };
        let Value::Str(s) = &mut b.value else { return };
        if s.len() <= PACK_AFTER_WRITE_MAX {
            let mut packed = Vec::with_capacity(b.head.len() + s.len());
            packed.extend_from_slice(&b.head);
            packed.extend_from_slice(s);
            self.body = Body::Packed(packed.into_boxed_slice());
        }
    }

    /// True when the value is on disk only.
    #[inline]
    pub fn is_cold(&self) -> bool {
        matches!(&self.body, Body::Packed(b) if b[0] & COLD != 0)
    }

    /// Where the value is on disk, for a cold entry.
    pub fn cold_loc(&self) -> Option<ColdLoc> {
        match &self.body {
            Body::Packed(b) if b[0] & COLD != 0 => Some(ColdLoc::decode(&b[key_range(b).1..])),
            _ => None,
        }
    }

    /// The value's type name (TYPE), for cold entries too.
    pub fn type_name(&self) -> &'static str {
        match self.cold_loc() {
            Some(loc) => match loc.kind {
                ValueKind::Str => "string",
                ValueKind::List => "list",
                ValueKind::Hash => "hash",
                ValueKind::Set => "set",
                ValueKind::ZSet => "zset",
                ValueKind::Stream => "stream",
                ValueKind::Other => "none",
            },
            None => self.value().type_name(),
        }
    }

    /// Demotion: drops the value from RAM, keeping key, expiry and policy
    /// state; the value is at `loc` on disk.
    pub(super) fn make_cold(&mut self, loc: ColdLoc) {
        let key_end = key_range(self.head()).1;
        let mut packed = Vec::with_capacity(key_end + COLD_LOC_LEN);
        packed.extend_from_slice(&self.head()[..key_end]);
        packed.extend_from_slice(&loc.encode());
        packed[0] |= COLD;
        self.body = Body::Packed(packed.into_boxed_slice());
    }

    /// An entry for a key whose value is at `loc` on disk only (a
    /// forgotten key brought back to the index without its value).
    pub(super) fn new_cold(key: &[u8], loc: ColdLoc, expire_at: u64, meta: Meta) -> Entry {
        let mut e = Entry::new_string(key, &[], expire_at, meta);
        e.make_cold(loc);
        e
    }

    /// Promotion: the value read back from disk replaces the location.
    pub(super) fn warm_up(&mut self, value: Value) {
        debug_assert!(self.is_cold());
        if let Body::Packed(b) = &mut self.body {
            b[0] &= !COLD;
        }
        self.replace_value(value);
    }

    /// What the key costs with its share of the tables (MEMORY USAGE).
    pub fn usage(&self) -> usize {
        self.mem() + INDEX_BYTES_PER_KEY
    }

    /// Active defragmentation: moves this entry's own blocks out of sparse
    /// allocator slabs (see `sys::alloc::worth_moving`); returns how many
    /// moved. A collection's inner blocks stay where they are.
    pub(super) fn defrag(&mut self) -> u32 {
        let block = match &mut self.body {
            Body::Packed(b) => b,
            Body::Boxed(b) => &mut b.head,
        };
        if !worth_moving(block) {
            return 0;
        }
        *block = moved(std::mem::take(block));
        1
    }

    /// The value, giving up the entry (RENAME, MOVE).
    pub fn into_value(self) -> Value {
        debug_assert!(!self.is_cold(), "into_value() of a cold entry");
        match self.body {
            Body::Packed(b) => Value::Str(b[key_range(&b).1..].to_vec()),
            Body::Boxed(b) => b.value,
        }
    }

    /// Bytes this entry's own blocks hold, as the allocator counts them
    /// (its size classes), and its node in the expiry set: what
    /// `used_memory` and `maxmemory` see of it beside the tables.
    pub fn mem(&self) -> usize {
        let expiry_set = if self.expire_at() != 0 { EXPIRY_BYTES - 8 } else { 0 };
        expiry_set
            + match &self.body {
                Body::Packed(b) => size_class(b.len()),
                Body::Boxed(b) => {
                    size_class(std::mem::size_of::<Boxed>()) + size_class(b.head.len()) + b.value.mem_bytes()
                }
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Clock;
    use crate::store::list::ListValue;

    fn meta() -> Meta {
        EntryState::new(&Clock::at(1))
    }

    #[test]
    fn an_entry_is_32_bytes() {
        assert_eq!(std::mem::size_of::<Entry>(), 32);
        assert!(std::mem::size_of::<Body>() == 16);
    }

    #[test]
    fn packed_string_round_trips_key_value_and_expiry() {
        for key_len in [0usize, 1, 127, 128, 300, 20_000] {
            let key = vec![b'k'; key_len];
            for expire in [0u64, 1, 1_700_000_000_000] {
                let e = Entry::new(&key, Value::Str(b"value".to_vec()), expire, meta());
                assert_eq!(e.key(), &key[..]);
                assert_eq!(e.expire_at(), expire);
                assert!(matches!(e.value(), ValueRef::Str(b"value")));
            }
        }
    }

    #[test]
    fn expiry_changes_keep_key_and_value() {
        let mut e = Entry::new(b"key", Value::Str(b"v".to_vec()), 0, meta());
        e.set_expire_at(42);
        assert_eq!((e.key(), e.expire_at()), (&b"key"[..], 42));
        assert!(matches!(e.value(), ValueRef::Str(b"v")));
        e.set_expire_at(0);
        assert_eq!(e.expire_at(), 0);
        let mut l = Entry::new(b"list", Value::List(ListValue::default()), 7, meta());
        l.set_expire_at(9);
        assert_eq!((l.key(), l.expire_at()), (&b"list"[..], 9));
        assert!(matches!(l.value(), ValueRef::List(_)));
    }

    #[test]
    fn a_written_string_is_packed_again_unless_large() {
        let mut e = Entry::new(b"k", Value::Str(b"ab".to_vec()), 5, meta());
        let Value::Str(s) = e.value_mut() else { panic!() };
        s.extend_from_slice(b"cd");
        e.compact();
        assert!(matches!(e.body, Body::Packed(_)));
        assert!(matches!(e.value(), ValueRef::Str(b"abcd")));
        assert_eq!(e.expire_at(), 5);
        let Value::Str(s) = e.value_mut() else { panic!() };
        s.resize(10_000, b'x');
        e.compact();
        assert!(matches!(e.body, Body::Boxed(_)), "a large string being appended to stays growable");
        assert!(matches!(e.value(), ValueRef::Str(s) if s.len() == 10_000));
    }

    #[test]
    fn replacing_the_value_keeps_key_and_expiry() {
        let mut e = Entry::new(b"k", Value::List(ListValue::default()), 3, meta());
        e.replace_value(Value::Str(b"s".to_vec()));
        assert!(matches!(e.body, Body::Packed(_)));
        assert_eq!((e.key(), e.expire_at()), (&b"k"[..], 3));
        assert!(matches!(e.value(), ValueRef::Str(b"s")));
    }

    #[test]
    fn memory_counts_size_classes() {
        // 1 flag byte + 1 length byte + 10 key bytes + 16 value bytes = 28 -> 32.
        let e = Entry::new(b"key:123456", Value::Str(vec![b'v'; 16]), 0, meta());
        assert_eq!(e.mem(), 32);
        assert_eq!(e.usage(), INDEX_BYTES_PER_KEY + 32);
    }
}
