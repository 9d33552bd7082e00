//! Keyspace statistics (hits, misses, expiry, eviction), one set per
//! worker thread; the store bumps them.
//!
//! Each worker writes only its own counters (relaxed atomics on a cache line
//! no other core writes), and readers (INFO, /metrics) sum over workers, so
//! counting hits and misses costs no cross-core traffic on the hot path.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Default, Debug)]
#[repr(align(128))]
pub struct StoreStats {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub expired: AtomicU64,
    pub evicted: AtomicU64,
    /// Bytes freed by eviction.
    pub evicted_bytes: AtomicU64,
}

impl StoreStats {
    #[inline]
    pub fn bump(counter: &AtomicU64, n: u64) {
        // Single writer: a load+store is cheaper than a locked add.
        counter.store(counter.load(Relaxed) + n, Relaxed);
    }

    pub fn reset(&self) {
        for c in [&self.hits, &self.misses, &self.expired, &self.evicted, &self.evicted_bytes] {
            c.store(0, Relaxed);
        }
    }
}

/// Totals over all workers.
#[derive(Default, Debug, Clone, Copy)]
pub struct StatsTotals {
    pub hits: u64,
    pub misses: u64,
    pub expired: u64,
    pub evicted: u64,
    pub evicted_bytes: u64,
}

pub fn totals(all: &[Arc<StoreStats>]) -> StatsTotals {
    let mut t = StatsTotals::default();
    for s in all {
        t.hits += s.hits.load(Relaxed);
        t.misses += s.misses.load(Relaxed);
        t.expired += s.expired.load(Relaxed);
        t.evicted += s.evicted.load(Relaxed);
        t.evicted_bytes += s.evicted_bytes.load(Relaxed);
    }
    t
}
