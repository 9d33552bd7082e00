//! One crash harness for the durability promises, shared by
//! tests/durability.rs (kill -9) and tests/power_loss.rs (kill -9, then the
//! file system loses everything not fsynced): writers under load keep one
//! log of acknowledged writes; after each crash and restart every key is
//! checked against it with one definition of a lost write and of a write
//! lost past the mode's bound ([`crash_rounds`]).
//!
//! `STRATA_DUR_TEST_BROKEN=1` runs every node these tests start with sync
//! replies that do not wait for the fsync (the `test-hooks` feature's
//! `STRATA_TEST_ACK_BEFORE_FSYNC=1`): the sync tests must then fail, which
//! shows they can.

use super::{Frame, RawConn, Server, wait_for};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Writer threads, each with its own keys.
pub const THREADS: usize = 4;
pub const KEYS_PER_THREAD: u64 = 64;

/// Each round runs until its writers have this many acknowledgements (as
/// well as for its time) before the crash: a loaded machine slows them, and
/// the tests' "enough load" floors hold however slow it gets.
pub const MIN_ACKED_PER_ROUND: u64 = 150;

/// The node's lag clock counts whole µs at both ends (now, and the time
/// the oldest write not yet durable was appended).
pub const LAG_CLOCK_ROUNDING: Duration = Duration::from_micros(2);

/// Whether this run is the deliberately broken one (`STRATA_DUR_TEST_BROKEN=1`).
pub fn broken() -> bool {
    std::env::var("STRATA_DUR_TEST_BROKEN").is_ok_and(|v| v == "1")
}

/// Starts strata-node with `args` and `env` (and, in the broken run, the
/// hook that voids sync's promise) and waits up to `load` for its log to be
/// replayed.
pub fn start_durable(args: &[&str], env: &[(&str, &str)], load: Duration) -> Server {
    let mut env = env.to_vec();
    if broken() {
        env.push(("STRATA_TEST_ACK_BEFORE_FSYNC", "1"));
    }
    let server = Server::strata_with_env(args, &env);
    wait_loaded(&server, load);
    if broken() && args.windows(2).any(|a| a == ["--durability", "sync"]) {
        // A binary built without the hooks would keep its promise and
        // "fail to fail": the node says when the hook is on.
        assert!(server.logs().contains("STRATA_TEST_ACK_BEFORE_FSYNC"), "the hook is not on\n{}", server.logs());
    }
    server
}

/// Waits until data commands stop getting -LOADING.
pub fn wait_loaded(server: &Server, load: Duration) {
    let mut c = server.conn();
    let ok = wait_for(load, || !c.cmd(&["EXISTS", "probe"]).is_error());
    assert!(ok, "still loading after {load:?}\n{}", server.logs());
}

/// What a crash test runs on.
pub trait Crash {
    /// Names the crash in reports ("kill", "power cut").
    const WHAT: &'static str;
    /// A node on the test's data, loaded.
    fn start(&mut self) -> Server;
    /// How long the writers run in `round` before the crash (at least until
    /// [`MIN_ACKED_PER_ROUND`] acknowledgements).
    fn run_for(&self, round: usize) -> Duration;
    /// The rest of the crash, once the node is dead (killed -9 and reaped)
    /// and the writers have stopped.
    fn after_kill(&mut self) {}
}

/// A value: its writer, its counter, and padding whose loss shows.
fn value(t: usize, c: u64) -> String {
    format!("t{t}-{c:012}-{}", "v".repeat(50))
}

/// The counter of a value of writer `t`; None for anything it never wrote.
fn parse_counter(t: usize, v: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(v).ok()?;
    let (c, pad) = s.strip_prefix(&format!("t{t}-"))?.split_once('-')?;
    (pad == "v".repeat(50)).then(|| c.parse().ok())?
}

/// Per key: the last acknowledged counter and when its reply arrived, and
/// the last counter sent.
#[derive(Default, Clone, Copy)]
struct KeyLog {
    acked: Option<(u64, Instant)>,
    sent: u64,
}

#[derive(Debug, Default)]
pub struct Outcome {
    pub acked: u64,
    /// Acknowledged writes missing after the restart.
    pub lost: u64,
    /// ...of which a later acknowledgement proves the node broke its
    /// promise (see [`crash_rounds`]).
    pub broken: u64,
    /// Values never written.
    pub phantom: u64,
    /// The oldest lost write's acknowledgement before its crash: how long
    /// the flush in flight took, not a bound the node promises.
    pub oldest_lost: Duration,
    /// The most any acknowledged request was sent after a lost write's
    /// acknowledgement: what the bound is checked against.
    pub acked_after_lost: Duration,
}

/// The clients' log of acknowledged writes: one per writer thread.
struct AckLog {
    writers: Vec<Arc<Mutex<Vec<KeyLog>>>>,
    /// Each writer's last counter sent: the next round goes on from it.
    counters: [u64; THREADS],
}

/// One round's writers.
struct Writers {
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicU64>,
    /// Each ends with (its last counter, writes acknowledged, when the last
    /// acknowledged request was sent).
    handles: Vec<JoinHandle<(u64, u64, Option<Instant>)>>,
}

impl AckLog {
    fn new() -> AckLog {
        AckLog {
            writers: (0..THREADS)
                .map(|_| Arc::new(Mutex::new(vec![KeyLog::default(); KEYS_PER_THREAD as usize])))
                .collect(),
            counters: [0; THREADS],
        }
    }

    /// Starts one writer per thread against `addr`: each SETs its keys in
    /// turn, one request at a time, logging what it sent and what was
    /// acknowledged, until stopped or the connection fails.
    fn write(&self, addr: SocketAddr) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let round_acked = Arc::new(AtomicU64::new(0));
        let handles = (0..THREADS)
            .map(|t| {
                let (log, stop, round_acked, mut c) =
                    (self.writers[t].clone(), stop.clone(), round_acked.clone(), self.counters[t]);
                std::thread::spawn(move || {
                    let (mut acked, mut last_acked_sent) = (0u64, None);
                    let Ok(mut conn) = RawConn::connect(addr) else { return (c, acked, last_acked_sent) };
                    conn.set_timeout(Some(Duration::from_secs(5)));
                    while !stop.load(Ordering::Relaxed) {
                        c += 1;
                        let k = c % KEYS_PER_THREAD;
                        log.lock().unwrap()[k as usize].sent = c;
                        let sent = Instant::now();
                        if conn.try_send(&["SET", &format!("w{t}:{k}"), &value(t, c)]).is_err() {
                            break;
                        }
                        match conn.try_read_frame() {
                            Ok(Some(f)) if f == Frame::ok() => {
                                log.lock().unwrap()[k as usize].acked = Some((c, Instant::now()));
                                last_acked_sent = Some(sent);
                                acked += 1;
                                round_acked.fetch_add(1, Ordering::Relaxed);
                            }
                            _ => break,
                        }
                    }
                    (c, acked, last_acked_sent)
                })
            })
            .collect();
        Writers { stop, acked: round_acked, handles }
    }

    /// Stops `writers` (their node is dead); adds their acknowledgements to
    /// `out`; returns when the last acknowledged request was sent.
    fn stop(&mut self, writers: Writers, out: &mut Outcome) -> Option<Instant> {
        writers.stop.store(true, Ordering::Relaxed);
        let mut last_acked_sent: Option<Instant> = None;
        for (t, h) in writers.handles.into_iter().enumerate() {
            let (c, acked, sent) = h.join().unwrap();
            self.counters[t] = c;
            out.acked += acked;
            last_acked_sent = last_acked_sent.max(sent);
        }
        last_acked_sent
    }

    /// Checks every key on the restarted node against the log; what
    /// survived becomes the new baseline, durable since before the crash.
    ///
    /// A write is lost when it was acknowledged and the key holds neither
    /// it nor a later value. A lost write acknowledged at R breaks the
    /// promise if a request sent after R + `hold` was acknowledged (see
    /// [`crash_rounds`]). A value its writer never sent is a phantom.
    fn check<C: Crash>(&self, server: &Server, round: usize, crash: Crashed, out: &mut Outcome) {
        let mut conn = server.conn();
        for (t, log) in self.writers.iter().enumerate() {
            let mut log = log.lock().unwrap();
            for k in 0..KEYS_PER_THREAD {
                let entry = &mut log[k as usize];
                let got = conn.cmd(&["GET", &format!("w{t}:{k}")]);
                let found = match got.as_bytes().map(|v| parse_counter(t, v)) {
                    Some(Some(c)) if c <= entry.sent && c % KEYS_PER_THREAD == k => Some(c),
                    Some(_) => {
                        out.phantom += 1;
                        None
                    }
                    None => None,
                };
                if let Some((acked, at)) = entry.acked {
                    if found.is_none_or(|f| f < acked) {
                        out.lost += 1;
                        out.oldest_lost = out.oldest_lost.max(crash.at.saturating_duration_since(at));
                        let later = crash.last_acked_sent.map(|s| s.saturating_duration_since(at));
                        out.acked_after_lost = out.acked_after_lost.max(later.unwrap_or_default());
                        if later.is_some_and(|l| l > crash.hold + LAG_CLOCK_ROUNDING) {
                            out.broken += 1;
                            eprintln!(
                                "{} round {round}: w{t}:{k} acked {acked} {:?} before the {}, found {found:?}; \
                                 a request sent {later:?} after that ack was acknowledged",
                                crash.mode,
                                crash.at - at,
                                C::WHAT,
                            );
                        }
                    }
                }
                entry.acked = found.map(|f| (f, crash.at));
            }
        }
    }
}

/// One crash, as the check needs it.
struct Crashed {
    mode: &'static str,
    at: Instant,
    last_acked_sent: Option<Instant>,
    hold: Duration,
}

/// Writes under load and crashes `rounds` times (kill -9, then
/// [`Crash::after_kill`]); after each restart checks every key against the
/// clients' log.
///
/// `hold` is the mode's back-pressure bound (`hold_beyond`): no reply
/// leaves while the oldest write not yet durable is older than that. So
/// if a request sent at S was acknowledged, every write appended before
/// S - `hold` was durable when it was; a write whose reply arrived at R
/// was appended before R. A lost write acknowledged at R therefore breaks
/// the promise if any request sent after R + `hold` was acknowledged
/// before the crash. Each clock reading errs towards passing only by the
/// time a reply or request spends in transit, and none is compared with
/// the crash's time: a flush starved of CPU or disk on a loaded machine
/// loses more writes, which the mode allows, without failing the test.
pub fn crash_rounds<C: Crash>(target: &mut C, mode: &'static str, rounds: usize, hold: Duration) -> Outcome {
    let mut log = AckLog::new();
    let mut out = Outcome::default();
    for round in 0..rounds {
        let mut server = target.start();
        let writers = log.write(server.addr());
        std::thread::sleep(target.run_for(round));
        wait_for(Duration::from_secs(10), || writers.acked.load(Ordering::Relaxed) >= MIN_ACKED_PER_ROUND);
        let at = Instant::now();
        server.kill();
        let killed = server;
        let last_acked_sent = log.stop(writers, &mut out);
        target.after_kill();
        let server = target.start();
        let broken_before = out.broken;
        log.check::<C>(&server, round, Crashed { mode, at, last_acked_sent, hold }, &mut out);
        if out.broken > broken_before {
            eprintln!(
                "{mode} round {round}: the crashed node\n{}\nthe restarted node\n{}",
                killed.logs(),
                server.logs()
            );
        }
    }
    out
}
