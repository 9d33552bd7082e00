//! Commands on sets: SADD & co., random picks (SPOP, SRANDMEMBER), the set
//! algebra (SINTER, SUNION, SDIFF, their STORE forms, SINTERCARD), SMOVE and
//! SSCAN.
//!
//! Also home of the helpers HSCAN shares with SSCAN (cursor and option
//! parsing, the slot-cursor walk) and the random sampling HRANDFIELD shares
//! with SRANDMEMBER: both collection types sit on a `SlabTable`.

use super::typed::{read_value, remove_members, write_value, write_value_or_create};
use crate::base::{eq_ic, glob_match};
use crate::commands::{CmdError, CmdResult, CommandDef, Ctx, Keys, arg_i64, err, flags};
use crate::config::keyspace_events as ev;
use crate::protocol::Reply;
use crate::store::fast_rand;
use crate::store::set::{Member, SetValue};
use crate::store::slab_table::{Keyed, SlabTable};
use crate::store::{Changed, Value, ValueRef};
use smallvec::SmallVec;

const W: u32 = flags::WRITE;
const WD: u32 = flags::WRITE | flags::DENYOOM;
const R: u32 = flags::READONLY;
const F: u32 = flags::FAST;

pub const COMMANDS: &[CommandDef] = &[
    CommandDef::new("sadd", -3, WD | F, Keys::Range(1, 1, 1), sadd).acl("@write @set @fast"),
    CommandDef::new("srem", -3, W | F, Keys::Range(1, 1, 1), srem).acl("@write @set @fast"),
    CommandDef::new("smembers", 2, R, Keys::Range(1, 1, 1), smembers).acl("@read @set @slow"),
    CommandDef::new("sismember", 3, R | F, Keys::Range(1, 1, 1), sismember).acl("@read @set @fast"),
    CommandDef::new("smismember", -3, R | F, Keys::Range(1, 1, 1), smismember).acl("@read @set @fast"),
    CommandDef::new("scard", 2, R | F, Keys::Range(1, 1, 1), scard).acl("@read @set @fast"),
    CommandDef::new("spop", -2, W | F, Keys::Range(1, 1, 1), spop).acl("@write @set @fast"),
    CommandDef::new("srandmember", -2, R, Keys::Range(1, 1, 1), srandmember).acl("@read @set @slow"),
    CommandDef::new("sinter", -2, R, Keys::Range(1, -1, 1), sinter).acl("@read @set @slow"),
    CommandDef::new("sunion", -2, R, Keys::Range(1, -1, 1), sunion).acl("@read @set @slow"),
    CommandDef::new("sdiff", -2, R, Keys::Range(1, -1, 1), sdiff).acl("@read @set @slow"),
    CommandDef::new("sinterstore", -3, WD, Keys::Range(1, -1, 1), sinterstore).acl("@write @set @slow"),
    CommandDef::new("sunionstore", -3, WD, Keys::Range(1, -1, 1), sunionstore).acl("@write @set @slow"),
    CommandDef::new("sdiffstore", -3, WD, Keys::Range(1, -1, 1), sdiffstore).acl("@write @set @slow"),
    CommandDef::new("sintercard", -3, R, Keys::Custom(sintercard_keys), sintercard).acl("@read @set @slow"),
    CommandDef::new("smove", 4, W | F, Keys::Range(1, 2, 1), smove).acl("@write @set @fast"),
    CommandDef::new("sscan", -3, R, Keys::Range(1, 1, 1), sscan).acl("@read @set @slow"),
];

fn new_set() -> Value {
    Value::Set(SetValue::default())
}

/// The set at `key` for reading: None when missing, WRONGTYPE for other types.
fn read_set<'a>(ctx: &'a mut Ctx<'_>, key: &[u8]) -> Result<Option<&'a SetValue>, CmdError> {
    read_value(&mut ctx.keys, key)
}

/// Replies with a whole set (RESP3 set type). An intset comes out in
/// ascending order, as Redis's intset iteration does.
fn reply_members(out: &mut Reply, set: &SetValue) {
    out.set(set.len());
    if set.is_compact() {
        for m in sorted_intset(set) {
            out.bulk(m);
        }
    } else {
        for m in set.iter() {
            out.bulk(m);
        }
    }
}

/// The members of a compact (all-integer, ≤512) set in numeric order.
fn sorted_intset(set: &SetValue) -> Vec<&[u8]> {
    let mut v: Vec<&[u8]> = set.iter().collect();
    v.sort_by_cached_key(|m| crate::base::parse_i64(m).unwrap_or_default());
    v
}

// ---------------------------------------------------------------- single-set commands

fn sadd(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let added = write_value_or_create(&mut ctx.keys, args[1], new_set, |set: &mut SetValue| {
        let added = args[2..].iter().filter(|m| set.insert(m)).count();
        Ok(Changed::when(added > 0, added))
    })?;
    if added > 0 {
        ctx.notify(ev::SET, "sadd", args[1]);
    }
    out.int(added as i64);
    Ok(())
}

fn srem(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    remove_members(ctx, args[1], &args[2..], out, (ev::SET, "srem"), |set: &mut SetValue, m| set.remove(m))
}

fn smembers(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    match read_set(ctx, args[1])? {
        Some(set) => reply_members(out, set),
        None => out.set(0),
    }
    Ok(())
}

fn sismember(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let found = read_set(ctx, args[1])?.is_some_and(|s| s.contains(args[2]));
    out.int(found as i64);
    Ok(())
}

fn smismember(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let set = read_set(ctx, args[1])?;
    out.array(args.len() - 2);
    for m in &args[2..] {
        out.int(set.is_some_and(|s| s.contains(m)) as i64);
    }
    Ok(())
}

fn scard(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let len = read_set(ctx, args[1])?.map_or(0, |s| s.len());
    out.int(len as i64);
    Ok(())
}

// ---------------------------------------------------------------- random picks

/// Redis's SPOP strategy switch: when what remains is at most a fifth of
/// what goes, Redis rebuilds the set from the remaining members, which
/// re-decides its encoding; we mirror that effect.
const SPOP_MOVE_STRATEGY_MUL: usize = 5;

fn spop(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let count = match args.len() {
        2 => None,
        3 => Some(arg_positive(args[2], "ERR value is out of range, must be positive")?),
        _ => return Err(err::SYNTAX.into()),
    };
    // Some(whether the set is now empty) when members were popped.
    let popped = write_value(&mut ctx.keys, args[1], |set: &mut SetValue| {
        let Some(count) = count else {
            let slot = set.table().random_slot(fast_rand()).expect("stored sets are never empty");
            let member = set.remove_slot(slot).expect("live slot");
            out.bulk(&member);
            return Ok(Changed::Yes(Some(set.is_empty())));
        };
        let size = set.len();
        if count == 0 {
            out.set(0);
            return Ok(Changed::No(None));
        }
        if count >= size {
            // Everything goes: reply with the whole set, the key is deleted
            // once the write is over.
            let all = std::mem::take(set);
            reply_members(out, &all);
        } else {
            out.set(count);
            for _ in 0..count {
                let slot = set.table().random_slot(fast_rand()).expect("count < size");
                let member = set.remove_slot(slot).expect("live slot");
                out.bulk(&member);
            }
            if (size - count) * SPOP_MOVE_STRATEGY_MUL <= count {
                set.recheck_compact();
            }
        }
        Ok(Changed::Yes(Some(count >= size)))
    })?;
    match popped {
        None => match count {
            None => out.null(),
            Some(_) => out.set(0),
        },
        Some(Some(emptied)) => notify_spop(ctx, args[1], emptied),
        Some(None) => {}
    }
    Ok(())
}

/// SPOP's events: `spop`, then `del` when it emptied the set.
fn notify_spop(ctx: &Ctx<'_>, key: &[u8], emptied: bool) {
    ctx.notify(ev::SET, "spop", key);
    if emptied {
        ctx.notify(ev::GENERIC, "del", key);
    }
}

fn srandmember(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    match args.len() {
        2 => {
            match read_set(ctx, args[1])? {
                Some(set) => out.bulk(random_item(set.table()).key()),
                None => out.null(),
            }
            Ok(())
        }
        3 => {
            let count = arg_random_count(args[2])?;
            let Some(set) = read_set(ctx, args[1])? else {
                out.array(0);
                return Ok(());
            };
            if set.is_compact() && count >= set.len() as i64 {
                // The whole intset, in its (ascending) order.
                out.array(set.len());
                for m in sorted_intset(set) {
                    out.bulk(m);
                }
            } else {
                reply_random_items(out, set.table(), count, 1, |out, m| out.bulk(m.key()));
            }
            Ok(())
        }
        _ => Err(err::SYNTAX.into()),
    }
}

/// A non-negative integer argument, with one error message for both "not
/// an integer" and "negative" (Redis's `getPositiveLongFromObjectOrReply`).
pub(super) fn arg_positive(arg: &[u8], msg: &'static str) -> Result<usize, CmdError> {
    match crate::base::parse_i64(arg) {
        Some(n) if n >= 0 => Ok(n as usize),
        _ => Err(msg.into()),
    }
}

/// The count of SRANDMEMBER / HRANDFIELD: any integer but i64::MIN.
pub(super) fn arg_random_count(arg: &[u8]) -> Result<i64, CmdError> {
    match arg_i64(arg)? {
        i64::MIN => Err(format!("ERR value is out of range, value must between {} and {}", -i64::MAX, i64::MAX).into()),
        n => Ok(n),
    }
}

/// One random item of a non-empty table.
pub(super) fn random_item<T: Keyed>(table: &SlabTable<T>) -> &T {
    let slot = table.random_slot(fast_rand()).expect("stored collections are never empty");
    table.get(slot).expect("live slot")
}

/// The reply of SRANDMEMBER / HRANDFIELD with a count: `count` distinct
/// items (or all of them), or with a negative count `-count` independent
/// picks that may repeat. `emit` writes one item as `per_item` array elements.
pub(super) fn reply_random_items<T: Keyed>(
    out: &mut Reply,
    table: &SlabTable<T>,
    count: i64,
    per_item: usize,
    mut emit: impl FnMut(&mut Reply, &T),
) {
    if count < 0 {
        let n = count.unsigned_abs() as usize;
        out.array(n * per_item);
        for _ in 0..n {
            emit(out, random_item(table));
        }
        return;
    }
    let count = count as usize;
    if count >= table.len() {
        out.array(table.len() * per_item);
        for (_, item) in table.iter() {
            emit(out, item);
        }
        return;
    }
    let slots = distinct_random_slots(table, count);
    out.array(slots.len() * per_item);
    for slot in slots {
        emit(out, table.get(slot).expect("live slot"));
    }
}

/// `count` (< len) distinct live slots, chosen at random in O(count) expected.
fn distinct_random_slots<T: Keyed>(table: &SlabTable<T>, count: usize) -> Vec<u32> {
    if count * 3 > table.len() {
        // Dense pick: a partial Fisher-Yates shuffle over all live slots.
        let mut all: Vec<u32> = table.iter().map(|(s, _)| s).collect();
        for i in 0..count {
            let j = i + (fast_rand() % (all.len() - i) as u64) as usize;
            all.swap(i, j);
        }
        all.truncate(count);
        return all;
    }
    // Sparse pick: sample and reject repeats.
    let mut seen = hashbrown::HashSet::with_capacity(count);
    let mut picked = Vec::with_capacity(count);
    while picked.len() < count {
        let slot = table.random_slot(fast_rand()).expect("non-empty");
        if seen.insert(slot) {
            picked.push(slot);
        }
    }
    picked
}

// ---------------------------------------------------------------- set algebra

/// Checks that every key holds a set (or is missing), in order, as Redis
/// does before computing anything; returns each set's size (None = missing).
/// Read commands count keyspace hits/misses; STORE forms look up for writing.
fn set_sizes(ctx: &mut Ctx<'_>, keys: &[&[u8]], for_store: bool) -> Result<SmallVec<[Option<usize>; 8]>, CmdError> {
    let mut sizes = SmallVec::with_capacity(keys.len());
    for key in keys {
        let size = if for_store {
            // A write lookup (access time, no hit or miss) that writes nothing.
            ctx.keys
                .update(key, |e| match e.value() {
                    ValueRef::Set(s) => Ok(Changed::No(s.len())),
                    _ => Err(CmdError::from(err::WRONGTYPE)),
                })
                .transpose()?
        } else {
            read_set(ctx, key)?.map(|s| s.len())
        };
        sizes.push(size);
    }
    Ok(sizes)
}

/// The set at a key already checked by `set_sizes` (no stats, no touch).
fn checked_set<'a>(ctx: &'a mut Ctx<'_>, key: &[u8]) -> Option<&'a SetValue> {
    match ctx.keys.peek(key).map(|e| e.value()) {
        Some(ValueRef::Set(s)) => Some(s),
        _ => None,
    }
}

/// Members of the intersection, at most `limit` of them (0 = no limit).
fn intersection(ctx: &mut Ctx<'_>, keys: &[&[u8]], sizes: &[Option<usize>], limit: usize) -> Vec<Box<[u8]>> {
    if sizes.iter().any(Option::is_none) {
        return Vec::new();
    }
    // Walk the smallest set, probing the others smallest first.
    let mut order: SmallVec<[usize; 8]> = (0..keys.len()).collect();
    order.sort_by_key(|&i| sizes[i]);
    let mut candidates: Vec<Box<[u8]>> = match checked_set(ctx, keys[order[0]]) {
        Some(s) => s.iter().map(Box::from).collect(),
        None => return Vec::new(),
    };
    for &i in &order[1..] {
        let Some(other) = checked_set(ctx, keys[i]) else { return Vec::new() };
        candidates.retain(|m| other.contains(m));
    }
    if limit > 0 {
        candidates.truncate(limit);
    }
    candidates
}

fn union(ctx: &mut Ctx<'_>, keys: &[&[u8]]) -> SetValue {
    let mut result = SetValue::default();
    for key in keys {
        if let Some(s) = checked_set(ctx, key) {
            for m in s.iter() {
                result.insert(m);
            }
        }
    }
    result
}

fn difference(ctx: &mut Ctx<'_>, keys: &[&[u8]]) -> Vec<Box<[u8]>> {
    let mut candidates: Vec<Box<[u8]>> = match checked_set(ctx, keys[0]) {
        Some(s) => s.iter().map(Box::from).collect(),
        None => return Vec::new(),
    };
    for key in &keys[1..] {
        if candidates.is_empty() {
            break;
        }
        if let Some(other) = checked_set(ctx, key) {
            candidates.retain(|m| !other.contains(m));
        }
    }
    candidates
}

#[derive(Clone, Copy)]
enum SetOp {
    Inter,
    Union,
    Diff,
}

fn compute(ctx: &mut Ctx<'_>, op: SetOp, keys: &[&[u8]], for_store: bool) -> Result<SetValue, CmdError> {
    let sizes = set_sizes(ctx, keys, for_store)?;
    let members = match op {
        SetOp::Inter => intersection(ctx, keys, &sizes, 0),
        SetOp::Diff => difference(ctx, keys),
        SetOp::Union => return Ok(union(ctx, keys)),
    };
    let mut result = SetValue::default();
    for m in &members {
        result.insert(m);
    }
    Ok(result)
}

fn set_op_reply(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, op: SetOp) -> CmdResult {
    let result = compute(ctx, op, &args[1..], false)?;
    reply_members(out, &result);
    Ok(())
}

/// The STORE forms: the destination is overwritten (any type, TTL dropped),
/// or deleted when the result is empty.
fn set_op_store(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, op: SetOp) -> CmdResult {
    let result = compute(ctx, op, &args[2..], true)?;
    let len = result.len();
    if len == 0 {
        if ctx.keys.delete(args[1]) {
            ctx.notify(ev::GENERIC, "del", args[1]);
        }
    } else {
        ctx.keys.set(args[1], Value::Set(result), 0, false);
        let event = match op {
            SetOp::Inter => "sinterstore",
            SetOp::Union => "sunionstore",
            SetOp::Diff => "sdiffstore",
        };
        ctx.notify(ev::SET, event, args[1]);
    }
    out.int(len as i64);
    Ok(())
}

fn sinter(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    set_op_reply(ctx, args, out, SetOp::Inter)
}

fn sunion(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    set_op_reply(ctx, args, out, SetOp::Union)
}

fn sdiff(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    set_op_reply(ctx, args, out, SetOp::Diff)
}

fn sinterstore(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    set_op_store(ctx, args, out, SetOp::Inter)
}

fn sunionstore(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    set_op_store(ctx, args, out, SetOp::Union)
}

fn sdiffstore(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    set_op_store(ctx, args, out, SetOp::Diff)
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]: keys are args[2..2+numkeys]
/// when numkeys is valid; otherwise none (the handler reports the error).
fn sintercard_keys(args: &[&[u8]]) -> SmallVec<[usize; 8]> {
    match args.get(1).and_then(|a| crate::base::parse_i64(a)) {
        Some(n) if n > 0 && (n as u64) <= (args.len() as u64).saturating_sub(2) => (2..2 + n as usize).collect(),
        _ => SmallVec::new(),
    }
}

fn sintercard(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let numkeys = match crate::base::parse_i64(args[1]) {
        Some(n) if n > 0 => n as u64,
        _ => return Err("ERR numkeys should be greater than 0".into()),
    };
    if numkeys > (args.len() - 2) as u64 {
        return Err("ERR Number of keys can't be greater than number of args".into());
    }
    let keys = &args[2..2 + numkeys as usize];
    let mut limit = 0;
    let mut j = 2 + numkeys as usize;
    while j < args.len() {
        if eq_ic(args[j], "limit") && j + 1 < args.len() {
            limit = arg_positive(args[j + 1], "ERR LIMIT can't be negative")?;
            j += 2;
        } else {
            return Err(err::SYNTAX.into());
        }
    }
    let sizes = set_sizes(ctx, keys, false)?;
    let n = intersection(ctx, keys, &sizes, limit).len();
    out.int(n as i64);
    Ok(())
}

fn smove(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let (src, dst, member) = (args[1], args[2], args[3]);
    // Redis checks both types before touching anything.
    let src_has = match ctx.keys.peek(src).map(|e| e.value()) {
        None => {
            out.int(0);
            return Ok(());
        }
        Some(ValueRef::Set(s)) => s.contains(member),
        Some(_) => return Err(err::WRONGTYPE.into()),
    };
    if ctx.keys.peek(dst).is_some_and(|e| !matches!(e.value(), ValueRef::Set(_))) {
        return Err(err::WRONGTYPE.into());
    }
    if src == dst || !src_has {
        out.int((src == dst && src_has) as i64);
        return Ok(());
    }
    // Both types were checked above, and `src` holds the member.
    let src_emptied = ctx.keys.update(src, |e| match e.value_mut() {
        Value::Set(s) => {
            s.remove(member);
            Changed::Yes(s.is_empty())
        }
        _ => Changed::Yes(false),
    });
    ctx.notify(ev::SET, "srem", src);
    if src_emptied == Some(true) {
        ctx.notify(ev::GENERIC, "del", src);
    }
    let added = ctx.keys.update_or_create(dst, new_set, |e| {
        let added = match e.value_mut() {
            Value::Set(s) => s.insert(member),
            _ => false,
        };
        Changed::when(added, added)
    });
    if added {
        ctx.notify(ev::SET, "sadd", dst);
    }
    out.int(1);
    Ok(())
}

// ---------------------------------------------------------------- SSCAN (and HSCAN's helpers)

/// A SCAN-family cursor, with Redis's error.
pub(super) fn parse_cursor(arg: &[u8]) -> Result<u64, CmdError> {
    crate::base::parse_scan_cursor(arg).ok_or(CmdError::from("ERR invalid cursor"))
}

/// MATCH and COUNT of HSCAN / SSCAN.
pub(super) struct ScanOpts<'a> {
    /// None when every element matches (no MATCH, or MATCH *).
    pub pattern: Option<&'a [u8]>,
    pub count: usize,
}

pub(super) fn parse_scan_opts<'a>(opts: &[&'a [u8]]) -> Result<ScanOpts<'a>, CmdError> {
    let mut scan = ScanOpts { pattern: None, count: 10 };
    let mut i = 0;
    while i < opts.len() {
        if eq_ic(opts[i], "count") && i + 1 < opts.len() {
            let n = arg_i64(opts[i + 1])?;
            if n < 1 {
                return Err(err::SYNTAX.into());
            }
            scan.count = n as usize;
        } else if eq_ic(opts[i], "match") && i + 1 < opts.len() {
            let p = opts[i + 1];
            scan.pattern = if p == b"*" { None } else { Some(p) };
        } else {
            return Err(err::SYNTAX.into());
        }
        i += 2;
    }
    Ok(scan)
}

impl ScanOpts<'_> {
    pub fn matches(&self, key: &[u8]) -> bool {
        self.pattern.is_none_or(|p| glob_match(p, key, false))
    }
}

/// One step of a slot-cursor walk over `table`, collecting the items that
/// match into `found`; returns the next cursor (0 when done).
///
/// The cursor is a slot number: items never move while they live, so every
/// item present for the whole scan is returned exactly once. `weight` is how
/// much each visited item counts against COUNT (2 for hashes: Redis counts
/// fields and values). Like Redis, the walk also gives up after visiting
/// ten times COUNT slots, so a sparse table cannot make one call slow.
pub(super) fn scan_step<'t, T: Keyed>(
    table: &'t SlabTable<T>,
    cursor: u64,
    opts: &ScanOpts<'_>,
    weight: usize,
    found: &mut Vec<&'t T>,
) -> u64 {
    let end = table.slot_count() as u64;
    let mut slot = cursor;
    let mut visited = 0usize;
    let mut budget = opts.count.saturating_mul(10);
    while slot < end && visited < opts.count && budget > 0 {
        if let Some(item) = table.get(slot as u32) {
            visited += weight;
            if opts.matches(item.key()) {
                found.push(item);
            }
        }
        slot += 1;
        budget -= 1;
    }
    // Skip a short run of free slots so the last call says 0 when it can.
    let mut lookahead = 0;
    while slot < end && lookahead < 64 && table.get(slot as u32).is_none() {
        slot += 1;
        lookahead += 1;
    }
    if slot >= end { 0 } else { slot }
}

/// Writes `[cursor, [items...]]`.
pub(super) fn reply_scan<'t, T: 't>(
    out: &mut Reply,
    cursor: u64,
    items: &[&'t T],
    per_item: usize,
    mut emit: impl FnMut(&mut Reply, &'t T),
) {
    out.array(2);
    out.bulk(cursor.to_string().as_bytes());
    out.array(items.len() * per_item);
    for item in items {
        emit(out, item);
    }
}

fn sscan(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let cursor = parse_cursor(args[2])?;
    let Some(set) = read_set(ctx, args[1])? else {
        reply_scan::<()>(out, 0, &[], 1, |_, _| {});
        return Ok(());
    };
    let opts = parse_scan_opts(&args[3..])?;
    let mut found: Vec<&Member> = Vec::new();
    let next = if set.is_compact() {
        // Redis returns a whole intset in one call, whatever the cursor, in
        // ascending order.
        found.extend(set.table().iter().map(|(_, m)| m).filter(|m| opts.matches(m.key())));
        found.sort_by_cached_key(|m| crate::base::parse_i64(m.key()).unwrap_or_default());
        0
    } else {
        scan_step(set.table(), cursor, &opts, 1, &mut found)
    };
    reply_scan(out, next, &found, 1, |out, m| out.bulk(m.key()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::hash_bytes;

    fn table_of(n: u32) -> SlabTable<Member> {
        let mut t = SlabTable::default();
        for i in 0..n {
            let m = format!("m{i}");
            t.insert_new(hash_bytes(m.as_bytes()), Member(m.as_bytes().into()));
        }
        t
    }

    #[test]
    fn scan_walk_returns_everything_once() {
        let mut t = table_of(1000);
        // Punch holes so the walk meets free slots.
        for s in (0..1000).step_by(3) {
            t.remove(s);
        }
        let opts = ScanOpts { pattern: None, count: 7 };
        let mut seen = Vec::new();
        let mut cursor = 0;
        loop {
            let mut found = Vec::new();
            cursor = scan_step(&t, cursor, &opts, 1, &mut found);
            assert!(found.len() <= 7);
            seen.extend(found.iter().map(|m| m.0.clone()));
            if cursor == 0 {
                break;
            }
        }
        let total = seen.len();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), total, "no duplicates");
        assert_eq!(total, t.len());
    }

    #[test]
    fn distinct_sampling_is_distinct() {
        let t = table_of(100);
        for count in [1, 10, 40, 99] {
            let mut slots = distinct_random_slots(&t, count);
            assert_eq!(slots.len(), count);
            slots.sort();
            slots.dedup();
            assert_eq!(slots.len(), count);
            assert!(slots.iter().all(|&s| t.get(s).is_some()));
        }
    }
}
