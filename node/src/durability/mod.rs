//! Durability: the promise each `--durability` mode makes, kept by a group
//! commit over the tier's segment log.
//!
//! Producers (workers) append records at once, under the log's short
//! staging lock, and get the record's sequence number; in `sync` they park
//! the reply and ask to be woken when that number is durable. One I/O
//! thread flushes: it takes everything staged, issues one aligned write
//! linked to an fdatasync, publishes the durable sequence number and wakes
//! the waiters it covers. One flush is in flight at a time, so everything
//! appended meanwhile rides the next one (the batch grows with the load; no
//! timer in `sync`). A failed write or fsync stops the group commit for
//! good: every waiter gets the error, nothing is retried.
//!
//! write-back and periodic flush on a timer (and write-back also at half
//! its byte bound). Their promise is kept against a slow disk by
//! back-pressure ([`GroupCommit::backpressure_target`]): once the log lags
//! past the policy's bound — the oldest write not yet durable is too old,
//! or too many bytes are not yet durable — replies wait for the flush as
//! in `sync`, so the writes a crash can lose stay within the bound instead
//! of growing with the stall. The lag is tracked with atomics only (no
//! lock on the append path) and errs on the side of more lag.
//!
//! [`persist`] is the keyspace's journal on top of it: records from
//! changes, the replay at start-up (warm restart, `-LOADING` meanwhile),
//! `sync`'s reply wait and compaction.

use crate::config;
use crate::tier::log::{RecordAddr, SegmentLog};
use crate::tier::record::Record;
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What an acknowledged write is promised: a `--durability` mode with its
/// parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// A cache: nothing is journaled (the log only holds demoted values).
    None,
    /// Writes reach the log in the background: flushed at half the bounds;
    /// past either bound (the oldest write not yet durable is `max_lag`
    /// old, or `max_bytes` are not yet durable), replies wait for the flush.
    WriteBack { max_lag: Duration, max_bytes: u64 },
    /// Every write is appended when made; fsync every `interval`. A flush
    /// slower than the interval holds replies back once the oldest write
    /// not yet durable is two intervals old: the acknowledged writes a
    /// crash can lose were all made after the last completed flush began,
    /// and at most two intervals before the last reply that left — however
    /// long a flush the machine starves of CPU or disk takes.
    Periodic { interval: Duration },
    /// A write is acknowledged only once an fsync covers it.
    Sync,
}

impl Policy {
    /// The policy of the configured mode and its parameters.
    pub fn from_config(sc: &config::StartupConfig) -> Policy {
        match sc.durability {
            config::Durability::None => Policy::None,
            config::Durability::WriteBack => Policy::WriteBack {
                max_lag: Duration::from_micros(sc.write_back_max_lag_us),
                max_bytes: sc.write_back_max_bytes,
            },
            config::Durability::Periodic => Policy::Periodic { interval: Duration::from_micros(sc.fsync_interval_us) },
            config::Durability::Sync => Policy::Sync,
        }
    }

    /// Whether mutations are appended to the log.
    pub fn journals(self) -> bool {
        self != Policy::None
    }

    /// Whether a reply must wait for the fsync covering its write.
    pub fn ack_waits_for_fsync(self) -> bool {
        self == Policy::Sync
    }

    /// The longest a staged record may wait for a flush; None: flush as
    /// soon as anything is staged (sync).
    fn flush_every(self) -> Option<Duration> {
        match self {
            Policy::WriteBack { max_lag, .. } => Some(max_lag / 2),
            Policy::Periodic { interval } => Some(interval),
            Policy::None | Policy::Sync => None,
        }
    }

    /// Bytes not yet durable that call for a flush before its time.
    fn flush_at_bytes(self) -> u64 {
        match self {
            Policy::WriteBack { max_bytes, .. } => max_bytes / 2,
            Policy::Periodic { .. } => PERIODIC_FLUSH_AT_BYTES,
            _ => u64::MAX,
        }
    }

    /// The lag (age of the oldest write not yet durable, bytes not yet
    /// durable) past which replies wait for the flush; None: never
    /// (none), or always (sync).
    pub fn hold_beyond(self) -> Option<(Duration, u64)> {
        match self {
            Policy::WriteBack { max_lag, max_bytes } => Some((max_lag, max_bytes)),
            Policy::Periodic { interval } => Some((interval * 2, PERIODIC_MAX_PENDING_BYTES)),
            Policy::None | Policy::Sync => None,
        }
    }
}

/// periodic flushes before its timer once this much is staged: under heavy
/// writes the staging buffer (RAM the memory budget reports but leaves out
/// of eviction, as Redis its AOF buffer) stays a few MiB.
const PERIODIC_FLUSH_AT_BYTES: u64 = 2 << 20;
/// ...and holds replies once this much is not yet durable (a disk slower
/// than the writes): the journal's buffers stay within about three times
/// this (what is staged, in growable buffers, and the copy a flush
/// writes), whatever the load.
pub const PERIODIC_MAX_PENDING_BYTES: u64 = 8 << 20;

/// Called once with the durable sequence number (or the error that
/// stopped the group commit), on the I/O thread — or at once, on the
/// caller's thread, if already decided. Keep it short: wake a worker.
pub type OnDurable = Box<dyn FnOnce(io::Result<u64>) + Send>;

/// Figures for metrics (fsync latency, group-commit size, lag).
#[derive(Default)]
pub struct CommitStats {
    /// Flushes that wrote something.
    pub flushes: AtomicU64,
    /// Records they made durable.
    pub records: AtomicU64,
    /// The most records one flush made durable.
    pub max_batch: AtomicU64,
    /// Records per flush (the histogram's sum is `records`).
    pub batch_sizes: crate::metrics::BatchHistogram,
    /// Total and worst time of a flush (write + fdatasync), in µs.
    pub flush_us_total: AtomicU64,
    pub flush_us_max: AtomicU64,
    /// Flush times.
    pub flush_latency: crate::metrics::IoHistogram,
    /// Reply batches held back because the log lagged past its bound
    /// (write-back, periodic).
    pub held_replies: AtomicU64,
}

/// How far the log lags behind RAM, tracked without a lock for
/// write-back's and periodic's back-pressure. Both figures err on the side
/// of more lag: `durable_bytes` counts only bytes appended before a flush
/// began, and `pending_from_us` is a time no later than the append of the
/// oldest record not yet durable.
struct Lag {
    base: Instant,
    appended_bytes: AtomicU64,
    durable_bytes: AtomicU64,
    /// µs since `base`.
    pending_from_us: AtomicU64,
}

impl Lag {
    fn now_us(&self) -> u64 {
        self.base.elapsed().as_micros() as u64
    }

    fn pending_bytes(&self) -> u64 {
        self.appended_bytes.load(Ordering::Relaxed).saturating_sub(self.durable_bytes.load(Ordering::Relaxed))
    }

    /// (age of the oldest write not yet durable, bytes not yet durable);
    /// zero when everything counted is durable.
    fn now(&self) -> (Duration, u64) {
        let bytes = self.pending_bytes();
        if bytes == 0 {
            return (Duration::ZERO, 0);
        }
        let age = self.now_us().saturating_sub(self.pending_from_us.load(Ordering::Relaxed));
        (Duration::from_micros(age), bytes)
    }
}

struct State {
    durable: u64,
    failed: Option<(io::ErrorKind, String)>,
    waiters: BTreeMap<u64, Vec<OnDurable>>,
    shutdown: bool,
}

struct Shared {
    log: Arc<SegmentLog>,
    policy: Policy,
    state: Mutex<State>,
    wake: Condvar,
    stats: CommitStats,
    lag: Lag,
    /// An append found the segment full and no spare ready.
    spare_wanted: std::sync::atomic::AtomicBool,
    /// The I/O thread waits on `wake` (set and read under `state`): a
    /// notification is a system call, made only when someone sleeps.
    sleeping: std::sync::atomic::AtomicBool,
    /// Test hook ([`hooks::flush_delay`]; zero in a release build): each
    /// flush first sleeps this long (a slow disk).
    test_flush_delay: Duration,
}

/// The journal's group commit: an I/O thread flushing the log by policy.
pub struct GroupCommit {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl GroupCommit {
    /// Starts the I/O thread. `Policy::None` journals nothing and is
    /// refused.
    pub fn start(log: Arc<SegmentLog>, policy: Policy) -> io::Result<GroupCommit> {
        if !policy.journals() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "durability none journals nothing"));
        }
        let durable = log.durable_seq();
        let shared = Arc::new(Shared {
            log,
            policy,
            state: Mutex::new(State { durable, failed: None, waiters: BTreeMap::new(), shutdown: false }),
            wake: Condvar::new(),
            stats: CommitStats::default(),
            lag: Lag {
                base: Instant::now(),
                appended_bytes: AtomicU64::new(0),
                durable_bytes: AtomicU64::new(0),
                pending_from_us: AtomicU64::new(0),
            },
            spare_wanted: std::sync::atomic::AtomicBool::new(false),
            sleeping: std::sync::atomic::AtomicBool::new(false),
            test_flush_delay: hooks::flush_delay(),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new().name("strata-commit".to_string()).spawn(move || run(&s))?;
        Ok(GroupCommit { shared, thread: Some(thread) })
    }

    /// The journal hook: appends a mutation; returns its sequence number
    /// and address. Never waits for the disk.
    pub fn append(&self, rec: &Record<'_>) -> io::Result<(u64, RecordAddr)> {
        if let Some(e) = self.error() {
            return Err(e);
        }
        let s = &*self.shared;
        if s.policy == Policy::Sync {
            // No wake-up here: whoever needs the write durable (the reply
            // that acknowledges it, a read that saw it) registers a waiter,
            // and that starts the flush. One lock per reply batch, not per
            // write.
            return s.log.append(rec);
        }
        // Before the append: no later than the record's staging.
        let before_us = s.lag.now_us();
        let appended = match s.log.append(rec) {
            Ok(a) => a,
            Err(e) => {
                if e.kind() == io::ErrorKind::StorageFull {
                    // The segment is full and no spare is ready: readying
                    // one is the I/O thread's, after a flush; not at the
                    // next timer tick (write-back's may be seconds away).
                    s.spare_wanted.store(true, Ordering::Relaxed);
                    let guard = s.state.lock();
                    s.notify(&guard);
                }
                return Err(e);
            }
        };
        let len = appended.1.len as u64;
        let bytes = s.lag.appended_bytes.fetch_add(len, Ordering::Relaxed) + len;
        if appended.0 == s.log.durable_seq() + 1 {
            // The first record not durable: the lag starts here.
            s.lag.pending_from_us.fetch_max(before_us, Ordering::Relaxed);
        }
        let threshold = s.policy.flush_at_bytes();
        if bytes.saturating_sub(s.lag.durable_bytes.load(Ordering::Relaxed)) >= threshold
            && bytes - len < s.lag.durable_bytes.load(Ordering::Relaxed).saturating_add(threshold)
        {
            // This append crossed the flush threshold: wake the I/O thread once.
            let guard = s.state.lock();
            s.notify(&guard);
        }
        Ok(appended)
    }

    /// write-back and periodic back-pressure: the sequence number a reply
    /// must wait for because the log lags past the policy's bound (None:
    /// within it, or the policy never holds replies).
    pub fn backpressure_target(&self) -> Option<u64> {
        let (max_age, max_bytes) = self.shared.policy.hold_beyond()?;
        let (age, bytes) = self.shared.lag.now();
        if bytes == 0 || (age <= max_age && bytes <= max_bytes) {
            return None;
        }
        let target = self.shared.log.appended_seq();
        if target <= self.shared.log.durable_seq() {
            return None;
        }
        self.shared.stats.held_replies.fetch_add(1, Ordering::Relaxed);
        Some(target)
    }

    /// (age of the oldest write not yet durable, bytes not yet durable),
    /// as back-pressure sees them (an upper bound); zero in sync.
    pub fn lag(&self) -> (Duration, u64) {
        self.shared.lag.now()
    }

    /// Runs `on_durable` once `seq` is durable (at once if it already is).
    pub fn on_durable(&self, seq: u64, on_durable: OnDurable) {
        let mut st = self.shared.state.lock();
        if let Some((kind, msg)) = &st.failed {
            let e = io::Error::new(*kind, msg.clone());
            drop(st);
            return on_durable(Err(e));
        }
        if st.durable >= seq {
            let d = st.durable;
            drop(st);
            return on_durable(Ok(d));
        }
        st.waiters.entry(seq).or_default().push(on_durable);
        self.shared.notify(&st);
    }

    /// Blocks until `seq` is durable: for tests and shutdown paths.
    pub fn wait_durable(&self, seq: u64) -> io::Result<u64> {
        let (tx, rx) = mpsc::channel();
        self.on_durable(
            seq,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.recv().map_err(|_| io::Error::other("group commit stopped"))?
    }

    /// The highest sequence number durable.
    pub fn durable_seq(&self) -> u64 {
        self.shared.state.lock().durable
    }

    /// The error that stopped the group commit, if any: the node must stop.
    pub fn error(&self) -> Option<io::Error> {
        let st = self.shared.state.lock();
        st.failed.as_ref().map(|(k, m)| io::Error::new(*k, m.clone()))
    }

    pub fn stats(&self) -> &CommitStats {
        &self.shared.stats
    }

    pub fn policy(&self) -> Policy {
        self.shared.policy
    }
}

impl Drop for GroupCommit {
    /// Flushes what is staged, then stops the I/O thread.
    fn drop(&mut self) {
        self.shared.state.lock().shutdown = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Shared {
    /// Wakes the I/O thread if it sleeps; `_st` proves the state lock is
    /// held (the thread sets `sleeping` under it before it waits).
    fn notify(&self, _st: &MutexGuard<'_, State>) {
        if self.sleeping.load(Ordering::Relaxed) {
            self.wake.notify_one();
        }
    }
}

fn run(shared: &Shared) {
    let mut last_flush = Instant::now();
    let mut st = shared.state.lock();
    loop {
        let counted = shared.lag.appended_bytes.load(Ordering::Relaxed);
        let appended = shared.log.appended_seq();
        let pending = appended > st.durable;
        if !pending {
            // Everything counted so far is durable (the estimate catches up).
            shared.lag.durable_bytes.fetch_max(counted, Ordering::Relaxed);
        }
        // Someone waits (back-pressure, compaction, shutdown), or appends
        // wait for a spare segment: no timer.
        let waited_for = st.waiters.keys().next().is_some_and(|&seq| seq <= appended)
            || shared.spare_wanted.swap(false, Ordering::Relaxed);
        if waited_for && !pending {
            drop(st);
            if let Err(e) = shared.log.ensure_spare() {
                tracing::warn!("no spare log segment: {e}");
            }
            st = shared.state.lock();
        }
        let due = match shared.policy.flush_every() {
            _ if st.shutdown => pending,
            None => pending,
            Some(every) => {
                pending
                    && (last_flush.elapsed() >= every
                        || waited_for
                        || shared.lag.pending_bytes() >= shared.policy.flush_at_bytes())
            }
        };
        if !due {
            if st.shutdown {
                return;
            }
            shared.sleeping.store(true, Ordering::Relaxed);
            match shared.policy.flush_every() {
                None => shared.wake.wait(&mut st),
                Some(every) => {
                    let left = every.saturating_sub(last_flush.elapsed()).max(Duration::from_micros(100));
                    let left = if pending { left } else { every };
                    // Timed out or woken: the loop looks again either way.
                    let _ = shared.wake.wait_for(&mut st, left);
                }
            }
            shared.sleeping.store(false, Ordering::Relaxed);
            continue;
        }
        drop(st);
        if !shared.test_flush_delay.is_zero() {
            std::thread::sleep(shared.test_flush_delay);
        }
        let started = Instant::now();
        last_flush = started;
        let before = shared.log.durable_seq();
        // Read before the flush takes what is staged: all of it is covered.
        let (flushed_from_us, flushed_bytes) = (shared.lag.now_us(), shared.lag.appended_bytes.load(Ordering::Relaxed));
        let result = shared.log.flush_staged();
        let took = started.elapsed().as_micros() as u64;
        st = shared.state.lock();
        let ready: Vec<OnDurable>;
        let outcome = match result {
            Ok(durable) => {
                let stats = &shared.stats;
                let batch = durable.saturating_sub(before);
                stats.flushes.fetch_add(1, Ordering::Relaxed);
                stats.records.fetch_add(batch, Ordering::Relaxed);
                stats.max_batch.fetch_max(batch, Ordering::Relaxed);
                stats.batch_sizes.record(batch);
                stats.flush_us_total.fetch_add(took, Ordering::Relaxed);
                stats.flush_us_max.fetch_max(took, Ordering::Relaxed);
                stats.flush_latency.record(took);
                st.durable = durable;
                shared.lag.durable_bytes.fetch_max(flushed_bytes, Ordering::Relaxed);
                shared.lag.pending_from_us.fetch_max(flushed_from_us, Ordering::Relaxed);
                let later = st.waiters.split_off(&(durable + 1));
                ready = std::mem::replace(&mut st.waiters, later).into_values().flatten().collect();
                Ok(durable)
            }
            Err(e) => {
                tracing::error!("journal flush failed, the log is stopped: {e}");
                st.failed = Some((e.kind(), e.to_string()));
                ready = std::mem::take(&mut st.waiters).into_values().flatten().collect();
                Err(e)
            }
        };
        drop(st);
        for w in ready {
            w(match &outcome {
                Ok(d) => Ok(*d),
                Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
            });
        }
        if outcome.is_err() {
            return;
        }
        // After the wake-ups: creating a segment file is slow.
        if let Err(e) = shared.log.ensure_spare() {
            tracing::warn!("no spare log segment: {e}");
        }
        st = shared.state.lock();
    }
}

pub mod hooks;
pub mod persist;
pub mod replay;
#[cfg(test)]
mod tests;
