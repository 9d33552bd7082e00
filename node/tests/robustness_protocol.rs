//! Protocol edges, byte for byte against redis-server 7.0.15: cross-protocol
//! (HTTP) requests, malformed lengths, the unauthenticated limits, the
//! bounded unknown-command error; and a seeded fuzzer for the RESP parser.
//!
//! The fuzzer runs a few seconds by default. Longer runs:
//! `STRATA_FUZZ_SECS=600 STRATA_FUZZ_SEED=7 cargo test -p strata-node --release
//! --test robustness_protocol resp_parser_fuzz -- --nocapture`
//! (`STRATA_FUZZ_ITERS` stops after that many inputs instead). The corpus it
//! mutates is `node/tests/corpus/resp/*.bin` plus the seeds below; a failing
//! input is printed and written to the temp dir as `strata-fuzz-fail.bin`.

mod support;

use std::time::{Duration, Instant};
use strata_node::protocol::{FIXED_ERRORS, Limits, Parse, Request, expected_dollar, parse_request};
use support::*;

const SECURITY_WARNING: &str = "Possible SECURITY ATTACK detected. It looks like somebody is sending POST or Host: \
     commands to Redis. This is likely due to an attacker attempting to use Cross Protocol Scripting to compromise \
     your Redis instance. Connection aborted.";

fn show(b: &[u8]) -> String {
    b.escape_ascii().to_string()
}

/// Sends `bytes` to both servers on fresh connections and checks the replies
/// and whether the connection closed are the same. A request Redis leaves
/// waiting is judged after `wait`; a mismatch is retried once with a longer
/// wait, so a slow machine does not make the test flaky.
fn same_as_redis(strata: &Server, redis: &Server, bytes: &[u8], wait: Duration) {
    let run = |wait| (exchange_raw(strata.addr(), bytes, wait), exchange_raw(redis.addr(), bytes, wait));
    let (mut a, mut b) = run(wait);
    if a != b {
        (a, b) = run(wait.max(Duration::from_secs(1)) * 2);
    }
    assert_eq!(show(&a.0), show(&b.0), "reply (strata, redis) to {}", show(bytes));
    assert_eq!(a.1, b.1, "closed (strata, redis) after {}", show(bytes));
}

fn assert_alive(server: &Server) {
    assert_eq!(server.conn().cmd(&["PING"]), Frame::simple("PONG"), "{} stopped serving", server.name());
}

#[test]
fn http_requests_are_refused_as_cross_protocol_attacks_like_redis() {
    let strata = Server::strata();
    let redis = Server::redis();
    let post = b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: curl/8.5.0\r\nContent-Length: 15\r\n\
                 Content-Type: application/x-www-form-urlencoded\r\n\r\nSET pwned yes\r\n";
    // A GET line is a (wrong) GET command; its reply is dropped with the batch.
    let get = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\n\r\nSET pwned yes\r\n";
    for server in [&strata, &redis] {
        // Connected before the attack, used after it.
        let mut other = server.conn();
        assert_eq!(other.cmd(&["SET", "before", "1"]), Frame::ok());
        for request in [&post[..], &get[..]] {
            let (reply, closed) = exchange_raw(server.addr(), request, Duration::from_secs(3));
            assert_eq!(show(&reply), "", "{}: reply to {}", server.name(), show(request));
            assert!(closed, "{}: connection kept after {}", server.name(), show(request));
        }
        // Also when the HTTP lines come after commands, or as multibulk.
        let mut c = server.conn();
        c.send_raw(b"SET a 1\r\nhost: x\r\nSET pwned yes\r\n");
        assert!(c.is_closed(), "{}: Host: line kept the connection", server.name());
        let mut c = server.conn();
        c.send(&["post", "/"]);
        assert!(c.is_closed(), "{}: multibulk POST kept the connection", server.name());
        assert_eq!(other.cmd(&["EXISTS", "pwned"]), Frame::int(0), "{}: the HTTP body ran", server.name());
        assert_eq!(other.cmd(&["GET", "before"]), Frame::bulk("1"), "{}", server.name());
        assert_alive(server);
    }
    // Logged, but once a minute at most.
    for server in [&strata, &redis] {
        let logs = server.logs();
        assert_eq!(logs.matches(SECURITY_WARNING).count(), 1, "{} logs:\n{logs}", server.name());
    }
}

#[test]
fn length_edges_match_redis() {
    let strata = Server::strata();
    let redis = Server::redis();
    let cases: &[&[u8]] = &[
        b"*01\r\n$4\r\nPING\r\n",                // leading zero in a multibulk count
        b"*1\r\n$04\r\nPING\r\n",                // leading zero in a bulk length
        b"*-0\r\n*1\r\n$4\r\nPING\r\n",          // negative zero count
        b"*1\r\n$-0\r\n",                        // negative zero length
        b"*00\r\n",                              //
        b"*+1\r\n$4\r\nPING\r\n",                // no '+' sign
        b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n",    // empty requests are skipped
        b"*-9223372036854775808\r\nPING\r\n",    // i64::MIN is a valid (empty) count
        b"*-9223372036854775809\r\nPING\r\n",    // one below is not
        b"*2147483648\r\n",                      // over INT_MAX
        b"*1\r\n$9223372036854775807\r\n",       // over proto-max-bulk-len
        b"*1\rx$4\r\nPING\r\n",                  // a header ends at CR; the next byte is skipped
        b"*1\r\n$4\rxPING\r\n",                  //
        b"*1\r\n\r\n",                           // "expected '$', got ' '" (CR printed as space)
        b"*1\r\n\x01\r\n",                       // control byte quoted raw
        b"*1\r\n\xff\r\n",                       // non-UTF-8 byte quoted raw
        b"*1\r\n:5",                             // not an error until the line ends
        b"*1\x00\r\n$4\r\nPING\r\n",             // a NUL hides the header's end
        b"PI\x00NG\r\nPING\r\n",                 // and an inline line's end
        b"*1\r\n$4\r\nPING\r\n\r\n\n  \r\n",     // blank inline lines after a request
        b"*2\r\n$4\r\nECHO\r\n$3\r\na\x00b\r\n", // NUL inside a bulk is data
    ];
    for case in cases {
        same_as_redis(&strata, &redis, case, Duration::from_millis(300));
    }
    assert_alive(&strata);
}

#[test]
fn unauthenticated_limits_match_redis() {
    let strata = Server::strata_with(&["--requirepass", "pw"]);
    let redis = Server::redis_with(&["--requirepass", "pw"]);
    let cases: &[&[u8]] = &[
        b"*11\r\n",                                               // unauthenticated multibulk length
        b"*10\r\n$16385\r\n",                                     // unauthenticated bulk length
        b"*10\r\n$16384\r\n",                                     // both at the limit: waits
        b"*011\r\n",                                              // malformed is still "invalid"
        b"*1\r\n$016385\r\n",                                     //
        b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*11\r\n$4\r\nPING\r\n", // authenticated: no limit
        b"PING a b c d e f g h i j k\r\n",                        // inline has no such limit
    ];
    for case in cases {
        same_as_redis(&strata, &redis, case, Duration::from_millis(300));
    }
}

#[test]
fn unknown_command_error_is_bounded_like_redis() {
    let strata = Server::strata();
    let redis = Server::redis();
    let many: Vec<String> = (0..100).map(|i| format!("arg{i}")).collect();
    let mut cases: Vec<Vec<Vec<u8>>> = vec![
        vec![b"x".repeat(200), b"a".repeat(200)],
        std::iter::once("foo".to_string()).chain(many).map(String::into_bytes).collect(),
        vec![b"fo\0o".to_vec(), b"a\0b".to_vec(), b"c".to_vec()],
        vec![b"foo".to_vec(), b"\xff\xfe".to_vec(), b"a\r\nb".to_vec()],
        vec![b"foo".to_vec(), b"a".repeat(124), b"bcdef".to_vec(), b"z".to_vec()],
        vec![b"foo".to_vec(), b"a".repeat(123), b"bcdef".to_vec(), b"z".to_vec()],
        vec![b"foo".to_vec(), b"a".repeat(126), b"b".to_vec()],
        vec![b"foo".to_vec(), Vec::new()],
        vec![b"foo".to_vec()],
    ];
    // A 10 MB request: the error stays short.
    cases.push(std::iter::once(b"nosuch".to_vec()).chain((0..10).map(|_| vec![b'v'; 1 << 20])).collect());
    for args in &cases {
        let bytes = encode_command(args);
        let (mut a, mut b) = (strata.conn(), redis.conn());
        a.send_raw(&bytes);
        b.send_raw(&bytes);
        let (a, b) = (a.read_frame(), b.read_frame());
        assert_eq!(a, b, "unknown command {}", show(&bytes[..bytes.len().min(200)]));
        assert!(a.encode().len() < 400, "error of {} bytes", a.encode().len());
    }
}

#[test]
fn corpus_replies_match_redis() {
    let strata = Server::strata();
    let redis = Server::redis();
    let corpus = load_corpus();
    assert!(corpus.len() >= 20, "corpus missing: {} files", corpus.len());
    for input in &corpus {
        same_as_redis(&strata, &redis, input, Duration::from_millis(300));
    }
}

/// Mutated corpus inputs, sent to both servers: same bytes back, same close.
/// `STRATA_FUZZ_REDIS_CASES` sets how many (default 100).
#[test]
fn mutated_requests_match_redis() {
    let strata = Server::strata();
    let redis = Server::redis();
    let cases = env_num("STRATA_FUZZ_REDIS_CASES").unwrap_or(100);
    let corpus = load_corpus();
    let mut rng = Rng::new(env_num("STRATA_FUZZ_SEED").unwrap_or(0x5eed) ^ 0xd1ff);
    for _ in 0..cases {
        let input = mutate(&mut rng, &corpus);
        same_as_redis(&strata, &redis, &input, Duration::from_millis(150));
    }
    assert_alive(&strata);
}

// ---- the in-process fuzzer -------------------------------------------------

fn env_num(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn load_corpus() -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/resp");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

const INTERESTING_BYTES: &[u8] = b"\r\n\0*$-+:0 \t\"'\\\xff";
const INTERESTING_LENGTHS: &[&str] = &[
    "0",
    "1",
    "-1",
    "-0",
    "00",
    "01",
    "+1",
    "",
    "10",
    "11",
    "16384",
    "16385",
    "2147483647",
    "2147483648",
    "536870912",
    "536870913",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "99999999999999999999",
    "123456789012345678901",
    "1 ",
    "1\0",
];

/// One mutation (or a few) of a corpus entry.
fn mutate(rng: &mut Rng, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut b = rng.pick(corpus).clone();
    for _ in 0..1 + rng.index(3) {
        let at = rng.index(b.len() + 1);
        // A position inside `b` (when it is not empty).
        let inside = at.min(b.len().saturating_sub(1));
        match rng.index(10) {
            0 if !b.is_empty() => b[inside] ^= 1 << rng.index(8),
            1 if !b.is_empty() => b[inside] = *rng.pick(INTERESTING_BYTES),
            2 => b.truncate(at),
            3 => {
                // Splice: our head, another entry's tail.
                let other = rng.pick(corpus);
                let from = rng.index(other.len() + 1);
                b.truncate(at);
                b.extend_from_slice(&other[from..]);
            }
            4 => {
                // Replace the number after a '*' or '$'.
                let marks: Vec<usize> = (0..b.len()).filter(|&i| b[i] == b'*' || b[i] == b'$').collect();
                if let Some(&m) = marks.get(rng.index(marks.len())) {
                    let end = (m + 1..b.len()).find(|&i| !b[i].is_ascii_digit() && b[i] != b'-').unwrap_or(b.len());
                    b.splice(m + 1..end, rng.pick(INTERESTING_LENGTHS).bytes());
                }
            }
            5 => {
                // Nest: a request wrapped as the argument of another.
                let mut outer = format!("*{}\r\n", 1 + rng.index(3)).into_bytes();
                outer.extend_from_slice(&b);
                b = outer;
            }
            6 => {
                let other = rng.pick(corpus).clone();
                b.splice(at..at, other);
            }
            7 if !b.is_empty() => {
                // Duplicate a chunk.
                let len = rng.index(16).min(b.len() - inside);
                let chunk = b[inside..inside + len].to_vec();
                b.splice(inside..inside, chunk);
            }
            8 => {
                const INLINE: [&[u8]; 6] = [
                    b"SET k \"a b\"\r\n",
                    b"ECHO 'x\\'y'\r\n",
                    b"ECHO \"\\x41\\xzz\"\r\n",
                    b"\r\n",
                    b"PING\n",
                    b"ECHO \"a\"b\r\n",
                ];
                let inline = *rng.pick(&INLINE);
                b.splice(at..at, inline.iter().copied());
            }
            _ => {
                for _ in 0..rng.index(8) {
                    b.insert(at.min(b.len()), rng.next() as u8);
                }
            }
        }
    }
    b
}

fn is_redis_error(e: &[u8]) -> bool {
    FIXED_ERRORS.iter().any(|f| f.as_bytes() == e) || (0..=255).any(|b| expected_dollar(b).as_bytes() == e)
}

/// What a request parsed to, in owned form.
#[derive(Debug, PartialEq)]
enum Outcome {
    Complete(Vec<Vec<u8>>, usize),
    Incomplete,
    Error(Vec<u8>),
}

fn parse_owned(buf: &[u8], limits: &Limits, req: &mut Request) -> Outcome {
    match parse_request(buf, limits, req) {
        Parse::Complete => {
            let args = match &req.owned {
                Some(words) => words.clone(),
                None => req
                    .args
                    .iter()
                    .map(|&(s, l)| buf.get(s as usize..(s + l) as usize).expect("span inside the input").to_vec())
                    .collect(),
            };
            Outcome::Complete(args, req.consumed)
        }
        Parse::Incomplete { hint } => {
            assert!(hint == 0 || hint > buf.len(), "hint {hint} for {} bytes", buf.len());
            Outcome::Incomplete
        }
        Parse::Error(e) => Outcome::Error(e.as_bytes().to_vec()),
    }
}

/// What the parser says once `bytes` has arrived `step` bytes at a time, as
/// a connection would see it: the first answer other than "incomplete".
fn fed_in_steps(bytes: &[u8], step: usize, limits: &Limits, req: &mut Request) -> Outcome {
    let mut n = 0;
    loop {
        n = (n + step).min(bytes.len());
        let r = parse_owned(&bytes[..n], limits, req);
        if r != Outcome::Incomplete || n == bytes.len() {
            return r;
        }
    }
}

/// Every invariant, on every request of `input` in turn, as a connection
/// would parse it.
fn check(input: &[u8], limits: &Limits, req: &mut Request) {
    let mut pos = 0;
    while pos < input.len() {
        let rest = &input[pos..];
        let at_once = parse_owned(rest, limits, req);
        match &at_once {
            Outcome::Complete(args, consumed) => {
                assert!(*consumed > 0 && *consumed <= rest.len(), "consumed {consumed} of {}", rest.len());
                assert!(args.iter().map(|a| a.len()).sum::<usize>() <= *consumed, "args longer than the input");
                // The same request alone, and arriving in pieces.
                let mine = &rest[..*consumed];
                assert_eq!(parse_owned(mine, limits, req), at_once, "request alone");
                let step = if mine.len() <= 300 { 1 } else { mine.len() / 97 + 1 };
                assert_eq!(fed_in_steps(mine, step, limits, req), at_once, "fed {step} bytes at a time");
                pos += consumed;
            }
            Outcome::Error(e) => {
                assert!(is_redis_error(e), "not one of Redis's texts: {}", show(e));
                let step = if rest.len() <= 300 { 1 } else { rest.len() / 97 + 1 };
                if step == 1 {
                    assert_eq!(fed_in_steps(rest, 1, limits, req), at_once, "fed byte by byte");
                }
                return;
            }
            Outcome::Incomplete => {
                // No prefix can have failed either.
                if rest.len() <= 300 {
                    assert_eq!(fed_in_steps(rest, 1, limits, req), at_once, "fed byte by byte");
                }
                return;
            }
        }
    }
}

#[test]
fn resp_parser_fuzz() {
    let secs = env_num("STRATA_FUZZ_SECS").unwrap_or(3);
    let max_iters = env_num("STRATA_FUZZ_ITERS").unwrap_or(u64::MAX);
    let seed = env_num("STRATA_FUZZ_SEED").unwrap_or(0x5eed);
    let corpus = load_corpus();
    assert!(!corpus.is_empty());
    let limits = [
        Limits::default(),
        Limits { unauthenticated: true, ..Limits::default() },
        // Small limits, so the fuzzer reaches the "too big" paths.
        Limits { max_bulk_len: 64, max_inline_len: 48, ..Limits::default() },
    ];
    let mut rng = Rng::new(seed);
    let mut req = Request::default();
    let start = Instant::now();
    let mut iters = 0u64;
    while iters < max_iters && start.elapsed() < Duration::from_secs(secs) {
        // Corpus entries as they are first, then mutations.
        let input = match corpus.get(iters as usize) {
            Some(seed) => seed.clone(),
            None => mutate(&mut rng, &corpus),
        };
        for l in &limits {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&input, l, &mut req)));
            if let Err(panic) = r {
                let path = std::env::temp_dir().join("strata-fuzz-fail.bin");
                let _ = std::fs::write(&path, &input);
                let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
                panic!(
                    "seed {seed}, input #{iters} with {l:?}: {msg}\ninput ({} bytes, saved to {}): {}",
                    input.len(),
                    path.display(),
                    show(&input)
                );
            }
        }
        iters += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!("resp_parser_fuzz: {iters} inputs in {secs:.1}s ({:.0}/s), seed {seed}", iters as f64 / secs);
    assert!(iters >= corpus.len() as u64, "the corpus itself was not checked");
}
