//! Per-connection client state, and the registry CLIENT LIST/KILL read.
//!
//! `Client` is owned by the connection task and never shared. The parts
//! other clients may look at (CLIENT LIST, CLIENT KILL, INFO clients) live
//! in `ClientInfo`, behind an `Arc` in the registry; the owner updates them
//! with relaxed atomics, so there is no lock on the request path.

use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Instant;
use tokio::sync::{Notify, mpsc};

/// A message pushed to a subscribed client from another connection.
pub type PushMsg = Vec<u8>;

/// A blocked command CLIENT UNBLOCK can end (defined here, implemented by
/// the commands that block).
pub trait Unblock: Send + Sync {
    /// Ends the wait with the command's timeout reply, or with an UNBLOCKED
    /// error; false when it already ended.
    fn unblock(&self, error: bool) -> bool;
    /// Ends the wait to run the command again (cluster mode: its slot may
    /// have moved to another node); false when it already ended.
    fn retry(&self) -> bool;
}

/// Shared view of a client.
pub struct ClientInfo {
    pub id: u64,
    /// `ip:port` of the peer, or `/path:0` for Unix sockets (as Redis shows).
    pub addr: String,
    pub laddr: String,
    pub fd: i32,
    pub created: Instant,
    pub name: Mutex<Option<Vec<u8>>>,
    pub lib_name: Mutex<Option<Vec<u8>>>,
    pub lib_ver: Mutex<Option<Vec<u8>>>,
    pub db: AtomicU32,
    pub resp: AtomicU8,
    /// Unix ms of the last command.
    pub last_active_ms: AtomicU64,
    /// Index of the last command in the command table (u32::MAX = none).
    pub last_cmd: AtomicU32,
    pub subs: AtomicU32,
    pub psubs: AtomicU32,
    pub ssubs: AtomicU32,
    /// Queued commands in MULTI, or -1 (u32::MAX) when not in MULTI.
    pub multi: AtomicU32,
    pub qbuf: AtomicUsize,
    pub obuf: AtomicUsize,
    /// Bytes of pub/sub messages queued for this client and not yet written.
    pub pending_push: AtomicUsize,
    pub no_evict: AtomicBool,
    pub no_touch: AtomicBool,
    pub blocked: AtomicBool,
    pub killed: AtomicBool,
    /// Wakes the connection for anything that is not its own input: a
    /// pub/sub message, CLIENT KILL, shutdown. One notifier (instead of one
    /// per cause) keeps the connection's wait loop to two futures.
    pub attention: Notify,
    /// Pub/sub deliveries (followed by `attention`).
    pub push_tx: mpsc::UnboundedSender<PushMsg>,
    /// Which worker thread owns this client (it may move, see `balance`).
    pub worker: AtomicUsize,
    /// Name of the ACL user it runs as (CLIENT LIST, CLIENT KILL USER,
    /// ACL DELUSER).
    pub user: Mutex<Vec<u8>>,
    /// CLIENT TRACKING mode (`tracking::mode` bits); 0 = off.
    pub tracking: AtomicU32,
    /// The client invalidations are redirected to (0 = none).
    pub redirect: AtomicU64,
    /// BCAST prefixes, sorted.
    pub prefixes: Mutex<Vec<Vec<u8>>>,
    /// The command this client is blocked in, for CLIENT UNBLOCK.
    pub blocked_on: Mutex<Option<Arc<dyn Unblock>>>,
}

impl ClientInfo {
    pub fn kill(&self) {
        self.killed.store(true, Relaxed);
        self.attention.notify_one();
    }

    /// Queues a pub/sub message; false when the connection is gone.
    pub fn push(&self, msg: PushMsg) -> bool {
        let ok = self.push_tx.send(msg).is_ok();
        self.attention.notify_one();
        ok
    }
}

/// A queued MULTI command (owned copies of its arguments).
pub struct Queued {
    pub cmd: usize,
    pub args: Vec<Vec<u8>>,
}

/// State owned by the connection task.
/// Which of the node's ports a client came in on: in cluster mode it
/// decides what a command for another node's slot gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PortKind {
    /// `port` (and the Unix socket): forwarded to the slot's owner.
    #[default]
    Plain,
    /// `cluster-direct-port`: MOVED, as from a Redis Cluster node.
    Direct,
    /// `cluster-port`: topology pushes and other nodes' forwarded commands.
    Admin,
}

pub struct Client {
    pub info: Arc<ClientInfo>,
    pub port: PortKind,
    /// Cluster mode: ASKING (the next command may use an importing slot),
    /// READONLY (replica reads; a node has no replicas yet).
    pub asking: bool,
    pub readonly: bool,
    /// Cluster mode, admin port: the connection a migration's source sends
    /// its keys on — the slots it may write though this node does not
    /// serve them yet, and the migration's id.
    pub importing: Option<(std::sync::Arc<crate::base::slot::SlotSet>, std::sync::Arc<str>)>,
    pub db: usize,
    pub resp3: bool,
    pub authenticated: bool,
    /// The ACL user commands run as, as of `acl_generation` of the table.
    pub user: Arc<super::acl::User>,
    /// Generation of the user table `user` was read from (0: never read).
    pub acl_generation: u64,
    /// Some while inside MULTI.
    pub multi: Option<Vec<Queued>>,
    /// A queued command was rejected: EXEC must fail with EXECABORT.
    pub multi_dirty: bool,
    /// The error the running command is about to reply with was counted
    /// where it arose (a command a script called): INFO errorstats counts
    /// it once, as Redis does.
    pub error_counted: bool,
    /// WATCHes dropped by an EXEC refused while a script held the keyspace
    /// (it could not lock their partitions then): released later.
    pub stale_watches: Vec<(usize, Vec<u8>, u64)>,
    /// WATCHed keys: (db, key, version at WATCH time).
    pub watched: Vec<(usize, Vec<u8>, u64)>,
    pub channels: HashSet<Vec<u8>>,
    pub patterns: HashSet<Vec<u8>>,
    pub shard_channels: HashSet<Vec<u8>>,
    pub no_touch: bool,
    pub no_evict: bool,
    /// In MONITOR mode: sees every command, may not touch keys.
    pub monitor: bool,
    /// Close the connection after writing the pending replies (QUIT).
    pub close_after_reply: bool,
    /// CLIENT REPLY OFF/SKIP support.
    pub reply_off: bool,
    pub reply_skip_next: bool,
    /// The current command's reply is written even under CLIENT REPLY
    /// OFF/SKIP: RESP3 subscription confirmations (pushes), and CLIENT
    /// REPLY ON's own OK.
    pub reply_always: bool,
    /// Wall-clock time of the current batch of requests, unix ms. Read once
    /// per batch: commands in one pipeline see the same time, as a Redis
    /// command does within itself.
    pub now_ms: u64,
    /// When the previous command finished (or the batch began): the start
    /// of the next command's latency measurement, so each command costs one
    /// clock read.
    pub clock_mark_ns: u64,
    /// Command-table index of the previous request's name (usize::MAX =
    /// none): a pipeline of one command skips the table lookup.
    pub last_lookup: usize,
}

impl Client {
    pub fn new(info: Arc<ClientInfo>, authenticated: bool) -> Self {
        Client {
            info,
            port: PortKind::Plain,
            asking: false,
            importing: None,
            readonly: false,
            db: 0,
            resp3: false,
            authenticated,
            user: super::acl::User::placeholder(),
            acl_generation: 0,
            multi: None,
            multi_dirty: false,
            error_counted: false,
            stale_watches: Vec::new(),
            watched: Vec::new(),
            channels: HashSet::new(),
            patterns: HashSet::new(),
            shard_channels: HashSet::new(),
            no_touch: false,
            no_evict: false,
            monitor: false,
            close_after_reply: false,
            reply_off: false,
            reply_skip_next: false,
            reply_always: false,
            now_ms: crate::store::now_ms(),
            clock_mark_ns: crate::store::command_ns(),
            last_lookup: usize::MAX,
        }
    }

    /// Starts a new batch: refreshes the command clock and the latency mark.
    pub fn begin_batch(&mut self) {
        self.now_ms = crate::store::now_ms();
        self.clock_mark_ns = crate::store::command_ns();
        self.info.last_active_ms.store(self.now_ms, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn id(&self) -> u64 {
        self.info.id
    }

    /// Runs as `user` from now on (AUTH, HELLO AUTH, RESET).
    pub fn set_user(&mut self, user: Arc<super::acl::User>, generation: u64) {
        *self.info.user.lock() = user.name.clone();
        self.user = user;
        self.acl_generation = generation;
    }

    /// Re-reads its user when the table changed since it last did. One
    /// relaxed load per command otherwise.
    #[inline]
    pub fn refresh_user(&mut self, acl: &super::acl::Acl) {
        let generation = acl.generation();
        if generation != self.acl_generation {
            // A deleted user's clients are killed; until they go, they keep
            // what they had.
            if let Some(u) = acl.user(&self.user.name) {
                self.user = u;
            }
            self.acl_generation = generation;
        }
    }

    /// Subscribed to anything (RESP2 clients are then limited to pub/sub commands).
    pub fn in_pubsub(&self) -> bool {
        !self.channels.is_empty() || !self.patterns.is_empty() || !self.shard_channels.is_empty()
    }

    pub fn subscription_count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }
}

/// All connected clients, for CLIENT LIST / KILL / INFO.
#[derive(Default)]
pub struct ClientRegistry {
    map: Mutex<HashMap<u64, Arc<ClientInfo>>>,
    next_id: AtomicU64,
    pub connected: AtomicUsize,
}

impl ClientRegistry {
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Relaxed) + 1
    }

    pub fn add(&self, info: Arc<ClientInfo>) {
        self.map.lock().insert(info.id, info);
        self.connected.fetch_add(1, Relaxed);
    }

    pub fn remove(&self, id: u64) {
        if self.map.lock().remove(&id).is_some() {
            self.connected.fetch_sub(1, Relaxed);
        }
    }

    pub fn get(&self, id: u64) -> Option<Arc<ClientInfo>> {
        self.map.lock().get(&id).cloned()
    }

    /// A snapshot, ordered by id.
    pub fn all(&self) -> Vec<Arc<ClientInfo>> {
        let mut v: Vec<_> = self.map.lock().values().cloned().collect();
        v.sort_by_key(|c| c.id);
        v
    }

    pub fn count(&self) -> usize {
        self.connected.load(Relaxed)
    }
}
