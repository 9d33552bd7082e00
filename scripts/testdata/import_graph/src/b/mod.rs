//! Circle across folders: b/mod.rs -> b/k.rs -> c/q.rs -> b/mod.rs (an item of
//! another folder's mod.rs is an edge to that mod.rs).
pub mod k;

pub struct B;

pub fn run() {
    k::helper();
}
