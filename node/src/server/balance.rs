//! Adaptive worker activation: serve from as few worker threads as the load
//! needs, and spread out when one runs hot.
//!
//! Why: a worker that wakes for a handful of requests costs a context switch
//! and, on a machine whose cores are shared with clients or other pods,
//! preempts them. Redis stays single-threaded until its I/O threads pay off
//! for the same reason. Connections are owned by one worker, so activation
//! moves connections: a connection asked to leave hands its socket and state
//! to another worker between two batches of requests (never with a reply or
//! a blocked command in flight), and new connections go to active workers
//! only.
//!
//! Every worker samples its own thread CPU time each tick; worker 0
//! evaluates the samples every [`WINDOW_TICKS`] ticks and grows or shrinks
//! the active set with hysteresis. `--adaptive-threads no` (or CONFIG SET
//! adaptive-threads no) keeps every worker active: for dedicated, pinned
//! cores there is nothing to give back.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use tracing::info;

/// Ticks (100 ms each) per load evaluation.
pub const WINDOW_TICKS: u32 = 5;
/// A worker busier than this (CPU seconds per second) asks for help.
const GROW_ABOVE: f64 = 0.85;
/// After growing, aim for workers this busy.
const GROW_TARGET: f64 = 0.6;
/// Give a worker back when the rest would stay below this.
const SHRINK_BELOW: f64 = 0.5;
/// Windows to wait after a change before the next one, so the moved
/// connections show up in the samples first.
const COOLDOWN_WINDOWS: u32 = 2;
/// `shed` value asking every connection of a worker to leave.
const DRAIN: usize = usize::MAX;

/// One worker's load, as seen by the balancer.
#[derive(Default)]
pub struct WorkerLoad {
    /// Thread CPU time at the last tick, ns.
    cpu_ns: AtomicU64,
    /// Connections this worker owns.
    pub conns: AtomicUsize,
    /// Connections asked to leave: a count, or [`DRAIN`] for all of them.
    shed: AtomicUsize,
}

/// The active-worker set and the load samples behind it.
pub struct Balancer {
    adaptive: AtomicBool,
    /// Workers `0..active` take new connections.
    active: AtomicUsize,
    loads: Vec<WorkerLoad>,
    /// Connections moved between workers since start.
    pub migrations: AtomicU64,
    window: Mutex<Window>,
}

#[derive(Default)]
struct Window {
    started_ns: u64,
    cpu_at_start: Vec<u64>,
    cooldown: u32,
}

impl Balancer {
    pub fn new(threads: usize, adaptive: bool) -> Self {
        let threads = threads.max(1);
        Balancer {
            adaptive: AtomicBool::new(adaptive),
            active: AtomicUsize::new(if adaptive { 1 } else { threads }),
            loads: (0..threads).map(|_| WorkerLoad::default()).collect(),
            migrations: AtomicU64::new(0),
            window: Mutex::new(Window::default()),
        }
    }

    pub fn adaptive(&self) -> bool {
        self.adaptive.load(Relaxed)
    }

    /// Switches adaptation on or off. Off activates every worker at once
    /// (busy workers hand over a share of their connections); on lets the
    /// next evaluations shrink the set again.
    pub fn set_adaptive(&self, on: bool) {
        let mut w = self.window.lock();
        self.adaptive.store(on, Relaxed);
        let active = self.active();
        if !on && active < self.loads.len() {
            self.resize(active, self.loads.len(), &[]);
        }
        // Start a fresh window: samples taken under the old mode mean little.
        w.cpu_at_start.clear();
        w.cooldown = 0;
    }

    /// Workers currently taking connections.
    pub fn active(&self) -> usize {
        self.active.load(Relaxed)
    }

    pub fn load(&self, worker: usize) -> &WorkerLoad {
        &self.loads[worker]
    }

    /// Where a new connection goes: the active worker with the fewest.
    pub fn pick(&self) -> usize {
        self.least_loaded(None)
    }

    fn least_loaded(&self, except: Option<usize>) -> usize {
        let active = self.active().min(self.loads.len());
        (0..active).filter(|&w| Some(w) != except).min_by_key(|&w| self.loads[w].conns.load(Relaxed)).unwrap_or(0)
    }

    /// Called by a connection between batches: the worker it should move
    /// to, if its worker is shedding connections. One relaxed load when not.
    #[inline]
    pub fn should_leave(&self, worker: usize) -> Option<usize> {
        let load = &self.loads[worker];
        if load.shed.load(Relaxed) == 0 {
            return None;
        }
        self.leave_slow(worker)
    }

    #[cold]
    fn leave_slow(&self, worker: usize) -> Option<usize> {
        let load = &self.loads[worker];
        let draining = load.shed.load(Relaxed) == DRAIN;
        if !draining {
            // Claim one of the requested departures.
            load.shed.fetch_update(Relaxed, Relaxed, |s| if s == 0 || s == DRAIN { None } else { Some(s - 1) }).ok()?;
        }
        let target = self.least_loaded(Some(worker));
        if target == worker || (draining && worker < self.active()) {
            return None;
        }
        Some(target)
    }

    /// Bookkeeping for a connection that moved from one worker to another.
    pub fn moved(&self, from: usize, to: usize) {
        self.loads[from].conns.fetch_sub(1, Relaxed);
        self.loads[to].conns.fetch_add(1, Relaxed);
        self.migrations.fetch_add(1, Relaxed);
    }

    /// Sets the active workers by hand (DEBUG ACTIVE-THREADS): connections
    /// move as for an adaptive change. With adaptation on, the next
    /// evaluations may change the set again after the cool-down.
    pub fn set_active(&self, n: usize) {
        let mut w = self.window.lock();
        let n = n.clamp(1, self.loads.len());
        self.resize(self.active(), n, &[]);
        w.cooldown = COOLDOWN_WINDOWS;
    }

    /// Every worker, every tick: records its own CPU time. Worker 0 then
    /// evaluates the window when it is complete.
    pub fn tick(&self, worker: usize, tick_no: u32) {
        self.loads[worker].cpu_ns.store(thread_cpu_ns(), Relaxed);
        if worker == 0 && self.adaptive() && tick_no % WINDOW_TICKS == 0 {
            self.evaluate(crate::store::mono_ns());
        }
    }

    /// Grows or shrinks the active set from the CPU used since the last call.
    fn evaluate(&self, now_ns: u64) {
        let mut w = self.window.lock();
        let cpu: Vec<u64> = self.loads.iter().map(|l| l.cpu_ns.load(Relaxed)).collect();
        let elapsed = now_ns.saturating_sub(w.started_ns);
        let first = w.cpu_at_start.len() != cpu.len();
        let busy: Vec<f64> = if first || elapsed == 0 {
            vec![0.0; cpu.len()]
        } else {
            cpu.iter()
                .zip(&w.cpu_at_start)
                .map(|(now, then)| now.saturating_sub(*then) as f64 / elapsed as f64)
                .collect()
        };
        w.started_ns = now_ns;
        w.cpu_at_start = cpu;
        if first {
            return;
        }
        if w.cooldown > 0 {
            w.cooldown -= 1;
            return;
        }
        let active = self.active();
        if !self.adaptive() {
            return;
        }
        if let Some(next) = decide(&busy, active) {
            w.cooldown = COOLDOWN_WINDOWS;
            self.resize(active, next, &busy);
        }
    }

    fn resize(&self, from: usize, to: usize, busy: &[f64]) {
        let total: f64 = busy.iter().sum();
        self.active.store(to, Relaxed);
        if to == from {
            return;
        }
        if to > from {
            for load in &self.loads[from..to] {
                load.shed.store(0, Relaxed);
            }
            // Each active worker gives the newcomers their share.
            for load in &self.loads[..from] {
                let conns = load.conns.load(Relaxed);
                load.shed.store(conns * (to - from) / to, Relaxed);
            }
        } else {
            for load in &self.loads[..to] {
                load.shed.store(0, Relaxed);
            }
            for load in &self.loads[to..] {
                load.shed.store(DRAIN, Relaxed);
            }
        }
        info!(from, to, cpu = format!("{total:.2}"), "active worker threads changed");
    }
}

/// The new number of active workers, if it should change, given each
/// worker's CPU use (seconds per second) over the last window.
fn decide(busy: &[f64], active: usize) -> Option<usize> {
    let threads = busy.len();
    let total: f64 = busy.iter().sum();
    let hottest = busy[..active.min(threads)].iter().copied().fold(0.0, f64::max);
    if active < threads && hottest > GROW_ABOVE {
        let wanted = (total / GROW_TARGET).ceil() as usize;
        return Some(wanted.clamp(active + 1, threads));
    }
    if active > 1 && total < SHRINK_BELOW * (active - 1) as f64 {
        return Some(active - 1);
    }
    None
}

/// CPU time this thread has used, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes into it.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_when_a_worker_runs_hot_and_jumps_to_what_the_load_needs() {
        assert_eq!(decide(&[0.9, 0.0, 0.0, 0.0], 1), Some(2));
        // 2.7 cores of work on 2 hot workers: 2.7 / 0.6 -> 5, capped at 4.
        assert_eq!(decide(&[1.0, 0.9, 0.4, 0.4], 2), Some(4));
        assert_eq!(decide(&[0.95, 0.95], 2), None, "already all active");
    }

    #[test]
    fn shrinks_only_when_the_rest_stay_cool() {
        assert_eq!(decide(&[0.2, 0.2], 2), Some(1));
        assert_eq!(decide(&[0.3, 0.3], 2), None, "0.6 would run one worker above 0.5");
        assert_eq!(decide(&[0.1], 1), None);
        // A moderately busy single worker stays single: no flapping.
        assert_eq!(decide(&[0.7, 0.0], 1), None);
    }

    #[test]
    fn non_adaptive_keeps_every_worker_active() {
        let b = Balancer::new(4, false);
        assert_eq!(b.active(), 4);
        b.evaluate(1);
        b.evaluate(1_000_000_000);
        assert_eq!(b.active(), 4);
        assert_eq!(b.should_leave(3), None);
    }

    #[test]
    fn new_connections_go_to_the_least_loaded_active_worker() {
        let b = Balancer::new(3, true);
        assert_eq!(b.pick(), 0, "one active worker at start");
        b.active.store(3, Relaxed);
        b.loads[0].conns.store(5, Relaxed);
        b.loads[1].conns.store(2, Relaxed);
        b.loads[2].conns.store(4, Relaxed);
        assert_eq!(b.pick(), 1);
    }

    #[test]
    fn growing_sheds_a_share_and_shrinking_drains_the_released_worker() {
        let b = Balancer::new(2, true);
        b.loads[0].conns.store(10, Relaxed);
        b.resize(1, 2, &[0.9, 0.0]);
        assert_eq!(b.active(), 2);
        // Half of worker 0's connections leave, to worker 1, then no more.
        let left: Vec<_> = (0..10).filter_map(|_| b.should_leave(0)).collect();
        assert_eq!(left, vec![1; 5]);
        assert_eq!(b.should_leave(1), None);

        b.loads[1].conns.store(5, Relaxed);
        b.resize(2, 1, &[0.1, 0.1]);
        assert_eq!(b.active(), 1);
        // Every connection of worker 1 leaves for worker 0; worker 0 keeps its own.
        assert!((0..7).all(|_| b.should_leave(1) == Some(0)));
        assert_eq!(b.should_leave(0), None);
    }

    #[test]
    fn evaluation_reads_cpu_deltas_over_the_window_and_cools_down() {
        let b = Balancer::new(2, true);
        b.evaluate(0); // first window: baseline only
        b.loads[0].cpu_ns.store(450_000_000, Relaxed); // 0.45 s of CPU in 0.5 s: 0.9 busy
        b.evaluate(500_000_000);
        assert_eq!(b.active(), 2, "a hot worker 0 brings in worker 1");
        // Idle now, but the cool-down holds the set for two windows.
        b.evaluate(1_000_000_000);
        b.evaluate(1_500_000_000);
        assert_eq!(b.active(), 2);
        b.evaluate(2_000_000_000);
        assert_eq!(b.active(), 1);
    }

    #[test]
    fn thread_cpu_time_advances_with_work() {
        let before = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu_ns() > before);
    }
}
