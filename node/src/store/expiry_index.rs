//! The expiry order of one database's keys with a TTL: (expire_at, slot)
//! pairs, soonest first, for exact active expiry and volatile-ttl.
//!
//! Removal is lazy. Removing a random pair from a tree of thousands walks
//! several cold nodes and rebalances; at the memory limit with volatile-*
//! policies every write evicts a random TTL key, and that walk cost more
//! than the eviction search itself. So a key that leaves (deleted,
//! evicted, its TTL changed or cleared) only lowers the live count and
//! leaves its pair behind, *stale*: a pair is live exactly when the
//! table's entry in that slot still expires at that time. Two rules keep
//! stale pairs harmless:
//! - the first pair is always live (stale pairs at the front are popped
//!   as soon as they appear there), so the soonest deadline is exact and
//!   the expiry cycle and volatile-ttl never skip anything;
//! - once stale pairs outnumber live ones (plus a small slack) the order
//!   is rebuilt from the table, which costs O(1) per removal amortized
//!   and bounds the memory to about twice the live pairs.

use super::entry::Entry;
use super::slab_table::SlabTable;
use std::collections::BTreeSet;

/// Stale pairs allowed beyond the live count before a rebuild (a small
/// database is not rebuilt on every other removal).
const STALE_SLACK: usize = 64;

/// How many of the soonest live pairs `random_among_soonest` picks from.
const SOONEST: usize = 64;

#[derive(Default)]
pub struct ExpiryIndex {
    order: BTreeSet<(u64, u32)>,
    /// Pairs in `order` that are live (the rest are stale).
    live: usize,
}

/// Whether `(at, slot)` is the table's current expiry for that slot.
#[inline]
fn is_live(table: &SlabTable<Entry>, at: u64, slot: u32) -> bool {
    table.get(slot).is_some_and(|e| e.expire_at() == at)
}

impl ExpiryIndex {
    /// Keys with a TTL.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Pairs held, live and stale.
    #[cfg(test)]
    fn pairs_held(&self) -> usize {
        self.order.len()
    }

    /// A key in `slot` now expires at `at` (the table already says so).
    pub fn insert(&mut self, at: u64, slot: u32) {
        // A stale copy of the same pair (the slot's previous key expired
        // at the same millisecond) becomes live again: one pair, one key.
        self.order.insert((at, slot));
        self.live += 1;
    }

    /// The key that expired at `at` in `slot` no longer does (the table
    /// already says so: the entry is gone or has another expiry).
    pub fn forget(&mut self, at: u64, slot: u32, table: &SlabTable<Entry>) {
        debug_assert!(!is_live(table, at, slot), "forget of a live pair");
        self.live -= 1;
        if self.order.first() == Some(&(at, slot)) {
            self.order.pop_first();
            self.pop_stale_front(table);
        }
        if self.order.len() - self.live > self.live + STALE_SLACK {
            self.rebuild(table);
        }
    }

    /// The soonest deadline and its slot: always a live key.
    #[inline]
    pub fn soonest(&self) -> Option<(u64, u32)> {
        self.order.first().copied()
    }

    /// A random key among the (up to) 64 soonest to expire.
    pub fn random_among_soonest(&self, table: &SlabTable<Entry>, rand: u64) -> Option<u32> {
        let n = self.live.min(SOONEST);
        if n == 0 {
            return None;
        }
        let pick = (rand % n as u64) as usize;
        self.live_pairs(table).nth(pick).map(|(_, slot)| slot)
    }

    /// Live pairs, soonest first.
    pub fn live_pairs<'a>(&'a self, table: &'a SlabTable<Entry>) -> impl Iterator<Item = (u64, u32)> + 'a {
        self.order.iter().copied().filter(move |&(at, slot)| is_live(table, at, slot))
    }

    fn pop_stale_front(&mut self, table: &SlabTable<Entry>) {
        while let Some(&(at, slot)) = self.order.first() {
            if is_live(table, at, slot) {
                break;
            }
            self.order.pop_first();
        }
    }

    /// Keeps only the live pairs. When the order holds a fair share of the
    /// table, reading the table front to back (sequential memory) and
    /// sorting beats checking each held pair against it (a random read
    /// each).
    fn rebuild(&mut self, table: &SlabTable<Entry>) {
        let pairs: Vec<(u64, u32)> = if self.order.len() * 4 >= table.len() {
            table.iter().filter(|(_, e)| e.expire_at() != 0).map(|(slot, e)| (e.expire_at(), slot)).collect()
        } else {
            self.live_pairs(table).collect()
        };
        // Bulk-built from a sorted vector: linear, no rebalancing.
        self.order = pairs.into_iter().collect();
        debug_assert_eq!(self.order.len(), self.live);
        self.live = self.order.len();
    }
}

#[cfg(test)]
mod tests {
    use crate::base::random::splitmix64;
    use crate::store::{KeyAccess, Keyspace, StoreStats, Value};
    use smallvec::SmallVec;
    use std::collections::BTreeSet;

    fn with_key(ks: &Keyspace, key: &[u8], f: impl FnOnce(&mut KeyAccess<'_>)) {
        let stats = StoreStats::default();
        let mut parts: SmallVec<[u32; 8]> = smallvec::smallvec![ks.partition_of_key(key)];
        let mut k = KeyAccess { ks, locked: ks.lock_set(&mut parts), db: 0, now_ms: 1, touch: true, stats: &stats };
        f(&mut k);
    }

    /// What the table says and what the index says.
    struct Seen {
        /// (expire_at, slot) of every entry with a TTL, from the table.
        truth: BTreeSet<(u64, u32)>,
        live: Vec<(u64, u32)>,
        soonest: Option<(u64, u32)>,
        len: usize,
        held: usize,
    }

    fn observe(ks: &Keyspace) -> Seen {
        let part = ks.lock(0);
        let d = &part.dbs[0];
        Seen {
            truth: d.table.iter().filter(|(_, e)| e.expire_at() != 0).map(|(s, e)| (e.expire_at(), s)).collect(),
            live: d.expires.live_pairs(&d.table).collect(),
            soonest: d.expires.soonest(),
            len: d.expires.len(),
            held: d.expires.pairs_held(),
        }
    }

    #[test]
    fn matches_the_table_through_random_sets_deletes_and_ttl_changes() {
        let ks = Keyspace::new(1);
        let mut r = 7u64;
        let mut max_held = 0;
        for step in 0..20_000u64 {
            r = splitmix64(r);
            let key = format!("k{}", r % 500);
            // Few distinct deadlines: slots get reused with the same expiry.
            let ttl = 1_000 + (r >> 20) % 40;
            match (r >> 8) % 4 {
                0 | 1 => {
                    with_key(&ks, key.as_bytes(), |k| k.set(key.as_bytes(), Value::Str(b"v".to_vec()), ttl, false))
                }
                2 => with_key(&ks, key.as_bytes(), |k| k.set(key.as_bytes(), Value::Str(b"v".to_vec()), 0, false)),
                _ => with_key(&ks, key.as_bytes(), |k| {
                    k.delete(key.as_bytes());
                }),
            }
            let Seen { truth, live, soonest, len, held } = observe(&ks);
            assert_eq!(live, truth.iter().copied().collect::<Vec<_>>(), "live pairs at step {step}");
            assert_eq!(len, truth.len(), "live count at step {step}");
            assert_eq!(soonest, truth.first().copied(), "soonest at step {step}");
            assert!(held <= 2 * len + super::STALE_SLACK + 1, "{held} pairs held for {len} keys at step {step}");
            max_held = max_held.max(held - len);
        }
        assert!(max_held > 0, "the test never left a stale pair: it tests nothing lazy");
    }

    #[test]
    fn the_expiry_cycle_removes_due_keys_in_order_past_stale_pairs() {
        let ks = Keyspace::new(1);
        for i in 0..300u64 {
            let key = format!("k{i}");
            with_key(&ks, key.as_bytes(), |k| k.set(key.as_bytes(), Value::Str(b"v".to_vec()), 10 + i, false));
        }
        // Every other key loses its TTL: stale pairs all through the order.
        for i in (0..300u64).step_by(2) {
            let key = format!("k{i}");
            with_key(&ks, key.as_bytes(), |k| k.set(key.as_bytes(), Value::Str(b"v".to_vec()), 0, false));
        }
        let stats = StoreStats::default();
        let mut part = ks.lock(0);
        KeyAccess::purge_expired(&ks, &mut part, 0, 10 + 149, &stats);
        // The odd keys up to 149 expired; no key without a TTL did.
        assert_eq!(stats.expired.load(std::sync::atomic::Ordering::Relaxed), 75);
        assert_eq!(part.dbs[0].len(), 300 - 75);
        assert_eq!(part.dbs[0].expires.soonest().map(|(at, _)| at), Some(10 + 151));
    }
}
