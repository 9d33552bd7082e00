//! Recovery: at start-up, the segment log is read back. Every segment file
//! is listed and its header read (in one batch); those in use are scanned
//! in order, a window at a time, and every valid record is handed on with
//! its address. A bad record followed by good ones is skipped and counted;
//! a torn tail ends the scan of its segment, and the log's appends resume
//! there. Reads only: a crash during recovery changes nothing on disk.

use super::io::{IoEngine, IoOp, Volume, check, error, run_blocking};
use super::record::{self, Record, ScanStats};
use super::segment::{
    MAX_SEGMENT_ID, RecordAddr, SEGMENT_HEADER, SegmentMeta, SegmentWindows, parse_header, parse_segment_name,
    segment_name,
};
use crate::sys::file::{AlignedBuf, BufferGauge, IO_ALIGN};
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// What recovery found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Segments holding a valid header, and free ones.
    pub segments: u32,
    pub free_segments: u32,
    /// Record counts, skipped runs and torn tails over every segment.
    pub scan: ScanStats,
    /// The last sequence number recovered (0: none).
    pub last_seq: u64,
}

/// Progress of a recovery's scan, readable while it runs: bytes of the
/// segments to scan (those in use, each read to its end) and bytes read.
#[derive(Debug, Default)]
pub struct ReadProgress {
    pub total: AtomicU64,
    pub done: AtomicU64,
}

impl ReadProgress {
    /// Whole percent read (0 until the total is known).
    pub fn loaded_percent(&self) -> u64 {
        let total = self.total.load(Ordering::Relaxed);
        (self.done.load(Ordering::Relaxed).saturating_mul(100) / total.max(1)).min(100)
    }
}

/// What recovery found on disk, for the log to resume from.
pub(super) struct Found {
    /// Segment files by id (None: no file of that id), with the nonce of
    /// each one in use.
    pub segments: Vec<Option<SegmentMeta>>,
    /// Segments without a valid header: reusable.
    pub free: Vec<u32>,
    /// The last segment in use, where appends resume: id, nonce, the end
    /// of its last valid record, and its file.
    pub resume: Option<(u32, u64, u64, super::io::FileHandle)>,
    /// The order of the next segment to start.
    pub next_order: u64,
}

/// Reads the log in `volume` (segments of `size` bytes): every valid
/// record goes to `visit` in log order with its address. The windows'
/// buffers are counted in `buffers`, the bytes read in `progress`.
pub(super) fn recover(
    volume: &dyn Volume,
    engine: &dyn IoEngine,
    size: u64,
    buffers: &Arc<BufferGauge>,
    progress: &ReadProgress,
    mut visit: impl FnMut(Record<'_>, RecordAddr),
) -> io::Result<(Found, RecoveryReport)> {
    let mut ids: Vec<u32> = volume.list()?.iter().filter_map(|n| parse_segment_name(n)).collect();
    ids.sort_unstable();
    if ids.last().is_some_and(|&m| m > MAX_SEGMENT_ID) {
        return Err(error(io::ErrorKind::InvalidData, "a segment file name with an id out of range"));
    }
    let next_id = ids.last().map_or(0, |&m| m + 1);
    let mut segments: Vec<Option<SegmentMeta>> = vec![None; next_id as usize];
    let mut free = Vec::new();
    let mut used = Vec::new(); // (order, id, nonce)
    let mut reads = Vec::with_capacity(ids.len());
    for &id in &ids {
        let file = volume.open(&segment_name(id))?;
        reads.push((file.clone(), IoOp::Read { offset: 0, buf: AlignedBuf::zeroed_in(IO_ALIGN, buffers) }));
        segments[id as usize] = Some(SegmentMeta { file, nonce: None });
    }
    // Every header in one batch.
    for (&id, done) in ids.iter().zip(check(run_blocking(engine, reads))?) {
        let n = done.result.expect("checked");
        let header = done.buf.expect("read returns its buffer");
        match parse_header(&header[..n], size) {
            Some((order, nonce)) => used.push((order, id, nonce)),
            // Never used, freed, or its first flush was lost: reusable.
            None => free.push(id),
        }
    }
    used.sort_unstable();
    progress.total.store(used.len() as u64 * size, Ordering::Relaxed);
    let mut report = RecoveryReport { segments: used.len() as u32, free_segments: 0, ..RecoveryReport::default() };
    let mut last_seq = 0;
    let mut resume = None;
    for &(_, id, nonce) in &used {
        let meta = segments[id as usize].as_mut().expect("listed");
        meta.nonce = Some(nonce);
        let mut windows = SegmentWindows::new(engine, &meta.file, size, buffers, Some(&progress.done));
        let (end, stats) = record::scan(&mut windows, SEGMENT_HEADER as usize, nonce, |rec, offset| {
            last_seq = last_seq.max(rec.seq);
            let len = record::encoded_len(rec.key.len(), rec.value.len()) as u32;
            visit(rec, RecordAddr { segment: id, offset: offset as u32, len });
        })?;
        report.scan.records += stats.records;
        report.scan.bad_runs += stats.bad_runs;
        report.scan.skipped_bytes += stats.skipped_bytes;
        report.scan.torn_tail_bytes += stats.torn_tail_bytes;
        resume = Some((id, nonce, end as u64, meta.file.clone()));
    }
    report.free_segments = free.len() as u32;
    report.last_seq = last_seq;
    let next_order = used.last().map_or(1, |u| u.0 + 1);
    Ok((Found { segments, free, resume, next_order }, report))
}
