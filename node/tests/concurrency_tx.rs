//! Atomicity under concurrency: many clients on every worker thread doing
//! INCR, MULTI/EXEC transfers and WATCH-based optimistic updates on shared
//! keys. The final state must be exact.

mod support;

use std::thread;
use support::*;

const CLIENTS: usize = 8;

#[test]
fn concurrent_incr_is_exact() {
    let server = Server::strata_with(&["--threads", "2"]);
    let per_client = 2000;
    let handles: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let mut c = server.conn();
            thread::spawn(move || {
                for _ in 0..per_client {
                    c.send(&["INCR", "counter"]);
                }
                for _ in 0..per_client {
                    assert!(matches!(c.read_frame(), Frame::Integer(_)));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut c = server.conn();
    assert_eq!(c.cmd(&["GET", "counter"]), Frame::bulk((CLIENTS * per_client).to_string()));
}

#[test]
fn multi_exec_transfers_preserve_the_total() {
    // Money moves between accounts in transactions; any interleaving that
    // broke EXEC's atomicity would be seen by a concurrent auditor as a
    // total different from the initial one.
    let server = Server::strata_with(&["--threads", "2"]);
    let accounts = 16;
    let mut setup = server.conn();
    for i in 0..accounts {
        setup.cmd(&["SET", &format!("acct:{i}"), "1000"]);
    }
    let total = (accounts * 1000) as i64;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let auditor = {
        let mut c = server.conn();
        let stop = stop.clone();
        thread::spawn(move || {
            let keys: Vec<String> = (0..accounts).map(|i| format!("acct:{i}")).collect();
            let mut audits = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut args = vec!["MGET".to_string()];
                args.extend(keys.iter().cloned());
                c.cmd(&["MULTI"]);
                c.cmd(&args);
                let Frame::Array(r) = c.cmd(&["EXEC"]) else { panic!("EXEC failed") };
                let Frame::Array(vals) = &r[0] else { panic!("MGET reply") };
                let sum: i64 = vals.iter().map(|v| v.as_str().unwrap().parse::<i64>().unwrap()).sum();
                assert_eq!(sum, total, "a transaction was observed half-done");
                audits += 1;
            }
            audits
        })
    };
    let workers: Vec<_> = (0..CLIENTS)
        .map(|w| {
            let mut c = server.conn();
            thread::spawn(move || {
                for i in 0..400 {
                    let from = format!("acct:{}", (w * 7 + i) % accounts);
                    let to = format!("acct:{}", (w * 3 + i * 5 + 1) % accounts);
                    c.cmd(&["MULTI"]);
                    c.cmd(&["DECRBY", &from, "3"]);
                    c.cmd(&["INCRBY", &to, "3"]);
                    let r = c.cmd(&["EXEC"]);
                    assert!(matches!(r, Frame::Array(ref v) if v.len() == 2), "{r:?}");
                }
            })
        })
        .collect();
    for h in workers {
        h.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let audits = auditor.join().unwrap();
    assert!(audits > 0);
    let mut sum = 0i64;
    for i in 0..accounts {
        sum += setup.cmd(&["GET", &format!("acct:{i}")]).as_str().unwrap().parse::<i64>().unwrap();
    }
    assert_eq!(sum, total);
}

#[test]
fn watch_optimistic_increments_are_exact() {
    // The classic check-and-set loop: GET, compute, WATCH/MULTI/SET/EXEC,
    // retry when EXEC returns nil. Lost updates would show in the total.
    let server = Server::strata_with(&["--threads", "2"]);
    let per_client = 150;
    let handles: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let mut c = server.conn();
            thread::spawn(move || {
                let mut retries = 0;
                for _ in 0..per_client {
                    loop {
                        c.cmd(&["WATCH", "cas"]);
                        let cur = match c.cmd(&["GET", "cas"]) {
                            Frame::Bulk(b) => String::from_utf8(b).unwrap().parse::<i64>().unwrap(),
                            _ => 0,
                        };
                        c.cmd(&["MULTI"]);
                        c.cmd(&["SET", "cas", &(cur + 1).to_string()]);
                        match c.cmd(&["EXEC"]) {
                            Frame::Array(_) => break,
                            Frame::NilArray => retries += 1,
                            other => panic!("unexpected EXEC reply {other:?}"),
                        }
                    }
                }
                retries
            })
        })
        .collect();
    let retries: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let mut c = server.conn();
    assert_eq!(c.cmd(&["GET", "cas"]), Frame::bulk((CLIENTS * per_client).to_string()));
    eprintln!("optimistic retries: {retries}");
}
