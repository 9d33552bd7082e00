//! Durability against the real binary: kill -9 under write load, restart
//! on the same dir, and check each mode's promise against the clients'
//! own log of acknowledged writes; warm restarts keep every type and TTL;
//! a corrupted log file never crashes the node; DUMP/RESTORE speak
//! redis-server's payloads.
//!
//! The crash rounds are tests/support/crash.rs's, with kill -9 as the
//! crash; `STRATA_DUR_TEST_BROKEN=1` runs every node with sync replies that
//! do not wait for the fsync: the sync crash test must then fail, which
//! shows it can.

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::crash::{self, Crash, Outcome, crash_rounds};
use support::*;

const SEGMENT: &str = "1048576";
/// How long a restarted node may take to replay its log.
const LOAD: Duration = Duration::from_secs(20);

fn start(dir: &DataDir, mode: &str, extra: &[&str]) -> Server {
    start_with_env(dir, mode, extra, &[])
}

fn start_with_env(dir: &DataDir, mode: &str, extra: &[&str], extra_env: &[(&str, &str)]) -> Server {
    let mut args = vec!["--dir", dir.path(), "--durability", mode];
    args.extend_from_slice(extra);
    let mut env = vec![("STRATA_SEGMENT_SIZE", SEGMENT)];
    env.extend_from_slice(extra_env);
    crash::start_durable(&args, &env, LOAD)
}

fn wait_loaded(server: &Server) {
    crash::wait_loaded(server, LOAD);
}

/// kill -9 of a node on a data dir of its own (one per test, as tests run
/// in parallel).
struct Kill<'a> {
    dir: DataDir,
    mode: &'a str,
    extra: &'a [&'a str],
    env: &'a [(&'a str, &'a str)],
}

impl Crash for Kill<'_> {
    const WHAT: &'static str = "kill";

    fn start(&mut self) -> Server {
        start_with_env(&self.dir, self.mode, self.extra, self.env)
    }

    fn run_for(&self, round: usize) -> Duration {
        Duration::from_millis(150 + (round as u64 * 37) % 200)
    }
}

/// [`crash_rounds`] with kill -9 as the crash; `name` names the data dir.
fn kill_rounds(
    name: &str,
    mode: &'static str,
    extra: &[&str],
    env: &[(&str, &str)],
    rounds: usize,
    hold: Duration,
) -> Outcome {
    crash_rounds(&mut Kill { dir: DataDir::new(name), mode, extra, env }, mode, rounds, hold)
}

#[test]
fn sync_loses_no_acknowledged_write_across_kill_9() {
    let o = kill_rounds("kill9-sync", "sync", &[], &[], 20, Duration::ZERO);
    eprintln!("sync: {o:?}");
    assert!(o.acked > 1000, "too little load to mean anything: {}", o.acked);
    assert_eq!((o.lost, o.phantom), (0, 0), "sync lost acknowledged writes");
}

#[test]
fn periodic_loses_at_most_the_last_interval_across_kill_9() {
    // 10 ms interval: replies are held once the oldest write not yet
    // durable is two intervals old.
    let o = kill_rounds(
        "kill9-periodic",
        "periodic",
        &["--fsync-interval", "10ms"],
        &[],
        20,
        Duration::from_millis(2 * 10),
    );
    eprintln!("periodic: {o:?}");
    assert!(o.acked > 1000, "too little load to mean anything: {}", o.acked);
    assert_eq!((o.broken, o.phantom), (0, 0), "periodic acknowledged writes it later lost past its bound");
}

/// What a loaded machine does to the flush, on purpose: each flush first
/// waits 100 ms (ten intervals), so most kills land while writes wait for
/// a flush and only back-pressure keeps the promise. A node that kept
/// acknowledging would lose writes acknowledged long before later ones.
#[test]
fn periodic_holds_replies_while_a_slow_flush_is_in_flight_across_kill_9() {
    let slow = [("STRATA_TEST_FLUSH_DELAY_MS", "100")];
    let o = kill_rounds(
        "kill9-periodic-slow",
        "periodic",
        &["--fsync-interval", "10ms"],
        &slow,
        8,
        Duration::from_millis(2 * 10),
    );
    eprintln!("periodic, slow flush: {o:?}");
    assert!(o.acked > 200 && o.lost > 0, "too little load, or no kill during a flush, to mean anything: {o:?}");
    assert_eq!((o.broken, o.phantom), (0, 0), "periodic acknowledged writes it later lost past its bound");
}

fn sorted(f: Frame) -> Frame {
    f.sorted()
}

/// Every type with TTLs survives a kill -9 in sync mode, compared with
/// what was written; durability none with a dir keeps nothing.
#[test]
fn restart_keeps_every_type_and_ttl_and_none_keeps_nothing() {
    let dir = DataDir::new("types");
    let mut server = start(&dir, "sync", &[]);
    let mut c = server.conn();
    c.ok(&["SET", "s", "hello"]);
    c.ok(&["SET", "n", "12345"]);
    c.ok(&["SET", "big", &"b".repeat(100_000)]);
    c.cmd(&["RPUSH", "l", "a", "b", "c", "12"]);
    c.cmd(&["HSET", "h", "f1", "v1", "f2", "v2"]);
    c.cmd(&["SADD", "st", "x", "y", "1"]);
    c.cmd(&["SADD", "si", "1", "2", "3"]);
    c.cmd(&["ZADD", "z", "1.5", "a", "-inf", "b", "3", "c"]);
    c.cmd(&["PEXPIRE", "h", "500000"]);
    c.cmd(&["EXPIRE", "z", "1000"]);
    c.ok(&["SET", "short", "v", "PX", "300"]);
    c.ok(&["SET", "gone", "v"]);
    c.cmd(&["DEL", "gone"]);
    c.cmd(&["LPOP", "l"]);
    c.cmd(&["SELECT", "3"]);
    c.ok(&["SET", "db3", "three"]);
    c.cmd(&["SELECT", "4"]);
    c.ok(&["SET", "db4", "four"]);
    c.ok(&["FLUSHDB"]);
    c.cmd(&["SELECT", "0"]);
    let reads: Vec<Vec<&str>> = vec![
        vec!["GET", "s"],
        vec!["GET", "n"],
        vec!["STRLEN", "big"],
        vec!["LRANGE", "l", "0", "-1"],
        vec!["HGETALL", "h"],
        vec!["SMEMBERS", "st"],
        vec!["SMEMBERS", "si"],
        vec!["ZRANGE", "z", "0", "-1", "WITHSCORES"],
        vec!["EXISTS", "gone"],
        vec!["TYPE", "l"],
        vec!["DBSIZE"],
    ];
    let before: Vec<Frame> = reads.iter().map(|r| sorted(c.cmd(r))).collect();
    std::thread::sleep(Duration::from_millis(400)); // "short" expires
    server.kill();
    let server = start(&dir, "sync", &[]);
    let mut c = server.conn();
    let after: Vec<Frame> = reads.iter().map(|r| sorted(c.cmd(r))).collect();
    for ((r, b), a) in reads.iter().zip(&before).zip(&after) {
        let b = if r[0] == "DBSIZE" { Frame::int(b.as_int().unwrap() - 1) } else { b.clone() };
        assert_eq!(&b, a, "{r:?} after the restart");
    }
    let pttl = c.cmd(&["PTTL", "h"]).as_int().unwrap();
    assert!((400_000..=500_000).contains(&pttl), "hash TTL {pttl}");
    let ttl = c.cmd(&["TTL", "z"]).as_int().unwrap();
    assert!((900..=1000).contains(&ttl), "zset TTL {ttl}");
    assert_eq!(c.cmd(&["EXISTS", "short"]), Frame::int(0));
    c.cmd(&["SELECT", "3"]);
    assert_eq!(c.cmd(&["GET", "db3"]), Frame::bulk("three"));
    c.cmd(&["SELECT", "4"]);
    assert_eq!(c.cmd(&["DBSIZE"]), Frame::int(0), "FLUSHDB replayed");
    let info = info(&mut c, Some("persistence"));
    assert_eq!(info.get("loading").map(String::as_str), Some("0"));
    assert!(info["strata_recovery_records"].parse::<u64>().unwrap() > 10, "{info:?}");
    drop(server);

    // durability none: a cache; the dir is neither written nor replayed.
    let none_dir = DataDir::new("none");
    let mut server = start(&none_dir, "none", &[]);
    server.conn().ok(&["SET", "k", "v"]);
    server.kill();
    let server = start(&none_dir, "none", &[]);
    assert_eq!(server.conn().cmd(&["DBSIZE"]), Frame::int(0));
    assert_eq!(std::fs::read_dir(&none_dir.0).unwrap().count(), 0, "durability none wrote files");
}

/// Corrupt bytes in the middle of a real log file are skipped and counted,
/// a torn tail is dropped, and the node comes up with the rest.
#[test]
fn a_corrupted_log_file_never_crashes_the_node() {
    let dir = DataDir::new("corrupt");
    let mut server = start(&dir, "sync", &[]);
    let mut c = server.conn();
    for i in 0..2000 {
        c.ok(&["SET", &format!("k{i}"), &format!("value-{i}-{}", "y".repeat(100))]);
    }
    server.kill();
    let seg = find_segment_with_data(&dir.0);
    let mut bytes = std::fs::read(&seg).unwrap();
    // Damage records in the middle (a run of garbage)...
    for b in &mut bytes[60_000..60_400] {
        *b ^= 0x5a;
    }
    std::fs::write(&seg, &bytes).unwrap();
    let server = start(&dir, "sync", &[]);
    let mut c = server.conn();
    let info = info(&mut c, Some("persistence"));
    let skipped: u64 = info["strata_recovery_skipped_runs"].parse().unwrap();
    assert!(skipped >= 1, "{info:?}");
    let n = c.cmd(&["DBSIZE"]).as_int().unwrap();
    assert!((1990..2000).contains(&n), "keys after skipping a bad run: {n}");
    assert_eq!(c.cmd(&["GET", "k1999"]).as_bytes().map(|b| b.len()), Some(111));
    // It keeps serving and logging.
    c.ok(&["SET", "after", "1"]);
    drop(server);
    // Garbage over the whole file: nothing valid, still no crash.
    std::fs::write(&seg, vec![0xA5u8; bytes.len()]).unwrap();
    let server = start(&dir, "sync", &[]);
    assert!(server.conn().cmd(&["DBSIZE"]).as_int().is_some());
}

fn find_segment_with_data(dir: &Path) -> PathBuf {
    let mut segs: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    segs.sort();
    segs.into_iter().find(|p| std::fs::read(p).unwrap()[8192..70_000].iter().any(|&b| b != 0)).expect("a used segment")
}

/// Compaction frees old segments; a crash in the middle of it (after the
/// first old segment is freed) loses no acknowledged write (sync).
#[test]
fn compaction_bounds_the_log_and_survives_a_crash_in_the_middle() {
    let dir = DataDir::new("compact");
    let run = |env_crash: bool| {
        let mut env = vec![("STRATA_SEGMENT_SIZE", SEGMENT)];
        if env_crash {
            env.push(("STRATA_TEST_CRASH_AT", "compact-freed-one"));
        }
        let server = Server::strata_with_env(&["--dir", dir.path(), "--durability", "sync"], &env);
        wait_loaded(&server);
        server
    };
    let mut server = run(true);
    let mut c = server.conn();
    // ~200 live keys overwritten many times, pipelined by 200 (one fsync
    // each in sync): the log grows, live data does not.
    let mut expected: HashMap<String, String> = HashMap::new();
    let mut in_flight: HashMap<String, String> = HashMap::new();
    let mut acked = 0;
    'load: for round in 0..400 {
        let batch: Vec<(String, String)> =
            (0..200).map(|k| (format!("c{k}"), format!("{round}-{k}-{}", "z".repeat(200)))).collect();
        for (k, v) in &batch {
            in_flight.insert(k.clone(), v.clone());
            if c.try_send(&["SET", k, v]).is_err() {
                break 'load;
            }
        }
        for (k, v) in &batch {
            if !matches!(c.try_read_frame(), Ok(Some(f)) if f == Frame::ok()) {
                break 'load;
            }
            expected.insert(k.clone(), v.clone());
            acked += 1;
        }
    }
    assert!(wait_for(Duration::from_secs(15), || !server.is_running()), "compaction never ran ({acked} writes)");
    assert!(server.logs().contains("test crash point"), "{}", server.logs());
    drop(server);
    // Restarted after the crash mid-compaction: every acknowledged value is
    // there, or the newer one that was in flight.
    let mut server = run(false);
    let mut c = server.conn();
    for (k, v) in &expected {
        let got = c.cmd(&["GET", k]);
        let got = got.as_bytes().unwrap_or_else(|| panic!("{k} lost after a crash in compaction"));
        assert!(got == v.as_bytes() || got == in_flight[k].as_bytes(), "{k} stale after a crash in compaction");
    }
    // Left to run, compaction completes and the log stays small.
    for round in 0..300 {
        for k in 0..200 {
            c.ok(&["SET", &format!("c{k}"), &format!("again-{round}-{}", "z".repeat(200))]);
        }
    }
    let ok = wait_for(Duration::from_secs(10), || {
        info(&mut c, Some("persistence"))["strata_log_compactions"].parse::<u64>().unwrap() >= 1
    });
    assert!(ok, "no compaction\n{}", server.logs());
    let files = std::fs::read_dir(&dir.0).unwrap().count();
    let segs: u64 = info(&mut c, Some("persistence"))["strata_log_segments"].parse().unwrap();
    assert!(segs <= 8, "segments in use after compaction: {segs} ({files} files)");
    server.kill();
    let server = run(false);
    let mut c = server.conn();
    assert_eq!(c.cmd(&["DBSIZE"]), Frame::int(200));
    assert_eq!(c.cmd(&["GET", "c7"]).as_bytes(), Some(format!("again-299-{}", "z".repeat(200)).as_bytes()));
}

/// DUMP payloads cross between Strata and redis-server both ways.
#[test]
fn dump_and_restore_match_redis() {
    let strata = Server::strata();
    let redis = Server::redis();
    let (mut s, mut r) = (strata.conn(), redis.conn());
    let setup: Vec<Vec<&str>> = vec![
        vec!["SET", "s", "hello"],
        vec!["SET", "i", "-123456"],
        vec!["SET", "long", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],
        vec!["RPUSH", "l", "a", "1", "bb", "-70000"],
        vec!["HSET", "h", "f", "v", "n", "5"],
        vec!["SADD", "st", "x", "y"],
        vec!["SADD", "si", "1", "2", "-3", "70000"],
        vec!["ZADD", "z", "1.5", "a", "2", "b", "-inf", "c"],
    ];
    for cmd in &setup {
        s.cmd(cmd);
        r.cmd(cmd);
    }
    let reads = |k: &str| -> Vec<String> {
        vec![
            format!("TYPE {k}"),
            match k {
                "s" | "i" | "long" => format!("GET {k}"),
                "l" => "LRANGE l 0 -1".into(),
                "h" => "HGETALL h".into(),
                "st" | "si" => format!("SMEMBERS {k}"),
                _ => "ZRANGE z 0 -1 WITHSCORES".into(),
            },
        ]
    };
    let run = |c: &mut RawConn, line: &str| sorted(c.cmd(&line.split(' ').collect::<Vec<_>>()));
    for k in ["s", "i", "long", "l", "h", "st", "si", "z"] {
        // Strata → redis-server.
        let payload = s.cmd(&["DUMP", k]);
        let payload = payload.as_bytes().unwrap_or_else(|| panic!("DUMP {k}"));
        let copy = format!("{k}-from-strata");
        assert_eq!(r.cmd(&[b"RESTORE".as_slice(), copy.as_bytes(), b"0", payload]), Frame::ok(), "{k}");
        for line in reads(k) {
            assert_eq!(run(&mut r, &line), run(&mut r, &line.replace(&format!(" {k}"), &format!(" {copy}"))));
        }
        // redis-server → Strata (listpack, intset, LZF and integer encodings).
        let payload = r.cmd(&["DUMP", k]);
        let payload = payload.as_bytes().unwrap();
        let copy = format!("{k}-from-redis");
        assert_eq!(s.cmd(&[b"RESTORE".as_slice(), copy.as_bytes(), b"0", payload]), Frame::ok(), "{k}");
        for line in reads(k) {
            assert_eq!(run(&mut s, &line.replace(&format!(" {k}"), &format!(" {copy}"))), run(&mut r, &line), "{line}");
        }
    }
    // Errors and options, compared with redis-server.
    let good = s.cmd(&["DUMP", "s"]).as_bytes().unwrap().to_vec();
    let mut bad = good.clone();
    bad[2] ^= 1;
    let cases: Vec<Vec<Vec<u8>>> = vec![
        vec![b"RESTORE".to_vec(), b"s".to_vec(), b"0".to_vec(), good.clone()],
        vec![b"RESTORE".to_vec(), b"new".to_vec(), b"0".to_vec(), bad],
        vec![b"RESTORE".to_vec(), b"new".to_vec(), b"-1".to_vec(), good.clone()],
        vec![b"RESTORE".to_vec(), b"new".to_vec(), b"x".to_vec(), good.clone()],
        vec![b"RESTORE".to_vec(), b"new".to_vec(), b"0".to_vec(), good.clone(), b"BOGUS".to_vec()],
        vec![b"RESTORE".to_vec(), b"new".to_vec(), b"0".to_vec(), good.clone(), b"FREQ".to_vec(), b"300".to_vec()],
        vec![b"RESTORE".to_vec(), b"s".to_vec(), b"5000".to_vec(), good.clone(), b"REPLACE".to_vec()],
        vec![b"PTTL".to_vec(), b"s".to_vec()],
        vec![b"RESTORE".to_vec(), b"s".to_vec(), b"1".to_vec(), good.clone(), b"REPLACE".to_vec(), b"ABSTTL".to_vec()],
        vec![b"EXISTS".to_vec(), b"s".to_vec()],
        vec![b"DUMP".to_vec(), b"nokey".to_vec()],
        vec![b"RESTORE".to_vec(), b"ok".to_vec(), b"0".to_vec(), good, b"IDLETIME".to_vec(), b"10".to_vec()],
        vec![b"GET".to_vec(), b"ok".to_vec()],
    ];
    for case in &cases {
        let (a, b) = (s.cmd(case), r.cmd(case));
        if case[0] == b"PTTL" {
            assert!((4000..=5000).contains(&a.as_int().unwrap()) && (4000..=5000).contains(&b.as_int().unwrap()));
        } else {
            assert_eq!(a, b, "{:?}", String::from_utf8_lossy(&case[..2].concat()));
        }
    }
}

/// Clients get -LOADING while the log is replayed, as from Redis.
#[test]
fn clients_get_loading_while_the_log_is_replayed() {
    let dir = DataDir::new("loading");
    let mut server = start(&dir, "periodic", &[]);
    let mut c = server.conn();
    let big = "v".repeat(4000);
    for i in 0..20_000 {
        c.send(&["SET", &format!("k{i}"), &big]);
        if i % 100 == 99 {
            for _ in 0..100 {
                c.read_frame();
            }
        }
    }
    let _ = server.terminate(Duration::from_secs(10));
    let server = Server::strata_with_env(
        &["--dir", dir.path(), "--durability", "periodic"],
        &[("STRATA_SEGMENT_SIZE", SEGMENT)],
    );
    let mut c = server.conn();
    let first = c.cmd(&["GET", "k1"]);
    // While loading, Redis's loading_* fields say how far the replay is:
    // bytes of the segments in use (the log holds 80 MB of values here),
    // 0 until their headers are read.
    let mut loaded = Vec::new();
    loop {
        let i = info(&mut c, Some("persistence"));
        if i["loading"] != "1" {
            break;
        }
        let num = |f: &str| -> f64 { i[f].parse().unwrap_or_else(|_| panic!("{f}: {i:?}")) };
        let total = num("loading_total_bytes");
        assert!(total == 0.0 || total >= 80e6, "{i:?}");
        assert!(num("loading_loaded_bytes") <= total, "{i:?}");
        assert!((0.0..=100.0).contains(&num("loading_loaded_perc")), "{i:?}");
        assert!(num("loading_eta_seconds") >= 0.0 && num("loading_start_time") > 1.6e9, "{i:?}");
        assert_eq!(i["loading_rdb_used_mem"], "0");
        loaded.push(num("loading_loaded_bytes"));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(loaded.windows(2).all(|w| w[0] <= w[1]), "progress never goes back: {loaded:?}");
    eprintln!("loading_loaded_bytes while loading: {loaded:?}");
    wait_loaded(&server);
    assert_eq!(c.cmd(&["GET", "k1"]).as_bytes().map(|b| b.len()), Some(4000));
    if first.is_error() {
        assert_eq!(first.error_message(), Some("LOADING Redis is loading the dataset in memory"));
    } else {
        eprintln!("the log loaded before the first command: -LOADING not observed");
    }
    let after = info(&mut c, Some("persistence"));
    assert_eq!(after["loading"], "0");
    assert!(!after.contains_key("loading_total_bytes"), "only while loading, as in Redis: {after:?}");
    // The log line's percentage counts the segments in use only (free and
    // spare ones are never read): it climbs and ends at 100%.
    let logs = server.logs();
    let percents: Vec<u64> =
        logs.lines().filter_map(|l| l.split("loading the log: ").nth(1)?.split('%').next()?.parse().ok()).collect();
    assert!(percents.windows(2).all(|w| w[0] <= w[1]), "{percents:?}");
    assert!(logs.contains("the log is loaded: 100% done"), "{logs}");
}

/// SETs for `run`; returns (replies, slowest reply).
fn set_for(server: &Server, run: Duration) -> (u64, Duration) {
    let mut c = server.conn();
    let (mut n, mut slowest) = (0u64, Duration::ZERO);
    let started = Instant::now();
    while started.elapsed() < run {
        let t = Instant::now();
        c.ok(&["SET", &format!("k{}", n % 100), &"v".repeat(200)]);
        slowest = slowest.max(t.elapsed());
        n += 1;
    }
    (n, slowest)
}

/// With a slow disk (each flush delayed 300 ms), write-back holds replies
/// back once the log lags past write-back-max-lag, and periodic once it
/// lags two intervals; with a lag bound longer than the run, nobody waits.
/// The bounds show in CONFIG GET; the lag and the held replies in INFO
/// persistence and `/metrics`, which read the same snapshot.
#[test]
fn a_slow_disk_holds_writers_back_in_write_back_and_periodic() {
    // Default segments (64 MiB): a roll waits for a spare, which the slow
    // flush readies; that wait is not what this test measures.
    let slow = [("STRATA_TEST_FLUSH_DELAY_MS", "300")];
    let run = |mode: &str, extra: &[&str]| {
        let dir = DataDir::new(&format!("slow-{mode}-{}", extra.len()));
        let metrics_port = free_port();
        let port = metrics_port.to_string();
        let mut args = vec!["--dir", dir.path(), "--durability", mode, "--metrics-port", &port];
        args.extend_from_slice(extra);
        let server = Server::strata_with_env(&args, &slow);
        wait_loaded(&server);
        let (n, slowest) = set_for(&server, Duration::from_millis(1500));
        let mut c = server.conn();
        let info = info(&mut c, Some("persistence"));
        let held: u64 = info["strata_durability_held_replies"].parse().unwrap();
        let metrics = scrape(metrics_port);
        let scraped = sample(&metrics, "strata_durability_held_replies_total").expect("held replies in /metrics");
        assert!(scraped >= held as f64, "/metrics {scraped} behind INFO {held}");
        assert!(sample(&metrics, "strata_durability_lag_bytes").is_some(), "{metrics}");
        let config = c.cmd(&["CONFIG", "GET", "write-back-max-*"]);
        eprintln!("{mode} {extra:?}: {n} SETs, slowest reply {slowest:?}, {held} held");
        (held, slowest, config)
    };
    let (held, slowest, config) = run("write-back", &["--write-back-max-lag", "50ms"]);
    assert!(held > 0 && slowest >= Duration::from_millis(250), "write-back never held a writer: {held}, {slowest:?}");
    assert_eq!(
        config.sorted_pairs(),
        Frame::Array(vec![
            Frame::bulk("write-back-max-bytes"),
            Frame::bulk("67108864"),
            Frame::bulk("write-back-max-lag"),
            Frame::bulk("50ms"),
        ])
    );
    let (held, slowest, _) = run("write-back", &["--write-back-max-lag", "30s"]);
    assert!(held == 0 && slowest < Duration::from_millis(250), "held within the bound: {held}, {slowest:?}");
    let (held, slowest, _) = run("periodic", &["--fsync-interval", "10ms"]);
    assert!(held > 0 && slowest >= Duration::from_millis(250), "periodic never held a writer: {held}, {slowest:?}");
}

/// A log bigger than maxmemory: replayed under allkeys-lru it evicts and
/// stays within the budget; under noeviction the node refuses to start
/// with a clear error and leaves the log as it was.
#[test]
fn replay_respects_maxmemory() {
    let dir = DataDir::new("replay-maxmemory");
    let mut server = start(&dir, "periodic", &[]);
    let mut c = server.conn();
    // The budget: what an empty node uses, plus 12 MiB (the log holds ~30).
    let empty: u64 = info_field(&mut c, "used_memory").unwrap().parse().unwrap();
    let budget = (empty + (12 << 20)).to_string();
    let v = "r".repeat(10_000);
    for i in 0..3000 {
        c.send(&["SET", &format!("big{i}"), &v]);
        if i % 100 == 99 {
            for _ in 0..100 {
                assert_eq!(c.read_frame(), Frame::ok());
            }
        }
    }
    let _ = server.terminate(Duration::from_secs(10));

    // noeviction first: the node refuses to start and leaves the log as it
    // was (the allkeys-lru node below journals the evictions it makes once
    // serving, as at any time at its limit, so it changes the log).
    let mut server = Server::strata_with_env(
        &["--dir", dir.path(), "--durability", "periodic", "--maxmemory", &budget],
        &[("STRATA_SEGMENT_SIZE", SEGMENT)],
    );
    assert!(wait_for(Duration::from_secs(20), || !server.is_running()), "started over budget under noeviction");
    assert!(server.logs().contains("raise maxmemory"), "{}", server.logs());
    // The log is intact: without the limit every key is back.
    let mut server = start(&dir, "periodic", &[]);
    assert_eq!(server.conn().cmd(&["DBSIZE"]), Frame::int(3000));
    let _ = server.terminate(Duration::from_secs(10));

    let server = Server::strata_with_env(
        &["--dir", dir.path(), "--durability", "periodic", "--maxmemory", &budget, "--maxmemory-policy", "allkeys-lru"],
        &[("STRATA_SEGMENT_SIZE", SEGMENT)],
    );
    let mut c = server.conn();
    let ok = wait_for(Duration::from_secs(20), || !c.cmd(&["EXISTS", "probe"]).is_error());
    assert!(ok, "not loaded\n{}", server.logs());
    let keys = c.cmd(&["DBSIZE"]).as_int().unwrap();
    // The log's buffers are part of used_memory but not of the budget.
    let mut used_now = || {
        let memory = info(&mut c, Some("memory"));
        let field = |name: &str| -> u64 { memory[name].parse().unwrap() };
        field("used_memory") - field("mem_not_counted_for_evict")
    };
    // The allocator's figures are refreshed every few ms and the limit is
    // held between writes by the tick's eviction: give it a moment.
    let mut used = used_now();
    wait_for(Duration::from_secs(3), || {
        used = used_now();
        used <= empty + (12 << 20)
    });
    let persistence = info(&mut c, Some("persistence"));
    let evicted: u64 = persistence["strata_recovery_evicted_keys"].parse().unwrap();
    eprintln!(
        "replayed 3000 × 10 KB into 12 MiB more than an empty node: {keys} keys, {evicted} evicted, used_memory {used}"
    );
    assert!(keys < 1500 && keys > 100, "keys after the replay: {keys}");
    assert!(evicted >= 1500, "evicted during the replay: {evicted}");
    assert!(used <= empty + (12 << 20), "used_memory {used} past the budget {budget}");
    let logs = server.logs();
    assert!(
        logs.contains("the log is loaded") && logs.contains("evicted") && logs.contains("records_per_sec"),
        "no replay figures in the log:\n{logs}"
    );
}

/// Streams come back whole after a kill -9: entries, IDs and counters,
/// consumer groups with their read counters, PELs (owners, delivery counts)
/// and consumers, including changes made by a served blocked reader.
#[test]
fn streams_and_consumer_groups_survive_a_restart() {
    let dir = DataDir::new("streams");
    let mut server = start(&dir, "sync", &[]);
    let mut c = server.conn();
    for i in 1..=30 {
        c.cmd(&["XADD", "s", &format!("{i}-1"), "f", &i.to_string(), "g", "value"]);
    }
    c.cmd(&["XDEL", "s", "3-1", "7-1"]);
    c.cmd(&["XTRIM", "s", "MINID", "2"]);
    c.ok(&["XGROUP", "CREATE", "s", "g", "0"]);
    c.ok(&["XGROUP", "CREATE", "s", "late", "$"]);
    c.cmd(&["XREADGROUP", "GROUP", "g", "alice", "COUNT", "4", "STREAMS", "s", ">"]);
    c.cmd(&["XREADGROUP", "GROUP", "g", "bob", "COUNT", "3", "STREAMS", "s", ">"]);
    c.cmd(&["XACK", "s", "g", "2-1"]);
    c.cmd(&["XCLAIM", "s", "g", "carol", "0", "4-1", "RETRYCOUNT", "5"]);
    c.cmd(&["XGROUP", "CREATECONSUMER", "s", "g", "dave"]);
    c.ok(&["XSETID", "s", "40-0", "ENTRIESADDED", "50", "MAXDELETEDID", "35-0"]);
    // A blocked group reader served by a later XADD changes the group too.
    let mut reader = server.conn();
    reader.send(&["XREADGROUP", "GROUP", "late", "erin", "BLOCK", "0", "STREAMS", "s", ">"]);
    assert!(wait_for(Duration::from_secs(10), || info_field(&mut c, "blocked_clients").as_deref() == Some("1")));
    c.cmd(&["XADD", "s", "41-0", "f", "new"]);
    let served = reader.read_frame();
    assert!(served.to_string().contains("41-0"), "{served}");
    let reads: Vec<Vec<&str>> = vec![
        vec!["XRANGE", "s", "-", "+"],
        vec!["XINFO", "STREAM", "s"],
        vec!["XINFO", "GROUPS", "s"],
        vec!["XPENDING", "s", "g"],
        vec!["XPENDING", "s", "late"],
        vec!["XINFO", "STREAM", "s", "FULL"],
    ];
    let before: Vec<Frame> = reads.iter().map(|r| c.cmd(r)).collect();
    server.kill();
    let server = start(&dir, "sync", &[]);
    let mut c = server.conn();
    for (r, b) in reads.iter().zip(&before) {
        assert_eq!(&c.cmd(r), b, "{r:?} after the restart");
    }
    // Pending entries keep their owner and delivery count.
    let rows = c.cmd(&["XPENDING", "s", "g", "-", "+", "10", "carol"]);
    assert!(rows.to_string().contains("4-1") && rows.to_string().contains(":5"), "{rows}");
}
