//! Cluster mode as three real nodes run it: the topology pushed on the admin
//! port (epochs, the admin password, kept across a restart), MOVED on the
//! direct port, and forwarding on the plain port — pipelined replies in
//! order, transactions as a unit, blocking commands, RESP3, PUBLISH to every
//! node, an owner that is down. (Differences with a real Redis Cluster are
//! in cluster_diff.rs.)

mod support;

use std::time::Duration;
use support::{Frame, RawConn};
use support::{Server, free_port, wait_for};

/// One node and its three ports.
struct Node {
    server: Server,
    direct: u16,
    admin: u16,
    id: String,
}

impl Node {
    fn start(n: usize, extra: &[&str]) -> Node {
        let (direct, admin) = (free_port(), free_port());
        let mut args = vec![
            "--cluster-enabled".to_string(),
            "yes".into(),
            "--cluster-direct-port".into(),
            direct.to_string(),
            "--cluster-port".into(),
            admin.to_string(),
        ];
        if !extra.contains(&"--dir") {
            args.extend(["--dir".into(), "{dir}/data".into()]);
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let node = Node { server: Server::strata_with(&refs), direct, admin, id: format!("{:040x}", n + 1) };
        node.wait_loaded();
        node
    }

    /// Waits for the log replay (-LOADING until done, even on a fresh
    /// directory on a loaded machine); this command reaches the gate where
    /// a key's command would get CLUSTERDOWN or MOVED first.
    fn wait_loaded(&self) {
        let mut c = self.direct();
        let ok = wait_for(Duration::from_secs(30), || {
            !c.cmd(&["CLUSTER", "COUNTKEYSINSLOT", "0"]).error_message().is_some_and(|e| e.starts_with("LOADING"))
        });
        assert!(ok, "the node is still loading after 30 s\n{}", self.server.logs());
    }

    /// Kills the node and starts it again on the same ports with `extra`
    /// (its `--dir` among them, to keep its data and topology).
    fn restart(&mut self, extra: &[&str]) {
        self.restart_loading(extra, &[]);
        self.wait_loaded();
    }

    /// [`Self::restart`] with `env`, returning while the node may still be
    /// replaying its log.
    fn restart_loading(&mut self, extra: &[&str], env: &[(&str, &str)]) {
        self.server.kill();
        let (port, direct, admin) = (self.server.port().to_string(), self.direct.to_string(), self.admin.to_string());
        let mut args = vec!["--cluster-enabled", "yes", "--cluster-direct-port", &direct, "--cluster-port", &admin];
        args.extend(["--port", &port]);
        args.extend(extra);
        self.server = Server::strata_with_env(&args, env);
    }

    fn plain(&self) -> RawConn {
        self.server.conn()
    }

    fn direct(&self) -> RawConn {
        connect(self.direct)
    }

    fn admin(&self) -> RawConn {
        connect(self.admin)
    }

    /// The six-field-plus-admin form of the push.
    fn member(&self, ranges: &str) -> String {
        format!("{} 127.0.0.1 - {} {} {ranges} {}", self.id, self.direct, self.server.port(), self.admin)
    }
}

fn connect(port: u16) -> RawConn {
    let mut c = RawConn::connect(("127.0.0.1", port)).expect("connect");
    c.set_timeout(Some(Duration::from_secs(10)));
    c
}

const RANGES: [&str; 3] = ["0-5460", "5461-10922", "10923-16383"];

/// Pushes `epoch` with the three standard ranges to every node.
fn push(nodes: &[Node], epoch: u64) {
    let members: Vec<String> = nodes.iter().zip(RANGES).map(|(n, r)| n.member(r)).collect();
    for n in nodes {
        let mut args = vec!["STRATA.TOPOLOGY".to_string(), "SET".into(), epoch.to_string(), n.id.clone()];
        args.extend(members.iter().cloned());
        assert_eq!(n.admin().cmd(&args), Frame::ok(), "push to {}", n.id);
    }
}

fn three() -> Vec<Node> {
    let nodes: Vec<Node> = (0..3).map(|i| Node::start(i, &[])).collect();
    push(&nodes, 1);
    nodes
}

// Key slots: "b" 3300 (node 0), "c" 7365 (node 1), "foo" 12182 (node 2).

#[test]
fn direct_port_redirects_and_plain_port_forwards() {
    let nodes = three();
    // Before anything: the data is where the slot is.
    let mut d0 = nodes[0].direct();
    assert_eq!(d0.cmd(&["SET", "foo", "x"]), Frame::error(&format!("MOVED 12182 127.0.0.1:{}", nodes[2].direct)));
    assert_eq!(
        d0.cmd(&["MSET", "b", "1", "foo", "2"]),
        Frame::error("CROSSSLOT Keys in request don't hash to the same slot")
    );
    d0.ok(&["SET", "b", "local"]);
    // The plain port: the same command reaches the owner.
    let mut p0 = nodes[0].plain();
    p0.ok(&["SET", "foo", "via-node-0"]);
    assert_eq!(nodes[2].direct().cmd(&["GET", "foo"]), Frame::bulk("via-node-0"));
    assert_eq!(p0.cmd(&["GET", "foo"]), Frame::bulk("via-node-0"));
    assert_eq!(p0.cmd(&["GET", "b"]), Frame::bulk("local"));
    // Cross-slot stays an error on the plain port: no command is split.
    assert!(p0.cmd(&["MGET", "b", "foo"]).error_message().unwrap().starts_with("CROSSSLOT"));
    // Only db 0, as in Redis Cluster.
    assert_eq!(p0.cmd(&["SELECT", "1"]), Frame::error("ERR SELECT is not allowed in cluster mode"));
    let info = support::info(&mut d0, Some("cluster"));
    assert_eq!(info["cluster_enabled"], "1");
    assert_eq!(info["cluster_current_epoch"], "1");
}

#[test]
fn pipelined_forwarding_keeps_reply_order() {
    let nodes = three();
    let mut p1 = nodes[1].plain();
    // 300 commands over the three owners, interleaved: every reply in place.
    let keys = ["b", "c", "foo"];
    let mut cmds: Vec<Vec<String>> = Vec::new();
    for i in 0..100 {
        for k in keys {
            cmds.push(vec!["RPUSH".into(), format!("{{{k}}}list"), format!("{k}-{i}")]);
        }
    }
    let refs: Vec<Vec<&str>> = cmds.iter().map(|c| c.iter().map(String::as_str).collect()).collect();
    let slices: Vec<&[&str]> = refs.iter().map(Vec::as_slice).collect();
    let replies = p1.pipeline(&slices);
    for (i, r) in replies.iter().enumerate() {
        assert_eq!(*r, Frame::int(i as i64 / 3 + 1), "reply {i}");
    }
    for (n, k) in keys.iter().enumerate() {
        let list = nodes[n].direct().cmd(&["LRANGE", &format!("{{{k}}}list"), "0", "-1"]);
        let want: Vec<String> = (0..100).map(|i| format!("{k}-{i}")).collect();
        assert_eq!(list, Frame::bulks(&want), "{k} on node {n}");
    }
}

#[test]
fn transactions_blocking_commands_and_resp3_forward() {
    let nodes = three();
    let mut p0 = nodes[0].plain();
    // A transaction on another node's slot runs there as a unit.
    p0.ok(&["MULTI"]);
    assert_eq!(p0.cmd(&["SET", "{foo}n", "1"]), Frame::simple("QUEUED"));
    assert_eq!(p0.cmd(&["INCRBY", "{foo}n", "41"]), Frame::simple("QUEUED"));
    assert_eq!(p0.cmd(&["EXEC"]), Frame::Array(vec![Frame::ok(), Frame::int(42)]));
    assert_eq!(nodes[2].direct().cmd(&["GET", "{foo}n"]), Frame::bulk("42"));
    // Across slots it is refused at EXEC, as Redis Cluster does.
    p0.ok(&["MULTI"]);
    p0.cmd(&["SET", "b", "1"]);
    p0.cmd(&["SET", "foo", "1"]);
    assert_eq!(p0.cmd(&["EXEC"]), Frame::error("CROSSSLOT Keys in request don't hash to the same slot"));
    assert_eq!(p0.cmd(&["EXEC"]), Frame::error("ERR EXEC without MULTI"));

    // A blocking command waits on the owner, on a link of its own: other
    // forwarded commands go on meanwhile.
    let mut blocked = nodes[0].plain();
    blocked.send(&["BLPOP", "{foo}queue", "10"]);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(p0.cmd(&["SET", "{foo}other", "v"]), Frame::ok());
    assert_eq!(nodes[1].plain().cmd(&["RPUSH", "{foo}queue", "job"]), Frame::int(1));
    assert_eq!(blocked.read_frame(), Frame::bulks(&["{foo}queue", "job"]));

    // RESP3 replies come back as RESP3.
    let mut r3 = nodes[1].plain();
    r3.cmd(&["HELLO", "3"]);
    assert_eq!(r3.cmd(&["HSET", "foo", "f", "v"]), Frame::int(1));
    let map = r3.cmd(&["HGETALL", "foo"]);
    assert_eq!(map.kind(), "map", "{map:?}");
}

#[test]
fn node_wide_commands_reach_every_node_from_the_plain_port() {
    let nodes = three();
    let mut p0 = nodes[0].plain();
    for k in ["b", "c", "foo", "{foo}2"] {
        p0.ok(&["SET", k, "1"]);
    }
    // One cache, as far as a plain client can tell; per node on the direct port.
    assert_eq!(p0.cmd(&["DBSIZE"]), Frame::int(4));
    assert_eq!(nodes[2].direct().cmd(&["DBSIZE"]), Frame::int(2));
    // A script loaded through one node runs wherever its keys are.
    let sha = p0.cmd(&["SCRIPT", "LOAD", "return redis.call('get', KEYS[1])"]);
    let sha = sha.as_str().unwrap().to_string();
    assert_eq!(p0.cmd(&["EVALSHA", &sha, "1", "foo"]), Frame::bulk("1"));
    assert_eq!(nodes[1].plain().cmd(&["EVALSHA", &sha, "1", "c"]), Frame::bulk("1"));
    p0.ok(&["FLUSHALL"]);
    assert_eq!(p0.cmd(&["DBSIZE"]), Frame::int(0));
    for n in &nodes {
        assert_eq!(n.direct().cmd(&["DBSIZE"]), Frame::int(0));
    }
}

#[test]
fn a_blocked_client_follows_its_slot() {
    let nodes = three();
    // Slot 3300 ("b") on node 0: a cluster client and a plain client wait there.
    let mut direct = nodes[0].direct();
    direct.send(&["BLPOP", "{b}q", "0"]);
    let mut plain = nodes[0].plain();
    plain.send(&["BLPOP", "{b}q", "0"]);
    std::thread::sleep(Duration::from_millis(200));
    // Epoch 2 gives slot 3300 to node 1.
    let members =
        [nodes[0].member("0-3299,3301-5460"), nodes[1].member("3300,5461-10922"), nodes[2].member("10923-16383")];
    for n in &nodes {
        let mut args = vec!["STRATA.TOPOLOGY".to_string(), "SET".into(), "2".into(), n.id.clone()];
        args.extend(members.iter().cloned());
        assert_eq!(n.admin().cmd(&args), Frame::ok());
    }
    // As Redis: the cluster client is told where the slot went...
    assert_eq!(direct.read_frame(), Frame::error(&format!("MOVED 3300 127.0.0.1:{}", nodes[1].direct)));
    // ... and the plain client now waits on the new owner, which serves it.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(nodes[1].direct().cmd(&["RPUSH", "{b}q", "moved"]), Frame::int(1));
    assert_eq!(plain.read_frame(), Frame::bulks(&["{b}q", "moved"]));
}

/// Pushes `ranges` (one per node) at `epoch` to every node.
fn push_ranges(nodes: &[Node], epoch: u64, ranges: [&str; 3]) {
    let members: Vec<String> = nodes.iter().zip(ranges).map(|(n, r)| n.member(r)).collect();
    for n in nodes {
        let mut args = vec!["STRATA.TOPOLOGY".to_string(), "SET".into(), epoch.to_string(), n.id.clone()];
        args.extend(members.iter().cloned());
        assert_eq!(n.admin().cmd(&args), Frame::ok());
    }
}

#[test]
fn a_slot_given_away_and_back_never_serves_a_stale_value() {
    let dir = support::DataDir::new("cluster-stale");
    let data = format!("{}/node0", dir.path());
    let durable = ["--durability", "sync", "--dir", data.as_str()];
    let mut nodes: Vec<Node> =
        (0..3).map(|i| if i == 0 { Node::start(i, &durable) } else { Node::start(i, &[]) }).collect();
    push(&nodes, 1);
    let mut p = nodes[1].plain();
    p.ok(&["SET", "b", "old"]);
    assert_eq!(nodes[0].direct().cmd(&["GET", "b"]), Frame::bulk("old"));
    // Slot 3300 moves to node 1 (a scale-out would do that), is written
    // there, then comes back: node 0 must not answer with what it had.
    push_ranges(&nodes, 2, ["0-3299,3301-5460", "3300,5461-10922", "10923-16383"]);
    // Released in the background.
    assert!(
        wait_for(Duration::from_secs(10), || nodes[0].server.conn().cmd(&["DBSIZE"]) == Frame::int(0)),
        "node 0 dropped the slot's keys"
    );
    p.ok(&["SET", "b", "new-on-node-1"]);
    push_ranges(&nodes, 3, RANGES);
    assert_eq!(p.cmd(&["GET", "b"]), Frame::Nil, "a miss, never the stale value");
    // Nor after a restart: the deletes are in node 0's durability log.
    nodes[0].restart(&durable);
    assert!(wait_for(Duration::from_secs(10), || nodes[0].direct().cmd(&["GET", "b"]) == Frame::Nil));
}

#[test]
fn publish_reaches_every_node() {
    let nodes = three();
    let mut sub = nodes[2].plain();
    sub.cmd(&["SUBSCRIBE", "news"]);
    // Counted locally only (as Redis Cluster), delivered everywhere.
    assert_eq!(nodes[0].plain().cmd(&["PUBLISH", "news", "hello"]), Frame::int(0));
    assert_eq!(sub.read_frame(), Frame::bulks(&["message", "news", "hello"]));
}

#[test]
fn topology_epochs_admin_password_and_restart() {
    let dir = support::DataDir::new("cluster-restart");
    let pass = format!("{}/admin-pass", dir.path());
    std::fs::create_dir_all(dir.path()).unwrap();
    std::fs::write(&pass, "s3cret\n").unwrap();
    let data = format!("{}/data", dir.path());
    let mut node = Node::start(0, &["--cluster-admin-password-file", &pass, "--dir", &data]);
    let me = node.member("0-16383");
    let set = |epoch: &str, member: &str| {
        vec!["STRATA.TOPOLOGY".to_string(), "SET".into(), epoch.into(), node_id(0), member.to_string()]
    };
    // Before a topology: CLUSTERDOWN for data, keyless commands work.
    let mut plain = node.plain();
    assert_eq!(plain.cmd(&["GET", "k"]), Frame::error("CLUSTERDOWN Hash slot not served"));
    assert_eq!(plain.cmd(&["PING"]), Frame::simple("PONG"));
    // Ordinary clients cannot push, not even on the plain port with the command.
    assert!(plain.cmd(&set("1", &me)).error_message().unwrap().starts_with("ERR unknown command"));
    // The admin port wants its password.
    let mut admin = node.admin();
    assert_eq!(admin.cmd(&set("1", &me)), Frame::error("NOAUTH Authentication required."));
    assert!(admin.cmd(&["AUTH", "wrong"]).error_message().unwrap().starts_with("WRONGPASS"));
    admin.ok(&["AUTH", "s3cret"]);
    admin.ok(&set("3", &me));
    // Older epochs are refused, the same one again is fine, a different one at the same epoch is not.
    assert_eq!(admin.cmd(&set("2", &me)), Frame::error("ERR stale epoch 2: this node has applied epoch 3"));
    admin.ok(&set("3", &me));
    let other = me.replace("0-16383", "0-100");
    assert_eq!(admin.cmd(&set("3", &other)), Frame::error("ERR epoch 3 is already applied with a different topology"));
    assert!(admin.cmd(&set("4", "garbage")).error_message().unwrap().starts_with("ERR invalid topology"));
    plain.ok(&["SET", "k", "v"]);
    // Uncovered slots: the cluster is down, as Redis's full-coverage default.
    admin.ok(&set("4", &other));
    assert_eq!(plain.cmd(&["GET", "k"]), Frame::error("CLUSTERDOWN Hash slot not served"));
    assert_eq!(plain.cmd(&["GET", "k126"]), Frame::error("CLUSTERDOWN The cluster is down"));
    admin.ok(&set("5", &me));

    // A restart keeps the topology: it serves at once, before any push.
    node.restart(&["--dir", &data, "--cluster-admin-password-file", &pass]);
    let mut plain = node.plain();
    assert_eq!(plain.cmd(&["SET", "k", "again"]), Frame::ok());
    assert_eq!(support::info(&mut plain, Some("cluster"))["cluster_current_epoch"], "5");
    let mut admin = node.admin();
    admin.ok(&["AUTH", "s3cret"]);
    assert_eq!(admin.cmd(&set("4", &me)), Frame::error("ERR stale epoch 4: this node has applied epoch 5"));
}

fn node_id(n: usize) -> String {
    format!("{:040x}", n + 1)
}

#[test]
fn an_owner_that_is_down_fails_its_commands_only() {
    let mut nodes = three();
    nodes[2].server.kill();
    let mut p0 = nodes[0].plain();
    p0.set_timeout(Some(Duration::from_secs(30)));
    let started = std::time::Instant::now();
    let e = p0.cmd(&["GET", "foo"]);
    assert!(e.error_message().unwrap().starts_with("ERR cannot reach the node serving this hash slot"), "{e:?}");
    // Sent again for 10 s (an owner restarting in a rolling update comes
    // back within that), then the error.
    let waited = started.elapsed();
    assert!(waited >= Duration::from_secs(10) && waited < Duration::from_secs(15), "{waited:?}");
    // Everything else keeps working, local and forwarded.
    assert_eq!(p0.cmd(&["SET", "b", "1"]), Frame::ok());
    assert_eq!(p0.cmd(&["SET", "c", "1"]), Frame::ok());
    assert!(wait_for(Duration::from_secs(5), || nodes[1].direct().cmd(&["GET", "c"]) == Frame::bulk("1")));
}

/// A plain client's command for a slot whose owner is replaying its log
/// after a restart (-LOADING meanwhile) waits for the replay instead of
/// getting the error: a pod restart is latency through the plain port.
#[test]
fn a_forwarded_command_waits_for_its_owner_to_load() {
    let dir = support::DataDir::new("cluster-loading");
    let data = format!("{}/node2", dir.path());
    let durable = ["--durability", "sync", "--dir", data.as_str()];
    let mut nodes: Vec<Node> = (0..3).map(|i| Node::start(i, if i == 2 { &durable } else { &[] })).collect();
    push(&nodes, 1);
    let mut p0 = nodes[0].plain();
    p0.set_timeout(Some(Duration::from_secs(30)));
    p0.ok(&["SET", "foo", "before"]);
    nodes[2].restart_loading(&durable, &[("STRATA_TEST_REPLAY_DELAY_MS", "1500")]);
    assert_eq!(
        nodes[2].direct().cmd(&["GET", "foo"]),
        Frame::error("LOADING Redis is loading the dataset in memory"),
        "the owner replays its log"
    );
    let started = std::time::Instant::now();
    assert_eq!(p0.cmd(&["GET", "foo"]), Frame::bulk("before"));
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(300), "answered by the loaded owner only: {waited:?}");
    // Writes too, and the other slots never waited.
    p0.ok(&["SET", "foo", "after"]);
    assert_eq!(nodes[2].direct().cmd(&["GET", "foo"]), Frame::bulk("after"));
}

/// STATUS's value for `field`.
fn status_field(n: &Node, mid: &str, field: &str) -> String {
    match n.admin().cmd(&["STRATA.MIGRATE", "STATUS", mid]) {
        Frame::Array(items) => items
            .chunks(2)
            .find(|kv| kv[0] == Frame::bulk(field))
            .map(|kv| match &kv[1] {
                Frame::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                other => format!("{other:?}"),
            })
            .unwrap_or_default(),
        other => panic!("STATUS: {other:?}"),
    }
}

#[test]
fn a_migration_moves_a_slot_with_its_keys_and_a_push_confirms_it() {
    let nodes = three();
    let mut p = nodes[1].plain();
    // Slot 3300 ("b" and "{b}..." keys) is node 0's.
    for i in 0..200 {
        p.ok(&["SET", &format!("{{b}}:{i}"), &format!("v{i}")]);
    }
    p.ok(&["SET", "b", "moved-with-its-slot"]);
    p.ok(&["SET", "c", "stays"]);
    let stats = nodes[0].direct().cmd(&["CLUSTER", "SLOT-STATS", "ORDERBY", "key-count", "LIMIT", "1"]);
    let expected = Frame::Array(vec![Frame::Array(vec![
        Frame::int(3300),
        Frame::Array(vec![Frame::bulk("key-count"), Frame::int(201)]),
    ])]);
    assert_eq!(stats, expected);
    let range = nodes[0].direct().cmd(&["CLUSTER", "SLOT-STATS", "SLOTSRANGE", "3299", "3300"]);
    assert!(matches!(&range, Frame::Array(a) if a.len() == 2), "{range:?}");
    // Not this node's slots: refused; then the real one.
    let refused = nodes[0].admin().cmd(&["STRATA.MIGRATE", "START", "m0", &nodes[1].id, "", "7365"]);
    assert!(refused.error_message().unwrap().contains("not served by this node"), "{refused:?}");
    assert_eq!(nodes[0].admin().cmd(&["STRATA.MIGRATE", "START", "m1", &nodes[1].id, "", "3300"]), Frame::ok());
    assert!(wait_for(Duration::from_secs(20), || status_field(&nodes[0], "m1", "state") == "committed"));
    assert_eq!(status_field(&nodes[1], "m1", "state"), "committed");
    assert_eq!(status_field(&nodes[0], "m1", "keys"), "201");
    // Served by node 1 now, before any push: MOVED there, forwarding from anywhere.
    let moved = nodes[0].direct().cmd(&["GET", "b"]);
    assert_eq!(moved.error_message().unwrap(), format!("MOVED 3300 127.0.0.1:{}", nodes[1].direct));
    assert_eq!(nodes[1].direct().cmd(&["GET", "b"]), Frame::bulk("moved-with-its-slot"));
    assert_eq!(nodes[2].plain().cmd(&["GET", "{b}:7"]), Frame::bulk("v7"));
    // A push that ignores the migration is refused by both; the agreeing one confirms it, and
    // node 0 then deletes its copy.
    let stale: Vec<String> = nodes.iter().zip(RANGES).map(|(n, r)| n.member(r)).collect();
    let mut args = vec!["STRATA.TOPOLOGY".to_string(), "SET".into(), "2".into(), nodes[0].id.clone()];
    args.extend(stale);
    let e = nodes[0].admin().cmd(&args);
    assert!(e.error_message().unwrap().contains("moved to"), "{e:?}");
    push_ranges(&nodes, 2, ["0-3299,3301-5460", "3300,5461-10922", "10923-16383"]);
    let released = || nodes[0].direct().cmd(&["CLUSTER", "COUNTKEYSINSLOT", "3300"]) == Frame::int(0);
    assert!(wait_for(Duration::from_secs(10), released), "node 0 released its copy");
    assert_eq!(nodes[1].direct().cmd(&["CLUSTER", "COUNTKEYSINSLOT", "3300"]), Frame::int(201));
    assert_eq!(p.cmd(&["GET", "c"]), Frame::bulk("stays"));
    let info = nodes[0].direct().cmd(&["INFO", "clusterstats"]);
    let Frame::Bulk(text) = info else { panic!("{info:?}") };
    assert!(String::from_utf8_lossy(&text).contains("cluster_migrations_committed:source=1,target=0"));
}
