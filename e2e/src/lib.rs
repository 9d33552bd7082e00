//! Strata's end-to-end harness: a real cluster chosen by `e2e/cluster.sh` (an existing one, kind,
//! or a local process cluster), reached through the kubeconfig that script writes.
//!
//! - [`client`]: writes and verifies keys over the Redis protocol (used in-cluster by the
//!   `e2e-client` image and from the test through a port-forward);
//! - [`cluster`]: kubectl/helm runners, port-forwards, waits, and failure diagnostics;
//! - [`prometheus`]: a real Prometheus on the host scraping the cluster's pods, and the check of
//!   every dashboard query and alert rule against it;
//! - [`util`]: running commands, polling, plain HTTP GETs (shared with the operator's tests).

pub mod client;
pub mod cluster;
pub mod prometheus;
pub mod util;
