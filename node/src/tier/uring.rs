//! The io_uring I/O engine: one ring (no SQPOLL) on a dedicated thread.
//! Submitters hand batches over a channel and poke an eventfd whose read
//! sits in the ring, so the thread has one wait for both new work and
//! completions, and everything queued meanwhile goes in one submission.
//!
//! A worker's event loop that watches a completion signal
//! (`io::defer_submissions`) gets a ring of its own instead, for the reads
//! it submits in a pass: it submits them itself, the kernel signals their
//! completions on the loop's eventfd, and the loop delivers them — no
//! thread in between, where the dedicated one cost two wake-ups per batch.
//! Ops anyone waits for synchronously, writes and syncs keep to the
//! dedicated thread, which completes them whatever a worker is doing.

use super::io::{IoDone, IoEngine, IoOp, IoRequest, LoopReaper, OnDone, cancelled};
use crate::sys::file;
use crate::sys::uring::{Ring, RingCompletion, RingOp};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;

/// Submission-queue entries; also the bound on ops in flight.
const RING_ENTRIES: u32 = 256;

enum Msg {
    Batch(Vec<IoRequest>),
    Shutdown,
}

/// io_uring on one dedicated thread.
pub struct UringEngine {
    tx: mpsc::Sender<Msg>,
    wake: Arc<File>,
    thread: Option<JoinHandle<()>>,
}

impl UringEngine {
    /// Fails (EPERM, ENOSYS...) where io_uring is refused.
    pub fn new() -> io::Result<UringEngine> {
        let ring: Ring<Token> = Ring::new(RING_ENTRIES)?;
        let wake = Arc::new(file::eventfd()?);
        let (tx, rx) = mpsc::channel();
        let thread_wake = wake.clone();
        let thread =
            std::thread::Builder::new().name("strata-uring".to_string()).spawn(move || run(ring, rx, thread_wake))?;
        Ok(UringEngine { tx, wake, thread: Some(thread) })
    }

    fn send(&self, msg: Msg) {
        if self.tx.send(msg).is_ok() {
            // A failed eventfd write can only be an overflow of its counter,
            // which already means "wake up".
            let _ = (&*self.wake).write(&1u64.to_ne_bytes());
        }
    }
}

/// What comes back with a completion.
struct Token {
    on_done: OnDone,
    /// For writes: the length that must be written in full.
    write_len: Option<usize>,
    /// When it went into the submission queue.
    started_ns: u64,
}

/// A batch being pushed: its ops and how many of the front ones still form
/// the linked chain ending at its last sync.
struct Pending {
    ops: VecDeque<IoRequest>,
    chain_left: usize,
}

fn run(mut ring: Ring<Token>, rx: mpsc::Receiver<Msg>, wake: Arc<File>) {
    let mut pending: VecDeque<Pending> = VecDeque::new();
    let mut shutting = false;
    loop {
        // Drain before re-arming: a wake written after this drain finds the
        // read armed (or its count waiting in the eventfd).
        while let Ok(msg) = rx.try_recv() {
            match msg {
                Msg::Batch(ops) if ops.iter().any(|r| r.file.os().is_err()) => {
                    // A simulated file: nothing of this batch can run here.
                    for req in ops {
                        fail(req, io::Error::new(io::ErrorKind::Unsupported, "not an OS file"));
                    }
                }
                Msg::Batch(ops) => {
                    let chain_left = ops.iter().rposition(|r| matches!(r.op, IoOp::Sync)).map_or(0, |i| i + 1);
                    pending.push_back(Pending { ops: ops.into(), chain_left });
                }
                Msg::Shutdown => shutting = true,
            }
        }
        if !ring.waker_armed() && !shutting {
            ring.arm_waker(wake.clone()).expect("the ring has room for the waker");
        }
        push_pending(&mut ring, &mut pending);
        if shutting && pending.is_empty() && ring.in_flight() == 0 && !ring.waker_armed() {
            return;
        }
        if let Err(e) = ring.submit_and_wait(1) {
            // Submission itself failed (a resource shortage): what is
            // queued stays queued; back off before trying again.
            tracing::error!("io_uring submit failed: {e}");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        ring.reap(deliver);
    }
}

fn push_pending(ring: &mut Ring<Token>, pending: &mut VecDeque<Pending>) {
    while let Some(front) = pending.front_mut() {
        let room = ring.sq_free().min((RING_ENTRIES as usize).saturating_sub(ring.in_flight()));
        let need = front.chain_left.max(1);
        if need > room {
            if front.chain_left > RING_ENTRIES as usize - 1 {
                // A chain that can never fit: refuse it whole.
                let p = pending.pop_front().expect("front exists");
                for req in p.ops {
                    fail(req, io::Error::other("batch chain longer than the ring"));
                }
                continue;
            }
            return;
        }
        let mut pushed = 0;
        while pushed < room {
            let Some(req) = front.ops.pop_front() else { break };
            let link = front.chain_left > 1;
            front.chain_left = front.chain_left.saturating_sub(1);
            pushed += 1;
            push_one(ring, req, link);
        }
        if front.ops.is_empty() {
            pending.pop_front();
        } else {
            return;
        }
    }
}

/// Pushes one op of a batch whose files were checked to be OS files.
fn push_one(ring: &mut Ring<Token>, req: IoRequest, link: bool) {
    let file = req.file.os().expect("checked when the batch arrived").clone();
    let (op, write_len) = match req.op {
        IoOp::Read { offset, buf } => (RingOp::Read { offset, buf }, None),
        IoOp::Write { offset, buf } => {
            let len = buf.len();
            (RingOp::Write { offset, buf }, Some(len))
        }
        IoOp::Sync => (RingOp::Fdatasync, None),
    };
    let token = Token { on_done: req.on_done, write_len, started_ns: crate::sys::clock::mono_ns() };
    if ring.push(file, op, link, token).is_err() {
        unreachable!("pushed only within the free room");
    }
}

fn fail(req: IoRequest, e: io::Error) {
    let buf = match req.op {
        IoOp::Read { buf, .. } | IoOp::Write { buf, .. } => Some(buf),
        IoOp::Sync => None,
    };
    (req.on_done)(IoDone { result: Err(e), buf, started_ns: 0 });
}

fn deliver(c: RingCompletion<Token>) {
    let result = match (c.result, c.token.write_len) {
        (Ok(n), Some(len)) if n != len => {
            Err(io::Error::new(io::ErrorKind::WriteZero, format!("short write: {n} of {len} bytes")))
        }
        (Err(e), _) if e.raw_os_error() == Some(libc::ECANCELED) => Err(cancelled()),
        (r, _) => r,
    };
    (c.token.on_done)(IoDone { result, buf: c.buf, started_ns: c.token.started_ns });
}

impl IoEngine for UringEngine {
    fn name(&self) -> &'static str {
        "io_uring"
    }
    fn submit(&self, batch: Vec<IoRequest>) {
        if !batch.is_empty() {
            self.send(Msg::Batch(batch));
        }
    }
    fn submit_from_loop(&self, batch: Vec<IoRequest>) {
        let rest = submit_on_loop(batch);
        self.submit(rest);
    }
}

/// Entries of a worker's own ring: the reads one pass of its loop may have
/// in flight before the rest go to the dedicated thread.
const LOOP_RING_ENTRIES: u32 = 256;

/// This thread's own ring: not tried yet, refused, or there.
enum LoopRing {
    Untried,
    Refused,
    Ready(Box<Ring<Token>>),
}

thread_local! {
    static LOOP_RING: RefCell<LoopRing> = const { RefCell::new(LoopRing::Untried) };
}

/// Puts what it can of `batch` in this thread's own ring and submits it;
/// returns the rest (everything, on a thread without a completion signal,
/// and for a batch with a sync, whose order the dedicated thread keeps).
fn submit_on_loop(batch: Vec<IoRequest>) -> Vec<IoRequest> {
    if batch.iter().any(|r| matches!(r.op, IoOp::Sync) || r.file.os().is_err()) {
        return batch;
    }
    LOOP_RING.with_borrow_mut(|state| {
        if matches!(state, LoopRing::Untried) {
            *state = match super::io::loop_signal().map(|fd| Ring::for_event_loop(LOOP_RING_ENTRIES, &fd)) {
                Some(Ok(ring)) => {
                    super::io::set_loop_reaper(LoopReaper {
                        reap: reap_on_loop,
                        backlog: backlog_on_loop,
                        finish: finish_on_loop,
                    });
                    LoopRing::Ready(Box::new(ring))
                }
                Some(Err(e)) => {
                    tracing::warn!("a worker's own io_uring was refused ({e}); its reads go through the I/O thread");
                    LoopRing::Refused
                }
                None => LoopRing::Refused,
            };
        }
        let LoopRing::Ready(ring) = state else { return batch };
        let mut rest = Vec::new();
        for req in batch {
            let room = ring.sq_free().min((LOOP_RING_ENTRIES as usize).saturating_sub(ring.in_flight()));
            if room == 0 {
                rest.push(req);
            } else {
                push_one(ring, req, false);
            }
        }
        // What the kernel did not take stays queued: the loop tries again
        // soon (`backlog_on_loop`), whatever else it does.
        if let Err(e) = ring.submit() {
            tracing::error!("io_uring submit failed: {e}");
        }
        rest
    })
}

/// Delivers what completed in this thread's ring, outside its borrow (a
/// completion may start another read), then submits anything the kernel
/// had no room for.
fn reap_on_loop() -> usize {
    let mut done = Vec::new();
    LOOP_RING.with_borrow_mut(|state| {
        if let LoopRing::Ready(ring) = state {
            ring.reap(|c| done.push(c));
            if ring.unsubmitted() > 0
                && let Err(e) = ring.submit()
            {
                tracing::error!("io_uring submit failed: {e}");
            }
        }
    });
    let n = done.len();
    for c in done {
        // A completion that panicked must not take the others with it:
        // their commands would wait for good.
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| deliver(c))).is_err() {
            tracing::error!("a disk read's completion panicked");
        }
    }
    n
}

/// Whether this thread's ring holds entries the kernel has not taken yet
/// (it could not allocate for them): no completion will signal the loop
/// about those, so it must try again by itself.
fn backlog_on_loop() -> bool {
    LOOP_RING.with_borrow_mut(|state| match state {
        LoopRing::Ready(ring) => ring.unsubmitted() > 0,
        _ => false,
    })
}

/// Waits for every op of this thread's ring and delivers it.
fn finish_on_loop() {
    loop {
        let waiting = LOOP_RING.with_borrow_mut(|state| match state {
            LoopRing::Ready(ring) if ring.in_flight() > 0 => {
                if let Err(e) = ring.submit_and_wait(1) {
                    tracing::error!("io_uring wait failed: {e}");
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                true
            }
            _ => false,
        });
        reap_on_loop();
        if !waiting {
            return;
        }
    }
}

impl Drop for UringEngine {
    /// Completes everything submitted, then stops the thread.
    fn drop(&mut self) {
        self.send(Msg::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
