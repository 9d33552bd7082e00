//! Stream commands: XADD, XRANGE/XREVRANGE, XLEN, XDEL, XTRIM, XSETID,
//! XREAD and XREADGROUP (blocking too), consumer groups (XGROUP, XACK,
//! XPENDING, XCLAIM, XAUTOCLAIM) and XINFO, with Redis 7.0's replies and
//! errors.
//!
//! Blocked XREAD/XREADGROUP clients wait on their keys like BLPOP's (see
//! `lists`): a `StreamWaiter` is offered each key written, deleted or
//! replaced, and serves itself when the stream has entries past its ID, or
//! answers a group reader with an error when its key or group went away.

use super::typed::{TypedValue, read_value, write_value, write_value_or_create};
use crate::base::{eq_ic, parse_i64};
use crate::commands::args::{help, lossy};
use crate::commands::{BlockedOp, CmdError, CmdResult, CommandDef, Ctx, Keys, Readiness, err, flags};
use crate::config::keyspace_events as ev;
use crate::protocol::Reply;
use crate::store::stream::{ENTRIES_READ_INVALID, Group, StreamId, StreamValue, Trim};
use crate::store::{Changed, KeyAccess, Value, ValueRef};
use smallvec::SmallVec;
use std::sync::atomic::Ordering::Relaxed;

const W: u32 = flags::WRITE;
const R: u32 = flags::READONLY;
const F: u32 = flags::FAST;
const WD: u32 = flags::WRITE | flags::DENYOOM;

pub const COMMANDS: &[CommandDef] = &[
    CommandDef::new("xadd", -5, WD | F, Keys::Range(1, 1, 1), xadd).acl("@write @stream @fast"),
    CommandDef::new("xrange", -4, R, Keys::Range(1, 1, 1), xrange).acl("@read @stream @slow"),
    CommandDef::new("xrevrange", -4, R, Keys::Range(1, 1, 1), xrevrange).acl("@read @stream @slow"),
    CommandDef::new("xlen", 2, R | F, Keys::Range(1, 1, 1), xlen).acl("@read @stream @fast"),
    CommandDef::new("xdel", -3, W | F, Keys::Range(1, 1, 1), xdel).acl("@write @stream @fast"),
    CommandDef::new("xtrim", -4, W, Keys::Range(1, 1, 1), xtrim).acl("@write @stream @slow"),
    CommandDef::new("xsetid", -3, WD | F, Keys::Range(1, 1, 1), xsetid).acl("@write @stream @fast"),
    CommandDef::new("xread", -4, R | flags::BLOCKING, Keys::Custom(xread_keys), xread)
        .acl("@read @stream @slow @blocking"),
    CommandDef::new("xreadgroup", -7, W | flags::BLOCKING, Keys::Custom(xread_keys), xreadgroup)
        .acl("@write @stream @slow @blocking"),
    CommandDef::new("xack", -4, W | F, Keys::Range(1, 1, 1), xack).acl("@write @stream @fast"),
    CommandDef::new("xpending", -3, R, Keys::Range(1, 1, 1), xpending).acl("@read @stream @slow"),
    CommandDef::new("xclaim", -6, W | F, Keys::Range(1, 1, 1), xclaim).acl("@write @stream @fast"),
    CommandDef::new("xautoclaim", -6, W | F, Keys::Range(1, 1, 1), xautoclaim).acl("@write @stream @fast"),
    CommandDef::new("xgroup", -2, 0, Keys::Custom(second_arg_key), xgroup).acl("@slow").subs(XGROUP_SUBS),
    CommandDef::new("xinfo", -2, 0, Keys::Custom(second_arg_key), xinfo).acl("@slow").subs(XINFO_SUBS),
];

const XGROUP_SUBS: &[&str] = &["create", "createconsumer", "delconsumer", "destroy", "help", "setid"];
const XINFO_SUBS: &[&str] = &["consumers", "groups", "help", "stream"];

const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";
const ID_TOO_SMALL: &str = "ERR The ID specified in XADD is equal or smaller than the target stream top item";
const XREAD_DEFAULT_COUNT: usize = 1000;

impl TypedValue for StreamValue {
    fn of(v: ValueRef<'_>) -> Option<&Self> {
        if let ValueRef::Stream(s) = v { Some(s) } else { None }
    }

    fn of_mut(v: &mut Value) -> Option<&mut Self> {
        if let Value::Stream(s) = v { Some(s) } else { None }
    }

    fn is_empty(&self) -> bool {
        false
    }
}

fn new_stream() -> Value {
    Value::Stream(Box::default())
}

/// The key of XGROUP/XINFO subcommands (`XGROUP CREATE key ...`).
fn second_arg_key(args: &[&[u8]]) -> SmallVec<[usize; 8]> {
    let mut v = SmallVec::new();
    if args.len() >= 3 && !eq_ic(args[1], "help") {
        v.push(2);
    }
    v
}

/// The keys of XREAD/XREADGROUP: the first half of what follows STREAMS.
fn xread_keys(args: &[&[u8]]) -> SmallVec<[usize; 8]> {
    let mut i = 1;
    while i < args.len() {
        if eq_ic(args[i], "streams") {
            let rest = args.len() - i - 1;
            if rest == 0 || rest % 2 != 0 {
                return SmallVec::new();
            }
            return (i + 1..i + 1 + rest / 2).collect();
        }
        i += if eq_ic(args[i], "group") {
            3
        } else if eq_ic(args[i], "block") || eq_ic(args[i], "count") {
            2
        } else {
            1
        };
    }
    SmallVec::new()
}

// ---- IDs --------------------------------------------------------------------

/// C's strtoull as Redis's string2ull falls back to it: leading spaces, a
/// sign and leading zeros accepted; a '-' wraps.
fn parse_u64_loose(s: &[u8]) -> Option<u64> {
    if let Some(v) = parse_i64(s) {
        return u64::try_from(v).ok();
    }
    let t = std::str::from_utf8(s).ok()?;
    let t = t.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let v: u64 = digits.parse().ok()?;
    Some(if neg { v.wrapping_neg() } else { v })
}

/// A parsed ID argument: `seq_given` false for `ms-*` (and plain `ms` when
/// the caller allows it to mean "any sequence").
struct ParsedId {
    id: StreamId,
    seq_given: bool,
}

/// Redis's streamGenericParseIDOrReply. `strict` refuses `-` and `+`;
/// `auto_seq` accepts `ms-*`.
fn parse_id_generic(arg: &[u8], missing_seq: u64, strict: bool, auto_seq: bool) -> Result<ParsedId, CmdError> {
    if arg.len() > 127 {
        return Err(INVALID_ID.into());
    }
    if arg == b"-" || arg == b"+" {
        if strict {
            return Err(INVALID_ID.into());
        }
        let id = if arg == b"-" { StreamId::MIN } else { StreamId::MAX };
        return Ok(ParsedId { id, seq_given: true });
    }
    let (ms_part, seq_part) = match arg.iter().position(|&c| c == b'-') {
        Some(p) => (&arg[..p], Some(&arg[p + 1..])),
        None => (arg, None),
    };
    let ms = parse_u64_loose(ms_part).ok_or(CmdError::from(INVALID_ID))?;
    let (seq, seq_given) = match seq_part {
        Some(b"*") if auto_seq => (0, false),
        Some(s) => (parse_u64_loose(s).ok_or(CmdError::from(INVALID_ID))?, true),
        None => (missing_seq, true),
    };
    Ok(ParsedId { id: StreamId::new(ms, seq), seq_given })
}

/// An ID that must be exact (XDEL, XACK, XCLAIM, ...): `-`/`+` refused.
fn strict_id(arg: &[u8]) -> Result<StreamId, CmdError> {
    Ok(parse_id_generic(arg, 0, true, false)?.id)
}

/// One end of a range: `-`, `+`, an ID, or `(ID` (exclusive; strict).
fn interval_id(arg: &[u8], missing_seq: u64, start: bool) -> Result<StreamId, CmdError> {
    if arg.len() > 1 && arg[0] == b'(' {
        let id = parse_id_generic(&arg[1..], missing_seq, true, false)?.id;
        return if start {
            id.next().ok_or(CmdError::from("ERR invalid start ID for the interval"))
        } else {
            id.prev().ok_or(CmdError::from("ERR invalid end ID for the interval"))
        };
    }
    Ok(parse_id_generic(arg, missing_seq, false, false)?.id)
}

fn bulk_id(out: &mut Reply, id: StreamId) {
    out.bulk(id.to_string().as_bytes());
}

fn arg_count(arg: &[u8]) -> Result<i64, CmdError> {
    parse_i64(arg).ok_or(CmdError::from(err::NOT_INT))
}

// ---- replies ----------------------------------------------------------------

/// One entry: `[id, [field, value, ...]]`.
fn reply_entry(out: &mut Reply, id: StreamId, fields: &[Vec<u8>]) {
    out.array(2);
    bulk_id(out, id);
    out.array(fields.len());
    for f in fields {
        out.bulk(f);
    }
}

fn reply_entries<'a>(out: &mut Reply, entries: impl Iterator<Item = (StreamId, &'a Vec<Vec<u8>>)>) {
    let entries: Vec<_> = entries.collect();
    out.array(entries.len());
    for (id, f) in entries {
        reply_entry(out, id, f);
    }
}

/// Opens the reply of XREAD/XREADGROUP for `n` streams (a map in RESP3).
fn open_streams_reply(out: &mut Reply, n: usize) {
    if out.resp3 { out.map(n) } else { out.array(n) }
}

/// Starts one stream's part of the reply: `[key, entries]` (RESP2) or the
/// map key (RESP3).
fn open_stream_part(out: &mut Reply, key: &[u8]) {
    if !out.resp3 {
        out.array(2);
    }
    out.bulk(key);
}

// ---- XADD / XTRIM -----------------------------------------------------------

/// The trimming part of XADD and XTRIM.
struct TrimArgs {
    how: Option<Trim>,
    approx: bool,
    limit: Option<i64>,
}

/// Parsed XADD/XTRIM options; for XADD, the ID too and where fields begin.
struct AddArgs {
    trim: TrimArgs,
    nomkstream: bool,
    id: Option<ParsedId>,
    next: usize,
}

/// Redis's streamParseAddOrTrimArgsOrReply.
fn parse_add_or_trim(args: &[&[u8]], xadd: bool) -> Result<AddArgs, CmdError> {
    let mut a =
        AddArgs { trim: TrimArgs { how: None, approx: false, limit: None }, nomkstream: false, id: None, next: 0 };
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = args[i];
        if xadd && opt == b"*" {
            break;
        } else if (eq_ic(opt, "maxlen") || eq_ic(opt, "minid")) && more > 0 {
            if a.trim.how.is_some() {
                return Err("ERR syntax error, MAXLEN and MINID options at the same time are not compatible".into());
            }
            a.trim.approx = false;
            let next = args[i + 1];
            if more >= 2 && (next == b"~" || next == b"=") {
                a.trim.approx = next == b"~";
                i += 1;
            }
            if eq_ic(opt, "maxlen") {
                let n = arg_count(args[i + 1])?;
                if n < 0 {
                    return Err("ERR The MAXLEN argument must be >= 0.".into());
                }
                a.trim.how = Some(Trim::MaxLen(n as u64));
            } else {
                a.trim.how = Some(Trim::MinId(strict_id(args[i + 1])?));
            }
            i += 1;
        } else if eq_ic(opt, "limit") && more > 0 {
            let n = arg_count(args[i + 1])?;
            if n < 0 {
                return Err("ERR The LIMIT argument must be >= 0.".into());
            }
            a.trim.limit = Some(n);
            i += 1;
        } else if xadd && eq_ic(opt, "nomkstream") {
            a.nomkstream = true;
        } else if xadd {
            a.id = Some(parse_id_generic(opt, 0, true, true)?);
            break;
        } else {
            return Err(err::SYNTAX.into());
        }
        i += 1;
    }
    if a.trim.limit.is_some_and(|l| l != 0) && a.trim.how.is_none() {
        return Err("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy".into());
    }
    if !xadd && a.trim.how.is_none() {
        return Err("ERR syntax error, XTRIM must be called with a trimming strategy".into());
    }
    if a.trim.limit.is_some() && !a.trim.approx {
        return Err("ERR syntax error, LIMIT cannot be used without the special ~ option".into());
    }
    a.next = i;
    Ok(a)
}

/// Node limits from the configuration (stream-node-max-entries / -bytes).
fn node_limits(ctx: &Ctx<'_>) -> (u64, usize) {
    let c = &ctx.config().runtime;
    let entries = c.stream_node_max_entries.load(Relaxed).max(0) as u64;
    let bytes = c.stream_node_max_bytes.load(Relaxed).max(0) as usize;
    (entries, bytes)
}

/// Trims as XADD/XTRIM asked; returns the entries removed.
fn apply_trim(s: &mut StreamValue, t: &TrimArgs, node_max_entries: u64) -> u64 {
    let Some(how) = t.how else { return 0 };
    let limit = match t.limit {
        Some(l) => l as u64,
        None if t.approx => {
            let l = 100 * node_max_entries as i64;
            if l <= 0 || l > 10000 { 10000 } else { l as u64 }
        }
        None => 0,
    };
    s.trim(how, t.approx, limit)
}

fn xadd(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let a = parse_add_or_trim(args, true)?;
    let fields_at = a.next + 1;
    let nfields = args.len().saturating_sub(fields_at);
    if nfields < 2 || nfields % 2 == 1 {
        return Err(err::arity("xadd").into());
    }
    if let Some(p) = &a.id
        && p.seq_given
        && p.id.is_zero()
    {
        return Err("ERR The ID specified in XADD must be greater than 0-0".into());
    }
    let (max_entries, max_bytes) = node_limits(ctx);
    let now = ctx.keys.now_ms;
    if a.nomkstream && !ctx.keys.contains(args[1]) {
        out.null();
        return Ok(());
    }
    let trimmed = write_value_or_create(&mut ctx.keys, args[1], new_stream, |s: &mut StreamValue| {
        if s.last_id == StreamId::MAX {
            return Err("ERR The stream has exhausted the last possible ID, unable to add more items".into());
        }
        let id = match &a.id {
            None => {
                if now > s.last_id.ms {
                    StreamId::new(now, 0)
                } else {
                    s.last_id.next().expect("not exhausted")
                }
            }
            Some(p) if p.seq_given => p.id,
            Some(p) => {
                if s.last_id.ms == p.id.ms {
                    if s.last_id.seq == u64::MAX {
                        return Err(ID_TOO_SMALL.into());
                    }
                    StreamId::new(p.id.ms, s.last_id.seq + 1)
                } else {
                    p.id
                }
            }
        };
        if a.id.is_some() && id <= s.last_id {
            return Err(ID_TOO_SMALL.into());
        }
        let fields: Vec<Vec<u8>> = args[fields_at..].iter().map(|f| f.to_vec()).collect();
        s.append(id, fields, max_entries, max_bytes);
        bulk_id(out, id);
        Ok(Changed::Yes(apply_trim(s, &a.trim, max_entries)))
    })?;
    ctx.notify(ev::STREAM, "xadd", args[1]);
    if trimmed > 0 {
        ctx.notify(ev::STREAM, "xtrim", args[1]);
    }
    Ok(())
}

fn xtrim(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let a = parse_add_or_trim(args, false)?;
    let (max_entries, _) = node_limits(ctx);
    let removed = write_value(&mut ctx.keys, args[1], |s: &mut StreamValue| {
        let removed = apply_trim(s, &a.trim, max_entries);
        Ok(Changed::when(removed > 0, removed))
    })?
    .unwrap_or(0);
    if removed > 0 {
        ctx.notify(ev::STREAM, "xtrim", args[1]);
    }
    out.int(removed as i64);
    Ok(())
}

// ---- reads and simple writes ------------------------------------------------

fn xlen(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let n = read_value::<StreamValue>(&mut ctx.keys, args[1])?.map_or(0, |s| s.len());
    out.int(n as i64);
    Ok(())
}

fn xrange(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    range_generic(ctx, args, out, false)
}

fn xrevrange(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    range_generic(ctx, args, out, true)
}

fn range_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, rev: bool) -> CmdResult {
    let (start_arg, end_arg) = if rev { (args[3], args[2]) } else { (args[2], args[3]) };
    let start = interval_id(start_arg, 0, true)?;
    let end = interval_id(end_arg, u64::MAX, false)?;
    let mut count: i64 = -1;
    let mut j = 4;
    while j < args.len() {
        if eq_ic(args[j], "count") && j + 1 < args.len() {
            count = arg_count(args[j + 1])?.max(0);
            j += 2;
        } else {
            return Err(err::SYNTAX.into());
        }
    }
    let Some(s) = read_value::<StreamValue>(&mut ctx.keys, args[1])? else {
        out.array(0);
        return Ok(());
    };
    if count == 0 {
        out.null_array();
        return Ok(());
    }
    let limit = if count < 0 { usize::MAX } else { count as usize };
    if rev {
        reply_entries(out, s.range(start, end).rev().take(limit));
    } else {
        reply_entries(out, s.range(start, end).take(limit));
    }
    Ok(())
}

fn xdel(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let ids = args[2..].iter().map(|a| strict_id(a)).collect::<Result<Vec<_>, _>>()?;
    let deleted = write_value(&mut ctx.keys, args[1], |s: &mut StreamValue| {
        let deleted = ids.into_iter().filter(|id| s.delete(*id)).count();
        Ok(Changed::when(deleted > 0, deleted))
    })?
    .unwrap_or(0);
    if deleted > 0 {
        ctx.notify(ev::STREAM, "xdel", args[1]);
    }
    out.int(deleted as i64);
    Ok(())
}

fn xsetid(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let id = strict_id(args[2])?;
    let mut entries_added: i64 = -1;
    let mut max_deleted = StreamId::MIN;
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if eq_ic(args[i], "entriesadded") && more > 0 {
            entries_added = arg_count(args[i + 1])?;
            if entries_added < 0 {
                return Err("ERR entries_added must be positive".into());
            }
        } else if eq_ic(args[i], "maxdeletedid") && more > 0 {
            max_deleted = strict_id(args[i + 1])?;
            if id < max_deleted {
                return Err("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id".into());
            }
        } else {
            return Err(err::SYNTAX.into());
        }
        i += 2;
    }
    let set = write_value(&mut ctx.keys, args[1], |s: &mut StreamValue| {
        if let Some((top, _)) = s.last() {
            if id < top {
                return Err("ERR The ID specified in XSETID is smaller than the target stream top item".into());
            }
            if entries_added != -1 && s.len() as i64 > entries_added {
                return Err("ERR The entries_added specified in XSETID is smaller than the target stream length".into());
            }
        }
        s.last_id = id;
        if entries_added != -1 {
            s.entries_added = entries_added as u64;
        }
        if !max_deleted.is_zero() {
            s.max_deleted_id = max_deleted;
        }
        Ok(Changed::Yes(()))
    })?;
    if set.is_none() {
        return Err(err::NO_SUCH_KEY.into());
    }
    ctx.notify(ev::STREAM, "xsetid", args[1]);
    out.ok();
    Ok(())
}

// ---- XREAD / XREADGROUP -----------------------------------------------------

/// `>`: deliver entries the group has not delivered yet.
const NEW_ENTRIES: StreamId = StreamId::MAX;

struct ReadArgs<'a> {
    /// Block deadline (unix ms, 0 = forever), or None without BLOCK.
    block: Option<u64>,
    count: usize,
    group: Option<(&'a [u8], &'a [u8])>,
    noack: bool,
    keys: &'a [&'a [u8]],
    ids: &'a [&'a [u8]],
}

fn parse_read<'a>(args: &'a [&'a [u8]], group_cmd: bool, now: u64) -> Result<ReadArgs<'a>, CmdError> {
    let name = if group_cmd { "xreadgroup" } else { "xread" };
    let mut r = ReadArgs { block: None, count: 0, group: None, noack: false, keys: &[], ids: &[] };
    let mut streams_at = 0;
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let o = args[i];
        if eq_ic(o, "block") && more > 0 {
            i += 1;
            let ms = parse_i64(args[i]).ok_or(CmdError::from("ERR timeout is not an integer or out of range"))?;
            if ms < 0 {
                return Err(err::TIMEOUT_NEG.into());
            }
            r.block = Some(if ms == 0 { 0 } else { now.saturating_add(ms as u64) });
        } else if eq_ic(o, "count") && more > 0 {
            i += 1;
            r.count = arg_count(args[i])?.max(0) as usize;
        } else if eq_ic(o, "streams") && more > 0 {
            streams_at = i + 1;
            if (args.len() - streams_at) % 2 != 0 {
                let symbol = if group_cmd { '>' } else { '$' };
                return Err(format!(
                    "ERR Unbalanced {} list of streams: for each stream key an ID or '{symbol}' must be specified.",
                    name.to_ascii_uppercase()
                )
                .into());
            }
            break;
        } else if eq_ic(o, "group") && more >= 2 {
            if !group_cmd {
                return Err("ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.".into());
            }
            r.group = Some((args[i + 1], args[i + 2]));
            i += 2;
        } else if eq_ic(o, "noack") {
            if !group_cmd {
                return Err("ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.".into());
            }
            r.noack = true;
        } else {
            return Err(err::SYNTAX.into());
        }
        i += 1;
    }
    if streams_at == 0 {
        return Err(err::SYNTAX.into());
    }
    if group_cmd && r.group.is_none() {
        return Err("ERR Missing GROUP option for XREADGROUP".into());
    }
    let n = (args.len() - streams_at) / 2;
    r.keys = &args[streams_at..streams_at + n];
    r.ids = &args[streams_at + n..];
    Ok(r)
}

fn xread(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    read_generic(ctx, args, out, false)
}

fn xreadgroup(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    read_generic(ctx, args, out, true)
}

fn nogroup_read(key: &[u8], group: &[u8]) -> CmdError {
    format!("NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option", lossy(key), lossy(group))
        .into()
}

fn read_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, group_cmd: bool) -> CmdResult {
    let r = parse_read(args, group_cmd, ctx.keys.now_ms)?;
    if r.block.is_some() && ctx.in_script {
        return Err(format!("ERR {} command is not allowed with BLOCK option from scripts", lossy(args[0])).into());
    }
    // Resolve every ID first: errors come before anything is served.
    let mut ids: Vec<StreamId> = Vec::with_capacity(r.keys.len());
    for (&key, &arg) in r.keys.iter().zip(r.ids) {
        let s = read_value::<StreamValue>(&mut ctx.keys, key)?;
        if let Some((group, _)) = r.group
            && s.is_none_or(|s| !s.groups.contains_key(group))
        {
            return Err(nogroup_read(key, group));
        }
        let id = if arg == b"$" {
            if group_cmd {
                return Err("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history \
                            of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID \
                            would just return an empty result set."
                    .into());
            }
            s.map_or(StreamId::MIN, |s| s.last_id)
        } else if arg == b">" {
            if !group_cmd {
                return Err("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> \
                            <consumer> option."
                    .into());
            }
            NEW_ENTRIES
        } else {
            strict_id(arg)?
        };
        ids.push(id);
    }
    let mut body = Reply { buf: Vec::new(), resp3: out.resp3 };
    let mut served = 0;
    let now = ctx.keys.now_ms;
    for (i, &key) in r.keys.iter().enumerate() {
        let n = match r.group {
            Some((group, consumer)) => {
                // Counts as a write even when nothing is delivered.
                let served = write_value(&mut ctx.keys, key, |s: &mut StreamValue| {
                    let new_consumer = !has_consumer(s, group, consumer);
                    let n = serve_group(s, key, group, consumer, ids[i], r.count, r.noack, now, true, &mut body);
                    Ok(Changed::Yes((n, new_consumer)))
                })?;
                let Some((n, new_consumer)) = served else { continue };
                if new_consumer {
                    ctx.notify(ev::STREAM, "xgroup-createconsumer", key);
                }
                n
            }
            None => {
                let Some(s) = read_value::<StreamValue>(&mut ctx.keys, key)? else { continue };
                serve_plain(s, key, ids[i], r.count, &mut body)
            }
        };
        served += n as usize;
    }
    if served > 0 {
        open_streams_reply(out, served);
        out.raw(&body.buf);
        return Ok(());
    }
    match r.block {
        Some(deadline) if ctx.can_block() => {
            let keys: Vec<&[u8]> = r.keys.to_vec();
            let waiter = StreamWaiter {
                ids: r.keys.iter().zip(&ids).map(|(k, id)| (k.to_vec(), *id)).collect(),
                count: if r.count == 0 { XREAD_DEFAULT_COUNT } else { r.count },
                group: r.group.map(|(g, c)| (g.to_vec(), c.to_vec(), r.noack)),
            };
            ctx.block_serving(&keys, deadline, |o| o.null_array(), Box::new(waiter));
        }
        _ => out.null_array(),
    }
    Ok(())
}

/// XREAD from one stream: writes `key`'s part when it has entries after
/// `after`; true when it did.
fn serve_plain(s: &StreamValue, key: &[u8], after: StreamId, count: usize, out: &mut Reply) -> bool {
    let Some(start) = after.next() else { return false };
    if s.range(start, StreamId::MAX).next().is_none() {
        return false;
    }
    open_stream_part(out, key);
    let limit = if count == 0 { usize::MAX } else { count };
    reply_entries(out, s.range(start, StreamId::MAX).take(limit));
    true
}

/// XREADGROUP from one stream (its group known to exist): new entries for
/// `>` (when there are any), or the consumer's own history for an explicit
/// ID (always). Records deliveries in the PEL unless `noack`. True when it
/// wrote `key`'s part. `sync` is false when serving a blocked client (the
/// consumer's seen time is refreshed either way).
#[allow(clippy::too_many_arguments)]
fn serve_group(
    s: &mut StreamValue,
    key: &[u8],
    group: &[u8],
    consumer: &[u8],
    after: StreamId,
    count: usize,
    noack: bool,
    now: u64,
    sync: bool,
    out: &mut Reply,
) -> bool {
    let limit = if count == 0 { usize::MAX } else { count };
    let g = s.groups.get_mut(group).expect("checked by the caller");
    let (c, _) = g.consumer(consumer, now);
    c.seen_time = now;
    if after != NEW_ENTRIES {
        // History: this consumer's pending entries after `after`.
        debug_assert!(sync);
        let ids: Vec<StreamId> = match after.next() {
            Some(start) => c.pel.range(start..).take(limit).copied().collect(),
            None => Vec::new(),
        };
        open_stream_part(out, key);
        out.array(ids.len());
        for id in ids {
            match s.get(id) {
                Some(fields) => {
                    reply_entry(out, id, fields);
                    let p = s.groups.get_mut(group).and_then(|g| g.pel.get_mut(&id)).expect("pending");
                    p.delivery_time = now;
                    p.delivery_count += 1;
                }
                None => {
                    out.array(2);
                    bulk_id(out, id);
                    out.null_array();
                }
            }
        }
        return true;
    }
    let last = g.last_id;
    let Some(start) = last.next() else { return false };
    let ids: Vec<StreamId> = s.range(start, StreamId::MAX).take(limit).map(|(id, _)| id).collect();
    if ids.is_empty() {
        return false;
    }
    open_stream_part(out, key);
    out.array(ids.len());
    for id in ids {
        reply_entry(out, id, s.get(id).expect("listed above"));
        s.advance_group(group, id);
        if !noack {
            let g = s.groups.get_mut(group).expect("exists");
            g.assign(id, consumer, now, 1);
        }
    }
    true
}

/// A blocked XREAD/XREADGROUP.
struct StreamWaiter {
    /// Each key with the ID entries must follow (`NEW_ENTRIES` for `>`).
    ids: Vec<(Vec<u8>, StreamId)>,
    count: usize,
    /// Group, consumer, NOACK.
    group: Option<(Vec<u8>, Vec<u8>, bool)>,
}

impl StreamWaiter {
    fn after(&self, key: &[u8]) -> StreamId {
        self.ids.iter().find(|(k, _)| k == key).map_or(StreamId::MAX, |(_, id)| *id)
    }
}

impl BlockedOp for StreamWaiter {
    fn readiness(&self, keys: &mut KeyAccess<'_>, key: &[u8]) -> Readiness {
        let stream = match keys.peek(key).map(|e| e.value()) {
            Some(ValueRef::Stream(s)) => Some(s),
            _ => None,
        };
        let after = match (&self.group, stream) {
            // A group reader learns that its key or group is gone.
            (Some(_), None) => return Readiness::Ready,
            (Some((g, _, _)), Some(s)) => match s.groups.get(g) {
                None => return Readiness::Ready,
                Some(g) => g.last_id,
            },
            (None, None) => return Readiness::WrongType,
            (None, Some(_)) => self.after(key),
        };
        let s = stream.expect("matched above");
        match after.next() {
            Some(start) if s.range(start, StreamId::MAX).next().is_some() => Readiness::Ready,
            // Not for this client: others queued on the key may be served.
            _ => Readiness::WrongType,
        }
    }

    fn serve(&self, keys: &mut KeyAccess<'_>, key: &[u8], out: &mut Reply) {
        let now = keys.now_ms;
        let mut body = Reply { buf: Vec::new(), resp3: out.resp3 };
        match &self.group {
            None => {
                let Some(ValueRef::Stream(s)) = keys.get(key).map(|e| e.value()) else { return };
                serve_plain(s, key, self.after(key), self.count, &mut body);
            }
            Some((group, consumer, noack)) => {
                const GONE: &str = "UNBLOCKED the stream key no longer exists";
                // Whether the group's consumer is new, or the error to reply.
                let served = keys.update(key, |e| {
                    let Value::Stream(s) = e.value_mut() else { return Err(GONE) };
                    if !s.groups.contains_key(group.as_slice()) {
                        return Err("NOGROUP the consumer group this client was blocked on no longer exists");
                    }
                    let new_consumer = !has_consumer(s, group, consumer);
                    serve_group(s, key, group, consumer, NEW_ENTRIES, self.count, *noack, now, false, &mut body);
                    Ok(Changed::Yes(new_consumer))
                });
                let new_consumer = match served.unwrap_or(Err(GONE)) {
                    Ok(new_consumer) => new_consumer,
                    Err(msg) => {
                        out.error(msg);
                        return;
                    }
                };
                if new_consumer {
                    keys.notify(ev::STREAM, "xgroup-createconsumer", key);
                }
            }
        }
        open_streams_reply(out, 1);
        out.raw(&body.buf);
    }
}

// ---- consumer groups --------------------------------------------------------

const XGROUP_HELP: &[&str] = &[
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Prints this help.",
];

const XINFO_HELP: &[&str] = &[
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
    "HELP",
    "    Prints this help.",
];

fn subcommand_syntax(cmd: &str, sub: &[u8]) -> CmdError {
    format!("ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.", lossy(sub), cmd).into()
}

fn parse_entries_read(arg: &[u8]) -> Result<i64, CmdError> {
    let n = arg_count(arg)?;
    if n < 0 && n != ENTRIES_READ_INVALID {
        return Err("ERR value for ENTRIESREAD must be positive or -1".into());
    }
    Ok(n)
}

fn xgroup(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let sub = crate::commands::args::subcommand("xgroup", XGROUP_SUBS, args)?;
    if sub == "help" {
        help(out, XGROUP_HELP);
        return Ok(());
    }
    let (key, group) = (args[2], args[3]);
    let mut mkstream = false;
    let mut entries_read = ENTRIES_READ_INVALID;
    if sub == "create" {
        let mut i = 5;
        while i < args.len() {
            if eq_ic(args[i], "mkstream") {
                mkstream = true;
                i += 1;
            } else if eq_ic(args[i], "entriesread") && i + 1 < args.len() {
                entries_read = parse_entries_read(args[i + 1])?;
                i += 2;
            } else {
                return Err(subcommand_syntax("XGROUP", args[1]));
            }
        }
    }
    let exists = read_value::<StreamValue>(&mut ctx.keys, key)?.map(|s| s.groups.contains_key(group));
    let Some(group_exists) = exists.or(if mkstream { Some(false) } else { None }) else {
        return Err("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use \
                    the MKSTREAM option to create an empty stream automatically."
            .into());
    };
    if !group_exists && matches!(sub, "setid" | "createconsumer" | "delconsumer") {
        return Err(format!("NOGROUP No such consumer group '{}' for key name '{}'", lossy(group), lossy(key)).into());
    }
    let now = ctx.keys.now_ms;
    let mut event = None;
    match sub {
        "create" if args.len() <= 8 => {
            let id = if args[4] == b"$" { None } else { Some(strict_id(args[4])?) };
            write_value_or_create(&mut ctx.keys, key, new_stream, |s: &mut StreamValue| {
                if s.groups.contains_key(group) {
                    return Err("BUSYGROUP Consumer Group name already exists".into());
                }
                let id = id.unwrap_or(s.last_id);
                s.groups.insert(group.to_vec(), Group::new(id, entries_read));
                Ok(Changed::Yes(()))
            })?;
            event = Some("xgroup-create");
            out.ok();
        }
        "setid" if args.len() == 5 || args.len() == 7 => {
            write_value(&mut ctx.keys, key, |s: &mut StreamValue| {
                let id = if args[4] == b"$" { s.last_id } else { parse_id_generic(args[4], 0, false, false)?.id };
                let mut entries_read = ENTRIES_READ_INVALID;
                if args.len() == 7 {
                    if !eq_ic(args[5], "entriesread") {
                        return Err(err::SYNTAX.into());
                    }
                    entries_read = parse_entries_read(args[6])?;
                }
                let g = s.groups.get_mut(group).expect("checked above");
                g.last_id = id;
                g.entries_read = entries_read;
                Ok(Changed::Yes(()))
            })?
            .expect("checked above");
            event = Some("xgroup-setid");
            out.ok();
        }
        "destroy" if args.len() == 4 => {
            let removed = write_value(&mut ctx.keys, key, |s: &mut StreamValue| {
                let removed = s.groups.remove(group).is_some();
                Ok(Changed::when(removed, removed))
            })?
            .expect("checked above");
            if removed {
                event = Some("xgroup-destroy");
            }
            out.int(removed as i64);
        }
        "createconsumer" if args.len() == 5 => {
            let created = write_value(&mut ctx.keys, key, |s: &mut StreamValue| {
                let (_, created) = s.groups.get_mut(group).expect("checked above").consumer(args[4], now);
                Ok(Changed::when(created, created))
            })?
            .expect("checked above");
            if created {
                event = Some("xgroup-createconsumer");
            }
            out.int(created as i64);
        }
        "delconsumer" if args.len() == 5 => {
            // Some(its pending entries) when the consumer existed.
            let deleted = write_value(&mut ctx.keys, key, |s: &mut StreamValue| {
                let g = s.groups.get_mut(group).expect("checked above");
                Ok(match g.consumers.remove(args[4]) {
                    Some(c) => {
                        for id in &c.pel {
                            g.pel.remove(id);
                        }
                        Changed::Yes(Some(c.pel.len() as i64))
                    }
                    None => Changed::No(None),
                })
            })?
            .expect("checked above");
            if deleted.is_some() {
                event = Some("xgroup-delconsumer");
            }
            out.int(deleted.unwrap_or(0));
        }
        _ => return Err(subcommand_syntax("XGROUP", args[1])),
    }
    if let Some(event) = event {
        ctx.notify(ev::STREAM, event, key);
    }
    Ok(())
}

/// Whether `consumer` exists in `group` (XREADGROUP creates it otherwise).
fn has_consumer(s: &StreamValue, group: &[u8], consumer: &[u8]) -> bool {
    s.groups.get(group).is_none_or(|g| g.consumers.contains_key(consumer))
}

fn nogroup(key: &[u8], group: &[u8]) -> CmdError {
    format!("NOGROUP No such key '{}' or consumer group '{}'", lossy(key), lossy(group)).into()
}

fn xack(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let has_group = read_value::<StreamValue>(&mut ctx.keys, args[1])?.is_some_and(|s| s.groups.contains_key(args[2]));
    if !has_group {
        out.int(0);
        return Ok(());
    }
    let ids = args[3..].iter().map(|a| strict_id(a)).collect::<Result<Vec<_>, _>>()?;
    let acked = write_value(&mut ctx.keys, args[1], |s: &mut StreamValue| {
        let g = s.groups.get_mut(args[2]).expect("checked above");
        let acked = ids.into_iter().filter(|id| g.ack(*id)).count();
        Ok(Changed::when(acked > 0, acked))
    })?
    .expect("checked above");
    out.int(acked as i64);
    Ok(())
}

fn xpending(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let summary = args.len() == 3;
    if !summary && !(6..=9).contains(&args.len()) {
        return Err(err::SYNTAX.into());
    }
    let mut min_idle = 0i64;
    let (mut start, mut end, mut count, mut consumer) = (StreamId::MIN, StreamId::MAX, 0i64, None);
    if !summary {
        let mut at = 3;
        if eq_ic(args[3], "idle") {
            min_idle = arg_count(args[4])?;
            if args.len() < 8 {
                return Err(err::SYNTAX.into());
            }
            at += 2;
        }
        count = arg_count(args[at + 2])?.max(0);
        start = interval_id(args[at], 0, true)?;
        end = interval_id(args[at + 1], u64::MAX, false)?;
        if at + 3 < args.len() {
            consumer = Some(args[at + 3]);
        }
    }
    let now = ctx.keys.now_ms;
    let s = read_value::<StreamValue>(&mut ctx.keys, args[1])?;
    let Some(g) = s.and_then(|s| s.groups.get(args[2])) else {
        return Err(nogroup(args[1], args[2]));
    };
    if summary {
        out.array(4);
        out.int(g.pel.len() as i64);
        if g.pel.is_empty() {
            out.null();
            out.null();
            out.null_array();
            return Ok(());
        }
        bulk_id(out, *g.pel.keys().next().expect("non-empty"));
        bulk_id(out, *g.pel.keys().next_back().expect("non-empty"));
        let owners: Vec<_> = g.consumers.iter().filter(|(_, c)| !c.pel.is_empty()).collect();
        out.array(owners.len());
        for (name, c) in owners {
            out.array(2);
            out.bulk(name);
            out.bulk_i64(c.pel.len() as i64);
        }
        return Ok(());
    }
    let ids: Vec<StreamId> = match consumer {
        Some(name) => match g.consumers.get(name) {
            Some(c) if start <= end => c.pel.range(start..=end).copied().collect(),
            Some(_) => Vec::new(),
            None => {
                out.array(0);
                return Ok(());
            }
        },
        None if start <= end => g.pel.range(start..=end).map(|(id, _)| *id).collect(),
        None => Vec::new(),
    };
    let mut rows = Vec::new();
    for id in ids {
        if rows.len() as i64 >= count {
            break;
        }
        let p = &g.pel[&id];
        let idle = now as i64 - p.delivery_time as i64;
        if min_idle != 0 && idle < min_idle {
            continue;
        }
        rows.push((id, p.consumer.clone(), idle.max(0), p.delivery_count));
    }
    out.array(rows.len());
    for (id, c, idle, n) in rows {
        out.array(4);
        bulk_id(out, id);
        out.bulk(&c);
        out.int(idle);
        out.int(n as i64);
    }
    Ok(())
}

fn claim_option_int(arg: &[u8], msg: &'static str) -> Result<i64, CmdError> {
    parse_i64(arg).ok_or(CmdError::from(msg))
}

fn xclaim(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let (key, group, consumer) = (args[1], args[2], args[3]);
    let has_group = read_value::<StreamValue>(&mut ctx.keys, key)?.is_some_and(|s| s.groups.contains_key(group));
    if !has_group {
        return Err(nogroup(key, group));
    }
    let min_idle = claim_option_int(args[4], "ERR Invalid min-idle-time argument for XCLAIM")?.max(0);
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match strict_id(args[j]) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = ctx.keys.now_ms as i64;
    let (mut force, mut justid) = (false, false);
    let mut retry_count: i64 = -1;
    let mut delivery_time: i64 = -1;
    let mut last_id = StreamId::MIN;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = args[j];
        if eq_ic(opt, "force") {
            force = true;
        } else if eq_ic(opt, "justid") {
            justid = true;
        } else if eq_ic(opt, "idle") && more > 0 {
            j += 1;
            delivery_time = now - claim_option_int(args[j], "ERR Invalid IDLE option argument for XCLAIM")?;
        } else if eq_ic(opt, "time") && more > 0 {
            j += 1;
            delivery_time = claim_option_int(args[j], "ERR Invalid TIME option argument for XCLAIM")?;
        } else if eq_ic(opt, "retrycount") && more > 0 {
            j += 1;
            retry_count = claim_option_int(args[j], "ERR Invalid RETRYCOUNT option argument for XCLAIM")?;
        } else if eq_ic(opt, "lastid") && more > 0 {
            j += 1;
            last_id = strict_id(args[j])?;
        } else {
            return Err(format!("ERR Unrecognized XCLAIM option '{}'", lossy(opt)).into());
        }
        j += 1;
    }
    if delivery_time < 0 || delivery_time > now {
        delivery_time = now;
    }
    let (ks, db) = (ctx.keys.ks, ctx.keys.db);
    // Counts as a write even when nothing is claimed.
    write_value(&mut ctx.keys, key, |s: &mut StreamValue| {
        {
            let g = s.groups.get_mut(group).expect("checked above");
            if last_id > g.last_id {
                g.last_id = last_id;
            }
        }
        let mut claimed: Vec<StreamId> = Vec::new();
        let mut consumer_seen = false;
        for id in ids {
            let exists = s.get(id).is_some();
            let g = s.groups.get_mut(group).expect("checked above");
            if !exists {
                g.ack(id);
                continue;
            }
            let (count, old_time, fresh) = match g.pel.get(&id) {
                Some(p) => (p.delivery_count, p.delivery_time, false),
                None if force => (1, now as u64, true),
                None => continue,
            };
            if !fresh && min_idle != 0 && now - (old_time as i64) < min_idle {
                continue;
            }
            if !consumer_seen {
                let (c, created) = g.consumer(consumer, now as u64);
                c.seen_time = now as u64;
                if created {
                    ks.key_event(ev::STREAM, "xgroup-createconsumer", db, key);
                }
                consumer_seen = true;
            }
            let count = if retry_count >= 0 {
                retry_count as u64
            } else if !justid {
                count + 1
            } else {
                count
            };
            g.assign(id, consumer, delivery_time as u64, count);
            claimed.push(id);
        }
        out.array(claimed.len());
        for id in claimed {
            if justid {
                bulk_id(out, id);
            } else {
                reply_entry(out, id, s.get(id).expect("exists"));
            }
        }
        Ok(Changed::Yes(()))
    })?
    .expect("checked above");
    Ok(())
}

fn xautoclaim(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let (key, group, consumer) = (args[1], args[2], args[3]);
    let min_idle = claim_option_int(args[4], "ERR Invalid min-idle-time argument for XAUTOCLAIM")?.max(0);
    let start = interval_id(args[5], 0, true)?;
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if eq_ic(args[j], "count") && more > 0 {
            const MAX_COUNT: i64 = i64::MAX / 16;
            count = parse_i64(args[j + 1])
                .filter(|n| (1..=MAX_COUNT).contains(n))
                .ok_or(CmdError::from("ERR COUNT must be > 0"))?;
            j += 1;
        } else if eq_ic(args[j], "justid") {
            justid = true;
        } else {
            return Err(err::SYNTAX.into());
        }
        j += 1;
    }
    let has_group = read_value::<StreamValue>(&mut ctx.keys, key)?.is_some_and(|s| s.groups.contains_key(group));
    if !has_group {
        return Err(nogroup(key, group));
    }
    let now = ctx.keys.now_ms;
    let (ks, db) = (ctx.keys.ks, ctx.keys.db);
    write_value(&mut ctx.keys, key, |s: &mut StreamValue| {
        let mut attempts = count.saturating_mul(10);
        let mut left = count;
        let mut claimed = Vec::new();
        let mut deleted = Vec::new();
        let mut cursor = Some(start);
        let mut consumer_seen = false;
        while attempts > 0 && left > 0 {
            let Some(from) = cursor else { break };
            let g = s.groups.get(group).expect("checked above");
            let Some((&id, p)) = g.pel.range(from..).next() else {
                cursor = None;
                break;
            };
            attempts -= 1;
            cursor = id.next();
            let (delivery_time, delivery_count) = (p.delivery_time, p.delivery_count);
            let exists = s.get(id).is_some();
            let g = s.groups.get_mut(group).expect("checked above");
            if !exists {
                g.ack(id);
                deleted.push(id);
                left -= 1;
                continue;
            }
            if min_idle != 0 && (now as i64 - delivery_time as i64) < min_idle {
                continue;
            }
            if !consumer_seen {
                let (c, created) = g.consumer(consumer, now);
                c.seen_time = now;
                if created {
                    ks.key_event(ev::STREAM, "xgroup-createconsumer", db, key);
                }
                consumer_seen = true;
            }
            g.assign(id, consumer, now, if justid { delivery_count } else { delivery_count + 1 });
            claimed.push(id);
            left -= 1;
        }
        // The next call starts at the next pending entry (0-0 when none).
        let next = cursor
            .and_then(|from| s.groups[group].pel.range(from..).next().map(|(id, _)| *id))
            .unwrap_or(StreamId::MIN);
        let changed = !claimed.is_empty() || !deleted.is_empty();
        out.array(3);
        bulk_id(out, next);
        out.array(claimed.len());
        for id in claimed {
            if justid {
                bulk_id(out, id);
            } else {
                reply_entry(out, id, s.get(id).expect("exists"));
            }
        }
        out.array(deleted.len());
        for id in deleted {
            bulk_id(out, id);
        }
        Ok(Changed::when(changed, ()))
    })?
    .expect("checked above");
    Ok(())
}

// ---- XINFO ------------------------------------------------------------------

fn xinfo(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let sub = crate::commands::args::subcommand("xinfo", XINFO_SUBS, args)?;
    if sub == "help" {
        help(out, XINFO_HELP);
        return Ok(());
    }
    let key = args[2];
    let now = ctx.keys.now_ms;
    let Some(s) = read_value::<StreamValue>(&mut ctx.keys, key)? else {
        return Err(err::NO_SUCH_KEY.into());
    };
    match sub {
        "consumers" if args.len() == 4 => {
            let Some(g) = s.groups.get(args[3]) else {
                return Err(format!(
                    "NOGROUP No such consumer group '{}' for key name '{}'",
                    lossy(args[3]),
                    lossy(key)
                )
                .into());
            };
            out.array(g.consumers.len());
            for (name, c) in &g.consumers {
                out.map(3);
                out.bulk(b"name");
                out.bulk(name);
                out.bulk(b"pending");
                out.int(c.pel.len() as i64);
                out.bulk(b"idle");
                out.int((now as i64 - c.seen_time as i64).max(0));
            }
        }
        "groups" if args.len() == 3 => {
            out.array(s.groups.len());
            for (name, g) in &s.groups {
                out.map(6);
                out.bulk(b"name");
                out.bulk(name);
                out.bulk(b"consumers");
                out.int(g.consumers.len() as i64);
                out.bulk(b"pending");
                out.int(g.pel.len() as i64);
                out.bulk(b"last-delivered-id");
                bulk_id(out, g.last_id);
                reply_read_counters(out, s, g);
            }
        }
        "stream" => xinfo_stream(s, args, out)?,
        _ => return Err(subcommand_syntax("XINFO", args[1])),
    }
    Ok(())
}

/// `entries-read` and `lag` of a group (null when unknown).
fn reply_read_counters(out: &mut Reply, s: &StreamValue, g: &Group) {
    out.bulk(b"entries-read");
    if g.entries_read != ENTRIES_READ_INVALID {
        out.int(g.entries_read);
    } else {
        out.null();
    }
    out.bulk(b"lag");
    match s.lag(g) {
        Some(lag) => out.int(lag),
        None => out.null(),
    }
}

fn xinfo_stream(s: &StreamValue, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let opts = &args[3..];
    let mut count: i64 = 10;
    let full = !opts.is_empty();
    if full {
        if !eq_ic(opts[0], "full") {
            return Err(subcommand_syntax("XINFO", args[1]));
        }
        if opts.len() > 1 {
            if opts.len() != 3 || !eq_ic(opts[1], "count") {
                return Err(subcommand_syntax("XINFO", args[1]));
            }
            count = arg_count(opts[2])?;
            if count < 0 {
                count = 10;
            }
        }
    }
    out.map(if full { 9 } else { 10 });
    out.bulk(b"length");
    out.int(s.len() as i64);
    out.bulk(b"radix-tree-keys");
    out.int(s.node_count() as i64);
    out.bulk(b"radix-tree-nodes");
    out.int(s.node_count() as i64 + 1);
    out.bulk(b"last-generated-id");
    bulk_id(out, s.last_id);
    out.bulk(b"max-deleted-entry-id");
    bulk_id(out, s.max_deleted_id);
    out.bulk(b"entries-added");
    out.int(s.entries_added as i64);
    out.bulk(b"recorded-first-entry-id");
    bulk_id(out, s.first_id);
    if !full {
        out.bulk(b"groups");
        out.int(s.groups.len() as i64);
        out.bulk(b"first-entry");
        match s.first() {
            Some((id, f)) => reply_entry(out, id, f),
            None => out.null(),
        }
        out.bulk(b"last-entry");
        match s.last() {
            Some((id, f)) => reply_entry(out, id, f),
            None => out.null(),
        }
        return Ok(());
    }
    let limit = if count == 0 { usize::MAX } else { count as usize };
    out.bulk(b"entries");
    reply_entries(out, s.iter().take(limit));
    out.bulk(b"groups");
    out.array(s.groups.len());
    for (name, g) in &s.groups {
        out.map(7);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"last-delivered-id");
        bulk_id(out, g.last_id);
        reply_read_counters(out, s, g);
        out.bulk(b"pel-count");
        out.int(g.pel.len() as i64);
        out.bulk(b"pending");
        let pel: Vec<_> = g.pel.iter().take(limit).collect();
        out.array(pel.len());
        for (id, p) in pel {
            out.array(4);
            bulk_id(out, *id);
            out.bulk(&p.consumer);
            out.int(p.delivery_time as i64);
            out.int(p.delivery_count as i64);
        }
        out.bulk(b"consumers");
        out.array(g.consumers.len());
        for (cname, c) in &g.consumers {
            out.map(4);
            out.bulk(b"name");
            out.bulk(cname);
            out.bulk(b"seen-time");
            out.int(c.seen_time as i64);
            out.bulk(b"pel-count");
            out.int(c.pel.len() as i64);
            out.bulk(b"pending");
            let ids: Vec<_> = c.pel.iter().take(limit).collect();
            out.array(ids.len());
            for id in ids {
                let p = &g.pel[id];
                out.array(3);
                bulk_id(out, *id);
                out.int(p.delivery_time as i64);
                out.int(p.delivery_count as i64);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_like_redis() {
        assert_eq!(strict_id(b"5").unwrap(), StreamId::new(5, 0));
        assert_eq!(strict_id(b"5-3").unwrap(), StreamId::new(5, 3));
        assert!(strict_id(b"-").is_err());
        assert!(strict_id(b"5-*").is_err());
        assert!(strict_id(b"-1").is_err());
        assert!(strict_id(b"a-1").is_err());
        assert_eq!(strict_id(b"007").unwrap(), StreamId::new(7, 0), "strtoull takes leading zeros");
        assert_eq!(interval_id(b"5", u64::MAX, false).unwrap(), StreamId::new(5, u64::MAX));
        assert_eq!(interval_id(b"(5-1", 0, true).unwrap(), StreamId::new(5, 2));
        assert!(interval_id(b"(-", 0, true).is_err());
        assert!(interval_id(b"(0-0", 0, false).is_err());
        let p = parse_id_generic(b"5-*", 0, true, true).unwrap();
        assert!(!p.seq_given);
    }

    #[test]
    fn xread_keys_follow_streams() {
        let a: Vec<&[u8]> = vec![b"xread", b"COUNT", b"2", b"STREAMS", b"a", b"b", b"0", b"0"];
        assert_eq!(xread_keys(&a).as_slice(), &[4, 5]);
        let a: Vec<&[u8]> = vec![b"xreadgroup", b"GROUP", b"streams", b"c", b"STREAMS", b"a", b">"];
        assert_eq!(xread_keys(&a).as_slice(), &[5]);
        let a: Vec<&[u8]> = vec![b"xread", b"STREAMS", b"a"];
        assert!(xread_keys(&a).is_empty());
    }
}
