//! Replay of the journal into the keyspace at start-up, on several threads.
//!
//! The recovery thread scans the log (see [`crate::tier::recovery`]) and hands
//! each record to the applier thread owning its partition, in batches:
//! records of one partition keep their log order, and partitions are
//! independent, so the keyspace comes out as a replay on one thread makes
//! it. A record spanning partitions (FLUSHALL; FLUSHDB or SWAPDB logged
//! with another partition count) waits for every applier to drain, then is
//! applied alone. Reading and applying overlap, and applying runs on as
//! many cores as the node may use.

use crate::store::dump;
use crate::store::{KeyAccess, Keyspace, StoreStats, Value};
use crate::sys::file::BufferGauge;
use crate::tier::record::{Record, RecordKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc;

/// A batch goes to its applier at this many key and value bytes, or...
const BATCH_BYTES: usize = 64 << 10;
/// ...this many records, whichever comes first.
const BATCH_RECORDS: usize = 512;
/// Batches queued per applier: the RAM replay holds beyond the log's
/// windows is about appliers × this × `BATCH_BYTES`.
const LANE_DEPTH: usize = 8;
/// Appliers at most (beyond this the partitions' locks and the reader are
/// the limit).
const MAX_APPLIERS: usize = 8;

/// What the replay is told before each value, as a client's write is
/// before it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Room {
    /// Under `maxmemory` (after evicting or demoting, as the policy and the
    /// tier allow).
    Fits,
    /// Over it, but within [`slack`]: what the running node held and
    /// acknowledged is loaded whole even if the replay's own figures read
    /// a little higher (read windows and batches coming and going between
    /// two readings of the allocator).
    Slack,
    /// Over it by more: the data does not fit this configuration.
    Full,
}

/// How far over `maxmemory` a replay may read before it calls the data too
/// large for the budget: 1/8 of the limit, at least 2 MiB. A node filled
/// to its limit and killed must restart on its unchanged configuration,
/// and what the process holds beside its data differs a little between a
/// node that grew under its clients and one loading a log (seen: up to
/// ~3 MB at a 32 MB limit in a debug build); one restarted with a clearly
/// smaller `maxmemory` (or no evicting policy where one evicted) is told
/// so.
pub fn slack(max: u64) -> u64 {
    (max / 8).max(2 << 20)
}

/// What every applier shares: the keyspace, the clock of the replay, and
/// the outcome so far.
pub(super) struct ReplayCtx<'a> {
    pub ks: &'a Keyspace,
    /// Records expiring before this (ms) are dropped.
    pub now: u64,
    pub nparts: u32,
    pub stats: &'a StoreStats,
    /// Evicts (or demotes) to stay under maxmemory before a value, as
    /// before a client's write, and says how that went.
    pub make_room: &'a (dyn Fn(&StoreStats) -> Room + Sync),
    /// Counts the batches handed to appliers: the log's buffers, left out
    /// of the eviction decision as the log's read windows are.
    pub buffers: Arc<BufferGauge>,
    pub over_budget: AtomicBool,
    /// Values loaded past `maxmemory`, within the slack.
    pub over_limit: AtomicU64,
    pub bad_values: AtomicU64,
}

impl ReplayCtx<'_> {
    fn apply_one(&self, rec: &Record<'_>) {
        if self.over_budget.load(Relaxed) {
            return;
        }
        // Room is made before a value, as before a client's write: a node
        // that acknowledged its last write just under the limit replays it
        // the same way (checked after, the last value would not fit).
        if rec.kind == RecordKind::Set {
            match (self.make_room)(self.stats) {
                Room::Fits => {}
                Room::Slack => {
                    self.over_limit.fetch_add(1, Relaxed);
                }
                Room::Full => {
                    self.over_budget.store(true, Relaxed);
                    return;
                }
            }
        }
        if !apply(self.ks, rec, self.now, self.nparts, self.stats) {
            self.bad_values.fetch_add(1, Relaxed);
        }
    }

    /// The partition a record touches alone, if it touches one.
    fn partition(&self, rec: &Record<'_>) -> Option<u32> {
        match rec.kind {
            RecordKind::Set | RecordKind::Delete | RecordKind::Expire if !rec.key.is_empty() => {
                Some(self.ks.partition_of_key(rec.key))
            }
            RecordKind::FlushDb | RecordKind::SwapDb => match partition_of_record(rec.key) {
                Some((p, n)) if n == self.nparts && p < self.nparts => Some(p),
                _ => None,
            },
            _ => None,
        }
    }
}

/// How many appliers: one per CPU the node may use, within
/// `MAX_APPLIERS`; `STRATA_REPLAY_THREADS` overrides (0: apply on the
/// recovery thread itself, as a reference for tests and benchmarks).
pub(super) fn appliers() -> usize {
    std::env::var("STRATA_REPLAY_THREADS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .map(|n| n.min(MAX_APPLIERS))
        .unwrap_or_else(|| crate::sys::cpu::allowed_cpus().len().clamp(1, MAX_APPLIERS))
}

/// Runs `scan`, which feeds every record of the log in order to the
/// function it is given, with the records applied by `threads` appliers
/// (0: on this thread). Every record is applied when it returns.
pub(super) fn replay<R>(ctx: &ReplayCtx<'_>, threads: usize, scan: impl FnOnce(&mut dyn FnMut(&Record<'_>)) -> R) -> R {
    if threads == 0 {
        return scan(&mut |rec| ctx.apply_one(rec));
    }
    std::thread::scope(|s| {
        let mut lanes = Vec::with_capacity(threads);
        for _ in 0..threads {
            let (tx, rx) = mpsc::sync_channel::<Batch>(LANE_DEPTH);
            let spawned = std::thread::Builder::new().name("strata-replay".into()).spawn_scoped(s, move || {
                for batch in rx {
                    batch.records().for_each(|rec| ctx.apply_one(&rec));
                    if let Some(done) = &batch.done {
                        let _ = done.send(());
                    }
                }
            });
            match spawned {
                Ok(_) => lanes.push(Lane { tx, batch: Batch::sized(&ctx.buffers) }),
                // No thread to be had: the ones started (or this one) do it all.
                Err(e) => {
                    tracing::warn!("cannot start a replay thread: {e}");
                    break;
                }
            }
        }
        if lanes.is_empty() {
            return scan(&mut |rec| ctx.apply_one(rec));
        }
        let mut dispatch = Dispatcher { ctx, lanes };
        let result = scan(&mut |rec| dispatch.dispatch(rec));
        dispatch.drain();
        // Dropping the lanes ends the appliers; the scope joins them.
        result
    })
}

struct Lane {
    tx: mpsc::SyncSender<Batch>,
    batch: Batch,
}

struct Dispatcher<'c, 'a> {
    ctx: &'c ReplayCtx<'a>,
    lanes: Vec<Lane>,
}

impl Dispatcher<'_, '_> {
    fn dispatch(&mut self, rec: &Record<'_>) {
        if self.ctx.over_budget.load(Relaxed) {
            return;
        }
        match self.ctx.partition(rec) {
            Some(p) => {
                let n = self.lanes.len();
                let lane = &mut self.lanes[p as usize % n];
                lane.batch.push(rec);
                if lane.batch.bytes.len() >= BATCH_BYTES || lane.batch.metas.len() >= BATCH_RECORDS {
                    let _ = lane.tx.send(std::mem::replace(&mut lane.batch, Batch::sized(&self.ctx.buffers)));
                }
            }
            None => {
                self.drain();
                self.ctx.apply_one(rec);
            }
        }
    }

    /// Sends every lane's batch and waits until the appliers applied all
    /// they were given.
    fn drain(&mut self) {
        let (done_tx, done_rx) = mpsc::channel();
        let mut sent = 0;
        for lane in &mut self.lanes {
            let mut batch = std::mem::take(&mut lane.batch);
            batch.done = Some(done_tx.clone());
            sent += lane.tx.send(batch).is_ok() as usize;
        }
        drop(done_tx);
        // An applier that died drops its batch, and with it the sender.
        for _ in 0..sent {
            if done_rx.recv().is_err() {
                break;
            }
        }
    }
}

/// Records copied out of the log's read window for one applier.
#[derive(Default)]
struct Batch {
    /// Keys and values, one after the other.
    bytes: Vec<u8>,
    metas: Vec<Meta>,
    /// Told once the batch (and so every batch before it) is applied.
    done: Option<mpsc::Sender<()>>,
    /// The gauge its buffers are counted in, and how much they count.
    gauge: Option<(Arc<BufferGauge>, usize)>,
}

impl Drop for Batch {
    fn drop(&mut self) {
        if let Some((gauge, counted)) = &self.gauge {
            gauge.resize(*counted, 0);
        }
    }
}

struct Meta {
    kind: RecordKind,
    db: u32,
    expire_at_ms: u64,
    key_len: u32,
    value_len: u32,
}

impl Batch {
    /// Room for a full batch of small records (no regrowth on the way),
    /// counted in `gauge` as the allocator counts it. A larger record
    /// regrows it beyond that count: once, by one value.
    fn sized(gauge: &Arc<BufferGauge>) -> Batch {
        let (bytes, metas) = (BATCH_BYTES + 4096, BATCH_RECORDS * std::mem::size_of::<Meta>());
        let counted = crate::sys::alloc::usable_size(bytes, 1) + crate::sys::alloc::usable_size(metas, 8);
        gauge.resize(0, counted);
        Batch {
            bytes: Vec::with_capacity(bytes),
            metas: Vec::with_capacity(BATCH_RECORDS),
            done: None,
            gauge: Some((gauge.clone(), counted)),
        }
    }

    fn push(&mut self, rec: &Record<'_>) {
        self.bytes.extend_from_slice(rec.key);
        self.bytes.extend_from_slice(rec.value);
        self.metas.push(Meta {
            kind: rec.kind,
            db: rec.db,
            expire_at_ms: rec.expire_at_ms,
            key_len: rec.key.len() as u32,
            value_len: rec.value.len() as u32,
        });
    }

    fn records(&self) -> impl Iterator<Item = Record<'_>> {
        let mut at = 0;
        self.metas.iter().map(move |m| {
            let key = &self.bytes[at..at + m.key_len as usize];
            let value = &self.bytes[at + key.len()..at + key.len() + m.value_len as usize];
            at += key.len() + value.len();
            Record { kind: m.kind, db: m.db, key, value, expire_at_ms: m.expire_at_ms, seq: 0 }
        })
    }
}

/// Applies one replayed record; false when its value is undecodable.
pub(super) fn apply(ks: &Keyspace, rec: &Record<'_>, now: u64, nparts: u32, stats: &StoreStats) -> bool {
    let db = rec.db as usize;
    if db >= crate::store::NUM_DBS {
        return false;
    }
    match rec.kind {
        RecordKind::FlushAll => {
            for idx in 0..ks.num_partitions() as u32 {
                let mut part = ks.lock(idx);
                for d in 0..crate::store::NUM_DBS {
                    part.clear_db(ks, d);
                }
            }
            return true;
        }
        RecordKind::SwapDb => {
            let (Some((p, n)), Some(other)) = (partition_of_record(rec.key), be_u32(rec.value, 0)) else {
                return false;
            };
            let other = other as usize;
            if other >= crate::store::NUM_DBS {
                return false;
            }
            if n == nparts {
                if p < nparts {
                    ks.lock(p).swap_dbs(ks, db, other);
                }
                return true;
            }
            // Partitioned differently then: move the keys of that
            // partition's slots across, both ways.
            let mask = n.max(1) as u64 - 1;
            let of_slots = |d: usize| -> Vec<Vec<u8>> {
                let mut keys = Vec::new();
                for idx in 0..ks.num_partitions() as u32 {
                    // Keys on disk only (replay under maxmemory) come back to
                    // the index first.
                    let mut part = ks.lock(idx);
                    part.recall_all(ks, d);
                    keys.extend(
                        part.entries(d)
                            .filter(|(_, e)| (crate::base::slot::key_slot(e.key()) as u64 & mask) == p as u64)
                            .map(|(_, e)| e.key().to_vec()),
                    );
                }
                keys
            };
            let take_all = |d: usize, keys: Vec<Vec<u8>>| -> Vec<(Vec<u8>, Value, u64)> {
                let mut out = Vec::with_capacity(keys.len());
                for k in keys {
                    with_key(ks, d, now, stats, &k, |acc| {
                        if let Some(e) = acc.take(&k) {
                            let at = e.expire_at();
                            out.push((k.clone(), e.into_value(), at));
                        }
                    });
                }
                out
            };
            let from_a = take_all(db, of_slots(db));
            let from_b = take_all(other, of_slots(other));
            for (d, moved) in [(other, from_a), (db, from_b)] {
                for (k, v, at) in moved {
                    with_key(ks, d, now, stats, &k, |acc| acc.put_entry(&k, v, at));
                }
            }
            return true;
        }
        RecordKind::FlushDb => {
            let Some((p, n)) = partition_of_record(rec.key) else {
                return false;
            };
            if n == nparts {
                if p < nparts {
                    ks.lock(p).clear_db(ks, db);
                }
                return true;
            }
            // Partitioned differently then: the keys of that partition's slots.
            let mask = n.max(1) as u64 - 1;
            for idx in 0..ks.num_partitions() as u32 {
                let mut part = ks.lock(idx);
                part.recall_all(ks, db);
                let keys: Vec<Vec<u8>> = part
                    .entries(db)
                    .filter(|(_, e)| (crate::base::slot::key_slot(e.key()) as u64 & mask) == p as u64)
                    .map(|(_, e)| e.key().to_vec())
                    .collect();
                drop(part);
                for k in keys {
                    with_key(ks, db, now, stats, &k, |a| {
                        a.delete(&k);
                    });
                }
            }
            return true;
        }
        _ => {}
    }
    if rec.key.is_empty() {
        return true; // a compaction marker
    }
    let key = rec.key;
    let expired = rec.expire_at_ms != 0 && rec.expire_at_ms <= now;
    match rec.kind {
        RecordKind::Set => {
            let value = match dump::decode_value(rec.value) {
                Ok(v) => v,
                Err(_) => return false,
            };
            with_key(ks, db, now, stats, key, |a| {
                if expired {
                    a.delete(key);
                } else {
                    // Replaces a value in place (one lookup), expiry included.
                    a.set(key, value, rec.expire_at_ms, false);
                }
            });
        }
        RecordKind::Delete => with_key(ks, db, now, stats, key, |a| {
            a.delete(key);
        }),
        RecordKind::Expire => with_key(ks, db, now, stats, key, |a| {
            if expired {
                a.delete(key);
            } else if let Some(mut e) = a.get_mut(key) {
                e.set_expire(rec.expire_at_ms);
            }
        }),
        RecordKind::FlushDb | RecordKind::FlushAll | RecordKind::SwapDb => unreachable!("handled above"),
    }
    true
}

/// The (partition, partition count) of a whole-database record's key.
fn partition_of_record(key: &[u8]) -> Option<(u32, u32)> {
    Some((be_u32(key, 0)?, be_u32(key, 4)?))
}

fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn with_key(ks: &Keyspace, db: usize, now: u64, stats: &StoreStats, key: &[u8], f: impl FnOnce(&mut KeyAccess<'_>)) {
    let locked = ks.lock_one(ks.partition_of_key(key));
    let mut access = KeyAccess { ks, locked, db, now_ms: now, touch: false, stats };
    f(&mut access);
}
