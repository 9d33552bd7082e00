//! The cold tier: values demoted from RAM at `maxmemory` live in a segment
//! log of their own under `<dir>/cold`, within `--max-disk`.
//!
//! - A cache, not a promise: it starts empty (files a previous run left are
//!   removed), is never fsynced, and losing it loses only what RAM could
//!   not hold. Durability is the journal's job (`crate::durability`); the
//!   two logs are apart so that neither's cleaning waits for the other.
//! - Demotion appends a record (the value in `store::dump`'s encoding, with
//!   key, database and expiry) and the entry keeps its address. A record
//!   not yet written is read from the log's staging buffer.
//! - Cleaning: when the log nears its budget, the oldest segment's records
//!   that are still some key's value move to the head of the log and the
//!   segment is recycled; records of keys deleted, overwritten, expired or
//!   promoted since are dropped. When even that cannot make room, the keys
//!   are evicted (their values were the coldest).

use super::io::{DirVolume, EngineChoice, probe};
use super::log::{LogConfig, RecordAddr, SegmentLog};
use super::record::{Record, RecordKind};
use crate::metrics::IoHistogram;
use crate::store::entry::{ColdLoc, ValueKind};
use crate::store::{ColdRecord, ColdTier, Keyspace};
use crate::sys::file::BufferGauge;
use std::collections::VecDeque;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Segments kept free for the cleaner's moves and the appends between two
/// cleanings.
const HEADROOM_SEGMENTS: u32 = 2;

/// Record bytes waiting to be written, at most: beyond it a demotion waits
/// for the flusher. Demoting frees RAM only once its record is written, so
/// without a bound a burst of writes at the limit would demote everything
/// warm into the staging buffer and then evict.
const MAX_UNFLUSHED: u64 = 1 << 20;
/// The longest a demotion waits for that before the key is evicted.
const FLUSH_WAIT: Duration = Duration::from_millis(200);
/// The longest it waits for the cleaner to free a segment.
const FULL_WAIT: Duration = Duration::from_secs(1);

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
    /// Demotions refused (no room yet): those keys were evicted.
    pub refused: AtomicU64,
    /// Disk reads issued.
    pub disk_reads: AtomicU64,
    /// Reads served from the staging buffer.
    pub staged_reads: AtomicU64,
    /// Time of device reads, issue to completion (shared with the
    /// completions, which run on the I/O thread).
    pub read_latency: Arc<IoHistogram>,
}

pub struct ColdLog {
    log: SegmentLog,
    max_segments: u32,
    /// Segments in the order appends first went to them (oldest first).
    order: Mutex<VecDeque<u32>>,
    /// Wakes the flusher early (appends waiting for a flush).
    kick: (Mutex<bool>, Condvar),
    /// Record bytes appended and not yet written (an estimate from above),
    /// and the flusher's signal that it wrote some.
    unflushed: AtomicU64,
    flushed: (Mutex<()>, Condvar),
    pub stats: ColdLogStats,
    /// "io_uring: ..." or "threads: ...".
    pub engine: String,
}

impl ColdLog {
    /// Opens an empty cold tier in `dir` (created; old segment files
    /// removed) with `max_disk` bytes of segments.
    pub fn open(dir: &Path, max_disk: u64, choice: EngineChoice, buffers: Arc<BufferGauge>) -> io::Result<ColdLog> {
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
        Ok(ColdLog {
            log,
            max_segments,
            order: Mutex::new(VecDeque::new()),
            kick: (Mutex::new(false), Condvar::new()),
            unflushed: AtomicU64::new(0),
            flushed: (Mutex::new(()), Condvar::new()),
            stats: ColdLogStats::default(),
            engine: reason,
        })
    }

    /// Segment size and count for a budget: at least 8 segments (so the
    /// cleaner's headroom is a small share), 1–8 MiB each (the cleaner
    /// reads a whole one at a time).
    fn shape(max_disk: u64) -> (u64, u32) {
        let size = (max_disk / 8).clamp(1 << 20, 8 << 20) / 4096 * 4096;
        let count = (max_disk / size).max(HEADROOM_SEGMENTS as u64 + 2) as u32;
        (size, count)
    }

    /// Bytes of segments in use.
    pub fn disk_bytes(&self) -> u64 {
        u64::from(self.log.segments_in_use()) * self.log.segment_size()
    }

    /// The budget in bytes.
    pub fn max_bytes(&self) -> u64 {
        u64::from(self.max_segments) * self.log.segment_size()
    }

    fn note_segment(&self, addr: RecordAddr) {
        let mut order = self.order.lock().unwrap();
        if order.back() != Some(&addr.segment) {
            order.retain(|&s| s != addr.segment);
            order.push_back(addr.segment);
        }
    }

    fn wake(&self) {
        let (m, cv) = &self.kick;
        *m.lock().unwrap() = true;
        cv.notify_one();
    }

    /// Appends a record; a demotion (`reserve` 1) leaves a segment for the
    /// cleaner, whose moves (`reserve` 0) may take the last one.
    fn append(&self, db: usize, key: &[u8], expire_at: u64, value: &[u8], reserve: u32) -> io::Result<RecordAddr> {
        let rec = Record { kind: RecordKind::Set, db: db as u32, key, value, expire_at_ms: expire_at, seq: 0 };
        let (_, addr) = self.log.append_leaving(&rec, reserve)?;
        self.unflushed.fetch_add(u64::from(addr.len), Relaxed);
        self.note_segment(addr);
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
            let mut kicked = m.lock().unwrap();
            if !*kicked {
                kicked = cv.wait_timeout(kicked, idle).unwrap().0;
            }
            *kicked = false;
        }
        let staged = self.unflushed.load(Relaxed);
        if self.log.appended_seq() > self.log.durable_seq() {
            if let Err(e) = self.log.flush_staged() {
                tracing::error!("cold tier: write failed: {e}; values at the limit are evicted from now on");
            }
            let _ = self.unflushed.fetch_update(Relaxed, Relaxed, |u| Some(u.saturating_sub(staged)));
            let _guard = self.flushed.0.lock().unwrap();
            self.flushed.1.notify_all();
        }
    }

    /// Holds a demotion back while too much is waiting to be written.
    fn wait_for_room(&self) -> bool {
        if self.unflushed.load(Relaxed) <= MAX_UNFLUSHED {
            return true;
        }
        self.wake();
        let deadline = std::time::Instant::now() + FLUSH_WAIT;
        let mut guard = self.flushed.0.lock().unwrap();
        while self.unflushed.load(Relaxed) > MAX_UNFLUSHED {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            guard = self.flushed.1.wait_timeout(guard, left.min(Duration::from_millis(2))).unwrap().0;
        }
        true
    }

    /// The maintenance thread's loop body: keeps a spare segment ready and
    /// cleans while the log is near its budget.
    pub fn maintain(&self, ks: &Keyspace) {
        let _ = self.log.ensure_spare();
        while self.log.segments_in_use() + HEADROOM_SEGMENTS > self.max_segments {
            if !self.clean_oldest(ks) {
                break;
            }
        }
    }

    /// Moves the live records of the oldest segment forward and recycles
    /// it; false when there is nothing to clean.
    fn clean_oldest(&self, ks: &Keyspace) -> bool {
        let active = self.log.active_segment();
        let Some(victim) = self.order.lock().unwrap().iter().copied().find(|&s| Some(s) != active) else {
            return false;
        };
        let mut live = Vec::new();
        if let Err(e) = self.log.scan_segment(victim, |rec, addr| {
            if rec.kind == RecordKind::Set {
                live.push((rec.to_owned(), addr));
            }
        }) {
            tracing::error!(segment = victim, "cold tier: cannot read a segment to clean it: {e}");
            return false;
        }
        let scanned: u64 = live.iter().map(|(_, a)| u64::from(a.len)).sum();
        let mut moved_bytes = 0u64;
        for (rec, addr) in live {
            let from = (addr.segment, addr.offset);
            let moved = ks.relocate_cold(rec.db as usize, &rec.key, from, || {
                match self.append(rec.db as usize, &rec.key, rec.expire_at_ms, &rec.value, 0) {
                    Ok(a) => Some((a.segment, a.offset, a.len)),
                    Err(_) => None,
                }
            });
            if moved == Some(true) {
                moved_bytes += u64::from(addr.len);
            }
            match moved {
                Some(true) => self.stats.moved_records.fetch_add(1, Relaxed),
                Some(false) => self.stats.evicted_keys.fetch_add(1, Relaxed),
                None => 0,
            };
        }
        // The moved records must be on disk before their old copies go.
        if let Err(e) = self.log.flush_staged() {
            tracing::error!("cold tier: write failed while cleaning: {e}");
            return false;
        }
        match self.log.free_segment(victim) {
            Ok(()) => {
                self.order.lock().unwrap().retain(|&s| s != victim);
                self.stats.cleaned_segments.fetch_add(1, Relaxed);
                // Every record there was moved (live elsewhere now) or dead.
                let reclaimed = scanned - moved_bytes;
                let _ = self.stats.dead_bytes.fetch_update(Relaxed, Relaxed, |d| Some(d.saturating_sub(reclaimed)));
                true
            }
            Err(e) => {
                tracing::error!(segment = victim, "cold tier: cannot recycle a segment: {e}");
                false
            }
        }
    }
}

fn addr_of(loc: ColdLoc) -> RecordAddr {
    RecordAddr { segment: loc.segment, offset: loc.offset, len: loc.len }
}

impl ColdTier for ColdLog {
    fn demote(&self, db: usize, key: &[u8], expire_at: u64, encoded: &[u8]) -> Option<(u32, u32, u32)> {
        if !self.wait_for_room() {
            self.stats.refused.fetch_add(1, Relaxed);
            return None;
        }
        // No segment free: the cleaner is behind. The write waits for it
        // (back-pressure) rather than lose the value, within a bound.
        let deadline = std::time::Instant::now() + FULL_WAIT;
        loop {
            match self.append(db, key, expire_at, encoded, 1) {
                Ok(a) => return Some((a.segment, a.offset, a.len)),
                Err(e) if e.kind() == io::ErrorKind::StorageFull && std::time::Instant::now() < deadline => {
                    self.wake();
                    let guard = self.flushed.0.lock().unwrap();
                    let _ = self.flushed.1.wait_timeout(guard, Duration::from_millis(2)).unwrap();
                }
                Err(_) => {
                    self.stats.refused.fetch_add(1, Relaxed);
                    self.wake();
                    return None;
                }
            }
        }
    }

    fn read(&self, loc: ColdLoc, done: Box<dyn FnOnce(io::Result<ColdRecord>) + Send>) {
        let addr = addr_of(loc);
        if let Some(rec) = self.log.read_staged(addr) {
            self.stats.staged_reads.fetch_add(1, Relaxed);
            return done(Ok(ColdRecord { key: rec.key, value: rec.value, expire_at: rec.expire_at_ms }));
        }
        self.stats.disk_reads.fetch_add(1, Relaxed);
        let (latency, started) = (self.stats.read_latency.clone(), Instant::now());
        self.log.read_async(
            addr,
            Box::new(move |r| {
                latency.record(started.elapsed().as_micros() as u64);
                done(r.map(|rec| ColdRecord { key: rec.key, value: rec.value, expire_at: rec.expire_at_ms }))
            }),
        );
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

    fn scan_records(&self, visit: &mut dyn FnMut(ColdLoc, &[u8], u64)) {
        // Records still staged are written first, so the scan sees them.
        if let Err(e) = self.log.flush_staged() {
            tracing::error!("cold tier: write failed before a scan: {e}");
        }
        let segments: Vec<u32> = self.order.lock().unwrap().iter().copied().collect();
        for segment in segments {
            // A segment recycled meanwhile has nothing of interest left.
            let _ = self.log.scan_segment(segment, |rec, addr| {
                if rec.kind == RecordKind::Set {
                    let loc =
                        ColdLoc { segment: addr.segment, offset: addr.offset, len: addr.len, kind: ValueKind::Other };
                    visit(loc, rec.key, rec.expire_at_ms);
                }
            });
        }
    }

    fn forget(&self, loc: ColdLoc) {
        self.stats.dead_bytes.fetch_add(u64::from(loc.len), Relaxed);
    }
}
