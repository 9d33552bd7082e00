//! The floor every other module stands on: pure functions with no I/O and
//! no dependency on the rest of the node.

pub mod slot;
