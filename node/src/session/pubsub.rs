//! Pub/sub subscriptions: which clients listen on which channels and
//! patterns. Commands (SUBSCRIBE, PUBLISH, ...) use it; a closing
//! connection leaves it through `unsubscribe_all`.

use super::client::{Client, ClientInfo};
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

pub type Subscribers = HashMap<u64, Arc<ClientInfo>>;
pub type SubscriptionMap = RwLock<HashMap<Vec<u8>, Subscribers>>;

/// Channel and pattern subscriptions of every client.
#[derive(Default)]
pub struct Hub {
    pub channels: SubscriptionMap,
    pub patterns: SubscriptionMap,
    /// Sharded channels (SSUBSCRIBE).
    pub shard_channels: SubscriptionMap,
}

impl Hub {
    pub fn num_patterns(&self) -> usize {
        self.patterns.read().len()
    }

    pub fn num_channels(&self) -> usize {
        self.channels.read().len()
    }

    pub fn num_shard_channels(&self) -> usize {
        self.shard_channels.read().len()
    }
}

impl Hub {
    /// Takes client `id` off `name` in `map`, forgetting names nobody is on.
    pub fn remove(map: &SubscriptionMap, name: &[u8], id: u64) {
        let mut m = map.write();
        if let Some(subs) = m.get_mut(name) {
            subs.remove(&id);
            if subs.is_empty() {
                m.remove(name);
            }
        }
    }

    /// Drops all of a disconnecting (or RESET) client's subscriptions.
    pub fn unsubscribe_all(&self, client: &mut Client) {
        for ch in client.channels.drain() {
            Hub::remove(&self.channels, &ch, client.info.id);
        }
        for p in client.patterns.drain() {
            Hub::remove(&self.patterns, &p, client.info.id);
        }
        for ch in client.shard_channels.drain() {
            Hub::remove(&self.shard_channels, &ch, client.info.id);
        }
        set_counts(client);
    }
}

/// Publishes a client's subscription counts (CLIENT LIST, INFO).
pub fn set_counts(client: &Client) {
    client.info.subs.store(client.channels.len() as u32, Relaxed);
    client.info.psubs.store(client.patterns.len() as u32, Relaxed);
    client.info.ssubs.store(client.shard_channels.len() as u32, Relaxed);
}
