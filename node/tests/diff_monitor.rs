//! MONITOR, differential against redis-server: a monitor on each server
//! watches the same commands from another client; the lines must agree
//! once the timestamp and the client's port are set aside (both checked
//! for their form). strata runs with two workers, so the monitor and the
//! client are on different threads.

mod support;

use std::time::Duration;
use support::*;

/// Marks the end of a batch in the monitor's stream.
const END: &[&str] = &["ECHO", "end-of-batch"];

struct Monitored {
    d: Diff,
    monitors: [RawConn; 2],
}

impl Monitored {
    fn new() -> Monitored {
        Self::with(Server::strata(), Server::redis())
    }

    fn with(strata: Server, redis: Server) -> Monitored {
        let monitor = |s: &Server| {
            let mut c = s.conn();
            assert_eq!(c.cmd(&["MONITOR"]), Frame::ok(), "MONITOR on {}", s.name());
            c
        };
        let monitors = [monitor(&strata), monitor(&redis)];
        Monitored { d: Diff::with_servers(strata, redis), monitors }
    }

    /// Runs `cmds` on both (replies compared exactly), then compares what
    /// the monitors saw.
    fn run(&mut self, cmds: &[&[&str]]) -> Vec<String> {
        for cmd in cmds {
            self.d.exact(cmd);
        }
        self.compare(&format!("{cmds:?}"))
    }

    fn compare(&mut self, what: &str) -> Vec<String> {
        self.d.strata().cmd(END);
        self.d.redis().cmd(END);
        let [s, r] = &mut self.monitors;
        let (strata, redis) = (read_lines(s), read_lines(r));
        assert_eq!(strata, redis, "monitor lines differ (strata left, redis right) after {what}");
        strata
    }
}

/// The monitor's lines up to the END marker, each without its timestamp
/// and with a client's `ip:port` as `ip:*`.
fn read_lines(conn: &mut RawConn) -> Vec<String> {
    conn.set_timeout(Some(Duration::from_secs(10)));
    let mut lines = Vec::new();
    loop {
        let frame = conn.read_frame();
        let Frame::Simple(line) = &frame else { panic!("not a monitor line: {frame}") };
        let (stamp, rest) = line.split_once(' ').expect("timestamp");
        let (secs, micros) = stamp.split_once('.').expect("seconds.micros");
        assert!(secs.parse::<u64>().is_ok() && micros.len() == 6 && micros.parse::<u32>().is_ok(), "{line}");
        let (origin, args) = rest.split_once("] ").expect("[db origin]");
        let origin = match origin.rsplit_once(':') {
            Some((ip, port)) if port.parse::<u16>().is_ok() && !ip.contains("unix") => format!("{ip}:*"),
            _ => origin.to_string(),
        };
        let line = format!("{origin}] {args}");
        if args == "\"ECHO\" \"end-of-batch\"" {
            return lines;
        }
        lines.push(line);
    }
}

#[test]
fn commands_show_as_in_redis() {
    let mut m = Monitored::new();
    let lines = m.run(&[
        &["set", "foo", "bar"],
        &["get", "foo"],
        &["SET", "quote\"d", "new\nline\t\x01\\"],
        &["select", "3"],
        &["set", "k", "v"],
        &["lpush", "k", "x"],
        &["get"],
        &["nosuchcommand", "x"],
        &["config", "get", "maxmemory"],
        &["client", "getname"],
        &["ping"],
        &["select", "0"],
    ]);
    assert!(lines.iter().any(|l| l.contains("[3 127.0.0.1:*] \"lpush\" \"k\" \"x\"")), "{lines:?}");
}

#[test]
fn passwords_are_redacted() {
    let mut m = Monitored::new();
    m.run(&[&["auth", "not-real"], &["auth", "not-real", "not-a-password"], &["hello", "2", "AUTH", "a", "b"]]);
}

#[test]
fn transactions_show_their_commands_before_exec() {
    let mut m = Monitored::new();
    let lines = m.run(&[&["multi"], &["set", "foo", "bar"], &["incr", "foo"], &["exec"]]);
    assert_eq!(lines.len(), 4, "{lines:?}");
    m.run(&[&["multi"], &["syntax", "error"], &["exec"]]);
    m.run(&[&["multi"], &["get", "a"], &["discard"]]);
}

#[test]
fn scripts_show_their_calls_as_lua() {
    let mut m = Monitored::new();
    let lines = m.run(&[
        &["eval", "redis.call('set',KEYS[1],ARGV[1]) return redis.call('get',KEYS[1])", "1", "foo", "bar"],
        &["select", "2"],
        &["eval", "return redis.pcall('nosuch')", "0"],
        &["eval", "redis.call('incr','n')", "0"],
    ]);
    assert!(lines.iter().any(|l| l == "[2 lua] \"incr\" \"n\""), "{lines:?}");
    m.d.exact(&[
        "function",
        "load",
        "#!lua name=test\nredis.register_function('test', function() return redis.call('set', 'foo', 'bar') end)",
    ]);
    m.compare("FUNCTION LOAD");
    m.run(&[&["fcall", "test", "0"]]);
}

#[test]
fn a_monitor_may_not_touch_keys() {
    let strata = Server::strata();
    let redis = Server::redis();
    let mut d = Diff::with_servers(strata, redis);
    d.exact(&["MONITOR"]);
    // A second MONITOR gets no reply: PING's reply (and its line) come next.
    d.send_raw_both(b"MONITOR\r\nPING\r\n");
    d.compare_next(Mode::Exact);
    d.compare_next(Mode::TypeOnly);
    d.exact(&["GET", "x"]);
    d.exact(&["SET", "x", "1"]);
    d.exact(&["PUBLISH", "c", "m"]);
    d.exact(&["RESET"]);
    d.exact(&["SET", "x", "1"]);
    d.exact(&["GET", "x"]);
    d.finish();
}

#[test]
fn unix_socket_clients_show_the_socket_path() {
    let strata = Server::strata_with(&["--unixsocket", "{dir}/s.sock"]);
    let mut monitor = strata.conn();
    assert_eq!(monitor.cmd(&["MONITOR"]), Frame::ok());
    let mut c = strata.conn_unix();
    c.cmd(&["set", "a", "1"]);
    let Frame::Simple(line) = monitor.read_frame() else { panic!("no line") };
    let path = strata.unixsocket().unwrap().to_str().unwrap().to_string();
    assert!(line.ends_with(&format!(" [0 unix:{path}] \"set\" \"a\" \"1\"")), "{line}");
}

#[test]
fn monitor_is_described_as_in_redis() {
    let mut d = Diff::new();
    d.exact(&["COMMAND", "INFO", "monitor"]);
    d.exact(&["COMMAND", "DOCS", "monitor"]);
    d.exact(&["MULTI"]);
    d.exact(&["MONITOR"]);
    d.exact(&["EXEC"]);
    d.finish();
}

#[test]
fn client_list_flags_a_monitor_until_reset() {
    let strata = Server::strata();
    let mut monitor = strata.conn();
    let mut other = strata.conn();
    assert_eq!(monitor.cmd(&["MONITOR"]), Frame::ok());
    let list = other.cmd(&["CLIENT", "LIST"]);
    let list = list.as_str().expect("CLIENT LIST");
    assert!(list.contains("flags=O "), "{list}");
    assert_eq!(monitor.cmd(&["RESET"]), Frame::simple("RESET"));
    let list = other.cmd(&["CLIENT", "LIST"]);
    assert!(!list.as_str().unwrap().contains("flags=O"), "{list}");
    // No longer a monitor: keys are allowed again, and nothing is streamed.
    assert_eq!(monitor.cmd(&["SET", "k", "v"]), Frame::ok());
}
