//! Live slot migration, atomic per batch of slots (`STRATA.MIGRATE`).
//!
//! The source copies the slots' keys to the target (RAM and disk-resident
//! values alike; cold values are read from disk, never promoted), as
//! `RESTORE ... REPLACE ABSTTL` / `DEL` over one admin link, which the
//! target applies through its normal write path into slots it does not
//! serve yet. Meanwhile the store notes every key of those slots that
//! changes (`store::slot_watch`); passes of "send the changed keys' current
//! state" follow until few are left. Then the handover:
//!
//! 1. the source records the handover on its volume (`MoveState::Handover`)
//!    and seals the slots: their commands wait;
//! 2. it sends the last changed keys and `COMMIT`;
//! 3. the target makes what it received durable, records the slots as its
//!    own on its volume and answers OK: **the commit point**;
//! 4. the source records the move as committed (its layout now sends the
//!    slots to the target: MOVED, or forwarding) and unseals: the waiting
//!    commands go to the target.
//!
//! If anything fails before step 3 the target drops what it staged and the
//! source keeps the slots. A source that loses the target's answer (or
//! restarts) in step 2–3 does not guess: it asks the target to cancel;
//! "cancelled" means the target never committed and never will, "has
//! committed" means it did. Until it knows, the slots stay sealed: at no
//! moment do two nodes accept writes to one slot. The source deletes its
//! copy only when the operator pushes the epoch that gives the slots to the
//! target (see `Topology::carry_moves_into`), through the mutation funnel,
//! so the deletes are in its log and a restart does not bring them back.

use super::Cluster;
use super::link::Link;
use super::topology::{Move, MoveState, Route};
use crate::base::slot::{SLOTS, SlotSet, key_slot};
use crate::durability::hooks;
use crate::store::entry::ColdLoc;
use crate::store::export::Exported;
use crate::store::{KeyAccess, Keyspace, StoreStats};
use crate::sys::file::BufferGauge;
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::{Duration, Instant};

/// Keys per pipelined batch, and bytes (values can be large).
const BATCH_KEYS: usize = 256;
const BATCH_BYTES: usize = 4 << 20;
/// Bytes of values read from disk (or encoded) at once for a batch.
const EXPORT_BYTES: usize = 1 << 20;
/// Passes over changed keys before the handover, and the count small enough
/// to send while the slots are sealed.
const MAX_PASSES: usize = 20;
const FINAL_DELTA: usize = 200;
/// How long a link waits on its peer (a target's commit includes an fsync).
const LINK_TIMEOUT: Duration = Duration::from_secs(10);
/// A staged import with no traffic this long is dropped.
pub const IMPORT_IDLE: Duration = Duration::from_secs(60);
/// Migrations remembered for STATUS after they end.
const KEPT: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Source,
    Target,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Snapshot,
    Streaming,
    Handover,
    Committed,
    Failed,
    Aborted,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Snapshot => "snapshot",
            State::Streaming => "streaming",
            State::Handover => "handover",
            State::Committed => "committed",
            State::Failed => "failed",
            State::Aborted => "aborted",
        }
    }

    fn ended(self) -> bool {
        matches!(self, State::Committed | State::Failed | State::Aborted)
    }
}

/// One migration, as this node sees it.
pub struct Migration {
    pub mid: String,
    pub role: Role,
    pub source: String,
    pub target: String,
    /// The target's admin address (source side).
    pub target_addr: String,
    pub slots: SlotSet,
    state: Mutex<State>,
    error: Mutex<String>,
    pub keys: AtomicU64,
    pub bytes: AtomicU64,
    pub paused_ms: AtomicU64,
    started: Instant,
    ended: Mutex<Option<Instant>>,
    cancel: AtomicBool,
    /// Target side: unix ms of the last key received.
    last_activity_ms: AtomicU64,
    /// Target side: a commit and a cancel never overlap.
    commit: Mutex<()>,
}

impl Migration {
    fn new(mid: &str, role: Role, source: &str, target: &str, target_addr: &str, slots: SlotSet) -> Migration {
        Migration {
            mid: mid.into(),
            role,
            source: source.into(),
            target: target.into(),
            target_addr: target_addr.into(),
            slots,
            state: Mutex::new(State::Snapshot),
            error: Mutex::new(String::new()),
            keys: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            paused_ms: AtomicU64::new(0),
            started: Instant::now(),
            ended: Mutex::new(None),
            cancel: AtomicBool::new(false),
            last_activity_ms: AtomicU64::new(crate::store::now_ms()),
            commit: Mutex::new(()),
        }
    }

    pub fn state(&self) -> State {
        *self.state.lock()
    }

    fn set_state(&self, s: State) {
        *self.state.lock() = s;
        if s.ended() {
            self.ended.lock().get_or_insert_with(Instant::now);
        }
    }

    fn fail(&self, state: State, why: &str) {
        *self.error.lock() = why.to_string();
        self.set_state(state);
    }

    pub fn elapsed(&self) -> Duration {
        self.ended.lock().unwrap_or_else(Instant::now) - self.started
    }

    /// STATUS's field/value pairs.
    pub fn status(&self) -> Vec<(&'static str, String)> {
        vec![
            ("id", self.mid.clone()),
            ("role", if self.role == Role::Source { "source" } else { "target" }.into()),
            ("state", self.state().name().into()),
            ("source", self.source.clone()),
            ("target", self.target.clone()),
            ("slots", self.slots.render()),
            ("keys", self.keys.load(Relaxed).to_string()),
            ("bytes", self.bytes.load(Relaxed).to_string()),
            ("elapsed_ms", self.elapsed().as_millis().to_string()),
            ("paused_ms", self.paused_ms.load(Relaxed).to_string()),
            ("error", self.error.lock().clone()),
        ]
    }
}

/// Counters of every migration since start (INFO, `/metrics`).
#[derive(Default)]
pub struct MigrationStats {
    /// [source, target]
    pub keys: [AtomicU64; 2],
    pub bytes: [AtomicU64; 2],
    pub slots: [AtomicU64; 2],
    pub committed: [AtomicU64; 2],
    pub failed: [AtomicU64; 2],
    pub aborted: [AtomicU64; 2],
    /// Source: time the slots were sealed, summed (ns).
    pub paused_ns: AtomicU64,
}

fn side(role: Role) -> usize {
    if role == Role::Source { 0 } else { 1 }
}

/// The migrations this node runs (source) or receives (target).
#[derive(Default)]
pub struct Migrations {
    list: Mutex<Vec<Arc<Migration>>>,
    /// One release at a time (each decides what to delete from the
    /// topology at its start).
    releasing: Mutex<()>,
    pub stats: MigrationStats,
    /// What the batches this node sends hold (values read from disk, the
    /// RESTOREs queued): the memory budget leaves it out of eviction, as
    /// a log's buffers, since it is bounded (one batch, `BATCH_BYTES` and
    /// a value) and goes once sent.
    pub buffers: Arc<BufferGauge>,
}

impl Migrations {
    pub fn find(&self, mid: &str) -> Option<Arc<Migration>> {
        self.list.lock().iter().rev().find(|m| m.mid == mid).cloned()
    }

    pub fn latest(&self) -> Option<Arc<Migration>> {
        self.list.lock().last().cloned()
    }

    /// Migrations not ended, per role: [source, target].
    pub fn in_flight(&self) -> [usize; 2] {
        let mut n = [0; 2];
        for m in self.list.lock().iter().filter(|m| !m.state().ended()) {
            n[side(m.role)] += 1;
        }
        n
    }

    /// The elapsed time of the oldest migration in flight.
    pub fn oldest_in_flight(&self) -> Duration {
        self.list.lock().iter().filter(|m| !m.state().ended()).map(|m| m.elapsed()).max().unwrap_or_default()
    }

    /// Slots staged here by imports not committed yet: their keys are
    /// not dropped as unserved.
    pub fn staged_slots(&self) -> SlotSet {
        let mut s = SlotSet::default();
        for m in self.list.lock().iter().filter(|m| m.role == Role::Target && !m.state().ended()) {
            for slot in m.slots.iter() {
                s.insert(slot);
            }
        }
        s
    }

    fn add(&self, m: Arc<Migration>) {
        self.list.lock().push(m);
        self.trim();
    }

    /// Forgets the oldest ended migrations beyond `KEPT`.
    fn trim(&self) {
        let mut list = self.list.lock();
        while list.len() > KEPT {
            match list.iter().position(|m| m.state().ended()) {
                Some(i) => {
                    list.remove(i);
                }
                None => break,
            }
        }
    }

    fn ended(&self, m: &Migration) {
        let s = side(m.role);
        let counter = match m.state() {
            State::Committed => {
                self.stats.slots[s].fetch_add(m.slots.len() as u64, Relaxed);
                &self.stats.committed[s]
            }
            State::Aborted => &self.stats.aborted[s],
            _ => &self.stats.failed[s],
        };
        counter.fetch_add(1, Relaxed);
    }

    /// Target side: a key received for import `mid`.
    pub fn note_received(&self, mid: &str, bytes: usize) {
        if let Some(m) = self.find(mid) {
            m.keys.fetch_add(1, Relaxed);
            m.bytes.fetch_add(bytes as u64, Relaxed);
            m.last_activity_ms.store(crate::store::now_ms(), Relaxed);
        }
        self.stats.keys[1].fetch_add(1, Relaxed);
        self.stats.bytes[1].fetch_add(bytes as u64, Relaxed);
    }
}

fn valid_mid(mid: &str) -> bool {
    !mid.is_empty() && mid.len() <= 64 && mid.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// STATUS for a migration this node no longer holds in memory (it
/// restarted): what its volume says.
pub fn recorded_status(c: &Cluster, mid: &str) -> Option<Vec<(&'static str, String)>> {
    let t = c.current()?;
    let me = t.me().id.clone();
    let status = |role: &str, state: &str, source: &str, target: &str, slots: String| {
        vec![
            ("id", mid.to_string()),
            ("role", role.to_string()),
            ("state", state.to_string()),
            ("source", source.to_string()),
            ("target", target.to_string()),
            ("slots", slots),
            ("keys", "0".into()),
            ("bytes", "0".into()),
            ("elapsed_ms", "0".into()),
            ("paused_ms", "0".into()),
            ("error", String::new()),
        ]
    };
    if let Some(m) = t.moves.iter().find(|m| m.mid == mid) {
        let role = if m.from == me { "source" } else { "target" };
        let state = if m.state == MoveState::Committed { "committed" } else { "handover" };
        return Some(status(role, state, &m.from, &m.to, m.slots.render()));
    }
    if t.confirmed.iter().any(|m| m == mid) {
        return Some(status("", "committed", "", "", String::new()));
    }
    None
}

// ------------------------------------------------------------------ source

/// Validates and registers an outgoing migration; the caller runs
/// [`run_source`] on a thread of its own. `Ok(None)`: the same migration
/// is already running or done (a retried START).
pub fn start(
    c: &Cluster,
    mid: &str,
    target: &str,
    target_addr: &str,
    slots: &str,
) -> Result<Option<Arc<Migration>>, String> {
    if !valid_mid(mid) {
        return Err("ERR a migration id is 1 to 64 characters of [A-Za-z0-9._-]".into());
    }
    if let Some(m) = c.migrations.find(mid) {
        return if m.role == Role::Source && matches!(m.state(), State::Committed) || !m.state().ended() {
            Ok(None)
        } else {
            Err(format!("ERR migration {mid} has ended ({}); start a new one with another id", m.state().name()))
        };
    }
    let slots = SlotSet::parse(slots).map_err(|e| format!("ERR {e}"))?;
    if slots.is_empty() {
        return Err("ERR no slots to migrate".into());
    }
    let t = c.current().ok_or("ERR no topology yet")?;
    if let Some(s) = slots.iter().find(|&s| t.route(s) != Route::Mine) {
        return Err(format!("ERR slot {s} is not served by this node"));
    }
    let Some(tm) = t.members.iter().find(|m| m.id == target) else {
        return Err(format!("ERR unknown node {target}"));
    };
    if tm.id == t.me().id {
        return Err("ERR the target is this node".into());
    }
    let addr = if target_addr.is_empty() { tm.admin_addr.to_string() } else { target_addr.to_string() };
    let mut list = c.migrations.list.lock();
    if let Some(other) = list.iter().find(|m| m.role == Role::Source && !m.state().ended()) {
        return Err(format!("ERR migration {} is already running on this node", other.mid));
    }
    let m = Arc::new(Migration::new(mid, Role::Source, &t.me().id, target, &addr, slots));
    list.push(m.clone());
    drop(list);
    c.migrations.trim();
    Ok(Some(m))
}

/// Runs an outgoing migration to its end (committed or failed).
pub fn run_source(ks: &Keyspace, c: &Cluster, m: &Migration) {
    tracing::info!(mid = %m.mid, target = %m.target, addr = %m.target_addr, slots = %m.slots.render(), "migration: starting");
    ks.watch_slots(&m.slots);
    let result = copy_and_hand_over(ks, c, m);
    ks.unwatch_slots(&m.slots);
    match result {
        Ok(()) => tracing::info!(
            mid = %m.mid,
            keys = m.keys.load(Relaxed),
            bytes = m.bytes.load(Relaxed),
            ms = m.elapsed().as_millis() as u64,
            paused_ms = m.paused_ms.load(Relaxed),
            "migration: committed; the slots are the target's (this node deletes its copy when the operator's next epoch confirms it)"
        ),
        Err(e) => {
            let state = if m.cancel.load(Relaxed) { State::Aborted } else { State::Failed };
            m.fail(state, &e);
            tracing::warn!(mid = %m.mid, error = %e, "migration: {}; this node keeps the slots", state.name());
        }
    }
    c.migrations.ended(m);
}

fn copy_and_hand_over(ks: &Keyspace, c: &Cluster, m: &Migration) -> Result<(), String> {
    let password = c.admin_password.as_deref();
    let mut link = Link::connect(&m.target_addr, password, c.link_tls.get(), LINK_TIMEOUT)?;
    let slots_text = m.slots.render();
    let receive: [&[u8]; 5] =
        [b"STRATA.MIGRATE", b"RECEIVE", m.mid.as_bytes(), m.source.as_bytes(), slots_text.as_bytes()];
    link.call(&receive)?.map_err(|e| format!("the target refused the migration: {e}"))?;
    let held = Held { gauge: &c.migrations.buffers, bytes: 0 };
    let mut sender = Sender { ks, m, c, link: &mut link, batch: Vec::new(), bytes: 0, batches: 0, in_hand: 0, held };
    let result = (|| {
        snapshot(&mut sender)?;
        m.set_state(State::Streaming);
        hooks::crash_point("migrate-streaming");
        let mut left = Vec::new();
        for _ in 0..MAX_PASSES {
            let changed = changed_keys(ks, m)?;
            if changed.len() <= FINAL_DELTA {
                left = changed;
                break;
            }
            for chunk in changed.chunks(BATCH_KEYS) {
                sender.keys(chunk)?;
            }
            sender.flush()?;
        }
        Ok::<_, String>(left)
    })();
    let left = match result {
        Ok(left) => left,
        Err(e) => {
            cancel_on_target(c, m);
            return Err(e);
        }
    };
    hand_over(ks, c, m, sender, left)
}

/// Tells the target to drop what it staged (best effort: an import nobody
/// finishes is dropped anyway after `IMPORT_IDLE`, or when this source
/// starts another).
fn cancel_on_target(c: &Cluster, m: &Migration) {
    let cancel: [&[u8]; 3] = [b"STRATA.MIGRATE", b"CANCEL", m.mid.as_bytes()];
    if let Ok(mut l) = Link::connect(&m.target_addr, c.admin_password.as_deref(), c.link_tls.get(), LINK_TIMEOUT) {
        let _ = l.call(&cancel);
    }
}

/// Step 1–4 of the module's handover.
fn hand_over(
    ks: &Keyspace,
    c: &Cluster,
    m: &Migration,
    mut sender: Sender<'_>,
    left: Vec<Box<[u8]>>,
) -> Result<(), String> {
    let record = Move {
        mid: m.mid.clone(),
        from: m.source.clone(),
        to: m.target.clone(),
        slots: m.slots.clone(),
        state: MoveState::Handover,
    };
    c.amend(|t| {
        // Checked under the lock pushes take: none moved the slots away.
        if let Some(s) = m.slots.iter().find(|&s| t.route(s) != Route::Mine) {
            return Err(format!("slot {s} is no longer this node's (a push moved it)"));
        }
        let mut t = t.clone();
        t.moves.push(record);
        Ok(t)
    })
    .inspect_err(|_| cancel_on_target(c, m))?;
    m.set_state(State::Handover);
    let sealed = Instant::now();
    ks.seal_slots(&m.slots);
    let committed = (|| {
        let mut last = left;
        last.extend(changed_keys(ks, m)?);
        for chunk in last.chunks(BATCH_KEYS) {
            sender.keys(chunk)?;
        }
        sender.flush()?;
        hooks::crash_point("migrate-handover");
        let commit: [&[u8]; 3] = [b"STRATA.MIGRATE", b"COMMIT", m.mid.as_bytes()];
        match sender.link.call(&commit)? {
            Ok(_) => Ok(true),
            Err(e) => Err(format!("the target did not commit: {e}")),
        }
    })();
    let committed = match committed {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(mid = %m.mid, error = %e, "migration: the handover was interrupted; asking the target whether it committed");
            resolve(c, m)
        }
    };
    let outcome = finish_handover(c, m, committed);
    ks.unseal_slots(&m.slots);
    let paused = sealed.elapsed();
    m.paused_ms.store(paused.as_millis() as u64, Relaxed);
    c.migrations.stats.paused_ns.fetch_add(paused.as_nanos() as u64, Relaxed);
    outcome
}

/// Records the handover's outcome on the volume and in the layout.
fn finish_handover(c: &Cluster, m: &Migration, committed: bool) -> Result<(), String> {
    if committed {
        // Until this is recorded the slots stay sealed (a failure here
        // leaves them waiting, not served twice; a restart resolves it).
        loop {
            let done = c.amend(|t| {
                let mut t = t.with_slots_moved(&m.slots, &m.target)?;
                for mv in t.moves.iter_mut().filter(|mv| mv.mid == m.mid) {
                    mv.state = MoveState::Committed;
                }
                Ok(t)
            });
            match done {
                Ok(()) => break,
                Err(e) => {
                    tracing::error!(mid = %m.mid, error = %e, "migration: cannot record the commit; retrying");
                    std::thread::sleep(Duration::from_secs(1));
                }
            }
        }
        hooks::crash_point("migrate-source-committed");
        m.set_state(State::Committed);
        Ok(())
    } else {
        c.amend(|t| {
            let mut t = t.clone();
            t.moves.retain(|mv| mv.mid != m.mid);
            Ok(t)
        })?;
        Err("the target did not commit (it cancelled the import)".into())
    }
}

/// Finds out whether the target committed `m`: asks it to cancel, until it
/// answers. True: it has committed.
fn resolve(c: &Cluster, m: &Migration) -> bool {
    let cancel: [&[u8]; 3] = [b"STRATA.MIGRATE", b"CANCEL", m.mid.as_bytes()];
    let mut wait = Duration::from_millis(100);
    loop {
        let answer = Link::connect(&m.target_addr, c.admin_password.as_deref(), c.link_tls.get(), LINK_TIMEOUT)
            .and_then(|mut l| l.call(&cancel));
        match answer {
            Ok(Ok(_)) => return false,
            Ok(Err(e)) if e.contains("has committed") => return true,
            Ok(Err(e)) | Err(e) => {
                tracing::warn!(mid = %m.mid, error = %e, "migration: cannot learn the handover's outcome from the target yet; the slots wait");
            }
        }
        std::thread::sleep(wait);
        wait = (wait * 2).min(Duration::from_secs(2));
    }
}

/// A source restarted with a handover on its volume: finds out its outcome
/// (the slots wait meanwhile), as `run_source` would have.
pub fn resolve_after_restart(ks: &Keyspace, c: &Cluster) {
    let Some(t) = c.current() else { return };
    let me = t.me().id.clone();
    for mv in t.moves.iter().filter(|mv| mv.state == MoveState::Handover && mv.from == me) {
        let addr = t.members.iter().find(|x| x.id == mv.to).map(|x| x.admin_addr.to_string()).unwrap_or_default();
        let m = Arc::new(Migration::new(&mv.mid, Role::Source, &me, &mv.to, &addr, mv.slots.clone()));
        m.set_state(State::Handover);
        c.migrations.add(m.clone());
        tracing::info!(mid = %m.mid, slots = %m.slots.render(), "migration: restarted in a handover; asking the target whether it committed");
        ks.seal_slots(&m.slots);
        let committed = resolve(c, &m);
        let r = finish_handover(c, &m, committed);
        ks.unseal_slots(&m.slots);
        if let Err(e) = r {
            m.fail(State::Failed, &e);
        }
        tracing::info!(mid = %m.mid, state = m.state().name(), "migration: handover resolved");
        c.migrations.ended(&m);
    }
}

/// The keys of `m`'s slots changed since the last call.
fn changed_keys(ks: &Keyspace, m: &Migration) -> Result<Vec<Box<[u8]>>, String> {
    if m.cancel.load(Relaxed) {
        return Err("cancelled".into());
    }
    let (changed, flushed) = ks.take_changed(&m.slots);
    if flushed {
        return Err("a database was flushed or swapped during the migration; start it again".into());
    }
    Ok(changed)
}

/// Every key of the slots, partition by partition.
fn snapshot(s: &mut Sender<'_>) -> Result<(), String> {
    let (ks, m) = (s.ks, s.m);
    let mut parts: Vec<u32> = m.slots.iter().map(|slot| ks.partition_of_slot(slot)).collect();
    parts.sort_unstable();
    parts.dedup();
    for idx in parts {
        let names = ks.export_names(idx, &m.slots);
        for chunk in names.indexed.chunks(BATCH_KEYS) {
            s.keys(chunk)?;
        }
        // Keys known by their record only. A record that moved meanwhile
        // (the cleaner rewrote it) is looked for again below.
        let mut seen: std::collections::HashSet<_> = names.forgotten.iter().copied().collect();
        let mut todo = names.forgotten;
        for _round in 0..4 {
            let mut missed = false;
            for chunk in loc_chunks(&todo) {
                s.reserve(chunk.iter().map(|l| l.len as usize).sum());
                let found = ks.export_forgotten_all(chunk, &m.slots, crate::store::now_ms());
                s.took(found.iter().flatten().map(|(_, state)| state));
                for found in found {
                    match found {
                        Some((key, state)) => s.state(&key, state)?,
                        None => missed = true,
                    }
                }
            }
            if !missed {
                break;
            }
            todo = ks.export_names(idx, &m.slots).forgotten.into_iter().filter(|l| seen.insert(*l)).collect();
        }
        if m.cancel.load(Relaxed) {
            return Err("cancelled".into());
        }
    }
    s.flush()
}

/// Batches keys to the target and counts them.
struct Sender<'a> {
    ks: &'a Keyspace,
    m: &'a Migration,
    c: &'a Cluster,
    link: &'a mut Link,
    /// Keys in the batch, for the test hook that deletes them early.
    batch: Vec<Vec<u8>>,
    bytes: usize,
    batches: usize,
    /// Bytes of the exported values not queued yet.
    in_hand: usize,
    /// Those and the link's buffers, in the node's gauge.
    held: Held<'a>,
}

impl Sender<'_> {
    /// Keys' current states, their values on disk read together.
    fn keys(&mut self, mut keys: &[Box<[u8]>]) -> Result<(), String> {
        while !keys.is_empty() {
            self.reserve(EXPORT_BYTES);
            let states = self.ks.export_keys(keys, crate::store::now_ms(), EXPORT_BYTES);
            self.took(states.iter());
            let n = states.len();
            for (key, state) in keys.iter().zip(states) {
                self.state(key, state)?;
            }
            keys = &keys[n..];
        }
        Ok(())
    }

    /// Counts `bytes` about to be read or encoded as held, before they are
    /// (so no calibration sees them as data).
    fn reserve(&mut self, bytes: usize) {
        self.held.set(self.in_hand + bytes + self.link.buffer_capacity());
    }

    /// Exported states now in hand, to be sent by `state`.
    fn took<'s>(&mut self, states: impl Iterator<Item = &'s Exported>) {
        self.in_hand += states.map(Exported::payload_len).sum::<usize>();
        self.held.set(self.in_hand + self.link.buffer_capacity());
    }

    fn state(&mut self, key: &[u8], state: Exported) -> Result<(), String> {
        debug_assert!(self.m.slots.contains(key_slot(key)));
        self.in_hand = self.in_hand.saturating_sub(state.payload_len());
        match state {
            Exported::Value { payload, expire_at } => {
                let ttl = expire_at.to_string();
                self.bytes += payload.len();
                self.link.queue(&[b"RESTORE", key, ttl.as_bytes(), &payload, b"REPLACE", b"ABSTTL"]);
            }
            Exported::Missing => self.link.queue(&[b"DEL", key]),
        }
        self.held.set(self.in_hand + self.link.buffer_capacity());
        self.batch.push(key.to_vec());
        if self.batch.len() >= BATCH_KEYS || self.link.queued_bytes() >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), String> {
        if self.batch.is_empty() {
            return Ok(());
        }
        self.link.flush()?;
        for _ in 0..self.batch.len() {
            if let Err(e) = self.link.read()? {
                return Err(format!("the target refused a key: {e}"));
            }
        }
        let n = self.batch.len() as u64;
        self.m.keys.fetch_add(n, Relaxed);
        self.m.bytes.fetch_add(self.bytes as u64, Relaxed);
        let stats = &self.c.migrations.stats;
        stats.keys[0].fetch_add(n, Relaxed);
        stats.bytes[0].fetch_add(self.bytes as u64, Relaxed);
        if hooks::migrate_delete_early() {
            delete_keys(self.ks, &self.batch);
        }
        self.batch.clear();
        self.bytes = 0;
        self.batches += 1;
        if self.batches == 1 {
            hooks::crash_point("migrate-snapshot");
        }
        let delay = hooks::migrate_batch_delay();
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        Ok(())
    }
}

/// Records to read together: `BATCH_KEYS` or `EXPORT_BYTES` (and one
/// record) at most.
fn loc_chunks(locs: &[ColdLoc]) -> impl Iterator<Item = &[ColdLoc]> {
    let mut rest = locs;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (mut n, mut bytes) = (0, 0);
        while n < rest.len() && n < BATCH_KEYS && bytes < EXPORT_BYTES {
            bytes += rest[n].len as usize;
            n += 1;
        }
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        Some(chunk)
    })
}

/// Bytes a migration holds, mirrored in the node's gauge until dropped.
struct Held<'a> {
    gauge: &'a BufferGauge,
    bytes: usize,
}

impl Held<'_> {
    fn set(&mut self, bytes: usize) {
        self.gauge.resize(self.bytes, bytes);
        self.bytes = bytes;
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.set(0);
    }
}

/// Deletes keys of database 0 through the mutation funnel (journaled).
fn delete_keys(ks: &Keyspace, keys: &[Vec<u8>]) -> usize {
    let stats = StoreStats::default();
    let mut deleted = 0;
    for k in keys {
        let mut access = KeyAccess {
            ks,
            locked: ks.lock_one(ks.partition_of_key(k)),
            db: 0,
            now_ms: crate::store::now_ms(),
            touch: false,
            stats: &stats,
        };
        deleted += access.delete(k) as usize;
        access.serve_ready();
    }
    deleted
}

// ------------------------------------------------------------------ target

/// Registers an import on this node (STRATA.MIGRATE RECEIVE).
pub fn receive(
    ks: &Keyspace,
    c: &Cluster,
    mid: &str,
    source: &str,
    slots: &str,
) -> Result<(Arc<Migration>, Arc<SlotSet>), String> {
    if !valid_mid(mid) {
        return Err("ERR a migration id is 1 to 64 characters of [A-Za-z0-9._-]".into());
    }
    let slots = SlotSet::parse(slots).map_err(|e| format!("ERR {e}"))?;
    let t = c.current().ok_or("ERR no topology yet")?;
    if !t.members.iter().any(|m| m.id == source) {
        return Err(format!("ERR unknown node {source}"));
    }
    if let Some(s) = slots.iter().find(|&s| t.route(s) == Route::Mine) {
        return Err(format!("ERR slot {s} is already served by this node"));
    }
    // A source runs one migration at a time: an import of its still
    // staged here is one it gave up (it restarted, or failed): superseded.
    let stale: Vec<String> = c
        .migrations
        .list
        .lock()
        .iter()
        .filter(|m| m.role == Role::Target && !m.state().ended() && m.source == source)
        .map(|m| m.mid.clone())
        .collect();
    for old in stale {
        tracing::info!(old = %old, new = mid, "migration: a new import from the same source supersedes a staged one");
        cancel(ks, c, &old)?;
    }
    let committed = c.migrations.find(mid).is_some_and(|m| m.state() == State::Committed);
    if committed || recorded_status(c, mid).is_some() {
        return Err(format!("ERR migration {mid} has committed"));
    }
    let staged = c.migrations.staged_slots();
    if let Some(s) = slots.iter().find(|&s| staged.contains(s)) {
        return Err(format!("ERR slot {s} is being imported by another migration"));
    }
    let m = Arc::new(Migration::new(mid, Role::Target, source, &t.me().id, "", slots.clone()));
    m.set_state(State::Streaming);
    c.migrations.add(m.clone());
    tracing::info!(mid, source, slots = %slots.render(), "migration: receiving");
    Ok((m, Arc::new(slots)))
}

/// The commit point (STRATA.MIGRATE COMMIT): `make_durable` covers every
/// key received; then the slots are recorded as this node's.
pub fn commit(c: &Cluster, mid: &str, make_durable: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    let m = c.migrations.find(mid).filter(|m| m.role == Role::Target);
    let Some(m) = m else {
        return match recorded_status(c, mid) {
            Some(_) => Ok(()),
            None => Err(format!("ERR unknown migration {mid}")),
        };
    };
    let _one = m.commit.lock();
    match m.state() {
        State::Committed => return Ok(()),
        State::Aborted | State::Failed => return Err(format!("ERR migration {mid} was cancelled")),
        _ => {}
    }
    hooks::crash_point("migrate-target-commit");
    make_durable().map_err(|e| format!("ERR cannot make the migrated keys durable: {e}"))?;
    let record = Move {
        mid: m.mid.clone(),
        from: m.source.clone(),
        to: m.target.clone(),
        slots: m.slots.clone(),
        state: MoveState::Committed,
    };
    c.amend(|t| {
        let mut t = t.with_slots_moved(&m.slots, &m.target)?;
        t.moves.push(record);
        Ok(t)
    })
    .map_err(|e| format!("ERR cannot record the migration: {e}"))?;
    hooks::crash_point("migrate-target-committed");
    m.set_state(State::Committed);
    c.migrations.ended(&m);
    tracing::info!(mid, keys = m.keys.load(Relaxed), slots = %m.slots.render(), "migration: committed; this node serves the slots");
    Ok(())
}

/// STRATA.MIGRATE CANCEL: before the commit, the source keeps its slots
/// and the target drops what it staged; after it, an error that says so.
pub fn cancel(ks: &Keyspace, c: &Cluster, mid: &str) -> Result<(), String> {
    let committed = || Err(format!("ERR migration {mid} has committed"));
    let Some(m) = c.migrations.find(mid) else {
        return match recorded_status(c, mid) {
            Some(s) if s.iter().any(|(k, v)| *k == "state" && v == "committed") => committed(),
            // A source's handover being resolved: not cancellable.
            Some(_) => Err(format!("ERR migration {mid} is in its handover")),
            // Never seen, or staged before a restart (dropped then).
            None => Ok(()),
        };
    };
    match m.role {
        Role::Source => match m.state() {
            State::Committed => committed(),
            State::Handover => Err(format!("ERR migration {mid} is in its handover")),
            _ => {
                m.cancel.store(true, Relaxed);
                Ok(())
            }
        },
        Role::Target => {
            let _one = m.commit.lock();
            match m.state() {
                State::Committed => committed(),
                State::Aborted | State::Failed => Ok(()),
                _ => {
                    m.fail(State::Aborted, "cancelled");
                    c.migrations.ended(&m);
                    let dropped = drop_keys_of(ks, &m.slots);
                    tracing::info!(mid, keys = dropped, "migration: import cancelled; the staged keys are dropped");
                    Ok(())
                }
            }
        }
    }
}

/// After a push: an outgoing migration whose slots the new layout no
/// longer gives this node is cancelled (the operator changed its mind).
pub fn after_push(c: &Cluster) {
    let Some(t) = c.current() else { return };
    for m in c.migrations.list.lock().iter() {
        if m.role == Role::Source
            && matches!(m.state(), State::Snapshot | State::Streaming)
            && m.slots.iter().any(|s| t.route(s) != Route::Mine)
        {
            tracing::warn!(mid = %m.mid, "migration: a pushed topology took its slots elsewhere; cancelling it");
            m.cancel.store(true, Relaxed);
        }
    }
}

/// Drops imports that stopped receiving (their source gave up or died).
pub fn expire_idle_imports(ks: &Keyspace, c: &Cluster) {
    let now = crate::store::now_ms();
    let idle: Vec<String> = c
        .migrations
        .list
        .lock()
        .iter()
        .filter(|m| m.role == Role::Target && !m.state().ended())
        .filter(|m| now.saturating_sub(m.last_activity_ms.load(Relaxed)) > IMPORT_IDLE.as_millis() as u64)
        .map(|m| m.mid.clone())
        .collect();
    for mid in idle {
        tracing::warn!(mid = %mid, "migration: no key received for {} s; dropping the import", IMPORT_IDLE.as_secs());
        let _ = cancel(ks, c, &mid);
    }
}

// ------------------------------------------------------------------ release

/// Deletes the keys of slots this node does not serve (through the
/// mutation funnel, so its log has the deletes): after a push, and at
/// start. Kept: slots staged by an import, and a committed migration's
/// slots until a pushed epoch confirms it (the source's copy outlives the
/// handover until then), or whose handover is undecided.
pub fn drop_unserved(ks: &Keyspace, c: &Cluster) -> usize {
    let _one = c.migrations.releasing.lock();
    let Some(t) = c.current() else { return 0 };
    let mut keep = c.migrations.staged_slots();
    for mv in &t.moves {
        for s in mv.slots.iter() {
            keep.insert(s);
        }
    }
    let counts = ks.slot_key_counts();
    let unserved: Vec<(u16, u16)> = (0..SLOTS as u16)
        .filter(|&s| counts[s as usize] > 0 && t.route(s) != Route::Mine && !keep.contains(s))
        .map(|s| (s, s))
        .collect();
    if unserved.is_empty() {
        return 0;
    }
    let gone = SlotSet::from_ranges(&unserved);
    // Sealed meanwhile: should a push give a slot back before its keys are
    // gone, its commands wait rather than see a stale key (or have a new
    // write deleted).
    let started = Instant::now();
    ks.seal_slots(&gone);
    let deleted = drop_keys_of(ks, &gone);
    ks.unseal_slots(&gone);
    tracing::info!(
        keys = deleted,
        slots = gone.len(),
        ms = started.elapsed().as_millis() as u64,
        "deleted the keys of slots this node no longer serves"
    );
    deleted
}

/// Deletes every key of `slots` (database 0), those known only on disk too.
fn drop_keys_of(ks: &Keyspace, slots: &SlotSet) -> usize {
    let mut parts: Vec<u32> = slots.iter().map(|s| ks.partition_of_slot(s)).collect();
    parts.sort_unstable();
    parts.dedup();
    let mut deleted = 0;
    let mut halfway = false;
    for idx in parts {
        let names = ks.export_names(idx, slots);
        let mut keys: Vec<Vec<u8>> = names.indexed.iter().map(|k| k.to_vec()).collect();
        for chunk in loc_chunks(&names.forgotten) {
            keys.extend(ks.export_forgotten_all(chunk, slots, 0).into_iter().flatten().map(|(key, _)| key));
        }
        deleted += delete_keys(ks, &keys);
        if !halfway && deleted > 0 {
            halfway = true;
            hooks::crash_point("migrate-release");
        }
    }
    deleted
}
