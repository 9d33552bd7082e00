//! The HTTP endpoint: `/metrics` reflects real traffic (commands, latency
//! histogram, hits/misses, connections, memory, keys), `/healthz` and
//! `/readyz` answer, and bad HTTP gets an error without hurting the node.

mod support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use support::*;

/// A node with the metrics endpoint on a free port; returns it and that port.
fn start() -> (Server, u16) {
    start_with(&[])
}

/// `start`, with more arguments for the node.
fn start_with(extra: &[&str]) -> (Server, u16) {
    // The harness only retries collisions on the Redis port, so retry the
    // (rare) metrics port collision here.
    for _ in 0..5 {
        let port = free_port();
        let started = catch_unwind(AssertUnwindSafe(|| {
            let port = port.to_string();
            let mut args = vec!["--metrics-port", &port, "--metrics-bind", "127.0.0.1"];
            args.extend_from_slice(extra);
            Server::strata_with(&args)
        }));
        if let Ok(server) = started {
            return (server, port);
        }
    }
    panic!("could not start strata with a metrics port");
}

struct HttpResponse {
    status: u16,
    head: String,
    body: String,
}

impl HttpResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// Sends raw bytes and reads the whole response (the server closes).
fn http_raw(port: u16, request: &[u8]) -> HttpResponse {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to metrics port");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).expect("send request");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read response");
    let text = String::from_utf8(raw).expect("UTF-8 response");
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no head in {text:?}"));
    let status =
        head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("bad status line in {head:?}"));
    assert!(head.starts_with("HTTP/1.1 "), "{head}");
    HttpResponse { status, head: head.to_string(), body: body.to_string() }
}

fn get(port: u16, path: &str) -> HttpResponse {
    http_raw(port, format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: test\r\n\r\n").as_bytes())
}

/// One sample of the exposition.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses the OpenMetrics text samples (comments skipped).
fn parse_samples(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("bad sample line {line:?}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("bad value in {line:?}"));
        let (name, labels) = match series.split_once('{') {
            None => (series, BTreeMap::new()),
            Some((name, rest)) => {
                let rest = rest.strip_suffix('}').unwrap_or_else(|| panic!("unclosed labels in {line:?}"));
                let labels = rest
                    .split(',')
                    .map(|kv| {
                        let (k, v) = kv.split_once('=').unwrap_or_else(|| panic!("bad label in {line:?}"));
                        (k.to_string(), v.trim_matches('"').to_string())
                    })
                    .collect();
                (name, labels)
            }
        };
        out.push(Sample { name: name.to_string(), labels, value });
    }
    out
}

struct Scrape {
    text: String,
    samples: Vec<Sample>,
}

impl Scrape {
    fn take(port: u16) -> Scrape {
        let r = get(port, "/metrics");
        assert_eq!(r.status, 200, "{}\n{}", r.head, r.body);
        assert_eq!(r.header("content-type"), Some("application/openmetrics-text; version=1.0.0; charset=utf-8"));
        assert_eq!(r.header("content-length"), Some(r.body.len().to_string().as_str()));
        assert!(r.body.ends_with("# EOF\n"), "exposition must end with # EOF");
        let samples = parse_samples(&r.body);
        Scrape { text: r.body, samples }
    }

    /// The value of the series with exactly these labels.
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        self.samples.iter().find(|s| s.name == name && s.labels == want).map(|s| s.value)
    }

    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels).unwrap_or_else(|| panic!("no sample {name}{labels:?} in\n{}", self.text))
    }
}

fn cmd_label(c: &str) -> [(&str, &str); 1] {
    [("command", c)]
}

#[test]
fn every_family_has_help_and_type() {
    let (_server, port) = start();
    let scrape = Scrape::take(port);
    for (family, kind) in [
        ("strata_commands", "counter"),
        ("strata_command_failures", "counter"),
        ("strata_commands_rejected", "counter"),
        ("strata_command_duration_seconds", "histogram"),
        ("strata_connections", "gauge"),
        ("strata_connections_received", "counter"),
        ("strata_connections_rejected", "counter"),
        ("strata_net_input_bytes", "counter"),
        ("strata_net_output_bytes", "counter"),
        ("strata_keyspace_hits", "counter"),
        ("strata_keyspace_misses", "counter"),
        ("strata_expired_keys", "counter"),
        ("strata_evicted_keys", "counter"),
        ("strata_evicted_bytes", "counter"),
        ("strata_memory_used_bytes", "gauge"),
        ("strata_memory_max_bytes", "gauge"),
        ("strata_hugepages_bytes", "gauge"),
        ("strata_hugepages_fallbacks", "counter"),
        ("strata_keys", "gauge"),
        ("strata_protocol_errors", "counter"),
        ("strata_uptime_seconds", "gauge"),
        ("strata_worker_threads", "gauge"),
        ("strata_connections_max", "gauge"),
        ("strata_worker_cpu_seconds", "counter"),
        ("strata_worker_commands", "counter"),
        ("strata_worker_connections", "gauge"),
        ("strata_worker_active", "gauge"),
        ("strata_build", "info"),
    ] {
        assert!(scrape.text.contains(&format!("\n# TYPE {family} {kind}\n")), "no TYPE for {family}:\n{}", scrape.text);
        assert!(scrape.text.contains(&format!("# HELP {family} ")), "no HELP for {family}");
    }
    assert_eq!(scrape.value("strata_worker_threads", &[]), 2.0, "the harness starts 2 threads");
    assert_eq!(scrape.value("strata_build_info", &[("version", env!("CARGO_PKG_VERSION"))]), 1.0);
    assert!(scrape.value("strata_uptime_seconds", &[]) >= 0.0);
    assert!(scrape.value("strata_memory_used_bytes", &[("component", "total")]) > 0.0);
    assert_eq!(scrape.value("strata_memory_max_bytes", &[]), 0.0, "no maxmemory by default");
    for db in 0..16 {
        assert_eq!(scrape.value("strata_keys", &[("db", &db.to_string())]), 0.0);
    }
}

/// The sum of a per-worker family over its `worker` series, and how many there are.
fn per_worker(scrape: &Scrape, name: &str) -> (f64, usize) {
    let series: Vec<&Sample> = scrape.samples.iter().filter(|s| s.name == name).collect();
    for s in &series {
        assert_eq!(s.labels.keys().collect::<Vec<_>>(), ["worker"], "{name} is labelled by worker only");
    }
    (series.iter().map(|s| s.value).sum(), series.len())
}

#[test]
fn maxclients_and_per_worker_figures() {
    let (server, port) = start_with(&["--maxclients", "50"]);
    assert_eq!(Scrape::take(port).value("strata_connections_max", &[]), 50.0);
    let mut con = server.redis_client().get_connection().expect("redis connection");
    let () = redis::cmd("CONFIG").arg("SET").arg("maxclients").arg("40").query(&mut con).expect("CONFIG SET");
    const SETS: usize = 200;
    for i in 0..SETS {
        let () = redis::cmd("SET").arg(format!("key:{i}")).arg("v").query(&mut con).expect("SET");
    }
    let scrape = Scrape::take(port);
    assert_eq!(scrape.value("strata_connections_max", &[]), 40.0, "CONFIG SET maxclients shows");
    // The harness runs 2 workers, both active (adaptive-threads no).
    let (commands, n) = per_worker(&scrape, "strata_worker_commands_total");
    assert_eq!(n, 2);
    assert!(commands >= (SETS + 1) as f64, "workers counted {commands} commands");
    assert_eq!(per_worker(&scrape, "strata_worker_active"), (2.0, 2));
    let (conns, n) = per_worker(&scrape, "strata_worker_connections");
    assert_eq!(n, 2);
    assert!(conns >= 1.0, "our connection belongs to a worker");
    // CPU time is sampled on each worker's 100 ms tick.
    let mut cpu = 0.0;
    let busy = wait_for(Duration::from_secs(3), || {
        let (c, n) = per_worker(&Scrape::take(port), "strata_worker_cpu_seconds_total");
        cpu = c;
        n == 2 && c > 0.0
    });
    assert!(busy, "worker CPU seconds {cpu} after {SETS} commands");
    assert!(!scrape.text.contains("strata_log_fsyncs"), "no durability families without a log");
}

#[test]
fn durability_families_with_a_log() {
    let (server, port) = start_with(&["--dir", "{dir}", "--durability", "sync"]);
    // Commands get -LOADING until the (empty) log is replayed.
    assert!(wait_for(Duration::from_secs(10), || get(port, "/readyz").status == 200), "the node never got ready");
    let mut con = server.redis_client().get_connection().expect("redis connection");
    const SETS: usize = 50;
    for i in 0..SETS {
        let () = redis::cmd("SET").arg(format!("key:{i}")).arg("x".repeat(100)).query(&mut con).expect("SET");
    }
    // One pipeline of 20 SETs: executed from one read, their replies wait
    // for the flush covering them all, so that flush's batch is over 1.
    const PIPELINED: usize = 20;
    let mut pipe = redis::pipe();
    for i in 0..PIPELINED {
        pipe.cmd("SET").arg(format!("batch:{i}")).arg("y").ignore();
    }
    let () = pipe.query(&mut con).expect("pipelined SETs");
    let scrape = Scrape::take(port);
    for (family, kind) in [
        ("strata_durability_lag_records", "gauge"),
        ("strata_log_fsyncs", "counter"),
        ("strata_log_fsync_records", "counter"),
        ("strata_log_fsync_seconds", "counter"),
        ("strata_log_fsync_duration_seconds", "histogram"),
        ("strata_group_commit_max_records", "gauge"),
        ("strata_group_commit_records", "histogram"),
        ("strata_log_segments", "gauge"),
        ("strata_log_bytes", "gauge"),
        ("strata_io_engine", "info"),
    ] {
        assert!(scrape.text.contains(&format!("\n# TYPE {family} {kind}\n")), "no TYPE for {family}:\n{}", scrape.text);
    }
    // sync: every SET was acknowledged after the fsync covering it.
    assert!(scrape.value("strata_log_fsync_records_total", &[]) >= SETS as f64);
    assert!(scrape.value("strata_log_fsyncs_total", &[]) >= 1.0);
    assert!(scrape.value("strata_log_fsync_seconds_total", &[]) > 0.0);
    // Every flush is in both histograms; the batch sizes add up to the records.
    let fsyncs = scrape.value("strata_log_fsyncs_total", &[]);
    let records = scrape.value("strata_log_fsync_records_total", &[]);
    assert!(records >= (SETS + PIPELINED) as f64);
    assert_eq!(scrape.value("strata_log_fsync_duration_seconds_count", &[]), fsyncs);
    assert_eq!(scrape.value("strata_log_fsync_duration_seconds_bucket", &[("le", "+Inf")]), fsyncs);
    assert!(scrape.value("strata_log_fsync_duration_seconds_sum", &[]) > 0.0);
    assert_eq!(scrape.value("strata_group_commit_records_count", &[]), fsyncs);
    assert_eq!(scrape.value("strata_group_commit_records_bucket", &[("le", "+Inf")]), fsyncs);
    assert_eq!(scrape.value("strata_group_commit_records_sum", &[]), records);
    let max = scrape.value("strata_group_commit_max_records", &[]);
    assert!(max >= 2.0, "the pipeline shared a flush: the largest batch is {max}");
    let single = scrape.value("strata_group_commit_records_bucket", &[("le", "1.0")]);
    assert!(single >= 1.0 && single < fsyncs, "{single} of {fsyncs} flushes were of one record");
    assert_eq!(scrape.value("strata_group_commit_records_bucket", &[("le", "65536.0")]), fsyncs);
    // INFO shows the same histograms' quantiles.
    let mut raw = server.conn();
    let info = info(&mut raw, Some("persistence"));
    let field = |name: &str| -> f64 {
        info.get(name).unwrap_or_else(|| panic!("no {name} in INFO persistence: {info:?}")).parse().unwrap()
    };
    let (p50, p99) = (field("strata_group_commit_p50"), field("strata_group_commit_p99"));
    assert_eq!(field("strata_group_commit_max"), max);
    assert!(p50 >= 1.0 && p99 >= p50 && p99 <= max, "batch p50 {p50} p99 {p99}, the largest {max}");
    let (f50, f99) = (field("strata_fsync_p50_us"), field("strata_fsync_p99_us"));
    assert!(f50 > 0.0 && f99 >= f50 && f99 <= field("strata_fsync_max_us"), "fsync p50 {f50} p99 {f99}");
    let segments = scrape.value("strata_log_segments", &[]);
    assert!(segments >= 1.0);
    let bytes = scrape.value("strata_log_bytes", &[]);
    assert!(bytes > 0.0 && bytes % segments == 0.0, "{bytes} bytes in {segments} whole segments");
    let engine = scrape.samples.iter().find(|s| s.name == "strata_io_engine_info").expect("the engine is reported");
    assert!(["io_uring", "threads"].contains(&engine.labels["engine"].as_str()), "{engine:?}");
}

#[test]
fn metrics_reflect_traffic() {
    let (server, port) = start();
    let before = Scrape::take(port);
    let mut con = server.redis_client().get_connection().expect("redis connection");

    const SETS: usize = 25;
    for i in 0..SETS {
        let () = redis::cmd("SET").arg(format!("key:{i}")).arg("x".repeat(100)).query(&mut con).expect("SET");
    }
    for i in 0..10 {
        let v: Option<String> = redis::cmd("GET").arg(format!("key:{i}")).query(&mut con).expect("GET hit");
        assert!(v.is_some());
    }
    for i in 0..5 {
        let v: Option<String> = redis::cmd("GET").arg(format!("missing:{i}")).query(&mut con).expect("GET miss");
        assert!(v.is_none());
    }
    // Handler error: counts as a call that failed.
    let failed: redis::RedisResult<()> = redis::cmd("SET").arg("k").arg("v").arg("EX").arg("soon").query(&mut con);
    assert!(failed.is_err());
    // Arity error: refused before execution.
    let rejected: redis::RedisResult<()> = redis::cmd("GET").query(&mut con);
    assert!(rejected.is_err());
    // A key that expires, then is looked up.
    let () = redis::cmd("SET").arg("short").arg("v").arg("PX").arg(1).query(&mut con).expect("SET PX");
    std::thread::sleep(Duration::from_millis(20));
    let gone: Option<String> = redis::cmd("GET").arg("short").query(&mut con).expect("GET expired");
    assert!(gone.is_none());
    // A protocol error closes that connection and is counted.
    let mut raw = TcpStream::connect(server.addr()).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    raw.write_all(b"*abc\r\n").unwrap();
    let mut reply = Vec::new();
    let _ = raw.read_to_end(&mut reply);
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with('-') && reply.contains("Protocol error"), "{reply:?}");

    let after = Scrape::take(port);
    let set = cmd_label("set");
    let get = cmd_label("get");
    // SETs + the failing SET + the expiring SET.
    assert_eq!(after.value("strata_commands_total", &set), (SETS + 2) as f64);
    assert_eq!(after.value("strata_command_failures_total", &set), 1.0);
    assert_eq!(after.value("strata_commands_total", &get), 16.0);
    assert_eq!(after.value("strata_command_failures_total", &get), 0.0);
    assert_eq!(after.value("strata_commands_rejected_total", &get), 1.0);
    assert_eq!(after.value("strata_commands_rejected_total", &set), 0.0);

    // Histogram: count and +Inf agree with the calls; buckets are cumulative.
    let count = after.value("strata_command_duration_seconds_count", &set);
    assert_eq!(count, (SETS + 2) as f64);
    assert!(after.value("strata_command_duration_seconds_sum", &set) > 0.0);
    let buckets: Vec<&Sample> = after
        .samples
        .iter()
        .filter(|s| s.name == "strata_command_duration_seconds_bucket" && s.labels["command"] == "set")
        .collect();
    assert_eq!(buckets.len(), 15, "14 bounds + +Inf");
    assert!(buckets.windows(2).all(|w| w[0].value <= w[1].value), "buckets must be cumulative");
    assert_eq!(buckets.last().map(|b| (b.labels["le"].as_str(), b.value)), Some(("+Inf", count)));
    // Commands never run are left out.
    assert!(after.get("strata_commands_total", &cmd_label("lpush")).is_none());

    let delta = |name: &str| after.value(name, &[]) - before.value(name, &[]);
    assert!(delta("strata_keyspace_hits_total") >= 10.0, "hits moved by {}", delta("strata_keyspace_hits_total"));
    assert!(delta("strata_keyspace_misses_total") >= 5.0);
    assert!(delta("strata_expired_keys_total") >= 1.0);
    assert!(delta("strata_connections_received_total") >= 2.0);
    assert!(delta("strata_net_input_bytes_total") > 2500.0, "25 SETs of 100-byte values were read");
    assert!(delta("strata_net_output_bytes_total") > 0.0);
    assert!(delta("strata_protocol_errors_total") >= 1.0);
    assert!(after.value("strata_connections", &[]) >= 1.0, "our client is connected");
    assert_eq!(after.value("strata_keys", &[("db", "0")]), SETS as f64);
    assert_eq!(after.value("strata_keys", &[("db", "1")]), 0.0);
    assert!(after.get("strata_memory_used_bytes", &[("component", "connections")]).is_some());
    // Workers fold their memory deltas into the shared counter in batches,
    // at the latest on their 100 ms tick: poll for it.
    let mut keyspace = 0.0;
    let grew = wait_for(Duration::from_secs(3), || {
        let s = Scrape::take(port);
        keyspace = s.value("strata_memory_used_bytes", &[("component", "keyspace")]);
        keyspace > (SETS * 100) as f64 && s.value("strata_memory_used_bytes", &[("component", "total")]) >= keyspace
    });
    assert!(grew, "keyspace memory {keyspace} after {SETS} SETs of 100 bytes");
    assert_eq!(after.value("strata_evicted_keys_total", &[]), 0.0);
    assert_eq!(after.value("strata_connections_rejected_total", &[]), 0.0);
}

#[test]
fn health_and_readiness() {
    let (_server, port) = start();
    let r = get(port, "/healthz");
    assert_eq!((r.status, r.body.trim()), (200, "ok"));
    let r = get(port, "/readyz");
    assert_eq!((r.status, r.body.trim()), (200, "ready"));
    assert_eq!(get(port, "/readyz?verbose=1").status, 200, "query strings are ignored");
    assert_eq!(r.header("connection"), Some("close"));
}

#[test]
fn http_errors() {
    let (mut server, port) = start();
    assert_eq!(get(port, "/").status, 404);
    assert_eq!(get(port, "/metrics/extra").status, 404);
    let r = http_raw(port, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET, HEAD"));
    let r = http_raw(port, b"HEAD /metrics HTTP/1.1\r\n\r\n");
    assert_eq!(r.status, 200);
    assert!(r.body.is_empty(), "HEAD has no body");
    assert!(r.header("content-length").and_then(|l| l.parse::<usize>().ok()).is_some_and(|l| l > 0));
    assert_eq!(http_raw(port, b"GET /metrics HTTP/2.0\r\n\r\n").status, 505);

    // Malformed requests get 400 and nothing else changes.
    for garbage in [&b"garbage\r\n\r\n"[..], b"\x00\x01\xff\xfe\r\n\r\n", b"GET\r\n\r\n", b"GET / HTTP/1.1"] {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(garbage).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        assert!(out.starts_with(b"HTTP/1.1 400 "), "{garbage:?} -> {:?}", String::from_utf8_lossy(&out));
    }
    // Headers over 8 KiB.
    let big = format!("GET /metrics HTTP/1.1\r\nX-Big: {}\r\n\r\n", "a".repeat(9000));
    assert_eq!(http_raw(port, big.as_bytes()).status, 431);
    let fits = format!("GET /healthz HTTP/1.1\r\nX-Big: {}\r\n\r\n", "a".repeat(7000));
    assert_eq!(http_raw(port, fits.as_bytes()).status, 200);
    // Connections that send nothing and vanish.
    for _ in 0..10 {
        drop(TcpStream::connect(("127.0.0.1", port)).unwrap());
    }

    assert!(server.is_running(), "bad HTTP must not kill the node");
    assert_eq!(get(port, "/healthz").status, 200);
    let mut conn = server.conn();
    conn.send(&["PING"]);
    assert_eq!(conn.read_frame(), Frame::simple("PONG"));
}

#[test]
fn slow_client_times_out_without_blocking_others() {
    let (_server, port) = start();
    let mut slow = TcpStream::connect(("127.0.0.1", port)).unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n").unwrap();
    // Others are served while the slow client dawdles.
    assert_eq!(get(port, "/healthz").status, 200);
    Scrape::take(port);
    slow.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let started = std::time::Instant::now();
    let mut out = Vec::new();
    let _ = slow.read_to_end(&mut out);
    assert!(out.starts_with(b"HTTP/1.1 408 "), "{:?}", String::from_utf8_lossy(&out));
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// A node id of the cluster tests: 40 lowercase hex characters.
fn node_id(n: u8) -> String {
    format!("{n:040x}")
}

/// A cluster-mode node with its direct and admin ports (free ones) and a
/// metrics port; returns it, the metrics port, and the direct and admin ports.
fn start_cluster_node(metrics: bool) -> (Server, u16, u16, u16) {
    let (direct, admin) = (free_port(), free_port());
    let (d, a) = (direct.to_string(), admin.to_string());
    let args = ["--cluster-enabled", "yes", "--cluster-direct-port", &d, "--cluster-port", &a];
    if metrics {
        let (server, port) = start_with(&args);
        (server, port, direct, admin)
    } else {
        (Server::strata_with(&args), 0, direct, admin)
    }
}

/// `STRATA.TOPOLOGY SET` on a node's admin port: `nodes` are (id, direct,
/// plain, admin, ranges), all on 127.0.0.1.
fn push_topology(admin: u16, epoch: u64, myid: &str, nodes: &[(&str, u16, u16, u16, &str)]) -> Frame {
    let mut c = RawConn::connect(("127.0.0.1", admin)).expect("connect to the admin port");
    let epoch = epoch.to_string();
    let mut args = vec!["STRATA.TOPOLOGY".to_string(), "SET".into(), epoch, myid.into()];
    args.extend(nodes.iter().map(|(id, d, p, a, r)| format!("{id} 127.0.0.1 - {d} {p} {r} {a}")));
    c.cmd(&args)
}

#[test]
fn cluster_families_follow_the_topology_and_the_traffic() {
    let (a, port, a_direct, a_admin) = start_cluster_node(true);
    let (b, _, b_direct, b_admin) = start_cluster_node(false);
    let (id_a, id_b) = (node_id(1), node_id(2));

    // Cluster mode without a topology yet: the families are there, at 0.
    let scrape = Scrape::take(port);
    for (family, kind) in [
        ("strata_cluster_enabled", "gauge"),
        ("strata_cluster_topology_epoch", "gauge"),
        ("strata_cluster_slots_owned", "gauge"),
        ("strata_cluster_slots_covered", "gauge"),
        ("strata_cluster_nodes", "gauge"),
        ("strata_cluster_forwarded", "counter"),
        ("strata_cluster_forward_errors", "counter"),
        ("strata_cluster_forward_duration_seconds", "histogram"),
        ("strata_cluster_moved", "counter"),
        ("strata_cluster_slot_keys", "gauge"),
    ] {
        assert!(scrape.text.contains(&format!("\n# TYPE {family} {kind}\n")), "no TYPE for {family}:\n{}", scrape.text);
        assert!(scrape.text.contains(&format!("# HELP {family} ")), "no HELP for {family}");
    }
    assert_eq!(scrape.value("strata_cluster_enabled", &[]), 1.0);
    for family in ["strata_cluster_topology_epoch", "strata_cluster_slots_owned", "strata_cluster_slots_covered"] {
        assert_eq!(scrape.value(family, &[]), 0.0, "{family} before any push");
    }
    assert!(!scrape.samples.iter().any(|s| s.name == "strata_cluster_slot_keys"), "no keys, no slots named");

    // A owns 0-8191, B 8192-16000: 383 slots have no owner.
    let partial = |a_ranges, b_ranges| {
        [(id_a.as_str(), a_direct, a.port(), a_admin, a_ranges), (id_b.as_str(), b_direct, b.port(), b_admin, b_ranges)]
    };
    let nodes = partial("0-8191", "8192-16000");
    assert_eq!(push_topology(a_admin, 3, &id_a, &nodes), Frame::ok());
    assert_eq!(push_topology(b_admin, 3, &id_b, &nodes), Frame::ok());
    let scrape = Scrape::take(port);
    assert_eq!(scrape.value("strata_cluster_topology_epoch", &[]), 3.0);
    assert_eq!(scrape.value("strata_cluster_slots_owned", &[]), 8192.0);
    assert_eq!(scrape.value("strata_cluster_slots_covered", &[]), 16001.0);
    assert_eq!(scrape.value("strata_cluster_nodes", &[]), 2.0);
    // Not whole: data commands get CLUSTERDOWN (counted as neither MOVED nor forwarded).
    let down = a.conn().cmd(&["GET", "foo"]);
    assert_eq!(down.error_code(), Some("CLUSTERDOWN"), "{down}");

    // The epoch follows a push; B now covers the rest.
    let nodes = partial("0-8191", "8192-16383");
    assert_eq!(push_topology(a_admin, 4, &id_a, &nodes), Frame::ok());
    assert_eq!(push_topology(b_admin, 4, &id_b, &nodes), Frame::ok());
    let scrape = Scrape::take(port);
    assert_eq!(scrape.value("strata_cluster_topology_epoch", &[]), 4.0);
    assert_eq!(scrape.value("strata_cluster_slots_covered", &[]), 16384.0);
    assert_eq!(scrape.value("strata_cluster_slots_owned", &[]), 8192.0);
    assert_eq!(scrape.value("strata_cluster_forwarded_total", &[]), 0.0);
    assert_eq!(scrape.value("strata_cluster_moved_total", &[]), 0.0);

    // Cluster-aware clients on the direct port: "foo" (slot 12182) is B's,
    // so A answers MOVED; "{bar}" keys (slot 5061) and "{zap}" (slot 6469)
    // are A's own.
    let mut direct = RawConn::connect(("127.0.0.1", a_direct)).expect("connect to the direct port");
    assert_eq!(direct.cmd(&["CLUSTER", "KEYSLOT", "foo"]), Frame::int(12182));
    assert_eq!(direct.cmd(&["CLUSTER", "KEYSLOT", "{bar}"]), Frame::int(5061));
    assert_eq!(direct.cmd(&["CLUSTER", "KEYSLOT", "{zap}"]), Frame::int(6469));
    let moved = direct.cmd(&["SET", "foo", "1"]);
    assert_eq!(moved.error_message(), Some(format!("MOVED 12182 127.0.0.1:{b_direct}").as_str()), "{moved}");
    assert_eq!(direct.cmd(&["GET", "foo"]).error_code(), Some("MOVED"));
    for i in 0..5 {
        direct.ok(&["SET", &format!("{{bar}}:{i}"), "v"]);
    }
    for i in 0..2 {
        direct.ok(&["SET", &format!("{{zap}}:{i}"), "v"]);
    }
    let scrape = Scrape::take(port);
    assert_eq!(scrape.value("strata_cluster_moved_total", &[]), 2.0);
    assert_eq!(scrape.value("strata_cluster_forwarded_total", &[]), 0.0, "the direct port never forwards");
    assert_eq!(scrape.value("strata_cluster_slot_keys", &[("slot", "5061")]), 5.0);
    assert_eq!(scrape.value("strata_cluster_slot_keys", &[("slot", "6469")]), 2.0);
    assert_eq!(scrape.samples.iter().filter(|s| s.name == "strata_cluster_slot_keys").count(), 2);

    // A plain client on A's plain port: B's slot is forwarded to B, which
    // holds the value afterwards.
    let mut plain = a.conn();
    plain.ok(&["SET", "foo", "forwarded"]);
    assert_eq!(plain.cmd(&["GET", "foo"]), Frame::bulk("forwarded"));
    assert_eq!(b.conn().cmd(&["GET", "foo"]), Frame::bulk("forwarded"), "B serves its own slot");
    let scrape = Scrape::take(port);
    assert_eq!(scrape.value("strata_cluster_forwarded_total", &[]), 2.0);
    assert_eq!(scrape.value("strata_cluster_forward_errors_total", &[]), 0.0);
    assert_eq!(scrape.value("strata_cluster_forward_duration_seconds_count", &[]), 2.0);
    assert_eq!(scrape.value("strata_cluster_forward_duration_seconds_bucket", &[("le", "+Inf")]), 2.0);
    assert!(scrape.value("strata_cluster_forward_duration_seconds_sum", &[]) > 0.0, "a round trip takes time");
    assert_eq!(scrape.value("strata_cluster_moved_total", &[]), 2.0, "the plain port never answers MOVED");

    // INFO: `# Cluster` as Redis's, Strata's figures in their own section,
    // from the same snapshot.
    let mut raw = a.conn();
    let cluster = info(&mut raw, Some("cluster"));
    assert_eq!(cluster.get("cluster_enabled").map(String::as_str), Some("1"));
    assert_eq!(cluster.get("cluster_current_epoch").map(String::as_str), Some("4"));
    assert!(!cluster.contains_key("cluster_slots_owned"), "Strata's figures stay out of # Cluster: {cluster:?}");
    let text = raw.cmd(&["INFO", "clusterstats"]);
    let text = String::from_utf8_lossy(text.as_bytes().expect("INFO text"));
    assert!(text.starts_with("# Clusterstats\r\ncluster_topology_epoch:4\r\n"), "{text}");
    let stats = info(&mut raw, Some("clusterstats"));
    for (field, want) in [
        ("cluster_slots_owned", "8192"),
        ("cluster_slots_covered", "16384"),
        ("cluster_nodes", "2"),
        ("cluster_forwarded", "2"),
        ("cluster_forward_errors", "0"),
        ("cluster_moved", "2"),
        ("cluster_top_slots", "5061=5,6469=2"),
    ] {
        assert_eq!(stats.get(field).map(String::as_str), Some(want), "{field} in {stats:?}");
    }
    let p99: f64 = stats["cluster_forward_p99_usec"].parse().unwrap();
    assert!(p99 > 0.0, "forward p99 {p99} µs");
    // INFO inside EXEC (every partition held) counts the slots too.
    raw.ok(&["MULTI"]);
    assert_eq!(raw.cmd(&["INFO", "clusterstats"]), Frame::simple("QUEUED"));
    let exec = raw.cmd(&["EXEC"]);
    let in_exec = exec.as_array().and_then(|r| r[0].as_bytes()).map(String::from_utf8_lossy).unwrap_or_default();
    assert!(in_exec.contains("cluster_top_slots:5061=5,6469=2\r\n"), "{exec}");
    assert!(info(&mut raw, None).contains_key("cluster_top_slots"), "a default section in cluster mode");

    // A stale push changes nothing.
    assert!(push_topology(a_admin, 2, &id_a, &nodes).is_error());
    assert_eq!(Scrape::take(port).value("strata_cluster_topology_epoch", &[]), 4.0);

    // B gone: a forwarded request fails (after 10 s of sending it again), and is counted as such.
    drop(b);
    plain.set_timeout(Some(std::time::Duration::from_secs(30)));
    let reply = plain.cmd(&["GET", "foo"]);
    assert!(reply.error_message().is_some_and(|m| m.contains("cannot reach")), "{reply}");
    let scrape = Scrape::take(port);
    assert_eq!(scrape.value("strata_cluster_forwarded_total", &[]), 3.0);
    assert_eq!(scrape.value("strata_cluster_forward_errors_total", &[]), 1.0);
}

#[test]
fn no_cluster_families_outside_cluster_mode() {
    let (server, port) = start();
    let scrape = Scrape::take(port);
    assert!(!scrape.text.contains("strata_cluster_"), "{}", scrape.text);
    let mut raw = server.conn();
    assert_eq!(info(&mut raw, Some("cluster")).get("cluster_enabled").map(String::as_str), Some("0"));
    let all = raw.cmd(&["INFO", "everything"]);
    let all = String::from_utf8_lossy(all.as_bytes().expect("INFO text"));
    assert!(all.contains("# Cluster\r\n") && !all.contains("# Clusterstats"), "{all}");
}
