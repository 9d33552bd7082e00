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
//! [`persist`] is the keyspace's journal on top of it: records from
//! changes, the replay at start-up (warm restart, `-LOADING` meanwhile),
//! `sync`'s reply wait and compaction.

use crate::config;
use crate::tier::log::{RecordAddr, SegmentLog};
use crate::tier::record::Record;
use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The lag bound of write-back (no parameter sets it yet).
pub const WRITE_BACK_LAG: Duration = Duration::from_secs(1);

/// What an acknowledged write is promised: a `--durability` mode with its
/// parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// A cache: nothing is journaled (the log only holds demoted values).
    None,
    /// Writes reach the log in the background, at most `max_lag` late.
    WriteBack { max_lag: Duration },
    /// Every write is appended when made; fsync every `interval`: at most
    /// one interval (plus one flush) of acknowledged writes can be lost.
    Periodic { interval: Duration },
    /// A write is acknowledged only once an fsync covers it.
    Sync,
}

impl Policy {
    /// The policy of the configured mode and fsync interval.
    pub fn from_config(mode: config::Durability, fsync_interval_us: u64) -> Policy {
        match mode {
            config::Durability::None => Policy::None,
            config::Durability::WriteBack => Policy::WriteBack { max_lag: WRITE_BACK_LAG },
            config::Durability::Periodic => Policy::Periodic { interval: Duration::from_micros(fsync_interval_us) },
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
            Policy::WriteBack { max_lag } => Some(max_lag),
            Policy::Periodic { interval } => Some(interval),
            Policy::None | Policy::Sync => None,
        }
    }
}

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
    /// Total and worst time of a flush (write + fdatasync), in µs.
    pub flush_us_total: AtomicU64,
    pub flush_us_max: AtomicU64,
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
        let appended = self.shared.log.append(rec)?;
        if self.shared.policy == Policy::Sync {
            // Taking the lock orders this wake after the thread's check.
            let _guard = self.shared.state.lock().unwrap();
            self.shared.wake.notify_one();
        }
        Ok(appended)
    }

    /// Runs `on_durable` once `seq` is durable (at once if it already is).
    pub fn on_durable(&self, seq: u64, on_durable: OnDurable) {
        let mut st = self.shared.state.lock().unwrap();
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
        self.shared.wake.notify_one();
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
        self.shared.state.lock().unwrap().durable
    }

    /// The error that stopped the group commit, if any: the node must stop.
    pub fn error(&self) -> Option<io::Error> {
        let st = self.shared.state.lock().unwrap();
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
        self.shared.state.lock().unwrap().shutdown = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(shared: &Shared) {
    let mut last_flush = Instant::now();
    let mut st = shared.state.lock().unwrap();
    loop {
        let pending = shared.log.appended_seq() > st.durable;
        let due = match shared.policy.flush_every() {
            _ if st.shutdown => pending,
            None => pending,
            Some(every) => pending && last_flush.elapsed() >= every,
        };
        if !due {
            if st.shutdown {
                return;
            }
            st = match shared.policy.flush_every() {
                None => shared.wake.wait(st).unwrap(),
                Some(every) => {
                    let left = every.saturating_sub(last_flush.elapsed()).max(Duration::from_micros(100));
                    let left = if pending { left } else { every };
                    shared.wake.wait_timeout(st, left).unwrap().0
                }
            };
            continue;
        }
        drop(st);
        let started = Instant::now();
        last_flush = started;
        let before = shared.log.durable_seq();
        let result = shared.log.flush_staged();
        let took = started.elapsed().as_micros() as u64;
        st = shared.state.lock().unwrap();
        let ready: Vec<OnDurable>;
        let outcome = match result {
            Ok(durable) => {
                let stats = &shared.stats;
                let batch = durable.saturating_sub(before);
                stats.flushes.fetch_add(1, Ordering::Relaxed);
                stats.records.fetch_add(batch, Ordering::Relaxed);
                stats.max_batch.fetch_max(batch, Ordering::Relaxed);
                stats.flush_us_total.fetch_add(took, Ordering::Relaxed);
                stats.flush_us_max.fetch_max(took, Ordering::Relaxed);
                st.durable = durable;
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
        st = shared.state.lock().unwrap();
    }
}

pub mod persist;
#[cfg(test)]
mod tests;
