//! Commands on keys whatever their type: DEL, UNLINK, EXISTS, TOUCH, TYPE,
//! expiry (EXPIRE & co., TTL & co., PERSIST), RENAME, RENAMENX, COPY, MOVE,
//! KEYS, SCAN, RANDOMKEY, OBJECT, and WAIT.
//!
//! SCAN walks the keyspace partition by partition and, inside a partition,
//! slot by slot of the database's slab table. Slots never move while a key
//! lives, so a (partition, slot) cursor gives a stronger guarantee than
//! Redis's reverse-binary cursor: a key present for the whole iteration is
//! returned exactly once, however the keyspace grows or shrinks meanwhile.

use crate::base::{eq_ic, glob_match};
use crate::commands::{CmdError, CmdResult, CommandDef, Ctx, Keys, arg_i64, err, flags};
use crate::config::keyspace_events as ev;
use crate::protocol::Reply;
use crate::store::{Changed, Entry, KeyAccess, NUM_DBS, ValueRef, fast_rand};

const R: u32 = flags::READONLY;
const W: u32 = flags::WRITE;
const F: u32 = flags::FAST;

const ONE: Keys = Keys::Range(1, 1, 1);
const ALL_ARGS: Keys = Keys::Range(1, -1, 1);
const TWO: Keys = Keys::Range(1, 2, 1);

pub const COMMANDS: &[CommandDef] = &[
    CommandDef::new("del", -2, W, ALL_ARGS, del).acl("@keyspace @write @slow"),
    CommandDef::new("unlink", -2, W | F, ALL_ARGS, del).acl("@keyspace @write @fast"),
    CommandDef::new("exists", -2, R | F, ALL_ARGS, exists).acl("@keyspace @read @fast"),
    CommandDef::new("touch", -2, R | F, ALL_ARGS, touch).acl("@keyspace @read @fast"),
    CommandDef::new("type", 2, R | F, ONE, type_cmd).acl("@keyspace @read @fast"),
    CommandDef::new("expire", -3, W | F, ONE, expire).acl("@keyspace @write @fast"),
    CommandDef::new("pexpire", -3, W | F, ONE, pexpire).acl("@keyspace @write @fast"),
    CommandDef::new("expireat", -3, W | F, ONE, expireat).acl("@keyspace @write @fast"),
    CommandDef::new("pexpireat", -3, W | F, ONE, pexpireat).acl("@keyspace @write @fast"),
    CommandDef::new("ttl", 2, R | F, ONE, ttl).acl("@keyspace @read @fast"),
    CommandDef::new("pttl", 2, R | F, ONE, pttl).acl("@keyspace @read @fast"),
    CommandDef::new("expiretime", 2, R | F, ONE, expiretime).acl("@keyspace @read @fast"),
    CommandDef::new("pexpiretime", 2, R | F, ONE, pexpiretime).acl("@keyspace @read @fast"),
    CommandDef::new("persist", 2, W | F, ONE, persist).acl("@keyspace @write @fast"),
    CommandDef::new("rename", 3, W, TWO, rename).acl("@keyspace @write @slow"),
    CommandDef::new("renamenx", 3, W | F, TWO, renamenx).acl("@keyspace @write @fast"),
    CommandDef::new("copy", -3, W | flags::DENYOOM, TWO, copy).acl("@keyspace @write @slow"),
    CommandDef::new("move", 3, W | F, ONE, move_cmd).acl("@keyspace @write @fast"),
    CommandDef::new("keys", 2, R, Keys::All, keys).acl("@keyspace @read @slow @dangerous"),
    CommandDef::new("scan", -2, R, Keys::All, scan).acl("@keyspace @read @slow"),
    CommandDef::new("randomkey", 1, R, Keys::All, randomkey).acl("@keyspace @read @slow"),
    CommandDef::new("object", -2, 0, Keys::Range(2, 2, 1), object)
        .acl("@slow")
        .subs(&["encoding", "freq", "idletime", "refcount", "help"]),
    CommandDef::new("wait", 3, flags::NOSCRIPT, Keys::None, wait).acl("@slow @connection"),
];

const SAME_OBJECT: &str = "ERR source and destination objects are the same";
const DB_OUT_OF_RANGE: &str = "ERR DB index is out of range";
const INT_OUT_OF_RANGE: &str = "ERR value is out of range, value must between -2147483648 and 2147483647";
const INVALID_CURSOR: &str = "ERR invalid cursor";

// ---------------------------------------------------------------- DEL & co.

/// DEL and UNLINK (values are freed inline either way).
fn del(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let mut removed = 0;
    for key in &args[1..] {
        if ctx.keys.delete(key) {
            ctx.notify(ev::GENERIC, "del", key);
            removed += 1;
        }
    }
    out.int(removed);
    Ok(())
}

/// EXISTS counts a key once per mention, so duplicates count again.
fn exists(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let found = args[1..].iter().filter(|k| ctx.keys.get_notouch(k).is_some()).count();
    out.int(found as i64);
    Ok(())
}

fn touch(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let found = args[1..].iter().filter(|k| ctx.keys.get(k).is_some()).count();
    out.int(found as i64);
    Ok(())
}

fn type_cmd(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let name = ctx.keys.get_notouch(args[1]).map_or("none", |e| e.value().type_name());
    out.simple(name);
    Ok(())
}

// ------------------------------------------------------------------ expiry

/// How an EXPIRE-family command reads its time argument.
#[derive(Clone, Copy)]
struct ExpireForm {
    name: &'static str,
    /// Seconds (EXPIRE, EXPIREAT) or milliseconds.
    seconds: bool,
    /// Relative to now (EXPIRE, PEXPIRE) or a unix timestamp.
    relative: bool,
}

fn expire(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    expire_generic(ctx, args, out, ExpireForm { name: "expire", seconds: true, relative: true })
}

fn pexpire(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    expire_generic(ctx, args, out, ExpireForm { name: "pexpire", seconds: false, relative: true })
}

fn expireat(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    expire_generic(ctx, args, out, ExpireForm { name: "expireat", seconds: true, relative: false })
}

fn pexpireat(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    expire_generic(ctx, args, out, ExpireForm { name: "pexpireat", seconds: false, relative: false })
}

/// The NX / XX / GT / LT conditions of the EXPIRE family.
#[derive(Default, Debug, PartialEq, Eq)]
struct ExpireCond {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

impl ExpireCond {
    fn parse(opts: &[&[u8]]) -> Result<ExpireCond, CmdError> {
        let mut c = ExpireCond::default();
        for opt in opts {
            if eq_ic(opt, "nx") {
                c.nx = true;
            } else if eq_ic(opt, "xx") {
                c.xx = true;
            } else if eq_ic(opt, "gt") {
                c.gt = true;
            } else if eq_ic(opt, "lt") {
                c.lt = true;
            } else {
                return Err(format!("ERR Unsupported option {}", String::from_utf8_lossy(opt)).into());
            }
        }
        if c.nx && (c.xx || c.gt || c.lt) {
            return Err("ERR NX and XX, GT or LT options at the same time are not compatible".into());
        }
        if c.gt && c.lt {
            return Err("ERR GT and LT options at the same time are not compatible".into());
        }
        Ok(c)
    }

    /// Whether the new deadline `when` (unix ms) may replace `current`
    /// (unix ms, None = no TTL, which counts as infinite for GT and LT).
    fn allows(&self, current: Option<i64>, when: i64) -> bool {
        if self.nx && current.is_some() {
            return false;
        }
        if self.xx && current.is_none() {
            return false;
        }
        if self.gt && current.is_none_or(|cur| when <= cur) {
            return false;
        }
        if self.lt && current.is_some_and(|cur| when >= cur) {
            return false;
        }
        true
    }
}

/// The absolute deadline (unix ms) an EXPIRE-family argument asks for; may
/// be in the past or negative. Overflow is Redis's "invalid expire time".
fn expire_deadline(arg: &[u8], form: ExpireForm, now_ms: u64) -> Result<i64, CmdError> {
    let invalid = || CmdError::from(err::invalid_expire(form.name));
    let mut when = arg_i64(arg)?;
    if form.seconds {
        when = when.checked_mul(1000).ok_or_else(invalid)?;
    }
    if form.relative {
        when = when.checked_add(now_ms as i64).ok_or_else(invalid)?;
    }
    Ok(when)
}

fn expire_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, form: ExpireForm) -> CmdResult {
    let cond = ExpireCond::parse(&args[3..])?;
    let now = ctx.keys.now_ms;
    let when = expire_deadline(args[2], form, now)?;
    let key = args[1];
    let past = when <= now as i64;
    // Some(true) when the condition allows the new deadline.
    let allowed = ctx.keys.update(key, |e| {
        let current = (e.expire_at() != 0).then_some(e.expire_at() as i64);
        if !cond.allows(current, when) {
            return Changed::No(false);
        }
        if !past {
            e.set_expire(when as u64);
        }
        // A deadline already past still counts as a write before the delete.
        Changed::Yes(true)
    });
    if allowed != Some(true) {
        out.int(0);
        return Ok(());
    }
    if past {
        // A deadline already past deletes the key, as Redis does.
        ctx.keys.delete(key);
        ctx.notify(ev::GENERIC, "del", key);
    } else {
        ctx.notify(ev::GENERIC, "expire", key);
    }
    out.int(1);
    Ok(())
}

/// What a TTL-family command reports.
#[derive(Clone, Copy)]
enum TtlForm {
    /// Remaining time (TTL, PTTL).
    Remaining { ms: bool },
    /// Absolute unix time (EXPIRETIME, PEXPIRETIME).
    Absolute { ms: bool },
}

fn ttl(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    ttl_generic(ctx, args, out, TtlForm::Remaining { ms: false })
}

fn pttl(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    ttl_generic(ctx, args, out, TtlForm::Remaining { ms: true })
}

fn expiretime(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    ttl_generic(ctx, args, out, TtlForm::Absolute { ms: false })
}

fn pexpiretime(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    ttl_generic(ctx, args, out, TtlForm::Absolute { ms: true })
}

fn ttl_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, form: TtlForm) -> CmdResult {
    let now = ctx.keys.now_ms;
    let Some(e) = ctx.keys.get_notouch(args[1]) else {
        out.int(-2);
        return Ok(());
    };
    if e.expire_at() == 0 {
        out.int(-1);
        return Ok(());
    }
    let at = e.expire_at() as i64;
    let reply = match form {
        TtlForm::Absolute { ms: true } => at,
        TtlForm::Absolute { ms: false } => round_to_secs(at),
        TtlForm::Remaining { ms } => {
            // Lookup removed the key if its deadline passed, so this is > 0.
            let left = (at - now as i64).max(0);
            if ms { left } else { round_to_secs(left) }
        }
    };
    out.int(reply);
    Ok(())
}

/// Milliseconds to the nearest second, as Redis reports TTL and EXPIRETIME
/// (without overflowing near `i64::MAX`).
fn round_to_secs(ms: i64) -> i64 {
    ((ms as i128 + 500) / 1000) as i64
}

fn persist(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let persisted = ctx.keys.update(args[1], |e| {
        if e.expire_at() == 0 {
            return Changed::No(false);
        }
        e.set_expire(0);
        Changed::Yes(true)
    });
    if persisted == Some(true) {
        ctx.notify(ev::GENERIC, "persist", args[1]);
        out.int(1);
    } else {
        out.int(0);
    }
    Ok(())
}

// ------------------------------------------------------ RENAME, COPY, MOVE

/// Write lookup that only refreshes access metadata (Redis's
/// `lookupKeyWrite`): true when the key exists. Does not count as a
/// modification for WATCH.
fn touch_for_write(keys: &mut KeyAccess<'_>, key: &[u8]) -> bool {
    keys.update(key, |_| Changed::No(())).is_some()
}

/// Stores a taken entry under `key` in the current database (overwriting),
/// keeping its TTL and access history: a renamed or moved key stays as hot
/// or as idle for eviction and OBJECT as it was.
fn put_moved(keys: &mut KeyAccess<'_>, key: &[u8], entry: Entry) {
    let meta = entry.meta;
    let expire_at = entry.expire_at();
    keys.put_entry(key, entry.into_value(), expire_at);
    // Policy state only: the insert above was the write.
    keys.update(key, |e| {
        e.meta.last_access = meta.last_access;
        e.meta.freq = meta.freq;
        e.meta.flags = meta.flags;
        Changed::No(())
    });
}

/// Runs `f` with `db` selected, restoring the client's database after.
fn in_db<T>(keys: &mut KeyAccess<'_>, db: usize, f: impl FnOnce(&mut KeyAccess<'_>) -> T) -> T {
    let saved = keys.db;
    keys.db = db;
    let r = f(keys);
    keys.db = saved;
    r
}

fn rename(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    rename_generic(ctx, args, out, false)
}

fn renamenx(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    rename_generic(ctx, args, out, true)
}

fn rename_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, nx: bool) -> CmdResult {
    let (src, dst) = (args[1], args[2]);
    if !touch_for_write(&mut ctx.keys, src) {
        return Err(err::NO_SUCH_KEY.into());
    }
    if src == dst {
        // Nothing to do, but a missing key was still an error above.
        if nx {
            out.int(0)
        } else {
            out.ok()
        }
        return Ok(());
    }
    if nx && touch_for_write(&mut ctx.keys, dst) {
        out.int(0);
        return Ok(());
    }
    let Some(entry) = ctx.keys.take(src) else {
        return Err(err::NO_SUCH_KEY.into());
    };
    put_moved(&mut ctx.keys, dst, entry);
    ctx.notify(ev::GENERIC, "rename_from", src);
    ctx.notify(ev::GENERIC, "rename_to", dst);
    if nx {
        out.int(1)
    } else {
        out.ok()
    }
    Ok(())
}

/// A database index argument, with Redis's errors (`getIntFromObject`, then
/// the range check of SELECT).
fn parse_db(arg: &[u8]) -> Result<usize, CmdError> {
    let v = arg_i64(arg)?;
    if v < i32::MIN as i64 || v > i32::MAX as i64 {
        return Err(INT_OUT_OF_RANGE.into());
    }
    if v < 0 || v >= NUM_DBS as i64 {
        return Err(DB_OUT_OF_RANGE.into());
    }
    Ok(v as usize)
}

/// COPY source destination [DB n] [REPLACE]. Another database's copy of a
/// key lives in the same partition (partitions go by key hash only), so the
/// locks dispatch took cover it.
fn copy(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let (src, dst) = (args[1], args[2]);
    let src_db = ctx.keys.db;
    let mut dst_db = src_db;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        if eq_ic(args[i], "replace") {
            replace = true;
            i += 1;
        } else if eq_ic(args[i], "db") && i + 1 < args.len() {
            dst_db = parse_db(args[i + 1])?;
            i += 2;
        } else {
            return Err(err::SYNTAX.into());
        }
    }
    if src_db == dst_db && src == dst {
        return Err(SAME_OBJECT.into());
    }
    let Some(expire_at) = ctx.keys.get(src).map(|e| e.expire_at()) else {
        out.int(0);
        return Ok(());
    };
    if in_db(&mut ctx.keys, dst_db, |keys| touch_for_write(keys, dst)) && !replace {
        out.int(0);
        return Ok(());
    }
    // Duplicated only now that the copy will happen: values can be large.
    let Some(value) = ctx.keys.peek(src).map(|e| e.value().to_owned()) else {
        out.int(0);
        return Ok(());
    };
    in_db(&mut ctx.keys, dst_db, |keys| keys.put_entry(dst, value, expire_at));
    ctx.keys.ks.key_event(ev::GENERIC, "copy_to", dst_db, dst);
    out.int(1);
    Ok(())
}

fn move_cmd(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let key = args[1];
    let dst_db = parse_db(args[2])?;
    if dst_db == ctx.keys.db {
        return Err(SAME_OBJECT.into());
    }
    if !touch_for_write(&mut ctx.keys, key) || in_db(&mut ctx.keys, dst_db, |keys| touch_for_write(keys, key)) {
        out.int(0);
        return Ok(());
    }
    let Some(entry) = ctx.keys.take(key) else {
        out.int(0);
        return Ok(());
    };
    in_db(&mut ctx.keys, dst_db, |keys| put_moved(keys, key, entry));
    ctx.notify(ev::GENERIC, "move_from", key);
    ctx.keys.ks.key_event(ev::GENERIC, "move_to", dst_db, key);
    out.int(1);
    Ok(())
}

// ------------------------------------------------- KEYS, SCAN, RANDOMKEY

/// Keys copied out of one partition while it is locked, matched against the
/// pattern once it is released: matching costs up to pattern × key length per
/// key, and the partition's other clients must not wait for it.
#[derive(Default)]
struct KeyBatch {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl KeyBatch {
    fn push(&mut self, key: &[u8]) {
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len());
    }

    /// Calls `emit` for each key matching `pattern` (all when None), in
    /// order, and empties the batch.
    fn drain_matching(&mut self, pattern: Option<&[u8]>, mut emit: impl FnMut(&[u8])) {
        let mut start = 0;
        for &end in &self.ends {
            let key = &self.bytes[start..end];
            if pattern.is_none_or(|p| glob_match(p, key, false)) {
                emit(key);
            }
            start = end;
        }
        self.bytes.clear();
        self.ends.clear();
    }
}

fn keys(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    // Redis lists every key for "*" without matching (even the empty key).
    let pattern = Some(args[1]).filter(|p| *p != b"*");
    let (ks, stats, db, now) = (ctx.keys.ks, ctx.keys.stats, ctx.keys.db, ctx.keys.now_ms);
    // Bulk strings encode the same in RESP2 and RESP3.
    let mut found = Reply { buf: Vec::new(), resp3: out.resp3 };
    let mut n = 0;
    let mut batch = KeyBatch::default();
    // Keys on disk only, key and all, are read from the disk tier in one
    // pass first; none is forgotten during the walk, and one brought back
    // to RAM meanwhile is listed once.
    ks.without_forgetting(|| {
        let mut on_disk = std::collections::HashSet::new();
        for (loc, key) in ks.forgotten_key_candidates(now) {
            let idx = ks.partition_of_key(&key);
            if ctx.keys.with_partition(idx, |p| p.is_forgotten_at(db, &key, loc)) {
                on_disk.insert(key);
            }
        }
        for part in 0..ks.num_partitions() as u32 {
            ctx.keys.with_partition(part, |p| {
                KeyAccess::purge_expired(ks, p, db, now, stats);
                for (_, e) in p.entries(db) {
                    if on_disk.is_empty() || !on_disk.contains(e.key()) {
                        batch.push(e.key());
                    }
                }
            });
            batch.drain_matching(pattern, |key| {
                found.bulk(key);
                n += 1;
            });
        }
        for key in &on_disk {
            batch.push(key);
        }
        batch.drain_matching(pattern, |key| {
            found.bulk(key);
            n += 1;
        });
    });
    out.array(n);
    out.raw(&found.buf);
    Ok(())
}

/// Bits of a SCAN cursor holding the slot; the partition is above them.
const SLOT_BITS: u32 = 32;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;

/// Partitions one SCAN call may visit at least: visiting an empty partition
/// is a lock and a length check, so a small database finishes in one call.
const MIN_PARTITIONS_PER_CALL: usize = 1024;

fn encode_cursor(part: u64, slot: u32) -> u64 {
    (part << SLOT_BITS) | slot as u64
}

/// SCAN's options.
struct ScanOptions<'a> {
    /// Live keys to examine per call (COUNT): a hint of work, as in Redis.
    count: usize,
    pattern: Option<&'a [u8]>,
    type_name: Option<&'a [u8]>,
}

impl<'a> ScanOptions<'a> {
    fn parse(opts: &[&'a [u8]]) -> Result<ScanOptions<'a>, CmdError> {
        let mut o = ScanOptions { count: 10, pattern: None, type_name: None };
        let mut i = 0;
        while i < opts.len() {
            let has_value = i + 1 < opts.len();
            if eq_ic(opts[i], "count") && has_value {
                let count = arg_i64(opts[i + 1])?;
                if count < 1 {
                    return Err(err::SYNTAX.into());
                }
                o.count = usize::try_from(count).unwrap_or(usize::MAX);
            } else if eq_ic(opts[i], "match") && has_value {
                let p = opts[i + 1];
                o.pattern = (p != b"*").then_some(p);
            } else if eq_ic(opts[i], "type") && has_value {
                o.type_name = Some(opts[i + 1]);
            } else {
                return Err(err::SYNTAX.into());
            }
            i += 2;
        }
        Ok(o)
    }

    /// The TYPE filter; MATCH is applied outside the partition lock.
    fn wants_type(&self, e: &Entry) -> bool {
        self.type_name.is_none_or(|t| t.eq_ignore_ascii_case(e.type_name().as_bytes()))
    }
}

/// Runs one SCAN step from `cursor`, calling `emit` for each key to return;
/// gives the next cursor (0 when the iteration is complete).
///
/// Budget per call: `count` live keys examined, `count * 10` slots probed
/// (sparse slabs) and some partitions visited. Every call makes progress, so
/// an iteration always ends.
#[cfg(test)]
fn scan_step(keys: &mut KeyAccess<'_>, cursor: u64, opts: &ScanOptions<'_>, emit: impl FnMut(&[u8])) -> u64 {
    match scan_step_or_wait(keys, cursor, opts, false, emit) {
        Ok(next) => next,
        Err(_) => unreachable!("a step that may not wait never does"),
    }
}

/// [`scan_step`], or, when `may_wait` and a partition it enters holds many
/// keys on disk only, the wait for their records (read without the
/// partition's lock): the command then runs again from `cursor`.
fn scan_step_or_wait(
    keys: &mut KeyAccess<'_>,
    cursor: u64,
    opts: &ScanOptions<'_>,
    may_wait: bool,
    mut emit: impl FnMut(&[u8]),
) -> Result<u64, crate::store::PendingRead> {
    let parts = keys.ks.num_partitions() as u64;
    let (ks, stats, db, now) = (keys.ks, keys.stats, keys.db, keys.now_ms);
    let mut part = cursor >> SLOT_BITS;
    let mut slot = (cursor & SLOT_MASK) as usize;
    let max_probes = opts.count.saturating_mul(10);
    let max_visits = opts.count.saturating_mul(10).max(MIN_PARTITIONS_PER_CALL);
    let (mut examined, mut probes, mut visits) = (0usize, 0usize, 0usize);
    let mut batch = KeyBatch::default();
    while part < parts {
        let first = part == cursor >> SLOT_BITS;
        let stopped_at = keys.with_partition(part as u32, |p| {
            // A partition entered afresh: its keys on disk may be read back
            // before the walk, while its other commands go on. Only the
            // call's first partition waits (the command runs again from
            // `cursor`): a later one ends the call before it, as the
            // partitions before it recalled keys behind the cursor that
            // this call has returned and a run again would not.
            if may_wait && slot == 0 {
                if let Some(wait) = p.recall_all_later(ks, db) {
                    return if first { Err(Some(wait)) } else { Err(None) };
                }
            }
            // Keys on disk only come back to the index first. They may land
            // in slots the cursor has passed, so they are returned now (and
            // maybe again later: SCAN may repeat, never miss).
            let recalled = p.recall_all(ks, db);
            KeyAccess::purge_expired(ks, p, db, now, stats);
            for key in recalled {
                let hash = crate::store::hash_bytes(&key);
                let Some(at) = p.find_slot(db, hash, &key) else { continue };
                // The walk below returns those at or past the cursor.
                if (at as usize) < slot {
                    examined += 1;
                    if opts.wants_type(p.entry_at(db, at).expect("recalled")) {
                        batch.push(&key);
                    }
                }
            }
            while slot < p.slot_count(db) {
                if examined >= opts.count || probes >= max_probes {
                    return Ok(Some(slot as u32));
                }
                probes += 1;
                if let Some(e) = p.entry_at(db, slot as u32) {
                    examined += 1;
                    if opts.wants_type(e) {
                        batch.push(e.key());
                    }
                }
                slot += 1;
            }
            Ok(None)
        });
        let stopped_at = match stopped_at {
            Ok(s) => s,
            Err(Some(wait)) => return Err(wait),
            // Its batch read started: the next call waits for it.
            Err(None) => return Ok(encode_cursor(part, 0)),
        };
        batch.drain_matching(opts.pattern, &mut emit);
        if let Some(s) = stopped_at {
            return Ok(encode_cursor(part, s));
        }
        part += 1;
        slot = 0;
        visits += 1;
        if examined >= opts.count || probes >= max_probes || visits >= max_visits {
            break;
        }
    }
    Ok(if part >= parts { 0 } else { encode_cursor(part, 0) })
}

fn scan(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let cursor = crate::base::parse_scan_cursor(args[1]).ok_or(CmdError::from(INVALID_CURSOR))?;
    let opts = ScanOptions::parse(&args[2..])?;
    let mut found = Reply { buf: Vec::new(), resp3: out.resp3 };
    let mut n = 0;
    // Inside MULTI or a script nothing may wait: keys on disk are read
    // under the lock there.
    let may_wait = !ctx.in_exec && !ctx.in_script && !ctx.keys.locked.is_all();
    let step = scan_step_or_wait(&mut ctx.keys, cursor, &opts, may_wait, |key| {
        found.bulk(key);
        n += 1;
    });
    let next = match step {
        Ok(next) => next,
        Err(wait) => {
            ctx.pending = Some(wait);
            return Ok(());
        }
    };
    out.array(2);
    out.bulk(next.to_string().as_bytes());
    out.array(n);
    out.raw(&found.buf);
    Ok(())
}

/// A random live key of the selected database in partition `idx`.
fn random_key_in(keys: &mut KeyAccess<'_>, idx: u32) -> Option<Vec<u8>> {
    let (ks, stats, db, now) = (keys.ks, keys.stats, keys.db, keys.now_ms);
    keys.with_partition(idx, |p| {
        let r = fast_rand();
        let recalled = p.recall_random(ks, db, r);
        KeyAccess::purge_expired(ks, p, db, now, stats);
        recalled.filter(|k| p.find_entry(db, k).is_some()).or_else(|| p.random_entry(db, r).map(|e| e.key().to_vec()))
    })
}

/// Random partitions tried before sweeping: a populated keyspace answers on
/// the first try, a sparse one falls back to a sweep from a random start.
const RANDOM_PROBES: usize = 8;

fn randomkey(ctx: &mut Ctx<'_>, _args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let parts = ctx.keys.ks.num_partitions() as u64;
    let probes = (0..RANDOM_PROBES).map(|_| fast_rand() % parts);
    let start = fast_rand() % parts;
    let sweep = (0..parts).map(|i| (start + i) % parts);
    for idx in probes.chain(sweep) {
        if let Some(key) = random_key_in(&mut ctx.keys, idx as u32) {
            out.bulk(&key);
            return Ok(());
        }
    }
    out.null();
    Ok(())
}

// ------------------------------------------------------------------ OBJECT

const OBJECT_HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

const NO_LFU: &str = "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
const IS_LFU: &str = "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";

/// Redis shares the integer objects 0..9999 (refcount INT_MAX) unless an
/// LRU/LFU policy with a memory limit needs per-key access data.
const SHARED_INTEGERS: i64 = 10_000;
const SHARED_REFCOUNT: i64 = i32::MAX as i64;

#[derive(Clone, Copy, PartialEq, Eq)]
enum ObjectSub {
    Encoding,
    Freq,
    IdleTime,
    RefCount,
}

fn object(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let name = args[1];
    let sub = if eq_ic(name, "help") {
        if args.len() != 2 {
            return Err(err::arity("object|help").into());
        }
        out.array(OBJECT_HELP.len());
        for line in OBJECT_HELP {
            out.simple(line);
        }
        return Ok(());
    } else if eq_ic(name, "encoding") {
        ObjectSub::Encoding
    } else if eq_ic(name, "freq") {
        ObjectSub::Freq
    } else if eq_ic(name, "idletime") {
        ObjectSub::IdleTime
    } else if eq_ic(name, "refcount") {
        ObjectSub::RefCount
    } else {
        let shown = String::from_utf8_lossy(&name[..name.len().min(128)]).into_owned();
        return Err(format!("ERR unknown subcommand '{shown}'. Try OBJECT HELP.").into());
    };
    if args.len() != 3 {
        let full = format!("object|{}", String::from_utf8_lossy(name).to_ascii_lowercase());
        return Err(err::arity(&full).into());
    }
    let runtime = &ctx.config().runtime;
    let policy = runtime.policy_name();
    let lfu = policy.contains("lfu");
    let shares_integers =
        runtime.maxmemory.load(std::sync::atomic::Ordering::Relaxed) == 0 || !(lfu || policy.contains("lru"));
    let ks = ctx.keys.ks;
    let clock = ks.clock_secs();
    let Some(e) = ctx.keys.get_notouch_quiet(args[2]) else {
        out.null();
        return Ok(());
    };
    match sub {
        ObjectSub::Encoding => out.bulk_str(e.value().encoding()),
        ObjectSub::Freq => {
            if !lfu {
                return Err(NO_LFU.into());
            }
            out.int(ks.lfu_counter(&e.meta, clock) as i64);
        }
        ObjectSub::IdleTime => {
            if lfu {
                return Err(IS_LFU.into());
            }
            out.int(clock.saturating_sub(e.meta.last_access) as i64);
        }
        ObjectSub::RefCount => {
            let shared = matches!(e.value(), ValueRef::Str(s)
                if shares_integers && e.value().encoding() == "int"
                    && crate::base::parse_i64(s).is_some_and(|n| (0..SHARED_INTEGERS).contains(&n)));
            out.int(if shared { SHARED_REFCOUNT } else { 1 });
        }
    }
    Ok(())
}

// -------------------------------------------------------------------- WAIT

/// WAIT numreplicas timeout: a node without replicas has 0 acknowledgements,
/// so it answers 0 at once when that is enough, else after the timeout
/// (0 = never), like a Redis master without replicas.
fn wait(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let wanted = arg_i64(args[1])?;
    let timeout =
        crate::base::parse_i64(args[2]).ok_or(CmdError::from("ERR timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(err::TIMEOUT_NEG.into());
    }
    if wanted <= 0 || !ctx.can_block() {
        out.int(0);
        return Ok(());
    }
    let deadline = if timeout == 0 { 0 } else { ctx.keys.now_ms.saturating_add(timeout as u64) };
    ctx.block(&[], deadline, |o| o.int(0));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Keyspace, StoreStats, Value};
    use std::collections::HashMap;

    #[test]
    fn expire_conditions() {
        let parse = |opts: &[&str]| {
            let v: Vec<&[u8]> = opts.iter().map(|s| s.as_bytes()).collect();
            ExpireCond::parse(&v)
        };
        assert!(parse(&["nx", "xx"]).unwrap_err().0.starts_with("ERR NX and XX"));
        assert!(parse(&["GT", "lt"]).unwrap_err().0.starts_with("ERR GT and LT"));
        assert_eq!(parse(&["bogus"]).unwrap_err().0, "ERR Unsupported option bogus");
        let gt = parse(&["gt"]).unwrap();
        assert!(!gt.allows(None, 100), "no TTL is infinite: nothing is greater");
        assert!(gt.allows(Some(50), 100));
        assert!(!gt.allows(Some(100), 100));
        let lt = parse(&["lt"]).unwrap();
        assert!(lt.allows(None, 100), "anything is less than infinite");
        assert!(!lt.allows(Some(100), 100));
        let xx = parse(&["xx", "xx"]).unwrap();
        assert!(!xx.allows(None, 1) && xx.allows(Some(5), 1));
        assert!(!parse(&["NX"]).unwrap().allows(Some(5), 1));
    }

    #[test]
    fn expire_deadline_overflow() {
        let f = ExpireForm { name: "expire", seconds: true, relative: true };
        assert_eq!(expire_deadline(b"10", f, 1_000).unwrap(), 11_000);
        assert_eq!(
            expire_deadline(b"9223372036854775807", f, 0).unwrap_err().0,
            "ERR invalid expire time in 'expire' command"
        );
        let f = ExpireForm { name: "pexpireat", seconds: false, relative: false };
        assert_eq!(expire_deadline(b"9223372036854775807", f, 5).unwrap(), i64::MAX);
        assert_eq!(expire_deadline(b"x", f, 5).unwrap_err().0, err::NOT_INT);
    }

    fn access<'a>(ks: &'a Keyspace, stats: &'a StoreStats, all: bool) -> KeyAccess<'a> {
        let locked = if all { ks.lock_all() } else { ks.lock_none() };
        KeyAccess { ks, locked, db: 0, now_ms: crate::store::now_ms(), touch: true, stats }
    }

    fn put(ks: &Keyspace, stats: &StoreStats, key: &str) {
        access(ks, stats, true).set(key.as_bytes(), Value::Str(b"v".to_vec()), 0, false);
    }

    fn del_key(ks: &Keyspace, stats: &StoreStats, key: &str) {
        access(ks, stats, true).delete(key.as_bytes());
    }

    /// The SCAN guarantee, deterministically: while a scan is under way,
    /// other keys come and go between calls (growing slabs, reusing freed
    /// slots, emptying partitions); every key present throughout is returned
    /// exactly once and the iteration ends.
    #[test]
    fn scan_returns_stable_keys_exactly_once_under_churn() {
        let ks = Keyspace::new(16);
        let stats = StoreStats::default();
        for i in 0..3000 {
            put(&ks, &stats, &format!("stable:{i}"));
        }
        for i in 0..1000 {
            put(&ks, &stats, &format!("doomed:{i}"));
        }
        let opts = ScanOptions { count: 10, pattern: None, type_name: None };
        let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
        let (mut cursor, mut calls, mut churn) = (0u64, 0, 0);
        loop {
            let mut keys = access(&ks, &stats, false);
            cursor = scan_step(&mut keys, cursor, &opts, |k| *seen.entry(k.to_vec()).or_default() += 1);
            drop(keys);
            calls += 1;
            for _ in 0..5 {
                put(&ks, &stats, &format!("new:{churn}"));
                if churn < 1000 {
                    del_key(&ks, &stats, &format!("doomed:{churn}"));
                }
                churn += 1;
            }
            if cursor == 0 {
                break;
            }
            assert!(calls < 100_000, "scan does not terminate");
        }
        for i in 0..3000 {
            assert_eq!(seen.get(format!("stable:{i}").as_bytes()), Some(&1), "stable:{i}");
        }
        assert!(seen.values().all(|&n| n == 1), "a key was returned twice");
        assert!(calls > 300, "COUNT 10 should bound the work per call ({calls} calls)");
    }

    #[test]
    fn scan_filters_and_budget() {
        let ks = Keyspace::new(4);
        let stats = StoreStats::default();
        for i in 0..50 {
            put(&ks, &stats, &format!("a:{i}"));
            put(&ks, &stats, &format!("b:{i}"));
        }
        let mut list = crate::store::list::ListValue::default();
        list.push_back(b"x".to_vec());
        access(&ks, &stats, true).set(b"a:list", Value::List(list), 0, false);
        let opts = ScanOptions { count: 1000, pattern: Some(b"a:*"), type_name: Some(b"STRING") };
        let mut found = Vec::new();
        let next = scan_step(&mut access(&ks, &stats, false), 0, &opts, |k| found.push(k.to_vec()));
        assert_eq!(next, 0, "a large COUNT finishes a small keyspace in one call");
        assert_eq!(found.len(), 50);
        assert!(found.iter().all(|k| k.starts_with(b"a:")));

        let opts = ScanOptions { count: 1, pattern: None, type_name: None };
        let mut n = 0;
        let next = scan_step(&mut access(&ks, &stats, false), 0, &opts, |_| n += 1);
        assert_ne!(next, 0);
        assert_eq!(n, 1, "COUNT 1 examines one key");
        // A cursor past the last partition ends the iteration.
        let next = scan_step(&mut access(&ks, &stats, false), encode_cursor(99, 0), &opts, |_| n += 1);
        assert_eq!((next, n), (0, 1));
    }
}
