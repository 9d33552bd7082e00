//! Smoke differential test (strata vs redis) on commands every Redis has, plus
//! self-checks of the test harness itself (redis vs redis, parser, comparison).

mod support;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use support::*;

/// Basic RESP2 script; shared by the strata test and the harness self-check.
fn smoke_resp2(d: &mut Diff) {
    d.exact(&["PING"]);
    d.exact(&["PING", "hello world"]);
    d.exact(&["ECHO", "hi"]);
    d.exact(&["ECHO", ""]);
    d.exact(&["SET", "k", "v"]);
    d.exact(&["GET", "k"]);
    d.exact(&["GET", "missing"]);
    d.exact(&["SET", "k2", "v2"]);
    d.exact(&["EXISTS", "k", "k2", "missing", "k"]);
    d.exact(&["DEL", "k", "missing"]);
    d.exact(&["EXISTS", "k"]);
    d.exact(&["GET", "k"]);
    d.exact(&[b"SET".as_slice(), b"bin", b"a\r\nb\0c\xff"]);
    d.exact(&["GET", "bin"]);
    d.exact(&["SET", "n", "41"]);
    d.exact(&["INCR", "n"]);
    d.exact(&["INCR", "fresh"]);
    d.exact(&["GET", "n"]);
    d.err(&["INCR", "k2"]);
    d.err(&["NOSUCHCOMMAND", "a", "b"]);
    d.err(&["GET"]);
    d.err(&["SET", "k"]);
    d.exact(&["DEL", "k2", "n", "fresh", "bin"]);
}

/// Basic RESP3 script (after HELLO 3).
fn smoke_resp3(d: &mut Diff) {
    d.exact(&["PING"]);
    d.exact(&["GET", "missing"]);
    d.exact(&["SET", "k", "v"]);
    d.exact(&["GET", "k"]);
    d.exact(&["EXISTS", "k", "missing"]);
    d.err(&["INCR", "k"]);
    d.exact(&["DEL", "k"]);
}

#[test]
fn smoke_strata_vs_redis_resp2() {
    let mut d = Diff::new();
    smoke_resp2(&mut d);
    d.finish();
}

#[test]
fn smoke_strata_vs_redis_resp3() {
    let mut d = Diff::new_resp3();
    smoke_resp3(&mut d);
    d.finish();
}

#[test]
fn smoke_strata_vs_redis_cases() {
    diff(&[
        Case::both(&["DEL", "s"]),
        Case::exact(&["SET", "s", "1"]),
        Case::exact(&["INCR", "s"]),
        Case::err(&["ECHO"]),
    ]);
    diff_resp3(&[Case::exact(&["PING"]), Case::exact(&["GET", "nope"])]);
}

/// Two redis-servers with the debug command enabled (for DEBUG PROTOCOL).
fn redis_pair() -> Diff {
    let args = ["--enable-debug-command", "yes"];
    Diff::with_servers(Server::redis_with(&args), Server::redis_with(&args))
}

/// Runs `f` and returns its panic message (panics if `f` did not panic).
fn panic_message(f: impl FnOnce()) -> String {
    let err = catch_unwind(AssertUnwindSafe(f)).expect_err("expected a mismatch panic");
    err.downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn harness_self_check() {
    let mut d = redis_pair();
    smoke_resp2(&mut d);

    // Every RESP2 reply type the reference server can produce.
    for ty in ["string", "integer", "double", "bignum", "null", "array"] {
        d.exact(&["DEBUG", "PROTOCOL", ty]);
    }
    assert_eq!(d.exact(&["DEBUG", "PROTOCOL", "null"]), Frame::Nil);
    assert_eq!(d.exact(&["DEBUG", "PROTOCOL", "array"]).kind(), "array");

    // Unordered comparisons: build the same data in a different order.
    d.strata().cmd(&["HSET", "h", "a", "1", "b", "2"]);
    d.redis().cmd(&["HSET", "h", "b", "2", "a", "1"]);
    d.strata().cmd(&["RPUSH", "l", "x", "y", "z"]);
    d.redis().cmd(&["RPUSH", "l", "z", "y", "x"]);
    d.unordered_pairs(&["HGETALL", "h"]);
    d.unordered(&["LRANGE", "l", "0", "-1"]);
    let msg = panic_message(|| {
        d.exact(&["HGETALL", "h"]);
    });
    assert!(msg.contains("replies differ"), "{msg}");
    assert!(msg.contains("command: HGETALL h"), "{msg}");
    assert!(msg.contains(r#"["a", "1", "b", "2"]"#), "{msg}");
    assert!(msg.contains(r#"["b", "2", "a", "1"]"#), "{msg}");
    assert!(msg.contains("redis#1") && msg.contains("redis#2"), "{msg}");
    let msg = panic_message(|| {
        d.unordered_pairs(&["LRANGE", "l", "0", "-1"]);
    });
    assert!(msg.contains("after sorting pairs"), "{msg}");

    // Type-only and error modes.
    d.strata().ok(&["SET", "r", "1"]);
    d.redis().ok(&["SET", "r", "2"]);
    d.type_only(&["GET", "r"]);
    panic_message(|| {
        d.exact(&["GET", "r"]);
    });
    d.err_prefix(&["LPUSH", "r", "x"]);
    assert!(d.err(&["LPUSH", "r", "x"]).error_code() == Some("WRONGTYPE"));
    let msg = panic_message(|| {
        d.err(&["GET", "r"]);
    });
    assert!(msg.contains("expected both replies to be errors"), "{msg}");

    // Raw bytes: inline command and a pipeline.
    d.send_raw_both(b"PING inline\r\nECHO two\r\n");
    assert_eq!(d.compare_next(Mode::Exact).0, Frame::bulk("inline"));
    assert_eq!(d.compare_next(Mode::Exact).0, Frame::bulk("two"));
    assert_eq!(d.steps(), 42);

    // RESP3: HELLO, the smoke script, then every RESP3 reply type.
    d.hello3();
    smoke_resp3(&mut d);
    for ty in
        ["string", "integer", "double", "bignum", "null", "array", "set", "map", "verbatim", "true", "false", "attrib"]
    {
        d.exact(&["DEBUG", "PROTOCOL", ty]);
    }
    assert_eq!(d.exact(&["DEBUG", "PROTOCOL", "null"]), Frame::Null);
    assert_eq!(d.exact(&["DEBUG", "PROTOCOL", "true"]), Frame::Boolean(true));
    assert_eq!(d.exact(&["DEBUG", "PROTOCOL", "bignum"]).kind(), "big-number");
    assert_eq!(d.exact(&["DEBUG", "PROTOCOL", "double"]).kind(), "double");
    assert_eq!(d.exact(&["DEBUG", "PROTOCOL", "map"]).kind(), "map");
    assert_eq!(d.exact(&["DEBUG", "PROTOCOL", "set"]).kind(), "set");
    assert_eq!(d.exact(&["DEBUG", "PROTOCOL", "verbatim"]).kind(), "verbatim");
    let Frame::Attribute { attrs, reply } = d.exact(&["DEBUG", "PROTOCOL", "attrib"]) else {
        panic!("expected an attribute");
    };
    assert_eq!(attrs.len(), 1);
    assert_eq!(reply.kind(), "bulk");
    // A push frame, then the regular reply that follows it.
    assert_eq!(d.exact(&["DEBUG", "PROTOCOL", "push"]).kind(), "push");
    assert_eq!(d.compare_next(Mode::Exact).0.kind(), "bulk");
    d.unordered(&["HGETALL", "h"]);
    panic_message(|| {
        d.exact(&["HGETALL", "h"]);
    });
    d.finish();
}

#[test]
fn harness_self_check_parser() {
    let nested = Frame::Map(vec![
        (Frame::bulk("k"), Frame::Array(vec![Frame::int(-1), Frame::Nil])),
        (Frame::simple("s"), Frame::Set(vec![Frame::Boolean(false)])),
    ]);
    let frames = [
        Frame::ok(),
        Frame::error("ERR boom"),
        Frame::int(i64::MIN),
        Frame::bulk(""),
        Frame::bulk(b"a\r\n\0b"),
        Frame::Nil,
        Frame::NilArray,
        Frame::Array(vec![]),
        Frame::Null,
        Frame::Boolean(true),
        Frame::Double("-inf".into()),
        Frame::BigNumber("123456789012345678901234567890".into()),
        Frame::BulkError("SYNTAX bad\r\nthing".into()),
        Frame::Verbatim { format: "txt".into(), text: b"hello\r\n".to_vec() },
        Frame::Push(vec![Frame::bulk("message"), nested.clone()]),
        Frame::Attribute { attrs: vec![(Frame::bulk("ttl"), Frame::int(3))], reply: Box::new(nested.clone()) },
        nested,
    ];
    for f in &frames {
        assert_eq!(&parse_bytes(&f.encode()).unwrap(), f, "round trip of {f}");
    }
    // Hand-written wire bytes.
    assert_eq!(
        parse_bytes(b"*3\r\n$1\r\na\r\n:2\r\n*-1\r\n").unwrap(),
        Frame::Array(vec![Frame::bulk("a"), Frame::int(2), Frame::NilArray])
    );
    assert_eq!(
        parse_bytes(b"=8\r\nmkd:# hi\r\n").unwrap(),
        Frame::Verbatim { format: "mkd".into(), text: b"# hi".to_vec() }
    );
    assert_eq!(parse_bytes(b",1.5\r\n").unwrap(), Frame::Double("1.5".into()));
    // Malformed or truncated input is an error, clean EOF is `None`.
    for bad in [&b"$3\r\nab\r\n"[..], b"*2\r\n:1\r\n", b"?x\r\n", b":abc\r\n", b"+OK\n", b"#x\r\n"] {
        assert!(parse_bytes(bad).is_err(), "{:?}", bad.escape_ascii().to_string());
    }
    assert_eq!(read_frame_from(&mut &b""[..]).unwrap(), None);
    assert_eq!(encode_command(&["SET", "k", ""]), b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    assert_eq!(display_command(&[b"SET".as_slice(), b"two words", b"", b"\x00"]), r#"SET "two words" "" "\x00""#);

    // Normalization.
    let a = Frame::Array(vec![Frame::bulk("b"), Frame::Array(vec![Frame::int(2), Frame::int(1)]), Frame::bulk("a")]);
    let b = Frame::Array(vec![Frame::Array(vec![Frame::int(1), Frame::int(2)]), Frame::bulk("a"), Frame::bulk("b")]);
    assert_ne!(a, b);
    assert_eq!(a.sorted(), b.sorted());
    let m1 = Frame::Map(vec![(Frame::bulk("y"), Frame::int(1)), (Frame::bulk("x"), Frame::int(2))]);
    let m2 = Frame::Map(vec![(Frame::bulk("x"), Frame::int(2)), (Frame::bulk("y"), Frame::int(1))]);
    assert_eq!(m1.sorted(), m2.sorted());
    assert_eq!(m1.sorted_pairs(), m2.sorted_pairs());
    let p1 = Frame::bulks(&["f2", "v2", "f1", "v1"]);
    let p2 = Frame::bulks(&["f1", "v1", "f2", "v2"]);
    assert_eq!(p1.sorted_pairs(), p2);
    // Pairs stay together: swapping values must not compare equal.
    assert_ne!(Frame::bulks(&["f1", "v2", "f2", "v1"]).sorted_pairs(), p2.sorted_pairs());

    // Comparison modes.
    let (e1, e2) = (Frame::error("ERR one"), Frame::error("ERR two"));
    assert!(Mode::ErrorPrefix.compare(&e1, &e2).is_ok());
    assert!(Mode::Error.compare(&e1, &e2).is_err());
    assert!(Mode::Error.compare(&e1, &e1.clone()).is_ok());
    assert!(Mode::Error.compare(&Frame::ok(), &Frame::ok()).is_err());
    assert!(Mode::ErrorPrefix.compare(&e1, &Frame::error("WRONGTYPE x")).is_err());
    assert!(Mode::TypeOnly.compare(&Frame::bulk("1"), &Frame::bulk("2")).is_ok());
    assert!(Mode::TypeOnly.compare(&Frame::Nil, &Frame::Null).is_err());
    assert!(Mode::Exact.compare(&Frame::Nil, &Frame::Null).is_err());
    assert!(Mode::Ignore.compare(&Frame::Nil, &e1).is_ok());
}

#[test]
fn harness_self_check_helpers() {
    let server = Server::redis_with(&["--unixsocket", "{dir}/redis.sock"]);
    assert!(server.unixsocket().unwrap().starts_with(server.dir()));
    assert_eq!(server.url(), format!("redis://127.0.0.1:{}/", server.port()));
    assert!(server.pid() > 0);

    // Unix socket and pipelining.
    let mut unix = server.conn_unix();
    let replies = unix.pipeline(&[&["SET", "a", "1"], &["INCRBY", "a", "2"], &["GET", "a"]]);
    assert_eq!(replies, [Frame::ok(), Frame::int(3), Frame::bulk("3")]);

    // INFO helpers.
    let mut conn = server.conn();
    let used: u64 = info_field(&mut conn, "used_memory").expect("used_memory").parse().unwrap();
    assert!(used > 0);
    assert_eq!(info_field(&mut conn, "no_such_field"), None);
    conn.hello3();
    assert!(info_field(&mut conn, "redis_version").is_some());

    // redis-cli and the redis crate.
    let (out, status) = redis_cli(server.port(), &["GET", "a"]);
    assert!(status.success());
    assert_eq!(out.trim(), "3");
    let mut client = server.redis_client().get_connection().unwrap();
    let v: i64 = redis::cmd("GET").arg("a").query(&mut client).unwrap();
    assert_eq!(v, 3);

    // EOF detection.
    assert_eq!(conn.cmd(&["QUIT"]), Frame::ok());
    assert_eq!(conn.try_read_frame().unwrap(), None);
    let mut conn = server.conn();
    conn.send(&["QUIT"]);
    conn.read_frame();
    assert!(conn.is_closed());

    // Timeouts surface as errors rather than hangs.
    let mut idle = server.conn();
    idle.set_timeout(Some(Duration::from_millis(50)));
    let err = idle.try_read_frame().unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);

    // A side that hangs up is reported with both servers' logs.
    let mut d = redis_pair();
    d.redis().ok(&["QUIT"]);
    let msg = panic_message(|| {
        d.exact(&["PING"]);
    });
    assert!(msg.contains("no reply"), "{msg}");
    assert!(msg.contains("redis#2 : <connection closed"), "{msg}");
    assert!(msg.contains("=== redis#1 (running) ==="), "{msg}");

    // Graceful termination.
    let mut server = server;
    assert!(server.is_running());
    assert!(server.terminate(Duration::from_secs(10)).is_some());
    assert!(!server.is_running());
}
