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
use super::rdb::{
    T_HASH, T_HASH_LISTPACK, T_LIST, T_LIST_QUICKLIST_2, T_SET, T_SET_INTSET, T_SET_LISTPACK, T_STREAM_LISTPACKS,
    T_STREAM_LISTPACKS_2, T_STREAM_LISTPACKS_3, T_STRING, T_ZSET, T_ZSET_2, T_ZSET_LISTPACK, listpack, put_str,
};
use super::set::SetValue;
use super::value::{Value, ValueRef};
use super::zset::ZSetValue;

pub use super::rdb::{DumpError, Reader, crc64, put_len};

type R<T> = Result<T, DumpError>;

/// The RDB version written in the trailer (Redis 7.0's).
pub const RDB_VERSION: u16 = 10;
/// The newest RDB version accepted (Redis 7.2's).
pub const RDB_VERSION_MAX: u16 = 11;

// ------------------------------------------------------------------ writing

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
}
