//! CPU affinity, and cache prefetch hints.

/// Pins the calling thread to one CPU; false when the kernel refuses (the
/// CPU is outside the cgroup's set, say).
pub fn pin_current_thread(cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes a bit inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// CPUs this process may run on (respects cgroup cpusets / taskset).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect();
            if !cpus.is_empty() {
                return cpus;
            }
        }
    }
    (0..std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).collect()
}

/// Asks the CPU to start loading the cache line that holds `p` into every
/// cache level, and returns at once: the load overlaps with whatever the
/// caller does next. A hint: it never faults, whatever the address, and
/// does nothing on other architectures.
#[inline(always)]
pub fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 reads nothing architecturally and never faults,
    // even for an address that is not mapped.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// `prefetch` for every cache line `value` spans.
#[inline(always)]
pub fn prefetch_value<T>(value: &T) {
    const LINE: usize = 64;
    let p = value as *const T as *const u8;
    let size = std::mem::size_of::<T>();
    let mut off = 0;
    while off < size {
        prefetch(p.wrapping_add(off));
        off += LINE;
    }
    // The last line, when `value` does not start on a line boundary.
    if size > 0 && (p as usize + size - 1) / LINE != (p as usize + off - LINE) / LINE {
        prefetch(p.wrapping_add(size - 1));
    }
}
