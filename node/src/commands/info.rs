//! INFO and its sections.

use super::stats::{keyspace_counts, lru_clock, ratio, slot_key_counts, start_time, total_system_memory, unix_micros};
use super::{CmdResult, CommandDef, Ctx, Keys, Node, REDIS_VERSION, ServerControl, flags};
use crate::base::eq_ic;
use crate::config::values::{absolute_path, yes_no};
use crate::metrics::Snapshot;
use crate::protocol::Reply;
use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

const LS: u32 = flags::LOADING | flags::STALE;

pub const COMMANDS: &[CommandDef] = &[CommandDef::new("info", -1, LS, Keys::All, info).acl("@slow @dangerous")];

/// Every section, in output order.
const ALL_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
    "tier",
    "clusterstats",
    "tls",
];

/// Sections INFO leaves out unless asked for by name, `all` or `everything`.
const NOT_DEFAULT: &[&str] = &["commandstats", "latencystats"];

fn default_sections() -> impl Iterator<Item = &'static str> {
    ALL_SECTIONS.iter().copied().filter(|s| !NOT_DEFAULT.contains(s))
}

fn info(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let mut wanted: Vec<&str> = Vec::new();
    if args.len() == 1 {
        wanted.extend(default_sections());
    }
    for a in &args[1..] {
        if eq_ic(a, "default") {
            wanted.extend(default_sections());
        } else if eq_ic(a, "all") || eq_ic(a, "everything") {
            wanted.extend(ALL_SECTIONS);
        } else if let Some(s) = ALL_SECTIONS.iter().find(|s| eq_ic(a, s)) {
            wanted.push(s);
        }
    }
    // One reading of every figure, the same `/metrics` renders.
    let keyspace = if wanted.contains(&"keyspace") { keyspace_counts(ctx) } else { Default::default() };
    let mut snap = ctx.server.snapshot(keyspace);
    if let Some(c) = snap.cluster.as_mut().filter(|_| wanted.contains(&"clusterstats")) {
        c.set_top_slots(&slot_key_counts(ctx));
    }
    let mut text = String::with_capacity(4096);
    // Cluster mode's own figures exist only in cluster mode.
    // So do TLS's, with a TLS port.
    let shown = |s: &&&str| {
        wanted.contains(s) && (**s != "clusterstats" || snap.cluster.is_some()) && (**s != "tls" || snap.tls.is_some())
    };
    for section in ALL_SECTIONS.iter().filter(shown) {
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        write_section(ctx.node, ctx.server, &snap, section, &mut text);
    }
    out.verbatim(text.as_bytes());
    Ok(())
}

/// Appends `name:value\r\n` to an INFO text.
macro_rules! field {
    ($out:expr, $name:expr, $($arg:tt)*) => {{
        let _ = write!($out, "{}:", $name);
        let _ = write!($out, $($arg)*);
        $out.push_str("\r\n");
    }};
}

fn write_section(node: &Node, server: &dyn ServerControl, snap: &Snapshot, section: &str, t: &mut String) {
    let title = match section {
        "cpu" => "CPU".to_string(),
        s => format!("{}{}", s[..1].to_ascii_uppercase(), &s[1..]),
    };
    let _ = write!(t, "# {title}\r\n");
    match section {
        "server" => info_server(node, server, snap, t),
        "clients" => info_clients(node, snap, t),
        "memory" => info_memory(node, snap, t),
        "persistence" => info_persistence(node, snap, t),
        "stats" => info_stats(node, snap, t),
        "replication" => info_replication(server, t),
        "cpu" => info_cpu(t),
        "commandstats" => info_commandstats(snap, t),
        "latencystats" => info_latencystats(node, snap, t),
        "errorstats" => {
            for (prefix, count) in &snap.errors {
                let _ = write!(t, "errorstat_{prefix}:count={count}\r\n");
            }
        }
        "cluster" => match node.cluster.as_ref() {
            None => field!(t, "cluster_enabled", "0"),
            Some(c) => {
                field!(t, "cluster_enabled", "1");
                // Strata's own: the topology epoch this node has applied (0: none yet).
                field!(t, "cluster_current_epoch", "{}", c.epoch());
            }
        },
        "keyspace" => info_keyspace(snap, t),
        "tier" => info_tier(snap, t),
        "clusterstats" => info_clusterstats(snap, t),
        "tls" => info_tls(snap, t),
        // modules: there are none.
        _ => {}
    }
}

fn info_server(node: &Node, server: &dyn ServerControl, snap: &Snapshot, t: &mut String) {
    let sc = &node.config.startup;
    let uptime = snap.uptime.as_secs();
    field!(t, "redis_version", "{REDIS_VERSION}");
    field!(t, "strata_version", "{}", env!("CARGO_PKG_VERSION"));
    field!(t, "redis_git_sha1", "00000000");
    field!(t, "redis_git_dirty", "0");
    field!(t, "redis_build_id", "0");
    field!(t, "redis_mode", "standalone");
    field!(t, "os", "{}", crate::sys::process::uname());
    field!(t, "arch_bits", "{}", usize::BITS);
    field!(t, "monotonic_clock", "POSIX clock_gettime");
    field!(t, "multiplexing_api", "epoll");
    field!(t, "process_id", "{}", std::process::id());
    field!(t, "process_supervised", "no");
    field!(t, "run_id", "{}", server.run_id());
    field!(t, "tcp_port", "{}", server.tcp_port());
    field!(t, "server_time_usec", "{}", unix_micros());
    field!(t, "uptime_in_seconds", "{uptime}");
    field!(t, "uptime_in_days", "{}", uptime / 86400);
    field!(t, "hz", "10");
    field!(t, "configured_hz", "10");
    field!(t, "lru_clock", "{}", lru_clock());
    let exe = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default();
    field!(t, "executable", "{exe}");
    let conf = sc.config_file.as_deref().map(absolute_path).unwrap_or_default();
    field!(t, "config_file", "{conf}");
    field!(t, "io_threads_active", "0");
    field!(t, "strata_threads", "{}", sc.threads);
    field!(t, "strata_adaptive_threads", "{}", yes_no(snap.adaptive_threads));
    field!(t, "strata_active_threads", "{}", snap.active_threads);
    field!(t, "strata_connection_migrations", "{}", snap.connection_migrations);
    field!(t, "strata_thread_growths_kept", "{}", snap.growths_kept);
    field!(t, "strata_thread_growths_undone", "{}", snap.growths_undone);
}

fn info_clients(node: &Node, snap: &Snapshot, t: &mut String) {
    let c = &snap.clients;
    field!(t, "connected_clients", "{}", c.connected);
    field!(t, "cluster_connections", "0");
    field!(t, "maxclients", "{}", node.config.runtime.maxclients.load(Relaxed));
    field!(t, "client_recent_max_input_buffer", "{}", c.max_input_buffer);
    field!(t, "client_recent_max_output_buffer", "{}", c.max_output_buffer);
    field!(t, "blocked_clients", "{}", c.blocked);
    field!(t, "tracking_clients", "{}", node.tracking.clients());
}

/// Redis's `bytesToHuman`.
fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["K", "M", "G", "T", "P"];
    if n < 1024 {
        return format!("{n}B");
    }
    let mut d = n as f64 / 1024.0;
    for unit in UNITS {
        if d < 1024.0 {
            return format!("{d:.2}{unit}");
        }
        d /= 1024.0;
    }
    format!("{n}B")
}

fn info_memory(node: &Node, snap: &Snapshot, t: &mut String) {
    let m = &snap.memory;
    let max = m.max;
    let total = total_system_memory();
    field!(t, "used_memory", "{}", m.used);
    field!(t, "used_memory_human", "{}", human_bytes(m.used));
    field!(t, "used_memory_rss", "{}", m.rss);
    field!(t, "used_memory_rss_human", "{}", human_bytes(m.rss));
    field!(t, "used_memory_peak", "{}", m.peak);
    field!(t, "used_memory_peak_human", "{}", human_bytes(m.peak));
    field!(t, "used_memory_peak_perc", "{:.2}%", ratio(m.used, m.peak) * 100.0);
    field!(t, "used_memory_overhead", "{}", m.used.saturating_sub(m.keyspace));
    field!(t, "used_memory_dataset", "{}", m.keyspace);
    field!(t, "used_memory_dataset_perc", "{:.2}%", ratio(m.keyspace, m.used) * 100.0);
    field!(t, "total_system_memory", "{total}");
    field!(t, "total_system_memory_human", "{}", human_bytes(total));
    field!(t, "maxmemory", "{max}");
    field!(t, "maxmemory_human", "{}", human_bytes(max));
    field!(t, "maxmemory_policy", "{}", node.config.runtime.policy_name());
    let lua = node.scripts.memory();
    field!(t, "used_memory_lua", "{}", lua.vm);
    field!(t, "used_memory_lua_human", "{}", human_bytes(lua.vm));
    field!(t, "used_memory_scripts_eval", "{}", lua.scripts_bytes);
    field!(t, "number_of_cached_scripts", "{}", lua.scripts);
    field!(t, "number_of_functions", "{}", lua.functions);
    field!(t, "used_memory_functions", "{}", lua.functions_bytes);
    field!(t, "used_memory_scripts", "{}", lua.scripts_bytes + lua.functions_bytes);
    field!(t, "used_memory_scripts_human", "{}", human_bytes(lua.scripts_bytes + lua.functions_bytes));
    // As Redis 7 splits it: fragmentation inside the allocator's pages,
    // pages it keeps resident, and the process beyond the allocator.
    let a = &m.allocator;
    field!(t, "allocator_allocated", "{}", a.allocated);
    field!(t, "strata_allocator_thread_cached", "{}", a.thread_cached);
    field!(t, "allocator_active", "{}", a.active);
    field!(t, "allocator_resident", "{}", a.resident);
    field!(t, "allocator_frag_ratio", "{:.2}", ratio(a.active, a.allocated));
    field!(t, "allocator_frag_bytes", "{}", a.active as i64 - a.allocated as i64);
    field!(t, "allocator_rss_ratio", "{:.2}", ratio(a.resident, a.active));
    field!(t, "allocator_rss_bytes", "{}", a.resident as i64 - a.active as i64);
    field!(t, "rss_overhead_ratio", "{:.2}", ratio(m.rss, a.resident));
    field!(t, "rss_overhead_bytes", "{}", m.rss as i64 - a.resident as i64);
    field!(t, "mem_fragmentation_ratio", "{:.2}", ratio(m.rss, m.used));
    field!(t, "mem_fragmentation_bytes", "{}", m.rss as i64 - m.used as i64);
    // The logs' and a migration's buffers, as Redis its AOF buffer: in
    // used_memory, not compared with maxmemory.
    field!(t, "mem_not_counted_for_evict", "{}", m.journal_buffers + m.cold_buffers + m.migration_buffers);
    field!(t, "mem_clients_slaves", "0");
    field!(t, "mem_clients_normal", "{}", m.connections);
    field!(t, "mem_aof_buffer", "{}", m.journal_buffers);
    field!(t, "strata_mem_cold_tier_buffer", "{}", m.cold_buffers);
    field!(t, "strata_mem_migration_buffer", "{}", m.migration_buffers);
    field!(t, "mem_allocator", "{}", crate::sys::alloc::name());
    let huge = &snap.hugepages;
    field!(t, "hugepages_setting", "{}", huge.setting.name());
    field!(t, "hugepages_bytes", "{}", huge.bytes);
    field!(t, "hugepages_bytes_human", "{}", human_bytes(huge.bytes));
    field!(t, "hugepages_fallbacks", "{}", huge.fallbacks);
    field!(t, "lazyfree_pending_objects", "0");
    field!(t, "lazyfreed_objects", "0");
    field!(t, "active_defrag_running", "{}", m.defrag_running as u8);
}

/// Redis's RDB and AOF fields after the save time, as a node without them
/// reports them: nothing in progress, nothing ever failed.
const NO_RDB_AOF: &[(&str, &str)] = &[
    ("rdb_last_bgsave_status", "ok"),
    ("rdb_last_bgsave_time_sec", "-1"),
    ("rdb_current_bgsave_time_sec", "-1"),
    ("rdb_saves", "0"),
    ("aof_enabled", "0"),
    ("aof_rewrite_in_progress", "0"),
    ("aof_rewrite_scheduled", "0"),
    ("aof_last_rewrite_time_sec", "-1"),
    ("aof_current_rewrite_time_sec", "-1"),
    ("aof_last_bgrewrite_status", "ok"),
    ("aof_rewrites", "0"),
    ("aof_last_write_status", "ok"),
];

/// Redis's fields of a load in progress, from the replay's progress (the
/// bytes of the log's segments in use: there is no RDB, so
/// loading_rdb_used_mem is 0); the percentage and ETA as Redis computes them.
fn loading_fields(p: &crate::metrics::snapshot::LoadingFigures, now_secs: u64, t: &mut String) {
    let loaded = p.loaded_bytes.min(p.total_bytes);
    let (perc, remaining) = match p.total_bytes {
        0 => (0.0, 1),
        total => (loaded as f64 / total as f64 * 100.0, total - loaded),
    };
    let elapsed = now_secs.saturating_sub(p.start_time);
    let eta = if elapsed == 0 { 1 } else { (elapsed as u128 * remaining as u128 / (loaded as u128 + 1)) as u64 };
    field!(t, "loading_start_time", "{}", p.start_time);
    field!(t, "loading_total_bytes", "{}", p.total_bytes);
    field!(t, "loading_rdb_used_mem", "0");
    field!(t, "loading_loaded_bytes", "{loaded}");
    field!(t, "loading_loaded_perc", "{perc:.2}");
    field!(t, "loading_eta_seconds", "{eta}");
}

fn info_persistence(node: &Node, snap: &Snapshot, t: &mut String) {
    // There is no RDB or AOF; `loading` is the replay of the durability log.
    let loading = snap.durability.as_ref().is_some_and(|d| d.loading);
    field!(t, "loading", "{}", loading as u8);
    for name in ["async_loading", "rdb_changes_since_last_save", "rdb_bgsave_in_progress"] {
        field!(t, name, "0");
    }
    field!(t, "rdb_last_save_time", "{}", start_time(node));
    for (name, value) in NO_RDB_AOF {
        field!(t, name, "{value}");
    }
    if let Some(d) = snap.durability.as_ref().filter(|d| d.loading) {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        loading_fields(&d.loading_progress, now, t);
    }
    // Strata's own: the durability mode asked for, and what this build does.
    field!(t, "strata_durability", "{}", node.config.startup.durability.name());
    let Some(d) = &snap.durability else {
        field!(t, "strata_durability_effective", "none");
        return;
    };
    field!(t, "strata_durability_effective", "{}", node.config.startup.durability.name());
    field!(t, "strata_io_engine", "{}", d.engine);
    let r = &d.recovery;
    field!(t, "strata_recovery_duration_ms", "{}", r.duration_ms);
    field!(t, "strata_recovery_records", "{}", r.records);
    field!(t, "strata_recovery_bytes", "{}", r.bytes);
    field!(t, "strata_recovery_keys", "{}", r.keys);
    field!(t, "strata_recovery_evicted_keys", "{}", r.evicted);
    field!(t, "strata_recovery_skipped_runs", "{}", r.bad_runs);
    field!(t, "strata_recovery_skipped_bytes", "{}", r.skipped_bytes);
    field!(t, "strata_recovery_torn_bytes", "{}", r.torn_bytes);
    field!(t, "strata_recovery_bad_values", "{}", r.bad_values);
    field!(t, "strata_log_compactions", "{}", d.compactions);
    if d.loading {
        return;
    }
    field!(t, "strata_log_durable_seq", "{}", d.durable_seq);
    field!(t, "strata_log_appended_seq", "{}", d.appended_seq);
    field!(t, "strata_log_segments", "{}", d.segments);
    field!(t, "strata_fsyncs", "{}", d.flushes);
    field!(t, "strata_fsync_records", "{}", d.flushed_records);
    field!(t, "strata_group_commit_max", "{}", d.max_batch);
    // Quantiles of the histograms /metrics exports (strata_group_commit_records,
    // strata_log_fsync_duration_seconds), interpolated as histogram_quantile does,
    // but never past the largest seen (interpolation in a doubling bucket can be).
    let batch = |q| d.batch_sizes.quantile(q).min(d.max_batch);
    field!(t, "strata_group_commit_p50", "{}", batch(0.5));
    field!(t, "strata_group_commit_p99", "{}", batch(0.99));
    field!(t, "strata_fsync_avg_us", "{}", d.flush_us_total.checked_div(d.flushes).unwrap_or(0));
    let fsync_us = |q| d.flush_latency.quantile_us(q).min(d.flush_us_max as f64);
    field!(t, "strata_fsync_p50_us", "{:.0}", fsync_us(0.5));
    field!(t, "strata_fsync_p99_us", "{:.0}", fsync_us(0.99));
    field!(t, "strata_fsync_max_us", "{}", d.flush_us_max);
    field!(t, "strata_durability_lag_us", "{}", d.lag_us);
    field!(t, "strata_durability_lag_bytes", "{}", d.lag_bytes);
    field!(t, "strata_durability_held_replies", "{}", d.held_replies);
    let sc = &node.config.startup;
    match sc.durability {
        crate::config::Durability::WriteBack => {
            field!(t, "strata_write_back_max_lag_us", "{}", sc.write_back_max_lag_us);
            field!(t, "strata_write_back_max_bytes", "{}", sc.write_back_max_bytes);
        }
        crate::config::Durability::Periodic => field!(t, "strata_fsync_interval_us", "{}", sc.fsync_interval_us),
        _ => {}
    }
}

/// Strata's own section: the cold tier (values demoted to disk).
fn info_tier(snap: &Snapshot, t: &mut String) {
    let Some(f) = snap.tier else {
        field!(t, "tier_enabled", "0");
        return;
    };
    field!(t, "tier_enabled", "1");
    field!(t, "tier_io_engine", "{}", f.engine);
    field!(t, "tier_disk_keys", "{}", f.disk_keys);
    field!(t, "tier_keyless_keys", "{}", f.forgotten_keys);
    field!(t, "tier_keyless_index_bytes", "{}", f.forgotten_index_bytes);
    field!(t, "tier_keys_forgotten", "{}", f.forgets);
    field!(t, "tier_keys_recalled", "{}", f.recalls);
    field!(t, "tier_demoted", "{}", f.demoted);
    field!(t, "tier_demoted_bytes", "{}", f.demoted_bytes);
    field!(t, "tier_promoted", "{}", f.promoted);
    field!(t, "tier_served_once", "{}", f.served_once);
    field!(t, "tier_reads", "{}", f.reads);
    field!(t, "tier_shared_reads", "{}", f.shared_reads);
    field!(t, "tier_sync_reads", "{}", f.sync_reads);
    field!(t, "tier_batch_reads", "{}", f.batch_reads);
    field!(t, "tier_read_errors", "{}", f.read_errors);
    field!(t, "tier_disk_reads", "{}", f.disk_reads);
    field!(t, "tier_buffer_reads", "{}", f.staged_reads);
    field!(t, "tier_aio_reads_retried", "{}", f.aio_reads_retried);
    field!(t, "tier_read_ahead_reads", "{}", f.ahead_reads);
    field!(t, "tier_reads_in_flight", "{}", f.reads_in_flight);
    field!(t, "tier_reads_in_flight_peak", "{}", f.reads_in_flight_peak);
    // Where a cold read's time goes (the stages of /metrics'
    // strata_tier_read_stage_duration_seconds).
    for (stage, h) in [
        ("device_read", &f.read_latency),
        ("queue", &f.read_queue_latency),
        ("device", &f.read_device_latency),
        ("wake", &f.read_wake_latency),
    ] {
        field!(t, format_args!("tier_{stage}_p50_usec"), "{:.0}", h.quantile_us(0.5));
        field!(t, format_args!("tier_{stage}_p99_usec"), "{:.0}", h.quantile_us(0.99));
    }
    field!(t, "tier_evicted_disk_keys", "{}", f.evicted_disk_keys);
    field!(t, "tier_refused", "{}", f.refused);
    field!(t, "tier_deferred", "{}", f.deferred);
    field!(t, "tier_disk_bytes", "{}", f.disk_bytes);
    field!(t, "tier_max_disk_bytes", "{}", f.max_disk_bytes);
    field!(t, "tier_written_bytes", "{}", f.written_bytes);
    field!(t, "tier_dead_bytes", "{}", f.dead_bytes);
    field!(t, "tier_cleaned_segments", "{}", f.cleaned_segments);
    field!(t, "tier_moved_records", "{}", f.moved_records);
    field!(t, "tier_segment_reads", "{}", f.segment_reads);
    field!(t, "tier_freed_unread_segments", "{}", f.freed_unread_segments);
    field!(t, "tier_not_admitted", "{}", f.not_admitted);
    // Read commands on keys, by where their values came from (the same
    // histograms as /metrics' strata_read_command_duration_seconds).
    for (tier, h) in [("ram", &snap.reads.ram), ("disk", &snap.reads.disk)] {
        field!(t, format_args!("tier_{tier}_read_commands"), "{}", h.count());
        field!(t, format_args!("tier_{tier}_read_p50_usec"), "{:.3}", h.quantile_ns(0.5) / 1e3);
        field!(t, format_args!("tier_{tier}_read_p99_usec"), "{:.3}", h.quantile_ns(0.99) / 1e3);
    }
}

/// Strata's own section with a TLS port: clients, failed handshakes and
/// the certificate (when it expires, how often it was reloaded).
fn info_tls(snap: &Snapshot, t: &mut String) {
    let Some(s) = &snap.tls else { return };
    field!(t, "tls_port", "{}", s.port);
    field!(t, "tls_connected_clients", "{}", s.connections);
    field!(t, "tls_handshake_failures", "{}", s.handshake_failures);
    field!(t, "tls_cert_reloads", "{}", s.reloads);
    field!(t, "tls_cert_reload_failures", "{}", s.reload_failures);
    field!(t, "tls_cert_expires", "{}", crate::base::time::iso8601(s.cert_not_after));
    field!(t, "tls_cert_expire_time", "{}", s.cert_not_after);
    let left = if s.cert_not_after == 0 { 0 } else { s.cert_not_after - crate::store::now_ms() as i64 / 1000 };
    field!(t, "tls_cert_expires_in_seconds", "{left}");
}

/// Strata's own section in cluster mode (`# Cluster` stays Redis's): the
/// topology applied, requests forwarded for plain clients, MOVED replies,
/// and the slots holding the most keys (`slot=keys`, most first).
fn info_clusterstats(snap: &Snapshot, t: &mut String) {
    let Some(c) = &snap.cluster else { return };
    field!(t, "cluster_topology_epoch", "{}", c.epoch);
    field!(t, "cluster_slots_owned", "{}", c.slots_owned);
    field!(t, "cluster_slots_covered", "{}", c.slots_covered);
    field!(t, "cluster_nodes", "{}", c.nodes);
    field!(t, "cluster_forwarded", "{}", c.forwarded);
    field!(t, "cluster_forward_errors", "{}", c.forward_errors);
    // Quantiles of /metrics' strata_cluster_forward_duration_seconds.
    field!(t, "cluster_forward_p50_usec", "{:.3}", c.forward_latency.quantile_ns(0.5) / 1e3);
    field!(t, "cluster_forward_p99_usec", "{:.3}", c.forward_latency.quantile_ns(0.99) / 1e3);
    field!(t, "cluster_moved", "{}", c.moved);
    let top: Vec<String> = c.top_slots.iter().map(|(slot, keys)| format!("{slot}={keys}")).collect();
    field!(t, "cluster_top_slots", "{}", top.join(","));
    let m = &c.migrations;
    field!(t, "cluster_migrations_in_flight", "source={},target={}", m.in_flight[0], m.in_flight[1]);
    field!(t, "cluster_migrations_committed", "source={},target={}", m.committed[0], m.committed[1]);
    field!(t, "cluster_migrations_failed", "source={},target={}", m.failed[0], m.failed[1]);
    field!(t, "cluster_migrations_aborted", "source={},target={}", m.aborted[0], m.aborted[1]);
    field!(t, "cluster_migration_keys", "source={},target={}", m.keys[0], m.keys[1]);
    field!(t, "cluster_migration_bytes", "source={},target={}", m.bytes[0], m.bytes[1]);
    field!(t, "cluster_migration_slots", "source={},target={}", m.slots[0], m.slots[1]);
    field!(t, "cluster_migration_paused_ms", "{}", m.paused_ns / 1_000_000);
}

fn info_stats(node: &Node, snap: &Snapshot, t: &mut String) {
    let (server, store) = (&snap.server, &snap.store);
    field!(t, "total_connections_received", "{}", server.connections_received);
    field!(t, "total_commands_processed", "{}", server.commands);
    field!(t, "instantaneous_ops_per_sec", "{}", snap.ops_per_sec);
    field!(t, "total_net_input_bytes", "{}", server.net_input_bytes);
    field!(t, "total_net_output_bytes", "{}", server.net_output_bytes);
    field!(t, "rejected_connections", "{}", server.rejected_connections);
    field!(t, "expired_keys", "{}", store.expired);
    field!(t, "evicted_keys", "{}", store.evicted);
    field!(t, "active_defrag_hits", "{}", snap.memory.defrag_hits);
    field!(t, "active_defrag_misses", "{}", snap.memory.defrag_misses);
    field!(t, "evicted_clients", "0");
    field!(t, "keyspace_hits", "{}", store.hits);
    field!(t, "keyspace_misses", "{}", store.misses);
    field!(t, "pubsub_channels", "{}", node.pubsub.num_channels());
    field!(t, "pubsub_patterns", "{}", node.pubsub.num_patterns());
    field!(t, "pubsubshard_channels", "{}", node.pubsub.num_shard_channels());
    field!(t, "tracking_total_keys", "{}", node.ks.tracked_keys());
    field!(t, "tracking_total_items", "{}", node.ks.tracked_items());
    field!(t, "tracking_total_prefixes", "{}", node.tracking.prefixes());
    field!(t, "unexpected_error_replies", "0");
    field!(t, "total_error_replies", "{}", snap.error_replies);
    field!(t, "total_protocol_errors", "{}", server.protocol_errors);
    field!(t, "client_output_buffer_limit_disconnections", "{}", server.output_buffer_disconnects);
    field!(t, "strata_evicted_bytes", "{}", store.evicted_bytes);
    // Searches for victims at the limit: a search that found nothing is not
    // made again per command (`store::evict`).
    field!(t, "strata_eviction_searches", "{}", node.ks.eviction_searches());
}

fn info_replication(server: &dyn ServerControl, t: &mut String) {
    field!(t, "role", "master");
    field!(t, "connected_slaves", "0");
    field!(t, "master_failover_state", "no-failover");
    field!(t, "master_replid", "{}", server.run_id());
    field!(t, "master_replid2", "{}", "0".repeat(40));
    field!(t, "master_repl_offset", "0");
    field!(t, "second_repl_offset", "-1");
    field!(t, "repl_backlog_active", "0");
    field!(t, "repl_backlog_size", "1048576");
    field!(t, "repl_backlog_first_byte_offset", "0");
    field!(t, "repl_backlog_histlen", "0");
}

fn info_cpu(t: &mut String) {
    let (sys, user) = crate::sys::process::rusage(false);
    let (csys, cuser) = crate::sys::process::rusage(true);
    field!(t, "used_cpu_sys", "{sys:.6}");
    field!(t, "used_cpu_user", "{user:.6}");
    field!(t, "used_cpu_sys_children", "{csys:.6}");
    field!(t, "used_cpu_user_children", "{cuser:.6}");
}

fn info_commandstats(snap: &Snapshot, t: &mut String) {
    for (name, c) in &snap.commands {
        if c.calls == 0 && c.rejected == 0 && c.failed == 0 {
            continue;
        }
        let per_call = if c.calls == 0 { 0.0 } else { c.usec as f64 / c.calls as f64 };
        let _ = write!(
            t,
            "cmdstat_{name}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
            c.calls, c.usec, c.rejected, c.failed
        );
    }
}

/// Per command with a latency histogram, the configured percentiles (µs):
/// the bound of the histogram step where each falls, as Redis reads its own.
fn info_latencystats(node: &Node, snap: &Snapshot, t: &mut String) {
    let percentiles = node.config.runtime.latency_percentiles.read().clone();
    for (name, c) in &snap.commands {
        let total: u64 = c.histogram.iter().sum();
        if total == 0 {
            continue;
        }
        let _ = write!(t, "latency_percentiles_usec_{name}:");
        for (i, &p) in percentiles.iter().enumerate() {
            let wanted = ((p.min(100.0) / 100.0 * total as f64 + 0.5) as u64).max(1);
            let mut cumulative = 0;
            let step = c.histogram.iter().position(|&n| {
                cumulative += n;
                cumulative >= wanted
            });
            let bound_us = crate::metrics::histogram_step_ns(step.unwrap_or(0)) as f64 / 1000.0;
            let sep = if i + 1 < percentiles.len() { "," } else { "" };
            let _ = write!(t, "p{}={bound_us:.3}{sep}", crate::config::params::trim_double(p));
        }
        t.push_str("\r\n");
    }
}

fn info_keyspace(snap: &Snapshot, t: &mut String) {
    for (db, f) in snap.keyspace.iter().enumerate() {
        if f.keys == 0 {
            continue;
        }
        let _ = write!(t, "db{db}:keys={},expires={},avg_ttl={}\r\n", f.keys, f.expires, f.avg_ttl_ms());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loading_fields_as_redis_computes_them() {
        let p =
            crate::metrics::snapshot::LoadingFigures { start_time: 1000, total_bytes: 4 << 20, loaded_bytes: 1 << 20 };
        let mut t = String::new();
        loading_fields(&p, 1010, &mut t);
        assert_eq!(
            t,
            "loading_start_time:1000\r\nloading_total_bytes:4194304\r\nloading_rdb_used_mem:0\r\n\
             loading_loaded_bytes:1048576\r\nloading_loaded_perc:25.00\r\nloading_eta_seconds:29\r\n"
        );
        // In the first second Redis says 1; before the total is known, 0%.
        let mut t = String::new();
        loading_fields(
            &crate::metrics::snapshot::LoadingFigures { start_time: 1000, ..Default::default() },
            1000,
            &mut t,
        );
        assert!(t.contains("loading_loaded_perc:0.00\r\nloading_eta_seconds:1\r\n"), "{t}");
    }

    #[test]
    fn human_bytes_like_redis() {
        assert_eq!(human_bytes(0), "0B");
        assert_eq!(human_bytes(1023), "1023B");
        assert_eq!(human_bytes(990912), "967.69K");
        assert_eq!(human_bytes(104857600), "100.00M");
        assert_eq!(human_bytes(3 << 30), "3.00G");
    }
}
