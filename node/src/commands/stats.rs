//! Figures several server commands report: clocks, memory and per-database
//! key counts (INFO, MEMORY, LASTSAVE, TIME, DEBUG OBJECT).

use super::Ctx;
use super::Node;
use crate::metrics::DbFigures;
use crate::store::NUM_DBS;
pub use crate::sys::clock::{unix_micros, unix_secs};

/// Unix time (s) the server started: LASTSAVE and rdb_last_save_time.
pub fn start_time(node: &Node) -> u64 {
    (unix_micros().saturating_sub(node.uptime().as_micros()) / 1_000_000) as u64
}

/// Redis's 24-bit LRU clock (seconds resolution).
pub fn lru_clock() -> u64 {
    unix_secs() & ((1 << 24) - 1)
}

pub fn total_system_memory() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kb = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next().and_then(|kb| kb.parse::<u64>().ok()));
    kb.unwrap_or(0) * 1024
}

/// Memory figures shared by INFO memory, MEMORY STATS and MEMORY DOCTOR.
pub struct MemSnapshot {
    pub used: u64,
    pub peak: u64,
    pub dataset: u64,
    pub clients: u64,
    pub rss: u64,
}

pub fn mem_snapshot(node: &Node) -> MemSnapshot {
    let used = node.used_memory();
    let peak = node.memory.note_peak(used);
    MemSnapshot {
        used,
        peak,
        dataset: node.ks.used_memory().max(0) as u64,
        clients: node.memory.connection_bytes(),
        rss: crate::sys::process::rss_bytes(),
    }
}

pub fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// Key and TTL counts of every database, from held partitions inside
/// EXEC or one partition at a time otherwise.
pub fn keyspace_counts(ctx: &mut Ctx<'_>) -> [DbFigures; NUM_DBS] {
    let now = ctx.keys.now_ms;
    let mut counts = [DbFigures::default(); NUM_DBS];
    ctx.keys.for_each_partition(|part| part.add_db_figures(now, &mut counts));
    counts
}

/// Keys of every hash slot, indexed by slot: one visit per partition, the
/// held ones inside EXEC as `keyspace_counts`.
pub fn slot_key_counts(ctx: &mut Ctx<'_>) -> Vec<u32> {
    let mut counts = vec![0; crate::base::slot::SLOTS];
    ctx.keys.for_each_partition(|part| part.write_slot_keys(&mut counts));
    counts
}
