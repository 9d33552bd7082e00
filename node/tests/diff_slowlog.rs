//! Differential tests (strata vs redis) for SLOWLOG, LATENCY and the Redis
//! parameters CONFIG knows for them and for encodings: names and aliases,
//! ranges, error texts, and the shape of slow log entries and latency
//! samples (durations differ; what each entry holds must not).

mod support;

use support::*;

/// Redis parameters with values to set (valid) and to refuse (invalid).
const PARAMS: &[(&str, &[&str], &[&str])] = &[
    ("hash-max-listpack-entries", &["0", "1000", "512"], &["-1", "x", "1.5"]),
    ("hash-max-ziplist-entries", &["7", "512"], &["-1", "abc"]),
    ("hash-max-listpack-value", &["0", "100", "1kb", "64"], &["-1", "1x"]),
    ("hash-max-ziplist-value", &["65", "64"], &["x"]),
    ("set-max-intset-entries", &["0", "10000", "512"], &["-5", "y"]),
    ("zset-max-listpack-entries", &["1", "128"], &["-1", "1kb"]),
    ("zset-max-ziplist-entries", &["3", "128"], &["z"]),
    ("zset-max-listpack-value", &["10", "64"], &["-1"]),
    ("zset-max-ziplist-value", &["11", "64"], &["q"]),
    ("list-max-listpack-size", &["-1", "-5", "100", "-2"], &["2147483648", "-2147483649", "x"]),
    ("list-max-ziplist-size", &["4", "-2"], &["1e3"]),
    ("list-compress-depth", &["1", "0"], &["-1", "2147483648"]),
    ("stream-node-max-bytes", &["1kb", "0", "4096"], &["-1", "abc"]),
    ("stream-node-max-entries", &["5", "100"], &["-1"]),
    ("hll-sparse-max-bytes", &["2000", "1mb", "3000"], &["x", "-3"]),
    ("slowlog-log-slower-than", &["-1", "0", "10000"], &["-2", "x"]),
    ("slowlog-max-len", &["0", "5", "128"], &["-1"]),
    ("latency-monitor-threshold", &["100", "0"], &["-1", "ms"]),
    ("latency-tracking", &["no", "YES", "yes"], &["maybe", "1"]),
    ("active-defrag-threshold-upper", &["0", "1000", "100"], &["1001", "-1"]),
    ("active-defrag-cycle-min", &["99", "1"], &["0", "100"]),
    ("active-defrag-cycle-max", &["1", "25"], &["0", "100"]),
    ("active-defrag-max-scan-fields", &["1", "1000"], &["0"]),
    ("active-expire-effort", &["10", "1"], &["0", "11"]),
    ("activerehashing", &["no", "yes"], &["perhaps"]),
];

/// Both servers, with DEBUG (SLEEP) allowed on redis too.
fn diff_with_debug() -> Diff {
    Diff::with_servers(Server::strata(), Server::redis_with(&["--enable-debug-command", "yes"]))
}

#[test]
fn redis_parameters_get_set_and_validation() {
    let mut d = Diff::new();
    for (name, valid, invalid) in PARAMS {
        d.exact(&["CONFIG", "GET", name]);
        d.exact(&["config", "get", &name.to_ascii_uppercase()]);
        for v in *valid {
            d.exact(&["CONFIG", "SET", name, v]);
            d.exact(&["CONFIG", "GET", name]);
        }
        for v in *invalid {
            d.err(&["CONFIG", "SET", name, v]);
        }
        d.exact(&["CONFIG", "GET", name]);
    }
    // An alias and its name are one parameter: setting one shows in both,
    // both in one CONFIG SET is no duplicate (the last wins), one name twice is.
    d.exact(&["CONFIG", "SET", "hash-max-ziplist-entries", "99"]);
    d.exact(&["CONFIG", "GET", "hash-max-listpack-entries"]);
    d.exact(&["CONFIG", "SET", "hash-max-ziplist-entries", "1", "hash-max-listpack-entries", "2"]);
    d.exact(&["CONFIG", "GET", "hash-max-ziplist-entries"]);
    d.err(&["CONFIG", "SET", "hash-max-ziplist-entries", "1", "HASH-max-ziplist-entries", "2"]);
    d.exact(&["CONFIG", "SET", "hash-max-listpack-entries", "512"]);
    // Patterns list names and aliases alike.
    for pat in ["*listpack*", "*ziplist*", "slowlog-*", "latency-monitor*", "stream-node-*", "*-max-intset-*"] {
        d.unordered_pairs(&["CONFIG", "GET", pat]);
    }
    // Several at once: nothing changes unless all are valid.
    d.err(&["CONFIG", "SET", "slowlog-max-len", "7", "list-compress-depth", "-1"]);
    d.exact(&["CONFIG", "GET", "slowlog-max-len"]);
    d.exact(&["CONFIG", "SET", "slowlog-max-len", "7", "list-compress-depth", "2"]);
    d.exact(&["CONFIG", "GET", "slowlog-max-len"]);
    d.exact(&["CONFIG", "GET", "list-compress-depth"]);
    d.finish();
}

/// A SLOWLOG GET reply reduced to what both servers must agree on: each
/// entry's arguments and client name, after checking the rest's shape (ids
/// newest first, a plausible time, a duration, the client's address).
fn slowlog_entries(f: &Frame) -> Result<Vec<(Vec<Frame>, Frame)>, String> {
    let entries = f.as_array().ok_or("not an array")?;
    let mut out = Vec::new();
    let mut last_id = i64::MAX;
    for e in entries {
        let e = e.as_array().ok_or("entry is not an array")?;
        if e.len() != 6 {
            return Err(format!("entry has {} fields", e.len()));
        }
        let id = e[0].as_int().ok_or("id is not an integer")?;
        if id >= last_id {
            return Err("ids are not newest first".into());
        }
        last_id = id;
        let time = e[1].as_int().ok_or("time is not an integer")?;
        if time < 1_600_000_000 {
            return Err(format!("time {time} is not a unix time"));
        }
        if e[2].as_int().is_none_or(|us| us < 0) {
            return Err("duration is not a count of microseconds".into());
        }
        let peer = e[4].as_str().ok_or("peer is not a string")?;
        if !peer.starts_with("127.0.0.1:") {
            return Err(format!("peer {peer}"));
        }
        out.push((e[3].as_array().ok_or("argv is not an array")?.to_vec(), e[5].clone()));
    }
    Ok(out)
}

fn same_slowlog(a: &Frame, b: &Frame) -> Result<(), String> {
    let (ea, eb) = (slowlog_entries(a)?, slowlog_entries(b)?);
    if ea != eb {
        return Err(format!("entries differ:\n{ea:?}\n{eb:?}"));
    }
    Ok(())
}

#[test]
fn slowlog_entries_truncation_and_subcommands() {
    let mut d = diff_with_debug();
    d.exact(&["SLOWLOG", "LEN"]);
    d.exact(&["SLOWLOG", "HELP"]);
    d.err(&["SLOWLOG", "HELP", "x"]);
    d.err(&["SLOWLOG", "LEN", "x"]);
    d.err(&["SLOWLOG", "RESET", "x"]);
    d.err(&["SLOWLOG", "GET", "1", "2"]);
    d.err(&["SLOWLOG", "GET", "-2"]);
    d.err(&["SLOWLOG", "GET", "x"]);
    d.err(&["SLOWLOG", "NOPE"]);
    d.err(&["SLOWLOG"]);

    // Everything is logged from here, including this CONFIG SET itself.
    d.exact(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    d.exact(&["SLOWLOG", "RESET"]);
    d.exact(&["CLIENT", "SETNAME", "slow-client"]);
    let many: Vec<String> =
        ["SADD".to_string(), "s".to_string()].into_iter().chain((0..40).map(|i| i.to_string())).collect();
    d.exact(&many);
    let exactly32: Vec<String> =
        ["SADD".to_string(), "t".to_string()].into_iter().chain((0..30).map(|i| i.to_string())).collect();
    d.exact(&exactly32);
    let long = "A".repeat(129);
    d.exact(&["SET", "k", &long]);
    d.exact(&["SET", "k2", &"B".repeat(128)]);
    d.exact(&["SET", "k3", &"C".repeat(5000)]);
    d.err(&["AUTH", "secret-password"]);
    d.err(&["AUTH", "someone", "secret-password"]);
    d.exact(&["CONFIG", "SET", "requirepass", ""]);
    // EXEC is not logged; the transaction's commands are.
    d.exact(&["MULTI"]);
    d.exact(&["INCR", "n"]);
    d.exact(&["INCR", "n"]);
    d.exact(&["EXEC"]);
    d.err(&["NOSUCHCOMMAND"]);
    d.err(&["GET"]);
    d.exact(&["CLIENT", "SETNAME", "other"]);
    // Logged after it ran, with the threshold it set: not this one.
    d.exact(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
    d.exact(&["SLOWLOG", "LEN"]);
    d.check(&["SLOWLOG", "GET", "-1"], same_slowlog);
    d.check(&["SLOWLOG", "GET"], same_slowlog);
    d.check(&["SLOWLOG", "GET", "3"], same_slowlog);
    d.check(&["SLOWLOG", "GET", "0"], same_slowlog);

    // The length limit: lowering it trims at the next entry.
    d.exact(&["CONFIG", "SET", "slowlog-max-len", "3"]);
    d.exact(&["SLOWLOG", "LEN"]);
    d.exact(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    d.exact(&["SLOWLOG", "LEN"]);
    for _ in 0..5 {
        d.exact(&["PING"]);
    }
    d.exact(&["SLOWLOG", "LEN"]);
    d.check(&["SLOWLOG", "GET", "-1"], same_slowlog);
    d.exact(&["CONFIG", "SET", "slowlog-max-len", "0"]);
    d.exact(&["PING"]);
    d.exact(&["SLOWLOG", "LEN"]);
    d.exact(&["CONFIG", "SET", "slowlog-max-len", "128"]);

    // A threshold only slow commands pass.
    d.exact(&["CONFIG", "SET", "slowlog-log-slower-than", "100000"]);
    d.exact(&["SLOWLOG", "RESET"]);
    d.exact(&["PING"]);
    d.exact(&["SLOWLOG", "LEN"]);
    d.exact(&["DEBUG", "SLEEP", "0.15"]);
    d.exact(&["SLOWLOG", "LEN"]);
    d.check(&["SLOWLOG", "GET"], same_slowlog);

    // A blocking command is logged once a push serves it, not when it
    // blocks or times out.
    d.exact(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    d.exact(&["SLOWLOG", "RESET"]);
    d.exact(&["BLPOP", "nolist", "0.05"]);
    let mut blocked = [d.strata_server().unwrap().conn(), d.redis_server().unwrap().conn()];
    for c in &mut blocked {
        c.send(&["BLPOP", "bl", "5"]);
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    d.exact(&["SLOWLOG", "LEN"]);
    d.exact(&["LPUSH", "bl", "x"]);
    for c in &mut blocked {
        assert_eq!(c.read_frame().as_array().map(|a| a.len()), Some(2));
    }
    d.exact(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
    // Served on another thread here: the BLPOP and LPUSH entries may come
    // in either order, so only what they hold is compared.
    d.check(&["SLOWLOG", "GET"], |a, b| {
        let sorted = |f: &Frame| {
            slowlog_entries(f).map(|mut e| {
                e.sort_by_key(|(argv, _)| format!("{argv:?}"));
                e
            })
        };
        let (ea, eb) = (sorted(a)?, sorted(b)?);
        if ea != eb || ea.len() != 4 {
            return Err(format!("entries differ:\n{ea:?}\n{eb:?}"));
        }
        Ok(())
    });
    d.finish();
}

#[test]
fn slowlog_durations_follow_the_command() {
    let server = Server::strata();
    let mut c = server.conn();
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "50000"]);
    c.cmd(&["DEBUG", "SLEEP", "0.1"]);
    c.cmd(&["PING"]);
    let log = c.cmd(&["SLOWLOG", "GET"]);
    let entries = log.as_array().unwrap();
    assert_eq!(entries.len(), 1, "{log}");
    let e = entries[0].as_array().unwrap();
    let us = e[2].as_int().unwrap();
    assert!((100_000..2_000_000).contains(&us), "DEBUG SLEEP 0.1 took {us} µs");
    assert_eq!(e[3].as_array().unwrap().len(), 3);
    // A script runs on the script thread: its time is still the EVAL's.
    c.cmd(&["SLOWLOG", "RESET"]);
    let spin = "local t = redis.call('TIME'); local s = t[1] * 1000000 + t[2]; \
                repeat local n = redis.call('TIME'); until n[1] * 1000000 + n[2] - s > 100000; return 1";
    assert_eq!(c.cmd(&["EVAL", spin, "0"]).as_int(), Some(1));
    let log = c.cmd(&["SLOWLOG", "GET"]);
    let entries = log.as_array().unwrap();
    assert_eq!(entries.len(), 1, "{log}");
    let e = entries[0].as_array().unwrap();
    assert_eq!(e[3].as_array().unwrap()[0].as_str(), Some("EVAL"));
    assert!(e[2].as_int().unwrap() >= 100_000, "EVAL took {} µs", e[2]);
    assert_eq!(c.cmd(&["SLOWLOG", "RESET"]).as_str(), Some("OK"));
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]).as_int(), Some(0));
}

/// LATENCY LATEST: `[event, time, latest ms, max ms]` per event.
fn latest_events(f: &Frame) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    for e in f.as_array().ok_or("not an array")? {
        let e = e.as_array().ok_or("event is not an array")?;
        let [name, time, latest, max] = e else { return Err(format!("event has {} fields", e.len())) };
        let (Some(time), Some(latest), Some(max)) = (time.as_int(), latest.as_int(), max.as_int()) else {
            return Err("time and latencies must be integers".into());
        };
        if time < 1_600_000_000 || latest < 100 || max < latest {
            return Err(format!("implausible sample: {time} {latest} {max}"));
        }
        names.push(name.as_str().ok_or("event name")?.to_string());
    }
    names.sort();
    Ok(names)
}

fn history_shape(f: &Frame) -> Result<usize, String> {
    let samples = f.as_array().ok_or("not an array")?;
    let mut last = 0;
    for s in samples {
        let s = s.as_array().ok_or("sample is not an array")?;
        let [time, ms] = s else { return Err("sample is not a pair".into()) };
        let (Some(time), Some(ms)) = (time.as_int(), ms.as_int()) else { return Err("not integers".into()) };
        if time <= last || ms < 100 {
            return Err(format!("sample {time} {ms} out of order or below the threshold"));
        }
        last = time;
    }
    Ok(samples.len())
}

#[test]
fn latency_monitor_events_and_subcommands() {
    let mut d = diff_with_debug();
    d.exact(&["LATENCY", "LATEST"]);
    d.exact(&["LATENCY", "HISTORY", "command"]);
    d.exact(&["LATENCY", "RESET"]);
    d.exact(&["LATENCY", "RESET", "command", "nope"]);
    d.exact(&["LATENCY", "DOCTOR"]);
    d.err(&["LATENCY", "HISTORY"]);
    d.err(&["LATENCY", "HISTORY", "a", "b"]);
    d.err(&["LATENCY", "LATEST", "x"]);
    d.err(&["LATENCY", "DOCTOR", "x"]);
    d.err(&["LATENCY", "HELP", "xxx"]);
    d.err(&["LATENCY", "NOPE"]);
    d.err(&["LATENCY"]);
    d.exact(&["CONFIG", "SET", "latency-monitor-threshold", "100"]);
    d.exact(&["LATENCY", "DOCTOR"]);
    // Under the threshold: nothing.
    d.exact(&["DEBUG", "SLEEP", "0.01"]);
    d.exact(&["LATENCY", "LATEST"]);
    d.exact(&["DEBUG", "SLEEP", "0.15"]);
    d.exact(&["DEBUG", "SLEEP", "0.12"]);
    d.check(&["LATENCY", "LATEST"], |a, b| {
        let (na, nb) = (latest_events(a)?, latest_events(b)?);
        if na != nb || na != ["command"] {
            return Err(format!("events {na:?} vs {nb:?}"));
        }
        Ok(())
    });
    d.check(&["LATENCY", "HISTORY", "command"], |a, b| {
        let (na, nb) = (history_shape(a)?, history_shape(b)?);
        // Two spikes: one sample, or two when a second boundary fell between.
        if !(1..=2).contains(&na) || !(1..=2).contains(&nb) {
            return Err(format!("{na} vs {nb} samples"));
        }
        Ok(())
    });
    d.exact(&["LATENCY", "HISTORY", "fast-command"]);
    d.type_only(&["LATENCY", "DOCTOR"]);
    d.exact(&["LATENCY", "RESET", "nope"]);
    d.exact(&["LATENCY", "RESET"]);
    d.exact(&["LATENCY", "LATEST"]);
    d.exact(&["LATENCY", "HISTORY", "command"]);
    d.exact(&["LATENCY", "DOCTOR"]);
    d.finish();
}

#[test]
fn object_encoding_follows_the_thresholds() {
    let mut d = Diff::new();
    d.exact(&["CONFIG", "SET", "hash-max-listpack-entries", "4", "hash-max-ziplist-value", "8"]);
    d.exact(&["CONFIG", "SET", "set-max-intset-entries", "3"]);
    d.exact(&["CONFIG", "SET", "zset-max-ziplist-entries", "2", "zset-max-listpack-value", "3"]);
    for n in 3..=5 {
        let (h, s, z) = (format!("h{n}"), format!("s{n}"), format!("z{n}"));
        for i in 0..n {
            d.exact(&["HSET", &h, &format!("f{i}"), "v"]);
            d.exact(&["SADD", &s, &i.to_string()]);
            d.exact(&["ZADD", &z, &i.to_string(), &format!("m{i}")]);
            d.exact(&["OBJECT", "ENCODING", &h]);
            d.exact(&["OBJECT", "ENCODING", &s]);
            d.exact(&["OBJECT", "ENCODING", &z]);
        }
    }
    // Lengths around the value limits.
    for len in 7..=9 {
        let key = format!("hv{len}");
        d.exact(&["HSET", &key, "f", &"x".repeat(len)]);
        d.exact(&["OBJECT", "ENCODING", &key]);
        let key = format!("hf{len}");
        d.exact(&["HSET", &key, &"y".repeat(len), "v"]);
        d.exact(&["OBJECT", "ENCODING", &key]);
    }
    for len in 2..=4 {
        let key = format!("zv{len}");
        d.exact(&["ZADD", &key, "1", &"m".repeat(len)]);
        d.exact(&["OBJECT", "ENCODING", &key]);
    }
    // A set of strings is never an intset; a result set follows the limits too.
    d.exact(&["SADD", "strs", "a"]);
    d.exact(&["OBJECT", "ENCODING", "strs"]);
    d.exact(&["ZUNIONSTORE", "u", "2", "z3", "z4"]);
    d.exact(&["OBJECT", "ENCODING", "u"]);
    d.exact(&["ZADD", "small", "1", "a"]);
    d.exact(&["ZUNIONSTORE", "u2", "1", "small"]);
    d.exact(&["OBJECT", "ENCODING", "u2"]);
    // Zero: never compact.
    d.exact(&["CONFIG", "SET", "zset-max-listpack-entries", "0", "hash-max-listpack-entries", "0"]);
    d.exact(&["ZADD", "z0", "1", "a"]);
    d.exact(&["OBJECT", "ENCODING", "z0"]);
    d.exact(&["HSET", "h0", "f", "v"]);
    d.exact(&["OBJECT", "ENCODING", "h0"]);
    // Raised again: existing values keep their encoding, new ones follow.
    d.exact(&["CONFIG", "SET", "zset-max-listpack-entries", "128", "hash-max-listpack-entries", "512"]);
    d.exact(&["OBJECT", "ENCODING", "z0"]);
    d.exact(&["HSET", "h1", "f", "v"]);
    d.exact(&["OBJECT", "ENCODING", "h1"]);
    d.finish();
}
