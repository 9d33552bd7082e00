//! A real Prometheus (Debian's `prometheus`, from scripts/install-deps.sh) on the host, scraping
//! the cluster's strata-node pods and the operator with the labels the operator's ServiceMonitor
//! gives them, and the check of every dashboard query and alert rule against it
//! (scripts/check-dashboards.py, the same check `make check` runs against a local node).
//!
//! Pods are scraped at their IPs when the host reaches them (the local cluster), otherwise through
//! one port-forward per pod. Targets are static (listed from the API by the test): Debian's
//! prometheus is built without Kubernetes service discovery.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cluster::{Env, PortForward};
use crate::util::run;

/// The node's and the operator's metrics ports (the StatefulSet's `metrics`, the chart's `http`).
pub const NODE_METRICS_PORT: u16 = 9121;
pub const OPERATOR_METRICS_PORT: u16 = 8080;

/// A pod to scrape: where it runs and the labels its series get.
#[derive(Debug, Clone)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub ip: String,
    /// `app.kubernetes.io/instance` (the CacheCluster, for node pods).
    pub instance: String,
}

/// The pods with label `app.kubernetes.io/name=<app>` in `namespace` that have an IP.
pub fn pods(env: &Env, namespace: &str, app: &str) -> Vec<Pod> {
    let out =
        env.kubectl(&["-n", namespace, "get", "pods", "-l", &format!("app.kubernetes.io/name={app}"), "-o", "json"]);
    let list: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_default();
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|p| {
            Some(Pod {
                namespace: namespace.to_owned(),
                name: p["metadata"]["name"].as_str()?.to_owned(),
                ip: p["status"]["podIP"].as_str()?.to_owned(),
                instance: p["metadata"]["labels"]["app.kubernetes.io/instance"].as_str().unwrap_or("").to_owned(),
            })
        })
        .collect()
}

/// Whether the host reaches `ip:port` (pod networking routed to the host).
pub fn reachable(ip: &str, port: u16) -> bool {
    let Ok(addr) = format!("{ip}:{port}").parse::<SocketAddr>() else { return false };
    TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok()
}

/// How Prometheus reaches the pods.
pub enum Scrape {
    /// The pods' IPs, reached directly from the host.
    PodIps,
    /// Static targets, one port-forward per pod (kept open as long as this lives).
    PortForwards(Vec<(Pod, PortForward, u16)>),
}

impl Scrape {
    /// Pod IPs when every pod's metrics port answers there, else port-forwards.
    pub fn choose(env: &Env, nodes: &[Pod], operators: &[Pod]) -> Scrape {
        let all_reachable = nodes.iter().all(|p| reachable(&p.ip, NODE_METRICS_PORT))
            && operators.iter().all(|p| reachable(&p.ip, OPERATOR_METRICS_PORT));
        if all_reachable {
            return Scrape::PodIps;
        }
        let forward = |p: &Pod, port: u16| {
            let pf = env.port_forward(&p.namespace, &format!("pod/{}", p.name), port);
            let local = pf.port;
            (p.clone(), pf, local)
        };
        let mut v: Vec<_> = nodes.iter().map(|p| forward(p, NODE_METRICS_PORT)).collect();
        v.extend(operators.iter().map(|p| forward(p, OPERATOR_METRICS_PORT)));
        Scrape::PortForwards(v)
    }

    pub fn describe(&self) -> &'static str {
        match self {
            Scrape::PodIps => "pod IPs",
            Scrape::PortForwards(_) => "port-forwards (pod IPs unreachable from the host)",
        }
    }

    /// prometheus.yml: 1 s scrapes and rule evaluation, the repository's rules, and the two jobs
    /// with the labels a ServiceMonitor gives (namespace, pod; cachecluster from the pod's
    /// app.kubernetes.io/instance). The operator's own series keep their labels (honor_labels).
    /// Static targets: Debian's prometheus is built without Kubernetes service discovery.
    pub fn config(&self, rules: &Path, nodes: &[Pod], operators: &[Pod]) -> String {
        let targets: Vec<(&Pod, String, bool)> = match self {
            Scrape::PodIps => nodes
                .iter()
                .map(|p| (p, format!("{}:{NODE_METRICS_PORT}", p.ip), true))
                .chain(operators.iter().map(|p| (p, format!("{}:{OPERATOR_METRICS_PORT}", p.ip), false)))
                .collect(),
            Scrape::PortForwards(forwards) => forwards
                .iter()
                .map(|(p, _, local)| {
                    (
                        p,
                        format!("127.0.0.1:{local}"),
                        nodes.iter().any(|n| n.name == p.name && n.namespace == p.namespace),
                    )
                })
                .collect(),
        };
        header(rules) + &static_jobs(&targets)
    }
}

/// 1 s scrapes and rule evaluation, `rules` loaded; the jobs follow.
fn header(rules: &Path) -> String {
    format!(
        "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nrule_files: [{:?}]\nscrape_configs:\n",
        rules.display().to_string()
    )
}

/// The two jobs with static targets (address, and whether it is a node pod) and the labels a
/// ServiceMonitor would give: namespace and pod, cachecluster for node pods (the operator's own
/// series name theirs).
fn static_jobs(targets: &[(&Pod, String, bool)]) -> String {
    let mut out = String::new();
    for (job, honor, nodes) in [("strata-node", false, true), ("strata-operator", true, false)] {
        out += &format!("  - job_name: {job}\n    honor_labels: {honor}\n    static_configs:\n");
        for (p, address, is_node) in targets {
            if *is_node != nodes {
                continue;
            }
            let cachecluster = if *is_node { format!(", cachecluster: {}", p.instance) } else { String::new() };
            out += &format!(
                "      - targets: [\"{address}\"]\n        labels: {{namespace: {}, pod: {}{cachecluster}}}\n",
                p.namespace, p.name
            );
        }
    }
    out
}

/// A running Prometheus; stopped, and its directory removed, on drop.
pub struct Prometheus {
    child: Child,
    dir: PathBuf,
    pub url: String,
}

impl Prometheus {
    /// Starts `prometheus` with `config` on a free local port and waits until it is ready.
    pub fn start(config: &str) -> Prometheus {
        let dir = std::env::temp_dir().join(format!("strata-e2e-prometheus-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("Prometheus work directory");
        let config_path = dir.join("prometheus.yml");
        std::fs::write(&config_path, config).expect("writing prometheus.yml");
        let check = run(Command::new("promtool").arg("check").arg("config").arg(&config_path), None);
        assert!(check.success, "promtool check config:\n{config}\n{}{}", check.stdout, check.stderr);
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let log = std::fs::File::create(dir.join("prometheus.log")).expect("Prometheus log");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting prometheus (Debian's package: scripts/install-deps.sh)");
        let p = Prometheus { child, dir, url: format!("http://127.0.0.1:{port}") };
        let deadline = Instant::now() + Duration::from_secs(30);
        while crate::util::http_get(port, "/-/ready").map(|(code, _)| code) != Some(200) {
            assert!(Instant::now() < deadline, "Prometheus not ready after 30 s:\n{}", p.log());
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    pub fn port(&self) -> u16 {
        self.url.rsplit(':').next().and_then(|p| p.parse().ok()).expect("port in the URL")
    }

    /// The JSON `data` of an instant query, or the error Prometheus gave.
    pub fn query(&self, expr: &str) -> Result<serde_json::Value, String> {
        let mut encoded = String::new();
        for b in expr.bytes() {
            match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => encoded.push(b as char),
                _ => encoded.push_str(&format!("%{b:02X}")),
            }
        }
        let (code, body) = crate::util::http_get(self.port(), &format!("/api/v1/query?query={encoded}"))
            .ok_or("Prometheus did not answer")?;
        let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| format!("{code}: {e}: {body}"))?;
        if v["status"] != "success" {
            return Err(format!("{code}: {body}"));
        }
        Ok(v["data"].clone())
    }

    /// The values of an instant vector query's series, with their labels.
    pub fn vector(&self, expr: &str) -> Vec<(serde_json::Value, f64)> {
        let data = self.query(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
        data["result"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| Some((s["metric"].clone(), s["value"][1].as_str()?.parse().ok()?)))
            .collect()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// scripts/check-dashboards.py against this Prometheus: every dashboard query and variable
    /// must return data, every rule expression series, every rule be healthy.
    pub fn check_dashboards(&self, root: &Path, vars: &[(&str, &str)]) -> crate::util::Output {
        let mut cmd = Command::new("/usr/bin/python3");
        cmd.arg(root.join("scripts/check-dashboards.py")).arg("--prometheus").arg(&self.url);
        for (k, v) in vars {
            cmd.arg("--var").arg(format!("{k}={v}"));
        }
        // The cluster's data fits in RAM: its tier exists but reads nothing, so the cold-read
        // quantiles, whole and per stage, are NaN here (`make check` proves them against a node
        // that does read). Reads in flight and the read-ahead rate are 0, not NaN: no idle-ok.
        cmd.arg("--idle-ok").arg("strata_tier_read_duration_seconds");
        cmd.arg("--idle-ok").arg("strata_tier_read_stage_duration_seconds");
        // Its one pod owns every slot, so nothing is forwarded and the forwarding latency's
        // quantiles and mean are NaN too (`make check` proves them with two shards).
        cmd.arg("--idle-ok").arg("strata_cluster_forward_duration_seconds");
        run(&mut cmd, None)
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The config promtool accepts, with the labels the queries need.
    #[test]
    fn config_passes_promtool() {
        let dir = std::env::temp_dir().join(format!("strata-e2e-prometheus-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/strata.rules.yaml");
        let node =
            Pod { namespace: "app".into(), name: "demo-0".into(), ip: "10.0.0.1".into(), instance: "demo".into() };
        let op = Pod { namespace: "ops".into(), name: "op-1".into(), ip: "10.0.0.2".into(), instance: "op".into() };
        let config = Scrape::PodIps.config(&rules, std::slice::from_ref(&node), std::slice::from_ref(&op));
        assert!(
            config.contains(
                "targets: [\"10.0.0.1:9121\"]\n        labels: {namespace: app, pod: demo-0, cachecluster: demo}"
            ),
            "{config}"
        );
        assert!(
            config.contains("targets: [\"10.0.0.2:8080\"]\n        labels: {namespace: ops, pod: op-1}\n"),
            "{config}"
        );
        let path = dir.join("prometheus.yml");
        std::fs::write(&path, &config).unwrap();
        let out = run(Command::new("promtool").arg("check").arg("config").arg(&path), None);
        assert!(out.success, "{config}\n{}{}", out.stdout, out.stderr);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
