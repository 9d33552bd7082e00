//! A partition's forgotten keys read back together, without its lock held:
//! what a SCAN entering a partition waits for on the pending path.
//!
//! `Partition::recall_all` reads every forgotten key of a database before a
//! whole-keyspace command walks it, under the partition's lock. With many
//! keys on disk that is thousands of reads, and while the lock is held
//! every command on the partition stalls its worker. So a command that may
//! wait (not inside MULTI or a script) starts a `RecallBatch` instead and
//! waits for it; the reads run on the tier's I/O thread, a bounded number
//! at a time, keeping only each record's key and deadline. Run again, the
//! command's `recall_all` takes the batch's records for the keys still at
//! those addresses and reads only those forgotten since. A batch is shared
//! by every command that needs the same partition and database meanwhile;
//! one whose command went away is dropped by the next recall.

use super::cold::{ColdRecord, ColdTier};
use super::entry::ColdLoc;
use super::pending::PendingRead;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Notify;

/// Reads of one batch in flight at a time: deep enough for a device's
/// parallelism, few enough that their buffers stay a few hundred KiB.
const DEPTH: usize = 64;

/// Forgotten keys of one database below which `recall_all` just reads them
/// (a few ms at most): a batch is for the thousands.
pub(super) const BATCH_MIN: usize = 64;

pub struct RecallBatch {
    pub(super) db: usize,
    tier: Arc<dyn ColdTier>,
    /// In address order.
    locs: Vec<ColdLoc>,
    state: Mutex<State>,
    over: AtomicBool,
    done: Notify,
}

#[derive(Default)]
struct State {
    next: usize,
    in_flight: usize,
    answered: usize,
    /// A thread is starting reads (a read answered at once, from the
    /// tier's buffers, must not start more from inside that loop).
    pumping: bool,
    /// By (segment, offset): the key and deadline only (no value: a
    /// recall brings keys back cold).
    records: HashMap<(u32, u32), io::Result<ColdRecord>>,
}

impl RecallBatch {
    /// Starts reading the records at `locs` of database `db`.
    pub(super) fn start(tier: Arc<dyn ColdTier>, db: usize, mut locs: Vec<ColdLoc>) -> Arc<RecallBatch> {
        locs.sort_unstable_by_key(|l| (l.segment, l.offset));
        let batch = Arc::new(RecallBatch {
            db,
            tier,
            over: AtomicBool::new(locs.is_empty()),
            locs,
            state: Mutex::new(State::default()),
            done: Notify::new(),
        });
        batch.pump();
        batch
    }

    pub(super) fn finished(&self) -> bool {
        self.over.load(Ordering::Acquire)
    }

    /// The future a command waits on.
    pub(super) fn wait(self: &Arc<Self>) -> PendingRead {
        let batch = self.clone();
        Box::pin(async move {
            loop {
                let notified = batch.done.notified();
                if batch.finished() {
                    return;
                }
                notified.await;
            }
        })
    }

    /// The records read, by (segment, offset); call once finished.
    pub(super) fn take_records(&self) -> HashMap<(u32, u32), io::Result<ColdRecord>> {
        std::mem::take(&mut self.state.lock().records)
    }

    /// Starts reads until `DEPTH` are in flight or none is left.
    fn pump(self: &Arc<Self>) {
        loop {
            let range = {
                let mut st = self.state.lock();
                if st.pumping {
                    return;
                }
                let n = DEPTH.saturating_sub(st.in_flight).min(self.locs.len() - st.next);
                if n == 0 {
                    return;
                }
                st.pumping = true;
                st.in_flight += n;
                st.next += n;
                st.next - n..st.next
            };
            for i in range {
                let batch = self.clone();
                self.tier.read(self.locs[i], Box::new(move |r| batch.answered(i, r)));
            }
            self.state.lock().pumping = false;
        }
    }

    fn answered(self: &Arc<Self>, i: usize, r: io::Result<ColdRecord>) {
        let loc = self.locs[i];
        let keyed = r.map(|rec| ColdRecord { key: rec.key, value: Vec::new(), expire_at: rec.expire_at });
        let all = {
            let mut st = self.state.lock();
            st.records.insert((loc.segment, loc.offset), keyed);
            st.in_flight -= 1;
            st.answered += 1;
            st.answered == self.locs.len()
        };
        if all {
            self.over.store(true, Ordering::Release);
            self.done.notify_waiters();
        } else {
            self.pump();
        }
    }
}
