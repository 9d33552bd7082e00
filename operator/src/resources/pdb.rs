//! The PodDisruptionBudget: at most one node pod down for voluntary disruptions.

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{Owner, selector_labels};

/// `<name>`: node drains and the operator's own rollout (through the Eviction API) take one pod
/// at a time, so only one shard is cold at once.
pub(super) fn pod_disruption_budget(owner: &Owner) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: owner.metadata(owner.name.clone()),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector { match_labels: Some(selector_labels(&owner.name)), ..Default::default() }),
            // A crashlooping pod must not block the eviction that rolls out its fix.
            unhealthy_pod_eviction_policy: Some("AlwaysAllow".to_owned()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resources::test_support::{NAME, cluster};

    #[test]
    fn one_pod_at_a_time_and_unhealthy_pods_never_block() {
        let pdb = pod_disruption_budget(&Owner::of(&cluster(json!({"replicas": 5}))).unwrap());
        assert_eq!(pdb.metadata.name.as_deref(), Some(NAME));
        let spec = pdb.spec.unwrap();
        assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)));
        assert_eq!(spec.min_available, None, "a PDB takes one of the two");
        assert_eq!(spec.selector.unwrap().match_labels, Some(selector_labels(NAME)));
        assert_eq!(spec.unhealthy_pod_eviction_policy.as_deref(), Some("AlwaysAllow"));
    }
}
