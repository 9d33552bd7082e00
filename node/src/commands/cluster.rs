//! CLUSTER, READONLY, READWRITE, ASKING and the admin port's
//! STRATA.TOPOLOGY. Every reply about the cluster is rendered from the one
//! pushed topology (`crate::cluster::Topology`), so SHARDS, SLOTS, NODES and
//! the redirections of the slot gate (`pipeline.rs`) always agree. Without
//! cluster mode, only KEYSLOT answers (keys live in hash slots anyway).

use super::args::{arg_i64, help};
use super::{CmdResult, CommandDef, Ctx, Keys, err, flags};
use crate::base::eq_ic;
use crate::base::slot::{SLOTS, key_slot};
use crate::cluster::{Cluster, Member, Topology, migration};
use crate::protocol::Reply;
use crate::session::client::PortKind;

pub const COMMANDS: &[CommandDef] = &[
    CommandDef::new("cluster", -2, 0, Keys::None, cluster).acl("@slow").subs(CLUSTER_SUBS),
    CommandDef::new("readonly", 1, flags::FAST | flags::LOADING | flags::STALE, Keys::None, readonly)
        .acl("@fast @connection"),
    CommandDef::new("readwrite", 1, flags::FAST | flags::LOADING | flags::STALE, Keys::None, readwrite)
        .acl("@fast @connection"),
    CommandDef::new("asking", 1, flags::FAST, Keys::None, asking).acl("@fast @connection"),
    CommandDef::new(
        "strata.topology",
        -2,
        flags::ADMIN | flags::NOSCRIPT | flags::LOADING | flags::STALE,
        Keys::None,
        topology,
    )
    .acl("@admin @slow @dangerous"),
    CommandDef::new(
        "strata.migrate",
        -2,
        flags::ADMIN | flags::NOSCRIPT | flags::LOADING | flags::STALE,
        Keys::None,
        migrate,
    )
    .acl("@admin @slow @dangerous"),
];

pub const CLUSTER_SUBS: &[&str] = &[
    "count-failure-reports",
    "countkeysinslot",
    "getkeysinslot",
    "help",
    "info",
    "keyslot",
    "links",
    "myid",
    "nodes",
    "replicas",
    "shards",
    "slaves",
    "slot-stats",
    "slots",
];

const CLUSTER_HELP: &[&str] = &[
    "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "COUNTKEYSINSLOT <slot>",
    "    Return the number of keys in <slot>.",
    "GETKEYSINSLOT <slot> <count>",
    "    Return key names stored by current node in a slot.",
    "INFO",
    "    Return information about the cluster.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "LINKS",
    "    Return information about all network links between this node and its peers.",
    "    (Strata has no cluster bus: the operator pushes the topology, so there are none.)",
    "MYID",
    "    Return the node id.",
    "COUNT-FAILURE-REPORTS <node-id>",
    "    Return number of failure reports for <node-id>.",
    "NODES",
    "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port@bus-port[,hostname]> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
    "REPLICAS <node-id>",
    "    Return <node-id> replicas.",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "SLAVES <node-id>",
    "    Return <node-id> replicas.",
    "SLOT-STATS SLOTSRANGE <start-slot> <end-slot> | ORDERBY key-count [LIMIT <limit>] [ASC|DESC]",
    "    Return the key count of each slot this node serves (Valkey 8's command; key-count only).",
    "SLOTS",
    "    Return information about slots range mappings. Each range is made of:",
    "    start, end, master and replicas IP addresses, ports and ids",
    "HELP",
    "    Prints this help.",
    "The topology (MEET, ADDSLOTS, SETSLOT, FAILOVER, ...) is not set with CLUSTER: the Strata operator pushes it.",
];

const DISABLED: &str = "ERR This instance has cluster support disabled";

/// CLUSTER subcommands Redis has that change the topology: refused with a
/// message that says who owns it.
const MANAGED: &[&str] = &[
    "addslots",
    "addslotsrange",
    "bumpepoch",
    "count-failure-reports",
    "delslots",
    "delslotsrange",
    "failover",
    "flushslots",
    "forget",
    "meet",
    "replicate",
    "reset",
    "saveconfig",
    "set-config-epoch",
    "setslot",
];

fn cluster(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let sub = args[1];
    if eq_ic(sub, "keyslot") {
        if args.len() != 3 {
            return Err(err::arity("cluster|keyslot").into());
        }
        out.int(key_slot(args[2]) as i64);
        return Ok(());
    }
    if eq_ic(sub, "help") && args.len() == 2 {
        help(out, CLUSTER_HELP);
        return Ok(());
    }
    let Some(c) = ctx.node.cluster.as_ref() else {
        return Err(DISABLED.into());
    };
    let name = String::from_utf8_lossy(sub).to_ascii_lowercase();
    let exact = |n: usize| if args.len() == n { Ok(()) } else { Err(err::arity(&format!("cluster|{name}"))) };
    let topo = c.current();
    match name.as_str() {
        "info" => {
            exact(2)?;
            out.verbatim(info_text(topo.as_deref()).as_bytes());
        }
        "myid" => {
            exact(2)?;
            out.bulk_str(&my_id(c, topo.as_deref()));
        }
        "nodes" => {
            exact(2)?;
            let sc = &ctx.node.config.startup;
            out.verbatim(nodes_text(c, topo.as_deref(), (sc.direct_port(), sc.admin_port())).as_bytes());
        }
        "slots" => {
            exact(2)?;
            slots_reply(c, topo.as_deref(), out);
        }
        "shards" => {
            exact(2)?;
            shards_reply(c, topo.as_deref(), out);
        }
        "links" => {
            exact(2)?;
            // No cluster bus: nodes do not talk to each other about topology.
            out.array(0);
        }
        "countkeysinslot" => {
            exact(3)?;
            let slot = slot_arg(args[2], "ERR Invalid slot")?;
            out.int(ctx.node.ks.keys_in_slot(slot) as i64);
        }
        "getkeysinslot" => {
            exact(4)?;
            const INVALID: &str = "ERR Invalid slot or number of keys";
            let slot = slot_arg(args[2], INVALID)?;
            let count = arg_i64(args[3])?;
            if count < 0 {
                return Err(INVALID.into());
            }
            let keys = keys_in_slot(ctx, slot, count as usize);
            out.array(keys.len());
            for k in &keys {
                out.bulk(k);
            }
        }
        "slot-stats" => slot_stats(ctx, c, topo.as_deref(), &args[2..], out)?,
        // No replicas (yet): a master's list is empty, and nobody reports failures.
        "replicas" | "slaves" | "count-failure-reports" => {
            exact(3)?;
            let id = String::from_utf8_lossy(args[2]);
            if !topo.as_deref().is_some_and(|t| t.members.iter().any(|m| m.id == id)) {
                return Err(format!("ERR Unknown node {id}").into());
            }
            if name == "count-failure-reports" {
                out.int(0);
            } else {
                out.array(0);
            }
        }
        n if MANAGED.contains(&n) => {
            return Err(format!(
                "ERR CLUSTER {} is not supported: this cluster's topology is managed by the Strata operator",
                n.to_ascii_uppercase()
            )
            .into());
        }
        _ => return Err(format!("ERR unknown subcommand '{}'. Try CLUSTER HELP.", super::args::lossy(sub)).into()),
    }
    Ok(())
}

/// A slot argument: Redis's integer error, then its range error.
fn slot_arg(arg: &[u8], invalid: &'static str) -> Result<u16, super::CmdError> {
    let n = arg_i64(arg)?;
    if (0..SLOTS as i64).contains(&n) { Ok(n as u16) } else { Err(invalid.into()) }
}

/// CLUSTER SLOT-STATS: the key count of the slots this node serves, by
/// range or the busiest first (what an operator balancing slots reads).
fn slot_stats(ctx: &mut Ctx<'_>, c: &Cluster, topo: Option<&Topology>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    const USAGE: &str =
        "ERR syntax error: CLUSTER SLOT-STATS SLOTSRANGE <start> <end> | ORDERBY key-count [LIMIT <n>] [ASC|DESC]";
    let _ = c;
    let counts = ctx.node.ks.slot_key_counts();
    let mine = |s: u16| topo.is_some_and(|t| t.route(s) == crate::cluster::Route::Mine);
    let slots: Vec<u16> = match args {
        [kw, a, b] if eq_ic(kw, "slotsrange") => {
            let (a, b) =
                (slot_arg(a, "ERR Invalid or out of range slot")?, slot_arg(b, "ERR Invalid or out of range slot")?);
            if a > b {
                return Err(format!("ERR Start slot number {a} is greater than end slot number {b}").into());
            }
            (a..=b).filter(|&s| mine(s)).collect()
        }
        [kw, metric, rest @ ..] if eq_ic(kw, "orderby") => {
            if !eq_ic(metric, "key-count") {
                return Err("ERR Unrecognized sort metric for ORDERBY (key-count is the one this node counts)".into());
            }
            let (mut limit, mut desc) = (16usize, true);
            let mut i = 0;
            while i < rest.len() {
                if eq_ic(rest[i], "limit") && i + 1 < rest.len() {
                    let n = arg_i64(rest[i + 1])?;
                    if !(1..=SLOTS as i64).contains(&n) {
                        return Err("ERR Limit has to lie in between 1 and 16384 (maximum number of slots).".into());
                    }
                    limit = n as usize;
                    i += 2;
                } else if eq_ic(rest[i], "asc") {
                    desc = false;
                    i += 1;
                } else if eq_ic(rest[i], "desc") {
                    desc = true;
                    i += 1;
                } else {
                    return Err(USAGE.into());
                }
            }
            let mut owned: Vec<u16> = (0..SLOTS as u16).filter(|&s| mine(s)).collect();
            owned.sort_by(|&x, &y| {
                let (a, b) = (counts[x as usize], counts[y as usize]);
                (if desc { b.cmp(&a) } else { a.cmp(&b) }).then(x.cmp(&y))
            });
            owned.truncate(limit);
            owned
        }
        _ => return Err(USAGE.into()),
    };
    out.array(slots.len());
    for s in slots {
        out.array(2);
        out.int(s as i64);
        out.map(1);
        out.bulk_str("key-count");
        out.int(counts[s as usize] as i64);
    }
    Ok(())
}

/// Up to `count` keys of database 0 (the only one in cluster mode) in
/// `slot`, those whose name only the disk tier holds included.
fn keys_in_slot(ctx: &mut Ctx<'_>, slot: u16, count: usize) -> Vec<Vec<u8>> {
    let ks = &ctx.node.ks;
    if count == 0 {
        return Vec::new();
    }
    let one = crate::base::slot::SlotSet::from_ranges(&[(slot, slot)]);
    let names = ks.export_names(ks.partition_of_slot(slot), &one);
    let mut keys: Vec<Vec<u8>> = names.indexed.iter().take(count).map(|k| k.to_vec()).collect();
    for loc in names.forgotten {
        if keys.len() >= count {
            break;
        }
        if let Some((key, crate::store::export::Exported::Value { .. })) =
            ks.export_forgotten(loc, &one, ctx.client.now_ms)
        {
            keys.push(key);
        }
    }
    keys
}

/// The node's id: the pushed one, or before any push one made up at start.
fn my_id(c: &Cluster, topo: Option<&Topology>) -> String {
    topo.map_or_else(|| c.provisional_id.clone(), |t| t.me().id.clone())
}

pub fn info_text(topo: Option<&Topology>) -> String {
    let (covered, known, size, epoch) = match topo {
        Some(t) => (t.covered(), t.members.len(), t.members.iter().filter(|m| !m.ranges.is_empty()).count(), t.epoch),
        None => (0, 1, 0, 0),
    };
    let state = if covered == SLOTS { "ok" } else { "fail" };
    format!(
        "cluster_state:{state}\r\ncluster_slots_assigned:{covered}\r\ncluster_slots_ok:{covered}\r\n\
         cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:{known}\r\ncluster_size:{size}\r\n\
         cluster_current_epoch:{epoch}\r\ncluster_my_epoch:{epoch}\r\ncluster_stats_messages_sent:0\r\n\
         cluster_stats_messages_received:0\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n"
    )
}

fn ranges_text(m: &Member) -> String {
    m.ranges.iter().map(|&(a, b)| if a == b { format!(" {a}") } else { format!(" {a}-{b}") }).collect()
}

/// CLUSTER NODES: one line per node, as Redis 7.0 writes them (before a
/// push, as a fresh node: no address known yet, its own `ports`).
pub fn nodes_text(c: &Cluster, topo: Option<&Topology>, ports: (u16, u16)) -> String {
    let Some(t) = topo else {
        return format!("{} :{}@{} myself,master - 0 0 0 connected\n", c.provisional_id, ports.0, ports.1);
    };
    let mut s = String::new();
    for (i, m) in t.members.iter().enumerate() {
        let flags = if i == t.myself { "myself,master" } else { "master" };
        let host = m.hostname.as_ref().map(|h| format!(",{h}")).unwrap_or_default();
        s.push_str(&format!(
            "{} {}:{}@{}{host} {flags} - 0 0 {} connected{}\n",
            m.id,
            m.ip,
            m.direct_port,
            m.admin_port,
            t.epoch,
            ranges_text(m)
        ));
    }
    s
}

/// One node of SLOTS: preferred endpoint, port, id, and the other known
/// endpoints (Redis 7's networking metadata).
fn slots_node(c: &Cluster, m: &Member, out: &mut Reply) {
    out.array(4);
    out.bulk_str(c.preferred_host(m));
    out.int(m.direct_port as i64);
    out.bulk_str(&m.id);
    let hostname = m.hostname.as_deref().filter(|_| !c.prefer_hostname);
    let ip = c.prefer_hostname.then_some(m.ip.as_str());
    let extra: Vec<(&str, &str)> =
        [("ip", ip), ("hostname", hostname)].into_iter().filter_map(|(k, v)| v.map(|v| (k, v))).collect();
    out.map(extra.len());
    for (k, v) in extra {
        out.bulk_str(k);
        out.bulk_str(v);
    }
}

/// CLUSTER SLOTS: contiguous ranges in slot order, each with its owner.
pub fn slots_reply(c: &Cluster, topo: Option<&Topology>, out: &mut Reply) {
    let Some(t) = topo else {
        out.array(0);
        return;
    };
    let mut ranges: Vec<(u16, u16, usize)> =
        t.members.iter().enumerate().flat_map(|(i, m)| m.ranges.iter().map(move |&(a, b)| (a, b, i))).collect();
    ranges.sort_unstable();
    out.array(ranges.len());
    for (a, b, i) in ranges {
        out.array(3);
        out.int(a as i64);
        out.int(b as i64);
        slots_node(c, &t.members[i], out);
    }
}

/// CLUSTER SHARDS: one shard per node that serves slots (a shard of one
/// master: Strata has no replicas yet).
pub fn shards_reply(c: &Cluster, topo: Option<&Topology>, out: &mut Reply) {
    let Some(t) = topo else {
        out.array(0);
        return;
    };
    out.array(t.members.len());
    for m in &t.members {
        out.map(2);
        out.bulk_str("slots");
        out.array(m.ranges.len() * 2);
        for &(a, b) in &m.ranges {
            out.int(a as i64);
            out.int(b as i64);
        }
        out.bulk_str("nodes");
        out.array(1);
        out.map(if m.hostname.is_some() { 8 } else { 7 });
        out.bulk_str("id");
        out.bulk_str(&m.id);
        out.bulk_str("port");
        out.int(m.direct_port as i64);
        out.bulk_str("ip");
        out.bulk_str(&m.ip);
        out.bulk_str("endpoint");
        out.bulk_str(c.preferred_host(m));
        if let Some(h) = &m.hostname {
            out.bulk_str("hostname");
            out.bulk_str(h);
        }
        out.bulk_str("role");
        out.bulk_str("master");
        out.bulk_str("replication-offset");
        out.int(0);
        out.bulk_str("health");
        out.bulk_str("online");
    }
}

/// READONLY, READWRITE, ASKING: a flag of the connection, in cluster mode only.
fn set_flag(ctx: &mut Ctx<'_>, out: &mut Reply, set: impl FnOnce(&mut crate::session::client::Client)) -> CmdResult {
    if ctx.node.cluster.is_none() {
        return Err(DISABLED.into());
    }
    set(ctx.client);
    out.ok();
    Ok(())
}

fn readonly(ctx: &mut Ctx<'_>, _args: &[&[u8]], out: &mut Reply) -> CmdResult {
    set_flag(ctx, out, |c| c.readonly = true)
}

fn readwrite(ctx: &mut Ctx<'_>, _args: &[&[u8]], out: &mut Reply) -> CmdResult {
    set_flag(ctx, out, |c| c.readonly = false)
}

fn asking(ctx: &mut Ctx<'_>, _args: &[&[u8]], out: &mut Reply) -> CmdResult {
    set_flag(ctx, out, |c| c.asking = true)
}

/// STRATA.TOPOLOGY SET <epoch> <myid> <node>... | GET: the operator's push
/// channel, served on the admin port only (anywhere else it does not
/// exist, as far as a client can tell).
fn topology(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let c = match ctx.node.cluster.as_ref() {
        Some(c) if ctx.client.port == PortKind::Admin => c,
        _ => return Err(String::from_utf8_lossy(&super::pipeline::unknown_command(args)).into_owned().into()),
    };
    if eq_ic(args[1], "get") && args.len() == 2 {
        match c.current() {
            None => out.null(),
            Some(t) => {
                out.array(2 + t.members.len());
                out.int(t.epoch as i64);
                out.bulk_str(&t.me().id);
                for m in &t.members {
                    out.bulk_str(&m.render());
                }
            }
        }
        return Ok(());
    }
    if eq_ic(args[1], "set") {
        let t = Topology::parse_args(&args[2..]).map_err(|e| format!("ERR invalid topology: {e}"))?;
        c.apply(t).map_err(|e| format!("ERR {e}"))?;
        migration::after_push(c);
        migration::drop_unserved(&ctx.node.ks, c);
        // Blocked clients run their command again: one whose slot moved
        // away gets MOVED (or is forwarded), as Redis unblocks them.
        for info in ctx.node.clients.all() {
            let waiter = info.blocked_on.lock().clone();
            if let Some(w) = waiter {
                w.retry();
            }
        }
        out.ok();
        return Ok(());
    }
    Err("ERR STRATA.TOPOLOGY SET <epoch> <myid> <node>... | GET".into())
}

/// STRATA.MIGRATE START <mid> <target-id> <target-admin-addr> <slots>
/// | STATUS [<mid>] | CANCEL <mid>, and from a source node RECEIVE <mid>
/// <source-id> <slots> | COMMIT <mid>: live slot migration
/// (`crate::cluster::migration`), on the admin port only.
fn migrate(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let c = match ctx.node.cluster.as_ref() {
        Some(c) if ctx.client.port == PortKind::Admin => c,
        _ => return Err(String::from_utf8_lossy(&super::pipeline::unknown_command(args)).into_owned().into()),
    };
    let text = |a: &[u8]| String::from_utf8_lossy(a).into_owned();
    let sub = text(args[1]).to_ascii_lowercase();
    match (sub.as_str(), &args[2..]) {
        ("start", [mid, target, addr, slots]) => {
            let started = migration::start(c, &text(mid), &text(target), &text(addr), &text(slots))?;
            if let Some(m) = started {
                let job: crate::commands::NodeJob = Box::new(move |node| {
                    if let Some(c) = node.cluster.as_ref() {
                        migration::run_source(&node.ks, c, &m);
                    }
                });
                if !ctx.server.spawn_with_node("strata-migrate", job) {
                    return Err("ERR the node is shutting down".into());
                }
            }
            out.ok();
        }
        ("status", rest) if rest.len() <= 1 => {
            let fields = match rest.first() {
                Some(mid) => {
                    let mid = text(mid);
                    c.migrations
                        .find(&mid)
                        .map(|m| m.status())
                        .or_else(|| migration::recorded_status(c, &mid))
                        .unwrap_or_else(|| vec![("id", mid), ("state", "unknown".into())])
                }
                None => c.migrations.latest().map(|m| m.status()).unwrap_or_default(),
            };
            out.array(fields.len() * 2);
            for (k, v) in fields {
                out.bulk_str(k);
                out.bulk_str(&v);
            }
        }
        ("cancel", [mid]) => {
            migration::cancel(&ctx.node.ks, c, &text(mid))?;
            out.ok();
        }
        ("receive", [mid, source, slots]) => {
            let (_, importing) = migration::receive(&ctx.node.ks, c, &text(mid), &text(source), &text(slots))?;
            ctx.client.importing = Some((importing, text(mid).into()));
            out.ok();
        }
        ("commit", [mid]) => {
            let persist = ctx.node.persist.clone();
            let durable = move || match persist {
                Some(p) => p.flush_all().map_err(|e| e.to_string()),
                None => Ok(()),
            };
            migration::commit(c, &text(mid), durable)?;
            ctx.client.importing = None;
            out.ok();
        }
        _ => {
            return Err("ERR STRATA.MIGRATE START <id> <target-id> <target-admin-addr|\"\"> <slots> | STATUS [<id>] | CANCEL <id>"
                .into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn cluster_subcommands_have_metadata() {
        for s in super::CLUSTER_SUBS {
            assert!(super::super::subcommands::sub_def(&format!("cluster|{s}")).is_some(), "cluster|{s}");
        }
    }
}
