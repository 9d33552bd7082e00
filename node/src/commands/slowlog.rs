//! SLOWLOG and LATENCY, as Redis 7.0 has them: the slow log of commands
//! that ran at least `slowlog-log-slower-than` microseconds, and the latency
//! monitor's per-event series of spikes of at least
//! `latency-monitor-threshold` milliseconds.
//!
//! The dispatch path only loads the thresholds (relaxed atomics); the locks
//! here are taken by slow commands alone.

use super::args::{help, subcommand};
use super::{CmdResult, CommandDef, Ctx, Keys, flags};
use crate::base::eq_ic;
use crate::config::RuntimeConfig;
use crate::metrics::{HISTOGRAM_STEPS, histogram_step_usec};
use crate::protocol::Reply;
use crate::session::client::Client;
use crate::sys::clock::unix_secs;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

pub const COMMANDS: &[CommandDef] = &[
    CommandDef::new("slowlog", -2, 0, Keys::None, slowlog).acl("@slow").subs(SLOWLOG_SUBS),
    CommandDef::new("latency", -2, 0, Keys::None, latency).acl("@slow").subs(LATENCY_SUBS),
];

/// Arguments an entry keeps (the last one says how many more there were).
const MAX_ARGC: usize = 32;
/// Bytes an argument keeps (then how many more there were).
const MAX_STRING: usize = 128;

/// One slow command.
struct SlowEntry {
    id: u64,
    time: u64,
    micros: u64,
    argv: Vec<Vec<u8>>,
    peer: String,
    name: Vec<u8>,
}

/// The slow log: newest entries first.
#[derive(Default)]
pub struct SlowLog {
    inner: Mutex<SlowInner>,
}

#[derive(Default)]
struct SlowInner {
    next_id: u64,
    entries: VecDeque<SlowEntry>,
}

impl SlowLog {
    /// Records a command that took `micros`, when it is slow enough (the
    /// threshold is read after the command ran, as Redis does: CONFIG SET
    /// of the threshold applies to itself).
    #[inline]
    pub fn record_if_slow(&self, rt: &RuntimeConfig, client: &Client, args: &[&[u8]], micros: u64) {
        let slower_than = rt.slowlog_log_slower_than.load(Relaxed);
        if slower_than < 0 || micros < slower_than as u64 {
            return;
        }
        self.push(rt.slowlog_max_len.load(Relaxed) as usize, client, args, micros);
    }

    #[cold]
    fn push(&self, max_len: usize, client: &Client, args: &[&[u8]], micros: u64) {
        let kept = args.len().min(MAX_ARGC);
        let redacted = redacted_args(args);
        let argv = (0..kept)
            .map(|j| {
                if kept != args.len() && j == kept - 1 {
                    format!("... ({} more arguments)", args.len() - kept + 1).into_bytes()
                } else if redacted.contains(&j) {
                    b"(redacted)".to_vec()
                } else if args[j].len() > MAX_STRING {
                    let mut s = args[j][..MAX_STRING].to_vec();
                    s.extend_from_slice(format!("... ({} more bytes)", args[j].len() - MAX_STRING).as_bytes());
                    s
                } else {
                    args[j].to_vec()
                }
            })
            .collect();
        let name = client.info.name.lock().clone().unwrap_or_default();
        let peer = client.info.addr.clone();
        let mut inner = self.inner.lock();
        let id = inner.next_id;
        inner.next_id += 1;
        inner.entries.push_front(SlowEntry { id, time: unix_secs(), micros, argv, peer, name });
        inner.entries.truncate(max_len);
    }

    pub fn len(&self) -> usize {
        self.inner.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn reset(&self) {
        self.inner.lock().entries.clear();
    }
}

/// Arguments Redis shows as `(redacted)`: passwords.
pub(crate) fn redacted_args(args: &[&[u8]]) -> Vec<usize> {
    let cmd = args[0];
    if eq_ic(cmd, "auth") {
        return (1..args.len()).collect();
    }
    if eq_ic(cmd, "hello") {
        // HELLO [protover [AUTH username password] [SETNAME name]]
        let mut out = Vec::new();
        let mut j = 2;
        while j < args.len() {
            if eq_ic(args[j], "auth") && j + 2 < args.len() {
                out.extend([j + 1, j + 2]);
                j += 3;
            } else {
                j += 2;
            }
        }
        return out;
    }
    // ACL SETUSER: the user name and every rule (passwords among them).
    if eq_ic(cmd, "acl") && args.len() > 2 && eq_ic(args[1], "setuser") {
        return (2..args.len()).collect();
    }
    // MIGRATE ... AUTH password / AUTH2 username password
    if eq_ic(cmd, "migrate") {
        let mut out = Vec::new();
        let mut j = 6;
        while j < args.len() {
            if eq_ic(args[j], "auth") {
                out.push(j + 1);
                j += 2;
            } else if eq_ic(args[j], "auth2") {
                out.extend([j + 1, j + 2]);
                j += 3;
            } else {
                j += 1;
            }
        }
        out.retain(|&j| j < args.len());
        return out;
    }
    if eq_ic(cmd, "config") && args.len() > 2 && eq_ic(args[1], "set") {
        return (2..args.len())
            .step_by(2)
            .filter(|&j| eq_ic(args[j], "requirepass") || eq_ic(args[j], "masterauth"))
            .map(|j| j + 1)
            .collect();
    }
    Vec::new()
}

const SLOWLOG_SUBS: &[&str] = &["get", "len", "reset", "help"];

const SLOWLOG_HELP: &[&str] = &[
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
    "HELP",
    "    Prints this help.",
];

fn slowlog(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let log = &ctx.node.slowlog;
    match subcommand("slowlog", SLOWLOG_SUBS, args)? {
        "get" => {
            if args.len() > 3 {
                return Err(format!(
                    "ERR unknown subcommand or wrong number of arguments for '{}'. Try SLOWLOG HELP.",
                    super::args::lossy(args[1])
                )
                .into());
            }
            let count = match args.get(2) {
                None => 10,
                Some(a) => match crate::base::parse_i64(a) {
                    Some(-1) => usize::MAX,
                    Some(n) if n >= 0 => n as usize,
                    _ => return Err("ERR count should be greater than or equal to -1".into()),
                },
            };
            let inner = log.inner.lock();
            let n = count.min(inner.entries.len());
            out.array(n);
            for e in inner.entries.iter().take(n) {
                out.array(6);
                out.int(e.id as i64);
                out.int(e.time as i64);
                out.int(e.micros as i64);
                out.array(e.argv.len());
                for a in &e.argv {
                    out.bulk(a);
                }
                out.bulk(e.peer.as_bytes());
                out.bulk(&e.name);
            }
        }
        "len" => out.int(log.len() as i64),
        "reset" => {
            log.reset();
            out.ok();
        }
        _ => help(out, SLOWLOG_HELP),
    }
    Ok(())
}

/// Samples an event keeps (Redis's LATENCY_TS_LEN).
const SERIES_LEN: usize = 160;

#[derive(Clone, Copy, Default)]
struct Sample {
    time: u64,
    millis: u64,
}

/// One event's samples: at most one per second (the worst), in a ring.
struct Series {
    event: &'static str,
    idx: usize,
    max: u64,
    samples: [Sample; SERIES_LEN],
}

impl Series {
    /// Samples in time order, oldest first.
    fn ordered(&self) -> impl Iterator<Item = &Sample> {
        (0..SERIES_LEN).map(move |i| &self.samples[(self.idx + i) % SERIES_LEN]).filter(|s| s.time != 0)
    }

    fn latest(&self) -> Sample {
        self.samples[(self.idx + SERIES_LEN - 1) % SERIES_LEN]
    }
}

/// The latency monitor: events in the order they first occurred.
#[derive(Default)]
pub struct LatencyMonitor {
    events: Mutex<Vec<Series>>,
}

impl LatencyMonitor {
    /// Records `millis` for `event` when it reaches `latency-monitor-threshold`.
    #[inline]
    pub fn record_if_needed(&self, rt: &RuntimeConfig, event: &'static str, millis: u64) {
        let threshold = rt.latency_monitor_threshold.load(Relaxed);
        if threshold != 0 && millis >= threshold {
            self.add_sample(event, millis, unix_secs());
        }
    }

    #[cold]
    fn add_sample(&self, event: &'static str, millis: u64, now: u64) {
        let mut events = self.events.lock();
        let i = match events.iter().position(|s| s.event == event) {
            Some(i) => i,
            None => {
                events.push(Series { event, idx: 0, max: 0, samples: [Sample::default(); SERIES_LEN] });
                events.len() - 1
            }
        };
        let s = &mut events[i];
        s.max = s.max.max(millis);
        let prev = (s.idx + SERIES_LEN - 1) % SERIES_LEN;
        if s.samples[prev].time == now {
            s.samples[prev].millis = s.samples[prev].millis.max(millis);
            return;
        }
        s.samples[s.idx] = Sample { time: now, millis };
        s.idx = (s.idx + 1) % SERIES_LEN;
    }

    /// Forgets the named events (all when none is named); how many there were.
    fn reset(&self, names: &[&[u8]]) -> usize {
        let mut events = self.events.lock();
        let before = events.len();
        if names.is_empty() {
            events.clear();
        } else {
            events.retain(|s| !names.contains(&s.event.as_bytes()));
        }
        before - events.len()
    }
}

const LATENCY_SUBS: &[&str] = &["doctor", "graph", "history", "histogram", "latest", "reset", "help"];

const LATENCY_HELP: &[&str] = &[
    "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
    "    If no commands are specified then all histograms are replied.",
    "HELP",
    "    Prints this help.",
];

fn latency(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let mon = &ctx.node.latency;
    match subcommand("latency", LATENCY_SUBS, args)? {
        "latest" => {
            let events = mon.events.lock();
            out.array(events.len());
            for s in events.iter() {
                let last = s.latest();
                out.array(4);
                out.bulk(s.event.as_bytes());
                out.int(last.time as i64);
                out.int(last.millis as i64);
                out.int(s.max as i64);
            }
        }
        "history" => {
            let events = mon.events.lock();
            match events.iter().find(|s| s.event.as_bytes() == args[2]) {
                None => out.array(0),
                Some(s) => {
                    out.array(s.ordered().count());
                    for sample in s.ordered() {
                        out.array(2);
                        out.int(sample.time as i64);
                        out.int(sample.millis as i64);
                    }
                }
            }
        }
        "reset" => out.int(mon.reset(&args[2..]) as i64),
        "histogram" => histogram(ctx, &args[2..], out),
        "graph" => {
            let events = mon.events.lock();
            let Some(s) = events.iter().find(|s| s.event.as_bytes() == args[2]) else {
                return Err(format!("ERR No samples available for event '{}'", super::args::lossy(args[2])).into());
            };
            out.verbatim(graph(s, unix_secs()).as_bytes());
        }
        "doctor" => {
            let threshold = ctx.node.config.runtime.latency_monitor_threshold.load(Relaxed);
            out.verbatim(doctor(mon, threshold).as_bytes());
        }
        _ => help(out, LATENCY_HELP),
    }
    Ok(())
}

/// LATENCY HISTOGRAM: per command (all, or those named, with their
/// subcommands) that has a histogram, its calls and the cumulative count of
/// calls at each step's bound in µs, steps that add nothing left out.
fn histogram(ctx: &mut Ctx<'_>, names: &[&[u8]], out: &mut Reply) {
    let table = &ctx.node.table;
    let slots: Vec<usize> = if names.is_empty() {
        (0..table.stat_slots()).collect()
    } else {
        names.iter().flat_map(|n| table.slots_named(n)).collect()
    };
    let workers = ctx.node.workers.as_slice();
    let with_data: Vec<(usize, [u64; HISTOGRAM_STEPS])> = slots
        .into_iter()
        .map(|slot| (slot, crate::metrics::CmdTotals::sum(workers, slot).histogram))
        .filter(|(_, h)| h.iter().any(|&n| n > 0))
        .collect();
    out.map(with_data.len());
    for (slot, steps) in with_data {
        out.bulk(table.slot_name(slot).as_bytes());
        out.map(2);
        out.bulk(b"calls");
        out.int(steps.iter().sum::<u64>() as i64);
        out.bulk(b"histogram_usec");
        out.map(steps.iter().filter(|&&n| n > 0).count());
        let mut cumulative = 0;
        for (k, &n) in steps.iter().enumerate().filter(|(_, n)| **n > 0) {
            cumulative += n;
            out.int(histogram_step_usec(k) as i64);
            out.int(cumulative as i64);
        }
    }
}

/// LATENCY GRAPH: Redis's ASCII sparkline of an event's samples, labelled
/// with how long ago each happened.
fn graph(s: &Series, now: u64) -> String {
    const COLS: usize = 80;
    const ROWS: usize = 4;
    let samples: Vec<(u64, String)> = s
        .ordered()
        .map(|x| {
            let ago = now.saturating_sub(x.time);
            let label = match ago {
                0..60 => format!("{ago}s"),
                60..3600 => format!("{}m", ago / 60),
                3600..86400 => format!("{}h", ago / 3600),
                _ => format!("{}d", ago / 86400),
            };
            (x.millis, label)
        })
        .collect();
    let min = samples.iter().map(|x| x.0).min().unwrap_or(0);
    let max = samples.iter().map(|x| x.0).max().unwrap_or(0);
    let mut g = format!("{} - high {max} ms, low {min} ms (all time high {} ms)\n", s.event, s.max);
    g.push_str(&"-".repeat(COLS));
    g.push('\n');
    for (i, chunk) in samples.chunks(COLS).enumerate() {
        if i != 0 {
            g.push('\n');
        }
        sparkline(&mut g, chunk, min, max, ROWS);
    }
    g
}

/// Redis's `sparklineRenderRange` with SPARKLINE_FILL: `rows` rows of bars
/// scaled between the sequence's min and max, a blank row, then the labels
/// written downwards.
fn sparkline(g: &mut String, samples: &[(u64, String)], min: u64, max: u64, rows: usize) {
    const FILL: [u8; 3] = *b"_o#";
    let relmax = if max == min { 1.0 } else { (max - min) as f64 };
    let steps = (FILL.len() * rows) as i64;
    let mut row = 0;
    loop {
        let mut more = false;
        let mut chars = vec![b' '; samples.len()];
        for (c, (value, label)) in chars.iter_mut().zip(samples) {
            let relval = (value - min) as f64;
            let step = (((relval * steps as f64) as i64) as f64 / relmax) as i64;
            let step = step.clamp(0, steps - 1);
            if row < rows {
                more = true;
                let charidx = step - ((rows - row - 1) * FILL.len()) as i64;
                if (0..FILL.len() as i64).contains(&charidx) {
                    *c = FILL[charidx as usize];
                } else if charidx >= FILL.len() as i64 {
                    *c = b'|';
                }
            } else if row - rows < 1 {
                // The blank row between the bars and the labels.
                more = true;
                break;
            } else if let Some(&b) = label.as_bytes().get(row - rows - 1) {
                more = true;
                *c = b;
            }
        }
        if !more {
            return;
        }
        row += 1;
        g.push_str(&String::from_utf8_lossy(&chars));
        g.push('\n');
    }
}

/// LATENCY DOCTOR's report: per event, its spikes and their statistics.
fn doctor(mon: &LatencyMonitor, threshold: u64) -> String {
    if threshold == 0 {
        return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may \
                use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't \
                in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n"
            .into();
    }
    let events = mon.events.lock();
    if events.is_empty() {
        return "Dave, no latency spike was observed during the lifetime of this Redis instance, not in the \
                slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things \
                over.\n"
            .into();
    }
    let mut report = String::from(
        "Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you \
         Dave?\n\n",
    );
    let now = unix_secs();
    for (i, s) in events.iter().enumerate() {
        let samples: Vec<&Sample> = s.ordered().collect();
        let n = samples.len().max(1) as u64;
        let avg = samples.iter().map(|x| x.millis).sum::<u64>() / n;
        let mad = samples.iter().map(|x| x.millis.abs_diff(avg)).sum::<u64>() / n;
        let first = samples.first().map_or(now, |x| x.time);
        let period = now.saturating_sub(first) as f64 / n as f64;
        let _ = writeln!(
            report,
            "{}. {}: {} latency spikes (average {}ms, mean deviation {}ms, period {:.2} sec). Worst all time event \
             {}ms.",
            i + 1,
            s.event,
            samples.len(),
            avg,
            mad,
            period,
            s.max
        );
    }
    report.push_str(
        "\nI have a few advices for you:\n\n- Check your Redis slow log (SLOWLOG GET) for commands that took a \
         long time, and split or avoid those (KEYS, large ranges, big deletions).\n",
    );
    report
}

/// Whether a command is left out of SLOWLOG (EXEC: its commands are logged).
pub fn skips_slowlog(def: &CommandDef) -> bool {
    def.name == "exec"
}

/// The latency event a command's duration is recorded under.
pub fn latency_event(def: &CommandDef) -> &'static str {
    if def.has(flags::FAST) { "fast-command" } else { "command" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_keeps_the_worst_sample_per_second_and_resets_by_name() {
        let mon = LatencyMonitor::default();
        mon.add_sample("command", 50, 1000);
        mon.add_sample("command", 80, 1000);
        mon.add_sample("command", 30, 1000);
        mon.add_sample("command", 20, 1001);
        let events = mon.events.lock();
        let got: Vec<(u64, u64)> = events[0].ordered().map(|s| (s.time, s.millis)).collect();
        assert_eq!(got, vec![(1000, 80), (1001, 20)]);
        assert_eq!(events[0].max, 80);
        drop(events);
        assert_eq!(mon.reset(&[&b"nope"[..]]), 0);
        assert_eq!(mon.reset(&[&b"command"[..]]), 1);
        assert_eq!(mon.reset(&[]), 0);
    }

    #[test]
    fn the_ring_keeps_the_newest_samples_in_order() {
        let mon = LatencyMonitor::default();
        for t in 0..(SERIES_LEN as u64 + 5) {
            mon.add_sample("command", t + 1, 100 + t);
        }
        let events = mon.events.lock();
        let times: Vec<u64> = events[0].ordered().map(|s| s.time).collect();
        assert_eq!(times.len(), SERIES_LEN);
        assert_eq!(times[0], 105);
        assert!(times.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(events[0].latest().time, 100 + SERIES_LEN as u64 + 4);
    }

    #[test]
    fn passwords_are_redacted() {
        let r = |a: &[&str]| redacted_args(&a.iter().map(|s| s.as_bytes()).collect::<Vec<_>>());
        assert_eq!(r(&["AUTH", "u", "p"]), vec![1, 2]);
        assert_eq!(r(&["hello", "3", "AUTH", "u", "p", "SETNAME", "n"]), vec![3, 4]);
        assert_eq!(r(&["config", "set", "maxmemory", "1", "requirepass", "x"]), vec![5]);
        assert!(r(&["set", "k", "v"]).is_empty());
        assert_eq!(r(&["acl", "SETUSER", "u", ">p", "~x"]), vec![2, 3, 4]);
        assert!(r(&["acl", "getuser", "u"]).is_empty());
    }
}
