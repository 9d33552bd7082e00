//! The CacheCluster controller: applies the desired objects with server-side apply, paces
//! rollouts, and reports status conditions and Events.

mod backoff;
pub mod rollout;
pub mod status;

use std::sync::Arc;
use std::time::{Duration, Instant};

use backoff::Backoffs;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, DynamicObject, EvictParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::{CacheCluster, CacheClusterStatus, ConditionStatus};
use crate::metrics::Metrics;
use crate::resources::{self, Desired, SpecError};
use rollout::Step;
use status::{Observation, Verdict};

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

/// What every reconciliation shares.
pub struct Context {
    pub client: Client,
    pub metrics: Arc<Metrics>,
    recorder: Recorder,
    backoffs: Backoffs,
    /// Restart counts already told with an Event, per "namespace/pod/container": each
    /// restart gets one Warning Event, however many reconciles see it.
    reported_restarts: std::sync::Mutex<std::collections::HashMap<String, i32>>,
}

impl Context {
    pub fn new(client: Client, metrics: Arc<Metrics>, instance: Option<String>) -> Self {
        let reporter = Reporter { controller: FIELD_MANAGER.to_owned(), instance };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            metrics,
            backoffs: Backoffs::default(),
            reported_restarts: Default::default(),
        }
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
}

impl Error {
    /// Every value [`Error::reason`] returns: the error metric starts each at 0, so a healthy
    /// operator exports its error series (a dashboard shows 0, not "no data").
    pub const REASONS: [&'static str; 5] = ["NoNamespace", "Read", "Apply", "Evict", "Status"];

    pub fn reason(&self) -> &'static str {
        match self {
            Error::NoNamespace => "NoNamespace",
            Error::Read { .. } => "Read",
            Error::Apply { .. } => "Apply",
            Error::Evict { .. } => "Evict",
            Error::Status(_) => "Status",
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
    if cc.metadata.deletion_timestamp.is_some() {
        ctx.metrics.forget_cluster(cc.namespace().as_deref().unwrap_or_default(), &cc.name_any());
        // Owner references make the garbage collector delete everything we created.
        return Ok(Action::await_change());
    }
    let ns = cc.namespace().ok_or(Error::NoNamespace)?;
    let name = cc.name_any();
    let client = &ctx.client;
    let sts_api: Api<StatefulSet> = Api::namespaced(client.clone(), &ns);
    let existing = sts_api.get_opt(&name).await.map_err(|e| read(format!("StatefulSet {ns}/{name}"), e))?;

    let desired = match resources::desired(cc).and_then(|d| check_immutable(d, existing.as_ref())) {
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

    apply(client, &ns, &desired.config_map).await?;
    apply(client, &ns, &desired.headless_service).await?;
    apply(client, &ns, &desired.client_service).await?;
    apply(client, &ns, &desired.pdb).await?;
    let sts = apply(client, &ns, &desired.stateful_set).await?;

    let mut obs = Observation { desired: cc.spec.replicas, ..Default::default() };
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
    let mut step = rollout::next_step(&sts, &pods);
    if let Step::Evict(pod) = &step {
        step = evict(ctx, cc, &pods_api, pod).await?;
    }

    let sts_status = sts.status.clone().unwrap_or_default();
    obs.replicas = sts_status.replicas;
    obs.ready = sts_status.ready_replicas.unwrap_or(0);
    obs.updated = rollout::updated_pods(&sts, &pods);
    obs.failing_pods = rollout::failing_pods(&pods, Timestamp::now());
    obs.restarts = rollout::recent_restarts(&pods, Timestamp::now());
    report_restarts(ctx, cc, &ns, &obs.restarts).await;
    let settled = step == Step::Complete && obs.ready >= obs.desired;
    obs.rollout = Some(step);
    write_status(cc, ctx, &obs).await?;

    Ok(Action::requeue(if settled { RESYNC } else { WHILE_PROGRESSING }))
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
            "{} is true but the cluster has no {} {} API (the Prometheus Operator's CRDs): install them, {}",
            optional.field, resource.api_version, resource.kind, optional.fallback
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
            Ok(Step::Waiting { pod: pod.to_owned(), why: "to be replaced".to_owned() })
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

/// One Warning Event per container restart not told yet, on the pod: an OOM kill means the
/// cache lost what it held and the memory limit is too tight.
async fn report_restarts(ctx: &Context, cc: &CacheCluster, ns: &str, restarts: &[rollout::Restart]) {
    let fresh: Vec<&rollout::Restart> = {
        let mut told = ctx.reported_restarts.lock().unwrap_or_else(|e| e.into_inner());
        restarts
            .iter()
            .filter(|r| {
                let key = format!("{ns}/{}/{}", r.pod, r.container);
                told.insert(key, r.count).is_none_or(|before| before < r.count)
            })
            .collect()
    };
    for r in fresh {
        tracing::warn!(pod = %r.pod, container = %r.container, reason = %r.reason, restarts = r.count, "container restarted");
        let related = ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Pod".to_owned()),
            name: Some(r.pod.clone()),
            namespace: Some(ns.to_owned()),
            ..Default::default()
        };
        let advice = if r.oom_killed() {
            ": the pod's memory limit is too small for maxMemory plus the node's overhead; raise resources.limits.memory, \
             or lower maxMemory (unset, it is derived with room to spare)"
        } else {
            ""
        };
        let event = Event {
            type_: EventType::Warning,
            reason: if r.oom_killed() { "OOMKilled" } else { "ContainerRestarted" }.to_owned(),
            note: Some(format!(
                "Container {} of pod {} terminated ({}, exit code {}) and was restarted (restart {}); its data in RAM is lost{advice}",
                r.container, r.pod, r.reason, r.exit_code, r.count
            )),
            action: "Observe".to_owned(),
            secondary: Some(related),
        };
        publish(ctx, cc, &event).await;
    }
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
    let new_status = CacheClusterStatus {
        observed_generation: cc.metadata.generation,
        replicas: obs.replicas,
        ready_replicas: obs.ready,
        selector: Some(resources::selector_string(&name)),
        endpoint: Some(resources::endpoint(cc)),
        conditions: status::merge(&previous.conditions, &verdicts, cc.metadata.generation, &now),
    };
    for v in status::transitions(&previous.conditions, &verdicts) {
        let first = previous.conditions.iter().all(|c| c.type_ != v.type_);
        if let Some((kind, reason)) = event_for(v, first) {
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

/// Which condition changes are worth an Event, and its type and reason. `first`: the condition
/// is reported for the first time (a new cluster is not "unavailable", it is being created).
fn event_for(v: &Verdict, first: bool) -> Option<(EventType, &'static str)> {
    use crate::api::Condition;
    match (v.type_, v.status) {
        (Condition::AVAILABLE, ConditionStatus::True) => Some((EventType::Normal, "Available")),
        (Condition::AVAILABLE, _) if first => None,
        (Condition::AVAILABLE, _) => Some((EventType::Warning, "Unavailable")),
        (Condition::DEGRADED, ConditionStatus::False) if first => None,
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
