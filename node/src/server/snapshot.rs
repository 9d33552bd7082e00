//! The node's figures in one reading, for `/metrics` and INFO alike.

use super::Shared;
use crate::metrics::snapshot::{ClientFigures, MemoryFigures, ServerTotals, TierFigures, TlsFigures};
use crate::metrics::{ClusterFigures, CmdTotals, DbFigures, Snapshot, WorkerFigures};
use crate::store::NUM_DBS;
use std::sync::atomic::Ordering::Relaxed;

impl Shared {
    /// Every figure but the keyspace's, which the caller counts (INFO runs
    /// inside EXEC with every partition already locked; a scrape locks them
    /// one at a time): see [`Shared::snapshot_with_keys`].
    pub fn snapshot(&self, keyspace: [DbFigures; NUM_DBS]) -> Snapshot {
        let clients = self.clients.all();
        let allocator = self.memory.calibrate(&self.ks, self.maxmemory(), 0).unwrap_or_default();
        let used = self.used_memory();
        let peak = self.memory.note_peak(used);
        let side = self.memory.side_buffers();
        Snapshot {
            uptime: self.uptime(),
            worker_threads: self.workers.len() as u64,
            active_threads: self.balance.active() as u64,
            adaptive_threads: self.balance.adaptive(),
            connection_migrations: self.balance.migrations.load(Relaxed),
            growths_kept: self.balance.growths_kept.load(Relaxed),
            growths_undone: self.balance.growths_undone.load(Relaxed),
            workers: self.worker_figures(),
            ops_per_sec: self.ops_samples.lock().ops_per_sec(),
            clients: ClientFigures {
                connected: clients.len() as u64,
                max: self.max_clients() as u64,
                blocked: clients.iter().filter(|c| c.blocked.load(Relaxed)).count() as u64,
                max_input_buffer: clients.iter().map(|c| c.qbuf.load(Relaxed)).max().unwrap_or(0) as u64,
                max_output_buffer: clients
                    .iter()
                    .map(|c| c.obuf.load(Relaxed) + c.pending_push.load(Relaxed))
                    .max()
                    .unwrap_or(0) as u64,
            },
            server: ServerTotals::sum(&self.workers),
            store: self.store_totals(),
            memory: MemoryFigures {
                keyspace: self.ks.used_memory().max(0) as u64,
                connections: self.memory.connection_bytes(),
                journal_buffers: side.journal,
                cold_buffers: side.cold,
                migration_buffers: side.migration,
                used,
                peak,
                max: self.maxmemory(),
                rss: crate::sys::process::rss_bytes(),
                allocator,
                defrag_running: self.memory.defrag.running(),
                defrag_hits: self.memory.defrag.hits.load(Relaxed),
                defrag_misses: self.memory.defrag.misses.load(Relaxed),
            },
            hugepages: crate::sys::hugepages::stats(),
            keyspace,
            error_replies: crate::metrics::sum(&self.workers, |w| &w.errors.total),
            errors: crate::metrics::snapshot::error_counts(&self.workers),
            commands: (0..self.table.stat_slots())
                .map(|slot| (self.table.slot_name(slot), CmdTotals::sum(&self.workers, slot)))
                .filter(|(_, t)| t.is_active())
                .collect(),
            durability: self.persist.as_ref().map(|p| p.figures()),
            reads: crate::metrics::ReadLatencyFigures::sum(&self.workers),
            tls: self.tls.as_ref().map(|t| TlsFigures {
                port: self.config.startup.tls_port as u64,
                connections: t.connections.load(Relaxed) as u64,
                handshake_failures: t.handshake_failures.load(Relaxed),
                reloads: t.reloads.load(Relaxed),
                reload_failures: t.reload_failures.load(Relaxed),
                cert_not_after: t.not_after.load(Relaxed),
            }),
            cluster: self.cluster.as_ref().map(|c| {
                let mut f = ClusterFigures::sum(&self.workers);
                if let Some(t) = c.current() {
                    f.epoch = t.epoch;
                    f.slots_owned = t.me().slot_count() as u64;
                    f.slots_covered = t.covered() as u64;
                    f.nodes = t.members.len() as u64;
                }
                let (m, st) = (&c.migrations, &c.migrations.stats);
                let both = |a: &[std::sync::atomic::AtomicU64; 2]| [a[0].load(Relaxed), a[1].load(Relaxed)];
                f.migrations = crate::metrics::snapshot::MigrationFigures {
                    in_flight: m.in_flight().map(|n| n as u64),
                    keys: both(&st.keys),
                    bytes: both(&st.bytes),
                    slots: both(&st.slots),
                    committed: both(&st.committed),
                    failed: both(&st.failed),
                    aborted: both(&st.aborted),
                    paused_ns: st.paused_ns.load(Relaxed),
                    oldest_ms: m.oldest_in_flight().as_millis() as u64,
                };
                f
            }),
            tier: self.cold.as_ref().map(|c| {
                let k = self.ks.cold_stats();
                let l = &c.stats;
                TierFigures {
                    disk_keys: k.keys.load(Relaxed),
                    forgotten_keys: k.forgotten.load(Relaxed),
                    forgotten_index_bytes: k.forgotten_bytes.load(Relaxed),
                    forgets: k.forgets.load(Relaxed),
                    recalls: k.recalls.load(Relaxed),
                    demoted: k.demoted.load(Relaxed),
                    demoted_bytes: k.demoted_bytes.load(Relaxed),
                    promoted: k.promoted.load(Relaxed),
                    served_once: k.served_once.load(Relaxed),
                    reads: k.reads.load(Relaxed),
                    shared_reads: k.shared_reads.load(Relaxed),
                    sync_reads: k.sync_reads.load(Relaxed),
                    batch_reads: k.batch_reads.load(Relaxed),
                    read_errors: k.read_errors.load(Relaxed),
                    disk_reads: l.disk_reads.load(Relaxed),
                    staged_reads: l.staged_reads.load(Relaxed),
                    aio_reads_retried: crate::tier::aio::RETRIED_ON_POOL.load(Relaxed),
                    engine: c.engine_name(),
                    read_latency: l.read_latency.figures(),
                    read_queue_latency: l.read_queue_latency.figures(),
                    read_device_latency: l.read_device_latency.figures(),
                    read_wake_latency: k.read_wake_latency.figures(),
                    reads_in_flight: l.reads_in_flight.load(Relaxed),
                    reads_in_flight_peak: l.reads_in_flight_peak.load(Relaxed),
                    ahead_reads: k.ahead_reads.load(Relaxed),
                    evicted_disk_keys: k.evicted_cold.load(Relaxed),
                    refused: l.refused.load(Relaxed),
                    deferred: l.deferred.load(Relaxed),
                    disk_bytes: c.disk_bytes(),
                    max_disk_bytes: c.max_bytes(),
                    written_bytes: l.written_bytes.load(Relaxed),
                    dead_bytes: l.dead_bytes.load(Relaxed),
                    cleaned_segments: l.cleaned_segments.load(Relaxed),
                    moved_records: l.moved_records.load(Relaxed),
                    segment_reads: l.segment_reads.load(Relaxed),
                    freed_unread_segments: l.freed_unread.load(Relaxed),
                    not_admitted: l.not_admitted.load(Relaxed),
                }
            }),
        }
    }

    /// Each worker's load: the balancer's view and the worker's own counters.
    fn worker_figures(&self) -> Vec<WorkerFigures> {
        let active = self.balance.active();
        (0..self.balance.workers())
            .map(|w| {
                let load = self.balance.load(w);
                WorkerFigures {
                    active: w < active,
                    connections: load.conns.load(Relaxed) as u64,
                    commands: self.workers.get(w).map_or(0, |m| m.server.commands.load(Relaxed)),
                    cpu_seconds: load.cpu_ns() as f64 / 1e9,
                }
            })
            .collect()
    }

    /// A snapshot with the keyspace counted partition by partition (and,
    /// in cluster mode, the keys of every slot, for the fullest ones).
    pub fn snapshot_with_keys(&self) -> Snapshot {
        let mut snap = self.snapshot(self.ks.db_figures(crate::store::now_ms()));
        if let Some(c) = &mut snap.cluster {
            c.set_top_slots(&self.ks.slot_key_counts());
        }
        snap
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Cli, Config};
    use crate::metrics::{ServerStats, StoreStats};
    use prometheus_client::encoding::text::encode;

    /// Value of the sample whose series (name and labels, as written) is `series`.
    fn sample(text: &str, series: &str) -> Option<f64> {
        text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    #[test]
    fn node_families_sum_over_workers() {
        let cli =
            Cli::try_parse_from(["strata-node", "--threads", "2", "--partitions", "4", "--maxmemory", "1mb"]).unwrap();
        let shared = crate::server::build_shared(Config::from_cli(cli).unwrap()).unwrap();
        for (i, w) in shared.workers.iter().enumerate() {
            let n = i as u64 + 1;
            ServerStats::add(&w.server.connections_received, n);
            ServerStats::add(&w.server.net_input_bytes, 100 * n);
            ServerStats::add(&w.server.protocol_errors, n);
            StoreStats::bump(&w.store.hits, 10 * n);
            StoreStats::bump(&w.store.misses, n);
            StoreStats::bump(&w.store.evicted_bytes, 7);
            ServerStats::add(&w.server.commands, 5 * n);
        }
        let source = shared.clone();
        let registry = crate::metrics::exposition::registry(Box::new(move || source.snapshot_with_keys()));
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();

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
            ("strata_connections_max", 10000.0),
            ("strata_worker_commands_total{worker=\"0\"}", 5.0),
            ("strata_worker_commands_total{worker=\"1\"}", 10.0),
            ("strata_worker_connections{worker=\"1\"}", 0.0),
            ("strata_worker_active{worker=\"0\"}", 1.0),
            ("strata_worker_active{worker=\"1\"}", 0.0),
            ("strata_keys{db=\"0\"}", 0.0),
            ("strata_keys{db=\"15\"}", 0.0),
            ("strata_hugepages_bytes", 0.0),
            ("strata_hugepages_fallbacks_total", 0.0),
        ] {
            assert_eq!(sample(&text, series), Some(want), "{series} in\n{text}");
        }
        assert!(sample(&text, "strata_memory_used_bytes{component=\"total\"}").unwrap() > 0.0);
        let build = format!("strata_build_info{{version=\"{}\"}}", env!("CARGO_PKG_VERSION"));
        assert_eq!(sample(&text, &build), Some(1.0));
        assert!(sample(&text, "strata_uptime_seconds").unwrap() >= 0.0);
        // One series per worker, no more: the label's cardinality is the thread count.
        assert_eq!(text.matches("strata_worker_cpu_seconds_total{").count(), 2, "{text}");
        assert!(sample(&text, "strata_worker_cpu_seconds_total{worker=\"0\"}").is_some());
        assert!(text.contains("# UNIT strata_worker_cpu_seconds seconds\n"), "{text}");
        // No command ran: no per-command series.
        assert!(!text.contains("command=\""), "{text}");
        // Not in cluster mode: no cluster families.
        assert!(!text.contains("strata_cluster_"), "{text}");
    }
}
