pub mod q;

pub struct Base;
