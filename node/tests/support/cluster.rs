//! Three-node clusters for the cluster tests (`cluster_diff.rs`, `cluster_tools.rs`):
//! a real Redis Cluster (Debian's `redis-server --cluster-enabled yes`, joined by
//! `redis-cli --cluster create`) and Strata nodes in cluster mode given the same
//! slot layout over their admin port (`STRATA.TOPOLOGY SET`, see the README's
//! "Cluster mode").
//!
//! Node `i` of either kind owns the `i`-th range of [`slot_spread`], so the
//! two clusters line up node for node. Every port is picked free at start (no
//! fixed ports); processes are killed and their temp dirs removed on drop.

use super::{Frame, RawConn, Server, ServerKind, display_command, wait_for};
use std::net::{Ipv4Addr, TcpListener};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Whether `redis-server` and `redis-cli` can be run. Tests that need them
/// call [`skip_without_redis`] first.
pub fn redis_available() -> bool {
    ["redis-server", "redis-cli"].iter().all(|bin| {
        Command::new(bin)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Prints why and returns true when redis-server/redis-cli are missing: the
/// caller returns (the test passes as skipped, as the small-filesystem tests do).
pub fn skip_without_redis(test: &str) -> bool {
    if redis_available() {
        return false;
    }
    eprintln!(
        "SKIPPED {test}: redis-server/redis-cli not found in PATH (apt-get install -y redis-server redis-tools; \
         CI installs them with `make deps`)"
    );
    true
}

/// Whether `tool` (e.g. redis-benchmark) can be run.
pub fn tool_available(tool: &str) -> bool {
    Command::new(tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

/// `n` distinct free TCP ports on 127.0.0.1 for flags that fix a port (the
/// cluster bus, direct and admin ports): picked at random *below* the
/// kernel's ephemeral range (`ip_local_port_range`) and checked to bind, so
/// that neither another test's ephemeral pick ([`super::free_port`], the
/// servers' own `--port`) nor an outgoing connection can take one before
/// the server binds it. Falls back to ephemeral ports if the range starts
/// too low to leave room.
pub fn free_ports(n: usize) -> Vec<u16> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    let (from, to) = (10_000u32, low.min(65_536));
    let binds = |p: u16| TcpListener::bind((Ipv4Addr::LOCALHOST, p)).is_ok();
    if to <= from + 1000 {
        let listeners: Vec<TcpListener> =
            (0..n).map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("binding an ephemeral port")).collect();
        return listeners.iter().map(|l| l.local_addr().unwrap().port()).collect();
    }
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let mut x = nanos
        ^ (u64::from(std::process::id()) << 32)
        ^ COUNTER.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9E37_79B9);
    let mut out = Vec::with_capacity(n);
    for _ in 0..100_000 {
        if out.len() == n {
            break;
        }
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let port = (u64::from(from) + (z ^ (z >> 31)) % u64::from(to - from)) as u16;
        if !out.contains(&port) && binds(port) {
            out.push(port);
        }
    }
    assert_eq!(out.len(), n, "no {n} free ports in {from}..{to}");
    out
}

/// The contract's slot spread (`redis-cli --cluster create`'s formula): `n`
/// contiguous ranges in node order. 3 nodes: 0-5460, 5461-10922, 10923-16383.
pub fn slot_spread(n: usize) -> Vec<(u16, u16)> {
    let per = 16384.0 / n as f64;
    let mut cursor = 0.0;
    let mut first = 0u16;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let last = if i == n - 1 { 16383 } else { ((cursor + per - 1.0).round() as u16).min(16383) };
        out.push((first, last));
        first = last + 1;
        cursor += per;
    }
    out
}

/// CRC16/XMODEM of `data` (Redis Cluster's key hash), written here rather
/// than taken from the node so the tests check the node's own.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc
}

/// The hash slot of `key`: CRC16 of the key, or of its first non-empty `{tag}`, mod 16384.
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc16(hashed) % 16384
}

/// One node of a [`Cluster`].
pub struct ClusterNode {
    pub server: Server,
    /// The node id (40 hex): Redis's own, or the one pushed to Strata.
    pub id: String,
    /// The port cluster-aware clients use, the one the topology advertises
    /// (Redis: its port; Strata: `--cluster-direct-port`).
    pub direct: u16,
    /// The port any client may use (Strata: `--port`, forwarding; Redis: its port).
    pub plain: u16,
    /// Redis: the cluster bus port; Strata: the admin port (`--cluster-port`).
    pub bus: u16,
    /// The slot range this node owns.
    pub slots: (u16, u16),
    /// The hostname the node announces (`node<i>.example` when asked for).
    pub hostname: Option<String>,
}

impl ClusterNode {
    /// `127.0.0.1:<direct>`.
    pub fn direct_addr(&self) -> String {
        format!("127.0.0.1:{}", self.direct)
    }

    /// A connection to the direct port (MOVED for other nodes' slots).
    pub fn conn(&self) -> RawConn {
        RawConn::connect(("127.0.0.1", self.direct))
            .unwrap_or_else(|e| panic!("connecting to {} node at 127.0.0.1:{}: {e}", self.server.name(), self.direct))
    }

    /// A connection to the plain port (forwarding on Strata).
    pub fn plain_conn(&self) -> RawConn {
        RawConn::connect(("127.0.0.1", self.plain))
            .unwrap_or_else(|e| panic!("connecting to {} node at 127.0.0.1:{}: {e}", self.server.name(), self.plain))
    }

    /// A connection to Strata's admin port.
    pub fn admin_conn(&self) -> RawConn {
        RawConn::connect(("127.0.0.1", self.bus))
            .unwrap_or_else(|e| panic!("connecting to the admin port 127.0.0.1:{}: {e}", self.bus))
    }

    pub fn owns(&self, slot: u16) -> bool {
        (self.slots.0..=self.slots.1).contains(&slot)
    }
}

/// Three (or `n`) nodes sharing the 16384 slots as [`slot_spread`] says.
pub struct Cluster {
    pub kind: ServerKind,
    pub nodes: Vec<ClusterNode>,
}

/// A Strata node id for tests: 40 lowercase hex digits, distinct per `(seed, i)`.
pub fn test_node_id(seed: u64, i: usize) -> String {
    // splitmix64: ids that look like Redis's random ones (no long zero runs).
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(i as u64 + 1);
    let mut next = || {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let hex = format!("{:016x}{:016x}{:016x}", next(), next(), next());
    hex[..40].to_string()
}

/// One node's field of `STRATA.TOPOLOGY SET`:
/// `<id> <ip> <hostname-or-dash> <direct-port> <plain-port> <slot-ranges> <admin-port>`
/// (the seventh field is optional for the node, which then assumes
/// plain + 10000; tests pick free ports, so they always give it).
pub fn topology_entry(
    id: &str,
    ip: &str,
    hostname: Option<&str>,
    direct: u16,
    plain: u16,
    slots: &[(u16, u16)],
    admin: u16,
) -> String {
    let ranges = if slots.is_empty() {
        "-".to_string()
    } else {
        slots
            .iter()
            .map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") })
            .collect::<Vec<_>>()
            .join(",")
    };
    format!("{id} {ip} {} {direct} {plain} {ranges} {admin}", hostname.unwrap_or("-"))
}

/// Sends `STRATA.TOPOLOGY SET <epoch> <myid> <entries...>` on a connection to
/// a node's admin port and returns the reply.
pub fn push_topology(admin: &mut RawConn, epoch: u64, myid: &str, entries: &[String]) -> Frame {
    let mut args: Vec<String> = vec!["STRATA.TOPOLOGY".into(), "SET".into(), epoch.to_string(), myid.into()];
    args.extend(entries.iter().cloned());
    admin.cmd(&args)
}

impl Cluster {
    /// Starts `n` `redis-server --cluster-enabled yes` and joins them with
    /// `redis-cli --cluster create` (no replicas); returns once every node
    /// sees every other and all slots are covered (`cluster_state:ok`).
    pub fn redis(n: usize) -> Cluster {
        Self::redis_with(n, false, &[])
    }

    /// [`Cluster::redis`], each node announcing the hostname `node<i>.example`
    /// if `hostnames`, with `extra` arguments for every redis-server.
    pub fn redis_with(n: usize, hostnames: bool, extra: &[&str]) -> Cluster {
        let spread = slot_spread(n);
        let mut nodes = Vec::with_capacity(n);
        for (i, slots) in spread.into_iter().enumerate() {
            let bus = free_ports(1)[0].to_string();
            let hostname = hostnames.then(|| format!("node{i}.example"));
            let mut args =
                vec!["--cluster-enabled", "yes", "--cluster-config-file", "{dir}/nodes.conf", "--cluster-port", &bus];
            if let Some(h) = &hostname {
                args.extend(["--cluster-announce-hostname", h]);
            }
            args.extend(extra);
            let server = Server::redis_with(&args);
            let port = server.port();
            let bus = bus.parse().unwrap();
            nodes.push(ClusterNode { server, id: String::new(), direct: port, plain: port, bus, slots, hostname });
        }
        let addrs: Vec<String> = nodes.iter().map(ClusterNode::direct_addr).collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("running redis-cli --cluster create");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("[OK] All 16384 slots covered."),
            "redis-cli --cluster create failed ({}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        for node in &mut nodes {
            node.id = node.conn().cmd(&["CLUSTER", "MYID"]).as_str().expect("CLUSTER MYID").to_string();
        }
        let cluster = Cluster { kind: ServerKind::Redis, nodes };
        // Gossip settles after create: every node must see n masters with
        // their addresses, all slots ok, the same ranges as ours.
        let settled = wait_for(Duration::from_secs(30), || cluster.redis_settled());
        assert!(settled, "the Redis Cluster did not settle within 30 s:\n{}", cluster.describe());
        cluster
    }

    fn redis_settled(&self) -> bool {
        self.nodes.iter().all(|node| {
            let mut c = node.conn();
            let info = c.cmd(&["CLUSTER", "INFO"]);
            let ok = info.as_str().is_some_and(|s| s.contains("cluster_state:ok"));
            let nodes = c.cmd(&["CLUSTER", "NODES"]);
            let text = nodes.as_str().unwrap_or("").to_string();
            let lines: Vec<&str> = text.lines().collect();
            ok && lines.len() == self.nodes.len()
                && self.nodes.iter().all(|other| {
                    lines.iter().any(|l| {
                        let addr = match &other.hostname {
                            Some(h) => format!(" 127.0.0.1:{}@{},{h} ", other.direct, other.bus),
                            None => format!(" 127.0.0.1:{}@{} ", other.direct, other.bus),
                        };
                        l.starts_with(&other.id)
                            && l.contains(&addr)
                            && l.contains(" connected")
                            && l.ends_with(&format!(" {}-{}", other.slots.0, other.slots.1))
                    })
                })
        })
    }

    /// Starts `n` Strata nodes with `--cluster-enabled yes` (plus `extra`
    /// arguments) and no topology: [`Cluster::push_topology`] gives them one.
    pub fn strata_unconfigured(n: usize, extra: &[&str]) -> Cluster {
        let seed = u64::from(std::process::id()) ^ 0x57a7a;
        let nodes = slot_spread(n)
            .into_iter()
            .enumerate()
            .map(|(i, slots)| {
                let ports = free_ports(2);
                let (direct, bus) = (ports[0], ports[1]);
                let mut args: Vec<String> = vec![
                    "--cluster-enabled".into(),
                    "yes".into(),
                    "--cluster-direct-port".into(),
                    direct.to_string(),
                    "--cluster-port".into(),
                    bus.to_string(),
                ];
                args.extend(extra.iter().map(|a| a.to_string()));
                let refs: Vec<&str> = args.iter().map(String::as_str).collect();
                let server = Server::strata_with(&refs);
                let plain = server.port();
                ClusterNode { server, id: test_node_id(seed, i), direct, plain, bus, slots, hostname: None }
            })
            .collect();
        Cluster { kind: ServerKind::Strata, nodes }
    }

    /// The `STRATA.TOPOLOGY SET` node entries describing this cluster.
    pub fn topology_entries(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| topology_entry(&n.id, "127.0.0.1", n.hostname.as_deref(), n.direct, n.plain, &[n.slots], n.bus))
            .collect()
    }

    /// Gives node `i` the hostname `node<i>.example` (in the next topology pushed).
    pub fn name_hosts(&mut self) {
        for (i, n) in self.nodes.iter_mut().enumerate() {
            n.hostname = Some(format!("node{i}.example"));
        }
    }

    /// Pushes this cluster's topology at `epoch` to every node; panics unless each answers `+OK`.
    pub fn push_topology(&self, epoch: u64) {
        let entries = self.topology_entries();
        for node in &self.nodes {
            let reply = push_topology(&mut node.admin_conn(), epoch, &node.id, &entries);
            assert_eq!(
                reply,
                Frame::ok(),
                "STRATA.TOPOLOGY SET {epoch} {} {:?} on 127.0.0.1:{}\n{}",
                node.id,
                entries,
                node.bus,
                node.server.logs()
            );
        }
    }

    /// `n` Strata nodes in cluster mode with the topology pushed (epoch 1).
    pub fn strata(n: usize) -> Cluster {
        Self::strata_with(n, &[])
    }

    /// [`Cluster::strata`] with extra node arguments.
    pub fn strata_with(n: usize, extra: &[&str]) -> Cluster {
        let cluster = Self::strata_unconfigured(n, extra);
        cluster.push_topology(1);
        cluster
    }

    /// The index of the node that owns `slot`.
    pub fn owner(&self, slot: u16) -> usize {
        self.nodes.iter().position(|n| n.owns(slot)).expect("every slot has an owner")
    }

    /// The index of the node that owns `key`.
    pub fn owner_of_key(&self, key: &str) -> usize {
        self.owner(key_slot(key.as_bytes()))
    }

    /// `127.0.0.1:<direct>` of every node, for cluster clients' seeds.
    pub fn seeds(&self) -> Vec<String> {
        self.nodes.iter().map(ClusterNode::direct_addr).collect()
    }

    /// Sum of `DBSIZE` over the nodes, and each node's.
    pub fn dbsizes(&self) -> Vec<i64> {
        self.nodes
            .iter()
            .map(|n| {
                let reply = n.conn().cmd(&["DBSIZE"]);
                reply.as_int().unwrap_or_else(|| panic!("DBSIZE on {}: {reply}", n.direct_addr()))
            })
            .collect()
    }

    /// One line per node (for failure messages).
    pub fn describe(&self) -> String {
        self.nodes
            .iter()
            .map(|n| {
                format!(
                    "{} {} direct {} plain {} bus/admin {} slots {}-{}\n",
                    self.kind.name(),
                    n.id,
                    n.direct,
                    n.plain,
                    n.bus,
                    n.slots.0,
                    n.slots.1
                )
            })
            .collect()
    }

    /// Every node's captured logs.
    pub fn logs(&self) -> String {
        self.nodes.iter().map(|n| format!("=== {} ===\n{}\n", n.direct_addr(), n.server.logs())).collect()
    }
}

/// A key whose slot node `node` of `cluster` owns, made of `prefix` and a counter.
pub fn key_on(cluster: &Cluster, node: usize, prefix: &str) -> String {
    (0..100_000)
        .map(|i| format!("{prefix}{i}"))
        .find(|k| cluster.owner_of_key(k) == node)
        .expect("some key lands on every node")
}

/// Runs a command on a connection and describes it, for messages.
pub fn show(conn: &mut RawConn, args: &[&str]) -> (Frame, String) {
    let reply = conn.cmd(args);
    let text = format!("{} -> {reply}", display_command(args));
    (reply, text)
}
