//! The pending path: a command whose key is not ready (later: a value on
//! disk only; here: `DEBUG PENDING-DELAY`) waits without holding up its
//! worker's other connections, then runs from the start, and its reply
//! keeps its place among the connection's pipelined replies.

mod support;

use std::time::{Duration, Instant};
use support::*;

/// One worker: every connection shares the event loop the wait must not block.
fn one_worker() -> Server {
    Server::strata_with(&["--threads", "1", "--adaptive-threads", "no"])
}

#[test]
fn a_waiting_command_does_not_hold_up_other_clients() {
    let server = one_worker();
    let mut a = server.conn();
    let mut b = server.conn();
    assert_eq!(a.cmd(&["SET", "cold", "v1"]), Frame::ok());
    assert_eq!(a.cmd(&["DEBUG", "PENDING-DELAY", "600", "cold"]), Frame::ok());

    let start = Instant::now();
    a.send(&["GET", "cold"]);
    // While A waits, B on the same worker is served at once, many times.
    for i in 0..50 {
        assert_eq!(b.cmd(&["SET", &format!("k{i}"), "x"]), Frame::ok());
    }
    assert!(start.elapsed() < Duration::from_millis(500), "B waited for A: {:?}", start.elapsed());
    assert_eq!(a.read_frame(), Frame::bulk("v1"));
    assert!(start.elapsed() >= Duration::from_millis(600), "GET did not wait: {:?}", start.elapsed());
    // The wait happens once: the value is now "in RAM".
    let again = Instant::now();
    assert_eq!(a.cmd(&["GET", "cold"]), Frame::bulk("v1"));
    assert!(again.elapsed() < Duration::from_millis(300));
}

#[test]
fn the_command_runs_after_the_wait_and_sees_writes_made_meanwhile() {
    let server = one_worker();
    let mut a = server.conn();
    let mut b = server.conn();
    assert_eq!(a.cmd(&["RPUSH", "l", "1"]), Frame::int(1));
    assert_eq!(a.cmd(&["DEBUG", "PENDING-DELAY", "300", "l"]), Frame::ok());
    // Pipelined: a reply before, the waiting write, a reply after.
    a.send(&["PING"]);
    a.send(&["RPUSH", "l", "a"]);
    a.send(&["ECHO", "after"]);
    std::thread::sleep(Duration::from_millis(100));
    // Written while A's command waits: A's RPUSH runs afterwards, from the start.
    assert_eq!(b.cmd(&["RPUSH", "l", "b"]), Frame::int(2));
    assert_eq!(a.read_frame(), Frame::simple("PONG"));
    assert_eq!(a.read_frame(), Frame::int(3));
    assert_eq!(a.read_frame(), Frame::bulk("after"));
    assert_eq!(a.cmd(&["LRANGE", "l", "0", "-1"]), Frame::bulks(&["1", "b", "a"]));
    // Its statistics were recorded once.
    let stats = a.cmd(&["INFO", "commandstats"]);
    let text = String::from_utf8_lossy(stats.as_bytes().unwrap()).into_owned();
    assert!(text.contains("cmdstat_rpush:calls=3,"), "{text}");
}

#[test]
fn exec_waits_for_every_queued_key_then_runs_the_whole_transaction() {
    let server = one_worker();
    let mut a = server.conn();
    assert_eq!(a.cmd(&["SET", "x", "1"]), Frame::ok());
    assert_eq!(a.cmd(&["DEBUG", "PENDING-DELAY", "300", "x"]), Frame::ok());
    assert_eq!(a.cmd(&["MULTI"]), Frame::ok());
    assert_eq!(a.cmd(&["INCR", "x"]), Frame::simple("QUEUED"));
    assert_eq!(a.cmd(&["GET", "x"]), Frame::simple("QUEUED"));
    let start = Instant::now();
    let reply = a.cmd(&["EXEC"]);
    assert!(start.elapsed() >= Duration::from_millis(300), "EXEC did not wait");
    assert_eq!(reply, Frame::Array(vec![Frame::int(2), Frame::bulk("2")]));
    // Out of MULTI afterwards.
    assert_eq!(a.cmd(&["GET", "x"]), Frame::bulk("2"));
}

#[test]
fn a_killed_client_stops_waiting() {
    let server = one_worker();
    let mut a = server.conn();
    let mut b = server.conn();
    assert_eq!(a.cmd(&["SET", "k", "v"]), Frame::ok());
    assert_eq!(a.cmd(&["CLIENT", "SETNAME", "waiter"]), Frame::ok());
    assert_eq!(a.cmd(&["DEBUG", "PENDING-DELAY", "60000", "k"]), Frame::ok());
    a.send(&["GET", "k"]);
    std::thread::sleep(Duration::from_millis(100));
    let id = client_id(&mut b, "waiter");
    let killed = b.cmd(&["CLIENT", "KILL", "SKIPME", "yes", "ID", &id]);
    assert_eq!(killed, Frame::int(1));
    a.set_timeout(Some(Duration::from_secs(5)));
    let start = Instant::now();
    assert!(a.is_closed(), "the killed client's connection is closed");
    assert!(start.elapsed() < Duration::from_secs(5), "closed at once, not after the wait");
}

fn client_id(conn: &mut RawConn, name: &str) -> String {
    let list = conn.cmd(&["CLIENT", "LIST"]);
    let text = String::from_utf8_lossy(list.as_bytes().unwrap()).into_owned();
    let line = text.lines().find(|l| l.contains(&format!("name={name} "))).expect("client listed");
    line.split(' ').find_map(|f| f.strip_prefix("id=")).unwrap().to_string()
}

/// SORT's BY and GET patterns name keys no argument declares: one not
/// ready makes SORT wait, then it answers with the value as it is then.
#[test]
fn sort_waits_for_keys_its_patterns_name() {
    let server = one_worker();
    let mut a = server.conn();
    assert_eq!(a.cmd(&["RPUSH", "l", "2", "1"]), Frame::int(2));
    assert_eq!(a.cmd(&["MSET", "w_1", "10", "w_2", "20", "o_1", "x", "o_2", "y"]), Frame::ok());
    assert_eq!(a.cmd(&["DEBUG", "PENDING-DELAY", "400", "o_2"]), Frame::ok());
    let start = Instant::now();
    let reply = a.cmd(&["SORT", "l", "BY", "w_*", "GET", "o_*"]);
    assert!(start.elapsed() >= Duration::from_millis(400), "SORT did not wait: {:?}", start.elapsed());
    assert_eq!(reply, Frame::bulks(&["x", "y"]));
    assert_eq!(a.cmd(&["DEBUG", "PENDING-DELAY", "400", "w_1"]), Frame::ok());
    let start = Instant::now();
    assert_eq!(a.cmd(&["SORT", "l", "BY", "w_*", "DESC"]), Frame::bulks(&["2", "1"]));
    assert!(start.elapsed() >= Duration::from_millis(400), "SORT BY did not wait: {:?}", start.elapsed());
}

/// Inside EXEC, SORT cannot wait halfway through the transaction: it reads
/// the keys its patterns name as they are, and nothing runs twice.
#[test]
fn sort_in_exec_does_not_wait_halfway() {
    let server = one_worker();
    let mut a = server.conn();
    assert_eq!(a.cmd(&["RPUSH", "l", "2", "1"]), Frame::int(2));
    assert_eq!(a.cmd(&["MSET", "o_1", "x", "o_2", "y"]), Frame::ok());
    assert_eq!(a.cmd(&["DEBUG", "PENDING-DELAY", "300", "o_2"]), Frame::ok());
    assert_eq!(a.cmd(&["MULTI"]), Frame::ok());
    assert_eq!(a.cmd(&["INCR", "runs"]), Frame::simple("QUEUED"));
    assert_eq!(a.cmd(&["SORT", "l", "GET", "o_*"]), Frame::simple("QUEUED"));
    assert_eq!(a.cmd(&["EXEC"]), Frame::Array(vec![Frame::int(1), Frame::bulks(&["x", "y"])]));
    assert_eq!(a.cmd(&["GET", "runs"]), Frame::bulk("1"));
}
