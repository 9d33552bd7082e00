//! One client connection: read, execute every complete request in the
//! buffer, answer them all with one write (pipelining for free), repeat.
//! Also: blocking commands, pub/sub pushes, idle timeout, CLIENT KILL,
//! query-buffer limits, and graceful shutdown.

use super::{NewConn, Shared};
use crate::commands::dispatch;
use crate::commands::pipeline::{Outcome, Refusal};
use crate::commands::{BlockRequest, Keys, Woken, flags};
use crate::metrics::{ServerStats, WorkerMetrics};
use crate::protocol::{Limits, Parse, Reply, Request, is_cross_protocol_attack, parse_request};
use crate::session::client::{Client, ClientInfo, PortKind, PushMsg};
use crate::store::PendingRead;
use crate::sys::socket::ClientSocket;
use smallvec::SmallVec;
use std::cell::RefCell;
use std::os::fd::{AsRawFd, OwnedFd};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tokio::sync::futures::Notified;
use tokio::sync::mpsc;
use tracing::debug;

const READ_CHUNK: usize = 16 * 1024;
/// Largest buffer kept as a worker's spare; bigger ones, grown for a big
/// request or reply, are freed.
const MAX_SPARE: usize = 64 * 1024;

thread_local! {
    /// Each worker's spare read and output buffers. A connection takes them
    /// when input arrives and gives them back once a batch leaves nothing
    /// in them, so an idle connection holds no buffer (as Redis's reusable
    /// query buffer) and a busy one does not allocate per request.
    static SPARE: RefCell<(Vec<u8>, Vec<u8>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}
/// Replies accumulated past this size are written before more requests run,
/// so a pipeline of large replies to a slow reader cannot grow the output
/// buffer without bound (the reader's socket applies back-pressure).
const OUT_FLUSH_AT: usize = 256 * 1024;

pub async fn serve(conn: NewConn, shared: Arc<Shared>, worker: usize) {
    let new_state = |addr: String, laddr: String, fd: i32, port: PortKind| {
        let (push_tx, push_rx) = mpsc::unbounded_channel();
        let id = shared.clients.next_id();
        ServerStats::add(&shared.workers[worker].server.connections_received, 1);
        let info = new_info(id, addr, laddr, fd, push_tx, worker);
        ConnState::new(&shared, info, push_rx, port)
    };
    let (fd, mut state, tls) = match conn {
        NewConn::Tcp(std, peer, local, port, tls) => {
            let _ = std.set_nonblocking(true);
            let _ = std.set_nodelay(true);
            crate::sys::socket::set_keepalive(&std, shared.config.runtime.tcp_keepalive.load(Relaxed));
            let state = new_state(peer.to_string(), local.to_string(), std.as_raw_fd(), port);
            let session = if tls {
                let started = shared.tls.as_ref().map(|ctx| ctx.session().map(|s| (ctx, s)));
                match started {
                    Some(Ok((ctx, session))) => {
                        ctx.connections.fetch_add(1, Relaxed);
                        Some(Box::new(session))
                    }
                    failed => {
                        if let Some(Err(e)) = failed {
                            tracing::warn!(%peer, "cannot start a TLS session: {e}");
                        }
                        // Closed as any connection is, so the worker's count goes down.
                        return state.close(&shared, worker);
                    }
                }
            } else {
                None
            };
            (OwnedFd::from(std), state, session)
        }
        NewConn::Unix(std, path) => {
            let _ = std.set_nonblocking(true);
            let state = new_state(format!("{path}:0"), format!("{path}:0"), std.as_raw_fd(), PortKind::Plain);
            (OwnedFd::from(std), state, None)
        }
        NewConn::Moved(moved) => (moved.fd, moved.state, moved.tls),
    };
    state.seen_epoch = shared.balance.epoch(worker);
    let is_tls = tls.is_some();
    match ClientSocket::new(fd, tls) {
        Ok(socket) => drive(socket, state, shared, worker).await,
        Err(e) => {
            tracing::warn!(client = state.info.id, "cannot register connection: {e}");
            state.close(&shared, worker);
            tls_closed(&shared, is_tls);
        }
    }
}

/// A TLS client is gone: it no longer counts in `tls_connected_clients`.
fn tls_closed(shared: &Shared, was_tls: bool) {
    if was_tls && let Some(ctx) = &shared.tls {
        ctx.connections.fetch_sub(1, Relaxed);
    }
}

/// A connection on its way from one worker to another: the socket, out of
/// the old worker's event loop, and everything the client had.
pub struct MovedConn {
    fd: OwnedFd,
    state: ConnState,
    tls: Option<Box<rustls::ServerConnection>>,
}

/// Serves a connection on this worker until it closes or moves away.
async fn drive(mut socket: ClientSocket, mut state: ConnState, shared: Arc<Shared>, worker: usize) {
    let is_tls = socket.is_tls();
    match run(&mut socket, &mut state, &shared, worker).await {
        Exit::Close => {
            state.close(&shared, worker);
            socket.shutdown_write();
            tls_closed(&shared, is_tls);
        }
        Exit::Move(to) => {
            let (fd, tls) = match socket.detach() {
                Ok(parts) => parts,
                Err(_) => {
                    tls_closed(&shared, is_tls);
                    return state.close(&shared, worker);
                }
            };
            shared.balance.moved(worker, to);
            state.info.worker.store(to, Relaxed);
            let moved = Box::new(MovedConn { fd, state, tls });
            if let Err(mpsc::error::SendError(NewConn::Moved(back))) = shared.worker_tx(to).send(NewConn::Moved(moved))
            {
                // The target worker has stopped (shutdown): close here.
                shared.balance.moved(to, worker);
                back.state.close(&shared, worker);
                tls_closed(&shared, back.tls.is_some());
            }
        }
    }
}

fn new_info(
    id: u64,
    addr: String,
    laddr: String,
    fd: i32,
    push_tx: mpsc::UnboundedSender<PushMsg>,
    worker: usize,
) -> Arc<ClientInfo> {
    Arc::new(ClientInfo {
        id,
        addr,
        laddr,
        fd,
        created: std::time::Instant::now(),
        name: Default::default(),
        lib_name: Default::default(),
        lib_ver: Default::default(),
        db: Default::default(),
        resp: 2.into(),
        last_active_ms: crate::store::now_ms().into(),
        last_cmd: u32::MAX.into(),
        subs: Default::default(),
        psubs: Default::default(),
        ssubs: Default::default(),
        multi: u32::MAX.into(),
        qbuf: Default::default(),
        obuf: Default::default(),
        pending_push: Default::default(),
        no_evict: Default::default(),
        no_touch: Default::default(),
        blocked: Default::default(),
        killed: Default::default(),
        attention: Default::default(),
        push_tx,
        worker: worker.into(),
        user: parking_lot::Mutex::new(b"default".to_vec()),
        tracking: Default::default(),
        redirect: Default::default(),
        prefixes: Default::default(),
        blocked_on: Default::default(),
    })
}

/// Everything a connection carries between requests; moves with it when it
/// changes worker.
struct ConnState {
    info: Arc<ClientInfo>,
    push_rx: mpsc::UnboundedReceiver<PushMsg>,
    client: Client,
    bufs: Buffers,
    /// The last shed epoch of its worker this connection considered.
    seen_epoch: u32,
}

impl ConnState {
    fn new(shared: &Shared, info: Arc<ClientInfo>, push_rx: mpsc::UnboundedReceiver<PushMsg>, port: PortKind) -> Self {
        shared.clients.add(info.clone());
        // The admin port has its own password (or none: local development).
        let authenticated = match port {
            PortKind::Admin => shared.node.cluster.as_ref().is_none_or(|c| c.admin_password.is_none()),
            _ => !shared.config.runtime.has_password.load(Relaxed),
        };
        let mut client = Client::new(info.clone(), authenticated);
        client.port = port;
        // No buffers until input arrives.
        let bufs = Buffers {
            rbuf: Vec::new(),
            start: 0,
            out: Reply { buf: Vec::new(), resp3: false },
            accounted: 0,
            awaited: Vec::new(),
            base: 0,
            ahead: super::read_ahead::Ahead::new(),
        };
        ConnState { info, push_rx, client, bufs, seen_epoch: 0 }
    }

    /// Clean-up when the connection ends: subscriptions, watches, registry, memory.
    fn close(mut self, shared: &Shared, worker: usize) {
        self.bufs.rbuf.clear();
        self.bufs.out.buf.clear();
        self.bufs.release();
        shared.pubsub.unsubscribe_all(&mut self.client);
        if self.client.monitor {
            shared.monitors.remove(self.info.id);
        }
        if self.info.tracking.load(Relaxed) != 0 {
            let broadcasting = shared.tracking.disable(&self.info);
            shared.ks.set_broadcasting(broadcasting);
        }
        crate::commands::transactions::unwatch_all(&shared.node, &mut self.client);
        shared.memory.add_connection_bytes(-self.bufs.accounted);
        shared.clients.remove(self.info.id);
        shared.balance.load(worker).conns.fetch_sub(1, Relaxed);
    }
}

/// How a connection left this worker's loop.
enum Exit {
    Close,
    /// Asked to continue on another worker.
    Move(usize),
}

/// Connection buffers, with their footprint reported to `conn_mem`.
struct Buffers {
    rbuf: Vec<u8>,
    /// Start of unparsed data in `rbuf`.
    start: usize,
    out: Reply,
    accounted: i64,
    /// Forwarded requests' replies to put in `out` before it is written.
    awaited: Vec<Awaited>,
    /// Input bytes consumed before `rbuf[0]` (positions in the stream).
    base: u64,
    /// Disk reads started for requests behind one that waits.
    ahead: super::read_ahead::Ahead,
}

impl Buffers {
    fn footprint(&self) -> i64 {
        (self.rbuf.capacity() + self.out.buf.capacity()) as i64
    }

    fn account(&mut self, shared: &Shared) {
        let now = self.footprint();
        if now != self.accounted {
            shared.memory.add_connection_bytes(now - self.accounted);
            self.accounted = now;
        }
    }

    /// Drops consumed bytes and shrinks buffers that grew for one big request.
    fn compact(&mut self) {
        if self.start > 0 {
            self.rbuf.drain(..self.start);
            self.base += self.start as u64;
            self.start = 0;
        }
        if self.rbuf.capacity() > 4 * READ_CHUNK && self.rbuf.len() < READ_CHUNK {
            self.rbuf.shrink_to(READ_CHUNK);
        }
        if self.out.buf.capacity() > 64 * 1024 && self.out.buf.is_empty() {
            self.out.buf.shrink_to(16 * 1024);
        }
    }

    /// Room to read into: the worker's spare buffer if this connection has
    /// none (called once input is there).
    fn make_room(rbuf: &mut Vec<u8>) {
        if rbuf.capacity() == 0 {
            *rbuf = SPARE.with_borrow_mut(|spare| std::mem::take(&mut spare.0));
        }
        if rbuf.capacity() - rbuf.len() < READ_CHUNK / 2 {
            rbuf.reserve(READ_CHUNK);
        }
    }

    /// The worker's spare output buffer for a batch of replies, if this
    /// connection has none.
    fn take_out(&mut self) {
        if self.out.buf.capacity() == 0 {
            self.out.buf = SPARE.with_borrow_mut(|spare| std::mem::take(&mut spare.1));
        }
    }

    /// Gives empty buffers back to the worker (call with every reply written
    /// and every complete request consumed).
    fn release(&mut self) {
        fn give_back(buf: &mut Vec<u8>, spare: &mut Vec<u8>) {
            let buf = std::mem::take(buf);
            if spare.capacity() == 0 && buf.capacity() <= MAX_SPARE {
                *spare = buf;
            }
        }
        if self.rbuf.is_empty() && self.rbuf.capacity() > 0 {
            SPARE.with_borrow_mut(|spare| give_back(&mut self.rbuf, &mut spare.0));
        }
        if self.out.buf.is_empty() && self.out.buf.capacity() > 0 {
            SPARE.with_borrow_mut(|spare| give_back(&mut self.out.buf, &mut spare.1));
        }
    }
}

/// A command waiting for a push to serve it.
struct BlockedCmd {
    /// Owned copy of the arguments, re-run if the push asks for a retry.
    args: Vec<Vec<u8>>,
    block: BlockRequest,
    /// CLIENT REPLY OFF/SKIP applied to the command: its eventual reply is
    /// dropped too.
    quiet: bool,
}

/// The connection's wake-up for anything other than its own input: a
/// pub/sub message, CLIENT KILL, shutdown. Created once and re-armed only
/// when it fires, so there is no waiter churn per request — and one armed
/// future for the whole connection, including while a command blocks.
struct Attention<'a, 'p> {
    info: &'a ClientInfo,
    notified: Pin<&'p mut Notified<'a>>,
}

impl Attention<'_, '_> {
    async fn fired(&mut self) {
        self.notified.as_mut().await;
        self.notified.set(self.info.attention.notified());
    }
}

/// Why processing the buffer stopped.
enum Step {
    /// All complete requests done; read more.
    NeedMore,
    /// Output is large: write it, then continue with the buffered requests.
    Flush,
    /// A command blocked.
    Blocked(BlockedCmd),
    /// A command's keys are not ready: wait, then run it again (it is still
    /// first in the buffer).
    Pending(PendingRead),
    /// Protocol error or QUIT: write what we have and close.
    Close,
}

/// A request on its way to another node.
struct Relay {
    addr: std::sync::Arc<str>,
    slot: u16,
    bytes: Vec<u8>,
    replies: usize,
    dedicated: bool,
    read_only: bool,
}

/// A forwarded request's reply still to come, and where in the output it
/// goes (the replies of the requests after it are already there).
struct Awaited {
    at: usize,
    reply: super::forward::Pending,
    /// The owner's admin address it went to, and the command's slot.
    addr: std::sync::Arc<str>,
    slot: u16,
    /// When it was sent (`mono_ns`).
    sent_ns: u64,
    /// A blocking command, on a connection of its own.
    dedicated: bool,
    /// A read-only command: sent again after -LOADING even if it may have
    /// run (`await_relayed`).
    read_only: bool,
    /// A fanned-out command: the local reply, the others' still to come,
    /// and whether integers add up (`reply` is the first other node's).
    fan_out: Option<FannedOut>,
}

struct FannedOut {
    local: Vec<u8>,
    others: Vec<super::forward::Pending>,
    sum: bool,
}

/// The one reply of a fanned-out command: integers summed (DBSIZE), or
/// the local reply unless a node answered with an error.
fn combine(local: Vec<u8>, others: Vec<Result<Vec<u8>, String>>, sum: bool) -> Vec<u8> {
    let int = |r: &[u8]| -> Option<i64> {
        r.strip_prefix(b":").and_then(|r| std::str::from_utf8(r).ok()).and_then(|r| r.trim_end().parse().ok())
    };
    if local.first() == Some(&b'-') {
        return local;
    }
    let mut total = if sum { int(&local) } else { None };
    for r in others {
        match r {
            Ok(r) if r.first() == Some(&b'-') => return r,
            Ok(r) => total = total.and_then(|t| int(&r).map(|n| t + n)),
            Err(e) => return format!("-ERR cannot reach every node of the cluster: {e}\r\n").into_bytes(),
        }
    }
    match total {
        Some(t) if sum => format!(":{t}\r\n").into_bytes(),
        _ => local,
    }
}

async fn run(stream: &mut ClientSocket, state: &mut ConnState, shared: &Shared, worker: usize) -> Exit {
    let metrics = &*shared.workers[worker];
    let ConnState { info, push_rx, client, bufs, seen_epoch } = state;
    let info = &**info;
    let mut req = Request::default();
    let attention = info.attention.notified();
    tokio::pin!(attention);
    let mut attention = Attention { info, notified: attention };

    'conn: loop {
        // Messages published to us while we were busy go out with the next write.
        // `pending_push` is raised before a message is queued (and its
        // notify makes it visible), so an idle channel costs one load.
        if info.pending_push.load(Relaxed) != 0 {
            while let Ok(msg) = push_rx.try_recv() {
                deliver_push(info, &mut bufs.out, msg);
            }
        }
        if !bufs.out.is_empty() && flush(stream, &mut bufs.out, metrics, &mut attention, shared).await.is_err() {
            break;
        }
        // Between batches, with every reply written: the one point where the
        // connection may move to another worker.
        if shared.shutting_down.load(Relaxed) {
            // Also for a client that never stops sending.
            break;
        }
        if let Some(to) = shared.balance.should_leave(worker, seen_epoch) {
            return Exit::Move(to);
        }
        // Read more input, unless something else needs attention first.
        let idle = shared.config.runtime.timeout.load(Relaxed);
        let idle_timer = async {
            if idle == 0 || client.in_pubsub() {
                std::future::pending::<()>().await
            } else {
                tokio::time::sleep(Duration::from_secs(idle)).await
            }
        };
        tokio::select! {
            biased;
            r = stream.read_buf(&mut bufs.rbuf, Buffers::make_room) => match r {
                Ok(0) => break 'conn,
                Err(e) => {
                    read_failed(shared, info.id, &e);
                    break 'conn;
                }
                Ok(n) => ServerStats::add(&metrics.server.net_input_bytes, n as u64),
            },
            _ = attention.fired() => {
                if info.killed.load(Relaxed) || shared.shutting_down.load(Relaxed) {
                    break 'conn;
                }
                continue 'conn;
            }
            _ = idle_timer => { debug!(client = info.id, "closing idle client"); break 'conn; }
        }
        if info.killed.load(Relaxed) {
            break;
        }
        let qlimit = shared.config.runtime.client_query_buffer_limit.load(Relaxed);
        if bufs.rbuf.len() - bufs.start > qlimit {
            tracing::warn!(client = info.id, addr = %info.addr, "closing client that exceeded client-query-buffer-limit");
            break;
        }

        // Execute everything complete, handling blocking commands in between.
        bufs.take_out();
        // A command that waited (a script, a disk read) counts its wait in
        // its duration (INFO, SLOWLOG, LATENCY): it restarts from its mark.
        let mut resume: Option<Resume> = None;
        loop {
            let step = process(shared, metrics, client, bufs, &mut req, resume.take());
            // Forwarded requests' replies take their places before anything is written.
            if !bufs.awaited.is_empty() && !settle_relays(bufs, info, &mut attention, shared, metrics).await {
                break 'conn;
            }
            match step {
                Step::NeedMore => break,
                Step::Flush => {
                    if flush(stream, &mut bufs.out, metrics, &mut attention, shared).await.is_err() {
                        break 'conn;
                    }
                }
                Step::Close => {
                    let _ = flush(stream, &mut bufs.out, metrics, &mut attention, shared).await;
                    break 'conn;
                }

                Step::Pending(wait) => {
                    // No cold value and no test delay: the wait is a pause or a script's.
                    resume = Some(Resume { mark: client.clock_mark_ns, disk: shared.ks.may_pend() });
                    // The disk reads of the requests behind it start now too.
                    let Buffers { rbuf, start, base, ahead, .. } = bufs;
                    super::read_ahead::read_ahead(shared, client, rbuf, *start, *base, ahead, &mut req);
                    // Replies of the requests before it go out meanwhile.
                    if flush(stream, &mut bufs.out, metrics, &mut attention, shared).await.is_err() {
                        break 'conn;
                    }
                    if !wait_pending(wait, &mut attention, shared).await {
                        break 'conn;
                    }
                }
                Step::Blocked(cmd) => {
                    if flush(stream, &mut bufs.out, metrics, &mut attention, shared).await.is_err() {
                        // Leaving: whatever a push may have served is lost, as in Redis.
                        cmd.block.waiter.cancel();
                        cmd.block.unregister(&shared.ks);
                        break 'conn;
                    }
                    // Blocked clients can be many and wait long: without buffers.
                    bufs.compact();
                    bufs.release();
                    if !wait_blocked(stream, shared, metrics, client, bufs, &mut attention, cmd).await {
                        break 'conn;
                    }
                }
            }
        }
        if !bufs.out.is_empty() && flush(stream, &mut bufs.out, metrics, &mut attention, shared).await.is_err() {
            break;
        }
        if client.close_after_reply {
            break;
        }
        bufs.ahead.consumed(bufs.base + bufs.start as u64);
        bufs.compact();
        bufs.release();
        bufs.account(shared);
        info.qbuf.store(bufs.rbuf.len(), Relaxed);
    }

    Exit::Close
}

/// The bytes that carry a forwarded request: the command, or for EXEC the
/// whole transaction (which ends here: it runs on the owner).
fn relay_for(
    node: &crate::commands::Node,
    client: &mut Client,
    f: crate::commands::pipeline::Forward,
    args: &[&[u8]],
) -> Relay {
    use super::forward::encode;
    let mut bytes = Vec::new();
    let mut replies = 1;
    if f.transaction {
        let queued = client.multi.take().unwrap_or_default();
        encode(&mut bytes, &[b"MULTI"]);
        for q in &queued {
            let argv: SmallVec<[&[u8]; 8]> = q.args.iter().map(|a| a.as_slice()).collect();
            encode(&mut bytes, &argv);
        }
        encode(&mut bytes, args);
        replies = queued.len() + 2;
        crate::commands::transactions::discard_transaction(node, client);
    } else {
        encode(&mut bytes, args);
    }
    Relay { addr: f.addr, slot: f.slot, bytes, replies, dedicated: f.dedicated, read_only: f.read_only }
}

/// Puts forwarded requests' replies in their places in the output, in
/// order; false when the client went away (killed, shutdown) meanwhile.
async fn settle_relays(
    bufs: &mut Buffers,
    info: &ClientInfo,
    attention: &mut Attention<'_, '_>,
    shared: &Shared,
    metrics: &WorkerMetrics,
) -> bool {
    let awaited = std::mem::take(&mut bufs.awaited);
    let resp3 = bufs.out.resp3;
    let tail = bufs.out.buf.split_off(awaited[0].at.min(bufs.out.buf.len()));
    let base = bufs.out.buf.len();
    let mut copied = awaited[0].at.min(base + tail.len());
    for a in awaited {
        let at = a.at.min(base + tail.len());
        bufs.out.buf.extend_from_slice(&tail[copied - base..at - base]);
        copied = at;
        let others = a.fan_out.as_ref().map_or(0, |f| f.others.len());
        let settled = async {
            match a.fan_out {
                None => await_relayed(a.reply, a.addr, a.slot, shared, resp3, a.dedicated, a.read_only).await,
                Some(f) => {
                    let settle = |p| async { super::forward::settle(p).await.map(|r| r.reply).map_err(|f| f.error) };
                    let mut all = vec![settle(a.reply).await];
                    for p in f.others {
                        all.push(settle(p).await);
                    }
                    Ok(combine(f.local, all, f.sum))
                }
            }
        };
        let Some(reply) = unless_gone(settled, info, attention, shared).await else { return false };
        if others == 0 {
            metrics.cluster.forward_latency.record(crate::store::mono_ns().saturating_sub(a.sent_ns));
        }
        if !put_relayed(&mut bufs.out, reply) {
            crate::metrics::ClusterStats::add(&metrics.cluster.forward_errors, 1);
        }
    }
    bufs.out.buf.extend_from_slice(&tail[copied - base..]);
    true
}

/// How this node's links introduce themselves to the other nodes' admin ports.
fn hello(shared: &Shared, resp3: bool) -> super::forward::Hello<'_> {
    let cluster = shared.node.cluster.as_ref();
    super::forward::Hello {
        password: cluster.and_then(|c| c.admin_password.as_deref()),
        resp3,
        tls: cluster.map(|c| &*c.link_tls),
    }
}

/// Awaits `work` while minding the connection: None when the client was
/// killed or the node shuts down meanwhile.
async fn unless_gone<T>(
    work: impl std::future::Future<Output = T>,
    info: &ClientInfo,
    attention: &mut Attention<'_, '_>,
    shared: &Shared,
) -> Option<T> {
    tokio::pin!(work);
    loop {
        tokio::select! {
            r = &mut work => return Some(r),
            _ = attention.fired() => {
                if info.killed.load(Relaxed) || shared.shutting_down.load(Relaxed) {
                    return None;
                }
            }
        }
    }
}

/// Puts a forwarded request's reply (or why there is none) in the output;
/// false for an owner that could not be reached.
fn put_relayed(out: &mut Reply, reply: Result<Vec<u8>, String>) -> bool {
    match reply {
        Ok(bytes) => out.raw(&bytes),
        Err(e) => {
            out.error(&format!("ERR cannot reach the node serving this hash slot: {e}"));
            return false;
        }
    }
    true
}

/// Times a forwarded request is sent again after its owner answered MOVED.
const MOVED_RETRIES: u64 = 5;
/// How long a forwarded request keeps being sent again while its owner
/// cannot be reached (a pod restarting in a rolling update), or answers
/// -LOADING (replaying its log after the restart), before the client gets
/// the error.
const UNREACHABLE_RETRY_FOR: Duration = Duration::from_secs(10);

/// Waits for a forwarded request's reply. An owner that answers MOVED has
/// not applied the topology this node routed by yet (a push under way), or
/// has just handed the slot over in a migration: the request goes again,
/// to where the MOVED points (or the topology names by then; this node
/// included, through its own admin port), a few times, so that a plain
/// client does not see the redirection. An owner that cannot be reached
/// (its link failed: restarting) gets the request again, with a growing
/// pause, for `UNREACHABLE_RETRY_FOR` at most; so does one the owner
/// refused with -LOADING (not run: safe to send again), so that a short
/// replay after a restart is latency, not an error, for a plain client —
/// unless it went out on a link that failed before and may write: the
/// owner may have run it just before dying, and its -LOADING goes to the
/// client (retried until it ran, it would run twice). (A request the owner ran
/// just before dying, unanswered, and sent again to a restarted owner that
/// has already loaded thus runs twice: as with a client library that
/// retries on connection errors.)
async fn await_relayed(
    pending: super::forward::Pending,
    addr: std::sync::Arc<str>,
    slot: u16,
    shared: &Shared,
    resp3: bool,
    dedicated: bool,
    read_only: bool,
) -> Result<Vec<u8>, String> {
    use crate::cluster::Route;
    let Some(c) = shared.node.cluster.as_ref() else { return settle_once(pending).await };
    let started = std::time::Instant::now();
    let (mut moved, mut failures, mut loading) = (0u64, 0u32, 0u32);
    // Written on a link that then failed: the owner may have run it.
    let mut maybe_ran = false;
    let mut pending = pending;
    // Who the request went to, by member id (a restarted pod keeps its id,
    // not its address), and the epoch that said so.
    let by_addr = |addr: &str| {
        c.with(|t| t.and_then(|t| t.members.iter().find(|m| &*m.admin_addr == addr)).map(|m| m.id.clone()))
    };
    let mut owner = (by_addr(&addr), c.epoch());
    let mut addr = addr;
    loop {
        let (request, replies) = match super::forward::settle(pending).await {
            Ok(r)
                if (read_only || !maybe_ran)
                    && r.reply.starts_with(b"-LOADING")
                    && started.elapsed() < UNREACHABLE_RETRY_FOR =>
            {
                loading += 1;
                tokio::time::sleep(Duration::from_millis((25u64 << loading.min(5)).min(500))).await;
                (r.request, r.replies)
            }
            Ok(r) => {
                let Some(endpoint) = r.reply.strip_prefix(b"-MOVED ").and_then(|rest| {
                    let text = std::str::from_utf8(rest).ok()?.trim_end();
                    Some(text.split_once(' ')?.1.to_string())
                }) else {
                    return Ok(r.reply);
                };
                moved += 1;
                if moved > MOVED_RETRIES {
                    return Ok(r.reply);
                }
                tokio::time::sleep(Duration::from_millis(20 * moved)).await;
                // Where the MOVED points (a migration committed before the
                // operator's push reached this node), else where this
                // node's topology says the slot is.
                let found = c.with(|t| {
                    let t = t?;
                    let m = match t.members.iter().find(|m| c.endpoint(m) == endpoint) {
                        Some(m) => m,
                        None => match t.route(slot) {
                            Route::Mine => t.me(),
                            Route::Elsewhere(i) => &t.members[i],
                            Route::Unassigned => return None,
                        },
                    };
                    Some((m.admin_addr.clone(), m.id.clone(), t.epoch))
                });
                let Some((next, id, epoch)) = found else { return Ok(r.reply) };
                (addr, owner) = (next, (Some(id), epoch));
                (r.request, r.replies)
            }
            Err(f) => {
                maybe_ran |= f.sent;
                if f.request.is_empty() || started.elapsed() >= UNREACHABLE_RETRY_FOR {
                    return Err(f.error);
                }
                failures += 1;
                tokio::time::sleep(Duration::from_millis((25u64 << failures.min(5)).min(500))).await;
                // The same owner again, at its address now (a restarted pod
                // may have a new one, which the operator pushes) — unless a
                // newer topology gives the slot to another node.
                let found = c.with(|t| {
                    let t = t?;
                    let same = owner.0.as_deref().and_then(|id| t.members.iter().find(|m| m.id == id));
                    let m = match same {
                        Some(m) if t.epoch <= owner.1 => m,
                        _ => match t.route(slot) {
                            Route::Mine => t.me(),
                            Route::Elsewhere(i) => &t.members[i],
                            Route::Unassigned => return None,
                        },
                    };
                    Some((m.admin_addr.clone(), m.id.clone(), t.epoch.max(owner.1)))
                });
                if let Some((next, id, epoch)) = found {
                    (addr, owner) = (next, (Some(id), epoch));
                }
                (f.request, f.replies)
            }
        };
        let hello = hello(shared, resp3);
        pending = super::forward::send(&addr, hello, request, replies, dedicated);
    }
}

/// A forwarded request's reply, without retries (no cluster).
async fn settle_once(pending: super::forward::Pending) -> Result<Vec<u8>, String> {
    super::forward::settle(pending).await.map(|r| r.reply).map_err(|f| f.error)
}

/// Appends a pub/sub message to the output.
fn deliver_push(info: &ClientInfo, out: &mut Reply, msg: PushMsg) {
    info.pending_push.fetch_sub(msg.len(), Relaxed);
    out.raw(&msg);
}

/// The first request of a batch ran before and waited (`Step::Pending`).
struct Resume {
    /// When it was first attempted.
    mark: u64,
    /// Whether it may have waited for a cold-tier read.
    disk: bool,
}

/// Parses and executes every complete request in the read buffer.
fn process(
    shared: &Shared,
    metrics: &WorkerMetrics,
    client: &mut Client,
    bufs: &mut Buffers,
    req: &mut Request,
    resume: Option<Resume>,
) -> Step {
    let rt = &shared.config.runtime;
    client.begin_batch();
    // As Redis's query buffer while it runs a batch: CLIENT LIST shows the
    // requests being executed (`qbuf=26` for its own CLIENT LIST).
    client.info.qbuf.store(bufs.rbuf.len(), Relaxed);
    let mut waited_on_disk = false;
    if let Some(r) = resume {
        client.clock_mark_ns = r.mark;
        waited_on_disk = r.disk;
    }
    let mut limits = Limits { max_bulk_len: rt.proto_max_bulk_len.load(Relaxed), ..Limits::default() };
    // client-output-buffer-limit normal <hard>: replies not yet written.
    let obuf_limit = rt.obuf_limit_normal.load(Relaxed);
    loop {
        let data = &bufs.rbuf[bufs.start..];
        if data.is_empty() {
            return Step::NeedMore;
        }
        // An AUTH earlier in the batch lifts the limits for what follows.
        limits.unauthenticated = !client.authenticated;
        match parse_request(data, &limits, req) {
            Parse::Incomplete { hint } => {
                // Grow towards a large declared bulk in big steps, but never
                // by more than the bytes that actually arrived (a declared
                // 512 MB bulk costs nothing until it is sent).
                if hint > bufs.rbuf.capacity() - bufs.start {
                    let want = (hint - data.len()).min(data.len().max(READ_CHUNK) * 2);
                    bufs.rbuf.reserve(want);
                }
                return Step::NeedMore;
            }
            Parse::Error(msg) => {
                ServerStats::add(&metrics.server.protocol_errors, 1);
                debug!(client = client.id(), "protocol error: {msg}");
                bufs.out.error(msg);
                return Step::Close;
            }
            Parse::Complete => {}
        }
        let consumed = req.consumed;
        let outcome;
        let mut owned_args: Option<Vec<Vec<u8>>> = None;
        let quiet;
        {
            // Filled in place: a collected SmallVec is moved (144 bytes) per request.
            let mut args: SmallVec<[&[u8]; 8]> = SmallVec::new();
            match &req.owned {
                Some(words) => args.extend(words.iter().map(|w| w.as_slice())),
                None => {
                    for &(s, l) in &req.args {
                        args.push(&data[s as usize..(s + l) as usize]);
                    }
                }
            }
            if args.is_empty() {
                bufs.start += consumed;
                continue;
            }
            if is_cross_protocol_attack(args[0]) {
                // An HTTP request's lines must not run as commands. As Redis:
                // nothing more runs, and no reply of this batch is sent.
                warn_cross_protocol();
                bufs.out.buf.clear();
                return Step::Close;
            }
            let reply_mark = bufs.out.len();
            // CLIENT REPLY SKIP applies to the command after the one that set it.
            let skip_this = std::mem::take(&mut client.reply_skip_next);
            client.reply_always = false;
            let started = client.clock_mark_ns;
            outcome = dispatch::execute(&shared.node, shared, metrics, client, &args, &mut bufs.out);
            if let Outcome::Pending(wait) = outcome {
                // Not run: it runs again from the start after the wait.
                client.reply_skip_next = skip_this;
                return Step::Pending(wait);
            }
            if let Outcome::Forward(f) = outcome {
                // Sent now; the next requests run meanwhile (pipelining).
                let relay = relay_for(&shared.node, client, f, &args);
                let hello = hello(shared, client.resp3);
                let sent_ns = crate::store::mono_ns();
                let reply = super::forward::send(&relay.addr, hello, relay.bytes, relay.replies, relay.dedicated);
                crate::metrics::ClusterStats::add(&metrics.cluster.forwarded, 1);
                if !(skip_this || client.reply_off) {
                    bufs.awaited.push(Awaited {
                        at: bufs.out.len(),
                        reply,
                        addr: relay.addr.clone(),
                        slot: relay.slot,
                        sent_ns,
                        dedicated: relay.dedicated,
                        read_only: relay.read_only,
                        fan_out: None,
                    });
                }
                bufs.start += consumed;
                if relay.dedicated {
                    // A blocking command: what follows waits for its reply.
                    return Step::Flush;
                }
                continue;
            }
            if let Outcome::FanOut(f) = &outcome {
                // Ran here; now on the other nodes, its reply combined with theirs.
                let hello = hello(shared, client.resp3);
                let mut bytes = Vec::new();
                super::forward::encode(&mut bytes, &args);
                let mut others: Vec<_> =
                    f.addrs.iter().map(|a| super::forward::send(a, hello, bytes.clone(), 1, false)).collect();
                let first = others.remove(0);
                let local = bufs.out.buf.split_off(reply_mark);
                let fan_out = Some(FannedOut { local, others, sum: f.sum });
                let sent_ns = crate::store::mono_ns();
                if !(skip_this || client.reply_off) {
                    let addr = std::sync::Arc::from("");
                    bufs.awaited.push(Awaited {
                        at: bufs.out.len(),
                        reply: first,
                        addr,
                        slot: 0,
                        sent_ns,
                        dedicated: false,
                        read_only: false,
                        fan_out,
                    });
                }
            }
            // Only the batch's first request can have waited.
            let from_disk = std::mem::take(&mut waited_on_disk);
            if matches!(outcome, Outcome::Done | Outcome::FanOut(_)) {
                // A blocked one (XREAD BLOCK) has not replied yet.
                record_read(shared, metrics, client, started, from_disk);
            }
            quiet = skip_this || client.reply_off;
            if quiet && !std::mem::take(&mut client.reply_always) {
                bufs.out.truncate(reply_mark);
            }
            // Invalidations this command caused for this client (CLIENT TRACKING).
            crate::session::tracking::take_own(&mut bufs.out.buf);
            if matches!(outcome, Outcome::Block(_)) {
                owned_args = Some(args.iter().map(|a| a.to_vec()).collect());
            }
        }
        bufs.start += consumed;
        if let Outcome::Block(block) = outcome {
            return Step::Blocked(BlockedCmd { args: owned_args.expect("set when blocking"), block, quiet });
        }
        if client.close_after_reply {
            return Step::Close;
        }
        if obuf_limit != 0 && bufs.out.len() > obuf_limit && !client.in_pubsub() {
            // As Redis: the client is dropped and its pending replies with it.
            tracing::warn!(client = client.id(), addr = %client.info.addr, "closing client over its output buffer limit");
            // Publishers on other threads bump this counter too: a real atomic add.
            metrics.server.output_buffer_disconnects.fetch_add(1, Relaxed);
            bufs.out.buf.clear();
            return Step::Close;
        }
        if bufs.out.len() >= OUT_FLUSH_AT {
            return Step::Flush;
        }
    }
}

/// Read commands on keys: time from first attempt to reply, by where the
/// values came from. The command's own recording (`pipeline::after_call`) moved
/// the clock mark to its end; a command refused, queued or unknown left it.
#[inline]
fn record_read(shared: &Shared, metrics: &WorkerMetrics, client: &Client, started: u64, from_disk: bool) {
    let end = client.clock_mark_ns;
    if end == started {
        return;
    }
    let def = shared.table.get(client.last_lookup);
    if def.has(flags::READONLY) && !matches!(def.keys, Keys::None | Keys::All) {
        let tier = if from_disk { &metrics.reads.disk } else { &metrics.reads.ram };
        tier.record(end.saturating_sub(started));
    }
}

/// SLOWLOG: Redis 7.0 logs a blocked command once a push serves it (not
/// when it times out), with the time it ran rather than waited; here the
/// serving is the pusher's work, so the entry has a duration of 0.
fn log_unblocked(node: &crate::commands::Node, client: &Client, args: &[Vec<u8>]) {
    let argv: SmallVec<[&[u8]; 8]> = args.iter().map(|a| a.as_slice()).collect();
    if let Some(idx) = node.table.lookup(argv[0]) {
        crate::commands::pipeline::record_slow(node, client, node.table.get(idx), &argv, 0);
    }
}

/// Redis's warning, logged at most once a minute (`securityWarningCommand`).
fn warn_cross_protocol() {
    static LAST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let last = LAST.load(Relaxed);
    if now.abs_diff(last) > 60 && LAST.compare_exchange(last, now, Relaxed, Relaxed).is_ok() {
        tracing::warn!(
            "Possible SECURITY ATTACK detected. It looks like somebody is sending POST or Host: commands to Redis. \
             This is likely due to an attacker attempting to use Cross Protocol Scripting to compromise your Redis \
             instance. Connection aborted."
        );
    }
}

/// A read that ended the connection with an error: a failed TLS handshake
/// is counted (`/metrics`, INFO) and logged at debug level, as Redis logs
/// it at verbose (a port scanner or a plain-text client on `tls-port`
/// must not flood the log).
fn read_failed(shared: &Shared, client: u64, e: &std::io::Error) {
    let tls = e.get_ref().and_then(|inner| inner.downcast_ref::<crate::sys::socket::TlsFailure>());
    match (tls, &shared.tls) {
        (Some(failure), Some(ctx)) => {
            if failure.during_handshake {
                ctx.handshake_failures.fetch_add(1, Relaxed);
            }
            debug!(client, "{failure}");
        }
        _ => debug!(client, "read error: {e}"),
    }
}

/// Writes the pending replies. A reader too slow to take them keeps this
/// waiting, but CLIENT KILL and shutdown still end it.
async fn flush(
    stream: &mut ClientSocket,
    out: &mut Reply,
    metrics: &WorkerMetrics,
    attention: &mut Attention<'_, '_>,
    shared: &Shared,
) -> std::io::Result<()> {
    if out.buf.is_empty() {
        return Ok(());
    }
    // durability sync: nothing goes out before the fsync covering every
    // write this batch made or could have read (one wait per batch).
    if let Some(seq) = shared.persist.as_ref().and_then(|p| p.sync_target()) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let p = shared.persist.as_ref().expect("checked above");
        p.on_durable(
            seq,
            Box::new(move |r| {
                let _ = tx.send(r.is_ok());
            }),
        );
        if !matches!(rx.await, Ok(true)) {
            return Err(std::io::Error::other("the durability log failed: replies withheld"));
        }
    }
    let mut rest = &out.buf[..];
    let r = loop {
        tokio::select! {
            biased;
            r = stream.write_all(&mut rest) => break r,
            _ = attention.fired() => {
                if attention.info.killed.load(Relaxed) || shared.shutting_down.load(Relaxed) {
                    break Err(std::io::Error::other("client killed while its replies were pending"));
                }
                // Something else (a pub/sub message): it waits its turn.
            }
        }
    };
    ServerStats::add(&metrics.server.net_output_bytes, (out.buf.len() - rest.len()) as u64);
    out.buf.clear();
    r
}

/// Awaits a pending command's wait; false when the client is killed or the
/// node shuts down meanwhile (close the connection).
async fn wait_pending(wait: PendingRead, attention: &mut Attention<'_, '_>, shared: &Shared) -> bool {
    tokio::pin!(wait);
    loop {
        tokio::select! {
            biased;
            _ = &mut wait => return true,
            _ = attention.fired() => {
                if attention.info.killed.load(Relaxed) || shared.shutting_down.load(Relaxed) {
                    return false;
                }
            }
        }
    }
}

/// Waits until a push serves the blocked command (its reply is then
/// written), its deadline passes, or the client goes away. Returns false to
/// close the connection.
async fn wait_blocked(
    stream: &mut ClientSocket,
    shared: &Shared,
    metrics: &WorkerMetrics,
    client: &mut Client,
    bufs: &mut Buffers,
    attention: &mut Attention<'_, '_>,
    cmd: BlockedCmd,
) -> bool {
    let BlockedCmd { args, mut block, quiet } = cmd;
    let reply_mark = bufs.out.len();
    let keep_open = loop {
        let deadline = block.deadline_ms;
        let sleep = async {
            if deadline == 0 {
                std::future::pending::<()>().await
            } else {
                let now = crate::store::now_ms();
                tokio::time::sleep(Duration::from_millis(deadline.saturating_sub(now))).await
            }
        };
        // None: a push woke us; Some(true): deadline; Some(false): leaving.
        let gave_up = tokio::select! {
            _ = block.waiter.woken() => None,
            _ = sleep => Some(true),
            r = stream.read_buf(&mut bufs.rbuf, Buffers::make_room) => match r {
                // Input while blocked is kept for after; EOF means the client left.
                Ok(0) => Some(false),
                Err(e) => {
                    read_failed(shared, client.info.id, &e);
                    Some(false)
                }
                Ok(n) => {
                    ServerStats::add(&metrics.server.net_input_bytes, n as u64);
                    if bufs.rbuf.len() - bufs.start > shared.config.runtime.client_query_buffer_limit.load(Relaxed) {
                        tracing::warn!(client = client.info.id, "closing blocked client that exceeded client-query-buffer-limit");
                        Some(false)
                    } else {
                        continue;
                    }
                }
            },
            // Pub/sub messages wait in their queue until the command ends.
            _ = attention.fired() => {
                if client.info.killed.load(Relaxed) || shared.shutting_down.load(Relaxed) {
                    Some(false)
                } else {
                    continue;
                }
            }
        };
        if let Some(timed_out) = gave_up {
            if block.waiter.cancel() {
                block.unregister(&shared.ks);
                if timed_out {
                    (block.on_timeout)(&mut bufs.out);
                }
                break timed_out;
            }
            // A push claimed the client first, under its lock: the outcome
            // is moments away. A client that is leaving loses it, as in Redis.
            block.waiter.woken().await;
            if !timed_out {
                block.unregister(&shared.ks);
                break false;
            }
        }
        let Some(woken) = block.waiter.outcome() else { continue };
        // Served through one key: drop the stale entries on the others.
        block.unregister(&shared.ks);
        match woken {
            Woken::Served(reply) => {
                bufs.out.raw(&reply);
                log_unblocked(&shared.node, client, &args);
                break true;
            }
            Woken::Unblocked { error } => {
                if error {
                    bufs.out.error("UNBLOCKED client unblocked via CLIENT UNBLOCK");
                } else {
                    (block.on_timeout)(&mut bufs.out);
                }
                break true;
            }
            Woken::Retry => {}
        }
        client.begin_batch();
        let argv: SmallVec<[&[u8]; 8]> = args.iter().map(|a| a.as_slice()).collect();
        let Some(cmd) = shared.table.resolve(&argv, client.last_lookup) else { break true };
        // Cluster mode: the topology may have moved the slot away meanwhile.
        match crate::commands::pipeline::slot_check(&shared.node, client, &cmd) {
            Ok(()) => {}
            Err(Refusal::Forward(f)) => {
                let hello = hello(shared, client.resp3);
                let mut bytes = Vec::new();
                super::forward::encode(&mut bytes, &argv);
                let pending = super::forward::send(&f.addr, hello, bytes, 1, true);
                let sent = await_relayed(pending, f.addr.clone(), f.slot, shared, client.resp3, true, f.read_only);
                let Some(reply) = unless_gone(sent, &client.info, attention, shared).await else { return false };
                put_relayed(&mut bufs.out, reply);
                break true;
            }
            Err(Refusal::Refused(r)) => {
                let msg = r.message(&shared.node, Some(&cmd), &argv, &crate::commands::pipeline::Origin::Client);
                bufs.out.error(&*msg);
                break true;
            }
            Err(Refusal::Wait(_)) => {}
        }
        match crate::commands::pipeline::run(&shared.node, shared, metrics, client, &cmd, &mut bufs.out) {
            // `run` never forwards nor fans out: admission and dispatch do.
            Outcome::Done | Outcome::Forward(_) | Outcome::FanOut(_) => break true,
            Outcome::Pending(wait) => {
                // Woken to retry, but a key is not ready: wait, retry again.
                if !wait_pending(wait, attention, shared).await {
                    break false;
                }
                if client.info.killed.load(Relaxed) {
                    break false;
                }
                continue;
            }
            Outcome::Block(b) => {
                // Keep the original deadline across retries.
                let keep = block.deadline_ms;
                block = b;
                block.deadline_ms = keep;
            }
        }
    };
    if quiet {
        bufs.out.truncate(reply_mark);
    }
    client.info.blocked_on.lock().take();
    client.info.blocked.store(false, Relaxed);
    keep_open
}
