//! Scripts are atomic with respect to every client on every worker: a
//! read-modify-write in Lua (GET, compute, SET — not INCR) run by many
//! connections at once never loses an update, and a script touching keys
//! it did not declare is atomic too.

mod support;

use std::thread;
use support::*;

#[test]
fn lua_read_modify_write_never_interleaves() {
    let server = Server::strata_with(&["--threads", "2", "--adaptive-threads", "no"]);
    let clients = 6;
    let per_client = 300;
    let script = "local v = tonumber(redis.call('get', KEYS[1]) or '0') \
                  for i = 1, 200 do end \
                  redis.call('set', KEYS[1], v + 1) \
                  local w = tonumber(redis.call('get', 'undeclared') or '0') \
                  redis.call('set', 'undeclared', w + 1) \
                  return v + 1";
    let handles: Vec<_> = (0..clients)
        .map(|i| {
            let mut c = server.conn();
            let script = script.to_string();
            thread::spawn(move || {
                let mut seen = Vec::new();
                for n in 0..per_client {
                    // Alternate EVAL and EVALSHA, and mix in plain INCRs from
                    // the same connections on another key.
                    let reply = if n % 2 == 0 {
                        c.cmd(&["EVAL", &script, "1", "counter"])
                    } else {
                        c.cmd(&["INCR", &format!("other{i}")]);
                        c.cmd(&["EVAL", &script, "1", "counter"])
                    };
                    match reply {
                        Frame::Integer(v) => seen.push(v),
                        other => panic!("{other:?}"),
                    }
                }
                seen
            })
        })
        .collect();
    let mut all: Vec<i64> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    all.sort_unstable();
    let total = (clients * per_client) as i64;
    // Every script saw a distinct value: none ran interleaved with another.
    assert_eq!(all, (1..=total).collect::<Vec<_>>());
    let mut c = server.conn();
    assert_eq!(c.cmd(&["GET", "counter"]), Frame::bulk(total.to_string()));
    assert_eq!(c.cmd(&["GET", "undeclared"]), Frame::bulk(total.to_string()));
}

#[test]
fn scripts_and_transactions_see_each_other_whole() {
    // A script moves units between two keys; a concurrent MULTI/EXEC reader
    // must always see the total unchanged.
    let server = Server::strata_with(&["--threads", "2", "--adaptive-threads", "no"]);
    let mut setup = server.conn();
    setup.cmd(&["MSET", "{a}x", "500", "{b}y", "500"]);
    let mover = {
        let mut c = server.conn();
        thread::spawn(move || {
            for i in 0..1000 {
                let (from, to) = if i % 2 == 0 { ("{a}x", "{b}y") } else { ("{b}y", "{a}x") };
                let r = c.cmd(&[
                    "EVAL",
                    "redis.call('decrby', KEYS[1], 7) redis.call('incrby', KEYS[2], 7) return 1",
                    "2",
                    from,
                    to,
                ]);
                assert_eq!(r, Frame::Integer(1));
            }
        })
    };
    let mut reader = server.conn();
    for _ in 0..500 {
        reader.cmd(&["MULTI"]);
        reader.cmd(&["GET", "{a}x"]);
        reader.cmd(&["GET", "{b}y"]);
        let Frame::Array(v) = reader.cmd(&["EXEC"]) else { panic!() };
        let n = |f: &Frame| match f {
            Frame::Bulk(b) => String::from_utf8_lossy(b).parse::<i64>().unwrap(),
            other => panic!("{other:?}"),
        };
        assert_eq!(n(&v[0]) + n(&v[1]), 1000);
    }
    mover.join().unwrap();
}
