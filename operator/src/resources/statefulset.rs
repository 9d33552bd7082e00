//! The StatefulSet running the node pods, with their volumes and the spec checks they need.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec, StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    HTTPGetAction, ObjectFieldSelector, PersistentVolumeClaim, PersistentVolumeClaimSpec, Pod, PodSecurityContext,
    PodSpec, PodTemplateSpec, Probe, ResourceRequirements, SeccompProfile, SecretKeySelector, SecretVolumeSource,
    SecurityContext, Volume, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::node_config::{
    ADMIN_PORT, ADMIN_SECRET_DIR, DATA_DIR, DIRECT_PORT, METRICS_PORT, REDIS_PORT, Side, TLS_PORT, memory,
};
use super::quantity::parse_bytes;
use super::{
    CONFIG_FILE_KEY, CONFIG_HASH_ANNOTATION, Owner, SpecError, TLS_CLUSTER_ANNOTATION, admin_secret_name,
    common_labels, config_map_name, fnv1a_64, headless_service_name, selector_labels,
};
use crate::api::{CacheCluster, CacheClusterSpec, DurabilityMode, HugepageSize, ImagePullPolicy};

/// The node runs as this non-root user and group (the distroless "nonroot" ids), and owns its
/// volumes through the same fsGroup.
const NODE_UID: i64 = 65532;
const CONFIG_DIR: &str = "/etc/strata";
const DATA_VOLUME: &str = "data";
const CONFIG_VOLUME: &str = "config";
const ADMIN_SECRET_VOLUME: &str = "cluster-admin";
/// The client certificate Secret's volume (`spec.tls`).
const TLS_VOLUME: &str = "tls";
const CONTAINER_NAME: &str = "node";
/// Name of the container's metrics port, which the probes and the headless Service refer to.
const METRICS_PORT_NAME: &str = "metrics";
const REDIS_PORT_NAME: &str = "redis";
/// With `spec.tls.allowPlaintext`: the container's TLS port beside the plain `redis` one.
pub(crate) const TLS_PORT_NAME: &str = "redis-tls";
/// Cluster mode's container ports: where MOVED sends clients, and the topology push.
pub(crate) const DIRECT_PORT_NAME: &str = "cluster";
pub(crate) const ADMIN_PORT_NAME: &str = "cluster-admin";

/// The StatefulSet `<name>`: `spec.replicas` node pods behind the headless Service.
///
/// Updates use `OnDelete`: the operator paces the rollout itself, evicting one pod at a time
/// through the Eviction API so the PodDisruptionBudget is honoured and each pod comes back warm
/// before the next goes.
pub(super) fn stateful_set(cc: &CacheCluster, owner: &Owner, config: &str) -> Result<StatefulSet, SpecError> {
    let spec = &cc.spec;
    check_basics(spec)?;
    check_storage(spec)?;
    check_hugepages(spec)?;
    let volume_claim_templates = spec.storage.as_ref().map(|storage| {
        vec![PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(DATA_VOLUME.to_owned()),
                labels: Some(selector_labels(&owner.name)),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
                storage_class_name: storage.storage_class_name.clone(),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([("storage".to_owned(), storage.size.clone())])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }]
    });
    Ok(StatefulSet {
        metadata: owner.metadata(owner.name.clone()),
        spec: Some(StatefulSetSpec {
            replicas: Some(spec.replicas),
            selector: LabelSelector { match_labels: Some(selector_labels(&owner.name)), ..Default::default() },
            service_name: Some(headless_service_name(&owner.name)),
            pod_management_policy: Some("Parallel".to_owned()),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("OnDelete".to_owned()),
                ..Default::default()
            }),
            persistent_volume_claim_retention_policy: Some(pvc_retention_policy(spec.durability.mode)),
            volume_claim_templates,
            template: pod_template(cc, owner, config),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// The PersistentVolumeClaim the StatefulSet controller creates for pod `<cluster>-<ordinal>`
/// (`<claim template>-<pod>`).
pub fn data_claim_name(cluster: &str, ordinal: i32) -> String {
    format!("{DATA_VOLUME}-{cluster}-{ordinal}")
}

/// What happens to the pods' PersistentVolumeClaims (the documented PVC policy):
///
/// - durability `none`: deleted with the CacheCluster and when scaling down. The volume only
///   extends RAM for a pure cache; nothing on it is worth keeping or paying for.
/// - `write-back`, `periodic`, `sync`: retained in both cases. The volume holds acknowledged
///   writes: deleting the CacheCluster or scaling down must not lose them, and scaling back up
///   reattaches each pod to its old claim. Delete the claims by hand to free the storage.
fn pvc_retention_policy(mode: DurabilityMode) -> StatefulSetPersistentVolumeClaimRetentionPolicy {
    let policy = if mode == DurabilityMode::None { "Delete" } else { "Retain" };
    StatefulSetPersistentVolumeClaimRetentionPolicy {
        when_deleted: Some(policy.to_owned()),
        when_scaled: Some(policy.to_owned()),
    }
}

fn pod_template(cc: &CacheCluster, owner: &Owner, config: &str) -> PodTemplateSpec {
    let spec = &cc.spec;
    // Spec labels first so ours win: the selector must keep matching.
    let mut labels = spec.pod_labels.clone();
    labels.extend(common_labels(&owner.name));
    let mut annotations = spec.pod_annotations.clone();
    annotations.extend([
        ("prometheus.io/scrape".to_owned(), "true".to_owned()),
        ("prometheus.io/port".to_owned(), METRICS_PORT.to_string()),
        ("prometheus.io/path".to_owned(), "/metrics".to_owned()),
        (CONFIG_HASH_ANNOTATION.to_owned(), config_hash(spec, config)),
    ]);
    // Which protocol this pod's admin port speaks, for the operator (see `admin_tls_secret`).
    if spec.cluster.enabled && spec.tls.is_some() {
        annotations.insert(TLS_CLUSTER_ANNOTATION.to_owned(), "yes".to_owned());
    } else {
        annotations.remove(TLS_CLUSTER_ANNOTATION);
    }

    let mut volumes = vec![Volume {
        name: CONFIG_VOLUME.to_owned(),
        config_map: Some(ConfigMapVolumeSource { name: config_map_name(&owner.name), ..Default::default() }),
        ..Default::default()
    }];
    if spec.cluster.enabled {
        volumes.push(Volume {
            name: ADMIN_SECRET_VOLUME.to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(admin_secret_name(&owner.name)),
                // Read by the node's group (fsGroup), no one else.
                default_mode: Some(0o440),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    if let Some(tls) = &spec.tls {
        volumes.push(Volume {
            name: TLS_VOLUME.to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(super::tls::secret_name(tls, &owner.name)),
                default_mode: Some(0o440),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    if spec.storage.is_none() {
        volumes.push(Volume {
            name: DATA_VOLUME.to_owned(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        });
    }

    // Pure caches stop fast; durable modes get time to flush the log on SIGTERM.
    let grace_seconds = if spec.durability.mode == DurabilityMode::None { 30 } else { 60 };
    PodTemplateSpec {
        metadata: Some(ObjectMeta { labels: Some(labels), annotations: Some(annotations), ..Default::default() }),
        spec: Some(PodSpec {
            containers: vec![node_container(spec)],
            volumes: Some(volumes),
            // The node never talks to the API server.
            automount_service_account_token: Some(false),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(NODE_UID),
                run_as_group: Some(NODE_UID),
                fs_group: Some(NODE_UID),
                // Large volumes would otherwise be re-chowned on every start.
                fs_group_change_policy: Some("OnRootMismatch".to_owned()),
                seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".to_owned(), ..Default::default() }),
                ..Default::default()
            }),
            termination_grace_period_seconds: Some(grace_seconds),
            node_selector: Some(spec.node_selector.clone()).filter(|m| !m.is_empty()),
            tolerations: Some(spec.tolerations.clone()).filter(|t| !t.is_empty()),
            affinity: spec.affinity.clone(),
            topology_spread_constraints: Some(spec.topology_spread_constraints.clone()).filter(|t| !t.is_empty()),
            priority_class_name: spec.priority_class_name.clone(),
            ..Default::default()
        }),
    }
}

/// The TLS Secret whose certificate `pod`'s admin port serves, or None when it speaks plain TCP.
///
/// Read from the pod, not the spec: a rolling update that turns `spec.tls` on or off (or the
/// first one after the admin port got TLS) mixes pods of both kinds, and each must be spoken to
/// as it was started. A pod speaks TLS when its template said `tls-cluster yes` (the
/// annotation) and it mounts the TLS volume; the Secret is the one that volume names, which may
/// be an earlier spec's (or the spec may have no `tls` any more).
pub fn admin_tls_secret(pod: &Pod) -> Option<String> {
    let annotations = pod.metadata.annotations.as_ref()?;
    if annotations.get(TLS_CLUSTER_ANNOTATION).map(String::as_str) != Some("yes") {
        return None;
    }
    let volumes = pod.spec.as_ref()?.volumes.as_ref()?;
    let volume = volumes.iter().find(|v| v.name == TLS_VOLUME)?;
    volume.secret.as_ref()?.secret_name.clone().filter(|s| !s.is_empty())
}

fn node_container(spec: &CacheClusterSpec) -> Container {
    let field_env = |name: &str, field_path: &str| EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector { field_path: field_path.to_owned(), ..Default::default() }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut env = vec![field_env("POD_NAME", "metadata.name"), field_env("POD_NAMESPACE", "metadata.namespace")];
    if let Some(auth) = &spec.auth {
        // The node reads its password from this variable (`--requirepass`), never from a file
        // in the ConfigMap.
        env.push(EnvVar {
            name: "STRATA_REQUIREPASS".to_owned(),
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: auth.password_secret_ref.name.clone(),
                    key: auth.password_secret_ref.key.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
    }

    let mut volume_mounts = vec![
        VolumeMount {
            name: CONFIG_VOLUME.to_owned(),
            mount_path: CONFIG_DIR.to_owned(),
            read_only: Some(true),
            ..Default::default()
        },
        VolumeMount { name: DATA_VOLUME.to_owned(), mount_path: DATA_DIR.to_owned(), ..Default::default() },
    ];
    if spec.cluster.enabled {
        volume_mounts.push(VolumeMount {
            name: ADMIN_SECRET_VOLUME.to_owned(),
            mount_path: ADMIN_SECRET_DIR.to_owned(),
            read_only: Some(true),
            ..Default::default()
        });
    }
    if spec.tls.is_some() {
        // The whole volume, never a subPath: only then does a renewed Secret reach the pod.
        volume_mounts.push(VolumeMount {
            name: TLS_VOLUME.to_owned(),
            mount_path: super::tls::TLS_DIR.to_owned(),
            read_only: Some(true),
            ..Default::default()
        });
    }

    let http_probe = |path: &str, period_seconds: i32, failure_threshold: i32| Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_owned()),
            port: IntOrString::String(METRICS_PORT_NAME.to_owned()),
            ..Default::default()
        }),
        period_seconds: Some(period_seconds),
        failure_threshold: Some(failure_threshold),
        ..Default::default()
    };
    let port = |name: &str, container_port: i32| ContainerPort {
        name: Some(name.to_owned()),
        container_port,
        protocol: Some("TCP".to_owned()),
        ..Default::default()
    };
    let mut ports = vec![port(REDIS_PORT_NAME, REDIS_PORT)];
    if spec.tls.as_ref().is_some_and(|tls| tls.allow_plaintext) {
        ports.push(port(TLS_PORT_NAME, TLS_PORT));
    }
    ports.push(port(METRICS_PORT_NAME, METRICS_PORT));
    if spec.cluster.enabled {
        ports.push(port(DIRECT_PORT_NAME, DIRECT_PORT));
        ports.push(port(ADMIN_PORT_NAME, ADMIN_PORT));
    }
    Container {
        name: CONTAINER_NAME.to_owned(),
        image: Some(spec.image.clone()),
        image_pull_policy: Some(image_pull_policy(spec.image_pull_policy).to_owned()),
        args: Some(vec!["--config".to_owned(), format!("{CONFIG_DIR}/{CONFIG_FILE_KEY}")]),
        ports: Some(ports),
        env: Some(env),
        resources: container_resources(spec),
        volume_mounts: Some(volume_mounts),
        // Ready once the node has recovered its data and serves; until then the Service
        // (but not the headless one) leaves it out.
        readiness_probe: Some(http_probe("/readyz", 5, 2)),
        liveness_probe: Some(http_probe("/healthz", 10, 3)),
        // Up to a minute to start before liveness applies.
        startup_probe: Some(http_probe("/healthz", 2, 30)),
        // A node that cannot start prints why (and what to fix) as its last log line: with no
        // termination message file, the kubelet puts the log's tail in
        // lastState.terminated.message, where the operator reads it for status and Events.
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            capabilities: Some(Capabilities { drop: Some(vec!["ALL".to_owned()]), ..Default::default() }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn image_pull_policy(policy: ImagePullPolicy) -> &'static str {
    match policy {
        ImagePullPolicy::Always => "Always",
        ImagePullPolicy::IfNotPresent => "IfNotPresent",
        ImagePullPolicy::Never => "Never",
    }
}

/// `spec.resources`, plus the hugepages resource in both requests and limits (Kubernetes
/// requires them equal for hugepages).
///
/// That resource is all the node needs: it maps its huge pages anonymously (`MAP_HUGETLB`),
/// which the container's hugetlb limit accounts, so the pod has no hugetlbfs volume (an
/// `emptyDir` with medium `HugePages` serves only programs that map files on such a mount).
fn container_resources(spec: &CacheClusterSpec) -> Option<ResourceRequirements> {
    let Some(hugepages) = &spec.hugepages else { return spec.resources.clone() };
    let mut resources = spec.resources.clone().unwrap_or_default();
    for side in [&mut resources.requests, &mut resources.limits] {
        side.get_or_insert_default().insert(hugepages.page_size.resource_name().to_owned(), hugepages.amount.clone());
    }
    Some(resources)
}

/// Stable hash (16 hex digits) of everything the node process reads at start-up. Each part is
/// length-prefixed so moving bytes from one part to the next changes the hash.
fn config_hash(spec: &CacheClusterSpec, config: &str) -> String {
    let parts: [&str; 5] =
        [config, &spec.image, &to_json(&spec.resources), &to_json(&spec.hugepages), &to_json(&spec.auth)];
    let mut bytes = Vec::new();
    for part in parts {
        bytes.extend_from_slice(&(part.len() as u64).to_le_bytes());
        bytes.extend_from_slice(part.as_bytes());
    }
    format!("{:016x}", fnv1a_64(&bytes))
}

/// The spec's types serialize with sorted maps, so equal values give equal bytes; they have
/// string keys and no custom serializers, so this cannot fail.
fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("spec types serialize to JSON")
}

fn check_basics(spec: &CacheClusterSpec) -> Result<(), SpecError> {
    if spec.replicas < 1 {
        return Err(SpecError::new("replicas", format!("{} is not a pod count: use at least 1", spec.replicas)));
    }
    if spec.image.trim().is_empty() {
        return Err(SpecError::new("image", "must name a container image, e.g. \"strata-node:1.2.3\""));
    }
    if let Some(auth) = &spec.auth {
        let secret = &auth.password_secret_ref;
        if secret.name.is_empty() {
            return Err(SpecError::new("auth.passwordSecretRef.name", "must name a Secret in this namespace"));
        }
        if secret.key.is_empty() {
            return Err(SpecError::new("auth.passwordSecretRef.key", "must name a key of the Secret"));
        }
    }
    Ok(())
}

fn check_storage(spec: &CacheClusterSpec) -> Result<(), SpecError> {
    let Some(storage) = &spec.storage else {
        if spec.durability.mode != DurabilityMode::None {
            return Err(SpecError::new(
                "storage",
                format!(
                    "durability.mode {} keeps data on disk: set storage.size (e.g. \"10Gi\"), or use durability.mode none",
                    spec.durability.mode.as_str()
                ),
            ));
        }
        return Ok(());
    };
    let size = parse_bytes(&storage.size).map_err(|e| SpecError::new("storage.size", e))?;
    if size == 0 {
        return Err(SpecError::new("storage.size", "must be a positive quantity such as \"10Gi\""));
    }
    if let Some(budget) = &storage.disk_budget {
        let budget_bytes = parse_bytes(budget).map_err(|e| SpecError::new("storage.diskBudget", e))?;
        if budget_bytes == 0 {
            return Err(SpecError::new("storage.diskBudget", "must be a positive quantity such as \"8Gi\""));
        }
        if budget_bytes > size {
            return Err(SpecError::new(
                "storage.diskBudget",
                format!(
                    "{} exceeds storage.size ({}; the disk tier lives on the pod's volume): lower diskBudget or raise size",
                    budget.0, storage.size.0
                ),
            ));
        }
    }
    Ok(())
}

fn check_hugepages(spec: &CacheClusterSpec) -> Result<(), SpecError> {
    let Some(hugepages) = &spec.hugepages else { return Ok(()) };
    let amount = parse_bytes(&hugepages.amount).map_err(|e| SpecError::new("hugepages.amount", e))?;
    if amount == 0 {
        return Err(SpecError::new("hugepages.amount", "must be a positive quantity such as \"1Gi\""));
    }
    let page = match hugepages.page_size {
        HugepageSize::Size2Mi => 2 << 20,
        HugepageSize::Size1Gi => 1 << 30,
    };
    if !amount.is_multiple_of(page) {
        return Err(SpecError::new(
            "hugepages.amount",
            format!("{} must be a whole number of pages: a multiple of hugepages.pageSize", hugepages.amount.0),
        ));
    }
    if memory(spec, Side::Limits)?.is_none_or(|limit| amount > limit) {
        return Err(SpecError::new(
            "hugepages.amount",
            "must fit inside resources.limits.memory (hugepage-backed arenas are part of the node's memory budget): \
             set resources.limits.memory to at least hugepages.amount",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::resources::node_config;
    use crate::resources::test_support::{NAME, cluster, quantity};

    fn build(spec: Value) -> Result<StatefulSet, SpecError> {
        let cc = cluster(spec);
        let owner = Owner::of(&cc).unwrap();
        stateful_set(&cc, &owner, &node_config(&cc).unwrap_or_default())
    }

    fn sts_spec(spec: Value) -> StatefulSetSpec {
        build(spec).unwrap().spec.unwrap()
    }

    fn pod(spec: Value) -> PodSpec {
        sts_spec(spec).template.spec.unwrap()
    }

    fn container(spec: Value) -> Container {
        pod(spec).containers.remove(0)
    }

    fn pod_metadata(spec: Value) -> ObjectMeta {
        sts_spec(spec).template.metadata.unwrap()
    }

    fn error_field(spec: Value) -> String {
        build(spec).expect_err("an invalid spec").field
    }

    #[test]
    fn identity_selector_and_rollout() {
        let sts = build(json!({"replicas": 3})).unwrap();
        assert_eq!(sts.metadata.name.as_deref(), Some(NAME));
        let spec = sts.spec.unwrap();
        assert_eq!(spec.replicas, Some(3));
        assert_eq!(spec.service_name.as_deref(), Some("cache-headless"));
        assert_eq!(spec.selector.match_labels, Some(selector_labels(NAME)));
        assert_eq!(spec.pod_management_policy.as_deref(), Some("Parallel"));
        assert_eq!(spec.update_strategy.unwrap().type_.as_deref(), Some("OnDelete"));
        // The pods carry the selector labels, or the StatefulSet would not own them.
        let pod_labels = spec.template.metadata.unwrap().labels.unwrap();
        assert!(selector_labels(NAME).iter().all(|(k, v)| pod_labels.get(k) == Some(v)));
    }

    #[test]
    fn a_pod_says_whether_its_admin_port_speaks_tls_and_with_which_secret() {
        // A pod made from the template of `spec`.
        let made_from = |spec: Value| {
            let template = sts_spec(spec).template;
            Pod { metadata: template.metadata.unwrap(), spec: template.spec, ..Default::default() }
        };
        let tls = made_from(json!({"tls": {"secretName": "cert"}}));
        assert_eq!(tls.metadata.annotations.as_ref().unwrap()[TLS_CLUSTER_ANNOTATION], "yes");
        assert_eq!(admin_tls_secret(&tls).as_deref(), Some("cert"));
        let managed = made_from(json!({"tls": {"certManager": {"issuerRef": {"name": "ca"}}}}));
        assert_eq!(admin_tls_secret(&managed).as_deref(), Some("cache-tls"));
        assert_eq!(admin_tls_secret(&made_from(json!({}))), None, "no TLS volume: plain");
        // Independent caches mount the volume for their client port only.
        let independent = made_from(json!({"tls": {"secretName": "cert"}, "cluster": {"enabled": false}}));
        assert_eq!(admin_tls_secret(&independent), None);
        // A pod from before the admin port had TLS: the volume, without the annotation.
        let mut earlier = tls.clone();
        earlier.metadata.annotations.as_mut().unwrap().remove(TLS_CLUSTER_ANNOTATION);
        assert_eq!(admin_tls_secret(&earlier), None);
        // The annotation without the volume says nothing either; nor can podAnnotations forge it.
        let mut no_volume = tls.clone();
        no_volume.spec.as_mut().unwrap().volumes.as_mut().unwrap().retain(|v| v.name != TLS_VOLUME);
        assert_eq!(admin_tls_secret(&no_volume), None);
        let forged = made_from(json!({"podAnnotations": {"strata.dev/tls-cluster": "yes"}}));
        assert!(!forged.metadata.annotations.as_ref().unwrap().contains_key(TLS_CLUSTER_ANNOTATION));
    }

    #[test]
    fn claims_are_deleted_only_for_a_pure_cache() {
        let policy = |mode: &str| {
            let spec = json!({"durability": {"mode": mode}, "storage": {"size": "1Gi"}});
            let policy = sts_spec(spec).persistent_volume_claim_retention_policy.unwrap();
            (policy.when_deleted.unwrap(), policy.when_scaled.unwrap())
        };
        assert_eq!(policy("none"), ("Delete".to_owned(), "Delete".to_owned()));
        for mode in ["write-back", "periodic", "sync"] {
            assert_eq!(policy(mode), ("Retain".to_owned(), "Retain".to_owned()), "{mode}");
        }
    }

    #[test]
    fn storage_becomes_a_claim_template() {
        let spec = sts_spec(json!({"storage": {"size": "10Gi", "storageClassName": "local-nvme"}}));
        let claims = spec.volume_claim_templates.unwrap();
        assert_eq!(claims.len(), 1);
        assert_eq!(claims[0].metadata.name.as_deref(), Some("data"));
        assert_eq!(claims[0].metadata.labels, Some(selector_labels(NAME)));
        let claim = claims[0].spec.clone().unwrap();
        assert_eq!(claim.access_modes, Some(vec!["ReadWriteOnce".to_owned()]));
        assert_eq!(claim.storage_class_name.as_deref(), Some("local-nvme"));
        assert_eq!(claim.resources.unwrap().requests.unwrap()["storage"], quantity("10Gi"));
        // The claim provides the data volume: no emptyDir of the same name.
        let volumes = spec.template.spec.unwrap().volumes.unwrap();
        assert!(volumes.iter().all(|v| v.name != "data"));
        // Without a class the cluster default applies.
        let claims = sts_spec(json!({"storage": {"size": "1Gi"}})).volume_claim_templates.unwrap();
        assert_eq!(claims[0].spec.as_ref().unwrap().storage_class_name, None);
    }

    #[test]
    fn without_storage_data_is_an_empty_dir() {
        let spec = sts_spec(json!({}));
        assert_eq!(spec.volume_claim_templates, None);
        let volumes = spec.template.spec.unwrap().volumes.unwrap();
        let data = volumes.iter().find(|v| v.name == "data").expect("a data volume");
        assert_eq!(data.empty_dir, Some(EmptyDirVolumeSource::default()));
    }

    #[test]
    fn config_and_data_are_mounted() {
        let pod = pod(json!({}));
        let config = pod.volumes.as_ref().unwrap().iter().find(|v| v.name == "config").unwrap();
        assert_eq!(config.config_map.as_ref().unwrap().name, "cache-config");
        let mounts = pod.containers[0].volume_mounts.clone().unwrap();
        let mount = |name: &str| mounts.iter().find(|m| m.name == name).cloned().unwrap();
        assert_eq!((mount("config").mount_path.as_str(), mount("config").read_only), ("/etc/strata", Some(true)));
        assert_eq!((mount("data").mount_path.as_str(), mount("data").read_only), ("/data", None));
        assert!(mounts.iter().all(|m| m.name != "hugepages"));
        assert_eq!(pod.containers[0].args, Some(vec!["--config".to_owned(), "/etc/strata/strata.conf".to_owned()]));
    }

    #[test]
    fn pod_labels_merge_with_ours_winning() {
        let labels =
            pod_metadata(json!({"podLabels": {"team": "shop", "app.kubernetes.io/instance": "other"}})).labels.unwrap();
        assert_eq!(labels["team"], "shop");
        assert_eq!(labels["app.kubernetes.io/instance"], NAME);
        assert_eq!(labels["app.kubernetes.io/managed-by"], "strata-operator");
    }

    #[test]
    fn pod_annotations_merge_with_scrape_hints() {
        let annotations =
            pod_metadata(json!({"podAnnotations": {"team": "shop", "prometheus.io/port": "1"}})).annotations.unwrap();
        assert_eq!(annotations["team"], "shop");
        assert_eq!(annotations["prometheus.io/scrape"], "true");
        assert_eq!(annotations["prometheus.io/port"], "9121");
        assert_eq!(annotations["prometheus.io/path"], "/metrics");
        let hash = &annotations[CONFIG_HASH_ANNOTATION];
        assert!(hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()), "{hash}");
    }

    #[test]
    fn config_hash_follows_every_input_of_the_node() {
        let hash = |spec: Value| pod_metadata(spec).annotations.unwrap()[CONFIG_HASH_ANNOTATION].clone();
        let base = json!({
            "resources": {"limits": {"memory": "2Gi", "cpu": "2"}},
            "storage": {"size": "1Gi"},
            "hugepages": {"pageSize": "2Mi", "amount": "128Mi"},
            "auth": {"passwordSecretRef": {"name": "pw"}},
        });
        let with = |pointer: &str, value: Value| {
            let mut spec = base.clone();
            *spec.pointer_mut(pointer).unwrap() = value;
            spec
        };
        let original = hash(base.clone());
        assert_eq!(hash(base.clone()), original, "stable");
        for changed in [
            json!({"maxMemory": "1Gi"}),
            json!({"evictionPolicy": "allkeys-lfu"}),
            json!({"durability": {"mode": "sync"}}),
            json!({"image": "strata-node:other"}),
            json!({"resources": {"limits": {"memory": "2Gi", "cpu": "2"}, "requests": {"cpu": "1"}}}),
            json!({"hugepages": {"pageSize": "2Mi", "amount": "256Mi"}}),
            json!({"auth": {"passwordSecretRef": {"name": "pw", "key": "other"}}}),
        ] {
            let (field, value) = changed.as_object().unwrap().iter().next().unwrap();
            let mut spec = base.clone();
            spec[field] = value.clone();
            assert_ne!(hash(spec), original, "{changed}");
        }
        // The volume's size sets the disk tier's budget (max-disk).
        assert_ne!(hash(with("/storage/size", json!("2Gi"))), original);
        // Inputs the node does not read leave it alone (the StatefulSet changes anyway).
        let mut scaled = base.clone();
        scaled["replicas"] = json!(5);
        assert_eq!(hash(scaled), original);
    }

    #[test]
    fn pod_and_container_are_locked_down() {
        let pod = pod(json!({}));
        assert_eq!(pod.automount_service_account_token, Some(false));
        assert_eq!(pod.service_account_name, None);
        let security = pod.security_context.unwrap();
        assert_eq!(security.run_as_non_root, Some(true));
        assert_eq!(
            (security.run_as_user, security.run_as_group, security.fs_group),
            (Some(65532), Some(65532), Some(65532))
        );
        assert_eq!(security.fs_group_change_policy.as_deref(), Some("OnRootMismatch"));
        assert_eq!(security.seccomp_profile.unwrap().type_, "RuntimeDefault");
        let container = pod.containers[0].security_context.clone().unwrap();
        assert_eq!(container.allow_privilege_escalation, Some(false));
        assert_eq!(container.read_only_root_filesystem, Some(true));
        assert_eq!(container.run_as_non_root, Some(true));
        assert_eq!(container.capabilities.unwrap().drop, Some(vec!["ALL".to_owned()]));
    }

    #[test]
    fn durable_modes_get_a_longer_grace_period() {
        assert_eq!(pod(json!({})).termination_grace_period_seconds, Some(30));
        let durable = json!({"durability": {"mode": "write-back"}, "storage": {"size": "1Gi"}});
        assert_eq!(pod(durable).termination_grace_period_seconds, Some(60));
    }

    #[test]
    fn placement_is_passed_through() {
        let placement = json!({
            "nodeSelector": {"disk": "nvme"},
            "tolerations": [{"key": "cache", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}]}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway"}],
            "priorityClassName": "cache-critical",
        });
        let cc = cluster(placement);
        let pod = pod(serde_json::to_value(&cc.spec).unwrap());
        assert_eq!(pod.node_selector, Some(cc.spec.node_selector.clone()));
        assert_eq!(pod.tolerations, Some(cc.spec.tolerations.clone()));
        assert_eq!(pod.affinity, cc.spec.affinity);
        assert_eq!(pod.topology_spread_constraints, Some(cc.spec.topology_spread_constraints.clone()));
        assert_eq!(pod.priority_class_name.as_deref(), Some("cache-critical"));
        // Unset placement stays out of the object (server-side apply owns nothing there).
        let pod = self::pod(json!({}));
        assert!(pod.node_selector.is_none() && pod.tolerations.is_none() && pod.affinity.is_none());
        assert!(pod.topology_spread_constraints.is_none() && pod.priority_class_name.is_none());
    }

    #[test]
    fn cluster_mode_mounts_the_admin_password_secret() {
        let pod = pod(json!({}));
        let volume = pod.volumes.unwrap().into_iter().find(|v| v.name == "cluster-admin").expect("the secret volume");
        let secret = volume.secret.unwrap();
        assert_eq!(secret.secret_name.as_deref(), Some("cache-cluster-admin"));
        assert_eq!(secret.default_mode, Some(0o440));
        let mount = pod.containers[0].volume_mounts.clone().unwrap().into_iter().find(|m| m.name == "cluster-admin");
        let mount = mount.expect("the secret mounted");
        assert_eq!(mount.mount_path, "/etc/strata-cluster");
        assert_eq!(mount.read_only, Some(true));
        let independent = super::tests::pod(json!({"cluster": {"enabled": false}}));
        assert!(!independent.volumes.unwrap().iter().any(|v| v.name == "cluster-admin"));
        // Switching modes changes what the node reads: the pods roll.
        let hash = |spec| pod_metadata(spec).annotations.unwrap()[CONFIG_HASH_ANNOTATION].clone();
        assert_ne!(hash(json!({})), hash(json!({"cluster": {"enabled": false}})));
    }

    #[test]
    fn container_image_ports_and_probes() {
        let node = container(json!({"image": "registry.example/strata-node:1.2.3", "imagePullPolicy": "Always"}));
        assert_eq!(node.name, "node");
        assert_eq!(node.image.as_deref(), Some("registry.example/strata-node:1.2.3"));
        assert_eq!(node.image_pull_policy.as_deref(), Some("Always"));
        for (policy, expected) in [("IfNotPresent", "IfNotPresent"), ("Never", "Never")] {
            assert_eq!(container(json!({"imagePullPolicy": policy})).image_pull_policy.as_deref(), Some(expected));
        }
        let ports: Vec<_> =
            node.ports.unwrap().into_iter().map(|p| (p.name.unwrap(), p.container_port, p.protocol.unwrap())).collect();
        assert_eq!(
            ports,
            [
                ("redis".to_owned(), 6379, "TCP".to_owned()),
                ("metrics".to_owned(), 9121, "TCP".to_owned()),
                ("cluster".to_owned(), 6380, "TCP".to_owned()),
                ("cluster-admin".to_owned(), 16379, "TCP".to_owned()),
            ]
        );
        let independent = container(json!({"cluster": {"enabled": false}})).ports.unwrap();
        assert_eq!(independent.len(), 2, "no cluster ports for independent caches");
        let names = |spec| -> Vec<(String, i32)> {
            container(spec).ports.unwrap().into_iter().map(|p| (p.name.unwrap(), p.container_port)).collect()
        };
        // TLS only: the redis port speaks TLS, no port is added.
        assert_eq!(names(json!({"tls": {"secretName": "c"}})).len(), 4);
        // Both: the TLS port beside the plain one, whatever the Service's port numbers.
        let both = names(json!({"tls": {"secretName": "c", "allowPlaintext": true, "port": 7000}}));
        assert_eq!(
            both.iter().map(|(n, p)| (n.as_str(), *p)).collect::<Vec<_>>(),
            [("redis", 6379), ("redis-tls", 6390), ("metrics", 9121), ("cluster", 6380), ("cluster-admin", 16379)]
        );
        let probe = |probe: Option<Probe>| {
            let probe = probe.unwrap();
            let get = probe.http_get.unwrap();
            (get.path.unwrap(), get.port, probe.period_seconds.unwrap(), probe.failure_threshold.unwrap())
        };
        let metrics = IntOrString::String("metrics".to_owned());
        assert_eq!(probe(node.readiness_probe), ("/readyz".to_owned(), metrics.clone(), 5, 2));
        assert_eq!(probe(node.liveness_probe), ("/healthz".to_owned(), metrics.clone(), 10, 3));
        assert_eq!(probe(node.startup_probe), ("/healthz".to_owned(), metrics, 2, 30));
        // The node's last log line reaches lastState.terminated.message (status and Events).
        assert_eq!(node.termination_message_policy.as_deref(), Some("FallbackToLogsOnError"));
    }

    #[test]
    fn env_has_the_pod_identity_and_the_password_when_asked() {
        let env = container(json!({})).env.unwrap();
        let field_paths: Vec<_> = env
            .iter()
            .map(|e| (e.name.as_str(), e.value_from.as_ref().unwrap().field_ref.as_ref().unwrap().field_path.as_str()))
            .collect();
        assert_eq!(field_paths, [("POD_NAME", "metadata.name"), ("POD_NAMESPACE", "metadata.namespace")]);

        let env = container(json!({"auth": {"passwordSecretRef": {"name": "cache-pw"}}})).env.unwrap();
        let password = env.iter().find(|e| e.name == "STRATA_REQUIREPASS").expect("the password variable");
        let secret = password.value_from.as_ref().unwrap().secret_key_ref.as_ref().unwrap();
        assert_eq!((secret.name.as_str(), secret.key.as_str()), ("cache-pw", "password"));
        assert_eq!(password.value, None);
    }

    #[test]
    fn resources_are_passed_through() {
        let resources = json!({"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}});
        let cc = cluster(json!({"resources": resources}));
        assert_eq!(container(json!({"resources": resources})).resources, cc.spec.resources);
        assert_eq!(container(json!({})).resources, None);
    }

    #[test]
    fn hugepages_set_equal_requests_and_limits_and_no_volume() {
        for (page_size, resource, amount) in [("2Mi", "hugepages-2Mi", "512Mi"), ("1Gi", "hugepages-1Gi", "2Gi")] {
            let spec = json!({
                "resources": {"limits": {"memory": "4Gi"}},
                "hugepages": {"pageSize": page_size, "amount": amount},
            });
            let pod = pod(spec);
            // Anonymous MAP_HUGETLB mappings need the resource, not a hugetlbfs mount.
            assert!(
                pod.volumes.as_ref().unwrap().iter().all(|v| v.empty_dir.as_ref().is_none_or(|e| e.medium.is_none()))
            );
            let node = &pod.containers[0];
            assert!(node.volume_mounts.as_ref().unwrap().iter().all(|m| m.name != "hugepages"));
            let resources = node.resources.clone().unwrap();
            assert_eq!(resources.requests.unwrap()[resource], quantity(amount));
            let limits = resources.limits.unwrap();
            assert_eq!(limits[resource], quantity(amount));
            assert_eq!(limits["memory"], quantity("4Gi"), "the spec's own resources stay");
        }
    }

    #[test]
    fn basic_fields_are_checked() {
        assert_eq!(error_field(json!({"replicas": 0})), "replicas");
        assert_eq!(error_field(json!({"image": ""})), "image");
        assert_eq!(error_field(json!({"auth": {"passwordSecretRef": {"name": ""}}})), "auth.passwordSecretRef.name");
        assert_eq!(
            error_field(json!({"auth": {"passwordSecretRef": {"name": "pw", "key": ""}}})),
            "auth.passwordSecretRef.key"
        );
    }

    #[test]
    fn durable_modes_need_storage() {
        for mode in ["write-back", "periodic", "sync"] {
            let err = build(json!({"durability": {"mode": mode}})).unwrap_err();
            assert_eq!(err.field, "storage", "{mode}");
            assert!(err.message.contains(mode), "{err}");
            assert!(build(json!({"durability": {"mode": mode}, "storage": {"size": "1Gi"}})).is_ok(), "{mode}");
        }
    }

    #[test]
    fn storage_sizes_are_checked() {
        assert_eq!(error_field(json!({"storage": {"size": "0"}})), "storage.size");
        assert_eq!(error_field(json!({"storage": {"size": "big"}})), "storage.size");
        assert_eq!(error_field(json!({"storage": {"size": "1Gi", "diskBudget": "0"}})), "storage.diskBudget");
        assert_eq!(error_field(json!({"storage": {"size": "1Gi", "diskBudget": "x"}})), "storage.diskBudget");
        let err = build(json!({"storage": {"size": "1Gi", "diskBudget": "2Gi"}})).unwrap_err();
        assert_eq!(err.field, "storage.diskBudget");
        assert!(err.message.contains("exceeds storage.size (1Gi"), "{err}");
        assert!(build(json!({"storage": {"size": "1Gi", "diskBudget": "1024Mi"}})).is_ok());
    }

    #[test]
    fn hugepages_are_checked() {
        let with_limit = |amount: &str, page_size: &str| json!({"resources": {"limits": {"memory": "4Gi"}}, "hugepages": {"pageSize": page_size, "amount": amount}});
        assert_eq!(error_field(with_limit("0", "2Mi")), "hugepages.amount");
        assert_eq!(error_field(with_limit("many", "2Mi")), "hugepages.amount");
        assert_eq!(error_field(with_limit("3Mi", "2Mi")), "hugepages.amount");
        assert_eq!(error_field(with_limit("512Mi", "1Gi")), "hugepages.amount");
        assert_eq!(error_field(with_limit("8Gi", "1Gi")), "hugepages.amount");
        assert!(build(with_limit("4Gi", "1Gi")).is_ok());
        let err = build(json!({"hugepages": {"pageSize": "2Mi", "amount": "2Mi"}})).unwrap_err();
        assert_eq!(err.field, "hugepages.amount");
        assert!(err.message.contains("resources.limits.memory"), "{err}");
    }
}
