//! Commands on hashes: HSET & co., counters (HINCRBY, HINCRBYFLOAT),
//! HRANDFIELD and HSCAN.
//!
//! Hashes are `Value::Hash(HashValue)` on a `SlabTable`; HSCAN and
//! HRANDFIELD reuse the slot-cursor walk and random sampling of `sets`.

use super::sets::{
    arg_random_count, parse_cursor, parse_scan_opts, random_item, reply_random_items, reply_scan, scan_step,
};
use super::typed::{read_value, remove_members, write_value_or_create};
use crate::base::long_double::LongDouble;
use crate::base::{eq_ic, parse_i64};
use crate::commands::{CmdError, CmdResult, CommandDef, Ctx, Keys, arg_i64, err, flags};
use crate::config::keyspace_events as ev;
use crate::protocol::Reply;
use crate::store::hash::{Field, HashValue};
use crate::store::{Changed, Value};

const W: u32 = flags::WRITE;
const WD: u32 = flags::WRITE | flags::DENYOOM;
const R: u32 = flags::READONLY;
const F: u32 = flags::FAST;

pub const COMMANDS: &[CommandDef] = &[
    CommandDef::new("hset", -4, WD | F, Keys::Range(1, 1, 1), hset).acl("@write @hash @fast"),
    CommandDef::new("hmset", -4, WD | F, Keys::Range(1, 1, 1), hmset).acl("@write @hash @fast"),
    CommandDef::new("hsetnx", 4, WD | F, Keys::Range(1, 1, 1), hsetnx).acl("@write @hash @fast"),
    CommandDef::new("hget", 3, R | F, Keys::Range(1, 1, 1), hget).acl("@read @hash @fast"),
    CommandDef::new("hmget", -3, R | F, Keys::Range(1, 1, 1), hmget).acl("@read @hash @fast"),
    CommandDef::new("hdel", -3, W | F, Keys::Range(1, 1, 1), hdel).acl("@write @hash @fast"),
    CommandDef::new("hgetall", 2, R, Keys::Range(1, 1, 1), hgetall).acl("@read @hash @slow"),
    CommandDef::new("hkeys", 2, R, Keys::Range(1, 1, 1), hkeys).acl("@read @hash @slow"),
    CommandDef::new("hvals", 2, R, Keys::Range(1, 1, 1), hvals).acl("@read @hash @slow"),
    CommandDef::new("hlen", 2, R | F, Keys::Range(1, 1, 1), hlen).acl("@read @hash @fast"),
    CommandDef::new("hexists", 3, R | F, Keys::Range(1, 1, 1), hexists).acl("@read @hash @fast"),
    CommandDef::new("hstrlen", 3, R | F, Keys::Range(1, 1, 1), hstrlen).acl("@read @hash @fast"),
    CommandDef::new("hincrby", 4, WD | F, Keys::Range(1, 1, 1), hincrby).acl("@write @hash @fast"),
    CommandDef::new("hincrbyfloat", 4, WD | F, Keys::Range(1, 1, 1), hincrbyfloat).acl("@write @hash @fast"),
    CommandDef::new("hrandfield", -2, R, Keys::Range(1, 1, 1), hrandfield).acl("@read @hash @slow"),
    CommandDef::new("hscan", -3, R, Keys::Range(1, 1, 1), hscan).acl("@read @hash @slow"),
];

fn new_hash() -> Value {
    Value::Hash(HashValue::default())
}

/// The hash at `key` for reading: None when missing, WRONGTYPE for other types.
fn read_hash<'a>(ctx: &'a mut Ctx<'_>, key: &[u8]) -> Result<Option<&'a HashValue>, CmdError> {
    read_value(&mut ctx.keys, key)
}

// ---------------------------------------------------------------- writes

/// HSET / HMSET: sets every field-value pair; returns how many fields are new.
fn set_pairs(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<i64, CmdError> {
    if args.len() % 2 == 1 {
        return Err(err::arity(std::str::from_utf8(args[0]).unwrap_or("hset")).into());
    }
    // Setting a field to the value it has still counts as a write, as in Redis.
    let created = write_value_or_create(&mut ctx.keys, args[1], new_hash, |hash: &mut HashValue| {
        let created = args[2..].chunks_exact(2).map(|pair| hash.insert_slice(pair[0], pair[1]) as i64).sum();
        Ok(Changed::Yes(created))
    })?;
    ctx.notify(ev::HASH, "hset", args[1]);
    Ok(created)
}

fn hset(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let created = set_pairs(ctx, args)?;
    out.int(created);
    Ok(())
}

fn hmset(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    set_pairs(ctx, args)?;
    out.ok();
    Ok(())
}

fn hsetnx(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let created = write_value_or_create(&mut ctx.keys, args[1], new_hash, |hash: &mut HashValue| {
        let created = !hash.contains(args[2]) && hash.insert(args[2], args[3].to_vec());
        Ok(Changed::when(created, created))
    })?;
    if created {
        ctx.notify(ev::HASH, "hset", args[1]);
    }
    out.int(created as i64);
    Ok(())
}

fn hdel(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    remove_members(ctx, args[1], &args[2..], out, (ev::HASH, "hdel"), |hash: &mut HashValue, field| {
        hash.remove(field).is_some()
    })
}

/// Applies `update` to the current value of a field (None when absent) and
/// stores what it returns: the shared body of HINCRBY and HINCRBYFLOAT.
fn update_field(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    field: &[u8],
    event: &str,
    update: impl FnOnce(Option<&[u8]>) -> Result<Vec<u8>, CmdError>,
) -> Result<(), CmdError> {
    // On an error a new, still empty hash goes away again.
    write_value_or_create(&mut ctx.keys, key, new_hash, |hash: &mut HashValue| {
        let value = update(hash.get(field).map(Vec::as_slice))?;
        hash.insert(field, value);
        Ok(Changed::Yes(()))
    })?;
    ctx.notify(ev::HASH, event, key);
    Ok(())
}

fn hincrby(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let incr = arg_i64(args[3])?;
    let mut result = 0;
    update_field(ctx, args[1], args[2], "hincrby", |cur| {
        let cur = match cur {
            None => 0,
            Some(v) => parse_i64(v).ok_or(CmdError::from("ERR hash value is not an integer"))?,
        };
        result = cur.checked_add(incr).ok_or(CmdError::from(err::INCR_OVERFLOW))?;
        Ok(result.to_string().into_bytes())
    })?;
    out.int(result);
    Ok(())
}

fn hincrbyfloat(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let incr = LongDouble::parse(args[3]).ok_or(CmdError::from(err::NOT_FLOAT))?;
    if incr.is_infinite() {
        return Err("ERR value is NaN or Infinity".into());
    }
    let mut text = String::new();
    update_field(ctx, args[1], args[2], "hincrbyfloat", |cur| {
        let cur = match cur {
            None => LongDouble::ZERO,
            Some(v) => LongDouble::parse(v).ok_or(CmdError::from("ERR hash value is not a float"))?,
        };
        match cur.checked_add(incr) {
            Some(sum) if !sum.is_infinite() => text = sum.to_human_string(),
            _ => return Err("ERR increment would produce NaN or Infinity".into()),
        }
        Ok(text.clone().into_bytes())
    })?;
    out.bulk(text.as_bytes());
    Ok(())
}

// ---------------------------------------------------------------- reads

fn hget(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    match read_hash(ctx, args[1])?.and_then(|h| h.get(args[2])) {
        Some(v) => out.bulk(v),
        None => out.null(),
    }
    Ok(())
}

fn hmget(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let hash = read_hash(ctx, args[1])?;
    out.array(args.len() - 2);
    for field in &args[2..] {
        match hash.and_then(|h| h.get(field)) {
            Some(v) => out.bulk(v),
            None => out.null(),
        }
    }
    Ok(())
}

fn hgetall(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let Some(hash) = read_hash(ctx, args[1])? else {
        out.map(0);
        return Ok(());
    };
    out.map(hash.len());
    for (name, value) in hash.iter() {
        out.bulk(name);
        out.bulk(value);
    }
    Ok(())
}

fn hkeys(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let hash = read_hash(ctx, args[1])?;
    out.array(hash.map_or(0, |h| h.len()));
    for (name, _) in hash.iter().flat_map(|h| h.iter()) {
        out.bulk(name);
    }
    Ok(())
}

fn hvals(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let hash = read_hash(ctx, args[1])?;
    out.array(hash.map_or(0, |h| h.len()));
    for (_, value) in hash.iter().flat_map(|h| h.iter()) {
        out.bulk(value);
    }
    Ok(())
}

fn hlen(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let len = read_hash(ctx, args[1])?.map_or(0, |h| h.len());
    out.int(len as i64);
    Ok(())
}

fn hexists(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let found = read_hash(ctx, args[1])?.is_some_and(|h| h.contains(args[2]));
    out.int(found as i64);
    Ok(())
}

fn hstrlen(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let len = read_hash(ctx, args[1])?.and_then(|h| h.get(args[2])).map_or(0, |v| v.len());
    out.int(len as i64);
    Ok(())
}

// ---------------------------------------------------------------- HRANDFIELD, HSCAN

fn hrandfield(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    if args.len() == 2 {
        match read_hash(ctx, args[1])? {
            Some(hash) => out.bulk(&random_item(hash.table()).name),
            None => out.null(),
        }
        return Ok(());
    }
    let count = arg_random_count(args[2])?;
    let with_values = match args.len() {
        3 => false,
        4 if eq_ic(args[3], "withvalues") => {
            // Redis refuses counts whose reply length (2 per field) would overflow.
            if count.unsigned_abs() > (i64::MAX / 2) as u64 {
                return Err("ERR value is out of range".into());
            }
            true
        }
        _ => return Err(err::SYNTAX.into()),
    };
    let Some(hash) = read_hash(ctx, args[1])? else {
        out.array(0);
        return Ok(());
    };
    if !with_values {
        reply_random_items(out, hash.table(), count, 1, |out, f| out.bulk(&f.name));
        return Ok(());
    }
    if out.resp3 {
        // RESP3: an array of [field, value] pairs.
        reply_random_items(out, hash.table(), count, 1, |out, f| {
            out.array(2);
            out.bulk(&f.name);
            out.bulk(&f.value);
        });
    } else {
        // RESP2: one flat array of fields and values.
        reply_random_items(out, hash.table(), count, 2, |out, f| {
            out.bulk(&f.name);
            out.bulk(&f.value);
        });
    }
    Ok(())
}

fn hscan(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let cursor = parse_cursor(args[2])?;
    let Some(hash) = read_hash(ctx, args[1])? else {
        reply_scan::<Field>(out, 0, &[], 2, |_, _| {});
        return Ok(());
    };
    let opts = parse_scan_opts(&args[3..])?;
    let mut found = Vec::new();
    let next = if hash.is_compact() {
        // Redis returns a whole listpack in one call, whatever the cursor.
        found.extend(hash.table().iter().map(|(_, f)| f).filter(|f| opts.matches(&f.name)));
        0
    } else {
        // Redis counts fields and values against COUNT.
        scan_step(hash.table(), cursor, &opts, 2, &mut found)
    };
    reply_scan(out, next, &found, 2, |out, f| {
        out.bulk(&f.name);
        out.bulk(&f.value);
    });
    Ok(())
}
