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

/// The clock commands are timed with (one reading per command): the CPU's
/// time-stamp counter scaled to nanoseconds once
/// [`calibrate_command_clock`] has found the kernel keeping time with it,
/// [`mono_ns`] until then or without it. Its readings stay within the
/// calibration's error of `mono_ns` and are meant for differences only.
#[inline]
pub fn command_ns() -> u64 {
    #[cfg(target_arch = "x86_64")]
    if let Some(tsc) = TSC.get() {
        return tsc.now_ns();
    }
    mono_ns()
}

/// The time-stamp counter's scale, fixed at calibration.
#[cfg(target_arch = "x86_64")]
struct Tsc {
    base_ticks: u64,
    base_ns: u64,
    /// Nanoseconds per tick, as a 32.32 fixed-point number.
    ns_per_tick_q32: u64,
}

#[cfg(target_arch = "x86_64")]
static TSC: std::sync::OnceLock<Tsc> = std::sync::OnceLock::new();

#[cfg(target_arch = "x86_64")]
impl Tsc {
    #[inline]
    fn now_ns(&self) -> u64 {
        let ticks = read_tsc().saturating_sub(self.base_ticks);
        self.base_ns + ((ticks as u128 * self.ns_per_tick_q32 as u128) >> 32) as u64
    }
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn read_tsc() -> u64 {
    // SAFETY: RDTSC reads a counter and has no other effect; every x86_64
    // CPU has it, and a kernel that keeps time with it lets user space read it.
    unsafe { std::arch::x86_64::_rdtsc() }
}

/// Switches [`command_ns`] to the time-stamp counter when the kernel's own
/// clock source is `tsc` (which the kernel uses only when the counter is
/// invariant and in step across CPUs), measuring its rate against
/// CLOCK_MONOTONIC over `span`. Call once at start, before any command is
/// timed. Why: a counter read costs about half of a vDSO clock_gettime on
/// a virtual machine, and commands are timed one by one. True when the
/// counter is in use.
pub fn calibrate_command_clock(span: std::time::Duration) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let source = std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource");
        if source.map(|s| s.trim() != "tsc").unwrap_or(true) {
            return false;
        }
        let (ns0, ticks0) = (mono_ns(), read_tsc());
        std::thread::sleep(span);
        let (ns1, ticks1) = (mono_ns(), read_tsc());
        let (ns, ticks) = (ns1.saturating_sub(ns0), ticks1.saturating_sub(ticks0));
        // Counters from 100 MHz to 10 GHz; anything else is a broken reading.
        if ticks == 0 || ticks < ns / 10 || ticks > ns * 10 {
            return false;
        }
        let ns_per_tick_q32 = ((ns as u128) << 32) / ticks as u128;
        // A second calibration keeps the first scale: readings taken with it
        // must stay comparable.
        let _ = TSC.set(Tsc { base_ticks: ticks1, base_ns: ns1, ns_per_tick_q32: ns_per_tick_q32 as u64 });
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = span;
        false
    }
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
    fn the_command_clock_keeps_pace_with_the_monotonic_clock() {
        let calibrated = calibrate_command_clock(Duration::from_millis(20));
        let on_tsc = std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .is_ok_and(|s| s.trim() == "tsc");
        assert_eq!(calibrated, on_tsc && cfg!(target_arch = "x86_64"));
        let (m0, c0) = (mono_ns(), command_ns());
        std::thread::sleep(Duration::from_millis(100));
        let (m1, c1) = (mono_ns(), command_ns());
        let (mono, cmd) = ((m1 - m0) as f64, c1.saturating_sub(c0) as f64);
        assert!((cmd / mono - 1.0).abs() < 0.01, "100 ms: monotonic {mono} ns, command clock {cmd} ns");
        // Near the monotonic clock, not just at its pace.
        assert!(c1.abs_diff(m1) < 5_000_000, "command clock {c1} vs monotonic {m1}");
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
