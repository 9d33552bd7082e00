//! Active expiry: reclaims keys whose TTL passed even if nobody reads them.
//!
//! Each worker runs a short cycle on a timer. A cycle visits a window of
//! partitions (a shared cursor spreads the work across workers), skips any
//! partition that is busy (`try_lock`: expiry never makes a request wait),
//! and removes at most a bounded number of expired keys per partition. Keys
//! are found through each database's expiry set ordered by deadline, so a
//! cycle touches only keys that really are expired.

use super::partition::NUM_DBS;
use super::{Keyspace, StoreStats};
use std::sync::atomic::{AtomicU32, Ordering};

/// Most keys removed from one partition per visit: bounds lock hold time.
const MAX_PER_PARTITION: usize = 256;

pub struct ActiveExpiry {
    cursor: AtomicU32,
}

impl Default for ActiveExpiry {
    fn default() -> Self {
        ActiveExpiry { cursor: AtomicU32::new(0) }
    }
}

impl ActiveExpiry {
    /// Visits `window` partitions; returns how many keys were removed and
    /// whether some partition still had expired keys left (run again soon).
    pub fn run_cycle(&self, ks: &Keyspace, stats: &StoreStats, now_ms: u64, window: u32) -> (u64, bool) {
        let n = ks.num_partitions() as u32;
        let start = self.cursor.fetch_add(window, Ordering::Relaxed);
        let mut removed = 0;
        let mut more = false;
        for i in 0..window.min(n) {
            let idx = (start.wrapping_add(i)) % n;
            let Some(mut part) = ks.try_lock(idx) else { continue };
            for db in 0..NUM_DBS {
                let mut budget = MAX_PER_PARTITION;
                while budget > 0 {
                    match part.dbs[db].expires.first() {
                        Some(&(at, slot)) if at <= now_ms => {
                            part.remove_entry(ks, db, slot, None, super::ChangeKind::Expired);
                            removed += 1;
                            budget -= 1;
                        }
                        _ => break,
                    }
                }
                if budget == 0 {
                    more = true;
                }
            }
        }
        if removed > 0 {
            StoreStats::bump(&stats.expired, removed);
        }
        (removed, more)
    }
}
