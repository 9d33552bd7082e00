//! The thread-pool I/O engine: pread / pwrite / fdatasync on a few threads.
//! It works everywhere, including under seccomp profiles that refuse
//! io_uring, so it is a main path, not a fallback of last resort.

use super::io::{IoDone, IoEngine, IoOp, IoRequest, cancelled};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;

/// A group of ops followed by the sync that must wait for all of them, and
/// the rest of the batch after that sync.
struct Barrier {
    remaining: AtomicUsize,
    failed: AtomicBool,
    then: Mutex<Option<(IoRequest, VecDeque<IoRequest>)>>,
}

struct Job {
    req: IoRequest,
    /// Set for an op before a sync; None for the sync itself (whose
    /// continuation is in `rest`) and for ops after the last sync.
    barrier: Option<Arc<Barrier>>,
    rest: VecDeque<IoRequest>,
}

struct Queue {
    jobs: Mutex<(VecDeque<Job>, bool)>,
    ready: Condvar,
}

/// pread/pwrite/fdatasync on `threads` threads sharing one queue; with
/// `aio`, the reads workers submit from their event loops go by Linux AIO
/// instead (`tier::aio`), the pool taking what AIO will not.
pub struct PoolEngine {
    queue: Arc<Queue>,
    threads: Vec<JoinHandle<()>>,
    /// Set for the `aio` engine: where the loops' refused reads go.
    aio: Option<super::aio::Fallback>,
}

impl PoolEngine {
    /// The `threads` engine.
    pub fn new(threads: usize) -> PoolEngine {
        Self::build(threads, false)
    }

    /// The `aio` engine (check [`super::aio::probe`] first).
    pub fn with_aio(threads: usize) -> PoolEngine {
        Self::build(threads, true)
    }

    fn build(threads: usize, aio: bool) -> PoolEngine {
        let queue = Arc::new(Queue { jobs: Mutex::new((VecDeque::new(), false)), ready: Condvar::new() });
        let threads = (0..threads.max(1))
            .map(|i| {
                let q = queue.clone();
                std::thread::Builder::new()
                    .name(format!("strata-io-{i}"))
                    .spawn(move || worker(&q))
                    .expect("spawning an I/O thread")
            })
            .collect();
        let aio = aio.then(|| {
            let q = queue.clone();
            Arc::new(move |batch: Vec<IoRequest>| dispatch(&q, batch.into())) as super::aio::Fallback
        });
        PoolEngine { queue, threads, aio }
    }
}

fn push_jobs(queue: &Queue, jobs: Vec<Job>) {
    if jobs.is_empty() {
        return;
    }
    let n = jobs.len();
    queue.jobs.lock().0.extend(jobs);
    if n == 1 {
        queue.ready.notify_one();
    } else {
        queue.ready.notify_all();
    }
}

/// Queues the batch up to and including its first sync; the remainder is
/// dispatched when that sync completes.
fn dispatch(queue: &Queue, mut batch: VecDeque<IoRequest>) {
    let Some(sync_at) = batch.iter().position(|r| matches!(r.op, IoOp::Sync)) else {
        let jobs = batch.into_iter().map(|req| Job { req, barrier: None, rest: VecDeque::new() }).collect();
        return push_jobs(queue, jobs);
    };
    let mut before: VecDeque<IoRequest> = batch.drain(..sync_at).collect();
    let sync = batch.pop_front().expect("sync is at sync_at");
    if before.is_empty() {
        return push_jobs(queue, vec![Job { req: sync, barrier: None, rest: batch }]);
    }
    let barrier = Arc::new(Barrier {
        remaining: AtomicUsize::new(before.len()),
        failed: AtomicBool::new(false),
        then: Mutex::new(Some((sync, batch))),
    });
    let jobs = before.drain(..).map(|req| Job { req, barrier: Some(barrier.clone()), rest: VecDeque::new() }).collect();
    push_jobs(queue, jobs);
}

fn execute(req: &mut IoRequest) -> io::Result<usize> {
    let file = req.file.os()?;
    match &mut req.op {
        IoOp::Read { offset, buf } => {
            let mut done = 0;
            while done < buf.len() {
                match file.read_at(&mut buf[done..], *offset + done as u64) {
                    Ok(0) => break,
                    Ok(n) => done += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
            Ok(done)
        }
        IoOp::Write { offset, buf } => file.write_all_at(buf, *offset).map(|()| buf.len()),
        IoOp::Sync => file.sync_data().map(|()| 0),
    }
}

fn complete(req: IoRequest, result: io::Result<usize>, started_ns: u64) {
    let buf = match req.op {
        IoOp::Read { buf, .. } | IoOp::Write { buf, .. } => Some(buf),
        IoOp::Sync => None,
    };
    (req.on_done)(IoDone { result, buf, started_ns });
}

fn worker(queue: &Queue) {
    loop {
        let job = {
            let mut guard = queue.jobs.lock();
            loop {
                if let Some(job) = guard.0.pop_front() {
                    break job;
                }
                if guard.1 {
                    return;
                }
                queue.ready.wait(&mut guard);
            }
        };
        let Job { mut req, barrier, rest } = job;
        let is_sync = matches!(req.op, IoOp::Sync);
        let started_ns = crate::sys::clock::mono_ns();
        let result = execute(&mut req);
        let failed = result.is_err();
        complete(req, result, started_ns);
        if is_sync {
            dispatch(queue, rest);
        } else if let Some(b) = barrier {
            if failed {
                b.failed.store(true, Ordering::Release);
            }
            if b.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
                let (sync, rest) = b.then.lock().take().expect("barrier released twice");
                if b.failed.load(Ordering::Acquire) {
                    complete(sync, Err(cancelled()), 0);
                    dispatch(queue, rest);
                } else {
                    push_jobs(queue, vec![Job { req: sync, barrier: None, rest }]);
                }
            }
        }
    }
}

impl IoEngine for PoolEngine {
    fn name(&self) -> &'static str {
        if self.aio.is_some() { "aio" } else { "threads" }
    }
    fn submit(&self, batch: Vec<IoRequest>) {
        dispatch(&self.queue, batch.into());
    }
    fn submit_from_loop(&self, batch: Vec<IoRequest>) {
        match &self.aio {
            Some(fallback) => dispatch(&self.queue, super::aio::submit_on_loop(batch, fallback).into()),
            None => self.submit(batch),
        }
    }
}

impl Drop for PoolEngine {
    /// Finishes every queued op (continuations included), then stops.
    fn drop(&mut self) {
        self.queue.jobs.lock().1 = true;
        self.queue.ready.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
