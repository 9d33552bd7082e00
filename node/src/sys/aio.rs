//! Linux native AIO (io_setup, io_submit, io_getevents) for O_DIRECT reads:
//! asynchronous as io_uring's are, and allowed by the container runtimes'
//! default seccomp profiles that refuse io_uring. A small safe wrapper: the
//! context owns every buffer and file the kernel may touch until the event
//! for it is reaped, which is what makes submitting sound.

use super::file::AlignedBuf;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;

// From linux/aio_abi.h.
const IOCB_CMD_PREAD: u16 = 0;
const IOCB_FLAG_RESFD: u32 = 1;
/// RWF_NOWAIT: a read that would block in submission (an inode lock, an
/// extent map not cached, no free request in the block layer) fails with
/// EAGAIN instead of blocking the event loop that submits it.
const RWF_NOWAIT: i32 = 0x8;

/// `struct iocb` (little-endian layout: `aio_key` before `aio_rw_flags`).
#[repr(C)]
#[derive(Default)]
struct Iocb {
    aio_data: u64,
    aio_key: u32,
    aio_rw_flags: i32,
    aio_lio_opcode: u16,
    aio_reqprio: i16,
    aio_fildes: u32,
    aio_buf: u64,
    aio_nbytes: u64,
    aio_offset: i64,
    aio_reserved2: u64,
    aio_flags: u32,
    aio_resfd: u32,
}

/// `struct io_event`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct IoEvent {
    data: u64,
    obj: u64,
    res: i64,
    res2: i64,
}

/// A reaped read: the token given at push, the kernel's result (bytes
/// read) and the buffer, handed back.
pub struct AioCompletion<T> {
    pub token: T,
    pub result: io::Result<usize>,
    pub buf: AlignedBuf,
}

struct Slot<T> {
    token: T,
    // Kept alive (fd open, memory valid) until the kernel is done.
    file: Arc<File>,
    offset: u64,
    buf: AlignedBuf,
}

/// One AIO context with its reads: pushed, submitted, reaped.
pub struct AioContext<T> {
    ctx: libc::c_ulong,
    capacity: usize,
    slots: Vec<Option<Slot<T>>>,
    free: Vec<usize>,
    /// Pushed and not yet taken by the kernel, in push order.
    queued: Vec<usize>,
    /// Taken by the kernel and not yet reaped.
    in_flight: usize,
    /// The eventfd every completion signals.
    signal: Arc<File>,
}

impl<T> AioContext<T> {
    /// A context for up to `capacity` reads at once whose completions each
    /// signal `eventfd`. Fails (ENOSYS, EPERM, EAGAIN past
    /// fs.aio-max-nr) where AIO is refused.
    pub fn new(capacity: usize, eventfd: Arc<File>) -> io::Result<AioContext<T>> {
        let mut ctx: libc::c_ulong = 0;
        // SAFETY: io_setup writes one aio_context_t to the pointer given,
        // which points at `ctx`, initialised to 0 as the call requires.
        let rc = unsafe { libc::syscall(libc::SYS_io_setup, capacity as libc::c_long, &mut ctx as *mut libc::c_ulong) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(AioContext {
            ctx,
            capacity,
            slots: Vec::new(),
            free: Vec::new(),
            queued: Vec::new(),
            in_flight: 0,
            signal: eventfd,
        })
    }

    /// Reads pushed and not yet reaped (submitted or not).
    pub fn busy(&self) -> usize {
        self.in_flight + self.queued.len()
    }

    /// Room for more reads.
    pub fn room(&self) -> usize {
        self.capacity.saturating_sub(self.busy())
    }

    /// Reads pushed that the kernel has not taken yet.
    pub fn unsubmitted(&self) -> usize {
        self.queued.len()
    }

    /// Queues a read of `buf.len()` bytes of `file` at `offset` (submitted
    /// at the next [`AioContext::submit`]). Gives it back when full.
    pub fn push_read(
        &mut self,
        file: Arc<File>,
        offset: u64,
        buf: AlignedBuf,
        token: T,
    ) -> Result<(), (AlignedBuf, T)> {
        if self.room() == 0 {
            return Err((buf, token));
        }
        let index = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        self.slots[index] = Some(Slot { token, file, offset, buf });
        self.queued.push(index);
        Ok(())
    }

    /// Submits what was pushed. Reads the kernel refused outright (EAGAIN:
    /// it would have blocked; EOPNOTSUPP: no RWF_NOWAIT on this file...)
    /// are handed back with the error; the rest are in flight.
    pub fn submit(&mut self) -> Vec<AioCompletion<T>> {
        let mut refused = Vec::new();
        while !self.queued.is_empty() {
            let mut iocbs: Vec<Iocb> = Vec::with_capacity(self.queued.len());
            for &index in &self.queued {
                let slot = self.slots[index].as_mut().expect("a queued slot is full");
                iocbs.push(Iocb {
                    aio_data: index as u64,
                    aio_rw_flags: RWF_NOWAIT,
                    aio_lio_opcode: IOCB_CMD_PREAD,
                    aio_fildes: slot.file.as_raw_fd() as u32,
                    aio_buf: slot.buf.as_mut_ptr() as u64,
                    aio_nbytes: slot.buf.len() as u64,
                    aio_offset: slot.offset as i64,
                    aio_flags: IOCB_FLAG_RESFD,
                    aio_resfd: self.signal.as_raw_fd() as u32,
                    ..Iocb::default()
                });
            }
            let mut ptrs: Vec<*mut Iocb> = iocbs.iter_mut().map(|i| i as *mut Iocb).collect();
            // SAFETY: `ptrs` holds iocbs.len() pointers to live iocbs, which
            // the kernel copies during the call. Each names a buffer and an
            // fd owned by slots[aio_data], which stays full until the event
            // for it is reaped (or Drop waits for it in io_destroy).
            let rc =
                unsafe { libc::syscall(libc::SYS_io_submit, self.ctx, ptrs.len() as libc::c_long, ptrs.as_mut_ptr()) };
            if rc > 0 {
                self.in_flight += rc as usize;
                self.queued.drain(..rc as usize);
                continue;
            }
            let err = if rc == 0 { io::Error::from_raw_os_error(libc::EAGAIN) } else { io::Error::last_os_error() };
            if err.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            // The first read was refused: it is handed back, the others retried.
            let index = self.queued.remove(0);
            let slot = self.release(index);
            refused.push(AioCompletion { token: slot.token, result: Err(err), buf: slot.buf });
        }
        refused
    }

    /// Hands every completed read to `deliver`, waiting for at least `min`
    /// of them (0: none). Returns how many it delivered.
    pub fn reap(&mut self, min: usize, mut deliver: impl FnMut(AioCompletion<T>)) -> io::Result<usize> {
        if self.in_flight == 0 {
            return Ok(0);
        }
        let mut events = vec![IoEvent::default(); self.in_flight];
        let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        let timeout: *const libc::timespec = if min == 0 { &zero } else { std::ptr::null() };
        let rc = loop {
            // SAFETY: `events` has room for events.len() io_events, the most
            // the call is told to write; the timeout is null or points at
            // `zero`, alive for the call.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_io_getevents,
                    self.ctx,
                    min.min(events.len()) as libc::c_long,
                    events.len() as libc::c_long,
                    events.as_mut_ptr(),
                    timeout,
                )
            };
            if rc >= 0 {
                break rc as usize;
            }
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINTR) {
                return Err(err);
            }
        };
        for ev in &events[..rc] {
            let slot = self.release(ev.data as usize);
            self.in_flight -= 1;
            let result =
                if ev.res < 0 { Err(io::Error::from_raw_os_error(-ev.res as i32)) } else { Ok(ev.res as usize) };
            deliver(AioCompletion { token: slot.token, result, buf: slot.buf });
        }
        Ok(rc)
    }

    fn release(&mut self, index: usize) -> Slot<T> {
        let slot = self.slots[index].take().expect("an event for an empty slot");
        self.free.push(index);
        slot
    }
}

impl<T> Drop for AioContext<T> {
    fn drop(&mut self) {
        // SAFETY: io_destroy cancels what it can and blocks until every
        // read of the context has completed: the buffers and files in
        // `slots` are freed only after it returns.
        let rc = unsafe { libc::syscall(libc::SYS_io_destroy, self.ctx) };
        if rc < 0 && self.in_flight > 0 {
            // Not destroyed: the kernel may still write into the buffers.
            std::mem::forget(std::mem::take(&mut self.slots));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::file::{IO_ALIGN, open_rw};
    use std::os::unix::fs::FileExt;

    fn scratch(name: &str) -> (std::path::PathBuf, Arc<File>) {
        let dir = std::env::temp_dir().join(format!("strata-aio-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let _ = std::fs::remove_file(&path);
        let f = open_rw(&path, true, true).or_else(|_| open_rw(&path, true, false)).unwrap();
        for i in 0..8u8 {
            f.write_all_at(&vec![i + 1; IO_ALIGN], i as u64 * IO_ALIGN as u64).unwrap();
        }
        f.sync_all().unwrap();
        (dir, Arc::new(f))
    }

    #[test]
    fn reads_come_back_with_their_bytes_and_signal_the_eventfd() {
        let (dir, f) = scratch("reads");
        let signal = Arc::new(crate::sys::file::eventfd().unwrap());
        let Ok(mut ctx) = AioContext::<usize>::new(16, signal.clone()) else {
            return; // AIO refused here: nothing to test.
        };
        for i in 0..16 {
            let off = (i % 8 * IO_ALIGN) as u64;
            assert!(ctx.push_read(f.clone(), off, AlignedBuf::zeroed(IO_ALIGN), i).is_ok());
        }
        assert_eq!(ctx.room(), 0);
        assert!(ctx.push_read(f.clone(), 0, AlignedBuf::zeroed(IO_ALIGN), 99).is_err(), "full");
        // Refused reads (EAGAIN under RWF_NOWAIT) come back; count them as done.
        let mut done = [false; 16];
        for c in ctx.submit() {
            assert!(c.result.is_err());
            done[c.token] = true;
        }
        while ctx.busy() > 0 {
            ctx.reap(1, |c| {
                assert_eq!(c.result.unwrap(), IO_ALIGN);
                assert!(c.buf.iter().all(|&b| b == (c.token % 8) as u8 + 1), "read {} came back wrong", c.token);
                done[c.token] = true;
            })
            .unwrap();
        }
        assert!(done.iter().all(|&d| d));
        let mut count = [0u8; 8];
        use std::io::Read;
        (&*signal).read_exact(&mut count).unwrap();
        assert!(u64::from_ne_bytes(count) > 0, "completions signal the eventfd");
        drop(ctx);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn dropping_with_reads_in_flight_waits_for_them() {
        let (dir, f) = scratch("drop");
        let signal = Arc::new(crate::sys::file::eventfd().unwrap());
        let Ok(mut ctx) = AioContext::<()>::new(64, signal) else { return };
        for i in 0..64 {
            let _ = ctx.push_read(f.clone(), (i % 8 * IO_ALIGN) as u64, AlignedBuf::zeroed(IO_ALIGN), ());
        }
        ctx.submit();
        drop(ctx); // io_destroy waits; the buffers are freed after it
        let _ = std::fs::remove_dir_all(dir);
    }
}
