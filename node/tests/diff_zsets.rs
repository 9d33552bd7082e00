//! Differential tests (strata vs redis) for the sorted-set commands: ZADD and
//! its flags, ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCARD, ZRANK, the ZRANGE family
//! (rank, score, lex, REV, LIMIT, ZRANGESTORE), ZCOUNT, ZLEXCOUNT,
//! ZREMRANGEBY*, ZUNION/ZINTER/ZDIFF and their STORE forms, ZINTERCARD, pops
//! (ZPOPMIN/MAX, ZMPOP, BZPOPMIN/MAX, BZMPOP), ZRANDMEMBER and ZSCAN, in
//! RESP2 and RESP3.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use support::*;

fn exact_all(d: &mut Diff, cmds: &[&[&str]]) {
    for c in cmds {
        d.exact(c);
    }
}

fn err_all(d: &mut Diff, cmds: &[&[&str]]) {
    for c in cmds {
        d.err(c);
    }
}

/// A 70-byte member name, to push a set out of the listpack encoding.
fn long_member(i: usize) -> String {
    format!("{i:0>70}")
}

#[test]
fn zadd_flags_and_errors() {
    let mut d = Diff::new();
    exact_all(
        &mut d,
        &[
            &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
            &["ZADD", "z", "1", "a"],
            &["ZADD", "z", "5", "a", "6", "new"],
            &["ZADD", "z", "CH", "5", "a", "7", "b", "8", "x"],
            &["ZADD", "z", "nx", "100", "a", "9", "y"],
            &["ZADD", "z", "xx", "100", "a", "9", "q"],
            &["ZADD", "z", "XX", "CH", "101", "a", "1", "nope"],
            &["ZADD", "z", "GT", "CH", "0", "a", "200", "b", "1", "gtnew"],
            &["ZADD", "z", "LT", "CH", "0", "a", "300", "b", "2", "ltnew"],
            &["ZADD", "z", "gt", "xx", "ch", "500", "a"],
            &["ZADD", "z", "INCR", "10", "a"],
            &["ZADD", "z", "INCR", "1.5", "brandnew"],
            &["ZADD", "z", "NX", "INCR", "1", "a"],
            &["ZADD", "z", "XX", "INCR", "1", "missing"],
            &["ZADD", "z", "GT", "INCR", "-1", "a"],
            &["ZADD", "z", "LT", "INCR", "-1", "a"],
            &["ZADD", "z", "GT", "INCR", "0", "a"],
            &["ZADD", "missing", "XX", "1", "a"],
            &["ZADD", "missing", "XX", "INCR", "1", "a"],
            &["EXISTS", "missing"],
            &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
            &["ZCARD", "z"],
            &["ZCARD", "missing"],
            // Scores: integers, exponents, hex floats, infinities, denormals.
            &["ZADD", "f", "1e3", "e", "-.5", "neg", "0x10", "hex", "+inf", "top", "-INF", "bottom"],
            &["ZADD", "f", "1e-310", "tiny", "3.0000000000000004", "prec", "0.1", "tenth"],
            &["ZRANGE", "f", "0", "-1", "WITHSCORES"],
            &["ZSCORE", "f", "tenth"],
            &["ZSCORE", "f", "top"],
            &["ZSCORE", "f", "nope"],
            &["ZSCORE", "nokey", "a"],
            &["ZMSCORE", "f", "top", "nope", "hex", "top"],
            &["ZMSCORE", "nokey", "a", "b"],
            &["ZADD", "f", "INCR", "inf", "top"],
            &["ZINCRBY", "f", "1", "tenth"],
            &["ZINCRBY", "f", "-1e3", "e"],
            &["ZINCRBY", "f", "5", "fresh"],
            &["ZINCRBY", "newkey", "2.5", "m"],
            &["ZRANGE", "f", "0", "-1", "WITHSCORES"],
            // Binary-safe members.
            &["ZADD", "bin", "1", "", "2", "a\r\nb", "3", "\u{0}"],
            &["ZRANGE", "bin", "0", "-1", "WITHSCORES"],
            &["ZSCORE", "bin", ""],
        ],
    );
    err_all(
        &mut d,
        &[
            &["ZADD", "z", "NX", "XX", "1", "a"],
            &["ZADD", "z", "NX", "GT", "XX", "1", "a"],
            &["ZADD", "z", "GT", "LT", "1", "a"],
            &["ZADD", "z", "NX", "LT", "1", "a"],
            &["ZADD", "z", "INCR", "1", "a", "2", "b"],
            &["ZADD", "z", "INCR", "1", "a", "2"],
            &["ZADD", "z", "1", "a", "2"],
            &["ZADD", "z", "nx"],
            &["ZADD", "z", "x", "a"],
            &["ZADD", "z", "1", "a", "nan", "b"],
            &["ZADD", "z", "1e400", "a"],
            &["ZADD", "z", "1e-400", "a"],
            &["ZADD", "z", " 1", "a"],
            &["ZADD", "z", "1 ", "a"],
            &["ZADD", "z", "", "a"],
            &["ZADD", "z"],
            &["ZADD"],
            &["ZINCRBY", "z", "x", "a"],
            &["ZINCRBY", "z", "nan", "a"],
            &["ZINCRBY", "z", "1"],
            &["ZSCORE", "z"],
            &["ZMSCORE", "z"],
            &["ZCARD"],
            &["ZCARD", "z", "x"],
            // NaN from inf + -inf, through ZADD INCR and ZINCRBY.
            &["ZADD", "f", "INCR", "-inf", "top"],
            &["ZINCRBY", "f", "-inf", "top"],
        ],
    );
    d.exact(&["ZSCORE", "f", "top"]);
    // Wrong types: the score is checked before the type, as in Redis.
    d.exact(&["SET", "str", "x"]);
    err_all(
        &mut d,
        &[
            &["ZADD", "str", "1", "a"],
            &["ZADD", "str", "x", "a"],
            &["ZADD", "str", "NX", "XX", "1", "a"],
            &["ZINCRBY", "str", "1", "a"],
            &["ZREM", "str", "a"],
            &["ZSCORE", "str", "a"],
            &["ZMSCORE", "str", "a"],
            &["ZCARD", "str"],
            &["ZRANK", "str", "a"],
        ],
    );
    d.exact(&["GET", "str"]);
    // ZREM, and the key disappearing with its last member.
    exact_all(
        &mut d,
        &[
            &["ZREM", "z", "a", "nope", "a", "b"],
            &["ZREM", "z", "nope"],
            &["ZREM", "nokey", "a"],
            &["ZCARD", "z"],
            &["ZREM", "bin", "", "a\r\nb", "\u{0}"],
            &["EXISTS", "bin"],
        ],
    );
    d.err(&["ZREM", "z"]);
    d.finish();
}

#[test]
fn negative_zero_follows_encoding() {
    let mut d = Diff::new();
    let long = long_member(1);
    exact_all(
        &mut d,
        &[
            // A listpack stores -0 as 0 ...
            &["ZADD", "small", "-0", "m"],
            &["ZSCORE", "small", "m"],
            &["ZINCRBY", "small", "-0", "m"],
            &["ZADD", "small", "INCR", "-0", "n"],
            &["ZSCORE", "small", "n"],
            // ... a skiplist keeps it.
            &["ZADD", "big", "1", &long],
            &["OBJECT", "ENCODING", "big"],
            &["ZADD", "big", "-0", "m"],
            &["ZSCORE", "big", "m"],
            &["ZADD", "big", "0", "m"],
            &["ZSCORE", "big", "m"],
            &["ZINCRBY", "big", "0", "m"],
            &["ZINCRBY", "big", "-0", "m"],
            &["ZRANGE", "big", "0", "-1", "WITHSCORES"],
            // Results: ZUNION replies keep -0, a small stored result does not.
            &["ZADD", "a", "0", "x", "1", "y"],
            &["ZUNION", "1", "a", "WEIGHTS", "-1", "WITHSCORES"],
            &["ZINTER", "1", "a", "WEIGHTS", "-1", "WITHSCORES"],
            &["ZUNIONSTORE", "d", "1", "a", "WEIGHTS", "-1"],
            &["ZRANGE", "d", "0", "-1", "WITHSCORES"],
            &["OBJECT", "ENCODING", "d"],
            &["ZUNIONSTORE", "d2", "2", "a", "big", "WEIGHTS", "-1", "1"],
            &["ZRANGE", "d2", "0", "-1", "WITHSCORES"],
            &["OBJECT", "ENCODING", "d2"],
            &["ZRANGESTORE", "d3", "big", "0", "-1"],
            &["ZRANGE", "d3", "0", "-1", "WITHSCORES"],
        ],
    );
    d.finish();
}

#[test]
fn encoding_is_sticky_like_redis() {
    let mut d = Diff::new();
    for i in 0..128 {
        d.exact(&["ZADD", "z", &i.to_string(), &format!("m{i}")]);
    }
    d.exact(&["OBJECT", "ENCODING", "z"]);
    d.exact(&["ZADD", "z", "500", "one-more"]);
    d.exact(&["OBJECT", "ENCODING", "z"]);
    d.exact(&["ZREMRANGEBYRANK", "z", "0", "100"]);
    d.exact(&["OBJECT", "ENCODING", "z"]);
    d.exact(&["ZADD", "w", "1", &"x".repeat(64)]);
    d.exact(&["OBJECT", "ENCODING", "w"]);
    d.exact(&["ZADD", "w", "1", &"x".repeat(65)]);
    d.exact(&["OBJECT", "ENCODING", "w"]);
    d.exact(&["ZADD", "w2", "1", &"x".repeat(65)]);
    d.exact(&["OBJECT", "ENCODING", "w2"]);
    d.finish();
}

#[test]
fn ranks_and_rank_ranges() {
    let mut d = Diff::new();
    exact_all(
        &mut d,
        &[
            // Equal scores order by member bytes.
            &["ZADD", "z", "1", "b", "1", "a", "1", "c", "0", "zz", "2", "A", "-inf", "low", "+inf", "high"],
            &["ZRANGE", "z", "0", "-1"],
            &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
            &["ZRANGE", "z", "0", "-1", "withscores", "WITHSCORES"],
            &["ZRANGE", "z", "-3", "-1"],
            &["ZRANGE", "z", "-100", "100"],
            &["ZRANGE", "z", "2", "1"],
            &["ZRANGE", "z", "7", "10"],
            &["ZRANGE", "z", "-1", "-1"],
            &["ZRANGE", "z", "-9223372036854775808", "9223372036854775807"],
            &["ZRANGE", "z", "0", "2", "REV"],
            &["ZRANGE", "z", "0", "2", "rev", "WITHSCORES"],
            &["ZRANGE", "z", "0", "-1", "LIMIT", "0", "-1"],
            &["ZREVRANGE", "z", "0", "-1"],
            &["ZREVRANGE", "z", "1", "2", "WITHSCORES"],
            &["ZREVRANGE", "z", "-2", "-1"],
            &["ZRANGE", "nokey", "0", "-1"],
            &["ZRANK", "z", "low"],
            &["ZRANK", "z", "c"],
            &["ZRANK", "z", "high"],
            &["ZRANK", "z", "nope"],
            &["ZRANK", "nokey", "a"],
            &["ZREVRANK", "z", "low"],
            &["ZREVRANK", "z", "high"],
            &["ZREVRANK", "z", "nope"],
        ],
    );
    err_all(
        &mut d,
        &[
            &["ZRANGE", "z", "a", "1"],
            &["ZRANGE", "z", "0", "1.5"],
            &["ZRANGE", "nokey", "x", "1"],
            &["ZRANGE", "z", "0", "-1", "LIMIT", "0", "1"],
            &["ZRANGE", "z", "0", "-1", "LIMIT", "0"],
            &["ZRANGE", "z", "0", "-1", "LIMIT", "x", "1"],
            &["ZRANGE", "z", "0", "-1", "REV", "REV"],
            &["ZRANGE", "z", "0", "-1", "BYSCORE", "BYLEX"],
            &["ZRANGE", "z", "0", "-1", "foo"],
            &["ZRANGE", "z", "0"],
            &["ZREVRANGE", "z", "0", "1", "LIMIT", "0", "1"],
            &["ZREVRANGE", "z", "0", "1", "REV"],
            &["ZREVRANGE", "z", "0", "1", "BYSCORE"],
            &["ZRANK", "z", "a", "WITHSCORE"],
            &["ZREVRANK", "z"],
        ],
    );
    d.exact(&["SET", "str", "x"]);
    d.err(&["ZRANGE", "str", "0", "-1"]);
    d.err(&["ZREVRANK", "str", "a"]);
    d.finish();
}

#[test]
fn score_ranges_and_limits() {
    let mut d = Diff::new();
    d.exact(&["ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e", "5", "ee", "-inf", "lo", "inf", "hi"]);
    let ranges: &[(&str, &str)] = &[
        ("-inf", "+inf"),
        ("2", "4"),
        ("(2", "4"),
        ("2", "(4"),
        ("(2", "(4"),
        ("(2", "(2"),
        ("2", "2"),
        ("5", "5"),
        ("4", "2"),
        ("(-inf", "(inf"),
        ("-inf", "-inf"),
        ("inf", "+inf"),
        ("", ""),
        ("(", "10"),
        ("( 1", "3"),
        ("1e400", "inf"),
        ("-1e400", "0x2"),
        ("1\u{0}junk", "3"),
        ("6", "100"),
    ];
    for (min, max) in ranges {
        d.exact(&["ZRANGEBYSCORE", "z", min, max]);
        d.exact(&["ZRANGEBYSCORE", "z", min, max, "WITHSCORES"]);
        d.exact(&["ZREVRANGEBYSCORE", "z", max, min]);
        d.exact(&["ZRANGE", "z", min, max, "BYSCORE"]);
        d.exact(&["ZRANGE", "z", max, min, "BYSCORE", "REV", "WITHSCORES"]);
        d.exact(&["ZCOUNT", "z", min, max]);
    }
    let limits: &[(&str, &str)] =
        &[("0", "2"), ("1", "1"), ("2", "-1"), ("1", "-5"), ("-1", "2"), ("0", "0"), ("7", "10"), ("100", "1")];
    for (off, count) in limits {
        d.exact(&["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", off, count]);
        d.exact(&["ZRANGEBYSCORE", "z", "(1", "5", "WITHSCORES", "LIMIT", off, count]);
        d.exact(&["ZREVRANGEBYSCORE", "z", "5", "(1", "LIMIT", off, count, "WITHSCORES"]);
        d.exact(&["ZRANGE", "z", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", off, count]);
    }
    exact_all(
        &mut d,
        &[
            &["ZRANGEBYSCORE", "z", "1", "5", "LIMIT", "9223372036854775807", "1"],
            &["ZRANGE", "z", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "2", "9223372036854775807"],
            &["ZRANGEBYSCORE", "nokey", "-inf", "+inf"],
            &["ZCOUNT", "nokey", "-inf", "+inf"],
        ],
    );
    err_all(
        &mut d,
        &[
            &["ZRANGEBYSCORE", "z", "a", "1"],
            &["ZRANGEBYSCORE", "z", "1", "b"],
            &["ZRANGEBYSCORE", "z", "(1", "1 "],
            &["ZRANGEBYSCORE", "z", "nan", "1"],
            &["ZRANGEBYSCORE", "z", "((1", "2"],
            &["ZRANGEBYSCORE", "nokey", "x", "1"],
            &["ZRANGEBYSCORE", "z", "1", "2", "REV"],
            &["ZRANGEBYSCORE", "z", "1", "2", "BYSCORE"],
            &["ZRANGEBYSCORE", "z", "1", "2", "LIMIT", "0"],
            &["ZRANGEBYSCORE", "z", "1", "2", "LIMIT", "a", "1"],
            &["ZRANGEBYSCORE", "z", "1", "2", "LIMIT", "0", "1.5"],
            &["ZREVRANGEBYSCORE", "z", "1", "x"],
            &["ZRANGE", "z", "x", "1", "BYSCORE"],
            &["ZCOUNT", "z", "x", "1"],
            &["ZCOUNT", "nokey", "1", "x"],
            &["ZCOUNT", "z", "1"],
        ],
    );
    d.exact(&["SET", "str", "x"]);
    d.err(&["ZRANGEBYSCORE", "str", "0", "1"]);
    d.err(&["ZCOUNT", "str", "0", "1"]);
    d.finish();
}

#[test]
fn lex_ranges() {
    let mut d = Diff::new();
    d.exact(&["ZADD", "z", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e", "0", "", "0", "bb", "0", "b\u{0}"]);
    let ranges: &[(&str, &str)] = &[
        ("-", "+"),
        ("[b", "[d"),
        ("(b", "[d"),
        ("[b", "(d"),
        ("(b", "(b"),
        ("[b", "[b"),
        ("[d", "[b"),
        ("+", "-"),
        ("-", "-"),
        ("+", "+"),
        ("[", "+"),
        ("(", "+"),
        ("-", "["),
        ("-", "(c"),
        ("[bb", "+"),
        ("(z", "+"),
        ("-", "(a"),
        ("+\u{0}x", "+"),
    ];
    for (min, max) in ranges {
        d.exact(&["ZRANGEBYLEX", "z", min, max]);
        d.exact(&["ZREVRANGEBYLEX", "z", max, min]);
        d.exact(&["ZRANGE", "z", min, max, "BYLEX"]);
        d.exact(&["ZRANGE", "z", max, min, "BYLEX", "REV"]);
        d.exact(&["ZLEXCOUNT", "z", min, max]);
        d.exact(&["ZRANGEBYLEX", "z", min, max, "LIMIT", "1", "2"]);
        d.exact(&["ZREVRANGEBYLEX", "z", max, min, "LIMIT", "1", "-1"]);
    }
    // Mixed scores: lex ranges are only meaningful for equal scores, but a
    // small set must still answer like Redis's listpack scan.
    exact_all(
        &mut d,
        &[
            &["ZADD", "m", "0", "x", "0", "y", "0", "zz", "1", "a"],
            &["ZRANGEBYLEX", "m", "(x", "+"],
            &["ZRANGEBYLEX", "m", "-", "+"],
            &["ZRANGEBYLEX", "m", "[y", "+"],
            &["ZREVRANGEBYLEX", "m", "+", "[y"],
            &["ZLEXCOUNT", "m", "[y", "+"],
            &["ZLEXCOUNT", "m", "(x", "+"],
            &["ZREMRANGEBYLEX", "m", "(x", "+"],
            &["ZREMRANGEBYLEX", "m", "[y", "+"],
            &["ZRANGE", "m", "0", "-1", "WITHSCORES"],
            &["ZRANGEBYLEX", "nokey", "-", "+"],
            &["ZLEXCOUNT", "nokey", "-", "+"],
        ],
    );
    err_all(
        &mut d,
        &[
            &["ZRANGEBYLEX", "z", "a", "b"],
            &["ZRANGEBYLEX", "z", "[a", "b"],
            &["ZRANGEBYLEX", "z", "", "+"],
            &["ZRANGEBYLEX", "z", "+a", "+"],
            &["ZRANGEBYLEX", "z", "-", "+", "WITHSCORES"],
            &["ZRANGEBYLEX", "z", "-", "+", "LIMIT", "1"],
            &["ZRANGEBYLEX", "nokey", "a", "b"],
            &["ZRANGE", "z", "-", "+", "BYLEX", "WITHSCORES"],
            &["ZRANGE", "nokey", "-", "+", "BYLEX", "WITHSCORES"],
            &["ZRANGE", "z", "0", "-1", "BYLEX"],
            &["ZREVRANGEBYLEX", "z", "+", "x"],
            &["ZLEXCOUNT", "z", "a", "b"],
            &["ZLEXCOUNT", "z", "+x", "+"],
        ],
    );
    d.exact(&["SET", "str", "x"]);
    d.err(&["ZLEXCOUNT", "str", "-", "+"]);
    d.err(&["ZRANGEBYLEX", "str", "-", "+"]);
    d.finish();
}

#[test]
fn zrangestore() {
    let mut d = Diff::new();
    exact_all(
        &mut d,
        &[
            &["ZADD", "src", "1", "a", "2", "b", "3", "c", "4", "d"],
            &["ZRANGESTORE", "dst", "src", "0", "-1"],
            &["ZRANGE", "dst", "0", "-1", "WITHSCORES"],
            &["ZRANGESTORE", "dst", "src", "0", "1", "REV"],
            &["ZRANGE", "dst", "0", "-1", "WITHSCORES"],
            &["ZRANGESTORE", "dst", "src", "(1", "3", "BYSCORE"],
            &["ZRANGE", "dst", "0", "-1", "WITHSCORES"],
            &["ZRANGESTORE", "dst", "src", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "1", "2"],
            &["ZRANGE", "dst", "0", "-1", "WITHSCORES"],
            &["ZRANGESTORE", "dst", "src", "[b", "+", "BYLEX"],
            &["ZRANGE", "dst", "0", "-1", "WITHSCORES"],
            // An empty result deletes the destination, whatever its type.
            &["ZRANGESTORE", "dst", "src", "10", "20"],
            &["EXISTS", "dst"],
            &["SET", "dst", "string"],
            &["EXPIRE", "dst", "100"],
            &["ZRANGESTORE", "dst", "src", "0", "0"],
            &["TYPE", "dst"],
            &["TTL", "dst"],
            &["SET", "dst", "string"],
            &["ZRANGESTORE", "dst", "nokey", "0", "-1"],
            &["EXISTS", "dst"],
            &["ZRANGESTORE", "src", "src", "1", "2"],
            &["ZRANGE", "src", "0", "-1", "WITHSCORES"],
        ],
    );
    d.exact(&["SET", "str", "x"]);
    err_all(
        &mut d,
        &[
            &["ZRANGESTORE", "dst", "src", "0", "-1", "WITHSCORES"],
            &["ZRANGESTORE", "dst", "src", "0", "-1", "LIMIT", "0", "1"],
            &["ZRANGESTORE", "dst", "src", "a", "b", "BYSCORE"],
            &["ZRANGESTORE", "dst", "src", "0"],
            &["ZRANGESTORE", "dst", "str", "0", "-1"],
        ],
    );
    d.finish();
}

#[test]
fn zremrange_family() {
    let mut d = Diff::new();
    let fill = ["ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"];
    let cases: &[&[&str]] = &[
        &["ZREMRANGEBYRANK", "z", "0", "0"],
        &["ZREMRANGEBYRANK", "z", "-2", "-1"],
        &["ZREMRANGEBYRANK", "z", "1", "-2"],
        &["ZREMRANGEBYRANK", "z", "3", "1"],
        &["ZREMRANGEBYRANK", "z", "5", "10"],
        &["ZREMRANGEBYRANK", "z", "-100", "100"],
        &["ZREMRANGEBYSCORE", "z", "2", "4"],
        &["ZREMRANGEBYSCORE", "z", "(2", "(4"],
        &["ZREMRANGEBYSCORE", "z", "-inf", "+inf"],
        &["ZREMRANGEBYSCORE", "z", "(5", "+inf"],
        &["ZREMRANGEBYSCORE", "z", "4", "2"],
        &["ZREMRANGEBYLEX", "z", "[b", "[d"],
        &["ZREMRANGEBYLEX", "z", "(a", "+"],
        &["ZREMRANGEBYLEX", "z", "-", "+"],
        &["ZREMRANGEBYLEX", "z", "+", "-"],
    ];
    for case in cases {
        d.exact(&["DEL", "z"]);
        d.exact(&fill);
        d.exact(case);
        d.exact(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]);
        d.exact(&["EXISTS", "z"]);
    }
    exact_all(
        &mut d,
        &[
            &["ZREMRANGEBYRANK", "nokey", "0", "-1"],
            &["ZREMRANGEBYSCORE", "nokey", "-inf", "+inf"],
            &["ZREMRANGEBYLEX", "nokey", "-", "+"],
        ],
    );
    err_all(
        &mut d,
        &[
            &["ZREMRANGEBYRANK", "z", "x", "1"],
            &["ZREMRANGEBYRANK", "nokey", "0", "x"],
            &["ZREMRANGEBYSCORE", "z", "x", "1"],
            &["ZREMRANGEBYLEX", "z", "x", "+"],
            &["ZREMRANGEBYRANK", "z", "0"],
        ],
    );
    d.exact(&["SET", "str", "x"]);
    d.err(&["ZREMRANGEBYRANK", "str", "0", "1"]);
    d.err(&["ZREMRANGEBYSCORE", "str", "0", "1"]);
    d.err(&["ZREMRANGEBYLEX", "str", "-", "+"]);
    d.finish();
}

#[test]
fn union_inter_diff() {
    let mut d = Diff::new();
    exact_all(
        &mut d,
        &[
            &["ZADD", "z1", "1", "a", "2", "b", "3", "c"],
            &["ZADD", "z2", "10", "b", "20", "c", "30", "d"],
            &["ZADD", "z3", "100", "c", "200", "d", "300", "e", "400", "f"],
            &["SADD", "s", "a", "d", "x"],
        ],
    );
    let inputs: &[&[&str]] = &[
        &["1", "z1"],
        &["2", "z1", "z2"],
        &["3", "z1", "z2", "z3"],
        &["3", "z3", "z2", "z1"],
        &["2", "z1", "s"],
        &["3", "z1", "z2", "s"],
        &["2", "z1", "nokey"],
        &["2", "nokey", "z1"],
        &["1", "s"],
        &["2", "z1", "z1"],
    ];
    let options: &[&[&str]] = &[
        &[],
        &["WITHSCORES"],
        &["WEIGHTS"],
        &["AGGREGATE", "MIN", "WITHSCORES"],
        &["aggregate", "max", "withscores"],
        &["AGGREGATE", "SUM", "AGGREGATE", "MAX", "WITHSCORES"],
    ];
    for input in inputs {
        let n: usize = input[0].parse().unwrap();
        for opt in options {
            let mut opt: Vec<&str> = opt.to_vec();
            if opt == ["WEIGHTS"] {
                opt.extend(["2", "0.5", "-1"].iter().take(n));
                opt.push("WITHSCORES");
            }
            for cmd in ["ZUNION", "ZINTER"] {
                let mut args = vec![cmd];
                args.extend_from_slice(input);
                args.extend_from_slice(&opt);
                d.exact(&args);
                let store_cmd = if cmd == "ZUNION" { "ZUNIONSTORE" } else { "ZINTERSTORE" };
                let mut store = vec![store_cmd, "dst"];
                store.extend_from_slice(input);
                store.extend(opt.iter().filter(|o| !o.eq_ignore_ascii_case("withscores")));
                d.exact(&store);
                d.exact(&["ZRANGE", "dst", "0", "-1", "WITHSCORES"]);
            }
            if opt.is_empty() || opt == ["WITHSCORES"] {
                let mut args = vec!["ZDIFF"];
                args.extend_from_slice(input);
                args.extend_from_slice(&opt);
                d.exact(&args);
                let mut store = vec!["ZDIFFSTORE", "dst"];
                store.extend_from_slice(input);
                d.exact(&store);
                d.exact(&["ZRANGE", "dst", "0", "-1", "WITHSCORES"]);
                let mut card = vec!["ZINTERCARD"];
                card.extend_from_slice(input);
                d.exact(&card);
                card.extend(["LIMIT", "1"]);
                d.exact(&card);
            }
        }
    }
    exact_all(
        &mut d,
        &[
            // Infinite weights: 0 * inf and inf - inf become 0.
            &["ZUNION", "2", "z1", "z2", "WEIGHTS", "inf", "-inf", "WITHSCORES"],
            &["ZUNION", "2", "z1", "z2", "WEIGHTS", "inf", "0", "WITHSCORES"],
            &["ZINTER", "2", "z1", "z2", "WEIGHTS", "0", "inf", "WITHSCORES"],
            &["ZUNION", "2", "z1", "z2", "WEIGHTS", "1", "2", "WEIGHTS", "3", "4", "WITHSCORES"],
            // A store replaces the destination (and its TTL); an empty result deletes it.
            &["SET", "dst", "x"],
            &["EXPIRE", "dst", "100"],
            &["ZUNIONSTORE", "dst", "1", "z1"],
            &["TTL", "dst"],
            &["ZINTERSTORE", "dst", "2", "z1", "nokey"],
            &["EXISTS", "dst"],
            &["ZUNIONSTORE", "z1", "2", "z1", "z2"],
            &["ZRANGE", "z1", "0", "-1", "WITHSCORES"],
            &["ZDIFFSTORE", "dst", "2", "nokey", "z1"],
            &["EXISTS", "dst"],
            &["ZINTERCARD", "2", "z1", "z2", "LIMIT", "0"],
            &["ZINTERCARD", "1", "nokey"],
            // numkeys covering the option words makes them keys.
            &["ZUNION", "2", "z2", "WITHSCORES"],
        ],
    );
    d.exact(&["SET", "str", "x"]);
    err_all(
        &mut d,
        &[
            &["ZUNION", "0", "z1"],
            &["ZUNION", "-1", "z1"],
            &["ZUNION", "x", "z1"],
            &["ZUNION", "3", "z1", "z2"],
            &["ZUNION", "2", "z1", "str"],
            &["ZUNION", "2", "z1", "str", "WEIGHTS", "1"],
            &["ZUNION", "2", "z1", "nokey", "WEIGHTS", "1"],
            &["ZUNION", "2", "z1", "z2", "WEIGHTS", "1", "x"],
            &["ZUNION", "2", "z1", "z2", "AGGREGATE", "avg"],
            &["ZUNION", "2", "z1", "z2", "AGGREGATE"],
            &["ZUNION", "1", "z1", "LIMIT", "1"],
            &["ZUNION", "1", "z1", "foo"],
            &["ZINTER", "0", "z1"],
            &["ZINTER", "1", "str"],
            &["ZINTER", "2", "z1", "z2", "LIMIT", "1"],
            &["ZDIFF", "0", "z1"],
            &["ZDIFF", "2", "z1", "z2", "WEIGHTS", "1", "2"],
            &["ZDIFF", "2", "z1", "z2", "AGGREGATE", "SUM"],
            &["ZDIFF", "1", "str"],
            &["ZUNIONSTORE", "dst", "0", "z1"],
            &["ZUNIONSTORE", "dst", "1", "z1", "WITHSCORES"],
            &["ZUNIONSTORE", "dst", "1", "str"],
            &["ZINTERSTORE", "dst", "-1", "z1"],
            &["ZINTERSTORE", "dst", "2", "z1"],
            &["ZDIFFSTORE", "dst", "0", "z1"],
            &["ZDIFFSTORE", "dst", "2", "z1", "z2", "WITHSCORES"],
            &["ZINTERCARD", "0", "z1"],
            &["ZINTERCARD", "1", "str"],
            &["ZINTERCARD", "2", "z1", "z2", "LIMIT", "-1"],
            &["ZINTERCARD", "2", "z1", "z2", "LIMIT", "x"],
            &["ZINTERCARD", "2", "z1", "z2", "LIMIT"],
            &["ZINTERCARD", "2", "z1", "z2", "WITHSCORES"],
            &["ZINTERCARD", "2", "z1", "z2", "WEIGHTS", "1", "2"],
            &["ZUNION", "1"],
            &["ZUNIONSTORE", "dst", "1"],
        ],
    );
    d.exact(&["GET", "str"]);
    d.finish();
}

#[test]
fn pops() {
    let mut d = Diff::new();
    exact_all(
        &mut d,
        &[
            &["ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"],
            &["ZPOPMIN", "z"],
            &["ZPOPMAX", "z"],
            &["ZPOPMIN", "z", "2"],
            &["ZPOPMIN", "z", "0"],
            &["ZPOPMAX", "z", "10"],
            &["EXISTS", "z"],
            &["ZPOPMIN", "nokey"],
            &["ZPOPMIN", "nokey", "3"],
            &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
            &["ZMPOP", "1", "z", "MIN"],
            &["ZMPOP", "2", "nokey", "z", "max", "COUNT", "10"],
            &["ZMPOP", "1", "z", "MIN"],
            &["ZMPOP", "2", "nokey", "z", "MIN", "COUNT", "2"],
            &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
            &["ZADD", "y", "7", "q"],
            &["ZMPOP", "2", "y", "z", "MIN", "COUNT", "2"],
            &["ZMPOP", "2", "y", "z", "MIN", "COUNT", "2"],
            &["BZPOPMIN", "nokey", "z", "0"],
            &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
            &["BZPOPMAX", "z", "0"],
            &["BZMPOP", "0", "2", "nokey", "z", "MAX", "COUNT", "2"],
            &["BZMPOP", "0.01", "1", "z", "MIN"],
            // Timeouts with no data.
            &["BZPOPMIN", "nokey", "0.01"],
            &["BZPOPMAX", "nokey", "nokey2", "0.02"],
            &["BZMPOP", "0.01", "1", "nokey", "MIN"],
            // Inside MULTI nothing blocks: the reply is the timeout's.
            &["MULTI"],
            &["BZPOPMIN", "nokey", "0"],
            &["BZMPOP", "0", "1", "nokey", "MAX"],
            &["ZADD", "m", "1", "x"],
            &["BZPOPMAX", "m", "0"],
            &["EXEC"],
        ],
    );
    d.exact(&["SET", "str", "x"]);
    d.exact(&["ZADD", "z", "1", "a"]);
    err_all(
        &mut d,
        &[
            &["ZPOPMIN", "z", "-1"],
            &["ZPOPMIN", "z", "x"],
            &["ZPOPMIN", "z", "1", "2"],
            &["ZPOPMAX", "z", "1", "2", "3"],
            &["ZPOPMIN", "str"],
            &["ZPOPMIN", "str", "0"],
            &["ZPOPMIN"],
            &["ZMPOP", "0", "z", "MIN"],
            &["ZMPOP", "x", "z", "MIN"],
            &["ZMPOP", "-1", "z", "MIN"],
            &["ZMPOP", "5", "z", "MIN"],
            &["ZMPOP", "1", "z", "foo"],
            &["ZMPOP", "1", "z", "MIN", "COUNT"],
            &["ZMPOP", "1", "z", "MIN", "COUNT", "0"],
            &["ZMPOP", "1", "z", "MIN", "COUNT", "x"],
            &["ZMPOP", "1", "z", "MIN", "COUNT", "1", "COUNT", "1"],
            &["ZMPOP", "1", "z", "MIN", "foo", "1"],
            &["ZMPOP", "2", "str", "z", "MIN"],
            &["ZMPOP", "1", "z"],
            &["BZPOPMIN", "z", "x"],
            &["BZPOPMIN", "z", "-1"],
            &["BZPOPMIN", "str", "0"],
            &["BZPOPMAX", "nokey", "str", "0"],
            &["BZPOPMIN", "z"],
            &["BZMPOP", "x", "1", "z", "MIN"],
            &["BZMPOP", "-1", "1", "z", "MIN"],
            &["BZMPOP", "0", "0", "z", "MIN"],
            &["BZMPOP", "0", "1", "z", "foo"],
            // Syntax is checked before the timeout.
            &["BZMPOP", "x", "1", "z", "foo"],
            &["BZMPOP", "0", "1", "str", "MIN"],
            &["BZMPOP", "0", "1", "z"],
        ],
    );
    d.exact(&["ZCARD", "z"]);
    d.finish();
}

/// BZPOPMIN/BZMPOP block until another client adds members.
#[test]
fn blocking_pops_wake_up() {
    let mut d = Diff::new();
    let mut waiters: Vec<(RawConn, RawConn)> = Vec::new();
    let servers: Vec<(RawConn, RawConn)> = {
        let s = d.strata_server().expect("own strata");
        let (sa, sb) = (s.conn(), s.conn());
        let r = d.redis_server().expect("own redis");
        vec![(sa, sb), (r.conn(), r.conn())]
    };
    for (mut waiter, mut writer) in servers {
        waiter.send(&["BZPOPMIN", "k1", "k2", "5"]);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(writer.cmd(&["ZADD", "k2", "2", "b", "1", "a"]), Frame::int(2));
        assert_eq!(waiter.read_frame(), Frame::bulks(&["k2", "a", "1"]));
        waiter.send(&["BZMPOP", "5", "2", "k1", "k3", "MAX", "COUNT", "5"]);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(writer.cmd(&["ZADD", "k1", "3", "c"]), Frame::int(1));
        let reply = waiter.read_frame();
        assert_eq!(reply, Frame::Array(vec![Frame::bulk("k1"), Frame::Array(vec![Frame::bulks(&["c", "3"])])]));
        // A timeout answers with a null array.
        waiter.send(&["BZPOPMAX", "k1", "0.1"]);
        assert_eq!(waiter.read_frame(), Frame::NilArray);
        waiters.push((waiter, writer));
    }
    d.exact(&["ZRANGE", "k2", "0", "-1", "WITHSCORES"]);
    d.finish();
}

#[test]
fn randmember() {
    let mut d = Diff::new();
    d.exact(&["ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"]);
    // Deterministic cases: empty, missing, and a count covering the set.
    exact_all(
        &mut d,
        &[
            &["ZRANDMEMBER", "nokey"],
            &["ZRANDMEMBER", "nokey", "5"],
            &["ZRANDMEMBER", "nokey", "-5", "WITHSCORES"],
            &["ZRANDMEMBER", "z", "0"],
            &["ZRANDMEMBER", "z", "0", "WITHSCORES"],
            &["ZRANDMEMBER", "z", "5"],
            &["ZRANDMEMBER", "z", "100", "WITHSCORES"],
        ],
    );
    err_all(
        &mut d,
        &[
            &["ZRANDMEMBER", "z", "x"],
            &["ZRANDMEMBER", "z", "1", "foo"],
            &["ZRANDMEMBER", "z", "1", "WITHSCORES", "foo"],
            &["ZRANDMEMBER", "z", "-9223372036854775808"],
            &["ZRANDMEMBER", "z", "9223372036854775807", "WITHSCORES"],
            &["ZRANDMEMBER", "z", "-4611686018427387904", "WITHSCORES"],
            &["ZRANDMEMBER", "nokey", "4611686018427387904", "WITHSCORES"],
        ],
    );
    d.exact(&["SET", "str", "x"]);
    d.err(&["ZRANDMEMBER", "str"]);
    d.err(&["ZRANDMEMBER", "str", "1"]);

    let scores: BTreeMap<&str, &str> = [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4"), ("e", "5")].into();
    for args in [
        &["ZRANDMEMBER", "z"][..],
        &["ZRANDMEMBER", "z", "1"],
        &["ZRANDMEMBER", "z", "3"],
        &["ZRANDMEMBER", "z", "-8"],
        &["ZRANDMEMBER", "z", "-8", "WITHSCORES"],
        &["ZRANDMEMBER", "z", "4", "WITHSCORES"],
    ] {
        let reply = d.type_only(args);
        let items: Vec<Frame> = match &reply {
            Frame::Array(v) => v.clone(),
            f => vec![f.clone()],
        };
        let withscores = args.len() == 4;
        let names: Vec<&str> = if withscores {
            items
                .chunks(2)
                .map(|p| {
                    let (m, s) = (p[0].as_str().unwrap(), p[1].as_str().unwrap());
                    assert_eq!(scores[m], s, "score of {m} in {reply}");
                    m
                })
                .collect()
        } else {
            items.iter().map(|f| f.as_str().unwrap()).collect()
        };
        assert!(names.iter().all(|m| scores.contains_key(m)), "{reply}");
        let count: i64 = args.get(2).map_or(1, |c| c.parse().unwrap());
        assert_eq!(names.len() as i64, count.abs(), "{reply}");
        if count > 0 {
            let mut uniq = names.clone();
            uniq.sort();
            uniq.dedup();
            assert_eq!(uniq.len(), names.len(), "positive counts are distinct: {reply}");
        }
    }
    // A large (skiplist) set: distinct sampling through both strategies.
    for i in 0..300 {
        d.both(&["ZADD", "big", &i.to_string(), &long_member(i)]);
    }
    for count in ["10", "250", "-20"] {
        let reply = d.type_only(&["ZRANDMEMBER", "big", count]);
        let names: Vec<&str> = reply.as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
        let count: i64 = count.parse().unwrap();
        assert_eq!(names.len() as i64, count.abs());
        if count > 0 {
            let mut uniq = names.clone();
            uniq.sort();
            uniq.dedup();
            assert_eq!(uniq.len(), names.len());
        }
    }
    d.finish();
}

/// Runs a full ZSCAN on one side and returns member → score.
fn full_zscan(conn: &mut RawConn, key: &str, extra: &[&str]) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut seen = BTreeMap::new();
    let mut cursor = "0".to_string();
    for _ in 0..10_000 {
        let mut args = vec!["ZSCAN", key, &cursor];
        args.extend_from_slice(extra);
        let reply = conn.cmd(&args);
        let parts = reply.as_array().unwrap_or_else(|| panic!("ZSCAN reply {reply}"));
        let items = parts[1].as_array().unwrap();
        for p in items.chunks(2) {
            seen.insert(p[0].as_bytes().unwrap().to_vec(), p[1].as_bytes().unwrap().to_vec());
        }
        cursor = parts[0].as_str().unwrap().to_string();
        if cursor == "0" {
            return seen;
        }
    }
    panic!("ZSCAN did not finish");
}

#[test]
fn zscan() {
    let mut d = Diff::new();
    d.exact(&["ZADD", "z", "1", "a", "2", "b", "3", "c", "1.5", "bb", "-0", "zero", "inf", "top"]);
    // A listpack-sized set comes back whole, in order, whatever the cursor.
    exact_all(
        &mut d,
        &[
            &["ZSCAN", "z", "0"],
            &["ZSCAN", "z", "17"],
            &["ZSCAN", "z", ""],
            &["ZSCAN", "z", "-1"],
            &["ZSCAN", "z", "+0"],
            &["ZSCAN", "z", "18446744073709551615"],
            &["ZSCAN", "z", "0", "MATCH", "b*"],
            &["ZSCAN", "z", "0", "match", "*", "COUNT", "1"],
            &["ZSCAN", "z", "0", "MATCH", "x", "MATCH", "b"],
            &["ZSCAN", "nokey", "0"],
            &["ZSCAN", "nokey", "0", "foo"],
        ],
    );
    d.exact(&["SET", "str", "x"]);
    err_all(
        &mut d,
        &[
            &["ZSCAN", "z", "x"],
            &["ZSCAN", "z", " 1"],
            &["ZSCAN", "z", "18446744073709551616"],
            &["ZSCAN", "z", "0", "foo"],
            &["ZSCAN", "z", "0", "COUNT", "0"],
            &["ZSCAN", "z", "0", "COUNT", "-1"],
            &["ZSCAN", "z", "0", "COUNT", "x"],
            &["ZSCAN", "z", "0", "MATCH"],
            &["ZSCAN", "z", "0", "TYPE", "zset"],
            &["ZSCAN", "z", "0", "NOVALUES"],
            &["ZSCAN", "str", "0"],
            &["ZSCAN", "str", "x"],
            &["ZSCAN", "z"],
        ],
    );
    // A skiplist-encoded set: cursors differ, full scans agree.
    for i in 0..500 {
        d.both(&["ZADD", "big", &format!("{}.25", i % 37), &format!("member:{i}")]);
    }
    d.exact(&["OBJECT", "ENCODING", "big"]);
    for extra in [&[][..], &["COUNT", "7"], &["MATCH", "member:1*", "COUNT", "50"]] {
        let a = full_zscan(d.strata(), "big", extra);
        let b = full_zscan(d.redis(), "big", extra);
        assert_eq!(a, b, "ZSCAN big {extra:?}");
        assert!(!a.is_empty());
    }
    // A member present for the whole scan is returned exactly once, even with
    // deletions and insertions between calls.
    let conn = d.strata();
    let mut cursor = "0".to_string();
    let mut seen = BTreeMap::new();
    let mut round = 0;
    loop {
        let reply = conn.cmd(&["ZSCAN", "big", &cursor, "COUNT", "20"]);
        let parts = reply.as_array().unwrap();
        for p in parts[1].as_array().unwrap().chunks(2) {
            *seen.entry(p[0].as_str().unwrap().to_string()).or_insert(0) += 1;
        }
        round += 1;
        conn.cmd(&["ZREM", "big", &format!("member:{}", 400 + round)]);
        conn.cmd(&["ZADD", "big", "1", &format!("extra:{round}")]);
        cursor = parts[0].as_str().unwrap().to_string();
        if cursor == "0" {
            break;
        }
    }
    for i in 0..400 {
        assert_eq!(seen.get(&format!("member:{i}")), Some(&1), "member:{i}");
    }
    d.finish();
}

/// Many random writes on a large set (skiplist encoding), checked against
/// redis through ranks, ranges and counts.
#[test]
fn large_set_random_operations() {
    let mut d = Diff::new();
    let mut rng = Rng::new(42);
    for step in 0..3000 {
        let member = format!("m{}", rng.below(400));
        let score = format!("{}", rng.below(200) as i64 - 100);
        match rng.below(10) {
            0..=5 => d.exact(&["ZADD", "big", &score, &member]),
            6 => d.exact(&["ZINCRBY", "big", "0.5", &member]),
            7 => d.exact(&["ZREM", "big", &member]),
            8 => d.exact(&["ZRANK", "big", &member]),
            _ => d.exact(&["ZREVRANK", "big", &member]),
        };
        if step % 250 == 0 {
            d.exact(&["ZRANGE", "big", "0", "-1", "WITHSCORES"]);
        }
    }
    d.exact(&["OBJECT", "ENCODING", "big"]);
    for _ in 0..200 {
        let a = rng.below(300) as i64 - 150;
        let b = a + rng.below(100) as i64;
        let (sa, sb) = (a.to_string(), b.to_string());
        let (ea, eb) = (format!("({}", a / 2), format!("({}", b / 2));
        d.exact(&["ZRANGE", "big", &sa, &sb]);
        d.exact(&["ZRANGE", "big", &sa, &sb, "REV", "WITHSCORES"]);
        d.exact(&["ZCOUNT", "big", &ea, &eb]);
        d.exact(&["ZRANGEBYSCORE", "big", &ea, &sb, "LIMIT", &rng.below(10).to_string(), "5"]);
        d.exact(&["ZREVRANGEBYSCORE", "big", &eb, &sa, "WITHSCORES", "LIMIT", &rng.below(10).to_string(), "5"]);
    }
    exact_all(
        &mut d,
        &[
            &["ZCARD", "big"],
            &["ZPOPMIN", "big", "3"],
            &["ZPOPMAX", "big", "3"],
            &["ZREMRANGEBYRANK", "big", "10", "30"],
            &["ZREMRANGEBYSCORE", "big", "(0", "20"],
            &["ZRANGE", "big", "0", "-1", "WITHSCORES"],
            &["ZUNIONSTORE", "u", "2", "big", "big", "WEIGHTS", "1", "0.5"],
            &["ZRANGE", "u", "0", "-1", "WITHSCORES"],
            &["OBJECT", "ENCODING", "u"],
        ],
    );
    // Lex ranges over one score.
    for i in 0..300 {
        d.both(&["ZADD", "lex", "0", &format!("k{i:03}")]);
    }
    for (min, max) in [("[k100", "(k200"), ("-", "+"), ("(k050", "[k051"), ("[k299", "+"), ("-", "(k000")] {
        d.exact(&["ZRANGEBYLEX", "lex", min, max, "LIMIT", "5", "10"]);
        d.exact(&["ZREVRANGEBYLEX", "lex", max, min, "LIMIT", "5", "10"]);
        d.exact(&["ZLEXCOUNT", "lex", min, max]);
    }
    d.exact(&["ZREMRANGEBYLEX", "lex", "[k100", "(k200"]);
    d.exact(&["ZLEXCOUNT", "lex", "-", "+"]);
    d.exact(&["ZRANK", "lex", "k250"]);
    d.finish();
}

/// Writes that change nothing must not invalidate WATCH; real writes must.
#[test]
fn watch_sees_only_real_changes() {
    let mut d = Diff::new();
    d.exact(&["ZADD", "z", "1", "a", "2", "b"]);
    for noop in [
        &["ZADD", "z", "1", "a"][..],
        &["ZADD", "z", "NX", "5", "a"],
        &["ZADD", "z", "XX", "5", "nope"],
        &["ZREM", "z", "nope"],
        &["ZREMRANGEBYSCORE", "z", "10", "20"],
        &["ZPOPMIN", "z", "0"],
        &["ZINCRBY", "z", "0", "a"],
    ] {
        d.exact(&["WATCH", "z"]);
        d.exact(noop);
        d.exact(&["MULTI"]);
        d.exact(&["ZCARD", "z"]);
        d.exact(&["EXEC"]);
    }
    for change in [&["ZADD", "z", "3", "a"][..], &["ZREM", "z", "b"], &["ZPOPMAX", "z"]] {
        d.exact(&["WATCH", "z"]);
        d.exact(change);
        d.exact(&["MULTI"]);
        d.exact(&["ZCARD", "z"]);
        d.exact(&["EXEC"]);
    }
    d.finish();
}

#[test]
fn resp3_shapes() {
    let mut d = Diff::new_resp3();
    d.exact(&["ZADD", "z", "1", "a", "2.5", "b", "3", "c", "inf", "d"]);
    d.exact(&["SADD", "s", "a", "x"]);
    exact_all(
        &mut d,
        &[
            &["ZSCORE", "z", "b"],
            &["ZSCORE", "z", "d"],
            &["ZSCORE", "z", "nope"],
            &["ZMSCORE", "z", "a", "nope", "d"],
            &["ZINCRBY", "z", "0.5", "a"],
            &["ZADD", "z", "INCR", "1", "a"],
            &["ZADD", "z", "XX", "INCR", "1", "nope"],
            &["ZRANK", "z", "b"],
            &["ZRANK", "z", "nope"],
            &["ZRANGE", "z", "0", "-1"],
            &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
            &["ZRANGE", "z", "0", "1", "REV", "WITHSCORES"],
            &["ZRANGE", "nokey", "0", "-1", "WITHSCORES"],
            &["ZRANGEBYSCORE", "z", "-inf", "+inf", "WITHSCORES"],
            &["ZREVRANGEBYSCORE", "z", "+inf", "-inf", "WITHSCORES", "LIMIT", "0", "2"],
            &["ZREVRANGE", "z", "0", "0", "WITHSCORES"],
            &["ZRANGEBYLEX", "z", "-", "+"],
            &["ZUNION", "2", "z", "s", "WITHSCORES"],
            &["ZINTER", "2", "z", "s", "WITHSCORES"],
            &["ZDIFF", "2", "z", "s", "WITHSCORES"],
            &["ZDIFF", "2", "z", "s"],
            &["ZRANDMEMBER", "z", "10", "WITHSCORES"],
            &["ZRANDMEMBER", "z", "10"],
            &["ZRANDMEMBER", "nokey"],
            &["ZRANDMEMBER", "nokey", "3", "WITHSCORES"],
            &["ZSCAN", "z", "0"],
            &["ZPOPMIN", "z"],
            &["ZPOPMIN", "z", "1"],
            &["ZPOPMAX", "z", "2"],
            &["ZPOPMIN", "nokey"],
            &["ZPOPMIN", "nokey", "2"],
            &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
            &["ZMPOP", "1", "z", "MIN", "COUNT", "2"],
            &["ZMPOP", "1", "nokey", "MIN"],
            &["BZPOPMAX", "z", "0"],
            &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
            &["BZPOPMIN", "z", "0"],
            &["BZMPOP", "0", "1", "z", "MAX"],
            &["BZPOPMIN", "nokey", "0.01"],
            &["BZMPOP", "0.01", "1", "nokey", "MAX"],
        ],
    );
    for shape in [&["ZRANDMEMBER", "z", "-3", "WITHSCORES"][..], &["ZRANDMEMBER", "z"], &["ZRANDMEMBER", "z", "-3"]] {
        d.type_only(shape);
    }
    let pairs = d.type_only(&["ZRANDMEMBER", "z", "-3", "WITHSCORES"]);
    for p in pairs.as_array().unwrap() {
        let pair = p.as_array().unwrap_or_else(|| panic!("RESP3 pairs are arrays: {pairs}"));
        assert_eq!(pair[1].kind(), "double");
    }
    d.finish();
}

#[test]
fn command_metadata() {
    let mut d = Diff::new();
    for name in [
        "zadd",
        "zincrby",
        "zrem",
        "zremrangebyscore",
        "zremrangebyrank",
        "zremrangebylex",
        "zunionstore",
        "zinterstore",
        "zdiffstore",
        "zunion",
        "zinter",
        "zintercard",
        "zdiff",
        "zrange",
        "zrangestore",
        "zrangebyscore",
        "zrevrangebyscore",
        "zrangebylex",
        "zrevrangebylex",
        "zcount",
        "zlexcount",
        "zrevrange",
        "zcard",
        "zscore",
        "zmscore",
        "zrank",
        "zrevrank",
        "zscan",
        "zpopmin",
        "zpopmax",
        "bzpopmin",
        "bzpopmax",
        "zmpop",
        "bzmpop",
        "zrandmember",
    ] {
        // Arity is what clients depend on; compare it with redis.
        let (s, r) = d.both(&["COMMAND", "INFO", name]);
        let arity = |f: &Frame| f.as_array().and_then(|a| a.first()?.as_array()?.get(1)?.as_int());
        assert_eq!(arity(&s), arity(&r), "arity of {name}: {s} vs {r}");
        assert!(arity(&s).is_some(), "{name} missing from COMMAND INFO: {s}");
    }
    d.exact(&["COMMAND", "GETKEYS", "ZUNIONSTORE", "dst", "2", "a", "b", "WEIGHTS", "1", "2"]);
    d.exact(&["COMMAND", "GETKEYS", "ZINTER", "2", "a", "b"]);
    d.exact(&["COMMAND", "GETKEYS", "BZMPOP", "0", "2", "a", "b", "MIN"]);
    d.exact(&["COMMAND", "GETKEYS", "ZRANGESTORE", "dst", "src", "0", "-1"]);
    d.exact(&["COMMAND", "GETKEYS", "BZPOPMIN", "a", "b", "0"]);
    d.finish();
}
