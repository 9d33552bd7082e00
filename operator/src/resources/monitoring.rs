//! The Prometheus Operator ServiceMonitor, built as a dynamic object: its CRD may not be
//! installed, and the operator does not depend on its Rust types.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::json;

use super::{Owner, SERVICE_ROLE_LABEL, SpecError, selector_labels};
use crate::api::CacheCluster;

/// `monitoring.coreos.com/v1` `ServiceMonitor` (plural `servicemonitors`).
pub fn service_monitor_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("monitoring.coreos.com", "v1", "ServiceMonitor");
    ApiResource::from_gvk_with_plural(&gvk, "servicemonitors")
}

/// `<name>`: scrapes `/metrics` of every pod through the headless Service, which lists pods
/// that are not ready yet too.
pub(super) fn service_monitor(cc: &CacheCluster, owner: &Owner) -> Result<DynamicObject, SpecError> {
    let monitoring = &cc.spec.monitoring;
    if !is_prometheus_duration(&monitoring.interval) {
        return Err(SpecError::new(
            "monitoring.interval",
            format!("{:?} is not a Prometheus duration: use e.g. \"30s\", \"1m\" or \"1m30s\"", monitoring.interval),
        ));
    }
    let mut metadata: ObjectMeta = owner.metadata(owner.name.clone());
    // Extra labels first so ours win.
    let mut labels = monitoring.labels.clone();
    labels.extend(metadata.labels.take().unwrap_or_default());
    metadata.labels = Some(labels);
    let mut match_labels = selector_labels(&owner.name);
    match_labels.insert(SERVICE_ROLE_LABEL.to_owned(), "headless".to_owned());
    let resource = service_monitor_resource();
    Ok(DynamicObject {
        metadata,
        ..DynamicObject::new(&owner.name, &resource).data(json!({
            "spec": {
                "selector": {"matchLabels": match_labels},
                "namespaceSelector": {"matchNames": [owner.namespace]},
                "endpoints": [{"port": "metrics", "path": "/metrics", "interval": monitoring.interval}],
            }
        }))
    })
}

/// What the CRD's pattern `^([0-9]+(ms|s|m|h))+$` accepts: one or more number-unit pairs.
fn is_prometheus_duration(text: &str) -> bool {
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return false;
        }
        rest = &rest[digits..];
        let Some(unit) = ["ms", "s", "m", "h"].into_iter().find(|unit| rest.starts_with(unit)) else { return false };
        rest = &rest[unit.len()..];
    }
    !text.is_empty()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::resources::test_support::{NAME, NAMESPACE, cluster};

    fn monitor(monitoring: Value) -> Result<DynamicObject, SpecError> {
        let cc = cluster(json!({"monitoring": monitoring}));
        service_monitor(&cc, &Owner::of(&cc).unwrap())
    }

    #[test]
    fn resource_is_the_prometheus_operator_service_monitor() {
        let resource = service_monitor_resource();
        assert_eq!(resource.group, "monitoring.coreos.com");
        assert_eq!(resource.version, "v1");
        assert_eq!(resource.api_version, "monitoring.coreos.com/v1");
        assert_eq!(resource.kind, "ServiceMonitor");
        assert_eq!(resource.plural, "servicemonitors");
    }

    #[test]
    fn scrapes_the_headless_service_metrics_port() {
        let object = monitor(json!({"serviceMonitor": true})).unwrap();
        let types = object.types.clone().unwrap();
        assert_eq!((types.api_version.as_str(), types.kind.as_str()), ("monitoring.coreos.com/v1", "ServiceMonitor"));
        assert_eq!(object.metadata.name.as_deref(), Some(NAME));
        assert_eq!(
            object.data,
            json!({"spec": {
                "selector": {"matchLabels": {
                    "app.kubernetes.io/instance": NAME,
                    "app.kubernetes.io/name": "strata-node",
                    "strata.dev/service": "headless",
                }},
                "namespaceSelector": {"matchNames": [NAMESPACE]},
                "endpoints": [{"port": "metrics", "path": "/metrics", "interval": "30s"}],
            }})
        );
        // Serialized, the object is a complete ServiceMonitor manifest.
        let manifest = serde_json::to_value(&object).unwrap();
        assert_eq!(manifest["apiVersion"], "monitoring.coreos.com/v1");
        assert_eq!(manifest["kind"], "ServiceMonitor");
        assert_eq!(manifest["spec"]["endpoints"][0]["port"], "metrics");
    }

    #[test]
    fn interval_and_extra_labels_come_from_the_spec() {
        let labels = json!({"release": "kube-prometheus", "app.kubernetes.io/name": "mine"});
        let object = monitor(json!({"serviceMonitor": true, "interval": "1m30s", "labels": labels})).unwrap();
        assert_eq!(object.data["spec"]["endpoints"][0]["interval"], "1m30s");
        let labels = object.metadata.labels.unwrap();
        assert_eq!(labels["release"], "kube-prometheus");
        assert_eq!(labels["app.kubernetes.io/name"], "strata-node", "ours win");
        assert_eq!(labels["app.kubernetes.io/managed-by"], "strata-operator");
    }

    #[test]
    fn interval_is_checked() {
        for interval in ["", "30", "s", "30sec", "1.5m", "-1s", "30s "] {
            let err = monitor(json!({"serviceMonitor": true, "interval": interval})).expect_err(interval);
            assert_eq!(err.field, "monitoring.interval");
        }
        for interval in ["30s", "100ms", "1h", "1h30m5s"] {
            assert!(monitor(json!({"serviceMonitor": true, "interval": interval})).is_ok(), "{interval}");
        }
    }
}
