//! The Prometheus Operator ServiceMonitor and PrometheusRule, built as dynamic objects: their
//! CRDs may not be installed, and the operator does not depend on their Rust types.

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

/// `monitoring.coreos.com/v1` `PrometheusRule` (plural `prometheusrules`).
pub fn prometheus_rule_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("monitoring.coreos.com", "v1", "PrometheusRule");
    ApiResource::from_gvk_with_plural(&gvk, "prometheusrules")
}

/// The repository's alert rules (dashboards/strata.rules.yaml), checked against a real
/// Prometheus by scripts/check-dashboards.sh; the operator ships its `strata-node` group.
const RULES_FILE: &str = include_str!("../../../dashboards/strata.rules.yaml");
/// The group of [`RULES_FILE`] about cache nodes.
const NODE_GROUP: &str = "strata-node";
/// The matcher every node selector of that group carries ("a pod of some CacheCluster"); the
/// operator narrows it to one cluster.
const ANY_CLUSTER: &str = "cachecluster!=\"\"";

/// Pod label the ServiceMonitor copies into the `cachecluster` label of every series.
const INSTANCE_META_LABEL: &str = "__meta_kubernetes_pod_label_app_kubernetes_io_instance";

/// `<name>`: the node alerts of [`RULES_FILE`], each selector narrowed to this cluster's pods.
pub(super) fn prometheus_rule(cc: &CacheCluster, owner: &Owner) -> Result<DynamicObject, SpecError> {
    let rules: serde_json::Value = serde_saphyr::from_str(RULES_FILE)
        .map_err(|e| SpecError::new("monitoring.prometheusRule", format!("the built-in rules do not parse: {e}")))?;
    let mut group = rules["groups"]
        .as_array()
        .and_then(|groups| groups.iter().find(|g| g["name"] == NODE_GROUP))
        .cloned()
        .ok_or_else(|| {
            SpecError::new("monitoring.prometheusRule", format!("no {NODE_GROUP} group in the built-in rules"))
        })?;
    // Owner::of checked the names: DNS labels, nothing to escape in PromQL.
    let scope = format!("namespace=\"{}\", cachecluster=\"{}\"", owner.namespace, owner.name);
    for rule in group["rules"].as_array_mut().into_iter().flatten() {
        if let Some(expr) = rule["expr"].as_str() {
            rule["expr"] = expr.replace(ANY_CLUSTER, &scope).into();
        }
    }
    let mut metadata: ObjectMeta = owner.metadata(owner.name.clone());
    let mut labels = cc.spec.monitoring.labels.clone();
    labels.extend(metadata.labels.take().unwrap_or_default());
    metadata.labels = Some(labels);
    let resource = prometheus_rule_resource();
    Ok(DynamicObject {
        metadata,
        ..DynamicObject::new(&owner.name, &resource).data(json!({ "spec": { "groups": [group] } }))
    })
}

/// `<name>`: scrapes `/metrics` of every pod through the headless Service, which lists pods
/// that are not ready yet too. Series get the label `cachecluster` (the CacheCluster's name),
/// which the dashboards and alert rules select on, besides the usual `namespace` and `pod`.
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
                "endpoints": [{
                    "port": "metrics",
                    "path": "/metrics",
                    "interval": monitoring.interval,
                    "relabelings": [{"sourceLabels": [INSTANCE_META_LABEL], "targetLabel": "cachecluster"}],
                }],
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
                "endpoints": [{
                    "port": "metrics",
                    "path": "/metrics",
                    "interval": "30s",
                    "relabelings": [{
                        "sourceLabels": ["__meta_kubernetes_pod_label_app_kubernetes_io_instance"],
                        "targetLabel": "cachecluster",
                    }],
                }],
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
    fn prometheus_rule_holds_the_node_alerts_of_this_cluster_only() {
        let cc = cluster(json!({"monitoring": {"prometheusRule": true, "labels": {"release": "kps"}}}));
        let object = prometheus_rule(&cc, &Owner::of(&cc).unwrap()).unwrap();
        let types = object.types.clone().unwrap();
        assert_eq!((types.api_version.as_str(), types.kind.as_str()), ("monitoring.coreos.com/v1", "PrometheusRule"));
        assert_eq!(object.metadata.labels.as_ref().unwrap()["release"], "kps");
        let groups = object.data["spec"]["groups"].as_array().unwrap();
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0]["name"], NODE_GROUP);
        let rules = groups[0]["rules"].as_array().unwrap();
        let alerts: Vec<&str> = rules.iter().map(|r| r["alert"].as_str().unwrap()).collect();
        for want in [
            "StrataNodeDown",
            "StrataMemoryNearBudget",
            "StrataLatencyP99High",
            "StrataClusterSlotsUncovered",
            "StrataClusterNoTopology",
        ] {
            assert!(alerts.contains(&want), "{want} missing from {alerts:?}");
        }
        assert!(!alerts.contains(&"StrataNoOperatorLeader"), "operator alerts belong to the chart");
        let scope = format!("namespace=\"{NAMESPACE}\", cachecluster=\"{NAME}\"");
        for rule in rules {
            let expr = rule["expr"].as_str().unwrap();
            assert!(!expr.contains(ANY_CLUSTER), "unscoped selector left in {expr}");
            // Every selector of a metric is narrowed: as many scopes as metric names.
            let metrics = expr.matches("strata_").count() + expr.matches("up{").count();
            assert_eq!(expr.matches(&scope).count(), metrics, "{expr}");
        }
        // The built-in file's own selectors are what the scoping relies on.
        let whole: serde_json::Value = serde_saphyr::from_str(RULES_FILE).unwrap();
        let node = whole["groups"].as_array().unwrap().iter().find(|g| g["name"] == NODE_GROUP).unwrap();
        assert_eq!(node["rules"].as_array().unwrap().len(), rules.len());
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
