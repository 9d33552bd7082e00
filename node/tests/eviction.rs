//! Memory budget under write pressure, for every eviction policy: memory
//! stays within `maxmemory`, the policy's pool is respected, and with
//! `noeviction` writes get Redis's OOM error while reads keep working.

mod support;

use support::*;

/// Room for data above what an empty node holds.
/// Room for data above the empty node. The allocator's own metadata grows
/// by up to about 2.3 MB while a node fills and evicts (per-thread arenas,
/// extents) and is counted in `used_memory`, as it is real memory: a room
/// of 2 MiB left some runs no room for keys at all (on this project's CI
/// machine, 4 runs in 10 failed with the code of before issue 20 too).
const ROOM: u64 = 8 << 20;
/// 1 KiB values (`fill`) that take `n` times the room.
const fn values_for(times: u64) -> usize {
    (times * ROOM / 1024) as usize
}

/// A node with `policy` whose `maxmemory` leaves `room` bytes above what it
/// holds empty: `used_memory` counts the process itself (code, stacks,
/// tables), measured once the node has read its allocator's figures.
fn node_with_room(policy: &str, room: u64) -> (Server, RawConn, u64) {
    let server = Server::strata_with(&["--maxmemory-policy", policy]);
    let mut c = server.conn();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let empty: u64 = info(&mut c, Some("memory"))["used_memory"].parse().unwrap();
    let budget = empty + room;
    c.ok(&["CONFIG", "SET", "maxmemory", &budget.to_string()]);
    (server, c, budget)
}

fn used_and_evicted(c: &mut RawConn) -> (u64, u64) {
    let i = info(c, Some("all"));
    (i["used_memory"].parse().unwrap(), i["evicted_keys"].parse().unwrap())
}

/// Writes `n` 1 KiB values; keys "vol:*" get a TTL, "per:*" do not.
fn fill(c: &mut RawConn, n: usize) -> usize {
    let value = "x".repeat(1024);
    let mut oom = 0;
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let cmds: Vec<Vec<String>> = chunk
            .iter()
            .map(|i| {
                if i % 2 == 0 {
                    vec!["SET".into(), format!("vol:{i}"), value.clone(), "EX".into(), "3600".into()]
                } else {
                    vec!["SET".into(), format!("per:{i}"), value.clone()]
                }
            })
            .collect();
        for cmd in &cmds {
            c.send(cmd);
        }
        for _ in &cmds {
            if c.read_frame().error_code() == Some("OOM") {
                oom += 1;
            }
        }
    }
    oom
}

#[test]
fn every_policy_keeps_memory_within_maxmemory() {
    for policy in
        ["allkeys-lru", "allkeys-lfu", "allkeys-random", "sieve", "volatile-lru", "volatile-ttl", "volatile-random"]
    {
        let (_server, mut c, budget) = node_with_room(policy, ROOM);
        // Four times the room.
        let oom = fill(&mut c, values_for(4));
        let (used, evicted) = used_and_evicted(&mut c);
        assert!(used <= budget + ROOM / 20, "{policy}: used_memory {used} over budget {budget}");
        assert!(evicted > 0, "{policy}: nothing evicted");
        let Frame::Integer(keys) = c.cmd(&["DBSIZE"]) else { panic!() };
        assert!(keys > 250, "{policy}: only {keys} keys left");
        if policy.starts_with("volatile") {
            // Only keys with a TTL may go: every persistent key written before
            // memory ran out is still there, and later persistent writes failed.
            assert!(oom > 0, "{policy}: persistent writes past the budget should get OOM");
            assert_eq!(c.cmd(&["EXISTS", "per:1"]), Frame::int(1), "{policy} evicted a key without TTL");
        } else {
            assert_eq!(oom, 0, "{policy}: writes were refused although keys could be evicted");
        }
    }
}

#[test]
fn noeviction_refuses_writes_but_serves_reads() {
    let (_server, mut c, budget) = node_with_room("noeviction", ROOM);
    let oom = fill(&mut c, values_for(2));
    assert!(oom > 0, "writes past the budget must fail");
    let i = info(&mut c, Some("all"));
    let field = |name: &str| -> u64 { i[name].parse().unwrap() };
    assert_eq!(field("evicted_keys"), 0);
    // The last pipelined batch was read whole (a query buffer counted in
    // used_memory) before its first write was refused: the data stays
    // within the budget, the client's buffers come on top, as in Redis.
    // Slack: the allocator's figures are read at most every 2 ms near the
    // limit, and a pipelined burst of 4 KiB writes can land in between (it
    // overshot by 127 KB once, in a CI run beside other test runs).
    let (used, clients) = (field("used_memory"), field("mem_clients_normal"));
    assert!(used - clients <= budget + ROOM / 8, "used_memory {used} ({clients} in clients) over budget {budget}");
    // At the limit, writes keep failing: the allocator's figures, read
    // again, may leave a few bytes of room, but never the room for 64 KiB.
    let value = "z".repeat(1024);
    let refused =
        (0..64).find_map(|i| c.cmd(&["SET", &format!("another:{i}"), &value]).error_message().map(str::to_owned));
    assert_eq!(refused.as_deref(), Some("OOM command not allowed when used memory > 'maxmemory'."));
    assert!(matches!(c.cmd(&["GET", "per:1"]), Frame::Bulk(_)), "reads must keep working");
    assert_eq!(c.cmd(&["DEL", "per:1", "per:3", "per:5"]), Frame::int(3), "deletes must keep working");
}

#[test]
fn lru_keeps_the_hot_set() {
    // A small hot set read constantly while a stream of cold keys flows
    // through a budget that holds a fraction of them: the hot keys survive.
    let (_server, mut c, _) = node_with_room("allkeys-lru", ROOM);
    let value = "y".repeat(512);
    for i in 0..100 {
        c.ok(&["SET", &format!("hot:{i}"), &value]);
    }
    // Cold values of twice the room.
    let rounds = values_for(2) * 1024 / (200 * 512);
    for round in 0..rounds {
        for i in 0..200 {
            c.send(&["SET", &format!("cold:{round}:{i}"), &value]);
        }
        for _ in 0..200 {
            c.read_frame();
        }
        // The LRU clock has a one-second resolution, as in Redis: reads in a
        // new second make the hot keys younger than the cold stream.
        if round % 10 == 9 {
            std::thread::sleep(std::time::Duration::from_millis(1100));
        }
        for i in 0..100 {
            c.cmd(&["GET", &format!("hot:{i}")]);
        }
    }
    let hot_alive = (0..100).filter(|i| c.cmd(&["EXISTS", &format!("hot:{i}")]) == Frame::int(1)).count();
    assert!(hot_alive >= 80, "only {hot_alive} of 100 hot keys survived LRU eviction");
}

#[test]
fn memory_held_by_a_client_is_evicted_without_a_write() {
    // At the limit, a client's query buffer grows by 256 KiB (a 384 KiB SET
    // still arriving). No write runs, yet the node brings used_memory back
    // within the budget by evicting keys, as the limit must hold between
    // writes too.
    let (server, mut c, budget) = node_with_room("allkeys-lru", ROOM);
    fill(&mut c, values_for(2));
    let (_, evicted_before) = used_and_evicted(&mut c);
    let mut slow = server.conn();
    let mut partial = b"*3\r\n$3\r\nSET\r\n$4\r\nbulk\r\n$393216\r\n".to_vec();
    partial.extend(std::iter::repeat_n(b'v', 256 << 10));
    slow.send_raw(&partial);
    let mut last = (0, 0);
    let settled = wait_for(std::time::Duration::from_secs(3), || {
        last = used_and_evicted(&mut c);
        last.1 > evicted_before && last.0 <= budget
    });
    assert!(
        settled,
        "used_memory {} (budget {budget}), evicted {} (before: {evicted_before}) 3 s after a client's buffer grew",
        last.0, last.1
    );
}
