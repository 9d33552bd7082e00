//! List commands: pushes and pops (LPUSH, RPOP, LMPOP, ...), reads (LRANGE,
//! LINDEX, LPOS, LLEN), edits (LSET, LREM, LTRIM, LINSERT), moves (LMOVE,
//! RPOPLPUSH) and the blocking variants (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH,
//! BLMPOP).
//!
//! Blocking commands first try to serve themselves like their non-blocking
//! twin. When every key is empty they register with `Ctx::block` and write
//! nothing, leaving a `ListWaiter` that the next command writing one of the
//! keys uses to hand them their element(s), in the order clients blocked.

use super::typed::{write_value, write_value_or_create};
use crate::base::{eq_ic, parse_i64};
use crate::commands::{
    BlockedOp, CmdError, CmdResult, CommandDef, Ctx, Keys, Readiness, arg_i64, err, flags, parse_block_timeout,
};
use crate::config::keyspace_events as ev;
use crate::protocol::Reply;
use crate::store::list::ListValue;
use crate::store::{Changed, KeyAccess, Value, ValueRef};
use smallvec::SmallVec;
use std::ops::Range;
use std::sync::atomic::Ordering::Relaxed;

const W: u32 = flags::WRITE;
const R: u32 = flags::READONLY;
const GROW: u32 = flags::WRITE | flags::DENYOOM;
const BLOCK: u32 = flags::WRITE | flags::NOSCRIPT | flags::BLOCKING;

pub const COMMANDS: &[CommandDef] = &[
    CommandDef::new("lpush", -3, GROW | flags::FAST, Keys::Range(1, 1, 1), lpush).acl("@write @list @fast"),
    CommandDef::new("rpush", -3, GROW | flags::FAST, Keys::Range(1, 1, 1), rpush).acl("@write @list @fast"),
    CommandDef::new("lpushx", -3, GROW | flags::FAST, Keys::Range(1, 1, 1), lpushx).acl("@write @list @fast"),
    CommandDef::new("rpushx", -3, GROW | flags::FAST, Keys::Range(1, 1, 1), rpushx).acl("@write @list @fast"),
    CommandDef::new("lpop", -2, W | flags::FAST, Keys::Range(1, 1, 1), lpop).acl("@write @list @fast"),
    CommandDef::new("rpop", -2, W | flags::FAST, Keys::Range(1, 1, 1), rpop).acl("@write @list @fast"),
    CommandDef::new("lrange", 4, R, Keys::Range(1, 1, 1), lrange).acl("@read @list @slow"),
    CommandDef::new("llen", 2, R | flags::FAST, Keys::Range(1, 1, 1), llen).acl("@read @list @fast"),
    CommandDef::new("lindex", 3, R, Keys::Range(1, 1, 1), lindex).acl("@read @list @slow"),
    CommandDef::new("lset", 4, GROW, Keys::Range(1, 1, 1), lset).acl("@write @list @slow"),
    CommandDef::new("lrem", 4, W, Keys::Range(1, 1, 1), lrem).acl("@write @list @slow"),
    CommandDef::new("ltrim", 4, W, Keys::Range(1, 1, 1), ltrim).acl("@write @list @slow"),
    CommandDef::new("linsert", 5, GROW, Keys::Range(1, 1, 1), linsert).acl("@write @list @slow"),
    CommandDef::new("lpos", -3, R, Keys::Range(1, 1, 1), lpos).acl("@read @list @slow"),
    CommandDef::new("lmove", 5, GROW, Keys::Range(1, 2, 1), lmove).acl("@write @list @slow"),
    CommandDef::new("rpoplpush", 3, GROW, Keys::Range(1, 2, 1), rpoplpush).acl("@write @list @slow"),
    CommandDef::new("lmpop", -4, W, Keys::Custom(lmpop_keys), lmpop).acl("@write @list @slow"),
    CommandDef::new("blpop", -3, BLOCK, Keys::Range(1, -2, 1), blpop).acl("@write @list @slow @blocking"),
    CommandDef::new("brpop", -3, BLOCK, Keys::Range(1, -2, 1), brpop).acl("@write @list @slow @blocking"),
    CommandDef::new("blmove", 6, BLOCK | flags::DENYOOM, Keys::Range(1, 2, 1), blmove)
        .acl("@write @list @slow @blocking"),
    CommandDef::new("brpoplpush", 4, BLOCK | flags::DENYOOM, Keys::Range(1, 2, 1), brpoplpush)
        .acl("@write @list @slow @blocking"),
    CommandDef::new("blmpop", -5, W | flags::BLOCKING, Keys::Custom(blmpop_keys), blmpop)
        .acl("@write @list @slow @blocking"),
];

const POP_COUNT_RANGE: &str = "ERR value is out of range, must be positive";
const RANK_ZERO: &str = "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use \
                         negative to start from the end of the list";
const COUNT_NEGATIVE: &str = "ERR COUNT can't be negative";
const MAXLEN_NEGATIVE: &str = "ERR MAXLEN can't be negative";
const NUMKEYS_RANGE: &str = "ERR numkeys should be greater than 0";
const MPOP_COUNT_RANGE: &str = "ERR count should be greater than 0";

/// Which end of a list.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Left,
    Right,
}

impl End {
    fn parse(arg: &[u8]) -> Result<End, CmdError> {
        if eq_ic(arg, "left") {
            Ok(End::Left)
        } else if eq_ic(arg, "right") {
            Ok(End::Right)
        } else {
            Err(err::SYNTAX.into())
        }
    }
}

fn push_at(list: &mut ListValue, end: End, v: Vec<u8>) {
    match end {
        End::Left => list.push_front(v),
        End::Right => list.push_back(v),
    }
}

fn pop_at(list: &mut ListValue, end: End) -> Option<Vec<u8>> {
    match end {
        End::Left => list.pop_front(),
        End::Right => list.pop_back(),
    }
}

fn new_list() -> Value {
    Value::List(ListValue::default())
}

/// A non-negative integer argument, or `msg` (Redis's getPositiveLong...OrReply).
fn arg_non_negative(arg: &[u8], msg: &'static str) -> Result<i64, CmdError> {
    match parse_i64(arg) {
        Some(n) if n >= 0 => Ok(n),
        _ => Err(msg.into()),
    }
}

/// Redis's LRANGE/LTRIM index normalization: negative indexes count from
/// the end, out-of-range ends are clamped; None when nothing is selected.
fn clamp_range(start: i64, end: i64, len: usize) -> Option<Range<usize>> {
    let len = len as i64;
    let start = if start < 0 { (len + start).max(0) } else { start };
    let end = if end < 0 { len + end } else { end };
    if start > end || start >= len {
        return None;
    }
    let end = end.min(len - 1);
    Some(start as usize..end as usize + 1)
}

/// A LINDEX/LSET index resolved against the list length.
fn resolve_index(index: i64, len: usize) -> Option<usize> {
    let i = if index < 0 { index.checked_add(len as i64)? } else { index };
    if (0..len as i64).contains(&i) { Some(i as usize) } else { None }
}

/// True while the connection re-runs a blocked command (`Readiness::Retry`).
/// Redis 7.0 keeps such a client blocked when a key it waits on turned into
/// another type, so a retry skips wrong-typed keys instead of failing.
fn is_retry(ctx: &Ctx<'_>) -> bool {
    ctx.client.info.blocked.load(Relaxed)
}

/// Blocks on `keys` until the deadline, then replies with a null array
/// (Redis 7.0 uses that for every list command's timeout, BLMOVE included).
/// Where blocking is not allowed (MULTI/EXEC), replies `denied` right away.
fn block_or_reply(
    ctx: &mut Ctx<'_>,
    keys: &[&[u8]],
    deadline_ms: u64,
    out: &mut Reply,
    denied: fn(&mut Reply),
    waiter: ListWaiter,
) {
    if ctx.can_block() {
        ctx.block_serving(keys, deadline_ms, |o| o.null_array(), Box::new(waiter));
    } else {
        denied(out);
    }
}

/// What a blocked list command takes once one of its keys has elements.
enum ListWaiter {
    /// BLPOP/BRPOP: `[key, element]`.
    Pop(End),
    /// BLMPOP: `[key, [elements]]`, up to `count`.
    MPop(End, usize),
    /// BLMOVE/BRPOPLPUSH: the element, pushed onto `dst`.
    Move { dst: Vec<u8>, from: End, to: End },
}

impl BlockedOp for ListWaiter {
    fn readiness(&self, keys: &mut KeyAccess<'_>, key: &[u8]) -> Readiness {
        match keys.peek(key).map(|e| e.value()) {
            Some(ValueRef::List(list)) if !list.is_empty() => {}
            Some(ValueRef::List(_)) | None => return Readiness::Empty,
            Some(_) => return Readiness::WrongType,
        }
        // The destination may live in a partition the pushing command does
        // not hold. Taking its lock now could invert the lock order, so it
        // is only tried; when busy, the client re-runs BLMOVE itself.
        match self {
            ListWaiter::Move { dst, .. } if !keys.hold_partition_of(dst) => Readiness::Retry,
            _ => Readiness::Ready,
        }
    }

    fn serve(&self, keys: &mut KeyAccess<'_>, key: &[u8], out: &mut Reply) {
        let served = match self {
            ListWaiter::Pop(end) => pop_with_key(keys, key, *end, false, out),
            ListWaiter::MPop(end, count) => mpop_from(keys, &[key], *end, *count, false, out),
            // Redis 7.0 answers WRONGTYPE when the destination is not a list,
            // leaving the source alone; the client is unblocked either way.
            ListWaiter::Move { dst, from, to } => move_element(keys, key, dst, *from, *to, out),
        };
        if let Err(e) = served {
            out.error(&e.0);
        }
    }
}

// ---- pushes -----------------------------------------------------------------

fn lpush(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    push(ctx, args, out, End::Left, false)
}

fn rpush(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    push(ctx, args, out, End::Right, false)
}

fn lpushx(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    push(ctx, args, out, End::Left, true)
}

fn rpushx(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    push(ctx, args, out, End::Right, true)
}

fn push(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, end: End, only_existing: bool) -> CmdResult {
    let push_into = |list: &mut ListValue| {
        for v in &args[2..] {
            push_at(list, end, v.to_vec());
        }
        Ok(Changed::Yes(list.len()))
    };
    // The common case, an existing key, costs one lookup.
    let len = match write_value(&mut ctx.keys, args[1], push_into)? {
        Some(len) => len,
        None if only_existing => {
            out.int(0);
            return Ok(());
        }
        None => write_value_or_create(&mut ctx.keys, args[1], new_list, push_into)?,
    };
    out.int(len as i64);
    ctx.notify(ev::LIST, push_event(end), args[1]);
    Ok(())
}

fn push_event(end: End) -> &'static str {
    if end == End::Left { "lpush" } else { "rpush" }
}

/// A pop's events: `lpop`/`rpop`, then `del` when it emptied the list.
fn notify_pop(keys: &KeyAccess<'_>, key: &[u8], end: End, emptied: bool) {
    keys.notify(ev::LIST, if end == End::Left { "lpop" } else { "rpop" }, key);
    if emptied {
        keys.notify(ev::GENERIC, "del", key);
    }
}

// ---- pops -------------------------------------------------------------------

fn lpop(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    pop(ctx, args, out, End::Left)
}

fn rpop(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    pop(ctx, args, out, End::Right)
}

fn pop(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, end: End) -> CmdResult {
    if args.len() > 3 {
        return Err(err::arity(&String::from_utf8_lossy(args[0])).into());
    }
    let count = match args.get(2) {
        Some(a) => Some(arg_non_negative(a, POP_COUNT_RANGE)?),
        None => None,
    };
    let popped = write_value(&mut ctx.keys, args[1], |list: &mut ListValue| {
        let popped = match count {
            None => match pop_at(list, end) {
                Some(v) => {
                    out.bulk(&v);
                    true
                }
                None => {
                    out.null();
                    false
                }
            },
            Some(n) => {
                let n = (n as u64).min(list.len() as u64) as usize;
                out.array(n);
                for _ in 0..n {
                    if let Some(v) = pop_at(list, end) {
                        out.bulk(&v);
                    }
                }
                n > 0
            }
        };
        Ok(Changed::when(popped, (popped, list.is_empty())))
    })?;
    let Some((popped, emptied)) = popped else {
        if count.is_some() {
            out.null_array()
        } else {
            out.null()
        }
        return Ok(());
    };
    if popped {
        notify_pop(&ctx.keys, args[1], end, emptied);
    }
    Ok(())
}

/// Pops up to `count` elements from the first non-empty list among `keys`
/// and writes `[key, [elements]]`. Returns false (nothing written) when all
/// are empty. With `skip_wrongtype` (a blocked retry), keys of another type
/// count as empty instead of failing.
fn mpop_from(
    access: &mut KeyAccess<'_>,
    keys: &[&[u8]],
    end: End,
    count: usize,
    skip_wrongtype: bool,
    out: &mut Reply,
) -> Result<bool, CmdError> {
    for &key in keys {
        // Some(whether the list is now empty) when elements were popped.
        let popped = access.update(key, |e| {
            let Value::List(list) = e.value_mut() else {
                return if skip_wrongtype { Ok(Changed::No(None)) } else { Err(CmdError::from(err::WRONGTYPE)) };
            };
            let n = count.min(list.len());
            if n == 0 {
                return Ok(Changed::No(None));
            }
            out.array(2);
            out.bulk(key);
            out.array(n);
            for _ in 0..n {
                if let Some(v) = pop_at(list, end) {
                    out.bulk(&v);
                }
            }
            Ok(Changed::Yes(Some(list.is_empty())))
        });
        if let Some(emptied) = popped.transpose()?.flatten() {
            notify_pop(access, key, end, emptied);
            return Ok(true);
        }
    }
    Ok(false)
}

/// Parsed `numkeys key [key ...] LEFT|RIGHT [COUNT count]`.
struct MpopArgs<'a> {
    keys: &'a [&'a [u8]],
    end: End,
    count: usize,
}

/// Key positions of `numkeys key... where` starting at `numkeys_idx`, only
/// when the layout is valid (the handler reports errors for the rest).
fn mpop_key_positions(args: &[&[u8]], numkeys_idx: usize) -> SmallVec<[usize; 8]> {
    match args.get(numkeys_idx).and_then(|a| parse_i64(a)) {
        Some(n) if n >= 1 && (n as u64) < (args.len().saturating_sub(numkeys_idx + 1)) as u64 => {
            (numkeys_idx + 1..numkeys_idx + 1 + n as usize).collect()
        }
        _ => SmallVec::new(),
    }
}

fn lmpop_keys(args: &[&[u8]]) -> SmallVec<[usize; 8]> {
    mpop_key_positions(args, 1)
}

fn blmpop_keys(args: &[&[u8]]) -> SmallVec<[usize; 8]> {
    mpop_key_positions(args, 2)
}

fn parse_mpop<'a>(args: &'a [&'a [u8]], numkeys_idx: usize) -> Result<MpopArgs<'a>, CmdError> {
    let numkeys = match parse_i64(args[numkeys_idx]) {
        Some(n) if n >= 1 => n as u64,
        _ => return Err(NUMKEYS_RANGE.into()),
    };
    let first_key = numkeys_idx + 1;
    if numkeys >= (args.len() - first_key) as u64 {
        return Err(err::SYNTAX.into());
    }
    let where_idx = first_key + numkeys as usize;
    let end = End::parse(args[where_idx])?;
    let mut count = None;
    let mut j = where_idx + 1;
    while j < args.len() {
        if count.is_none() && eq_ic(args[j], "count") && j + 1 < args.len() {
            j += 1;
            match parse_i64(args[j]) {
                Some(n) if n >= 1 => count = Some(n),
                _ => return Err(MPOP_COUNT_RANGE.into()),
            }
        } else {
            return Err(err::SYNTAX.into());
        }
        j += 1;
    }
    let count = usize::try_from(count.unwrap_or(1)).unwrap_or(usize::MAX);
    Ok(MpopArgs { keys: &args[first_key..where_idx], end, count })
}

fn lmpop(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let m = parse_mpop(args, 1)?;
    if !mpop_from(&mut ctx.keys, m.keys, m.end, m.count, false, out)? {
        out.null_array();
    }
    Ok(())
}

fn blmpop(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let m = parse_mpop(args, 2)?;
    let deadline = parse_block_timeout(args[1], ctx.keys.now_ms)?;
    let retry = is_retry(ctx);
    if !mpop_from(&mut ctx.keys, m.keys, m.end, m.count, retry, out)? {
        block_or_reply(ctx, m.keys, deadline, out, |o| o.null_array(), ListWaiter::MPop(m.end, m.count));
    }
    Ok(())
}

fn blpop(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    bpop(ctx, args, out, End::Left)
}

fn brpop(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    bpop(ctx, args, out, End::Right)
}

/// BLPOP/BRPOP: `[key, element]` from the first non-empty list.
fn bpop(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, end: End) -> CmdResult {
    let deadline = parse_block_timeout(args[args.len() - 1], ctx.keys.now_ms)?;
    let keys = &args[1..args.len() - 1];
    let retry = is_retry(ctx);
    for &key in keys {
        if pop_with_key(&mut ctx.keys, key, end, retry, out)? {
            return Ok(());
        }
    }
    block_or_reply(ctx, keys, deadline, out, |o| o.null_array(), ListWaiter::Pop(end));
    Ok(())
}

/// Pops one element from the list at `key` and writes `[key, element]`.
/// False (nothing written) when there is none; a key of another type fails,
/// or counts as empty with `skip_wrongtype`.
fn pop_with_key(
    keys: &mut KeyAccess<'_>,
    key: &[u8],
    end: End,
    skip_wrongtype: bool,
    out: &mut Reply,
) -> Result<bool, CmdError> {
    // Some(whether the list is now empty) when an element was popped.
    let popped = keys.update(key, |e| {
        let Value::List(list) = e.value_mut() else {
            return if skip_wrongtype { Ok(Changed::No(None)) } else { Err(CmdError::from(err::WRONGTYPE)) };
        };
        match pop_at(list, end) {
            Some(v) => {
                out.array(2);
                out.bulk(key);
                out.bulk(&v);
                Ok(Changed::Yes(Some(list.is_empty())))
            }
            None => Ok(Changed::No(None)),
        }
    });
    match popped.transpose()?.flatten() {
        Some(emptied) => {
            notify_pop(keys, key, end, emptied);
            Ok(true)
        }
        None => Ok(false),
    }
}

// ---- moves ------------------------------------------------------------------

/// Moves one element from `src`'s `from` end to `dst`'s `to` end and writes
/// it as a bulk reply. Returns false (nothing written) when `src` is missing.
/// Both types are checked before anything changes, as in Redis.
fn move_element(
    keys: &mut KeyAccess<'_>,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
    out: &mut Reply,
) -> Result<bool, CmdError> {
    if src == dst {
        // One list: rotate in place, so the key (and its TTL) stays.
        let rotated = write_value(keys, src, |list: &mut ListValue| {
            Ok(match list.rotate(from == End::Left, to == End::Left) {
                Some(v) => {
                    out.bulk(v);
                    Changed::Yes(true)
                }
                None => Changed::No(false),
            })
        })?;
        if rotated != Some(true) {
            return Ok(false);
        }
        keys.notify(ev::LIST, push_event(to), dst);
        notify_pop(keys, src, from, false);
        return Ok(true);
    }
    match keys.peek(src) {
        None => return Ok(false),
        Some(e) if !matches!(e.value(), ValueRef::List(_)) => return Err(err::WRONGTYPE.into()),
        Some(_) => {}
    }
    if keys.peek(dst).is_some_and(|e| !matches!(e.value(), ValueRef::List(_))) {
        return Err(err::WRONGTYPE.into());
    }
    let popped = keys.update(src, |e| {
        let popped = match e.value_mut() {
            Value::List(list) => pop_at(list, from).map(|v| (v, list.is_empty())),
            _ => None,
        };
        Changed::when(popped.is_some(), popped)
    });
    let Some((value, emptied)) = popped.flatten() else { return Ok(false) };
    out.bulk(&value);
    // `dst` was checked to be a list or missing above.
    keys.update_or_create(dst, new_list, |d| {
        if let Value::List(list) = d.value_mut() {
            push_at(list, to, value);
        }
        Changed::Yes(())
    });
    // Redis announces the push before the pop that fed it.
    keys.notify(ev::LIST, push_event(to), dst);
    notify_pop(keys, src, from, emptied);
    Ok(true)
}

fn lmove(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let from = End::parse(args[3])?;
    let to = End::parse(args[4])?;
    if !move_element(&mut ctx.keys, args[1], args[2], from, to, out)? {
        out.null();
    }
    Ok(())
}

fn rpoplpush(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    if !move_element(&mut ctx.keys, args[1], args[2], End::Right, End::Left, out)? {
        out.null();
    }
    Ok(())
}

fn blmove(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let from = End::parse(args[3])?;
    let to = End::parse(args[4])?;
    blocking_move(ctx, args, from, to, args[5], out)
}

fn brpoplpush(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    blocking_move(ctx, args, End::Right, End::Left, args[3], out)
}

fn blocking_move(ctx: &mut Ctx<'_>, args: &[&[u8]], from: End, to: End, timeout: &[u8], out: &mut Reply) -> CmdResult {
    let deadline = parse_block_timeout(timeout, ctx.keys.now_ms)?;
    let (src, dst) = (args[1], args[2]);
    let src_wrong_on_retry =
        is_retry(ctx) && ctx.keys.peek(src).is_some_and(|e| !matches!(e.value(), ValueRef::List(_)));
    if src_wrong_on_retry || !move_element(&mut ctx.keys, src, dst, from, to, out)? {
        // Inside MULTI Redis answers a null bulk here, but a null array on timeout.
        let waiter = ListWaiter::Move { dst: dst.to_vec(), from, to };
        block_or_reply(ctx, &[src], deadline, out, |o| o.null(), waiter);
    }
    Ok(())
}

// ---- reads ------------------------------------------------------------------

fn llen(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    match ctx.keys.get(args[1]).map(|e| e.value()) {
        None => out.int(0),
        Some(ValueRef::List(list)) => out.int(list.len() as i64),
        Some(_) => return Err(err::WRONGTYPE.into()),
    }
    Ok(())
}

fn lrange(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let start = arg_i64(args[2])?;
    let end = arg_i64(args[3])?;
    let list = match ctx.keys.get(args[1]).map(|e| e.value()) {
        None => {
            out.array(0);
            return Ok(());
        }
        Some(ValueRef::List(list)) => list,
        Some(_) => return Err(err::WRONGTYPE.into()),
    };
    let Some(range) = clamp_range(start, end, list.len()) else {
        out.array(0);
        return Ok(());
    };
    let n = range.len();
    // One reservation for the whole reply: the selected share of the
    // payload plus a bulk header and CRLF per element.
    let payload = (list.payload_bytes() as u128 * n as u128 / list.len() as u128) as usize;
    out.buf.reserve(payload + n * 16 + 16);
    out.array(n);
    write_bulks(out, list.range(range));
    Ok(())
}

/// Writes elements as bulk strings (LRANGE's hot loop). Neighbouring
/// elements usually share a length, so each `$<len>\r\n` header is formatted
/// once per run of equal lengths rather than once per element.
fn write_bulks<'a>(out: &mut Reply, items: impl Iterator<Item = &'a Vec<u8>>) {
    let buf = &mut out.buf;
    let mut header = [0u8; 24];
    let mut header_len = 0;
    let mut last_len = usize::MAX;
    for v in items {
        if v.len() != last_len {
            last_len = v.len();
            header_len = bulk_header(&mut header, last_len);
        }
        buf.extend_from_slice(&header[..header_len]);
        buf.extend_from_slice(v);
        buf.extend_from_slice(b"\r\n");
    }
}

/// Formats `$<len>\r\n` into `out`; returns its length.
fn bulk_header(out: &mut [u8; 24], len: usize) -> usize {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = len;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let d = &digits[i..];
    out[0] = b'$';
    out[1..1 + d.len()].copy_from_slice(d);
    out[1 + d.len()..3 + d.len()].copy_from_slice(b"\r\n");
    3 + d.len()
}

fn lindex(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let list = match ctx.keys.get(args[1]).map(|e| e.value()) {
        None => {
            out.null();
            return Ok(());
        }
        Some(ValueRef::List(list)) => list,
        Some(_) => return Err(err::WRONGTYPE.into()),
    };
    let index = arg_i64(args[2])?;
    match resolve_index(index, list.len()).and_then(|i| list.get(i)) {
        Some(v) => out.bulk(v),
        None => out.null(),
    }
    Ok(())
}

fn lpos(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let mut rank: i64 = 1;
    let mut count: Option<i64> = None;
    let mut maxlen: i64 = 0;
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        if eq_ic(args[j], "rank") && more {
            j += 1;
            rank = arg_i64(args[j])?;
            if rank == 0 {
                return Err(RANK_ZERO.into());
            }
        } else if eq_ic(args[j], "count") && more {
            j += 1;
            count = Some(arg_non_negative(args[j], COUNT_NEGATIVE)?);
        } else if eq_ic(args[j], "maxlen") && more {
            j += 1;
            maxlen = arg_non_negative(args[j], MAXLEN_NEGATIVE)?;
        } else {
            return Err(err::SYNTAX.into());
        }
        j += 1;
    }
    let list = match ctx.keys.get(args[1]).map(|e| e.value()) {
        None => {
            if count.is_some() {
                out.array(0)
            } else {
                out.null()
            }
            return Ok(());
        }
        Some(ValueRef::List(list)) => list,
        Some(_) => return Err(err::WRONGTYPE.into()),
    };
    let from_tail = rank < 0;
    let search = Search {
        elem: args[2],
        // Like Redis, -i64::MIN wraps to itself and then matches from the first hit.
        rank: if from_tail { rank.wrapping_neg() } else { rank },
        count,
        maxlen: if maxlen == 0 { usize::MAX } else { usize::try_from(maxlen).unwrap_or(usize::MAX) },
    };
    let hits = if from_tail { search.run(list.iter().rev()) } else { search.run(list.iter()) };
    let position = |scan_index: usize| (if from_tail { list.len() - scan_index - 1 } else { scan_index }) as i64;
    match count {
        Some(_) => {
            out.array(hits.len());
            for &h in &hits {
                out.int(position(h));
            }
        }
        None => match hits.first() {
            Some(&h) => out.int(position(h)),
            None => out.null(),
        },
    }
    Ok(())
}

/// LPOS's scan, reproducing Redis's arithmetic (including its wrapping).
struct Search<'a> {
    elem: &'a [u8],
    rank: i64,
    count: Option<i64>,
    maxlen: usize,
}

impl Search<'_> {
    /// Scan indexes (counted from the end the scan starts at) of the hits.
    fn run<'v>(&self, items: impl Iterator<Item = &'v Vec<u8>>) -> SmallVec<[usize; 8]> {
        let mut hits = SmallVec::new();
        let mut matches: i64 = 0;
        for (index, v) in items.enumerate().take(self.maxlen) {
            if v.as_slice() != self.elem {
                continue;
            }
            matches += 1;
            if matches < self.rank {
                continue;
            }
            hits.push(index);
            match self.count {
                None => break,
                Some(c) if c != 0 && matches.wrapping_sub(self.rank).wrapping_add(1) >= c => break,
                Some(_) => {}
            }
        }
        hits
    }
}

// ---- edits ------------------------------------------------------------------

fn lset(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let index = arg_i64(args[2]);
    let set = write_value(&mut ctx.keys, args[1], |list: &mut ListValue| {
        let i = index.and_then(|i| resolve_index(i, list.len()).ok_or(CmdError::from(err::INDEX_OUT_OF_RANGE)))?;
        list.set(i, args[3].to_vec());
        Ok(Changed::Yes(()))
    })?;
    if set.is_none() {
        return Err(err::NO_SUCH_KEY.into());
    }
    ctx.notify(ev::LIST, "lset", args[1]);
    out.ok();
    Ok(())
}

fn lrem(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let count = arg_i64(args[2])?;
    let removed = write_value(&mut ctx.keys, args[1], |list: &mut ListValue| {
        let removed = list.remove_matching(args[3], count);
        Ok(Changed::when(removed > 0, (removed, list.is_empty())))
    })?;
    let (removed, emptied) = removed.unwrap_or((0, false));
    if removed > 0 {
        ctx.notify(ev::LIST, "lrem", args[1]);
        if emptied {
            ctx.notify(ev::GENERIC, "del", args[1]);
        }
    }
    out.int(removed as i64);
    Ok(())
}

fn ltrim(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let start = arg_i64(args[2])?;
    let end = arg_i64(args[3])?;
    // An empty selection empties the list; the key then goes away. A trim
    // that keeps everything still counts as a write, as in Redis.
    let trimmed = write_value(&mut ctx.keys, args[1], |list: &mut ListValue| {
        list.retain_range(clamp_range(start, end, list.len()).unwrap_or(0..0));
        Ok(Changed::Yes(list.is_empty()))
    })?;
    let Some(emptied) = trimmed else {
        out.ok();
        return Ok(());
    };
    ctx.notify(ev::LIST, "ltrim", args[1]);
    if emptied {
        ctx.notify(ev::GENERIC, "del", args[1]);
    }
    out.ok();
    Ok(())
}

fn linsert(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let after = if eq_ic(args[2], "after") {
        true
    } else if eq_ic(args[2], "before") {
        false
    } else {
        return Err(err::SYNTAX.into());
    };
    let inserted = write_value(&mut ctx.keys, args[1], |list: &mut ListValue| {
        let Some(i) = list.iter().position(|v| v.as_slice() == args[3]) else {
            return Ok(Changed::No(None));
        };
        list.insert(i + after as usize, args[4].to_vec());
        Ok(Changed::Yes(Some(list.len())))
    })?;
    match inserted {
        None => out.int(0),
        Some(None) => out.int(-1),
        Some(Some(len)) => {
            out.int(len as i64);
            ctx.notify(ev::LIST, "linsert", args[1]);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamp_range_follows_redis() {
        assert_eq!(clamp_range(0, -1, 3), Some(0..3));
        assert_eq!(clamp_range(-100, 100, 3), Some(0..3));
        assert_eq!(clamp_range(2, 1, 3), None);
        assert_eq!(clamp_range(3, 5, 3), None);
        assert_eq!(clamp_range(-1, -1, 3), Some(2..3));
        assert_eq!(clamp_range(i64::MIN, i64::MAX, 3), Some(0..3));
        assert_eq!(clamp_range(0, -1, 0), None);
        assert_eq!(clamp_range(0, i64::MIN, 5), None);
    }

    #[test]
    fn write_bulks_matches_reply_bulk() {
        let items: Vec<Vec<u8>> =
            [&b""[..], b"a", b"bb", b"cc", b"0123456789", &[b'x'; 1000][..]].iter().map(|v| v.to_vec()).collect();
        let mut expected = Reply::new(false);
        for v in &items {
            expected.bulk(v);
        }
        let mut got = Reply::new(false);
        write_bulks(&mut got, items.iter());
        assert_eq!(got.buf, expected.buf);
        let mut h = [0u8; 24];
        let n = bulk_header(&mut h, usize::MAX);
        assert_eq!(&h[..n], format!("${}\r\n", usize::MAX).as_bytes());
    }

    #[test]
    fn resolve_index_negative_and_out_of_range() {
        assert_eq!(resolve_index(-1, 3), Some(2));
        assert_eq!(resolve_index(-3, 3), Some(0));
        assert_eq!(resolve_index(-4, 3), None);
        assert_eq!(resolve_index(3, 3), None);
        assert_eq!(resolve_index(i64::MIN, 3), None);
    }

    #[test]
    fn mpop_key_positions_only_for_valid_layouts() {
        let args: Vec<&[u8]> = vec![b"lmpop", b"2", b"a", b"b", b"left"];
        assert_eq!(lmpop_keys(&args).as_slice(), &[2, 3]);
        let args: Vec<&[u8]> = vec![b"lmpop", b"2", b"a", b"left"];
        assert!(lmpop_keys(&args).is_empty());
        let args: Vec<&[u8]> = vec![b"lmpop", b"x", b"a", b"left"];
        assert!(lmpop_keys(&args).is_empty());
        let args: Vec<&[u8]> = vec![b"blmpop", b"0", b"1", b"a", b"left", b"count", b"2"];
        assert_eq!(blmpop_keys(&args).as_slice(), &[3]);
        let args: Vec<&[u8]> = vec![b"blmpop", b"0", b"99999999999999", b"a", b"left"];
        assert!(blmpop_keys(&args).is_empty());
    }

    fn search(items: &[&str], elem: &str, rank: i64, count: Option<i64>, maxlen: usize) -> Vec<usize> {
        let list: Vec<Vec<u8>> = items.iter().map(|s| s.as_bytes().to_vec()).collect();
        let s = Search { elem: elem.as_bytes(), rank, count, maxlen };
        s.run(list.iter()).to_vec()
    }

    #[test]
    fn lpos_search_rank_count_maxlen() {
        let l = ["a", "b", "a", "c", "a"];
        assert_eq!(search(&l, "a", 1, None, usize::MAX), [0]);
        assert_eq!(search(&l, "a", 2, None, usize::MAX), [2]);
        assert_eq!(search(&l, "a", 1, Some(0), usize::MAX), [0, 2, 4]);
        assert_eq!(search(&l, "a", 2, Some(1), usize::MAX), [2]);
        assert_eq!(search(&l, "a", 1, Some(0), 3), [0, 2]);
        assert_eq!(search(&l, "a", 4, Some(0), usize::MAX), Vec::<usize>::new());
        // Redis's wrapped rank for RANK -9223372036854775808 matches everything.
        assert_eq!(search(&l, "a", i64::MIN, Some(1), usize::MAX), [0, 2, 4]);
    }
}
