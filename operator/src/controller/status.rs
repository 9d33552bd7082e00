//! From what the controller observed to the CacheCluster's status conditions (pure functions).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{CacheClusterSpec, Condition, ConditionStatus, DurabilityMode};

use super::rollout::{Restart, Step};

/// What one reconciliation saw, in the terms the conditions report.
#[derive(Clone, Debug, Default)]
pub struct Observation {
    /// `spec.replicas`.
    pub desired: i32,
    /// Pods that exist / are Ready / run the current spec (from the StatefulSet's status).
    pub replicas: i32,
    pub ready: i32,
    pub updated: i32,
    /// The spec the operator cannot run, and why (Degraded/InvalidSpec).
    pub invalid_spec: Option<String>,
    /// Pods that cannot start or keep running, e.g. "demo-0: CrashLoopBackOff (...)".
    pub failing_pods: Vec<String>,
    /// Containers restarted lately (an OOM kill, a crash) or crash-looping.
    pub restarts: Vec<Restart>,
    /// What a restart costs the data, from the spec.
    pub data: DataFate,
    /// How `maxmemory` was set, for the advice after an OOM kill.
    pub memory: MemorySetting,
    /// Where the rollout stands.
    pub rollout: Option<Step>,
    /// `Some(pods)` when every pod that is not Ready is down because the operator's rollout
    /// replaces it (a planned outage, not a failure); `None` when some pod is down for another reason.
    pub planned_outage: Option<Vec<String>>,
    /// Pods removed by scaling in whose volumes still hold durable data the Service no longer
    /// reaches, as (pod, PVC).
    pub unreachable: Vec<(String, String)>,
    /// Monitoring asked for but impossible (ServiceMonitor CRD missing): the message.
    pub monitoring_unavailable: Option<String>,
    /// Monitoring asked for and applied.
    pub monitoring_ready: bool,
    /// A PrometheusRule asked for but impossible (its CRD missing): the message.
    pub rule_unavailable: Option<String>,
    /// A PrometheusRule asked for and applied.
    pub rule_ready: bool,
    /// Cluster mode: where the topology stands (None: independent caches).
    pub cluster: Option<super::cluster::ClusterState>,
}

/// What a node's restart does to its data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum DataFate {
    /// durability none (or no volume): the data lives in RAM only.
    #[default]
    Lost,
    /// write-back: replayed, but for the writes not yet in the log.
    WriteBack,
    /// periodic with this fsync interval: replayed, but for at most the last interval.
    Periodic(String),
    /// sync: every acknowledged write is replayed.
    Sync,
}

impl DataFate {
    pub fn of(spec: &CacheClusterSpec) -> Self {
        match spec.durability.mode {
            _ if spec.storage.is_none() => Self::Lost,
            DurabilityMode::None => Self::Lost,
            DurabilityMode::WriteBack => Self::WriteBack,
            // The node's own default when unset.
            DurabilityMode::Periodic => Self::Periodic(spec.durability.fsync_interval.clone().unwrap_or("10ms".into())),
            DurabilityMode::Sync => Self::Sync,
        }
    }

    /// What became of a restarted node's data; `looping`: it has not started again yet.
    pub fn after_restart(&self, looping: bool) -> String {
        match self {
            Self::Lost => "its data in RAM is lost (durability none)".to_owned(),
            _ if looping => "its acknowledged writes stay on its volume, unreachable until the node starts".to_owned(),
            Self::WriteBack => {
                "it replays its durability log on start: only writes still within the write-back lag are lost"
                    .to_owned()
            }
            Self::Periodic(interval) => format!(
                "it replays its durability log on start: at most the last fsync interval ({interval}) of acknowledged \
                 writes is lost"
            ),
            Self::Sync => "it replays its durability log on start: no acknowledged write is lost".to_owned(),
        }
    }
}

/// How the node's `maxmemory` was set, which decides what to change after an OOM kill.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemorySetting {
    /// `spec.maxMemory` set by the user.
    Explicit,
    /// Derived from `resources.limits.memory`, with room for the process's own overhead.
    #[default]
    Derived,
    /// Neither: no limit, no budget.
    Unbounded,
}

impl MemorySetting {
    pub fn of(spec: &CacheClusterSpec) -> Self {
        let limit = spec.resources.as_ref().and_then(|r| r.limits.as_ref()).is_some_and(|l| l.contains_key("memory"));
        match (&spec.max_memory, limit) {
            (Some(_), _) => Self::Explicit,
            (None, true) => Self::Derived,
            (None, false) => Self::Unbounded,
        }
    }

    /// What to change after an OOM kill.
    pub fn oom_advice(self) -> &'static str {
        match self {
            Self::Explicit => {
                "the memory limit is too small for maxMemory plus the node's overhead: raise \
                 resources.limits.memory, or lower maxMemory (unset, it is derived with room to spare)"
            }
            Self::Derived => {
                "maxMemory is derived from resources.limits.memory with room for the node's own overhead, and the \
                 node outgrew that room: raise resources.limits.memory"
            }
            Self::Unbounded => {
                "the pod has no memory limit, so the node has no maxMemory and the kernel killed it under the \
                 machine's memory pressure: set resources.limits.memory (maxMemory is derived from it)"
            }
        }
    }
}

/// One condition's new state, before timestamps are attached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub type_: &'static str,
    pub status: ConditionStatus,
    pub reason: &'static str,
    pub message: String,
}

/// Reasons the conditions carry (CamelCase, stable: tools match on them).
pub mod reason {
    pub const ALL_READY: &str = "AllReplicasReady";
    pub const NOT_READY: &str = "ReplicasNotReady";
    pub const ROLLING: &str = "RollingUpdate";
    pub const COMPLETE: &str = "RolloutComplete";
    pub const CREATING: &str = "Creating";
    pub const PODS_FAILING: &str = "PodsFailing";
    pub const OOM_KILLED: &str = "OOMKilled";
    pub const RESTARTED: &str = "ContainerRestarted";
    pub const DATA_UNREACHABLE: &str = "DataUnreachable";
    pub const AS_EXPECTED: &str = "AsExpected";
    pub const SM_APPLIED: &str = "ServiceMonitorApplied";
    pub const SM_CRD_MISSING: &str = "ServiceMonitorCRDMissing";
    pub const RULE_APPLIED: &str = "PrometheusRuleApplied";
    pub const RULE_CRD_MISSING: &str = "PrometheusRuleCRDMissing";
    pub const SM_DISABLED: &str = "Disabled";
    pub const SLOTS_UNCOVERED: &str = "SlotsUncovered";
    pub const TOPOLOGY_LAGGING: &str = "TopologyLagging";
    pub const INSUFFICIENT_CAPACITY: &str = "InsufficientCapacity";
    pub const TLS_SECRET_UNUSABLE: &str = "TLSSecretUnusable";
    pub const MIGRATING: &str = "Migrating";
    pub const BALANCED: &str = "Balanced";
}

/// The conditions an observation implies, in a fixed order.
pub fn verdicts(obs: &Observation) -> Vec<Verdict> {
    use ConditionStatus::{False, True};
    let mut out = Vec::with_capacity(4);

    let all_ready = obs.ready >= obs.desired && obs.desired > 0;
    let counted = format!("{}/{} pods ready", obs.ready, obs.desired);
    let available = match &obs.planned_outage {
        _ if all_ready => (True, reason::ALL_READY, counted),
        // The operator's own rollout takes one pod down at a time: planned, not a failure.
        Some(pods) if !pods.is_empty() && obs.invalid_spec.is_none() => {
            let which = pods.join(", ");
            if obs.ready > 0 {
                (True, reason::ROLLING, format!("{counted}; {which} down for the rolling update, one pod at a time"))
            } else {
                let message = format!(
                    "{counted}: {which} is being replaced by the rolling update; with {} replica{} the Service has \
                     no pod until it is Ready",
                    obs.desired,
                    if obs.desired == 1 { "" } else { "s" }
                );
                (False, reason::ROLLING, message)
            }
        }
        _ => (False, reason::NOT_READY, counted),
    };
    out.push(Verdict { type_: Condition::AVAILABLE, status: available.0, reason: available.1, message: available.2 });

    // A spec the operator refuses does not progress: nothing is being changed.
    let progressing = match (&obs.invalid_spec, &obs.rollout) {
        (Some(_), _) | (None, None) => None,
        (None, Some(Step::Complete)) => {
            Some((False, reason::COMPLETE, format!("{} pods at the current spec", obs.updated)))
        }
        (None, Some(step)) => {
            let why = step.describe();
            let reason = if obs.replicas == 0 && obs.updated == 0 { reason::CREATING } else { reason::ROLLING };
            Some((True, reason, format!("{}/{} pods at the current spec; {why}", obs.updated, obs.desired)))
        }
    };
    if let Some((status, reason, message)) = progressing {
        out.push(Verdict { type_: Condition::PROGRESSING, status, reason, message });
    }

    let degraded = if let Some(why) = &obs.invalid_spec {
        Verdict {
            type_: Condition::DEGRADED,
            status: True,
            reason: Condition::REASON_INVALID_SPEC,
            message: format!("{why}; nothing running was changed"),
        }
    } else if let Some(why) = obs.cluster.as_ref().and_then(|c| c.admin_tls.as_ref()) {
        // Before failing pods: a node without the CA file fails to start, and this says why.
        let message = format!("{why}; the topology is neither read nor pushed until then");
        Verdict { type_: Condition::DEGRADED, status: True, reason: reason::TLS_SECRET_UNUSABLE, message }
    } else if !obs.failing_pods.is_empty() {
        Verdict {
            type_: Condition::DEGRADED,
            status: True,
            reason: reason::PODS_FAILING,
            message: obs.failing_pods.join("; "),
        }
    } else if let Some((cluster, message)) = obs.cluster.as_ref().and_then(|c| Some((c, c.problem()?))) {
        let reason = if cluster.slots_covered < u32::from(crate::topology::SLOTS) {
            reason::SLOTS_UNCOVERED
        } else {
            reason::TOPOLOGY_LAGGING
        };
        Verdict { type_: Condition::DEGRADED, status: True, reason, message }
    } else if let Some(message) = obs.cluster.as_ref().and_then(|c| c.capacity.clone()) {
        Verdict { type_: Condition::DEGRADED, status: True, reason: reason::INSUFFICIENT_CAPACITY, message }
    } else if !obs.restarts.is_empty() {
        let oom = obs.restarts.iter().any(|r| r.oom_killed());
        let looping = obs.restarts.iter().any(|r| r.crash_looping);
        let mut message = obs.restarts.iter().map(|r| r.describe()).collect::<Vec<_>>().join("; ");
        message.push_str("; ");
        message.push_str(&obs.data.after_restart(looping));
        if oom {
            message.push_str("; ");
            message.push_str(obs.memory.oom_advice());
        }
        // One reason whether the container is between two crashes or running again: a crash
        // loop must not flip the condition (and publish an Event) on every cycle.
        Verdict {
            type_: Condition::DEGRADED,
            status: True,
            reason: if oom { reason::OOM_KILLED } else { reason::RESTARTED },
            message,
        }
    } else if !obs.unreachable.is_empty() {
        let pods: Vec<&str> = obs.unreachable.iter().map(|(p, _)| p.as_str()).collect();
        let claims: Vec<&str> = obs.unreachable.iter().map(|(_, c)| c.as_str()).collect();
        let message = format!(
            "scaled in to {} replica{}: the data of {} stays on {} but the Service no longer reaches it (pods \
             do not hand data over yet); scale back out to serve it again, or delete those PVCs once it is not needed",
            obs.desired,
            if obs.desired == 1 { "" } else { "s" },
            pods.join(", "),
            claims.join(", "),
        );
        Verdict { type_: Condition::DEGRADED, status: True, reason: reason::DATA_UNREACHABLE, message }
    } else {
        Verdict {
            type_: Condition::DEGRADED,
            status: False,
            reason: reason::AS_EXPECTED,
            message: "no problems found".to_owned(),
        }
    };
    out.push(degraded);

    // What is missing first (the ServiceMonitor's reason wins: without it nothing is scraped).
    let missing: Vec<&str> =
        [&obs.monitoring_unavailable, &obs.rule_unavailable].into_iter().flatten().map(String::as_str).collect();
    let applied: Vec<&str> = [
        obs.monitoring_ready.then_some("ServiceMonitor scrapes every pod's /metrics"),
        obs.rule_ready.then_some("PrometheusRule holds the node alerts"),
    ]
    .into_iter()
    .flatten()
    .collect();
    let monitoring = if !missing.is_empty() {
        let reason =
            if obs.monitoring_unavailable.is_some() { reason::SM_CRD_MISSING } else { reason::RULE_CRD_MISSING };
        (False, reason, missing.join("; "))
    } else if !applied.is_empty() {
        (True, if obs.monitoring_ready { reason::SM_APPLIED } else { reason::RULE_APPLIED }, applied.join("; "))
    } else {
        (False, reason::SM_DISABLED, "spec.monitoring.serviceMonitor and prometheusRule are false".to_owned())
    };
    out.push(Verdict {
        type_: Condition::MONITORING,
        status: monitoring.0,
        reason: monitoring.1,
        message: monitoring.2,
    });

    if let Some(cluster) = &obs.cluster {
        out.push(match &cluster.resharding {
            Some(plan) => Verdict {
                type_: Condition::RESHARDING,
                status: True,
                reason: reason::MIGRATING,
                message: super::resharding::progress(plan),
            },
            None => Verdict {
                type_: Condition::RESHARDING,
                status: False,
                reason: reason::BALANCED,
                message: format!("the slots are even over {} shards", cluster.shards),
            },
        });
    }
    out
}

/// Pods above `replicas` that still have their data claim among `claims`, as (pod, claim),
/// by ordinal.
pub fn unreachable_claims(cluster: &str, replicas: i32, claims: &[String]) -> Vec<(String, String)> {
    let prefix = crate::resources::data_claim_name(cluster, 0);
    let prefix = prefix.trim_end_matches('0');
    let mut out: Vec<(i32, String)> = claims
        .iter()
        .filter_map(|c| c.strip_prefix(prefix)?.parse::<i32>().ok().map(|o| (o, c.clone())))
        .filter(|(o, c)| *o >= replicas && *c == crate::resources::data_claim_name(cluster, *o))
        .collect();
    out.sort();
    out.into_iter().map(|(o, c)| (format!("{cluster}-{o}"), c)).collect()
}

/// The ScaledIn Event's note: which pods go and what becomes of their data.
pub fn scale_in_note(cluster: &str, before: i32, after: i32, data: &DataFate) -> String {
    let pods: Vec<String> = (after..before).map(|o| format!("{cluster}-{o}")).collect();
    let fate = match data {
        DataFate::Lost => "what they hold is lost (durability none: a cache)".to_owned(),
        _ => {
            let claims: Vec<String> = (after..before).map(|o| crate::resources::data_claim_name(cluster, o)).collect();
            format!(
                "their data stays on {} but the Service no longer reaches it (pods do not hand data over yet): scale \
                 back to {before} replicas to serve it again, or delete those PVCs once it is not needed",
                claims.join(", ")
            )
        }
    };
    format!("Scaling in from {before} to {after} replicas removes {}; {fate}", pods.join(", "))
}

/// Merges verdicts into the previous conditions: `lastTransitionTime` moves only when the status
/// changes; conditions this operator no longer reports are kept only if unknown to it.
pub fn merge(previous: &[Condition], verdicts: &[Verdict], generation: Option<i64>, now: &Time) -> Vec<Condition> {
    let mut out: Vec<Condition> = verdicts
        .iter()
        .map(|v| {
            let last = previous.iter().find(|c| c.type_ == v.type_);
            let since = match last {
                Some(c) if c.status == v.status => c.last_transition_time.clone(),
                _ => now.clone(),
            };
            Condition {
                type_: v.type_.to_owned(),
                status: v.status,
                reason: v.reason.to_owned(),
                message: v.message.clone(),
                last_transition_time: since,
                observed_generation: generation,
            }
        })
        .collect();
    let ours = [
        Condition::AVAILABLE,
        Condition::PROGRESSING,
        Condition::DEGRADED,
        Condition::MONITORING,
        Condition::RESHARDING,
    ];
    for c in previous {
        let reported = out.iter().any(|o| o.type_ == c.type_);
        if !reported && !ours.contains(&c.type_.as_str()) {
            out.push(c.clone());
        }
    }
    out
}

/// Conditions whose status changed, for Events: (verdict, was it newly True).
pub fn transitions<'a>(previous: &[Condition], verdicts: &'a [Verdict]) -> Vec<&'a Verdict> {
    verdicts
        .iter()
        .filter(|v| {
            previous.iter().find(|c| c.type_ == v.type_).is_none_or(|c| c.status != v.status || c.reason != v.reason)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    fn time(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    fn find<'a>(v: &'a [Verdict], t: &str) -> &'a Verdict {
        v.iter().find(|x| x.type_ == t).unwrap_or_else(|| panic!("no {t} in {v:?}"))
    }

    #[test]
    fn uncovered_slots_and_lagging_nodes_degrade_the_cluster() {
        use crate::controller::cluster::ClusterState;
        let healthy = Observation {
            desired: 3,
            replicas: 3,
            ready: 3,
            updated: 3,
            rollout: Some(Step::Complete),
            ..Default::default()
        };
        let cluster = |covered: u32, lagging: &[&str]| ClusterState {
            epoch: 4,
            shards: 3,
            slots_covered: covered,
            lagging: lagging.iter().map(|l| l.to_string()).collect(),
            ..Default::default()
        };
        let with = |c: ClusterState| Observation { cluster: Some(c), ..healthy.clone() };
        let v = verdicts(&with(cluster(16384, &[])));
        assert_eq!(find(&v, "Degraded").status, ConditionStatus::False);
        let v = verdicts(&with(cluster(10923, &["demo-2: no answer on the admin port within 2s"])));
        let degraded = find(&v, "Degraded");
        assert_eq!((degraded.status, degraded.reason), (ConditionStatus::True, reason::SLOTS_UNCOVERED));
        assert!(degraded.message.contains("10923 of 16384 slots") && degraded.message.contains("demo-2"));
        // Every slot served, but a node reports an older epoch.
        let v = verdicts(&with(cluster(16384, &["demo-1 has epoch 3"])));
        assert_eq!(find(&v, "Degraded").reason, reason::TOPOLOGY_LAGGING);
        // A new cluster waiting for its pods' IPs is being created, not degraded.
        let waiting =
            ClusterState { waiting: Some("waiting for pod demo-0 to get an IP".into()), ..Default::default() };
        let v = verdicts(&with(waiting.clone()));
        assert_eq!(find(&v, "Degraded").status, ConditionStatus::False);
        let v = verdicts(&with(ClusterState { epoch: 2, ..waiting }));
        assert!(find(&v, "Degraded").message.contains("demo-0"));
    }

    #[test]
    fn an_unusable_tls_secret_degrades_even_a_new_cluster_and_outranks_failing_pods() {
        use crate::controller::cluster::{ClusterState, TlsProblem};
        let recorded = crate::api::CacheClusterStatus::default();
        let unusable = ClusterState::without_tls(&recorded, TlsProblem::Unusable("Secret shop/t has no ca.crt".into()));
        assert!(!unusable.in_sync() && !unusable.settled());
        let obs = Observation {
            desired: 3,
            failing_pods: vec!["demo-0: CrashLoopBackOff".into()],
            cluster: Some(unusable),
            ..Default::default()
        };
        let degraded = find(&verdicts(&obs), "Degraded").clone();
        assert_eq!((degraded.status, degraded.reason), (ConditionStatus::True, reason::TLS_SECRET_UNUSABLE));
        assert!(degraded.message.starts_with("Secret shop/t has no ca.crt"), "{}", degraded.message);
        // cert-manager not done yet on a new cluster: being created, not degraded.
        let pending = ClusterState::without_tls(&recorded, TlsProblem::NotIssued("waiting for cert-manager".into()));
        assert!(!pending.in_sync());
        let obs = Observation { desired: 3, cluster: Some(pending), ..Default::default() };
        assert_eq!(find(&verdicts(&obs), "Degraded").status, ConditionStatus::False);
    }

    #[test]
    fn healthy_cluster_is_available_and_not_degraded() {
        let obs = Observation {
            desired: 3,
            replicas: 3,
            ready: 3,
            updated: 3,
            rollout: Some(Step::Complete),
            ..Default::default()
        };
        let v = verdicts(&obs);
        assert_eq!(find(&v, "Available").status, ConditionStatus::True);
        assert_eq!(find(&v, "Progressing").status, ConditionStatus::False);
        assert_eq!(find(&v, "Progressing").reason, reason::COMPLETE);
        assert_eq!(find(&v, "Degraded").status, ConditionStatus::False);
        assert_eq!(find(&v, "Monitoring").reason, reason::SM_DISABLED);
    }

    #[test]
    fn rollout_and_readiness_are_reported() {
        let obs = Observation {
            desired: 3,
            replicas: 3,
            ready: 2,
            updated: 1,
            rollout: Some(Step::Waiting { pod: "demo-2".into(), why: "to become Ready".into() }),
            ..Default::default()
        };
        let v = verdicts(&obs);
        assert_eq!(find(&v, "Available").status, ConditionStatus::False);
        assert_eq!(find(&v, "Available").message, "2/3 pods ready");
        let p = find(&v, "Progressing");
        assert_eq!((p.status, p.reason), (ConditionStatus::True, reason::ROLLING));
        assert!(p.message.contains("1/3 pods at the current spec") && p.message.contains("demo-2"), "{}", p.message);
    }

    #[test]
    fn invalid_spec_degrades_and_stops_progress() {
        let obs =
            Observation { desired: 1, invalid_spec: Some("spec.storage: cannot change".into()), ..Default::default() };
        let v = verdicts(&obs);
        let d = find(&v, "Degraded");
        assert_eq!((d.status, d.reason), (ConditionStatus::True, "InvalidSpec"));
        assert!(d.message.starts_with("spec.storage: cannot change"));
        assert!(v.iter().all(|x| x.type_ != "Progressing"));
    }

    #[test]
    fn failing_pods_and_missing_monitoring_crd() {
        let obs = Observation {
            desired: 1,
            failing_pods: vec!["demo-0: CrashLoopBackOff".into()],
            monitoring_unavailable: Some("install the Prometheus Operator".into()),
            ..Default::default()
        };
        let v = verdicts(&obs);
        assert_eq!(find(&v, "Degraded").reason, reason::PODS_FAILING);
        assert_eq!(find(&v, "Degraded").message, "demo-0: CrashLoopBackOff");
        let m = find(&v, "Monitoring");
        assert_eq!((m.status, m.reason), (ConditionStatus::False, reason::SM_CRD_MISSING));
    }

    #[test]
    fn prometheus_rule_is_part_of_the_monitoring_condition() {
        let rule_only = Observation { desired: 1, rule_ready: true, ..Default::default() };
        let m = find(&verdicts(&rule_only), "Monitoring").clone();
        assert_eq!((m.status, m.reason), (ConditionStatus::True, reason::RULE_APPLIED));
        let rule_missing = Observation {
            desired: 1,
            monitoring_ready: true,
            rule_unavailable: Some("no PrometheusRule API".into()),
            ..Default::default()
        };
        let m = find(&verdicts(&rule_missing), "Monitoring").clone();
        assert_eq!(
            (m.status, m.reason, m.message.as_str()),
            (ConditionStatus::False, reason::RULE_CRD_MISSING, "no PrometheusRule API")
        );
        let both_missing = Observation {
            desired: 1,
            monitoring_unavailable: Some("no ServiceMonitor API".into()),
            rule_unavailable: Some("no PrometheusRule API".into()),
            ..Default::default()
        };
        let m = find(&verdicts(&both_missing), "Monitoring").clone();
        assert_eq!(m.reason, reason::SM_CRD_MISSING);
        assert_eq!(m.message, "no ServiceMonitor API; no PrometheusRule API");
    }

    #[test]
    fn transition_time_moves_only_on_status_change() {
        let obs = Observation { desired: 1, ready: 0, ..Default::default() };
        let first = merge(&[], &verdicts(&obs), Some(1), &time(100));
        let again = merge(&first, &verdicts(&obs), Some(2), &time(200));
        let avail = |c: &[Condition]| c.iter().find(|x| x.type_ == "Available").unwrap().clone();
        assert_eq!(avail(&again).last_transition_time, time(100));
        assert_eq!(avail(&again).observed_generation, Some(2));
        let ready = Observation { desired: 1, ready: 1, ..Default::default() };
        let flipped = merge(&again, &verdicts(&ready), Some(2), &time(300));
        assert_eq!(avail(&flipped).last_transition_time, time(300));
        assert_eq!(transitions(&again, &verdicts(&ready)).iter().map(|v| v.type_).collect::<Vec<_>>(), ["Available"]);
    }

    #[test]
    fn foreign_conditions_survive_and_stale_own_ones_go() {
        let foreign = Condition {
            type_: "ExternalCheck".into(),
            status: ConditionStatus::True,
            reason: "X".into(),
            message: String::new(),
            last_transition_time: time(1),
            observed_generation: None,
        };
        let stale_progressing = Condition { type_: "Progressing".into(), ..foreign.clone() };
        let obs = Observation { desired: 1, invalid_spec: Some("bad".into()), ..Default::default() };
        let merged = merge(&[foreign, stale_progressing], &verdicts(&obs), Some(1), &time(5));
        assert!(merged.iter().any(|c| c.type_ == "ExternalCheck"));
        assert!(merged.iter().all(|c| c.type_ != "Progressing"));
    }

    #[test]
    fn a_restart_is_degraded_and_an_oom_kill_says_so() {
        let restart = |reason: &str| Restart {
            pod: "demo-0".into(),
            container: "node".into(),
            count: 1,
            reason: reason.into(),
            exit_code: 137,
            ago_seconds: 5,
            ..Default::default()
        };
        let obs = Observation {
            desired: 1,
            ready: 1,
            restarts: vec![restart("OOMKilled")],
            memory: MemorySetting::Explicit,
            ..Default::default()
        };
        let v = verdicts(&obs);
        let d = find(&v, "Degraded");
        assert_eq!((d.status, d.reason), (ConditionStatus::True, reason::OOM_KILLED));
        assert!(d.message.contains("raise resources.limits.memory, or lower maxMemory"), "{}", d.message);
        let obs = Observation { desired: 1, ready: 1, restarts: vec![restart("Error")], ..Default::default() };
        assert_eq!(find(&verdicts(&obs), "Degraded").reason, reason::RESTARTED);
        let healthy = Observation { desired: 1, ready: 1, ..Default::default() };
        assert_eq!(find(&verdicts(&healthy), "Degraded").status, ConditionStatus::False);
    }

    fn spec(spec: serde_json::Value) -> CacheClusterSpec {
        crate::resources::test_support::cluster(spec).spec
    }

    fn oom(memory: MemorySetting, data: DataFate) -> Verdict {
        let restart = Restart {
            pod: "demo-0".into(),
            container: "node".into(),
            count: 1,
            reason: "OOMKilled".into(),
            exit_code: 137,
            ..Default::default()
        };
        let obs = Observation { desired: 1, ready: 1, restarts: vec![restart], memory, data, ..Default::default() };
        find(&verdicts(&obs), "Degraded").clone()
    }

    #[test]
    fn oom_advice_follows_how_max_memory_was_set() {
        assert_eq!(MemorySetting::of(&spec(json!({"maxMemory": "95Mi"}))), MemorySetting::Explicit);
        let derived = spec(json!({"resources": {"limits": {"memory": "256Mi"}}}));
        assert_eq!(MemorySetting::of(&derived), MemorySetting::Derived);
        assert_eq!(MemorySetting::of(&spec(json!({}))), MemorySetting::Unbounded);

        let explicit = oom(MemorySetting::Explicit, DataFate::Lost).message;
        assert!(explicit.contains("raise resources.limits.memory, or lower maxMemory"), "{explicit}");
        // Derived: maxMemory is not the user's to lower; the limit is.
        let derived = oom(MemorySetting::Derived, DataFate::Lost).message;
        assert!(derived.contains("raise resources.limits.memory"), "{derived}");
        assert!(!derived.contains("lower maxMemory"), "{derived}");
        let unbounded = oom(MemorySetting::Unbounded, DataFate::Lost).message;
        assert!(unbounded.contains("set resources.limits.memory"), "{unbounded}");
    }

    #[test]
    fn data_is_called_lost_only_when_it_was() {
        assert_eq!(DataFate::of(&spec(json!({}))), DataFate::Lost);
        assert_eq!(DataFate::of(&spec(json!({"storage": {"size": "1Gi"}}))), DataFate::Lost, "durability none");
        let durable = |mode: &str| spec(json!({"storage": {"size": "1Gi"}, "durability": {"mode": mode}}));
        assert_eq!(DataFate::of(&durable("sync")), DataFate::Sync);
        assert_eq!(DataFate::of(&durable("periodic")), DataFate::Periodic("10ms".into()));
        assert_eq!(DataFate::of(&durable("write-back")), DataFate::WriteBack);

        assert!(oom(MemorySetting::Derived, DataFate::Lost).message.contains("its data in RAM is lost"));
        let sync = oom(MemorySetting::Derived, DataFate::Sync).message;
        assert!(!sync.contains("lost (") && !sync.contains("in RAM is lost"), "{sync}");
        assert!(sync.contains("no acknowledged write is lost"), "{sync}");
        let periodic = oom(MemorySetting::Derived, DataFate::Periodic("1s".into())).message;
        assert!(periodic.contains("at most the last fsync interval (1s)"), "{periodic}");
        // A durable node that cannot start has not replayed anything yet.
        assert!(DataFate::Sync.after_restart(true).contains("unreachable until the node starts"));
    }

    #[test]
    fn a_crash_loop_carries_the_nodes_own_error_and_keeps_one_reason() {
        let crash = |looping: bool| Restart {
            pod: "demo-0".into(),
            container: "node".into(),
            count: 4,
            reason: "Error".into(),
            exit_code: 1,
            ago_seconds: 20,
            last_words: Some("cannot open the durability log: Permission denied; stopping".into()),
            crash_looping: looping,
            ..Default::default()
        };
        let degraded = |looping| {
            let obs =
                Observation { desired: 1, restarts: vec![crash(looping)], data: DataFate::Sync, ..Default::default() };
            find(&verdicts(&obs), "Degraded").clone()
        };
        let waiting = degraded(true);
        assert_eq!((waiting.status, waiting.reason), (ConditionStatus::True, reason::RESTARTED));
        assert!(waiting.message.contains("now in CrashLoopBackOff"), "{}", waiting.message);
        assert!(waiting.message.contains("\"cannot open the durability log: Permission denied; stopping\""));
        assert!(waiting.message.contains("unreachable until the node starts"), "{}", waiting.message);
        // Between two crashes (running again) the reason stays: no flip, no Event per cycle.
        assert_eq!(degraded(false).reason, waiting.reason);
    }

    #[test]
    fn a_planned_rollout_stays_available_and_progressing() {
        let rolling = Observation {
            desired: 2,
            replicas: 2,
            ready: 1,
            updated: 1,
            rollout: Some(Step::Waiting { pod: "demo-1".into(), why: "to become Ready".into() }),
            planned_outage: Some(vec!["demo-1".into()]),
            ..Default::default()
        };
        let v = verdicts(&rolling);
        let a = find(&v, "Available");
        assert_eq!((a.status, a.reason), (ConditionStatus::True, reason::ROLLING));
        assert!(a.message.starts_with("1/2 pods ready; demo-1 down for the rolling update"), "{}", a.message);
        assert_eq!(find(&v, "Progressing").status, ConditionStatus::True);
        assert_eq!(find(&v, "Degraded").status, ConditionStatus::False);
        // One replica: the truth is that nothing serves meanwhile, but it is planned.
        let single = Observation {
            desired: 1,
            replicas: 1,
            ready: 0,
            planned_outage: Some(vec!["demo-0".into()]),
            ..rolling.clone()
        };
        let a = find(&verdicts(&single), "Available").clone();
        assert_eq!((a.status, a.reason), (ConditionStatus::False, reason::ROLLING));
        assert!(a.message.contains("with 1 replica the Service has no pod"), "{}", a.message);
        // Not planned: a pod down for another reason.
        let unplanned = Observation { planned_outage: None, ..rolling };
        let a = find(&verdicts(&unplanned), "Available").clone();
        assert_eq!((a.status, a.reason), (ConditionStatus::False, reason::NOT_READY));
    }

    #[test]
    fn scaling_in_names_the_pods_whose_data_is_unreachable() {
        let claims: Vec<String> =
            ["data-demo-0", "data-demo-1", "data-demo-3", "data-demo-4", "data-demo-extra-5", "data-demo-10"]
                .map(String::from)
                .to_vec();
        let far = unreachable_claims("demo", 2, &claims);
        assert_eq!(
            far,
            [("demo-3", "data-demo-3"), ("demo-4", "data-demo-4"), ("demo-10", "data-demo-10")]
                .map(|(p, c)| (p.to_owned(), c.to_owned()))
        );
        let obs = Observation { desired: 2, ready: 2, unreachable: far, ..Default::default() };
        let d = find(&verdicts(&obs), "Degraded").clone();
        assert_eq!((d.status, d.reason), (ConditionStatus::True, reason::DATA_UNREACHABLE));
        assert!(d.message.contains("demo-3, demo-4, demo-10"), "{}", d.message);
        assert!(d.message.contains("data-demo-3, data-demo-4, data-demo-10"), "{}", d.message);

        let note = scale_in_note("demo", 5, 3, &DataFate::Sync);
        assert!(note.starts_with("Scaling in from 5 to 3 replicas removes demo-3, demo-4;"), "{note}");
        assert!(note.contains("stays on data-demo-3, data-demo-4"), "{note}");
        let note = scale_in_note("demo", 2, 1, &DataFate::Lost);
        assert!(note.contains("removes demo-1; what they hold is lost"), "{note}");
    }

    #[test]
    fn resharding_is_a_condition_and_a_full_target_degrades() {
        use super::super::cluster::ClusterState;
        use super::super::resharding;
        let epoch = k8s_openapi::jiff::Timestamp::UNIX_EPOCH;
        let plan = resharding::new_plan(&crate::topology::spread(1), 2, 3, resharding::Options::default(), epoch);
        let cluster = ClusterState { epoch: 3, shards: 2, slots_covered: 16384, ..Default::default() };
        let running = Observation {
            desired: 2,
            ready: 2,
            cluster: Some(ClusterState {
                resharding: plan,
                capacity: Some("no room on demo-1".into()),
                ..cluster.clone()
            }),
            ..Default::default()
        };
        let v = verdicts(&running);
        let r = find(&v, "Resharding");
        assert_eq!((r.status, r.reason), (ConditionStatus::True, reason::MIGRATING));
        assert!(r.message.starts_with("moved 0/8192 slots"), "{}", r.message);
        let d = find(&v, "Degraded");
        assert_eq!(
            (d.status, d.reason, d.message.as_str()),
            (ConditionStatus::True, reason::INSUFFICIENT_CAPACITY, "no room on demo-1")
        );
        let balanced = Observation { cluster: Some(cluster), ..running };
        let v = verdicts(&balanced);
        assert_eq!(find(&v, "Resharding").reason, reason::BALANCED);
        assert_eq!(find(&v, "Degraded").status, ConditionStatus::False);
    }
}
