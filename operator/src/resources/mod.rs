//! Pure builders: a `CacheCluster` in, the Kubernetes objects that run it out.
//!
//! [`desired`] is all the controller needs: it checks what the API server's schema and CEL rules
//! should already have rejected (a CRD can be installed without them) and returns every object
//! to server-side apply, each owned by the `CacheCluster` so deletion cascades. No I/O happens
//! here, and the same input always gives byte-identical output.

mod monitoring;
mod node_config;
mod pdb;
pub mod quantity;
mod services;
mod statefulset;
mod tls;

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::DynamicObject;
use kube::{Resource, ResourceExt};

use crate::api::CacheCluster;

pub use monitoring::{prometheus_rule_resource, service_monitor_resource};
pub use node_config::{ADMIN_PASSWORD_KEY, ADMIN_PORT, DIRECT_PORT, node_config};
pub use statefulset::{admin_tls_secret, data_claim_name};
pub use tls::{certificate_name, certificate_resource, secret_name as tls_secret_name};

/// Pod template annotation holding a hash of everything the node process reads (its config
/// file, image, resources, hugepages and password reference), so changing any of them rolls
/// the pods even where the pod spec alone would not change (the ConfigMap's content).
pub const CONFIG_HASH_ANNOTATION: &str = "strata.dev/config-hash";

/// Pod template annotation, `"yes"` exactly when the pod's node runs `tls-cluster yes` (cluster
/// mode with `spec.tls`): its admin port speaks TLS. The TLS volume alone does not say so: pods
/// made before the admin port had TLS mount it too (see [`admin_tls_secret`]).
pub const TLS_CLUSTER_ANNOTATION: &str = "strata.dev/tls-cluster";

/// Key of the node config file in the ConfigMap (mounted at `/etc/strata/strata.conf`).
pub const CONFIG_FILE_KEY: &str = "strata.conf";

/// Label telling the headless and the client Service apart (the ServiceMonitor selects on it).
pub const SERVICE_ROLE_LABEL: &str = "strata.dev/service";

/// Longest CacheCluster name the objects can carry: StatefulSet pods get the label
/// `controller-revision-hash: <name>-<10-character hash>`, and label values stop at 63.
pub const MAX_NAME_LENGTH: usize = 52;

/// Every object a `CacheCluster` needs, ready to server-side apply.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// `<name>-config`: the node config file under key `strata.conf`.
    pub config_map: ConfigMap,
    /// `<name>-headless`: stable per-pod DNS names and the metrics scrape target.
    pub headless_service: Service,
    /// `<name>`: the Redis endpoint `<name>.<namespace>.svc:<port>`.
    pub client_service: Service,
    /// `<name>`: the node pods and their volumes.
    pub stateful_set: StatefulSet,
    /// `<name>`: at most one node down for voluntary disruptions.
    pub pdb: PodDisruptionBudget,
    /// `<name>`: a `monitoring.coreos.com/v1` ServiceMonitor, only when
    /// `spec.monitoring.serviceMonitor` is true.
    pub service_monitor: Option<DynamicObject>,
    /// `<name>`: a `monitoring.coreos.com/v1` PrometheusRule with the node alerts, only when
    /// `spec.monitoring.prometheusRule` is true.
    pub prometheus_rule: Option<DynamicObject>,
    /// `<name>-tls`: a `cert-manager.io/v1` Certificate, only when `spec.tls.certManager` is set.
    pub certificate: Option<DynamicObject>,
}

impl Desired {
    /// The same objects with the StatefulSet running `replicas` pods: in cluster mode, pods
    /// that still own slots stay until the operator has moved their slots away.
    pub fn with_replicas(mut self, replicas: i32) -> Self {
        if let Some(spec) = self.stateful_set.spec.as_mut() {
            spec.replicas = Some(replicas);
        }
        self
    }
}

/// A spec the API server accepted but the operator cannot run; the message says what to fix.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecError {
    /// The offending field below `spec` (e.g. `resources.limits.memory`), or a `metadata.*`
    /// path for an object without the metadata the builders need.
    pub field: String,
    pub message: String,
}

impl SpecError {
    pub(crate) fn new(field: &str, message: impl Into<String>) -> Self {
        Self { field: field.to_owned(), message: message.into() }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.starts_with("metadata.") {
            write!(f, "{}: {}", self.field, self.message)
        } else {
            write!(f, "spec.{}: {}", self.field, self.message)
        }
    }
}

impl std::error::Error for SpecError {}

/// Every object for `cc`. Needs `metadata.name`, `metadata.namespace` and `metadata.uid`
/// (always set on objects read from the API server).
pub fn desired(cc: &CacheCluster) -> Result<Desired, SpecError> {
    let owner = Owner::of(cc)?;
    let config = node_config(cc)?;
    let service_monitor =
        if cc.spec.monitoring.service_monitor { Some(monitoring::service_monitor(cc, &owner)?) } else { None };
    let prometheus_rule =
        if cc.spec.monitoring.prometheus_rule { Some(monitoring::prometheus_rule(cc, &owner)?) } else { None };
    Ok(Desired {
        stateful_set: statefulset::stateful_set(cc, &owner, &config)?,
        config_map: config_map(&owner, config),
        headless_service: services::headless_service(cc, &owner),
        client_service: services::client_service(cc, &owner)?,
        pdb: pdb::pod_disruption_budget(&owner),
        service_monitor,
        prometheus_rule,
        certificate: tls::certificate(cc, &owner)?,
    })
}

/// The labels that select a cluster's pods (StatefulSet, Services, PDB).
pub fn selector_labels(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), "strata-node".to_owned()),
        ("app.kubernetes.io/instance".to_owned(), name.to_owned()),
    ])
}

/// [`selector_labels`] as a label selector string (sorted by key), for `status.selector`.
pub fn selector_string(name: &str) -> String {
    selector_labels(name).iter().map(|(key, value)| format!("{key}={value}")).collect::<Vec<_>>().join(",")
}

/// Where clients connect: `<name>.<namespace>.svc:<port>` (namespace `default` when unset), on
/// `spec.service.port` (plain text, or TLS with `spec.tls` and no `allowPlaintext`).
pub fn endpoint(cc: &CacheCluster) -> String {
    service_address(cc, cc.spec.service.port)
}

/// With `spec.tls`, where TLS clients connect: [`endpoint`] for TLS only, else the Service's
/// `redis-tls` port.
pub fn tls_endpoint(cc: &CacheCluster) -> Option<String> {
    let tls = cc.spec.tls.as_ref()?;
    Some(service_address(cc, tls.side_port().unwrap_or(cc.spec.service.port)))
}

fn service_address(cc: &CacheCluster, port: i32) -> String {
    let namespace = cc.metadata.namespace.as_deref().unwrap_or("default");
    format!("{}.{namespace}.svc:{port}", cc.name_any())
}

/// Labels on every object of a cluster: the selector labels plus Kubernetes' recommended ones.
pub(crate) fn common_labels(name: &str) -> BTreeMap<String, String> {
    let mut labels = selector_labels(name);
    labels.extend([
        ("app.kubernetes.io/component".to_owned(), "cache".to_owned()),
        ("app.kubernetes.io/part-of".to_owned(), "strata".to_owned()),
        ("app.kubernetes.io/managed-by".to_owned(), "strata-operator".to_owned()),
    ]);
    labels
}

/// Names of the objects, shared with the builders that refer to each other.
pub(crate) fn config_map_name(name: &str) -> String {
    format!("{name}-config")
}

pub fn headless_service_name(name: &str) -> String {
    format!("{name}-headless")
}

/// Cluster mode: the Secret holding the nodes' admin password (key [`ADMIN_PASSWORD_KEY`]).
pub fn admin_secret_name(name: &str) -> String {
    format!("{name}-cluster-admin")
}

/// Cluster mode: the admin password Secret, owned by the CacheCluster. Created once (never
/// applied again, which would change the password under running nodes).
pub fn admin_secret(cc: &CacheCluster, password: String) -> Result<Secret, SpecError> {
    let owner = Owner::of(cc)?;
    Ok(Secret {
        metadata: owner.metadata(admin_secret_name(&owner.name)),
        string_data: Some(BTreeMap::from([(ADMIN_PASSWORD_KEY.to_owned(), password)])),
        ..Default::default()
    })
}

/// The owning `CacheCluster`'s identity, checked once for all builders.
pub(crate) struct Owner {
    pub name: String,
    pub namespace: String,
    pub reference: OwnerReference,
}

impl Owner {
    fn of(cc: &CacheCluster) -> Result<Self, SpecError> {
        let name = cc.metadata.name.clone().filter(|n| !n.is_empty());
        let name = name.ok_or_else(|| SpecError::new("metadata.name", "the CacheCluster has no name"))?;
        if name.len() > MAX_NAME_LENGTH {
            return Err(SpecError::new(
                "metadata.name",
                format!(
                    "{name:?} is {} characters long; use at most {MAX_NAME_LENGTH} (pods of a StatefulSet \
                     carry a revision label made of the name and a hash, limited to 63 characters)",
                    name.len()
                ),
            ));
        }
        if !is_dns_label(&name) {
            return Err(SpecError::new(
                "metadata.name",
                format!(
                    "{name:?} cannot name a Service: use lowercase letters, digits and '-', starting with a \
                     letter and ending with a letter or digit"
                ),
            ));
        }
        let namespace = cc.metadata.namespace.clone().filter(|n| !n.is_empty());
        let namespace =
            namespace.ok_or_else(|| SpecError::new("metadata.namespace", "the CacheCluster has no namespace"))?;
        let mut reference = cc.controller_owner_ref(&()).ok_or_else(|| {
            SpecError::new("metadata.uid", "the CacheCluster has no uid (was it read from the API server?)")
        })?;
        // Foreground deletion of the CacheCluster waits for its objects to go first.
        reference.block_owner_deletion = Some(true);
        Ok(Self { name, namespace, reference })
    }

    /// Metadata of an owned object: name, namespace, common labels and the owner reference.
    pub fn metadata(&self, name: String) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
            namespace: Some(self.namespace.clone()),
            labels: Some(common_labels(&self.name)),
            owner_references: Some(vec![self.reference.clone()]),
            ..Default::default()
        }
    }
}

/// An RFC 1035 label (what Service names must be): `[a-z]([-a-z0-9]*[a-z0-9])?`.
fn is_dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.first().is_some_and(u8::is_ascii_lowercase)
        && bytes.last().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

fn config_map(owner: &Owner, config: String) -> ConfigMap {
    ConfigMap {
        metadata: owner.metadata(config_map_name(&owner.name)),
        data: Some(BTreeMap::from([(CONFIG_FILE_KEY.to_owned(), config)])),
        ..Default::default()
    }
}

/// 64-bit FNV-1a: a small, stable hash (unlike std's `DefaultHasher`, fixed across Rust
/// releases), enough to notice that the pods' inputs changed.
pub(crate) fn fnv1a_64(bytes: &[u8]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET_BASIS, |hash, &byte| (hash ^ u64::from(byte)).wrapping_mul(PRIME))
}

#[cfg(test)]
pub(crate) mod test_support;

#[cfg(test)]
mod tests;
