//! Circle x <-> y; `self::` in a mod.rs and `pub use` are edges.
mod x;
mod y;
pub mod inner;

pub use self::x::X;

pub struct Shared;
