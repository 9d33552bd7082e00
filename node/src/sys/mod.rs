//! Every call into the operating system that needs `unsafe`: the rest of
//! the crate denies `unsafe_code`, so each such block is here, small, with
//! a SAFETY note saying why it holds.

pub mod aio;
pub mod alloc;
pub mod clock;
pub mod cpu;
pub mod file;
pub mod hugepages;
pub mod loop_signal;
pub mod process;
pub mod socket;
pub mod uring;
