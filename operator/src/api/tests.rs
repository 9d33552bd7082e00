use serde_json::{Value, json};

use super::*;
use crate::crd;

/// The generated openAPIV3Schema of the only version, as JSON.
fn schema() -> Value {
    let crd = serde_json::to_value(crd()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

fn spec_schema() -> Value {
    schema()["properties"]["spec"].clone()
}

fn rules_at(node: &Value) -> Vec<Value> {
    node.get("x-kubernetes-validations").and_then(Value::as_array).cloned().unwrap_or_default()
}

#[test]
fn empty_spec_gets_the_documented_defaults() {
    let spec: CacheClusterSpec = serde_json::from_value(json!({})).unwrap();
    assert_eq!(spec, CacheClusterSpec::default());
    assert_eq!(spec.replicas, 1);
    assert_eq!(spec.image, format!("strata-node:{}", env!("CARGO_PKG_VERSION")));
    assert!(!spec.image.ends_with(":latest"));
    assert_eq!(spec.image_pull_policy, ImagePullPolicy::IfNotPresent);
    assert_eq!(spec.eviction_policy, EvictionPolicy::AllkeysLru);
    assert_eq!(spec.durability, DurabilitySpec { mode: DurabilityMode::None, fsync_interval: None });
    assert_eq!(spec.cpu, CpuSpec { pinning: false, threads: None });
    assert_eq!(spec.service.type_, ServiceType::ClusterIp);
    assert_eq!(spec.service.port, 6379);
    assert!(!spec.monitoring.service_monitor);
    assert_eq!(spec.monitoring.interval, "30s");
    assert!(spec.resources.is_none() && spec.max_memory.is_none() && spec.storage.is_none());
    assert!(spec.hugepages.is_none() && spec.auth.is_none() && spec.affinity.is_none());
    assert!(spec.cluster.enabled, "replicas are shards of one cluster unless asked otherwise");

    // The default spec serializes without noise and reads back the same.
    let out = serde_json::to_value(&spec).unwrap();
    assert_eq!(
        out,
        json!({
            "replicas": 1,
            "image": DEFAULT_IMAGE,
            "imagePullPolicy": "IfNotPresent",
            "evictionPolicy": "allkeys-lru",
            "durability": {"mode": "none"},
            "cpu": {"pinning": false},
            "service": {"type": "ClusterIP", "port": 6379},
            "monitoring": {"serviceMonitor": false, "prometheusRule": false, "interval": "30s"},
            "cluster": {"enabled": true},
        })
    );
    assert_eq!(serde_json::from_value::<CacheClusterSpec>(out).unwrap(), spec);
}

#[test]
fn partial_nested_objects_take_defaults() {
    let spec: CacheClusterSpec = serde_json::from_value(json!({
        "durability": {"mode": "periodic"},
        "service": {"type": "LoadBalancer"},
        "monitoring": {"serviceMonitor": true},
        "auth": {"passwordSecretRef": {"name": "cache-pw"}},
    }))
    .unwrap();
    assert_eq!(spec.durability.mode, DurabilityMode::Periodic);
    assert_eq!(spec.service.port, 6379);
    assert_eq!(spec.monitoring.interval, "30s");
    assert_eq!(spec.auth.unwrap().password_secret_ref.key, "password");
}

/// Every serde default is also a schema default, so objects the API server stores (and
/// `kubectl get -o yaml` shows) carry the same values the operator assumes.
#[test]
fn schema_defaults_match_serde_defaults() {
    fn check(schema: &Value, value: &Value, path: &str) {
        let Value::Object(fields) = value else { return };
        for (name, v) in fields {
            let prop = &schema["properties"][name];
            assert!(prop.is_object(), "{path}.{name} missing from the schema");
            assert_eq!(prop.get("default"), Some(v), "schema default of {path}.{name}");
            check(prop, v, &format!("{path}.{name}"));
        }
    }
    let spec = spec_schema();
    check(&spec, &serde_json::to_value(CacheClusterSpec::default()).unwrap(), "spec");
    let key = &spec["properties"]["auth"]["properties"]["passwordSecretRef"]["properties"]["key"];
    assert_eq!(key["default"], "password");
}

#[test]
fn full_manifest_uses_kubectl_style_field_names() {
    let manifest = json!({
        "apiVersion": "strata.dev/v1alpha1",
        "kind": "CacheCluster",
        "metadata": {"name": "sessions", "namespace": "web"},
        "spec": {
            "replicas": 3,
            "image": "strata-node:0.1.0",
            "imagePullPolicy": "Always",
            "resources": {"limits": {"cpu": "2", "memory": "4Gi"}, "requests": {"cpu": "2", "memory": "4Gi"}},
            "maxMemory": "3Gi",
            "storage": {"size": "20Gi", "storageClassName": "local-nvme", "diskBudget": "16Gi"},
            "evictionPolicy": "sieve",
            "durability": {"mode": "periodic", "fsyncInterval": "1s"},
            "cpu": {"pinning": true, "threads": 2},
            "hugepages": {"pageSize": "2Mi", "amount": "512Mi"},
            "service": {"type": "NodePort", "port": 7000, "annotations": {"a": "b"}},
            "auth": {"passwordSecretRef": {"name": "pw", "key": "secret"}},
            "monitoring": {"serviceMonitor": true, "prometheusRule": true, "interval": "15s", "labels": {"release": "prom"}},
            "cluster": {"enabled": false},
            "nodeSelector": {"disk": "nvme"},
            "tolerations": [{"key": "cache", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 100,
                "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}
            }]}},
            "topologySpreadConstraints": [{
                "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"
            }],
            "priorityClassName": "high",
            "podLabels": {"team": "web"},
            "podAnnotations": {"note": "x"},
        },
        "status": {
            "observedGeneration": 4,
            "replicas": 3,
            "readyReplicas": 2,
            "selector": "app.kubernetes.io/instance=sessions",
            "endpoint": "sessions.web.svc:7000",
            "topologyEpoch": 7,
            "shards": 3,
            "slotsCovered": 10923,
            "nodes": [{"pod": "sessions-0", "id": "a9993e364706816aba3e25717850c26c9cd0d89d", "ip": "10.0.0.1", "appliedEpoch": 7}],
            "conditions": [{
                "type": "Available", "status": "False", "reason": "RollingUpdate", "message": "2/3 ready",
                "lastTransitionTime": "2026-01-02T03:04:05Z", "observedGeneration": 4
            }]
        }
    });
    let cc: CacheCluster = serde_json::from_value(manifest.clone()).unwrap();
    let s = &cc.spec;
    assert_eq!(s.replicas, 3);
    assert_eq!(s.eviction_policy, EvictionPolicy::Sieve);
    assert_eq!(s.durability.fsync_interval.as_deref(), Some("1s"));
    assert_eq!(s.hugepages.as_ref().unwrap().page_size, HugepageSize::Size2Mi);
    assert_eq!(s.hugepages.as_ref().unwrap().page_size.resource_name(), "hugepages-2Mi");
    assert_eq!(s.service.type_, ServiceType::NodePort);
    assert_eq!(s.storage.as_ref().unwrap().disk_budget.as_ref().unwrap().0, "16Gi");
    let status = cc.status.as_ref().unwrap();
    assert_eq!(status.conditions[0].type_, Condition::AVAILABLE);
    assert_eq!(status.conditions[0].status, ConditionStatus::False);
    assert!(!s.cluster.enabled);
    assert_eq!((status.topology_epoch, status.shards, status.slots_covered), (Some(7), Some(3), Some(10923)));
    assert_eq!(status.nodes[0].applied_epoch, Some(7));
    // Nothing is lost or renamed on the way back.
    assert_eq!(serde_json::to_value(&cc).unwrap(), manifest);
}

#[test]
fn enum_names_match_the_node_flags() {
    let names: Vec<Value> = EvictionPolicy::ALL.iter().map(|p| serde_json::to_value(p).unwrap()).collect();
    let flags: Vec<&str> = EvictionPolicy::ALL.iter().map(|p| p.as_str()).collect();
    // The operator passes these to `strata-node --maxmemory-policy`: they must
    // be exactly the policies the node accepts.
    assert_eq!(flags, strata_node::config::POLICIES);
    assert_eq!(names, flags.iter().map(|f| json!(f)).collect::<Vec<_>>());
    assert_eq!(spec_schema()["properties"]["evictionPolicy"]["enum"], json!(flags));

    for mode in [DurabilityMode::None, DurabilityMode::WriteBack, DurabilityMode::Periodic, DurabilityMode::Sync] {
        assert_eq!(serde_json::to_value(mode).unwrap(), json!(mode.as_str()));
    }
    let durability = &spec_schema()["properties"]["durability"]["properties"];
    assert_eq!(durability["mode"]["enum"], json!(["none", "write-back", "periodic", "sync"]));
    let props = spec_schema()["properties"].clone();
    assert_eq!(props["imagePullPolicy"]["enum"], json!(["Always", "IfNotPresent", "Never"]));
    assert_eq!(props["service"]["properties"]["type"]["enum"], json!(["ClusterIP", "NodePort", "LoadBalancer"]));
    assert_eq!(props["hugepages"]["properties"]["pageSize"]["enum"], json!(["2Mi", "1Gi"]));
}

#[test]
fn crd_names_scope_and_subresources() {
    let crd = serde_json::to_value(crd()).unwrap();
    assert_eq!(crd["metadata"]["name"], "cacheclusters.strata.dev");
    let spec = &crd["spec"];
    assert_eq!(spec["group"], "strata.dev");
    assert_eq!(spec["scope"], "Namespaced");
    assert_eq!(spec["names"]["kind"], "CacheCluster");
    assert_eq!(spec["names"]["plural"], "cacheclusters");
    assert_eq!(spec["names"]["singular"], "cachecluster");
    assert_eq!(spec["names"]["shortNames"], json!(["scc"]));
    assert_eq!(spec["versions"].as_array().unwrap().len(), 1);
    let v = &spec["versions"][0];
    assert_eq!(v["name"], "v1alpha1");
    assert_eq!(v["served"], true);
    assert_eq!(v["storage"], true);
    assert_eq!(v["subresources"]["status"], json!({}));
    assert_eq!(
        v["subresources"]["scale"],
        json!({
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        })
    );
    let columns: Vec<(String, String, String)> = v["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["type"].as_str().unwrap().to_owned(),
                c["jsonPath"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("Ready", "string", r#".status.conditions[?(@.type=="Available")].status"#),
        ("Ready-Replicas", "integer", ".status.readyReplicas"),
        ("Replicas", "integer", ".spec.replicas"),
        ("Shards", "integer", ".status.shards"),
        ("Slots", "integer", ".status.slotsCovered"),
        ("Memory", "string", ".spec.resources.limits.memory"),
        ("Eviction", "string", ".spec.evictionPolicy"),
        ("Durability", "string", ".spec.durability.mode"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ];
    assert_eq!(columns, expected.map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned())));
}

#[test]
fn schema_has_bounds_and_patterns() {
    let props = spec_schema()["properties"].clone();
    let num = |v: &Value| v.as_f64().unwrap();
    assert_eq!(num(&props["replicas"]["minimum"]), 1.0);
    assert_eq!(props["replicas"]["default"], 1);
    assert_eq!(num(&props["cpu"]["properties"]["threads"]["minimum"]), 1.0);
    assert_eq!(num(&props["service"]["properties"]["port"]["minimum"]), 1.0);
    assert_eq!(num(&props["service"]["properties"]["port"]["maximum"]), 65535.0);
    assert_eq!(props["durability"]["properties"]["fsyncInterval"]["pattern"], r"^[1-9][0-9]*(us|ms|s)$");
    assert_eq!(props["monitoring"]["properties"]["interval"]["pattern"], r"^([0-9]+(ms|s|m|h))+$");
    assert_eq!(props["maxMemory"]["x-kubernetes-int-or-string"], true);
    assert_eq!(props["storage"]["required"], json!(["size"]));
    assert_eq!(props["hugepages"]["required"], json!(["amount", "pageSize"]));
    let conditions = &schema()["properties"]["status"]["properties"]["conditions"];
    assert_eq!(conditions["x-kubernetes-list-type"], "map");
    assert_eq!(conditions["x-kubernetes-list-map-keys"], json!(["type"]));
}

/// Every field users write has a description (what `kubectl explain` shows).
#[test]
fn every_own_field_is_documented() {
    fn check(node: &Value, path: &str) {
        if let Some(props) = node.get("properties").and_then(Value::as_object) {
            for (name, prop) in props {
                let p = format!("{path}.{name}");
                let desc = prop.get("description").and_then(Value::as_str).unwrap_or("");
                assert!(!desc.trim().is_empty(), "{p} has no description");
                assert!(!desc.replace("\n\n", "").contains('\n'), "{p}: hard-wrapped description");
                // Embedded Kubernetes types are documented upstream; do not walk into them.
                if !["resources", "tolerations", "affinity", "topologySpreadConstraints"].contains(&name.as_str()) {
                    check(prop, &p);
                }
            }
        }
    }
    check(&spec_schema(), "spec");
    check(&schema()["properties"]["status"], "status");
}

#[test]
fn the_tls_port_rules_spell_the_operators_ports() {
    let rule = SPEC_RULES.iter().find(|r| r.field_path == Some(".tls.port")).expect("the TLS port collision rule");
    for (port, what) in [
        (DEFAULT_TLS_PORT, "DEFAULT_TLS_PORT"),
        (DEFAULT_PORT, "DEFAULT_PORT"),
        (crate::resources::DIRECT_PORT, "DIRECT_PORT"),
    ] {
        assert!(rule.rule.contains(&port.to_string()), "{what} ({port}) is not in {:?}", rule.rule);
        assert!(rule.message.contains(&port.to_string()) || port == DEFAULT_PORT, "{what}: {:?}", rule.message);
    }
    // tls.port has no schema default (it is refused without allowPlaintext); allowPlaintext
    // defaults to false, TLS only.
    let tls = &spec_schema()["properties"]["tls"]["properties"];
    assert!(tls["port"].get("default").is_none(), "{}", tls["port"]);
    assert_eq!((tls["port"]["minimum"].as_f64(), tls["port"]["maximum"].as_f64()), (Some(1.0), Some(65535.0)));
    assert_eq!(tls["allowPlaintext"]["default"], json!(false));
    let spec: TlsSpec = serde_json::from_value(json!({"secretName": "c"})).unwrap();
    assert_eq!((spec.allow_plaintext, spec.port, spec.side_port()), (false, None, None));
    let spec: TlsSpec = serde_json::from_value(json!({"secretName": "c", "allowPlaintext": true})).unwrap();
    assert_eq!(spec.side_port(), Some(DEFAULT_TLS_PORT));
}

#[test]
fn every_cel_rule_and_message_is_in_the_schema() {
    let spec = spec_schema();
    let props = &spec["properties"];
    for (node, table) in [
        (&spec, SPEC_RULES),
        (&props["storage"], STORAGE_RULES),
        (&props["durability"], DURABILITY_RULES),
        (&props["hugepages"], HUGEPAGES_RULES),
        (&props["tls"], TLS_RULES),
    ] {
        let present = rules_at(node);
        assert_eq!(present.len(), table.len());
        for rule in table {
            assert!(present.contains(&rule.to_json()), "missing rule {rule:?}");
            // The API server rejects messages with line breaks; a message must say how to fix.
            assert!(!rule.message.contains('\n') && !rule.rule.contains('\n'));
            assert!(rule.message.len() > 20);
            let path = rule.field_path.unwrap();
            let field = path.trim_start_matches('.').split('.').next().unwrap();
            assert!(node["properties"][field].is_object(), "fieldPath {path} names no field");
        }
    }
    let spec_rules = rules_at(&spec);
    let pinning = spec_rules.iter().find(|r| r["fieldPath"] == ".cpu.pinning").unwrap();
    assert!(pinning["message"].as_str().unwrap().contains("whole number of CPUs (e.g. \"2\")"));
    assert!(pinning["rule"].as_str().unwrap().contains("isInteger()"));
    let storage = spec_rules.iter().find(|r| r["fieldPath"] == ".storage").unwrap();
    assert_eq!(storage["reason"], "FieldValueRequired");
    assert_eq!(storage["rule"], "!has(self.durability) || self.durability.mode == 'none' || has(self.storage)");
}

/// The API server only takes structural schemas: every node has a type, except int-or-string
/// and preserve-unknown-fields nodes; no references are left.
#[test]
fn schema_is_structural() {
    fn walk(node: &Value, path: &str) {
        let Value::Object(map) = node else { panic!("{path} is not an object") };
        assert!(!map.contains_key("$ref"), "{path} still has a $ref");
        for key in ["oneOf", "anyOf", "allOf", "not"] {
            if let Some(Value::Array(alts)) = map.get(key) {
                for alt in alts {
                    let Value::Object(alt) = alt else { continue };
                    for k in ["type", "description", "default", "properties", "items"] {
                        assert!(!alt.contains_key(k), "{path}.{key} sets {k}");
                    }
                }
            }
        }
        let typed = map.contains_key("type")
            || map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
            || map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
        assert!(typed, "{path} has no type");
        if let Some(Value::Object(props)) = map.get("properties") {
            for (name, prop) in props {
                walk(prop, &format!("{path}.{name}"));
            }
        }
        if let Some(items) = map.get("items") {
            walk(items, &format!("{path}[]"));
        }
        if let Some(add @ Value::Object(_)) = map.get("additionalProperties") {
            walk(add, &format!("{path}{{}}"));
        }
    }
    walk(&schema(), "");
}

#[test]
fn condition_constants() {
    assert_eq!(Condition::AVAILABLE, "Available");
    assert_eq!(Condition::PROGRESSING, "Progressing");
    assert_eq!(Condition::DEGRADED, "Degraded");
    assert_eq!(serde_json::to_value(ConditionStatus::Unknown).unwrap(), "Unknown");
}
