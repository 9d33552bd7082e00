//! The one table of configuration parameters. Each entry gives a
//! parameter's name (redis.conf directive and CONFIG name, from which the
//! `--name` flag and `STRATA_NAME` variable derive), its help text, default
//! and value type, where it is stored at start-up, whether CONFIG SET may
//! change it and CONFIG REWRITE writes it, and how CONFIG GET reads it.

use super::values::{Kind, MB, Origin, Parsed, Protected, absolute_path, format_cpu_list, format_interval_us, yes_no};
use super::{Config, DATABASES, HugePages, keyspace_events, tls};
use super::{RuntimeConfig, StartupConfig};
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;

/// Where a parameter's value lives.
pub enum Store {
    /// Fixed at start-up.
    Startup(fn(&mut StartupConfig, &Parsed) -> Result<(), String>),
    /// A runtime setting: stored alike at start-up and by CONFIG SET.
    Runtime(fn(&RuntimeConfig, &Parsed)),
    /// Not a node setting: a Redis parameter CONFIG alone knows.
    Nowhere,
}

pub struct Param {
    /// Lower case, as in redis.conf and CONFIG GET/SET.
    pub name: &'static str,
    /// Other names the config file and CONFIG accept (Redis's).
    pub aliases: &'static [&'static str],
    /// The `--help` heading it is listed under.
    pub group: &'static str,
    pub help: &'static str,
    /// The value when none is given, as a user would write it; None where
    /// it is computed (threads) or absent (unixsocket).
    pub default: Option<&'static str>,
    pub kind: Kind,
    pub store: Store,
    /// What CONFIG SET does beyond storing, inside the configuration (the
    /// logger's level, buffer limits); a parameter with one is mutable.
    /// Parts of the node that keep a copy of a value (the keyspace's policy,
    /// the balancer) are told by CONFIG SET, which knows them.
    pub live: Option<fn(&Config, &Parsed)>,
    /// The current value, as CONFIG GET shows it.
    pub get: fn(&Config) -> String,
    /// Whether CONFIG REWRITE keeps it in the config file.
    pub rewrite: bool,
    /// Keep its environment value out of `--help` (passwords).
    pub secret: bool,
}

impl Param {
    /// The command-line flag, without its dashes.
    pub fn flag(&self) -> &'static str {
        self.name
    }

    /// The environment variable: `STRATA_` and the name in upper snake case.
    pub fn env_var(&self) -> String {
        format!("STRATA_{}", self.name.to_ascii_uppercase().replace('-', "_"))
    }

    /// Whether CONFIG SET may change it.
    pub fn mutable(&self) -> bool {
        matches!(self.store, Store::Runtime(_)) || self.live.is_some()
    }

    pub fn parse(&self, v: &[u8], origin: Origin) -> Result<Parsed, String> {
        self.kind.parse(v, origin)
    }

    /// Applies a value CONFIG SET validated.
    pub fn apply(&self, config: &Config, v: &Parsed) {
        if let Store::Runtime(store) = self.store {
            store(&config.runtime, v);
        }
        if let Some(live) = self.live {
            live(config, v);
        }
    }

    /// The value CONFIG REWRITE writes (memory in Redis's units).
    pub fn file_value(&self, config: &Config) -> String {
        self.kind.file_form((self.get)(config))
    }

    /// The value CONFIG REWRITE leaves out of the file when it has it.
    pub fn file_default(&self) -> &'static str {
        self.default.unwrap_or("")
    }
}

const INT_MAX: i64 = i32::MAX as i64;
const PORT: Kind = Kind::Int { min: 0, max: u16::MAX as i64 };
const COUNT: Kind = Kind::Int { min: 0, max: INT_MAX };
const BUFFER: Kind = Kind::Memory { min: MB, max: i64::MAX as u64 };

/// Parameters of the node: command line, environment, config file, CONFIG.
/// Those CONFIG REWRITE writes come in the order it appends them.
#[rustfmt::skip]
pub static PARAMS: &[Param] = &[
    Param {
        name: "maxmemory", aliases: &[], group: "Memory",
        help: "Memory limit for data plus buffers, e.g. 512mb, 2gb; 0 = no limit.",
        default: Some("0"), kind: Kind::Memory { min: 0, max: u64::MAX },
        store: Store::Runtime(|rt, v| rt.maxmemory.store(v.bytes(), Relaxed)), live: None,
        get: |c| c.runtime.maxmemory.load(Relaxed).to_string(), rewrite: true, secret: false,
    },
    Param {
        name: "maxmemory-policy", aliases: &[], group: "Memory",
        help: "What may be discarded at the limit: noeviction, allkeys-lru, allkeys-lfu, allkeys-random, \
               volatile-lru, volatile-lfu, volatile-random, volatile-ttl, sieve. With --max-disk, values move to \
               disk under every policy (least recently used first); noeviction answers OOM only when the disk \
               budget is full too, volatile-* then discards keys with a TTL only.",
        default: Some("noeviction"), kind: Kind::Policy,
        store: Store::Runtime(|rt, v| {
            let Parsed::Policy(p) = v else { unreachable!("a policy") };
            rt.policy.store(*p as u8, Relaxed);
        }),
        live: None, get: |c| c.runtime.policy_name().into(), rewrite: true, secret: false,
    },
    Param {
        name: "maxmemory-samples", aliases: &[], group: "Memory",
        help: "Keys sampled per eviction by the sampled policies (Redis: 5).",
        default: Some("5"), kind: Kind::Int { min: 1, max: INT_MAX },
        store: Store::Runtime(|rt, v| rt.maxmemory_samples.store(v.int() as usize, Relaxed)), live: None,
        get: |c| c.runtime.maxmemory_samples.load(Relaxed).to_string(), rewrite: true, secret: false,
    },
    Param {
        name: "activedefrag", aliases: &[], group: "Memory",
        help: "Move values out of sparse allocator pages when fragmentation is high, so freed pages return to the \
               OS and RSS stays near used_memory (Redis has it off by default; a pod must not drift to its limit).",
        default: Some("yes"), kind: Kind::YesNo,
        store: Store::Runtime(|rt, v| rt.activedefrag.store(v.flag(), Relaxed)), live: None,
        get: |c| yes_no(c.runtime.activedefrag.load(Relaxed)).into(), rewrite: true, secret: false,
    },
    Param {
        name: "active-defrag-ignore-bytes", aliases: &[], group: "Memory",
        help: "Fragmentation (allocator_frag_bytes) below this is left alone (Redis: 100mb; here sized for small pods).",
        default: Some("4mb"), kind: Kind::Memory { min: 1, max: u64::MAX },
        store: Store::Runtime(|rt, v| rt.active_defrag_ignore_bytes.store(v.bytes(), Relaxed)), live: None,
        get: |c| c.runtime.active_defrag_ignore_bytes.load(Relaxed).to_string(), rewrite: true, secret: false,
    },
    Param {
        name: "active-defrag-threshold-lower", aliases: &[], group: "Memory",
        help: "Fragmentation percentage (of allocated memory) that starts defragmentation (Redis: 10).",
        default: Some("10"), kind: Kind::Int { min: 0, max: 1000 },
        store: Store::Runtime(|rt, v| rt.active_defrag_threshold_lower.store(v.int() as u32, Relaxed)), live: None,
        get: |c| c.runtime.active_defrag_threshold_lower.load(Relaxed).to_string(), rewrite: true, secret: false,
    },
    Param {
        name: "maxclients", aliases: &[], group: "Clients",
        help: "Most concurrent clients.",
        default: Some("10000"), kind: Kind::Int { min: 1, max: u32::MAX as i64 },
        store: Store::Runtime(|rt, v| rt.maxclients.store(v.int() as usize, Relaxed)), live: None,
        get: |c| c.runtime.maxclients.load(Relaxed).to_string(), rewrite: true, secret: false,
    },
    Param {
        name: "timeout", aliases: &[], group: "Clients",
        help: "Close idle clients after this many seconds; 0 = never.",
        default: Some("0"), kind: COUNT,
        store: Store::Runtime(|rt, v| rt.timeout.store(v.int() as u64, Relaxed)), live: None,
        get: |c| c.runtime.timeout.load(Relaxed).to_string(), rewrite: true, secret: false,
    },
    Param {
        name: "tcp-keepalive", aliases: &[], group: "Clients",
        help: "TCP keepalive interval in seconds; 0 = off.",
        default: Some("300"), kind: COUNT,
        store: Store::Runtime(|rt, v| rt.tcp_keepalive.store(v.int() as u64, Relaxed)), live: None,
        get: |c| c.runtime.tcp_keepalive.load(Relaxed).to_string(), rewrite: true, secret: false,
    },
    Param {
        name: "requirepass", aliases: &[], group: "Security",
        help: "Password clients must AUTH with.",
        default: None, kind: Kind::Text,
        store: Store::Runtime(|rt, v| {
            let Parsed::Text(pass) = v else { unreachable!("text") };
            let pass = (!pass.is_empty()).then(|| pass.clone());
            rt.has_password.store(pass.is_some(), Relaxed);
            *rt.requirepass.write() = pass;
        }),
        live: None,
        get: |c| c.runtime.password().map(|p| String::from_utf8_lossy(&p).into_owned()).unwrap_or_default(),
        rewrite: true, secret: true,
    },
    Param {
        name: "aclfile", aliases: &[], group: "Security",
        help: "Users file that ACL LOAD reads and ACL SAVE writes (loaded at start-up).",
        default: None, kind: Kind::Text,
        store: Store::Startup(|c, v| {
            let path = v.text();
            c.aclfile = (!path.is_empty()).then(|| PathBuf::from(path));
            Ok(())
        }),
        live: None,
        get: |c| c.startup.aclfile.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
        rewrite: false, secret: false,
    },
    Param {
        name: "acllog-max-len", aliases: &[], group: "Security",
        help: "Entries ACL LOG keeps (the oldest are dropped).",
        default: Some("128"), kind: Kind::Int { min: 0, max: i64::MAX },
        store: Store::Runtime(|rt, v| rt.acllog_max_len.store(v.int() as u64, Relaxed)), live: None,
        get: |c| c.runtime.acllog_max_len.load(Relaxed).to_string(), rewrite: true, secret: false,
    },
    Param {
        name: "acl-pubsub-default", aliases: &[], group: "Security",
        help: "Channels of new users: resetchannels (none) or allchannels.",
        default: Some("resetchannels"), kind: Kind::Custom(parse_pubsub_default),
        store: Store::Runtime(|rt, v| rt.acl_pubsub_allchannels.store(v.int() != 0, Relaxed)), live: None,
        get: |c| {
            if c.runtime.acl_pubsub_allchannels.load(Relaxed) { "allchannels" } else { "resetchannels" }.into()
        },
        rewrite: true, secret: false,
    },
    Param {
        name: "loglevel", aliases: &[], group: "Logging",
        help: "Log level: debug, verbose, notice, warning (Redis names) or trace/info/warn/error.",
        default: Some("notice"), kind: Kind::LogLevel,
        store: Store::Runtime(|rt, v| *rt.loglevel.write() = v.text()),
        live: Some(|_, v| super::logging::set_level(&v.text())),
        get: |c| c.runtime.loglevel.read().clone(), rewrite: true, secret: false,
    },
    Param {
        name: "proto-max-bulk-len", aliases: &[], group: "Clients",
        help: "Largest bulk string accepted, e.g. 512mb.",
        default: Some("512mb"), kind: BUFFER,
        store: Store::Runtime(|rt, v| rt.proto_max_bulk_len.store(v.bytes() as usize, Relaxed)), live: None,
        get: |c| c.runtime.proto_max_bulk_len.load(Relaxed).to_string(), rewrite: true, secret: false,
    },
    Param {
        name: "client-query-buffer-limit", aliases: &[], group: "Clients",
        help: "Largest query buffer per client, e.g. 1gb.",
        default: Some("1gb"), kind: BUFFER,
        store: Store::Runtime(|rt, v| rt.client_query_buffer_limit.store(v.bytes() as usize, Relaxed)), live: None,
        get: |c| c.runtime.client_query_buffer_limit.load(Relaxed).to_string(), rewrite: true, secret: false,
    },
    Param {
        name: "adaptive-threads", aliases: &[], group: "Threads",
        help: "Serve from as few worker threads as the load needs (\"yes\"), moving connections to more workers \
               when one runs hot and back when that did not raise the commands per second by 10 %, or keep \
               every worker busy (\"no\", for dedicated cores).",
        default: Some("yes"), kind: Kind::YesNo,
        store: Store::Runtime(|rt, v| rt.adaptive_threads.store(v.flag(), Relaxed)), live: None,
        get: |c| yes_no(c.runtime.adaptive_threads.load(Relaxed)).into(), rewrite: true, secret: false,
    },
    Param {
        name: "busy-reply-threshold", aliases: &["lua-time-limit"], group: "Scripting",
        help: "Milliseconds a script (EVAL, FCALL) may run before other clients get BUSY and it can be killed.",
        default: Some("5000"), kind: Kind::Int { min: 0, max: i64::MAX },
        store: Store::Runtime(|rt, v| rt.busy_reply_threshold.store(v.int() as u64, Relaxed)), live: None,
        get: |c| c.runtime.busy_reply_threshold.load(Relaxed).to_string(), rewrite: true, secret: false,
    },
    Param {
        name: "slowlog-log-slower-than", aliases: &[], group: "Logging",
        help: "SLOWLOG records commands that run at least this many microseconds; 0 = every command, \
               negative = none.",
        default: Some("10000"), kind: Kind::Int { min: -1, max: i64::MAX },
        store: Store::Runtime(|rt, v| rt.slowlog_log_slower_than.store(v.int(), Relaxed)), live: None,
        get: |c| c.runtime.slowlog_log_slower_than.load(Relaxed).to_string(), rewrite: true, secret: false,
    },
    Param {
        name: "slowlog-max-len", aliases: &[], group: "Logging",
        help: "Entries SLOWLOG keeps (the oldest are dropped).",
        default: Some("128"), kind: Kind::Int { min: 0, max: i64::MAX },
        store: Store::Runtime(|rt, v| rt.slowlog_max_len.store(v.int() as u64, Relaxed)), live: None,
        get: |c| c.runtime.slowlog_max_len.load(Relaxed).to_string(), rewrite: true, secret: false,
    },
    Param {
        name: "latency-monitor-threshold", aliases: &[], group: "Logging",
        help: "LATENCY records events (commands) lasting at least this many milliseconds; 0 = off.",
        default: Some("0"), kind: Kind::Int { min: 0, max: i64::MAX },
        store: Store::Runtime(|rt, v| rt.latency_monitor_threshold.store(v.int() as u64, Relaxed)), live: None,
        get: |c| c.runtime.latency_monitor_threshold.load(Relaxed).to_string(), rewrite: true, secret: false,
    },
    // Fixed at start-up.
    Param {
        name: "hugepages", aliases: &[], group: "Memory",
        help: "Huge pages for the keyspace's large tables and the logs' I/O buffers (those of one huge page or \
               more): off; transparent (the kernel's transparent huge pages, nothing to reserve); 2Mi or 1Gi \
               (reserved pages: sysctl vm.nr_hugepages, or hugepages-2Mi/-1Gi in the pod's resources). When none \
               are free, they use ordinary memory and one warning is logged. Counted in used_memory; INFO memory \
               shows hugepages_*.",
        default: Some("off"), kind: Kind::Custom(parse_hugepages),
        store: Store::Startup(|c, v| {
            let Parsed::HugePages(h) = v else { unreachable!("a hugepages setting") };
            c.hugepages = *h;
            Ok(())
        }),
        live: None, get: |c| c.startup.hugepages.name().into(), rewrite: false, secret: false,
    },
    Param {
        name: "bind", aliases: &[], group: "Network",
        help: "Address(es) to listen on, space or comma separated.",
        default: Some("127.0.0.1"), kind: Kind::Text,
        store: Store::Startup(|c, v| {
            c.binds = v.text().split([' ', ',']).filter(|s| !s.is_empty()).map(String::from).collect();
            Ok(())
        }),
        live: None, get: |c| c.startup.binds.join(" "), rewrite: false, secret: false,
    },
    Param {
        name: "tcp-backlog", aliases: &[], group: "Network",
        help: "Listen backlog of the TCP port: connections the kernel queues while the node accepts \
               (capped by net.core.somaxconn).",
        default: Some("511"), kind: COUNT,
        store: Store::Startup(|c, v| {
            c.tcp_backlog = v.int() as u32;
            Ok(())
        }),
        live: None, get: |c| c.startup.tcp_backlog.to_string(), rewrite: false, secret: false,
    },
    Param {
        name: "port", aliases: &[], group: "Network",
        help: "TCP port for Redis clients; 0 disables TCP.",
        default: Some("6379"), kind: PORT,
        store: Store::Startup(|c, v| {
            c.port = v.int() as u16;
            Ok(())
        }),
        live: None, get: |c| c.startup.port.to_string(), rewrite: false, secret: false,
    },
    Param {
        name: "unixsocket", aliases: &[], group: "Network",
        help: "Also listen on this Unix socket.",
        default: None, kind: Kind::Text,
        store: Store::Startup(|c, v| {
            c.unixsocket = Some(PathBuf::from(v.text()));
            Ok(())
        }),
        live: None,
        get: |c| c.startup.unixsocket.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
        rewrite: false, secret: false,
    },
    Param {
        name: "unixsocketperm", aliases: &[], group: "Network",
        help: "Permissions of the Unix socket, octal (e.g. 700).",
        default: None, kind: Kind::Octal,
        store: Store::Startup(|c, v| {
            let Parsed::Perm(perm) = v else { unreachable!("permissions") };
            c.unixsocketperm = *perm;
            Ok(())
        }),
        live: None,
        get: |c| c.startup.unixsocketperm.map_or_else(|| "0".into(), |p| format!("{p:o}")),
        rewrite: false, secret: false,
    },
    Param {
        name: "tls-port", aliases: &[], group: "TLS",
        help: "TCP port for Redis clients over TLS (beside `port`; `--port 0` makes it the only one); 0 = none. \
               Needs --tls-cert-file and --tls-key-file.",
        default: Some("0"), kind: PORT,
        store: Store::Startup(|c, v| {
            c.tls_port = v.int() as u16;
            Ok(())
        }),
        live: None, get: |c| c.startup.tls_port.to_string(), rewrite: false, secret: false,
    },
    Param {
        name: "tls-cert-file", aliases: &[], group: "TLS",
        help: "The node's certificate chain (PEM). Reloaded by CONFIG SET and when the file changes on disk.",
        default: None, kind: Kind::Text,
        store: Store::Runtime(|rt, v| rt.tls.write().cert_file = tls::path(v.text())), live: None,
        get: |c| tls::show(&c.runtime.tls.read().cert_file), rewrite: true, secret: false,
    },
    Param {
        name: "tls-key-file", aliases: &[], group: "TLS",
        help: "The certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1; an encrypted PKCS#8 key needs \
               tls-key-file-pass).",
        default: None, kind: Kind::Text,
        store: Store::Runtime(|rt, v| rt.tls.write().key_file = tls::path(v.text())), live: None,
        get: |c| tls::show(&c.runtime.tls.read().key_file), rewrite: true, secret: false,
    },
    Param {
        name: "tls-key-file-pass", aliases: &[], group: "TLS",
        help: "Passphrase of tls-key-file when it is encrypted (PKCS#8, as OpenSSL 3's `genrsa -aes256` \
               or `pkcs8 -topk8` write it); an unencrypted key ignores it.",
        default: None, kind: Kind::Text,
        store: Store::Runtime(|rt, v| {
            let pass = v.text();
            rt.tls.write().key_file_pass = (!pass.is_empty()).then_some(pass);
        }),
        live: None, get: |c| c.runtime.tls.read().key_file_pass.clone().unwrap_or_default(), rewrite: true,
        secret: true,
    },
    Param {
        name: "tls-ca-cert-file", aliases: &[], group: "TLS",
        help: "CA certificates (PEM) that sign client certificates (tls-auth-clients) and, with tls-cluster, \
               the other nodes' certificates.",
        default: None, kind: Kind::Text,
        store: Store::Runtime(|rt, v| rt.tls.write().ca_cert_file = tls::path(v.text())), live: None,
        get: |c| tls::show(&c.runtime.tls.read().ca_cert_file), rewrite: true, secret: false,
    },
    Param {
        name: "tls-ca-cert-dir", aliases: &[], group: "TLS",
        help: "A directory of CA certificates (every PEM file in it), instead of or beside tls-ca-cert-file.",
        default: None, kind: Kind::Text,
        store: Store::Runtime(|rt, v| rt.tls.write().ca_cert_dir = tls::path(v.text())), live: None,
        get: |c| tls::show(&c.runtime.tls.read().ca_cert_dir), rewrite: true, secret: false,
    },
    Param {
        name: "tls-auth-clients", aliases: &[], group: "TLS",
        help: "Client certificates: yes (required, signed by the CA), optional (checked when given), no.",
        default: Some("yes"), kind: Kind::Custom(|v| match tls::AuthClients::parse(v) {
            Some(a) => Ok(Parsed::Int(a as i64)),
            None => Err("argument(s) must be one of the following: no, yes, optional".into()),
        }),
        store: Store::Runtime(|rt, v| {
            rt.tls.write().auth_clients = match v.int() {
                0 => tls::AuthClients::Yes,
                1 => tls::AuthClients::No,
                _ => tls::AuthClients::Optional,
            }
        }),
        live: None, get: |c| c.runtime.tls.read().auth_clients.name().into(), rewrite: true, secret: false,
    },
    Param {
        name: "tls-protocols", aliases: &[], group: "TLS",
        help: "TLS versions offered: \"TLSv1.2 TLSv1.3\" (the default, when empty) or either one.",
        default: None, kind: Kind::Text,
        store: Store::Runtime(|rt, v| rt.tls.write().protocols = v.text()), live: None,
        get: |c| c.runtime.tls.read().protocols.clone(), rewrite: true, secret: false,
    },
    Param {
        name: "tls-ciphers", aliases: &[], group: "TLS",
        help: "TLS 1.2 cipher suites, ':'-separated OpenSSL or IANA names (e.g. ECDHE-RSA-AES256-GCM-SHA384); \
               empty, DEFAULT or HIGH = all the node supports.",
        default: None, kind: Kind::Text,
        store: Store::Runtime(|rt, v| rt.tls.write().ciphers = v.text()), live: None,
        get: |c| c.runtime.tls.read().ciphers.clone(), rewrite: true, secret: false,
    },
    Param {
        name: "tls-ciphersuites", aliases: &[], group: "TLS",
        help: "TLS 1.3 cipher suites, ':'-separated (e.g. TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256); \
               empty = all.",
        default: None, kind: Kind::Text,
        store: Store::Runtime(|rt, v| rt.tls.write().ciphersuites = v.text()), live: None,
        get: |c| c.runtime.tls.read().ciphersuites.clone(), rewrite: true, secret: false,
    },
    Param {
        name: "tls-prefer-server-ciphers", aliases: &[], group: "TLS",
        help: "Choose the cipher suite in the node's order rather than the client's.",
        default: Some("no"), kind: Kind::YesNo,
        store: Store::Runtime(|rt, v| rt.tls.write().prefer_server_ciphers = v.flag()), live: None,
        get: |c| yes_no(c.runtime.tls.read().prefer_server_ciphers).into(), rewrite: true, secret: false,
    },
    Param {
        name: "tls-session-caching", aliases: &[], group: "TLS",
        help: "Let clients resume TLS sessions (a shorter handshake when they reconnect).",
        default: Some("yes"), kind: Kind::YesNo,
        store: Store::Runtime(|rt, v| rt.tls.write().session_caching = v.flag()), live: None,
        get: |c| yes_no(c.runtime.tls.read().session_caching).into(), rewrite: true, secret: false,
    },
    Param {
        name: "tls-session-cache-size", aliases: &[], group: "TLS",
        help: "TLS sessions the node remembers for resumption.",
        default: Some("20480"), kind: Kind::Int { min: 0, max: INT_MAX },
        store: Store::Runtime(|rt, v| rt.tls.write().session_cache_size = v.int() as usize), live: None,
        get: |c| c.runtime.tls.read().session_cache_size.to_string(), rewrite: true, secret: false,
    },
    Param {
        name: "tls-session-cache-timeout", aliases: &[], group: "TLS",
        help: "Seconds a remembered TLS session may be resumed.",
        default: Some("300"), kind: Kind::Int { min: 0, max: INT_MAX },
        store: Store::Runtime(|rt, v| rt.tls.write().session_cache_timeout_secs = v.int() as u64), live: None,
        get: |c| c.runtime.tls.read().session_cache_timeout_secs.to_string(), rewrite: true, secret: false,
    },
    Param {
        name: "tls-cluster", aliases: &[], group: "TLS",
        help: "TLS between cluster nodes: the admin port (topology pushes, forwarded commands, slot \
               migrations, PUBLISH) speaks TLS with the node's certificate and tls-auth-clients, and the \
               node's links to the others present its certificate (or tls-client-cert-file) and check theirs \
               against tls-ca-cert-file. Needs the CA file and the certificate files.",
        default: Some("no"), kind: Kind::YesNo,
        store: Store::Startup(|c, v| {
            c.tls_cluster = v.flag();
            Ok(())
        }),
        live: None, get: |c| yes_no(c.startup.tls_cluster).into(), rewrite: false, secret: false,
    },
    Param {
        name: "tls-client-cert-file", aliases: &[], group: "TLS",
        help: "The certificate (PEM) the node presents on its links to other nodes (tls-cluster); \
               default: tls-cert-file.",
        default: None, kind: Kind::Text,
        store: Store::Runtime(|rt, v| rt.tls.write().client_cert_file = tls::path(v.text())), live: None,
        get: |c| tls::show(&c.runtime.tls.read().client_cert_file), rewrite: true, secret: false,
    },
    Param {
        name: "tls-client-key-file", aliases: &[], group: "TLS",
        help: "The private key of tls-client-cert-file.",
        default: None, kind: Kind::Text,
        store: Store::Runtime(|rt, v| rt.tls.write().client_key_file = tls::path(v.text())), live: None,
        get: |c| tls::show(&c.runtime.tls.read().client_key_file), rewrite: true, secret: false,
    },
    Param {
        name: "tls-client-key-file-pass", aliases: &[], group: "TLS",
        help: "Passphrase of tls-client-key-file when it is encrypted.",
        default: None, kind: Kind::Text,
        store: Store::Runtime(|rt, v| {
            let pass = v.text();
            rt.tls.write().client_key_file_pass = (!pass.is_empty()).then_some(pass);
        }),
        live: None, get: |c| c.runtime.tls.read().client_key_file_pass.clone().unwrap_or_default(), rewrite: true,
        secret: true,
    },
    Param {
        name: "tls-replication", aliases: &[], group: "TLS",
        help: "TLS to a master: a strata node has no replication, so only `no` is accepted.",
        default: Some("no"), kind: Kind::YesNo,
        store: Store::Startup(|_, v| match v.flag() {
            false => Ok(()),
            true => Err("tls-replication yes: a strata node has no replication".into()),
        }),
        live: None, get: |_| "no".into(), rewrite: false, secret: false,
    },
    Param {
        name: "threads", aliases: &["io-threads"], group: "Threads",
        help: "Worker threads, each with its own event loop [default: available cores].",
        default: None, kind: Kind::Int { min: 0, max: i64::MAX },
        store: Store::Startup(|c, v| {
            if v.int() > 1024 {
                return Err("threads must be at most 1024".into());
            }
            c.threads = (v.int() as usize).max(1);
            Ok(())
        }),
        live: None, get: |c| c.startup.threads.to_string(), rewrite: false, secret: false,
    },
    Param {
        name: "cpu-affinity", aliases: &[], group: "Threads",
        help: "Pin worker threads to CPUs: \"auto\" (worker i → i-th allowed CPU) or a list like \"0,2-3\". \
               Off by default.",
        default: None, kind: Kind::CpuAffinity,
        store: Store::Startup(|c, v| {
            let Parsed::Cpus(cpus) = v else { unreachable!("CPUs") };
            c.cpu_affinity = cpus.clone();
            Ok(())
        }),
        live: None,
        get: |c| c.startup.cpu_affinity.as_deref().map(format_cpu_list).unwrap_or_default(),
        rewrite: false, secret: false,
    },
    Param {
        name: "log-format", aliases: &[], group: "Logging",
        help: "Log format: text or json.",
        default: Some("text"), kind: Kind::Text,
        store: Store::Startup(|c, v| {
            c.log_format = v.text();
            Ok(())
        }),
        live: None, get: |c| c.startup.log_format.clone(), rewrite: false, secret: false,
    },
    Param {
        name: "dir", aliases: &[], group: "Storage",
        help: "Data directory: the durability log (unless durability is none).",
        default: Some("./data"), kind: Kind::Text,
        store: Store::Startup(|c, v| {
            c.dir = PathBuf::from(v.text());
            Ok(())
        }),
        live: None, get: |c| absolute_path(&c.startup.dir), rewrite: false, secret: false,
    },
    Param {
        name: "max-disk", aliases: &[], group: "Storage",
        help: "Disk budget of the cold tier, e.g. 10gb: at maxmemory values are demoted to segment files in \
               <dir>/cold instead of lost (under every maxmemory-policy, noeviction included), and read back \
               when used. 0 = no tier (victims are evicted). The tier is a cache: it starts empty.",
        default: Some("0"), kind: Kind::Memory { min: 0, max: u64::MAX },
        store: Store::Startup(|c, v| {
            c.max_disk = v.bytes();
            Ok(())
        }),
        live: None, get: |c| c.startup.max_disk.to_string(), rewrite: false, secret: false,
    },
    Param {
        name: "tier-admission", aliases: &[], group: "Storage",
        help: "Which values leaving RAM the cold tier writes while it is full of live data (its cleaner evicts): \
               all; or frequent, which evicts values used once or never since they were written instead \
               (OBJECT FREQ at most one step above its start), sparing the disk writes of one-hit values at a \
               cost in disk hits where RAM is too small for the counter to see reuse.",
        default: Some("all"), kind: Kind::Custom(parse_tier_admission),
        store: Store::Runtime(|rt, v| rt.tier_admission_frequent.store(v.int() != 0, Relaxed)), live: None,
        get: |c| if c.runtime.tier_admission_frequent.load(Relaxed) { "frequent" } else { "all" }.into(),
        rewrite: true, secret: false,
    },
    Param {
        name: "partitions", aliases: &[], group: "Storage",
        help: "Keyspace partitions (power of two); more means less lock contention.",
        default: Some("1024"), kind: Kind::Int { min: 0, max: i64::MAX },
        store: Store::Startup(|c, v| {
            // As the keyspace makes it: a power of two, at most one per hash slot.
            c.partitions = (v.int() as usize).clamp(1, 16384).next_power_of_two();
            Ok(())
        }),
        live: None, get: |c| c.startup.partitions.to_string(), rewrite: false, secret: false,
    },
    Param {
        name: "databases", aliases: &[], group: "Storage",
        help: "Number of databases (SELECT 0..N-1). Fixed at 16, as in Redis.",
        default: Some("16"), kind: Kind::Int { min: 0, max: i64::MAX },
        store: Store::Startup(|_, v| {
            if v.int() != DATABASES as i64 {
                return Err(format!("databases is fixed at {DATABASES} in this version"));
            }
            Ok(())
        }),
        live: None, get: |_| DATABASES.to_string(), rewrite: false, secret: false,
    },
    Param {
        name: "durability", aliases: &[], group: "Storage",
        help: "How writes reach disk: none (a pure cache: nothing is written or replayed), write-back (logged in \
               the background, at most write-back-max-lag and write-back-max-bytes behind), periodic (logged at \
               once, fsync every fsync-interval) or sync (a reply only after the fsync covering it). The log lives \
               in dir and is replayed at start-up.",
        default: Some("none"), kind: Kind::Durability,
        store: Store::Startup(|c, v| {
            let Parsed::Durability(d) = v else { unreachable!("a durability mode") };
            c.durability = *d;
            Ok(())
        }),
        live: None, get: |c| c.startup.durability.name().into(), rewrite: false, secret: false,
    },
    Param {
        name: "fsync-interval", aliases: &[], group: "Storage",
        help: "fsync interval of durability periodic: a whole number with unit us, ms or s (e.g. 10ms, 1s).",
        default: Some("10ms"), kind: Kind::Interval,
        store: Store::Startup(|c, v| {
            let Parsed::Micros(us) = v else { unreachable!("an interval") };
            c.fsync_interval_us = *us;
            Ok(())
        }),
        live: None, get: |c| format_interval_us(c.startup.fsync_interval_us), rewrite: false, secret: false,
    },
    Param {
        name: "write-back-max-lag", aliases: &[], group: "Storage",
        help: "durability write-back: the longest a write may wait to reach the log's disk (us, ms or s). The log \
               is flushed at half of it; past it, replies wait for the flush (back-pressure), as in sync.",
        default: Some("1s"), kind: Kind::Interval,
        store: Store::Startup(|c, v| {
            let Parsed::Micros(us) = v else { unreachable!("an interval") };
            c.write_back_max_lag_us = *us;
            Ok(())
        }),
        live: None, get: |c| format_interval_us(c.startup.write_back_max_lag_us), rewrite: false, secret: false,
    },
    Param {
        name: "write-back-max-bytes", aliases: &[], group: "Storage",
        help: "durability write-back: the most log bytes not yet on disk, e.g. 64mb. The log is flushed at half \
               of it; past it, replies wait for the flush (back-pressure), as in sync. Default: maxmemory/16 at \
               start-up, at least 4mb and at most 64mb (64mb without maxmemory), as the log's buffers can hold \
               about three times it beyond maxmemory. CONFIG GET shows the figure in effect.",
        default: None, kind: Kind::Memory { min: 4096, max: i64::MAX as u64 },
        store: Store::Startup(|c, v| {
            c.write_back_max_bytes = v.bytes();
            Ok(())
        }),
        live: None, get: |c| c.startup.write_back_max_bytes.to_string(), rewrite: false, secret: false,
    },
    Param {
        name: "io-engine", aliases: &[], group: "Storage",
        help: "I/O engine of the log and the disk tier: auto (io_uring when the kernel and seccomp allow it, else aio, \
               else threads), uring, aio (a thread pool, with the workers' reads by Linux AIO: allowed by the \
               seccomp profiles that refuse io_uring) or threads. The engine chosen and why: INFO persistence.",
        default: Some("auto"), kind: Kind::Text,
        store: Store::Startup(|c, v| {
            let name = v.text();
            if !matches!(name.as_str(), "auto" | "uring" | "aio" | "threads") {
                return Err("argument must be one of auto, uring, aio, threads".into());
            }
            c.io_engine = name;
            Ok(())
        }),
        live: None, get: |c| c.startup.io_engine.clone(), rewrite: false, secret: false,
    },
    Param {
        name: "enable-debug-command", aliases: &[], group: "Security",
        help: "Who may run DEBUG: no, yes, or local (Unix socket and loopback clients). Fixed at start-up, \
               as in Redis.",
        default: Some("no"), kind: Kind::Custom(parse_protected),
        store: Store::Startup(|c, v| {
            let Parsed::Protected(p) = v else { unreachable!("a protected-command setting") };
            c.enable_debug_command = *p;
            Ok(())
        }),
        live: None, get: |c| c.startup.enable_debug_command.name().into(), rewrite: false, secret: false,
    },
    Param {
        name: "cluster-enabled", aliases: &[], group: "Cluster",
        help: "Serve as one shard of a Redis Cluster whose topology is pushed to this node (the operator, or \
               scripts/local-cluster.sh): commands for other nodes' hash slots are forwarded on `port` and answered \
               with MOVED on `cluster-direct-port`; data commands get CLUSTERDOWN until a topology arrives.",
        default: Some("no"), kind: Kind::YesNo,
        store: Store::Startup(|c, v| {
            c.cluster_enabled = v.flag();
            Ok(())
        }),
        live: None, get: |c| yes_no(c.startup.cluster_enabled).into(), rewrite: false, secret: false,
    },
    Param {
        name: "cluster-direct-port", aliases: &[], group: "Cluster",
        help: "Port cluster-aware clients use (the one CLUSTER SLOTS, SHARDS, NODES and MOVED advertise): a command \
               for another node's slot gets MOVED, as from a Redis Cluster node. 0: `port` + 1. On a TLS-only \
               node (`--port 0 --tls-port P`) it speaks TLS too, and defaults to P + 1.",
        default: Some("0"), kind: PORT,
        store: Store::Startup(|c, v| {
            c.cluster_direct_port = v.int() as u16;
            Ok(())
        }),
        live: None, get: |c| c.startup.cluster_direct_port.to_string(), rewrite: false, secret: false,
    },
    Param {
        name: "cluster-port", aliases: &[], group: "Cluster",
        help: "Admin port of cluster mode, where the topology is pushed (STRATA.TOPOLOGY) and nodes forward to one \
               another; never for applications. 0: `port` (or a TLS-only node's `tls-port`) + 10000, Redis's cluster bus \
               port. Plain TCP with a password (tls-cluster is not offered yet).",
        default: Some("0"), kind: PORT,
        store: Store::Startup(|c, v| {
            c.cluster_port = v.int() as u16;
            Ok(())
        }),
        live: None, get: |c| c.startup.cluster_port.to_string(), rewrite: false, secret: false,
    },
    Param {
        name: "cluster-admin-password-file", aliases: &[], group: "Cluster",
        help: "File holding the password of the admin port (AUTH <password> before anything else there); without \
               one the admin port is open to anyone who can reach it: local development only.",
        default: None, kind: Kind::Text,
        store: Store::Startup(|c, v| {
            c.cluster_admin_password_file = Some(PathBuf::from(v.text()));
            Ok(())
        }),
        live: None,
        get: |c| c.startup.cluster_admin_password_file.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
        rewrite: false, secret: false,
    },
    Param {
        name: "cluster-preferred-endpoint-type", aliases: &[], group: "Cluster",
        help: "What MOVED and CLUSTER SLOTS name a node by: ip or hostname (its DNS name through the headless \
               Service, when the topology has one).",
        default: Some("ip"), kind: Kind::Custom(parse_endpoint_type),
        store: Store::Startup(|c, v| {
            c.cluster_prefer_hostname = v.text() == "hostname";
            Ok(())
        }),
        live: None,
        get: |c| if c.startup.cluster_prefer_hostname { "hostname" } else { "ip" }.into(),
        rewrite: false, secret: false,
    },
    Param {
        name: "metrics-port", aliases: &[], group: "Metrics",
        help: "Port of the HTTP endpoint serving /metrics, /healthz and /readyz; 0 disables it.",
        default: Some("9121"), kind: PORT,
        store: Store::Startup(|c, v| {
            c.metrics_port = v.int() as u16;
            Ok(())
        }),
        live: None, get: |c| c.startup.metrics_port.to_string(), rewrite: false, secret: false,
    },
    Param {
        name: "metrics-bind", aliases: &[], group: "Metrics",
        help: "Address the metrics endpoint binds to; by default the first `bind` address, so the endpoint is \
               exposed no wider than the Redis port.",
        default: None, kind: Kind::Text,
        store: Store::Startup(|c, v| {
            c.metrics_bind = v.text();
            Ok(())
        }),
        live: None, get: |c| c.startup.metrics_bind.clone(), rewrite: false, secret: false,
    },
    Param {
        name: "notify-keyspace-events", aliases: &[], group: "Clients",
        help: "Keyspace notifications published through pub/sub, as Redis's letters (e.g. KEA; empty: off).",
        default: None, kind: Kind::Custom(parse_notify_keyspace_events),
        store: Store::Runtime(|rt, v| rt.notify_keyspace_events.store(v.int() as u32, Relaxed)), live: None,
        get: |c| keyspace_events::format(c.runtime.notify_keyspace_events.load(Relaxed)), rewrite: true, secret: false,
    },
];

const LONG: Kind = Kind::Int { min: 0, max: i64::MAX };
/// Redis's memory-valued size_t parameters (`1kb` allowed).
const BYTES: Kind = Kind::Memory { min: 0, max: i64::MAX as u64 };

/// A Redis integer parameter CONFIG alone knows, kept in a runtime atomic.
macro_rules! redis_int {
    ($name:literal, [$($alias:literal),*], $field:ident, $kind:expr, $help:literal) => {
        Param {
            name: $name, aliases: &[$($alias),*], group: "Redis", help: $help,
            default: None, kind: $kind,
            store: Store::Runtime(|rt, v| {
                let n = match v { Parsed::Bytes(b) => *b as i64, _ => v.int() };
                rt.$field.store(n, Relaxed)
            }),
            live: None, get: |c| c.runtime.$field.load(Relaxed).to_string(), rewrite: false, secret: false,
        }
    };
}

/// Redis parameters CONFIG GET/SET know that are not node settings: kept
/// for clients and tools that read or set them.
#[rustfmt::skip]
pub static REDIS_COMPAT: &[Param] = &[
    Param {
        name: "client-output-buffer-limit", aliases: &[], group: "Clients",
        help: "Output buffer hard limits of normal and pub/sub clients (soft limits are not kept).",
        default: None, kind: Kind::Custom(parse_obuf_limits), store: Store::Nowhere,
        live: Some(|c, v| {
            let Parsed::ObufLimits { normal, pubsub } = *v else { unreachable!("buffer limits") };
            let rt = &c.runtime;
            if let Some(n) = normal {
                rt.obuf_limit_normal.store(n, Relaxed);
            }
            if let Some(n) = pubsub {
                rt.obuf_limit_pubsub.store(n, Relaxed);
            }
        }),
        get: |c| {
            // Only hard limits exist; there are no soft limits and no replicas.
            let rt = &c.runtime;
            format!(
                "normal {} 0 0 slave 0 0 0 pubsub {} 0 0",
                rt.obuf_limit_normal.load(Relaxed),
                rt.obuf_limit_pubsub.load(Relaxed)
            )
        },
        rewrite: false, secret: false,
    },
    Param {
        name: "min-replicas-to-write", aliases: &["min-slaves-to-write"], group: "Replication",
        help: "Refuse writes (NOREPLICAS) unless this many replicas lag at most min-replicas-max-lag seconds; \
               a strata node has no replicas, so any value above 0 refuses every write.",
        default: Some("0"), kind: COUNT,
        store: Store::Runtime(|rt, v| rt.min_replicas_to_write.store(v.int() as u32, Relaxed)), live: None,
        get: |c| c.runtime.min_replicas_to_write.load(Relaxed).to_string(), rewrite: true, secret: false,
    },
    Param {
        name: "min-replicas-max-lag", aliases: &["min-slaves-max-lag"], group: "Replication",
        help: "Seconds of lag within which a replica counts for min-replicas-to-write (0: the check is off).",
        default: Some("10"), kind: COUNT,
        store: Store::Runtime(|rt, v| rt.min_replicas_max_lag.store(v.int() as u32, Relaxed)), live: None,
        get: |c| c.runtime.min_replicas_max_lag.load(Relaxed).to_string(), rewrite: true, secret: false,
    },
    Param {
        name: "lfu-log-factor", aliases: &[], group: "Memory", help: "LFU counter logarithm factor.",
        default: None, kind: COUNT,
        store: Store::Runtime(|rt, v| rt.lfu_log_factor.store(v.int() as u32, Relaxed)), live: None,
        get: |c| c.runtime.lfu_log_factor.load(Relaxed).to_string(), rewrite: false, secret: false,
    },
    Param {
        name: "lfu-decay-time", aliases: &[], group: "Memory", help: "Minutes per LFU counter decay step.",
        default: None, kind: COUNT,
        store: Store::Runtime(|rt, v| rt.lfu_decay_minutes.store(v.int() as u32, Relaxed)), live: None,
        get: |c| c.runtime.lfu_decay_minutes.load(Relaxed).to_string(), rewrite: false, secret: false,
    },
    redis_int!("hash-max-listpack-entries", ["hash-max-ziplist-entries"], hash_max_listpack_entries, LONG,
        "Largest hash (fields) OBJECT ENCODING reports as a listpack."),
    redis_int!("hash-max-listpack-value", ["hash-max-ziplist-value"], hash_max_listpack_value, BYTES,
        "Longest hash field or value (bytes) OBJECT ENCODING reports as a listpack."),
    redis_int!("set-max-intset-entries", [], set_max_intset_entries, LONG,
        "Largest set of integers OBJECT ENCODING reports as an intset."),
    redis_int!("zset-max-listpack-entries", ["zset-max-ziplist-entries"], zset_max_listpack_entries, LONG,
        "Largest sorted set OBJECT ENCODING reports as a listpack."),
    redis_int!("zset-max-listpack-value", ["zset-max-ziplist-value"], zset_max_listpack_value, BYTES,
        "Longest sorted set member (bytes) OBJECT ENCODING reports as a listpack."),
    redis_int!("list-max-listpack-size", ["list-max-ziplist-size"], list_max_listpack_size,
        Kind::Int { min: i32::MIN as i64, max: INT_MAX }, "Redis's quicklist node size (lists are kept as one \
        structure here)."),
    redis_int!("list-compress-depth", [], list_compress_depth, COUNT,
        "Redis's quicklist compression depth (lists are not compressed here)."),
    redis_int!("stream-node-max-bytes", [], stream_node_max_bytes, BYTES,
        "Redis's stream node size in bytes."),
    redis_int!("stream-node-max-entries", [], stream_node_max_entries, LONG, "Redis's stream node entries."),
    redis_int!("tracking-table-max-keys", [], tracking_table_max_keys, LONG,
        "Keys the client-side caching (CLIENT TRACKING) table may hold; 0 = no limit."),
    redis_int!("hll-sparse-max-bytes", [], hll_sparse_max_bytes, BYTES,
        "Redis's HyperLogLog sparse encoding limit in bytes."),
    redis_int!("active-defrag-threshold-upper", [], active_defrag_threshold_upper, Kind::Int { min: 0, max: 1000 },
        "Redis's fragmentation percentage for maximum defragmentation effort."),
    redis_int!("active-defrag-cycle-min", [], active_defrag_cycle_min, Kind::Int { min: 1, max: 99 },
        "Redis's minimum defragmentation CPU percentage."),
    redis_int!("active-defrag-cycle-max", [], active_defrag_cycle_max, Kind::Int { min: 1, max: 99 },
        "Redis's maximum defragmentation CPU percentage."),
    redis_int!("active-defrag-max-scan-fields", [], active_defrag_max_scan_fields, Kind::Int { min: 1, max: i64::MAX },
        "Redis's collection size above which defragmentation scans in steps."),
    redis_int!("active-expire-effort", [], active_expire_effort, Kind::Int { min: 1, max: 10 },
        "Redis's active expiry effort."),
    Param {
        name: "activerehashing", aliases: &[], group: "Memory", help: "Redis's incremental rehashing switch.",
        default: None, kind: Kind::Custom(parse_redis_bool),
        store: Store::Runtime(|rt, v| rt.activerehashing.store(v.flag(), Relaxed)), live: None,
        get: |c| yes_no(c.runtime.activerehashing.load(Relaxed)).into(), rewrite: false, secret: false,
    },
    Param {
        name: "latency-tracking", aliases: &[], group: "Logging", help: "Redis's per-command latency histograms.",
        default: None, kind: Kind::Custom(parse_redis_bool),
        store: Store::Runtime(|rt, v| rt.latency_tracking.store(v.flag(), Relaxed)), live: None,
        get: |c| yes_no(c.runtime.latency_tracking.load(Relaxed)).into(), rewrite: false, secret: false,
    },
    Param {
        name: "latency-tracking-info-percentiles", aliases: &[], group: "Logging",
        help: "Percentiles of the latency histograms INFO latencystats shows.",
        default: None, kind: Kind::Custom(parse_percentiles),
        store: Store::Runtime(|rt, v| *rt.latency_percentiles.write() = percentiles(&v.text()).unwrap_or_default()),
        live: None,
        get: |c| {
            let p = c.runtime.latency_percentiles.read();
            p.iter().map(|&x| trim_double(x)).collect::<Vec<_>>().join(" ")
        },
        rewrite: false, secret: false,
    },
    // No RDB or AOF: only their "off" values are accepted.
    Param {
        name: "save", aliases: &[], group: "Storage", help: "RDB snapshots: always off.",
        default: None, kind: Kind::Custom(parse_save), store: Store::Nowhere, live: Some(|_, _| {}),
        get: |_| String::new(), rewrite: false, secret: false,
    },
    Param {
        name: "appendonly", aliases: &[], group: "Storage", help: "The append only file: always off.",
        default: None, kind: Kind::Custom(parse_appendonly), store: Store::Nowhere, live: Some(|_, _| {}),
        get: |_| "no".into(), rewrite: false, secret: false,
    },
    Param {
        name: "hz", aliases: &[], group: "Storage", help: "Background task frequency.",
        default: None, kind: Kind::Text, store: Store::Nowhere, live: None,
        get: |_| "10".into(), rewrite: false, secret: false,
    },
    Param {
        name: "daemonize", aliases: &[], group: "Network", help: "Run in the background: never.",
        default: None, kind: Kind::Text, store: Store::Nowhere, live: None,
        get: |_| "no".into(), rewrite: false, secret: false,
    },
];

/// redis.conf directives a config file may hold that have no effect on a
/// node without Redis persistence; accepted so existing files load.
pub const IGNORED_DIRECTIVES: &[&str] = &[
    "save",
    "appendonly",
    "daemonize",
    "protected-mode",
    "supervised",
    "pidfile",
    "logfile",
    "always-show-logo",
    "dbfilename",
    "appendfilename",
    "tcp-backlog",
];

/// The node parameter a config file directive sets (by name or alias).
pub fn directive(name: &str) -> Option<&'static Param> {
    PARAMS.iter().find(|p| p.name == name || p.aliases.contains(&name))
}

/// Every name CONFIG GET/SET knows, with its parameter: each node parameter
/// under its name and aliases, then the Redis-only ones.
pub fn config_names() -> impl Iterator<Item = (&'static str, &'static Param)> {
    PARAMS.iter().flat_map(|p| std::iter::once(p.name).chain(p.aliases.iter().copied()).map(move |n| (n, p))).chain(
        REDIS_COMPAT.iter().flat_map(|p| std::iter::once(p.name).chain(p.aliases.iter().copied()).map(move |n| (n, p))),
    )
}

/// `<class> <hard> <soft> <soft seconds>` groups, as in redis.conf. Only the
/// hard limits of normal and pub/sub clients exist here.
fn parse_obuf_limits(v: &[u8]) -> Result<Parsed, String> {
    let text = std::str::from_utf8(v).map_err(|_| "argument must be a valid string".to_string())?;
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.is_empty() || words.len() % 4 != 0 {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let (mut normal, mut pubsub) = (None, None);
    for group in words.chunks(4) {
        let class = group[0].to_ascii_lowercase();
        if !matches!(class.as_str(), "normal" | "slave" | "replica" | "pubsub") {
            return Err("Invalid client class specified in buffer limit configuration.".into());
        }
        let hard = super::values::parse_memory(group[1]);
        let soft = super::values::parse_memory(group[2]);
        let secs = group[3].parse::<i64>().ok().filter(|s| *s >= 0);
        let (Some(hard), Some(_), Some(_)) = (hard, soft, secs) else {
            return Err("Error in hard, soft or soft_seconds setting in buffer limit configuration.".into());
        };
        match class.as_str() {
            "normal" => normal = Some(hard as usize),
            "pubsub" => pubsub = Some(hard as usize),
            _ => {}
        }
    }
    Ok(Parsed::ObufLimits { normal, pubsub })
}

/// `hugepages`: a setting by name, in any case (page sizes also as `2mb`, `1gb`).
fn parse_hugepages(v: &[u8]) -> Result<Parsed, String> {
    let names: Vec<&str> = HugePages::ALL.iter().map(|h| h.name()).collect();
    std::str::from_utf8(v)
        .ok()
        .and_then(HugePages::parse)
        .map(Parsed::HugePages)
        .ok_or_else(|| format!("argument(s) must be one of the following: {}", names.join(", ")))
}

/// `enable-debug-command`: Redis's words for a value it does not know.
fn parse_endpoint_type(v: &[u8]) -> Result<Parsed, String> {
    match std::str::from_utf8(v).unwrap_or("").to_ascii_lowercase().as_str() {
        t @ ("ip" | "hostname") => Ok(Parsed::Text(t.as_bytes().to_vec())),
        _ => Err("argument must be one of: ip, hostname".into()),
    }
}

fn parse_protected(v: &[u8]) -> Result<Parsed, String> {
    Protected::parse(v).map(Parsed::Protected).ok_or_else(|| {
        let names: Vec<&str> = Protected::ALL.iter().map(|p| p.name()).collect();
        format!("argument(s) must be one of the following: {}", names.join(", "))
    })
}

/// A Redis boolean parameter, with Redis's words for a bad value.
fn parse_pubsub_default(v: &[u8]) -> Result<Parsed, String> {
    if v.eq_ignore_ascii_case(b"allchannels") {
        Ok(Parsed::Int(1))
    } else if v.eq_ignore_ascii_case(b"resetchannels") {
        Ok(Parsed::Int(0))
    } else {
        Err("argument(s) must be one of the following: allchannels, resetchannels".into())
    }
}

fn parse_tier_admission(v: &[u8]) -> Result<Parsed, String> {
    if v.eq_ignore_ascii_case(b"frequent") {
        Ok(Parsed::Int(1))
    } else if v.eq_ignore_ascii_case(b"all") {
        Ok(Parsed::Int(0))
    } else {
        Err("argument(s) must be one of the following: all, frequent".into())
    }
}

fn parse_redis_bool(v: &[u8]) -> Result<Parsed, String> {
    if v.eq_ignore_ascii_case(b"yes") {
        Ok(Parsed::Bool(true))
    } else if v.eq_ignore_ascii_case(b"no") {
        Ok(Parsed::Bool(false))
    } else {
        Err("argument must be 'yes' or 'no'".into())
    }
}

fn parse_save(v: &[u8]) -> Result<Parsed, String> {
    if v.iter().all(u8::is_ascii_whitespace) {
        Ok(Parsed::Nothing)
    } else {
        Err("snapshotting (RDB) is not supported by this server".into())
    }
}

fn parse_appendonly(v: &[u8]) -> Result<Parsed, String> {
    if v.eq_ignore_ascii_case(b"no") {
        Ok(Parsed::Nothing)
    } else if v.eq_ignore_ascii_case(b"yes") {
        Err("the append only file (AOF) is not supported by this server".into())
    } else {
        Err("argument must be 'yes' or 'no'".into())
    }
}

/// Space-separated percentiles in [0, 100] ("" for none), as Redis checks them.
fn percentiles(v: &str) -> Result<Vec<f64>, String> {
    v.split_ascii_whitespace()
        .map(|w| {
            let p = crate::base::parse_f64(w.as_bytes())
                .filter(|p| !p.is_nan())
                .ok_or_else(|| "Invalid latency-tracking-info-percentiles parameters".to_string())?;
            if (0.0..=100.0).contains(&p) {
                Ok(p)
            } else {
                Err("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".to_string())
            }
        })
        .collect()
}

fn parse_percentiles(v: &[u8]) -> Result<Parsed, String> {
    let text = String::from_utf8_lossy(v).into_owned();
    percentiles(&text)?;
    Ok(Parsed::Text(text.into_bytes()))
}

/// Redis's `%f` then `trimDoubleString`: 50 for 50.0, 99.9 for 99.9.
pub fn trim_double(x: f64) -> String {
    let s = format!("{x:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn parse_notify_keyspace_events(v: &[u8]) -> Result<Parsed, String> {
    keyspace_events::parse(v).map(|flags| Parsed::Int(flags as i64)).ok_or_else(|| keyspace_events::INVALID.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Cli, Config, command};
    use std::collections::HashSet;

    #[test]
    fn every_parameter_has_a_unique_name_a_flag_an_env_var_and_help() {
        let mut names = HashSet::new();
        for (name, _) in config_names() {
            assert!(names.insert(name), "{name} is listed twice");
        }
        let cmd = command();
        for p in PARAMS {
            let arg = cmd.get_arguments().find(|a| a.get_long() == Some(p.name)).expect(p.name);
            assert_eq!(arg.get_env().and_then(|e| e.to_str()), Some(p.env_var().as_str()), "{}", p.name);
            assert!(p.env_var().starts_with("STRATA_") && !p.env_var().contains('-'), "{}", p.env_var());
            assert!(!p.help.is_empty() && arg.get_help().is_some(), "{} has no help", p.name);
            assert_eq!(arg.get_default_values().first().and_then(|d| d.to_str()), p.default, "{}", p.name);
            assert_eq!(arg.get_help_heading(), Some(p.group), "{}", p.name);
        }
        // Redis's CONFIG-only parameters stay off the command line.
        for p in REDIS_COMPAT {
            assert!(!p.help.is_empty(), "{}", p.name);
            assert!(cmd.get_arguments().all(|a| a.get_long() != Some(p.name)), "--{} exists", p.name);
        }
    }

    #[test]
    fn defaults_parse_as_their_own_type() {
        for p in PARAMS {
            if let Some(d) = p.default {
                assert!(p.parse(d.as_bytes(), Origin::ConfigSet).is_ok(), "{} default {d:?}", p.name);
            }
        }
        let fsync = PARAMS.iter().find(|p| p.name == "fsync-interval").unwrap();
        let us = fsync.parse(fsync.default.unwrap().as_bytes(), Origin::Startup).unwrap();
        assert_eq!(us, Parsed::Micros(crate::config::DEFAULT_FSYNC_INTERVAL_US));
    }

    #[test]
    fn config_get_round_trips_through_config_set() {
        let cli = Cli::parse_from(["strata-node", "--threads", "1", "--partitions", "4", "--maxmemory", "3mb"]);
        let config = Config::from_cli(cli).unwrap();
        for (name, p) in config_names() {
            let value = (p.get)(&config);
            if !p.mutable() {
                continue;
            }
            let parsed =
                p.parse(value.as_bytes(), Origin::ConfigSet).unwrap_or_else(|e| panic!("{name} {value:?}: {e}"));
            p.apply(&config, &parsed);
            assert_eq!((p.get)(&config), value, "{name}");
        }
        // A changed value reads back as set.
        let policy = PARAMS.iter().find(|p| p.name == "maxmemory-policy").unwrap();
        policy.apply(&config, &policy.parse(b"SIEVE", Origin::ConfigSet).unwrap());
        assert_eq!((policy.get)(&config), "sieve");
        assert_eq!(config.runtime.policy(), crate::config::EvictionPolicy::Sieve);
    }

    #[test]
    fn negative_values_on_the_command_line_and_redis_aliases() {
        let cli = Cli::parse_from(["strata-node", "--slowlog-log-slower-than", "-1", "--slowlog-max-len", "5"]);
        let config = Config::from_cli(cli).unwrap();
        assert_eq!(config.runtime.slowlog_log_slower_than.load(Relaxed), -1);
        assert_eq!(config.runtime.slowlog_max_len.load(Relaxed), 5);
        // An alias of a Redis-only parameter is the same parameter.
        let names: Vec<&str> = config_names().map(|(n, _)| n).collect();
        for n in ["hash-max-ziplist-entries", "zset-max-ziplist-value", "list-max-ziplist-size"] {
            assert!(names.contains(&n), "{n}");
        }
        let (_, p) = config_names().find(|(n, _)| *n == "hash-max-ziplist-entries").unwrap();
        p.apply(&config, &p.parse(b"7", Origin::ConfigSet).unwrap());
        assert_eq!(config.runtime.hash_max_listpack_entries.load(Relaxed), 7);
        let (_, p) = config_names().find(|(n, _)| *n == "stream-node-max-bytes").unwrap();
        p.apply(&config, &p.parse(b"2kb", Origin::ConfigSet).unwrap());
        assert_eq!((p.get)(&config), "2048");
    }

    #[test]
    fn help_lists_every_parameter_with_its_env_var() {
        let help = command().render_long_help().to_string();
        for p in PARAMS {
            assert!(help.contains(&format!("--{}", p.name)), "--help lacks --{}", p.name);
            assert!(help.contains(&p.env_var()), "--help lacks {}", p.env_var());
        }
        for default in ["[default: 6379]", "[default: noeviction]", "[default: 10ms]"] {
            assert!(help.contains(default), "--help lacks {default}");
        }
        assert!(help.contains("--config") && help.contains("Memory:") && help.contains("Network:"), "{help}");
    }
}
