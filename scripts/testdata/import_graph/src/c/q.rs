use crate::b::B;

pub struct Q(pub B);
