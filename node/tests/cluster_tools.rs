//! Real Redis Cluster tools and clients against three Strata nodes in cluster
//! mode: `redis-cli --cluster check`, `redis-cli -c` following MOVED,
//! `redis-benchmark --cluster`, the `redis` crate's cluster client writing and
//! reading back 100 k keys, and a plain client doing the same through one
//! node's plain port (forwarding).
//!
//! `STRATA_TEST_CLUSTER_REFERENCE=1` runs the same tests against a real Redis
//! Cluster (Debian's redis-server) instead, to check a test itself; the
//! plain-port tests are skipped then (Redis has no forwarding).
//! Skipped (with a message) when redis-server/redis-cli are missing.

mod support;

use std::process::{Command, Output, Stdio};
use support::cluster::*;
use support::*;

const KEYS: usize = 100_000;
const BATCH: usize = 1_000;

fn reference_mode() -> bool {
    std::env::var("STRATA_TEST_CLUSTER_REFERENCE").is_ok_and(|v| v == "1")
}

/// Three Strata nodes with their topology (or a Redis Cluster in reference mode).
fn cluster() -> Cluster {
    if reference_mode() { Cluster::redis(3) } else { Cluster::strata(3) }
}

/// Runs `program args` under `timeout`, so a tool that hangs fails the test.
fn run(program: &str, args: &[&str], secs: u32) -> Output {
    Command::new("timeout")
        .arg(secs.to_string())
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {program}: {e}"))
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The distribution check: all `total` keys are stored, and on every node
/// (slots are spread evenly, so each holds about a third).
fn assert_spread(cluster: &Cluster, total: usize) {
    let sizes = cluster.dbsizes();
    assert_eq!(sizes.iter().sum::<i64>(), total as i64, "keys per node {sizes:?}");
    for (i, &n) in sizes.iter().enumerate() {
        assert!(n as usize > total / 4, "node {i} holds {n} of {total} keys ({sizes:?}): not spread by slot");
    }
}

#[test]
fn redis_cli_cluster_check_passes() {
    if skip_without_redis("redis_cli_cluster_check_passes") {
        return;
    }
    let cluster = cluster();
    // Some keys, so the per-node key counts are checked too.
    for i in 0..300 {
        let key = format!("check:{i}");
        let owner = cluster.owner_of_key(&key);
        assert_eq!(cluster.nodes[owner].conn().cmd(&["SET", &key, "v"]), Frame::ok());
    }
    let seed = cluster.nodes[0].direct_addr();
    let out = run("redis-cli", &["--cluster", "check", &seed], 60);
    let (stdout, stderr) = text(&out);
    let report =
        format!("redis-cli --cluster check {seed} ({}):\n{stdout}\n{stderr}\n{}", out.status, cluster.describe());
    assert!(out.status.success(), "{report}");
    for want in [
        "[OK] All nodes agree about slots configuration.",
        "[OK] All 16384 slots covered.",
        "[OK] 300 keys in 3 masters.",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in {report}");
    }
    for bad in ["[ERR]", "[WARNING]"] {
        assert!(!stdout.contains(bad), "{bad} in {report}");
    }
    for node in &cluster.nodes {
        let (a, b) = node.slots;
        let line = format!("M: {} {}\n   slots:[{a}-{b}] ({} slots) master", node.id, node.direct_addr(), b - a + 1);
        assert!(stdout.contains(&line), "missing {line:?} in {report}");
    }
}

#[test]
fn redis_cli_c_follows_moved() {
    if skip_without_redis("redis_cli_c_follows_moved") {
        return;
    }
    let cluster = cluster();
    let owner = cluster.owner_of_key("foo");
    assert_eq!(owner, 2);
    let (d0, d1) = (cluster.nodes[0].direct.to_string(), cluster.nodes[1].direct.to_string());
    // Without -c, node 0 answers MOVED to node 2's direct address...
    let out = run("redis-cli", &["-p", &d0, "SET", "foo", "bar"], 30);
    let moved = format!("MOVED 12182 {}", cluster.nodes[2].direct_addr());
    assert!(text(&out).0.contains(&moved), "redis-cli -p {d0} SET foo bar: {:?}, want {moved:?}", text(&out));
    // ...which -c follows: set through node 0, read through node 1.
    let out = run("redis-cli", &["-c", "-p", &d0, "SET", "foo", "bar"], 30);
    assert_eq!(text(&out).0.trim(), "OK", "redis-cli -c -p {d0} SET foo bar: {:?}", text(&out));
    let out = run("redis-cli", &["-c", "-p", &d1, "GET", "foo"], 30);
    assert_eq!(text(&out).0.trim(), "bar", "redis-cli -c -p {d1} GET foo: {:?}", text(&out));
    // The key lives on its owner.
    assert_eq!(cluster.nodes[2].conn().cmd(&["GET", "foo"]), Frame::bulk("bar"));
    assert_eq!(cluster.dbsizes(), vec![0, 0, 1]);
}

#[test]
fn redis_benchmark_cluster_runs_without_errors() {
    if skip_without_redis("redis_benchmark_cluster_runs_without_errors") {
        return;
    }
    assert!(tool_available("redis-benchmark"), "redis-benchmark missing (apt-get install redis-tools)");
    let cluster = cluster();
    let port = cluster.nodes[0].direct.to_string();
    let args = [
        "--cluster",
        "-h",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "set,get",
        "-n",
        "20000",
        "-c",
        "20",
        "-r",
        "100000",
        "--csv",
    ];
    let out = run("redis-benchmark", &args, 300);
    let (stdout, stderr) = text(&out);
    let report = format!("redis-benchmark {} ({}):\n{stdout}\n{stderr}", args.join(" "), out.status);
    assert!(out.status.success(), "{report}");
    assert!(!stdout.to_lowercase().contains("error") && !stderr.to_lowercase().contains("error"), "{report}");
    // One CSV row per test, with a positive rate.
    for test in ["SET", "GET"] {
        let rps = stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("\"{test}\",\"")))
            .and_then(|rest| rest.split('"').next())
            .and_then(|v| v.parse::<f64>().ok());
        assert!(rps.is_some_and(|r| r > 0.0), "no {test} rate in {report}");
    }
    // It found the three masters and wrote to each.
    let sizes = cluster.dbsizes();
    assert!(sizes.iter().all(|&n| n > 0), "keys per node after SET {sizes:?}\n{report}");
}

#[test]
fn cluster_client_writes_and_reads_100k_keys() {
    if skip_without_redis("cluster_client_writes_and_reads_100k_keys") {
        return;
    }
    let cluster = cluster();
    let seed = format!("redis://{}/", cluster.nodes[0].direct_addr());
    let client = redis::cluster::ClusterClient::new(vec![seed.as_str()]).expect("cluster client");
    let mut con =
        client.get_connection().unwrap_or_else(|e| panic!("connecting to {seed}: {e}\n{}", cluster.describe()));
    let key = |i: usize| format!("ck:{i}");
    let value = |i: usize| format!("value-{i}-{}", i * 7919 % 1_000_003);
    for start in (0..KEYS).step_by(BATCH) {
        let mut pipe = redis::cluster::cluster_pipe();
        for i in start..start + BATCH {
            pipe.set(key(i), value(i)).ignore();
        }
        pipe.query::<()>(&mut con).unwrap_or_else(|e| panic!("SET batch at {start}: {e}"));
    }
    for start in (0..KEYS).step_by(BATCH) {
        let mut pipe = redis::cluster::cluster_pipe();
        for i in start..start + BATCH {
            pipe.get(key(i));
        }
        let got: Vec<Option<String>> = pipe.query(&mut con).unwrap_or_else(|e| panic!("GET batch at {start}: {e}"));
        for (j, v) in got.into_iter().enumerate() {
            let i = start + j;
            assert_eq!(v.as_deref(), Some(value(i).as_str()), "GET {}", key(i));
        }
    }
    assert_spread(&cluster, KEYS);
    // Each key sits on the node that owns its slot.
    let mut conns: Vec<RawConn> = cluster.nodes.iter().map(ClusterNode::conn).collect();
    for i in (0..KEYS).step_by(997) {
        let k = key(i);
        let owner = cluster.owner_of_key(&k);
        assert_eq!(conns[owner].cmd(&["GET", &k]), Frame::bulk(value(i)), "GET {k} on its owner, node {owner}");
    }
}

/// Plain clients through one node's plain port: every key is forwarded to
/// its owner (forwarding on the plain port).
#[test]
fn plain_client_through_one_node_writes_and_reads_100k_keys() {
    if skip_without_redis("plain_client_through_one_node_writes_and_reads_100k_keys") {
        return;
    }
    if reference_mode() {
        eprintln!("SKIPPED: Redis Cluster has no forwarding");
        return;
    }
    let cluster = cluster();
    let mut conn = cluster.nodes[0].plain_conn();
    let key = |i: usize| format!("pk:{i}");
    let value = |i: usize| format!("plain-{i}");
    for start in (0..KEYS).step_by(BATCH) {
        let mut bytes = Vec::new();
        for i in start..start + BATCH {
            bytes.extend(encode_command(&["SET", &key(i), &value(i)]));
        }
        conn.send_raw(&bytes);
        for i in start..start + BATCH {
            assert_eq!(conn.read_frame(), Frame::ok(), "SET {} through node 0's plain port", key(i));
        }
    }
    for start in (0..KEYS).step_by(BATCH) {
        let mut bytes = Vec::new();
        for i in start..start + BATCH {
            bytes.extend(encode_command(&["GET", &key(i)]));
        }
        conn.send_raw(&bytes);
        for i in start..start + BATCH {
            assert_eq!(conn.read_frame(), Frame::bulk(value(i)), "GET {} through node 0's plain port", key(i));
        }
    }
    assert_spread(&cluster, KEYS);
}

/// Through a plain port, single-slot multi-key commands, MULTI/EXEC and
/// scripts for another node's slot run there as a unit; cross-slot requests
/// still get CROSSSLOT; `redis-cli` without `-c` just works.
#[test]
fn plain_port_forwards_transactions_scripts_and_multi_key_commands() {
    if skip_without_redis("plain_port_forwards_transactions_scripts_and_multi_key_commands") {
        return;
    }
    if reference_mode() {
        eprintln!("SKIPPED: Redis Cluster has no forwarding");
        return;
    }
    let cluster = cluster();
    assert_eq!(cluster.owner_of_key("{foo}a"), 2);
    let mut c = cluster.nodes[0].plain_conn();
    assert_eq!(c.cmd(&["MSET", "{foo}a", "1", "{foo}b", "2"]), Frame::ok());
    assert_eq!(
        c.cmd(&["MGET", "{foo}a", "{foo}b", "{foo}c"]),
        Frame::Array(vec![Frame::bulk("1"), Frame::bulk("2"), Frame::Nil])
    );
    assert_eq!(c.cmd(&["MULTI"]), Frame::ok());
    assert_eq!(c.cmd(&["INCR", "{foo}n"]), Frame::simple("QUEUED"));
    assert_eq!(c.cmd(&["INCR", "{foo}n"]), Frame::simple("QUEUED"));
    assert_eq!(c.cmd(&["GET", "{foo}a"]), Frame::simple("QUEUED"));
    assert_eq!(c.cmd(&["EXEC"]), Frame::Array(vec![Frame::int(1), Frame::int(2), Frame::bulk("1")]));
    let script = "redis.call('set', KEYS[1], ARGV[1]); return redis.call('incrby', KEYS[2], 10)";
    assert_eq!(c.cmd(&["EVAL", script, "2", "{foo}s", "{foo}n", "x"]), Frame::int(12));
    assert_eq!(
        c.cmd(&["MSET", "a", "1", "b", "2"]),
        Frame::error("CROSSSLOT Keys in request don't hash to the same slot")
    );
    // All of it landed on node 2, none on node 0.
    let mut owner = cluster.nodes[2].conn();
    assert_eq!(owner.cmd(&["MGET", "{foo}a", "{foo}n", "{foo}s"]), Frame::bulks(&["1", "12", "x"]));
    assert_eq!(cluster.dbsizes(), vec![0, 0, 4]);
    // redis-cli without -c, through the plain port.
    let plain = cluster.nodes[0].plain.to_string();
    let out = run("redis-cli", &["-p", &plain, "SET", "foo", "bar"], 30);
    assert_eq!(text(&out).0.trim(), "OK", "redis-cli -p {plain} SET foo bar: {:?}", text(&out));
    let out = run("redis-cli", &["-p", &plain, "GET", "foo"], 30);
    assert_eq!(text(&out).0.trim(), "bar", "redis-cli -p {plain} GET foo: {:?}", text(&out));
    assert_eq!(owner.cmd(&["GET", "foo"]), Frame::bulk("bar"));
}

/// A cluster client seeded with a plain port (what the Service gives) learns
/// the direct endpoints from CLUSTER SLOTS and works as with a direct seed.
#[test]
fn cluster_clients_seeded_with_a_plain_port() {
    if skip_without_redis("cluster_clients_seeded_with_a_plain_port") {
        return;
    }
    if reference_mode() {
        eprintln!("SKIPPED: Redis Cluster has no plain port");
        return;
    }
    let cluster = cluster();
    let seed = format!("redis://127.0.0.1:{}/", cluster.nodes[0].plain);
    let client = redis::cluster::ClusterClient::new(vec![seed.as_str()]).expect("cluster client");
    let mut con = client.get_connection().unwrap_or_else(|e| panic!("connecting to {seed}: {e}"));
    let mut pipe = redis::cluster::cluster_pipe();
    for i in 0..3000 {
        pipe.set(format!("seed:{i}"), i).ignore();
    }
    pipe.query::<()>(&mut con).expect("SET batch");
    let mut pipe = redis::cluster::cluster_pipe();
    for i in 0..3000 {
        pipe.get(format!("seed:{i}"));
    }
    let got: Vec<i64> = pipe.query(&mut con).expect("GET batch");
    assert_eq!(got, (0..3000).collect::<Vec<i64>>());
    assert_spread(&cluster, 3000);

    // redis-cli -c seeded with the plain port.
    let plain = cluster.nodes[0].plain.to_string();
    let out = run("redis-cli", &["-c", "-p", &plain, "SET", "foo", "bar"], 30);
    assert_eq!(text(&out).0.trim(), "OK", "redis-cli -c -p {plain} SET foo bar: {:?}", text(&out));
    assert_eq!(cluster.nodes[2].conn().cmd(&["GET", "foo"]), Frame::bulk("bar"));

    // redis-cli --cluster check seeded with the plain port.
    let seed = format!("127.0.0.1:{plain}");
    let out = run("redis-cli", &["--cluster", "check", &seed], 60);
    let (stdout, stderr) = text(&out);
    let report =
        format!("redis-cli --cluster check {seed} ({}):\n{stdout}\n{stderr}\n{}", out.status, cluster.describe());
    assert!(out.status.success(), "{report}");
    for want in ["[OK] All nodes agree about slots configuration.", "[OK] All 16384 slots covered."] {
        assert!(stdout.contains(want), "missing {want:?} in {report}");
    }
    assert!(!stdout.contains("[ERR]") && !stdout.contains("[WARNING]"), "{report}");
}
