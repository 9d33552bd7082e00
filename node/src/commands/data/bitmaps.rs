//! Bitmap commands on string values: SETBIT, GETBIT, BITCOUNT, BITPOS,
//! BITOP, BITFIELD and BITFIELD_RO. A bitmap is a string (`Value::Str`);
//! bit 0 is the most significant bit of the first byte, as in Redis.

use super::strings::{max_string_len, string_bytes};
use crate::base::{eq_ic, parse_i64};
use crate::commands::args::c_str;
use crate::commands::{CmdError, CmdResult, CommandDef, Ctx, Keys, arg_i64, err, flags};
use crate::config::keyspace_events as ev;
use crate::protocol::Reply;
use crate::store::{Changed, Value};
use smallvec::SmallVec;

const WD: u32 = flags::WRITE | flags::DENYOOM;
const R: u32 = flags::READONLY;
const F: u32 = flags::FAST;

pub const COMMANDS: &[CommandDef] = &[
    CommandDef::new("setbit", 4, WD, Keys::Range(1, 1, 1), setbit).acl("@write @bitmap @slow"),
    CommandDef::new("getbit", 3, R | F, Keys::Range(1, 1, 1), getbit).acl("@read @bitmap @fast"),
    CommandDef::new("bitcount", -2, R, Keys::Range(1, 1, 1), bitcount).acl("@read @bitmap @slow"),
    CommandDef::new("bitpos", -3, R, Keys::Range(1, 1, 1), bitpos).acl("@read @bitmap @slow"),
    CommandDef::new("bitop", -4, WD, Keys::Range(2, -1, 1), bitop).acl("@write @bitmap @slow"),
    CommandDef::new("bitfield", -2, WD, Keys::Range(1, 1, 1), bitfield).acl("@write @bitmap @slow"),
    CommandDef::new("bitfield_ro", -2, R | F, Keys::Range(1, 1, 1), bitfield_ro).acl("@read @bitmap @fast"),
];

const BIT_OFFSET: &str = "ERR bit offset is not an integer or out of range";

/// A bit offset argument (`getBitOffsetFromArgument`): a non-negative
/// integer, or `#N` meaning N * `bits` where allowed (BITFIELD), whose byte
/// fits the string size limit.
fn bit_offset(ctx: &Ctx<'_>, arg: &[u8], hash_bits: Option<u32>) -> Result<u64, CmdError> {
    let (digits, mult) = match hash_bits {
        Some(bits) if arg.len() > 1 && arg[0] == b'#' => (&arg[1..], bits as i64),
        _ => (arg, 1),
    };
    // Redis multiplies without an overflow check (two's complement wrap).
    let offset = parse_i64(digits).map(|v| v.wrapping_mul(mult)).ok_or(CmdError::from(BIT_OFFSET))?;
    if offset < 0 || (offset as u64 >> 3) >= max_string_len(ctx) {
        return Err(BIT_OFFSET.into());
    }
    Ok(offset as u64)
}

#[inline]
fn bit_at(s: &[u8], pos: u64) -> bool {
    s.get((pos >> 3) as usize).is_some_and(|b| (b >> (7 - (pos & 7))) & 1 == 1)
}

fn setbit(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    const BAD_BIT: &str = "ERR bit is not an integer or out of range";
    let offset = bit_offset(ctx, args[2], None)?;
    let on = match parse_i64(args[3]) {
        Some(0) => false,
        Some(1) => true,
        _ => return Err(BAD_BIT.into()),
    };
    let (byte, mask) = ((offset >> 3) as usize, 1u8 << (7 - (offset & 7)));
    // (the bit as it was, whether the string changed)
    let set = ctx.keys.update(args[1], |e| {
        let Value::Str(s) = e.value_mut() else { return Err(CmdError::from(err::WRONGTYPE)) };
        let grew = s.len() <= byte;
        if grew {
            s.resize(byte + 1, 0);
        }
        let was = s[byte] & mask != 0;
        if on {
            s[byte] |= mask;
        } else {
            s[byte] &= !mask;
        }
        let changed = grew || was != on;
        Ok(Changed::when(changed, (was, changed)))
    });
    let Some(set) = set else {
        let mut s = vec![0u8; byte + 1];
        if on {
            s[byte] |= mask;
        }
        ctx.keys.set(args[1], Value::Str(s), 0, false);
        ctx.notify(ev::STRING, "setbit", args[1]);
        out.int(0);
        return Ok(());
    };
    let (was, changed) = set?;
    if changed {
        ctx.notify(ev::STRING, "setbit", args[1]);
    }
    out.int(was as i64);
    Ok(())
}

fn getbit(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let offset = bit_offset(ctx, args[2], None)?;
    let bit = match ctx.keys.get(args[1]) {
        Some(e) => bit_at(string_bytes(e.value())?, offset),
        None => false,
    };
    out.int(bit as i64);
    Ok(())
}

/// Parses BIT|BYTE: true for BIT.
fn bit_unit(arg: &[u8]) -> Result<bool, CmdError> {
    let arg = c_str(arg);
    if eq_ic(arg, "bit") {
        Ok(true)
    } else if eq_ic(arg, "byte") {
        Ok(false)
    } else {
        Err(err::SYNTAX.into())
    }
}

/// Clamps a BITCOUNT/BITPOS range over `total` units (bytes or bits) like
/// Redis: negative indexes count from the end; None if empty.
fn clamp_range(start: i64, end: i64, total: i64) -> Option<(u64, u64)> {
    let start = if start < 0 { (total + start).max(0) } else { start };
    let end = if end < 0 { (total + end).max(0) } else { end };
    let end = end.min(total - 1);
    if start > end { None } else { Some((start as u64, end as u64)) }
}

/// Number of set bits in bit positions `[from, to]` of `s`.
fn count_bits(s: &[u8], from: u64, to: u64) -> u64 {
    let (first, last) = ((from >> 3) as usize, (to >> 3) as usize);
    let bytes = &s[first..=last];
    let mut n: u64 = 0;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        n += u64::from_ne_bytes(c.try_into().expect("8 bytes")).count_ones() as u64;
    }
    n += chunks.remainder().iter().map(|b| b.count_ones() as u64).sum::<u64>();
    // Bits of the edge bytes outside the range.
    let head = s[first] & !(0xFFu8 >> (from & 7));
    let tail = s[last] & (0x7Fu8 >> (to & 7));
    n - head.count_ones() as u64 - tail.count_ones() as u64
}

fn bitcount(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    // A missing key counts 0 before the arguments are looked at.
    let Some(e) = ctx.keys.get(args[1]) else {
        out.int(0);
        return Ok(());
    };
    let s = string_bytes(e.value())?;
    let range = match args.len() {
        2 => clamp_range(0, s.len() as i64 - 1, s.len() as i64).map(|(a, b)| (a * 8, b * 8 + 7)),
        4 | 5 => {
            let start = arg_i64(args[2])?;
            let end = arg_i64(args[3])?;
            let in_bits = args.len() == 5 && bit_unit(args[4])?;
            if start < 0 && end < 0 && start > end {
                None
            } else if in_bits {
                clamp_range(start, end, s.len() as i64 * 8)
            } else {
                clamp_range(start, end, s.len() as i64).map(|(a, b)| (a * 8, b * 8 + 7))
            }
        }
        _ => return Err(err::SYNTAX.into()),
    };
    out.int(range.map_or(0, |(from, to)| count_bits(s, from, to)) as i64);
    Ok(())
}

/// First bit equal to `bit` in bit positions `[from, to]` of `s`.
fn find_bit(s: &[u8], bit: bool, from: u64, to: u64) -> Option<u64> {
    let skip = if bit { 0x00 } else { 0xFF };
    let mut pos = from;
    while pos <= to {
        if pos & 7 == 0 && to - pos >= 7 {
            // Whole bytes: skip runs that cannot contain the bit.
            let (first, end) = ((pos >> 3) as usize, ((to + 1) >> 3) as usize);
            match s[first..end].iter().position(|&b| b != skip) {
                Some(i) => {
                    let b = s[first + i];
                    let lead = if bit { b.leading_zeros() } else { (!b).leading_zeros() };
                    return Some((first + i) as u64 * 8 + lead as u64);
                }
                None => pos = (end as u64) << 3,
            }
            continue;
        }
        if bit_at(s, pos) == bit {
            return Some(pos);
        }
        pos += 1;
    }
    None
}

fn bitpos(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let bit = match arg_i64(args[2])? {
        0 => false,
        1 => true,
        _ => return Err("ERR The bit argument must be 1 or 0.".into()),
    };
    // A missing key is an infinite run of zeros.
    let Some(e) = ctx.keys.get(args[1]) else {
        out.int(if bit { -1 } else { 0 });
        return Ok(());
    };
    let s = string_bytes(e.value())?;
    let len = s.len() as i64;
    let (range, end_given) = match args.len() {
        3 => (clamp_range(0, len - 1, len).map(|(a, b)| (a * 8, b * 8 + 7)), false),
        4..=6 => {
            let start = arg_i64(args[3])?;
            let in_bits = args.len() == 6 && bit_unit(args[5])?;
            // Without an end (never the case in BIT mode) the range runs to the last byte.
            let end = if args.len() >= 5 { arg_i64(args[4])? } else { len - 1 };
            let range = if in_bits {
                clamp_range(start, end, len * 8)
            } else {
                clamp_range(start, end, len).map(|(a, b)| (a * 8, b * 8 + 7))
            };
            (range, args.len() >= 5)
        }
        _ => return Err(err::SYNTAX.into()),
    };
    let Some((from, to)) = range else {
        out.int(-1);
        return Ok(());
    };
    let pos = match find_bit(s, bit, from, to) {
        Some(p) => p as i64,
        // Looking for a 0 with no explicit end: the string is zero-padded on
        // the right, so the answer is the first bit after the range's last byte.
        None if !bit && !end_given => ((to >> 3) as i64 + 1) * 8,
        None => -1,
    };
    out.int(pos);
    Ok(())
}

fn bitop(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    #[derive(Clone, Copy, PartialEq)]
    enum Op {
        And,
        Or,
        Xor,
        Not,
    }
    let name = c_str(args[1]);
    let op = if eq_ic(name, "and") {
        Op::And
    } else if eq_ic(name, "or") {
        Op::Or
    } else if eq_ic(name, "xor") {
        Op::Xor
    } else if eq_ic(name, "not") {
        Op::Not
    } else {
        return Err(err::SYNTAX.into());
    };
    if op == Op::Not && args.len() != 4 {
        return Err("ERR BITOP NOT must be called with a single source key.".into());
    }
    // Fold the sources into the result one by one; a missing key is an
    // empty string and shorter strings are zero-padded.
    let mut res: Vec<u8> = Vec::new();
    for (i, key) in args[3..].iter().enumerate() {
        let src: &[u8] = match ctx.keys.get(key) {
            Some(e) => string_bytes(e.value())?,
            None => &[],
        };
        if i == 0 {
            res = match op {
                Op::Not => src.iter().map(|b| !b).collect(),
                _ => src.to_vec(),
            };
            continue;
        }
        let common = res.len().min(src.len());
        let pairs = res[..common].iter_mut().zip(src);
        match op {
            Op::And => {
                pairs.for_each(|(r, s)| *r &= s);
                // Past the shorter operand one side is zero-padding.
                res[common..].fill(0);
                res.resize(res.len().max(src.len()), 0);
            }
            Op::Or | Op::Xor => {
                if op == Op::Or {
                    pairs.for_each(|(r, s)| *r |= s);
                } else {
                    pairs.for_each(|(r, s)| *r ^= s);
                }
                if src.len() > common {
                    res.extend_from_slice(&src[common..]);
                }
            }
            Op::Not => {}
        }
    }
    let len = res.len();
    if len > 0 {
        ctx.keys.set(args[2], Value::Str(res), 0, false);
        ctx.notify(ev::STRING, "set", args[2]);
    } else if ctx.keys.delete(args[2]) {
        ctx.notify(ev::GENERIC, "del", args[2]);
    }
    out.int(len as i64);
    Ok(())
}

// ---------------------------------------------------------------- BITFIELD

#[derive(Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum FieldOp {
    Get,
    Set,
    IncrBy,
}

/// One BITFIELD subcommand, with the OVERFLOW policy in force for it.
#[derive(Clone, Copy)]
struct FieldCmd {
    op: FieldOp,
    signed: bool,
    bits: u32,
    offset: u64,
    value: i64,
    overflow: Overflow,
}

/// `i1`..`i64` or `u1`..`u63`.
fn bitfield_type(arg: &[u8]) -> Result<(bool, u32), CmdError> {
    const BAD_TYPE: &str =
        "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
    let arg = c_str(arg);
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(BAD_TYPE.into()),
    };
    match parse_i64(&arg[1..]) {
        Some(bits) if bits >= 1 && bits <= if signed { 64 } else { 63 } => Ok((signed, bits as u32)),
        _ => Err(BAD_TYPE.into()),
    }
}

fn parse_bitfield(ctx: &Ctx<'_>, args: &[&[u8]]) -> Result<(SmallVec<[FieldCmd; 4]>, Option<u64>), CmdError> {
    let mut cmds: SmallVec<[FieldCmd; 4]> = SmallVec::new();
    let mut overflow = Overflow::Wrap;
    // Last bit any SET/INCRBY touches: the string grows to cover it.
    let mut highest_write: Option<u64> = None;
    let mut j = 2;
    while j < args.len() {
        let remaining = args.len() - j - 1;
        let sub = c_str(args[j]);
        let op = if eq_ic(sub, "get") && remaining >= 2 {
            FieldOp::Get
        } else if eq_ic(sub, "set") && remaining >= 3 {
            FieldOp::Set
        } else if eq_ic(sub, "incrby") && remaining >= 3 {
            FieldOp::IncrBy
        } else if eq_ic(sub, "overflow") && remaining >= 1 {
            let kind = c_str(args[j + 1]);
            overflow = if eq_ic(kind, "wrap") {
                Overflow::Wrap
            } else if eq_ic(kind, "sat") {
                Overflow::Sat
            } else if eq_ic(kind, "fail") {
                Overflow::Fail
            } else {
                return Err("ERR Invalid OVERFLOW type specified".into());
            };
            j += 2;
            continue;
        } else {
            return Err(err::SYNTAX.into());
        };
        let (signed, bits) = bitfield_type(args[j + 1])?;
        let offset = bit_offset(ctx, args[j + 2], Some(bits))?;
        let mut value = 0;
        if op != FieldOp::Get {
            let last = offset + bits as u64 - 1;
            highest_write = Some(highest_write.map_or(last, |h| h.max(last)));
            value = arg_i64(args[j + 3])?;
        }
        cmds.push(FieldCmd { op, signed, bits, offset, value, overflow });
        j += if op == FieldOp::Get { 3 } else { 4 };
    }
    Ok((cmds, highest_write))
}

fn get_unsigned(s: &[u8], offset: u64, bits: u32) -> u64 {
    (0..bits as u64).fold(0u64, |v, i| (v << 1) | bit_at(s, offset + i) as u64)
}

fn get_signed(s: &[u8], offset: u64, bits: u32) -> i64 {
    let v = get_unsigned(s, offset, bits);
    if bits < 64 && v & (1 << (bits - 1)) != 0 { (v | (u64::MAX << bits)) as i64 } else { v as i64 }
}

/// Writes the low `bits` bits of `value` at bit `offset` (inside `s`).
fn set_field(s: &mut [u8], offset: u64, bits: u32, value: u64) {
    for i in 0..bits as u64 {
        let pos = offset + i;
        let (byte, mask) = ((pos >> 3) as usize, 1u8 << (7 - (pos & 7)));
        if (value >> (bits as u64 - 1 - i)) & 1 == 1 {
            s[byte] |= mask;
        } else {
            s[byte] &= !mask;
        }
    }
}

/// Redis's `checkUnsignedBitfieldOverflow`: whether `value + incr` leaves the
/// `bits`-bit unsigned range, and the value the policy stores instead.
fn unsigned_overflow(value: u64, incr: i64, bits: u32, policy: Overflow) -> Option<u64> {
    let max = (1u64 << bits) - 1;
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = value.wrapping_neg() as i64;
    let wrapped = || value.wrapping_add(incr as u64) & max;
    if value > max || (incr > 0 && incr > max_incr) {
        Some(if policy == Overflow::Sat { max } else { wrapped() })
    } else if incr < 0 && incr < min_incr {
        Some(if policy == Overflow::Sat { 0 } else { wrapped() })
    } else {
        None
    }
}

/// Redis's `checkSignedBitfieldOverflow`, same contract for signed fields.
fn signed_overflow(value: i64, incr: i64, bits: u32, policy: Overflow) -> Option<i64> {
    let max = if bits == 64 { i64::MAX } else { (1i64 << (bits - 1)) - 1 };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let wrapped = || {
        let c = (value as u64).wrapping_add(incr as u64);
        if bits == 64 {
            c as i64
        } else if c & (1 << (bits - 1)) != 0 {
            (c | (u64::MAX << bits)) as i64
        } else {
            (c & !(u64::MAX << bits)) as i64
        }
    };
    if value > max || (bits != 64 && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr) {
        Some(if policy == Overflow::Sat { max } else { wrapped() })
    } else if value < min || (bits != 64 && incr < min_incr) || (value < 0 && incr < 0 && incr < min_incr) {
        Some(if policy == Overflow::Sat { min } else { wrapped() })
    } else {
        None
    }
}

/// Runs one SET or INCRBY on `s` (already grown to cover it) and replies with
/// the old value (SET), the new one (INCRBY), or nil when OVERFLOW FAIL hits.
/// None when OVERFLOW FAIL refused the write, else whether the stored bits changed.
fn bitfield_write(s: &mut [u8], c: &FieldCmd, out: &mut Reply) -> Option<bool> {
    // (reply, old bits, new bits, overflowed)
    let (reply, old, new, overflowed) = if c.signed {
        let old = get_signed(s, c.offset, c.bits);
        if c.op == FieldOp::IncrBy {
            let over = signed_overflow(old, c.value, c.bits, c.overflow);
            let new = over.unwrap_or(old.wrapping_add(c.value));
            (new, old as u64, new as u64, over.is_some())
        } else {
            let over = signed_overflow(c.value, 0, c.bits, c.overflow);
            (old, old as u64, over.unwrap_or(c.value) as u64, over.is_some())
        }
    } else {
        let old = get_unsigned(s, c.offset, c.bits);
        if c.op == FieldOp::IncrBy {
            let over = unsigned_overflow(old, c.value, c.bits, c.overflow);
            let new = over.unwrap_or(old.wrapping_add(c.value as u64));
            (new as i64, old, new, over.is_some())
        } else {
            let over = unsigned_overflow(c.value as u64, 0, c.bits, c.overflow);
            (old as i64, old, over.unwrap_or(c.value as u64), over.is_some())
        }
    };
    if overflowed && c.overflow == Overflow::Fail {
        out.null();
        return None;
    }
    out.int(reply);
    set_field(s, c.offset, c.bits, new);
    Some(old != new)
}

fn bitfield_read(s: &[u8], c: &FieldCmd) -> i64 {
    if c.signed { get_signed(s, c.offset, c.bits) } else { get_unsigned(s, c.offset, c.bits) as i64 }
}

fn bitfield_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, read_only_cmd: bool) -> CmdResult {
    let key = args[1];
    let (cmds, highest_write) = parse_bitfield(ctx, args)?;
    let Some(highest_write) = highest_write else {
        // Only GETs: a read that does not create the key.
        let e = ctx.keys.get(key);
        let s = match e {
            Some(e) => string_bytes(e.value())?,
            None => &[],
        };
        out.array(cmds.len());
        for c in &cmds {
            out.int(bitfield_read(s, c));
        }
        return Ok(());
    };
    if read_only_cmd {
        return Err("ERR BITFIELD_RO only supports the GET subcommand".into());
    }
    let new_string = || Value::Str(Vec::new());
    let changed = ctx.keys.update_or_create(key, new_string, |e| {
        let Value::Str(s) = e.value_mut() else { return Err(CmdError::from(err::WRONGTYPE)) };
        let needed = (highest_write >> 3) as usize + 1;
        // Like Redis, WATCH sees a change only if the string grew or bits changed.
        let mut changed = s.len() < needed;
        if changed {
            s.resize(needed, 0);
        }
        out.array(cmds.len());
        for c in &cmds {
            if c.op == FieldOp::Get {
                out.int(bitfield_read(s, c));
            } else {
                changed |= bitfield_write(s, c, out).unwrap_or(false);
            }
        }
        Ok(Changed::when(changed, changed))
    })?;
    // Announced as Redis 7.0 does: only when the string grew or bits changed.
    if changed {
        ctx.notify(ev::STRING, "setbit", key);
    }
    Ok(())
}

fn bitfield(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    bitfield_generic(ctx, args, out, false)
}

fn bitfield_ro(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    bitfield_generic(ctx, args, out, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_counting_and_searching() {
        let s = b"\x0f\xf0\x00\xff";
        assert_eq!(count_bits(s, 0, 31), 16);
        assert_eq!(count_bits(s, 4, 11), 8);
        assert_eq!(count_bits(s, 5, 10), 6);
        assert_eq!(count_bits(s, 16, 23), 0);
        assert_eq!(find_bit(s, true, 0, 31), Some(4));
        assert_eq!(find_bit(s, false, 4, 31), Some(12));
        assert_eq!(find_bit(s, true, 12, 23), None);
        assert_eq!(find_bit(s, true, 12, 31), Some(24));
        assert_eq!(find_bit(&[0xff; 20], false, 0, 159), None);
        assert_eq!(clamp_range(-2, -1, 4), Some((2, 3)));
        assert_eq!(clamp_range(0, -1, 0), None);
    }

    #[test]
    fn bitfield_fields_and_overflow() {
        let mut s = vec![0u8; 4];
        set_field(&mut s, 3, 8, 0xAB);
        assert_eq!(get_unsigned(&s, 3, 8), 0xAB);
        assert_eq!(get_signed(&s, 3, 8), 0xABu8 as i8 as i64);
        assert_eq!(get_unsigned(&s, 30, 8), 0, "reads past the end are zero");
        assert_eq!(unsigned_overflow(250, 10, 8, Overflow::Wrap), Some(4));
        assert_eq!(unsigned_overflow(250, 10, 8, Overflow::Sat), Some(255));
        assert_eq!(unsigned_overflow(5, -10, 8, Overflow::Sat), Some(0));
        assert_eq!(unsigned_overflow(5, 3, 8, Overflow::Fail), None);
        assert_eq!(signed_overflow(120, 10, 8, Overflow::Wrap), Some(-126));
        assert_eq!(signed_overflow(-120, -10, 8, Overflow::Sat), Some(-128));
        assert_eq!(signed_overflow(i64::MAX, 1, 64, Overflow::Wrap), Some(i64::MIN));
        assert_eq!(signed_overflow(i64::MAX, 1, 64, Overflow::Sat), Some(i64::MAX));
        assert_eq!(signed_overflow(-5, 3, 64, Overflow::Sat), None);
    }
}
