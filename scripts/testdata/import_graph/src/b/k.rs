use crate::c::{
    q::{self, Q},
    Base,
};

pub fn helper() -> (Q, Base) {
    (q::Q, Base)
}

/// Through another folder's re-export: an edge to d/p.rs, not d/mod.rs.
pub fn pick() -> crate::d::P {
    todo!()
}
