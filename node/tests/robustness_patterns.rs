//! One glob pattern never freezes the node (Redis's CVE-2022-36021): hostile
//! patterns in KEYS, SCAN/HSCAN/SSCAN/ZSCAN MATCH and PSUBSCRIBE answer at
//! once, with redis-server's replies, and matching runs outside partition
//! locks, so other clients of the same keys are not held up.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use support::*;

/// `*a*a...*a*b`: the recursive matcher tried every way to place the `a`s,
/// seconds for a 28-byte key and ×16 per 4 more bytes.
fn hostile() -> Vec<u8> {
    [b"*a".repeat(20), b"*b".to_vec()].concat()
}

/// What any one command with a hostile pattern may take: generous for a
/// debug build on a busy machine, yet far below what exponential matching
/// needs for the 40-100 byte keys used here (years).
const BOUND: Duration = Duration::from_millis(250);

/// A connection whose reads give up long before exponential matching ends,
/// so a regression fails instead of hanging.
fn conn(server: &Server) -> RawConn {
    let mut c = server.conn();
    c.set_timeout(Some(Duration::from_secs(5)));
    c
}

fn timed<A: AsRef<[u8]>>(c: &mut RawConn, args: &[A]) -> (Frame, Duration) {
    let started = Instant::now();
    let reply = c.cmd(args);
    (reply, started.elapsed())
}

/// Runs `args` on both servers: strata within BOUND, the same reply as
/// redis up to order.
fn same_reply_fast(strata: &mut RawConn, redis: &mut RawConn, args: &[&[u8]]) -> Frame {
    let (a, took) = timed(strata, args);
    let b = redis.cmd(args);
    let shown = display_command(args);
    assert!(took < BOUND, "{shown} took {took:?} on strata");
    assert!(!a.is_error(), "{shown}: {a}");
    assert_eq!(a.sorted(), b.sorted(), "{shown}: strata vs redis");
    a
}

/// Sorted, without duplicates (Redis may return an element twice while its
/// table is rehashing).
fn set_of(mut v: Vec<Frame>) -> Vec<Frame> {
    v.sort();
    v.dedup();
    v
}

/// All elements a full SCAN-family iteration returns (`args` holds the
/// command, its key if any, and a `{}` placeholder for the cursor), each call
/// within BOUND.
fn scan_all(c: &mut RawConn, args: &[&[u8]]) -> Vec<Frame> {
    let mut cursor = b"0".to_vec();
    let mut all = Vec::new();
    loop {
        let call: Vec<&[u8]> = args.iter().map(|a| if *a == b"{}" { &cursor[..] } else { a }).collect();
        let (reply, took) = timed(c, &call);
        assert!(took < BOUND, "{} took {took:?}", display_command(&call));
        let parts = reply.as_array().unwrap_or_else(|| panic!("{}: {reply}", display_command(&call)));
        all.extend(parts[1].as_array().expect("scan elements").iter().cloned());
        cursor = parts[0].as_bytes().expect("cursor").to_vec();
        if cursor == b"0" {
            return all;
        }
    }
}

/// Keys of `a`s (40-100 bytes) the hostile pattern must reject, and a few it
/// must accept; sorted.
fn victims() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = [40, 55, 70, 85, 100].iter().map(|&n| vec![b'a'; n]).collect();
    keys.push([vec![b'a'; 45], b"b".to_vec()].concat());
    keys.push([vec![b'a'; 20], b"xb".to_vec()].concat());
    keys.sort();
    keys
}

#[test]
fn hostile_keys_and_scan_match_answer_at_once_with_redis_replies() {
    let (strata, redis) = (Server::strata(), Server::redis());
    let (mut s, mut r) = (conn(&strata), redis.conn());
    for k in victims() {
        for c in [&mut s, &mut r] {
            assert_eq!(c.cmd(&[&b"SET"[..], &k, b"v"]), Frame::ok());
        }
    }
    let p = hostile();
    let matched = same_reply_fast(&mut s, &mut r, &[b"KEYS", &p]);
    assert_eq!(matched.as_array().map(<[Frame]>::len), Some(2), "{matched}");
    for count in [&b"1"[..], b"10", b"1000"] {
        let args: [&[u8]; 6] = [b"SCAN", b"{}", b"MATCH", &p, b"COUNT", count];
        let (a, b) = (set_of(scan_all(&mut s, &args)), set_of(scan_all(&mut r, &args)));
        assert_eq!(a, b, "SCAN MATCH COUNT {}", String::from_utf8_lossy(count));
        assert_eq!(a.len(), 2);
    }
}

#[test]
fn hostile_match_in_hscan_sscan_zscan_of_big_collections() {
    let (strata, redis) = (Server::strata(), Server::redis());
    let (mut s, mut r) = (conn(&strata), redis.conn());
    // Big enough to leave the compact encodings; members of 40-100 `a`s and
    // a distinct suffix, a few of them matching.
    let members: Vec<Vec<u8>> = (0..600)
        .map(|i| {
            let tail = if i % 97 == 0 { format!("{i}b") } else { format!("{i}") };
            [vec![b'a'; 40 + i % 61], tail.into_bytes()].concat()
        })
        .collect();
    for chunk in members.chunks(100) {
        let mut hset: Vec<&[u8]> = vec![b"HSET", b"h"];
        let mut sadd: Vec<&[u8]> = vec![b"SADD", b"s"];
        let mut zadd: Vec<&[u8]> = vec![b"ZADD", b"z"];
        for m in chunk {
            hset.extend([&m[..], b"v"]);
            sadd.push(m);
            zadd.extend([&b"1"[..], m]);
        }
        for c in [&mut s, &mut r] {
            for cmd in [&hset, &sadd, &zadd] {
                assert!(!c.cmd(cmd).is_error());
            }
        }
    }
    let p = hostile();
    for (cmd, key, per_item) in [(&b"HSCAN"[..], &b"h"[..], 2), (b"SSCAN", b"s", 1), (b"ZSCAN", b"z", 2)] {
        for count in [&b"10"[..], b"1000"] {
            let args: [&[u8]; 7] = [cmd, key, b"{}", b"MATCH", &p, b"COUNT", count];
            let names = |v: Vec<Frame>| set_of(v.into_iter().step_by(per_item).collect());
            let (a, b) = (names(scan_all(&mut s, &args)), names(scan_all(&mut r, &args)));
            let shown = String::from_utf8_lossy(cmd);
            assert_eq!(a, b, "{shown} MATCH hostile COUNT {}", String::from_utf8_lossy(count));
            assert_eq!(a.len(), 7, "{shown}");
        }
    }
}

#[test]
fn hostile_psubscribe_then_publish_answers_at_once_with_redis_replies() {
    let (strata, redis) = (Server::strata(), Server::redis());
    let p = hostile();
    let mut subscribers = Vec::new();
    for server in [&strata, &redis] {
        let mut sub = conn(server);
        let reply = sub.cmd(&[&b"PSUBSCRIBE"[..], &p]);
        assert_eq!(reply.as_array().map(<[Frame]>::len), Some(3), "{reply}");
        // A plain subscriber too, so PUBSUB CHANNELS has channels to match.
        let mut plain = conn(server);
        plain.cmd(&[&b"SUBSCRIBE"[..], &[b'a'; 90][..], &[vec![b'a'; 30], b"b".to_vec()].concat()]);
        plain.read_frame();
        subscribers.push((sub, plain));
    }
    let (mut s, mut r) = (conn(&strata), redis.conn());
    for channel in victims() {
        let receivers = same_reply_fast(&mut s, &mut r, &[b"PUBLISH", &channel, b"hello"]);
        let wanted = channel.ends_with(b"b");
        assert_eq!(receivers.as_int(), Some(i64::from(wanted)), "{}", String::from_utf8_lossy(&channel));
        if wanted {
            for (sub, _) in &mut subscribers {
                let msg = sub.read_frame();
                assert_eq!(msg.as_array().map(|m| m[2].clone()), Some(Frame::bulk(&channel)), "{msg}");
            }
        }
    }
    let channels = same_reply_fast(&mut s, &mut r, &[b"PUBSUB", b"CHANNELS", &p]);
    assert_eq!(channels.as_array().map(<[Frame]>::len), Some(1), "{channels}");
}

/// A client pinging, and reading a key that shares the partition of the
/// scanned keys, from another worker: its worst wait while `work` runs.
fn worst_wait_of_neighbour(server: &Server, neighbour_key: &[u8], work: impl FnOnce()) -> Duration {
    let mut neighbour = conn(server);
    let stop = Arc::new(AtomicBool::new(false));
    let worst = Arc::new(Mutex::new(Duration::ZERO));
    let key = neighbour_key.to_vec();
    let pinger = {
        let (stop, worst) = (Arc::clone(&stop), Arc::clone(&worst));
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for args in [vec![b"PING".to_vec()], vec![b"GET".to_vec(), key.clone()]] {
                    let (reply, took) = timed(&mut neighbour, &args);
                    assert!(!reply.is_error(), "{reply}");
                    let mut w = worst.lock().unwrap();
                    *w = (*w).max(took);
                }
                thread::sleep(Duration::from_millis(1));
            }
        })
    };
    thread::sleep(Duration::from_millis(50));
    work();
    stop.store(true, Ordering::Relaxed);
    pinger.join().expect("neighbour client");
    *worst.lock().unwrap()
}

#[test]
fn other_clients_are_served_during_hostile_keys() {
    // Two dedicated workers: the neighbour is on the other one, so it waits
    // only for partition locks, not for the KEYS connection's worker.
    let strata = Server::strata_with(&["--threads", "2", "--adaptive-threads", "no"]);
    let mut s = conn(&strata);
    // One hash tag: every key in one partition, the neighbour's too.
    for k in victims() {
        let tagged = [b"{t}".to_vec(), k].concat();
        assert_eq!(s.cmd(&[&b"SET"[..], &tagged, b"v"]), Frame::ok());
    }
    s.cmd(&["SET", "{t}neighbour", "v"]);
    let p = hostile();
    let mut slowest = Duration::ZERO;
    let worst = worst_wait_of_neighbour(&strata, b"{t}neighbour", || {
        for _ in 0..20 {
            for args in [vec![&b"KEYS"[..], &p], vec![b"SCAN", b"0", b"MATCH", &p, b"COUNT", b"1000"]] {
                let (reply, took) = timed(&mut s, &args);
                assert!(!reply.is_error(), "{reply}");
                slowest = slowest.max(took);
            }
        }
    });
    assert!(slowest < BOUND, "hostile KEYS/SCAN took {slowest:?}");
    assert!(worst < BOUND, "a neighbour waited {worst:?}");
}

/// Many keys in one partition and a pattern that is slow per key even in
/// linear time: KEYS and SCAN take a while, but they match after copying
/// the keys out, so a client of that partition never waits that long.
#[test]
fn long_keys_and_scan_do_not_hold_the_partition_lock() {
    let strata = Server::strata_with(&["--threads", "2", "--adaptive-threads", "no"]);
    let mut s = conn(&strata);
    s.set_timeout(Some(Duration::from_secs(60)));
    let keys = 30_000;
    let key = |i: usize| [b"{t}".to_vec(), vec![b'a'; 100], i.to_string().into_bytes()].concat();
    for start in (0..keys).step_by(1000) {
        let mut mset = vec![b"MSET".to_vec()];
        for i in start..start + 1000 {
            mset.extend([key(i), b"v".to_vec()]);
        }
        assert_eq!(s.cmd(&mset), Frame::ok());
    }
    s.cmd(&["SET", "{t}neighbour", "v"]);
    // Each key costs ~70 retries of a 30-byte run: linear, but not free.
    let p = [b"*".to_vec(), vec![b'a'; 30], b"b".to_vec()].concat();
    let mut took = Vec::new();
    let worst = worst_wait_of_neighbour(&strata, b"{t}neighbour", || {
        let count = keys.to_string();
        for args in [vec![&b"KEYS"[..], &p], vec![b"SCAN", b"0", b"MATCH", &p, b"COUNT", count.as_bytes()]] {
            let (reply, t) = timed(&mut s, &args);
            assert!(!reply.is_error(), "{reply}");
            took.push(t);
        }
    });
    let shortest = *took.iter().min().unwrap();
    // The test means something only if matching takes long enough to notice.
    assert!(shortest > Duration::from_millis(150), "KEYS/SCAN took only {took:?}; use more keys");
    assert!(worst < shortest / 3, "a neighbour waited {worst:?} while KEYS/SCAN took {took:?}");
}

fn words(s: &[u8]) -> Vec<Vec<u8>> {
    s.split(|&c| c == b' ').map(<[u8]>::to_vec).collect()
}

/// Edge-case and random patterns through KEYS and SCAN MATCH on both
/// servers with the same keys: the replies agree (sorted).
#[test]
fn glob_edge_cases_match_redis_in_keys_and_scan() {
    let (strata, redis) = (Server::strata(), Server::redis());
    let (mut s, mut r) = (conn(&strata), redis.conn());
    // Space-separated, plus the empty key.
    let mut keys = words(b"a A b ab ba aab \\ ] [ - ^ * ? a*b a?b [a] \xff \x80 \x7f \x01 Z z _ ` hello hallo hxllo");
    keys.extend(words(b"user:1:name user:22:mail"));
    keys.push(Vec::new());
    keys.extend([40, 64].iter().map(|&n| vec![b'a'; n]));
    keys.push([vec![b'a'; 30], b"b".to_vec()].concat());
    for k in &keys {
        for c in [&mut s, &mut r] {
            assert_eq!(c.cmd(&[&b"SET"[..], k, b"v"]), Frame::ok());
        }
    }
    let mut patterns = words(b"* ** ? ?? [ [^ [^] [] []] \\ a\\ \\a [a [z-a] [A-a] [a-] [-a] [\\] [\\]] [^a");
    patterns.extend(words(b"[a-\xff] [\x01-\x80] [\x80-\xff] *[ *\\ a* *a *a* a*b *?* [[] [*] [?] \\* \\? []-] [!a]"));
    patterns.extend(words(b"h[ae]llo h[^e]llo h[a-x]llo user:*:name user:?:*"));
    patterns.push(Vec::new());
    patterns.push(hostile());
    patterns.push([b"*a".repeat(40), b"*".to_vec()].concat());
    patterns.push([b"*[a-b]".repeat(20), b"?".to_vec()].concat());
    // Redis gives up beyond 1000 nested `*` groups unless the last is final.
    patterns.push(b"*a".repeat(1001));
    patterns.push([b"*a".repeat(1000), b"*".to_vec()].concat());
    // Seeded random patterns over the characters that mean something.
    let mut rng = Rng::new(36_021);
    let alphabet = b"ab*?[]^-\\\xff";
    for _ in 0..300 {
        let len = 1 + rng.index(8);
        patterns.push((0..len).map(|_| *rng.pick(alphabet)).collect());
    }
    for p in &patterns {
        same_reply_fast(&mut s, &mut r, &[b"KEYS", p]);
        let args: [&[u8]; 6] = [b"SCAN", b"{}", b"MATCH", p, b"COUNT", b"7"];
        let (a, b) = (set_of(scan_all(&mut s, &args)), set_of(scan_all(&mut r, &args)));
        assert_eq!(a, b, "SCAN MATCH {:?}", String::from_utf8_lossy(p));
    }
}
