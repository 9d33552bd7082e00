//! Cluster mode (`cluster-enabled yes`): which node serves which hash slot,
//! as the operator last pushed it. No gossip: the operator owns the
//! topology, a node only applies what it is sent (strictly newer epochs),
//! keeps it on its volume for a restart and answers CLUSTERDOWN until it has
//! one.
//!
//! Reading the topology costs one atomic load per command: each thread keeps
//! the version it last read and re-reads (under a lock) only when the
//! version number moved, so the hot path shares no written cache line.

pub mod link;
pub mod migration;
pub mod topology;

use parking_lot::{Mutex, RwLock};
use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Release};
pub use topology::{Member, Move, MoveState, Route, Topology};

/// The file, in the data directory, holding the last applied topology.
pub const TOPOLOGY_FILE: &str = "cluster-topology.conf";

/// Versions of every `Cluster` in the process, so a thread's cached copy
/// is never mistaken for another instance's.
static VERSIONS: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static CACHED: RefCell<(u64, Option<Arc<Topology>>)> = const { RefCell::new((0, None)) };
}

pub struct Cluster {
    /// Bumped (from `VERSIONS`) on every apply.
    version: AtomicU64,
    current: RwLock<Option<Arc<Topology>>>,
    /// Serializes applies (check epoch, persist, publish).
    applying: Mutex<()>,
    file: Option<PathBuf>,
    /// MOVED and SLOTS show hostnames rather than IPs.
    pub prefer_hostname: bool,
    /// What the admin port requires (AUTH) before anything else; None: open.
    pub admin_password: Option<Vec<u8>>,
    /// CLUSTER MYID before the first push: made up at start, as a fresh
    /// Redis node's.
    pub provisional_id: String,
    /// Slot migrations this node runs or receives.
    pub migrations: migration::Migrations,
    /// TLS for links to other nodes' admin ports (`tls-cluster`).
    pub link_tls: Arc<link::LinkTls>,
}

/// Why a push was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum ApplyError {
    Stale {
        pushed: u64,
        applied: u64,
    },
    Conflict(u64),
    Persist(String),
    /// The push contradicts a migration this node took part in.
    Migration(String),
}

impl std::fmt::Display for ApplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApplyError::Stale { pushed, applied } => {
                write!(f, "stale epoch {pushed}: this node has applied epoch {applied}")
            }
            ApplyError::Conflict(e) => write!(f, "epoch {e} is already applied with a different topology"),
            ApplyError::Persist(e) => write!(f, "cannot keep the topology on the volume: {e}"),
            ApplyError::Migration(e) => write!(f, "invalid topology: {e}"),
        }
    }
}

impl Cluster {
    /// A cluster member with nothing applied yet: the topology kept in
    /// `dir` (if any) is loaded; a file that cannot be read is an error
    /// for the caller to report (the node must not serve with a guess).
    pub fn open(
        dir: Option<PathBuf>,
        prefer_hostname: bool,
        admin_password: Option<Vec<u8>>,
    ) -> Result<Cluster, String> {
        let file = dir.map(|d| d.join(TOPOLOGY_FILE));
        let loaded = match &file {
            Some(path) => match std::fs::read_to_string(path) {
                Ok(text) => Some(Arc::new(Topology::from_file(&text).map_err(|e| {
                    format!(
                        "{}: {e}; remove it to start without a topology (the operator pushes a new one)",
                        path.display()
                    )
                })?)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(format!("{}: {e}", path.display())),
            },
            None => None,
        };
        if let Some(t) = &loaded {
            tracing::info!(epoch = t.epoch, slots = t.me().slot_count(), "cluster topology loaded from the volume");
        }
        Ok(Cluster {
            version: AtomicU64::new(VERSIONS.fetch_add(1, Release)),
            current: RwLock::new(loaded),
            applying: Mutex::new(()),
            file,
            prefer_hostname,
            admin_password,
            provisional_id: crate::base::random::hex_id(),
            migrations: Default::default(),
            link_tls: Default::default(),
        })
    }

    /// Runs `f` with the current topology (None before the first push),
    /// from this thread's copy while the version has not moved.
    pub fn with<R>(&self, f: impl FnOnce(Option<&Topology>) -> R) -> R {
        let version = self.version.load(Acquire);
        CACHED.with_borrow_mut(|cached| {
            if cached.0 != version {
                *cached = (version, self.current.read().clone());
            }
            f(cached.1.as_deref())
        })
    }

    /// The current topology, shared (slow path: replies about the cluster).
    pub fn current(&self) -> Option<Arc<Topology>> {
        self.current.read().clone()
    }

    pub fn epoch(&self) -> u64 {
        self.with(|t| t.map_or(0, |t| t.epoch))
    }

    /// Applies a pushed topology: refused when older than the applied one,
    /// or of the same epoch and different; the same one again is accepted
    /// (a push retried). Kept on the volume before it takes effect.
    pub fn apply(&self, new: Topology) -> Result<(), ApplyError> {
        let _one = self.applying.lock();
        if let Some(old) = self.current() {
            if new.epoch < old.epoch {
                return Err(ApplyError::Stale { pushed: new.epoch, applied: old.epoch });
            }
            if new.epoch == old.epoch {
                return if *old == new { Ok(()) } else { Err(ApplyError::Conflict(new.epoch)) };
            }
        }
        let new = match self.current() {
            Some(old) => old.carry_moves_into(new).map_err(ApplyError::Migration)?,
            None => new,
        };
        self.persist(&new).map_err(ApplyError::Persist)?;
        tracing::info!(
            epoch = new.epoch,
            nodes = new.members.len(),
            slots = new.me().slot_count(),
            covered = new.covered(),
            "cluster topology applied"
        );
        *self.current.write() = Some(Arc::new(new));
        self.version.store(VERSIONS.fetch_add(1, Release), Release);
        Ok(())
    }

    /// Changes the applied topology in place (same epoch), kept on the
    /// volume before it takes effect: a migration's records and the
    /// layout a committed one makes.
    pub fn amend(&self, f: impl FnOnce(&Topology) -> Result<Topology, String>) -> Result<(), String> {
        let _one = self.applying.lock();
        let old = self.current().ok_or("no topology yet")?;
        let new = f(&old)?;
        self.persist(&new)?;
        *self.current.write() = Some(Arc::new(new));
        self.version.store(VERSIONS.fetch_add(1, Release), Release);
        Ok(())
    }

    fn persist(&self, t: &Topology) -> Result<(), String> {
        match &self.file {
            Some(path) => crate::sys::file::replace_durably(path, t.to_file().as_bytes())
                .map_err(|e| format!("{}: {e}", path.display())),
            None => Ok(()),
        }
    }

    /// The endpoint clients are sent to for a member: `ip:direct-port` (or
    /// its hostname when preferred and known).
    pub fn endpoint(&self, m: &Member) -> String {
        format!("{}:{}", self.preferred_host(m), m.direct_port)
    }

    /// The first endpoint of SLOTS, SHARDS' `endpoint`, MOVED's host: as
    /// Redis, `?` when hostnames are preferred and a node has none.
    pub fn preferred_host<'m>(&self, m: &'m Member) -> &'m str {
        match (&m.hostname, self.prefer_hostname) {
            (Some(h), true) => h,
            (None, true) => "?",
            _ => &m.ip,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo(epoch: u64, split: u16) -> Topology {
        let m = |n: u8, a: u16, b: u16| Member {
            id: format!("{n:040x}"),
            ip: "127.0.0.1".into(),
            hostname: None,
            direct_port: 7100,
            plain_port: 7000,
            admin_port: 17000,
            admin_addr: "127.0.0.1:17000".into(),
            ranges: vec![(a, b)],
        };
        Topology::new(epoch, &format!("{:040x}", 0), vec![m(0, 0, split), m(1, split + 1, 16383)]).unwrap()
    }

    #[test]
    fn newer_epochs_only_and_kept_across_restarts() {
        let dir = std::env::temp_dir().join(format!("strata-cluster-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let c = Cluster::open(Some(dir.clone()), false, None).unwrap();
        assert_eq!(c.epoch(), 0);
        c.apply(topo(5, 100)).unwrap();
        assert_eq!(c.with(|t| t.unwrap().route(50)), Route::Mine);
        assert_eq!(c.apply(topo(4, 100)), Err(ApplyError::Stale { pushed: 4, applied: 5 }));
        assert_eq!(c.apply(topo(5, 100)), Ok(()));
        assert_eq!(c.apply(topo(5, 200)), Err(ApplyError::Conflict(5)));
        c.apply(topo(6, 40)).unwrap();
        assert_eq!(c.with(|t| t.unwrap().route(50)), Route::Elsewhere(1));
        let again = Cluster::open(Some(dir.clone()), false, None).unwrap();
        assert_eq!(again.epoch(), 6);
        assert_eq!(again.with(|t| t.unwrap().route(50)), Route::Elsewhere(1));
        std::fs::write(dir.join(TOPOLOGY_FILE), "garbage").unwrap();
        assert!(Cluster::open(Some(dir.clone()), false, None).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
