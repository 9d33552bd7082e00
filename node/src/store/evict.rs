//! Eviction victims: the policy instance of each (partition, database)
//! proposes its best candidate; the keyspace compares candidates of a few
//! partitions, one lock at a time, and removes the winner. The memory
//! budget (`crate::memory`) decides when and how much.

use super::Keyspace;
use super::StoreStats;
use super::journal::ChangeKind;
use super::partition::NUM_DBS;
use crate::base::random::fast_rand;
use smallvec::SmallVec;

/// A key chosen for eviction. It carries the key itself: between choosing
/// (under one partition's lock) and evicting (under it again) the slot may
/// have been freed and reused by another key, which must not be evicted.
#[derive(Clone, Debug)]
pub struct Victim {
    pub part: u32,
    pub db: usize,
    pub slot: u32,
    pub key: Box<[u8]>,
}

impl Keyspace {
    /// The best victim among `samples` candidates, each proposed by the
    /// policy of a random non-empty (partition, database); None when no
    /// database has anything this policy may evict.
    pub fn eviction_victim(&self, samples: usize) -> Option<Victim> {
        let mut out = Vec::with_capacity(1);
        self.eviction_victims(samples, 1, &mut out);
        out.pop().map(|(_, v)| v)
    }

    /// Like [`Self::eviction_victim`], but appends the best `keep` of the
    /// candidates to `out` with their scores (lower goes first), for a
    /// caller that keeps a pool of candidates across searches.
    pub fn eviction_victims(&self, samples: usize, keep: usize, out: &mut Vec<(u64, Victim)>) {
        let nparts = self.num_partitions() as u64;
        let clock = self.policy_clock();
        let samples = samples.max(1);
        let keep = keep.clamp(1, samples);
        // The best `keep` so far, sorted by score (lower goes first).
        let mut best: SmallVec<[(u64, u32, usize, u32); 8]> = SmallVec::new();
        let mut taken = 0;
        // Random partitions first (the same one may be drawn twice: with few
        // partitions that is how several candidates come from one); if those
        // were empty (tiny keyspace), walk partitions in order from a random
        // start until enough candidates are found.
        let random_draws = samples as u64 * 4;
        let start = fast_rand() % nparts;
        for attempt in 0..random_draws + nparts {
            if taken >= samples {
                break;
            }
            let pidx = if attempt < random_draws {
                (fast_rand() % nparts) as u32
            } else {
                ((start + attempt - random_draws) % nparts) as u32
            };
            let mut part = self.lock(pidx);
            for db in 0..NUM_DBS {
                let d = &mut part.dbs[db];
                if d.is_empty() {
                    continue;
                }
                let Some((score, slot)) = d.eviction_candidate(1, &clock) else { continue };
                taken += 1;
                // The same key drawn twice counts once.
                if best.iter().any(|&(_, p, b, s)| (p, b, s) == (pidx, db, slot)) {
                    continue;
                }
                let at = best.partition_point(|&(s, ..)| s <= score);
                if at < keep {
                    best.insert(at, (score, pidx, db, slot));
                    best.truncate(keep);
                }
            }
        }
        // Keys are copied once the search is over, under their lock again:
        // the victim carries its key (see `Victim`). One may be gone by then.
        for (score, part, db, slot) in best {
            if let Some(e) = self.lock(part).dbs[db].table.get(slot) {
                out.push((score, Victim { part, db, slot, key: e.key().into() }));
            }
        }
    }

    /// Removes a victim if it is still the key that was chosen; returns the
    /// bytes freed.
    pub fn evict(&self, v: &Victim, stats: &StoreStats) -> Option<usize> {
        let mut part = self.lock(v.part);
        if part.dbs[v.db].table.get(v.slot).is_none_or(|e| e.key() != &*v.key) {
            return None;
        }
        let freed = part.remove_entry(self, v.db, v.slot, None, ChangeKind::Evicted).mem();
        StoreStats::bump(&stats.evicted, 1);
        StoreStats::bump(&stats.evicted_bytes, freed as u64);
        Some(freed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{KeyAccess, Value};
    use smallvec::SmallVec;

    fn set(ks: &Keyspace, key: &[u8]) {
        let stats = StoreStats::default();
        let mut parts: SmallVec<[u32; 8]> = smallvec::smallvec![ks.partition_of_key(key)];
        let mut k = KeyAccess { ks, locked: ks.lock_set(&mut parts), db: 0, now_ms: 1, touch: true, stats: &stats };
        k.set(key, Value::Str(b"v".to_vec()), 0, false);
    }

    fn del(ks: &Keyspace, key: &[u8]) {
        let stats = StoreStats::default();
        let mut parts: SmallVec<[u32; 8]> = smallvec::smallvec![ks.partition_of_key(key)];
        let mut k = KeyAccess { ks, locked: ks.lock_set(&mut parts), db: 0, now_ms: 1, touch: true, stats: &stats };
        assert!(k.delete(key));
    }

    #[test]
    fn a_slot_reused_between_choosing_and_evicting_is_left_alone() {
        let ks = Keyspace::new(1);
        ks.set_policy(crate::config::EvictionPolicy::AllKeysRandom);
        set(&ks, b"old");
        let victim = ks.eviction_victim(5).expect("a victim");
        assert_eq!(&*victim.key, b"old");
        // Another client deletes the key and a new one takes its slot.
        del(&ks, b"old");
        set(&ks, b"new");
        assert_eq!(ks.lock(0).dbs[0].find(crate::store::hash_bytes(b"new"), b"new"), Some(victim.slot));
        let stats = StoreStats::default();
        assert_eq!(ks.evict(&victim, &stats), None, "the new key must not be evicted");
        assert_eq!(ks.lock(0).db_len(0), 1);
        assert_eq!(stats.evicted.load(std::sync::atomic::Ordering::Relaxed), 0);
    }
}
