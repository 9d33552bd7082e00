//! Readers for cache traces: each yields requests of (object id, size).
//!
//! Formats: libCacheSim's oracleGeneral (binary), the ARC block traces
//! (`.lis`, text) and plain text with one key per line. Decompression is the
//! caller's business (this module is std-only): `Format::of_path` says
//! whether the file is zstd-compressed.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, BufRead, Read};
use std::path::Path;

/// Hasher for object ids: one multiply-xorshift round (SipHash would cost
/// more than the policies themselves on multi-million-request traces).
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        let z = (self.0 ^ (self.0 >> 32)).wrapping_mul(0xD6E8_FEB8_6659_FD93);
        z ^ (z >> 32)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01B3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

pub type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// One request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub id: u64,
    /// Bytes.
    pub size: u32,
}

/// ARC traces count fixed 512-byte pages.
pub const ARC_PAGE_BYTES: u32 = 512;
/// oracleGeneral record: u32 timestamp, u64 obj_id, u32 obj_size, i64 next_access_vtime.
pub const ORACLE_RECORD_BYTES: usize = 24;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    OracleGeneral,
    /// ARC `.lis`: `start_block nblocks ignore reqno` per line.
    Arc,
    /// One key per line; every key counts as one byte (there are no sizes).
    Text,
}

impl Format {
    /// The format by file name, and whether it is zstd-compressed (`.zst`).
    pub fn of_path(path: &Path) -> (Format, bool) {
        let name = path.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
        let (name, zstd) = match name.strip_suffix(".zst") {
            Some(inner) => (inner.to_string(), true),
            None => (name, false),
        };
        let format = if name.ends_with(".bin") || name.contains("oraclegeneral") {
            Format::OracleGeneral
        } else if name.ends_with(".lis") {
            Format::Arc
        } else {
            Format::Text
        };
        (format, zstd)
    }

    /// Reads a whole (decompressed) trace.
    pub fn read(self, r: impl Read) -> io::Result<Vec<Request>> {
        match self {
            Format::OracleGeneral => read_oracle_general(r),
            Format::Arc => read_arc(io::BufReader::with_capacity(1 << 20, r)),
            Format::Text => read_text(io::BufReader::with_capacity(1 << 20, r)),
        }
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// oracleGeneral: 24-byte little-endian records, no header.
pub fn read_oracle_general(mut r: impl Read) -> io::Result<Vec<Request>> {
    let mut data = Vec::new();
    r.read_to_end(&mut data)?;
    if data.len() % ORACLE_RECORD_BYTES != 0 {
        return Err(invalid(format!("oracleGeneral: {} bytes is not a whole number of records", data.len())));
    }
    Ok(data
        .chunks_exact(ORACLE_RECORD_BYTES)
        .map(|rec| Request {
            id: u64::from_le_bytes(rec[4..12].try_into().expect("8 bytes")),
            size: u32::from_le_bytes(rec[12..16].try_into().expect("4 bytes")),
        })
        .collect())
}

/// ARC `.lis`: each line `start_block nblocks ignore reqno` stands for
/// `nblocks` requests to consecutive 512-byte pages.
pub fn read_arc(r: impl BufRead) -> io::Result<Vec<Request>> {
    let mut out = Vec::new();
    for (n, line) in r.lines().enumerate() {
        let line = line?;
        let mut fields = line.split_ascii_whitespace();
        let Some(first) = fields.next() else { continue };
        let parse = |f: Option<&str>| f.and_then(|s| s.parse::<u64>().ok());
        let (Some(start), Some(count)) = (parse(Some(first)), parse(fields.next())) else {
            return Err(invalid(format!("ARC trace line {}: expected `start_block nblocks ...`: {line}", n + 1)));
        };
        out.extend((start..start + count).map(|id| Request { id, size: ARC_PAGE_BYTES }));
    }
    Ok(out)
}

/// One key per line; keys are numbered in order of first appearance.
pub fn read_text(r: impl BufRead) -> io::Result<Vec<Request>> {
    let mut ids: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut out = Vec::new();
    for line in r.split(b'\n') {
        let mut key = line?;
        if key.last() == Some(&b'\r') {
            key.pop();
        }
        if key.is_empty() {
            continue;
        }
        let next = ids.len() as u64;
        let id = *ids.entry(key).or_insert(next);
        out.push(Request { id, size: 1 });
    }
    Ok(out)
}

/// Unique objects and the bytes they take (each at its first size seen).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footprint {
    pub objects: u64,
    pub bytes: u64,
}

pub fn footprint(trace: &[Request]) -> Footprint {
    let mut seen: IdMap<()> = IdMap::default();
    let mut bytes = 0;
    for req in trace {
        if seen.insert(req.id, ()).is_none() {
            bytes += req.size as u64;
        }
    }
    Footprint { objects: seen.len() as u64, bytes }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_told_by_file_name() {
        let of = |s: &str| Format::of_path(Path::new(s));
        assert_eq!(of("/t/cloudPhysicsIO.oracleGeneral.bin"), (Format::OracleGeneral, false));
        assert_eq!(of("P2.lis.zst"), (Format::Arc, true));
        assert_eq!(of("P2.lis"), (Format::Arc, false));
        assert_eq!(of("zipf_1.0.txt"), (Format::Text, false));
        assert_eq!(of("keys"), (Format::Text, false));
    }

    #[test]
    fn oracle_general_records_are_read_little_endian() {
        let mut data = Vec::new();
        for (ts, id, size, next) in [(1u32, 7u64, 4096u32, 1i64), (2, 1 << 40, 512, -1)] {
            data.extend(ts.to_le_bytes());
            data.extend(id.to_le_bytes());
            data.extend(size.to_le_bytes());
            data.extend(next.to_le_bytes());
        }
        let t = read_oracle_general(&data[..]).unwrap();
        assert_eq!(t, [Request { id: 7, size: 4096 }, Request { id: 1 << 40, size: 512 }]);
        assert!(read_oracle_general(&data[..30]).is_err(), "a torn record");
    }

    #[test]
    fn arc_lines_expand_to_consecutive_pages() {
        let t = read_arc(&b"100 3 0 0\n\n7 1 0 1\n"[..]).unwrap();
        let ids: Vec<u64> = t.iter().map(|r| r.id).collect();
        assert_eq!(ids, [100, 101, 102, 7]);
        assert!(t.iter().all(|r| r.size == ARC_PAGE_BYTES));
        assert!(read_arc(&b"100 x 0 0\n"[..]).is_err());
    }

    #[test]
    fn text_keys_are_numbered_by_first_appearance() {
        let t = read_text(&b"foo\r\nbar\nfoo\n\nbaz"[..]).unwrap();
        let ids: Vec<u64> = t.iter().map(|r| r.id).collect();
        assert_eq!(ids, [0, 1, 0, 2]);
        assert_eq!(footprint(&t), Footprint { objects: 3, bytes: 3 });
    }
}
