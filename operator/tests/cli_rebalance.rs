//! `strata-cluster rebalance` against fake nodes that speak the migration protocol
//! (`support::fake_node`): the same planner as the operator, migrations one at a time, the
//! confirming epochs target first and source last, and drained nodes leaving the topology.

mod support;

use std::process::Command;

use support::fake_node::FakeNode;
use support::run;

const PASSWORD: &str = "cli-secret";

fn cli(args: &[String], password_file: &std::path::Path) -> support::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata-cluster"));
    cmd.args(args).arg("--password-file").arg(password_file).args(["--id-prefix", "local/test"]);
    run(&mut cmd, None)
}

fn node_arg(ip: &str, i: u16) -> String {
    format!("{ip}:{}:{}:{}", 7100 + i, 7000 + i, strata_operator::resources::ADMIN_PORT)
}

#[tokio::test(flavor = "multi_thread")]
async fn rebalance_moves_slots_live_and_drains_before_leaving_the_topology() {
    let dir = std::env::temp_dir().join(format!("strata-cli-rebalance-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let password_file = dir.join("password");
    std::fs::write(&password_file, format!("{PASSWORD}\n")).unwrap();
    let ips: Vec<String> = (1..=4).map(|i| format!("127.0.79.{i}")).collect();
    let mut nodes = Vec::new();
    for ip in &ips {
        nodes.push(FakeNode::start(ip, PASSWORD).await);
    }
    let args =
        |n: usize| -> Vec<String> { ips[..n].iter().enumerate().map(|(i, ip)| node_arg(ip, i as u16)).collect() };
    let pf = password_file.clone();
    let three = args(3);
    let out =
        tokio::task::spawn_blocking(move || cli(&[&["push".to_owned()][..], &three].concat(), &pf)).await.unwrap();
    assert!(out.success, "{}{}", out.stdout, out.stderr);

    // 3 -> 4: node 3 joins without slots, then gets its share from the others.
    let pf = password_file.clone();
    let four = args(4);
    let out =
        tokio::task::spawn_blocking(move || cli(&[&["rebalance".to_owned()][..], &four].concat(), &pf)).await.unwrap();
    assert!(out.success, "{}{}", out.stdout, out.stderr);
    eprintln!("{}", out.stdout);
    assert!(out.stdout.contains("plan: 4096 slots in"), "{}", out.stdout);
    assert!(out.stdout.contains("to node 3 ... 7 keys in 0.0 s"), "{}", out.stdout);
    assert!(out.stdout.contains("applied on all 4 nodes"), "{}", out.stdout);
    let counts: Vec<u32> = nodes.iter().map(FakeNode::slots).collect();
    assert_eq!(counts.iter().sum::<u32>(), 16384, "{counts:?}");
    assert_eq!(counts[3], 4096, "{counts:?}");
    let epoch = nodes[0].epoch();
    assert!(nodes.iter().all(|n| n.epoch() == epoch));

    // 4 -> 2: nodes 3 then 2 drained, then the topology without them.
    let pf = password_file.clone();
    let all = args(4);
    let out = tokio::task::spawn_blocking(move || {
        cli(&[&["scale".to_owned(), "--shards".to_owned(), "2".to_owned()][..], &all].concat(), &pf)
    })
    .await
    .unwrap();
    assert!(out.success, "{}{}", out.stdout, out.stderr);
    eprintln!("{}", out.stdout);
    let first_from_2 = out.stdout.find("from node 2 ").unwrap();
    let last_from_3 = out.stdout.rfind("from node 3 ").unwrap();
    assert!(last_from_3 < first_from_2, "the highest drained first: {}", out.stdout);
    assert!(out.stdout.contains("nodes 2..3 drained and out of the topology"), "{}", out.stdout);
    assert_eq!(nodes[0].slots() + nodes[1].slots(), 16384);
    assert_eq!(nodes[0].slots().abs_diff(nodes[1].slots()), 0);
    let (epoch, _, topology) = nodes[0].state.lock().unwrap().topology.clone().unwrap();
    assert_eq!(topology.len(), 2);
    assert_eq!(nodes[1].epoch(), epoch);
    // Every migration's confirming epoch reached its source after its target.
    for n in &nodes {
        let state = n.state.lock().unwrap().clone();
        for m in state.migrations.iter().filter(|m| m.source) {
            let committed = m.committed.expect("committed");
            let target = nodes
                .iter()
                .find(|t| t.state.lock().unwrap().topology.as_ref().is_some_and(|x| x.1 == m.target_id))
                .unwrap();
            let (t_at, e) = *target.state.lock().unwrap().applied.iter().find(|(t, _)| *t > committed).unwrap();
            let s_at = state.applied.iter().find(|(_, x)| *x == e).map(|(t, _)| *t).unwrap();
            assert!(t_at < s_at, "{}: epoch {e} reached the source first", m.id);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn rebalance_can_even_out_keys_instead_of_slots() {
    let dir = std::env::temp_dir().join(format!("strata-cli-weights-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let password_file = dir.join("password");
    std::fs::write(&password_file, PASSWORD).unwrap();
    let ips = ["127.0.79.11", "127.0.79.12"];
    let nodes = [FakeNode::start(ips[0], PASSWORD).await, FakeNode::start(ips[1], PASSWORD).await];
    let args: Vec<String> = ips.iter().enumerate().map(|(i, ip)| node_arg(ip, i as u16)).collect();
    let (pf, a) = (password_file.clone(), args.clone());
    let out = tokio::task::spawn_blocking(move || cli(&[&["push".to_owned()][..], &a].concat(), &pf)).await.unwrap();
    assert!(out.success, "{}{}", out.stdout, out.stderr);
    // Even slots (8192 each), but node 0 holds the 100 slots of 1000 keys each.
    let (pf, a) = (password_file.clone(), args.clone());
    let out = tokio::task::spawn_blocking(move || {
        cli(
            &[&["rebalance".to_owned(), "--weigh-keys".to_owned(), "--batch".to_owned(), "16384".to_owned()][..], &a]
                .concat(),
            &pf,
        )
    })
    .await
    .unwrap();
    assert!(out.success, "{}{}", out.stdout, out.stderr);
    eprintln!("{}", out.stdout);
    assert!(out.stdout.contains("weights: 116,284 keys"), "{}", out.stdout);
    let keys = |n: &FakeNode| {
        let state = n.state.lock().unwrap();
        let (_, myid, topology) = state.topology.clone().unwrap();
        let me = topology
            .iter()
            .map(|t| strata_operator::topology::TopologyNode::parse(t).unwrap())
            .find(|t| t.id.as_str() == myid)
            .unwrap();
        me.slots.iter().flat_map(|r| r.first..=r.last).map(|s| if s < 100 { 1000u64 } else { 1 }).sum::<u64>()
    };
    let (a, b) = (keys(&nodes[0]), keys(&nodes[1]));
    assert!(a.abs_diff(b) <= 1000, "keys {a} vs {b}");
    assert!(nodes[1].slots() > 16000, "the cold slots moved: {}", nodes[1].slots());
    let _ = std::fs::remove_dir_all(&dir);
}
