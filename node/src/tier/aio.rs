//! Linux native AIO for the reads a worker's event loop submits, in the
//! `aio` engine (the thread pool otherwise): for where io_uring is refused
//! (the container runtimes' default seccomp profiles) and AIO is not. The
//! worker submits a pass's reads in one `io_submit`, each completion
//! signals the loop's eventfd and the loop delivers them (`reap_loop`): no
//! thread in between, where the pool costs a wake-up of one of its threads
//! per read and one of the worker per completion, which on a busy machine
//! wait for a CPU.
//!
//! Only O_DIRECT reads come here (on a buffered file `io_submit` would read
//! synchronously). Writes, syncs and the reads a thread waits for keep to
//! the pool's threads, and so do the reads the kernel would have blocked
//! the loop for (RWF_NOWAIT refuses them with EAGAIN): they are retried on
//! the pool.

use super::io::{FileHandle, IoDone, IoOp, IoRequest, LoopReaper, OnDone};
use crate::sys::aio::{AioCompletion, AioContext};
use crate::sys::file;
use std::cell::RefCell;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Reads one worker may have in flight through AIO; more wait on the pool.
const LOOP_AIO_READS: usize = 256;

/// Where a read goes when AIO will not take it: the pool's threads.
pub(super) type Fallback = Arc<dyn Fn(Vec<IoRequest>) + Send + Sync>;

/// Reads AIO refused or bounced (EAGAIN) and the pool then served, over the
/// process: the log says when it is most of them.
pub static RETRIED_ON_POOL: AtomicU64 = AtomicU64::new(0);

struct Token {
    on_done: OnDone,
    file: FileHandle,
    offset: u64,
    started_ns: u64,
    fallback: Fallback,
}

/// This thread's AIO context: not tried yet, refused, or there (and
/// whether it still takes new reads: not once the file system refused
/// RWF_NOWAIT).
enum LoopAio {
    Untried,
    Refused,
    Ready { ctx: Box<AioContext<Token>>, taking: bool },
}

thread_local! {
    static LOOP_AIO: RefCell<LoopAio> = const { RefCell::new(LoopAio::Untried) };
}

/// Whether the kernel and the seccomp profile allow AIO: a context of one
/// read, made and destroyed.
pub fn probe() -> io::Result<()> {
    AioContext::<()>::new(1, Arc::new(file::eventfd()?)).map(drop)
}

/// Puts the O_DIRECT reads of `batch` in this thread's AIO context and
/// submits them; returns the rest (everything on a thread without a
/// completion signal), for the pool.
pub(super) fn submit_on_loop(batch: Vec<IoRequest>, fallback: &Fallback) -> Vec<IoRequest> {
    if !batch.iter().any(|r| matches!(r.op, IoOp::Read { .. }) && r.file.direct()) {
        return batch;
    }
    let (mut rest, refused) = LOOP_AIO.with_borrow_mut(|state| {
        if matches!(state, LoopAio::Untried) {
            *state = open_loop_context();
        }
        match state {
            LoopAio::Ready { ctx, taking: taking @ true } => {
                let rest = push_reads(ctx, batch, fallback);
                let refused = ctx.submit();
                if let Some(c) = refused.iter().find(|c| !is_eagain(&c.result)) {
                    // Not "would block": the file system has no RWF_NOWAIT (or
                    // refuses AIO); every read would fail the same way.
                    let e = c.result.as_ref().err().map(ToString::to_string).unwrap_or_default();
                    tracing::warn!("AIO refused a read ({e}); this worker's reads go through the I/O threads");
                    *taking = false;
                }
                (rest, refused)
            }
            _ => (batch, Vec::new()),
        }
    });
    RETRIED_ON_POOL.fetch_add(refused.len() as u64, Relaxed);
    rest.extend(refused.into_iter().map(|c| back_to_request(c.token, c.buf)));
    rest
}

/// This thread's context, if it has a completion signal and AIO allows one.
fn open_loop_context() -> LoopAio {
    match super::io::loop_signal().map(|fd| AioContext::new(LOOP_AIO_READS, fd)) {
        Some(Ok(ctx)) => {
            super::io::set_loop_reaper(LoopReaper { reap: reap_on_loop, backlog: || false, finish: finish_on_loop });
            LoopAio::Ready { ctx: Box::new(ctx), taking: true }
        }
        Some(Err(e)) => {
            tracing::warn!("a worker's AIO context was refused ({e}); its reads go through the I/O threads");
            LoopAio::Refused
        }
        None => LoopAio::Refused,
    }
}

/// Queues the O_DIRECT reads of `batch` that fit in `ctx`; returns the rest.
fn push_reads(ctx: &mut AioContext<Token>, batch: Vec<IoRequest>, fallback: &Fallback) -> Vec<IoRequest> {
    let mut rest = Vec::new();
    for req in batch {
        let IoRequest { file: handle, op: IoOp::Read { offset, buf }, on_done } = req else {
            rest.push(req);
            continue;
        };
        if ctx.room() == 0 || !handle.direct() {
            rest.push(IoRequest { file: handle, op: IoOp::Read { offset, buf }, on_done });
            continue;
        }
        let os = handle.os().expect("a direct file is an OS file").clone();
        let token = Token {
            on_done,
            file: handle,
            offset,
            started_ns: crate::sys::clock::mono_ns(),
            fallback: fallback.clone(),
        };
        if let Err((buf, token)) = ctx.push_read(os, offset, buf, token) {
            rest.push(back_to_request(token, buf));
        }
    }
    rest
}

fn is_eagain(r: &io::Result<usize>) -> bool {
    matches!(r, Err(e) if e.raw_os_error() == Some(libc::EAGAIN))
}

fn back_to_request(token: Token, buf: crate::sys::file::AlignedBuf) -> IoRequest {
    IoRequest { file: token.file, op: IoOp::Read { offset: token.offset, buf }, on_done: token.on_done }
}

/// Delivers what completed in this thread's context, outside its borrow
/// (a completion may start another read); reads the block layer bounced
/// (EAGAIN) go to the pool.
fn reap_on_loop() -> usize {
    reap(0).unwrap_or(0)
}

/// Delivers what completed, waiting for `min` completions first; None when
/// the kernel would not say (io_getevents failed).
fn reap(min: usize) -> Option<usize> {
    let mut done = Vec::new();
    let ok = LOOP_AIO.with_borrow_mut(|state| match state {
        LoopAio::Ready { ctx, .. } => match ctx.reap(min, |c| done.push(c)) {
            Ok(_) => true,
            Err(e) => {
                tracing::error!("io_getevents failed: {e}");
                false
            }
        },
        _ => true,
    });
    let n = done.len();
    for c in done {
        if is_eagain(&c.result) {
            RETRIED_ON_POOL.fetch_add(1, Relaxed);
            let fallback = c.token.fallback.clone();
            fallback(vec![back_to_request(c.token, c.buf)]);
            continue;
        }
        // A completion that panicked must not take the others with it:
        // their commands would wait for good.
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| deliver(c))).is_err() {
            tracing::error!("a disk read's completion panicked");
        }
    }
    ok.then_some(n)
}

fn deliver(c: AioCompletion<Token>) {
    (c.token.on_done)(IoDone { result: c.result, buf: Some(c.buf), started_ns: c.token.started_ns });
}

/// Waits for every read of this thread's context and delivers it.
fn finish_on_loop() {
    while LOOP_AIO.with_borrow(|state| matches!(state, LoopAio::Ready { ctx, .. } if ctx.busy() > 0)) {
        if reap(1).is_none() {
            // Not waitable: dropping the context (io_destroy) at the
            // thread's end still waits for the reads before their buffers go.
            return;
        }
    }
}
