//! Keyspace notifications from the store: the events that happen below the
//! commands — a key created (`new`), expired (`expired`, lazily or by the
//! active expiry) or evicted (`evicted`) — and the commands' own events,
//! all handed to one `KeyEvents` hook the session layer installs (it
//! publishes them through pub/sub). Whether anything is wanted is one
//! relaxed load of the shared `notify-keyspace-events` flags, so with
//! notifications off (the default) the store pays nothing more.

use super::Keyspace;
use crate::config::keyspace_events as class;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::Relaxed;

/// Who publishes keyspace events (defined here, implemented by the
/// session layer). Called on the thread that made the change, possibly
/// under partition locks: it must not lock partitions.
pub trait KeyEvents: Send + Sync {
    /// `event` of class `class` happened to `key` in database `db`.
    fn notify(&self, class: u32, event: &str, db: usize, key: &[u8]);
}

/// The keyspace's side: the flags CONFIG SET changes and the hook.
pub(super) struct EventsState {
    flags: Arc<AtomicU32>,
    hook: Option<Arc<dyn KeyEvents>>,
}

impl Default for EventsState {
    fn default() -> Self {
        EventsState { flags: Arc::new(AtomicU32::new(0)), hook: None }
    }
}

impl Keyspace {
    /// Publishes events through `hook` whenever `flags` (the
    /// `notify-keyspace-events` setting, shared) asks for them. At start-up.
    pub fn set_key_events(&mut self, flags: Arc<AtomicU32>, hook: Arc<dyn KeyEvents>) {
        self.events = EventsState { flags, hook: Some(hook) };
    }

    /// Reports `event` (of `class`) on `key` when that class is enabled.
    #[inline]
    pub fn key_event(&self, class: u32, event: &str, db: usize, key: &[u8]) {
        if self.events.flags.load(Relaxed) & class != 0 {
            self.publish_event(class, event, db, key);
        }
    }

    #[cold]
    fn publish_event(&self, class: u32, event: &str, db: usize, key: &[u8]) {
        if let Some(hook) = &self.events.hook {
            hook.notify(class, event, db, key);
        }
    }

    /// Whether events of `class` are published now.
    #[inline]
    pub fn key_events_on(&self, class: u32) -> bool {
        self.events.flags.load(Relaxed) & class != 0
    }
}

/// The event a removal reports, if it is one Redis announces.
pub(super) fn removal_event(kind: super::ChangeKind) -> Option<(u32, &'static str)> {
    match kind {
        super::ChangeKind::Expired => Some((class::EXPIRED, "expired")),
        super::ChangeKind::Evicted => Some((class::EVICTED, "evicted")),
        _ => None,
    }
}

impl super::KeyAccess<'_> {
    /// `Keyspace::key_event` for `key` in the database this access works in.
    #[inline]
    pub fn notify(&self, class: u32, event: &str, key: &[u8]) {
        self.ks.key_event(class, event, self.db, key);
    }
}
