//! The floor every other module stands on: pure functions with no I/O,
//! no `unsafe` and no dependency on the rest of the node. (Clocks are read
//! through `sys`: reading them is a system call.)

pub mod geohash;
pub mod glob;
pub mod hash;
pub mod long_double;
pub mod number;
pub mod random;
pub mod sha256;
pub mod slot;
pub mod strtod;
pub mod time;

pub use glob::glob_match;
pub use number::{eq_ic, parse_f64, parse_i64, parse_scan_cursor};
