//! Leader election on a `coordination.k8s.io/v1` Lease, so that several operator replicas can
//! run and exactly one reconciles.
//!
//! The algorithm is client-go's: the holder renews `renewTime` every `renew_interval`; another
//! instance takes the Lease over only after it has seen the same record, unchanged, for a whole
//! `lease_duration` on its *own* clock (so clock skew between nodes doesn't matter). Every write
//! is a replace carrying the `resourceVersion` that was read, so two contenders cannot both win:
//! the API server rejects the second with 409 Conflict. A holder that cannot renew within
//! `renew_deadline` stops leading; one that shuts down cleanly releases the Lease so a standby
//! takes over at once.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::sync::watch;

/// Timing of the election (client-go's defaults: 15 s / 10 s / 2 s).
#[derive(Clone, Debug)]
pub struct LeaseTiming {
    /// How long a Lease stays valid without renewal before others may take it.
    pub lease_duration: Duration,
    /// A leader that could not renew for this long steps down (must be < `lease_duration`).
    pub renew_deadline: Duration,
    /// Pause between attempts to acquire or renew.
    pub retry_period: Duration,
}

impl Default for LeaseTiming {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// One contender for one Lease.
pub struct LeaderElector {
    api: Api<Lease>,
    name: String,
    identity: String,
    timing: LeaseTiming,
    /// The Lease record last read and when it was first seen in that state.
    observed: Option<(Observed, Instant)>,
}

#[derive(Clone, Debug, PartialEq)]
struct Observed {
    holder: Option<String>,
    renew_time: Option<MicroTime>,
    transitions: Option<i32>,
}

/// Why [`LeaderElector::hold`] returned.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// Shutdown was requested (the Lease is still ours; call [`LeaderElector::release`]).
    Shutdown,
    /// The Lease could not be renewed in time or another instance holds it.
    Lost,
}

impl LeaderElector {
    pub fn new(client: Client, namespace: &str, name: &str, identity: &str, timing: LeaseTiming) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            identity: identity.to_owned(),
            timing,
            observed: None,
        }
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Waits until this instance holds the Lease. Returns false if `shutdown` fired first.
    pub async fn acquire(&mut self, shutdown: &mut watch::Receiver<bool>) -> bool {
        let mut logged_holder = None;
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    tracing::info!(lease = %self.name, identity = %self.identity, "acquired the leader Lease");
                    return true;
                }
                Ok(false) => {
                    let holder = self.observed.as_ref().and_then(|(o, _)| o.holder.clone());
                    if holder != logged_holder {
                        tracing::info!(lease = %self.name, holder = ?holder, "standing by: another instance leads");
                        logged_holder = holder;
                    }
                }
                Err(e) => tracing::warn!(lease = %self.name, error = %e, "cannot read or write the leader Lease"),
            }
            if wait_or_shutdown(shutdown, self.timing.retry_period).await {
                return false;
            }
        }
    }

    /// Keeps renewing the Lease until it is lost or `shutdown` fires.
    pub async fn hold(&mut self, shutdown: &mut watch::Receiver<bool>) -> Ended {
        let mut last_renewed = Instant::now();
        loop {
            if wait_or_shutdown(shutdown, self.timing.retry_period).await {
                return Ended::Shutdown;
            }
            match self.try_acquire_or_renew().await {
                Ok(true) => last_renewed = Instant::now(),
                Ok(false) => {
                    tracing::error!(lease = %self.name, "another instance took the leader Lease");
                    return Ended::Lost;
                }
                Err(e) => tracing::warn!(lease = %self.name, error = %e, "renewing the leader Lease failed"),
            }
            if last_renewed.elapsed() > self.timing.renew_deadline {
                tracing::error!(lease = %self.name, deadline = ?self.timing.renew_deadline, "could not renew the leader Lease in time");
                return Ended::Lost;
            }
        }
    }

    /// Gives the Lease up so that a standby takes over without waiting for it to expire.
    pub async fn release(&mut self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await else { return };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now());
        match self.api.replace(&self.name, &PostParams::default(), &lease).await {
            Ok(_) => tracing::info!(lease = %self.name, "released the leader Lease"),
            Err(e) => tracing::warn!(lease = %self.name, error = %e, "could not release the leader Lease"),
        }
    }

    /// One round of the algorithm: true when this instance holds the Lease afterwards.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let duration_secs = self.timing.lease_duration.as_secs().max(1) as i32;
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(self.name.clone()), ..Default::default() },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(duration_secs),
                    acquire_time: Some(now()),
                    renew_time: Some(now()),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return conflict_is_false(self.api.create(&PostParams::default(), &lease).await);
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let record = Observed {
            holder: spec.holder_identity.clone().filter(|h| !h.is_empty()),
            renew_time: spec.renew_time.clone(),
            transitions: spec.lease_transitions,
        };
        if self.observed.as_ref().is_none_or(|(seen, _)| *seen != record) {
            self.observed = Some((record.clone(), Instant::now()));
        }
        let seen_for = self.observed.as_ref().map_or(Duration::ZERO, |(_, at)| at.elapsed());
        // The holder's own view of its validity, at least one second.
        let holder_duration = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(duration_secs).max(1) as u64);
        let mine = record.holder.as_deref() == Some(self.identity.as_str());
        let expired = record.holder.is_none() || seen_for > holder_duration;
        if !mine && !expired {
            return Ok(false);
        }
        if !mine {
            spec.acquire_time = Some(now());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.holder_identity = Some(self.identity.clone());
        spec.lease_duration_seconds = Some(duration_secs);
        spec.renew_time = Some(now());
        conflict_is_false(self.api.replace(&self.name, &PostParams::default(), &lease).await)
    }
}

/// A 409 means another contender wrote first: not an error, just not ours.
fn conflict_is_false(result: Result<Lease, kube::Error>) -> Result<bool, kube::Error> {
    match result {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

fn now() -> MicroTime {
    MicroTime(Timestamp::now())
}

/// Sleeps `period`; true if shutdown was requested meanwhile (or before).
async fn wait_or_shutdown(shutdown: &mut watch::Receiver<bool>, period: Duration) -> bool {
    if *shutdown.borrow() {
        return true;
    }
    match tokio::time::timeout(period, shutdown.wait_for(|stop| *stop)).await {
        Ok(Ok(_)) => true,
        Err(_elapsed) => false,
        // Nobody can ask for shutdown any more: just pace the loop.
        Ok(Err(_closed)) => {
            tokio::time::sleep(period).await;
            false
        }
    }
}
