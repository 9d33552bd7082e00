//! Server administration: DBSIZE, FLUSHDB, FLUSHALL, SWAPDB, TIME,
//! LASTSAVE, ROLE and SHUTDOWN.

use super::stats::{start_time, unix_micros};
use super::{CmdError, CmdResult, CommandDef, Ctx, Keys, err, flags};
use crate::base::eq_ic;
use crate::protocol::Reply;
use crate::store::NUM_DBS;

const LS: u32 = flags::LOADING | flags::STALE;
const NLS: u32 = flags::NOSCRIPT | LS;

pub const COMMANDS: &[CommandDef] = &[
    CommandDef::new("dbsize", 1, flags::READONLY | flags::FAST, Keys::All, dbsize).acl("@keyspace @read @fast"),
    CommandDef::new("flushdb", -1, flags::WRITE, Keys::All, flushdb).acl("@keyspace @write @slow @dangerous"),
    CommandDef::new("flushall", -1, flags::WRITE, Keys::All, flushall).acl("@keyspace @write @slow @dangerous"),
    CommandDef::new("swapdb", 3, flags::WRITE | flags::FAST, Keys::All, swapdb)
        .acl("@keyspace @write @fast @dangerous"),
    CommandDef::new("time", 1, LS | flags::FAST, Keys::None, time).acl("@fast"),
    CommandDef::new("lastsave", 1, LS | flags::FAST, Keys::None, lastsave).acl("@admin @fast @dangerous"),
    CommandDef::new("role", 1, NLS | flags::FAST, Keys::None, role).acl("@admin @fast @dangerous"),
    CommandDef::new("shutdown", -1, flags::ADMIN | NLS | flags::NO_MULTI | flags::ALLOW_BUSY, Keys::None, shutdown)
        .acl("@admin @slow @dangerous"),
];

// ---------------------------------------------------------------------------
// Keyspace-wide commands
// ---------------------------------------------------------------------------

fn dbsize(ctx: &mut Ctx<'_>, _args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let db = ctx.keys.db;
    let mut n = 0;
    ctx.keys.for_each_partition(|part| n += part.db_len(db));
    out.int(n as i64);
    Ok(())
}

/// FLUSHDB / FLUSHALL take an optional ASYNC or SYNC (both flush at once here).
fn flush_mode(args: &[&[u8]]) -> CmdResult {
    match args.len() {
        1 => Ok(()),
        2 if eq_ic(args[1], "async") || eq_ic(args[1], "sync") => Ok(()),
        _ => Err(err::SYNTAX.into()),
    }
}

fn flushdb(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    flush_mode(args)?;
    let (ks, db) = (ctx.keys.ks, ctx.keys.db);
    ctx.keys.for_each_partition(|part| {
        part.clear_db(ks, db);
        part.clear_tracked(ks);
    });
    ctx.node.tracking.flushed();
    out.ok();
    Ok(())
}

fn flushall(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    flush_mode(args)?;
    let ks = ctx.keys.ks;
    ctx.keys.for_each_partition(|part| {
        for db in 0..NUM_DBS {
            part.clear_db(ks, db);
        }
        part.clear_tracked(ks);
    });
    ctx.node.tracking.flushed();
    out.ok();
    Ok(())
}

fn swapdb(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let a = crate::base::parse_i64(args[1]).ok_or(CmdError::from("ERR invalid first DB index"))?;
    let b = crate::base::parse_i64(args[2]).ok_or(CmdError::from("ERR invalid second DB index"))?;
    let range = 0..NUM_DBS as i64;
    if !range.contains(&a) || !range.contains(&b) {
        return Err("ERR DB index is out of range".into());
    }
    let (a, b) = (a as usize, b as usize);
    if a != b {
        let ks = ctx.keys.ks;
        ctx.keys.for_each_partition(|part| part.swap_dbs(ks, a, b));
    }
    out.ok();
    Ok(())
}

// ---------------------------------------------------------------------------
// TIME, LASTSAVE, ROLE, SHUTDOWN
// ---------------------------------------------------------------------------

fn time(_ctx: &mut Ctx<'_>, _args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let now = unix_micros();
    out.array(2);
    out.bulk((now / 1_000_000).to_string().as_bytes());
    out.bulk((now % 1_000_000).to_string().as_bytes());
    Ok(())
}

fn lastsave(ctx: &mut Ctx<'_>, _args: &[&[u8]], out: &mut Reply) -> CmdResult {
    // Nothing is ever saved: like a Redis that never saved, report start-up.
    out.int(start_time(ctx.node) as i64);
    Ok(())
}

fn role(_ctx: &mut Ctx<'_>, _args: &[&[u8]], out: &mut Reply) -> CmdResult {
    out.array(3);
    out.bulk(b"master");
    out.int(0);
    out.array(0);
    Ok(())
}

fn shutdown(ctx: &mut Ctx<'_>, args: &[&[u8]], _out: &mut Reply) -> CmdResult {
    let (mut nosave, mut save, mut abort) = (false, false, false);
    for a in &args[1..] {
        if eq_ic(a, "nosave") {
            nosave = true;
        } else if eq_ic(a, "save") {
            save = true;
        } else if eq_ic(a, "abort") {
            abort = true;
        } else if !(eq_ic(a, "now") || eq_ic(a, "force")) {
            return Err(err::SYNTAX.into());
        }
    }
    if (nosave && save) || (abort && args.len() > 2) {
        return Err(err::SYNTAX.into());
    }
    if abort {
        return Err("ERR No shutdown in progress.".into());
    }
    if save {
        tracing::warn!("SHUTDOWN SAVE refused: this server has no RDB persistence");
        return Err("ERR Errors trying to SHUTDOWN. Check logs.".into());
    }
    tracing::warn!(client = ctx.client.id(), "user requested shutdown");
    ctx.server.shut_down();
    // Like Redis: no reply, the connection just closes.
    ctx.client.close_after_reply = true;
    Ok(())
}
