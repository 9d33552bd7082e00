//! Counters the server keeps, per worker thread, and their aggregation.
//!
//! Each worker writes only its own `WorkerMetrics` (single-writer relaxed
//! atomics), so recording a command touches no cache line another core
//! writes. The server sums them into one [`Snapshot`] when read, which both
//! `/metrics` ([`exposition`]) and INFO render.

pub mod exposition;
pub mod snapshot;
mod store_stats;

pub use snapshot::{ClusterFigures, CmdTotals, DbFigures, Snapshot, WorkerFigures};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
pub use store_stats::{StatsTotals, StoreStats, totals as store_stats_totals};

/// Upper bounds (µs) of the disk I/O histograms' buckets (log flushes,
/// cold-tier reads): from the page cache's µs and a fast NVMe's tens of
/// µs to a stalled disk's second.
pub const IO_BUCKETS_US: [u64; 15] =
    [10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000];

/// A latency histogram over `IO_BUCKETS_US`, shared by the threads that
/// record into it (one relaxed add per event: events are disk I/Os).
#[derive(Default)]
pub struct IoHistogram {
    /// Per bucket (not cumulative); the last counts what is slower than all.
    buckets: [AtomicU64; IO_BUCKETS_US.len() + 1],
    sum_us: AtomicU64,
}

/// What an [`IoHistogram`] held at one moment.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct IoHistogramFigures {
    pub buckets: [u64; IO_BUCKETS_US.len() + 1],
    pub sum_us: u64,
}

impl IoHistogram {
    pub fn record(&self, us: u64) {
        self.buckets[IO_BUCKETS_US.partition_point(|&b| b < us)].fetch_add(1, Relaxed);
        self.sum_us.fetch_add(us, Relaxed);
    }

    pub fn figures(&self) -> IoHistogramFigures {
        IoHistogramFigures {
            buckets: std::array::from_fn(|i| self.buckets[i].load(Relaxed)),
            sum_us: self.sum_us.load(Relaxed),
        }
    }
}

impl IoHistogramFigures {
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// The `q` quantile in µs (see [`bucket_quantile`]).
    pub fn quantile_us(&self, q: f64) -> f64 {
        bucket_quantile(&IO_BUCKETS_US, &self.buckets, q)
    }
}

/// Upper bounds of the group commit's batch-size buckets (records one
/// flush made durable): powers of two from 1 to 64 Ki. A batch is one
/// writer (1) up to every writer waiting on the fsync in `sync`, or what
/// piles up in an interval in `periodic`, whose byte threshold (2 MiB)
/// caps a flush near 64 Ki small records; a doubling bucket keeps p50/p99
/// within a factor of two with 17 series, and the bucket is found with
/// one leading-zeros count. Larger flushes (write-back's byte bound is
/// configurable) land in +Inf.
pub const BATCH_BUCKETS: [u64; 17] =
    [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1_024, 2_048, 4_096, 8_192, 16_384, 32_768, 65_536];

/// Records per flush over `BATCH_BUCKETS`: one relaxed add per flush. The
/// sum is the group commit's count of records made durable, kept beside it.
#[derive(Default)]
pub struct BatchHistogram {
    /// Per bucket (not cumulative); the last counts what is larger than all.
    buckets: [AtomicU64; BATCH_BUCKETS.len() + 1],
}

impl BatchHistogram {
    pub fn record(&self, records: u64) {
        // Bucket k holds (2^(k-1), 2^k]: k is the bit length of records - 1.
        let k = (u64::BITS - records.saturating_sub(1).leading_zeros()) as usize;
        self.buckets[k.min(BATCH_BUCKETS.len())].fetch_add(1, Relaxed);
    }

    /// Its buckets, with `sum`: the records those flushes made durable.
    pub fn figures(&self, sum: u64) -> BatchHistogramFigures {
        BatchHistogramFigures { buckets: std::array::from_fn(|i| self.buckets[i].load(Relaxed)), sum }
    }
}

/// What a [`BatchHistogram`] held at one moment.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BatchHistogramFigures {
    pub buckets: [u64; BATCH_BUCKETS.len() + 1],
    pub sum: u64,
}

impl BatchHistogramFigures {
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// The `q` quantile in records (see [`bucket_quantile`]), rounded up
    /// to a whole record: a flush of 1 record each reads 1, not 0.5.
    pub fn quantile(&self, q: f64) -> u64 {
        bucket_quantile(&BATCH_BUCKETS, &self.buckets, q).ceil() as u64
    }
}

/// The `q` quantile of a histogram with upper bounds `bounds` and counts
/// per bucket `buckets` (one more than bounds: the overflow), interpolated
/// linearly inside its bucket as Prometheus's `histogram_quantile` does
/// (the first bucket starts at 0; the overflow bucket reports the last
/// bound); 0 when empty.
pub fn bucket_quantile(bounds: &[u64], buckets: &[u64], q: f64) -> f64 {
    let count: u64 = buckets.iter().sum();
    let Some(&last) = bounds.last() else { return 0.0 };
    if count == 0 {
        return 0.0;
    }
    let rank = q.clamp(0.0, 1.0) * count as f64;
    let mut below = 0u64;
    for (i, &n) in buckets.iter().enumerate() {
        if n > 0 && (below + n) as f64 >= rank {
            let Some(&hi) = bounds.get(i) else { break };
            let lo = if i == 0 { 0 } else { bounds[i - 1] };
            return lo as f64 + (hi - lo) as f64 * ((rank - below as f64) / n as f64).max(0.0);
        }
        below += n;
    }
    last as f64
}

/// Upper bounds (ns) of the read-command latency buckets: a 1-2-5 series
/// from a RAM hit's half µs to a stalled disk's second, fine enough at both
/// ends for p50 and p99 by interpolation.
pub const READ_BUCKETS_NS: [u64; 20] = [
    500,
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
    1_000_000_000,
];

/// One worker's latency of read commands on keys (first attempt to reply),
/// by where their values came from: RAM, or a wait on the pending path for
/// a cold-tier read. Only its worker writes (load + store, no locked add).
#[derive(Default)]
pub struct ReadLatency {
    pub ram: ReadHistogram,
    pub disk: ReadHistogram,
}

/// Per bucket of `READ_BUCKETS_NS` (not cumulative; the last counts what is
/// slower than all) and the total time.
#[derive(Default)]
pub struct ReadHistogram {
    buckets: [AtomicU64; READ_BUCKETS_NS.len() + 1],
    sum_ns: AtomicU64,
}

impl ReadHistogram {
    /// Single writer: its worker.
    #[inline]
    pub fn record(&self, nanos: u64) {
        bump(&self.buckets[READ_BUCKETS_NS.partition_point(|&b| b < nanos)], 1);
        bump(&self.sum_ns, nanos);
    }

    pub fn add_to(&self, f: &mut ReadHistogramFigures) {
        for (t, b) in f.buckets.iter_mut().zip(&self.buckets) {
            *t += b.load(Relaxed);
        }
        f.sum_ns += self.sum_ns.load(Relaxed);
    }
}

/// What [`ReadHistogram`]s held, summed over workers.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReadHistogramFigures {
    pub buckets: [u64; READ_BUCKETS_NS.len() + 1],
    pub sum_ns: u64,
}

impl ReadHistogramFigures {
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// The `q` quantile in ns (see [`bucket_quantile`]).
    pub fn quantile_ns(&self, q: f64) -> f64 {
        bucket_quantile(&READ_BUCKETS_NS, &self.buckets, q)
    }
}

/// Read-command latency by tier, summed over workers.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReadLatencyFigures {
    pub ram: ReadHistogramFigures,
    pub disk: ReadHistogramFigures,
}

impl ReadLatencyFigures {
    pub fn sum(workers: &[Arc<WorkerMetrics>]) -> Self {
        let mut f = ReadLatencyFigures::default();
        for w in workers {
            w.reads.ram.add_to(&mut f.ram);
            w.reads.disk.add_to(&mut f.disk);
        }
        f
    }
}

/// Upper bounds (seconds) of the command latency histogram buckets.
pub const LATENCY_BUCKETS: [f64; 14] =
    [0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.1, 0.5, 1.0];

/// The same bounds in nanoseconds, for bucketing without floating point.
const LATENCY_BUCKETS_NS: [u64; 14] = [
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    100_000_000,
    500_000_000,
    1_000_000_000,
];

/// Steps of Redis's per-command latency histogram (LATENCY HISTOGRAM):
/// an HDR histogram of 1 ns..1 s at 2 significant digits, read in powers of
/// two from 1024 ns, so step k ends at 2^(10+k) + 2^(3+k) - 1 ns.
pub const HISTOGRAM_STEPS: usize = 21;

/// The step a duration falls in (Redis clamps durations to 1 ns..1 s).
#[inline]
pub fn histogram_step(nanos: u64) -> usize {
    let v = nanos.clamp(1, 1_000_000_000);
    if v < 1032 {
        return 0;
    }
    let b = 63 - v.leading_zeros() as usize;
    // The first 2^(b-7) ns of an octave share 2^b's HDR bucket: the step ending there.
    if v < (1 << b) + (1 << (b - 7)) { b - 10 } else { b - 9 }
}

/// The upper bound (ns) of step `k`.
pub fn histogram_step_ns(k: usize) -> u64 {
    (1u64 << (10 + k)) + (1u64 << (3 + k)) - 1
}

/// The upper bound (µs, as LATENCY HISTOGRAM shows it) of step `k`.
pub fn histogram_step_usec(k: usize) -> u64 {
    histogram_step_ns(k) / 1000
}

#[inline]
fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed) + n, Relaxed);
}

/// Statistics for one command on one worker.
#[derive(Default)]
pub struct CmdStat {
    pub calls: AtomicU64,
    /// Total execution time in microseconds (INFO commandstats).
    pub usec: AtomicU64,
    pub nanos: AtomicU64,
    /// Calls that replied with an error.
    pub failed: AtomicU64,
    /// Calls refused before execution (arity, auth, OOM, ...).
    pub rejected: AtomicU64,
    /// Cumulative-free bucket counts; the last slot counts +Inf overflow.
    pub buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    /// Redis's latency histogram (`latency-tracking`), per step, not cumulative.
    pub histogram: [AtomicU64; HISTOGRAM_STEPS],
}

impl CmdStat {
    /// Bucket bounds in seconds and nanoseconds must agree.
    #[cfg(test)]
    fn bounds_agree() -> bool {
        LATENCY_BUCKETS.iter().zip(LATENCY_BUCKETS_NS).all(|(s, ns)| (s * 1e9).round() as u64 == ns)
    }

    /// Adds a call to the latency histogram; Redis measures in whole µs.
    #[inline]
    pub fn track(&self, nanos: u64) {
        bump(&self.histogram[histogram_step(nanos / 1000 * 1000)], 1);
    }

    #[inline]
    pub fn record(&self, nanos: u64, failed: bool) {
        bump(&self.calls, 1);
        bump(&self.nanos, nanos);
        bump(&self.usec, nanos / 1000);
        if failed {
            bump(&self.failed, 1);
        }
        // Nearly every command lands in the first bucket: check it first.
        let i = if nanos <= LATENCY_BUCKETS_NS[0] { 0 } else { LATENCY_BUCKETS_NS.partition_point(|&b| b < nanos) };
        bump(&self.buckets[i], 1);
    }

    #[inline]
    pub fn reject(&self) {
        bump(&self.rejected, 1);
    }

    pub fn reset(&self) {
        for c in [&self.calls, &self.usec, &self.nanos, &self.failed, &self.rejected] {
            c.store(0, Relaxed);
        }
        for b in self.buckets.iter().chain(&self.histogram) {
            b.store(0, Relaxed);
        }
    }
}

/// Connection and traffic counters for one worker.
#[derive(Default)]
pub struct ServerStats {
    pub connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub commands: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub output_buffer_disconnects: AtomicU64,
}

impl ServerStats {
    #[inline]
    pub fn add(c: &AtomicU64, n: u64) {
        bump(c, n);
    }

    pub fn reset(&self) {
        for c in [
            &self.connections_received,
            &self.rejected_connections,
            &self.commands,
            &self.net_input_bytes,
            &self.net_output_bytes,
            &self.protocol_errors,
            &self.output_buffer_disconnects,
        ] {
            c.store(0, Relaxed);
        }
    }
}

/// Error replies of one worker (INFO stats `total_error_replies` and INFO
/// errorstats), by prefix: the error's first word ("ERR", "WRONGTYPE", ...).
/// Only its worker writes; the lock is met only by INFO reading it.
#[derive(Default)]
pub struct ErrorStats {
    pub total: AtomicU64,
    by_prefix: parking_lot::Mutex<ErrorTable>,
}

#[derive(Default, Clone)]
struct ErrorTable {
    counts: Vec<(Box<str>, u64)>,
    /// Past `ERROR_PREFIXES_MAX` prefixes: no more are kept until RESETSTAT.
    disabled: bool,
}

/// Distinct prefixes a worker keeps (scripts can make up any number), as
/// Redis 7.2 bounds them; beyond, only `ERRORSTATS_DISABLED` is counted.
pub const ERROR_PREFIXES_MAX: usize = 128;

/// The prefix Redis files an error under: its text up to the first space
/// if that comes within 31 bytes, else "ERR".
pub fn error_prefix(msg: &[u8]) -> &[u8] {
    match msg[..msg.len().min(31)].iter().position(|&b| b == b' ') {
        Some(end) if end > 0 => &msg[..end],
        _ => b"ERR",
    }
}

impl ErrorStats {
    /// Counts one error reply.
    pub fn record(&self, msg: &[u8]) {
        bump(&self.total, 1);
        let prefix = String::from_utf8_lossy(error_prefix(msg));
        let mut t = self.by_prefix.lock();
        if t.disabled {
            t.counts[0].1 += 1;
            return;
        }
        if let Some(entry) = t.counts.iter_mut().find(|(p, _)| **p == *prefix) {
            entry.1 += 1;
        } else if t.counts.len() < ERROR_PREFIXES_MAX {
            t.counts.push((prefix.into(), 1));
        } else {
            *t = ErrorTable { counts: vec![("ERRORSTATS_DISABLED".into(), 1)], disabled: true };
        }
    }

    /// (prefix, count) pairs, unordered.
    pub fn counts(&self) -> Vec<(String, u64)> {
        self.by_prefix.lock().counts.iter().map(|(p, n)| (p.to_string(), *n)).collect()
    }

    pub fn reset(&self) {
        self.total.store(0, Relaxed);
        *self.by_prefix.lock() = ErrorTable::default();
    }
}

/// Everything one worker counts.
pub struct WorkerMetrics {
    pub cmds: Box<[CmdStat]>,
    pub server: ServerStats,
    pub store: Arc<StoreStats>,
    pub errors: ErrorStats,
    pub reads: ReadLatency,
    pub cluster: ClusterStats,
}

/// Cluster mode's work on one worker (only its worker writes).
#[derive(Default)]
pub struct ClusterStats {
    /// Requests sent to their slot's owner for a plain client (a
    /// transaction counts once).
    pub forwarded: AtomicU64,
    /// Of those, the ones whose owner could not be reached.
    pub forward_errors: AtomicU64,
    /// Time from sending a forwarded request to having its reply.
    pub forward_latency: ReadHistogram,
    /// `-MOVED` replies sent (direct port).
    pub moved: AtomicU64,
}

impl ClusterStats {
    #[inline]
    pub fn add(c: &AtomicU64, n: u64) {
        bump(c, n);
    }
}

impl WorkerMetrics {
    pub fn new(num_commands: usize) -> Self {
        WorkerMetrics {
            cmds: (0..num_commands).map(|_| CmdStat::default()).collect(),
            server: ServerStats::default(),
            store: Arc::new(StoreStats::default()),
            errors: ErrorStats::default(),
            reads: ReadLatency::default(),
            cluster: ClusterStats::default(),
        }
    }
}

/// Sum of one counter over workers.
pub fn sum(workers: &[Arc<WorkerMetrics>], f: impl Fn(&WorkerMetrics) -> &AtomicU64) -> u64 {
    workers.iter().map(|w| f(w).load(Relaxed)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_filed_by_prefix_and_bounded() {
        assert_eq!(error_prefix(b"WRONGTYPE Operation against a key"), b"WRONGTYPE");
        assert_eq!(error_prefix(b"OOM"), b"ERR");
        assert_eq!(error_prefix(b" x"), b"ERR");
        assert_eq!(error_prefix(&[b'A'; 40]), b"ERR");
        let e = ErrorStats::default();
        e.record(b"ERR x");
        e.record(b"ERR y");
        e.record(b"NOSCRIPT z");
        let mut c = e.counts();
        c.sort();
        assert_eq!(c, [("ERR".to_string(), 2), ("NOSCRIPT".to_string(), 1)]);
        // Two prefixes so far: 126 more fill the table, the next disables it.
        for i in 0..ERROR_PREFIXES_MAX - 2 {
            e.record(format!("P{i} x").as_bytes());
        }
        assert_eq!(e.counts().len(), ERROR_PREFIXES_MAX);
        e.record(b"ONEMORE x");
        assert_eq!(e.counts(), [("ERRORSTATS_DISABLED".to_string(), 1)]);
        e.record(b"ERR again");
        assert_eq!(e.counts()[0].1, 2);
        assert_eq!(e.total.load(Relaxed), 3 + ERROR_PREFIXES_MAX as u64);
        e.reset();
        assert!(e.counts().is_empty());
    }

    #[test]
    fn histogram_steps_follow_redis_hdr_histogram() {
        // The bounds redis-server 7.0 reports: 1, 2, 4, 8, 16, 33, 66, 132, ...
        let usec: Vec<u64> = (0..HISTOGRAM_STEPS).map(histogram_step_usec).collect();
        assert_eq!(&usec[..9], &[1, 2, 4, 8, 16, 33, 66, 132, 264]);
        assert_eq!(usec[20], 1_082_130);
        for (nanos, step) in [(0, 0), (1031, 0), (1032, 1), (2063, 1), (2064, 2), (33_023, 5), (33_024, 6)] {
            assert_eq!(histogram_step(nanos), step, "{nanos} ns");
        }
        assert_eq!(histogram_step(u64::MAX), 20);
    }

    #[test]
    fn read_histogram_buckets_and_quantiles() {
        let h = ReadHistogram::default();
        let mut f = ReadHistogramFigures::default();
        h.add_to(&mut f);
        assert_eq!((f.count(), f.quantile_ns(0.5)), (0, 0.0));
        // 100 reads of 1.5 µs (bucket 1-2 µs), 100 of 3 ms (2-5 ms), 2 of 3 s (overflow).
        for _ in 0..100 {
            h.record(1_500);
            h.record(3_000_000);
        }
        h.record(3_000_000_000);
        h.record(3_000_000_000);
        let mut f = ReadHistogramFigures::default();
        h.add_to(&mut f);
        assert_eq!(f.count(), 202);
        assert_eq!(f.buckets[2], 100);
        assert_eq!(f.buckets[12], 100);
        assert_eq!(f.buckets[READ_BUCKETS_NS.len()], 2);
        assert_eq!(f.sum_ns, 100 * 1_500 + 100 * 3_000_000 + 6_000_000_000);
        // Rank 50.5 of 100 in 1-2 µs; rank 101 is the first of 2-5 ms.
        assert!((f.quantile_ns(0.25) - 1_505.0).abs() < 1e-6, "{}", f.quantile_ns(0.25));
        let p50 = f.quantile_ns(0.5);
        assert!((2_000_000.0..2_100_000.0).contains(&p50), "{p50}");
        assert_eq!(f.quantile_ns(1.0), 1e9);
        // A bound is inclusive, as Prometheus's `le`.
        let h = ReadHistogram::default();
        h.record(500);
        h.record(501);
        let mut f = ReadHistogramFigures::default();
        h.add_to(&mut f);
        assert_eq!(&f.buckets[..2], &[1, 1]);
    }

    #[test]
    fn batch_histogram_buckets_are_powers_of_two() {
        assert!(BATCH_BUCKETS.iter().enumerate().all(|(k, &b)| b == 1 << k));
        let h = BatchHistogram::default();
        // A bound is inclusive (Prometheus's `le`): 2 is in le=2, 3 in le=4.
        for (records, bucket) in
            [(0, 0), (1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (1_000, 10), (65_536, 16), (65_537, 17), (u64::MAX, 17)]
        {
            let before = h.figures(0).buckets[bucket];
            h.record(records);
            assert_eq!(h.figures(0).buckets[bucket], before + 1, "{records} records");
        }
        assert_eq!(h.figures(7).count(), 10);
        // 100 flushes of 1 record, 100 of 3, 2 past the last bound.
        let h = BatchHistogram::default();
        let f = h.figures(0);
        assert_eq!((f.count(), f.quantile(0.5)), (0, 0));
        for _ in 0..100 {
            h.record(1);
            h.record(3);
        }
        h.record(100_000);
        h.record(100_000);
        let f = h.figures(500);
        assert_eq!(f.sum, 500);
        // Rank 50.5 of the le=1 bucket: 0.505, rounded up to 1 record.
        assert_eq!(f.quantile(0.25), 1);
        // Rank 101: the first of (2, 4], 2.02 -> 3.
        assert_eq!(f.quantile(0.5), 3);
        assert_eq!(f.quantile(1.0), 65_536);
        let io = IoHistogram::default();
        io.record(30);
        io.record(30);
        let io = io.figures();
        assert_eq!(io.count(), 2);
        assert!((io.quantile_us(0.5) - 37.5).abs() < 1e-9, "{}", io.quantile_us(0.5));
    }

    #[test]
    fn latency_buckets() {
        assert!(CmdStat::bounds_agree());
        let s = CmdStat::default();
        for (nanos, bucket) in [(1, 0), (10_000, 0), (10_001, 1), (1_000_000, 6), (2_000_000_000, 14)] {
            s.reset();
            s.record(nanos, false);
            assert_eq!(s.buckets[bucket].load(Relaxed), 1, "{nanos} ns");
        }
    }
}
