//! The logs' buffers and the memory budget (issues 10 and 11), against the
//! real binary: with a durability journal, a small `maxmemory` still takes
//! writes and evicts by its policy, because the journal's buffers (staged
//! records, writes in flight, a new segment's zero-fill, a segment read
//! whole at replay) are counted in `used_memory` but left out of the
//! eviction decision, as Redis leaves out its AOF buffer
//! (`mem_not_counted_for_evict`, `mem_aof_buffer`); and they are bounded, so
//! RSS stays within `maxmemory` plus that bound plus the process's fixed
//! part. With `--hugepages transparent` the large buffers live in huge
//! pages, shown by `hugepages_bytes`, and the journal still restores its
//! data.

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};
use support::*;

const MAXMEMORY: u64 = 16 << 20;

/// What the logs' buffers may hold beside `maxmemory` at any moment under
/// this test's load, as the code bounds them: a new segment's zero-fill
/// (2 × 2 MiB in flight), records staged for the next flush and the copy a
/// flush writes (periodic flushes early at 4 MiB staged), plus the pages
/// the allocator has not handed back yet. Documented in README's
/// "Memory" notes.
const BUFFER_BOUND: u64 = 24 << 20;

fn memory(c: &mut RawConn) -> HashMap<String, String> {
    info(c, Some("memory"))
}

fn figure(i: &HashMap<String, String>, name: &str) -> u64 {
    i.get(name).unwrap_or_else(|| panic!("INFO lacks {name}: {i:?}")).parse().unwrap()
}

fn wait_loaded(server: &Server) {
    let mut c = server.conn();
    let ok = wait_for(Duration::from_secs(30), || !c.cmd(&["EXISTS", "probe"]).is_error());
    assert!(ok, "still loading after 30 s\n{}", server.logs());
}

/// Writes `n` keys of `size` bytes in pipelined batches of `batch`; returns
/// the error replies. Between batches, checks the budget's promise
/// (`check`).
fn load(c: &mut RawConn, n: usize, size: usize, batch: usize, mut check: impl FnMut(usize)) -> Vec<String> {
    let value = "v".repeat(size);
    let mut errors = Vec::new();
    for start in (0..n).step_by(batch) {
        let end = (start + batch).min(n);
        for i in start..end {
            c.send(&["SET", &format!("key:{i}"), &value]);
        }
        for _ in start..end {
            let f = c.read_frame();
            if f != Frame::ok() {
                errors.push(format!("{f:?}"));
            }
        }
        check(end);
    }
    errors
}

/// 100 MB of writes through a 16 MiB node journaling in `mode` (default
/// 64 MiB segments, so a new segment is zero-filled on the way): every
/// write succeeds, allkeys-lru evicts, `used_memory` less the logs'
/// buffers stays within `maxmemory`, and RSS within `maxmemory` plus the
/// buffers' bound plus the idle node's RSS.
fn small_budget_with_journal(mode: &str) {
    let server = Server::strata_with(&[
        "--dir",
        "{dir}/data",
        "--durability",
        mode,
        "--maxmemory",
        "16mb",
        "--maxmemory-policy",
        "allkeys-lru",
    ]);
    wait_loaded(&server);
    let mut c = server.conn();
    let mut probe = server.conn();
    let idle = memory(&mut probe);
    let idle_rss = figure(&idle, "used_memory_rss");
    // An idle node's own part (code pages, stacks) is ~11 MB in a release
    // build but 15-16 MB in a debug one: there the budget is raised so that
    // some 6 MB are left for data, as 16 MB leave in release.
    let budget = MAXMEMORY.max(figure(&idle, "used_memory") + (6 << 20));
    if budget > MAXMEMORY {
        println!(
            "note: idle used_memory {} (debug build?): maxmemory raised to {budget}",
            figure(&idle, "used_memory")
        );
        assert_eq!(probe.cmd(&["CONFIG", "SET", "maxmemory", &budget.to_string()]), Frame::ok());
    }
    eprintln!(
        "{mode}: idle used_memory {} rss {idle_rss} mem_aof_buffer {}",
        figure(&idle, "used_memory"),
        figure(&idle, "mem_aof_buffer")
    );
    assert!(
        figure(&idle, "used_memory") - figure(&idle, "mem_not_counted_for_evict") < budget,
        "an idle durable node is over its budget: {idle:?}"
    );
    let (mut max_rss, mut max_counted, mut max_buffers) = (0u64, 0u64, 0u64);
    let mut at_peak = String::new();
    let started = Instant::now();
    let errors = load(&mut c, 100_000, 1000, 500, |_| {
        let m = memory(&mut probe);
        let (used, apart) = (figure(&m, "used_memory"), figure(&m, "mem_not_counted_for_evict"));
        let parts = ["mem_aof_buffer", "strata_mem_cold_tier_buffer", "strata_mem_migration_buffer"];
        assert_eq!(apart, parts.iter().map(|p| figure(&m, p)).sum::<u64>(), "{m:?}");
        if used.saturating_sub(apart) > max_counted {
            max_counted = used.saturating_sub(apart);
            at_peak = [
                "used_memory_dataset",
                "mem_clients_normal",
                "allocator_allocated",
                "strata_allocator_thread_cached",
                "mem_aof_buffer",
            ]
            .iter()
            .map(|f| format!("{f}={}", m[*f]))
            .collect::<Vec<_>>()
            .join(" ");
        }
        max_buffers = max_buffers.max(apart);
        max_rss = max_rss.max(figure(&m, "used_memory_rss"));
    });
    let m = memory(&mut probe);
    let keys = c.cmd(&["DBSIZE"]).as_int().unwrap();
    let evicted: u64 = info_field(&mut probe, "evicted_keys").unwrap().parse().unwrap();
    eprintln!(
        "{mode}: 100k × 1 KB in {:?}: {} errors, {keys} keys, {evicted} evicted; peaks: used_memory less buffers \
         {max_counted} ({at_peak}), buffers {max_buffers}, rss {max_rss}; now used_memory {} rss {}",
        started.elapsed(),
        errors.len(),
        figure(&m, "used_memory"),
        figure(&m, "used_memory_rss"),
    );
    assert!(errors.is_empty(), "{mode}: {} writes refused, first {:?}", errors.len(), errors.first());
    assert!(evicted > 50_000, "{mode}: allkeys-lru should have evicted most of 100 MB: {evicted}");
    // Eviction stopped near the limit, not far below it (the journal's
    // buffers do not push the data out). What an idle node holds (its code
    // pages, stacks: 10-15 MB of a debug build) leaves room for few keys.
    let counted_now = figure(&m, "used_memory") - figure(&m, "mem_not_counted_for_evict");
    assert!(counted_now >= budget - (1 << 20), "{mode}: evicted down to {counted_now}: {m:?}");
    assert!(keys >= 100, "{mode}: the cache holds only {keys} keys");
    // Between two writes a reading may find the node a little past the
    // limit, as Redis's INFO can (the next write evicts): INFO reads the
    // allocator afresh, while the node's own figure is its per-write
    // estimate set right every 2 ms near the limit, and with a journal the
    // flush and I/O threads allocate meanwhile (seen: up to 0.65 MB over,
    // debug build, periodic; none beyond that).
    assert!(max_counted <= budget + (1 << 20), "{mode}: used_memory less buffers peaked at {max_counted}");
    assert!(
        max_rss <= budget + BUFFER_BOUND + idle_rss,
        "{mode}: RSS peaked at {max_rss} > maxmemory + {BUFFER_BOUND} + idle RSS {idle_rss}"
    );
    // Every key the node kept is whole (journal and eviction agree).
    for i in (0..100_000).step_by(101) {
        let f = c.cmd(&["GET", &format!("key:{i}")]);
        assert!(f.is_null() || f == Frame::bulk("v".repeat(1000)), "{mode}: key:{i} is {f:?}");
    }
}

#[test]
fn periodic_journal_leaves_a_16mb_budget_to_the_data() {
    small_budget_with_journal("periodic");
}

#[test]
fn sync_journal_leaves_a_16mb_budget_to_the_data() {
    small_budget_with_journal("sync");
}

fn thp_enabled() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").is_ok_and(|s| !s.contains("[never]"))
}

fn free_2mi_pages() -> u64 {
    std::fs::read_to_string("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// 2 MiB pages the reserved-page test wants free: the replay's 64 MiB
/// segment buffer, its read chunks and the staged record.
const PAGES_NEEDED: u64 = 48;

/// With huge pages on (`setting`), a large record staged for the journal
/// and the buffer its flush writes are huge-page mappings: `/metrics` shows
/// them (`strata_hugepages_bytes`, the journal's buffers) while a slow
/// flush holds them, then they are given back; the replay after a restart
/// reads the segment through huge-page buffers and restores the value.
/// Where the machine has no such pages, the fallback is checked instead.
/// Flushes are slowed down (the node's test hook) so that the buffers can
/// be seen; INFO would wait for the flush (back-pressure), `/metrics` does
/// not.
fn huge_pages_back_the_journal_buffers(setting: &str, expect_huge: bool) {
    let data = std::env::temp_dir().join(format!("strata-logbuf-{}-{setting}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let dir = data.to_str().unwrap().to_string();
    let port = free_port().to_string();
    let args = ["--dir", &dir, "--durability", "periodic", "--hugepages", setting, "--metrics-port", &port];
    let value: String = (0..6 << 20).map(|i| (b'a' + (i % 26) as u8) as char).collect();
    let journal_series = "strata_memory_used_bytes{component=\"journal_buffers\"}";
    {
        let server = Server::strata_with_env(&args, &[("STRATA_TEST_FLUSH_DELAY_MS", "1500")]);
        wait_loaded(&server);
        let metrics_port: u16 = port.parse().unwrap();
        let huge_before = sample(&scrape(metrics_port), "strata_hugepages_bytes").unwrap();
        let mut c = server.conn();
        c.send(&["SET", "big", &value]);
        let mut seen = (0.0, 0.0);
        let held = wait_for(Duration::from_secs(5), || {
            let m = scrape(metrics_port);
            seen = (sample(&m, journal_series).unwrap(), sample(&m, "strata_hugepages_bytes").unwrap());
            seen.0 >= 6e6 && (!expect_huge || seen.1 - huge_before >= 6e6)
        });
        assert!(
            held,
            "{setting}: journal buffers {} B, hugepages {} B (before {huge_before}) while a flush waits",
            seen.0, seen.1
        );
        assert_eq!(c.read_frame(), Frame::ok());
        // Flushed: the buffers are given back.
        let freed = wait_for(Duration::from_secs(10), || {
            let m = scrape(metrics_port);
            sample(&m, journal_series).unwrap() < 1e6
                && sample(&m, "strata_hugepages_bytes").unwrap() < huge_before + 1e6
        });
        assert!(freed, "{setting}: buffers kept after the flush:\n{}", scrape(metrics_port));
        let i = memory(&mut c);
        assert_eq!(i["hugepages_setting"], setting);
        if expect_huge {
            assert_eq!(figure(&i, "hugepages_fallbacks"), 0, "{i:?}");
        } else {
            println!("note: no {setting} huge pages here: checked the accounting and the fallback only");
            assert!(figure(&i, "hugepages_fallbacks") > 0, "{i:?}");
        }
    }
    // A restart replays the segment (read whole through huge-page buffers).
    let server = Server::strata_with(&args);
    wait_loaded(&server);
    let mut c = server.conn();
    assert_eq!(c.cmd(&["STRLEN", "big"]), Frame::int(value.len() as i64));
    assert_eq!(c.cmd(&["GETRANGE", "big", "0", "25"]), Frame::bulk(&value[..26]));
    let fallbacks = figure(&memory(&mut c), "hugepages_fallbacks");
    assert_eq!(fallbacks == 0, expect_huge, "{setting}: {fallbacks} fallbacks\n{}", server.logs());
    drop(server);
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn transparent_huge_pages_back_the_journal_buffers() {
    huge_pages_back_the_journal_buffers("transparent", thp_enabled());
}

/// Runs the real path only with reserved pages free (as root:
/// `echo 64 > /proc/sys/vm/nr_hugepages`, then back to what it was).
#[test]
fn reserved_huge_pages_back_the_journal_buffers() {
    huge_pages_back_the_journal_buffers("2Mi", free_2mi_pages() >= PAGES_NEEDED);
}
