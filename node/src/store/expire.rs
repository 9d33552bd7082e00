//! Active expiry: reclaims keys whose TTL passed even if nobody reads them.
//!
//! Expired keys are found by sweeps over the partitions, one window at a
//! time: each worker's timer advances the sweep, and so does a write at the
//! memory limit (dead data goes before anything live is evicted). A window
//! skips any partition that is busy (`try_lock`: expiry never makes a request
//! wait) and removes at most a bounded number of expired keys per partition,
//! found through each database's expiry set ordered by deadline.
//!
//! The keyspace keeps a lower bound of every deadline (`ttl_due`): each TTL
//! set lowers it, and a completed sweep raises it to the soonest deadline
//! it left behind. While the clock is before it, nothing can be expired, and
//! neither the timer nor a write at the limit visits a single partition.

use super::partition::NUM_DBS;
use super::{Keyspace, StoreStats};
use parking_lot::Mutex;
use std::sync::atomic::Ordering::SeqCst;

/// Most keys removed from one partition per visit: bounds lock hold time.
const MAX_PER_PARTITION: usize = 256;

pub struct ActiveExpiry {
    /// The next partition the sweep visits (past the end: no sweep under
    /// way). One window runs at a time; others skip rather than wait.
    next: Mutex<u32>,
}

impl Default for ActiveExpiry {
    fn default() -> Self {
        ActiveExpiry { next: Mutex::new(u32::MAX) }
    }
}

impl Keyspace {
    /// A key got a deadline (called under its partition's lock, before the
    /// key is in): sweeps must look again from then on.
    pub(super) fn note_deadline(&self, at: u64) {
        // A key with a TTL: a victim for volatile-* policies.
        self.victims_may_have_changed();
        // `next` first: a sweep ending now reads it after storing `ttl_due`.
        // Each is written only when `at` is sooner (most deadlines are later
        // than the soonest one), so writers do not all write one line that
        // every write at the limit reads. Skipping is safe: `ttl_due` only
        // rises when a sweep ends, to the `next` that sweep built, which is
        // at or before `at` if it was when read here; `next` only rises when
        // a sweep starts, and that sweep visits this partition (under its
        // lock, held here) after this key is in.
        if at < self.ttl_due_next.load(SeqCst) {
            self.ttl_due_next.fetch_min(at, SeqCst);
        }
        if at < self.ttl_due.load(SeqCst) {
            self.ttl_due.fetch_min(at, SeqCst);
        }
    }

    /// True when some key may have expired by `now_ms`.
    #[inline]
    pub fn may_have_expired(&self, now_ms: u64) -> bool {
        now_ms >= self.ttl_due.load(SeqCst)
    }

    /// The time now (unix ms) if some key may have expired by then; reads
    /// no clock while no key has a deadline (a write refused at the limit
    /// under noeviction costs little more than its error reply).
    #[inline]
    pub fn expired_by_now(&self) -> Option<u64> {
        if self.ttl_due.load(SeqCst) == u64::MAX {
            return None;
        }
        let now = super::now_ms();
        self.may_have_expired(now).then_some(now)
    }
}

impl ActiveExpiry {
    /// Visits the next `window` partitions of the sweep, if any key may be
    /// expired; returns how many keys were removed and whether some
    /// partition still had expired keys left (run again soon).
    pub fn run_cycle(&self, ks: &Keyspace, stats: &StoreStats, now_ms: u64, window: u32) -> (u64, bool) {
        if !ks.may_have_expired(now_ms) || ks.expiry_paused(now_ms) {
            return (0, false);
        }
        let Some(mut next) = self.next.try_lock() else { return (0, false) };
        let n = ks.num_partitions() as u32;
        if *next >= n {
            *next = 0;
            ks.ttl_due_next.store(u64::MAX, SeqCst);
        }
        let end = next.saturating_add(window).min(n);
        let mut removed = 0;
        let mut more = false;
        // The soonest deadline left in the partitions visited.
        let mut soonest = u64::MAX;
        for idx in *next..end {
            let Some(mut part) = ks.try_lock(idx) else {
                // Not seen: the next sweep must look again.
                soonest = soonest.min(now_ms);
                continue;
            };
            for db in 0..NUM_DBS {
                // Keys on disk only, key and all (`cold/forget.rs`).
                removed += part.expire_forgotten_due(ks, db, now_ms);
                if let Some(at) = part.dbs[db].forgotten.soonest_deadline() {
                    soonest = soonest.min(at);
                }
                let mut budget = MAX_PER_PARTITION;
                loop {
                    match part.dbs[db].expires.soonest() {
                        Some((at, _)) if budget == 0 => {
                            soonest = soonest.min(at);
                            more |= at <= now_ms;
                            break;
                        }
                        Some((at, slot)) if at <= now_ms => {
                            part.remove_entry(ks, db, slot, None, super::ChangeKind::Expired);
                            removed += 1;
                            budget -= 1;
                        }
                        Some((at, _)) => {
                            soonest = soonest.min(at);
                            break;
                        }
                        None => break,
                    }
                }
            }
        }
        ks.ttl_due_next.fetch_min(soonest, SeqCst);
        *next = end;
        if end >= n {
            let due = ks.ttl_due_next.load(SeqCst);
            ks.ttl_due.store(due, SeqCst);
            // A deadline noted between the load and the store is kept.
            ks.ttl_due.fetch_min(ks.ttl_due_next.load(SeqCst), SeqCst);
        }
        if removed > 0 {
            StoreStats::bump(&stats.expired, removed);
        }
        (removed, more)
    }

    /// Before a write at the memory limit: advances the sweep window by
    /// window while keys may be expired and `enough` is false, for at most
    /// one whole sweep. Costs nothing while no key can have expired.
    pub fn reclaim(&self, ks: &Keyspace, stats: &StoreStats, now_ms: u64, window: u32, enough: impl Fn() -> bool) {
        let windows = (ks.num_partitions() as u32).div_ceil(window.max(1)) + 1;
        for _ in 0..windows {
            if !ks.may_have_expired(now_ms) || enough() {
                return;
            }
            if self.next.is_locked() {
                // Another thread is sweeping: this write does not wait for it.
                return;
            }
            self.run_cycle(ks, stats, now_ms, window);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{KeyAccess, Value};
    use smallvec::SmallVec;

    fn set(ks: &Keyspace, key: &[u8], expire_at: u64) {
        let stats = StoreStats::default();
        let mut parts: SmallVec<[u32; 8]> = smallvec::smallvec![ks.partition_of_key(key)];
        let mut k = KeyAccess { ks, locked: ks.lock_set(&mut parts), db: 0, now_ms: 1, touch: true, stats: &stats };
        k.set(key, Value::Str(b"v".to_vec()), expire_at, false);
    }

    fn keys(ks: &Keyspace) -> usize {
        (0..ks.num_partitions() as u32).map(|i| ks.lock(i).db_len(0)).sum()
    }

    #[test]
    fn sweeps_only_while_a_deadline_has_passed() {
        let ks = Keyspace::new(16);
        let exp = ActiveExpiry::default();
        let stats = StoreStats::default();
        assert!(!ks.may_have_expired(u64::MAX - 1), "no TTL yet");
        assert_eq!(ks.expired_by_now(), None);
        set(&ks, b"a", 1_000);
        set(&ks, b"b", 5_000);
        set(&ks, b"forever", 0);
        assert!(!ks.may_have_expired(999));
        assert!(ks.may_have_expired(1_000));
        assert!(ks.expired_by_now().is_some_and(|now| now >= crate::store::now_ms() - 60_000), "the clock is read");
        // A whole sweep at 2 s removes "a" and learns that "b" is next.
        exp.reclaim(&ks, &stats, 2_000, 4, || false);
        assert_eq!(keys(&ks), 2);
        assert!(!ks.may_have_expired(4_999), "the sweep did not raise the bound");
        // A sooner deadline set later lowers the bound again.
        set(&ks, b"c", 3_000);
        assert!(ks.may_have_expired(3_000));
        exp.reclaim(&ks, &stats, 6_000, 4, || false);
        assert_eq!(keys(&ks), 1);
        assert!(!ks.may_have_expired(u64::MAX - 1), "nothing left with a TTL");
        assert_eq!(stats.expired.load(std::sync::atomic::Ordering::Relaxed), 3);
    }

    #[test]
    fn a_deadline_set_during_a_sweep_is_not_lost() {
        let ks = Keyspace::new(16);
        let exp = ActiveExpiry::default();
        let stats = StoreStats::default();
        set(&ks, b"a", 10);
        // Half a sweep, then a key with a deadline lands anywhere.
        exp.run_cycle(&ks, &stats, 20, 8);
        set(&ks, b"late", 30);
        exp.run_cycle(&ks, &stats, 20, 8);
        assert!(ks.may_have_expired(30), "the late deadline was forgotten");
        exp.reclaim(&ks, &stats, 40, 8, || false);
        assert_eq!(keys(&ks), 0);
    }
}
