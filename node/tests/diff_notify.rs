//! Keyspace notifications (`notify-keyspace-events`), differential against
//! redis-server: both servers run the same commands while a subscriber on
//! each listens with `PSUBSCRIBE __key*@*__:*`; the sequences of messages
//! (channel and payload, in order) must be identical. One test per family,
//! plus expired (lazy and active), evicted, new-key events, masks and the
//! parameter's CONFIG GET/SET. strata runs with two workers, so the
//! subscriber and the writer are on different threads.

mod support;

use std::time::Duration;
use support::*;

/// Published after each batch; matches the subscription's pattern, so it
/// marks the end of the batch's messages on each side.
const END: &str = "__key-end@0__:end";

/// A writer and a subscriber on each server.
struct Events {
    d: Diff,
    subs: [RawConn; 2],
}

impl Events {
    fn new(flags: &str) -> Events {
        Self::with_servers(Server::strata(), Server::redis(), flags)
    }

    fn with_servers(strata: Server, redis: Server, flags: &str) -> Events {
        let subscribe = |s: &Server| {
            let mut c = s.conn();
            c.send(&["PSUBSCRIBE", "__key*@*__:*"]);
            assert_eq!(c.read_frame().as_array().map(|a| a.len()), Some(3), "psubscribe confirmation on {}", s.name());
            c
        };
        let subs = [subscribe(&strata), subscribe(&redis)];
        let mut e = Events { d: Diff::with_servers(strata, redis), subs };
        e.d.exact(&["CONFIG", "SET", "notify-keyspace-events", flags]);
        e
    }

    /// Runs each command on both servers (replies compared exactly), then
    /// compares the events they published.
    fn run(&mut self, cmds: &[&[&str]]) -> Vec<(String, String)> {
        for cmd in cmds {
            self.d.exact(cmd);
        }
        self.compare_events(&format!("{cmds:?}"))
    }

    /// Reads both subscribers up to the END marker and compares.
    fn compare_events(&mut self, what: &str) -> Vec<(String, String)> {
        self.d.strata().cmd(&["PUBLISH", END, "x"]);
        self.d.redis().cmd(&["PUBLISH", END, "x"]);
        let [s, r] = &mut self.subs;
        let (strata, redis) = (read_events(s), read_events(r));
        assert_eq!(strata, redis, "events differ (strata left, redis right) after {what}");
        strata
    }
}

/// (channel, message) of every pmessage before the END marker.
fn read_events(conn: &mut RawConn) -> Vec<(String, String)> {
    conn.set_timeout(Some(Duration::from_secs(10)));
    let mut events = Vec::new();
    loop {
        let frame = conn.read_frame();
        let parts = frame.as_array().unwrap_or_else(|| panic!("not a message: {frame}"));
        assert_eq!(parts[0].as_str(), Some("pmessage"), "{frame}");
        let channel = parts[2].as_str().expect("channel").to_string();
        if channel == END {
            return events;
        }
        events.push((channel, parts[3].as_str().expect("payload").to_string()));
    }
}

fn channels(events: &[(String, String)]) -> Vec<&str> {
    events.iter().map(|(c, _)| c.as_str()).collect()
}

#[test]
fn flags_parse_and_show_as_in_redis() {
    let mut d = Diff::new();
    for flags in ["KEA", "AKE", "KA", "EA", "gKE", "$lshzxeKE", "gxn$Kmd", "AKEmn", "An", "nK", "Kn", "", "K"] {
        d.exact(&["CONFIG", "SET", "notify-keyspace-events", flags]);
        d.exact(&["CONFIG", "GET", "notify-keyspace-events"]);
    }
    for bad in ["Aq", "KE ", "x1", "a"] {
        d.exact(&["CONFIG", "SET", "notify-keyspace-events", bad]);
    }
    d.exact(&["CONFIG", "GET", "notify-keyspace-events"]);
    d.finish();
}

#[test]
fn the_parameter_is_read_at_start_up() {
    let mut strata = Server::strata_with(&["--notify-keyspace-events", "KEg"]).conn();
    assert_eq!(strata.cmd(&["CONFIG", "GET", "notify-keyspace-events"]).as_array().unwrap()[1].as_str(), Some("gKE"));
}

#[test]
fn off_by_default_and_masked_by_class_and_kind() {
    let mut e = Events::new("");
    let none = e.run(&[&["SET", "a", "1"], &["LPUSH", "l", "x"], &["DEL", "a"]]);
    assert!(none.is_empty(), "{none:?}");
    e.d.exact(&["CONFIG", "SET", "notify-keyspace-events", "KEl"]);
    let list_only = e.run(&[&["SET", "a", "1"], &["LPUSH", "l", "x"]]);
    assert_eq!(channels(&list_only), ["__keyspace@0__:l", "__keyevent@0__:lpush"]);
    // A class with neither K nor E publishes nothing.
    e.d.exact(&["CONFIG", "SET", "notify-keyspace-events", "A"]);
    assert!(e.run(&[&["SET", "a", "2"]]).is_empty());
    e.d.exact(&["CONFIG", "SET", "notify-keyspace-events", "E$"]);
    e.d.exact(&["SELECT", "3"]);
    assert_eq!(e.run(&[&["SET", "a", "2"]]), [("__keyevent@3__:set".to_string(), "a".to_string())]);
}

#[test]
fn generic_events_match_redis() {
    let mut e = Events::new("KEA");
    let events = e.run(&[
        &["SET", "foo", "bar"],
        &["EXPIRE", "foo", "100"],
        &["PEXPIRE", "foo", "100000", "GT"],
        &["PEXPIRE", "foo", "1", "GT"],
        &["PERSIST", "foo"],
        &["PERSIST", "foo"],
        &["EXPIREAT", "foo", "1"],
        &["SET", "a", "1"],
        &["RENAME", "a", "b"],
        &["RENAME", "b", "b"],
        &["SET", "c", "1"],
        &["RENAMENX", "b", "c"],
        &["RENAMENX", "b", "d"],
        &["COPY", "d", "e"],
        &["COPY", "d", "e", "DB", "2", "REPLACE"],
        &["COPY", "d", "e", "REPLACE"],
        &["MOVE", "e", "5"],
        &["MOVE", "d", "5"],
        &["DEL", "c", "missing", "d"],
        &["UNLINK", "e"],
        &["SET", "s", "v", "EX", "100"],
        &["SETEX", "s2", "100", "v"],
        &["GETEX", "s2", "PERSIST"],
        &["GETEX", "s2", "PX", "100000"],
        &["GETEX", "s2", "PXAT", "1"],
        &["GETDEL", "s"],
        &["GETDEL", "s"],
        &["RPUSH", "src", "3", "1", "2"],
        &["SORT", "src", "STORE", "dst"],
        &["SORT", "missing", "STORE", "dst"],
    ]);
    assert!(events.len() > 30, "{events:?}");
}

#[test]
fn restore_and_flush_events_match_redis() {
    let mut e = Events::new("KEA");
    e.d.exact(&["SET", "k", "v"]);
    let (dump, _) = e.d.run(Mode::Exact, &["DUMP", "k"]);
    let dump = dump.as_bytes().expect("dump").to_vec();
    e.run(&[&["FLUSHALL"]]);
    let events = e.run(&[]);
    assert!(events.is_empty());
    e.d.exact(&[b"RESTORE".as_slice(), b"k", b"0", &dump]);
    e.d.exact(&[b"RESTORE".as_slice(), b"k", b"0", &dump, b"REPLACE"]);
    let events = e.compare_events("RESTORE");
    assert_eq!(channels(&events).iter().filter(|c| c.ends_with("restore")).count(), 2, "{events:?}");
}

#[test]
fn string_events_match_redis() {
    let mut e = Events::new("KEA");
    let events = e.run(&[
        &["SET", "s", "1"],
        &["SET", "s", "2", "NX"],
        &["SET", "s", "3", "XX", "GET"],
        &["SET", "s", "4", "KEEPTTL"],
        &["SETNX", "s", "x"],
        &["SETNX", "t", "x"],
        &["MSET", "a", "1", "b", "2"],
        &["MSETNX", "a", "1", "c", "2"],
        &["MSETNX", "c", "1", "d", "2"],
        &["GETSET", "a", "5"],
        &["INCR", "a"],
        &["DECR", "a"],
        &["INCRBY", "new", "3"],
        &["DECRBY", "a", "2"],
        &["INCRBYFLOAT", "f", "1.5"],
        &["INCRBYFLOAT", "f", "1.5"],
        &["INCR", "t"],
        &["APPEND", "ap", "x"],
        &["APPEND", "ap", "y"],
        &["SETRANGE", "ap", "1", "zz"],
        &["SETRANGE", "ap", "1", ""],
        &["SETRANGE", "nope", "0", ""],
        &["SETRANGE", "sr", "2", "x"],
        &["SETBIT", "bits", "7", "1"],
        &["SETBIT", "bits", "7", "1"],
        &["SETBIT", "bits", "100", "0"],
        &["BITFIELD", "bf", "SET", "u8", "0", "255", "GET", "u8", "0"],
        &["BITFIELD", "bf", "GET", "u8", "0"],
        &["BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "10"],
        &["BITOP", "OR", "dest", "bits", "bf"],
        &["BITOP", "AND", "dest", "none1", "none2"],
        &["PFADD", "hll", "a", "b"],
        &["PFADD", "hll", "a"],
        &["PFMERGE", "hll2", "hll"],
        &["GETRANGE", "ap", "0", "-1"],
    ]);
    assert!(events.len() > 30, "{events:?}");
}
