//! Clients and what they share across connections: the registry of
//! connected clients (CLIENT LIST, KILL), pub/sub subscriptions and ACL
//! users, CLIENT PAUSE.

pub mod acl;
pub mod client;
pub mod monitor;
pub mod notify;
pub mod pause;
pub mod pubsub;
pub mod tracking;
