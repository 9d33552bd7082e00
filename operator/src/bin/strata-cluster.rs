//! `strata-cluster`: pushes a topology to Strata nodes in cluster mode and shows what each has
//! applied, with the operator's own topology code (ids, slot spread, push client). Made for
//! local clusters (`scripts/local-cluster.sh`) and for looking at a node by hand.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use strata_operator::topology::client::{self, AdminEndpoint, AdminTls};
use strata_operator::topology::migrate::{self, Phase};
use strata_operator::topology::plan::{self, Move, render_ranges};
use strata_operator::topology::{NodeId, Reported, SlotRange, Topology, TopologyNode, spread};

/// Push a Redis Cluster topology to Strata nodes, or show the one each node applied.
///
/// Each NODE is `host:direct:plain:admin`: the host the nodes and clients reach it at, its
/// direct port (where MOVED sends cluster-aware clients), its plain port (any client; a command
/// for another node's slot is forwarded) and its admin port (where topologies are pushed).
/// Nodes are shards in the order given: the 16384 slots are spread over them evenly as
/// `redis-cli --cluster create` does (3 nodes: 0-5460, 5461-10922, 10923-16383), and node i's
/// id is sha1("<id-prefix>/<i>").
///
/// Nodes with `tls-cluster yes` speak TLS on their admin port: give `--tls-ca-cert` (and
/// `--tls-cert`/`--tls-key` when they run `tls-auth-clients yes`, as the operator's do).
#[derive(Parser, Debug)]
#[command(name = "strata-cluster", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Push the whole topology to every node, each told which one it is. Fails (exit 1) unless
    /// every node applied it.
    Push {
        #[command(flatten)]
        nodes: NodesArgs,
        /// The topology's epoch. Default: one more than the highest epoch any node reports (a
        /// node refuses an epoch lower than its own, so a re-run never goes backwards).
        #[arg(long)]
        epoch: Option<u64>,
        /// Node ids are sha1("<id-prefix>/<index>"). Default: `local/<first node's plain port>`,
        /// the ids `scripts/local-cluster.sh` uses.
        #[arg(long)]
        id_prefix: Option<String>,
    },
    /// One line per node from what it reports:
    /// `node <id> cluster <host:port> plain <host:port> epoch <n> slots <count>`.
    /// A node without a topology shows id `-` and epoch 0; an unreachable one is named on
    /// stderr and makes the exit status 1.
    Status {
        #[command(flatten)]
        nodes: NodesArgs,
    },
    /// Move slots with their keys (live, `STRATA.MIGRATE`) so that the first `--shards` nodes
    /// own even shares, with the operator's own planner; then push the topology without the
    /// nodes beyond `--shards` (drained). Give every node, current and new: new ones join the
    /// topology without slots first. One migration at a time; after each, the confirming epoch
    /// goes to the target first and the source last. Returns once the last topology is applied
    /// on every node (exit 1 if a migration fails `--attempts` times or a node refuses it).
    #[command(alias = "scale")]
    Rebalance {
        #[command(flatten)]
        nodes: NodesArgs,
        /// Shards to even out over (the first N nodes). Default: every node given.
        #[arg(long)]
        shards: Option<usize>,
        /// Most slots per migration.
        #[arg(long, default_value_t = plan::DEFAULT_BATCH)]
        batch: u32,
        /// Attempts per migration before giving up.
        #[arg(long, default_value_t = 3)]
        attempts: u32,
        /// Even out keys rather than slots: weigh each slot by its key count (`CLUSTER
        /// COUNTKEYSINSLOT` on each owner's admin port); falls back to even weights when a node
        /// does not answer it.
        #[arg(long)]
        weigh_keys: bool,
        /// Node ids are sha1("<id-prefix>/<index>") (default `local/<first node's plain port>`).
        #[arg(long)]
        id_prefix: Option<String>,
    },
}

#[derive(Args, Debug)]
struct NodesArgs {
    /// The nodes, `host:direct:plain:admin` each, in shard order.
    #[arg(required = true, value_name = "NODE", value_parser = parse_node)]
    nodes: Vec<NodeArg>,
    /// File holding the admin password (the nodes' `--cluster-admin-password-file`); trailing
    /// whitespace is ignored. Without it no AUTH is sent.
    #[arg(long, env = "STRATA_CLUSTER_ADMIN_PASSWORD_FILE")]
    password_file: Option<std::path::PathBuf>,
    /// Seconds to wait for each node's answer.
    #[arg(long, default_value_t = 3.0)]
    timeout: f64,
    #[command(flatten)]
    tls: TlsArgs,
}

/// TLS to the admin ports, for nodes with `tls-cluster yes`.
#[derive(Args, Debug)]
struct TlsArgs {
    /// Speak TLS to the admin ports, checking each node's certificate against the CA
    /// certificates in FILE (PEM; the nodes' `tls-ca-cert-file`, or the CA that signed their
    /// certificate).
    #[arg(long, value_name = "FILE")]
    tls_ca_cert: Option<std::path::PathBuf>,
    /// Client certificate chain (PEM) presented to nodes that ask for one (`tls-auth-clients
    /// yes` or `optional`); needs `--tls-key`. A node's own certificate does, when it allows
    /// client auth.
    #[arg(long, value_name = "FILE", requires_all = ["tls_key", "tls_ca_cert"])]
    tls_cert: Option<std::path::PathBuf>,
    /// Private key (PEM, unencrypted) of `--tls-cert`.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
    /// The name every node's certificate must cover. Default: each node's host as given
    /// (a certificate names DNS names or IPs; an operator-managed pod's is
    /// `<pod>.<name>-headless.<namespace>.svc`).
    #[arg(long, value_name = "NAME", requires = "tls_ca_cert")]
    tls_server_name: Option<String>,
}

impl TlsArgs {
    /// The client config, when TLS is asked for.
    fn config(&self) -> Result<Option<std::sync::Arc<rustls::ClientConfig>>, String> {
        let Some(ca) = &self.tls_ca_cert else { return Ok(None) };
        let read = |path: &std::path::Path| std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()));
        let roots = client::pem_certificates(&read(ca)?).map_err(|e| format!("{}: {e}", ca.display()))?;
        let identity = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some((
                client::pem_certificates(&read(cert)?).map_err(|e| format!("{}: {e}", cert.display()))?,
                client::pem_private_key(&read(key)?).map_err(|e| format!("{}: {e}", key.display()))?,
            )),
            _ => None,
        };
        client::tls_config(roots, identity).map(Some)
    }

    /// What `host`'s certificate is checked against.
    fn server_name(&self, host: &str) -> Result<rustls::pki_types::ServerName<'static>, String> {
        let name = self.tls_server_name.as_deref().unwrap_or(host);
        // A bracketed IPv6 host names the address inside.
        let name = name.trim_start_matches('[').trim_end_matches(']');
        rustls::pki_types::ServerName::try_from(name.to_owned())
            .map_err(|e| format!("{name:?} cannot be checked against a certificate: {e}; give --tls-server-name"))
    }
}

#[derive(Clone, Debug)]
struct NodeArg {
    host: String,
    direct: u16,
    plain: u16,
    admin: u16,
}

fn parse_node(text: &str) -> Result<NodeArg, String> {
    let parts: Vec<&str> = text.rsplitn(4, ':').collect();
    let [admin, plain, direct, host] = parts[..] else {
        return Err(format!("{text:?}: expected host:direct:plain:admin, e.g. 127.0.0.1:7100:7000:7200"));
    };
    let port = |what: &str, p: &str| p.parse::<u16>().map_err(|_| format!("{text:?}: {what} port {p:?} is not a port"));
    if host.is_empty() {
        return Err(format!("{text:?}: the host is empty"));
    }
    Ok(NodeArg {
        host: host.to_owned(),
        direct: port("direct", direct)?,
        plain: port("plain", plain)?,
        admin: port("admin", admin)?,
    })
}

impl NodesArgs {
    fn endpoints(&self) -> Result<Vec<AdminEndpoint>, String> {
        let password = match &self.password_file {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| format!("reading the admin password from {}: {e}", path.display()))?
                    .trim_end()
                    .to_owned(),
            ),
            None => None,
        };
        let timeout = Duration::from_secs_f64(self.timeout);
        let tls = self.tls.config()?;
        self.nodes
            .iter()
            .map(|n| {
                let tls = match &tls {
                    Some(config) => {
                        Some(AdminTls { config: config.clone(), server_name: self.tls.server_name(&n.host)? })
                    }
                    None => None,
                };
                Ok(AdminEndpoint {
                    address: format!("{}:{}", n.host, n.admin),
                    password: password.clone(),
                    timeout,
                    tls,
                })
            })
            .collect()
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Push { nodes, epoch, id_prefix } => push(&nodes, epoch, id_prefix).await,
        Command::Status { nodes } => status(&nodes).await,
        Command::Rebalance { nodes, shards, batch, attempts, weigh_keys, id_prefix } => {
            rebalance(&nodes, shards, batch, attempts, weigh_keys, id_prefix).await
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("strata-cluster: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn push(args: &NodesArgs, epoch: Option<u64>, id_prefix: Option<String>) -> Result<(), String> {
    let endpoints = args.endpoints()?;
    let prefix = id_prefix.unwrap_or_else(|| format!("local/{}", args.nodes[0].plain));
    let nodes: Vec<TopologyNode> =
        spread(args.nodes.len()).into_iter().enumerate().map(|(i, slots)| entry(args, &prefix, i, slots)).collect();
    let epoch = match epoch {
        Some(0) => return Err("--epoch must be at least 1".to_owned()),
        Some(e) => e,
        None => {
            let mut highest = 0;
            for endpoint in &endpoints {
                let reported = client::get(endpoint).await.map_err(|e| format!("reading the current epoch: {e}"))?;
                highest = highest.max(reported.map_or(0, |r| r.epoch));
            }
            highest + 1
        }
    };
    let topology = Topology { epoch, nodes };
    let mut failed = 0;
    for (endpoint, node) in endpoints.iter().zip(&topology.nodes) {
        match client::push(endpoint, &topology, &node.id).await {
            Ok(applied) => println!("pushed epoch {applied} to node {} at {}", node.id, endpoint.address),
            Err(e) => {
                eprintln!("strata-cluster: node {}: {e}", node.id);
                failed += 1;
            }
        }
    }
    if failed > 0 {
        return Err(format!("{failed} of {} nodes did not apply epoch {epoch}", endpoints.len()));
    }
    Ok(())
}

async fn status(args: &NodesArgs) -> Result<(), String> {
    let endpoints = args.endpoints()?;
    let mut unreachable = 0;
    for (endpoint, arg) in endpoints.iter().zip(&args.nodes) {
        let line = match client::get(endpoint).await {
            Ok(Some(reported)) => {
                let me = reported.me();
                let (host, direct, plain) = me.map_or((arg.host.as_str(), arg.direct, arg.plain), |m| {
                    (m.ip.as_str(), m.direct_port, m.plain_port)
                });
                format!(
                    "node {} cluster {host}:{direct} plain {host}:{plain} epoch {} slots {}",
                    reported.myid,
                    reported.epoch,
                    me.map_or(0, TopologyNode::slot_count)
                )
            }
            Ok(None) => {
                format!("node - cluster {0}:{1} plain {0}:{2} epoch 0 slots 0", arg.host, arg.direct, arg.plain)
            }
            Err(e) => {
                eprintln!("strata-cluster: {e}");
                unreachable += 1;
                continue;
            }
        };
        println!("{line}");
    }
    if unreachable > 0 {
        return Err(format!("{unreachable} of {} nodes did not answer", endpoints.len()));
    }
    Ok(())
}

/// The node entry of argument `i` with `slots`.
fn entry(args: &NodesArgs, prefix: &str, i: usize, slots: Vec<SlotRange>) -> TopologyNode {
    let n = &args.nodes[i];
    TopologyNode {
        id: NodeId::from_seed(&format!("{prefix}/{i}")),
        ip: n.host.clone(),
        hostname: None,
        direct_port: n.direct,
        plain_port: n.plain,
        slots,
        admin_port: n.admin,
    }
}

/// Pushes `layout` over the first `members` nodes at `epoch`, in `order` (groups of indexes):
/// every member must apply it.
async fn push_layout(
    args: &NodesArgs,
    endpoints: &[AdminEndpoint],
    prefix: &str,
    epoch: u64,
    layout: &[Vec<SlotRange>],
    order: &[usize],
) -> Result<Topology, String> {
    let nodes: Vec<TopologyNode> = layout.iter().enumerate().map(|(i, s)| entry(args, prefix, i, s.clone())).collect();
    let topology = Topology { epoch, nodes };
    for &i in order {
        client::push(&endpoints[i], &topology, &topology.nodes[i].id)
            .await
            .map_err(|e| format!("node {i} did not apply epoch {epoch}: {e}"))?;
    }
    Ok(topology)
}

/// Targets first, then the others, sources last (the contract's push order after a commit).
fn order_after(members: usize, mv: Option<&Move>) -> Vec<usize> {
    let Some(mv) = mv else { return (0..members).collect() };
    let (s, t) = (mv.source as usize, mv.target as usize);
    std::iter::once(t).chain((0..members).filter(|&i| i != s && i != t)).chain(std::iter::once(s)).collect()
}

/// `12345` as `12,345`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

async fn rebalance(
    args: &NodesArgs,
    shards: Option<usize>,
    batch: u32,
    attempts: u32,
    weigh_keys: bool,
    id_prefix: Option<String>,
) -> Result<(), String> {
    let endpoints = args.endpoints()?;
    let prefix = id_prefix.unwrap_or_else(|| format!("local/{}", args.nodes[0].plain));
    let count = args.nodes.len();
    let shards = shards.unwrap_or(count);
    if shards == 0 || shards > count {
        return Err(format!("--shards must be 1..{count} (the nodes given)"));
    }
    // Where the cluster stands: the highest epoch any node holds.
    let mut current: Option<Reported> = None;
    for (i, endpoint) in endpoints.iter().enumerate() {
        let reported = client::get(endpoint).await.map_err(|e| format!("node {i}: {e}"))?;
        if let Some(r) = reported
            && current.as_ref().is_none_or(|c| r.epoch > c.epoch)
        {
            current = Some(r);
        }
    }
    let Some(current) = current else { return Err("no node has a topology: run `push` first".to_owned()) };
    let ids: Vec<NodeId> = (0..count).map(|i| NodeId::from_seed(&format!("{prefix}/{i}"))).collect();
    let mut layout: Vec<Vec<SlotRange>> = vec![Vec::new(); count];
    for node in &current.nodes {
        match ids.iter().position(|id| *id == node.id) {
            Some(i) => layout[i] = node.slots.clone(),
            None if node.slots.is_empty() => {}
            None => {
                return Err(format!(
                    "node {} ({}:{}) owns slots but is not among the nodes given",
                    node.id, node.ip, node.plain_port
                ));
            }
        }
    }
    let mut epoch = current.epoch;
    // Every node given must be a member before it can receive slots.
    let members_now = current.nodes.len();
    if members_now != count || current.nodes.iter().zip(&ids).any(|(n, id)| n.id != *id) {
        epoch += 1;
        push_layout(args, &endpoints, &prefix, epoch, &layout, &order_after(count, None)).await?;
        println!("epoch {epoch}: {count} nodes in the topology (new ones without slots)");
    }
    let weights = if weigh_keys { key_counts(&endpoints, &layout).await } else { None };
    let moves = plan::plan(&layout, shards as u32, weights.as_deref(), batch);
    let total: u32 = moves.iter().map(Move::slot_count).sum();
    println!("plan: {total} slots in {} migrations over {shards} shards", moves.len());
    let started = Instant::now();
    for (n, mv) in moves.iter().enumerate() {
        let slots = render_ranges(&mv.slots);
        let target = &args.nodes[mv.target as usize];
        let target_admin = format!("{}:{}", target.host, target.admin);
        print!("moving slots {slots} from node {} to node {} ... ", mv.source, mv.target);
        let _ = std::io::Write::flush(&mut std::io::stdout());
        let mut attempt = 1;
        let report = loop {
            let mid = format!("cli-e{epoch}-s{}-t{}-{}-{attempt}", mv.source, mv.target, n + 1);
            let source = &endpoints[mv.source as usize];
            let outcome = match migrate::start(source, &mid, &ids[mv.target as usize], &target_admin, &mv.slots).await {
                Ok(()) => wait_for(source, &mid).await,
                Err(e) => Err(e.to_string()),
            };
            match outcome {
                Ok(report) => break report,
                Err(why) if attempt < attempts => {
                    eprintln!("strata-cluster: migration {mid} failed: {why}; retrying");
                    attempt += 1;
                    tokio::time::sleep(Duration::from_secs(1 << attempt.min(5))).await;
                }
                Err(why) => {
                    println!("failed");
                    return Err(format!("migration {mid} failed {attempts} times; the last: {why}"));
                }
            }
        };
        println!("{} keys in {:.1} s", thousands(report.keys), report.elapsed_ms as f64 / 1000.0);
        layout = plan::apply(&layout, std::slice::from_ref(mv), count);
        epoch += 1;
        push_layout(args, &endpoints, &prefix, epoch, &layout, &order_after(count, Some(mv))).await?;
    }
    if shards < count {
        // The drained nodes leave the topology; they own nothing now.
        epoch += 1;
        let order: Vec<usize> = (0..shards).collect();
        push_layout(args, &endpoints, &prefix, epoch, &layout[..shards], &order).await?;
        println!("epoch {epoch}: nodes {shards}..{} drained and out of the topology", count - 1);
    }
    println!(
        "topology epoch {epoch} applied on all {shards} nodes; {total} slots moved in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Each slot's key count, asked of its owner (`None` when a node does not answer).
async fn key_counts(endpoints: &[AdminEndpoint], layout: &[Vec<SlotRange>]) -> Option<Vec<u64>> {
    let mut weights = vec![0u64; usize::from(strata_operator::topology::SLOTS)];
    for (i, ranges) in layout.iter().enumerate() {
        let slots: Vec<u16> = ranges.iter().flat_map(|r| r.first..=r.last).collect();
        let commands: Vec<Vec<String>> =
            slots.iter().map(|s| ["CLUSTER", "COUNTKEYSINSLOT", &s.to_string()].map(str::to_owned).to_vec()).collect();
        let mut endpoint = endpoints[i].clone();
        endpoint.timeout = endpoint.timeout.max(Duration::from_secs(30));
        match client::call_pipelined(&endpoint, &commands).await {
            Ok(replies) => {
                for (slot, reply) in slots.iter().zip(replies) {
                    match reply {
                        client::Reply::Integer(n) => weights[usize::from(*slot)] = n.max(0) as u64,
                        other => {
                            eprintln!("strata-cluster: node {i} answers {other:?} to COUNTKEYSINSLOT: even weights");
                            return None;
                        }
                    }
                }
            }
            Err(e) => {
                eprintln!("strata-cluster: counting keys on node {i}: {e}: even weights");
                return None;
            }
        }
    }
    println!("weights: {} keys over 16384 slots", thousands(weights.iter().sum()));
    Some(weights)
}

/// Polls a migration on its source until it commits (the report) or stops (why).
async fn wait_for(source: &AdminEndpoint, mid: &str) -> Result<migrate::MigrationReport, String> {
    loop {
        match migrate::status(source, mid).await {
            Ok(Some(r)) if r.phase == Phase::Committed => return Ok(r),
            Ok(Some(r)) if r.phase.in_flight() => {}
            Ok(Some(r)) => return Err(format!("{:?}: {}", r.phase, r.error)),
            Ok(None) => return Err("the source reports no migration".to_owned()),
            // A source restarting in the handover resolves it by itself: ask again.
            Err(e) => eprintln!("strata-cluster: asking {}: {e}", source.address),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_arguments_parse() {
        let n = parse_node("127.0.0.1:7100:7000:7200").unwrap();
        assert_eq!((n.host.as_str(), n.direct, n.plain, n.admin), ("127.0.0.1", 7100, 7000, 7200));
        assert!(parse_node("127.0.0.1:7100:7000").is_err());
        assert!(parse_node("h:1:2:70000").unwrap_err().contains("admin port"));
        assert!(parse_node(":1:2:3").is_err());
    }

    #[test]
    fn pushes_after_a_move_go_to_the_target_first_and_the_source_last() {
        let mv = Move { source: 0, target: 3, slots: Vec::new() };
        assert_eq!(order_after(4, Some(&mv)), [3, 1, 2, 0]);
        assert_eq!(order_after(3, None), [0, 1, 2]);
        assert_eq!(thousands(12345), "12,345");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000_000), "1,000,000");
    }
}
