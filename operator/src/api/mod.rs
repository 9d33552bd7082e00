//! The operator's API: `CacheCluster` in group `strata.dev`.
//!
//! `v1alpha1` is the only (and storage) version; its types are re-exported here so the rest of the
//! operator can write `api::CacheCluster`.

mod cel;
pub mod v1alpha1;

pub use cel::CelRule;
pub use v1alpha1::*;

#[cfg(test)]
mod tests;
