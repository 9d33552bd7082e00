//! Values serialized whole in Redis's RDB value encoding, as DUMP payloads
//! carry them: one type byte, the value, then the trailer (RDB version as
//! two little-endian bytes and a CRC-64 "Jones", little-endian, over
//! everything before it). The log stores each value this way, and DUMP /
//! RESTORE speak it with redis-server.
//!
//! Written: `STRING` (raw), `LIST` (plain, type 1), `SET` (2), `HASH` (4),
//! `ZSET_2` (5, binary doubles); RDB version 10 (Redis 7.0), so every
//! Redis ≥ 7.0 reads what Strata writes. Read besides those: string integer
//! encodings and LZF-compressed strings, `ZSET` (3, text scores),
//! `SET_INTSET` (11), `SET_LISTPACK` (20), `HASH_ZIPMAP`-free listpack
//! forms `HASH_LISTPACK` (16), `ZSET_LISTPACK` (17) and `LIST_QUICKLIST_2`
//! (18): the payloads Redis 7.0–7.2 write. Streams are written as
//! `STREAM_LISTPACKS_2` (19, Redis 7.0's) and read in that form, the older
//! `STREAM_LISTPACKS` (15) and Redis 7.2's `STREAM_LISTPACKS_3` (21); see
//! `stream_rdb`. Not read: the pre-7.0 ziplist forms (types 9–14 other than
//! 11) and modules.

use super::hash::HashValue;
use super::list::ListValue;
use super::set::SetValue;
use super::value::{Value, ValueRef};
use super::zset::ZSetValue;

/// The RDB version written in the trailer (Redis 7.0's).
pub const RDB_VERSION: u16 = 10;
/// The newest RDB version accepted (Redis 7.2's).
pub const RDB_VERSION_MAX: u16 = 11;

const T_STRING: u8 = 0;
const T_LIST: u8 = 1;
const T_SET: u8 = 2;
const T_ZSET: u8 = 3;
const T_HASH: u8 = 4;
const T_ZSET_2: u8 = 5;
const T_SET_INTSET: u8 = 11;
const T_HASH_LISTPACK: u8 = 16;
const T_ZSET_LISTPACK: u8 = 17;
const T_LIST_QUICKLIST_2: u8 = 18;
const T_SET_LISTPACK: u8 = 20;
pub(super) const T_STREAM_LISTPACKS: u8 = 15;
pub(super) const T_STREAM_LISTPACKS_2: u8 = 19;
pub(super) const T_STREAM_LISTPACKS_3: u8 = 21;

/// Why a payload was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpError {
    /// The trailer's version or checksum is wrong (Redis's "DUMP payload
    /// version or checksum are wrong").
    Trailer,
    /// The value itself is malformed or of an unsupported form ("Bad data
    /// format").
    Format,
}

// ------------------------------------------------------------------ CRC-64

/// Redis's CRC-64 (Jones polynomial, reflected, init 0, no final xor).
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    static TABLE: std::sync::OnceLock<[u64; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        const POLY: u64 = 0x95ac_9329_ac4b_c9b5; // 0xad93d23594c935a9 reflected
        let mut t = [0u64; 256];
        for (i, slot) in t.iter_mut().enumerate() {
            let mut c = i as u64;
            for _ in 0..8 {
                c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            }
            *slot = c;
        }
        t
    });
    for &b in data {
        crc = table[((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

// ------------------------------------------------------------------ writing

/// Appends an RDB length (also what FUNCTION DUMP writes).
pub fn put_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.push(0x40 | (len >> 8) as u8);
        out.push(len as u8);
    } else if len <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

pub(super) fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// Appends the RDB encoding of `value` (type byte and body, no trailer).
pub fn encode_value(value: ValueRef<'_>, out: &mut Vec<u8>) {
    match value {
        ValueRef::Str(s) => {
            out.push(T_STRING);
            put_str(out, s);
        }
        ValueRef::List(l) => {
            out.push(T_LIST);
            put_len(out, l.len() as u64);
            for e in l.iter() {
                put_str(out, e);
            }
        }
        ValueRef::Set(s) => {
            out.push(T_SET);
            put_len(out, s.len() as u64);
            for m in s.iter() {
                put_str(out, m);
            }
        }
        ValueRef::Hash(h) => {
            out.push(T_HASH);
            put_len(out, h.len() as u64);
            for (f, v) in h.iter() {
                put_str(out, f);
                put_str(out, v);
            }
        }
        ValueRef::ZSet(z) => {
            out.push(T_ZSET_2);
            put_len(out, z.len() as u64);
            for (m, score) in z.iter() {
                put_str(out, m);
                out.extend_from_slice(&score.to_le_bytes());
            }
        }
        ValueRef::Stream(st) => {
            out.push(T_STREAM_LISTPACKS_2);
            super::stream_rdb::encode(st, out);
        }
    }
}

/// A DUMP payload: the value, RDB version and CRC-64.
pub fn dump(value: ValueRef<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    encode_value(value, &mut out);
    seal(&mut out);
    out
}

/// Appends a payload's trailer (RDB version and CRC-64 of all before it),
/// for DUMP and FUNCTION DUMP alike.
pub fn seal(out: &mut Vec<u8>) {
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, out);
    out.extend_from_slice(&crc.to_le_bytes());
}

// ------------------------------------------------------------------ reading

/// Reads RDB-encoded items from a payload's body, front to back.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

type R<T> = Result<T, DumpError>;

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Everything was read.
    pub fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub(super) fn take(&mut self, n: usize) -> R<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or(DumpError::Format)?;
        let s = self.buf.get(self.pos..end).ok_or(DumpError::Format)?;
        self.pos = end;
        Ok(s)
    }

    pub fn byte(&mut self) -> R<u8> {
        Ok(self.take(1)?[0])
    }

    /// A length, or (Err-free) an encoded-string marker: (value, special).
    pub(super) fn len_or_enc(&mut self) -> R<(u64, bool)> {
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => ((b & 0x3f) as u64, false),
            1 => ((((b & 0x3f) as u64) << 8) | self.byte()? as u64, false),
            2 => match b {
                0x80 => (u32::from_be_bytes(self.take(4)?.try_into().unwrap()) as u64, false),
                0x81 => (u64::from_be_bytes(self.take(8)?.try_into().unwrap()), false),
                _ => return Err(DumpError::Format),
            },
            _ => ((b & 0x3f) as u64, true),
        })
    }

    pub(super) fn len(&mut self) -> R<usize> {
        match self.len_or_enc()? {
            (n, false) => {
                // Every element takes at least a byte: a length beyond the
                // payload is a lie, not an allocation to make.
                if n as usize > self.buf.len() { Err(DumpError::Format) } else { Ok(n as usize) }
            }
            _ => Err(DumpError::Format),
        }
    }

    /// A string in any of RDB's encodings (plain, integer, LZF).
    pub fn string(&mut self) -> R<Vec<u8>> {
        let (n, special) = self.len_or_enc()?;
        if !special {
            if n as usize > self.buf.len() {
                return Err(DumpError::Format);
            }
            return Ok(self.take(n as usize)?.to_vec());
        }
        let v: i64 = match n {
            0 => self.byte()? as i8 as i64,
            1 => i16::from_le_bytes(self.take(2)?.try_into().unwrap()) as i64,
            2 => i32::from_le_bytes(self.take(4)?.try_into().unwrap()) as i64,
            3 => {
                let clen = self.len()?;
                let ulen = self.len_or_enc()?;
                if ulen.1 || ulen.0 > (512 << 20) {
                    return Err(DumpError::Format);
                }
                let data = self.take(clen)?;
                return lzf_decompress(data, ulen.0 as usize);
            }
            _ => return Err(DumpError::Format),
        };
        Ok(v.to_string().into_bytes())
    }
}

/// LZF decompression (liblzf's format, as Redis compresses strings).
fn lzf_decompress(inp: &[u8], out_len: usize) -> R<Vec<u8>> {
    let mut out = Vec::with_capacity(out_len);
    let mut i = 0;
    while i < inp.len() {
        let ctrl = inp[i] as usize;
        i += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            let lit = inp.get(i..i + n).ok_or(DumpError::Format)?;
            out.extend_from_slice(lit);
            i += n;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *inp.get(i).ok_or(DumpError::Format)? as usize;
                i += 1;
            }
            let low = *inp.get(i).ok_or(DumpError::Format)? as usize;
            i += 1;
            let back = ((ctrl & 0x1f) << 8) + low + 1;
            if back > out.len() {
                return Err(DumpError::Format);
            }
            let start = out.len() - back;
            for k in 0..len + 2 {
                let b = out[start + k];
                out.push(b);
            }
        }
        if out.len() > out_len {
            return Err(DumpError::Format);
        }
    }
    if out.len() != out_len {
        return Err(DumpError::Format);
    }
    Ok(out)
}

/// The entries of a listpack, as strings (integers in decimal).
pub(super) fn listpack(lp: &[u8]) -> R<Vec<Vec<u8>>> {
    if lp.len() < 7 || u32::from_le_bytes(lp[0..4].try_into().unwrap()) as usize != lp.len() {
        return Err(DumpError::Format);
    }
    let mut out = Vec::new();
    let mut p = 6;
    loop {
        let b = *lp.get(p).ok_or(DumpError::Format)?;
        if b == 0xff {
            break;
        }
        let get = |from: usize, n: usize| lp.get(from..from + n).ok_or(DumpError::Format);
        let (entry, head): (Vec<u8>, usize) = if b & 0x80 == 0 {
            ((b & 0x7f).to_string().into_bytes(), 1)
        } else if b & 0xc0 == 0x80 {
            let n = (b & 0x3f) as usize;
            (get(p + 1, n)?.to_vec(), 1 + n)
        } else if b & 0xe0 == 0xc0 {
            let raw = (((b & 0x1f) as u16) << 8) | *lp.get(p + 1).ok_or(DumpError::Format)? as u16;
            let v = ((raw << 3) as i16 >> 3) as i64;
            (v.to_string().into_bytes(), 2)
        } else if b & 0xf0 == 0xe0 {
            let n = (((b & 0x0f) as usize) << 8) | *lp.get(p + 1).ok_or(DumpError::Format)? as usize;
            (get(p + 2, n)?.to_vec(), 2 + n)
        } else {
            match b {
                0xf0 => {
                    let n = u32::from_le_bytes(get(p + 1, 4)?.try_into().unwrap()) as usize;
                    (get(p + 5, n)?.to_vec(), 5 + n)
                }
                0xf1 => (i16::from_le_bytes(get(p + 1, 2)?.try_into().unwrap()).to_string().into_bytes(), 3),
                0xf2 => {
                    let s = get(p + 1, 3)?;
                    let v = (i32::from_le_bytes([0, s[0], s[1], s[2]]) >> 8) as i64;
                    (v.to_string().into_bytes(), 4)
                }
                0xf3 => (i32::from_le_bytes(get(p + 1, 4)?.try_into().unwrap()).to_string().into_bytes(), 5),
                0xf4 => (i64::from_le_bytes(get(p + 1, 8)?.try_into().unwrap()).to_string().into_bytes(), 9),
                _ => return Err(DumpError::Format),
            }
        };
        let backlen = match head {
            0..=127 => 1,
            128..=16382 => 2,
            16383..=2097150 => 3,
            2097151..=268435454 => 4,
            _ => 5,
        };
        p += head + backlen;
        out.push(entry);
    }
    let n = u16::from_le_bytes(lp[4..6].try_into().unwrap());
    if n != u16::MAX && n as usize != out.len() {
        return Err(DumpError::Format);
    }
    Ok(out)
}

fn intset(s: &[u8]) -> R<Vec<Vec<u8>>> {
    if s.len() < 8 {
        return Err(DumpError::Format);
    }
    let width = u32::from_le_bytes(s[0..4].try_into().unwrap()) as usize;
    let n = u32::from_le_bytes(s[4..8].try_into().unwrap()) as usize;
    if !matches!(width, 2 | 4 | 8) || s.len() != 8 + width * n {
        return Err(DumpError::Format);
    }
    Ok(s[8..]
        .chunks_exact(width)
        .map(|c| {
            let v = match width {
                2 => i16::from_le_bytes(c.try_into().unwrap()) as i64,
                4 => i32::from_le_bytes(c.try_into().unwrap()) as i64,
                _ => i64::from_le_bytes(c.try_into().unwrap()),
            };
            v.to_string().into_bytes()
        })
        .collect())
}

fn parse_score(s: &[u8]) -> R<f64> {
    let text = std::str::from_utf8(s).map_err(|_| DumpError::Format)?;
    match text {
        "inf" | "+inf" => Ok(f64::INFINITY),
        "-inf" => Ok(f64::NEG_INFINITY),
        _ => text.parse::<f64>().ok().filter(|v| !v.is_nan()).ok_or(DumpError::Format),
    }
}

fn build_set(members: Vec<Vec<u8>>) -> R<Value> {
    let mut s = SetValue::default();
    for m in members {
        if !s.insert(&m) {
            return Err(DumpError::Format);
        }
    }
    Ok(Value::Set(s))
}

fn build_hash(pairs: Vec<(Vec<u8>, Vec<u8>)>) -> R<Value> {
    let mut h = HashValue::default();
    for (f, v) in pairs {
        if !h.insert(&f, v) {
            return Err(DumpError::Format);
        }
    }
    Ok(Value::Hash(h))
}

fn build_zset(pairs: Vec<(Vec<u8>, f64)>) -> R<Value> {
    let max_len = pairs.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
    let mut z = ZSetValue::with_encoding_for(pairs.len(), max_len);
    for (m, s) in pairs {
        if s.is_nan() || !z.insert(&m, s) {
            return Err(DumpError::Format);
        }
    }
    Ok(Value::ZSet(z))
}

/// Decodes one value (type byte and body) that fills `buf` exactly.
pub fn decode_value(buf: &[u8]) -> R<Value> {
    let mut r = Reader { buf, pos: 0 };
    let value = match r.byte()? {
        T_STRING => Value::Str(r.string()?),
        T_LIST => {
            let n = r.len()?;
            let mut l = ListValue::default();
            for _ in 0..n {
                l.push_back(r.string()?);
            }
            Value::List(l)
        }
        T_LIST_QUICKLIST_2 => {
            let nodes = r.len()?;
            let mut l = ListValue::default();
            for _ in 0..nodes {
                let container = r.len()?;
                let node = r.string()?;
                match container {
                    1 => l.push_back(node),
                    2 => listpack(&node)?.into_iter().for_each(|e| l.push_back(e)),
                    _ => return Err(DumpError::Format),
                }
            }
            Value::List(l)
        }
        T_SET => {
            let n = r.len()?;
            build_set((0..n).map(|_| r.string()).collect::<R<_>>()?)?
        }
        T_SET_INTSET => build_set(intset(&r.string()?)?)?,
        T_SET_LISTPACK => build_set(listpack(&r.string()?)?)?,
        T_HASH => {
            let n = r.len()?;
            build_hash((0..n).map(|_| Ok((r.string()?, r.string()?))).collect::<R<_>>()?)?
        }
        T_HASH_LISTPACK => {
            let items = listpack(&r.string()?)?;
            if items.len() % 2 != 0 {
                return Err(DumpError::Format);
            }
            let mut it = items.into_iter();
            let mut pairs = Vec::new();
            while let (Some(f), Some(v)) = (it.next(), it.next()) {
                pairs.push((f, v));
            }
            build_hash(pairs)?
        }
        T_ZSET_2 => {
            let n = r.len()?;
            let mut pairs = Vec::with_capacity(n.min(1 << 16));
            for _ in 0..n {
                let m = r.string()?;
                let s = f64::from_le_bytes(r.take(8)?.try_into().unwrap());
                pairs.push((m, s));
            }
            build_zset(pairs)?
        }
        T_ZSET => {
            let n = r.len()?;
            let mut pairs = Vec::with_capacity(n.min(1 << 16));
            for _ in 0..n {
                let m = r.string()?;
                let len = r.byte()? as usize;
                let s = match len {
                    253 => f64::NAN,
                    254 => f64::INFINITY,
                    255 => f64::NEG_INFINITY,
                    _ => parse_score(r.take(len)?)?,
                };
                pairs.push((m, s));
            }
            build_zset(pairs)?
        }
        T_ZSET_LISTPACK => {
            let items = listpack(&r.string()?)?;
            if items.len() % 2 != 0 {
                return Err(DumpError::Format);
            }
            let mut pairs = Vec::new();
            for pair in items.chunks_exact(2) {
                pairs.push((pair[0].clone(), parse_score(&pair[1])?));
            }
            build_zset(pairs)?
        }
        t @ (T_STREAM_LISTPACKS | T_STREAM_LISTPACKS_2 | T_STREAM_LISTPACKS_3) => {
            Value::Stream(Box::new(super::stream_rdb::decode(&mut r, t)?))
        }
        _ => return Err(DumpError::Format),
    };
    if r.pos != buf.len() {
        return Err(DumpError::Format);
    }
    if value.as_ref().is_empty_collection() {
        return Err(DumpError::Format);
    }
    Ok(value)
}

/// Checks a DUMP payload's trailer; returns the value's bytes.
pub fn check_payload(payload: &[u8]) -> R<&[u8]> {
    if payload.len() < 10 {
        return Err(DumpError::Trailer);
    }
    let (body, crc) = payload.split_at(payload.len() - 8);
    let version = u16::from_le_bytes(body[body.len() - 2..].try_into().unwrap());
    if version > RDB_VERSION_MAX {
        return Err(DumpError::Trailer);
    }
    if crc64(0, body) != u64::from_le_bytes(crc.try_into().unwrap()) {
        return Err(DumpError::Trailer);
    }
    Ok(&body[..body.len() - 2])
}

/// Decodes a DUMP payload.
pub fn undump(payload: &[u8]) -> R<Value> {
    decode_value(check_payload(payload)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_matches_redis_check_value() {
        // Redis's crc64 test: crc64(0, "123456789") == 0xe9c6d914c4b8d9ca.
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn redis_payloads_are_read() {
        // DUMP of `SET k "hello"` and `SET k 123` on redis-server 7.0.
        let hello = b"\x00\x05hello\x0a\x00";
        let mut p = hello.to_vec();
        p.extend_from_slice(&crc64(0, hello).to_le_bytes());
        assert!(matches!(undump(&p), Ok(Value::Str(s)) if s == b"hello"));
        let int = b"\x00\xc0\x7b\x0a\x00";
        let mut p = int.to_vec();
        p.extend_from_slice(&crc64(0, int).to_le_bytes());
        assert!(matches!(undump(&p), Ok(Value::Str(s)) if s == b"123"));
        let mut bad = p.clone();
        bad[1] ^= 1;
        assert_eq!(undump(&bad).err(), Some(DumpError::Trailer));
    }

    #[test]
    fn every_type_round_trips() {
        let mut l = ListValue::default();
        l.push_back(b"a".to_vec());
        l.push_back(vec![7; 300]);
        let mut h = HashValue::default();
        h.insert(b"f", b"v".to_vec());
        let mut s = SetValue::default();
        s.insert(b"m");
        s.insert(b"12");
        let mut z = ZSetValue::default();
        z.insert(b"x", 1.5);
        z.insert(b"y", f64::NEG_INFINITY);
        for v in [Value::Str(vec![1; 20000]), Value::List(l), Value::Hash(h), Value::Set(s), Value::ZSet(z)] {
            let p = dump(v.as_ref());
            let back = undump(&p).unwrap();
            assert_eq!(dump(back.as_ref()), p);
        }
        // Truncations are refused, never a panic.
        let p = dump(ValueRef::Str(b"abc"));
        for n in 0..p.len() {
            assert!(undump(&p[..n]).is_err());
            assert!(decode_value(&p[..n.min(p.len() - 10)]).is_err() || n >= p.len() - 10);
        }
    }

    #[test]
    fn lzf_back_references() {
        // "aaaaaaaaaa": literal 'a', then a back-reference of length 9 at distance 1.
        let data = [0u8, b'a', (7 << 5), 9 - 2 - 7, 0];
        assert_eq!(lzf_decompress(&data, 10).unwrap(), b"aaaaaaaaaa");
    }
}
