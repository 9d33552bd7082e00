//! CLIENT PAUSE / UNPAUSE: holding back clients' commands, on every worker.
//!
//! The pause is one mode and one end time; a command that must wait (all
//! of them in ALL mode; writes and may-replicate commands in WRITE mode)
//! does not run: the connection awaits the end of the pause through the
//! pending path and then runs it again from the start, so the commands of
//! paused clients run in the order they come back. Workers only read one
//! relaxed byte per command while no pause was ever set. Which commands a
//! WRITE pause holds back is the command pipeline's to say (its Pause gate).

use super::client::ClientInfo;
use crate::store::PendingRead;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU8, AtomicU64};
use tokio::sync::Notify;

/// What a pause holds back.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum PauseMode {
    Off = 0,
    /// Commands that write or may replicate.
    Write = 1,
    All = 2,
}

#[derive(Default)]
pub struct ClientPause {
    mode: AtomicU8,
    /// Unix ms the pause ends at.
    end_ms: AtomicU64,
    /// Wakes paused clients at CLIENT UNPAUSE.
    wake: Notify,
}

impl ClientPause {
    /// The mode in force at `now_ms`.
    #[inline]
    pub fn mode(&self, now_ms: u64) -> PauseMode {
        match self.mode.load(Relaxed) {
            0 => PauseMode::Off,
            _ if now_ms >= self.end_ms.load(Relaxed) => PauseMode::Off,
            1 => PauseMode::Write,
            _ => PauseMode::All,
        }
    }

    /// CLIENT PAUSE: as Redis, the stricter mode and the later end win
    /// while a pause is in force.
    pub fn pause(&self, end_ms: u64, mode: PauseMode, now_ms: u64) {
        let current = self.mode(now_ms);
        if current == PauseMode::Off {
            self.end_ms.store(end_ms, Relaxed);
            self.mode.store(mode as u8, Relaxed);
            return;
        }
        self.end_ms.fetch_max(end_ms, Relaxed);
        self.mode.fetch_max(mode as u8, Relaxed);
    }

    /// When the pause in force ends (unix ms).
    pub fn end_ms(&self) -> u64 {
        self.end_ms.load(Relaxed)
    }

    /// CLIENT UNPAUSE: paused clients go on.
    pub fn unpause(&self) {
        self.mode.store(0, Relaxed);
        self.end_ms.store(0, Relaxed);
        self.wake.notify_waiters();
    }
}

/// Waits until the pause ends (or is lifted), showing the client as
/// blocked meanwhile, as Redis does.
pub fn wait_for_unpause(pause: Arc<ClientPause>, info: Arc<ClientInfo>) -> PendingRead {
    info.blocked.store(true, Relaxed);
    Box::pin(async move {
        loop {
            let woken = pause.wake.notified();
            let now = crate::store::now_ms();
            if pause.mode(now) == PauseMode::Off {
                break;
            }
            let left = pause.end_ms.load(Relaxed).saturating_sub(now);
            tokio::select! {
                _ = woken => {}
                _ = tokio::time::sleep(std::time::Duration::from_millis(left)) => {}
            }
        }
        info.blocked.store(false, Relaxed);
    })
}
