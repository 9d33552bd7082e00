//! Client-side caching's table of keys clients read (CLIENT TRACKING):
//! each partition keeps, for the keys of its slots, the ids of the clients
//! that may hold them in a local cache. A change to a key goes through the
//! partition's mutation funnel, which takes the key out of the table and
//! hands its clients to the `KeyTracker` (the session layer sends the
//! invalidations). As in Redis the table is keyed by key name only, across
//! databases, and stale ids (clients gone or no longer tracking) stay until
//! their key changes: the tracker skips them.
//!
//! Clients without tracking pay one `is_empty` check per write, under the
//! partition lock they already hold, plus one relaxed load for broadcast
//! mode.

use super::Keyspace;
use super::partition::{Partition, TrackedKeys};
use std::sync::atomic::Ordering::Relaxed;

/// Who hears about changes to tracked keys (defined here, implemented by
/// the session layer).
pub trait KeyTracker: Send + Sync {
    /// `key` changed, or left the table to keep it under its limit: tell
    /// `clients`, which had read it.
    fn invalidate(&self, key: &[u8], clients: &[u64]);
    /// `key` changed while some client tracks by prefix (BCAST).
    fn broadcast(&self, key: &[u8]);
}

impl Partition {
    /// Remembers that client `id` read `key`.
    pub fn track(&mut self, ks: &Keyspace, key: &[u8], id: u64) {
        let ids = match self.tracked.get_mut(key) {
            Some(ids) => ids,
            None => {
                ks.tracking.keys.fetch_add(1, Relaxed);
                self.tracked.entry(key.into()).or_default()
            }
        };
        if !ids.contains(&id) {
            ids.push(id);
            ks.tracking.items.fetch_add(1, Relaxed);
        }
    }

    /// The funnel's hook: `key` changed.
    #[inline]
    pub(super) fn tracked_key_changed(&mut self, ks: &Keyspace, key: &[u8]) {
        if !self.tracked.is_empty() {
            self.invalidate_tracked(ks, key);
        }
        if ks.tracking.broadcasting.load(Relaxed) {
            if let Some(t) = ks.tracking.tracker.get() {
                t.broadcast(key);
            }
        }
    }

    /// Takes `key` out of the table and tells the clients that read it.
    fn invalidate_tracked(&mut self, ks: &Keyspace, key: &[u8]) -> bool {
        let Some(ids) = self.tracked.remove(key) else { return false };
        ks.tracking.keys.fetch_sub(1, Relaxed);
        ks.tracking.items.fetch_sub(ids.len(), Relaxed);
        if let Some(t) = ks.tracking.tracker.get() {
            t.invalidate(key, &ids);
        }
        true
    }

    /// Forgets every tracked key without telling anyone (FLUSHDB and
    /// FLUSHALL send one null invalidation to every tracking client).
    pub fn clear_tracked(&mut self, ks: &Keyspace) {
        let items: usize = self.tracked.values().map(|ids| ids.len()).sum();
        ks.tracking.keys.fetch_sub(self.tracked.len(), Relaxed);
        ks.tracking.items.fetch_sub(items, Relaxed);
        self.tracked = TrackedKeys::new();
    }

    /// Invalidates up to `n` tracked keys (the table is over its limit);
    /// returns how many.
    fn evict_tracked(&mut self, ks: &Keyspace, n: usize) -> usize {
        let victims: Vec<Box<[u8]>> = self.tracked.keys().take(n).cloned().collect();
        for key in &victims {
            self.invalidate_tracked(ks, key);
        }
        victims.len()
    }
}

/// The keyspace's side of tracking: the hook and the table's totals.
#[derive(Default)]
pub struct TrackingState {
    tracker: std::sync::OnceLock<std::sync::Arc<dyn KeyTracker>>,
    /// Keys in the table (INFO tracking_total_keys).
    keys: std::sync::atomic::AtomicUsize,
    /// (key, client) pairs in the table (INFO tracking_total_items).
    items: std::sync::atomic::AtomicUsize,
    /// Some client tracks by prefix: every change is offered to the tracker.
    broadcasting: std::sync::atomic::AtomicBool,
    /// Rounds in a row that ended still over the limit (Redis's effort).
    over_limit_rounds: std::sync::atomic::AtomicUsize,
}

impl Keyspace {
    /// Installs who hears about changes to tracked keys (once, at start).
    pub fn set_tracker(&self, tracker: std::sync::Arc<dyn KeyTracker>) {
        let _ = self.tracking.tracker.set(tracker);
    }

    /// Turns offering every change to the tracker (BCAST) on or off.
    pub fn set_broadcasting(&self, on: bool) {
        self.tracking.broadcasting.store(on, Relaxed);
    }

    #[inline]
    pub fn is_broadcasting(&self) -> bool {
        self.tracking.broadcasting.load(Relaxed)
    }

    pub fn tracked_keys(&self) -> usize {
        self.tracking.keys.load(Relaxed)
    }

    pub fn tracked_items(&self) -> usize {
        self.tracking.items.load(Relaxed)
    }

    /// Keeps the table within `max` keys (0 = no limit) by invalidating
    /// keys, as Redis's `trackingLimitUsedSlots`: 100 keys per round more
    /// for every round in a row that could not get under the limit. Locks
    /// one partition at a time: call it holding none.
    pub fn limit_tracked(&self, max: usize) {
        let over = self.tracked_keys();
        if max == 0 || over <= max {
            self.tracking.over_limit_rounds.store(0, Relaxed);
            return;
        }
        let rounds = self.tracking.over_limit_rounds.load(Relaxed);
        let mut effort = 100 * (rounds + 1);
        let n = self.num_partitions() as u32;
        let start = (super::fast_rand() % n as u64) as u32;
        for i in 0..n {
            if effort == 0 || self.tracked_keys() <= max {
                break;
            }
            let want = (self.tracked_keys() - max).min(effort);
            let mut part = self.lock((start + i) % n);
            effort -= part.evict_tracked(self, want);
        }
        let next = if self.tracked_keys() <= max { 0 } else { rounds + 1 };
        self.tracking.over_limit_rounds.store(next, Relaxed);
    }
}
