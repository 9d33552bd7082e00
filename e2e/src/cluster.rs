//! The cluster under test: kubectl and helm runners, port-forwards, waits, and a diagnostics
//! dump for failures. kubectl and helm come from PATH (`e2e/cluster.sh env` puts the project's
//! builds first); the kubeconfig from `STRATA_E2E_KUBECONFIG`, which only `make e2e` sets.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use crate::util::run;
pub use crate::util::{Output, eventually, http_get};

/// The cluster and the repository the suite runs against.
pub struct Env {
    pub kubeconfig: PathBuf,
    pub root: PathBuf,
}

impl Env {
    pub fn from_env() -> Env {
        let kubeconfig = std::env::var_os("STRATA_E2E_KUBECONFIG").map(PathBuf::from).unwrap_or_else(|| {
            panic!(
                "STRATA_E2E_KUBECONFIG is not set: run the suite with `make e2e`, which brings up a cluster \
                 with e2e/cluster.sh, builds and loads the images and sets it"
            )
        });
        Env { kubeconfig, root: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..") }
    }

    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.run("kubectl", args, None)
    }

    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> Output {
        self.run("kubectl", args, Some(stdin))
    }

    pub fn helm(&self, args: &[&str]) -> Output {
        self.run("helm", args, None)
    }

    fn run(&self, program: &str, args: &[&str], stdin: Option<&str>) -> Output {
        run(Command::new(program).env("KUBECONFIG", &self.kubeconfig).args(args), stdin)
    }

    pub async fn client(&self) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig).expect("reading the e2e kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("kube config from the e2e kubeconfig");
        kube::Client::try_from(config).expect("kube client")
    }

    /// `kubectl port-forward` to `target` (e.g. `svc/demo`, `pod/demo-0`) on a free local port.
    pub fn port_forward(&self, namespace: &str, target: &str, remote_port: u16) -> PortForward {
        let mut child = Command::new("kubectl")
            .env("KUBECONFIG", &self.kubeconfig)
            .args(["-n", namespace, "port-forward", "--address", "127.0.0.1", target, &format!(":{remote_port}")])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting kubectl port-forward");
        // "Forwarding from 127.0.0.1:43615 -> 6379"
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let port = lines
            .next()
            .and_then(Result::ok)
            .and_then(|l| l.split_once("127.0.0.1:")?.1.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("kubectl port-forward {target} printed no local port"));
        // Keep draining its output so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        PortForward { child, port }
    }

    /// Everything useful to read when a step fails in `namespace`.
    pub fn diagnostics(&self, namespace: &str) -> String {
        let mut out = String::new();
        let mut section = |title: &str, args: &[&str]| {
            let o = self.kubectl(args);
            out.push_str(&format!("\n===== {title} =====\n{}{}", o.stdout, o.stderr));
        };
        section("objects", &["-n", namespace, "get", "all,pvc,cm,pdb,cacheclusters,endpointslices", "-o", "wide"]);
        section("CacheCluster status", &["-n", namespace, "get", "cacheclusters", "-o", "yaml"]);
        section("events", &["-n", namespace, "get", "events", "--sort-by=.lastTimestamp"]);
        section("pods", &["-n", namespace, "describe", "pods"]);
        section(
            "node logs",
            &["-n", namespace, "logs", "-l", "app.kubernetes.io/name=strata-node", "--tail=50", "--prefix"],
        );
        section("operator", &["-n", "strata-system", "get", "pods", "-o", "wide"]);
        section(
            "operator logs",
            &["-n", "strata-system", "logs", "-l", "app.kubernetes.io/name=strata-operator", "--tail=100"],
        );
        out
    }
}

/// A running port-forward; stopped on drop.
pub struct PortForward {
    child: Child,
    pub port: u16,
}

impl Drop for PortForward {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Prints a progress line (the suite runs for minutes; `--nocapture` shows these).
pub fn step(what: &str) {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let start = START.get_or_init(Instant::now);
    eprintln!("[e2e +{:>5.1}s] {what}", start.elapsed().as_secs_f64());
}
