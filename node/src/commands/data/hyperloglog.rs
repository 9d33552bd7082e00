//! Commands: HyperLogLog — PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST —
//! on strings in Redis's exact HLL format (see `store::hll`).

use crate::base::eq_ic;
use crate::commands::{CmdError, CmdResult, CommandDef, Ctx, Keys, err, flags};
use crate::config::keyspace_events as ev;
use crate::protocol::Reply;
use crate::store::hll::{self, Corrupt};
use crate::store::{Changed, KeyAccess, Value, ValueRef};
use std::sync::atomic::Ordering::Relaxed;

const W: u32 = flags::WRITE;
const DENYOOM: u32 = flags::DENYOOM;

pub const COMMANDS: &[CommandDef] = &[
    CommandDef::new("pfadd", -2, W | DENYOOM | flags::FAST, Keys::Range(1, 1, 1), pfadd)
        .acl("@write @hyperloglog @fast"),
    // Read-only as Redis flags it, though it may refresh the cached count.
    CommandDef::new("pfcount", -2, flags::READONLY | flags::MAY_REPLICATE, Keys::Range(1, -1, 1), pfcount)
        .acl("@read @hyperloglog @slow"),
    CommandDef::new("pfmerge", -2, W | DENYOOM, Keys::Range(1, -1, 1), pfmerge).acl("@write @hyperloglog @slow"),
    CommandDef::new("pfdebug", 3, W | DENYOOM | flags::ADMIN, Keys::Range(2, 2, 1), pfdebug)
        .acl("@write @hyperloglog @admin @slow @dangerous"),
    CommandDef::new("pfselftest", 1, flags::ADMIN, Keys::None, pfselftest).acl("@hyperloglog @admin @slow @dangerous"),
];

const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";

impl From<Corrupt> for CmdError {
    fn from(_: Corrupt) -> Self {
        CORRUPT.into()
    }
}

fn sparse_max(ctx: &Ctx<'_>) -> usize {
    ctx.config().runtime.hll_sparse_max_bytes.load(Relaxed).max(0) as usize
}

/// The HLL string at `key` for reading: None when missing, Redis's errors
/// for another type or a string that is not an HLL.
fn read_hll<'a>(keys: &'a mut KeyAccess<'_>, key: &[u8]) -> Result<Option<&'a [u8]>, CmdError> {
    match keys.get(key).map(|e| e.value()) {
        None => Ok(None),
        Some(ValueRef::Str(s)) if hll::is_valid(s) => Ok(Some(s)),
        Some(ValueRef::Str(_)) => Err(NOT_HLL.into()),
        Some(_) => Err(err::WRONGTYPE.into()),
    }
}

/// Runs `f` on the HLL string at `key` in place: None when the key is
/// missing. `f` declares whether it changed the bytes — which it may have
/// done before failing — and its result, which may be an error all the same.
fn update_hll<T>(
    keys: &mut KeyAccess<'_>,
    key: &[u8],
    f: impl FnOnce(&mut Vec<u8>) -> Changed<Result<T, CmdError>>,
) -> Result<Option<T>, CmdError> {
    let updated = keys.update(key, |e| {
        match e.value() {
            ValueRef::Str(s) if hll::is_valid(s) => {}
            ValueRef::Str(_) => return Err(CmdError::from(NOT_HLL)),
            _ => return Err(err::WRONGTYPE.into()),
        }
        let Value::Str(s) = e.value_mut() else { unreachable!("checked a string above") };
        Ok(f(s))
    });
    match updated {
        None => Ok(None),
        Some(result) => result?.map(Some),
    }
}

fn pfadd(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let max = sparse_max(ctx);
    let key = args[1];
    let created = !ctx.keys.contains(key);
    if created {
        ctx.keys.set(key, Value::Str(hll::new_empty()), 0, false);
    }
    let updated = update_hll(&mut ctx.keys, key, |s| {
        // Creating the key counts as an update (the cache is marked stale).
        let mut updated = created;
        for ele in &args[2..] {
            match hll::add(s, ele, max) {
                Ok(changed) => updated |= changed,
                // Registers already raised stay raised, as in Redis.
                Err(c) => return Changed::when(updated, Err(c.into())),
            }
        }
        if updated {
            hll::invalidate_cache(s);
        }
        Changed::when(updated, Ok(updated))
    })?
    .unwrap_or(false);
    if updated {
        ctx.notify(ev::STRING, "pfadd", key);
    }
    out.int(i64::from(updated));
    Ok(())
}

fn pfcount(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    if args.len() > 2 {
        // The union: the register-wise maximum of every HLL.
        let mut max = Box::new([0u8; hll::REGISTERS]);
        for key in &args[1..] {
            if let Some(s) = read_hll(&mut ctx.keys, key)? {
                hll::merge_into(&mut max, s)?;
            }
        }
        out.int(hll::estimate(&hll::raw_histogram(&max)) as i64);
        return Ok(());
    }
    let key = args[1];
    let Some(s) = read_hll(&mut ctx.keys, key)? else {
        out.int(0);
        return Ok(());
    };
    if let Some(card) = hll::cached_card(s) {
        out.int(card as i64);
        return Ok(());
    }
    // Recompute and cache it: the string changes, as in Redis.
    let card = update_hll(&mut ctx.keys, key, |s| match hll::histogram(s) {
        None => Changed::No(Err(CORRUPT.into())),
        Some(h) => {
            let card = hll::estimate(&h);
            hll::set_cached_card(s, card);
            Changed::Yes(Ok(card))
        }
    })?
    .expect("the key was just read");
    out.int(card as i64);
    Ok(())
}

fn pfmerge(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let mut max = Box::new([0u8; hll::REGISTERS]);
    let mut use_dense = false;
    for key in &args[1..] {
        if let Some(s) = read_hll(&mut ctx.keys, key)? {
            use_dense |= hll::encoding(s) == hll::DENSE;
            hll::merge_into(&mut max, s)?;
        }
    }
    let sparse_max = sparse_max(ctx);
    let dst = args[1];
    if !ctx.keys.contains(dst) {
        ctx.keys.set(dst, Value::Str(hll::new_empty()), 0, false);
    }
    update_hll(&mut ctx.keys, dst, |s| {
        if use_dense && let Err(c) = hll::to_dense(s) {
            return Changed::No(Err(c.into()));
        }
        for (i, &m) in max.iter().enumerate() {
            // Errors are ignored here, as Redis ignores them.
            if m != 0 {
                let _ = hll::set_register(s, i, m, sparse_max);
            }
        }
        hll::invalidate_cache(s);
        Changed::Yes(Ok(()))
    })?;
    ctx.notify(ev::STRING, "pfadd", dst);
    out.ok();
    Ok(())
}

fn pfdebug(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let (sub, key) = (args[1], args[2]);
    let enc = match read_hll(&mut ctx.keys, key)? {
        None => return Err("ERR The specified key does not exist".into()),
        Some(s) => hll::encoding(s),
    };
    if eq_ic(sub, "getreg") || eq_ic(sub, "todense") {
        let converted = enc == hll::SPARSE;
        let regs = update_hll(&mut ctx.keys, key, |s| match hll::to_dense(s) {
            Err(c) => Changed::No(Err(c.into())),
            Ok(()) => Changed::when(
                converted,
                Ok((0..hll::REGISTERS).map(|i| hll::dense_get(&s[hll::HDR_SIZE..], i)).collect::<Vec<_>>()),
            ),
        })?
        .expect("the key was just read");
        if eq_ic(sub, "todense") {
            out.int(i64::from(converted));
        } else {
            out.array(regs.len());
            regs.iter().for_each(|&r| out.int(r as i64));
        }
    } else if eq_ic(sub, "decode") {
        if enc != hll::SPARSE {
            return Err("ERR HLL encoding is not sparse".into());
        }
        let s = read_hll(&mut ctx.keys, key)?.expect("the key was just read");
        out.bulk(hll::decode_sparse(s).as_bytes());
    } else if eq_ic(sub, "encoding") {
        out.simple(if enc == hll::DENSE { "dense" } else { "sparse" });
    } else {
        return Err(format!("ERR Unknown PFDEBUG subcommand '{}'", String::from_utf8_lossy(sub)).into());
    }
    Ok(())
}

fn pfselftest(_ctx: &mut Ctx<'_>, _args: &[&[u8]], out: &mut Reply) -> CmdResult {
    hll::self_test().map_err(CmdError::from)?;
    out.ok();
    Ok(())
}
