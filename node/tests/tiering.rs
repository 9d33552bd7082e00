//! The cold tier (`--max-disk`): at `maxmemory` the policy's victims are
//! demoted to disk instead of lost, every key stays readable through the
//! pending path, collections included, and the disk budget is kept by
//! cleaning. Against the real binary and a real file system.

mod support;

use std::time::{Duration, Instant};
use support::*;

fn value_of(i: usize, len: usize) -> String {
    let seed = format!("v{i}:");
    seed.repeat(len / seed.len() + 1)[..len].to_string()
}

fn field(conn: &mut RawConn, name: &str) -> u64 {
    info_field(conn, name).unwrap_or_else(|| panic!("INFO has no {name}")).parse().expect("a number")
}

/// Pipelined SETs of `n` keys with `len`-byte values.
fn fill(conn: &mut RawConn, prefix: &str, n: usize, len: usize) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        for &i in chunk {
            conn.send(&["SET", &format!("{prefix}{i}"), &value_of(i, len)]);
        }
        let mut bad = None;
        for &i in chunk {
            let got = conn.read_frame();
            if got != Frame::ok() && bad.is_none() {
                bad = Some((i, got));
            }
        }
        if let Some((i, got)) = bad {
            let info = conn.cmd(&["INFO", "everything"]);
            panic!("SET {prefix}{i}: {got:?}\n{info:?}");
        }
    }
}

/// A node with a cold tier of `max_disk` whose `maxmemory` leaves `room`
/// bytes above what it holds empty (its base differs between builds).
fn tiered(room: u64, max_disk: &str, threads: &str) -> Server {
    let server = Server::strata_with(&[
        "--maxmemory-policy",
        "allkeys-lru",
        "--max-disk",
        max_disk,
        "--dir",
        "{dir}",
        "--threads",
        threads,
    ]);
    limit(&server, room);
    server
}

/// What says where a key went: evictions, the keyless tables, read errors.
fn tier_figures(c: &mut RawConn) -> String {
    let names =
        ["evicted_keys", "tier_evicted_disk_keys", "tier_keyless_keys", "tier_keyless_index_bytes", "tier_read_errors"];
    names.iter().map(|f| format!("{f} {}", field(c, f))).collect::<Vec<_>>().join(", ")
}

fn limit(server: &Server, room: u64) -> u64 {
    let mut c = server.conn();
    let budget = field(&mut c, "used_memory") + room;
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", &budget.to_string()]), Frame::ok());
    budget
}

/// The keyspace within `maxmemory`, and the tier's write buffers beside it
/// within their bound. Eviction keeps `used_memory` less the buffers
/// counted apart (INFO `mem_not_counted_for_evict`, as Redis leaves its AOF
/// buffer out) within `maxmemory`; a write may land before the eviction it
/// causes has run (as in Redis), more so while the tier's writer is behind
/// on a loaded machine: a thirty-second of slack. The buffers: what waits
/// to be written (writes wait beyond 1 MiB, a demotion writes it out itself
/// beyond 2 MiB) and the reads in flight. Over it, the node's next command
/// makes room (as Redis's does): one over for longer than a few commands'
/// time fails.
fn assert_within_budget(c: &mut RawConn) {
    let mut last = String::new();
    let within = wait_for(Duration::from_secs(1), || {
        let (used, max) = (field(c, "used_memory"), field(c, "maxmemory"));
        let apart = field(c, "mem_not_counted_for_evict");
        assert!(apart <= 4 << 20, "{apart} bytes of log buffers");
        last = format!("used_memory {used} ({apart} buffers apart) above maxmemory {max}");
        used - apart <= max + max / 32
    });
    assert!(within, "{last}, for a second");
}

#[test]
fn data_larger_than_ram_stays_readable() {
    let server = tiered(10 << 20, "256mb", "2");
    let mut c = server.conn();
    assert_eq!(field(&mut c, "tier_enabled"), 1);
    // Collections first, so that they are among the coldest.
    for h in 0..50 {
        let mut args = vec!["HSET".to_string(), format!("hash{h}")];
        for f in 0..40 {
            args.push(format!("f{f}"));
            args.push(value_of(h * 100 + f, 100));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(c.cmd(&args), Frame::int(40));
        let items: Vec<String> = (0..30).map(|i| value_of(h + i, 90)).collect();
        let mut args = vec!["RPUSH", "list"];
        let name = format!("list{h}");
        args[1] = &name;
        args.extend(items.iter().map(String::as_str));
        assert_eq!(c.cmd(&args), Frame::int(30));
    }
    // About 3× the memory limit in strings.
    let n = 30_000;
    fill(&mut c, "key:", n, 1000);
    let dbsize = c.cmd(&["DBSIZE"]);
    if dbsize != Frame::int((n + 100) as i64) {
        println!("{:?}", c.cmd(&["INFO", "tier"]));
        println!("{:?}", c.cmd(&["INFO", "stats"]));
    }
    assert_eq!(dbsize, Frame::int((n + 100) as i64), "no key was lost");
    let disk_keys = field(&mut c, "tier_disk_keys");
    assert!(disk_keys > (n / 2) as u64, "most values went to disk: {disk_keys}");
    assert_eq!(field(&mut c, "tier_evicted_disk_keys"), 0);
    assert_within_budget(&mut c);

    // Every value reads back right, the coldest first.
    assert_eq!(c.cmd(&["TYPE", "hash7"]), Frame::simple("hash"));
    for h in 0..50 {
        let got = c.cmd(&["HGET", &format!("hash{h}"), "f39"]);
        assert_eq!(got, Frame::bulk(value_of(h * 100 + 39, 100)), "hash{h}");
        assert_eq!(c.cmd(&["LLEN", &format!("list{h}")]), Frame::int(30));
        assert_eq!(c.cmd(&["LINDEX", &format!("list{h}"), "-1"]), Frame::bulk(value_of(h + 29, 90)));
    }
    for i in (0..n).step_by(7) {
        assert_eq!(c.cmd(&["GET", &format!("key:{i}")]), Frame::bulk(value_of(i, 1000)), "key:{i}");
    }
    // Read from disk: promoted, or served once and left there (read once).
    assert!(field(&mut c, "tier_promoted") + field(&mut c, "tier_served_once") > 1000);
    assert_eq!(field(&mut c, "tier_read_errors"), 0);
    // SCAN's TYPE filter sees cold keys' types without reading them.
    let mut cursor = "0".to_string();
    // (SCAN may return a key twice: one that moved between RAM's index and
    // the disk's during the iteration.)
    let mut hashes = std::collections::HashSet::new();
    loop {
        let reply = c.cmd(&["SCAN", &cursor, "TYPE", "hash", "COUNT", "1000"]);
        let Frame::Array(parts) = reply else { panic!("{reply:?}") };
        cursor = String::from_utf8(parts[0].as_bytes().unwrap().to_vec()).unwrap();
        let Frame::Array(keys) = &parts[1] else { panic!() };
        hashes.extend(keys.iter().map(|k| k.as_bytes().unwrap().to_vec()));
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(hashes.len(), 50);
}

#[test]
fn writes_to_cold_keys_win_over_their_old_values() {
    let server = tiered(6 << 20, "128mb", "2");
    let mut c = server.conn();
    let n = 20_000;
    fill(&mut c, "k", n, 800);
    assert!(field(&mut c, "tier_disk_keys") > 5000);
    // Overwrites, appends, deletes and expiries of keys on disk.
    for i in (0..2000).step_by(3) {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), "new"]), Frame::ok());
        assert_eq!(c.cmd(&["APPEND", &format!("k{}", i + 1), "+"]), Frame::int(801));
        assert_eq!(c.cmd(&["DEL", &format!("k{}", i + 2)]), Frame::int(1));
    }
    // Push them out again, then read everything back.
    fill(&mut c, "filler", 10_000, 800);
    for i in (0..2000).step_by(3) {
        assert_eq!(c.cmd(&["GET", &format!("k{i}")]), Frame::bulk("new"));
        assert_eq!(c.cmd(&["GET", &format!("k{}", i + 1)]), Frame::bulk(&(value_of(i + 1, 800) + "+")));
        assert_eq!(c.cmd(&["EXISTS", &format!("k{}", i + 2)]), Frame::int(0));
    }
    assert_eq!(field(&mut c, "tier_read_errors"), 0);
}

#[test]
fn concurrent_readers_of_a_cold_key_share_one_read() {
    let server = tiered(6 << 20, "128mb", "2");
    let mut c = server.conn();
    fill(&mut c, "k", 20_000, 800);
    // Sampled LRU may have left k0 in RAM: every value goes to disk now.
    assert!(matches!(c.cmd(&["DEBUG", "DEMOTE"]), Frame::Integer(_)));
    // Many clients ask for k0 at once.
    let before = field(&mut c, "tier_reads");
    let mut conns: Vec<RawConn> = (0..16).map(|_| server.conn()).collect();
    for conn in &mut conns {
        conn.send(&["GET", "k0"]);
    }
    for conn in &mut conns {
        assert_eq!(conn.read_frame(), Frame::bulk(value_of(0, 800)));
    }
    let reads = field(&mut c, "tier_reads") - before;
    assert!(reads >= 1, "the value came from disk");
    assert!(reads < 16, "{reads} reads for 16 concurrent readers of one key");
}

#[test]
fn the_disk_budget_is_kept_by_cleaning() {
    // 24 MiB of disk (8 segments of 3 MiB) under 10 MB of RAM, written
    // over several times: the log fills with dead records and is cleaned.
    let server = tiered(10 << 20, "24mb", "1");
    let mut c = server.conn();
    let keys = 8_000;
    for round in 0..6 {
        for chunk in (0..keys).collect::<Vec<_>>().chunks(200) {
            for &i in chunk {
                c.send(&["SET", &format!("k{i}"), &format!("{round}:{}", value_of(i, 2000))]);
            }
            for _ in chunk {
                assert_eq!(c.read_frame(), Frame::ok());
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while field(&mut c, "tier_cleaned_segments") == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(field(&mut c, "tier_cleaned_segments") > 0, "the cleaner ran");
    let disk = field(&mut c, "tier_disk_bytes");
    assert!(disk <= field(&mut c, "tier_max_disk_bytes"), "disk {disk} beyond the budget");
    let files: u64 =
        std::fs::read_dir(server.dir().join("cold")).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
    assert!(files <= 24 << 20, "segment files take {files} bytes");
    // Every key reads back as the last round wrote it. A write that waited
    // too long for the cleaner (a loaded machine) evicts instead: such keys
    // are missing, never stale, and counted.
    let mut missing = 0;
    for i in 0..keys {
        match c.cmd(&["GET", &format!("k{i}")]) {
            Frame::Nil => missing += 1,
            got => assert_eq!(got, Frame::bulk(format!("5:{}", value_of(i, 2000))), "k{i}"),
        }
    }
    assert_eq!(field(&mut c, "tier_read_errors"), 0);
    let evicted = field(&mut c, "evicted_keys");
    assert!(missing <= evicted, "{missing} keys missing, {evicted} evicted");
    // How many depends on how much CPU the cleaner got (tests run side by
    // side); a cleaner that fell behind for good would lose far more.
    eprintln!("cleaning: {missing} of {keys} keys missing, {evicted} evicted");
    assert!(evicted <= keys as u64 / 10, "{evicted} keys evicted");
}

#[test]
fn the_tier_starts_empty_and_says_so() {
    let server = tiered(6 << 20, "64mb", "1");
    let mut c = server.conn();
    assert_eq!(field(&mut c, "tier_disk_keys"), 0);
    assert_eq!(c.cmd(&["CONFIG", "GET", "max-disk"]), Frame::bulks(&["max-disk", "67108864"]));
    let text = String::from_utf8(c.cmd(&["INFO", "tier"]).as_bytes().unwrap().to_vec()).unwrap();
    assert!(text.starts_with("# Tier\r\ntier_enabled:1\r\n"), "{text}");
    // Without --max-disk there is no tier, and victims are evicted.
    let plain = Server::strata_with(&["--maxmemory-policy", "allkeys-lru"]);
    limit(&plain, 4 << 20);
    let mut p = plain.conn();
    assert_eq!(field(&mut p, "tier_enabled"), 0);
    fill(&mut p, "k", 10_000, 800);
    assert!(field(&mut p, "evicted_keys") > 0);
}

/// Keys on disk only leave their key on disk too ("keyless"): RAM keeps a
/// 16-byte slot per key, and every command still finds them: reads, blind
/// writes, DBSIZE, SCAN, KEYS, RANDOMKEY, FLUSHALL.
#[test]
fn keys_on_disk_only_cost_a_slot_of_ram_and_stay_found() {
    // The keyless tables may take half of what maxmemory leaves the
    // keyspace (beyond them cold keys are evicted, by design): 100 k keys
    // need 2-2.7 MB of the 5 MB they may take here, whatever the node's own
    // overhead does after start-up (150 k needed up to 4 MB, and a run now
    // and then evicted one).
    let server = tiered(10 << 20, "512mb", "2");
    let mut c = server.conn();
    let n = 100_000;
    fill(&mut c, "key:", n, 128);
    assert_eq!(c.cmd(&["DBSIZE"]), Frame::int(n as i64), "no key was lost");
    let keyless = field(&mut c, "tier_keyless_keys");
    assert!(keyless > (n / 2) as u64, "most keys are on disk only, key and all: {keyless}");
    let index = field(&mut c, "tier_keyless_index_bytes");
    let per_key = index as f64 / keyless as f64;
    println!("{keyless} keys on disk only, {per_key:.1} bytes of RAM each");
    assert!(per_key <= 32.0, "{per_key:.1} bytes per key on disk only");
    assert_within_budget(&mut c);
    assert_eq!(field(&mut c, "tier_evicted_disk_keys"), 0);

    for i in (0..n).step_by(97) {
        let got = c.cmd(&["GET", &format!("key:{i}")]);
        assert_eq!(got, Frame::bulk(value_of(i, 128)), "key:{i}; {}", tier_figures(&mut c));
    }
    assert_eq!(c.cmd(&["GET", "key:absent"]), Frame::Nil);
    // Blind writes and deletes of keys on disk only leave no older copy.
    for i in (1..n).step_by(1009) {
        assert_eq!(c.cmd(&["SET", &format!("key:{i}"), "new"]), Frame::ok());
    }
    assert_eq!(c.cmd(&["DEL", "key:2", "key:3"]), Frame::int(2));
    assert_eq!(c.cmd(&["DBSIZE"]), Frame::int(n as i64 - 2));
    assert_eq!(c.cmd(&["GET", "key:1010"]), Frame::bulk("new"));
    assert_eq!(c.cmd(&["EXISTS", "key:2"]), Frame::int(0));

    // Inside MULTI nothing waits: SCAN reads a partition's keys on disk
    // under its lock, and answers.
    assert_eq!(c.cmd(&["MULTI"]), Frame::ok());
    assert_eq!(c.cmd(&["SCAN", "0", "COUNT", "100"]), Frame::Simple("QUEUED".into()));
    let exec = c.cmd(&["EXEC"]);
    let scanned = exec.as_array().and_then(|r| r[0].as_array()).map(|r| r[1].as_array().unwrap().len());
    assert!(scanned.is_some_and(|n| n >= 100), "{exec:?}");
    // SCAN returns every key at least once; KEYS every match. Partitions
    // with many keys on disk are read back in batches, their locks free.
    let batched = field(&mut c, "tier_batch_reads");
    let mut cursor = "0".to_string();
    let mut seen = std::collections::HashSet::new();
    loop {
        let reply = c.cmd(&["SCAN", &cursor, "COUNT", "1000"]);
        let Frame::Array(parts) = reply else { panic!("{reply:?}") };
        cursor = String::from_utf8(parts[0].as_bytes().unwrap().to_vec()).unwrap();
        for k in parts[1].as_array().unwrap() {
            seen.insert(k.as_bytes().unwrap().to_vec());
        }
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), n - 2, "SCAN saw every key; {}", tier_figures(&mut c));
    assert!(field(&mut c, "tier_batch_reads") > batched, "SCAN read keys on disk in batches");
    let keys = c.cmd(&["KEYS", "key:1234*"]);
    let want = (0..n).filter(|i| i.to_string().starts_with("1234")).count();
    assert_eq!(keys.as_array().unwrap().len(), want);
    let Frame::Bulk(random) = c.cmd(&["RANDOMKEY"]) else { panic!("RANDOMKEY") };
    assert_eq!(c.cmd(&["EXISTS", std::str::from_utf8(&random).unwrap()]), Frame::int(1));
    assert_eq!(field(&mut c, "tier_read_errors"), 0);

    assert_eq!(c.cmd(&["FLUSHALL"]), Frame::ok());
    assert_eq!(c.cmd(&["DBSIZE"]), Frame::int(0));
    assert_eq!(field(&mut c, "tier_disk_keys"), 0);
    assert_eq!(field(&mut c, "tier_keyless_keys"), 0);
    assert_eq!(c.cmd(&["GET", "key:5"]), Frame::Nil);
}

/// Keys with a TTL go to disk only too, and keep their exact deadline.
#[test]
fn keys_on_disk_only_keep_their_ttl() {
    let server = tiered(8 << 20, "512mb", "2");
    let mut c = server.conn();
    let started = Instant::now();
    let set_all = |c: &mut RawConn, prefix: &str, n: usize, ttl: &[&str]| {
        for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
            for &i in chunk {
                let key = format!("{prefix}{i}");
                let value = value_of(i, 128);
                let mut args = vec!["SET", &key, &value];
                args.extend_from_slice(ttl);
                c.send(&args);
            }
            for _ in chunk {
                assert_eq!(c.read_frame(), Frame::ok());
            }
        }
    };
    set_all(&mut c, "short:", 5_000, &["PX", "2500"]);
    set_all(&mut c, "long:", 20_000, &["EX", "3600"]);
    fill(&mut c, "key:", 100_000, 128);
    let keyless = field(&mut c, "tier_keyless_keys");
    assert!(keyless > 20_000, "keys with a TTL went to disk only too: {keyless}");
    let keyspace = info_field(&mut c, "db0").expect("db0 in INFO keyspace");
    let expires: u64 = keyspace.split(',').find_map(|p| p.strip_prefix("expires=")).unwrap().parse().unwrap();
    assert!(expires >= 20_000, "keys on disk only count in expires: {keyspace}");
    for i in (0..20_000).step_by(101) {
        let Frame::Integer(ttl) = c.cmd(&["TTL", &format!("long:{i}")]) else { panic!("TTL") };
        assert!((3000..=3600).contains(&ttl), "long:{i} TTL {ttl}");
        assert_eq!(c.cmd(&["GET", &format!("long:{i}")]), Frame::bulk(value_of(i, 128)));
    }
    // The short deadlines pass: the exact one in the record decides.
    std::thread::sleep(Duration::from_millis(3000).saturating_sub(started.elapsed()));
    for i in (0..5_000).step_by(53) {
        assert_eq!(c.cmd(&["GET", &format!("short:{i}")]), Frame::Nil, "short:{i} expired");
        assert_eq!(c.cmd(&["EXISTS", &format!("short:{i}")]), Frame::int(0));
    }
    assert_eq!(field(&mut c, "tier_read_errors"), 0);
}

/// The cumulative buckets (le, count) of the read-command histogram's `tier` series.
fn read_buckets(text: &str, tier: &str) -> Vec<(f64, f64)> {
    let prefix = "strata_read_command_duration_seconds_bucket{le=\"";
    let suffix = format!("\",tier=\"{tier}\"}}");
    text.lines()
        .filter_map(|l| {
            let (series, value) = l.split_once(' ')?;
            let le = series.strip_prefix(prefix)?.strip_suffix(&suffix)?;
            let le = if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? };
            Some((le, value.parse().ok()?))
        })
        .collect()
}

/// The median of cumulative buckets, interpolated inside its bucket.
fn median(buckets: &[(f64, f64)]) -> f64 {
    let count = buckets.last().expect("buckets").1;
    let (mut lo, mut below) = (0.0, 0.0);
    for &(le, n) in buckets {
        if n >= count / 2.0 && n > below {
            return if le.is_finite() { lo + (le - lo) * (count / 2.0 - below) / (n - below) } else { lo };
        }
        (lo, below) = (le, n);
    }
    lo
}

#[test]
fn read_latency_is_reported_by_tier() {
    let port = free_port();
    let server = Server::strata_with(&[
        "--maxmemory-policy",
        "allkeys-lru",
        "--max-disk",
        "128mb",
        "--dir",
        "{dir}",
        "--metrics-port",
        &port.to_string(),
        "--metrics-bind",
        "127.0.0.1",
    ]);
    limit(&server, 6 << 20);
    let mut c = server.conn();
    let n = 20_000;
    fill(&mut c, "k", n, 800);
    assert!(field(&mut c, "tier_disk_keys") > 5000);
    let before = scrape(port);
    assert_eq!(read_buckets(&before, "disk").last(), Some(&(f64::INFINITY, 0.0)), "no read waited yet");
    // The newest keys are in RAM (a few may be on disk: read once, such a
    // value stays there, and is read again, then promoted); the oldest are
    // on disk only, and each GET of one waits for its read.
    let warming = field(&mut c, "tier_reads");
    for _ in 0..3 {
        for i in n - 200..n {
            assert_eq!(c.cmd(&["GET", &format!("k{i}")]), Frame::bulk(value_of(i, 800)));
        }
    }
    let reads = field(&mut c, "tier_reads");
    let warming = reads - warming;
    for i in 0..300 {
        assert_eq!(c.cmd(&["GET", &format!("k{i}")]), Frame::bulk(value_of(i, 800)));
    }
    let waited = field(&mut c, "tier_reads") - reads;
    assert!(waited > 200, "{waited} of 300 GETs of cold keys waited for a read");

    let text = scrape(port);
    let (ram, disk) = (read_buckets(&text, "ram"), read_buckets(&text, "disk"));
    assert_eq!((ram.len(), disk.len()), (21, 21), "{text}");
    let (ram_count, disk_count) = (ram[20].1, disk[20].1);
    assert!(ram_count >= 600.0 - warming as f64, "{ram_count} reads from RAM, {warming} disk reads warming up");
    assert!(
        disk_count >= waited as f64 && disk_count <= 300.0 + warming as f64,
        "{disk_count} reads from disk, {waited} waited, {warming} warming up"
    );
    let (ram_p50, disk_p50) = (median(&ram), median(&disk));
    eprintln!("reads: {ram_count} from RAM, p50 {ram_p50:e} s; {disk_count} from disk, p50 {disk_p50:e} s");
    assert!(disk_p50 > ram_p50, "p50 disk {disk_p50} s, ram {ram_p50} s");
    // INFO tier reports the same histograms.
    let mut info_p50 = |tier: &str| -> f64 {
        info_field(&mut c, &format!("tier_{tier}_read_p50_usec")).expect("p50 in INFO tier").parse().unwrap()
    };
    assert!(info_p50("disk") > info_p50("ram"));
    assert!(field(&mut c, "tier_disk_read_commands") >= disk_count as u64);
}

/// The check: data 10× the memory budget, every key readable.
#[test]
fn data_ten_times_the_budget_is_all_readable() {
    let server = tiered(8 << 20, "1gb", "2");
    let mut c = server.conn();
    let max = field(&mut c, "maxmemory");
    // A key on disk only keeps ~30 B of index in RAM, and that index may
    // take half of what the budget leaves the keyspace: 4 KiB values.
    let len = 4096;
    let n = (10 * max / len as u64) as usize + 1;
    fill(&mut c, "k", n, len);
    assert_eq!(c.cmd(&["DBSIZE"]), Frame::int(n as i64), "no key was lost");
    assert_eq!(field(&mut c, "tier_evicted_disk_keys"), 0);
    assert_within_budget(&mut c);
    println!("{n} keys of {len} B ({} MB) in {} MB of RAM", (n * len) >> 20, max >> 20);
    for i in (0..n).step_by(11) {
        assert_eq!(c.cmd(&["GET", &format!("k{i}")]), Frame::bulk(value_of(i, len)), "k{i}");
    }
    assert_eq!(field(&mut c, "tier_read_errors"), 0);
}

/// Short-lived values fill the disk budget and expire: their segments
/// (placed apart from long-lived values by expiry) are recycled without a
/// read once they certainly expired (a key on disk only keeps its deadline
/// rounded up to the minute), more short-lived values take their place,
/// the cleaner never has to evict, and every long-lived key stays readable.
#[test]
fn expiring_values_make_room_without_reads_or_evictions() {
    // 48 MiB of disk: 8 segments of 6 MiB, one head for values without a
    // TTL and one for those with.
    let server = tiered(6 << 20, "48mb", "1");
    let mut c = server.conn();
    let long = 3_000;
    fill(&mut c, "long", long, 2000);
    let short_rounds = |c: &mut RawConn, rounds: std::ops::Range<usize>| {
        for round in rounds {
            for chunk in (0..4_000).collect::<Vec<_>>().chunks(200) {
                for &i in chunk {
                    c.send(&["SET", &format!("short{round}:{i}"), &value_of(i, 2000), "EX", "2"]);
                }
                for _ in chunk {
                    assert_eq!(c.read_frame(), Frame::ok());
                }
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    };
    // Four rounds of 8 MB that live 2 s, most of each demoted: about what
    // the budget holds beside the long-lived values.
    short_rounds(&mut c, 0..4);
    let deadline = Instant::now() + Duration::from_secs(100);
    while field(&mut c, "tier_freed_unread_segments") < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    // As much again: room only if the expired segments went.
    short_rounds(&mut c, 4..8);
    let freed_unread = field(&mut c, "tier_freed_unread_segments");
    let segment_reads = field(&mut c, "tier_segment_reads");
    eprintln!(
        "freed unread {freed_unread}, segments read {segment_reads}, demoted {}, evicted {}",
        field(&mut c, "tier_demoted"),
        field(&mut c, "evicted_keys")
    );
    assert!(freed_unread >= 3, "expired segments are recycled without a read: {freed_unread}");
    assert!(segment_reads <= freed_unread, "{segment_reads} segments read to clean, {freed_unread} unread");
    assert_eq!(field(&mut c, "tier_evicted_disk_keys"), 0, "no value on disk was evicted");
    assert!(field(&mut c, "tier_disk_bytes") <= field(&mut c, "tier_max_disk_bytes"));
    assert!(field(&mut c, "tier_demoted") > 20_000, "short-lived values went to disk");
    // Every long-lived key reads back; a demotion refused on a loaded
    // machine (the flusher behind) evicts instead, and is counted.
    let mut missing = 0;
    for i in 0..long {
        match c.cmd(&["GET", &format!("long{i}")]) {
            Frame::Nil => missing += 1,
            got => assert_eq!(got, Frame::bulk(value_of(i, 2000)), "long{i}"),
        }
    }
    assert_eq!(field(&mut c, "tier_read_errors"), 0);
    assert!(missing as u64 <= field(&mut c, "evicted_keys"), "{missing} long-lived keys missing");
    assert!(missing <= long / 100, "{missing} long-lived keys missing");
}

/// Under `tier-admission frequent`, once the disk is full of live data,
/// values never read since they were written are evicted instead of
/// written; values read since are still demoted and read back.
#[test]
fn frequent_admission_spares_the_disk_values_nobody_read() {
    let server = Server::strata_with(&[
        "--maxmemory-policy",
        "allkeys-lru",
        "--max-disk",
        "24mb",
        "--dir",
        "{dir}",
        "--threads",
        "1",
        "--tier-admission",
        "frequent",
    ]);
    limit(&server, 8 << 20);
    let mut c = server.conn();
    // Every use steps OBJECT FREQ: "read twice" is exact.
    assert_eq!(c.cmd(&["CONFIG", "SET", "lfu-log-factor", "0"]), Frame::ok());
    // 40 MB written once and never read: RAM and then the disk fill with
    // live values, and the cleaner has to evict some.
    fill(&mut c, "cold", 20_000, 2000);
    let deadline = Instant::now() + Duration::from_secs(15);
    while field(&mut c, "tier_not_admitted") == 0 && Instant::now() < deadline {
        fill(&mut c, "more", 1_000, 2000);
    }
    let refused = field(&mut c, "tier_not_admitted");
    assert!(refused > 0, "values never read are turned away from a full tier");
    // Values read twice (OBJECT FREQ two steps up) still go to disk. (A
    // few are evicted before they are read: sampled LRU is approximate.)
    fill(&mut c, "hot", 1_000, 2000);
    let read_twice: Vec<usize> = (0..1_000)
        .filter(|i| {
            (0..2).all(|_| match c.cmd(&["GET", &format!("hot{i}")]) {
                Frame::Nil => false,
                got => {
                    assert_eq!(got, Frame::bulk(value_of(*i, 2000)), "hot{i}");
                    true
                }
            })
        })
        .collect();
    assert!(read_twice.len() >= 500, "{} of 1000 values read twice", read_twice.len());
    let demoted = field(&mut c, "tier_demoted");
    fill(&mut c, "push", 6_000, 2000);
    assert!(field(&mut c, "tier_demoted") > demoted, "read values are demoted");
    let disk_keys = field(&mut c, "tier_disk_keys");
    let mut kept = 0;
    for &i in &read_twice {
        match c.cmd(&["GET", &format!("hot{i}")]) {
            Frame::Nil => {}
            got => {
                assert_eq!(got, Frame::bulk(value_of(i, 2000)), "hot{i}");
                kept += 1;
            }
        }
    }
    eprintln!("not admitted {refused}, disk keys {disk_keys}, read twice {}, kept {kept}", read_twice.len());
    // Turned away, they would all be gone (12 MB pushed through 8 MB of
    // RAM); the cleaner may still evict some from a disk full of live data.
    assert!(kept * 2 >= read_twice.len(), "{kept} of {} values read twice kept", read_twice.len());
}

/// `tier-admission` is a runtime parameter: `all` by default, `frequent`
/// accepted, anything else refused with Redis's error for enumerations.
#[test]
fn tier_admission_is_a_runtime_setting() {
    let server = tiered(8 << 20, "24mb", "1");
    let mut c = server.conn();
    assert_eq!(c.cmd(&["CONFIG", "GET", "tier-admission"]), Frame::bulks(&["tier-admission", "all"]));
    assert_eq!(c.cmd(&["CONFIG", "SET", "tier-admission", "FREQUENT"]), Frame::ok());
    assert_eq!(c.cmd(&["CONFIG", "GET", "tier-admission"]), Frame::bulks(&["tier-admission", "frequent"]));
    match c.cmd(&["CONFIG", "SET", "tier-admission", "some"]) {
        Frame::Error(e) => assert!(e.contains("must be one of the following: all, frequent"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(field(&mut c, "tier_not_admitted"), 0);
}
