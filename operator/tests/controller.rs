//! The controller against a real kube-apiserver and etcd (see `support`): what it creates, the
//! status it reports, what it refuses, and leader election between two operator processes.

mod support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Service, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;
use strata_operator::api::{CacheCluster, Condition, ConditionStatus};
use support::{ControlPlane, eventually};

const WAIT: Duration = Duration::from_secs(60);

fn condition(cc: &CacheCluster, type_: &str) -> Option<Condition> {
    cc.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_).cloned()
}

async fn apply_cc(api: &Api<CacheCluster>, name: &str, spec: serde_json::Value) {
    let obj = json!({ "apiVersion": "strata.dev/v1alpha1", "kind": "CacheCluster", "metadata": { "name": name }, "spec": spec });
    api.patch(name, &PatchParams::apply("strata-test").force(), &Patch::Apply(&obj))
        .await
        .expect("applying the CacheCluster");
}

/// Waits until the operator has written status for the current generation.
async fn observed(api: &Api<CacheCluster>, name: &str, generation: i64) -> CacheCluster {
    eventually(WAIT, &format!("status.observedGeneration {generation} on {name}"), || async {
        let cc = api.get(name).await.ok()?;
        (cc.status.as_ref()?.observed_generation == Some(generation)).then_some(cc)
    })
    .await
}

async fn events_for(ns: &str, name: &str) -> Vec<Event> {
    let client = ControlPlane::get().client().await;
    let api: Api<Event> = Api::namespaced(client, ns);
    let all = api.list(&ListParams::default()).await.unwrap().items;
    // About the CacheCluster only: the API server reports on the objects the
    // operator owns under the same name too (its ipallocator-repair-controller's
    // ClusterIPNotAllocated about the Service `<name>`, seen in a CI run).
    let about = |e: &Event| {
        e.regarding
            .as_ref()
            .is_some_and(|r| r.name.as_deref() == Some(name) && r.kind.as_deref() == Some("CacheCluster"))
    };
    all.into_iter().filter(about).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn cachecluster_gets_owned_objects_status_and_events() {
    let plane = ControlPlane::get();
    let ns = plane.namespace("owned");
    let _op = plane.operator("owned", &["--leader-elect=false", "--watch-namespace", &ns]);
    let client = plane.client().await;
    let ccs: Api<CacheCluster> = Api::namespaced(client.clone(), &ns);
    apply_cc(
        &ccs,
        "demo",
        json!({ "resources": { "limits": { "memory": "256Mi" } }, "evictionPolicy": "allkeys-lfu" }),
    )
    .await;

    let cc = observed(&ccs, "demo", 1).await;
    let uid = cc.uid().unwrap();
    let owned_by_cc = |meta: &kube::api::ObjectMeta| {
        meta.owner_references.iter().flatten().any(|o| {
            o.uid == uid
                && o.kind == "CacheCluster"
                && o.controller == Some(true)
                && o.block_owner_deletion == Some(true)
        })
    };
    let sts: StatefulSet = Api::namespaced(client.clone(), &ns).get("demo").await.expect("StatefulSet demo");
    assert!(owned_by_cc(sts.meta()), "StatefulSet owner refs: {:?}", sts.metadata.owner_references);
    assert_eq!(sts.spec.as_ref().unwrap().replicas, Some(1));
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    for svc in ["demo", "demo-headless"] {
        let s = services.get(svc).await.unwrap_or_else(|e| panic!("Service {svc}: {e}"));
        assert!(owned_by_cc(s.meta()), "Service {svc} not owned");
    }
    let headless = services.get("demo-headless").await.unwrap();
    assert_eq!(headless.spec.unwrap().cluster_ip.as_deref(), Some("None"));
    let cm: ConfigMap = Api::namespaced(client.clone(), &ns).get("demo-config").await.expect("ConfigMap");
    assert!(owned_by_cc(cm.meta()));
    let conf = cm.data.unwrap().get("strata.conf").cloned().expect("strata.conf key");
    assert!(conf.contains("maxmemory-policy allkeys-lfu"), "{conf}");
    // (256Mi - 32Mi) / 1.25
    assert!(conf.contains(&format!("maxmemory {}", ((256u64 << 20) - (32 << 20)) * 4 / 5)), "{conf}");
    let pdb: PodDisruptionBudget = Api::namespaced(client.clone(), &ns).get("demo").await.expect("PDB");
    assert!(owned_by_cc(pdb.meta()));

    // Every object is under the operator's field manager (server-side apply).
    let managers: Vec<String> =
        sts.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.clone()).collect();
    assert!(managers.iter().any(|m| m == "strata-operator"), "managers: {managers:?}");

    let status = cc.status.clone().unwrap();
    assert_eq!(status.endpoint.as_deref(), Some(format!("demo.{ns}.svc:6379").as_str()));
    assert!(status.selector.as_deref().unwrap().contains("app.kubernetes.io/instance=demo"));
    // No kubelet here, so no pod ever becomes ready: not Available, still progressing.
    let available = condition(&cc, "Available").expect("Available condition");
    assert_eq!(available.status, ConditionStatus::False);
    assert_eq!(available.message, "0/1 pods ready");
    assert_eq!(condition(&cc, "Progressing").expect("Progressing").status, ConditionStatus::True);
    assert_eq!(condition(&cc, "Degraded").expect("Degraded").status, ConditionStatus::False);
    assert_eq!(available.observed_generation, Some(1));

    // Scaling through the scale subresource reaches the StatefulSet.
    let out = plane.kubectl(&["-n", &ns, "scale", "cachecluster/demo", "--replicas=3"]);
    assert!(out.success, "kubectl scale: {}", out.stderr);
    let sts_api: Api<StatefulSet> = Api::namespaced(client.clone(), &ns);
    eventually(WAIT, "StatefulSet scaled to 3", || async {
        (sts_api.get("demo").await.ok()?.spec?.replicas == Some(3)).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn spec_change_reaches_the_statefulset_and_moves_observed_generation() {
    let plane = ControlPlane::get();
    let ns = plane.namespace("change");
    let _op = plane.operator("change", &["--leader-elect=false", "--watch-namespace", &ns]);
    let client = plane.client().await;
    let ccs: Api<CacheCluster> = Api::namespaced(client.clone(), &ns);
    let sts_api: Api<StatefulSet> = Api::namespaced(client.clone(), &ns);
    apply_cc(&ccs, "web", json!({ "resources": { "limits": { "memory": "512Mi" } } })).await;
    observed(&ccs, "web", 1).await;
    let hash = |s: &StatefulSet| {
        s.spec.as_ref()?.template.metadata.as_ref()?.annotations.as_ref()?.get("strata.dev/config-hash").cloned()
    };
    let before = hash(&sts_api.get("web").await.unwrap()).expect("config hash annotation");

    apply_cc(&ccs, "web", json!({ "resources": { "limits": { "memory": "1Gi" } }, "evictionPolicy": "sieve" })).await;
    let cc = observed(&ccs, "web", 2).await;
    assert_eq!(cc.metadata.generation, Some(2));
    let sts = sts_api.get("web").await.unwrap();
    let after = hash(&sts).unwrap();
    assert_ne!(before, after, "a config change must change the pod template so pods roll");
    let container = &sts.spec.unwrap().template.spec.unwrap().containers[0];
    let limit = container.resources.as_ref().unwrap().limits.as_ref().unwrap()["memory"].0.clone();
    assert_eq!(limit, "1Gi");
    let cm: ConfigMap = Api::namespaced(client.clone(), &ns).get("web-config").await.unwrap();
    assert!(cm.data.unwrap()["strata.conf"].contains("maxmemory-policy sieve"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spec_only_the_operator_can_judge_degrades_and_changes_nothing() {
    let plane = ControlPlane::get();
    let ns = plane.namespace("invalid");
    let _op = plane.operator("invalid", &["--leader-elect=false", "--watch-namespace", &ns]);
    let client = plane.client().await;
    let ccs: Api<CacheCluster> = Api::namespaced(client.clone(), &ns);
    let sts_api: Api<StatefulSet> = Api::namespaced(client.clone(), &ns);
    apply_cc(&ccs, "vol", json!({ "storage": { "size": "1Gi" } })).await;
    observed(&ccs, "vol", 1).await;

    // The admission rules accept a new size; the StatefulSet's claim template cannot change.
    apply_cc(&ccs, "vol", json!({ "storage": { "size": "2Gi" }, "evictionPolicy": "allkeys-random" })).await;
    let cc = observed(&ccs, "vol", 2).await;
    let degraded = condition(&cc, "Degraded").expect("Degraded");
    assert_eq!((degraded.status, degraded.reason.as_str()), (ConditionStatus::True, "InvalidSpec"));
    assert!(degraded.message.contains("spec.storage"), "{}", degraded.message);
    let sts = sts_api.get("vol").await.unwrap();
    let claim = &sts.spec.as_ref().unwrap().volume_claim_templates.as_ref().unwrap()[0];
    let size = claim.spec.as_ref().unwrap().resources.as_ref().unwrap().requests.as_ref().unwrap()["storage"].0.clone();
    assert_eq!(size, "1Gi", "nothing running was changed");
    let cm: ConfigMap = Api::namespaced(client.clone(), &ns).get("vol-config").await.unwrap();
    assert!(!cm.data.unwrap()["strata.conf"].contains("allkeys-random"), "the ConfigMap was not touched either");
    let events = eventually(WAIT, "a Warning InvalidSpec Event", || async {
        let evs = events_for(&ns, "vol").await;
        evs.iter()
            .any(|e| e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some("InvalidSpec"))
            .then_some(evs)
    })
    .await;
    let foreign: Vec<_> =
        events.iter().filter(|e| e.reporting_controller.as_deref() != Some("strata-operator")).collect();
    assert!(foreign.is_empty(), "events not reported by strata-operator: {foreign:#?}");

    // Undoing the change recovers.
    apply_cc(&ccs, "vol", json!({ "storage": { "size": "1Gi" } })).await;
    let cc = observed(&ccs, "vol", 3).await;
    assert_eq!(condition(&cc, "Degraded").unwrap().status, ConditionStatus::False);
}

/// Installs a CRD for `kind` in `group` (version v1, namespaced, any content) in place of the
/// real one (the Prometheus Operator's, cert-manager's): what the operator needs is the API.
fn install_stand_in_crd(plane: &ControlPlane, group: &str, kind: &str, plural: &str) {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("{plural}.{group}") },
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": { "kind": kind, "listKind": format!("{kind}List"), "plural": plural, "singular": kind.to_lowercase() },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } }
            }]
        }
    });
    let out = plane.kubectl_stdin(&["apply", "-f", "-"], Some(&crd.to_string()));
    assert!(out.success, "{}", out.stderr);
    plane.wait_crd_established(&format!("{plural}.{group}"));
}

#[tokio::test(flavor = "multi_thread")]
async fn service_monitor_waits_for_its_crd_then_appears() {
    let plane = ControlPlane::get();
    let ns = plane.namespace("monitoring");
    let _op = plane.operator("monitoring", &["--leader-elect=false", "--watch-namespace", &ns]);
    let client = plane.client().await;
    let ccs: Api<CacheCluster> = Api::namespaced(client.clone(), &ns);
    apply_cc(&ccs, "mon", json!({ "monitoring": { "serviceMonitor": true, "labels": { "release": "prom" } } })).await;
    let cc = observed(&ccs, "mon", 1).await;
    let cond = condition(&cc, "Monitoring").expect("Monitoring condition");
    assert_eq!((cond.status, cond.reason.as_str()), (ConditionStatus::False, "ServiceMonitorCRDMissing"));
    assert!(cc.status.as_ref().unwrap().conditions.iter().any(|c| c.type_ == "Available"), "the rest still reconciles");

    // Install a stand-in ServiceMonitor CRD (the Prometheus Operator's would do the same).
    install_stand_in_crd(plane, "monitoring.coreos.com", "ServiceMonitor", "servicemonitors");
    // The operator re-checks on its next reconcile: nudge it with a spec change.
    apply_cc(
        &ccs,
        "mon",
        json!({ "replicas": 2, "monitoring": { "serviceMonitor": true, "labels": { "release": "prom" } } }),
    )
    .await;
    let cc = observed(&ccs, "mon", 2).await;
    assert_eq!(condition(&cc, "Monitoring").unwrap().status, ConditionStatus::True);
    let out = plane.kubectl(&["-n", &ns, "get", "servicemonitor", "mon", "-o", "json"]);
    assert!(out.success, "{}", out.stderr);
    let sm: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(sm["metadata"]["labels"]["release"], "prom");
    assert_eq!(sm["spec"]["endpoints"][0]["port"], "metrics");
    assert_eq!(sm["metadata"]["ownerReferences"][0]["uid"], cc.uid().unwrap());
}

#[tokio::test(flavor = "multi_thread")]
async fn prometheus_rule_without_its_crd_is_a_condition_not_an_error() {
    let plane = ControlPlane::get();
    let ns = plane.namespace("rules-missing");
    let _op = plane.operator("rules-missing", &["--leader-elect=false", "--watch-namespace", &ns]);
    let client = plane.client().await;
    let ccs: Api<CacheCluster> = Api::namespaced(client.clone(), &ns);
    apply_cc(&ccs, "norule", json!({ "monitoring": { "prometheusRule": true } })).await;
    let cc = observed(&ccs, "norule", 1).await;
    let cond = condition(&cc, "Monitoring").expect("Monitoring condition");
    assert_eq!((cond.status, cond.reason.as_str()), (ConditionStatus::False, "PrometheusRuleCRDMissing"));
    assert!(cond.message.contains("spec.monitoring.prometheusRule is set"), "{}", cond.message);
    assert!(cc.status.as_ref().unwrap().conditions.iter().any(|c| c.type_ == "Available"), "the rest still reconciles");
    let warned = eventually(WAIT, "a PrometheusRuleCRDMissing Event", || async {
        events_for(&ns, "norule").await.into_iter().find(|e| e.reason.as_deref() == Some("PrometheusRuleCRDMissing"))
    })
    .await;
    assert_eq!(warned.type_.as_deref(), Some("Warning"));
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_mounts_the_certificate_secret_and_closes_the_plain_port() {
    let plane = ControlPlane::get();
    let ns = plane.namespace("tls");
    let _op = plane.operator("tls", &["--leader-elect=false", "--watch-namespace", &ns]);
    let client = plane.client().await;
    let ccs: Api<CacheCluster> = Api::namespaced(client.clone(), &ns);
    apply_cc(&ccs, "secure", json!({ "tls": { "secretName": "secure-cert", "clientAuth": "Required" } })).await;
    observed(&ccs, "secure", 1).await;
    let cm: ConfigMap = Api::namespaced(client.clone(), &ns).get("secure-config").await.expect("ConfigMap");
    let conf = cm.data.unwrap().get("strata.conf").cloned().unwrap();
    for line in [
        "port 0\n",
        "tls-port 6379\n",
        "tls-cert-file /etc/strata-tls/tls.crt\n",
        "tls-key-file /etc/strata-tls/tls.key\n",
        "tls-auth-clients yes\n",
        "tls-ca-cert-file /etc/strata-tls/ca.crt\n",
        "tls-cluster yes\n",
    ] {
        assert!(conf.contains(line), "{line:?} missing from:\n{conf}");
    }
    // Cluster mode speaks TLS to the admin ports with the Secret: while it is missing, or has
    // no ca.crt, the status says what to do (the operator reads it again every round).
    let tls_problem = |wanted: &'static str| {
        let ccs = ccs.clone();
        async move {
            eventually(WAIT, &format!("Degraded/TLSSecretUnusable saying {wanted:?}"), || async {
                let degraded = condition(&ccs.get("secure").await.ok()?, "Degraded")?;
                let found = degraded.status == ConditionStatus::True
                    && degraded.reason == "TLSSecretUnusable"
                    && degraded.message.contains(wanted);
                found.then_some(degraded.message)
            })
            .await
        }
    };
    let message = tls_problem("does not exist").await;
    assert!(message.contains(&format!("{ns}/secure-cert")) && message.contains("spec.tls.secretName"), "{message}");
    let without_ca = plane.kubectl(&[
        "-n",
        &ns,
        "create",
        "secret",
        "generic",
        "secure-cert",
        "--from-literal=tls.crt=x",
        "--from-literal=tls.key=y",
    ]);
    assert!(without_ca.success, "{}", without_ca.stderr);
    let message = tls_problem("has no ca.crt").await;
    assert!(message.contains("add the CA that signed tls.crt"), "{message}");
    let warnings = events_for(&ns, "secure").await;
    assert!(
        warnings.iter().any(|e| e.reason.as_deref() == Some("TLSSecretUnusable")),
        "a Warning Event tells it: {warnings:?}"
    );
    let sts: StatefulSet = Api::namespaced(client.clone(), &ns).get("secure").await.unwrap();
    let pod = sts.spec.unwrap().template.spec.unwrap();
    let volume = pod.volumes.unwrap().into_iter().find(|v| v.name == "tls").expect("a tls volume");
    assert_eq!(volume.secret.unwrap().secret_name.as_deref(), Some("secure-cert"));
    let mount = pod.containers[0].volume_mounts.clone().unwrap().into_iter().find(|m| m.name == "tls").unwrap();
    assert_eq!((mount.mount_path.as_str(), mount.read_only, mount.sub_path), ("/etc/strata-tls", Some(true), None));

    // cert-manager asked for where it is not installed: the status says what to do.
    apply_cc(&ccs, "issued", json!({ "tls": { "certManager": { "issuerRef": { "name": "ca" } } } })).await;
    let cc = observed(&ccs, "issued", 1).await;
    let degraded = condition(&cc, "Degraded").expect("Degraded");
    assert_eq!(degraded.status, ConditionStatus::True);
    assert!(
        degraded.message.contains("spec.tls.certManager") && degraded.message.contains("cert-manager"),
        "{}",
        degraded.message
    );

    // With cert-manager's API (a stand-in CRD) the operator asks it for the certificate.
    install_stand_in_crd(plane, "cert-manager.io", "Certificate", "certificates");
    let certificate = |name: &str| {
        let out = plane.kubectl(&["-n", &ns, "get", "certificate", name, "-o", "json"]);
        out.success.then(|| serde_json::from_str::<serde_json::Value>(&out.stdout).unwrap())
    };
    // The operator looks again within a minute; a spec change is sooner.
    let issued = json!({ "tls": { "certManager": { "issuerRef": { "name": "ca" } }, "clientAuth": "Optional" } });
    apply_cc(&ccs, "issued", issued).await;
    let cc = observed(&ccs, "issued", 2).await;
    assert_ne!(condition(&cc, "Degraded").map(|c| c.status), Some(ConditionStatus::True), "{:?}", cc.status);
    let cert = certificate("issued-tls").expect("the Certificate issued-tls");
    assert_eq!(cert["spec"]["secretName"], "issued-tls");
    assert_eq!(cert["metadata"]["ownerReferences"][0]["uid"], cc.uid().unwrap());

    // A user's own Certificate with the name the operator would use stays whatever the spec
    // says: the operator deletes only the one it made.
    let own = format!(
        r#"{{"apiVersion":"cert-manager.io/v1","kind":"Certificate","metadata":{{"name":"secure-tls","namespace":"{ns}"}},
        "spec":{{"secretName":"secure-cert","issuerRef":{{"name":"mine"}}}}}}"#
    );
    let out = plane.kubectl_stdin(&["apply", "-f", "-"], Some(&own));
    assert!(out.success, "{}", out.stderr);
    apply_cc(&ccs, "secure", json!({ "tls": { "secretName": "secure-cert", "clientAuth": "Optional" } })).await;
    observed(&ccs, "secure", 2).await;
    // certManager dropped for a Secret of one's own: the Certificate goes, so that cert-manager
    // stops renewing into a Secret it no longer owns.
    apply_cc(&ccs, "issued", json!({ "tls": { "secretName": "issued-tls" } })).await;
    observed(&ccs, "issued", 3).await;
    assert!(certificate("issued-tls").is_none(), "the operator's Certificate outlived spec.tls.certManager");
    assert!(certificate("secure-tls").is_some(), "the operator deleted a Certificate it did not make");

    // Plain text and TLS side by side: the plain port reopens, TLS moves beside it, and the
    // Services and the status carry both.
    let cc = observed(&ccs, "secure", 2).await;
    let status = cc.status.unwrap();
    let tls_only = format!("secure.{ns}.svc:6379");
    assert_eq!((status.endpoint.as_deref(), status.tls_endpoint.as_deref()), (Some(&*tls_only), Some(&*tls_only)));
    let both = json!({ "tls": { "secretName": "secure-cert", "allowPlaintext": true, "port": 6443 } });
    apply_cc(&ccs, "secure", both).await;
    let cc = observed(&ccs, "secure", 3).await;
    let status = cc.status.unwrap();
    assert_eq!(status.endpoint, Some(format!("secure.{ns}.svc:6379")));
    assert_eq!(status.tls_endpoint, Some(format!("secure.{ns}.svc:6443")));
    let cm: ConfigMap = Api::namespaced(client.clone(), &ns).get("secure-config").await.expect("ConfigMap");
    let conf = cm.data.unwrap().get("strata.conf").cloned().unwrap();
    assert!(conf.contains("\nport 6379\ntls-port 6390\n") && conf.contains("tls-cluster yes\n"), "{conf}");
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let ports = |service: Service| -> Vec<(String, i32)> {
        service.spec.unwrap().ports.unwrap().into_iter().map(|p| (p.name.unwrap(), p.port)).collect()
    };
    let client_ports = ports(services.get("secure").await.unwrap());
    assert_eq!(client_ports, [("redis".into(), 6379), ("redis-tls".into(), 6443), ("cluster".into(), 6380)]);
    assert!(ports(services.get("secure-headless").await.unwrap()).contains(&("redis-tls".into(), 6390)));
    let sts: StatefulSet = Api::namespaced(client.clone(), &ns).get("secure").await.unwrap();
    let container = sts.spec.unwrap().template.spec.unwrap().containers[0].clone();
    assert!(
        container.ports.unwrap().iter().any(|p| p.name.as_deref() == Some("redis-tls") && p.container_port == 6390)
    );
}

/// One spec that breaks each rule, and which rule's message must come back.
fn admission_cases() -> Vec<(&'static str, &'static str)> {
    use strata_operator::api::{DURABILITY_RULES, HUGEPAGES_RULES, SPEC_RULES, STORAGE_RULES, TLS_RULES};
    let spec = |i: usize| SPEC_RULES[i].message;
    vec![
        (r#"{"resources": {"limits": {"cpu": "two"}}}"#, spec(0)),
        (r#"{"maxMemory": "0"}"#, spec(1)),
        (r#"{"cpu": {"pinning": true}, "resources": {"limits": {"cpu": "1500m", "memory": "1Gi"}}}"#, spec(2)),
        (r#"{"cpu": {"pinning": true}, "resources": {"limits": {"cpu": "2"}}}"#, spec(3)),
        (r#"{"cpu": {"threads": 4}, "resources": {"limits": {"cpu": "2"}}}"#, spec(4)),
        (r#"{"maxMemory": "2Gi", "resources": {"limits": {"memory": "1Gi"}}}"#, spec(5)),
        (r#"{"resources": {"limits": {"memory": "32Mi"}}}"#, spec(6)),
        (r#"{"hugepages": {"pageSize": "2Mi", "amount": "2Gi"}, "resources": {"limits": {"memory": "1Gi"}}}"#, spec(7)),
        (r#"{"durability": {"mode": "sync"}}"#, spec(8)),
        (r#"{"service": {"port": 6390}, "tls": {"secretName": "c", "allowPlaintext": true}}"#, spec(9)),
        (r#"{"tls": {"secretName": "c", "allowPlaintext": true, "port": 6380}}"#, spec(9)),
        (r#"{"storage": {"size": "0"}}"#, STORAGE_RULES[0].message),
        (r#"{"storage": {"size": "1Gi", "diskBudget": "0"}}"#, STORAGE_RULES[1].message),
        (r#"{"storage": {"size": "1Gi", "diskBudget": "2Gi"}}"#, STORAGE_RULES[2].message),
        (r#"{"durability": {"mode": "none", "fsyncInterval": "10ms"}}"#, DURABILITY_RULES[0].message),
        (
            r#"{"hugepages": {"pageSize": "2Mi", "amount": "0"}, "resources": {"limits": {"memory": "1Gi"}}}"#,
            HUGEPAGES_RULES[0].message,
        ),
        (
            r#"{"hugepages": {"pageSize": "2Mi", "amount": "3Mi"}, "resources": {"limits": {"memory": "1Gi"}}}"#,
            HUGEPAGES_RULES[1].message,
        ),
        (r#"{"tls": {}}"#, TLS_RULES[0].message),
        (r#"{"tls": {"secretName": "mine", "certManager": {"issuerRef": {"name": "ca"}}}}"#, TLS_RULES[0].message),
        (r#"{"tls": {"secretName": "mine", "port": 6390}}"#, TLS_RULES[1].message),
        (r#"{"tls": {"secretName": "mine", "allowPlaintext": true, "port": 0}}"#, "spec.tls.port"),
        // OpenAPI constraints (not CEL): the API server's own wording names the field.
        (r#"{"replicas": 0}"#, "spec.replicas"),
        (r#"{"evictionPolicy": "adaptive-ish"}"#, "spec.evictionPolicy"),
        (r#"{"durability": {"mode": "periodic", "fsyncInterval": "10 ms"}}"#, "spec.durability.fsyncInterval"),
        (r#"{"service": {"port": 70000}}"#, "spec.service.port"),
    ]
}

#[test]
fn every_validation_rule_rejects_at_admission_with_its_message() {
    use strata_operator::api::{DURABILITY_RULES, HUGEPAGES_RULES, SPEC_RULES, STORAGE_RULES, TLS_RULES};
    let plane = ControlPlane::get();
    let ns = plane.namespace("admission");
    let cases = admission_cases();
    // Every CEL rule the CRD carries has a case here.
    for rule in SPEC_RULES.iter().chain(STORAGE_RULES).chain(DURABILITY_RULES).chain(HUGEPAGES_RULES).chain(TLS_RULES) {
        assert!(cases.iter().any(|(_, m)| *m == rule.message), "no admission case for rule {:?}", rule.message);
    }
    for (i, (spec, message)) in cases.iter().enumerate() {
        let doc = format!(
            r#"{{"apiVersion":"strata.dev/v1alpha1","kind":"CacheCluster","metadata":{{"name":"bad-{i}","namespace":"{ns}"}},"spec":{spec}}}"#
        );
        let out = plane.kubectl_stdin(&["apply", "-f", "-"], Some(&doc));
        assert!(!out.success, "spec {spec} was accepted");
        assert!(out.stderr.contains(message), "spec {spec}: expected {message:?} in:\n{}", out.stderr);
    }
    // And a spec using every feature correctly is accepted.
    let good = format!(
        r#"{{"apiVersion":"strata.dev/v1alpha1","kind":"CacheCluster","metadata":{{"name":"good","namespace":"{ns}"}},
        "spec":{{"replicas":2,"cpu":{{"pinning":true,"threads":2}},"resources":{{"limits":{{"cpu":"2","memory":"2Gi"}},"requests":{{"cpu":"2","memory":"2Gi"}}}},
        "maxMemory":"1536Mi","hugepages":{{"pageSize":"2Mi","amount":"512Mi"}},"durability":{{"mode":"periodic","fsyncInterval":"5ms"}},
        "storage":{{"size":"10Gi","diskBudget":"8Gi"}},"evictionPolicy":"sieve",
        "tls":{{"certManager":{{"issuerRef":{{"name":"ca","kind":"ClusterIssuer"}},"duration":"720h"}},"clientAuth":"Required","allowPlaintext":true,"port":6443}}}}}}"#
    );
    let out = plane.kubectl_stdin(&["apply", "-f", "-"], Some(&good));
    assert!(out.success, "a valid spec was refused: {}", out.stderr);
}

#[test]
fn manifests_and_rendered_chart_pass_server_side_dry_run() {
    let plane = ControlPlane::get();
    let root = support::workspace_root();
    let helm = support::k8s_bin().join("helm");
    assert!(helm.is_file(), "{} missing: run scripts/k8s-tools.sh helm", helm.display());
    let install = root.join("manifests/install.yaml");
    // A dry run creates nothing, so the namespaced objects need their namespace for real.
    plane.ensure_namespace("strata-system");
    let out = plane.kubectl(&["apply", "--server-side", "--dry-run=server", "-f", &install.display().to_string()]);
    assert!(out.success, "install.yaml: {}", out.stderr);
    // The examples go into an existing namespace (the install's namespace only exists for real).
    let ns = plane.namespace("examples");
    for example in ["minimal.yaml", "production.yaml", "tls.yaml"] {
        let path = root.join("manifests/examples").join(example);
        let out = plane.kubectl(&["apply", "--dry-run=server", "-n", &ns, "-f", &path.display().to_string()]);
        assert!(out.success, "{example}: {}", out.stderr);
        assert!(out.stdout.contains("cachecluster.strata.dev/"), "{example}: {}", out.stdout);
    }
    let rendered = std::process::Command::new(&helm)
        .args(["template", "strata-operator", &root.join("charts/strata-operator").display().to_string()])
        .args(["--namespace", &ns, "--kube-version", "1.33.0"])
        .output()
        .expect("running helm");
    assert!(rendered.status.success(), "helm template: {}", String::from_utf8_lossy(&rendered.stderr));
    let out = plane.kubectl_stdin(
        &["apply", "--dry-run=server", "-n", &ns, "-f", "-"],
        Some(&String::from_utf8_lossy(&rendered.stdout)),
    );
    assert!(out.success, "rendered chart: {}", out.stderr);
    assert!(out.stdout.contains("deployment.apps/strata-operator"), "{}", out.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn two_operators_elect_one_leader_and_hand_over_on_shutdown() {
    let plane = ControlPlane::get();
    let ns = plane.namespace("election");
    let args = ["--leader-election-namespace", &ns, "--leader-election-id", "election-test", "--watch-namespace", &ns];
    let a = plane.operator("op-a", &args);
    let b = plane.operator("op-b", &args);
    let client = plane.client().await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);

    let leader_name = eventually(WAIT, "a Lease holder with leader metric 1", || async {
        let holder = leases.get("election-test").await.ok()?.spec?.holder_identity?;
        let (la, lb) = (a.metric("strata_operator_leader")?, b.metric("strata_operator_leader")?);
        (la + lb == 1.0).then_some(holder)
    })
    .await;
    let (leader, standby) = if leader_name == "op-a" { (&a, &b) } else { (&b, &a) };
    assert_eq!(leader.metric("strata_operator_leader"), Some(1.0));
    assert_eq!(standby.metric("strata_operator_leader"), Some(0.0));
    // Both are alive and ready (a standby is a healthy replica).
    eventually(WAIT, "the standby to report ready", || async { (standby.http_get("/readyz")?.0 == 200).then_some(()) })
        .await;

    // Only the leader reconciles.
    let ccs: Api<CacheCluster> = Api::namespaced(client.clone(), &ns);
    apply_cc(&ccs, "elect", json!({})).await;
    observed(&ccs, "elect", 1).await;
    assert!(standby.metric("strata_operator_reconciliations_total").unwrap_or(0.0) == 0.0, "the standby reconciled");

    // A clean shutdown releases the Lease; the standby takes over well before it would expire.
    leader.sigterm();
    assert_eq!(leader.wait_exit(Duration::from_secs(30)), Some(0), "leader log:\n{}", leader.log_text());
    let standby_name = if leader_name == "op-a" { "op-b" } else { "op-a" };
    eventually(Duration::from_secs(20), "the standby to take the Lease", || async {
        let holder = leases.get("election-test").await.ok()?.spec?.holder_identity?;
        (holder == standby_name && standby.metric("strata_operator_leader")? == 1.0).then_some(())
    })
    .await;
    let lease = leases.get("election-test").await.unwrap().spec.unwrap();
    assert!(lease.lease_transitions.unwrap_or(0) >= 1);

    // The new leader reconciles.
    apply_cc(&ccs, "elect", json!({ "replicas": 2 })).await;
    observed(&ccs, "elect", 2).await;
}

/// The operator works with exactly the permissions `manifests/install.yaml` grants its
/// ServiceAccount (a missing RBAC rule shows up here, not in a user's cluster).
#[tokio::test(flavor = "multi_thread")]
async fn operator_runs_with_the_install_manifest_rbac() {
    let plane = ControlPlane::get();
    let install = support::workspace_root().join("manifests/install.yaml");
    plane.ensure_namespace("strata-system");
    let out = plane.kubectl(&["apply", "--server-side", "-f", &install.display().to_string()]);
    assert!(out.success, "applying install.yaml: {}", out.stderr);
    let out = plane.kubectl(&["-n", "strata-system", "create", "token", "strata-operator", "--duration=1h"]);
    assert!(out.success, "token for the operator's ServiceAccount: {}", out.stderr);
    let kubeconfig = plane.dir.join("kubeconfig-operator-sa");
    std::fs::write(&kubeconfig, support::kubeconfig_with_token(&plane.url, out.stdout.trim())).unwrap();
    let ns = plane.namespace("rbac");
    let op = plane.operator_as(
        "rbac",
        &kubeconfig,
        &[
            "--leader-election-namespace",
            "strata-system",
            "--leader-election-id",
            "strata-operator",
            "--watch-namespace",
            &ns,
        ],
    );
    let client = plane.client().await;
    let ccs: Api<CacheCluster> = Api::namespaced(client.clone(), &ns);
    // Durable, so the scaled-in volumes check (a PVC list) runs under the ServiceAccount too.
    apply_cc(
        &ccs,
        "guarded",
        json!({ "storage": { "size": "1Gi" }, "durability": { "mode": "periodic" }, "monitoring": { "serviceMonitor": true } }),
    )
    .await;
    let cc = observed(&ccs, "guarded", 1).await;
    assert!(condition(&cc, "Available").is_some());
    // Status, events and leases all worked without a single "forbidden".
    eventually(WAIT, "an Event written with the ServiceAccount", || async {
        (!events_for(&ns, "guarded").await.is_empty()).then_some(())
    })
    .await;
    let forbidden = support::grep(&op.log, "forbidden");
    assert!(forbidden.is_empty(), "RBAC denials:\n{}", forbidden.join("\n"));
    assert_eq!(op.metric("strata_operator_leader"), Some(1.0));
}

/// A pod of CacheCluster `cluster` as the StatefulSet would make it (there is no controller
/// manager here): the labels the operator's pod watch and selector match.
async fn create_pod(client: &kube::Client, ns: &str, cluster: &str, ordinal: i32, revision: &str) -> Pod {
    create_pod_with(client, ns, cluster, ordinal, revision, None).await
}

/// As [`create_pod`]; with `tls_secret`, as made from a template with `tls-cluster yes` that
/// mounts that TLS Secret (its admin port speaks TLS).
async fn create_pod_with(
    client: &kube::Client,
    ns: &str,
    cluster: &str,
    ordinal: i32,
    revision: &str,
    tls_secret: Option<&str>,
) -> Pod {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    // The ServiceAccount admission plugin wants the pod's account to exist.
    let _ = sas
        .create(&PostParams::default(), &serde_json::from_value(json!({ "metadata": { "name": "default" } })).unwrap())
        .await;
    let mut labels = strata_operator::resources::selector_labels(cluster);
    labels.insert("app.kubernetes.io/managed-by".into(), "strata-operator".into());
    // Labelled at creation: a pod of no revision would be an old one to replace.
    labels.insert("controller-revision-hash".into(), revision.into());
    let mut pod = json!({
        "metadata": { "name": format!("{cluster}-{ordinal}"), "labels": labels },
        "spec": { "containers": [{ "name": "node", "image": "strata-node:test" }], "automountServiceAccountToken": false },
    });
    if let Some(secret) = tls_secret {
        pod["metadata"]["annotations"] = json!({ strata_operator::resources::TLS_CLUSTER_ANNOTATION: "yes" });
        pod["spec"]["volumes"] = json!([{ "name": "tls", "secret": { "secretName": secret } }]);
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.create(&PostParams::default(), &serde_json::from_value(pod).unwrap()).await.expect("creating a pod")
}

/// Marks `pod` as made from StatefulSet revision `revision` and (not) Ready. Its phase stays
/// Pending: the Eviction API then needs no PodDisruptionBudget status (no controller here
/// computes one), and a pod that was never scheduled is deleted at once.
async fn set_pod(client: &kube::Client, ns: &str, pod: &str, revision: &str, ready: bool) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let label = json!({ "metadata": { "labels": { "controller-revision-hash": revision } } });
    pods.patch(pod, &PatchParams::default(), &Patch::Merge(&label)).await.expect("labelling a pod");
    let status =
        json!({ "status": { "conditions": [{ "type": "Ready", "status": if ready { "True" } else { "False" } }] } });
    pods.patch_status(pod, &PatchParams::default(), &Patch::Merge(&status)).await.expect("writing pod status");
}

/// Writes what a kubelet would after the node container's `count`th restart (through the status
/// subresource): its last termination with `message` (the log tail), now in CrashLoopBackOff
/// when `looping`.
async fn restarted(client: &kube::Client, ns: &str, pod: &str, count: i32, reason: &str, message: &str, looping: bool) {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let state = if looping {
        json!({ "waiting": { "reason": "CrashLoopBackOff", "message": format!("back-off 10s restarting failed container=node pod={pod}") } })
    } else {
        json!({ "running": { "startedAt": now } })
    };
    let status = json!({ "status": { "phase": "Running", "containerStatuses": [{
        "name": "node", "image": "strata-node:test", "imageID": "", "ready": false, "restartCount": count,
        "state": state,
        "lastState": { "terminated": {
            "exitCode": if reason == "OOMKilled" { 137 } else { 1 }, "reason": reason, "message": message,
            "containerID": format!("containerd://{pod}-{count}"), "startedAt": now, "finishedAt": now,
        } },
    }] } });
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.patch_status(pod, &PatchParams::default(), &Patch::Merge(&status)).await.expect("writing pod status");
}

/// (reason, note) of the Warning Events on CacheCluster `name`.
async fn warnings(ns: &str, name: &str) -> Vec<(String, String)> {
    events_for(ns, name)
        .await
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_looping_node_is_told_with_its_own_error_once_per_restart() {
    let plane = ControlPlane::get();
    let ns = plane.namespace("crashloop");
    let _op = plane.operator("crashloop", &["--leader-elect=false", "--watch-namespace", &ns]);
    let client = plane.client().await;
    let ccs: Api<CacheCluster> = Api::namespaced(client.clone(), &ns);
    apply_cc(&ccs, "loop", json!({ "storage": { "size": "1Gi" }, "durability": { "mode": "sync" } })).await;
    observed(&ccs, "loop", 1).await;
    create_pod(&client, &ns, "loop", 0, "loop-v1").await;

    // The node's JSON log: its last line is the fatal error, which names the fix.
    let fatal = "the durability log holds more than maxmemory allows: raise maxmemory or choose an evicting policy";
    let log = format!(
        "{{\"level\":\"INFO\",\"fields\":{{\"message\":\"strata-node starting\"}}}}\n\
         {{\"timestamp\":\"2026-11-28T13:00:00Z\",\"level\":\"ERROR\",\"fields\":{{\"message\":\"{fatal}\"}},\"target\":\"strata_node\"}}\n"
    );
    restarted(&client, &ns, "loop-0", 1, "Error", &log, true).await;
    let degraded = eventually(WAIT, "Degraded with the node's own error", || async {
        let cc = ccs.get("loop").await.ok()?;
        condition(&cc, "Degraded").filter(|c| c.message.contains(fatal))
    })
    .await;
    assert_eq!((degraded.status, degraded.reason.as_str()), (ConditionStatus::True, "ContainerRestarted"));
    assert!(degraded.message.contains("now in CrashLoopBackOff"), "{}", degraded.message);
    // sync: nothing acknowledged is lost, but it is unreachable while the node cannot start.
    assert!(!degraded.message.contains("in RAM is lost"), "{}", degraded.message);
    assert!(degraded.message.contains("unreachable until the node starts"), "{}", degraded.message);
    // Restart Events (the Degraded transition's Event has the same reason, the condition's message).
    let told = |n: usize| {
        let ns = ns.clone();
        async move {
            eventually(WAIT, &format!("{n} restart Event(s)"), || async {
                let w: Vec<String> = warnings(&ns, "loop")
                    .await
                    .into_iter()
                    .filter(|(r, note)| r == "ContainerRestarted" && note.starts_with("Container node"))
                    .map(|e| e.1)
                    .collect();
                (w.len() == n).then_some(w)
            })
            .await
        }
    };
    let first = told(1).await;
    assert!(
        first[0]
            .starts_with("Container node of pod loop-0 terminated (Error, exit code 1) and was restarted (restart 1)")
    );
    assert!(first[0].contains(&format!("its last log line: \"{fatal}\"")), "{}", first[0]);

    // More reconciles (the pod's status rewritten, a spec change) tell nothing new.
    restarted(&client, &ns, "loop-0", 1, "Error", &log, false).await;
    apply_cc(
        &ccs,
        "loop",
        json!({ "storage": { "size": "1Gi" }, "durability": { "mode": "sync" }, "evictionPolicy": "allkeys-lfu" }),
    )
    .await;
    observed(&ccs, "loop", 2).await;
    restarted(&client, &ns, "loop-0", 1, "Error", &log, true).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(told(1).await.len(), 1);

    // The next restart is its own Event, with its own last words.
    restarted(&client, &ns, "loop-0", 2, "Error", "strata-node: cannot listen on 0.0.0.0:6379: Address in use\n", true)
        .await;
    let both = told(2).await;
    assert!(
        both.iter().any(|n| n.contains("(restart 2)")
            && n.contains("\"strata-node: cannot listen on 0.0.0.0:6379: Address in use\"")),
        "{both:?}"
    );
    // The crash loop's cycles (waiting, running, waiting) changed the condition's message only:
    // its one transition Event, no more.
    let all = warnings(&ns, "loop").await;
    let degraded_events = all.iter().filter(|(_, note)| !note.starts_with("Container node")).count();
    assert_eq!(degraded_events, 1, "{all:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_oom_kill_with_derived_max_memory_advises_the_limit() {
    let plane = ControlPlane::get();
    let ns = plane.namespace("oom-derived");
    let _op = plane.operator("oom-derived", &["--leader-elect=false", "--watch-namespace", &ns]);
    let client = plane.client().await;
    let ccs: Api<CacheCluster> = Api::namespaced(client.clone(), &ns);
    apply_cc(&ccs, "oomd", json!({ "resources": { "limits": { "memory": "256Mi" } } })).await;
    observed(&ccs, "oomd", 1).await;
    create_pod(&client, &ns, "oomd", 0, "oomd-v1").await;
    restarted(&client, &ns, "oomd-0", 1, "OOMKilled", "", false).await;
    let degraded = eventually(WAIT, "Degraded OOMKilled", || async {
        condition(&ccs.get("oomd").await.ok()?, "Degraded").filter(|c| c.reason == "OOMKilled")
    })
    .await;
    assert!(degraded.message.contains("raise resources.limits.memory"), "{}", degraded.message);
    assert!(!degraded.message.contains("lower maxMemory"), "maxMemory is derived: {}", degraded.message);
    // durability none: this time the data really is gone.
    assert!(degraded.message.contains("its data in RAM is lost"), "{}", degraded.message);
    let note = eventually(WAIT, "an OOMKilled Event", || async {
        warnings(&ns, "oomd")
            .await
            .into_iter()
            .find(|(r, n)| r == "OOMKilled" && n.starts_with("Container node"))
            .map(|e| e.1)
    })
    .await;
    assert!(
        note.starts_with("Container node of pod oomd-0 terminated (OOMKilled, exit code 137) and was restarted"),
        "{note}"
    );
    assert!(note.contains("raise resources.limits.memory") && !note.contains("lower maxMemory"), "{note}");
}

#[tokio::test(flavor = "multi_thread")]
async fn scaling_in_names_the_pods_whose_data_the_service_no_longer_reaches() {
    let plane = ControlPlane::get();
    let ns = plane.namespace("scale-in");
    let _op = plane.operator("scale-in", &["--leader-elect=false", "--watch-namespace", &ns]);
    let client = plane.client().await;
    let ccs: Api<CacheCluster> = Api::namespaced(client.clone(), &ns);
    // Independent caches: in cluster mode the pods that go hand their slots over first
    // (cluster_mode_reshards_* checks that), so nothing is left behind to report.
    let spec = |replicas: i32, policy: &str| json!({ "replicas": replicas, "storage": { "size": "1Gi" }, "durability": { "mode": "sync" }, "evictionPolicy": policy, "cluster": { "enabled": false } });
    apply_cc(&ccs, "shrink", spec(3, "allkeys-lru")).await;
    observed(&ccs, "shrink", 1).await;
    // The claims the StatefulSet controller would have made, with its labels.
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    for i in 0..3 {
        let pvc = json!({
            "metadata": { "name": format!("data-shrink-{i}"), "labels": strata_operator::resources::selector_labels("shrink") },
            "spec": { "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": "1Gi" } } },
        });
        pvcs.create(&PostParams::default(), &serde_json::from_value(pvc).unwrap()).await.expect("creating a PVC");
    }

    apply_cc(&ccs, "shrink", spec(1, "allkeys-lru")).await;
    let cc = observed(&ccs, "shrink", 2).await;
    let degraded = condition(&cc, "Degraded").expect("Degraded");
    assert_eq!((degraded.status, degraded.reason.as_str()), (ConditionStatus::True, "DataUnreachable"));
    assert!(
        degraded.message.contains("the data of shrink-1, shrink-2 stays on data-shrink-1, data-shrink-2"),
        "{}",
        degraded.message
    );
    let note = eventually(WAIT, "a ScaledIn Event", || async {
        warnings(&ns, "shrink").await.into_iter().find(|(r, _)| r == "ScaledIn").map(|e| e.1)
    })
    .await;
    assert!(note.starts_with("Scaling in from 3 to 1 replicas removes shrink-1, shrink-2;"), "{note}");
    assert!(note.contains("data-shrink-1, data-shrink-2"), "{note}");

    // Once the claims are deleted, nothing is unreachable any more.
    for i in 1..3 {
        pvcs.delete(&format!("data-shrink-{i}"), &DeleteParams::default()).await.expect("deleting a PVC");
    }
    // No kubelet or controller to remove the claims' finalizer: the PVCs stay Terminating,
    // which counts as gone.
    apply_cc(&ccs, "shrink", spec(1, "allkeys-lfu")).await;
    let cc = observed(&ccs, "shrink", 3).await;
    let degraded = condition(&cc, "Degraded").expect("Degraded");
    assert_eq!(degraded.status, ConditionStatus::False, "{}", degraded.message);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_planned_rollout_is_progressing_not_unavailable() {
    let plane = ControlPlane::get();
    let ns = plane.namespace("rollout");
    let _op = plane.operator("rollout", &["--leader-elect=false", "--watch-namespace", &ns]);
    let client = plane.client().await;
    let ccs: Api<CacheCluster> = Api::namespaced(client.clone(), &ns);
    let sts_api: Api<StatefulSet> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    apply_cc(&ccs, "roll", json!({ "replicas": 2 })).await;
    observed(&ccs, "roll", 1).await;
    for i in 0..2 {
        create_pod(&client, &ns, "roll", i, "roll-v1").await;
        set_pod(&client, &ns, &format!("roll-{i}"), "roll-v1", true).await;
    }
    // What the StatefulSet controller would report after a spec change: a new update revision.
    let sts_status = |ready: i32| {
        let sts_api = sts_api.clone();
        async move {
            let generation = sts_api.get("roll").await.unwrap().metadata.generation;
            let status = json!({ "status": {
                "observedGeneration": generation, "replicas": 2, "readyReplicas": ready, "availableReplicas": ready,
                "currentRevision": "roll-v1", "updateRevision": "roll-v2",
            } });
            sts_api
                .patch_status("roll", &PatchParams::default(), &Patch::Merge(&status))
                .await
                .expect("StatefulSet status");
        }
    };
    sts_status(2).await;
    // The operator replaces the highest ordinal first.
    eventually(WAIT, "roll-1 evicted", || async { pods.get_opt("roll-1").await.ok()?.is_none().then_some(()) }).await;
    sts_status(1).await;
    let available = eventually(WAIT, "Available through the planned outage", || async {
        condition(&ccs.get("roll").await.ok()?, "Available").filter(|c| c.reason == "RollingUpdate")
    })
    .await;
    assert_eq!(available.status, ConditionStatus::True, "{}", available.message);
    assert!(
        available.message.starts_with("1/2 pods ready; roll-1 down for the rolling update"),
        "{}",
        available.message
    );
    // Its replacement starting (not Ready yet) is still the rollout.
    create_pod(&client, &ns, "roll", 1, "roll-v2").await;
    set_pod(&client, &ns, "roll-1", "roll-v2", false).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cc = ccs.get("roll").await.unwrap();
    let available = condition(&cc, "Available").unwrap();
    assert_eq!(
        (available.status, available.reason.as_str()),
        (ConditionStatus::True, "RollingUpdate"),
        "{}",
        available.message
    );
    let progressing = condition(&cc, "Progressing").unwrap();
    assert_eq!((progressing.status, progressing.reason.as_str()), (ConditionStatus::True, "RollingUpdate"));
    assert!(progressing.message.contains("roll-1"), "{}", progressing.message);
    let events = events_for(&ns, "roll").await;
    assert!(events.iter().any(|e| e.reason.as_deref() == Some("RollingPod")), "the eviction is told");
    let warned: Vec<_> = events.iter().filter(|e| e.type_.as_deref() == Some("Warning")).collect();
    assert!(warned.is_empty(), "a planned rollout is no warning: {warned:?}");

    // A pod lost for another reason is not the rollout's: roll-0 (still the old revision)
    // going unready while roll-1 starts makes the cluster unavailable, with a Warning.
    set_pod(&client, &ns, "roll-0", "roll-v1", false).await;
    sts_status(0).await;
    let available = eventually(WAIT, "Unavailable once a pod fails outside the rollout", || async {
        condition(&ccs.get("roll").await.ok()?, "Available").filter(|c| c.reason == "ReplicasNotReady")
    })
    .await;
    assert_eq!(available.status, ConditionStatus::False);
    eventually(WAIT, "a Warning Unavailable Event", || async {
        warnings(&ns, "roll").await.into_iter().find(|(r, _)| r == "Unavailable")
    })
    .await;
}

/// Makes `pod` look like a kubelet runs it at `ip` (a loopback address a fake node listens on).
async fn run_pod(client: &kube::Client, ns: &str, pod: &str, ip: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let status = json!({ "status": { "phase": "Running", "podIP": ip, "podIPs": [{ "ip": ip }] } });
    pods.patch_status(pod, &PatchParams::default(), &Patch::Merge(&status)).await.expect("writing pod status");
}

/// Deletes pod `<cluster>-<ordinal>` and creates it again running at `ip`, as a restart does
/// (a new pod object, a new IP; never scheduled here, so the deletion is immediate).
async fn restart_pod(client: &kube::Client, ns: &str, cluster: &str, ordinal: i32, ip: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let name = format!("{cluster}-{ordinal}");
    pods.delete(&name, &DeleteParams::default()).await.expect("deleting a pod");
    eventually(WAIT, &format!("{name} gone"), || async { pods.get_opt(&name).await.ok()?.is_none().then_some(()) })
        .await;
    create_pod(client, ns, cluster, ordinal, "r1").await;
    run_pod(client, ns, &name, ip).await;
}

/// Waits until the status says every node applied one epoch, at least `epoch`, over all 16384
/// slots, at the IPs `ips` when given.
async fn converged(
    api: &Api<CacheCluster>,
    name: &str,
    epoch: u64,
    ips: Option<&[String]>,
) -> strata_operator::api::CacheClusterStatus {
    eventually(WAIT, &format!("a topology epoch >= {epoch} applied by every node of {name} at {ips:?}"), || async {
        let status = api.get(name).await.ok()?.status?;
        let current = status.topology_epoch.filter(|&e| e >= epoch)?;
        let all = !status.nodes.is_empty() && status.nodes.iter().all(|n| n.applied_epoch == Some(current));
        let at: Vec<String> = status.nodes.iter().filter_map(|n| n.ip.clone()).collect();
        let placed = ips.is_none_or(|ips| at == ips);
        (status.slots_covered == Some(16384) && all && placed).then_some(status)
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn cluster_mode_pushes_the_topology_and_recovers_from_restarts() {
    use strata_operator::topology::{NodeId, TopologyNode};
    use support::fake_node::FakeNode;

    let plane = ControlPlane::get();
    let ns = plane.namespace("shards");
    let args = ["--leader-elect=false", "--watch-namespace", ns.as_str()];
    let op = plane.operator("shards", &args);
    let client = plane.client().await;
    let ccs: Api<CacheCluster> = Api::namespaced(client.clone(), &ns);
    apply_cc(&ccs, "demo", json!({ "replicas": 3 })).await;
    let cc = observed(&ccs, "demo", 1).await;
    let uid = cc.uid().unwrap();

    // The admin password: random, in a Secret the CacheCluster owns, mounted by the pods.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns);
    let secret = secrets.get("demo-cluster-admin").await.expect("the admin Secret exists before the pods");
    assert!(secret.owner_references().iter().any(|o| o.uid == uid && o.kind == "CacheCluster"));
    let password = String::from_utf8(secret.data.unwrap()["password"].0.clone()).unwrap();
    assert_eq!(password.len(), 64, "{password}");
    let sts: StatefulSet = Api::namespaced(client.clone(), &ns).get("demo").await.unwrap();
    let pod_spec = sts.spec.unwrap().template.spec.unwrap();
    assert!(
        pod_spec
            .volumes
            .unwrap()
            .iter()
            .any(|v| { v.secret.as_ref().and_then(|s| s.secret_name.as_deref()) == Some("demo-cluster-admin") })
    );

    // Pods at three loopback addresses, each with a fake node's admin port.
    let ip = |n: u32| format!("127.0.77.{n}");
    let mut nodes = Vec::new();
    for i in 0..3 {
        nodes.push(FakeNode::start(&ip(i + 1), &password).await);
        create_pod(&client, &ns, "demo", i as i32, "r1").await;
        run_pod(&client, &ns, &format!("demo-{i}"), &ip(i + 1)).await;
    }
    let started = std::time::Instant::now();
    let status = converged(&ccs, "demo", 1, None).await;
    assert_eq!(status.topology_epoch, Some(1));
    eprintln!("first topology on 3 nodes after {:?}", started.elapsed());
    assert_eq!(status.shards, Some(3));
    for (i, node) in nodes.iter().enumerate() {
        let state = node.state.lock().unwrap().clone();
        assert!(state.auths.iter().all(|a| *a == password) && !state.auths.is_empty(), "{:?}", state.auths);
        let (epoch, myid, topology) = state.topology.expect("a topology");
        assert_eq!(epoch, 1);
        assert_eq!(myid, NodeId::of_pod(&uid, i as u32).to_string(), "node {i}'s id from the UID and ordinal");
        let parsed: Vec<TopologyNode> = topology.iter().map(|t| TopologyNode::parse(t).unwrap()).collect();
        let slots: Vec<String> = parsed.iter().map(|n| n.slots[0].to_string()).collect();
        assert_eq!(slots, ["0-5460", "5461-10922", "10923-16383"]);
        assert_eq!(parsed[i].ip, ip(i as u32 + 1));
        assert_eq!(parsed[i].hostname.as_deref(), Some(format!("demo-{i}.demo-headless.{ns}.svc").as_str()));
        assert_eq!((parsed[i].direct_port, parsed[i].plain_port, parsed[i].admin_port), (6380, 6379, 16379));
    }
    let pushed = |ns: String| async move {
        events_for(&ns, "demo")
            .await
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("TopologyPushed"))
            .filter_map(|e| e.note)
            .collect::<Vec<_>>()
    };
    let notes = pushed(ns.clone()).await;
    assert!(notes.iter().any(|n| n.contains("epoch 1") && n.contains("first topology of 3 shards")), "{notes:?}");

    // One pod restarted without its volume: a new IP and no topology.
    nodes.remove(1).stop();
    nodes.insert(1, FakeNode::start(&ip(9), &password).await);
    let started = std::time::Instant::now();
    restart_pod(&client, &ns, "demo", 1, &ip(9)).await;
    let status = converged(&ccs, "demo", 2, Some(&[ip(1), ip(9), ip(3)])).await;
    assert_eq!(status.topology_epoch, Some(2), "one push for one moved pod");
    eprintln!("one pod restarted: epoch 2 everywhere after {:?}", started.elapsed());
    assert_eq!(status.nodes[1].ip.as_deref(), Some(ip(9).as_str()));
    assert!(nodes.iter().all(|n| n.epoch() == 2));
    let notes = pushed(ns.clone()).await;
    assert!(notes.iter().any(|n| n.contains("demo-1 moved to 127.0.77.9 (was 127.0.77.2)")), "{notes:?}");

    // Every pod restarted at once, with their volumes (each node still holds epoch 2). Each
    // pod that comes back with a new IP is a new layout: the epoch moves on once per change.
    let held: Vec<_> = nodes.drain(..).map(FakeNode::stop).collect();
    let started = std::time::Instant::now();
    for (i, state) in held.into_iter().enumerate() {
        nodes.push(FakeNode::start_with(&ip(11 + i as u32), &password, state).await);
        restart_pod(&client, &ns, "demo", i as i32, &ip(11 + i as u32)).await;
    }
    let status = converged(&ccs, "demo", 3, Some(&[ip(11), ip(12), ip(13)])).await;
    let epoch = status.topology_epoch.unwrap();
    eprintln!("all pods restarted: epoch {epoch} everywhere after {:?}", started.elapsed());
    assert!(nodes.iter().all(|n| n.epoch() == epoch));

    // The operator restarted and its status lost: the epoch is recovered from what the nodes
    // hold; a pod that moved meanwhile gets the next one, never epoch 1 again.
    drop(op);
    let forget = json!({ "status": { "topologyEpoch": null, "shards": null, "nodes": null, "slotsCovered": null } });
    ccs.patch_status("demo", &PatchParams::default(), &Patch::Merge(&forget)).await.expect("clearing the status");
    let op = plane.operator("shards-2", &args);
    let started = std::time::Instant::now();
    let status = converged(&ccs, "demo", epoch, None).await;
    assert_eq!(status.topology_epoch, Some(epoch), "recovered from the nodes, nothing pushed");
    eprintln!("operator restarted without status: epoch {epoch} recovered after {:?}", started.elapsed());
    drop(op);
    ccs.patch_status("demo", &PatchParams::default(), &Patch::Merge(&forget)).await.expect("clearing the status");
    let held = nodes.remove(0).stop();
    nodes.insert(0, FakeNode::start_with(&ip(21), &password, held).await);
    restart_pod(&client, &ns, "demo", 0, &ip(21)).await;
    let op = plane.operator("shards-3", &args);
    let status = converged(&ccs, "demo", epoch + 1, Some(&[ip(21), ip(12), ip(13)])).await;
    let epoch = status.topology_epoch.unwrap();
    assert!(nodes.iter().all(|n| n.epoch() == epoch));

    // A node that stops answering: its slots are uncovered and Degraded says so.
    nodes.remove(2).stop();
    let cc = eventually(WAIT, "Degraded/SlotsUncovered", || async {
        let cc = ccs.get("demo").await.ok()?;
        (condition(&cc, "Degraded")?.reason == "SlotsUncovered").then_some(cc)
    })
    .await;
    let status = cc.status.clone().unwrap();
    assert_eq!(status.slots_covered, Some(10923));
    assert_eq!(status.topology_epoch, Some(epoch), "a node down alone pushes nothing");
    let degraded = condition(&cc, "Degraded").unwrap();
    assert!(degraded.message.contains("demo-2"), "{}", degraded.message);
    let series = format!("{{namespace=\"{ns}\",cachecluster=\"demo\"}}");
    assert_eq!(op.metric(&format!("strata_cachecluster_slots_covered{series}")), Some(10923.0));
    assert_eq!(op.metric(&format!("strata_cachecluster_topology_epoch{series}")), Some(epoch as f64));

    // A spec the operator refuses stops the reconcile before the topology round: the recorded
    // epoch stays (it is what the next round starts from).
    apply_cc(&ccs, "demo", json!({ "replicas": 3, "storage": { "size": "1Gi" } })).await;
    let cc = eventually(WAIT, "Degraded/InvalidSpec", || async {
        let cc = ccs.get("demo").await.ok()?;
        (condition(&cc, "Degraded")?.reason == "InvalidSpec").then_some(cc)
    })
    .await;
    assert_eq!(cc.status.unwrap().topology_epoch, Some(epoch), "the epoch survives an invalid spec");
    let forbidden = support::grep(&op.log, "forbidden");
    assert!(forbidden.is_empty(), "{forbidden:?}");
}

/// The StatefulSet's replicas as the operator applied them.
async fn sts_replicas(client: &kube::Client, ns: &str, name: &str) -> Option<i32> {
    let sts: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
    sts.get(name).await.ok()?.spec?.replicas
}

/// (reason, note) of every Event on CacheCluster `name` with one of `reasons`.
async fn events_with(ns: &str, name: &str, reasons: &[&str]) -> Vec<(String, String)> {
    events_for(ns, name)
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref().is_some_and(|r| reasons.contains(&r)))
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

/// Checks the fake nodes' logs: migrations never overlapped (one at a time), and the epoch
/// after each commit reached its target first and its source last.
fn check_migration_order(nodes: &[&support::fake_node::FakeNode]) {
    let states: Vec<_> = nodes.iter().map(|n| n.state.lock().unwrap().clone()).collect();
    let id_of = |s: &support::fake_node::NodeState| s.topology.as_ref().map(|t| t.1.clone()).unwrap_or_default();
    let mut sourced: Vec<(u64, u64, String, String, String)> = states
        .iter()
        .flat_map(|s| s.migrations.iter().filter(|m| m.source && m.state == "committed"))
        .map(|m| (m.started, m.committed.unwrap(), m.id.clone(), m.source_id.clone(), m.target_id.clone()))
        .collect();
    sourced.sort();
    assert!(!sourced.is_empty());
    for pair in sourced.windows(2) {
        assert!(pair[0].1 < pair[1].0, "migrations overlap: {} and {}", pair[0].2, pair[1].2);
    }
    for (_, committed, id, source, target) in &sourced {
        let node = |id: &str| states.iter().find(|s| id_of(s) == id).unwrap_or_else(|| panic!("node {id}"));
        // The confirming epoch: the first the target applied after the commit.
        let &(target_at, epoch) = node(target).applied.iter().find(|(t, _)| t > committed).expect("a confirming epoch");
        let at = |s: &support::fake_node::NodeState| s.applied.iter().find(|(_, e)| *e == epoch).map(|(t, _)| *t);
        let source_at = at(node(source)).expect("the source applied the confirming epoch");
        for s in &states {
            if let Some(t) = at(s)
                && id_of(s) != *target
                && id_of(s) != *source
            {
                assert!(target_at < t && t < source_at, "{id}: epoch {epoch} order");
            }
        }
        assert!(target_at < source_at, "{id}: the target applies epoch {epoch} before the source");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn cluster_mode_reshards_with_live_migrations_and_drains_before_scaling_in() {
    use support::fake_node::FakeNode;

    let plane = ControlPlane::get();
    let ns = plane.namespace("reshard");
    let args = ["--leader-elect=false", "--watch-namespace", ns.as_str(), "--migration-batch-slots", "1024"];
    let op = plane.operator("reshard", &args);
    let client = plane.client().await;
    let ccs: Api<CacheCluster> = Api::namespaced(client.clone(), &ns);
    apply_cc(&ccs, "demo", json!({ "replicas": 3 })).await;
    observed(&ccs, "demo", 1).await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns);
    let secret = secrets.get("demo-cluster-admin").await.unwrap();
    let password = String::from_utf8(secret.data.unwrap()["password"].0.clone()).unwrap();
    let ip = |n: u32| format!("127.0.78.{n}");
    let mut nodes = Vec::new();
    for i in 0..3 {
        nodes.push(FakeNode::start(&ip(i + 1), &password).await);
        create_pod(&client, &ns, "demo", i as i32, "r1").await;
        run_pod(&client, &ns, &format!("demo-{i}"), &ip(i + 1)).await;
    }
    converged(&ccs, "demo", 1, None).await;

    // Scale out: the StatefulSet grows first, the new pod joins without slots, then slots move.
    let started = std::time::Instant::now();
    apply_cc(&ccs, "demo", json!({ "replicas": 4 })).await;
    eventually(WAIT, "the StatefulSet at 4 replicas", || async {
        (sts_replicas(&client, &ns, "demo").await == Some(4)).then_some(())
    })
    .await;
    nodes.push(FakeNode::start(&ip(4), &password).await);
    create_pod(&client, &ns, "demo", 3, "r1").await;
    run_pod(&client, &ns, "demo-3", &ip(4)).await;
    let plan =
        eventually(WAIT, "a resharding plan in status", || async { ccs.get("demo").await.ok()?.status?.resharding })
            .await;
    assert_eq!(plan.shards, 4);
    assert_eq!(plan.slots_total, 4096, "the new node's share, no more: {plan:?}");
    assert!(plan.moves.iter().all(|m| m.target == 3 && !m.slots.is_empty()), "{plan:?}");
    let cc = eventually(WAIT, "Resharding False/Balanced after the scale out", || async {
        let cc = ccs.get("demo").await.ok()?;
        let r = condition(&cc, "Resharding")?;
        (r.reason == "Balanced" && cc.status.as_ref()?.resharding.is_none()).then_some(cc)
    })
    .await;
    eprintln!("scaled out 3 -> 4 with slot migrations after {:?}", started.elapsed());
    let status = converged(&ccs, "demo", 2, None).await;
    assert_eq!(status.nodes.len(), 4);
    let counts: Vec<u32> = nodes.iter().map(|n| n.slots()).collect();
    assert_eq!(counts.iter().sum::<u32>(), 16384, "{counts:?}");
    assert_eq!(counts[3], 4096, "{counts:?}");
    assert!(counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1, "{counts:?}");
    check_migration_order(&nodes.iter().collect::<Vec<_>>());
    let told = events_with(&ns, "demo", &["ReshardingStarted", "SlotsMoved", "ReshardingDone"]).await;
    assert!(told.iter().any(|(r, n)| r == "ReshardingStarted" && n.contains("4096 slots")), "{told:?}");
    assert!(told.iter().filter(|(r, _)| r == "SlotsMoved").count() >= 4, "{told:?}");
    assert!(told.iter().any(|(r, _)| r == "ReshardingDone"), "{told:?}");
    drop(cc);

    // Scale in, with the drained node's first migration held and then failing, and the
    // operator restarted meanwhile: the StatefulSet keeps 4 pods until demo-3 owns nothing.
    nodes[3].set_hold(true);
    nodes[3].state.lock().unwrap().fail_next = Some("ERR target refused: no room".into());
    let started = std::time::Instant::now();
    apply_cc(&ccs, "demo", json!({ "replicas": 3 })).await;
    let plan = eventually(WAIT, "a drain plan with a running move", || async {
        let plan = ccs.get("demo").await.ok()?.status?.resharding?;
        plan.moves.iter().any(|m| m.state == strata_operator::api::MoveState::Running).then_some(plan)
    })
    .await;
    assert!(plan.moves.iter().all(|m| m.source == 3), "only the drained ordinal gives: {plan:?}");
    assert_eq!(plan.slots_total, 4096);
    let running = plan.moves.iter().filter(|m| m.state == strata_operator::api::MoveState::Running).count();
    assert_eq!(running, 1, "one migration at a time: {plan:?}");
    drop(op);
    let op = plane.operator("reshard-2", &args);
    // The new operator finds the move running (its source says so) and leaves it be.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let now = ccs.get("demo").await.unwrap().status.unwrap().resharding.expect("the plan survives the restart");
    assert_eq!(now.plan, plan.plan);
    assert_eq!(sts_replicas(&client, &ns, "demo").await, Some(4), "a pod owning slots stays");
    assert!(nodes[3].slots() > 0);
    nodes[3].set_hold(false);
    eventually(WAIT, "a MigrationFailed Warning with the node's words", || async {
        warnings(&ns, "demo").await.into_iter().find(|(r, n)| r == "MigrationFailed" && n.contains("no room"))
    })
    .await;
    eventually(WAIT, "the StatefulSet back at 3 replicas", || async {
        (sts_replicas(&client, &ns, "demo").await == Some(3)).then_some(())
    })
    .await;
    eprintln!("scaled in 4 -> 3 (drained, one retry, operator restarted) after {:?}", started.elapsed());
    let cc = ccs.get("demo").await.unwrap();
    let status = cc.status.clone().unwrap();
    assert_eq!(status.nodes.len(), 3);
    assert!(status.resharding.is_none());
    assert_eq!(nodes[3].slots(), 0);
    let epoch = status.topology_epoch.unwrap();
    for n in &nodes[..3] {
        assert_eq!(n.epoch(), epoch);
        let (_, _, topology) = n.state.lock().unwrap().topology.clone().unwrap();
        assert_eq!(topology.len(), 3, "the drained node left the topology");
    }
    let counts: Vec<u32> = nodes[..3].iter().map(|n| n.slots()).collect();
    assert_eq!(counts.iter().sum::<u32>(), 16384, "{counts:?}");
    assert!(counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1, "{counts:?}");
    // The plan carried on across the restart: the held move kept its id, and its retry got a new one.
    let ids: Vec<String> = nodes[3].state.lock().unwrap().migrations.iter().map(|m| m.id.clone()).collect();
    let first = &plan.moves.iter().find(|m| m.state == strata_operator::api::MoveState::Running).unwrap().id;
    assert_eq!(ids.iter().filter(|i| *i == first).count(), 1, "{ids:?}");
    assert!(ids.contains(&format!("{first}.2")), "{ids:?}");
    let done = events_with(&ns, "demo", &["ReshardingDone"]).await;
    assert!(done.iter().any(|(_, n)| n.contains(&plan.plan)), "{done:?}");
    drop(op);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_migration_that_would_overfill_its_target_is_refused_not_attempted() {
    use support::fake_node::FakeNode;

    let plane = ControlPlane::get();
    let ns = plane.namespace("capacity");
    let args = ["--leader-elect=false", "--watch-namespace", ns.as_str(), "--migration-batch-slots", "8192"];
    let _op = plane.operator("capacity", &args);
    let client = plane.client().await;
    let ccs: Api<CacheCluster> = Api::namespaced(client.clone(), &ns);
    apply_cc(&ccs, "demo", json!({ "replicas": 1 })).await;
    observed(&ccs, "demo", 1).await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns);
    let secret = secrets.get("demo-cluster-admin").await.unwrap();
    let password = String::from_utf8(secret.data.unwrap()["password"].0.clone()).unwrap();
    let info = |used_mb: u64| {
        format!(
            "# Memory\r\nused_memory_dataset:{}\r\nmaxmemory:{}\r\n# Tier\r\ntier_disk_bytes:0\r\ntier_max_disk_bytes:0\r\n",
            used_mb << 20,
            100u64 << 20
        )
    };
    let full = FakeNode::start("127.0.80.1", &password).await;
    full.state.lock().unwrap().info = Some(info(90));
    create_pod(&client, &ns, "demo", 0, "r1").await;
    run_pod(&client, &ns, "demo-0", "127.0.80.1").await;
    converged(&ccs, "demo", 1, None).await;

    // Half of 90 MB onto a node that holds 60 of its 100: refused with a condition.
    let new = FakeNode::start("127.0.80.2", &password).await;
    new.state.lock().unwrap().info = Some(info(60));
    apply_cc(&ccs, "demo", json!({ "replicas": 2 })).await;
    create_pod(&client, &ns, "demo", 1, "r1").await;
    run_pod(&client, &ns, "demo-1", "127.0.80.2").await;
    let cc = eventually(WAIT, "Degraded/InsufficientCapacity", || async {
        let cc = ccs.get("demo").await.ok()?;
        (condition(&cc, "Degraded")?.reason == "InsufficientCapacity").then_some(cc)
    })
    .await;
    let degraded = condition(&cc, "Degraded").unwrap();
    assert!(degraded.message.contains("from demo-0 to demo-1 not started"), "{}", degraded.message);
    assert_eq!(condition(&cc, "Resharding").unwrap().status, ConditionStatus::True);
    assert!(full.state.lock().unwrap().migrations.is_empty(), "not attempted");

    // Room made on the target: the migration goes ahead and the condition clears.
    new.state.lock().unwrap().info = Some(info(10));
    let cc = eventually(WAIT, "Resharding False/Balanced", || async {
        let cc = ccs.get("demo").await.ok()?;
        (condition(&cc, "Resharding")?.reason == "Balanced").then_some(cc)
    })
    .await;
    let degraded = condition(&cc, "Degraded").unwrap();
    assert_eq!(degraded.status, ConditionStatus::False, "{}", degraded.message);
    assert_eq!(new.slots(), 8192);
}

/// Turning `spec.tls` off while the earlier spec's Secret is already gone: the new (plain) pod
/// is spoken to in plain TCP and applies the topology; the old pod, whose TLS admin port cannot
/// be reached without that Secret, is told in Degraded and does not hold up the rollout that
/// replaces it.
#[tokio::test(flavor = "multi_thread")]
async fn an_old_pod_whose_tls_secret_is_gone_does_not_hold_up_the_rollout() {
    use support::fake_node::FakeNode;

    let plane = ControlPlane::get();
    let ns = plane.namespace("untls");
    let _op = plane.operator("untls", &["--leader-elect=false", "--watch-namespace", &ns]);
    let client = plane.client().await;
    let ccs: Api<CacheCluster> = Api::namespaced(client.clone(), &ns);
    let sts_api: Api<StatefulSet> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    apply_cc(&ccs, "demo", json!({ "replicas": 2 })).await;
    observed(&ccs, "demo", 1).await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns);
    let secret = secrets.get("demo-cluster-admin").await.unwrap();
    let password = String::from_utf8(secret.data.unwrap()["password"].0.clone()).unwrap();

    // demo-0 already replaced (plain, Ready); demo-1 still of the TLS spec, its Secret deleted.
    let plain = FakeNode::start("127.0.81.1", &password).await;
    create_pod(&client, &ns, "demo", 0, "demo-v2").await;
    run_pod(&client, &ns, "demo-0", "127.0.81.1").await;
    set_pod(&client, &ns, "demo-0", "demo-v2", true).await;
    create_pod_with(&client, &ns, "demo", 1, "demo-v1", Some("demo-old-cert")).await;
    run_pod(&client, &ns, "demo-1", "127.0.81.2").await;
    let degraded = eventually(WAIT, "demo-0 applies the topology, demo-1 told unreachable", || async {
        let cc = ccs.get("demo").await.ok()?;
        let status = cc.status.clone()?;
        let epoch = status.topology_epoch?;
        let applied = status.nodes.first()?.applied_epoch == Some(epoch);
        let degraded = condition(&cc, "Degraded")?;
        (applied && degraded.message.contains("demo-old-cert")).then_some(degraded.message)
    })
    .await;
    assert!(degraded.contains(&format!("{ns}/demo-old-cert")) && degraded.contains("earlier spec"), "{degraded}");
    assert!(plain.epoch() >= 1, "the plain pod is spoken to in plain TCP");

    // The StatefulSet controller's view of the rollout: demo-1 is of the old revision.
    let generation = sts_api.get("demo").await.unwrap().metadata.generation;
    let status = json!({ "status": {
        "observedGeneration": generation, "replicas": 2, "readyReplicas": 1, "availableReplicas": 1,
        "currentRevision": "demo-v1", "updateRevision": "demo-v2",
    } });
    sts_api.patch_status("demo", &PatchParams::default(), &Patch::Merge(&status)).await.expect("StatefulSet status");
    eventually(WAIT, "demo-1 replaced", || async { pods.get_opt("demo-1").await.ok()?.is_none().then_some(()) }).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tls_secret_without_ca_crt_holds_the_rollout() {
    let plane = ControlPlane::get();
    let ns = plane.namespace("tlshold");
    let _op = plane.operator("tlshold", &["--leader-elect=false", "--watch-namespace", &ns]);
    let client = plane.client().await;
    let ccs: Api<CacheCluster> = Api::namespaced(client.clone(), &ns);
    let sts_api: Api<StatefulSet> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    // An operator upgrade of a spec.tls cluster whose Secret came from `kubectl create secret
    // tls` (no ca.crt): its pods, of the earlier operator, do not run tls-cluster yet.
    let without_ca = plane.kubectl(&[
        "-n",
        &ns,
        "create",
        "secret",
        "generic",
        "demo-cert",
        "--from-literal=tls.crt=x",
        "--from-literal=tls.key=y",
    ]);
    assert!(without_ca.success, "{}", without_ca.stderr);
    apply_cc(&ccs, "demo", json!({ "replicas": 2, "tls": { "secretName": "demo-cert" } })).await;
    observed(&ccs, "demo", 1).await;
    for i in 0..2 {
        create_pod(&client, &ns, "demo", i, "demo-v1").await;
        set_pod(&client, &ns, &format!("demo-{i}"), "demo-v1", true).await;
    }
    let generation = sts_api.get("demo").await.unwrap().metadata.generation;
    let status = json!({ "status": {
        "observedGeneration": generation, "replicas": 2, "readyReplicas": 2, "availableReplicas": 2,
        "currentRevision": "demo-v1", "updateRevision": "demo-v2",
    } });
    sts_api.patch_status("demo", &PatchParams::default(), &Patch::Merge(&status)).await.expect("StatefulSet status");
    let progressing = eventually(WAIT, "the rollout held for the TLS Secret", || async {
        let progressing = condition(&ccs.get("demo").await.ok()?, "Progressing")?;
        progressing
            .message
            .contains(&format!("waiting for the TLS Secret {ns}/demo-cert to be usable"))
            .then_some(progressing)
    })
    .await;
    assert!(progressing.message.contains("has no ca.crt"), "{}", progressing.message);
    let degraded = condition(&ccs.get("demo").await.unwrap(), "Degraded").unwrap();
    assert_eq!((degraded.status, degraded.reason.as_str()), (ConditionStatus::True, "TLSSecretUnusable"));
    // Some more rounds: no pod is evicted (its replacement could not start).
    tokio::time::sleep(Duration::from_secs(3)).await;
    for i in 0..2 {
        let pod = pods.get_opt(&format!("demo-{i}")).await.unwrap();
        assert!(pod.is_some_and(|p| p.metadata.deletion_timestamp.is_none()), "demo-{i} was evicted");
    }
}
