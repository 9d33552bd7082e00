//! Adaptive worker activation: serve from as few worker threads as the load
//! needs, and spread out when one runs hot.
//!
//! Why: a worker that wakes for a handful of requests costs a context switch
//! and, on a machine whose cores are shared with clients or other pods,
//! preempts them. Redis stays single-threaded until its I/O threads pay off
//! for the same reason. Connections are owned by one worker, so activation
//! moves connections: when a worker is asked to shed, each of its
//! connections decides once, at its next point between two batches of
//! requests (never with a reply or a blocked command in flight), whether to
//! hand its socket and state to another worker — every one of them when the
//! worker is released, a share of them when workers are added. Busy
//! connections reach that point first, so the load moves with them in the
//! right proportion. New connections go to active workers only.
//!
//! Every worker samples its own thread CPU time each tick; worker 0
//! evaluates the samples every [`WINDOW_TICKS`] ticks and grows or shrinks
//! the active set with hysteresis.
//!
//! A hot worker is a reason to try another one, not proof that it helps:
//! when the clients share the cores (or are themselves the bottleneck), a
//! second worker only splits the same requests into smaller batches, each
//! paying its own wake-up, and throughput falls. So every growth is a
//! trial: the moved connections get [`SETTLE_TICKS`] to settle, the next
//! [`MEASURE_TICKS`] are measured, and a growth that did not raise the
//! commands per second of the window before it by [`MIN_GAIN`] is undone
//! and not tried again for a back-off that doubles with each failure (up
//! to [`MAX_HOLD_WINDOWS`]). Where the gain is real (more client threads
//! than cores, commands waiting on the disk) the extra worker stays.
//!
//! `--adaptive-threads no` (or CONFIG SET adaptive-threads no) keeps every
//! worker active: for dedicated, pinned cores there is nothing to give back.

use crate::sys::clock::{mono_ns, thread_cpu_ns};
use parking_lot::Mutex;
use std::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};
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
/// A growth must raise commands per second by this fraction to be kept:
/// the extra worker costs CPU per command (smaller batches, more wake-ups),
/// which a smaller gain does not pay for.
const MIN_GAIN: f64 = 0.10;
/// Ticks after a growth before its throughput is measured (the busy
/// connections move at their next batch, within microseconds), and ticks
/// measured: a failed trial costs under half a second.
const SETTLE_TICKS: u32 = 1;
const MEASURE_TICKS: u32 = 3;
/// Windows without growth after the first failed trial (5 s); each further
/// failure doubles it, up to [`MAX_HOLD_WINDOWS`] (a minute).
const MIN_HOLD_WINDOWS: u32 = 10;
const MAX_HOLD_WINDOWS: u32 = 120;
/// `share` meaning "every connection leaves".
const ALL: u32 = 1 << 16;

/// One worker's load, as seen by the balancer.
#[derive(Default)]
pub struct WorkerLoad {
    /// Thread CPU time and monotonic time of the worker's last sample, ns.
    cpu_ns: AtomicU64,
    sampled_at_ns: AtomicU64,
    /// Connections this worker owns (counted from the moment one is
    /// assigned, so a burst of accepts spreads out).
    pub conns: AtomicUsize,
    /// Bumped each time the worker is asked to shed: each connection
    /// considers `share` once per epoch.
    epoch: AtomicU32,
    /// Chance, out of [`ALL`], that a connection leaves in this epoch.
    share: AtomicU32,
}

impl WorkerLoad {
    /// The worker thread's CPU time at its last tick (at most 100 ms old).
    pub fn cpu_ns(&self) -> u64 {
        self.cpu_ns.load(Relaxed)
    }
}

/// The active-worker set and the load samples behind it.
pub struct Balancer {
    adaptive: AtomicBool,
    /// Workers `0..active` take new connections.
    active: AtomicUsize,
    loads: Vec<WorkerLoad>,
    /// Connections moved between workers since start.
    pub migrations: AtomicU64,
    /// Growths kept, and undone, since start (their trials' outcomes).
    pub growths_kept: AtomicU64,
    pub growths_undone: AtomicU64,
    window: Mutex<Window>,
}

#[derive(Default)]
struct Window {
    /// Each worker's (CPU ns, sampled at ns) when the window began.
    start: Vec<(u64, u64)>,
    /// Commands processed, and the monotonic time, when the window began.
    ops: u64,
    ops_at_ns: u64,
    cooldown: u32,
    /// The growth being judged, if any.
    trial: Option<Trial>,
    /// Windows left before growth may be tried again, and the hold the
    /// next failed trial sets.
    hold: u32,
    next_hold: u32,
}

/// A growth from `from` to `to` active workers, made when the node ran
/// `before` commands per second; `ticks` since, and the (commands, ns)
/// its measurement starts from.
#[derive(Clone, Copy, Debug)]
struct Trial {
    from: usize,
    to: usize,
    before: f64,
    ticks: u32,
    mark: (u64, u64),
}

impl Balancer {
    pub fn new(threads: usize, adaptive: bool) -> Self {
        let threads = threads.max(1);
        Balancer {
            adaptive: AtomicBool::new(adaptive),
            active: AtomicUsize::new(if adaptive { 1 } else { threads }),
            loads: (0..threads).map(|_| WorkerLoad::default()).collect(),
            migrations: AtomicU64::new(0),
            growths_kept: AtomicU64::new(0),
            growths_undone: AtomicU64::new(0),
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
        w.start.clear();
        w.cooldown = 0;
        w.trial = None;
        w.hold = 0;
        w.next_hold = 0;
    }

    /// Workers currently taking connections.
    pub fn active(&self) -> usize {
        self.active.load(Relaxed)
    }

    pub fn load(&self, worker: usize) -> &WorkerLoad {
        &self.loads[worker]
    }

    /// Worker threads, active or not.
    pub fn workers(&self) -> usize {
        self.loads.len()
    }

    /// Where a new connection goes: the active worker with the fewest,
    /// which counts it at once. [`Balancer::unpick`] undoes it.
    pub fn pick(&self) -> usize {
        let worker = self.least_loaded(None);
        self.loads[worker].conns.fetch_add(1, Relaxed);
        worker
    }

    /// A picked connection that never reached its worker.
    pub fn unpick(&self, worker: usize) {
        self.loads[worker].conns.fetch_sub(1, Relaxed);
    }

    /// The worker's shed epoch, for a connection arriving there: it will
    /// consider only later requests to shed.
    pub fn epoch(&self, worker: usize) -> u32 {
        self.loads[worker].epoch.load(Acquire)
    }

    fn least_loaded(&self, except: Option<usize>) -> usize {
        let active = self.active().min(self.loads.len());
        (0..active).filter(|&w| Some(w) != except).min_by_key(|&w| self.loads[w].conns.load(Relaxed)).unwrap_or(0)
    }

    /// Called by a connection between batches, with the last shed epoch it
    /// saw on this worker: the worker it should move to, if any. One load
    /// when nothing changed.
    #[inline]
    pub fn should_leave(&self, worker: usize, seen_epoch: &mut u32) -> Option<usize> {
        let epoch = self.loads[worker].epoch.load(Acquire);
        if epoch == *seen_epoch {
            return None;
        }
        *seen_epoch = epoch;
        self.leave_slow(worker)
    }

    #[cold]
    fn leave_slow(&self, worker: usize) -> Option<usize> {
        let share = self.loads[worker].share.load(Relaxed);
        if share == 0 || (share < ALL && (crate::store::fast_rand() % ALL as u64) as u32 >= share) {
            return None;
        }
        let target = self.least_loaded(Some(worker));
        (target != worker).then_some(target)
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
        w.trial = None;
    }

    /// Every worker, every tick: records its own CPU time. Worker 0 then
    /// judges a growth on trial, and evaluates the window when it is
    /// complete; `commands` (read only then) is the node's count of
    /// commands processed so far.
    pub fn tick(&self, worker: usize, tick_no: u32, commands: impl FnOnce() -> u64) {
        let load = &self.loads[worker];
        load.cpu_ns.store(thread_cpu_ns(), Relaxed);
        load.sampled_at_ns.store(mono_ns(), Relaxed);
        if worker == 0 && self.adaptive() {
            self.advance(tick_no % WINDOW_TICKS == 0, || (commands(), mono_ns()));
        }
    }

    /// Worker 0's share of a tick, given (commands so far, monotonic ns).
    fn advance(&self, window_end: bool, now: impl FnOnce() -> (u64, u64)) {
        let mut w = self.window.lock();
        if w.trial.is_none() && !window_end {
            return;
        }
        let (commands, now_ns) = now();
        self.judge(&mut w, commands, now_ns);
        if window_end {
            self.evaluate(&mut w, commands, now_ns);
        }
    }

    /// Keeps or undoes the growth on trial once it has been measured.
    fn judge(&self, w: &mut Window, commands: u64, now_ns: u64) {
        let Some(mut trial) = w.trial.take() else { return };
        trial.ticks += 1;
        if trial.ticks <= SETTLE_TICKS {
            trial.mark = (commands, now_ns);
        }
        if trial.ticks < SETTLE_TICKS + MEASURE_TICKS {
            w.trial = Some(trial);
            return;
        }
        let rate = per_second(trial.mark, (commands, now_ns));
        if self.active() != trial.to {
            return; // changed by hand meanwhile
        }
        if rate >= trial.before * (1.0 + MIN_GAIN) {
            w.next_hold = 0;
            self.growths_kept.fetch_add(1, Relaxed);
            info!(
                workers = trial.to,
                commands_per_sec_before = trial.before as u64,
                commands_per_sec_after = rate as u64,
                "more worker threads raised throughput; keeping them"
            );
            return;
        }
        self.growths_undone.fetch_add(1, Relaxed);
        w.hold = w.next_hold.max(MIN_HOLD_WINDOWS);
        w.next_hold = (w.hold * 2).min(MAX_HOLD_WINDOWS);
        w.cooldown = COOLDOWN_WINDOWS;
        info!(
            from = trial.to,
            to = trial.from,
            commands_per_sec_before = trial.before as u64,
            commands_per_sec_after = rate as u64,
            retry_in_secs = w.hold * WINDOW_TICKS / 10,
            "more worker threads did not raise throughput; going back"
        );
        self.resize(trial.to, trial.from, &[]);
    }

    /// Grows or shrinks the active set from the CPU each worker used between
    /// its own samples (workers tick out of step with each other).
    fn evaluate(&self, w: &mut Window, commands: u64, now_ns: u64) {
        let rate = per_second((w.ops, w.ops_at_ns), (commands, now_ns));
        (w.ops, w.ops_at_ns) = (commands, now_ns);
        let now: Vec<(u64, u64)> =
            self.loads.iter().map(|l| (l.cpu_ns.load(Relaxed), l.sampled_at_ns.load(Relaxed))).collect();
        let first = w.start.len() != now.len();
        let busy: Vec<f64> = now
            .iter()
            .zip(&w.start)
            .map(|(&(cpu, at), &(cpu0, at0))| {
                let elapsed = at.saturating_sub(at0);
                if elapsed == 0 { 0.0 } else { cpu.saturating_sub(cpu0) as f64 / elapsed as f64 }
            })
            .collect();
        w.start = now;
        w.hold = w.hold.saturating_sub(1);
        if first || w.trial.is_some() {
            return;
        }
        if w.cooldown > 0 {
            w.cooldown -= 1;
            return;
        }
        if !self.adaptive() {
            return;
        }
        let active = self.active();
        let Some(next) = decide(&busy, active) else { return };
        if next > active && w.hold > 0 {
            return;
        }
        w.cooldown = COOLDOWN_WINDOWS;
        if next > active {
            w.trial = Some(Trial { from: active, to: next, before: rate, ticks: 0, mark: (commands, now_ns) });
        }
        self.resize(active, next, &busy);
    }

    fn resize(&self, from: usize, to: usize, busy: &[f64]) {
        let total = busy.iter().fold(0.0, |sum, b| sum + b);
        self.active.store(to, Relaxed);
        if to == from {
            return;
        }
        let (keep, shed, share) = if to > from {
            // Each active worker gives the newcomers their share.
            (from..to, 0..from, ALL * (to - from) as u32 / to as u32)
        } else {
            (0..to, to..self.loads.len(), ALL)
        };
        for load in &self.loads[keep] {
            load.share.store(0, Relaxed);
        }
        for load in &self.loads[shed] {
            load.share.store(share, Relaxed);
            load.epoch.fetch_add(1, Release);
        }
        info!(from, to, cpu = format!("{total:.2}"), "active worker threads changed");
    }
}

/// Commands per second between two (commands, monotonic ns) readings.
fn per_second(from: (u64, u64), to: (u64, u64)) -> f64 {
    let elapsed_ns = to.1.saturating_sub(from.1);
    if elapsed_ns == 0 { 0.0 } else { to.0.saturating_sub(from.0) as f64 * 1e9 / elapsed_ns as f64 }
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
        sample(&b, 0, 0, 0);
        b.advance(true, || (0, 0));
        sample(&b, 0, 950_000_000, 1_000_000_000);
        b.advance(true, || (0, 1_000_000_000));
        assert_eq!(b.active(), 4);
        assert_eq!(b.should_leave(3, &mut 0), None);
    }

    #[test]
    fn new_connections_go_to_the_least_loaded_active_worker_and_count_at_once() {
        let b = Balancer::new(3, true);
        assert_eq!(b.pick(), 0, "one active worker at start");
        b.active.store(3, Relaxed);
        // A burst of accepts spreads out even before any connection runs.
        let picks: Vec<usize> = (0..5).map(|_| b.pick()).collect();
        assert_eq!(picks, vec![1, 2, 0, 1, 2]);
        b.unpick(2);
        assert_eq!(b.pick(), 2);
    }

    /// Each of `n` connections on `worker` passes one safe point.
    fn pass_all(b: &Balancer, worker: usize, n: usize) -> Vec<Option<usize>> {
        (0..n).map(|_| b.should_leave(worker, &mut 0)).collect()
    }

    #[test]
    fn growing_moves_a_share_once_per_connection_and_shrinking_moves_all() {
        let b = Balancer::new(2, true);
        b.loads[0].conns.store(1000, Relaxed);
        b.resize(1, 2, &[0.9, 0.0]);
        assert_eq!(b.active(), 2);
        // About half of worker 0's connections leave, all to worker 1.
        let left: Vec<usize> = pass_all(&b, 0, 1000).into_iter().flatten().collect();
        assert!((400..600).contains(&left.len()), "{} of 1000 left", left.len());
        assert!(left.iter().all(|&w| w == 1));
        // A connection that already decided in this epoch does not again.
        let mut seen = b.epoch(0);
        assert!((0..100).all(|_| b.should_leave(0, &mut seen).is_none()));
        assert_eq!(b.should_leave(1, &mut b.epoch(1)), None, "the new worker keeps its own");

        b.resize(2, 1, &[0.1, 0.1]);
        assert_eq!(b.active(), 1);
        assert!(pass_all(&b, 1, 50).iter().all(|&t| t == Some(0)), "every connection of worker 1 leaves");
        assert!(pass_all(&b, 0, 50).iter().all(Option::is_none), "worker 0 keeps its own");
    }

    /// Records a sample for `worker` as its tick would.
    fn sample(b: &Balancer, worker: usize, cpu_ns: u64, at_ns: u64) {
        b.loads[worker].cpu_ns.store(cpu_ns, Relaxed);
        b.loads[worker].sampled_at_ns.store(at_ns, Relaxed);
    }

    #[test]
    fn evaluation_reads_each_workers_cpu_over_its_own_interval_and_cools_down() {
        let b = Balancer::new(2, true);
        sample(&b, 0, 0, 0);
        sample(&b, 1, 0, 80_000_000); // worker 1 ticks 80 ms out of step
        b.advance(true, || (0, 0)); // first window: baseline only
        sample(&b, 0, 450_000_000, 500_000_000); // 0.9 busy
        sample(&b, 1, 0, 580_000_000);
        b.advance(true, || (0, 500_000_000));
        assert_eq!(b.active(), 2, "a hot worker 0 brings in worker 1");
        // Idle now, but the cool-down holds the set for two windows.
        for window in 2..=4 {
            for tick in 1..WINDOW_TICKS as u64 {
                b.advance(false, || (0, (window - 1) * 500_000_000 + tick * 100_000_000));
            }
            sample(&b, 0, 450_000_000, window * 500_000_000);
            sample(&b, 1, 0, window * 500_000_000 + 80_000_000);
            b.advance(true, || (0, window * 500_000_000));
            assert_eq!(b.active(), if window < 4 { 2 } else { 1 }, "window {window}");
        }
    }

    /// Drives `b` through 500 ms windows of five ticks.
    struct Clock {
        now_ns: u64,
        cpu: Vec<u64>,
        commands: u64,
    }

    impl Clock {
        fn new(b: &Balancer) -> Self {
            let clock = Clock { now_ns: 0, cpu: vec![0; b.workers()], commands: 0 };
            clock.sample_all(b);
            b.advance(true, || (0, 0));
            clock
        }

        fn sample_all(&self, b: &Balancer) {
            for (worker, &cpu) in self.cpu.iter().enumerate() {
                sample(b, worker, cpu, self.now_ns);
            }
        }

        /// One window in which each worker used `busy[i]` of a CPU and
        /// the node ran `rate` commands per second; the active workers
        /// after it.
        fn window(&mut self, b: &Balancer, busy: &[f64], rate: u64) -> usize {
            for tick in 1..=WINDOW_TICKS {
                self.now_ns += 100_000_000;
                self.commands += rate / 10;
                for (cpu, busy) in self.cpu.iter_mut().zip(busy) {
                    *cpu += (busy * 100_000_000.0) as u64;
                }
                let end = tick == WINDOW_TICKS;
                if end {
                    self.sample_all(b);
                }
                b.advance(end, || (self.commands, self.now_ns));
            }
            b.active()
        }
    }

    #[test]
    fn a_growth_that_does_not_raise_throughput_is_undone_and_retried_later() {
        let b = Balancer::new(2, true);
        let mut clock = Clock::new(&b);
        // One worker runs hot at 1 M commands/s: try a second.
        assert_eq!(clock.window(&b, &[0.95, 0.0], 1_000_000), 2);
        // Two workers serve fewer commands (the clients were the
        // bottleneck): back to one within the next window.
        assert_eq!(clock.window(&b, &[0.6, 0.6], 900_000), 1, "a growth that lost throughput is undone");
        // Still hot, but growth waits out the hold of 10 windows (5 s)
        // from the moment it was undone.
        assert_eq!(hot_windows_until_growth(&mut clock, &b), 8, "retried once the hold ran out");
        // A second failure (a gain of 5 %, below 10 %) doubles the hold.
        assert_eq!(clock.window(&b, &[0.6, 0.6], 1_050_000), 1);
        assert_eq!(hot_windows_until_growth(&mut clock, &b), 18);
        assert_eq!((b.growths_kept.load(Relaxed), b.growths_undone.load(Relaxed)), (0, 2));
    }

    /// Hot single-worker windows until the balancer tries a second worker.
    fn hot_windows_until_growth(clock: &mut Clock, b: &Balancer) -> usize {
        let mut windows = 0;
        while clock.window(b, &[0.95, 0.0], 1_000_000) == 1 {
            windows += 1;
            assert!(windows < 200, "growth never retried");
        }
        windows
    }

    #[test]
    fn a_growth_that_raises_throughput_is_kept_and_resets_the_hold() {
        let b = Balancer::new(2, true);
        let mut clock = Clock::new(&b);
        assert_eq!(clock.window(&b, &[0.95, 0.0], 1_000_000), 2);
        assert_eq!(clock.window(&b, &[0.6, 0.6], 900_000), 1);
        assert_eq!(hot_windows_until_growth(&mut clock, &b), 8);
        // This time the server was the bottleneck: 1.7 M commands/s.
        for _ in 0..30 {
            assert_eq!(clock.window(&b, &[0.9, 0.9], 1_700_000), 2, "a growth that paid stays");
        }
        assert_eq!((b.growths_kept.load(Relaxed), b.growths_undone.load(Relaxed)), (1, 1));
        // Load drops and the set shrinks; when it grows again and fails,
        // the hold starts over from its shortest.
        assert_eq!(clock.window(&b, &[0.2, 0.2], 400_000), 1);
        assert_eq!(hot_windows_until_growth(&mut clock, &b), 2, "only the cool-down after the shrink");
        assert_eq!(clock.window(&b, &[0.6, 0.6], 1_000_000), 1);
        assert_eq!(hot_windows_until_growth(&mut clock, &b), 8);
    }
}
