//! What a slot migration needs from the store (`cluster::migration`):
//!
//! - **Watched slots**: while slots are being copied to another node, every
//!   change to a key of theirs is noted (the key's name, once) by the
//!   mutation funnel, so the copy can send it again. Resending a key's
//!   *current* state, rather than the operations, makes the order of the
//!   copy and of the writes meanwhile irrelevant: the last pass wins.
//! - **Sealed slots**: at the handover, commands on those slots wait (the
//!   pending path) until the slots are unsealed. The check runs under the
//!   partition's lock, so once the sealer has taken and released every
//!   partition's lock (`Keyspace::seal_slots`) no command can still be
//!   changing a sealed slot: what it changed before is among the noted keys.
//!
//! Outside a migration this costs the funnel and the pending check one
//! relaxed load each.

use super::Keyspace;
use crate::base::slot::{SLOTS, SlotSet, key_slot};
use parking_lot::Mutex;
use std::collections::HashSet;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;

#[derive(Default)]
pub struct SlotWatch {
    watching: AtomicBool,
    sealing: AtomicBool,
    watched: Bits,
    sealed: Bits,
    /// Keys of watched slots changed since the last `take_changed`.
    changed: Mutex<HashSet<Box<[u8]>>>,
    /// A whole database was emptied or swapped while watching: the copy
    /// cannot say which keys that touched (the migration gives up).
    flushed: AtomicBool,
    unsealed: tokio::sync::Notify,
}

struct Bits([AtomicU64; SLOTS / 64]);

impl Default for Bits {
    fn default() -> Self {
        Bits(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl Bits {
    #[inline]
    fn has(&self, slot: u16) -> bool {
        self.0[slot as usize / 64].load(Acquire) & (1 << (slot % 64)) != 0
    }

    fn set(&self, slots: &SlotSet, on: bool) {
        for s in slots.iter() {
            let bit = 1u64 << (s % 64);
            if on {
                self.0[s as usize / 64].fetch_or(bit, Release);
            } else {
                self.0[s as usize / 64].fetch_and(!bit, Release);
            }
        }
    }

    fn any(&self) -> bool {
        self.0.iter().any(|w| w.load(Acquire) != 0)
    }
}

impl SlotWatch {
    /// The funnel's hook: a change to `key` of database `db` (empty key:
    /// the whole database).
    #[inline]
    pub(super) fn note(&self, db: usize, key: &[u8]) {
        if !self.watching.load(Relaxed) || db != 0 {
            return;
        }
        if key.is_empty() {
            self.flushed.store(true, Release);
            return;
        }
        if self.watched.has(key_slot(key)) {
            self.changed.lock().insert(key.into());
        }
    }

    /// Whether `key`'s slot is sealed (one load when nothing is).
    #[inline]
    pub fn is_sealed(&self, key: &[u8]) -> bool {
        self.sealing.load(Relaxed) && self.sealed.has(key_slot(key))
    }

    pub(super) fn any_sealed(&self) -> bool {
        self.sealing.load(Relaxed)
    }

    /// Waits until `key`'s slot is unsealed.
    pub(super) fn wait_unsealed(
        ks: &std::sync::Arc<SlotWatch>,
        key: &[u8],
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        let (w, slot) = (ks.clone(), key_slot(key));
        Box::pin(async move {
            while w.sealing.load(Acquire) && w.sealed.has(slot) {
                let woken = w.unsealed.notified();
                tokio::select! {
                    _ = woken => {}
                    _ = tokio::time::sleep(Duration::from_millis(5)) => {}
                }
            }
        })
    }
}

impl Keyspace {
    /// Starts noting changes to keys of `slots`.
    pub fn watch_slots(&self, slots: &SlotSet) {
        self.slot_watch.watched.set(slots, true);
        self.slot_watch.watching.store(true, Release);
    }

    /// Stops noting changes to `slots` (and unseals them).
    pub fn unwatch_slots(&self, slots: &SlotSet) {
        let w = &self.slot_watch;
        w.watched.set(slots, false);
        w.sealed.set(slots, false);
        if !w.watched.any() {
            w.watching.store(false, Release);
            w.flushed.store(false, Release);
            w.changed.lock().clear();
        }
        if !w.sealed.any() {
            w.sealing.store(false, Release);
        }
        w.unsealed.notify_waiters();
    }

    /// The keys of watched slots changed since the last call (and whether a
    /// whole database was emptied meanwhile).
    pub fn take_changed(&self, slots: &SlotSet) -> (Vec<Box<[u8]>>, bool) {
        let w = &self.slot_watch;
        let mut changed = w.changed.lock();
        let mine: Vec<Box<[u8]>> = changed.iter().filter(|k| slots.contains(key_slot(k))).cloned().collect();
        for k in &mine {
            changed.remove(k);
        }
        (mine, w.flushed.load(Acquire))
    }

    /// Makes commands on `slots` wait, and returns once no command can
    /// still change them: every partition holding one of them has been
    /// locked once after the seal (a command checks the seal under its
    /// partitions' locks, see `pending_for`).
    pub fn seal_slots(&self, slots: &SlotSet) {
        let w = &self.slot_watch;
        w.sealed.set(slots, true);
        w.sealing.store(true, Release);
        let mut parts: Vec<u32> = slots.iter().map(|s| self.partition_of_slot(s)).collect();
        parts.sort_unstable();
        parts.dedup();
        for idx in parts {
            drop(self.lock(idx));
        }
    }

    /// Lets commands on `slots` run again (they re-check where the slot is).
    pub fn unseal_slots(&self, slots: &SlotSet) {
        let w = &self.slot_watch;
        w.sealed.set(slots, false);
        if !w.sealed.any() {
            w.sealing.store(false, Release);
        }
        w.unsealed.notify_waiters();
    }

    pub(crate) fn slot_watch_arc(&self) -> &std::sync::Arc<SlotWatch> {
        &self.slot_watch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{KeyAccess, StoreStats, Value};

    #[test]
    fn changes_to_watched_slots_are_noted_once_and_seals_hold_commands() {
        let ks = Keyspace::new(8);
        let stats = StoreStats::default();
        let (a, b) = (b"{a}1".as_slice(), b"{b}1".as_slice());
        let slots = SlotSet::from_ranges(&[(key_slot(a), key_slot(a))]);
        ks.watch_slots(&slots);
        for key in [a, b, a] {
            let mut k = KeyAccess {
                ks: &ks,
                locked: ks.lock_one(ks.partition_of_key(key)),
                db: 0,
                now_ms: 1,
                touch: false,
                stats: &stats,
            };
            k.set(key, Value::Str(b"v".to_vec()), 0, false);
        }
        let (changed, flushed) = ks.take_changed(&slots);
        assert_eq!(changed, vec![Box::<[u8]>::from(a)]);
        assert!(!flushed);
        assert!(ks.take_changed(&slots).0.is_empty(), "taken once");
        assert!(!ks.slot_watch.is_sealed(a));
        ks.seal_slots(&slots);
        assert!(ks.slot_watch.is_sealed(a) && !ks.slot_watch.is_sealed(b));
        assert!(ks.may_pend());
        ks.unwatch_slots(&slots);
        assert!(!ks.slot_watch.is_sealed(a) && !ks.may_pend());
    }
}
