//! A real Kubernetes control plane for the operator's tests: etcd and kube-apiserver started as
//! processes (no mock server), plus helpers to run `kubectl` and the `strata-operator` binary
//! against it.
//!
//! The binaries come from `scripts/k8s-tools.sh control-plane` (built once from the Go module
//! proxy, cached in `$STRATA_CACHE/k8s/bin`, default `~/.cache/strata/k8s/bin`; `STRATA_K8S_BIN`
//! overrides). One control plane serves every test of a test binary; each test works in its own
//! namespace. There is no controller-manager or kubelet: StatefulSets get no pods and nothing
//! is garbage-collected, which is what these tests want (they check what the operator writes).

#![allow(dead_code)] // Each test binary uses a different part of the harness.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use kube::config::Kubeconfig;
use kube::{Client, Config};
#[allow(unused_imports)] // Each test binary uses a different part of the harness.
pub use strata_e2e::util::{Output, eventually, http_get, run};

pub mod fake_node;
pub mod pki;

const TOKEN: &str = "strata-test-admin-token";

/// The control plane every test in this binary shares.
pub struct ControlPlane {
    pub dir: PathBuf,
    pub url: String,
    pub kubeconfig: PathBuf,
    pub bin: PathBuf,
}

static PLANE: OnceLock<ControlPlane> = OnceLock::new();
/// Child processes stay alive as long as the thread that spawned them (PR_SET_PDEATHSIG fires
/// when that *thread* exits), so a dedicated thread that never ends spawns them all.
static SPAWNER: OnceLock<Mutex<std::sync::mpsc::Sender<SpawnRequest>>> = OnceLock::new();

type SpawnRequest = (Command, std::sync::mpsc::Sender<std::io::Result<Child>>);

/// Spawns `cmd` so that it dies with the test process, even if the test panics or is killed.
pub fn spawn_tied(cmd: Command) -> std::io::Result<Child> {
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("child-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    use std::os::unix::process::CommandExt;
                    // SAFETY: prctl is async-signal-safe; it only sets a flag on the child.
                    unsafe {
                        cmd.pre_exec(|| {
                            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                            Ok(())
                        });
                    }
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("spawning the child-spawner thread");
        Mutex::new(tx)
    });
    let (tx, rx) = std::sync::mpsc::channel();
    spawner.lock().unwrap().send((cmd, tx)).expect("child-spawner thread alive");
    rx.recv().expect("child-spawner thread answers")
}

/// Where the Kubernetes binaries are.
pub fn k8s_bin() -> PathBuf {
    if let Ok(dir) = std::env::var("STRATA_K8S_BIN") {
        return PathBuf::from(dir);
    }
    let cache = std::env::var("STRATA_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/strata"));
    cache.join("k8s/bin")
}

pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl ControlPlane {
    /// Starts (once) and returns the shared control plane, with the CacheCluster CRD installed.
    pub fn get() -> &'static ControlPlane {
        PLANE.get_or_init(|| ControlPlane::start().unwrap_or_else(|e| panic!("{e}")))
    }

    fn start() -> Result<ControlPlane, String> {
        let bin = k8s_bin();
        for b in ["etcd", "kube-apiserver", "kubectl"] {
            if !bin.join(b).is_file() {
                return Err(format!(
                    "{} not found: build the Kubernetes test binaries once with `scripts/k8s-tools.sh control-plane` \
                     (or point STRATA_K8S_BIN at a directory holding etcd, kube-apiserver and kubectl)",
                    bin.join(b).display()
                ));
            }
        }
        let dir = std::env::temp_dir().join(format!("strata-apiserver-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("certs")).map_err(|e| e.to_string())?;

        let (etcd_port, peer_port, api_port) = (free_port(), free_port(), free_port());
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let mut etcd = Command::new(bin.join("etcd"));
        etcd.args(["--data-dir", &dir.join("etcd").display().to_string()])
            .args(["--listen-client-urls", &etcd_url, "--advertise-client-urls", &etcd_url])
            .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer_port}")])
            .args(["--initial-advertise-peer-urls", &format!("http://127.0.0.1:{peer_port}")])
            .args(["--initial-cluster", &format!("default=http://127.0.0.1:{peer_port}")])
            .args(["--unsafe-no-fsync", "--log-level", "warn"]);
        log_to(&mut etcd, &dir.join("etcd.log"));
        spawn_tied(etcd).map_err(|e| format!("starting etcd: {e}"))?;

        // The service-account signing key; openssl is in every Debian install of this project.
        let key = dir.join("sa.key");
        let status = Command::new("openssl")
            .args(["genrsa", "-out", &key.display().to_string(), "2048"])
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("running openssl: {e}"))?;
        if !status.success() {
            return Err("openssl genrsa failed".into());
        }
        std::fs::write(dir.join("tokens.csv"), format!("{TOKEN},admin,admin,system:masters\n")).unwrap();

        let mut api = Command::new(bin.join("kube-apiserver"));
        api.args(["--etcd-servers", &etcd_url])
            .args(["--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1"])
            .args(["--secure-port", &api_port.to_string()])
            .args(["--cert-dir", &dir.join("certs").display().to_string()])
            .args(["--token-auth-file", &dir.join("tokens.csv").display().to_string()])
            .args(["--authorization-mode", "Node,RBAC"])
            .args(["--service-account-issuer", "https://kubernetes.default.svc"])
            .args(["--service-account-key-file", &key.display().to_string()])
            .args(["--service-account-signing-key-file", &key.display().to_string()])
            .args(["--service-cluster-ip-range", "10.96.0.0/16"])
            .args(["--enable-priority-and-fairness=false", "--v", "1"]);
        log_to(&mut api, &dir.join("kube-apiserver.log"));
        spawn_tied(api).map_err(|e| format!("starting kube-apiserver: {e}"))?;

        let url = format!("https://127.0.0.1:{api_port}");
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, kubeconfig_yaml(&url)).unwrap();
        let plane = ControlPlane { dir, url, kubeconfig, bin };

        // Ready when /readyz answers and the default namespace exists.
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let out = plane.kubectl(&["get", "--raw", "/readyz"]);
            if out.success && plane.kubectl(&["get", "namespace", "default"]).success {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "kube-apiserver not ready after 120s; see {}/kube-apiserver.log and etcd.log",
                    plane.dir.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        let crd = workspace_root().join("crds/strata.dev_cacheclusters.yaml");
        let out = plane.kubectl(&["apply", "--server-side", "-f", &crd.display().to_string()]);
        assert!(out.success, "installing the CRD: {}", out.stderr);
        plane.wait_crd_established("cacheclusters.strata.dev");
        Ok(plane)
    }

    /// Waits until the CRD `name` serves its API. `kubectl wait` fails at
    /// once, instead of waiting, while a new CRD has no status conditions
    /// yet (a loaded machine): it is tried again.
    pub fn wait_crd_established(&self, name: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let crd = format!("crd/{name}");
        let wait = || self.kubectl(&["wait", "--for=condition=Established", &crd, "--timeout=60s"]);
        let mut out = wait();
        while !out.success && out.stderr.contains("accessor error") && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
            out = wait();
        }
        assert!(out.success, "CRD {name} not established: {}", out.stderr);
    }

    /// A kube client as cluster admin.
    pub async fn client(&self) -> Client {
        let config = Config::from_custom_kubeconfig(kubeconfig_for(&self.url), &Default::default())
            .await
            .expect("kubeconfig for the test API server");
        Client::try_from(config).expect("kube client")
    }

    /// Runs kubectl against the control plane.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_stdin(args, None)
    }

    pub fn kubectl_stdin(&self, args: &[&str], stdin: Option<&str>) -> Output {
        run(Command::new(self.bin.join("kubectl")).env("KUBECONFIG", &self.kubeconfig).args(args), stdin)
    }

    /// Creates a fresh namespace for one test.
    pub fn namespace(&self, name: &str) -> String {
        let out = self.kubectl(&["create", "namespace", name]);
        assert!(out.success, "creating namespace {name}: {}", out.stderr);
        name.to_owned()
    }

    /// Creates `name` unless it exists (for namespaces several tests share).
    pub fn ensure_namespace(&self, name: &str) {
        let doc = format!("{{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{{\"name\":\"{name}\"}}}}");
        let out = self.kubectl_stdin(&["apply", "--server-side", "-f", "-"], Some(&doc));
        assert!(out.success, "namespace {name}: {}", out.stderr);
    }

    /// Starts the real `strata-operator` binary against this control plane, as cluster admin.
    pub fn operator(&self, name: &str, args: &[&str]) -> Operator {
        self.operator_as(name, &self.kubeconfig, args)
    }

    /// Starts the real `strata-operator` binary with the credentials in `kubeconfig`.
    pub fn operator_as(&self, name: &str, kubeconfig: &Path, args: &[&str]) -> Operator {
        let port = free_port();
        let log = self.dir.join(format!("operator-{name}.log"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata-operator"));
        cmd.env("KUBECONFIG", kubeconfig)
            .env("POD_NAME", name)
            .env_remove("RUST_LOG")
            .args(["--metrics-bind-address", &format!("127.0.0.1:{port}"), "--log-format", "text"])
            .args(["--lease-duration-seconds", "6"])
            .args(args);
        log_to(&mut cmd, &log);
        let child = spawn_tied(cmd).expect("starting strata-operator");
        Operator { child: Arc::new(Mutex::new(child)), port, log }
    }
}

/// A running operator process; killed on drop.
pub struct Operator {
    child: Arc<Mutex<Child>>,
    pub port: u16,
    pub log: PathBuf,
}

impl Operator {
    /// GET on the operator's HTTP endpoint: (status code, body).
    pub fn http_get(&self, path: &str) -> Option<(u16, String)> {
        http_get(self.port, path)
    }

    /// The value of an unlabelled metric, if the endpoint answers.
    pub fn metric(&self, name: &str) -> Option<f64> {
        let (_, body) = self.http_get("/metrics")?;
        body.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
    }

    pub fn sigterm(&self) {
        let pid = self.child.lock().unwrap().id() as i32;
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }

    /// Waits for the process to exit; its exit code.
    pub fn wait_exit(&self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.lock().unwrap().try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let mut child = self.child.lock().unwrap();
        let _ = child.kill();
        let _ = child.wait();
    }
}

fn log_to(cmd: &mut Command, path: &Path) {
    let file = std::fs::File::create(path).unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
    cmd.stdin(Stdio::null()).stdout(file.try_clone().unwrap()).stderr(file);
}

fn kubeconfig_yaml(url: &str) -> String {
    kubeconfig_with_token(url, TOKEN)
}

/// A kubeconfig for this API server that authenticates with `token`.
pub fn kubeconfig_with_token(url: &str, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: test\n\
         clusters:\n- name: test\n  cluster:\n    server: {url}\n    insecure-skip-tls-verify: true\n\
         users:\n- name: admin\n  user:\n    token: {token}\n\
         contexts:\n- name: test\n  context:\n    cluster: test\n    user: admin\n"
    )
}

fn kubeconfig_for(url: &str) -> Kubeconfig {
    Kubeconfig::from_yaml(&kubeconfig_yaml(url)).expect("test kubeconfig parses")
}

/// Lines of a log file that mention `needle` (for failure messages).
pub fn grep(path: &Path, needle: &str) -> Vec<String> {
    let Ok(f) = std::fs::File::open(path) else { return Vec::new() };
    BufReader::new(f).lines().map_while(Result::ok).filter(|l| l.contains(needle)).collect()
}
