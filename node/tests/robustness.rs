//! Bad input never crashes or hangs the server: each malformed request gets
//! Redis's protocol error (closing only that connection), memory stays
//! inside the budget, and every other client keeps being served.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::*;

/// Sends raw bytes on a fresh connection and returns everything the server
/// answered until it closed the connection (or 3 s passed).
fn exchange(server: &Server, bytes: &[u8]) -> (Vec<u8>, bool) {
    exchange_raw(server.addr(), bytes, Duration::from_secs(3))
}

fn assert_alive(server: &Server) {
    let mut c = server.conn();
    assert_eq!(c.cmd(&["PING"]), Frame::simple("PONG"), "server stopped serving");
}

#[test]
fn protocol_errors_match_redis_and_close_only_that_connection() {
    let strata = Server::strata();
    let redis = Server::redis();
    let cases: &[&[u8]] = &[
        b"*1\r\n$-5\r\n",              // negative bulk length
        b"*x\r\n",                     // bad multibulk length
        b"*1\r\n$999999999999\r\n",    // bulk over proto-max-bulk-len
        b"*2\r\n$3\r\nGET\r\n:5\r\n",  // not a bulk inside a request
        b"*1\r\n*1\r\n$4\r\nPING\r\n", // nesting is not allowed in requests
        b"SET k \"unbalanced\r\n",     // inline with unbalanced quotes
        b"*1\r\n$4\r\nPINGxx\r\n",     // bulk longer than declared
    ];
    for case in cases {
        let (a, a_closed) = exchange(&strata, case);
        let (b, b_closed) = exchange(&redis, case);
        assert_eq!(
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b),
            "reply to {:?}",
            String::from_utf8_lossy(case)
        );
        assert_eq!(a_closed, b_closed, "close behaviour for {:?}", String::from_utf8_lossy(case));
        assert_alive(&strata);
    }
}

#[test]
fn truncated_frames_wait_for_the_rest() {
    let server = Server::strata();
    let mut c = server.conn();
    let full = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n";
    for chunk in full.chunks(3) {
        c.send_raw(chunk);
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(c.read_frame(), Frame::ok());
    // Pipelined, split mid-frame.
    c.send_raw(b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n*2\r\n$3\r\nG");
    std::thread::sleep(Duration::from_millis(20));
    c.send_raw(b"ET\r\n$3\r\nkey\r\n");
    assert_eq!(c.read_frame(), Frame::bulk("value"));
    assert_eq!(c.read_frame(), Frame::bulk("value"));
}

#[test]
fn binary_garbage_is_refused_and_server_survives() {
    let mut server = Server::strata();
    let mut rng = Rng::new(0x1234_5678);
    for _ in 0..200 {
        let junk = rng.bytes(512);
        // Most garbage leaves an incomplete request the server waits on.
        let _ = exchange_raw(server.addr(), &junk, Duration::from_millis(300));
        if !server.is_running() {
            let st = server.terminate(Duration::from_secs(1));
            panic!("server died ({st:?}) on input {junk:?}");
        }
    }
    assert_alive(&server);
}

#[test]
fn declared_huge_bulk_allocates_only_what_arrives() {
    // A client declares a 1 GB bulk but sends 1 MB and stalls: the server must
    // neither allocate the gigabyte nor stop serving others.
    let server = Server::strata_with(&["--proto-max-bulk-len", "2gb"]);
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1073741824\r\n").unwrap();
    s.write_all(&vec![b'x'; 1 << 20]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut c = server.conn();
    let used: u64 = info_field(&mut c, "used_memory").unwrap().parse().unwrap();
    assert!(used < 64 << 20, "used_memory {used} after a stalled 1 GB bulk");
    let rss = std::fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap();
    let rss_kb: u64 =
        rss.lines().find(|l| l.starts_with("VmRSS")).unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(rss_kb < 256 * 1024, "RSS {rss_kb} kB after a stalled 1 GB bulk");
    assert_alive(&server);
}

#[test]
fn query_buffer_limit_closes_the_offender() {
    let server = Server::strata_with(&["--client-query-buffer-limit", "1mb"]);
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    // An inline request that never ends: 4 MB with no newline.
    let _ = s.write_all(b"*1\r\n$3000000\r\n");
    let chunk = vec![b'a'; 64 * 1024];
    let mut closed = false;
    for _ in 0..64 {
        if s.write_all(&chunk).is_err() {
            closed = true;
            break;
        }
    }
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut buf = [0u8; 16];
    closed = closed || matches!(s.read(&mut buf), Ok(0) | Err(_));
    assert!(closed, "connection over client-query-buffer-limit stayed open");
    assert_alive(&server);
}

#[test]
fn output_buffer_limit_for_normal_clients_drops_the_client_as_redis_does() {
    for server in [Server::strata(), Server::redis()] {
        let mut c = server.conn();
        assert_eq!(c.cmd(&["CONFIG", "SET", "client-output-buffer-limit", "normal 65536 0 0"]), Frame::ok());
        assert_eq!(c.cmd(&["SET", "big", &"v".repeat(100_000)]), Frame::ok());
        assert_eq!(c.cmd(&["STRLEN", "big"]), Frame::int(100_000), "{}: small replies pass", server.name());
        // A reply over the hard limit: the connection is dropped, the reply never sent.
        c.send(&["GET", "big"]);
        c.set_timeout(Some(Duration::from_secs(5)));
        assert!(c.is_closed(), "{}: client over its output buffer limit kept", server.name());
        let mut other = server.conn();
        assert_eq!(other.cmd(&["STRLEN", "big"]), Frame::int(100_000), "{}: data kept", server.name());
        if server.kind() == ServerKind::Strata {
            // Redis 7.2's INFO field; Debian's 7.0 does not have it yet.
            let disconnects = info_field(&mut other, "client_output_buffer_limit_disconnections");
            assert_eq!(disconnects.as_deref(), Some("1"));
        }
    }
}

#[test]
fn slow_reader_does_not_stall_others_or_blow_memory() {
    // A client pipelines many large GETs and never reads: its socket buffer
    // fills up; the server must keep serving everyone else.
    let server = Server::strata_with(&["--threads", "2", "--maxmemory", "64mb"]);
    let mut c = server.conn();
    let big = "v".repeat(512 * 1024);
    assert_eq!(c.cmd(&["SET", "big", &big]), Frame::ok());
    let mut lazy = TcpStream::connect(server.addr()).unwrap();
    lazy.set_write_timeout(Some(Duration::from_millis(500))).unwrap();
    let req = b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n".repeat(100);
    for _ in 0..20 {
        if lazy.write_all(&req).is_err() {
            break;
        }
    }
    let start = Instant::now();
    for _ in 0..200 {
        assert_eq!(c.cmd(&["PING"]), Frame::simple("PONG"));
    }
    assert!(start.elapsed() < Duration::from_secs(5), "other clients were stalled");
    let used: u64 = info_field(&mut c, "used_memory").unwrap().parse().unwrap();
    assert!(used < 64 << 20, "used_memory {used} over budget with a slow reader");
    drop(lazy);
    assert_alive(&server);
}

#[test]
fn client_kill_ends_a_client_stuck_on_unread_replies() {
    let server = Server::strata();
    let mut c = server.conn();
    assert_eq!(c.cmd(&["SET", "big", &"v".repeat(256 * 1024)]), Frame::ok());
    // Never reads: the server's write blocks once the socket buffers are full.
    let mut stuck = server.conn();
    assert_eq!(stuck.cmd(&["CLIENT", "SETNAME", "stuck"]), Frame::ok());
    let Frame::Integer(id) = stuck.cmd(&["CLIENT", "ID"]) else { panic!("CLIENT ID") };
    stuck.send_raw(&b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n".repeat(64));
    // 16 MB of replies against a few MB of socket buffers: give the server
    // time to fill them and block.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(c.cmd(&["CLIENT", "KILL", "ID", &id.to_string()]), Frame::int(1));
    assert!(
        wait_for(Duration::from_secs(5), || {
            !matches!(c.cmd(&["CLIENT", "LIST"]), Frame::Bulk(ref b) if String::from_utf8_lossy(b).contains("name=stuck"))
        }),
        "a client stuck on a full socket survived CLIENT KILL"
    );
    assert_alive(&server);
}

#[test]
fn many_connections_opened_and_dropped() {
    let server = Server::strata_with(&["--threads", "2"]);
    for _ in 0..200 {
        let mut s = TcpStream::connect(server.addr()).unwrap();
        let _ = s.write_all(b"*1\r\n$4\r\nPING\r\n");
    }
    let mut c = server.conn();
    assert!(wait_for(Duration::from_secs(5), || {
        info_field(&mut c, "connected_clients").is_some_and(|n| n.parse::<u64>().unwrap() <= 2)
    }));
}

#[test]
fn sigterm_shuts_down_gracefully() {
    let mut server = Server::strata();
    let mut c = server.conn();
    assert_eq!(c.cmd(&["SET", "k", "v"]), Frame::ok());
    let start = Instant::now();
    let status = server.terminate(Duration::from_secs(10)).expect("exited after SIGTERM");
    assert!(status.success(), "exit status {status:?}");
    assert!(start.elapsed() < Duration::from_secs(6), "shutdown took {:?}", start.elapsed());
}
