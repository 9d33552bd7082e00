//! Prints the `CacheCluster` CustomResourceDefinition as YAML on stdout.
//!
//! `cargo run -p strata-operator --bin crdgen > crds/strata.dev_cacheclusters.yaml`

use std::io::Write;

fn main() -> std::io::Result<()> {
    std::io::stdout().lock().write_all(strata_operator::crd_yaml().as_bytes())
}
