//! Differential tests (strata vs redis) for the set commands: SADD, SREM,
//! SMEMBERS, SISMEMBER, SMISMEMBER, SCARD, SPOP, SRANDMEMBER, SINTER, SUNION,
//! SDIFF, their STORE forms, SINTERCARD, SMOVE and SSCAN, in RESP2 and RESP3.

mod support;

use std::collections::BTreeSet;

use support::*;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn strs(f: &Frame) -> Vec<Vec<u8>> {
    f.as_array()
        .unwrap_or_else(|| panic!("expected an array, got {f}"))
        .iter()
        .map(|e| e.as_bytes().unwrap().to_vec())
        .collect()
}

fn members(conn: &mut RawConn, key: &str) -> BTreeSet<Vec<u8>> {
    strs(&conn.cmd(&["SMEMBERS", key])).into_iter().collect()
}

#[test]
fn sadd_srem_and_membership() {
    let mut d = Diff::new();
    d.exact(&["SADD", "s", "a", "b", "c", "a"]);
    d.exact(&["SADD", "s", "a", "d"]);
    d.exact(&["SADD", "s", "a"]);
    d.exact(&["SCARD", "s"]);
    d.unordered(&["SMEMBERS", "s"]);
    d.exact(&[b"SADD".as_slice(), b"bin", b"", b"\x00\xff\r\n", b"x y"]);
    d.unordered(&["SMEMBERS", "bin"]);
    d.exact(&[b"SISMEMBER".as_slice(), b"bin", b"\x00\xff\r\n"]);
    d.exact(&["SISMEMBER", "bin", ""]);
    d.exact(&["SISMEMBER", "s", "a"]);
    d.exact(&["SISMEMBER", "s", "zz"]);
    d.exact(&["SISMEMBER", "nosuch", "a"]);
    d.exact(&["SMISMEMBER", "s", "a", "zz", "b", "a"]);
    d.exact(&["SMISMEMBER", "nosuch", "a", "b"]);
    d.exact(&["SREM", "s", "a", "zz", "a"]);
    d.exact(&["SREM", "s", "zz"]);
    d.exact(&["SREM", "nosuch", "a"]);
    d.exact(&["SCARD", "s"]);
    d.exact(&["SCARD", "nosuch"]);
    d.exact(&["SMEMBERS", "nosuch"]);
    // Removing the last member deletes the key.
    d.exact(&["SREM", "s", "b", "c", "d", "e"]);
    d.exact(&["EXISTS", "s"]);
    d.exact(&["SADD", "one", "x"]);
    d.exact(&["SREM", "one", "x"]);
    d.exact(&["EXISTS", "one"]);
    d.exact(&["TYPE", "bin"]);
    d.finish();
}

#[test]
fn errors_wrong_type_and_arity() {
    let mut d = Diff::new();
    d.exact(&["SET", "str", "v"]);
    d.exact(&["HSET", "h", "f", "v"]);
    for cmd in [
        &["SADD", "str", "a"][..],
        &["SREM", "str", "a"],
        &["SMEMBERS", "str"],
        &["SISMEMBER", "h", "a"],
        &["SMISMEMBER", "h", "a"],
        &["SCARD", "h"],
        &["SPOP", "h"],
        &["SPOP", "h", "2"],
        &["SRANDMEMBER", "h"],
        &["SRANDMEMBER", "h", "2"],
        &["SSCAN", "h", "0"],
        &["SINTER", "h"],
        &["SUNION", "h"],
        &["SDIFF", "h"],
    ] {
        assert_eq!(d.err(cmd).error_message(), Some(WRONGTYPE));
    }
    // The failed SADD must not have touched the string.
    d.exact(&["GET", "str"]);
    for cmd in [
        &["SADD", "s"][..],
        &["SADD"],
        &["SREM", "s"],
        &["SMEMBERS"],
        &["SMEMBERS", "a", "b"],
        &["SISMEMBER", "s"],
        &["SISMEMBER", "s", "a", "b"],
        &["SMISMEMBER", "s"],
        &["SCARD"],
        &["SCARD", "a", "b"],
        &["SPOP"],
        &["SRANDMEMBER"],
        &["SINTER"],
        &["SUNION"],
        &["SDIFF"],
        &["SINTERSTORE", "d"],
        &["SUNIONSTORE", "d"],
        &["SDIFFSTORE", "d"],
        &["SINTERCARD", "1"],
        &["SMOVE", "a", "b"],
        &["SMOVE", "a", "b", "c", "d"],
        &["SSCAN", "s"],
    ] {
        d.err(cmd);
    }
    d.finish();
}

#[test]
fn spop_semantics() {
    let mut d = Diff::new();
    let all: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
    let mut sadd = vec!["SADD".to_string(), "s".to_string()];
    sadd.extend(all.iter().cloned());
    d.exact(&sadd);
    // Errors are checked before the key is looked up.
    for bad in ["-1", "abc", "1.5", "9223372036854775808", ""] {
        d.err(&["SPOP", "s", bad]);
        d.err(&["SPOP", "nosuch", bad]);
    }
    d.err(&["SPOP", "s", "1", "2"]);
    d.err(&["SPOP", "nosuch", "1", "2"]);
    d.exact(&["SPOP", "nosuch"]);
    d.exact(&["SPOP", "nosuch", "3"]);
    d.exact(&["SPOP", "s", "0"]);
    d.exact(&["SCARD", "s"]);

    let original: BTreeSet<Vec<u8>> = all.iter().map(|m| m.as_bytes().to_vec()).collect();
    let one = d.type_only(&["SPOP", "s"]);
    let one = one.as_bytes().unwrap().to_vec();
    assert!(original.contains(&one));
    let popped = strs(&d.type_only(&["SPOP", "s", "5"]));
    assert_eq!(popped.len(), 5);
    assert_eq!(popped.iter().collect::<BTreeSet<_>>().len(), 5, "SPOP count pops distinct members");
    assert!(!popped.contains(&one));
    // Large pops (Redis's "rebuild the remainder" strategy).
    let popped2 = strs(&d.type_only(&["SPOP", "s", "10"]));
    assert_eq!(popped2.len(), 10);
    d.exact(&["SCARD", "s"]);
    let rest = members(d.strata(), "s");
    let mut seen: BTreeSet<Vec<u8>> = rest.clone();
    seen.insert(one);
    seen.extend(popped);
    seen.extend(popped2);
    assert_eq!(seen, original, "popped and remaining members partition the set");
    assert_eq!(rest.len(), 4);
    // Popping at least everything returns the whole set and deletes the key.
    let last = d.type_only(&["SPOP", "s", "100"]);
    assert_eq!(strs(&last).into_iter().collect::<BTreeSet<_>>(), rest);
    d.exact(&["EXISTS", "s"]);
    d.exact(&["SADD", "s1", "only"]);
    d.exact(&["SPOP", "s1"]);
    d.exact(&["EXISTS", "s1"]);
    d.exact(&["SADD", "s2", "a", "b"]);
    d.unordered(&["SPOP", "s2", "2"]);
    d.exact(&["EXISTS", "s2"]);
    d.exact(&["SADD", "s3", "a"]);
    d.exact(&["SPOP", "s3", "9223372036854775807"]);
    d.finish();
}

#[test]
fn spop_keeps_intset_rules() {
    let mut d = Diff::new();
    // A hashtable set whose remaining members are all integers becomes an
    // intset again when SPOP leaves at most a fifth of what it takes (Redis
    // rebuilds the set from the members that remain).
    let mut sadd = vec!["SADD".to_string(), "t".to_string()];
    sadd.extend((0..10).map(|i| i.to_string()));
    sadd.push("x".into());
    d.exact(&sadd);
    d.exact(&["SREM", "t", "x"]);
    d.exact(&["OBJECT", "ENCODING", "t"]);
    d.type_only(&["SPOP", "t", "9"]);
    d.exact(&["OBJECT", "ENCODING", "t"]);
    // Smaller pops do not rebuild.
    for count in ["2", "5", "8"] {
        let mut sadd = vec!["SADD".to_string(), "u".to_string()];
        sadd.extend((0..10).map(|i| i.to_string()));
        sadd.push("y".into());
        d.exact(&sadd);
        d.exact(&["SREM", "u", "y"]);
        d.type_only(&["SPOP", "u", count]);
        d.exact(&["OBJECT", "ENCODING", "u"]);
        d.exact(&["DEL", "u"]);
    }
    d.finish();
}

#[test]
fn srandmember_semantics() {
    let mut d = Diff::new();
    d.exact(&["SADD", "s", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]);
    for bad in ["abc", "1.0", "-9223372036854775808", "9223372036854775808", ""] {
        d.err(&["SRANDMEMBER", "s", bad]);
        d.err(&["SRANDMEMBER", "nosuch", bad]);
    }
    d.err(&["SRANDMEMBER", "s", "1", "2"]);
    d.exact(&["SRANDMEMBER", "nosuch"]);
    d.exact(&["SRANDMEMBER", "nosuch", "5"]);
    d.exact(&["SRANDMEMBER", "nosuch", "-5"]);
    d.exact(&["SRANDMEMBER", "s", "0"]);
    // Count at least the size: the whole set.
    d.unordered(&["SRANDMEMBER", "s", "10"]);
    d.unordered(&["SRANDMEMBER", "s", "9223372036854775807"]);
    let all = members(d.strata(), "s");
    let one = d.type_only(&["SRANDMEMBER", "s"]);
    assert!(all.contains(one.as_bytes().unwrap()));
    for count in [1, 3, 5, 9] {
        let got = strs(&d.type_only(&["SRANDMEMBER", "s", &count.to_string()]));
        assert_eq!(got.len(), count);
        let distinct: BTreeSet<_> = got.iter().cloned().collect();
        assert_eq!(distinct.len(), count, "positive counts give distinct members");
        assert!(distinct.is_subset(&all));
    }
    let got = strs(&d.type_only(&["SRANDMEMBER", "s", "-50"]));
    assert_eq!(got.len(), 50, "negative counts give exactly |count| members");
    assert!(got.iter().all(|m| all.contains(m)));
    assert!(got.iter().collect::<BTreeSet<_>>().len() < 50, "and may repeat");
    // Read-only: nothing was removed.
    d.exact(&["SCARD", "s"]);
    // Over a big set both sampling strategies stay distinct.
    let mut sadd = vec!["SADD".to_string(), "big".to_string()];
    sadd.extend((0..1000).map(|i| format!("e{i}")));
    d.exact(&sadd);
    for count in ["10", "400", "999"] {
        let got = strs(&d.type_only(&["SRANDMEMBER", "big", count]));
        assert_eq!(got.len(), count.parse::<usize>().unwrap());
        assert_eq!(got.iter().collect::<BTreeSet<_>>().len(), got.len());
    }
    d.finish();
}

#[test]
fn set_algebra() {
    let mut d = Diff::new();
    d.exact(&["SADD", "a", "1", "2", "3", "4", "x"]);
    d.exact(&["SADD", "b", "3", "4", "5", "x"]);
    d.exact(&["SADD", "c", "4", "x", "9"]);
    d.unordered(&["SINTER", "a", "b"]);
    d.unordered(&["SINTER", "a", "b", "c"]);
    d.unordered(&["SINTER", "a"]);
    d.unordered(&["SINTER", "a", "a"]);
    d.unordered(&["SINTER", "a", "nosuch"]);
    d.unordered(&["SINTER", "nosuch"]);
    d.unordered(&["SUNION", "a", "b", "c"]);
    d.unordered(&["SUNION", "a", "nosuch"]);
    d.unordered(&["SUNION", "nosuch", "nosuch2"]);
    d.unordered(&["SDIFF", "a", "b"]);
    d.unordered(&["SDIFF", "a", "b", "c"]);
    d.unordered(&["SDIFF", "a", "nosuch"]);
    d.unordered(&["SDIFF", "nosuch", "a"]);
    d.unordered(&["SDIFF", "a", "a"]);
    d.unordered(&["SDIFF", "b", "a", "c"]);
    // Type errors win even after a missing key; the key order does not matter.
    d.exact(&["SET", "str", "v"]);
    for cmd in ["SINTER", "SUNION", "SDIFF"] {
        d.err(&[cmd, "nosuch", "str"]);
        d.err(&[cmd, "str", "nosuch"]);
        d.err(&[cmd, "a", "str"]);
    }
    d.finish();
}

#[test]
fn intsets_reply_in_ascending_order() {
    let mut d = Diff::new();
    d.exact(&["SADD", "a", "5", "-3", "100", "0", "7", "-9223372036854775808", "9223372036854775807"]);
    d.exact(&["SADD", "b", "7", "1", "5", "-3", "42"]);
    d.exact(&["SMEMBERS", "a"]);
    d.exact(&["SSCAN", "a", "0"]);
    d.exact(&["SSCAN", "a", "0", "MATCH", "*0*"]);
    d.exact(&["SRANDMEMBER", "a", "100"]);
    d.exact(&["SUNION", "a", "b"]);
    d.exact(&["SINTER", "a", "b"]);
    d.exact(&["SDIFF", "a", "b"]);
    d.exact(&["SDIFF", "b", "a"]);
    d.exact(&["SUNIONSTORE", "u", "b", "a"]);
    d.exact(&["SMEMBERS", "u"]);
    d.exact(&["SPOP", "b", "10"]);
    d.finish();
}

#[test]
fn store_forms_overwrite_or_delete_destination() {
    let mut d = Diff::new();
    d.exact(&["SADD", "a", "1", "2", "3", "4", "x"]);
    d.exact(&["SADD", "b", "3", "4", "5", "x"]);
    d.exact(&["SINTERSTORE", "dst", "a", "b"]);
    d.unordered(&["SMEMBERS", "dst"]);
    d.exact(&["SUNIONSTORE", "dst", "a", "b"]);
    d.unordered(&["SMEMBERS", "dst"]);
    d.exact(&["SDIFFSTORE", "dst", "a", "b"]);
    d.unordered(&["SMEMBERS", "dst"]);
    // The destination may be one of the sources.
    d.exact(&["SUNIONSTORE", "a", "a", "b"]);
    d.unordered(&["SMEMBERS", "a"]);
    d.exact(&["SDIFFSTORE", "a", "a", "b"]);
    d.unordered(&["SMEMBERS", "a"]);
    // Any type is overwritten, and its TTL dropped.
    d.exact(&["SET", "str", "v", "EX", "100"]);
    d.exact(&["SINTERSTORE", "str", "a", "a"]);
    d.exact(&["TYPE", "str"]);
    d.exact(&["TTL", "str"]);
    d.exact(&["HSET", "h", "f", "v"]);
    d.exact(&["SUNIONSTORE", "h", "b"]);
    d.exact(&["TYPE", "h"]);
    // An empty result deletes the destination.
    for cmd in ["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"] {
        d.exact(&["SADD", "dst2", "old"]);
        d.exact(&[cmd, "dst2", "nosuch"]);
        d.exact(&["EXISTS", "dst2"]);
    }
    d.exact(&["SET", "dst3", "v"]);
    d.exact(&["SINTERSTORE", "dst3", "a", "nosuch"]);
    d.exact(&["EXISTS", "dst3"]);
    d.exact(&["SADD", "dst4", "v"]);
    d.exact(&["SDIFFSTORE", "dst4", "a", "a"]);
    d.exact(&["EXISTS", "dst4"]);
    // Wrong-typed sources fail and leave the destination alone.
    d.exact(&["SADD", "keep", "k"]);
    d.exact(&["SET", "str2", "v"]);
    d.err(&["SINTERSTORE", "keep", "nosuch", "str2"]);
    d.err(&["SUNIONSTORE", "keep", "a", "str2"]);
    d.err(&["SDIFFSTORE", "keep", "str2", "a"]);
    d.unordered(&["SMEMBERS", "keep"]);
    // A wrong-typed destination is not an error.
    d.exact(&["SDIFFSTORE", "str2", "b"]);
    d.exact(&["TYPE", "str2"]);
    // Result encodings follow Redis (intset for small integer results).
    d.exact(&["SADD", "ints", "1", "2", "3"]);
    d.exact(&["SUNIONSTORE", "r1", "ints"]);
    d.exact(&["OBJECT", "ENCODING", "r1"]);
    d.exact(&["SUNIONSTORE", "r2", "ints", "b"]);
    d.exact(&["OBJECT", "ENCODING", "r2"]);
    d.exact(&["SINTERSTORE", "r3", "a", "ints"]);
    d.exact(&["OBJECT", "ENCODING", "r3"]);
    d.finish();
}

#[test]
fn sintercard() {
    let mut d = Diff::new();
    d.exact(&["SADD", "a", "1", "2", "3", "4", "x"]);
    d.exact(&["SADD", "b", "3", "4", "5", "x"]);
    d.exact(&["SINTERCARD", "1", "a"]);
    d.exact(&["SINTERCARD", "2", "a", "b"]);
    d.exact(&["SINTERCARD", "2", "a", "nosuch"]);
    d.exact(&["SINTERCARD", "2", "nosuch", "nosuch2"]);
    for limit in ["0", "1", "2", "3", "100"] {
        d.exact(&["SINTERCARD", "2", "a", "b", "LIMIT", limit]);
    }
    d.exact(&["SINTERCARD", "1", "a", "limit", "1", "LIMIT", "0"]);
    for bad in [
        &["SINTERCARD", "0", "a"][..],
        &["SINTERCARD", "-1", "a"],
        &["SINTERCARD", "x", "a"],
        &["SINTERCARD", "99999999999999999999", "a"],
        &["SINTERCARD", "3", "a", "b"],
        &["SINTERCARD", "2", "a"],
        &["SINTERCARD", "1", "a", "LIMIT"],
        &["SINTERCARD", "1", "a", "LIMIT", "-1"],
        &["SINTERCARD", "1", "a", "LIMIT", "abc"],
        &["SINTERCARD", "1", "a", "FOO", "1"],
        &["SINTERCARD", "1", "a", "b"],
        &["SINTERCARD", "1", "nosuch", "b"],
    ] {
        d.err(bad);
    }
    d.exact(&["SET", "str", "v"]);
    d.err(&["SINTERCARD", "2", "nosuch", "str"]);
    d.err(&["SINTERCARD", "2", "str", "a"]);
    d.exact(&["COMMAND", "GETKEYS", "SINTERCARD", "2", "a", "b", "LIMIT", "1"]);
    d.finish();
}

#[test]
fn smove() {
    let mut d = Diff::new();
    d.exact(&["SADD", "src", "a", "b", "c"]);
    d.exact(&["SADD", "dst", "c", "d"]);
    d.exact(&["SMOVE", "src", "dst", "a"]);
    d.unordered(&["SMEMBERS", "src"]);
    d.unordered(&["SMEMBERS", "dst"]);
    d.exact(&["SMOVE", "src", "dst", "a"]);
    // Already in the destination: removed from the source only.
    d.exact(&["SMOVE", "src", "dst", "c"]);
    d.unordered(&["SMEMBERS", "src"]);
    d.unordered(&["SMEMBERS", "dst"]);
    // Same key: membership answer, no change.
    d.exact(&["SMOVE", "dst", "dst", "d"]);
    d.exact(&["SMOVE", "dst", "dst", "zz"]);
    d.exact(&["SMOVE", "nosuch", "dst", "a"]);
    d.exact(&["EXISTS", "nosuch"]);
    // The destination is created, and the source deleted when emptied.
    d.exact(&["SMOVE", "src", "fresh", "b"]);
    d.exact(&["EXISTS", "src"]);
    d.unordered(&["SMEMBERS", "fresh"]);
    d.exact(&["SET", "str", "v"]);
    d.err(&["SMOVE", "str", "dst", "a"]);
    d.err(&["SMOVE", "dst", "str", "c"]);
    d.err(&["SMOVE", "dst", "str", "not-a-member"]);
    d.exact(&["SMOVE", "nosuch", "str", "a"]);
    d.unordered(&["SMEMBERS", "dst"]);
    d.exact(&["SADD", "i", "1"]);
    d.exact(&["SMOVE", "i", "newi", "1"]);
    d.exact(&["OBJECT", "ENCODING", "newi"]);
    d.finish();
}

/// Full SSCAN of `key` on one connection: the union of the members returned.
fn full_scan(conn: &mut RawConn, key: &str, extra: &[&str]) -> (Vec<Vec<u8>>, usize) {
    let mut cursor = "0".to_string();
    let mut all = Vec::new();
    let mut calls = 0;
    loop {
        let mut args = vec!["SSCAN", key, &cursor];
        args.extend_from_slice(extra);
        let reply = conn.cmd(&args);
        let parts = reply.as_array().unwrap_or_else(|| panic!("SSCAN reply {reply}"));
        cursor = parts[0].as_str().unwrap().to_string();
        all.extend(strs(&parts[1]));
        calls += 1;
        if cursor == "0" {
            return (all, calls);
        }
        assert!(calls < 100_000, "SSCAN does not terminate");
    }
}

#[test]
fn sscan() {
    let mut d = Diff::new();
    // Intsets come back whole in one call, whatever the cursor or COUNT.
    d.exact(&["SADD", "ints", "1", "2", "3", "10", "-5"]);
    d.unordered(&["SSCAN", "ints", "0"]);
    d.unordered(&["SSCAN", "ints", "0", "COUNT", "1"]);
    d.unordered(&["SSCAN", "ints", "12345"]);
    d.unordered(&["SSCAN", "ints", "0", "MATCH", "1*"]);
    d.unordered(&["SSCAN", "ints", "0", "match", "*", "count", "2"]);
    d.unordered(&["SSCAN", "ints", "0", "MATCH", "nomatch"]);
    // Small hashtable sets also fit one call with the default COUNT.
    d.exact(&["SADD", "small", "a", "b", "c", "d"]);
    d.unordered(&["SSCAN", "small", "0"]);
    d.unordered(&["SSCAN", "small", "0", "MATCH", "[ab]"]);
    d.exact(&["SSCAN", "nosuch", "0"]);
    // Cursor parsing (strtoul), then the key, then the options.
    for cursor in ["-1", "+3", "007", "", "18446744073709551615"] {
        d.unordered(&["SSCAN", "ints", cursor]);
    }
    for cursor in ["abc", " 1", "1 ", "18446744073709551616", "1.5"] {
        d.err(&["SSCAN", "ints", cursor]);
        d.err(&["SSCAN", "nosuch", cursor]);
    }
    for opts in [
        &["COUNT", "0"][..],
        &["COUNT", "-1"],
        &["COUNT", "abc"],
        &["COUNT"],
        &["MATCH"],
        &["TYPE", "set"],
        &["NOVALUES"],
        &["MATCH", "*", "COUNT"],
    ] {
        let mut args = vec!["SSCAN", "ints", "0"];
        args.extend_from_slice(opts);
        d.err(&args);
        // A missing key answers before the options are read.
        args[1] = "nosuch";
        d.exact(&args);
    }
    d.exact(&["HSET", "h", "f", "v"]);
    d.err(&["SSCAN", "h", "0"]);

    // A big set: a full scan returns every member exactly once.
    let mut sadd = vec!["SADD".to_string(), "big".to_string()];
    sadd.extend((0..2000).map(|i| format!("member:{i}")));
    d.exact(&sadd);
    let expected = members(d.strata(), "big");
    for extra in [&[][..], &["COUNT", "7"], &["COUNT", "500"]] {
        let (got, calls) = full_scan(d.strata(), "big", extra);
        assert_eq!(got.len(), 2000, "no duplicates");
        assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), expected);
        assert!(calls > 1);
        let (reference, _) = full_scan(d.redis(), "big", extra);
        assert_eq!(reference.into_iter().collect::<BTreeSet<_>>(), expected);
    }
    let (got, _) = full_scan(d.strata(), "big", &["MATCH", "member:1*"]);
    let (reference, _) = full_scan(d.redis(), "big", &["MATCH", "member:1*"]);
    assert_eq!(got.iter().collect::<BTreeSet<_>>(), reference.iter().collect::<BTreeSet<_>>());
    // A large COUNT returns everything in one call, as in Redis.
    d.unordered(&["SSCAN", "big", "0", "COUNT", "5000"]);
    // The first page holds about COUNT members.
    let page = d.strata().cmd(&["SSCAN", "big", "0", "COUNT", "20"]);
    let n = strs(&page.as_array().unwrap()[1]).len();
    assert!((1..=20).contains(&n), "{n} members for COUNT 20");
    // An integer set over 512 members is a hashtable too.
    let mut sadd = vec!["SADD".to_string(), "manyints".to_string()];
    sadd.extend((0..600).map(|i| i.to_string()));
    d.exact(&sadd);
    d.exact(&["OBJECT", "ENCODING", "manyints"]);
    let (got, calls) = full_scan(d.strata(), "manyints", &[]);
    assert_eq!(got.len(), 600);
    assert!(calls > 1);
    d.finish();
}

#[test]
fn sscan_returns_members_present_throughout() {
    let server = Server::strata();
    let mut c = server.conn();
    let mut sadd = vec!["SADD".to_string(), "s".to_string()];
    sadd.extend((0..1000).map(|i| format!("keep:{i}")));
    c.cmd(&sadd);
    let mut cursor = "0".to_string();
    let mut seen = BTreeSet::new();
    let mut round = 0;
    loop {
        let reply = c.cmd(&["SSCAN", "s", &cursor, "COUNT", "25"]);
        let parts = reply.as_array().unwrap();
        cursor = parts[0].as_str().unwrap().to_string();
        seen.extend(strs(&parts[1]));
        // Churn between calls: add and remove other members.
        round += 1;
        c.cmd(&["SADD", "s", &format!("tmp:{round}"), &format!("tmp2:{round}")]);
        c.cmd(&["SREM", "s", &format!("tmp:{}", round - 1)]);
        if cursor == "0" {
            break;
        }
    }
    for i in 0..1000 {
        assert!(seen.contains(format!("keep:{i}").as_bytes()), "keep:{i} missing from the scan");
    }
}

#[test]
fn writes_that_change_nothing_keep_watch() {
    let mut d = Diff::new();
    d.exact(&["SADD", "s", "a", "b"]);
    d.exact(&["SADD", "other", "z"]);
    for noop in [
        &["SADD", "s", "a"][..],
        &["SREM", "s", "zz"],
        &["SPOP", "s", "0"],
        &["SMOVE", "s", "s", "a"],
        &["SMOVE", "s", "other", "zz"],
    ] {
        d.exact(&["WATCH", "s"]);
        d.exact(noop);
        d.exact(&["MULTI"]);
        d.exact(&["SCARD", "s"]);
        d.exact(&["EXEC"]);
    }
    // A real change aborts the transaction.
    d.exact(&["WATCH", "s"]);
    d.exact(&["SADD", "s", "new"]);
    d.exact(&["MULTI"]);
    d.exact(&["SCARD", "s"]);
    d.exact(&["EXEC"]);
    d.finish();
}

#[test]
fn resp3_shapes() {
    let mut d = Diff::new_resp3();
    d.exact(&["SADD", "s", "a", "b", "c"]);
    assert_eq!(d.unordered(&["SMEMBERS", "s"]).kind(), "set");
    assert_eq!(d.exact(&["SMEMBERS", "nosuch"]).kind(), "set");
    assert_eq!(d.exact(&["SMISMEMBER", "s", "a", "x"]).kind(), "array");
    d.exact(&["SISMEMBER", "s", "a"]);
    assert_eq!(d.exact(&["SPOP", "nosuch"]), Frame::Null);
    assert_eq!(d.exact(&["SPOP", "nosuch", "2"]).kind(), "set");
    assert_eq!(d.exact(&["SPOP", "s", "0"]).kind(), "set");
    assert_eq!(d.type_only(&["SPOP", "s", "1"]).kind(), "set");
    assert_eq!(d.type_only(&["SPOP", "s", "5"]).kind(), "set");
    d.exact(&["SADD", "s", "a", "b", "c"]);
    assert_eq!(d.exact(&["SRANDMEMBER", "nosuch"]), Frame::Null);
    assert_eq!(d.exact(&["SRANDMEMBER", "nosuch", "3"]).kind(), "array");
    assert_eq!(d.unordered(&["SRANDMEMBER", "s", "10"]).kind(), "array");
    assert_eq!(d.type_only(&["SRANDMEMBER", "s", "-3"]).kind(), "array");
    assert_eq!(d.type_only(&["SRANDMEMBER", "s"]).kind(), "bulk");
    d.exact(&["SADD", "t", "b", "z"]);
    assert_eq!(d.unordered(&["SINTER", "s", "t"]).kind(), "set");
    assert_eq!(d.exact(&["SINTER", "s", "nosuch"]).kind(), "set");
    assert_eq!(d.unordered(&["SUNION", "s", "t"]).kind(), "set");
    assert_eq!(d.unordered(&["SDIFF", "s", "t"]).kind(), "set");
    d.exact(&["SINTERCARD", "2", "s", "t"]);
    d.unordered(&["SSCAN", "s", "0"]);
    d.exact(&["SSCAN", "nosuch", "0"]);
    d.type_only(&["SPOP", "s"]);
    d.finish();
}
