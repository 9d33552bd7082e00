//! Redis's LFU counter math and the access bookkeeping every policy shares.
//!
//! The counter is logarithmic: it starts at `LFU_INIT`, each access raises it
//! with probability 1/((counter - LFU_INIT) * factor + 1), and it loses one
//! per `lfu-decay-time` minutes of idleness. Random numbers come from the
//! caller so results are reproducible.

use super::{Clock, EntryState};

/// The counter of a new key (so it is not evicted before it can prove itself).
pub const LFU_INIT: u8 = 5;
/// Redis's defaults for `lfu-log-factor` and `lfu-decay-time`.
pub const LFU_DEFAULT_LOG_FACTOR: u32 = 10;
pub const LFU_DEFAULT_DECAY_MINUTES: u32 = 1;

/// Counts one access (Redis's LFULogIncr): the higher the counter and
/// `factor`, the less likely it grows. `r` is a uniform random number.
pub fn lfu_log_incr(counter: u8, factor: u32, r: u64) -> u8 {
    if counter == 255 {
        return 255;
    }
    let r = (r % 1_000_000) as f64 / 1_000_000.0;
    let base = (counter as f64 - LFU_INIT as f64).max(0.0);
    let p = 1.0 / (base * factor as f64 + 1.0);
    if r < p { counter + 1 } else { counter }
}

/// The counter after `decay_minutes`-long idle periods since `last_access`
/// (seconds), one decrement each (Redis's LFUDecrAndReturn); 0 = no decay.
pub fn lfu_decayed(counter: u8, last_access: u32, now_secs: u32, decay_minutes: u32) -> u8 {
    if decay_minutes == 0 {
        return counter;
    }
    let periods = now_secs.saturating_sub(last_access) / 60 / decay_minutes;
    counter.saturating_sub(periods.min(255) as u8)
}

/// Records an access in Redis's order: decay for the idle time, count this
/// access, then stamp the time (the decay needs the old stamp).
#[inline]
pub fn touch(s: &mut EntryState, clock: &Clock, r: u64) {
    let counter = lfu_decayed(s.freq, s.last_access, clock.now_secs, clock.lfu_decay_minutes);
    s.freq = lfu_log_incr(counter, clock.lfu_log_factor, r);
    s.last_access = clock.now_secs;
}

/// A small seeded generator (SplitMix64) for the coin flips of
/// `lfu_log_incr`: the access hooks take no random source, so each policy
/// instance carries one.
#[derive(Clone, Copy, Debug)]
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lfu_counter_decays_one_per_idle_period_and_never_below_zero() {
        assert_eq!(lfu_decayed(10, 0, 59, 1), 10, "under a minute idle");
        assert_eq!(lfu_decayed(10, 0, 120, 1), 8);
        assert_eq!(lfu_decayed(10, 0, 600, 5), 8, "two 5-minute periods");
        assert_eq!(lfu_decayed(10, 0, 100_000, 1), 0);
        assert_eq!(lfu_decayed(10, 0, 100_000, 0), 10, "decay time 0: no decay");
        assert_eq!(lfu_decayed(10, 500, 100, 1), 10, "clock behind last access");
    }

    #[test]
    fn lfu_log_factor_sets_how_fast_the_counter_grows() {
        let mut coin = SplitMix::new(1);
        // Factor 0: every access counts.
        assert!((0..50).all(|_| lfu_log_incr(40, 0, coin.next_u64()) == 41));
        // A huge factor: past the initial value, practically never.
        assert!((0..1000).filter(|_| lfu_log_incr(40, u32::MAX, coin.next_u64()) == 41).count() < 3);
        assert_eq!(lfu_log_incr(255, 0, 0), 255, "saturates");
        // At or below LFU_INIT the probability is 1 whatever the factor.
        assert_eq!(lfu_log_incr(LFU_INIT, 10, 999_999), LFU_INIT + 1);
        // Counter 6, factor 10: p = 1/11; r is taken modulo 10^6.
        assert_eq!(lfu_log_incr(6, 10, 90_000), 7);
        assert_eq!(lfu_log_incr(6, 10, 91_000), 6);
        assert_eq!(lfu_log_incr(6, 10, 1_000_000 + 90_000), 7);
    }

    #[test]
    fn touch_decays_before_counting_and_then_stamps_the_time() {
        let mut s = EntryState { last_access: 0, freq: 10, flags: 0, prev: 0, next: 0 };
        let clock = Clock { now_secs: 180, lfu_log_factor: 0, lfu_decay_minutes: 1 };
        touch(&mut s, &clock, 0);
        // Three idle minutes: 10 -> 7, then this access: 8.
        assert_eq!((s.freq, s.last_access), (8, 180));
    }

    #[test]
    fn splitmix_is_seeded_and_spreads() {
        let (mut a, mut b) = (SplitMix::new(7), SplitMix::new(7));
        let xs: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        assert_eq!(xs, (0..4).map(|_| b.next_u64()).collect::<Vec<_>>());
        assert_ne!(xs[0], SplitMix::new(8).next_u64());
        assert!(xs.windows(2).all(|w| w[0] != w[1]));
    }
}
