//! Completions of disk reads return to a worker in batches: a command
//! waiting for a cold read registers its waker with the inbox of the worker
//! it runs on, and the thread that completes reads (the I/O engine's) puts
//! wakers there. Only the first waker into an empty inbox wakes the worker
//! (one cross-thread wake-up, an eventfd write); the worker's inbox task
//! then wakes every waiting connection on its own thread, where a wake is a
//! push on its run queue. Without an inbox (a thread that is not a worker),
//! or on the waiter's own worker (a read it completed from its own ring), a
//! waker is woken directly.

use parking_lot::Mutex;
use std::cell::RefCell;
use std::sync::Arc;
use std::task::Waker;
use tokio::sync::Notify;

/// One worker's wakers to wake.
#[derive(Default)]
pub struct WakeInbox {
    wakers: Mutex<Vec<Waker>>,
    kick: Notify,
}

thread_local! {
    static INBOX: RefCell<Option<Arc<WakeInbox>>> = const { RefCell::new(None) };
}

impl WakeInbox {
    /// Makes `inbox` this thread's: wakers registered here go through it.
    /// The thread must run [`WakeInbox::run`] as a task.
    pub fn install(inbox: Arc<WakeInbox>) {
        INBOX.with_borrow_mut(|i| *i = Some(inbox));
    }

    /// This thread's inbox, if it has one.
    pub(super) fn current() -> Option<Arc<WakeInbox>> {
        INBOX.with_borrow(|i| i.clone())
    }

    /// Queues `waker`; wakes the worker if nothing was queued.
    pub(super) fn push(&self, waker: Waker) {
        let first = {
            let mut w = self.wakers.lock();
            w.push(waker);
            w.len() == 1
        };
        if first {
            self.kick.notify_one();
        }
    }

    /// The worker's task: wakes what completions queued, batch by batch.
    pub async fn run(self: Arc<Self>) {
        loop {
            self.kick.notified().await;
            let wakers = std::mem::take(&mut *self.wakers.lock());
            for w in wakers {
                w.wake();
            }
        }
    }
}

/// Wakers waiting for one event, each with the inbox of its worker.
#[derive(Default)]
pub(super) struct Waiters(Vec<(Waker, Option<Arc<WakeInbox>>)>);

impl Waiters {
    /// Registers `waker` (once: a future polled again keeps one entry).
    pub(super) fn register(&mut self, waker: &Waker) {
        if !self.0.iter().any(|(w, _)| w.will_wake(waker)) {
            self.0.push((waker.clone(), WakeInbox::current()));
        }
    }

    /// Wakes every waiter, through its worker's inbox unless that worker
    /// is this thread (a read it completed from its own ring), where a wake
    /// is already just a push on its run queue.
    pub(super) fn wake_all(self) {
        let here = WakeInbox::current();
        for (w, inbox) in self.0 {
            match inbox {
                Some(inbox) if !here.as_ref().is_some_and(|h| Arc::ptr_eq(h, &inbox)) => inbox.push(w),
                _ => w.wake(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn wakers_queued_in_an_inbox_are_woken_by_its_task_in_one_batch() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let inbox = Arc::new(WakeInbox::default());
        let counts: Vec<Arc<Count>> = (0..5).map(|_| Arc::new(Count(AtomicUsize::new(0)))).collect();
        // Queued from another thread, as the I/O engine's does.
        let (i, c) = (inbox.clone(), counts.clone());
        std::thread::spawn(move || {
            let mut waiters = Waiters::default();
            for c in &c {
                waiters.0.push((Waker::from(c.clone()), Some(i.clone())));
            }
            waiters.wake_all();
        })
        .join()
        .unwrap();
        assert!(counts.iter().all(|c| c.0.load(Ordering::Relaxed) == 0), "nothing woken before the worker's task runs");
        rt.block_on(async {
            let task = tokio::spawn(inbox.clone().run());
            tokio::task::yield_now().await;
            tokio::task::yield_now().await;
            task.abort();
        });
        assert!(counts.iter().all(|c| c.0.load(Ordering::Relaxed) == 1), "each woken once");
    }

    #[test]
    fn a_waker_registered_twice_is_woken_once_and_without_an_inbox_at_once() {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        let w = Waker::from(c.clone());
        let mut waiters = Waiters::default();
        waiters.register(&w);
        waiters.register(&w);
        assert_eq!(waiters.0.len(), 1);
        waiters.wake_all();
        assert_eq!(c.0.load(Ordering::Relaxed), 1);
    }
}
