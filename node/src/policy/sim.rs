//! Trace-driven cache simulator: the policies of this module on a table of
//! object ids, with no keyspace and no network.
//!
//! Each request looks its object up; a hit calls `on_access`, a miss makes
//! room (evicting candidates until the object fits, as the store does before
//! a write) and inserts it. An object that can never fit, or for which no
//! room can be made (noeviction, volatile-* without TTLs), is not cached: in
//! Redis that write would fail with OOM.

use super::lfu::SplitMix;
use super::trace::{IdMap, Request};
use super::{AnyPolicy, Clock, Entries, EntryState, NONE, Policy, PolicyKind};
use std::collections::hash_map::Entry as MapEntry;
use std::collections::{BTreeSet, BinaryHeap};

struct Slot {
    id: u64,
    state: EntryState,
    size: u32,
    expire_at: u64,
    /// Index in `SimTable::live`, NONE while the slot is free.
    live_pos: u32,
}

/// A table of objects, as the store's per-database table looks to a policy.
#[derive(Default)]
pub struct SimTable {
    index: IdMap<u32>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Live slots, dense, for O(1) random sampling.
    live: Vec<u32>,
    /// (expire_at, slot) of entries with a TTL.
    expiring: BTreeSet<(u64, u32)>,
    bytes: u64,
}

impl SimTable {
    /// The slot holding object `id`.
    pub fn get(&self, id: u64) -> Option<u32> {
        self.index.get(&id).copied()
    }

    /// The object in `slot`.
    pub fn id(&self, slot: u32) -> u64 {
        self.slots[slot as usize].id
    }

    /// Sum of the sizes of the live entries.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn live_slots(&self) -> Vec<u32> {
        self.live.clone()
    }

    /// Inserts an absent object (replacing it if present) and tells the policy.
    pub fn insert<P: Policy>(&mut self, id: u64, size: u32, expire_at: u64, policy: &mut P, clock: &Clock) -> u32 {
        if let Some(old) = self.get(id) {
            self.remove(old, policy);
        }
        let slot = Slot { id, state: EntryState::new(clock), size, expire_at, live_pos: self.live.len() as u32 };
        let slot_id = match self.free.pop() {
            Some(free) => {
                self.slots[free as usize] = slot;
                free
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        self.live.push(slot_id);
        self.index.insert(id, slot_id);
        if expire_at != 0 {
            self.expiring.insert((expire_at, slot_id));
        }
        self.bytes += size as u64;
        policy.on_insert(self, slot_id, clock);
        slot_id
    }

    /// Removes the entry in `slot` (the policy is told first); returns its id.
    pub fn remove<P: Policy>(&mut self, slot: u32, policy: &mut P) -> u64 {
        policy.on_remove(self, slot);
        let s = &mut self.slots[slot as usize];
        let (id, size, expire_at, pos) = (s.id, s.size, s.expire_at, s.live_pos as usize);
        s.live_pos = NONE;
        self.live.swap_remove(pos);
        if let Some(&moved) = self.live.get(pos) {
            self.slots[moved as usize].live_pos = pos as u32;
        }
        if expire_at != 0 {
            self.expiring.remove(&(expire_at, slot));
        }
        self.index.remove(&id);
        self.free.push(slot);
        self.bytes -= size as u64;
        id
    }

    /// A new size for the object in `slot` (a write that changed the value).
    pub fn resize(&mut self, slot: u32, size: u32) {
        let s = &mut self.slots[slot as usize];
        self.bytes = self.bytes - s.size as u64 + size as u64;
        s.size = size;
    }
}

impl Entries for SimTable {
    #[inline]
    fn state(&self, slot: u32) -> &EntryState {
        &self.slots[slot as usize].state
    }

    #[inline]
    fn state_mut(&mut self, slot: u32) -> &mut EntryState {
        &mut self.slots[slot as usize].state
    }

    fn len(&self) -> usize {
        self.live.len()
    }

    #[inline]
    fn random_slot(&self, rand: u64) -> Option<u32> {
        if self.live.is_empty() {
            return None;
        }
        Some(self.live[(rand % self.live.len() as u64) as usize])
    }

    fn probe_slot(&self, rand: u64) -> Option<u32> {
        self.random_slot(rand)
    }

    fn expire_at(&self, slot: u32) -> u64 {
        self.slots[slot as usize].expire_at
    }

    fn soonest_expiring(&self) -> Option<u32> {
        self.expiring.first().map(|&(_, slot)| slot)
    }

    fn random_expiring(&self, rand: u64) -> Option<u32> {
        super::random_among_soonest(&self.expiring, rand)
    }

    fn expiring_len(&self) -> usize {
        self.expiring.len()
    }

    fn size(&self, slot: u32) -> usize {
        self.slots[slot as usize].size as usize
    }
}

/// What the capacity counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    Objects,
    Bytes,
}

/// How much the cache holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    pub limit: u64,
    pub by: By,
}

impl Capacity {
    pub fn objects(limit: u64) -> Self {
        Capacity { limit, by: By::Objects }
    }

    pub fn bytes(limit: u64) -> Self {
        Capacity { limit, by: By::Bytes }
    }

    /// What one object of `size` bytes takes.
    #[inline]
    fn cost(self, size: u32) -> u64 {
        match self.by {
            By::Objects => 1,
            By::Bytes => size as u64,
        }
    }

    #[inline]
    fn used(self, t: &SimTable) -> u64 {
        match self.by {
            By::Objects => t.len() as u64,
            By::Bytes => t.bytes(),
        }
    }
}

/// Knobs of a simulation run.
#[derive(Clone, Copy, Debug)]
pub struct SimOptions {
    /// maxmemory-samples.
    pub samples: usize,
    /// The clock advances one second per this many requests (traces carry
    /// no usable wall time; LRU needs a clock with some resolution).
    pub requests_per_sec: u64,
    pub lfu_log_factor: u32,
    pub lfu_decay_minutes: u32,
    /// Seeds the policy's coin and the sampling.
    pub seed: u64,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            samples: 5,
            requests_per_sec: 1000,
            lfu_log_factor: super::LFU_DEFAULT_LOG_FACTOR,
            lfu_decay_minutes: super::LFU_DEFAULT_DECAY_MINUTES,
            seed: 1,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    pub requests: u64,
    pub hits: u64,
    pub hit_ratio: f64,
    pub evictions: u64,
}

impl Stats {
    fn finish(mut self) -> Self {
        self.hit_ratio = if self.requests == 0 { 0.0 } else { self.hits as f64 / self.requests as f64 };
        self
    }
}

/// Runs `kind` over `trace` with the default options (5 samples, one clock
/// second per 1000 requests).
pub fn simulate(kind: PolicyKind, trace: impl IntoIterator<Item = Request>, capacity: Capacity) -> Stats {
    simulate_with(kind, trace, capacity, &SimOptions::default())
}

pub fn simulate_with(
    kind: PolicyKind,
    trace: impl IntoIterator<Item = Request>,
    capacity: Capacity,
    opts: &SimOptions,
) -> Stats {
    let mut policy = AnyPolicy::with_seed(kind, opts.seed);
    let mut rng = SplitMix::new(opts.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xA5A5);
    let mut table = SimTable::default();
    let mut stats = Stats::default();
    let per_sec = opts.requests_per_sec.max(1);
    for req in trace {
        let clock = Clock {
            now_secs: (stats.requests / per_sec) as u32,
            lfu_log_factor: opts.lfu_log_factor,
            lfu_decay_minutes: opts.lfu_decay_minutes,
        };
        stats.requests += 1;
        if let Some(slot) = table.get(req.id) {
            stats.hits += 1;
            policy.on_access(&mut table, slot, &clock);
            if capacity.by == By::Bytes && table.size(slot) != req.size as usize {
                // The object changed size: a write in place.
                table.resize(slot, req.size);
                policy.on_update(&mut table, slot, &clock);
                stats.evictions += make_room(&mut table, &mut policy, capacity, 0, opts.samples, &clock, &mut rng);
            }
            continue;
        }
        let cost = capacity.cost(req.size);
        if cost > capacity.limit {
            continue;
        }
        stats.evictions += make_room(&mut table, &mut policy, capacity, cost, opts.samples, &clock, &mut rng);
        if capacity.used(&table) + cost <= capacity.limit {
            table.insert(req.id, req.size, 0, &mut policy, &clock);
        }
    }
    stats.finish()
}

/// Evicts until `cost` more fits or the policy has no candidate; returns the
/// number evicted.
fn make_room(
    table: &mut SimTable,
    policy: &mut AnyPolicy,
    capacity: Capacity,
    cost: u64,
    samples: usize,
    clock: &Clock,
    rng: &mut SplitMix,
) -> u64 {
    let mut evicted = 0;
    while capacity.used(table) + cost > capacity.limit {
        let Some((_, slot)) = policy.candidate(table, samples, clock, &mut || rng.next_u64()) else { break };
        table.remove(slot, policy);
        evicted += 1;
    }
    evicted
}

/// "Never requested again" in `next_uses`.
pub const NEVER: u64 = u64::MAX;

/// For each request, the index of the next request for the same object
/// (NEVER if none), by one backward pass.
pub fn next_uses(trace: &[Request]) -> Vec<u64> {
    let mut next = vec![NEVER; trace.len()];
    let mut seen: IdMap<u64> = IdMap::default();
    for (i, req) in trace.iter().enumerate().rev() {
        if let Some(later) = seen.insert(req.id, i as u64) {
            next[i] = later;
        }
    }
    next
}

/// Bélády's clairvoyant policy as the reference: evict the object whose next
/// use is farthest, and do not cache an object never used again (optimal by
/// object count; with sizes it is the usual reference, not the exact optimum).
/// `next` comes from `next_uses`.
pub fn belady(trace: &[Request], next: &[u64], capacity: Capacity) -> Stats {
    // id -> (next use, size) of cached objects; the heap holds (next use, id)
    // and may hold stale pairs, skipped when popped.
    let mut cached: IdMap<(u64, u32)> = IdMap::default();
    let mut heap: BinaryHeap<(u64, u64)> = BinaryHeap::new();
    let mut used = 0u64;
    let mut stats = Stats::default();
    for (req, &next_use) in trace.iter().zip(next) {
        stats.requests += 1;
        let cost = capacity.cost(req.size);
        match cached.entry(req.id) {
            MapEntry::Occupied(mut o) => {
                stats.hits += 1;
                let (_, size) = *o.get();
                if next_use == NEVER {
                    // Its last use: drop it now, it only takes room.
                    o.remove();
                    used -= capacity.cost(size);
                    continue;
                }
                o.insert((next_use, size));
                heap.push((next_use, req.id));
                continue;
            }
            MapEntry::Vacant(v) => {
                if next_use == NEVER || cost > capacity.limit {
                    continue;
                }
                v.insert((next_use, req.size));
                heap.push((next_use, req.id));
                used += cost;
            }
        }
        while used > capacity.limit {
            let (when, id) = heap.pop().expect("cached objects are in the heap");
            if cached.get(&id).is_some_and(|&(n, _)| n == when) {
                let (_, size) = cached.remove(&id).expect("just checked");
                used -= capacity.cost(size);
                stats.evictions += 1;
            }
        }
        if heap.len() > 2 * cached.len() + 1024 {
            heap = cached.iter().map(|(&id, &(n, _))| (n, id)).collect();
        }
    }
    stats.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: u64) -> Request {
        Request { id, size: 1 }
    }

    fn trace(s: &str) -> Vec<Request> {
        s.bytes().map(|b| req(b as u64)).collect()
    }

    /// Zipf(alpha) over `keys` ranks by inverse CDF, seeded.
    fn zipf_trace(keys: usize, requests: usize, alpha: f64, seed: u64) -> Vec<Request> {
        let mut cdf = Vec::with_capacity(keys);
        let mut total = 0.0;
        for rank in 1..=keys {
            total += 1.0 / (rank as f64).powf(alpha);
            cdf.push(total);
        }
        let mut rng = SplitMix::new(seed);
        (0..requests)
            .map(|_| {
                let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
                // Spread ranks over the id space so popularity is not the id order.
                let rank = cdf.partition_point(|&c| c < u).min(keys - 1) as u64;
                req(rank.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            })
            .collect()
    }

    #[test]
    fn sieve_gives_the_exact_hit_count_on_a_hand_made_trace() {
        // Capacity 3. SIEVE: d evicts b (a is spared, its bit cleared), b
        // evicts c, e evicts d, d evicts b; every a hits: 3 hits, 4 evictions.
        // FIFO would evict a at d and score 4 hits, LRU 3.
        let stats = simulate(PolicyKind::Sieve, trace("abcadbaeda"), Capacity::objects(3));
        assert_eq!((stats.requests, stats.hits, stats.evictions), (10, 3, 4));
        assert!((stats.hit_ratio - 0.3).abs() < 1e-12);
        // Capacity 2: evicting b (the head) leaves the hand past the head, so
        // the next search wraps to the tail (a, its bit cleared): b a c b go.
        let stats = simulate(PolicyKind::Sieve, trace("abacbaca"), Capacity::objects(2));
        assert_eq!((stats.hits, stats.evictions), (2, 4));
    }

    /// SIEVE written the plain way (a Vec from oldest to newest and a hand
    /// index), to check the linked version against.
    fn reference_sieve_hits(trace: &[Request], capacity: usize) -> u64 {
        let mut queue: Vec<(u64, bool)> = Vec::new();
        let mut hand: Option<usize> = None;
        let mut hits = 0;
        for req in trace {
            if let Some(entry) = queue.iter_mut().find(|(id, _)| *id == req.id) {
                entry.1 = true;
                hits += 1;
                continue;
            }
            if queue.len() == capacity {
                let mut h = hand.unwrap_or(0);
                while queue[h].1 {
                    queue[h].1 = false;
                    h = (h + 1) % queue.len();
                }
                queue.remove(h);
                // The victim's newer neighbour slid into its place.
                hand = (h < queue.len()).then_some(h);
            }
            queue.push((req.id, false));
        }
        hits
    }

    #[test]
    fn sieve_matches_a_plain_reference_implementation() {
        let t = zipf_trace(500, 20_000, 0.8, 7);
        for capacity in [1, 2, 7, 50, 200] {
            let got = simulate(PolicyKind::Sieve, t.iter().copied(), Capacity::objects(capacity)).hits;
            assert_eq!(got, reference_sieve_hits(&t, capacity as usize), "capacity {capacity}");
        }
    }

    #[test]
    fn table_sampling_sees_every_live_entry_and_tracks_bytes() {
        let mut p = AnyPolicy::new(PolicyKind::AllKeysRandom);
        let mut t = SimTable::default();
        let clock = Clock::at(0);
        let slots: Vec<u32> = (0..5).map(|id| t.insert(id, 10 + id as u32, 0, &mut p, &clock)).collect();
        t.remove(slots[1], &mut p);
        t.remove(slots[3], &mut p);
        assert_eq!((t.len(), t.bytes()), (3, 10 + 12 + 14));
        let mut drawn: Vec<u64> = (0..64).filter_map(|r| t.random_slot(r)).map(|s| t.id(s)).collect();
        drawn.sort_unstable();
        drawn.dedup();
        assert_eq!(drawn, [0, 2, 4]);
        // Freed slots are reused.
        let again = t.insert(7, 1, 0, &mut p, &clock);
        assert!(again == slots[1] || again == slots[3]);
        assert_eq!(t.get(7), Some(again));
        assert_eq!(t.get(1), None);
    }

    #[test]
    fn noeviction_fills_the_cache_and_then_caches_nothing_new() {
        let stats = simulate(PolicyKind::NoEviction, trace("abcabcdd"), Capacity::objects(2));
        // a, b cached; c, d never: hits on a and b only.
        assert_eq!((stats.hits, stats.evictions), (2, 0));
        let stats = simulate(PolicyKind::VolatileLru, trace("abcabcdd"), Capacity::objects(2));
        assert_eq!((stats.hits, stats.evictions), (2, 0), "no TTLs: nothing is volatile");
    }

    #[test]
    fn bytes_capacity_counts_sizes_and_skips_objects_that_never_fit() {
        let t = vec![
            Request { id: 1, size: 60 },
            Request { id: 2, size: 60 },
            Request { id: 3, size: 500 },
            Request { id: 2, size: 60 },
            Request { id: 1, size: 60 },
        ];
        // 100 bytes: 2 evicts 1, 3 never fits, 2 hits, 1 misses.
        let stats = simulate(PolicyKind::AllKeysLru, t, Capacity::bytes(100));
        assert_eq!((stats.hits, stats.evictions), (1, 2));
    }

    #[test]
    fn belady_is_optimal_on_a_hand_made_trace() {
        let t = trace("abcadbaeda");
        let stats = belady(&t, &next_uses(&t), Capacity::objects(3));
        // c and e are never used again and are not cached, so every repeat hits.
        assert_eq!(stats.hits, 5);
        assert_eq!(next_uses(&trace("abab")), [2, 3, NEVER, NEVER]);
    }

    #[test]
    fn zipf_ranks_policies_as_expected() {
        let t = zipf_trace(10_000, 200_000, 1.0, 42);
        let cap = Capacity::objects(1_000);
        let ratio = |kind| simulate(kind, t.iter().copied(), cap).hit_ratio;
        let (lru, lfu, random, sieve) = (
            ratio(PolicyKind::AllKeysLru),
            ratio(PolicyKind::AllKeysLfu),
            ratio(PolicyKind::AllKeysRandom),
            ratio(PolicyKind::Sieve),
        );
        let opt = belady(&t, &next_uses(&t), cap).hit_ratio;
        let got = format!("lru {lru:.4} lfu {lfu:.4} random {random:.4} sieve {sieve:.4} opt {opt:.4}");
        // Seed 42 gives lru 0.669, lfu 0.714, random 0.632, sieve 0.735, opt 0.814.
        assert!(sieve > random + 0.05, "{got}");
        assert!(lfu > random + 0.05, "{got}");
        assert!(lru > random + 0.02, "{got}");
        assert!([lru, lfu, random, sieve].iter().all(|&r| r < opt), "{got}");
    }
}
