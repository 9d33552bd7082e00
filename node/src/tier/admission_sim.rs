//! A trace-driven model of RAM over the cold tier, to choose the
//! `tier-admission` default: RAM is the policy module's own table and
//! policy (allkeys-lru, a byte budget); the disk is a log of a byte budget
//! whose oldest records go first (the cleaner under pressure evicts what
//! it cannot move). Under `frequent`, a victim the policy saw used once or
//! never ([`crate::policy::hits_hint`]) is dropped instead of written while
//! the disk evicted a live record within the last `PRESSURE_WINDOW`
//! requests. Reports hit ratios (RAM, disk) and bytes written to disk.
//!
//! `STRATA_TRACES=/work/shared/traces cargo test -p strata-node --lib
//! admission_sim -- --ignored --nocapture`
//!
//! What it gave (RAM and disk as shares of the trace's footprint; hit
//! ratio all → frequent, bytes written all → frequent):
//!
//! | trace | RAM / disk | hits | written |
//! |---|---|---|---|
//! | cloudPhysicsIO | 1 % / 5 % | 0.178 → 0.182 | 4259 → 104 MB |
//! | cloudPhysicsIO | 1 % / 20 % | 0.254 → 0.225 | 4259 → 408 MB |
//! | cloudPhysicsIO | 5 % / 50 % | 0.369 → 0.313 | 4133 → 1017 MB |
//! | P3 | 1 % / 20 % | 0.442 → 0.056 | 1968 → 81 MB |
//! | P3 | 5 % / 50 % | 0.646 → 0.147 | 1887 → 205 MB |
//!
//! `frequent` writes 4–40 times less but, except with the smallest disk,
//! loses much of the disk's hits: a value's reuse mostly comes after it
//! left RAM, where the counter cannot see it. Hence the default `all`;
//! `frequent` is for disks whose write budget (endurance, bandwidth)
//! matters more than hits.

use crate::policy::sim::SimTable;
use crate::policy::trace::Format;
use crate::policy::{AnyPolicy, Clock, Entries, Hits, Policy, PolicyKind, hits_hint};
use std::collections::{HashMap, VecDeque};

/// Requests the disk counts as full of live data after evicting one.
const PRESSURE_WINDOW: u64 = 10_000;
const REQUESTS_PER_SEC: u64 = 1000;

#[derive(Debug, Default)]
struct Outcome {
    requests: u64,
    ram_hits: u64,
    disk_hits: u64,
    written: u64,
    refused: u64,
}

fn run(trace: &[crate::policy::trace::Request], ram: u64, disk: u64, frequent: bool) -> Outcome {
    let mut policy = AnyPolicy::with_seed(PolicyKind::AllKeysLru, 1);
    let mut table = SimTable::default();
    // The log: (id, generation) oldest first; what each id holds now.
    let mut log: VecDeque<(u64, u64, u32)> = VecDeque::new();
    let mut on_disk: HashMap<u64, u64> = HashMap::new();
    let (mut disk_bytes, mut generation, mut pressured_until) = (0u64, 0u64, 0u64);
    let mut rng = crate::policy::SplitMix::new(7);
    let mut out = Outcome::default();
    for (i, req) in trace.iter().enumerate() {
        let i = i as u64;
        let clock = Clock::at((i / REQUESTS_PER_SEC) as u32);
        out.requests += 1;
        if let Some(slot) = table.get(req.id) {
            out.ram_hits += 1;
            policy.on_access(&mut table, slot, &clock);
            continue;
        }
        // A value read back from disk leaves it (its record dies).
        let from_disk = on_disk.remove(&req.id).is_some();
        out.disk_hits += u64::from(from_disk);
        let size = u64::from(req.size);
        if size > ram {
            continue;
        }
        while table.bytes() + size > ram {
            let Some((_, slot)) = policy.candidate(&mut table, 5, &clock, &mut || rng.next_u64()) else { break };
            let hits = hits_hint(table.state(slot));
            let (id, vsize) = (table.id(slot), table.size(slot) as u32);
            table.remove(slot, &mut policy);
            if frequent && hits != Hits::Many && i < pressured_until {
                out.refused += 1;
                continue;
            }
            generation += 1;
            on_disk.insert(id, generation);
            log.push_back((id, generation, vsize));
            disk_bytes += u64::from(vsize);
            out.written += u64::from(vsize);
            while disk_bytes > disk {
                let (old, g, s) = log.pop_front().expect("bytes in the log");
                disk_bytes -= u64::from(s);
                if on_disk.get(&old) == Some(&g) {
                    on_disk.remove(&old);
                    pressured_until = i + PRESSURE_WINDOW;
                }
            }
        }
        // A miss is a SET of a new key (no access counted); a disk hit is
        // a promotion and the read that caused it.
        let slot = table.insert(req.id, req.size, 0, &mut policy, &clock);
        if from_disk {
            policy.on_access(&mut table, slot, &clock);
        }
    }
    out
}

fn load(path: &std::path::Path) -> Vec<crate::policy::trace::Request> {
    let (format, zstd) = Format::of_path(path);
    let file = std::fs::File::open(path).expect("trace");
    let reader: Box<dyn std::io::Read> =
        if zstd { Box::new(ruzstd::decoding::StreamingDecoder::new(file).expect("zstd")) } else { Box::new(file) };
    format.read(std::io::BufReader::new(reader)).expect("a trace")
}

#[test]
#[ignore = "a measurement: needs STRATA_TRACES"]
fn admission_sim() {
    let Ok(dir) = std::env::var("STRATA_TRACES") else { return };
    for name in ["cloudPhysicsIO.oracleGeneral.bin", "P3.lis.zst"] {
        let trace = load(&std::path::Path::new(&dir).join(name));
        let footprint = crate::policy::trace::footprint(&trace).bytes;
        for (ram_pct, disk_pct) in [(1, 5), (1, 20), (5, 20), (5, 50)] {
            let (ram, disk) = (footprint * ram_pct / 100, footprint * disk_pct / 100);
            for frequent in [false, true] {
                let o = run(&trace, ram, disk, frequent);
                let r = o.requests as f64;
                println!(
                    "{name} ram {ram_pct}% disk {disk_pct}% {}: hits {:.4} (ram {:.4} disk {:.4}) written {:.1} MB, \
                     refused {}",
                    if frequent { "frequent" } else { "all     " },
                    (o.ram_hits + o.disk_hits) as f64 / r,
                    o.ram_hits as f64 / r,
                    o.disk_hits as f64 / r,
                    o.written as f64 / 1e6,
                    o.refused
                );
            }
        }
    }
}
