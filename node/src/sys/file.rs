//! Files for the disk tier: buffers aligned for O_DIRECT, opening with or
//! without O_DIRECT, and the eventfd that wakes the io_uring thread.

use std::alloc::{self, Layout};
use std::fs::{File, OpenOptions};
use std::io;
use std::ops::{Deref, DerefMut};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::ptr::NonNull;

/// Alignment of every buffer and every offset handed to O_DIRECT I/O: the
/// page size, which covers any logical block size a disk reports.
pub const IO_ALIGN: usize = 4096;

/// A zero-initialised heap buffer whose address is `IO_ALIGN`-aligned, as
/// O_DIRECT requires. Its length is fixed at creation.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively (like a Box<[u8]>), so
// moving it to or sharing it with another thread is sound.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only allow reads of the bytes.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A buffer of `len` zero bytes (`len` may be 0).
    pub fn zeroed(len: usize) -> AlignedBuf {
        let layout = Self::layout(len);
        // SAFETY: the layout has a non-zero size (at least IO_ALIGN) and a
        // power-of-two alignment.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len }
    }

    /// A buffer holding `bytes`, zero-padded up to a multiple of `IO_ALIGN`.
    pub fn padded_copy(bytes: &[u8]) -> AlignedBuf {
        let mut buf = AlignedBuf::zeroed(bytes.len().next_multiple_of(IO_ALIGN));
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
        // SAFETY: ptr came from alloc_zeroed with exactly this layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
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

/// Whether an error is the kernel refusing O_DIRECT (tmpfs and some
/// overlay setups answer EINVAL).
pub fn is_direct_refused(err: &io::Error) -> bool {
    err.raw_os_error() == Some(libc::EINVAL)
}

/// A non-blocking eventfd counter: the io_uring thread keeps a read of it in
/// its ring so that a submitter's write wakes the ring's single wait.
pub fn eventfd() -> io::Result<File> {
    // SAFETY: eventfd takes no pointers; a negative result is an error.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
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
