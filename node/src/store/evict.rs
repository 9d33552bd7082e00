//! Eviction victims: the policy instance of each (partition, database)
//! proposes its best candidate; the keyspace compares candidates of a few
//! partitions, one lock at a time, and removes the winner. The memory
//! budget (`crate::memory`) decides when and how much.
//!
//! With a disk tier, values leave RAM for it under every policy. Policies
//! that may not discard just any key (`noeviction`, `volatile-*`) still
//! have victims to *demote*: a search by recency (frequency for
//! `volatile-lfu`) over all keys, from the access state every policy keeps
//! (`Ranking`). The policy decides only what may be discarded
//! (`Keyspace::may_discard`).
//!
//! A search that finds nothing is remembered (`futile_until`) until
//! something that could give it a victim changes (a key in RAM, a TTL, a
//! record dead on disk, the policy) or briefly at most, so that at the
//! limit each command costs one comparison, not a search.

use super::Keyspace;
use super::StoreStats;
use super::cold::values::Demotion;
use super::entry::Entry;
use super::journal::ChangeKind;
use super::partition::{NUM_DBS, Partition};
use crate::base::random::fast_rand;
use crate::policy::Clock;
use crate::sys::cpu::prefetch;
use smallvec::SmallVec;
use std::sync::atomic::Ordering::{AcqRel, Relaxed};

/// A key chosen for eviction, named by where it is and by its key's hash.
/// Between choosing (under one partition's lock) and evicting (under it
/// again) the slot may have been freed and reused by another key, which must
/// not be evicted: the slot's stored hash (32 bits of a hash seeded at
/// start-up) tells the two apart without copying the key (an allocation and
/// a cache miss per victim), unless the new key shares those 32 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Victim {
    pub part: u32,
    pub db: usize,
    pub slot: u32,
    pub hash: u32,
    /// Chosen while its value was on disk only (RAM held little else): its
    /// index goes too. A victim chosen warm and demoted since (by another
    /// thread's search) is left alone.
    pub cold: bool,
}

/// What evicting a victim did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evicted {
    /// Removed, demoted or forgotten: the RAM bytes freed.
    Freed(usize),
    /// Not the key chosen any more (gone, replaced, demoted meanwhile).
    Stale,
    /// Still there, and must stay: the policy may not discard it and the
    /// tier took nothing (full, or none), or a walk of every key holds it.
    Kept,
}

/// A database gives a search at most one candidate per this many keys.
const KEYS_PER_CANDIDATE: usize = 32;

/// How long a search that found nothing is trusted at most (ms), for the
/// changes that do not say so (the forget limit, a KEYS walk ending).
const FUTILE_MS: u64 = 1000;
/// `Keyspace::futile` bits: the last search found nothing; a search is
/// under way. The rest is a generation.
const NOTHING: u64 = 1;
const SEARCHING: u64 = 2;
/// How long demotions are not tried after the tier refused one (ms),
/// unless the cleaner frees a segment first.
const TIER_REFUSED_MS: u64 = 100;

/// How a search ranks candidates (lower goes first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ranking {
    /// The configured policy's candidates (what it may evict).
    Policy,
    /// Any key with its value in RAM, least recently used first: victims to
    /// demote to the disk tier whatever the policy.
    Recency,
    /// The same, lowest decayed LFU counter first (`volatile-lfu`).
    Frequency,
}

/// Random slots a demotion search draws past cold entries (as
/// `DbEntries::random_slot` does for the policies).
const COLD_SKIPS: usize = 16;

/// `Keyspace::dbs_used` has a bit per database.
const _: () = assert!(NUM_DBS <= 64);

impl Keyspace {
    /// Database `db` holds a key (called under the lock of the partition
    /// that holds it): searches look at `db` from then on. The bit stays
    /// set: most nodes use one database, and a search need not visit the
    /// other fifteen in every partition it draws (a cache miss or so each).
    #[inline]
    pub(super) fn note_db_used(&self, db: usize) {
        let bit = 1u64 << db;
        if self.dbs_used.load(Relaxed) & bit == 0 {
            self.dbs_used.fetch_or(bit, Relaxed);
        }
    }

    /// SWAPDB `a` `b`: the keys of either may now be in the other.
    pub(super) fn note_dbs_swapped(&self, a: usize, b: usize) {
        let bits = (1u64 << a) | (1u64 << b);
        if self.dbs_used.load(Relaxed) & bits != 0 {
            self.dbs_used.fetch_or(bits, Relaxed);
        }
    }

    /// The databases that ever held a key. Read under a partition's lock,
    /// it includes every database with a key in that partition: the bit
    /// was set under that lock.
    fn dbs_used(&self) -> impl Iterator<Item = usize> {
        let used = self.dbs_used.load(Relaxed);
        (0..NUM_DBS).filter(move |db| used & (1 << db) != 0)
    }

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
        self.victims_by(Ranking::Policy, samples, keep, out);
    }

    /// [`Self::eviction_victims`] ranked by `ranking`.
    pub fn victims_by(&self, ranking: Ranking, samples: usize, keep: usize, out: &mut Vec<(u64, Victim)>) {
        let nparts = self.num_partitions() as u64;
        let clock = self.policy_clock();
        // Random policies: one random draw is a uniform victim already
        // (each further draw is another cache miss for nothing).
        let random = ranking == Ranking::Policy && self.policy_kind().is_random();
        let samples = if random { 1 } else { samples.max(1) };
        let mut search = Search { best: SmallVec::new(), keep: keep.clamp(1, samples), taken: 0, clock, ranking };
        // The candidates of one search come from as few random partitions
        // as the keyspace allows: a partition's keys are a uniform sample of
        // the keyspace's (keys go to partitions by hash), so random slots of
        // one well-filled partition are as good a sample as slots spread
        // over as many partitions, for one lock and one cold partition
        // instead of several. A database takes at most one candidate per
        // `KEYS_PER_CANDIDATE` keys, so that a small one is not asked for
        // the same few keys over and over. Under the lock, each database's
        // policy first gets the random numbers it will start from and the
        // entries it will read first start loading (random entries are
        // cache misses, which then overlap instead of following one
        // another); then the policies propose candidates from them.
        let mut drawn = 0;
        for _ in 0..samples {
            if drawn >= samples {
                break;
            }
            let pidx = (fast_rand() % nparts) as u32;
            let mut part = self.lock(pidx);
            let left = samples - drawn;
            let mut draws: SmallVec<[(usize, u64); 8]> = SmallVec::new();
            for db in self.dbs_used() {
                let d = &mut part.dbs[db];
                let k = (d.len() / KEYS_PER_CANDIDATE).clamp(1, left);
                if !d.is_empty() {
                    for _ in 0..k {
                        let r = fast_rand();
                        match ranking {
                            Ranking::Policy => d.prefetch_candidate(r),
                            _ => {
                                if let Some(slot) = d.table.probe_slot(r) {
                                    d.table.prefetch(slot);
                                }
                            }
                        }
                        draws.push((db, r));
                    }
                }
            }
            drawn += draws.len().max(1);
            for (db, r) in draws {
                let mut first = Some(r);
                search.visit(&mut part, pidx, db, &mut || first.take().unwrap_or_else(fast_rand));
            }
        }
        // Too few candidates (empty databases, a tiny keyspace): more random
        // partitions, then every partition in order from a random start.
        let random_draws = samples as u64 * 4;
        let start = fast_rand() % nparts;
        for attempt in 1..random_draws + nparts {
            if search.taken >= samples {
                break;
            }
            let pidx = if attempt < random_draws {
                (fast_rand() % nparts) as u32
            } else {
                ((start + attempt - random_draws) % nparts) as u32
            };
            let mut part = self.lock(pidx);
            for db in self.dbs_used() {
                if !part.dbs[db].is_empty() {
                    search.visit(&mut part, pidx, db, &mut fast_rand);
                }
            }
        }
        out.extend(search.best);
    }

    /// Whether the policy may discard a key whose deadline is `expire_at`
    /// (0: none): any key under allkeys-* and SIEVE, one with a TTL under
    /// volatile-*, none under noeviction. Demoting is not discarding.
    pub fn may_discard(&self, expire_at: u64) -> bool {
        let kind = self.policy_kind();
        kind.evicts() && (expire_at != 0 || !kind.is_volatile())
    }

    /// Removes a victim if it is still the key that was chosen, or with a
    /// disk tier moves its value (and its key, when it can) there; a key the
    /// policy may not discard (`may_discard`) is only demoted. Returns the
    /// bytes freed.
    pub fn evict(&self, v: &Victim, stats: &StoreStats) -> Option<usize> {
        match self.evict_victim(v, stats) {
            Evicted::Freed(bytes) => Some(bytes),
            Evicted::Stale | Evicted::Kept => None,
        }
    }

    /// [`Self::evict`], saying why nothing was freed.
    pub fn evict_victim(&self, v: &Victim, stats: &StoreStats) -> Evicted {
        if v.part as usize >= self.num_partitions() || v.db >= NUM_DBS {
            return Evicted::Stale;
        }
        let mut part = self.lock(v.part);
        let table = &part.dbs[v.db].table;
        if table.hash_of(v.slot) != Some(v.hash) {
            return Evicted::Stale;
        }
        let discard = table.get(v.slot).is_some_and(|e| self.may_discard(e.expire_at()));
        if !discard && self.cold().is_none() {
            return Evicted::Kept;
        }
        // With a disk tier the victim's value moves there instead, and its
        // key too when it can (`cold/forget.rs`). The tier's admission
        // (rarely used values are not worth a write) applies only to what
        // could be discarded instead.
        match self.try_demote(&mut part, v.db, v.slot, !discard) {
            Demotion::Done(freed) => {
                return Evicted::Freed(freed + part.forget_key(self, v.db, v.slot).unwrap_or(0));
            }
            // The tier takes it in a moment, and the write that wants the
            // room waits for that before its locks: not lost meanwhile.
            Demotion::Later => return Evicted::Kept,
            Demotion::Declined => {}
        }
        if part.dbs[v.db].table.get(v.slot).is_some_and(Entry::is_cold) {
            if !v.cold {
                return Evicted::Stale; // chosen warm, demoted by another search since
            }
            // A walk of every key (KEYS) holds cold keys where they are.
            if !self.may_forget() {
                return Evicted::Kept;
            }
            if let Some(freed) = part.forget_key(self, v.db, v.slot) {
                return Evicted::Freed(freed);
            }
            if !discard {
                return Evicted::Kept;
            }
            self.cold_stats().evicted_cold.fetch_add(1, Relaxed);
        } else if !discard {
            return Evicted::Kept; // the tier took nothing
        }
        let freed = part.remove_entry(self, v.db, v.slot, None, ChangeKind::Evicted).mem();
        StoreStats::bump(&stats.evicted, 1);
        StoreStats::bump(&stats.evicted_bytes, freed as u64);
        Evicted::Freed(freed)
    }

    /// Something that may give a search a victim changed (a key or value
    /// in RAM, a TTL, a record dead on disk, a segment freed, the policy):
    /// the next command at the limit searches again. A load, and a write
    /// only while a search is under way or found nothing (then a search
    /// under way cannot conclude "nothing" either: it may have missed this).
    #[inline]
    pub fn victims_may_have_changed(&self) {
        if self.futile.load(Relaxed) & (NOTHING | SEARCHING) != 0 {
            let _ = self.futile.fetch_update(AcqRel, Relaxed, |s| {
                (s & (NOTHING | SEARCHING) != 0).then_some((s | NOTHING | SEARCHING) + 1)
            });
        }
    }

    /// Whether a search is known to find nothing now: the last one found
    /// nothing, nothing changed since, and not long ago.
    #[inline]
    pub fn search_known_futile(&self, now_ms: u64) -> bool {
        self.futile.load(Relaxed) & NOTHING != 0 && now_ms < self.futile_at.load(Relaxed) + FUTILE_MS
    }

    /// A search for victims begins (one per call that makes room, however
    /// many rounds it takes): the token `note_futile_search` needs.
    pub fn begin_search(&self) -> u64 {
        self.searches.fetch_add(1, Relaxed);
        self.futile.fetch_or(SEARCHING, AcqRel) | SEARCHING
    }

    /// The search begun with `token` found nothing it could free: so will
    /// the next ones, until a change (unless one came meanwhile).
    pub fn note_futile_search(&self, token: u64, now_ms: u64) {
        self.futile_at.store(now_ms, Relaxed);
        let _ = self.futile.compare_exchange(token, (token & !SEARCHING) | NOTHING, AcqRel, Relaxed);
    }

    /// Whether the tier refused a demotion lately (`TIER_REFUSED_MS`, or
    /// until the cleaner frees a segment): searches for values to demote
    /// are not made meanwhile.
    #[inline]
    pub fn tier_refused(&self, now_ms: u64) -> bool {
        now_ms < self.tier_refused_until.load(Relaxed)
    }

    pub(super) fn note_tier_refused(&self) {
        self.tier_refused_until.store(crate::store::now_ms() + TIER_REFUSED_MS, Relaxed);
    }

    /// The disk tier freed a segment: demotions may succeed again.
    pub fn tier_has_room(&self) {
        if self.tier_refused_until.load(Relaxed) != 0 {
            self.tier_refused_until.store(0, Relaxed);
        }
        self.victims_may_have_changed();
    }

    /// Searches for victims made since start-up (INFO).
    pub fn eviction_searches(&self) -> u64 {
        self.searches.load(Relaxed)
    }
}

/// A candidate to demote from database `d` (partition locked): the first
/// of a few random slots whose value is in RAM, scored by recency or
/// frequency; a cold entry when only such are drawn (its key may be
/// forgotten).
fn demotion_candidate(
    d: &super::partition::Db,
    lfu: bool,
    clock: &Clock,
    rand: &mut dyn FnMut() -> u64,
) -> Option<(u64, u32)> {
    let mut cold = None;
    for _ in 0..COLD_SKIPS {
        let slot = d.table.random_slot(rand())?;
        let e = d.table.get(slot)?;
        if e.is_cold() {
            cold = Some((0, slot));
            continue;
        }
        let s = &e.meta;
        let score =
            if lfu { ((clock.lfu_counter(s) as u64) << 32) | s.last_access as u64 } else { s.last_access as u64 };
        return Some((score, slot));
    }
    cold
}

/// One search for victims: the best candidates so far.
struct Search {
    /// The best `keep` candidates, sorted by score (lower goes first).
    best: SmallVec<[(u64, Victim); 8]>,
    keep: usize,
    /// Candidates seen.
    taken: usize,
    clock: Clock,
    ranking: Ranking,
}

impl Search {
    /// Asks the policy of database `db` of partition `pidx` (locked) for
    /// its candidate, with random source `rand`.
    fn visit(&mut self, part: &mut Partition, pidx: u32, db: usize, rand: &mut dyn FnMut() -> u64) {
        let d = &mut part.dbs[db];
        let proposed = match self.ranking {
            Ranking::Policy => d.eviction_candidate(1, &self.clock, rand).or_else(|| {
                // The policy's queues hold nothing warm here: a cold entry (a
                // key still in RAM, its value on disk) may go, or RAM that holds
                // only such entries would answer OOM.
                let slot = d.table.random_slot(rand())?;
                d.table.get(slot).is_some_and(Entry::is_cold).then_some((0, slot))
            }),
            Ranking::Recency => demotion_candidate(d, false, &self.clock, rand),
            Ranking::Frequency => demotion_candidate(d, true, &self.clock, rand),
        };
        let Some((score, slot)) = proposed else { return };
        self.taken += 1;
        let Some(hash) = d.table.hash_of(slot) else { return };
        let cold = d.table.get(slot).is_some_and(Entry::is_cold);
        // A cold entry (drawn only when the policy found nothing warm) is
        // the oldest by every policy's score: it goes after every warm one.
        let score = if cold { score | 1 << 63 } else { score };
        let victim = Victim { part: pidx, db, slot, hash, cold };
        // The same key drawn twice counts once.
        if self.best.iter().any(|(_, v)| *v == victim) {
            return;
        }
        let at = self.best.partition_point(|&(s, _)| s <= score);
        if at < self.keep {
            self.best.insert(at, (score, victim));
            self.best.truncate(self.keep);
            // Likely evicted soon: start loading what removing it reads
            // (prefetching only those that beat the pool's best few misses
            // too many: scores tie, and the pool's later victims gain too).
            if let Some(e) = d.table.get(slot) {
                prefetch_heap(e);
            }
        }
    }
}

/// Starts loading the block that removing `e` reads: its head, where the
/// key (hashed for the per-slot key count), expiry and a string's value are.
fn prefetch_heap(e: &Entry) {
    prefetch(e.block_addr());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{KeyAccess, Value};
    use smallvec::SmallVec;

    fn set(ks: &Keyspace, key: &[u8]) {
        set_ttl(ks, key, 0);
    }

    fn set_ttl(ks: &Keyspace, key: &[u8], expire_at: u64) {
        let stats = StoreStats::default();
        let mut parts: SmallVec<[u32; 8]> = smallvec::smallvec![ks.partition_of_key(key)];
        let mut k = KeyAccess { ks, locked: ks.lock_set(&mut parts), db: 0, now_ms: 1, touch: true, stats: &stats };
        k.set(key, Value::Str(b"v".to_vec()), expire_at, false);
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
        assert_eq!(victim.hash, crate::store::hash_bytes(b"old") as u32);
        // Another client deletes the key and a new one takes its slot.
        del(&ks, b"old");
        set(&ks, b"new");
        assert_eq!(ks.lock(0).dbs[0].find(crate::store::hash_bytes(b"new"), b"new"), Some(victim.slot));
        let stats = StoreStats::default();
        assert_eq!(ks.evict(&victim, &stats), None, "the new key must not be evicted");
        assert_eq!(ks.lock(0).db_len(0), 1);
        assert_eq!(stats.evicted.load(std::sync::atomic::Ordering::Relaxed), 0);
    }

    #[test]
    fn a_key_that_lost_its_ttl_is_left_alone_by_volatile_policies() {
        let ks = Keyspace::new(1);
        ks.set_policy(crate::config::EvictionPolicy::VolatileLru);
        set_ttl(&ks, b"k", u64::MAX / 2);
        let victim = ks.eviction_victim(5).expect("a victim");
        // PERSIST (here: SET without a TTL) between choosing and evicting.
        set(&ks, b"k");
        let stats = StoreStats::default();
        assert_eq!(ks.evict(&victim, &stats), None, "a key without a TTL must not be evicted");
        // Under allkeys-* the same victim goes.
        ks.set_policy(crate::config::EvictionPolicy::AllKeysLru);
        assert!(ks.evict(&victim, &stats).is_some());
        assert_eq!(ks.lock(0).db_len(0), 0);
    }

    /// A search that found nothing is remembered until a change; a change
    /// made while a search runs keeps that search from concluding nothing.
    #[test]
    fn a_futile_search_is_remembered_until_a_change() {
        let ks = Keyspace::new(1);
        let now = 1_000_000;
        assert!(!ks.search_known_futile(now));
        let token = ks.begin_search();
        ks.note_futile_search(token, now);
        assert!(ks.search_known_futile(now + 1));
        assert!(!ks.search_known_futile(now + FUTILE_MS), "trusted for a while only");
        set(&ks, b"k"); // a new key: a victim for allkeys-*
        assert!(!ks.search_known_futile(now + 1));
        // A change while a search runs (a TTL set by another client).
        let token = ks.begin_search();
        set_ttl(&ks, b"k", u64::MAX / 2);
        ks.note_futile_search(token, now);
        assert!(!ks.search_known_futile(now + 1), "the search may have missed the change");
        // Two searches, the first ends with nothing, then a change, then the
        // second: neither leaves a memo behind.
        let (a, b) = (ks.begin_search(), ks.begin_search());
        ks.note_futile_search(a, now);
        assert!(ks.search_known_futile(now + 1));
        set(&ks, b"other");
        ks.note_futile_search(b, now);
        assert!(!ks.search_known_futile(now + 1));
        assert_eq!(ks.eviction_searches(), 4);
    }

    /// With a disk tier, noeviction and volatile-* demote any key (victims
    /// by recency), and never discard what they keep; without one there is
    /// nothing to do with such a victim.
    #[test]
    fn policies_that_keep_keys_demote_them_and_never_discard() {
        use crate::config::EvictionPolicy as P;
        use crate::store::cold::test_tier::HeldTier;
        let stats = StoreStats::default();
        for kind in [P::NoEviction, P::VolatileLru, P::VolatileLfu] {
            let plain = Keyspace::new(2);
            plain.set_policy(kind);
            set(&plain, b"a");
            let mut out = Vec::new();
            plain.victims_by(Ranking::Recency, 5, 1, &mut out);
            let (_, v) = out.pop().expect("a key to demote");
            assert_eq!(plain.evict_victim(&v, &stats), Evicted::Kept, "{kind}: no tier, kept");
            assert!(!plain.may_discard(0));
            assert_eq!(plain.may_discard(1), kind.is_volatile(), "{kind}");

            let ks = Keyspace::new(2);
            ks.set_cold(std::sync::Arc::new(HeldTier::default()));
            ks.set_policy(kind);
            for i in 0..20 {
                set(&ks, format!("k{i}").as_bytes());
            }
            let mut demoted = 0;
            // Victims are sampled: the last keys in RAM may take a few
            // samples to be drawn among those already on disk.
            let hot_victim = || {
                (0..200).find_map(|_| {
                    let mut out = Vec::new();
                    ks.victims_by(Ranking::Recency, 5, 1, &mut out);
                    out.pop().filter(|(_, v)| !v.cold)
                })
            };
            while let Some((_, v)) = hot_victim() {
                assert!(matches!(ks.evict_victim(&v, &stats), Evicted::Freed(_)), "{kind}");
                demoted += 1;
                assert!(demoted <= 20, "{kind}: each key demoted once");
            }
            assert_eq!(demoted, 20, "{kind}");
            assert_eq!(ks.cold_stats().keys.load(Relaxed), 20, "{kind}");
            assert_eq!(stats.evicted.load(Relaxed), 0, "{kind}: nothing discarded");
            assert_eq!((0..2).map(|i| ks.lock(i).db_len(0)).sum::<usize>(), 20);
        }
    }

    /// A tier busy for a moment keeps an allkeys-* victim where it is (the
    /// write that wants the room waits for the tier); a full one has it
    /// evicted.
    #[test]
    fn a_busy_tier_keeps_the_victim_and_a_full_one_has_it_evicted() {
        use crate::store::cold::test_tier::{Decline, HeldTier};
        let stats = StoreStats::default();
        let ks = Keyspace::new(1);
        let tier = std::sync::Arc::new(HeldTier::default());
        ks.set_cold(tier.clone());
        ks.set_policy(crate::config::EvictionPolicy::AllKeysLru);
        set(&ks, b"a");
        let victim = || {
            let mut out = Vec::new();
            ks.victims_by(Ranking::Policy, 5, 1, &mut out);
            out.pop().expect("a victim").1
        };
        *tier.declines.lock() = Some(Decline::Busy);
        assert_eq!(ks.evict_victim(&victim(), &stats), Evicted::Kept);
        assert_eq!(ks.lock(0).db_len(0), 1);
        assert!(!ks.tier_refused(crate::store::now_ms()), "busy is not a refusal");
        *tier.declines.lock() = Some(Decline::Full);
        assert!(matches!(ks.evict_victim(&victim(), &stats), Evicted::Freed(_)));
        assert_eq!(ks.lock(0).db_len(0), 0);
        assert_eq!(stats.evicted.load(Relaxed), 1);
        assert!(ks.tier_refused(crate::store::now_ms()));
    }

    #[test]
    fn a_victim_from_a_larger_keyspace_is_ignored() {
        let big = Keyspace::new(64);
        big.set_policy(crate::config::EvictionPolicy::AllKeysRandom);
        let key = (0..).map(|i| format!("k{i}")).find(|k| big.partition_of_key(k.as_bytes()) > 0).unwrap();
        set(&big, key.as_bytes());
        let victim = big.eviction_victim(5).expect("a victim");
        assert!(victim.part > 0);
        // A pool kept by a thread outlives its keyspace in tests.
        let small = Keyspace::new(1);
        set(&small, key.as_bytes());
        assert_eq!(small.evict(&victim, &StoreStats::default()), None);
        assert_eq!(small.lock(0).db_len(0), 1);
    }

    #[test]
    fn searches_find_keys_in_any_database_even_after_swapdb() {
        let ks = Keyspace::new(4);
        ks.set_policy(crate::config::EvictionPolicy::AllKeysRandom);
        assert_eq!(ks.eviction_victim(5), None, "empty");
        let stats = StoreStats::default();
        let key = b"k";
        let p = ks.partition_of_key(key);
        let mut parts: SmallVec<[u32; 8]> = smallvec::smallvec![p];
        let mut k =
            KeyAccess { ks: &ks, locked: ks.lock_set(&mut parts), db: 7, now_ms: 1, touch: true, stats: &stats };
        k.set(key, Value::Str(b"v".to_vec()), 0, false);
        drop(k);
        assert_eq!(ks.eviction_victim(5).map(|v| v.db), Some(7));
        // SWAPDB 7 12: the key is now in database 12, which never held one.
        for i in 0..ks.num_partitions() as u32 {
            ks.lock(i).swap_dbs(&ks, 7, 12);
        }
        let victim = ks.eviction_victim(5).expect("the key in database 12");
        assert_eq!((victim.part, victim.db), (p, 12));
        assert!(ks.evict(&victim, &stats).is_some());
        assert_eq!(ks.eviction_victim(5), None);
    }
}
