//! The I/O engine interface of the disk tier: batches of reads, writes and
//! fdatasyncs on segment files, completed asynchronously so that a worker
//! thread never blocks on the disk, and the volume (directory) that holds
//! the files.

use crate::sys::file::{self, AlignedBuf, IO_ALIGN};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};

/// One operation on a file. Offsets and lengths of reads and writes are
/// multiples of [`IO_ALIGN`] so that O_DIRECT accepts them.
#[derive(Debug)]
pub enum IoOp {
    /// Read `buf.len()` bytes at `offset`; fewer only at the end of file.
    Read { offset: u64, buf: AlignedBuf },
    /// Write all of `buf` at `offset`: completes with `Ok(buf.len())` or an error.
    Write { offset: u64, buf: AlignedBuf },
    /// fdatasync: a barrier that starts only once every op before it in the
    /// same batch has succeeded; if one failed, it is not performed and
    /// fails with [`cancelled`].
    Sync,
}

/// The outcome of one op: bytes transferred (0 for a sync) and the buffer,
/// handed back to be reused.
#[derive(Debug)]
pub struct IoDone {
    pub result: io::Result<usize>,
    pub buf: Option<AlignedBuf>,
    /// When the engine started the op on the device (`sys::clock::mono_ns`;
    /// 0 for an op that never got there): the time before it was queueing.
    pub started_ns: u64,
}

/// Called once with the outcome, on an engine thread or, for ops a worker
/// submitted from its loop, on that worker in [`reap_loop`] (never inside
/// `submit`): it must be short, e.g. send on a channel and wake a worker.
pub type OnDone = Box<dyn FnOnce(IoDone) + Send>;

/// One op on one file with its completion callback.
pub struct IoRequest {
    pub file: FileHandle,
    pub op: IoOp,
    pub on_done: OnDone,
}

/// Submits batches of file operations and completes them asynchronously.
pub trait IoEngine: Send + Sync {
    /// "io_uring", "aio", "threads" or "sim".
    fn name(&self) -> &'static str;
    /// Queues a batch; never blocks on the disk. Ops of a batch run in any
    /// order and concurrently, except that an [`IoOp::Sync`] waits for every
    /// op before it in the batch.
    fn submit(&self, batch: Vec<IoRequest>);
    /// [`IoEngine::submit`] from a worker's event loop that watches a
    /// completion signal ([`defer_submissions`]): an engine may then submit
    /// on this thread and complete the ops when the loop calls
    /// [`reap_loop`], with no other thread woken.
    fn submit_from_loop(&self, batch: Vec<IoRequest>) {
        self.submit(batch)
    }
}

/// The error of a sync skipped because an op before it failed.
pub fn cancelled() -> io::Error {
    io::Error::other("cancelled: an earlier operation of the batch failed")
}

/// An open segment file, cheap to clone; kept open by in-flight ops.
#[derive(Clone, Debug)]
pub struct FileHandle(pub(crate) Arc<FileKind>);

#[derive(Debug)]
pub(crate) enum FileKind {
    /// A file of the volume, and whether it was opened with O_DIRECT.
    Os(Arc<File>, bool),
    /// A file of the simulated disk (tests).
    #[cfg(test)]
    Sim(u64),
}

impl FileHandle {
    /// Whether it is an OS file opened with O_DIRECT.
    pub(crate) fn direct(&self) -> bool {
        matches!(&*self.0, FileKind::Os(_, true))
    }

    pub(crate) fn os(&self) -> io::Result<&Arc<File>> {
        match &*self.0 {
            FileKind::Os(f, _) => Ok(f),
            #[cfg(test)]
            FileKind::Sim(_) => {
                Err(io::Error::new(io::ErrorKind::Unsupported, "a simulated file handed to a real I/O engine"))
            }
        }
    }
}

/// A directory of segment files.
pub trait Volume: Send + Sync {
    /// Names of the files in the volume.
    fn list(&self) -> io::Result<Vec<String>>;
    /// Opens an existing file.
    fn open(&self, name: &str) -> io::Result<FileHandle>;
    /// Creates a new, empty file (fails if it exists). Its name is durable
    /// only after [`Volume::sync_dir`].
    fn create(&self, name: &str) -> io::Result<FileHandle>;
    /// Makes created names durable (fsync of the directory).
    fn sync_dir(&self) -> io::Result<()>;
    /// Whether files are opened with O_DIRECT.
    fn direct_io(&self) -> bool;
    /// The file's length now.
    fn len(&self, file: &FileHandle) -> io::Result<u64>;
    /// Reserves the file's blocks up to `len` (fallocate): ENOSPC now
    /// rather than at a later write. Unsupported by the filesystem: Ok
    /// (the writes then find out).
    fn allocate(&self, file: &FileHandle, len: u64) -> io::Result<()>;
    /// Deletes a file (one whose creation failed half-way: its blocks go
    /// back to the filesystem).
    fn remove(&self, name: &str) -> io::Result<()>;
    /// Bytes the filesystem can still give (None: unknown).
    fn available(&self) -> Option<u64>;
}

/// A real directory. O_DIRECT is used when the filesystem accepts it.
pub struct DirVolume {
    dir: PathBuf,
    direct: bool,
    /// Why O_DIRECT is or is not used, for the log and INFO.
    pub direct_reason: String,
}

impl DirVolume {
    /// Opens (creating it if needed) `dir`; with `try_direct`, probes
    /// O_DIRECT by opening and writing an aligned block in a scratch file.
    pub fn open(dir: &Path, try_direct: bool) -> io::Result<DirVolume> {
        std::fs::create_dir_all(dir)?;
        let (direct, direct_reason) = if try_direct {
            match probe_direct(dir) {
                Ok(()) => (true, "O_DIRECT accepted".to_string()),
                Err(e) if file::is_direct_refused(&e) => {
                    (false, format!("O_DIRECT refused ({e}): buffered I/O + fdatasync"))
                }
                // The probe writes a block: a full volume cannot say.
                // Buffered I/O is right on every filesystem.
                Err(e) if file::is_out_of_space(&e) => {
                    (false, format!("O_DIRECT not probed, the volume is full ({e}): buffered I/O + fdatasync"))
                }
                Err(e) => return Err(e),
            }
        } else {
            (false, "O_DIRECT not requested: buffered I/O + fdatasync".to_string())
        };
        Ok(DirVolume { dir: dir.to_path_buf(), direct, direct_reason })
    }

    fn handle(&self, name: &str, create: bool) -> io::Result<FileHandle> {
        let f = file::open_rw(&self.dir.join(name), create, self.direct)?;
        Ok(FileHandle(Arc::new(FileKind::Os(Arc::new(f), self.direct))))
    }
}

fn probe_direct(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let path = dir.join(".direct-probe");
    let _ = std::fs::remove_file(&path);
    let result = file::open_rw(&path, true, true).and_then(|f| f.write_all_at(&AlignedBuf::zeroed(IO_ALIGN), 0));
    let _ = std::fs::remove_file(&path);
    result
}

impl Volume for DirVolume {
    fn list(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }
    fn open(&self, name: &str) -> io::Result<FileHandle> {
        self.handle(name, false)
    }
    fn create(&self, name: &str) -> io::Result<FileHandle> {
        self.handle(name, true)
    }
    fn sync_dir(&self) -> io::Result<()> {
        File::open(&self.dir)?.sync_all()
    }
    fn direct_io(&self) -> bool {
        self.direct
    }
    fn len(&self, file: &FileHandle) -> io::Result<u64> {
        Ok(file.os()?.metadata()?.len())
    }
    fn allocate(&self, file: &FileHandle, len: u64) -> io::Result<()> {
        match file::allocate(file.os()?, len) {
            Err(e) if file::is_unsupported(&e) => Ok(()),
            other => other,
        }
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        std::fs::remove_file(self.dir.join(name))
    }
    fn available(&self) -> Option<u64> {
        file::available_bytes(&self.dir).ok()
    }
}

/// An error of the tier's own, besides the disk's.
pub(super) fn error(kind: io::ErrorKind, msg: &str) -> io::Error {
    io::Error::new(kind, msg.to_string())
}

/// The results, or the first error among them.
pub(super) fn check(results: Vec<IoDone>) -> io::Result<Vec<IoDone>> {
    match results.iter().position(|d| d.result.is_err()) {
        Some(i) => Err(results.into_iter().nth(i).and_then(|d| d.result.err()).expect("an error at i")),
        None => Ok(results),
    }
}

/// Runs `ops` as one batch and waits for all of them: for recovery and
/// set-up, never on a worker thread. Results are in the order of `ops`.
pub fn run_blocking(engine: &dyn IoEngine, ops: Vec<(FileHandle, IoOp)>) -> Vec<IoDone> {
    let n = ops.len();
    let (tx, rx) = mpsc::channel();
    let batch = ops
        .into_iter()
        .enumerate()
        .map(|(i, (file, op))| {
            let tx = tx.clone();
            IoRequest {
                file,
                op,
                on_done: Box::new(move |done| {
                    let _ = tx.send((i, done));
                }),
            }
        })
        .collect();
    drop(tx);
    engine.submit(batch);
    let mut out: Vec<Option<IoDone>> = (0..n).map(|_| None).collect();
    while let Ok((i, done)) = recv_reaping(&rx) {
        out[i] = Some(done);
    }
    out.into_iter().map(|d| d.expect("an engine dropped a request without completing it")).collect()
}

/// Reads a worker thread asks for while it runs its connections, queued
/// until they have all had their turn and then submitted together
/// ([`submit_deferred`]): one hand-over and one wake of the engine's thread
/// for a whole pass of the worker's event loop instead of one per read.
struct Deferred {
    /// Called when the first read is queued: schedules the submission.
    on_first: Box<dyn Fn()>,
    queued: Vec<(Arc<dyn IoEngine>, Vec<IoRequest>)>,
    /// The eventfd the thread's event loop watches, calling [`reap_loop`]
    /// when it fires.
    signal: Option<Arc<File>>,
    /// Set by an engine that completes ops on this thread.
    reaper: Option<LoopReaper>,
}

/// How an engine completes the ops it submitted on an event loop's thread.
#[derive(Clone, Copy)]
pub(super) struct LoopReaper {
    /// Delivers what completed; returns how many.
    pub reap: fn() -> usize,
    /// Whether ops are queued that the kernel has not taken yet.
    pub backlog: fn() -> bool,
    /// Waits until everything submitted has completed and is delivered.
    pub finish: fn(),
}

thread_local! {
    static DEFERRED: std::cell::RefCell<Option<Deferred>> = const { std::cell::RefCell::new(None) };
}

/// From now on, reads started on this thread with [`submit_soon`] wait for
/// [`submit_deferred`]; `on_first` is called when one is queued and nothing
/// was, and must make sure `submit_deferred` runs soon (a worker wakes a
/// task of its own, which runs after the connections already woken).
///
/// With `signal`, an eventfd the loop watches, an engine may submit this
/// thread's reads itself and signal their completions there: the loop then
/// calls [`reap_loop`], and [`finish_loop`] before the thread ends.
pub fn defer_submissions(on_first: Box<dyn Fn()>, signal: Option<Arc<File>>) {
    DEFERRED.with_borrow_mut(|d| *d = Some(Deferred { on_first, queued: Vec::new(), signal, reaper: None }));
}

/// The completion signal of this thread's event loop, if it has one.
pub(super) fn loop_signal() -> Option<Arc<File>> {
    DEFERRED.with_borrow(|d| d.as_ref().and_then(|d| d.signal.clone()))
}

/// An engine that submits on this thread says how its completions are
/// delivered.
pub(super) fn set_loop_reaper(reaper: LoopReaper) {
    DEFERRED.with_borrow_mut(|d| {
        if let Some(d) = d.as_mut() {
            d.reaper = Some(reaper);
        }
    });
}

fn loop_reaper() -> Option<LoopReaper> {
    DEFERRED.with_borrow(|d| d.as_ref().and_then(|d| d.reaper))
}

/// Delivers the completions of ops submitted on this thread (the worker
/// calls it when its signal fires). Returns how many.
pub fn reap_loop() -> usize {
    loop_reaper().map_or(0, |r| (r.reap)())
}

/// Whether this thread has ops queued that no completion will signal: the
/// loop must call [`reap_loop`] again soon by itself.
pub fn loop_backlog() -> bool {
    loop_reaper().is_some_and(|r| (r.backlog)())
}

/// Waits on `rx` for a synchronous op's result; on an event loop's thread,
/// delivers its own ring's completions meanwhile: commands on other
/// workers may be waiting for them.
pub(super) fn recv_reaping<T>(rx: &mpsc::Receiver<T>) -> Result<T, mpsc::RecvError> {
    if loop_reaper().is_none() {
        return rx.recv();
    }
    loop {
        reap_loop();
        match rx.recv_timeout(std::time::Duration::from_millis(1)) {
            Ok(v) => return Ok(v),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err(mpsc::RecvError),
        }
    }
}

/// Completes everything submitted on this thread, waiting: a worker's
/// last call, so that no read is left without its answer.
pub fn finish_loop() {
    if let Some(r) = loop_reaper() {
        (r.finish)();
    }
}

/// Submits what this thread queued, one batch per engine. Returns the ops
/// submitted.
pub fn submit_deferred() -> usize {
    // What completed meanwhile costs nothing to find (shared memory):
    // delivered here, a busy worker need not wait for its signal's turn.
    reap_loop();
    let queued = DEFERRED.with_borrow_mut(|d| d.as_mut().map(|d| std::mem::take(&mut d.queued)).unwrap_or_default());
    let mut n = 0;
    for (engine, batch) in queued {
        n += batch.len();
        engine.submit_from_loop(batch);
    }
    n
}

/// Submits `req` now, or queues it for [`submit_deferred`] on a thread that
/// defers. Only for ops nobody on this thread waits for synchronously.
pub(super) fn submit_soon(engine: &Arc<dyn IoEngine>, req: IoRequest) {
    let req = DEFERRED.with_borrow_mut(|d| {
        let Some(d) = d.as_mut() else { return Some(req) };
        let first = d.queued.is_empty();
        let same = |e: &Arc<dyn IoEngine>| std::ptr::addr_eq(Arc::as_ptr(e), Arc::as_ptr(engine));
        match d.queued.iter_mut().find(|(e, _)| same(e)) {
            Some((_, batch)) => batch.push(req),
            None => d.queued.push((engine.clone(), vec![req])),
        }
        if first {
            (d.on_first)();
        }
        None
    });
    if let Some(req) = req {
        engine.submit(vec![req]);
    }
}

#[cfg(test)]
pub(crate) mod suite {
    //! The tests every engine must pass, written once.
    use super::*;
    use std::collections::HashSet;

    fn block(fill: u8, blocks: usize) -> AlignedBuf {
        let mut b = AlignedBuf::zeroed(blocks * IO_ALIGN);
        b.fill(fill);
        b
    }

    fn ok(d: &IoDone) -> usize {
        match &d.result {
            Ok(n) => *n,
            Err(e) => panic!("op failed: {e}"),
        }
    }

    pub fn run_all(engine: &dyn IoEngine, vol: &dyn Volume) {
        write_sync_read_back(engine, vol);
        sync_completes_after_every_op_before_it(engine, vol);
        reads_past_end_are_short(engine, vol);
        many_concurrent_batches_all_complete(engine, vol);
        sync_after_failed_op_is_cancelled(engine, vol);
        completions_arrive_off_the_submitting_thread(engine, vol);
        reads_from_an_event_loop_all_complete(engine, vol);
    }

    fn write_sync_read_back(engine: &dyn IoEngine, vol: &dyn Volume) {
        let f = vol.create("rw").unwrap();
        let done = run_blocking(
            engine,
            vec![
                (f.clone(), IoOp::Write { offset: 0, buf: block(1, 2) }),
                (f.clone(), IoOp::Write { offset: 2 * IO_ALIGN as u64, buf: block(2, 1) }),
                (f.clone(), IoOp::Sync),
            ],
        );
        assert_eq!(ok(&done[0]), 2 * IO_ALIGN);
        assert_eq!(ok(&done[1]), IO_ALIGN);
        assert_eq!(ok(&done[2]), 0);
        let done = run_blocking(
            engine,
            vec![(f.clone(), IoOp::Read { offset: IO_ALIGN as u64, buf: AlignedBuf::zeroed(2 * IO_ALIGN) })],
        );
        assert_eq!(ok(&done[0]), 2 * IO_ALIGN);
        let buf = done[0].buf.as_ref().unwrap();
        assert!(buf[..IO_ALIGN].iter().all(|&b| b == 1));
        assert!(buf[IO_ALIGN..].iter().all(|&b| b == 2));
    }

    fn sync_completes_after_every_op_before_it(engine: &dyn IoEngine, vol: &dyn Volume) {
        let f = vol.create("barrier").unwrap();
        for round in 0..20u64 {
            let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
            let (tx, rx) = mpsc::channel();
            let batch = (0..9u64)
                .map(|i| {
                    let (order, tx) = (order.clone(), tx.clone());
                    let op = match i {
                        4 => IoOp::Sync,
                        _ => IoOp::Write { offset: (round * 8 + i) * IO_ALIGN as u64, buf: block(i as u8, 1) },
                    };
                    IoRequest {
                        file: f.clone(),
                        op,
                        on_done: Box::new(move |d| {
                            assert!(d.result.is_ok());
                            order.lock().push(i);
                            tx.send(()).unwrap();
                        }),
                    }
                })
                .collect();
            engine.submit(batch);
            for _ in 0..9 {
                rx.recv().unwrap();
            }
            let order = order.lock();
            let sync_at = order.iter().position(|&i| i == 4).unwrap();
            for before in 0..4 {
                let at = order.iter().position(|&i| i == before).unwrap();
                assert!(at < sync_at, "round {round}: the sync completed before op {before}: {order:?}");
            }
        }
    }

    fn reads_past_end_are_short(engine: &dyn IoEngine, vol: &dyn Volume) {
        let f = vol.create("short").unwrap();
        run_blocking(engine, vec![(f.clone(), IoOp::Write { offset: 0, buf: block(7, 1) })]);
        let done = run_blocking(
            engine,
            vec![
                (f.clone(), IoOp::Read { offset: 0, buf: AlignedBuf::zeroed(3 * IO_ALIGN) }),
                (f.clone(), IoOp::Read { offset: 8 * IO_ALIGN as u64, buf: AlignedBuf::zeroed(IO_ALIGN) }),
            ],
        );
        assert_eq!(ok(&done[0]), IO_ALIGN);
        assert_eq!(ok(&done[1]), 0);
    }

    fn many_concurrent_batches_all_complete(engine: &dyn IoEngine, vol: &dyn Volume) {
        let f = vol.create("many").unwrap();
        let (tx, rx) = mpsc::channel();
        // More ops than any ring has entries, from several threads at once.
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (f, tx) = (f.clone(), tx.clone());
                s.spawn(move || {
                    for b in 0..40u64 {
                        let batch = (0..8u64)
                            .map(|i| {
                                let slot = t * 320 + b * 8 + i;
                                let tx = tx.clone();
                                IoRequest {
                                    file: f.clone(),
                                    op: IoOp::Write { offset: slot * IO_ALIGN as u64, buf: block(slot as u8, 1) },
                                    on_done: Box::new(move |d| tx.send((slot, d.result.is_ok())).unwrap()),
                                }
                            })
                            .collect();
                        engine.submit(batch);
                    }
                });
            }
        });
        drop(tx);
        let seen: HashSet<u64> = rx
            .iter()
            .map(|(slot, ok)| {
                assert!(ok);
                slot
            })
            .collect();
        assert_eq!(seen.len(), 4 * 320);
        let done =
            run_blocking(engine, vec![(f.clone(), IoOp::Read { offset: 0, buf: AlignedBuf::zeroed(1280 * IO_ALIGN) })]);
        let buf = done[0].buf.as_ref().unwrap();
        for slot in 0..1280 {
            assert!(buf[slot * IO_ALIGN..(slot + 1) * IO_ALIGN].iter().all(|&b| b == slot as u8));
        }
    }

    fn sync_after_failed_op_is_cancelled(engine: &dyn IoEngine, vol: &dyn Volume) {
        let f = vol.create("fail").unwrap();
        // No filesystem holds a file this large: the write fails (EFBIG/EINVAL).
        let too_far = (i64::MAX as u64) & !(IO_ALIGN as u64 - 1);
        let done = run_blocking(
            engine,
            vec![
                (f.clone(), IoOp::Write { offset: 0, buf: block(3, 1) }),
                (f.clone(), IoOp::Write { offset: too_far, buf: block(4, 1) }),
                (f.clone(), IoOp::Sync),
                (f.clone(), IoOp::Write { offset: IO_ALIGN as u64, buf: block(5, 1) }),
            ],
        );
        assert!(done[1].result.is_err(), "a write past any file size limit succeeded");
        assert!(done[2].result.is_err(), "a sync ran after a failed write of its batch");
        // Ops after the sync are independent of the failure.
        assert_eq!(ok(&done[3]), IO_ALIGN);
    }

    fn completions_arrive_off_the_submitting_thread(engine: &dyn IoEngine, vol: &dyn Volume) {
        let f = vol.create("thread").unwrap();
        let (tx, rx) = mpsc::channel();
        let me = std::thread::current().id();
        engine.submit(vec![IoRequest {
            file: f,
            op: IoOp::Sync,
            on_done: Box::new(move |d| tx.send((std::thread::current().id(), d.result.is_ok())).unwrap()),
        }]);
        let (tid, ok) = rx.recv().unwrap();
        assert!(ok);
        assert_ne!(tid, me);
    }

    /// Reads a worker's event loop submits (more than a loop's own ring
    /// holds) all complete with the right bytes, delivered by the loop or
    /// by the engine's threads. With io_uring the loop's own ring takes the
    /// first of them, and the loop delivers them when its signal fires;
    /// and a synchronous op the loop waits for delivers them too (commands
    /// on other workers may be waiting for them).
    fn reads_from_an_event_loop_all_complete(engine: &dyn IoEngine, vol: &dyn Volume) {
        const READS: usize = 300;
        let f = vol.create("loop").unwrap();
        let ops = (0..8).map(|i| (f.clone(), IoOp::Write { offset: i * IO_ALIGN as u64, buf: block(i as u8 + 1, 1) }));
        assert!(run_blocking(engine, ops.collect()).iter().all(|d| d.result.is_ok()));
        // Engines that complete a loop's reads on the loop: io_uring's own
        // ring; Linux AIO for O_DIRECT files (the pool's threads otherwise).
        let loop_engine = engine.name() == "io_uring" || (engine.name() == "aio" && vol.direct_io());
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                rt.block_on(async {
                    let (signal, fd) = crate::sys::loop_signal::LoopSignal::new().unwrap();
                    defer_submissions(Box::new(|| {}), Some(fd));
                    let me = std::thread::current().id();
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                    // Round 1: only the signal makes the loop reap.
                    let (rx, mut done, mut on_loop, mut fires) = (submit_from_loop(engine, &f, READS, me), 0, 0, 0);
                    while done < READS {
                        take(&rx, &mut done, &mut on_loop);
                        if done == READS {
                            break;
                        }
                        assert!(std::time::Instant::now() < deadline, "{done} of {READS} reads completed in 10 s");
                        // The engine's threads deliver without a signal.
                        let wait = std::time::Duration::from_millis(20);
                        if let Ok(fired) = tokio::time::timeout(wait, signal.fired()).await {
                            fired.unwrap();
                            fires += 1;
                            reap_loop();
                        }
                    }
                    if loop_engine {
                        assert!(on_loop > 0 && fires > 0, "{on_loop} reads delivered on the loop, {fires} signals");
                    } else {
                        assert_eq!(on_loop, 0, "{} completed on the loop", engine.name());
                    }
                    // Round 2: a synchronous op of the loop's delivers them.
                    let (rx, mut done, mut on_loop) = (submit_from_loop(engine, &f, READS, me), 0, 0);
                    while loop_engine && on_loop == 0 {
                        assert!(std::time::Instant::now() < deadline, "a blocking op never delivered the ring's reads");
                        let sync = vec![(f.clone(), IoOp::Read { offset: 0, buf: AlignedBuf::zeroed(IO_ALIGN) })];
                        assert!(run_blocking(engine, sync)[0].result.is_ok());
                        take(&rx, &mut done, &mut on_loop);
                    }
                    finish_loop();
                    while done < READS {
                        assert!(std::time::Instant::now() < deadline, "{done} of {READS} reads completed in 10 s");
                        std::thread::sleep(std::time::Duration::from_millis(1));
                        take(&rx, &mut done, &mut on_loop);
                    }
                });
                DEFERRED.with_borrow_mut(|d| *d = None);
            });
        });
    }

    /// Submits `n` reads of the 8 blocks `reads_from_an_event_loop_all_complete`
    /// wrote, from the loop; each reports whether its bytes were right and
    /// whether it completed on the thread `me`.
    fn submit_from_loop(
        engine: &dyn IoEngine,
        f: &FileHandle,
        n: usize,
        me: std::thread::ThreadId,
    ) -> mpsc::Receiver<(bool, bool)> {
        let (tx, rx) = mpsc::channel();
        let batch = (0..n)
            .map(|i| {
                let tx = tx.clone();
                IoRequest {
                    file: f.clone(),
                    op: IoOp::Read { offset: (i % 8 * IO_ALIGN) as u64, buf: AlignedBuf::zeroed(IO_ALIGN) },
                    on_done: Box::new(move |d| {
                        let right = d.result.is_ok() && d.buf.unwrap().iter().all(|&b| b == (i % 8) as u8 + 1);
                        tx.send((right, std::thread::current().id() == me)).unwrap();
                    }),
                }
            })
            .collect();
        engine.submit_from_loop(batch);
        rx
    }

    fn take(rx: &mpsc::Receiver<(bool, bool)>, done: &mut usize, on_loop: &mut usize) {
        while let Ok((right, here)) = rx.try_recv() {
            assert!(right, "a read from the loop came back wrong");
            *done += 1;
            *on_loop += usize::from(here);
        }
    }
}
