//! What command handlers share: the lower layers' state (`Node`), and the
//! few facts and actions only the server has, behind `ServerControl`, a
//! trait defined here so that commands never depend on the server.

use super::table::CommandTable;
use crate::config::Config;
use crate::durability::persist::Persistence;
use crate::memory::Budget;
use crate::metrics::{DbFigures, Snapshot, StatsTotals, WorkerMetrics};
use crate::session::client::ClientRegistry;
use crate::session::notify::Notifier;
use crate::session::pubsub::Hub;
use crate::session::tracking::Tracking;
use crate::store::expire::ActiveExpiry;
use crate::store::{Keyspace, NUM_DBS, StoreStats};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// The state every worker shares, below the server.
pub struct Node {
    pub ks: Keyspace,
    pub config: Config,
    pub clients: Arc<ClientRegistry>,
    pub pubsub: Arc<Hub>,
    /// Client-side caching: who is told about changed keys.
    pub tracking: Arc<Tracking>,
    /// CLIENT PAUSE.
    pub pause: Arc<crate::session::pause::ClientPause>,
    /// Each worker's counters.
    pub workers: Vec<Arc<WorkerMetrics>>,
    pub table: CommandTable,
    pub expiry: ActiveExpiry,
    pub memory: Budget,
    pub started: Instant,
    /// Unix time (s) of the last CONFIG RESETSTAT / start.
    pub stat_reset_time: AtomicU64,
    /// Script cache, function libraries and the running script.
    pub scripts: super::scripting::Scripts,
    /// MONITOR's clients.
    pub monitors: crate::session::monitor::Monitors,
    /// The durability log (None with durability none): replayed at
    /// start-up, then journaling every change.
    pub persist: Option<Arc<Persistence>>,
    /// The cold tier values are demoted to at maxmemory (`max-disk`).
    pub cold: Option<Arc<crate::tier::cold_log::ColdLog>>,
    /// SLOWLOG's entries.
    pub slowlog: super::slowlog::SlowLog,
    /// LATENCY's events.
    pub latency: super::slowlog::LatencyMonitor,
    /// ACL users and the ACL LOG.
    pub acl: crate::session::acl::Acl,
    /// Cluster mode: the pushed topology (None: `cluster-enabled no`).
    pub cluster: Option<crate::cluster::Cluster>,
}

impl Node {
    /// The node for `config`, serving the commands of `table` (with `catalog`,
    /// their names as ACL rules give them: `commands::command_table()`); an
    /// error (for the caller to report and exit on) when a part it needs
    /// cannot be opened.
    pub fn new(
        config: Config,
        workers: usize,
        table: CommandTable,
        catalog: crate::session::acl::Catalog,
    ) -> Result<Self, String> {
        let acl = crate::session::acl::Acl::new(catalog);
        // Before any table exists: the keyspace's tables allocate through the process's pool.
        crate::sys::hugepages::configure(config.startup.hugepages);
        let sc = &config.startup;
        let policy = crate::durability::Policy::from_config(sc);
        let choice =
            crate::durability::persist::engine_choice(&sc.io_engine).unwrap_or(crate::tier::engine::EngineChoice::Auto);
        let persist = Persistence::new(policy, sc.dir.clone(), choice);
        let mut ks = match &persist {
            Some(p) => Keyspace::with_journal(sc.partitions, p.clone()),
            None => Keyspace::new(sc.partitions),
        };
        if let Some(p) = &persist {
            p.set_partitions(ks.num_partitions());
        }
        let cold_buffers = Arc::<crate::sys::file::BufferGauge>::default();
        let cold = if sc.max_disk > 0 {
            let dir = sc.dir.join("cold");
            let opened = crate::tier::cold_log::ColdLog::open(&dir, sc.max_disk, choice, cold_buffers.clone());
            match opened.map(|c| c.with_admission(config.runtime.tier_admission_frequent.clone())) {
                Ok(c) => {
                    tracing::info!(dir = %dir.display(), max_disk = sc.max_disk, engine = %c.engine, "cold tier open");
                    let c = Arc::new(c);
                    ks.set_cold(c.clone());
                    Some(c)
                }
                Err(e) => {
                    return Err(format!(
                        "cannot open the cold tier in {}: {e}; check that dir is writable or start with --max-disk 0",
                        dir.display()
                    ));
                }
            }
        } else {
            None
        };
        // Resolved once here (and again by CONFIG SET): never looked up per eviction.
        let rt = &config.runtime;
        ks.set_policy(rt.policy());
        ks.set_lfu_log_factor(rt.lfu_log_factor.load(Relaxed));
        ks.set_lfu_decay_minutes(rt.lfu_decay_minutes.load(Relaxed));
        let now_s = crate::store::now_ms() / 1000;
        let clients = Arc::new(ClientRegistry::default());
        let tracking = Arc::new(Tracking::new(clients.clone()));
        ks.set_tracker(tracking.clone());
        let workers: Vec<_> = (0..workers).map(|_| Arc::new(WorkerMetrics::new(table.stat_slots()))).collect();
        let pubsub = Arc::new(Hub::new(rt.obuf_limit_pubsub.clone(), workers.clone()));
        let cluster = if sc.cluster_enabled { Some(open_cluster(sc)?) } else { None };
        // Slots whose handover a restart cut short wait until its outcome is
        // known (`cluster::migration::resolve_after_restart`): from the first
        // command on, never served by two nodes.
        if let Some(t) = cluster.as_ref().and_then(|c| c.current()) {
            for mv in t.moves.iter().filter(|mv| mv.state == crate::cluster::MoveState::Handover) {
                ks.seal_slots(&mv.slots);
            }
        }
        let notify_flags = rt.notify_keyspace_events.clone();
        ks.set_key_events(notify_flags.clone(), Arc::new(Notifier::new(pubsub.clone(), notify_flags)));
        Ok(Node {
            ks,
            clients,
            tracking,
            pause: Default::default(),
            pubsub,
            workers,
            table,
            expiry: ActiveExpiry::default(),
            // The logs' and the migrations' buffers: reported, left out of
            // eviction (Redis's AOF buffer).
            memory: Budget::with_side_buffers(
                persist.as_ref().map(|p| p.buffers().clone()),
                cold.as_ref().map(|_| cold_buffers),
                cluster.as_ref().map(|c| c.migrations.buffers.clone()),
            ),
            started: Instant::now(),
            stat_reset_time: AtomicU64::new(now_s),
            scripts: Default::default(),
            monitors: Default::default(),
            persist,
            cold,
            slowlog: Default::default(),
            latency: Default::default(),
            acl,
            cluster,
            config,
        })
    }

    /// `used_memory`: keyspace + connection buffers + baseline.
    pub fn used_memory(&self) -> u64 {
        self.memory.used(&self.ks)
    }

    /// What is compared with `maxmemory`: `used_memory` less the logs'
    /// buffers (Redis's `mem_not_counted_for_evict`).
    pub fn used_memory_for_eviction(&self) -> u64 {
        self.memory.used_for_eviction(&self.ks)
    }

    pub fn maxmemory(&self) -> u64 {
        self.config.runtime.maxmemory.load(Relaxed)
    }

    /// Makes room before a write; false when the write must get OOM.
    pub fn ensure_memory(&self, stats: &StoreStats) -> bool {
        crate::memory::ensure_memory(&self.ks, &self.memory, &self.config.runtime, &self.expiry, stats)
    }

    pub fn total_commands(&self) -> u64 {
        crate::metrics::sum(&self.workers, |w| &w.server.commands)
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Keyspace statistics summed over workers.
    pub fn store_totals(&self) -> StatsTotals {
        let all: Vec<_> = self.workers.iter().map(|w| w.store.clone()).collect();
        crate::metrics::store_stats_totals(&all)
    }
}

/// Work for the script thread: runs with the node and the server.
pub type ScriptJob = Box<dyn FnOnce(&Node, &dyn ServerControl) + Send>;

/// What commands may ask of the server they run in.
pub trait ServerControl: Send + Sync {
    /// Runs `job` on the node's script thread (EVAL and FCALL run there, so
    /// that the worker keeps serving its other connections, which get BUSY
    /// while a script runs too long). False when there is no such thread.
    fn run_script_job(&self, job: ScriptJob) -> bool;
    /// Random id of this run (INFO run_id).
    fn run_id(&self) -> &str;
    /// The TCP port actually bound.
    fn tcp_port(&self) -> u16;
    /// Begins a graceful shutdown (SHUTDOWN).
    fn shut_down(&self);
    /// True once shutdown has begun: long-running commands stop early.
    fn shutting_down(&self) -> bool;
    /// Turn adaptive worker activation on or off (CONFIG SET adaptive-threads).
    fn set_adaptive_threads(&self, on: bool);
    /// Serve from the first `n` workers now (DEBUG ACTIVE-THREADS).
    fn set_active_threads(&self, n: usize);
    /// Makes room (open files) for `wanted` clients; Err(what fits) when
    /// the operating system will not allow that many.
    fn fit_maxclients(&self, wanted: usize) -> Result<(), usize>;
    /// Every figure INFO and `/metrics` report, with the keyspace's as the
    /// caller counted them.
    fn snapshot(&self, keyspace: [DbFigures; NUM_DBS]) -> Snapshot;
    /// Cluster mode: hands a PUBLISH to the other nodes (asynchronously;
    /// their subscribers are not counted in the reply, as in Redis Cluster).
    fn broadcast_publish(&self, channel: &[u8], message: &[u8]);
    /// Runs `job` on a thread of its own with the node (a slot migration);
    /// false when the node is going away.
    fn spawn_with_node(&self, name: &str, job: NodeJob) -> bool;
    /// Loads the `tls-*` settings' files for new TLS connections (CONFIG
    /// SET); Err says why they do not load (the current ones stay).
    fn reload_tls(&self) -> Result<(), String>;
}

/// Work for a thread of its own (`ServerControl::spawn_with_node`).
pub type NodeJob = Box<dyn FnOnce(&Node) + Send>;

/// Cluster mode's state: the topology kept in the data directory, the
/// admin port's password.
fn open_cluster(sc: &crate::config::StartupConfig) -> Result<crate::cluster::Cluster, String> {
    // The topology is kept beside the data even for a cache without a log:
    // a restarted pod answers with its slots before the operator pushes.
    let dir = match std::fs::create_dir_all(&sc.dir) {
        Ok(()) => Some(sc.dir.clone()),
        Err(e) => {
            tracing::warn!(dir = %sc.dir.display(), "cannot create the data directory ({e}): the cluster topology will not survive a restart");
            None
        }
    };
    let password = match &sc.cluster_admin_password_file {
        Some(path) => {
            let text = std::fs::read(path)
                .map_err(|e| format!("cannot read cluster-admin-password-file {}: {e}", path.display()))?;
            let trimmed = text.trim_ascii_end().to_vec();
            if trimmed.is_empty() {
                return Err(format!("cluster-admin-password-file {} is empty", path.display()));
            }
            Some(trimmed)
        }
        None => None,
    };
    crate::cluster::Cluster::open(dir, sc.cluster_prefer_hostname, password)
}
