//! No circle by default: p.rs uses an item of this mod.rs (not an edge) and
//! s.rs names p.rs only in comments, strings and test code.
mod p;
mod s;
mod t;

pub use p::P;

pub struct Base;
