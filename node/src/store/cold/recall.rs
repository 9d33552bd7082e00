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

use super::disk::{ColdRecord, ColdTier};
use super::pending::PendingRead;
use crate::store::entry::ColdLoc;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tokio::sync::Notify;

/// Reads of one batch in flight at a time: deep enough for a device's
/// parallelism, few enough that their buffers stay a few hundred KiB.
const DEPTH: usize = 64;

/// Forgotten keys of one database below which `recall_all` just reads them
/// (a few ms at most): a batch is for the thousands.
pub(in crate::store) const BATCH_MIN: usize = 64;

/// Bytes all batches may hold (keys read, waiting to be recalled): past it
/// a SCAN reads under the lock, as before. Batches whose command went away
/// hold theirs until the next recall of their partition; this bounds what
/// clients that start many and leave can pin.
pub(in crate::store) const HELD_MAX: u64 = 16 << 20;

/// What one key read holds in a batch, beyond the key's bytes.
const PER_KEY: u64 = 96;

pub struct RecallBatch {
    pub(in crate::store) db: usize,
    tier: Arc<dyn ColdTier>,
    /// In address order.
    locs: Vec<ColdLoc>,
    state: Mutex<State>,
    over: AtomicBool,
    done: Notify,
    /// The keyspace's count of bytes held by batches, and this one's share.
    held: Arc<AtomicU64>,
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
    /// Bytes `records` counts in the keyspace's `held`.
    holds: u64,
}

impl RecallBatch {
    /// Starts reading the records at `locs` of database `db`.
    pub(in crate::store) fn start(
        tier: Arc<dyn ColdTier>,
        held: Arc<AtomicU64>,
        db: usize,
        mut locs: Vec<ColdLoc>,
    ) -> Arc<RecallBatch> {
        locs.sort_unstable_by_key(|l| (l.segment, l.offset));
        let batch = Arc::new(RecallBatch {
            db,
            tier,
            over: AtomicBool::new(locs.is_empty()),
            locs,
            state: Mutex::new(State::default()),
            done: Notify::new(),
            held,
        });
        batch.pump();
        batch
    }

    pub(in crate::store) fn finished(&self) -> bool {
        self.over.load(Ordering::Acquire)
    }

    /// The future a command waits on.
    pub(in crate::store) fn wait(self: &Arc<Self>) -> PendingRead {
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
    pub(in crate::store) fn take_records(&self) -> HashMap<(u32, u32), io::Result<ColdRecord>> {
        let mut st = self.state.lock();
        self.held.fetch_sub(std::mem::take(&mut st.holds), Ordering::Relaxed);
        std::mem::take(&mut st.records)
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
        let bytes = keyed.as_ref().map_or(0, |rec| rec.key.len() as u64) + PER_KEY;
        self.held.fetch_add(bytes, Ordering::Relaxed);
        let all = {
            let mut st = self.state.lock();
            st.holds += bytes;
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

impl Drop for RecallBatch {
    fn drop(&mut self) {
        self.held.fetch_sub(self.state.get_mut().holds, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::cold::test_tier::HeldTier;
    use crate::store::entry::ValueKind;

    fn tier_of(n: usize) -> (Arc<HeldTier>, Vec<ColdLoc>) {
        let tier = Arc::new(HeldTier::default());
        let locs = (0..n)
            .map(|i| {
                let key = format!("key:{i}");
                let (segment, offset, len) = tier.demote(0, key.as_bytes(), 0, &[7; 100]).unwrap();
                ColdLoc { segment, offset, len, kind: ValueKind::Str }
            })
            .collect();
        (tier, locs)
    }

    #[test]
    fn keeps_depth_reads_in_flight_and_answers_every_key_once() {
        let (tier, locs) = tier_of(200);
        let held = Arc::new(AtomicU64::new(0));
        let batch = RecallBatch::start(tier.clone(), held.clone(), 0, locs.iter().rev().copied().collect());
        let mut rounds = 0;
        while !batch.finished() {
            let in_flight = tier.reads.lock().len();
            assert!(in_flight > 0 && in_flight <= DEPTH, "{in_flight} reads in flight");
            tier.complete_all();
            rounds += 1;
        }
        assert_eq!(rounds, 200usize.div_ceil(DEPTH));
        assert!(held.load(Ordering::Relaxed) >= 200 * PER_KEY);
        let records = batch.take_records();
        assert_eq!(records.len(), 200);
        for (i, loc) in locs.iter().enumerate() {
            let rec = records[&(loc.segment, loc.offset)].as_ref().unwrap();
            assert_eq!(rec.key, format!("key:{i}").into_bytes());
            assert!(rec.value.is_empty(), "values are not kept");
        }
        assert_eq!(held.load(Ordering::Relaxed), 0, "taken records leave the count");
    }

    #[test]
    fn a_batch_nobody_takes_gives_its_bytes_back_when_dropped() {
        let (tier, locs) = tier_of(10);
        let held = Arc::new(AtomicU64::new(0));
        let batch = RecallBatch::start(tier.clone(), held.clone(), 0, locs);
        tier.complete_all();
        assert!(batch.finished());
        assert!(held.load(Ordering::Relaxed) > 0);
        drop(batch);
        assert_eq!(held.load(Ordering::Relaxed), 0);
    }
}
