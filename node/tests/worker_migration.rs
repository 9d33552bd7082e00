//! Adaptive worker activation moves live connections between worker
//! threads. A client must not notice: its database, name, protocol,
//! MULTI queue, WATCHes, subscriptions, a blocked command and a pipeline
//! cut mid-request all survive the move, and every reply arrives once, in
//! order.

mod support;

use std::time::Duration;
use support::*;

fn migrations(ctl: &mut RawConn) -> i64 {
    info_field(ctl, "strata_connection_migrations").and_then(|v| v.parse().ok()).expect("migration count in INFO")
}

fn active(ctl: &mut RawConn) -> i64 {
    info_field(ctl, "strata_active_threads").and_then(|v| v.parse().ok()).expect("active threads in INFO")
}

/// One request on each connection, so each passes the point where it may move.
fn touch_all(conns: &mut [RawConn]) {
    for c in conns.iter_mut() {
        assert_eq!(c.cmd(&["ECHO", "x"]), Frame::bulk("x"));
    }
}

#[test]
fn client_state_survives_moving_between_workers() {
    let server = Server::strata_with(&["--threads", "2", "--adaptive-threads", "no"]);
    let mut ctl = server.conn();
    // Everything on worker 0 first.
    assert_eq!(ctl.cmd(&["DEBUG", "ACTIVE-THREADS", "1"]), Frame::ok());
    touch_all(std::slice::from_mut(&mut ctl));
    assert_eq!(active(&mut ctl), 1);
    let before = migrations(&mut ctl);

    let mut db = server.conn();
    assert_eq!(db.cmd(&["SELECT", "5"]), Frame::ok());
    assert_eq!(db.cmd(&["SET", "k", "in-db-5"]), Frame::ok());
    let mut named = server.conn();
    assert_eq!(named.cmd(&["CLIENT", "SETNAME", "traveller"]), Frame::ok());
    let mut multi = server.conn();
    assert_eq!(multi.cmd(&["MULTI"]), Frame::ok());
    assert_eq!(multi.cmd(&["INCR", "ctr"]), Frame::simple("QUEUED"));
    let mut watcher = server.conn();
    assert_eq!(watcher.cmd(&["WATCH", "w"]), Frame::ok());
    let mut resp3 = server.conn();
    assert!(matches!(resp3.cmd(&["HELLO", "3"]), Frame::Map(_)));
    let mut others: Vec<RawConn> = (0..40).map(|_| server.conn()).collect();
    touch_all(&mut others);

    // Spread out: each connection of worker 0 moves to worker 1 with
    // chance 1/2, as it finishes its next request.
    assert_eq!(ctl.cmd(&["DEBUG", "ACTIVE-THREADS", "2"]), Frame::ok());
    for round in 0..2 {
        touch_all(&mut others);
        for c in [&mut db, &mut named, &mut watcher, &mut resp3] {
            assert_eq!(c.cmd(&["PING"]), Frame::simple("PONG"), "round {round}");
        }
        assert_eq!(multi.cmd(&["INCR", "ctr"]), Frame::simple("QUEUED"));
    }
    // A move is counted just after the reply that precedes it is written.
    std::thread::sleep(Duration::from_millis(200));
    let spread = migrations(&mut ctl) - before;
    assert!((5..=41).contains(&spread), "about half of 46 connections should move, saw {spread}");

    // And back: worker 1 drains every connection it has into worker 0.
    assert_eq!(ctl.cmd(&["DEBUG", "ACTIVE-THREADS", "1"]), Frame::ok());
    touch_all(&mut others);
    for c in [&mut db, &mut named, &mut watcher, &mut resp3] {
        assert_eq!(c.cmd(&["PING"]), Frame::simple("PONG"));
    }
    assert_eq!(multi.cmd(&["INCR", "ctr"]), Frame::simple("QUEUED"));
    touch_all(std::slice::from_mut(&mut ctl));
    assert!(
        wait_for(Duration::from_secs(5), || migrations(&mut ctl) - before == 2 * spread),
        "every connection that left came back"
    );
    assert_eq!(active(&mut ctl), 1);

    // The state each connection carried.
    assert_eq!(db.cmd(&["GET", "k"]), Frame::bulk("in-db-5"));
    assert_eq!(named.cmd(&["CLIENT", "GETNAME"]), Frame::bulk("traveller"));
    assert_eq!(ctl.cmd(&["SET", "w", "changed"]), Frame::ok());
    assert_eq!(watcher.cmd(&["MULTI"]), Frame::ok());
    assert_eq!(watcher.cmd(&["SET", "w", "mine"]), Frame::simple("QUEUED"));
    assert_eq!(watcher.cmd(&["EXEC"]), Frame::NilArray, "the WATCH moved too");
    assert_eq!(multi.cmd(&["EXEC"]), Frame::Array(vec![Frame::int(1), Frame::int(2), Frame::int(3), Frame::int(4)]));
    assert_eq!(resp3.cmd(&["HGETALL", "nothing"]), Frame::Map(vec![]), "still RESP3");
}

#[test]
fn subscribers_and_blocked_clients_move_without_losing_messages() {
    let server = Server::strata_with(&["--threads", "2", "--adaptive-threads", "no"]);
    let mut ctl = server.conn();
    assert_eq!(ctl.cmd(&["DEBUG", "ACTIVE-THREADS", "1"]), Frame::ok());
    touch_all(std::slice::from_mut(&mut ctl));

    let mut subs: Vec<RawConn> = (0..16).map(|_| server.conn()).collect();
    for s in &mut subs {
        assert_eq!(
            s.cmd(&["SUBSCRIBE", "news"]),
            Frame::Array(vec![Frame::bulk("subscribe"), Frame::bulk("news"), Frame::int(1)])
        );
    }
    let mut blocked: Vec<RawConn> = (0..4).map(|_| server.conn()).collect();
    for (i, b) in blocked.iter_mut().enumerate() {
        b.send(&["BLPOP", "queue", "0"]);
        let now_blocked = (i + 1).to_string();
        assert!(
            wait_for(Duration::from_secs(5), || info_field(&mut ctl, "blocked_clients") == Some(now_blocked.clone()))
        );
    }

    assert_eq!(ctl.cmd(&["DEBUG", "ACTIVE-THREADS", "2"]), Frame::ok());
    for i in 0..10 {
        let msg = format!("m{i}");
        assert_eq!(ctl.cmd(&["PUBLISH", "news", &msg]), Frame::int(16));
        for s in &mut subs {
            assert_eq!(
                s.read_frame(),
                Frame::Array(vec![Frame::bulk("message"), Frame::bulk("news"), Frame::bulk(&msg)])
            );
        }
    }
    for (i, b) in blocked.iter_mut().enumerate() {
        assert_eq!(ctl.cmd(&["RPUSH", "queue", &format!("v{i}")]), Frame::int(1));
        assert_eq!(b.read_frame(), Frame::bulks(&["queue", &format!("v{i}")]), "served in the order they blocked");
        assert_eq!(b.cmd(&["PING"]), Frame::simple("PONG"));
    }
    assert!(migrations(&mut ctl) >= 1, "subscribers move after delivering a message");
}

#[test]
fn pipelines_split_across_reads_keep_order_while_connections_move() {
    let server = Server::strata_with(&["--threads", "2", "--adaptive-threads", "no"]);
    let mut ctl = server.conn();
    let clients = 6;
    let per_client = 3000;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let toggler = {
        let mut c = server.conn();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let count = if n % 2 == 0 { "1" } else { "2" };
                assert_eq!(c.cmd(&["DEBUG", "ACTIVE-THREADS", count]), Frame::ok());
                std::thread::sleep(Duration::from_millis(5));
            }
            n
        })
    };
    let workers: Vec<_> = (0..clients)
        .map(|i| {
            let mut c = server.conn();
            std::thread::spawn(move || {
                let key = format!("seq:{i}");
                // Big, uneven pipelines: requests straddle read boundaries.
                let mut sent = 0;
                let mut expected = 1;
                while sent < per_client {
                    let batch = (7 + sent % 400).min(per_client - sent);
                    let mut bytes = Vec::new();
                    for _ in 0..batch {
                        bytes.extend(encode_command(&["INCR", &key]));
                        bytes.extend(encode_command(&["APPEND", "pad", "0123456789012345678901234567890123456789"]));
                    }
                    c.send_raw(&bytes);
                    for _ in 0..batch {
                        assert_eq!(c.read_frame(), Frame::int(expected), "client {i}");
                        assert!(matches!(c.read_frame(), Frame::Integer(_)));
                        expected += 1;
                    }
                    sent += batch;
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("client thread");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let toggles = toggler.join().expect("toggler");
    let moved = migrations(&mut ctl);
    assert!(toggles > 2 && moved > 0, "toggled {toggles} times, {moved} moves");
    for i in 0..clients {
        assert_eq!(ctl.cmd(&["GET", &format!("seq:{i}")]), Frame::bulk(per_client.to_string()));
    }
}

#[test]
fn adaptive_mode_starts_on_one_worker_and_is_reported() {
    let metrics_port = free_port();
    let port = metrics_port.to_string();
    let server = Server::strata_with(&["--threads", "2", "--adaptive-threads", "yes", "--metrics-port", &port]);
    let mut ctl = server.conn();
    assert_eq!(active(&mut ctl), 1, "an idle adaptive node serves from one worker");
    assert_eq!(info_field(&mut ctl, "strata_adaptive_threads").as_deref(), Some("yes"));
    // No growth tried yet: the trials' outcomes are reported, both zero.
    assert_eq!(info_field(&mut ctl, "strata_thread_growths_kept").as_deref(), Some("0"));
    assert_eq!(info_field(&mut ctl, "strata_thread_growths_undone").as_deref(), Some("0"));
    let scraped = scrape(metrics_port);
    for outcome in ["kept", "undone"] {
        let series = format!("strata_worker_thread_growths_total{{outcome=\"{outcome}\"}}");
        assert_eq!(sample(&scraped, &series), Some(0.0), "{series} in:\n{scraped}");
    }
    assert_eq!(ctl.cmd(&["CONFIG", "GET", "adaptive-threads"]), Frame::bulks(&["adaptive-threads", "yes"]));
    // Off: every worker takes connections at once.
    assert_eq!(ctl.cmd(&["CONFIG", "SET", "adaptive-threads", "no"]), Frame::ok());
    assert_eq!(active(&mut ctl), 2);
    assert_eq!(
        ctl.cmd(&["CONFIG", "SET", "adaptive-threads", "maybe"]).error_message(),
        Some(
            "ERR CONFIG SET failed (possibly related to argument 'adaptive-threads') - argument(s) must be one of the following: yes, no"
        )
    );
    // Back on, an idle node gives the second worker back within a few windows.
    assert_eq!(ctl.cmd(&["CONFIG", "SET", "adaptive-threads", "yes"]), Frame::ok());
    assert!(wait_for(Duration::from_secs(10), || active(&mut ctl) == 1), "idle node did not shrink to one worker");
    assert_eq!(
        ctl.cmd(&["DEBUG", "ACTIVE-THREADS", "3"]).error_message(),
        Some("ERR argument must be between 1 and 2 inclusive")
    );
}
