//! Redis's approximated policies: sample a few entries, propose the best.
//!
//! No queue is kept: every access only updates `last_access` and `freq`,
//! and `candidate` compares `samples` random entries.

use super::lfu::{SplitMix, touch};
use super::{Clock, Entries, NONE, Policy, PolicyKind};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pool {
    AllKeys,
    /// Only keys with a TTL.
    Volatile,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rank {
    /// Oldest access first.
    Lru,
    /// Lowest decayed counter first, then oldest.
    Lfu,
    Random,
    /// Nearest expiry first.
    Ttl,
}

pub struct Sampled {
    pool: Pool,
    rank: Rank,
    /// Coin for LFU increments.
    coin: SplitMix,
}

impl Sampled {
    pub fn new(pool: Pool, rank: Rank, coin: SplitMix) -> Self {
        Sampled { pool, rank, coin }
    }

    pub fn kind(&self) -> PolicyKind {
        match (self.pool, self.rank) {
            (Pool::AllKeys, Rank::Lru) => PolicyKind::AllKeysLru,
            (Pool::AllKeys, Rank::Lfu) => PolicyKind::AllKeysLfu,
            (Pool::AllKeys, Rank::Random) => PolicyKind::AllKeysRandom,
            (Pool::Volatile, Rank::Lru) => PolicyKind::VolatileLru,
            (Pool::Volatile, Rank::Lfu) => PolicyKind::VolatileLfu,
            (Pool::Volatile, Rank::Random) => PolicyKind::VolatileRandom,
            // Redis has no allkeys-ttl; a TTL rank only makes sense among TTL keys.
            (_, Rank::Ttl) => PolicyKind::VolatileTtl,
        }
    }
}

impl Policy for Sampled {
    fn on_insert<E: Entries>(&mut self, e: &mut E, slot: u32, _clock: &Clock) {
        let s = e.state_mut(slot);
        (s.flags, s.prev, s.next) = (0, NONE, NONE);
    }

    #[inline]
    fn on_access<E: Entries>(&mut self, e: &mut E, slot: u32, clock: &Clock) {
        touch(e.state_mut(slot), clock, self.coin.next_u64());
    }

    fn candidate<E: Entries>(
        &mut self,
        e: &mut E,
        samples: usize,
        clock: &Clock,
        rand: &mut dyn FnMut() -> u64,
    ) -> Option<(u64, u32)> {
        if self.rank == Rank::Ttl {
            // The expiry order is known exactly: no need to sample.
            return e.soonest_expiring().map(|slot| (e.expire_at(slot), slot));
        }
        let mut best: Option<(u64, u32)> = None;
        for _ in 0..samples.max(1) {
            let drawn = match self.pool {
                Pool::AllKeys => e.random_slot(rand()),
                Pool::Volatile => random_volatile(e, rand),
            };
            // Nothing drawn means nothing is eligible (empty, or no TTL keys).
            let slot = drawn?;
            let s = e.state(slot);
            let score = match self.rank {
                Rank::Lru => s.last_access as u64,
                // Equal counters: the older access goes first.
                Rank::Lfu => ((clock.lfu_counter(s) as u64) << 32) | s.last_access as u64,
                Rank::Random => rand(),
                Rank::Ttl => unreachable!("handled above"),
            };
            if best.is_none_or(|(b, _)| score < b) {
                best = Some((score, slot));
            }
        }
        best
    }

    fn first_look<E: Entries>(&self, e: &E, rand: u64) -> Option<u32> {
        // The first random number picks the first slot drawn (Ttl reads the
        // expiry order instead).
        match (self.pool, self.rank) {
            (_, Rank::Ttl) => None,
            (Pool::AllKeys, _) => e.probe_slot(rand),
            (Pool::Volatile, _) => volatile_draws(e).then(|| e.probe_slot(rand)).flatten(),
        }
    }

    fn rebuild<E: Entries>(&mut self, e: &mut E, live: &mut dyn Iterator<Item = u32>, clock: &Clock) {
        for slot in live {
            self.on_insert(e, slot, clock);
        }
    }
}

/// Whether `random_volatile` draws random keys (at least half have a TTL).
fn volatile_draws<E: Entries>(e: &E) -> bool {
    e.expiring_len() * 2 >= e.len()
}

/// Draws of a random key before giving up on finding one with a TTL that way.
const TTL_DRAWS: usize = 4;

/// A random key with a TTL (volatile-*). While at least half of the keys
/// have one, random keys are drawn until one has a TTL: uniform over the
/// keys with a TTL, as Redis samples its `expires` table, and one slot read
/// per draw, where the expiry order has no random access (reaching a random
/// rank walks the tree). With fewer TTL keys, or after `TTL_DRAWS` misses, a
/// random key among the soonest to expire (`random_among_soonest`).
fn random_volatile<E: Entries>(e: &E, rand: &mut dyn FnMut() -> u64) -> Option<u32> {
    if volatile_draws(e) {
        for _ in 0..TTL_DRAWS {
            let slot = e.random_slot(rand())?;
            if e.expire_at(slot) != 0 {
                return Some(slot);
            }
        }
    }
    e.random_expiring(rand())
}

#[cfg(test)]
mod tests {
    use super::super::sim::SimTable;
    use super::super::{AnyPolicy, EntryState};
    use super::*;

    /// A table of `n` entries (ids 0..n); entry i was last accessed at second i.
    fn filled(kind: PolicyKind, n: u64, ttl: impl Fn(u64) -> u64) -> (SimTable, AnyPolicy) {
        let mut p = AnyPolicy::new(kind);
        let mut t = SimTable::default();
        for i in 0..n {
            t.insert(i, 10, ttl(i), &mut p, &Clock::at(i as u32));
        }
        (t, p)
    }

    fn evict_n(t: &mut SimTable, p: &mut AnyPolicy, n: usize, clock: &Clock, rng: &mut SplitMix) -> Vec<u64> {
        (0..n)
            .map(|_| {
                let (_, slot) = p.candidate(t, 5, clock, &mut || rng.next_u64()).expect("a victim");
                t.remove(slot, p)
            })
            .collect()
    }

    #[test]
    fn lru_prefers_the_least_recently_used() {
        let mut rng = SplitMix::new(3);
        let (mut t, mut p) = filled(PolicyKind::AllKeysLru, 100, |_| 0);
        let victims = evict_n(&mut t, &mut p, 50, &Clock::at(100), &mut rng);
        let old = victims.iter().filter(|&&id| id < 50).count();
        assert!(old >= 35, "only {old} of 50 LRU victims were from the older half");
        // Random takes no notice of age.
        let (mut t, mut p) = filled(PolicyKind::AllKeysRandom, 100, |_| 0);
        let old = evict_n(&mut t, &mut p, 50, &Clock::at(100), &mut rng).iter().filter(|&&id| id < 50).count();
        assert!(old < 35, "random took {old} of 50 from the older half");
    }

    #[test]
    fn lfu_scores_the_decayed_counter_then_the_age() {
        let mut p = AnyPolicy::new(PolicyKind::AllKeysLfu);
        let mut t = SimTable::default();
        let slot = t.insert(1, 10, 0, &mut p, &Clock::at(0));
        *t.state_mut(slot) = EntryState { freq: 9, ..*t.state(slot) };
        // Two idle minutes: 9 -> 7 in the high half; last access (0) in the low half.
        let clock = Clock::at(120);
        assert_eq!(p.candidate(&mut t, 1, &clock, &mut || 0), Some((7 << 32, slot)));
        // A frequently used key outlives a newer one used once.
        let hot = t.insert(2, 10, 0, &mut p, &Clock::at(120));
        let cold = t.insert(3, 10, 0, &mut p, &Clock::at(121));
        let busy = Clock { lfu_log_factor: 0, ..Clock::at(122) };
        for _ in 0..5 {
            p.on_access(&mut t, hot, &busy);
        }
        t.remove(slot, &mut p);
        let mut rng = SplitMix::new(9);
        let (_, victim) = p.candidate(&mut t, 20, &busy, &mut || rng.next_u64()).unwrap();
        assert_eq!(victim, cold);
    }

    #[test]
    fn volatile_policies_only_touch_keys_with_ttl() {
        let mut rng = SplitMix::new(5);
        let ttl = |i: u64| if i % 2 == 0 { 10_000_000_000_000 + i } else { 0 };
        for kind in
            [PolicyKind::VolatileLru, PolicyKind::VolatileRandom, PolicyKind::VolatileTtl, PolicyKind::VolatileLfu]
        {
            let (mut t, mut p) = filled(kind, 40, ttl);
            let victims = evict_n(&mut t, &mut p, 20, &Clock::at(40), &mut rng);
            assert!(victims.iter().all(|id| id % 2 == 0), "{kind}: {victims:?}");
            assert_eq!(p.candidate(&mut t, 5, &Clock::at(40), &mut || rng.next_u64()), None, "{kind}");
            assert_eq!(t.len(), 20);
        }
        // volatile-ttl takes the nearest expiry first.
        let (mut t, mut p) = filled(PolicyKind::VolatileTtl, 40, |i| if i % 2 == 0 { 1_000_000 - i } else { 0 });
        assert_eq!(evict_n(&mut t, &mut p, 3, &Clock::at(40), &mut rng), [38, 36, 34]);
    }

    #[test]
    fn volatile_sampling_reaches_every_key_with_a_ttl() {
        let mut rng = SplitMix::new(11);
        // Every key has a TTL, soonest first by id: random victims come from
        // the whole table, not only from the keys that expire soonest.
        let (mut t, mut p) = filled(PolicyKind::VolatileRandom, 1000, |i| 1_000_000 + i);
        let victims = evict_n(&mut t, &mut p, 100, &Clock::at(1000), &mut rng);
        let late = victims.iter().filter(|&&id| id >= 500).count();
        assert!(late >= 30, "only {late} of 100 victims from the later half: {victims:?}");
        // One key in ten has a TTL: only those go.
        let (mut t, mut p) = filled(PolicyKind::VolatileLru, 1000, |i| if i % 10 == 0 { 1_000_000 + i } else { 0 });
        let victims = evict_n(&mut t, &mut p, 50, &Clock::at(1000), &mut rng);
        assert!(victims.iter().all(|id| id % 10 == 0), "{victims:?}");
    }
}
