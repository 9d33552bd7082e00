//! DEBUG and MEMORY: diagnostics of values, memory and worker threads.

use super::Node;
use super::args::{help, lossy, subcommand};
use super::stats::{keyspace_counts, lru_clock, mem_snapshot, ratio};
use super::{CmdError, CmdResult, CommandDef, Ctx, Keys, arg_i64, err, flags};
use crate::base::eq_ic;
use crate::config::values::{Kind, MB, Origin};
use crate::metrics::DbFigures;
use crate::protocol::Reply;
use crate::store::ValueRef;
use smallvec::SmallVec;

const LS: u32 = flags::LOADING | flags::STALE;
const NLS: u32 = flags::NOSCRIPT | LS;

pub const COMMANDS: &[CommandDef] = &[
    CommandDef::new("debug", -2, flags::ADMIN | NLS | flags::PROTECTED, Keys::Custom(debug_keys), debug)
        .acl("@admin @slow @dangerous"),
    CommandDef::new("memory", -2, 0, Keys::All, memory).acl("@slow").subs(MEMORY_SUBS),
];

// ---------------------------------------------------------------------------
// DEBUG
// ---------------------------------------------------------------------------

const DEBUG_HELP: &[&str] = &[
    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "OBJECT <key>",
    "    Show low level info about `key` and associated value.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "BUSY <seconds>",
    "    Keep this worker busy that long, deaf to shutdown, as a huge command would (Strata only).",
    "ACTIVE-THREADS <count>",
    "    Serve from the first <count> worker threads now, moving connections",
    "    as adaptive-threads would (Strata only).",
    "PENDING-DELAY <milliseconds> <key> [<key> ...]",
    "    Make the next command on each key wait that long before it runs, as",
    "    a read from disk would, without holding up other clients (Strata only).",
    "DEMOTE",
    "    Move every value to the disk tier now, keys too where they can go",
    "    (tests: every command then runs on keys on disk) (Strata only).",
    "HELP",
    "    Prints this help.",
];

/// DEBUG OBJECT and PENDING-DELAY lock their keys; other subcommands have none.
fn debug_keys(args: &[&[u8]]) -> SmallVec<[usize; 8]> {
    let mut v = SmallVec::new();
    if args.len() == 3 && eq_ic(args[1], "object") {
        v.push(2);
    } else if args.len() >= 4 && eq_ic(args[1], "pending-delay") {
        v.extend(3..args.len());
    }
    v
}

fn debug(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let sub = args[1];
    if eq_ic(sub, "help") && args.len() == 2 {
        help(out, DEBUG_HELP);
    } else if eq_ic(sub, "sleep") && args.len() == 3 {
        // Like Redis (strtod): a number that does not parse sleeps for 0 s.
        let secs = crate::base::parse_f64(args[2]).unwrap_or(0.0);
        if secs > 0.0 && secs.is_finite() {
            sleep_unless_shutdown(ctx, std::time::Duration::from_secs_f64(secs.min(1e9)));
        }
        out.ok();
    } else if eq_ic(sub, "busy") && args.len() == 3 {
        // A command that keeps its worker for that long and never looks at
        // shutdown: what a huge command on huge data does (tests bound
        // shutdown with it).
        let secs = Kind::Int { min: 0, max: 3600 }.parse(args[2], Origin::ConfigSet);
        let secs = secs.map_err(|e| CmdError::from(format!("ERR {e}")))?.int() as u64;
        let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        while std::time::Instant::now() < until {
            std::hint::spin_loop();
        }
        out.ok();
    } else if eq_ic(sub, "active-threads") && args.len() == 3 {
        let threads = ctx.node.config.startup.threads as i64;
        let n = Kind::Int { min: 1, max: threads }.parse(args[2], Origin::ConfigSet);
        let n = n.map_err(|e| CmdError::from(format!("ERR {e}")))?.int();
        ctx.server.set_active_threads(n as usize);
        out.ok();
    } else if eq_ic(sub, "demote") && args.len() == 2 {
        if ctx.keys.ks.cold().is_none() {
            return Err("ERR no disk tier: start with --max-disk".into());
        }
        let ks = ctx.keys.ks;
        let mut n = 0;
        ctx.keys.for_each_partition(|part| n += part.demote_all(ks));
        out.int(n as i64);
    } else if eq_ic(sub, "pending-delay") && args.len() >= 4 {
        let ms = Kind::Int { min: 0, max: i32::MAX as i64 }.parse(args[2], Origin::ConfigSet);
        let ms = ms.map_err(|e| CmdError::from(format!("ERR {e}")))?.int();
        for key in &args[3..] {
            ctx.keys.delay_next_access(key, ms as u64);
        }
        out.ok();
    } else if eq_ic(sub, "object") && args.len() == 3 {
        let clock = ctx.keys.ks.clock_secs();
        let Some(e) = ctx.keys.peek(args[2]) else {
            return Err(err::NO_SUCH_KEY.into());
        };
        let idle = clock.saturating_sub(e.meta.last_access) as u64;
        let lru = lru_clock().wrapping_sub(idle) & ((1 << 24) - 1);
        let text = format!(
            "Value at:{:p} refcount:1 encoding:{} serializedlength:{} lru:{lru} lru_seconds_idle:{idle}",
            e.key().as_ptr(),
            e.value().encoding(),
            serialized_len(e.value()),
        );
        out.simple(&text);
    } else {
        return Err(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
            lossy(sub)
        )
        .into());
    }
    Ok(())
}

/// Holds the worker for `total` as Redis does, but in short steps, so that a
/// shutdown is not kept waiting for the whole sleep.
fn sleep_unless_shutdown(ctx: &Ctx<'_>, total: std::time::Duration) {
    const STEP: std::time::Duration = std::time::Duration::from_millis(10);
    let deadline = std::time::Instant::now() + total;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || ctx.server.shutting_down() {
            return;
        }
        std::thread::sleep(left.min(STEP));
    }
}

/// An estimate of a value's RDB-serialized size: exact for strings short
/// enough not to be compressed, the in-memory footprint for collections.
fn serialized_len(v: ValueRef<'_>) -> usize {
    match v {
        ValueRef::Str(s) => match crate::base::parse_i64(s) {
            Some(n) if i8::try_from(n).is_ok() => 2,
            Some(n) if i16::try_from(n).is_ok() => 3,
            Some(n) if i32::try_from(n).is_ok() => 5,
            _ => {
                let prefix = match s.len() {
                    0..64 => 1,
                    64..16384 => 2,
                    n if n as u64 <= u32::MAX as u64 => 5,
                    _ => 9,
                };
                prefix + s.len()
            }
        },
        other => other.mem_bytes(),
    }
}

// ---------------------------------------------------------------------------
// MEMORY
// ---------------------------------------------------------------------------

const MEMORY_SUBS: &[&str] = &["usage", "stats", "doctor", "malloc-stats", "purge", "help"];

const MEMORY_HELP: &[&str] = &[
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP",
    "    Prints this help.",
];

fn memory(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    match subcommand("memory", MEMORY_SUBS, args)? {
        "usage" => {
            for pair in args[3..].chunks(2) {
                if pair.len() != 2 || !eq_ic(pair[0], "samples") {
                    return Err(err::SYNTAX.into());
                }
                // Sizes are tracked exactly, so SAMPLES is only validated.
                if arg_i64(pair[1])? < 0 {
                    return Err(err::SYNTAX.into());
                }
            }
            // Like Redis, a plain lookup: no expiry check, no statistics.
            let (key, db) = (args[2], ctx.keys.db);
            let idx = ctx.keys.ks.partition_of_key(key);
            let ks = ctx.keys.ks;
            let mem = ctx.keys.with_partition(idx, |part| {
                part.recall_key(ks, db, key);
                part.find_entry(db, key).map(|e| e.usage())
            });
            match mem {
                Some(bytes) => out.int(bytes as i64),
                None => out.null(),
            }
        }
        "stats" => memory_stats(ctx, out),
        "doctor" => out.verbatim(memory_doctor(ctx.node).as_bytes()),
        "malloc-stats" => out.bulk(b"Stats not supported for the current allocator"),
        "purge" => {
            crate::sys::alloc::purge();
            out.ok();
        }
        _ => help(out, MEMORY_HELP),
    }
    Ok(())
}

fn memory_stats(ctx: &mut Ctx<'_>, out: &mut Reply) {
    use crate::store::entry::EXPIRY_BYTES;
    let m = mem_snapshot(ctx.node);
    let counts = keyspace_counts(ctx);
    let startup = m.used.saturating_sub(m.dataset + m.clients);
    let keys: u64 = counts.iter().map(|c| c.keys).sum();
    let dbs: Vec<(usize, &DbFigures)> = counts.iter().enumerate().filter(|(_, c)| c.keys > 0).collect();
    let net = m.used.saturating_sub(startup);
    let int = |out: &mut Reply, name: &str, v: u64| {
        out.bulk(name.as_bytes());
        out.int(v as i64);
    };
    out.map(19 + dbs.len());
    int(out, "peak.allocated", m.peak);
    int(out, "total.allocated", m.used);
    int(out, "startup.allocated", startup);
    int(out, "replication.backlog", 0);
    int(out, "clients.slaves", 0);
    int(out, "clients.normal", m.clients);
    int(out, "cluster.links", 0);
    int(out, "aof.buffer", 0);
    int(out, "lua.caches", 0);
    int(out, "functions.caches", 0);
    for (db, c) in &dbs {
        out.bulk(format!("db.{db}").as_bytes());
        out.map(2);
        int(out, "overhead.hashtable.main", c.index_bytes);
        int(out, "overhead.hashtable.expires", c.expires * EXPIRY_BYTES as u64);
    }
    int(out, "overhead.total", m.used.saturating_sub(m.dataset));
    int(out, "keys.count", keys);
    int(out, "keys.bytes-per-key", net.checked_div(keys).unwrap_or(0));
    int(out, "dataset.bytes", m.dataset);
    out.bulk(b"dataset.percentage");
    out.double(ratio(m.dataset, net) * 100.0);
    out.bulk(b"peak.percentage");
    out.double(ratio(m.used, m.peak) * 100.0);
    out.bulk(b"fragmentation");
    out.double(ratio(m.rss, m.used));
    int(out, "fragmentation.bytes", m.rss.saturating_sub(m.used));
    int(out, "rss.bytes", m.rss);
}

/// MEMORY DOCTOR: Redis's report, for the issues that can arise here.
fn memory_doctor(node: &Node) -> String {
    let m = mem_snapshot(node);
    if m.used < 5 * MB {
        return "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in \
                these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and \
                I will be back to our programming as soon as I finished rebooting.\n"
            .into();
    }
    let mut issues = String::new();
    if ratio(m.peak, m.used) > 1.5 {
        issues.push_str(
            " * Peak memory: In the past this instance used more than 150% the memory that is currently using. The \
             allocator is normally not able to release memory after a peak, so you can expect to see a big \
             fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the \
             Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as \
             soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want \
             to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to \
             shutdown and restart the instance.\n\n",
        );
    }
    if ratio(m.rss, m.used) > 1.4 && m.rss.saturating_sub(m.used) > 10 * MB {
        issues.push_str(
            " * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this \
             means that the Resident Set Size of the Redis process is much larger than the sum of the logical \
             allocations Redis performed). This problem is usually due either to a large peak memory (check if \
             there is a peak memory entry above in the report) or may result from a workload that causes the \
             allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue.\n\n",
        );
    }
    if issues.is_empty() {
        return "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this \
                base.\n"
            .into();
    }
    format!(
        "Sam, I detected a few issues in this Redis instance memory implants:\n\n{issues}I'm here to keep you safe, \
         Sam. I want to help you.\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialized_lengths_of_strings() {
        assert_eq!(serialized_len(ValueRef::Str(b"12345")), 3);
        assert_eq!(serialized_len(ValueRef::Str(b"7")), 2);
        assert_eq!(serialized_len(ValueRef::Str(b"hello")), 6);
    }
}
