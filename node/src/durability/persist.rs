//! The journal of the RAM-resident keyspace: every change becomes a log
//! record appended through the group commit; at start-up the log is
//! replayed into the keyspace (warm restart); compaction keeps the log
//! from growing without bound.
//!
//! - Records: `Write` → `Set` (the key's whole value in the DUMP encoding
//!   of `store::dump`, no trailer: the record has its own crc32c) with the
//!   entry's expire-at; `Expire` → `Expire`; `Delete` and `Evicted` →
//!   `Delete`; `FlushDb` → `FlushDb` of one partition (key: partition index
//!   and partition count, big-endian u32 each); `SwapDb(b)` → `SwapDb` of
//!   one partition (same key; db: a, value: b as a big-endian u32). A log
//!   replayed with another partition count applies both to the keys of
//!   the recorded partition's slots. `Expired` writes nothing: replay
//!   drops keys whose expire-at has passed anyway.
//! - Hot path: `record` runs under the partition's lock and takes only the
//!   log's short staging lock (no global lock); the value is encoded into a
//!   per-thread buffer before that.
//! - `sync`: the connection, before writing any reply, waits (async, on a
//!   oneshot woken by the group commit) until durable ≥ the log's appended
//!   sequence number at that moment ([`Persistence::sync_target`]). That
//!   covers the batch's own writes and every write its reads could have seen.
//!   write-back and periodic use the same wait, only while the log lags past
//!   their bound (back-pressure: see the parent module).
//! - Replay: the log is read in windows (see `tier::recovery` and
//!   `tier::segment`) and its records applied by one thread per CPU, by
//!   partition (see [`super::replay`]).
//! - Replay under `maxmemory`: before each value replayed the caller's
//!   `make_room` evicts (or demotes to the disk tier) as before a client's
//!   write. The replay's own buffers (read windows, batches for the
//!   appliers) are the log's, left out of the decision as at run time, and
//!   its figures may read up to [`replay::slack`] over the limit: a node
//!   restarts with what it acknowledged on its unchanged configuration.
//!   Beyond that, when the policy may not evict, the replay stops with an
//!   error rather than drop data (see [`Persistence::recover`]).
//! - Failure: a failed write/fsync is logged and stops the node (exit 1);
//!   never retried.
//! - A full volume: segments are zero-filled when made, so appends inside
//!   one never need space; the next segment failing for lack of it (ENOSPC,
//!   EDQUOT) makes every write command get `MISCONF` (as Redis when its AOF
//!   cannot be written) while reads are served, and the background tick
//!   tries again every 500 ms: once a segment fits, writes are accepted
//!   again. What the active segment has left is the room for the writes
//!   admitted before. A node restarted on a full volume opens its log and
//!   serves it the same way (no crash loop).
//! - Compaction: when the log holds more than `max(4, 2 × the last
//!   rewrite)` segments, every live key is rewritten from RAM (partition by
//!   partition, under its lock, so no newer write can be overtaken), the
//!   rewrite is made durable, and then the older segments are freed oldest
//!   first. A crash at any point replays old records then newer ones: the
//!   result is the same keyspace (a remaining old segment is always a
//!   suffix of the old ones, so no delete is lost before its set).

use super::replay::{self, ReplayCtx};
use super::{GroupCommit, Policy};
use crate::metrics::snapshot::{DurabilityFigures, LoadingFigures};
use crate::store::dump;
use crate::store::{Change, ChangeKind, Journal, Keyspace, StoreStats, Value};
use crate::sys::file::BufferGauge;
use crate::tier::engine::{EngineChoice, probe};
use crate::tier::io::DirVolume;
use crate::tier::log::{LogConfig, ReadProgress, RecordAddr, SegmentLog};
use crate::tier::record::{Record, RecordKind, encoded_len};
use parking_lot::Mutex;
use std::cell::RefCell;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// What recovery did, for INFO and metrics.
pub type RecoveryStats = crate::metrics::snapshot::RecoveryFigures;

struct Active {
    log: Arc<SegmentLog>,
    commit: GroupCommit,
}

/// The durability of the keyspace: the journal installed into it, the log
/// and its group commit once recovered.
pub struct Persistence {
    policy: Policy,
    dir: PathBuf,
    engine_choice: EngineChoice,
    segment_size: u64,
    /// The log's buffers (INFO `mem_aof_buffer`; apart from eviction).
    buffers: Arc<BufferGauge>,
    partitions: AtomicU32,
    active: OnceLock<Active>,
    /// True until recovery is done: commands get -LOADING.
    pub loading: AtomicBool,
    /// "io_uring: ..." or "threads: ...": the engine probed and why.
    pub engine: Mutex<String>,
    pub recovery: Mutex<RecoveryStats>,
    /// The replay's progress: bytes of the segments to scan, bytes read
    /// (INFO's loading_total_bytes and loading_loaded_bytes), and when it
    /// started (unix seconds).
    progress: Arc<ReadProgress>,
    loading_started: AtomicU64,
    /// Segment ids in the order they were first used (oldest first).
    order: Mutex<Vec<u32>>,
    last_segment: AtomicU32,
    rewrite_segments: AtomicU64,
    pub compactions: AtomicU64,
    /// Test hook ([`super::hooks::ack_before_fsync`]; always false in a
    /// release build): sync replies do not wait; the crash tests must catch it.
    broken_ack: bool,
}

thread_local! {
    static VALUE_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

fn flush_key(partition: u32, partitions: u32) -> [u8; 8] {
    let mut k = [0u8; 8];
    k[..4].copy_from_slice(&partition.to_be_bytes());
    k[4..].copy_from_slice(&partitions.to_be_bytes());
    k
}

impl Persistence {
    /// Journaling for `policy` in `dir`; None for `Policy::None` (a cache:
    /// nothing is written or replayed).
    pub fn new(policy: Policy, dir: PathBuf, engine_choice: EngineChoice) -> Option<Arc<Persistence>> {
        if !policy.journals() {
            return None;
        }
        let segment_size = std::env::var("STRATA_SEGMENT_SIZE")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .filter(|s| s % 4096 == 0 && *s >= 64 << 10)
            .unwrap_or(64 << 20);
        Some(Arc::new(Persistence {
            policy,
            dir,
            engine_choice,
            segment_size,
            buffers: Arc::default(),
            partitions: AtomicU32::new(1),
            active: OnceLock::new(),
            loading: AtomicBool::new(true),
            engine: Mutex::new(String::new()),
            recovery: Mutex::new(RecoveryStats::default()),
            progress: Arc::default(),
            loading_started: AtomicU64::new(0),
            order: Mutex::new(Vec::new()),
            last_segment: AtomicU32::new(u32::MAX),
            rewrite_segments: AtomicU64::new(0),
            compactions: AtomicU64::new(0),
            broken_ack: super::hooks::ack_before_fsync(),
        }))
    }

    pub fn set_partitions(&self, n: usize) {
        self.partitions.store(n as u32, Relaxed);
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }

    pub fn is_loading(&self) -> bool {
        self.loading.load(Relaxed)
    }

    /// The sequence number a reply must wait for (None: no wait): in
    /// `sync`, every write appended so far; in write-back and periodic,
    /// the same once the log lags past the policy's bound (back-pressure).
    #[inline]
    pub fn sync_target(&self) -> Option<u64> {
        let a = self.active.get()?;
        if self.policy != Policy::Sync {
            return a.commit.backpressure_target();
        }
        if self.broken_ack {
            return None;
        }
        let target = a.log.appended_seq();
        (target > a.log.durable_seq()).then_some(target)
    }

    /// Runs `cb` once `seq` is durable (or the log failed).
    pub fn on_durable(&self, seq: u64, cb: super::OnDurable) {
        match self.active.get() {
            Some(a) => a.commit.on_durable(seq, cb),
            None => cb(Ok(seq)),
        }
    }

    /// Bytes of one log segment (segments are preallocated whole, so the
    /// log holds segments in use × this on disk).
    pub fn segment_size(&self) -> u64 {
        self.segment_size
    }

    /// What the log's buffers hold (staged records, writes in flight, the
    /// windows of a segment being replayed): counted in used_memory, not for eviction.
    pub fn buffers(&self) -> &Arc<BufferGauge> {
        &self.buffers
    }

    /// Figures for INFO and metrics, read together.
    pub fn figures(&self) -> DurabilityFigures {
        let mut f = DurabilityFigures {
            engine: self.engine.lock().clone(),
            loading: self.is_loading(),
            loading_progress: LoadingFigures {
                start_time: self.loading_started.load(Relaxed),
                total_bytes: self.progress.total.load(Relaxed),
                loaded_bytes: self.progress.done.load(Relaxed),
            },
            recovery: *self.recovery.lock(),
            compactions: self.compactions.load(Relaxed),
            ..DurabilityFigures::default()
        };
        if let Some(a) = self.active.get() {
            let s = a.commit.stats();
            let (age, bytes) = a.commit.lag();
            f.durable_seq = a.log.durable_seq();
            f.appended_seq = a.log.appended_seq();
            f.segments = self.order.lock().len() as u64;
            f.log_bytes = f.segments * self.segment_size;
            f.flushes = s.flushes.load(Relaxed);
            f.flushed_records = s.records.load(Relaxed);
            f.max_batch = s.max_batch.load(Relaxed);
            f.batch_sizes = s.batch_sizes.figures(f.flushed_records);
            f.flush_us_total = s.flush_us_total.load(Relaxed);
            f.flush_us_max = s.flush_us_max.load(Relaxed);
            f.flush_latency = s.flush_latency.figures();
            f.lag_us = age.as_micros() as u64;
            f.lag_bytes = bytes;
            f.held_replies = s.held_replies.load(Relaxed);
        }
        f
    }

    fn note_segment(&self, addr: RecordAddr) {
        if self.last_segment.load(Relaxed) != addr.segment {
            self.last_segment.store(addr.segment, Relaxed);
            let mut order = self.order.lock();
            if !order.contains(&addr.segment) {
                order.push(addr.segment);
            }
        }
    }

    /// Appends, riding out a full segment while the I/O thread readies the
    /// next one. An append that cannot be made stops the node: the write
    /// could not be kept.
    fn append(&self, a: &Active, rec: &Record<'_>) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match a.commit.append(rec) {
                Ok((_, addr)) => return self.note_segment(addr),
                Err(e) if e.kind() == io::ErrorKind::StorageFull && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(e) => {
                    tracing::error!("cannot append to the durability log in {}: {e}; stopping", self.dir.display());
                    std::process::exit(1);
                }
            }
        }
    }

    /// Opens (recovering) the log in the data dir and replays it into
    /// `ks`, then starts journaling. Logs progress every second (records,
    /// keys, bytes, rate) and the final figures.
    ///
    /// `make_room` runs before each value replayed, as before a client's
    /// write: it evicts by the configured policy (or demotes to the disk
    /// tier) to keep the keyspace under `maxmemory`, and says whether the
    /// value fits, fits within [`replay::slack`] of the limit (loaded: what
    /// the running node held may read a little higher while the log is
    /// read), or not (noeviction or a volatile policy with nothing volatile,
    /// and no tier with room). Then the replay stops with an error and the
    /// node does not start: it never drops data the policy says to keep.
    /// The log is left as it was (recovery only reads), so raising
    /// `maxmemory` or choosing an evicting policy and restarting loads it.
    pub fn recover(
        self: &Arc<Self>,
        ks: &Keyspace,
        make_room: &(dyn Fn(&StoreStats) -> replay::Room + Sync),
    ) -> io::Result<()> {
        let started = Instant::now();
        std::fs::create_dir_all(&self.dir)?;
        let (engine, reason) = probe(self.engine_choice)?;
        *self.engine.lock() = reason.clone();
        tracing::info!(dir = %self.dir.display(), engine = %reason, "opening the durability log");
        self.loading_started.store(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
            Relaxed,
        );
        let volume = Arc::new(DirVolume::open(&self.dir, true)?);
        let config = LogConfig {
            segment_size: self.segment_size,
            buffers: self.buffers.clone(),
            progress: self.progress.clone(),
            ..LogConfig::default()
        };
        let mut st = RecoveryStats::default();
        let mut last_report = Instant::now();
        let now = crate::store::now_ms();
        let stats = StoreStats::default();
        let ctx = ReplayCtx {
            ks,
            now,
            nparts: ks.num_partitions() as u32,
            stats: &stats,
            make_room,
            buffers: self.buffers.clone(),
            over_budget: AtomicBool::new(false),
            over_limit: AtomicU64::new(0),
            bad_values: AtomicU64::new(0),
        };
        let appliers = replay::appliers();
        let (log, report) = replay::replay(&ctx, appliers, |apply| {
            SegmentLog::open(volume, engine, config, |rec, addr| {
                if ctx.over_budget.load(Relaxed) {
                    return;
                }
                st.records += 1;
                st.bytes += encoded_len(rec.key.len(), rec.value.len()) as u64;
                self.note_segment(addr);
                apply(&rec);
                // The clock is read every few thousand records, not each.
                if st.records % 4096 == 0 && last_report.elapsed() >= Duration::from_secs(1) {
                    last_report = Instant::now();
                    // Of the segments in use, each read to its end: free and
                    // spare ones (zero-filled, never read) are not counted.
                    let pct = self.progress.loaded_percent();
                    let secs = started.elapsed().as_secs_f64().max(1e-3);
                    tracing::info!(
                        records = st.records,
                        bytes = st.bytes,
                        keys = ks.db_figures(now).iter().map(|d| d.keys).sum::<u64>(),
                        evicted = stats.evicted.load(Relaxed),
                        records_per_sec = (st.records as f64 / secs) as u64,
                        mb_per_sec = format!("{:.1}", st.bytes as f64 / secs / 1e6),
                        "loading the log: {pct}% done"
                    );
                }
            })
        })?;
        st.bad_values = ctx.bad_values.load(Relaxed);
        if ctx.over_budget.load(Relaxed) {
            let msg = format!(
                "the durability log in {} holds more than maxmemory allows and maxmemory-policy cannot evict \
                 enough (stopped after {} records, {} bytes): raise maxmemory, give the node a disk tier \
                 (--max-disk) or choose an evicting policy; the log is unchanged",
                self.dir.display(),
                st.records,
                st.bytes
            );
            tracing::error!("{msg}");
            return Err(io::Error::new(io::ErrorKind::OutOfMemory, msg));
        }
        let over_limit = ctx.over_limit.load(Relaxed);
        if over_limit > 0 {
            tracing::warn!(
                values = over_limit,
                "the log's last {over_limit} values were loaded over maxmemory (within the replay's slack of \
                 1/8 of it): writes answer OOM until memory is freed, unless the policy evicts or the disk tier \
                 takes values"
            );
        }
        st.evicted = stats.evicted.load(Relaxed);
        st.bad_runs = report.scan.bad_runs;
        st.skipped_bytes = report.scan.skipped_bytes;
        st.torn_bytes = report.scan.torn_tail_bytes;
        st.keys = ks.db_figures(now).iter().map(|d| d.keys).sum();
        st.duration_ms = started.elapsed().as_millis() as u64;
        let secs = (st.duration_ms as f64 / 1e3).max(1e-3);
        tracing::info!(
            records = st.records,
            bytes = st.bytes,
            keys = st.keys,
            evicted = st.evicted,
            records_per_sec = (st.records as f64 / secs) as u64,
            mb_per_sec = format!("{:.1}", st.bytes as f64 / secs / 1e6),
            bad_runs = st.bad_runs,
            skipped_bytes = st.skipped_bytes,
            torn_tail_bytes = st.torn_bytes,
            bad_values = st.bad_values,
            appliers,
            ms = st.duration_ms,
            "the log is loaded: 100% done"
        );
        *self.recovery.lock() = st;
        // The segments were read through large buffers, now free: their
        // pages go back to the OS at once rather than at the allocator's
        // decay, so RSS after a restart is the data's.
        crate::sys::alloc::purge();
        let log = Arc::new(log);
        // A full volume still serves what the log holds: reads, and writes
        // refused (`write_refusal`) until a segment fits.
        if let Err(e) = log.ensure_spare()
            && !crate::sys::file::is_out_of_space(&e)
        {
            return Err(e);
        }
        let commit = GroupCommit::start(log.clone(), self.policy)?;
        let dir = self.dir.clone();
        // The group commit tells every waiter of its failure: this one stops the node.
        commit.on_durable(
            u64::MAX,
            Box::new(move |r| {
                if let Err(e) = r {
                    tracing::error!("fsync of the durability log in {} failed: {e}; stopping the node", dir.display());
                    std::process::exit(1);
                }
            }),
        );
        self.rewrite_segments.store(self.order.lock().len() as u64, Relaxed);
        let _ = self.active.set(Active { log, commit });
        self.loading.store(false, Relaxed);
        Ok(())
    }

    /// Why writes must be refused now, as the error reply: the log's
    /// volume had no room for its next segment (ENOSPC or EDQUOT), so a
    /// write could not be kept. Cleared by [`Self::maintain`] once a segment
    /// fits. The segment in use keeps room for what was admitted before.
    pub fn write_refusal(&self) -> Option<String> {
        let error = self.active.get()?.log.out_of_space()?;
        Some(format!(
            "MISCONF Errors writing to the durability log in {}: {error}. Writes are refused until a new segment \
             of {} MiB fits on its volume (free space there, or grow the volume); reads are served",
            self.dir.display(),
            self.segment_size >> 20
        ))
    }

    /// Whether [`Self::write_refusal`] has a refusal (one atomic load).
    #[inline]
    pub fn refuses_writes(&self) -> bool {
        self.active.get().is_some_and(|a| a.log.is_out_of_space())
    }

    /// The background tick: while the volume is full, tries again to ready
    /// the next segment (writes are accepted again once it is).
    pub fn maintain(&self) {
        if let Some(a) = self.active.get()
            && a.log.out_of_space().is_some()
        {
            let _ = a.log.ensure_spare();
        }
    }

    /// Makes everything appended durable (graceful shutdown).
    pub fn flush_all(&self) -> io::Result<()> {
        if let Some(a) = self.active.get() {
            let seq = a.log.appended_seq();
            if seq > a.log.durable_seq() {
                a.commit.wait_durable(seq)?;
            }
        }
        Ok(())
    }

    /// Whether the log has grown enough to be compacted.
    pub fn compaction_due(&self) -> bool {
        let used = self.order.lock().len() as u64;
        self.active.get().is_some() && used > 4.max(2 * self.rewrite_segments.load(Relaxed))
    }

    /// Rewrites every live key into fresh records, waits for them to be
    /// durable, then frees the segments before them (oldest first).
    pub fn compact(&self, ks: &Keyspace) -> io::Result<()> {
        let Some(a) = self.active.get() else { return Ok(()) };
        let started = Instant::now();
        let old: Vec<u32> = self.order.lock().clone();
        let mut first_new: Option<u32> = None;
        let mut last_seq = 0;
        let now = crate::store::now_ms();
        let mut buf = Vec::new();
        for idx in 0..ks.num_partitions() as u32 {
            let part = ks.lock(idx);
            for db in 0..crate::store::NUM_DBS {
                // Keys on disk only, key and all (read back), then
                // the index's keys.
                let forgotten: Vec<_> = part.forgotten_records(ks, db).into_iter().filter_map(Result::ok).collect();
                let indexed = part.entries(db).map(|(_, e)| Live::Indexed(e));
                for live in forgotten.iter().map(Live::OnDisk).chain(indexed) {
                    let (key, expire_at) = match live {
                        Live::OnDisk(r) => (&r.key[..], r.expire_at),
                        Live::Indexed(e) => (e.key(), e.expire_at()),
                    };
                    if expire_at != 0 && expire_at <= now {
                        continue;
                    }
                    buf.clear();
                    match live {
                        Live::OnDisk(r) => buf.extend_from_slice(&r.value),
                        // A value on disk only (cold tier) is read back for the rewrite.
                        Live::Indexed(e) => {
                            if !ks.encode_entry_value(e, &mut buf) {
                                continue;
                            }
                        }
                    }
                    let rec = Record {
                        kind: RecordKind::Set,
                        db: db as u32,
                        key,
                        value: &buf,
                        expire_at_ms: expire_at,
                        seq: 0,
                    };
                    let deadline = Instant::now() + Duration::from_secs(10);
                    let (seq, addr) = loop {
                        match a.commit.append(&rec) {
                            Ok(r) => break r,
                            Err(e) if e.kind() == io::ErrorKind::StorageFull && Instant::now() < deadline => {
                                std::thread::sleep(Duration::from_micros(200))
                            }
                            Err(e) => return Err(e),
                        }
                    };
                    self.note_segment(addr);
                    first_new.get_or_insert(addr.segment);
                    last_seq = seq;
                }
            }
        }
        if last_seq == 0 {
            // Nothing live: a marker record makes a segment of its own
            // start point (a delete of nothing).
            let rec = Record { kind: RecordKind::Delete, db: 0, key: b"", value: b"", expire_at_ms: 0, seq: 0 };
            let (seq, addr) = a.commit.append(&rec)?;
            self.note_segment(addr);
            first_new = Some(addr.segment);
            last_seq = seq;
        }
        a.commit.wait_durable(last_seq)?;
        let first_new = first_new.expect("set above");
        // Old segments: before the rewrite's first one in use order.
        let cut = old.iter().position(|&s| s == first_new).unwrap_or(old.len());
        tracing::info!(
            ?old,
            first_new,
            cut,
            last_seq,
            "log compaction: the rewrite is durable; freeing the older segments"
        );
        let mut freed = 0;
        for &seg in &old[..cut] {
            // Out of the order first: once freed, the id may be reused at once.
            self.order.lock().retain(|&s| s != seg);
            a.log.free_segment(seg)?;
            freed += 1;
            super::hooks::crash_point("compact-freed-one");
        }
        let used = self.order.lock().len() as u64;
        self.rewrite_segments.store(used, Relaxed);
        self.compactions.fetch_add(1, Relaxed);
        tracing::info!(freed, segments = used, ms = started.elapsed().as_millis() as u64, "log compacted");
        Ok(())
    }
}

/// A live key as compaction rewrites it: read back from the disk tier with
/// its key (a key on disk only), or an entry of the index.
#[derive(Clone, Copy)]
enum Live<'a> {
    OnDisk(&'a crate::store::ColdRecord),
    Indexed(&'a crate::store::Entry),
}

impl Journal for Persistence {
    fn record(&self, change: &Change<'_>) {
        // While loading, changes are the replay itself: already in the log.
        let Some(a) = self.active.get() else { return };
        let db = change.db as u32;
        match change.kind {
            ChangeKind::Write => {
                let Some(e) = change.entry else { return };
                if e.value().is_empty_collection() {
                    // Created empty and filled by the same command: the fill is recorded next.
                    return;
                }
                VALUE_BUF.with_borrow_mut(|buf| {
                    buf.clear();
                    dump::encode_value(e.value(), buf);
                    let rec = Record {
                        kind: RecordKind::Set,
                        db,
                        key: change.key,
                        value: buf,
                        expire_at_ms: e.expire_at(),
                        seq: 0,
                    };
                    self.append(a, &rec);
                    if buf.capacity() > 1 << 20 {
                        *buf = Vec::new();
                    }
                });
            }
            ChangeKind::Expire => {
                let expire_at_ms = change.entry.map_or(0, |e| e.expire_at());
                let rec = Record { kind: RecordKind::Expire, db, key: change.key, value: b"", expire_at_ms, seq: 0 };
                self.append(a, &rec);
            }
            ChangeKind::Delete | ChangeKind::Evicted => {
                let rec = Record { kind: RecordKind::Delete, db, key: change.key, value: b"", expire_at_ms: 0, seq: 0 };
                self.append(a, &rec);
            }
            ChangeKind::Expired => {}
            ChangeKind::FlushDb => {
                let key = flush_key(change.partition, self.partitions.load(Relaxed));
                let rec = Record { kind: RecordKind::FlushDb, db, key: &key, value: b"", expire_at_ms: 0, seq: 0 };
                self.append(a, &rec);
            }
            ChangeKind::SwapDb(other) => {
                let key = flush_key(change.partition, self.partitions.load(Relaxed));
                let value = (other as u32).to_be_bytes();
                let rec = Record { kind: RecordKind::SwapDb, db, key: &key, value: &value, expire_at_ms: 0, seq: 0 };
                self.append(a, &rec);
            }
        }
    }
}

/// Parses `--io-engine`.
pub fn engine_choice(name: &str) -> Option<EngineChoice> {
    Some(match name {
        "auto" => EngineChoice::Auto,
        "uring" | "io_uring" | "io-uring" => EngineChoice::IoUring,
        "aio" => EngineChoice::Aio,
        "threads" => EngineChoice::Threads,
        _ => return None,
    })
}

/// A keyspace value for tests: its DUMP-encoded form.
pub fn encoded(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    dump::encode_value(v.as_ref(), &mut out);
    out
}
