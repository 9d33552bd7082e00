pub struct Y;

/// A path in code, not in a use, closes the circle with x.rs.
pub fn make() -> super::x::X {
    super::x::build()
}
