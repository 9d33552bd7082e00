//! Eviction policies as a layer below the store.
//!
//! A policy sees a table only through [`Entries`] and keeps its per-entry
//! bookkeeping in the fixed-size [`EntryState`] stored in each index entry.
//! The store keeps one [`AnyPolicy`] per (partition, database) and calls its
//! hooks; the trace simulator ([`sim`]) drives the very same code with no
//! keyspace or network. This module depends on std only: time, tuning and
//! randomness come from the caller, so tests are deterministic.

pub mod lfu;
pub mod sampled;
pub mod sieve;
pub mod sim;
pub mod trace;

pub use lfu::{LFU_DEFAULT_DECAY_MINUTES, LFU_DEFAULT_LOG_FACTOR, LFU_INIT, SplitMix, lfu_decayed, lfu_log_incr};
use sampled::{Pool, Rank, Sampled};
use sieve::Sieve;

/// "No slot" in queue links.
pub const NONE: u32 = u32::MAX;

/// A random key among the 64 that expire soonest, from an expiry order of
/// (expire-at, slot): an ordered set has no O(1) random access, and the
/// soonest are the better volatile victims anyway.
pub fn random_among_soonest(expiring: &std::collections::BTreeSet<(u64, u32)>, rand: u64) -> Option<u32> {
    let n = expiring.len().min(64);
    if n == 0 {
        return None;
    }
    expiring.iter().nth((rand % n as u64) as usize).map(|&(_, slot)| slot)
}

/// Fixed-size per-entry state stored inside each index entry (16 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryState {
    /// Clock seconds of the last access (LRU, OBJECT IDLETIME).
    pub last_access: u32,
    /// Logarithmic access counter (LFU, OBJECT FREQ).
    pub freq: u8,
    /// Policy-private bits (e.g. SIEVE's visited bit).
    pub flags: u8,
    /// Policy-private queue links (slot ids in the same table) or NONE.
    pub prev: u32,
    pub next: u32,
}

impl EntryState {
    /// A new entry: accessed now, LFU counter at its initial value, unlinked.
    pub fn new(clock: &Clock) -> Self {
        EntryState { last_access: clock.now_secs, freq: LFU_INIT, flags: 0, prev: NONE, next: NONE }
    }
}

/// Roughly how often an entry was used since it was written, as its state
/// tells, for the disk tier's admission: a value leaving RAM that was used
/// once or never is hardly worth a disk write when the tier is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hits {
    /// No use since it was written.
    None,
    /// One use, or a few: Redis's logarithmic counter takes its first step
    /// for sure and the next ones by chance (1 in 11 at the default
    /// `lfu-log-factor` 10; exact at 0).
    Few,
    Many,
}

/// [`Hits`] from the LFU counter every policy keeps (OBJECT FREQ), not
/// decayed: a victim is idle by definition, and decay would count every
/// idle value as unused. (SIEVE's visited bit tells nothing here: the hand
/// clears it before it picks a victim.)
pub fn hits_hint(s: &EntryState) -> Hits {
    match s.freq {
        f if f <= LFU_INIT => Hits::None,
        f if f == LFU_INIT + 1 => Hits::Few,
        _ => Hits::Many,
    }
}

/// Time and tuning the hooks need, read once per command by the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock {
    /// Seconds on the caller's clock (the keyspace clock in the store).
    pub now_secs: u32,
    /// `lfu-log-factor`.
    pub lfu_log_factor: u32,
    /// `lfu-decay-time` in minutes (0 = no decay).
    pub lfu_decay_minutes: u32,
}

impl Clock {
    /// A clock at `now_secs` with Redis's default LFU tuning.
    pub fn at(now_secs: u32) -> Self {
        Clock { now_secs, lfu_log_factor: LFU_DEFAULT_LOG_FACTOR, lfu_decay_minutes: LFU_DEFAULT_DECAY_MINUTES }
    }

    /// The LFU counter of `s` as it stands now, after decay for idle time.
    pub fn lfu_counter(&self, s: &EntryState) -> u8 {
        lfu_decayed(s.freq, s.last_access, self.now_secs, self.lfu_decay_minutes)
    }
}

/// What a policy sees of the table it manages (implemented by the store's
/// per-database table and by the simulator's table).
pub trait Entries {
    fn state(&self, slot: u32) -> &EntryState;
    fn state_mut(&mut self, slot: u32) -> &mut EntryState;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// A random live slot (O(1) sampling), None when empty.
    fn random_slot(&self, rand: u64) -> Option<u32>;
    /// The slot `random_slot(rand)` looks at first, live or not, found
    /// without reading any entry (so that a caller can start loading it).
    fn probe_slot(&self, rand: u64) -> Option<u32>;
    /// Absolute expiry (unix ms) of the entry in `slot`, 0 = none.
    fn expire_at(&self, slot: u32) -> u64;
    /// The slot whose TTL ends first (volatile-ttl).
    fn soonest_expiring(&self) -> Option<u32>;
    /// A random slot among keys with a TTL (volatile-*), None when none has one.
    fn random_expiring(&self, rand: u64) -> Option<u32>;
    /// How many keys have a TTL.
    fn expiring_len(&self) -> usize;
    /// Bytes the entry accounts for (for size-aware policies later).
    fn size(&self, slot: u32) -> usize;
}

/// One policy. One instance per (partition, database): it owns its queues
/// (e.g. SIEVE's head/tail/hand); the per-entry links live in EntryState.
pub trait Policy: Send {
    /// A new entry in `slot`. The caller has stored its state first
    /// (`EntryState::new`, or a preserved one to keep OBJECT FREQ across a
    /// RENAME); the policy sets its private flags and links.
    fn on_insert<E: Entries>(&mut self, e: &mut E, slot: u32, clock: &Clock);
    /// A read of the entry (not called for CLIENT NO-TOUCH or OBJECT).
    fn on_access<E: Entries>(&mut self, e: &mut E, slot: u32, clock: &Clock);
    /// The value changed in place (a write to an existing key).
    fn on_update<E: Entries>(&mut self, e: &mut E, slot: u32, clock: &Clock) {
        // Redis counts a write lookup as an access too.
        self.on_access(e, slot, clock);
    }
    /// The entry is going away; called BEFORE the slot is freed.
    fn on_remove<E: Entries>(&mut self, _e: &mut E, _slot: u32) {}
    /// Best victim in this table: (score, slot), lower score = evict first,
    /// comparable across instances of the same policy (the caller samples
    /// several partitions and evicts the lowest). May move internal hands.
    /// `samples` = maxmemory-samples; `rand` = a random number source.
    fn candidate<E: Entries>(
        &mut self,
        e: &mut E,
        samples: usize,
        clock: &Clock,
        rand: &mut dyn FnMut() -> u64,
    ) -> Option<(u64, u32)>;
    /// The slot `candidate` will read first if its random source starts
    /// with `rand`, when the policy can tell without reading an entry: the
    /// caller may start loading it (a cache miss) while it does other work,
    /// then call `candidate` with that random source. None: no idea.
    fn first_look<E: Entries>(&self, _e: &E, _rand: u64) -> Option<u32> {
        None
    }
    /// Re-links every live slot (the policy was switched at run time by
    /// CONFIG SET): called with the table's live slots. Keeps last_access
    /// and freq, resets the policy-private flags and links.
    fn rebuild<E: Entries>(&mut self, e: &mut E, live: &mut dyn Iterator<Item = u32>, clock: &Clock);
}

/// Which policy: the typed setting, parsed and named in one place (config).
pub use crate::config::EvictionPolicy as PolicyKind;

/// noeviction: keeps the access metadata (OBJECT IDLETIME/FREQ) and never
/// proposes a victim.
pub struct NoEviction {
    coin: SplitMix,
}

impl Policy for NoEviction {
    fn on_insert<E: Entries>(&mut self, _e: &mut E, _slot: u32, _clock: &Clock) {}

    fn on_access<E: Entries>(&mut self, e: &mut E, slot: u32, clock: &Clock) {
        lfu::touch(e.state_mut(slot), clock, self.coin.next_u64());
    }

    fn candidate<E: Entries>(
        &mut self,
        _e: &mut E,
        _samples: usize,
        _clock: &Clock,
        _rand: &mut dyn FnMut() -> u64,
    ) -> Option<(u64, u32)> {
        None
    }

    fn rebuild<E: Entries>(&mut self, e: &mut E, live: &mut dyn Iterator<Item = u32>, _clock: &Clock) {
        for slot in live {
            let s = e.state_mut(slot);
            (s.flags, s.prev, s.next) = (0, NONE, NONE);
        }
    }
}

/// Static dispatch over the implementations, resolved once when configured
/// (never looked up by name per eviction).
pub enum AnyPolicy {
    NoEviction(NoEviction),
    Sampled(Sampled),
    Sieve(Sieve),
}

/// Seed of the per-instance coin for LFU increments when none is given.
const DEFAULT_SEED: u64 = 0x5EED_0F57_4A7A;

impl AnyPolicy {
    pub fn new(kind: PolicyKind) -> Self {
        Self::with_seed(kind, DEFAULT_SEED)
    }

    /// `seed` feeds the policy's own coin for LFU counter increments (the
    /// hooks take no random source); give each instance its own.
    pub fn with_seed(kind: PolicyKind, seed: u64) -> Self {
        let coin = SplitMix::new(seed);
        let sampled = |pool, rank| AnyPolicy::Sampled(Sampled::new(pool, rank, coin));
        match kind {
            PolicyKind::NoEviction => AnyPolicy::NoEviction(NoEviction { coin }),
            PolicyKind::AllKeysLru => sampled(Pool::AllKeys, Rank::Lru),
            PolicyKind::AllKeysLfu => sampled(Pool::AllKeys, Rank::Lfu),
            PolicyKind::AllKeysRandom => sampled(Pool::AllKeys, Rank::Random),
            PolicyKind::VolatileLru => sampled(Pool::Volatile, Rank::Lru),
            PolicyKind::VolatileLfu => sampled(Pool::Volatile, Rank::Lfu),
            PolicyKind::VolatileRandom => sampled(Pool::Volatile, Rank::Random),
            PolicyKind::VolatileTtl => sampled(Pool::Volatile, Rank::Ttl),
            PolicyKind::Sieve => AnyPolicy::Sieve(Sieve::new(coin)),
        }
    }

    pub fn kind(&self) -> PolicyKind {
        match self {
            AnyPolicy::NoEviction(_) => PolicyKind::NoEviction,
            AnyPolicy::Sampled(p) => p.kind(),
            AnyPolicy::Sieve(_) => PolicyKind::Sieve,
        }
    }
}

/// Forwards one hook to the variant.
macro_rules! dispatch {
    ($self:ident, $p:ident => $call:expr) => {
        match $self {
            AnyPolicy::NoEviction($p) => $call,
            AnyPolicy::Sampled($p) => $call,
            AnyPolicy::Sieve($p) => $call,
        }
    };
}

impl Policy for AnyPolicy {
    #[inline]
    fn on_insert<E: Entries>(&mut self, e: &mut E, slot: u32, clock: &Clock) {
        dispatch!(self, p => p.on_insert(e, slot, clock))
    }

    #[inline]
    fn on_access<E: Entries>(&mut self, e: &mut E, slot: u32, clock: &Clock) {
        dispatch!(self, p => p.on_access(e, slot, clock))
    }

    #[inline]
    fn on_update<E: Entries>(&mut self, e: &mut E, slot: u32, clock: &Clock) {
        dispatch!(self, p => p.on_update(e, slot, clock))
    }

    #[inline]
    fn on_remove<E: Entries>(&mut self, e: &mut E, slot: u32) {
        dispatch!(self, p => p.on_remove(e, slot))
    }

    #[inline]
    fn candidate<E: Entries>(
        &mut self,
        e: &mut E,
        samples: usize,
        clock: &Clock,
        rand: &mut dyn FnMut() -> u64,
    ) -> Option<(u64, u32)> {
        dispatch!(self, p => p.candidate(e, samples, clock, rand))
    }

    #[inline]
    fn first_look<E: Entries>(&self, e: &E, rand: u64) -> Option<u32> {
        dispatch!(self, p => p.first_look(e, rand))
    }

    fn rebuild<E: Entries>(&mut self, e: &mut E, live: &mut dyn Iterator<Item = u32>, clock: &Clock) {
        dispatch!(self, p => p.rebuild(e, live, clock))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim::SimTable;

    #[test]
    fn hits_hint_follows_the_lfu_counter_of_every_policy() {
        // Factor 0: each use steps the counter.
        let clock = Clock { lfu_log_factor: 0, ..Clock::at(0) };
        for k in PolicyKind::ALL {
            let mut p = AnyPolicy::new(k);
            let mut t = SimTable::default();
            let slot = t.insert(1, 10, 0, &mut p, &clock);
            assert_eq!(hits_hint(t.state(slot)), Hits::None, "{k}");
            p.on_access(&mut t, slot, &clock);
            assert_eq!(hits_hint(t.state(slot)), Hits::Few, "{k}");
            p.on_access(&mut t, slot, &clock);
            assert_eq!(hits_hint(t.state(slot)), Hits::Many, "{k}");
        }
    }

    #[test]
    fn entry_state_is_16_bytes() {
        assert_eq!(std::mem::size_of::<EntryState>(), 16);
    }

    #[test]
    fn entry_state_new_starts_at_now_with_lfu_init_and_no_links() {
        let s = EntryState::new(&Clock::at(42));
        assert_eq!(s, EntryState { last_access: 42, freq: 5, flags: 0, prev: NONE, next: NONE });
    }

    #[test]
    fn policy_names_round_trip_and_match_the_config_list() {
        let names: Vec<&str> = PolicyKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names, crate::config::POLICIES);
        for k in PolicyKind::ALL {
            assert_eq!(PolicyKind::parse(k.name()), Some(k));
            assert_eq!(PolicyKind::parse(&k.name().to_ascii_uppercase()), Some(k), "case-insensitive");
            assert_eq!(AnyPolicy::new(k).kind(), k);
        }
        assert_eq!(PolicyKind::parse("lru"), None);
        assert!(!PolicyKind::NoEviction.evicts() && PolicyKind::Sieve.evicts());
        let volatile: Vec<_> = PolicyKind::ALL.iter().filter(|k| k.is_volatile()).map(|k| k.name()).collect();
        assert_eq!(volatile, ["volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"]);
    }

    #[test]
    fn noeviction_keeps_access_metadata_but_never_proposes_a_victim() {
        let mut p = AnyPolicy::new(PolicyKind::NoEviction);
        let mut t = SimTable::default();
        let slot = t.insert(1, 10, 0, &mut p, &Clock::at(0));
        p.on_access(&mut t, slot, &Clock::at(7));
        assert_eq!(t.state(slot).last_access, 7);
        assert_eq!(p.candidate(&mut t, 5, &Clock::at(7), &mut || 3), None);
    }

    #[test]
    fn every_policy_updates_idle_time_and_frequency_on_access() {
        let clock = Clock { lfu_log_factor: 0, ..Clock::at(0) };
        for k in PolicyKind::ALL {
            let mut p = AnyPolicy::new(k);
            let mut t = SimTable::default();
            let slot = t.insert(1, 10, 0, &mut p, &clock);
            let later = Clock { now_secs: 30, ..clock };
            p.on_access(&mut t, slot, &later);
            p.on_update(&mut t, slot, &later);
            // Factor 0: every access counts.
            assert_eq!((t.state(slot).last_access, t.state(slot).freq), (30, LFU_INIT + 2), "{k}");
        }
    }

    #[test]
    fn switching_policy_at_run_time_relinks_every_live_entry() {
        let clock = Clock::at(0);
        let mut lru = AnyPolicy::new(PolicyKind::AllKeysLru);
        let mut t = SimTable::default();
        for id in 0..6 {
            t.insert(id, 1, 0, &mut lru, &Clock::at(id as u32));
        }
        let mut sieve = AnyPolicy::new(PolicyKind::Sieve);
        let mut live = t.live_slots();
        sieve.rebuild(&mut t, &mut live.drain(..), &clock);
        // Rebuilt oldest access first: SIEVE now evicts in access order.
        let mut victims = Vec::new();
        while let Some((_, slot)) = sieve.candidate(&mut t, 5, &clock, &mut || 0) {
            victims.push(t.remove(slot, &mut sieve));
        }
        assert_eq!(victims, [0, 1, 2, 3, 4, 5]);
    }
}
