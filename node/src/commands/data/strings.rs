//! Commands on string values: GET/SET and friends, counters, ranges and LCS
//! (bitmaps, which are strings too, are `bitmaps.rs`).
//!
//! Strings are `Value::Str(Vec<u8>)`. GET and SET are the hottest path of the
//! server: one key lookup each, the value copied once, options parsed only
//! when present. Commands that modify a string in place (INCR, APPEND,
//! SETRANGE, SETBIT, ...) go through `KeyAccess::update`, which keeps the
//! key's TTL; its closure returns whether the string changed (`Changed`),
//! and a path that fails or turns out not to write leaves the key
//! unmodified for WATCH and the journal.

use crate::base::long_double::LongDouble;
use crate::base::{eq_ic, parse_i64};
use crate::commands::args::c_str;
use crate::commands::{CmdError, CmdResult, CommandDef, Ctx, Keys, arg_i64, err, flags};
use crate::config::keyspace_events as ev;
use crate::protocol::Reply;
use crate::store::{Changed, Value, ValueRef};
use std::sync::atomic::Ordering::Relaxed;

const W: u32 = flags::WRITE;
const WD: u32 = flags::WRITE | flags::DENYOOM;
const R: u32 = flags::READONLY;
const F: u32 = flags::FAST;

pub const COMMANDS: &[CommandDef] = &[
    CommandDef::new("get", 2, R | F, Keys::Range(1, 1, 1), get).acl("@read @string @fast"),
    CommandDef::new("set", -3, WD, Keys::Range(1, 1, 1), set).acl("@write @string @slow"),
    CommandDef::new("setnx", 3, WD | F, Keys::Range(1, 1, 1), setnx).acl("@write @string @fast"),
    CommandDef::new("setex", 4, WD, Keys::Range(1, 1, 1), setex).acl("@write @string @slow"),
    CommandDef::new("psetex", 4, WD, Keys::Range(1, 1, 1), psetex).acl("@write @string @slow"),
    CommandDef::new("getset", 3, WD | F, Keys::Range(1, 1, 1), getset).acl("@write @string @fast"),
    CommandDef::new("getdel", 2, W | F, Keys::Range(1, 1, 1), getdel).acl("@write @string @fast"),
    CommandDef::new("getex", -2, W | F, Keys::Range(1, 1, 1), getex).acl("@write @string @fast"),
    CommandDef::new("mget", -2, R | F, Keys::Range(1, -1, 1), mget).acl("@read @string @fast"),
    CommandDef::new("mset", -3, WD, Keys::Range(1, -1, 2), mset).acl("@write @string @slow"),
    CommandDef::new("msetnx", -3, WD, Keys::Range(1, -1, 2), msetnx).acl("@write @string @slow"),
    CommandDef::new("incr", 2, WD | F, Keys::Range(1, 1, 1), incr).acl("@write @string @fast"),
    CommandDef::new("decr", 2, WD | F, Keys::Range(1, 1, 1), decr).acl("@write @string @fast"),
    CommandDef::new("incrby", 3, WD | F, Keys::Range(1, 1, 1), incrby).acl("@write @string @fast"),
    CommandDef::new("decrby", 3, WD | F, Keys::Range(1, 1, 1), decrby).acl("@write @string @fast"),
    CommandDef::new("incrbyfloat", 3, WD | F, Keys::Range(1, 1, 1), incrbyfloat).acl("@write @string @fast"),
    CommandDef::new("append", 3, WD | F, Keys::Range(1, 1, 1), append).acl("@write @string @fast"),
    CommandDef::new("strlen", 2, R | F, Keys::Range(1, 1, 1), strlen).acl("@read @string @fast"),
    CommandDef::new("getrange", 4, R, Keys::Range(1, 1, 1), getrange).acl("@read @string @slow"),
    CommandDef::new("substr", 4, R, Keys::Range(1, 1, 1), getrange).acl("@read @string @slow"),
    CommandDef::new("setrange", 4, WD, Keys::Range(1, 1, 1), setrange).acl("@write @string @slow"),
    CommandDef::new("lcs", -3, R, Keys::Range(1, 2, 1), lcs).acl("@read @string @slow"),
];

const STRING_TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
const NAN_OR_INF: &str = "ERR increment would produce NaN or Infinity";

/// The bytes of a string value, or WRONGTYPE.
#[inline]
pub(super) fn string_bytes(v: ValueRef<'_>) -> Result<&[u8], CmdError> {
    match v {
        ValueRef::Str(s) => Ok(s),
        _ => Err(err::WRONGTYPE.into()),
    }
}

/// `proto-max-bulk-len`, the largest string a command may build.
pub(super) fn max_string_len(ctx: &Ctx<'_>) -> u64 {
    ctx.config().runtime.proto_max_bulk_len.load(Relaxed) as u64
}

/// Replaces `buf` with the decimal form of `n`, reusing its allocation.
fn write_i64(buf: &mut Vec<u8>, n: i64) {
    let mut digits = [0u8; 20];
    buf.clear();
    buf.extend_from_slice(i64_text(n, &mut digits));
}

/// The decimal form of `n`, written at the end of `digits`.
fn i64_text(n: i64, digits: &mut [u8; 20]) -> &[u8] {
    let mut i = digits.len();
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if n < 0 {
        i -= 1;
        digits[i] = b'-';
    }
    &digits[i..]
}

// ---------------------------------------------------------------- GET / SET

fn get(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    match ctx.keys.get(args[1]) {
        Some(e) => out.bulk(string_bytes(e.value())?),
        None => out.null(),
    }
    Ok(())
}

/// How an expire argument is read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ExpireUnit {
    /// EX: seconds from now.
    Ex,
    /// PX: milliseconds from now.
    Px,
    /// EXAT: unix time in seconds.
    ExAt,
    /// PXAT: unix time in milliseconds.
    PxAt,
}

impl ExpireUnit {
    fn from_keyword(opt: &[u8]) -> Option<ExpireUnit> {
        match opt.len() {
            2 if eq_ic(opt, "ex") => Some(ExpireUnit::Ex),
            2 if eq_ic(opt, "px") => Some(ExpireUnit::Px),
            4 if eq_ic(opt, "exat") => Some(ExpireUnit::ExAt),
            4 if eq_ic(opt, "pxat") => Some(ExpireUnit::PxAt),
            _ => None,
        }
    }

    fn is_absolute(self) -> bool {
        matches!(self, ExpireUnit::ExAt | ExpireUnit::PxAt)
    }
}

/// Converts an expire argument to an absolute unix time in ms, with Redis's
/// checks: a positive integer whose conversion to ms (and, for relative
/// units, addition of the current time) does not overflow.
fn expire_at_ms(unit: ExpireUnit, arg: &[u8], now_ms: u64, cmd: &str) -> Result<u64, CmdError> {
    let v = arg_i64(arg)?;
    let invalid = || CmdError::from(err::invalid_expire(cmd));
    if v <= 0 {
        return Err(invalid());
    }
    let ms = match unit {
        ExpireUnit::Ex | ExpireUnit::ExAt => v.checked_mul(1000).ok_or_else(invalid)?,
        ExpireUnit::Px | ExpireUnit::PxAt => v,
    };
    if unit.is_absolute() {
        return Ok(ms as u64);
    }
    ms.checked_add(now_ms as i64).map(|at| at as u64).ok_or_else(invalid)
}

/// Options of SET (NX XX GET KEEPTTL EX PX EXAT PXAT) or GETEX (EX PX EXAT
/// PXAT PERSIST), parsed like Redis's `parseExtendedStringArgumentsOrReply`:
/// conflicting options are a syntax error, repeating the same one is not.
#[derive(Default)]
struct StringOptions<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keep_ttl: bool,
    persist: bool,
    expire: Option<(ExpireUnit, &'a [u8])>,
}

impl<'a> StringOptions<'a> {
    fn parse(args: &[&'a [u8]], for_set: bool) -> Result<StringOptions<'a>, CmdError> {
        let mut o = StringOptions::default();
        let mut j = 0;
        while j < args.len() {
            let opt = c_str(args[j]);
            let next = args.get(j + 1).copied();
            let expire_unit = ExpireUnit::from_keyword(opt)
                .filter(|&u| !o.keep_ttl && !o.persist && o.expire.is_none_or(|(prev, _)| prev == u));
            if for_set && eq_ic(opt, "nx") && !o.xx {
                o.nx = true;
            } else if for_set && eq_ic(opt, "xx") && !o.nx {
                o.xx = true;
            } else if for_set && eq_ic(opt, "get") {
                o.get = true;
            } else if for_set && eq_ic(opt, "keepttl") && o.expire.is_none() {
                o.keep_ttl = true;
            } else if !for_set && eq_ic(opt, "persist") && o.expire.is_none() {
                o.persist = true;
            } else if let (Some(unit), Some(value)) = (expire_unit, next) {
                o.expire = Some((unit, value));
                j += 1;
            } else {
                return Err(err::SYNTAX.into());
            }
            j += 1;
        }
        Ok(o)
    }
}

fn set(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let (key, value) = (args[1], args[2]);
    if args.len() == 3 {
        ctx.keys.set_str(key, value, 0, false);
        ctx.notify(ev::STRING, "set", key);
        out.ok();
        return Ok(());
    }
    let o = StringOptions::parse(&args[3..], true)?;
    let expire_at = match o.expire {
        Some((unit, arg)) => expire_at_ms(unit, arg, ctx.keys.now_ms, "set")?,
        None => 0,
    };
    let found = if o.get {
        // GET replies with the old value whether or not the write happens.
        match ctx.keys.get(key) {
            Some(e) => {
                out.bulk(string_bytes(e.value())?);
                true
            }
            None => {
                out.null();
                false
            }
        }
    } else {
        (o.nx || o.xx) && ctx.keys.contains(key)
    };
    if (o.nx && found) || (o.xx && !found) {
        if !o.get {
            out.null();
        }
        return Ok(());
    }
    ctx.keys.set_str(key, value, expire_at, o.keep_ttl);
    notify_set(ctx, key, expire_at != 0);
    if !o.get {
        out.ok();
    }
    Ok(())
}

fn setnx(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    if ctx.keys.contains(args[1]) {
        out.int(0);
    } else {
        ctx.keys.set_str(args[1], args[2], 0, false);
        ctx.notify(ev::STRING, "set", args[1]);
        out.int(1);
    }
    Ok(())
}

/// SET's events: `set`, then `expire` when it gave the key a TTL.
fn notify_set(ctx: &Ctx<'_>, key: &[u8], expires: bool) {
    ctx.notify(ev::STRING, "set", key);
    if expires {
        ctx.notify(ev::GENERIC, "expire", key);
    }
}

fn set_with_expire(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, unit: ExpireUnit, cmd: &str) -> CmdResult {
    let expire_at = expire_at_ms(unit, args[2], ctx.keys.now_ms, cmd)?;
    ctx.keys.set_str(args[1], args[3], expire_at, false);
    notify_set(ctx, args[1], true);
    out.ok();
    Ok(())
}

fn setex(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    set_with_expire(ctx, args, out, ExpireUnit::Ex, "setex")
}

fn psetex(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    set_with_expire(ctx, args, out, ExpireUnit::Px, "psetex")
}

/// Replies with the string at `key` (null when missing); true if it exists.
fn reply_string(ctx: &mut Ctx<'_>, key: &[u8], out: &mut Reply) -> Result<bool, CmdError> {
    match ctx.keys.get(key) {
        Some(e) => {
            out.bulk(string_bytes(e.value())?);
            Ok(true)
        }
        None => {
            out.null();
            Ok(false)
        }
    }
}

fn getset(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    reply_string(ctx, args[1], out)?;
    ctx.keys.set_str(args[1], args[2], 0, false);
    ctx.notify(ev::STRING, "set", args[1]);
    Ok(())
}

fn getdel(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    if reply_string(ctx, args[1], out)? {
        ctx.keys.delete(args[1]);
        ctx.notify(ev::GENERIC, "del", args[1]);
    }
    Ok(())
}

fn getex(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let key = args[1];
    let o = StringOptions::parse(&args[2..], false)?;
    // A missing key answers nil before the expire argument is even checked.
    let Some(e) = ctx.keys.get(key) else {
        out.null();
        return Ok(());
    };
    // Written before the expire check: an error reply replaces it.
    out.bulk(string_bytes(e.value())?);
    let expire = match o.expire {
        Some((unit, arg)) => Some((unit, expire_at_ms(unit, arg, ctx.keys.now_ms, "getex")?)),
        None => None,
    };
    match expire {
        // An absolute time already past deletes the key, as Redis does.
        Some((unit, at)) if unit.is_absolute() && at <= ctx.keys.now_ms => {
            ctx.keys.delete(key);
            ctx.notify(ev::GENERIC, "del", key);
        }
        Some((_, at)) => {
            ctx.keys.update(key, |e| {
                e.set_expire(at);
                Changed::Yes(())
            });
            ctx.notify(ev::GENERIC, "expire", key);
        }
        None if o.persist => {
            let persisted = ctx.keys.update(key, |e| {
                if e.expire_at() == 0 {
                    return Changed::No(false);
                }
                e.set_expire(0);
                Changed::Yes(true)
            });
            if persisted == Some(true) {
                ctx.notify(ev::GENERIC, "persist", key);
            }
        }
        None => {}
    }
    Ok(())
}

fn mget(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    out.array(args.len() - 1);
    for key in &args[1..] {
        match ctx.keys.get(key).map(|e| e.value()) {
            Some(ValueRef::Str(s)) => out.bulk(s),
            _ => out.null(),
        }
    }
    Ok(())
}

fn mset(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    if args.len() % 2 == 0 {
        return Err(err::arity("mset").into());
    }
    for pair in args[1..].chunks_exact(2) {
        ctx.keys.set_str(pair[0], pair[1], 0, false);
        ctx.notify(ev::STRING, "set", pair[0]);
    }
    out.ok();
    Ok(())
}

fn msetnx(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    if args.len() % 2 == 0 {
        return Err(err::arity("msetnx").into());
    }
    if args[1..].iter().step_by(2).any(|key| ctx.keys.contains(key)) {
        out.int(0);
        return Ok(());
    }
    for pair in args[1..].chunks_exact(2) {
        ctx.keys.set_str(pair[0], pair[1], 0, false);
        ctx.notify(ev::STRING, "set", pair[0]);
    }
    out.int(1);
    Ok(())
}

// ---------------------------------------------------------------- counters

/// Adds `delta` to the integer at `key` (created as 0), keeping its TTL.
fn add_to_integer(ctx: &mut Ctx<'_>, key: &[u8], delta: i64, out: &mut Reply) -> CmdResult {
    let added = ctx.keys.update(key, |e| {
        // A small string is packed with its key: rewritten there, in place
        // when its length stays (no allocation, as Redis's integer objects).
        if let Some(s) = e.packed_string() {
            let n = parse_i64(s).ok_or(err::NOT_INT)?.checked_add(delta).ok_or(err::INCR_OVERFLOW)?;
            e.overwrite_packed_string(i64_text(n, &mut [0u8; 20]));
            return Ok(Changed::Yes(n));
        }
        add_in_value(e.value_mut(), delta)
    });
    let n = match added {
        Some(result) => result?,
        None => {
            let mut buf = Vec::with_capacity(20);
            write_i64(&mut buf, delta);
            ctx.keys.set(key, Value::Str(buf), 0, false);
            delta
        }
    };
    ctx.notify(ev::STRING, "incrby", key);
    out.int(n);
    Ok(())
}

/// INCRBY on a value that is not a packed string.
fn add_in_value(value: &mut Value, delta: i64) -> Result<Changed<i64>, &'static str> {
    match value {
        Value::Str(s) => {
            let n = parse_i64(s).ok_or(err::NOT_INT)?.checked_add(delta).ok_or(err::INCR_OVERFLOW)?;
            write_i64(s, n);
            Ok(Changed::Yes(n))
        }
        _ => Err(err::WRONGTYPE),
    }
}

fn incr(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    add_to_integer(ctx, args[1], 1, out)
}

fn decr(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    add_to_integer(ctx, args[1], -1, out)
}

fn incrby(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let delta = arg_i64(args[2])?;
    add_to_integer(ctx, args[1], delta, out)
}

fn decrby(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let delta = arg_i64(args[2])?;
    if delta == i64::MIN {
        return Err("ERR decrement would overflow".into());
    }
    add_to_integer(ctx, args[1], -delta, out)
}

fn incrbyfloat(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let key = args[1];
    let summed = ctx.keys.update(key, |e| {
        let Value::Str(s) = e.value_mut() else { return Err(CmdError::from(err::WRONGTYPE)) };
        let cur = LongDouble::parse(s).ok_or_else(|| CmdError::from(err::NOT_FLOAT))?;
        let text = float_sum(cur, args[2])?;
        s.clear();
        s.extend_from_slice(text.as_bytes());
        out.bulk(s);
        Ok(Changed::Yes(()))
    });
    match summed {
        Some(result) => result?,
        None => {
            let text = float_sum(LongDouble::ZERO, args[2])?;
            out.bulk(text.as_bytes());
            ctx.keys.set(key, Value::Str(text.into_bytes()), 0, false);
        }
    }
    ctx.notify(ev::STRING, "incrbyfloat", key);
    Ok(())
}

/// `cur + incr` in long double precision, printed as Redis stores it.
fn float_sum(cur: LongDouble, incr: &[u8]) -> Result<String, CmdError> {
    let incr = LongDouble::parse(incr).ok_or(CmdError::from(err::NOT_FLOAT))?;
    match cur.checked_add(incr) {
        Some(sum) if !sum.is_infinite() => Ok(sum.to_human_string()),
        _ => Err(NAN_OR_INF.into()),
    }
}

// ---------------------------------------------------------------- APPEND, STRLEN, ranges

fn append(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let (key, tail) = (args[1], args[2]);
    let max = max_string_len(ctx);
    let appended = ctx.keys.update(key, |e| match e.value_mut() {
        Value::Str(s) if (s.len() as u64).saturating_add(tail.len() as u64) > max => Err(STRING_TOO_LONG),
        Value::Str(s) => {
            s.extend_from_slice(tail);
            Ok(Changed::Yes(s.len()))
        }
        _ => Err(err::WRONGTYPE),
    });
    let len = match appended {
        Some(result) => result?,
        None => {
            ctx.keys.set_str(key, tail, 0, false);
            tail.len()
        }
    };
    ctx.notify(ev::STRING, "append", key);
    out.int(len as i64);
    Ok(())
}

fn strlen(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let len = match ctx.keys.get(args[1]) {
        Some(e) => string_bytes(e.value())?.len(),
        None => 0,
    };
    out.int(len as i64);
    Ok(())
}

/// GETRANGE's index arithmetic: the byte range `[start, end]` of a string of
/// `len` bytes, or None when it is empty.
fn byte_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    if (start < 0 && end < 0 && start > end) || len == 0 {
        return None;
    }
    let len = len as i64;
    let start = if start < 0 { (len + start).max(0) } else { start };
    let end = if end < 0 { (len + end).max(0) } else { end.min(len - 1) };
    if start > end { None } else { Some((start as usize, end as usize)) }
}

fn getrange(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let start = arg_i64(args[2])?;
    let end = arg_i64(args[3])?;
    let Some(e) = ctx.keys.get(args[1]) else {
        out.bulk(b"");
        return Ok(());
    };
    let s = string_bytes(e.value())?;
    match byte_range(start, end, s.len()) {
        Some((from, to)) => out.bulk(&s[from..=to]),
        None => out.bulk(b""),
    }
    Ok(())
}

fn setrange(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let (key, patch) = (args[1], args[3]);
    let offset = arg_i64(args[2])?;
    if offset < 0 {
        return Err("ERR offset is out of range".into());
    }
    let offset = offset as u64;
    let max = max_string_len(ctx);
    let fits = offset.checked_add(patch.len() as u64).is_some_and(|total| total <= max);
    let patched = ctx.keys.update(key, |e| match e.value_mut() {
        // Nothing to write: the length as is, and the key is not modified.
        Value::Str(s) if patch.is_empty() => Ok(Changed::No(s.len())),
        Value::Str(_) if !fits => Err(STRING_TOO_LONG),
        Value::Str(s) => {
            let (from, to) = (offset as usize, offset as usize + patch.len());
            if s.len() < to {
                s.resize(to, 0);
            }
            s[from..to].copy_from_slice(patch);
            Ok(Changed::Yes(s.len()))
        }
        _ => Err(err::WRONGTYPE),
    });
    match patched {
        Some(result) => {
            let len = result?;
            // An empty patch wrote nothing.
            if !patch.is_empty() {
                ctx.notify(ev::STRING, "setrange", key);
            }
            out.int(len as i64);
        }
        None => {
            if patch.is_empty() {
                out.int(0);
                return Ok(());
            }
            if !fits {
                return Err(STRING_TOO_LONG.into());
            }
            let mut s = vec![0u8; offset as usize + patch.len()];
            s[offset as usize..].copy_from_slice(patch);
            out.int(s.len() as i64);
            ctx.keys.set(key, Value::Str(s), 0, false);
            ctx.notify(ev::STRING, "setrange", key);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- LCS

fn lcs(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    const NOT_STRINGS: &str = "ERR The specified keys must contain string values";
    let mut read = |key: &[u8]| -> Result<Vec<u8>, CmdError> {
        match ctx.keys.get(key).map(|e| e.value()) {
            None => Ok(Vec::new()),
            Some(ValueRef::Str(s)) => Ok(s.to_vec()),
            Some(_) => Err(NOT_STRINGS.into()),
        }
    };
    let a = read(args[1]);
    let b = read(args[2]);
    let (a, b) = (a?, b?);

    let (mut want_len, mut want_idx, mut with_match_len, mut min_match_len) = (false, false, false, 0i64);
    let mut j = 3;
    while j < args.len() {
        let opt = c_str(args[j]);
        if eq_ic(opt, "idx") {
            want_idx = true;
        } else if eq_ic(opt, "len") {
            want_len = true;
        } else if eq_ic(opt, "withmatchlen") {
            with_match_len = true;
        } else if eq_ic(opt, "minmatchlen") && j + 1 < args.len() {
            min_match_len = arg_i64(args[j + 1])?.max(0);
            j += 1;
        } else {
            return Err(err::SYNTAX.into());
        }
        j += 1;
    }
    if want_idx && want_len {
        return Err("ERR If you want both the length and indexes, please just use IDX.".into());
    }
    if a.len() >= u32::MAX as usize - 1 || b.len() >= u32::MAX as usize - 1 {
        return Err("ERR String too long for LCS".into());
    }
    const ALLOC_FAILED: &str = "ERR Insufficient memory, failed allocating transient memory for LCS";
    let table_bytes = ((a.len() as u64 + 1) * (b.len() as u64 + 1)).checked_mul(4).ok_or(ALLOC_FAILED)?;
    if table_bytes > max_string_len(ctx) {
        return Err("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len".into());
    }
    let table = lcs_table(&a, &b).ok_or(ALLOC_FAILED)?;
    let walk = lcs_walk(&a, &b, &table, min_match_len as u64, want_idx || !want_len);
    if want_idx {
        out.map(2);
        out.bulk(b"matches");
        out.array(walk.ranges.len());
        for r in &walk.ranges {
            out.array(2 + with_match_len as usize);
            out.array(2);
            out.int(r.a.0 as i64);
            out.int(r.a.1 as i64);
            out.array(2);
            out.int(r.b.0 as i64);
            out.int(r.b.1 as i64);
            if with_match_len {
                out.int(r.len as i64);
            }
        }
        out.bulk(b"len");
        out.int(walk.len as i64);
    } else if want_len {
        out.int(walk.len as i64);
    } else {
        out.bulk(&walk.common);
    }
    Ok(())
}

/// The dynamic-programming table: `t[i*(blen+1)+j]` is the LCS length of
/// `a[..i]` and `b[..j]`. None if it cannot be allocated.
fn lcs_table(a: &[u8], b: &[u8]) -> Option<Vec<u32>> {
    let w = b.len() + 1;
    let mut t = Vec::new();
    t.try_reserve_exact((a.len() + 1) * w).ok()?;
    t.resize((a.len() + 1) * w, 0u32);
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            t[i * w + j] = if a[i - 1] == b[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    Some(t)
}

/// One matching range: inclusive positions in a and b, and its length.
struct LcsMatch {
    a: (u32, u32),
    b: (u32, u32),
    len: u32,
}

struct LcsWalk {
    len: u32,
    common: Vec<u8>,
    ranges: Vec<LcsMatch>,
}

/// Walks the table back from the end like Redis does, collecting the common
/// subsequence and its matching ranges (last ones first, at least
/// `min_len` long).
fn lcs_walk(a: &[u8], b: &[u8], t: &[u32], min_len: u64, compute: bool) -> LcsWalk {
    let w = b.len() + 1;
    let total = t[a.len() * w + b.len()];
    let mut walk = LcsWalk { len: total, common: Vec::new(), ranges: Vec::new() };
    if !compute {
        return walk;
    }
    walk.common = vec![0u8; total as usize];
    let alen = a.len() as u32;
    let (mut i, mut j, mut idx) = (a.len() as u32, b.len() as u32, total);
    // `a_start == alen` means no range is open.
    let (mut a_start, mut a_end, mut b_start, mut b_end) = (alen, 0u32, 0u32, 0u32);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i as usize - 1] == b[j as usize - 1] {
            walk.common[idx as usize - 1] = a[i as usize - 1];
            if a_start == alen {
                (a_start, a_end, b_start, b_end) = (i - 1, i - 1, j - 1, j - 1);
            } else if a_start == i && b_start == j {
                a_start -= 1;
                b_start -= 1;
            } else {
                emit = true;
            }
            if a_start == 0 || b_start == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            let up = t[(i as usize - 1) * w + j as usize];
            let left = t[i as usize * w + j as usize - 1];
            if up > left {
                i -= 1;
            } else {
                j -= 1;
            }
            if a_start != alen {
                emit = true;
            }
        }
        if emit {
            let len = a_end.wrapping_sub(a_start).wrapping_add(1);
            if min_len == 0 || len as u64 >= min_len {
                walk.ranges.push(LcsMatch { a: (a_start, a_end), b: (b_start, b_end), len });
            }
            a_start = alen;
        }
    }
    walk
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::long_double::LongDouble;

    /// strtold + addition + "%.17Lf" trimmed, as glibc on x86-64 computes them.
    fn sum(a: &str, b: &str) -> Option<String> {
        let (a, b) = (LongDouble::parse(a.as_bytes())?, LongDouble::parse(b.as_bytes())?);
        a.checked_add(b).filter(|s| !s.is_infinite()).map(|s| s.to_human_string())
    }

    #[test]
    fn long_double_sums_match_glibc() {
        // Expected values printed by a C program using long double.
        let cases = [
            ("0.1", "0.2", "0.3"),
            ("10.5", "0.1", "10.6"),
            ("5.0e3", "2.0e2", "5200"),
            ("3.0e3", "1.5", "3001.5"),
            ("1.23456789012345678901234", "0", "1.23456789012345679"),
            ("1e30", "0", "1000000000000000000024696061952"),
            ("-1e-20", "0", "0"),
            ("0x10", "0", "16"),
            ("0x1p-3", "0", "0.125"),
            (".5", "5.", "5.5"),
            ("-.5e1", "5.5", "0.5"),
            ("1e-17", "5e-18", "0.00000000000000002"),
            ("0.000000000000000005", "0", "0"),
            ("0.000000000000000015", "0", "0.00000000000000002"),
            ("1e-4940", "16", "16"),
            ("-0", "0", "0"),
            ("9223372036854775807", "1", "9223372036854775808"),
            // Exact decimal ties at the 18th decimal round to even.
            ("0.000003814697265625", "0", "0.00000381469726562"),
            ("-0x1p-18", "0", "-0.00000381469726562"),
            ("1.000003814697265625", "0", "1.00000381469726562"),
            ("0.000003814697265625", "0.000003814697265625", "0.00000762939453125"),
        ];
        for (a, b, want) in cases {
            assert_eq!(sum(a, b).as_deref(), Some(want), "{a} + {b}");
        }
        let big = sum("1e308", "1e308").expect("no overflow in long double");
        assert!(big.starts_with("19999999999999999999337175931169129132112"), "{big}");
        assert_eq!(big.len(), 309);
    }

    #[test]
    fn long_double_rejects_like_string2ld() {
        for bad in ["", " 1", "1 ", "\x0b1", "nan", "-nan", "1e", "0x", "0x1p", "abc", "1e5000", "1e-5000", "1.2e4932"]
        {
            assert!(LongDouble::parse(bad.as_bytes()).is_none(), "{bad:?}");
        }
        let long = |n: usize| [b"1.".as_slice(), &vec![b'0'; n - 2]].concat();
        assert!(LongDouble::parse(&long(5120)).is_none(), "5120 chars is over Redis's buffer");
        assert_eq!(LongDouble::parse(&long(5119)).map(|v| v.to_human_string()).as_deref(), Some("1"));
        assert!(LongDouble::parse(b"1e4932").is_some());
        assert!(LongDouble::parse(b"0e99999999999").is_some(), "an exact zero is not an underflow");
        let inf = LongDouble::parse(b"-Infinity").expect("infinity parses");
        assert!(inf.is_infinite());
        assert!(inf.checked_add(LongDouble::parse(b"inf").expect("inf")).is_none(), "inf - inf is NaN");
    }

    #[test]
    fn getrange_index_arithmetic() {
        assert_eq!(byte_range(0, -1, 5), Some((0, 4)));
        assert_eq!(byte_range(-3, -1, 5), Some((2, 4)));
        assert_eq!(byte_range(-1, -3, 5), None);
        assert_eq!(byte_range(3, 1, 5), None);
        assert_eq!(byte_range(0, 100, 5), Some((0, 4)));
        assert_eq!(byte_range(-100, 1, 5), Some((0, 1)));
        assert_eq!(byte_range(10, 20, 5), None);
        assert_eq!(byte_range(0, -1, 0), None);
        assert_eq!(byte_range(i64::MIN, i64::MAX, 3), Some((0, 2)));
    }

    #[test]
    fn lcs_matches_redis_example() {
        let (a, b) = (b"ohmytext".as_slice(), b"mynewtext".as_slice());
        let t = lcs_table(a, b).expect("small table");
        let walk = lcs_walk(a, b, &t, 0, true);
        assert_eq!(walk.len, 6);
        assert_eq!(walk.common, b"mytext");
        let ranges: Vec<_> = walk.ranges.iter().map(|r| (r.a, r.b, r.len)).collect();
        assert_eq!(ranges, vec![((4, 7), (5, 8), 4), ((2, 3), (0, 1), 2)]);
        assert_eq!(lcs_walk(a, b, &t, 4, true).ranges.len(), 1);
    }

    #[test]
    fn options_conflicts() {
        let parse = |args: &[&str], for_set: bool| {
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            StringOptions::parse(&args, for_set).map(|_| ())
        };
        assert!(parse(&["nx", "xx"], true).is_err());
        assert!(parse(&["ex", "1", "px", "1"], true).is_err());
        assert!(parse(&["ex", "1", "ex", "2"], true).is_ok());
        assert!(parse(&["keepttl", "ex", "1"], true).is_err());
        assert!(parse(&["ex"], true).is_err());
        assert!(parse(&["get", "nx", "GET"], true).is_ok());
        assert!(parse(&["persist"], true).is_err());
        assert!(parse(&["persist", "px", "1"], false).is_err());
        assert!(parse(&["nx"], false).is_err());
        assert!(parse(&["NX\0junk"], true).is_ok(), "keywords end at NUL, as in C");
    }
}
