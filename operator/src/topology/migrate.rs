//! The slot migration commands of a node's admin port (`STRATA.MIGRATE START|STATUS|CANCEL`,
//! `/work/contract-23.md`), sent to the source node of a move.

use super::client::{self, AdminEndpoint, AdminError, Reply};
use super::plan::render_ranges;
use super::{NodeId, SlotRange, TopologyError};

/// Where a migration stands, as the node words it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Snapshot,
    Streaming,
    Handover,
    /// The target owns the slots: the commit point has passed.
    Committed,
    /// Stopped before the commit: the source kept the slots (`error` says why).
    Failed,
    /// Cancelled before the commit: the source kept the slots.
    Aborted,
    /// The node never saw this id (or forgot it in a restart before the commit): it holds
    /// none of its slots' new ownership.
    Unknown,
}

impl Phase {
    fn parse(text: &str) -> Result<Self, TopologyError> {
        Ok(match text {
            "snapshot" => Self::Snapshot,
            "streaming" => Self::Streaming,
            "handover" => Self::Handover,
            "committed" => Self::Committed,
            "failed" => Self::Failed,
            "aborted" => Self::Aborted,
            "unknown" => Self::Unknown,
            other => return Err(TopologyError(format!("unknown migration state {other:?}"))),
        })
    }

    /// Still moving: ask again later.
    pub fn in_flight(self) -> bool {
        matches!(self, Self::Snapshot | Self::Streaming | Self::Handover)
    }
}

/// One migration as `STRATA.MIGRATE STATUS` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationReport {
    pub id: String,
    pub phase: Phase,
    /// The target's node id and the slots, as START named them.
    pub target: String,
    pub slots: String,
    pub keys: u64,
    pub bytes: u64,
    pub elapsed_ms: u64,
    pub paused_ms: u64,
    /// Why it failed ("" otherwise).
    pub error: String,
}

/// Starts migrating `slots` from the node at `source` to `target` (reachable by the source at
/// `target_admin`, `host:port`); idempotent for the same `mid`.
pub async fn start(
    source: &AdminEndpoint,
    mid: &str,
    target: &NodeId,
    target_admin: &str,
    slots: &[SlotRange],
) -> Result<(), AdminError> {
    let args = ["STRATA.MIGRATE", "START", mid, target.as_str(), target_admin, &render_ranges(slots)];
    match client::call(source, &args.map(str::to_owned)).await? {
        Reply::Simple(ok) if ok == "OK" => Ok(()),
        other => Err(AdminError::Protocol { address: source.address.clone(), what: format!("{other:?} to START") }),
    }
}

/// What the node at `endpoint` knows of migration `mid` (`None`: the node reports no migration).
pub async fn status(endpoint: &AdminEndpoint, mid: &str) -> Result<Option<MigrationReport>, AdminError> {
    let reply = client::call(endpoint, &["STRATA.MIGRATE", "STATUS", mid].map(str::to_owned)).await?;
    parse_status(reply).map_err(|e| AdminError::Protocol { address: endpoint.address.clone(), what: e.0 })
}

/// The latest migration the node at `endpoint` took part in (`None`: none).
pub async fn latest(endpoint: &AdminEndpoint) -> Result<Option<MigrationReport>, AdminError> {
    let reply = client::call(endpoint, &["STRATA.MIGRATE", "STATUS"].map(str::to_owned)).await?;
    parse_status(reply).map_err(|e| AdminError::Protocol { address: endpoint.address.clone(), what: e.0 })
}

/// Cancels migration `mid` on its source (refused once it committed).
pub async fn cancel(endpoint: &AdminEndpoint, mid: &str) -> Result<(), AdminError> {
    client::call(endpoint, &["STRATA.MIGRATE", "CANCEL", mid].map(str::to_owned)).await.map(drop)
}

/// The STATUS reply: a flat array of field/value pairs, or an empty array.
pub fn parse_status(reply: Reply) -> Result<Option<MigrationReport>, TopologyError> {
    let Reply::Array(items) = reply else { return Err(TopologyError(format!("{reply:?} is not a migration status"))) };
    if items.is_empty() {
        return Ok(None);
    }
    let text = |r: &Reply| match r {
        Reply::Bulk(b) => Ok(String::from_utf8_lossy(b).into_owned()),
        Reply::Simple(s) => Ok(s.clone()),
        Reply::Integer(n) => Ok(n.to_string()),
        other => Err(TopologyError(format!("{other:?} is not a string"))),
    };
    let mut fields = std::collections::HashMap::new();
    for pair in items.chunks(2) {
        let [k, v] = pair else { return Err(TopologyError("an odd number of fields".to_owned())) };
        fields.insert(text(k)?, text(v)?);
    }
    let get = |k: &str| fields.get(k).cloned().unwrap_or_default();
    let number = |k: &str| get(k).parse::<u64>().unwrap_or(0);
    Ok(Some(MigrationReport {
        id: get("id"),
        phase: Phase::parse(&get("state"))?,
        target: get("target"),
        slots: get("slots"),
        keys: number("keys"),
        bytes: number("bytes"),
        elapsed_ms: number("elapsed_ms"),
        paused_ms: number("paused_ms"),
        error: get("error"),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.as_bytes().to_vec())
    }

    #[test]
    fn status_replies_parse() {
        let fields = [
            "id",
            "p3-s0-t3-1",
            "role",
            "source",
            "state",
            "committed",
            "source",
            "a",
            "target",
            "b",
            "slots",
            "0-1023",
            "keys",
            "12345",
            "bytes",
            "999",
            "elapsed_ms",
            "1200",
            "paused_ms",
            "3",
            "error",
            "",
        ];
        let report = parse_status(Reply::Array(fields.iter().map(|f| bulk(f)).collect())).unwrap().unwrap();
        assert_eq!(report.phase, Phase::Committed);
        assert_eq!((report.keys, report.elapsed_ms, report.paused_ms), (12345, 1200, 3));
        assert_eq!(report.id, "p3-s0-t3-1");
        assert_eq!(parse_status(Reply::Array(Vec::new())).unwrap(), None);
        let odd = Reply::Array(vec![bulk("id")]);
        assert!(parse_status(odd).is_err());
        let weird = Reply::Array(vec![bulk("state"), bulk("dancing")]);
        assert!(parse_status(weird).is_err());
        assert!(Phase::Streaming.in_flight() && !Phase::Failed.in_flight());
    }
}
