//! One reading of every figure the node reports. The server takes it (see
//! `server::Shared::snapshot`); `/metrics` and INFO both render it, so a
//! figure is defined and computed in one place.

use super::{CmdStat, HISTOGRAM_STEPS, LATENCY_BUCKETS, StatsTotals, WorkerMetrics};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use crate::config::DATABASES;

#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    pub uptime: Duration,
    /// Worker threads, and how many take connections now.
    pub worker_threads: u64,
    pub active_threads: u64,
    pub adaptive_threads: bool,
    pub connection_migrations: u64,
    /// Growths of the active set kept, and undone, after their trial.
    pub growths_kept: u64,
    pub growths_undone: u64,
    /// Per worker thread, in worker order.
    pub workers: Vec<WorkerFigures>,
    /// Commands per second over the last couple of seconds.
    pub ops_per_sec: u64,
    pub clients: ClientFigures,
    pub server: ServerTotals,
    pub store: StatsTotals,
    pub memory: MemoryFigures,
    /// What the huge-page pool holds (`hugepages` setting).
    pub hugepages: crate::sys::hugepages::HugePageStats,
    /// Per database; filled only when the caller counted keys.
    pub keyspace: [DbFigures; DATABASES],
    /// Commands ever called or refused, with their totals.
    /// Error replies, and their counts by prefix sorted by prefix.
    pub error_replies: u64,
    pub errors: Vec<(String, u64)>,
    /// Subcommands count apart, as `container|sub`.
    pub commands: Vec<(&'static str, CmdTotals)>,
    /// The durability log; None under durability none.
    pub durability: Option<DurabilityFigures>,
    /// The cold tier (`max-disk`); None without one.
    pub tier: Option<TierFigures>,
    /// Latency of read commands on keys, served from RAM or after a wait
    /// for the cold tier.
    pub reads: super::ReadLatencyFigures,
    /// Cluster mode (`cluster-enabled yes`); None without it.
    pub cluster: Option<ClusterFigures>,
    /// `tls-port`; None without it.
    pub tls: Option<TlsFigures>,
}

/// TLS clients and certificates (`tls-port`).
#[derive(Clone, Debug, Default)]
pub struct TlsFigures {
    pub port: u64,
    /// TLS clients connected now.
    pub connections: u64,
    /// Handshakes that failed (no or a bad client certificate, a plain-text client).
    pub handshake_failures: u64,
    /// Certificate reloads (CONFIG SET, a change on disk) that took, and that did not load.
    pub reloads: u64,
    pub reload_failures: u64,
    /// The node's certificate's expiry, unix seconds (0: unknown).
    pub cert_not_after: i64,
}

/// Slots with the most keys that the figures name (`strata_cluster_slot_keys`):
/// enough to find a hot slot, few enough to keep the series bounded.
pub const TOP_SLOTS: usize = 10;

/// Cluster mode: the topology this node applied and the work it does for
/// other nodes' slots.
#[derive(Debug, Default, Clone)]
pub struct ClusterFigures {
    /// The applied topology's epoch; 0 before the first push.
    pub epoch: u64,
    /// Slots this node serves, slots some node serves (16384 when the
    /// cluster is whole), and the nodes the topology names.
    pub slots_owned: u64,
    pub slots_covered: u64,
    pub nodes: u64,
    /// Requests forwarded to their slot's owner for plain clients, those
    /// whose owner could not be reached, and the time to their replies.
    pub forwarded: u64,
    pub forward_errors: u64,
    pub forward_latency: super::ReadHistogramFigures,
    /// `-MOVED` replies sent to cluster-aware clients.
    pub moved: u64,
    /// The `TOP_SLOTS` slots holding the most keys (slot, keys), most
    /// first; slots without keys are left out. Filled only when the caller
    /// counted keys per slot (see [`ClusterFigures::set_top_slots`]).
    pub top_slots: Vec<(u16, u64)>,
    /// Slot migrations, per role (`[source, target]`).
    pub migrations: MigrationFigures,
}

/// Slot migrations since start, per role (`[source, target]`).
#[derive(Debug, Default, Clone)]
pub struct MigrationFigures {
    pub in_flight: [u64; 2],
    pub keys: [u64; 2],
    pub bytes: [u64; 2],
    pub slots: [u64; 2],
    pub committed: [u64; 2],
    pub failed: [u64; 2],
    pub aborted: [u64; 2],
    /// Source: time commands on migrating slots waited at handovers.
    pub paused_ns: u64,
    /// How long the oldest migration in flight has run (0: none).
    pub oldest_ms: u64,
}

impl ClusterFigures {
    /// Cluster mode's counters summed over workers; the topology's figures
    /// are the caller's.
    pub fn sum(workers: &[Arc<WorkerMetrics>]) -> Self {
        let mut f = ClusterFigures {
            forwarded: super::sum(workers, |w| &w.cluster.forwarded),
            forward_errors: super::sum(workers, |w| &w.cluster.forward_errors),
            moved: super::sum(workers, |w| &w.cluster.moved),
            ..Default::default()
        };
        for w in workers {
            w.cluster.forward_latency.add_to(&mut f.forward_latency);
        }
        f
    }

    /// Keeps the `TOP_SLOTS` slots with the most keys of `counts` (keys per
    /// slot, indexed by slot), most first, the lower slot first on a tie.
    pub fn set_top_slots(&mut self, counts: &[u32]) {
        let mut top: Vec<(u16, u64)> =
            counts.iter().enumerate().filter(|(_, n)| **n > 0).map(|(s, &n)| (s as u16, n as u64)).collect();
        let order = |a: &(u16, u64), b: &(u16, u64)| b.1.cmp(&a.1).then(a.0.cmp(&b.0));
        if top.len() > TOP_SLOTS {
            top.select_nth_unstable_by(TOP_SLOTS - 1, order);
            top.truncate(TOP_SLOTS);
        }
        top.sort_unstable_by(order);
        self.top_slots = top;
    }
}

/// The durability log: replay at start-up, group commit, lag.
#[derive(Debug, Default, Clone)]
pub struct DurabilityFigures {
    /// "io_uring: ..." or "threads: ...": the engine probed and why.
    pub engine: String,
    /// True while the log is replayed.
    pub loading: bool,
    pub loading_progress: LoadingFigures,
    pub recovery: RecoveryFigures,
    pub compactions: u64,
    /// Zero until the log is open (after the replay).
    pub durable_seq: u64,
    pub appended_seq: u64,
    pub segments: u64,
    /// Disk the segments in use hold (each is preallocated whole).
    pub log_bytes: u64,
    /// Flushes (write + fdatasync), the records they made durable, the
    /// most one did, their total and worst time in µs.
    pub flushes: u64,
    pub flushed_records: u64,
    pub max_batch: u64,
    /// Records per flush; its sum is `flushed_records`.
    pub batch_sizes: super::BatchHistogramFigures,
    pub flush_us_total: u64,
    pub flush_us_max: u64,
    pub flush_latency: super::IoHistogramFigures,
    /// Back-pressure's view of the lag (an upper bound): age of the oldest
    /// write not yet durable (µs) and bytes not yet durable; zero in sync.
    pub lag_us: u64,
    pub lag_bytes: u64,
    /// Reply batches held back because the lag passed its bound.
    pub held_replies: u64,
}

/// The replay in progress (INFO's loading_* fields while loading).
#[derive(Debug, Default, Clone, Copy)]
pub struct LoadingFigures {
    /// Unix seconds.
    pub start_time: u64,
    /// Bytes of the log's segments in use (each is scanned to its end),
    /// and bytes scanned so far.
    pub total_bytes: u64,
    pub loaded_bytes: u64,
}

/// What the last replay of the log did.
#[derive(Debug, Default, Clone, Copy)]
pub struct RecoveryFigures {
    pub duration_ms: u64,
    pub records: u64,
    pub bytes: u64,
    /// Runs of bad bytes skipped, their bytes, and torn-tail bytes dropped.
    pub bad_runs: u64,
    pub skipped_bytes: u64,
    pub torn_bytes: u64,
    /// Records whose value could not be decoded (skipped).
    pub bad_values: u64,
    /// Keys loaded, and keys evicted during the replay to stay under
    /// maxmemory.
    pub keys: u64,
    pub evicted: u64,
}

/// The cold tier: values demoted from RAM to disk and read back.
#[derive(Debug, Default, Clone, Copy)]
pub struct TierFigures {
    /// The tier's I/O engine: "io_uring", "aio" or "threads" (the log
    /// line "cold tier open" says why).
    pub engine: &'static str,
    /// Keys whose value is on disk only.
    pub disk_keys: u64,
    /// Of those, keys whose key is on disk only too, and the RAM their
    /// index takes; keys forgotten and recalled since start.
    pub forgotten_keys: u64,
    pub forgotten_index_bytes: u64,
    pub forgets: u64,
    pub recalls: u64,
    pub demoted: u64,
    pub demoted_bytes: u64,
    pub promoted: u64,
    /// Values read from disk for one read-only command and left there
    /// (their keys were not read from disk lately).
    pub served_once: u64,
    /// Reads started for waiting commands; reads later waiters joined;
    /// synchronous reads (undeclared keys); failed reads (keys lost).
    pub reads: u64,
    pub shared_reads: u64,
    pub sync_reads: u64,
    pub batch_reads: u64,
    pub read_errors: u64,
    /// Reads that went to the device, and those served from the buffer
    /// of records not written yet.
    pub disk_reads: u64,
    pub staged_reads: u64,
    /// Reads from a worker that Linux AIO refused or bounced (the `aio`
    /// engine: it would have blocked) and the I/O threads then served.
    pub aio_reads_retried: u64,
    /// Time of the device reads, and of their stages: queued (issued until
    /// the device started them), on the device, and from completion until
    /// the waiting command ran again.
    pub read_latency: super::IoHistogramFigures,
    pub read_queue_latency: super::IoHistogramFigures,
    pub read_device_latency: super::IoHistogramFigures,
    pub read_wake_latency: super::IoHistogramFigures,
    /// Device reads in flight now, and the most at once since start.
    pub reads_in_flight: u64,
    pub reads_in_flight_peak: u64,
    /// Reads started ahead of their requests (pipeline read-ahead).
    pub ahead_reads: u64,
    /// Cold keys evicted (index and all), by the policy or the cleaner;
    /// demotions refused for lack of room (those keys were evicted).
    pub evicted_disk_keys: u64,
    pub refused: u64,
    /// Demotions declined for a moment (no free segment while the cleaner
    /// freed one): those keys stayed in RAM and writes waited for room.
    pub deferred: u64,
    /// Segment bytes in use and the budget; record bytes written and dead.
    pub disk_bytes: u64,
    pub max_disk_bytes: u64,
    pub written_bytes: u64,
    pub dead_bytes: u64,
    pub cleaned_segments: u64,
    pub moved_records: u64,
    /// Segments the cleaner read whole, and those it freed without a read
    /// (nothing live left in them).
    pub segment_reads: u64,
    pub freed_unread_segments: u64,
    /// Values used once or never evicted instead of demoted while the tier
    /// was full of live data (`tier-admission frequent`).
    pub not_admitted: u64,
}

/// One worker thread's load.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct WorkerFigures {
    /// Whether it takes new connections now (the adaptive balancer's set).
    pub active: bool,
    /// Connections it owns.
    pub connections: u64,
    /// Commands it executed.
    pub commands: u64,
    /// Its thread's CPU time, sampled every 100 ms tick.
    pub cpu_seconds: f64,
}

#[derive(Debug, Default, Clone, Copy)]
pub struct ClientFigures {
    pub connected: u64,
    /// Connections accepted at most (`maxclients`, lowered to what the open
    /// files limit allows): one more is refused.
    pub max: u64,
    pub blocked: u64,
    pub max_input_buffer: u64,
    pub max_output_buffer: u64,
}

/// Connection and traffic counters summed over workers.
#[derive(Debug, Default, Clone, Copy)]
pub struct ServerTotals {
    pub connections_received: u64,
    pub rejected_connections: u64,
    pub commands: u64,
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    pub protocol_errors: u64,
    pub output_buffer_disconnects: u64,
}

/// Error replies by prefix summed over workers, sorted as Redis lists them.
pub fn error_counts(workers: &[Arc<WorkerMetrics>]) -> Vec<(String, u64)> {
    let mut all: std::collections::BTreeMap<String, u64> = Default::default();
    for w in workers {
        for (prefix, n) in w.errors.counts() {
            *all.entry(prefix).or_default() += n;
        }
    }
    all.into_iter().collect()
}

impl ServerTotals {
    pub fn sum(workers: &[Arc<WorkerMetrics>]) -> Self {
        let total = |f: fn(&WorkerMetrics) -> &std::sync::atomic::AtomicU64| super::sum(workers, f);
        ServerTotals {
            connections_received: total(|w| &w.server.connections_received),
            rejected_connections: total(|w| &w.server.rejected_connections),
            commands: total(|w| &w.server.commands),
            net_input_bytes: total(|w| &w.server.net_input_bytes),
            net_output_bytes: total(|w| &w.server.net_output_bytes),
            protocol_errors: total(|w| &w.server.protocol_errors),
            output_buffer_disconnects: total(|w| &w.server.output_buffer_disconnects),
        }
    }
}

/// Memory by component, in bytes.
#[derive(Debug, Default, Clone, Copy)]
pub struct MemoryFigures {
    /// Keys, values and index.
    pub keyspace: u64,
    /// Client query and output buffers.
    pub connections: u64,
    /// The durability journal's and the cold tier's buffers: part of
    /// `used_memory`, left out of the eviction decision.
    pub journal_buffers: u64,
    pub cold_buffers: u64,
    /// The batch of the slot migrations this node sends (the same).
    pub migration_buffers: u64,
    /// `used_memory`: what the allocator holds (the above and the rest).
    pub used: u64,
    pub peak: u64,
    /// `maxmemory` (0 = no limit).
    pub max: u64,
    /// Resident set size of the process.
    pub rss: u64,
    /// The allocator's own figures.
    pub allocator: crate::sys::alloc::AllocatorStats,
    /// Active defragmentation: working now, blocks moved, blocks left.
    pub defrag_running: bool,
    pub defrag_hits: u64,
    pub defrag_misses: u64,
}

/// Keys of one database.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DbFigures {
    pub keys: u64,
    /// Keys with a TTL.
    pub expires: u64,
    /// Sum of their remaining TTLs, for the average INFO shows.
    pub ttl_sum_ms: u128,
    /// Bytes of the index tables (slots and hash buckets, with capacity).
    pub index_bytes: u64,
}

impl DbFigures {
    /// Average remaining TTL of keys that have one (INFO's `avg_ttl`).
    pub fn avg_ttl_ms(&self) -> u128 {
        if self.expires == 0 { 0 } else { self.ttl_sum_ms / self.expires as u128 }
    }
}

/// One command's counters summed over workers.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct CmdTotals {
    pub calls: u64,
    pub usec: u64,
    pub failed: u64,
    pub rejected: u64,
    pub nanos: u64,
    /// Per-bucket (not cumulative) counts; the last slot is the +Inf overflow.
    pub buckets: [u64; LATENCY_BUCKETS.len() + 1],
    /// Redis's latency histogram, per step (LATENCY HISTOGRAM).
    pub histogram: [u64; HISTOGRAM_STEPS],
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

    pub fn add(&mut self, s: &CmdStat) {
        self.calls += s.calls.load(Relaxed);
        self.usec += s.usec.load(Relaxed);
        self.failed += s.failed.load(Relaxed);
        self.rejected += s.rejected.load(Relaxed);
        self.nanos += s.nanos.load(Relaxed);
        for (t, b) in self.buckets.iter_mut().zip(&s.buckets) {
            *t += b.load(Relaxed);
        }
        for (t, b) in self.histogram.iter_mut().zip(&s.histogram) {
            *t += b.load(Relaxed);
        }
    }

    /// Commands never called nor refused are left out: the table has
    /// hundreds of entries and most are never used.
    pub fn is_active(&self) -> bool {
        self.calls > 0 || self.rejected > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_slots_are_the_fullest_ten_without_empty_ones() {
        let mut counts = vec![0u32; 16384];
        let mut f = ClusterFigures::default();
        f.set_top_slots(&counts);
        assert!(f.top_slots.is_empty(), "no keys, no slots named");
        counts[7] = 3;
        counts[16383] = 5;
        f.set_top_slots(&counts);
        assert_eq!(f.top_slots, [(16383, 5), (7, 3)]);
        // 20 slots with keys: the ten fullest, ties broken by the lower slot.
        for (i, s) in (100..120).enumerate() {
            counts[s] = 10 + (i as u32 % 10);
        }
        f.set_top_slots(&counts);
        let want: Vec<(u16, u64)> = vec![
            (109, 19),
            (119, 19),
            (108, 18),
            (118, 18),
            (107, 17),
            (117, 17),
            (106, 16),
            (116, 16),
            (105, 15),
            (115, 15),
        ];
        assert_eq!(f.top_slots, want);
    }

    #[test]
    fn cluster_counters_sum_over_workers() {
        let workers: Vec<Arc<WorkerMetrics>> = (0..2).map(|_| Arc::new(WorkerMetrics::new(1))).collect();
        for (i, w) in workers.iter().enumerate() {
            let n = i as u64 + 1;
            super::super::ClusterStats::add(&w.cluster.forwarded, 10 * n);
            super::super::ClusterStats::add(&w.cluster.forward_errors, n);
            super::super::ClusterStats::add(&w.cluster.moved, 100 * n);
            w.cluster.forward_latency.record(1_500 * n);
        }
        let f = ClusterFigures::sum(&workers);
        assert_eq!((f.forwarded, f.forward_errors, f.moved), (30, 3, 300));
        assert_eq!(f.forward_latency.count(), 2);
        assert_eq!(f.forward_latency.sum_ns, 4_500);
    }
}
