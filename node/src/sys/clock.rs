//! Clocks, read straight from the kernel (vDSO): integer math on the result
//! is cheaper than `SystemTime`/`Instant` arithmetic, which matters at a few
//! clock reads per request.

/// Reads a clock as (seconds, nanoseconds).
#[inline]
fn read_clock(id: libc::clockid_t) -> (i64, i64) {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes into it.
    unsafe { libc::clock_gettime(id, &mut ts) };
    (ts.tv_sec, ts.tv_nsec)
}

/// Current unix time in milliseconds (0 before 1970).
#[inline]
pub fn now_ms() -> u64 {
    let (secs, nanos) = read_clock(libc::CLOCK_REALTIME);
    if secs < 0 { 0 } else { secs as u64 * 1000 + nanos as u64 / 1_000_000 }
}

/// Current unix time in whole seconds (SLOWLOG, LATENCY, LASTSAVE).
pub fn unix_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Current unix time in microseconds (TIME, INFO's server_time_usec).
pub fn unix_micros() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros())
}

/// Monotonic time in nanoseconds (the clock `Instant` uses), for latencies.
#[inline]
pub fn mono_ns() -> u64 {
    let (secs, nanos) = read_clock(libc::CLOCK_MONOTONIC);
    secs as u64 * 1_000_000_000 + nanos as u64
}

/// CPU time the calling thread has used, in nanoseconds (worker load).
pub fn thread_cpu_ns() -> u64 {
    let (secs, nanos) = read_clock(libc::CLOCK_THREAD_CPUTIME_ID);
    secs as u64 * 1_000_000_000 + nanos as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

    #[test]
    fn clocks_match_std() {
        let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
        let ours = now_ms();
        let after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
        assert!(before <= ours && ours <= after, "{before} <= {ours} <= {after}");

        let start = Instant::now();
        let a = mono_ns();
        std::thread::sleep(Duration::from_millis(20));
        let b = mono_ns();
        let elapsed = start.elapsed().as_nanos() as u64;
        assert!(b - a >= 20_000_000, "slept 20 ms, measured {} ns", b - a);
        assert!(b - a <= elapsed, "measured {} ns inside {elapsed} ns", b - a);
    }

    #[test]
    fn thread_cpu_time_advances_with_work() {
        let before = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu_ns() > before);
    }
}
