//! Blocking list commands across worker threads: wake-ups from connections
//! served by other workers, many producers and consumers with no element
//! lost or delivered twice, timeouts, and BLMOVE.

mod support;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use support::*;

/// Upper bound for any single wait in these tests.
const LIMIT: Duration = Duration::from_secs(20);

fn server() -> Server {
    Server::strata_with(&["--threads", "2"])
}

/// Runs `cmd` on its own connection in a thread; the reply arrives on the channel.
fn spawn_blocked(server: &Server, cmd: &[&str]) -> mpsc::Receiver<Frame> {
    let mut conn = server.conn();
    conn.set_timeout(Some(LIMIT));
    let cmd: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(conn.cmd(&cmd));
    });
    rx
}

/// Asserts the blocked command has not replied yet (it really blocks).
fn assert_still_blocked(rx: &mpsc::Receiver<Frame>) {
    match rx.recv_timeout(Duration::from_millis(200)) {
        Err(mpsc::RecvTimeoutError::Timeout) => {}
        other => panic!("blocking command replied before any push: {other:?}"),
    }
}

#[test]
fn blpop_woken_by_push_from_other_connections() {
    let server = server();
    // Connections are spread round-robin over the two workers: among three
    // consecutive pushers at least one lives on another thread than the
    // blocked client, and each pusher in turn wakes it.
    let mut pushers: Vec<RawConn> = (0..3).map(|_| server.conn()).collect();
    for (i, pusher) in pushers.iter_mut().enumerate() {
        let key = format!("wake-{i}");
        let rx = spawn_blocked(&server, &["BLPOP", &key, "0"]);
        assert_still_blocked(&rx);
        assert_eq!(pusher.cmd(&["LPUSH", &key, "hello"]), Frame::int(1));
        let reply = rx.recv_timeout(LIMIT).expect("BLPOP was not woken by LPUSH");
        assert_eq!(reply, Frame::bulks(&[key.as_str(), "hello"]));
        assert_eq!(pusher.cmd(&["EXISTS", &key]), Frame::int(0));
    }
    // Blocked on several keys: the one pushed to answers.
    let rx = spawn_blocked(&server, &["BRPOP", "x1", "x2", "x3", "0"]);
    assert_still_blocked(&rx);
    pushers[1].cmd(&["RPUSH", "x3", "a", "b"]);
    assert_eq!(rx.recv_timeout(LIMIT).expect("BRPOP woken"), Frame::bulks(&["x3", "b"]));
    assert_eq!(pushers[0].cmd(&["LRANGE", "x3", "0", "-1"]), Frame::bulks(&["a"]));
}

#[test]
fn many_producers_and_consumers_lose_and_duplicate_nothing() {
    const PRODUCERS: usize = 8;
    const CONSUMERS: usize = 8;
    const PER_PRODUCER: usize = 500;
    const TOTAL: usize = PRODUCERS * PER_PRODUCER;
    let server = server();
    let received = Arc::new(Mutex::new(Vec::with_capacity(TOTAL)));
    let count = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(60);

    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let mut conn = server.conn();
            conn.set_timeout(Some(LIMIT));
            let (received, count) = (received.clone(), count.clone());
            thread::spawn(move || {
                while count.load(Ordering::SeqCst) < TOTAL && Instant::now() < deadline {
                    // Two keys: producers push to both.
                    match conn.cmd(&["BLPOP", "jobs-a", "jobs-b", "0.2"]) {
                        Frame::Array(kv) => {
                            let value = kv[1].as_str().expect("bulk value").to_string();
                            received.lock().unwrap().push(value);
                            count.fetch_add(1, Ordering::SeqCst);
                        }
                        Frame::NilArray => {}
                        other => panic!("unexpected BLPOP reply {other}"),
                    }
                }
            })
        })
        .collect();

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let mut conn = server.conn();
            thread::spawn(move || {
                for i in 0..PER_PRODUCER {
                    let key = if i % 2 == 0 { "jobs-a" } else { "jobs-b" };
                    let reply = conn.cmd(&["LPUSH", key, &format!("p{p}-{i}")]);
                    assert!(reply.as_int().is_some_and(|n| n >= 1), "LPUSH replied {reply}");
                }
            })
        })
        .collect();

    for t in producers {
        t.join().expect("producer panicked");
    }
    for t in consumers {
        t.join().expect("consumer panicked");
    }
    let received = received.lock().unwrap();
    assert_eq!(received.len(), TOTAL, "values received (lost or duplicated)");
    let unique: HashSet<&String> = received.iter().collect();
    assert_eq!(unique.len(), TOTAL, "some values were delivered twice");
    for p in 0..PRODUCERS {
        for i in 0..PER_PRODUCER {
            assert!(unique.contains(&format!("p{p}-{i}")), "p{p}-{i} was lost");
        }
    }
    let mut conn = server.conn();
    assert_eq!(conn.cmd(&["EXISTS", "jobs-a", "jobs-b"]), Frame::int(0));
}

#[test]
fn blpop_times_out_with_nil() {
    let server = server();
    let mut conn = server.conn();
    let start = Instant::now();
    assert_eq!(conn.cmd(&["BLPOP", "never", "0.5"]), Frame::NilArray);
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(450), "timed out too early: {took:?}");
    assert!(took < Duration::from_secs(3), "timed out too late: {took:?}");

    // BLMOVE times out with a null array too (as Redis 7.0 does); the
    // connection stays usable.
    let start = Instant::now();
    assert_eq!(conn.cmd(&["BLMOVE", "never", "d", "LEFT", "LEFT", "0.3"]), Frame::NilArray);
    assert!(start.elapsed() >= Duration::from_millis(250));
    assert_eq!(conn.cmd(&["PING"]), Frame::simple("PONG"));

    // Pushes to other keys while blocked neither wake it early nor break the deadline.
    let rx = spawn_blocked(&server, &["BLPOP", "never", "0.6"]);
    let start = Instant::now();
    let mut other = server.conn();
    for i in 0..5 {
        other.cmd(&["RPUSH", "elsewhere", &i.to_string()]);
        thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(rx.recv_timeout(LIMIT).expect("reply"), Frame::NilArray);
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(500) && took < Duration::from_secs(3), "{took:?}");
}

#[test]
fn blmove_woken_by_push() {
    let server = server();
    let mut pusher = server.conn();
    let rx = spawn_blocked(&server, &["BLMOVE", "src", "dst", "LEFT", "RIGHT", "0"]);
    assert_still_blocked(&rx);
    assert_eq!(pusher.cmd(&["RPUSH", "src", "v1", "v2"]), Frame::int(2));
    assert_eq!(rx.recv_timeout(LIMIT).expect("BLMOVE woken"), Frame::bulk("v1"));
    assert_eq!(pusher.cmd(&["LRANGE", "src", "0", "-1"]), Frame::bulks(&["v2"]));
    assert_eq!(pusher.cmd(&["LRANGE", "dst", "0", "-1"]), Frame::bulks(&["v1"]));

    // A chain: BLMOVE a -> b wakes a BLPOP waiting on b.
    let popper = spawn_blocked(&server, &["BLPOP", "b", "0"]);
    let mover = spawn_blocked(&server, &["BRPOPLPUSH", "a", "b", "0"]);
    assert_still_blocked(&popper);
    assert_still_blocked(&mover);
    pusher.cmd(&["LPUSH", "a", "baton"]);
    assert_eq!(mover.recv_timeout(LIMIT).expect("BRPOPLPUSH woken"), Frame::bulk("baton"));
    assert_eq!(popper.recv_timeout(LIMIT).expect("BLPOP woken by the move"), Frame::bulks(&["b", "baton"]));
    assert_eq!(pusher.cmd(&["EXISTS", "a", "b"]), Frame::int(0));
}

#[test]
fn disconnected_blocked_client_does_not_swallow_values() {
    let server = server();
    {
        let mut gone = server.conn();
        gone.send(&["BLPOP", "q", "0"]);
        thread::sleep(Duration::from_millis(100));
        // Dropped while blocked.
    }
    thread::sleep(Duration::from_millis(100));
    let rx = spawn_blocked(&server, &["BLPOP", "q", "0"]);
    assert_still_blocked(&rx);
    let mut pusher = server.conn();
    pusher.cmd(&["RPUSH", "q", "kept"]);
    assert_eq!(rx.recv_timeout(LIMIT).expect("woken"), Frame::bulks(&["q", "kept"]));
}
