//! Scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT, FUNCTION, FCALL
//! and FCALL_RO, on Lua 5.1 (the dialect Redis embeds, built from source by
//! mlua).
//!
//! Where things live:
//! - [`Scripts`], in the node: the script cache (SHA1 → body), the function
//!   libraries (name → code and registered functions), and the state of the
//!   script running now (for BUSY, SCRIPT KILL, FUNCTION STATS).
//! - `engine`: one Lua interpreter per worker thread, created on first use,
//!   which compiles cached scripts and libraries lazily; `redis.call` runs
//!   the real command handlers through the same table as clients do.
//!
//! Atomicity: a script locks every partition (the keyspace as a whole) for
//! its whole run, so no command of any client on any worker sees it half
//! done; inside MULTI/EXEC the transaction already holds every partition
//! (EXEC locks all of them when a script is queued).
//!
//! BUSY: while a script runs, commands that reach dispatch on another
//! worker wait for it; once it has run longer than `busy-reply-threshold`
//! they get Redis's BUSY error instead (SCRIPT KILL, FUNCTION KILL and the
//! other `allow-busy` commands still run). Connections served by the same
//! worker thread as the script cannot be answered until it ends: a worker
//! runs one command at a time.

mod cjson;
mod cmsgpack;
mod engine;
mod functions;
mod libs;
mod lstruct;
mod resp;
mod state;

use super::args::{help, subcommand};
use super::{CmdResult, CommandDef, Ctx, Keys, arg_i64, flags};
use crate::base::eq_ic;
use crate::protocol::Reply;
use smallvec::SmallVec;
use std::sync::Arc;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};

pub use state::{
    BUSY_EVAL, BUSY_FUNCTION, FunctionMeta, Library, RunState, ScriptFlags, ScriptMemory, ScriptResult, Scripts,
    WhileBusy, eval_shebang, find_function,
};

const SCRIPT_CMD: u32 = flags::NOSCRIPT | flags::STALE | flags::RUNS_SCRIPT;

pub const COMMANDS: &[CommandDef] = &[
    CommandDef::new("eval", -3, SCRIPT_CMD | flags::MAY_REPLICATE, Keys::Custom(numkeys_keys), eval)
        .acl("@slow @scripting"),
    CommandDef::new("evalsha", -3, SCRIPT_CMD | flags::MAY_REPLICATE, Keys::Custom(numkeys_keys), evalsha)
        .acl("@slow @scripting"),
    CommandDef::new("eval_ro", -3, SCRIPT_CMD | flags::READONLY, Keys::Custom(numkeys_keys), eval_ro)
        .acl("@slow @scripting"),
    CommandDef::new("evalsha_ro", -3, SCRIPT_CMD | flags::READONLY, Keys::Custom(numkeys_keys), evalsha_ro)
        .acl("@slow @scripting"),
    CommandDef::new("fcall", -3, SCRIPT_CMD | flags::MAY_REPLICATE, Keys::Custom(numkeys_keys), fcall)
        .acl("@slow @scripting"),
    CommandDef::new("fcall_ro", -3, SCRIPT_CMD | flags::READONLY, Keys::Custom(numkeys_keys), fcall_ro)
        .acl("@slow @scripting"),
    CommandDef::new("script", -2, 0, Keys::None, script).acl("@slow").subs(SCRIPT_SUBS),
    CommandDef::new("function", -2, 0, Keys::None, functions::function).acl("@slow").subs(functions::FUNCTION_SUBS),
];

/// Keys of EVAL-style commands: `numkeys` at 2, the keys after it.
fn numkeys_keys(args: &[&[u8]]) -> SmallVec<[usize; 8]> {
    let Some(n) = args.get(2).and_then(|a| crate::base::parse_i64(a)) else {
        return SmallVec::new();
    };
    if n <= 0 || n as usize > args.len().saturating_sub(3) {
        return SmallVec::new();
    }
    (3..3 + n as usize).collect()
}

/// Lower-case hex SHA1 of a script body.
pub fn sha1_hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

/// Parses EVAL's `numkeys` and splits keys from arguments.
type KeysAndArgs<'a> = (&'a [&'a [u8]], &'a [&'a [u8]]);

fn split_keys<'a>(args: &'a [&'a [u8]]) -> Result<KeysAndArgs<'a>, super::CmdError> {
    let n = arg_i64(args[2])?;
    if n < 0 {
        return Err("ERR Number of keys can't be negative".into());
    }
    let rest = &args[3..];
    if n as usize > rest.len() {
        return Err("ERR Number of keys can't be greater than number of args".into());
    }
    Ok(rest.split_at(n as usize))
}

/// Stores a body in the cache; returns its SHA1.
fn cache_script(ctx: &Ctx<'_>, body: &[u8]) -> (String, Arc<[u8]>) {
    let sha = sha1_hex(body);
    let mut cache = ctx.node.scripts.cache.lock();
    let body = cache.entry(sha.clone()).or_insert_with(|| Arc::from(body)).clone();
    (sha, body)
}

fn eval(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    eval_generic(ctx, args, out, false, false)
}

fn evalsha(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    eval_generic(ctx, args, out, true, false)
}

fn eval_ro(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    eval_generic(ctx, args, out, false, true)
}

fn evalsha_ro(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    eval_generic(ctx, args, out, true, true)
}

const NOSCRIPT_ERR: &str = "NOSCRIPT No matching script. Please use EVAL.";
const RO_WITH_WRITE: &str = "ERR Can not execute a script with write flag using *_ro command.";

/// MONITOR shows a script command before the commands its script runs
/// (once: not again when the client comes back for the result).
fn feed_monitors(ctx: &Ctx<'_>, args: &[&[u8]]) {
    if ctx.node.monitors.active() {
        super::monitor::feed(ctx.node, ctx.client, args, false);
    }
}

/// The reply of this client's script, run on the script thread, if it is done.
fn collect_result(ctx: &mut Ctx<'_>, out: &mut Reply) -> Option<CmdResult> {
    let scripts = &ctx.node.scripts;
    let id = ctx.client.info.id;
    let r = scripts.results.lock().remove(&id)?;
    Some(match r {
        Ok(bytes) => {
            out.raw(&bytes);
            Ok(())
        }
        Err((e, counted)) => {
            ctx.client.error_counted = counted;
            Err(e.into())
        }
    })
}

fn eval_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, by_sha: bool, ro_cmd: bool) -> CmdResult {
    if let Some(r) = collect_result(ctx, out) {
        return r;
    }
    feed_monitors(ctx, args);
    let (keys, argv) = split_keys(args)?;
    let (sha, body) = if by_sha {
        let given = args[1];
        if given.len() != 40 {
            return Err(NOSCRIPT_ERR.into());
        }
        let sha = String::from_utf8_lossy(given).to_ascii_lowercase();
        let found = ctx.node.scripts.cache.lock().get(&sha).cloned();
        match found {
            Some(b) => (sha, b),
            None => return Err(NOSCRIPT_ERR.into()),
        }
    } else {
        cache_script(ctx, args[1])
    };
    let shebang = eval_shebang(&body)?;
    let flags = shebang.unwrap_or_default();
    if ro_cmd && shebang.is_some() && !flags.no_writes {
        return Err(RO_WITH_WRITE.into());
    }
    let job = Job {
        target: OwnedTarget::Eval { sha, body },
        keys: keys.iter().map(|k| k.to_vec()).collect(),
        argv: argv.iter().map(|a| a.to_vec()).collect(),
        read_only: ro_cmd || flags.no_writes,
        // Without a shebang, each write command checks memory itself.
        check_oom_upfront: shebang.is_some() && !flags.allow_oom && !flags.no_writes,
        // Likewise for replicas (min-replicas-to-write).
        check_replicas_upfront: shebang.is_some() && !flags.no_writes,
        command: if ro_cmd { "eval_ro" } else { "eval" },
    };
    start(ctx, job, out)
}

enum OwnedTarget {
    Eval { sha: String, body: Arc<[u8]> },
    Function { name: String },
}

/// A script to run, owning what it needs (it may run on the script thread).
struct Job {
    target: OwnedTarget,
    keys: Vec<Vec<u8>>,
    argv: Vec<Vec<u8>>,
    read_only: bool,
    check_oom_upfront: bool,
    check_replicas_upfront: bool,
    command: &'static str,
}

impl Job {
    fn run(&self, ctx: &mut Ctx<'_>, out: &mut Reply) -> CmdResult {
        let keys: SmallVec<[&[u8]; 8]> = self.keys.iter().map(|k| k.as_slice()).collect();
        let argv: SmallVec<[&[u8]; 8]> = self.argv.iter().map(|a| a.as_slice()).collect();
        let target = match &self.target {
            OwnedTarget::Eval { sha, body } => engine::Target::Eval { sha, body },
            OwnedTarget::Function { name } => engine::Target::Function { name },
        };
        let run = engine::Run {
            target,
            keys: &keys,
            argv: &argv,
            read_only: self.read_only,
            check_oom_upfront: self.check_oom_upfront,
            check_replicas_upfront: self.check_replicas_upfront,
            command: self.command,
        };
        engine::run(ctx, run, out)
    }
}

/// Waits for a pending read on the script thread (which has no event loop
/// of its own otherwise).
fn wait_here(wait: crate::store::PendingRead) {
    SCRIPT_RT.with(|rt| match rt {
        Some(rt) => rt.block_on(wait),
        None => std::thread::sleep(std::time::Duration::from_millis(10)),
    });
}

thread_local! {
    /// The script thread's runtime: what pending reads need (timers).
    static SCRIPT_RT: Option<tokio::runtime::Runtime> =
        tokio::runtime::Builder::new_current_thread().enable_time().build().ok();
}

/// Runs `f` inside the script thread's runtime context.
fn in_runtime<R>(f: impl FnOnce() -> R) -> R {
    SCRIPT_RT.with(|rt| match rt {
        Some(rt) => {
            let _guard = rt.enter();
            f()
        }
        None => f(),
    })
}

/// Runs a script: here inside MULTI/EXEC (the transaction holds the whole
/// keyspace), else on the script thread while this client waits, so that
/// the worker goes on serving its other connections.
fn start(ctx: &mut Ctx<'_>, job: Job, out: &mut Reply) -> CmdResult {
    if ctx.in_exec || ctx.keys.locked.is_all() {
        return job.run(ctx, out);
    }
    // Let the declared keys' partitions go: the script thread takes them all.
    ctx.keys.locked = ctx.node.ks.lock_none();
    let node = ctx.node;
    // Make room first, as Redis does before any command when over
    // `maxmemory` (eviction takes partition locks: none is held here).
    // A script that still finds no room gets OOM at its first write.
    if node.maxmemory() > 0 {
        node.ensure_memory(ctx.keys.stats);
    }
    let worker = node.workers.iter().position(|w| std::ptr::eq(&**w, ctx.worker)).unwrap_or(0);
    let info = ctx.client.info.clone();
    let id = info.id;
    let (db, resp3, now_ms, touch) = (ctx.client.db, ctx.client.resp3, ctx.client.now_ms, !ctx.client.no_touch);
    // The script's commands are checked against the caller's user.
    let (user, acl_generation) = (ctx.client.user.clone(), ctx.client.acl_generation);
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    // Counted as running from now: commands arriving meanwhile wait for it.
    node.scripts.run.active.fetch_add(1, SeqCst);
    let task: super::ScriptJob = Box::new(move |node: &super::Node, server: &dyn super::ServerControl| {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut client = crate::session::client::Client::new(info.clone(), true);
            client.db = db;
            client.resp3 = resp3;
            client.now_ms = now_ms;
            client.user = user;
            client.acl_generation = acl_generation;
            let worker = &node.workers[worker.min(node.workers.len() - 1)];
            let ks = &node.ks;
            let mut out = Reply { buf: Vec::new(), resp3 };
            // Invalidations the script causes for its own client follow its reply.
            crate::session::tracking::set_current(id);
            let r = loop {
                let keys =
                    crate::store::KeyAccess { ks, locked: ks.lock_none(), db, now_ms, touch, stats: &worker.store };
                let mut ctx = Ctx::new(node, server, worker, &mut client, keys);
                let r = in_runtime(|| job.run(&mut ctx, &mut out));
                // A declared key still on disk: wait for it (no lock held
                // once the context is dropped), then run from the start.
                if let Some(wait) = ctx.pending.take() {
                    drop(ctx);
                    wait_here(wait);
                    out.buf.clear();
                    continue;
                }
                ctx.keys.serve_ready();
                drop(ctx);
                break r;
            };
            info.db.store(db as u32, Relaxed);
            node.tracking.flush_broadcasts();
            let mut own = Vec::new();
            crate::session::tracking::take_own(&mut own);
            crate::session::tracking::set_current(0);
            match r {
                Ok(()) => {
                    out.buf.extend_from_slice(&own);
                    Ok(out.buf)
                }
                Err(e) => {
                    crate::session::tracking::push_to(&info, own);
                    Err((e.0.into_owned(), client.error_counted))
                }
            }
        }));
        node.ks.flush_mem();
        node.scripts.run.active.fetch_sub(1, SeqCst);
        let result = result.unwrap_or_else(|_| Err(("ERR internal error while running the script".into(), false)));
        // Kept for the client's second run of the command, unless it is gone.
        if Arc::strong_count(&info) > 1 && !info.killed.load(Relaxed) {
            node.scripts.results.lock().insert(id, result);
        }
        let _ = done_tx.send(());
    });
    if !ctx.server.run_script_job(task) {
        node.scripts.run.active.fetch_sub(1, SeqCst);
        return Err("ERR the script thread is not running".into());
    }
    ctx.pending = Some(Box::pin(async move {
        let _ = done_rx.await;
    }));
    Ok(())
}

fn fcall(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    fcall_generic(ctx, args, out, false)
}

fn fcall_ro(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    fcall_generic(ctx, args, out, true)
}

fn fcall_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, ro_cmd: bool) -> CmdResult {
    if let Some(r) = collect_result(ctx, out) {
        return r;
    }
    feed_monitors(ctx, args);
    let name = String::from_utf8_lossy(args[1]).into_owned();
    let Some((_lib, flags)) = find_function(&ctx.node.scripts, &name) else {
        return Err("ERR Function not found".into());
    };
    if crate::base::parse_i64(args[2]).is_none() {
        return Err("ERR Bad number of keys provided".into());
    }
    let (keys, argv) = split_keys(args)?;
    if ro_cmd && !flags.no_writes {
        return Err(RO_WITH_WRITE.into());
    }
    let job = Job {
        target: OwnedTarget::Function { name },
        keys: keys.iter().map(|k| k.to_vec()).collect(),
        argv: argv.iter().map(|a| a.to_vec()).collect(),
        read_only: ro_cmd || flags.no_writes,
        check_oom_upfront: !flags.allow_oom && !flags.no_writes,
        check_replicas_upfront: !flags.no_writes,
        command: if ro_cmd { "fcall_ro" } else { "fcall" },
    };
    start(ctx, job, out)
}

const SCRIPT_SUBS: &[&str] = &["exists", "flush", "kill", "load", "help"];

const SCRIPT_HELP: &[&str] = &[
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
    "HELP",
    "    Prints this help.",
];

fn script(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let scripts = &ctx.node.scripts;
    match subcommand("script", SCRIPT_SUBS, args)? {
        "exists" => {
            let cache = scripts.cache.lock();
            out.array(args.len() - 2);
            for a in &args[2..] {
                let sha = String::from_utf8_lossy(a).to_ascii_lowercase();
                out.int(cache.contains_key(&sha) as i64);
            }
        }
        "flush" => {
            if args.len() > 3 || (args.len() == 3 && !eq_ic(args[2], "sync") && !eq_ic(args[2], "async")) {
                return Err("ERR SCRIPT FLUSH only support SYNC|ASYNC option".into());
            }
            scripts.cache.lock().clear();
            scripts.cache_gen.fetch_add(1, SeqCst);
            out.ok();
        }
        "kill" => {
            scripts.kill(false)?;
            out.ok();
        }
        "load" => {
            let body = args[2];
            // A bad shebang is refused at load time too.
            eval_shebang(body)?;
            engine::check_compiles(ctx, body)?;
            let (sha, _) = cache_script(ctx, body);
            out.bulk(sha.as_bytes());
        }
        _ => help(out, SCRIPT_HELP),
    }
    Ok(())
}
