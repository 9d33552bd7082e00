pub mod deep;
