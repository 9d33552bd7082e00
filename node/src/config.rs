//! Configuration: command line, environment, a redis.conf-style file, and
//! the runtime values CONFIG GET/SET read and change.
//!
//! Precedence, lowest to highest: built-in defaults, the config file,
//! `STRATA_*` environment variables, command-line flags (clap merges the
//! last two), then CONFIG SET at runtime.

use clap::Parser;
use parking_lot::RwLock;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering::Relaxed};

/// strata-node: a Redis-compatible cache node that uses every core.
///
/// Runs standalone (defaults: 127.0.0.1:6379, data under ./data) or as a pod
/// managed by the Strata operator. Every option can also be set in a
/// redis.conf-style file (`--config FILE`, e.g. `maxmemory 1gb`) or through
/// an environment variable (`STRATA_PORT=6380`).
#[derive(Parser, Debug, Clone)]
#[command(name = "strata-node", version, about, long_about)]
pub struct Cli {
    /// Config file in redis.conf syntax (`directive value` per line).
    #[arg(long, short = 'c', env = "STRATA_CONFIG")]
    pub config: Option<PathBuf>,

    /// Address(es) to listen on, space or comma separated.
    #[arg(long, env = "STRATA_BIND")]
    pub bind: Option<String>,

    /// TCP port for Redis clients; 0 disables TCP.
    #[arg(long, env = "STRATA_PORT")]
    pub port: Option<u16>,

    /// Also listen on this Unix socket.
    #[arg(long, env = "STRATA_UNIXSOCKET")]
    pub unixsocket: Option<PathBuf>,

    /// Permissions of the Unix socket, octal (e.g. 700).
    #[arg(long, env = "STRATA_UNIXSOCKETPERM")]
    pub unixsocketperm: Option<String>,

    /// Worker threads, each with its own event loop [default: available cores].
    #[arg(long, env = "STRATA_THREADS")]
    pub threads: Option<usize>,

    /// Pin worker threads to CPUs: "auto" (worker i → i-th allowed CPU) or a
    /// list like "0,2-3". Off by default.
    #[arg(long, env = "STRATA_CPU_AFFINITY")]
    pub cpu_affinity: Option<String>,

    /// Serve from as few worker threads as the load needs ("yes"), moving
    /// connections to more workers when one runs hot, or keep every worker
    /// busy ("no", for dedicated cores) [default: yes].
    #[arg(long, env = "STRATA_ADAPTIVE_THREADS")]
    pub adaptive_threads: Option<String>,

    /// Memory limit for data plus buffers, e.g. 512mb, 2gb; 0 = no limit.
    #[arg(long, env = "STRATA_MAXMEMORY")]
    pub maxmemory: Option<String>,

    /// What to do at the limit: noeviction, allkeys-lru, allkeys-lfu,
    /// allkeys-random, volatile-lru, volatile-lfu, volatile-random,
    /// volatile-ttl, sieve.
    #[arg(long, env = "STRATA_MAXMEMORY_POLICY")]
    pub maxmemory_policy: Option<String>,

    /// Keys sampled per eviction by the sampled policies (Redis: 5).
    #[arg(long, env = "STRATA_MAXMEMORY_SAMPLES")]
    pub maxmemory_samples: Option<usize>,

    /// Password clients must AUTH with.
    #[arg(long, env = "STRATA_REQUIREPASS", hide_env_values = true)]
    pub requirepass: Option<String>,

    /// Most concurrent clients.
    #[arg(long, env = "STRATA_MAXCLIENTS")]
    pub maxclients: Option<usize>,

    /// Close idle clients after this many seconds; 0 = never.
    #[arg(long, env = "STRATA_TIMEOUT")]
    pub timeout: Option<u64>,

    /// TCP keepalive interval in seconds; 0 = off.
    #[arg(long, env = "STRATA_TCP_KEEPALIVE")]
    pub tcp_keepalive: Option<u64>,

    /// Log level: debug, verbose, notice, warning (Redis names) or trace/info/warn/error.
    #[arg(long, env = "STRATA_LOGLEVEL")]
    pub loglevel: Option<String>,

    /// Log format: text or json.
    #[arg(long, env = "STRATA_LOG_FORMAT")]
    pub log_format: Option<String>,

    /// Data directory (reserved for the disk tier and durability).
    #[arg(long, env = "STRATA_DIR")]
    pub dir: Option<PathBuf>,

    /// Port of the HTTP endpoint serving /metrics, /healthz and /readyz; 0 disables it.
    #[arg(long, env = "STRATA_METRICS_PORT")]
    pub metrics_port: Option<u16>,

    /// Address the metrics endpoint binds to.
    #[arg(long, env = "STRATA_METRICS_BIND")]
    pub metrics_bind: Option<String>,

    /// Largest bulk string accepted (proto-max-bulk-len), e.g. 512mb.
    #[arg(long, env = "STRATA_PROTO_MAX_BULK_LEN")]
    pub proto_max_bulk_len: Option<String>,

    /// Largest query buffer per client (client-query-buffer-limit), e.g. 1gb.
    #[arg(long, env = "STRATA_CLIENT_QUERY_BUFFER_LIMIT")]
    pub client_query_buffer_limit: Option<String>,

    /// Keyspace partitions (power of two); more means less lock contention.
    #[arg(long, env = "STRATA_PARTITIONS")]
    pub partitions: Option<usize>,

    /// Number of databases (SELECT 0..N-1). Fixed at 16, as in Redis.
    #[arg(long, env = "STRATA_DATABASES")]
    pub databases: Option<usize>,

    /// How writes reach disk: none (a pure cache), write-back, periodic or sync.
    /// This build keeps data in RAM only: the other modes are accepted and
    /// reported (INFO persistence, CONFIG GET), with a warning at start-up.
    #[arg(long, env = "STRATA_DURABILITY")]
    pub durability: Option<String>,

    /// fsync interval of durability periodic: a whole number with unit us, ms
    /// or s (e.g. 10ms, 1s) [default: 10ms].
    #[arg(long, env = "STRATA_FSYNC_INTERVAL")]
    pub fsync_interval: Option<String>,
}

/// Durability mode names the node accepts.
pub const DURABILITY_MODES: &[&str] = &["none", "write-back", "periodic", "sync"];

/// fsync interval of durability periodic when none is given.
pub const DEFAULT_FSYNC_INTERVAL_US: u64 = 10_000;

/// Parses an fsync interval such as `10ms`, `500us` or `1s` into microseconds.
pub fn parse_interval_us(s: &str) -> Option<u64> {
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok().filter(|n| *n > 0)?;
    let mul = match unit {
        "us" => 1,
        "ms" => 1_000,
        "s" => 1_000_000,
        _ => return None,
    };
    n.checked_mul(mul)
}

/// Eviction policy names the node accepts (Redis's plus Strata's).
pub const POLICIES: &[&str] = &[
    "noeviction",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "sieve",
];

/// Settings fixed at start-up.
#[derive(Debug, Clone)]
pub struct StartupConfig {
    pub binds: Vec<String>,
    pub port: u16,
    pub unixsocket: Option<PathBuf>,
    pub unixsocketperm: Option<u32>,
    pub threads: usize,
    pub cpu_affinity: Option<Vec<usize>>,
    /// Grow and shrink the set of active workers with the load.
    pub adaptive_threads: bool,
    pub dir: PathBuf,
    pub metrics_port: u16,
    pub metrics_bind: String,
    pub partitions: usize,
    pub log_format: String,
    pub config_file: Option<PathBuf>,
    /// One of [`DURABILITY_MODES`].
    pub durability: &'static str,
    /// fsync interval of durability periodic, in microseconds.
    pub fsync_interval_us: u64,
}

/// Settings CONFIG SET can change while running. Hot-path values are atomics.
pub struct RuntimeConfig {
    pub maxmemory: AtomicU64,
    pub policy: AtomicU8,
    pub maxmemory_samples: AtomicUsize,
    pub maxclients: AtomicUsize,
    pub timeout: AtomicU64,
    pub tcp_keepalive: AtomicU64,
    pub proto_max_bulk_len: AtomicUsize,
    pub client_query_buffer_limit: AtomicUsize,
    pub requirepass: RwLock<Option<Vec<u8>>>,
    pub has_password: AtomicBool,
    pub loglevel: RwLock<String>,
    /// Output buffer hard limits (bytes) for normal and pub/sub clients; 0 = none.
    pub obuf_limit_normal: AtomicUsize,
    pub obuf_limit_pubsub: AtomicUsize,
}

impl RuntimeConfig {
    pub fn policy_name(&self) -> &'static str {
        POLICIES[self.policy.load(Relaxed) as usize]
    }

    pub fn password(&self) -> Option<Vec<u8>> {
        self.requirepass.read().clone()
    }
}

/// Parses Redis memory units: `1gb`, `512mb`, `100k`, `1024` (bytes).
/// `k`/`m`/`g` are powers of 1000, `kb`/`mb`/`gb` powers of 1024 (as Redis).
pub fn parse_memory(s: &str) -> Option<u64> {
    let s = s.trim().to_ascii_lowercase();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(mul)
}

/// Parses `0,2-3` into CPU ids.
fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((a, b)) = part.split_once('-') {
            let a: usize = a.parse().map_err(|_| format!("bad CPU range '{part}'"))?;
            let b: usize = b.parse().map_err(|_| format!("bad CPU range '{part}'"))?;
            if a > b {
                return Err(format!("bad CPU range '{part}'"));
            }
            out.extend(a..=b);
        } else {
            out.push(part.parse().map_err(|_| format!("bad CPU id '{part}'"))?);
        }
    }
    if out.is_empty() {
        return Err("empty CPU list".into());
    }
    Ok(out)
}

/// CPUs this process may run on (respects cgroup cpusets / taskset).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect();
            if !cpus.is_empty() {
                return cpus;
            }
        }
    }
    (0..std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).collect()
}

/// Reads a redis.conf-style file into (directive, value) pairs.
fn read_config_file(path: &PathBuf) -> Result<Vec<(String, String)>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words = crate::protocol::split_quoted(line.as_bytes())
            .ok_or_else(|| format!("{}:{}: unbalanced quotes", path.display(), n + 1))?;
        let mut words = words.into_iter().map(|w| String::from_utf8_lossy(&w).into_owned());
        let Some(name) = words.next() else { continue };
        let value: Vec<String> = words.collect();
        out.push((name.to_ascii_lowercase(), value.join(" ")));
    }
    Ok(out)
}

/// Merged configuration: start-up settings and the initial runtime values.
pub struct Config {
    pub startup: StartupConfig,
    pub runtime: RuntimeConfig,
}

impl Config {
    pub fn from_cli(cli: Cli) -> Result<Config, String> {
        let mut cli = cli;
        // The file supplies values the command line / environment left unset.
        if let Some(path) = cli.config.clone() {
            for (name, value) in read_config_file(&path)? {
                apply_file_directive(&mut cli, &name, &value)
                    .map_err(|e| format!("{}: '{name}': {e}", path.display()))?;
            }
        }
        let threads = cli.threads.unwrap_or_else(|| allowed_cpus().len()).max(1);
        let cpu_affinity = match cli.cpu_affinity.as_deref() {
            None | Some("") | Some("off") | Some("none") => None,
            Some("auto") => Some(allowed_cpus()),
            Some(list) => Some(parse_cpu_list(list)?),
        };
        let adaptive_threads = match cli.adaptive_threads.as_deref().map(str::to_ascii_lowercase).as_deref() {
            None | Some("yes") => true,
            Some("no") => false,
            Some(other) => return Err(format!("invalid adaptive-threads '{other}' (yes or no)")),
        };
        let mem = |v: &Option<String>, default: u64, what: &str| -> Result<u64, String> {
            match v {
                None => Ok(default),
                Some(s) => parse_memory(s).ok_or_else(|| format!("invalid {what} '{s}' (use e.g. 512mb, 2gb)")),
            }
        };
        let policy = cli.maxmemory_policy.clone().unwrap_or_else(|| "noeviction".into()).to_ascii_lowercase();
        let policy_idx = POLICIES
            .iter()
            .position(|p| *p == policy)
            .ok_or_else(|| format!("invalid maxmemory-policy '{policy}' (one of: {})", POLICIES.join(", ")))?;
        if let Some(d) = cli.databases
            && d != crate::store::NUM_DBS
        {
            return Err(format!("databases is fixed at {} in this version", crate::store::NUM_DBS));
        }
        let perm = match &cli.unixsocketperm {
            None => None,
            Some(p) => Some(u32::from_str_radix(p, 8).map_err(|_| format!("invalid unixsocketperm '{p}'"))?),
        };
        let durability = cli.durability.as_deref().unwrap_or("none").to_ascii_lowercase();
        let durability =
            DURABILITY_MODES.iter().copied().find(|m| *m == durability).ok_or_else(|| {
                format!("invalid durability '{durability}' (one of: {})", DURABILITY_MODES.join(", "))
            })?;
        let fsync_interval_us = match cli.fsync_interval.as_deref() {
            None => DEFAULT_FSYNC_INTERVAL_US,
            Some(_) if durability != "periodic" => {
                return Err("fsync-interval applies only to durability periodic".into());
            }
            Some(s) => parse_interval_us(s).ok_or_else(|| {
                format!("invalid fsync-interval '{s}' (a whole number with unit us, ms or s, e.g. 10ms)")
            })?,
        };
        let loglevel = cli.loglevel.clone().unwrap_or_else(|| "notice".into());
        let password = cli.requirepass.clone().filter(|p| !p.is_empty()).map(String::into_bytes);
        let startup = StartupConfig {
            binds: cli
                .bind
                .clone()
                .unwrap_or_else(|| "127.0.0.1".into())
                .split([' ', ','])
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
            port: cli.port.unwrap_or(6379),
            unixsocket: cli.unixsocket.clone(),
            unixsocketperm: perm,
            threads,
            cpu_affinity,
            adaptive_threads,
            dir: cli.dir.clone().unwrap_or_else(|| PathBuf::from("./data")),
            metrics_port: cli.metrics_port.unwrap_or(9121),
            metrics_bind: cli.metrics_bind.clone().unwrap_or_else(|| "0.0.0.0".into()),
            partitions: cli.partitions.unwrap_or(1024),
            log_format: cli.log_format.clone().unwrap_or_else(|| "text".into()),
            config_file: cli.config.clone(),
            durability,
            fsync_interval_us,
        };
        let runtime = RuntimeConfig {
            maxmemory: AtomicU64::new(mem(&cli.maxmemory, 0, "maxmemory")?),
            policy: AtomicU8::new(policy_idx as u8),
            maxmemory_samples: AtomicUsize::new(cli.maxmemory_samples.unwrap_or(5).clamp(1, 64)),
            maxclients: AtomicUsize::new(cli.maxclients.unwrap_or(10000)),
            timeout: AtomicU64::new(cli.timeout.unwrap_or(0)),
            tcp_keepalive: AtomicU64::new(cli.tcp_keepalive.unwrap_or(300)),
            proto_max_bulk_len: AtomicUsize::new(
                mem(&cli.proto_max_bulk_len, 512 * 1024 * 1024, "proto-max-bulk-len")? as usize,
            ),
            client_query_buffer_limit: AtomicUsize::new(mem(
                &cli.client_query_buffer_limit,
                1024 * 1024 * 1024,
                "client-query-buffer-limit",
            )? as usize),
            has_password: AtomicBool::new(password.is_some()),
            requirepass: RwLock::new(password),
            loglevel: RwLock::new(loglevel),
            obuf_limit_normal: AtomicUsize::new(0),
            obuf_limit_pubsub: AtomicUsize::new(32 * 1024 * 1024),
        };
        if startup.threads > 1024 {
            return Err("threads must be at most 1024".into());
        }
        Ok(Config { startup, runtime })
    }
}

/// Applies one config-file directive where the command line did not set it.
fn apply_file_directive(cli: &mut Cli, name: &str, value: &str) -> Result<(), String> {
    fn set<T>(slot: &mut Option<T>, v: T) {
        if slot.is_none() {
            *slot = Some(v);
        }
    }
    let v = value.to_string();
    match name {
        "bind" => set(&mut cli.bind, v),
        "port" => set(&mut cli.port, v.parse().map_err(|_| "not a port number")?),
        "unixsocket" => set(&mut cli.unixsocket, PathBuf::from(v)),
        "unixsocketperm" => set(&mut cli.unixsocketperm, v),
        "threads" | "io-threads" => set(&mut cli.threads, v.parse().map_err(|_| "not a number")?),
        "cpu-affinity" => set(&mut cli.cpu_affinity, v),
        "adaptive-threads" => set(&mut cli.adaptive_threads, v),
        "maxmemory" => set(&mut cli.maxmemory, v),
        "maxmemory-policy" => set(&mut cli.maxmemory_policy, v),
        "maxmemory-samples" => set(&mut cli.maxmemory_samples, v.parse().map_err(|_| "not a number")?),
        "requirepass" => set(&mut cli.requirepass, v),
        "maxclients" => set(&mut cli.maxclients, v.parse().map_err(|_| "not a number")?),
        "timeout" => set(&mut cli.timeout, v.parse().map_err(|_| "not a number")?),
        "tcp-keepalive" => set(&mut cli.tcp_keepalive, v.parse().map_err(|_| "not a number")?),
        "loglevel" => set(&mut cli.loglevel, v),
        "log-format" => set(&mut cli.log_format, v),
        "dir" => set(&mut cli.dir, PathBuf::from(v)),
        "metrics-port" => set(&mut cli.metrics_port, v.parse().map_err(|_| "not a port number")?),
        "metrics-bind" => set(&mut cli.metrics_bind, v),
        "proto-max-bulk-len" => set(&mut cli.proto_max_bulk_len, v),
        "client-query-buffer-limit" => set(&mut cli.client_query_buffer_limit, v),
        "partitions" => set(&mut cli.partitions, v.parse().map_err(|_| "not a number")?),
        "databases" => set(&mut cli.databases, v.parse().map_err(|_| "not a number")?),
        "durability" => set(&mut cli.durability, v),
        "fsync-interval" => set(&mut cli.fsync_interval, v),
        // Accepted for compatibility with existing redis.conf files; they
        // have no effect on a node without Redis persistence.
        "save" | "appendonly" | "daemonize" | "protected-mode" | "supervised" | "pidfile" | "logfile"
        | "always-show-logo" | "dbfilename" | "appendfilename" | "tcp-backlog" => {}
        _ => return Err("unknown directive".into()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_units_like_redis() {
        assert_eq!(parse_memory("1gb"), Some(1 << 30));
        assert_eq!(parse_memory("1g"), Some(1_000_000_000));
        assert_eq!(parse_memory("100"), Some(100));
        assert_eq!(parse_memory("5MB"), Some(5 << 20));
        assert_eq!(parse_memory("x"), None);
        assert_eq!(parse_memory("5tb"), None);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0,2-3").unwrap(), vec![0, 2, 3]);
        assert!(parse_cpu_list("3-1").is_err());
    }

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
    fn durability_modes_and_intervals() {
        let parse = |args: &[&str]| {
            let mut argv = vec!["strata-node"];
            argv.extend_from_slice(args);
            Config::from_cli(Cli::parse_from(argv))
        };
        let c = parse(&[]).unwrap();
        assert_eq!((c.startup.durability, c.startup.fsync_interval_us), ("none", DEFAULT_FSYNC_INTERVAL_US));
        let c = parse(&["--durability", "periodic", "--fsync-interval", "1s"]).unwrap();
        assert_eq!((c.startup.durability, c.startup.fsync_interval_us), ("periodic", 1_000_000));
        assert_eq!(parse(&["--durability", "SYNC"]).unwrap().startup.durability, "sync");
        let err = parse(&["--durability", "always"]).err().unwrap();
        assert!(err.contains("none, write-back, periodic, sync"), "{err}");
        assert!(parse(&["--durability", "sync", "--fsync-interval", "10ms"]).is_err(), "interval needs periodic");
        for bad in ["0ms", "10", "ms", "1.5s", "10m"] {
            assert_eq!(parse_interval_us(bad), None, "{bad}");
        }
        assert_eq!(parse_interval_us("250us"), Some(250));
    }
}
