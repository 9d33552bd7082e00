//! Huge-page-backed memory for large arenas: the keyspace's tables and the
//! logs' I/O buffers (`sys::file::AlignedBuf`, the log's staging buffers). [`HugePool`] is an
//! `allocator_api2` [`Allocator`], so `hashbrown::HashTable::new_in` and
//! `allocator_api2::vec::Vec::new_in` take it (through the zero-sized
//! [`HugeAlloc`] handle on the process-wide pool).
//!
//! A request of at least one huge page gets a mapping of its own, rounded
//! up to whole pages:
//! - `2Mi` / `1Gi`: reserved huge pages (`MAP_HUGETLB`), pre-faulted with
//!   `MADV_POPULATE_WRITE` so that a container's hugetlb limit, which the
//!   kernel enforces at fault time with SIGBUS, turns into a clean fallback
//!   instead;
//! - `transparent`: ordinary memory aligned to 2 MiB and advised
//!   `MADV_HUGEPAGE`, for the kernel's transparent huge pages (nothing to
//!   reserve; the kernel backs it with huge pages when it can).
//!
//! Smaller requests go to the global allocator untouched (one comparison),
//! and so does a request the kernel cannot serve: the first such failure
//! logs one warning saying why and what to do, later ones are only counted
//! (`fallbacks`). `bytes` counts what is mapped here: the global
//! allocator's statistics do not see it.

use allocator_api2::alloc::{AllocError, Allocator, Global, Layout};
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize};
use std::sync::{Mutex, OnceLock};

const MIB: usize = 1 << 20;
const GIB: usize = 1 << 30;

/// Size of a transparent huge page (x86-64 and 4 KiB-page arm64), and the
/// smallest request any setting maps: a block below it is never the pool's.
const SMALLEST: usize = 2 * MIB;

/// The `hugepages` setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum HugePages {
    /// Everything from the global allocator.
    Off,
    /// Transparent huge pages: 2 MiB-aligned mappings advised MADV_HUGEPAGE.
    Transparent,
    /// Reserved 2 MiB pages (`vm.nr_hugepages`, `hugepages-2Mi`).
    Size2Mi,
    /// Reserved 1 GiB pages (`hugepages-1Gi`).
    Size1Gi,
}

impl HugePages {
    pub const ALL: [HugePages; 4] = [HugePages::Off, HugePages::Transparent, HugePages::Size2Mi, HugePages::Size1Gi];

    /// As CONFIG GET and INFO show it; the page sizes as Kubernetes names
    /// them (`hugepages-2Mi`).
    pub const fn name(self) -> &'static str {
        match self {
            HugePages::Off => "off",
            HugePages::Transparent => "transparent",
            HugePages::Size2Mi => "2Mi",
            HugePages::Size1Gi => "1Gi",
        }
    }

    /// A setting in any case; page sizes also in Redis's units (`2mb`).
    pub fn parse(s: &str) -> Option<HugePages> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "off" | "no" => HugePages::Off,
            "transparent" => HugePages::Transparent,
            "2mi" | "2mb" | "2m" => HugePages::Size2Mi,
            "1gi" | "1gb" | "1g" => HugePages::Size1Gi,
            _ => return None,
        })
    }

    fn from_index(i: u8) -> HugePages {
        Self::ALL.get(i as usize).copied().unwrap_or(HugePages::Off)
    }

    /// The smallest request served from huge pages (one page); `usize::MAX` when off.
    fn threshold(self) -> usize {
        match self {
            HugePages::Off => usize::MAX,
            HugePages::Transparent | HugePages::Size2Mi => SMALLEST,
            HugePages::Size1Gi => GIB,
        }
    }
}

/// What the pool holds, for INFO and `/metrics`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HugePageStats {
    pub setting: HugePages,
    /// Bytes mapped now (whole pages).
    pub bytes: u64,
    /// Bytes the allocations asked for: `bytes` less the rounding to pages.
    pub requested: u64,
    /// Requests of a huge page or more served by the global allocator
    /// because the kernel refused.
    pub fallbacks: u64,
}

impl Default for HugePageStats {
    fn default() -> Self {
        HugePageStats { setting: HugePages::Off, bytes: 0, requested: 0, fallbacks: 0 }
    }
}

/// One mapping the pool made.
struct Region {
    len: usize,
    /// The size its owner asked for last.
    requested: usize,
    /// Granularity of the mapping: the huge page, or the base page (THP).
    page: usize,
}

/// Maps large requests onto huge pages (see the module doc).
pub struct HugePool {
    /// A [`HugePages`] as `u8`.
    setting: AtomicU8,
    /// Sums over `regions`, changed under its lock, read without it.
    mapped: AtomicUsize,
    requested: AtomicUsize,
    fallbacks: AtomicU64,
    /// Mappings by start address: which blocks are ours when they come back.
    regions: Mutex<BTreeMap<usize, Region>>,
    /// The one warning logged, at the first fallback.
    warning: OnceLock<String>,
    /// Whether the first mapping was announced.
    announced: AtomicBool,
    /// Transparent huge pages: 0 not checked yet, 1 available, 2 disabled.
    thp: AtomicU8,
    /// Tests: refuse every mapping as if no page were free.
    #[cfg(test)]
    refuse: AtomicBool,
}

/// The process's pool, used by [`HugeAlloc`].
static POOL: HugePool = HugePool::new(HugePages::Off);

/// Sets the process's `hugepages` setting; later requests follow it (blocks
/// already mapped stay until freed).
pub fn configure(setting: HugePages) {
    POOL.set_setting(setting);
}

/// The process pool's figures.
pub fn stats() -> HugePageStats {
    POOL.stats()
}

/// Bytes mapped in huge pages by the process: memory the global allocator's
/// statistics never see, to be added to them for `used_memory`.
pub fn mapped_bytes() -> usize {
    POOL.mapped.load(Relaxed)
}

/// Bytes mapped beyond what the allocations asked for (the rounding to whole
/// pages): what an estimate counting only the requested sizes misses.
pub fn slack_bytes() -> usize {
    POOL.mapped.load(Relaxed).saturating_sub(POOL.requested.load(Relaxed))
}

/// A zero-sized handle on the process's pool: containers holding it cost no
/// more than with the global allocator.
#[derive(Clone, Copy, Debug, Default)]
pub struct HugeAlloc;

// SAFETY: every method forwards to the process pool, a valid allocator (see
// its impl); all handles share that one pool, so a block from one handle may
// be freed or resized through any clone, as the trait requires.
unsafe impl Allocator for HugeAlloc {
    #[inline]
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        POOL.allocate(layout)
    }

    #[inline]
    fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        POOL.allocate_zeroed(layout)
    }

    #[inline]
    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: the caller's guarantees, passed on unchanged.
        unsafe { POOL.deallocate(ptr, layout) }
    }

    #[inline]
    unsafe fn grow(&self, ptr: NonNull<u8>, old: Layout, new: Layout) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: the caller's guarantees, passed on unchanged.
        unsafe { POOL.grow(ptr, old, new) }
    }

    #[inline]
    unsafe fn grow_zeroed(&self, ptr: NonNull<u8>, old: Layout, new: Layout) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: the caller's guarantees, passed on unchanged.
        unsafe { POOL.grow_zeroed(ptr, old, new) }
    }

    #[inline]
    unsafe fn shrink(&self, ptr: NonNull<u8>, old: Layout, new: Layout) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: the caller's guarantees, passed on unchanged.
        unsafe { POOL.shrink(ptr, old, new) }
    }
}

/// Appends `bytes` to `v` with one copy. (allocator-api2's own
/// `extend_from_slice` copies a byte at a time: it has no specialization
/// for `Copy` slices; it was 6% of a worker's time under logged writes.)
pub fn extend_from_slice<A: Allocator>(v: &mut allocator_api2::vec::Vec<u8, A>, bytes: &[u8]) {
    v.reserve(bytes.len());
    let len = v.len();
    // SAFETY: `reserve` made room for `bytes.len()` more bytes after `len`;
    // the source is a distinct live slice (a `&[u8]` cannot alias the
    // `&mut` vector's spare capacity); `set_len` covers exactly the bytes
    // just written.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr().add(len), bytes.len());
        v.set_len(len + bytes.len());
    }
}

impl HugePool {
    pub const fn new(setting: HugePages) -> HugePool {
        HugePool {
            setting: AtomicU8::new(setting as u8),
            mapped: AtomicUsize::new(0),
            requested: AtomicUsize::new(0),
            fallbacks: AtomicU64::new(0),
            regions: Mutex::new(BTreeMap::new()),
            warning: OnceLock::new(),
            announced: AtomicBool::new(false),
            thp: AtomicU8::new(0),
            #[cfg(test)]
            refuse: AtomicBool::new(false),
        }
    }

    pub fn setting(&self) -> HugePages {
        HugePages::from_index(self.setting.load(Relaxed))
    }

    pub fn set_setting(&self, setting: HugePages) {
        self.setting.store(setting as u8, Relaxed);
    }

    pub fn stats(&self) -> HugePageStats {
        HugePageStats {
            setting: self.setting(),
            bytes: self.mapped.load(Relaxed) as u64,
            requested: self.requested.load(Relaxed) as u64,
            fallbacks: self.fallbacks.load(Relaxed),
        }
    }

    /// The warning logged at the first fallback, if any was.
    pub fn warning(&self) -> Option<&str> {
        self.warning.get().map(String::as_str)
    }

    fn regions(&self) -> std::sync::MutexGuard<'_, BTreeMap<usize, Region>> {
        // Nothing panics while holding the lock; a poisoned map is still consistent.
        self.regions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The length of our mapping at `ptr`, if the block of `size` bytes there
    /// is one (blocks below [`SMALLEST`] never are: no lock taken).
    #[inline]
    fn mapping_len(&self, ptr: NonNull<u8>, size: usize) -> Option<usize> {
        if size < SMALLEST {
            return None;
        }
        self.regions().get(&(ptr.as_ptr() as usize)).map(|r| r.len)
    }

    /// A new mapping for `layout`, or None when the request is small, the
    /// setting is off, or the kernel refused (counted, warned once).
    fn try_map(&self, layout: Layout) -> Option<NonNull<[u8]>> {
        let setting = self.setting();
        if layout.size() < setting.threshold() || layout.align() > SMALLEST {
            return None;
        }
        match self.map(setting, layout.size()) {
            Ok((ptr, len, page)) => {
                let mut regions = self.regions();
                regions.insert(ptr.as_ptr() as usize, Region { len, requested: layout.size(), page });
                self.mapped.fetch_add(len, Relaxed);
                self.requested.fetch_add(layout.size(), Relaxed);
                drop(regions);
                if !self.announced.swap(true, Relaxed) {
                    tracing::info!(hugepages = setting.name(), "large tables and I/O buffers are backed by huge pages");
                }
                Some(NonNull::slice_from_raw_parts(ptr, len))
            }
            Err(reason) => {
                self.fallbacks.fetch_add(1, Relaxed);
                if self.warning.get().is_none() && self.warning.set(reason.clone()).is_ok() {
                    tracing::warn!(hugepages = setting.name(), "{reason}");
                }
                None
            }
        }
    }

    /// Maps at least `size` bytes as `setting` says: (start, length, page).
    fn map(&self, setting: HugePages, size: usize) -> Result<(NonNull<u8>, usize, usize), String> {
        #[cfg(test)]
        if self.refuse.load(Relaxed) {
            return Err(explain_hugetlb(setting, size, &std::io::Error::from_raw_os_error(libc::ENOMEM)));
        }
        match setting {
            HugePages::Off => Err("huge pages are off".into()),
            HugePages::Transparent => {
                if !self.thp_available() {
                    return Err("transparent huge pages are disabled on this machine \
                                (/sys/kernel/mm/transparent_hugepage/enabled is \"never\" or missing): \
                                set it to \"madvise\", or use reserved pages (hugepages 2Mi), or hugepages off; \
                                large tables and I/O buffers use ordinary pages"
                        .into());
                }
                let page = base_page();
                let len = round_up(size, page).ok_or("request too large")?;
                map_transparent(len).map(|p| (p, len, page)).map_err(|e| {
                    format!(
                        "could not map {} MiB for transparent huge pages ({e}): large tables and I/O buffers use ordinary pages",
                        len / MIB
                    )
                })
            }
            HugePages::Size2Mi | HugePages::Size1Gi => {
                let page = setting.threshold();
                let len = round_up(size, page).ok_or("request too large")?;
                map_hugetlb(len, setting == HugePages::Size1Gi).map(|p| (p, len, page)).map_err(|e| match e {
                    MapError::Map(e) => explain_hugetlb(setting, len, &e),
                    MapError::Populate(e) => format!(
                        "{len_mib} MiB of {label} huge pages were reserved but could not be faulted in ({e}): \
                         the container's hugetlb limit is likely lower than what the node uses; raise the pod's \
                         {resource} (spec.hugepages.amount in the CacheCluster) or set hugepages off; large \
                         tables use ordinary pages",
                        len_mib = len / MIB,
                        label = page_label(setting),
                        resource = k8s_resource(setting),
                    ),
                })
            }
        }
    }

    fn thp_available(&self) -> bool {
        match self.thp.load(Relaxed) {
            1 => true,
            2 => false,
            _ => {
                let on = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
                    .is_ok_and(|s| !s.contains("[never]"));
                self.thp.store(if on { 1 } else { 2 }, Relaxed);
                on
            }
        }
    }

    /// Unmaps our block at `ptr` and forgets it.
    fn release(&self, ptr: NonNull<u8>) {
        let mut regions = self.regions();
        let Some(r) = regions.remove(&(ptr.as_ptr() as usize)) else {
            unreachable!("release of a block the pool does not hold")
        };
        self.mapped.fetch_sub(r.len, Relaxed);
        self.requested.fetch_sub(r.requested, Relaxed);
        drop(regions);
        unmap(ptr.as_ptr(), r.len);
    }

    /// Our block at `ptr` now holds `size` bytes; gives back the whole pages
    /// past them. Returns the mapping's length.
    fn resize_in_place(&self, ptr: NonNull<u8>, size: usize) -> usize {
        let mut regions = self.regions();
        let r = regions.get_mut(&(ptr.as_ptr() as usize)).expect("a block of the pool");
        self.requested.fetch_sub(r.requested, Relaxed);
        self.requested.fetch_add(size, Relaxed);
        r.requested = size;
        let keep = round_up(size, r.page).unwrap_or(r.len);
        // A failed unmap (the process's map count at its limit) keeps the tail.
        if keep < r.len && unmap(ptr.as_ptr().wrapping_add(keep), r.len - keep) {
            self.mapped.fetch_sub(r.len - keep, Relaxed);
            r.len = keep;
        }
        r.len
    }

    /// Moves our block at `ptr` (`old` its layout) to a new one for `new`,
    /// copying the smaller of the two sizes; the new block is zero past the
    /// copy when `zeroed`.
    ///
    /// # Safety
    /// `ptr` is a block of this pool's own mappings, fitting `old`.
    unsafe fn relocate(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
        zeroed: bool,
    ) -> Result<NonNull<[u8]>, AllocError> {
        let block = match self.try_map(new) {
            Some(block) => block,
            None if zeroed => Global.allocate_zeroed(new)?,
            None => Global.allocate(new)?,
        };
        // SAFETY: both blocks are valid for `min(old, new)` bytes and distinct
        // (the new one was allocated while the old one is live).
        unsafe {
            std::ptr::copy_nonoverlapping(ptr.as_ptr(), block.as_ptr().cast::<u8>(), old.size().min(new.size()));
        }
        self.release(ptr);
        Ok(block)
    }

    /// `grow` and `grow_zeroed`.
    ///
    /// # Safety
    /// As [`Allocator::grow`].
    unsafe fn grow_impl(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
        zeroed: bool,
    ) -> Result<NonNull<[u8]>, AllocError> {
        if let Some(len) = self.mapping_len(ptr, old.size()) {
            if new.size() <= len && new.align() <= SMALLEST {
                if zeroed {
                    // SAFETY: [old.size(), new.size()) lies inside our mapping,
                    // which the caller owns; earlier contents there are stale.
                    unsafe { ptr.as_ptr().add(old.size()).write_bytes(0, new.size() - old.size()) };
                }
                let len = self.resize_in_place(ptr, new.size());
                return Ok(NonNull::slice_from_raw_parts(ptr, len));
            }
            // SAFETY: our block, fitting `old`.
            return unsafe { self.relocate(ptr, old, new, zeroed) };
        }
        // A table outgrowing ordinary memory moves to huge pages if it can.
        if let Some(block) = self.try_map(new) {
            // SAFETY: the old block is valid for old.size() bytes, the new one
            // (fresh, zero-filled) for more; they are distinct. The old one is
            // a global allocator block with layout `old`.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr.as_ptr(), block.as_ptr().cast::<u8>(), old.size());
                Global.deallocate(ptr, old);
            }
            return Ok(block);
        }
        // SAFETY: a global allocator block; the caller's guarantees hold.
        unsafe { if zeroed { Global.grow_zeroed(ptr, old, new) } else { Global.grow(ptr, old, new) } }
    }
}

// SAFETY: blocks come either from the global allocator (and go back to it
// with the same layout) or from a mapping of their own, recorded in
// `regions` from map to unmap: a block is ours exactly when its address is
// recorded, which `deallocate`, `grow` and `shrink` check before choosing.
// Our blocks are never below SMALLEST bytes (requests smaller than that are
// never mapped, and a mapped block shrunk below it moves to the global
// allocator), so a size under SMALLEST proves a block is not ours. A
// mapping stays valid and unmoved until its block is freed or moved, and
// distinct blocks never overlap (the kernel hands out fresh ranges).
unsafe impl Allocator for HugePool {
    #[inline]
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        match self.try_map(layout) {
            Some(block) => Ok(block),
            None => Global.allocate(layout),
        }
    }

    #[inline]
    fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        // Fresh anonymous mappings read as zeros.
        match self.try_map(layout) {
            Some(block) => Ok(block),
            None => Global.allocate_zeroed(layout),
        }
    }

    #[inline]
    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if self.mapping_len(ptr, layout.size()).is_some() {
            self.release(ptr);
        } else {
            // SAFETY: not ours, so a global allocator block with this layout.
            unsafe { Global.deallocate(ptr, layout) }
        }
    }

    unsafe fn grow(&self, ptr: NonNull<u8>, old: Layout, new: Layout) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: the caller's guarantees.
        unsafe { self.grow_impl(ptr, old, new, false) }
    }

    unsafe fn grow_zeroed(&self, ptr: NonNull<u8>, old: Layout, new: Layout) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: the caller's guarantees.
        unsafe { self.grow_impl(ptr, old, new, true) }
    }

    unsafe fn shrink(&self, ptr: NonNull<u8>, old: Layout, new: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if self.mapping_len(ptr, old.size()).is_some() {
            if new.size() >= SMALLEST && new.align() <= SMALLEST {
                let len = self.resize_in_place(ptr, new.size());
                return Ok(NonNull::slice_from_raw_parts(ptr, len));
            }
            // Too small to keep a mapping: back to the global allocator.
            // SAFETY: our block, fitting `old`.
            return unsafe { self.relocate(ptr, old, new, false) };
        }
        // SAFETY: a global allocator block; the caller's guarantees hold.
        unsafe { Global.shrink(ptr, old, new) }
    }
}

/// `n` rounded up to a multiple of `page` (a power of two).
fn round_up(n: usize, page: usize) -> Option<usize> {
    Some(n.checked_add(page - 1)? & !(page - 1))
}

fn base_page() -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page > 0 { page as usize } else { 4096 }
}

fn page_label(setting: HugePages) -> &'static str {
    if setting == HugePages::Size1Gi { "1GiB" } else { "2MiB" }
}

fn k8s_resource(setting: HugePages) -> &'static str {
    if setting == HugePages::Size1Gi { "hugepages-1Gi" } else { "hugepages-2Mi" }
}

/// Free pages of the setting's size on the host, if the kernel says.
fn free_pages(setting: HugePages) -> Option<u64> {
    let dir = if setting == HugePages::Size1Gi { "hugepages-1048576kB" } else { "hugepages-2048kB" };
    std::fs::read_to_string(format!("/sys/kernel/mm/hugepages/{dir}/free_hugepages")).ok()?.trim().parse().ok()
}

/// Why a `MAP_HUGETLB` mapping of `len` bytes failed, and what to do.
fn explain_hugetlb(setting: HugePages, len: usize, err: &std::io::Error) -> String {
    let (label, resource) = (page_label(setting), k8s_resource(setting));
    let size = if len >= GIB { format!("{} GiB", len / GIB) } else { format!("{} MiB", len / MIB) };
    match err.raw_os_error() {
        Some(libc::ENOMEM) => {
            let free = free_pages(setting).map_or_else(String::new, |n| format!("; {n} free on the host"));
            format!(
                "not enough free {label} huge pages for a {size} allocation ({err}{free}): reserve some (sysctl \
                 vm.nr_hugepages on the host; in Kubernetes, spec.hugepages with pageSize {} in the CacheCluster, \
                 which requests {resource} for the pod) or set hugepages off. Large tables use ordinary memory \
                 meanwhile; this is logged once, INFO hugepages_fallbacks counts every fallback",
                setting.name()
            )
        }
        Some(libc::EINVAL) => format!(
            "this kernel offers no {label} huge pages ({err}): configure them (hugepagesz at boot, \
             /sys/kernel/mm/hugepages) or use hugepages 2Mi, transparent or off; large tables and I/O buffers use ordinary pages"
        ),
        _ => format!(
            "mapping {size} of {label} huge pages failed ({err}); large tables and I/O buffers use ordinary pages"
        ),
    }
}

enum MapError {
    /// mmap refused: no pages (ENOMEM) or no such page size (EINVAL).
    Map(std::io::Error),
    /// Mapped, but the pages could not be faulted in (a cgroup limit).
    Populate(std::io::Error),
}

/// A private anonymous mapping of `len` bytes (a multiple of the page) in
/// reserved huge pages, every page faulted in.
fn map_hugetlb(len: usize, gigantic: bool) -> Result<NonNull<u8>, MapError> {
    let size_flag = if gigantic { libc::MAP_HUGE_1GB } else { libc::MAP_HUGE_2MB };
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_HUGETLB | size_flag;
    // SAFETY: a new anonymous mapping at an address the kernel picks: no
    // existing memory is touched.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
    if p == libc::MAP_FAILED {
        return Err(MapError::Map(std::io::Error::last_os_error()));
    }
    // The hugetlb cgroup (a pod's hugepages-2Mi limit) is enforced when a
    // page is first touched, with SIGBUS: fault every page in now, where a
    // refusal is an error. Kernels before 5.14 lack MADV_POPULATE_WRITE
    // (EINVAL): the mmap's reservation is all we can check there.
    // SAFETY: advice on the mapping just made, which nothing else uses yet.
    if unsafe { libc::madvise(p, len, libc::MADV_POPULATE_WRITE) } != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINVAL) {
            unmap(p.cast(), len);
            return Err(MapError::Populate(err));
        }
    }
    NonNull::new(p.cast()).ok_or(MapError::Map(std::io::Error::from_raw_os_error(libc::ENOMEM)))
}

/// A private anonymous mapping of `len` bytes (a multiple of the base page)
/// starting on a 2 MiB boundary, advised MADV_HUGEPAGE.
fn map_transparent(len: usize) -> std::io::Result<NonNull<u8>> {
    let span = len.checked_add(SMALLEST).ok_or(std::io::Error::from_raw_os_error(libc::ENOMEM))?;
    // SAFETY: a new anonymous mapping at an address the kernel picks.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    // Keep the 2 MiB-aligned `len` bytes inside; give back both ends.
    let start = p as usize;
    let aligned = (start + SMALLEST - 1) & !(SMALLEST - 1);
    let head = aligned - start;
    let tail = span - head - len;
    let base = p.cast::<u8>();
    if head > 0 {
        unmap(base, head);
    }
    if tail > 0 {
        unmap(base.wrapping_add(head + len), tail);
    }
    let ptr = base.wrapping_add(head);
    // SAFETY: advice on the mapping just made, which nothing else uses yet.
    if unsafe { libc::madvise(ptr.cast(), len, libc::MADV_HUGEPAGE) } != 0 {
        let err = std::io::Error::last_os_error();
        unmap(ptr, len);
        return Err(err);
    }
    NonNull::new(ptr).ok_or(std::io::Error::from_raw_os_error(libc::ENOMEM))
}

/// Unmaps `len` bytes at `ptr`; false when the kernel refused.
fn unmap(ptr: *mut u8, len: usize) -> bool {
    // SAFETY: callers pass whole pages of a mapping the pool made and that no
    // live block uses any more.
    unsafe { libc::munmap(ptr.cast(), len) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use allocator_api2::vec::Vec as AVec;
    use hashbrown::HashTable;

    /// A pool of its own (tests run in parallel; the process pool is shared).
    fn pool(setting: HugePages) -> &'static HugePool {
        Box::leak(Box::new(HugePool::new(setting)))
    }

    /// Whether `n` huge pages of this size are free now, with a note if not.
    fn pages_free(setting: HugePages, n: u64, test: &str) -> bool {
        let free = free_pages(setting).unwrap_or(0);
        if free < n {
            println!(
                "note: {test}: {free} free {} huge pages (< {n}), so the real huge-page path is skipped and the \
                 fallback is checked instead; reserve pages (echo 64 > /proc/sys/vm/nr_hugepages) to run it",
                page_label(setting)
            );
        }
        free >= n
    }

    #[test]
    fn extend_from_slice_appends_across_growth() {
        let mut v: AVec<u8, HugeAlloc> = AVec::new_in(HugeAlloc);
        let mut want = Vec::new();
        for i in 0..300u32 {
            let part: Vec<u8> = (0..i % 97).map(|j| (i * 7 + j) as u8).collect();
            extend_from_slice(&mut v, &part);
            want.extend_from_slice(&part);
        }
        extend_from_slice(&mut v, &[]);
        assert_eq!(&v[..], &want[..]);
    }

    fn fill(v: &mut AVec<u64, &HugePool>, n: u64) {
        for i in v.len() as u64..n {
            v.push(i * 3);
        }
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64 * 3));
    }

    #[test]
    fn settings_parse_in_kubernetes_and_redis_units() {
        for s in HugePages::ALL {
            assert_eq!(HugePages::parse(s.name()), Some(s));
            assert_eq!(HugePages::from_index(s as u8), s);
        }
        assert_eq!(HugePages::parse("2MB"), Some(HugePages::Size2Mi));
        assert_eq!(HugePages::parse("1gi"), Some(HugePages::Size1Gi));
        assert_eq!(HugePages::parse("NO"), Some(HugePages::Off));
        assert_eq!(HugePages::parse("4Mi"), None);
        assert_eq!(HugePages::parse("yes"), None);
        assert_eq!(round_up(1, 4096), Some(4096));
        assert_eq!(round_up(2 * MIB, 2 * MIB), Some(2 * MIB));
        assert_eq!(round_up(usize::MAX, 2 * MIB), None);
    }

    #[test]
    fn small_requests_and_setting_off_use_the_global_allocator() {
        for setting in HugePages::ALL {
            let p = pool(setting);
            let mut v: AVec<u64, &HugePool> = AVec::new_in(p);
            fill(&mut v, 100_000); // 1 MiB of capacity: below a huge page
            assert_eq!(p.stats().bytes, 0, "{setting:?}");
            drop(v);
            assert_eq!(p.stats(), HugePageStats { setting, ..HugePageStats::default() });
        }
        let p = pool(HugePages::Off);
        let mut v: AVec<u64, &HugePool> = AVec::new_in(p);
        fill(&mut v, 1_000_000);
        assert_eq!((p.stats().bytes, p.stats().fallbacks), (0, 0), "off is not a fallback");
        assert!(p.warning().is_none());
    }

    /// The real path: a growing Vec and a hash table live in reserved 2 MiB
    /// pages, move between mappings as they grow, shrink back and free.
    #[test]
    fn reserved_2mi_pages_back_growing_tables() {
        if !pages_free(HugePages::Size2Mi, 16, "reserved_2mi_pages_back_growing_tables") {
            let p = pool(HugePages::Size2Mi);
            let mut v: AVec<u64, &HugePool> = AVec::new_in(p);
            fill(&mut v, 1_000_000);
            let s = p.stats();
            assert_eq!(s.bytes, 0);
            assert!(s.fallbacks >= 1, "{s:?}");
            assert!(p.warning().is_some_and(|w| w.contains("huge pages")), "{:?}", p.warning());
            return;
        }
        let p = pool(HugePages::Size2Mi);
        let mut v: AVec<u64, &HugePool> = AVec::new_in(p);
        fill(&mut v, 1_000_000); // 8 MB: grows from ordinary memory into huge pages
        let s = p.stats();
        assert_eq!(s.fallbacks, 0, "{:?}", p.warning());
        assert_eq!(s.bytes % (2 * MIB) as u64, 0);
        assert!(s.bytes >= 8_000_000 && s.requested == v.capacity() as u64 * 8, "{s:?}");
        assert_eq!(v.as_ptr() as usize % (2 * MIB), 0, "huge pages are aligned");
        // Shrinking in place gives back whole pages; below a page, back to malloc.
        v.truncate(300_000);
        v.shrink_to_fit();
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64 * 3));
        assert_eq!(p.stats().bytes, 4 * MIB as u64, "2.4 MB rounds up to two pages");
        v.truncate(1000);
        v.shrink_to_fit();
        assert_eq!(p.stats().bytes, 0);
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64 * 3));
        drop(v);

        let mut t: HashTable<u64, &HugePool> = HashTable::new_in(p);
        let hash = |x: &u64| x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for i in 0..400_000u64 {
            t.insert_unique(hash(&i), i, hash);
        }
        assert!(p.stats().bytes > 0);
        assert!((0..400_000u64).all(|i| t.find(hash(&i), |&x| x == i).is_some()));
        drop(t);
        assert_eq!(p.stats(), HugePageStats { setting: HugePages::Size2Mi, ..HugePageStats::default() });
        assert!(p.warning().is_none());
    }

    #[test]
    fn grow_zeroed_and_in_place_growth_keep_contents_and_zeros() {
        let p = pool(HugePages::Size2Mi);
        let real = pages_free(HugePages::Size2Mi, 8, "grow_zeroed_and_in_place_growth_keep_contents_and_zeros");
        let small = Layout::from_size_align(3 * MIB, 64).unwrap();
        let block = p.allocate_zeroed(small).unwrap();
        let ptr = block.cast::<u8>();
        // SAFETY: a block of 3 MiB just allocated.
        unsafe {
            assert!(std::slice::from_raw_parts(ptr.as_ptr(), small.size()).iter().all(|&b| b == 0));
            ptr.as_ptr().write_bytes(7, small.size());
        }
        if real {
            assert_eq!(block.len(), 4 * MIB, "the whole mapping is usable");
        }
        // Within the mapping (real) or through the global allocator: same result.
        let bigger = Layout::from_size_align(4 * MIB - 100, 64).unwrap();
        // SAFETY: the block fits `small`; `bigger` is larger.
        let grown = unsafe { p.grow_zeroed(ptr, small, bigger) }.unwrap();
        let g = grown.cast::<u8>();
        // SAFETY: the grown block holds `bigger.size()` bytes.
        unsafe {
            let s = std::slice::from_raw_parts(g.as_ptr(), bigger.size());
            assert!(s[..small.size()].iter().all(|&b| b == 7));
            assert!(s[small.size()..].iter().all(|&b| b == 0));
        }
        if real {
            assert_eq!(g, ptr, "grown in place");
        }
        let largest = Layout::from_size_align(9 * MIB, 64).unwrap();
        // SAFETY: the block fits `bigger`.
        let moved = unsafe { p.grow(g, bigger, largest) }.unwrap().cast::<u8>();
        // SAFETY: the first `bigger.size()` bytes were copied over.
        unsafe {
            let s = std::slice::from_raw_parts(moved.as_ptr(), bigger.size());
            assert!(s[..small.size()].iter().all(|&b| b == 7) && s[small.size()..].iter().all(|&b| b == 0));
            p.deallocate(moved, largest);
        }
        assert_eq!(p.stats().bytes, 0);
    }

    /// With no free page (simulated), every large request falls back, is
    /// counted, and only the first logs the warning.
    #[test]
    fn failures_fall_back_with_one_warning() {
        let p = pool(HugePages::Size2Mi);
        p.refuse.store(true, Relaxed);
        let mut tables = Vec::new();
        for _ in 0..5 {
            let mut v: AVec<u64, &HugePool> = AVec::new_in(p);
            fill(&mut v, 600_000);
            tables.push(v);
        }
        let s = p.stats();
        assert_eq!(s.bytes, 0);
        assert!(s.fallbacks >= 5, "{s:?}");
        let warning = p.warning().expect("a warning");
        assert!(warning.contains("not enough free 2MiB huge pages"), "{warning}");
        assert!(warning.contains("vm.nr_hugepages") && warning.contains("hugepages-2Mi"), "{warning}");
        // Pages become free: the next table that grows gets them.
        p.refuse.store(false, Relaxed);
        if pages_free(HugePages::Size2Mi, 8, "failures_fall_back_with_one_warning") {
            fill(&mut tables[0], 1_200_000);
            assert!(p.stats().bytes > 0);
        }
        drop(tables);
        assert_eq!(p.stats().bytes, 0);
    }

    #[test]
    fn gigantic_pages_serve_only_gigabyte_requests() {
        let p = pool(HugePages::Size1Gi);
        let mut v: AVec<u64, &HugePool> = AVec::new_in(p);
        fill(&mut v, 1_000_000);
        assert_eq!(p.stats(), HugePageStats { setting: HugePages::Size1Gi, ..HugePageStats::default() });
        let e = explain_hugetlb(HugePages::Size1Gi, GIB, &std::io::Error::from_raw_os_error(libc::EINVAL));
        assert!(e.contains("no 1GiB huge pages"), "{e}");
    }

    /// Transparent huge pages: 2 MiB-aligned mappings the kernel sees advised
    /// (`hg` in /proc/self/smaps), sized to the base page (no rounding to 2 MiB).
    #[test]
    fn transparent_mappings_are_aligned_and_advised() {
        let p = pool(HugePages::Transparent);
        let layout = Layout::from_size_align(5 * MIB + 123, 8).unwrap();
        let block = p.allocate(layout).unwrap();
        if !p.thp_available() {
            println!("note: transparent huge pages are disabled here: checked the fallback only");
            assert_eq!(p.stats().fallbacks, 1);
            // SAFETY: allocated above with this layout.
            unsafe { p.deallocate(block.cast(), layout) };
            return;
        }
        let addr = block.cast::<u8>().as_ptr() as usize;
        assert_eq!(addr % SMALLEST, 0);
        assert_eq!(block.len(), round_up(layout.size(), base_page()).unwrap());
        assert_eq!(p.stats().bytes, block.len() as u64);
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let header = format!("{addr:x}-");
        let region = smaps.split_once(&header).map(|(_, rest)| rest).expect("the mapping in smaps");
        let flags = region.lines().find(|l| l.starts_with("VmFlags:")).unwrap();
        assert!(flags.split_whitespace().any(|f| f == "hg"), "{flags}");
        // SAFETY: allocated above with this layout.
        unsafe { p.deallocate(block.cast(), layout) };
        assert_eq!(p.stats().bytes, 0);
    }
}
