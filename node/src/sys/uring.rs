//! A small safe wrapper over one io_uring: it owns every buffer and file
//! the kernel may touch until the completion for it is reaped, which is
//! what makes pushing an entry sound.

use super::file::AlignedBuf;
use io_uring::{IoUring, opcode, squeue, types};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;

/// One operation on a file, with the buffer it reads into or writes from.
pub enum RingOp {
    /// Read `buf.len()` bytes at `offset` into `buf`.
    Read { offset: u64, buf: AlignedBuf },
    /// Write all of `buf` at `offset`.
    Write { offset: u64, buf: AlignedBuf },
    /// fdatasync the file.
    Fdatasync,
}

/// A reaped completion: the token given at push, the kernel's result
/// (bytes transferred) and the buffer, handed back.
pub struct RingCompletion<T> {
    pub token: T,
    pub result: io::Result<usize>,
    pub buf: Option<AlignedBuf>,
}

struct Slot<T> {
    token: T,
    // Kept alive (fd open, memory valid) until the kernel is done.
    _file: Arc<File>,
    buf: Option<AlignedBuf>,
}

/// The eventfd read kept in the ring so that one wait covers both new
/// requests and completions.
struct Waker {
    file: Arc<File>,
    buf: Box<[u8; 8]>,
    armed: bool,
}

const WAKER_TOKEN: u64 = u64::MAX;

/// One io_uring (no SQPOLL) with its in-flight operations.
pub struct Ring<T> {
    ring: IoUring,
    slots: Vec<Option<Slot<T>>>,
    free: Vec<usize>,
    in_flight: usize,
    waker: Option<Waker>,
}

impl<T> Ring<T> {
    /// Sets up a ring of `entries` submission slots. Fails with EPERM or
    /// ENOSYS where a seccomp profile or the kernel refuses io_uring.
    pub fn new(entries: u32) -> io::Result<Ring<T>> {
        Ok(Ring::with(IoUring::new(entries)?))
    }

    /// A ring owned by one thread's event loop, whose completions signal
    /// `eventfd` (IORING_REGISTER_EVENTFD). The kernel's completion work
    /// runs at that thread's next system call instead of interrupting it
    /// (IORING_SETUP_COOP_TASKRUN, Linux 5.19; a plain ring before that):
    /// an event loop makes system calls all the time, and a sleeping one
    /// is still woken.
    pub fn for_event_loop(entries: u32, eventfd: &File) -> io::Result<Ring<T>> {
        let ring = match IoUring::builder().setup_coop_taskrun().build(entries) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => IoUring::new(entries)?,
            other => other?,
        };
        ring.submitter().register_eventfd(eventfd.as_raw_fd())?;
        Ok(Ring::with(ring))
    }

    fn with(ring: IoUring) -> Ring<T> {
        Ring { ring, slots: Vec::new(), free: Vec::new(), in_flight: 0, waker: None }
    }

    /// Free submission-queue entries.
    pub fn sq_free(&mut self) -> usize {
        let sq = self.ring.submission();
        sq.capacity() - sq.len()
    }

    /// Operations pushed and not yet reaped (the waker read excluded).
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Queues `op` on `file` (submitted at the next `submit_and_wait`).
    /// With `link`, the next pushed entry starts only after this one
    /// succeeds (IOSQE_IO_LINK). Gives the op back when the queue is full.
    pub fn push(&mut self, file: Arc<File>, op: RingOp, link: bool, token: T) -> Result<(), (RingOp, T)> {
        if self.sq_free() == 0 {
            return Err((op, token));
        }
        let fd = types::Fd(file.as_raw_fd());
        let (entry, buf) = match op {
            RingOp::Read { offset, mut buf } => {
                let e = opcode::Read::new(fd, buf.as_mut_ptr(), buf.len() as u32).offset(offset);
                (e.build(), Some(buf))
            }
            RingOp::Write { offset, mut buf } => {
                let e = opcode::Write::new(fd, buf.as_mut_ptr(), buf.len() as u32).offset(offset);
                (e.build(), Some(buf))
            }
            RingOp::Fdatasync => (opcode::Fsync::new(fd).flags(types::FsyncFlags::DATASYNC).build(), None),
        };
        let index = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        let flags = if link { squeue::Flags::IO_LINK } else { squeue::Flags::empty() };
        let entry = entry.user_data(index as u64).flags(flags);
        self.slots[index] = Some(Slot { token, _file: file, buf });
        // SAFETY: the fd and the buffer (heap memory that moving the
        // AlignedBuf does not relocate) live in slots[index] until the
        // completion carrying user_data == index is reaped, or are leaked
        // by Drop if the ring goes away first.
        unsafe { self.ring.submission().push(&entry) }.expect("checked sq_free above");
        self.in_flight += 1;
        Ok(())
    }

    /// Keeps a read of `eventfd` in the ring; `reap` reports when it fired.
    /// Re-arm after each firing.
    pub fn arm_waker(&mut self, eventfd: Arc<File>) -> io::Result<()> {
        if self.sq_free() == 0 {
            return Err(io::Error::other("submission queue full"));
        }
        let waker = self.waker.get_or_insert_with(|| Waker { file: eventfd, buf: Box::new([0; 8]), armed: false });
        assert!(!waker.armed, "waker armed twice");
        let entry = opcode::Read::new(types::Fd(waker.file.as_raw_fd()), waker.buf.as_mut_ptr(), 8)
            .offset(u64::MAX)
            .build()
            .user_data(WAKER_TOKEN);
        // SAFETY: the 8-byte box and the eventfd are owned by self.waker,
        // which is neither dropped nor replaced while armed (Drop leaks it).
        unsafe { self.ring.submission().push(&entry) }.expect("checked sq_free above");
        waker.armed = true;
        Ok(())
    }

    /// Submits what was pushed without waiting. What the kernel did not
    /// take (EAGAIN: it could not allocate requests; EBUSY: completions
    /// overflowed) stays queued for the next call.
    pub fn submit(&mut self) -> io::Result<usize> {
        loop {
            match self.ring.submit() {
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EAGAIN)) => return Ok(0),
                other => return other,
            }
        }
    }

    /// Entries pushed and not yet taken by the kernel.
    pub fn unsubmitted(&mut self) -> usize {
        self.ring.submission().len()
    }

    /// Submits what was pushed and waits for at least `want` completions.
    pub fn submit_and_wait(&mut self, want: usize) -> io::Result<usize> {
        loop {
            match self.ring.submit_and_wait(want) {
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                // The completion queue is full: reaping makes room.
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => return Ok(0),
                other => return other,
            }
        }
    }

    /// Hands every available completion to `deliver`; returns whether the
    /// waker fired (it is then disarmed).
    pub fn reap(&mut self, mut deliver: impl FnMut(RingCompletion<T>)) -> bool {
        let mut woken = false;
        let done: Vec<(u64, i32)> = self.ring.completion().map(|cqe| (cqe.user_data(), cqe.result())).collect();
        for (user_data, res) in done {
            if user_data == WAKER_TOKEN {
                if let Some(w) = self.waker.as_mut() {
                    w.armed = false;
                }
                woken = true;
                continue;
            }
            let index = user_data as usize;
            let slot = self.slots[index].take().expect("completion for an empty slot");
            self.free.push(index);
            self.in_flight -= 1;
            let result = if res < 0 { Err(io::Error::from_raw_os_error(-res)) } else { Ok(res as usize) };
            deliver(RingCompletion { token: slot.token, result, buf: slot.buf });
        }
        woken
    }

    /// Whether the waker read is in the ring.
    pub fn waker_armed(&self) -> bool {
        self.waker.as_ref().is_some_and(|w| w.armed)
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // The kernel may still write into buffers of operations not yet
        // reaped, even after the ring is closed: leak them rather than free.
        if self.in_flight > 0 {
            std::mem::forget(std::mem::take(&mut self.slots));
        }
        if self.waker_armed() {
            std::mem::forget(self.waker.take());
        }
    }
}
