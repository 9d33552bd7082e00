//! The Strata Kubernetes operator.
//!
//! - [`api`]: the `CacheCluster` API (`strata.dev/v1alpha1`) and its CRD ([`crd_yaml`], printed
//!   by the `crdgen` binary and committed as `crds/strata.dev_cacheclusters.yaml`);
//! - [`resources`]: pure builders from a spec to the desired Kubernetes objects;
//! - [`controller`]: applies them, paces rollouts, writes status and Events;
//! - [`topology`]: the cluster topology (node ids, slots) the operator pushes to the nodes;
//! - [`leader`], [`http`], [`metrics`], [`process`]: the `strata-operator` process around it.

pub mod api;
pub mod controller;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod process;
pub mod resources;
pub mod topology;

/// The integration tests' throwaway PKI (`openssl`), for the unit tests of TLS too.
#[cfg(test)]
#[path = "../tests/support/pki.rs"]
mod test_pki;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// Where the generated CRD is committed, relative to the workspace root.
pub const CRD_PATH: &str = "crds/strata.dev_cacheclusters.yaml";

/// The command that regenerates [`CRD_PATH`] (run from the workspace root).
pub const CRD_REGEN_COMMAND: &str = "cargo run -p strata-operator --bin crdgen > crds/strata.dev_cacheclusters.yaml";

/// The `CacheCluster` CustomResourceDefinition.
pub fn crd() -> CustomResourceDefinition {
    api::CacheCluster::crd()
}

/// The CRD as YAML, exactly as committed in [`CRD_PATH`].
pub fn crd_yaml() -> String {
    // Serializing a CRD (plain strings, maps and numbers) cannot fail.
    let mut yaml = serde_saphyr::to_string(&crd()).expect("the CRD serializes to YAML");
    if !yaml.ends_with('\n') {
        yaml.push('\n');
    }
    yaml
}
