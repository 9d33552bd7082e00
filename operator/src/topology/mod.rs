//! The cluster topology the operator owns and pushes to every node (issue 22,
//! `/work/cluster-contract.md`): stable node ids, the even slot spread, the `STRATA.TOPOLOGY
//! SET` arguments and the `GET` reply.
//!
//! Pure: no I/O here; [`client`] sends it. The local CLI (`strata-cluster`) and the controller
//! build topologies with the same functions, so a local cluster is laid out exactly as one on
//! Kubernetes.

pub mod client;
pub mod migrate;
pub mod plan;
pub mod usage;

use std::fmt;

/// Redis Cluster's hash slot count.
pub const SLOTS: u16 = 16384;

/// A node id: 40 lowercase hex characters (SHA-1 of a seed that names the node's place, not
/// its process, so a restarted node keeps its id).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(String);

impl NodeId {
    /// `sha1(seed)` in lowercase hex.
    pub fn from_seed(seed: &str) -> Self {
        Self(sha1_smol::Sha1::from(seed).digest().to_string())
    }

    /// The id of a CacheCluster's pod: `sha1("<uid>/<ordinal>")`. The UID (not the name) so a
    /// CacheCluster deleted and created again under the same name is a new cluster.
    pub fn of_pod(cluster_uid: &str, ordinal: u32) -> Self {
        Self::from_seed(&format!("{cluster_uid}/{ordinal}"))
    }

    /// The id of node `index` of a local cluster (`scripts/local-cluster.sh`):
    /// `sha1("local/<baseport>/<index>")`.
    pub fn of_local(base_port: u16, index: u32) -> Self {
        Self::from_seed(&format!("local/{base_port}/{index}"))
    }

    /// Parses an id as the node sends it back; refuses anything but 40 lowercase hex digits.
    pub fn parse(text: &str) -> Result<Self, TopologyError> {
        if text.len() == 40 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            Ok(Self(text.to_owned()))
        } else {
            Err(TopologyError(format!("{text:?} is not a node id (40 lowercase hex digits)")))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A contiguous run of slots, both ends included.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SlotRange {
    pub first: u16,
    pub last: u16,
}

impl SlotRange {
    pub fn len(&self) -> u32 {
        u32::from(self.last) - u32::from(self.first) + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }
}

impl fmt::Display for SlotRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last { write!(f, "{}", self.first) } else { write!(f, "{}-{}", self.first, self.last) }
    }
}

/// The 16384 slots over `shards` nodes in ordinal order, with `redis-cli --cluster create`'s
/// formula, so a Strata cluster and a Redis Cluster of the same size own the same slots
/// (3 nodes: 0-5460, 5461-10922, 10923-16383). More shards than slots leave the extra ones
/// without slots rather than splitting a slot.
pub fn spread(shards: usize) -> Vec<Vec<SlotRange>> {
    let per = f64::from(SLOTS) / shards as f64;
    let mut cursor = 0.0;
    let mut first: u32 = 0;
    let mut out = Vec::with_capacity(shards);
    for i in 0..shards {
        let last = if i + 1 == shards {
            u32::from(SLOTS) - 1
        } else {
            ((cursor + per - 1.0).round().max(0.0) as u32).min(u32::from(SLOTS) - 1)
        };
        if first <= last && first < u32::from(SLOTS) {
            out.push(vec![SlotRange { first: first as u16, last: last as u16 }]);
            first = last + 1;
        } else {
            out.push(Vec::new());
        }
        cursor += per;
    }
    out
}

/// One node as the topology describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyNode {
    pub id: NodeId,
    /// Where MOVED sends clients (an IP, per the node's default `preferred-endpoint-type ip`).
    pub ip: String,
    /// A stable DNS name (the pod's headless Service record), if any.
    pub hostname: Option<String>,
    /// The port cluster-aware clients use (MOVED, CLUSTER SLOTS).
    pub direct_port: u16,
    /// The port any client may use (forwarding).
    pub plain_port: u16,
    pub slots: Vec<SlotRange>,
    /// The admin port: topology pushes, and the other nodes' forwarded commands.
    pub admin_port: u16,
}

impl TopologyNode {
    /// The one bulk string the contract defines:
    /// `<id> <ip> <hostname|-> <direct> <plain> <slots|-> <admin>` (the admin port is the
    /// optional 7th field; always sent, since nodes forward to it).
    pub fn render(&self) -> String {
        let slots = if self.slots.is_empty() {
            "-".to_owned()
        } else {
            self.slots.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
        };
        format!(
            "{} {} {} {} {} {slots} {}",
            self.id,
            self.ip,
            self.hostname.as_deref().unwrap_or("-"),
            self.direct_port,
            self.plain_port,
            self.admin_port
        )
    }

    /// The inverse of [`TopologyNode::render`]; without the 7th field the admin port is the
    /// plain port + 10000, as the node assumes.
    pub fn parse(text: &str) -> Result<Self, TopologyError> {
        let fields: Vec<&str> = text.split(' ').collect();
        let (id, ip, hostname, direct, plain, slots, admin) = match fields[..] {
            [id, ip, hostname, direct, plain, slots] => (id, ip, hostname, direct, plain, slots, None),
            [id, ip, hostname, direct, plain, slots, admin] => (id, ip, hostname, direct, plain, slots, Some(admin)),
            _ => return Err(TopologyError(format!("{text:?}: a node has 6 or 7 space-separated fields"))),
        };
        let port = |what: &str, p: &str| {
            p.parse::<u16>().map_err(|_| TopologyError(format!("{text:?}: {what} port {p:?} is not a port")))
        };
        let slots = if slots == "-" {
            Vec::new()
        } else {
            slots
                .split(',')
                .map(|r| parse_range(r).map_err(|e| TopologyError(format!("{text:?}: {e}"))))
                .collect::<Result<_, _>>()?
        };
        let plain_port = port("plain", plain)?;
        let admin_port = match admin {
            Some(a) => port("admin", a)?,
            None => plain_port
                .checked_add(10000)
                .ok_or_else(|| TopologyError(format!("{text:?}: no admin port, and plain + 10000 is not a port")))?,
        };
        Ok(Self {
            id: NodeId::parse(id)?,
            ip: ip.to_owned(),
            hostname: Some(hostname.to_owned()).filter(|h| h != "-"),
            direct_port: port("direct", direct)?,
            plain_port,
            slots,
            admin_port,
        })
    }

    pub fn slot_count(&self) -> u32 {
        self.slots.iter().map(SlotRange::len).sum()
    }
}

fn parse_range(text: &str) -> Result<SlotRange, String> {
    let slot = |s: &str| match s.parse::<u16>() {
        Ok(n) if n < SLOTS => Ok(n),
        _ => Err(format!("{s:?} is not a slot (0..16383)")),
    };
    let (first, last) = match text.split_once('-') {
        Some((a, b)) => (slot(a)?, slot(b)?),
        None => (slot(text)?, slot(text)?),
    };
    if first > last {
        return Err(format!("slot range {text:?} ends before it starts"));
    }
    Ok(SlotRange { first, last })
}

/// A whole topology: what every node of one cluster is told at one epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    pub epoch: u64,
    pub nodes: Vec<TopologyNode>,
}

impl Topology {
    /// The arguments after `STRATA.TOPOLOGY` that tell node `myid` this topology.
    pub fn set_args(&self, myid: &NodeId) -> Vec<String> {
        let mut args = vec!["SET".to_owned(), self.epoch.to_string(), myid.to_string()];
        args.extend(self.nodes.iter().map(TopologyNode::render));
        args
    }

    /// Slots some node owns (a slot owned twice counts once): 16384 means full coverage.
    pub fn slots_covered(&self) -> u32 {
        let mut owned = vec![false; usize::from(SLOTS)];
        for range in self.nodes.iter().flat_map(|n| &n.slots) {
            owned[usize::from(range.first)..=usize::from(range.last)].fill(true);
        }
        owned.iter().filter(|&&o| o).count() as u32
    }

    /// Same nodes, endpoints and slots, whatever the epoch.
    pub fn same_layout(&self, nodes: &[TopologyNode]) -> bool {
        self.nodes == nodes
    }
}

/// What a node reports with `STRATA.TOPOLOGY GET`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reported {
    pub epoch: u64,
    pub myid: NodeId,
    pub nodes: Vec<TopologyNode>,
}

impl Reported {
    /// The entry of the node that answered (absent only from a node that broke the contract).
    pub fn me(&self) -> Option<&TopologyNode> {
        self.nodes.iter().find(|n| n.id == self.myid)
    }

    pub fn topology(&self) -> Topology {
        Topology { epoch: self.epoch, nodes: self.nodes.clone() }
    }
}

/// A topology the contract does not allow, or a reply that is not one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyError(pub String);

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TopologyError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(shards: usize) -> Vec<String> {
        spread(shards).iter().map(|r| r.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")).collect()
    }

    #[test]
    fn spread_matches_redis_cli() {
        assert_eq!(ranges(1), ["0-16383"]);
        assert_eq!(ranges(3), ["0-5460", "5461-10922", "10923-16383"]);
        // redis-cli --cluster create with 5 and 6 masters.
        assert_eq!(ranges(5), ["0-3276", "3277-6553", "6554-9829", "9830-13106", "13107-16383"]);
        assert_eq!(ranges(6), ["0-2730", "2731-5460", "5461-8191", "8192-10922", "10923-13652", "13653-16383"]);
    }

    #[test]
    fn spread_covers_every_slot_once_for_any_size() {
        for shards in [1, 2, 3, 7, 100, 1000, 16384, 16385] {
            let all = spread(shards);
            assert_eq!(all.len(), shards);
            let mut next = 0u32;
            for range in all.iter().flatten() {
                assert_eq!(u32::from(range.first), next, "{shards} shards: a gap or an overlap");
                next = u32::from(range.last) + 1;
            }
            assert_eq!(next, 16384, "{shards} shards");
        }
    }

    #[test]
    fn ids_are_stable_sha1_hex() {
        // sha1("abc") is the FIPS 180 test vector.
        assert_eq!(NodeId::from_seed("abc").as_str(), "a9993e364706816aba3e25717850c26c9cd0d89d");
        let uid = "0b7c5c1e-3f7a-4a47-9a4e-3b1c1f2d9e10";
        assert_eq!(NodeId::of_pod(uid, 2), NodeId::from_seed(&format!("{uid}/2")));
        assert_eq!(NodeId::of_pod(uid, 2), NodeId::of_pod(uid, 2));
        assert_ne!(NodeId::of_pod(uid, 1), NodeId::of_pod(uid, 2));
        assert_eq!(NodeId::of_local(7000, 0), NodeId::from_seed("local/7000/0"));
        assert!(NodeId::parse(NodeId::of_local(7000, 1).as_str()).is_ok());
        assert!(NodeId::parse("A9993E364706816ABA3E25717850C26C9CD0D89D").is_err(), "uppercase");
        assert!(NodeId::parse("a9993e").is_err());
    }

    fn node(index: u32, slots: Vec<SlotRange>) -> TopologyNode {
        TopologyNode {
            id: NodeId::of_local(7000, index),
            ip: format!("10.244.0.{}", index + 7),
            hostname: Some(format!("web-{index}.web-headless.default.svc")).filter(|_| index != 1),
            direct_port: 6380,
            plain_port: 6379,
            slots,
            admin_port: 16379,
        }
    }

    #[test]
    fn nodes_render_as_the_contract_says_and_parse_back() {
        let spread = spread(3);
        let first = node(0, spread[0].clone());
        assert_eq!(
            first.render(),
            format!("{} 10.244.0.7 web-0.web-headless.default.svc 6380 6379 0-5460 16379", NodeId::of_local(7000, 0))
        );
        let odd = node(1, vec![SlotRange { first: 5, last: 5 }, SlotRange { first: 7, last: 9 }]);
        assert!(odd.render().ends_with(" 10.244.0.8 - 6380 6379 5,7-9 16379"), "{}", odd.render());
        let none = node(2, Vec::new());
        assert!(none.render().ends_with(" 6379 - 16379"));
        for n in [first, odd, none] {
            assert_eq!(TopologyNode::parse(&n.render()), Ok(n));
        }
        assert!(TopologyNode::parse("abc 1.2.3.4 - 1 2 0-1").is_err(), "bad id");
        let id = NodeId::of_local(7000, 0);
        assert!(TopologyNode::parse(&format!("{id} 1.2.3.4 - 1 2 5-3")).is_err(), "backwards range");
        assert!(TopologyNode::parse(&format!("{id} 1.2.3.4 - 1 2 16384")).is_err(), "slot out of range");
        assert!(TopologyNode::parse(&format!("{id} 1.2.3.4 - 1 2")).is_err(), "5 fields");
        // The 6-field form: the admin port is the plain port + 10000.
        let six = TopologyNode::parse(&format!("{id} 1.2.3.4 - 7100 7000 0-9")).unwrap();
        assert_eq!(six.admin_port, 17000);
        assert_eq!(TopologyNode::parse(&format!("{id} 1.2.3.4 - 7100 7000 0-9 7200")).unwrap().admin_port, 7200);
    }

    #[test]
    fn set_args_name_the_receiver_and_every_node() {
        let nodes: Vec<_> = spread(3).into_iter().enumerate().map(|(i, s)| node(i as u32, s)).collect();
        let topology = Topology { epoch: 7, nodes: nodes.clone() };
        let me = NodeId::of_local(7000, 1);
        let args = topology.set_args(&me);
        assert_eq!(args[..3], ["SET".to_owned(), "7".to_owned(), me.to_string()]);
        let back: Vec<_> = args[3..].iter().map(|a| TopologyNode::parse(a).unwrap()).collect();
        assert_eq!(back, nodes);
        assert_eq!(topology.slots_covered(), 16384);
        let partial = Topology { epoch: 7, nodes: nodes[..2].to_vec() };
        assert_eq!(partial.slots_covered(), 10923);
        assert!(topology.same_layout(&nodes));
        assert!(!partial.same_layout(&nodes));
    }
}
