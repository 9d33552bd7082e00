//! From what the controller observed to the CacheCluster's status conditions (pure functions).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{Condition, ConditionStatus};

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
    /// Containers restarted lately (an OOM kill, a crash): what they held in RAM is gone.
    pub restarts: Vec<Restart>,
    /// Where the rollout stands.
    pub rollout: Option<Step>,
    /// Monitoring asked for but impossible (ServiceMonitor CRD missing): the message.
    pub monitoring_unavailable: Option<String>,
    /// Monitoring asked for and applied.
    pub monitoring_ready: bool,
    /// A PrometheusRule asked for but impossible (its CRD missing): the message.
    pub rule_unavailable: Option<String>,
    /// A PrometheusRule asked for and applied.
    pub rule_ready: bool,
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
    pub const AS_EXPECTED: &str = "AsExpected";
    pub const SM_APPLIED: &str = "ServiceMonitorApplied";
    pub const SM_CRD_MISSING: &str = "ServiceMonitorCRDMissing";
    pub const RULE_APPLIED: &str = "PrometheusRuleApplied";
    pub const RULE_CRD_MISSING: &str = "PrometheusRuleCRDMissing";
    pub const SM_DISABLED: &str = "Disabled";
}

/// The conditions an observation implies, in a fixed order.
pub fn verdicts(obs: &Observation) -> Vec<Verdict> {
    use ConditionStatus::{False, True};
    let mut out = Vec::with_capacity(4);

    let all_ready = obs.ready >= obs.desired && obs.desired > 0;
    out.push(Verdict {
        type_: Condition::AVAILABLE,
        status: if all_ready { True } else { False },
        reason: if all_ready { reason::ALL_READY } else { reason::NOT_READY },
        message: format!("{}/{} pods ready", obs.ready, obs.desired),
    });

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
    } else if !obs.failing_pods.is_empty() {
        Verdict {
            type_: Condition::DEGRADED,
            status: True,
            reason: reason::PODS_FAILING,
            message: obs.failing_pods.join("; "),
        }
    } else if !obs.restarts.is_empty() {
        let oom = obs.restarts.iter().any(|r| r.oom_killed());
        let mut message = obs.restarts.iter().map(|r| r.describe()).collect::<Vec<_>>().join("; ");
        if oom {
            message.push_str(
                "; the memory limit is too small for maxMemory plus the node's overhead: raise \
                 resources.limits.memory, or lower maxMemory (unset, it is derived with room to spare)",
            );
        }
        Verdict {
            type_: Condition::DEGRADED,
            status: True,
            reason: if oom { reason::OOM_KILLED } else { reason::RESTARTED },
            message,
        }
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
    out
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
    let ours = [Condition::AVAILABLE, Condition::PROGRESSING, Condition::DEGRADED, Condition::MONITORING];
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

    fn time(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    fn find<'a>(v: &'a [Verdict], t: &str) -> &'a Verdict {
        v.iter().find(|x| x.type_ == t).unwrap_or_else(|| panic!("no {t} in {v:?}"))
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
        };
        let obs = Observation { desired: 1, ready: 1, restarts: vec![restart("OOMKilled")], ..Default::default() };
        let v = verdicts(&obs);
        let d = find(&v, "Degraded");
        assert_eq!((d.status, d.reason), (ConditionStatus::True, reason::OOM_KILLED));
        assert!(d.message.contains("raise resources.limits.memory, or lower maxMemory"), "{}", d.message);
        let obs = Observation { desired: 1, ready: 1, restarts: vec![restart("Error")], ..Default::default() };
        assert_eq!(find(&verdicts(&obs), "Degraded").reason, reason::RESTARTED);
        let healthy = Observation { desired: 1, ready: 1, ..Default::default() };
        assert_eq!(find(&verdicts(&healthy), "Degraded").status, ConditionStatus::False);
    }
}
