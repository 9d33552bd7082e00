//! Monitoring objects against a real kube-apiserver that serves the Prometheus Operator's API
//! (minimal copies of its ServiceMonitor and PrometheusRule CRD schemas, in `fixtures/`): the
//! chart's ServiceMonitor, dashboards ConfigMaps and PrometheusRule pass server-side validation,
//! and the operator creates a CacheCluster's PrometheusRule and ServiceMonitor. A control plane of
//! its own, so the other tests keep one without these CRDs.

mod support;

use std::process::Command;
use std::time::Duration;

use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use strata_operator::api::{CacheCluster, ConditionStatus};
use support::{ControlPlane, eventually, run, workspace_root};

const WAIT: Duration = Duration::from_secs(60);

fn install_monitoring_crds(plane: &ControlPlane) {
    for (file, name) in [
        ("monitoring.coreos.com_servicemonitors.yaml", "servicemonitors.monitoring.coreos.com"),
        ("monitoring.coreos.com_prometheusrules.yaml", "prometheusrules.monitoring.coreos.com"),
    ] {
        let path = workspace_root().join("operator/tests/fixtures").join(file);
        plane.kubectl(&["apply", "--server-side", "-f", &path.display().to_string()]).ok(file);
        plane.wait_crd_established(name);
    }
}

fn helm_template(args: &[&str]) -> String {
    let helm = support::k8s_bin().join("helm");
    assert!(helm.is_file(), "{} not found: run `scripts/k8s-tools.sh helm`", helm.display());
    let root = workspace_root();
    run(
        Command::new(helm)
            .current_dir(&root)
            .args(["template", "strata-operator", "charts/strata-operator", "--namespace", "strata-system"])
            .args(["--kube-version", "1.33.0", "--api-versions", "monitoring.coreos.com/v1"])
            .args(args),
        None,
    )
    .ok("helm template")
}

#[test]
fn chart_monitoring_objects_pass_server_side_validation() {
    let plane = ControlPlane::get();
    install_monitoring_crds(plane);
    plane.ensure_namespace("strata-system");
    let rendered = helm_template(&[
        "--set",
        "serviceMonitor.enabled=true",
        "--set",
        "grafanaDashboards.enabled=true",
        "--set",
        "grafanaDashboards.annotations.grafana_folder=Strata",
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "prometheusRule.labels.release=kps",
    ]);
    for kind in ["ServiceMonitor", "PrometheusRule", "ConfigMap"] {
        assert!(rendered.contains(&format!("\nkind: {kind}\n")), "helm rendered no {kind}");
    }
    let out = plane.kubectl_stdin(&["apply", "--dry-run=server", "-o", "name", "-f", "-"], Some(&rendered));
    assert!(out.success, "the API server refused the chart's objects:\n{}\n{}", out.stdout, out.stderr);
    for object in [
        "servicemonitor.monitoring.coreos.com/strata-operator",
        "prometheusrule.monitoring.coreos.com/strata-operator",
        "configmap/strata-operator-dashboard-overview",
        "configmap/strata-operator-dashboard-node",
        "configmap/strata-operator-dashboard-operator",
    ] {
        assert!(out.stdout.lines().any(|l| l == object), "{object} not accepted; kubectl said:\n{}", out.stdout);
    }

    // The schema copies are strict enough to catch a broken rule: a rule without expr is refused.
    let broken = "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata: {name: broken, namespace: strata-system}\n\
                  spec: {groups: [{name: g, rules: [{alert: A, for: 5 minutes}]}]}\n";
    let out = plane.kubectl_stdin(&["apply", "--dry-run=server", "-f", "-"], Some(broken));
    assert!(!out.success && out.stderr.contains("expr"), "a rule without expr was accepted: {}", out.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn operator_creates_the_clusters_prometheus_rule_and_service_monitor() {
    let plane = ControlPlane::get();
    install_monitoring_crds(plane);
    let ns = plane.namespace("rules");
    // With exactly the RBAC manifests/install.yaml grants (a missing rule shows up here).
    let install = workspace_root().join("manifests/install.yaml");
    plane.ensure_namespace("strata-system");
    plane.kubectl(&["apply", "--server-side", "-f", &install.display().to_string()]).ok("applying install.yaml");
    let token = plane.kubectl(&["-n", "strata-system", "create", "token", "strata-operator", "--duration=1h"]);
    let kubeconfig = plane.dir.join("kubeconfig-operator-sa");
    std::fs::write(&kubeconfig, support::kubeconfig_with_token(&plane.url, token.ok("token").trim())).unwrap();
    let op = plane.operator_as(
        "rules",
        &kubeconfig,
        &["--leader-election-namespace", "strata-system", "--watch-namespace", &ns],
    );
    let client = plane.client().await;
    let ccs: Api<CacheCluster> = Api::namespaced(client.clone(), &ns);
    let spec =
        json!({ "monitoring": { "serviceMonitor": true, "prometheusRule": true, "labels": { "release": "kps" } } });
    let obj = json!({ "apiVersion": "strata.dev/v1alpha1", "kind": "CacheCluster", "metadata": { "name": "alerts" }, "spec": spec });
    ccs.patch("alerts", &PatchParams::apply("strata-test").force(), &Patch::Apply(&obj)).await.unwrap();

    let cc = eventually(WAIT, "Monitoring condition True on alerts", || async {
        let cc = ccs.get("alerts").await.ok()?;
        let cond = cc.status.as_ref()?.conditions.iter().find(|c| c.type_ == "Monitoring")?.clone();
        (cond.status == ConditionStatus::True).then_some(cc)
    })
    .await;
    let out = plane.kubectl(&["-n", &ns, "get", "prometheusrule", "alerts", "-o", "json"]);
    let rule: serde_json::Value = serde_json::from_str(&out.ok("get prometheusrule")).unwrap();
    assert_eq!(rule["metadata"]["labels"]["release"], "kps");
    assert_eq!(rule["metadata"]["ownerReferences"][0]["uid"], cc.uid().unwrap());
    let rules = rule["spec"]["groups"][0]["rules"].as_array().expect("rules");
    assert!(rules.iter().any(|r| r["alert"] == "StrataNodeDown"), "{rules:?}");
    let scope = format!("namespace=\"{ns}\", cachecluster=\"alerts\"");
    for r in rules {
        let expr = r["expr"].as_str().unwrap();
        assert!(expr.contains(&scope) && !expr.contains("cachecluster!=\"\""), "not scoped to the cluster: {expr}");
    }
    // The ServiceMonitor gives the series the cachecluster label those rules select on.
    let out = plane.kubectl(&["-n", &ns, "get", "servicemonitor", "alerts", "-o", "json"]);
    let sm: serde_json::Value = serde_json::from_str(&out.ok("get servicemonitor")).unwrap();
    assert_eq!(sm["spec"]["endpoints"][0]["relabelings"][0]["targetLabel"], "cachecluster");

    // Turned off, the PrometheusRule goes.
    let spec = json!({ "monitoring": { "serviceMonitor": true, "prometheusRule": false } });
    let obj = json!({ "apiVersion": "strata.dev/v1alpha1", "kind": "CacheCluster", "metadata": { "name": "alerts" }, "spec": spec });
    ccs.patch("alerts", &PatchParams::apply("strata-test").force(), &Patch::Apply(&obj)).await.unwrap();
    eventually(WAIT, "PrometheusRule alerts deleted", || async {
        let out = plane.kubectl(&["-n", &ns, "get", "prometheusrule", "alerts"]);
        (!out.success && out.stderr.contains("NotFound")).then_some(())
    })
    .await;
    let forbidden = support::grep(&op.log, "forbidden");
    assert!(forbidden.is_empty(), "RBAC denials:\n{}", forbidden.join("\n"));
}

/// `strata_cachecluster_*` follow the CacheClusters: present while one exists, gone with it.
#[tokio::test(flavor = "multi_thread")]
async fn cachecluster_series_come_and_go_with_the_cluster() {
    let plane = ControlPlane::get();
    let ns = plane.namespace("series");
    let op = plane.operator("series", &["--leader-elect=false", "--watch-namespace", &ns]);
    let client = plane.client().await;
    let ccs: Api<CacheCluster> = Api::namespaced(client.clone(), &ns);
    let obj = json!({ "apiVersion": "strata.dev/v1alpha1", "kind": "CacheCluster", "metadata": { "name": "gauge" }, "spec": { "replicas": 2 } });
    ccs.patch("gauge", &PatchParams::apply("strata-test").force(), &Patch::Apply(&obj)).await.unwrap();
    let desired =
        format!("strata_cachecluster_replicas{{namespace=\"{ns}\",cachecluster=\"gauge\",state=\"desired\"}} 2");
    // No kubelet here: the StatefulSet never gets pods, so none is ready and a rollout is on.
    let ready = format!("strata_cachecluster_replicas{{namespace=\"{ns}\",cachecluster=\"gauge\",state=\"ready\"}} 0");
    let progressing = format!(
        "strata_cachecluster_condition{{namespace=\"{ns}\",cachecluster=\"gauge\",condition=\"Progressing\"}} 1"
    );
    eventually(WAIT, "the cluster's series on /metrics", || async {
        let (_, body) = op.http_get("/metrics")?;
        [&desired, &ready, &progressing].iter().all(|line| body.lines().any(|l| l == line.as_str())).then_some(())
    })
    .await;
    ccs.delete("gauge", &Default::default()).await.unwrap();
    eventually(WAIT, "the deleted cluster's series gone from /metrics", || async {
        let (_, body) = op.http_get("/metrics")?;
        (!body.contains("cachecluster=\"gauge\"")).then_some(())
    })
    .await;
}
