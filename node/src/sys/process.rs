//! Facts about the process and the machine (INFO, MEMORY).

pub fn uname() -> String {
    // SAFETY: uname fills a zeroed struct with NUL-terminated strings.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return std::env::consts::OS.into();
        }
        let s = |f: &[libc::c_char]| std::ffi::CStr::from_ptr(f.as_ptr()).to_string_lossy().into_owned();
        format!("{} {} {}", s(&u.sysname), s(&u.release), s(&u.machine))
    }
}

/// (system, user) CPU seconds.
pub fn rusage(children: bool) -> (f64, f64) {
    let who = if children { libc::RUSAGE_CHILDREN } else { libc::RUSAGE_SELF };
    // SAFETY: getrusage fills a zeroed struct.
    unsafe {
        let mut r: libc::rusage = std::mem::zeroed();
        if libc::getrusage(who, &mut r) != 0 {
            return (0.0, 0.0);
        }
        let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        (secs(r.ru_stime), secs(r.ru_utime))
    }
}

/// Resident set size of the process, from /proc.
pub fn rss_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(0) as u64;
    pages * page
}

/// The soft and hard limits on open files (RLIMIT_NOFILE); `u64::MAX` is unlimited.
pub fn open_files_limit() -> std::io::Result<(u64, u64)> {
    // SAFETY: getrlimit fills a zeroed struct.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok((r.rlim_cur as u64, r.rlim_max as u64))
    }
}

/// Sets the limits on open files. Raising `hard` needs privilege
/// (CAP_SYS_RESOURCE); any process may move `soft` up to `hard`.
pub fn set_open_files_limit(soft: u64, hard: u64) -> std::io::Result<()> {
    let r = libc::rlimit { rlim_cur: soft as libc::rlim_t, rlim_max: hard as libc::rlim_t };
    // SAFETY: setrlimit reads a fully initialised struct.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The kernel's cap on a listen backlog (`net.core.somaxconn`), if readable.
pub fn somaxconn() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn").ok()?.trim().parse().ok()
}
