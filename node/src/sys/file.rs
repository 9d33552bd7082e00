//! Files for the disk tier: buffers aligned for O_DIRECT, opening with or
//! without O_DIRECT, and the eventfd that wakes the io_uring thread.

use super::hugepages::HugeAlloc;
use allocator_api2::alloc::{Allocator, Layout};
use std::alloc;
use std::fs::{File, OpenOptions};
use std::io;
use std::ops::{Deref, DerefMut};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Alignment of every buffer and every offset handed to O_DIRECT I/O: the
/// page size, which covers any logical block size a disk reports.
pub const IO_ALIGN: usize = 4096;

/// Bytes held by one owner's I/O buffers (a log's staging, write and read
/// buffers), counted as they are allocated and freed: the memory budget
/// reports them and leaves them out of the eviction decision, as Redis does
/// with its AOF buffer.
#[derive(Debug, Default)]
pub struct BufferGauge {
    bytes: AtomicUsize,
    /// The most held at once.
    peak: AtomicUsize,
}

impl BufferGauge {
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Relaxed) as u64
    }

    pub fn peak(&self) -> u64 {
        self.peak.load(Relaxed) as u64
    }

    /// A buffer of the owner's grew from `before` to `after` bytes (or shrank).
    pub fn resize(&self, before: usize, after: usize) {
        if after > before {
            let now = self.bytes.fetch_add(after - before, Relaxed) + (after - before);
            self.peak.fetch_max(now, Relaxed);
        } else if before > after {
            self.bytes.fetch_sub(before - after, Relaxed);
        }
    }
}

/// A zero-initialised buffer whose address is `IO_ALIGN`-aligned, as
/// O_DIRECT requires. Its length is fixed at creation. Buffers of a huge
/// page or more come from huge pages when the `hugepages` setting is on
/// (see `hugepages`: aligned to the page, never moved while the buffer
/// lives, so the kernel may use it until an io_uring completion hands it
/// back); smaller ones from the global allocator.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    /// Bytes of the block holding it (the mapping, for huge pages).
    block: usize,
    gauge: Option<Arc<BufferGauge>>,
}

// SAFETY: AlignedBuf owns its allocation exclusively (like a Box<[u8]>), so
// moving it to or sharing it with another thread is sound.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only allow reads of the bytes.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A buffer of `len` zero bytes (`len` may be 0), counted nowhere.
    pub fn zeroed(len: usize) -> AlignedBuf {
        Self::alloc(len, None)
    }

    /// A buffer of `len` zero bytes counted in `gauge` while it lives.
    pub fn zeroed_in(len: usize, gauge: &Arc<BufferGauge>) -> AlignedBuf {
        Self::alloc(len, Some(gauge.clone()))
    }

    fn alloc(len: usize, gauge: Option<Arc<BufferGauge>>) -> AlignedBuf {
        let layout = Self::layout(len);
        // Fresh huge-page mappings and alloc_zeroed blocks read as zeros.
        let block = HugeAlloc.allocate_zeroed(layout).unwrap_or_else(|_| alloc::handle_alloc_error(layout));
        // The mapping's length for huge pages, the allocator's size class
        // (up to a quarter more than asked) otherwise.
        let bytes = block.len().max(super::alloc::usable_size(layout.size(), layout.align()));
        if let Some(g) = &gauge {
            g.resize(0, bytes);
        }
        AlignedBuf { ptr: block.cast(), len, block: bytes, gauge }
    }

    /// A buffer holding `bytes`, zero-padded up to a multiple of `IO_ALIGN`.
    pub fn padded_copy(bytes: &[u8]) -> AlignedBuf {
        Self::padded(bytes, None)
    }

    /// [`Self::padded_copy`], counted in `gauge`.
    pub fn padded_copy_in(bytes: &[u8], gauge: &Arc<BufferGauge>) -> AlignedBuf {
        Self::padded(bytes, Some(gauge.clone()))
    }

    fn padded(bytes: &[u8], gauge: Option<Arc<BufferGauge>>) -> AlignedBuf {
        let mut buf = AlignedBuf::alloc(bytes.len().next_multiple_of(IO_ALIGN), gauge);
        buf[..bytes.len()].copy_from_slice(bytes);
        buf
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len.max(1).next_multiple_of(IO_ALIGN), IO_ALIGN)
            .expect("buffer length overflows a Layout")
    }

    /// The buffer's address, for the kernel.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if let Some(g) = &self.gauge {
            g.resize(self.block, 0);
        }
        // SAFETY: ptr came from HugeAlloc::allocate_zeroed with exactly this layout.
        unsafe { HugeAlloc.deallocate(self.ptr, Self::layout(self.len)) }
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised (zeroed) bytes we own.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

/// Opens (optionally creating, exclusively) a file for reading and writing,
/// with O_DIRECT when `direct`. Filesystems without O_DIRECT refuse it at
/// open or at the first I/O with EINVAL.
pub fn open_rw(path: &Path, create_new: bool, direct: bool) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create_new(create_new);
    if direct {
        options.custom_flags(libc::O_DIRECT);
    }
    options.open(path)
}

/// Reserves `len` bytes of `file` on its filesystem (fallocate, mode 0:
/// the blocks are allocated, reads of them give zeros, the size grows to
/// `len`), so that a full volume shows at once with ENOSPC rather than at a
/// later write. Filesystems without fallocate answer EOPNOTSUPP.
pub fn allocate(file: &File, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let len = libc::off_t::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    loop {
        // SAFETY: fallocate takes no pointers; the descriptor is open for as
        // long as `file` is borrowed.
        let r = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Bytes an unprivileged writer can still allocate on the filesystem
/// holding `path` (statvfs: available blocks × fragment size).
pub fn available_bytes(path: &Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: an all-zero statvfs is a valid value of this plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a valid, writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Whether an error says the filesystem has no room (ENOSPC) or the
/// user's quota is used up (EDQUOT): freeing space on the volume, or
/// growing it, ends it — unlike an I/O error.
pub fn is_out_of_space(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
}

/// Whether an error is a filesystem not implementing fallocate.
pub fn is_unsupported(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOSYS))
}

/// Whether an error is the kernel refusing O_DIRECT (tmpfs and some
/// overlay setups answer EINVAL).
pub fn is_direct_refused(err: &io::Error) -> bool {
    err.raw_os_error() == Some(libc::EINVAL)
}

/// An eventfd counter: the io_uring thread keeps a read of it in
/// its ring so that a submitter's write wakes the ring's single wait.
pub fn eventfd() -> io::Result<File> {
    eventfd_with(libc::EFD_CLOEXEC)
}

/// An eventfd whose reads fail with WouldBlock instead of waiting, for an
/// event loop that polls it.
pub fn eventfd_nonblocking() -> io::Result<File> {
    eventfd_with(libc::EFD_CLOEXEC | libc::EFD_NONBLOCK)
}

fn eventfd_with(flags: libc::c_int) -> io::Result<File> {
    // SAFETY: eventfd takes no pointers; a negative result is an error.
    let fd = unsafe { libc::eventfd(0, flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Replaces `path` with `bytes` so that a crash leaves either the old file
/// or the new one, never a mix: a sibling is written and fsynced, renamed
/// over it, and the directory fsynced so the rename itself is durable.
pub fn replace_durably(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let write = || -> io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    };
    write().inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buffers_are_aligned_zeroed_and_padded() {
        for len in [0, 1, 4095, 4096, 4097, 1 << 20] {
            let mut buf = AlignedBuf::zeroed(len);
            assert_eq!(buf.as_mut_ptr() as usize % IO_ALIGN, 0);
            assert_eq!(buf.len(), len);
            assert!(buf.iter().all(|&b| b == 0));
        }
        let buf = AlignedBuf::padded_copy(b"abc");
        assert_eq!(buf.len(), IO_ALIGN);
        assert_eq!(&buf[..4], b"abc\0");
    }
}
