//! Cluster mode, part 2 (issue 23): the resharding plan kept in `status.resharding`, and the
//! pure steps that advance it. Each reconcile asks the sources of running moves where they
//! stand, confirms committed moves with a topology epoch, and starts the next moves; the plan
//! lives in the status, so a restarted operator carries on where the last one stopped.
//!
//! The I/O (STATUS, START, pushes) is in `super::reconcile_topology`; everything here is pure.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::api::{CacheClusterStatus, MoveState, ReshardingStatus, SlotMove};
use crate::topology::migrate::{MigrationReport, Phase};
use crate::topology::plan::{self, Move, parse_ranges, render_ranges};
use crate::topology::{NodeId, Reported, SlotRange, spread};

/// How the operator paces migrations (operator flags `--max-concurrent-migrations`,
/// `--migration-batch-slots`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Most migrations running at once in one CacheCluster (never two from the same source).
    pub max_concurrent: usize,
    /// Most slots per migration.
    pub batch: u32,
}

impl Default for Options {
    fn default() -> Self {
        Self { max_concurrent: 1, batch: plan::DEFAULT_BATCH }
    }
}

/// Something worth an Event on the CacheCluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub warning: bool,
    pub reason: &'static str,
    pub note: String,
}

impl Notice {
    fn normal(reason: &'static str, note: String) -> Self {
        Self { warning: false, reason, note }
    }
}

/// Event reasons.
pub mod reason {
    pub const STARTED: &str = "ReshardingStarted";
    pub const SLOTS_MOVED: &str = "SlotsMoved";
    pub const DONE: &str = "ReshardingDone";
    pub const FAILED: &str = "MigrationFailed";
}

/// The slots each ordinal owns in the last pushed topology as the status records it; when the
/// status has no record, what the nodes report (the highest epoch), and for a new cluster the
/// even spread over `width`. At least `width` entries.
pub fn layout_of_record(
    status: &CacheClusterStatus,
    reported: Option<&Reported>,
    uid: &str,
    width: usize,
) -> Vec<Vec<SlotRange>> {
    let mut layout = recorded_layout(status)
        .or_else(|| reported.map(|r| layout_of_reported(r, uid)))
        .unwrap_or_else(|| spread(width));
    if layout.len() < width {
        layout.resize(width, Vec::new());
    }
    layout
}

/// The layout in `status.nodes`; an operator before issue 23 recorded no slots, but always
/// pushed the even spread over `status.shards`.
fn recorded_layout(status: &CacheClusterStatus) -> Option<Vec<Vec<SlotRange>>> {
    if status.nodes.is_empty() || status.topology_epoch.unwrap_or(0) == 0 {
        return None;
    }
    let slots: Option<Vec<Vec<SlotRange>>> =
        status.nodes.iter().map(|n| n.slots.as_deref().and_then(|s| parse_ranges(s).ok())).collect();
    slots.or_else(|| Some(spread(status.shards.unwrap_or(status.nodes.len() as i32).max(1) as usize)))
}

/// A node's report mapped to ordinals (ids are sha1("<uid>/<ordinal>")).
fn layout_of_reported(reported: &Reported, uid: &str) -> Vec<Vec<SlotRange>> {
    let mut layout = vec![Vec::new(); reported.nodes.len()];
    for node in &reported.nodes {
        if let Some(o) = (0..reported.nodes.len() as u32 * 2).find(|&o| NodeId::of_pod(uid, o) == node.id) {
            if layout.len() <= o as usize {
                layout.resize(o as usize + 1, Vec::new());
            }
            layout[o as usize] = node.slots.clone();
        }
    }
    layout
}

/// How many pods the topology has as members: `spec.replicas`, and every ordinal beyond it
/// that still owns slots or takes part in the plan (it is drained first).
pub fn topology_width(spec_replicas: i32, status: &CacheClusterStatus) -> usize {
    let owning = recorded_layout(status).map_or(0, |l| l.iter().rposition(|s| !s.is_empty()).map_or(0, |o| o + 1));
    let planned = status.resharding.iter().flat_map(|p| &p.moves).filter(|m| m.state != MoveState::Done);
    let planned = planned.map(|m| m.source.max(m.target) as usize + 1).max().unwrap_or(0);
    (spec_replicas.max(1) as usize).max(owning).max(planned)
}

/// The replicas the StatefulSet may run: the topology's members, and also every pod of the
/// last pushed topology until that epoch is applied on every node. A pod that owns slots, or
/// still figures in a topology some node runs, is never deleted (nor its volume released).
/// `current`: the StatefulSet's replicas now.
pub fn statefulset_replicas(spec_replicas: i32, status: &CacheClusterStatus, current: Option<i32>) -> i32 {
    let width = topology_width(spec_replicas, status) as i32;
    let members = status.nodes.len() as i32;
    let applied_everywhere = status.topology_epoch.is_some_and(|e| e > 0)
        && status.nodes.iter().all(|n| n.applied_epoch == status.topology_epoch);
    let keep = if applied_everywhere { members } else { members.max(current.unwrap_or(0)) };
    width.max(keep)
}

/// The moves the target owns but the topology does not say yet (committed, unconfirmed).
pub fn committed(plan: Option<&ReshardingStatus>) -> Vec<Move> {
    plan.iter().flat_map(|p| &p.moves).filter(|m| m.state == MoveState::Committed).filter_map(as_move).collect()
}

fn as_move(m: &SlotMove) -> Option<Move> {
    Some(Move { source: m.source as u32, target: m.target as u32, slots: parse_ranges(&m.slots).ok()? })
}

/// A new plan from `layout` to `shards` shards, or `None` when the layout is already even.
pub fn new_plan(
    layout: &[Vec<SlotRange>],
    shards: i32,
    epoch: u64,
    options: Options,
    now: Timestamp,
) -> Option<ReshardingStatus> {
    let moves = plan::plan(layout, shards.max(1) as u32, None, options.batch);
    if moves.is_empty() {
        return None;
    }
    let id = format!("p{epoch}");
    let total = moves.iter().map(Move::slot_count).sum::<u32>() as i32;
    let moves = moves
        .iter()
        .enumerate()
        .map(|(i, m)| SlotMove {
            id: migration_id(&id, i, m.source, m.target, 1),
            source: m.source as i32,
            target: m.target as i32,
            slots: render_ranges(&m.slots),
            state: MoveState::Pending,
            attempts: 0,
            error: None,
            retry_at: None,
            keys: None,
        })
        .collect();
    Some(ReshardingStatus { plan: id, shards, moves, slots_moved: 0, slots_total: total, started_at: Time(now) })
}

/// `<plan>-s<source>-t<target>-<move number>`, with `.<attempt>` from the second attempt on (a
/// failed migration's id is not reused: the node may still report the failure under it).
fn migration_id(plan: &str, index: usize, source: u32, target: u32, attempt: i32) -> String {
    let base = format!("{plan}-s{source}-t{target}-{}", index + 1);
    if attempt > 1 { format!("{base}.{attempt}") } else { base }
}

/// The ReshardingStarted note.
pub fn started_note(plan: &ReshardingStatus, pods: &dyn Fn(i32) -> String) -> String {
    let mut routes: Vec<String> = Vec::new();
    for m in &plan.moves {
        let route = format!("{} -> {}", pods(m.source), pods(m.target));
        if !routes.contains(&route) {
            routes.push(route);
        }
    }
    format!(
        "Plan {}: {} slots in {} migrations to even out {} shards ({})",
        plan.plan,
        plan.slots_total,
        plan.moves.len(),
        plan.shards,
        routes.join(", ")
    )
}

/// Moves a running move on from what its source reports (`Err`: no answer; it is asked again).
pub fn on_report(mv: &mut SlotMove, report: Result<Option<MigrationReport>, String>, now: Timestamp) -> Option<Notice> {
    let report = report.ok()?;
    match report {
        Some(r) if r.id == mv.id && r.phase == Phase::Committed => {
            mv.state = MoveState::Committed;
            mv.keys = Some(r.keys);
            mv.error = None;
            None
        }
        Some(r) if r.id == mv.id && r.phase.in_flight() => None,
        Some(r) if r.id == mv.id && !r.error.is_empty() => Some(fail(mv, &r.error, now)),
        Some(r) if r.id == mv.id => Some(fail(mv, &format!("the source reports it {:?}", r.phase), now)),
        _ => Some(fail(mv, "the source no longer knows it (restarted before the commit): it kept the slots", now)),
    }
}

/// After a START the source refused: the source's latest migration, when it is this very move
/// under another id (an earlier START whose status write was lost, e.g. the operator restarted
/// right after it), is adopted instead of failing the move forever with "already running" or
/// "slot N is not served by this node".
pub fn adopt(mv: &mut SlotMove, latest: &MigrationReport, target_id: &str) -> bool {
    if latest.target != target_id
        || latest.slots != mv.slots
        || !(latest.phase.in_flight() || latest.phase == Phase::Committed)
    {
        return false;
    }
    mv.id = latest.id.clone();
    mv.error = None;
    mv.state = if latest.phase == Phase::Committed { MoveState::Committed } else { MoveState::Running };
    if latest.phase == Phase::Committed {
        mv.keys = Some(latest.keys);
    }
    true
}

/// A failed attempt: pending again after a backoff, with the node's reason.
pub fn fail(mv: &mut SlotMove, why: &str, now: Timestamp) -> Notice {
    let delay = retry_delay(mv.attempts);
    mv.state = MoveState::Pending;
    mv.error = Some(why.to_owned());
    mv.retry_at = Some(Time(now + delay));
    Notice {
        warning: true,
        reason: reason::FAILED,
        note: format!(
            "Migration {} of slots {} from ordinal {} to ordinal {} failed (attempt {}): {why}; retrying in {}s",
            mv.id,
            mv.slots,
            mv.source,
            mv.target,
            mv.attempts,
            delay.as_secs()
        ),
    }
}

/// 2 s after the first failure, doubling up to 2 minutes.
fn retry_delay(attempts: i32) -> SignedDuration {
    SignedDuration::from_secs(2i64 << attempts.clamp(1, 7).saturating_sub(1)).min(SignedDuration::from_secs(120))
}

/// Committed moves become Done once every member applied the epoch that gives their slots to
/// the target; one SlotsMoved notice each.
pub fn confirm(plan: &mut ReshardingStatus, epoch: u64, pods: &dyn Fn(i32) -> String) -> Vec<Notice> {
    let mut notes = Vec::new();
    for i in 0..plan.moves.len() {
        if plan.moves[i].state != MoveState::Committed {
            continue;
        }
        let mv = &mut plan.moves[i];
        mv.state = MoveState::Done;
        let count = parse_ranges(&mv.slots).map_or(0, |r| r.iter().map(SlotRange::len).sum::<u32>());
        plan.slots_moved += count as i32;
        let mv = &plan.moves[i];
        notes.push(Notice::normal(
            reason::SLOTS_MOVED,
            format!(
                "Moved slots {} from {} to {} ({} keys), confirmed by topology epoch {epoch}: {}/{} slots of plan {}",
                mv.slots,
                pods(mv.source),
                pods(mv.target),
                mv.keys.unwrap_or(0),
                plan.slots_moved,
                plan.slots_total,
                plan.plan
            ),
        ));
    }
    notes
}

/// No move left to run or confirm.
pub fn finished(plan: &ReshardingStatus) -> bool {
    plan.moves.iter().all(|m| m.state == MoveState::Done)
}

/// Some move is between START and its confirming epoch: the plan cannot be dropped.
pub fn in_flight(plan: &ReshardingStatus) -> bool {
    plan.moves.iter().any(|m| matches!(m.state, MoveState::Running | MoveState::Committed))
}

/// The moves to start now: pending ones whose retry time has come, in plan order, while fewer
/// than `max_concurrent` run and never two from the same source (a node sends one migration
/// at a time). Nothing starts while a move waits for its confirming epoch.
pub fn startable(plan: &ReshardingStatus, now: Timestamp, max_concurrent: usize) -> Vec<usize> {
    if plan.moves.iter().any(|m| m.state == MoveState::Committed) {
        return Vec::new();
    }
    let mut busy: Vec<i32> = plan.moves.iter().filter(|m| m.state == MoveState::Running).map(|m| m.source).collect();
    let mut out = Vec::new();
    for (i, m) in plan.moves.iter().enumerate() {
        if busy.len() >= max_concurrent.max(1) {
            break;
        }
        let due = m.retry_at.as_ref().is_none_or(|t| t.0 <= now);
        if m.state == MoveState::Pending && due && !busy.contains(&m.source) {
            busy.push(m.source);
            out.push(i);
        }
    }
    out
}

/// Marks move `i` as started with a fresh attempt id; the id to send.
pub fn begin(plan: &mut ReshardingStatus, i: usize) -> String {
    let id = plan.plan.clone();
    let mv = &mut plan.moves[i];
    mv.attempts += 1;
    mv.id = migration_id(&id, i, mv.source as u32, mv.target as u32, mv.attempts);
    mv.state = MoveState::Running;
    mv.retry_at = None;
    mv.id.clone()
}

/// The Resharding condition's message while a plan runs.
pub fn progress(plan: &ReshardingStatus) -> String {
    let running: Vec<String> = plan
        .moves
        .iter()
        .filter(|m| m.state == MoveState::Running)
        .map(|m| format!("{} from {} to {}", m.slots, m.source, m.target))
        .collect();
    let mut message =
        format!("moved {}/{} slots (plan {}, {} shards)", plan.slots_moved, plan.slots_total, plan.plan, plan.shards);
    if !running.is_empty() {
        message.push_str(&format!("; migrating {}", running.join(", ")));
    }
    if let Some(failed) = plan.moves.iter().find(|m| m.state == MoveState::Pending && m.error.is_some()) {
        message.push_str(&format!("; {} failed last time: {}", failed.id, failed.error.as_deref().unwrap_or("")));
    }
    message
}

/// Whether moving `slots` slots to a node is within its budget, from what the nodes report:
/// `source_used` bytes spread over `source_slots` slots (the moving share is estimated from
/// that average: per-slot byte counts are not in the node's protocol yet), `target_used` bytes
/// on the target, and the target's `budget` (RAM + disk tier). Unknown figures pass.
pub fn capacity_check(
    slots: u32,
    source_used: Option<u64>,
    source_slots: u32,
    target_used: Option<u64>,
    budget: Option<u64>,
) -> Result<(), String> {
    let (Some(source_used), Some(target_used), Some(budget)) = (source_used, target_used, budget) else {
        return Ok(());
    };
    if source_slots == 0 {
        return Ok(());
    }
    let moving = (u128::from(source_used) * u128::from(slots) / u128::from(source_slots)) as u64;
    if target_used.saturating_add(moving) > budget {
        return Err(format!(
            "about {moving} bytes would move onto a node holding {target_used} bytes of its {budget}-byte budget (RAM + \
             disk tier): raise maxMemory / storage.diskBudget, or scale to more shards"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::NodeStatus;

    fn node(i: usize, slots: &str, epoch: u64) -> NodeStatus {
        NodeStatus {
            pod: format!("demo-{i}"),
            id: format!("id{i}"),
            ip: Some(format!("10.0.0.{i}")),
            applied_epoch: Some(epoch),
            slots: Some(slots.to_owned()),
        }
    }

    fn status(nodes: Vec<NodeStatus>, epoch: u64) -> CacheClusterStatus {
        CacheClusterStatus {
            topology_epoch: Some(epoch),
            shards: Some(nodes.len() as i32),
            nodes,
            ..Default::default()
        }
    }

    fn now() -> Timestamp {
        Timestamp::from_second(1_000_000).unwrap()
    }

    #[test]
    fn a_new_cluster_is_the_even_spread_and_an_old_status_too() {
        let empty = CacheClusterStatus::default();
        assert_eq!(layout_of_record(&empty, None, "u", 3), spread(3));
        // Written before issue 23: no slots recorded, the spread over status.shards.
        let mut old = status(vec![node(0, "", 2), node(1, "", 2)], 2);
        old.nodes.iter_mut().for_each(|n| n.slots = None);
        assert_eq!(layout_of_record(&old, None, "u", 3), [spread(2), vec![vec![]]].concat());
        assert_eq!(topology_width(1, &old), 2, "a pod that owns slots stays a member");
    }

    #[test]
    fn scale_in_keeps_the_pods_until_they_are_drained_and_left_the_topology() {
        let four = status(
            vec![node(0, "0-4095", 5), node(1, "4096-8191", 5), node(2, "8192-12287", 5), node(3, "12288-16383", 5)],
            5,
        );
        // replicas 3 asked: ordinal 3 still owns slots.
        assert_eq!(topology_width(3, &four), 4);
        assert_eq!(statefulset_replicas(3, &four, Some(4)), 4);
        // Drained, but still a member of the topology the nodes run.
        let drained =
            status(vec![node(0, "0-5460", 6), node(1, "5461-10922", 6), node(2, "10923-16383", 6), node(3, "-", 6)], 6);
        assert_eq!(topology_width(3, &drained), 3, "the next topology leaves it out");
        assert_eq!(statefulset_replicas(3, &drained, Some(4)), 4);
        // The topology without it, applied by every node: the pod may go.
        let gone = status(vec![node(0, "0-5460", 7), node(1, "5461-10922", 7), node(2, "10923-16383", 7)], 7);
        assert_eq!(statefulset_replicas(3, &gone, Some(4)), 3);
        // ... but not while a node has not applied it.
        let mut lagging = gone.clone();
        lagging.nodes[1].applied_epoch = Some(6);
        assert_eq!(statefulset_replicas(3, &lagging, Some(4)), 4);
        // Scaling out grows at once.
        assert_eq!(statefulset_replicas(5, &gone, Some(3)), 5);
    }

    #[test]
    fn a_plan_runs_one_move_per_source_and_retries_failures_later() {
        let plan = new_plan(&spread(1), 3, 4, Options { max_concurrent: 2, batch: 4096 }, now()).unwrap();
        assert_eq!(plan.plan, "p4");
        assert_eq!(plan.slots_total, 10922, "node 0 keeps 5462");
        assert!(plan.moves.iter().all(|m| m.source == 0));
        assert_eq!(plan.moves[0].id, "p4-s0-t1-1");
        // One source: one move at a time even when two may run.
        let mut plan = plan;
        assert_eq!(startable(&plan, now(), 2), [0]);
        assert_eq!(begin(&mut plan, 0), "p4-s0-t1-1");
        assert!(startable(&plan, now(), 2).is_empty());
        // It fails: pending again, not before its retry time, with a new id.
        let report = MigrationReport {
            id: "p4-s0-t1-1".into(),
            phase: Phase::Failed,
            keys: 0,
            bytes: 0,
            elapsed_ms: 0,
            paused_ms: 0,
            target: "t1".into(),
            slots: plan.moves[0].slots.clone(),
            error: "ERR target unreachable".into(),
        };
        let notice = on_report(&mut plan.moves[0], Ok(Some(report.clone())), now()).unwrap();
        assert!(notice.warning && notice.note.contains("ERR target unreachable"), "{notice:?}");
        assert_eq!(plan.moves[0].state, MoveState::Pending);
        assert_eq!(startable(&plan, now(), 1), [1], "the next move goes first meanwhile");
        let later = now() + SignedDuration::from_secs(3);
        assert_eq!(startable(&plan, later, 1), [0]);
        assert_eq!(begin(&mut plan, 0), "p4-s0-t1-1.2");
        // Committed, then confirmed by an epoch.
        let committed = MigrationReport {
            id: "p4-s0-t1-1.2".into(),
            phase: Phase::Committed,
            keys: 42,
            error: String::new(),
            ..report
        };
        assert_eq!(on_report(&mut plan.moves[0], Ok(Some(committed)), later), None);
        assert_eq!(committed_moves_count(&plan), 1);
        assert!(startable(&plan, later, 2).is_empty(), "nothing starts before the confirming epoch");
        let notes = confirm(&mut plan, 9, &|o| format!("demo-{o}"));
        assert_eq!(notes.len(), 1);
        assert!(notes[0].note.contains("from demo-0 to demo-1 (42 keys)"), "{}", notes[0].note);
        assert_eq!(plan.slots_moved, 4096);
        assert!(!finished(&plan));
        assert!(progress(&plan).starts_with("moved 4096/10922 slots"), "{}", progress(&plan));
    }

    #[test]
    fn a_start_refused_because_it_already_ran_adopts_that_migration() {
        let mut plan = new_plan(&spread(1), 2, 1, Options::default(), now()).unwrap();
        begin(&mut plan, 0);
        // The operator restarted after START but before writing status: the retry's START is
        // refused, and the source's latest migration is this move under the first id.
        let latest = MigrationReport {
            id: "p1-s0-t1-1".into(),
            phase: Phase::Streaming,
            target: "t1".into(),
            slots: plan.moves[0].slots.clone(),
            keys: 0,
            bytes: 0,
            elapsed_ms: 0,
            paused_ms: 0,
            error: String::new(),
        };
        let mut retried = plan.moves[0].clone();
        retried.id = "p1-s0-t1-1.2".into();
        assert!(adopt(&mut retried, &latest, "t1"));
        assert_eq!((retried.id.as_str(), retried.state), ("p1-s0-t1-1", MoveState::Running));
        // Another move's migration, or a failed one, is not adopted.
        assert!(!adopt(&mut retried, &latest, "t2"));
        assert!(!adopt(&mut retried, &MigrationReport { phase: Phase::Failed, ..latest.clone() }, "t1"));
        let committed = MigrationReport { phase: Phase::Committed, keys: 9, ..latest };
        assert!(adopt(&mut retried, &committed, "t1"));
        assert_eq!((retried.state, retried.keys), (MoveState::Committed, Some(9)));
    }

    fn committed_moves_count(plan: &ReshardingStatus) -> usize {
        committed(Some(plan)).len()
    }

    #[test]
    fn an_unknown_migration_is_a_failure_and_no_answer_is_not() {
        let mut plan = new_plan(&spread(1), 2, 1, Options::default(), now()).unwrap();
        begin(&mut plan, 0);
        assert_eq!(on_report(&mut plan.moves[0], Err("timeout".into()), now()), None);
        assert_eq!(plan.moves[0].state, MoveState::Running);
        assert!(on_report(&mut plan.moves[0], Ok(None), now()).is_some());
        assert_eq!(plan.moves[0].state, MoveState::Pending);
    }

    #[test]
    fn capacity_is_checked_when_known() {
        assert!(capacity_check(1024, Some(16 << 20), 4096, Some(90 << 20), Some(100 << 20)).is_ok());
        let err = capacity_check(4096, Some(16 << 20), 4096, Some(90 << 20), Some(100 << 20)).unwrap_err();
        assert!(err.contains("budget"), "{err}");
        assert!(capacity_check(4096, None, 4096, Some(90 << 20), Some(100 << 20)).is_ok());
    }
}
