//! CONFIG GET, SET, RESETSTAT and REWRITE.

use super::args::{help, lossy, subcommand};
use super::stats::unix_secs;
use super::{CmdError, CmdResult, CommandDef, Ctx, Keys, err};
use crate::config::{POLICIES, parse_memory};
use crate::protocol::Reply;
use crate::server::Shared;
use crate::store::NUM_DBS;
use crate::util::{eq_ic, glob_match};
use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

pub const COMMANDS: &[CommandDef] =
    &[CommandDef::new("config", -2, 0, Keys::None, config).acl("@slow").subs(CONFIG_SUBS)];

const CONFIG_SUBS: &[&str] = &["get", "set", "resetstat", "rewrite", "help"];

const CONFIG_HELP: &[&str] = &[
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
    "HELP",
    "    Prints this help.",
];

/// A validated CONFIG SET value, applied once every pair has validated.
type Change = Box<dyn FnOnce(&Shared)>;

/// Parses and validates a new value, or says why it is invalid.
type Setter = fn(&[u8]) -> Result<Change, String>;

/// A configuration parameter: how to read it and, unless fixed at start-up,
/// how to change it.
struct Param {
    name: &'static str,
    get: fn(&Shared) -> String,
    set: Option<Setter>,
}

pub const MB: u64 = 1024 * 1024;
const INT_MAX: i64 = i32::MAX as i64;

#[rustfmt::skip]
static PARAMS: &[Param] = &[
    Param { name: "maxmemory", get: |s| s.maxmemory().to_string(), set: Some(set_maxmemory) },
    Param { name: "maxmemory-policy", get: |s| s.config.runtime.policy_name().into(), set: Some(set_policy) },
    Param { name: "maxmemory-samples", get: |s| s.config.runtime.maxmemory_samples.load(Relaxed).to_string(), set: Some(set_samples) },
    Param { name: "maxclients", get: |s| s.config.runtime.maxclients.load(Relaxed).to_string(), set: Some(set_maxclients) },
    Param { name: "timeout", get: |s| s.config.runtime.timeout.load(Relaxed).to_string(), set: Some(set_timeout) },
    Param { name: "tcp-keepalive", get: |s| s.config.runtime.tcp_keepalive.load(Relaxed).to_string(), set: Some(set_keepalive) },
    Param { name: "requirepass", get: get_requirepass, set: Some(set_requirepass) },
    Param { name: "proto-max-bulk-len", get: |s| s.config.runtime.proto_max_bulk_len.load(Relaxed).to_string(), set: Some(set_proto_max_bulk_len) },
    Param { name: "client-query-buffer-limit", get: |s| s.config.runtime.client_query_buffer_limit.load(Relaxed).to_string(), set: Some(set_query_buffer_limit) },
    Param { name: "client-output-buffer-limit", get: get_obuf_limits, set: Some(set_obuf_limits) },
    Param { name: "loglevel", get: |s| s.config.runtime.loglevel.read().clone(), set: Some(set_loglevel) },
    Param { name: "lfu-log-factor", get: |s| s.ks.lfu_log_factor().to_string(), set: Some(set_lfu_log_factor) },
    Param { name: "adaptive-threads", get: |s| yes_no(s.balance.adaptive()).into(), set: Some(set_adaptive_threads) },
    Param { name: "lfu-decay-time", get: |s| s.ks.lfu_decay_minutes().to_string(), set: Some(set_lfu_decay_time) },
    // No RDB, AOF or keyspace notifications: only their "off" values are accepted.
    Param { name: "save", get: |_| String::new(), set: Some(set_save) },
    Param { name: "appendonly", get: |_| "no".into(), set: Some(set_appendonly) },
    Param { name: "notify-keyspace-events", get: |_| String::new(), set: Some(set_notify_keyspace_events) },
    // Fixed at start-up.
    Param { name: "port", get: |s| s.config.startup.port.to_string(), set: None },
    Param { name: "bind", get: |s| s.config.startup.binds.join(" "), set: None },
    Param { name: "unixsocket", get: |s| s.config.startup.unixsocket.as_ref().map(|p| p.display().to_string()).unwrap_or_default(), set: None },
    Param { name: "unixsocketperm", get: |s| s.config.startup.unixsocketperm.map_or_else(|| "0".into(), |p| format!("{p:o}")), set: None },
    Param { name: "dir", get: |s| absolute(&s.config.startup.dir), set: None },
    Param { name: "databases", get: |_| NUM_DBS.to_string(), set: None },
    Param { name: "threads", get: |s| s.config.startup.threads.to_string(), set: None },
    Param { name: "io-threads", get: |s| s.config.startup.threads.to_string(), set: None },
    Param { name: "partitions", get: |s| s.ks.num_partitions().to_string(), set: None },
    Param { name: "metrics-port", get: |s| s.config.startup.metrics_port.to_string(), set: None },
    Param { name: "durability", get: |s| s.config.startup.durability.into(), set: None },
    Param { name: "fsync-interval", get: |s| format_interval_us(s.config.startup.fsync_interval_us), set: None },
    Param { name: "hz", get: |_| "10".into(), set: None },
    Param { name: "cluster-enabled", get: |_| "no".into(), set: None },
    Param { name: "daemonize", get: |_| "no".into(), set: None },
];

/// `10000` µs → `10ms`: the largest unit that divides the interval exactly.
fn format_interval_us(us: u64) -> String {
    if us % 1_000_000 == 0 {
        format!("{}s", us / 1_000_000)
    } else if us % 1_000 == 0 {
        format!("{}ms", us / 1_000)
    } else {
        format!("{us}us")
    }
}

pub fn absolute(p: &std::path::Path) -> String {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf()).display().to_string()
}

fn get_requirepass(s: &Shared) -> String {
    s.config.runtime.password().map(|p| String::from_utf8_lossy(&p).into_owned()).unwrap_or_default()
}

fn get_obuf_limits(s: &Shared) -> String {
    // Only hard limits exist; there are no soft limits and no replicas.
    let rt = &s.config.runtime;
    format!(
        "normal {} 0 0 slave 0 0 0 pubsub {} 0 0",
        rt.obuf_limit_normal.load(Relaxed),
        rt.obuf_limit_pubsub.load(Relaxed)
    )
}

fn text(v: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(v).map_err(|_| "argument must be a valid string".to_string())
}

fn memory_value(v: &[u8], min: u64, max: u64) -> Result<u64, String> {
    let n = parse_memory(text(v)?).ok_or("argument must be a memory value")?;
    if n < min || n > max {
        return Err(format!("argument must be between {min} and {max} inclusive"));
    }
    Ok(n)
}

pub fn int_value(v: &[u8], min: i64, max: i64) -> Result<i64, String> {
    let n = crate::util::parse_i64(v).ok_or("argument couldn't be parsed into an integer")?;
    if n < min || n > max {
        return Err(format!("argument must be between {min} and {max} inclusive"));
    }
    Ok(n)
}

fn enum_value(v: &[u8], options: &[&'static str]) -> Result<&'static str, String> {
    options
        .iter()
        .find(|o| eq_ic(v, o))
        .copied()
        .ok_or_else(|| format!("argument(s) must be one of the following: {}", options.join(", ")))
}

fn set_maxmemory(v: &[u8]) -> Result<Change, String> {
    let n = memory_value(v, 0, u64::MAX)?;
    Ok(Box::new(move |s| s.config.runtime.maxmemory.store(n, Relaxed)))
}

fn set_policy(v: &[u8]) -> Result<Change, String> {
    // Redis's order (its error lists them so), then Strata's own.
    const ORDER: &[&str] = &[
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "noeviction",
        "sieve",
    ];
    let name = enum_value(v, ORDER)?;
    let idx = POLICIES.iter().position(|p| *p == name).ok_or("unknown policy")? as u8;
    Ok(Box::new(move |s| s.config.runtime.policy.store(idx, Relaxed)))
}

fn set_samples(v: &[u8]) -> Result<Change, String> {
    let n = int_value(v, 1, INT_MAX)? as usize;
    Ok(Box::new(move |s| s.config.runtime.maxmemory_samples.store(n, Relaxed)))
}

fn set_maxclients(v: &[u8]) -> Result<Change, String> {
    let n = int_value(v, 1, u32::MAX as i64)? as usize;
    Ok(Box::new(move |s| s.config.runtime.maxclients.store(n, Relaxed)))
}

fn set_timeout(v: &[u8]) -> Result<Change, String> {
    let n = int_value(v, 0, INT_MAX)? as u64;
    Ok(Box::new(move |s| s.config.runtime.timeout.store(n, Relaxed)))
}

fn set_keepalive(v: &[u8]) -> Result<Change, String> {
    let n = int_value(v, 0, INT_MAX)? as u64;
    Ok(Box::new(move |s| s.config.runtime.tcp_keepalive.store(n, Relaxed)))
}

fn set_requirepass(v: &[u8]) -> Result<Change, String> {
    let pass = (!v.is_empty()).then(|| v.to_vec());
    Ok(Box::new(move |s| {
        let rt = &s.config.runtime;
        rt.has_password.store(pass.is_some(), Relaxed);
        *rt.requirepass.write() = pass;
    }))
}

fn set_proto_max_bulk_len(v: &[u8]) -> Result<Change, String> {
    let n = memory_value(v, MB, i64::MAX as u64)? as usize;
    Ok(Box::new(move |s| s.config.runtime.proto_max_bulk_len.store(n, Relaxed)))
}

fn set_query_buffer_limit(v: &[u8]) -> Result<Change, String> {
    let n = memory_value(v, MB, i64::MAX as u64)? as usize;
    Ok(Box::new(move |s| s.config.runtime.client_query_buffer_limit.store(n, Relaxed)))
}

/// `<class> <hard> <soft> <soft seconds>` groups, as in redis.conf. Only the
/// hard limits of normal and pub/sub clients exist here.
fn set_obuf_limits(v: &[u8]) -> Result<Change, String> {
    let words: Vec<&str> = text(v)?.split_whitespace().collect();
    if words.is_empty() || words.len() % 4 != 0 {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let (mut normal, mut pubsub) = (None, None);
    for group in words.chunks(4) {
        let class = group[0].to_ascii_lowercase();
        if !matches!(class.as_str(), "normal" | "slave" | "replica" | "pubsub") {
            return Err("Invalid client class specified in buffer limit configuration.".into());
        }
        let hard = parse_memory(group[1]);
        let soft = parse_memory(group[2]);
        let secs = group[3].parse::<i64>().ok().filter(|s| *s >= 0);
        let (Some(hard), Some(_), Some(_)) = (hard, soft, secs) else {
            return Err("Error in hard, soft or soft_seconds setting in buffer limit configuration.".into());
        };
        match class.as_str() {
            "normal" => normal = Some(hard as usize),
            "pubsub" => pubsub = Some(hard as usize),
            _ => {}
        }
    }
    Ok(Box::new(move |s| {
        let rt = &s.config.runtime;
        if let Some(n) = normal {
            rt.obuf_limit_normal.store(n, Relaxed);
        }
        if let Some(n) = pubsub {
            rt.obuf_limit_pubsub.store(n, Relaxed);
        }
    }))
}

fn set_loglevel(v: &[u8]) -> Result<Change, String> {
    let level = enum_value(v, &["debug", "verbose", "notice", "warning"])?;
    Ok(Box::new(move |s| {
        *s.config.runtime.loglevel.write() = level.to_string();
        crate::logging::set_level(level);
    }))
}

pub fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn set_adaptive_threads(v: &[u8]) -> Result<Change, String> {
    let on = enum_value(v, &["yes", "no"])? == "yes";
    Ok(Box::new(move |s| s.balance.set_adaptive(on)))
}

fn set_lfu_log_factor(v: &[u8]) -> Result<Change, String> {
    let n = int_value(v, 0, INT_MAX)? as u32;
    Ok(Box::new(move |s| s.ks.set_lfu_log_factor(n)))
}

fn set_lfu_decay_time(v: &[u8]) -> Result<Change, String> {
    let n = int_value(v, 0, INT_MAX)? as u32;
    Ok(Box::new(move |s| s.ks.set_lfu_decay_minutes(n)))
}

fn no_change() -> Result<Change, String> {
    Ok(Box::new(|_| {}))
}

fn set_save(v: &[u8]) -> Result<Change, String> {
    if v.iter().all(u8::is_ascii_whitespace) {
        no_change()
    } else {
        Err("snapshotting (RDB) is not supported by this server".into())
    }
}

fn set_appendonly(v: &[u8]) -> Result<Change, String> {
    if eq_ic(v, "no") {
        no_change()
    } else if eq_ic(v, "yes") {
        Err("the append only file (AOF) is not supported by this server".into())
    } else {
        Err("argument must be 'yes' or 'no'".into())
    }
}

fn set_notify_keyspace_events(v: &[u8]) -> Result<Change, String> {
    if v.is_empty() { no_change() } else { Err("keyspace notifications are not supported by this server".into()) }
}

fn find_param(name: &[u8]) -> Option<&'static Param> {
    PARAMS.iter().find(|p| eq_ic(name, p.name))
}

fn config(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    match subcommand("config", CONFIG_SUBS, args)? {
        "get" => config_get(ctx.shared, &args[2..], out),
        "set" => config_set(ctx, &args[2..], out)?,
        "resetstat" => {
            reset_stats(ctx.shared);
            out.ok();
        }
        "rewrite" => {
            config_rewrite(ctx.shared)?;
            out.ok();
        }
        _ => help(out, CONFIG_HELP),
    }
    Ok(())
}

fn config_get(shared: &Shared, patterns: &[&[u8]], out: &mut Reply) {
    // Each parameter once, under the name it was first asked for by.
    let mut found: Vec<(String, &'static Param)> = Vec::new();
    let mut add = |name: String, p: &'static Param| {
        if !found.iter().any(|(_, q)| std::ptr::eq(*q, p)) {
            found.push((name, p));
        }
    };
    for pat in patterns {
        if pat.iter().any(|c| matches!(c, b'*' | b'?' | b'[')) {
            for p in PARAMS.iter().filter(|p| glob_match(pat, p.name.as_bytes(), true)) {
                add(p.name.to_string(), p);
            }
        } else if let Some(p) = find_param(pat) {
            add(String::from_utf8_lossy(pat).into_owned(), p);
        }
    }
    out.map(found.len());
    for (name, p) in found {
        out.bulk(name.as_bytes());
        out.bulk((p.get)(shared).as_bytes());
    }
}

fn config_set(ctx: &mut Ctx<'_>, pairs: &[&[u8]], out: &mut Reply) -> CmdResult {
    if pairs.len() % 2 != 0 {
        return Err(err::SYNTAX.into());
    }
    let failed = |name: &str, why: &str| -> CmdError {
        format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}").into()
    };
    // Names first (unknown, immutable, duplicate): the first problem wins.
    let mut params: Vec<&'static Param> = Vec::with_capacity(pairs.len() / 2);
    for pair in pairs.chunks(2) {
        let Some(p) = find_param(pair[0]) else {
            return Err(
                format!("ERR Unknown option or number of arguments for CONFIG SET - '{}'", lossy(pair[0])).into()
            );
        };
        if p.set.is_none() {
            return Err(failed(&lossy(pair[0]), "can't set immutable config"));
        }
        if params.iter().any(|q| std::ptr::eq(*q, p)) {
            return Err(failed(&lossy(pair[0]), "duplicate parameter"));
        }
        params.push(p);
    }
    // Then values: nothing changes unless every value is valid.
    let mut changes = Vec::with_capacity(params.len());
    for (p, pair) in params.iter().zip(pairs.chunks(2)) {
        let setter = p.set.expect("checked above");
        changes.push(setter(pair[1]).map_err(|why| failed(p.name, &why))?);
    }
    for change in changes {
        change(ctx.shared);
    }
    if params.iter().any(|p| p.name == "maxmemory" || p.name == "maxmemory-policy") {
        evict_to_limit(ctx);
    }
    out.ok();
    Ok(())
}

/// After the limit is lowered, evict right away (as Redis does) rather than
/// at the next write.
fn evict_to_limit(ctx: &Ctx<'_>) {
    // Inside EXEC partitions are held: the next write outside it evicts.
    if ctx.in_exec {
        return;
    }
    let shared = ctx.shared;
    let mut last = u64::MAX;
    while shared.maxmemory() > 0 {
        let used = shared.used_memory();
        // Stop when under the limit, or when a round freed nothing.
        if used <= shared.maxmemory() || used >= last || crate::memory::ensure_memory(shared, ctx.keys.stats) {
            break;
        }
        last = used;
    }
}

fn reset_stats(shared: &Shared) {
    for w in &shared.workers {
        for c in w.cmds.iter() {
            c.reset();
        }
        w.server.reset();
        w.store.reset();
    }
    shared.stat_reset_time.store(unix_secs(), Relaxed);
}

/// Directives CONFIG REWRITE maintains — the runtime settings the config file
/// format accepts — with their defaults.
const REWRITTEN: &[(&str, &str)] = &[
    ("maxmemory", "0"),
    ("maxmemory-policy", "noeviction"),
    ("maxmemory-samples", "5"),
    ("maxclients", "10000"),
    ("timeout", "0"),
    ("tcp-keepalive", "300"),
    ("requirepass", ""),
    ("loglevel", "notice"),
    ("proto-max-bulk-len", "512mb"),
    ("client-query-buffer-limit", "1gb"),
    ("adaptive-threads", "yes"),
];

const REWRITE_MARKER: &str = "# Generated by CONFIG REWRITE";

fn config_rewrite(shared: &Shared) -> CmdResult {
    let Some(path) = shared.config.startup.config_file.as_ref() else {
        return Err("ERR The server is running without a config file".into());
    };
    let fail = |e: std::io::Error| CmdError::from(format!("ERR Rewriting config file: {e}"));
    let old = std::fs::read_to_string(path).map_err(fail)?;
    let new = rewrite_config_text(&old, |name| directive_value(shared, name));
    // Write a sibling file and rename it over: the file is never half-written.
    let mut tmp = path.clone().into_os_string();
    tmp.push(format!(".rewrite-{}", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        // Keep the file's permissions (it may hold requirepass).
        f.set_permissions(std::fs::metadata(path)?.permissions())?;
        f.write_all(new.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(e)
    })
}

/// The value CONFIG REWRITE writes for a directive (memory in Redis's units).
fn directive_value(shared: &Shared, name: &str) -> String {
    let v = find_param(name.as_bytes()).map(|p| (p.get)(shared)).unwrap_or_default();
    match name {
        "maxmemory" | "proto-max-bulk-len" | "client-query-buffer-limit" => {
            v.parse::<u64>().map(format_memory).unwrap_or(v)
        }
        _ => v,
    }
}

/// Rewrites config text: managed directives take their current value in
/// place (later duplicates are dropped), missing non-default ones are
/// appended; every other line stays as it was.
fn rewrite_config_text(old: &str, value_of: impl Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(old.len() + 256);
    let mut written: Vec<&str> = Vec::new();
    for line in old.lines() {
        let name = line.split_whitespace().next().unwrap_or("").to_ascii_lowercase();
        match REWRITTEN.iter().find(|(n, _)| *n == name) {
            Some(&(n, _)) => {
                if !written.contains(&n) {
                    written.push(n);
                    let _ = writeln!(out, "{n} {}", quote_config_value(&value_of(n)));
                }
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    let mut marker = old.lines().any(|l| l == REWRITE_MARKER);
    for &(n, default) in REWRITTEN {
        let v = value_of(n);
        if written.contains(&n) || v == default {
            continue;
        }
        if !marker {
            out.push_str(REWRITE_MARKER);
            out.push('\n');
            marker = true;
        }
        let _ = writeln!(out, "{n} {}", quote_config_value(&v));
    }
    out
}

/// Formats bytes as Redis's CONFIG REWRITE does (gb/mb/kb when exact).
fn format_memory(n: u64) -> String {
    const GB: u64 = 1024 * MB;
    match n {
        0 => "0".into(),
        n if n % GB == 0 => format!("{}gb", n / GB),
        n if n % MB == 0 => format!("{}mb", n / MB),
        n if n % 1024 == 0 => format!("{}kb", n / 1024),
        n => n.to_string(),
    }
}

/// Quotes a config file value when needed (the file is read with
/// `split_quoted`, which understands these escapes).
fn quote_config_value(v: &str) -> String {
    let plain = !v.is_empty() && v.bytes().all(|c| c.is_ascii_graphic() && !matches!(c, b'"' | b'\'' | b'\\'));
    if plain {
        return v.to_string();
    }
    let mut s = String::from("\"");
    for c in v.bytes() {
        match c {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            b' ' => s.push(' '),
            c if c.is_ascii_graphic() => s.push(c as char),
            c => {
                let _ = write!(s, "\\x{c:02x}");
            }
        }
    }
    s.push('"');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_units_for_rewrite() {
        assert_eq!(format_memory(0), "0");
        assert_eq!(format_memory(100 * MB), "100mb");
        assert_eq!(format_memory(2 << 30), "2gb");
        assert_eq!(format_memory(3072), "3kb");
        assert_eq!(format_memory(1000), "1000");
    }

    #[test]
    fn config_values_quoted_when_needed() {
        assert_eq!(quote_config_value("allkeys-lru"), "allkeys-lru");
        assert_eq!(quote_config_value(""), "\"\"");
        assert_eq!(quote_config_value("a b\"c"), "\"a b\\\"c\"");
        for v in ["p\\w\x01 x", "", "it's"] {
            let parsed = crate::protocol::split_quoted(quote_config_value(v).as_bytes()).unwrap();
            assert_eq!(parsed, vec![v.as_bytes().to_vec()], "{v:?}");
        }
    }

    fn defaults_with(name: &str, over: &[(&str, &str)]) -> String {
        over.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.to_string())
            .unwrap_or_else(|| REWRITTEN.iter().find(|(n, _)| *n == name).unwrap().1.to_string())
    }

    #[test]
    fn rewrite_replaces_in_place_and_appends() {
        let old = "# my conf\nport 7000\nmaxmemory 10mb\nMAXMEMORY 20mb\n# maxmemory-policy x\n";
        let set = [("maxmemory", "64mb"), ("maxmemory-policy", "allkeys-lru")];
        let new = rewrite_config_text(old, |n| defaults_with(n, &set));
        assert_eq!(
            new,
            "# my conf\nport 7000\nmaxmemory 64mb\n# maxmemory-policy x\n# Generated by CONFIG REWRITE\n\
             maxmemory-policy allkeys-lru\n"
        );
        // Idempotent: a second rewrite changes nothing.
        assert_eq!(rewrite_config_text(&new, |n| defaults_with(n, &set)), new);
        // A directive back at its default stays in place with that value.
        let back = rewrite_config_text(&new, |n| defaults_with(n, &[]));
        assert!(back.contains("\nmaxmemory 0\n") && back.contains("\nmaxmemory-policy noeviction\n"), "{back}");
    }
}
