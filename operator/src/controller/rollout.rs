//! Pacing spec changes: the StatefulSet uses the `OnDelete` update strategy, and the operator
//! replaces one pod at a time through the Eviction API (which honours the PodDisruptionBudget),
//! waiting for each new pod to be Ready before touching the next. Pure decisions here; the
//! controller performs them.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
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
pub fn next_step(sts: &StatefulSet, pods: &[Pod]) -> Step {
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
        let waiting = status
            .container_statuses
            .iter()
            .flatten()
            .chain(status.init_container_statuses.iter().flatten())
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

/// A container of a pod that terminated and was restarted by the kubelet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restart {
    pub pod: String,
    pub container: String,
    /// The container's restart count (each restart is told once by it).
    pub count: i32,
    /// Why it last terminated, e.g. "OOMKilled", "Error".
    pub reason: String,
    pub exit_code: i32,
    /// Seconds since it last terminated.
    pub ago_seconds: i64,
}

impl Restart {
    pub fn oom_killed(&self) -> bool {
        self.reason == "OOMKilled"
    }

    /// A phrase for the Degraded condition.
    pub fn describe(&self) -> String {
        format!(
            "{}: container {} restarted {} time{}, last {} (exit code {}) {}s ago",
            self.pod,
            self.container,
            self.count,
            if self.count == 1 { "" } else { "s" },
            self.reason,
            self.exit_code,
            self.ago_seconds
        )
    }
}

/// Containers that were restarted within [`RESTART_WINDOW_SECONDS`]: a cache that restarts
/// loses what it held in RAM (an OOM kill above all), which must never pass as "no problems".
pub fn recent_restarts(pods: &[Pod], now: Timestamp) -> Vec<Restart> {
    let mut out = Vec::new();
    for p in pods {
        let Some(status) = &p.status else { continue };
        for c in status.container_statuses.iter().flatten() {
            let Some(last) = c.last_state.as_ref().and_then(|s| s.terminated.as_ref()) else { continue };
            if c.restart_count == 0 {
                continue;
            }
            let finished = last.finished_at.as_ref().map_or(now, |t| t.0);
            let ago = now.as_second() - finished.as_second();
            if ago > RESTART_WINDOW_SECONDS {
                continue;
            }
            out.push(Restart {
                pod: pod_name(p),
                container: c.name.clone(),
                count: c.restart_count,
                reason: last.reason.clone().unwrap_or_else(|| "Terminated".to_owned()),
                exit_code: last.exit_code,
                ago_seconds: ago.max(0),
            });
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{StatefulSetSpec, StatefulSetStatus};
    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateWaiting, ContainerStatus, PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use std::collections::BTreeMap;

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
        assert!(matches!(next_step(&s, &[pod(0, "v1", true)]), Step::Waiting { .. }));
    }

    #[test]
    fn replaces_highest_outdated_ordinal_first_when_all_ready() {
        let s = sts(3, 2, 2, "v2");
        let pods = [pod(0, "v1", true), pod(1, "v1", true), pod(2, "v1", true)];
        assert_eq!(next_step(&s, &pods), Step::Evict("demo-2".into()));
    }

    #[test]
    fn one_at_a_time_each_ready_before_the_next() {
        let s = sts(3, 2, 2, "v2");
        // demo-2 was replaced and is still starting: nothing else goes down.
        let pods = [pod(0, "v1", true), pod(1, "v1", true), pod(2, "v2", false)];
        assert_eq!(next_step(&s, &pods), Step::Waiting { pod: "demo-2".into(), why: "to become Ready".into() });
        // Terminating pods are waited for too.
        let mut gone = pod(2, "v1", true);
        gone.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        assert!(matches!(next_step(&s, &[pod(0, "v1", true), pod(1, "v1", true), gone]), Step::Waiting { .. }));
        // A missing pod (being recreated) is waited for.
        let pods = [pod(0, "v1", true), pod(1, "v1", true)];
        assert_eq!(next_step(&s, &pods), Step::Waiting { pod: "demo-2".into(), why: "to be created".into() });
        let pods = [pod(0, "v1", true), pod(1, "v1", true), pod(2, "v2", true)];
        assert_eq!(next_step(&s, &pods), Step::Evict("demo-1".into()));
    }

    #[test]
    fn broken_old_pods_go_first_and_complete_at_the_end() {
        let s = sts(3, 2, 2, "v2");
        let pods = [pod(0, "v1", false), pod(1, "v1", true), pod(2, "v1", true)];
        assert_eq!(next_step(&s, &pods), Step::Evict("demo-0".into()));
        let pods = [pod(0, "v2", true), pod(1, "v2", true), pod(2, "v2", true)];
        assert_eq!(next_step(&s, &pods), Step::Complete);
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
        assert_eq!(next_step(&s, &[pod(0, "v2", true), other]), Step::Complete);
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
}
