//! The pending path: a command whose keys are not all ready to be served
//! from RAM does not run; the store hands back a future instead, the
//! connection awaits it (its worker keeps serving other connections) and
//! then runs the command again from the start. Handlers never block on I/O
//! and need not know about it.
//!
//! What makes a key wait is the disk tier's business (a value that is on
//! disk only, read once for all waiters). Until the tier lands, the only
//! source is a test hook, `KeyAccess::delay_next_access` (`DEBUG
//! PENDING-DELAY`): the key's next command waits the given time, once, as a
//! first read of a cold value would.

use super::{KeyAccess, Keyspace};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// What a waiting command awaits before it runs again.
pub type PendingRead = Pin<Box<dyn Future<Output = ()> + Send>>;

impl Keyspace {
    /// True when some key may make a command wait (one shared read).
    #[inline]
    pub fn may_pend(&self) -> bool {
        self.delayed_keys.load(Relaxed) != 0
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
    /// held) is not ready to be served. Takes the reason away: after the
    /// wait the command runs.
    pub fn pending<'k>(&mut self, keys: impl IntoIterator<Item = &'k [u8]>) -> Option<PendingRead> {
        if !self.ks.may_pend() {
            return None;
        }
        let mut longest = None;
        for key in keys {
            let idx = self.ks.partition_of_key(key);
            if !self.locked.holds(idx) {
                continue;
            }
            let part = self.locked.get(idx);
            if let Some(ms) = part.delayed.remove(&(self.db as u8, key.into())) {
                self.ks.delayed_keys.fetch_sub(1, Relaxed);
                longest = longest.max(Some(ms));
            }
        }
        let ms = longest?;
        Some(Box::pin(tokio::time::sleep(Duration::from_millis(ms))))
    }
}
