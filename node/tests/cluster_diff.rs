//! Cluster mode, differential against a real Redis Cluster (Debian's
//! redis-server 7.0.15): three `redis-server --cluster-enabled yes` joined by
//! `redis-cli --cluster create`, and three Strata nodes in cluster mode given
//! the same slot layout over the admin port (`STRATA.TOPOLOGY SET`). The same
//! cluster commands and redirection cases run on node `i` of both, on the port
//! cluster-aware clients use (Strata's direct port), and the replies are
//! compared by shape: node ids, `ip:port` and bus/admin ports become
//! placeholders (`<id0>`, `<addr0>`, `<port0>`, `<bus0>`), times and gossip
//! counters become `<int>`, and the order Redis leaves unspecified (shards,
//! NODES lines) is sorted. Every disagreement of a test is collected and
//! reported together (command, Redis's reply, Strata's), then the test fails.
//!
//! `comparison_holds_between_two_redis_clusters` runs the same cases on two
//! Redis Clusters: it proves the normalisation leaves nothing that differs
//! between two correct clusters, so a mismatch against Strata is Strata's.
//!
//! Skipped (with a message) when redis-server/redis-cli are missing.

mod support;

use std::time::Duration;
use support::cluster::*;
use support::*;

/// Placeholders for one cluster's node-specific values.
struct Names {
    subs: Vec<(String, String)>,
    ports: Vec<(i64, String)>,
}

impl Names {
    fn of(cluster: &Cluster) -> Names {
        let mut subs = Vec::new();
        let mut ports = Vec::new();
        for (i, n) in cluster.nodes.iter().enumerate() {
            subs.push((format!("127.0.0.1:{}@{}", n.direct, n.bus), format!("<addr{i}>@<bus{i}>")));
            subs.push((format!("127.0.0.1:{}", n.direct), format!("<addr{i}>")));
            subs.push((format!(":{}@{}", n.direct, n.bus), format!(":<port{i}>@<bus{i}>")));
            if let Some(h) = &n.hostname {
                subs.push((format!("{h}:{}", n.direct), format!("{h}:<port{i}>")));
            }
            if !n.id.is_empty() {
                subs.push((n.id.clone(), format!("<id{i}>")));
            }
            ports.push((i64::from(n.direct), format!("<port{i}>")));
        }
        Names { subs, ports }
    }

    fn text(&self, s: &str) -> String {
        self.subs.iter().fold(s.to_string(), |acc, (from, to)| acc.replace(from, to))
    }

    fn bytes(&self, b: &[u8]) -> Vec<u8> {
        match std::str::from_utf8(b) {
            Ok(s) => self.text(s).into_bytes(),
            Err(_) => b.to_vec(),
        }
    }

    /// The frame with ids, addresses and advertised ports replaced.
    fn frame(&self, f: &Frame) -> Frame {
        let list = |v: &[Frame]| v.iter().map(|x| self.frame(x)).collect::<Vec<_>>();
        let map = |m: &[(Frame, Frame)]| m.iter().map(|(k, v)| (self.frame(k), self.frame(v))).collect::<Vec<_>>();
        match f {
            Frame::Simple(s) => Frame::Simple(self.text(s)),
            Frame::Error(s) => Frame::Error(self.text(s)),
            Frame::BulkError(s) => Frame::BulkError(self.text(s)),
            Frame::Bulk(b) => Frame::Bulk(self.bytes(b)),
            Frame::Verbatim { format, text } => Frame::Verbatim { format: format.clone(), text: self.bytes(text) },
            Frame::Integer(i) => match self.ports.iter().find(|(p, _)| p == i) {
                Some((_, name)) => Frame::Simple(name.clone()),
                None => f.clone(),
            },
            Frame::Array(v) => Frame::Array(list(v)),
            Frame::Set(v) => Frame::Set(list(v)),
            Frame::Push(v) => Frame::Push(list(v)),
            Frame::Map(m) => Frame::Map(map(m)),
            Frame::Attribute { attrs, reply } => {
                Frame::Attribute { attrs: map(attrs), reply: Box::new(self.frame(reply)) }
            }
            other => other.clone(),
        }
    }
}

/// How two (normalised) replies are compared.
#[derive(Clone, Copy, Debug)]
enum How {
    /// Identical after normalisation.
    Same,
    /// Identical after normalisation and sorting the top-level elements only
    /// (CLUSTER SHARDS: Redis lists shards in its node table's order).
    TopSorted,
    /// CLUSTER NODES: the same lines (any order), fields normalised, the
    /// time and epoch fields only required to be integers.
    Nodes,
    /// CLUSTER INFO: the fields Redis always prints, in its order, with equal
    /// values for state, slots and sizes and integers for epochs and counters.
    ClusterInfo,
    /// CLUSTER LINKS: an array whose entries have Redis's field names, order
    /// and value kinds (how many links there are is not compared: Strata has
    /// no cluster bus).
    Links,
    /// `INFO <section>`: every field Redis prints, with the same value.
    InfoFields,
    /// Same frame kind only.
    Kind,
    /// Identical after normalisation and sorting every array (KEYS, SCAN).
    Unordered,
}

/// The CLUSTER INFO fields a Redis 7.0 node always prints (the per-type
/// `cluster_stats_messages_*` lines appear only once such a message passed).
const INFO_ALWAYS: &[&str] = &[
    "cluster_state",
    "cluster_slots_assigned",
    "cluster_slots_ok",
    "cluster_slots_pfail",
    "cluster_slots_fail",
    "cluster_known_nodes",
    "cluster_size",
    "cluster_current_epoch",
    "cluster_my_epoch",
    "cluster_stats_messages_sent",
    "cluster_stats_messages_received",
    "total_cluster_links_buffer_limit_exceeded",
];
/// Of those, the ones whose values must be equal (the rest: integers).
const INFO_EXACT: &[&str] = &[
    "cluster_state",
    "cluster_slots_assigned",
    "cluster_slots_ok",
    "cluster_slots_pfail",
    "cluster_slots_fail",
    "cluster_known_nodes",
    "cluster_size",
];

fn text_of(f: &Frame) -> Option<String> {
    f.as_bytes().map(|b| String::from_utf8_lossy(b).into_owned())
}

fn is_int(s: &str) -> bool {
    s.parse::<i64>().is_ok()
}

/// CLUSTER NODES as sorted lines of normalised fields.
fn nodes_shape(f: &Frame) -> Result<Vec<Vec<String>>, String> {
    let text = text_of(f).ok_or_else(|| format!("not a string: {f}"))?;
    if !text.is_empty() && !text.ends_with('\n') {
        return Err("the last line does not end in \\n".into());
    }
    let mut lines: Vec<Vec<String>> = text
        .lines()
        .map(|line| {
            line.split(' ')
                .enumerate()
                .map(|(i, field)| match i {
                    // ping-sent, pong-recv, config-epoch
                    4..=6 if is_int(field) => "<int>".to_string(),
                    _ => field.to_string(),
                })
                .collect()
        })
        .collect();
    lines.sort();
    Ok(lines)
}

/// CLUSTER INFO's always-present fields, in order, values normalised.
fn cluster_info_shape(f: &Frame) -> Result<Vec<String>, String> {
    let text = text_of(f).ok_or_else(|| format!("not a string: {f}"))?;
    if !text.ends_with("\r\n") {
        return Err("not \\r\\n-terminated".into());
    }
    Ok(text
        .split("\r\n")
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| INFO_ALWAYS.contains(k))
        .map(|(k, v)| if INFO_EXACT.contains(&k) || !is_int(v) { format!("{k}:{v}") } else { format!("{k}:<int>") })
        .collect())
}

/// One CLUSTER LINKS entry as `name:kind` pairs.
fn link_shape(entry: &Frame) -> Vec<String> {
    match entry {
        Frame::Map(m) => m.iter().map(|(k, v)| format!("{}:{}", text_of(k).unwrap_or_default(), v.kind())).collect(),
        Frame::Array(v) => v
            .chunks(2)
            .map(|p| format!("{}:{}", text_of(&p[0]).unwrap_or_default(), p.get(1).map_or("-", Frame::kind)))
            .collect(),
        other => vec![format!("<{}>", other.kind())],
    }
}

fn info_fields(f: &Frame) -> Vec<(String, String)> {
    text_of(f)
        .unwrap_or_default()
        .split("\r\n")
        .filter(|l| !l.is_empty())
        .map(|l| match l.split_once(':') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect()
}

/// Compares normalised replies; `Err` explains the disagreement.
fn agree(how: How, reference: &Frame, tested: &Frame) -> Result<(), String> {
    let differ = |a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| {
        Err(format!("shape differs:\n      redis : {a:?}\n      strata: {b:?}"))
    };
    match how {
        How::Same => {
            if reference == tested {
                Ok(())
            } else {
                Err("replies differ".into())
            }
        }
        How::TopSorted => {
            let sort = |f: &Frame| match f {
                Frame::Array(v) => {
                    let mut v = v.clone();
                    v.sort();
                    Frame::Array(v)
                }
                other => other.clone(),
            };
            if sort(reference) == sort(tested) { Ok(()) } else { Err("replies differ (shards sorted)".into()) }
        }
        How::Nodes => {
            let (a, b) = (nodes_shape(reference)?, nodes_shape(tested)?);
            if a == b { Ok(()) } else { differ(&a, &b) }
        }
        How::ClusterInfo => {
            let (a, b) = (cluster_info_shape(reference)?, cluster_info_shape(tested)?);
            if a == b { Ok(()) } else { differ(&a, &b) }
        }
        How::Links => {
            let (Some(a), Some(b)) = (reference.as_array(), tested.as_array()) else {
                return if reference.kind() == tested.kind() {
                    Ok(())
                } else {
                    differ(&reference.kind(), &tested.kind())
                };
            };
            if reference.kind() != tested.kind() {
                return differ(&reference.kind(), &tested.kind());
            }
            let want = a.first().map(link_shape);
            match (want, b.iter().map(link_shape).find(|s| Some(s) != a.first().map(link_shape).as_ref())) {
                (Some(w), Some(bad)) => differ(&w, &bad),
                _ => Ok(()),
            }
        }
        How::InfoFields => {
            let (a, b) = (info_fields(reference), info_fields(tested));
            let missing: Vec<_> = a.iter().filter(|f| !b.contains(f)).collect();
            if missing.is_empty() && reference.kind() == tested.kind() { Ok(()) } else { differ(&a, &b) }
        }
        How::Unordered => {
            if reference.sorted() == tested.sorted() {
                Ok(())
            } else {
                Err("replies differ even after sorting".into())
            }
        }
        How::Kind => {
            if reference.kind() == tested.kind() {
                Ok(())
            } else {
                differ(&reference.kind(), &tested.kind())
            }
        }
    }
}

/// One side of a comparison: a cluster, a RESP2 and a RESP3 connection to each node.
struct Side {
    cluster: Cluster,
    names: Names,
    conns: Vec<RawConn>,
    conns3: Vec<RawConn>,
}

impl Side {
    fn new(cluster: Cluster) -> Side {
        let names = Names::of(&cluster);
        let conns = cluster.nodes.iter().map(|n| n.conn()).collect();
        let conns3 = cluster
            .nodes
            .iter()
            .map(|n| {
                let mut c = n.conn();
                c.hello3();
                c
            })
            .collect();
        Side { cluster, names, conns, conns3 }
    }

    /// `args` with `<idN>` replaced by node N's id.
    fn args(&self, args: &[&str]) -> Vec<String> {
        args.iter()
            .map(|a| {
                (0..self.cluster.nodes.len())
                    .find(|&i| *a == format!("<id{i}>"))
                    .map_or_else(|| a.to_string(), |i| self.cluster.nodes[i].id.clone())
            })
            .collect()
    }

    fn label(&self) -> &'static str {
        self.cluster.kind.name()
    }
}

/// Runs each case on both sides and collects the disagreements.
struct Compare {
    reference: Side,
    tested: Side,
    tested_label: String,
    log: Vec<String>,
    diffs: Vec<String>,
}

impl Compare {
    fn new(reference: Cluster, tested: Cluster) -> Compare {
        let (reference, tested) = (Side::new(reference), Side::new(tested));
        let tested_label = if tested.label() == reference.label() {
            format!("{}#2", tested.label())
        } else {
            tested.label().to_string()
        };
        Compare { reference, tested, tested_label, log: Vec::new(), diffs: Vec::new() }
    }

    /// Records the normalised pair under `label` and checks it under `how`.
    fn record(&mut self, label: &str, how: How, reference: &Frame, tested: &Frame) {
        let (a, b) = (self.reference.names.frame(reference), self.tested.names.frame(tested));
        let line = format!("{label}\n    redis : {a}\n    {:6}: {b}", self.tested_label);
        if let Err(why) = agree(how, &a, &b) {
            self.diffs.push(format!("{line}\n    ({how:?}) {why}"));
        }
        self.log.push(line);
    }

    /// `args` on node `node` of both (RESP2), compared under `how`.
    /// An argument `<idN>` stands for node N's id on each side.
    fn case(&mut self, node: usize, how: How, args: &[&str]) -> (Frame, Frame) {
        let (args_a, args_b) = (self.reference.args(args), self.tested.args(args));
        let a = self.reference.conns[node].cmd(&args_a);
        let b = self.tested.conns[node].cmd(&args_b);
        self.record(&format!("node{node}: {}", display_command(args)), how, &a, &b);
        (a, b)
    }

    /// The same on the RESP3 connections.
    fn case3(&mut self, node: usize, how: How, args: &[&str]) -> (Frame, Frame) {
        let a = self.reference.conns3[node].cmd(args);
        let b = self.tested.conns3[node].cmd(args);
        self.record(&format!("node{node} (RESP3): {}", display_command(args)), how, &a, &b);
        (a, b)
    }

    /// Runs `args` on both without comparing; both must answer `expect`.
    fn setup(&mut self, node: usize, args: &[&str], expect: Frame) {
        for side in [&mut self.reference, &mut self.tested] {
            let reply = side.conns[node].cmd(args);
            assert_eq!(reply, expect, "setup step {} on {}", display_command(args), side.label());
        }
    }

    /// Prints every compared pair, then fails listing each disagreement.
    fn finish(self, what: &str) {
        println!("=== {what}: {} cases ===\n{}", self.log.len(), self.log.join("\n"));
        assert!(
            self.diffs.is_empty(),
            "{what}: {} of {} cases differ from Redis Cluster (placeholders: <idN>/<addrN>/<portN>/<busN> = node N, \
             which owns the N-th slot range):\n\n{}\n\nnodes:\n{}{}",
            self.diffs.len(),
            self.log.len(),
            self.diffs.join("\n\n"),
            self.reference.cluster.describe(),
            self.tested.cluster.describe()
        );
    }
}

// Keys and their slots (see /work/compat-redis-replies.md): node0 owns 0-5460,
// node1 5461-10922, node2 10923-16383.
// b = 3300 (node0), bar = 5061 (node0), c = 7365 (node1), foo = 12182 (node2),
// a = 15495 (node2), ch = 13271 (node2), {t}a = 15891 (node2).

fn check_key_layout(cluster: &Cluster) {
    for (key, slot, node) in [("b", 3300, 0), ("bar", 5061, 0), ("c", 7365, 1), ("foo", 12182, 2), ("a", 15495, 2)] {
        assert_eq!(key_slot(key.as_bytes()), slot, "slot of {key}");
        assert_eq!(cluster.owner(slot), node, "owner of {key}");
    }
}

/// CLUSTER SHARDS/SLOTS/NODES/MYID/INFO/LINKS from every node, and the
/// keyspace subcommands with their errors.
fn topology_cases(c: &mut Compare) {
    for node in 0..3 {
        c.case(node, How::TopSorted, &["CLUSTER", "SHARDS"]);
        c.case(node, How::Same, &["CLUSTER", "SLOTS"]);
        c.case(node, How::Nodes, &["CLUSTER", "NODES"]);
        c.case(node, How::Same, &["CLUSTER", "MYID"]);
        c.case(node, How::ClusterInfo, &["CLUSTER", "INFO"]);
        c.case(node, How::Links, &["CLUSTER", "LINKS"]);
    }
    c.case3(0, How::TopSorted, &["CLUSTER", "SHARDS"]);
    c.case3(0, How::Same, &["CLUSTER", "SLOTS"]);
    c.case3(0, How::Links, &["CLUSTER", "LINKS"]);
    c.case(0, How::InfoFields, &["INFO", "cluster"]);
    c.case3(0, How::InfoFields, &["INFO", "cluster"]);

    c.case(0, How::Same, &["CLUSTER", "KEYSLOT", "foo"]);
    c.case(0, How::Same, &["CLUSTER", "KEYSLOT", "{user1}.a"]);
    c.case(0, How::Same, &["CLUSTER", "KEYSLOT", "{}x"]);
    c.case(0, How::Same, &["CLUSTER", "KEYSLOT"]);
    c.case(0, How::Same, &["CLUSTER", "KEYSLOT", "a", "b"]);
    c.setup(0, &["SET", "b", "1"], Frame::ok());
    c.setup(0, &["SET", "{b}2", "2"], Frame::ok());
    c.case(0, How::Same, &["CLUSTER", "COUNTKEYSINSLOT", "3300"]);
    c.case(0, How::Same, &["CLUSTER", "COUNTKEYSINSLOT", "12182"]);
    c.case(0, How::Same, &["CLUSTER", "COUNTKEYSINSLOT", "16384"]);
    c.case(0, How::Same, &["CLUSTER", "COUNTKEYSINSLOT", "-1"]);
    c.case(0, How::Same, &["CLUSTER", "COUNTKEYSINSLOT", "abc"]);
    c.case(0, How::Same, &["CLUSTER", "COUNTKEYSINSLOT"]);
    let (a, b) = c.case(0, How::Kind, &["CLUSTER", "GETKEYSINSLOT", "3300", "1"]);
    let len = |f: &Frame| Frame::Integer(f.as_array().map_or(-1, |v| v.len() as i64));
    c.record("node0: CLUSTER GETKEYSINSLOT 3300 1 (number of keys)", How::Same, &len(&a), &len(&b));
    let (a, b) = c.case(0, How::Kind, &["CLUSTER", "GETKEYSINSLOT", "3300", "10"]);
    c.record("node0: CLUSTER GETKEYSINSLOT 3300 10 (sorted)", How::Same, &a.sorted(), &b.sorted());
    c.case(0, How::Same, &["CLUSTER", "GETKEYSINSLOT", "12182", "10"]);
    c.case(0, How::Same, &["CLUSTER", "GETKEYSINSLOT", "3300", "-1"]);
    c.case(0, How::Same, &["CLUSTER", "GETKEYSINSLOT", "16384", "1"]);
    c.case(0, How::Same, &["CLUSTER", "GETKEYSINSLOT", "abc", "1"]);
    c.case(0, How::Same, &["CLUSTER", "GETKEYSINSLOT", "1", "abc"]);
    c.case(0, How::Same, &["CLUSTER", "FOO"]);
    c.case(0, How::Same, &["CLUSTER"]);
    c.case(0, How::Same, &["CLUSTER", "MYID", "x"]);
    c.case(0, How::Same, &["CLUSTER", "SHARDS", "x"]);
    c.case(0, How::Same, &["READONLY"]);
    c.case(0, How::Same, &["READWRITE"]);
    c.case(0, How::Same, &["ASKING"]);
    c.case(0, How::Same, &["READONLY", "x"]);
    c.case(0, How::Same, &["GET", "b"]);
    // Subcommands some clients and tools call.
    c.case(0, How::Same, &["CLUSTER", "REPLICAS", "<id0>"]);
    c.case(0, How::Same, &["CLUSTER", "SLAVES", "<id1>"]);
    c.case(0, How::Same, &["CLUSTER", "REPLICAS", "0123456789012345678901234567890123456789"]);
    c.case(0, How::Same, &["CLUSTER", "COUNT-FAILURE-REPORTS", "<id1>"]);
    c.case(0, How::Kind, &["CLUSTER", "HELP"]);
}

/// MOVED, CROSSSLOT, transactions, WATCH, scripts, SELECT, pub/sub and
/// blocking commands.
fn redirection_cases(c: &mut Compare) {
    c.setup(0, &["SET", "b", "1"], Frame::ok());
    for args in [
        &["GET", "foo"][..],
        &["SET", "foo", "x"],
        &["EXISTS", "foo"],
        &["TYPE", "foo"],
        &["GET", "c"],
        &["MSET", "a", "1", "b", "2"],
        &["MSET", "{t}a", "1", "{t}b", "2"],
        &["MGET", "foo", "{foo}x"],
        &["DEL", "foo", "b"],
        &["DEL", "b", "bar"],
        &["GET", "b"],
        &["SELECT", "1"],
        &["SELECT", "0"],
    ] {
        c.case(0, How::Same, args);
    }
    c.case(1, How::Same, &["GET", "b"]);
    c.case(2, How::Same, &["SET", "b", "x"]);
    c.case(1, How::Same, &["GET", "c"]);
    // ASKING and READONLY do not serve another master's slot.
    c.case(0, How::Same, &["ASKING"]);
    c.case(0, How::Same, &["GET", "foo"]);
    c.case(0, How::Same, &["READONLY"]);
    c.case(0, How::Same, &["GET", "foo"]);
    c.case(0, How::Same, &["READWRITE"]);
    // Multi-key commands of other families: one slot runs, two slots CROSSSLOT.
    for args in [
        &["RENAME", "b", "bar"][..],
        &["RENAME", "b", "{b}renamed"],
        &["RENAME", "{b}renamed", "b"],
        &["COPY", "b", "foo"],
        &["SMOVE", "b", "bar", "m"],
        &["LMOVE", "{b}l1", "{b}l2", "LEFT", "RIGHT"],
        &["ZUNIONSTORE", "{b}z", "2", "b", "bar"],
        &["SINTERCARD", "2", "{b}s1", "{b}s2"],
        &["XREAD", "STREAMS", "b", "bar", "0", "0"],
        &["PFCOUNT", "b", "bar"],
        &["BITOP", "AND", "{b}dest", "b", "{b}other"],
        &["SORT", "{b}list", "BY", "w*"],
        &["SORT", "{b}list", "GET", "x*"],
        &["SORT", "{b}list", "BY", "{b}w*", "GET", "{b}x*"],
        &["SORT_RO", "{b}list", "BY", "w*"],
        &["OBJECT", "ENCODING", "foo"],
    ] {
        c.case(0, How::Same, args);
    }
    // Keyless commands answer for this node only; FLUSHALL flushes this node only.
    c.setup(2, &["SET", "foo", "kept"], Frame::ok());
    c.case(0, How::Same, &["DBSIZE"]);
    c.case(0, How::Unordered, &["KEYS", "*"]);
    c.case(0, How::Kind, &["RANDOMKEY"]);
    c.case(0, How::Unordered, &["SCAN", "0", "COUNT", "1000"]);
    c.case(0, How::Same, &["FLUSHALL"]);
    c.case(0, How::Same, &["DBSIZE"]);
    c.case(2, How::Same, &["GET", "foo"]);
    c.case(2, How::Same, &["DBSIZE"]);
    // Scripts are per node: loaded on node 0, unknown on node 2.
    let (sha, _) = c.case(0, How::Same, &["SCRIPT", "LOAD", "return redis.call('get', KEYS[1])"]);
    let sha = sha.as_str().unwrap_or("none").to_string();
    c.case(0, How::Same, &["EVALSHA", &sha, "1", "b"]);
    c.case(2, How::Same, &["EVALSHA", &sha, "1", "foo"]);
    c.case(2, How::Same, &["SCRIPT", "EXISTS", &sha]);
    c.case(0, How::Same, &["SCRIPT", "FLUSH"]);
    // Functions: per node too; FCALL's keys are gated as EVAL's.
    let lib = "#!lua name=cl\nredis.register_function('cget', function(keys) return redis.call('get', keys[1]) end)";
    c.case(0, How::Same, &["FUNCTION", "LOAD", lib]);
    c.case(0, How::Same, &["FCALL", "cget", "1", "b"]);
    c.case(0, How::Same, &["FCALL", "cget", "1", "foo"]);
    c.case(0, How::Same, &["FCALL", "cget", "2", "b", "bar"]);
    c.case(0, How::Same, &["FCALL_RO", "cget", "1", "foo"]);
    c.case(2, How::Same, &["FCALL", "cget", "1", "foo"]);
    c.case(0, How::Same, &["FUNCTION", "FLUSH"]);

    // MULTI with a command for another node: MOVED at queue time, EXECABORT.
    for args in [&["MULTI"][..], &["SET", "foo", "1"], &["SET", "b", "1"], &["EXEC"]] {
        c.case(0, How::Same, args);
    }
    // MULTI with a queued cross-slot command.
    for args in [&["MULTI"][..], &["MSET", "b", "1", "bar", "2"], &["EXEC"]] {
        c.case(0, How::Same, args);
    }
    // Each command local, different slots: CROSSSLOT at EXEC, discarded.
    for args in [&["MULTI"][..], &["SET", "b", "1"], &["SET", "bar", "2"], &["EXEC"], &["EXEC"], &["GET", "bar"]] {
        c.case(0, How::Same, args);
    }
    // One slot (hash tag): runs.
    for args in [&["MULTI"][..], &["SET", "{b}1", "1"], &["INCR", "b"], &["EXEC"]] {
        c.case(0, How::Same, args);
    }

    // WATCH
    c.case(0, How::Same, &["WATCH", "foo"]);
    c.case(0, How::Same, &["WATCH", "b", "bar"]);
    c.case(0, How::Same, &["WATCH", "b"]);
    c.case(0, How::Same, &["UNWATCH"]);

    // Scripts
    c.case(0, How::Same, &["EVAL", "return redis.call('mget', KEYS[1], KEYS[2])", "2", "b", "bar"]);
    c.case(0, How::Same, &["EVAL", "return redis.call('get', KEYS[1])", "1", "foo"]);
    c.case(0, How::Same, &["EVAL", "return redis.call('get', KEYS[1])", "1", "b"]);
    c.case(0, How::Same, &["EVAL", "return redis.call('get', 'foo')", "0"]);
    c.case(0, How::Same, &["EVAL", "return redis.pcall('get', 'foo')", "1", "b"]);
    c.case(0, How::Same, &["EVAL", "return redis.call('get', 'bar')", "0"]);
    c.case(0, How::Same, &["EVAL", "return redis.call('get', 'bar')", "1", "b"]);
    c.case(0, How::Same, &["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "foo"]);
    c.case(0, How::Same, &["EVAL", "return 1", "0"]);

    // Blocking commands: MOVED at once for another node's key.
    c.case(0, How::Same, &["BLPOP", "foo", "1"]);
    c.case(0, How::Same, &["BLPOP", "b", "bar", "1"]);
    c.case(0, How::Same, &["BLPOP", "{b}list", "0.01"]);

    // Sharded pub/sub stays in its slot's node.
    c.case(0, How::Same, &["SPUBLISH", "ch", "hi"]);
    c.case(2, How::Same, &["SPUBLISH", "ch", "hi"]);
    c.case(0, How::Same, &["SSUBSCRIBE", "ch"]);
    c.case(0, How::Same, &["SSUBSCRIBE", "b", "bar"]);

    // PUBLISH reaches subscribers on every node; the reply counts local ones.
    let mut subs: Vec<RawConn> = [&c.reference, &c.tested].iter().map(|s| s.cluster.nodes[2].conn()).collect();
    let (sa, sb) = (subs[0].cmd(&["SUBSCRIBE", "news"]), subs[1].cmd(&["SUBSCRIBE", "news"]));
    c.record("node2 (subscriber): SUBSCRIBE news", How::Same, &sa, &sb);
    // Subscribing on node2 is local; PUBSUB NUMSUB is per node.
    c.case(2, How::Same, &["PUBSUB", "NUMSUB", "news"]);
    c.case(0, How::Same, &["PUBSUB", "NUMSUB", "news"]);
    c.case(0, How::Same, &["PUBLISH", "news", "hello"]);
    let next = |conn: &mut RawConn| {
        conn.set_timeout(Some(Duration::from_secs(3)));
        match conn.try_read_frame() {
            Ok(Some(f)) => f,
            other => Frame::Simple(format!("<no message within 3 s: {other:?}>")),
        }
    };
    let (ma, mb) = (next(&mut subs[0]), next(&mut subs[1]));
    c.record("node2 (subscriber): message published on node0", How::Same, &ma, &mb);
    c.case(2, How::Same, &["PUBLISH", "news", "x2"]);
    let (ma, mb) = (next(&mut subs[0]), next(&mut subs[1]));
    c.record("node2 (subscriber): message published on node2", How::Same, &ma, &mb);
}

#[test]
fn topology_replies_match_redis() {
    if skip_without_redis("topology_replies_match_redis") {
        return;
    }
    let strata = Cluster::strata(3);
    check_key_layout(&strata);
    let mut c = Compare::new(Cluster::redis(3), strata);
    topology_cases(&mut c);
    c.finish("topology replies");
}

#[test]
fn redirections_match_redis() {
    if skip_without_redis("redirections_match_redis") {
        return;
    }
    let strata = Cluster::strata(3);
    let mut c = Compare::new(Cluster::redis(3), strata);
    redirection_cases(&mut c);
    c.finish("redirections");
}

/// A data command on a cluster-mode node before it has any slots: a fresh
/// `--cluster-enabled yes` redis-server (no `--cluster create`) against a
/// Strata node with no topology pushed; then one node owning slots 0-100
/// alone (the rest uncovered).
#[test]
fn clusterdown_matches_redis() {
    if skip_without_redis("clusterdown_matches_redis") {
        return;
    }
    let bus = free_ports(1)[0].to_string();
    let redis = Server::redis_with(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "{dir}/nodes.conf",
        "--cluster-port",
        &bus,
    ]);
    let strata = Cluster::strata_unconfigured(1, &[]);
    let redis_node = ClusterNode {
        id: redis.conn().cmd(&["CLUSTER", "MYID"]).as_str().unwrap_or_default().to_string(),
        direct: redis.port(),
        plain: redis.port(),
        bus: bus.parse().unwrap(),
        slots: (0, 100),
        hostname: None,
        server: redis,
    };
    let mut c = Compare::new(Cluster { kind: ServerKind::Redis, nodes: vec![redis_node] }, strata);
    // No slot anywhere.
    for args in [
        &["GET", "foo"][..],
        &["SET", "foo", "1"],
        &["MGET", "a", "b"],
        &["WATCH", "x"],
        &["BLPOP", "x", "1"],
        &["SPUBLISH", "c", "m"],
        &["EVAL", "return redis.call('get', KEYS[1])", "1", "x"],
        &["EVAL", "return redis.call('get', 'x')", "0"],
        &["MULTI"],
        &["GET", "x"],
        &["EXEC"],
        &["PING"],
        &["DBSIZE"],
        &["KEYS", "*"],
        &["EVAL", "return 1", "0"],
        &["PUBLISH", "c", "m"],
        &["CLUSTER", "SLOTS"],
        &["CLUSTER", "COUNTKEYSINSLOT", "1"],
        &["CLUSTER", "GETKEYSINSLOT", "1", "1"],
    ] {
        c.case(0, How::Same, args);
    }
    cluster_state(&mut c, "no slots");
    c.case(0, How::InfoFields, &["INFO", "cluster"]);

    // The node owns 0-100 and nothing else is covered.
    let a = c.reference.conns[0].cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "100"]);
    assert_eq!(a, Frame::ok(), "redis ADDSLOTSRANGE");
    let node = &c.tested.cluster.nodes[0];
    let entry = topology_entry(&node.id, "127.0.0.1", None, node.direct, node.plain, &[(0, 100)], node.bus);
    let b = push_topology(&mut node.admin_conn(), 1, &node.id.clone(), &[entry]);
    c.record("STRATA.TOPOLOGY SET 1 <one node, slots 0-100> (redis: CLUSTER ADDSLOTSRANGE 0 100)", How::Same, &a, &b);
    let state_fail = wait_for(Duration::from_secs(10), || {
        c.reference.conns[0].cmd(&["CLUSTER", "INFO"]).as_str().is_some_and(|s| s.contains("cluster_state:fail"))
    });
    assert!(state_fail, "redis: cluster_state stays fail with slots uncovered");
    // k126: slot 58 (owned); x: 16287 (unowned).
    assert_eq!(key_slot(b"k126"), 58);
    for args in [&["GET", "k126"][..], &["SET", "k126", "1"], &["GET", "x"], &["MGET", "k126", "x"]] {
        c.case(0, How::Same, args);
    }
    cluster_state(&mut c, "slots 0-100 only");
    // (CLUSTER SLOTS/NODES of a lone redis-server show an empty IP: it learns
    // its own address from a peer; not compared here.)
    c.finish("CLUSTERDOWN");
}

/// Nodes announcing hostnames (`node<i>.example`), as the operator's pods do
/// through the headless Service: SHARDS gains a `hostname` field, SLOTS a
/// `hostname` metadata entry, NODES `,<hostname>` after the address; with
/// `cluster-preferred-endpoint-type hostname`, SLOTS' first endpoint, SHARDS'
/// `endpoint` and MOVED name the host.
fn hostname_cases(preferred: &str) {
    let args = ["--cluster-preferred-endpoint-type", preferred];
    let redis = Cluster::redis_with(3, true, &args);
    let mut strata = Cluster::strata_unconfigured(3, &args);
    strata.name_hosts();
    strata.push_topology(1);
    let mut c = Compare::new(redis, strata);
    for node in [0, 2] {
        c.case(node, How::TopSorted, &["CLUSTER", "SHARDS"]);
        c.case(node, How::Same, &["CLUSTER", "SLOTS"]);
        c.case(node, How::Nodes, &["CLUSTER", "NODES"]);
    }
    c.case3(0, How::TopSorted, &["CLUSTER", "SHARDS"]);
    c.case3(0, How::Same, &["CLUSTER", "SLOTS"]);
    c.case(0, How::Same, &["GET", "foo"]);
    c.case(2, How::Same, &["SET", "b", "1"]);
    c.case(0, How::Same, &["EVAL", "return redis.call('get', KEYS[1])", "1", "c"]);
    c.finish(&format!("hostnames, cluster-preferred-endpoint-type {preferred}"));
}

#[test]
fn hostname_endpoints_match_redis_preferring_ip() {
    if skip_without_redis("hostname_endpoints_match_redis_preferring_ip") {
        return;
    }
    hostname_cases("ip");
}

#[test]
fn hostname_endpoints_match_redis_preferring_hostname() {
    if skip_without_redis("hostname_endpoints_match_redis_preferring_hostname") {
        return;
    }
    hostname_cases("hostname");
}

/// A slot changes owner while a client is blocked on one of its keys: Redis
/// unblocks it with MOVED to the new owner. Redis moves slot 3300 (empty) from
/// node 0 to node 1 with `CLUSTER SETSLOT 3300 NODE <id1>` on both; Strata
/// gets the same layout as topology epoch 2. Then SLOTS/SHARDS/NODES and
/// MOVED agree on the new owner.
#[test]
fn a_slot_moving_to_another_node_matches_redis() {
    if skip_without_redis("a_slot_moving_to_another_node_matches_redis") {
        return;
    }
    let mut c = Compare::new(Cluster::redis(3), Cluster::strata(3));
    assert_eq!(key_slot(b"{b}zz"), 3300);
    let mut blocked: Vec<RawConn> = [&c.reference, &c.tested].iter().map(|s| s.cluster.nodes[0].conn()).collect();
    for conn in &mut blocked {
        conn.send(&["BLPOP", "{b}zz", "0"]);
    }
    std::thread::sleep(Duration::from_millis(300));
    // Redis: node 0 gives the slot away, node 1 takes it.
    let id1 = c.reference.cluster.nodes[1].id.clone();
    for node in [0, 1] {
        let reply = c.reference.conns[node].cmd(&["CLUSTER", "SETSLOT", "3300", "NODE", &id1]);
        assert_eq!(reply, Frame::ok(), "redis node {node}: CLUSTER SETSLOT 3300 NODE {id1}");
    }
    // Strata: the same layout as epoch 2.
    let s = &c.tested.cluster;
    let ranges: [&[(u16, u16)]; 3] = [&[(0, 3299), (3301, 5460)], &[(3300, 3300), (5461, 10922)], &[(10923, 16383)]];
    let entries: Vec<String> = s
        .nodes
        .iter()
        .zip(ranges)
        .map(|(n, r)| topology_entry(&n.id, "127.0.0.1", None, n.direct, n.plain, r, n.bus))
        .collect();
    for n in &s.nodes {
        let reply = push_topology(&mut n.admin_conn(), 2, &n.id, &entries);
        assert_eq!(reply, Frame::ok(), "STRATA.TOPOLOGY SET 2 on {}", n.direct_addr());
    }
    let next = |conn: &mut RawConn| {
        conn.set_timeout(Some(Duration::from_secs(5)));
        match conn.try_read_frame() {
            Ok(Some(f)) => f,
            other => Frame::Simple(format!("<no reply within 5 s: {other:?}>")),
        }
    };
    let (a, b) = (next(&mut blocked[0]), next(&mut blocked[1]));
    c.record("node0 (blocked in BLPOP {b}zz 0 while slot 3300 moves to node1)", How::Same, &a, &b);
    // Redis's node 2 learns the move by gossip: wait for it (Strata's nodes all got epoch 2).
    let mut node2 = c.reference.cluster.nodes[2].conn();
    let port1 = c.reference.cluster.nodes[1].direct;
    let learned = wait_for(Duration::from_secs(20), || {
        node2.cmd(&["GET", "{b}zz"]).error_message().is_some_and(|m| m.ends_with(&format!(":{port1}")))
    });
    assert!(learned, "redis node 2 did not learn within 20 s that slot 3300 moved to node 1");
    for node in [0, 1] {
        c.case(node, How::Same, &["CLUSTER", "SLOTS"]);
        c.case(node, How::TopSorted, &["CLUSTER", "SHARDS"]);
        c.case(node, How::Nodes, &["CLUSTER", "NODES"]);
    }
    c.case(0, How::Same, &["GET", "{b}zz"]);
    c.case(0, How::Same, &["GET", "b"]);
    c.case(1, How::Same, &["GET", "{b}zz"]);
    c.case(1, How::Same, &["CLUSTER", "COUNTKEYSINSLOT", "3300"]);
    c.case(2, How::Same, &["GET", "{b}zz"]);
    c.finish("a slot moving");
}

/// CLUSTER INFO's `cluster_state` and `cluster_slots_assigned` lines on node 0.
fn cluster_state(c: &mut Compare, when: &str) {
    let pick = |f: Frame| {
        let text = text_of(&f).unwrap_or_else(|| f.to_string());
        let lines: Vec<&str> = text
            .split("\r\n")
            .filter(|l| l.starts_with("cluster_state:") || l.starts_with("cluster_slots_assigned:"))
            .collect();
        Frame::Bulk(lines.join(" ").into_bytes())
    };
    let a = pick(c.reference.conns[0].cmd(&["CLUSTER", "INFO"]));
    let b = pick(c.tested.conns[0].cmd(&["CLUSTER", "INFO"]));
    c.record(&format!("node0: CLUSTER INFO state ({when})"), How::Same, &a, &b);
}

/// The harness itself: two Redis Clusters agree on every case, so a
/// disagreement with Strata is not an artefact of the normalisation.
#[test]
fn comparison_holds_between_two_redis_clusters() {
    if skip_without_redis("comparison_holds_between_two_redis_clusters") {
        return;
    }
    let mut c = Compare::new(Cluster::redis(3), Cluster::redis(3));
    check_key_layout(&c.reference.cluster);
    topology_cases(&mut c);
    redirection_cases(&mut c);
    let cases = c.log.len();
    assert!(cases > 100, "only {cases} cases ran");
    c.finish("redis vs redis");
}
