//! Resources a flood must not take from the node: the metrics and probe
//! port, file descriptors, the listen backlog, memory per connection, and
//! the ports themselves at start-up (a node that cannot listen exits).

mod support;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use support::*;

/// A strata node with its metrics endpoint on a free port.
fn start_with_metrics(extra: &[&str]) -> (Server, u16) {
    for _ in 0..5 {
        let port = free_port();
        let mut args = vec!["--metrics-port".to_string(), port.to_string()];
        args.extend(extra.iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        if let Ok(server) = catch_unwind(AssertUnwindSafe(|| Server::strata_with(&args))) {
            return (server, port);
        }
    }
    panic!("could not start strata with a metrics port");
}

/// GETs `path` from `ip:port`; the status code (0 if no response came).
fn http_get(ip: [u8; 4], port: u16, path: &str) -> u16 {
    let addr = SocketAddr::from((ip, port));
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else { return 0 };
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    if s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).is_err() {
        return 0;
    }
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    text.strip_prefix("HTTP/1.1 ").and_then(|r| r.get(..3)).and_then(|c| c.parse().ok()).unwrap_or(0)
}

#[test]
fn probes_and_metrics_answer_through_idle_and_trickling_connections() {
    let (mut server, port) = start_with_metrics(&[]);
    let stop = Arc::new(AtomicBool::new(false));
    // 500 idle connections, re-opened as the node closes them, plus
    // slowloris clients trickling a request one byte at a time.
    let flood = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut idle: Vec<TcpStream> = Vec::new();
            let mut slow: Vec<(TcpStream, usize)> = Vec::new();
            const REQUEST: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: slowloris\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
            while !stop.load(Ordering::Relaxed) {
                idle.retain_mut(|s| {
                    let mut b = [0u8; 1];
                    s.set_nonblocking(true).unwrap();
                    // Still open if nothing (not even EOF) is readable.
                    matches!(s.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
                });
                while idle.len() < 500 {
                    match TcpStream::connect(("127.0.0.1", port)) {
                        Ok(s) => idle.push(s),
                        Err(_) => break,
                    }
                }
                slow.retain_mut(|(s, sent)| *sent < REQUEST.len() && s.write_all(&REQUEST[*sent..*sent + 1]).is_ok());
                for (_, sent) in &mut slow {
                    *sent += 1;
                }
                while slow.len() < 20 {
                    match TcpStream::connect(("127.0.0.1", port)) {
                        Ok(s) => slow.push((s, 0)),
                        Err(_) => break,
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    for round in 0..15 {
        for path in ["/healthz", "/readyz", "/metrics"] {
            let started = Instant::now();
            let status = http_get([127, 0, 0, 1], port, path);
            let took = started.elapsed();
            assert_eq!(status, 200, "round {round}: {path} under a flood of idle connections");
            assert!(took < Duration::from_secs(1), "round {round}: {path} took {took:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    flood.join().unwrap();
    assert!(server.is_running());
    assert_eq!(server.conn().cmd(&["PING"]), Frame::simple("PONG"));
}

#[test]
fn metrics_endpoint_binds_where_the_redis_port_does_unless_told() {
    // 127.0.0.2 is loopback too, but reaches only sockets bound to it or to 0.0.0.0.
    let (server, port) = start_with_metrics(&[]);
    assert_eq!(server.conn().cmd(&["CONFIG", "GET", "metrics-bind"]), Frame::bulks(&["metrics-bind", "127.0.0.1"]));
    assert_eq!(http_get([127, 0, 0, 1], port, "/healthz"), 200);
    assert_eq!(http_get([127, 0, 0, 2], port, "/healthz"), 0, "not exposed beyond the Redis bind address");
    drop(server);

    let (server, port) = start_with_metrics(&["--bind", "127.0.0.2 127.0.0.1"]);
    assert_eq!(server.conn().cmd(&["CONFIG", "GET", "metrics-bind"]), Frame::bulks(&["metrics-bind", "127.0.0.2"]));
    assert_eq!(http_get([127, 0, 0, 2], port, "/healthz"), 200);
    assert_eq!(http_get([127, 0, 0, 1], port, "/healthz"), 0);
    drop(server);

    let (_server, port) = start_with_metrics(&["--metrics-bind", "0.0.0.0"]);
    assert_eq!(http_get([127, 0, 0, 2], port, "/healthz"), 200, "an explicit metrics-bind wins");
}

/// A server run under a wrapper (`prlimit ...`), killed on drop.
struct Wrapped {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Wrapped {
    fn start(wrapper: &[&str], program: &str, args: &[&str]) -> Wrapped {
        let port = free_port();
        let log = std::env::temp_dir().join(format!("strata-res-{}-{port}.log", std::process::id()));
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(wrapper[0])
            .args(&wrapper[1..])
            .arg(program)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("spawning the wrapped server");
        let mut w = Wrapped { child, port, log };
        let ready = wait_for(START_TIMEOUT, || {
            RawConn::connect(("127.0.0.1", port)).is_ok_and(|mut c| c.try_send(&["PING"]).is_ok())
        });
        assert!(ready && w.child.try_wait().unwrap().is_none(), "server did not start:\n{}", w.logs());
        w
    }

    fn conn(&self) -> RawConn {
        RawConn::connect(("127.0.0.1", self.port)).unwrap()
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Wrapped {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

fn config_int(conn: &mut RawConn, name: &str) -> usize {
    let reply = conn.cmd(&["CONFIG", "GET", name]);
    reply.as_array().and_then(|a| a.get(1)).and_then(Frame::as_str).and_then(|v| v.parse().ok()).unwrap()
}

const STRATA_ARGS: &[&str] = &["--threads", "2", "--adaptive-threads", "no", "--metrics-port", "0"];
const REDIS_ARGS: &[&str] = &["--save", "", "--appendonly", "no", "--daemonize", "no"];

#[test]
fn a_low_open_files_limit_lowers_maxclients_and_every_client_gets_an_answer() {
    // Redis under the same limit: maxclients = limit - 32, with one warning.
    let redis = Wrapped::start(&["prlimit", "--nofile=256:256"], "redis-server", REDIS_ARGS);
    assert_eq!(config_int(&mut redis.conn(), "maxclients"), 224);
    drop(redis);

    let node = Wrapped::start(&["prlimit", "--nofile=256:256"], STRATA_BIN, STRATA_ARGS);
    let mut control = node.conn();
    let maxclients = config_int(&mut control, "maxclients");
    assert!((64..224).contains(&maxclients), "maxclients {maxclients} must leave room for the node's own descriptors");
    assert_eq!(info_field(&mut control, "maxclients").as_deref(), Some(maxclients.to_string().as_str()));
    assert_eq!(node.logs().matches("maxclients reduced").count(), 1, "{}", node.logs());

    // A burst of 400: each either works or is told why, none is left hanging.
    let mut conns: Vec<RawConn> = (0..400).map(|_| node.conn()).collect();
    for c in &mut conns {
        c.set_timeout(Some(Duration::from_secs(5)));
        let _ = c.try_send(&["PING"]);
    }
    let (mut served, mut refused) = (0, 0);
    for (i, c) in conns.iter_mut().enumerate() {
        match c.try_read_frame() {
            Ok(Some(f)) if f == Frame::simple("PONG") => served += 1,
            Ok(Some(f)) if f.error_message() == Some("ERR max number of clients reached") => refused += 1,
            other => panic!("connection {i} got {other:?} ({served} served, {refused} refused)"),
        }
    }
    // The control connection is the other one.
    assert_eq!(served, maxclients - 1, "{served} served of maxclients {maxclients}");
    assert_eq!(served + refused, 400);
    assert_eq!(control.cmd(&["PING"]), Frame::simple("PONG"), "the node stays responsive");
    drop(conns);
    assert!(wait_for(Duration::from_secs(5), || node.conn().cmd(&["PING"]) == Frame::simple("PONG")));
    let logs = node.logs();
    assert!(logs.lines().count() < 20, "the log stays small:\n{logs}");
}

#[test]
fn config_set_maxclients_beyond_the_open_files_limit_is_refused_as_redis_does() {
    let expect = "ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating system is not able \
                  to handle the specified number of clients, try with ";
    for (program, args) in [("redis-server", REDIS_ARGS), (STRATA_BIN, STRATA_ARGS)] {
        let server = Wrapped::start(&["prlimit", "--nofile=256:256"], program, args);
        let mut c = server.conn();
        let before = config_int(&mut c, "maxclients");
        let reply = c.cmd(&["CONFIG", "SET", "maxclients", "100000"]);
        let msg = reply.error_message().unwrap_or_default().to_owned();
        assert!(msg.starts_with(expect), "{program}: {reply:?}");
        assert_eq!(msg[expect.len()..].parse::<usize>().ok(), Some(before), "{program}: {msg}");
        assert_eq!(config_int(&mut c, "maxclients"), before, "{program}: maxclients changed");
        // Lowering it, or staying within the limit, is accepted.
        assert_eq!(c.cmd(&["CONFIG", "SET", "maxclients", "50"]), Frame::simple("OK"), "{program}");
        assert_eq!(c.cmd(&["CONFIG", "SET", "maxclients", &before.to_string()]), Frame::simple("OK"), "{program}");
    }
}

#[test]
fn the_open_files_limit_is_raised_for_maxclients_when_the_hard_limit_allows() {
    let node = Wrapped::start(&["prlimit", "--nofile=256:20000"], STRATA_BIN, STRATA_ARGS);
    assert_eq!(config_int(&mut node.conn(), "maxclients"), 10000);
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", node.child.id())).unwrap();
    let soft: u64 = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!((10_032..=20_000).contains(&soft), "soft limit {soft}\n{limits}");
    assert!(!node.logs().contains("maxclients reduced"));
}

#[test]
fn out_of_descriptors_the_node_backs_off_logs_little_and_catches_up() {
    let node = Wrapped::start(&["prlimit", "--nofile=1024:1024"], STRATA_BIN, STRATA_ARGS);
    let pid = node.child.id();
    let mut control = node.conn();
    // Lower the limit under the running node: past 20 more descriptors,
    // accepts fail with EMFILE.
    let open = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count();
    let limit = format!("--nofile={0}:{0}", open + 20);
    assert!(Command::new("prlimit").args(["--pid", &pid.to_string(), &limit]).status().unwrap().success());
    let mut conns: Vec<TcpStream> = (0..60).map(|_| TcpStream::connect(("127.0.0.1", node.port)).unwrap()).collect();
    for c in &mut conns {
        c.write_all(b"PING\r\n").unwrap();
    }
    std::thread::sleep(Duration::from_secs(3));
    let logs = node.logs();
    let failures = logs.matches("accept failed").count();
    assert!((1..=5).contains(&failures), "{failures} accept failures logged in 3 s:\n{logs}");
    let answered = |c: &mut TcpStream, wait: Duration| {
        c.set_read_timeout(Some(wait)).unwrap();
        let mut pong = [0u8; 7];
        c.read_exact(&mut pong).is_ok() && &pong == b"+PONG\r\n"
    };
    let (mut served, mut waiting) = (Vec::new(), Vec::new());
    for mut c in conns {
        if answered(&mut c, Duration::from_millis(50)) { served.push(c) } else { waiting.push(c) }
    }
    assert!(!served.is_empty() && !waiting.is_empty(), "{} served, {} waiting", served.len(), waiting.len());
    assert_eq!(control.cmd(&["PING"]), Frame::simple("PONG"), "the node stays responsive");
    // Once descriptors free up, the queued clients are served.
    drop(served);
    for (i, mut c) in waiting.into_iter().enumerate() {
        assert!(answered(&mut c, Duration::from_secs(5)), "queued connection {i} was never served");
    }
}

/// Opens connections to `port` one by one, each given 300 ms, while the
/// server does not accept: how many the kernel queued for it.
fn queued_while_stopped(pid: u32, port: u16, tries: usize) -> (usize, Vec<TcpStream>) {
    let signal =
        |sig: &str| assert!(Command::new("kill").args(["-s", sig, &pid.to_string()]).status().unwrap().success());
    signal("STOP");
    let mut conns = Vec::new();
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    while conns.len() < tries {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
            Ok(s) => conns.push(s),
            Err(_) => break,
        }
    }
    signal("CONT");
    (conns.len(), conns)
}

#[test]
fn tcp_backlog_queues_a_connect_storm_as_redis_does() {
    let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn").unwrap().trim().parse().unwrap();
    let mut redis = Server::redis();
    let mut strata = Server::strata();
    for server in [&mut redis, &mut strata] {
        assert_eq!(config_int(&mut server.conn(), "tcp-backlog"), 511, "{}", server.name());
        let (queued, conns) = queued_while_stopped(server.pid(), server.port(), 400);
        assert!(queued >= 400.min(somaxconn), "{}: only {queued} connects queued", server.name());
        // Once it runs again, every queued client is served.
        for s in conns {
            let mut c = s;
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            c.write_all(b"PING\r\n").unwrap();
            let mut buf = [0u8; 7];
            c.read_exact(&mut buf).unwrap();
            assert_eq!(&buf, b"+PONG\r\n");
        }
    }
    // The parameter is honoured: the kernel queues backlog + 1.
    let strata = Server::strata_with(&["--tcp-backlog", "64"]);
    let (queued, _) = queued_while_stopped(strata.pid(), strata.port(), 400);
    assert!((60..=70).contains(&queued), "{queued} queued with tcp-backlog 64");
}

/// Runs the node until it exits (or `timeout`); its status and output.
fn run_to_exit(mut cmd: Command, timeout: Duration) -> (Option<ExitStatus>, String) {
    let out = std::env::temp_dir().join(format!("strata-res-exit-{}-{}.log", std::process::id(), free_port()));
    let file = std::fs::File::create(&out).unwrap();
    let mut child =
        cmd.stdin(Stdio::null()).stdout(file.try_clone().unwrap()).stderr(file).spawn().expect("spawning the server");
    let mut status = None;
    wait_for(timeout, || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let _ = std::fs::remove_file(&out);
    (status, text)
}

fn strata_cmd(args: &[&str]) -> Command {
    let mut cmd = Command::new(STRATA_BIN);
    cmd.args(["--threads", "2"]).args(args);
    cmd
}

fn assert_exits_with(what: &str, (status, out): (Option<ExitStatus>, String), message: &str) {
    let status = status.unwrap_or_else(|| panic!("{what}: still running after 5 s\n{out}"));
    assert!(!status.success(), "{what}: exited with {status}\n{out}");
    assert!(out.contains(message), "{what}: no {message:?} in\n{out}");
}

#[test]
fn a_taken_port_metrics_port_or_unix_socket_ends_the_process_at_once() {
    let taken = TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let limit = Duration::from_secs(5);

    let mut redis = Command::new("redis-server");
    redis.args(["--port", &port, "--bind", "127.0.0.1"]).args(REDIS_ARGS);
    assert_exits_with("redis, port taken", run_to_exit(redis, limit), "Address already in use");

    let strata = strata_cmd(&["--bind", "127.0.0.1", "--port", &port, "--metrics-port", "0"]);
    let (status, out) = run_to_exit(strata, limit);
    assert!(out.contains("could not create server TCP listening socket 127.0.0.1:"), "{out}");
    assert_exits_with("strata, port taken", (status, out), "Address already in use");

    let free = free_port().to_string();
    let strata = strata_cmd(&["--bind", "127.0.0.1", "--port", &free, "--metrics-port", &port]);
    assert_exits_with("strata, metrics port taken", run_to_exit(strata, limit), "Address already in use");

    let first = Server::strata_with(&["--port", "0", "--unixsocket", "{dir}/node.sock"]);
    let path = first.unixsocket().unwrap().to_str().unwrap().to_string();
    let strata = strata_cmd(&["--port", "0", "--metrics-port", "0", "--unixsocket", &path]);
    assert_exits_with("strata, unix socket taken", run_to_exit(strata, limit), "Address already in use");
    assert_eq!(first.conn_unix().cmd(&["PING"]), Frame::simple("PONG"), "the first node keeps its socket");

    // A socket file left by a node that is gone is no obstacle.
    drop(first);
    let dir = std::env::temp_dir().join(format!("strata-res-stale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let stale = dir.join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(Path::new(&stale).exists());
    let node = Server::strata_with(&["--port", "0", "--unixsocket", stale.to_str().unwrap()]);
    assert_eq!(node.conn_unix().cmd(&["PING"]), Frame::simple("PONG"));
    drop(node);
    let _ = std::fs::remove_dir_all(&dir);
}

/// RSS per connection of `n` connections that each sent one PING and went
/// idle, and the RSS above the baseline still held once they closed.
fn idle_connection_cost(server: &Server, n: usize) -> (f64, f64) {
    let pid = server.pid();
    let mut warm = server.conn();
    warm.cmd(&["PING"]);
    std::thread::sleep(Duration::from_millis(300));
    let before = rss(pid);
    // Plain sockets: a RawConn holds two descriptors.
    let mut conns: Vec<TcpStream> = (0..n).map(|_| TcpStream::connect(server.addr()).unwrap()).collect();
    for c in &mut conns {
        c.write_all(b"PING\r\n").unwrap();
    }
    for c in &mut conns {
        let mut pong = [0u8; 7];
        c.read_exact(&mut pong).unwrap();
        assert_eq!(&pong, b"+PONG\r\n");
    }
    std::thread::sleep(Duration::from_millis(500));
    let open = rss(pid);
    drop(conns);
    assert!(wait_for(Duration::from_secs(10), || info_field(&mut warm, "connected_clients").as_deref() == Some("1")));
    std::thread::sleep(Duration::from_millis(2500));
    let after = rss(pid);
    (open.saturating_sub(before) as f64 / n as f64, after.saturating_sub(before) as f64)
}

#[test]
fn an_idle_connection_costs_less_memory_than_in_redis() {
    let redis = Server::redis();
    let strata = Server::strata();
    let (redis_per, redis_kept) = idle_connection_cost(&redis, 2000);
    let (strata_per, strata_kept) = idle_connection_cost(&strata, 2000);
    eprintln!("RSS per idle connection: strata {strata_per:.0} B, redis {redis_per:.0} B");
    assert!(strata_per < redis_per, "strata {strata_per:.0} B per idle connection, redis {redis_per:.0} B");
    // And most of it goes back to the OS once they close.
    eprintln!("RSS kept after closing them: strata {strata_kept:.0} B, redis {redis_kept:.0} B");
    assert!(strata_kept < strata_per * 2000.0 / 2.0, "strata kept {strata_kept:.0} B of {strata_per:.0} B x 2000");
}

/// The figures for the record (10,000 idle connections, 500 simultaneous
/// connects, both servers): `cargo test --test robustness_resources -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check"]
fn measure_connection_costs() {
    let more = ["--maxclients", "12000"];
    for server in [Server::redis_with(&more), Server::strata_with(&more)] {
        let (per, kept) = idle_connection_cost(&server, 10_000);
        eprintln!("{}: {per:.0} B RSS per idle connection; {:.1} MB kept after they closed", server.name(), kept / 1e6);

        let barrier = Arc::new(std::sync::Barrier::new(501));
        let addr = server.addr();
        let threads: Vec<_> = (0..500)
            .map(|_| {
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    let mut c = RawConn::connect(addr).unwrap();
                    assert_eq!(c.cmd(&["PING"]), Frame::simple("PONG"));
                    c
                })
            })
            .collect();
        barrier.wait();
        let started = Instant::now();
        let conns: Vec<RawConn> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        eprintln!("{}: 500 simultaneous connects and PINGs in {:?}", server.name(), started.elapsed());
        drop(conns);
    }
}
