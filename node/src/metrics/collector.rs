//! Prometheus collector: turns the per-worker counters into metric families
//! at scrape time.
//!
//! The request path only bumps its own worker's single-writer atomics (see
//! `metrics`); nothing shared is touched per command. This collector sums
//! over workers when `/metrics` is scraped, which is why it is a custom
//! `Collector` rather than registered `Counter`s.

use super::{CmdStat, LATENCY_BUCKETS, WorkerMetrics};
use crate::server::Shared;
use crate::store::NUM_DBS;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

/// A registry holding the node's collector, ready for `text::encode`.
pub fn registry(shared: Arc<Shared>) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(StrataCollector::new(shared)));
    registry
}

/// Reads the node's counters on every scrape.
pub struct StrataCollector {
    shared: Arc<Shared>,
}

impl StrataCollector {
    pub fn new(shared: Arc<Shared>) -> Self {
        StrataCollector { shared }
    }
}

impl fmt::Debug for StrataCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StrataCollector").finish_non_exhaustive()
    }
}

impl Collector for StrataCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let s = &*self.shared;
        let commands: Vec<(&str, CmdTotals)> = s
            .table
            .iter()
            .map(|(idx, def)| (def.name, CmdTotals::sum(&s.workers, idx)))
            .filter(|(_, t)| t.is_active())
            .collect();
        encode_commands(&mut enc, &commands)?;
        encode_server(&mut enc, s)?;
        encode_store(&mut enc, s)?;
        encode_process(&mut enc, s)
    }
}

/// One command's counters summed over workers.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct CmdTotals {
    pub calls: u64,
    pub failed: u64,
    pub rejected: u64,
    pub nanos: u64,
    /// Per-bucket (not cumulative) counts; the last slot is the +Inf overflow.
    pub buckets: [u64; LATENCY_BUCKETS.len() + 1],
}

impl CmdTotals {
    pub fn sum(workers: &[Arc<WorkerMetrics>], idx: usize) -> Self {
        let mut t = CmdTotals::default();
        for w in workers {
            if let Some(stat) = w.cmds.get(idx) {
                t.add(stat);
            }
        }
        t
    }

    fn add(&mut self, s: &CmdStat) {
        self.calls += s.calls.load(Relaxed);
        self.failed += s.failed.load(Relaxed);
        self.rejected += s.rejected.load(Relaxed);
        self.nanos += s.nanos.load(Relaxed);
        for (t, b) in self.buckets.iter_mut().zip(&s.buckets) {
            *t += b.load(Relaxed);
        }
    }

    /// Commands never called nor refused are left out: the table has
    /// hundreds of entries and most are never used.
    pub fn is_active(&self) -> bool {
        self.calls > 0 || self.rejected > 0
    }
}

/// Per-command families, labelled `command`.
pub fn encode_commands(enc: &mut DescriptorEncoder, commands: &[(&str, CmdTotals)]) -> fmt::Result {
    let per_command = |enc: &mut DescriptorEncoder, name: &str, help: &str, value: fn(&CmdTotals) -> u64| {
        let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
        for (cmd, t) in commands {
            let labels = [("command", *cmd)];
            m.encode_family(&labels)?.encode_counter::<NoLabelSet, _, u64>(&value(t), None)?;
        }
        Ok::<_, fmt::Error>(())
    };
    per_command(enc, "strata_commands", "Commands executed.", |t| t.calls)?;
    per_command(enc, "strata_command_failures", "Commands that replied with an error.", |t| t.failed)?;
    per_command(
        enc,
        "strata_commands_rejected",
        "Commands refused before execution (arity, auth, OOM, pub/sub context).",
        |t| t.rejected,
    )?;

    let mut m = enc.encode_descriptor(
        "strata_command_duration",
        "Command execution time.",
        Some(&Unit::Seconds),
        MetricType::Histogram,
    )?;
    for (cmd, t) in commands {
        let buckets: Vec<(f64, u64)> =
            LATENCY_BUCKETS.iter().copied().chain([f64::INFINITY]).zip(t.buckets.iter().copied()).collect();
        // The count comes from the buckets, not `calls`: a scrape racing a
        // worker must still see +Inf == count.
        let count = t.buckets.iter().sum();
        let labels = [("command", *cmd)];
        m.encode_family(&labels)?.encode_histogram::<NoLabelSet>(t.nanos as f64 / 1e9, count, &buckets, None)?;
    }
    Ok(())
}

/// Connections and traffic.
fn encode_server(enc: &mut DescriptorEncoder, s: &Shared) -> fmt::Result {
    let total = |f: fn(&WorkerMetrics) -> &std::sync::atomic::AtomicU64| super::sum(&s.workers, f);
    gauge(enc, "strata_connections", "Connected clients.", None, s.clients.count() as u64)?;
    counter(
        enc,
        "strata_connections_received",
        "Connections accepted.",
        None,
        total(|w| &w.server.connections_received),
    )?;
    counter(
        enc,
        "strata_connections_rejected",
        "Connections refused because of maxclients.",
        None,
        total(|w| &w.server.rejected_connections),
    )?;
    counter(
        enc,
        "strata_net_input",
        "Bytes read from clients.",
        Some(Unit::Bytes),
        total(|w| &w.server.net_input_bytes),
    )?;
    counter(
        enc,
        "strata_net_output",
        "Bytes written to clients.",
        Some(Unit::Bytes),
        total(|w| &w.server.net_output_bytes),
    )?;
    counter(
        enc,
        "strata_protocol_errors",
        "Connections closed for malformed RESP.",
        None,
        total(|w| &w.server.protocol_errors),
    )?;
    counter(
        enc,
        "strata_output_buffer_disconnects",
        "Clients disconnected for exceeding their output buffer limit.",
        None,
        total(|w| &w.server.output_buffer_disconnects),
    )
}

/// Keyspace statistics, memory and key counts.
fn encode_store(enc: &mut DescriptorEncoder, s: &Shared) -> fmt::Result {
    let t = s.store_totals();
    counter(enc, "strata_keyspace_hits", "Successful key lookups.", None, t.hits)?;
    counter(enc, "strata_keyspace_misses", "Failed key lookups.", None, t.misses)?;
    counter(enc, "strata_expired_keys", "Keys removed because their TTL passed.", None, t.expired)?;
    counter(enc, "strata_evicted_keys", "Keys evicted to stay under maxmemory.", None, t.evicted)?;
    counter(enc, "strata_evicted", "Memory freed by eviction.", Some(Unit::Bytes), t.evicted_bytes)?;

    let keyspace = s.ks.used_memory().max(0) as u64;
    let connections = s.conn_mem.load(Relaxed).max(0) as u64;
    let total = s.used_memory();
    let mut m = enc.encode_descriptor(
        "strata_memory_used",
        "Memory used (total includes a fixed baseline).",
        Some(&Unit::Bytes),
        MetricType::Gauge,
    )?;
    for (component, v) in [("keyspace", keyspace), ("connections", connections), ("total", total)] {
        let labels = [("component", component)];
        ConstGauge::new(v).encode(m.encode_family(&labels)?)?;
    }
    gauge(enc, "strata_memory_max", "Configured maxmemory (0 = no limit).", Some(Unit::Bytes), s.maxmemory())?;

    let keys = count_keys(s);
    let mut m = enc.encode_descriptor("strata_keys", "Keys per database.", None, MetricType::Gauge)?;
    for (db, n) in keys.iter().enumerate() {
        let db = db.to_string();
        let labels = [("db", db.as_str())];
        ConstGauge::new(*n).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

/// Keys per database, summed over partitions. Locks one partition at a
/// time, briefly: scrapes are rare.
fn count_keys(s: &Shared) -> [u64; NUM_DBS] {
    let mut keys = [0u64; NUM_DBS];
    for i in 0..s.ks.num_partitions() {
        let part = s.ks.lock(i as u32);
        for (k, db) in keys.iter_mut().zip(part.dbs.iter()) {
            *k += db.len() as u64;
        }
    }
    keys
}

/// Process-level facts.
fn encode_process(enc: &mut DescriptorEncoder, s: &Shared) -> fmt::Result {
    let m = enc.encode_descriptor("strata_uptime", "Time since start-up.", Some(&Unit::Seconds), MetricType::Gauge)?;
    ConstGauge::new(s.uptime().as_secs_f64()).encode(m)?;
    gauge(enc, "strata_worker_threads", "Worker threads serving clients.", None, s.workers.len() as u64)?;
    gauge(
        enc,
        "strata_worker_threads_active",
        "Worker threads taking connections now (adaptive-threads).",
        None,
        s.balance.active() as u64,
    )?;
    counter(
        enc,
        "strata_connection_migrations",
        "Connections moved between worker threads.",
        None,
        s.balance.migrations.load(Relaxed),
    )?;
    let mut m = enc.encode_descriptor("strata_build", "Build information.", None, MetricType::Info)?;
    m.encode_info(&[("version", env!("CARGO_PKG_VERSION"))])
}

fn counter(enc: &mut DescriptorEncoder, name: &str, help: &str, unit: Option<Unit>, v: u64) -> fmt::Result {
    let m = enc.encode_descriptor(name, help, unit.as_ref(), MetricType::Counter)?;
    ConstCounter::new(v).encode(m)
}

fn gauge(enc: &mut DescriptorEncoder, name: &str, help: &str, unit: Option<Unit>, v: u64) -> fmt::Result {
    let m = enc.encode_descriptor(name, help, unit.as_ref(), MetricType::Gauge)?;
    ConstGauge::new(v).encode(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Cli, Config};
    use crate::metrics::ServerStats;
    use crate::store::StoreStats;
    use prometheus_client::encoding::text::encode;

    /// Value of the sample whose series (name and labels, as written) is `series`.
    fn sample(text: &str, series: &str) -> Option<f64> {
        text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    #[derive(Debug)]
    struct Commands(Vec<(&'static str, CmdTotals)>);

    impl Collector for Commands {
        fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
            encode_commands(&mut enc, &self.0)
        }
    }

    #[test]
    fn command_families_and_histogram() {
        let stats = [CmdStat::default(), CmdStat::default()];
        stats[0].record(5_000, false); // 5 µs: first bucket
        stats[1].record(300_000, true); // 0.3 ms: le=0.0005
        stats[1].record(2_000_000_000, false); // 2 s: overflow
        stats[1].reject();
        let mut t = CmdTotals::default();
        for s in &stats {
            t.add(s);
        }
        assert_eq!((t.calls, t.failed, t.rejected), (3, 1, 1));
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Commands(vec![("set", t)])));
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();

        assert_eq!(sample(&text, "strata_commands_total{command=\"set\"}"), Some(3.0));
        assert_eq!(sample(&text, "strata_command_failures_total{command=\"set\"}"), Some(1.0));
        assert_eq!(sample(&text, "strata_commands_rejected_total{command=\"set\"}"), Some(1.0));
        assert_eq!(sample(&text, "strata_command_duration_seconds_count{command=\"set\"}"), Some(3.0));
        let sum = sample(&text, "strata_command_duration_seconds_sum{command=\"set\"}").unwrap();
        assert!((sum - 2.000305).abs() < 1e-9, "{sum}");
        // Buckets are cumulative in the exposition.
        let bucket =
            |le: &str| sample(&text, &format!("strata_command_duration_seconds_bucket{{le=\"{le}\",command=\"set\"}}"));
        assert_eq!(bucket("0.0001"), Some(1.0));
        assert_eq!(bucket("0.0005"), Some(2.0));
        assert_eq!(bucket("1.0"), Some(2.0));
        assert_eq!(bucket("+Inf"), Some(3.0));
        assert!(text.contains("# TYPE strata_command_duration_seconds histogram\n"));
        assert!(text.contains("# UNIT strata_command_duration_seconds seconds\n"));
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn idle_commands_are_inactive() {
        assert!(!CmdTotals::default().is_active());
        let s = CmdStat::default();
        s.reject();
        let mut t = CmdTotals::default();
        t.add(&s);
        assert!(t.is_active());
    }

    #[test]
    fn node_families_sum_over_workers() {
        let cli =
            Cli::try_parse_from(["strata-node", "--threads", "2", "--partitions", "4", "--maxmemory", "1mb"]).unwrap();
        let shared = crate::server::build_shared(Config::from_cli(cli).unwrap());
        for (i, w) in shared.workers.iter().enumerate() {
            let n = i as u64 + 1;
            ServerStats::add(&w.server.connections_received, n);
            ServerStats::add(&w.server.net_input_bytes, 100 * n);
            ServerStats::add(&w.server.protocol_errors, n);
            StoreStats::bump(&w.store.hits, 10 * n);
            StoreStats::bump(&w.store.misses, n);
            StoreStats::bump(&w.store.evicted_bytes, 7);
        }
        let mut text = String::new();
        encode(&mut text, &registry(shared.clone())).unwrap();

        for (series, want) in [
            ("strata_connections_received_total", 3.0),
            ("strata_net_input_bytes_total", 300.0),
            ("strata_protocol_errors_total", 3.0),
            ("strata_keyspace_hits_total", 30.0),
            ("strata_keyspace_misses_total", 3.0),
            ("strata_evicted_bytes_total", 14.0),
            ("strata_connections", 0.0),
            ("strata_memory_max_bytes", 1024.0 * 1024.0),
            ("strata_worker_threads", 2.0),
            ("strata_keys{db=\"0\"}", 0.0),
            ("strata_keys{db=\"15\"}", 0.0),
        ] {
            assert_eq!(sample(&text, series), Some(want), "{series} in\n{text}");
        }
        assert!(sample(&text, "strata_memory_used_bytes{component=\"total\"}").unwrap() > 0.0);
        let build = format!("strata_build_info{{version=\"{}\"}}", env!("CARGO_PKG_VERSION"));
        assert_eq!(sample(&text, &build), Some(1.0));
        assert!(sample(&text, "strata_uptime_seconds").unwrap() >= 0.0);
        // No command ran: no per-command series.
        assert!(!text.contains("command=\""), "{text}");
    }
}
