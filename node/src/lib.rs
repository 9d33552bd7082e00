//! Strata cache node: a Redis-protocol server that uses every core.
//!
//! Request path, one direction only:
//! listener → worker thread → connection → RESP parser → command table →
//! keyspace → reply buffer → socket.

#![deny(unsafe_code)]

pub mod base;
pub mod cluster;
pub mod commands;
pub mod config;
pub mod durability;
pub mod memory;
pub mod metrics;
pub mod policy;
pub mod protocol;
pub mod server;
pub mod session;
pub mod store;
#[allow(unsafe_code)]
pub mod sys;
pub mod tier;
