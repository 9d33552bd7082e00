//! Counters the server keeps, per worker thread, and their aggregation.
//!
//! Each worker writes only its own `WorkerMetrics` (single-writer relaxed
//! atomics), so recording a command touches no cache line another core
//! writes. The server sums them into one [`Snapshot`] when read, which both
//! `/metrics` ([`exposition`]) and INFO render.

pub mod exposition;
pub mod snapshot;
mod store_stats;

pub use snapshot::{CmdTotals, DbFigures, Snapshot, WorkerFigures};
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
}

impl CmdStat {
    /// Bucket bounds in seconds and nanoseconds must agree.
    #[cfg(test)]
    fn bounds_agree() -> bool {
        LATENCY_BUCKETS.iter().zip(LATENCY_BUCKETS_NS).all(|(s, ns)| (s * 1e9).round() as u64 == ns)
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
        for b in &self.buckets {
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

/// Everything one worker counts.
pub struct WorkerMetrics {
    pub cmds: Box<[CmdStat]>,
    pub server: ServerStats,
    pub store: Arc<StoreStats>,
}

impl WorkerMetrics {
    pub fn new(num_commands: usize) -> Self {
        WorkerMetrics {
            cmds: (0..num_commands).map(|_| CmdStat::default()).collect(),
            server: ServerStats::default(),
            store: Arc::new(StoreStats::default()),
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
