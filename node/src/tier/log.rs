//! The segment log: a directory of fixed-size, append-only segment files
//! (see [`super::segment`] for a segment's header and addresses). Opening
//! the log recovers it ([`super::recovery`]).
//!
//! New segment files are zero-filled once (writing every block, so their
//! extents are allocated and written: preallocation alone leaves them
//! "unwritten" and makes each first write pay a metadata update at
//! fdatasync); freed ones are recycled by clearing their header.
//!
//! Appends from many threads are packed into one staging buffer (address
//! and sequence number assigned at once); [`SegmentLog::flush`] writes it in
//! aligned blocks — rewriting the partial last block, whose earlier bytes
//! are unchanged — then fdatasyncs, and returns the sequence number now
//! durable. One flush runs at a time. A write or sync error poisons the
//! log: an fsync is never retried and trusted.

use super::io::{FileHandle, IoEngine, IoOp, Volume, check, error, run_blocking};
use super::record::{self, OwnedRecord, Record};
use super::recovery;
use super::segment::{SEGMENT_HEADER, SegmentMeta, SegmentWindows, header_block, segment_name};
use crate::base::random::splitmix64;
use crate::sys::file::{self, AlignedBuf, BufferGauge, IO_ALIGN};
use crate::sys::hugepages::HugeAlloc;
use parking_lot::{Mutex, RwLock};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};

pub use super::recovery::{ReadProgress, RecoveryReport};
pub use super::segment::RecordAddr;

/// Zero-fill writes of a new segment are this large (a huge page: with
/// `hugepages` on, each buffer is one)...
const IO_CHUNK: u64 = 2 << 20;
/// ...and this many are in flight at once: the buffers a segment's
/// creation holds stay within `IO_CHUNK` × this, whatever the segment size.
const IO_WAVE: usize = 2;

/// What a record read calls with the record and when the device started
/// the read (`IoDone::started_ns`, 0 if it never did).
pub type OnRecord = Box<dyn FnOnce(io::Result<OwnedRecord>, u64) + Send>;

/// Shape and budget of the log.
#[derive(Clone, Debug)]
pub struct LogConfig {
    /// Bytes per segment file: a multiple of 4096, at least two blocks, at
    /// most 4 GiB (the default is 64 MiB).
    pub segment_size: u64,
    /// Segment files at most (the disk budget is `segment_size` × this).
    pub max_segments: u32,
    /// Seeds the segment nonces (tests); None: from the clock.
    pub seed: Option<u64>,
    /// fdatasync after each flush's writes (false for the cold tier: a
    /// cache that starts empty, whose records need only be readable).
    pub sync: bool,
    /// Counts the log's buffers (staged records, writes and reads in
    /// flight, the windows of a segment being scanned): the memory budget
    /// reports them apart.
    pub buffers: Arc<BufferGauge>,
    /// Recovery's progress (segments to scan and read), for INFO and logs.
    pub progress: Arc<ReadProgress>,
    /// Test only: report records durable without syncing, to show that the
    /// crash tests catch it.
    #[cfg(test)]
    pub ack_before_sync: bool,
}

impl Default for LogConfig {
    fn default() -> LogConfig {
        LogConfig {
            segment_size: 64 << 20,
            max_segments: 1024,
            seed: None,
            sync: true,
            buffers: Arc::default(),
            progress: Arc::default(),
            #[cfg(test)]
            ack_before_sync: false,
        }
    }
}

/// Record bytes staged for a flush, counted in the log's gauge; in huge
/// pages once they grow to one (with `hugepages` on).
struct Staged {
    bytes: allocator_api2::vec::Vec<u8, HugeAlloc>,
    gauge: Arc<BufferGauge>,
}

impl Staged {
    fn new(gauge: &Arc<BufferGauge>) -> Staged {
        Staged { bytes: allocator_api2::vec::Vec::new_in(HugeAlloc), gauge: gauge.clone() }
    }

    fn copy_of(bytes: &[u8], gauge: &Arc<BufferGauge>) -> Staged {
        let mut s = Staged::new(gauge);
        s.append(|b| crate::sys::hugepages::extend_from_slice(b, bytes));
        s
    }

    /// Runs `f` on the bytes, counting what their block changed by.
    fn append(&mut self, f: impl FnOnce(&mut allocator_api2::vec::Vec<u8, HugeAlloc>)) {
        let before = self.block();
        f(&mut self.bytes);
        self.gauge.resize(before, self.block());
    }

    /// Bytes of the block holding them: the allocator's size class of the
    /// capacity (huge pages round to about the same).
    fn block(&self) -> usize {
        crate::sys::alloc::usable_size(self.bytes.capacity(), 1)
    }
}

impl std::ops::Deref for Staged {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        self.gauge.resize(self.block(), 0);
    }
}

/// Bytes waiting for the next flush, for one segment.
struct Chunk {
    segment: u32,
    file: FileHandle,
    /// Block-aligned file offset of `bytes[0]`.
    start: u64,
    bytes: Staged,
}

/// An append head: records appended to it go to its own segment, so a
/// user can keep apart records that will die together (the cold tier
/// places them by expiry). Head 0 is the log's own; the journal uses only it.
struct Head {
    /// The segment being appended to, its nonce, and the next free offset.
    active: Option<(u32, u64)>,
    pos: u64,
    /// Bytes of the active segment's partial last block (already flushed).
    tail: Staged,
}

struct Staging {
    next_seq: u64,
    heads: Vec<Head>,
    /// At most one per segment: the bytes each head appended since the
    /// last flush.
    chunks: Vec<Chunk>,
    /// A zeroed segment ready to take over when the active one is full.
    spare: Option<u32>,
    next_order: u64,
    rng: u64,
}

struct Shared {
    /// Segment files by id; None for an id whose file is missing (its
    /// creation was lost at a crash), recreated when needed.
    segments: Vec<Option<SegmentMeta>>,
    free: Vec<u32>,
    poisoned: bool,
}

/// The append-only segment log.
pub struct SegmentLog {
    volume: Arc<dyn Volume>,
    engine: Arc<dyn IoEngine>,
    config: LogConfig,
    staging: Mutex<Staging>,
    /// Held by a flush for its whole duration: one flush at a time.
    flushing: Mutex<()>,
    /// The chunks the flush in progress is writing: until it is done,
    /// reads of their records are served from here (`read_staged`).
    in_flight: Mutex<Vec<Chunk>>,
    shared: RwLock<Shared>,
    durable_seq: AtomicU64,
    /// Held while a spare segment is readied: one at a time (the I/O
    /// thread and a maintenance thread may both ask).
    readying: Mutex<()>,
    /// `Shared::poisoned`, read without a lock by appends.
    failed: AtomicBool,
    /// The volume had no room for the next segment (ENOSPC, EDQUOT): set
    /// when readying one failed so, cleared once one is ready. The error,
    /// for the user.
    out_of_space: AtomicBool,
    space_error: Mutex<Option<String>>,
}

impl SegmentLog {
    /// The I/O engine's name ("io_uring", "aio", "threads").
    pub fn engine_name(&self) -> &'static str {
        self.engine.name()
    }

    /// Opens the log in `volume`, recovering it: every valid record is
    /// handed to `visit` in log order with its address. Reads only; the
    /// torn tail, if any, is overwritten by the next flush. A crash during
    /// recovery changes nothing on disk.
    pub fn open(
        volume: Arc<dyn Volume>,
        engine: Arc<dyn IoEngine>,
        config: LogConfig,
        visit: impl FnMut(Record<'_>, RecordAddr),
    ) -> io::Result<(SegmentLog, RecoveryReport)> {
        let size = config.segment_size;
        if size % IO_ALIGN as u64 != 0 || size < 2 * SEGMENT_HEADER || size > u32::MAX as u64 + 1 {
            return Err(error(io::ErrorKind::InvalidInput, "segment size: a multiple of 4096, 8 KiB to 4 GiB"));
        }
        let (found, report) = recovery::recover(&*volume, &*engine, size, &config.buffers, &config.progress, visit)?;
        let recovery::Found { segments, free, resume, next_order } = found;
        // Appends resume in the last segment's partial block: its bytes.
        let resume = match resume {
            Some((id, nonce, end, file)) => {
                let tail = Self::read_partial_block(&*engine, &file, end, &config.buffers)?;
                Some((id, nonce, end, tail))
            }
            None => None,
        };
        let last_seq = report.last_seq;
        let seed = config.seed.unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
                ^ u64::from(std::process::id()) << 32
        });
        let (active, pos, tail) = match resume {
            Some((id, nonce, end, tail)) => (Some((id, nonce)), end, tail),
            None => (None, 0, Staged::new(&config.buffers)),
        };
        let log = SegmentLog {
            volume,
            engine,
            config,
            staging: Mutex::new(Staging {
                next_seq: last_seq + 1,
                heads: vec![Head { active, pos, tail }],
                chunks: Vec::new(),
                spare: None,
                next_order,
                rng: splitmix64(seed),
            }),
            flushing: Mutex::new(()),
            in_flight: Mutex::new(Vec::new()),
            shared: RwLock::new(Shared { segments, free, poisoned: false }),
            durable_seq: AtomicU64::new(last_seq),
            readying: Mutex::new(()),
            failed: AtomicBool::new(false),
            out_of_space: AtomicBool::new(false),
            space_error: Mutex::new(None),
        };
        // Recovery is done; the appender needs a segment to roll into. A
        // full volume does not keep the log from opening: what it holds is
        // readable, and appends wait for room (see `out_of_space`).
        match log.ensure_spare() {
            Err(e) if !file::is_out_of_space(&e) => return Err(e),
            _ => {}
        }
        Ok((log, report))
    }

    /// The bytes of the block holding `end` that come before it (the
    /// segment's partial last block, which the next flush rewrites).
    fn read_partial_block(
        engine: &dyn IoEngine,
        file: &FileHandle,
        end: u64,
        gauge: &Arc<BufferGauge>,
    ) -> io::Result<Staged> {
        let block = end - end % IO_ALIGN as u64;
        let want = (end - block) as usize;
        if want == 0 {
            return Ok(Staged::new(gauge));
        }
        let read = IoOp::Read { offset: block, buf: AlignedBuf::zeroed_in(IO_ALIGN, gauge) };
        let done = check(run_blocking(engine, vec![(file.clone(), read)]))?.pop().expect("one read");
        let buf = done.buf.expect("read returns its buffer");
        if done.result.expect("checked") < want {
            return Err(error(io::ErrorKind::UnexpectedEof, "the segment shrank during recovery"));
        }
        Ok(Staged::copy_of(&buf[..want], gauge))
    }

    /// Marks the log failed: no more flushes, nor appends.
    fn poison(&self) {
        self.shared.write().poisoned = true;
        self.failed.store(true, Ordering::Relaxed);
    }

    /// The highest sequence number appended (staged or written).
    pub fn appended_seq(&self) -> u64 {
        self.staging.lock().next_seq - 1
    }

    /// The highest sequence number known durable.
    pub fn durable_seq(&self) -> u64 {
        self.durable_seq.load(Ordering::Acquire)
    }

    /// Stages a record for the next flush; returns its sequence number and
    /// address. Fails when the active segment is full and no spare segment
    /// is ready (a flush prepares one), when the record can never fit a
    /// segment, or when the log is poisoned.
    pub fn append(&self, rec: &Record<'_>) -> io::Result<(u64, RecordAddr)> {
        self.append_leaving(rec, 0)
    }

    /// [`Self::append`], but a record that needs a new segment fails with
    /// StorageFull unless `reserve` more segments could still be had after
    /// it (free or not yet created): room kept for the cleaner's moves.
    pub fn append_leaving(&self, rec: &Record<'_>, reserve: u32) -> io::Result<(u64, RecordAddr)> {
        self.append_at(0, rec, reserve)
    }

    /// Makes `count` append heads (at least; never fewer than there are):
    /// see [`Self::append_at`].
    pub fn set_heads(&self, count: usize) {
        let mut st = self.staging.lock();
        while st.heads.len() < count {
            st.heads.push(Head { active: None, pos: 0, tail: Staged::new(&self.config.buffers) });
        }
    }

    /// [`Self::append_leaving`] to append head `head` (< [`Self::set_heads`]'s
    /// count): each head fills a segment of its own.
    pub fn append_at(&self, head: usize, rec: &Record<'_>, reserve: u32) -> io::Result<(u64, RecordAddr)> {
        let len = record::encoded_len(rec.key.len(), rec.value.len()) as u64;
        if len > self.config.segment_size - SEGMENT_HEADER {
            return Err(error(io::ErrorKind::InvalidInput, "record larger than a segment"));
        }
        if self.failed.load(Ordering::Relaxed) {
            // Staged now, it would be dropped by the next flush, which fails
            // at once: the caller must know it was not kept.
            return Err(error(io::ErrorKind::Other, "the log failed a write or sync"));
        }
        let payload_crc = record::payload_crc(rec.key, rec.value);
        let mut guard = self.staging.lock();
        let st = &mut *guard;
        let Some(h) = st.heads.get(head) else {
            return Err(error(io::ErrorKind::InvalidInput, "no such append head"));
        };
        let fits = h.active.is_some() && h.pos + len <= self.config.segment_size;
        if !fits {
            if reserve > 0 {
                let shared = self.shared.read();
                let uncreated = (self.config.max_segments as usize).saturating_sub(shared.segments.len());
                if shared.free.len() + uncreated < reserve as usize {
                    return Err(error(io::ErrorKind::StorageFull, "the rest is reserved"));
                }
            }
            self.roll(st, head)?;
        }
        let h = &mut st.heads[head];
        let (segment, nonce) = h.active.expect("rolled");
        let at = match st.chunks.iter().rposition(|c| c.segment == segment) {
            Some(at) => at,
            None => {
                let file = self.shared.read().segments[segment as usize].as_ref().expect("active").file.clone();
                let start = h.pos - h.pos % IO_ALIGN as u64;
                let bytes = std::mem::replace(&mut h.tail, Staged::new(&self.config.buffers));
                st.chunks.push(Chunk { segment, file, start, bytes });
                st.chunks.len() - 1
            }
        };
        let seq = st.next_seq;
        st.next_seq += 1;
        let offset = h.pos;
        st.chunks[at].bytes.append(|b| record::encode_with(&Record { seq, ..*rec }, nonce, payload_crc, b));
        h.pos += len;
        Ok((seq, RecordAddr { segment, offset: offset as u32, len: len as u32 }))
    }

    /// Switches `head`'s appends to the spare segment, whose header goes
    /// out with its first records.
    fn roll(&self, st: &mut Staging, head: usize) -> io::Result<()> {
        if self.shared.read().poisoned {
            return Err(error(io::ErrorKind::Other, "the log failed a write or sync"));
        }
        let Some(id) = st.spare.take() else {
            return Err(error(io::ErrorKind::StorageFull, "no spare segment ready: flush, or free segments"));
        };
        st.rng = splitmix64(st.rng);
        let nonce = st.rng;
        let order = st.next_order;
        st.next_order += 1;
        let file = {
            let mut shared = self.shared.write();
            let meta = shared.segments[id as usize].as_mut().expect("spare exists");
            meta.nonce = Some(nonce);
            meta.file.clone()
        };
        st.heads[head] =
            Head { active: Some((id, nonce)), pos: SEGMENT_HEADER, tail: Staged::new(&self.config.buffers) };
        st.chunks.push(Chunk {
            segment: id,
            file,
            start: 0,
            bytes: Staged::copy_of(&header_block(order, nonce, self.config.segment_size), &self.config.buffers),
        });
        Ok(())
    }

    /// [`Self::flush_staged`] then [`Self::ensure_spare`].
    pub fn flush(&self) -> io::Result<u64> {
        let durable = self.flush_staged()?;
        self.ensure_spare()?;
        Ok(durable)
    }

    /// Writes everything staged and fdatasyncs it; returns the sequence
    /// number durable now. Blocking: for the I/O thread of the durability
    /// layer, not workers.
    pub fn flush_staged(&self) -> io::Result<u64> {
        let _one_at_a_time = self.flushing.lock();
        if self.shared.read().poisoned {
            return Err(error(io::ErrorKind::Other, "the log failed a write or sync"));
        }
        let upto = {
            let mut st = self.staging.lock();
            let chunks = std::mem::take(&mut st.chunks);
            // Each head keeps its active segment's partial last block.
            for h in st.heads.iter_mut() {
                let Some((segment, _)) = h.active else { continue };
                if let Some(c) = chunks.iter().find(|c| c.segment == segment) {
                    let block = h.pos - h.pos % IO_ALIGN as u64;
                    h.tail = Staged::copy_of(&c.bytes[(block - c.start) as usize..], &self.config.buffers);
                }
            }
            // Visible to readers before the staging lock goes.
            *self.in_flight.lock() = chunks;
            st.next_seq - 1
        };
        let result = self.write_in_flight(upto);
        // Written (or failed: the log is poisoned either way).
        self.in_flight.lock().clear();
        result
    }

    fn write_in_flight(&self, upto: u64) -> io::Result<u64> {
        let ops = {
            let chunks = self.in_flight.lock();
            let mut ops = Vec::new();
            for c in chunks.iter() {
                let buf = AlignedBuf::padded_copy_in(&c.bytes, &self.config.buffers);
                ops.push((c.file.clone(), IoOp::Write { offset: c.start, buf }));
            }
            #[cfg(test)]
            let sync = self.config.sync && !self.config.ack_before_sync;
            #[cfg(not(test))]
            let sync = self.config.sync;
            let mut synced = Vec::new();
            for c in chunks.iter() {
                if sync && !synced.contains(&c.segment) {
                    synced.push(c.segment);
                    ops.push((c.file.clone(), IoOp::Sync));
                }
            }
            ops
        };
        if !ops.is_empty() {
            if let Err(e) = check(run_blocking(&*self.engine, ops)) {
                self.poison();
                return Err(e);
            }
            self.durable_seq.fetch_max(upto, Ordering::AcqRel);
        }
        Ok(self.durable_seq())
    }

    /// Readies the segment the next roll switches to: a free one, or a new
    /// zero-filled file while the budget allows (slow: call it after
    /// publishing a flush, not before). Without one, appends that need a
    /// new segment fail with StorageFull.
    ///
    /// A volume without room for the segment (ENOSPC, EDQUOT) fails it and
    /// marks the log [`Self::out_of_space`] until a later call succeeds; a
    /// file whose creation failed half-way is deleted, giving its blocks
    /// back.
    pub fn ensure_spare(&self) -> io::Result<()> {
        let _one_at_a_time = self.readying.lock();
        if self.staging.lock().spare.is_some() {
            return Ok(());
        }
        let result = self.ready_spare();
        match &result {
            Ok(true) => {
                if self.out_of_space.swap(false, Ordering::AcqRel) {
                    tracing::info!("the log's volume has room again: a new segment is ready");
                }
                *self.space_error.lock() = None;
            }
            Err(e) if file::is_out_of_space(e) => {
                // The error first: whoever sees the flag finds it.
                *self.space_error.lock() = Some(e.to_string());
                if !self.out_of_space.swap(true, Ordering::AcqRel) {
                    tracing::error!(
                        "the log's volume has no room for a new segment of {} bytes: {e}",
                        self.config.segment_size
                    );
                }
            }
            _ => {}
        }
        result.map(|_| ())
    }

    /// Whether the last attempt to ready a segment found the volume full
    /// (and none is ready since): the error, e.g. "No space left on device
    /// (os error 28)". Appends that need a new segment fail meanwhile.
    pub fn out_of_space(&self) -> Option<String> {
        if !self.out_of_space.load(Ordering::Acquire) {
            return None;
        }
        self.space_error.lock().clone()
    }

    /// Whether [`Self::out_of_space`] has an error (one atomic load).
    #[inline]
    pub fn is_out_of_space(&self) -> bool {
        self.out_of_space.load(Ordering::Relaxed)
    }

    /// [`Self::ensure_spare`]'s work: true when a spare is ready, false
    /// when the budget has none to give.
    fn ready_spare(&self) -> io::Result<bool> {
        let (recycled, missing, next) = {
            let shared = self.shared.read();
            let missing = shared.segments.iter().position(Option::is_none);
            (shared.free.last().copied(), missing, shared.segments.len())
        };
        let id = match (recycled, missing) {
            (Some(id), _) => {
                let file = {
                    let mut shared = self.shared.write();
                    shared.free.pop();
                    shared.segments[id as usize].as_ref().expect("free segments exist").file.clone()
                };
                // A file shorter than a segment (its creation was cut short
                // by a crash or a full volume) is completed first: appends
                // never grow a file.
                let len = self.volume.len(&file)?;
                if let Err(e) = self.prepare_segment(&file, len) {
                    self.shared.write().free.push(id);
                    return Err(e);
                }
                id
            }
            (None, Some(id)) => {
                let file = self.create_segment(id as u32)?;
                self.shared.write().segments[id] = Some(SegmentMeta { file, nonce: None });
                id as u32
            }
            (None, None) if next < self.config.max_segments as usize => {
                let file = self.create_segment(next as u32)?;
                self.shared.write().segments.push(Some(SegmentMeta { file, nonce: None }));
                next as u32
            }
            // Full: appends fail until the cleaner frees segments.
            (None, None) => return Ok(false),
        };
        self.staging.lock().spare = Some(id);
        Ok(true)
    }

    /// Creates segment file `id` and prepares all of it; a file whose
    /// preparation fails is deleted. A volume that says it has less room
    /// than a segment fails it at once (ENOSPC) rather than write zeros
    /// until it is full, at every retry.
    fn create_segment(&self, id: u32) -> io::Result<FileHandle> {
        if self.volume.available().is_some_and(|room| room < self.config.segment_size) {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        let name = segment_name(id);
        let file = match self.volume.create(&name) {
            Ok(f) => f,
            // Left over from a creation a crash interrupted: zero it again.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => self.volume.open(&name)?,
            Err(e) => return Err(e),
        };
        if let Err(e) = self.prepare_segment(&file, 0) {
            drop(file);
            if let Err(removing) = self.volume.remove(&name) {
                tracing::warn!("cannot delete {name}, whose creation failed ({e}): {removing}");
            }
            return Err(e);
        }
        Ok(file)
    }

    /// Makes a segment file whole from byte `from` on: with `sync`, writes
    /// zeros up to the segment size and syncs it and its directory entry;
    /// without, reserves its blocks (a full volume fails here, not at a
    /// flush).
    fn prepare_segment(&self, file: &FileHandle, from: u64) -> io::Result<()> {
        let size = self.config.segment_size;
        if from >= size {
            return Ok(());
        }
        if !self.config.sync {
            // Never fsynced: nothing to gain from written extents, and
            // writing zeros would hold up the flushes behind it.
            return self.volume.allocate(file, size);
        }
        // In waves of IO_WAVE writes of the same zeroed buffers (a write
        // leaves them zero): the RAM a new segment costs is bounded.
        let mut zeros: Vec<AlignedBuf> = Vec::new();
        let mut at = from - from % IO_ALIGN as u64;
        while at < size {
            let mut ops = Vec::with_capacity(IO_WAVE + 1);
            while ops.len() < IO_WAVE && at < size {
                let n = IO_CHUNK.min(size - at) as usize;
                let buf = match zeros.pop() {
                    Some(b) if b.len() == n => b,
                    _ => AlignedBuf::zeroed_in(n, &self.config.buffers),
                };
                ops.push((file.clone(), IoOp::Write { offset: at, buf }));
                at += n as u64;
            }
            if at >= size {
                ops.push((file.clone(), IoOp::Sync));
            }
            zeros.extend(check(run_blocking(&*self.engine, ops))?.into_iter().filter_map(|d| d.buf));
        }
        self.volume.sync_dir()
    }

    /// Makes a segment the cleaner has emptied reusable: its header is
    /// cleared and synced, so neither recovery nor reads see its records.
    pub fn free_segment(&self, id: u32) -> io::Result<()> {
        // Under the flush lock only while checking that no flush, staged or
        // in flight, targets the segment and retiring it: later flushes go
        // to the active or spare segment, never to a retired one (it is not
        // on the free list until its header is gone). The write and fsync
        // below run without it, so a periodic flush is never held up by
        // compaction freeing segments (that would stretch the window of
        // acknowledged but unsynced writes beyond one interval).
        let file = {
            let _no_flush_in_flight = self.flushing.lock();
            let st = self.staging.lock();
            let active = st.heads.iter().any(|h| h.active.is_some_and(|a| a.0 == id));
            if active || st.spare == Some(id) || st.chunks.iter().any(|c| c.segment == id) {
                return Err(error(io::ErrorKind::InvalidInput, "segment in use"));
            }
            drop(st);
            let mut shared = self.shared.write();
            let meta = shared
                .segments
                .get_mut(id as usize)
                .and_then(Option::as_mut)
                .ok_or_else(|| error(io::ErrorKind::NotFound, "no such segment"))?;
            if meta.nonce.take().is_none() {
                return Err(error(io::ErrorKind::InvalidInput, "segment already free"));
            }
            meta.file.clone()
        };
        let ops = vec![
            (file.clone(), IoOp::Write { offset: 0, buf: AlignedBuf::zeroed_in(IO_ALIGN, &self.config.buffers) }),
            (file, IoOp::Sync),
        ];
        if let Err(e) = check(run_blocking(&*self.engine, ops)) {
            self.poison();
            return Err(e);
        }
        self.shared.write().free.push(id);
        Ok(())
    }

    /// Reads one flushed record by its address; `on_done` runs on an
    /// engine thread. Fails with InvalidData if the bytes there are not
    /// that record any more (its segment was recycled) or never were.
    pub fn read_async(&self, addr: RecordAddr, on_done: OnRecord) {
        if let Some(req) = self.read_request(addr, on_done) {
            self.engine.submit(vec![req]);
        }
    }

    /// [`Self::read_async`], submitted with the other reads this thread
    /// starts in the same pass when it defers submissions
    /// (`io::defer_submissions`): never wait for it synchronously.
    pub fn read_soon(&self, addr: RecordAddr, on_done: OnRecord) {
        if let Some(req) = self.read_request(addr, on_done) {
            super::io::submit_soon(&self.engine, req);
        }
    }

    /// The device read of the record at `addr`; None when it was answered
    /// at once (an address no segment in use has).
    fn read_request(&self, addr: RecordAddr, on_done: OnRecord) -> Option<super::io::IoRequest> {
        if u64::from(addr.offset) + u64::from(addr.len) > self.config.segment_size {
            on_done(Err(error(io::ErrorKind::InvalidInput, "address beyond the segment")), 0);
            return None;
        }
        let meta = self.shared.read().segments.get(addr.segment as usize).cloned().flatten();
        let Some(SegmentMeta { file, nonce: Some(nonce) }) = meta else {
            on_done(Err(error(io::ErrorKind::NotFound, "segment not in use")), 0);
            return None;
        };
        let start = u64::from(addr.offset) - u64::from(addr.offset) % IO_ALIGN as u64;
        let end = (u64::from(addr.offset) + u64::from(addr.len)).next_multiple_of(IO_ALIGN as u64);
        let skip = (u64::from(addr.offset) - start) as usize;
        let want = addr.len as usize;
        Some(super::io::IoRequest {
            file,
            op: IoOp::Read { offset: start, buf: AlignedBuf::zeroed_in((end - start) as usize, &self.config.buffers) },
            on_done: Box::new(move |done| {
                let result = done.result.and_then(|n| {
                    let buf = done.buf.expect("read returns its buffer");
                    let bytes = &buf[skip.min(n)..(skip + want).min(n)];
                    match record::decode(bytes, nonce) {
                        Some((rec, len)) if len == want => Ok(rec.to_owned()),
                        _ => Err(error(io::ErrorKind::InvalidData, "no valid record at this address")),
                    }
                });
                on_done(result, done.started_ns);
            }),
        })
    }

    /// The record at `addr` if it is not on disk yet (staged, or being
    /// written by the flush in progress): reads of it are served from RAM.
    pub fn read_staged(&self, addr: RecordAddr) -> Option<OwnedRecord> {
        let find = |chunks: &[Chunk]| {
            let off = u64::from(addr.offset);
            chunks.iter().find_map(|c| {
                let end = c.start + c.bytes.len() as u64;
                (c.segment == addr.segment && off >= c.start && off + u64::from(addr.len) <= end)
                    .then(|| c.bytes[(off - c.start) as usize..(off - c.start) as usize + addr.len as usize].to_vec())
            })
        };
        let bytes = {
            let st = self.staging.lock();
            find(&st.chunks)
        }
        .or_else(|| find(&self.in_flight.lock()))?;
        let nonce = self.shared.read().segments.get(addr.segment as usize)?.as_ref()?.nonce?;
        match record::decode(&bytes, nonce) {
            Some((rec, len)) if len == addr.len as usize => Some(rec.to_owned()),
            _ => None,
        }
    }

    /// Every valid record of segment `id` (in use, flushed) with its
    /// address, read a window at a time: for the cleaner.
    pub fn scan_segment(&self, id: u32, mut visit: impl FnMut(Record<'_>, RecordAddr)) -> io::Result<()> {
        let meta = self.shared.read().segments.get(id as usize).cloned().flatten();
        let Some(SegmentMeta { file, nonce: Some(nonce) }) = meta else {
            return Err(error(io::ErrorKind::NotFound, "segment not in use"));
        };
        let mut windows =
            SegmentWindows::new(&*self.engine, &file, self.config.segment_size, &self.config.buffers, None);
        record::scan(&mut windows, SEGMENT_HEADER as usize, nonce, |rec, offset| {
            let len = record::encoded_len(rec.key.len(), rec.value.len()) as u32;
            visit(rec, RecordAddr { segment: id, offset: offset as u32, len });
        })?;
        Ok(())
    }

    /// Segments holding records (active included), and whether a spare is
    /// ready or more may still be created or recycled.
    pub fn segments_in_use(&self) -> u32 {
        let shared = self.shared.read();
        shared.segments.iter().flatten().filter(|m| m.nonce.is_some()).count() as u32
    }

    /// The segment appends go to now, if any.
    pub fn active_segment(&self) -> Option<u32> {
        self.staging.lock().heads[0].active.map(|a| a.0)
    }

    /// The segments some head appends to now.
    pub fn active_segments(&self) -> Vec<u32> {
        self.staging.lock().heads.iter().filter_map(|h| h.active.map(|a| a.0)).collect()
    }

    /// Bytes the log's buffers hold now (see [`LogConfig::buffers`]).
    pub fn buffer_bytes(&self) -> u64 {
        self.config.buffers.bytes()
    }

    /// Bytes per segment.
    pub fn segment_size(&self) -> u64 {
        self.config.segment_size
    }

    /// [`Self::read_async`], waiting: for recovery and tests.
    pub fn read(&self, addr: RecordAddr) -> io::Result<OwnedRecord> {
        let (tx, rx) = mpsc::channel();
        self.read_async(
            addr,
            Box::new(move |r, _| {
                let _ = tx.send(r);
            }),
        );
        super::io::recv_reaping(&rx).map_err(|_| error(io::ErrorKind::Other, "engine dropped a read"))?
    }
}

#[cfg(test)]
mod tests {
    use super::super::record::{RecordKind, ScanStats};
    use super::super::segment::{READ_WINDOW, WINDOW_CARRY};
    use super::super::sim::SimDisk;
    use super::*;
    use std::collections::{BTreeMap, HashMap};
    use std::time::{Duration, Instant};

    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 = splitmix64(self.0);
            self.0 % n.max(1)
        }
    }

    fn small_config(seed: u64) -> LogConfig {
        LogConfig { segment_size: 4 * IO_ALIGN as u64, max_segments: 256, seed: Some(seed), ..LogConfig::default() }
    }

    fn random_record(rng: &mut Rng) -> OwnedRecord {
        let kind = [RecordKind::Set, RecordKind::Set, RecordKind::Delete, RecordKind::Expire][rng.below(4) as usize];
        let key = format!("key:{}", rng.below(50)).into_bytes();
        let value_len = match rng.below(10) {
            0 => 5000, // spans blocks
            1..=3 => 0,
            _ => rng.below(300),
        } as usize;
        let fill = rng.below(256) as u8;
        OwnedRecord {
            kind,
            db: rng.below(16) as u32,
            key,
            value: vec![fill; if kind == RecordKind::Set { value_len } else { 0 }],
            expire_at_ms: rng.below(2) * 1_800_000_000_000,
            seq: 0,
        }
    }

    type Recovered = Vec<(OwnedRecord, RecordAddr)>;

    fn open(disk: &SimDisk, config: &LogConfig) -> io::Result<(SegmentLog, Recovered, RecoveryReport)> {
        open_salted(disk, config, 0)
    }

    /// Opens with nonces seeded by the config's seed and `salt`: each open
    /// of one disk needs its own, as the clock gives them outside tests.
    fn open_salted(
        disk: &SimDisk,
        config: &LogConfig,
        salt: u64,
    ) -> io::Result<(SegmentLog, Recovered, RecoveryReport)> {
        let mut seen = Vec::new();
        let config = LogConfig { seed: config.seed.map(|s| splitmix64(s ^ salt)), ..config.clone() };
        let (log, report) = SegmentLog::open(Arc::new(disk.volume()), Arc::new(disk.engine()), config, |r, a| {
            seen.push((r.to_owned(), a))
        })?;
        Ok((log, seen, report))
    }

    /// Several lives of one log on one simulated disk, each ending in a
    /// crash at a seeded point (sometimes during recovery itself). Checks:
    /// every record a flush reported durable is recovered exactly; every
    /// record recovered was appended (same seq, same bytes); recovery twice
    /// gives the same records; reads by address return the records.
    fn crash_cycles(seed: u64, config: &LogConfig) -> Result<(), String> {
        let mut rng = Rng(seed);
        let disk = SimDisk::new(seed);
        let mut acked: BTreeMap<u64, OwnedRecord> = BTreeMap::new();
        let mut appended: HashMap<u64, Vec<OwnedRecord>> = HashMap::new();
        for life in 0..4 {
            // Recovery must be repeatable, also after a crash part-way
            // through one (recovery itself only reads; opening may prepare
            // a spare segment).
            let before = match open_salted(&disk, config, rng.below(u64::MAX)) {
                Ok((_, recovered, _)) => recovered,
                Err(e) => return Err(format!("life {life}: recovery failed: {e}")),
            };
            if rng.below(2) == 0 {
                disk.crash_after(rng.below(6));
                let _ = open_salted(&disk, config, rng.below(u64::MAX));
                disk.reboot();
            }
            let (log, recovered, _) = match open_salted(&disk, config, rng.below(u64::MAX)) {
                Ok(opened) => opened,
                Err(e) => return Err(format!("life {life}: recovery failed: {e}")),
            };
            if recovered != before {
                return Err(format!("life {life}: recovery after a crashed recovery differs"));
            }
            let by_seq: BTreeMap<u64, &OwnedRecord> = recovered.iter().map(|(r, _)| (r.seq, r)).collect();
            if by_seq.len() != recovered.len() {
                return Err(format!("life {life}: a sequence number recovered twice"));
            }
            for (seq, rec) in &acked {
                match by_seq.get(seq) {
                    Some(r) if *r == rec => {}
                    other => return Err(format!("life {life}: acknowledged seq {seq} recovered as {other:?}")),
                }
            }
            for (rec, addr) in &recovered {
                if !appended.get(&rec.seq).is_some_and(|v| v.contains(rec)) {
                    return Err(format!("life {life}: recovered seq {} was never appended", rec.seq));
                }
                if rng.below(8) == 0 && log.read(*addr).ok().as_ref() != Some(rec) {
                    return Err(format!("life {life}: read by address of seq {} differs", rec.seq));
                }
            }
            // Unacknowledged records that did not survive are gone for good.
            // (their sequence numbers are reused by the next life).
            appended.clear();
            for (rec, _) in &recovered {
                acked.insert(rec.seq, rec.clone());
                appended.insert(rec.seq, vec![rec.clone()]);
            }
            // Work until the disk crashes.
            disk.crash_after(rng.below(40));
            'work: for _ in 0..200 {
                for _ in 0..1 + rng.below(6) {
                    let mut rec = random_record(&mut rng);
                    match log.append(&rec.as_record()) {
                        Ok((seq, _)) => {
                            rec.seq = seq;
                            appended.entry(seq).or_default().push(rec);
                        }
                        Err(_) => break 'work,
                    }
                }
                let result = log.flush();
                let durable = log.durable_seq();
                for (seq, recs) in appended.iter() {
                    if *seq <= durable && !acked.contains_key(seq) {
                        acked.insert(*seq, recs.last().expect("appended").clone());
                    }
                }
                if result.is_err() {
                    break;
                }
            }
            disk.crash();
            drop(log);
            disk.reboot();
        }
        Ok(())
    }

    /// Seeds from `first` until `budget` runs out or `max` seeds ran.
    fn run_seeds(first: u64, max: u64, budget: Duration, config: impl Fn(u64) -> LogConfig) -> (u64, Vec<String>) {
        let start = Instant::now();
        let mut failures = Vec::new();
        let mut ran = 0;
        for seed in first..first + max {
            if start.elapsed() > budget {
                break;
            }
            ran += 1;
            if let Err(e) = crash_cycles(seed, &config(seed)) {
                failures.push(format!("seed {seed}: {e}"));
            }
        }
        (ran, failures)
    }

    #[test]
    fn crashes_lose_nothing_acknowledged_and_invent_nothing() {
        let (ran, failures) = run_seeds(0, 5000, Duration::from_secs(4), small_config);
        eprintln!("{ran} seeds of 4 crashed lives each");
        // A floor low enough for a loaded CI machine; the time box rules.
        assert!(ran >= 50, "only {ran} seeds in the time box");
        assert!(failures.is_empty(), "{} of {ran} seeds failed, first: {}", failures.len(), failures[0]);
    }

    #[test]
    fn acknowledging_before_fsync_is_caught() {
        let (ran, failures) = run_seeds(10_000, 2000, Duration::from_secs(2), |seed| LogConfig {
            ack_before_sync: true,
            ..small_config(seed)
        });
        eprintln!("ack before fsync: {} of {ran} seeds failed, e.g. {:?}", failures.len(), failures.first());
        assert!(!failures.is_empty(), "{ran} seeds did not notice records acknowledged before fsync");
        assert!(failures.iter().any(|f| f.contains("acknowledged")), "{}", failures[0]);
    }

    /// The log's buffers are counted while they live and bounded: a new
    /// segment's zero-fill holds `IO_WAVE` chunks whatever the segment
    /// size, a flush gives its buffers back, and recovery holds two read
    /// windows (the one scanned and the one read ahead), not the segment.
    #[test]
    fn buffers_are_counted_bounded_and_given_back() {
        let disk = SimDisk::new(21);
        let segment = 32u64 << 20;
        let config = LogConfig { segment_size: segment, max_segments: 8, seed: Some(21), ..LogConfig::default() };
        let (log, _, _) = open(&disk, &config).unwrap();
        let gauge = config.buffers.clone();
        let waves = (IO_WAVE as u64) * IO_CHUNK;
        assert!(gauge.peak() >= IO_CHUNK, "the zero-fill's buffers are counted: {}", gauge.peak());
        assert!(gauge.peak() <= waves + (64 << 10), "creating a 32 MiB segment held {} bytes", gauge.peak());
        assert_eq!(gauge.bytes(), 0);
        let value = vec![7u8; 100_000];
        for i in 0..30u64 {
            let rec =
                Record { kind: RecordKind::Set, db: 0, key: &i.to_le_bytes(), value: &value, expire_at_ms: 0, seq: 0 };
            log.append(&rec).unwrap();
        }
        assert!(gauge.bytes() >= 3_000_000 && log.buffer_bytes() == gauge.bytes(), "staged: {}", gauge.bytes());
        log.flush().unwrap();
        assert!(gauge.bytes() <= IO_ALIGN as u64, "after the flush only the partial block is kept: {}", gauge.bytes());
        drop(log);
        let config = LogConfig { buffers: Arc::default(), ..config };
        let (log, recovered, _) = open(&disk, &config).unwrap();
        assert_eq!(recovered.len(), 30);
        let peak = config.buffers.peak();
        let windows = (2 * READ_WINDOW + WINDOW_CARRY) as u64;
        assert!(peak >= READ_WINDOW as u64 && peak <= windows + (64 << 10), "recovery held {peak} bytes");
        assert!(peak < segment / 3, "recovery of a {segment}-byte segment held {peak} bytes");
        assert!(log.buffer_bytes() <= IO_ALIGN as u64, "{}", log.buffer_bytes());
    }

    /// A segment image: records of many sizes from the header on (some
    /// straddling window boundaries, one larger than a window), then zeros.
    fn segment_image(size: usize, nonce: u64, big: bool, rng: &mut Rng) -> Vec<u8> {
        let mut data = vec![0u8; SEGMENT_HEADER as usize];
        let mut seq = 0;
        loop {
            seq += 1;
            let value_len = match rng.below(10) {
                _ if big && seq == 20 => READ_WINDOW + READ_WINDOW / 4,
                0 => 300_000 + rng.below(400_000) as usize,
                1..=4 => rng.below(5000) as usize,
                _ => rng.below(60) as usize,
            };
            let key = format!("key:{seq}");
            let value = vec![(seq % 251) as u8 + 1; value_len];
            if data.len() + record::encoded_len(key.len(), value.len()) > size * 3 / 4 {
                break;
            }
            let rec = Record { kind: RecordKind::Set, db: 0, key: key.as_bytes(), value: &value, expire_at_ms: 0, seq };
            record::encode(&rec, nonce, &mut data);
        }
        data.resize(size, 0);
        data
    }

    /// Scans `file_bytes` as segment "seg" of `size` bytes through the
    /// windowed reader: (records as (seq, offset), end, stats, buffer peak).
    fn windowed_scan(file_bytes: &[u8], size: u64, nonce: u64) -> (Vec<(u64, usize)>, usize, ScanStats, u64) {
        let disk = SimDisk::new(1);
        let file = disk.volume().create("seg").unwrap();
        disk.scribble("seg", 0, file_bytes);
        let engine = disk.engine();
        let gauge = Arc::new(BufferGauge::default());
        let progress = AtomicU64::new(0);
        let mut windows = SegmentWindows::new(&engine, &file, size, &gauge, Some(&progress));
        let mut seen = Vec::new();
        let (end, stats) = record::scan(&mut windows, SEGMENT_HEADER as usize, nonce, |r, at| seen.push((r.seq, at)))
            .expect("a simulated read does not fail");
        drop(windows);
        assert_eq!(progress.load(Ordering::Relaxed), size, "every byte of the segment is read once");
        assert_eq!(gauge.bytes(), 0, "the windows are given back");
        (seen, end, stats, gauge.peak())
    }

    /// The windowed reader finds exactly what a scan of the whole segment
    /// finds (records, skipped runs, torn tail, where appends resume), with
    /// records straddling windows, one larger than a window, damage in the
    /// middle of a window and a file shorter than the segment; and its RAM
    /// stays at two windows unless a record is larger than one.
    #[test]
    fn windowed_scans_find_what_whole_segment_scans_find() {
        let size = 6 * READ_WINDOW;
        let nonce = 77;
        let mut rng = Rng(77);
        for case in 0..8 {
            let big = case % 2 == 1;
            let mut data = segment_image(size, nonce, big, &mut rng);
            let mut file_len = size;
            match case / 2 {
                0 => {}
                // A damaged record inside the second window: skipped.
                1 => {
                    let mut starts = Vec::new();
                    record::scan(&mut &data[..], SEGMENT_HEADER as usize, nonce, |_, at| starts.push(at)).unwrap();
                    let victim = starts.into_iter().find(|&at| at > READ_WINDOW + 1000).expect("records there");
                    data[victim + 8] ^= 0x5A; // its db: covered by the checksum
                }
                // A torn tail in the middle of the third window.
                2 => {
                    let cut = 2 * READ_WINDOW + READ_WINDOW / 2 + 13;
                    data[cut..cut + 2000].fill(0);
                    data[cut + 2000..].fill(0);
                    data[cut + 2000..cut + 2100].fill(0xEE);
                }
                // The file ends early, mid-window: the rest reads as zeros.
                _ => file_len = 3 * READ_WINDOW + READ_WINDOW / 3 + 4096,
            }
            let expected_data = [&data[..file_len], &vec![0; size - file_len][..]].concat();
            let mut expected = Vec::new();
            let (end, stats) = record::scan(&mut &expected_data[..], SEGMENT_HEADER as usize, nonce, |r, at| {
                expected.push((r.seq, at))
            })
            .unwrap();
            let straddling = expected.windows(2).filter(|w| w[0].1 / READ_WINDOW != (w[1].1 - 1) / READ_WINDOW).count();
            assert!(
                expected.len() > 50 && straddling >= 2,
                "case {case}: {} records, {straddling} straddle",
                expected.len()
            );
            let (seen, w_end, w_stats, peak) = windowed_scan(&data[..file_len], size as u64, nonce);
            assert_eq!(seen, expected, "case {case}");
            assert_eq!((w_end, &w_stats), (end, &stats), "case {case}");
            match case / 2 {
                1 => assert_eq!(stats.bad_runs, 1, "case {case}"),
                2 => assert!(stats.torn_tail_bytes >= 100, "case {case}: {stats:?}"),
                _ => {}
            }
            let two_windows = (2 * READ_WINDOW + WINDOW_CARRY + (64 << 10)) as u64;
            if big {
                // The buffer grows to hold the record and a window (while
                // the old one is copied), once, then shrinks back.
                assert!(peak <= 5 * READ_WINDOW as u64, "case {case}: {peak} bytes for a large record");
            } else {
                assert!(peak <= two_windows, "case {case}: the windows held {peak} bytes");
            }
        }
    }

    #[test]
    fn records_round_trip_across_segments_and_reopen() {
        let disk = SimDisk::new(7);
        let config = small_config(7);
        let (log, recovered, report) = open(&disk, &config).unwrap();
        assert!(recovered.is_empty());
        assert_eq!(report.last_seq, 0);
        let mut written = Vec::new();
        for i in 0..100u64 {
            let value = vec![i as u8; (i as usize * 37) % 900];
            let key = format!("k{i}");
            let rec =
                Record { kind: RecordKind::Set, db: 0, key: key.as_bytes(), value: &value, expire_at_ms: i, seq: 0 };
            let (seq, addr) = log.append(&rec).unwrap();
            assert_eq!(seq, i + 1);
            written.push((OwnedRecord { seq, ..rec.to_owned() }, addr));
            if i % 7 == 0 {
                assert_eq!(log.flush().unwrap(), seq);
            }
        }
        assert_eq!(log.flush().unwrap(), 100);
        for (rec, addr) in &written {
            assert_eq!(&log.read(*addr).unwrap(), rec);
        }
        let segments = written.iter().map(|(_, a)| a.segment).collect::<std::collections::HashSet<_>>();
        assert!(segments.len() > 3, "records should span several segments");
        drop(log);
        let config = LogConfig { progress: Arc::default(), ..config };
        let (log, recovered, report) = open(&disk, &config).unwrap();
        assert_eq!(recovered, written);
        assert_eq!(report.scan.records, 100);
        // Progress: the segments in use, each read to its end (free ones are not counted).
        let total = u64::from(report.segments) * config.segment_size;
        assert_eq!(config.progress.total.load(Ordering::Relaxed), total);
        assert_eq!(config.progress.done.load(Ordering::Relaxed), total);
        assert_eq!(config.progress.loaded_percent(), 100);
        assert_eq!((report.scan.bad_runs, report.scan.torn_tail_bytes), (0, 0));
        let (seq, _) = log.append(&written[0].0.as_record()).unwrap();
        assert_eq!(seq, 101);
    }

    /// Appends interleaved over several heads land in one segment per head
    /// at a time, read back staged and flushed, survive a reopen, and a
    /// head's active segment cannot be freed.
    #[test]
    fn append_heads_keep_their_records_apart() {
        let disk = SimDisk::new(13);
        let config = small_config(13);
        let (log, _, _) = open(&disk, &config).unwrap();
        log.set_heads(3);
        assert_eq!(
            log.append_at(
                3,
                &Record { kind: RecordKind::Set, db: 0, key: b"k", value: b"", expire_at_ms: 0, seq: 0 },
                0
            )
            .unwrap_err()
            .kind(),
            io::ErrorKind::InvalidInput
        );
        let mut written = Vec::new();
        for i in 0..120u64 {
            let head = (i % 3) as usize;
            let value = vec![head as u8; 200 + (i as usize * 31) % 700];
            let key = format!("h{head}:{i}");
            let rec =
                Record { kind: RecordKind::Set, db: 0, key: key.as_bytes(), value: &value, expire_at_ms: 0, seq: 0 };
            // One spare segment is ready at a time (the user's maintenance
            // prepares the next).
            log.ensure_spare().unwrap();
            let (seq, addr) = log.append_at(head, &rec, 0).unwrap();
            let owned = OwnedRecord { seq, ..rec.to_owned() };
            assert_eq!(log.read_staged(addr).as_ref(), Some(&owned), "a staged record reads back");
            written.push((head, owned, addr));
            if i % 5 == 4 {
                log.flush().unwrap();
            }
        }
        log.flush().unwrap();
        let mut owner: HashMap<u32, usize> = HashMap::new();
        for (head, rec, addr) in &written {
            assert_eq!(
                *owner.entry(addr.segment).or_insert(*head),
                *head,
                "segment {} shared by two heads",
                addr.segment
            );
            assert_eq!(&log.read(*addr).unwrap(), rec);
        }
        assert!(owner.len() >= 6, "each head rolled over several segments: {owner:?}");
        let active = log.active_segments();
        assert_eq!(active.len(), 3);
        for s in active {
            assert!(log.free_segment(s).is_err(), "segment {s} is some head's active one");
        }
        drop(log);
        let (_, recovered, _) = open(&disk, &config).unwrap();
        let mut got: Vec<_> = recovered.into_iter().map(|(r, a)| (r.seq, r, a)).collect();
        got.sort_by_key(|g| g.0);
        let want: Vec<_> = written.into_iter().map(|(_, r, a)| (r.seq, r, a)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_freed_segment_is_recycled_and_its_old_records_never_return() {
        let disk = SimDisk::new(3);
        let config = small_config(3);
        let (log, _, _) = open(&disk, &config).unwrap();
        let mut addrs = Vec::new();
        for i in 0..40u64 {
            let value = vec![1u8; 500];
            let rec =
                Record { kind: RecordKind::Set, db: 0, key: &i.to_le_bytes(), value: &value, expire_at_ms: 0, seq: 0 };
            addrs.push(log.append(&rec).unwrap().1);
            log.flush().unwrap();
        }
        let first = addrs[0].segment;
        assert!(log.free_segment(addrs.last().unwrap().segment).is_err(), "the active segment cannot be freed");
        log.free_segment(first).unwrap();
        assert!(log.read(addrs[0]).is_err());
        let files_before = disk.files().len();
        // Fill until the freed segment is reused.
        let mut reused = false;
        for i in 0..40u64 {
            let key = [i as u8; 500];
            let rec = Record { kind: RecordKind::Delete, db: 0, key: &key, value: &[], expire_at_ms: 0, seq: 0 };
            let (_, addr) = log.append(&rec).unwrap();
            log.flush().unwrap();
            reused |= addr.segment == first;
        }
        assert!(reused);
        assert!(disk.files().len() <= files_before + 1);
        drop(log);
        let (_, recovered, _) = open(&disk, &config).unwrap();
        let old: Vec<_> = addrs.iter().filter(|a| a.segment == first).collect();
        assert!(!old.is_empty());
        let sets_recovered = recovered.iter().filter(|(r, _)| r.kind == RecordKind::Set).count();
        assert_eq!(sets_recovered, 40 - old.len());
    }

    #[test]
    fn the_log_stops_at_its_budget_and_after_a_failed_sync() {
        let disk = SimDisk::new(5);
        let config = LogConfig { max_segments: 2, ..small_config(5) };
        let (log, _, _) = open(&disk, &config).unwrap();
        let value = vec![0u8; 1000];
        let rec = Record { kind: RecordKind::Set, db: 0, key: b"k", value: &value, expire_at_ms: 0, seq: 0 };
        let mut full = None;
        for _ in 0..100 {
            if let Err(e) = log.append(&rec) {
                full = Some(e);
                break;
            }
            log.flush().unwrap();
        }
        assert_eq!(full.expect("two segments must fill up").kind(), io::ErrorKind::StorageFull);
        let disk = SimDisk::new(6);
        let (log, _, _) = open(&disk, &small_config(6)).unwrap();
        log.append(&rec).unwrap();
        disk.crash_after(0);
        assert!(log.flush().is_err());
        disk.reboot();
        assert!(log.flush().is_err(), "a log whose sync failed must stay failed");
        assert!(log.append(&Record { value: &[0; 4000], ..rec }).is_err() || log.flush().is_err());
    }

    /// A volume that fills up (ENOSPC from the disk, not the budget): the
    /// spare cannot be made, the half-made file is deleted, appends that
    /// need a new segment fail and the log says it is out of space, while
    /// what it holds stays readable; a log reopened on the full volume
    /// opens; once there is room, a spare is made and appends go on, and
    /// nothing written is lost. A short free segment (a creation cut short)
    /// is completed before it is used.
    #[test]
    fn a_full_volume_stops_new_segments_until_there_is_room() {
        let disk = SimDisk::new(21);
        let config = small_config(21);
        let size = config.segment_size;
        // Two segments and a half: the active one, the spare, not a third.
        disk.set_capacity(Some(2 * size + size / 2));
        let (log, _, _) = open(&disk, &config).unwrap();
        assert_eq!(log.out_of_space(), None);
        let value = vec![7u8; 1000];
        let mut written = Vec::new();
        let mut refused = None;
        for i in 0..100u64 {
            let key = i.to_be_bytes();
            let rec = Record { kind: RecordKind::Set, db: 0, key: &key, value: &value, expire_at_ms: 0, seq: 0 };
            match log.append(&rec) {
                Ok((seq, addr)) => written.push((OwnedRecord { seq, ..rec.to_owned() }, addr)),
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
            let _ = log.flush();
        }
        assert_eq!(refused.expect("the volume must fill").kind(), io::ErrorKind::StorageFull);
        let why = log.out_of_space().expect("out of space");
        assert!(why.contains("No space left on device"), "{why}");
        assert_eq!(disk.files().len(), 2, "the half-made segment was deleted: {:?}", disk.files());
        for (rec, addr) in &written {
            assert_eq!(&log.read(*addr).unwrap(), rec, "readable while full");
        }
        drop(log);
        let (log, recovered, _) = open_salted(&disk, &config, 1).expect("a full volume does not stop the log opening");
        assert_eq!(recovered, written);
        assert!(log.out_of_space().is_some());
        disk.set_capacity(None);
        log.ensure_spare().unwrap();
        assert_eq!(log.out_of_space(), None, "room again");
        for i in 100..120u64 {
            let key = i.to_be_bytes();
            let rec = Record { kind: RecordKind::Set, db: 0, key: &key, value: &value, expire_at_ms: 0, seq: 0 };
            let (seq, addr) = log.append(&rec).unwrap();
            written.push((OwnedRecord { seq, ..rec.to_owned() }, addr));
            log.flush().unwrap();
        }
        drop(log);
        let (_, recovered, _) = open_salted(&disk, &config, 2).unwrap();
        assert_eq!(recovered, written);

        // A free segment file shorter than a segment: made whole before use.
        let disk = SimDisk::new(22);
        disk.volume().create(&segment_name(0)).unwrap();
        disk.scribble(&segment_name(0), 0, &[0; IO_ALIGN]);
        let (log, _, _) = open(&disk, &config).unwrap();
        assert_eq!(disk.files(), vec![(segment_name(0), size as usize)], "the short segment was completed");
        let rec = Record { kind: RecordKind::Set, db: 0, key: b"k", value: &value, expire_at_ms: 0, seq: 0 };
        log.append(&rec).unwrap();
        log.flush().unwrap();
    }

    #[test]
    fn stray_files_are_ignored_or_refused_and_bogus_addresses_fail() {
        let disk = SimDisk::new(8);
        disk.volume().create("notes.txt").unwrap();
        disk.volume().create("seg-x.log").unwrap();
        let (log, recovered, _) = open(&disk, &small_config(8)).unwrap();
        assert!(recovered.is_empty());
        let bogus = RecordAddr { segment: 0, offset: 4096, len: u32::MAX };
        assert_eq!(log.read(bogus).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        let unused = RecordAddr { segment: 77, offset: 4096, len: 48 };
        assert_eq!(log.read(unused).unwrap_err().kind(), io::ErrorKind::NotFound);
        drop(log);
        disk.volume().create("seg-4000000000.log").unwrap();
        assert_eq!(open(&disk, &small_config(8)).err().map(|e| e.kind()), Some(io::ErrorKind::InvalidData));
    }

    /// Corrupts a flushed log at random (bytes, ranges, headers) and checks
    /// that recovery neither panics nor returns anything not written.
    #[test]
    fn recovery_survives_seeded_corruption() {
        let disk = SimDisk::new(11);
        let config = small_config(11);
        let (log, _, _) = open(&disk, &config).unwrap();
        let mut rng = Rng(11);
        let mut written = HashMap::new();
        for _ in 0..150 {
            let mut rec = random_record(&mut rng);
            rec.seq = log.append(&rec.as_record()).unwrap().0;
            written.insert(rec.seq, rec);
            if rng.below(3) == 0 {
                log.flush().unwrap();
            }
        }
        log.flush().unwrap();
        drop(log);
        let files = disk.files();
        let start = Instant::now();
        let mut runs = 0;
        while start.elapsed() < Duration::from_secs(3) && runs < 3000 {
            runs += 1;
            let copy = disk.fork(runs);
            for _ in 0..1 + rng.below(6) {
                let (name, len) = &files[rng.below(files.len() as u64) as usize];
                let at = rng.below(*len as u64 + 64) as usize;
                let bytes: Vec<u8> = match rng.below(4) {
                    0 => vec![rng.below(256) as u8],
                    1 => vec![0; 1 + rng.below(3000) as usize],
                    2 => (0..1 + rng.below(64)).map(|_| rng.below(256) as u8).collect(),
                    // A header block's first bytes: magic kept, the rest random.
                    _ => {
                        let mut h = b"STRATSEG".to_vec();
                        h.extend((0..40).map(|_| rng.below(256) as u8));
                        h
                    }
                };
                copy.scribble(name, if rng.below(4) == 0 { 0 } else { at }, &bytes);
            }
            let (_, recovered, report) = open(&copy, &config).expect("corruption is not an I/O error");
            for (rec, _) in &recovered {
                assert_eq!(written.get(&rec.seq), Some(rec), "run {runs}: recovered a record never written");
            }
            assert_eq!(report.scan.records as usize, recovered.len());
        }
        eprintln!("{runs} corrupted logs recovered");
        assert!(runs >= 100, "only {runs} corrupted recoveries in the time box");
    }
}
