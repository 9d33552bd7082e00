//! Shared support for the node's integration tests.
//!
//! * [`Server`]: a `strata-node` or reference `redis-server` child process,
//!   killed (and its temp dir removed) on drop.
//! * [`RawConn`] / [`Frame`]: a std-only RESP2/RESP3 client (see `resp.rs`).
//! * [`Diff`]: differential runner sending the same commands to strata and to
//!   redis and panicking with a readable report on the first mismatch.
//! * [`cluster`]: three-node Redis Clusters and Strata clusters (cluster tests).
//! * [`crash`]: the crash tests' harness (writers, their log of acknowledged
//!   writes, the check after a restart).
//! * [`Rng`]: the one seeded pseudo-random generator.
//! * Small helpers: [`redis_cli`], [`info_field`], [`free_port`], [`wait_for`].
//!
//! Use it from a test file with `mod support;` and `use support::*;`.
#![allow(dead_code)]

pub mod cluster;
pub mod crash;
mod resp;
mod rng;

// Not every test file uses every re-export.
#[allow(unused_imports)]
pub use resp::{DEFAULT_TIMEOUT, Frame, RawConn, display_command, encode_command, parse_bytes, read_frame_from};
#[allow(unused_imports)]
pub use rng::Rng;

use std::collections::{HashMap, VecDeque};
use std::fs::{self, File};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a server may take to answer its first PING.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Path of the node binary built by cargo for integration tests.
pub const STRATA_BIN: &str = env!("CARGO_BIN_EXE_strata-node");

const INSTALL_HINT: &str = "redis-server was not found in PATH; the differential tests need it \
     (install it with `apt-get install -y redis-server redis-tools`; CI installs it)";

/// Which program a [`Server`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    Strata,
    Redis,
}

impl ServerKind {
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Strata => "strata",
            ServerKind::Redis => "redis",
        }
    }
}

/// A temporary directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(prefix: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let path = std::env::temp_dir().join(format!("{prefix}-{}-{n}-{nanos:x}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap_or_else(|e| panic!("creating temp dir {}: {e}", path.display()));
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Returns a currently free TCP port on 127.0.0.1 (bind to port 0, release).
/// Another process may grab it before use; [`Server`] retries on collision.
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("binding an ephemeral port")
}

/// Polls `cond` every 10 ms until it returns true or `timeout` elapses.
pub fn wait_for(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends raw bytes on a fresh TCP connection to `addr` and returns every
/// byte answered until the peer closed (`true`) or `timeout` passed with
/// nothing more (`false`).
pub fn exchange_raw(addr: SocketAddr, bytes: &[u8], timeout: Duration) -> (Vec<u8>, bool) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
    s.set_read_timeout(Some(timeout)).unwrap();
    // A server that closes early may reset the rest of a big write: what it
    // answered before is still read below.
    let _ = s.write_all(bytes);
    let mut out = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let closed = loop {
        match s.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
            Err(_) => break false,
        }
    };
    (out, closed)
}

fn has_flag(args: &[String], flag: &str) -> bool {
    flag_value(args, flag).is_some() || args.iter().any(|a| a == flag)
}

/// Value of `--flag value` or `--flag=value` (last occurrence wins).
fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let mut found = None;
    for (i, a) in args.iter().enumerate() {
        if a == flag {
            found = args.get(i + 1).map(String::as_str);
        } else if let Some(v) = a.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
            found = Some(v);
        }
    }
    found
}

/// A running server process, killed on drop.
/// A data directory that outlives one server (a restart reads it back),
/// removed on drop.
pub struct DataDir(pub PathBuf);

impl DataDir {
    pub fn new(name: &str) -> DataDir {
        let p = std::env::temp_dir().join(format!("strata-data-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        DataDir(p)
    }

    pub fn path(&self) -> &str {
        self.0.to_str().expect("temp dir is not UTF-8")
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub struct Server {
    kind: ServerKind,
    child: Child,
    port: u16,
    unixsocket: Option<PathBuf>,
    command_line: String,
    // Declared last: removed after the child has been killed.
    dir: TempDir,
}

impl Server {
    /// Starts `strata-node` with default test arguments.
    pub fn strata() -> Server {
        Self::strata_with(&[])
    }

    /// Starts `strata-node` with extra arguments. Unless given, adds
    /// `--bind 127.0.0.1 --port <free> --threads 2 --adaptive-threads no
    /// --metrics-port 0 --enable-debug-command yes`.
    /// The literal `{dir}` in any argument is replaced by the server's temp
    /// dir (its working directory), e.g. `--unixsocket {dir}/s.sock`.
    pub fn strata_with(args: &[&str]) -> Server {
        Self::start(ServerKind::Strata, args, &[], &[])
    }

    /// `strata_with`, with environment variables set for the process
    /// (`STRATA_*` settings).
    pub fn strata_with_env(args: &[&str], env: &[(&str, &str)]) -> Server {
        Self::start(ServerKind::Strata, args, env, &[])
    }

    /// `strata_with`, run through `wrapper` (a program and its arguments
    /// that executes the rest of its command line, e.g. one that installs a
    /// seccomp filter first).
    pub fn strata_under(wrapper: &[&str], args: &[&str]) -> Server {
        Self::start(ServerKind::Strata, args, &[], wrapper)
    }

    /// Starts the reference `redis-server` (no persistence).
    pub fn redis() -> Server {
        Self::redis_with(&[])
    }

    /// Starts `redis-server` with extra arguments (appended last, so they
    /// override the defaults; `{dir}` is substituted as for strata).
    pub fn redis_with(args: &[&str]) -> Server {
        Self::start(ServerKind::Redis, args, &[], &[])
    }

    fn start(kind: ServerKind, extra: &[&str], env: &[(&str, &str)], wrapper: &[&str]) -> Server {
        let mut dir = TempDir::new(&format!("strata-test-{}", kind.name()));
        let dir_path = dir.0.clone();
        let dir_str = dir_path.to_str().expect("temp dir is not UTF-8");
        let extra: Vec<String> = extra.iter().map(|a| a.replace("{dir}", dir_str)).collect();
        let fixed_port =
            flag_value(&extra, "--port").map(|p| p.parse::<u16>().unwrap_or_else(|_| panic!("bad --port {p:?}")));
        let unixsocket = flag_value(&extra, "--unixsocket").map(PathBuf::from);

        const ATTEMPTS: usize = 5;
        for attempt in 1..=ATTEMPTS {
            let port = fixed_port.unwrap_or_else(free_port);
            let mut cmd = match kind {
                ServerKind::Strata => {
                    let mut cmd = match wrapper.split_first() {
                        Some((program, args)) => {
                            let mut cmd = Command::new(program);
                            cmd.args(args).arg(STRATA_BIN);
                            cmd
                        }
                        None => Command::new(STRATA_BIN),
                    };
                    for (flag, default) in [
                        ("--bind", "127.0.0.1".to_string()),
                        ("--port", port.to_string()),
                        ("--threads", "2".to_string()),
                        // Connections on both workers, so every test crosses threads.
                        ("--adaptive-threads", "no".to_string()),
                        ("--metrics-port", "0".to_string()),
                        // Tests drive the node with DEBUG (ACTIVE-THREADS, SLEEP, ...);
                        // those about the refusal pass `--enable-debug-command no`.
                        ("--enable-debug-command", "yes".to_string()),
                    ] {
                        if !has_flag(&extra, flag) {
                            cmd.arg(flag).arg(default);
                        }
                    }
                    cmd
                }
                ServerKind::Redis => {
                    let bin = std::env::var("REDIS_SERVER").unwrap_or("redis-server".into());
                    let mut cmd = Command::new(bin);
                    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                        .args(["--dir", dir_str]);
                    cmd
                }
            };
            cmd.args(&extra).envs(env.iter().copied()).current_dir(&dir_path).stdin(Stdio::null());
            let log = |name: &str| {
                File::create(dir_path.join(name)).unwrap_or_else(|e| panic!("creating {name} in {dir_str}: {e}"))
            };
            cmd.stdout(log("stdout.log")).stderr(log("stderr.log"));
            let command_line = format!("{cmd:?}");

            let child = match cmd.spawn() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => match kind {
                    ServerKind::Redis => panic!("{INSTALL_HINT}"),
                    ServerKind::Strata => panic!("strata-node binary missing: {STRATA_BIN}"),
                },
                Err(e) => panic!("spawning {command_line}: {e}"),
            };
            let mut server = Server { kind, child, port, unixsocket: unixsocket.clone(), command_line, dir };
            match server.wait_ready() {
                Ok(()) => return server,
                Err(reason) => {
                    server.kill();
                    let logs = server.logs();
                    let in_use = logs.to_lowercase().contains("address already in use") || logs.contains("AddrInUse");
                    if in_use && fixed_port.is_none() && attempt < ATTEMPTS {
                        // Someone grabbed our port; try another one.
                        dir = server.take_dir();
                        continue;
                    }
                    panic!("{} failed to start: {reason}\ncommand: {}\n{logs}", kind.name(), server.command_line);
                }
            }
        }
        unreachable!("start loop always returns or panics")
    }

    /// Moves the temp dir out (so it survives this `Server` being dropped).
    fn take_dir(mut self) -> TempDir {
        std::mem::replace(&mut self.dir, TempDir(PathBuf::new()))
    }

    /// Waits until the server answers PING (any reply, e.g. NOAUTH, counts).
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("process exited early with {status}"));
            }
            let probe = if self.port != 0 {
                RawConn::connect_timeout(self.addr(), Duration::from_millis(200))
            } else if let Some(path) = &self.unixsocket {
                RawConn::connect_unix(path)
            } else {
                // No listener we can probe: settle for "still alive after a bit".
                std::thread::sleep(Duration::from_millis(200));
                return match self.child.try_wait() {
                    Ok(None) => Ok(()),
                    other => Err(format!("process exited early: {other:?}")),
                };
            };
            if let Ok(mut conn) = probe {
                conn.set_timeout(Some(Duration::from_secs(1)));
                if conn.try_send(&["PING"]).is_ok() && matches!(conn.try_read_frame(), Ok(Some(_))) {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(format!("no reply to PING within {START_TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn kind(&self) -> ServerKind {
        self.kind
    }

    /// "strata" or "redis".
    pub fn name(&self) -> &'static str {
        self.kind.name()
    }

    /// TCP port (0 if TCP was disabled with `--port 0`).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// `redis://127.0.0.1:port/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A `redis` crate client for this server.
    pub fn redis_client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("valid redis URL")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's temp dir (also its working directory).
    pub fn dir(&self) -> &Path {
        &self.dir.0
    }

    /// The `--unixsocket` path, if one was given.
    pub fn unixsocket(&self) -> Option<&Path> {
        self.unixsocket.as_deref()
    }

    /// The command line the server was started with.
    pub fn command_line(&self) -> &str {
        &self.command_line
    }

    /// A new raw connection: TCP, or the unix socket if TCP is disabled.
    pub fn conn(&self) -> RawConn {
        if self.port != 0 {
            RawConn::connect(self.addr())
                .unwrap_or_else(|e| panic!("connecting to {} at {}: {e}", self.name(), self.addr()))
        } else {
            self.conn_unix()
        }
    }

    /// A new raw connection over the unix socket.
    pub fn conn_unix(&self) -> RawConn {
        let path =
            self.unixsocket.as_ref().unwrap_or_else(|| panic!("{} was started without --unixsocket", self.name()));
        RawConn::connect_unix(path).unwrap_or_else(|e| panic!("connecting to {}: {e}", path.display()))
    }

    /// Captured stdout and stderr of the process so far.
    pub fn logs(&self) -> String {
        let read = |name: &str| fs::read_to_string(self.dir.0.join(name)).unwrap_or_default();
        format!("--- stdout ---\n{}--- stderr ---\n{}", read("stdout.log"), read("stderr.log"))
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends `signal` (e.g. "TERM", "INT") to the process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill").args(["-s", signal, &self.pid().to_string()]).status().expect("running kill");
        assert!(status.success(), "kill -s {signal} {} failed", self.pid());
    }

    /// Sends SIGTERM and waits up to `timeout` for the process to exit.
    /// Returns its exit status, or `None` if it is still running.
    pub fn terminate(&mut self, timeout: Duration) -> Option<ExitStatus> {
        self.signal("TERM");
        let mut status = None;
        wait_for(timeout, || {
            status = self.child.try_wait().ok().flatten();
            status.is_some()
        });
        status
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs `redis-cli -p PORT args...`; returns (stdout, exit status).
pub fn redis_cli(port: u16, args: &[&str]) -> (String, ExitStatus) {
    let out = Command::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| match e.kind() {
            std::io::ErrorKind::NotFound => panic!("redis-cli not found; {INSTALL_HINT}"),
            _ => panic!("running redis-cli: {e}"),
        });
    (String::from_utf8_lossy(&out.stdout).into_owned(), out.status)
}

/// The `/metrics` text of a node started with `--metrics-port <port>`.
pub fn scrape(port: u16) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect to metrics port");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

/// The value of one series (name and labels, exactly) in a scrape.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Parses the reply of `INFO [section]` into `field -> value`.
pub fn info(conn: &mut RawConn, section: Option<&str>) -> HashMap<String, String> {
    let mut args = vec!["INFO"];
    args.extend(section);
    let reply = conn.cmd(&args);
    let text = reply.as_bytes().unwrap_or_else(|| panic!("{}: INFO returned {reply}", conn.peer()));
    String::from_utf8_lossy(text)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim_end().to_string()))
        .collect()
}

/// Value of one INFO field (looked up in `INFO`, then in `INFO all`).
pub fn info_field(conn: &mut RawConn, field: &str) -> Option<String> {
    info(conn, None).remove(field).or_else(|| info(conn, Some("all")).remove(field))
}

/// How a [`Diff`] compares the two replies to a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Identical frames.
    Exact,
    /// Identical after [`Frame::sorted`] (SMEMBERS, KEYS, ...).
    Unordered,
    /// Identical after [`Frame::sorted_pairs`] (RESP2 HGETALL, CONFIG GET).
    UnorderedPairs,
    /// Same frame kind only (random or time-dependent results).
    TypeOnly,
    /// Both errors with identical messages.
    Error,
    /// Both errors whose first word ("ERR", "WRONGTYPE", ...) matches.
    ErrorPrefix,
    /// Not compared (setup steps).
    Ignore,
}

impl Mode {
    /// `Ok` if the replies agree under this mode, else a short reason.
    pub fn compare(self, a: &Frame, b: &Frame) -> Result<(), String> {
        let both_errors = || {
            if a.is_error() && b.is_error() { Ok(()) } else { Err("expected both replies to be errors".to_string()) }
        };
        let agree = match self {
            Mode::Exact => a == b,
            Mode::Unordered => a.sorted() == b.sorted(),
            Mode::UnorderedPairs => a.sorted_pairs() == b.sorted_pairs(),
            Mode::TypeOnly => a.kind() == b.kind(),
            Mode::Error => {
                both_errors()?;
                a == b
            }
            Mode::ErrorPrefix => {
                both_errors()?;
                a.error_code() == b.error_code()
            }
            Mode::Ignore => true,
        };
        if agree {
            Ok(())
        } else {
            Err(match self {
                Mode::Unordered => "replies differ even after sorting".into(),
                Mode::UnorderedPairs => "replies differ even after sorting pairs".into(),
                Mode::TypeOnly => format!("reply kinds differ ({} vs {})", a.kind(), b.kind()),
                Mode::ErrorPrefix => "error codes differ".into(),
                _ => "replies differ".into(),
            })
        }
    }
}

/// One scripted step for [`diff`] / [`Diff::run_cases`].
#[derive(Debug, Clone)]
pub struct Case {
    pub mode: Mode,
    pub args: Vec<Vec<u8>>,
}

impl Case {
    pub fn new<A: AsRef<[u8]>>(mode: Mode, args: &[A]) -> Case {
        Case { mode, args: args.iter().map(|a| a.as_ref().to_vec()).collect() }
    }
    pub fn exact<A: AsRef<[u8]>>(args: &[A]) -> Case {
        Case::new(Mode::Exact, args)
    }
    pub fn unordered<A: AsRef<[u8]>>(args: &[A]) -> Case {
        Case::new(Mode::Unordered, args)
    }
    pub fn unordered_pairs<A: AsRef<[u8]>>(args: &[A]) -> Case {
        Case::new(Mode::UnorderedPairs, args)
    }
    pub fn type_only<A: AsRef<[u8]>>(args: &[A]) -> Case {
        Case::new(Mode::TypeOnly, args)
    }
    pub fn err<A: AsRef<[u8]>>(args: &[A]) -> Case {
        Case::new(Mode::Error, args)
    }
    pub fn err_prefix<A: AsRef<[u8]>>(args: &[A]) -> Case {
        Case::new(Mode::ErrorPrefix, args)
    }
    pub fn both<A: AsRef<[u8]>>(args: &[A]) -> Case {
        Case::new(Mode::Ignore, args)
    }
}

/// Runs `cases` in order against a fresh strata and a fresh redis (RESP2).
pub fn diff(cases: &[Case]) {
    let mut d = Diff::new();
    d.run_cases(cases);
    d.finish();
}

/// Like [`diff`], but both connections first switch to RESP3 (`HELLO 3`).
pub fn diff_resp3(cases: &[Case]) {
    let mut d = Diff::new_resp3();
    d.run_cases(cases);
    d.finish();
}

/// One side of a [`Diff`].
struct Side {
    label: String,
    conn: RawConn,
    server: Option<Server>,
}

/// Differential runner: every step runs immediately on both sides (strata =
/// system under test, redis = reference) over one connection each, so state
/// accumulates; the first disagreement panics with a report showing the
/// step, the command, both replies and the preceding commands.
///
/// ```ignore
/// let mut d = Diff::new();
/// d.exact(&["SET", "k", "v"]);
/// d.unordered(&["SMEMBERS", "s"]);
/// d.err(&["INCR", "k"]);
/// d.finish();
/// ```
pub struct Diff {
    a: Side,
    b: Side,
    step: usize,
    history: VecDeque<(usize, String)>,
    /// With `STRATA_TEST_TIER=1`: a second connection to strata that moves
    /// every value (and key) to the disk tier before each step, so that
    /// every command is compared on keys on disk only.
    demoter: Option<RawConn>,
}

/// `STRATA_TEST_TIER=1`: differential tests run strata with a disk tier and
/// demote every key before each command (`make test-tier`).
pub fn tier_mode() -> bool {
    std::env::var("STRATA_TEST_TIER").is_ok_and(|v| v == "1")
}

const HISTORY: usize = 8;

impl Default for Diff {
    fn default() -> Self {
        Self::new()
    }
}

impl Diff {
    /// Starts a strata and a redis server; RESP2.
    pub fn new() -> Diff {
        if tier_mode() {
            let strata = Server::strata_with(&["--max-disk", "64mb", "--dir", "{dir}"]);
            let demoter = strata.conn();
            let mut d = Self::with_servers(strata, Server::redis());
            d.demoter = Some(demoter);
            return d;
        }
        Self::with_servers(Server::strata(), Server::redis())
    }

    /// Starts a strata and a redis server and switches both to RESP3.
    pub fn new_resp3() -> Diff {
        let mut d = Self::new();
        d.hello3();
        d
    }

    /// Compares two given servers (`a` plays the system under test).
    pub fn with_servers(a: Server, b: Server) -> Diff {
        let (mut la, mut lb) = (a.name().to_string(), b.name().to_string());
        if la == lb {
            la.push_str("#1");
            lb.push_str("#2");
        }
        let (ca, cb) = (a.conn(), b.conn());
        Self::from_sides(Side { label: la, conn: ca, server: Some(a) }, Side { label: lb, conn: cb, server: Some(b) })
    }

    /// Compares two existing connections (servers owned by the caller).
    pub fn with_conns(strata: RawConn, redis: RawConn) -> Diff {
        Self::from_sides(
            Side { label: "strata".into(), conn: strata, server: None },
            Side { label: "redis".into(), conn: redis, server: None },
        )
    }

    fn from_sides(a: Side, b: Side) -> Diff {
        Diff { a, b, step: 0, history: VecDeque::new(), demoter: None }
    }

    /// Sends `HELLO 3` on both connections; both must reply with a map (the
    /// map contents legitimately differ, e.g. server name and version).
    pub fn hello3(&mut self) -> (Frame, Frame) {
        self.check(&["HELLO", "3"], |a, b| match (a, b) {
            (Frame::Map(_), Frame::Map(_)) => Ok(()),
            _ => Err("HELLO 3 must be accepted by both (map reply)".into()),
        })
    }

    /// Raw connection to the system under test.
    pub fn strata(&mut self) -> &mut RawConn {
        &mut self.a.conn
    }

    /// Raw connection to the reference server.
    pub fn redis(&mut self) -> &mut RawConn {
        &mut self.b.conn
    }

    /// The system-under-test server, if this `Diff` owns it.
    pub fn strata_server(&mut self) -> Option<&mut Server> {
        self.a.server.as_mut()
    }

    /// The reference server, if this `Diff` owns it.
    pub fn redis_server(&mut self) -> Option<&mut Server> {
        self.b.server.as_mut()
    }

    /// Number of steps run so far.
    pub fn steps(&self) -> usize {
        self.step
    }

    /// Runs `args` on both and compares under `mode`; returns both replies.
    pub fn run<A: AsRef<[u8]>>(&mut self, mode: Mode, args: &[A]) -> (Frame, Frame) {
        self.check(args, |a, b| mode.compare(a, b))
    }

    /// Runs `args` on both and compares with a custom predicate.
    pub fn check<A: AsRef<[u8]>>(
        &mut self,
        args: &[A],
        cmp: impl FnOnce(&Frame, &Frame) -> Result<(), String>,
    ) -> (Frame, Frame) {
        let command = display_command(args);
        if let Some(demoter) = self.demoter.as_mut() {
            let reply = demoter.cmd(&["DEBUG", "DEMOTE"]);
            assert!(matches!(reply, Frame::Integer(_)), "DEBUG DEMOTE: {reply:?}");
        }
        self.a.conn.send(args);
        self.b.conn.send(args);
        self.finish_step(command, cmp)
    }

    /// Writes raw bytes to both connections (no reply is read).
    pub fn send_raw_both(&mut self, bytes: &[u8]) {
        self.a.conn.send_raw(bytes);
        self.b.conn.send_raw(bytes);
        let step = self.step;
        self.push_history(step, format!("(raw) \"{}\"", bytes.escape_ascii()));
    }

    /// Reads the next reply on both connections and compares under `mode`
    /// (after [`Diff::send_raw_both`], or for pipelines and pushes).
    pub fn compare_next(&mut self, mode: Mode) -> (Frame, Frame) {
        self.finish_step("(next reply)".into(), |a, b| mode.compare(a, b))
    }

    fn finish_step(
        &mut self,
        command: String,
        cmp: impl FnOnce(&Frame, &Frame) -> Result<(), String>,
    ) -> (Frame, Frame) {
        let step = self.step;
        self.step += 1;
        let ra = Self::read(&mut self.a);
        let rb = Self::read(&mut self.b);
        let (fa, fb) = match (ra, rb) {
            (Ok(fa), Ok(fb)) => (fa, fb),
            (ra, rb) => {
                let show = |r: &Result<Frame, String>| match r {
                    Ok(f) => f.to_string(),
                    Err(e) => format!("<{e}>"),
                };
                let report = self.report(step, &command, "no reply", &show(&ra), &show(&rb));
                panic!("{report}{}", self.server_logs());
            }
        };
        let verdict =
            cmp(&fa, &fb).map_err(|reason| self.report(step, &command, &reason, &fa.to_string(), &fb.to_string()));
        // Recorded even on mismatch, in case the caller catches the panic.
        self.push_history(step, command);
        if let Err(report) = verdict {
            panic!("{report}");
        }
        (fa, fb)
    }

    fn read(side: &mut Side) -> Result<Frame, String> {
        match side.conn.try_read_frame() {
            Ok(Some(f)) => Ok(f),
            Ok(None) => Err("connection closed".into()),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                Err("connection closed (reset by peer)".into())
            }
            Err(e) => Err(format!("read error: {e}")),
        }
    }

    fn push_history(&mut self, step: usize, command: String) {
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back((step, command));
    }

    fn report(&self, step: usize, command: &str, reason: &str, a: &str, b: &str) -> String {
        let width = self.a.label.len().max(self.b.label.len());
        let mut out = format!(
            "\ndifferential mismatch at step #{step}: {reason}\n  command: {command}\n  {:width$} : {a}\n  {:width$} : {b}\n",
            self.a.label, self.b.label
        );
        if !self.history.is_empty() {
            out.push_str("  preceding commands:\n");
            for (i, c) in &self.history {
                out.push_str(&format!("    #{i}: {c}\n"));
            }
        }
        out
    }

    fn server_logs(&mut self) -> String {
        let mut out = String::new();
        for side in [&mut self.a, &mut self.b] {
            if let Some(server) = side.server.as_mut() {
                let state = match server.child.try_wait() {
                    Ok(Some(status)) => format!("exited with {status}"),
                    _ => "running".into(),
                };
                out.push_str(&format!("\n=== {} ({state}) ===\n{}", side.label, server.logs()));
            }
        }
        out
    }

    /// Both replies must be identical.
    pub fn exact<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Frame {
        self.run(Mode::Exact, args).0
    }

    /// Replies must match after recursively sorting arrays/sets/maps.
    pub fn unordered<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Frame {
        self.run(Mode::Unordered, args).0
    }

    /// Replies must match after sorting flat key/value pairs.
    pub fn unordered_pairs<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Frame {
        self.run(Mode::UnorderedPairs, args).0
    }

    /// Replies must be of the same frame kind.
    pub fn type_only<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Frame {
        self.run(Mode::TypeOnly, args).0
    }

    /// Both must be errors with identical messages.
    pub fn err<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Frame {
        self.run(Mode::Error, args).0
    }

    /// Both must be errors with the same first word.
    pub fn err_prefix<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Frame {
        self.run(Mode::ErrorPrefix, args).0
    }

    /// Runs on both without comparing (setup); returns both replies.
    pub fn both<A: AsRef<[u8]>>(&mut self, args: &[A]) -> (Frame, Frame) {
        self.run(Mode::Ignore, args)
    }

    /// Runs each case in order.
    pub fn run_cases(&mut self, cases: &[Case]) {
        for case in cases {
            self.run(case.mode, &case.args);
        }
    }

    /// Final sanity check: both connections still answer PING identically
    /// and owned server processes are still alive.
    pub fn finish(mut self) {
        self.exact(&["PING"]);
        for side in [&mut self.a, &mut self.b] {
            if let Some(server) = side.server.as_mut() {
                assert!(server.is_running(), "{} exited during the test\n{}", side.label, server.logs());
            }
        }
    }
}

/// Resident memory of a process (VmRSS), in bytes; 0 once it is gone.
pub fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    kb * 1024
}
