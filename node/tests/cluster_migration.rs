//! Live slot migration (issue 23) between real nodes, as the contract in
//! the notes has it: `STRATA.MIGRATE START` on the source's admin
//! port, STATUS polled until the migration resolves, then the confirming
//! epoch pushed (target first, source last).
//!
//! Three nodes in cluster mode, each on a data dir of its own: the source
//! (node 0, slots 0-5460), the target (node 1, 5461-10922) and a bystander
//! (node 2, 10923-16383). Slots [`MOVING`] go from the source to the target
//! while writers keep a log of every acknowledged write: a pipelined writer
//! on a plain port (SETs and INCRs on keys of moving and staying slots) and
//! a cluster-style client on the direct ports that follows MOVED. After the
//! migration (and any crash, kill -9 and restart) every acknowledged write
//! must be readable from its slot's owner and a slot's keys must exist on
//! its owner only.
//!
//! The crash matrix: each `STRATA_TEST_CRASH_AT` point of the contract on
//! the node that reaches it, and kill -9 of the source, the target or both
//! at a random moment (`STRATA_TEST_SEED` repeats one); the dead nodes
//! restarted on their data dirs without hooks, the migration resolved
//! (committed: confirmed; failed: the source kept the slots, and a retry
//! must commit), then the check.
//!
//! `migrate_delete_early_loses_writes_and_the_check_sees_it` runs the
//! deliberately broken source (`STRATA_TEST_MIGRATE_DELETE_EARLY=1`) and
//! passes only when the check catches the loss. Slots mostly on the disk
//! tier move with the source's memory within maxmemory; the admin
//! commands' refusals, CANCEL and a dead target are checked as worded.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use support::cluster::key_slot;
use support::{DataDir, Frame, RawConn, Rng, Server, encode_command, free_port, wait_for};

/// The slots that move, source to target.
const MOVING: (u16, u16) = (0, 2047);
const MOVING_WIRE: &str = "0-2047";
const RANGES: [&str; 3] = ["0-5460", "5461-10922", "10923-16383"];
/// After the move.
const MOVED_RANGES: [&str; 3] = ["2048-5460", "0-2047,5461-10922", "10923-16383"];
const SOURCE: usize = 0;
const TARGET: usize = 1;
const BYSTANDER: usize = 2;

/// Keys of the moving slots written before the migration (what the
/// snapshot carries), and their size.
const PRELOAD: usize = 3000;
const PRELOAD_VALUE: usize = 200;
/// The source's pause between snapshot batches: long enough to crash in
/// the snapshot and to write meanwhile.
const BATCH_DELAY_MS: &str = "50";
/// Keys per writer: half in moving slots, half elsewhere.
const WRITER_KEYS: usize = 48;
const PIPELINE: usize = 16;
/// How long a migration (or its resolution after a crash) may take.
const RESOLVE: Duration = Duration::from_secs(60);

fn in_moving(slot: u16) -> bool {
    (MOVING.0..=MOVING.1).contains(&slot)
}

/// `n` keys named `{prefix}{i}` in moving slots and `n` in others.
fn keys(prefix: &str, n: usize) -> Vec<String> {
    let (mut moving, mut staying) = (Vec::new(), Vec::new());
    let mut i = 0;
    while moving.len() < n || staying.len() < n {
        let k = format!("{prefix}{i}");
        i += 1;
        let list = if in_moving(key_slot(k.as_bytes())) { &mut moving } else { &mut staying };
        if list.len() < n {
            list.push(k);
        }
    }
    moving.into_iter().chain(staying).collect()
}

fn node_id(n: usize) -> String {
    format!("{:040x}", 0x23_0000 + n)
}

/// One node: its ports (kept across restarts), its data dir and the
/// arguments it was started with.
struct Node {
    server: Server,
    n: usize,
    plain: u16,
    direct: u16,
    admin: u16,
    id: String,
    args: Vec<String>,
}

impl Node {
    fn start(n: usize, data: &str, durability: &str, extra: &[&str], env: &[(&str, &str)]) -> Node {
        let (plain, direct, admin) = (free_port(), free_port(), free_port());
        let mut args: Vec<String> = [
            "--port",
            &plain.to_string(),
            "--cluster-enabled",
            "yes",
            "--cluster-direct-port",
            &direct.to_string(),
            "--cluster-port",
            &admin.to_string(),
            "--dir",
            data,
            "--durability",
            durability,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let server = Server::strata_with_env(&refs, env);
        let node = Node { server, n, plain, direct, admin, id: node_id(n), args };
        node.wait_loaded();
        node
    }

    /// Starts the node again (same ports, data dir and arguments, no test
    /// hooks) once it is dead or killed, and waits for its log replay.
    fn restart(&mut self) {
        self.server.kill();
        let refs: Vec<&str> = self.args.iter().map(String::as_str).collect();
        self.server = Server::strata_with(&refs);
        self.wait_loaded();
    }

    /// Waits for the log replay: the node answers -LOADING until it is done,
    /// even on a fresh directory (a loaded CI machine took long enough for
    /// the first preload SET to see it).
    fn wait_loaded(&self) {
        let mut c = connect(self.direct);
        let ok = wait_for(Duration::from_secs(30), || {
            // A key's command would get MOVED first; this one reaches the gate.
            c.try_send(&["CLUSTER", "COUNTKEYSINSLOT", "0"]).is_ok()
                && matches!(c.try_read_frame(), Ok(Some(f)) if !f.error_message().is_some_and(|e| e.starts_with("LOADING")))
        });
        assert!(ok, "node {} still loading\n{}", self.n, self.server.logs());
    }

    fn member(&self, ranges: &str) -> String {
        format!("{} 127.0.0.1 - {} {} {ranges} {}", self.id, self.direct, self.plain, self.admin)
    }

    fn direct(&self) -> RawConn {
        connect(self.direct)
    }

    fn admin(&self) -> RawConn {
        connect(self.admin)
    }

    fn tail(&self) -> String {
        let logs = self.server.logs();
        let lines: Vec<&str> = logs.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

fn connect(port: u16) -> RawConn {
    let mut c = RawConn::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("connect to {port}: {e}"));
    c.set_timeout(Some(Duration::from_secs(15)));
    c
}

/// Three nodes and where they are in the migration.
struct Cluster {
    nodes: Vec<Node>,
    _data: DataDir,
    epoch: u64,
    ranges: [&'static str; 3],
}

impl Cluster {
    /// Starts the three nodes (`env[i]` and `extra[i]` for node i) and pushes epoch 1.
    /// source) and pushes epoch 1.
    fn start(name: &str, durability: &str, env: [&[(&str, &str)]; 3], extra: [&[&str]; 3]) -> Cluster {
        let data = DataDir::new(name);
        let nodes = (0..3)
            .map(|i| {
                let dir = format!("{}/node{i}", data.path());
                Node::start(i, &dir, durability, extra[i], env[i])
            })
            .collect();
        let mut c = Cluster { nodes, _data: data, epoch: 0, ranges: RANGES };
        for n in &c.nodes {
            println!("{name}: node {} plain {} direct {} admin {}", n.n, n.plain, n.direct, n.admin);
        }
        c.push(1, RANGES, &[SOURCE, TARGET, BYSTANDER]);
        c
    }

    fn members(&self, ranges: [&str; 3]) -> Vec<String> {
        self.nodes.iter().zip(ranges).map(|(n, r)| n.member(r)).collect()
    }

    /// Pushes `epoch` with `ranges` to the nodes in `order`; panics on a refusal.
    fn push(&mut self, epoch: u64, ranges: [&'static str; 3], order: &[usize]) {
        for &i in order {
            let reply = self.push_one(epoch, ranges, i);
            assert_eq!(reply, Frame::ok(), "push of epoch {epoch} to node {i}\n{}", self.nodes[i].tail());
        }
        self.epoch = epoch;
        self.ranges = ranges;
    }

    fn push_one(&self, epoch: u64, ranges: [&str; 3], i: usize) -> Frame {
        let mut args = vec!["STRATA.TOPOLOGY".to_string(), "SET".into(), epoch.to_string(), self.nodes[i].id.clone()];
        args.extend(self.members(ranges));
        self.nodes[i].admin().cmd(&args)
    }

    /// `push_one` that tells a dead node (or one dying in the push) instead of panicking.
    fn try_push_one(&self, epoch: u64, ranges: [&str; 3], i: usize) -> Result<Frame, String> {
        let mut args = vec!["STRATA.TOPOLOGY".to_string(), "SET".into(), epoch.to_string(), self.nodes[i].id.clone()];
        args.extend(self.members(ranges));
        let mut c = RawConn::connect(("127.0.0.1", self.nodes[i].admin)).map_err(|e| e.to_string())?;
        c.set_timeout(Some(Duration::from_secs(15)));
        c.try_send(&args).map_err(|e| e.to_string())?;
        match c.try_read_frame() {
            Ok(Some(f)) => Ok(f),
            other => Err(format!("{other:?}")),
        }
    }

    /// The confirming epoch of a committed migration: target, bystander, source.
    fn confirm(&mut self) {
        self.push(self.epoch + 1, MOVED_RANGES, &[TARGET, BYSTANDER, SOURCE]);
    }

    /// The node that owns `slot` as the applied topology says.
    fn owner(&self, slot: u16) -> usize {
        let moved = self.ranges == MOVED_RANGES;
        match slot {
            s if in_moving(s) => {
                if moved {
                    TARGET
                } else {
                    SOURCE
                }
            }
            0..=5460 => SOURCE,
            5461..=10922 => TARGET,
            _ => BYSTANDER,
        }
    }

    fn start_migration(&self, mid: &str) {
        let reply = self.nodes[SOURCE].admin().cmd(&self.start_args(mid));
        assert_eq!(reply, Frame::ok(), "STRATA.MIGRATE START\n{}", self.nodes[SOURCE].tail());
    }

    /// [`Self::start_migration`] on a source set to crash early in the
    /// migration: its thread may get there before the worker sends START's
    /// reply, so a connection closed without one is accepted (the caller
    /// then checks that the node died where it was meant to).
    fn start_migration_may_die(&self, mid: &str) {
        let mut conn = self.nodes[SOURCE].admin();
        conn.try_send(&self.start_args(mid)).expect("sending STRATA.MIGRATE START");
        match conn.try_read_frame() {
            Ok(Some(reply)) => {
                assert_eq!(reply, Frame::ok(), "STRATA.MIGRATE START\n{}", self.nodes[SOURCE].tail())
            }
            Ok(None) | Err(_) => println!("{mid}: the source died before START's reply"),
        }
    }

    fn start_args(&self, mid: &str) -> Vec<String> {
        let target = &self.nodes[TARGET];
        ["STRATA.MIGRATE", "START", mid, &target.id, &format!("127.0.0.1:{}", target.admin), MOVING_WIRE]
            .map(String::from)
            .to_vec()
    }

    /// Polls the source's STATUS of `mid` until it is no longer in flight.
    fn resolve(&self, mid: &str) -> HashMap<String, String> {
        let mut last = HashMap::new();
        let done = wait_for(RESOLVE, || {
            // The source may be restarting: a refused connection is "not yet".
            let Ok(mut c) = RawConn::connect(("127.0.0.1", self.nodes[SOURCE].admin)) else { return false };
            c.set_timeout(Some(Duration::from_secs(15)));
            if c.try_send(&["STRATA.MIGRATE", "STATUS", mid]).is_err() {
                return false;
            }
            let Ok(Some(reply)) = c.try_read_frame() else { return false };
            last = fields(&reply);
            matches!(last.get("state").map(String::as_str), Some("committed" | "failed" | "aborted" | "unknown"))
        });
        assert!(
            done,
            "migration {mid} unresolved after {RESOLVE:?}: source {last:?}, target {:?}\nsource:\n{}\ntarget:\n{}",
            self.status(TARGET, mid),
            self.nodes[SOURCE].tail(),
            self.nodes[TARGET].tail()
        );
        last
    }

    fn status(&self, i: usize, mid: &str) -> HashMap<String, String> {
        match RawConn::connect(("127.0.0.1", self.nodes[i].admin)) {
            Ok(mut c) => {
                c.set_timeout(Some(Duration::from_secs(5)));
                match c.try_send(&["STRATA.MIGRATE", "STATUS", mid]).map(|_| c.try_read_frame()) {
                    Ok(Ok(Some(f))) => fields(&f),
                    other => HashMap::from([("unreadable".to_string(), format!("{other:?}"))]),
                }
            }
            Err(e) => HashMap::from([("down".to_string(), e.to_string())]),
        }
    }

    /// Runs `mid` to its end and confirms it when it committed; true if it did.
    fn finish(&mut self, mid: &str) -> bool {
        let status = self.resolve(mid);
        let committed = status["state"] == "committed";
        if committed {
            self.confirm();
        }
        println!("{mid}: {status:?}");
        committed
    }

    /// Restarts `which` if it is not running (after a crash point or kill -9).
    fn restart_dead(&mut self, which: &[usize]) {
        for &i in which {
            self.nodes[i].restart();
        }
    }

    fn wait_exit(&mut self, i: usize, why: &str) {
        let node = &mut self.nodes[i];
        let exited = wait_for(RESOLVE, || !node.server.is_running());
        assert!(exited, "node {i} did not stop at {why}\n{}", node.tail());
    }
}

/// The STATUS reply as field -> value.
fn fields(reply: &Frame) -> HashMap<String, String> {
    let Some(items) = reply.as_array() else { return HashMap::from([("reply".to_string(), format!("{reply:?}"))]) };
    items
        .chunks(2)
        .filter_map(|p| {
            let k = String::from_utf8_lossy(p.first()?.as_bytes()?).into_owned();
            let v = p.get(1)?.as_bytes().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
            Some((k, v))
        })
        .collect()
}

fn value(key: &str, c: u64, pad: usize) -> String {
    format!("{key}={c:012}-{}", "v".repeat(pad))
}

fn parse_counter(key: &str, v: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(v).ok()?;
    let (c, _) = s.strip_prefix(key)?.strip_prefix('=')?.split_once('-')?;
    c.parse().ok()
}

/// Writes the preloaded keys (moving slots) on the source's direct port;
/// all of them are acknowledged writes of counter 1.
fn preload(c: &Cluster, log: &AckLog, n: usize, size: usize) {
    let keys = keys("pre:", n);
    let mut conn = c.nodes[SOURCE].direct();
    for chunk in keys[..n].chunks(200) {
        let bytes: Vec<u8> = chunk.iter().flat_map(|k| encode_command(&["SET", k, &value(k, 1, size)])).collect();
        conn.send_raw(&bytes);
        for _ in chunk {
            assert_eq!(conn.read_frame(), Frame::ok());
        }
    }
    let mut l = log.0.lock().unwrap();
    for k in &keys[..n] {
        l.insert(k.clone(), Entry { kind: Kind::Set, sent: 1, acked: 1 });
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Set,
    Incr,
}

/// Per key: the highest counter (SET) or INCR count sent, and the highest
/// acknowledged (for INCR: the highest reply).
#[derive(Clone, Copy, Debug)]
struct Entry {
    kind: Kind,
    sent: u64,
    acked: u64,
}

#[derive(Clone, Default)]
struct AckLog(Arc<Mutex<HashMap<String, Entry>>>);

/// What the clients saw.
#[derive(Default)]
struct Seen {
    acked: AtomicU64,
    moved: AtomicU64,
    errors: Mutex<Vec<String>>,
    /// Connections lost or refused (a node crashed or was killed).
    disconnects: AtomicU64,
}

struct Writers {
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<()>>,
    plain: Arc<Seen>,
    direct: Arc<Seen>,
}

impl Writers {
    /// A pipelined writer on `plain_port` and a MOVED-following client on
    /// the direct ports, on keys of their own.
    fn start(c: &Cluster, plain_port: u16, log: &AckLog) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let (plain, direct) = (Arc::new(Seen::default()), Arc::new(Seen::default()));
        let mut handles = Vec::new();
        {
            let (stop, seen, log) = (stop.clone(), plain.clone(), log.clone());
            let (sets, incrs) = (keys("p:", WRITER_KEYS / 2), keys("n:", WRITER_KEYS / 4));
            handles.push(std::thread::spawn(move || plain_writer(plain_port, &sets, &incrs, &stop, &seen, &log)));
        }
        {
            let (stop, seen, log) = (stop.clone(), direct.clone(), log.clone());
            let sets = keys("d:", WRITER_KEYS / 2);
            let ports: Vec<u16> = c.nodes.iter().map(|n| n.direct).collect();
            let owners: Vec<u16> = (0..16384).map(|s| ports[c.owner(s)]).collect();
            handles.push(std::thread::spawn(move || direct_writer(owners, &sets, &stop, &seen, &log)));
        }
        Writers { stop, handles, plain, direct }
    }

    fn stop(self) -> (Arc<Seen>, Arc<Seen>) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles {
            h.join().unwrap();
        }
        (self.plain, self.direct)
    }
}

fn plain_writer(port: u16, sets: &[String], incrs: &[String], stop: &AtomicBool, seen: &Seen, log: &AckLog) {
    let mut conn: Option<RawConn> = None;
    let mut counter = 1u64;
    let mut i = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let Some(c) = conn.as_mut() else {
            match RawConn::connect(("127.0.0.1", port)) {
                Ok(mut c) => {
                    c.set_timeout(Some(Duration::from_secs(20)));
                    conn = Some(c);
                }
                Err(_) => {
                    seen.disconnects.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            continue;
        };
        // One pipeline: three SETs to one INCR.
        let mut batch: Vec<(String, Kind, u64)> = Vec::with_capacity(PIPELINE);
        {
            let mut l = log.0.lock().unwrap();
            for j in 0..PIPELINE {
                i += 1;
                if j % 4 == 3 {
                    let k = &incrs[i % incrs.len()];
                    let e = l.entry(k.clone()).or_insert(Entry { kind: Kind::Incr, sent: 0, acked: 0 });
                    e.sent += 1;
                    batch.push((k.clone(), Kind::Incr, 0));
                } else {
                    counter += 1;
                    let k = &sets[i % sets.len()];
                    let e = l.entry(k.clone()).or_insert(Entry { kind: Kind::Set, sent: 0, acked: 0 });
                    e.sent = counter;
                    batch.push((k.clone(), Kind::Set, counter));
                }
            }
        }
        let bytes: Vec<u8> = batch
            .iter()
            .flat_map(|(k, kind, n)| match kind {
                Kind::Set => encode_command(&["SET", k, &value(k, *n, 20)]),
                Kind::Incr => encode_command(&["INCR", k]),
            })
            .collect();
        if c.try_send_raw(&bytes).is_err() {
            seen.disconnects.fetch_add(1, Ordering::Relaxed);
            conn = None;
            continue;
        }
        for (k, kind, n) in &batch {
            match c.try_read_frame() {
                Ok(Some(f)) if f.is_error() => {
                    seen.errors.lock().unwrap().push(format!("{k}: {f:?}"));
                }
                Ok(Some(f)) => {
                    let acked = match (kind, &f) {
                        (Kind::Set, f) if *f == Frame::ok() => *n,
                        (Kind::Incr, Frame::Integer(v)) => *v as u64,
                        _ => {
                            seen.errors.lock().unwrap().push(format!("{k}: unexpected {f:?}"));
                            continue;
                        }
                    };
                    seen.acked.fetch_add(1, Ordering::Relaxed);
                    let mut l = log.0.lock().unwrap();
                    let e = l.get_mut(k).unwrap();
                    e.acked = e.acked.max(acked);
                }
                _ => {
                    seen.disconnects.fetch_add(1, Ordering::Relaxed);
                    conn = None;
                    break;
                }
            }
        }
    }
}

/// A cluster client: sends each SET to the slot's owner as it believes,
/// follows MOVED (and remembers it), one command at a time.
fn direct_writer(mut owners: Vec<u16>, sets: &[String], stop: &AtomicBool, seen: &Seen, log: &AckLog) {
    let mut conns: HashMap<u16, RawConn> = HashMap::new();
    let mut counter = 1u64;
    let mut i = 0usize;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        counter += 1;
        let k = &sets[i % sets.len()];
        let slot = key_slot(k.as_bytes());
        log.0.lock().unwrap().entry(k.clone()).or_insert(Entry { kind: Kind::Set, sent: 0, acked: 0 }).sent = counter;
        let v = value(k, counter, 20);
        // Up to three redirections per command.
        for _ in 0..3 {
            let port = owners[slot as usize];
            if let std::collections::hash_map::Entry::Vacant(e) = conns.entry(port) {
                match RawConn::connect(("127.0.0.1", port)) {
                    Ok(mut c) => {
                        c.set_timeout(Some(Duration::from_secs(20)));
                        e.insert(c);
                    }
                    Err(_) => {
                        seen.disconnects.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(Duration::from_millis(50));
                        break;
                    }
                }
            }
            let c = conns.get_mut(&port).unwrap();
            let reply = c.try_send(&["SET", k, &v]).map(|_| c.try_read_frame());
            match reply {
                Ok(Ok(Some(f))) if f == Frame::ok() => {
                    seen.acked.fetch_add(1, Ordering::Relaxed);
                    let mut l = log.0.lock().unwrap();
                    let e = l.get_mut(k).unwrap();
                    e.acked = e.acked.max(counter);
                    break;
                }
                Ok(Ok(Some(Frame::Error(e)))) if e.starts_with("MOVED ") => {
                    seen.moved.fetch_add(1, Ordering::Relaxed);
                    let to = e.rsplit(':').next().and_then(|p| p.parse::<u16>().ok());
                    match to {
                        Some(p) => owners[slot as usize] = p,
                        None => {
                            seen.errors.lock().unwrap().push(format!("{k}: bad MOVED {e}"));
                            break;
                        }
                    }
                }
                Ok(Ok(Some(f))) => {
                    seen.errors.lock().unwrap().push(format!("{k} on {port}: {f:?}"));
                    break;
                }
                _ => {
                    seen.disconnects.fetch_add(1, Ordering::Relaxed);
                    conns.remove(&port);
                    std::thread::sleep(Duration::from_millis(20));
                    break;
                }
            }
        }
    }
}

/// What the check found.
#[derive(Default, Debug)]
struct Check {
    keys: usize,
    /// Acknowledged writes not readable from the slot's owner.
    lost: Vec<String>,
    /// Values never written, or a slot's keys on a node that does not own it.
    wrong: Vec<String>,
}

/// Every logged key read from its slot's owner (direct port) against the
/// log; every slot with logged keys counted on every node (only its owner
/// may hold keys, waiting out a release or a staged copy being dropped);
/// CLUSTER SLOTS the same on every node.
fn check(c: &Cluster, log: &AckLog) -> Check {
    let mut out = Check::default();
    let log = log.0.lock().unwrap().clone();
    let mut conns: Vec<RawConn> = c.nodes.iter().map(Node::direct).collect();
    let mut slots: std::collections::HashSet<u16> = std::collections::HashSet::new();
    let mut names: Vec<&String> = log.keys().collect();
    names.sort();
    for k in names {
        let e = log[k];
        let slot = key_slot(k.as_bytes());
        let owner = c.owner(slot);
        slots.insert(slot);
        out.keys += 1;
        let got = conns[owner].cmd(&["GET", k]);
        let found = match (&got, e.kind) {
            (Frame::Nil, _) => None,
            (Frame::Bulk(v), Kind::Set) => match parse_counter(k, v) {
                Some(n) if n <= e.sent => Some(n),
                _ => {
                    out.wrong.push(format!("{k} (slot {slot}, node {owner}): {got:?} never written"));
                    continue;
                }
            },
            (Frame::Bulk(v), Kind::Incr) => match std::str::from_utf8(v).ok().and_then(|s| s.parse::<u64>().ok()) {
                Some(n) if n <= e.sent => Some(n),
                _ => {
                    out.wrong.push(format!("{k} (slot {slot}, node {owner}): {got:?}, only {} INCRs sent", e.sent));
                    continue;
                }
            },
            _ => {
                out.wrong.push(format!("{k} (slot {slot}, node {owner}): {got:?}"));
                continue;
            }
        };
        if e.acked > 0 && found.is_none_or(|f| f < e.acked) {
            out.lost.push(format!("{k} (slot {slot}, node {owner}): acknowledged {}, found {found:?}", e.acked));
        }
    }
    // One owner per slot: the others hold none of its keys (the source's
    // release and a target's staged copy may take a moment).
    let mut counts = |i: usize, slot: u16| -> i64 {
        let r = conns[i].cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]);
        r.as_int().unwrap_or_else(|| panic!("COUNTKEYSINSLOT {slot} on node {i}: {r:?}"))
    };
    let mut strays = Vec::new();
    let clean = wait_for(Duration::from_secs(20), || {
        strays.clear();
        for &slot in &slots {
            for i in (0..3).filter(|&i| i != c.owner(slot)) {
                let n = counts(i, slot);
                if n != 0 {
                    strays.push(format!("slot {slot}: {n} keys on node {i}, owned by node {}", c.owner(slot)));
                }
            }
        }
        strays.is_empty()
    });
    if !clean {
        strays.sort();
        out.wrong.extend(strays);
    }
    let views: Vec<Frame> = conns.iter_mut().map(|c| c.cmd(&["CLUSTER", "SLOTS"])).collect();
    for (i, v) in views.iter().enumerate().skip(1) {
        if *v != views[0] {
            out.wrong.push(format!("CLUSTER SLOTS of node {i} differs from node 0's: {v:?} vs {:?}", views[0]));
        }
    }
    // The moving range's owner, as node 0's CLUSTER SLOTS has it.
    let want = &c.nodes[c.owner(MOVING.0)].id;
    let holds = views[0].as_array().unwrap_or_default().iter().any(|r| {
        let r = r.as_array().unwrap_or_default();
        let start = r.first().and_then(Frame::as_int);
        let end = r.get(1).and_then(Frame::as_int);
        let id = r.get(2).and_then(Frame::as_array).and_then(|m| m.get(2)).and_then(Frame::as_bytes);
        start.is_some_and(|s| s <= MOVING.0 as i64)
            && end.is_some_and(|e| e >= MOVING.1 as i64)
            && id.is_some_and(|id| id == want.as_bytes())
    });
    if !holds {
        out.wrong.push(format!("CLUSTER SLOTS does not give {MOVING_WIRE} to {want}: {:?}", views[0]));
    }
    out
}

fn report(what: &str, check: &Check) -> String {
    let first = |v: &Vec<String>| v.iter().take(20).cloned().collect::<Vec<_>>().join("\n  ");
    format!(
        "{what}: {} keys checked, {} acknowledged writes lost, {} other problems\n lost:\n  {}\n other:\n  {}",
        check.keys,
        check.lost.len(),
        check.wrong.len(),
        first(&check.lost),
        first(&check.wrong)
    )
}

fn assert_clean(what: &str, c: &Cluster, check: &Check) {
    if !check.lost.is_empty() || !check.wrong.is_empty() {
        let logs: Vec<String> = c.nodes.iter().map(|n| format!("node {}:\n{}", n.n, n.tail())).collect();
        panic!("{}\n{}", report(what, check), logs.join("\n"));
    }
    println!("{}", report(what, check));
}

#[test]
fn migrate_under_pipelined_load_loses_nothing_and_clients_see_only_moved() {
    let delay = [("STRATA_TEST_MIGRATE_BATCH_DELAY_MS", BATCH_DELAY_MS)];
    let metrics = [free_port(), free_port()];
    let (m0, m1) = (metrics[0].to_string(), metrics[1].to_string());
    let mut c = Cluster::start(
        "migrate-load",
        "periodic",
        [&delay, &[], &[]],
        [&["--metrics-port", &m0], &["--metrics-port", &m1], &[]],
    );
    let log = AckLog::default();
    preload(&c, &log, PRELOAD, PRELOAD_VALUE);
    // The plain writer on the source itself: its commands on the moving
    // slots are served there, wait in the handover, then are forwarded.
    let writers = Writers::start(&c, c.nodes[SOURCE].plain, &log);
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    c.start_migration("m-load-1");
    // START is idempotent while it runs.
    assert_eq!(
        c.nodes[SOURCE].admin().cmd(&[
            "STRATA.MIGRATE",
            "START",
            "m-load-1",
            &c.nodes[TARGET].id,
            &format!("127.0.0.1:{}", c.nodes[TARGET].admin),
            MOVING_WIRE
        ]),
        Frame::ok()
    );
    let status = c.resolve("m-load-1");
    assert_eq!(status["state"], "committed", "{status:?}\n{}", c.nodes[SOURCE].tail());
    let target_status = c.status(TARGET, "m-load-1");
    assert_eq!(target_status.get("state").map(String::as_str), Some("committed"), "{target_status:?}");
    assert_eq!(status["role"], "source");
    assert_eq!(status["slots"], MOVING_WIRE);
    assert!(status["keys"].parse::<u64>().unwrap() >= PRELOAD as u64, "{status:?}");
    // Before the confirming epoch both nodes already answer for the moved
    // slots as committed: the target serves, the source redirects.
    std::thread::sleep(Duration::from_millis(300));
    c.confirm();
    let took = started.elapsed();
    std::thread::sleep(Duration::from_millis(300));
    let (plain, direct) = writers.stop();
    let result = check(&c, &log);
    println!(
        "migrated {MOVING_WIRE} in {took:?} (paused {} ms): plain {} acked, direct {} acked, {} MOVED",
        status["paused_ms"],
        plain.acked.load(Ordering::Relaxed),
        direct.acked.load(Ordering::Relaxed),
        direct.moved.load(Ordering::Relaxed)
    );
    assert_clean("migration under load", &c, &result);
    assert_eq!(*plain.errors.lock().unwrap(), Vec::<String>::new(), "the plain client saw errors");
    assert_eq!(plain.disconnects.load(Ordering::Relaxed), 0, "the plain client lost its connection");
    assert_eq!(*direct.errors.lock().unwrap(), Vec::<String>::new(), "the cluster client saw more than MOVED");
    assert!(direct.moved.load(Ordering::Relaxed) > 0, "the cluster client never followed the moved slots");
    // The source holds none of the moved keys; the target holds them all.
    let mut src = c.nodes[SOURCE].direct();
    let mut tgt = c.nodes[TARGET].direct();
    for slot in [MOVING.0, MOVING.1, 1000] {
        assert_eq!(src.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]), Frame::int(0));
    }
    let dbsize = |conn: &mut RawConn| conn.cmd(&["DBSIZE"]).as_int().unwrap();
    let src_keys: usize = log.0.lock().unwrap().keys().filter(|k| c.owner(key_slot(k.as_bytes())) == SOURCE).count();
    assert_eq!(dbsize(&mut src), src_keys as i64, "the source keeps exactly its staying keys");
    assert!(dbsize(&mut tgt) >= PRELOAD as i64);
    // The contract's metrics, on both sides.
    let stats = support::info(&mut c.nodes[SOURCE].direct(), Some("clusterstats"));
    println!("source clusterstats: {stats:?}");
    let (src, tgt) = (support::scrape(metrics[0]), support::scrape(metrics[1]));
    let slots = (MOVING.1 - MOVING.0 + 1) as f64;
    for (text, role) in [(&src, "source"), (&tgt, "target")] {
        let role_label = format!("role=\"{role}\"");
        let get = |name: &str, labels: &[&str]| {
            metric(text, name, labels).unwrap_or_else(|| {
                let ours: Vec<&str> = text.lines().filter(|l| l.contains("strata_cluster_migration")).collect();
                panic!("{role}: no {name}{labels:?} in /metrics: {ours:#?}")
            })
        };
        assert_eq!(get("strata_cluster_migrations_total", &[&role_label, "outcome=\"committed\""]), 1.0, "{role}");
        assert_eq!(get("strata_cluster_migrations_in_flight", &[&role_label]), 0.0, "{role}");
        assert!(get("strata_cluster_migration_keys_total", &[&role_label]) >= PRELOAD as f64, "{role}");
        assert!(
            get("strata_cluster_migration_bytes_total", &[&role_label]) >= (PRELOAD * PRELOAD_VALUE) as f64,
            "{role}"
        );
        assert_eq!(get("strata_cluster_migration_slots_total", &[&role_label]), slots, "{role}");
        assert_eq!(get("strata_cluster_migration_seconds", &[]), 0.0, "{role}: no migration in flight");
    }
    let paused = get_metric(&src, "strata_cluster_migration_pause_seconds_total");
    println!("source paused {paused} s in total; STATUS paused_ms {}", status["paused_ms"]);
}

/// The value of `name` with (at least) `labels` in a scrape, whatever the labels' order.
fn metric(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (series, value) = l.rsplit_once(' ')?;
        let (n, rest) = series.split_once('{').unwrap_or((series, ""));
        (n == name && labels.iter().all(|want| rest.contains(want))).then(|| value.parse().ok())?
    })
}

fn get_metric(text: &str, name: &str) -> f64 {
    metric(text, name, &[]).unwrap_or_else(|| panic!("no {name} in /metrics"))
}

/// Who a crash or kill hits.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Hit {
    Source,
    Target,
    Both,
}

impl Hit {
    fn nodes(self) -> &'static [usize] {
        match self {
            Hit::Source => &[SOURCE],
            Hit::Target => &[TARGET],
            Hit::Both => &[SOURCE, TARGET],
        }
    }
}

/// How a run is interrupted.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// `STRATA_TEST_CRASH_AT=<point>` on the node that reaches it.
    CrashAt(&'static str, Hit),
    /// kill -9 after a random delay into the migration.
    Kill(Hit, u64),
    /// kill -9 once the source has sent this many keys of its snapshot.
    KillInSnapshot(usize),
    /// kill -9 as soon as the source reports the commit (before the
    /// confirming epoch).
    KillAfterCommit(Hit),
}

/// One interrupted migration under load (writers on the bystander's plain
/// port and the direct ports); the crashed or killed nodes restarted
/// without hooks; the migration resolved (and retried once if it failed,
/// unless `broken`); then the check.
fn interrupted(name: &str, fault: Fault, broken: bool) -> (Check, bool) {
    let mut source_env = vec![("STRATA_TEST_MIGRATE_BATCH_DELAY_MS", BATCH_DELAY_MS)];
    let mut target_env = vec![];
    if let Fault::CrashAt(point, hit) = fault {
        match hit {
            Hit::Source => source_env.push(("STRATA_TEST_CRASH_AT", point)),
            Hit::Target => target_env.push(("STRATA_TEST_CRASH_AT", point)),
            Hit::Both => unreachable!("a crash point is on one node"),
        }
    }
    if broken {
        source_env.push(("STRATA_TEST_MIGRATE_DELETE_EARLY", "1"));
    }
    let mut c = Cluster::start(name, "sync", [&source_env, &target_env, &[]], [&[], &[], &[]]);
    let log = AckLog::default();
    preload(&c, &log, PRELOAD, PRELOAD_VALUE);
    let writers = Writers::start(&c, c.nodes[BYSTANDER].plain, &log);
    std::thread::sleep(Duration::from_millis(300));
    let mid = format!("{name}-1");
    if matches!(fault, Fault::CrashAt(_, Hit::Source)) {
        c.start_migration_may_die(&mid);
    } else {
        c.start_migration(&mid);
    }
    let hit = match fault {
        Fault::CrashAt("migrate-release", Hit::Source) => {
            // The crash is in applying the confirming epoch.
            let status = c.resolve(&mid);
            assert_eq!(status["state"], "committed", "{status:?}\n{}", c.nodes[SOURCE].tail());
            let epoch = c.epoch + 1;
            c.push(epoch, MOVED_RANGES, &[TARGET, BYSTANDER]);
            // The source dies in the push: no reply, or an error at best.
            let reply = c.try_push_one(epoch, MOVED_RANGES, SOURCE);
            c.wait_exit(SOURCE, "migrate-release");
            println!("{name}: the push to the source got {reply:?}");
            Hit::Source
        }
        Fault::CrashAt(point, hit) => {
            c.wait_exit(hit.nodes()[0], point);
            hit
        }
        Fault::KillInSnapshot(sent) => {
            let mut status = HashMap::new();
            let reached = wait_for(RESOLVE, || {
                status = c.status(SOURCE, &mid);
                status.get("keys").and_then(|k| k.parse::<usize>().ok()).is_some_and(|k| k >= sent)
            });
            assert!(reached && status["state"] == "snapshot", "never {sent} keys into the snapshot: {status:?}");
            println!("{name}: kill -9 the source in the snapshot: {status:?}");
            c.nodes[SOURCE].server.kill();
            Hit::Source
        }
        Fault::KillAfterCommit(hit) => {
            let status = c.resolve(&mid);
            assert_eq!(status["state"], "committed", "{status:?}");
            println!("{name}: kill -9 {hit:?} after the commit: {status:?}");
            for &i in hit.nodes() {
                c.nodes[i].server.kill();
            }
            hit
        }
        Fault::Kill(hit, seed) => {
            let ms = Rng::new(seed).below(1200);
            std::thread::sleep(Duration::from_millis(ms));
            println!("{name}: kill -9 {hit:?} {ms} ms into the migration, source {:?}", c.status(SOURCE, &mid));
            for &i in hit.nodes() {
                c.nodes[i].server.kill();
            }
            hit
        }
    };
    std::thread::sleep(Duration::from_millis(200));
    if let Fault::KillAfterCommit(Hit::Both) = fault {
        // The source back first; the target a second later (a pod slower
        // to restart), so requests forwarded to the source meet its MOVED
        // while the target is down.
        c.restart_dead(&[SOURCE]);
        std::thread::sleep(Duration::from_secs(1));
        c.restart_dead(&[TARGET]);
    } else {
        c.restart_dead(hit.nodes());
    }
    if let Fault::CrashAt("migrate-release", _) = fault {
        // The restarted source has committed the migration; the push again.
        let status = c.resolve(&mid);
        assert_eq!(status["state"], "committed", "{status:?}");
        let (epoch, ranges) = (c.epoch, c.ranges);
        let reply = c.push_one(epoch, ranges, SOURCE);
        assert_eq!(
            reply,
            Frame::ok(),
            "the confirming epoch again on the restarted source\n{}",
            c.nodes[SOURCE].tail()
        );
    } else {
        let mut committed = c.finish(&mid);
        if !committed {
            // Failed: the source kept the slots. It also kept the ability to move them.
            assert!(c.ranges == RANGES);
            if !broken {
                // Straight away, no CANCEL first: a new import from the same
                // source supersedes the one it gave up.
                let retry = format!("{name}-2");
                c.start_migration(&retry);
                committed = c.finish(&retry);
                assert!(committed, "the retry after a failed migration did not commit");
            }
        }
        println!("{name}: committed {committed}");
    }
    std::thread::sleep(Duration::from_millis(300));
    let (plain, direct) = writers.stop();
    println!(
        "{name}: plain {} acked / {} errors / {} disconnects, direct {} acked / {} MOVED / {} errors / {} disconnects",
        plain.acked.load(Ordering::Relaxed),
        plain.errors.lock().unwrap().len(),
        plain.disconnects.load(Ordering::Relaxed),
        direct.acked.load(Ordering::Relaxed),
        direct.moved.load(Ordering::Relaxed),
        direct.errors.lock().unwrap().len(),
        direct.disconnects.load(Ordering::Relaxed),
    );
    for (who, seen) in [("plain", &plain), ("direct", &direct)] {
        let errors = seen.errors.lock().unwrap();
        let mut kinds: Vec<String> =
            errors.iter().map(|e| e.split_once(": ").map_or(e.clone(), |x| x.1.to_string())).collect();
        kinds.sort();
        kinds.dedup();
        if !kinds.is_empty() {
            println!("{name}: the {who} client's errors (down or loading nodes): {:?}", &kinds[..kinds.len().min(4)]);
        }
        // A node down or replaying its log, nothing else.
        let other: Vec<&String> = kinds
            .iter()
            .filter(|e| !e.contains("ERR cannot reach the node serving this hash slot") && !e.contains("LOADING"))
            .collect();
        assert!(other.is_empty() || broken, "{name}: the {who} client got {other:?}");
    }
    let result = check(&c, &log);
    if !broken {
        assert_clean(name, &c, &result);
    }
    (result, c.ranges == MOVED_RANGES)
}

#[test]
fn crash_source_in_snapshot() {
    interrupted("crash-snapshot", Fault::CrashAt("migrate-snapshot", Hit::Source), false);
}

#[test]
fn crash_source_in_streaming() {
    interrupted("crash-streaming", Fault::CrashAt("migrate-streaming", Hit::Source), false);
}

#[test]
fn crash_source_in_handover() {
    let (_, moved) = interrupted("crash-handover", Fault::CrashAt("migrate-handover", Hit::Source), false);
    assert!(moved);
}

#[test]
fn crash_target_before_commit_is_durable() {
    interrupted("crash-target-commit", Fault::CrashAt("migrate-target-commit", Hit::Target), false);
}

#[test]
fn crash_target_after_commit_is_recorded() {
    interrupted("crash-target-committed", Fault::CrashAt("migrate-target-committed", Hit::Target), false);
}

#[test]
fn crash_source_after_commit() {
    let (_, moved) =
        interrupted("crash-source-committed", Fault::CrashAt("migrate-source-committed", Hit::Source), false);
    assert!(moved, "a source that recorded the commit comes back with it committed");
}

#[test]
fn crash_source_in_release() {
    let (_, moved) = interrupted("crash-release", Fault::CrashAt("migrate-release", Hit::Source), false);
    assert!(moved);
}

fn seed() -> u64 {
    let seed = std::env::var("STRATA_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    println!("seed {seed} (STRATA_TEST_SEED to repeat)");
    seed
}

/// Kills per test, each at its own random moment.
const KILL_ROUNDS: u64 = 2;

#[test]
fn kill_source_mid_migration() {
    let seed = seed();
    for round in 0..KILL_ROUNDS {
        interrupted(&format!("kill-source-{round}"), Fault::Kill(Hit::Source, seed + round), false);
    }
}

#[test]
fn kill_target_mid_migration() {
    let seed = seed();
    for round in 0..KILL_ROUNDS {
        interrupted(&format!("kill-target-{round}"), Fault::Kill(Hit::Target, seed + round), false);
    }
}

#[test]
fn kill_both_mid_migration() {
    let seed = seed();
    for round in 0..KILL_ROUNDS {
        interrupted(&format!("kill-both-{round}"), Fault::Kill(Hit::Both, seed + round), false);
    }
}

/// Both down between the commit and the confirming epoch: the restarted
/// source redirects the moved slots to a target that is still restarting;
/// the bystander's plain clients must not see that MOVED.
#[test]
fn kill_both_after_the_commit() {
    let (_, moved) = interrupted("kill-both-committed", Fault::KillAfterCommit(Hit::Both), false);
    assert!(moved);
}

/// The deliberately broken source deletes each key once sent: a crash in
/// the snapshot then loses acknowledged writes, and the check must say so.
/// The crash is a kill -9 a few batches into the snapshot (the hook's
/// abort right after the first batch can beat the deletes to the log).
#[test]
fn migrate_delete_early_loses_writes_and_the_check_sees_it() {
    let (result, moved) = interrupted("broken", Fault::KillInSnapshot(3 * 256), true);
    println!("{}", report("the broken build (STRATA_TEST_MIGRATE_DELETE_EARLY=1)", &result));
    assert!(!moved, "the crashed migration was not supposed to commit");
    assert!(
        !result.lost.is_empty(),
        "the deliberately broken build lost no acknowledged write: the crash tests cannot catch a source \
         that deletes before the commit"
    );
}

/// Values ten times the source's RAM, mostly on its disk tier, migrate
/// with its used_memory within maxmemory, and all arrive.
#[test]
fn disk_resident_slots_migrate_within_the_source_memory_budget() {
    const MAXMEMORY: u64 = 32 << 20;
    const VALUE: usize = 8192;
    let n = (10 * MAXMEMORY / VALUE as u64) as usize;
    let max = MAXMEMORY.to_string();
    let delay = [("STRATA_TEST_MIGRATE_BATCH_DELAY_MS", "1")];
    let tier = ["--maxmemory", &max, "--maxmemory-policy", "noeviction", "--max-disk", "1gb"];
    let mut c = Cluster::start("migrate-disk", "periodic", [&delay, &[], &[]], [&tier, &[], &[]]);
    // All of them in moving slots, through the source's direct port.
    let keys = keys("cold:", n);
    let mut conn = c.nodes[SOURCE].direct();
    let empty: u64 = support::info(&mut conn, Some("memory"))["used_memory"].parse().unwrap();
    println!("the source's used_memory before any key: {} KiB", empty >> 10);
    // noeviction: nothing may leave but through the migration. A write the
    // demotion to disk has not made room for yet gets OOM: sent again.
    let mut ooms = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    for chunk in keys[..n].chunks(64) {
        let mut todo: Vec<&String> = chunk.iter().collect();
        while !todo.is_empty() {
            assert!(Instant::now() < deadline, "loading the disk tier did not finish");
            let bytes: Vec<u8> = todo.iter().flat_map(|k| encode_command(&["SET", k, &value(k, 7, VALUE)])).collect();
            conn.send_raw(&bytes);
            let mut again = Vec::new();
            for k in todo {
                match conn.read_frame() {
                    f if f == Frame::ok() => {}
                    f if f.error_code() == Some("OOM") => again.push(k),
                    f => panic!("SET {k}: {f:?}"),
                }
            }
            if !again.is_empty() {
                ooms += again.len();
                std::thread::sleep(Duration::from_millis(5));
            }
            todo = again;
        }
    }
    println!("loaded ({ooms} SETs refused with OOM and sent again)");
    // The budget as the node counts it for maxmemory (as Redis: used_memory
    // less mem_not_counted_for_evict: the log's and the disk tier's
    // buffers and the migration's batch), and used_memory itself.
    let used = |conn: &mut RawConn| -> (u64, u64) {
        let m = support::info(conn, Some("memory"));
        let field = |f: &str| m.get(f).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        (field("used_memory").saturating_sub(field("mem_not_counted_for_evict")), field("used_memory"))
    };
    let before = used(&mut conn);
    let on_disk: u64 = support::info(&mut conn, Some("tier"))["tier_disk_keys"].parse().unwrap();
    println!(
        "{n} keys of {VALUE} B loaded, {on_disk} on disk; counted {} KiB, used_memory {} KiB, maxmemory {} KiB",
        before.0 >> 10,
        before.1 >> 10,
        MAXMEMORY >> 10
    );
    assert!(on_disk * 10 >= n as u64 * 8, "only {on_disk} of {n} keys are on disk");
    // What the source holds before the migration: all of them (noeviction),
    // and exactly those must arrive.
    let mut held = Vec::new();
    for chunk in keys[..n].chunks(256) {
        let bytes: Vec<u8> = chunk.iter().flat_map(|k| encode_command(&["EXISTS", k])).collect();
        conn.send_raw(&bytes);
        for k in chunk {
            if conn.read_frame() == Frame::int(1) {
                held.push(k.clone());
            }
        }
    }
    let evicted = support::info(&mut conn, Some("stats")).get("evicted_keys").cloned();
    println!("the source holds {} of the {n} keys (evicted_keys {evicted:?})", held.len());
    assert_eq!(held.len(), n, "the source lost keys before the migration (evicted_keys {evicted:?})");
    let (done, peak, peak_used) = (AtomicBool::new(false), AtomicU64::new(0), AtomicU64::new(0));
    let mut samples = 0;
    std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut conn = c.nodes[SOURCE].direct();
            let mut samples = 0;
            while !done.load(Ordering::Relaxed) {
                let (counted, all) = used(&mut conn);
                peak.fetch_max(counted, Ordering::Relaxed);
                peak_used.fetch_max(all, Ordering::Relaxed);
                samples += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            samples
        });
        c.start_migration("m-disk-1");
        let status = c.resolve("m-disk-1");
        done.store(true, Ordering::Relaxed);
        samples = sampler.join().unwrap();
        assert_eq!(status["state"], "committed", "{status:?}\n{}", c.nodes[SOURCE].tail());
        println!("m-disk-1: {status:?}");
    });
    let (peak, peak_used) = (peak.load(Ordering::Relaxed), peak_used.load(Ordering::Relaxed));
    println!(
        "during the migration the source's memory counted for maxmemory peaked at {} KiB, used_memory at {} KiB, \
         over {samples} samples (maxmemory {} KiB)",
        peak >> 10,
        peak_used >> 10,
        MAXMEMORY >> 10
    );
    assert!(samples > 3, "too few samples of used_memory ({samples}) to say anything");
    // Eviction (here: demotion to disk) runs once the budget is exceeded, so
    // the node is over it by about a write between two evictions, migration
    // or not (the load above ends there too); a migration that promoted the
    // slots' cold values would take it to ten times the budget.
    let bound = MAXMEMORY + MAXMEMORY / 32;
    assert!(
        peak <= bound,
        "the source's memory counted for maxmemory reached {peak} B during the migration, over its maxmemory \
         {MAXMEMORY} B (+1/32: {bound} B)"
    );
    // Every key arrived, byte for byte (read before the confirming epoch:
    // the target serves the slots from the commit, the source still has
    // its copy to tell what went missing).
    let mut tgt = c.nodes[TARGET].direct();
    let mut missing = Vec::new();
    for chunk in held.chunks(64) {
        let bytes: Vec<u8> = chunk.iter().flat_map(|k| encode_command(&["GET", k])).collect();
        tgt.send_raw(&bytes);
        for k in chunk {
            if tgt.read_frame() != Frame::bulk(value(k, 7, VALUE)) {
                missing.push(k.clone());
            }
        }
    }
    // The source held all of them before (EXISTS above): any missing is the migration's.
    for k in missing.iter().take(10) {
        println!("{k}: on the target {:?}", tgt.cmd(&["GET", k]).as_bytes().map(<[u8]>::len));
    }
    assert!(
        missing.is_empty(),
        "{} of the {} keys the source held did not arrive intact: {:?}",
        missing.len(),
        held.len(),
        &missing[..missing.len().min(10)]
    );
    c.confirm();
    assert!(
        wait_for(Duration::from_secs(20), || c.nodes[SOURCE].direct().cmd(&["DBSIZE"]) == Frame::int(0)),
        "the source kept keys of slots it gave away"
    );
}

/// The admin commands' refusals, CANCEL before and after the commit, and a
/// target that cannot be reached, as the contract words them.
#[test]
fn start_refusals_cancel_and_an_unreachable_target() {
    let delay = [("STRATA_TEST_MIGRATE_BATCH_DELAY_MS", BATCH_DELAY_MS)];
    let mut c = Cluster::start("migrate-admin", "periodic", [&delay, &[], &[]], [&[], &[], &[]]);
    let log = AckLog::default();
    preload(&c, &log, PRELOAD, PRELOAD_VALUE);
    let (target, target_admin) = (c.nodes[TARGET].id.clone(), format!("127.0.0.1:{}", c.nodes[TARGET].admin));
    let source_admin = c.nodes[SOURCE].admin;
    let start = |mid: &str, to: &str, addr: &str, ranges: &str| {
        connect(source_admin).cmd(&["STRATA.MIGRATE", "START", mid, to, addr, ranges])
    };
    assert_eq!(start("m-x", &target, &target_admin, "6000"), Frame::error("ERR slot 6000 is not served by this node"));
    assert_eq!(
        start("m-x", &"f".repeat(40), &target_admin, "1"),
        Frame::error(&format!("ERR unknown node {}", "f".repeat(40)))
    );
    assert!(start("bad mid!", &target, &target_admin, "1").is_error(), "an id outside [A-Za-z0-9._-]");
    let never = c.nodes[BYSTANDER].admin().cmd(&["STRATA.MIGRATE", "STATUS", "m-never"]);
    assert!(
        fields(&never).get("state").is_some_and(|s| s == "unknown") || never == Frame::Array(vec![]),
        "STATUS of an id never seen: {never:?}"
    );

    // One outgoing migration at a time; CANCEL in the snapshot: aborted, the
    // source keeps the slots, the target drops what it staged.
    assert_eq!(start("m-a", &target, &target_admin, MOVING_WIRE), Frame::ok());
    assert_eq!(
        start("m-b", &target, &target_admin, "2048-2100"),
        Frame::error("ERR migration m-a is already running on this node")
    );
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(c.nodes[SOURCE].admin().cmd(&["STRATA.MIGRATE", "CANCEL", "m-a"]), Frame::ok());
    assert_eq!(c.resolve("m-a")["state"], "aborted");
    let mut tgt = c.nodes[TARGET].direct();
    let staged = |tgt: &mut RawConn| -> i64 {
        (MOVING.0..=MOVING.1)
            .step_by(7)
            .map(|s| tgt.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &s.to_string()]).as_int().unwrap())
            .sum()
    };
    assert!(wait_for(Duration::from_secs(10), || staged(&mut tgt) == 0), "the target kept the cancelled import's keys");
    let mut src = c.nodes[SOURCE].direct();
    assert_eq!(src.cmd(&["DBSIZE"]), Frame::int(PRELOAD as i64), "the source keeps every key");
    let k = &keys("pre:", PRELOAD)[0];
    assert_eq!(src.cmd(&["GET", k]), Frame::bulk(value(k, 1, PRELOAD_VALUE)), "and serves them");

    // Again, to the end: START of a committed id is an idempotent +OK, CANCEL an error.
    assert_eq!(start("m-c", &target, &target_admin, MOVING_WIRE), Frame::ok());
    assert_eq!(c.resolve("m-c")["state"], "committed");
    assert_eq!(start("m-c", &target, &target_admin, MOVING_WIRE), Frame::ok());
    assert_eq!(
        c.nodes[SOURCE].admin().cmd(&["STRATA.MIGRATE", "CANCEL", "m-c"]),
        Frame::error("ERR migration m-c has committed")
    );
    c.confirm();
    assert_eq!(check(&c, &log).lost, Vec::<String>::new());

    // A target that is down: the migration fails within ~10 s, saying why,
    // and the source keeps serving the slots.
    c.nodes[BYSTANDER].server.kill();
    let (by, by_admin) = (c.nodes[BYSTANDER].id.clone(), format!("127.0.0.1:{}", c.nodes[BYSTANDER].admin));
    let started = Instant::now();
    assert_eq!(start("m-d", &by, &by_admin, "2048-2100"), Frame::ok());
    let status = c.resolve("m-d");
    println!("to a dead target: {status:?} after {:?}", started.elapsed());
    assert_eq!(status["state"], "failed");
    assert!(!status["error"].is_empty(), "{status:?}");
    assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
    let mut src = c.nodes[SOURCE].direct();
    let k = (0..).map(|i| format!("q:{i}")).find(|k| (2048..=2100).contains(&key_slot(k.as_bytes()))).unwrap();
    assert_eq!(src.cmd(&["SET", &k, "still-here"]), Frame::ok());
}
