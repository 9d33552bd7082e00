//! Differential tests (strata vs redis) of the generic key commands: DEL,
//! UNLINK, EXISTS, TOUCH, TYPE, the EXPIRE and TTL families, PERSIST, RENAME,
//! RENAMENX, COPY, MOVE, KEYS, SCAN, RANDOMKEY, OBJECT and WAIT; plus the
//! SCAN guarantee under concurrent writes (strata only).

mod support;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use support::*;

/// A fixed future unix time (2100-01-01) so absolute expiry compares exactly.
const T: &str = "4102444800";
const T_MINUS: &str = "4102444790";
const T_PLUS: &str = "4102444810";
const T_MS: &str = "4102444800123";

/// Runs a whole SCAN iteration on one connection; returns the keys in the
/// order they came (duplicates kept) and the number of calls.
fn scan_all(conn: &mut RawConn, opts: &[&str]) -> (Vec<Vec<u8>>, usize) {
    let mut cursor = b"0".to_vec();
    let mut keys = Vec::new();
    let mut calls = 0;
    loop {
        let mut args: Vec<&[u8]> = vec![b"SCAN", &cursor];
        args.extend(opts.iter().map(|o| o.as_bytes()));
        let reply = conn.cmd(&args);
        calls += 1;
        let parts = reply.as_array().unwrap_or_else(|| panic!("SCAN reply {reply}"));
        assert_eq!(parts.len(), 2, "SCAN reply {reply}");
        let next = parts[0].as_bytes().expect("cursor is a bulk string").to_vec();
        for k in parts[1].as_array().expect("keys array") {
            keys.push(k.as_bytes().expect("key is a bulk string").to_vec());
        }
        if next == b"0" {
            return (keys, calls);
        }
        assert!(calls < 1_000_000, "SCAN never ends");
        cursor = next;
    }
}

/// Full SCAN iterations on both sides must return the same set of keys;
/// strata must not return any key twice.
fn scan_same(d: &mut Diff, opts: &[&str]) -> BTreeSet<Vec<u8>> {
    let (strata, _) = scan_all(d.strata(), opts);
    let (redis, _) = scan_all(d.redis(), opts);
    let strata_set: BTreeSet<Vec<u8>> = strata.iter().cloned().collect();
    assert_eq!(strata_set.len(), strata.len(), "strata SCAN {opts:?} returned a key twice");
    let redis_set: BTreeSet<Vec<u8>> = redis.into_iter().collect();
    assert_eq!(strata_set, redis_set, "SCAN {opts:?} key sets differ");
    strata_set
}

fn int(f: &Frame) -> i64 {
    f.as_int().unwrap_or_else(|| panic!("expected an integer, got {f}"))
}

#[test]
fn del_exists_touch_unlink() {
    let mut d = Diff::new();
    d.exact(&["SET", "a", "1"]);
    d.exact(&["SET", "b", "2"]);
    d.exact(&["RPUSH", "l", "x"]);
    d.exact(&["EXISTS", "a", "b", "missing", "a", "l"]);
    d.exact(&["EXISTS", "missing"]);
    d.exact(&["TOUCH", "a", "missing", "a", "l"]);
    d.exact(&["TOUCH", "missing"]);
    d.exact(&["DEL", "a", "a", "missing"]);
    d.exact(&["DEL", "a"]);
    d.exact(&["EXISTS", "a"]);
    d.exact(&["GET", "a"]);
    d.exact(&["UNLINK", "b", "l", "c"]);
    d.exact(&["UNLINK", "b"]);
    d.exact(&["EXISTS", "b", "l"]);
    d.exact(&[b"SET".as_slice(), b"bin\x00\xff", b"v"]);
    d.exact(&[b"EXISTS".as_slice(), b"bin\x00\xff", b"bin"]);
    d.exact(&[b"DEL".as_slice(), b"bin\x00\xff"]);
    for cmd in ["DEL", "UNLINK", "EXISTS", "TOUCH"] {
        d.err(&[cmd]);
    }
    d.finish();
}

#[test]
fn type_and_object() {
    let mut d = Diff::new();
    d.exact(&["SET", "s", "hello"]);
    d.exact(&["SET", "n", "100"]);
    d.exact(&["SET", "neg", "-5"]);
    d.exact(&["SET", "big", "123456"]);
    d.exact(&["SET", "long", &"x".repeat(60)]);
    d.exact(&["RPUSH", "l", "a", "b"]);
    d.exact(&["HSET", "h", "f", "v"]);
    d.exact(&["SADD", "st", "1", "2"]);
    d.exact(&["SADD", "sm", "a"]);
    d.exact(&["ZADD", "z", "1", "m"]);
    for key in ["s", "n", "l", "h", "st", "z", "missing"] {
        d.exact(&["TYPE", key]);
    }
    d.err(&["TYPE"]);
    d.err(&["TYPE", "a", "b"]);

    for key in ["s", "n", "neg", "big", "long", "l", "h", "st", "sm", "z", "missing"] {
        d.exact(&["OBJECT", "ENCODING", key]);
        d.exact(&["object", "refcount", key]);
    }
    // Idle time just after a write: 0, or 1 across a clock tick.
    d.check(&["OBJECT", "IDLETIME", "s"], |a, b| {
        if int(a) <= 1 && int(b) <= 1 { Ok(()) } else { Err("idle time of a fresh key".into()) }
    });
    d.exact(&["OBJECT", "IDLETIME", "missing"]);
    // No LFU policy: FREQ is an error, but only for a key that exists.
    d.err(&["OBJECT", "FREQ", "s"]);
    d.exact(&["OBJECT", "FREQ", "missing"]);
    d.exact(&["OBJECT", "HELP"]);
    d.exact(&["object", "help"]);
    d.err(&["OBJECT"]);
    d.err(&["OBJECT", "HELP", "x"]);
    d.err(&["OBJECT", "ENCODING"]);
    d.err(&["OBJECT", "Encoding", "a", "b"]);
    d.err(&["OBJECT", "FREQ"]);
    d.err(&["OBJECT", "IDLETIME", "a", "b"]);
    d.err(&["OBJECT", "REFCOUNT"]);
    d.err(&["OBJECT", "foo"]);
    d.err(&["OBJECT", "Foo", "s"]);
    d.finish();
}

/// lfu-log-factor set at run time changes how accesses count: at 0 every
/// access increments the counter, as in Redis.
#[test]
fn lfu_log_factor_set_at_run_time_applies() {
    let args = ["--maxmemory-policy", "allkeys-lfu"];
    let mut d = Diff::with_servers(Server::strata_with(&args), Server::redis_with(&args));
    d.exact(&["CONFIG", "SET", "lfu-log-factor", "0"]);
    d.exact(&["CONFIG", "GET", "lfu-log-factor"]);
    d.exact(&["SET", "a", "v"]);
    for _ in 0..20 {
        d.exact(&["GET", "a"]);
    }
    d.exact(&["OBJECT", "FREQ", "a"]);
    d.exact(&["CONFIG", "SET", "lfu-decay-time", "0"]);
    d.exact(&["CONFIG", "GET", "lfu-decay-time"]);
    d.exact(&["OBJECT", "FREQ", "a"]);
    d.finish();
}

/// OBJECT FREQ and which commands count as an access, under an LFU policy.
#[test]
fn object_freq_under_lfu() {
    let args = ["--maxmemory-policy", "allkeys-lfu"];
    let mut d = Diff::with_servers(Server::strata_with(&args), Server::redis_with(&args));
    d.exact(&["SET", "a", "v"]);
    d.exact(&["OBJECT", "FREQ", "a"]);
    // Read without touching.
    d.exact(&["EXISTS", "a"]);
    d.exact(&["TYPE", "a"]);
    d.exact(&["TTL", "a"]);
    d.exact(&["OBJECT", "ENCODING", "a"]);
    d.exact(&["KEYS", "*"]);
    d.exact(&["SCAN", "0"]);
    d.exact(&["OBJECT", "FREQ", "a"]);
    // The first access always bumps the counter (5 -> 6).
    d.exact(&["GET", "a"]);
    d.exact(&["OBJECT", "FREQ", "a"]);
    d.err(&["OBJECT", "IDLETIME", "a"]);
    d.exact(&["OBJECT", "IDLETIME", "missing"]);
    d.exact(&["OBJECT", "FREQ", "missing"]);
    // A copy is a new object; COPY reads (touches) its source.
    d.exact(&["SET", "c", "v"]);
    d.exact(&["COPY", "c", "c2"]);
    d.exact(&["OBJECT", "FREQ", "c"]);
    d.exact(&["OBJECT", "FREQ", "c2"]);
    // RENAME and MOVE touch the key and keep its history.
    d.exact(&["SET", "r", "v"]);
    d.exact(&["RENAME", "r", "r2"]);
    d.exact(&["OBJECT", "FREQ", "r2"]);
    d.exact(&["SET", "m", "v"]);
    d.exact(&["MOVE", "m", "1"]);
    d.exact(&["SELECT", "1"]);
    d.exact(&["OBJECT", "FREQ", "m"]);
    d.exact(&["SELECT", "0"]);
    // EXPIRE, PERSIST and TOUCH are accesses too.
    for (key, cmd) in [("e", &["EXPIRE", "e", "100"][..]), ("p", &["PERSIST", "p"]), ("t", &["TOUCH", "t"])] {
        d.exact(&["SET", key, "v"]);
        d.exact(cmd);
        d.exact(&["OBJECT", "FREQ", key]);
    }
    // Without maxmemory, small integers are shared even under LFU (so their
    // access counter is shared too: tests above use non-integer values).
    d.exact(&["SET", "n", "1"]);
    d.exact(&["OBJECT", "REFCOUNT", "n"]);
    d.finish();
}

#[test]
fn expire_and_ttl() {
    let mut d = Diff::new();
    d.exact(&["SET", "k", "v"]);
    d.exact(&["TTL", "k"]);
    d.exact(&["PTTL", "k"]);
    d.exact(&["EXPIRETIME", "k"]);
    d.exact(&["PEXPIRETIME", "k"]);
    for cmd in ["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"] {
        d.exact(&[cmd, "missing"]);
        d.err(&[cmd]);
        d.err(&[cmd, "a", "b"]);
    }
    d.exact(&["EXPIRE", "k", "100"]);
    d.exact(&["TTL", "k"]);
    d.check(&["PTTL", "k"], |a, b| {
        let ok = |f: &Frame| (99_000..=100_000).contains(&int(f));
        if ok(a) && ok(b) { Ok(()) } else { Err("PTTL after EXPIRE 100".into()) }
    });
    // TTL rounds to the nearest second.
    d.exact(&["PEXPIRE", "k", "100800"]);
    d.exact(&["TTL", "k"]);
    d.exact(&["PEXPIRE", "k", "100200"]);
    d.exact(&["TTL", "k"]);
    d.exact(&["EXPIREAT", "k", T]);
    d.exact(&["EXPIRETIME", "k"]);
    d.exact(&["PEXPIRETIME", "k"]);
    // EXPIRETIME rounds to the nearest second, like TTL.
    for ms in [T_MS, "4102444800499", "4102444800500", "4102444800999"] {
        d.exact(&["PEXPIREAT", "k", ms]);
        d.exact(&["EXPIRETIME", "k"]);
        d.exact(&["PEXPIRETIME", "k"]);
    }
    d.exact(&["PERSIST", "k"]);
    d.exact(&["PERSIST", "k"]);
    d.exact(&["PERSIST", "missing"]);
    d.exact(&["TTL", "k"]);
    d.err(&["PERSIST"]);

    // NX / XX / GT / LT; a key without TTL counts as an infinite TTL.
    for cmd in [
        ["EXPIREAT", "k", T, "XX"],      // no TTL yet: refused
        ["EXPIREAT", "k", T, "GT"],      // nothing is greater than infinite
        ["EXPIREAT", "k", T, "LT"],      // anything is less than infinite
        ["EXPIREAT", "k", T_PLUS, "NX"], // has a TTL now
        ["EXPIREAT", "k", T_PLUS, "LT"], // not less
        ["EXPIREAT", "k", T_MINUS, "lt"],
        ["EXPIREAT", "k", T, "gt"],
        ["EXPIREAT", "k", T, "GT"], // equal is not greater
        ["EXPIREAT", "k", T, "xx"],
        ["EXPIREAT", "k", T_MINUS, "GT"],
    ] {
        d.exact(&cmd);
        d.exact(&["EXPIRETIME", "k"]);
    }
    d.exact(&["EXPIREAT", "k", T_PLUS, "XX", "GT"]);
    d.exact(&["EXPIRETIME", "k"]);
    d.exact(&["EXPIREAT", "k", T, "xx", "lt", "xx"]);
    d.exact(&["EXPIRETIME", "k"]);
    d.exact(&["PERSIST", "k"]);
    d.exact(&["EXPIREAT", "k", T, "nx"]);
    d.exact(&["EXPIRETIME", "k"]);
    d.exact(&["EXPIRE", "missing", "100"]);
    d.exact(&["EXPIRE", "missing", "100", "XX"]);
    d.exact(&["EXISTS", "missing"]);

    // Option and argument errors, in Redis's order of checks.
    for cmd in ["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"] {
        d.err(&[cmd, "k", "10", "NX", "XX"]);
        d.err(&[cmd, "k", "10", "nx", "gt"]);
        d.err(&[cmd, "k", "10", "NX", "LT"]);
        d.err(&[cmd, "k", "10", "GT", "LT"]);
        d.err(&[cmd, "k", "10", "xx", "gt", "lt"]);
        d.err(&[cmd, "k", "10", "foo"]);
        d.err(&[cmd, "k", "abc", "foo"]);
        d.err(&[cmd, "k", "abc"]);
        d.err(&[cmd, "k", "1.5"]);
        d.err(&[cmd, "k", ""]);
        d.err(&[cmd, "k", " 1"]);
        d.err(&[cmd, "k"]);
        d.err(&[cmd]);
    }
    // Overflow, checked before the key is looked up.
    d.err(&["EXPIRE", "k", "9223372036854775807"]);
    d.err(&["EXPIRE", "missing", "9223372036854775807"]);
    d.err(&["EXPIRE", "k", "-9223372036854775808"]);
    d.err(&["PEXPIRE", "k", "9223372036854775807"]);
    d.err(&["EXPIREAT", "k", "9223372036854775807"]);
    d.exact(&["EXPIREAT", "missing", "-9223372036854775"]);
    d.err(&["EXPIREAT", "k", "-9223372036854776"]);
    d.err(&["EXPIRE", "k", "9223372036854775807", "NX"]);
    d.exact(&["PEXPIREAT", "k", "9223372036854775807"]);
    d.exact(&["PEXPIRETIME", "k"]);
    d.exact(&["EXPIRETIME", "k"]);
    d.exact(&["EXPIREAT", "k", "9223372036854775"]);
    d.exact(&["PEXPIRETIME", "k"]);

    // A deadline that is now or past deletes the key and answers 1.
    for cmd in [
        ["EXPIRE", "k", "0"],
        ["EXPIRE", "k", "-5"],
        ["PEXPIRE", "k", "0"],
        ["PEXPIRE", "k", "-1"],
        ["EXPIREAT", "k", "1"],
        ["PEXPIREAT", "k", "1"],
        ["EXPIREAT", "k", "-9223372036854"],
    ] {
        d.exact(&["SET", "k", "v"]);
        d.exact(&cmd);
        d.exact(&["EXISTS", "k"]);
        d.exact(&cmd);
    }
    // LT with a past time on a key without TTL deletes; GT does not apply.
    d.exact(&["SET", "k", "v"]);
    d.exact(&["EXPIRE", "k", "-1", "GT"]);
    d.exact(&["EXPIRE", "k", "-1", "LT"]);
    d.exact(&["EXISTS", "k"]);
    d.exact(&["SET", "k", "v"]);
    d.exact(&["EXPIRE", "k", "100"]);
    d.exact(&["EXPIRE", "k", "-1", "GT"]);
    d.exact(&["EXPIRE", "k", "0", "xx"]);
    d.exact(&["EXISTS", "k"]);

    // Keys really expire, for every type.
    d.exact(&["SET", "s", "v"]);
    d.exact(&["RPUSH", "l", "a"]);
    d.exact(&["ZADD", "z", "1", "a"]);
    for key in ["s", "l", "z"] {
        d.exact(&["PEXPIRE", key, "50"]);
    }
    thread::sleep(Duration::from_millis(120));
    for key in ["s", "l", "z"] {
        d.exact(&["EXISTS", key]);
        d.exact(&["TTL", key]);
        d.exact(&["TYPE", key]);
        d.exact(&["PERSIST", key]);
        d.exact(&["EXPIRE", key, "10"]);
    }
    // SET without KEEPTTL clears the TTL.
    d.exact(&["SET", "s", "v", "EX", "100"]);
    d.exact(&["TTL", "s"]);
    d.exact(&["SET", "s", "w"]);
    d.exact(&["TTL", "s"]);
    d.finish();
}

/// WATCH sees EXPIRE that changed a TTL, but not one refused by a condition.
#[test]
fn expire_and_watch() {
    let mut d = Diff::new();
    d.exact(&["SET", "k", "v"]);
    d.exact(&["WATCH", "k"]);
    d.exact(&["EXPIRE", "k", "100", "XX"]);
    d.exact(&["PERSIST", "k"]);
    d.exact(&["MULTI"]);
    d.exact(&["GET", "k"]);
    d.exact(&["EXEC"]);
    d.exact(&["WATCH", "k"]);
    d.exact(&["EXPIRE", "k", "100"]);
    d.exact(&["MULTI"]);
    d.exact(&["GET", "k"]);
    d.exact(&["EXEC"]);
    d.finish();
}

#[test]
fn rename_and_renamenx() {
    let mut d = Diff::new();
    d.err(&["RENAME", "missing", "x"]);
    d.err(&["RENAME", "missing", "missing"]);
    d.err(&["RENAMENX", "missing", "x"]);
    d.err(&["RENAMENX", "missing", "missing"]);
    d.exact(&["SET", "a", "1"]);
    d.exact(&["RENAME", "a", "a"]);
    d.exact(&["RENAMENX", "a", "a"]);
    d.exact(&["GET", "a"]);
    d.exact(&["RENAME", "a", "b"]);
    d.exact(&["GET", "a"]);
    d.exact(&["GET", "b"]);
    d.exact(&["SET", "c", "3"]);
    d.exact(&["RENAMENX", "b", "c"]);
    d.exact(&["GET", "b"]);
    d.exact(&["GET", "c"]);
    d.exact(&["RENAMENX", "b", "d"]);
    d.exact(&["GET", "d"]);
    d.exact(&["EXISTS", "b"]);
    // Overwrites a key of another type; the TTL goes along.
    d.exact(&["RPUSH", "l", "x", "y"]);
    d.exact(&["EXPIREAT", "d", T]);
    d.exact(&["RENAME", "d", "l"]);
    d.exact(&["TYPE", "l"]);
    d.exact(&["GET", "l"]);
    d.exact(&["EXPIRETIME", "l"]);
    // A key without TTL replaces one with a TTL: no TTL after.
    d.exact(&["SET", "p", "plain"]);
    d.exact(&["RENAME", "p", "l"]);
    d.exact(&["TTL", "l"]);
    // Collections move whole.
    d.exact(&["RPUSH", "list", "a", "b", "c"]);
    d.exact(&["RENAME", "list", "list2"]);
    d.exact(&["LRANGE", "list2", "0", "-1"]);
    d.exact(&["HSET", "h", "f1", "v1", "f2", "v2"]);
    d.exact(&["RENAMENX", "h", "h2"]);
    d.unordered_pairs(&["HGETALL", "h2"]);
    d.exact(&["ZADD", "z", "1", "a", "2", "b"]);
    d.exact(&["RENAME", "z", "z2"]);
    d.exact(&["ZRANGE", "z2", "0", "-1", "WITHSCORES"]);
    d.exact(&["EXISTS", "list", "h", "z"]);
    // An expired source is missing.
    d.exact(&["SET", "e", "v", "PX", "30"]);
    thread::sleep(Duration::from_millis(80));
    d.err(&["RENAME", "e", "f"]);
    d.err(&["RENAME", "e", "e"]);
    d.exact(&["EXISTS", "f"]);
    for cmd in ["RENAME", "RENAMENX"] {
        d.err(&[cmd]);
        d.err(&[cmd, "a"]);
        d.err(&[cmd, "a", "b", "c"]);
    }
    d.finish();
}

/// RENAME onto a key a client is blocked on serves that client (both servers).
#[test]
fn rename_wakes_blocked_pop() {
    let strata = Server::strata();
    let redis = Server::redis();
    for server in [&strata, &redis] {
        let mut waiter = server.conn();
        let mut conn = server.conn();
        waiter.send(&["BLPOP", "dst", "5"]);
        // Let the BLPOP block before the rename.
        thread::sleep(Duration::from_millis(100));
        assert_eq!(conn.cmd(&["RPUSH", "src", "x"]), Frame::int(1));
        assert_eq!(conn.cmd(&["RENAME", "src", "dst"]), Frame::ok());
        assert_eq!(waiter.read_frame(), Frame::bulks(&["dst", "x"]), "{}", server.name());
        assert_eq!(conn.cmd(&["EXISTS", "dst"]), Frame::int(0), "{}", server.name());
    }
}

#[test]
fn copy_cmd() {
    let mut d = Diff::new();
    d.exact(&["SET", "x", "1"]);
    d.err(&["COPY", "x", "x"]);
    d.err(&["COPY", "x", "x", "DB", "0"]);
    d.err(&["COPY", "missing", "missing"]);
    d.err(&["COPY", "x", "y", "DB", "16"]);
    d.err(&["COPY", "x", "y", "DB", "-1"]);
    d.err(&["COPY", "x", "y", "db", "abc"]);
    d.err(&["COPY", "x", "y", "DB", "99999999999"]);
    d.err(&["COPY", "missing", "y", "DB", "16"]);
    d.err(&["COPY", "x", "y", "DB"]);
    d.err(&["COPY", "x", "y", "foo"]);
    d.err(&["COPY", "x", "y", "DB", "16", "foo"]);
    d.err(&["COPY", "x", "y", "REPLACE", "foo"]);
    d.err(&["COPY", "x"]);
    d.err(&["COPY"]);
    d.exact(&["COPY", "missing", "y"]);
    d.exact(&["COPY", "x", "y"]);
    d.exact(&["COPY", "x", "y"]);
    d.exact(&["SET", "x", "2"]);
    d.exact(&["COPY", "x", "y", "replace"]);
    d.exact(&["GET", "y"]);
    // To another database, same name allowed; options in any order, repeated.
    d.exact(&["COPY", "x", "x", "DB", "1"]);
    d.exact(&["COPY", "x", "x", "DB", "1"]);
    d.exact(&["COPY", "x", "y", "REPLACE", "db", "1", "REPLACE"]);
    d.exact(&["COPY", "x", "z", "DB", "3", "DB", "1"]);
    d.exact(&["SELECT", "1"]);
    d.unordered(&["KEYS", "*"]);
    d.exact(&["GET", "x"]);
    d.exact(&["COPY", "x", "x", "DB", "0"]);
    d.exact(&["COPY", "x", "x", "DB", "0", "REPLACE"]);
    d.exact(&["SELECT", "0"]);
    // The TTL is copied.
    d.exact(&["EXPIREAT", "x", T]);
    d.exact(&["COPY", "x", "withttl"]);
    d.exact(&["EXPIRETIME", "withttl"]);
    d.exact(&["COPY", "x", "withttl", "DB", "2"]);
    d.exact(&["SELECT", "2"]);
    d.exact(&["EXPIRETIME", "withttl"]);
    d.exact(&["SELECT", "0"]);
    // REPLACE onto a key with a TTL, from one without: no TTL after.
    d.exact(&["SET", "plain", "p"]);
    d.exact(&["COPY", "plain", "withttl", "REPLACE"]);
    d.exact(&["TTL", "withttl"]);
    // Deep copies of every type: changing the source leaves the copy alone.
    d.exact(&["RPUSH", "l", "a", "b"]);
    d.exact(&["HSET", "h", "f", "v"]);
    d.exact(&["SADD", "s", "m1", "m2"]);
    d.exact(&["ZADD", "z", "1", "a", "2", "b"]);
    for key in ["l", "h", "s", "z"] {
        d.exact(&["COPY", key, &format!("{key}copy")]);
        d.exact(&["TYPE", &format!("{key}copy")]);
    }
    d.exact(&["RPUSH", "l", "c"]);
    d.exact(&["HSET", "h", "g", "w"]);
    d.exact(&["SADD", "s", "m3"]);
    d.exact(&["ZADD", "z", "3", "c"]);
    d.exact(&["LRANGE", "lcopy", "0", "-1"]);
    d.unordered_pairs(&["HGETALL", "hcopy"]);
    d.unordered(&["SMEMBERS", "scopy"]);
    d.exact(&["ZRANGE", "zcopy", "0", "-1", "WITHSCORES"]);
    d.exact(&["LRANGE", "l", "0", "-1"]);
    // REPLACE across types.
    d.exact(&["COPY", "lcopy", "x", "REPLACE"]);
    d.exact(&["TYPE", "x"]);
    d.finish();
}

#[test]
fn move_cmd() {
    let mut d = Diff::new();
    d.exact(&["SET", "x", "1"]);
    d.err(&["MOVE", "x", "0"]);
    d.err(&["MOVE", "missing", "0"]);
    d.err(&["MOVE", "x", "16"]);
    d.err(&["MOVE", "x", "-1"]);
    d.err(&["MOVE", "x", "abc"]);
    d.err(&["MOVE", "x", "99999999999"]);
    d.err(&["MOVE", "x", "-99999999999"]);
    d.err(&["MOVE", "x"]);
    d.err(&["MOVE", "x", "1", "2"]);
    d.exact(&["MOVE", "missing", "1"]);
    d.exact(&["EXPIREAT", "x", T]);
    d.exact(&["MOVE", "x", "1"]);
    d.exact(&["EXISTS", "x"]);
    d.exact(&["SELECT", "1"]);
    d.exact(&["GET", "x"]);
    d.exact(&["EXPIRETIME", "x"]);
    // Target exists: nothing moves.
    d.exact(&["SET", "y", "in1"]);
    d.exact(&["SELECT", "0"]);
    d.exact(&["SET", "y", "in0"]);
    d.exact(&["MOVE", "y", "1"]);
    d.exact(&["GET", "y"]);
    d.exact(&["RPUSH", "l", "a", "b"]);
    d.exact(&["MOVE", "l", "15"]);
    d.exact(&["SELECT", "15"]);
    d.exact(&["LRANGE", "l", "0", "-1"]);
    d.exact(&["MOVE", "l", "0"]);
    d.exact(&["SELECT", "0"]);
    d.exact(&["LRANGE", "l", "0", "-1"]);
    d.exact(&["TTL", "l"]);
    d.finish();
}

#[test]
fn keys_and_randomkey() {
    let mut d = Diff::new();
    d.exact(&["KEYS", "*"]);
    d.exact(&["RANDOMKEY"]);
    d.exact(&["SET", "only", "1"]);
    d.exact(&["RANDOMKEY"]);
    d.exact(&["MSET", "k1", "1", "k2", "2", "k10", "3", "key", "4", "other", "5", "a*b", "6", "[x]", "7"]);
    d.exact(&["RPUSH", "klist", "a"]);
    for pattern in ["*", "k*", "k?", "k[12]", "k[^1]*", "k[0-9]*", "*e*", "nomatch*", "a\\*b", "\\[x\\]", "", "K*"] {
        d.unordered(&["KEYS", pattern]);
    }
    for _ in 0..20 {
        let (a, b) = d.run(Mode::TypeOnly, &["RANDOMKEY"]);
        let all = ["only", "k1", "k2", "k10", "key", "other", "a*b", "[x]", "klist"];
        for f in [a, b] {
            let key = f.as_str().expect("a key").to_string();
            assert!(all.contains(&key.as_str()), "RANDOMKEY returned {key}");
        }
    }
    // Expired keys are never listed nor picked.
    d.exact(&["SELECT", "3"]);
    d.exact(&["SET", "live", "1"]);
    for i in 0..30 {
        d.exact(&["SET", &format!("gone{i}"), "1", "PX", "20"]);
    }
    thread::sleep(Duration::from_millis(60));
    d.exact(&["KEYS", "*"]);
    for _ in 0..10 {
        d.exact(&["RANDOMKEY"]);
    }
    scan_same(&mut d, &[]);
    d.exact(&["DEL", "live"]);
    d.exact(&["RANDOMKEY"]);
    d.exact(&["SELECT", "0"]);
    d.err(&["KEYS"]);
    d.err(&["KEYS", "a", "b"]);
    d.err(&["RANDOMKEY", "x"]);
    d.finish();
}

#[test]
fn scan_cmd() {
    let mut d = Diff::new();
    // Empty database: one call, cursor 0.
    d.exact(&["SCAN", "0"]);
    d.exact(&["SCAN", "0", "COUNT", "1"]);
    for i in 0..300 {
        d.exact(&["SET", &format!("str:{i}"), "v"]);
    }
    for i in 0..40 {
        d.exact(&["RPUSH", &format!("list:{i}"), "v"]);
        d.exact(&["ZADD", &format!("zset:{i}"), "1", "m"]);
        d.exact(&["HSET", &format!("hash:{i}"), "f", "v"]);
        d.exact(&["SADD", &format!("set:{i}"), "m"]);
    }
    let all = scan_same(&mut d, &[]);
    assert_eq!(all.len(), 460);
    scan_same(&mut d, &["COUNT", "1"]);
    scan_same(&mut d, &["COUNT", "1000"]);
    scan_same(&mut d, &["count", "7", "MATCH", "str:1*"]);
    scan_same(&mut d, &["MATCH", "*:3?"]);
    scan_same(&mut d, &["MATCH", "nomatch"]);
    scan_same(&mut d, &["MATCH", "*"]);
    for ty in ["string", "list", "LIST", "zset", "hash", "Set", "none", "stream", "foo"] {
        let found = scan_same(&mut d, &["TYPE", ty]);
        let expected = match ty.to_ascii_lowercase().as_str() {
            "string" => 300,
            "list" | "zset" | "hash" | "set" => 40,
            _ => 0,
        };
        assert_eq!(found.len(), expected, "TYPE {ty}");
    }
    scan_same(&mut d, &["TYPE", "list", "MATCH", "list:1*", "COUNT", "3"]);
    scan_same(&mut d, &["MATCH", "a", "MATCH", "str:2*"]);

    // COUNT bounds the work per call.
    let (keys, calls) = scan_all(d.strata(), &["COUNT", "10"]);
    assert_eq!(keys.len(), 460);
    assert!(calls >= 40, "COUNT 10 over 460 keys took only {calls} calls");
    let (_, calls) = scan_all(d.strata(), &["COUNT", "100000"]);
    assert_eq!(calls, 1, "a huge COUNT scans everything at once");
    let (keys, calls) = scan_all(d.strata(), &["COUNT", "1", "MATCH", "nomatch"]);
    assert!(keys.is_empty() && calls > 100, "{calls} calls");

    // Cursors: parsed like strtoull.
    for cursor in [" 1", "1 ", "abc", "1.5", "0x10", "18446744073709551616", "-", "+", "--1"] {
        d.err(&["SCAN", cursor]);
        d.err(&["SCAN", cursor, "COUNT", "0"]);
    }
    for cursor in ["", "-0", "+0", "00", "18446744073709551615", "-1", "12345"] {
        d.type_only(&["SCAN", cursor]);
    }
    d.err(&["SCAN", "0", "COUNT", "0"]);
    d.err(&["SCAN", "0", "COUNT", "-1"]);
    d.err(&["SCAN", "0", "COUNT", "abc"]);
    d.err(&["SCAN", "0", "COUNT", "99999999999999999999"]);
    d.err(&["SCAN", "0", "COUNT"]);
    d.err(&["SCAN", "0", "MATCH"]);
    d.err(&["SCAN", "0", "TYPE"]);
    d.err(&["SCAN", "0", "foo", "bar"]);
    d.err(&["SCAN", "0", "MATCH", "*", "COUNT"]);
    d.err(&["SCAN"]);

    // Keys of other databases stay out; expired keys are skipped.
    d.exact(&["SELECT", "5"]);
    d.exact(&["SCAN", "0"]);
    d.exact(&["SET", "a", "1"]);
    d.exact(&["SET", "b", "1", "PX", "20"]);
    thread::sleep(Duration::from_millis(60));
    d.exact(&["SCAN", "0", "COUNT", "100"]);
    d.exact(&["SELECT", "0"]);
    d.finish();
}

/// KEYS, SCAN and RANDOMKEY inside MULTI run on the locks EXEC holds.
#[test]
fn whole_keyspace_commands_in_exec() {
    let mut d = Diff::new();
    d.exact(&["SET", "k", "v"]);
    d.exact(&["MULTI"]);
    for cmd in [&["KEYS", "*"][..], &["SCAN", "0", "COUNT", "100"], &["RANDOMKEY"], &["COPY", "k", "k", "DB", "1"]] {
        d.exact(cmd);
    }
    d.exact(&["MOVE", "k", "2"]);
    d.exact(&["WAIT", "1", "0"]);
    d.exact(&["EXEC"]);
    d.exact(&["SELECT", "2"]);
    d.exact(&["GET", "k"]);
    d.finish();
}

#[test]
fn wait_cmd() {
    let mut d = Diff::new();
    d.exact(&["WAIT", "0", "0"]);
    d.exact(&["WAIT", "-1", "0"]);
    d.exact(&["WAIT", "0", "100"]);
    // Not enough replicas: answers 0 when the timeout passes.
    let start = Instant::now();
    d.exact(&["WAIT", "1", "150"]);
    assert!(start.elapsed() >= Duration::from_millis(140), "WAIT returned before its timeout");
    d.err(&["WAIT", "abc", "0"]);
    d.err(&["WAIT", "0", "abc"]);
    d.err(&["WAIT", "0", "1.5"]);
    d.err(&["WAIT", "0", "-1"]);
    d.err(&["WAIT", "abc", "-1"]);
    d.err(&["WAIT", "abc", "abc"]);
    d.err(&["WAIT", "99999999999999999999", "0"]);
    d.err(&["WAIT", "0"]);
    d.err(&["WAIT", "0", "0", "0"]);
    // A huge timeout blocks (it does not overflow); other clients carry on.
    let server = d.strata_server().expect("owned server");
    let mut waiter = server.conn();
    let mut other = server.conn();
    waiter.send(&["WAIT", "1", "9223372036854775807"]);
    waiter.set_timeout(Some(Duration::from_millis(200)));
    assert!(waiter.try_read_frame().is_err(), "WAIT 1 <huge> answered at once");
    assert_eq!(other.cmd(&["PING"]), Frame::simple("PONG"));
    d.finish();
}

/// RESP3 shapes: nulls, simple strings, arrays, and the HELP lines.
#[test]
fn resp3_shapes() {
    let mut d = Diff::new_resp3();
    d.exact(&["RANDOMKEY"]);
    d.exact(&["SCAN", "0"]);
    d.exact(&["KEYS", "*"]);
    d.exact(&["SET", "k", "v"]);
    d.exact(&["TYPE", "k"]);
    d.exact(&["TYPE", "missing"]);
    d.exact(&["RANDOMKEY"]);
    d.exact(&["SCAN", "0"]);
    d.exact(&["KEYS", "*"]);
    d.exact(&["EXISTS", "k", "missing"]);
    d.exact(&["OBJECT", "ENCODING", "k"]);
    d.exact(&["OBJECT", "ENCODING", "missing"]);
    d.exact(&["OBJECT", "REFCOUNT", "missing"]);
    d.exact(&["OBJECT", "IDLETIME", "missing"]);
    d.exact(&["OBJECT", "HELP"]);
    d.exact(&["TTL", "k"]);
    d.exact(&["EXPIREAT", "k", T]);
    d.exact(&["PEXPIRETIME", "k"]);
    d.exact(&["RENAME", "k", "k2"]);
    d.exact(&["RENAMENX", "k2", "k3"]);
    d.exact(&["COPY", "k3", "k4"]);
    d.exact(&["MOVE", "k4", "1"]);
    d.exact(&["WAIT", "0", "0"]);
    d.err(&["RENAME", "missing", "x"]);
    d.err(&["SCAN", "x"]);
    d.err(&["OBJECT", "FREQ", "k3"]);
    d.finish();
}

/// The SCAN guarantee on a live server: 10k keys present throughout are each
/// returned exactly once by a COUNT 10 iteration, while another client keeps
/// adding and deleting other keys (growing and shrinking the slabs).
#[test]
fn scan_guarantee_under_concurrent_writes() {
    let server = Server::strata();
    let mut conn = server.conn();
    const N: usize = 10_000;
    for batch in 0..N / 500 {
        let mut args = vec!["MSET".to_string()];
        for i in batch * 500..(batch + 1) * 500 {
            args.push(format!("orig:{i}"));
            args.push("v".into());
        }
        assert_eq!(conn.cmd(&args), Frame::ok());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    let writer = {
        let (stop, writes) = (stop.clone(), writes.clone());
        let mut w = server.conn();
        thread::spawn(move || {
            let mut i: u64 = 0;
            while !stop.load(Ordering::Relaxed) {
                // Add a burst of keys, then delete most of it: slabs grow,
                // free slots get reused, whole partitions empty and refill.
                let mut args = vec!["MSET".to_string()];
                for j in 0..50 {
                    args.push(format!("churn:{}", i + j));
                    args.push("x".into());
                }
                assert_eq!(w.cmd(&args), Frame::ok());
                let mut del = vec!["DEL".to_string()];
                for j in 0..45 {
                    del.push(format!("churn:{}", i + j));
                }
                w.cmd(&del);
                i += 50;
                writes.fetch_add(95, Ordering::Relaxed);
            }
        })
    };
    // Let the writer get going before and during the scan.
    thread::sleep(Duration::from_millis(50));
    let before = writes.load(Ordering::Relaxed);
    let (keys, calls) = scan_all(&mut conn, &["COUNT", "10"]);
    let during = writes.load(Ordering::Relaxed) - before;
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer thread");

    let mut seen: HashMap<&[u8], usize> = HashMap::new();
    for k in &keys {
        *seen.entry(k.as_slice()).or_default() += 1;
    }
    for i in 0..N {
        let key = format!("orig:{i}");
        assert_eq!(seen.get(key.as_bytes()), Some(&1), "{key} returned {:?} times", seen.get(key.as_bytes()));
    }
    assert!(seen.values().all(|&n| n == 1), "some key was returned more than once");
    assert!(calls >= N / 10, "COUNT 10 over {N} keys took only {calls} calls");
    assert!(during > 0, "the writer made no changes during the scan");
}
