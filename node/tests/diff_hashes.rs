//! Differential tests (strata vs redis) for the hash commands: HSET, HMSET,
//! HSETNX, HGET, HMGET, HDEL, HGETALL, HKEYS, HVALS, HLEN, HEXISTS, HSTRLEN,
//! HINCRBY, HINCRBYFLOAT, HRANDFIELD and HSCAN, in RESP2 and RESP3.

mod support;

use std::collections::{BTreeMap, BTreeSet};

use support::*;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn strs(f: &Frame) -> Vec<Vec<u8>> {
    f.as_array()
        .unwrap_or_else(|| panic!("expected an array, got {f}"))
        .iter()
        .map(|e| e.as_bytes().unwrap().to_vec())
        .collect()
}

fn hgetall(conn: &mut RawConn, key: &str) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let flat = strs(&conn.cmd(&["HGETALL", key]));
    flat.chunks_exact(2).map(|p| (p[0].clone(), p[1].clone())).collect()
}

/// HSCAN replies agree when the cursors match and the field/value pairs
/// match in any order.
fn same_scan(a: &Frame, b: &Frame) -> Result<(), String> {
    let (Some(a), Some(b)) = (a.as_array(), b.as_array()) else {
        return if a == b { Ok(()) } else { Err("replies differ".into()) };
    };
    if a.len() != 2 || b.len() != 2 || a[0] != b[0] || a[1].sorted_pairs() != b[1].sorted_pairs() {
        return Err("scan replies differ (cursor or pairs)".into());
    }
    Ok(())
}

#[test]
fn set_get_and_delete_fields() {
    let mut d = Diff::new();
    d.exact(&["HSET", "h", "a", "1", "b", "2"]);
    d.exact(&["HSET", "h", "a", "10", "c", "3", "c", "4"]);
    d.exact(&["HGET", "h", "a"]);
    d.exact(&["HGET", "h", "c"]);
    d.exact(&["HGET", "h", "nosuch"]);
    d.exact(&["HGET", "nosuch", "a"]);
    d.exact(&["HMSET", "h", "d", "5", "a", "11"]);
    d.exact(&["HMGET", "h", "a", "nosuch", "d", "a"]);
    d.exact(&["HMGET", "nosuch", "a", "b"]);
    d.exact(&["HLEN", "h"]);
    d.exact(&["HLEN", "nosuch"]);
    d.exact(&["HEXISTS", "h", "a"]);
    d.exact(&["HEXISTS", "h", "zz"]);
    d.exact(&["HEXISTS", "nosuch", "a"]);
    d.exact(&["HSTRLEN", "h", "a"]);
    d.exact(&["HSTRLEN", "h", "zz"]);
    d.exact(&["HSTRLEN", "nosuch", "a"]);
    d.unordered_pairs(&["HGETALL", "h"]);
    d.unordered(&["HKEYS", "h"]);
    d.unordered(&["HVALS", "h"]);
    d.exact(&["HGETALL", "nosuch"]);
    d.exact(&["HKEYS", "nosuch"]);
    d.exact(&["HVALS", "nosuch"]);
    d.exact(&["HSETNX", "h", "a", "new"]);
    d.exact(&["HSETNX", "h", "e", "new"]);
    d.exact(&["HSETNX", "fresh", "f", "v"]);
    d.unordered_pairs(&["HGETALL", "fresh"]);
    d.exact(&[b"HSET".as_slice(), b"bin", b"", b"empty field", b"\x00\xff", b"\r\n"]);
    d.unordered_pairs(&["HGETALL", "bin"]);
    d.exact(&[b"HGET".as_slice(), b"bin", b"\x00\xff"]);
    d.exact(&["HSTRLEN", "bin", ""]);
    d.exact(&["HDEL", "h", "a", "zz", "a", "b"]);
    d.exact(&["HDEL", "h", "zz"]);
    d.exact(&["HDEL", "nosuch", "a"]);
    d.unordered_pairs(&["HGETALL", "h"]);
    // Deleting the last field deletes the key.
    d.exact(&["HDEL", "h", "c", "d", "e", "x"]);
    d.exact(&["EXISTS", "h"]);
    d.exact(&["HSET", "one", "f", "v"]);
    d.exact(&["HDEL", "one", "f"]);
    d.exact(&["EXISTS", "one"]);
    d.exact(&["TYPE", "bin"]);
    d.finish();
}

#[test]
fn errors_wrong_type_and_arity() {
    let mut d = Diff::new();
    d.exact(&["SET", "str", "v"]);
    d.exact(&["SADD", "set", "m"]);
    for cmd in [
        &["HSET", "str", "f", "v"][..],
        &["HMSET", "set", "f", "v"],
        &["HSETNX", "set", "f", "v"],
        &["HGET", "set", "f"],
        &["HMGET", "set", "f"],
        &["HDEL", "set", "f"],
        &["HGETALL", "set"],
        &["HKEYS", "set"],
        &["HVALS", "set"],
        &["HLEN", "set"],
        &["HEXISTS", "set", "f"],
        &["HSTRLEN", "set", "f"],
        &["HINCRBY", "set", "f", "1"],
        &["HINCRBYFLOAT", "set", "f", "1"],
        &["HRANDFIELD", "set"],
        &["HRANDFIELD", "set", "1"],
        &["HRANDFIELD", "set", "1", "WITHVALUES"],
        &["HSCAN", "set", "0"],
    ] {
        assert_eq!(d.err(cmd).error_message(), Some(WRONGTYPE));
    }
    d.exact(&["GET", "str"]);
    d.unordered(&["SMEMBERS", "set"]);
    for cmd in [
        &["HSET", "h", "f"][..],
        &["HSET", "h", "f", "v", "g"],
        &["HSET", "h"],
        &["HMSET", "h", "f"],
        &["HMSET", "h", "f", "v", "g"],
        &["HSETNX", "h", "f"],
        &["HSETNX", "h", "f", "v", "x"],
        &["HGET", "h"],
        &["HGET", "h", "f", "g"],
        &["HMGET", "h"],
        &["HDEL", "h"],
        &["HGETALL"],
        &["HGETALL", "h", "x"],
        &["HKEYS"],
        &["HVALS"],
        &["HLEN"],
        &["HEXISTS", "h"],
        &["HSTRLEN", "h"],
        &["HINCRBY", "h", "f"],
        &["HINCRBYFLOAT", "h", "f"],
        &["HRANDFIELD"],
        &["HSCAN", "h"],
    ] {
        d.err(cmd);
    }
    // The odd-argument HSET on a wrong-typed key is an arity error first.
    d.err(&["HSET", "set", "f"]);
    d.exact(&["EXISTS", "h"]);
    d.finish();
}

#[test]
fn hincrby() {
    let mut d = Diff::new();
    d.exact(&["HINCRBY", "h", "n", "5"]);
    d.exact(&["HINCRBY", "h", "n", "-15"]);
    d.exact(&["HGET", "h", "n"]);
    d.exact(&["HINCRBY", "h", "n", "0"]);
    d.exact(&["HSET", "h", "max", "9223372036854775807", "min", "-9223372036854775808"]);
    d.err(&["HINCRBY", "h", "max", "1"]);
    d.err(&["HINCRBY", "h", "min", "-1"]);
    d.exact(&["HINCRBY", "h", "max", "-1"]);
    d.exact(&["HINCRBY", "h", "min", "9223372036854775807"]);
    d.exact(&["HINCRBY", "h", "fresh", "9223372036854775807"]);
    d.exact(&["HINCRBY", "h", "fresh2", "-9223372036854775808"]);
    for bad in ["abc", "1.5", "", " 1", "9223372036854775808", "+1", "01"] {
        d.err(&["HINCRBY", "h", "n", bad]);
        d.err(&["HINCRBY", "nosuch", "n", bad]);
    }
    // A failed increment never creates the key.
    d.exact(&["EXISTS", "nosuch"]);
    for value in ["abc", " 1", "1 ", "1.0", "99999999999999999999", "", "0x10", "1e3", "-0", "007"] {
        d.exact(&["HSET", "h", "v", value]);
        d.err(&["HINCRBY", "h", "v", "1"]);
        d.exact(&["HGET", "h", "v"]);
    }
    d.exact(&["HSET", "h", "v", "-0"]);
    d.exact(&["HSET", "h", "v", "-10"]);
    d.exact(&["HINCRBY", "h", "v", "3"]);
    d.exact(&["HGET", "h", "v"]);
    d.finish();
}

#[test]
fn hincrbyfloat_matches_long_double() {
    let mut d = Diff::new();
    // Redis adds in 80-bit long double and prints "%.17Lf" trimmed.
    d.exact(&["HINCRBYFLOAT", "h", "f", "0.1"]);
    d.exact(&["HINCRBYFLOAT", "h", "f", "0.2"]);
    d.exact(&["HINCRBYFLOAT", "h", "f", "-0.3"]);
    d.exact(&["HGET", "h", "f"]);
    d.exact(&["HINCRBYFLOAT", "h", "g", "10.5"]);
    d.exact(&["HINCRBYFLOAT", "h", "g", "0.1"]);
    d.exact(&["HINCRBYFLOAT", "h", "g", "5.0e3"]);
    d.exact(&["HINCRBYFLOAT", "h", "g", "-5.0e3"]);
    d.exact(&["HINCRBYFLOAT", "h", "big", "1e308"]);
    d.exact(&["HINCRBYFLOAT", "h", "big", "1e308"]);
    d.exact(&["HINCRBYFLOAT", "h", "tiny", "1.5e-10"]);
    d.exact(&["HINCRBYFLOAT", "h", "under", "1e-320"]);
    d.exact(&["HINCRBYFLOAT", "h", "hex", "0x10"]);
    d.exact(&["HINCRBYFLOAT", "h", "negzero", "-0.0"]);
    d.exact(&["HINCRBYFLOAT", "h", "e", "1e20"]);
    d.exact(&["HINCRBY", "h", "e", "1"]);
    d.exact(&["HSET", "h", "i", "17179869184"]);
    d.exact(&["HINCRBYFLOAT", "h", "i", "1.5"]);
    d.exact(&["HSET", "h", "x", "1e3"]);
    d.exact(&["HINCRBYFLOAT", "h", "x", "1"]);
    d.exact(&["HINCRBY", "h", "x", "1"]);
    d.exact(&["HSET", "h", "huge", "1e4932"]);
    d.exact(&["HINCRBYFLOAT", "h", "huge", "0"]);
    d.exact(&["HINCRBYFLOAT", "h", "huge", "1e308"]);
    // Bad increments are rejected before the key is looked at.
    for bad in ["abc", "", " 1", "1 ", "nan", "1e5000", "1e-5000", "1.5x"] {
        d.err(&["HINCRBYFLOAT", "h", "f", bad]);
        d.err(&["HINCRBYFLOAT", "nosuch", "f", bad]);
    }
    d.exact(&["SADD", "set", "m"]);
    for inf in ["inf", "-inf", "+inf", "Infinity"] {
        d.err(&["HINCRBYFLOAT", "h", "f", inf]);
        d.err(&["HINCRBYFLOAT", "set", "f", inf]);
    }
    d.err(&["HINCRBYFLOAT", "set", "f", "abc"]);
    d.exact(&["EXISTS", "nosuch"]);
    for value in ["abc", " 1.5", "1.5x", "nan", "", "1e5000"] {
        d.exact(&["HSET", "h", "v", value]);
        d.err(&["HINCRBYFLOAT", "h", "v", "1"]);
        d.exact(&["HGET", "h", "v"]);
    }
    d.exact(&["HSET", "h", "v", "inf"]);
    d.err(&["HINCRBYFLOAT", "h", "v", "1"]);
    d.unordered_pairs(&["HGETALL", "h"]);
    d.finish();
}

#[test]
fn hrandfield_semantics() {
    let mut d = Diff::new();
    d.exact(&["HSET", "h", "a", "1", "b", "2", "c", "3", "d", "4", "e", "5"]);
    let all = hgetall(d.strata(), "h");
    // Count errors come first, then the WITHVALUES syntax, then the key.
    for bad in ["abc", "1.5", "", "-9223372036854775808", "9223372036854775808"] {
        d.err(&["HRANDFIELD", "h", bad]);
        d.err(&["HRANDFIELD", "nosuch", bad]);
        d.err(&["HRANDFIELD", "h", bad, "WITHVALUES"]);
    }
    d.err(&["HRANDFIELD", "h", "abc", "nonsense"]);
    d.err(&["HRANDFIELD", "h", "1", "nonsense"]);
    d.err(&["HRANDFIELD", "nosuch", "1", "nonsense"]);
    d.err(&["HRANDFIELD", "h", "1", "WITHVALUES", "x"]);
    for big in ["4611686018427387904", "-4611686018427387904", "9223372036854775807"] {
        d.err(&["HRANDFIELD", "h", big, "WITHVALUES"]);
    }
    d.exact(&["HRANDFIELD", "nosuch"]);
    d.exact(&["HRANDFIELD", "nosuch", "3"]);
    d.exact(&["HRANDFIELD", "nosuch", "-3", "WITHVALUES"]);
    d.exact(&["HRANDFIELD", "h", "0"]);
    d.exact(&["HRANDFIELD", "h", "0", "WITHVALUES"]);
    // Count at least the size: the whole hash.
    d.unordered(&["HRANDFIELD", "h", "5"]);
    d.unordered(&["HRANDFIELD", "h", "9223372036854775807"]);
    d.unordered_pairs(&["HRANDFIELD", "h", "100", "withvalues"]);
    d.unordered_pairs(&["HRANDFIELD", "h", "4611686018427387903", "WITHVALUES"]);
    let one = d.type_only(&["HRANDFIELD", "h"]);
    assert!(all.contains_key(one.as_bytes().unwrap()));
    for count in [1, 2, 4] {
        let got = strs(&d.type_only(&["HRANDFIELD", "h", &count.to_string()]));
        assert_eq!(got.len(), count);
        assert_eq!(got.iter().collect::<BTreeSet<_>>().len(), count, "distinct fields");
        assert!(got.iter().all(|f| all.contains_key(f)));
        let flat = strs(&d.type_only(&["HRANDFIELD", "h", &count.to_string(), "WITHVALUES"]));
        assert_eq!(flat.len(), 2 * count);
        let pairs: BTreeMap<_, _> = flat.chunks_exact(2).map(|p| (p[0].clone(), p[1].clone())).collect();
        assert_eq!(pairs.len(), count);
        assert!(pairs.iter().all(|(f, v)| all.get(f) == Some(v)), "values belong to their fields");
    }
    let got = strs(&d.type_only(&["HRANDFIELD", "h", "-30"]));
    assert_eq!(got.len(), 30);
    assert!(got.iter().all(|f| all.contains_key(f)));
    assert!(got.iter().collect::<BTreeSet<_>>().len() < 30, "negative counts repeat");
    let flat = strs(&d.type_only(&["HRANDFIELD", "h", "-7", "WITHVALUES"]));
    assert_eq!(flat.len(), 14);
    assert!(flat.chunks_exact(2).all(|p| all.get(&p[0]) == Some(&p[1])));
    // Big hashes: both sampling strategies.
    let mut hset = vec!["HSET".to_string(), "big".to_string()];
    hset.extend((0..500).flat_map(|i| [format!("f{i}"), format!("v{i}")]));
    d.exact(&hset);
    for count in ["3", "200", "499"] {
        let got = strs(&d.type_only(&["HRANDFIELD", "big", count]));
        assert_eq!(got.len(), count.parse::<usize>().unwrap());
        assert_eq!(got.iter().collect::<BTreeSet<_>>().len(), got.len());
    }
    d.exact(&["HLEN", "big"]);
    d.finish();
}

/// Full HSCAN of `key` on one connection: (field → value, calls, pairs seen).
fn full_scan(conn: &mut RawConn, key: &str, extra: &[&str]) -> (BTreeMap<Vec<u8>, Vec<u8>>, usize, usize) {
    let mut cursor = "0".to_string();
    let mut all = BTreeMap::new();
    let (mut calls, mut seen) = (0, 0);
    loop {
        let mut args = vec!["HSCAN", key, &cursor];
        args.extend_from_slice(extra);
        let reply = conn.cmd(&args);
        let parts = reply.as_array().unwrap_or_else(|| panic!("HSCAN reply {reply}"));
        cursor = parts[0].as_str().unwrap().to_string();
        let flat = strs(&parts[1]);
        seen += flat.len() / 2;
        all.extend(flat.chunks_exact(2).map(|p| (p[0].clone(), p[1].clone())));
        calls += 1;
        if cursor == "0" {
            return (all, calls, seen);
        }
        assert!(calls < 100_000, "HSCAN does not terminate");
    }
}

#[test]
fn hscan() {
    let mut d = Diff::new();
    // Listpack hashes come back whole in one call, whatever the cursor or COUNT.
    d.exact(&["HSET", "h", "a", "1", "b", "2", "ab", "3", "c", "4"]);
    for args in [
        &["HSCAN", "h", "0"][..],
        &["HSCAN", "h", "0", "COUNT", "1"],
        &["HSCAN", "h", "999"],
        &["HSCAN", "h", "0", "MATCH", "a*"],
        &["HSCAN", "h", "0", "match", "*", "count", "1"],
        &["HSCAN", "h", "0", "MATCH", "zz*"],
        &["HSCAN", "h", "0", "MATCH", "a*", "MATCH", "b"],
    ] {
        d.check(args, same_scan);
    }
    d.exact(&["HSCAN", "nosuch", "0"]);
    for cursor in ["-1", "+3", "007", "", "18446744073709551615"] {
        d.check(&["HSCAN", "h", cursor], same_scan);
    }
    for cursor in ["abc", " 1", "1 ", "18446744073709551616", "1.5"] {
        d.err(&["HSCAN", "h", cursor]);
        d.err(&["HSCAN", "nosuch", cursor]);
    }
    for opts in [
        &["COUNT", "0"][..],
        &["COUNT", "-1"],
        &["COUNT", "abc"],
        &["COUNT"],
        &["MATCH"],
        &["TYPE", "hash"],
        &["NOVALUES"],
        &["MATCH", "*", "COUNT"],
    ] {
        let mut args = vec!["HSCAN", "h", "0"];
        args.extend_from_slice(opts);
        d.err(&args);
        // A missing key answers before the options are read.
        args[1] = "nosuch";
        d.exact(&args);
    }

    // A hashtable hash: a full scan returns every field exactly once.
    let mut hset = vec!["HSET".to_string(), "big".to_string()];
    hset.extend((0..1500).flat_map(|i| [format!("field:{i}"), format!("value:{i}")]));
    d.exact(&hset);
    d.exact(&["OBJECT", "ENCODING", "big"]);
    let expected = hgetall(d.strata(), "big");
    for extra in [&[][..], &["COUNT", "7"], &["COUNT", "300"]] {
        let (got, calls, seen) = full_scan(d.strata(), "big", extra);
        assert_eq!(seen, 1500, "no duplicates");
        assert_eq!(got, expected);
        assert!(calls > 1);
        let (reference, _, _) = full_scan(d.redis(), "big", extra);
        assert_eq!(reference, expected);
    }
    let (got, _, _) = full_scan(d.strata(), "big", &["MATCH", "field:1?"]);
    let (reference, _, _) = full_scan(d.redis(), "big", &["MATCH", "field:1?"]);
    assert_eq!(got, reference);
    assert_eq!(got.len(), 10);
    // A large COUNT returns everything in one call, as in Redis.
    d.check(&["HSCAN", "big", "0", "COUNT", "5000"], same_scan);
    // Redis counts fields and values against COUNT: about 10 fields for 20.
    let page = d.strata().cmd(&["HSCAN", "big", "0", "COUNT", "20"]);
    let n = strs(&page.as_array().unwrap()[1]).len() / 2;
    assert!((1..=10).contains(&n), "{n} fields for COUNT 20");
    // A few long values make a small hash a hashtable, scanned by cursor.
    d.exact(&["HSET", "long", "f", &"x".repeat(65)]);
    d.exact(&["OBJECT", "ENCODING", "long"]);
    d.check(&["HSCAN", "long", "0"], same_scan);
    d.finish();
}

#[test]
fn hscan_returns_fields_present_throughout() {
    let server = Server::strata();
    let mut c = server.conn();
    let mut hset = vec!["HSET".to_string(), "h".to_string()];
    hset.extend((0..1000).flat_map(|i| [format!("keep:{i}"), i.to_string()]));
    c.cmd(&hset);
    let mut cursor = "0".to_string();
    let mut seen = BTreeSet::new();
    let mut round = 0;
    loop {
        let reply = c.cmd(&["HSCAN", "h", &cursor, "COUNT", "30"]);
        let parts = reply.as_array().unwrap();
        cursor = parts[0].as_str().unwrap().to_string();
        seen.extend(strs(&parts[1]).chunks_exact(2).map(|p| p[0].clone()));
        // Churn between calls: add and delete other fields.
        round += 1;
        c.cmd(&["HSET", "h", &format!("tmp:{round}"), "x", &format!("tmp2:{round}"), "y"]);
        c.cmd(&["HDEL", "h", &format!("tmp:{}", round - 1)]);
        if cursor == "0" {
            break;
        }
    }
    for i in 0..1000 {
        assert!(seen.contains(format!("keep:{i}").as_bytes()), "keep:{i} missing from the scan");
    }
}

#[test]
fn listpack_encoding_rules() {
    let mut d = Diff::new();
    let long = "y".repeat(65);
    let edge = "y".repeat(64);
    d.exact(&["HSET", "h", "f", &edge]);
    d.exact(&["OBJECT", "ENCODING", "h"]);
    d.exact(&["HSET", "h", "f", &long]);
    d.exact(&["OBJECT", "ENCODING", "h"]);
    // Conversion is one way.
    d.exact(&["HSET", "h", "f", "short"]);
    d.exact(&["OBJECT", "ENCODING", "h"]);
    // HSETNX of an existing field with a long value changes nothing.
    d.exact(&["HSET", "n", "f", "v"]);
    d.exact(&["HSETNX", "n", "f", &long]);
    d.exact(&["OBJECT", "ENCODING", "n"]);
    d.exact(&["HSETNX", "n", &long, "v"]);
    d.exact(&["OBJECT", "ENCODING", "n"]);
    // HINCRBYFLOAT results can be long too.
    d.exact(&["HINCRBYFLOAT", "f", "x", "1e100"]);
    d.exact(&["OBJECT", "ENCODING", "f"]);
    // More than 512 fields.
    let mut hset = vec!["HSET".to_string(), "many".to_string()];
    hset.extend((0..512).flat_map(|i| [format!("f{i}"), "v".to_string()]));
    d.exact(&hset);
    d.exact(&["OBJECT", "ENCODING", "many"]);
    d.exact(&["HSET", "many", "one-more", "v"]);
    d.exact(&["OBJECT", "ENCODING", "many"]);
    d.exact(&["HDEL", "many", "one-more", "f1"]);
    d.exact(&["OBJECT", "ENCODING", "many"]);
    d.finish();
}

#[test]
fn writes_that_change_nothing_keep_watch() {
    let mut d = Diff::new();
    d.exact(&["HSET", "h", "a", "1"]);
    for noop in [&["HSETNX", "h", "a", "2"][..], &["HDEL", "h", "zz"], &["HINCRBY", "h", "a", "x"]] {
        d.exact(&["WATCH", "h"]);
        d.both(noop);
        d.exact(&["MULTI"]);
        d.exact(&["HLEN", "h"]);
        d.exact(&["EXEC"]);
    }
    // HSET always counts as a change, even with the same value.
    d.exact(&["WATCH", "h"]);
    d.exact(&["HSET", "h", "a", "1"]);
    d.exact(&["MULTI"]);
    d.exact(&["HLEN", "h"]);
    d.exact(&["EXEC"]);
    d.finish();
}

#[test]
fn resp3_shapes() {
    let mut d = Diff::new_resp3();
    d.exact(&["HSET", "h", "a", "1", "b", "2"]);
    assert_eq!(d.unordered(&["HGETALL", "h"]).kind(), "map");
    assert_eq!(d.exact(&["HGETALL", "nosuch"]).kind(), "map");
    assert_eq!(d.exact(&["HGET", "h", "zz"]), Frame::Null);
    assert_eq!(d.exact(&["HMGET", "h", "a", "zz"]).kind(), "array");
    d.unordered(&["HKEYS", "h"]);
    d.unordered(&["HVALS", "h"]);
    d.exact(&["HKEYS", "nosuch"]);
    assert_eq!(d.exact(&["HRANDFIELD", "nosuch"]), Frame::Null);
    assert_eq!(d.exact(&["HRANDFIELD", "nosuch", "2", "WITHVALUES"]).kind(), "array");
    // WITHVALUES in RESP3: an array of [field, value] pairs.
    let pairs = d.unordered(&["HRANDFIELD", "h", "5", "WITHVALUES"]);
    assert!(pairs.as_array().unwrap().iter().all(|p| p.as_array().is_some_and(|p| p.len() == 2)));
    let pairs = d.type_only(&["HRANDFIELD", "h", "-5", "WITHVALUES"]);
    let pairs = pairs.as_array().unwrap();
    assert_eq!(pairs.len(), 5);
    for p in pairs {
        let p = strs(p);
        assert_eq!(p.len(), 2);
        let pair = (p[0].as_slice(), p[1].as_slice());
        assert!(pair == (b"a", b"1") || pair == (b"b", b"2"), "{pair:?} is a field with its value");
    }
    assert_eq!(d.type_only(&["HRANDFIELD", "h", "1", "WITHVALUES"]).as_array().unwrap()[0].kind(), "array");
    d.unordered(&["HRANDFIELD", "h", "5"]);
    d.exact(&["HINCRBYFLOAT", "h", "f", "1.5"]);
    d.exact(&["HINCRBY", "h", "i", "1"]);
    d.check(&["HSCAN", "h", "0"], same_scan);
    d.exact(&["HSCAN", "nosuch", "0"]);
    d.finish();
}
