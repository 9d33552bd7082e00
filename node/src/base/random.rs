//! Cheap randomness for sampling decisions (eviction, random keys): not
//! for anything that must be unpredictable.

/// A fast, good-enough mixing function for sampling decisions.
#[inline]
pub fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A per-thread random number source (xorshift seeded from the clock).
pub fn fast_rand() -> u64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new(
            splitmix64(std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1) ^ (&STATE as *const _ as u64)));
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        x
    })
}

/// A made-up node id: 40 lowercase hex characters, as Redis's.
pub fn hex_id() -> String {
    (0..5).map(|_| format!("{:08x}", fast_rand() as u32)).collect()
}
