//! Pub/sub subscriptions: which clients listen on which channels and
//! patterns. Commands (SUBSCRIBE, PUBLISH, ...) use it; a closing
//! connection leaves it through `unsubscribe_all`.

use super::client::{Client, ClientInfo};
use crate::base::glob_match;
use crate::metrics::WorkerMetrics;
use crate::protocol::Reply;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;

pub type Subscribers = HashMap<u64, Arc<ClientInfo>>;
pub type SubscriptionMap = RwLock<HashMap<Vec<u8>, Subscribers>>;

/// Channel and pattern subscriptions of every client, and how messages
/// reach them.
#[derive(Default)]
pub struct Hub {
    pub channels: SubscriptionMap,
    pub patterns: SubscriptionMap,
    /// Sharded channels (SSUBSCRIBE).
    pub shard_channels: SubscriptionMap,
    /// Bytes a subscriber may have queued before it is disconnected
    /// (`client-output-buffer-limit pubsub`; 0 = no limit), shared with the
    /// configuration.
    limit: Arc<AtomicUsize>,
    /// Each worker's counters (disconnects over the limit are counted on
    /// the subscriber's worker).
    workers: Vec<Arc<WorkerMetrics>>,
}

/// A message encoded for RESP2 and RESP3 subscribers.
pub struct Encoded {
    pub resp2: Vec<u8>,
    pub resp3: Vec<u8>,
}

/// Encodes a pub/sub message (`message`, `pmessage`, `smessage` and its parts).
pub fn encode(parts: &[&[u8]]) -> Encoded {
    let build = |resp3: bool| {
        let mut r = Reply::new(resp3);
        r.buf = Vec::with_capacity(parts.iter().map(|p| p.len() + 16).sum::<usize>() + 8);
        r.push(parts.len());
        for p in parts {
            r.bulk(p);
        }
        r.buf
    };
    Encoded { resp2: build(false), resp3: build(true) }
}

impl Hub {
    pub fn new(limit: Arc<AtomicUsize>, workers: Vec<Arc<WorkerMetrics>>) -> Self {
        Hub { limit, workers, ..Default::default() }
    }

    /// Queues a message for a subscriber, disconnecting it if it fell too
    /// far behind. A message for `me` (the publishing client, with its
    /// reply) is written into that reply instead: Redis writes it before
    /// the command's own reply.
    pub fn deliver(&self, sub: &ClientInfo, msg: &Encoded, me: Option<(u64, &mut Reply)>) {
        let bytes = if sub.resp.load(Relaxed) == 3 { &msg.resp3 } else { &msg.resp2 };
        if let Some((id, out)) = me
            && id == sub.id
        {
            out.raw(bytes);
            return;
        }
        let limit = self.limit.load(Relaxed);
        let pending = sub.pending_push.fetch_add(bytes.len(), Relaxed) + bytes.len();
        if limit > 0 && pending > limit {
            if !sub.killed.load(Relaxed) {
                tracing::warn!(client = sub.id, addr = %sub.addr, "closing pub/sub client over its output buffer limit");
                // Written from any publisher's thread, hence a real atomic add.
                if let Some(w) = self.workers.get(sub.worker.load(Relaxed)) {
                    w.server.output_buffer_disconnects.fetch_add(1, Relaxed);
                }
                sub.kill();
            }
            return;
        }
        if !sub.push(bytes.clone()) {
            sub.pending_push.fetch_sub(bytes.len(), Relaxed);
        }
    }

    /// PUBLISH: `message` to the subscribers of `channel` and of the
    /// patterns matching it; returns how many received it.
    pub fn publish(&self, channel: &[u8], message: &[u8], mut me: Option<(u64, &mut Reply)>) -> usize {
        let mut receivers = 0;
        {
            let channels = self.channels.read();
            if let Some(subs) = channels.get(channel) {
                let msg = encode(&[b"message", channel, message]);
                for sub in subs.values() {
                    self.deliver(sub, &msg, me.as_mut().map(|(id, out)| (*id, &mut **out)));
                    receivers += 1;
                }
            }
        }
        let patterns = self.patterns.read();
        for (pattern, subs) in patterns.iter() {
            if !glob_match(pattern, channel, false) {
                continue;
            }
            let msg = encode(&[b"pmessage", pattern, channel, message]);
            for sub in subs.values() {
                self.deliver(sub, &msg, me.as_mut().map(|(id, out)| (*id, &mut **out)));
                receivers += 1;
            }
        }
        receivers
    }
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
