// super::super reaches a sibling of the parent; `as` renames a module.
use super::super::x::X;
use crate::d as dd;

pub fn both() -> (X, dd::s::S) {
    todo!()
}
