//! The CacheCluster controller: applies the desired objects with server-side apply, paces
//! rollouts, and reports status conditions and Events.

mod backoff;
pub mod cluster;
pub mod resharding;
pub mod rollout;
pub mod status;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backoff::Backoffs;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, DynamicObject, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::{CacheCluster, CacheClusterStatus, ConditionStatus, MoveState};
use crate::metrics::Metrics;
use crate::resources::{self, Desired, SpecError};
use crate::topology::{self, NodeId, SlotRange, TopologyNode, migrate, plan, usage};
use rollout::Step;
use status::{DataFate, MemorySetting, Observation, Verdict};

/// The field manager of every server-side apply this operator makes.
pub const FIELD_MANAGER: &str = "strata-operator";

/// Label on everything the operator creates; owned-object watches select on it.
const MANAGED_BY: &str = "app.kubernetes.io/managed-by=strata-operator";

/// Pod label naming the CacheCluster the pod serves.
const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";

/// How often a settled cluster is looked at again even without a watch event.
const RESYNC: Duration = Duration::from_secs(300);
/// How often a cluster that is changing is looked at (watch events usually come first).
const WHILE_PROGRESSING: Duration = Duration::from_secs(5);
/// How often a running resharding plan is looked at: the nodes tell nothing by themselves.
const WHILE_RESHARDING: Duration = Duration::from_secs(1);

/// What every reconciliation shares.
pub struct Context {
    pub client: Client,
    pub metrics: Arc<Metrics>,
    recorder: Recorder,
    reporter: Reporter,
    backoffs: Backoffs,
    /// When this process took the lead: restarts that ended before are the previous leader's to
    /// have told.
    started: Timestamp,
    /// Per cluster ("namespace/name"), the restart count already told with an Event per
    /// "pod UID/container": each restart gets one Warning Event, however many reconciles see it.
    told_restarts: Mutex<HashMap<String, HashMap<String, i32>>>,
    /// Per cluster, the pods the rollout evicted and the UID each had: until the replacement is
    /// Ready, that pod being down is planned.
    evicted: Mutex<HashMap<String, BTreeMap<String, String>>>,
    /// How slot migrations are paced.
    resharding: resharding::Options,
}

impl Context {
    pub fn new(client: Client, metrics: Arc<Metrics>, instance: Option<String>) -> Self {
        let reporter = Reporter { controller: FIELD_MANAGER.to_owned(), instance };
        Self {
            recorder: Recorder::new(client.clone(), reporter.clone()),
            reporter,
            client,
            metrics,
            backoffs: Backoffs::default(),
            started: Timestamp::now(),
            told_restarts: Default::default(),
            evicted: Default::default(),
            resharding: resharding::Options::default(),
        }
    }

    /// Paces slot migrations with `options` instead of the defaults.
    pub fn with_resharding(mut self, options: resharding::Options) -> Self {
        self.resharding = options;
        self
    }
}

/// Reconciliation failures; `reason()` labels the error metric.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the CacheCluster has no namespace")]
    NoNamespace,
    #[error("reading {what}: {source}")]
    Read { what: String, source: kube::Error },
    #[error("applying {kind} {name}: {source}")]
    Apply { kind: String, name: String, source: kube::Error },
    #[error("evicting pod {pod}: {source}")]
    Evict { pod: String, source: kube::Error },
    #[error("writing status: {0}")]
    Status(kube::Error),
    #[error("the cluster admin Secret {0}")]
    AdminSecret(String),
}

impl Error {
    /// Every value [`Error::reason`] returns: the error metric starts each at 0, so a healthy
    /// operator exports its error series (a dashboard shows 0, not "no data").
    pub const REASONS: [&'static str; 6] = ["NoNamespace", "Read", "Apply", "Evict", "Status", "AdminSecret"];

    pub fn reason(&self) -> &'static str {
        match self {
            Error::NoNamespace => "NoNamespace",
            Error::Read { .. } => "Read",
            Error::Apply { .. } => "Apply",
            Error::Evict { .. } => "Evict",
            Error::Status(_) => "Status",
            Error::AdminSecret(_) => "AdminSecret",
        }
    }
}

/// Runs the controller until `shutdown` resolves. `namespace` limits it to one namespace.
pub async fn run(
    ctx: Arc<Context>,
    namespace: Option<&str>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let client = ctx.client.clone();
    let clusters: Api<CacheCluster> = scoped(&client, namespace);
    let owned = || watcher::Config::default().labels(MANAGED_BY);
    // Pods belong to the StatefulSet, not to the CacheCluster: map them by their instance label.
    let pods_to_cluster = |pod: Pod| {
        let ns = pod.namespace()?;
        let instance = pod.labels().get(INSTANCE_LABEL)?.clone();
        Some(ObjectRef::<CacheCluster>::new(&instance).within(&ns))
    };
    Controller::new(clusters, watcher::Config::default())
        .owns(scoped::<StatefulSet>(&client, namespace), owned())
        .owns(scoped::<Service>(&client, namespace), owned())
        .owns(scoped::<ConfigMap>(&client, namespace), owned())
        .owns(scoped::<PodDisruptionBudget>(&client, namespace), owned())
        .watches(scoped::<Pod>(&client, namespace), owned(), pods_to_cluster)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|result| {
            let ctx = ctx.clone();
            async move {
                match result {
                    Ok((obj, _)) => tracing::debug!(cachecluster = %obj, "reconciled"),
                    Err(kube::runtime::controller::Error::ObjectNotFound(obj)) => {
                        // Gone from the cluster: its series go too.
                        ctx.metrics.forget_cluster(obj.namespace.as_deref().unwrap_or_default(), &obj.name);
                        tracing::debug!(cachecluster = %obj, "deleted before it was reconciled")
                    }
                    Err(e) => tracing::warn!(error = %e, "controller"),
                }
            }
        })
        .await;
}

fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

async fn reconcile(cc: Arc<CacheCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    ctx.metrics.reconcile_started();
    let result = reconcile_cluster(&cc, &ctx).await;
    ctx.metrics.reconcile_finished(started.elapsed(), result.as_ref().err().map(Error::reason));
    if result.is_ok() {
        ctx.backoffs.reset(&ObjectRef::from_obj(cc.as_ref()));
    }
    result
}

fn error_policy(cc: Arc<CacheCluster>, error: &Error, ctx: Arc<Context>) -> Action {
    let delay = ctx.backoffs.next(&ObjectRef::from_obj(cc.as_ref()));
    tracing::warn!(
        cachecluster = %ObjectRef::from_obj(cc.as_ref()),
        error = %error,
        retry_in = ?delay,
        "reconcile failed"
    );
    Action::requeue(delay)
}

async fn reconcile_cluster(cc: &CacheCluster, ctx: &Context) -> Result<Action, Error> {
    // Cluster mode acts on its status (the resharding plan, the epoch): the watch's copy can
    // lag behind the status the previous round wrote, and a plan read stale would start or
    // push from an older step. The object is read again from the API server.
    let fresh;
    let cc = match (cc.spec.cluster.enabled, cc.namespace()) {
        (true, Some(ns)) if cc.metadata.deletion_timestamp.is_none() => {
            let api: Api<CacheCluster> = Api::namespaced(ctx.client.clone(), &ns);
            match api.get_opt(&cc.name_any()).await {
                Ok(Some(c)) => {
                    fresh = c;
                    &fresh
                }
                Ok(None) => return Ok(Action::await_change()),
                Err(e) => return Err(read(format!("CacheCluster {ns}/{}", cc.name_any()), e)),
            }
        }
        _ => cc,
    };
    if cc.metadata.deletion_timestamp.is_some() {
        ctx.metrics.forget_cluster(cc.namespace().as_deref().unwrap_or_default(), &cc.name_any());
        let key = format!("{}/{}", cc.namespace().unwrap_or_default(), cc.name_any());
        lock(&ctx.told_restarts).remove(&key);
        lock(&ctx.evicted).remove(&key);
        // Owner references make the garbage collector delete everything we created.
        return Ok(Action::await_change());
    }
    let ns = cc.namespace().ok_or(Error::NoNamespace)?;
    let name = cc.name_any();
    let client = &ctx.client;
    let sts_api: Api<StatefulSet> = Api::namespaced(client.clone(), &ns);
    let existing = sts_api.get_opt(&name).await.map_err(|e| read(format!("StatefulSet {ns}/{name}"), e))?;

    let desired = match resources::desired(cc).and_then(|d| check_immutable(d, existing.as_ref())) {
        // Cluster mode: the pods run until their slots have moved away (scale in), so the
        // StatefulSet runs what the topology still needs, not always `spec.replicas`.
        Ok(d) if cc.spec.cluster.enabled => {
            let current = existing.as_ref().and_then(|s| s.spec.as_ref()).and_then(|s| s.replicas);
            let status = cc.status.clone().unwrap_or_default();
            d.with_replicas(resharding::statefulset_replicas(cc.spec.replicas, &status, current))
        }
        Ok(d) => d,
        Err(invalid) => {
            tracing::warn!(cachecluster = %format!("{ns}/{name}"), problem = %invalid, "spec cannot be applied");
            let obs = Observation {
                desired: cc.spec.replicas,
                replicas: existing.as_ref().and_then(|s| s.status.as_ref()).map_or(0, |s| s.replicas),
                ready: existing.as_ref().and_then(|s| s.status.as_ref()).and_then(|s| s.ready_replicas).unwrap_or(0),
                invalid_spec: Some(invalid.to_string()),
                ..Default::default()
            };
            write_status(cc, ctx, &obs).await?;
            return Ok(Action::await_change());
        }
    };

    // Cluster mode drains the pods that go (resharding): their data is not left behind.
    let before = existing.as_ref().and_then(|s| s.spec.as_ref()).and_then(|s| s.replicas);
    if let Some(before) = before.filter(|&b| b > cc.spec.replicas && !cc.spec.cluster.enabled) {
        report_scale_in(ctx, cc, before).await;
    }

    // The nodes mount the admin password: it exists before their pods do.
    let admin_password =
        if cc.spec.cluster.enabled { Some(admin_password(client, cc, &ns, &name).await?) } else { None };
    // cert-manager's Certificate first: the pods mount the Secret it makes.
    if let Some(certificate) = desired.certificate.as_ref() {
        let cm = Optional {
            resource: resources::certificate_resource(),
            field: "spec.tls.certManager",
            fallback: "or set spec.tls.secretName to a kubernetes.io/tls Secret you manage",
            provider: "cert-manager",
        };
        let cert_name = certificate.metadata.name.clone().unwrap_or_default();
        if let Presence::CrdMissing(why) = reconcile_optional(client, &ns, &cert_name, &cm, Some(certificate)).await? {
            tracing::warn!(cachecluster = %format!("{ns}/{name}"), problem = %why, "spec cannot be applied");
            let obs = Observation {
                desired: cc.spec.replicas,
                replicas: existing.as_ref().and_then(|s| s.status.as_ref()).map_or(0, |s| s.replicas),
                ready: existing.as_ref().and_then(|s| s.status.as_ref()).and_then(|s| s.ready_replicas).unwrap_or(0),
                invalid_spec: Some(why),
                ..Default::default()
            };
            write_status(cc, ctx, &obs).await?;
            // Installing cert-manager does not change the CacheCluster: look again later.
            return Ok(Action::requeue(std::time::Duration::from_secs(60)));
        }
    } else if cc.status.as_ref().and_then(|s| s.observed_generation) != cc.metadata.generation {
        // The spec changed: it may no longer ask cert-manager for the certificate.
        drop_unwanted_certificate(client, cc, &ns, &name).await?;
    }
    apply(client, &ns, &desired.config_map).await?;
    apply(client, &ns, &desired.headless_service).await?;
    apply(client, &ns, &desired.client_service).await?;
    apply(client, &ns, &desired.pdb).await?;
    let sts = apply(client, &ns, &desired.stateful_set).await?;

    let mut obs = Observation {
        desired: cc.spec.replicas,
        data: DataFate::of(&cc.spec),
        memory: MemorySetting::of(&cc.spec),
        ..Default::default()
    };
    // Discovery costs an API call: only when a ServiceMonitor or PrometheusRule is wanted, or
    // may be left to delete (monitoring was on at the last reconcile, even if half of it could
    // not be applied).
    let was_applied = cc.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == crate::api::Condition::MONITORING && c.reason != status::reason::SM_DISABLED)
    });
    if desired.service_monitor.is_some() || was_applied {
        let sm = Optional {
            resource: resources::service_monitor_resource(),
            field: "spec.monitoring.serviceMonitor",
            fallback: "or scrape the pods' prometheus.io annotations instead",
            provider: "the Prometheus Operator's CRDs",
        };
        match reconcile_optional(client, &ns, &name, &sm, desired.service_monitor.as_ref()).await? {
            Presence::Applied => obs.monitoring_ready = true,
            Presence::CrdMissing(why) => obs.monitoring_unavailable = Some(why),
            Presence::Absent => {}
        }
    }
    if desired.prometheus_rule.is_some() || was_applied {
        let rule = Optional {
            resource: resources::prometheus_rule_resource(),
            field: "spec.monitoring.prometheusRule",
            fallback: "or load the repository's dashboards/strata.rules.yaml into Prometheus instead",
            provider: "the Prometheus Operator's CRDs",
        };
        match reconcile_optional(client, &ns, &name, &rule, desired.prometheus_rule.as_ref()).await? {
            Presence::Applied => obs.rule_ready = true,
            Presence::CrdMissing(why) => obs.rule_unavailable = Some(why),
            Presence::Absent => {}
        }
    }

    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let selector = resources::selector_string(&name);
    let pods = pods_api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| read(format!("pods of {ns}/{name}"), e))?
        .items;
    let key = format!("{ns}/{name}");
    // Cluster mode: how this round reaches the admin ports (each pod as its own spec says).
    let access = match admin_password {
        Some(password) => Some(admin_access(client, cc, &ns, &name, password, &pods).await?),
        None => None,
    };
    // Pods whose (earlier spec's) TLS Secret cannot serve cannot apply a topology: the rollout
    // replaces them first, and does not wait for them to replace them.
    let mut replaced_anyway = match &access {
        Some(Ok(access)) => cluster::unreachable_by_tls(&pods, access),
        _ => Vec::new(),
    };
    // So are old pods that lag and cannot be reached at all (e.g. restarted mid-rollout, they
    // speak the new spec's admin protocol): without this the gate would wait for them forever.
    if let Some(Ok(access)) = &access {
        let candidates: Vec<String> = rollout::lagging_old_pods(&sts, &pods, cc.status.as_ref())
            .into_iter()
            .filter(|p| !replaced_anyway.contains(p))
            .collect();
        if !candidates.is_empty() {
            replaced_anyway.extend(cluster::unreachable_old_pods(&name, &pods, &candidates, access).await);
        }
    }
    let mut step = rollout::next_step(&sts, &pods, &replaced_anyway);
    if let Step::Evict(pod) = &step
        && cc.spec.cluster.enabled
        && let Some(why) = rollout::cluster_unsettled(cc.status.as_ref(), pod, &replaced_anyway)
    {
        step = Step::Waiting { pod: pod.clone(), why };
    }
    // The current spec's TLS Secret cannot serve: a replacement could not start (the last
    // recorded status, which the gate above reads, does not know that).
    if let (Some(Err(problem)), Some(tls)) = (&access, &cc.spec.tls) {
        let secret_ref = format!("{ns}/{}", resources::tls_secret_name(tls, &name));
        step = rollout::held_for_tls_secret(step, &secret_ref, Some(problem.why()));
    }
    if let Step::Evict(pod) = step.clone() {
        let pod = &pod;
        let uid = pods.iter().find(|p| p.metadata.name.as_ref() == Some(pod)).and_then(|p| p.metadata.uid.clone());
        step = evict(ctx, cc, &pods_api, pod).await?;
        if let (Step::Waiting { why, .. }, Some(uid)) = (&step, uid)
            && why == EVICTED
        {
            lock(&ctx.evicted).entry(key.clone()).or_default().insert(pod.clone(), uid);
        }
    }

    let sts_status = sts.status.clone().unwrap_or_default();
    obs.replicas = sts_status.replicas;
    obs.ready = sts_status.ready_replicas.unwrap_or(0);
    obs.updated = rollout::updated_pods(&sts, &pods);
    obs.failing_pods = rollout::failing_pods(&pods, Timestamp::now());
    obs.restarts = rollout::recent_restarts(&pods, Timestamp::now());
    let troubled: Vec<String> = obs
        .failing_pods
        .iter()
        .filter_map(|f| f.split(':').next().map(str::to_owned))
        .chain(obs.restarts.iter().map(|r| r.pod.clone()))
        .collect();
    obs.planned_outage = {
        let mut evicted = lock(&ctx.evicted);
        let ours = evicted.entry(key.clone()).or_default();
        // A replacement that is Ready again ends the planned outage of its name.
        ours.retain(|pod, uid| {
            !pods.iter().any(|p| {
                p.metadata.name.as_ref() == Some(pod) && p.metadata.uid.as_ref() != Some(uid) && rollout::ready(p)
            })
        });
        rollout::planned_outage(&sts, &pods, ours, &troubled)
    };
    if obs.data != DataFate::Lost && !cc.spec.cluster.enabled {
        obs.unreachable = unreachable_volumes(client, &ns, &name, cc.spec.replicas).await?;
    }
    report_restarts(ctx, cc, &key, &pods, &obs).await;
    if let Some(access) = access {
        let state = match access {
            Ok(access) => reconcile_topology(cc, &ns, &name, &pods, &access, ctx.resharding).await,
            Err(problem) => {
                let cachecluster = format!("{ns}/{name}");
                match &problem {
                    cluster::TlsProblem::NotIssued(why) => tracing::info!(%cachecluster, "{why}"),
                    cluster::TlsProblem::Unusable(why) => {
                        tracing::warn!(%cachecluster, problem = %why, "the admin ports cannot be reached over TLS")
                    }
                }
                cluster::ClusterState::without_tls(&cc.status.clone().unwrap_or_default(), problem)
            }
        };
        if let Some(why) = &state.pushed {
            report_topology_change(ctx, cc, &state, why).await;
        }
        for notice in &state.notices {
            let event = Event {
                type_: if notice.warning { EventType::Warning } else { EventType::Normal },
                reason: notice.reason.to_owned(),
                note: Some(notice.note.clone()),
                action: "Reshard".to_owned(),
                secondary: None,
            };
            // A Recorder of its own: each move is its own Event, not a count on the first one.
            let recorder = Recorder::new(ctx.client.clone(), ctx.reporter.clone());
            if let Err(e) = recorder.publish(&event, &cc.object_ref(&())).await {
                tracing::warn!(error = %e, reason = %event.reason, "could not publish an Event");
            }
        }
        obs.cluster = Some(state);
    }
    let resharding = obs.cluster.as_ref().is_some_and(|c| c.resharding.is_some());
    let settled = step == Step::Complete
        && obs.ready >= obs.desired
        && obs.cluster.as_ref().is_none_or(cluster::ClusterState::settled);
    obs.rollout = Some(step);
    write_status(cc, ctx, &obs).await?;

    Ok(Action::requeue(if resharding {
        WHILE_RESHARDING
    } else if settled {
        RESYNC
    } else {
        WHILE_PROGRESSING
    }))
}

/// StatefulSet fields Kubernetes never lets change: a spec that would change them is refused
/// here (Degraded/InvalidSpec) instead of failing every apply.
fn check_immutable(desired: Desired, existing: Option<&StatefulSet>) -> Result<Desired, SpecError> {
    let Some(existing) = existing else { return Ok(desired) };
    let claim = |s: &StatefulSet| {
        let t = s.spec.as_ref()?.volume_claim_templates.as_ref()?.first()?.clone();
        let spec = t.spec?;
        let size = spec.resources?.requests?.get("storage").cloned();
        Some((size.map(|q| resources::quantity::parse_bytes(&q).unwrap_or(0)), spec.storage_class_name))
    };
    let (was, will) = (claim(existing), claim(&desired.stateful_set));
    if was != will {
        let show = |c: &Option<(Option<u64>, Option<String>)>| match c {
            None => "no volume".to_owned(),
            Some((size, class)) => format!(
                "size {} bytes, storageClassName {}",
                size.unwrap_or(0),
                class.as_deref().unwrap_or("(default)")
            ),
        };
        return Err(SpecError {
            field: "storage".to_owned(),
            message: format!(
                "the per-pod volume cannot change once the cluster exists (it was {}, the spec asks for {}); \
                 restore the previous storage settings, or create a new CacheCluster and move clients to it",
                show(&was),
                show(&will)
            ),
        });
    }
    Ok(desired)
}

/// Cluster mode's admin password, from the Secret `<name>-cluster-admin`, which is created with a
/// random password the first time. Never applied again: a new password would lock the operator
/// out of nodes still running with the old one.
async fn admin_password(client: &Client, cc: &CacheCluster, ns: &str, name: &str) -> Result<String, Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret_name = resources::admin_secret_name(name);
    let read_password = |secret: Secret| {
        let bytes = secret.data.and_then(|mut d| d.remove(resources::ADMIN_PASSWORD_KEY)).map(|b| b.0);
        let password = bytes.and_then(|b| String::from_utf8(b).ok()).map(|p| p.trim_end().to_owned());
        password.filter(|p| !p.is_empty()).ok_or_else(|| {
            Error::AdminSecret(format!(
                "{ns}/{secret_name} has no key {:?}: delete it and the operator creates a new one (then delete the \
                 pods so they read it)",
                resources::ADMIN_PASSWORD_KEY
            ))
        })
    };
    if let Some(secret) = api.get_opt(&secret_name).await.map_err(|e| read(format!("Secret {ns}/{secret_name}"), e))? {
        return read_password(secret);
    }
    let password = random_password().map_err(|e| Error::AdminSecret(format!("password: /dev/urandom: {e}")))?;
    let secret = resources::admin_secret(cc, password.clone()).map_err(|e| Error::AdminSecret(e.to_string()))?;
    let params = PostParams { field_manager: Some(FIELD_MANAGER.to_owned()), ..Default::default() };
    match api.create(&params, &secret).await {
        Ok(_) => {
            tracing::info!(secret = %format!("{ns}/{secret_name}"), "created the cluster admin password");
            Ok(password)
        }
        // Another reconcile (or a previous leader) was first: use its password.
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let secret = api.get(&secret_name).await.map_err(|e| read(format!("Secret {ns}/{secret_name}"), e))?;
            read_password(secret)
        }
        Err(source) => Err(Error::Apply { kind: "Secret".to_owned(), name: secret_name, source }),
    }
}

/// How this round reaches the nodes' admin ports: the password, and TLS client configs from
/// the certificate Secrets, read every round so that a renewed certificate or CA is used. The
/// inner error: `spec.tls` is set but its Secret cannot serve (yet).
///
/// The spec's Secret is read when there is one; so is every other TLS Secret a pod's admin port
/// serves with (`resources::admin_tls_secret`): during a rollout that turns `spec.tls` on or off
/// or changes the Secret, pods of the earlier spec speak as they were started, and are spoken
/// to that way. Each Secret is read once.
async fn admin_access(
    client: &Client,
    cc: &CacheCluster,
    ns: &str,
    name: &str,
    password: String,
    pods: &[Pod],
) -> Result<Result<cluster::AdminAccess, cluster::TlsProblem>, Error> {
    let headless_domain = format!("{}.{ns}.svc", resources::headless_service_name(name));
    let mut access = cluster::AdminAccess { password: Some(password), tls: Default::default(), headless_domain };
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let get = |secret_name: String| {
        let api = api.clone();
        async move {
            let secret_ref = format!("{ns}/{secret_name}");
            let secret = api.get_opt(&secret_name).await.map_err(|e| read(format!("Secret {secret_ref}"), e))?;
            Ok::<_, Error>((secret, secret_ref))
        }
    };
    if let Some(tls) = &cc.spec.tls {
        let secret_name = resources::tls_secret_name(tls, name);
        let (secret, secret_ref) = get(secret_name.clone()).await?;
        match cluster::admin_tls_config(secret.as_ref(), &secret_ref, tls.cert_manager.is_some()) {
            Ok(config) => access.tls.insert(secret_name, Ok(config)),
            Err(problem) => return Ok(Err(problem)),
        };
    }
    let mounted: std::collections::BTreeSet<String> = pods.iter().filter_map(resources::admin_tls_secret).collect();
    for secret_name in mounted {
        if access.tls.contains_key(&secret_name) {
            continue;
        }
        let (secret, secret_ref) = get(secret_name.clone()).await?;
        access.tls.insert(secret_name, cluster::earlier_tls_config(secret.as_ref(), &secret_ref));
    }
    Ok(Ok(access))
}

/// 32 random bytes in hex, from the kernel's CSPRNG.
fn random_password() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// One round of cluster mode: read every node's topology, advance the resharding plan (where
/// the running migrations stand), push a new epoch when the nodes differ from the desired
/// topology (which gives committed migrations' slots to their targets), then make or carry on
/// the plan, and report where each node stands.
async fn reconcile_topology(
    cc: &CacheCluster,
    ns: &str,
    name: &str,
    pods: &[Pod],
    access: &cluster::AdminAccess,
    options: resharding::Options,
) -> cluster::ClusterState {
    let status = cc.status.clone().unwrap_or_default();
    let uid = cc.metadata.uid.clone().unwrap_or_default();
    let width = resharding::topology_width(cc.spec.replicas, &status);
    let members = cluster::members(name, width, pods);
    let pod_of = |ordinal: i32| format!("{name}-{ordinal}");
    let now = Timestamp::now();
    let mut notices = Vec::new();
    let mut plan = status.resharding.clone();

    // Reports first, migrations second: a migration that commits in between is then seen as
    // committed, and the push below includes it (a push without it would be refused).
    let reports = cluster::read_reports(&members, access).await;
    if let Some(plan) = plan.as_mut() {
        for mv in plan.moves.iter_mut().filter(|m| m.state == MoveState::Running) {
            let source = members.get(mv.source as usize).map(|m| cluster::endpoint(m, access));
            let mut report = match source {
                Some(Ok(endpoint)) => migrate::status(&endpoint, &mv.id).await.map_err(|e| cluster::short(&e)),
                Some(Err(why)) => Err(why),
                None => Err("no IP".to_owned()),
            };
            // A source that does not know the id any more (it moved on, or restarted): the
            // target has the last word on whether it committed.
            if matches!(&report, Ok(None)) || matches!(&report, Ok(Some(r)) if r.phase == migrate::Phase::Unknown) {
                let target = members.get(mv.target as usize).and_then(|m| cluster::endpoint(m, access).ok());
                if let Some(endpoint) = target
                    && let Ok(Some(r)) = migrate::status(&endpoint, &mv.id).await
                    && r.phase == migrate::Phase::Committed
                {
                    report = Ok(Some(r));
                }
            }
            notices.extend(resharding::on_report(mv, report, now));
        }
        // A START whose status write was lost (the round failed after it, or the operator
        // restarted): the move is Pending here but ran on the nodes, and may have committed,
        // in which case a push without it would be refused forever. The latest migration of
        // each source with pending moves and none running is adopted when it is one of them.
        let mut asked = std::collections::BTreeSet::new();
        for i in 0..plan.moves.len() {
            let source = plan.moves[i].source;
            let busy = plan.moves.iter().any(|m| m.source == source && m.state == MoveState::Running);
            if plan.moves[i].state != MoveState::Pending || busy || !asked.insert(source) {
                continue;
            }
            let Some(endpoint) = members.get(source as usize).and_then(|m| cluster::endpoint(m, access).ok()) else {
                continue;
            };
            let Ok(Some(latest)) = migrate::latest(&endpoint).await else { continue };
            for mv in plan.moves.iter_mut().filter(|m| m.source == source && m.state == MoveState::Pending) {
                let target_id = NodeId::of_pod(&uid, mv.target as u32);
                if latest.id.starts_with(&plan.plan) && resharding::adopt(mv, &latest, target_id.as_str()) {
                    tracing::info!(cachecluster = %format!("{ns}/{name}"), migration = %latest.id, "adopted a migration the status had lost");
                    break;
                }
            }
        }
    }

    let highest = reports
        .iter()
        .filter_map(|r| match r {
            cluster::Report::Applied(Some(r)) => Some(r),
            _ => None,
        })
        .max_by_key(|r| r.epoch);
    let committed = resharding::committed(plan.as_ref());
    let layout = plan::apply(&resharding::layout_of_record(&status, highest, &uid, width), &committed, width);
    let desired = match cluster::desired_nodes(&uid, &access.headless_domain, &members, &layout, &status.nodes) {
        Ok(nodes) => nodes,
        Err(waiting) => {
            return cluster::ClusterState {
                waiting: Some(waiting),
                resharding: plan,
                notices,
                ..cluster::ClusterState::as_recorded(&status)
            };
        }
    };
    let status_epoch = status.topology_epoch.unwrap_or(0);
    let mut state = match cluster::decide(&desired, &members, &reports, status_epoch, &status.nodes, status.shards) {
        cluster::Decision::InSync { epoch } => {
            let applied: Vec<Result<u64, String>> = reports
                .iter()
                .map(|r| match r {
                    cluster::Report::Applied(r) => Ok(r.as_ref().map_or(0, |r| r.epoch)),
                    cluster::Report::Unreachable(why) => Err(why.clone()),
                })
                .collect();
            cluster::state(epoch, &desired, &members, &applied, None)
        }
        cluster::Decision::Push { topology, why } => {
            tracing::info!(cachecluster = %format!("{ns}/{name}"), epoch = topology.epoch, why = %why, "pushing the topology");
            let applied = cluster::push_all(&members, &topology, access, &committed).await;
            cluster::state(topology.epoch, &desired, &members, &applied, Some(why))
        }
    };

    // Committed moves are done once every member runs the epoch that gives their slots away.
    if let Some(p) = plan.as_mut()
        && state.in_sync()
    {
        notices.extend(resharding::confirm(p, state.epoch, &pod_of));
    }
    match &plan {
        Some(p) if resharding::finished(p) => {
            let note = format!(
                "Plan {} done: moved {} slots; {} shards even at topology epoch {}",
                p.plan, p.slots_moved, p.shards, state.epoch
            );
            notices.push(resharding::Notice { warning: false, reason: resharding::reason::DONE, note });
            plan = None;
        }
        // `replicas` changed under the plan: once nothing is in flight, plan again from here.
        Some(p) if p.shards != cc.spec.replicas && !resharding::in_flight(p) => plan = None,
        _ => {}
    }
    if plan.is_none() && state.in_sync() {
        let now_layout: Vec<_> = desired.iter().map(|n| n.slots.clone()).collect();
        plan = resharding::new_plan(&now_layout, cc.spec.replicas, state.epoch, options, now);
        if let Some(p) = &plan {
            notices.push(resharding::Notice {
                warning: false,
                reason: resharding::reason::STARTED,
                note: resharding::started_note(p, &pod_of),
            });
        }
    }
    // Start what may start: only on a cluster where every member runs the current epoch (the
    // target must be a member of the topology its source applied).
    if let Some(p) = plan.as_mut()
        && state.in_sync()
    {
        for i in resharding::startable(p, now, options.max_concurrent) {
            let (source, target) = (p.moves[i].source as usize, p.moves[i].target as usize);
            let (Some(from), Some(to)) = (members.get(source), members.get(target)) else { continue };
            let (Some(endpoint), Some(target_ip)) = (cluster::endpoint(from, access).ok(), to.ip.as_deref()) else {
                continue;
            };
            let slots = plan::parse_ranges(&p.moves[i].slots).unwrap_or_default();
            let moving: u32 = slots.iter().map(SlotRange::len).sum();
            let source_slots = desired.get(source).map_or(0, TopologyNode::slot_count);
            if let Err(why) = room_for(&endpoint, to, access, moving, source_slots).await {
                let message = format!(
                    "migration {} of slots {} from {} to {} not started: {why}",
                    p.moves[i].id, p.moves[i].slots, from.pod, to.pod
                );
                tracing::warn!(cachecluster = %format!("{ns}/{name}"), "{message}");
                state.capacity = Some(message);
                continue;
            }
            let mid = resharding::begin(p, i);
            let target_id = NodeId::of_pod(&uid, target as u32);
            tracing::info!(cachecluster = %format!("{ns}/{name}"), migration = %mid, from = %from.pod, to = %to.pod, slots = %p.moves[i].slots, "starting a slot migration");
            if let Err(e) =
                migrate::start(&endpoint, &mid, &target_id, &cluster::admin_address(target_ip), &slots).await
            {
                let adopted = match migrate::latest(&endpoint).await {
                    Ok(Some(latest)) => resharding::adopt(&mut p.moves[i], &latest, target_id.as_str()),
                    _ => false,
                };
                if !adopted {
                    notices.push(resharding::fail(&mut p.moves[i], &cluster::short(&e), now));
                }
            }
        }
    }
    state.resharding = plan;
    state.notices = notices;
    state
}

/// Whether `to` has room for `moving` of the `source_slots` slots of the node at `source`, from
/// both nodes' INFO. A node that does not answer INFO is not checked (the migration itself then
/// fails on a target that runs out of room, and is retried).
async fn room_for(
    source: &topology::client::AdminEndpoint,
    to: &cluster::Member,
    access: &cluster::AdminAccess,
    moving: u32,
    source_slots: u32,
) -> Result<(), String> {
    let Ok(target) = cluster::endpoint(to, access) else { return Ok(()) };
    let (Ok(from), Ok(into)) = (usage::usage(source).await, usage::usage(&target).await) else { return Ok(()) };
    let budget = Some(into.budget).filter(|&b| b > 0);
    resharding::capacity_check(moving, Some(from.used), source_slots, Some(into.used), budget)
}

/// An Event per topology pushed: Normal when every node applied it, Warning otherwise.
async fn report_topology_change(ctx: &Context, cc: &CacheCluster, state: &cluster::ClusterState, why: &str) {
    let applied = state.nodes.iter().filter(|n| n.applied_epoch == Some(state.epoch)).count();
    let mut note = format!(
        "Topology epoch {} ({} shards) applied by {applied}/{} nodes, {} slots served: {why}",
        state.epoch,
        state.shards,
        state.nodes.len(),
        state.slots_covered
    );
    if !state.lagging.is_empty() {
        note.push_str(&format!("; not applied: {}", state.lagging.join("; ")));
    }
    let event = Event {
        type_: if state.lagging.is_empty() { EventType::Normal } else { EventType::Warning },
        reason: "TopologyPushed".to_owned(),
        note: Some(note),
        action: "PushTopology".to_owned(),
        secondary: None,
    };
    // A Recorder of its own: the shared one would fold successive pushes into one Event's count.
    let recorder = Recorder::new(ctx.client.clone(), ctx.reporter.clone());
    if let Err(e) = recorder.publish(&event, &cc.object_ref(&())).await {
        tracing::warn!(error = %e, reason = %event.reason, "could not publish an Event");
    }
}

/// Server-side apply of one object under [`FIELD_MANAGER`]; returns what the API server stored.
async fn apply<K>(client: &Client, ns: &str, obj: &K) -> Result<K, Error>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Serialize
        + DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    api.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(obj))
        .await
        .map_err(|source| Error::Apply { kind: K::kind(&()).into_owned(), name, source })
}

/// An object of another operator's API (the Prometheus Operator's), which may not be installed.
struct Optional {
    resource: kube::api::ApiResource,
    /// The spec field asking for it, for the condition's message.
    field: &'static str,
    /// What to do instead when its CRD is missing.
    fallback: &'static str,
    /// Who provides its CRD.
    provider: &'static str,
}

/// What [`reconcile_optional`] did.
enum Presence {
    Applied,
    /// Wanted, but the API server does not serve its kind: the message says so.
    CrdMissing(String),
    /// Not wanted (deleted if it was there).
    Absent,
}

/// Applies or removes one object of an [`Optional`] API; a missing CRD is reported, not an error.
async fn reconcile_optional(
    client: &Client,
    ns: &str,
    name: &str,
    optional: &Optional,
    wanted: Option<&DynamicObject>,
) -> Result<Presence, Error> {
    let resource = &optional.resource;
    let crd_installed = match client.list_api_group_resources(&resource.api_version).await {
        Ok(list) => list.resources.iter().any(|r| r.name == resource.plural),
        Err(kube::Error::Api(e)) if e.code == 404 => false,
        Err(e) => return Err(read(format!("API group {}", resource.api_version), e)),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, resource);
    let failed = |source| Error::Apply { kind: resource.kind.clone(), name: name.to_owned(), source };
    match (wanted, crd_installed) {
        (Some(object), true) => {
            api.patch(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(object)).await.map_err(failed)?;
            Ok(Presence::Applied)
        }
        (Some(_), false) => Ok(Presence::CrdMissing(format!(
            "{} is set but the cluster has no {} {} API ({}): install it, {}",
            optional.field, resource.api_version, resource.kind, optional.provider, optional.fallback
        ))),
        (None, true) => match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {
                tracing::info!(kind = %resource.kind, object = %format!("{ns}/{name}"), "deleted: monitoring turned off");
                Ok(Presence::Absent)
            }
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(Presence::Absent),
            Err(source) => Err(failed(source)),
        },
        (None, false) => Ok(Presence::Absent),
    }
}

/// The Certificate this CacheCluster had cert-manager issue, once `spec.tls.certManager` is
/// gone: deleted, so that cert-manager stops renewing it (the Secret it made stays, as
/// cert-manager leaves it). A Certificate of that name this CacheCluster does not own (a
/// user's, filling the Secret `spec.tls.secretName` names) is left alone.
async fn drop_unwanted_certificate(client: &Client, cc: &CacheCluster, ns: &str, name: &str) -> Result<(), Error> {
    let resource = resources::certificate_resource();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    let cert_name = resources::certificate_name(name);
    let found = match api.get_opt(&cert_name).await {
        Ok(found) => found,
        // No cert-manager API ("404 page not found"): nothing to delete.
        Err(kube::Error::Api(e)) if e.code == 404 => None,
        Err(e) => return Err(read(format!("Certificate {ns}/{cert_name}"), e)),
    };
    let uid = cc.metadata.uid.as_deref();
    let ours = found.is_some_and(|c| c.owner_references().iter().any(|o| Some(o.uid.as_str()) == uid));
    if !ours {
        return Ok(());
    }
    match api.delete(&cert_name, &DeleteParams::default()).await {
        Ok(_) => {
            tracing::info!(object = %format!("{ns}/{cert_name}"), "deleted the Certificate: spec.tls.certManager is no longer set")
        }
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(source) => return Err(Error::Apply { kind: resource.kind.clone(), name: cert_name, source }),
    }
    Ok(())
}

/// Evicts `pod` (the PDB decides); a refused eviction means waiting, not failing.
async fn evict(ctx: &Context, cc: &CacheCluster, pods: &Api<Pod>, pod: &str) -> Result<Step, Error> {
    match pods.evict(pod, &EvictParams::default()).await {
        Ok(_) => {
            tracing::info!(pod, "replacing pod to roll out the current spec");
            // The pod as the related object: Events with the same reason and related object
            // are merged into one series, and each replaced pod deserves its own.
            let related = ObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("Pod".to_owned()),
                name: Some(pod.to_owned()),
                namespace: cc.namespace(),
                ..Default::default()
            };
            let event = Event {
                type_: EventType::Normal,
                reason: "RollingPod".to_owned(),
                note: Some(format!("Replacing pod {pod} with the current spec")),
                action: "Evict".to_owned(),
                secondary: Some(related),
            };
            publish(ctx, cc, &event).await;
            Ok(Step::Waiting { pod: pod.to_owned(), why: EVICTED.to_owned() })
        }
        // 429: the PodDisruptionBudget allows no disruption right now.
        Err(kube::Error::Api(e)) if e.code == 429 => Ok(Step::Waiting {
            pod: pod.to_owned(),
            why: "until the PodDisruptionBudget allows its eviction".to_owned(),
        }),
        Err(kube::Error::Api(e)) if e.code == 404 => {
            Ok(Step::Waiting { pod: pod.to_owned(), why: "to be recreated".to_owned() })
        }
        Err(source) => Err(Error::Evict { pod: pod.to_owned(), source }),
    }
}

/// What [`evict`] says about a pod whose eviction was accepted.
const EVICTED: &str = "to be replaced";

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One Warning Event per container restart not told yet, on the CacheCluster with the pod as
/// related object: why it stopped (the node's own last log line, which says what to fix), what
/// became of its data, and for an OOM kill what to change.
async fn report_restarts(ctx: &Context, cc: &CacheCluster, key: &str, pods: &[Pod], obs: &Observation) {
    let fresh = {
        let mut all = lock(&ctx.told_restarts);
        let told = all.entry(key.to_owned()).or_default();
        let leading_for = Timestamp::now().as_second() - ctx.started.as_second();
        untold(told, pods, &obs.restarts, leading_for)
    };
    for r in fresh {
        tracing::warn!(pod = %r.pod, container = %r.container, reason = %r.reason, restarts = r.count, last_words = ?r.last_words, "container restarted");
        let related = ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Pod".to_owned()),
            name: Some(r.pod.clone()),
            namespace: cc.namespace(),
            uid: Some(r.pod_uid.clone()).filter(|u| !u.is_empty()),
            ..Default::default()
        };
        let mut note = format!(
            "Container {} of pod {} terminated ({}, exit code {}) and was restarted (restart {})",
            r.container, r.pod, r.reason, r.exit_code, r.count
        );
        if let Some(words) = &r.last_words {
            note.push_str(&format!("; its last log line: \"{words}\""));
        }
        note.push_str("; ");
        note.push_str(&obs.data.after_restart(r.crash_looping));
        if r.oom_killed() {
            note.push_str("; ");
            note.push_str(obs.memory.oom_advice());
        }
        let event = Event {
            type_: EventType::Warning,
            reason: if r.oom_killed() { "OOMKilled" } else { "ContainerRestarted" }.to_owned(),
            note: Some(note),
            action: "Observe".to_owned(),
            secondary: Some(related),
        };
        // A Recorder of its own: the shared one folds repeats of a reason and pod into one
        // Event's series count, keeping the first restart's note; each restart has its own.
        let recorder = Recorder::new(ctx.client.clone(), ctx.reporter.clone());
        if let Err(e) = recorder.publish(&event, &cc.object_ref(&())).await {
            tracing::warn!(error = %e, reason = %event.reason, "could not publish an Event");
        }
    }
}

/// The restarts not told yet, recording them in `told` ("pod UID/container" to the restart count
/// told): a restart is told once whatever the number of reconciles that see it, and a recreated
/// pod (a new UID) counts from 0 again. One seen for the first time that ended before this
/// process led for `leading_for` seconds was the previous leader's to tell. Pods gone are forgotten.
fn untold<'a>(
    told: &mut HashMap<String, i32>,
    pods: &[Pod],
    restarts: &'a [rollout::Restart],
    leading_for: i64,
) -> Vec<&'a rollout::Restart> {
    told.retain(|k, _| {
        pods.iter().filter_map(|p| p.metadata.uid.as_deref()).any(|uid| k.starts_with(&format!("{uid}/")))
    });
    restarts
        .iter()
        .filter(|r| {
            let before = told.insert(format!("{}/{}", r.pod_uid, r.container), r.count);
            let previous_leaders = before.is_none() && r.ago_seconds > leading_for;
            !previous_leaders && before.is_none_or(|b| b < r.count)
        })
        .collect()
}

/// A Warning Event when the replicas go down: which pods go, and what becomes of their data.
async fn report_scale_in(ctx: &Context, cc: &CacheCluster, before: i32) {
    let name = cc.name_any();
    let note = status::scale_in_note(&name, before, cc.spec.replicas, &DataFate::of(&cc.spec));
    tracing::info!(cachecluster = %name, before, after = cc.spec.replicas, "scaling in");
    let event = Event {
        type_: EventType::Warning,
        reason: "ScaledIn".to_owned(),
        note: Some(note),
        action: "Scale".to_owned(),
        secondary: None,
    };
    publish(ctx, cc, &event).await;
}

/// Pods above `replicas` whose retained volume (`data-<name>-<ordinal>`) still exists: durable
/// data the Service no longer reaches. Without the right to list claims, nothing is reported.
async fn unreachable_volumes(
    client: &Client,
    ns: &str,
    name: &str,
    replicas: i32,
) -> Result<Vec<(String, String)>, Error> {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let claims = match api.list(&ListParams::default().labels(&resources::selector_string(name))).await {
        Ok(list) => list.items,
        Err(kube::Error::Api(e)) if e.code == 403 => {
            tracing::warn!(error = %e, "cannot list PersistentVolumeClaims: scaled-in volumes are not reported");
            return Ok(Vec::new());
        }
        Err(e) => return Err(read(format!("PersistentVolumeClaims of {ns}/{name}"), e)),
    };
    let names: Vec<String> =
        claims.iter().filter(|c| c.metadata.deletion_timestamp.is_none()).map(|c| c.name_any()).collect();
    Ok(status::unreachable_claims(name, replicas, &names))
}

/// Writes status with server-side apply and publishes Events for condition changes.
async fn write_status(cc: &CacheCluster, ctx: &Context, obs: &Observation) -> Result<(), Error> {
    let previous = cc.status.clone().unwrap_or_default();
    let verdicts = status::verdicts(obs);
    let now = Time(Timestamp::now());
    let name = cc.name_any();
    let ns = cc.namespace().ok_or(Error::NoNamespace)?;
    let conditions: Vec<(&str, bool)> = verdicts.iter().map(|v| (v.type_, v.status == ConditionStatus::True)).collect();
    ctx.metrics.set_cluster(&ns, &name, [obs.desired, obs.replicas, obs.ready, obs.updated], &conditions);
    // A reconcile that stopped before the topology round (an invalid spec) keeps what the last
    // one recorded: the epoch must survive until the next round.
    let keep = obs.cluster.is_none() && cc.spec.cluster.enabled;
    if !keep {
        ctx.metrics.set_topology(&ns, &name, obs.cluster.as_ref().map(|c| (c.epoch, c.slots_covered)));
    }
    let new_status = CacheClusterStatus {
        observed_generation: cc.metadata.generation,
        replicas: obs.replicas,
        ready_replicas: obs.ready,
        selector: Some(resources::selector_string(&name)),
        endpoint: Some(resources::endpoint(cc)),
        tls_endpoint: resources::tls_endpoint(cc),
        conditions: status::merge(&previous.conditions, &verdicts, cc.metadata.generation, &now),
        topology_epoch: obs.cluster.as_ref().map(|c| c.epoch).filter(|&e| e > 0),
        shards: obs.cluster.as_ref().map(|c| c.shards).filter(|_| obs.cluster.as_ref().is_some_and(|c| c.epoch > 0)),
        slots_covered: obs.cluster.as_ref().map(|c| c.slots_covered as i32),
        nodes: obs.cluster.as_ref().map(|c| c.nodes.clone()).unwrap_or_default(),
        resharding: obs.cluster.as_ref().and_then(|c| c.resharding.clone()),
    };
    let new_status = if keep {
        CacheClusterStatus {
            topology_epoch: previous.topology_epoch,
            shards: previous.shards,
            slots_covered: previous.slots_covered,
            nodes: previous.nodes.clone(),
            resharding: previous.resharding.clone(),
            ..new_status
        }
    } else {
        new_status
    };
    for v in status::transitions(&previous.conditions, &verdicts) {
        let before = previous.conditions.iter().find(|c| c.type_ == v.type_);
        if let Some((kind, reason)) = event_for(v, before) {
            let event = Event {
                type_: kind,
                reason: reason.to_owned(),
                note: Some(v.message.clone()),
                action: "Reconcile".to_owned(),
                secondary: None,
            };
            publish(ctx, cc, &event).await;
        }
    }
    if cc.status.as_ref() == Some(&new_status) {
        return Ok(());
    }
    let api: Api<CacheCluster> = Api::namespaced(ctx.client.clone(), &ns);
    let patch = serde_json::json!({
        "apiVersion": CacheCluster::api_version(&()),
        "kind": CacheCluster::kind(&()),
        "status": new_status,
    });
    api.patch_status(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&patch))
        .await
        .map_err(Error::Status)?;
    Ok(())
}

/// Which condition changes are worth an Event, and its type and reason. `before`: the condition
/// as it was (none: reported for the first time; a new cluster is not "unavailable", it is
/// being created).
fn event_for(v: &Verdict, before: Option<&crate::api::Condition>) -> Option<(EventType, &'static str)> {
    use crate::api::Condition;
    let first = before.is_none();
    let was = before.map(|c| c.status);
    match (v.type_, v.status) {
        // Staying available while the rollout takes a pod down (or back) is no news.
        (Condition::AVAILABLE, ConditionStatus::True) if was == Some(ConditionStatus::True) => None,
        (Condition::AVAILABLE, ConditionStatus::True) => Some((EventType::Normal, "Available")),
        (Condition::AVAILABLE, _) if first => None,
        // A planned outage (one replica, rolled): the Progressing Event tells it.
        (Condition::AVAILABLE, _) if v.reason == status::reason::ROLLING => None,
        (Condition::AVAILABLE, _) => Some((EventType::Warning, "Unavailable")),
        (Condition::DEGRADED, ConditionStatus::False) if first => None,
        // Told by the ScaledIn Event when the replicas went down.
        (Condition::DEGRADED, ConditionStatus::True) if v.reason == status::reason::DATA_UNREACHABLE => None,
        (Condition::DEGRADED, ConditionStatus::True) => Some((EventType::Warning, v.reason)),
        (Condition::DEGRADED, _) => Some((EventType::Normal, "Recovered")),
        (Condition::PROGRESSING, ConditionStatus::True) => Some((EventType::Normal, "RolloutStarted")),
        (Condition::PROGRESSING, _) => Some((EventType::Normal, "RolloutComplete")),
        (Condition::MONITORING, ConditionStatus::False)
            if v.reason == status::reason::SM_CRD_MISSING || v.reason == status::reason::RULE_CRD_MISSING =>
        {
            Some((EventType::Warning, v.reason))
        }
        _ => None,
    }
}

async fn publish(ctx: &Context, cc: &CacheCluster, event: &Event) {
    if let Err(e) = ctx.recorder.publish(event, &cc.object_ref(&())).await {
        // Events are best effort: the status carries the same information.
        tracing::warn!(error = %e, reason = %event.reason, "could not publish an Event");
    }
}

fn read(what: String, source: kube::Error) -> Error {
    Error::Read { what, source }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Condition;
    use status::reason;

    fn was(type_: &str, status: ConditionStatus, reason: &str) -> Condition {
        Condition {
            type_: type_.to_owned(),
            status,
            reason: reason.to_owned(),
            message: String::new(),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
            observed_generation: None,
        }
    }

    fn verdict(type_: &'static str, status: ConditionStatus, reason: &'static str) -> Verdict {
        Verdict { type_, status, reason, message: String::new() }
    }

    #[test]
    fn a_planned_rollout_publishes_no_warning() {
        use ConditionStatus::{False, True};
        let available = was(Condition::AVAILABLE, True, reason::ALL_READY);
        // All ready -> one pod down for the rollout (still available): no Event at all.
        assert_eq!(event_for(&verdict(Condition::AVAILABLE, True, reason::ROLLING), Some(&available)), None);
        // One replica, rolled: unavailable, but planned (the Progressing Event tells it).
        assert_eq!(event_for(&verdict(Condition::AVAILABLE, False, reason::ROLLING), Some(&available)), None);
        // A pod lost for another reason is a Warning, also after a planned outage.
        let unplanned = verdict(Condition::AVAILABLE, False, reason::NOT_READY);
        assert_eq!(event_for(&unplanned, Some(&available)), Some((EventType::Warning, "Unavailable")));
        let rolling = was(Condition::AVAILABLE, False, reason::ROLLING);
        assert_eq!(event_for(&unplanned, Some(&rolling)), Some((EventType::Warning, "Unavailable")));
        let back = verdict(Condition::AVAILABLE, True, reason::ALL_READY);
        assert_eq!(event_for(&back, Some(&rolling)), Some((EventType::Normal, "Available")));
        let progressing = verdict(Condition::PROGRESSING, True, reason::ROLLING);
        assert_eq!(event_for(&progressing, None), Some((EventType::Normal, "RolloutStarted")));
    }

    #[test]
    fn each_restart_is_told_once() {
        let pod = |uid: &str| Pod {
            metadata: kube::api::ObjectMeta { uid: Some(uid.into()), ..Default::default() },
            ..Default::default()
        };
        let restart = |uid: &str, count: i32, ago_seconds: i64| rollout::Restart {
            pod: "demo-0".into(),
            pod_uid: uid.into(),
            container: "node".into(),
            count,
            ago_seconds,
            ..Default::default()
        };
        let mut told = HashMap::new();
        let pods = [pod("a")];
        // Led for 100 s: a restart 5 s ago is news, once.
        assert_eq!(untold(&mut told, &pods, &[restart("a", 1, 5)], 100).len(), 1);
        assert!(untold(&mut told, &pods, &[restart("a", 1, 6)], 101).is_empty(), "the same restart again");
        assert_eq!(untold(&mut told, &pods, &[restart("a", 2, 1)], 120).len(), 1, "the next restart");
        // The pod recreated (new UID) counts from 1 again: still news; the old pod is forgotten.
        let pods = [pod("b")];
        assert_eq!(untold(&mut told, &pods, &[restart("b", 1, 1)], 130).len(), 1);
        assert!(!told.keys().any(|k| k.starts_with("a/")), "{told:?}");
        // Ended before this process led: the previous leader told it.
        let mut fresh_leader = HashMap::new();
        assert!(untold(&mut fresh_leader, &pods, &[restart("b", 1, 300)], 10).is_empty());
        assert_eq!(untold(&mut fresh_leader, &pods, &[restart("b", 2, 1)], 20).len(), 1);
    }

    #[test]
    fn degraded_events_follow_the_reason_but_scale_in_is_told_once() {
        use ConditionStatus::{False, True};
        let fine = was(Condition::DEGRADED, False, reason::AS_EXPECTED);
        let oom = verdict(Condition::DEGRADED, True, reason::OOM_KILLED);
        assert_eq!(event_for(&oom, Some(&fine)), Some((EventType::Warning, reason::OOM_KILLED)));
        let unreachable = verdict(Condition::DEGRADED, True, reason::DATA_UNREACHABLE);
        assert_eq!(event_for(&unreachable, Some(&fine)), None, "the ScaledIn Event told it");
    }
}
