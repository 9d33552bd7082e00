use super::y::{self, Y};
// An item of the parent mod.rs: no edge (with --strict, one to a/mod.rs).
use super::Shared;

pub struct X(pub Y, pub Shared);

pub fn build() -> X {
    X(y::Y, Shared)
}
