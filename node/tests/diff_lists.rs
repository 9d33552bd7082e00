//! Differential tests (strata vs redis 7.0) for the list commands, including
//! the blocking ones: replies, errors, edge cases, RESP3 shapes, MULTI, and
//! wake-ups driven from a second connection.

mod support;

use std::thread::sleep;
use std::time::Duration;

use support::*;

/// Wrong-type fixtures: a string key `s` (and `l` a list a..e with duplicates).
fn setup(d: &mut Diff) {
    d.exact(&["SET", "s", "x"]);
    d.exact(&["RPUSH", "l", "a", "b", "c", "a", "b", "c", "a"]);
}

#[test]
fn push_pop_len() {
    let mut d = Diff::new();
    setup(&mut d);
    d.exact(&["LPUSH", "p", "1", "2", "3"]);
    d.exact(&["RPUSH", "p", "4", "5"]);
    d.exact(&["LRANGE", "p", "0", "-1"]);
    d.exact(&["LLEN", "p"]);
    d.exact(&["LLEN", "nokey"]);
    d.err(&["LLEN", "s"]);
    d.exact(&["LPUSHX", "nokey", "a"]);
    d.exact(&["RPUSHX", "nokey", "a", "b"]);
    d.exact(&["EXISTS", "nokey"]);
    d.exact(&["LPUSHX", "p", "0", "-1"]);
    d.exact(&["RPUSHX", "p", "6", "7"]);
    d.exact(&["LRANGE", "p", "0", "-1"]);
    d.err(&["LPUSH", "s", "a"]);
    d.err(&["RPUSH", "s", "a"]);
    d.err(&["LPUSHX", "s", "a"]);
    d.err(&["RPUSHX", "s", "a", "b"]);
    d.err(&["LPUSH", "p"]);
    d.err(&["RPUSHX", "p"]);
    d.exact(&["GET", "s"]);

    // Pops, single and with counts.
    d.exact(&["LPOP", "p"]);
    d.exact(&["RPOP", "p"]);
    d.exact(&["LPOP", "p", "2"]);
    d.exact(&["RPOP", "p", "2"]);
    d.exact(&["LPOP", "p", "0"]);
    d.exact(&["RPOP", "p", "0"]);
    d.exact(&["LRANGE", "p", "0", "-1"]);
    d.exact(&["LPOP", "p", "100"]);
    d.exact(&["EXISTS", "p"]);
    d.exact(&["LPOP", "p"]);
    d.exact(&["RPOP", "p"]);
    d.exact(&["LPOP", "nokey", "1"]);
    d.exact(&["RPOP", "nokey", "0"]);
    d.err(&["LPOP", "nokey", "-1"]);
    d.err(&["LPOP", "l", "-1"]);
    d.err(&["RPOP", "l", "abc"]);
    d.err(&["RPOP", "l", "9223372036854775808"]);
    d.err(&["LPOP", "l", "1", "2"]);
    d.err(&["RPOP", "l", "1", "2"]);
    d.err(&["LPOP"]);
    d.err(&["LPOP", "s"]);
    d.err(&["RPOP", "s", "0"]);
    d.err(&["RPOP", "s", "-1"]);
    d.exact(&["RPOP", "l", "9223372036854775807"]);
    d.exact(&["EXISTS", "l"]);

    // Binary-safe elements, empty elements, large numbers of elements.
    d.exact(&[b"RPUSH".as_slice(), b"bin", b"a\r\nb", b"\x00\xff", b""]);
    d.exact(&["LRANGE", "bin", "0", "-1"]);
    d.exact(&["RPOP", "bin"]);
    d.exact(&["LPOP", "bin"]);
    let mut big: Vec<String> = vec!["RPUSH".into(), "big".into()];
    big.extend((0..1000).map(|i| format!("element-{i}")));
    d.exact(&big);
    d.exact(&["LLEN", "big"]);
    d.exact(&["LRANGE", "big", "0", "-1"]);
    d.exact(&["LPOP", "big", "333"]);
    d.exact(&["RPOP", "big", "333"]);
    d.exact(&["LRANGE", "big", "0", "-1"]);
    d.exact(&["TYPE", "big"]);
    d.finish();
}

#[test]
fn range_index_set() {
    let mut d = Diff::new();
    setup(&mut d);
    for (start, end) in [
        ("0", "-1"),
        ("0", "0"),
        ("1", "3"),
        ("-3", "-1"),
        ("-100", "100"),
        ("5", "2"),
        ("-1", "-2"),
        ("7", "10"),
        ("6", "6"),
        ("-7", "-7"),
        ("-8", "0"),
        ("-9223372036854775808", "9223372036854775807"),
        ("0", "-9223372036854775808"),
    ] {
        d.exact(&["LRANGE", "l", start, end]);
    }
    d.exact(&["LRANGE", "nokey", "0", "-1"]);
    d.err(&["LRANGE", "l", "a", "1"]);
    d.err(&["LRANGE", "l", "0", "1.5"]);
    d.err(&["LRANGE", "nokey", "x", "1"]);
    d.err(&["LRANGE", "l", "0"]);
    d.err(&["LRANGE", "s", "0", "-1"]);
    d.err(&["LRANGE", "s", "x", "-1"]);

    for i in ["0", "3", "6", "7", "-1", "-7", "-8", "9223372036854775807", "-9223372036854775808"] {
        d.exact(&["LINDEX", "l", i]);
    }
    d.exact(&["LINDEX", "nokey", "0"]);
    d.exact(&["LINDEX", "nokey", "abc"]);
    d.err(&["LINDEX", "l", "abc"]);
    d.err(&["LINDEX", "s", "0"]);
    d.err(&["LINDEX", "s", "abc"]);
    d.err(&["LINDEX", "l"]);

    d.exact(&["LSET", "l", "0", "first"]);
    d.exact(&["LSET", "l", "-1", "last"]);
    d.exact(&["LSET", "l", "3", "a much longer middle element than before"]);
    d.exact(&["LRANGE", "l", "0", "-1"]);
    d.err(&["LSET", "l", "7", "x"]);
    d.err(&["LSET", "l", "-8", "x"]);
    d.err(&["LSET", "l", "abc", "x"]);
    d.err(&["LSET", "nokey", "0", "x"]);
    d.err(&["LSET", "nokey", "abc", "x"]);
    d.err(&["LSET", "s", "0", "x"]);
    d.err(&["LSET", "s", "abc", "x"]);
    d.err(&["LSET", "l", "0"]);
    d.exact(&["EXISTS", "nokey"]);
    d.exact(&["LRANGE", "l", "0", "-1"]);
    d.finish();
}

#[test]
fn rem_trim_insert() {
    let mut d = Diff::new();
    setup(&mut d);
    d.exact(&["LREM", "l", "1", "a"]);
    d.exact(&["LRANGE", "l", "0", "-1"]);
    d.exact(&["LREM", "l", "-1", "b"]);
    d.exact(&["LRANGE", "l", "0", "-1"]);
    d.exact(&["LREM", "l", "0", "c"]);
    d.exact(&["LRANGE", "l", "0", "-1"]);
    d.exact(&["LREM", "l", "5", "zz"]);
    d.exact(&["LREM", "nokey", "0", "a"]);
    d.err(&["LREM", "l", "x", "a"]);
    d.err(&["LREM", "nokey", "x", "a"]);
    d.err(&["LREM", "s", "0", "a"]);
    d.err(&["LREM", "l", "0"]);
    d.exact(&["RPUSH", "r", "x", "y", "x", "x", "y", "x"]);
    d.exact(&["LREM", "r", "-2", "x"]);
    d.exact(&["LRANGE", "r", "0", "-1"]);
    d.exact(&["LREM", "r", "-9223372036854775808", "x"]);
    d.exact(&["LRANGE", "r", "0", "-1"]);
    d.exact(&["LREM", "r", "9223372036854775807", "y"]);
    d.exact(&["EXISTS", "r"]);

    d.exact(&["RPUSH", "t", "1", "2", "3", "4", "5", "6", "7"]);
    d.exact(&["LTRIM", "t", "1", "-2"]);
    d.exact(&["LRANGE", "t", "0", "-1"]);
    d.exact(&["LTRIM", "t", "-100", "100"]);
    d.exact(&["LRANGE", "t", "0", "-1"]);
    d.exact(&["LTRIM", "t", "1", "1"]);
    d.exact(&["LRANGE", "t", "0", "-1"]);
    d.exact(&["LTRIM", "t", "5", "1"]);
    d.exact(&["EXISTS", "t"]);
    d.exact(&["RPUSH", "t", "1", "2", "3"]);
    d.exact(&["LTRIM", "t", "-1", "-2"]);
    d.exact(&["EXISTS", "t"]);
    d.exact(&["RPUSH", "t", "1", "2", "3"]);
    d.exact(&["LTRIM", "t", "3", "10"]);
    d.exact(&["EXISTS", "t"]);
    d.exact(&["LTRIM", "nokey", "0", "1"]);
    d.err(&["LTRIM", "nokey", "a", "1"]);
    d.err(&["LTRIM", "l", "0", "b"]);
    d.err(&["LTRIM", "s", "0", "1"]);
    d.err(&["LTRIM", "l", "0"]);

    d.exact(&["RPUSH", "i", "a", "b", "c", "b"]);
    d.exact(&["LINSERT", "i", "BEFORE", "b", "x"]);
    d.exact(&["LINSERT", "i", "after", "b", "y"]);
    d.exact(&["LINSERT", "i", "After", "b", "z"]);
    d.exact(&["LINSERT", "i", "before", "a", "head"]);
    d.exact(&["LINSERT", "i", "after", "c", "tail"]);
    d.exact(&["LRANGE", "i", "0", "-1"]);
    d.exact(&["LINSERT", "i", "before", "nope", "x"]);
    d.exact(&["LINSERT", "nokey", "before", "a", "x"]);
    d.exact(&["EXISTS", "nokey"]);
    d.err(&["LINSERT", "i", "middle", "a", "x"]);
    d.err(&["LINSERT", "nokey", "middle", "a", "x"]);
    d.err(&["LINSERT", "s", "middle", "a", "x"]);
    d.err(&["LINSERT", "s", "before", "a", "x"]);
    d.err(&["LINSERT", "i", "before", "a"]);
    d.exact(&["LLEN", "i"]);
    d.finish();
}

#[test]
fn lpos() {
    let mut d = Diff::new();
    setup(&mut d);
    // l = a b c a b c a
    for opts in [
        &[][..],
        &["RANK", "1"],
        &["RANK", "2"],
        &["RANK", "3"],
        &["RANK", "4"],
        &["RANK", "-1"],
        &["RANK", "-3"],
        &["RANK", "-4"],
        &["COUNT", "0"],
        &["COUNT", "2"],
        &["COUNT", "10"],
        &["RANK", "2", "COUNT", "0"],
        &["RANK", "-1", "COUNT", "2"],
        &["RANK", "-2", "COUNT", "0"],
        &["MAXLEN", "3"],
        &["MAXLEN", "1"],
        &["COUNT", "0", "MAXLEN", "4"],
        &["RANK", "-1", "COUNT", "0", "MAXLEN", "3"],
        &["RANK", "2", "MAXLEN", "3"],
        &["rank", "1", "rank", "2"],
        &["count", "1", "count", "0"],
        &["RANK", "9223372036854775807", "COUNT", "0"],
        &["RANK", "-9223372036854775808"],
        &["RANK", "-9223372036854775808", "COUNT", "1"],
    ] {
        let mut args = vec!["LPOS", "l", "a"];
        args.extend_from_slice(opts);
        d.exact(&args);
    }
    d.exact(&["LPOS", "l", "zz"]);
    d.exact(&["LPOS", "l", "zz", "COUNT", "2"]);
    d.exact(&["LPOS", "nokey", "a"]);
    d.exact(&["LPOS", "nokey", "a", "COUNT", "0"]);
    d.err(&["LPOS", "l", "a", "RANK", "0"]);
    d.err(&["LPOS", "nokey", "a", "RANK", "0"]);
    d.err(&["LPOS", "s", "a", "RANK", "0"]);
    d.err(&["LPOS", "l", "a", "RANK", "x"]);
    d.err(&["LPOS", "l", "a", "COUNT", "-1"]);
    d.err(&["LPOS", "l", "a", "COUNT", "x"]);
    d.err(&["LPOS", "l", "a", "MAXLEN", "-1"]);
    d.err(&["LPOS", "l", "a", "MAXLEN", "x"]);
    d.err(&["LPOS", "l", "a", "RANK"]);
    d.err(&["LPOS", "l", "a", "FOO", "1"]);
    d.err(&["LPOS", "l", "a", "COUNT", "1", "MAXLEN"]);
    d.err(&["LPOS", "s", "a"]);
    d.err(&["LPOS", "l"]);
    d.finish();
}

#[test]
fn lmove_rpoplpush() {
    let mut d = Diff::new();
    setup(&mut d);
    d.exact(&["RPUSH", "src", "1", "2", "3", "4"]);
    d.exact(&["LMOVE", "src", "dst", "LEFT", "RIGHT"]);
    d.exact(&["LMOVE", "src", "dst", "right", "left"]);
    d.exact(&["LMOVE", "src", "dst", "Left", "Left"]);
    d.exact(&["LRANGE", "src", "0", "-1"]);
    d.exact(&["LRANGE", "dst", "0", "-1"]);
    d.exact(&["RPOPLPUSH", "src", "dst"]);
    d.exact(&["EXISTS", "src"]);
    d.exact(&["LRANGE", "dst", "0", "-1"]);
    d.exact(&["RPOPLPUSH", "src", "dst"]);
    d.exact(&["LMOVE", "src", "dst", "LEFT", "LEFT"]);
    // Same source and destination: rotation, and a one-element list survives.
    d.exact(&["LMOVE", "dst", "dst", "LEFT", "RIGHT"]);
    d.exact(&["RPOPLPUSH", "dst", "dst"]);
    d.exact(&["LMOVE", "dst", "dst", "RIGHT", "RIGHT"]);
    d.exact(&["LMOVE", "dst", "dst", "LEFT", "LEFT"]);
    d.exact(&["LRANGE", "dst", "0", "-1"]);
    d.exact(&["RPUSH", "one", "x"]);
    d.exact(&["EXPIRE", "one", "1000"]);
    d.exact(&["RPOPLPUSH", "one", "one"]);
    d.exact(&["LMOVE", "one", "one", "LEFT", "RIGHT"]);
    d.exact(&["TTL", "one"]);
    d.exact(&["LRANGE", "one", "0", "-1"]);
    // Wrong types and syntax.
    d.err(&["LMOVE", "s", "dst", "LEFT", "LEFT"]);
    d.err(&["LMOVE", "dst", "s", "LEFT", "LEFT"]);
    d.err(&["LMOVE", "s", "s", "LEFT", "LEFT"]);
    d.exact(&["LMOVE", "nokey", "s", "LEFT", "LEFT"]);
    d.err(&["RPOPLPUSH", "dst", "s"]);
    d.err(&["RPOPLPUSH", "s", "dst"]);
    d.exact(&["RPOPLPUSH", "nokey", "s"]);
    d.exact(&["LRANGE", "dst", "0", "-1"]);
    d.err(&["LMOVE", "dst", "x", "UP", "LEFT"]);
    d.err(&["LMOVE", "dst", "x", "LEFT", "DOWN"]);
    d.err(&["LMOVE", "nokey", "x", "LEFT", "DOWN"]);
    d.err(&["LMOVE", "dst", "x", "LEFT"]);
    d.err(&["RPOPLPUSH", "dst"]);
    d.exact(&["EXISTS", "x"]);
    d.finish();
}

#[test]
fn lmpop() {
    let mut d = Diff::new();
    setup(&mut d);
    d.exact(&["RPUSH", "m1", "a", "b", "c"]);
    d.exact(&["RPUSH", "m2", "d", "e"]);
    d.exact(&["LMPOP", "1", "m1", "LEFT"]);
    d.exact(&["LMPOP", "2", "nokey", "m1", "RIGHT", "COUNT", "1"]);
    d.exact(&["LMPOP", "3", "nokey", "m1", "m2", "left", "count", "10"]);
    d.exact(&["EXISTS", "m1"]);
    d.exact(&["LMPOP", "2", "m1", "m2", "right", "COUNT", "9223372036854775807"]);
    d.exact(&["LMPOP", "2", "m1", "m2", "LEFT"]);
    d.exact(&["LMPOP", "1", "nokey", "LEFT", "COUNT", "3"]);
    d.err(&["LMPOP", "2", "nokey", "s", "LEFT"]);
    d.exact(&["RPUSH", "m1", "x"]);
    d.exact(&["LMPOP", "2", "m1", "s", "LEFT"]);
    for bad in [
        &["LMPOP", "0", "a", "LEFT"][..],
        &["LMPOP", "-1", "a", "LEFT"],
        &["LMPOP", "abc", "a", "LEFT"],
        &["LMPOP", "2", "a", "LEFT"],
        &["LMPOP", "9999999999", "a", "LEFT"],
        &["LMPOP", "1", "a", "MIDDLE"],
        &["LMPOP", "1", "a", "LEFT", "COUNT", "0"],
        &["LMPOP", "1", "a", "LEFT", "COUNT", "-1"],
        &["LMPOP", "1", "a", "LEFT", "COUNT", "abc"],
        &["LMPOP", "1", "a", "LEFT", "COUNT", "99999999999999999999"],
        &["LMPOP", "1", "a", "LEFT", "COUNT"],
        &["LMPOP", "1", "a", "LEFT", "COUNT", "1", "COUNT", "2"],
        &["LMPOP", "1", "a", "LEFT", "FOO"],
        &["LMPOP", "1", "a"],
        &["LMPOP", "1", "s", "MIDDLE"],
    ] {
        d.err(bad);
    }
    d.finish();
}

#[test]
fn blocking_commands_without_blocking() {
    let mut d = Diff::new();
    setup(&mut d);
    d.exact(&["RPUSH", "b1", "a", "b", "c"]);
    d.exact(&["RPUSH", "b2", "d"]);
    d.exact(&["BLPOP", "nokey", "b1", "b2", "0"]);
    d.exact(&["BRPOP", "nokey", "b1", "b2", "0"]);
    d.exact(&["BLPOP", "b2", "b1", "1.5"]);
    d.exact(&["BRPOP", "nokey", "b1", "0"]);
    d.exact(&["EXISTS", "b1", "b2"]);
    d.exact(&["BLPOP", "nokey", "0.01"]);
    d.exact(&["BRPOP", "nokey", "nokey2", "0.01"]);
    d.exact(&["BLPOP", "nokey", "nokey", "0.01"]);
    d.err(&["BLPOP", "s", "0"]);
    d.err(&["BLPOP", "nokey", "s", "0"]);
    d.err(&["BLPOP", "nokey", "-1"]);
    d.err(&["BLPOP", "nokey", "abc"]);
    d.err(&["BLPOP", "s", "-1"]);
    d.err(&["BRPOP", "nokey", "1x"]);
    d.err(&["BLPOP", "nokey"]);
    d.exact(&["RPUSH", "b1", "x"]);
    d.exact(&["BLPOP", "b1", "s", "0"]);

    d.exact(&["RPUSH", "src", "1", "2", "3"]);
    d.exact(&["BLMOVE", "src", "dst", "LEFT", "RIGHT", "0"]);
    d.exact(&["BLMOVE", "src", "dst", "right", "left", "0.5"]);
    d.exact(&["BRPOPLPUSH", "src", "dst", "0"]);
    d.exact(&["BRPOPLPUSH", "dst", "dst", "0"]);
    d.exact(&["LRANGE", "dst", "0", "-1"]);
    d.exact(&["BLMOVE", "nokey", "dst", "LEFT", "LEFT", "0.01"]);
    d.exact(&["BRPOPLPUSH", "nokey", "dst", "0.01"]);
    d.exact(&["BRPOPLPUSH", "nokey", "s", "0.01"]);
    // Redis 7.0 answers a BLMOVE/BRPOPLPUSH timeout with a null array.
    assert_eq!(d.exact(&["BRPOPLPUSH", "nokey", "dst", "0.01"]), Frame::NilArray);
    d.err(&["BRPOPLPUSH", "dst", "s", "0"]);
    d.err(&["BRPOPLPUSH", "s", "dst", "0"]);
    d.err(&["BLMOVE", "dst", "s", "LEFT", "LEFT", "0"]);
    d.err(&["BLMOVE", "dst", "x", "UP", "LEFT", "0"]);
    d.err(&["BLMOVE", "dst", "x", "LEFT", "DOWN", "-1"]);
    d.err(&["BLMOVE", "dst", "x", "LEFT", "LEFT", "-1"]);
    d.err(&["BLMOVE", "dst", "x", "LEFT", "LEFT", "abc"]);
    d.err(&["BRPOPLPUSH", "dst", "x", "-1"]);
    d.err(&["BRPOPLPUSH", "dst", "x"]);

    d.exact(&["RPUSH", "m", "a", "b", "c"]);
    d.exact(&["BLMPOP", "0", "2", "nokey", "m", "LEFT"]);
    d.exact(&["BLMPOP", "0.5", "1", "m", "RIGHT", "COUNT", "5"]);
    d.exact(&["BLMPOP", "0.01", "1", "m", "RIGHT", "COUNT", "5"]);
    d.err(&["BLMPOP", "0", "1", "s", "LEFT"]);
    for bad in [
        &["BLMPOP", "0", "0", "a", "LEFT"][..],
        &["BLMPOP", "-1", "0", "a", "LEFT"],
        &["BLMPOP", "-1", "1", "a", "MIDDLE"],
        &["BLMPOP", "abc", "1", "a", "LEFT", "COUNT", "0"],
        &["BLMPOP", "-1", "1", "a", "LEFT"],
        &["BLMPOP", "abc", "1", "a", "LEFT"],
        &["BLMPOP", "-1", "1", "s", "LEFT"],
        &["BLMPOP", "0", "2", "a", "LEFT"],
        &["BLMPOP", "0", "abc", "a", "LEFT"],
        &["BLMPOP", "0", "1", "a", "LEFT", "COUNT", "1", "COUNT", "1"],
        &["BLMPOP", "0", "1", "a"],
    ] {
        d.err(bad);
    }
    d.finish();
}

#[test]
fn blocking_inside_multi_replies_like_a_timeout() {
    let mut d = Diff::new();
    setup(&mut d);
    d.exact(&["MULTI"]);
    for cmd in [
        &["BLPOP", "nokey", "0"][..],
        &["BRPOP", "nokey", "1"],
        &["BLMOVE", "nokey", "dst", "LEFT", "LEFT", "0"],
        &["BRPOPLPUSH", "nokey", "dst", "0"],
        &["BLMPOP", "0", "1", "nokey", "LEFT"],
        &["RPUSH", "q", "v1", "v2"],
        &["BLPOP", "q", "0"],
        &["BLMOVE", "q", "dst", "LEFT", "LEFT", "0"],
        &["BLPOP", "s", "0"],
        &["BLPOP", "nokey", "-1"],
    ] {
        d.exact(cmd);
    }
    d.exact(&["EXEC"]);
    d.exact(&["LRANGE", "dst", "0", "-1"]);
    d.exact(&["EXISTS", "q"]);

    d.hello3();
    d.exact(&["MULTI"]);
    d.exact(&["BLPOP", "nokey", "0"]);
    d.exact(&["BLMOVE", "nokey", "dst", "LEFT", "LEFT", "0"]);
    d.exact(&["BLMPOP", "0", "1", "nokey", "LEFT"]);
    d.exact(&["EXEC"]);
    d.finish();
}

#[test]
fn resp3_shapes() {
    let mut d = Diff::new_resp3();
    setup(&mut d);
    d.exact(&["LPOP", "nokey"]);
    d.exact(&["LPOP", "nokey", "2"]);
    d.exact(&["RPOP", "nokey", "0"]);
    d.exact(&["LPOP", "l", "0"]);
    d.exact(&["LPOP", "l", "2"]);
    d.exact(&["RPOP", "l"]);
    d.exact(&["LRANGE", "l", "0", "-1"]);
    d.exact(&["LRANGE", "nokey", "0", "-1"]);
    d.exact(&["LINDEX", "l", "100"]);
    d.exact(&["LPOS", "l", "zz"]);
    d.exact(&["LPOS", "l", "a", "COUNT", "0"]);
    d.exact(&["LPOS", "nokey", "a", "COUNT", "0"]);
    d.exact(&["LMOVE", "nokey", "x", "LEFT", "LEFT"]);
    d.exact(&["RPOPLPUSH", "nokey", "x"]);
    d.exact(&["LMPOP", "1", "nokey", "LEFT"]);
    d.exact(&["LMPOP", "2", "nokey", "l", "LEFT", "COUNT", "2"]);
    d.exact(&["BLPOP", "nokey", "0.01"]);
    d.exact(&["BRPOP", "nokey", "l", "0.01"]);
    d.exact(&["BLMOVE", "nokey", "x", "LEFT", "LEFT", "0.01"]);
    d.exact(&["BRPOPLPUSH", "nokey", "x", "0.01"]);
    d.exact(&["BLMPOP", "0.01", "1", "nokey", "LEFT"]);
    d.exact(&["BLMPOP", "0.01", "1", "l", "LEFT"]);
    d.err(&["LPOP", "s"]);
    d.finish();
}

/// Second connections to both servers, for waking blocked clients.
fn second_conns(d: &mut Diff) -> (RawConn, RawConn) {
    let a = d.strata_server().expect("owned").conn();
    let b = d.redis_server().expect("owned").conn();
    (a, b)
}

/// Sends `cmd` on the main connections (it blocks there), waits until both
/// servers have surely processed it, then runs `wake` on the second
/// connections (results must agree; each gets time to wake the blocked
/// client before the next) and compares the blocked reply.
fn block_then_wake(d: &mut Diff, others: &mut (RawConn, RawConn), cmd: &[&str], wake: &[&[&str]]) -> Frame {
    d.strata().send(cmd);
    d.redis().send(cmd);
    sleep(Duration::from_millis(150));
    for w in wake {
        let (a, b) = (others.0.cmd(w), others.1.cmd(w));
        assert_eq!(a, b, "waking command {w:?}: strata {a} vs redis {b}");
        sleep(Duration::from_millis(100));
    }
    d.compare_next(Mode::Exact).0
}

#[test]
fn blocked_clients_woken_by_other_connections() {
    let mut d = Diff::new();
    setup(&mut d);
    let mut o = second_conns(&mut d);
    let r = block_then_wake(&mut d, &mut o, &["BLPOP", "w1", "w2", "0"], &[&["RPUSH", "w2", "a", "b"]]);
    assert_eq!(r, Frame::bulks(&["w2", "a"]));
    d.exact(&["LRANGE", "w2", "0", "-1"]);
    let r = block_then_wake(&mut d, &mut o, &["BRPOP", "w1", "w3", "5"], &[&["LPUSH", "w3", "x", "y"]]);
    assert_eq!(r, Frame::bulks(&["w3", "x"]));
    let r =
        block_then_wake(&mut d, &mut o, &["BLMOVE", "w4", "w5", "RIGHT", "LEFT", "0"], &[&["RPUSH", "w4", "1", "2"]]);
    assert_eq!(r, Frame::bulk("2"));
    d.exact(&["LRANGE", "w4", "0", "-1"]);
    d.exact(&["LRANGE", "w5", "0", "-1"]);
    let r = block_then_wake(&mut d, &mut o, &["BRPOPLPUSH", "w6", "w6", "0"], &[&["RPUSH", "w6", "only"]]);
    assert_eq!(r, Frame::bulk("only"));
    d.exact(&["LRANGE", "w6", "0", "-1"]);
    let r = block_then_wake(
        &mut d,
        &mut o,
        &["BLMPOP", "0", "2", "w7", "w8", "RIGHT", "COUNT", "2"],
        &[&["RPUSH", "w8", "p", "q", "r"]],
    );
    assert_eq!(r.as_array().map(|a| a.len()), Some(2));
    d.exact(&["LRANGE", "w8", "0", "-1"]);
    // LMOVE into a key someone waits on wakes them too.
    d.exact(&["RPUSH", "feed", "v"]);
    block_then_wake(&mut d, &mut o, &["BLPOP", "w9", "0"], &[&["LMOVE", "feed", "w9", "LEFT", "LEFT"]]);
    // Redis 7.0 keeps a client blocked when its key is created with another
    // type; it is served once the key holds a list.
    let r = block_then_wake(
        &mut d,
        &mut o,
        &["BLPOP", "w10", "0"],
        &[&["ZADD", "w10", "1", "m"], &["DEL", "w10"], &["RPUSH", "w10", "late"]],
    );
    assert_eq!(r, Frame::bulks(&["w10", "late"]));
    // A blocked client times out with the original deadline.
    block_then_wake(&mut d, &mut o, &["BLPOP", "w11", "0.5"], &[&["RPUSH", "other", "x"]]);
    d.finish();
}

#[test]
fn blocked_resp3_wake_and_timeout() {
    let mut d = Diff::new_resp3();
    let mut o = second_conns(&mut d);
    let r = block_then_wake(&mut d, &mut o, &["BLPOP", "k", "0"], &[&["RPUSH", "k", "v"]]);
    assert_eq!(r, Frame::Array(vec![Frame::bulk("k"), Frame::bulk("v")]));
    let r = block_then_wake(&mut d, &mut o, &["BLMPOP", "0", "1", "k", "LEFT"], &[&["RPUSH", "k", "v"]]);
    assert_eq!(r.as_array().map(|a| a.len()), Some(2));
    let r = block_then_wake(&mut d, &mut o, &["BLPOP", "k", "0.2"], &[]);
    assert_eq!(r, Frame::Null);
    let r = block_then_wake(&mut d, &mut o, &["BLMOVE", "k", "d", "LEFT", "LEFT", "0.2"], &[]);
    assert_eq!(r, Frame::Null);
    d.finish();
}
