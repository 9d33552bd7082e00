//! Differential tests (strata vs redis-server 7.0) for the string family:
//! GET/SET and options, SETNX/SETEX/PSETEX, GETSET/GETDEL/GETEX, MGET/MSET/
//! MSETNX, counters, INCRBYFLOAT, APPEND/STRLEN/GETRANGE/SUBSTR/SETRANGE, LCS
//! and the bitmap commands, with their error cases and a RESP3 pass.

mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::*;

fn unix_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_secs()
}

/// Makes `key` hold a non-string value on both sides, with whichever
/// collection command the node supports (all do in the end; this keeps the
/// WRONGTYPE checks independent of other families' progress).
fn make_non_string(d: &mut Diff, key: &str) {
    for cmd in [["RPUSH", key, "x"], ["SADD", key, "x"], ["HSET", key, "x"], ["ZADD", key, "1"]] {
        let mut args: Vec<&str> = cmd.to_vec();
        if cmd[0] == "HSET" || cmd[0] == "ZADD" {
            args.push("x");
        }
        let (a, b) = d.both(&args);
        if a.as_int() == Some(1) && b.as_int() == Some(1) {
            return;
        }
    }
    panic!("no collection command available to create a non-string key");
}

/// Both replies are integers within `tolerance` of each other (TTLs).
fn close_ints(tolerance: i64) -> impl FnOnce(&Frame, &Frame) -> Result<(), String> {
    move |a, b| match (a.as_int(), b.as_int()) {
        (Some(x), Some(y)) if (x - y).abs() <= tolerance => Ok(()),
        _ => Err(format!("expected integers within {tolerance}")),
    }
}

#[test]
fn get_and_set() {
    let mut d = Diff::new();
    d.exact(&["GET", "nokey"]);
    d.exact(&["SET", "k", "v"]);
    d.exact(&["GET", "k"]);
    d.exact(&["SET", "k", "overwritten"]);
    d.exact(&["GET", "k"]);
    d.exact(&["SET", "empty", ""]);
    d.exact(&["GET", "empty"]);
    d.exact(&["STRLEN", "empty"]);
    d.exact(&[b"SET".as_slice(), b"bin", b"\x00\r\n\xff binary"]);
    d.exact(&["GET", "bin"]);
    let big = "x".repeat(100_000);
    d.exact(&["SET", "big", &big]);
    assert_eq!(d.exact(&["GET", "big"]).as_bytes().map(|b| b.len()), Some(100_000));
    // Keys are case-sensitive, command names are not.
    d.exact(&["set", "K", "upper"]);
    d.exact(&["gEt", "K"]);
    d.exact(&["GET", "k"]);
    d.finish();
}

#[test]
fn set_options() {
    let mut d = Diff::new();
    // NX / XX.
    d.exact(&["SET", "k", "1", "NX"]);
    d.exact(&["SET", "k", "2", "NX"]);
    d.exact(&["GET", "k"]);
    d.exact(&["SET", "k", "3", "XX"]);
    d.exact(&["GET", "k"]);
    d.exact(&["SET", "nokey", "3", "xx"]);
    d.exact(&["GET", "nokey"]);
    // GET returns the old value, with or without the write happening.
    d.exact(&["SET", "k", "4", "GET"]);
    d.exact(&["SET", "fresh", "1", "GET"]);
    d.exact(&["GET", "fresh"]);
    d.exact(&["SET", "k", "5", "NX", "GET"]);
    d.exact(&["GET", "k"]);
    d.exact(&["SET", "k", "6", "XX", "GET"]);
    d.exact(&["SET", "nokey2", "6", "XX", "GET"]);
    d.exact(&["GET", "nokey2"]);
    d.exact(&["SET", "k", "7", "GET", "GET", "NX", "NX"]);
    // Expire forms and repeated same-kind options (the last one wins).
    d.exact(&["SET", "e", "v", "EX", "100"]);
    d.exact(&["SET", "e", "v", "px", "100000"]);
    d.exact(&["SET", "e", "v", "EX", "10", "EX", "20"]);
    d.exact(&["SET", "e", "v", "KEEPTTL", "KEEPTTL"]);
    d.exact(&["SET", "e", "v", "EXAT", &(unix_secs() + 1000).to_string()]);
    d.exact(&["SET", "e", "v", "PXAT", &((unix_secs() + 1000) * 1000).to_string()]);
    d.exact(&["SET", "e", "v", "PXAT", "9223372036854775807"]);
    d.exact(&["SET", "e", "v", "EXAT", "9223372036854775"]);
    d.exact(&["SET", "e", "v", "NX", "EX", "10"]);
    d.exact(&["SET", "e", "v", "XX", "PX", "10000", "GET"]);
    // An absolute time in the past: the key is set and already gone.
    d.exact(&["SET", "past", "v", "EXAT", "1"]);
    d.exact(&["GET", "past"]);
    d.exact(&["SET", "past", "v", "PXAT", "1", "GET"]);
    d.exact(&["GET", "past"]);
    // Keywords end at a NUL byte, as C sees them.
    d.exact(&[b"SET".as_slice(), b"nul", b"v", b"NX\x00junk"]);
    d.exact(&["GET", "nul"]);

    // Invalid expire times.
    for (opt, v) in [
        ("EX", "0"),
        ("EX", "-1"),
        ("PX", "0"),
        ("PX", "-100"),
        ("EXAT", "0"),
        ("PXAT", "-1"),
        ("EX", "9223372036854775"),
        ("EX", "9223372036854776"),
        ("EXAT", "9223372036854776"),
        ("PX", "9223372036854775807"),
        ("PX", "9223372036854000000"),
    ] {
        d.err(&["SET", "k", "v", opt, v]);
    }
    for (opt, v) in [("EX", "abc"), ("PX", "1.5"), ("EXAT", ""), ("PXAT", " 1"), ("EX", "99999999999999999999")] {
        d.err(&["SET", "k", "v", opt, v]);
    }
    // Conflicting or malformed options.
    for opts in [
        &["NX", "XX"][..],
        &["XX", "NX"],
        &["EX", "10", "PX", "100"],
        &["PX", "10", "EXAT", "100"],
        &["EXAT", "10", "PXAT", "100"],
        &["KEEPTTL", "EX", "10"],
        &["PX", "10", "KEEPTTL"],
        &["EX"],
        &["PX"],
        &["NX", "EX"],
        &["PERSIST"],
        &["FOO"],
        &["EX", "10", "junk"],
        &["GETT"],
        &["N"],
    ] {
        let mut args = vec!["SET", "k", "v"];
        args.extend_from_slice(opts);
        d.err(&args);
    }
    // Validation order: expire value, then GET's type check, then the write.
    make_non_string(&mut d, "coll");
    d.err(&["SET", "coll", "v", "GET"]);
    d.err(&["SET", "coll", "v", "EX", "0", "GET"]);
    d.err(&["SET", "coll", "v", "EX", "x", "GET"]);
    d.exact(&["SET", "coll", "v", "NX"]);
    d.exact(&["SET", "coll", "v"]);
    d.exact(&["GET", "coll"]);
    d.err(&["SET", "k"]);
    d.err(&["SET"]);
    d.finish();
}

#[test]
fn expire_options_report_ttls() {
    // Uses TTL/PTTL (keys family) to check the absolute expire times.
    let mut d = Diff::new();
    d.exact(&["SET", "k", "v", "EX", "100"]);
    d.check(&["TTL", "k"], close_ints(1));
    d.exact(&["SET", "k", "v", "PX", "50000"]);
    d.check(&["PTTL", "k"], close_ints(200));
    d.exact(&["SET", "k", "v2", "KEEPTTL"]);
    d.check(&["PTTL", "k"], close_ints(200));
    d.exact(&["SET", "k", "v3"]);
    d.exact(&["TTL", "k"]);
    let at = unix_secs() + 500;
    d.exact(&["SET", "k", "v", "EXAT", &at.to_string()]);
    d.check(&["TTL", "k"], close_ints(1));
    d.exact(&["SET", "k", "v", "PXAT", &(at * 1000 + 700).to_string()]);
    d.check(&["PTTL", "k"], close_ints(200));
    d.exact(&["SETEX", "k", "30", "v"]);
    d.check(&["TTL", "k"], close_ints(1));
    d.exact(&["PSETEX", "k", "30000", "v"]);
    d.check(&["PTTL", "k"], close_ints(200));
    d.exact(&["GETSET", "k", "v"]);
    d.exact(&["TTL", "k"]);
    d.exact(&["GETEX", "k", "EX", "40"]);
    d.check(&["TTL", "k"], close_ints(1));
    d.exact(&["GETEX", "k"]);
    d.check(&["TTL", "k"], close_ints(1));
    d.exact(&["GETEX", "k", "PERSIST"]);
    d.exact(&["TTL", "k"]);
    d.exact(&["GETEX", "k", "PXAT", &(at * 1000).to_string()]);
    d.check(&["PTTL", "k"], close_ints(200));
    // In-place writes keep the TTL; whole-value writes drop it.
    d.exact(&["SET", "n", "1", "EX", "100"]);
    for cmd in [
        &["INCR", "n"][..],
        &["INCRBY", "n", "5"],
        &["DECR", "n"],
        &["INCRBYFLOAT", "n", "1.5"],
        &["APPEND", "n", "0"],
        &["SETRANGE", "n", "0", "9"],
        &["SETBIT", "n", "1", "1"],
        &["BITFIELD", "n", "SET", "u8", "0", "50"],
    ] {
        d.exact(cmd);
        d.check(&["TTL", "n"], close_ints(1));
    }
    for cmd in [
        &["MSET", "n", "1"][..],
        &["SET", "n", "1", "EX", "100"],
        &["BITOP", "NOT", "n", "n"],
        &["SET", "n", "1", "EX", "100"],
        &["SET", "n", "1"],
    ] {
        d.exact(cmd);
    }
    d.exact(&["TTL", "n"]);
    d.finish();
}

#[test]
fn expiry_happens() {
    let mut d = Diff::new();
    d.exact(&["SET", "px", "v", "PX", "150"]);
    d.exact(&["SET", "keep", "v", "PX", "150"]);
    d.exact(&["SET", "keep", "v2", "KEEPTTL"]);
    d.exact(&["SET", "drop", "v", "PX", "150"]);
    d.exact(&["SET", "drop", "v2"]);
    d.exact(&["PSETEX", "psetex", "150", "v"]);
    d.exact(&["SET", "getex", "v"]);
    d.exact(&["GETEX", "getex", "PX", "150"]);
    d.exact(&["SET", "persist", "v", "PX", "150"]);
    d.exact(&["GETEX", "persist", "PERSIST"]);
    d.exact(&["SET", "counter", "1", "PX", "150"]);
    d.exact(&["INCR", "counter"]);
    d.exact(&["SET", "app", "a", "PX", "150"]);
    d.exact(&["APPEND", "app", "b"]);
    d.exact(&["SET", "gs", "a", "PX", "150"]);
    d.exact(&["GETSET", "gs", "b"]);
    d.exact(&["SET", "ms", "a", "PX", "150"]);
    d.exact(&["MSET", "ms", "b"]);
    d.exact(&["SET", "bits", "a", "PX", "150"]);
    d.exact(&["SETBIT", "bits", "100", "1"]);
    std::thread::sleep(Duration::from_millis(300));
    for key in ["px", "keep", "drop", "psetex", "getex", "persist", "counter", "app", "gs", "ms", "bits"] {
        d.exact(&["GET", key]);
    }
    // A key that expired is missing for every command.
    d.exact(&["SET", "gone", "1", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(20));
    d.exact(&["INCR", "gone"]);
    d.exact(&["SET", "gone2", "abc", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(20));
    d.exact(&["SET", "gone2", "v", "XX"]);
    d.exact(&["SETNX", "gone2", "v"]);
    d.exact(&["GET", "gone2"]);
    d.finish();
}

#[test]
fn setnx_setex_psetex_getset_getdel() {
    let mut d = Diff::new();
    d.exact(&["SETNX", "k", "1"]);
    d.exact(&["SETNX", "k", "2"]);
    d.exact(&["GET", "k"]);
    d.exact(&["SETEX", "e", "100", "v"]);
    d.exact(&["GET", "e"]);
    d.exact(&["PSETEX", "p", "100000", "v"]);
    d.exact(&["GET", "p"]);
    for (cmd, v) in [
        ("SETEX", "0"),
        ("SETEX", "-5"),
        ("PSETEX", "0"),
        ("PSETEX", "-1"),
        ("SETEX", "9223372036854775"),
        ("PSETEX", "9223372036854775807"),
    ] {
        d.err(&[cmd, "e", v, "v"]);
    }
    d.err(&["SETEX", "e", "abc", "v"]);
    d.err(&["PSETEX", "e", "1.5", "v"]);
    d.exact(&["GETSET", "k", "new"]);
    d.exact(&["GETSET", "newkey", "v"]);
    d.exact(&["GET", "k"]);
    d.exact(&["GET", "newkey"]);
    d.exact(&["GETDEL", "k"]);
    d.exact(&["GETDEL", "k"]);
    d.exact(&["GET", "k"]);
    d.exact(&["STRLEN", "k"]);
    make_non_string(&mut d, "coll");
    d.exact(&["SETNX", "coll", "v"]);
    d.exact(&["SETEX", "coll2", "100", "v"]);
    d.err(&["GETSET", "coll", "v"]);
    d.err(&["GETDEL", "coll"]);
    // The failed GETSET/GETDEL left the collection alone.
    d.err(&["GET", "coll"]);
    d.exact(&["SETEX", "coll", "100", "v"]);
    d.exact(&["GET", "coll"]);
    d.finish();
}

#[test]
fn getex() {
    let mut d = Diff::new();
    d.exact(&["GETEX", "nokey"]);
    // A missing key answers nil even with a bad expire value.
    d.exact(&["GETEX", "nokey", "EX", "abc"]);
    d.exact(&["GETEX", "nokey", "PX", "0"]);
    d.exact(&["SET", "k", "v"]);
    d.exact(&["GETEX", "k"]);
    d.exact(&["GETEX", "k", "EX", "100"]);
    d.exact(&["GETEX", "k", "PX", "100000"]);
    d.exact(&["GETEX", "k", "EXAT", &(unix_secs() + 100).to_string()]);
    d.exact(&["GETEX", "k", "PXAT", &((unix_secs() + 100) * 1000).to_string()]);
    d.exact(&["GETEX", "k", "PERSIST"]);
    d.exact(&["GETEX", "k", "persist", "PERSIST"]);
    d.exact(&["GETEX", "k", "ex", "10", "EX", "20"]);
    // A past absolute time deletes the key after replying with it.
    d.exact(&["GETEX", "k", "EXAT", "1"]);
    d.exact(&["GET", "k"]);
    d.exact(&["SET", "k", "v"]);
    d.exact(&["GETEX", "k", "PXAT", "1000"]);
    d.exact(&["GETEX", "k"]);
    d.exact(&["SET", "k", "v"]);
    for (opt, v) in
        [("EX", "0"), ("PX", "-1"), ("EXAT", "0"), ("EX", "9223372036854776"), ("PX", "9223372036854775807")]
    {
        d.err(&["GETEX", "k", opt, v]);
    }
    d.err(&["GETEX", "k", "EX", "abc"]);
    for opts in [
        &["NX"][..],
        &["XX"],
        &["GET"],
        &["KEEPTTL"],
        &["EX"],
        &["EX", "10", "PX", "10"],
        &["PERSIST", "EX", "10"],
        &["EX", "10", "PERSIST"],
        &["FOO"],
    ] {
        let mut args = vec!["GETEX", "nokey"];
        args.extend_from_slice(opts);
        d.err(&args);
    }
    d.exact(&["GET", "k"]);
    make_non_string(&mut d, "coll");
    d.err(&["GETEX", "coll"]);
    d.err(&["GETEX", "coll", "EX", "abc"]);
    d.err(&["GETEX", "coll", "NX"]);
    d.finish();
}

#[test]
fn mget_mset_msetnx() {
    let mut d = Diff::new();
    d.exact(&["MSET", "a", "1", "b", "2", "c", "3"]);
    d.exact(&["MGET", "a", "b", "c", "nokey", "a"]);
    d.exact(&["MSET", "a", "x", "a", "y"]);
    d.exact(&["GET", "a"]);
    make_non_string(&mut d, "coll");
    d.exact(&["MGET", "coll", "a"]);
    d.exact(&["MSETNX", "n1", "1", "n2", "2"]);
    d.exact(&["MGET", "n1", "n2"]);
    d.exact(&["MSETNX", "n3", "3", "n1", "x"]);
    d.exact(&["MGET", "n1", "n3"]);
    d.exact(&["MSETNX", "coll", "x"]);
    d.exact(&["MSETNX", "d", "1", "d", "2"]);
    d.exact(&["GET", "d"]);
    d.exact(&["MSET", "coll", "now-a-string"]);
    d.exact(&["GET", "coll"]);
    for args in [&["MSET"][..], &["MSET", "a"], &["MSET", "a", "1", "b"], &["MSETNX", "a"], &["MSETNX", "a", "1", "b"]]
    {
        d.err(args);
    }
    d.err(&["MGET"]);
    d.finish();
}

#[test]
fn integer_counters() {
    let mut d = Diff::new();
    d.exact(&["INCR", "n"]);
    d.exact(&["INCR", "n"]);
    d.exact(&["DECR", "n"]);
    d.exact(&["DECR", "m"]);
    d.exact(&["INCRBY", "n", "100"]);
    d.exact(&["INCRBY", "n", "-1000"]);
    d.exact(&["DECRBY", "n", "-5"]);
    d.exact(&["DECRBY", "n", "7"]);
    d.exact(&["GET", "n"]);
    d.exact(&["INCRBY", "fresh", "-9223372036854775808"]);
    d.exact(&["DECRBY", "fresh2", "9223372036854775807"]);
    // Overflow in both directions, and the value left untouched.
    d.exact(&["SET", "max", "9223372036854775807"]);
    d.err(&["INCR", "max"]);
    d.err(&["INCRBY", "max", "1"]);
    d.exact(&["INCRBY", "max", "0"]);
    d.exact(&["DECRBY", "max", "9223372036854775807"]);
    d.exact(&["SET", "min", "-9223372036854775808"]);
    d.err(&["DECR", "min"]);
    d.err(&["INCRBY", "min", "-1"]);
    d.exact(&["GET", "min"]);
    d.err(&["DECRBY", "x", "-9223372036854775808"]);
    d.exact(&["GET", "x"]);
    // Only canonical integers count.
    for v in ["abc", "", " 1", "1 ", "+1", "01", "-0", "1.0", "1e3", "9223372036854775808", "0x10", "1\x00"] {
        d.exact(&["SET", "s", v]);
        d.err(&["INCR", "s"]);
        d.err(&["DECRBY", "s", "1"]);
        d.exact(&["GET", "s"]);
    }
    for v in ["abc", "1.5", "", " 2", "99999999999999999999", "-9223372036854775809"] {
        d.err(&["INCRBY", "n", v]);
        d.err(&["DECRBY", "n", v]);
    }
    d.exact(&["SET", "z", "0"]);
    d.exact(&["INCR", "z"]);
    d.exact(&["SET", "z", "-1"]);
    d.exact(&["INCR", "z"]);
    d.exact(&["GET", "z"]);
    make_non_string(&mut d, "coll");
    for cmd in [&["INCR", "coll"][..], &["DECR", "coll"], &["INCRBY", "coll", "1"], &["DECRBY", "coll", "1"]] {
        d.err(cmd);
    }
    // The increment is parsed before the key is looked at.
    d.err(&["INCRBY", "coll", "abc"]);
    d.err(&["DECRBY", "coll", "-9223372036854775808"]);
    d.finish();
}

#[test]
fn incrbyfloat() {
    let mut d = Diff::new();
    for (key, incr) in [
        ("f", "0.1"),
        ("f", "0.2"),
        ("f", "-0.3"),
        ("g", "10.5"),
        ("g", "0.1"),
        ("h", "5.0e3"),
        ("h", "2.0e2"),
        ("i", "1e308"),
        ("i", "1e308"),
        ("j", "-1e-20"),
        ("k", "0x10"),
        ("k", "0x1p-3"),
        ("l", "1.23456789012345678901234"),
        ("m", "1e30"),
        ("n", ".5"),
        ("n", "5."),
        ("n", "-.5e1"),
        ("o", "+1.5"),
        ("p", "1e-4940"),
        ("q", "0.000000000000000015"),
        ("r", "3"),
        ("r", "-3"),
        ("s", "1e4000"),
        ("t", "-0"),
        // Exact ties at the 18th decimal: %.17Lf rounds them to even.
        ("u", "0.000003814697265625"),
        ("v", "-0x1p-18"),
        ("w", "1.000003814697265625"),
    ] {
        d.exact(&["INCRBYFLOAT", key, incr]);
    }
    d.exact(&["GET", "f"]);
    d.exact(&["GET", "i"]);
    d.exact(&["SET", "int", "12"]);
    d.exact(&["INCRBYFLOAT", "int", "1.5"]);
    d.exact(&["SET", "exp", "1e2"]);
    d.exact(&["INCRBYFLOAT", "exp", "1"]);
    for bad in ["abc", "", " 1", "1 ", "nan", "-nan", "1e5000", "1e-5000", "1.2e4932", "1e", "0x", "1,5", "--1"] {
        d.err(&["INCRBYFLOAT", "f", bad]);
        d.exact(&["SET", "bad", bad]);
        d.err(&["INCRBYFLOAT", "bad", "1"]);
    }
    d.exact(&["GET", "f"]);
    for inf in ["inf", "-inf", "+inf", "infinity", "-Infinity", "INF"] {
        d.err(&["INCRBYFLOAT", "f", inf]);
    }
    d.exact(&["SET", "huge", "1.1e4932"]);
    d.err(&["INCRBYFLOAT", "huge", "1e4932"]);
    d.exact(&["SET", "inf", "inf"]);
    d.err(&["INCRBYFLOAT", "inf", "1"]);
    d.err(&["INCRBYFLOAT", "missing", "inf"]);
    d.exact(&["GET", "missing"]);
    make_non_string(&mut d, "coll");
    d.err(&["INCRBYFLOAT", "coll", "1"]);
    d.err(&["INCRBYFLOAT", "coll", "abc"]);
    d.finish();
}

/// Random INCRBYFLOAT chains: exact long double arithmetic and formatting.
#[test]
fn incrbyfloat_random() {
    let mut d = Diff::new();
    let mut r = Rng::new(0x5eed_f10a7);
    for i in 0..400 {
        let key = format!("f{}", i % 40);
        let incr = match r.below(9) {
            0 => format!("{}", r.next() as i64 >> r.below(64)),
            1 => format!("{}.{}", r.some_digits(5), r.some_digits(20)),
            2 => format!("-{}.{}", r.some_digits(3), r.some_digits(25)),
            3 => format!("{}e{}", r.some_digits(20), r.range(-60, 60)),
            4 => format!("0.{}", r.some_digits(30)),
            5 => format!("{}", f64::from_bits(r.next() >> 2)),
            6 => format!("{}", (r.range(-1_000_000, 1_000_000) as f64) / 8.0),
            7 => format!("0x{:x}p{}", r.next(), r.range(-100, 100)),
            _ => format!("{}.{}", r.below(100), r.digits(17)),
        };
        d.run(Mode::Exact, &["INCRBYFLOAT", &key, &incr]);
    }
    for i in 0..40 {
        d.exact(&["GET", &format!("f{i}")]);
    }
    d.finish();
}

#[test]
fn append_strlen_getrange_setrange() {
    let mut d = Diff::new();
    d.exact(&["APPEND", "a", "hello"]);
    d.exact(&["APPEND", "a", " world"]);
    d.exact(&["APPEND", "a", ""]);
    d.exact(&["APPEND", "e", ""]);
    d.exact(&["GET", "e"]);
    d.exact(&["GET", "a"]);
    d.exact(&["STRLEN", "a"]);
    d.exact(&["STRLEN", "nokey"]);
    d.exact(&["SET", "i", "12345"]);
    d.exact(&["APPEND", "i", "6"]);
    d.exact(&["INCR", "i"]);
    d.exact(&["STRLEN", "i"]);
    for (s, e) in [
        ("0", "-1"),
        ("0", "4"),
        ("-5", "-1"),
        ("-1", "-5"),
        ("6", "3"),
        ("-100", "2"),
        ("3", "100"),
        ("100", "200"),
        ("-100", "-90"),
        ("0", "0"),
        ("-1", "-1"),
        ("-9223372036854775808", "9223372036854775807"),
        ("9223372036854775807", "-9223372036854775808"),
    ] {
        d.exact(&["GETRANGE", "a", s, e]);
        d.exact(&["SUBSTR", "a", s, e]);
    }
    d.exact(&["GETRANGE", "nokey", "0", "-1"]);
    d.exact(&["SET", "empty", ""]);
    d.exact(&["GETRANGE", "empty", "0", "-1"]);
    d.exact(&["GETRANGE", "empty", "-1", "5"]);
    d.err(&["GETRANGE", "a", "x", "1"]);
    d.err(&["GETRANGE", "a", "1", "1.5"]);
    d.err(&["GETRANGE", "nokey", "x", "1"]);

    d.exact(&["SETRANGE", "a", "6", "WORLD"]);
    d.exact(&["GET", "a"]);
    d.exact(&["SETRANGE", "a", "15", "!"]);
    d.exact(&["GET", "a"]);
    d.exact(&["SETRANGE", "a", "3", ""]);
    d.exact(&["SETRANGE", "a", "1000", ""]);
    d.exact(&["STRLEN", "a"]);
    d.exact(&["SETRANGE", "new", "5", "x"]);
    d.exact(&["GET", "new"]);
    d.exact(&["SETRANGE", "new2", "0", ""]);
    d.exact(&["GET", "new2"]);
    d.exact(&["SETRANGE", "new3", "0", "abc"]);
    d.exact(&["GET", "new3"]);
    d.err(&["SETRANGE", "a", "-1", "x"]);
    d.err(&["SETRANGE", "a", "abc", "x"]);
    d.err(&["SETRANGE", "a", "536870912", "x"]);
    d.err(&["SETRANGE", "a", "536870911", "xy"]);
    d.err(&["SETRANGE", "nokey", "536870912", "x"]);
    d.err(&["SETRANGE", "nokey", "9223372036854775807", "x"]);
    d.exact(&["SETRANGE", "nokey", "536870912", ""]);
    d.exact(&["GET", "nokey"]);

    make_non_string(&mut d, "coll");
    d.err(&["APPEND", "coll", "x"]);
    d.err(&["STRLEN", "coll"]);
    d.err(&["GETRANGE", "coll", "0", "1"]);
    d.err(&["SUBSTR", "coll", "0", "1"]);
    d.err(&["SETRANGE", "coll", "0", "x"]);
    d.err(&["SETRANGE", "coll", "0", ""]);
    d.err(&["SETRANGE", "coll", "-1", "x"]);
    d.finish();
}

/// Random GETRANGE/SETRANGE/APPEND sequences.
#[test]
fn ranges_random() {
    let mut d = Diff::new();
    let mut r = Rng::new(0x000a_11ce);
    for i in 0..300 {
        let key = format!("r{}", i % 7);
        match r.below(4) {
            0 => {
                let len = r.below(40) as usize;
                d.exact(&[b"SET".as_slice(), key.as_bytes(), &r.bytes(len)]);
            }
            1 => {
                let (off, len) = (r.below(50).to_string(), r.below(10) as usize);
                d.exact(&[b"SETRANGE".as_slice(), key.as_bytes(), off.as_bytes(), &r.bytes(len)]);
            }
            2 => {
                let len = r.below(10) as usize;
                d.exact(&[b"APPEND".as_slice(), key.as_bytes(), &r.bytes(len)]);
            }
            _ => {
                let (s, e) = (r.range(-60, 60).to_string(), r.range(-60, 60).to_string());
                d.exact(&["GETRANGE", &key, &s, &e]);
            }
        }
    }
    d.finish();
}

#[test]
fn lcs() {
    let mut d = Diff::new();
    d.exact(&["MSET", "a", "ohmytext", "b", "mynewtext"]);
    d.exact(&["LCS", "a", "b"]);
    d.exact(&["LCS", "a", "b", "LEN"]);
    d.exact(&["LCS", "a", "b", "IDX"]);
    d.exact(&["LCS", "a", "b", "IDX", "WITHMATCHLEN"]);
    d.exact(&["LCS", "a", "b", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"]);
    d.exact(&["LCS", "a", "b", "idx", "minmatchlen", "-5"]);
    d.exact(&["LCS", "a", "b", "LEN", "LEN", "WITHMATCHLEN", "MINMATCHLEN", "2"]);
    d.exact(&["LCS", "a", "nokey"]);
    d.exact(&["LCS", "nokey", "nokey2", "IDX"]);
    d.exact(&["LCS", "a", "a", "IDX", "WITHMATCHLEN"]);
    d.exact(&["MSET", "x", "ABCBDAB", "y", "BDCABA"]);
    d.exact(&["LCS", "x", "y", "IDX", "WITHMATCHLEN"]);
    d.exact(&["LCS", "y", "x"]);
    d.err(&["LCS", "a", "b", "LEN", "IDX"]);
    d.err(&["LCS", "a", "b", "FOO"]);
    d.err(&["LCS", "a", "b", "MINMATCHLEN"]);
    d.err(&["LCS", "a", "b", "MINMATCHLEN", "x"]);
    d.err(&["LCS", "a"]);
    make_non_string(&mut d, "coll");
    d.err(&["LCS", "coll", "a"]);
    d.err(&["LCS", "a", "coll", "FOO"]);
    // The DP table would exceed proto-max-bulk-len (512mb).
    let long = "ab".repeat(6000);
    d.exact(&["MSET", "l1", &long, "l2", &long]);
    d.err(&["LCS", "l1", "l2"]);
    let mut r = Rng::new(0x1c5);
    for _ in 0..40 {
        let alphabet = 1 + r.below(4) as u8;
        let make = |r: &mut Rng| -> Vec<u8> {
            let len = r.below(30) as usize;
            (0..len).map(|_| b'a' + (r.next() as u8 % alphabet)).collect()
        };
        let (s1, s2) = (make(&mut r), make(&mut r));
        d.exact(&[b"MSET".as_slice(), b"r1", &s1, b"r2", &s2]);
        d.exact(&["LCS", "r1", "r2"]);
        d.exact(&["LCS", "r1", "r2", "IDX", "WITHMATCHLEN", "MINMATCHLEN", &r.below(3).to_string()]);
    }
    d.finish();
}

#[test]
fn setbit_getbit() {
    let mut d = Diff::new();
    d.exact(&["SETBIT", "b", "7", "1"]);
    d.exact(&["SETBIT", "b", "7", "1"]);
    d.exact(&["SETBIT", "b", "0", "1"]);
    d.exact(&["GET", "b"]);
    d.exact(&["SETBIT", "b", "100", "0"]);
    d.exact(&["STRLEN", "b"]);
    d.exact(&["SETBIT", "b", "7", "0"]);
    d.exact(&["GETBIT", "b", "0"]);
    d.exact(&["GETBIT", "b", "7"]);
    d.exact(&["GETBIT", "b", "99999"]);
    d.exact(&["GETBIT", "nokey", "5"]);
    d.exact(&["SETBIT", "zero", "0", "0"]);
    d.exact(&["GET", "zero"]);
    d.exact(&["SET", "s", "A"]);
    d.exact(&["SETBIT", "s", "6", "1"]);
    d.exact(&["GET", "s"]);
    for off in ["-1", "abc", "1.5", "4294967296", "9223372036854775807", "#1"] {
        d.err(&["SETBIT", "b", off, "1"]);
        d.err(&["GETBIT", "b", off]);
    }
    d.err(&["GETBIT", "nokey", "-1"]);
    for v in ["2", "-1", "abc", "", "01"] {
        d.err(&["SETBIT", "b", "1", v]);
    }
    make_non_string(&mut d, "coll");
    d.err(&["SETBIT", "coll", "1", "1"]);
    d.err(&["GETBIT", "coll", "1"]);
    d.finish();
}

#[test]
fn bitcount_and_bitpos() {
    let mut d = Diff::new();
    d.exact(&["SET", "s", "foobar"]);
    d.exact(&["BITCOUNT", "s"]);
    for (a, b) in [("0", "0"), ("1", "1"), ("1", "-2"), ("-2", "-1"), ("-1", "-2"), ("5", "100"), ("-100", "100")] {
        d.exact(&["BITCOUNT", "s", a, b]);
        d.exact(&["BITCOUNT", "s", a, b, "BYTE"]);
        d.exact(&["BITCOUNT", "s", a, b, "bit"]);
    }
    d.exact(&["BITCOUNT", "s", "5", "30", "BIT"]);
    d.exact(&["BITCOUNT", "nokey"]);
    // A missing key answers 0 whatever the arguments.
    d.exact(&["BITCOUNT", "nokey", "a", "b"]);
    d.exact(&["BITCOUNT", "nokey", "1"]);
    d.err(&["BITCOUNT", "s", "1"]);
    d.err(&["BITCOUNT", "s", "a", "1"]);
    d.err(&["BITCOUNT", "s", "0", "1", "BOTH"]);
    d.err(&["BITCOUNT", "s", "a", "1", "BOTH"]);
    d.err(&["BITCOUNT", "s", "0", "1", "BIT", "x"]);
    d.exact(&["SET", "empty", ""]);
    d.exact(&["BITCOUNT", "empty"]);
    d.exact(&["BITCOUNT", "empty", "0", "-1", "BIT"]);

    d.exact(&[b"SET".as_slice(), b"p", b"\xff\xf0\x00"]);
    d.exact(&["BITPOS", "p", "0"]);
    d.exact(&["BITPOS", "p", "1"]);
    d.exact(&["BITPOS", "p", "1", "2"]);
    d.exact(&["BITPOS", "p", "0", "1"]);
    d.exact(&["BITPOS", "p", "1", "1", "-1"]);
    d.exact(&["BITPOS", "p", "0", "0", "0"]);
    d.exact(&["BITPOS", "p", "0", "3", "10", "BIT"]);
    d.exact(&["BITPOS", "p", "1", "7", "15", "bit"]);
    d.exact(&[b"SET".as_slice(), b"ones", b"\xff\xff"]);
    d.exact(&["BITPOS", "ones", "0"]);
    d.exact(&["BITPOS", "ones", "0", "1"]);
    d.exact(&["BITPOS", "ones", "0", "0", "-1"]);
    d.exact(&["BITPOS", "ones", "0", "3", "-1", "BIT"]);
    d.exact(&["BITPOS", "ones", "1", "5", "4"]);
    d.exact(&["BITPOS", "nokey", "0"]);
    d.exact(&["BITPOS", "nokey", "1"]);
    d.exact(&["BITPOS", "nokey", "1", "x"]);
    d.exact(&["BITPOS", "empty", "0"]);
    d.exact(&["BITPOS", "empty", "1"]);
    d.exact(&["BITPOS", "empty", "0", "0"]);
    for bad in [&["BITPOS", "p", "2"][..], &["BITPOS", "p", "-1"], &["BITPOS", "nokey", "2"]] {
        d.err(bad);
    }
    d.err(&["BITPOS", "p", "x"]);
    d.err(&["BITPOS", "p", "1", "x"]);
    d.err(&["BITPOS", "p", "1", "0", "x"]);
    d.err(&["BITPOS", "p", "1", "0", "-1", "BAD"]);
    d.err(&["BITPOS", "p", "1", "0", "x", "BAD"]);
    d.err(&["BITPOS", "p", "1", "0", "-1", "BIT", "extra"]);
    make_non_string(&mut d, "coll");
    d.err(&["BITCOUNT", "coll"]);
    d.err(&["BITPOS", "coll", "1"]);
    d.err(&["BITPOS", "coll", "2"]);
    d.finish();
}

/// Random strings and ranges for BITCOUNT and BITPOS, in both units.
#[test]
fn bitcount_bitpos_random() {
    let mut d = Diff::new();
    let mut r = Rng::new(0xb17_c0de);
    for _ in 0..60 {
        let len = r.below(12) as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|_| match r.below(4) {
                0 => 0x00,
                1 => 0xff,
                _ => r.next() as u8,
            })
            .collect();
        d.exact(&[b"SET".as_slice(), b"k", &bytes]);
        d.exact(&["BITCOUNT", "k"]);
        d.exact(&["BITPOS", "k", "0"]);
        d.exact(&["BITPOS", "k", "1"]);
        for _ in 0..8 {
            let span = if r.below(2) == 0 { 16 } else { 110 };
            let (a, b) = (r.range(-span, span).to_string(), r.range(-span, span).to_string());
            let unit = ["BYTE", "BIT", "bit"][r.below(3) as usize];
            let bit = r.below(2).to_string();
            d.exact(&["BITCOUNT", "k", &a, &b]);
            d.exact(&["BITCOUNT", "k", &a, &b, unit]);
            d.exact(&["BITPOS", "k", &bit, &a]);
            d.exact(&["BITPOS", "k", &bit, &a, &b]);
            d.exact(&["BITPOS", "k", &bit, &a, &b, unit]);
        }
    }
    d.finish();
}

#[test]
fn bitop() {
    let mut d = Diff::new();
    d.exact(&[b"MSET".as_slice(), b"a", b"\xff\x0f\x55", b"b", b"\x0f\xff", b"c", b"\x01"]);
    for op in ["AND", "or", "Xor"] {
        d.exact(&["BITOP", op, "dest", "a", "b", "c"]);
        d.exact(&["GET", "dest"]);
        d.exact(&["BITOP", op, "dest", "c", "nokey", "a"]);
        d.exact(&["GET", "dest"]);
        d.exact(&["BITOP", op, "dest", "a"]);
        d.exact(&["GET", "dest"]);
    }
    d.exact(&["BITOP", "NOT", "dest", "a"]);
    d.exact(&["GET", "dest"]);
    // The destination may be a source.
    d.exact(&["BITOP", "XOR", "a", "a", "b"]);
    d.exact(&["GET", "a"]);
    // All sources empty or missing: the destination is deleted.
    d.exact(&["SET", "empty", ""]);
    d.exact(&["BITOP", "OR", "dest", "nokey", "empty"]);
    d.exact(&["GET", "dest"]);
    d.exact(&["BITOP", "NOT", "dest", "nokey"]);
    d.exact(&["GET", "dest"]);
    d.exact(&["SET", "dest", "x"]);
    d.exact(&["BITOP", "AND", "dest", "nokey"]);
    d.exact(&["GET", "dest"]);
    d.err(&["BITOP", "NOT", "dest", "a", "b"]);
    d.err(&["BITOP", "NAND", "dest", "a"]);
    d.err(&["BITOP", "AN", "dest", "a"]);
    d.err(&["BITOP", "AND", "dest"]);
    make_non_string(&mut d, "coll");
    d.err(&["BITOP", "AND", "dest", "a", "coll"]);
    d.err(&["BITOP", "NOT", "dest", "coll"]);
    d.exact(&["BITOP", "AND", "coll", "a"]);
    d.exact(&["GET", "coll"]);
    let mut r = Rng::new(0xb170b);
    for _ in 0..40 {
        for key in ["x", "y", "z"] {
            let len = r.below(10) as usize;
            d.exact(&[b"SET".as_slice(), key.as_bytes(), &r.bytes(len)]);
        }
        let op = ["AND", "OR", "XOR"][r.below(3) as usize];
        d.exact(&["BITOP", op, "out", "x", "y", "nokey", "z"]);
        d.exact(&["GET", "out"]);
    }
    d.finish();
}

#[test]
fn bitfield() {
    let mut d = Diff::new();
    d.exact(&["BITFIELD", "bf", "SET", "i8", "0", "100", "GET", "i8", "0"]);
    d.exact(&["BITFIELD", "bf", "INCRBY", "i8", "0", "100", "GET", "u4", "0"]);
    d.exact(&["BITFIELD", "bf", "OVERFLOW", "SAT", "INCRBY", "i8", "0", "200", "INCRBY", "i8", "0", "-1000"]);
    d.exact(&["BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "u2", "100", "5", "GET", "u2", "100"]);
    d.exact(&[
        "BITFIELD", "bf", "OVERFLOW", "fail", "INCRBY", "u2", "100", "1", "overflow", "wrap", "INCRBY", "u2", "100",
        "7",
    ]);
    d.exact(&["BITFIELD", "bf", "SET", "u8", "#1", "255", "GET", "u8", "#1", "GET", "i16", "#0"]);
    d.exact(&[
        "BITFIELD", "bf", "SET", "u8", "0", "-1", "OVERFLOW", "SAT", "SET", "u8", "8", "-1", "SET", "i8", "16", "300",
    ]);
    d.exact(&["BITFIELD", "bf", "OVERFLOW", "FAIL", "SET", "u8", "0", "256", "SET", "i4", "0", "-9"]);
    d.exact(&["BITFIELD", "bf", "SET", "i64", "0", "-9223372036854775808", "INCRBY", "i64", "0", "-1"]);
    d.exact(&[
        "BITFIELD",
        "bf",
        "OVERFLOW",
        "SAT",
        "INCRBY",
        "i64",
        "0",
        "-5",
        "INCRBY",
        "i64",
        "0",
        "9223372036854775807",
    ]);
    d.exact(&["BITFIELD", "bf", "SET", "u63", "1", "9223372036854775807", "INCRBY", "u63", "1", "1"]);
    d.exact(&["BITFIELD", "bf", "GET", "u1", "1000", "GET", "i64", "3", "GET", "u63", "70"]);
    d.exact(&["GET", "bf"]);
    // `#N` offsets are multiplied with wrap-around: this one lands on bit 64.
    d.exact(&["BITFIELD", "bf", "GET", "i64", "#288230376151711745", "GET", "i64", "64"]);
    d.exact(&["BITFIELD", "nokey", "GET", "u8", "0"]);
    d.exact(&["GET", "nokey"]);
    d.exact(&["BITFIELD", "nokey"]);
    d.exact(&["BITFIELD", "nokey", "OVERFLOW", "WRAP"]);
    d.exact(&["GET", "nokey"]);
    // A failed write still creates and grows the key.
    d.exact(&["BITFIELD", "fail", "OVERFLOW", "FAIL", "SET", "u8", "16", "999"]);
    d.exact(&["GET", "fail"]);
    d.exact(&["BITFIELD_RO", "bf", "GET", "u8", "0", "GET", "i5", "#3"]);
    d.exact(&["BITFIELD_RO", "nokey", "GET", "u8", "0"]);
    d.exact(&["BITFIELD_RO", "nokey"]);
    d.err(&["BITFIELD_RO", "bf", "SET", "u8", "0", "1"]);
    d.err(&["BITFIELD_RO", "bf", "INCRBY", "u8", "0", "1"]);
    d.err(&["BITFIELD_RO", "bf", "SET", "u8", "0", "abc"]);
    d.err(&["BITFIELD_RO", "bf", "GET", "u8", "0", "SET", "u8", "0", "1", "GET"]);
    for bad in [
        &["GET", "u64", "0"][..],
        &["GET", "i65", "0"],
        &["GET", "u0", "0"],
        &["GET", "I8", "0"],
        &["GET", "8", "0"],
        &["GET", "", "0"],
        &["GET", "u8", "-1"],
        &["GET", "u8", "#"],
        &["GET", "u8", "#-1"],
        &["GET", "u8", "x"],
        &["GET", "u8", "4294967296"],
        &["GET", "u8", "#536870912"],
        &["SET", "u8", "0", "x"],
        &["INCRBY", "u8", "0", "1.5"],
        &["GET", "u8"],
        &["SET", "u8", "0"],
        &["OVERFLOW"],
        &["OVERFLOW", "MAYBE"],
        &["FOO"],
        &["GET", "u8", "0", "EXTRA"],
    ] {
        let mut args = vec!["BITFIELD", "bf"];
        args.extend_from_slice(bad);
        d.err(&args);
    }
    make_non_string(&mut d, "coll");
    d.err(&["BITFIELD", "coll", "GET", "u8", "0"]);
    d.err(&["BITFIELD", "coll", "SET", "u8", "0", "1"]);
    d.err(&["BITFIELD_RO", "coll", "GET", "u8", "0"]);
    let mut r = Rng::new(0xf1e1d);
    for _ in 0..150 {
        let mut args: Vec<String> = vec!["BITFIELD".into(), "rand".into()];
        for _ in 0..1 + r.below(3) {
            if r.below(4) == 0 {
                args.push("OVERFLOW".into());
                args.push(["WRAP", "SAT", "FAIL"][r.below(3) as usize].into());
            }
            let signed = r.below(2) == 0;
            let bits = if signed { 1 + r.below(64) } else { 1 + r.below(63) };
            let ty = format!("{}{}", if signed { "i" } else { "u" }, bits);
            let offset = r.below(80).to_string();
            let value = match r.below(3) {
                0 => r.range(-300, 300),
                1 => r.next() as i64,
                _ => (r.next() >> r.below(64)) as i64,
            };
            match r.below(3) {
                0 => args.extend(["GET".into(), ty, offset]),
                1 => args.extend(["SET".into(), ty, offset, value.to_string()]),
                _ => args.extend(["INCRBY".into(), ty, offset, value.to_string()]),
            }
        }
        d.exact(&args);
    }
    d.exact(&["GET", "rand"]);
    d.finish();
}

/// A small proto-max-bulk-len makes the size limits cheap to reach.
#[test]
fn size_limits() {
    let limit = ["--proto-max-bulk-len", "1mb"];
    let mut d = Diff::with_servers(Server::strata_with(&limit), Server::redis_with(&limit));
    let mb = 1 << 20;
    d.exact(&["SETRANGE", "s", &(mb - 1).to_string(), "x"]);
    d.exact(&["STRLEN", "s"]);
    d.err(&["SETRANGE", "s", &mb.to_string(), "x"]);
    d.err(&["SETRANGE", "s", &(mb - 1).to_string(), "xy"]);
    d.err(&["APPEND", "s", "x"]);
    d.exact(&["APPEND", "s", ""]);
    d.err(&["SETRANGE", "new", &mb.to_string(), "x"]);
    d.exact(&["SETBIT", "b", &(mb * 8 - 1).to_string(), "1"]);
    d.err(&["SETBIT", "b", &(mb * 8).to_string(), "1"]);
    d.err(&["GETBIT", "b", &(mb * 8).to_string()]);
    d.exact(&["BITFIELD", "f", "SET", "u8", &(mb * 8 - 8).to_string(), "1"]);
    d.err(&["BITFIELD", "f", "GET", "u8", &(mb * 8).to_string()]);
    d.err(&["BITFIELD", "f", "GET", "u8", &format!("#{}", mb)]);
    d.exact(&["BITCOUNT", "f"]);
    d.exact(&["STRLEN", "f"]);
    // LCS's table is (len+1)^2 * 4 bytes.
    let (small, big) = ("a".repeat(500), "a".repeat(600));
    d.exact(&["MSET", "l1", &small, "l2", &small, "l3", &big, "l4", &big]);
    d.exact(&["LCS", "l1", "l2", "LEN"]);
    d.err(&["LCS", "l3", "l4", "LEN"]);
    d.finish();
}

#[test]
fn arity_errors() {
    let mut d = Diff::new();
    for args in [
        &["GET"][..],
        &["GET", "a", "b"],
        &["SET", "a"],
        &["SETNX", "a"],
        &["SETNX", "a", "b", "c"],
        &["SETEX", "a", "1"],
        &["PSETEX", "a", "1", "v", "x"],
        &["GETSET", "a"],
        &["GETDEL"],
        &["GETDEL", "a", "b"],
        &["GETEX"],
        &["MGET"],
        &["MSET"],
        &["MSETNX", "a"],
        &["INCR"],
        &["INCR", "a", "b"],
        &["DECR"],
        &["INCRBY", "a"],
        &["DECRBY", "a", "1", "2"],
        &["INCRBYFLOAT", "a"],
        &["APPEND", "a"],
        &["STRLEN"],
        &["GETRANGE", "a", "0"],
        &["SUBSTR", "a", "0", "1", "2"],
        &["SETRANGE", "a", "0"],
        &["LCS", "a"],
        &["SETBIT", "a", "0"],
        &["GETBIT", "a"],
        &["BITCOUNT"],
        &["BITPOS", "a"],
        &["BITOP", "AND", "d"],
        &["BITFIELD"],
        &["BITFIELD_RO"],
    ] {
        d.err(args);
    }
    d.finish();
}

#[test]
fn resp3_shapes() {
    let mut d = Diff::new_resp3();
    d.exact(&["GET", "nokey"]);
    d.exact(&["SET", "k", "v"]);
    d.exact(&["GET", "k"]);
    d.exact(&["SET", "k", "v", "NX"]);
    d.exact(&["SET", "nokey", "v", "XX"]);
    d.exact(&["SET", "fresh", "v", "GET"]);
    d.exact(&["SET", "fresh", "w", "GET"]);
    d.exact(&["GETSET", "nokey2", "v"]);
    d.exact(&["GETDEL", "nokey3"]);
    d.exact(&["GETEX", "nokey3", "PERSIST"]);
    d.exact(&["GETEX", "k", "EX", "100"]);
    d.exact(&["MGET", "k", "nokey4", "fresh"]);
    d.exact(&["MSETNX", "m1", "1", "m2", "2"]);
    d.exact(&["INCR", "counter"]);
    d.exact(&["INCRBYFLOAT", "flt", "1.5"]);
    d.exact(&["GETRANGE", "nokey5", "0", "-1"]);
    d.exact(&["MSET", "a", "ohmytext", "b", "mynewtext"]);
    d.exact(&["LCS", "a", "b"]);
    d.exact(&["LCS", "a", "b", "LEN"]);
    d.exact(&["LCS", "a", "b", "IDX", "WITHMATCHLEN"]);
    d.exact(&["LCS", "nokey", "nokey2", "IDX"]);
    d.exact(&["BITFIELD", "bf", "OVERFLOW", "FAIL", "SET", "u2", "0", "9", "GET", "u2", "0"]);
    d.exact(&["BITFIELD_RO", "bf", "GET", "u8", "0"]);
    d.exact(&["BITCOUNT", "a"]);
    d.exact(&["BITPOS", "a", "1"]);
    d.err(&["INCR", "a"]);
    d.err(&["SET", "k", "v", "EX", "0"]);
    d.finish();
}

/// WATCH is invalidated exactly when Redis signals a modification: writes
/// that change nothing (SETBIT to the same value, BITFIELD overflow FAIL,
/// GETEX PERSIST without a TTL, failed NX/XX, ...) leave it alone.
#[test]
fn watch_sees_only_real_writes() {
    let mut d = Diff::new();
    let mut strata2 = d.strata_server().expect("owned server").conn();
    let mut redis2 = d.redis_server().expect("owned server").conn();
    let probes: &[&[&str]] = &[
        &["SETBIT", "W", "0", "0"],
        &["SETBIT", "W", "0", "1"],
        &["SETBIT", "W", "100", "0"],
        &["SETRANGE", "W", "0", ""],
        &["SETRANGE", "W", "0", "\x01"],
        &["GETEX", "W", "PERSIST"],
        &["GETEX", "W"],
        &["GETEX", "W", "EX", "100"],
        &["APPEND", "W", ""],
        &["INCRBY", "N", "0"],
        &["INCRBYFLOAT", "W", "1"],
        &["BITFIELD", "W", "GET", "u8", "0"],
        &["BITFIELD", "W", "OVERFLOW", "FAIL", "SET", "u2", "0", "9"],
        &["BITFIELD", "W", "SET", "u8", "0", "1"],
        &["BITFIELD", "W", "INCRBY", "u8", "0", "0"],
        &["BITFIELD", "W", "SET", "u8", "8", "0"],
        &["SET", "W", "x", "NX"],
        &["SET", "W", "x", "XX"],
        &["SET", "W", "\x01"],
        &["SETNX", "W", "1"],
        &["GETSET", "W", "\x01"],
        &["GETDEL", "W"],
        &["MSETNX", "N", "1", "W", "2"],
        &["BITOP", "AND", "W", "NOKEY"],
    ];
    for (i, probe) in probes.iter().enumerate() {
        let rename = |a: &&str| match *a {
            "W" | "N" | "NOKEY" => format!("{a}{i}"),
            other => other.to_string(),
        };
        let probe: Vec<String> = probe.iter().map(rename).collect();
        let (w, n) = (format!("W{i}"), format!("N{i}"));
        d.exact(&["SET", &w, "\x01"]);
        d.exact(&["SET", &n, "5"]);
        let watched = if probe[0] == "BITOP" { &probe[2] } else { &probe[1] };
        d.exact(&["WATCH", watched]);
        assert_eq!(strata2.cmd(&probe), redis2.cmd(&probe), "{probe:?}");
        d.exact(&["MULTI"]);
        d.exact(&["PING"]);
        d.exact(&["EXEC"]);
    }
    d.finish();
}
