//! The operator's own Prometheus metrics (`strata_operator_*`), served on `/metrics`.

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

/// Counters and histograms the controller and the leader elector update.
pub struct Metrics {
    registry: Registry,
    reconciliations: Counter,
    errors: Family<ReasonLabel, Counter>,
    duration: Histogram,
    leader: Gauge<i64, AtomicI64>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("strata_operator");
        let reconciliations = Counter::default();
        registry.register("reconciliations", "CacheCluster reconciliations started", reconciliations.clone());
        let errors = Family::<ReasonLabel, Counter>::default();
        registry.register("reconcile_errors", "Reconciliations that failed, by reason", errors.clone());
        // 1 ms .. ~16 s: a reconcile is a handful of API calls.
        let duration = Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(0.001, 2.0, 15));
        registry.register_with_unit(
            "reconcile_duration",
            "Time one reconciliation took",
            prometheus_client::registry::Unit::Seconds,
            duration.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this instance holds the leader Lease and runs the controller",
            leader.clone(),
        );
        Self { registry, reconciliations, errors, duration, leader }
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

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
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
            "strata_operator_reconciliations_total 1",
            "strata_operator_reconcile_errors_total{reason=\"Apply\"} 1",
            "strata_operator_reconcile_duration_seconds_count 1",
            "strata_operator_leader 1",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
    }
}
