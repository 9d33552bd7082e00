//! From a parsed request to a reply: lookup, arity, auth, MULTI queueing,
//! pub/sub context, memory limit, partition locking, execution, metrics.

use super::Node;
use super::pause::{self, PauseMode};
use super::scripting::WhileBusy;
use super::{BlockRequest, CmdError, CommandDef, Ctx, Keys, ServerControl, err, flags};
use crate::config::Protected;
use crate::metrics::WorkerMetrics;
use crate::protocol::Reply;
use crate::session::client::{Client, Queued};
use crate::session::tracking;
use crate::store::{KeyAccess, PendingRead};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;

/// Every command, indexed by lower-case name.
pub struct CommandTable {
    defs: Vec<&'static CommandDef>,
    by_name: HashMap<&'static [u8], usize, foldhash::fast::FixedState>,
    /// Statistics slots, as INFO commandstats names them: one per command
    /// (slot = table index), then one per subcommand (`container|sub`).
    slot_names: Vec<&'static str>,
    /// Per command, its subcommands: name, slot and arity (None when
    /// the handler checks it).
    sub_slots: Vec<Vec<(&'static str, usize, Option<i32>)>>,
}

impl Default for CommandTable {
    fn default() -> Self {
        Self::new()
    }
}

impl CommandTable {
    pub fn new() -> Self {
        let defs = super::all_commands();
        let mut by_name = HashMap::with_capacity_and_hasher(defs.len() * 2, Default::default());
        for (i, d) in defs.iter().enumerate() {
            let prev = by_name.insert(d.name.as_bytes(), i);
            assert!(prev.is_none(), "command {} registered twice", d.name);
        }
        let mut slot_names: Vec<&'static str> = defs.iter().map(|d| d.name).collect();
        let mut sub_slots = vec![Vec::new(); defs.len()];
        for (i, d) in defs.iter().enumerate() {
            for &sub in d.subcommands {
                let full = format!("{}|{sub}", d.name);
                // The metadata's name when there is one; else built once, at start-up.
                let meta = super::command_meta::sub_def(&full);
                let name = meta.map_or_else(|| &*full.leak(), |s| s.name);
                sub_slots[i].push((sub, slot_names.len(), meta.map(|s| s.arity)));
                slot_names.push(name);
            }
        }
        CommandTable { defs, by_name, slot_names, sub_slots }
    }

    /// How many statistics slots commands and subcommands take.
    pub fn stat_slots(&self) -> usize {
        self.slot_names.len()
    }

    /// `get`, or `client|list` for a subcommand's slot.
    pub fn slot_name(&self, slot: usize) -> &'static str {
        self.slot_names[slot]
    }

    /// The statistics slot of a call: the subcommand's for a container
    /// given one it has, None for one it has not (Redis counts no command
    /// then), else the command's own.
    #[inline]
    pub fn stat_slot(&self, idx: usize, args: &[&[u8]]) -> Option<usize> {
        let subs = &self.sub_slots[idx];
        if subs.is_empty() || args.len() < 2 {
            return Some(idx);
        }
        subs.iter().find(|(name, ..)| args[1].eq_ignore_ascii_case(name.as_bytes())).map(|&(_, slot, _)| slot)
    }

    /// A subcommand's arity error (`client|setname`), checked before it runs as Redis does.
    #[inline]
    fn sub_arity_error(&self, idx: usize, args: &[&[u8]]) -> Option<String> {
        let subs = &self.sub_slots[idx];
        if subs.is_empty() || args.len() < 2 {
            return None;
        }
        let &(_, slot, arity) = subs.iter().find(|(name, ..)| args[1].eq_ignore_ascii_case(name.as_bytes()))?;
        let arity = arity?;
        (!arity_ok(arity, args.len())).then(|| err::arity(self.slot_names[slot]))
    }

    /// The slots of a command given by name as `cmd` or `container|sub`
    /// (LATENCY HISTOGRAM): its own, then its subcommands'.
    pub fn slots_named(&self, name: &[u8]) -> Vec<usize> {
        let (cmd, sub) = match name.iter().position(|&b| b == b'|') {
            Some(i) => (&name[..i], Some(&name[i + 1..])),
            None => (name, None),
        };
        let Some(idx) = self.lookup(cmd) else { return Vec::new() };
        match sub {
            None => std::iter::once(idx).chain(self.sub_slots[idx].iter().map(|&(_, slot, _)| slot)).collect(),
            Some(sub) => self.sub_slots[idx]
                .iter()
                .filter(|(n, ..)| sub.eq_ignore_ascii_case(n.as_bytes()))
                .map(|&(_, s, _)| s)
                .collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.defs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }

    pub fn get(&self, idx: usize) -> &'static CommandDef {
        self.defs[idx]
    }

    pub fn iter(&self) -> impl Iterator<Item = (usize, &'static CommandDef)> + '_ {
        self.defs.iter().copied().enumerate()
    }

    /// Case-insensitive lookup without allocating.
    #[inline]
    pub fn lookup(&self, name: &[u8]) -> Option<usize> {
        let mut buf = [0u8; 32];
        if name.len() > buf.len() {
            return None;
        }
        for (d, s) in buf.iter_mut().zip(name) {
            *d = s.to_ascii_lowercase();
        }
        self.by_name.get(&buf[..name.len()]).copied()
    }
}

/// What the connection must do after a command.
pub enum Outcome {
    Done,
    /// The client blocks (BLPOP & co.); the connection waits for a push to
    /// serve it, or for its deadline.
    Block(BlockRequest),
    /// The command did not run: some of its keys are not ready (a disk
    /// read). The connection awaits this, then runs the same request again.
    Pending(PendingRead),
}

/// Redis's reply for an unknown command. As its `processCommand`: the name
/// and the arguments are C strings (cut at a NUL), the name is cut at 128
/// bytes, and arguments are quoted only while the list is under 128 bytes,
/// each cut to what is left of those 128 — a huge request gets a short error.
fn unknown_command(args: &[&[u8]]) -> Vec<u8> {
    const QUOTED_MAX: usize = 128;
    let c_str = |a: &[u8], max: usize| -> Vec<u8> {
        let a = &a[..a.iter().position(|&b| b == 0).unwrap_or(a.len())];
        a[..a.len().min(max)].to_vec()
    };
    let mut quoted = Vec::new();
    for a in args.iter().skip(1) {
        if quoted.len() >= QUOTED_MAX {
            break;
        }
        let room = QUOTED_MAX - quoted.len();
        quoted.push(b'\'');
        quoted.extend_from_slice(&c_str(a, room));
        quoted.extend_from_slice(b"' ");
    }
    let mut s = b"ERR unknown command '".to_vec();
    s.extend_from_slice(&c_str(args[0], QUOTED_MAX));
    s.extend_from_slice(b"', with args beginning with: ");
    s.extend_from_slice(&quoted);
    s
}

/// Redis's refusal of DEBUG when `enable-debug-command` does not allow the client.
const PROTECTED_REFUSED: &str = "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", \
     you can run it from a local connection, otherwise you need to set this option in the configuration file, and \
     then restart the server.";

/// Whether a protected command may run for this client: `local` admits, as
/// Redis does, Unix-socket clients and those from 127.0.0.1 or ::1.
fn protected_allowed(setting: Protected, client: &Client) -> bool {
    match setting {
        Protected::Yes => true,
        Protected::No => false,
        // A Unix socket's peer is shown as `path:0`, which is no IP address.
        Protected::Local => match client.info.addr.parse::<std::net::SocketAddr>() {
            Ok(peer) => {
                let ip = peer.ip();
                ip == std::net::Ipv4Addr::LOCALHOST || ip == std::net::Ipv6Addr::LOCALHOST
            }
            Err(_) => true,
        },
    }
}

/// True when the arity allows `n` arguments.
#[inline]
pub fn arity_ok(arity: i32, n: usize) -> bool {
    if arity >= 0 { n == arity as usize } else { n >= (-arity) as usize }
}

/// Executes one request and appends its reply to `out`.
pub fn execute(
    shared: &Node,
    server: &dyn ServerControl,
    worker: &WorkerMetrics,
    client: &mut Client,
    args: &[&[u8]],
    out: &mut Reply,
) -> Outcome {
    tracking::set_current(client.info.id);
    let outcome = execute_request(shared, server, worker, client, args, out);
    // The invalidations it caused for this client are taken by the
    // connection after the reply (`tracking::take_own`): CLIENT REPLY OFF
    // drops the reply, not those pushes.
    shared.tracking.flush_broadcasts();
    tracking::set_current(0);
    if matches!(outcome, Outcome::Pending(_)) {
        // Not run yet: what it caused so far goes out now.
        tracking::take_own(&mut out.buf);
    }
    // CLIENT CACHING lasts for one command (or one transaction).
    let mode = client.info.tracking.load(Relaxed);
    if mode & tracking::mode::CACHING != 0 && client.multi.is_none() && !crate::base::eq_ic(args[0], "client") {
        client.info.tracking.fetch_and(!tracking::mode::CACHING, Relaxed);
    }
    outcome
}

fn execute_request(
    shared: &Node,
    server: &dyn ServerControl,
    worker: &WorkerMetrics,
    client: &mut Client,
    args: &[&[u8]],
    out: &mut Reply,
) -> Outcome {
    let table = &shared.table;
    // The tracking table over `tracking-table-max-keys`: invalidate some.
    let max_tracked = shared.config.runtime.tracking_table_max_keys.load(Relaxed) as usize;
    if max_tracked > 0 && shared.ks.tracked_keys() > max_tracked {
        shared.ks.limit_tracked(max_tracked);
        tracking::take_own(&mut out.buf);
    }
    let last = client.last_lookup;
    let cached = last != usize::MAX && table.get(last).name.as_bytes().eq_ignore_ascii_case(args[0]);
    let found = if cached { Some(last) } else { table.lookup(args[0]) };
    let Some(idx) = found else {
        if client.multi.is_some() {
            client.multi_dirty = true;
        }
        let msg = unknown_command(args);
        worker.errors.record(&msg);
        out.error(&msg);
        return Outcome::Done;
    };
    client.last_lookup = idx;
    let def = table.get(idx);
    // A container's unknown subcommand is counted nowhere, as in Redis.
    let stat = table.stat_slot(idx, args).map(|slot| &worker.cmds[slot]);
    if !arity_ok(def.arity, args.len()) {
        if client.multi.is_some() {
            client.multi_dirty = true;
        }
        reject(stat);
        refuse(worker, out, &err::arity(def.name));
        return Outcome::Done;
    }
    if let Some(e) = table.sub_arity_error(idx, args) {
        if client.multi.is_some() {
            client.multi_dirty = true;
        }
        reject(stat);
        refuse(worker, out, &e);
        return Outcome::Done;
    }
    // Authentication is needed while the default user has a password or is
    // off (checked only for clients that have not authenticated).
    if !client.authenticated && !def.has(flags::NO_AUTH) && shared.config.runtime.has_password.load(Relaxed) {
        if client.multi.is_some() {
            client.multi_dirty = true;
        }
        reject(stat);
        refuse(worker, out, err::NOAUTH);
        return Outcome::Done;
    }
    if def.has(flags::PROTECTED) && !protected_allowed(shared.config.startup.enable_debug_command, client) {
        if client.multi.is_some() {
            client.multi_dirty = true;
        }
        reject(stat);
        refuse(worker, out, PROTECTED_REFUSED);
        return Outcome::Done;
    }
    if let Err(denial) = super::acl::check(shared, client, idx, args) {
        let context = if client.multi.is_some() { "multi" } else { "toplevel" };
        if client.multi.is_some() {
            client.multi_dirty = true;
        }
        reject(stat);
        super::acl::log_denial(shared, client, &denial, context, args);
        refuse(worker, out, &super::acl::noperm(shared, &denial));
        return Outcome::Done;
    }
    if let Some(p) = &shared.persist {
        if p.is_loading() && !def.has(flags::LOADING) {
            if client.multi.is_some() {
                client.multi_dirty = true;
            }
            reject(stat);
            refuse(worker, out, "LOADING Redis is loading the dataset in memory");
            return Outcome::Done;
        }
    }
    if client.monitor && super::monitor::refuses(def.flags) {
        if client.multi.is_some() {
            client.multi_dirty = true;
        }
        reject(stat);
        refuse(worker, out, super::monitor::REFUSED);
        return Outcome::Done;
    }
    // CLIENT PAUSE: as Redis, before queueing in MULTI too.
    let paused = shared.pause.mode(client.now_ms);
    if paused != PauseMode::Off
        && (paused == PauseMode::All || pause::holds_back(shared, client.multi.as_deref(), def, args))
    {
        return Outcome::Pending(pause::wait_for_unpause(shared.pause.clone(), client.info.clone()));
    }
    // A script is running: wait for it (the worker serves others meanwhile),
    // or get BUSY once it has run past `busy-reply-threshold` — before
    // queueing, as Redis: a command refused inside MULTI fails the
    // transaction, and a refused EXEC ends it.
    if shared.scripts.active() && !allows_busy(def, args) && !shared.scripts.has_result(client.info.id) {
        let threshold = shared.config.runtime.busy_reply_threshold.load(Relaxed);
        match shared.scripts.while_busy(threshold) {
            WhileBusy::Busy(e) => {
                reject(stat);
                if client.multi.is_some() {
                    if def.name == "exec" {
                        super::transactions::abort_while_busy(client);
                        refuse(worker, out, &format!("EXECABORT Transaction discarded because of: {e}"));
                        return Outcome::Done;
                    }
                    client.multi_dirty = true;
                }
                refuse(worker, out, e);
                return Outcome::Done;
            }
            WhileBusy::Wait(wait) => return Outcome::Pending(wait),
        }
    }
    if !client.stale_watches.is_empty() && !shared.scripts.active() {
        super::transactions::release_stale_watches(shared, client);
    }
    if client.multi.is_some() && !def.has(flags::NO_QUEUE) {
        return queue(shared, worker, client, idx, def, args, out);
    }
    if client.in_pubsub() && !client.resp3 && !def.has(flags::PUBSUB_CTX) {
        reject(stat);
        let msg = format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            full_name(def, args)
        );
        refuse(worker, out, &msg);
        return Outcome::Done;
    }
    // A script that declares flags is the write (and memory-growing)
    // command they say, as Redis's getCommandFlags has it.
    // Looked up only when a limit could refuse it (EVALSHA's lookup takes
    // the script cache's lock).
    let limited = shared.maxmemory() > 0 || shared.config.runtime.lacks_good_replicas();
    let declared = if def.has(flags::RUNS_SCRIPT) && limited {
        super::scripting::declared_flags(shared, def.name, args)
    } else {
        None
    };
    let writes = def.has(flags::WRITE) || declared.is_some_and(|f| !f.no_writes);
    let grows = def.has(flags::DENYOOM) || declared.is_some_and(|f| !f.no_writes && !f.allow_oom);
    if grows {
        if !shared.ensure_memory(&worker.store) {
            reject(stat);
            refuse(worker, out, err::OOM);
            return Outcome::Done;
        }
    } else if shared.maxmemory() > 0 {
        // As Redis, any command makes room when over the limit (a read
        // after a big write evicts); only growing commands are refused.
        shared.ensure_memory(&worker.store);
    }
    // No replica could take the write (min-replicas-to-write).
    if writes && shared.config.runtime.lacks_good_replicas() {
        reject(stat);
        refuse(worker, out, err::NOREPLICAS);
        return Outcome::Done;
    }
    // Keys evicted for this command: their invalidations precede its reply.
    tracking::take_own(&mut out.buf);
    client.info.last_cmd.store(idx as u32, Relaxed);
    run(shared, server, worker, client, idx, args, out, false)
}

/// Replies with an error, counted in INFO errorstats.
#[inline]
fn refuse(worker: &WorkerMetrics, out: &mut Reply, msg: &(impl crate::protocol::ErrorText + ?Sized)) {
    worker.errors.record(msg.text());
    out.error(msg);
}

/// Counts a call refused before it ran.
#[inline]
fn reject(stat: Option<&crate::metrics::CmdStat>) {
    if let Some(s) = stat {
        s.reject();
    }
}

/// The name Redis reports for a request: `container|sub` for a known
/// subcommand, else the command's own.
fn full_name(def: &CommandDef, args: &[&[u8]]) -> String {
    if !def.subcommands.is_empty() && args.len() >= 2 {
        let sub = String::from_utf8_lossy(args[1]).to_ascii_lowercase();
        if def.subcommands.contains(&sub.as_str()) {
            return format!("{}|{sub}", def.name);
        }
    }
    def.name.to_string()
}

/// Whether a command runs while a script is busy (SCRIPT KILL, FUNCTION
/// KILL, FUNCTION STATS, ...): its flag, or its subcommand's.
fn allows_busy(def: &CommandDef, args: &[&[u8]]) -> bool {
    if def.has(flags::ALLOW_BUSY) {
        return true;
    }
    if def.subcommands.is_empty() || args.len() < 2 {
        return false;
    }
    let full = format!("{}|{}", def.name, String::from_utf8_lossy(args[1]).to_ascii_lowercase());
    super::command_meta::sub_def(&full).is_some_and(|s| s.flags & flags::ALLOW_BUSY != 0)
}

/// Inside MULTI: validate and queue.
fn queue(
    shared: &Node,
    worker: &WorkerMetrics,
    client: &mut Client,
    idx: usize,
    def: &CommandDef,
    args: &[&[u8]],
    out: &mut Reply,
) -> Outcome {
    let stat = shared.table.stat_slot(idx, args).map(|slot| &worker.cmds[slot]);
    if def.has(flags::NO_MULTI) {
        client.multi_dirty = true;
        reject(stat);
        refuse(worker, out, "ERR Command not allowed inside a transaction");
        return Outcome::Done;
    }
    // Redis refuses to queue memory-growing commands when over the limit.
    if def.has(flags::DENYOOM) && shared.maxmemory() > 0 && shared.used_memory_for_eviction() > shared.maxmemory() {
        client.multi_dirty = true;
        reject(stat);
        refuse(worker, out, err::OOM);
        return Outcome::Done;
    }
    if def.has(flags::WRITE) && shared.config.runtime.lacks_good_replicas() {
        client.multi_dirty = true;
        reject(stat);
        refuse(worker, out, err::NOREPLICAS);
        return Outcome::Done;
    }
    let queued = client.multi.as_mut().expect("in multi");
    queued.push(Queued { cmd: idx, args: args.iter().map(|a| a.to_vec()).collect() });
    client.info.multi.store(queued.len() as u32, Relaxed);
    out.simple("QUEUED");
    Outcome::Done
}

/// Locks the command's partitions and runs its handler.
#[allow(clippy::too_many_arguments)]
pub fn run(
    shared: &Node,
    server: &dyn ServerControl,
    worker: &WorkerMetrics,
    client: &mut Client,
    idx: usize,
    args: &[&[u8]],
    out: &mut Reply,
    in_exec: bool,
) -> Outcome {
    let def = shared.table.get(idx);
    let ks = &shared.ks;
    let locked = match def.keys {
        Keys::None | Keys::All => ks.lock_none(),
        // Most commands name one key: lock its partition without building
        // position and partition lists.
        Keys::Range(first, last, step) if single_key(first, last, step, args.len()) => {
            ks.lock_one(ks.partition_of_key(args[first as usize]))
        }
        _ => {
            let mut parts: SmallVec<[u32; 8]> =
                def.key_positions(args).iter().map(|&i| ks.partition_of_key(args[i])).collect();
            ks.lock_set(&mut parts)
        }
    };
    let mark = out.len();
    let mut ctx = Ctx {
        keys: KeyAccess {
            ks,
            locked,
            db: client.db,
            now_ms: client.now_ms,
            touch: !client.no_touch,
            stats: &worker.store,
        },
        client,
        shared,
        server,
        worker,
        in_exec,
        in_script: false,
        block: None,
        pending: None,
    };
    // Keys not ready in RAM: nothing runs, nothing is recorded; the
    // connection waits and comes back with the same request.
    if ks.may_pend() {
        let keys = def.key_positions(args).into_iter().map(|i| args[i]);
        if let Some(wait) = ctx.keys.pending_for(keys, reads_values(def.name, args)) {
            return Outcome::Pending(wait);
        }
    }
    let result = (def.handler)(&mut ctx, args, out);
    remember_keys(&mut ctx, def, args);
    if let Some(wait) = ctx.pending.take() {
        // The handler (EXEC) found a key not ready before changing anything.
        debug_assert!(result.is_ok() && out.len() == mark, "a pending command must not reply");
        return Outcome::Pending(wait);
    }
    // Clients blocked on keys this command (or EXEC) wrote are served now,
    // before its locks are released: nobody else sees the data in between.
    ctx.keys.serve_ready();
    let block = ctx.block.take();
    drop(ctx);
    let nanos = finish(shared, worker, client, idx, args, mark, result, out);
    // A blocked command is logged as Redis logs it: when it is served.
    if block.is_none() {
        record_slow(shared, client, idx, args, nanos);
    }
    feed_monitors(shared, client, def, args);
    match block {
        Some(b) => Outcome::Block(b),
        None => Outcome::Done,
    }
}

/// CLIENT TRACKING: remembers the keys a read-only command read, so that
/// the client hears when they change (Redis's `trackingRememberKeys`).
/// Scripts track their declared keys when they call a read-only command.
#[inline]
pub fn remember_keys(ctx: &mut Ctx<'_>, def: &CommandDef, args: &[&[u8]]) {
    if !def.has(flags::READONLY) || def.has(flags::PUBSUB) || def.has(flags::RUNS_SCRIPT) {
        return;
    }
    if tracks_reads(ctx.client) {
        let positions = def.key_positions(args);
        track_keys(ctx, positions.iter().map(|&i| args[i]));
    }
}

/// Whether this client's next reads are tracked: tracking on, not BCAST,
/// and CLIENT CACHING agreeing with OPTIN / OPTOUT.
#[inline]
pub fn tracks_reads(client: &Client) -> bool {
    let mode = client.info.tracking.load(Relaxed);
    if mode & tracking::mode::ON == 0 || mode & tracking::mode::BCAST != 0 {
        return false;
    }
    let caching = mode & tracking::mode::CACHING != 0;
    !((mode & tracking::mode::OPTIN != 0 && !caching) || (mode & tracking::mode::OPTOUT != 0 && caching))
}

/// Adds `keys` to the tracking table for this client.
pub fn track_keys<'k>(ctx: &mut Ctx<'_>, keys: impl Iterator<Item = &'k [u8]>) {
    let (ks, id) = (ctx.keys.ks, ctx.client.info.id);
    for key in keys {
        ctx.keys.with_partition(ks.partition_of_key(key), |part| part.track(ks, key, id));
    }
}

/// True when a key range names exactly one key, at `first`, among `n` arguments.
#[inline]
fn single_key(first: i32, last: i32, step: i32, n: usize) -> bool {
    let last = if last < 0 { n as i32 + last } else { last };
    step > 0 && first > 0 && (first as usize) < n && last == first
}

/// MONITOR: shows a command that ran. Scripts show themselves when they
/// start; admin commands never. One relaxed load while nobody monitors.
#[inline]
pub fn feed_monitors(shared: &Node, client: &Client, def: &CommandDef, args: &[&[u8]]) {
    if shared.monitors.active() && !def.has(flags::RUNS_SCRIPT) && !is_admin(def, args) {
        super::monitor::feed(shared, client, args, false);
    }
}

/// Whether the command, or its subcommand (CONFIG GET, CLIENT KILL, ...), is an admin one.
fn is_admin(def: &CommandDef, args: &[&[u8]]) -> bool {
    if def.has(flags::ADMIN) {
        return true;
    }
    if def.subcommands.is_empty() || args.len() < 2 {
        return false;
    }
    let full = format!("{}|{}", def.name, String::from_utf8_lossy(args[1]).to_ascii_lowercase());
    super::command_meta::sub_def(&full).is_some_and(|s| s.flags & flags::ADMIN != 0)
}

/// SLOWLOG and LATENCY: a command that ran `nanos`. Only relaxed loads of
/// the thresholds unless it was slow.
#[inline]
pub fn record_slow(shared: &Node, client: &Client, idx: usize, args: &[&[u8]], nanos: u64) {
    let def = shared.table.get(idx);
    let rt = &shared.config.runtime;
    if !super::slowlog::skips_slowlog(def) {
        shared.slowlog.record_if_slow(rt, client, args, nanos / 1000);
    }
    shared.latency.record_if_needed(rt, super::slowlog::latency_event(def), nanos / 1_000_000);
}

/// Writes an error result and records the call and its latency; returns
/// how long the command took (ns).
#[allow(clippy::too_many_arguments)]
pub fn finish(
    shared: &Node,
    worker: &WorkerMetrics,
    client: &mut Client,
    idx: usize,
    args: &[&[u8]],
    mark: usize,
    result: Result<(), CmdError>,
    out: &mut Reply,
) -> u64 {
    let failed = match result {
        Ok(()) => false,
        Err(e) => {
            // A handler that fails must not leave half a reply behind.
            out.truncate(mark);
            if !std::mem::take(&mut client.error_counted) {
                worker.errors.record(e.0.as_bytes());
            }
            out.error(&e.0);
            true
        }
    };
    let end = crate::store::mono_ns();
    let nanos = end.saturating_sub(client.clock_mark_ns);
    client.clock_mark_ns = end;
    if let Some(slot) = shared.table.stat_slot(idx, args) {
        let stat = &worker.cmds[slot];
        stat.record(nanos, failed);
        if shared.config.runtime.latency_tracking.load(Relaxed) {
            stat.track(nanos);
        }
    }
    crate::metrics::ServerStats::add(&worker.server.commands, 1);
    nanos
}

/// Whether a command may read the values of its keys: DEL and UNLINK never
/// do, nor does SET without GET (it replaces whatever is there), so a value
/// on disk only is not read back for them.
fn reads_values(name: &str, args: &[&[u8]]) -> bool {
    match name {
        "del" | "unlink" => false,
        "set" => args[3..].iter().any(|a| a.eq_ignore_ascii_case(b"get")),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The single-key locking shortcut must pick exactly what the general
    /// key-position walk would, for every ranged command and argument count.
    #[test]
    fn single_key_shortcut_matches_key_positions() {
        let table = CommandTable::new();
        let args_pool: Vec<&[u8]> = vec![b"cmd", b"a", b"b", b"c", b"d", b"e", b"f"];
        let mut shortcut_used = 0;
        for (_, def) in table.iter() {
            let Keys::Range(first, last, step) = def.keys else { continue };
            for n in 1..=args_pool.len() {
                let args = &args_pool[..n];
                if single_key(first, last, step, n) {
                    shortcut_used += 1;
                    assert_eq!(def.key_positions(args).as_slice(), &[first as usize], "{} with {n} args", def.name);
                }
            }
        }
        assert!(shortcut_used > 0);
    }

    #[test]
    fn no_command_name_is_too_long_to_look_up() {
        // The per-client cache compares names directly; `lookup` only sees
        // names of up to 32 bytes. Both must agree on every command.
        let table = CommandTable::new();
        for (i, def) in table.iter() {
            assert_eq!(table.lookup(def.name.to_ascii_uppercase().as_bytes()), Some(i), "{}", def.name);
        }
    }
}
