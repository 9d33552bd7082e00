use serde_json::{Value, json};

use super::test_support::{NAME, NAMESPACE, UID, cluster};
use super::*;

fn full_spec() -> Value {
    json!({
        "replicas": 3,
        "resources": {"limits": {"cpu": "2", "memory": "2Gi"}, "requests": {"cpu": "2", "memory": "2Gi"}},
        "storage": {"size": "10Gi", "storageClassName": "fast"},
        "durability": {"mode": "periodic", "fsyncInterval": "1s"},
        "cpu": {"pinning": true},
        "hugepages": {"pageSize": "2Mi", "amount": "256Mi"},
        "service": {"type": "LoadBalancer", "port": 6380, "annotations": {"a": "b"}},
        "auth": {"passwordSecretRef": {"name": "pw"}},
        "monitoring": {"serviceMonitor": true, "labels": {"release": "prom"}},
        "nodeSelector": {"disk": "nvme"},
        "podLabels": {"team": "shop"},
        "podAnnotations": {"team": "shop"},
    })
}

/// Every object of `desired` as JSON, as it would be sent to the API server.
fn manifests(desired: &Desired) -> Vec<Value> {
    let mut all = vec![
        serde_json::to_value(&desired.config_map).unwrap(),
        serde_json::to_value(&desired.headless_service).unwrap(),
        serde_json::to_value(&desired.client_service).unwrap(),
        serde_json::to_value(&desired.stateful_set).unwrap(),
        serde_json::to_value(&desired.pdb).unwrap(),
    ];
    all.extend(desired.service_monitor.iter().map(|m| serde_json::to_value(m).unwrap()));
    all.extend(desired.prometheus_rule.iter().map(|r| serde_json::to_value(r).unwrap()));
    all
}

#[test]
fn selector_labels_and_string() {
    assert_eq!(
        serde_json::to_value(selector_labels("web")).unwrap(),
        json!({"app.kubernetes.io/name": "strata-node", "app.kubernetes.io/instance": "web"})
    );
    assert_eq!(selector_string("web"), "app.kubernetes.io/instance=web,app.kubernetes.io/name=strata-node");
}

#[test]
fn endpoint_uses_the_service_port() {
    assert_eq!(endpoint(&cluster(json!({}))), "cache.shop.svc:6379");
    assert_eq!(endpoint(&cluster(json!({"service": {"port": 7000}}))), "cache.shop.svc:7000");
}

#[test]
fn the_tls_endpoint_is_the_endpoint_for_tls_only_and_the_tls_port_beside_plain_text() {
    assert_eq!(tls_endpoint(&cluster(json!({}))), None);
    let only = cluster(json!({"service": {"port": 7000}, "tls": {"secretName": "c"}}));
    assert_eq!(
        (endpoint(&only), tls_endpoint(&only).as_deref()),
        ("cache.shop.svc:7000".to_owned(), Some("cache.shop.svc:7000"))
    );
    let both = cluster(json!({"tls": {"secretName": "c", "allowPlaintext": true}}));
    assert_eq!(
        (endpoint(&both), tls_endpoint(&both).as_deref()),
        ("cache.shop.svc:6379".to_owned(), Some("cache.shop.svc:6390"))
    );
    let both = cluster(json!({"tls": {"secretName": "c", "allowPlaintext": true, "port": 6443}}));
    assert_eq!(tls_endpoint(&both).as_deref(), Some("cache.shop.svc:6443"));
}

#[test]
fn objects_have_the_documented_names_and_kinds() {
    let desired = desired(&cluster(full_spec())).unwrap();
    let identities: Vec<_> = manifests(&desired)
        .iter()
        .map(|m| {
            format!(
                "{} {} {}",
                m["apiVersion"].as_str().unwrap(),
                m["kind"].as_str().unwrap(),
                m["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        identities,
        [
            "v1 ConfigMap cache-config",
            "v1 Service cache-headless",
            "v1 Service cache",
            "apps/v1 StatefulSet cache",
            "policy/v1 PodDisruptionBudget cache",
            "monitoring.coreos.com/v1 ServiceMonitor cache",
        ]
    );
}

#[test]
fn every_object_is_namespaced_labelled_and_owned() {
    let desired = desired(&cluster(full_spec())).unwrap();
    for manifest in manifests(&desired) {
        let kind = &manifest["kind"];
        let metadata = &manifest["metadata"];
        assert_eq!(metadata["namespace"], NAMESPACE, "{kind}");
        for (key, value) in [
            ("app.kubernetes.io/name", "strata-node"),
            ("app.kubernetes.io/instance", NAME),
            ("app.kubernetes.io/component", "cache"),
            ("app.kubernetes.io/part-of", "strata"),
            ("app.kubernetes.io/managed-by", "strata-operator"),
        ] {
            assert_eq!(metadata["labels"][key], value, "{kind} label {key}");
        }
        assert_eq!(
            metadata["ownerReferences"],
            json!([{
                "apiVersion": "strata.dev/v1alpha1",
                "kind": "CacheCluster",
                "name": NAME,
                "uid": UID,
                "controller": true,
                "blockOwnerDeletion": true,
            }]),
            "{kind}"
        );
        assert!(manifest.get("status").is_none(), "{kind} carries no status");
    }
}

#[test]
fn config_map_holds_the_node_config() {
    let cc = cluster(full_spec());
    let desired = desired(&cc).unwrap();
    let data = desired.config_map.data.unwrap();
    assert_eq!(data.keys().collect::<Vec<_>>(), ["strata.conf"]);
    assert_eq!(data["strata.conf"], node_config(&cc).unwrap());
}

#[test]
fn service_monitor_only_when_asked() {
    assert!(desired(&cluster(json!({}))).unwrap().service_monitor.is_none());
    assert!(desired(&cluster(json!({"monitoring": {"serviceMonitor": true}}))).unwrap().service_monitor.is_some());
    // Its settings are not checked while it is off.
    assert!(desired(&cluster(json!({"monitoring": {"interval": "soon"}}))).is_ok());
}

#[test]
fn prometheus_rule_only_when_asked() {
    assert!(desired(&cluster(json!({}))).unwrap().prometheus_rule.is_none());
    let both = desired(&cluster(json!({"monitoring": {"prometheusRule": true}}))).unwrap();
    assert!(both.prometheus_rule.is_some());
    assert!(both.service_monitor.is_none(), "each is asked for on its own");
}

#[test]
fn same_input_gives_byte_identical_output() {
    let first = manifests(&desired(&cluster(full_spec())).unwrap());
    for _ in 0..3 {
        let again = manifests(&desired(&cluster(full_spec())).unwrap());
        assert_eq!(serde_json::to_string(&again).unwrap(), serde_json::to_string(&first).unwrap());
    }
}

#[test]
fn spec_errors_from_every_builder_reach_desired() {
    let field = |spec: Value| desired(&cluster(spec)).unwrap_err().field;
    assert_eq!(field(json!({"maxMemory": "x"})), "maxMemory");
    assert_eq!(field(json!({"durability": {"mode": "sync"}})), "storage");
    assert_eq!(field(json!({"service": {"port": 0}})), "service.port");
    assert_eq!(field(json!({"monitoring": {"serviceMonitor": true, "interval": "soon"}})), "monitoring.interval");
}

#[test]
fn metadata_the_builders_need_is_checked() {
    let without = |pointer: &str| {
        let mut cc = serde_json::to_value(cluster(json!({}))).unwrap();
        cc.pointer_mut("/metadata").unwrap().as_object_mut().unwrap().remove(pointer);
        desired(&serde_json::from_value(cc).unwrap()).unwrap_err()
    };
    assert_eq!(without("name").field, "metadata.name");
    assert_eq!(without("namespace").field, "metadata.namespace");
    let err = without("uid");
    assert_eq!(err.field, "metadata.uid");
    assert!(err.to_string().starts_with("metadata.uid: "), "{err}");
}

#[test]
fn names_must_fit_the_objects() {
    let named = |name: &str| {
        let mut cc = cluster(json!({}));
        cc.metadata.name = Some(name.to_owned());
        desired(&cc)
    };
    assert!(named(&"a".repeat(MAX_NAME_LENGTH)).is_ok());
    let err = named(&"a".repeat(MAX_NAME_LENGTH + 1)).unwrap_err();
    assert_eq!(err.field, "metadata.name");
    assert!(err.message.contains("at most 52"), "{err}");
    for name in ["1cache", "cache.v2", "Cache", "cache-", "-cache"] {
        assert_eq!(named(name).unwrap_err().field, "metadata.name", "{name}");
    }
    assert!(named("cache-2").is_ok());
}

#[test]
fn spec_error_display_names_the_spec_field() {
    let err = SpecError::new("cpu.threads", "too many");
    assert_eq!(err.to_string(), "spec.cpu.threads: too many");
}

#[test]
fn fnv1a_matches_the_reference_vectors() {
    assert_eq!(fnv1a_64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a_64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a_64(b"foobar"), 0x8594_4171_f739_67e8);
}
