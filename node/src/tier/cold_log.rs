//! The cold log: values demoted from RAM at `maxmemory` live in a segment
//! log of their own under `<dir>/cold`, within `--max-disk`.
//!
//! - A cache, not a promise: it starts empty (files a previous run left are
//!   removed), is never fsynced, and losing it loses only what RAM could
//!   not hold. Durability is the journal's job (`crate::durability`); the
//!   two logs are apart so that neither's cleaning waits for the other.
//! - Demotion appends a record (the value in `store::dump`'s encoding, with
//!   key, database and expiry) and the entry keeps its address. A record
//!   not yet written is read from the log's staging buffer.
//! - Placement by expiry: values without a TTL go to one append head,
//!   those with one to a head per bucket of remaining TTL (as many as the
//!   budget's segments allow), so a segment's records expire together.
//! - Cleaning ([`super::cleaning`] keeps the per-segment figures): a
//!   segment with nothing live left (its keys deleted, overwritten,
//!   promoted, or expired and removed by the keyspace's expiry) is freed
//!   without a read, at once; placement by expiry makes that the fate of
//!   whole segments of short-lived values. When the log nears its budget, the
//!   segment with the most (dead + expired) bytes × age per live byte is
//!   read, its records that are still some key's value move to the head
//!   for their expiry, and it is recycled; records of keys deleted,
//!   overwritten, expired or promoted since are dropped. When even that
//!   cannot make room, the keys are evicted (their values were the coldest)
//!   if the eviction policy may discard them; under `noeviction` (and
//!   `volatile-*` for keys without a TTL) they stay, the segment is kept,
//!   and demotions fail at once: writes at the limit then get OOM.

use super::cleaning::{self, Segments, Victim};
use super::engine::{EngineChoice, probe};
use super::io::DirVolume;
use super::log::{LogConfig, RecordAddr, SegmentLog};
use super::record::{OwnedRecord, Record, RecordKind};
use crate::metrics::IoHistogram;
use crate::store::entry::{ColdLoc, ValueKind};
use crate::store::{ColdRecord, ColdTier, Keyspace, Relocated};
use crate::sys::file::BufferGauge;
use parking_lot::{Condvar, Mutex};
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::{Duration, Instant};

/// Segments kept free for the cleaner's moves and the appends between two
/// cleanings.
const HEADROOM_SEGMENTS: u32 = 2;

/// Record bytes waiting to be written beyond which writes wait for the
/// flusher before they take any lock ([`ColdTier::backlog`]). Demoting frees
/// RAM only once its record is written, so without a bound a burst of
/// writes at the limit would demote everything warm into the staging
/// buffer and then evict.
const MAX_UNFLUSHED: u64 = 1 << 20;
/// Beyond this (writes that passed the check together, one write that
/// demotes many values), a demotion writes the staged records out itself:
/// it runs under its victim's partition lock, where waiting for another
/// thread could hold every command on that partition up.
const MAX_UNFLUSHED_HARD: u64 = 4 * MAX_UNFLUSHED;
/// The longest a write waits for the flusher, and for the cleaner to free
/// a segment, before it goes on (and the tier refuses what finds no room).
const FLUSH_WAIT: Duration = Duration::from_millis(200);
const FULL_WAIT: Duration = Duration::from_secs(1);
/// Reads in flight for one `read_all`: deep enough for a device's
/// parallelism, small enough that their buffers stay a few hundred KiB.
const READ_ALL_DEPTH: usize = 64;
/// Live records the cleaner holds before it moves them (see `clean`).
const CLEAN_BATCH_BYTES: usize = 256 << 10;
/// The tier counts as full of live data for this long after its cleaner
/// evicted a live value or found no segment less than `FULL_LIVE_SHARE`
/// live (admission then turns rarely used values away, if so set).
const PRESSURE_MS: u64 = 10_000;
const FULL_LIVE_SHARE: f64 = 0.9;

/// Counters for INFO and metrics.
#[derive(Default)]
pub struct ColdLogStats {
    /// Record bytes appended (demotions and the cleaner's moves).
    pub written_bytes: AtomicU64,
    /// Record bytes no key refers to any more.
    pub dead_bytes: AtomicU64,
    /// Segments the cleaner recycled, records it moved, keys it evicted.
    pub cleaned_segments: AtomicU64,
    pub moved_records: AtomicU64,
    pub evicted_keys: AtomicU64,
    /// Segments read whole by the cleaner, and those it freed without a
    /// read (nothing live left in them).
    pub segment_reads: AtomicU64,
    pub freed_unread: AtomicU64,
    /// Demotions refused (no room yet): those keys were evicted.
    pub refused: AtomicU64,
    /// Demotions declined while the cleaner freed a segment (busy): those
    /// keys stayed in RAM, and writes waited for room.
    pub deferred: AtomicU64,
    /// Values used once or never evicted instead of demoted, by admission.
    pub not_admitted: AtomicU64,
    /// Disk reads issued.
    pub disk_reads: AtomicU64,
    /// Reads served from the staging buffer.
    pub staged_reads: AtomicU64,
    /// Time of device reads, issue to completion (shared with the
    /// completions, which run on an I/O thread or the worker's loop).
    pub read_latency: Arc<IoHistogram>,
    /// Its stages: issued until the device started it (a worker's batch
    /// waiting for its pass to end, the hand-over to the engine's thread),
    /// and on the device.
    pub read_queue_latency: Arc<IoHistogram>,
    pub read_device_latency: Arc<IoHistogram>,
    /// Device reads issued and not completed now, and the most at once.
    pub reads_in_flight: Arc<AtomicU64>,
    pub reads_in_flight_peak: Arc<AtomicU64>,
}

/// Unix time in ms (a test's simulated clock, or the system's).
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

pub struct ColdLog {
    log: SegmentLog,
    max_segments: u32,
    /// Append heads: 0 for values without a TTL, then by expiry bucket.
    heads: usize,
    segments: Segments,
    clock: Clock,
    /// `tier-admission frequent` (shared with the configuration).
    admission_frequent: Arc<std::sync::atomic::AtomicBool>,
    /// Until when (clock ms) the tier counts as full of live data.
    pressured_until: AtomicU64,
    /// The cleaner found a segment it could not free without discarding
    /// values the policy keeps (noeviction, volatile-* without a TTL):
    /// until a segment is freed, a demotion that finds no room fails at
    /// once.
    stuck: std::sync::atomic::AtomicBool,
    /// Appends in progress by parity of `generation`: the cleaner waits
    /// for those begun before it looked at which segments are active
    /// ([`Self::settle`]).
    appending: [AtomicU64; 2],
    generation: AtomicU64,
    /// Wakes the flusher early (appends waiting for a flush).
    kick: (Mutex<bool>, Condvar),
    /// Record bytes appended and not yet written (an estimate from above).
    unflushed: Arc<AtomicU64>,
    /// A demotion found no free segment while the cleaner could still make
    /// one; cleared when a segment is freed.
    starved: Arc<std::sync::atomic::AtomicBool>,
    /// When `starved` was last set (mono ms): for `FULL_WAIT` after, the
    /// tier is [`ColdTier::busy`] (keys stay, writes wait for it); later
    /// its refusals count as such (the policy may evict instead).
    starved_since_ms: AtomicU64,
    /// Told when the flusher wrote or the cleaner freed a segment: writes
    /// waiting in [`ColdTier::backlog`] look again.
    progress: Arc<tokio::sync::Notify>,
    /// A write waited the longest and the tier was still behind: until
    /// then (mono ms) writes go on without waiting (the tier refuses what
    /// finds no room), so a failing writer cannot hold them for good.
    gave_up_until: Arc<AtomicU64>,
    pub stats: ColdLogStats,
    /// "io_uring: ...", "aio: ..." or "threads: ...": the engine and why.
    pub engine: String,
}

impl ColdLog {
    /// The engine's name alone ("io_uring", "aio", "threads").
    pub fn engine_name(&self) -> &'static str {
        self.log.engine_name()
    }

    /// Opens an empty cold tier in `dir` (created; old segment files
    /// removed) with `max_disk` bytes of segments.
    pub fn open(dir: &Path, max_disk: u64, choice: EngineChoice, buffers: Arc<BufferGauge>) -> io::Result<ColdLog> {
        Self::open_with_clock(dir, max_disk, choice, buffers, Arc::new(crate::sys::clock::now_ms))
    }

    /// [`Self::open`] with the clock expiry and ages are judged by.
    pub fn open_with_clock(
        dir: &Path,
        max_disk: u64,
        choice: EngineChoice,
        buffers: Arc<BufferGauge>,
        clock: Clock,
    ) -> io::Result<ColdLog> {
        std::fs::create_dir_all(dir)?;
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            if e.file_type()?.is_file() {
                std::fs::remove_file(e.path())?;
            }
        }
        let (segment_size, max_segments) = Self::shape(max_disk);
        let (engine, reason) = probe(choice)?;
        let volume = std::sync::Arc::new(DirVolume::open(dir, true)?);
        let config =
            LogConfig { segment_size, max_segments, sync: false, buffers: buffers.clone(), ..LogConfig::default() };
        let (log, _) = SegmentLog::open(volume, engine, config, |_, _| {})?;
        let heads = Self::heads_for(max_segments);
        log.set_heads(heads);
        Ok(ColdLog {
            log,
            max_segments,
            heads,
            segments: Segments::new(max_segments),
            clock,
            admission_frequent: Arc::default(),
            pressured_until: AtomicU64::new(0),
            stuck: Default::default(),
            appending: [AtomicU64::new(0), AtomicU64::new(0)],
            generation: AtomicU64::new(0),
            kick: (Mutex::new(false), Condvar::new()),
            unflushed: Arc::default(),
            starved: Arc::default(),
            starved_since_ms: AtomicU64::new(0),
            progress: Arc::default(),
            gave_up_until: Arc::default(),
            stats: ColdLogStats::default(),
            engine: reason,
        })
    }

    /// Follows the `tier-admission` setting in `frequent`.
    pub fn with_admission(self, frequent: Arc<std::sync::atomic::AtomicBool>) -> ColdLog {
        ColdLog { admission_frequent: frequent, ..self }
    }

    /// The tier is full of live data: for a while, admission applies.
    fn pressured(&self) {
        self.pressured_until.fetch_max((self.clock)() + PRESSURE_MS, Relaxed);
    }

    /// Segment size and count for a budget: at least 8 segments (so the
    /// cleaner's headroom is a small share), 1–8 MiB each (the cleaner
    /// reads a whole one at a time).
    fn shape(max_disk: u64) -> (u64, u32) {
        let size = (max_disk / 8).clamp(1 << 20, 8 << 20) / 4096 * 4096;
        let count = (max_disk / size).max(HEADROOM_SEGMENTS as u64 + 2) as u32;
        (size, count)
    }

    /// Append heads for a budget of `segments`: each holds a segment open,
    /// so one per four segments, up to one per expiry bucket and one for
    /// values without a TTL.
    fn heads_for(segments: u32) -> usize {
        (segments as usize / 4).clamp(1, 1 + cleaning::TTL_BUCKETS)
    }

    /// Bytes of segments in use.
    pub fn disk_bytes(&self) -> u64 {
        u64::from(self.log.segments_in_use()) * self.log.segment_size()
    }

    /// The budget in bytes.
    pub fn max_bytes(&self) -> u64 {
        u64::from(self.max_segments) * self.log.segment_size()
    }

    fn wake(&self) {
        let (m, cv) = &self.kick;
        *m.lock() = true;
        cv.notify_one();
    }

    /// Appends a record to the head for its expiry; a demotion (reserve
    /// one) leaves a segment for the cleaner, whose moves (reserve none)
    /// may take the last one.
    fn append(&self, db: usize, key: &[u8], expire_at: u64, value: &[u8], reserve: u32) -> io::Result<RecordAddr> {
        // Counted in the generation current once counted: one that `settle`
        // ended meanwhile would not wait for it.
        let g = loop {
            let current = self.generation.load(SeqCst);
            let g = (current & 1) as usize;
            self.appending[g].fetch_add(1, SeqCst);
            if self.generation.load(SeqCst) == current {
                break g;
            }
            self.appending[g].fetch_sub(1, SeqCst);
        };
        let appended = self.append_counted(db, key, expire_at, value, reserve);
        self.appending[g].fetch_sub(1, SeqCst);
        appended
    }

    fn append_counted(
        &self,
        db: usize,
        key: &[u8],
        expire_at: u64,
        value: &[u8],
        reserve: u32,
    ) -> io::Result<RecordAddr> {
        let now = (self.clock)();
        let rec = Record { kind: RecordKind::Set, db: db as u32, key, value, expire_at_ms: expire_at, seq: 0 };
        let head = cleaning::head_for(expire_at, now, self.heads);
        let (_, addr) = self.log.append_at(head, &rec, reserve)?;
        self.unflushed.fetch_add(u64::from(addr.len), Relaxed);
        self.segments.appended(addr.segment, addr.len, expire_at, now);
        self.stats.written_bytes.fetch_add(u64::from(addr.len), Relaxed);
        Ok(addr)
    }

    /// The flusher thread's loop body: waits up to `idle` for appends, then
    /// writes what is staged (records are readable from the staging buffer
    /// meanwhile, but it holds RAM). A write error is logged; the log then
    /// refuses appends (keys at the limit are evicted) while what was
    /// written stays readable.
    pub fn flush_step(&self, idle: Duration) {
        {
            let (m, cv) = &self.kick;
            let mut kicked = m.lock();
            if !*kicked {
                cv.wait_for(&mut kicked, idle);
            }
            *kicked = false;
        }
        let staged = self.unflushed.load(Relaxed);
        if self.log.appended_seq() > self.log.durable_seq()
            && let Err(e) = self.log.flush_staged()
        {
            tracing::error!("cold tier: write failed: {e}; values at the limit are evicted from now on");
        }
        // What `staged` counted is written now: by this flush, or by one
        // another path made since it was counted (the cleaner's own). Left
        // counted, it would hold every later demotion back once appends stop
        // (`wait_for_room`), and the tier would evict instead for good.
        if staged > 0 {
            let _ = self.unflushed.fetch_update(Relaxed, Relaxed, |u| Some(u.saturating_sub(staged)));
            self.progress.notify_waiters();
        }
    }

    /// Keeps what waits to be written within the hard bound without
    /// waiting for another thread: past it, the caller writes the staged
    /// records out itself. False if that failed.
    fn keep_staging_bounded(&self) -> bool {
        if self.unflushed.load(Relaxed) <= MAX_UNFLUSHED_HARD {
            return true;
        }
        let staged = self.unflushed.load(Relaxed);
        match self.log.flush_staged() {
            Ok(_) => {
                let _ = self.unflushed.fetch_update(Relaxed, Relaxed, |u| Some(u.saturating_sub(staged)));
                self.progress.notify_waiters();
                true
            }
            Err(e) => {
                tracing::error!("cold tier: write failed: {e}; values at the limit are evicted from now on");
                false
            }
        }
    }

    /// Whether writes should wait before they take their locks: the
    /// flusher is behind, or demotions found no segment the cleaner can
    /// still free.
    fn behind(unflushed: &AtomicU64, starved: &std::sync::atomic::AtomicBool) -> bool {
        unflushed.load(Relaxed) > MAX_UNFLUSHED || starved.load(Relaxed)
    }

    /// The maintenance thread's loop body: keeps a spare segment ready,
    /// frees what needs no read, and cleans while the log is near its
    /// budget. (Only this thread prepares spares: see
    /// [`Segments::end_use`].)
    pub fn maintain(&self, ks: &Keyspace) {
        let cleaned = self.stats.cleaned_segments.load(Relaxed);
        self.maintain_segments(ks);
        if self.stats.cleaned_segments.load(Relaxed) != cleaned {
            // Room for demotions the tier refused, or the keyspace gave up on.
            ks.tier_has_room();
        }
        // A segment freed, or room to open one: writes waiting for room try
        // again (one whose demotion still finds none sets it again).
        if self.starved.load(Relaxed)
            && (self.stats.cleaned_segments.load(Relaxed) != cleaned
                || self.log.segments_in_use() + HEADROOM_SEGMENTS <= self.max_segments)
        {
            self.starved.store(false, Relaxed);
            ks.tier_has_room();
            self.progress.notify_waiters();
        }
    }

    fn maintain_segments(&self, ks: &Keyspace) {
        let _ = self.log.ensure_spare();
        while let Some(v) = self.pick(true) {
            if !self.free_unread(v) {
                break;
            }
        }
        // A bound: moves may fill as much as a cleaning frees.
        for _ in 0..self.max_segments {
            if self.log.segments_in_use() + HEADROOM_SEGMENTS <= self.max_segments {
                break;
            }
            let Some(victim) = self.pick(false) else { break };
            let kind = ks.policy_kind();
            if !victim.unread && victim.dead == 0 && (!kind.evicts() || kind.is_volatile()) {
                // Moving a segment whose every record is still some key's
                // value frees nothing unless keys are evicted, which this
                // policy may not do to all of them: only churn.
                self.pressured();
                self.stuck.store(true, Relaxed);
                self.starved.store(false, Relaxed);
                break;
            }
            let appended = victim.live + victim.dead;
            if !victim.unread && victim.live as f64 >= FULL_LIVE_SHARE * appended as f64 {
                self.pressured();
            }
            let cleaned = if victim.unread { self.free_unread(victim) } else { self.clean(ks, victim.segment) };
            if !cleaned {
                break;
            }
        }
    }

    /// The next segment to clean (`unread_only`: only one freeable without
    /// a read).
    fn pick(&self, unread_only: bool) -> Option<Victim> {
        let active = self.log.active_segments();
        self.settle();
        self.segments.pick(&active, (self.clock)()).filter(|v| v.unread || !unread_only)
    }

    /// Waits for the appends in progress to be counted: a record lands in
    /// its segment a moment before it is counted there, and a segment no
    /// head appends to any more must not look emptier than it is (it could
    /// be freed unread). Appends begun after this cannot go to a segment
    /// that was not active before it.
    fn settle(&self) {
        let g = (self.generation.fetch_add(1, SeqCst) & 1) as usize;
        while self.appending[g].load(SeqCst) != 0 {
            std::thread::yield_now();
        }
    }

    /// Recycles a segment and ends its use; false if it could not be freed
    /// (records of it still staged: try again later).
    fn recycle(&self, victim: u32) -> bool {
        match self.log.free_segment(victim) {
            Ok(()) => {
                self.stuck.store(false, Relaxed);
                self.starved.store(false, Relaxed);
                self.progress.notify_waiters();
                let dead = self.segments.end_use(victim);
                let _ = self.stats.dead_bytes.fetch_update(Relaxed, Relaxed, |d| Some(d.saturating_sub(dead)));
                self.stats.cleaned_segments.fetch_add(1, Relaxed);
                true
            }
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => false,
            Err(e) => {
                tracing::error!(segment = victim, "cold tier: cannot recycle a segment: {e}");
                false
            }
        }
    }

    /// Frees a segment holding nothing a key may still read.
    fn free_unread(&self, v: Victim) -> bool {
        let freed = self.recycle(v.segment);
        if freed {
            self.stats.freed_unread.fetch_add(1, Relaxed);
        }
        freed
    }

    /// Moves the live records of `victim` forward and recycles it, a batch
    /// at a time while the segment is read: the records held in between
    /// are not in the buffers the memory budget leaves out, so they stay
    /// few (a whole segment's worth once made writes answer OOM).
    fn clean(&self, ks: &Keyspace, victim: u32) -> bool {
        let mut live = Vec::new();
        let mut held = 0;
        // Keys the policy may not discard that found no room: the segment
        // still holds their values and is not recycled.
        let kept = std::cell::Cell::new(0u64);
        let relocate = |live: &mut Vec<(OwnedRecord, RecordAddr)>| {
            for (rec, addr) in live.drain(..) {
                let moved = ks.relocate_cold(rec.db as usize, &rec.key, (victim, addr.offset), || {
                    match self.append(rec.db as usize, &rec.key, rec.expire_at_ms, &rec.value, 0) {
                        Ok(a) => Some((a.segment, a.offset, a.len)),
                        Err(_) => None,
                    }
                });
                match moved {
                    Some(Relocated::Moved) => self.stats.moved_records.fetch_add(1, Relaxed),
                    Some(Relocated::Evicted) => {
                        self.pressured();
                        self.stats.evicted_keys.fetch_add(1, Relaxed)
                    }
                    Some(Relocated::Kept) => {
                        kept.set(kept.get() + 1);
                        0
                    }
                    None => 0,
                };
            }
        };
        self.stats.segment_reads.fetch_add(1, Relaxed);
        if let Err(e) = self.log.scan_segment(victim, |rec, addr| {
            // Expired ones too while their key still refers to them: the
            // keyspace's expiry removes the key (and so forgets the record).
            if rec.kind == RecordKind::Set {
                held += addr.len as usize;
                live.push((rec.to_owned(), addr));
                if held >= CLEAN_BATCH_BYTES {
                    relocate(&mut live);
                    held = 0;
                }
            }
        }) {
            tracing::error!(segment = victim, "cold tier: cannot read a segment to clean it: {e}");
            return false;
        }
        relocate(&mut live);
        // The moved records must be on disk before their old copies go.
        if let Err(e) = self.log.flush_staged() {
            tracing::error!("cold tier: write failed while cleaning: {e}");
            return false;
        }
        if kept.get() > 0 {
            // Full of values the policy keeps (noeviction): demotions fail
            // at once from now on, until a segment is freed, instead of
            // each waiting `FULL_WAIT` for a cleaner that cannot help.
            self.pressured();
            self.stuck.store(true, Relaxed);
            self.starved.store(false, Relaxed);
            return false;
        }
        self.recycle(victim)
    }
}

impl ColdLog {
    /// A read of the record at `loc`: from the staging buffer if it is
    /// not written yet, else from the device, now or (`soon`) with the
    /// other reads of this thread's pass (`io::defer_submissions`).
    fn read_from(&self, loc: ColdLoc, done: Box<dyn FnOnce(io::Result<ColdRecord>) + Send>, soon: bool) {
        let addr = addr_of(loc);
        if let Some(rec) = self.log.read_staged(addr) {
            self.stats.staged_reads.fetch_add(1, Relaxed);
            return done(Ok(ColdRecord { key: rec.key, value: rec.value, expire_at: rec.expire_at_ms }));
        }
        let st = &self.stats;
        st.disk_reads.fetch_add(1, Relaxed);
        let in_flight = st.reads_in_flight.fetch_add(1, Relaxed) + 1;
        st.reads_in_flight_peak.fetch_max(in_flight, Relaxed);
        let (total, queue, device, flight) = (
            st.read_latency.clone(),
            st.read_queue_latency.clone(),
            st.read_device_latency.clone(),
            st.reads_in_flight.clone(),
        );
        let issued = crate::sys::clock::mono_ns();
        let on_record: super::log::OnRecord = Box::new(move |r, started| {
            let now = crate::sys::clock::mono_ns();
            flight.fetch_sub(1, Relaxed);
            total.record(now.saturating_sub(issued) / 1000);
            if started != 0 {
                queue.record(started.saturating_sub(issued) / 1000);
                device.record(now.saturating_sub(started) / 1000);
            }
            done(r.map(|rec| ColdRecord { key: rec.key, value: rec.value, expire_at: rec.expire_at_ms }))
        });
        if soon { self.log.read_soon(addr, on_record) } else { self.log.read_async(addr, on_record) }
    }
}

fn addr_of(loc: ColdLoc) -> RecordAddr {
    RecordAddr { segment: loc.segment, offset: loc.offset, len: loc.len }
}

impl ColdTier for ColdLog {
    /// Runs under the victim's partition lock, so it never waits: writes
    /// wait for a writer that is behind before they take any lock
    /// ([`ColdTier::backlog`]), and past the hard bound a demotion writes
    /// the staged records out itself. When no segment is free while the
    /// cleaner can still free one, it declines at once and the tier is
    /// [`ColdTier::busy`]: the key stays in RAM and writes wait for room
    /// before their locks (for up to `FULL_WAIT`; then refusals are
    /// refusals again and the policy may evict instead).
    fn demote(&self, db: usize, key: &[u8], expire_at: u64, encoded: &[u8]) -> Option<(u32, u32, u32)> {
        if !self.keep_staging_bounded() {
            self.stats.refused.fetch_add(1, Relaxed);
            return None;
        }
        match self.append(db, key, expire_at, encoded, 1) {
            Ok(a) => {
                if self.unflushed.load(Relaxed) > MAX_UNFLUSHED {
                    self.wake();
                }
                Some((a.segment, a.offset, a.len))
            }
            // No segment free: the cleaner is behind. A full volume (the
            // log is out of space) it cannot help, nor a cleaner stuck on
            // keys the policy keeps: those are refusals.
            Err(e)
                if e.kind() == io::ErrorKind::StorageFull
                    && !self.stuck.load(Relaxed)
                    && !self.log.is_out_of_space() =>
            {
                if !self.starved.load(Relaxed) {
                    self.starved_since_ms.store(crate::sys::clock::mono_ns() / 1_000_000, Relaxed);
                    self.starved.store(true, Relaxed);
                }
                self.wake();
                if self.busy() {
                    self.stats.deferred.fetch_add(1, Relaxed);
                } else {
                    self.pressured();
                    self.stats.refused.fetch_add(1, Relaxed);
                }
                None
            }
            Err(_) => {
                self.pressured();
                self.stats.refused.fetch_add(1, Relaxed);
                self.wake();
                None
            }
        }
    }

    fn busy(&self) -> bool {
        self.starved.load(Relaxed)
            && crate::sys::clock::mono_ns() / 1_000_000
                < self.starved_since_ms.load(Relaxed) + FULL_WAIT.as_millis() as u64
            && !self.stuck.load(Relaxed)
            && !self.log.is_out_of_space()
    }

    fn backlog(&self) -> Option<crate::store::PendingRead> {
        if !Self::behind(&self.unflushed, &self.starved)
            || crate::sys::clock::mono_ns() / 1_000_000 < self.gave_up_until.load(Relaxed)
        {
            return None;
        }
        self.wake();
        let (unflushed, starved, progress) = (self.unflushed.clone(), self.starved.clone(), self.progress.clone());
        let gave_up = self.gave_up_until.clone();
        let wait = if starved.load(Relaxed) { FULL_WAIT } else { FLUSH_WAIT };
        Some(Box::pin(async move {
            let deadline = tokio::time::Instant::now() + wait;
            loop {
                let progressed = progress.notified();
                if !Self::behind(&unflushed, &starved) {
                    return;
                }
                // Notified, or looked at again every few ms (the cleaner's
                // stuck state clears `starved` only when a segment is freed).
                let step = (tokio::time::Instant::now() + Duration::from_millis(5)).min(deadline);
                let _ = tokio::time::timeout_at(step, progressed).await;
                if tokio::time::Instant::now() >= deadline {
                    gave_up.store(crate::sys::clock::mono_ns() / 1_000_000 + 1000, Relaxed);
                    return;
                }
            }
        }))
    }

    fn read(&self, loc: ColdLoc, done: Box<dyn FnOnce(io::Result<ColdRecord>) + Send>) {
        self.read_from(loc, done, false)
    }

    fn read_soon(&self, loc: ColdLoc, done: Box<dyn FnOnce(io::Result<ColdRecord>) + Send>) {
        self.read_from(loc, done, true)
    }

    fn read_blocking(&self, loc: ColdLoc) -> io::Result<ColdRecord> {
        let addr = addr_of(loc);
        if let Some(rec) = self.log.read_staged(addr) {
            self.stats.staged_reads.fetch_add(1, Relaxed);
            return Ok(ColdRecord { key: rec.key, value: rec.value, expire_at: rec.expire_at_ms });
        }
        self.stats.disk_reads.fetch_add(1, Relaxed);
        let started = Instant::now();
        let read = self.log.read(addr);
        self.stats.read_latency.record(started.elapsed().as_micros() as u64);
        read.map(|rec| ColdRecord { key: rec.key, value: rec.value, expire_at: rec.expire_at_ms })
    }

    /// Up to `READ_ALL_DEPTH` reads in flight, in address order: the
    /// device serves them together, so a partition's thousands of keys on
    /// disk come back in a fraction of the time one by one would take
    /// (a SCAN waits for them under the partition's lock).
    fn read_all(&self, locs: &[ColdLoc]) -> Vec<io::Result<ColdRecord>> {
        let mut order: Vec<usize> = (0..locs.len()).collect();
        order.sort_unstable_by_key(|&i| (locs[i].segment, locs[i].offset));
        let mut results: Vec<Option<io::Result<ColdRecord>>> = locs.iter().map(|_| None).collect();
        let (tx, rx) = std::sync::mpsc::channel();
        let mut tx = Some(tx);
        let (mut next, mut in_flight) = (0, 0);
        while next < order.len() || in_flight > 0 {
            while let Some(sender) = tx.as_ref().filter(|_| in_flight < READ_ALL_DEPTH) {
                let (i, sender) = (order[next], sender.clone());
                self.read(locs[i], Box::new(move |r| drop(sender.send((i, r)))));
                next += 1;
                in_flight += 1;
                if next == order.len() {
                    tx = None; // a callback dropped unanswered ends the wait
                }
            }
            let Ok((i, r)) = super::io::recv_reaping(&rx) else { break };
            results[i] = Some(r);
            in_flight -= 1;
        }
        results.into_iter().map(|r| r.unwrap_or_else(|| Err(io::Error::other("a read was dropped")))).collect()
    }

    fn scan_records(&self, visit: &mut dyn FnMut(ColdLoc, &[u8], u64)) {
        // Records still staged are written first, so the scan sees them.
        if let Err(e) = self.log.flush_staged() {
            tracing::error!("cold tier: write failed before a scan: {e}");
        }
        for segment in self.segments.in_use() {
            // A segment recycled meanwhile has nothing of interest left.
            let _ = self.log.scan_segment(segment, |rec, addr| {
                if rec.kind == RecordKind::Set {
                    let loc = ColdLoc { segment, offset: addr.offset, len: addr.len, kind: ValueKind::Other };
                    visit(loc, rec.key, rec.expire_at_ms);
                }
            });
        }
    }

    fn forget(&self, loc: ColdLoc) {
        if self.segments.forget(loc.segment, loc.len) {
            self.stats.dead_bytes.fetch_add(u64::from(loc.len), Relaxed);
        }
    }

    fn admits_rarely_used(&self) -> bool {
        !self.admission_frequent.load(Relaxed) || (self.clock)() >= self.pressured_until.load(Relaxed)
    }

    fn not_admitted(&self) {
        self.stats.not_admitted.fetch_add(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    const T0: u64 = 1_700_000_000_000;

    /// A cold log of 8 one-MiB segments (two heads) in a scratch directory,
    /// on a clock the test moves.
    struct Rig {
        log: ColdLog,
        now: Arc<AtomicU64>,
        dir: std::path::PathBuf,
    }

    impl Rig {
        fn new(name: &str) -> Rig {
            Rig::with_admission(name, Arc::default())
        }

        fn with_admission(name: &str, frequent: Arc<std::sync::atomic::AtomicBool>) -> Rig {
            let dir = std::env::temp_dir().join(format!("strata-cold-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let now = Arc::new(AtomicU64::new(T0));
            let clock = now.clone();
            let log = ColdLog::open_with_clock(
                &dir,
                8 << 20,
                EngineChoice::Threads,
                Arc::default(),
                Arc::new(move || clock.load(Relaxed)),
            )
            .unwrap()
            .with_admission(frequent);
            assert_eq!((log.max_segments, log.heads), (8, 2));
            Rig { log, now, dir }
        }

        /// Demotes `n` values of about 1 KiB expiring at `expire_at`,
        /// writing them out as it goes; their addresses.
        fn demote(&self, n: usize, expire_at: u64) -> Vec<ColdLoc> {
            let value = vec![7u8; 1000];
            (0..n)
                .map(|i| {
                    if i % 256 == 0 {
                        // The flusher's and the maintenance thread's work.
                        self.log.flush_step(Duration::ZERO);
                        self.log.log.ensure_spare().unwrap();
                    }
                    let key = format!("k{expire_at}:{i}");
                    let (segment, offset, len) = self.log.demote(0, key.as_bytes(), expire_at, &value).unwrap();
                    ColdLoc { segment, offset, len, kind: crate::store::entry::ValueKind::Str }
                })
                .collect()
        }

        fn segments_of(locs: &[ColdLoc]) -> std::collections::BTreeSet<u32> {
            locs.iter().map(|l| l.segment).collect()
        }
    }

    impl Drop for Rig {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// Bytes another path wrote out (the cleaner flushes what it moved)
    /// leave the count of what waits to be written at the flusher's next
    /// step, so demotions are not held back for good once appends stop.
    #[test]
    fn bytes_another_flush_wrote_leave_the_unflushed_count() {
        let rig = Rig::new("unflushed");
        let value = vec![7u8; 1000];
        for i in 0..1100 {
            if i % 256 == 0 {
                rig.log.log.ensure_spare().unwrap();
            }
            rig.log.append(0, format!("k{i}").as_bytes(), 0, &value, 0).unwrap();
        }
        assert!(rig.log.unflushed.load(Relaxed) > MAX_UNFLUSHED, "the test stages more than the bound");
        rig.log.log.flush_staged().unwrap();
        rig.log.flush_step(Duration::ZERO);
        assert_eq!(rig.log.unflushed.load(Relaxed), 0);
        assert!(rig.log.backlog().is_none(), "writes are held back by bytes already written");
    }

    #[test]
    fn segments_of_expired_records_are_recycled_without_a_read() {
        let rig = Rig::new("expired");
        let ks = Keyspace::new(4);
        let forever = rig.demote(1500, 0);
        let short = rig.demote(3000, T0 + 30_000);
        rig.log.flush_step(Duration::ZERO);
        let (forever_segs, short_segs) = (Rig::segments_of(&forever), Rig::segments_of(&short));
        assert!(forever_segs.is_disjoint(&short_segs), "placed by expiry: {forever_segs:?} {short_segs:?}");
        assert!(short_segs.len() >= 3, "{short_segs:?}");
        // Before they expire, nothing is freed.
        rig.log.maintain(&ks);
        assert_eq!(rig.log.stats.freed_unread.load(Relaxed), 0);
        // They expire: the keyspace's expiry removes the keys and forgets
        // their records.
        rig.now.store(T0 + 30_000, Relaxed);
        for l in &short {
            rig.log.forget(*l);
        }
        let in_use = rig.log.log.segments_in_use();
        rig.log.maintain(&ks);
        // Every full segment of short-lived values goes (the head's own
        // segment stays until it fills), and not one is read.
        let freed = rig.log.stats.freed_unread.load(Relaxed);
        assert_eq!(freed, short_segs.len() as u64 - 1);
        assert_eq!(rig.log.log.segments_in_use(), in_use - freed as u32);
        assert_eq!(rig.log.stats.segment_reads.load(Relaxed), 0);
        assert_eq!(rig.log.stats.disk_reads.load(Relaxed), 0);
        // Long-lived values are untouched and read back.
        let loc = forever[10];
        assert_eq!(rig.log.read_blocking(loc).unwrap().value, vec![7u8; 1000]);
        // The dead bytes of the freed segments left the count with them.
        let head_segment = *short_segs.last().unwrap();
        let dead_left: u64 = short.iter().filter(|l| l.segment == head_segment).map(|l| u64::from(l.len)).sum();
        assert_eq!(rig.log.stats.dead_bytes.load(Relaxed), dead_left);
    }

    /// Workers demote and forget while the maintenance thread frees the
    /// segments with nothing live left: every record still live reads back.
    #[test]
    fn freeing_unread_while_demoting_never_frees_a_live_record() {
        let rig = Arc::new(Rig::new("concurrent"));
        let ks = Keyspace::new(4);
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let workers: Vec<_> = (0..3u8)
            .map(|w| {
                let rig = rig.clone();
                std::thread::spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                    let mut kept = Vec::new();
                    for i in 0..1000u32 {
                        // As a write does before it takes its locks.
                        if let Some(wait) = rig.log.backlog() {
                            rt.block_on(wait);
                        }
                        // Half have a TTL and soon expire (forgotten); of the
                        // rest, one in five lives on.
                        let expire_at = if i % 2 == 0 { T0 + 1_000 } else { 0 };
                        let value = vec![w ^ (i as u8); 1000];
                        let key = format!("w{w}:{i}");
                        let Some((segment, offset, len)) = rig.log.demote(0, key.as_bytes(), expire_at, &value) else {
                            continue;
                        };
                        let loc = ColdLoc { segment, offset, len, kind: crate::store::entry::ValueKind::Str };
                        if expire_at == 0 && i % 10 == 1 {
                            kept.push((loc, value));
                        } else {
                            rig.log.forget(loc);
                        }
                    }
                    kept
                })
            })
            .collect();
        let maintainer = {
            let (rig, done) = (rig.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(Relaxed) {
                    rig.log.flush_step(Duration::ZERO);
                    rig.log.maintain(&ks);
                }
                rig.log.flush_step(Duration::ZERO);
                rig.log.maintain(&ks);
            })
        };
        let kept: Vec<_> = workers.into_iter().flat_map(|w| w.join().unwrap()).collect();
        done.store(true, Relaxed);
        maintainer.join().unwrap();
        assert!(kept.len() >= 250, "{} values kept (demotions refused?)", kept.len());
        assert!(rig.log.stats.freed_unread.load(Relaxed) > 0, "dead and expired segments were freed");
        for (loc, value) in &kept {
            assert_eq!(&rig.log.read_blocking(*loc).unwrap().value, value, "{loc:?}");
        }
    }

    #[test]
    fn admission_turns_rarely_used_values_away_only_under_pressure() {
        let frequent = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let rig = Rig::with_admission("admission", frequent.clone());
        let ks = Keyspace::new(4);
        ks.set_policy(crate::policy::PolicyKind::AllKeysLru);
        assert!(rig.log.admits_rarely_used(), "tier-admission all");
        frequent.store(true, Relaxed);
        assert!(rig.log.admits_rarely_used(), "frequent, but the tier has room");
        // Fill the budget with values no key refers to, then with live ones
        // (none dead): the cleaner reads a segment of live data.
        rig.demote(6000, 0);
        rig.log.flush_step(Duration::ZERO);
        assert!(rig.log.log.segments_in_use() + HEADROOM_SEGMENTS > rig.log.max_segments);
        rig.log.maintain(&ks);
        assert!(rig.log.stats.segment_reads.load(Relaxed) > 0);
        assert!(!rig.log.admits_rarely_used(), "the cleaner found nothing but live data");
        frequent.store(false, Relaxed);
        assert!(rig.log.admits_rarely_used(), "tier-admission all admits everything, always");
        frequent.store(true, Relaxed);
        rig.now.fetch_add(PRESSURE_MS, Relaxed);
        assert!(rig.log.admits_rarely_used(), "pressure passes");
        rig.log.not_admitted();
        assert_eq!(rig.log.stats.not_admitted.load(Relaxed), 1);
    }

    /// Under noeviction the cleaner does not churn a budget full of live
    /// values (moving them frees nothing), and a demotion that finds no
    /// room fails at once instead of waiting for it.
    #[test]
    fn a_budget_full_of_values_noeviction_keeps_refuses_demotions_at_once() {
        let rig = Rig::new("noeviction-full");
        let ks = Keyspace::new(4);
        rig.demote(6000, 0);
        rig.log.flush_step(Duration::ZERO);
        rig.log.maintain(&ks);
        assert_eq!(rig.log.stats.segment_reads.load(Relaxed), 0, "nothing dead to clean");
        assert!(rig.log.stuck.load(Relaxed));
        let value = vec![7u8; 1000];
        let mut refused = 0;
        for i in 0..2000 {
            if i % 64 == 0 {
                rig.log.flush_step(Duration::ZERO);
            }
            if rig.log.demote(0, format!("more{i}").as_bytes(), 0, &value).is_none() {
                refused += 1;
            }
        }
        assert!(refused > 1000, "the budget is full: {refused} refused");
        assert!(rig.log.stuck.load(Relaxed), "until a segment is freed");
    }

    /// A demotion that finds no free segment while the cleaner can free
    /// one declines at once (it runs under a partition lock) and the tier
    /// is busy, not refusing, until the cleaner frees a segment; then
    /// demotions succeed again. Busy for `FULL_WAIT` at most.
    #[test]
    fn no_free_segment_declines_at_once_and_the_tier_is_busy_until_one_is_freed() {
        let rig = Rig::new("busy");
        let ks = Keyspace::new(4);
        let value = vec![7u8; 1000];
        let started = Instant::now();
        let (mut demoted, mut declined) = (Vec::new(), 0);
        // Until every segment is used.
        for i in 0..20_000 {
            if i % 64 == 0 {
                // The flusher's and the maintenance thread's work.
                rig.log.flush_step(Duration::ZERO);
                rig.log.log.ensure_spare().unwrap();
            }
            if let Some((segment, offset, len)) = rig.log.demote(0, format!("k{i}").as_bytes(), 0, &value) {
                demoted.push(ColdLoc { segment, offset, len, kind: crate::store::entry::ValueKind::Str });
                continue;
            }
            declined += 1;
            assert!(rig.log.busy(), "declined while the cleaner can make room: busy");
            if declined == 100 {
                break;
            }
        }
        assert_eq!(declined, 100);
        assert!(demoted.len() > 5000, "{} demoted before the first decline", demoted.len());
        assert!(started.elapsed() < Duration::from_millis(900), "declined without waiting: {:?}", started.elapsed());
        // They are overwritten meanwhile: the cleaner can free segments.
        for loc in demoted {
            rig.log.forget(loc);
        }
        assert_eq!(rig.log.stats.refused.load(Relaxed), 0, "busy is not a refusal");
        assert_eq!(rig.log.stats.deferred.load(Relaxed), 100);
        assert!(rig.log.backlog().is_some(), "writes wait for the cleaner");
        rig.log.flush_step(Duration::ZERO);
        rig.log.maintain(&ks);
        assert!(!rig.log.busy(), "a segment was freed");
        rig.log.log.ensure_spare().unwrap();
        assert!(rig.log.stats.freed_unread.load(Relaxed) > 0);
        assert!(rig.log.demote(0, b"after", 0, &value).is_some());
        // Starved for longer than FULL_WAIT: a refusal again.
        rig.log.starved.store(true, Relaxed);
        rig.log.starved_since_ms.store(crate::sys::clock::mono_ns() / 1_000_000 - 2_000, Relaxed);
        assert!(!rig.log.busy());
    }

    #[test]
    fn cost_benefit_prefers_dead_bytes_over_age_and_frees_dead_segments_unread() {
        let rig = Rig::new("cost-benefit");
        let ks = Keyspace::new(4);
        let old = rig.demote(1000, 0); // about one segment, all live
        rig.now.fetch_add(60_000, Relaxed);
        let newer = rig.demote(2000, 0);
        rig.now.fetch_add(1_000, Relaxed);
        rig.demote(1200, 0); // moves the head on
        rig.log.flush_step(Duration::ZERO);
        let old_seg = old[0].segment;
        let newer_seg = newer[newer.len() / 2].segment;
        assert_ne!(old_seg, newer_seg);
        // Most of the newer segment dies (overwritten, deleted, promoted).
        let in_newer: Vec<_> = newer.iter().filter(|l| l.segment == newer_seg).collect();
        for l in in_newer.iter().skip(in_newer.len() / 10) {
            rig.log.forget(**l);
        }
        rig.now.fetch_add(10_000, Relaxed);
        let v = rig.log.pick(false).unwrap();
        assert_eq!(v.segment, newer_seg, "{v:?}: the segment of mostly dead bytes, not the oldest");
        assert!(!v.unread);
        assert!(v.dead > 8 * v.live, "{v:?}");
        // With nothing live left it is freed without a read.
        for l in in_newer.iter().take(in_newer.len() / 10) {
            rig.log.forget(**l);
        }
        rig.log.maintain(&ks);
        assert_eq!(rig.log.stats.freed_unread.load(Relaxed), 1);
        assert_eq!(rig.log.stats.segment_reads.load(Relaxed), 0);
        assert_eq!(rig.log.pick(false).map(|v| v.segment), Some(old_seg), "then the oldest");
    }
}
