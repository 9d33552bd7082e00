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

    /// `run` for commands whose replies are random (SPOP): only the
    /// replies' kinds are compared, the events exactly.
    fn run_random(&mut self, cmds: &[&[&str]]) -> Vec<(String, String)> {
        for cmd in cmds {
            self.d.run(Mode::TypeOnly, cmd);
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
    let server = Server::strata_with(&["--notify-keyspace-events", "KEg"]);
    let mut strata = server.conn();
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
        &["PEXPIRE", "foo", "500000", "GT"],
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
        &["BITFIELD", "bf", "SET", "u8", "0", "255"],
        &["BITFIELD", "bf", "INCRBY", "u8", "8", "0"],
        &["BITFIELD", "bf", "INCRBY", "u8", "0", "0"],
        &["BITFIELD", "bf2", "INCRBY", "u8", "0", "0"],
        &["BITOP", "OR", "dest", "bits", "bf"],
        &["BITOP", "AND", "dest", "none1", "none2"],
        &["PFADD", "hll", "a", "b"],
        &["PFADD", "hll", "a"],
        &["PFMERGE", "hll2", "hll"],
        &["GETRANGE", "ap", "0", "-1"],
    ]);
    assert!(events.len() > 30, "{events:?}");
}

#[test]
fn list_events_match_redis() {
    let mut e = Events::new("KEA");
    let events = e.run(&[
        &["LPUSH", "l", "a", "b"],
        &["RPUSH", "l", "c"],
        &["LPUSHX", "l", "d"],
        &["RPUSHX", "missing", "d"],
        &["LINSERT", "l", "BEFORE", "c", "x"],
        &["LINSERT", "l", "BEFORE", "nope", "x"],
        &["LSET", "l", "0", "z"],
        &["LREM", "l", "0", "x"],
        &["LREM", "l", "0", "nope"],
        &["LTRIM", "l", "0", "10"],
        &["LPOP", "l"],
        &["RPOP", "l", "1"],
        &["LPOP", "l", "0"],
        &["RPUSH", "src", "1", "2", "3"],
        &["LMOVE", "src", "dst", "LEFT", "RIGHT"],
        &["RPOPLPUSH", "src", "dst"],
        &["LMOVE", "dst", "dst", "LEFT", "LEFT"],
        &["LMOVE", "src", "dst", "RIGHT", "LEFT"],
        &["LMPOP", "2", "none", "dst", "RIGHT", "COUNT", "10"],
        &["RPUSH", "b", "1"],
        &["BLPOP", "b", "0.1"],
        &["RPUSH", "t", "1", "2"],
        &["LTRIM", "t", "5", "10"],
        &["RPUSH", "r", "x"],
        &["LREM", "r", "0", "x"],
        &["RPUSH", "p", "1"],
        &["LPOP", "p", "5"],
    ]);
    assert!(events.len() > 40, "{events:?}");
}

#[test]
fn a_blocked_pop_served_by_a_push_is_announced_after_it() {
    let strata = Server::strata();
    let redis = Server::redis();
    let mut blocked = [strata.conn(), redis.conn()];
    let mut e = Events::with_servers(strata, redis, "KEA");
    for c in &mut blocked {
        c.send(&["BLMOVE", "q", "moved", "LEFT", "RIGHT", "5"]);
    }
    std::thread::sleep(Duration::from_millis(200));
    let events = e.run(&[&["RPUSH", "q", "v"]]);
    assert_eq!(events.len(), 8, "{events:?}");
    for c in &mut blocked {
        assert_eq!(c.read_frame(), Frame::bulk("v"));
    }
}

#[test]
fn hash_events_match_redis() {
    let mut e = Events::new("KEA");
    let events = e.run(&[
        &["HSET", "h", "a", "1", "b", "2"],
        &["HSET", "h", "a", "1"],
        &["HMSET", "h", "c", "3"],
        &["HSETNX", "h", "a", "x"],
        &["HSETNX", "h", "d", "x"],
        &["HINCRBY", "h", "n", "5"],
        &["HINCRBY", "h", "a", "x"],
        &["HINCRBYFLOAT", "h", "f", "1.5"],
        &["HDEL", "h", "nope"],
        &["HDEL", "h", "a", "b"],
        &["HDEL", "h", "c", "d", "n", "f"],
        &["HGET", "h", "a"],
    ]);
    assert!(events.len() > 15, "{events:?}");
}

#[test]
fn set_events_match_redis() {
    let mut e = Events::new("KEA");
    let events =
        e.run(&[&["SADD", "s", "a", "b", "c", "d"], &["SADD", "s", "a"], &["SREM", "s", "x"], &["SREM", "s", "a"]]);
    let popped = e.run_random(&[&["SPOP", "s"], &["SPOP", "s", "0"], &["SPOP", "s", "1"]]);
    assert_eq!(
        channels(&popped),
        ["__keyspace@0__:s", "__keyevent@0__:spop", "__keyspace@0__:s", "__keyevent@0__:spop"]
    );
    let more = e.run(&[
        &["DEL", "s"],
        &["SADD", "s", "b", "c"],
        &["SADD", "t", "x", "y"],
        &["SMOVE", "t", "s", "x"],
        &["SMOVE", "t", "u", "y"],
        &["SMOVE", "s", "s", "x"],
        &["SINTERSTORE", "i", "s", "u"],
        &["SUNIONSTORE", "un", "s", "u"],
        &["SDIFFSTORE", "d", "s", "u"],
        &["SDIFFSTORE", "d", "u", "u"],
        &["SINTERSTORE", "nothing", "missing", "s"],
        &["SADD", "one", "1"],
        &["SPOP", "one"],
        &["SADD", "r", "1"],
        &["SREM", "r", "1"],
    ]);
    let all = e.run_random(&[&["SADD", "small", "1", "2"], &["SPOP", "small", "5"]]);
    assert!(events.len() + more.len() + all.len() > 25, "{events:?} {more:?} {all:?}");
}

#[test]
fn zset_events_match_redis() {
    let mut e = Events::new("KEA");
    let events = e.run(&[
        &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
        &["ZADD", "z", "1", "a"],
        &["ZADD", "z", "XX", "CH", "5", "a"],
        &["ZADD", "z", "INCR", "1", "a"],
        &["ZINCRBY", "z", "1", "b"],
        &["ZREM", "z", "nope"],
        &["ZREM", "z", "c"],
        &["ZADD", "z", "10", "x", "11", "y", "12", "w"],
        &["ZREMRANGEBYSCORE", "z", "10", "10"],
        &["ZREMRANGEBYRANK", "z", "0", "0"],
        &["ZREMRANGEBYLEX", "z", "[y", "[y"],
        &["ZREMRANGEBYSCORE", "z", "100", "200"],
        &["ZADD", "z2", "1", "b", "7", "q"],
        &["ZUNIONSTORE", "u", "2", "z", "z2"],
        &["ZINTERSTORE", "i", "2", "z", "z2"],
        &["ZDIFFSTORE", "d", "2", "z", "z2"],
        &["ZINTERSTORE", "i", "2", "z", "missing"],
        &["ZRANGESTORE", "rs", "z2", "0", "-1"],
        &["ZRANGESTORE", "rs", "missing", "0", "-1"],
        &["ZPOPMIN", "z2"],
        &["ZPOPMAX", "z2", "5"],
        &["ZADD", "m", "1", "a"],
        &["ZMPOP", "1", "m", "MIN"],
        &["ZADD", "bz", "1", "a", "2", "b"],
        &["BZPOPMAX", "bz", "0.1"],
        &["GEOADD", "g", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania"],
        &["GEOSEARCHSTORE", "gs", "g", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ASC"],
        &["GEORADIUS", "g", "15", "37", "200", "km", "STORE", "gr"],
        &["GEOSEARCHSTORE", "gs", "g", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km"],
        &["GEOSEARCHSTORE", "gr", "nosuch", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km"],
    ]);
    assert!(events.len() > 40, "{events:?}");
}

#[test]
fn stream_events_match_redis() {
    let mut e = Events::new("KEA");
    let events = e.run(&[
        &["XGROUP", "CREATE", "st", "g", "$", "MKSTREAM"],
        &["XGROUP", "CREATECONSUMER", "st", "g", "Bob"],
        &["XGROUP", "CREATECONSUMER", "st", "g", "Bob"],
        &["XADD", "st", "1-1", "f", "v"],
        &["XADD", "st", "MAXLEN", "1", "2-1", "f", "v"],
        &["XADD", "nost", "NOMKSTREAM", "*", "f", "v"],
        &["XREADGROUP", "GROUP", "g", "Alice", "STREAMS", "st", ">"],
        &["XREADGROUP", "GROUP", "g", "Alice", "STREAMS", "st", "0"],
        &["XCLAIM", "st", "g", "Mike", "0", "2-1", "FORCE"],
        &["XGROUP", "DELCONSUMER", "st", "g", "Lee"],
        &["XAUTOCLAIM", "st", "g", "Bob", "0", "0"],
        &["XAUTOCLAIM", "st", "g", "Zed", "0", "0"],
        &["XGROUP", "DELCONSUMER", "st", "g", "Bob"],
        &["XGROUP", "SETID", "st", "g", "0"],
        &["XADD", "st", "3-1", "f", "v"],
        &["XTRIM", "st", "MAXLEN", "1"],
        &["XTRIM", "st", "MAXLEN", "5"],
        &["XDEL", "st", "3-1"],
        &["XDEL", "st", "9-9"],
        &["XSETID", "st", "10-1"],
        &["XACK", "st", "g", "2-1"],
        &["XGROUP", "DESTROY", "st", "g"],
        &["XGROUP", "DESTROY", "st", "g"],
    ]);
    assert!(events.len() > 25, "{events:?}");
}

#[test]
fn new_key_events_only_when_asked() {
    let mut e = Events::new("En");
    let events = e.run(&[
        &["SET", "foo", "bar"],
        &["SET", "foo", "baz"],
        &["SET", "bar", "bar"],
        &["LPUSH", "l", "1"],
        &["RENAME", "l", "l2"],
        &["HSET", "h", "f", "v"],
        &["COPY", "h", "h2"],
        &["MOVE", "h2", "4"],
        &["DEL", "foo"],
        &["INCR", "foo"],
    ]);
    assert_eq!(channels(&events).iter().filter(|c| **c == "__keyevent@0__:new").count(), 7, "{events:?}");
    e.d.exact(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    let events = e.run(&[&["SET", "n1", "v"]]);
    assert!(!events.iter().any(|(c, _)| c.ends_with(":new")), "A does not include n: {events:?}");
}

#[test]
fn lazily_expired_keys_are_announced_before_the_command_events() {
    let mut e = Events::new("KEA");
    e.run(&[&["SET", "k", "v", "PX", "30"], &["SET", "gone", "v", "PX", "30"]]);
    std::thread::sleep(Duration::from_millis(80));
    // Read and write paths both expire the key first (the active expiry
    // may have taken them already; either way the sequences must agree).
    let events = e.run(&[&["GET", "gone"], &["SET", "k", "new"]]);
    assert!(events.iter().any(|(c, _)| c == "__keyspace@0__:k"), "{events:?}");
}

#[test]
fn actively_expired_keys_are_announced() {
    let mut e = Events::new("Ex");
    e.d.exact(&["PSETEX", "foo", "100", "1"]);
    // Nobody touches the key: only the active expiry can remove it.
    let [s, r] = &mut e.subs;
    for sub in [s, r] {
        sub.set_timeout(Some(Duration::from_secs(5)));
        let frame = sub.read_frame();
        assert_eq!(
            frame,
            Frame::Array(vec![
                Frame::bulk("pmessage"),
                Frame::bulk("__key*@*__:*"),
                Frame::bulk("__keyevent@0__:expired"),
                Frame::bulk("foo"),
            ])
        );
    }
}

#[test]
fn evicted_keys_are_announced() {
    let mut e = Events::new("Ee");
    e.d.exact(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    e.d.exact(&["SET", "foo", "bar"]);
    e.d.exact(&["CONFIG", "SET", "maxmemory", "1"]);
    let events = e.compare_events("CONFIG SET maxmemory 1");
    assert_eq!(events, [("__keyevent@0__:evicted".to_string(), "foo".to_string())]);
    e.d.exact(&["CONFIG", "SET", "maxmemory", "0"]);
}

#[test]
fn a_script_and_a_transaction_announce_each_change() {
    let mut e = Events::new("KEA");
    let events = e.run(&[
        &["EVAL", "redis.call('set', KEYS[1], 'v') redis.call('lpush', KEYS[2], 'x') return 1", "2", "{t}a", "{t}b"],
        &["MULTI"],
        &["INCR", "c"],
        &["DEL", "{t}a"],
        &["EXEC"],
    ]);
    assert_eq!(events.len(), 8, "{events:?}");
}

#[test]
fn subscriptions_are_confirmed_even_with_replies_off() {
    let mut d = Diff::new();
    d.exact(&["CONFIG", "SET", "notify-keyspace-events", "KA"]);
    d.send_raw_both(b"CLIENT REPLY OFF\r\nPSUBSCRIBE *\r\nSUBSCRIBE x\r\nUNSUBSCRIBE x\r\n");
    for _ in 0..3 {
        d.compare_next(Mode::Exact);
    }
    d.send_raw_both(b"RESET\r\nCLIENT REPLY SKIP\r\nPSUBSCRIBE *\r\nPING\r\n");
    for _ in 0..3 {
        d.compare_next(Mode::Exact);
    }
    d.finish();
}

#[test]
fn read_misses_are_announced_with_m() {
    let mut e = Events::new("Em");
    let events = e.run(&[
        &["GET", "nokey"],
        &["SET", "k", "v"],
        &["GET", "k"],
        &["MGET", "a", "k", "b"],
        &["EXISTS", "nokey"],
        &["TYPE", "nokey"],
        &["TTL", "nokey"],
        &["STRLEN", "nokey"],
        &["HGET", "nokey", "f"],
        &["LRANGE", "nokey", "0", "-1"],
        &["SMEMBERS", "nokey"],
        &["ZSCORE", "nokey", "m"],
        &["SET", "w", "v"],
        &["DEL", "nokey"],
        &["INCR", "counter"],
        &["LLEN", "nokey"],
        &["SCARD", "nokey"],
        &["HGETALL", "nokey"],
        &["GETRANGE", "nokey", "0", "1"],
        &["BITCOUNT", "nokey"],
        &["PFCOUNT", "nokey"],
        &["SINTER", "nokey", "k2"],
        &["SUNION", "nokey", "k2"],
        &["ZUNION", "2", "nokey", "k2"],
        &["XRANGE", "nokey", "-", "+"],
        &["XLEN", "nokey"],
        &["LINDEX", "nokey", "0"],
        &["SISMEMBER", "nokey", "m"],
        &["GETEX", "nokey"],
        &["GETDEL", "nokey"],
        &["DUMP", "nokey"],
        &["TOUCH", "nokey"],
        &["OBJECT", "ENCODING", "nokey"],
        &["SORT", "nokey"],
        &["LPOP", "nokey"],
        &["COPY", "nokey", "dst"],
        &["ZRANGE", "nokey", "0", "-1"],
        &["HEXISTS", "nokey", "f"],
        &["ZRANK", "nokey", "m"],
    ]);
    assert!(!events.is_empty(), "{events:?}");
}
