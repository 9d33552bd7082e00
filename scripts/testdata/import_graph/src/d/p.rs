use super::s::S;
use super::Base;

pub struct P(pub S, pub Base);
