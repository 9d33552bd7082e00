//! CONFIG GET, SET, RESETSTAT and REWRITE, over the parameter table in
//! `crate::config::params`.

use super::Node;
use super::args::{help, lossy, subcommand};
use super::stats::unix_secs;
use super::{CmdError, CmdResult, CommandDef, Ctx, Keys, err};
use crate::base::{eq_ic, glob_match};
use crate::config::file::{replace_file, rewrite_config_text};
use crate::config::params::{PARAMS, Param, config_names};
use crate::config::values::Origin;
use crate::protocol::Reply;
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

fn find_param(name: &[u8]) -> Option<&'static Param> {
    config_names().find(|(n, _)| eq_ic(name, n)).map(|(_, p)| p)
}

fn config(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    match subcommand("config", CONFIG_SUBS, args)? {
        "get" => config_get(ctx.node, &args[2..], out),
        "set" => config_set(ctx, &args[2..], out)?,
        "resetstat" => {
            reset_stats(ctx.node);
            out.ok();
        }
        "rewrite" => {
            config_rewrite(ctx.node)?;
            out.ok();
        }
        _ => help(out, CONFIG_HELP),
    }
    Ok(())
}

fn config_get(node: &Node, patterns: &[&[u8]], out: &mut Reply) {
    // Each CONFIG name once, under the name it was first asked for by.
    let mut found: Vec<(String, &'static str, &'static Param)> = Vec::new();
    let mut add = |asked: String, name: &'static str, p: &'static Param| {
        if !found.iter().any(|(_, n, _)| *n == name) {
            found.push((asked, name, p));
        }
    };
    for pat in patterns {
        if pat.iter().any(|c| matches!(c, b'*' | b'?' | b'[')) {
            for (name, p) in config_names().filter(|(n, _)| glob_match(pat, n.as_bytes(), true)) {
                add(name.to_string(), name, p);
            }
        } else if let Some((name, p)) = config_names().find(|(n, _)| eq_ic(pat, n)) {
            add(String::from_utf8_lossy(pat).into_owned(), name, p);
        }
    }
    out.map(found.len());
    for (asked, _, p) in found {
        out.bulk(asked.as_bytes());
        out.bulk((p.get)(&node.config).as_bytes());
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
        // A start-up-only parameter set to the value it has is a no-op
        // (tools write back what CONFIG GET * showed); any other value is
        // refused as Redis refuses its immutable ones.
        if !p.mutable() && !pair[1].eq_ignore_ascii_case((p.get)(&ctx.node.config).as_bytes()) {
            return Err(failed(&lossy(pair[0]), "can't set immutable config"));
        }
        // As Redis 7.0: a name given twice is refused, a name and its alias
        // are not (the last one wins).
        if pairs.chunks(2).take(params.len()).any(|q| q[0].eq_ignore_ascii_case(pair[0])) {
            return Err(failed(&lossy(pair[0]), "duplicate parameter"));
        }
        params.push(p);
    }
    // Then values: nothing changes unless every value is valid.
    let mut values = Vec::with_capacity(params.len());
    for (p, pair) in params.iter().zip(pairs.chunks(2)) {
        values.push(p.parse(pair[1], Origin::ConfigSet).map_err(|why| failed(&lossy(pair[0]), &why))?);
    }
    // More clients than the open files limit allows (raised as far as the
    // process may) is refused, as Redis refuses it, rather than accepted
    // and silently capped.
    if let Some((p, v)) = params.iter().zip(&values).find(|(p, _)| p.name == "maxclients") {
        let wanted = v.int().max(0) as usize;
        if wanted > ctx.node.config.runtime.maxclients.load(Relaxed)
            && let Err(fit) = ctx.server.fit_maxclients(wanted)
        {
            let why =
                format!("The operating system is not able to handle the specified number of clients, try with {fit}");
            return Err(failed(p.name, &why));
        }
    }
    // TLS settings load together (certificate, key, CA, ciphers), first:
    // if the new set does not load, the old one is restored and nothing
    // else given in this CONFIG SET changes (all or nothing, as Redis).
    let is_tls = |p: &&Param| p.name.starts_with("tls-") && p.mutable();
    if params.iter().any(is_tls) {
        let before = ctx.node.config.runtime.tls.read().clone();
        for (p, v) in params.iter().zip(&values).filter(|(p, _)| is_tls(p)) {
            p.apply(&ctx.node.config, v);
        }
        if let Err(why) = ctx.server.reload_tls() {
            *ctx.node.config.runtime.tls.write() = before;
            tracing::warn!("CONFIG SET of TLS settings refused: {why}");
            let name = params.iter().find(|p| is_tls(p)).map_or("tls", |p| p.name);
            return Err(failed(name, "Unable to update TLS configuration. Check server logs."));
        }
    }
    for (p, v) in params.iter().zip(&values).filter(|(p, _)| !is_tls(p)) {
        if p.mutable() {
            p.apply(&ctx.node.config, v);
            follow_change(ctx, p.name);
        }
    }
    if params.iter().any(|p| p.name == "maxmemory" || p.name == "maxmemory-policy") {
        evict_to_limit(ctx);
    }
    out.ok();
    Ok(())
}

/// Tells the parts of the node that keep their own copy of a setting.
fn follow_change(ctx: &Ctx<'_>, name: &str) {
    let (rt, ks) = (&ctx.node.config.runtime, &ctx.node.ks);
    match name {
        // Inside EXEC partitions are held: the next eviction switches instead.
        "maxmemory-policy" if !ctx.in_exec => ks.set_policy(rt.policy()),
        "lfu-log-factor" => ks.set_lfu_log_factor(rt.lfu_log_factor.load(Relaxed)),
        "lfu-decay-time" => ks.set_lfu_decay_minutes(rt.lfu_decay_minutes.load(Relaxed)),
        "adaptive-threads" => ctx.server.set_adaptive_threads(rt.adaptive_threads.load(Relaxed)),
        "hash-max-listpack-entries"
        | "hash-max-listpack-value"
        | "set-max-intset-entries"
        | "zset-max-listpack-entries"
        | "zset-max-listpack-value" => apply_encoding_thresholds(rt),
        "requirepass" => super::acl::apply_requirepass(ctx.node),
        _ => {}
    }
}

/// OBJECT ENCODING's thresholds, which the keyspace's collections read.
pub fn apply_encoding_thresholds(rt: &crate::config::RuntimeConfig) {
    use crate::store::encoding::{self as e, set};
    set(&e::HASH_MAX_LISTPACK_ENTRIES, rt.hash_max_listpack_entries.load(Relaxed));
    set(&e::HASH_MAX_LISTPACK_VALUE, rt.hash_max_listpack_value.load(Relaxed));
    set(&e::SET_MAX_INTSET_ENTRIES, rt.set_max_intset_entries.load(Relaxed));
    set(&e::ZSET_MAX_LISTPACK_ENTRIES, rt.zset_max_listpack_entries.load(Relaxed));
    set(&e::ZSET_MAX_LISTPACK_VALUE, rt.zset_max_listpack_value.load(Relaxed));
}

/// After the limit is lowered, evict right away (as Redis does) rather than
/// at the next write.
fn evict_to_limit(ctx: &Ctx<'_>) {
    // Inside EXEC partitions are held: the next write outside it evicts.
    if ctx.in_exec {
        return;
    }
    let node = ctx.node;
    let mut last = u64::MAX;
    while node.maxmemory() > 0 {
        let used = node.used_memory_for_eviction();
        // Stop when under the limit, or when a round freed nothing.
        if used <= node.maxmemory() || used >= last || node.ensure_memory(ctx.keys.stats) {
            break;
        }
        last = used;
    }
}

fn reset_stats(node: &Node) {
    for w in &node.workers {
        for c in w.cmds.iter() {
            c.reset();
        }
        w.server.reset();
        w.store.reset();
        w.errors.reset();
    }
    node.stat_reset_time.store(unix_secs(), Relaxed);
}

fn config_rewrite(node: &Node) -> CmdResult {
    let Some(path) = node.config.startup.config_file.as_ref() else {
        return Err("ERR The server is running without a config file".into());
    };
    let fail = |e: std::io::Error| CmdError::from(format!("ERR Rewriting config file: {e}"));
    let old = std::fs::read_to_string(path).map_err(fail)?;
    let value_of =
        |name: &str| PARAMS.iter().find(|p| p.name == name).map(|p| p.file_value(&node.config)).unwrap_or_default();
    replace_file(path, &rewrite_config_text(&old, value_of)).map_err(fail)
}
