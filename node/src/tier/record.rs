//! The on-disk record: what one mutation or one demoted value looks like
//! in a segment, and how a scan tells records from garbage.
//!
//! Layout (little-endian), padded with zeros to a multiple of 8 bytes:
//! `crc32c u32 | magic u16 | kind u8 | 0 u8 | db u32 | key_len u32 |
//! value_len u32 | 0 u32 | seq u64 | expire_at_ms u64 | key | value`.
//! The crc32c covers the key and value, then the header after the crc,
//! then the segment's nonce: the costly part (key and value) is computed
//! before the appender's lock, the rest under it, and records left over
//! from an earlier use of a recycled segment file never validate.

use std::io;

/// Bytes before the key.
pub const HEADER_LEN: usize = 40;
/// Records start at multiples of this, so a scan can resynchronise.
pub const RECORD_ALIGN: usize = 8;
const MAGIC: u16 = 0x5A17;

/// What a record says happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RecordKind {
    /// The key holds `value` (a string, or a collection serialised whole).
    Set = 1,
    /// The key was deleted.
    Delete = 2,
    /// The key's expiry became `expire_at_ms` (0: persisted).
    Expire = 3,
    /// Database `db` was emptied.
    FlushDb = 4,
    /// Every database was emptied.
    FlushAll = 5,
    /// Databases `db` and the u32 in `value` were swapped (SWAPDB).
    SwapDb = 6,
}

impl RecordKind {
    fn from_u8(b: u8) -> Option<RecordKind> {
        Some(match b {
            1 => RecordKind::Set,
            2 => RecordKind::Delete,
            3 => RecordKind::Expire,
            4 => RecordKind::FlushDb,
            5 => RecordKind::FlushAll,
            6 => RecordKind::SwapDb,
            _ => return None,
        })
    }
}

/// A record borrowed from a buffer (or about to be written).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub kind: RecordKind,
    pub db: u32,
    pub key: &'a [u8],
    pub value: &'a [u8],
    /// Unix milliseconds; 0 when the key does not expire.
    pub expire_at_ms: u64,
    /// Log order, assigned by the appender (ignored by `encode`'s caller).
    pub seq: u64,
}

/// An owned copy of a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedRecord {
    pub kind: RecordKind,
    pub db: u32,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub expire_at_ms: u64,
    pub seq: u64,
}

impl Record<'_> {
    pub fn to_owned(&self) -> OwnedRecord {
        OwnedRecord {
            kind: self.kind,
            db: self.db,
            key: self.key.to_vec(),
            value: self.value.to_vec(),
            expire_at_ms: self.expire_at_ms,
            seq: self.seq,
        }
    }
}

impl OwnedRecord {
    pub fn as_record(&self) -> Record<'_> {
        Record {
            kind: self.kind,
            db: self.db,
            key: &self.key,
            value: &self.value,
            expire_at_ms: self.expire_at_ms,
            seq: self.seq,
        }
    }
}

/// Bytes a record takes in a segment, padding included.
pub fn encoded_len(key_len: usize, value_len: usize) -> usize {
    (HEADER_LEN + key_len + value_len).next_multiple_of(RECORD_ALIGN)
}

/// The crc32c of a record's key and value, which [`encode_with`] extends:
/// computed before taking the appender's lock, it keeps checksumming
/// values out of the critical section.
pub fn payload_crc(key: &[u8], value: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(key), value)
}

/// Appends the encoded, padded record to `out`.
pub fn encode(rec: &Record<'_>, nonce: u64, out: &mut impl RecordSink) {
    encode_with(rec, nonce, payload_crc(rec.key, rec.value), out)
}

/// [`encode`] with the key and value's crc32c already computed.
pub fn encode_with(rec: &Record<'_>, nonce: u64, payload_crc: u32, out: &mut impl RecordSink) {
    let mut header = [0u8; HEADER_LEN];
    header[4..6].copy_from_slice(&MAGIC.to_le_bytes());
    header[6] = rec.kind as u8;
    header[8..12].copy_from_slice(&rec.db.to_le_bytes());
    header[12..16].copy_from_slice(&(rec.key.len() as u32).to_le_bytes());
    header[16..20].copy_from_slice(&(rec.value.len() as u32).to_le_bytes());
    header[24..32].copy_from_slice(&rec.seq.to_le_bytes());
    header[32..40].copy_from_slice(&rec.expire_at_ms.to_le_bytes());
    let crc = finish_checksum(payload_crc, &header[4..], nonce);
    header[..4].copy_from_slice(&crc.to_le_bytes());
    let padding = encoded_len(rec.key.len(), rec.value.len()) - HEADER_LEN - rec.key.len() - rec.value.len();
    for part in [&header[..], rec.key, rec.value, &[0; RECORD_ALIGN][..padding]] {
        out.put(part);
    }
}

/// Where records are encoded: a `Vec<u8>` in any allocator (the log
/// stages them in huge-page-capable memory).
pub trait RecordSink {
    fn put(&mut self, bytes: &[u8]);
}

impl RecordSink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

impl<A: allocator_api2::alloc::Allocator> RecordSink for allocator_api2::vec::Vec<u8, A> {
    fn put(&mut self, bytes: &[u8]) {
        crate::sys::hugepages::extend_from_slice(self, bytes);
    }
}

/// Extends the key and value's crc with the header (after its crc field)
/// and the nonce.
fn finish_checksum(payload_crc: u32, header: &[u8], nonce: u64) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c_append(payload_crc, header), &nonce.to_le_bytes())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The bytes a record whose header starts `buf` claims (header, key and
/// value, before padding), if that header's fixed fields are valid: a scan
/// knows from it how much to read before checking the record.
pub fn claimed_len(buf: &[u8]) -> Option<usize> {
    if buf.len() < HEADER_LEN || u16::from_le_bytes([buf[4], buf[5]]) != MAGIC || buf[7] != 0 {
        return None;
    }
    RecordKind::from_u8(buf[6])?;
    if u32_at(buf, 20) != 0 {
        return None;
    }
    HEADER_LEN.checked_add(u32_at(buf, 12) as usize)?.checked_add(u32_at(buf, 16) as usize)
}

/// The record at the start of `buf` with its padded length, if one is
/// there, complete and intact. Never panics, whatever the bytes.
pub fn decode(buf: &[u8], nonce: u64) -> Option<(Record<'_>, usize)> {
    let end = claimed_len(buf)?;
    if end > buf.len()
        || finish_checksum(payload_crc(&buf[HEADER_LEN..end], &[]), &buf[4..HEADER_LEN], nonce) != u32_at(buf, 0)
    {
        return None;
    }
    let kind = RecordKind::from_u8(buf[6])?;
    let key_len = u32_at(buf, 12) as usize;
    let record = Record {
        kind,
        db: u32_at(buf, 8),
        key: &buf[HEADER_LEN..HEADER_LEN + key_len],
        value: &buf[HEADER_LEN + key_len..end],
        seq: u64_at(buf, 24),
        expire_at_ms: u64_at(buf, 32),
    };
    Some((record, end.next_multiple_of(RECORD_ALIGN).min(buf.len())))
}

/// What a scan of one segment found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Valid records.
    pub records: u64,
    /// Runs of bad bytes followed by a valid record: skipped.
    pub bad_runs: u64,
    /// Bytes in those runs.
    pub skipped_bytes: u64,
    /// Non-zero bytes after the last valid record (a torn tail): dropped.
    pub torn_tail_bytes: u64,
}

/// Where a scan reads a segment: a whole buffer, or the log's reader that
/// holds a window of it at a time. A scan's requests never start before an
/// earlier request's start, so a window only moves forward.
pub trait ScanSource {
    /// Bytes in the segment.
    fn total(&self) -> usize;
    /// Bytes `[at, at + len)`; fewer only where the segment ends.
    fn bytes(&mut self, at: usize, len: usize) -> io::Result<&[u8]>;
}

impl ScanSource for &[u8] {
    fn total(&self) -> usize {
        self.len()
    }
    fn bytes(&mut self, at: usize, len: usize) -> io::Result<&[u8]> {
        Ok(&self[at.min(self.len())..at.saturating_add(len).min(self.len())])
    }
}

/// [`decode`] at `pos` of `src`: reads the header, then as much as it
/// claims (never beyond the segment, so garbage cannot make it read more).
fn decode_at<S: ScanSource>(src: &mut S, pos: usize, nonce: u64) -> io::Result<Option<(Record<'_>, usize)>> {
    let room = src.total() - pos;
    let Some(claimed) = claimed_len(src.bytes(pos, HEADER_LEN)?) else { return Ok(None) };
    if claimed > room {
        return Ok(None);
    }
    Ok(decode(src.bytes(pos, claimed.next_multiple_of(RECORD_ALIGN))?, nonce))
}

/// Visits every valid record of the source from `start` with its offset;
/// returns where the valid data ends (where appending resumes) and the
/// counts. A bad record followed by a valid one is skipped; bad bytes with
/// no valid record after them are a torn tail. Fails only if the source
/// cannot be read.
pub fn scan<S: ScanSource>(
    src: &mut S,
    start: usize,
    nonce: u64,
    mut visit: impl FnMut(Record<'_>, usize),
) -> io::Result<(usize, ScanStats)> {
    let total = src.total();
    let mut stats = ScanStats::default();
    let mut pos = start.next_multiple_of(RECORD_ALIGN);
    let mut end = pos;
    while pos < total {
        if let Some((rec, len)) = decode_at(src, pos, nonce)? {
            visit(rec, pos);
            stats.records += 1;
            pos += len;
            end = pos;
            continue;
        }
        // Resynchronise: the next aligned offset holding a valid record,
        // counting the non-zero bytes passed on the way (a torn tail's if
        // none is found).
        let mut nonzero = 0;
        let mut next = None;
        let mut at = pos;
        while at < total {
            nonzero += src.bytes(at, RECORD_ALIGN)?.iter().filter(|&&b| b != 0).count() as u64;
            at += RECORD_ALIGN;
            if at < total && decode_at(src, at, nonce)?.is_some() {
                next = Some(at);
                break;
            }
        }
        match next {
            Some(p) => {
                stats.bad_runs += 1;
                stats.skipped_bytes += (p - pos) as u64;
                pos = p;
            }
            None => {
                stats.torn_tail_bytes = nonzero;
                break;
            }
        }
    }
    Ok((end.min(total), stats))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec<'a>(key: &'a [u8], value: &'a [u8], seq: u64) -> Record<'a> {
        Record { kind: RecordKind::Set, db: 3, key, value, expire_at_ms: 1_700_000_000_000, seq }
    }

    #[test]
    fn a_record_round_trips_and_is_padded() {
        let mut out = Vec::new();
        encode(&rec(b"key", b"value!", 7), 42, &mut out);
        assert_eq!(out.len(), encoded_len(3, 6));
        assert_eq!(out.len() % RECORD_ALIGN, 0);
        let (r, len) = decode(&out, 42).unwrap();
        assert_eq!((r, len), (rec(b"key", b"value!", 7), out.len()));
    }

    #[test]
    fn the_checksum_covers_payload_header_and_nonce_in_that_order() {
        for (key, value) in [(&b""[..], &b""[..]), (b"k", b""), (b"key", &[7u8; 5000][..])] {
            let mut out = Vec::new();
            encode(&rec(key, value, 1), 5, &mut out);
            let mut covered = [key, value].concat();
            covered.extend_from_slice(&out[4..HEADER_LEN]);
            covered.extend_from_slice(&5u64.to_le_bytes());
            assert_eq!(u32_at(&out, 0), crc32c::crc32c(&covered));
            assert!(decode(&out, 5).is_some());
        }
    }

    #[test]
    fn another_nonce_or_any_flipped_bit_invalidates_a_record() {
        let mut out = Vec::new();
        encode(&rec(b"k", b"v", 1), 42, &mut out);
        assert!(decode(&out, 43).is_none());
        for bit in 0..(HEADER_LEN + 2) * 8 {
            let mut bad = out.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(decode(&bad, 42).is_none(), "bit {bit}");
        }
    }

    #[test]
    fn scan_skips_a_bad_record_followed_by_good_ones_and_drops_a_torn_tail() {
        let mut seg = Vec::new();
        let mut offsets = Vec::new();
        for seq in 1..=5u64 {
            offsets.push(seg.len());
            encode(&rec(format!("k{seq}").as_bytes(), &[seq as u8; 100], seq), 9, &mut seg);
        }
        let full_end = seg.len();
        seg.resize(8192, 0);
        // Record 2 damaged; record 5 torn (its second half lost).
        seg[offsets[1] + HEADER_LEN + 1] ^= 0xFF;
        for b in &mut seg[offsets[4] + 60..full_end] {
            *b = 0;
        }
        let mut seen = Vec::new();
        let (end, stats) = scan(&mut &seg[..], 0, 9, |r, _| seen.push(r.seq)).unwrap();
        assert_eq!(seen, vec![1, 3, 4]);
        assert_eq!(end, offsets[4]);
        assert_eq!(stats.records, 3);
        assert_eq!(stats.bad_runs, 1);
        assert_eq!(stats.skipped_bytes, (offsets[2] - offsets[1]) as u64);
        assert!(stats.torn_tail_bytes > 0);
    }
}
