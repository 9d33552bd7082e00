//! Clients and what they share across connections: the registry of
//! connected clients (CLIENT LIST, KILL) and pub/sub subscriptions.

pub mod client;
pub mod pubsub;
pub mod tracking;
