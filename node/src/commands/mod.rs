//! The command table and everything a command handler sees.
//!
//! Each family of commands lives in its own module and exposes a
//! `COMMANDS` table of `CommandDef`s: name, arity, flags, key positions and
//! handler — command metadata kept as data, so dispatch, COMMAND INFO,
//! COMMAND GETKEYS, MULTI/EXEC locking and metrics all read one source.

pub mod acl;
pub mod admin;
pub mod args;
mod client_list;
pub mod cluster;
pub mod command_meta;
pub mod config;
pub mod connection;
pub mod data;
pub mod debug;
pub mod dispatch;
pub mod info;
pub mod key_specs;
mod key_specs_table;
pub mod monitor;
mod node;
pub mod pipeline;
pub mod pubsub;
pub mod scripting;
pub mod slowlog;
mod stats;
pub mod subcommands;
pub mod table;
pub mod transactions;

pub use args::{arg_f64, arg_i64, parse_block_timeout};
pub use data::{bitmaps, dump, geo, hashes, hyperloglog, keys, lists, sets, sort, streams, strings, typed, zsets};

use crate::protocol::Reply;
use crate::session::client::{Client, ClientInfo};
use crate::store::{KeyAccess, Keyspace, Serve, Waiter};
pub use node::{Node, NodeJob, ScriptJob, ServerControl};
use smallvec::SmallVec;
use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use tokio::sync::Notify;

/// The version HELLO and INFO report: tools gate features on it, and Strata
/// implements Redis 7.0's command semantics.
pub const REDIS_VERSION: &str = "7.0.15";

/// An error reply. Messages start with their Redis error code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmdError(pub Cow<'static, str>);

impl From<&'static str> for CmdError {
    fn from(s: &'static str) -> Self {
        CmdError(Cow::Borrowed(s))
    }
}

impl From<String> for CmdError {
    fn from(s: String) -> Self {
        CmdError(Cow::Owned(s))
    }
}

pub type CmdResult = Result<(), CmdError>;

/// Redis's common error replies, verbatim.
pub mod err {
    pub const SYNTAX: &str = "ERR syntax error";
    pub const NOT_INT: &str = "ERR value is not an integer or out of range";
    pub const NOT_FLOAT: &str = "ERR value is not a valid float";
    pub const WRONGTYPE: &str = crate::store::WRONGTYPE;
    pub const NO_SUCH_KEY: &str = "ERR no such key";
    pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
    pub const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";
    pub const NOAUTH: &str = "NOAUTH Authentication required.";
    pub const INCR_OVERFLOW: &str = "ERR increment or decrement would overflow";
    pub const TIMEOUT_NEG: &str = "ERR timeout is negative";
    pub const TIMEOUT_NOT_FLOAT: &str = "ERR timeout is not a float or out of range";
    pub const INDEX_OUT_OF_RANGE: &str = "ERR index out of range";
    pub const INVALID_EXPIRE: &str = "ERR invalid expire time in '{}' command";

    /// `ERR wrong number of arguments for 'x' command`
    pub fn arity(name: &str) -> String {
        format!("ERR wrong number of arguments for '{}' command", name.to_ascii_lowercase())
    }

    /// `ERR invalid expire time in 'set' command`
    pub fn invalid_expire(cmd: &str) -> String {
        format!("ERR invalid expire time in '{}' command", cmd.to_ascii_lowercase())
    }
}

/// Command flags (a subset of Redis's, the ones that change behaviour here
/// plus those COMMAND INFO reports).
pub mod flags {
    pub const WRITE: u32 = 1;
    pub const READONLY: u32 = 1 << 1;
    /// Refused with OOM when memory is over `maxmemory` and nothing can be evicted.
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const FAST: u32 = 1 << 9;
    /// Allowed before AUTH when a password is set (AUTH, HELLO, QUIT, RESET).
    pub const NO_AUTH: u32 = 1 << 10;
    /// Executed immediately even inside MULTI (EXEC, DISCARD, MULTI, WATCH, QUIT, RESET).
    pub const NO_QUEUE: u32 = 1 << 11;
    /// Allowed in RESP2 subscribed mode.
    pub const PUBSUB_CTX: u32 = 1 << 12;
    /// Not allowed inside MULTI (WATCH): answered with an error there.
    pub const NO_MULTI: u32 = 1 << 13;
    pub const MAY_REPLICATE: u32 = 1 << 14;
    pub const ALLOW_BUSY: u32 = 1 << 15;
    /// Refused unless its enabling parameter allows the client (DEBUG:
    /// `enable-debug-command`). COMMAND INFO does not show it, as in Redis.
    pub const PROTECTED: u32 = 1 << 16;
    /// Runs a script (EVAL, FCALL, ...): locks the whole keyspace, inside
    /// EXEC too, since a script may touch keys it did not declare.
    /// COMMAND INFO does not show it.
    pub const RUNS_SCRIPT: u32 = 1 << 17;
    /// Reads keys named by patterns over its data (SORT BY/GET), which no
    /// key position declares: takes every partition when it needs them,
    /// and EXEC locks the whole keyspace for it. COMMAND INFO does not
    /// show it.
    pub const PATTERN_KEYS: u32 = 1 << 18;
}

/// Where a command's keys are among its arguments.
#[derive(Clone, Copy)]
pub enum Keys {
    /// No keys.
    None,
    /// Redis's legacy (first, last, step); `last` < 0 counts from the end.
    Range(i32, i32, i32),
    /// Computed from the arguments (numkeys-style commands).
    Custom(fn(&[&[u8]]) -> SmallVec<[usize; 8]>),
    /// Sees the whole keyspace (KEYS, SCAN, FLUSHDB, DBSIZE, INFO, ...):
    /// locks partitions itself, or all of them inside EXEC.
    All,
}

pub type Handler = fn(&mut Ctx<'_>, &[&[u8]], &mut Reply) -> CmdResult;

pub struct CommandDef {
    /// Lower-case name; `"container|sub"` for subcommand docs.
    pub name: &'static str,
    /// Redis arity: N means exactly N arguments (name included), -N at least N.
    pub arity: i32,
    pub flags: u32,
    pub keys: Keys,
    pub handler: Handler,
    /// ACL categories (COMMAND INFO), e.g. "@string @fast".
    pub acl: &'static str,
    /// Subcommands (for container commands like CLIENT, CONFIG, OBJECT).
    pub subcommands: &'static [&'static str],
}

impl CommandDef {
    /// A command with the common shape; use struct-update syntax for the rest.
    pub const fn new(name: &'static str, arity: i32, flags: u32, keys: Keys, handler: Handler) -> Self {
        CommandDef { name, arity, flags, keys, handler, acl: "", subcommands: &[] }
    }

    pub const fn acl(mut self, acl: &'static str) -> Self {
        self.acl = acl;
        self
    }

    pub const fn subs(mut self, subs: &'static [&'static str]) -> Self {
        self.subcommands = subs;
        self
    }

    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    /// Argument positions of this command's keys for these arguments.
    pub fn key_positions(&self, args: &[&[u8]]) -> SmallVec<[usize; 8]> {
        match self.keys {
            Keys::None | Keys::All => SmallVec::new(),
            Keys::Range(first, last, step) => {
                let n = args.len() as i32;
                let last = if last < 0 { n + last } else { last };
                let mut v = SmallVec::new();
                let mut i = first;
                while i <= last && i < n && step > 0 {
                    v.push(i as usize);
                    i += step;
                }
                v
            }
            Keys::Custom(f) => f(args).into_iter().filter(|&i| i < args.len()).collect(),
        }
    }
}

/// A request to block this client until one of `keys` is written, or the
/// deadline passes (BLPOP & co.). Set by `Ctx::block`.
pub struct BlockRequest {
    pub keys: Vec<Vec<u8>>,
    /// Unix ms; 0 = forever.
    pub deadline_ms: u64,
    pub waiter: Arc<BlockedClient>,
    /// Reply sent when the deadline passes.
    pub on_timeout: fn(&mut Reply),
    /// The database the keys are in.
    pub db: usize,
}

impl BlockRequest {
    /// Takes the client off every key it waits on.
    pub fn unregister(&self, ks: &Keyspace) {
        let waiter: Arc<dyn Waiter> = self.waiter.clone();
        ks.forget_waiter(self.db, &self.keys, &waiter);
    }
}

/// Whether a blocked command can take what it waits for from a key that was
/// just written. Checking must not change the data.
pub enum Readiness {
    Ready,
    /// The key holds another type: this client stays blocked (Redis 7.0),
    /// clients queued behind it may still be served.
    WrongType,
    /// Missing or empty: nobody queued on the key can be served.
    Empty,
    /// Serving needs a partition another command holds right now: the client
    /// is woken to re-run its command instead, taking locks in order.
    Retry,
}

/// How a blocked command serves itself from a ready key; built by the
/// command when it blocks.
pub trait BlockedOp: Send + Sync {
    fn readiness(&self, keys: &mut KeyAccess<'_>, key: &[u8]) -> Readiness;
    /// Takes the data from `key` (found `Ready`) and writes the command's
    /// whole reply.
    fn serve(&self, keys: &mut KeyAccess<'_>, key: &[u8], out: &mut Reply);
}

/// A block only the deadline ends.
struct NeverReady;

impl BlockedOp for NeverReady {
    fn readiness(&self, _keys: &mut KeyAccess<'_>, _key: &[u8]) -> Readiness {
        Readiness::Empty
    }

    fn serve(&self, _keys: &mut KeyAccess<'_>, _key: &[u8], _out: &mut Reply) {}
}

/// What woke a blocked client.
pub enum Woken {
    /// Served by a push: the complete reply.
    Served(Vec<u8>),
    /// Re-run the command (see `Readiness::Retry`).
    Retry,
    /// CLIENT UNBLOCK: reply as at the deadline, or with an error.
    Unblocked { error: bool },
}

const WAITING: u8 = 0;
const SERVED: u8 = 1;
const RETRY: u8 = 2;
const CANCELLED: u8 = 3;
const UNBLOCKED_TIMEOUT: u8 = 4;
const UNBLOCKED_ERROR: u8 = 5;

/// A blocked client as queued on each of its keys. A client blocked on
/// several keys is served at most once: whoever moves `state` away from
/// WAITING first — a push serving it, or its own connection giving up on
/// timeout, kill or disconnect — decides, and the other side does nothing.
pub struct BlockedClient {
    state: AtomicU8,
    wake: Notify,
    reply: parking_lot::Mutex<Vec<u8>>,
    resp3: bool,
    info: Arc<ClientInfo>,
    op: Box<dyn BlockedOp>,
}

impl BlockedClient {
    fn claim(&self, to: u8) -> bool {
        self.state.compare_exchange(WAITING, to, AcqRel, Acquire).is_ok()
    }

    /// Completes when a push served the client or asked it to retry.
    pub async fn woken(&self) {
        self.wake.notified().await
    }

    /// Gives up waiting (timeout, kill, disconnect). False when a push
    /// claimed the client first: `woken` then completes shortly.
    pub fn cancel(&self) -> bool {
        self.claim(CANCELLED)
    }

    /// The outcome, once `woken` has completed.
    pub fn outcome(&self) -> Option<Woken> {
        match self.state.load(Acquire) {
            SERVED => Some(Woken::Served(std::mem::take(&mut *self.reply.lock()))),
            RETRY => Some(Woken::Retry),
            UNBLOCKED_TIMEOUT => Some(Woken::Unblocked { error: false }),
            UNBLOCKED_ERROR => Some(Woken::Unblocked { error: true }),
            _ => None,
        }
    }
}

impl crate::session::client::Unblock for BlockedClient {
    fn unblock(&self, error: bool) -> bool {
        if !self.claim(if error { UNBLOCKED_ERROR } else { UNBLOCKED_TIMEOUT }) {
            return false;
        }
        self.info.blocked.store(false, Relaxed);
        self.wake.notify_one();
        true
    }

    fn retry(&self) -> bool {
        if !self.claim(RETRY) {
            return false;
        }
        self.wake.notify_one();
        true
    }
}

impl Waiter for BlockedClient {
    fn serve(&self, keys: &mut KeyAccess<'_>, key: &[u8]) -> Serve {
        if self.state.load(Acquire) != WAITING {
            return Serve::Dequeue;
        }
        match self.op.readiness(keys, key) {
            Readiness::WrongType => Serve::Skip,
            Readiness::Empty => Serve::Stop,
            Readiness::Retry => {
                if self.claim(RETRY) {
                    self.wake.notify_one();
                }
                Serve::Dequeue
            }
            Readiness::Ready => {
                if !self.claim(SERVED) {
                    return Serve::Dequeue;
                }
                // Not blocked any more as far as INFO and CLIENT LIST go,
                // even before its connection writes the reply.
                self.info.blocked.store(false, Relaxed);
                let mut out = Reply::new(self.resp3);
                self.op.serve(keys, key, &mut out);
                debug_assert!(!out.is_empty(), "a ready key must produce a reply");
                *self.reply.lock() = out.buf;
                self.wake.notify_one();
                Serve::Dequeue
            }
        }
    }
}

/// What a handler works with.
pub struct Ctx<'a> {
    pub keys: KeyAccess<'a>,
    pub client: &'a mut Client,
    /// The state commands share.
    pub node: &'a Node,
    /// Facts and actions only the server has.
    pub server: &'a dyn ServerControl,
    /// This worker's counters (EXEC records each queued command).
    pub worker: &'a crate::metrics::WorkerMetrics,
    /// True while EXEC runs queued commands: blocking commands must not block.
    pub in_exec: bool,
    /// True while a script runs the command (XREAD's BLOCK is refused there).
    pub in_script: bool,
    /// Set when the command asks to block.
    pub block: Option<BlockRequest>,
    /// Set by a handler that found a key not ready before changing
    /// anything (EXEC): the connection waits, then runs it again.
    pub pending: Option<crate::store::PendingRead>,
}

impl<'a> Ctx<'a> {
    /// A handler's context: not inside EXEC or a script, asking nothing yet.
    pub fn new(
        node: &'a Node,
        server: &'a dyn ServerControl,
        worker: &'a crate::metrics::WorkerMetrics,
        client: &'a mut Client,
        keys: KeyAccess<'a>,
    ) -> Self {
        Ctx { keys, client, node, server, worker, in_exec: false, in_script: false, block: None, pending: None }
    }

    /// The configuration: all a data command may know of the node beyond
    /// its keys and its client (`scripts/check-layers.sh` holds the data
    /// families to that).
    pub fn config(&self) -> &crate::config::Config {
        &self.node.config
    }

    /// Publishes keyspace event `event` (of class `class`, see
    /// `config::keyspace_events`) for `key` in the client's database, when
    /// `notify-keyspace-events` enables it; one load otherwise.
    #[inline]
    pub fn notify(&self, class: u32, event: &str, key: &[u8]) {
        self.keys.notify(class, event, key);
    }

    /// Whether a blocking command may block now (not inside MULTI/EXEC).
    pub fn can_block(&self) -> bool {
        !self.in_exec
    }

    /// Asks to block until `deadline_ms` (0 = forever) with nothing that can
    /// serve the client early (WAIT): the connection writes `on_timeout`.
    pub fn block(&mut self, keys: &[&[u8]], deadline_ms: u64, on_timeout: fn(&mut Reply)) {
        self.block_serving(keys, deadline_ms, on_timeout, Box::new(NeverReady));
    }

    /// Asks to block on `keys` until `deadline_ms` (0 = forever). The
    /// handler writes nothing; a later write to one of the keys serves the
    /// client through `op`, or the connection writes `on_timeout` at the
    /// deadline.
    pub fn block_serving(
        &mut self,
        keys: &[&[u8]],
        deadline_ms: u64,
        on_timeout: fn(&mut Reply),
        op: Box<dyn BlockedOp>,
    ) {
        let waiter = Arc::new(BlockedClient {
            state: AtomicU8::new(WAITING),
            wake: Notify::new(),
            reply: Default::default(),
            resp3: self.client.resp3,
            info: self.client.info.clone(),
            op,
        });
        let queued: Arc<dyn Waiter> = waiter.clone();
        self.keys.block_on(keys, &queued);
        self.client.info.blocked.store(true, Relaxed);
        *self.client.info.blocked_on.lock() = Some(waiter.clone());
        self.block = Some(BlockRequest {
            keys: keys.iter().map(|k| k.to_vec()).collect(),
            deadline_ms,
            waiter,
            on_timeout,
            db: self.keys.db,
        });
    }
}

/// The command table of every family, and the ACL catalog that names its
/// commands and subcommands: what `Node::new` serves.
pub fn command_table() -> (table::CommandTable, crate::session::acl::Catalog) {
    let table = table::CommandTable::new(all_commands());
    let catalog = command_meta::acl_catalog(&table);
    (table, catalog)
}

/// Every command family's table, in one list.
pub fn all_commands() -> Vec<&'static CommandDef> {
    let families: &[&'static [CommandDef]] = &[
        connection::COMMANDS,
        acl::COMMANDS,
        command_meta::COMMANDS,
        config::COMMANDS,
        info::COMMANDS,
        admin::COMMANDS,
        debug::COMMANDS,
        keys::COMMANDS,
        dump::COMMANDS,
        strings::COMMANDS,
        bitmaps::COMMANDS,
        lists::COMMANDS,
        hashes::COMMANDS,
        sets::COMMANDS,
        zsets::COMMANDS,
        streams::COMMANDS,
        hyperloglog::COMMANDS,
        geo::COMMANDS,
        sort::COMMANDS,
        transactions::COMMANDS,
        pubsub::COMMANDS,
        cluster::COMMANDS,
        scripting::COMMANDS,
        slowlog::COMMANDS,
        monitor::COMMANDS,
    ];
    families.iter().flat_map(|f| f.iter()).collect()
}
