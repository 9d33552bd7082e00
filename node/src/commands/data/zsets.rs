//! Commands: sorted sets — ZADD & co., ranges by rank/score/lex, ZRANGESTORE,
//! ZUNION/ZINTER/ZDIFF (and their STORE forms, ZINTERCARD), pops (ZPOPMIN,
//! ZMPOP and the blocking BZPOPMIN/BZMPOP), ZRANDMEMBER and ZSCAN, with Redis
//! 7.0's replies, errors and argument quirks.

use super::typed::{read_value, write_value, write_value_or_create};
use crate::base::strtod::{parse_c_double, parse_score};
use crate::base::{eq_ic, glob_match, parse_i64};
use crate::commands::{
    BlockedOp, CmdError, CmdResult, CommandDef, Ctx, Keys, Readiness, arg_i64, err, flags, parse_block_timeout,
};
use crate::config::keyspace_events as ev;
use crate::protocol::{Reply, format_double};
use crate::store::set::SetValue;
use crate::store::zset::{LexBound, LexRange, ScoreRange, ZSetValue};
use crate::store::{Changed, KeyAccess, Value, ValueRef, fast_rand};
use smallvec::SmallVec;
use std::collections::HashMap;

const W: u32 = flags::WRITE;
const R: u32 = flags::READONLY;
const DENYOOM: u32 = flags::DENYOOM;
const FAST: u32 = flags::FAST;
const BLOCKING: u32 = flags::BLOCKING;
const NOSCRIPT: u32 = flags::NOSCRIPT;

pub const COMMANDS: &[CommandDef] = &[
    CommandDef::new("zadd", -4, W | DENYOOM | FAST, Keys::Range(1, 1, 1), zadd).acl("@write @sortedset @fast"),
    CommandDef::new("zincrby", 4, W | DENYOOM | FAST, Keys::Range(1, 1, 1), zincrby).acl("@write @sortedset @fast"),
    CommandDef::new("zrem", -3, W | FAST, Keys::Range(1, 1, 1), zrem).acl("@write @sortedset @fast"),
    CommandDef::new("zremrangebyscore", 4, W, Keys::Range(1, 1, 1), zremrangebyscore).acl("@write @sortedset @slow"),
    CommandDef::new("zremrangebyrank", 4, W, Keys::Range(1, 1, 1), zremrangebyrank).acl("@write @sortedset @slow"),
    CommandDef::new("zremrangebylex", 4, W, Keys::Range(1, 1, 1), zremrangebylex).acl("@write @sortedset @slow"),
    CommandDef::new("zunionstore", -4, W | DENYOOM, Keys::Custom(store_op_keys), zunionstore)
        .acl("@write @sortedset @slow"),
    CommandDef::new("zinterstore", -4, W | DENYOOM, Keys::Custom(store_op_keys), zinterstore)
        .acl("@write @sortedset @slow"),
    CommandDef::new("zdiffstore", -4, W | DENYOOM, Keys::Custom(store_op_keys), zdiffstore)
        .acl("@write @sortedset @slow"),
    CommandDef::new("zunion", -3, R, Keys::Custom(numkeys_at_1), zunion).acl("@read @sortedset @slow"),
    CommandDef::new("zinter", -3, R, Keys::Custom(numkeys_at_1), zinter).acl("@read @sortedset @slow"),
    CommandDef::new("zintercard", -3, R, Keys::Custom(numkeys_at_1), zintercard).acl("@read @sortedset @slow"),
    CommandDef::new("zdiff", -3, R, Keys::Custom(numkeys_at_1), zdiff).acl("@read @sortedset @slow"),
    CommandDef::new("zrange", -4, R, Keys::Range(1, 1, 1), zrange).acl("@read @sortedset @slow"),
    CommandDef::new("zrangestore", -5, W | DENYOOM, Keys::Range(1, 2, 1), zrangestore).acl("@write @sortedset @slow"),
    CommandDef::new("zrangebyscore", -4, R, Keys::Range(1, 1, 1), zrangebyscore).acl("@read @sortedset @slow"),
    CommandDef::new("zrevrangebyscore", -4, R, Keys::Range(1, 1, 1), zrevrangebyscore).acl("@read @sortedset @slow"),
    CommandDef::new("zrangebylex", -4, R, Keys::Range(1, 1, 1), zrangebylex).acl("@read @sortedset @slow"),
    CommandDef::new("zrevrangebylex", -4, R, Keys::Range(1, 1, 1), zrevrangebylex).acl("@read @sortedset @slow"),
    CommandDef::new("zrevrange", -4, R, Keys::Range(1, 1, 1), zrevrange).acl("@read @sortedset @slow"),
    CommandDef::new("zcount", 4, R | FAST, Keys::Range(1, 1, 1), zcount).acl("@read @sortedset @fast"),
    CommandDef::new("zlexcount", 4, R | FAST, Keys::Range(1, 1, 1), zlexcount).acl("@read @sortedset @fast"),
    CommandDef::new("zcard", 2, R | FAST, Keys::Range(1, 1, 1), zcard).acl("@read @sortedset @fast"),
    CommandDef::new("zscore", 3, R | FAST, Keys::Range(1, 1, 1), zscore).acl("@read @sortedset @fast"),
    CommandDef::new("zmscore", -3, R | FAST, Keys::Range(1, 1, 1), zmscore).acl("@read @sortedset @fast"),
    CommandDef::new("zrank", 3, R | FAST, Keys::Range(1, 1, 1), zrank).acl("@read @sortedset @fast"),
    CommandDef::new("zrevrank", 3, R | FAST, Keys::Range(1, 1, 1), zrevrank).acl("@read @sortedset @fast"),
    CommandDef::new("zscan", -3, R, Keys::Range(1, 1, 1), zscan).acl("@read @sortedset @slow"),
    CommandDef::new("zpopmin", -2, W | FAST, Keys::Range(1, 1, 1), zpopmin).acl("@write @sortedset @fast"),
    CommandDef::new("zpopmax", -2, W | FAST, Keys::Range(1, 1, 1), zpopmax).acl("@write @sortedset @fast"),
    CommandDef::new("bzpopmin", -3, W | NOSCRIPT | BLOCKING | FAST, Keys::Range(1, -2, 1), bzpopmin)
        .acl("@write @sortedset @fast @blocking"),
    CommandDef::new("bzpopmax", -3, W | NOSCRIPT | BLOCKING | FAST, Keys::Range(1, -2, 1), bzpopmax)
        .acl("@write @sortedset @fast @blocking"),
    CommandDef::new("zmpop", -4, W, Keys::Custom(numkeys_at_1), zmpop).acl("@write @sortedset @slow"),
    CommandDef::new("bzmpop", -5, W | BLOCKING, Keys::Custom(numkeys_at_2), bzmpop)
        .acl("@write @sortedset @slow @blocking"),
    CommandDef::new("zrandmember", -2, R, Keys::Range(1, 1, 1), zrandmember).acl("@read @sortedset @slow"),
];

const ERR_NAN: &str = "ERR resulting score is not a number (NaN)";
const ERR_SCORE_RANGE: &str = "ERR min or max is not a float";
const ERR_LEX_RANGE: &str = "ERR min or max not valid string range item";
const ERR_NOT_POSITIVE: &str = "ERR value is out of range, must be positive";
const ERR_NUMKEYS: &str = "ERR numkeys should be greater than 0";

// ---------------------------------------------------------------------------
// Key positions of numkeys-style commands
// ---------------------------------------------------------------------------

/// Keys counted by the integer at `numkeys_idx`, right after it. Malformed
/// counts yield no keys (the handler reports the error before any lookup).
fn counted_keys(args: &[&[u8]], numkeys_idx: usize) -> SmallVec<[usize; 8]> {
    let Some(n) = args.get(numkeys_idx).and_then(|a| parse_i64(a)) else {
        return SmallVec::new();
    };
    if n < 1 {
        return SmallVec::new();
    }
    let first = numkeys_idx + 1;
    let end = first.saturating_add(n as usize).min(args.len());
    (first..end).collect()
}

fn numkeys_at_1(args: &[&[u8]]) -> SmallVec<[usize; 8]> {
    counted_keys(args, 1)
}

fn numkeys_at_2(args: &[&[u8]]) -> SmallVec<[usize; 8]> {
    counted_keys(args, 2)
}

/// ZUNIONSTORE & co.: the destination, then the counted sources.
fn store_op_keys(args: &[&[u8]]) -> SmallVec<[usize; 8]> {
    let mut keys = SmallVec::new();
    keys.push(1);
    keys.extend(counted_keys(args, 2));
    keys
}

// ---------------------------------------------------------------------------
// Score range parsing (numbers with C's strtod rules: `base::strtod`)
// ---------------------------------------------------------------------------

/// One end of a score range: `1.5`, `(1.5`, `-inf`, `+inf`.
fn parse_score_bound(arg: &[u8]) -> Option<(f64, bool)> {
    match arg.first() {
        Some(b'(') => parse_c_double(&arg[1..]).map(|v| (v, true)),
        _ => parse_c_double(arg).map(|v| (v, false)),
    }
}

fn parse_score_range(min: &[u8], max: &[u8]) -> Result<ScoreRange, CmdError> {
    match (parse_score_bound(min), parse_score_bound(max)) {
        (Some((min, min_ex)), Some((max, max_ex))) => Ok(ScoreRange { min, max, min_ex, max_ex }),
        _ => Err(ERR_SCORE_RANGE.into()),
    }
}

/// One end of a lex range: `-`, `+`, `[member` or `(member`.
fn parse_lex_bound(arg: &[u8]) -> Option<LexBound> {
    // Redis reads these as C strings: "+" followed by a NUL is still "+".
    let alone = arg.len() == 1 || arg.get(1) == Some(&0);
    match arg.first()? {
        b'+' => alone.then_some(LexBound::Max),
        b'-' => alone.then_some(LexBound::Min),
        b'(' => Some(LexBound::Exclusive(arg[1..].to_vec())),
        b'[' => Some(LexBound::Inclusive(arg[1..].to_vec())),
        _ => None,
    }
}

fn parse_lex_range(min: &[u8], max: &[u8]) -> Result<LexRange, CmdError> {
    match (parse_lex_bound(min), parse_lex_bound(max)) {
        (Some(min), Some(max)) => Ok(LexRange { min, max }),
        _ => Err(ERR_LEX_RANGE.into()),
    }
}

/// Redis's `getPositiveLongFromObjectOrReply` with its default message.
fn arg_positive(arg: &[u8]) -> Result<i64, CmdError> {
    match parse_i64(arg) {
        Some(n) if n >= 0 => Ok(n),
        _ => Err(ERR_NOT_POSITIVE.into()),
    }
}

// ---------------------------------------------------------------------------
// Key access and reply helpers
// ---------------------------------------------------------------------------

fn new_zset() -> Value {
    Value::ZSet(ZSetValue::default())
}

/// The sorted set at `key` for reading (counts a hit or miss).
fn read_zset<'a>(keys: &'a mut KeyAccess<'_>, key: &[u8]) -> Result<Option<&'a ZSetValue>, CmdError> {
    read_value(keys, key)
}

/// Members, optionally with scores: RESP2 flattens pairs, RESP3 nests them.
fn reply_members(out: &mut Reply, items: &[(&[u8], f64)], withscores: bool) {
    let pairs = withscores && out.resp3;
    out.array(if withscores && !pairs { items.len() * 2 } else { items.len() });
    for (m, s) in items {
        if pairs {
            out.array(2);
        }
        out.bulk(m);
        if withscores {
            out.double(*s);
        }
    }
}

// ---------------------------------------------------------------------------
// ZADD, ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCARD, ZRANK
// ---------------------------------------------------------------------------

pub(super) fn zadd(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    zadd_generic(ctx, args, out, false)
}

fn zincrby(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    zadd_generic(ctx, args, out, true)
}

#[derive(Default)]
struct ZaddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

impl ZaddFlags {
    /// Sets the flag `word` names; false when it is not a flag.
    fn set(&mut self, word: &[u8]) -> bool {
        let flag = match () {
            _ if eq_ic(word, "nx") => &mut self.nx,
            _ if eq_ic(word, "xx") => &mut self.xx,
            _ if eq_ic(word, "gt") => &mut self.gt,
            _ if eq_ic(word, "lt") => &mut self.lt,
            _ if eq_ic(word, "ch") => &mut self.ch,
            _ if eq_ic(word, "incr") => &mut self.incr,
            _ => return false,
        };
        *flag = true;
        true
    }
}

/// ZADD, and ZINCRBY as ZADD INCR with the pair right after the key.
fn zadd_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, zincrby: bool) -> CmdResult {
    let mut f = ZaddFlags { incr: zincrby, ..Default::default() };
    let mut idx = 2;
    while !zincrby && idx < args.len() && f.set(args[idx]) {
        idx += 1;
    }
    let elements = args.len() - idx;
    if elements == 0 || elements % 2 != 0 {
        return Err(err::SYNTAX.into());
    }
    if f.nx && f.xx {
        return Err("ERR XX and NX options at the same time are not compatible".into());
    }
    if [f.gt, f.lt, f.nx].iter().filter(|&&b| b).count() > 1 {
        return Err("ERR GT, LT, and/or NX options at the same time are not compatible".into());
    }
    if f.incr && elements > 2 {
        return Err("ERR INCR option supports a single increment-element pair".into());
    }
    let mut pairs = Vec::with_capacity(elements / 2);
    for pair in args[idx..].chunks_exact(2) {
        let score = parse_score(pair[0]).ok_or(CmdError::from(err::NOT_FLOAT))?;
        pairs.push((score, pair[1]));
    }

    let key = args[1];
    if f.xx && !ctx.keys.contains(key) {
        // XX on a missing key: nothing to update, and no key is created.
        if f.incr {
            out.null()
        } else {
            out.int(0)
        }
        return Ok(());
    }
    let (mut added, mut updated) = (0i64, 0i64);
    let mut last = None;
    let mut nan = false;
    // Members added before a NaN stay added (the error comes after), as in Redis.
    write_value_or_create(&mut ctx.keys, key, new_zset, |z: &mut ZSetValue| {
        for (score, member) in pairs {
            match z.score(member) {
                Some(cur) => {
                    if f.nx {
                        continue;
                    }
                    let new = if f.incr { cur + score } else { score };
                    if new.is_nan() {
                        nan = true;
                        break;
                    }
                    if (f.gt && new <= cur) || (f.lt && new >= cur) {
                        continue;
                    }
                    if new != cur {
                        z.insert(member, new);
                        updated += 1;
                    }
                    last = Some(new);
                }
                None => {
                    if f.xx {
                        continue;
                    }
                    z.insert(member, score);
                    added += 1;
                    last = Some(score);
                }
            }
        }
        Ok(Changed::when(added + updated > 0, ()))
    })?;
    if added + updated > 0 {
        ctx.notify(ev::ZSET, if f.incr { "zincr" } else { "zadd" }, key);
    }
    if nan {
        return Err(ERR_NAN.into());
    }
    if f.incr {
        match last {
            Some(s) => out.double(s),
            None => out.null(),
        }
    } else {
        out.int(if f.ch { added + updated } else { added });
    }
    Ok(())
}

fn zrem(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let removed = write_value(&mut ctx.keys, args[1], |z: &mut ZSetValue| {
        let removed = args[2..].iter().filter(|m| z.remove(m)).count();
        Ok(Changed::when(removed > 0, (removed, z.is_empty())))
    })?;
    let (removed, emptied) = removed.unwrap_or((0, false));
    if removed > 0 {
        notify_removed(&ctx.keys, args[1], "zrem", emptied);
    }
    out.int(removed as i64);
    Ok(())
}

fn zscore(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    match read_zset(&mut ctx.keys, args[1])?.and_then(|z| z.score(args[2])) {
        Some(s) => out.double(s),
        None => out.null(),
    }
    Ok(())
}

fn zmscore(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let z = read_zset(&mut ctx.keys, args[1])?;
    out.array(args.len() - 2);
    for m in &args[2..] {
        match z.and_then(|z| z.score(m)) {
            Some(s) => out.double(s),
            None => out.null(),
        }
    }
    Ok(())
}

fn zcard(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let n = read_zset(&mut ctx.keys, args[1])?.map_or(0, |z| z.len());
    out.int(n as i64);
    Ok(())
}

fn zrank(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    zrank_generic(ctx, args, out, false)
}

fn zrevrank(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    zrank_generic(ctx, args, out, true)
}

fn zrank_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, rev: bool) -> CmdResult {
    let z = read_zset(&mut ctx.keys, args[1])?;
    match z.and_then(|z| z.rank(args[2]).map(|r| if rev { z.len() - 1 - r } else { r })) {
        Some(r) => out.int(r as i64),
        None => out.null(),
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// ZRANGE and friends
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum RangeKind {
    /// ZRANGE/ZRANGESTORE: decided by BYSCORE / BYLEX, rank otherwise.
    Auto,
    Rank,
    Score,
    Lex,
}

/// A parsed range to select.
enum Selection {
    Rank { start: i64, end: i64 },
    Score(ScoreRange),
    Lex(LexRange),
}

fn zrange(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    zrange_generic(ctx, args, out, 1, RangeKind::Auto, None)
}
fn zrangestore(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    zrange_generic(ctx, args, out, 2, RangeKind::Auto, None)
}
fn zrangebyscore(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    zrange_generic(ctx, args, out, 1, RangeKind::Score, Some(false))
}
fn zrevrangebyscore(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    zrange_generic(ctx, args, out, 1, RangeKind::Score, Some(true))
}
fn zrangebylex(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    zrange_generic(ctx, args, out, 1, RangeKind::Lex, Some(false))
}
fn zrevrangebylex(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    zrange_generic(ctx, args, out, 1, RangeKind::Lex, Some(true))
}
fn zrevrange(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    zrange_generic(ctx, args, out, 1, RangeKind::Rank, Some(true))
}

/// All the ZRANGE forms. `src_idx` is where the source key is (2 for
/// ZRANGESTORE, whose destination is at 1); the range bounds follow it.
/// `kind` and `rev` are fixed by the legacy commands, free for ZRANGE.
fn zrange_generic(
    ctx: &mut Ctx<'_>,
    args: &[&[u8]],
    out: &mut Reply,
    src_idx: usize,
    mut kind: RangeKind,
    mut rev: Option<bool>,
) -> CmdResult {
    let store = src_idx == 2;
    let (mut withscores, mut offset, mut limit) = (false, 0i64, -1i64);
    let mut j = src_idx + 3;
    while j < args.len() {
        let a = args[j];
        let left = args.len() - j - 1;
        if !store && eq_ic(a, "withscores") {
            withscores = true;
        } else if eq_ic(a, "limit") && left >= 2 {
            offset = arg_i64(args[j + 1])?;
            limit = arg_i64(args[j + 2])?;
            j += 2;
        } else if rev.is_none() && eq_ic(a, "rev") {
            rev = Some(true);
        } else if kind == RangeKind::Auto && eq_ic(a, "bylex") {
            kind = RangeKind::Lex;
        } else if kind == RangeKind::Auto && eq_ic(a, "byscore") {
            kind = RangeKind::Score;
        } else {
            return Err(err::SYNTAX.into());
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    if kind == RangeKind::Auto {
        kind = RangeKind::Rank;
    }
    // Redis compares with its "no limit" default, so `LIMIT x -1` passes.
    if limit != -1 && kind == RangeKind::Rank {
        return Err("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX".into());
    }
    if withscores && kind == RangeKind::Lex {
        return Err("ERR syntax error, WITHSCORES not supported in combination with BYLEX".into());
    }
    let (mut min, mut max) = (args[src_idx + 1], args[src_idx + 2]);
    if rev && kind != RangeKind::Rank {
        // Reverse score and lex ranges are given as max, min.
        std::mem::swap(&mut min, &mut max);
    }
    let selection = match kind {
        RangeKind::Score => Selection::Score(parse_score_range(min, max)?),
        RangeKind::Lex => Selection::Lex(parse_lex_range(min, max)?),
        _ => Selection::Rank { start: arg_i64(min)?, end: arg_i64(max)? },
    };

    let z = read_zset(&mut ctx.keys, args[src_idx])?;
    if store {
        let mut result = ZSetValue::default();
        if let Some(z) = z {
            for (m, s) in select(z, &selection, rev, offset, limit) {
                result.insert(m, s);
            }
        }
        let n = result.len();
        store_result(ctx, args[1], (n > 0).then_some(result), "zrangestore");
        out.int(n as i64);
        return Ok(());
    }
    let items = z.map(|z| select(z, &selection, rev, offset, limit)).unwrap_or_default();
    reply_members(out, &items, withscores);
    Ok(())
}

/// Clamps Redis-style rank bounds (negative from the end) to the first rank
/// and the count they cover, or None when empty.
fn rank_span(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 { (len + start).max(0) } else { start };
    let end = if end < 0 { len + end } else { end };
    if start > end || start >= len {
        return None;
    }
    Some((start as usize, (end.min(len - 1) - start + 1) as usize))
}

/// The members a range selects, in reply order. Score and lex ranges skip
/// `offset` members from their first match, then take up to `limit`
/// (negative: all) while still inside the range, as Redis does.
fn select<'z>(z: &'z ZSetValue, sel: &Selection, rev: bool, offset: i64, limit: i64) -> Vec<(&'z [u8], f64)> {
    let take = if limit < 0 { usize::MAX } else { limit as usize };
    // From the first match, `offset` members further in the walk direction.
    let skip = |first: Option<usize>| -> Option<usize> {
        let (first, offset) = (first? as u64, u64::try_from(offset).ok()?);
        let at = if rev { first.checked_sub(offset)? } else { first.checked_add(offset)? };
        (at < z.len() as u64).then_some(at as usize)
    };
    match sel {
        Selection::Rank { start, end } => {
            let Some((start, n)) = rank_span(*start, *end, z.len()) else {
                return Vec::new();
            };
            let first = if rev { z.len() - 1 - start } else { start };
            z.iter_from(first, rev).take(n).collect()
        }
        Selection::Score(r) => {
            let first = if rev { z.last_in_score_range(r) } else { z.first_in_score_range(r) };
            let Some(at) = skip(first) else {
                return Vec::new();
            };
            let inside = |s: f64| if rev { r.gte_min(s) } else { r.lte_max(s) };
            z.iter_from(at, rev).take_while(|(_, s)| inside(*s)).take(take).collect()
        }
        Selection::Lex(r) => {
            let first = if rev { z.last_in_lex_range(r) } else { z.first_in_lex_range(r) };
            let Some(at) = skip(first) else {
                return Vec::new();
            };
            let inside = |m: &[u8]| if rev { r.gte_min(m) } else { r.lte_max(m) };
            z.iter_from(at, rev).take_while(|(m, _)| inside(m)).take(take).collect()
        }
    }
}

fn zcount(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let range = parse_score_range(args[2], args[3])?;
    let n = read_zset(&mut ctx.keys, args[1])?.map_or(0, |z| z.count_in_score_range(&range));
    out.int(n as i64);
    Ok(())
}

fn zlexcount(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let range = parse_lex_range(args[2], args[3])?;
    let n = read_zset(&mut ctx.keys, args[1])?.map_or(0, |z| z.count_in_lex_range(&range));
    out.int(n as i64);
    Ok(())
}

// ---------------------------------------------------------------------------
// ZREMRANGEBY*
// ---------------------------------------------------------------------------

fn zremrangebyrank(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let sel = Selection::Rank { start: arg_i64(args[2])?, end: arg_i64(args[3])? };
    zremrange_generic(ctx, args, out, sel)
}

fn zremrangebyscore(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let sel = Selection::Score(parse_score_range(args[2], args[3])?);
    zremrange_generic(ctx, args, out, sel)
}

fn zremrangebylex(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let sel = Selection::Lex(parse_lex_range(args[2], args[3])?);
    zremrange_generic(ctx, args, out, sel)
}

fn zremrange_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, sel: Selection) -> CmdResult {
    let removed = write_value(&mut ctx.keys, args[1], |z: &mut ZSetValue| {
        // (first rank, how many) of the members to remove.
        let span = match &sel {
            Selection::Rank { start, end } => rank_span(*start, *end, z.len()),
            Selection::Score(r) => z.first_in_score_range(r).map(|first| (first, z.count_in_score_range(r))),
            Selection::Lex(r) => z.first_in_lex_range(r).map(|first| (first, z.count_in_lex_range(r))),
        };
        let removed = span.map_or(0, |(first, count)| z.remove_rank_range(first, count));
        Ok(Changed::when(removed > 0, (removed, z.is_empty())))
    })?;
    let (removed, emptied) = removed.unwrap_or((0, false));
    if removed > 0 {
        let event = match sel {
            Selection::Rank { .. } => "zremrangebyrank",
            Selection::Score(_) => "zremrangebyscore",
            Selection::Lex(_) => "zremrangebylex",
        };
        notify_removed(&ctx.keys, args[1], event, emptied);
    }
    out.int(removed as i64);
    Ok(())
}

// ---------------------------------------------------------------------------
// ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    fn apply(self, acc: &mut f64, v: f64) {
        match self {
            Aggregate::Sum => {
                *acc += v;
                // inf + -inf: Redis settles on 0.
                if acc.is_nan() {
                    *acc = 0.0;
                }
            }
            Aggregate::Min => {
                if v < *acc {
                    *acc = v;
                }
            }
            Aggregate::Max => {
                if v > *acc {
                    *acc = v;
                }
            }
        }
    }
}

/// An input of ZUNION & co.: a sorted set, or a plain set scoring 1 per member.
enum Source<'a> {
    ZSet(&'a ZSetValue),
    Set(&'a SetValue),
}

impl Source<'_> {
    fn score(&self, m: &[u8]) -> Option<f64> {
        match self {
            Source::ZSet(z) => z.score(m),
            Source::Set(s) => s.contains(m).then_some(1.0),
        }
    }
    fn for_each(&self, mut f: impl FnMut(&[u8], f64)) {
        match self {
            Source::ZSet(z) => z.iter().for_each(|(m, s)| f(m, s)),
            Source::Set(s) => s.iter().for_each(|m| f(m, 1.0)),
        }
    }
}

/// An input already type-checked by the first pass (no stats counted again).
fn source<'a>(keys: &'a mut KeyAccess<'_>, key: &[u8]) -> Option<Source<'a>> {
    match keys.peek(key)?.value() {
        ValueRef::ZSet(z) => Some(Source::ZSet(z)),
        ValueRef::Set(s) => Some(Source::Set(s)),
        _ => None,
    }
}

/// `weight * score`, with NaN (0 * inf) read as 0 like Redis.
fn weighted(weight: f64, score: f64) -> f64 {
    let v = weight * score;
    if v.is_nan() { 0.0 } else { v }
}

fn zunionstore(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    setop_generic(ctx, args, out, "zunionstore", SetOp::Union)
}
fn zinterstore(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    setop_generic(ctx, args, out, "zinterstore", SetOp::Inter)
}
fn zdiffstore(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    setop_generic(ctx, args, out, "zdiffstore", SetOp::Diff)
}
fn zunion(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    setop_generic(ctx, args, out, "zunion", SetOp::Union)
}
fn zinter(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    setop_generic(ctx, args, out, "zinter", SetOp::Inter)
}
fn zdiff(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    setop_generic(ctx, args, out, "zdiff", SetOp::Diff)
}
fn zintercard(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    setop_generic(ctx, args, out, "zintercard", SetOp::Inter)
}

/// Options after the input keys of ZUNION & co.
struct SetOpOptions {
    weights: Vec<f64>,
    aggregate: Aggregate,
    withscores: bool,
    /// ZINTERCARD's LIMIT; 0 = none.
    limit: usize,
}

fn parse_setop_options(
    args: &[&[u8]],
    nkeys: usize,
    op: SetOp,
    store: bool,
    card: bool,
) -> Result<SetOpOptions, CmdError> {
    let mut o = SetOpOptions { weights: vec![1.0; nkeys], aggregate: Aggregate::Sum, withscores: false, limit: 0 };
    let weighable = op != SetOp::Diff && !card;
    let mut j = 0;
    while j < args.len() {
        let remaining = args.len() - j;
        let a = args[j];
        if weighable && remaining > nkeys && eq_ic(a, "weights") {
            for (k, w) in o.weights.iter_mut().enumerate() {
                *w = parse_score(args[j + 1 + k]).ok_or(CmdError::from("ERR weight value is not a float"))?;
            }
            j += 1 + nkeys;
        } else if weighable && remaining >= 2 && eq_ic(a, "aggregate") {
            let v = args[j + 1];
            o.aggregate = match () {
                _ if eq_ic(v, "sum") => Aggregate::Sum,
                _ if eq_ic(v, "min") => Aggregate::Min,
                _ if eq_ic(v, "max") => Aggregate::Max,
                _ => return Err(err::SYNTAX.into()),
            };
            j += 2;
        } else if !store && !card && eq_ic(a, "withscores") {
            o.withscores = true;
            j += 1;
        } else if card && remaining >= 2 && eq_ic(a, "limit") {
            o.limit = match parse_i64(args[j + 1]) {
                Some(n) if n >= 0 => n as usize,
                _ => return Err("ERR LIMIT can't be negative".into()),
            };
            j += 2;
        } else {
            return Err(err::SYNTAX.into());
        }
    }
    Ok(o)
}

fn setop_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, name: &str, op: SetOp) -> CmdResult {
    let store = name.ends_with("store");
    let card = name == "zintercard";
    let numkeys_idx = if store { 2 } else { 1 };
    let setnum = arg_i64(args[numkeys_idx])?;
    if setnum < 1 {
        return Err(format!("ERR at least 1 input key is needed for '{name}' command").into());
    }
    let first_key = numkeys_idx + 1;
    if setnum as u64 > (args.len() - first_key) as u64 {
        return Err(err::SYNTAX.into());
    }
    let keys = &args[first_key..first_key + setnum as usize];

    // Inputs are looked up before options are read: a wrong type wins.
    let mut lens = Vec::with_capacity(keys.len());
    for key in keys {
        let entry = if store { ctx.keys.peek(key) } else { ctx.keys.get(key) };
        lens.push(match entry.map(|e| e.value()) {
            None => 0,
            Some(ValueRef::ZSet(z)) => z.len(),
            Some(ValueRef::Set(s)) => s.len(),
            Some(_) => return Err(err::WRONGTYPE.into()),
        });
    }
    let opts = parse_setop_options(&args[first_key + keys.len()..], keys.len(), op, store, card)?;

    // Redis walks inputs from the smallest (a stable sort, like glibc's
    // qsort); the order decides how sums of three or more scores round.
    let mut order: Vec<usize> = (0..keys.len()).collect();
    if op != SetOp::Diff {
        order.sort_by_key(|&i| lens[i]);
    }
    let mut result = match op {
        SetOp::Union => union(&mut ctx.keys, keys, &order, &opts),
        SetOp::Inter => inter(&mut ctx.keys, keys, &order, &lens, &opts),
        SetOp::Diff => diff(&mut ctx.keys, keys, &lens),
    };

    if card {
        let n = if opts.limit > 0 { result.len().min(opts.limit) } else { result.len() };
        out.int(n as i64);
        return Ok(());
    }
    if store {
        let dst = args[1];
        let n = result.len();
        let stored = (n > 0).then(|| {
            // Redis stores the result as a listpack when it is small enough.
            let max_len = result.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
            let mut z = ZSetValue::with_encoding_for(n, max_len);
            for (m, s) in &result {
                z.insert(m, *s);
            }
            z
        });
        let event = match op {
            SetOp::Union => "zunionstore",
            SetOp::Inter => "zinterstore",
            SetOp::Diff => "zdiffstore",
        };
        store_result(ctx, dst, stored, event);
        out.int(n as i64);
        return Ok(());
    }
    result.sort_by(|a, b| cmp_score(a.1, b.1).then_with(|| a.0.cmp(&b.0)));
    let items: Vec<(&[u8], f64)> = result.iter().map(|(m, s)| (&m[..], *s)).collect();
    reply_members(out, &items, opts.withscores);
    Ok(())
}

/// Scores in skiplist order: numerically, with 0 and -0 equal.
fn cmp_score(a: f64, b: f64) -> std::cmp::Ordering {
    a.partial_cmp(&b).unwrap_or(std::cmp::Ordering::Equal)
}

fn union(keys: &mut KeyAccess<'_>, names: &[&[u8]], order: &[usize], opts: &SetOpOptions) -> Vec<(Vec<u8>, f64)> {
    let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
    for &i in order {
        let Some(src) = source(keys, names[i]) else {
            continue;
        };
        src.for_each(|m, s| {
            let v = weighted(opts.weights[i], s);
            match acc.get_mut(m) {
                Some(cur) => opts.aggregate.apply(cur, v),
                None => {
                    acc.insert(m.to_vec(), v);
                }
            }
        });
    }
    acc.into_iter().collect()
}

fn inter(
    keys: &mut KeyAccess<'_>,
    names: &[&[u8]],
    order: &[usize],
    lens: &[usize],
    opts: &SetOpOptions,
) -> Vec<(Vec<u8>, f64)> {
    if lens.contains(&0) {
        return Vec::new();
    }
    let smallest = order[0];
    let mut acc = Vec::with_capacity(lens[smallest]);
    if let Some(src) = source(keys, names[smallest]) {
        src.for_each(|m, s| acc.push((m.to_vec(), weighted(opts.weights[smallest], s))));
    }
    // One input at a time: each member still meets the inputs in the same
    // order as Redis's member-by-member walk, so results round alike.
    for &i in &order[1..] {
        let Some(src) = source(keys, names[i]) else {
            return Vec::new();
        };
        acc.retain_mut(|(m, score)| match src.score(m) {
            Some(s) => {
                opts.aggregate.apply(score, weighted(opts.weights[i], s));
                true
            }
            None => false,
        });
    }
    acc
}

fn diff(keys: &mut KeyAccess<'_>, names: &[&[u8]], lens: &[usize]) -> Vec<(Vec<u8>, f64)> {
    if lens[0] == 0 {
        return Vec::new();
    }
    let mut acc = Vec::with_capacity(lens[0]);
    if let Some(src) = source(keys, names[0]) {
        src.for_each(|m, s| acc.push((m.to_vec(), s)));
    }
    for (name, &len) in names.iter().zip(lens).skip(1) {
        if len == 0 {
            continue;
        }
        if let Some(src) = source(keys, name) {
            acc.retain(|(m, _)| src.score(m).is_none());
        }
    }
    acc
}

// ---------------------------------------------------------------------------
// Pops: ZPOPMIN/ZPOPMAX, BZPOPMIN/BZPOPMAX, ZMPOP/BZMPOP
// ---------------------------------------------------------------------------

fn zpopmin(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    zpop_generic(ctx, args, out, false)
}

fn zpopmax(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    zpop_generic(ctx, args, out, true)
}

/// Members popped from a sorted set, with their scores, in pop order.
type Popped = Vec<(Box<[u8]>, f64)>;

/// Pops up to `count` members from the sorted set at `key` and announces
/// it (`zpopmin`/`zpopmax`, then `del` when it emptied the set). None when
/// the key is missing; WRONGTYPE leaves another type untouched.
fn pop_many(keys: &mut KeyAccess<'_>, key: &[u8], max: bool, count: usize) -> Result<Option<Popped>, CmdError> {
    let popped = write_value(keys, key, |z: &mut ZSetValue| {
        let n = count.min(z.len());
        let popped: Vec<_> = (0..n).filter_map(|_| z.pop(max)).collect();
        Ok(Changed::when(n > 0, (popped, z.is_empty())))
    })?;
    let Some((popped, emptied)) = popped else { return Ok(None) };
    if !popped.is_empty() {
        keys.notify(ev::ZSET, if max { "zpopmax" } else { "zpopmin" }, key);
        if emptied {
            keys.notify(ev::GENERIC, "del", key);
        }
    }
    Ok(Some(popped))
}

/// A removal's events: `event`, then `del` when it emptied the set.
fn notify_removed(keys: &KeyAccess<'_>, key: &[u8], event: &str, emptied: bool) {
    keys.notify(ev::ZSET, event, key);
    if emptied {
        keys.notify(ev::GENERIC, "del", key);
    }
}

/// Stores a *STORE command's result at `dst` and announces it, or deletes
/// `dst` (announced as `del` when it existed) when the result is empty.
fn store_result(ctx: &mut Ctx<'_>, dst: &[u8], result: Option<ZSetValue>, event: &str) {
    match result {
        Some(z) => {
            ctx.keys.set(dst, Value::ZSet(z), 0, false);
            ctx.notify(ev::ZSET, event, dst);
        }
        None => {
            if ctx.keys.delete(dst) {
                ctx.notify(ev::GENERIC, "del", dst);
            }
        }
    }
}

fn zpop_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, max: bool) -> CmdResult {
    if args.len() > 3 {
        return Err(err::SYNTAX.into());
    }
    let count = args.get(2).map(|a| arg_positive(a)).transpose()?;
    // A count of 0 pops nothing: the key is not modified.
    let Some(popped) = pop_many(&mut ctx.keys, args[1], max, count.unwrap_or(1) as usize)? else {
        out.array(0);
        return Ok(());
    };
    // RESP3 nests pairs when a count was given; otherwise one flat pair.
    let pairs = out.resp3 && count.is_some();
    out.array(if pairs { popped.len() } else { popped.len() * 2 });
    for (m, s) in &popped {
        if pairs {
            out.array(2);
        }
        out.bulk(m);
        out.double(*s);
    }
    Ok(())
}

fn bzpopmin(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    bzpop_generic(ctx, args, out, false)
}

fn bzpopmax(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    bzpop_generic(ctx, args, out, true)
}

fn bzpop_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, max: bool) -> CmdResult {
    let deadline = parse_block_timeout(args[args.len() - 1], ctx.keys.now_ms)?;
    let keys = &args[1..args.len() - 1];
    for key in keys {
        let Some(mut popped) = pop_many(&mut ctx.keys, key, max, 1)? else {
            continue;
        };
        if let Some((m, s)) = popped.pop() {
            reply_bzpop(out, key, &m, s);
            return Ok(());
        }
    }
    block_or_null(ctx, keys, deadline, out, ZSetWaiter { max, count: None });
    Ok(())
}

/// BZPOPMIN/BZPOPMAX's reply: `[key, member, score]`, flat in RESP3 too.
fn reply_bzpop(out: &mut Reply, key: &[u8], member: &[u8], score: f64) {
    out.array(3);
    out.bulk(key);
    out.bulk(member);
    out.double(score);
}

/// ZMPOP/BZMPOP's reply: `[key, [[member, score], ...]]`.
fn reply_zmpop(out: &mut Reply, key: &[u8], popped: &[(Box<[u8]>, f64)]) {
    out.array(2);
    out.bulk(key);
    out.array(popped.len());
    for (m, s) in popped {
        out.array(2);
        out.bulk(m);
        out.double(*s);
    }
}

/// Nothing to pop: block on `keys`, or answer like a timeout when blocking
/// is not allowed (inside MULTI).
fn block_or_null(ctx: &mut Ctx<'_>, keys: &[&[u8]], deadline: u64, out: &mut Reply, waiter: ZSetWaiter) {
    if ctx.can_block() {
        ctx.block_serving(keys, deadline, |o| o.null_array(), Box::new(waiter));
    } else {
        out.null_array();
    }
}

/// What a blocked BZPOPMIN/BZPOPMAX (`count` None) or BZMPOP takes once one
/// of its keys has members.
struct ZSetWaiter {
    max: bool,
    count: Option<usize>,
}

impl BlockedOp for ZSetWaiter {
    fn readiness(&self, keys: &mut KeyAccess<'_>, key: &[u8]) -> Readiness {
        match keys.peek(key).map(|e| e.value()) {
            Some(ValueRef::ZSet(z)) if !z.is_empty() => Readiness::Ready,
            Some(ValueRef::ZSet(_)) | None => Readiness::Empty,
            Some(_) => Readiness::WrongType,
        }
    }

    fn serve(&self, keys: &mut KeyAccess<'_>, key: &[u8], out: &mut Reply) {
        let Ok(Some(popped)) = pop_many(keys, key, self.max, self.count.unwrap_or(1)) else { return };
        match (self.count, popped.first()) {
            (None, Some((m, s))) => reply_bzpop(out, key, m, *s),
            (Some(_), _) => reply_zmpop(out, key, &popped),
            (None, None) => {}
        }
    }
}

fn zmpop(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    zmpop_generic(ctx, args, out, 1)
}

fn bzmpop(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    zmpop_generic(ctx, args, out, 2)
}

/// ZMPOP numkeys key.. MIN|MAX [COUNT n]; BZMPOP has a timeout before
/// numkeys, read after the rest (so syntax errors come first, as in Redis).
fn zmpop_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, numkeys_idx: usize) -> CmdResult {
    let blocking = numkeys_idx == 2;
    let numkeys = match parse_i64(args[numkeys_idx]) {
        Some(n) if n >= 1 => n as u64,
        _ => return Err(ERR_NUMKEYS.into()),
    };
    let where_idx = (numkeys_idx as u64 + 1).saturating_add(numkeys);
    if where_idx >= args.len() as u64 {
        return Err(err::SYNTAX.into());
    }
    let where_idx = where_idx as usize;
    let max = match args[where_idx] {
        a if eq_ic(a, "min") => false,
        a if eq_ic(a, "max") => true,
        _ => return Err(err::SYNTAX.into()),
    };
    let mut count = None;
    let mut j = where_idx + 1;
    while j < args.len() {
        if count.is_none() && eq_ic(args[j], "count") && j + 1 < args.len() {
            count = match parse_i64(args[j + 1]) {
                Some(n) if n >= 1 => Some(n as usize),
                _ => return Err("ERR count should be greater than 0".into()),
            };
            j += 2;
        } else {
            return Err(err::SYNTAX.into());
        }
    }
    let deadline = if blocking { parse_block_timeout(args[1], ctx.keys.now_ms)? } else { 0 };
    let keys = &args[numkeys_idx + 1..where_idx];
    for key in keys {
        let Some(popped) = pop_many(&mut ctx.keys, key, max, count.unwrap_or(1))? else {
            continue;
        };
        reply_zmpop(out, key, &popped);
        return Ok(());
    }
    if blocking {
        block_or_null(ctx, keys, deadline, out, ZSetWaiter { max, count: Some(count.unwrap_or(1)) });
    } else {
        out.null_array();
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// ZRANDMEMBER and ZSCAN
// ---------------------------------------------------------------------------

fn zrandmember(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    if args.len() == 2 {
        let z = read_zset(&mut ctx.keys, args[1])?;
        match z.and_then(|z| z.random_slot().and_then(|s| z.at_slot(s))) {
            Some((m, _)) => out.bulk(m),
            None => out.null(),
        }
        return Ok(());
    }
    let count = arg_i64(args[2])?;
    if count == i64::MIN {
        return Err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807".into());
    }
    let withscores = match args.len() {
        3 => false,
        4 if eq_ic(args[3], "withscores") => true,
        _ => return Err(err::SYNTAX.into()),
    };
    // Redis bounds the count when the reply doubles in size.
    if withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err("ERR value is out of range".into());
    }
    let Some(z) = read_zset(&mut ctx.keys, args[1])? else {
        out.array(0);
        return Ok(());
    };
    if count == 0 || z.is_empty() {
        out.array(0);
        return Ok(());
    }
    let pairs = withscores && out.resp3;
    let emit = |out: &mut Reply, (m, s): (&[u8], f64)| {
        if pairs {
            out.array(2);
        }
        out.bulk(m);
        if withscores {
            out.double(s);
        }
    };
    if count < 0 || count == 1 {
        // Repetitions allowed: independent draws.
        let n = count.unsigned_abs() as usize;
        out.array(if withscores && !pairs { n * 2 } else { n });
        for _ in 0..n {
            if let Some(item) = z.random_slot().and_then(|s| z.at_slot(s)) {
                emit(out, item);
            }
        }
        return Ok(());
    }
    let count = count as usize;
    if count >= z.len() {
        // The whole set, highest score first (as Redis 7.0 walks it).
        let items: Vec<(&[u8], f64)> = z.iter_from(z.len() - 1, true).collect();
        reply_members(out, &items, withscores);
        return Ok(());
    }
    let slots = distinct_random_slots(z, count);
    out.array(if withscores && !pairs { slots.len() * 2 } else { slots.len() });
    for s in slots {
        if let Some(item) = z.at_slot(s) {
            emit(out, item);
        }
    }
    Ok(())
}

/// `count` (< len) distinct members' slots, in random order.
fn distinct_random_slots(z: &ZSetValue, count: usize) -> Vec<u32> {
    if count * 3 > z.len() {
        // Many of them: shuffle all and keep a prefix.
        let mut all: Vec<u32> = z.dict().iter().map(|(s, _)| s).collect();
        for i in 0..count {
            let j = i + (fast_rand() % (all.len() - i) as u64) as usize;
            all.swap(i, j);
        }
        all.truncate(count);
        return all;
    }
    let mut picked = std::collections::HashSet::with_capacity(count);
    let mut slots = Vec::with_capacity(count);
    while slots.len() < count {
        let Some(s) = z.random_slot() else {
            break;
        };
        if picked.insert(s) {
            slots.push(s);
        }
    }
    slots
}

fn zscan(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let cursor = super::sets::parse_cursor(args[2])?;
    let Some(z) = read_zset(&mut ctx.keys, args[1])? else {
        out.array(2);
        out.bulk(b"0");
        out.array(0);
        return Ok(());
    };
    let mut count = 10usize;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 3;
    while i < args.len() {
        let left = args.len() - i;
        if eq_ic(args[i], "count") && left >= 2 {
            count = match arg_i64(args[i + 1])? {
                n if n >= 1 => n as usize,
                _ => return Err(err::SYNTAX.into()),
            };
            i += 2;
        } else if eq_ic(args[i], "match") && left >= 2 {
            pattern = Some(args[i + 1]);
            i += 2;
        } else {
            return Err(err::SYNTAX.into());
        }
    }
    let pattern = pattern.filter(|p| *p != b"*");
    let wanted = |m: &[u8]| pattern.is_none_or(|p| glob_match(p, m, false));

    let mut items: Vec<(&[u8], f64)> = Vec::new();
    let mut next = 0u64;
    if z.is_listpack() {
        // Redis returns a listpack whole, in order, whatever the cursor.
        items.extend(z.iter().filter(|(m, _)| wanted(m)));
    } else if let Ok(start) = u32::try_from(cursor) {
        // The cursor is a dictionary slot: members never move while they live.
        let dict = z.dict();
        let mut at = start;
        for _ in 0..count {
            let Some(slot) = dict.next_used(at) else {
                break;
            };
            if let Some((m, s)) = z.at_slot(slot) {
                if wanted(m) {
                    items.push((m, s));
                }
            }
            at = slot + 1;
        }
        if dict.next_used(at).is_some() {
            next = at as u64;
        }
    }
    out.array(2);
    out.bulk(next.to_string().as_bytes());
    out.array(items.len() * 2);
    for (m, s) in items {
        out.bulk(m);
        // Scores as strings (Redis builds them with %.17g), in RESP3 too.
        out.bulk(format_double(s).as_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_arguments() {
        assert_eq!(parse_score(b"1.5"), Some(1.5));
        assert_eq!(parse_score(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_score(b"0x10"), Some(16.0));
        for bad in [&b""[..], b" 1", b"1 ", b"nan", b"1e400", b"abc", b"1\x002", b"."] {
            assert_eq!(parse_score(bad), None, "{:?}", bad.escape_ascii().to_string());
        }
    }

    #[test]
    fn range_bounds() {
        assert_eq!(parse_score_bound(b"(1"), Some((1.0, true)));
        assert_eq!(parse_score_bound(b""), Some((0.0, false)), "strtod of \"\" is 0");
        assert_eq!(parse_score_bound(b"( 1"), Some((1.0, true)));
        assert_eq!(parse_score_bound(b"1e400"), Some((f64::INFINITY, false)));
        assert_eq!(parse_score_bound(b"1 "), None);
        assert_eq!(parse_score_bound(b"1\0junk"), Some((1.0, false)));
        assert_eq!(parse_score_bound(b"(nan"), None);
        assert_eq!(parse_lex_bound(b"+"), Some(LexBound::Max));
        assert_eq!(parse_lex_bound(b"-"), Some(LexBound::Min));
        assert_eq!(parse_lex_bound(b"+a"), None);
        assert_eq!(parse_lex_bound(b"+\0a"), Some(LexBound::Max));
        assert_eq!(parse_lex_bound(b"["), Some(LexBound::Inclusive(vec![])));
        assert_eq!(parse_lex_bound(b"(a"), Some(LexBound::Exclusive(b"a".to_vec())));
        assert_eq!(parse_lex_bound(b"a"), None);
        assert_eq!(parse_lex_bound(b""), None);
    }

    #[test]
    fn rank_spans() {
        assert_eq!(rank_span(0, -1, 5), Some((0, 5)));
        assert_eq!(rank_span(-100, 100, 5), Some((0, 5)));
        assert_eq!(rank_span(-1, -1, 5), Some((4, 1)));
        assert_eq!(rank_span(3, 1, 5), None);
        assert_eq!(rank_span(5, 10, 5), None);
        assert_eq!(rank_span(0, -1, 0), None);
        assert_eq!(rank_span(i64::MIN, i64::MAX, 3), Some((0, 3)));
    }

    #[test]
    fn counted_key_positions() {
        let args: Vec<&[u8]> = vec![b"zunionstore", b"dst", b"2", b"a", b"b", b"weights", b"1", b"2"];
        assert_eq!(store_op_keys(&args).as_slice(), &[1, 3, 4]);
        let args: Vec<&[u8]> = vec![b"zunion", b"99999999999", b"a"];
        assert_eq!(numkeys_at_1(&args).as_slice(), &[2]);
        let args: Vec<&[u8]> = vec![b"zunion", b"-1", b"a"];
        assert!(numkeys_at_1(&args).is_empty());
        let args: Vec<&[u8]> = vec![b"bzmpop", b"0", b"x", b"a", b"min"];
        assert!(numkeys_at_2(&args).is_empty());
    }
}
