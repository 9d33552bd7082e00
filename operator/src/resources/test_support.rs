//! A `CacheCluster` as the API server hands it to the controller, for the builder tests.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Value, json};

use crate::api::CacheCluster;

pub const NAME: &str = "cache";
pub const NAMESPACE: &str = "shop";
pub const UID: &str = "8d1c6a3e-0b59-4c1e-9f0e-2f6f3c5a7b11";

/// A CacheCluster `shop/cache` with the given spec (as JSON, defaults filled in by serde).
pub fn cluster(spec: Value) -> CacheCluster {
    serde_json::from_value(json!({
        "apiVersion": "strata.dev/v1alpha1",
        "kind": "CacheCluster",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "uid": UID, "generation": 1},
        "spec": spec,
    }))
    .expect("a valid CacheCluster")
}

pub fn quantity(text: &str) -> Quantity {
    Quantity(text.to_owned())
}
