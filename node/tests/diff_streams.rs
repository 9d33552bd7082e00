//! Differential tests (strata vs redis) for streams: XADD (IDs, NOMKSTREAM,
//! trimming), XRANGE/XREVRANGE, XLEN, XDEL, XTRIM, XSETID, XREAD and
//! XREADGROUP (blocking across workers too), consumer groups (XGROUP, XACK,
//! XPENDING, XCLAIM, XAUTOCLAIM), XINFO in RESP2 and RESP3, errors, and
//! DUMP/RESTORE of streams in both directions.

mod support;

use std::time::Duration;
use support::*;

const LIMIT: Duration = Duration::from_secs(20);

/// Replaces the values of time-dependent or layout-dependent fields
/// (idle, seen-time, delivery times, radix-tree-nodes) wherever they
/// appear as a key/value pair in maps or flat RESP2 arrays.
fn mask(f: &Frame) -> Frame {
    const MASKED: &[&[u8]] = &[b"idle", b"seen-time", b"radix-tree-nodes"];
    match f {
        Frame::Array(items) => {
            let mut out: Vec<Frame> = items.iter().map(mask).collect();
            let mut i = 0;
            while i + 1 < out.len() {
                if out[i].as_bytes().is_some_and(|k| MASKED.contains(&k)) {
                    out[i + 1] = Frame::Integer(0);
                }
                i += 1;
            }
            // Pending rows of XINFO FULL: [id, consumer, delivery-time, count]
            // and [id, delivery-time, count].
            if let [Frame::Bulk(id), rest @ ..] = out.as_slice()
                && id.contains(&b'-')
                && matches!(
                    rest,
                    [Frame::Bulk(_), Frame::Integer(_), Frame::Integer(_)] | [Frame::Integer(_), Frame::Integer(_)]
                )
            {
                let t = out.len() - 2;
                out[t] = Frame::Integer(0);
            }
            Frame::Array(out)
        }
        Frame::Map(pairs) => Frame::Map(
            pairs
                .iter()
                .map(|(k, v)| {
                    let masked = k.as_bytes().is_some_and(|k| MASKED.contains(&k));
                    (mask(k), if masked { Frame::Integer(0) } else { mask(v) })
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

fn masked(d: &mut Diff, args: &[&str]) {
    d.check(args, |a, b| if mask(a) == mask(b) { Ok(()) } else { Err("replies differ after masking times".into()) });
}

#[test]
fn xadd_ids_and_errors() {
    let mut d = Diff::new();
    d.exact(&["XADD", "s", "1-1", "a", "1"]);
    d.exact(&["XADD", "s", "1-*", "b", "2"]);
    d.exact(&["XADD", "s", "5-*", "c", "3"]);
    d.err(&["XADD", "s", "5", "c", "3"]);
    d.exact(&["XADD", "s", "5-1", "c", "3"]);
    d.err(&["XADD", "s", "5-1", "c", "3"]);
    d.err(&["XADD", "s", "4-9", "c", "3"]);
    d.err(&["XADD", "s", "0-0", "c", "3"]);
    d.err(&["XADD", "new", "0-0", "c", "3"]);
    d.exact(&["EXISTS", "new"]);
    d.exact(&["XADD", "zero", "0-*", "c", "3"]);
    d.err(&["XADD", "s", "abc", "c", "3"]);
    d.err(&["XADD", "s", "1-2-3", "c", "3"]);
    d.err(&["XADD", "s", "-1", "c", "3"]);
    d.err(&["XADD", "s", "+", "c", "3"]);
    d.err(&["XADD", "s", "*", "c"]);
    d.err(&["XADD", "s", "*", "c", "3", "d"]);
    d.err(&["XADD", "s", "NOMKSTREAM"]);
    d.exact(&["XADD", "nokey", "NOMKSTREAM", "*", "a", "1"]);
    d.exact(&["EXISTS", "nokey"]);
    d.exact(&["XADD", "s", "NOMKSTREAM", "10-0", "a", "1"]);
    d.exact(&["XADD", "s", "18446744073709551615-18446744073709551615", "a", "1"]);
    d.err(&["XADD", "s", "*", "a", "1"]);
    d.err(&["XADD", "s", "18446744073709551615-*", "a", "1"]);
    d.exact(&["XLEN", "s"]);
    d.exact(&["XLEN", "nosuch"]);
    d.exact(&["SET", "str", "x"]);
    d.err(&["XADD", "str", "*", "a", "1"]);
    d.err(&["XLEN", "str"]);
    d.err(&["XRANGE", "str", "-", "+"]);
    d.err(&["XREAD", "STREAMS", "str", "0"]);
    d.exact(&["TYPE", "s"]);
    d.exact(&["OBJECT", "ENCODING", "s"]);
    d.type_only(&["MEMORY", "USAGE", "s"]);
    d.err(&["XADD", "s", "MAXLEN", "-1", "*", "a", "1"]);
    d.err(&["XADD", "s", "MAXLEN", "x", "*", "a", "1"]);
    d.err(&["XADD", "s", "MAXLEN", "1", "MINID", "1", "*", "a", "1"]);
    d.err(&["XADD", "s", "LIMIT", "10", "*", "a", "1"]);
    d.err(&["XADD", "s", "MAXLEN", "1", "LIMIT", "10", "*", "a", "1"]);
    d.err(&["XADD", "s", "MAXLEN", "~", "1", "LIMIT", "-1", "*", "a", "1"]);
    // The auto ID is time-based: only its shape can be compared.
    d.type_only(&["XADD", "auto", "*", "a", "1"]);
    d.finish();
}

#[test]
fn ranges_and_counts() {
    for resp3 in [false, true] {
        let mut d = if resp3 { Diff::new_resp3() } else { Diff::new() };
        for i in 1..=20 {
            let id = format!("{}-{}", i / 3, i);
            d.exact(&["XADD", "s", &id, "f", &i.to_string(), "g", "x"]);
        }
        d.exact(&["XADD", "s", "100-0", "other", "v"]);
        for (a, b) in [("-", "+"), ("1", "3"), ("(1-3", "5"), ("2", "(4-13"), ("-", "(0-2"), ("(6-20", "+"), ("5", "1")]
        {
            d.exact(&["XRANGE", "s", a, b]);
            d.exact(&["XREVRANGE", "s", b, a]);
            d.exact(&["XRANGE", "s", a, b, "COUNT", "3"]);
            d.exact(&["XREVRANGE", "s", b, a, "COUNT", "2"]);
        }
        d.exact(&["XRANGE", "s", "-", "+", "COUNT", "0"]);
        d.exact(&["XRANGE", "s", "-", "+", "COUNT", "-5"]);
        d.exact(&["XRANGE", "nosuch", "-", "+"]);
        d.exact(&["XRANGE", "nosuch", "-", "+", "COUNT", "0"]);
        d.err(&["XRANGE", "s", "-", "+", "COUNT"]);
        d.err(&["XRANGE", "s", "-", "+", "COUNT", "x"]);
        d.err(&["XRANGE", "s", "-", "+", "LIMIT", "1"]);
        d.err(&["XRANGE", "s", "(-", "+"]);
        d.err(&["XRANGE", "s", "-", "(+"]);
        d.err(&["XRANGE", "s", "(18446744073709551615-18446744073709551615", "+"]);
        d.err(&["XRANGE", "s", "-", "(0-0"]);
        d.err(&["XRANGE", "s", "x", "+"]);
        d.exact(&["XRANGE", "s", "(", "+"]);
        d.finish();
    }
}

#[test]
fn delete_trim_and_setid() {
    let mut d = Diff::new();
    d.both(&["CONFIG", "SET", "stream-node-max-entries", "10"]);
    for i in 1..=95 {
        d.exact(&["XADD", "s", &format!("{i}-0"), "f", "v"]);
    }
    d.exact(&["XDEL", "s", "1-0", "5", "5", "999"]);
    d.err(&["XDEL", "s", "1-0", "bad"]);
    d.exact(&["XDEL", "nosuch", "1"]);
    masked(&mut d, &["XINFO", "STREAM", "s"]);
    d.exact(&["XTRIM", "s", "MAXLEN", "~", "50"]);
    d.exact(&["XLEN", "s"]);
    d.exact(&["XTRIM", "s", "MAXLEN", "=", "60"]);
    d.exact(&["XTRIM", "s", "MAXLEN", "45"]);
    d.exact(&["XTRIM", "s", "MINID", "~", "70"]);
    d.exact(&["XTRIM", "s", "MINID", "72"]);
    d.exact(&["XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "5"]);
    d.exact(&["XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "10"]);
    d.exact(&["XRANGE", "s", "-", "(80"]);
    d.err(&["XTRIM", "s"]);
    d.err(&["XTRIM", "s", "FOO", "1"]);
    d.err(&["XTRIM", "s", "MAXLEN", "1", "LIMIT", "5"]);
    d.err(&["XTRIM", "s", "MAXLEN", "1", "extra"]);
    d.exact(&["XTRIM", "nosuch", "MAXLEN", "1"]);
    d.exact(&["XADD", "s", "MAXLEN", "3", "200-0", "a", "b"]);
    d.exact(&["XADD", "s", "MINID", "=", "200", "201-0", "a", "b"]);
    d.exact(&["XRANGE", "s", "-", "+"]);
    masked(&mut d, &["XINFO", "STREAM", "s"]);
    // XSETID
    d.err(&["XSETID", "nosuch", "1"]);
    d.err(&["XSETID", "s", "1"]);
    d.exact(&["XSETID", "s", "300", "ENTRIESADDED", "500", "MAXDELETEDID", "250"]);
    d.err(&["XSETID", "s", "400", "ENTRIESADDED", "1"]);
    d.err(&["XSETID", "s", "400", "ENTRIESADDED", "-1"]);
    d.err(&["XSETID", "s", "400", "MAXDELETEDID", "500"]);
    d.exact(&["XSETID", "s", "249"]);
    d.err(&["XSETID", "s", "400", "0"]);
    d.err(&["XSETID", "s", "400", "ENTRIESADDED"]);
    masked(&mut d, &["XINFO", "STREAM", "s"]);
    d.exact(&["XADD", "e", "1", "a", "b"]);
    d.exact(&["XDEL", "e", "1"]);
    d.exact(&["XLEN", "e"]);
    d.exact(&["EXISTS", "e"]);
    masked(&mut d, &["XINFO", "STREAM", "e"]);
    d.finish();
}

#[test]
fn xread_forms() {
    for resp3 in [false, true] {
        let mut d = if resp3 { Diff::new_resp3() } else { Diff::new() };
        for i in 1..=5 {
            d.exact(&["XADD", "a", &format!("{i}-0"), "x", &i.to_string()]);
            d.exact(&["XADD", "b", &format!("{i}-1"), "y", &i.to_string()]);
        }
        d.exact(&["XREAD", "STREAMS", "a", "b", "0", "0"]);
        d.exact(&["XREAD", "COUNT", "2", "STREAMS", "a", "b", "2", "4-1"]);
        d.exact(&["XREAD", "STREAMS", "a", "b", "$", "$"]);
        d.exact(&["XREAD", "STREAMS", "a", "nosuch", "5", "0"]);
        d.exact(&["XREAD", "STREAMS", "a", "a", "3", "4"]);
        d.exact(&["XREAD", "BLOCK", "10", "STREAMS", "a", "$"]);
        d.err(&["XREAD", "STREAMS", "a", "b", "0"]);
        d.err(&["XREAD", "STREAMS", "a", ">"]);
        d.err(&["XREAD", "GROUP", "g", "c", "STREAMS", "a", "0"]);
        d.err(&["XREAD", "NOACK", "STREAMS", "a", "0"]);
        d.err(&["XREAD", "BLOCK", "-1", "STREAMS", "a", "0"]);
        d.err(&["XREAD", "BLOCK", "x", "STREAMS", "a", "0"]);
        d.err(&["XREAD", "COUNT", "x", "STREAMS", "a", "0"]);
        d.err(&["XREAD", "FOO", "STREAMS", "a", "0"]);
        d.err(&["XREAD", "COUNT", "1", "a", "0"]);
        d.err(&["XREAD", "STREAMS", "a", "bad"]);
        // Inside MULTI a BLOCK that cannot be served replies at once.
        d.exact(&["MULTI"]);
        d.exact(&["XREAD", "BLOCK", "0", "STREAMS", "a", "$"]);
        d.exact(&["XADD", "a", "9-0", "z", "z"]);
        d.exact(&["EXEC"]);
        d.finish();
    }
}

#[test]
fn groups_read_ack_pending() {
    for resp3 in [false, true] {
        let mut d = if resp3 { Diff::new_resp3() } else { Diff::new() };
        for i in 1..=6 {
            d.exact(&["XADD", "s", &format!("{i}-0"), "f", &i.to_string()]);
        }
        d.err(&["XGROUP", "CREATE", "nosuch", "g", "$"]);
        d.exact(&["XGROUP", "CREATE", "mk", "g", "$", "MKSTREAM"]);
        d.exact(&["XGROUP", "CREATE", "s", "g", "0"]);
        d.err(&["XGROUP", "CREATE", "s", "g", "0"]);
        d.exact(&["XGROUP", "CREATE", "s", "g2", "$", "ENTRIESREAD", "6"]);
        d.err(&["XGROUP", "CREATE", "s", "g3", "$", "ENTRIESREAD", "-5"]);
        d.err(&["XGROUP", "CREATE", "s", "g3", "$", "FOO"]);
        d.err(&["XGROUP", "CREATE", "s", "g3", "bad"]);
        d.err(&["XGROUP", "CREATE", "s", "g3"]);
        d.err(&["XGROUP", "FOO", "s", "g3"]);
        d.exact(&["XGROUP", "CREATECONSUMER", "s", "g", "alice"]);
        d.exact(&["XGROUP", "CREATECONSUMER", "s", "g", "alice"]);
        d.err(&["XGROUP", "CREATECONSUMER", "s", "nog", "alice"]);
        d.err(&["XGROUP", "SETID", "s", "nog", "0"]);
        d.exact(&["XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"]);
        d.exact(&["XREADGROUP", "GROUP", "g", "bob", "COUNT", "2", "STREAMS", "s", ">"]);
        d.exact(&["XREADGROUP", "GROUP", "g", "bob", "NOACK", "COUNT", "1", "STREAMS", "s", ">"]);
        d.exact(&["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"]);
        d.exact(&["XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", "1-0"]);
        d.exact(&["XREADGROUP", "GROUP", "g", "carol", "STREAMS", "s", "0"]);
        d.err(&["XREADGROUP", "GROUP", "nog", "alice", "STREAMS", "s", ">"]);
        d.err(&["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "nosuch", ">"]);
        d.err(&["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "$"]);
        d.err(&["XREADGROUP", "STREAMS", "s", ">"]);
        d.err(&["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s"]);
        masked(&mut d, &["XPENDING", "s", "g"]);
        masked(&mut d, &["XPENDING", "s", "g", "-", "+", "10"]);
        masked(&mut d, &["XPENDING", "s", "g", "-", "+", "10", "bob"]);
        masked(&mut d, &["XPENDING", "s", "g", "(1-0", "+", "1"]);
        masked(&mut d, &["XPENDING", "s", "g", "-", "+", "10", "nobody"]);
        masked(&mut d, &["XPENDING", "s", "g", "IDLE", "0", "-", "+", "10"]);
        d.exact(&["XPENDING", "s", "g", "IDLE", "100000", "-", "+", "10"]);
        d.exact(&["XPENDING", "s", "g2"]);
        d.err(&["XPENDING", "s", "nog"]);
        d.err(&["XPENDING", "nosuch", "g"]);
        d.err(&["XPENDING", "s", "g", "-", "+"]);
        d.err(&["XPENDING", "s", "g", "IDLE", "5", "-", "+"]);
        d.err(&["XPENDING", "s", "g", "-", "+", "x"]);
        d.exact(&["XACK", "s", "g", "1-0", "1-0", "9-9"]);
        d.err(&["XACK", "s", "g", "2-0", "bad"]);
        d.exact(&["XACK", "s", "nog", "2-0"]);
        d.exact(&["XACK", "nosuch", "g", "2-0"]);
        masked(&mut d, &["XPENDING", "s", "g"]);
        masked(&mut d, &["XINFO", "GROUPS", "s"]);
        masked(&mut d, &["XINFO", "CONSUMERS", "s", "g"]);
        d.err(&["XINFO", "CONSUMERS", "s", "nog"]);
        d.err(&["XINFO", "GROUPS", "nosuch"]);
        masked(&mut d, &["XINFO", "STREAM", "s"]);
        masked(&mut d, &["XINFO", "STREAM", "s", "FULL"]);
        masked(&mut d, &["XINFO", "STREAM", "s", "FULL", "COUNT", "1"]);
        d.err(&["XINFO", "STREAM", "s", "FOO"]);
        d.err(&["XINFO", "STREAM", "s", "FULL", "COUNT"]);
        d.err(&["XINFO", "FOO", "s"]);
        d.exact(&["XINFO", "HELP"]);
        d.exact(&["XGROUP", "HELP"]);
        d.exact(&["XGROUP", "DELCONSUMER", "s", "g", "bob"]);
        d.exact(&["XGROUP", "DELCONSUMER", "s", "g", "bob"]);
        d.exact(&["XGROUP", "SETID", "s", "g", "$"]);
        d.exact(&["XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "0"]);
        d.err(&["XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "x"]);
        masked(&mut d, &["XINFO", "GROUPS", "s"]);
        d.exact(&["XDEL", "s", "3-0"]);
        masked(&mut d, &["XINFO", "GROUPS", "s"]);
        d.exact(&["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"]);
        masked(&mut d, &["XINFO", "GROUPS", "s"]);
        d.exact(&["XGROUP", "DESTROY", "s", "g"]);
        d.exact(&["XGROUP", "DESTROY", "s", "g"]);
        d.finish();
    }
}

#[test]
fn claims() {
    let mut d = Diff::new();
    for i in 1..=8 {
        d.exact(&["XADD", "s", &format!("{i}-0"), "f", &i.to_string()]);
    }
    d.exact(&["XGROUP", "CREATE", "s", "g", "0"]);
    d.exact(&["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"]);
    d.exact(&["XDEL", "s", "2-0", "6-0"]);
    d.exact(&["XCLAIM", "s", "g", "bob", "0", "1-0", "2-0", "3-0"]);
    d.exact(&["XCLAIM", "s", "g", "bob", "0", "1-0", "JUSTID"]);
    d.exact(&["XCLAIM", "s", "g", "bob", "100000", "4-0"]);
    d.exact(&["XCLAIM", "s", "g", "carol", "0", "4-0", "RETRYCOUNT", "7", "IDLE", "5000", "JUSTID"]);
    d.exact(&["XCLAIM", "s", "g", "carol", "0", "9-0", "FORCE"]);
    d.exact(&["XADD", "s", "9-0", "f", "9"]);
    d.exact(&["XCLAIM", "s", "g", "carol", "0", "9-0", "FORCE"]);
    d.exact(&["XCLAIM", "s", "g", "carol", "0", "5-0", "TIME", "1", "LASTID", "20-0"]);
    masked(&mut d, &["XPENDING", "s", "g", "-", "+", "20"]);
    masked(&mut d, &["XINFO", "GROUPS", "s"]);
    d.err(&["XCLAIM", "s", "g", "bob", "x", "1-0"]);
    d.err(&["XCLAIM", "s", "g", "bob", "0", "1-0", "FOO"]);
    d.err(&["XCLAIM", "s", "g", "bob", "0", "1-0", "IDLE", "x"]);
    d.err(&["XCLAIM", "s", "g", "bob", "0", "1-0", "RETRYCOUNT", "x"]);
    d.err(&["XCLAIM", "s", "g", "bob", "0", "1-0", "LASTID", "x"]);
    d.err(&["XCLAIM", "s", "nog", "bob", "0", "1-0"]);
    d.err(&["XCLAIM", "nosuch", "g", "bob", "0", "1-0"]);
    // XAUTOCLAIM
    d.exact(&["XDEL", "s", "7-0"]);
    d.exact(&["XAUTOCLAIM", "s", "g", "dave", "0", "0", "COUNT", "2"]);
    d.exact(&["XAUTOCLAIM", "s", "g", "dave", "0", "(3-0", "COUNT", "2", "JUSTID"]);
    d.exact(&["XAUTOCLAIM", "s", "g", "dave", "0", "0"]);
    d.exact(&["XAUTOCLAIM", "s", "g", "dave", "100000", "0"]);
    d.err(&["XAUTOCLAIM", "s", "g", "dave", "0", "0", "COUNT", "0"]);
    d.err(&["XAUTOCLAIM", "s", "g", "dave", "0", "0", "COUNT", "8070450532247928833"]);
    d.err(&["XAUTOCLAIM", "s", "g", "dave", "x", "0"]);
    d.err(&["XAUTOCLAIM", "s", "g", "dave", "0", "bad"]);
    d.err(&["XAUTOCLAIM", "s", "g", "dave", "0", "0", "FOO"]);
    d.err(&["XAUTOCLAIM", "s", "nog", "dave", "0", "0"]);
    d.err(&["XAUTOCLAIM", "nosuch", "g", "dave", "0", "0"]);
    masked(&mut d, &["XPENDING", "s", "g", "-", "+", "20"]);
    masked(&mut d, &["XINFO", "STREAM", "s", "FULL"]);
    d.finish();
}

#[test]
fn command_metadata_and_scripts() {
    let mut d = Diff::new();
    for c in ["xadd", "xread", "xreadgroup", "xgroup", "xinfo", "xautoclaim", "xsetid", "xtrim"] {
        d.check(&["COMMAND", "INFO", c], |a, b| {
            // Key specs and tips are not modelled; compare name, arity,
            // flags, legacy key range and ACL categories.
            let head =
                |f: &Frame| f.as_array().and_then(|a| a.first()).and_then(|c| c.as_array()).map(|c| c[..7].to_vec());
            if head(a) == head(b) { Ok(()) } else { Err("command info differs".into()) }
        });
    }
    d.exact(&["COMMAND", "GETKEYS", "XREAD", "COUNT", "1", "STREAMS", "a", "b", "0", "0"]);
    d.exact(&["COMMAND", "GETKEYS", "XREADGROUP", "GROUP", "g", "c", "STREAMS", "a", ">"]);
    d.exact(&["COMMAND", "GETKEYS", "XADD", "s", "*", "a", "1"]);
    d.exact(&["EVAL", "return redis.call('XADD', KEYS[1], '1-1', 'a', 'b')", "1", "s"]);
    d.exact(&["EVAL", "return redis.call('XRANGE', KEYS[1], '-', '+')", "1", "s"]);
    d.exact(&["EVAL", "return redis.call('XLEN', KEYS[1])", "1", "s"]);
    d.exact(&["EVAL", "return redis.call('XREAD', 'STREAMS', KEYS[1], '0')", "1", "s"]);
    d.err(&["EVAL", "return redis.pcall('XREAD', 'BLOCK', 0, 'STREAMS', KEYS[1], '$')", "1", "s"]);
    d.err(&[
        "EVAL",
        "return redis.pcall('xreadgroup', 'GROUP', 'g', 'c', 'BLOCK', 0, 'STREAMS', KEYS[1], '>')",
        "1",
        "s",
    ]);
    d.finish();
}

#[test]
fn dump_restore_both_ways() {
    let mut d = Diff::new();
    d.both(&["CONFIG", "SET", "stream-node-max-entries", "4"]);
    for i in 1..=11 {
        let id = format!("{i}-{i}");
        if i % 3 == 0 {
            d.exact(&["XADD", "s", &id, "other", "x", "n", &(i * 1000).to_string()]);
        } else {
            d.exact(&["XADD", "s", &id, "f", &i.to_string(), "g", "a longer value that is not an integer"]);
        }
    }
    d.exact(&["XDEL", "s", "2-2", "7-7"]);
    d.exact(&["XGROUP", "CREATE", "s", "g", "0"]);
    d.exact(&["XGROUP", "CREATE", "s", "h", "$"]);
    d.exact(&["XREADGROUP", "GROUP", "g", "alice", "COUNT", "3", "STREAMS", "s", ">"]);
    d.exact(&["XREADGROUP", "GROUP", "g", "bob", "COUNT", "2", "STREAMS", "s", ">"]);
    d.exact(&["XGROUP", "CREATECONSUMER", "s", "g", "lazy"]);
    d.exact(&["XADD", "empty", "1-1", "a", "b"]);
    d.exact(&["XDEL", "empty", "1-1"]);
    for key in ["s", "empty"] {
        let from_redis = d.redis().cmd(&["DUMP", key]);
        let from_strata = d.strata().cmd(&["DUMP", key]);
        let (Some(from_redis), Some(from_strata)) = (from_redis.as_bytes(), from_strata.as_bytes()) else {
            panic!("DUMP must return payloads");
        };
        let (from_redis, from_strata) = (from_redis.to_vec(), from_strata.to_vec());
        let copy = format!("{key}-copy");
        // Each side restores the other's payload.
        assert_eq!(d.strata().cmd(&[b"RESTORE".as_slice(), copy.as_bytes(), b"0", &from_redis]), Frame::ok());
        assert_eq!(d.redis().cmd(&[b"RESTORE".as_slice(), copy.as_bytes(), b"0", &from_strata]), Frame::ok());
        d.exact(&["XRANGE", &copy, "-", "+"]);
        masked(&mut d, &["XINFO", "STREAM", &copy, "FULL"]);
        masked(&mut d, &["XINFO", "GROUPS", &copy]);
        d.exact(&["XREADGROUP", "GROUP", "g", "carol", "STREAMS", &copy, ">"]);
    }
    // A corrupt payload is refused.
    let mut bad = d.strata().cmd(&["DUMP", "s"]).as_bytes().unwrap().to_vec();
    let n = bad.len();
    bad[n / 2] ^= 0x55;
    let r = d.strata().cmd(&[b"RESTORE".as_slice(), b"bad", b"0", &bad]);
    assert!(r.is_error(), "{r}");
    d.finish();
}

/// One client connected to both servers of a [`Diff`].
struct Twin {
    strata: RawConn,
    redis: RawConn,
}

impl Twin {
    fn open(d: &mut Diff) -> Twin {
        let mut strata = d.strata_server().expect("owned").conn();
        let mut redis = d.redis_server().expect("owned").conn();
        strata.set_timeout(Some(LIMIT));
        redis.set_timeout(Some(LIMIT));
        Twin { strata, redis }
    }

    fn send(&mut self, args: &[&str]) {
        self.strata.send(args);
        self.redis.send(args);
    }

    fn reply(&mut self) -> Frame {
        let (a, b) = (self.strata.read_frame(), self.redis.read_frame());
        assert_eq!(a, b, "strata (left) and redis (right) disagree");
        a
    }
}

fn wait_blocked(d: &mut Diff, n: usize) {
    let want = n.to_string();
    assert!(wait_for(LIMIT, || info_field(d.strata(), "blocked_clients").as_deref() == Some(want.as_str())));
    assert!(wait_for(LIMIT, || info_field(d.redis(), "blocked_clients").as_deref() == Some(want.as_str())));
}

#[test]
fn blocking_reads_across_workers() {
    let strata = Server::strata_with(&["--threads", "4", "--adaptive-threads", "no"]);
    let mut d = Diff::with_servers(strata, Server::redis());
    d.exact(&["XADD", "s", "1-0", "f", "v"]);
    d.exact(&["XGROUP", "CREATE", "s", "g", "$"]);
    // Several readers on different connections (so different workers).
    let mut plain = Twin::open(&mut d);
    let mut group1 = Twin::open(&mut d);
    let mut group2 = Twin::open(&mut d);
    plain.send(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    wait_blocked(&mut d, 1);
    group1.send(&["XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS", "s", ">"]);
    wait_blocked(&mut d, 2);
    group2.send(&["XREADGROUP", "GROUP", "g", "c2", "BLOCK", "0", "STREAMS", "s", ">"]);
    wait_blocked(&mut d, 3);
    d.exact(&["XADD", "s", "2-0", "f", "v2"]);
    let r = plain.reply();
    assert_eq!(r.to_string().matches("2-0").count(), 1, "{r}");
    let r = group1.reply();
    assert!(r.to_string().contains("2-0"), "{r}");
    // The first group reader took the entry: the second one waits on.
    wait_blocked(&mut d, 1);
    d.exact(&["XADD", "s", "3-0", "f", "v3"]);
    let r = group2.reply();
    assert!(r.to_string().contains("3-0"), "{r}");
    masked(&mut d, &["XPENDING", "s", "g", "-", "+", "10"]);

    // Deleting the key or the group answers blocked group readers with an error.
    group1.send(&["XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS", "s", ">"]);
    wait_blocked(&mut d, 1);
    d.exact(&["XGROUP", "DESTROY", "s", "g"]);
    assert!(group1.reply().is_error());
    d.exact(&["XGROUP", "CREATE", "s", "g", "$"]);
    group1.send(&["XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS", "s", ">"]);
    wait_blocked(&mut d, 1);
    d.exact(&["DEL", "s"]);
    assert!(group1.reply().is_error());
    d.exact(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    group1.send(&["XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS", "s", ">"]);
    wait_blocked(&mut d, 1);
    d.exact(&["SET", "s", "string now"]);
    assert!(group1.reply().is_error());
    // A plain reader survives DEL and type changes, and keeps its ID.
    d.exact(&["DEL", "s"]);
    d.exact(&["XADD", "s", "10-0", "f", "v"]);
    plain.send(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    wait_blocked(&mut d, 1);
    d.exact(&["DEL", "s"]);
    d.exact(&["LPUSH", "s", "x"]);
    d.exact(&["DEL", "s"]);
    d.exact(&["XADD", "s", "5-0", "f", "old"]);
    d.exact(&["XADD", "s", "11-0", "f", "new"]);
    let r = plain.reply();
    assert!(r.to_string().contains("11-0") && !r.to_string().contains("5-0"), "{r}");
    // Timeouts reply with a null array.
    plain.send(&["XREAD", "BLOCK", "50", "STREAMS", "s", "$"]);
    assert_eq!(plain.reply(), Frame::NilArray);
    d.finish();
}
