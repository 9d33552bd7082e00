//! The push channel over TLS against a real `strata-node` in cluster mode with `tls-cluster
//! yes` (TLS only: `port 0`, `tls-auth-clients yes`), as the operator runs it: the topology
//! pushed and read back with the node's certificate as client certificate, refused without one
//! or when the node's certificate does not name what is checked, and `strata-cluster status`
//! over TLS.
//!
//! The node binary: `STRATA_NODE_BIN`, or the workspace build beside this test's
//! (`cargo test --workspace` builds it; with `-p strata-operator` run `cargo build -p
//! strata-node` first).

mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

/// A node serving TLS only, its admin port TLS too; killed when dropped.
struct Node {
    child: Child,
    log: PathBuf,
    tls_port: u16,
    direct_port: u16,
    admin_port: u16,
}

impl Node {
    fn start(pki: &Pki) -> Node {
        std::fs::write(pki.path("password"), format!("{PASSWORD}\n")).unwrap();
        let data = pki.path("data");
        std::fs::create_dir_all(&data).unwrap();
        let (tls_port, direct_port, admin_port) = (free_port(), free_port(), free_port());
        let log = pki.path("node.log");
        let path = |f: &str| pki.path(f).display().to_string();
        let mut cmd = Command::new(node_binary());
        cmd.args(["--bind", "127.0.0.1", "--port", "0", "--tls-port", &tls_port.to_string()])
            .args(["--tls-cert-file", &path("node.crt"), "--tls-key-file", &path("node.key")])
            .args(["--tls-ca-cert-file", &path("ca.crt"), "--tls-auth-clients", "yes", "--tls-cluster", "yes"])
            .args(["--cluster-enabled", "yes", "--cluster-direct-port", &direct_port.to_string()])
            .args(["--cluster-port", &admin_port.to_string(), "--cluster-admin-password-file", &path("password")])
            .args(["--metrics-port", "0", "--threads", "1", "--dir", &data.display().to_string()])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(pki.path("node.err")).unwrap());
        let mut node =
            Node { child: spawn_tied(cmd).expect("starting strata-node"), log, tls_port, direct_port, admin_port };
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", admin_port)).is_err() {
            if let Ok(Some(status)) = node.child.try_wait() {
                panic!("strata-node exited ({status}):\n{}", node.logs(pki));
            }
            assert!(started.elapsed() < Duration::from_secs(20), "no admin port after 20 s:\n{}", node.logs(pki));
            std::thread::sleep(Duration::from_millis(50));
        }
        node
    }

    fn logs(&self, pki: &Pki) -> String {
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default();
        format!("{}{}", read(self.log.clone()), read(pki.path("node.err")))
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
