//! A segment file of the log: its name, its header block, the address of
//! a record in it, and reading it front to back a window at a time (for
//! recovery and the cleaner).
//!
//! A segment starts with a header block (magic, order, nonce, size, crc32c)
//! followed by records (see [`super::record`]). Order sorts segments; the
//! nonce seeds every record checksum of this use of the file, so a recycled
//! segment's old records never validate.

use super::io::{FileHandle, IoDone, IoEngine, IoOp, IoRequest, error};
use super::record;
use crate::sys::file::{AlignedBuf, BufferGauge, IO_ALIGN};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};

const SEGMENT_MAGIC: &[u8; 8] = b"STRATSEG";
const SEGMENT_VERSION: u32 = 1;
/// The header block; records start after it.
pub const SEGMENT_HEADER: u64 = IO_ALIGN as u64;
/// Segment ids beyond this are not ours (the table is indexed by id).
pub(super) const MAX_SEGMENT_ID: u32 = 1 << 20;
/// Recovery and the cleaner read a segment in windows this large, the next
/// one read ahead while this one is scanned: RAM is about two windows
/// whatever the segment size (a record larger than a window grows the
/// buffer for that record only).
pub const READ_WINDOW: usize = 4 << 20;
/// Room kept in the window's buffer for the part of a record straddling
/// into the next window, beyond which the buffer grows (window and carry
/// make 5 MiB, one of the allocator's size classes).
pub(super) const WINDOW_CARRY: usize = 1 << 20;

/// Where a record lives: enough to read it back alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecordAddr {
    pub segment: u32,
    pub offset: u32,
    pub len: u32,
}

#[derive(Clone)]
pub(super) struct SegmentMeta {
    pub(super) file: FileHandle,
    /// Nonce of the current use of the file; None while free.
    pub(super) nonce: Option<u64>,
}

pub(super) fn segment_name(id: u32) -> String {
    format!("seg-{id:06}.log")
}

pub(super) fn parse_segment_name(name: &str) -> Option<u32> {
    name.strip_prefix("seg-")?.strip_suffix(".log")?.parse().ok()
}

pub(super) fn header_block(order: u64, nonce: u64, size: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(IO_ALIGN);
    h.extend_from_slice(SEGMENT_MAGIC);
    h.extend_from_slice(&SEGMENT_VERSION.to_le_bytes());
    h.extend_from_slice(&[0; 4]);
    h.extend_from_slice(&order.to_le_bytes());
    h.extend_from_slice(&nonce.to_le_bytes());
    h.extend_from_slice(&size.to_le_bytes());
    let crc = crc32c::crc32c(&h);
    h.extend_from_slice(&crc.to_le_bytes());
    h.resize(IO_ALIGN, 0);
    h
}

/// (order, nonce) of a valid header block of a segment of `size` bytes.
pub(super) fn parse_header(b: &[u8], size: u64) -> Option<(u64, u64)> {
    if b.len() < 44 || &b[..8] != SEGMENT_MAGIC {
        return None;
    }
    let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    let version = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes"));
    let crc = u32::from_le_bytes(b[40..44].try_into().expect("4 bytes"));
    (version == SEGMENT_VERSION && crc == crc32c::crc32c(&b[..40]) && u64_at(32) == size)
        .then(|| (u64_at(16), u64_at(24)))
}

/// One segment read front to back a window at a time (see [`READ_WINDOW`]),
/// the next window's read in flight while the scan works on this one.
pub(super) struct SegmentWindows<'a> {
    engine: &'a dyn IoEngine,
    file: FileHandle,
    size: u64,
    gauge: &'a Arc<BufferGauge>,
    /// `buf[..filled]` holds the segment's bytes from offset `base`.
    buf: AlignedBuf,
    base: u64,
    filled: usize,
    /// Where the next window starts, and its read once started.
    next_at: u64,
    ahead: Option<mpsc::Receiver<IoDone>>,
    /// The file ended early (a short read): the rest reads as zeros.
    short: bool,
    /// Counts the bytes taken into the window.
    progress: Option<&'a AtomicU64>,
}

impl<'a> SegmentWindows<'a> {
    pub(super) fn new(
        engine: &'a dyn IoEngine,
        file: &FileHandle,
        size: u64,
        gauge: &'a Arc<BufferGauge>,
        progress: Option<&'a AtomicU64>,
    ) -> SegmentWindows<'a> {
        let mut w = SegmentWindows {
            engine,
            file: file.clone(),
            size,
            gauge,
            buf: AlignedBuf::zeroed_in(0, gauge),
            base: 0,
            filled: 0,
            next_at: 0,
            ahead: None,
            short: false,
            progress,
        };
        w.read_ahead(None);
        w
    }

    fn window_len(&self) -> usize {
        READ_WINDOW.min((self.size - self.next_at) as usize)
    }

    /// Starts the read of the window at `next_at` (into `reuse` if it fits).
    fn read_ahead(&mut self, reuse: Option<AlignedBuf>) {
        if self.next_at >= self.size || self.short {
            return;
        }
        let n = self.window_len();
        let buf = match reuse {
            Some(b) if b.len() == n => b,
            _ => AlignedBuf::zeroed_in(n, self.gauge),
        };
        let (tx, rx) = mpsc::channel();
        self.engine.submit(vec![IoRequest {
            file: self.file.clone(),
            op: IoOp::Read { offset: self.next_at, buf },
            on_done: Box::new(move |done| {
                let _ = tx.send(done);
            }),
        }]);
        self.ahead = Some(rx);
    }

    /// Appends the next window to the buffer, first dropping the bytes
    /// before the block holding `keep_from` (the scan never goes back).
    /// `want_end`: the end of the bytes asked for, to grow the buffer once
    /// for a record larger than a window.
    fn take_window(&mut self, keep_from: u64, want_end: u64) -> io::Result<()> {
        let n = self.window_len();
        let filled_end = self.base + self.filled as u64;
        let keep_from = (keep_from - keep_from % IO_ALIGN as u64).clamp(self.base, filled_end);
        let keep = (filled_end - keep_from) as usize;
        let need = keep + n;
        let default_len = READ_WINDOW + WINDOW_CARRY;
        let src = (keep_from - self.base) as usize;
        if need > self.buf.len() || (self.buf.len() > default_len && need <= default_len) {
            // Grown for one large record (to hold it whole at once), or
            // back to the usual size after one.
            let len = if need > default_len {
                need.max((want_end - keep_from) as usize + READ_WINDOW).next_multiple_of(IO_ALIGN)
            } else {
                default_len
            };
            let mut grown = AlignedBuf::zeroed_in(len, self.gauge);
            grown[..keep].copy_from_slice(&self.buf[src..src + keep]);
            self.buf = grown;
        } else {
            self.buf.copy_within(src..src + keep, 0);
        }
        self.base = keep_from;
        self.filled = keep;
        let dst = &mut self.buf[keep..keep + n];
        let mut reuse = None;
        match self.ahead.take() {
            Some(rx) => {
                let done = rx.recv().map_err(|_| error(io::ErrorKind::Other, "engine dropped a read"))?;
                let got = done.result?;
                let read = done.buf.expect("read returns its buffer");
                let got = got.min(n);
                dst[..got].copy_from_slice(&read[..got]);
                // A short file: the rest reads as zeros.
                dst[got..].fill(0);
                self.short |= got < n;
                reuse = Some(read);
            }
            None => dst.fill(0),
        }
        self.filled += n;
        self.next_at += n as u64;
        if let Some(p) = self.progress {
            p.fetch_add(n as u64, Ordering::Relaxed);
        }
        self.read_ahead(reuse);
        Ok(())
    }
}

impl record::ScanSource for SegmentWindows<'_> {
    fn total(&self) -> usize {
        self.size as usize
    }

    fn bytes(&mut self, at: usize, len: usize) -> io::Result<&[u8]> {
        let (at, end) = (at as u64, (at as u64).saturating_add(len as u64).min(self.size));
        if at < self.base {
            return Err(error(io::ErrorKind::InvalidInput, "a segment window cannot move back"));
        }
        while self.base + (self.filled as u64) < end {
            self.take_window(at, end)?;
        }
        let from = (at.min(end) - self.base) as usize;
        Ok(&self.buf[from..(end - self.base) as usize])
    }
}
