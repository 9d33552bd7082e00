//! The operator's own Prometheus metrics, served on `/metrics`: the controller's work
//! (`strata_operator_*`) and what it sees of each CacheCluster (`strata_cachecluster_*`,
//! labelled `namespace` and `cachecluster`, like kube-state-metrics: scrape with
//! `honor_labels: true` so these win over the operator pod's own `namespace` target label).

use std::sync::atomic::AtomicI64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReplicaLabels {
    namespace: String,
    cachecluster: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConditionLabels {
    namespace: String,
    cachecluster: String,
    condition: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterLabels {
    namespace: String,
    cachecluster: String,
}

/// The `state` values of `strata_cachecluster_replicas`.
pub const REPLICA_STATES: [&str; 4] = ["desired", "current", "ready", "updated"];

/// The conditions `strata_cachecluster_condition` reports.
pub const CONDITIONS: [&str; 5] = ["Available", "Progressing", "Degraded", "Monitoring", "Resharding"];

/// Counters and histograms the controller and the leader elector update.
pub struct Metrics {
    registry: Registry,
    reconciliations: Counter,
    errors: Family<ReasonLabel, Counter>,
    duration: Histogram,
    leader: Gauge<i64, AtomicI64>,
    replicas: Family<ReplicaLabels, Gauge<i64, AtomicI64>>,
    conditions: Family<ConditionLabels, Gauge<i64, AtomicI64>>,
    topology_epoch: Family<ClusterLabels, Gauge<i64, AtomicI64>>,
    slots_covered: Family<ClusterLabels, Gauge<i64, AtomicI64>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let reconciliations = Counter::default();
        registry.register(
            "strata_operator_reconciliations",
            "CacheCluster reconciliations started",
            reconciliations.clone(),
        );
        let errors = Family::<ReasonLabel, Counter>::default();
        for reason in crate::controller::Error::REASONS {
            let _ = errors.get_or_create(&ReasonLabel { reason: reason.to_owned() });
        }
        registry.register("strata_operator_reconcile_errors", "Reconciliations that failed, by reason", errors.clone());
        // 1 ms .. ~16 s: a reconcile is a handful of API calls.
        let duration = Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(0.001, 2.0, 15));
        registry.register_with_unit(
            "strata_operator_reconcile_duration",
            "Time one reconciliation took",
            prometheus_client::registry::Unit::Seconds,
            duration.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "strata_operator_leader",
            "1 while this instance holds the leader Lease and runs the controller",
            leader.clone(),
        );
        let replicas = Family::default();
        registry.register(
            "strata_cachecluster_replicas",
            "Cache node pods of a CacheCluster by state: desired (spec.replicas), current (exist), \
             ready, updated (run the current spec); reported by the leading operator",
            replicas.clone(),
        );
        let conditions = Family::default();
        registry.register(
            "strata_cachecluster_condition",
            "1 while the CacheCluster's status condition is True, else 0 (Available, Progressing, \
             Degraded, Monitoring, Resharding: slots are being migrated)",
            conditions.clone(),
        );
        let topology_epoch = Family::default();
        registry.register(
            "strata_cachecluster_topology_epoch",
            "Cluster mode: the topology epoch the operator last pushed to the CacheCluster's nodes",
            topology_epoch.clone(),
        );
        let slots_covered = Family::default();
        registry.register(
            "strata_cachecluster_slots_covered",
            "Cluster mode: hash slots (of 16384) whose node has applied the current topology; below 16384 some \
             keys cannot be served",
            slots_covered.clone(),
        );
        Self {
            registry,
            reconciliations,
            errors,
            duration,
            leader,
            replicas,
            conditions,
            topology_epoch,
            slots_covered,
        }
    }

    pub fn reconcile_started(&self) {
        self.reconciliations.inc();
    }

    pub fn reconcile_finished(&self, took: Duration, error_reason: Option<&str>) {
        self.duration.observe(took.as_secs_f64());
        if let Some(reason) = error_reason {
            self.errors.get_or_create(&ReasonLabel { reason: reason.to_owned() }).inc();
        }
    }

    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// What the last reconcile of `namespace/name` saw: pod counts by state (see
    /// [`REPLICA_STATES`]) and conditions (type, is it True).
    pub fn set_cluster(&self, namespace: &str, name: &str, replicas: [i32; 4], conditions: &[(&str, bool)]) {
        for (state, n) in REPLICA_STATES.iter().zip(replicas) {
            self.replicas.get_or_create(&replica_labels(namespace, name, state)).set(i64::from(n));
        }
        for condition in CONDITIONS {
            let labels = condition_labels(namespace, name, condition);
            match conditions.iter().find(|(c, _)| *c == condition) {
                Some((_, on)) => {
                    self.conditions.get_or_create(&labels).set(i64::from(*on));
                }
                // Not reported (e.g. no Progressing for an invalid spec): no series, not a stale one.
                None => {
                    self.conditions.remove(&labels);
                }
            }
        }
    }

    /// Cluster mode's topology epoch and slot coverage of `namespace/name`; `None` (independent
    /// caches) removes them.
    pub fn set_topology(&self, namespace: &str, name: &str, topology: Option<(u64, u32)>) {
        let labels = ClusterLabels { namespace: namespace.to_owned(), cachecluster: name.to_owned() };
        match topology {
            Some((epoch, covered)) => {
                self.topology_epoch.get_or_create(&labels).set(i64::try_from(epoch).unwrap_or(i64::MAX));
                self.slots_covered.get_or_create(&labels).set(i64::from(covered));
            }
            None => {
                self.topology_epoch.remove(&labels);
                self.slots_covered.remove(&labels);
            }
        }
    }

    /// Drops the series of a CacheCluster that is gone.
    pub fn forget_cluster(&self, namespace: &str, name: &str) {
        self.set_topology(namespace, name, None);
        for state in REPLICA_STATES {
            self.replicas.remove(&replica_labels(namespace, name, state));
        }
        for condition in CONDITIONS {
            self.conditions.remove(&condition_labels(namespace, name, condition));
        }
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

fn replica_labels(namespace: &str, name: &str, state: &str) -> ReplicaLabels {
    ReplicaLabels { namespace: namespace.to_owned(), cachecluster: name.to_owned(), state: state.to_owned() }
}

fn condition_labels(namespace: &str, name: &str, condition: &str) -> ConditionLabels {
    ConditionLabels { namespace: namespace.to_owned(), cachecluster: name.to_owned(), condition: condition.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_use_prometheus_names() {
        let m = Metrics::new();
        m.reconcile_started();
        m.reconcile_finished(Duration::from_millis(3), Some("Apply"));
        m.set_leader(true);
        let text = m.encode();
        for want in [
            "strata_operator_reconcile_errors_total{reason=\"Read\"} 0",
            "strata_operator_reconciliations_total 1",
            "strata_operator_reconcile_errors_total{reason=\"Apply\"} 1",
            "strata_operator_reconcile_duration_seconds_count 1",
            "strata_operator_leader 1",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
    }

    #[test]
    fn cluster_series_follow_the_last_reconcile_and_go_with_the_cluster() {
        let m = Metrics::new();
        m.set_cluster(
            "apps",
            "demo",
            [3, 3, 2, 1],
            &[("Available", false), ("Progressing", true), ("Degraded", false)],
        );
        m.set_cluster("apps", "other", [1, 1, 1, 1], &[("Available", true)]);
        let text = m.encode();
        for want in [
            "strata_cachecluster_replicas{namespace=\"apps\",cachecluster=\"demo\",state=\"desired\"} 3",
            "strata_cachecluster_replicas{namespace=\"apps\",cachecluster=\"demo\",state=\"ready\"} 2",
            "strata_cachecluster_replicas{namespace=\"apps\",cachecluster=\"demo\",state=\"updated\"} 1",
            "strata_cachecluster_condition{namespace=\"apps\",cachecluster=\"demo\",condition=\"Progressing\"} 1",
            "strata_cachecluster_condition{namespace=\"apps\",cachecluster=\"demo\",condition=\"Available\"} 0",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
        assert!(!text.contains("cachecluster=\"demo\",condition=\"Monitoring\""), "unreported condition:\n{text}");

        // A condition no longer reported loses its series rather than keeping a stale value.
        m.set_cluster("apps", "demo", [3, 3, 3, 3], &[("Available", true)]);
        let text = m.encode();
        assert!(!text.contains("cachecluster=\"demo\",condition=\"Progressing\""), "{text}");

        m.set_topology("apps", "demo", Some((7, 10923)));
        let text = m.encode();
        assert!(
            text.contains("strata_cachecluster_topology_epoch{namespace=\"apps\",cachecluster=\"demo\"} 7"),
            "{text}"
        );
        assert!(
            text.contains("strata_cachecluster_slots_covered{namespace=\"apps\",cachecluster=\"demo\"} 10923"),
            "{text}"
        );

        m.forget_cluster("apps", "demo");
        let text = m.encode();
        assert!(!text.contains("cachecluster=\"demo\""), "series of a deleted cluster remain:\n{text}");
        assert!(text.contains("cachecluster=\"other\",state=\"ready\"} 1"), "{text}");
    }
}
