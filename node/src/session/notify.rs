//! Keyspace notifications (`notify-keyspace-events`): every event the
//! store or a command reports is published as Redis does, on
//! `__keyspace@<db>__:<key>` with the event as message (`K`) and on
//! `__keyevent@<db>__:<event>` with the key as message (`E`), from the
//! thread that made the change, in the order the changes were made.

use super::pubsub::Hub;
use crate::config::keyspace_events::{KEYEVENT, KEYSPACE};
use crate::store::KeyEvents;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::Relaxed;

pub struct Notifier {
    hub: Arc<Hub>,
    /// `notify-keyspace-events`, shared with the configuration.
    flags: Arc<AtomicU32>,
}

impl Notifier {
    pub fn new(hub: Arc<Hub>, flags: Arc<AtomicU32>) -> Self {
        Notifier { hub, flags }
    }
}

impl KeyEvents for Notifier {
    fn notify(&self, class: u32, event: &str, db: usize, key: &[u8]) {
        let flags = self.flags.load(Relaxed);
        if flags & class == 0 {
            return;
        }
        if flags & KEYSPACE != 0 {
            let mut channel = format!("__keyspace@{db}__:").into_bytes();
            channel.extend_from_slice(key);
            self.hub.publish(&channel, event.as_bytes(), None);
        }
        if flags & KEYEVENT != 0 {
            let channel = format!("__keyevent@{db}__:{event}");
            self.hub.publish(channel.as_bytes(), key, None);
        }
    }
}
