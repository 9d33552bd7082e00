//! The data command families: commands on keys and their values. Each sees
//! only its narrow context — its keys (`ctx.keys`), its client and the
//! configuration (`ctx.config()`) — never the node's shared state or the
//! server (`scripts/check-layers.sh` holds every file here to that).

pub mod bitmaps;
pub mod dump;
pub mod geo;
pub mod hashes;
pub mod hyperloglog;
pub mod keys;
pub mod lists;
pub mod sets;
pub mod sort;
pub mod streams;
pub mod strings;
pub mod typed;
pub mod zsets;
