//! Pacing spec changes: the StatefulSet uses the `OnDelete` update strategy, and the operator
//! replaces one pod at a time through the Eviction API (which honours the PodDisruptionBudget),
//! waiting for each new pod to be Ready before touching the next. Pure decisions here; the
//! controller performs them.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, ContainerStatus, Pod};
use k8s_openapi::jiff::Timestamp;

/// Label the StatefulSet controller puts on each pod: the revision it was created from.
const REVISION_LABEL: &str = "controller-revision-hash";

/// Container states that mean a pod will not become Ready without help.
const STUCK_REASONS: &[&str] = &[
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

/// What to do next about the pods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Every pod runs the current revision.
    Complete,
    /// Nothing to do until `pod` changes (`why` says how).
    Waiting { pod: String, why: String },
    /// Replace this pod (it runs an old revision and it's safe to take it down now).
    Evict(String),
}

impl Step {
    /// A phrase for status messages.
    pub fn describe(&self) -> String {
        match self {
            Step::Complete => "rollout complete".to_owned(),
            Step::Waiting { pod, why } => format!("waiting for {pod} {why}"),
            Step::Evict(pod) => format!("replacing {pod}"),
        }
    }
}

/// Decides the next rollout step from the StatefulSet and its pods.
///
/// Rules: wait until the StatefulSet controller has seen the current spec; never take a pod down
/// while a pod at the new revision is not Ready (a bad spec must not eat the healthy pods); pods
/// at an old revision that are not Ready anyway go first (replacing them costs no capacity);
/// otherwise, when every pod is Ready, replace the highest ordinal still at an old revision.
/// Before all of these, the old pods named in `first` (cluster mode's `replaced_anyway`: the
/// operator cannot reach them, and only their replacement ends that).
pub fn next_step(sts: &StatefulSet, pods: &[Pod], first: &[String]) -> Step {
    let name = sts.metadata.name.as_deref().unwrap_or_default();
    let desired = sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0);
    let status = sts.status.as_ref();
    let seen = status.and_then(|s| s.observed_generation).unwrap_or(0) >= sts.metadata.generation.unwrap_or(0);
    let Some(update_revision) = status.and_then(|s| s.update_revision.as_deref()).filter(|_| seen) else {
        return Step::Waiting { pod: format!("StatefulSet {name}"), why: "to observe the new spec".to_owned() };
    };

    let mut ours: Vec<(i32, &Pod)> = pods.iter().filter_map(|p| ordinal(name, p).map(|o| (o, p))).collect();
    ours.sort_by_key(|(o, _)| *o);
    let current = |p: &Pod| at_revision(p, update_revision);

    if let Some((_, p)) = ours.iter().find(|(_, p)| terminating(p)) {
        return Step::Waiting { pod: pod_name(p), why: "to terminate".to_owned() };
    }
    if let Some((_, p)) = ours.iter().find(|(_, p)| current(p) && !ready(p)) {
        return Step::Waiting { pod: pod_name(p), why: "to become Ready".to_owned() };
    }
    let outdated: Vec<&Pod> = ours.iter().filter(|(_, p)| !current(p)).map(|(_, p)| *p).collect();
    if let Some(p) = outdated.iter().rev().find(|p| first.contains(&pod_name(p))) {
        return Step::Evict(pod_name(p));
    }
    if let Some(p) = outdated.iter().rev().find(|p| !ready(p)) {
        return Step::Evict(pod_name(p));
    }
    if (ours.len() as i32) < desired {
        let missing = (0..desired).find(|o| ours.iter().all(|(x, _)| x != o)).unwrap_or(0);
        return Step::Waiting { pod: format!("{name}-{missing}"), why: "to be created".to_owned() };
    }
    match outdated.last() {
        Some(p) => Step::Evict(pod_name(p)),
        None => Step::Complete,
    }
}

/// How long a pod may stay unschedulable before it counts as failing: a new pod waits briefly
/// for its volume to bind, and that is no reason to report the cluster Degraded.
const UNSCHEDULABLE_GRACE_SECONDS: i64 = 60;

/// Pods created from the StatefulSet's current (update) revision.
pub fn updated_pods(sts: &StatefulSet, pods: &[Pod]) -> i32 {
    let Some(update) = sts.status.as_ref().and_then(|s| s.update_revision.as_deref()) else { return 0 };
    pods.iter().filter(|p| at_revision(p, update)).count() as i32
}

fn at_revision(p: &Pod, revision: &str) -> bool {
    p.metadata.labels.as_ref().and_then(|l| l.get(REVISION_LABEL)).map(String::as_str) == Some(revision)
}

/// Why pods are stuck, as "<pod>: <reason> (<message>)", for the Degraded condition.
pub fn failing_pods(pods: &[Pod], now: Timestamp) -> Vec<String> {
    let mut out = Vec::new();
    for p in pods {
        let Some(status) = &p.status else { continue };
        // A crash loop with a last termination is told by `recent_restarts`, with the
        // container's own last words: the kubelet's back-off message says nothing about why.
        let waiting = status
            .container_statuses
            .iter()
            .flatten()
            .chain(status.init_container_statuses.iter().flatten())
            .filter(|c| !(crash_looping(c) && last_termination(c).is_some()))
            .filter_map(|c| c.state.as_ref()?.waiting.as_ref())
            .find(|w| w.reason.as_deref().is_some_and(|r| STUCK_REASONS.contains(&r)));
        if let Some(w) = waiting {
            let msg = w.message.as_deref().map(|m| format!(" ({})", truncate(m, 200))).unwrap_or_default();
            out.push(format!("{}: {}{msg}", pod_name(p), w.reason.as_deref().unwrap_or_default()));
            continue;
        }
        let unschedulable = status.conditions.iter().flatten().find(|c| {
            let since = c.last_transition_time.as_ref().map_or(now, |t| t.0);
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
                && now.as_second() - since.as_second() >= UNSCHEDULABLE_GRACE_SECONDS
        });
        if let Some(c) = unschedulable {
            let msg = c.message.as_deref().map(|m| format!(" ({})", truncate(m, 200))).unwrap_or_default();
            out.push(format!("{}: Unschedulable{msg}", pod_name(p)));
        }
    }
    out
}

/// How long after a container's last restart the cluster reports it (Degraded).
pub const RESTART_WINDOW_SECONDS: i64 = 600;

/// Longest excerpt of a container's last words carried into a condition or an Event.
pub const LAST_WORDS_MAX_CHARS: usize = 300;

/// A container of a pod that terminated and was restarted by the kubelet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Restart {
    pub pod: String,
    /// The pod's UID: a recreated pod counts its restarts from 0 again.
    pub pod_uid: String,
    pub container: String,
    /// The container's restart count (each restart is told once by it).
    pub count: i32,
    /// Why it last terminated, e.g. "OOMKilled", "Error".
    pub reason: String,
    pub exit_code: i32,
    /// Seconds since it last terminated.
    pub ago_seconds: i64,
    /// The last line of its termination message (with `FallbackToLogsOnError`, the tail of its
    /// log): the node's own fatal error, which says what to fix.
    pub last_words: Option<String>,
    /// Waiting in CrashLoopBackOff now: it keeps failing the same way.
    pub crash_looping: bool,
}

impl Restart {
    pub fn oom_killed(&self) -> bool {
        self.reason == "OOMKilled"
    }

    /// A phrase for the Degraded condition.
    pub fn describe(&self) -> String {
        let mut out = format!(
            "{}: container {} restarted {} time{}, last {} (exit code {}) {}s ago",
            self.pod,
            self.container,
            self.count,
            if self.count == 1 { "" } else { "s" },
            self.reason,
            self.exit_code,
            self.ago_seconds
        );
        if self.crash_looping {
            out.push_str(", now in CrashLoopBackOff");
        }
        if let Some(words) = &self.last_words {
            out.push_str(&format!(", its last log line: \"{words}\""));
        }
        out
    }
}

/// Containers that were restarted within [`RESTART_WINDOW_SECONDS`], or are crash-looping
/// however long ago they last ran: a restart must never pass as "no problems".
pub fn recent_restarts(pods: &[Pod], now: Timestamp) -> Vec<Restart> {
    let mut out = Vec::new();
    for p in pods {
        let Some(status) = &p.status else { continue };
        for c in status.container_statuses.iter().flatten() {
            let Some(last) = last_termination(c) else { continue };
            if c.restart_count == 0 {
                continue;
            }
            let finished = last.finished_at.as_ref().map_or(now, |t| t.0);
            let ago = now.as_second() - finished.as_second();
            let looping = crash_looping(c);
            if ago > RESTART_WINDOW_SECONDS && !looping {
                continue;
            }
            out.push(Restart {
                pod: pod_name(p),
                pod_uid: p.metadata.uid.clone().unwrap_or_default(),
                container: c.name.clone(),
                count: c.restart_count,
                reason: last.reason.clone().unwrap_or_else(|| "Terminated".to_owned()),
                exit_code: last.exit_code,
                ago_seconds: ago.max(0),
                // Killed from outside (the kernel's OOM killer, a failed liveness probe), the
                // node's last line is not why it stopped.
                last_words: last.message.as_deref().filter(|_| !killed_from_outside(last)).and_then(last_words),
                crash_looping: looping,
            });
        }
    }
    out
}

fn last_termination(c: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    c.last_state.as_ref()?.terminated.as_ref()
}

fn killed_from_outside(t: &ContainerStateTerminated) -> bool {
    // 128 + SIGKILL, 128 + SIGTERM.
    t.reason.as_deref() == Some("OOMKilled") || t.exit_code == 137 || t.exit_code == 143
}

fn crash_looping(c: &ContainerStatus) -> bool {
    c.state.as_ref().and_then(|s| s.waiting.as_ref()).and_then(|w| w.reason.as_deref()) == Some("CrashLoopBackOff")
}

/// The last non-empty line of a termination message, trimmed and at most
/// [`LAST_WORDS_MAX_CHARS`]. The node logs JSON in pods (`{"level":"ERROR","fields":{"message":
/// ...}}`): then its message and fields, without the timestamp and target.
pub fn last_words(message: &str) -> Option<String> {
    let line = message.lines().map(str::trim).rfind(|l| !l.is_empty())?;
    let text = match serde_json::from_str::<serde_json::Value>(line) {
        Ok(serde_json::Value::Object(record)) => {
            let fields = record.get("fields").and_then(|f| f.as_object());
            let text = |v: &serde_json::Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            let mut out = fields.and_then(|f| f.get("message")).map(text).unwrap_or_default();
            for (key, value) in fields.into_iter().flatten().filter(|(k, _)| *k != "message") {
                out.push_str(&format!(" {key}={}", text(value)));
            }
            if out.trim().is_empty() { line.to_owned() } else { out.trim().to_owned() }
        }
        _ => line.to_owned(),
    };
    Some(match text.char_indices().nth(LAST_WORDS_MAX_CHARS) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text,
    })
}

/// Whether the pods that are not Ready are all down because the operator's own rollout replaces
/// them, and which. `evicted` maps each pod the operator evicted to the UID it had then; `troubled`
/// names pods that crash or are stuck (a replacement that fails is no longer planned). A pod at
/// the update revision that is not Ready while others still wait for theirs is taken as the
/// rollout's too (the operator that evicted it may have restarted since).
pub fn planned_outage(
    sts: &StatefulSet,
    pods: &[Pod],
    evicted: &std::collections::BTreeMap<String, String>,
    troubled: &[String],
) -> Option<Vec<String>> {
    let name = sts.metadata.name.as_deref().unwrap_or_default();
    let desired = sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0);
    let update = sts.status.as_ref().and_then(|s| s.update_revision.as_deref());
    let rollout_midway = update.is_some_and(|u| pods.iter().any(|p| ordinal(name, p).is_some() && !at_revision(p, u)));
    let mut down = Vec::new();
    for o in 0..desired {
        let pod_name = format!("{name}-{o}");
        let pod = pods.iter().find(|p| p.metadata.name.as_deref() == Some(&pod_name));
        if pod.is_some_and(|p| ready(p) && !terminating(p)) {
            continue;
        }
        if troubled.contains(&pod_name) {
            return None;
        }
        let ours = match (pod, evicted.get(&pod_name)) {
            (None, Some(_)) => true,
            (Some(p), Some(uid)) => p.metadata.uid.as_ref() == Some(uid) || !terminating(p),
            (Some(p), None) => rollout_midway && update.is_some_and(|u| at_revision(p, u)) && !terminating(p),
            (None, None) => false,
        };
        if !ours {
            return None;
        }
        down.push(pod_name);
    }
    Some(down)
}

/// The pod's ordinal if it belongs to StatefulSet `sts` (`<sts>-<n>`).
fn ordinal(sts: &str, pod: &Pod) -> Option<i32> {
    pod.metadata.name.as_deref()?.strip_prefix(sts)?.strip_prefix('-')?.parse().ok()
}

fn pod_name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

fn terminating(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_some()
}

/// The pod's Ready condition is True.
pub fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Cluster mode: the pods at an old revision (the StatefulSet controller has seen the spec)
/// that `status` records as behind its topology epoch: those whose lag could hold up the
/// rollout, to be checked for being unreachable altogether.
pub fn lagging_old_pods(
    sts: &StatefulSet,
    pods: &[Pod],
    status: Option<&crate::api::v1alpha1::CacheClusterStatus>,
) -> Vec<String> {
    let name = sts.metadata.name.as_deref().unwrap_or_default();
    let seen =
        sts.status.as_ref().and_then(|s| s.observed_generation).unwrap_or(0) >= sts.metadata.generation.unwrap_or(0);
    let update = sts.status.as_ref().and_then(|s| s.update_revision.as_deref()).filter(|_| seen);
    let (Some(update), Some(status)) = (update, status) else { return Vec::new() };
    let Some(epoch) = status.topology_epoch else { return Vec::new() };
    pods.iter()
        .filter(|p| ordinal(name, p).is_some() && !terminating(p) && !at_revision(p, update))
        .map(pod_name)
        .filter(|pod| status.nodes.iter().any(|n| &n.pod == pod && n.applied_epoch != Some(epoch)))
        .collect()
}

/// Cluster mode with `spec.tls`: while the current spec's TLS Secret `secret_ref` cannot serve
/// (`why`: missing, not issued yet, no `ca.crt`...), no pod is replaced. Its replacement mounts
/// that Secret and runs `tls-cluster yes`, which needs the CA file: it could never start, and its
/// shard would stay down. An eviction becomes a wait for the Secret; any other step stands.
pub fn held_for_tls_secret(step: Step, secret_ref: &str, why: Option<&str>) -> Step {
    match (step, why) {
        (Step::Evict(_), Some(why)) => {
            Step::Waiting { pod: format!("the TLS Secret {secret_ref}"), why: format!("to be usable: {why}") }
        }
        (step, _) => step,
    }
}

/// Cluster mode: why a pod of a sharded cluster must not be replaced yet, if any. Its shard's
/// slots are unserved while it restarts, so only one at a time and only once the cluster has
/// settled: no slot migration under way (a pod taken down in the middle of one makes it fail
/// and start over), and every node on the current topology epoch (the previous pod is back,
/// at its new address, and everyone knows it). Except when `evicting` is itself one of
/// `replaced_anyway` (pods the operator cannot reach, e.g. because the TLS Secret they mount, an
/// earlier spec's, cannot serve; they would never apply the epoch, and only the rollout's
/// replacing them ends that): then those pods lagging do not hold it up. A healthy pod is never
/// replaced while one of them lags: it would move, and the lagging pods keep a stale topology.
pub fn cluster_unsettled(
    status: Option<&crate::api::v1alpha1::CacheClusterStatus>,
    evicting: &str,
    replaced_anyway: &[String],
) -> Option<String> {
    let exempt: &[String] = if replaced_anyway.iter().any(|p| p == evicting) { replaced_anyway } else { &[] };
    let status = status?;
    if let Some(r) = &status.resharding
        && r.slots_moved < r.slots_total
    {
        return Some(format!(
            "until the resharding ends (moved {}/{} slots): a pod is never replaced during a migration",
            r.slots_moved, r.slots_total
        ));
    }
    let epoch = status.topology_epoch?;
    let behind: Vec<&str> = status
        .nodes
        .iter()
        .filter(|n| n.applied_epoch != Some(epoch) && !exempt.contains(&n.pod))
        .map(|n| n.pod.as_str())
        .collect();
    (!behind.is_empty())
        .then(|| format!("until every node applies topology epoch {epoch} ({} not yet)", behind.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{StatefulSetSpec, StatefulSetStatus};
    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateWaiting, ContainerStatus, PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use std::collections::BTreeMap;

    const NONE: &[String] = &[];

    /// A node in the status that has applied `applied` (None: no answer).
    fn node(pod: &str, applied: Option<u64>) -> crate::api::v1alpha1::NodeStatus {
        crate::api::v1alpha1::NodeStatus {
            pod: pod.into(),
            id: "x".into(),
            ip: None,
            applied_epoch: applied,
            slots: None,
        }
    }

    fn sts(replicas: i32, generation: i64, observed: i64, update: &str) -> StatefulSet {
        StatefulSet {
            metadata: ObjectMeta { name: Some("demo".into()), generation: Some(generation), ..Default::default() },
            spec: Some(StatefulSetSpec { replicas: Some(replicas), ..Default::default() }),
            status: Some(StatefulSetStatus {
                observed_generation: Some(observed),
                update_revision: Some(update.into()),
                ..Default::default()
            }),
        }
    }

    fn pod(ordinal: i32, revision: &str, is_ready: bool) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(format!("demo-{ordinal}")),
                labels: Some(BTreeMap::from([(REVISION_LABEL.to_owned(), revision.to_owned())])),
                ..Default::default()
            },
            spec: None,
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if is_ready { "True" } else { "False" }.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn waits_for_the_statefulset_controller_to_see_the_spec() {
        let s = sts(1, 2, 1, "v2");
        assert!(matches!(next_step(&s, &[pod(0, "v1", true)], NONE), Step::Waiting { .. }));
    }

    #[test]
    fn replaces_highest_outdated_ordinal_first_when_all_ready() {
        let s = sts(3, 2, 2, "v2");
        let pods = [pod(0, "v1", true), pod(1, "v1", true), pod(2, "v1", true)];
        assert_eq!(next_step(&s, &pods, NONE), Step::Evict("demo-2".into()));
    }

    #[test]
    fn one_at_a_time_each_ready_before_the_next() {
        let s = sts(3, 2, 2, "v2");
        // demo-2 was replaced and is still starting: nothing else goes down.
        let pods = [pod(0, "v1", true), pod(1, "v1", true), pod(2, "v2", false)];
        assert_eq!(next_step(&s, &pods, NONE), Step::Waiting { pod: "demo-2".into(), why: "to become Ready".into() });
        // Terminating pods are waited for too.
        let mut gone = pod(2, "v1", true);
        gone.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        assert!(matches!(next_step(&s, &[pod(0, "v1", true), pod(1, "v1", true), gone], NONE), Step::Waiting { .. }));
        // A missing pod (being recreated) is waited for.
        let pods = [pod(0, "v1", true), pod(1, "v1", true)];
        assert_eq!(next_step(&s, &pods, NONE), Step::Waiting { pod: "demo-2".into(), why: "to be created".into() });
        let pods = [pod(0, "v1", true), pod(1, "v1", true), pod(2, "v2", true)];
        assert_eq!(next_step(&s, &pods, NONE), Step::Evict("demo-1".into()));
    }

    #[test]
    fn broken_old_pods_go_first_and_complete_at_the_end() {
        let s = sts(3, 2, 2, "v2");
        let pods = [pod(0, "v1", false), pod(1, "v1", true), pod(2, "v1", true)];
        assert_eq!(next_step(&s, &pods, NONE), Step::Evict("demo-0".into()));
        let pods = [pod(0, "v2", true), pod(1, "v2", true), pod(2, "v2", true)];
        assert_eq!(next_step(&s, &pods, NONE), Step::Complete);
    }

    #[test]
    fn updated_pods_counts_the_update_revision() {
        let s = sts(3, 2, 2, "v2");
        assert_eq!(updated_pods(&s, &[pod(0, "v1", true), pod(1, "v2", false), pod(2, "v2", true)]), 2);
        let mut unseen = s.clone();
        unseen.status.as_mut().unwrap().update_revision = None;
        assert_eq!(updated_pods(&unseen, &[pod(0, "v2", true)]), 0);
    }

    #[test]
    fn pods_of_other_statefulsets_are_ignored() {
        let s = sts(1, 1, 1, "v2");
        let mut other = pod(0, "v1", true);
        other.metadata.name = Some("demo-extra-0".into());
        assert_eq!(next_step(&s, &[pod(0, "v2", true), other], NONE), Step::Complete);
    }

    #[test]
    fn stuck_containers_are_reported() {
        let mut p = pod(0, "v1", false);
        p.status.as_mut().unwrap().container_statuses = Some(vec![ContainerStatus {
            name: "node".into(),
            state: Some(ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some("ImagePullBackOff".into()),
                    message: Some("image not found".into()),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }]);
        assert_eq!(
            failing_pods(&[p, pod(1, "v1", true)], Timestamp::now()),
            ["demo-0: ImagePullBackOff (image not found)"]
        );
    }

    #[test]
    fn unschedulable_counts_only_after_a_grace_period() {
        let mut p = pod(0, "v1", false);
        let since = Timestamp::from_second(1_000).unwrap();
        p.status.as_mut().unwrap().conditions.as_mut().unwrap().push(PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: Some("Unschedulable".into()),
            message: Some("pod has unbound immediate PersistentVolumeClaims".into()),
            last_transition_time: Some(Time(since)),
            ..Default::default()
        });
        let at = |secs: i64| Timestamp::from_second(1_000 + secs).unwrap();
        assert!(failing_pods(std::slice::from_ref(&p), at(5)).is_empty(), "a volume still binding is not a failure");
        let failing = failing_pods(&[p], at(UNSCHEDULABLE_GRACE_SECONDS));
        assert_eq!(failing.len(), 1);
        assert!(failing[0].starts_with("demo-0: Unschedulable (pod has unbound"), "{failing:?}");
    }

    fn restarted(ordinal: i32, count: i32, reason: &str, finished_secs: i64) -> Pod {
        use k8s_openapi::api::core::v1::ContainerStateTerminated;
        let mut p = pod(ordinal, "v1", true);
        p.status.as_mut().unwrap().container_statuses = Some(vec![ContainerStatus {
            name: "node".into(),
            restart_count: count,
            last_state: Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    reason: Some(reason.into()),
                    exit_code: 137,
                    finished_at: Some(Time(Timestamp::from_second(finished_secs).unwrap())),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }]);
        p
    }

    #[test]
    fn recent_restarts_are_reported_and_old_ones_forgotten() {
        let now = Timestamp::from_second(10_000).unwrap();
        let pods = [
            restarted(0, 2, "OOMKilled", 10_000 - 30),
            restarted(1, 1, "Error", 10_000 - RESTART_WINDOW_SECONDS - 1),
            pod(2, "v1", true),
        ];
        let r = recent_restarts(&pods, now);
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0].oom_killed());
        assert_eq!((r[0].pod.as_str(), r[0].count, r[0].ago_seconds), ("demo-0", 2, 30));
        assert_eq!(r[0].describe(), "demo-0: container node restarted 2 times, last OOMKilled (exit code 137) 30s ago");
    }

    fn crash_looping_pod(ordinal: i32, count: i32, finished_secs: i64, message: &str) -> Pod {
        let mut p = restarted(ordinal, count, "Error", finished_secs);
        let c = &mut p.status.as_mut().unwrap().container_statuses.as_mut().unwrap()[0];
        let last = c.last_state.as_mut().unwrap().terminated.as_mut().unwrap();
        last.message = Some(message.into());
        last.exit_code = 1;
        c.state = Some(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("CrashLoopBackOff".into()),
                message: Some("back-off 5m0s restarting failed container=node pod=demo-0_ns(uid)".into()),
            }),
            ..Default::default()
        });
        p
    }

    #[test]
    fn last_words_are_the_last_line_trimmed_and_bounded() {
        assert_eq!(
            last_words("starting\nstrata-node: bad port \"x\"\n\n  "),
            Some("strata-node: bad port \"x\"".into())
        );
        assert_eq!(last_words(" \n"), None);
        // The node's JSON log line: its message and fields, not the timestamp and target.
        let json = r#"{"timestamp":"2026-11-28T13:00:00Z","level":"ERROR","fields":{"message":"cannot open the durability log: Permission denied; stopping","dir":"/data"},"target":"strata_node::server"}"#;
        assert_eq!(
            last_words(&format!("{{\"level\":\"INFO\"}}\n{json}\n")),
            Some("cannot open the durability log: Permission denied; stopping dir=/data".into())
        );
        let long = "x".repeat(LAST_WORDS_MAX_CHARS + 50);
        let words = last_words(&long).unwrap();
        assert_eq!(words.chars().count(), LAST_WORDS_MAX_CHARS + 3);
        assert!(words.ends_with("..."));
        // Multi-byte characters are not cut in half.
        assert_eq!(
            last_words(&"é".repeat(LAST_WORDS_MAX_CHARS + 1)).unwrap().chars().count(),
            LAST_WORDS_MAX_CHARS + 3
        );
    }

    #[test]
    fn a_crash_loop_is_a_restart_with_the_nodes_last_words() {
        let now = Timestamp::from_second(10_000).unwrap();
        // Its last run ended long ago (a 5-minute back-off and more): still reported.
        let p =
            crash_looping_pod(0, 7, 10_000 - RESTART_WINDOW_SECONDS - 100, "replaying\nstrata-node: cannot listen\n");
        assert!(failing_pods(std::slice::from_ref(&p), now).is_empty(), "told by the restart, with its reason");
        let r = recent_restarts(&[p], now);
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0].crash_looping);
        // Killed from outside, its last line is not its error.
        let mut oom = crash_looping_pod(1, 2, 10_000 - 5, "accepted a connection\n");
        let c = &mut oom.status.as_mut().unwrap().container_statuses.as_mut().unwrap()[0];
        c.last_state.as_mut().unwrap().terminated.as_mut().unwrap().reason = Some("OOMKilled".into());
        assert_eq!(recent_restarts(&[oom], now)[0].last_words, None);
        assert_eq!(r[0].last_words.as_deref(), Some("strata-node: cannot listen"));
        assert_eq!(
            r[0].describe(),
            format!(
                "demo-0: container node restarted 7 times, last Error (exit code 1) {}s ago, now in CrashLoopBackOff, \
                 its last log line: \"strata-node: cannot listen\"",
                RESTART_WINDOW_SECONDS + 100
            )
        );
    }

    #[test]
    fn an_outage_is_planned_only_for_pods_the_rollout_replaces() {
        use std::collections::BTreeMap;
        let s = sts(3, 2, 2, "v2");
        let with_uid = |mut p: Pod, uid: &str| {
            p.metadata.uid = Some(uid.into());
            p
        };
        let evicted = BTreeMap::from([("demo-2".to_owned(), "old".to_owned())]);
        let none = BTreeMap::new();
        // Evicted and gone, evicted and terminating, replaced and starting: planned.
        let up = [with_uid(pod(0, "v1", true), "a"), with_uid(pod(1, "v1", true), "b")];
        assert_eq!(planned_outage(&s, &up, &evicted, &[]), Some(vec!["demo-2".into()]));
        let mut going = with_uid(pod(2, "v1", true), "old");
        going.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        let pods = [up[0].clone(), up[1].clone(), going];
        assert_eq!(planned_outage(&s, &pods, &evicted, &[]), Some(vec!["demo-2".into()]));
        let pods = [up[0].clone(), up[1].clone(), with_uid(pod(2, "v2", false), "new")];
        assert_eq!(planned_outage(&s, &pods, &evicted, &[]), Some(vec!["demo-2".into()]));
        // ... unless the replacement crashes or is stuck.
        assert_eq!(planned_outage(&s, &pods, &evicted, &["demo-2".into()]), None);
        // Without the operator's record, mid-rollout (demo-0 and demo-1 still old) still counts.
        assert_eq!(planned_outage(&s, &pods, &none, &[]), Some(vec!["demo-2".into()]));
        // A pod deleted by someone else is not the rollout's.
        assert_eq!(planned_outage(&s, &up, &none, &[]), None);
        let all_new =
            [with_uid(pod(0, "v2", true), "a"), with_uid(pod(1, "v2", false), "b"), with_uid(pod(2, "v2", true), "c")];
        assert_eq!(planned_outage(&s, &all_new, &none, &[]), None, "every pod current: a crash, not the rollout");
        // Everything Ready: nothing down.
        let ready = [all_new[0].clone(), with_uid(pod(1, "v2", true), "b"), all_new[2].clone()];
        assert_eq!(planned_outage(&s, &ready, &none, &[]), Some(vec![]));
    }

    #[test]
    fn an_unusable_tls_secret_holds_the_rollout() {
        let why = "Secret shop/t has no ca.crt: add the CA that signed tls.crt";
        let held = held_for_tls_secret(Step::Evict("demo-2".into()), "shop/t", Some(why));
        assert_eq!(held, Step::Waiting { pod: "the TLS Secret shop/t".into(), why: format!("to be usable: {why}") });
        assert_eq!(
            held.describe(),
            format!("waiting for the TLS Secret shop/t to be usable: {why}"),
            "the status says what is waited for"
        );
        // A usable Secret holds nothing; other steps stand either way.
        assert_eq!(held_for_tls_secret(Step::Evict("demo-2".into()), "shop/t", None), Step::Evict("demo-2".into()));
        assert_eq!(held_for_tls_secret(Step::Complete, "shop/t", Some(why)), Step::Complete);
        let waiting = Step::Waiting { pod: "demo-1".into(), why: "to become Ready".into() };
        assert_eq!(held_for_tls_secret(waiting.clone(), "shop/t", Some(why)), waiting);
    }

    #[test]
    fn pods_replaced_anyway_go_first_and_only_they_skip_the_gate() {
        use crate::api::v1alpha1::CacheClusterStatus;
        let s = sts(3, 2, 2, "v2");
        let pods = [pod(0, "v1", true), pod(1, "v1", true), pod(2, "v1", true)];
        // demo-0 cannot be reached (its old TLS Secret is gone): it goes first, not demo-2.
        let anyway = ["demo-0".to_owned()];
        assert_eq!(next_step(&s, &pods, &anyway), Step::Evict("demo-0".into()));
        // Before an old pod that is merely not Ready, too (that one would wait on the gate).
        let pods = [pod(0, "v1", true), pod(1, "v1", false), pod(2, "v1", true)];
        assert_eq!(next_step(&s, &pods, &anyway), Step::Evict("demo-0".into()));
        // Never a pod already at the update revision, and new pods starting are still waited for.
        let pods = [pod(0, "v2", true), pod(1, "v1", true), pod(2, "v1", true)];
        assert_eq!(next_step(&s, &pods, &anyway), Step::Evict("demo-2".into()));
        let pods = [pod(0, "v1", true), pod(1, "v1", true), pod(2, "v2", false)];
        assert!(matches!(next_step(&s, &pods, &anyway), Step::Waiting { .. }));
        // The gate: demo-0 lags; only its own replacement passes.
        let status = CacheClusterStatus {
            topology_epoch: Some(3),
            nodes: vec![node("demo-0", None), node("demo-1", Some(3)), node("demo-2", Some(3))],
            ..Default::default()
        };
        assert_eq!(cluster_unsettled(Some(&status), "demo-0", &anyway), None);
        assert!(cluster_unsettled(Some(&status), "demo-2", &anyway).unwrap().contains("demo-0"));
    }

    #[test]
    fn lagging_old_pods_are_the_old_revisions_behind_the_epoch() {
        use crate::api::v1alpha1::CacheClusterStatus;
        let status = CacheClusterStatus {
            topology_epoch: Some(3),
            nodes: vec![node("demo-0", None), node("demo-1", Some(3)), node("demo-2", Some(2))],
            ..Default::default()
        };
        let s = sts(3, 2, 2, "v2");
        let pods = [pod(0, "v1", true), pod(1, "v1", true), pod(2, "v2", true)];
        // demo-1 is in sync, demo-2 is new (its lag is waited for, never skipped).
        assert_eq!(lagging_old_pods(&s, &pods, Some(&status)), ["demo-0"]);
        assert!(lagging_old_pods(&s, &pods, None).is_empty());
        assert!(lagging_old_pods(&sts(3, 3, 2, "v2"), &pods, Some(&status)).is_empty(), "spec not seen yet");
        let no_epoch = CacheClusterStatus { topology_epoch: None, ..status.clone() };
        assert!(lagging_old_pods(&s, &pods, Some(&no_epoch)).is_empty());
    }

    #[test]
    fn a_sharded_cluster_rolls_only_when_settled() {
        use crate::api::v1alpha1::{CacheClusterStatus, ReshardingStatus};
        let mut status = CacheClusterStatus {
            topology_epoch: Some(7),
            nodes: vec![node("c-0", Some(7)), node("c-1", Some(7))],
            ..Default::default()
        };
        assert_eq!(cluster_unsettled(Some(&status), "c-0", &[]), None);
        assert_eq!(cluster_unsettled(None, "c-0", &[]), None);
        status.nodes[1].applied_epoch = Some(6);
        assert!(cluster_unsettled(Some(&status), "c-0", &[]).unwrap().contains("c-1"));
        // Not when it cannot be reached for good (its earlier spec's TLS Secret is gone): the
        // rollout replaces it.
        status.nodes[1].applied_epoch = None;
        let exempt = ["c-1".to_owned()];
        assert_eq!(cluster_unsettled(Some(&status), "c-1", &exempt), None);
        // ... only for its own replacement: a healthy pod is not replaced while it lags.
        assert!(cluster_unsettled(Some(&status), "c-0", &exempt).unwrap().contains("c-1"));
        assert!(cluster_unsettled(Some(&status), "c-0", &["c-0".to_owned()]).unwrap().contains("c-1"));
        status.nodes[1].applied_epoch = Some(7);
        status.resharding = Some(ReshardingStatus {
            plan: "p7".into(),
            shards: 3,
            moves: vec![],
            slots_moved: 100,
            slots_total: 4096,
            started_at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::now()),
        });
        assert!(cluster_unsettled(Some(&status), "c-0", &[]).unwrap().contains("100/4096"));
    }
}
