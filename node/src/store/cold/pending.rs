//! The pending path: a command whose keys are not all ready to be served
//! from RAM does not run; the store hands back a future instead, the
//! connection awaits it (its worker keeps serving other connections) and
//! then runs the command again from the start. Handlers never block on I/O
//! and need not know about it.
//!
//! What makes a key wait: a value that is on disk only, read once for all
//! waiters (`values.rs`), or a test hook, `KeyAccess::delay_next_access`
//! (`DEBUG PENDING-DELAY`): the key's next command waits the given time,
//! once, as a first read of a cold value would.

use super::disk::{ColdRead, ColdState};
use crate::base::hash::hash_bytes;
use crate::store::{KeyAccess, Keyspace};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// What a waiting command awaits before it runs again.
pub type PendingRead = Pin<Box<dyn Future<Output = ()> + Send>>;

impl Keyspace {
    /// True when some key may make a command wait (one shared read).
    #[inline]
    pub fn may_pend(&self) -> bool {
        self.delayed_keys.load(Relaxed) != 0 || self.cold_stats.keys.load(Relaxed) != 0 || self.slot_watch.any_sealed()
    }
}

impl KeyAccess<'_> {
    /// Makes the next command on `key` (selected database, partition held)
    /// wait `delay_ms` before it runs: the test hook for the pending path.
    pub fn delay_next_access(&mut self, key: &[u8], delay_ms: u64) {
        let db = self.db as u8;
        let part = self.locked.get(self.ks.partition_of_key(key));
        if part.delayed.insert((db, key.into()), delay_ms).is_none() {
            self.ks.delayed_keys.fetch_add(1, Relaxed);
        }
    }

    /// The wait, if any of `keys` (in the selected database, partitions
    /// held) is not ready to be served: a test delay (taken away: after the
    /// wait the command runs) or a value on disk only (its read started or
    /// joined; after it the command runs again and promotes it).
    pub fn pending<'k>(&mut self, keys: impl IntoIterator<Item = &'k [u8]>) -> Option<PendingRead> {
        self.pending_for(keys, true)
    }

    /// [`Self::pending`] for a command that may not read its keys' values
    /// (`reads_values` false: it overwrites or deletes them): cold values are not
    /// read back for it.
    pub fn pending_for<'k>(
        &mut self,
        keys: impl IntoIterator<Item = &'k [u8]>,
        reads_values: bool,
    ) -> Option<PendingRead> {
        if !self.ks.may_pend() {
            return None;
        }
        let mut longest = None;
        let mut reads: Vec<Arc<ColdRead>> = Vec::new();
        let (ks, db, stats) = (self.ks, self.db, self.stats);
        let cold = reads_values && ks.cold_stats.keys.load(Relaxed) != 0;
        // A forgotten key may be any key missing from the slab: resolved
        // even for a blind write (an older copy must not hide there).
        let forgotten = ks.cold_stats.forgotten.load(Relaxed) != 0;
        for key in keys {
            let idx = ks.partition_of_key(key);
            if !self.locked.holds(idx) {
                continue;
            }
            // A slot at its handover to another node: the command runs
            // again once it is over (and is then sent where the slot went).
            if ks.slot_watch.is_sealed(key) {
                return Some(crate::store::slot_watch::SlotWatch::wait_unsealed(ks.slot_watch_arc(), key));
            }
            let part = self.locked.get(idx);
            if !part.delayed.is_empty()
                && let Some(ms) = part.delayed.remove(&(db as u8, key.into()))
            {
                ks.delayed_keys.fetch_sub(1, Relaxed);
                longest = longest.max(Some(ms));
            }
            if !cold && !forgotten {
                continue;
            }
            let hash = hash_bytes(key);
            let mut slot = part.dbs[db].find(hash, key);
            if slot.is_none() && forgotten && !part.dbs[db].forgotten.is_empty() {
                match part.forgotten_check(ks, db, key, hash, self.now_ms) {
                    ColdState::Wait(read) => {
                        if !reads.iter().any(|r| Arc::ptr_eq(r, &read)) {
                            reads.push(read);
                        }
                        continue;
                    }
                    ColdState::Ready => slot = part.dbs[db].find(hash, key),
                }
            }
            if cold && let Some(slot) = slot {
                let exp = part.dbs[db].entry(slot).expire_at();
                if (exp == 0 || exp > self.now_ms)
                    && let ColdState::Wait(read) = part.cold_check(ks, db, slot, stats)
                    && !reads.iter().any(|r| Arc::ptr_eq(r, &read))
                {
                    reads.push(read);
                }
            }
        }
        if longest.is_none() && reads.is_empty() {
            return None;
        }
        let delay = longest.map(Duration::from_millis);
        Some(Box::pin(async move {
            if let Some(d) = delay {
                tokio::time::sleep(d).await;
            }
            for r in reads {
                r.wait().await;
            }
        }))
    }
}
