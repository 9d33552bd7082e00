//! The push channel over TLS against a real `strata-node` in cluster mode with `tls-cluster
//! yes` (TLS only: `port 0`, `tls-auth-clients yes`), as the operator runs it: the topology
//! pushed and read back with the node's certificate as client certificate, refused without one
//! or when the node's certificate does not name what is checked, and `strata-cluster status`
//! over TLS. And the controller's own read and push, mid-rollout between plain and TLS: each
//! pod spoken to as its own spec says.
//!
//! The node binary: `STRATA_NODE_BIN`, or the workspace build beside this test's
//! (`cargo test --workspace` builds it; with `-p strata-operator` run `cargo build -p
//! strata-node` first).

mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus, Secret, SecretVolumeSource, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use strata_operator::controller::cluster::{self, AdminAccess, Report};
use strata_operator::resources::{ADMIN_PORT, TLS_CLUSTER_ANNOTATION};
use strata_operator::topology::client::{self, AdminEndpoint, AdminError, AdminTls};
use strata_operator::topology::{NodeId, Topology, TopologyNode, spread};
use support::pki::Pki;
use support::{free_port, run, spawn_tied};

const PASSWORD: &str = "tls-admin-secret";
/// The name the node's certificate covers, as an operator-managed pod's does.
const POD_DNS: &str = "demo-0.demo-headless.shop.svc";

fn node_binary() -> PathBuf {
    if let Ok(path) = std::env::var("STRATA_NODE_BIN") {
        return PathBuf::from(path);
    }
    // This test runs from <target>/<profile>/deps/.
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().and_then(|deps| deps.parent()).unwrap().join("strata-node");
    assert!(
        path.is_file(),
        "{} not found: build it with `cargo build -p strata-node` (same profile and target dir), or set \
         STRATA_NODE_BIN",
        path.display()
    );
    path
}

/// A node in cluster mode; killed when dropped.
struct Node {
    child: Child,
    /// Its files in the PKI's directory start with this.
    name: String,
    /// The client port: TLS (`tls-port`, the plain port closed) or plain.
    tls_port: u16,
    direct_port: u16,
    admin_port: u16,
}

impl Node {
    /// A node serving TLS only, its admin port TLS too, with `node.crt`.
    fn start(pki: &Pki) -> Node {
        Node::start_at(pki, "node", "127.0.0.1", free_port(), true)
    }

    /// A node listening at `ip`, its admin port `admin_port`: with `tls` as [`Node::start`],
    /// otherwise all plain (the spec without `tls`).
    fn start_at(pki: &Pki, name: &str, ip: &str, admin_port: u16, tls: bool) -> Node {
        std::fs::write(pki.path("password"), format!("{PASSWORD}\n")).unwrap();
        let data = pki.path(&format!("{name}-data"));
        std::fs::create_dir_all(&data).unwrap();
        let (tls_port, direct_port) = (free_port(), free_port());
        let path = |f: &str| pki.path(f).display().to_string();
        let mut cmd = Command::new(node_binary());
        cmd.args(["--bind", ip]);
        if tls {
            cmd.args(["--port", "0", "--tls-port", &tls_port.to_string()])
                .args(["--tls-cert-file", &path("node.crt"), "--tls-key-file", &path("node.key")])
                .args(["--tls-ca-cert-file", &path("ca.crt"), "--tls-auth-clients", "yes", "--tls-cluster", "yes"]);
        } else {
            cmd.args(["--port", &tls_port.to_string()]);
        }
        cmd.args(["--cluster-enabled", "yes", "--cluster-direct-port", &direct_port.to_string()])
            .args(["--cluster-port", &admin_port.to_string(), "--cluster-admin-password-file", &path("password")])
            .args(["--metrics-port", "0", "--threads", "1", "--dir", &data.display().to_string()])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(pki.path(&format!("{name}.log"))).unwrap())
            .stderr(std::fs::File::create(pki.path(&format!("{name}.err"))).unwrap());
        let child = spawn_tied(cmd).expect("starting strata-node");
        let mut node = Node { child, name: name.to_owned(), tls_port, direct_port, admin_port };
        let started = Instant::now();
        while std::net::TcpStream::connect((ip, admin_port)).is_err() {
            if let Ok(Some(status)) = node.child.try_wait() {
                panic!("strata-node exited ({status}):\n{}", node.logs(pki));
            }
            assert!(started.elapsed() < Duration::from_secs(20), "no admin port after 20 s:\n{}", node.logs(pki));
            std::thread::sleep(Duration::from_millis(50));
        }
        node
    }

    fn logs(&self, pki: &Pki) -> String {
        let read = |f: String| std::fs::read_to_string(pki.path(&f)).unwrap_or_default();
        format!("{}{}", read(format!("{}.log", self.name)), read(format!("{}.err", self.name)))
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// TLS to the node: trusting `ca.crt`, presenting `node.crt` when `identity`, checking `name`.
fn endpoint(pki: &Pki, node: &Node, name: &str, identity: bool) -> AdminEndpoint {
    let pem = |f: &str| client::pem_certificates(&pki.read(f)).unwrap();
    let identity = identity.then(|| (pem("node.crt"), client::pem_private_key(&pki.read("node.key")).unwrap()));
    let config = client::tls_config(pem("ca.crt"), identity).unwrap();
    let server_name = rustls::pki_types::ServerName::try_from(name.to_owned()).unwrap();
    AdminEndpoint::new(format!("127.0.0.1:{}", node.admin_port), Some(PASSWORD.to_owned()))
        .with_tls(AdminTls { config, server_name })
}

#[tokio::test(flavor = "multi_thread")]
async fn topology_pushes_go_over_tls_with_a_client_certificate() {
    let pki = Pki::new("cluster-tls");
    // The node's certificate, as the operator's cert-manager Certificate makes it: server and
    // client auth (nodes present it to each other), the pod's DNS name.
    pki.issue("node", &[POD_DNS, "127.0.0.1"], "serverAuth,clientAuth");
    let node = Node::start(&pki);
    let me = NodeId::from_seed("tls-test/0");
    let topology = Topology {
        epoch: 1,
        nodes: vec![TopologyNode {
            id: me.clone(),
            ip: "127.0.0.1".into(),
            hostname: Some(POD_DNS.into()),
            direct_port: node.direct_port,
            plain_port: node.tls_port,
            slots: spread(1).remove(0),
            admin_port: node.admin_port,
        }],
    };

    let good = endpoint(&pki, &node, POD_DNS, true);
    let pushed = client::push(&good, &topology, &me).await;
    assert_eq!(pushed.as_ref().ok(), Some(&1), "{pushed:?}\n{}", node.logs(&pki));
    let reported = client::get(&good).await.unwrap().expect("the topology pushed");
    assert_eq!((reported.epoch, &reported.myid), (1, &me));
    assert_eq!(reported.nodes, topology.nodes);

    // No client certificate: the node (tls-auth-clients yes) refuses the handshake.
    let err = client::get(&endpoint(&pki, &node, POD_DNS, false)).await.unwrap_err();
    assert!(matches!(err, AdminError::Tls { .. }), "a TLS refusal, not {err:?}");

    // A name the node's certificate does not cover: the operator refuses the node.
    let err = client::get(&endpoint(&pki, &node, "demo-0.other-headless.shop.svc", true)).await.unwrap_err();
    assert!(
        matches!(&err, AdminError::Tls { source: rustls::Error::InvalidCertificate(_), .. }),
        "a certificate error, not {err:?}"
    );

    // Plain TCP is not served there any more.
    let plain = AdminEndpoint { tls: None, ..good.clone() };
    let answer = client::get(&plain).await;
    assert!(answer.is_err(), "the admin port answered plain TCP: {answer:?}");

    // `strata-cluster status` over TLS (the server name defaults to the host: 127.0.0.1 here).
    let node_arg = format!("127.0.0.1:{}:{}:{}", node.direct_port, node.tls_port, node.admin_port);
    let cli = |tls: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata-cluster"));
        cmd.args(["status", &node_arg, "--password-file"]).arg(pki.path("password")).args(tls);
        run(&mut cmd, None)
    };
    let path = |f: &str| pki.path(f).display().to_string();
    let (ca, cert, key) = (path("ca.crt"), path("node.crt"), path("node.key"));
    let out = tokio::task::block_in_place(|| {
        cli(&["--tls-ca-cert", &ca, "--tls-cert", &cert, "--tls-key", &key, "--tls-server-name", POD_DNS])
    });
    assert!(out.success, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(&format!("node {me} ")) && out.stdout.contains("epoch 1 slots 16384"),
        "{}",
        out.stdout
    );
    let out = tokio::task::block_in_place(|| cli(&["--tls-ca-cert", &ca, "--tls-cert", &cert, "--tls-key", &key]));
    assert!(out.success, "by IP: {}{}", out.stdout, out.stderr);
    let out = tokio::task::block_in_place(|| cli(&["--tls-ca-cert", &ca]));
    assert!(!out.success && out.stderr.contains("TLS"), "no client certificate: {}{}", out.stdout, out.stderr);
}

/// Two loopback addresses (127.0.0.0/8 is all on `lo`) whose admin port, the fixed one the
/// controller dials, is free: the pods' IPs.
fn two_pod_ips() -> [String; 2] {
    let seed = std::process::id();
    let mut found = Vec::new();
    for n in 0..200u32 {
        let x = seed.wrapping_add(n.wrapping_mul(7919));
        let ip = format!("127.{}.{}.{}", 1 + x % 250, (x / 250) % 250, 1 + (x / 62500) % 250);
        if std::net::TcpListener::bind((ip.as_str(), ADMIN_PORT as u16)).is_ok() && !found.contains(&ip) {
            found.push(ip);
        }
        if found.len() == 2 {
            return [found[0].clone(), found[1].clone()];
        }
    }
    panic!("no two loopback addresses with port {ADMIN_PORT} free");
}

/// The API's view of a running pod `demo-<ordinal>` at `ip`, made from a template with
/// `tls-cluster yes` and the TLS Secret `secret` mounted when Some.
fn running_pod(ordinal: u32, ip: &str, secret: Option<&str>) -> Pod {
    let annotations = secret.map(|_| [(TLS_CLUSTER_ANNOTATION.to_owned(), "yes".to_owned())].into());
    let volumes = secret.map(|s| {
        let secret = SecretVolumeSource { secret_name: Some(s.to_owned()), ..Default::default() };
        vec![Volume { name: "tls".into(), secret: Some(secret), ..Default::default() }]
    });
    Pod {
        metadata: ObjectMeta { name: Some(format!("demo-{ordinal}")), annotations, ..Default::default() },
        spec: Some(PodSpec { volumes, ..Default::default() }),
        status: Some(PodStatus { phase: Some("Running".into()), pod_ip: Some(ip.into()), ..Default::default() }),
    }
}

/// Mid-rollout from plain to TLS (or back): demo-0 still runs the spec without TLS, demo-1
/// the one with `tls-cluster yes`. The controller's read and push reach both, each in the
/// protocol its pod was started with, so both apply the epoch (the paced rollout moves on);
/// spoken to in the spec's protocol, the other one would not answer.
#[tokio::test(flavor = "multi_thread")]
async fn mid_rollout_each_pod_is_reached_in_its_own_protocol() {
    let pki = Pki::new("cluster-mixed");
    pki.issue("node", &["*.demo-headless.shop.svc"], "serverAuth,clientAuth");
    let [plain_ip, tls_ip] = two_pod_ips();
    let admin = ADMIN_PORT as u16;
    let plain = Node::start_at(&pki, "plain", &plain_ip, admin, false);
    let tls = Node::start_at(&pki, "tls", &tls_ip, admin, true);
    let logs = || format!("{}\n{}", plain.logs(&pki), tls.logs(&pki));

    let pods = [running_pod(0, &plain_ip, None), running_pod(1, &tls_ip, Some("demo-tls"))];
    let members = cluster::members("demo", 2, &pods);
    // The Secret as cert-manager (or the user) writes it.
    let mut secret = Secret::default();
    let data = [("ca.crt", "ca.crt"), ("tls.crt", "node.crt"), ("tls.key", "node.key")];
    secret.data = Some(data.iter().map(|(k, f)| (k.to_string(), k8s_openapi::ByteString(pki.read(f)))).collect());
    let config = cluster::admin_tls_config(Some(&secret), "shop/demo-tls", false).unwrap();
    let access = AdminAccess {
        password: Some(PASSWORD.to_owned()),
        tls: [("demo-tls".to_owned(), Ok(config))].into(),
        headless_domain: "demo-headless.shop.svc".to_owned(),
    };

    let reports = cluster::read_reports(&members, &access).await;
    assert_eq!(reports, [Report::Applied(None), Report::Applied(None)], "{}", logs());
    let uid = "8d1c6a3e-0b59-4c1e-9f0e-2f6f3c5a7b11";
    let nodes = cluster::desired_nodes(uid, &access.headless_domain, &members, &spread(2), &[]).unwrap();
    let topology = Topology { epoch: 1, nodes };
    let applied = cluster::push_all(&members, &topology, &access, &[]).await;
    assert_eq!(applied, [Ok(1), Ok(1)], "{}", logs());
    let reports = cluster::read_reports(&members, &access).await;
    for (i, report) in reports.iter().enumerate() {
        let Report::Applied(Some(r)) = report else { panic!("demo-{i}: {report:?}\n{}", logs()) };
        assert_eq!((r.epoch, &r.myid), (1, &topology.nodes[i].id));
    }

    // One protocol for all, as before: whichever it is, one of the two pods does not answer.
    let all_plain: Vec<_> = members.iter().map(|m| cluster::Member { tls_secret: None, ..m.clone() }).collect();
    let all_tls: Vec<_> =
        members.iter().map(|m| cluster::Member { tls_secret: Some("demo-tls".into()), ..m.clone() }).collect();
    let plain_only = cluster::read_reports(&all_plain, &access).await;
    assert!(matches!(plain_only[1], Report::Unreachable(_)), "{plain_only:?}");
    let tls_only = cluster::read_reports(&all_tls, &access).await;
    assert!(matches!(tls_only[0], Report::Unreachable(_)), "{tls_only:?}");
}
