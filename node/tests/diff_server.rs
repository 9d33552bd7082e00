//! Differential tests (strata vs redis) for the connection and server
//! commands: PING, ECHO, HELLO, AUTH, SELECT, CLIENT, COMMAND, CONFIG, INFO,
//! DBSIZE, FLUSHDB, FLUSHALL, SWAPDB, TIME, LASTSAVE, ROLE, DEBUG, MEMORY,
//! SHUTDOWN (errors only), RESET.

mod support;

use support::*;

/// The map entries of a HELLO reply (RESP3 map or RESP2 flat array).
fn hello_fields(f: &Frame) -> Vec<(String, Frame)> {
    let pairs: Vec<(Frame, Frame)> = match f {
        Frame::Map(m) => m.clone(),
        Frame::Array(v) => v.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect(),
        other => panic!("HELLO reply is not a map: {other}"),
    };
    pairs.into_iter().map(|(k, v)| (k.as_str().expect("HELLO key").to_string(), v)).collect()
}

/// HELLO replies agree on shape and on every field but the client id.
fn same_hello(a: &Frame, b: &Frame) -> Result<(), String> {
    if a.kind() != b.kind() {
        return Err(format!("reply kinds differ ({} vs {})", a.kind(), b.kind()));
    }
    let (fa, fb) = (hello_fields(a), hello_fields(b));
    let keys = |f: &[(String, Frame)]| f.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    if keys(&fa) != keys(&fb) {
        return Err("HELLO keys differ".into());
    }
    for ((k, va), (_, vb)) in fa.iter().zip(&fb) {
        let comparable = if k == "id" { va.kind() == vb.kind() } else { va == vb };
        if !comparable {
            return Err(format!("HELLO field {k} differs"));
        }
    }
    Ok(())
}

#[test]
fn ping_echo_hello_auth_select() {
    let mut d = Diff::new();
    d.exact(&["PING"]);
    d.exact(&["ping", "hello world"]);
    d.err(&["PING", "a", "b"]);
    d.exact(&["ECHO", "hi"]);
    d.exact(&["ECHO", ""]);
    d.err(&["ECHO"]);
    d.err(&["ECHO", "a", "b"]);

    d.check(&["HELLO"], same_hello);
    d.check(&["HELLO", "2"], same_hello);
    d.err(&["HELLO", "1"]);
    d.err(&["HELLO", "4"]);
    d.err(&["HELLO", "-1"]);
    d.err(&["HELLO", "abc"]);
    d.err(&["HELLO", "2", "FOO"]);
    d.err(&["HELLO", "2", "AUTH", "default"]);
    d.err(&["HELLO", "2", "SETNAME"]);
    d.err(&["HELLO", "2", "SETNAME", "a b"]);
    d.err(&["HELLO", "2", "AUTH", "bob", "pw"]);
    d.check(&["HELLO", "2", "SETNAME", "n1", "SETNAME", "n2"], same_hello);
    d.exact(&["CLIENT", "GETNAME"]);
    // Without requirepass the default user accepts any password.
    d.check(&["HELLO", "2", "AUTH", "default", "whatever"], same_hello);

    d.err(&["AUTH", "x"]);
    d.exact(&["AUTH", "default", "x"]);
    d.err(&["AUTH", "bob", "x"]);
    d.err(&["AUTH", "a", "b", "c"]);
    d.err(&["AUTH"]);

    d.err(&["SELECT", "16"]);
    d.err(&["SELECT", "-1"]);
    d.err(&["SELECT", "x"]);
    d.err(&["SELECT", "01"]);
    d.err(&["SELECT", "1.5"]);
    d.err(&["SELECT"]);
    d.err(&["SELECT", "0", "1"]);
    d.exact(&["SELECT", "15"]);
    d.exact(&["SELECT", "0"]);
    d.finish();
}

#[test]
fn hello3_switches_protocol_and_reset_goes_back() {
    let mut d = Diff::new();
    let (a, b) = d.check(&["HELLO", "3"], same_hello);
    assert!(matches!(a, Frame::Map(_)) && matches!(b, Frame::Map(_)));
    d.exact(&["CONFIG", "GET", "maxmemory"]);
    d.exact(&["CLIENT", "GETNAME"]);
    d.exact(&["CLIENT", "TRACKINGINFO"]);
    d.type_only(&["CLIENT", "INFO"]);
    d.exact(&["INFO", "cluster"]);
    d.exact(&["INFO", "nosuchsection"]);
    d.exact(&["COMMAND", "INFO", "nosuchcommand"]);
    d.exact(&["COMMAND", "DOCS", "nosuchcommand"]);
    d.exact(&["MEMORY", "USAGE", "nosuchkey"]);
    d.exact(&["ROLE"]);
    d.exact(&["SELECT", "3"]);
    d.exact(&["CLIENT", "SETNAME", "before-reset"]);
    d.exact(&["RESET"]);
    // Back to RESP2, database 0, no name.
    d.exact(&["CONFIG", "GET", "maxmemory"]);
    d.exact(&["CLIENT", "GETNAME"]);
    d.exact(&["MEMORY", "USAGE", "nosuchkey"]);
    d.exact(&["DBSIZE"]);
    d.finish();
}

#[test]
fn client_subcommands() {
    let mut d = Diff::new();
    d.exact(&["CLIENT", "GETNAME"]);
    d.err(&["CLIENT", "SETNAME", "a b"]);
    d.err(&["CLIENT", "SETNAME", "a\nb"]);
    d.exact(&["CLIENT", "SETNAME", "worker-1"]);
    d.exact(&["CLIENT", "GETNAME"]);
    d.exact(&["CLIENT", "SETNAME", ""]);
    d.exact(&["CLIENT", "GETNAME"]);
    d.err(&["CLIENT", "GETNAME", "x"]);
    d.err(&["CLIENT", "SETNAME"]);
    d.err(&["CLIENT", "ID", "x"]);
    d.type_only(&["CLIENT", "ID"]);
    d.err(&["CLIENT"]);
    d.err(&["CLIENT", "FOO"]);
    d.err(&["client", "nosuch", "arg"]);
    d.err(&["CLIENT", "NO-EVICT"]);
    d.err(&["CLIENT", "NO-EVICT", "maybe"]);
    d.exact(&["CLIENT", "NO-EVICT", "ON"]);
    d.exact(&["CLIENT", "no-evict", "off"]);
    d.err(&["CLIENT", "REPLY"]);
    d.err(&["CLIENT", "REPLY", "maybe"]);
    d.exact(&["CLIENT", "REPLY", "ON"]);
    d.exact(&["CLIENT", "GETREDIR"]);
    d.exact(&["CLIENT", "TRACKINGINFO"]);
    d.type_only(&["CLIENT", "INFO"]);
    d.type_only(&["CLIENT", "LIST"]);
    d.err(&["CLIENT", "LIST", "TYPE", "foo"]);
    d.exact(&["CLIENT", "LIST", "TYPE", "master"]);
    d.exact(&["CLIENT", "LIST", "TYPE", "replica"]);
    d.exact(&["CLIENT", "LIST", "TYPE", "pubsub"]);
    d.err(&["CLIENT", "LIST", "TYPE"]);
    d.err(&["CLIENT", "LIST", "ID", "x"]);
    d.err(&["CLIENT", "LIST", "ID"]);
    d.exact(&["CLIENT", "LIST", "ID", "0"]);
    d.exact(&["CLIENT", "LIST", "ID", "-5", "999999"]);
    d.err(&["CLIENT", "LIST", "FOO"]);
    d.err(&["CLIENT", "LIST", "TYPE", "normal", "ID", "1"]);
    d.err(&["CLIENT", "KILL"]);
    d.err(&["CLIENT", "KILL", "1.2.3.4:5"]);
    d.err(&["CLIENT", "KILL", "ID"]);
    d.err(&["CLIENT", "KILL", "ID", "x"]);
    d.err(&["CLIENT", "KILL", "ID", "0"]);
    d.exact(&["CLIENT", "KILL", "ID", "999999"]);
    d.err(&["CLIENT", "KILL", "ID", "999999", "SKIPME", "maybe"]);
    d.err(&["CLIENT", "KILL", "ID", "999999", "SKIPME"]);
    d.err(&["CLIENT", "KILL", "TYPE", "foo"]);
    d.exact(&["CLIENT", "KILL", "TYPE", "master"]);
    d.exact(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
    d.err(&["CLIENT", "KILL", "USER", "bob"]);
    d.exact(&["CLIENT", "KILL", "USER", "default"]);
    d.err(&["CLIENT", "KILL", "FOO", "bar"]);
    d.exact(&["CLIENT", "KILL", "ADDR", "1.2.3.4:5", "LADDR", "6.7.8.9:10"]);
    d.finish();
}

#[test]
fn ping_in_resp2_subscribed_mode() {
    let mut d = Diff::new();
    d.exact(&["SUBSCRIBE", "chan"]);
    d.exact(&["PING"]);
    d.exact(&["PING", "hey"]);
    d.err(&["ECHO", "x"]);
    d.exact(&["RESET"]);
    d.exact(&["PING"]);
    d.finish();
}

#[test]
fn dbsize_flush_swapdb() {
    let mut d = Diff::new();
    d.exact(&["FLUSHALL"]);
    d.exact(&["DBSIZE"]);
    d.err(&["DBSIZE", "x"]);
    d.exact(&["SET", "a", "1"]);
    d.exact(&["SELECT", "1"]);
    d.exact(&["SET", "b", "2"]);
    d.exact(&["SET", "c", "3"]);
    d.exact(&["DBSIZE"]);
    d.exact(&["SELECT", "0"]);
    d.exact(&["DBSIZE"]);
    d.exact(&["SWAPDB", "0", "1"]);
    d.exact(&["DBSIZE"]);
    d.exact(&["GET", "b"]);
    d.exact(&["GET", "a"]);
    d.exact(&["SWAPDB", "1", "0"]);
    d.exact(&["GET", "a"]);
    d.exact(&["SWAPDB", "0", "0"]);
    d.err(&["SWAPDB", "a", "b"]);
    d.err(&["SWAPDB", "0", "b"]);
    d.err(&["SWAPDB", "0", "16"]);
    d.err(&["SWAPDB", "-1", "1"]);
    d.err(&["SWAPDB", "0"]);
    d.exact(&["INFO", "keyspace"]);
    d.err(&["FLUSHDB", "x"]);
    d.err(&["FLUSHDB", "ASYNC", "SYNC"]);
    d.err(&["FLUSHALL", "ASYNC", "SYNC"]);
    d.exact(&["FLUSHDB", "async"]);
    d.exact(&["DBSIZE"]);
    d.exact(&["SELECT", "1"]);
    d.exact(&["DBSIZE"]);
    d.exact(&["FLUSHDB", "SYNC"]);
    d.exact(&["DBSIZE"]);
    d.exact(&["SET", "k", "v"]);
    d.exact(&["FLUSHALL", "sync"]);
    d.exact(&["DBSIZE"]);
    d.exact(&["INFO", "keyspace"]);
    d.finish();
}

#[test]
fn flush_and_swapdb_invalidate_watch_like_redis() {
    let mut d = Diff::new();
    // A watched key that does not exist survives a flush (Redis 7.0).
    d.exact(&["SET", "other", "1"]);
    d.exact(&["WATCH", "absent"]);
    d.exact(&["FLUSHALL"]);
    d.exact(&["MULTI"]);
    d.exact(&["PING"]);
    d.exact(&["EXEC"]);
    // A watched key that existed is invalidated.
    d.exact(&["SET", "present", "1"]);
    d.exact(&["WATCH", "present"]);
    d.exact(&["FLUSHDB"]);
    d.exact(&["MULTI"]);
    d.exact(&["PING"]);
    d.exact(&["EXEC"]);
    // SWAPDB: a key that appears in the watched database invalidates it.
    d.exact(&["SELECT", "1"]);
    d.exact(&["SET", "w", "1"]);
    d.exact(&["SELECT", "0"]);
    d.exact(&["WATCH", "w"]);
    d.exact(&["SWAPDB", "0", "1"]);
    d.exact(&["MULTI"]);
    d.exact(&["GET", "w"]);
    d.exact(&["EXEC"]);
    // ... and a watched key absent from both databases does not.
    d.exact(&["WATCH", "nowhere"]);
    d.exact(&["SWAPDB", "0", "1"]);
    d.exact(&["MULTI"]);
    d.exact(&["PING"]);
    d.exact(&["EXEC"]);
    d.exact(&["FLUSHALL"]);
    d.finish();
}

#[test]
fn time_lastsave_role_info_shutdown_errors() {
    let mut d = Diff::new();
    let a = d.type_only(&["TIME"]);
    let parts = a.as_array().expect("TIME is an array");
    assert_eq!(parts.len(), 2);
    let secs: u64 = parts[0].as_str().unwrap().parse().unwrap();
    let micros: u64 = parts[1].as_str().unwrap().parse().unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    assert!(secs.abs_diff(now) <= 2 && micros < 1_000_000, "TIME {secs} {micros}");
    d.err(&["TIME", "x"]);
    let last = d.type_only(&["LASTSAVE"]).as_int().unwrap() as u64;
    assert!(last <= now && now - last < 60, "LASTSAVE {last}");
    d.exact(&["ROLE"]);
    d.err(&["ROLE", "x"]);
    d.exact(&["INFO", "cluster"]);
    d.exact(&["INFO", "CLUSTER"]);
    d.exact(&["INFO", "keyspace", "cluster"]);
    d.exact(&["INFO", "nosuch"]);
    d.exact(&["INFO", "modules"]);
    let info = d.type_only(&["INFO"]);
    let text = info.as_str().unwrap();
    assert!(text.starts_with("# Server\r\nredis_version:7.0.15\r\n"), "{text}");
    d.type_only(&["INFO", "all"]);
    d.type_only(&["INFO", "everything"]);
    d.type_only(&["INFO", "server", "clients"]);
    d.err(&["SHUTDOWN", "ABORT"]);
    d.err(&["SHUTDOWN", "FOO"]);
    d.err(&["SHUTDOWN", "NOSAVE", "SAVE"]);
    d.err(&["SHUTDOWN", "ABORT", "NOW"]);
    d.finish();
}

#[test]
fn debug_and_memory() {
    let redis = Server::redis_with(&["--enable-debug-command", "yes"]);
    let mut d = Diff::with_servers(Server::strata(), redis);
    d.err(&["DEBUG"]);
    d.err(&["DEBUG", "FOO"]);
    d.err(&["DEBUG", "OBJECT"]);
    d.err(&["DEBUG", "SLEEP"]);
    d.exact(&["DEBUG", "SLEEP", "0"]);
    d.exact(&["DEBUG", "SLEEP", "abc"]);
    d.err(&["DEBUG", "OBJECT", "nokey"]);
    d.exact(&["SET", "s", "hello"]);
    d.exact(&["SET", "i", "12345"]);
    for (key, encoding, len) in [("s", "embstr", "serializedlength:6"), ("i", "int", "serializedlength:3")] {
        d.check(&["DEBUG", "OBJECT", key], |a, b| {
            for f in [a, b] {
                let s = f.as_str().ok_or("not a string")?;
                let ok = s.starts_with("Value at:")
                    && s.contains(&format!(" encoding:{encoding} "))
                    && s.contains(len)
                    && s.contains(" lru_seconds_idle:");
                if !ok || f.kind() != "simple" {
                    return Err(format!("unexpected DEBUG OBJECT reply {f}"));
                }
            }
            Ok(())
        });
    }
    d.exact(&["MEMORY", "USAGE", "nokey"]);
    let usage = d.type_only(&["MEMORY", "USAGE", "s"]).as_int().unwrap();
    assert!(usage > 5, "MEMORY USAGE {usage}");
    d.type_only(&["MEMORY", "USAGE", "s", "SAMPLES", "0"]);
    d.err(&["MEMORY", "USAGE", "s", "SAMPLES", "x"]);
    d.err(&["MEMORY", "USAGE", "s", "SAMPLES", "-1"]);
    d.err(&["MEMORY", "USAGE", "s", "FOO", "1"]);
    d.err(&["MEMORY", "USAGE", "s", "SAMPLES"]);
    d.err(&["MEMORY", "USAGE"]);
    d.err(&["MEMORY"]);
    d.err(&["MEMORY", "FOO"]);
    d.err(&["MEMORY", "STATS", "x"]);
    d.exact(&["MEMORY", "HELP"]);
    d.exact(&["MEMORY", "PURGE"]);
    d.type_only(&["MEMORY", "DOCTOR"]);
    d.type_only(&["MEMORY", "STATS"]);
    d.type_only(&["MEMORY", "MALLOC-STATS"]);
    d.finish();
}

/// The first seven fields of a COMMAND INFO entry: name, arity, flags,
/// first key, last key, step, ACL categories (sets compared sorted).
fn first7(f: &Frame) -> Frame {
    match f.as_array() {
        Some(v) if v.len() >= 7 => Frame::Array(v[..7].iter().map(Frame::sorted).collect()),
        _ => f.clone(),
    }
}

fn same_first7(a: &Frame, b: &Frame) -> Result<(), String> {
    let (ea, eb) = (a.as_array().ok_or("not an array")?, b.as_array().ok_or("not an array")?);
    if ea.len() != eb.len() {
        return Err("different number of entries".into());
    }
    for (x, y) in ea.iter().zip(eb) {
        if first7(x) != first7(y) {
            return Err(format!("COMMAND INFO differs:\n  strata {}\n  redis  {}", first7(x), first7(y)));
        }
    }
    Ok(())
}

/// Commands of this family (all of them exist in Redis 7.0).
const FAMILY: &[&str] = &[
    "ping", "echo", "hello", "auth", "select", "quit", "reset", "client", "command", "config", "info", "dbsize",
    "flushdb", "flushall", "swapdb", "time", "lastsave", "debug", "memory", "role", "shutdown",
];

#[test]
fn command_info_count_list() {
    let mut d = Diff::new();
    for name in FAMILY {
        d.check(&["COMMAND", "INFO", name], same_first7);
    }
    d.check(&["COMMAND", "INFO", "GET", "set", "client|list", "CONFIG|GET", "memory|usage"], same_first7);
    d.exact(&["COMMAND", "INFO", "nosuchcommand"]);
    d.exact(&["COMMAND", "INFO", "client|nosuch"]);
    // The subcommands Strata lists under its containers are Redis's.
    for container in ["client", "config", "command", "memory"] {
        let (a, b) = d.run(Mode::TypeOnly, &["COMMAND", "INFO", container]);
        let subs =
            |f: &Frame| -> Vec<Frame> { f.as_array().unwrap()[0].as_array().unwrap()[9].as_array().unwrap().to_vec() };
        let redis_subs: Vec<Frame> = subs(&b).iter().map(first7).collect();
        for s in subs(&a).iter().map(first7) {
            let name = &s.as_array().unwrap()[0];
            // Redis 7.2's CLIENT SETINFO and NO-TOUCH are extensions here.
            if ["client|setinfo", "client|no-touch"].contains(&name.as_str().unwrap()) {
                continue;
            }
            assert!(redis_subs.contains(&s), "{container}: {s} not as in redis");
        }
    }

    // COUNT is this server's own number of commands.
    let count = d.type_only(&["COMMAND", "COUNT"]).as_int().unwrap();
    let all = d.type_only(&["COMMAND"]);
    assert_eq!(all.as_array().unwrap().len() as i64, count);
    d.err(&["COMMAND", "COUNT", "x"]);
    let list = d.type_only(&["COMMAND", "LIST"]);
    assert!(list.as_array().unwrap().len() as i64 >= count);
    d.exact(&["COMMAND", "LIST", "FILTERBY", "MODULE", "x"]);
    d.exact(&["COMMAND", "LIST", "FILTERBY", "ACLCAT", "nosuchcategory"]);
    d.err(&["COMMAND", "LIST", "FILTERBY", "foo", "x"]);
    d.err(&["COMMAND", "LIST", "FILTERBY"]);
    d.err(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "get", "extra"]);
    d.err(&["COMMAND", "LIST", "foo"]);
    d.err(&["COMMAND", "foo"]);
    d.type_only(&["COMMAND", "HELP"]);
    // Filtered lists are subsets of Redis's (Redis has more commands).
    for filter in [["PATTERN", "client*"], ["PATTERN", "CONFIG|*"], ["ACLCAT", "connection"], ["ACLCAT", "KEYSPACE"]] {
        d.check(&["COMMAND", "LIST", "FILTERBY", filter[0], filter[1]], |a, b| {
            let theirs = b.as_array().ok_or("not an array")?;
            let mine = a.as_array().ok_or("not an array")?;
            if mine.is_empty() {
                return Err("empty filtered list".into());
            }
            let extension = |n: &Frame| matches!(n.as_str(), Some("client|setinfo" | "client|no-touch"));
            match mine.iter().find(|n| !theirs.contains(n) && !extension(n)) {
                Some(n) => Err(format!("{n} is not in redis's list")),
                None => Ok(()),
            }
        });
    }
    d.finish();
}

#[test]
fn command_docs() {
    let mut d = Diff::new();
    d.exact(&["COMMAND", "DOCS", "nosuchcommand"]);
    for name in ["ping", "config", "client|list", "dbsize"] {
        d.check(&["COMMAND", "DOCS", name], |a, b| {
            let pairs = |f: &Frame| -> Vec<(Frame, Frame)> {
                let v = f.as_array().expect("RESP2 docs are arrays");
                v.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect()
            };
            let (da, db) = (pairs(a), pairs(b));
            if da.len() != 1 || db.len() != 1 || da[0].0 != db[0].0 {
                return Err("different documented commands".into());
            }
            // Every field Strata documents has Redis's value (Redis has more fields).
            let (fa, fb) = (pairs(&da[0].1), pairs(&db[0].1));
            for (k, v) in &fa {
                if k.as_str() == Some("subcommands") {
                    continue;
                }
                if !fb.contains(&(k.clone(), v.clone())) {
                    return Err(format!("field {k} = {v} differs"));
                }
            }
            if !fa.iter().any(|(k, _)| k.as_str() == Some("group")) {
                return Err("no group".into());
            }
            Ok(())
        });
    }
    d.finish();
}

#[test]
fn command_getkeys() {
    let mut d = Diff::new();
    d.exact(&["COMMAND", "GETKEYS", "get", "k"]);
    d.exact(&["COMMAND", "GETKEYS", "SET", "k", "v", "EX", "10"]);
    d.exact(&["COMMAND", "GETKEYS", "mset", "a", "1", "b", "2"]);
    d.exact(&["COMMAND", "GETKEYS", "mset", "a", "b", "c"]);
    d.exact(&["COMMAND", "GETKEYS", "del", "a", "b", "c"]);
    d.exact(&["COMMAND", "GETKEYS", "rpoplpush", "src", "dst"]);
    d.exact(&["COMMAND", "GETKEYS", "blpop", "l1", "l2", "0"]);
    d.exact(&["COMMAND", "GETKEYS", "zunionstore", "dst", "2", "a", "b", "WEIGHTS", "1", "2"]);
    d.exact(&["COMMAND", "GETKEYS", "memory", "usage", "k"]);
    d.err(&["COMMAND", "GETKEYS", "memory", "stats"]);
    d.err(&["COMMAND", "GETKEYS", "client", "list"]);
    d.err(&["COMMAND", "GETKEYS", "ping", "x"]);
    d.err(&["COMMAND", "GETKEYS", "keys", "*"]);
    d.err(&["COMMAND", "GETKEYS", "dbsize", "x"]);
    d.err(&["COMMAND", "GETKEYS", "nosuch", "a"]);
    d.err(&["COMMAND", "GETKEYS", "set", "a"]);
    d.err(&["COMMAND", "GETKEYS", "get"]);
    d.err(&["COMMAND", "GETKEYS"]);
    d.finish();
}

#[test]
fn config_get_set() {
    let mut d = Diff::new();
    for name in [
        "maxmemory",
        "MAXMEMORY",
        "maxmemory-policy",
        "maxmemory-samples",
        "maxclients",
        "timeout",
        "tcp-keepalive",
        "requirepass",
        "proto-max-bulk-len",
        "client-query-buffer-limit",
        "loglevel",
        "lfu-log-factor",
        "lfu-decay-time",
        "databases",
        "save",
        "appendonly",
        "notify-keyspace-events",
        "hz",
        "nosuchparam",
    ] {
        d.exact(&["CONFIG", "GET", name]);
    }
    d.exact(&["CONFIG", "GET", "maxmemory", "MAXMEMORY"]);
    d.unordered_pairs(&["CONFIG", "GET", "save", "appendonly", "timeout"]);
    d.unordered_pairs(&["CONFIG", "GET", "lfu-*"]);
    d.err(&["CONFIG", "GET"]);
    d.err(&["CONFIG"]);
    d.err(&["CONFIG", "FOO"]);
    d.exact(&["CONFIG", "HELP"]);

    // Errors, in Redis's priority order.
    d.err(&["CONFIG", "SET", "maxmemory"]);
    d.err(&["CONFIG", "SET", "maxmemory", "1", "maxmemory-policy"]);
    d.err(&["CONFIG", "SET", "foo", "1"]);
    d.err(&["CONFIG", "SET", "maxmemory", "1mb", "foo", "2mb"]);
    d.err(&["CONFIG", "SET", "databases", "4"]);
    d.err(&["CONFIG", "SET", "unixsocket", "/tmp/x.sock"]);
    d.err(&["CONFIG", "SET", "maxmemory", "1mb", "maxmemory", "2mb"]);
    d.err(&["CONFIG", "SET", "maxmemory", "abc"]);
    d.err(&["CONFIG", "SET", "maxmemory", "-1"]);
    d.err(&["CONFIG", "SET", "maxmemory", "1.5mb"]);
    d.err(&["CONFIG", "SET", "maxmemory-samples", "x"]);
    d.err(&["CONFIG", "SET", "maxmemory-samples", "0"]);
    d.err(&["CONFIG", "SET", "timeout", "-1"]);
    d.err(&["CONFIG", "SET", "timeout", "1.5"]);
    d.err(&["CONFIG", "SET", "maxclients", "0"]);
    d.err(&["CONFIG", "SET", "loglevel", "bad"]);
    d.err(&["CONFIG", "SET", "proto-max-bulk-len", "1"]);
    d.err(&["CONFIG", "SET", "client-query-buffer-limit", "1"]);
    d.err(&["CONFIG", "SET", "client-output-buffer-limit", "normal 0 0 0 pubsub 1"]);
    d.err(&["CONFIG", "SET", "client-output-buffer-limit", "foo 1 1 1"]);
    d.err(&["CONFIG", "SET", "client-output-buffer-limit", "pubsub x 1 1"]);
    d.err(&["CONFIG", "SET", "client-output-buffer-limit", "pubsub 1 1 -1"]);
    d.err(&["CONFIG", "SET", "lfu-log-factor", "-1"]);
    d.err(&["CONFIG", "SET", "appendonly", "maybe"]);

    // Successful changes, read back.
    d.exact(&["CONFIG", "SET", "maxmemory", "100MB"]);
    d.exact(&["CONFIG", "GET", "maxmemory"]);
    d.exact(&["CONFIG", "SET", "maxmemory-policy", "ALLKEYS-LRU"]);
    d.exact(&["CONFIG", "GET", "maxmemory-policy"]);
    d.exact(&["CONFIG", "SET", "maxmemory", "10mb", "maxmemory-samples", "7", "timeout", "300"]);
    d.unordered_pairs(&["CONFIG", "GET", "maxmemory", "maxmemory-samples", "timeout"]);
    // All or nothing: one bad value and nothing changes.
    d.err(&["CONFIG", "SET", "maxmemory-samples", "9", "maxmemory", "abc"]);
    d.exact(&["CONFIG", "GET", "maxmemory-samples"]);
    d.exact(&["CONFIG", "SET", "loglevel", "WARNING"]);
    d.exact(&["CONFIG", "GET", "loglevel"]);
    d.exact(&["CONFIG", "SET", "lfu-log-factor", "20", "lfu-decay-time", "3"]);
    d.unordered_pairs(&["CONFIG", "GET", "lfu-*"]);
    d.exact(&["CONFIG", "SET", "proto-max-bulk-len", "2mb"]);
    d.exact(&["CONFIG", "GET", "proto-max-bulk-len"]);
    d.exact(&["CONFIG", "SET", "save", ""]);
    d.exact(&["CONFIG", "SET", "appendonly", "no"]);
    d.exact(&["CONFIG", "SET", "notify-keyspace-events", ""]);
    d.exact(&["CONFIG", "SET", "maxmemory", "0", "maxmemory-policy", "noeviction", "timeout", "0"]);
    d.exact(&["CONFIG", "SET", "loglevel", "notice", "proto-max-bulk-len", "512mb"]);

    d.exact(&["CONFIG", "RESETSTAT"]);
    d.err(&["CONFIG", "RESETSTAT", "x"]);
    d.err(&["CONFIG", "REWRITE"]);
    d.err(&["CONFIG", "REWRITE", "x"]);
    d.finish();
}

#[test]
fn config_resp3() {
    diff_resp3(&[
        Case::exact(&["CONFIG", "GET", "maxmemory"]),
        Case::exact(&["CONFIG", "GET", "nosuch"]),
        Case::unordered_pairs(&["CONFIG", "GET", "maxmemory-policy", "maxclients"]),
        Case::exact(&["CONFIG", "SET", "maxclients", "5000"]),
        Case::exact(&["CONFIG", "GET", "maxclients"]),
        Case::exact(&["CONFIG", "SET", "maxclients", "10000"]),
        Case::exact(&["CLIENT", "TRACKINGINFO"]),
        Case::exact(&["INFO", "keyspace"]),
        Case::exact(&["ROLE"]),
        Case::type_only(&["MEMORY", "STATS"]),
        Case::type_only(&["MEMORY", "DOCTOR"]),
        Case::type_only(&["INFO"]),
        Case::type_only(&["CLIENT", "LIST"]),
    ]);
}
