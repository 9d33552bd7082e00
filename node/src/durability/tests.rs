use super::*;
use crate::base::random::splitmix64;
use crate::tier::log::LogConfig;
use crate::tier::record::{OwnedRecord, RecordKind};
use crate::tier::sim::SimDisk;
use std::collections::BTreeMap;

fn open_log(disk: &SimDisk, config: &LogConfig, salt: u64) -> (Arc<SegmentLog>, BTreeMap<u64, OwnedRecord>) {
    let mut recovered = BTreeMap::new();
    let config = LogConfig { seed: Some(splitmix64(config.seed.unwrap_or(0) ^ salt)), ..config.clone() };
    let (log, _) = SegmentLog::open(Arc::new(disk.volume()), Arc::new(disk.engine()), config, |r, _| {
        recovered.insert(r.seq, r.to_owned());
    })
    .expect("recovery");
    (Arc::new(log), recovered)
}

fn config(seed: u64) -> LogConfig {
    LogConfig { segment_size: 8 * 4096, max_segments: 512, seed: Some(seed), ..LogConfig::default() }
}

fn record(producer: u64, i: u64) -> OwnedRecord {
    let value = vec![(producer * 31 + i) as u8; ((producer + i) % 7 * 90) as usize];
    OwnedRecord {
        kind: RecordKind::Set,
        db: 0,
        key: format!("p{producer}:{i}").into_bytes(),
        value,
        expire_at_ms: 0,
        seq: 0,
    }
}

/// Producers append and wait in `sync` until the disk crashes at a seeded
/// point; every acknowledged record must be recovered, byte for byte.
/// Returns the failures and the largest batch one flush made durable.
fn sync_crash(seed: u64, config: LogConfig) -> (Option<String>, u64) {
    let disk = SimDisk::new(seed);
    let (log, _) = open_log(&disk, &config, 1);
    let gc = GroupCommit::start(log, Policy::Sync).unwrap();
    disk.crash_after(5 + splitmix64(seed) % 60);
    let acked = Mutex::new(BTreeMap::new());
    std::thread::scope(|s| {
        for p in 0..3 {
            let (gc, acked) = (&gc, &acked);
            s.spawn(move || {
                for i in 0..200 {
                    let mut rec = record(p, i);
                    let Ok((seq, _)) = gc.append(&rec.as_record()) else { return };
                    rec.seq = seq;
                    if gc.wait_durable(seq).is_err() {
                        return;
                    }
                    acked.lock().insert(seq, rec);
                }
            });
        }
    });
    let max_batch = gc.stats().max_batch.load(Ordering::Relaxed);
    disk.crash();
    drop(gc);
    disk.reboot();
    let (_, recovered) = open_log(&disk, &config, 2);
    for (seq, rec) in acked.into_inner() {
        if recovered.get(&seq) != Some(&rec) {
            return (Some(format!("seed {seed}: acknowledged seq {seq} lost")), max_batch);
        }
    }
    (None, max_batch)
}

fn sync_crash_seeds(first: u64, budget: Duration, config: impl Fn(u64) -> LogConfig) -> (u64, Vec<String>, u64) {
    let start = Instant::now();
    let (mut ran, mut failures, mut batch) = (0, Vec::new(), 0);
    for seed in first.. {
        if start.elapsed() > budget || ran >= 2000 {
            break;
        }
        ran += 1;
        let (failure, b) = sync_crash(seed, config(seed));
        failures.extend(failure);
        batch = batch.max(b);
    }
    (ran, failures, batch)
}

#[test]
fn sync_loses_no_acknowledged_write_and_batches_concurrent_ones() {
    let (ran, failures, max_batch) = sync_crash_seeds(0, Duration::from_secs(3), config);
    eprintln!("sync: {ran} seeds, largest group commit {max_batch} records");
    assert!(ran >= 30, "only {ran} seeds in the time box");
    assert!(failures.is_empty(), "{} of {ran} failed: {}", failures.len(), failures[0]);
    assert!(max_batch > 1, "three producers never shared an fsync");
}

#[test]
fn every_flush_lands_in_the_batch_histogram() {
    const PRODUCERS: u64 = 4;
    const EACH: u64 = 150;
    let disk = SimDisk::new(7);
    let (log, _) = open_log(&disk, &config(7), 1);
    let gc = GroupCommit::start(log, Policy::Sync).unwrap();
    std::thread::scope(|s| {
        for p in 0..PRODUCERS {
            let gc = &gc;
            s.spawn(move || {
                for i in 0..EACH {
                    // Some writes go two at a time: flushes of several sizes.
                    let (seq, _) = gc.append(&record(p, i).as_record()).unwrap();
                    if i % 3 != 1 {
                        gc.wait_durable(seq).unwrap();
                    }
                }
            });
        }
    });
    let stats = gc.stats();
    let flushes = stats.flushes.load(Ordering::Relaxed);
    let records = stats.records.load(Ordering::Relaxed);
    let max_batch = stats.max_batch.load(Ordering::Relaxed);
    let h = stats.batch_sizes.figures(records);
    assert_eq!(records, PRODUCERS * EACH, "every acknowledged record was flushed once");
    assert_eq!(h.count(), flushes, "one histogram event per flush: {h:?}");
    assert!(flushes > 1 && max_batch > 1, "{flushes} flushes, the largest {max_batch}");
    // The largest batch falls in the highest bucket used.
    let top = h.buckets.iter().rposition(|&n| n > 0).unwrap();
    let bound = |k: usize| crate::metrics::BATCH_BUCKETS.get(k).copied().unwrap_or(u64::MAX);
    assert!(max_batch <= bound(top) && (top == 0 || max_batch > bound(top - 1)), "{max_batch} vs {h:?}");
    eprintln!("{flushes} flushes of {records} records, buckets {:?}", h.buckets);
}

#[test]
fn sync_acknowledging_before_fsync_is_caught() {
    let (ran, failures, _) =
        sync_crash_seeds(50_000, Duration::from_secs(2), |s| LogConfig { ack_before_sync: true, ..config(s) });
    eprintln!("sync, ack before fsync: {} of {ran} seeds lost acknowledged writes", failures.len());
    assert!(!failures.is_empty(), "{ran} seeds missed acknowledgements made before fsync");
}

#[test]
fn the_configured_modes_map_to_policies() {
    use crate::config::{Cli, Config};
    let policy = |args: &[&str]| {
        let cli = Cli::try_parse_from([&["strata-node"], args].concat()).unwrap();
        Policy::from_config(&Config::from_cli(cli).unwrap().startup)
    };
    assert_eq!(
        policy(&["--durability", "periodic", "--fsync-interval", "1s"]),
        Policy::Periodic { interval: Duration::from_secs(1) }
    );
    assert_eq!(policy(&["--durability", "sync"]), Policy::Sync);
    assert!(!policy(&[]).journals());
    assert!(policy(&["--durability", "sync"]).ack_waits_for_fsync());
    assert_eq!(
        policy(&["--durability", "write-back"]),
        Policy::WriteBack { max_lag: Duration::from_secs(1), max_bytes: 64 << 20 },
        "the defaults"
    );
    let wb = policy(&["--durability", "write-back", "--write-back-max-lag", "50ms", "--write-back-max-bytes", "1mb"]);
    assert_eq!(wb, Policy::WriteBack { max_lag: Duration::from_millis(50), max_bytes: 1 << 20 });
    assert!(!wb.ack_waits_for_fsync());
    assert_eq!(wb.hold_beyond(), Some((Duration::from_millis(50), 1 << 20)));
}

#[test]
fn periodic_flushes_on_its_own_within_the_interval() {
    let disk = SimDisk::new(9);
    let (log, _) = open_log(&disk, &config(9), 1);
    let gc = GroupCommit::start(log, Policy::Periodic { interval: Duration::from_millis(5) }).unwrap();
    let mut written = BTreeMap::new();
    for i in 0..50 {
        let mut rec = record(0, i);
        let started = Instant::now();
        rec.seq = gc.append(&rec.as_record()).unwrap().0;
        assert!(started.elapsed() < Duration::from_millis(500), "a periodic append waited");
        written.insert(rec.seq, rec);
    }
    let last = *written.keys().last().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while gc.durable_seq() < last {
        assert!(Instant::now() < deadline, "no periodic flush happened");
        std::thread::sleep(Duration::from_millis(1));
    }
    // Nothing asked for a flush: the timer did it. Then a crash keeps it all.
    disk.crash();
    drop(gc);
    disk.reboot();
    let (_, recovered) = open_log(&disk, &config(9), 2);
    assert_eq!(recovered, written);
}

#[test]
fn a_failed_fsync_stops_the_group_commit_and_fails_every_waiter() {
    let disk = SimDisk::new(4);
    let (log, _) = open_log(&disk, &config(4), 1);
    let gc = GroupCommit::start(log, Policy::Sync).unwrap();
    let rec = record(1, 1);
    let seq = gc.append(&rec.as_record()).unwrap().0;
    assert_eq!(gc.wait_durable(seq).unwrap(), seq);
    disk.crash_after(0);
    let seq = gc.append(&rec.as_record()).unwrap().0;
    assert!(gc.wait_durable(seq).is_err());
    disk.reboot();
    assert!(gc.error().is_some());
    assert!(gc.append(&rec.as_record()).is_err());
    assert!(gc.wait_durable(seq + 1).is_err(), "a later waiter must not be left hanging");
}

#[test]
fn shutdown_flushes_what_was_appended_and_none_is_refused() {
    let disk = SimDisk::new(2);
    let (log, _) = open_log(&disk, &config(2), 1);
    assert!(GroupCommit::start(log.clone(), Policy::None).is_err());
    let gc =
        GroupCommit::start(log, Policy::WriteBack { max_lag: Duration::from_secs(3600), max_bytes: u64::MAX }).unwrap();
    let seq = gc.append(&record(2, 2).as_record()).unwrap().0;
    assert!(gc.durable_seq() < seq, "write-back flushed before its lag");
    drop(gc);
    disk.crash();
    disk.reboot();
    let (_, recovered) = open_log(&disk, &config(2), 2);
    assert!(recovered.contains_key(&seq));
}

/// Measures this machine's disk: fdatasync latency per engine, and group
/// commit batch sizes with concurrent producers. Run with:
/// `cargo test -p strata-node --release --lib durability::tests::bench -- --ignored --nocapture`
/// (STRATA_BENCH_DIR picks the directory; default under the target dir).
#[test]
#[ignore]
fn bench_fsync_latency_and_group_commit() {
    use crate::sys::file::AlignedBuf;
    use crate::tier::engine::{EngineChoice, probe};
    use crate::tier::io::{DirVolume, IoOp, Volume, run_blocking};
    let dir = std::env::var("STRATA_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir().join(format!("strata-bench-{}", std::process::id())));
    for choice in [EngineChoice::Threads, EngineChoice::IoUring] {
        let _ = std::fs::remove_dir_all(&dir);
        let Ok((engine, reason)) = probe(choice) else {
            eprintln!("{choice:?}: unavailable");
            continue;
        };
        let volume = Arc::new(DirVolume::open(&dir, true).unwrap());
        eprintln!("== {reason}; {}", volume.direct_reason);
        let f = volume.create("fsync-probe").unwrap();
        let fill =
            (0..64).map(|i| (f.clone(), IoOp::Write { offset: i * 65536, buf: AlignedBuf::zeroed(65536) })).collect();
        run_blocking(&*engine, fill);
        let mut lat = Vec::new();
        for i in 0..300u64 {
            let t = Instant::now();
            let done = run_blocking(
                &*engine,
                vec![
                    (f.clone(), IoOp::Write { offset: (i % 1024) * 4096, buf: AlignedBuf::zeroed(4096) }),
                    (f.clone(), IoOp::Sync),
                ],
            );
            assert!(done.iter().all(|d| d.result.is_ok()));
            lat.push(t.elapsed().as_micros() as u64);
        }
        let percentiles = |lat: &mut Vec<u64>| {
            lat.sort_unstable();
            format!("p50 {} us, p99 {} us", lat[lat.len() / 2], lat[lat.len() * 99 / 100])
        };
        let (mut w, mut y) = (Vec::new(), Vec::new());
        for i in 0..300u64 {
            let t = Instant::now();
            run_blocking(
                &*engine,
                vec![(f.clone(), IoOp::Write { offset: (i % 1024) * 4096, buf: AlignedBuf::zeroed(4096) })],
            );
            w.push(t.elapsed().as_micros() as u64);
            let t = Instant::now();
            run_blocking(&*engine, vec![(f.clone(), IoOp::Sync)]);
            y.push(t.elapsed().as_micros() as u64);
        }
        eprintln!("apart: 4 KiB write {}; fdatasync {}", percentiles(&mut w), percentiles(&mut y));
        lat.sort_unstable();
        eprintln!(
            "4 KiB write + fdatasync: p50 {} us, p90 {} us, p99 {} us, max {} us",
            lat[lat.len() / 2],
            lat[lat.len() * 9 / 10],
            lat[lat.len() * 99 / 100],
            lat[lat.len() - 1]
        );
        let cfg = LogConfig { segment_size: 16 << 20, max_segments: 64, ..LogConfig::default() };
        let (log, _) = SegmentLog::open(volume.clone(), engine.clone(), cfg, |_, _| {}).unwrap();
        let gc = GroupCommit::start(Arc::new(log), Policy::Sync).unwrap();
        for producers in [1u64, 4, 16] {
            let before = (gc.stats().flushes.load(Ordering::Relaxed), gc.stats().records.load(Ordering::Relaxed));
            let t = Instant::now();
            std::thread::scope(|s| {
                for p in 0..producers {
                    let gc = &gc;
                    s.spawn(move || {
                        let mut i = 0;
                        while t.elapsed() < Duration::from_secs(1) {
                            let seq = gc.append(&record(p, i).as_record()).unwrap().0;
                            gc.wait_durable(seq).unwrap();
                            i += 1;
                        }
                    });
                }
            });
            let flushes = gc.stats().flushes.load(Ordering::Relaxed) - before.0;
            let records = gc.stats().records.load(Ordering::Relaxed) - before.1;
            eprintln!(
                "sync, {producers} producers: {:.0} acknowledged writes/s, {flushes} flushes, {:.1} records per flush",
                records as f64 / t.elapsed().as_secs_f64(),
                records as f64 / flushes.max(1) as f64
            );
        }
        eprintln!("worst flush {} us", gc.stats().flush_us_max.load(Ordering::Relaxed));
        drop(gc);
        let _ = volume.sync_dir();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// One acknowledged record: its seq, when it was appended and
/// acknowledged, and the durable seq at the acknowledgement.
type Ack = (u64, Instant, Instant, u64);

/// Appends, riding out a full segment while the I/O thread readies the
/// next one (as the journal does).
fn append_retrying(gc: &GroupCommit, rec: &OwnedRecord) -> u64 {
    loop {
        match gc.append(&rec.as_record()) {
            Ok((seq, _)) => return seq,
            Err(e) if e.kind() == std::io::ErrorKind::StorageFull => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => panic!("append: {e}"),
        }
    }
}

/// A producer as a connection does it: append, then hold the reply while
/// back-pressure says so.
fn produce_with_backpressure(gc: &GroupCommit, producer: u64, n: u64, gap: Duration) -> Vec<Ack> {
    let mut out = Vec::new();
    for i in 0..n {
        let rec = record(producer, i);
        let appended_at = Instant::now();
        let seq = append_retrying(gc, &rec);
        if let Some(target) = gc.backpressure_target() {
            gc.wait_durable(target).unwrap();
        }
        out.push((seq, appended_at, Instant::now(), gc.durable_seq()));
        std::thread::sleep(gap);
    }
    out
}

/// write-back on a slow device: replies wait once the bytes not yet
/// durable pass max-bytes, so the lag at any acknowledgement stays within
/// it (plus the records other producers appended meanwhile).
#[test]
fn write_back_holds_writers_back_at_its_byte_bound() {
    let disk = SimDisk::new(21);
    disk.set_sync_delay(Duration::from_millis(40));
    let (log, _) = open_log(&disk, &config(21), 1);
    let rec_len = crate::tier::record::encoded_len(8, 400) as u64;
    let max_bytes = 20 * rec_len;
    let gc = GroupCommit::start(log, Policy::WriteBack { max_lag: Duration::from_secs(3600), max_bytes }).unwrap();
    const PRODUCERS: u64 = 3;
    let worst = Mutex::new(0u64);
    std::thread::scope(|s| {
        for p in 0..PRODUCERS {
            let (gc, worst) = (&gc, &worst);
            s.spawn(move || {
                for i in 0..150 {
                    let rec = OwnedRecord {
                        value: vec![p as u8; 400],
                        key: format!("k{p}:{i:04}").into_bytes(),
                        ..record(p, i)
                    };
                    let seq = append_retrying(gc, &rec);
                    if let Some(target) = gc.backpressure_target() {
                        gc.wait_durable(target).unwrap();
                    }
                    // Acknowledged: what is not durable yet is the lag.
                    let lag = seq.saturating_sub(gc.durable_seq()) * rec_len;
                    let mut w = worst.lock();
                    *w = (*w).max(lag);
                }
            });
        }
    });
    let worst = *worst.lock();
    let held = gc.stats().held_replies.load(Ordering::Relaxed);
    eprintln!("write-back: worst lag at an ack {worst} bytes (bound {max_bytes}), {held} replies held");
    assert!(worst <= max_bytes + PRODUCERS * rec_len, "lag {worst} past the bound {max_bytes}");
    assert!(held > 0, "a 40 ms fsync never held a writer back");
}

/// write-back on a slow device: the oldest write not yet durable is at
/// most max-lag old when any write is acknowledged.
#[test]
fn write_back_holds_writers_back_at_its_time_bound() {
    let disk = SimDisk::new(22);
    disk.set_sync_delay(Duration::from_millis(150));
    let (log, _) = open_log(&disk, &config(22), 1);
    let max_lag = Duration::from_millis(30);
    let gc = GroupCommit::start(log, Policy::WriteBack { max_lag, max_bytes: u64::MAX / 4 }).unwrap();
    let acks = produce_with_backpressure(&gc, 0, 120, Duration::from_millis(2));
    let appended_at: BTreeMap<u64, Instant> = acks.iter().map(|a| (a.0, a.1)).collect();
    // At each acknowledgement, the oldest record not yet durable (the next
    // after the durable seq) is at most max-lag old (+ scheduling slack).
    let mut worst = Duration::ZERO;
    for &(seq, _, acked, durable) in &acks {
        if durable < seq {
            worst = worst.max(acked - appended_at[&(durable + 1)]);
        }
    }
    let held = gc.stats().held_replies.load(Ordering::Relaxed);
    eprintln!("write-back: {held} replies held; oldest write not durable at an ack: {worst:?} (bound {max_lag:?})");
    assert!(worst <= max_lag + Duration::from_millis(50), "an ack ran {worst:?} ahead of the log");
    assert!(held > 0, "a 150 ms fsync never held a writer back");
}

/// periodic on a device slower than the interval: a crash loses only
/// writes acknowledged within two intervals of one another (writers are
/// held back beyond that), where without back-pressure it would lose a
/// whole slow flush's worth.
#[test]
fn periodic_holds_writers_back_when_a_flush_is_slower_than_the_interval() {
    let disk = SimDisk::new(23);
    disk.set_sync_delay(Duration::from_millis(120));
    let (log, _) = open_log(&disk, &config(23), 1);
    let interval = Duration::from_millis(10);
    let gc = GroupCommit::start(log, Policy::Periodic { interval }).unwrap();
    let acks = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for p in 0..2 {
            let (gc, acks) = (&gc, &acks);
            s.spawn(move || {
                let mine = produce_with_backpressure(gc, p, 100, Duration::from_millis(1));
                acks.lock().extend(mine.into_iter().map(|(seq, _, k, _)| (seq, k, p)));
            });
        }
    });
    let acks = acks.into_inner();
    // Cut the power now: what is not durable is lost.
    disk.crash();
    let held = gc.stats().held_replies.load(Ordering::Relaxed);
    drop(gc);
    disk.reboot();
    let (_, recovered) = open_log(&disk, &config(23), 2);
    let lost: Vec<Instant> = acks.iter().filter(|(seq, ..)| !recovered.contains_key(seq)).map(|(_, k, _)| *k).collect();
    if let (Some(first), Some(last)) = (lost.iter().min(), lost.iter().max()) {
        let spread = *last - *first;
        eprintln!("periodic: {held} replies held; {} acknowledged writes lost over {spread:?}", lost.len());
        assert!(spread <= 2 * interval + Duration::from_millis(60), "lost writes span {spread:?}");
    }
    assert!(held > 0, "a 120 ms fsync never held a writer back at a 10 ms interval");
}

/// Every test hook is read in durability/hooks.rs, where each has an inert
/// twin without the `test-hooks` feature: a hook's variable read anywhere
/// else in node/src would reach release binaries unnoticed.
#[test]
fn test_hooks_are_read_only_behind_the_feature() {
    fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    // Spelled in two pieces so that this file does not find itself.
    let prefix = concat!("STRATA_", "TEST_");
    let elsewhere: Vec<_> = files
        .iter()
        .filter(|f| !f.ends_with("durability/hooks.rs"))
        .filter(|f| std::fs::read_to_string(f).unwrap().contains(prefix))
        .collect();
    assert!(files.len() > 50, "node/src not found: {}", src.display());
    assert!(elsewhere.is_empty(), "{prefix}* outside durability/hooks.rs: {elsewhere:?}");
}
