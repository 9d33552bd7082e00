//! Redis's HyperLogLog string format, byte for byte, so HLL values move
//! between Strata and Redis (GET on one, SET on the other) unchanged.
//!
//! Layout: a 16-byte header — "HYLL", encoding (0 dense, 1 sparse), three
//! unused bytes, the cached cardinality as 8 little-endian bytes whose top
//! bit marks it stale — then the registers: 16384 6-bit registers packed
//! little-endian (dense), or a run-length code (sparse):
//! `00xxxxxx` ZERO (1..64 zero registers), `01xxxxxx yyyyyyyy` XZERO
//! (1..16384 zero registers), `1vvvvvxx` VAL (1..4 registers of 1..32).
//! The algorithms (sparse updates, merges, the count estimator) follow
//! Redis's hyperloglog.c so the bytes and counts are the same.

use crate::base::hash::murmur64a;

pub const HDR_SIZE: usize = 16;
const P: u32 = 14;
const Q: u32 = 64 - P;
pub const REGISTERS: usize = 1 << P;
const BITS: usize = 6;
const REG_MAX: u8 = (1 << BITS) - 1;
pub const DENSE_SIZE: usize = HDR_SIZE + (REGISTERS * BITS).div_ceil(8);
pub const DENSE: u8 = 0;
pub const SPARSE: u8 = 1;
const SEED: u64 = 0xadc83b19;

const ZERO_MAX_LEN: usize = 64;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// A corrupted HLL (Redis's INVALIDOBJ).
#[derive(Debug, PartialEq, Eq)]
pub struct Corrupt;

/// A new, empty HLL: sparse, one XZERO covering every register.
pub fn new_empty() -> Vec<u8> {
    let mut v = Vec::with_capacity(HDR_SIZE + 8);
    v.extend_from_slice(b"HYLL");
    v.push(SPARSE);
    v.extend_from_slice(&[0; 11]);
    push_xzero(&mut v, REGISTERS);
    v
}

/// Redis's `isHLLObjectOrReply` check: magic, a known encoding and, when
/// dense, the exact size.
pub fn is_valid(s: &[u8]) -> bool {
    s.len() >= HDR_SIZE && &s[..4] == b"HYLL" && s[4] <= SPARSE && (s[4] != DENSE || s.len() == DENSE_SIZE)
}

pub fn encoding(s: &[u8]) -> u8 {
    s[4]
}

/// The cached cardinality, when it is valid.
pub fn cached_card(s: &[u8]) -> Option<u64> {
    (s[15] & 0x80 == 0).then(|| u64::from_le_bytes(s[8..16].try_into().expect("8 bytes")))
}

pub fn set_cached_card(s: &mut [u8], card: u64) {
    s[8..16].copy_from_slice(&card.to_le_bytes());
}

pub fn invalidate_cache(s: &mut [u8]) {
    s[15] |= 0x80;
}

// ---------------------------------------------------------------------------
// Registers
// ---------------------------------------------------------------------------

/// Register `i` of a dense register array (a missing trailing byte reads as
/// zero, as Redis reads the string's terminator).
pub fn dense_get(regs: &[u8], i: usize) -> u8 {
    let bit = i * BITS;
    let (byte, fb) = (bit / 8, bit & 7);
    let b0 = regs[byte] as u16;
    let b1 = regs.get(byte + 1).copied().unwrap_or(0) as u16;
    (((b0 >> fb) | (b1 << (8 - fb))) & REG_MAX as u16) as u8
}

fn dense_set(regs: &mut [u8], i: usize, val: u8) {
    let bit = i * BITS;
    let (byte, fb) = (bit / 8, bit & 7);
    let v = val as u16;
    regs[byte] = (regs[byte] & !((REG_MAX as u16) << fb) as u8) | (v << fb) as u8;
    if let Some(next) = regs.get_mut(byte + 1) {
        let fb8 = 8 - fb;
        *next = (*next & !((REG_MAX as u16) >> fb8) as u8) | (v >> fb8) as u8;
    }
}

/// The register an element maps to and the length of its run of zero bits
/// plus one (Redis's `hllPatLen`).
fn pattern(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// One sparse opcode.
#[derive(Clone, Copy)]
enum Op {
    Zero(usize),
    XZero(usize),
    Val(u8, usize),
}

impl Op {
    /// The opcode at `p` and its length in bytes (an XZERO cut short by the
    /// end of the string reads its second byte as zero, as Redis does).
    fn at(s: &[u8], p: usize) -> (Op, usize) {
        let b = s[p];
        if b & 0xc0 == 0 {
            (Op::Zero((b & 0x3f) as usize + 1), 1)
        } else if b & 0x80 == 0 {
            let lo = s.get(p + 1).copied().unwrap_or(0) as usize;
            (Op::XZero((((b & 0x3f) as usize) << 8 | lo) + 1), 2)
        } else {
            (Op::Val(((b >> 2) & 0x1f) + 1, (b & 3) as usize + 1), 1)
        }
    }

    fn span(self) -> usize {
        match self {
            Op::Zero(n) | Op::XZero(n) | Op::Val(_, n) => n,
        }
    }
}

fn val_byte(val: u8, len: usize) -> u8 {
    0x80 | ((val - 1) << 2) | (len as u8 - 1)
}

fn push_xzero(v: &mut Vec<u8>, len: usize) {
    let l = len - 1;
    v.push((l >> 8) as u8 | 0x40);
    v.push((l & 0xff) as u8);
}

fn push_zeros(v: &mut Vec<u8>, len: usize) {
    if len > ZERO_MAX_LEN {
        push_xzero(v, len);
    } else {
        v.push(len as u8 - 1);
    }
}

/// Calls `f(first_register, op)` for every opcode of a sparse HLL; returns
/// the number of registers covered.
fn walk_sparse(s: &[u8], mut f: impl FnMut(usize, Op) -> Result<(), Corrupt>) -> Result<usize, Corrupt> {
    let mut p = HDR_SIZE;
    let mut idx = 0;
    while p < s.len() {
        let (op, len) = Op::at(s, p);
        f(idx, op)?;
        idx += op.span();
        p += len;
    }
    Ok(idx)
}

/// All registers of an HLL as one byte each (`max` merged in: Redis's
/// `hllMerge`).
pub fn merge_into(max: &mut [u8; REGISTERS], s: &[u8]) -> Result<(), Corrupt> {
    if encoding(s) == DENSE {
        let regs = &s[HDR_SIZE..];
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(regs, i));
        }
        return Ok(());
    }
    let covered = walk_sparse(s, |first, op| {
        if let Op::Val(v, n) = op {
            if first + n > REGISTERS {
                return Err(Corrupt);
            }
            for m in &mut max[first..first + n] {
                *m = (*m).max(v);
            }
        }
        Ok(())
    })?;
    if covered != REGISTERS { Err(Corrupt) } else { Ok(()) }
}

/// Converts a sparse HLL to dense in place (header and cached cardinality
/// kept); a dense one is left alone.
pub fn to_dense(s: &mut Vec<u8>) -> Result<(), Corrupt> {
    if encoding(s) == DENSE {
        return Ok(());
    }
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HDR_SIZE].copy_from_slice(&s[..HDR_SIZE]);
    dense[4] = DENSE;
    let covered = walk_sparse(s, |first, op| {
        if let Op::Val(v, n) = op {
            if first + n > REGISTERS {
                return Err(Corrupt);
            }
            for i in first..first + n {
                dense_set(&mut dense[HDR_SIZE..], i, v);
            }
        }
        Ok(())
    })?;
    if covered != REGISTERS {
        return Err(Corrupt);
    }
    *s = dense;
    Ok(())
}

/// Sets register `index` to `count` if that raises it. Ok(true) when the
/// HLL changed. A sparse HLL that would outgrow `sparse_max` bytes or needs
/// a value above 32 becomes dense (Redis's `hllSparseSet`).
pub fn set_register(s: &mut Vec<u8>, index: usize, count: u8, sparse_max: usize) -> Result<bool, Corrupt> {
    if encoding(s) == DENSE {
        let regs = &mut s[HDR_SIZE..];
        if dense_get(regs, index) < count {
            dense_set(regs, index, count);
            return Ok(true);
        }
        return Ok(false);
    }
    if count > VAL_MAX_VALUE {
        return promote(s, index, count);
    }
    // Step 1: the opcode covering `index`, and the one before it.
    let end = s.len();
    let (mut p, mut first, mut prev) = (HDR_SIZE, 0usize, None);
    let mut found = None;
    while p < end {
        let (op, len) = Op::at(s, p);
        if index < first + op.span() {
            found = Some((op, len));
            break;
        }
        prev = Some(p);
        p += len;
        first += op.span();
    }
    let Some((op, oplen)) = found else {
        return Err(Corrupt);
    };
    // Step 2: the trivial in-place cases, else the replacement sequence.
    let mut replaced = false;
    match op {
        Op::Val(old, _) if old >= count => return Ok(false),
        Op::Val(_, 1) | Op::Zero(1) => {
            s[p] = val_byte(count, 1);
            replaced = true;
        }
        _ => {}
    }
    if !replaced {
        let last = first + op.span() - 1;
        let mut seq = Vec::with_capacity(5);
        match op {
            Op::Val(cur, _) => {
                if index != first {
                    seq.push(val_byte(cur, index - first));
                }
                seq.push(val_byte(count, 1));
                if index != last {
                    seq.push(val_byte(cur, last - index));
                }
            }
            _ => {
                if index != first {
                    push_zeros(&mut seq, index - first);
                }
                seq.push(val_byte(count, 1));
                if index != last {
                    push_zeros(&mut seq, last - index);
                }
            }
        }
        // Step 3: splice it in, unless the HLL would grow past the limit.
        if seq.len() > oplen && s.len() + seq.len() - oplen > sparse_max {
            return promote(s, index, count);
        }
        // An XZERO cut short by the end of the string: Redis still counts
        // it as two bytes, so the string ends one byte short of the new
        // sequence.
        let new_len = s.len() + seq.len() - oplen;
        let op_end = (p + oplen).min(s.len());
        s.splice(p..op_end, seq);
        s.truncate(new_len);
    }
    // Step 4: merge adjacent VALs of equal value, scanning up to five
    // opcodes from the one before the change.
    let mut p = prev.unwrap_or(HDR_SIZE);
    let mut scan = 5;
    while p < s.len() && scan > 0 {
        scan -= 1;
        let (op, len) = Op::at(s, p);
        let Op::Val(v1, l1) = op else {
            p += len;
            continue;
        };
        if p + 1 < s.len()
            && let (Op::Val(v2, l2), _) = Op::at(s, p + 1)
            && v1 == v2
            && l1 + l2 <= VAL_MAX_LEN
        {
            s[p + 1] = val_byte(v1, l1 + l2);
            s.remove(p);
            continue;
        }
        p += 1;
    }
    invalidate_cache(s);
    Ok(true)
}

fn promote(s: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    to_dense(s)?;
    dense_set(&mut s[HDR_SIZE..], index, count);
    Ok(true)
}

/// Adds an element; Ok(true) when a register changed.
pub fn add(s: &mut Vec<u8>, ele: &[u8], sparse_max: usize) -> Result<bool, Corrupt> {
    let (index, count) = pattern(ele);
    set_register(s, index, count, sparse_max)
}

// ---------------------------------------------------------------------------
// Cardinality
// ---------------------------------------------------------------------------

/// Register-value histogram of a valid HLL; None when a sparse one does not
/// cover exactly every register.
pub fn histogram(s: &[u8]) -> Option<[u32; 64]> {
    let mut histo = [0u32; 64];
    if encoding(s) == DENSE {
        let regs = &s[HDR_SIZE..];
        for i in 0..REGISTERS {
            histo[dense_get(regs, i) as usize] += 1;
        }
        return Some(histo);
    }
    let covered = walk_sparse(s, |_, op| {
        match op {
            Op::Zero(n) | Op::XZero(n) => histo[0] += n as u32,
            Op::Val(v, n) => histo[v as usize] += n as u32,
        }
        Ok(())
    })
    .ok()?;
    (covered == REGISTERS).then_some(histo)
}

/// Histogram of registers held one per byte (multi-key PFCOUNT).
pub fn raw_histogram(regs: &[u8; REGISTERS]) -> [u32; 64] {
    let mut histo = [0u32; 64];
    for &r in regs {
        histo[r as usize] += 1;
    }
    histo
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

/// Ertl's improved estimator over a register histogram (Redis's `hllCount`).
pub fn estimate(histo: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - histo[Q as usize + 1] as f64) / m);
    for j in (1..=Q as usize).rev() {
        z += histo[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(histo[0] as f64 / m);
    (ALPHA_INF * m * m / z).round() as u64
}

/// PFDEBUG DECODE's text for a sparse HLL.
pub fn decode_sparse(s: &[u8]) -> String {
    let mut out = String::new();
    let _ = walk_sparse(s, |_, op| {
        let item = match op {
            Op::Zero(n) => format!("z:{n} "),
            Op::XZero(n) => format!("Z:{n} "),
            Op::Val(v, n) => format!("v:{v},{n} "),
        };
        out.push_str(&item);
        Ok(())
    });
    out.trim_matches(' ').to_string()
}

/// PFSELFTEST's register check: every register reads back what was set,
/// in dense and sparse form alike, and counts stay near the truth.
pub fn self_test() -> Result<(), String> {
    let mut regs = vec![0u8; DENSE_SIZE - HDR_SIZE];
    let mut seed = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..100 {
        let vals: Vec<u8> = (0..REGISTERS).map(|_| (next() & REG_MAX as u64) as u8).collect();
        for (i, &v) in vals.iter().enumerate() {
            dense_set(&mut regs, i, v);
        }
        for (i, &v) in vals.iter().enumerate() {
            if dense_get(&regs, i) != v {
                return Err(format!("TESTFAILED Register error at {i}"));
            }
        }
    }
    let (mut dense, mut sparse) = (new_empty(), new_empty());
    to_dense(&mut dense).map_err(|_| "TESTFAILED dense conversion".to_string())?;
    for j in 1..=10_000u64 {
        let ele = next().to_le_bytes();
        add(&mut dense, &ele, 0).map_err(|_| "TESTFAILED add".to_string())?;
        add(&mut sparse, &ele, usize::MAX).map_err(|_| "TESTFAILED add".to_string())?;
        if j % 1000 == 0 {
            let (d, sp) = (histogram(&dense), histogram(&sparse));
            if d.is_none() || d != sp {
                return Err(format!("TESTFAILED sparse and dense differ after {j} elements"));
            }
            let est = estimate(&d.expect("checked")) as f64;
            if (est - j as f64).abs() > j as f64 * 0.05 {
                return Err(format!("TESTFAILED too large error: {est} for {j} elements"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_hll_is_one_xzero_and_counts_zero() {
        let s = new_empty();
        assert_eq!(s.len(), 18);
        assert_eq!(&s[16..], &[0x7f, 0xff]);
        assert_eq!(estimate(&histogram(&s).unwrap()), 0);
    }

    #[test]
    fn sparse_and_dense_agree() {
        let (mut sp, mut de) = (new_empty(), new_empty());
        to_dense(&mut de).unwrap();
        for i in 0..2000u32 {
            let e = i.to_string();
            assert_eq!(add(&mut sp, e.as_bytes(), 1 << 20).unwrap(), add(&mut de, e.as_bytes(), 0).unwrap());
        }
        assert_eq!(encoding(&sp), SPARSE);
        assert_eq!(histogram(&sp), histogram(&de));
        let mut conv = sp.clone();
        to_dense(&mut conv).unwrap();
        assert_eq!(&conv[HDR_SIZE..], &de[HDR_SIZE..]);
    }

    #[test]
    fn self_test_passes() {
        self_test().unwrap();
    }
}
