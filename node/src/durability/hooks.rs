//! Test hooks: environment variables that break or slow the durability
//! machinery on purpose, so that the crash tests (tests/durability.rs,
//! tests/power_loss.rs, tests/log_buffers.rs) can show they catch a node
//! that breaks its promise.
//!
//! They exist only with the `test-hooks` feature, which only test builds
//! enable (node/Cargo.toml). Without it every hook is inert and no
//! `STRATA_TEST_*` name is in the binary: a release node never reads them,
//! so a stray variable cannot void `sync`'s promise or abort the process
//! (`STRATA_*` is also the prefix of every real parameter's variable).

use std::time::Duration;

/// `STRATA_TEST_ACK_BEFORE_FSYNC=1`: `sync` replies do not wait for the
/// fsync (the deliberately broken build the sync crash tests must fail on).
#[cfg(feature = "test-hooks")]
pub fn ack_before_fsync() -> bool {
    let on = std::env::var("STRATA_TEST_ACK_BEFORE_FSYNC").is_ok_and(|v| v == "1");
    if on {
        // The broken run's harness checks this line: a binary without the
        // hooks would keep the promise and make the run pass.
        tracing::warn!("test hook STRATA_TEST_ACK_BEFORE_FSYNC=1: sync replies do not wait for the fsync");
    }
    on
}

#[cfg(not(feature = "test-hooks"))]
pub fn ack_before_fsync() -> bool {
    false
}

/// `STRATA_TEST_FLUSH_DELAY_MS`: each flush first sleeps this long (a slow
/// disk for the real-binary back-pressure tests).
#[cfg(feature = "test-hooks")]
pub fn flush_delay() -> Duration {
    millis_from_env("STRATA_TEST_FLUSH_DELAY_MS")
}

/// The milliseconds in the variable `name` (none: zero).
#[cfg(feature = "test-hooks")]
fn millis_from_env(name: &str) -> Duration {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).map_or(Duration::ZERO, Duration::from_millis)
}

#[cfg(not(feature = "test-hooks"))]
pub fn flush_delay() -> Duration {
    Duration::ZERO
}

/// `STRATA_TEST_REPLAY_DELAY_MS`: the replay at start-up first sleeps this
/// long (a node that answers -LOADING for a while, for the tests of what
/// its clients and the other nodes then do).
#[cfg(feature = "test-hooks")]
pub fn replay_delay() -> Duration {
    millis_from_env("STRATA_TEST_REPLAY_DELAY_MS")
}

#[cfg(not(feature = "test-hooks"))]
pub fn replay_delay() -> Duration {
    Duration::ZERO
}

/// `STRATA_TEST_CRASH_AT=<name>`: aborts the process at the crash point
/// `name`, to prove a crash there (e.g. in the middle of compaction) loses
/// nothing.
#[cfg(feature = "test-hooks")]
pub fn crash_point(name: &str) {
    if std::env::var("STRATA_TEST_CRASH_AT").is_ok_and(|v| v == name) {
        tracing::warn!("test crash point {name}: aborting");
        std::process::abort();
    }
}

#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub fn crash_point(_name: &str) {}

/// `STRATA_TEST_MIGRATE_DELETE_EARLY=1`: a slot migration's source deletes
/// each key once the target has it, before the commit (the deliberately
/// broken build the migration crash tests must fail on).
#[cfg(feature = "test-hooks")]
pub fn migrate_delete_early() -> bool {
    let on = std::env::var("STRATA_TEST_MIGRATE_DELETE_EARLY").is_ok_and(|v| v == "1");
    if on {
        tracing::warn!("test hook STRATA_TEST_MIGRATE_DELETE_EARLY=1: the source deletes keys before the commit");
    }
    on
}

#[cfg(not(feature = "test-hooks"))]
pub fn migrate_delete_early() -> bool {
    false
}

/// `STRATA_TEST_MIGRATE_BATCH_DELAY_MS`: a migration's source sleeps this
/// long after each batch it sends (a long snapshot to crash in).
#[cfg(feature = "test-hooks")]
pub fn migrate_batch_delay() -> Duration {
    std::env::var("STRATA_TEST_MIGRATE_BATCH_DELAY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(Duration::ZERO, Duration::from_millis)
}

#[cfg(not(feature = "test-hooks"))]
pub fn migrate_batch_delay() -> Duration {
    Duration::ZERO
}
