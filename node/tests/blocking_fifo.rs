//! Blocked clients are served by the push itself, first blocked first
//! served, as in Redis 7: the pushing command (or EXEC) hands its elements to
//! the waiters before any other client runs a command, so nobody else sees
//! them. Every scenario runs on strata and on redis-server side by side;
//! each reply must match between the two and the expected value.

mod support;

use std::time::Duration;
use support::*;

/// Upper bound for any single wait in these tests.
const LIMIT: Duration = Duration::from_secs(20);

/// One client connected to both servers of a [`Diff`].
struct Twin {
    strata: RawConn,
    redis: RawConn,
}

impl Twin {
    fn open(d: &mut Diff) -> Twin {
        let mut strata = d.strata_server().expect("diff owns its servers").conn();
        let mut redis = d.redis_server().expect("diff owns its servers").conn();
        strata.set_timeout(Some(LIMIT));
        redis.set_timeout(Some(LIMIT));
        Twin { strata, redis }
    }

    fn send(&mut self, args: &[&str]) {
        self.strata.send(args);
        self.redis.send(args);
    }

    /// The next reply on both sides; they must be identical.
    fn reply(&mut self) -> Frame {
        let (a, b) = (self.strata.read_frame(), self.redis.read_frame());
        assert_eq!(a, b, "strata (left) and redis (right) disagree");
        a
    }

    fn cmd(&mut self, args: &[&str]) -> Frame {
        self.send(args);
        self.reply()
    }
}

/// Waits until both servers count `n` blocked clients.
fn wait_blocked(d: &mut Diff, n: usize) {
    let want = n.to_string();
    let strata_ok = wait_for(LIMIT, || info_field(d.strata(), "blocked_clients").as_deref() == Some(want.as_str()));
    assert!(strata_ok, "strata never reported {n} blocked clients");
    let redis_ok = wait_for(LIMIT, || info_field(d.redis(), "blocked_clients").as_deref() == Some(want.as_str()));
    assert!(redis_ok, "redis never reported {n} blocked clients");
}

/// Sends `cmd` on `client` and waits until it is the `nth` blocked client.
fn block(d: &mut Diff, client: &mut Twin, cmd: &[&str], nth: usize) {
    client.send(cmd);
    wait_blocked(d, nth);
}

/// Opens `cmds.len()` clients and blocks them one after the other, each
/// only once the previous one is known to be blocked, so their order is the
/// order they blocked in. No client may be blocked before.
fn block_in_order(d: &mut Diff, cmds: &[&[&str]]) -> Vec<Twin> {
    let mut clients = Vec::new();
    for (i, cmd) in cmds.iter().enumerate() {
        let mut c = Twin::open(d);
        block(d, &mut c, cmd, i + 1);
        clients.push(c);
    }
    clients
}

fn kv(key: &str, value: &str) -> Frame {
    Frame::bulks(&[key, value])
}

#[test]
fn one_push_serves_waiters_in_the_order_they_blocked() {
    let mut d = Diff::new();
    let mut waiters = block_in_order(&mut d, &[&["BLPOP", "q", "0"], &["BLPOP", "q", "0"], &["BLPOP", "q", "0"]]);
    let mut other = Twin::open(&mut d);
    assert_eq!(d.exact(&["RPUSH", "q", "a", "b", "c"]), Frame::int(3));
    assert_eq!(other.cmd(&["LLEN", "q"]), Frame::int(0), "all three handed out by the push");
    for (w, value) in waiters.iter_mut().zip(["a", "b", "c"]) {
        assert_eq!(w.reply(), kv("q", value));
    }
    assert_eq!(d.exact(&["EXISTS", "q"]), Frame::int(0));
    wait_blocked(&mut d, 0);
    d.finish();
}

#[test]
fn pushed_element_is_never_visible_to_other_clients() {
    let mut d = Diff::new();
    let mut waiters = block_in_order(&mut d, &[&["BLPOP", "q", "0"]]);
    let mut other = Twin::open(&mut d);
    // The push replies with the length it made; the waiter already has the element.
    assert_eq!(d.exact(&["LPUSH", "q", "a"]), Frame::int(1));
    assert_eq!(other.cmd(&["LLEN", "q"]), Frame::int(0));
    assert_eq!(other.cmd(&["LPOP", "q"]), Frame::Nil);
    assert_eq!(waiters[0].reply(), kv("q", "a"));
    wait_blocked(&mut d, 0);
    d.finish();
}

#[test]
fn exec_sees_its_own_pushes_and_serves_after_the_transaction() {
    let mut d = Diff::new();
    let mut waiters = block_in_order(&mut d, &[&["BLPOP", "q", "0"]]);
    d.exact(&["MULTI"]);
    d.exact(&["LPUSH", "q", "a"]);
    d.exact(&["LLEN", "q"]);
    assert_eq!(d.exact(&["EXEC"]), Frame::Array(vec![Frame::int(1), Frame::int(1)]));
    assert_eq!(waiters[0].reply(), kv("q", "a"));
    assert_eq!(d.exact(&["LLEN", "q"]), Frame::int(0));
    d.finish();
}

#[test]
fn keys_are_served_in_the_order_they_became_ready() {
    let mut d = Diff::new();
    // The waiter would take from `b` if it re-ran BLPOP after the EXEC.
    let mut waiters = block_in_order(&mut d, &[&["BLPOP", "b", "a", "0"]]);
    d.exact(&["MULTI"]);
    d.exact(&["RPUSH", "a", "x"]);
    d.exact(&["RPUSH", "b", "y"]);
    d.exact(&["EXEC"]);
    assert_eq!(waiters[0].reply(), kv("a", "x"));
    assert_eq!(d.exact(&["LRANGE", "b", "0", "-1"]), Frame::bulks(&["y"]));
    d.finish();
}

#[test]
fn blmove_chain_serves_the_destination_waiter_in_the_same_push() {
    let mut d = Diff::new();
    let mut waiters = block_in_order(
        &mut d,
        &[&["BLMOVE", "src", "dst", "LEFT", "RIGHT", "0"], &["BLPOP", "dst", "0"], &["BRPOPLPUSH", "src", "dst2", "0"]],
    );
    let mut other = Twin::open(&mut d);
    assert_eq!(d.exact(&["RPUSH", "src", "x", "y"]), Frame::int(2));
    // Checked at once from another client: both moves and the pop are done.
    assert_eq!(other.cmd(&["LLEN", "src"]), Frame::int(0));
    assert_eq!(other.cmd(&["LLEN", "dst"]), Frame::int(0));
    assert_eq!(other.cmd(&["LRANGE", "dst2", "0", "-1"]), Frame::bulks(&["y"]));
    assert_eq!(waiters[0].reply(), Frame::bulk("x"));
    assert_eq!(waiters[1].reply(), kv("dst", "x"));
    assert_eq!(waiters[2].reply(), Frame::bulk("y"));
    assert_eq!(d.exact(&["EXISTS", "src"]), Frame::int(0));
    d.finish();
}

#[test]
fn blmove_onto_a_wrong_type_destination_gets_wrongtype_and_leaves_the_source() {
    let mut d = Diff::new();
    let mut waiters = block_in_order(&mut d, &[&["BLMOVE", "src", "dst", "LEFT", "LEFT", "0"], &["BLPOP", "src", "0"]]);
    d.exact(&["SET", "dst", "string"]);
    d.exact(&["RPUSH", "src", "x"]);
    assert_eq!(waiters[0].reply().error_code(), Some("WRONGTYPE"));
    // Unblocked with the error; the element goes to the next waiter.
    assert_eq!(waiters[1].reply(), kv("src", "x"));
    d.finish();
}

#[test]
fn blmpop_count_takes_up_to_count_per_waiter_in_order() {
    let mut d = Diff::new();
    let mut waiters = block_in_order(
        &mut d,
        &[&["BLMPOP", "0", "1", "m", "LEFT", "COUNT", "2"], &["BLMPOP", "0", "2", "other", "m", "RIGHT", "COUNT", "5"]],
    );
    let mut other = Twin::open(&mut d);
    d.exact(&["RPUSH", "m", "a", "b", "c", "d"]);
    assert_eq!(other.cmd(&["LLEN", "m"]), Frame::int(0));
    let nested = |key: &str, items: &[&str]| Frame::Array(vec![Frame::bulk(key), Frame::bulks(items)]);
    assert_eq!(waiters[0].reply(), nested("m", &["a", "b"]));
    assert_eq!(waiters[1].reply(), nested("m", &["d", "c"]));
    d.finish();
}

#[test]
fn bzpopmin_and_bzmpop_waiters_are_served_in_order_in_their_resp_version() {
    let mut d = Diff::new();
    let mut resp3 = Twin::open(&mut d);
    resp3.strata.hello3();
    resp3.redis.hello3();
    block(&mut d, &mut resp3, &["BZPOPMIN", "z", "0"], 1);
    let cmds: [&[&str]; 3] = [&["BZPOPMIN", "z", "0"], &["BZPOPMAX", "z", "0"], &["BZMPOP", "0", "1", "z", "MIN"]];
    let mut waiters: Vec<Twin> = (0..cmds.len()).map(|_| Twin::open(&mut d)).collect();
    for (i, (w, cmd)) in waiters.iter_mut().zip(cmds).enumerate() {
        block(&mut d, w, cmd, i + 2);
    }
    let mut other = Twin::open(&mut d);
    d.exact(&["ZADD", "z", "1.5", "a", "2", "b", "3", "c", "4", "d"]);
    assert_eq!(other.cmd(&["ZCARD", "z"]), Frame::int(0));
    assert_eq!(resp3.reply(), Frame::Array(vec![Frame::bulk("z"), Frame::bulk("a"), Frame::Double("1.5".into())]));
    assert_eq!(waiters[0].reply(), Frame::bulks(&["z", "b", "2"]));
    assert_eq!(waiters[1].reply(), Frame::bulks(&["z", "d", "4"]));
    let pair = Frame::Array(vec![Frame::bulk("c"), Frame::bulk("3")]);
    assert_eq!(waiters[2].reply(), Frame::Array(vec![Frame::bulk("z"), Frame::Array(vec![pair])]));
    d.finish();
}

#[test]
fn a_waiter_for_another_type_stays_blocked_and_lets_the_next_be_served() {
    let mut d = Diff::new();
    let mut waiters = block_in_order(&mut d, &[&["BZPOPMIN", "k", "0"], &["BLPOP", "k", "0"]]);
    d.exact(&["RPUSH", "k", "x"]);
    assert_eq!(waiters[1].reply(), kv("k", "x"));
    wait_blocked(&mut d, 1);
    d.exact(&["ZADD", "k", "7", "m"]);
    assert_eq!(waiters[0].reply(), Frame::bulks(&["k", "m", "7"]));
    d.finish();
}

#[test]
fn a_waiter_that_timed_out_is_skipped() {
    let mut d = Diff::new();
    let mut waiters = block_in_order(&mut d, &[&["BLPOP", "q", "0.3"], &["BLPOP", "q", "0"]]);
    assert_eq!(waiters[0].reply(), Frame::NilArray);
    wait_blocked(&mut d, 1);
    d.exact(&["RPUSH", "q", "a"]);
    assert_eq!(waiters[1].reply(), kv("q", "a"));
    d.finish();
}

#[test]
fn killed_and_disconnected_waiters_are_skipped() {
    let mut d = Diff::new();
    let mut killed = Twin::open(&mut d);
    let strata_id = killed.strata.cmd(&["CLIENT", "ID"]).as_int().expect("id").to_string();
    let redis_id = killed.redis.cmd(&["CLIENT", "ID"]).as_int().expect("id").to_string();
    block(&mut d, &mut killed, &["BLPOP", "q", "0"], 1);
    let mut gone = Twin::open(&mut d);
    block(&mut d, &mut gone, &["BLPOP", "q", "0"], 2);
    let mut survivor = Twin::open(&mut d);
    block(&mut d, &mut survivor, &["BLPOP", "q", "0"], 3);

    assert_eq!(d.strata().cmd(&["CLIENT", "KILL", "ID", &strata_id]), Frame::int(1));
    assert_eq!(d.redis().cmd(&["CLIENT", "KILL", "ID", &redis_id]), Frame::int(1));
    assert!(killed.strata.is_closed() && killed.redis.is_closed(), "killed client still connected");
    drop(gone);
    wait_blocked(&mut d, 1);

    d.exact(&["RPUSH", "q", "a", "b"]);
    assert_eq!(survivor.reply(), kv("q", "a"));
    assert_eq!(d.exact(&["LRANGE", "q", "0", "-1"]), Frame::bulks(&["b"]));
    d.finish();
}

#[test]
fn swapdb_serves_clients_blocked_on_keys_it_brings_in() {
    let mut d = Diff::new();
    let mut waiters = block_in_order(&mut d, &[&["BLPOP", "sw", "0"], &["BLPOP", "sw", "0"]]);
    d.exact(&["SELECT", "1"]);
    d.exact(&["RPUSH", "sw", "x"]);
    d.exact(&["SWAPDB", "0", "1"]);
    assert_eq!(waiters[0].reply(), kv("sw", "x"));
    wait_blocked(&mut d, 1);
    d.exact(&["SELECT", "0"]);
    assert_eq!(d.exact(&["EXISTS", "sw"]), Frame::int(0));
    d.exact(&["RPUSH", "sw", "y"]);
    assert_eq!(waiters[1].reply(), kv("sw", "y"));
    d.finish();
}
