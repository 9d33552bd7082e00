//! The committed CRD must be exactly what `crdgen` prints for the current types.

use std::path::PathBuf;

use strata_operator::{CRD_PATH, CRD_REGEN_COMMAND, crd, crd_yaml};

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(CRD_PATH)
}

#[test]
fn committed_crd_is_fresh() {
    let path = committed_path();
    let committed = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}\ngenerate it from the workspace root with:\n\n    {CRD_REGEN_COMMAND}\n",
            path.display()
        )
    });
    let generated = crd_yaml();
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .map_or_else(|| committed.lines().count().min(generated.lines().count()) + 1, |i| i + 1);
        panic!(
            "{CRD_PATH} is stale: the CacheCluster API types changed (first difference at line {line}).\n\
             Regenerate it from the workspace root with:\n\n    {CRD_REGEN_COMMAND}\n"
        );
    }
}

/// Helm installs CRDs only from inside the chart, so the chart carries a copy.
#[test]
fn chart_crd_copy_is_identical() {
    let root = committed_path();
    let chart =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../charts/strata-operator/crds/strata.dev_cacheclusters.yaml");
    let (a, b) = (std::fs::read(&root).unwrap(), std::fs::read(&chart).unwrap());
    assert!(a == b, "{} differs from {CRD_PATH}: run `make crds`", chart.display());
}

/// The YAML reads back as the same object (nothing lost to quoting, folding or number formats).
#[test]
fn crd_yaml_round_trips() {
    let parsed: serde_json::Value = serde_saphyr::from_str(&crd_yaml()).expect("crdgen output parses as YAML");
    let expected = serde_json::to_value(crd()).unwrap();
    assert_eq!(parsed, expected);
}
