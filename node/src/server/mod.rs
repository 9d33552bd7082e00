//! The server: listeners, one event loop per worker thread, shared state,
//! and graceful shutdown.
//!
//! An acceptor thread takes new connections and hands them to the least
//! loaded active worker (see [`balance`]); each worker runs a single-threaded tokio runtime and owns
//! its connections for their whole life. Any worker can serve any key
//! (the keyspace is shared and partitioned), so a request never hops
//! between threads.

pub mod balance;
mod connection;
mod forward;
mod http;
mod read_ahead;
mod snapshot;
pub mod tls;

use crate::commands::{Node, ScriptJob, ServerControl};
use crate::config::Config;
use crate::metrics::{DbFigures, Snapshot, WorkerMetrics};
use crate::session::client::PortKind;
use crate::store::NUM_DBS;
use balance::Balancer;
use parking_lot::Mutex;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tracing::{debug, error, info, warn};

/// State shared by every worker: the node below (keyspace, config,
/// clients, ...) and what only the server has.
pub struct Shared {
    pub node: Node,
    pub run_id: String,
    /// Set once the node accepts clients (readiness).
    pub ready: AtomicBool,
    /// Set when shutdown begins.
    pub shutting_down: AtomicBool,
    pub shutdown: watch::Sender<bool>,
    /// Ops/sec samples for INFO's instantaneous_ops_per_sec.
    pub ops_samples: Mutex<OpsSampler>,
    /// Ports actually bound (useful when 0 was asked for in tests).
    pub tcp_port: AtomicUsize,
    pub metrics_port: AtomicUsize,
    /// Clients the open files limit leaves room for.
    pub fd_clients: AtomicUsize,
    /// Which workers are active, and their load.
    pub balance: Balancer,
    /// Each worker's inbox for new and moved connections (set by `run`).
    worker_inbox: OnceLock<Vec<mpsc::UnboundedSender<NewConn>>>,
    /// The script thread's inbox (EVAL, FCALL).
    script_jobs: Mutex<std::sync::mpsc::Sender<ScriptJob>>,
    /// Cluster mode: PUBLISH messages for the other nodes (set once the
    /// acceptor runs; its runtime sends them).
    cluster_publish: OnceLock<mpsc::UnboundedSender<Vec<u8>>>,
    /// This, for threads that need the node for longer than a call.
    this: OnceLock<std::sync::Weak<Shared>>,
    /// `tls-port`'s certificates and counters (None without a TLS port).
    pub tls: Option<tls::TlsContext>,
}

impl std::ops::Deref for Shared {
    type Target = Node;
    fn deref(&self) -> &Node {
        &self.node
    }
}

impl Shared {
    /// The inbox of a worker (only called once workers run).
    fn worker_tx(&self, worker: usize) -> &mpsc::UnboundedSender<NewConn> {
        &self.worker_inbox.get().expect("workers started")[worker]
    }

    /// Clients accepted at most: `maxclients`, but never more than the file
    /// descriptors allow, whatever CONFIG SET says.
    pub fn max_clients(&self) -> usize {
        self.config.runtime.maxclients.load(Relaxed).min(self.fd_clients.load(Relaxed))
    }

    /// Begins a graceful shutdown.
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Relaxed);
        self.shutdown.send_replace(true);
    }
}

impl ServerControl for Shared {
    fn broadcast_publish(&self, channel: &[u8], message: &[u8]) {
        if let Some(tx) = self.cluster_publish.get() {
            let mut bytes = Vec::with_capacity(channel.len() + message.len() + 40);
            forward::encode(&mut bytes, &[b"PUBLISH", channel, message]);
            let _ = tx.send(bytes);
        }
    }

    fn spawn_with_node(&self, name: &str, job: crate::commands::NodeJob) -> bool {
        let Some(shared) = self.this.get().and_then(|w| w.upgrade()) else { return false };
        std::thread::Builder::new().name(name.into()).spawn(move || job(&shared.node)).is_ok()
    }

    fn run_script_job(&self, job: ScriptJob) -> bool {
        self.script_jobs.lock().send(job).is_ok()
    }

    fn run_id(&self) -> &str {
        &self.run_id
    }

    fn tcp_port(&self) -> u16 {
        self.tcp_port.load(Relaxed) as u16
    }

    fn shut_down(&self) {
        self.begin_shutdown();
    }

    fn shutting_down(&self) -> bool {
        self.shutting_down.load(Relaxed)
    }

    fn set_adaptive_threads(&self, on: bool) {
        self.balance.set_adaptive(on);
    }

    fn set_active_threads(&self, n: usize) {
        self.balance.set_active(n);
    }

    fn fit_maxclients(&self, wanted: usize) -> Result<(), usize> {
        match raise_open_files_limit(self, wanted as u64) {
            Some((fit, _, _)) if fit < wanted as u64 => Err(fit as usize),
            _ => Ok(()),
        }
    }

    fn snapshot(&self, keyspace: [DbFigures; NUM_DBS]) -> Snapshot {
        Shared::snapshot(self, keyspace)
    }

    fn reload_tls(&self) -> Result<(), String> {
        match &self.tls {
            Some(ctx) => ctx.reload(|| self.config.runtime.tls.read().clone()),
            None => Ok(()),
        }
    }
}

/// A rolling window of ops/sec samples (Redis keeps 16, every 100 ms).
#[derive(Default)]
pub struct OpsSampler {
    last_time: Option<Instant>,
    last_ops: u64,
    samples: [u64; 16],
    idx: usize,
}

impl OpsSampler {
    pub fn sample(&mut self, total_ops: u64) {
        let now = Instant::now();
        if let Some(t) = self.last_time {
            let dt = now.duration_since(t).as_secs_f64();
            if dt > 0.0 {
                self.samples[self.idx] = ((total_ops.saturating_sub(self.last_ops)) as f64 / dt) as u64;
                self.idx = (self.idx + 1) % self.samples.len();
            }
        }
        self.last_time = Some(now);
        self.last_ops = total_ops;
    }

    pub fn ops_per_sec(&self) -> u64 {
        self.samples.iter().sum::<u64>() / self.samples.len() as u64
    }
}

/// A connection handed from the acceptor to a worker.
pub enum NewConn {
    /// A TCP client: peer, local address, port kind, and whether it came
    /// in on `tls-port`.
    Tcp(std::net::TcpStream, SocketAddr, SocketAddr, PortKind, bool),
    Unix(std::os::unix::net::UnixStream, String),
    /// A connection another worker handed over (see [`balance`]).
    Moved(Box<connection::MovedConn>),
}

/// Builds the shared state from a configuration; an error says why the
/// node cannot start (the caller reports it and exits).
pub fn build_shared(config: Config) -> Result<Arc<Shared>, String> {
    crate::sys::alloc::configure();
    let (shutdown, _) = watch::channel(false);
    let run_id: String = (0..40).map(|_| format!("{:x}", crate::base::random::fast_rand() % 16)).collect();
    let threads = config.startup.threads;
    let adaptive = config.runtime.adaptive_threads.load(Relaxed);
    let (script_tx, script_rx) = std::sync::mpsc::channel::<ScriptJob>();
    let (table, catalog) = crate::commands::command_table();
    let node = Node::new(config, threads, table, catalog)?;
    let sc = &node.config.startup;
    let tls = match (sc.tls_port, sc.cluster_tls()) {
        (0, false) => None,
        (_, cluster_tls) => {
            // tls-cluster: the links to other nodes take their TLS configuration from here.
            let links = node.cluster.as_ref().filter(|_| cluster_tls).map(|c| c.link_tls.clone());
            Some(
                tls::TlsContext::new(&node.config.runtime.tls.read(), links)
                    .map_err(|e| format!("Failed to configure TLS: {e}"))?,
            )
        }
    };
    let shared = Arc::new(Shared {
        node,
        run_id,
        ready: AtomicBool::new(false),
        shutting_down: AtomicBool::new(false),
        shutdown,
        ops_samples: Mutex::new(OpsSampler::default()),
        tcp_port: AtomicUsize::new(0),
        metrics_port: AtomicUsize::new(0),
        fd_clients: AtomicUsize::new(usize::MAX),
        balance: Balancer::new(threads, adaptive),
        worker_inbox: OnceLock::new(),
        script_jobs: Mutex::new(script_tx),
        cluster_publish: OnceLock::new(),
        this: OnceLock::new(),
        tls,
    });
    let _ = shared.this.set(Arc::downgrade(&shared));
    // `requirepass` is the default user's password.
    crate::commands::acl::apply_requirepass(&shared.node);
    // One thread runs scripts, as Redis does; it ends with the node.
    let weak = Arc::downgrade(&shared);
    std::thread::Builder::new()
        .name("strata-script".into())
        .spawn(move || {
            while let Ok(job) = script_rx.recv() {
                let Some(shared) = weak.upgrade() else { break };
                job(&shared.node, &*shared);
            }
        })
        .expect("spawn script thread");
    Ok(shared)
}

/// Runs the node until SIGTERM/SIGINT; returns the process exit code.
pub fn run(shared: Arc<Shared>) -> i32 {
    // Before any command is timed (its clock must not change under a
    // mark), and before the listeners: from the moment a client can
    // connect, the workers follow at once.
    let tsc = crate::sys::clock::calibrate_command_clock(Duration::from_millis(20));
    debug!(clock = if tsc { "tsc" } else { "clock_gettime" }, "commands are timed with this clock");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("acceptor runtime");
    // Every listener before any worker: a node that cannot listen exits at
    // once, with nothing else to stop.
    if !adjust_open_files_limit(&shared) {
        return 1;
    }
    // A broken users file stops the start, as in Redis.
    if let Err(e) = crate::commands::acl::load_at_startup(&shared.node) {
        error!("Aborting Redis startup because of ACL errors: {e}");
        return 1;
    }
    let Some(listeners) = rt.block_on(listen(&shared)) else { return 1 };
    let threads = shared.config.startup.threads;
    let affinity = shared.config.startup.cpu_affinity.clone();
    let mut senders = Vec::with_capacity(threads);
    let mut handles = Vec::with_capacity(threads);
    // Every worker's runtime (an epoll fd, an eventfd) before any worker
    // runs: a node short of file descriptors or memory stops here, saying
    // so, instead of running on with a worker that died alone.
    let mut runtimes = Vec::with_capacity(threads);
    for i in 0..threads {
        match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(worker_rt) => runtimes.push(worker_rt),
            Err(e) => {
                error!(
                    worker = i,
                    "cannot start worker thread {i} of {threads}: {e}; raise the open-files limit (ulimit -n) or \
                     lower --threads"
                );
                return 1;
            }
        }
    }
    for (i, worker_rt) in runtimes.into_iter().enumerate() {
        let (tx, rx) = mpsc::unbounded_channel::<NewConn>();
        senders.push(tx);
        let shared = shared.clone();
        let cpu = affinity.as_ref().map(|cpus| cpus[i % cpus.len()]);
        let handle = std::thread::Builder::new()
            .name(format!("strata-worker-{i}"))
            .spawn(move || worker_main(i, cpu, shared, worker_rt, rx))
            .expect("spawn worker thread");
        handles.push(handle);
    }
    let _ = shared.worker_inbox.set(senders);

    let code = rt.block_on(async {
        let code = acceptor_main(shared.clone(), listeners).await;
        // Workers stop once their connections have drained; meanwhile this
        // runtime keeps serving /readyz (503) and /metrics. A worker still
        // inside a command after the drain does not hold the process: data
        // lives in RAM only, so there is nothing it could leave half-written
        // that outlives the process, and the caller exits, ending its thread.
        let deadline = Instant::now() + DRAIN + Duration::from_millis(500);
        while handles.iter().any(|h| !h.is_finished()) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let busy: Vec<usize> = (0..handles.len()).filter(|&i| !handles[i].is_finished()).collect();
        if busy.is_empty() {
            for h in handles {
                let _ = h.join();
            }
        } else {
            warn!(workers = ?busy, drain_ms = DRAIN.as_millis() as u64, "workers still busy in a command after the drain; exiting without them");
        }
        code
    });
    if let Some(p) = &shared.persist {
        // What periodic and write-back have not synced yet goes to disk now.
        match p.flush_all() {
            Ok(()) => info!("durability log synced"),
            Err(e) => error!("durability log: final sync failed: {e}"),
        }
    }
    if let Some(path) = &shared.config.startup.unixsocket {
        let _ = std::fs::remove_file(path);
    }
    info!("bye");
    code
}

/// Replays the durability log on a thread of its own, then marks the node
/// ready and keeps the log compact. A log that cannot be opened stops the
/// node: serving without it would break the durability promise.
fn start_recovery(shared: Arc<Shared>, p: Arc<crate::durability::persist::Persistence>) {
    // The node's fixed part outside the allocator is measured once, at the
    // first reading: now, before the replay, as a fresh node's is before
    // its first writes. Taken during the replay it counted the replay's
    // threads and mappings as the node's own for good.
    shared.memory.calibrate(&shared.ks, shared.maxmemory(), 0);
    let spawned = std::thread::Builder::new().name("strata-recovery".into()).spawn(move || {
        use crate::durability::replay::{Room, slack};
        let make_room = |stats: &crate::metrics::StoreStats| {
            if shared.ensure_memory(stats) {
                return Room::Fits;
            }
            // A disk tier busy for a moment (its cleaner freeing a segment)
            // takes the victims once it is done: the replay waits for it,
            // as a client's write would, rather than stop over budget.
            // (Room is sought again once it is not busy, not every millisecond.)
            let busy = || shared.ks.cold().is_some_and(|t| t.busy());
            while busy() {
                while busy() {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                if shared.ensure_memory(stats) {
                    return Room::Fits;
                }
            }
            let max = shared.maxmemory();
            if shared.used_memory_for_eviction() <= max + slack(max) { Room::Slack } else { Room::Full }
        };
        std::thread::sleep(crate::durability::hooks::replay_delay());
        if let Err(e) = p.recover(&shared.ks, &make_room) {
            error!(dir = %shared.config.startup.dir.display(), "cannot open the durability log: {e}; stopping");
            std::process::exit(1);
        }
        shared.ready.store(true, Relaxed);
        info!("durability log replayed: ready");
        while !shared.shutting_down.load(Relaxed) {
            std::thread::sleep(Duration::from_millis(500));
            p.maintain();
            if p.compaction_due() {
                if let Err(e) = p.compact(&shared.ks) {
                    error!("log compaction failed: {e}");
                }
            }
        }
    });
    if let Err(e) = spawned {
        error!("cannot start recovery: {e}");
        std::process::exit(1);
    }
}

/// The cold tier's threads: one writes demoted values out (never held up
/// by anything else), one keeps a spare segment, cleans, and drops reads
/// nobody waits for any more.
fn start_cold_tier(shared: Arc<Shared>, cold: Arc<crate::tier::cold_log::ColdLog>) {
    let (s, c) = (shared.clone(), cold.clone());
    let flusher = std::thread::Builder::new().name("strata-tier-io".into()).spawn(move || {
        while !s.shutting_down.load(Relaxed) {
            c.flush_step(Duration::from_millis(1));
        }
    });
    let cleaner = std::thread::Builder::new().name("strata-tier".into()).spawn(move || {
        let mut last_sweep = std::time::Instant::now();
        while !shared.shutting_down.load(Relaxed) {
            cold.maintain(&shared.ks);
            std::thread::sleep(Duration::from_millis(5));
            if last_sweep.elapsed() > Duration::from_secs(1) {
                last_sweep = std::time::Instant::now();
                for idx in 0..shared.ks.num_partitions() as u32 {
                    shared.ks.lock(idx).sweep_cold_reads();
                }
            }
        }
    });
    if let Err(e) = flusher.and(cleaner) {
        error!("cannot start the cold tier's threads: {e}");
        std::process::exit(1);
    }
}

/// How long, from the start of shutdown, connections may take to finish
/// the replies they are working on: well inside Kubernetes' default 30 s
/// grace period, whatever a client was running.
const DRAIN: Duration = Duration::from_secs(3);

fn worker_main(
    id: usize,
    cpu: Option<usize>,
    shared: Arc<Shared>,
    rt: tokio::runtime::Runtime,
    mut rx: mpsc::UnboundedReceiver<NewConn>,
) {
    if let Some(cpu) = cpu {
        if crate::sys::cpu::pin_current_thread(cpu) {
            info!(worker = id, cpu, "worker pinned");
        } else {
            warn!(worker = id, cpu, "could not pin worker to CPU; running unpinned");
        }
    }
    rt.block_on(async move {
        // Disk reads this worker's connections start in one pass of its
        // event loop go to the engine together: the task that submits them
        // is woken by the first and runs after the connections already
        // woken (one hand-over, one wake of the engine's thread).
        let submit = Arc::new(tokio::sync::Notify::new());
        let first = submit.clone();
        // With io_uring the worker submits them itself, and the kernel
        // signals their completions here (`tier/uring.rs`).
        let (signal, signal_fd) = match crate::sys::loop_signal::LoopSignal::new() {
            Ok((signal, fd)) => (Some(signal), Some(fd)),
            Err(e) => {
                warn!(worker = id, "no completion signal ({e}): disk reads go through the I/O thread");
                (None, None)
            }
        };
        crate::tier::io::defer_submissions(Box::new(move || first.notify_one()), signal_fd);
        let submitter = tokio::spawn(async move {
            loop {
                submit.notified().await;
                crate::tier::io::submit_deferred();
            }
        });
        let reaper = signal.map(|signal| tokio::spawn(reap_completions(signal)));
        // Their completions come back in batches too: one wake-up of this
        // thread for all that completed meanwhile.
        let inbox = Arc::new(crate::store::WakeInbox::default());
        crate::store::WakeInbox::install(inbox.clone());
        let waker = tokio::spawn(inbox.run());
        let metrics = shared.workers[id].clone();
        let mut ticks = 0u32;
        let mut shutdown = shared.shutdown.subscribe();
        let open = Arc::new(AtomicUsize::new(0));
        let tick = Duration::from_millis(100);
        let mut ticker = tokio::time::interval(tick);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let parts = shared.ks.num_partitions() as u32;
        let window = parts.div_ceil(10 * shared.config.startup.threads as u32).max(8);
        loop {
            tokio::select! {
                conn = rx.recv() => {
                    let Some(conn) = conn else { break };
                    let shared = shared.clone();
                    let open = open.clone();
                    open.fetch_add(1, Relaxed);
                    tokio::spawn(async move {
                        connection::serve(conn, shared, id).await;
                        open.fetch_sub(1, Relaxed);
                    });
                }
                _ = ticker.tick() => {
                    ticks = ticks.wrapping_add(1);
                    background_tick(&shared, &metrics, window, id, ticks);
                }
                _ = shutdown.changed() => break,
            }
        }
        // Let connections finish their in-flight replies and close; those
        // left after the drain are dropped with the runtime.
        let deadline = Instant::now() + DRAIN;
        while open.load(Relaxed) > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let left = open.load(Relaxed);
        if left > 0 {
            warn!(worker = id, connections = left, "connections still busy after the drain; closing them");
        }
        submitter.abort();
        waker.abort();
        if let Some(reaper) = reaper {
            reaper.abort();
        }
        crate::tier::io::submit_deferred();
        crate::tier::io::finish_loop();
    });
}

/// A worker's task: delivers the completions of the disk reads it submitted
/// whenever the kernel signals some.
async fn reap_completions(signal: crate::sys::loop_signal::LoopSignal) {
    loop {
        // Reads the kernel could not take yet raise no signal: try again
        // within a millisecond.
        let fired = if crate::tier::io::loop_backlog() {
            tokio::time::timeout(Duration::from_millis(1), signal.fired()).await.unwrap_or(Ok(()))
        } else {
            signal.fired().await
        };
        if fired.is_err() {
            break;
        }
        crate::tier::io::reap_loop();
    }
    // Cannot happen with an eventfd; the reads then complete at the
    // worker's next submission, which reaps too.
    error!("the disk reads' completion signal failed");
}

/// Periodic work on every worker: active expiry and memory bookkeeping.
fn background_tick(shared: &Shared, metrics: &WorkerMetrics, window: u32, worker: usize, tick_no: u32) {
    let started = Instant::now();
    loop {
        let now = crate::store::now_ms();
        let (_, more) = shared.expiry.run_cycle(&shared.ks, &metrics.store, now, window);
        // Keep going while expired keys pile up, but never for long.
        if !more || started.elapsed() > Duration::from_millis(25) {
            break;
        }
    }
    // LATENCY's `expire-cycle` event, as Redis records its active expiry.
    let rt = &shared.config.runtime;
    shared.latency.record_if_needed(rt, "expire-cycle", started.elapsed().as_millis() as u64);
    // Keys expired above, for BCAST trackers; and the tracking table's limit.
    shared.tracking.flush_broadcasts();
    let max_tracked = rt.tracking_table_max_keys.load(Relaxed) as usize;
    if max_tracked > 0 && shared.ks.tracked_keys() > max_tracked {
        shared.ks.limit_tracked(max_tracked);
    }
    shared.ks.flush_mem();
    shared.ks.tick_clock();
    shared.memory.calibrate(&shared.ks, shared.maxmemory(), crate::memory::CALIBRATE_EVERY_MS);
    shared.memory.defrag.tick(&shared.ks, &shared.config.runtime);
    // The limit is hard even without writes: what a reading finds beyond
    // the estimate (allocator metadata, buffers, defrag's moves) is evicted
    // here, not at the next write, which may never come.
    let max = shared.maxmemory();
    if max > 0 && shared.used_memory_for_eviction() > max {
        shared.ensure_memory(&metrics.store);
    }
    shared.memory.note_peak(shared.used_memory());
    if worker == 0 {
        shared.ops_samples.lock().sample(shared.total_commands());
    }
    shared.balance.tick(worker, tick_no, || shared.total_commands());
}

/// File descriptors the node keeps for itself besides its clients: Redis
/// keeps 32 (listeners, logs, ...); a tokio runtime also holds two per
/// thread (epoll and its waker), and the metrics endpoint its connections.
fn reserved_fds(threads: usize) -> u64 {
    32 + 2 * (threads as u64 + 1) + http::MAX_CONNECTIONS as u64
}

/// Raises the open files limit to what `maxclients` clients need, as far
/// as the process may; returns (the clients that fit, the limit, the hard
/// limit), and records the first as the node's descriptor bound. None when
/// the limit cannot be read (nothing is bounded then).
fn raise_open_files_limit(shared: &Shared, maxclients: u64) -> Option<(u64, u64, u64)> {
    let reserved = reserved_fds(shared.config.startup.threads);
    let need = maxclients.saturating_add(reserved);
    let (soft, hard) = crate::sys::process::open_files_limit().ok()?;
    let mut limit = soft;
    if soft < need {
        // A privileged process may raise the hard limit too; any may go up to it.
        let raised = crate::sys::process::set_open_files_limit(need, hard.max(need))
            .map(|()| need)
            .or_else(|_| crate::sys::process::set_open_files_limit(hard, hard).map(|()| hard));
        limit = raised.unwrap_or(soft).max(soft);
        if limit > soft {
            info!("raised the open files limit from {soft} to {limit}");
        }
    }
    let fit = limit.saturating_sub(reserved);
    shared.fd_clients.store(fit.min(usize::MAX as u64) as usize, Relaxed);
    Some((fit, limit, hard))
}

/// As Redis's adjustOpenFilesLimit: raises the open files limit to what
/// maxclients needs, or else lowers maxclients to what fits (one warning),
/// so clients over the limit get Redis's error rather than no answer at all.
/// False when not even one client fits.
fn adjust_open_files_limit(shared: &Shared) -> bool {
    let maxclients = shared.config.runtime.maxclients.load(Relaxed) as u64;
    let Some((fit, limit, hard)) = raise_open_files_limit(shared, maxclients) else { return true };
    let reserved = reserved_fds(shared.config.startup.threads);
    if fit == 0 {
        error!("the open files limit of {limit} is too low: the node needs {reserved} descriptors before any client");
        return false;
    }
    if fit < maxclients {
        shared.config.runtime.maxclients.store(fit as usize, Relaxed);
        warn!(
            "maxclients reduced from {maxclients} to {fit}: the open files limit is {limit} (hard limit {hard}) and the \
             node keeps {reserved} for itself; raise 'ulimit -n' for more clients"
        );
    }
    true
}

/// The node's listeners, bound before anything else starts.
struct Listeners {
    /// With whether the port is `tls-port`.
    tcp: Vec<(tokio::net::TcpListener, PortKind, bool)>,
    unix: Option<tokio::net::UnixListener>,
}

/// Binds the Redis port(s), the Unix socket and the metrics endpoint; None
/// (after logging why) if any of them cannot be had.
async fn listen(shared: &Arc<Shared>) -> Option<Listeners> {
    let sc = &shared.config.startup;
    let mut tcp = Vec::new();
    if sc.port != 0 || sc.tls_port != 0 {
        if let Some(max) = crate::sys::process::somaxconn().filter(|&max| max < sc.tcp_backlog) {
            // As Redis: the kernel silently caps it.
            warn!(
                "the TCP backlog setting of {} cannot be enforced because /proc/sys/net/core/somaxconn is set to \
                 the lower value of {max}",
                sc.tcp_backlog
            );
        }
        let ports = [
            (sc.port, PortKind::Plain, false, "Redis clients"),
            (sc.tls_port, PortKind::Plain, true, "Redis clients over TLS"),
            (sc.direct_port(), PortKind::Direct, sc.direct_port_tls(), "cluster-aware clients (MOVED)"),
            (sc.admin_port(), PortKind::Admin, sc.cluster_tls(), "the cluster's admin channel"),
        ];
        for (port, kind, tls, what) in ports.into_iter().filter(|p| p.0 != 0) {
            for addr in &sc.binds {
                match listen_tcp(addr, port, sc.tcp_backlog).await {
                    Ok(l) => {
                        let local = l.local_addr().ok();
                        if let Some(a) = local.filter(|_| kind == PortKind::Plain && !tls) {
                            shared.tcp_port.store(a.port() as usize, Relaxed);
                        }
                        info!(addr = ?local, "listening for {what}");
                        tcp.push((l, kind, tls));
                    }
                    Err(e) => {
                        error!("could not create server TCP listening socket {addr}:{port} for {what}: {e}");
                        return None;
                    }
                }
            }
        }
    }
    let unix = match &sc.unixsocket {
        Some(path) => match listen_unix(path, sc.unixsocketperm) {
            Ok(l) => {
                info!(path = %path.display(), "listening on Unix socket");
                Some(l)
            }
            Err(e) => {
                error!("could not create server Unix socket {}: {e}", path.display());
                return None;
            }
        },
        None => None,
    };
    if tcp.is_empty() && unix.is_none() {
        error!("no listener configured: set --port, --tls-port or --unixsocket");
        return None;
    }
    if sc.metrics_port != 0 {
        match http::start(shared.clone()).await {
            Ok(addr) => {
                shared.metrics_port.store(addr.port() as usize, Relaxed);
                info!(%addr, "serving /metrics, /healthz, /readyz");
            }
            Err(e) => {
                error!("could not create metrics endpoint socket {}:{}: {e}", sc.metrics_bind, sc.metrics_port);
                return None;
            }
        }
    }
    Some(Listeners { tcp, unix })
}

/// Listens on `host:port` with the configured backlog (tokio's bind uses
/// its own), trying each address the host resolves to.
async fn listen_tcp(host: &str, port: u16, backlog: u32) -> std::io::Result<tokio::net::TcpListener> {
    // Accept "[::1]" as well as "::1".
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let mut last = None;
    for addr in tokio::net::lookup_host((host, port)).await? {
        let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4() } else { tokio::net::TcpSocket::new_v6() }?;
        // As Redis: a restarted node binds while old connections linger in TIME_WAIT.
        socket.set_reuseaddr(true)?;
        match socket.bind(addr).and_then(|()| socket.listen(backlog)) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address")))
}

/// Listens on a Unix socket path. A socket file left by a node that is gone
/// is replaced; one a live process answers on, or a file that is not a
/// socket, is left alone and refused.
fn listen_unix(path: &std::path::Path, perm: Option<u32>) -> std::io::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    "Address already in use (another process listens on it)",
                ));
            }
            std::fs::remove_file(path)?;
        }
        Ok(_) => return Err(std::io::Error::new(std::io::ErrorKind::AlreadyExists, "exists and is not a socket")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let l = tokio::net::UnixListener::bind(path)?;
    if let Some(perm) = perm {
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm));
    }
    Ok(l)
}

/// Connections closed since the most there were that make the acceptor
/// return freed memory to the OS.
const TRIM_AFTER_CLOSED: usize = 1000;

/// Failed accepts: out of file descriptors (or memory) the pending
/// connection stays queued, so back off rather than spin, and log at most
/// once a second rather than flood the log.
#[derive(Default)]
pub(crate) struct AcceptErrors {
    last_logged: Option<Instant>,
    suppressed: u64,
}

impl AcceptErrors {
    pub(crate) async fn failed(&mut self, what: &str, e: &std::io::Error) {
        let now = Instant::now();
        if self.last_logged.is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1)) {
            if self.suppressed > 0 {
                warn!("{what}: accept failed: {e} ({} more since the last report)", self.suppressed);
            } else {
                warn!("{what}: accept failed: {e}");
            }
            self.last_logged = Some(now);
            self.suppressed = 0;
        } else {
            self.suppressed += 1;
        }
        let exhausted = matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM));
        // Other errors (a connection reset while queued) concern one client only.
        if exhausted {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn acceptor_main(shared: Arc<Shared>, listeners: Listeners) -> i32 {
    let sc = &shared.config.startup;
    let Listeners { tcp, unix } = listeners;
    let mut accept_errors = AcceptErrors::default();
    if shared.node.cluster.is_some() {
        start_cluster_publish(&shared);
        start_cluster_upkeep(shared.clone());
    }
    match shared.persist.clone() {
        // Clients get -LOADING and /readyz fails until the log is replayed.
        Some(p) => start_recovery(shared.clone(), p),
        None => shared.ready.store(true, Relaxed),
    }
    if let Some(c) = shared.cold.clone() {
        start_cold_tier(shared.clone(), c);
    }
    if shared.tls.is_some() {
        watch_tls_files(shared.clone());
    }
    info!(
        threads = sc.threads,
        adaptive_threads = shared.config.runtime.adaptive_threads.load(Relaxed),
        partitions = shared.ks.num_partitions(),
        hugepages = sc.hugepages.name(),
        "ready to accept connections"
    );

    let mut sigterm =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).expect("SIGINT handler");
    let mut shutdown_rx = shared.shutdown.subscribe();
    let mut trim = tokio::time::interval(Duration::from_secs(1));
    let mut peak_clients = 0;
    loop {
        tokio::select! {
            _ = trim.tick() => {
                // jemalloc returns freed pages gradually (over seconds);
                // what thousands of closed connections freed (tens of MB
                // per 10,000) goes back to the OS at once.
                let now = shared.clients.count();
                peak_clients = peak_clients.max(now);
                if peak_clients - now >= TRIM_AFTER_CLOSED {
                    peak_clients = now;
                    tokio::task::spawn_blocking(crate::sys::alloc::purge);
                }
            }
            r = accept_any(&tcp), if !tcp.is_empty() => {
                match r {
                    Ok((stream, peer, kind, tls)) => {
                        let local = stream.local_addr().unwrap_or(peer);
                        if let Ok(std) = stream.into_std() {
                            dispatch_conn(&shared, NewConn::Tcp(std, peer, local, kind, tls));
                        }
                    }
                    Err(e) => accept_errors.failed("Redis port", &e).await,
                }
            }
            r = async { unix.as_ref().expect("guarded").accept().await }, if unix.is_some() => {
                match r {
                    Ok((stream, _)) => {
                        let path = sc.unixsocket.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
                        if let Ok(std) = stream.into_std() {
                            dispatch_conn(&shared, NewConn::Unix(std, path));
                        }
                    }
                    Err(e) => accept_errors.failed("Unix socket", &e).await,
                }
            }
            _ = sigterm.recv() => { info!("received SIGTERM, shutting down"); break; }
            _ = sigint.recv() => { info!("received SIGINT, shutting down"); break; }
            _ = shutdown_rx.changed() => { info!("shutdown requested"); break; }
        }
    }
    shared.ready.store(false, Relaxed);
    shared.shutting_down.store(true, Relaxed);
    let _ = shared.shutdown.send(true);
    // Each connection finishes its current batch of replies, then closes.
    for c in shared.clients.all() {
        c.attention.notify_one();
    }
    0
}

/// Cluster mode: PUBLISH reaches subscribers on every node, as in Redis
/// Cluster. Messages go to the other nodes' admin ports on this (the
/// acceptor's) runtime, over one pipelined link per node, in order; a node
/// that cannot be reached misses them (as a Redis Cluster node cut off from
/// the bus does).
/// Cluster mode's background work: once the log is replayed, the keys of
/// slots this node does not serve are dropped (a restart in the middle of
/// a release, or of an import that never committed) and a handover cut by
/// the restart is resolved; then imports whose source went silent are
/// dropped.
fn start_cluster_upkeep(shared: Arc<Shared>) {
    let spawned = std::thread::Builder::new().name("strata-cluster".into()).spawn(move || {
        while !shared.ready.load(Relaxed) && !shared.shutting_down.load(Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let Some(c) = shared.node.cluster.as_ref() else { return };
        crate::cluster::migration::drop_unserved(&shared.ks, c);
        let resolving = shared.clone();
        let _ = std::thread::Builder::new().name("strata-migrate".into()).spawn(move || {
            if let Some(c) = resolving.node.cluster.as_ref() {
                crate::cluster::migration::resolve_after_restart(&resolving.ks, c);
            }
        });
        while !shared.shutting_down.load(Relaxed) {
            std::thread::sleep(Duration::from_secs(1));
            crate::cluster::migration::expire_idle_imports(&shared.ks, c);
        }
    });
    if let Err(e) = spawned {
        warn!("cannot start the cluster upkeep thread: {e}");
    }
}

fn start_cluster_publish(shared: &Arc<Shared>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    if shared.cluster_publish.set(tx).is_err() {
        return;
    }
    let shared = shared.clone();
    tokio::spawn(async move {
        while let Some(bytes) = rx.recv().await {
            let Some(c) = shared.node.cluster.as_ref() else { break };
            let Some(t) = c.current() else { continue };
            let hello = forward::Hello { password: c.admin_password.as_deref(), resp3: false, tls: Some(&c.link_tls) };
            for (i, m) in t.members.iter().enumerate() {
                if i != t.myself {
                    let pending = forward::send(&m.admin_addr, hello, bytes.clone(), 1, false);
                    let addr = m.admin_addr.clone();
                    tokio::spawn(async move {
                        if let Err(e) = forward::settle(pending).await {
                            tracing::debug!("PUBLISH not delivered to {addr}: {}", e.error);
                        }
                    });
                }
            }
        }
    });
}

/// Reloads the TLS certificate when its files change on disk (a Secret
/// update, a renewal); a change that does not load is logged and the
/// current certificate kept until the files change again.
fn watch_tls_files(shared: Arc<Shared>) {
    let weak = Arc::downgrade(&shared);
    drop(shared);
    let spawned = std::thread::Builder::new().name("strata-tls-watch".into()).spawn(move || {
        loop {
            std::thread::sleep(tls::WATCH_INTERVAL);
            let Some(shared) = weak.upgrade() else { break };
            if shared.shutting_down.load(Relaxed) {
                break;
            }
            let Some(ctx) = &shared.tls else { break };
            match ctx.reload_if_changed(|| shared.config.runtime.tls.read().clone()) {
                None => {}
                Some(Ok(())) => info!(
                    expires = %crate::base::time::iso8601(ctx.not_after.load(Relaxed)),
                    "TLS certificate files changed on disk: reloaded (new connections use them)"
                ),
                Some(Err(e)) => {
                    warn!("TLS certificate files changed on disk but do not load, keeping the current ones: {e}")
                }
            }
        }
    });
    if let Err(e) = spawned {
        warn!("cannot watch the TLS certificate files (CONFIG SET still reloads them): {e}");
    }
}

/// Accepts from whichever of several listeners is ready first.
async fn accept_any(
    ls: &[(tokio::net::TcpListener, PortKind, bool)],
) -> std::io::Result<(tokio::net::TcpStream, SocketAddr, PortKind, bool)> {
    std::future::poll_fn(|cx| {
        for (l, kind, tls) in ls {
            if let std::task::Poll::Ready(r) = l.poll_accept(cx) {
                return std::task::Poll::Ready(r.map(|(s, a)| (s, a, *kind, *tls)));
            }
        }
        std::task::Poll::Pending
    })
    .await
}

fn dispatch_conn(shared: &Shared, conn: NewConn) {
    let maxclients = shared.max_clients();
    // Connections handed to workers but not yet registered count too, or a
    // storm of connects would overshoot.
    let dispatched = (0..shared.config.startup.threads).map(|w| shared.balance.load(w).conns.load(Relaxed)).sum();
    if shared.clients.count().max(dispatched) >= maxclients {
        crate::metrics::ServerStats::add(&shared.workers[0].server.rejected_connections, 1);
        reject_conn(conn);
        return;
    }
    let worker = shared.balance.pick();
    if shared.worker_tx(worker).send(conn).is_err() {
        shared.balance.unpick(worker);
    }
}

/// Tells a client over the limit why, as Redis does, and closes it.
fn reject_conn(conn: NewConn) {
    use std::io::Write;
    const MSG: &[u8] = b"-ERR max number of clients reached\r\n";
    match conn {
        // A TLS client would read the plain text as a broken record: it
        // is closed without a word.
        NewConn::Tcp(_, _, _, _, true) => {}
        NewConn::Tcp(mut s, ..) => {
            let _ = s.set_nonblocking(false);
            let _ = s.write_all(MSG);
        }
        NewConn::Unix(mut s, _) => {
            let _ = s.set_nonblocking(false);
            let _ = s.write_all(MSG);
        }
        NewConn::Moved(_) => {}
    }
}
