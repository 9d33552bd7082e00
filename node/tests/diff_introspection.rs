//! Differential tests (strata vs redis) for introspection: COMMAND GETKEYS
//! and GETKEYSANDFLAGS, LATENCY HISTOGRAM / GRAPH / HELP, and per-subcommand
//! statistics. Latencies differ between servers; the shape of each reply,
//! the commands listed and their call counts must not.

mod support;

use support::*;

/// The bounds (µs) Redis's LATENCY HISTOGRAM can report: its HDR
/// histogram read in powers of two from 1024 ns.
fn redis_histogram_bounds() -> Vec<i64> {
    (0..21).map(|k| ((1i64 << (10 + k)) + (1i64 << (3 + k)) - 1) / 1000).collect()
}

/// Flat key/value pairs of a RESP2 array or a RESP3 map.
fn pairs(f: &Frame) -> Vec<(Frame, Frame)> {
    match f {
        Frame::Map(m) => m.clone(),
        Frame::Array(v) => v.chunks_exact(2).map(|p| (p[0].clone(), p[1].clone())).collect(),
        other => panic!("not a map: {other}"),
    }
}

/// A LATENCY HISTOGRAM reply as (command, calls), sorted, after checking
/// each histogram: known bounds, increasing, cumulative up to the calls.
fn histogram_summary(f: &Frame) -> Result<Vec<(String, i64)>, String> {
    let bounds = redis_histogram_bounds();
    let mut out = Vec::new();
    for (name, entry) in pairs(f) {
        let name = name.as_str().ok_or("command name not a string")?.to_string();
        let fields = pairs(&entry);
        if fields.len() != 2 || fields[0].0.as_str() != Some("calls") || fields[1].0.as_str() != Some("histogram_usec")
        {
            return Err(format!("{name}: fields are not calls, histogram_usec"));
        }
        let calls = fields[0].1.as_int().ok_or("calls not an integer")?;
        let mut last = (0, 0);
        for (bound, count) in pairs(&fields[1].1) {
            let (bound, count) = (bound.as_int().ok_or("bound")?, count.as_int().ok_or("count")?);
            if !bounds.contains(&bound) || bound <= last.0 || count <= last.1 {
                return Err(format!("{name}: step {bound} => {count} after {last:?}"));
            }
            last = (bound, count);
        }
        if last.1 != calls {
            return Err(format!("{name}: cumulative count {} != calls {calls}", last.1));
        }
        out.push((name, calls));
    }
    out.sort();
    Ok(out)
}

fn same_histograms(a: &Frame, b: &Frame) -> Result<(), String> {
    let (sa, sb) = (histogram_summary(a)?, histogram_summary(b)?);
    if sa == sb { Ok(()) } else { Err(format!("{sa:?} vs {sb:?}")) }
}

#[test]
fn command_getkeysandflags() {
    let mut d = Diff::new();
    for line in [
        "set k1 v1",
        "set k1 v1 get",
        "set k1 v1 EX 10 GET",
        "mset k1 v1 k2 v2",
        "LMOVE k1 k2 left right",
        "sort k1 store k2",
        "sort k1 by w* get # limit 0 1 store k2 store k3",
        "sort_ro k1 by w*",
        "del a b c",
        "get k",
        "getdel k",
        "rename a b",
        "zunionstore dst 2 a b weights 1 2",
        "zinterstore dst 2 a b",
        "xread count 2 streams s1 s2 0 0",
        "xreadgroup group g c streams s1 s2 > >",
        "georadius a 0 0 1 km store b storedist c",
        "georadius_ro a 0 0 1 km",
        "bitfield k get u8 0",
        "bitfield k get u8 0 set u8 0 1",
        "bitfield k overflow sat incrby u8 0 1",
        "bitfield_ro k get u8 0",
        "eval s 2 a b x",
        "evalsha_ro s 1 a",
        "fcall f 1 a",
        "lmpop 2 a b left",
        "blmpop 0 2 a b left count 2",
        "zmpop 1 a min",
        "memory usage k",
        "object encoding k",
        "xgroup create s g $",
        "xinfo stream s",
        "pfmerge d a b",
        "smove a b m",
        "expire k 10",
        "touch a b",
        "exists a b",
        "copy a b",
        "lcs a b",
    ] {
        let args: Vec<&str> = line.split(' ').collect();
        let mut with_flags = vec!["COMMAND", "GETKEYSANDFLAGS"];
        with_flags.extend(&args);
        d.exact(&with_flags);
        let mut plain = vec!["COMMAND", "GETKEYS"];
        plain.extend(&args);
        d.exact(&plain);
    }
    d.finish();
}

#[test]
fn command_getkeys_edges() {
    let mut d = Diff::new();
    // No keys: an empty list for commands whose keys are optional, else errors.
    d.exact(&["COMMAND", "GETKEYS", "eval", "return 1", "0"]);
    d.exact(&["COMMAND", "GETKEYSANDFLAGS", "fcall", "f", "0"]);
    d.exact(&["COMMAND", "GETKEYS", "eval", "return 1", "5", "a"]);
    d.err(&["COMMAND", "GETKEYS", "zunionstore", "d", "5", "a"]);
    d.err(&["COMMAND", "GETKEYS", "zunionstore", "d", "-1", "a"]);
    d.err(&["COMMAND", "GETKEYS", "zunionstore", "d", "x", "a"]);
    d.err(&["COMMAND", "GETKEYS", "lmpop", "99999999999999999999", "a", "left"]);
    d.err(&["COMMAND", "GETKEYSANDFLAGS", "spublish", "ch", "m"]);
    d.err(&["COMMAND", "GETKEYSANDFLAGS", "memory", "stats"]);
    d.err(&["COMMAND", "GETKEYSANDFLAGS", "memory", "nosuch", "k"]);
    d.err(&["COMMAND", "GETKEYSANDFLAGS", "memory"]);
    d.err(&["COMMAND", "GETKEYSANDFLAGS", "nosuch", "a"]);
    d.err(&["COMMAND", "GETKEYSANDFLAGS", "get"]);
    d.err(&["COMMAND", "GETKEYSANDFLAGS", "get", "a", "b"]);
    d.err(&["COMMAND", "GETKEYSANDFLAGS"]);
    d.err(&["COMMAND", "GETKEYSANDFLAGS", "set"]);
    d.err(&["COMMAND", "GETKEYS", "xread", "streams", "a"]);
    let many: Vec<String> = (0..300).map(|i| format!("key{i}")).collect();
    let mut args: Vec<&str> = vec!["COMMAND", "GETKEYSANDFLAGS", "zunionstore", "target", "300"];
    args.extend(many.iter().map(String::as_str));
    d.exact(&args);
    d.exact(&["COMMAND", "INFO", "get|key", "config|get|key", "command|getkeysandflags"]);
    d.finish();
}

#[test]
fn command_getkeysandflags_resp3() {
    let mut d = Diff::new_resp3();
    d.hello3();
    d.exact(&["COMMAND", "GETKEYSANDFLAGS", "LMOVE", "k1", "k2", "left", "right"]);
    d.exact(&["COMMAND", "GETKEYSANDFLAGS", "sort", "k1", "store", "k2"]);
    d.finish();
}

#[test]
fn latency_histogram_shapes() {
    for resp3 in [false, true] {
        let mut d = if resp3 { Diff::new_resp3() } else { Diff::new() };
        if resp3 {
            d.hello3();
        }
        d.exact(&["CONFIG", "RESETSTAT"]);
        // Only CONFIG RESETSTAT itself, once.
        d.check(&["LATENCY", "HISTOGRAM"], same_histograms);
        d.exact(&["CONFIG", "RESETSTAT"]);
        for _ in 0..3 {
            d.exact(&["SET", "a", "b"]);
        }
        d.exact(&["GET", "a"]);
        d.exact(&["HSET", "h", "f", "v"]);
        d.run(Mode::Ignore, &["CLIENT", "ID"]);
        d.run(Mode::Ignore, &["CLIENT", "INFO"]);
        d.err(&["CLIENT", "NOSUCH"]);
        d.check(&["LATENCY", "HISTOGRAM"], same_histograms);
        d.check(&["LATENCY", "HISTOGRAM", "set", "get"], same_histograms);
        d.check(&["LATENCY", "HISTOGRAM", "client"], same_histograms);
        d.check(&["LATENCY", "HISTOGRAM", "client|id", "CLIENT|INFO"], same_histograms);
        d.check(&["LATENCY", "HISTOGRAM", "blabla", "zadd", "client|nosuch", "get|x", "hset"], same_histograms);
        d.exact(&["LATENCY", "HISTOGRAM", "blabla"]);
        // Without tracking nothing more is recorded.
        d.exact(&["CONFIG", "SET", "latency-tracking", "no"]);
        d.exact(&["SET", "a", "b"]);
        d.exact(&["CONFIG", "SET", "latency-tracking", "yes"]);
        d.check(&["LATENCY", "HISTOGRAM", "set"], same_histograms);
        d.finish();
    }
}

#[test]
fn latency_subcommands_and_errors() {
    let mut d = Diff::new();
    d.exact(&["LATENCY", "HELP"]);
    d.err(&["LATENCY", "HELP", "xxx"]);
    d.err(&["LATENCY", "GRAPH"]);
    d.err(&["LATENCY", "GRAPH", "command"]);
    d.err(&["LATENCY", "GRAPH", "command", "x"]);
    d.err(&["LATENCY", "NOSUCH"]);
    d.exact(&["LATENCY", "HISTORY", "blabla"]);
    d.exact(&["LATENCY", "RESET", "blabla"]);
    d.exact(&["LATENCY", "LATEST"]);
    d.finish();
}

/// INFO commandstats' lines without durations (they differ) or INFO's
/// own, sorted: the calls, rejected and failed counts per command.
fn command_counts(f: &Frame) -> Vec<String> {
    let text = String::from_utf8_lossy(f.as_bytes().unwrap_or_default()).to_string();
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info:"))
        .map(|l| {
            let (name, fields) = l.split_once(':').unwrap();
            let counts: Vec<&str> = fields.split(',').filter(|f| !f.starts_with("usec")).collect();
            format!("{name}:{}", counts.join(","))
        })
        .collect();
    lines.sort();
    lines
}

/// Subcommands are counted apart (`cmdstat_client|id`), and a container's
/// unknown subcommand nowhere.
#[test]
fn commandstats_per_subcommand() {
    let mut d = Diff::new();
    d.exact(&["CONFIG", "RESETSTAT"]);
    d.run(Mode::Ignore, &["CLIENT", "ID"]);
    d.run(Mode::Ignore, &["CLIENT", "ID"]);
    d.err(&["CLIENT", "NOSUCH"]);
    d.err(&["CLIENT", "SETNAME"]);
    d.err(&["CLIENT"]);
    d.exact(&["CONFIG", "GET", "maxmemory-samples"]);
    d.check(&["INFO", "commandstats"], |a, b| {
        let (sa, sb) = (command_counts(a), command_counts(b));
        if sa.is_empty() || sa != sb { Err(format!("{sa:?} vs {sb:?}")) } else { Ok(()) }
    });
    d.finish();
}

/// INFO errorstats and `total_error_replies`: errors filed by their first
/// word, from refusals (unknown command, arity, MULTI, OOM) and from
/// commands that failed; CONFIG RESETSTAT clears them.
#[test]
fn errorstats_and_total_error_replies() {
    let mut d = Diff::new();
    let errorstats = |d: &mut Diff| {
        d.check(&["INFO", "errorstats"], |a, b| if a == b { Ok(()) } else { Err("errorstats differ".into()) });
        d.check(&["INFO", "stats"], |a, b| {
            let field = |f: &Frame| {
                let text = String::from_utf8_lossy(f.as_bytes().unwrap_or_default()).to_string();
                text.lines().find(|l| l.starts_with("total_error_replies:")).map(str::to_string)
            };
            let (fa, fb) = (field(a), field(b));
            if fa.is_some() && fa == fb { Ok(()) } else { Err(format!("{fa:?} vs {fb:?}")) }
        });
    };
    d.exact(&["CONFIG", "RESETSTAT"]);
    errorstats(&mut d);
    d.err(&["AUTH", "k"]);
    d.err(&["asdf"]);
    d.err(&["SET", "k"]);
    d.exact(&["SET", "k", "v"]);
    d.err(&["LPUSH", "k", "x"]);
    d.err(&["EVALSHA", "NotValidShaSUM", "0"]);
    d.exact(&["XADD", "s", "1-1", "f", "v"]);
    d.err(&["XGROUP", "CREATECONSUMER", "s", "g", "c"]);
    d.err(&["CLIENT", "NOSUCH"]);
    d.err(&["CLIENT", "SETNAME"]);
    d.exact(&["MULTI"]);
    d.err(&["SET"]);
    d.err(&["EXEC"]);
    d.err(&["EXEC"]);
    errorstats(&mut d);
    d.exact(&["CONFIG", "SET", "maxmemory", "1"]);
    d.err(&["SET", "a", "b"]);
    d.exact(&["CONFIG", "SET", "maxmemory", "0"]);
    errorstats(&mut d);
    d.exact(&["CONFIG", "RESETSTAT"]);
    errorstats(&mut d);
    d.finish();
}

/// Errors inside scripts are counted once, where they arise: a command a
/// script called that failed or was refused (the refusal is a rejected
/// call of that command), or an error the script made itself
/// (`redis.error_reply`); the script's own failed call either way. And
/// `min-replicas-to-write` refuses writes (NOREPLICAS), in MULTI and in
/// scripts too.
#[test]
fn script_errors_and_noreplicas_are_counted_as_redis_counts_them() {
    let mut d = Diff::new();
    d.exact(&["CONFIG", "RESETSTAT"]);
    d.err(&["EVAL", "return redis.call('select', 99)", "0"]);
    same_stats_then_reset(&mut d);
    d.exact(&["EVAL", "local t = redis.pcall('select', 99); return t['err']", "0"]);
    same_stats_then_reset(&mut d);
    d.err(&["EVAL", "return redis.pcall('select', 99)", "0"]);
    same_stats_then_reset(&mut d);
    d.err(&["EVAL", "return redis.error_reply('MY_ERR_CODE custom')", "0"]);
    same_stats_then_reset(&mut d);
    d.err(&["EVAL", "return redis.call('nosuch')", "0"]);
    d.err(&["EVAL_RO", "return redis.call('set', 'x', 'y')", "1", "x"]);
    same_stats_then_reset(&mut d);
    d.exact(&["CONFIG", "SET", "maxmemory", "1"]);
    d.err(&["EVAL", "return redis.call('set', 'x', 'y')", "1", "x"]);
    d.exact(&["CONFIG", "SET", "maxmemory", "0"]);
    same_stats_then_reset(&mut d);
    d.exact(&["SET", "x", "v"]);
    d.exact(&["CONFIG", "SET", "min-replicas-to-write", "1"]);
    d.exact(&["CONFIG", "GET", "min-replicas-to-write"]);
    d.exact(&["CONFIG", "GET", "min-slaves-max-lag"]);
    d.err(&["SET", "x", "w"]);
    d.exact(&["GET", "x"]);
    d.exact(&["EVAL", "return redis.call('get', 'x')", "1", "x"]);
    d.err(&["EVAL", "#!lua\nreturn redis.call('get', 'x')", "1", "x"]);
    d.exact(&["EVAL", "#!lua flags=no-writes\nreturn redis.call('get', 'x')", "1", "x"]);
    d.err(&["EVAL", "return redis.call('set', 'x', 1)", "1", "x"]);
    d.exact(&["MULTI"]);
    d.err(&["SET", "x", "y"]);
    d.err(&["EXEC"]);
    d.exact(&["CONFIG", "SET", "min-replicas-max-lag", "0"]);
    d.exact(&["SET", "x", "z"]);
    d.exact(&["CONFIG", "SET", "min-replicas-max-lag", "10"]);
    d.exact(&["CONFIG", "SET", "min-replicas-to-write", "0"]);
    d.exact(&["SET", "x", "z"]);
    same_stats_then_reset(&mut d);
    d.finish();
}

/// CLIENT INFO / CLIENT LIST show the request being run in the caller's
/// query buffer (`qbuf=26` for `CLIENT INFO`), as Redis 7.0 does.
#[test]
fn client_info_shows_the_running_query_buffer() {
    let mut d = Diff::new();
    let qbuf = |f: &Frame| {
        let text = String::from_utf8_lossy(f.as_bytes().unwrap_or_default()).to_string();
        text.split(' ').find(|w| w.starts_with("qbuf=")).map(str::to_string)
    };
    for args in [&["CLIENT", "INFO"][..], &["CLIENT", "LIST"]] {
        d.check(args, |a, b| {
            let (qa, qb) = (qbuf(a), qbuf(b));
            if qa.is_some() && qa == qb { Ok(()) } else { Err(format!("{qa:?} vs {qb:?}")) }
        });
    }
    d.finish();
}

/// INFO latencystats: per command with a histogram, the percentiles
/// `latency-tracking-info-percentiles` names, in Redis's format.
#[test]
fn latencystats_and_percentiles_parameter() {
    let mut d = Diff::new();
    d.exact(&["CONFIG", "GET", "latency-tracking-info-percentiles"]);
    d.err(&["CONFIG", "SET", "latency-tracking-info-percentiles", "10.0 50.0 a"]);
    d.err(&["CONFIG", "SET", "latency-tracking-info-percentiles", "10.0 50.0 101.0"]);
    d.err(&["CONFIG", "SET", "latency-tracking-info-percentiles", "-1"]);
    d.exact(&["CONFIG", "GET", "latency-tracking-info-percentiles"]);
    d.exact(&["CONFIG", "SET", "latency-tracking-info-percentiles", "0.0 50.0 100.0 99.990"]);
    d.exact(&["CONFIG", "GET", "latency-tracking-info-percentiles"]);
    d.exact(&["CONFIG", "RESETSTAT"]);
    d.exact(&["SET", "a", "b"]);
    d.exact(&["GET", "a"]);
    d.run(Mode::Ignore, &["CLIENT", "ID"]);
    // Names and percentile labels must agree; the values are timings.
    let shape = |f: &Frame| -> Vec<String> {
        let text = String::from_utf8_lossy(f.as_bytes().unwrap_or_default()).to_string();
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| match l.split_once(':') {
                None => l.to_string(),
                Some((name, values)) => {
                    let labels: Vec<String> = values
                        .split(',')
                        .filter(|v| !v.is_empty())
                        .map(|v| {
                            let (label, value) = v.split_once('=').unwrap_or((v, ""));
                            let (int, frac) = value.split_once('.').unwrap_or((value, ""));
                            let valid = !int.is_empty() && int.bytes().all(|b| b.is_ascii_digit()) && frac.len() == 3;
                            format!("{label}={}", if valid { "<µs>" } else { value })
                        })
                        .collect();
                    format!("{name}:{}", labels.join(","))
                }
            })
            .collect();
        lines.sort();
        lines
    };
    d.check(&["INFO", "latencystats"], |a, b| {
        let (sa, sb) = (shape(a), shape(b));
        if sa.len() > 2 && sa == sb { Ok(()) } else { Err(format!("{sa:?} vs {sb:?}")) }
    });
    d.exact(&["CONFIG", "SET", "latency-tracking-info-percentiles", ""]);
    d.exact(&["CONFIG", "GET", "latency-tracking-info-percentiles"]);
    d.check(&["INFO", "latencystats"], |a, b| if shape(a) == shape(b) { Ok(()) } else { Err("differ".into()) });
    // Not a default section.
    d.check(&["INFO"], |a, b| {
        let has = |f: &Frame| String::from_utf8_lossy(f.as_bytes().unwrap_or_default()).contains("# Latencystats");
        if !has(a) && !has(b) { Ok(()) } else { Err("latencystats in default INFO".into()) }
    });
    d.finish();
}

/// LATENCY GRAPH of a recorded event: Redis's header, ruler, bars and
/// labels (the latencies differ by a few ms, the drawing's shape must not).
#[test]
fn latency_graph_shape() {
    let mut d = Diff::with_servers(Server::strata(), Server::redis_with(&["--enable-debug-command", "yes"]));
    d.exact(&["CONFIG", "SET", "latency-monitor-threshold", "5"]);
    d.exact(&["DEBUG", "SLEEP", "0.02"]);
    let shape = |f: &Frame| -> Result<Vec<String>, String> {
        let text = String::from_utf8_lossy(f.as_bytes().ok_or("not a string")?).to_string();
        let lines: Vec<&str> = text.split('\n').collect();
        let header = lines[0];
        let ok = header.starts_with("command - high ") && header.contains(" ms, low ") && header.ends_with(" ms)");
        if !ok {
            return Err(format!("header {header:?}"));
        }
        // Widths and which rows hold bars or labels.
        Ok(lines[1..].iter().map(|l| format!("{}:{}", l.len(), l.trim().is_empty())).collect())
    };
    d.check(&["LATENCY", "GRAPH", "command"], |a, b| {
        let (sa, sb) = (shape(a)?, shape(b)?);
        if sa == sb { Ok(()) } else { Err(format!("{sa:?} vs {sb:?}")) }
    });
    d.finish();
}

/// A container's subcommand is admitted by its own flags and arity, from a
/// client and from a script, as Redis's `lookupCommand` and
/// `getCommandFlags` have it (the command pipeline resolves it once): a
/// script gets Redis's own arity error for a subcommand, FUNCTION LOAD is
/// refused over maxmemory, FUNCTION FLUSH wants replicas; each counted in
/// errorstats and commandstats as Redis counts it.
#[test]
fn subcommands_are_admitted_by_their_own_flags_and_arity() {
    let mut d = Diff::new();
    d.exact(&["CONFIG", "RESETSTAT"]);
    d.err(&["EVAL", "return redis.call('client', 'setname')", "0"]);
    d.err(&["EVAL", "return redis.call('object', 'encoding')", "0"]);
    d.exact(&["EVAL", "return redis.pcall('object', 'encoding')['err']", "0"]);
    d.err(&["CLIENT", "SETNAME"]);
    same_stats_then_reset(&mut d);
    d.exact(&["CONFIG", "SET", "maxmemory", "1"]);
    d.err(&["FUNCTION", "LOAD", "#!lua name=lib\nredis.register_function('f', function() return 1 end)"]);
    d.exact(&["CONFIG", "SET", "maxmemory", "0"]);
    same_stats_then_reset(&mut d);
    d.exact(&["CONFIG", "SET", "min-replicas-to-write", "1"]);
    d.err(&["FUNCTION", "FLUSH"]);
    d.exact(&["FUNCTION", "LIST"]);
    d.exact(&["CONFIG", "SET", "min-replicas-to-write", "0"]);
    same_stats_then_reset(&mut d);
    d.finish();
}

/// INFO errorstats and the calls of INFO commandstats agree with
/// redis-server's; then both are reset.
fn same_stats_then_reset(d: &mut Diff) {
    d.check(&["INFO", "errorstats"], |a, b| if a == b { Ok(()) } else { Err("errorstats differ".into()) });
    d.check(&["INFO", "commandstats"], |a, b| {
        let (ca, cb) = (command_counts(a), command_counts(b));
        if ca == cb { Ok(()) } else { Err(format!("{ca:?} vs {cb:?}")) }
    });
    d.exact(&["CONFIG", "RESETSTAT"]);
}
