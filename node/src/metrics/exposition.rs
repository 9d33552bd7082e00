//! Prometheus exposition: renders a [`Snapshot`] as metric families at
//! scrape time.
//!
//! The request path only bumps its own worker's single-writer atomics (see
//! `metrics`); nothing shared is touched per command. The snapshot sums over
//! workers when `/metrics` is scraped, which is why this is a custom
//! `Collector` rather than registered `Counter`s.

use super::snapshot::{ClusterFigures, CmdTotals, DurabilityFigures, MigrationFigures, Snapshot};
use super::{
    BATCH_BUCKETS, IO_BUCKETS_US, IoHistogramFigures, LATENCY_BUCKETS, READ_BUCKETS_NS, ReadHistogramFigures,
    ReadLatencyFigures,
};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};
use std::fmt;

/// Takes a fresh snapshot on every scrape.
pub type SnapshotSource = Box<dyn Fn() -> Snapshot + Send + Sync>;

/// A registry holding the node's collector, ready for `text::encode`.
pub fn registry(source: SnapshotSource) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(StrataCollector { source }));
    registry
}

/// Renders a snapshot of the node on every scrape.
pub struct StrataCollector {
    source: SnapshotSource,
}

impl fmt::Debug for StrataCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StrataCollector").finish_non_exhaustive()
    }
}

impl Collector for StrataCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let s = (self.source)();
        encode_commands(&mut enc, &s.commands)?;
        encode_server(&mut enc, &s)?;
        encode_store(&mut enc, &s)?;
        encode_reads(&mut enc, &s.reads)?;
        if let Some(d) = &s.durability {
            encode_durability(&mut enc, d)?;
        }
        if let Some(c) = &s.cluster {
            encode_cluster(&mut enc, c)?;
        }
        if let Some(t) = &s.tls {
            encode_tls(&mut enc, t)?;
        }
        encode_process(&mut enc, &s)
    }
}

/// Per-command families, labelled `command`.
pub fn encode_commands(enc: &mut DescriptorEncoder, commands: &[(&str, CmdTotals)]) -> fmt::Result {
    let per_command = |enc: &mut DescriptorEncoder, name: &str, help: &str, value: fn(&CmdTotals) -> u64| {
        let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
        for (cmd, t) in commands {
            let labels = [("command", *cmd)];
            m.encode_family(&labels)?.encode_counter::<NoLabelSet, _, u64>(&value(t), None)?;
        }
        Ok::<_, fmt::Error>(())
    };
    per_command(enc, "strata_commands", "Commands executed.", |t| t.calls)?;
    per_command(enc, "strata_command_failures", "Commands that replied with an error.", |t| t.failed)?;
    per_command(
        enc,
        "strata_commands_rejected",
        "Commands refused before execution (arity, auth, OOM, pub/sub context).",
        |t| t.rejected,
    )?;

    let mut m = enc.encode_descriptor(
        "strata_command_duration",
        "Command execution time.",
        Some(&Unit::Seconds),
        MetricType::Histogram,
    )?;
    for (cmd, t) in commands {
        let buckets: Vec<(f64, u64)> =
            LATENCY_BUCKETS.iter().copied().chain([f64::INFINITY]).zip(t.buckets.iter().copied()).collect();
        // The count comes from the buckets, not `calls`: a scrape racing a
        // worker must still see +Inf == count.
        let count = t.buckets.iter().sum();
        let labels = [("command", *cmd)];
        m.encode_family(&labels)?.encode_histogram::<NoLabelSet>(t.nanos as f64 / 1e9, count, &buckets, None)?;
    }
    Ok(())
}

/// A histogram in seconds from an [`IoHistogramFigures`].
fn io_histogram(enc: &mut DescriptorEncoder, name: &str, help: &str, h: &IoHistogramFigures) -> fmt::Result {
    let mut m = enc.encode_descriptor(name, help, Some(&Unit::Seconds), MetricType::Histogram)?;
    encode_io_buckets(&mut m, h)
}

fn encode_io_buckets(m: &mut MetricEncoder, h: &IoHistogramFigures) -> fmt::Result {
    let buckets: Vec<(f64, u64)> =
        IO_BUCKETS_US.iter().map(|&us| us as f64 / 1e6).chain([f64::INFINITY]).zip(h.buckets).collect();
    // The count comes from the buckets: a scrape racing a recording still sees +Inf == count.
    let count = h.buckets.iter().sum();
    m.encode_histogram::<NoLabelSet>(h.sum_us as f64 / 1e6, count, &buckets, None)
}

/// Connections and traffic.
fn encode_server(enc: &mut DescriptorEncoder, s: &Snapshot) -> fmt::Result {
    let t = &s.server;
    gauge(enc, "strata_connections", "Connected clients.", None, s.clients.connected)?;
    gauge(
        enc,
        "strata_connections_max",
        "Connections accepted at most (maxclients, as far as the open files limit allows); more are refused.",
        None,
        s.clients.max,
    )?;
    counter(enc, "strata_connections_received", "Connections accepted.", None, t.connections_received)?;
    counter(
        enc,
        "strata_connections_rejected",
        "Connections refused because of maxclients.",
        None,
        t.rejected_connections,
    )?;
    counter(enc, "strata_net_input", "Bytes read from clients.", Some(Unit::Bytes), t.net_input_bytes)?;
    counter(enc, "strata_net_output", "Bytes written to clients.", Some(Unit::Bytes), t.net_output_bytes)?;
    counter(enc, "strata_protocol_errors", "Connections closed for malformed RESP.", None, t.protocol_errors)?;
    counter(
        enc,
        "strata_output_buffer_disconnects",
        "Clients disconnected for exceeding their output buffer limit.",
        None,
        t.output_buffer_disconnects,
    )
}

/// Keyspace statistics, memory and key counts.
fn encode_store(enc: &mut DescriptorEncoder, s: &Snapshot) -> fmt::Result {
    let t = &s.store;
    counter(enc, "strata_keyspace_hits", "Successful key lookups.", None, t.hits)?;
    counter(enc, "strata_keyspace_misses", "Failed key lookups.", None, t.misses)?;
    counter(enc, "strata_expired_keys", "Keys removed because their TTL passed.", None, t.expired)?;
    counter(enc, "strata_evicted_keys", "Keys evicted to stay under maxmemory.", None, t.evicted)?;
    counter(enc, "strata_evicted", "Memory freed by eviction.", Some(Unit::Bytes), t.evicted_bytes)?;

    let mem = &s.memory;
    let mut m = enc.encode_descriptor(
        "strata_memory_used",
        "Memory used: total is what the allocator holds (used_memory), keyspace, connections, the logs' buffers \
         (journal_buffers, cold_tier_buffers) and a slot migration's batch (migration_buffers) its parts; the \
         last three are left out of the eviction decision.",
        Some(&Unit::Bytes),
        MetricType::Gauge,
    )?;
    for (component, v) in [
        ("keyspace", mem.keyspace),
        ("connections", mem.connections),
        ("journal_buffers", mem.journal_buffers),
        ("cold_tier_buffers", mem.cold_buffers),
        ("migration_buffers", mem.migration_buffers),
        ("total", mem.used),
    ] {
        let labels = [("component", component)];
        ConstGauge::new(v).encode(m.encode_family(&labels)?)?;
    }
    gauge(enc, "strata_memory_max", "Configured maxmemory (0 = no limit).", Some(Unit::Bytes), mem.max)?;
    gauge(enc, "strata_memory_rss", "Resident set size of the process.", Some(Unit::Bytes), mem.rss)?;
    counter(
        enc,
        "strata_defrag_moves",
        "Blocks active defragmentation moved out of sparse pages.",
        None,
        mem.defrag_hits,
    )?;
    let mut m = enc.encode_descriptor(
        "strata_memory_allocator",
        "The allocator's figures: allocated (held by the node), active (pages holding live objects), \
         resident (pages it maps that are in RAM).",
        Some(&Unit::Bytes),
        MetricType::Gauge,
    )?;
    let a = &mem.allocator;
    for (state, v) in [("allocated", a.allocated), ("active", a.active), ("resident", a.resident)] {
        let labels = [("state", state)];
        ConstGauge::new(v).encode(m.encode_family(&labels)?)?;
    }
    gauge(
        enc,
        "strata_hugepages",
        "Memory mapped in huge pages for large tables and I/O buffers (setting hugepages; part of used memory).",
        Some(Unit::Bytes),
        s.hugepages.bytes,
    )?;
    counter(
        enc,
        "strata_hugepages_fallbacks",
        "Large allocations served by ordinary memory because no huge pages were free.",
        None,
        s.hugepages.fallbacks,
    )?;

    if let Some(t) = &s.tier {
        gauge(enc, "strata_tier_disk_keys", "Keys whose value is on disk only (cold tier).", None, t.disk_keys)?;
        gauge(
            enc,
            "strata_tier_keyless_keys",
            "Keys on disk only whose key is on disk too: RAM keeps a 16-byte slot for each.",
            None,
            t.forgotten_keys,
        )?;
        gauge(
            enc,
            "strata_tier_keyless_index",
            "RAM the index of keys on disk only takes (their tables).",
            Some(Unit::Bytes),
            t.forgotten_index_bytes,
        )?;
        counter(enc, "strata_tier_keys_forgotten", "Cold keys whose key left RAM too.", None, t.forgets)?;
        counter(
            enc,
            "strata_tier_keys_recalled",
            "Keys on disk only brought back to the index without their value (SCAN, KEYS, a hash match of another key).",
            None,
            t.recalls,
        )?;
        counter(
            enc,
            "strata_tier_demotions",
            "Values demoted from RAM to the cold tier at maxmemory.",
            None,
            t.demoted,
        )?;
        counter(enc, "strata_tier_promotions", "Values read back from the cold tier into RAM.", None, t.promoted)?;
        counter(
            enc,
            "strata_tier_served_once",
            "Values read from the cold tier for one read-only command and left there (their keys were not read from disk lately: not promoted).",
            None,
            t.served_once,
        )?;
        let mut m = enc.encode_descriptor(
            "strata_tier_reads",
            "Reads of cold values: started for waiting commands (pending), joined by a later waiter (shared), \
             done synchronously for keys a command did not declare (sync), keys on disk only read back together for \
             SCAN (batch), failed (error: the key is lost).",
            None,
            MetricType::Counter,
        )?;
        for (kind, v) in [
            ("pending", t.reads),
            ("shared", t.shared_reads),
            ("sync", t.sync_reads),
            ("batch", t.batch_reads),
            ("error", t.read_errors),
        ] {
            ConstCounter::new(v).encode(m.encode_family(&[("kind", kind)])?)?;
        }
        let mut m = enc.encode_descriptor(
            "strata_tier_device_reads",
            "Cold-tier reads by where they were served: the device, or the buffer of records not written yet.",
            None,
            MetricType::Counter,
        )?;
        for (source, v) in [("disk", t.disk_reads), ("buffer", t.staged_reads)] {
            ConstCounter::new(v).encode(m.encode_family(&[("source", source)])?)?;
        }
        ConstCounter::new(t.aio_reads_retried).encode(enc.encode_descriptor(
            "strata_tier_aio_reads_retried",
            "Workers' cold reads Linux AIO refused or bounced because they would have blocked (the aio engine), \
             served by the I/O threads instead.",
            None,
            MetricType::Counter,
        )?)?;
        io_histogram(
            enc,
            "strata_tier_read_duration",
            "Time of one cold-tier read from the device, issue to completion.",
            &t.read_latency,
        )?;
        let mut m = enc.encode_descriptor(
            "strata_tier_read_stage_duration",
            "A cold read's stages: issued until the device started it (queue: a worker's batch and the hand-over to \
             the engine), on the device (device; with a worker's own io_uring, until the worker \
             took the completion), and from its completion until the waiting command ran again \
             (wake).",
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?;
        for (stage, h) in
            [("queue", &t.read_queue_latency), ("device", &t.read_device_latency), ("wake", &t.read_wake_latency)]
        {
            encode_io_buckets(&mut m.encode_family(&[("stage", stage)])?, h)?;
        }
        gauge(
            enc,
            "strata_tier_reads_in_flight",
            "Cold-tier device reads issued and not completed.",
            None,
            t.reads_in_flight,
        )?;
        counter(
            enc,
            "strata_tier_read_ahead",
            "Cold reads started for requests further along a pipeline than the one waiting (read-ahead).",
            None,
            t.ahead_reads,
        )?;
        counter(
            enc,
            "strata_tier_evicted_keys",
            "Keys evicted from the cold tier (index and value): RAM held little but indexes, or the disk budget was full.",
            None,
            t.evicted_disk_keys + t.refused,
        )?;
        counter(
            enc,
            "strata_tier_demotions_deferred",
            "Demotions declined for a moment because no segment was free while the cleaner freed one: the keys stayed in RAM and writes waited for room.",
            None,
            t.deferred,
        )?;
        gauge(enc, "strata_tier_disk", "Segment bytes the cold tier uses.", Some(Unit::Bytes), t.disk_bytes)?;
        gauge(
            enc,
            "strata_tier_max_disk",
            "The cold tier's disk budget (max-disk).",
            Some(Unit::Bytes),
            t.max_disk_bytes,
        )?;
        counter(
            enc,
            "strata_tier_written",
            "Record bytes written to the cold tier.",
            Some(Unit::Bytes),
            t.written_bytes,
        )?;
        gauge(
            enc,
            "strata_tier_dead",
            "Cold-tier record bytes no key refers to (reclaimed by cleaning).",
            Some(Unit::Bytes),
            t.dead_bytes,
        )?;
        counter(
            enc,
            "strata_tier_cleaned_segments",
            "Cold-tier segments cleaned and recycled.",
            None,
            t.cleaned_segments,
        )?;
        counter(
            enc,
            "strata_tier_segment_reads",
            "Cold-tier segments the cleaner read whole to move their live records.",
            None,
            t.segment_reads,
        )?;
        counter(
            enc,
            "strata_tier_freed_unread_segments",
            "Cold-tier segments recycled without a read (nothing live left in them).",
            None,
            t.freed_unread_segments,
        )?;
        counter(
            enc,
            "strata_tier_not_admitted",
            "Values used once or never evicted rather than written to the full cold tier (tier-admission frequent).",
            None,
            t.not_admitted,
        )?;
    }

    let mut m = enc.encode_descriptor("strata_keys", "Keys per database.", None, MetricType::Gauge)?;
    for (db, f) in s.keyspace.iter().enumerate() {
        let db = db.to_string();
        let labels = [("db", db.as_str())];
        ConstGauge::new(f.keys).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

/// Read commands on keys by where their values came from, labelled `tier`:
/// `ram`, or `disk` when the command waited for a cold-tier read.
pub fn encode_reads(enc: &mut DescriptorEncoder, r: &ReadLatencyFigures) -> fmt::Result {
    let mut m = enc.encode_descriptor(
        "strata_read_command_duration",
        "Time of a read command on keys, first attempt to reply, by where its values came from: ram, or disk \
         (it waited on the pending path for a cold-tier read).",
        Some(&Unit::Seconds),
        MetricType::Histogram,
    )?;
    for (tier, h) in [("ram", &r.ram), ("disk", &r.disk)] {
        m.encode_family(&[("tier", tier)])?.encode_histogram::<NoLabelSet>(
            h.sum_ns as f64 / 1e9,
            h.count(),
            &read_buckets(h),
            None,
        )?;
    }
    Ok(())
}

/// A [`ReadHistogramFigures`]' buckets in seconds (the count comes from
/// them too: a scrape racing a recording still sees +Inf == count).
fn read_buckets(h: &ReadHistogramFigures) -> Vec<(f64, u64)> {
    READ_BUCKETS_NS.iter().map(|&ns| ns as f64 / 1e9).chain([f64::INFINITY]).zip(h.buckets).collect()
}

/// `tls-port` (absent without it): clients, failed handshakes, the
/// certificate's expiry (alert on it) and its reloads.
pub fn encode_tls(enc: &mut DescriptorEncoder, t: &crate::metrics::snapshot::TlsFigures) -> fmt::Result {
    gauge(enc, "strata_tls_connected_clients", "Clients connected over TLS (tls-port).", None, t.connections)?;
    counter(
        enc,
        "strata_tls_handshake_failures",
        "TLS handshakes that failed: a missing or untrusted client certificate, a plain-text client on tls-port.",
        None,
        t.handshake_failures,
    )?;
    let m = enc.encode_descriptor(
        "strata_tls_certificate_reloads",
        "Reloads of the TLS certificate files (CONFIG SET or a change on disk): ok, or failed (the old ones stay).",
        None,
        MetricType::Counter,
    )?;
    let mut m = m;
    for (result, v) in [("ok", t.reloads), ("failed", t.reload_failures)] {
        m.encode_family(&[("result", result)])?.encode_counter::<NoLabelSet, _, u64>(&v, None)?;
    }
    gauge(
        enc,
        "strata_tls_certificate_expiry_timestamp_seconds",
        "When the node's TLS certificate expires (unix time; 0 if unknown).",
        None,
        t.cert_not_after.max(0) as u64,
    )
}

/// Cluster mode (absent without it): the applied topology, the requests
/// forwarded for plain clients and the MOVED replies sent to cluster-aware
/// ones, and the slots holding the most keys.
pub fn encode_cluster(enc: &mut DescriptorEncoder, c: &ClusterFigures) -> fmt::Result {
    gauge(enc, "strata_cluster_enabled", "1: the node runs in cluster mode (cluster-enabled yes).", None, 1)?;
    gauge(
        enc,
        "strata_cluster_topology_epoch",
        "Epoch of the topology this node applied (0: none pushed yet; data commands get CLUSTERDOWN).",
        None,
        c.epoch,
    )?;
    gauge(enc, "strata_cluster_slots_owned", "Hash slots this node serves.", None, c.slots_owned)?;
    gauge(
        enc,
        "strata_cluster_slots_covered",
        "Hash slots some node serves in this node's topology (16384 when every slot has an owner).",
        None,
        c.slots_covered,
    )?;
    gauge(enc, "strata_cluster_nodes", "Nodes in this node's topology.", None, c.nodes)?;
    counter(
        enc,
        "strata_cluster_forwarded",
        "Requests for another node's slots forwarded to their owner for plain clients (a transaction counts once).",
        None,
        c.forwarded,
    )?;
    counter(
        enc,
        "strata_cluster_forward_errors",
        "Forwarded requests whose owner could not be reached (the client got an error).",
        None,
        c.forward_errors,
    )?;
    let mut m = enc.encode_descriptor(
        "strata_cluster_forward_duration",
        "Time from sending a forwarded request to the owner to having its reply.",
        Some(&Unit::Seconds),
        MetricType::Histogram,
    )?;
    let h = &c.forward_latency;
    m.encode_histogram::<NoLabelSet>(h.sum_ns as f64 / 1e9, h.count(), &read_buckets(h), None)?;
    counter(
        enc,
        "strata_cluster_moved",
        "-MOVED replies sent to cluster-aware clients (a command for another node's slot on the direct port).",
        None,
        c.moved,
    )?;
    let mut m = enc.encode_descriptor(
        "strata_cluster_slot_keys",
        "Keys in the 10 hash slots holding the most on this node (slots without keys are left out).",
        None,
        MetricType::Gauge,
    )?;
    for (slot, keys) in &c.top_slots {
        let slot = slot.to_string();
        ConstGauge::new(*keys).encode(m.encode_family(&[("slot", slot.as_str())])?)?;
    }
    encode_migrations(enc, &c.migrations)
}

/// Slot migrations, by role (`source`: this node gave slots away).
fn encode_migrations(enc: &mut DescriptorEncoder, m: &MigrationFigures) -> fmt::Result {
    const ROLES: [&str; 2] = ["source", "target"];
    let mut g = enc.encode_descriptor(
        "strata_cluster_migrations_in_flight",
        "Slot migrations running now, by this node's role in them.",
        None,
        MetricType::Gauge,
    )?;
    for (i, role) in ROLES.iter().enumerate() {
        ConstGauge::new(m.in_flight[i]).encode(g.encode_family(&[("role", *role)])?)?;
    }
    let mut f = enc.encode_descriptor(
        "strata_cluster_migrations",
        "Slot migrations ended, by role and outcome (committed: the target has the slots; failed, aborted: the source kept them).",
        None,
        MetricType::Counter,
    )?;
    for (i, role) in ROLES.iter().enumerate() {
        for (outcome, v) in [("committed", m.committed[i]), ("failed", m.failed[i]), ("aborted", m.aborted[i])] {
            ConstCounter::new(v).encode(f.encode_family(&[("role", *role), ("outcome", outcome)])?)?;
        }
    }
    for (name, help, v) in [
        ("strata_cluster_migration_keys", "Keys sent (source) or received (target) by slot migrations.", &m.keys),
        ("strata_cluster_migration_slots", "Hash slots moved by committed migrations.", &m.slots),
    ] {
        let mut f = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
        for (i, role) in ROLES.iter().enumerate() {
            ConstCounter::new(v[i]).encode(f.encode_family(&[("role", *role)])?)?;
        }
    }
    let mut f = enc.encode_descriptor(
        "strata_cluster_migration",
        "Value bytes sent (source) or received (target) by slot migrations.",
        Some(&Unit::Bytes),
        MetricType::Counter,
    )?;
    for (i, role) in ROLES.iter().enumerate() {
        ConstCounter::new(m.bytes[i]).encode(f.encode_family(&[("role", *role)])?)?;
    }
    let paused = enc.encode_descriptor(
        "strata_cluster_migration_pause",
        "Time commands on migrating slots waited at handovers (source), summed.",
        Some(&Unit::Seconds),
        MetricType::Counter,
    )?;
    ConstCounter::new(m.paused_ns as f64 / 1e9).encode(paused)?;
    let running = enc.encode_descriptor(
        "strata_cluster_migration",
        "How long the oldest slot migration in flight has run (0: none).",
        Some(&Unit::Seconds),
        MetricType::Gauge,
    )?;
    ConstGauge::new(m.oldest_ms as f64 / 1e3).encode(running)
}

/// The durability log (absent under durability none).
fn encode_durability(enc: &mut DescriptorEncoder, d: &DurabilityFigures) -> fmt::Result {
    let r = &d.recovery;
    gauge(enc, "strata_loading", "1 while the durability log is replayed.", None, d.loading as u64)?;
    let lp = &d.loading_progress;
    gauge(enc, "strata_loading_total", "Bytes of log segments the replay scans.", Some(Unit::Bytes), lp.total_bytes)?;
    gauge(enc, "strata_loading_loaded", "Bytes the replay has scanned.", Some(Unit::Bytes), lp.loaded_bytes)?;
    let m = enc.encode_descriptor(
        "strata_recovery_duration",
        "Time the last replay of the log took.",
        Some(&Unit::Seconds),
        MetricType::Gauge,
    )?;
    ConstGauge::new(r.duration_ms as f64 / 1e3).encode(m)?;
    gauge(enc, "strata_recovery_records", "Records replayed at start-up.", None, r.records)?;
    gauge(enc, "strata_recovery_skipped_runs", "Runs of bad records skipped at start-up.", None, r.bad_runs)?;
    gauge(enc, "strata_recovery_skipped_bytes", "Bytes of bad records skipped at start-up.", None, r.skipped_bytes)?;
    gauge(enc, "strata_recovery_torn_bytes", "Bytes of torn tail dropped at start-up.", None, r.torn_bytes)?;
    gauge(enc, "strata_recovery_bad_values", "Records whose value could not be decoded.", None, r.bad_values)?;
    gauge(
        enc,
        "strata_recovery_evicted_keys",
        "Keys evicted during the replay to stay under maxmemory.",
        None,
        r.evicted,
    )?;
    counter(enc, "strata_log_compactions", "Log compactions.", None, d.compactions)?;
    gauge(enc, "strata_log_segments", "Segments of the log in use.", None, d.segments)?;
    gauge(
        enc,
        "strata_log",
        "Disk the log's segments in use hold (each is preallocated whole).",
        Some(Unit::Bytes),
        d.log_bytes,
    )?;
    gauge(
        enc,
        "strata_durability_lag_records",
        "Records appended, not yet durable.",
        None,
        d.appended_seq.saturating_sub(d.durable_seq),
    )?;
    gauge(
        enc,
        "strata_durability_lag",
        "Bytes appended, not yet durable (an upper bound).",
        Some(Unit::Bytes),
        d.lag_bytes,
    )?;
    let m = enc.encode_descriptor(
        "strata_durability_lag_age",
        "Age of the oldest write not yet durable (an upper bound; 0 in sync).",
        Some(&Unit::Seconds),
        MetricType::Gauge,
    )?;
    ConstGauge::new(d.lag_us as f64 / 1e6).encode(m)?;
    counter(
        enc,
        "strata_durability_held_replies",
        "Reply batches held back until a flush because the log lagged past its bound.",
        None,
        d.held_replies,
    )?;
    counter(enc, "strata_log_fsyncs", "Flushes (write + fdatasync) of the log.", None, d.flushes)?;
    counter(enc, "strata_log_fsync_records", "Records made durable.", None, d.flushed_records)?;
    let m =
        enc.encode_descriptor("strata_log_fsync", "Time spent in flushes.", Some(&Unit::Seconds), MetricType::Counter)?;
    ConstCounter::new(d.flush_us_total as f64 / 1e6).encode(m)?;
    io_histogram(
        enc,
        "strata_log_fsync_duration",
        "Time of one flush of the log (write + fdatasync).",
        &d.flush_latency,
    )?;
    gauge(enc, "strata_group_commit_max_records", "The most records one flush made durable.", None, d.max_batch)?;
    let mut m = enc.encode_descriptor(
        "strata_group_commit_records",
        "Records one flush of the log made durable (the group commit's batch).",
        None,
        MetricType::Histogram,
    )?;
    let b = &d.batch_sizes;
    let buckets: Vec<(f64, u64)> =
        BATCH_BUCKETS.iter().map(|&n| n as f64).chain([f64::INFINITY]).zip(b.buckets).collect();
    // The count comes from the buckets: a scrape racing a flush still sees +Inf == count.
    m.encode_histogram::<NoLabelSet>(b.sum as f64, b.count(), &buckets, None)?;
    let engine = d.engine.split(':').next().unwrap_or("");
    let mut m = enc.encode_descriptor("strata_io_engine", "The log's I/O engine.", None, MetricType::Info)?;
    m.encode_info(&[("engine", engine)])
}

/// Process-level facts.
fn encode_process(enc: &mut DescriptorEncoder, s: &Snapshot) -> fmt::Result {
    let m = enc.encode_descriptor("strata_uptime", "Time since start-up.", Some(&Unit::Seconds), MetricType::Gauge)?;
    ConstGauge::new(s.uptime.as_secs_f64()).encode(m)?;
    gauge(enc, "strata_worker_threads", "Worker threads serving clients.", None, s.worker_threads)?;
    gauge(
        enc,
        "strata_worker_threads_active",
        "Worker threads taking connections now (adaptive-threads).",
        None,
        s.active_threads,
    )?;
    counter(
        enc,
        "strata_connection_migrations",
        "Connections moved between worker threads.",
        None,
        s.connection_migrations,
    )?;
    let mut m = enc.encode_descriptor(
        "strata_worker_thread_growths",
        "Times the adaptive balancer added worker threads, by its trial's outcome: kept (commands per second \
         rose by 10 % or more) or undone.",
        None,
        MetricType::Counter,
    )?;
    for (outcome, v) in [("kept", s.growths_kept), ("undone", s.growths_undone)] {
        ConstCounter::new(v).encode(m.encode_family(&[("outcome", outcome)])?)?;
    }
    encode_workers(enc, s)?;
    let mut m = enc.encode_descriptor("strata_build", "Build information.", None, MetricType::Info)?;
    m.encode_info(&[("version", env!("CARGO_PKG_VERSION"))])
}

/// Per worker thread, labelled `worker` (0 to threads - 1: bounded by the
/// `threads` setting, at most 1024).
fn encode_workers(enc: &mut DescriptorEncoder, s: &Snapshot) -> fmt::Result {
    let ids: Vec<String> = (0..s.workers.len()).map(|w| w.to_string()).collect();
    let mut m = enc.encode_descriptor(
        "strata_worker_cpu",
        "CPU time of each worker thread (sampled every 100 ms).",
        Some(&Unit::Seconds),
        MetricType::Counter,
    )?;
    for (id, w) in ids.iter().zip(&s.workers) {
        ConstCounter::new(w.cpu_seconds).encode(m.encode_family(&[("worker", id.as_str())])?)?;
    }
    let mut m =
        enc.encode_descriptor("strata_worker_commands", "Commands each worker executed.", None, MetricType::Counter)?;
    for (id, w) in ids.iter().zip(&s.workers) {
        ConstCounter::new(w.commands).encode(m.encode_family(&[("worker", id.as_str())])?)?;
    }
    let mut m =
        enc.encode_descriptor("strata_worker_connections", "Connections each worker owns.", None, MetricType::Gauge)?;
    for (id, w) in ids.iter().zip(&s.workers) {
        ConstGauge::new(w.connections).encode(m.encode_family(&[("worker", id.as_str())])?)?;
    }
    let mut m = enc.encode_descriptor(
        "strata_worker_active",
        "1 while a worker takes new connections (adaptive-threads), else 0.",
        None,
        MetricType::Gauge,
    )?;
    for (id, w) in ids.iter().zip(&s.workers) {
        ConstGauge::new(u64::from(w.active)).encode(m.encode_family(&[("worker", id.as_str())])?)?;
    }
    Ok(())
}

fn counter(enc: &mut DescriptorEncoder, name: &str, help: &str, unit: Option<Unit>, v: u64) -> fmt::Result {
    let m = enc.encode_descriptor(name, help, unit.as_ref(), MetricType::Counter)?;
    ConstCounter::new(v).encode(m)
}

fn gauge(enc: &mut DescriptorEncoder, name: &str, help: &str, unit: Option<Unit>, v: u64) -> fmt::Result {
    let m = enc.encode_descriptor(name, help, unit.as_ref(), MetricType::Gauge)?;
    ConstGauge::new(v).encode(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::CmdStat;
    use prometheus_client::encoding::text::encode;

    /// Value of the sample whose series (name and labels, as written) is `series`.
    fn sample(text: &str, series: &str) -> Option<f64> {
        text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    #[derive(Debug)]
    struct Commands(Vec<(&'static str, CmdTotals)>);

    impl Collector for Commands {
        fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
            encode_commands(&mut enc, &self.0)
        }
    }

    #[test]
    fn command_families_and_histogram() {
        let stats = [CmdStat::default(), CmdStat::default()];
        stats[0].record(5_000, false); // 5 µs: first bucket
        stats[1].record(300_000, true); // 0.3 ms: le=0.0005
        stats[1].record(2_000_000_000, false); // 2 s: overflow
        stats[1].reject();
        let mut t = CmdTotals::default();
        for s in &stats {
            t.add(s);
        }
        assert_eq!((t.calls, t.failed, t.rejected), (3, 1, 1));
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Commands(vec![("set", t)])));
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();

        assert_eq!(sample(&text, "strata_commands_total{command=\"set\"}"), Some(3.0));
        assert_eq!(sample(&text, "strata_command_failures_total{command=\"set\"}"), Some(1.0));
        assert_eq!(sample(&text, "strata_commands_rejected_total{command=\"set\"}"), Some(1.0));
        assert_eq!(sample(&text, "strata_command_duration_seconds_count{command=\"set\"}"), Some(3.0));
        let sum = sample(&text, "strata_command_duration_seconds_sum{command=\"set\"}").unwrap();
        assert!((sum - 2.000305).abs() < 1e-9, "{sum}");
        // Buckets are cumulative in the exposition.
        let bucket =
            |le: &str| sample(&text, &format!("strata_command_duration_seconds_bucket{{le=\"{le}\",command=\"set\"}}"));
        assert_eq!(bucket("0.0001"), Some(1.0));
        assert_eq!(bucket("0.0005"), Some(2.0));
        assert_eq!(bucket("1.0"), Some(2.0));
        assert_eq!(bucket("+Inf"), Some(3.0));
        assert!(text.contains("# TYPE strata_command_duration_seconds histogram\n"));
        assert!(text.contains("# UNIT strata_command_duration_seconds seconds\n"));
        assert!(text.ends_with("# EOF\n"));
    }

    #[derive(Debug)]
    struct Durability(DurabilityFigures);

    impl Collector for Durability {
        fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
            encode_durability(&mut enc, &self.0)
        }
    }

    #[test]
    fn fsync_latency_histogram() {
        let mut d = DurabilityFigures::default();
        // Flushes of 40 µs, 40 µs, 3 ms and 2 s, bucketed as the commit thread does.
        let h = crate::metrics::IoHistogram::default();
        for us in [40, 40, 3_000, 2_000_000] {
            h.record(us);
        }
        d.flush_latency = h.figures();
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Durability(d)));
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        let bucket = |le: &str| sample(&text, &format!("strata_log_fsync_duration_seconds_bucket{{le=\"{le}\"}}"));
        assert_eq!(bucket("0.00005"), Some(2.0), "{text}");
        assert_eq!(bucket("0.0025"), Some(2.0));
        assert_eq!(bucket("0.005"), Some(3.0));
        assert_eq!(bucket("1.0"), Some(3.0));
        assert_eq!(bucket("+Inf"), Some(4.0));
        assert_eq!(sample(&text, "strata_log_fsync_duration_seconds_count"), Some(4.0));
        let sum = sample(&text, "strata_log_fsync_duration_seconds_sum").unwrap();
        assert!((sum - 2.00308).abs() < 1e-9, "{sum}");
        assert!(text.contains("# TYPE strata_log_fsync_duration_seconds histogram\n"));
    }

    #[test]
    fn group_commit_batch_histogram() {
        let mut d = DurabilityFigures::default();
        // Flushes of 1, 1, 3, 64 and 100 000 records, bucketed as the commit thread does.
        let h = crate::metrics::BatchHistogram::default();
        for n in [1, 1, 3, 64, 100_000] {
            h.record(n);
        }
        d.batch_sizes = h.figures(100_069);
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Durability(d)));
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        let bucket = |le: &str| sample(&text, &format!("strata_group_commit_records_bucket{{le=\"{le}\"}}"));
        assert_eq!(bucket("1.0"), Some(2.0), "{text}");
        assert_eq!(bucket("2.0"), Some(2.0));
        assert_eq!(bucket("4.0"), Some(3.0));
        assert_eq!(bucket("32.0"), Some(3.0));
        assert_eq!(bucket("64.0"), Some(4.0));
        assert_eq!(bucket("65536.0"), Some(4.0));
        assert_eq!(bucket("+Inf"), Some(5.0));
        assert_eq!(sample(&text, "strata_group_commit_records_count"), Some(5.0));
        assert_eq!(sample(&text, "strata_group_commit_records_sum"), Some(100_069.0));
        assert!(text.contains("# TYPE strata_group_commit_records histogram\n"));
        assert!(text.contains("# TYPE strata_group_commit_max_records gauge\n"), "the largest batch stays");
    }

    #[derive(Debug)]
    struct Reads(ReadLatencyFigures);

    impl Collector for Reads {
        fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
            encode_reads(&mut enc, &self.0)
        }
    }

    #[test]
    fn read_latency_by_tier() {
        let w = crate::metrics::WorkerMetrics::new(1);
        w.reads.ram.record(800); // le=0.000001
        w.reads.ram.record(1_200); // le=0.000002
        w.reads.disk.record(150_000); // le=0.0002
        let figures = ReadLatencyFigures::sum(&[std::sync::Arc::new(w)]);
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Reads(figures)));
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        let bucket = |le: &str, tier: &str| {
            sample(&text, &format!("strata_read_command_duration_seconds_bucket{{le=\"{le}\",tier=\"{tier}\"}}"))
        };
        assert_eq!(bucket("0.000001", "ram"), Some(1.0), "{text}");
        assert_eq!(bucket("0.000002", "ram"), Some(2.0));
        assert_eq!(bucket("0.0001", "disk"), Some(0.0));
        assert_eq!(bucket("0.0002", "disk"), Some(1.0));
        assert_eq!(bucket("+Inf", "disk"), Some(1.0));
        assert_eq!(sample(&text, "strata_read_command_duration_seconds_count{tier=\"ram\"}"), Some(2.0));
        let sum = sample(&text, "strata_read_command_duration_seconds_sum{tier=\"disk\"}").unwrap();
        assert!((sum - 0.00015).abs() < 1e-12, "{sum}");
        assert!(text.contains("# TYPE strata_read_command_duration_seconds histogram\n"));
    }

    #[derive(Debug)]
    struct Cluster(ClusterFigures);

    impl Collector for Cluster {
        fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
            encode_cluster(&mut enc, &self.0)
        }
    }

    #[test]
    fn cluster_families() {
        let w = crate::metrics::WorkerMetrics::new(1);
        crate::metrics::ClusterStats::add(&w.cluster.forwarded, 3);
        crate::metrics::ClusterStats::add(&w.cluster.forward_errors, 1);
        crate::metrics::ClusterStats::add(&w.cluster.moved, 7);
        w.cluster.forward_latency.record(40_000); // le=0.00005
        w.cluster.forward_latency.record(3_000_000); // le=0.005
        let mut f = ClusterFigures::sum(&[std::sync::Arc::new(w)]);
        (f.epoch, f.slots_owned, f.slots_covered, f.nodes) = (4, 5461, 16000, 3);
        let mut counts = vec![0u32; 16384];
        for slot in 0..12 {
            counts[slot * 1000] = slot as u32 + 1;
        }
        f.set_top_slots(&counts);
        f.migrations = MigrationFigures {
            in_flight: [1, 0],
            keys: [900, 40],
            bytes: [1 << 20, 4096],
            slots: [100, 0],
            committed: [2, 0],
            failed: [1, 3],
            aborted: [0, 1],
            paused_ns: 1_500_000_000,
            oldest_ms: 2500,
        };
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Cluster(f)));
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        for (series, want) in [
            ("strata_cluster_enabled", 1.0),
            ("strata_cluster_topology_epoch", 4.0),
            ("strata_cluster_slots_owned", 5461.0),
            ("strata_cluster_slots_covered", 16000.0),
            ("strata_cluster_nodes", 3.0),
            ("strata_cluster_forwarded_total", 3.0),
            ("strata_cluster_forward_errors_total", 1.0),
            ("strata_cluster_moved_total", 7.0),
            ("strata_cluster_forward_duration_seconds_count", 2.0),
            ("strata_cluster_forward_duration_seconds_bucket{le=\"0.00005\"}", 1.0),
            ("strata_cluster_forward_duration_seconds_bucket{le=\"0.002\"}", 1.0),
            ("strata_cluster_forward_duration_seconds_bucket{le=\"0.005\"}", 2.0),
            ("strata_cluster_forward_duration_seconds_bucket{le=\"+Inf\"}", 2.0),
            ("strata_cluster_slot_keys{slot=\"11000\"}", 12.0),
            ("strata_cluster_slot_keys{slot=\"2000\"}", 3.0),
            ("strata_cluster_migrations_in_flight{role=\"source\"}", 1.0),
            ("strata_cluster_migrations_in_flight{role=\"target\"}", 0.0),
            ("strata_cluster_migrations_total{role=\"source\",outcome=\"committed\"}", 2.0),
            ("strata_cluster_migrations_total{role=\"target\",outcome=\"failed\"}", 3.0),
            ("strata_cluster_migrations_total{role=\"target\",outcome=\"aborted\"}", 1.0),
            ("strata_cluster_migration_keys_total{role=\"source\"}", 900.0),
            ("strata_cluster_migration_keys_total{role=\"target\"}", 40.0),
            ("strata_cluster_migration_bytes_total{role=\"source\"}", 1048576.0),
            ("strata_cluster_migration_slots_total{role=\"source\"}", 100.0),
            ("strata_cluster_migration_pause_seconds_total", 1.5),
            ("strata_cluster_migration_seconds", 2.5),
        ] {
            assert_eq!(sample(&text, series), Some(want), "{series} in\n{text}");
        }
        let sum = sample(&text, "strata_cluster_forward_duration_seconds_sum").unwrap();
        assert!((sum - 0.00304).abs() < 1e-12, "{sum}");
        // Ten slots named, the two with the fewest keys left out.
        assert_eq!(text.matches("strata_cluster_slot_keys{").count(), 10, "{text}");
        assert_eq!(sample(&text, "strata_cluster_slot_keys{slot=\"1000\"}"), None);
        assert!(text.contains("# TYPE strata_cluster_forward_duration_seconds histogram\n"));
        assert!(text.contains("# TYPE strata_cluster_moved counter\n"));
    }

    #[test]
    fn idle_commands_are_inactive() {
        assert!(!CmdTotals::default().is_active());
        let s = CmdStat::default();
        s.reject();
        let mut t = CmdTotals::default();
        t.add(&s);
        assert!(t.is_active());
    }
}
