//! `strata.dev/v1alpha1`: the `CacheCluster` resource.
//!
//! Field doc comments become the schema descriptions users read with `kubectl explain
//! cachecluster.spec`; keep them accurate. Every field has a default (serde and schema agree), so
//! `spec: {}` is a complete, valid spec.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, ResourceRequirements, Toleration, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::{JsonSchema, Schema};
use serde::{Deserialize, Serialize};

use super::cel::{CelRule, attach, reflow_docs};

/// The node image used when `spec.image` is unset: the node release matching this operator.
pub const DEFAULT_IMAGE: &str = concat!("strata-node:", env!("CARGO_PKG_VERSION"));
/// Client port of the Service when `spec.service.port` is unset (Redis's).
pub const DEFAULT_PORT: i32 = 6379;
/// The client Service's TLS port when `spec.tls.allowPlaintext` is true and `spec.tls.port` is
/// unset.
pub const DEFAULT_TLS_PORT: i32 = 6390;
/// Scrape interval when `spec.monitoring.interval` is unset.
pub const DEFAULT_SCRAPE_INTERVAL: &str = "30s";
/// Key in the password Secret when `spec.auth.passwordSecretRef.key` is unset.
pub const DEFAULT_PASSWORD_KEY: &str = "password";

// The derivation of `maxMemory` from the memory limit, in one place: the constants below, the
// field's description, both CEL messages and the operator's own check all spell it from these.
macro_rules! derived_max_memory_formula {
    () => {
        "(limit - 32Mi) / 1.25"
    };
}
macro_rules! min_derived_memory_limit {
    () => {
        "64Mi"
    };
}

/// How `maxMemory` is derived from `resources.limits.memory` when unset:
/// `maxmemory = (limit - DERIVED_MAX_MEMORY_HEADROOM_BYTES) * 100 / DERIVED_MAX_MEMORY_RSS_PERCENT`.
///
/// Two parts, because the node's memory outside its budget has two parts:
/// - a fixed one, [`DERIVED_MAX_MEMORY_HEADROOM_BYTES`]: what the process holds whatever its
///   budget (the binary's writable data, worker thread stacks, allocator metadata) and what the
///   kernel charges to the container for it (page tables, socket and thread kernel memory, the
///   page cache of the binary). Measured in a pod (2 worker threads): an idle node has 6.4Mi of
///   RSS, 3.0Mi of it anonymous, and its container's cgroup charge is 3.6Mi; 32Mi leaves room
///   for more threads, the binary's pages and kernel memory of many connections;
/// - a proportional one, [`DERIVED_MAX_MEMORY_RSS_PERCENT`]: `maxmemory` counts what the
///   allocator really hands out (index, values, eviction metadata and connection buffers all
///   inside it), and the node keeps its RSS within 1.15 x `maxmemory` for every value size
///   (allocator size classes, partly filled pages, memory freed but not yet returned). 1.25
///   covers that 1.15 with 10 points to spare for fragmentation under eviction churn, which
///   grows with the dataset and so cannot come out of a fixed headroom.
///
/// So a node that keeps its promise peaks at `1.15 x maxmemory + fixed`, that is
/// `0.92 x (limit - 32Mi) + fixed`: below the limit at every size. The e2e suite floods a 128Mi
/// pod (76.8Mi budget) with small keys to check it. The previous `limit x 0.9 - 32Mi` assumed
/// RSS = `maxmemory`: it gave a 1Gi pod a budget of 890Mi, so 1.15 x that alone is 1Gi, with
/// nothing left for the fixed part.
pub const DERIVED_MAX_MEMORY_FORMULA: &str = derived_max_memory_formula!();
/// The fixed part of the memory limit kept out of a derived `maxMemory` (32Mi); see
/// [`DERIVED_MAX_MEMORY_FORMULA`].
pub const DERIVED_MAX_MEMORY_HEADROOM_BYTES: u64 = 32 << 20;
/// The node's RSS as a share of its `maxmemory` that a derived `maxMemory` leaves room for, in
/// percent (the rest of the limit divided by 1.25); see [`DERIVED_MAX_MEMORY_FORMULA`].
pub const DERIVED_MAX_MEMORY_RSS_PERCENT: u64 = 125;
/// Smallest memory limit from which `maxMemory` can be derived: 64Mi gives a 25.6Mi budget, the
/// least that holds a useful cache beside the node's own fixed costs.
pub const MIN_DERIVED_MEMORY_LIMIT: &str = min_derived_memory_limit!();

/// Desired state of a Strata cache cluster.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "strata.dev",
    version = "v1alpha1",
    kind = "CacheCluster",
    plural = "cacheclusters",
    singular = "cachecluster",
    namespaced,
    shortname = "scc",
    category = "strata",
    status = "CacheClusterStatus",
    derive = "PartialEq",
    doc = "A Strata cache cluster: Redis-compatible cache nodes managed by the Strata operator.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    // Printer columns as JSON: the list form repeats `type_ = ...`, which clippy reads as
    // duplicated attributes.
    printcolumn = r#"{"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Available\")].status", "description": "Whether the cluster is Available"}"#,
    printcolumn = r#"{"name": "Ready-Replicas", "type": "integer", "jsonPath": ".status.readyReplicas", "description": "Pods ready to serve"}"#,
    printcolumn = r#"{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas", "description": "Desired pods"}"#,
    printcolumn = r#"{"name": "Shards", "type": "integer", "jsonPath": ".status.shards", "description": "Shards of the Redis Cluster (cluster mode)"}"#,
    printcolumn = r#"{"name": "Slots", "type": "integer", "jsonPath": ".status.slotsCovered", "description": "Hash slots of 16384 served by a node at the current topology (cluster mode)"}"#,
    printcolumn = r#"{"name": "Memory", "type": "string", "jsonPath": ".spec.resources.limits.memory", "description": "Memory limit of each pod"}"#,
    printcolumn = r#"{"name": "Eviction", "type": "string", "jsonPath": ".spec.evictionPolicy", "description": "Eviction policy"}"#,
    printcolumn = r#"{"name": "Durability", "type": "string", "jsonPath": ".spec.durability.mode", "description": "Durability mode"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase", default)]
#[schemars(transform = spec_rules, transform = reflow_docs)]
pub struct CacheClusterSpec {
    /// Number of cache node pods. With `cluster.enabled` (the default) they are the shards of
    /// one Redis Cluster: the 16384 hash slots are spread evenly over the pods (as
    /// `redis-cli --cluster create` does), so memory adds up and every client sees every key.
    /// Changing it moves slots with their keys while clients keep working: new pods start
    /// empty and get slots from the fullest; scaling in drains the highest ordinals first, and
    /// their pods (and volumes) go only once they own no slot (`status.resharding` and the
    /// Resharding condition show the progress). With `cluster.enabled: false` each pod is an independent
    /// cache. Minimum 1; default 1. Also settable through the scale subresource
    /// (`kubectl scale`).
    #[schemars(range(min = 1))]
    pub replicas: i32,

    /// Container image of the cache node. Defaults to the strata-node release matching this
    /// operator (`strata-node:<operator version>`); pin a tag or digest, never `latest`.
    #[schemars(length(min = 1))]
    pub image: String,

    /// When the kubelet pulls the image: Always, IfNotPresent (default) or Never.
    pub image_pull_policy: ImagePullPolicy,

    /// CPU and memory requests and limits of each node container. The memory limit bounds the
    /// node: `maxMemory` is derived from it when unset. CPU pinning (`cpu.pinning`) needs
    /// integer CPUs with requests equal to limits (Guaranteed QoS).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// The node's memory budget (`maxmemory`): a hard limit on index, values, eviction metadata
    /// and connection buffers; at the limit `evictionPolicy` frees memory before a write
    /// proceeds. When unset it is derived from `resources.limits.memory` as
    /// (limit - 32Mi) / 1.25: 32Mi for the process's fixed costs (binary, threads, allocator
    /// metadata, kernel memory), and the node's RSS may exceed its budget by up to 15 %
    /// (allocator size classes and fragmentation), so 1.25 keeps it below the limit with a
    /// margin; e.g. 1Gi gives 793.6Mi and 256Mi gives 179.2Mi. The limit must then be at least
    /// 64Mi. With neither set, the node has no memory limit. When set it must be positive and
    /// below the memory limit, and a value close to the limit risks OOM kills.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_memory: Option<Quantity>,

    /// Per-pod persistent volume for the disk tier and durability. Required unless
    /// `durability.mode` is `none`; without it nodes keep data in RAM only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageSpec>,

    /// What the node evicts when `maxMemory` is reached (the node's `--maxmemory-policy`):
    /// noeviction (writes fail with Redis's OOM error), allkeys-lru, allkeys-lfu,
    /// allkeys-random, volatile-lru, volatile-lfu, volatile-random, volatile-ttl (keys with a
    /// TTL only), or sieve. Default allkeys-lru; `adaptive` will become the default once the
    /// node implements it.
    pub eviction_policy: EvictionPolicy,

    /// How writes reach the disk tier. Default: mode none (a pure cache).
    pub durability: DurabilitySpec,

    /// Worker threads and CPU pinning of the node.
    pub cpu: CpuSpec,

    /// Back the node's large arenas (index tables, log buffers) with huge pages. Needs
    /// `resources.limits.memory` at least as large as `amount`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hugepages: Option<HugepagesSpec>,

    /// The client Service (`<name>.<namespace>.svc:<port>`).
    pub service: ServiceSpec,

    /// Password clients must send with AUTH. Without it the cache accepts any client that can
    /// reach the Service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthSpec>,

    /// TLS: every client port of the nodes (the `redis` port, and the `cluster` port in cluster
    /// mode) speaks only TLS, with the certificate of a Secret you manage or one cert-manager
    /// issues; or, with `allowPlaintext`, the plain ports stay open and TLS is served beside
    /// them on the Service's `redis-tls` port. In cluster mode the nodes' admin port speaks TLS
    /// either way: links between nodes (forwarded commands, slot migrations) and the operator's
    /// topology pushes go over TLS. The connecting side checks the node's certificate against
    /// the Secret's `ca.crt` (the operator checks the pod's DNS name too; nodes check the chain);
    /// the node asks for a client certificate only as `clientAuth` says, so with the default
    /// `None` it asks none and the cluster admin password guards the port. A renewed certificate is used by new connections within seconds, with
    /// no pod restart. The metrics port stays plain HTTP. Turning TLS on or off on a running cluster-mode CacheCluster rolls the pods
    /// one at a time, and the roll completes on its own (the operator reaches each pod's admin
    /// port the way that pod was started; an old pod whose container restarts mid-roll comes
    /// back speaking the new setting, cannot be reached as the old pod it is, and is replaced
    /// first). While old and new pods mix, a command a node forwards
    /// to a pod with the other setting fails; without `allowPlaintext` clients must switch to or
    /// from TLS at that moment anyway, since the client ports change too. Turning
    /// `allowPlaintext` on or off rolls the pods as well, with no such gap between nodes (their
    /// admin port speaks TLS either way).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,

    /// Prometheus monitoring of the nodes.
    pub monitoring: MonitoringSpec,

    /// Cluster mode: the pods as one Redis Cluster (default) or as independent caches.
    pub cluster: ClusterSpec,

    /// Node labels a node must have to run the cache pods (pod `nodeSelector`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,

    /// Tolerations of the cache pods.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,

    /// Affinity and anti-affinity rules of the cache pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,

    /// How the cache pods spread across zones and nodes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,

    /// PriorityClass of the cache pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,

    /// Extra labels on the cache pods (the operator's own selector labels win on conflict).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_labels: BTreeMap<String, String>,

    /// Extra annotations on the cache pods.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_annotations: BTreeMap<String, String>,
}

impl Default for CacheClusterSpec {
    fn default() -> Self {
        Self {
            replicas: 1,
            image: DEFAULT_IMAGE.to_owned(),
            image_pull_policy: ImagePullPolicy::default(),
            resources: None,
            max_memory: None,
            storage: None,
            eviction_policy: EvictionPolicy::default(),
            durability: DurabilitySpec::default(),
            cpu: CpuSpec::default(),
            hugepages: None,
            service: ServiceSpec::default(),
            auth: None,
            tls: None,
            monitoring: MonitoringSpec::default(),
            cluster: ClusterSpec::default(),
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
            affinity: None,
            topology_spread_constraints: Vec::new(),
            priority_class_name: None,
            pod_labels: BTreeMap::new(),
            pod_annotations: BTreeMap::new(),
        }
    }
}

/// Image pull policy of the node container.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ImagePullPolicy {
    // Variants carry no doc comments: the schema stays a plain string enum.
    Always,
    #[default]
    IfNotPresent,
    Never,
}

/// Eviction policy names, as the node's `--maxmemory-policy` spells them.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EvictionPolicy {
    Noeviction,
    #[default]
    AllkeysLru,
    AllkeysLfu,
    AllkeysRandom,
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
    Sieve,
}

impl EvictionPolicy {
    /// Every policy, in schema order.
    pub const ALL: [EvictionPolicy; 9] = [
        Self::Noeviction,
        Self::AllkeysLru,
        Self::AllkeysLfu,
        Self::AllkeysRandom,
        Self::VolatileLru,
        Self::VolatileLfu,
        Self::VolatileRandom,
        Self::VolatileTtl,
        Self::Sieve,
    ];

    /// The value of the node's `--maxmemory-policy` flag.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Noeviction => "noeviction",
            Self::AllkeysLru => "allkeys-lru",
            Self::AllkeysLfu => "allkeys-lfu",
            Self::AllkeysRandom => "allkeys-random",
            Self::VolatileLru => "volatile-lru",
            Self::VolatileLfu => "volatile-lfu",
            Self::VolatileRandom => "volatile-random",
            Self::VolatileTtl => "volatile-ttl",
            Self::Sieve => "sieve",
        }
    }
}

/// Per-pod persistent volume.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = storage_rules, transform = reflow_docs)]
pub struct StorageSpec {
    /// Size of each pod's PersistentVolumeClaim, e.g. "10Gi".
    pub size: Quantity,

    /// StorageClass of the claims; the cluster's default StorageClass when unset. Prefer a fast
    /// local SSD class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,

    /// Most bytes the disk tier (values demoted from RAM at the memory budget) may use on the
    /// volume; must not exceed `size`. When unset: 80 % of `size` with durability none, 50 %
    /// otherwise (the durability log needs the rest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_budget: Option<Quantity>,
}

/// How writes reach the disk tier.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[schemars(transform = durability_rules, transform = reflow_docs)]
pub struct DurabilitySpec {
    /// none (default): a cache, the disk tier (if any) only extends RAM. write-back: writes
    /// reach the log in the background within a bounded lag. periodic: every write is
    /// appended to the log, fsync every `fsyncInterval`; at most one interval of acknowledged
    /// writes can be lost. sync: a write is acknowledged only after the fsync that covers it.
    /// Every mode but none needs `storage`.
    pub mode: DurabilityMode,

    /// fsync interval of mode periodic: a positive whole number with unit us, ms or s, e.g.
    /// "10ms" (the node's default when unset) or "1s" (Redis's everysec). Only valid with
    /// mode periodic.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^[1-9][0-9]*(us|ms|s)$"))]
    pub fsync_interval: Option<String>,
}

/// Durability modes, as the node's `--durability` spells them.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DurabilityMode {
    #[default]
    None,
    WriteBack,
    Periodic,
    Sync,
}

impl DurabilityMode {
    /// The value of the node's `--durability` flag.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::WriteBack => "write-back",
            Self::Periodic => "periodic",
            Self::Sync => "sync",
        }
    }
}

/// Worker threads and CPU pinning.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[schemars(transform = reflow_docs)]
pub struct CpuSpec {
    /// Pin each worker thread to its own CPU. Needs Guaranteed QoS: integer
    /// `resources.limits.cpu` with requests equal to limits for cpu and memory, and the
    /// kubelet's static CPU manager policy on the node. Pinned workers all serve at all
    /// times; unpinned, the node serves from as few workers as its load needs and gives the
    /// other cores back (adaptive threads). Default false.
    pub pinning: bool,

    /// Worker threads of the node (one event loop each). When unset: the CPU limit rounded
    /// down (at least 1), else the CPU request likewise, else the cores the node may use. At
    /// most the CPU limit when both are set.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub threads: Option<i32>,
}

/// Hugepage-backed memory for the node's large arenas.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = hugepages_rules, transform = reflow_docs)]
pub struct HugepagesSpec {
    /// Page size: "2Mi" or "1Gi" (requests the `hugepages-2Mi` or `hugepages-1Gi` resource).
    pub page_size: HugepageSize,

    /// Hugepage memory per pod, a whole number of pages, e.g. "512Mi". Must fit inside
    /// `resources.limits.memory`.
    pub amount: Quantity,
}

/// Hugepage sizes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum HugepageSize {
    #[serde(rename = "2Mi")]
    Size2Mi,
    #[serde(rename = "1Gi")]
    Size1Gi,
}

impl HugepageSize {
    /// As written in the spec, and as the node's `hugepages` setting takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Size2Mi => "2Mi",
            Self::Size1Gi => "1Gi",
        }
    }

    /// The Kubernetes resource name, e.g. `hugepages-2Mi`.
    pub fn resource_name(self) -> &'static str {
        match self {
            Self::Size2Mi => "hugepages-2Mi",
            Self::Size1Gi => "hugepages-1Gi",
        }
    }
}

/// The client Service.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[schemars(transform = reflow_docs)]
pub struct ServiceSpec {
    /// Service type: ClusterIP (default), NodePort or LoadBalancer.
    #[serde(rename = "type")]
    pub type_: ServiceType,

    /// Port clients connect to (1–65535); default 6379.
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,

    /// Annotations on the Service, e.g. for a cloud load balancer.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Default for ServiceSpec {
    fn default() -> Self {
        Self { type_: ServiceType::default(), port: DEFAULT_PORT, annotations: BTreeMap::new() }
    }
}

/// Kubernetes Service types offered for the client Service.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ServiceType {
    #[default]
    #[serde(rename = "ClusterIP")]
    ClusterIp,
    NodePort,
    LoadBalancer,
}

/// Client authentication.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = reflow_docs)]
pub struct AuthSpec {
    /// Secret (in the CacheCluster's namespace) holding the password clients must AUTH with.
    pub password_secret_ref: SecretKeyRef,
}

/// TLS for clients and, in cluster mode, between nodes. Give exactly one of `secretName` and
/// `certManager`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = tls_rules, transform = reflow_docs)]
pub struct TlsSpec {
    /// A Secret of type `kubernetes.io/tls` in this namespace: `tls.crt` (the chain) and
    /// `tls.key`, and `ca.crt` (the CA that signs client certificates) when `clientAuth` is not
    /// `None`. Its names must cover what clients connect to: `<name>.<namespace>.svc` and, in
    /// cluster mode, `*.<name>-headless.<namespace>.svc` (with TLS, MOVED and CLUSTER SLOTS name
    /// the pods `<pod>.<name>-headless.<namespace>.svc`). In cluster mode `ca.crt` is required
    /// whatever `clientAuth` says: it must hold the CA that signed `tls.crt`, since on the admin
    /// port the operator checks each node's certificate against it (and the pod's DNS name), and
    /// nodes check each other's chain against it; and the certificate must allow client auth
    /// (extended key usage `clientAuth`, or none at all), since each node presents it on its
    /// links to the others (checked there when `clientAuth` is not `None`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub secret_name: Option<String>,

    /// Have cert-manager issue the certificate: the operator creates a Certificate
    /// `<name>-tls` (Secret `<name>-tls`) for the client Service, the headless Service and
    /// each pod's DNS name, usable for server and client auth. Needs cert-manager installed;
    /// in cluster mode, an issuer that writes `ca.crt` into the Secret (CA, SelfSigned and
    /// Vault issuers do; ACME ones do not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert_manager: Option<CertManagerSpec>,

    /// Client certificates: `None` (default: any TLS client), `Optional` (checked when given),
    /// `Required` (mutual TLS). Checked against the Secret's `ca.crt`.
    #[serde(default)]
    pub client_auth: ClientAuth,

    /// Serve plain text and TLS side by side, for moving clients to TLS one at a time. False
    /// (default): TLS only, on the Service's `redis` port (`spec.service.port`), the plain port
    /// closed. True: the `redis` port stays plain text and TLS is served on the Service's
    /// `redis-tls` port (`port`, default 6390; pod port 6390). `clientAuth` applies to the TLS
    /// port only: plain-text clients are not asked for a certificate (use `auth` for a password).
    /// In cluster mode the `cluster` port (6380, where MOVED and CLUSTER SLOTS send cluster-aware
    /// clients) is then plain text, and MOVED names pods by IP as without TLS, so a cluster-aware
    /// client that speaks TLS is redirected to a plain port: cluster-aware clients should stay on
    /// plain text until you turn this off (TLS only). Clients that are not cluster-aware work over
    /// TLS through the `redis-tls` port (the node forwards their commands to the owner of the
    /// key, over TLS between nodes). To finish a migration set this to false and remove `port`;
    /// setting `spec.service.port` to the TLS port number lets TLS clients keep their port.
    #[serde(default)]
    pub allow_plaintext: bool,

    /// With `allowPlaintext`: the client Service's TLS port (`redis-tls`, to pod port 6390),
    /// 1–65535, default 6390. Must differ from `spec.service.port` and, in cluster mode, from
    /// 6380 (the `cluster` port). Only valid with `allowPlaintext: true`: TLS only is served on
    /// `spec.service.port`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
}

impl TlsSpec {
    /// The client Service's TLS port beside the plain one: `port` (default 6390) when
    /// `allowPlaintext` is true; None for TLS only (TLS is then on `spec.service.port`).
    pub fn side_port(&self) -> Option<i32> {
        self.allow_plaintext.then(|| self.port.unwrap_or(DEFAULT_TLS_PORT))
    }
}

/// How the operator asks cert-manager for the certificate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = reflow_docs)]
pub struct CertManagerSpec {
    /// The Issuer or ClusterIssuer that signs the certificate.
    pub issuer_ref: IssuerRef,

    /// Lifetime of the certificate, a Go duration such as "2160h" (cert-manager's default: 90 days).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,

    /// How long before expiry cert-manager renews it, e.g. "360h".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub renew_before: Option<String>,
}

/// A cert-manager issuer.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = reflow_docs)]
pub struct IssuerRef {
    /// Name of the issuer.
    #[schemars(length(min = 1))]
    pub name: String,

    /// `Issuer` (default, in this namespace) or `ClusterIssuer`.
    #[serde(default = "default_issuer_kind")]
    pub kind: String,

    /// API group of the issuer; default `cert-manager.io`.
    #[serde(default = "default_issuer_group")]
    pub group: String,
}

fn default_issuer_kind() -> String {
    "Issuer".to_owned()
}

fn default_issuer_group() -> String {
    "cert-manager.io".to_owned()
}

/// Whether clients must present a certificate (the node's `tls-auth-clients`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ClientAuth {
    #[default]
    None,
    Optional,
    Required,
}

/// Rules on `spec.tls`.
pub const TLS_RULES: &[CelRule] = &[
    CelRule {
        rule: "has(self.secretName) != has(self.certManager)",
        message: "tls needs exactly one of secretName (a kubernetes.io/tls Secret you manage) and certManager \
                  (an issuer that signs one for you)",
        field_path: Some(".secretName"),
        required: false,
    },
    CelRule {
        rule: "!has(self.port) || (has(self.allowPlaintext) && self.allowPlaintext)",
        message: "tls.port is the TLS port beside the plain one and needs tls.allowPlaintext: true; for TLS only, \
                  remove tls.port (TLS is then served on service.port)",
        field_path: Some(".port"),
        required: false,
    },
];

fn tls_rules(schema: &mut Schema) {
    attach(schema, TLS_RULES);
}

/// A key of a Secret in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = reflow_docs)]
pub struct SecretKeyRef {
    /// Name of the Secret.
    #[schemars(length(min = 1))]
    pub name: String,

    /// Key in the Secret; default "password".
    #[serde(default = "default_password_key")]
    #[schemars(length(min = 1))]
    pub key: String,
}

fn default_password_key() -> String {
    DEFAULT_PASSWORD_KEY.to_owned()
}

/// Prometheus monitoring.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[schemars(transform = reflow_docs)]
pub struct MonitoringSpec {
    /// Create a Prometheus Operator ServiceMonitor that scrapes every node's `/metrics`.
    /// Needs the ServiceMonitor CRD in the cluster. Default false.
    pub service_monitor: bool,

    /// Create a Prometheus Operator PrometheusRule with the cache node alerts (node down, memory,
    /// evictions, hit ratio, p99 latency, refused connections) for this cluster's pods; the
    /// runbook is in the repository's dashboards/README.md. Needs the PrometheusRule CRD in the
    /// cluster, and the ServiceMonitor (or a scrape that sets the same labels). Default false.
    pub prometheus_rule: bool,

    /// Scrape interval of the ServiceMonitor, a Prometheus duration such as "30s" (default)
    /// or "1m".
    #[schemars(pattern(r"^([0-9]+(ms|s|m|h))+$"))]
    pub interval: String,

    /// Extra labels on the ServiceMonitor and the PrometheusRule, e.g. the `release` label your
    /// Prometheus selects them by.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

impl Default for MonitoringSpec {
    fn default() -> Self {
        Self {
            service_monitor: false,
            prometheus_rule: false,
            interval: DEFAULT_SCRAPE_INTERVAL.to_owned(),
            labels: BTreeMap::new(),
        }
    }
}

/// Cluster mode.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[schemars(transform = reflow_docs)]
pub struct ClusterSpec {
    /// Run the pods as one Redis Cluster of `replicas` shards (default true). The operator
    /// gives each pod a stable node id and pushes the topology (slots, endpoints, an increasing
    /// epoch) to every node on its admin port (16379, password in the Secret
    /// `<name>-cluster-admin`), again whenever a pod's address changes. Cluster-aware clients
    /// (`redis-cli -c`, cluster client libraries) connect to the Service's `cluster` port (6380)
    /// and are redirected (MOVED) to the pod owning a key; any other client uses the `redis` port
    /// (`spec.service.port`), where a node forwards a command for a key it does not own to the
    /// owner. Multi-key commands, transactions and scripts must keep to one slot (use `{hash
    /// tags}`). Set false for independent caches, the behaviour before cluster mode: each pod
    /// holds only the keys written to it and the Service spreads connections over the pods, so
    /// use one replica, or address pods by their headless Service names, when every client
    /// must see every key.
    pub enabled: bool,
}

impl Default for ClusterSpec {
    fn default() -> Self {
        Self { enabled: true }
    }
}

/// Observed state of a cache cluster, written by the operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = reflow_docs)]
pub struct CacheClusterStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Cache node pods that exist (the scale subresource's status replicas).
    #[serde(default)]
    pub replicas: i32,

    /// Cache node pods ready to serve.
    #[serde(default)]
    pub ready_replicas: i32,

    /// Label selector of the cache pods, in string form (for the scale subresource and HPA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,

    /// Where clients connect: `<name>.<namespace>.svc:<port>` (`spec.service.port`; with
    /// `spec.tls` and no `allowPlaintext`, a TLS port).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,

    /// With `spec.tls`: where TLS clients connect, `<name>.<namespace>.svc:<port>`. The same as
    /// `endpoint` for TLS only; with `allowPlaintext`, the `redis-tls` port (`spec.tls.port`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_endpoint: Option<String>,

    /// Cluster mode: the topology epoch last pushed to the nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_epoch: Option<u64>,

    /// Cluster mode: shards (nodes owning slots) in that topology.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<i32>,

    /// Cluster mode: hash slots (of 16384) whose node has applied the current topology; below
    /// 16384 some keys cannot be served (the Degraded condition says which pods).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots_covered: Option<i32>,

    /// Cluster mode: each pod's node id, advertised IP and the topology epoch it has applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["pod"]))]
    pub nodes: Vec<NodeStatus>,

    /// Cluster mode: the slot migrations under way to even out the shards after a change of
    /// `replicas` (absent when the slots are balanced). Kept here so a restarted operator
    /// carries on with the same plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resharding: Option<ReshardingStatus>,

    /// Current conditions: Available, Progressing, Degraded, Monitoring, Resharding.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// One node of the cluster as the operator last saw it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = reflow_docs)]
pub struct NodeStatus {
    /// The pod's name.
    pub pod: String,
    /// Its node id: sha1("<CacheCluster uid>/<ordinal>"), the same across restarts.
    pub id: String,
    /// The IP the topology advertises for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// The topology epoch the node reported (0: none); absent when it did not answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_epoch: Option<u64>,
    /// The hash slots the node owns in the topology last pushed, e.g. "0-4095,8192" ("-": none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<String>,
}

/// A resharding plan: the slot migrations that even out the shards, carried out a few at a time.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = reflow_docs)]
pub struct ReshardingStatus {
    /// The plan's id ("p<epoch it was made at>"); migration ids start with it.
    pub plan: String,
    /// The number of shards the plan leads to (`spec.replicas` when it was made).
    pub shards: i32,
    /// The migrations, in the order they are started.
    #[serde(default)]
    pub moves: Vec<SlotMove>,
    /// Slots whose migration is committed and confirmed by a topology epoch.
    #[serde(default)]
    pub slots_moved: i32,
    /// Slots the plan moves in all.
    #[serde(default)]
    pub slots_total: i32,
    /// When the plan was made.
    pub started_at: Time,
}

/// One migration of a resharding plan: `slots` from pod ordinal `source` to pod ordinal `target`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = reflow_docs)]
pub struct SlotMove {
    /// The migration id of the current attempt, as the nodes know it (`STRATA.MIGRATE STATUS <id>`).
    pub id: String,
    pub source: i32,
    pub target: i32,
    /// The slots, e.g. "0-1023".
    pub slots: String,
    pub state: MoveState,
    /// Attempts started so far.
    #[serde(default)]
    pub attempts: i32,
    /// Why the last attempt failed, in the node's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A failed move is not retried before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<Time>,
    /// Keys the source sent, when it committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<u64>,
}

/// Where one migration stands: Pending (not started, or to be retried), Running (the source
/// streams the slots), Committed (the target owns them; the confirming topology epoch is not
/// applied everywhere yet), Done.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MoveState {
    Pending,
    Running,
    Committed,
    Done,
}

/// One aspect of the cluster's state (the shape of Kubernetes' `metav1.Condition`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = reflow_docs)]
pub struct Condition {
    /// Condition type: Available, Progressing, Degraded, Monitoring or Resharding.
    #[serde(rename = "type")]
    pub type_: String,

    /// True, False or Unknown.
    pub status: ConditionStatus,

    /// Machine-readable reason for the last transition, in CamelCase (e.g. InvalidSpec).
    #[serde(default)]
    pub reason: String,

    /// Human-readable details of the last transition.
    #[serde(default)]
    pub message: String,

    /// When the status last changed.
    pub last_transition_time: Time,

    /// The `metadata.generation` this condition was set for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl Condition {
    /// The cluster serves clients: every desired pod is ready at the current spec.
    pub const AVAILABLE: &'static str = "Available";
    /// The operator is rolling pods towards the current spec.
    pub const PROGRESSING: &'static str = "Progressing";
    /// Something needs attention (e.g. reason InvalidSpec); the message says what.
    pub const DEGRADED: &'static str = "Degraded";
    /// The ServiceMonitor and PrometheusRule asked for by `spec.monitoring` exist (False says why not).
    pub const MONITORING: &'static str = "Monitoring";
    /// Cluster mode: slots are being migrated between nodes (True while a plan runs, with
    /// "moved X/Y slots"; False with reason Balanced when none runs).
    pub const RESHARDING: &'static str = "Resharding";
    /// Degraded reason for a spec the API server accepted but the operator cannot run.
    pub const REASON_INVALID_SPEC: &'static str = "InvalidSpec";
}

/// Status of a condition.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

// ---- CEL validation (x-kubernetes-validations) ----
//
// Quantities (`resources.*`, `maxMemory`, sizes) are int-or-string in the schema, so every rule
// reads them as `quantity(string(x))`. A rule that compares quantities passes when one of them
// is not a valid quantity: the rule checking that field's format reports it instead, so each
// mistake yields one message.
//
// The API server rejects a CRD whose rules' *estimated* cost is too high (checked against
// kube-apiserver 1.33). Two forms matter: read map entries with an index
// (`self.resources.limits['cpu']`; the field form `limits.cpu` is estimated as unbounded), and
// never parse a converted integer (`quantity(string(self.cpu.threads))`); compare
// `asApproximateFloat()` with `double(...)` instead.

/// Rules on `spec` (they need several fields).
pub const SPEC_RULES: &[CelRule] = &[
    CelRule {
        rule: "!has(self.resources) || (\
               (!has(self.resources.limits) || \
               ((!('cpu' in self.resources.limits) || isQuantity(string(self.resources.limits['cpu']))) && \
               (!('memory' in self.resources.limits) || isQuantity(string(self.resources.limits['memory']))))) && \
               (!has(self.resources.requests) || \
               ((!('cpu' in self.resources.requests) || isQuantity(string(self.resources.requests['cpu']))) && \
               (!('memory' in self.resources.requests) || isQuantity(string(self.resources.requests['memory']))))))",
        message: "resources.limits and resources.requests: cpu and memory must be quantities, \
                  e.g. cpu \"2\" or \"500m\", memory \"1Gi\" or \"512Mi\"",
        field_path: Some(".resources"),
        required: false,
    },
    CelRule {
        rule: "!has(self.maxMemory) || \
               (isQuantity(string(self.maxMemory)) && quantity(string(self.maxMemory)).isGreaterThan(quantity('0')))",
        message: "maxMemory must be a positive quantity such as \"900Mi\" or \"3Gi\"",
        field_path: Some(".maxMemory"),
        required: false,
    },
    CelRule {
        rule: "!has(self.cpu) || !self.cpu.pinning || \
               (has(self.resources) && has(self.resources.limits) && 'cpu' in self.resources.limits && \
               isQuantity(string(self.resources.limits['cpu'])) && \
               quantity(string(self.resources.limits['cpu'])).isInteger() && \
               quantity(string(self.resources.limits['cpu'])).isGreaterThan(quantity('0')) && \
               (!has(self.resources.requests) || !('cpu' in self.resources.requests) || \
               (isQuantity(string(self.resources.requests['cpu'])) && \
               quantity(string(self.resources.requests['cpu'])).compareTo(quantity(string(self.resources.limits['cpu']))) == 0)))",
        message: "cpu.pinning requires resources.limits.cpu to be a whole number of CPUs (e.g. \"2\") and \
                  resources.requests.cpu, if set, to equal it (Guaranteed QoS: the kubelet's static CPU \
                  manager then gives the pod exclusive cores)",
        field_path: Some(".cpu.pinning"),
        required: false,
    },
    CelRule {
        rule: "!has(self.cpu) || !self.cpu.pinning || \
               (has(self.resources) && has(self.resources.limits) && 'memory' in self.resources.limits && \
               (!has(self.resources.requests) || !('memory' in self.resources.requests) || \
               !isQuantity(string(self.resources.requests['memory'])) || \
               !isQuantity(string(self.resources.limits['memory'])) || \
               quantity(string(self.resources.requests['memory'])).compareTo(quantity(string(self.resources.limits['memory']))) == 0))",
        message: "cpu.pinning requires Guaranteed QoS: set resources.limits.memory, and resources.requests.memory, \
                  if set, equal to it",
        field_path: Some(".cpu.pinning"),
        required: false,
    },
    CelRule {
        rule: "!has(self.cpu) || !has(self.cpu.threads) || \
               !(has(self.resources) && has(self.resources.limits) && 'cpu' in self.resources.limits && \
               isQuantity(string(self.resources.limits['cpu']))) || \
               quantity(string(self.resources.limits['cpu'])).asApproximateFloat() >= double(self.cpu.threads)",
        message: "cpu.threads must not exceed resources.limits.cpu (one worker thread per CPU): lower cpu.threads \
                  or raise the CPU limit",
        field_path: Some(".cpu.threads"),
        required: false,
    },
    CelRule {
        rule: "!has(self.maxMemory) || !isQuantity(string(self.maxMemory)) || \
               !(has(self.resources) && has(self.resources.limits) && 'memory' in self.resources.limits && \
               isQuantity(string(self.resources.limits['memory']))) || \
               quantity(string(self.maxMemory)).isLessThan(quantity(string(self.resources.limits['memory'])))",
        message: concat!(
            "maxMemory must be less than resources.limits.memory, leaving headroom for the process and allocator \
             overhead: lower maxMemory, or unset it to derive it from the limit (",
            derived_max_memory_formula!(),
            ")"
        ),
        field_path: Some(".maxMemory"),
        required: false,
    },
    CelRule {
        rule: concat!(
            "has(self.maxMemory) || \
             !(has(self.resources) && has(self.resources.limits) && 'memory' in self.resources.limits && \
             isQuantity(string(self.resources.limits['memory']))) || \
             quantity(string(self.resources.limits['memory'])).compareTo(quantity('",
            min_derived_memory_limit!(),
            "')) >= 0"
        ),
        message: concat!(
            "resources.limits.memory must be at least ",
            min_derived_memory_limit!(),
            " when maxMemory is derived from it (",
            derived_max_memory_formula!(),
            "): raise the limit or set maxMemory"
        ),
        field_path: Some(".resources"),
        required: false,
    },
    CelRule {
        rule: "!has(self.hugepages) || !isQuantity(string(self.hugepages.amount)) || \
               (has(self.resources) && has(self.resources.limits) && 'memory' in self.resources.limits && \
               isQuantity(string(self.resources.limits['memory'])) && \
               quantity(string(self.hugepages.amount)).compareTo(quantity(string(self.resources.limits['memory']))) <= 0)",
        message: "hugepages.amount must fit inside resources.limits.memory (hugepage-backed arenas are part of \
                  the node's memory budget): set resources.limits.memory to at least hugepages.amount",
        field_path: Some(".hugepages.amount"),
        required: false,
    },
    CelRule {
        rule: "!has(self.durability) || self.durability.mode == 'none' || has(self.storage)",
        message: "durability.mode write-back, periodic and sync keep data on disk: set storage.size \
                  (e.g. \"10Gi\"), or use durability.mode none",
        field_path: Some(".storage"),
        required: true,
    },
    // The numbers are DEFAULT_TLS_PORT, DEFAULT_PORT and the cluster port (resources::DIRECT_PORT);
    // a test holds them to those constants.
    CelRule {
        rule: "!has(self.tls) || !has(self.tls.allowPlaintext) || !self.tls.allowPlaintext || \
               ((has(self.tls.port) ? self.tls.port : 6390) != \
               (has(self.service) && has(self.service.port) ? self.service.port : 6379) && \
               ((has(self.cluster) && has(self.cluster.enabled) && !self.cluster.enabled) || \
               (has(self.tls.port) ? self.tls.port : 6390) != 6380))",
        message: "tls.port (default 6390), the Service's TLS port beside the plain one, must differ from \
                  service.port and, in cluster mode, from 6380 (the cluster port): set tls.port to another port",
        field_path: Some(".tls.port"),
        required: false,
    },
];

/// Rules on `spec.storage`.
pub const STORAGE_RULES: &[CelRule] = &[
    CelRule {
        rule: "isQuantity(string(self.size)) && quantity(string(self.size)).isGreaterThan(quantity('0'))",
        message: "storage.size must be a positive quantity such as \"10Gi\"",
        field_path: Some(".size"),
        required: false,
    },
    CelRule {
        rule: "!has(self.diskBudget) || \
               (isQuantity(string(self.diskBudget)) && quantity(string(self.diskBudget)).isGreaterThan(quantity('0')))",
        message: "storage.diskBudget must be a positive quantity such as \"8Gi\"",
        field_path: Some(".diskBudget"),
        required: false,
    },
    CelRule {
        rule: "!has(self.diskBudget) || !isQuantity(string(self.diskBudget)) || !isQuantity(string(self.size)) || \
               quantity(string(self.diskBudget)).compareTo(quantity(string(self.size))) <= 0",
        message: "storage.diskBudget must not exceed storage.size (the disk tier lives on the pod's volume): \
                  lower diskBudget or raise size",
        field_path: Some(".diskBudget"),
        required: false,
    },
];

/// Rules on `spec.durability`.
pub const DURABILITY_RULES: &[CelRule] = &[CelRule {
    rule: "!has(self.fsyncInterval) || self.mode == 'periodic'",
    message: "durability.fsyncInterval applies only to mode periodic: remove fsyncInterval or set mode: periodic",
    field_path: Some(".fsyncInterval"),
    required: false,
}];

/// Rules on `spec.hugepages`.
pub const HUGEPAGES_RULES: &[CelRule] = &[
    CelRule {
        rule: "isQuantity(string(self.amount)) && quantity(string(self.amount)).isGreaterThan(quantity('0'))",
        message: "hugepages.amount must be a positive quantity such as \"1Gi\"",
        field_path: Some(".amount"),
        required: false,
    },
    CelRule {
        rule: "!isQuantity(string(self.amount)) || !quantity(string(self.amount)).isInteger() || \
               quantity(string(self.amount)).asInteger() % (self.pageSize == '1Gi' ? 1073741824 : 2097152) == 0",
        message: "hugepages.amount must be a whole number of pages: a multiple of hugepages.pageSize",
        field_path: Some(".amount"),
        required: false,
    },
];

fn spec_rules(schema: &mut Schema) {
    attach(schema, SPEC_RULES);
}

fn storage_rules(schema: &mut Schema) {
    attach(schema, STORAGE_RULES);
}

fn durability_rules(schema: &mut Schema) {
    attach(schema, DURABILITY_RULES);
}

fn hugepages_rules(schema: &mut Schema) {
    attach(schema, HUGEPAGES_RULES);
}
