//! Configuration: command line, environment, a redis.conf-style file, and
//! the runtime values CONFIG GET/SET read and change — all described by one
//! table of parameters ([`params::PARAMS`]).
//!
//! Precedence, lowest to highest: built-in defaults, the config file,
//! `STRATA_*` environment variables, command-line flags (clap merges the
//! last two), then CONFIG SET at runtime.

mod cli;
pub mod file;
pub mod keyspace_events;
pub mod logging;
pub mod params;
pub mod tls;
pub mod values;

pub use crate::sys::hugepages::HugePages;
pub use cli::{Cli, command};
pub use values::{DURABILITY_MODES, Durability, EvictionPolicy, POLICIES, Protected, parse_interval_us, parse_memory};

use params::{IGNORED_DIRECTIVES, PARAMS, Param, Store};
use parking_lot::RwLock;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use values::Origin;

/// fsync interval of durability periodic when none is given (the table's
/// default for `fsync-interval`).
pub const DEFAULT_FSYNC_INTERVAL_US: u64 = 10_000;
/// How late durability write-back's log may run behind RAM, by default.
pub const DEFAULT_WRITE_BACK_MAX_LAG_US: u64 = 1_000_000;
/// durability write-back's byte bound when none is given: maxmemory/16
/// within these (the log's buffers can hold about three times the bound
/// beyond maxmemory, which a pod's memory margin must cover), and the
/// upper one without maxmemory.
pub const DEFAULT_WRITE_BACK_MAX_BYTES: u64 = 64 << 20;
pub const MIN_DEFAULT_WRITE_BACK_MAX_BYTES: u64 = 4 << 20;

/// The `write-back-max-bytes` a node with `maxmemory` (0: none) gets by default.
pub fn default_write_back_max_bytes(maxmemory: u64) -> u64 {
    match maxmemory {
        0 => DEFAULT_WRITE_BACK_MAX_BYTES,
        m => (m / 16).clamp(MIN_DEFAULT_WRITE_BACK_MAX_BYTES, DEFAULT_WRITE_BACK_MAX_BYTES),
    }
}

/// Number of logical databases (SELECT 0..15), fixed as in Redis.
pub const DATABASES: usize = 16;

/// Settings fixed at start-up.
#[derive(Debug, Clone)]
pub struct StartupConfig {
    pub binds: Vec<String>,
    pub port: u16,
    /// Listen backlog of the TCP listeners.
    pub tcp_backlog: u32,
    pub unixsocket: Option<PathBuf>,
    pub unixsocketperm: Option<u32>,
    pub threads: usize,
    pub cpu_affinity: Option<Vec<usize>>,
    pub dir: PathBuf,
    /// Disk budget of the cold tier in bytes (`max-disk`); 0 = no tier.
    pub max_disk: u64,
    pub metrics_port: u16,
    pub metrics_bind: String,
    pub partitions: usize,
    pub log_format: String,
    pub config_file: Option<PathBuf>,
    pub durability: Durability,
    /// fsync interval of durability periodic, in microseconds.
    pub fsync_interval_us: u64,
    /// durability write-back's bounds on the log's lag behind RAM: age of
    /// the oldest write not yet durable, in µs, and bytes not yet durable.
    pub write_back_max_lag_us: u64,
    pub write_back_max_bytes: u64,
    /// The log's I/O engine: auto, uring, aio or threads (`io-engine`).
    pub io_engine: String,
    /// Who may run DEBUG (`enable-debug-command`).
    pub enable_debug_command: Protected,
    /// Huge pages for the keyspace's large tables (`hugepages`).
    pub hugepages: HugePages,
    /// Users file of ACL LOAD / ACL SAVE (`aclfile`); none by default.
    pub aclfile: Option<PathBuf>,
    /// Cluster mode (`cluster-enabled`) and its ports: 0 = derived from
    /// `port` (see `direct_port`, `admin_port`).
    pub cluster_enabled: bool,
    pub cluster_direct_port: u16,
    pub cluster_port: u16,
    pub cluster_admin_password_file: Option<PathBuf>,
    pub cluster_prefer_hostname: bool,
    /// TLS port for Redis clients (`tls-port`); 0 = none.
    pub tls_port: u16,
    /// `tls-cluster`: the admin port and the links between nodes use TLS.
    pub tls_cluster: bool,
}

impl StartupConfig {
    /// Before any parameter is loaded: what parameters without a default
    /// leave (no Unix socket, a thread per allowed CPU, no pinning).
    fn initial(config_file: Option<PathBuf>) -> StartupConfig {
        StartupConfig {
            binds: Vec::new(),
            port: 0,
            tcp_backlog: 0,
            unixsocket: None,
            unixsocketperm: None,
            threads: crate::sys::cpu::allowed_cpus().len().max(1),
            cpu_affinity: None,
            dir: PathBuf::new(),
            max_disk: 0,
            metrics_port: 0,
            metrics_bind: String::new(),
            partitions: 0,
            log_format: String::new(),
            config_file,
            durability: Durability::None,
            fsync_interval_us: DEFAULT_FSYNC_INTERVAL_US,
            write_back_max_lag_us: DEFAULT_WRITE_BACK_MAX_LAG_US,
            write_back_max_bytes: DEFAULT_WRITE_BACK_MAX_BYTES,
            io_engine: String::new(),
            enable_debug_command: Protected::No,
            hugepages: HugePages::Off,
            aclfile: None,
            cluster_enabled: false,
            cluster_direct_port: 0,
            cluster_port: 0,
            cluster_admin_password_file: None,
            cluster_prefer_hostname: false,
            tls_port: 0,
            tls_cluster: false,
        }
    }

    /// The port the cluster ports derive from: `port`, or `tls-port` on a
    /// TLS-only node (`port 0`).
    fn client_port(&self) -> u16 {
        if self.port == 0 { self.tls_port } else { self.port }
    }

    /// Whether the direct port speaks TLS: on a TLS-only node (`port 0`,
    /// `tls-port` set) every port clients use does.
    pub fn direct_port_tls(&self) -> bool {
        self.port == 0 && self.tls_port != 0
    }

    /// Whether the admin port, and the links to other nodes' admin ports,
    /// speak TLS (`tls-cluster` in cluster mode).
    pub fn cluster_tls(&self) -> bool {
        self.cluster_enabled && self.tls_cluster
    }

    /// Cluster mode's port for cluster-aware clients (MOVED); 0 without
    /// cluster mode or TCP.
    pub fn direct_port(&self) -> u16 {
        match (self.cluster_enabled, self.cluster_direct_port) {
            (false, _) => 0,
            (true, 0) if self.client_port() == 0 => 0,
            (true, 0) => self.client_port().wrapping_add(1),
            (true, p) => p,
        }
    }

    /// Cluster mode's admin port (topology pushes, forwarding between nodes).
    pub fn admin_port(&self) -> u16 {
        let base = self.client_port();
        match (self.cluster_enabled, self.cluster_port) {
            (false, _) => 0,
            (true, 0) if base == 0 || base > u16::MAX - 10000 => 0,
            (true, 0) => base + 10000,
            (true, p) => p,
        }
    }
}

/// Settings CONFIG SET can change while running. Hot-path values are atomics.
pub struct RuntimeConfig {
    pub maxmemory: AtomicU64,
    /// An [`EvictionPolicy`] as `u8`.
    pub policy: AtomicU8,
    pub maxmemory_samples: AtomicUsize,
    pub maxclients: AtomicUsize,
    pub timeout: AtomicU64,
    pub tcp_keepalive: AtomicU64,
    pub proto_max_bulk_len: AtomicUsize,
    pub client_query_buffer_limit: AtomicUsize,
    pub requirepass: RwLock<Option<Vec<u8>>>,
    pub has_password: AtomicBool,
    /// Certificates and options of `tls-port` (read when TLS loads or reloads).
    pub tls: RwLock<tls::TlsSettings>,
    pub loglevel: RwLock<String>,
    /// Output buffer hard limits (bytes) for normal and pub/sub clients; 0 = none.
    pub obuf_limit_normal: AtomicUsize,
    /// Shared with the publisher of keyspace notifications.
    pub obuf_limit_pubsub: Arc<AtomicUsize>,
    /// Grow and shrink the set of active workers with the load.
    pub adaptive_threads: AtomicBool,
    /// LFU counter growth (`lfu-log-factor`): higher = slower growth.
    pub lfu_log_factor: AtomicU32,
    /// `min-replicas-to-write` and `min-replicas-max-lag`: a node has no
    /// replicas, so writes are refused while both are set (as Redis does
    /// with fewer good replicas than asked for).
    pub min_replicas_to_write: AtomicU32,
    pub min_replicas_max_lag: AtomicU32,
    /// Idle minutes per LFU counter decrement (`lfu-decay-time`); 0 = none.
    pub lfu_decay_minutes: AtomicU32,
    /// Active defragmentation on, and when it starts: fragmentation over
    /// both this many bytes and this percentage of allocated memory.
    pub activedefrag: AtomicBool,
    pub active_defrag_ignore_bytes: AtomicU64,
    pub active_defrag_threshold_lower: AtomicU32,
    /// Milliseconds a script runs before other clients get BUSY
    /// (`busy-reply-threshold`, alias `lua-time-limit`).
    pub busy_reply_threshold: AtomicU64,
    /// Microseconds a command runs before SLOWLOG records it; negative = never.
    pub slowlog_log_slower_than: AtomicI64,
    /// Entries SLOWLOG keeps.
    pub slowlog_max_len: AtomicU64,
    /// Entries ACL LOG keeps (`acllog-max-len`).
    pub acllog_max_len: AtomicU64,
    /// New users start with every channel (`acl-pubsub-default allchannels`).
    pub acl_pubsub_allchannels: AtomicBool,
    /// `tier-admission frequent`: while the disk tier is full of live data,
    /// values used once or never are evicted rather than demoted. Shared
    /// with the tier.
    pub tier_admission_frequent: Arc<AtomicBool>,
    /// Milliseconds an event lasts before LATENCY records it; 0 = never.
    pub latency_monitor_threshold: AtomicU64,
    /// Redis's per-command latency histograms (`latency-tracking`).
    pub latency_tracking: AtomicBool,
    /// Percentiles INFO latencystats shows (`latency-tracking-info-percentiles`).
    pub latency_percentiles: RwLock<Vec<f64>>,
    /// Redis's encoding thresholds (OBJECT ENCODING), kept as Redis has them.
    pub hash_max_listpack_entries: AtomicI64,
    pub hash_max_listpack_value: AtomicI64,
    pub set_max_intset_entries: AtomicI64,
    pub zset_max_listpack_entries: AtomicI64,
    pub zset_max_listpack_value: AtomicI64,
    pub list_max_listpack_size: AtomicI64,
    pub list_compress_depth: AtomicI64,
    pub stream_node_max_bytes: AtomicI64,
    pub stream_node_max_entries: AtomicI64,
    /// Keys the client-side caching table may hold (0 = no limit).
    pub tracking_table_max_keys: AtomicI64,
    pub hll_sparse_max_bytes: AtomicI64,
    /// Redis's defragmentation and expiry tuning knobs.
    pub active_defrag_threshold_upper: AtomicI64,
    pub active_defrag_cycle_min: AtomicI64,
    pub active_defrag_cycle_max: AtomicI64,
    pub active_defrag_max_scan_fields: AtomicI64,
    pub active_expire_effort: AtomicI64,
    pub activerehashing: AtomicBool,
    /// `notify-keyspace-events` as [`keyspace_events`] flags; 0 = off. Shared
    /// with the keyspace, whose writers test it with one load.
    pub notify_keyspace_events: Arc<AtomicU32>,
}

impl RuntimeConfig {
    /// Whether writes are refused for want of good replicas (Redis's
    /// `checkGoodReplicasStatus`, with none connected: both settings on).
    pub fn lacks_good_replicas(&self) -> bool {
        self.min_replicas_to_write.load(Relaxed) > 0 && self.min_replicas_max_lag.load(Relaxed) > 0
    }

    /// Before any parameter is loaded; output buffer limits are Redis's defaults.
    fn initial() -> RuntimeConfig {
        RuntimeConfig {
            maxmemory: AtomicU64::new(0),
            policy: AtomicU8::new(EvictionPolicy::NoEviction as u8),
            maxmemory_samples: AtomicUsize::new(0),
            maxclients: AtomicUsize::new(0),
            timeout: AtomicU64::new(0),
            tcp_keepalive: AtomicU64::new(0),
            proto_max_bulk_len: AtomicUsize::new(0),
            client_query_buffer_limit: AtomicUsize::new(0),
            requirepass: RwLock::new(None),
            has_password: AtomicBool::new(false),
            tls: RwLock::new(tls::TlsSettings::default()),
            loglevel: RwLock::new(String::new()),
            obuf_limit_normal: AtomicUsize::new(0),
            obuf_limit_pubsub: Arc::new(AtomicUsize::new(32 * 1024 * 1024)),
            adaptive_threads: AtomicBool::new(true),
            // Redis's defaults.
            lfu_log_factor: AtomicU32::new(10),
            min_replicas_to_write: AtomicU32::new(0),
            min_replicas_max_lag: AtomicU32::new(10),
            lfu_decay_minutes: AtomicU32::new(1),
            activedefrag: AtomicBool::new(true),
            active_defrag_ignore_bytes: AtomicU64::new(0),
            active_defrag_threshold_lower: AtomicU32::new(0),
            busy_reply_threshold: AtomicU64::new(5000),
            slowlog_log_slower_than: AtomicI64::new(10_000),
            slowlog_max_len: AtomicU64::new(128),
            acllog_max_len: AtomicU64::new(128),
            acl_pubsub_allchannels: AtomicBool::new(false),
            tier_admission_frequent: Arc::new(AtomicBool::new(false)),
            latency_monitor_threshold: AtomicU64::new(0),
            latency_tracking: AtomicBool::new(true),
            latency_percentiles: RwLock::new(vec![50.0, 99.0, 99.9]),
            hash_max_listpack_entries: AtomicI64::new(512),
            hash_max_listpack_value: AtomicI64::new(64),
            set_max_intset_entries: AtomicI64::new(512),
            zset_max_listpack_entries: AtomicI64::new(128),
            zset_max_listpack_value: AtomicI64::new(64),
            list_max_listpack_size: AtomicI64::new(-2),
            list_compress_depth: AtomicI64::new(0),
            stream_node_max_bytes: AtomicI64::new(4096),
            stream_node_max_entries: AtomicI64::new(100),
            tracking_table_max_keys: AtomicI64::new(1_000_000),
            hll_sparse_max_bytes: AtomicI64::new(3000),
            active_defrag_threshold_upper: AtomicI64::new(100),
            active_defrag_cycle_min: AtomicI64::new(1),
            active_defrag_cycle_max: AtomicI64::new(25),
            active_defrag_max_scan_fields: AtomicI64::new(1000),
            active_expire_effort: AtomicI64::new(1),
            activerehashing: AtomicBool::new(true),
            notify_keyspace_events: Arc::new(AtomicU32::new(0)),
        }
    }

    pub fn policy(&self) -> EvictionPolicy {
        EvictionPolicy::from_index(self.policy.load(Relaxed))
    }

    pub fn policy_name(&self) -> &'static str {
        self.policy().name()
    }

    pub fn password(&self) -> Option<Vec<u8>> {
        self.requirepass.read().clone()
    }
}

/// Merged configuration: start-up settings and the initial runtime values.
pub struct Config {
    pub startup: StartupConfig,
    pub runtime: RuntimeConfig,
}

/// Where a parameter's start-up value came from, for error messages.
enum Source<'a> {
    /// A flag or environment variable.
    Given,
    /// A config file directive (the name it was given by).
    File(&'a str),
    Default,
}

impl Config {
    /// Every parameter from flags and environment, the config file or its
    /// default, in that order of precedence.
    pub fn from_cli(cli: Cli) -> Result<Config, String> {
        let config_file = cli.config_file();
        let directives = match &config_file {
            Some(path) => file::read_config_file(path)?,
            None => Vec::new(),
        };
        let in_file = |why: &str, name: &str| {
            format!("{}: '{name}': {why}", config_file.as_deref().unwrap_or(std::path::Path::new("")).display())
        };
        if let Some((name, _)) =
            directives.iter().find(|(n, _)| params::directive(n).is_none() && !IGNORED_DIRECTIVES.contains(&n.as_str()))
        {
            return Err(in_file("unknown directive", name));
        }
        let mut startup = StartupConfig::initial(config_file.clone());
        let runtime = RuntimeConfig::initial();
        let mut given = Vec::new();
        for p in PARAMS {
            // The first directive wins when a file repeats one (or its alias).
            let from_file =
                || directives.iter().find(|(n, _)| params::directive(n).is_some_and(|q| std::ptr::eq(q, p)));
            let (value, source) = if let Some(v) = cli.given(p) {
                (v, Source::Given)
            } else if let Some((name, v)) = from_file() {
                (v.as_str(), Source::File(name))
            } else if let Some(v) = p.default {
                (v, Source::Default)
            } else {
                continue;
            };
            load(p, value, &mut startup, &runtime).map_err(|why| match source {
                Source::File(name) => in_file(&why, name),
                Source::Given | Source::Default => format!("invalid {} '{value}': {why}", p.name),
            })?;
            if !matches!(source, Source::Default) {
                given.push(p.name);
            }
        }
        if startup.metrics_bind.is_empty() {
            // Unset: as exposed as the Redis port, no more.
            startup.metrics_bind = startup.binds.first().cloned().unwrap_or_else(|| "127.0.0.1".into());
        }
        if !given.contains(&"write-back-max-bytes") {
            startup.write_back_max_bytes = default_write_back_max_bytes(runtime.maxmemory.load(Relaxed));
        }
        if given.contains(&"fsync-interval") && startup.durability != Durability::Periodic {
            return Err("fsync-interval applies only to durability periodic".into());
        }
        Ok(Config { startup, runtime })
    }
}

/// Parses a start-up value and stores it where the parameter lives.
fn load(p: &Param, value: &str, startup: &mut StartupConfig, runtime: &RuntimeConfig) -> Result<(), String> {
    let v = p.parse(value.as_bytes(), Origin::Startup)?;
    match p.store {
        Store::Startup(store) => store(startup, &v),
        Store::Runtime(store) => {
            store(runtime, &v);
            Ok(())
        }
        Store::Nowhere => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_then_cli_precedence() {
        let dir = std::env::temp_dir().join(format!("strata-conf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("node.conf");
        std::fs::write(&f, "# comment\nport 7000\nmaxmemory 10mb\nmaxmemory-policy allkeys-lru\nsave \"\"\n").unwrap();
        let cli = Cli::parse_from(["strata-node", "--config", f.to_str().unwrap(), "--port", "7001"]);
        let c = Config::from_cli(cli).unwrap();
        assert_eq!(c.startup.port, 7001, "command line wins over the file");
        assert_eq!(c.runtime.maxmemory.load(Relaxed), 10 << 20);
        assert_eq!(c.runtime.policy_name(), "allkeys-lru");
        std::fs::write(&f, "bogus 1\n").unwrap();
        let cli = Cli::parse_from(["strata-node", "--config", f.to_str().unwrap()]);
        assert!(Config::from_cli(cli).is_err());
    }

    #[test]
    fn metrics_bind_follows_the_first_bind_unless_set_and_backlog_defaults_to_redis() {
        let parse = |args: &[&str]| {
            let mut argv = vec!["strata-node"];
            argv.extend_from_slice(args);
            Config::from_cli(Cli::parse_from(argv)).unwrap().startup
        };
        let c = parse(&[]);
        assert_eq!((c.metrics_bind.as_str(), c.tcp_backlog), ("127.0.0.1", 511));
        assert_eq!(parse(&["--bind", "10.0.0.5 127.0.0.1"]).metrics_bind, "10.0.0.5");
        assert_eq!(parse(&["--bind", "0.0.0.0", "--metrics-bind", "127.0.0.1"]).metrics_bind, "127.0.0.1");
        assert_eq!(parse(&["--tcp-backlog", "64"]).tcp_backlog, 64);
    }

    #[test]
    fn durability_modes_and_intervals() {
        let parse = |args: &[&str]| {
            let mut argv = vec!["strata-node"];
            argv.extend_from_slice(args);
            Config::from_cli(Cli::parse_from(argv))
        };
        let c = parse(&[]).unwrap();
        assert_eq!((c.startup.durability.name(), c.startup.fsync_interval_us), ("none", DEFAULT_FSYNC_INTERVAL_US));
        let c = parse(&["--durability", "periodic", "--fsync-interval", "1s"]).unwrap();
        assert_eq!((c.startup.durability.name(), c.startup.fsync_interval_us), ("periodic", 1_000_000));
        assert_eq!(parse(&["--durability", "SYNC"]).unwrap().startup.durability, Durability::Sync);
        let err = parse(&["--durability", "always"]).err().unwrap();
        assert!(err.contains("none, write-back, periodic, sync"), "{err}");
        assert!(parse(&["--durability", "sync", "--fsync-interval", "10ms"]).is_err(), "interval needs periodic");
        for bad in ["0ms", "10", "ms", "1.5s", "10m"] {
            assert_eq!(parse_interval_us(bad), None, "{bad}");
        }
        assert_eq!(parse_interval_us("250us"), Some(250));
    }

    #[test]
    fn write_back_max_bytes_defaults_to_a_sixteenth_of_maxmemory_within_bounds() {
        let parse = |args: &[&str]| {
            let mut argv = vec!["strata-node"];
            argv.extend_from_slice(args);
            Config::from_cli(Cli::parse_from(argv)).unwrap().startup.write_back_max_bytes
        };
        assert_eq!(parse(&[]), 64 << 20, "no maxmemory: the upper bound");
        assert_eq!(parse(&["--maxmemory", "480mb"]), 30 << 20);
        assert_eq!(parse(&["--maxmemory", "16mb"]), 4 << 20, "at least 4mb");
        assert_eq!(parse(&["--maxmemory", "8gb"]), 64 << 20, "at most 64mb");
        assert_eq!(parse(&["--maxmemory", "16mb", "--write-back-max-bytes", "1mb"]), 1 << 20, "given wins");
        assert_eq!(parse(&["--maxmemory", "8gb", "--write-back-max-bytes", "200mb"]), 200 << 20, "given wins");
    }

    #[test]
    fn hugepages_default_off_and_take_kubernetes_and_redis_units() {
        let parse = |args: &[&str]| {
            let mut argv = vec!["strata-node"];
            argv.extend_from_slice(args);
            Config::from_cli(Cli::parse_from(argv))
        };
        assert_eq!(parse(&[]).unwrap().startup.hugepages, HugePages::Off);
        for (value, want) in [
            ("2Mi", HugePages::Size2Mi),
            ("2mb", HugePages::Size2Mi),
            ("1GI", HugePages::Size1Gi),
            ("transparent", HugePages::Transparent),
            ("off", HugePages::Off),
        ] {
            assert_eq!(parse(&["--hugepages", value]).unwrap().startup.hugepages, want, "{value}");
        }
        let err = parse(&["--hugepages", "yes"]).err().unwrap();
        assert!(err.contains("off, transparent, 2Mi, 1Gi"), "{err}");
        let c = parse(&["--hugepages", "2m"]).unwrap();
        let p = params::directive("hugepages").unwrap();
        assert_eq!((p.get)(&c), "2Mi");
        assert!(!p.mutable(), "fixed at start-up");
    }
}
