//! Fixture crate for `import_graph.py --self-test` (never compiled).
//! Declaring a module is not a use: no edge from here.
pub mod a;
pub mod b;
pub mod c;
pub mod d;
