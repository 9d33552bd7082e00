//! MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! EXEC is atomic with respect to every client on every thread: before
//! running the queued commands it locks, in ascending order, every partition
//! any of them (or any WATCHed key) hashes to — or all partitions when a
//! queued command sees the whole keyspace — and holds them to the end.
//! WATCH records a per-key modification version kept in the key's partition;
//! every write through the keyspace bumps it, so EXEC can tell whether a
//! watched key changed.

use super::Node;
use super::pipeline::{self, Limits, Origin, Refusal};
use super::table::Resolved;
use super::{CmdResult, CommandDef, Ctx, Keys, flags};
use crate::protocol::Reply;
use crate::session::client::Client;
use crate::store::KeyAccess;
use smallvec::SmallVec;
use std::sync::atomic::Ordering::Relaxed;

const TX: u32 = flags::NOSCRIPT | flags::LOADING | flags::STALE | flags::FAST | flags::NO_QUEUE | flags::ALLOW_BUSY;

pub const COMMANDS: &[CommandDef] = &[
    CommandDef::new("multi", 1, TX, Keys::None, multi).acl("@fast @transaction"),
    CommandDef::new("exec", 1, flags::NOSCRIPT | flags::LOADING | flags::STALE | flags::NO_QUEUE, Keys::None, exec)
        .acl("@slow @transaction"),
    CommandDef::new("discard", 1, TX, Keys::None, discard).acl("@fast @transaction"),
    CommandDef::new("watch", -2, TX | flags::NO_MULTI, Keys::Range(1, -1, 1), watch).acl("@fast @transaction"),
    CommandDef::new("unwatch", 1, TX, Keys::None, unwatch).acl("@fast @transaction"),
];

fn multi(ctx: &mut Ctx<'_>, _args: &[&[u8]], out: &mut Reply) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err("ERR MULTI calls can not be nested".into());
    }
    ctx.client.multi = Some(Vec::new());
    ctx.client.multi_dirty = false;
    ctx.client.info.multi.store(0, Relaxed);
    out.ok();
    Ok(())
}

fn end_multi(client: &mut Client) {
    client.multi = None;
    client.multi_dirty = false;
    client.info.multi.store(u32::MAX, Relaxed);
}

/// EXEC refused while a script holds the keyspace: the transaction ends
/// (as Redis's `execCommandAbort`) and its WATCHes no longer count; their
/// partitions are unlocked when the client's next command runs after the
/// script.
pub fn abort_while_busy(client: &mut Client) {
    end_multi(client);
    let watched = std::mem::take(&mut client.watched);
    client.stale_watches.extend(watched);
}

/// EXEC refused by cluster mode's slot check: the transaction and its
/// WATCHes end, as Redis's `discardTransaction` (no locks held).
pub fn discard_transaction(node: &Node, client: &mut Client) {
    end_multi(client);
    unwatch_all(node, client);
}

/// Releases the WATCHes `abort_while_busy` set aside (no locks held).
pub fn release_stale_watches(node: &Node, client: &mut Client) {
    unwatch_keys(node, client.stale_watches.drain(..));
}

/// Drops WATCHes, locking each key's partition in turn.
fn unwatch_keys(node: &Node, watches: impl Iterator<Item = (usize, Vec<u8>, u64)>) {
    for (db, key, _) in watches {
        node.ks.lock(node.ks.partition_of_key(&key)).unwatch(db, &key);
    }
}

fn discard(ctx: &mut Ctx<'_>, _args: &[&[u8]], out: &mut Reply) -> CmdResult {
    if ctx.client.multi.is_none() {
        return Err("ERR DISCARD without MULTI".into());
    }
    end_multi(ctx.client);
    unwatch_locked(&mut ctx.keys, ctx.client);
    out.ok();
    Ok(())
}

fn watch(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err("ERR WATCH inside MULTI is not allowed".into());
    }
    let db = ctx.keys.db;
    for key in &args[1..] {
        if ctx.client.watched.iter().any(|(d, k, _)| *d == db && k.as_slice() == *key) {
            continue;
        }
        let idx = ctx.node.ks.partition_of_key(key);
        let version = ctx.keys.with_partition(idx, |part| part.watch(db, key));
        ctx.client.watched.push((db, key.to_vec(), version));
    }
    out.ok();
    Ok(())
}

fn unwatch(ctx: &mut Ctx<'_>, _args: &[&[u8]], out: &mut Reply) -> CmdResult {
    unwatch_locked(&mut ctx.keys, ctx.client);
    out.ok();
    Ok(())
}

/// Drops the client's watches through `keys` (which may hold the locks).
fn unwatch_locked(keys: &mut KeyAccess<'_>, client: &mut Client) {
    for (db, key, _) in client.watched.drain(..) {
        let idx = keys.ks.partition_of_key(&key);
        keys.with_partition(idx, |part| part.unwatch(db, &key));
    }
}

/// Forgets every key the client WATCHes, set-aside ones included (no
/// locks held by the caller).
pub fn unwatch_all(node: &Node, client: &mut Client) {
    release_stale_watches(node, client);
    unwatch_keys(node, client.watched.drain(..));
}

const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";

fn exec(ctx: &mut Ctx<'_>, _args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let Some(queued) = ctx.client.multi.take() else {
        return Err("ERR EXEC without MULTI".into());
    };
    let dirty = ctx.client.multi_dirty;
    end_multi(ctx.client);
    if dirty {
        unwatch_locked(&mut ctx.keys, ctx.client);
        return Err(EXECABORT.into());
    }
    let node = ctx.node;
    let table = &node.table;
    // Each queued command resolved once: its flags and key positions serve
    // the checks, the locks, the disk wait and the call.
    let argvs: Vec<SmallVec<[&[u8]; 8]>> =
        queued.iter().map(|q| q.args.iter().map(|a| a.as_slice()).collect()).collect();
    let cmds: Vec<Resolved<'_>> = queued.iter().zip(&argvs).map(|(q, argv)| table.resolved(q.cmd, argv)).collect();

    // The transaction's limits, as one command's (Redis checks them when
    // queueing, and again here), before any lock is taken (eviction locks
    // partitions).
    let limits: Vec<Limits> = cmds.iter().map(|c| Limits::of(node, c)).collect();
    let grows = limits.iter().any(|l| l.grows);
    if grows && !pipeline::memory_allows(node, ctx.keys.stats, grows, true) {
        unwatch_locked(&mut ctx.keys, ctx.client);
        return Err(format!("EXECABORT Transaction discarded because of: {}", super::err::OOM).into());
    }
    if limits.iter().any(|l| l.writes) && !pipeline::replicas_allow_writes(node) {
        unwatch_locked(&mut ctx.keys, ctx.client);
        return Err(format!("EXECABORT Transaction discarded because of: {}", super::err::NOREPLICAS).into());
    }

    // Lock every partition the transaction can touch, in one ordered pass.
    let needs_all =
        cmds.iter().any(|c| matches!(c.def.keys, Keys::All) || c.def.has(flags::RUNS_SCRIPT | flags::PATTERN_KEYS));
    let ks = &node.ks;
    ctx.keys.locked = if needs_all {
        ks.lock_all()
    } else {
        let mut parts: SmallVec<[u32; 8]> =
            cmds.iter().flat_map(|c| c.keys()).map(|k| ks.partition_of_key(k)).collect();
        parts.extend(ctx.client.watched.iter().map(|(_, key, _)| ks.partition_of_key(key)));
        ks.lock_set(&mut parts)
    };

    // A queued command's key not ready in RAM: wait before anything runs,
    // then the whole EXEC runs again (the transaction is put back).
    if ks.may_pend()
        && let Some(wait) = ctx.keys.pending(cmds.iter().flat_map(|c| c.keys()))
    {
        drop(cmds);
        drop(argvs);
        ctx.client.info.multi.store(queued.len() as u32, Relaxed);
        ctx.client.multi = Some(queued);
        ctx.pending = Some(wait);
        return Ok(());
    }

    // A watched key modified since WATCH aborts the transaction.
    let touched = ctx.client.watched.iter().any(|(db, key, version)| {
        let idx = ks.partition_of_key(key);
        let part = ctx.keys.locked.get(idx);
        part.watch_version(*db, key).is_none_or(|v| v != *version)
    });
    unwatch_locked(&mut ctx.keys, ctx.client);
    if touched {
        out.null_array();
        return Ok(());
    }

    out.array(cmds.len());
    // Clients blocked on keys the transaction writes are served after the
    // last queued command, still under these locks (`pipeline::run`), so
    // the transaction sees its own pushes, as in Redis.
    ctx.in_exec = true;
    for cmd in &cmds {
        // SELECT inside the transaction changes the database for what follows.
        ctx.keys.db = ctx.client.db;
        // Permissions may have changed since the command was queued.
        if let Err(Refusal::Refused(r)) = pipeline::admit(node, ctx.worker, ctx.client, cmd, &Origin::Exec) {
            pipeline::refuse(node, ctx.worker, ctx.client, Some(cmd), cmd.args, &Origin::Exec, &r, out);
            continue;
        }
        let mark = out.len();
        let result = (cmd.def.handler)(ctx, cmd.args, out);
        pipeline::after_call(ctx, cmd, &Origin::Exec, mark, result, out, false);
    }
    ctx.in_exec = false;
    Ok(())
}
