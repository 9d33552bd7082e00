//! DUMP and RESTORE: values in Redis's DUMP payload encoding (see
//! `store::dump`). RESTORE's IDLETIME and FREQ are validated as Redis does
//! and otherwise ignored: the eviction policy starts the key fresh.

use crate::base::eq_ic;
use crate::commands::{CmdResult, CommandDef, Ctx, Keys, arg_i64, err, flags};
use crate::config::keyspace_events as ev;
use crate::protocol::Reply;
use crate::store::dump::{self, DumpError};

const ONE: Keys = Keys::Range(1, 1, 1);

pub const COMMANDS: &[CommandDef] = &[
    CommandDef::new("dump", 2, flags::READONLY, ONE, dump_cmd).acl("@keyspace @read @slow"),
    CommandDef::new("restore", -4, flags::WRITE | flags::DENYOOM, ONE, restore)
        .acl("@keyspace @write @slow @dangerous"),
];

fn dump_cmd(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    match ctx.keys.get(args[1]) {
        Some(e) => out.bulk(&dump::dump(e.value())),
        None => out.null(),
    }
    Ok(())
}

fn restore(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let (mut replace, mut absttl, mut idle, mut freq) = (false, false, false, false);
    let mut i = 4;
    while i < args.len() {
        let a = args[i];
        if eq_ic(a, "replace") {
            replace = true;
        } else if eq_ic(a, "absttl") {
            absttl = true;
        } else if eq_ic(a, "idletime") && i + 1 < args.len() && !freq {
            i += 1;
            if arg_i64(args[i])? < 0 {
                return Err("ERR Invalid IDLETIME value, must be >= 0".into());
            }
            idle = true;
        } else if eq_ic(a, "freq") && i + 1 < args.len() && !idle {
            i += 1;
            let f = arg_i64(args[i])?;
            if !(0..=255).contains(&f) {
                return Err("ERR Invalid FREQ value, must be >= 0 and <= 255".into());
            }
            freq = true;
        } else {
            return Err(err::SYNTAX.into());
        }
        i += 1;
    }
    let key = args[1];
    if !replace && ctx.keys.contains(key) {
        return Err("BUSYKEY Target key name already exists.".into());
    }
    let ttl = arg_i64(args[2])?;
    if ttl < 0 {
        return Err("ERR Invalid TTL value, must be >= 0".into());
    }
    let value = match dump::undump(args[3]) {
        Ok(v) => v,
        Err(DumpError::Trailer) => return Err("ERR DUMP payload version or checksum are wrong".into()),
        Err(DumpError::Format) => return Err("ERR Bad data format".into()),
    };
    let now = ctx.keys.now_ms;
    let expire_at = match ttl {
        0 => 0,
        t if absttl => t as u64,
        t => now.saturating_add(t as u64),
    };
    if expire_at != 0 && expire_at <= now {
        // Already expired: as Redis, the old key (with REPLACE) goes, nothing is added.
        if replace && ctx.keys.delete(key) {
            ctx.notify(ev::GENERIC, "del", key);
        }
        out.ok();
        return Ok(());
    }
    ctx.keys.delete(key);
    ctx.keys.set(key, value, expire_at, false);
    ctx.notify(ev::GENERIC, "restore", key);
    out.ok();
    Ok(())
}
