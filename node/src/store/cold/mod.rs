//! The keyspace's side of the disk tier: values, and keys, that left RAM
//! for the cold log (`tier::cold_log`), and how commands wait for them.
//!
//! - `disk`: the tier as the keyspace sees it — the [`ColdTier`] trait the
//!   tier layer implements, a record read back, the counters, and one read
//!   of a cold value shared by every command waiting for it.
//! - `values`: cold values — demoted at the memory limit, read once for
//!   all waiters, promoted back under the partition lock (never over a
//!   newer write); the encoding of a cold record's value.
//! - `forget`: forgotten keys — cold keys whose key leaves RAM too, found
//!   again by their hash bits and a read of their record.
//! - `keyless`: `KeylessTable`, the index of forgotten keys, 16 bytes a key.
//! - `recall`: a partition's forgotten keys read back in one batch, off its
//!   lock, before a whole-keyspace command (SCAN) walks it.
//! - `pending`: the pending path — a command whose keys are not ready in
//!   RAM gets a future to await, and runs again from the start; and
//!   read-ahead, the reads of requests further along a pipeline started
//!   while the first waits (`Keyspace::read_ahead`, held in a `ReadAhead`).
//! - `wake`: completions wake each worker once per batch (`WakeInbox`).
//! - `served`: values read for one read-only command and not kept in RAM
//!   (`ServedOnce`), unless the key was read from disk lately (`SeenOnce`).

pub mod disk;
mod forget;
pub mod keyless;
pub mod pending;
pub(super) mod recall;
pub mod served;
#[cfg(test)]
pub(in crate::store) mod test_tier;
pub mod values;
pub mod wake;

pub use disk::{ColdRecord, ColdStats, ColdTier, Relocated};
pub use pending::{PendingRead, READ_AHEAD_KEYS, ReadAhead, read_ahead_limit};
pub use served::ServedOnce;
pub use wake::WakeInbox;
