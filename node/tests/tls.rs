//! TLS on `tls-port`: Debian's `redis-cli --tls`, a client library
//! (redis-rs over rustls) and a bare rustls client against the node, with
//! certificates made by `openssl` for each test; mutual TLS refused as
//! redis-server refuses it; rotation on disk and by CONFIG SET while a
//! client pipelines, with no failed request.

mod support;
use support::*;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// A CA and certificates it signed (CN and file names given), in a temp dir.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn new(name: &str) -> Pki {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "strata-test-tls-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let pki = Pki { dir };
        pki.openssl(&[
            "req",
            "-x509",
            "-new",
            "-nodes",
            "-newkey",
            "rsa:2048",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "30",
            "-subj",
            "/CN=Strata Test CA",
        ]);
        pki
    }

    fn path(&self, file: &str) -> String {
        self.dir.join(file).to_str().unwrap().to_string()
    }

    fn read(&self, file: &str) -> Vec<u8> {
        std::fs::read(self.dir.join(file)).unwrap()
    }

    fn openssl(&self, args: &[&str]) {
        let out =
            Command::new("openssl").args(args).current_dir(&self.dir).stdin(Stdio::null()).output().unwrap_or_else(
                |e| panic!("openssl (Debian package openssl) is needed to make test certificates: {e}"),
            );
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// `name.crt` and `name.key`, signed by this CA, for localhost.
    fn issue(&self, name: &str) {
        self.issue_by(name, "ca");
    }

    /// Signed by `ca` (`ca.crt`/`ca.key` in this dir, or another made by `other_ca`).
    fn issue_by(&self, name: &str, ca: &str) {
        std::fs::write(self.dir.join(format!("{name}.ext")), "subjectAltName=DNS:localhost,IP:127.0.0.1\n").unwrap();
        let (key, csr, crt, ext) =
            (format!("{name}.key"), format!("{name}.csr"), format!("{name}.crt"), format!("{name}.ext"));
        let subj = format!("/CN={name}");
        self.openssl(&["req", "-new", "-nodes", "-newkey", "rsa:2048", "-keyout", &key, "-out", &csr, "-subj", &subj]);
        let (ca_crt, ca_key) = (format!("{ca}.crt"), format!("{ca}.key"));
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_crt,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-out",
            &crt,
            "-days",
            "10",
            "-extfile",
            &ext,
        ]);
    }

    /// A second, unrelated CA (`name.crt`, `name.key`).
    fn other_ca(&self, name: &str) {
        let (key, crt) = (format!("{name}.key"), format!("{name}.crt"));
        let subj = format!("/CN={name}");
        self.openssl(&[
            "req", "-x509", "-new", "-nodes", "-newkey", "rsa:2048", "-keyout", &key, "-out", &crt, "-days", "30",
            "-subj", &subj,
        ]);
    }

    /// The DER of the first certificate in a PEM file.
    fn der(&self, file: &str) -> Vec<u8> {
        use rustls::pki_types::{CertificateDer, pem::PemObject};
        CertificateDer::from_pem_file(self.dir.join(file)).unwrap().to_vec()
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// strata with a TLS port beside its plain one (the plain one for checks).
fn strata_tls(pki: &Pki, tls_port: u16, extra: &[&str]) -> Server {
    let (port, cert, key, ca) =
        (tls_port.to_string(), pki.path("server.crt"), pki.path("server.key"), pki.path("ca.crt"));
    let mut args = vec!["--tls-port", port.as_str()];
    for (flag, default) in [("--tls-cert-file", &cert), ("--tls-key-file", &key), ("--tls-ca-cert-file", &ca)] {
        if !extra.contains(&flag) {
            args.extend([flag, default.as_str()]);
        }
    }
    args.extend(extra);
    Server::strata_with(&args)
}

/// `redis-cli --tls` against `port`: (stdout, success).
fn cli_tls(port: u16, pki: &Pki, client: Option<&str>, args: &[&str]) -> (String, bool) {
    let mut cmd = Command::new("redis-cli");
    cmd.args(["-h", "127.0.0.1", "-p", &port.to_string(), "--tls", "--cacert", &pki.path("ca.crt")]);
    if let Some(name) = client {
        cmd.args(["--cert", &pki.path(&format!("{name}.crt")), "--key", &pki.path(&format!("{name}.key"))]);
    }
    let out = cmd.args(args).stdin(Stdio::null()).output().expect("redis-cli");
    (String::from_utf8_lossy(&out.stdout).into_owned(), out.status.success())
}

/// A redis-rs client over TLS (rediss://) with this PKI's client certificate.
fn rediss(port: u16, pki: &Pki) -> redis::Client {
    redis::Client::build_with_tls(
        format!("rediss://localhost:{port}"),
        redis::TlsCertificates {
            client_tls: Some(redis::ClientTlsConfig {
                client_cert: pki.read("client.crt"),
                client_key: pki.read("client.key"),
            }),
            root_cert: Some(pki.read("ca.crt")),
        },
    )
    .expect("a TLS client")
}

/// A rustls client configuration trusting the PKI's CA, with its client certificate.
fn client_config(pki: &Pki) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(pki.dir.join("ca.crt")).unwrap()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(
            vec![CertificateDer::from_pem_file(pki.dir.join("client.crt")).unwrap()],
            PrivateKeyDer::from_pem_file(pki.dir.join("client.key")).unwrap(),
        )
        .unwrap();
    Arc::new(config)
}

/// Connects with `config` and PINGs; the client's session once PONG came back.
fn tls_ping(port: u16, config: &Arc<rustls::ClientConfig>) -> rustls::ClientConnection {
    use rustls::pki_types::ServerName;
    let conn = rustls::ClientConnection::new(config.clone(), ServerName::try_from("localhost").unwrap()).unwrap();
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    tls.write_all(b"PING\r\n").unwrap();
    let mut reply = [0u8; 7];
    tls.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"+PONG\r\n");
    tls.conn
}

/// Whether a new connection with `config` resumed a session.
fn ping_resumed(port: u16, config: &Arc<rustls::ClientConfig>) -> bool {
    tls_ping(port, config).handshake_kind() == Some(rustls::HandshakeKind::Resumed)
}

#[test]
fn tls_sessions_resume_unless_session_caching_is_off() {
    let pki = Pki::new("resume");
    pki.issue("server");
    pki.issue("client");
    let port = free_port();
    let node = strata_tls(&pki, port, &[]);
    let config = client_config(&pki);
    assert!(!ping_resumed(port, &config), "the first handshake is a full one");
    assert!(ping_resumed(port, &config), "the second resumes the session the first got");
    let mut plain = node.conn();
    assert_eq!(plain.cmd(&["CONFIG", "SET", "tls-session-caching", "no"]), Frame::ok());
    let fresh = client_config(&pki);
    assert!(!ping_resumed(port, &fresh));
    assert!(!ping_resumed(port, &fresh), "caching off: every handshake is a full one");
}

/// The certificate the node presents to a new TLS connection (DER), after
/// a PING over it answered PONG.
fn presented_certificate(port: u16, pki: &Pki) -> Vec<u8> {
    tls_ping(port, &client_config(pki)).peer_certificates().expect("a server certificate")[0].to_vec()
}

#[test]
fn redis_cli_and_a_client_library_speak_mutual_tls_and_a_client_without_a_certificate_is_refused_as_by_redis() {
    let pki = Pki::new("mtls");
    pki.issue("server");
    pki.issue("client");
    let tls_port = free_port();
    let metrics_port = free_port();
    let node = strata_tls(&pki, tls_port, &["--metrics-port", &metrics_port.to_string()]);

    // Debian's redis-cli, with a client certificate.
    assert_eq!(cli_tls(tls_port, &pki, Some("client"), &["PING"]), ("PONG\n".into(), true));
    assert_eq!(cli_tls(tls_port, &pki, Some("client"), &["SET", "k", "over tls"]).0, "OK\n");
    assert_eq!(cli_tls(tls_port, &pki, Some("client"), &["GET", "k"]).0, "over tls\n");

    // Without a certificate, and in plain text: refused, by redis-server too.
    let redis_tls = free_port();
    let (cert, key, ca) = (pki.path("server.crt"), pki.path("server.key"), pki.path("ca.crt"));
    let rport = redis_tls.to_string();
    let _redis = Server::redis_with(&[
        "--tls-port",
        &rport,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca,
    ]);
    for (who, port) in [("strata", tls_port), ("redis", redis_tls)] {
        let (out, ok) = cli_tls(port, &pki, None, &["PING"]);
        assert!(!ok && !out.contains("PONG"), "{who}: a client without a certificate got {out:?}");
        // Plain text on the TLS port: the connection is reset, as Redis (OpenSSL) resets it.
        let plain = Command::new("redis-cli").args(["-h", "127.0.0.1", "-p", &port.to_string(), "PING"]).output();
        let plain = plain.expect("redis-cli");
        let said = String::from_utf8_lossy(&plain.stdout).into_owned() + &String::from_utf8_lossy(&plain.stderr);
        assert!(said.contains("reset by peer"), "{who}: a plain-text client on the TLS port got {said:?}");
    }
    // And the node still serves everyone else.
    assert_eq!(cli_tls(tls_port, &pki, Some("client"), &["GET", "k"]).0, "over tls\n");

    // A client library: a pipeline of 2,000 commands and pub/sub, over TLS.
    let client = rediss(tls_port, &pki);
    let mut conn = client.get_connection().expect("TLS connection");
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.set(format!("key:{i}"), format!("value:{i}")).ignore();
    }
    for i in 0..1000 {
        pipe.get(format!("key:{i}"));
    }
    let values: Vec<String> = pipe.query(&mut conn).expect("pipelined over TLS");
    assert_eq!(values.len(), 1000);
    assert!(values.iter().enumerate().all(|(i, v)| *v == format!("value:{i}")));
    let big = "x".repeat(1 << 20);
    let _: () = redis::cmd("SET").arg("big").arg(&big).query(&mut conn).unwrap();
    let back: String = redis::cmd("GET").arg("big").query(&mut conn).unwrap();
    assert_eq!(back.len(), big.len(), "a 1 MiB value spans many TLS records");

    let mut sub_conn = client.get_connection().unwrap();
    let mut sub = sub_conn.as_pubsub();
    sub.subscribe("news").unwrap();
    sub.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut plain = node.conn();
    assert_eq!(plain.cmd(&["PUBLISH", "news", "hello"]), Frame::Integer(1));
    let msg = sub.get_message().expect("message over TLS");
    assert_eq!(msg.get_payload::<String>().unwrap(), "hello");

    assert_eq!(plain.cmd(&["CONFIG", "GET", "tls-cluster"]), array(&[b"tls-cluster", b"no"]));
    // INFO and /metrics count TLS clients and the refused handshakes.
    let tls = info(&mut plain, Some("tls"));
    assert_eq!(tls["tls_port"], tls_port.to_string());
    assert_eq!(tls["tls_connected_clients"], "2", "{tls:?}");
    let failures: u64 = tls["tls_handshake_failures"].parse().unwrap();
    assert!(failures >= 2, "{tls:?}");
    let left: i64 = tls["tls_cert_expires_in_seconds"].parse().unwrap();
    assert!((9 * 86_400..=10 * 86_400).contains(&left), "the certificate was issued for 10 days: {tls:?}");
    let text = scrape(metrics_port);
    assert!(sample(&text, "strata_tls_handshake_failures_total").unwrap() >= 2.0, "{text}");
    assert_eq!(sample(&text, "strata_tls_connected_clients"), Some(2.0));
    let expiry = sample(&text, "strata_tls_certificate_expiry_timestamp_seconds").unwrap();
    assert_eq!(expiry as i64, tls["tls_cert_expire_time"].parse::<i64>().unwrap());
    drop(sub);
    drop(sub_conn);
    drop(conn);
    assert!(
        wait_for(Duration::from_secs(5), || info(&mut plain, Some("tls"))["tls_connected_clients"] == "0"),
        "closed TLS clients are no longer counted"
    );
}

#[test]
fn client_certificates_may_be_optional_or_not_asked_for() {
    let pki = Pki::new("auth");
    pki.issue("server");
    pki.issue("client");
    pki.other_ca("rogue-ca");
    pki.issue_by("rogue", "rogue-ca");

    // `no`: no CA needed, no certificate asked for.
    let port = free_port();
    let node = strata_tls(&pki, port, &["--tls-auth-clients", "no", "--tls-ca-cert-file", ""]);
    assert_eq!(cli_tls(port, &pki, None, &["PING"]), ("PONG\n".into(), true));
    drop(node);

    // `optional`: none is fine, a good one is fine, one from another CA is not.
    let port = free_port();
    let _node = strata_tls(&pki, port, &["--tls-auth-clients", "optional"]);
    assert_eq!(cli_tls(port, &pki, None, &["PING"]), ("PONG\n".into(), true));
    assert_eq!(cli_tls(port, &pki, Some("client"), &["PING"]), ("PONG\n".into(), true));
    let (out, ok) = cli_tls(port, &pki, Some("rogue"), &["PING"]);
    assert!(!ok && !out.contains("PONG"), "a certificate from an unknown CA got {out:?}");
}

#[test]
fn tls_files_that_do_not_load_stop_the_start_with_the_reason() {
    let pki = Pki::new("bad");
    pki.issue("server");
    let start = |args: &[&str]| {
        let out = Command::new(STRATA_BIN)
            .args(["--port", "0", "--metrics-port", "0", "--tls-port", &free_port().to_string()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success(), "started with {args:?}");
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    let (cert, key, ca) = (pki.path("server.crt"), pki.path("server.key"), pki.path("ca.crt"));
    let missing = pki.path("missing.crt");
    let log = start(&["--tls-cert-file", &missing, "--tls-key-file", &key, "--tls-ca-cert-file", &ca]);
    assert!(log.contains("Failed to configure TLS") && log.contains("missing.crt"), "{log}");
    let log = start(&["--tls-cert-file", &cert, "--tls-key-file", &key]);
    assert!(log.contains("tls-ca-cert-file"), "mutual TLS without a CA says what to set: {log}");
    let log = start(&["--tls-cert-file", &cert, "--tls-key-file", &cert, "--tls-ca-cert-file", &ca]);
    assert!(log.contains("private key"), "{log}");
    let log = start(&[
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-auth-clients",
        "no",
        "--tls-protocols",
        "TLSv1.1",
    ]);
    assert!(log.contains("TLSv1.1"), "{log}");
}

#[test]
fn certificates_rotate_on_disk_and_by_config_set_while_a_client_pipelines_without_a_failed_request() {
    let pki = Pki::new("rotate");
    pki.issue("server");
    pki.issue("client");
    pki.issue("second");
    pki.issue("third");
    // As a Kubernetes Secret volume: the node reads files the update replaces.
    let live = |name: &str| pki.path(&format!("live-{name}"));
    std::fs::copy(pki.path("server.crt"), live("tls.crt")).unwrap();
    std::fs::copy(pki.path("server.key"), live("tls.key")).unwrap();
    let port = free_port();
    let (crt, key) = (live("tls.crt"), live("tls.key"));
    let node = strata_tls(&pki, port, &["--tls-cert-file", &crt, "--tls-key-file", &key]);
    assert_eq!(presented_certificate(port, &pki), pki.der("server.crt"));

    // A client pipelining SETs and GETs over one TLS connection throughout.
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU64::new(0));
    let load = {
        let client = rediss(port, &pki);
        let (stop, rounds) = (stop.clone(), rounds.clone());
        std::thread::spawn(move || -> Result<(), String> {
            let mut conn = client.get_connection().map_err(|e| e.to_string())?;
            let mut n = 0u64;
            while !stop.load(Relaxed) {
                let mut pipe = redis::pipe();
                for i in 0..50 {
                    pipe.set(format!("r:{i}"), n * 100 + i).ignore().get(format!("r:{i}"));
                }
                let got: Vec<u64> = pipe.query(&mut conn).map_err(|e| format!("round {n}: {e}"))?;
                if got != (0..50).map(|i| n * 100 + i).collect::<Vec<_>>() {
                    return Err(format!("round {n}: wrong values {got:?}"));
                }
                n += 1;
                rounds.store(n, Relaxed);
            }
            Ok(())
        })
    };
    let wait_rounds = |more: u64| {
        let target = rounds.load(Relaxed) + more;
        assert!(wait_for(Duration::from_secs(20), || rounds.load(Relaxed) >= target), "the pipelining client stalled");
    };
    wait_rounds(20);

    // On disk: new files replace the old (a rename each, as kubelet swaps a
    // Secret's files); new connections get the new certificate within seconds.
    for (from, to) in [("second.key", "tls.key"), ("second.crt", "tls.crt")] {
        std::fs::copy(pki.path(from), live("tmp")).unwrap();
        std::fs::rename(live("tmp"), live(to)).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    while presented_certificate(port, &pki) != pki.der("second.crt") {
        assert!(Instant::now() < deadline, "the node still presents the old certificate\n{}", node.logs());
        std::thread::sleep(Duration::from_millis(200));
    }
    wait_rounds(20);

    // CONFIG SET: a file that does not load is refused and changes nothing.
    let mut plain = node.conn();
    let bad = pki.path("client.key");
    let samples = plain.cmd(&["CONFIG", "GET", "maxmemory-samples"]);
    match plain.cmd(&["CONFIG", "SET", "maxmemory-samples", "7", "tls-cert-file", &bad]) {
        Frame::Error(e) => assert!(e.contains("Unable to update TLS configuration"), "{e}"),
        other => panic!("a key file as certificate was accepted: {other:?}"),
    }
    // All or nothing, as Redis: the other setting of the refused CONFIG SET did not change.
    assert_eq!(plain.cmd(&["CONFIG", "GET", "maxmemory-samples"]), samples);
    assert_eq!(plain.cmd(&["CONFIG", "GET", "tls-cert-file"]), array(&[b"tls-cert-file", crt.as_bytes()]));
    assert_eq!(presented_certificate(port, &pki), pki.der("second.crt"));
    // ... and a good pair is used by the next connection.
    let (crt3, key3) = (pki.path("third.crt"), pki.path("third.key"));
    assert_eq!(plain.cmd(&["CONFIG", "SET", "tls-cert-file", &crt3, "tls-key-file", &key3]), Frame::ok());
    assert_eq!(presented_certificate(port, &pki), pki.der("third.crt"));
    wait_rounds(20);

    stop.store(true, Relaxed);
    load.join().unwrap().expect("no request failed while certificates rotated");
    let tls = info(&mut plain, Some("tls"));
    assert!(tls["tls_cert_reloads"].parse::<u64>().unwrap() >= 2, "{tls:?}");
    assert!(tls["tls_cert_reload_failures"].parse::<u64>().unwrap() >= 1, "{tls:?}");
}

fn array(items: &[&[u8]]) -> Frame {
    Frame::Array(items.iter().map(|b| Frame::Bulk(b.to_vec())).collect())
}

#[test]
fn a_tls_only_cluster_node_speaks_tls_on_both_client_ports_and_keeps_its_admin_port() {
    let pki = Pki::new("cluster");
    pki.issue("server");
    pki.issue("client");
    // Ports P, P + 1 and P + 10000 must all be free.
    let port = (0..50)
        .map(|_| free_port())
        .find(|&p| {
            p < u16::MAX - 10_000
                && [p + 1, p + 10_000].iter().all(|&q| std::net::TcpListener::bind(("127.0.0.1", q)).is_ok())
        })
        .expect("three free ports");
    let node = strata_tls(&pki, port, &["--port", "0", "--unixsocket", "{dir}/node.sock", "--cluster-enabled", "yes"]);
    for p in [port, port + 1] {
        assert_eq!(cli_tls(p, &pki, Some("client"), &["PING"]), ("PONG\n".into(), true), "port {p}");
        let (out, _) = redis_cli(p, &["-h", "127.0.0.1", "PING"]);
        assert!(!out.contains("PONG"), "port {p} answered plain text: {out:?}");
    }
    // The admin channel (topology pushes) stays plain TCP with its password.
    let (out, _) = redis_cli(port + 10_000, &["-h", "127.0.0.1", "PING"]);
    assert!(out.contains("PONG") || out.contains("NOAUTH"), "admin port: {out:?}\n{}", node.logs());
}

/// One node of a `tls-cluster` pair: TLS-only, mutual TLS on every port.
struct TlsNode {
    server: Server,
    id: String,
    tls: u16,
    direct: u16,
    admin: u16,
}

impl TlsNode {
    fn start(pki: &Pki, i: usize, ports: &[u16], extra: &[&str]) -> TlsNode {
        let (tls, direct, admin) = (ports[0], ports[1], ports[2]);
        let (d, a) = (direct.to_string(), admin.to_string());
        let mut args = vec![
            "--port",
            "0",
            "--unixsocket",
            "{dir}/node.sock",
            "--cluster-enabled",
            "yes",
            "--tls-cluster",
            "yes",
            "--cluster-direct-port",
            &d,
            "--cluster-port",
            &a,
        ];
        args.extend(extra);
        let server = strata_tls(pki, tls, &args);
        TlsNode { server, id: support::cluster::test_node_id(25, i), tls, direct, admin }
    }

    fn entry(&self, slots: &[(u16, u16)]) -> String {
        support::cluster::topology_entry(&self.id, "127.0.0.1", None, self.direct, self.tls, slots, self.admin)
    }

    /// `redis-cli --tls` with the client certificate on the admin port.
    fn admin(&self, pki: &Pki, args: &[&str]) -> String {
        let (out, ok) = cli_tls(self.admin, pki, Some("client"), args);
        assert!(ok, "redis-cli {args:?} on the admin port: {out}\n{}", self.server.logs());
        out
    }

    fn info_field(&self, section: &str, field: &str) -> String {
        let Frame::Bulk(text) = self.server.conn_unix().cmd(&["INFO", section]) else { panic!("INFO {section}") };
        let prefix = format!("{field}:");
        String::from_utf8_lossy(&text)
            .lines()
            .find_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
            .unwrap_or_default()
    }
}

#[test]
fn tls_cluster_links_forward_and_migrate_over_mutual_tls_and_the_admin_port_refuses_plain_text() {
    let pki = Pki::new("tls-cluster");
    pki.issue("server");
    pki.issue("client");
    let ports = support::cluster::free_ports(6);
    let nodes: Vec<TlsNode> = (0..2).map(|i| TlsNode::start(&pki, i, &ports[i * 3..i * 3 + 3], &[])).collect();
    // The admin port speaks TLS only, and wants a certificate (tls-auth-clients yes).
    let (plain, _) = redis_cli(nodes[0].admin, &["-h", "127.0.0.1", "PING"]);
    assert!(!plain.contains("PONG"), "the admin port answered plain text: {plain:?}");
    let (anonymous, _) = cli_tls(nodes[0].admin, &pki, None, &["PING"]);
    assert!(!anonymous.contains("PONG"), "the admin port took a client without a certificate: {anonymous:?}");
    assert_eq!(nodes[0].admin(&pki, &["PING"]), "PONG\n");

    // The topology, pushed over TLS: slots 0-8191 on node 0, the rest on node 1.
    let halves = [[(0u16, 8191u16)], [(8192, 16383)]];
    for n in &nodes {
        let mut args = vec!["STRATA.TOPOLOGY", "SET", "1", &n.id];
        let entries: Vec<String> = nodes.iter().zip(&halves).map(|(m, s)| m.entry(s)).collect();
        args.extend(entries.iter().map(String::as_str));
        assert_eq!(n.admin(&pki, &args), "OK\n");
    }
    // Node 0's clients reach node 1's keys: forwarded over a TLS link.
    let keys: Vec<String> = (0..400)
        .map(|i| format!("k{i}"))
        .filter(|k| support::cluster::key_slot(k.as_bytes()) >= 8192)
        .take(50)
        .collect();
    let mut client = nodes[0].server.conn_unix();
    for k in &keys {
        assert_eq!(client.cmd(&["SET", k, &format!("v-{k}")]), Frame::ok(), "{}", nodes[0].server.logs());
    }
    assert_eq!(client.cmd(&["GET", &keys[7]]), Frame::bulk(format!("v-{}", keys[7])));
    // Stored on node 1 only (DBSIZE would sum every node's from this port).
    let slot = support::cluster::key_slot(keys[0].as_bytes()).to_string();
    let count = |n: &TlsNode| n.server.conn_unix().cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot]);
    assert_eq!((count(&nodes[0]), count(&nodes[1])), (Frame::int(0), Frame::int(1)));
    let links: u64 = nodes[1].info_field("tls", "tls_connected_clients").parse().unwrap();
    assert!(links >= 1, "node 0's link is a TLS client of node 1");

    // A slot moves from node 1 to node 0 on a migration's TLS link.
    let target = format!("127.0.0.1:{}", nodes[0].admin);
    assert_eq!(nodes[1].admin(&pki, &["STRATA.MIGRATE", "START", "t1", &nodes[0].id, &target, &slot]), "OK\n");
    let committed = || nodes[1].admin(&pki, &["STRATA.MIGRATE", "STATUS", "t1"]).contains("committed");
    assert!(wait_for(Duration::from_secs(20), committed), "{}", nodes[1].server.logs());
    assert_eq!(nodes[0].server.conn_unix().cmd(&["GET", &keys[0]]), Frame::bulk(format!("v-{}", keys[0])));
    assert_eq!(nodes[0].server.conn_unix().cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot]), Frame::int(1));
}

/// A CA with a server and a client certificate, and an "impostor"
/// certificate that another CA ("rogue") signed.
fn pki_with_impostor(name: &str) -> Pki {
    let pki = Pki::new(name);
    pki.issue("server");
    pki.issue("client");
    pki.other_ca("rogue");
    pki.issue_by("impostor", "rogue");
    pki
}

#[test]
fn tls_cluster_peers_must_share_the_ca_and_it_is_required() {
    let pki = pki_with_impostor("tls-cluster-ca");
    // Without a CA the links could not check their peers: the start stops, saying so.
    let ports = support::cluster::free_ports(3);
    let out = Command::new(support::STRATA_BIN)
        .args(["--port", "0", "--tls-port", &ports[0].to_string(), "--cluster-enabled", "yes", "--tls-cluster", "yes"])
        .args(["--tls-cert-file", &pki.path("server.crt"), "--tls-key-file", &pki.path("server.key")])
        .args(["--tls-auth-clients", "no", "--dir", &pki.path(""), "--metrics-port", "0"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success() && said.contains("tls-ca-cert-file") && said.contains("tls-cluster"), "{said}");

    // A node whose certificate the CA did not sign cannot forward to the others.
    let ports = support::cluster::free_ports(6);
    let good = TlsNode::start(&pki, 0, &ports[..3], &[]);
    let (crt, key) = (pki.path("impostor.crt"), pki.path("impostor.key"));
    let impostor =
        TlsNode::start(&pki, 1, &ports[3..], &["--tls-client-cert-file", &crt, "--tls-client-key-file", &key]);
    let entries = [good.entry(&[(0, 8191)]), impostor.entry(&[(8192, 16383)])];
    for n in [&good, &impostor] {
        let mut args = vec!["STRATA.TOPOLOGY", "SET", "1", &n.id];
        args.extend(entries.iter().map(String::as_str));
        assert_eq!(n.admin(&pki, &args), "OK\n");
    }
    let theirs = (0..100).map(|i| format!("k{i}")).find(|k| support::cluster::key_slot(k.as_bytes()) < 8192).unwrap();
    let mut client = impostor.server.conn_unix();
    // Sent again for 10 s (as to an owner that is down), then the error.
    client.set_timeout(Some(Duration::from_secs(30)));
    let refused = client.cmd(&["SET", &theirs, "v"]);
    let said = refused.error_message().unwrap_or_default();
    assert!(said.contains("cannot reach the node"), "a link with a certificate of another CA was taken: {refused:?}");
    let slot = support::cluster::key_slot(theirs.as_bytes()).to_string();
    assert_eq!(good.server.conn_unix().cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot]), Frame::int(0));
    let failures: u64 = good.info_field("tls", "tls_handshake_failures").parse().unwrap();
    assert!(failures >= 1, "the good node counted the refused handshake");
}

#[test]
fn a_tls_cluster_link_refuses_a_peer_whose_server_certificate_another_ca_signed() {
    let pki = pki_with_impostor("tls-cluster-server");
    // No client certificates asked anywhere: only the link's check of the peer's server
    // certificate stands between the good node and the impostor.
    let ports = support::cluster::free_ports(6);
    let open = ["--tls-auth-clients", "no"];
    let good = TlsNode::start(&pki, 0, &ports[..3], &open);
    let (crt, key) = (pki.path("impostor.crt"), pki.path("impostor.key"));
    let mut theirs_args = vec!["--tls-cert-file", crt.as_str(), "--tls-key-file", key.as_str()];
    theirs_args.extend(open);
    let impostor = TlsNode::start(&pki, 1, &ports[3..], &theirs_args);
    let entries = [good.entry(&[(0, 8191)]), impostor.entry(&[(8192, 16383)])];
    for n in [&good, &impostor] {
        let mut args = vec!["STRATA.TOPOLOGY", "SET", "1", &n.id];
        args.extend(entries.iter().map(String::as_str));
        // --insecure: redis-cli would refuse the impostor's certificate too.
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &n.admin.to_string(), "--tls", "--insecure"])
            .args(&args)
            .output()
            .expect("redis-cli");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "OK\n", "{}", n.server.logs());
    }
    let key_there =
        (0..100).map(|i| format!("k{i}")).find(|k| support::cluster::key_slot(k.as_bytes()) >= 8192).unwrap();
    let mut client = good.server.conn_unix();
    client.set_timeout(Some(Duration::from_secs(30)));
    let refused = client.cmd(&["SET", &key_there, "v"]);
    let said = refused.error_message().unwrap_or_default();
    assert!(said.contains("cannot reach the node"), "the link took a certificate of another CA: {refused:?}");
    assert!(good.server.logs().contains("UnknownIssuer"), "the log says why:\n{}", good.server.logs());
    let slot = support::cluster::key_slot(key_there.as_bytes()).to_string();
    assert_eq!(impostor.server.conn_unix().cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot]), Frame::int(0));
}

#[test]
fn an_encrypted_key_loads_with_its_passphrase_as_in_redis() {
    let pki = Pki::new("encrypted");
    pki.issue("server");
    pki.issue("client");
    // As Redis's own test makes it (PKCS#8, PBES2 with AES-256-CBC).
    pki.openssl(&["rsa", "-in", "server.key", "-out", "server.enc.key", "-aes256", "-passout", "pass:1234"]);
    let tls_port = free_port();
    let node = strata_tls(&pki, tls_port, &[]);
    let mut plain = node.conn();
    let enc = pki.path("server.enc.key");
    let refused = plain.cmd(&["CONFIG", "SET", "tls-key-file", &enc]);
    assert!(refused.error_message().unwrap_or_default().contains("Unable to update TLS"), "{refused:?}");
    assert!(node.logs().contains("tls-key-file-pass"), "the log says what to set:\n{}", node.logs());
    let wrong = plain.cmd(&["CONFIG", "SET", "tls-key-file-pass", "nope", "tls-key-file", &enc]);
    assert!(wrong.error_message().is_some(), "a wrong passphrase loads: {wrong:?}");
    assert_eq!(plain.cmd(&["CONFIG", "SET", "tls-key-file-pass", "1234", "tls-key-file", &enc]), Frame::ok());
    assert_eq!(cli_tls(tls_port, &pki, Some("client"), &["PING"]), ("PONG\n".into(), true));
    // And at start, from the command line.
    let port = free_port();
    let started = strata_tls(&pki, port, &["--tls-key-file", &enc, "--tls-key-file-pass", "1234"]);
    assert_eq!(cli_tls(port, &pki, Some("client"), &["PING"]), ("PONG\n".into(), true), "{}", started.logs());
}
