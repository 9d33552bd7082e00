//! The disk tier as the keyspace sees it: the [`ColdTier`] trait the tier
//! layer implements (`tier::cold_log`), a record read back, the counters
//! the keyspace keeps of it, and one read of a cold value shared by every
//! command waiting for it (what the pending path awaits).

use crate::store::entry::ColdLoc;
use parking_lot::Mutex;
use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

/// The disk tier, as the keyspace uses it.
pub trait ColdTier: Send + Sync {
    /// Writes a value about to leave RAM (`encoded`: `values::encode`, flags
    /// then the DUMP encoding);
    /// None when the tier cannot take it now: full or failing (the key
    /// is then evicted instead), or [`Self::busy`]. Never waits: it runs
    /// under the key's partition lock.
    fn demote(&self, db: usize, key: &[u8], expire_at: u64, encoded: &[u8]) -> Option<(u32, u32, u32)>;
    /// Whether the tier declines demotions only for a moment (its cleaner
    /// is freeing a segment): a victim then stays where it is rather than
    /// be evicted, and writes wait in [`Self::backlog`].
    fn busy(&self) -> bool {
        false
    }
    /// Reads a record back; `done` runs on an I/O thread with its key and
    /// encoded value.
    fn read(&self, loc: ColdLoc, done: Box<dyn FnOnce(io::Result<ColdRecord>) + Send>);
    /// [`Self::read`] for a command that waits on the pending path: on a
    /// worker thread, submitted with the other reads of the worker's pass.
    /// Nothing may wait for it synchronously on the calling thread.
    fn read_soon(&self, loc: ColdLoc, done: Box<dyn FnOnce(io::Result<ColdRecord>) + Send>) {
        self.read(loc, done)
    }
    /// [`Self::read`], waiting (the synchronous fallback).
    fn read_blocking(&self, loc: ColdLoc) -> io::Result<ColdRecord>;
    /// The records at `locs`, waiting, in the order of `locs`: many keys
    /// at once (a SCAN brings a partition's keys back). A tier on a device
    /// that serves many reads at once overrides this one-by-one default.
    fn read_all(&self, locs: &[ColdLoc]) -> Vec<io::Result<ColdRecord>> {
        locs.iter().map(|&loc| self.read_blocking(loc)).collect()
    }
    /// Every record on disk now, oldest segment first, with its address,
    /// key and deadline (KEYS lists keys on disk only this way: sequential
    /// reads).
    fn scan_records(&self, visit: &mut dyn FnMut(ColdLoc, &[u8], u64));
    /// The record at `loc` is no longer any key's value (promoted,
    /// overwritten, deleted): its bytes are dead for the cleaner.
    fn forget(&self, loc: ColdLoc);
    /// A wait for a writer or cleaner that is behind (too much waiting to
    /// be written, or no free segment), for a write to await before it
    /// takes any lock; None when the tier keeps up. Demotions themselves
    /// never wait: they run under a partition lock.
    fn backlog(&self) -> Option<super::PendingRead> {
        None
    }
    /// Whether a value used once or never since it was written
    /// ([`crate::policy::Hits`]) is worth a disk write now; false while the
    /// tier is full of live data and its admission setting says so: such a
    /// value is evicted instead of demoted.
    fn admits_rarely_used(&self) -> bool {
        true
    }
    /// A value was evicted instead of demoted by that rule (counted).
    fn not_admitted(&self) {}
}

/// What became of a key whose record the cleaner moves (`relocate_cold`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relocated {
    /// Its record was copied forward.
    Moved,
    /// No room for the copy: the key was evicted.
    Evicted,
    /// No room, and the policy may not discard the key (noeviction, or a
    /// volatile-* policy and no TTL): it keeps its record where it is.
    Kept,
}

/// A record read back: the key it was written for (checked against the
/// key a command looks for) and the value in `store::dump`'s encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColdRecord {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    /// The key's deadline when the record was written (unix ms, 0: none).
    pub expire_at: u64,
}

/// Counters of the tier as the keyspace sees it (INFO, metrics).
#[derive(Default)]
pub struct ColdStats {
    /// Keys whose value is on disk only, now (forgotten ones included).
    pub keys: AtomicU64,
    /// Of those, keys whose key is on disk only too (`forget.rs`), and the
    /// bytes of the tables that index them.
    pub forgotten: AtomicU64,
    pub forgotten_bytes: AtomicU64,
    /// Keys forgotten, and forgotten keys brought back to the index by a
    /// read of their record (a lookup, SCAN/KEYS, a hash-bits match that
    /// was another key).
    pub forgets: AtomicU64,
    pub recalls: AtomicU64,
    /// Values demoted, and the RAM bytes that freed.
    pub demoted: AtomicU64,
    pub demoted_bytes: AtomicU64,
    /// Values read back into RAM.
    pub promoted: AtomicU64,
    /// Values read back for one read-only command and left on disk
    /// (`cold/served.rs`).
    pub served_once: AtomicU64,
    /// Disk reads started for waiting commands, and reads a later waiter
    /// joined instead of starting its own.
    pub reads: AtomicU64,
    pub shared_reads: AtomicU64,
    /// Reads started ahead of their commands, for requests further along a
    /// pipeline (`Keyspace::read_ahead`), and the record bytes such reads
    /// hold now.
    pub ahead_reads: AtomicU64,
    pub ahead_held: Arc<AtomicU64>,
    /// A disk read's last stage: from its completion until the command
    /// that waited for it runs again and takes its value (the wake-up of
    /// the waiting connection's worker).
    pub read_wake_latency: crate::metrics::IoHistogram,
    /// Synchronous reads (keys a command did not declare).
    pub sync_reads: AtomicU64,
    /// Records of forgotten keys read in batches for SCAN (`recall.rs`).
    pub batch_reads: AtomicU64,
    /// Reads that failed or returned an undecodable value: the key is lost
    /// (deleted), as if evicted, and logged.
    pub read_errors: AtomicU64,
    /// Cold entries evicted (index and all) because RAM held little else.
    pub evicted_cold: AtomicU64,
}

/// One read of a cold value, shared by every command waiting for it.
pub struct ColdRead {
    pub(super) loc: ColdLoc,
    /// The bytes read, until the first command to run again promotes them.
    pub(super) result: Mutex<Option<io::Result<ColdRecord>>>,
    /// Set once the read is over (the result may be taken since).
    pub(super) over: std::sync::atomic::AtomicBool,
    /// When it was over (`mono_ns`).
    pub(super) completed_ns: AtomicU64,
    /// Commands waiting for it.
    pub(super) waiters: Mutex<super::wake::Waiters>,
}

impl ColdRead {
    pub(super) fn finished(&self) -> bool {
        self.over.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Waits until the read is over.
    pub async fn wait(self: Arc<Self>) {
        std::future::poll_fn(|cx| {
            if self.finished() {
                return std::task::Poll::Ready(());
            }
            let mut waiters = self.waiters.lock();
            // Checked again under the lock `complete` takes after setting it.
            if self.finished() {
                return std::task::Poll::Ready(());
            }
            waiters.register(cx.waker());
            std::task::Poll::Pending
        })
        .await
    }

    /// The read is over: its result is kept and its waiters woken.
    pub(super) fn complete(&self, result: io::Result<ColdRecord>, now_ns: u64) {
        *self.result.lock() = Some(result);
        self.completed_ns.store(now_ns, std::sync::atomic::Ordering::Relaxed);
        self.over.store(true, std::sync::atomic::Ordering::Release);
        std::mem::take(&mut *self.waiters.lock()).wake_all();
    }
}

/// What a cold key's check found.
pub(in crate::store) enum ColdState {
    /// Promoted (or not cold any more): the command may run.
    Ready,
    /// Being read: wait for this.
    Wait(Arc<ColdRead>),
}
