//! Cluster mode: the topology a CacheCluster's pods should run, what the nodes report, and the
//! push that brings them together.
//!
//! The operator is the only source of topology (no gossip): on every reconcile it builds the
//! desired topology from the pods (ids from the CacheCluster UID and ordinal, each pod's IP
//! and headless DNS name, the slots each owns as last pushed, plus migrations committed since:
//! see `resharding`), asks every node what it has applied,
//! and pushes a new epoch to every node when they differ. The epoch never goes backwards:
//! the next one is above both the status' epoch and any epoch a node reports, so a restarted
//! operator (or one whose status write was lost) carries on from what the nodes hold.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::core::v1::{Pod, Secret};
use rustls::pki_types::ServerName;

use crate::api::{CacheClusterStatus, NodeStatus, ReshardingStatus};
use crate::resources::{ADMIN_PORT, DIRECT_PORT, admin_tls_secret};
use crate::topology::client::{self, AdminEndpoint, AdminError, AdminTls};
use crate::topology::plan::{Move, render_ranges};
use crate::topology::{NodeId, Reported, SLOTS, SlotRange, Topology, TopologyNode};

use super::resharding::Notice;

/// The plain port every pod serves (the node's `port`).
const PLAIN_PORT: u16 = 6379;
/// Bound on one admin call: a node that takes longer is counted as not answering this time.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(2);

/// How the operator reaches a cluster's admin ports this round.
#[derive(Clone, Debug, Default)]
pub struct AdminAccess {
    /// The cluster admin password, sent with `AUTH`.
    pub password: Option<String>,
    /// The client config for each TLS Secret a pod's TLS admin port serves (see
    /// [`Member::tls_secret`]), built once per round; Err: why that Secret cannot serve (an
    /// earlier spec's Secret, gone or broken: the current spec's stops the round instead).
    pub tls: BTreeMap<String, Result<Arc<rustls::ClientConfig>, String>>,
    /// `<name>-headless.<namespace>.svc`: pod `p` is `p.<headless_domain>`, the name its
    /// certificate is checked against (it is reached at its IP, which no certificate names).
    pub headless_domain: String,
}

/// Why the admin ports cannot be reached over TLS this round: nothing is read or pushed.
#[derive(Clone, Debug, PartialEq)]
pub enum TlsProblem {
    /// cert-manager has not issued the Secret yet: a new cluster waits for it.
    NotIssued(String),
    /// The Secret is missing or cannot serve: the message says what to fix.
    Unusable(String),
}

impl TlsProblem {
    /// What is wrong, and what to do.
    pub fn why(&self) -> &str {
        match self {
            TlsProblem::NotIssued(why) | TlsProblem::Unusable(why) => why,
        }
    }
}

/// The client config for the admin ports from the TLS Secret `secret_ref` (`namespace/name`;
/// None: not found): trust `ca.crt` (the nodes' certificates are checked against it), present
/// `tls.crt`/`tls.key` (the nodes ask for a client certificate when `clientAuth` is not `None`).
pub fn admin_tls_config(
    secret: Option<&Secret>,
    secret_ref: &str,
    from_cert_manager: bool,
) -> Result<Arc<rustls::ClientConfig>, TlsProblem> {
    let Some(secret) = secret else {
        return Err(if from_cert_manager {
            TlsProblem::NotIssued(format!("waiting for cert-manager to issue the TLS Secret {secret_ref}"))
        } else {
            TlsProblem::Unusable(format!(
                "the TLS Secret {secret_ref} does not exist: create it (kubernetes.io/tls with tls.crt, tls.key and \
                 ca.crt) or correct spec.tls.secretName; the nodes' admin ports cannot be reached without it"
            ))
        });
    };
    let key = |name: &str| {
        let value = secret.data.as_ref().and_then(|d| d.get(name)).map(|b| b.0.as_slice());
        value.filter(|v| !v.is_empty())
    };
    let Some(ca) = key("ca.crt") else {
        return Err(TlsProblem::Unusable(format!(
            "Secret {secret_ref} has no ca.crt: in cluster mode with TLS the operator checks the nodes' \
             certificates against it, and the nodes each other's; add the CA that signed tls.crt"
        )));
    };
    let unusable = |file: &str, why: String| TlsProblem::Unusable(format!("Secret {secret_ref}: {file}: {why}"));
    let missing = |file: &str| unusable(file, "missing or empty".to_owned());
    let roots = client::pem_certificates(ca).map_err(|e| unusable("ca.crt", e))?;
    let chain = client::pem_certificates(key("tls.crt").ok_or_else(|| missing("tls.crt"))?)
        .map_err(|e| unusable("tls.crt", e))?;
    let private_key = client::pem_private_key(key("tls.key").ok_or_else(|| missing("tls.key"))?)
        .map_err(|e| unusable("tls.key", e))?;
    client::tls_config(roots, Some((chain, private_key)))
        .map_err(|e| TlsProblem::Unusable(format!("Secret {secret_ref}: {e}")))
}

/// The client config for the admin ports of pods that still mount the TLS Secret `secret_ref`
/// of an earlier spec (the spec now names another Secret, or none): Err says why they cannot be
/// reached, which the rollout that replaces them does not wait for.
pub fn earlier_tls_config(secret: Option<&Secret>, secret_ref: &str) -> Result<Arc<rustls::ClientConfig>, String> {
    let until = "its TLS admin port cannot be reached until the rollout replaces the pod";
    let Some(secret) = secret else {
        return Err(format!("the TLS Secret {secret_ref} it mounts (from an earlier spec) does not exist: {until}"));
    };
    admin_tls_config(Some(secret), secret_ref, false).map_err(|problem| match problem {
        TlsProblem::Unusable(why) | TlsProblem::NotIssued(why) => {
            format!("{why} (the TLS Secret it mounts, from an earlier spec): {until}")
        }
    })
}

/// The pods the operator cannot reach because the TLS Secret they mount (an earlier spec's) cannot
/// serve: the rollout replaces them, so it must not wait for them to apply the topology.
pub fn unreachable_by_tls(pods: &[Pod], access: &AdminAccess) -> Vec<String> {
    pods.iter()
        .filter(|p| admin_tls_secret(p).is_some_and(|s| matches!(access.tls.get(&s), Some(Err(_)))))
        .filter_map(|p| p.metadata.name.clone())
        .collect()
}

/// Whether an admin call failed below the protocol: no connection, no TLS session, a broken
/// stream, no answer in time. Not a reply, error or unexpected (a refused AUTH, a stale epoch):
/// that comes from a node that listens and speaks as it is spoken to.
pub fn transport_failure(e: &AdminError) -> bool {
    matches!(e, AdminError::Io { .. } | AdminError::Timeout { .. } | AdminError::Tls { .. })
}

/// Of `candidates` (pods of StatefulSet `name` at an old revision that lag behind the recorded
/// topology), those whose admin port the operator cannot reach at all: not running, or a
/// [`transport_failure`]. Such as an old pod whose container restarted mid-rollout: it read the
/// shared ConfigMap again and speaks the new spec's admin protocol, while its annotation (and
/// so the operator) says the old one. The rollout replaces them anyway: they go first, and do
/// not hold up their own replacement.
pub async fn unreachable_old_pods(
    name: &str,
    pods: &[Pod],
    candidates: &[String],
    access: &AdminAccess,
) -> Vec<String> {
    let width = candidates
        .iter()
        .filter_map(|c| c.strip_prefix(name)?.strip_prefix('-')?.parse::<usize>().ok())
        .max()
        .map_or(0, |o| o + 1);
    let members: Vec<Member> = members(name, width, pods).into_iter().filter(|m| candidates.contains(&m.pod)).collect();
    let unreachable = join_all(members.iter().map(|m| async move {
        match endpoint(m, access) {
            Err(_) => true,
            Ok(endpoint) => client::get(&endpoint).await.is_err_and(|e| transport_failure(&e)),
        }
    }))
    .await;
    members.into_iter().zip(unreachable).filter(|(_, u)| *u).map(|(m, _)| m.pod).collect()
}

/// One desired shard's pod as seen in the API.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    pub ordinal: u32,
    pub pod: String,
    /// The pod's current IP, when it has one and runs (its admin port may answer).
    pub ip: Option<String>,
    /// The TLS Secret the pod's admin port serves with, None when it speaks plain TCP. Per pod,
    /// not per spec: while a rolling update turns `spec.tls` on or off, old and new pods speak
    /// differently, and a pod spoken to the wrong way would never answer, count as lagging and
    /// stop the paced rollout that is to replace it.
    pub tls_secret: Option<String>,
}

/// The pods `<name>-0` .. `<name>-<width-1>`, with the IP of those that run.
pub fn members(name: &str, width: usize, pods: &[Pod]) -> Vec<Member> {
    (0..width as u32)
        .map(|ordinal| {
            let pod = format!("{name}-{ordinal}");
            let found = pods
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(&pod) && p.metadata.deletion_timestamp.is_none());
            let ip = found
                .and_then(|p| p.status.as_ref())
                .filter(|s| s.phase.as_deref() == Some("Running"))
                .and_then(|s| s.pod_ip.clone())
                .filter(|ip| !ip.is_empty());
            Member { ordinal, pod, ip, tls_secret: found.and_then(admin_tls_secret) }
        })
        .collect()
}

/// The nodes of the desired topology, member `i` owning `layout[i]`, or why there is none yet.
/// A pod without an IP (being recreated) keeps the IP last pushed for it, so its absence alone
/// changes nothing; a pod that never had one makes the operator wait (a first topology with a
/// hole would only be replaced).
pub fn desired_nodes(
    uid: &str,
    headless_domain: &str,
    members: &[Member],
    layout: &[Vec<SlotRange>],
    previous: &[NodeStatus],
) -> Result<Vec<TopologyNode>, String> {
    members
        .iter()
        .zip(layout.iter().cloned().chain(std::iter::repeat(Vec::new())))
        .map(|(m, slots)| {
            let ip =
                m.ip.clone()
                    .or_else(|| previous.iter().find(|n| n.pod == m.pod).and_then(|n| n.ip.clone()))
                    .ok_or_else(|| format!("waiting for pod {} to get an IP", m.pod))?;
            Ok(TopologyNode {
                id: NodeId::of_pod(uid, m.ordinal),
                ip,
                hostname: Some(format!("{}.{headless_domain}", m.pod)),
                direct_port: DIRECT_PORT as u16,
                plain_port: PLAIN_PORT,
                slots,
                // Nodes forward plain clients' commands to each other's admin port.
                admin_port: ADMIN_PORT as u16,
            })
        })
        .collect()
}

/// The last pushed topology's nodes as the status records them, to compare with the desired
/// ones: same ids, pods, IPs and slots in the same order means the same layout (ports are
/// fixed; a status written before slots were recorded had the even spread, as desired then).
fn same_as_pushed(desired: &[TopologyNode], previous: &[NodeStatus], shards: Option<i32>) -> bool {
    shards == Some(desired.len() as i32)
        && previous.len() == desired.len()
        && desired.iter().zip(previous).all(|(d, p)| {
            d.id.as_str() == p.id
                && p.ip.as_deref() == Some(d.ip.as_str())
                && p.slots.as_deref().is_none_or(|s| s == render_ranges(&d.slots))
        })
}

/// What a node said when asked for its topology.
#[derive(Clone, Debug, PartialEq)]
pub enum Report {
    /// No IP, or no answer (starting, down): it cannot be pushed to now.
    Unreachable(String),
    /// Answered: `None` when it has no topology.
    Applied(Option<Reported>),
}

impl Report {
    fn epoch(&self) -> Option<u64> {
        match self {
            Report::Unreachable(_) => None,
            Report::Applied(r) => Some(r.as_ref().map_or(0, |r| r.epoch)),
        }
    }
}

/// What to do about the topology.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Every node that answers runs `epoch` with the desired layout.
    InSync { epoch: u64 },
    /// Push this topology to every node that answers; `why` is for the Event.
    Push { topology: Topology, why: String },
}

/// Decides from the desired nodes, each member's report and the status. A new epoch is pushed
/// when the layout differs from the last pushed one (a pod has a new IP, `replicas` changed),
/// when a node that answers has an older epoch or none (restarted without its volume), or when
/// a node holds a newer epoch than the status knows (the status was lost). Nodes that do not
/// answer do not trigger a push: they are pushed to with the others once they answer.
pub fn decide(
    desired: &[TopologyNode],
    members: &[Member],
    reports: &[Report],
    status_epoch: u64,
    previous: &[NodeStatus],
    previous_shards: Option<i32>,
) -> Decision {
    let highest = reports.iter().filter_map(Report::epoch).chain([status_epoch]).max().unwrap_or(0);
    // Every node that answers already runs the desired layout at the highest epoch: nothing to
    // push, whatever the status says (it may be stale in the watch cache, or lost).
    let answering: Vec<(usize, &Report)> =
        reports.iter().enumerate().filter(|(_, r)| !matches!(r, Report::Unreachable(_))).collect();
    let runs_desired = |i: usize, r: &Report| match r {
        Report::Applied(Some(r)) => r.epoch == highest && r.myid == desired[i].id && r.nodes == desired,
        _ => false,
    };
    if !answering.is_empty() && answering.iter().all(|(i, r)| runs_desired(*i, r)) {
        return Decision::InSync { epoch: highest };
    }
    let mut why = Vec::new();
    if status_epoch == 0 && highest > 0 {
        why.push(format!("no topology recorded in status; nodes hold up to epoch {highest} of another layout"));
    } else if status_epoch == 0 {
        why.push(format!("first topology of {} shards", desired.len()));
    } else if !same_as_pushed(desired, previous, previous_shards) {
        if previous_shards != Some(desired.len() as i32) {
            why.push(format!("{} shards instead of {}", desired.len(), previous_shards.unwrap_or(0)));
        }
        for (node, member) in desired.iter().zip(members) {
            let was = previous.iter().find(|p| p.pod == member.pod).and_then(|p| p.slots.as_deref());
            let now = render_ranges(&node.slots);
            if was.is_some_and(|w| w != now) {
                why.push(format!("{} owns {now} (was {})", member.pod, was.unwrap_or("-")));
            }
        }
        for (node, member) in desired.iter().zip(members) {
            let was = previous.iter().find(|p| p.pod == member.pod).and_then(|p| p.ip.as_deref());
            if was.is_some_and(|w| w != node.ip) {
                why.push(format!("{} moved to {} (was {})", member.pod, node.ip, was.unwrap_or("-")));
            }
        }
        if why.is_empty() {
            why.push("the pods changed".to_owned());
        }
    }
    if highest > status_epoch && status_epoch > 0 {
        why.push(format!("a node holds epoch {highest}, newer than the recorded {status_epoch}"));
    }
    for (member, report) in members.iter().zip(reports) {
        match report {
            Report::Applied(None) if status_epoch > 0 => why.push(format!("{} has no topology", member.pod)),
            Report::Applied(Some(r)) if r.epoch < highest => {
                why.push(format!("{} has epoch {} of {highest}", member.pod, r.epoch))
            }
            _ => {}
        }
    }
    if why.is_empty() {
        return Decision::InSync { epoch: highest };
    }
    Decision::Push { topology: Topology { epoch: highest + 1, nodes: desired.to_vec() }, why: why.join("; ") }
}

/// The outcome of one round, for status, conditions and the Event.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterState {
    pub epoch: u64,
    pub shards: i32,
    pub slots_covered: u32,
    pub nodes: Vec<NodeStatus>,
    /// Nodes not at `epoch` (pod: why), for Degraded.
    pub lagging: Vec<String>,
    /// Why the operator pushed this round, when it did.
    pub pushed: Option<String>,
    /// Why no topology could be built yet.
    pub waiting: Option<String>,
    /// The resharding plan after this round (None: the slots are balanced).
    pub resharding: Option<ReshardingStatus>,
    /// A move refused for want of room on its target (Degraded/InsufficientCapacity).
    pub capacity: Option<String>,
    /// Why the admin ports cannot be reached over TLS (the TLS Secret is unusable): nothing
    /// was read or pushed (Degraded/TLSSecretUnusable).
    pub admin_tls: Option<String>,
    /// What happened to the plan this round, for Events.
    pub notices: Vec<Notice>,
}

impl ClusterState {
    /// What the status recorded last round, for a round that did not reach the nodes.
    pub fn as_recorded(status: &CacheClusterStatus) -> Self {
        ClusterState {
            epoch: status.topology_epoch.unwrap_or(0),
            shards: status.shards.unwrap_or(0),
            nodes: status.nodes.clone(),
            // What the nodes serve has not changed: the last round's coverage still holds.
            slots_covered: status.slots_covered.unwrap_or(0).max(0) as u32,
            resharding: status.resharding.clone(),
            ..Default::default()
        }
    }

    /// The recorded state of a round stopped by `problem` with the TLS Secret.
    pub fn without_tls(status: &CacheClusterStatus, problem: TlsProblem) -> Self {
        let mut state = Self::as_recorded(status);
        match problem {
            TlsProblem::NotIssued(why) => state.waiting = Some(why),
            TlsProblem::Unusable(why) => state.admin_tls = Some(why),
        }
        state
    }

    /// In sync, fully covered and balanced: nothing to look at again soon.
    pub fn settled(&self) -> bool {
        self.in_sync() && self.slots_covered == u32::from(SLOTS) && self.resharding.is_none()
    }

    /// Every member applied the current epoch: migrations may start.
    pub fn in_sync(&self) -> bool {
        self.waiting.is_none() && self.admin_tls.is_none() && self.lagging.is_empty() && self.epoch > 0
    }

    /// Degraded's message when slots are uncovered or a node lags.
    pub fn problem(&self) -> Option<String> {
        if let Some(why) = &self.waiting {
            // A new cluster waiting for its pods is being created (Progressing), not degraded.
            return (self.epoch > 0).then(|| format!("topology epoch {} cannot be updated: {why}", self.epoch));
        }
        if self.lagging.is_empty() && self.slots_covered == u32::from(SLOTS) {
            return None;
        }
        Some(format!(
            "{} of {} slots served at topology epoch {}; {}",
            self.slots_covered,
            SLOTS,
            self.epoch,
            self.lagging.join("; ")
        ))
    }
}

/// Asks every member for its topology (concurrently; one without an IP is unreachable).
pub async fn read_reports(members: &[Member], access: &AdminAccess) -> Vec<Report> {
    join_all(members.iter().map(|m| async move {
        let endpoint = match endpoint(m, access) {
            Ok(endpoint) => endpoint,
            Err(why) => return Report::Unreachable(why),
        };
        match client::get(&endpoint).await {
            Ok(reported) => Report::Applied(reported),
            Err(e) => Report::Unreachable(short(&e)),
        }
    }))
    .await
}

/// Pushes `topology` to every member with an IP; per member, the epoch it applied or why not.
/// When it confirms `committed` migrations, the contract's order: their targets first, then
/// every other node, their sources last (a source deletes its copy of the moved slots when it
/// applies the epoch). Within a group, concurrently.
pub async fn push_all(
    members: &[Member],
    topology: &Topology,
    access: &AdminAccess,
    committed: &[Move],
) -> Vec<Result<u64, String>> {
    let mut applied: Vec<Result<u64, String>> = vec![Err("not pushed".to_owned()); members.len()];
    for group in push_order(members.len(), committed) {
        let results = join_all(group.iter().map(|&i| {
            let (m, node) = (&members[i], &topology.nodes[i]);
            async move {
                let endpoint = endpoint(m, access)?;
                client::push(&endpoint, topology, &node.id).await.map_err(|e| short(&e))
            }
        }))
        .await;
        for (i, result) in group.into_iter().zip(results) {
            applied[i] = result;
        }
    }
    applied
}

/// The members in push groups: targets of `committed`, the others, sources (a node both a
/// source and a target counts as a source: it releases slots).
pub fn push_order(members: usize, committed: &[Move]) -> Vec<Vec<usize>> {
    let is_source = |i: usize| committed.iter().any(|m| m.source as usize == i);
    let is_target = |i: usize| committed.iter().any(|m| m.target as usize == i);
    let targets: Vec<usize> = (0..members).filter(|&i| is_target(i) && !is_source(i)).collect();
    let others: Vec<usize> = (0..members).filter(|&i| !is_target(i) && !is_source(i)).collect();
    let sources: Vec<usize> = (0..members).filter(|&i| is_source(i)).collect();
    [targets, others, sources].into_iter().filter(|g| !g.is_empty()).collect()
}

/// The state after a round: `applied` is each member's epoch (None: no answer) and why not.
pub fn state(
    topology_epoch: u64,
    desired: &[TopologyNode],
    members: &[Member],
    applied: &[Result<u64, String>],
    pushed: Option<String>,
) -> ClusterState {
    let mut lagging = Vec::new();
    let mut covered = 0;
    let mut nodes = Vec::new();
    for ((node, member), applied) in desired.iter().zip(members).zip(applied) {
        match applied {
            Ok(e) if *e == topology_epoch => covered += node.slot_count(),
            Ok(0) => lagging.push(format!("{} has no topology", member.pod)),
            Ok(e) => lagging.push(format!("{} has epoch {e}", member.pod)),
            Err(why) => lagging.push(format!("{}: {why}", member.pod)),
        }
        nodes.push(NodeStatus {
            pod: member.pod.clone(),
            id: node.id.to_string(),
            ip: Some(node.ip.clone()),
            applied_epoch: applied.as_ref().ok().copied(),
            slots: Some(render_ranges(&node.slots)),
        });
    }
    ClusterState {
        epoch: topology_epoch,
        shards: desired.len() as i32,
        slots_covered: covered,
        nodes,
        lagging,
        pushed,
        ..Default::default()
    }
}

/// The member's admin endpoint, in the protocol its own pod speaks (TLS with the Secret it
/// mounts, or plain), or why it cannot be reached (no IP; its TLS Secret cannot serve).
pub fn endpoint(member: &Member, access: &AdminAccess) -> Result<AdminEndpoint, String> {
    let ip = member.ip.as_ref().ok_or_else(|| "no IP (not running)".to_owned())?;
    let tls = match &member.tls_secret {
        None => None,
        Some(secret) => {
            let config = match access.tls.get(secret) {
                Some(Ok(config)) => config.clone(),
                Some(Err(why)) => return Err(why.clone()),
                None => return Err(format!("no client config for its TLS Secret {secret}")),
            };
            let name = format!("{}.{}", member.pod, access.headless_domain);
            // Pod names and namespaces are DNS labels: this is always a valid DNS name.
            let server_name = ServerName::try_from(name).map_err(|e| format!("TLS server name: {e}"))?;
            Some(AdminTls { config, server_name })
        }
    };
    Ok(AdminEndpoint { address: admin_address(ip), password: access.password.clone(), timeout: ADMIN_TIMEOUT, tls })
}

/// `host:port` of the admin port at `ip`.
pub fn admin_address(ip: &str) -> String {
    // An IPv6 pod IP needs brackets in host:port.
    let host = if ip.contains(':') { format!("[{ip}]") } else { ip.to_owned() };
    format!("{host}:{ADMIN_PORT}")
}

pub fn short(e: &AdminError) -> String {
    match e {
        AdminError::Refused { message, .. } => format!("refused: {message}"),
        AdminError::Timeout { timeout, .. } => format!("no answer on the admin port within {timeout:?}"),
        AdminError::Tls { source, .. } => format!("TLS on the admin port: {source}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::spread;

    const UID: &str = "8d1c6a3e-0b59-4c1e-9f0e-2f6f3c5a7b11";
    const DOMAIN: &str = "demo-headless.shop.svc";

    fn member(ordinal: u32, ip: Option<&str>) -> Member {
        Member { ordinal, pod: format!("demo-{ordinal}"), ip: ip.map(str::to_owned), tls_secret: None }
    }

    fn three(ips: [Option<&str>; 3]) -> Vec<Member> {
        ips.iter().enumerate().map(|(i, ip)| member(i as u32, *ip)).collect()
    }

    fn recorded(nodes: &[TopologyNode], epoch: u64) -> Vec<NodeStatus> {
        nodes
            .iter()
            .enumerate()
            .map(|(i, n)| NodeStatus {
                pod: format!("demo-{i}"),
                id: n.id.to_string(),
                ip: Some(n.ip.clone()),
                applied_epoch: Some(epoch),
                slots: Some(render_ranges(&n.slots)),
            })
            .collect()
    }

    fn at(epoch: u64, nodes: &[TopologyNode], me: usize) -> Report {
        Report::Applied(Some(Reported { epoch, myid: nodes[me].id.clone(), nodes: nodes.to_vec() }))
    }

    #[test]
    fn desired_nodes_have_stable_ids_even_slots_and_dns_names() {
        let members = three([Some("10.0.0.1"), Some("10.0.0.2"), Some("10.0.0.3")]);
        let nodes = desired_nodes(UID, DOMAIN, &members, &spread(3), &[]).unwrap();
        assert_eq!(nodes.len(), 3);
        assert_eq!(nodes[1].id, NodeId::of_pod(UID, 1));
        assert_eq!(nodes[1].hostname.as_deref(), Some("demo-1.demo-headless.shop.svc"));
        assert_eq!((nodes[1].direct_port, nodes[1].plain_port, nodes[1].admin_port), (6380, 6379, 16379));
        let slots: Vec<String> = nodes.iter().map(|n| n.slots[0].to_string()).collect();
        assert_eq!(slots, ["0-5460", "5461-10922", "10923-16383"]);
        // A pod being recreated keeps its last IP; one that never had one makes us wait.
        let gone = three([Some("10.0.0.1"), None, Some("10.0.0.3")]);
        let kept = desired_nodes(UID, DOMAIN, &gone, &spread(3), &recorded(&nodes, 1)).unwrap();
        assert_eq!(kept, nodes);
        let err = desired_nodes(UID, DOMAIN, &gone, &spread(3), &[]).unwrap_err();
        assert!(err.contains("demo-1"), "{err}");
    }

    #[test]
    fn a_new_cluster_gets_epoch_1() {
        let members = three([Some("10.0.0.1"), Some("10.0.0.2"), Some("10.0.0.3")]);
        let nodes = desired_nodes(UID, DOMAIN, &members, &spread(3), &[]).unwrap();
        let none = vec![Report::Applied(None); 3];
        let Decision::Push { topology, why } = decide(&nodes, &members, &none, 0, &[], None) else { panic!() };
        assert_eq!(topology.epoch, 1);
        assert_eq!(topology.nodes, nodes);
        assert!(why.contains("first topology of 3 shards"), "{why}");
    }

    #[test]
    fn nodes_at_the_recorded_epoch_and_layout_are_left_alone() {
        let members = three([Some("10.0.0.1"), Some("10.0.0.2"), Some("10.0.0.3")]);
        let nodes = desired_nodes(UID, DOMAIN, &members, &spread(3), &[]).unwrap();
        let reports: Vec<_> = (0..3).map(|i| at(4, &nodes, i)).collect();
        assert_eq!(decide(&nodes, &members, &reports, 4, &recorded(&nodes, 4), Some(3)), Decision::InSync { epoch: 4 });
        // A node down does not trigger a push by itself.
        let mut down = reports.clone();
        down[2] = Report::Unreachable("connection refused".into());
        assert_eq!(decide(&nodes, &members, &down, 4, &recorded(&nodes, 4), Some(3)), Decision::InSync { epoch: 4 });
    }

    #[test]
    fn a_pod_with_a_new_ip_gets_the_next_epoch_everywhere() {
        let before = three([Some("10.0.0.1"), Some("10.0.0.2"), Some("10.0.0.3")]);
        let old = desired_nodes(UID, DOMAIN, &before, &spread(3), &[]).unwrap();
        let after = three([Some("10.0.0.1"), Some("10.0.0.9"), Some("10.0.0.3")]);
        let nodes = desired_nodes(UID, DOMAIN, &after, &spread(3), &recorded(&old, 4)).unwrap();
        // The restarted pod kept its topology on its volume: it still says epoch 4.
        let reports: Vec<_> = (0..3).map(|i| at(4, &old, i)).collect();
        let Decision::Push { topology, why } = decide(&nodes, &after, &reports, 4, &recorded(&old, 4), Some(3)) else {
            panic!("a moved pod must be pushed")
        };
        assert_eq!(topology.epoch, 5);
        assert_eq!(topology.nodes[1].ip, "10.0.0.9");
        assert_eq!(topology.nodes[1].id, old[1].id, "same id across the restart");
        assert!(why.contains("demo-1 moved to 10.0.0.9 (was 10.0.0.2)"), "{why}");
    }

    #[test]
    fn a_node_without_topology_or_behind_gets_the_next_epoch() {
        let members = three([Some("10.0.0.1"), Some("10.0.0.2"), Some("10.0.0.3")]);
        let nodes = desired_nodes(UID, DOMAIN, &members, &spread(3), &[]).unwrap();
        let mut reports: Vec<_> = (0..3).map(|i| at(4, &nodes, i)).collect();
        reports[0] = Report::Applied(None);
        let Decision::Push { topology, why } = decide(&nodes, &members, &reports, 4, &recorded(&nodes, 4), Some(3))
        else {
            panic!()
        };
        assert_eq!(topology.epoch, 5);
        assert!(why.contains("demo-0 has no topology"), "{why}");
        reports[0] = at(3, &nodes, 0);
        let Decision::Push { topology, .. } = decide(&nodes, &members, &reports, 4, &recorded(&nodes, 4), Some(3))
        else {
            panic!()
        };
        assert_eq!(topology.epoch, 5);
    }

    #[test]
    fn the_epoch_never_goes_backwards() {
        let members = three([Some("10.0.0.1"), Some("10.0.0.2"), Some("10.0.0.3")]);
        let nodes = desired_nodes(UID, DOMAIN, &members, &spread(3), &[]).unwrap();
        // The status was lost (a new operator, a restored CacheCluster): nodes hold epoch 9 of
        // this very layout, which is taken as it is...
        let reports: Vec<_> = (0..3).map(|i| at(9, &nodes, i)).collect();
        assert_eq!(decide(&nodes, &members, &reports, 0, &[], None), Decision::InSync { epoch: 9 });
        // ... or of an older layout (a pod moved meanwhile): the next push is epoch 10.
        let moved = three([Some("10.0.0.1"), Some("10.0.0.7"), Some("10.0.0.3")]);
        let now = desired_nodes(UID, DOMAIN, &moved, &spread(3), &[]).unwrap();
        let Decision::Push { topology, why } = decide(&now, &moved, &reports, 0, &[], None) else { panic!() };
        assert_eq!(topology.epoch, 10);
        assert!(why.contains("nodes hold up to epoch 9"), "{why}");
        // A stale status (the watch cache behind a push just made) pushes nothing again.
        let pushed: Vec<_> = (0..3).map(|i| at(5, &now, i)).collect();
        assert_eq!(decide(&now, &moved, &pushed, 4, &recorded(&nodes, 4), Some(3)), Decision::InSync { epoch: 5 });
        // The status says 4 but a node already applied 7 (a push whose status write failed).
        let mut reports: Vec<_> = (0..3).map(|i| at(4, &nodes, i)).collect();
        reports[2] = at(7, &nodes, 2);
        let Decision::Push { topology, why } = decide(&nodes, &members, &reports, 4, &recorded(&nodes, 4), Some(3))
        else {
            panic!()
        };
        assert_eq!(topology.epoch, 8);
        assert!(why.contains("newer than the recorded 4"), "{why}");
    }

    #[test]
    fn coverage_counts_only_nodes_at_the_epoch() {
        let members = three([Some("10.0.0.1"), Some("10.0.0.2"), None]);
        let nodes = desired_nodes(
            UID,
            DOMAIN,
            &members,
            &spread(3),
            &recorded(
                &desired_nodes(
                    UID,
                    DOMAIN,
                    &three([Some("10.0.0.1"), Some("10.0.0.2"), Some("10.0.0.3")]),
                    &spread(3),
                    &[],
                )
                .unwrap(),
                2,
            ),
        )
        .unwrap();
        let applied = vec![Ok(3), Ok(3), Err("no IP (not running)".to_owned())];
        let s = state(3, &nodes, &members, &applied, None);
        assert_eq!(s.slots_covered, 10923);
        assert_eq!(s.shards, 3);
        assert!(!s.settled());
        let problem = s.problem().unwrap();
        assert!(problem.contains("10923 of 16384 slots") && problem.contains("demo-2: no IP"), "{problem}");
        assert_eq!(s.nodes[2].applied_epoch, None);
        assert_eq!(s.nodes[0].applied_epoch, Some(3));
        let all = state(3, &nodes, &members, &[Ok(3), Ok(3), Ok(3)], None);
        assert_eq!(all.slots_covered, 16384);
        assert!(all.settled() && all.problem().is_none());
        let behind = state(3, &nodes, &members, &[Ok(3), Ok(0), Ok(3)], None);
        assert!(behind.problem().unwrap().contains("demo-1 has no topology"));
    }

    fn tls_secret(pki: &crate::test_pki::Pki, keys: &[&str]) -> Secret {
        let file = |key: &str| match key {
            "ca.crt" => "ca.crt",
            "tls.crt" => "node.crt",
            _ => "node.key",
        };
        let data = keys.iter().map(|k| (k.to_string(), k8s_openapi::ByteString(pki.read(file(k))))).collect();
        Secret { data: Some(data), ..Default::default() }
    }

    #[test]
    fn the_tls_secret_gives_the_client_config_or_says_what_it_lacks() {
        let pki = crate::test_pki::Pki::new("secret");
        pki.issue("node", &["*.demo-headless.shop.svc"], "serverAuth,clientAuth");
        let complete = tls_secret(&pki, &["ca.crt", "tls.crt", "tls.key"]);
        let config = admin_tls_config(Some(&complete), "shop/demo-tls", false).unwrap();
        assert!(config.client_auth_cert_resolver.has_certs(), "the node may require a client certificate");

        let Err(TlsProblem::Unusable(why)) =
            admin_tls_config(Some(&tls_secret(&pki, &["tls.crt", "tls.key"])), "shop/demo-tls", false)
        else {
            panic!("a Secret without ca.crt cannot serve")
        };
        assert!(why.starts_with("Secret shop/demo-tls has no ca.crt: "), "{why}");
        assert!(why.contains("add the CA that signed tls.crt"), "{why}");

        let Err(TlsProblem::Unusable(why)) =
            admin_tls_config(Some(&tls_secret(&pki, &["ca.crt", "tls.crt"])), "shop/demo-tls", false)
        else {
            panic!("no key")
        };
        assert_eq!(why, "Secret shop/demo-tls: tls.key: missing or empty");
        let mut garbled = complete.clone();
        garbled.data.as_mut().unwrap().insert("ca.crt".into(), k8s_openapi::ByteString(b"not PEM".to_vec()));
        let Err(TlsProblem::Unusable(why)) = admin_tls_config(Some(&garbled), "shop/demo-tls", false) else { panic!() };
        assert!(why.starts_with("Secret shop/demo-tls: ca.crt: "), "{why}");

        // Not there: cert-manager's is on its way; a named one is a mistake to correct.
        let Err(TlsProblem::NotIssued(why)) = admin_tls_config(None, "shop/demo-tls", true) else { panic!() };
        assert!(why.contains("cert-manager") && why.contains("shop/demo-tls"), "{why}");
        let Err(TlsProblem::Unusable(why)) = admin_tls_config(None, "shop/mine", false) else { panic!() };
        assert!(why.contains("shop/mine does not exist") && why.contains("spec.tls.secretName"), "{why}");
    }

    #[test]
    fn earlier_secrets_that_cannot_serve_say_why_and_that_the_rollout_ends_it() {
        let pki = crate::test_pki::Pki::new("earlier");
        pki.issue("node", &["*.demo-headless.shop.svc"], "serverAuth,clientAuth");
        let complete = tls_secret(&pki, &["ca.crt", "tls.crt", "tls.key"]);
        assert!(earlier_tls_config(Some(&complete), "shop/old").is_ok());
        let why = earlier_tls_config(None, "shop/old").unwrap_err();
        assert!(why.contains("shop/old it mounts (from an earlier spec) does not exist"), "{why}");
        assert!(why.contains("until the rollout replaces the pod") && !why.contains("spec.tls.secretName"), "{why}");
        let why = earlier_tls_config(Some(&tls_secret(&pki, &["tls.crt", "tls.key"])), "shop/old").unwrap_err();
        assert!(why.starts_with("Secret shop/old has no ca.crt") && why.contains("earlier spec"), "{why}");
    }

    /// A running pod `demo-<ordinal>` at `ip`, its admin port TLS with `secret` when Some.
    fn pod(ordinal: u32, ip: &str, secret: Option<&str>) -> Pod {
        use k8s_openapi::api::core::v1::{PodSpec, PodStatus, SecretVolumeSource, Volume};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
        let annotations = secret.map(|_| [(crate::resources::TLS_CLUSTER_ANNOTATION.to_owned(), "yes".to_owned())]);
        let volumes = secret.map(|s| {
            let secret = SecretVolumeSource { secret_name: Some(s.to_owned()), ..Default::default() };
            vec![Volume { name: "tls".into(), secret: Some(secret), ..Default::default() }]
        });
        Pod {
            metadata: ObjectMeta {
                name: Some(format!("demo-{ordinal}")),
                annotations: annotations.map(Into::into),
                ..Default::default()
            },
            spec: Some(PodSpec { volumes, ..Default::default() }),
            status: Some(PodStatus { phase: Some("Running".into()), pod_ip: Some(ip.into()), ..Default::default() }),
        }
    }

    /// A stand-in admin port at `ip`: reads what comes and answers `reply` (RESP) to it.
    async fn answering(ip: &str, reply: &'static [u8]) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind(admin_address(ip)).await.expect("binding a stand-in admin port");
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    if stream.read(&mut buf).await.is_ok_and(|n| n > 0) {
                        let _ = stream.write_all(reply).await;
                    }
                });
            }
        });
    }

    #[tokio::test]
    async fn old_pods_unreachable_below_the_protocol_are_replaced_anyway() {
        let pki = crate::test_pki::Pki::new("unreachable");
        pki.issue("node", &["*.demo-headless.shop.svc"], "serverAuth,clientAuth");
        let config = admin_tls_config(Some(&tls_secret(&pki, &["ca.crt", "tls.crt", "tls.key"])), "s", false).unwrap();
        let access = AdminAccess {
            password: Some("pw".into()),
            tls: BTreeMap::from([("demo-tls".to_owned(), Ok(config))]),
            headless_domain: DOMAIN.into(),
        };
        // demo-0: nothing listens (a restarted node not up, or one that resets the wrong
        // protocol); demo-1 answers, refusing the password: it listens and speaks, not
        // replaced out of turn; demo-2: its annotation says TLS, its node (restarted with the
        // new ConfigMap) speaks plain; demo-3 not running; demo-4 not a candidate.
        answering("127.0.93.2", b"-WRONGPASS invalid username-password pair\r\n").await;
        answering("127.0.93.3", b"-ERR unknown command\r\n").await;
        let mut not_running = pod(3, "127.0.93.4", None);
        not_running.status.as_mut().unwrap().phase = Some("Pending".into());
        let pods = [
            pod(0, "127.0.93.1", None),
            pod(1, "127.0.93.2", None),
            pod(2, "127.0.93.3", Some("demo-tls")),
            not_running,
            pod(4, "127.0.93.5", None),
        ];
        let candidates: Vec<String> = (0..4).map(|o| format!("demo-{o}")).collect();
        assert_eq!(unreachable_old_pods("demo", &pods, &candidates, &access).await, ["demo-0", "demo-2", "demo-3"]);
        assert!(unreachable_old_pods("demo", &pods, &[], &access).await.is_empty());
        // What counts: the transport, not a reply.
        let address = "127.0.93.2:16379".to_owned();
        assert!(!transport_failure(&AdminError::Refused { address: address.clone(), message: "stale epoch".into() }));
        assert!(!transport_failure(&AdminError::Protocol { address: address.clone(), what: "+OK to GET".into() }));
        assert!(transport_failure(&AdminError::Timeout { address, timeout: ADMIN_TIMEOUT }));
    }

    #[test]
    fn each_pod_is_spoken_to_as_its_own_spec_says() {
        let pki = crate::test_pki::Pki::new("endpoint");
        pki.issue("node", &["*.demo-headless.shop.svc"], "serverAuth,clientAuth");
        let config = admin_tls_config(Some(&tls_secret(&pki, &["ca.crt", "tls.crt", "tls.key"])), "s", false).unwrap();
        // Mid-rollout: demo-0 plain (the spec before TLS), demo-1 with the spec's Secret, demo-2
        // with an earlier Secret that is gone.
        let pods = [pod(0, "fd00::7", None), pod(1, "10.0.0.2", Some("demo-tls")), pod(2, "10.0.0.3", Some("old"))];
        let members = members("demo", 4, &pods);
        let secrets: Vec<_> = members.iter().map(|m| m.tls_secret.as_deref()).collect();
        assert_eq!(secrets, [None, Some("demo-tls"), Some("old"), None]);
        let access = AdminAccess {
            password: Some("pw".into()),
            tls: BTreeMap::from([
                ("demo-tls".to_owned(), Ok(config)),
                ("old".to_owned(), Err("the TLS Secret shop/old it mounts ... does not exist".to_owned())),
            ]),
            headless_domain: DOMAIN.into(),
        };
        let plain = endpoint(&members[0], &access).unwrap();
        assert_eq!((plain.address.as_str(), plain.password.as_deref()), ("[fd00::7]:16379", Some("pw")));
        assert!(plain.tls.is_none(), "a pod without tls-cluster is spoken to in plain TCP");
        let tls = endpoint(&members[1], &access).unwrap();
        assert_eq!((tls.address.as_str(), tls.password.as_deref()), ("10.0.0.2:16379", Some("pw")));
        assert_eq!(tls.tls.unwrap().server_name.to_str(), "demo-1.demo-headless.shop.svc");
        let why = endpoint(&members[2], &access).unwrap_err();
        assert!(why.contains("shop/old"), "{why}");
        assert_eq!(endpoint(&members[3], &access).unwrap_err(), "no IP (not running)");
        let unknown = Member { tls_secret: Some("other".into()), ..members[1].clone() };
        assert!(endpoint(&unknown, &access).unwrap_err().contains("other"));
        // Only the pod whose Secret cannot serve is left to the rollout.
        assert_eq!(unreachable_by_tls(&pods, &access), ["demo-2"]);
    }

    #[test]
    fn confirming_pushes_go_to_targets_first_and_sources_last() {
        let mv = |source, target| Move { source, target, slots: Vec::new() };
        assert_eq!(push_order(4, &[]), [vec![0, 1, 2, 3]]);
        assert_eq!(push_order(4, &[mv(0, 3)]), [vec![3], vec![1, 2], vec![0]]);
        // Two moves at once; a node both giving and getting counts as a source.
        assert_eq!(push_order(4, &[mv(0, 3), mv(3, 1)]), [vec![1], vec![2], vec![0, 3]]);
    }
}
