//! The io_uring I/O engine: one ring (no SQPOLL) on a dedicated thread.
//! Submitters hand batches over a channel and poke an eventfd whose read
//! sits in the ring, so the thread has one wait for both new work and
//! completions, and everything queued meanwhile goes in one submission.

use super::io::{IoDone, IoEngine, IoOp, IoRequest, OnDone, cancelled};
use crate::sys::file;
use crate::sys::uring::{Ring, RingCompletion, RingOp};
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
