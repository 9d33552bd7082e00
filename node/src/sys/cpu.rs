//! CPU affinity.

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
