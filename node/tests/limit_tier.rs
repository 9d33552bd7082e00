//! The memory limit with and without a disk tier, against the real binary:
//! the tier extends RAM under every policy (`noeviction` and `volatile-*`
//! demote any key; the policy decides only what may be discarded), and at
//! the limit a refused write or a read costs one check, not a search for a
//! victim per command (counted: INFO `strata_eviction_searches`; nothing
//! here is timed).

mod support;

use support::*;

/// Room for data above what an empty node holds (see `eviction.rs` for why
/// not less: the allocator's metadata grows while a node fills).
const ROOM: u64 = 8 << 20;

fn value_of(i: usize) -> String {
    let seed = format!("v{i}:");
    seed.repeat(1024 / seed.len() + 1)[..1024].to_string()
}

fn field(c: &mut RawConn, name: &str) -> u64 {
    info_field(c, name).unwrap_or_else(|| panic!("INFO has no {name}")).parse().expect("a number")
}

/// A node with `policy` (and a tier of `max_disk`, if any) whose
/// `maxmemory` leaves `ROOM` above what it holds empty.
fn node(policy: &str, max_disk: Option<&str>) -> (Server, RawConn) {
    let mut args = vec!["--maxmemory-policy", policy, "--threads", "2"];
    if let Some(d) = max_disk {
        args.extend(["--max-disk", d, "--dir", "{dir}"]);
    }
    let server = Server::strata_with(&args);
    let mut c = server.conn();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let budget = field(&mut c, "used_memory") + ROOM;
    c.ok(&["CONFIG", "SET", "maxmemory", &budget.to_string()]);
    (server, c)
}

/// Pipelined SETs of keys `from..to` ("k<i>", 1 KiB each; every other one
/// with a TTL of an hour when `ttl_every_other`). Returns the indexes
/// refused with OOM; any other reply fails the test.
fn fill(c: &mut RawConn, from: usize, to: usize, ttl_every_other: bool) -> Vec<usize> {
    let mut refused = Vec::new();
    for chunk in (from..to).collect::<Vec<_>>().chunks(100) {
        for &i in chunk {
            let (key, value) = (format!("k{i}"), value_of(i));
            if ttl_every_other && i % 2 == 0 {
                c.send(&["SET", &key, &value, "EX", "3600"]);
            } else {
                c.send(&["SET", &key, &value]);
            }
        }
        for &i in chunk {
            let got = c.read_frame();
            match got.error_code() {
                Some("OOM") => refused.push(i),
                _ => assert_eq!(got, Frame::ok(), "SET k{i}"),
            }
        }
    }
    refused
}

/// Keys of `keys` whose GET does not return their value (pipelined).
fn unreadable(c: &mut RawConn, keys: &[usize]) -> Vec<usize> {
    let mut bad = Vec::new();
    for chunk in keys.chunks(100) {
        for &i in chunk {
            c.send(&["GET", &format!("k{i}")]);
        }
        for &i in chunk {
            if c.read_frame() != Frame::bulk(value_of(i)) {
                bad.push(i);
            }
        }
    }
    bad
}

/// Eight times RAM of 1 KiB values under noeviction and volatile-lru (no
/// TTLs) with a tier: every write acknowledged, every key read back, none
/// evicted, most of them on disk.
#[test]
fn the_tier_holds_eight_times_ram_under_noeviction_and_volatile_lru() {
    for policy in ["noeviction", "volatile-lru"] {
        let (_server, mut c) = node(policy, Some("512mb"));
        let n = (8 * ROOM / 1024) as usize;
        let refused = fill(&mut c, 0, n, false);
        assert!(refused.is_empty(), "{policy}: {} writes refused, first k{}", refused.len(), refused[0]);
        assert_eq!(c.cmd(&["DBSIZE"]), Frame::int(n as i64), "{policy}");
        assert!(field(&mut c, "tier_disk_keys") > (n / 2) as u64, "{policy}: most values went to disk");
        assert_eq!(field(&mut c, "evicted_keys"), 0, "{policy}");
        assert_eq!(field(&mut c, "tier_evicted_disk_keys"), 0, "{policy}");
        let all: Vec<usize> = (0..n).collect();
        let bad = unreadable(&mut c, &all);
        assert!(bad.is_empty(), "{policy}: {} keys unreadable, first k{}", bad.len(), bad[0]);
        assert_eq!(field(&mut c, "tier_read_errors"), 0, "{policy}");
    }
}

/// noeviction with a disk budget of a few segments: writes are refused
/// only once RAM and the disk are both full; nothing acknowledged is lost;
/// refused writes and reads at the limit do not each search for a victim.
#[test]
fn noeviction_answers_oom_only_when_ram_and_disk_are_both_full() {
    let (_server, mut c) = node("noeviction", Some("16mb"));
    let max_disk = field(&mut c, "tier_max_disk_bytes");
    // RAM and disk hold at most 24 MiB of values: 40 MiB is past both.
    let n = 40 << 10;
    let refused = fill(&mut c, 0, n, false);
    assert!(!refused.is_empty(), "RAM + 16 MiB cannot hold 40 MiB");
    let first = refused[0];
    // RAM alone holds fewer than ROOM / 1 KiB keys.
    assert!(first > (ROOM / 1024) as usize, "refused at k{first}: the tier took little");
    let disk = field(&mut c, "tier_disk_bytes");
    assert!(disk * 2 >= max_disk, "refused with the disk {disk} of {max_disk} bytes");
    assert_eq!(field(&mut c, "evicted_keys"), 0);
    assert_eq!(field(&mut c, "tier_evicted_disk_keys"), 0);
    // Every acknowledged key reads back.
    let acked: Vec<usize> = (0..n).filter(|i| refused.binary_search(i).is_err()).collect();
    let bad = unreadable(&mut c, &acked);
    assert!(bad.is_empty(), "{} acknowledged keys unreadable, first k{}", bad.len(), bad[0]);

    // Full again (the reads brought values back to RAM): refused writes and
    // reads of missing keys make few searches.
    let more = fill(&mut c, n, n + 20_000, false);
    assert!(!more.is_empty(), "still full");
    let before = field(&mut c, "strata_eviction_searches");
    let refused = fill(&mut c, n + 20_000, n + 40_000, false).len();
    for chunk in (0..5_000).collect::<Vec<_>>().chunks(100) {
        for i in chunk {
            c.send(&["GET", &format!("missing{i}")]);
        }
        for _ in chunk {
            assert!(c.read_frame().is_null());
        }
    }
    let searches = field(&mut c, "strata_eviction_searches") - before;
    assert!(refused > 10_000, "{refused} of 20,000 refused");
    // A search is made again only after a change or 20 ms: 25,000
    // commands would have to take 20 s for this many.
    assert!(searches < 1_000, "{searches} searches for 25,000 commands at the limit");
}

/// volatile-lru with a small tier: keys without a TTL are never lost (they
/// are demoted, or the write that needs room is refused); only keys with a
/// TTL are discarded.
#[test]
fn volatile_lru_with_a_tier_discards_only_keys_with_a_ttl() {
    let (_server, mut c) = node("volatile-lru", Some("16mb"));
    let n = 48 << 10;
    let refused = fill(&mut c, 0, n, true);
    assert!(field(&mut c, "evicted_keys") + field(&mut c, "tier_evicted_disk_keys") > 0, "TTL keys were discarded");
    assert!(field(&mut c, "tier_disk_keys") > 0);
    // Every acknowledged key without a TTL reads back.
    let kept: Vec<usize> = (1..n).step_by(2).filter(|i| refused.binary_search(i).is_err()).collect();
    assert!(kept.len() > (ROOM / 1024) as usize, "only {} persistent keys acknowledged", kept.len());
    let bad = unreadable(&mut c, &kept);
    assert!(bad.is_empty(), "{} keys without a TTL lost, first k{}", bad.len(), bad[0]);
}

/// Without a tier, at the limit with nothing the policy may evict (no key
/// has a TTL under volatile-*; a limit below the node's own overhead under
/// allkeys-*): refused writes and reads do not each search for a victim.
#[test]
fn a_search_that_found_nothing_is_not_repeated_per_command() {
    for (policy, below_overhead) in
        [("volatile-lru", false), ("volatile-ttl", false), ("volatile-lfu", false), ("allkeys-lru", true)]
    {
        let (_server, mut c) = node(policy, None);
        if below_overhead {
            c.ok(&["CONFIG", "SET", "maxmemory", "1mb"]);
        } else {
            let refused = fill(&mut c, 0, (2 * ROOM / 1024) as usize, false);
            assert!(!refused.is_empty(), "{policy}: nothing to evict, writes refused");
        }
        let before = field(&mut c, "strata_eviction_searches");
        // (The allocator's figures, read again, may leave room for a few.)
        let refused = fill(&mut c, 1 << 20, (1 << 20) + 20_000, false).len();
        assert!(refused > 19_000, "{policy}: {refused} of 20,000 refused");
        for chunk in (0..5_000).collect::<Vec<_>>().chunks(100) {
            for i in chunk {
                c.send(&["GET", &format!("k{i}")]);
            }
            for _ in chunk {
                c.read_frame();
            }
        }
        let searches = field(&mut c, "strata_eviction_searches") - before;
        assert!(searches < 1_000, "{policy}: {searches} searches for 25,000 commands at the limit");
        // Keys that gain a TTL are victims at once: the commands that follow
        // (each makes room when over the limit, as in Redis) evict them.
        if !below_overhead {
            for i in 0..400 {
                c.send(&["EXPIRE", &format!("k{i}"), "3600"]);
            }
            for _ in 0..400 {
                assert_eq!(c.read_frame(), Frame::int(1));
            }
            let set = c.cmd(&["SET", "small", "v"]);
            assert!(field(&mut c, "evicted_keys") > 0, "{policy}: nothing evicted, SET: {set:?}");
        }
    }
}
