//! One command pipeline. Every command — sent by a client, queued by MULTI,
//! run by EXEC, or called by a script — passes the same stages:
//!
//! 1. **resolve** (`table.rs`): its command, subcommand and key positions,
//!    found once;
//! 2. **admit** (`admit`): the gates that may refuse it or make it wait, in
//!    Redis's order. Which gates apply, and how a refusal is worded and
//!    counted, depends on where the command comes from (`Origin`); that is
//!    data (`Origin::gates`, `Refused::message`, `account`), not a code path
//!    per origin;
//! 3. **call** (`run` for a client's command, which takes its partitions'
//!    locks; EXEC and scripts call under the locks they hold): the handler,
//!    then `after_call` — CLIENT TRACKING, `finish` (error reply, command
//!    statistics, latency), the slow log and MONITOR.
//!
//! Cluster mode's slot check (MOVED, CROSSSLOT, CLUSTERDOWN, forwarding) is
//! `Gate::Slot`, right after `Acl`, as Redis checks the redirect after ACL.
//! The wait for the durable point of `sync` durability belongs in
//! `after_call`, the one place every reply passes.

use super::acl::{self, Denial};
use super::scripting::WhileBusy;
use super::table::{ArityError, Resolved};
use super::{BlockRequest, CmdError, CommandDef, Ctx, Keys, Node, ServerControl, err, flags};
use crate::config::Protected;
use crate::metrics::WorkerMetrics;
use crate::protocol::Reply;
use crate::session::client::{Client, PortKind};
use crate::session::pause::{self, PauseMode};
use crate::session::tracking;
use crate::store::{KeyAccess, PendingRead, ServedOnce, StoreStats};
use smallvec::SmallVec;
use std::borrow::Cow;
use std::sync::atomic::Ordering::Relaxed;

/// What the connection must do after a command.
pub enum Outcome {
    Done,
    /// The client blocks (BLPOP & co.); the connection waits for a push to
    /// serve it, or for its deadline.
    Block(BlockRequest),
    /// The command did not run: some of its keys are not ready (a disk
    /// read, CLIENT PAUSE, a busy script). The connection awaits this, then
    /// runs the same request again.
    Pending(PendingRead),
    /// Cluster mode, plain port: the command's slot is another node's; the
    /// connection sends it there and relays the reply in its place.
    Forward(Forward),
    /// Cluster mode, plain port: a command about the whole node (FLUSHALL,
    /// SCRIPT LOAD, DBSIZE, ...) ran here; the connection runs it on the
    /// other nodes too and combines the replies, so that a plain client
    /// sees one cache.
    FanOut(FanOut),
}

/// Where a fanned-out command also goes, and how replies combine.
#[derive(Debug, Clone)]
pub struct FanOut {
    /// The other nodes' admin ports, `ip:port`.
    pub addrs: Vec<std::sync::Arc<str>>,
    /// DBSIZE: the integers add up. Otherwise the local reply stands unless
    /// another node answered with an error.
    pub sum: bool,
}

/// Commands a plain client sends about "the server" that, in cluster mode,
/// must reach every node: (command, subcommand or "" for any, sums).
const FAN_OUT: &[(&str, &str, bool)] = &[
    ("flushall", "", false),
    ("flushdb", "", false),
    ("dbsize", "", true),
    ("script", "load", false),
    ("script", "flush", false),
    ("function", "load", false),
    ("function", "delete", false),
    ("function", "flush", false),
    ("function", "restore", false),
];

/// Cluster mode: where a client's command must run now (a blocked command
/// about to run again after the topology changed): here (Ok), elsewhere
/// (Forward), or refused (MOVED, CLUSTERDOWN).
pub fn slot_check(node: &Node, client: &Client, cmd: &Resolved<'_>) -> Result<(), Refusal> {
    match node.cluster.as_ref() {
        Some(c) => slot_gate(node, c, client, cmd, &Origin::Client),
        None => Ok(()),
    }
}

/// Whether a client's command, just run here, fans out to the other nodes.
pub fn fan_out(node: &Node, client: &Client, cmd: &Resolved<'_>) -> Option<FanOut> {
    // Every command of the list names no key (or all of them): a keyed one
    // (most commands) is done with at the first test.
    if !matches!(cmd.def.keys, Keys::None | Keys::All) || client.port != PortKind::Plain || client.multi.is_some() {
        return None;
    }
    let c = node.cluster.as_ref()?;
    let &(_, _, sum) = FAN_OUT.iter().find(|&&(name, sub, _)| {
        name == cmd.def.name
            && (sub.is_empty() || cmd.args.get(1).is_some_and(|a| a.eq_ignore_ascii_case(sub.as_bytes())))
    })?;
    let addrs = c.with(|t| {
        t.map(|t| {
            t.members
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != t.myself)
                .map(|(_, m)| m.admin_addr.clone())
                .collect::<Vec<_>>()
        })
    })?;
    (!addrs.is_empty()).then_some(FanOut { addrs, sum })
}

/// Where a command (or a transaction) for another node's slot goes.
#[derive(Debug, Clone)]
pub struct Forward {
    /// The owner's admin port, `ip:port`.
    pub addr: std::sync::Arc<str>,
    /// The command's slot (its first key's): where it goes again if the
    /// owner cannot be reached (a restarted owner may have a new address).
    pub slot: u16,
    /// EXEC: the queued transaction goes as MULTI, its commands, EXEC.
    pub transaction: bool,
    /// A blocking command: on a connection of its own, so that it holds
    /// up nobody else's forwarded commands while it waits.
    pub dedicated: bool,
    /// A read-only command (not EXEC): running it twice changes nothing.
    pub read_only: bool,
}

/// Where a command comes from: decides which gates it passes and how a
/// refusal reads.
#[derive(Clone, Copy)]
pub enum Origin<'s> {
    /// Sent by a client and run now (MULTI's own commands included).
    Client,
    /// Sent by a client inside MULTI: checked, then queued.
    Queue,
    /// Queued earlier, run by EXEC (which admitted the batch as a whole).
    Exec,
    /// Called by a running script (`redis.call`).
    Script(&'s ScriptCall<'s>),
}

/// What the gates and `after_call` know of a script calling a command.
pub struct ScriptCall<'s> {
    /// Declared `no-writes` (or run by EVAL_RO & co.).
    pub read_only: bool,
    /// The script has written: it can no longer be refused for want of
    /// replicas (it cannot fail half-way).
    pub wrote: bool,
    /// Its declared keys: CLIENT TRACKING tracks them when it reads.
    pub declared: &'s [&'s [u8]],
}

/// One check that may refuse a command, or make it wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gate {
    /// The command's arity, then its subcommand's.
    Arity,
    /// Authentication while the default user has a password (or is off).
    Auth,
    /// DEBUG & co. under `enable-debug-command`.
    Protected,
    Acl,
    /// Only LOADING commands while the durability log replays.
    Loading,
    /// A MONITOR client may not touch keys.
    Monitor,
    /// CLIENT PAUSE: wait.
    Pause,
    /// A script holds the keyspace: wait, or BUSY past the threshold.
    Busy,
    /// WATCH & co. are refused inside MULTI.
    NoMulti,
    /// RESP2 subscribed mode allows only (P|S)SUBSCRIBE & co.
    PubSubContext,
    /// Commands scripts may not call.
    NoScript,
    /// A read-only script may not write.
    ReadOnlyScript,
    /// Over maxmemory: evict, and refuse what grows memory if that fails.
    MemoryEvict,
    /// Over maxmemory: refuse what grows memory (no eviction: queued
    /// commands are checked again by EXEC; a script holds every lock).
    MemoryOver,
    /// `min-replicas-to-write`: writes are refused.
    Replicas,
    /// The durability log's volume is full: writes are refused (MISCONF).
    Disk,
    /// Cluster mode: the keys' hash slot must be this node's (MOVED,
    /// CROSSSLOT, CLUSTERDOWN, or forwarding on the plain port).
    Slot,
}

impl Origin<'_> {
    /// The gates a command from here passes, in order. Redis's
    /// `processCommand` order for clients, its `scriptCall` order for
    /// scripts; EXEC re-checks only permissions per command.
    fn gates(&self) -> &'static [Gate] {
        use Gate::*;
        match self {
            Origin::Client => &[
                Arity,
                Auth,
                Protected,
                Acl,
                Slot,
                Loading,
                Monitor,
                Pause,
                Busy,
                PubSubContext,
                Disk,
                MemoryEvict,
                Replicas,
            ],
            Origin::Queue => {
                &[Arity, Auth, Protected, Acl, Slot, Loading, Monitor, Pause, Busy, NoMulti, Disk, MemoryOver, Replicas]
            }
            Origin::Exec => &[Acl],
            Origin::Script(_) => &[Arity, NoScript, Acl, ReadOnlyScript, Slot, Disk, Replicas, MemoryOver],
        }
    }

    /// ACL LOG's context for a refusal from here.
    fn acl_context(&self, client: &Client) -> &'static str {
        match self {
            Origin::Client if client.multi.is_none() => "toplevel",
            Origin::Client | Origin::Queue | Origin::Exec => "multi",
            Origin::Script(_) => "lua",
        }
    }
}

/// Why a command did not run.
pub enum Refusal {
    Refused(Refused),
    /// Not now (CLIENT PAUSE, a busy script): the connection waits, then
    /// runs the request again from the start.
    Wait(PendingRead),
    /// Another node's slot, on the plain port: sent there.
    Forward(Forward),
}

/// A refusal, worded by `message` for the command's origin.
pub enum Refused {
    Unknown,
    Arity(ArityError),
    NoAuth,
    Protected,
    Acl(Denial),
    Loading,
    Monitor,
    Busy(&'static str),
    NoMulti,
    PubSubContext,
    NoScript,
    ReadOnlyScript,
    Oom,
    NoReplicas,
    /// The durability log cannot grow: its message.
    Disk(String),
    /// Another node serves the slot: `MOVED <slot> <endpoint>`.
    Moved(u16, String),
    CrossSlot,
    ClusterDown(ClusterDown),
}

/// Why the cluster cannot serve a command, in Redis's two wordings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterDown {
    /// Nobody serves the slot (also: no topology pushed yet, as a fresh
    /// Redis Cluster node without slots answers).
    Unbound,
    /// Some slot is not covered: the cluster is down as a whole (Redis's
    /// `cluster-require-full-coverage yes`).
    State,
}

/// Redis's refusal of DEBUG when `enable-debug-command` does not allow the client.
const PROTECTED_REFUSED: &str = "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", \
     you can run it from a local connection, otherwise you need to set this option in the configuration file, and \
     then restart the server.";

/// Subcommands Redis 7.0 refuses in scripts that Strata's subcommand table
/// does not describe (their containers answer them otherwise).
const REDIS_NOSCRIPT_SUBS: &[(&str, &str)] = &[
    ("cluster", "reset"),
    ("client", "caching"),
    ("client", "pause"),
    ("client", "tracking"),
    ("client", "unblock"),
    ("client", "unpause"),
];

impl Refused {
    /// The error reply, as Redis words it where the command came from
    /// (bytes: an unknown command's error quotes what the client sent).
    pub fn message(
        &self,
        node: &Node,
        cmd: Option<&Resolved<'_>>,
        args: &[&[u8]],
        origin: &Origin,
    ) -> Cow<'static, [u8]> {
        let script = matches!(origin, Origin::Script(_));
        let text: Cow<'static, str> = match self {
            Refused::Unknown if script => "ERR Unknown Redis command called from script".into(),
            Refused::Unknown => return unknown_command(args).into(),
            Refused::Arity(_) if script => "ERR Wrong number of args calling Redis command from script".into(),
            Refused::Arity(e) => cmd.expect("resolved").arity_message(*e).into(),
            Refused::NoAuth => err::NOAUTH.into(),
            Refused::Protected => PROTECTED_REFUSED.into(),
            Refused::Acl(d) => match origin {
                Origin::Client | Origin::Queue => acl::noperm(node, d).into(),
                Origin::Exec => acl::exec_denial(d).into(),
                Origin::Script(_) => acl::script_denial(d).into(),
            },
            Refused::Loading => "LOADING Redis is loading the dataset in memory".into(),
            Refused::Monitor => super::monitor::REFUSED.into(),
            Refused::Busy(e) => (*e).into(),
            Refused::NoMulti => "ERR Command not allowed inside a transaction".into(),
            Refused::PubSubContext => format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in \
                 this context",
                cmd.expect("resolved").full_name()
            )
            .into(),
            Refused::NoScript => "ERR This Redis command is not allowed from script".into(),
            Refused::ReadOnlyScript => "ERR Write commands are not allowed from read-only scripts.".into(),
            Refused::Oom => err::OOM.into(),
            Refused::NoReplicas => err::NOREPLICAS.into(),
            Refused::Disk(e) => e.clone().into(),
            // Redis's `scriptVerifyClusterState`: every redirection reads the same from a script.
            Refused::ClusterDown(ClusterDown::State) if script => {
                "ERR Script attempted to execute a command while the cluster is down".into()
            }
            Refused::Moved(..) | Refused::CrossSlot | Refused::ClusterDown(_) if script => {
                "ERR Script attempted to access a non local key in a cluster node".into()
            }
            Refused::Moved(slot, endpoint) => format!("MOVED {slot} {endpoint}").into(),
            Refused::CrossSlot => "CROSSSLOT Keys in request don't hash to the same slot".into(),
            Refused::ClusterDown(ClusterDown::State) => "CLUSTERDOWN The cluster is down".into(),
            Refused::ClusterDown(ClusterDown::Unbound) => "CLUSTERDOWN Hash slot not served".into(),
        };
        match text {
            Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
            Cow::Owned(s) => Cow::Owned(s.into_bytes()),
        }
    }
}

/// Stage 2: runs `cmd` through its origin's gates.
pub fn admit(
    node: &Node,
    worker: &WorkerMetrics,
    client: &mut Client,
    cmd: &Resolved<'_>,
    origin: &Origin<'_>,
) -> Result<(), Refusal> {
    let refuse = |r| Err(Refusal::Refused(r));
    let def = cmd.def;
    // What a script's declared flags make of EVAL & co.: computed once, when
    // a memory or replica gate first needs it.
    let mut limits: Option<Limits> = None;
    for gate in origin.gates() {
        match gate {
            Gate::Arity => {
                if let Some(e) = cmd.arity_error() {
                    return refuse(Refused::Arity(e));
                }
            }
            Gate::Auth => {
                // The admin port's connections start authenticated unless
                // it has a password.
                let needs = client.port == PortKind::Admin || node.config.runtime.has_password.load(Relaxed);
                if !client.authenticated && !def.has(flags::NO_AUTH) && needs {
                    return refuse(Refused::NoAuth);
                }
            }
            Gate::Protected => {
                if def.has(flags::PROTECTED) && !protected_allowed(node.config.startup.enable_debug_command, client) {
                    return refuse(Refused::Protected);
                }
            }
            // The admin port's clients are the operator and other nodes,
            // which checked the command against the client's user before
            // forwarding it.
            Gate::Acl if client.port == PortKind::Admin => {}
            Gate::Acl => {
                if let Err(denial) = acl::check(node, client, cmd) {
                    acl::log_denial(node, client, &denial, origin.acl_context(client), cmd.args);
                    return refuse(Refused::Acl(denial));
                }
            }
            Gate::Loading => {
                if node.persist.as_ref().is_some_and(|p| p.is_loading()) && !def.has(flags::LOADING) {
                    return refuse(Refused::Loading);
                }
            }
            Gate::Monitor => {
                if client.monitor && super::monitor::refuses(cmd.flags()) {
                    return refuse(Refused::Monitor);
                }
            }
            Gate::Pause => {
                // As Redis, before queueing in MULTI too.
                let paused = node.pause.mode(client.now_ms);
                if paused != PauseMode::Off
                    && (paused == PauseMode::All || holds_back(node, client.multi.as_deref(), cmd))
                {
                    return Err(Refusal::Wait(pause::wait_for_unpause(node.pause.clone(), client.info.clone())));
                }
            }
            Gate::Busy => {
                // The worker serves others meanwhile; past
                // `busy-reply-threshold` the command gets BUSY — before
                // queueing, as Redis: a command refused inside MULTI fails
                // the transaction, and a refused EXEC ends it.
                if node.scripts.active() && !cmd.has(flags::ALLOW_BUSY) && !node.scripts.has_result(client.info.id) {
                    match node.scripts.while_busy(node.config.runtime.busy_reply_threshold.load(Relaxed)) {
                        WhileBusy::Busy(e) => return refuse(Refused::Busy(e)),
                        WhileBusy::Wait(wait) => return Err(Refusal::Wait(wait)),
                    }
                }
            }
            Gate::NoMulti => {
                if def.has(flags::NO_MULTI) {
                    return refuse(Refused::NoMulti);
                }
            }
            Gate::PubSubContext => {
                if client.in_pubsub() && !client.resp3 && !def.has(flags::PUBSUB_CTX) {
                    return refuse(Refused::PubSubContext);
                }
            }
            Gate::NoScript => {
                let redis_refuses = cmd.args.len() >= 2
                    && REDIS_NOSCRIPT_SUBS
                        .iter()
                        .any(|&(c, s)| c == def.name && cmd.args[1].eq_ignore_ascii_case(s.as_bytes()));
                if cmd.has(flags::NOSCRIPT) || redis_refuses {
                    return refuse(Refused::NoScript);
                }
            }
            Gate::ReadOnlyScript => {
                // May-replicate commands (PUBLISH, ...) count as writes here, as in Redis.
                if let Origin::Script(s) = origin
                    && s.read_only
                    && cmd.has(flags::WRITE | flags::MAY_REPLICATE)
                {
                    return refuse(Refused::ReadOnlyScript);
                }
            }
            // The limits are looked at only while one is set: a command's
            // `Limits` (a script's declared flags: a cache lookup) are not
            // worked out on the common path.
            Gate::MemoryEvict | Gate::MemoryOver if node.maxmemory() > 0 => {
                let l = *limits.get_or_insert_with(|| Limits::of(node, cmd));
                // A disk tier whose writer or cleaner is behind: a client's
                // write waits here, holding no lock, rather than its
                // demotions under a partition lock; and when they found no
                // room, the write waits for the tier to make some rather
                // than fail.
                let tier_wait = |client: &Client| {
                    let waits = *gate == Gate::MemoryEvict
                        && matches!(origin, Origin::Client)
                        && (l.grows || exec_grows(node, client, def));
                    waits.then(|| node.ks.cold().and_then(|t| t.backlog())).flatten()
                };
                if let Some(wait) = tier_wait(client) {
                    return Err(Refusal::Wait(wait));
                }
                if !memory_allows(node, &worker.store, l.grows, *gate == Gate::MemoryEvict) {
                    if let Some(wait) = tier_wait(client) {
                        return Err(Refusal::Wait(wait));
                    }
                    return refuse(Refused::Oom);
                }
            }
            Gate::Replicas if !replicas_allow_writes(node) => {
                let l = *limits.get_or_insert_with(|| Limits::of(node, cmd));
                // A script that has written cannot fail half-way after.
                let wrote = matches!(origin, Origin::Script(s) if s.wrote);
                if l.writes && !wrote {
                    return refuse(Refused::NoReplicas);
                }
            }
            // As Redis's MISCONF: before the memory gate, writes only (a
            // script that has written cannot fail half-way after).
            Gate::Disk => {
                if let Some(e) = node.persist.as_ref().filter(|p| p.refuses_writes()).and_then(|p| p.write_refusal()) {
                    let wrote = matches!(origin, Origin::Script(s) if s.wrote);
                    if Limits::of(node, cmd).writes && !wrote {
                        return refuse(Refused::Disk(e));
                    }
                }
            }
            Gate::Slot => {
                if let Some(c) = node.cluster.as_ref() {
                    slot_gate(node, c, client, cmd, origin)?;
                }
            }
            Gate::MemoryEvict | Gate::MemoryOver | Gate::Replicas => {}
        }
    }
    Ok(())
}

/// Cluster mode: a command runs here only when every key it names hashes to
/// one slot this node serves (EXEC: every queued command's keys). Redis
/// Cluster's `getNodeByQuery`, without migrations (ASK, TRYAGAIN) yet. On
/// the plain port a command for another node's slot is forwarded; inside
/// MULTI it is queued, and the transaction goes to the owner at EXEC.
fn slot_gate(
    node: &Node,
    c: &crate::cluster::Cluster,
    client: &Client,
    cmd: &Resolved<'_>,
    origin: &Origin<'_>,
) -> Result<(), Refusal> {
    let refuse = |r| Err(Refusal::Refused(r));
    let exec = cmd.def.name == "exec";
    let slot_of = |k: &[u8]| crate::base::slot::key_slot(k);
    let slots: SmallVec<[u16; 8]> = if exec {
        let Some(queued) = client.multi.as_deref() else { return Ok(()) };
        let mut all = SmallVec::new();
        for q in queued {
            let argv: SmallVec<[&[u8]; 8]> = q.args.iter().map(|a| a.as_slice()).collect();
            all.extend(node.table.resolved(q.cmd, &argv).keys().map(slot_of));
        }
        all
    } else {
        cmd.keys().map(slot_of).collect()
    };
    let Some(&slot) = slots.first() else { return Ok(()) };
    // A migration's source writing the slots this node is importing.
    if let Some((importing, mid)) = &client.importing
        && slots.iter().all(|&s| importing.contains(s))
    {
        c.migrations.note_received(mid, cmd.args.iter().map(|a| a.len()).sum());
        return Ok(());
    }
    // What cannot travel: a WATCH (it would have to stay on the owner until
    // EXEC) and a shard-channel subscription: those get MOVED, as from
    // Redis Cluster (see the README's cluster section).
    let forwards = client.port == PortKind::Plain
        && !matches!(origin, Origin::Script(_))
        && !matches!(cmd.def.name, "watch" | "ssubscribe" | "sunsubscribe");
    /// Where another node's slot sends the command.
    enum Away {
        Forward(std::sync::Arc<str>),
        Moved(String),
    }
    use crate::cluster::Route;
    let route = c.with(|t| {
        // As Redis's getNodeByQuery: the first key's slot must be served
        // (else CLUSTERDOWN) before the others are compared with it.
        let route = t.map_or(Route::Unassigned, |t| t.route(slot));
        let t = t.filter(|_| route != Route::Unassigned).ok_or(Refused::ClusterDown(ClusterDown::Unbound))?;
        if slots.iter().any(|&s| s != slot) {
            return Err(Refused::CrossSlot);
        }
        match route {
            _ if !t.fully_covered() => Err(Refused::ClusterDown(ClusterDown::State)),
            Route::Elsewhere(i) if forwards => Ok(Some(Away::Forward(t.members[i].admin_addr.clone()))),
            Route::Elsewhere(i) => Ok(Some(Away::Moved(c.endpoint(&t.members[i])))),
            Route::Mine | Route::Unassigned => Ok(None),
        }
    });
    match route {
        Err(refused) => refuse(refused),
        Ok(None) => Ok(()),
        Ok(Some(Away::Moved(endpoint))) => refuse(Refused::Moved(slot, endpoint)),
        // Queued on the plain port: decided at EXEC, for the whole transaction.
        Ok(Some(Away::Forward(_))) if matches!(origin, Origin::Queue) => Ok(()),
        Ok(Some(Away::Forward(addr))) => Err(Refusal::Forward(Forward {
            addr,
            slot,
            transaction: exec,
            dedicated: cmd.has(flags::BLOCKING),
            read_only: !exec && cmd.has(flags::READONLY),
        })),
    }
}

/// Whether a pause in WRITE mode holds back this request: writes, commands
/// that may replicate (PUBLISH, PFCOUNT, ...), scripts that may write, and
/// EXEC of a transaction holding any of those.
fn holds_back(node: &Node, client_queue: Option<&[crate::session::client::Queued]>, cmd: &Resolved<'_>) -> bool {
    if cmd.def.name == "exec" {
        return client_queue.is_some_and(|q| {
            q.iter().any(|c| {
                let argv: SmallVec<[&[u8]; 8]> = c.args.iter().map(|a| a.as_slice()).collect();
                may_write(node, &node.table.resolved(c.cmd, &argv))
            })
        });
    }
    may_write(node, cmd)
}

fn may_write(node: &Node, cmd: &Resolved<'_>) -> bool {
    let def = cmd.def;
    if def.has(flags::RUNS_SCRIPT) {
        return !def.has(flags::READONLY) && node.scripts.may_write(def.name, cmd.args);
    }
    cmd.has(flags::WRITE | flags::MAY_REPLICATE)
}

/// Whether a command writes and whether it grows memory, as Redis's
/// `getCommandFlags` has it: a script's declared flags count for EVAL & co.
#[derive(Clone, Copy)]
pub struct Limits {
    pub writes: bool,
    pub grows: bool,
}

impl Limits {
    pub fn of(node: &Node, cmd: &Resolved<'_>) -> Limits {
        // Looked up only when a limit could refuse it (EVALSHA's lookup takes
        // the script cache's lock).
        let limited = node.maxmemory() > 0
            || node.config.runtime.lacks_good_replicas()
            || node.persist.as_ref().is_some_and(|p| p.refuses_writes());
        let declared = if cmd.def.has(flags::RUNS_SCRIPT) && limited {
            node.scripts.declared_flags(cmd.def.name, cmd.args)
        } else {
            None
        };
        Limits {
            writes: cmd.has(flags::WRITE) || declared.is_some_and(|f| !f.no_writes),
            grows: cmd.has(flags::DENYOOM) || declared.is_some_and(|f| !f.no_writes && !f.allow_oom),
        }
    }
}

/// Whether `def` is an EXEC whose queued commands grow memory: it waits
/// for a disk tier that is behind as they would (EXEC checks their limits
/// itself, under no lock it could wait in).
fn exec_grows(node: &Node, client: &Client, def: &CommandDef) -> bool {
    def.name == "exec"
        && client.multi.as_ref().is_some_and(|queued| {
            queued.iter().any(|q| {
                let args: SmallVec<[&[u8]; 8]> = q.args.iter().map(|a| a.as_slice()).collect();
                Limits::of(node, &node.table.resolved(q.cmd, &args)).grows
            })
        })
}

/// The memory gate: false when a command that `grows` memory must be
/// refused. With `evict`, as Redis, any command makes room when over the
/// limit (a read after a big write evicts); only growing ones are refused.
pub fn memory_allows(node: &Node, stats: &StoreStats, grows: bool, evict: bool) -> bool {
    let max = node.maxmemory();
    if max == 0 {
        return true;
    }
    if evict {
        return node.ensure_memory(stats) || !grows;
    }
    !grows || node.used_memory_for_eviction() <= max
}

/// The replica gate: false while `min-replicas-to-write` cannot be met
/// (a node has no replicas).
pub fn replicas_allow_writes(node: &Node) -> bool {
    !node.config.runtime.lacks_good_replicas()
}

/// Counts a refusal where Redis counts it: a rejected call of the command
/// (not for EXEC's re-check, which Redis counts as an error reply only) and
/// an error reply in errorstats; inside MULTI it fails the transaction.
pub fn account(
    worker: &WorkerMetrics,
    client: &mut Client,
    cmd: Option<&Resolved<'_>>,
    origin: &Origin<'_>,
    msg: &[u8],
) {
    if matches!(origin, Origin::Client | Origin::Queue) && client.multi.is_some() {
        client.multi_dirty = true;
    }
    if !matches!(origin, Origin::Exec)
        && let Some(slot) = cmd.and_then(|c| c.stat_slot())
    {
        worker.cmds[slot].reject();
    }
    worker.errors.record(msg);
}

/// Counts a refusal (`account`) and replies with its error.
#[allow(clippy::too_many_arguments)]
pub fn refuse(
    node: &Node,
    worker: &WorkerMetrics,
    client: &mut Client,
    cmd: Option<&Resolved<'_>>,
    args: &[&[u8]],
    origin: &Origin<'_>,
    refused: &Refused,
    out: &mut Reply,
) {
    let msg = refused.message(node, cmd, args, origin);
    account(worker, client, cmd, origin, &msg);
    out.error(&*msg);
}

/// Stage 3 for a client's command: locks the command's partitions, waits
/// for keys on disk, runs the handler and what follows the call.
pub fn run(
    node: &Node,
    server: &dyn ServerControl,
    worker: &WorkerMetrics,
    client: &mut Client,
    cmd: &Resolved<'_>,
    out: &mut Reply,
) -> Outcome {
    let (def, args) = (cmd.def, cmd.args);
    let ks = &node.ks;
    let locked = match def.keys {
        Keys::None | Keys::All => ks.lock_none(),
        _ => match cmd.single_key() {
            Some(key) => ks.lock_one(ks.partition_of_key(key)),
            None => {
                let mut parts: SmallVec<[u32; 8]> = cmd.keys().map(|k| ks.partition_of_key(k)).collect();
                ks.lock_set(&mut parts)
            }
        },
    };
    let mark = out.len();
    let keys =
        KeyAccess { ks, locked, db: client.db, now_ms: client.now_ms, touch: !client.no_touch, stats: &worker.store };
    let mut ctx = Ctx::new(node, server, worker, client, keys);
    // Keys not ready in RAM: nothing runs, nothing is recorded; the
    // connection waits and comes back with the same request.
    // A read-only command's values read from disk are in RAM for it only,
    // unless read lately (`store::cold::served`). Not PFCOUNT (read-only,
    // yet it may write its cached count: MAY_REPLICATE), scripts, blocking
    // commands.
    let mut served = ServedOnce::default();
    let serves_once =
        cmd.has(flags::READONLY) && !cmd.has(flags::MAY_REPLICATE) && !def.has(flags::RUNS_SCRIPT | flags::BLOCKING);
    if ks.may_pend()
        && let Some(wait) =
            ctx.keys.pending_serving(cmd.keys(), reads_values(def.name, args), serves_once.then_some(&mut served))
    {
        return Outcome::Pending(wait);
    }
    let result = (def.handler)(&mut ctx, args, out);
    if !served.is_empty() {
        ctx.keys.end_served(&mut served);
    }
    if let Some(wait) = ctx.pending.take() {
        // The handler (EXEC) found a key not ready before changing anything.
        debug_assert!(result.is_ok() && out.len() == mark, "a pending command must not reply");
        return Outcome::Pending(wait);
    }
    // Clients blocked on keys this command (or EXEC) wrote are served now,
    // before its locks are released: nobody else sees the data in between.
    ctx.keys.serve_ready();
    let block = ctx.block.take();
    after_call(&mut ctx, cmd, &Origin::Client, mark, result, out, block.is_some());
    match block {
        Some(b) => Outcome::Block(b),
        None => Outcome::Done,
    }
}

/// What follows every call, whatever its origin: CLIENT TRACKING of what it
/// read, the error reply and statistics (`finish`), the slow log and
/// MONITOR. `blocked`: the command blocked (logged when served, as Redis).
/// Returns how long the command took (ns).
pub fn after_call(
    ctx: &mut Ctx<'_>,
    cmd: &Resolved<'_>,
    origin: &Origin<'_>,
    mark: usize,
    result: Result<(), CmdError>,
    out: &mut Reply,
    blocked: bool,
) -> u64 {
    let def = cmd.def;
    // Remembers the keys a read-only command read, so that the client hears
    // when they change (Redis's `trackingRememberKeys`); a script tracks its
    // declared keys when it calls a read-only command.
    if cmd.has(flags::READONLY) && tracks_reads(ctx.client) {
        match origin {
            Origin::Script(s) => track_keys(ctx, s.declared.iter().copied()),
            _ if !cmd.has(flags::PUBSUB | flags::RUNS_SCRIPT) => track_keys(ctx, cmd.keys()),
            _ => {}
        }
    }
    if !matches!(origin, Origin::Client) {
        // Blocking commands never block inside EXEC or a script, nor wait.
        ctx.block = None;
        ctx.pending = None;
    }
    let nanos = finish(ctx.node, ctx.worker, ctx.client, cmd, mark, result, out);
    let in_script = matches!(origin, Origin::Script(_));
    // Redis logs EXEC's commands, not EXEC, and no command a script calls.
    if !blocked && !in_script {
        record_slow(ctx.node, ctx.client, def, cmd.args, nanos);
    }
    // MONITOR: scripts show themselves when they start; admin commands never.
    // One relaxed load while nobody monitors.
    let node = ctx.node;
    if node.monitors.active() && !cmd.has(flags::ADMIN) && (in_script || !def.has(flags::RUNS_SCRIPT)) {
        super::monitor::feed(node, ctx.client, cmd.args, in_script);
    }
    nanos
}

/// Whether this client's next reads are tracked: tracking on, not BCAST,
/// and CLIENT CACHING agreeing with OPTIN / OPTOUT.
#[inline]
fn tracks_reads(client: &Client) -> bool {
    let mode = client.info.tracking.load(Relaxed);
    if mode & tracking::mode::ON == 0 || mode & tracking::mode::BCAST != 0 {
        return false;
    }
    let caching = mode & tracking::mode::CACHING != 0;
    !((mode & tracking::mode::OPTIN != 0 && !caching) || (mode & tracking::mode::OPTOUT != 0 && caching))
}

/// Adds `keys` to the tracking table for this client.
fn track_keys<'k>(ctx: &mut Ctx<'_>, keys: impl Iterator<Item = &'k [u8]>) {
    let (ks, id) = (ctx.keys.ks, ctx.client.info.id);
    for key in keys {
        ctx.keys.with_partition(ks.partition_of_key(key), |part| part.track(ks, key, id));
    }
}

/// SLOWLOG and LATENCY: a command that ran `nanos`. Only relaxed loads of
/// the thresholds unless it was slow.
#[inline]
pub fn record_slow(node: &Node, client: &Client, def: &CommandDef, args: &[&[u8]], nanos: u64) {
    let rt = &node.config.runtime;
    if !super::slowlog::skips_slowlog(def) {
        node.slowlog.record_if_slow(rt, client, args, nanos / 1000);
    }
    node.latency.record_if_needed(rt, super::slowlog::latency_event(def), nanos / 1_000_000);
}

/// Writes an error result and records the call and its latency; returns
/// how long the command took (ns).
fn finish(
    node: &Node,
    worker: &WorkerMetrics,
    client: &mut Client,
    cmd: &Resolved<'_>,
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
    let end = crate::store::command_ns();
    let nanos = end.saturating_sub(client.clock_mark_ns);
    client.clock_mark_ns = end;
    if let Some(slot) = cmd.stat_slot() {
        let stat = &worker.cmds[slot];
        stat.record(nanos, failed);
        if node.config.runtime.latency_tracking.load(Relaxed) {
            stat.track(nanos);
        }
    }
    crate::metrics::ServerStats::add(&worker.server.commands, 1);
    nanos
}

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

/// Whether a command may read the values of its keys: DEL and UNLINK never
/// do, nor does SET without GET (it replaces whatever is there), so a value
/// on disk only is not read back for them.
pub fn reads_values(name: &str, args: &[&[u8]]) -> bool {
    match name {
        "del" | "unlink" => false,
        "set" => args[3..].iter().any(|a| a.eq_ignore_ascii_case(b"get")),
        _ => true,
    }
}

/// Redis's reply for an unknown command. As its `processCommand`: the name
/// and the arguments are C strings (cut at a NUL), the name is cut at 128
/// bytes, and arguments are quoted only while the list is under 128 bytes,
/// each cut to what is left of those 128 — a huge request gets a short error.
pub(super) fn unknown_command(args: &[&[u8]]) -> Vec<u8> {
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
