// A name the parent mod.rs only re-exports is an edge to the file that
// defines it (p.rs); the parent's own item (Base) is none.
use super::{Base, P};

pub fn wrap(p: P) -> (P, Base) {
    (p, Base)
}
