//! The operator process: command line, logging, the HTTP endpoint, leader election, the
//! controller, and shutdown on SIGTERM/SIGINT.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use tokio::sync::watch;

use crate::controller::{self, Context};
use crate::http::{self, Health};
use crate::leader::{Ended, LeaderElector, LeaseTiming};
use crate::metrics::Metrics;

/// strata-operator: runs Strata cache clusters on Kubernetes.
///
/// Watches `CacheCluster` resources (strata.dev/v1alpha1) and turns each into a StatefulSet of
/// strata-node pods with their volumes, a client Service (`<name>.<namespace>.svc:6379`), a
/// headless Service, a ConfigMap, a PodDisruptionBudget and, if asked, a ServiceMonitor. Spec
/// changes roll out one pod at a time. Connects to the cluster from the in-cluster service
/// account, or from KUBECONFIG / ~/.kube/config when run outside.
#[derive(Parser, Debug, Clone)]
#[command(name = "strata-operator", version, about, long_about)]
pub struct Options {
    /// Address of the HTTP endpoint serving /metrics, /healthz and /readyz.
    #[arg(long, env = "STRATA_OPERATOR_METRICS_BIND", default_value = http::DEFAULT_BIND)]
    pub metrics_bind_address: SocketAddr,

    /// Elect a leader through a Lease so that only one replica reconciles
    /// (`--leader-elect=false` to turn off, e.g. for a single replica run by hand).
    #[arg(long, env = "STRATA_OPERATOR_LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,

    /// Namespace of the leader Lease; the operator's own namespace.
    #[arg(long, env = "POD_NAMESPACE")]
    pub leader_election_namespace: Option<String>,

    /// Name of the leader Lease.
    #[arg(long, env = "STRATA_OPERATOR_LEADER_ELECTION_ID", default_value = "strata-operator")]
    pub leader_election_id: String,

    /// How long a leader's Lease stays valid without renewal, in seconds.
    #[arg(long, env = "STRATA_OPERATOR_LEASE_DURATION", default_value_t = 15)]
    pub lease_duration_seconds: u64,

    /// This instance's identity in the Lease [default: POD_NAME, else the hostname].
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,

    /// Only manage CacheClusters in this namespace [default: all namespaces].
    #[arg(long, env = "WATCH_NAMESPACE")]
    pub watch_namespace: Option<String>,

    /// Cluster mode: most slot migrations running at once per CacheCluster while it reshards
    /// (never two from the same pod).
    #[arg(long, env = "STRATA_OPERATOR_MAX_CONCURRENT_MIGRATIONS", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_concurrent_migrations: u32,

    /// Cluster mode: most hash slots one migration moves (each migration is atomic; smaller
    /// ones pause writes to their slots for less time at the handover).
    #[arg(long, env = "STRATA_OPERATOR_MIGRATION_BATCH_SLOTS", default_value_t = crate::topology::plan::DEFAULT_BATCH,
          value_parser = clap::value_parser!(u32).range(1..=16384))]
    pub migration_batch_slots: u32,

    /// Log format.
    #[arg(long, env = "STRATA_OPERATOR_LOG_FORMAT", value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,

    /// Log level (error, warn, info, debug, trace) or a tracing filter such as
    /// "info,kube=debug"; RUST_LOG overrides it.
    #[arg(long, env = "STRATA_OPERATOR_LOG_LEVEL", default_value = "info")]
    pub log_level: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Json,
    Text,
}

/// Installs the global tracing subscriber (stderr).
pub fn init_logging(opts: &Options) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&opts.log_level));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match opts.log_format {
        LogFormat::Json => builder.json().with_current_span(false).init(),
        LogFormat::Text => builder.init(),
    }
}

/// Runs until SIGTERM/SIGINT (exit code 0) or until leadership is lost or the API server is
/// unreachable at start (non-zero: the pod restarts and rejoins as a standby).
pub async fn run(opts: Options) -> i32 {
    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health::new());
    let server = match http::serve(opts.metrics_bind_address, metrics.clone(), health.clone()).await {
        Ok(server) => tokio::spawn(server),
        Err(e) => {
            tracing::error!(addr = %opts.metrics_bind_address, error = %e, "cannot listen for /metrics and probes");
            return 1;
        }
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown requested");
        let _ = stop_tx.send(true);
    });
    let code = run_with(opts, metrics, health.clone(), stop_rx).await;
    health.ready.store(false, Ordering::Relaxed);
    server.abort();
    code
}

/// [`run`] after the HTTP endpoint and signal handling are set up (tests drive this directly).
pub async fn run_with(
    opts: Options,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    mut stop: watch::Receiver<bool>,
) -> i32 {
    let client = match kube::Client::try_default().await {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "cannot configure a Kubernetes client (in-cluster service account or KUBECONFIG)");
            return 1;
        }
    };
    match client.apiserver_version().await {
        Ok(v) => tracing::info!(version = %v.git_version, "connected to the Kubernetes API server"),
        Err(e) => {
            tracing::error!(error = %e, "cannot reach the Kubernetes API server");
            return 1;
        }
    }
    health.ready.store(true, Ordering::Relaxed);
    let identity = opts.identity.clone().unwrap_or_else(hostname);

    let mut elector = None;
    if opts.leader_elect {
        let Some(ns) = opts.leader_election_namespace.as_deref() else {
            tracing::error!("--leader-election-namespace (or POD_NAMESPACE) is required with --leader-elect");
            return 2;
        };
        let timing = LeaseTiming {
            lease_duration: Duration::from_secs(opts.lease_duration_seconds.max(3)),
            renew_deadline: Duration::from_secs(opts.lease_duration_seconds.max(3)) * 2 / 3,
            retry_period: Duration::from_secs((opts.lease_duration_seconds / 7).max(1)),
        };
        let mut e = LeaderElector::new(client.clone(), ns, &opts.leader_election_id, &identity, timing);
        if !e.acquire(&mut stop).await {
            return 0;
        }
        elector = Some(e);
    }
    metrics.set_leader(true);

    let pacing = crate::controller::resharding::Options {
        max_concurrent: opts.max_concurrent_migrations as usize,
        batch: opts.migration_batch_slots,
    };
    let ctx = Arc::new(Context::new(client, metrics.clone(), Some(identity)).with_resharding(pacing));
    let (ctl_stop_tx, mut ctl_stop_rx) = watch::channel(false);
    let controller_stop = async move {
        let _ = ctl_stop_rx.wait_for(|s| *s).await;
    };
    let namespace = opts.watch_namespace.clone().filter(|n| !n.is_empty());
    tracing::info!(namespace = namespace.as_deref().unwrap_or("(all)"), "starting the CacheCluster controller");
    let controller = tokio::spawn(async move { controller::run(ctx, namespace.as_deref(), controller_stop).await });

    let ended = match elector.as_mut() {
        Some(e) => e.hold(&mut stop).await,
        None => {
            let _ = stop.wait_for(|s| *s).await;
            Ended::Shutdown
        }
    };
    metrics.set_leader(false);
    let _ = ctl_stop_tx.send(true);
    // In-flight reconciliations finish; none starts after the stop.
    if tokio::time::timeout(Duration::from_secs(20), controller).await.is_err() {
        tracing::warn!("controller did not stop within 20s");
    }
    match ended {
        Ended::Shutdown => {
            if let Some(e) = elector.as_mut() {
                e.release().await;
            }
            tracing::info!("stopped");
            0
        }
        Ended::Lost => {
            health.alive.store(false, Ordering::Relaxed);
            tracing::error!("leadership lost: exiting so that a fresh process rejoins as a standby");
            3
        }
    }
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| format!("strata-operator-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_flags() {
        let o = Options::try_parse_from(["strata-operator"]).unwrap();
        assert!(o.leader_elect);
        assert_eq!(o.metrics_bind_address.to_string(), "0.0.0.0:8080");
        assert_eq!(o.log_format, LogFormat::Json);
        let o = Options::try_parse_from(["strata-operator", "--leader-elect=false", "--log-format", "text"]).unwrap();
        assert!(!o.leader_elect);
        assert_eq!(o.log_format, LogFormat::Text);
        assert!(Options::try_parse_from(["strata-operator", "--log-format", "xml"]).is_err());
    }
}
