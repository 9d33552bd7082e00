//! Every keyspace-mutating command replays: a mix of every kind of write
//! (across databases, in MULTI/EXEC and Lua, SWAPDB, FLUSHDB/FLUSHALL
//! ASYNC, MOVE, COPY ... DB, RENAME, RESTORE, the EXPIRE family, lazy and
//! active expiry, eviction) runs against `--durability sync`; the node is
//! restarted (clean shutdown on SIGTERM, then kill -9) and the whole dataset — per
//! database, per key: TYPE, DUMP and PEXPIRETIME — must be the same.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;
use support::*;

fn start(dir: &DataDir, extra: &[&str]) -> Server {
    start_with_env(dir, extra, &[])
}

fn start_with_env(dir: &DataDir, extra: &[&str], env: &[(&str, &str)]) -> Server {
    let mut args = vec!["--dir", dir.path(), "--durability", "sync"];
    args.extend_from_slice(extra);
    let mut vars = vec![("STRATA_SEGMENT_SIZE", "1048576")];
    vars.extend_from_slice(env);
    let server = Server::strata_with_env(&args, &vars);
    let mut c = server.conn();
    let ok = wait_for(Duration::from_secs(20), || !c.cmd(&["EXISTS", "probe"]).is_error());
    assert!(ok, "still loading after 20 s\n{}", server.logs());
    server
}

/// (db, key) → (TYPE, DUMP payload, PEXPIRETIME).
type Dataset = BTreeMap<(usize, Vec<u8>), (Frame, Frame, Frame)>;

fn dataset(c: &mut RawConn) -> Dataset {
    let mut out = Dataset::new();
    for db in 0..16 {
        c.ok(&["SELECT", &db.to_string()]);
        let mut cursor = "0".to_string();
        loop {
            let reply = c.cmd(&["SCAN", &cursor, "COUNT", "1000"]);
            let parts = reply.as_array().expect("SCAN reply");
            cursor = String::from_utf8(parts[0].as_bytes().unwrap().to_vec()).unwrap();
            for k in parts[1].as_array().unwrap() {
                let k = k.as_bytes().unwrap().to_vec();
                let t = c.cmd(&[b"TYPE".as_slice(), &k]);
                let d = c.cmd(&[b"DUMP".as_slice(), &k]);
                let x = c.cmd(&[b"PEXPIRETIME".as_slice(), &k]);
                out.insert((db, k), (t, d, x));
            }
            if cursor == "0" {
                break;
            }
        }
    }
    c.ok(&["SELECT", "0"]);
    out
}

fn assert_same(before: &Dataset, after: &Dataset, when: &str) {
    for (k, v) in before {
        match after.get(k) {
            Some(a) => assert_eq!(v, a, "{when}: db {} key {:?} differs", k.0, String::from_utf8_lossy(&k.1)),
            None => panic!("{when}: db {} key {:?} lost", k.0, String::from_utf8_lossy(&k.1)),
        }
    }
    for k in after.keys() {
        assert!(before.contains_key(k), "{when}: db {} key {:?} appeared", k.0, String::from_utf8_lossy(&k.1));
    }
}

/// Runs `cmd`, failing on an error reply (the mix must really write).
fn w(c: &mut RawConn, cmd: &[&str]) -> Frame {
    let f = c.cmd(cmd);
    let shown: Vec<String> = cmd.iter().map(|a| a.chars().take(40).collect()).collect();
    assert!(!f.is_error(), "{shown:?}: {f:?}");
    f
}

fn write_mix(c: &mut RawConn) {
    let big = "B".repeat(3000);
    // Strings in db 0.
    w(c, &["SET", "s1", "v1"]);
    w(c, &["SET", "s2", "v2", "EX", "10000"]);
    w(c, &["SETEX", "s3", "20000", "v3"]);
    w(c, &["PSETEX", "s4", "3000000", "v4"]);
    w(c, &["MSET", "m1", "a", "m2", "b", "m3", "c"]);
    w(c, &["MSETNX", "n1", "x", "n2", "y"]);
    w(c, &["SETNX", "n3", "z"]);
    w(c, &["APPEND", "s1", "-appended"]);
    w(c, &["INCR", "ctr"]);
    w(c, &["INCRBY", "ctr", "41"]);
    w(c, &["DECRBY", "ctr", "2"]);
    w(c, &["INCRBYFLOAT", "flt", "1.5"]);
    w(c, &["SETRANGE", "rng", "5", "hello"]);
    w(c, &["SETBIT", "bits", "100", "1"]);
    w(c, &["BITOP", "OR", "bits2", "bits", "s1"]);
    w(c, &["GETSET", "m1", "a2"]);
    w(c, &["GETDEL", "m2"]);
    w(c, &["GETEX", "m3", "PX", "5000000"]);
    w(c, &["SET", "big", &big]);
    // Lists, hashes, sets, sorted sets.
    w(c, &["RPUSH", "l", "a", "b", "c", "d", "e"]);
    w(c, &["LPUSH", "l", "z"]);
    w(c, &["LINSERT", "l", "BEFORE", "c", "bc"]);
    w(c, &["LREM", "l", "1", "d"]);
    w(c, &["LSET", "l", "0", "zz"]);
    w(c, &["LTRIM", "l", "0", "4"]);
    w(c, &["LMOVE", "l", "l2", "LEFT", "RIGHT"]);
    w(c, &["RPOPLPUSH", "l", "l2"]);
    w(c, &["RPUSH", "gone", "only"]);
    w(c, &["LPOP", "gone"]);
    w(c, &["HSET", "h", "f1", "1", "f2", "2", "f3", "3"]);
    w(c, &["HINCRBY", "h", "f1", "10"]);
    w(c, &["HINCRBYFLOAT", "h", "f2", "0.25"]);
    w(c, &["HDEL", "h", "f3"]);
    w(c, &["HSETNX", "h", "f4", "4"]);
    w(c, &["SADD", "st", "a", "b", "c", "1", "2"]);
    w(c, &["SADD", "st2", "b", "c", "d"]);
    w(c, &["SREM", "st", "1"]);
    w(c, &["SMOVE", "st", "st2", "2"]);
    w(c, &["SINTERSTORE", "sinter", "st", "st2"]);
    w(c, &["SUNIONSTORE", "sunion", "st", "st2"]);
    w(c, &["SDIFFSTORE", "sdiff", "st", "st2"]);
    let many: Vec<String> = (0..300).map(|i| format!("member-{i}")).collect();
    let mut sadd = vec!["SADD", "bigset"];
    sadd.extend(many.iter().map(String::as_str));
    w(c, &sadd);
    w(c, &["ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"]);
    w(c, &["ZINCRBY", "z", "2.5", "a"]);
    w(c, &["ZREM", "z", "b"]);
    w(c, &["ZPOPMIN", "z"]);
    w(c, &["ZADD", "z2", "10", "x", "20", "c"]);
    w(c, &["ZUNIONSTORE", "zu", "2", "z", "z2", "WEIGHTS", "1", "2"]);
    w(c, &["ZINTERSTORE", "zi", "2", "z", "z2"]);
    w(c, &["ZRANGESTORE", "zr", "z", "0", "-1"]);
    w(c, &["ZREMRANGEBYSCORE", "z2", "15", "25"]);
    // The EXPIRE family.
    w(c, &["SET", "e1", "v"]);
    w(c, &["EXPIRE", "e1", "100000"]);
    w(c, &["SET", "e2", "v"]);
    w(c, &["PEXPIREAT", "e2", "4102444800000"]);
    w(c, &["SET", "e3", "v"]);
    w(c, &["EXPIREAT", "e3", "4102444800"]);
    w(c, &["EXPIRE", "e3", "5000", "LT"]);
    w(c, &["SET", "e4", "v", "EX", "100"]);
    w(c, &["PERSIST", "e4"]);
    w(c, &["SET", "e5", "v"]);
    w(c, &["EXPIRE", "e5", "-1"]); // deletes
    w(c, &["SET", "e6", "v", "EX", "100"]);
    w(c, &["SET", "e6", "v2", "KEEPTTL"]);
    // Keys: rename, copy, move, restore, delete.
    w(c, &["SET", "r1", "renamed"]);
    w(c, &["RENAME", "r1", "r2"]);
    w(c, &["HSET", "r3", "a", "b"]);
    w(c, &["RENAMENX", "r3", "r4"]);
    w(c, &["COPY", "h", "hcopy"]);
    w(c, &["COPY", "z", "zcopy", "DB", "5"]);
    w(c, &["COPY", "s1", "s2", "REPLACE"]);
    w(c, &["SET", "mv", "moving", "PX", "9000000"]);
    w(c, &["MOVE", "mv", "7"]);
    let payload = c.cmd(&["DUMP", "h"]);
    let payload = payload.as_bytes().unwrap().to_vec();
    assert_eq!(c.cmd(&[b"RESTORE".as_slice(), b"restored", b"0", &payload]), Frame::ok());
    assert_eq!(c.cmd(&[b"RESTORE".as_slice(), b"restored-ttl", b"7000000", &payload]), Frame::ok());
    assert_eq!(c.cmd(&[b"RESTORE".as_slice(), b"s1", b"0", &payload, b"REPLACE"]), Frame::ok());
    w(c, &["DEL", "n1", "n2"]);
    w(c, &["UNLINK", "n3"]);
    // MULTI/EXEC and Lua.
    w(c, &["MULTI"]);
    c.cmd(&["SET", "tx1", "a"]);
    c.cmd(&["INCR", "tx2"]);
    c.cmd(&["RPUSH", "tx3", "x", "y"]);
    c.cmd(&["DEL", "ctr"]);
    let exec = w(c, &["EXEC"]);
    assert_eq!(exec.as_array().map(|a| a.len()), Some(4));
    w(
        c,
        &[
            "EVAL",
            "redis.call('SET', KEYS[1], ARGV[1]); redis.call('HSET', KEYS[2], 'f', ARGV[1]); \
             redis.call('EXPIRE', KEYS[1], 90000); return redis.call('DEL', KEYS[3])",
            "3",
            "lua1",
            "lua2",
            "tx1",
            "from-lua",
        ],
    );
    // Other databases, SWAPDB, FLUSHDB ASYNC.
    for db in 1..=4 {
        w(c, &["SELECT", &db.to_string()]);
        w(c, &["SET", &format!("db{db}"), &db.to_string()]);
        w(c, &["RPUSH", "shared-name", &format!("in-{db}")]);
    }
    w(c, &["SELECT", "2"]);
    w(c, &["HSET", "only2", "a", "1"]);
    w(c, &["SWAPDB", "1", "2"]);
    w(c, &["SWAPDB", "3", "9"]);
    w(c, &["SELECT", "4"]);
    w(c, &["FLUSHDB", "ASYNC"]);
    w(c, &["SET", "after-flush", "4"]);
    w(c, &["SELECT", "11"]);
    w(c, &["SET", "k11", "v"]);
    w(c, &["SELECT", "0"]);
    w(c, &["SWAPDB", "0", "6"]);
    w(c, &["SWAPDB", "6", "0"]);
    // Lazy expiry (read after its deadline) and active expiry (left alone).
    w(c, &["SET", "lazy", "v", "PX", "30"]);
    w(c, &["SADD", "active", "v"]);
    w(c, &["PEXPIRE", "active", "30"]);
    std::thread::sleep(Duration::from_millis(60));
    assert!(c.cmd(&["GET", "lazy"]).is_null(), "lazy expiry");
}

fn check_restarts(extra: &[&str], mix: impl FnOnce(&mut RawConn)) {
    let dir = DataDir::new(&format!("mix{}", extra.len()));
    let mut server = start(&dir, extra);
    let mut c = server.conn();
    mix(&mut c);
    // Active expiry has removed "active" by now (or its TTL has passed: a
    // replay drops it either way).
    std::thread::sleep(Duration::from_millis(300));
    let before = dataset(&mut c);
    assert!(before.len() > 40, "the mix wrote too little: {}", before.len());
    assert!(before.keys().any(|(db, k)| *db == 2 && k == b"db1"), "SWAPDB 1 2 did not move db1");
    assert!(before.keys().any(|(db, k)| *db == 9 && k == b"db3"), "SWAPDB 3 9 did not move db3");
    assert!(!before.keys().any(|(_, k)| k == b"active" || k == b"lazy"), "expired keys still listed");

    // Clean shutdown (SIGTERM: the log is flushed, the node exits).
    let status = server.terminate(Duration::from_secs(10));
    assert!(status.is_some_and(|s| s.success()), "{status:?}\n{}", server.logs());
    let mut server = start(&dir, extra);
    let mut c = server.conn();
    assert_same(&before, &dataset(&mut c), "after a clean shutdown");

    // kill -9 after more writes.
    w(&mut c, &["SELECT", "5"]);
    w(&mut c, &["FLUSHALL", "ASYNC"]);
    w(&mut c, &["SET", "post-flushall", "1"]);
    w(&mut c, &["SWAPDB", "5", "0"]);
    w(&mut c, &["SELECT", "0"]);
    w(&mut c, &["ZADD", "z9", "1", "one"]);
    let before = dataset(&mut c);
    assert_eq!(before.len(), 2, "{before:?}");
    server.kill();
    let server = start(&dir, extra);
    let mut c = server.conn();
    assert_same(&before, &dataset(&mut c), "after kill -9");
}

#[test]
fn every_write_command_replays_after_shutdown_and_kill_9() {
    check_restarts(&[], write_mix);
}

/// The replay applies records on several threads, each owning a share of
/// the partitions: with any number of them (0: all on the recovery thread)
/// the dataset comes back the same, FLUSHALL, SWAPDB and FLUSHDB included.
#[test]
fn the_dataset_is_the_same_whatever_the_number_of_replay_threads() {
    let dir = DataDir::new("threads");
    let mut server = start(&dir, &["--partitions", "16"]);
    let mut c = server.conn();
    write_mix(&mut c);
    // Many keys over every partition: set, overwritten, some deleted, some
    // given a TTL, a database flushed and refilled in between.
    for round in 0..2 {
        for i in 0..1500 {
            w(&mut c, &["SET", &format!("k{i}"), &format!("{round}-{i}")]);
        }
        for i in (0..1500).step_by(7) {
            w(&mut c, &["DEL", &format!("k{i}")]);
        }
        w(&mut c, &["SELECT", "3"]);
        w(&mut c, &["FLUSHDB"]);
        w(&mut c, &["SET", &format!("in3-{round}"), "x"]);
        w(&mut c, &["SELECT", "0"]);
    }
    for i in (1..1500).step_by(5) {
        w(&mut c, &["PEXPIRE", &format!("k{i}"), "600000"]);
    }
    std::thread::sleep(Duration::from_millis(300));
    let before = dataset(&mut c);
    assert!(before.len() > 1300, "{}", before.len());
    server.kill();
    for threads in ["0", "1", "3", "8"] {
        let mut server = start_with_env(&dir, &["--partitions", "16"], &[("STRATA_REPLAY_THREADS", threads)]);
        let mut c = server.conn();
        assert_same(&before, &dataset(&mut c), &format!("with {threads} replay threads"));
        server.kill();
    }
}

/// Replayed with another number of keyspace partitions, SWAPDB and
/// FLUSHDB records move exactly the keys of the partition they name.
#[test]
fn swapdb_and_flushdb_replay_with_another_partition_count() {
    let dir = DataDir::new("parts");
    let mut server = start(&dir, &["--partitions", "16"]);
    let mut c = server.conn();
    for db in 0..3 {
        w(&mut c, &["SELECT", &db.to_string()]);
        for i in 0..200 {
            w(&mut c, &["SET", &format!("k{db}-{i}"), &format!("{db}")]);
        }
    }
    w(&mut c, &["SWAPDB", "0", "1"]);
    w(&mut c, &["SELECT", "2"]);
    w(&mut c, &["FLUSHDB"]);
    w(&mut c, &["SET", "after", "x"]);
    w(&mut c, &["SWAPDB", "2", "0"]);
    let before = dataset(&mut c);
    server.kill();
    for partitions in ["4", "64", "16"] {
        let mut server = start(&dir, &["--partitions", partitions]);
        let mut c = server.conn();
        assert_same(&before, &dataset(&mut c), &format!("with --partitions {partitions}"));
        server.kill();
    }
}

/// Keys evicted under `maxmemory` stay evicted after a restart.
#[test]
fn evicted_keys_stay_evicted_after_a_restart() {
    let dir = DataDir::new("evict");
    let mut server = start(&dir, &[]);
    let mut c = server.conn();
    w(&mut c, &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    let used: u64 = info_field(&mut c, "used_memory").unwrap().parse().unwrap();
    w(&mut c, &["CONFIG", "SET", "maxmemory", &(used + (4 << 20)).to_string()]);
    let v = "e".repeat(10_000);
    for i in 0..1000 {
        // Memory other than keys (the log's buffers) may leave nothing to
        // evict: an OOM error is a write that did not happen, fine here.
        let r = c.cmd(&["SET", &format!("ev{i}"), &v]);
        assert!(r == Frame::ok() || r.error_message().is_some_and(|e| e.starts_with("OOM")), "{r:?}");
    }
    let evicted: u64 = info_field(&mut c, "evicted_keys").unwrap().parse().unwrap();
    assert!(evicted > 100, "no eviction: {evicted}");
    w(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    let before = dataset(&mut c);
    server.kill();
    let server = start(&dir, &[]);
    let mut c = server.conn();
    assert_same(&before, &dataset(&mut c), "after eviction and kill -9");
}
