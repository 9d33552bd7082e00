//! A node's admin port as `/work/cluster-contract.md` and `/work/contract-23.md` word it
//! (`AUTH`, `STRATA.TOPOLOGY SET|GET`, `STRATA.MIGRATE START|STATUS|CANCEL|RECEIVE|COMMIT`),
//! for controller tests that have no kubelet to run real nodes: it listens on a loopback
//! address the test writes into a pod's status as its IP, so the operator pushes to it exactly
//! as to a pod. Migrations move no keys: the source tells the target RECEIVE then COMMIT, and
//! both amend their topology at the commit, as the contract says.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use strata_operator::resources::ADMIN_PORT;
use strata_operator::topology::client::{AdminEndpoint, Reply, call, read_reply};
use strata_operator::topology::plan::{parse_ranges, ranges, render_ranges};
use strata_operator::topology::{SLOTS, SlotRange, TopologyNode};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// One clock for every fake node of a test binary: orders pushes and migrations across nodes.
static CLOCK: AtomicU64 = AtomicU64::new(1);

pub fn tick() -> u64 {
    CLOCK.fetch_add(1, Ordering::SeqCst)
}

/// What the node holds: its applied topology (epoch, myid, nodes) and the passwords it was sent.
#[derive(Default, Debug, Clone)]
pub struct NodeState {
    pub topology: Option<(u64, String, Vec<String>)>,
    pub auths: Vec<String>,
    /// Every topology applied: (clock, epoch).
    pub applied: Vec<(u64, u64)>,
    /// Migrations this node took part in, oldest first.
    pub migrations: Vec<Migration>,
    /// Migrations started from here stay in `streaming` while set.
    pub hold: bool,
    /// The next migration started from here fails with this error.
    pub fail_next: Option<String>,
    /// How long a migration streams before its handover.
    pub stream_ms: u64,
    /// What INFO answers (the node's memory and tier sections); unset: INFO is refused.
    pub info: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Migration {
    pub id: String,
    pub source: bool,
    pub state: String,
    pub source_id: String,
    pub target_id: String,
    pub slots: String,
    pub error: String,
    /// Clock at START (source) and at the commit.
    pub started: u64,
    pub committed: Option<u64>,
    /// A topology that gives the slots to the target was applied since the commit.
    pub confirmed: bool,
}

pub struct FakeNode {
    pub ip: String,
    pub state: Arc<Mutex<NodeState>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeNode {
    /// Listens on `ip`:16379 (any 127.x.y.z address), requiring AUTH with `password`.
    pub async fn start(ip: &str, password: &str) -> FakeNode {
        Self::start_with(ip, password, NodeState::default()).await
    }

    /// The same node with state kept from before (a restart with its volume).
    pub async fn start_with(ip: &str, password: &str, state: NodeState) -> FakeNode {
        let listener = TcpListener::bind((ip, ADMIN_PORT as u16))
            .await
            .unwrap_or_else(|e| panic!("binding {ip}:{ADMIN_PORT} for a fake node: {e}"));
        let state = Arc::new(Mutex::new(state));
        let password = password.to_owned();
        let shared = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let state = shared.clone();
                let password = password.clone();
                tokio::spawn(async move {
                    let mut stream = BufReader::new(stream);
                    let mut authed = false;
                    while let Ok(Reply::Array(items)) = read_reply(&mut stream).await {
                        let args: Vec<String> = items
                            .into_iter()
                            .map(|i| match i {
                                Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
                                _ => String::new(),
                            })
                            .collect();
                        let answer = answer(&args, &mut authed, &password, &state);
                        if args.first().is_some_and(|a| a.eq_ignore_ascii_case("STRATA.MIGRATE"))
                            && args.get(1).is_some_and(|a| a.eq_ignore_ascii_case("START"))
                            && answer.starts_with(b"+OK")
                        {
                            spawn_migration(state.clone(), args[2].clone(), args[4].clone(), password.clone());
                        }
                        if stream.get_mut().write_all(&answer).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        FakeNode { ip: ip.to_owned(), state, task }
    }

    pub fn epoch(&self) -> u64 {
        self.state.lock().unwrap().topology.as_ref().map_or(0, |t| t.0)
    }

    /// The slots this node owns in its topology (amended by commits).
    pub fn slots(&self) -> u32 {
        let state = self.state.lock().unwrap();
        let Some((_, myid, nodes)) = &state.topology else { return 0 };
        nodes
            .iter()
            .filter_map(|n| TopologyNode::parse(n).ok())
            .find(|n| n.id.as_str() == myid)
            .map_or(0, |n| n.slot_count())
    }

    pub fn set_hold(&self, hold: bool) {
        self.state.lock().unwrap().hold = hold;
    }

    /// Stops listening and serving (the pod is gone); returns what it held.
    pub fn stop(self) -> NodeState {
        self.task.abort();
        self.state.lock().unwrap().clone()
    }
}

impl Drop for FakeNode {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn answer(args: &[String], authed: &mut bool, password: &str, state: &Mutex<NodeState>) -> Vec<u8> {
    let mut state = state.lock().unwrap();
    let upper: Vec<String> = args.iter().take(2).map(|a| a.to_ascii_uppercase()).collect();
    match upper.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["AUTH", _] => {
            state.auths.push(args[1].clone());
            if args[1] == password {
                *authed = true;
                b"+OK\r\n".to_vec()
            } else {
                b"-WRONGPASS invalid username-password pair or user is disabled.\r\n".to_vec()
            }
        }
        _ if !*authed => b"-NOAUTH Authentication required.\r\n".to_vec(),
        ["STRATA.TOPOLOGY", "GET"] => match &state.topology {
            None => b"$-1\r\n".to_vec(),
            Some((epoch, myid, nodes)) => {
                let mut out = format!("*{}\r\n:{epoch}\r\n", nodes.len() + 2).into_bytes();
                for s in std::iter::once(myid).chain(nodes) {
                    out.extend_from_slice(format!("${}\r\n{s}\r\n", s.len()).as_bytes());
                }
                out
            }
        },
        ["STRATA.TOPOLOGY", "SET"] if args.len() >= 4 => {
            let Ok(epoch) = args[2].parse::<u64>() else { return b"-ERR invalid epoch\r\n".to_vec() };
            let (myid, nodes) = (args[3].clone(), args[4..].to_vec());
            if !nodes.iter().any(|n| n.starts_with(&format!("{myid} "))) {
                return b"-ERR invalid topology: myid is not one of the nodes\r\n".to_vec();
            }
            match &state.topology {
                Some((current, _, _)) if epoch < *current => {
                    format!("-ERR stale epoch {epoch}: this node has applied epoch {current}\r\n").into_bytes()
                }
                Some((current, id, held)) if epoch == *current && (id != &myid || held != &nodes) => {
                    format!("-ERR epoch {epoch} is already applied with a different topology\r\n").into_bytes()
                }
                _ => {
                    if let Some(why) = contradicts(&state, &nodes) {
                        return format!("-{why}\r\n").into_bytes();
                    }
                    for m in state.migrations.iter_mut().filter(|m| m.state == "committed") {
                        m.confirmed = true;
                    }
                    state.topology = Some((epoch, myid, nodes));
                    state.applied.push((tick(), epoch));
                    b"+OK\r\n".to_vec()
                }
            }
        }
        ["STRATA.MIGRATE", "START"] if args.len() == 6 => start(&mut state, args),
        // Slots 0-99 hold 1000 keys each, every other slot one.
        ["CLUSTER", "COUNTKEYSINSLOT"] if args.len() == 3 => {
            let slot: u16 = args[2].parse().unwrap_or(0);
            format!(":{}\r\n", if slot < 100 { 1000 } else { 1 }).into_bytes()
        }
        ["INFO", _] if state.info.is_some() => {
            let info = state.info.clone().unwrap_or_default();
            format!("${}\r\n{info}\r\n", info.len()).into_bytes()
        }
        ["STRATA.MIGRATE", "STATUS"] => {
            let found = match args.get(2) {
                Some(id) => state.migrations.iter().rev().find(|m| &m.id == id).cloned().or_else(|| {
                    Some(Migration {
                        id: id.clone(),
                        source: true,
                        state: "unknown".into(),
                        source_id: String::new(),
                        target_id: String::new(),
                        slots: String::new(),
                        error: String::new(),
                        started: 0,
                        committed: None,
                        confirmed: false,
                    })
                }),
                None => state.migrations.last().cloned(),
            };
            match found {
                None => b"*0\r\n".to_vec(),
                Some(m) => {
                    let fields = [
                        ("id", m.id),
                        ("role", if m.source { "source" } else { "target" }.to_owned()),
                        ("state", m.state),
                        ("source", m.source_id),
                        ("target", m.target_id),
                        ("slots", m.slots),
                        ("keys", "7".to_owned()),
                        ("bytes", "700".to_owned()),
                        ("elapsed_ms", "5".to_owned()),
                        ("paused_ms", "1".to_owned()),
                        ("error", m.error),
                    ];
                    let mut out = format!("*{}\r\n", fields.len() * 2).into_bytes();
                    for (k, v) in fields {
                        out.extend_from_slice(format!("${}\r\n{k}\r\n${}\r\n{v}\r\n", k.len(), v.len()).as_bytes());
                    }
                    out
                }
            }
        }
        ["STRATA.MIGRATE", "CANCEL"] if args.len() == 3 => {
            match state.migrations.iter_mut().rev().find(|m| m.id == args[2]) {
                Some(m) if m.state == "committed" => format!("-ERR migration {} has committed\r\n", m.id).into_bytes(),
                Some(m) => {
                    m.state = "aborted".into();
                    b"+OK\r\n".to_vec()
                }
                None => b"+OK\r\n".to_vec(),
            }
        }
        ["STRATA.MIGRATE", "RECEIVE"] if args.len() == 5 => {
            let myid = state.topology.as_ref().map(|t| t.1.clone()).unwrap_or_default();
            state.migrations.push(Migration {
                id: args[2].clone(),
                source: false,
                state: "streaming".into(),
                source_id: args[3].clone(),
                target_id: myid,
                slots: args[4].clone(),
                error: String::new(),
                started: tick(),
                committed: None,
                confirmed: false,
            });
            b"+OK\r\n".to_vec()
        }
        ["STRATA.MIGRATE", "COMMIT"] if args.len() == 3 => {
            let Some(i) = state.migrations.iter().rposition(|m| m.id == args[2] && !m.source) else {
                return b"-ERR unknown migration\r\n".to_vec();
            };
            let (target, slots) = (state.migrations[i].target_id.clone(), state.migrations[i].slots.clone());
            amend(&mut state, &target, &slots);
            state.migrations[i].state = "committed".into();
            state.migrations[i].committed = Some(tick());
            b"+OK\r\n".to_vec()
        }
        _ => b"-ERR unknown command\r\n".to_vec(),
    }
}

/// `STRATA.MIGRATE START <mid> <target-id> <target-admin> <ranges>` on the source.
fn start(state: &mut NodeState, args: &[String]) -> Vec<u8> {
    let (mid, target, slots) = (&args[2], &args[3], &args[5]);
    // The same id again while it runs or after it committed: idempotent.
    if state.migrations.iter().any(|m| &m.id == mid && m.source && m.state != "failed" && m.state != "aborted") {
        return b"+OK\r\n".to_vec();
    }
    if let Some(m) =
        state.migrations.iter().find(|m| m.source && ["snapshot", "streaming", "handover"].contains(&m.state.as_str()))
    {
        return format!("-ERR migration {} is already running on this node\r\n", m.id).into_bytes();
    }
    let Some((_, myid, nodes)) = state.topology.clone() else { return b"-ERR no topology yet\r\n".to_vec() };
    let parsed: Vec<TopologyNode> = nodes.iter().filter_map(|n| TopologyNode::parse(n).ok()).collect();
    if !parsed.iter().any(|n| n.id.as_str() == target) {
        return format!("-ERR unknown node {target}\r\n").into_bytes();
    }
    let mine = parsed.iter().find(|n| n.id.as_str() == myid).map(|n| n.slots.clone()).unwrap_or_default();
    let Ok(wanted) = parse_ranges(slots) else { return b"-ERR invalid slot ranges\r\n".to_vec() };
    for r in &wanted {
        for s in r.first..=r.last {
            if !mine.iter().any(|m| m.first <= s && s <= m.last) {
                return format!("-ERR slot {s} is not served by this node\r\n").into_bytes();
            }
        }
    }
    state.migrations.push(Migration {
        id: mid.clone(),
        source: true,
        state: "streaming".into(),
        source_id: myid,
        target_id: target.clone(),
        slots: slots.clone(),
        error: String::new(),
        started: tick(),
        committed: None,
        confirmed: false,
    });
    b"+OK\r\n".to_vec()
}

/// Runs a started migration: streams (waits) while held, then RECEIVE and COMMIT on the target;
/// the target's OK is the commit point.
fn spawn_migration(state: Arc<Mutex<NodeState>>, mid: String, target_admin: String, password: String) {
    tokio::spawn(async move {
        let set = |state: &Arc<Mutex<NodeState>>, to: &str, error: &str| {
            let mut s = state.lock().unwrap();
            let m = s.migrations.iter_mut().rev().find(|m| m.id == mid && m.source).expect("started");
            if m.state == "streaming" {
                m.state = to.to_owned();
                m.error = error.to_owned();
            }
        };
        let stream_ms = state.lock().unwrap().stream_ms.max(50);
        tokio::time::sleep(Duration::from_millis(stream_ms)).await;
        while state.lock().unwrap().hold {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let fail = state.lock().unwrap().fail_next.take();
        if let Some(error) = fail {
            return set(&state, "failed", &error);
        }
        let (source_id, slots) = {
            let s = state.lock().unwrap();
            let m = s.migrations.iter().rev().find(|m| m.id == mid && m.source).expect("started");
            if m.state != "streaming" {
                return;
            }
            (m.source_id.clone(), m.slots.clone())
        };
        let endpoint = AdminEndpoint::new(target_admin, Some(password));
        let receive = ["STRATA.MIGRATE", "RECEIVE", &mid, &source_id, &slots].map(str::to_owned);
        let commit = ["STRATA.MIGRATE", "COMMIT", &mid].map(str::to_owned);
        let outcome = match call(&endpoint, &receive).await {
            Ok(_) => call(&endpoint, &commit).await.map(drop),
            Err(e) => Err(e),
        };
        match outcome {
            Ok(()) => {
                let mut s = state.lock().unwrap();
                let target = s.migrations.iter().rev().find(|m| m.id == mid).map(|m| m.target_id.clone()).unwrap();
                amend(&mut s, &target, &slots);
                let m = s.migrations.iter_mut().rev().find(|m| m.id == mid && m.source).unwrap();
                m.state = "committed".into();
                m.committed = Some(tick());
            }
            Err(e) => set(&state, "failed", &e.to_string()),
        }
    });
}

/// The applied topology with `slots` given to `target` (same epoch), as after a commit.
fn amend(state: &mut NodeState, target: &str, slots: &str) {
    let Some((_, _, nodes)) = state.topology.as_mut() else { return };
    let moving: Vec<SlotRange> = parse_ranges(slots).unwrap_or_default();
    let mut parsed: Vec<TopologyNode> = nodes.iter().filter_map(|n| TopologyNode::parse(n).ok()).collect();
    for node in &mut parsed {
        let mut owned: Vec<u16> = node.slots.iter().flat_map(|r| r.first..=r.last).collect();
        owned.retain(|s| !moving.iter().any(|r| r.first <= *s && *s <= r.last));
        if node.id.as_str() == target {
            owned.extend(moving.iter().flat_map(|r| r.first..=r.last));
            owned.sort_unstable();
        }
        node.slots = ranges(&owned);
    }
    *nodes = parsed.iter().map(TopologyNode::render).collect();
}

/// The contract's refusal: a push that gives a slot of a committed migration this node took
/// part in to anyone but its target.
fn contradicts(state: &NodeState, nodes: &[String]) -> Option<String> {
    let parsed: Vec<TopologyNode> = nodes.iter().filter_map(|n| TopologyNode::parse(n).ok()).collect();
    let mut owner = vec![""; usize::from(SLOTS)];
    for n in &parsed {
        for r in &n.slots {
            for s in r.first..=r.last {
                owner[usize::from(s)] = n.id.as_str();
            }
        }
    }
    // A committed migration binds pushes until a topology that includes it is applied.
    let m = state.migrations.iter().rev().find(|m| m.state == "committed" && !m.confirmed)?;
    for r in parse_ranges(&m.slots).unwrap_or_default() {
        for s in r.first..=r.last {
            if owner[usize::from(s)] != m.target_id {
                return Some(format!(
                    "ERR invalid topology: slot {s} moved to {} in migration {}; push a topology that includes it",
                    m.target_id, m.id
                ));
            }
        }
    }
    None
}

/// Slots `slots` in the wire form, for assertions.
pub fn wire(slots: &[SlotRange]) -> String {
    render_ranges(slots)
}
