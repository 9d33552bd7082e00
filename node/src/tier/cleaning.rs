//! What the cold tier's cleaner knows of each segment, and what it decides
//! from it: the append head a record goes to (by expiry, so that a
//! segment's records expire together) and the segment to clean next.
//!
//! - Per segment, for its current use: bytes appended (and those with a
//!   TTL, with their earliest and latest expiry), bytes dead (`forget`), and
//!   when it was last appended to. Atomics: `forget` runs on workers.
//! - Dead bytes are exact: a record is forgotten once, by the keyspace,
//!   when no key refers to it any more (deleted, overwritten, promoted,
//!   expired and removed), and the cleaner never recycles a segment some
//!   key still refers to (it moves or evicts those keys first, or frees a
//!   segment unread only when nothing in it is live). So no `forget` of a
//!   previous use reaches a segment's next one, and "nothing live" is safe
//!   to act on without reading.
//! - The victim maximises (dead + expired bytes) × age / live bytes; a
//!   segment with nothing live is freed without a read. Records expire
//!   from the keyspace's side (its expiry removes the keys and forgets
//!   their records), so placement by expiry makes whole segments die
//!   together and go unread.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Upper bounds of remaining TTL per expiry bucket (ms); past the last,
/// one more bucket.
const TTL_BUCKETS_MS: [u64; 4] = [60_000, 600_000, 3_600_000, 86_400_000];
/// Buckets, and so the most append heads: one per bucket and one for
/// values without a TTL.
pub const TTL_BUCKETS: usize = TTL_BUCKETS_MS.len() + 1;

/// One segment's current use.
struct SegmentUse {
    dead: AtomicU64,
    appended: AtomicU64,
    ttl_bytes: AtomicU64,
    min_expire: AtomicU64,
    max_expire: AtomicU64,
    last_append_ms: AtomicU64,
}

impl SegmentUse {
    fn new() -> SegmentUse {
        SegmentUse {
            dead: AtomicU64::new(0),
            appended: AtomicU64::new(0),
            ttl_bytes: AtomicU64::new(0),
            min_expire: AtomicU64::new(u64::MAX),
            max_expire: AtomicU64::new(0),
            last_append_ms: AtomicU64::new(0),
        }
    }
}

/// What cleaning a segment would give, for the victim choice and tests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Victim {
    pub segment: u32,
    /// Nothing in it can be some key's value: free it without reading.
    pub unread: bool,
    pub live: u64,
    pub dead: u64,
}

/// Per-segment accounting of the cold log, indexed by segment id.
pub struct Segments {
    uses: Box<[SegmentUse]>,
}

impl Segments {
    /// For segment ids below `count`.
    pub fn new(count: u32) -> Segments {
        Segments { uses: (0..count).map(|_| SegmentUse::new()).collect() }
    }

    /// A record of `len` bytes expiring at `expire_at` (0: never) was
    /// appended to `segment` at `now_ms`.
    pub fn appended(&self, segment: u32, len: u32, expire_at: u64, now_ms: u64) {
        let u = &self.uses[segment as usize];
        u.appended.fetch_add(u64::from(len), Relaxed);
        if expire_at != 0 {
            u.ttl_bytes.fetch_add(u64::from(len), Relaxed);
            u.min_expire.fetch_min(expire_at, Relaxed);
            u.max_expire.fetch_max(expire_at, Relaxed);
        }
        u.last_append_ms.fetch_max(now_ms, Relaxed);
    }

    /// The record of `len` bytes in `segment` died; false for an id out of
    /// range (nothing counted).
    pub fn forget(&self, segment: u32, len: u32) -> bool {
        let Some(u) = self.uses.get(segment as usize) else { return false };
        u.dead.fetch_add(u64::from(len), Relaxed);
        true
    }

    /// Ends the segment's current use (it was freed); its dead bytes. Only
    /// the cleaner calls it, for a segment no head appends to and before
    /// anything can take it from the free list (the cleaner's thread is
    /// the one that prepares spares).
    pub fn end_use(&self, segment: u32) -> u64 {
        let u = &self.uses[segment as usize];
        let dead = u.dead.swap(0, Relaxed);
        u.appended.store(0, Relaxed);
        u.ttl_bytes.store(0, Relaxed);
        u.min_expire.store(u64::MAX, Relaxed);
        u.max_expire.store(0, Relaxed);
        u.last_append_ms.store(0, Relaxed);
        dead
    }

    /// Dead bytes of the segment's current use.
    pub fn dead(&self, segment: u32) -> u64 {
        self.uses[segment as usize].dead.load(Relaxed)
    }

    /// Segments in use, least recently appended to first.
    pub fn in_use(&self) -> Vec<u32> {
        let mut used: Vec<(u64, u32)> = (self.uses.iter().enumerate())
            .filter(|(_, u)| u.appended.load(Relaxed) > 0)
            .map(|(id, u)| (u.last_append_ms.load(Relaxed), id as u32))
            .collect();
        used.sort_unstable();
        used.into_iter().map(|(_, id)| id).collect()
    }

    /// The segment worth cleaning most at `now_ms`, skipping `active` ones
    /// (heads append there) and unused ones: one freeable without a read
    /// if any, else the highest (dead + expired) × age / live, the oldest
    /// among equals (when nothing is reclaimable the oldest goes, its live
    /// records moved forward or evicted).
    pub fn pick(&self, active: &[u32], now_ms: u64) -> Option<Victim> {
        let mut best: Option<(f64, u64, Victim)> = None;
        for (id, u) in self.uses.iter().enumerate() {
            let id = id as u32;
            let appended = u.appended.load(Relaxed);
            if appended == 0 || active.contains(&id) {
                continue;
            }
            let counted = u.dead.load(Relaxed);
            let dead = counted.min(appended);
            let live = appended - dead;
            let ttl = u.ttl_bytes.load(Relaxed);
            let (min, max) = (u.min_expire.load(Relaxed), u.max_expire.load(Relaxed));
            // Exactly all: more would mean a record forgotten twice, and
            // then the count is not to be trusted without a read.
            if counted == appended {
                return Some(Victim { segment: id, unread: true, live, dead });
            }
            // Expired bytes among the live ones, supposing expiries spread
            // evenly over [min, max] and dead bytes spread like the rest.
            let expired_share = if ttl == 0 || now_ms <= min {
                0.0
            } else if now_ms >= max {
                1.0
            } else {
                (now_ms - min) as f64 / (max - min) as f64
            };
            let expired = live as f64 * (ttl as f64 / appended as f64) * expired_share;
            let age = now_ms.saturating_sub(u.last_append_ms.load(Relaxed)) + 1;
            let score = (dead as f64 + expired) * age as f64 / live as f64;
            if best.as_ref().is_none_or(|(s, a, _)| score > *s || (score == *s && age > *a)) {
                best = Some((score, age, Victim { segment: id, unread: false, live, dead }));
            }
        }
        best.map(|b| b.2)
    }
}

/// The append head for a record expiring at `expire_at` (0: never) at
/// `now_ms`, among `heads`: head 0 takes values without a TTL (and every
/// value when there is one head); the others share the TTL buckets in
/// order, nearest expiry first.
pub fn head_for(expire_at: u64, now_ms: u64, heads: usize) -> usize {
    if expire_at == 0 || heads <= 1 {
        return 0;
    }
    let left = expire_at.saturating_sub(now_ms);
    let bucket = TTL_BUCKETS_MS.iter().position(|&b| left < b).unwrap_or(TTL_BUCKETS_MS.len());
    1 + bucket * (heads - 1) / TTL_BUCKETS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_with_nothing_live_goes_unread_and_its_next_use_starts_clean() {
        let s = Segments::new(4);
        s.appended(1, 100, 0, 10);
        s.appended(2, 100, 0, 20);
        assert!(s.forget(2, 100));
        assert!(!s.forget(77, 1), "an id out of range is ignored");
        let v = s.pick(&[], 30).unwrap();
        assert_eq!((v.segment, v.unread, v.live, v.dead), (2, true, 0, 100));
        assert_eq!(s.pick(&[2], 30).map(|v| (v.segment, v.unread)), Some((1, false)), "active segments are skipped");
        assert_eq!(s.end_use(2), 100);
        assert_eq!(s.dead(2), 0);
        assert!(!s.in_use().contains(&2));
        s.appended(2, 50, 0, 40);
        assert_eq!(s.in_use(), [1, 2], "least recently appended to first");
        // Forgotten beyond what was written: read before recycling.
        s.appended(3, 10, 0, 5);
        s.forget(3, 10);
        s.forget(3, 10);
        let v = s.pick(&[1, 2], 50).unwrap();
        assert_eq!((v.segment, v.unread), (3, false));
    }

    #[test]
    fn heads_by_expiry() {
        assert_eq!(head_for(0, 1000, 6), 0);
        assert_eq!(head_for(5000, 1000, 1), 0);
        assert_eq!(head_for(1000 + 59_000, 1000, 6), 1);
        assert_eq!(head_for(1000 + 120_000, 1000, 6), 2);
        assert_eq!(head_for(1000 + 90_000_000, 1000, 6), 5);
        // Fewer heads: buckets share them, all TTL heads in 1..heads.
        for ttl in [1u64, 70_000, 700_000, 4_000_000, 100_000_000] {
            let h = head_for(1000 + ttl, 1000, 3);
            assert!((1..3).contains(&h), "{ttl}: {h}");
        }
        assert_eq!(head_for(1000 + 1, 1000, 2), 1);
    }
}
