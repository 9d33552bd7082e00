//! The memory allocator: jemalloc, as in Redis, for three reasons:
//! its statistics are exact and cheap (`used_memory` is what the process
//! really holds, so `maxmemory` is a RAM budget), its size classes keep
//! fragmentation low for millions of small objects, and it hands freed
//! pages back to the OS after a decay time (`DIRTY_DECAY_MS`).

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read before `main`: one arena for every thread.
///
/// With jemalloc's default (four arenas per CPU, threads spread over them),
/// a value promoted from the disk tier, a record copied on the tier's I/O
/// thread and a value evicted by the other worker each live in, or return
/// to, a different arena: the holes eviction leaves in one arena's slabs
/// are refilled only by the threads bound to it, which may allocate
/// nothing more. Reading back data larger than RAM then grew the pages
/// holding live values by 40 MB over a 64 MB budget in three seconds
/// (RSS 1.7x `maxmemory`). With one arena a hole is refilled by the next
/// allocation of its size from any thread, and active defragmentation
/// compares a slab with all the slabs of its size class. Threads still
/// allocate from their own caches (the arena's lock is taken once per
/// batch of objects), so this costs no measurable throughput at the
/// node's scale; `_RJEM_MALLOC_CONF` in the environment still overrides it.
#[unsafe(export_name = "_rjem_malloc_conf")]
#[used]
static MALLOC_CONF: ConfString = ConfString(c"narenas:1".as_ptr());

/// A C string jemalloc reads at start-up.
#[repr(transparent)]
struct ConfString(*const std::ffi::c_char);

// SAFETY: the pointer is to a string literal: immutable for the whole run,
// so sharing it between threads is safe.
unsafe impl Sync for ConfString {}

/// jemalloc's view of the heap, in bytes (see `mallctl(3)` `stats.*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocatorStats {
    /// Bytes the program holds (sum of the size classes of live objects).
    pub allocated: u64,
    /// Bytes in pages holding live objects: `active - allocated` is
    /// fragmentation inside those pages.
    pub active: u64,
    /// Bytes in physically resident pages the allocator maps (data,
    /// metadata and dirty pages not yet returned).
    pub resident: u64,
    /// Allocator bookkeeping.
    pub metadata: u64,
    /// Freed blocks the threads' caches keep for reuse: part of
    /// `allocated` for jemalloc, free memory for the program.
    pub thread_cached: u64,
}

/// The statistics `stats` reads, as jemalloc's numeric keys (MIBs): a
/// name is parsed on every lookup, a MIB only once.
struct StatKeys {
    epoch: [usize; 1],
    allocated: [usize; 2],
    active: [usize; 2],
    resident: [usize; 2],
    metadata: [usize; 2],
    /// `stats.arenas.<all>.tcache_bytes` (4096 is MALLCTL_ARENAS_ALL).
    thread_cached: [usize; 4],
}

fn stat_keys() -> Option<&'static StatKeys> {
    static KEYS: std::sync::OnceLock<Option<StatKeys>> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| {
        use tikv_jemalloc_ctl::raw::name_to_mib;
        let mut k = StatKeys {
            epoch: [0; 1],
            allocated: [0; 2],
            active: [0; 2],
            resident: [0; 2],
            metadata: [0; 2],
            thread_cached: [0; 4],
        };
        name_to_mib(b"epoch\0", &mut k.epoch).ok()?;
        name_to_mib(b"stats.allocated\0", &mut k.allocated).ok()?;
        name_to_mib(b"stats.active\0", &mut k.active).ok()?;
        name_to_mib(b"stats.resident\0", &mut k.resident).ok()?;
        name_to_mib(b"stats.metadata\0", &mut k.metadata).ok()?;
        name_to_mib(b"stats.arenas.4096.tcache_bytes\0", &mut k.thread_cached).ok()?;
        Some(k)
    })
    .as_ref()
}

/// Refreshes and reads the allocator's statistics. Costs a few
/// microseconds (it merges per-thread counters): call it on a timer or
/// for INFO, not per command.
pub fn stats() -> AllocatorStats {
    let Some(k) = stat_keys() else { return AllocatorStats::default() };
    // SAFETY: each MIB was resolved from the name of a statistic of type
    // `size_t` (mallctl(3)), read into a `usize` of the same size; writing
    // a `u64` to "epoch" is its documented way to refresh the statistics.
    unsafe {
        if tikv_jemalloc_ctl::raw::update_mib(&k.epoch, 1u64).is_err() {
            return AllocatorStats::default();
        }
        let read = |mib: &[usize]| tikv_jemalloc_ctl::raw::read_mib::<usize>(mib).unwrap_or(0) as u64;
        AllocatorStats {
            allocated: read(&k.allocated),
            active: read(&k.active),
            resident: read(&k.resident),
            metadata: read(&k.metadata),
            thread_cached: read(&k.thread_cached),
        }
    }
}

/// Bytes the allocator really hands out for a request of `size` bytes
/// aligned to `align` (a power of two), as jemalloc computes it: for the
/// large buffers of the logs, which may exceed `size` by up to a quarter.
pub fn usable_size(size: usize, align: usize) -> usize {
    if size == 0 {
        return 0;
    }
    // MALLOCX_ALIGN(a) is log2(a).
    let flags = align.max(1).trailing_zeros() as std::ffi::c_int;
    // SAFETY: nallocx only computes a size: it allocates nothing and takes
    // no pointer.
    let n = unsafe { tikv_jemalloc_sys::nallocx(size, flags) };
    if n == 0 { size } else { n }
}

/// The allocator's name and version, as INFO's `mem_allocator` shows it.
pub fn name() -> String {
    match tikv_jemalloc_ctl::version::read() {
        Ok(v) => format!("jemalloc-{}", v.split('-').next().unwrap_or(v)),
        Err(_) => "jemalloc".into(),
    }
}

/// Hands every arena's unused dirty pages back to the OS now (MEMORY
/// PURGE, and after a burst of closed connections or deletions).
/// False if jemalloc refused.
pub fn purge() -> bool {
    // 4096 is MALLCTL_ARENAS_ALL: the command applies to every arena.
    // SAFETY: "arena.<i>.purge" reads and writes nothing: every pointer is
    // null and every length zero, as it requires; it only releases unused
    // pages.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"arena.4096.purge".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    rc == 0
}

/// Active defragmentation's test for one allocation, as Redis's jemalloc
/// hint: worth moving when its slab is not the one new allocations of its
/// size come from and is less used than its size class's slabs on average
/// (moving it then helps empty a sparse slab, whose page goes back to the
/// OS). Large allocations never are.
pub fn worth_moving(bytes: &[u8]) -> bool {
    if bytes.is_empty() {
        return false;
    }
    // (slab a new allocation would use, free regions in this slab, its
    // regions, its size in bytes, free regions in the bin, bin regions).
    let mut out = [0usize; 6];
    let mut out_len = std::mem::size_of_val(&out);
    let mut ptr = bytes.as_ptr();
    // SAFETY: `ptr` points into a live jemalloc allocation (the slice is
    // borrowed); the output buffer has exactly the size the call checks
    // (one pointer and five size_t); the name is NUL-terminated.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"experimental.utilization.query".as_ptr(),
            out.as_mut_ptr().cast(),
            &mut out_len,
            (&mut ptr as *mut *const u8).cast(),
            std::mem::size_of::<*const u8>(),
        )
    };
    let [current, nfree, nregs, size, bin_nfree, bin_nregs] = out;
    if rc != 0 || current == 0 || nfree == 0 || nregs <= 1 || bin_nregs == 0 {
        return false;
    }
    let addr = ptr as usize;
    if addr >= current && addr < current + size {
        return false;
    }
    // This slab's use below the bin's average use, with Redis's 1/8 margin:
    // (nregs-nfree)/nregs < (bin_nregs-bin_nfree)/bin_nregs * 9/8.
    let used = (nregs - nfree) as u128;
    let bin_used = (bin_nregs - bin_nfree) as u128;
    used * bin_nregs as u128 * 8 < bin_used * nregs as u128 * 9
}

/// A copy of `bytes` in a new allocation, the old one freed, both without
/// the thread cache: the new block comes from the allocator's fullest
/// slab and the old one goes back to its slab at once (through the cache
/// it would be handed out again, refilling the sparse slab).
pub fn moved(bytes: Box<[u8]>) -> Box<[u8]> {
    let len = bytes.len();
    if len == 0 {
        return bytes;
    }
    let flags = tikv_jemalloc_sys::MALLOCX_TCACHE_NONE;
    // SAFETY: mallocx returns a block of at least `len` bytes (alignment
    // 1, as `Box<[u8]>` has) or null; the copy stays inside both blocks;
    // the old block came from jemalloc (the global allocator), so it is
    // freed with it, once, after `into_raw` took it from its Box; the new
    // block is owned by the returned Box, which the global allocator
    // (jemalloc) frees with the same size and alignment.
    unsafe {
        let new = tikv_jemalloc_sys::mallocx(len, flags).cast::<u8>();
        if new.is_null() {
            return bytes;
        }
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), new, len);
        let old = Box::into_raw(bytes);
        tikv_jemalloc_sys::sdallocx(old.cast(), len, flags);
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(new, len))
    }
}

/// How long freed pages stay mapped for reuse before jemalloc returns them
/// to the OS: 1 s instead of its default 10 s, so the RSS of a node at its
/// limit follows what it holds. The threads that allocate purge as they go
/// (`background_thread` is off: moving the purges to jemalloc's own thread
/// showed no clear gain on the tier workload, where they cost ~5 %).
const DIRTY_DECAY_MS: isize = 1000;

/// Tunes the allocator for a cache at start-up (see `DIRTY_DECAY_MS`).
pub fn configure() {
    // SAFETY: the names are NUL-terminated mallctl names whose values are
    // ssize_t, as the isize written; failures leave jemalloc's defaults.
    unsafe {
        let _ = tikv_jemalloc_ctl::raw::write(b"arenas.dirty_decay_ms\0", DIRTY_DECAY_MS);
        let arenas: u32 = tikv_jemalloc_ctl::raw::read(b"arenas.narenas\0").unwrap_or(0);
        for i in 0..arenas {
            let name = format!("arena.{i}.dirty_decay_ms\0");
            let _ = tikv_jemalloc_ctl::raw::write(name.as_bytes(), DIRTY_DECAY_MS);
        }
    }
}

/// The bytes jemalloc really reserves for a request of `n` bytes: its size
/// class. Entries count these, not requested lengths, so the keyspace's
/// estimate of itself matches the allocator's statistics. jemalloc's
/// classes (LG_QUANTUM 4, 4 classes per doubling): 8, then multiples of 16
/// up to 128, then 4 evenly spaced sizes in each power-of-two interval up
/// to 16 KiB; above that, large allocations are whole 4 KiB pages.
#[inline]
pub const fn size_class(n: usize) -> usize {
    if n <= 8 {
        return if n == 0 { 0 } else { 8 };
    }
    if n <= 128 {
        return (n + 15) & !15;
    }
    if n > 16 * 1024 {
        return (n + 4095) & !4095;
    }
    // The interval (2^lg, 2^(lg+1)] is split in 4: step 2^(lg-2).
    let lg = usize::BITS - 1 - (n - 1).leading_zeros();
    let step = 1usize << (lg - 2);
    (n + step - 1) & !(step - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `MALLOC_CONF` reached jemalloc: every thread shares one arena.
    #[test]
    fn one_arena_for_every_thread() {
        if std::env::var_os("_RJEM_MALLOC_CONF").is_some() {
            eprintln!("skipped: _RJEM_MALLOC_CONF overrides the built-in options");
            return;
        }
        let arenas = tikv_jemalloc_ctl::opt::narenas::read().unwrap();
        assert_eq!(arenas, 1);
    }

    #[test]
    fn size_classes_match_jemalloc() {
        for n in (1..=40_000).chain([65_536, 100_000, 1 << 20, (1 << 20) + 1, 5_000_000]) {
            // SAFETY: nallocx only computes a size; flags 0 = default alignment.
            let real = unsafe { tikv_jemalloc_sys::nallocx(n, 0) };
            assert_eq!(size_class(n), real, "size class of {n}");
        }
    }

    #[test]
    fn sparse_slabs_are_defragmented() {
        // Fill many slabs of one size class, free most objects of all but
        // a few: the survivors sit in sparse slabs and are worth moving;
        // moving them keeps their bytes.
        let mut blocks: Vec<Box<[u8]>> = (0..200_000u32).map(|i| i.to_le_bytes().repeat(11).into()).collect();
        let survivors: Vec<Box<[u8]>> =
            blocks.drain(..).enumerate().filter(|(i, _)| i % 64 == 0).map(|(_, b)| b).collect();
        let worth = survivors.iter().filter(|b| worth_moving(b)).count();
        assert!(worth > survivors.len() / 4, "{worth} of {} worth moving", survivors.len());
        let moved: Vec<Box<[u8]>> = survivors.into_iter().map(moved).collect();
        for (i, b) in moved.iter().enumerate() {
            assert_eq!(&b[..4], &((i * 64) as u32).to_le_bytes());
            assert_eq!(b.len(), 44);
        }
        assert!(!worth_moving(&vec![0u8; 1 << 20]), "large allocations are never moved");
    }

    #[test]
    fn statistics_see_an_allocation() {
        // Other tests allocate and free meanwhile: a 256 MiB block stands
        // out of their tens of MiB.
        let before = stats().allocated;
        let block = vec![1u8; 256 << 20];
        let during = stats().allocated;
        assert!(during >= before + (192 << 20), "allocated {before} -> {during}");
        assert!(stats().resident >= 192 << 20);
        drop(block);
        let after = stats().allocated;
        assert!(after + (128 << 20) < during, "allocated {during} -> {after} after freeing 256 MiB");
        assert!(purge(), "jemalloc accepts the purge");
        assert!(name().starts_with("jemalloc-5"), "{}", name());
    }
}
