//! `strata-cluster`: pushes a topology to Strata nodes in cluster mode and shows what each has
//! applied, with the operator's own topology code (ids, slot spread, push client). Made for
//! local clusters (`scripts/local-cluster.sh`) and for looking at a node by hand.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use strata_operator::topology::client::{self, AdminEndpoint};
use strata_operator::topology::{NodeId, Topology, TopologyNode, spread};

/// Push a Redis Cluster topology to Strata nodes, or show the one each node applied.
///
/// Each NODE is `host:direct:plain:admin`: the host the nodes and clients reach it at, its
/// direct port (where MOVED sends cluster-aware clients), its plain port (any client; a command
/// for another node's slot is forwarded) and its admin port (where topologies are pushed).
/// Nodes are shards in the order given: the 16384 slots are spread over them evenly as
/// `redis-cli --cluster create` does (3 nodes: 0-5460, 5461-10922, 10923-16383), and node i's
/// id is sha1("<id-prefix>/<i>").
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
        Ok(self
            .nodes
            .iter()
            .map(|n| AdminEndpoint { address: format!("{}:{}", n.host, n.admin), password: password.clone(), timeout })
            .collect())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Push { nodes, epoch, id_prefix } => push(&nodes, epoch, id_prefix).await,
        Command::Status { nodes } => status(&nodes).await,
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
    let nodes: Vec<TopologyNode> = args
        .nodes
        .iter()
        .zip(spread(args.nodes.len()))
        .enumerate()
        .map(|(i, (n, slots))| TopologyNode {
            id: NodeId::from_seed(&format!("{prefix}/{i}")),
            ip: n.host.clone(),
            hostname: None,
            direct_port: n.direct,
            plain_port: n.plain,
            slots,
            admin_port: n.admin,
        })
        .collect();
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
}
