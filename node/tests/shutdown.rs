//! Bounded shutdown: after SIGTERM the node stops accepting, gives
//! connections a short drain to finish their replies, and exits 0 even if a
//! worker is still inside a long command.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::*;

/// What a pod's termination can afford: the drain (3 s) and some slack.
const BOUND: Duration = Duration::from_secs(6);

fn terminate_within_bound(server: &mut Server) {
    let start = Instant::now();
    let status = server.terminate(BOUND + Duration::from_secs(20));
    let took = start.elapsed();
    let status = status.unwrap_or_else(|| panic!("still running {took:?} after SIGTERM\n{}", server.logs()));
    assert!(status.success(), "exit status {status:?}\n{}", server.logs());
    assert!(took < BOUND, "shutdown took {took:?}\n{}", server.logs());
    assert!(server.logs().contains("SIGTERM"), "{}", server.logs());
}

#[test]
fn sigterm_wakes_debug_sleep() {
    let mut server = Server::strata();
    let mut c = server.conn();
    c.send(&["DEBUG", "SLEEP", "30"]);
    std::thread::sleep(Duration::from_millis(300));
    let start = Instant::now();
    terminate_within_bound(&mut server);
    // Woken at once, not at the end of the drain.
    assert!(start.elapsed() < Duration::from_secs(2), "DEBUG SLEEP held shutdown for {:?}", start.elapsed());
}

/// Sends `cmd` `times` times in one pipeline and reads (and drops) every
/// reply on a thread, so the worker never waits for the client.
fn pipeline_forever(server: &Server, cmd: &[&str], times: usize) -> std::thread::JoinHandle<()> {
    let mut writer = TcpStream::connect(server.addr()).unwrap();
    let mut reader = writer.try_clone().unwrap();
    let one = encode_command(cmd);
    let all: Vec<u8> = one.iter().copied().cycle().take(one.len() * times).collect();
    // Written on its own thread: the node reads it only as it gets through it.
    std::thread::spawn(move || {
        let _ = writer.write_all(&all);
    });
    let handle = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 20];
        while matches!(reader.read(&mut buf), Ok(n) if n > 0) {}
    });
    // Let the worker get deep into it.
    std::thread::sleep(Duration::from_millis(500));
    handle
}

#[test]
fn sigterm_during_a_pipeline_of_huge_keys_exits_within_the_bound() {
    let mut server = Server::strata();
    let mut c = server.conn();
    for chunk in 0..200 {
        let mut mset = vec!["MSET".to_string()];
        for i in 0..1000 {
            mset.push(format!("key:{chunk}:{i}"));
            mset.push("v".into());
        }
        assert_eq!(c.cmd(&mset), Frame::ok());
    }
    let reader = pipeline_forever(&server, &["KEYS", "*"], 2000);
    terminate_within_bound(&mut server);
    reader.join().unwrap();
}

#[test]
fn sigterm_during_a_long_lrange_loop_exits_within_the_bound() {
    let mut server = Server::strata();
    let mut c = server.conn();
    for chunk in 0..100 {
        let mut push = vec!["RPUSH".to_string(), "l".into()];
        push.extend((0..1000).map(|i| format!("element-{chunk}-{i}")));
        assert!(c.cmd(&push).as_int().is_some());
    }
    let reader = pipeline_forever(&server, &["LRANGE", "l", "0", "-1"], 5000);
    terminate_within_bound(&mut server);
    reader.join().unwrap();
}

#[test]
fn sigterm_while_a_worker_is_inside_one_long_command_exits_after_the_drain() {
    let mut server = Server::strata();
    let mut c = server.conn();
    // One command that keeps its worker for a minute and never looks at the
    // shutdown flag: the process must not wait for it past the drain.
    c.send(&["DEBUG", "BUSY", "60"]);
    std::thread::sleep(Duration::from_millis(500));
    let start = Instant::now();
    terminate_within_bound(&mut server);
    assert!(start.elapsed() >= Duration::from_secs(3), "exited before the drain ended: {:?}", start.elapsed());
    assert!(server.logs().contains("still busy"), "{}", server.logs());
}
