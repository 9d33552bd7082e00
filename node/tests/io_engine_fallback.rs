//! The I/O engines that serve where io_uring is refused, as main paths:
//! container runtimes' default seccomp profiles (Kubernetes RuntimeDefault
//! on containerd 2.0 and later, Docker 25 and later) refuse io_uring, and
//! `--io-engine auto` must then serve the durability log and the cold tier
//! with the `aio` engine (the workers' reads by Linux AIO, which those
//! profiles allow, the rest on threads), or with threads alone where AIO
//! is refused too. The node runs under a real seccomp filter
//! (tests/support/no_io_uring.py, libseccomp's Python bindings from
//! Debian's python3-seccomp) that refuses those system calls with EPERM,
//! as the profiles do.

mod support;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

const PYTHON: &str = "/usr/bin/python3";

/// The seccomp wrapper; with `no_aio`, AIO is refused too.
fn wrapper_refusing(no_aio: bool) -> Vec<String> {
    let mut w = wrapper();
    if no_aio {
        w.push("--no-aio".to_string());
    }
    w
}

fn wrapper() -> Vec<String> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/no_io_uring.py");
    let probe = Command::new(PYTHON).args(["-c", "import seccomp"]).output();
    assert!(
        probe.is_ok_and(|o| o.status.success()),
        "{PYTHON} cannot import seccomp: install Debian's python3-seccomp (make deps does)"
    );
    vec![PYTHON.to_string(), script.to_str().unwrap().to_string()]
}

fn value_of(i: usize) -> String {
    format!("value-{i}-").repeat(60)
}

fn field(conn: &mut RawConn, name: &str) -> String {
    info_field(conn, name).unwrap_or_else(|| panic!("INFO has no {name}"))
}

fn number(conn: &mut RawConn, name: &str) -> u64 {
    field(conn, name).parse().unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn wait_loaded(server: &Server) {
    let mut c = server.conn();
    let ok = wait_for(Duration::from_secs(30), || !c.cmd(&["EXISTS", "probe"]).is_error());
    assert!(ok, "still loading after 30 s\n{}", server.logs());
}

#[test]
fn auto_serves_the_log_and_the_tier_with_aio_when_seccomp_refuses_io_uring() {
    serves_the_log_and_the_tier_under(false, "aio: io_uring refused");
}

#[test]
fn auto_serves_the_log_and_the_tier_with_threads_when_seccomp_refuses_io_uring_and_aio() {
    serves_the_log_and_the_tier_under(true, "threads: io_uring refused");
}

/// `--io-engine auto` under the wrapper: INFO names the engine (`expected`,
/// how its line starts), cold values come back right, and every
/// acknowledged write survives kill -9.
fn serves_the_log_and_the_tier_under(no_aio: bool, expected: &str) {
    let wrapper = wrapper_refusing(no_aio);
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let dir = DataDir::new(if no_aio { "auto-threads" } else { "auto-aio" });
    let args = [
        "--dir",
        dir.path(),
        "--durability",
        "sync",
        "--io-engine",
        "auto",
        "--max-disk",
        "256mb",
        "--maxmemory-policy",
        "allkeys-lru",
    ];
    let mut server = Server::strata_under(&wrapper, &args);
    wait_loaded(&server);
    let mut c = server.conn();
    let engine = field(&mut c, "strata_io_engine");
    assert!(engine.starts_with(expected), "INFO strata_io_engine: {engine}");
    if no_aio {
        assert!(engine.contains("AIO refused"), "INFO strata_io_engine: {engine}");
    }
    // The cold tier opened its own engine the same way.
    let tier_engine = field(&mut c, "tier_io_engine");
    assert_eq!(Some(tier_engine.as_str()), expected.split(':').next(), "INFO tier_io_engine");
    assert!(server.logs().contains("io_uring refused"), "the log names the fallback:\n{}", server.logs());

    // Three times more data than RAM: most values go to the cold tier.
    let budget = number(&mut c, "used_memory") + (8 << 20);
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", &budget.to_string()]), Frame::ok());
    let n = 24_000;
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        for &i in chunk {
            c.send(&["SET", &format!("key:{i}"), &value_of(i)]);
        }
        for _ in chunk {
            assert_eq!(c.read_frame(), Frame::ok());
        }
    }
    let disk_keys = number(&mut c, "tier_disk_keys");
    assert!(disk_keys > (n / 2) as u64, "most values went to disk: {disk_keys}");
    // Cold values come back through the engine.
    for i in (0..n).step_by(11) {
        assert_eq!(c.cmd(&["GET", &format!("key:{i}")]), Frame::bulk(value_of(i)), "key:{i}");
    }
    // Read from disk: promoted, or served once and left there (read once).
    assert!(number(&mut c, "tier_promoted") + number(&mut c, "tier_served_once") > 500);
    assert_eq!(number(&mut c, "tier_read_errors"), 0);

    // Every write was acknowledged after its fsync: all of them survive kill -9.
    server.kill();
    let server = Server::strata_with(&["--dir", dir.path(), "--durability", "sync"]);
    wait_loaded(&server);
    let mut c = server.conn();
    assert_eq!(c.cmd(&["DBSIZE"]), Frame::int(n as i64), "keys lost across the restart");
    for i in (0..n).step_by(13) {
        assert_eq!(c.cmd(&["GET", &format!("key:{i}")]), Frame::bulk(value_of(i)), "key:{i} after the restart");
    }
}

#[test]
fn uring_chosen_explicitly_stops_the_node_and_says_what_to_do() {
    let wrapper = wrapper();
    let dir = DataDir::new("uring");
    let started = Instant::now();
    let out = Command::new(&wrapper[0])
        .arg(&wrapper[1])
        .arg(env!("CARGO_BIN_EXE_strata-node"))
        .args(["--port", &free_port().to_string(), "--metrics-port", "0", "--dir", dir.path()])
        .args(["--durability", "sync", "--io-engine", "uring"])
        .stdin(Stdio::null())
        .output()
        .expect("running strata-node");
    assert!(!out.status.success(), "the node must not run without its engine");
    assert!(started.elapsed() < Duration::from_secs(20), "it took {:?} to stop", started.elapsed());
    let logs = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(logs.contains("io_uring is refused"), "{logs}");
    assert!(logs.contains("--io-engine auto"), "the error says what to do: {logs}");
}
