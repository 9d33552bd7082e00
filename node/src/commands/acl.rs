//! ACL: the ACL command, AUTH's credential check, and the permission check
//! dispatch, EXEC and scripts run before a command (the users themselves
//! live in `session::acl`).

use super::Node;
use super::args::{help, lossy, subcommand};
use super::table::Resolved;
use super::{CmdError, CmdResult, CommandDef, Ctx, Keys, arg_i64, flags};
use crate::base::eq_ic;
use crate::protocol::Reply;
use crate::session::acl::{Denied, KEY_ALL, KEY_READ, KEY_WRITE, LogEntry, LogReason, Request, User};
use crate::session::client::Client;
use smallvec::SmallVec;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

pub const COMMANDS: &[CommandDef] = &[CommandDef::new("acl", -2, 0, Keys::None, acl).acl("@slow").subs(ACL_SUBS)];

const ACL_SUBS: &[&str] = &[
    "cat", "deluser", "dryrun", "genpass", "getuser", "help", "list", "load", "log", "save", "setuser", "users",
    "whoami",
];

const ACL_HELP: &[&str] = &[
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Prints this help.",
];

const NO_ACLFILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users \
     via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in \
     order to store users in the Redis configuration.";

pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// A refused command: why, and its catalog entry.
pub struct Denial {
    pub denied: Denied,
    pub id: usize,
}

/// Catalog id of what `cmd` runs: the subcommand's for containers (its
/// statistics slot: the catalog numbers commands and subcommands as the
/// command table does). None for a subcommand the catalog does not know
/// (its handler refuses it).
fn catalog_id(cmd: &Resolved<'_>) -> Option<usize> {
    match cmd.sub() {
        Some(sub) => Some(sub.slot),
        // COMMAND runs without a subcommand too; others answer with an error.
        None if cmd.unknown_sub() => (cmd.def.arity == -1).then_some(cmd.idx),
        None => Some(cmd.idx),
    }
}

/// Commands whose keys are written without being read (Redis's key specs
/// without ACCESS), so `%W~` patterns allow them.
const WRITE_ONLY: &[&str] = &[
    "del",
    "unlink",
    "setex",
    "psetex",
    "setnx",
    "mset",
    "msetnx",
    "append",
    "setrange",
    "lpush",
    "rpush",
    "lpushx",
    "rpushx",
    "linsert",
    "lset",
    "lrem",
    "ltrim",
    "sadd",
    "srem",
    "hset",
    "hsetnx",
    "hmset",
    "hdel",
    "zadd",
    "zrem",
    "zremrangebyscore",
    "zremrangebyrank",
    "zremrangebylex",
    "expire",
    "pexpire",
    "expireat",
    "pexpireat",
    "persist",
    "pfadd",
    "restore",
    "geoadd",
];

/// Commands that only test a key's existence or size: any pattern allows them.
const NO_ACCESS: &[&str] = &[
    "exists",
    "type",
    "ttl",
    "pttl",
    "expiretime",
    "pexpiretime",
    "touch",
    "hexists",
    "hstrlen",
    "sismember",
    "smismember",
    "strlen",
    "llen",
    "scard",
    "zcard",
    "hlen",
    "object",
    "memory",
];

/// Commands storing into their first key what they read from the others.
const STORE_FIRST: &[&str] = &[
    "sunionstore",
    "sinterstore",
    "sdiffstore",
    "zunionstore",
    "zinterstore",
    "zdiffstore",
    "zrangestore",
    "bitop",
    "geosearchstore",
];

/// Commands moving from their first key to their second.
const MOVE: &[&str] = &["lmove", "blmove", "rpoplpush", "brpoplpush", "smove", "rename", "renamenx"];

/// The access each key of a command needs (`KEY_READ`/`KEY_WRITE`, or 0
/// when any permission will do), as Redis's key specs say.
fn key_access(def: &CommandDef, cmd_flags: u32, args: &[&[u8]], nth: usize) -> u8 {
    let name = def.name;
    if NO_ACCESS.contains(&name) {
        return 0;
    }
    // Redis's setGetKeys: a GET anywhere after the value reads the key.
    if name == "set" {
        return if args.iter().skip(3).any(|a| eq_ic(a, "get")) { KEY_ALL } else { KEY_WRITE };
    }
    if matches!(name, "copy" | "sort" | "sort_ro" | "georadius" | "georadiusbymember") {
        return if nth == 0 { KEY_READ } else { KEY_WRITE };
    }
    if name == "bitfield" {
        return if bitfield_reads_only(args) { KEY_READ } else { KEY_ALL };
    }
    if STORE_FIRST.contains(&name) {
        return if nth == 0 { KEY_WRITE } else { KEY_READ };
    }
    if MOVE.contains(&name) {
        return if nth == 0 { KEY_ALL } else { KEY_WRITE };
    }
    if WRITE_ONLY.contains(&name) {
        return KEY_WRITE;
    }
    if cmd_flags & flags::READONLY != 0 {
        return KEY_READ;
    }
    KEY_ALL
}

/// Redis's bitfieldGetKeys: read-only unless a SET or INCRBY (or
/// anything it cannot parse) comes.
fn bitfield_reads_only(args: &[&[u8]]) -> bool {
    let mut i = 2;
    while i < args.len() {
        let rest = args.len() - i - 1;
        if eq_ic(args[i], "get") && rest >= 2 {
            i += 3;
        } else if eq_ic(args[i], "overflow") && rest >= 1 {
            i += 2;
        } else {
            return false;
        }
    }
    true
}

/// Channel positions of the pub/sub commands: (position, is a pattern).
fn channels(name: &str, args: &[&[u8]]) -> SmallVec<[(usize, bool); 4]> {
    match name {
        "subscribe" | "ssubscribe" => (1..args.len()).map(|i| (i, false)).collect(),
        "psubscribe" => (1..args.len()).map(|i| (i, true)).collect(),
        "publish" | "spublish" if args.len() > 1 => [(1, false)].into_iter().collect(),
        _ => SmallVec::new(),
    }
}

/// Whether `user` may run the request `cmd`.
pub fn check_user(node: &Node, user: &User, cmd: &Resolved<'_>) -> Result<(), Denial> {
    if user.unrestricted() {
        return Ok(());
    }
    let Some(id) = catalog_id(cmd) else { return Ok(()) };
    let (def, args) = (cmd.def, cmd.args);
    let is_sub = node.acl.catalog.entries[id].parent.is_some();
    // A subcommand's own flags where Redis's metadata describes it.
    let cmd_flags = match cmd.sub() {
        Some(sub) if sub.arity.is_some() => sub.flags,
        _ => def.flags,
    };
    let positions = cmd.key_positions();
    let keys: SmallVec<[(usize, u8); 8]> = positions
        .iter()
        .enumerate()
        .map(|(nth, &pos)| {
            let access = if def.has(flags::RUNS_SCRIPT) {
                if def.name.ends_with("_ro") { KEY_READ } else { KEY_ALL }
            } else {
                key_access(def, cmd_flags, args, nth)
            };
            (pos, access)
        })
        .collect();
    let chans = channels(def.name, args);
    let req = Request {
        id,
        args,
        firstarg: if is_sub { 2 } else { 1 },
        no_auth: def.has(flags::NO_AUTH),
        keys: &keys,
        channels: &chans,
    };
    user.check(&req).map_err(|denied| Denial { denied, id })
}

/// The client's own check: its user, re-read if the table changed.
#[inline]
pub fn check(node: &Node, client: &mut Client, cmd: &Resolved<'_>) -> Result<(), Denial> {
    client.refresh_user(&node.acl);
    if client.user.unrestricted() {
        return Ok(());
    }
    let user = client.user.clone();
    check_user(node, &user, cmd)
}

/// Redis 7.0's NOPERM reply for a refused command.
pub fn noperm(node: &Node, d: &Denial) -> String {
    match d.denied {
        Denied::Command => {
            format!("NOPERM this user has no permissions to run the '{}' command", node.acl.catalog.entries[d.id].name)
        }
        Denied::Key(_) => "NOPERM this user has no permissions to access one of the keys used as arguments".into(),
        Denied::Channel(_) => {
            "NOPERM this user has no permissions to access one of the channels used as arguments".into()
        }
    }
}

/// What `redis.call` answers a refused command with.
pub fn script_denial(d: &Denial) -> &'static str {
    match d.denied {
        Denied::Command => "ERR The user executing the script can't run this command or subcommand",
        Denied::Key(_) => {
            "ERR The user executing the script can't access at least one of the keys mentioned in the command \
             arguments"
        }
        Denied::Channel(_) => "ERR The user executing the script can't publish to the channel mentioned in the command",
    }
}

/// Redis 7.0's reason for a queued command refused at EXEC.
pub fn exec_denial(d: &Denial) -> &'static str {
    match d.denied {
        Denied::Command => {
            "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This \
             command is no longer allowed for the following reason: no permission to execute the command or \
             subcommand"
        }
        Denied::Key(_) => {
            "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This \
             command is no longer allowed for the following reason: no permission to touch the specified keys"
        }
        Denied::Channel(_) => {
            "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This \
             command is no longer allowed for the following reason: no permission to access one of the channels \
             used as arguments"
        }
    }
}

/// Records a refusal in ACL LOG; `context` is toplevel, multi or lua.
pub fn log_denial(node: &Node, client: &Client, d: &Denial, context: &'static str, args: &[&[u8]]) {
    let cat = &node.acl.catalog;
    let (reason, object) = match d.denied {
        Denied::Command => (LogReason::Command, cat.entries[d.id].name.as_bytes().to_vec()),
        Denied::Key(p) => (LogReason::Key, args[p].to_vec()),
        Denied::Channel(p) => (LogReason::Channel, args[p].to_vec()),
    };
    let entry = LogEntry {
        count: 1,
        reason,
        context,
        object,
        username: client.user.name.clone(),
        ctime_ms: crate::store::now_ms(),
        // A script's client shows the command that ran the script.
        client_info: client_info(node, client, (context != "lua").then_some(cat.entries[d.id].name.as_str())),
    };
    node.acl.log(entry, node.config.runtime.acllog_max_len.load(Relaxed) as usize);
}

fn client_info(node: &Node, client: &Client, cmd: Option<&str>) -> String {
    let mut line = super::client_list::client_line(node, &client.info, cmd);
    if line.ends_with('\n') {
        line.pop();
    }
    line
}

/// AUTH and HELLO AUTH: checks the credentials and switches the client to
/// the user, or logs the failure (under `typed`, the command's name as sent).
pub fn authenticate(ctx: &mut Ctx<'_>, typed: &[u8], user: &[u8], pass: &[u8]) -> CmdResult {
    let acl = &ctx.node.acl;
    let generation = acl.generation();
    match acl.user(user) {
        Some(u) if u.password_ok(pass) => {
            ctx.client.set_user(u, generation);
            ctx.client.authenticated = true;
            Ok(())
        }
        _ => {
            let entry = LogEntry {
                count: 1,
                reason: LogReason::Auth,
                context: if ctx.client.multi.is_some() { "multi" } else { "toplevel" },
                object: typed.to_vec(),
                username: user.to_vec(),
                ctime_ms: crate::store::now_ms(),
                client_info: client_info(
                    ctx.node,
                    ctx.client,
                    Some(&String::from_utf8_lossy(typed).to_ascii_lowercase()),
                ),
            };
            acl.log(entry, ctx.node.config.runtime.acllog_max_len.load(Relaxed) as usize);
            Err(WRONGPASS.into())
        }
    }
}

/// After a change of the default user: whether clients must AUTH.
fn publish_auth_required(node: &Node) {
    node.config.runtime.has_password.store(node.acl.auth_required(), Relaxed);
}

/// `requirepass` (start-up or CONFIG SET): the default user's password,
/// as Redis's `ACLUpdateDefaultUserPassword`.
pub fn apply_requirepass(node: &Node) {
    let pass = node.config.runtime.password();
    let allchannels = node.config.runtime.acl_pubsub_allchannels.load(Relaxed);
    let cat = &node.acl.catalog;
    let _ = node.acl.modify(|users| -> Result<(), ()> {
        let mut u = (**users.get(b"default".as_slice()).expect("default user")).clone();
        let _ = u.apply(cat, b"resetpass", allchannels);
        match &pass {
            Some(p) => {
                let mut rule = b">".to_vec();
                rule.extend_from_slice(p);
                let _ = u.apply(cat, &rule, allchannels);
            }
            None => {
                let _ = u.apply(cat, b"nopass", allchannels);
            }
        }
        users.insert(b"default".to_vec(), Arc::new(u));
        Ok(())
    });
    publish_auth_required(node);
}

/// Start-up: the users of `aclfile`, if one is configured.
pub fn load_at_startup(node: &Node) -> Result<(), String> {
    if node.config.startup.aclfile.is_some() {
        load_file(node, 0).map_err(|e| e.0.into_owned())?;
    }
    Ok(())
}

fn acl(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    match subcommand("acl", ACL_SUBS, args)? {
        "setuser" => setuser(ctx, args, out),
        "getuser" => getuser(ctx, args[2], out),
        "deluser" => deluser(ctx, &args[2..], out),
        "list" => {
            let users = ctx.node.acl.snapshot();
            out.array(users.len());
            for u in users.values() {
                out.bulk(&describe_line(ctx.node, u));
            }
            Ok(())
        }
        "users" => {
            let users = ctx.node.acl.snapshot();
            out.array(users.len());
            for name in users.keys() {
                out.bulk(name);
            }
            Ok(())
        }
        "whoami" => {
            ctx.client.refresh_user(&ctx.node.acl);
            out.bulk(&ctx.client.user.name);
            Ok(())
        }
        "cat" => cat(ctx, args, out),
        "genpass" => genpass(args, out),
        "log" => log(ctx, args, out),
        "dryrun" => dryrun(ctx, args, out),
        "save" => {
            save_file(ctx.node)?;
            out.ok();
            Ok(())
        }
        "load" => {
            if load_file(ctx.node, ctx.client.id())? {
                ctx.client.close_after_reply = true;
            }
            out.ok();
            Ok(())
        }
        _ => {
            help(out, ACL_HELP);
            Ok(())
        }
    }
}

/// `user <name> <rules>`: one line of ACL LIST and of the ACL file.
fn describe_line(node: &Node, u: &User) -> Vec<u8> {
    let mut line = b"user ".to_vec();
    line.extend_from_slice(&u.name);
    line.push(b' ');
    line.extend_from_slice(&u.describe(&node.acl.catalog));
    line
}

/// Redis's `ACLStringSetUser`: every rule applies to a copy, which
/// replaces the user only when all of them are valid.
fn set_user_rules(node: &Node, name: &[u8], rules: &[&[u8]]) -> Result<(), CmdError> {
    let merged = crate::session::acl::merge_selector_args(rules).map_err(|j| {
        CmdError::from(format!("ERR Unmatched parenthesis in acl selector starting at '{}'.", lossy(rules[j])))
    })?;
    let allchannels = node.config.runtime.acl_pubsub_allchannels.load(Relaxed);
    let cat = &node.acl.catalog;
    let mut before = None;
    let after = node.acl.modify(|users| {
        let mut u = match users.get(name) {
            Some(old) => {
                before = Some(old.clone());
                (**old).clone()
            }
            None => User::new(name, cat, allchannels),
        };
        for rule in &merged {
            u.apply(cat, rule, allchannels).map_err(|e| {
                CmdError::from(format!("ERR Error in ACL SETUSER modifier '{}': {}", lossy(rule), e.message()))
            })?;
        }
        let u = Arc::new(u);
        users.insert(name.to_vec(), u.clone());
        Ok::<_, CmdError>(u)
    })?;
    if let Some(before) = before {
        kill_pubsub_clients_if_needed(node, &before, &after);
    }
    if name == b"default" {
        publish_auth_required(node);
    }
    Ok(())
}

fn setuser(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let name = args[2];
    if crate::session::acl::has_spaces(name) {
        return Err("ERR Usernames can't contain spaces or null characters".into());
    }
    set_user_rules(ctx.node, name, &args[3..])?;
    out.ok();
    Ok(())
}

/// Redis 7.0's `ACLKillPubsubClientsIfNeeded`: subscribers of `before`
/// whose channels `after` no longer allows are disconnected.
fn kill_pubsub_clients_if_needed(node: &Node, before: &User, after: &User) {
    let Some(upcoming) = after.channel_rules() else { return };
    // Every old rule kept: nothing is revoked (losing allchannels is).
    if before.channel_rules().is_some_and(|old| old.iter().all(|c| upcoming.contains(c))) {
        return;
    }
    for info in node.clients.all() {
        let subscriptions = info.subs.load(Relaxed) + info.psubs.load(Relaxed) + info.ssubs.load(Relaxed);
        if subscriptions == 0 || *info.user.lock() != before.name {
            continue;
        }
        let offends = |map: &crate::session::pubsub::SubscriptionMap, is_pattern: bool| {
            map.read().iter().any(|(name, subs)| {
                subs.contains_key(&info.id) && !crate::session::acl::channel_allowed(&upcoming, name, is_pattern)
            })
        };
        if offends(&node.pubsub.patterns, true)
            || offends(&node.pubsub.channels, false)
            || offends(&node.pubsub.shard_channels, false)
        {
            info.kill();
        }
    }
}

fn getuser(ctx: &mut Ctx<'_>, name: &[u8], out: &mut Reply) -> CmdResult {
    let Some(u) = ctx.node.acl.user(name) else {
        out.null();
        return Ok(());
    };
    let cat = &ctx.node.acl.catalog;
    out.map(6);
    out.bulk(b"flags");
    let names = u.flag_names();
    out.set(names.len());
    for f in names {
        out.bulk(f.as_bytes());
    }
    out.bulk(b"passwords");
    out.array(u.passwords.len());
    for p in &u.passwords {
        out.bulk(p.as_bytes());
    }
    let selector = |out: &mut Reply, s: &crate::session::acl::Selector| {
        out.bulk(b"commands");
        out.bulk(s.commands_text(cat).as_bytes());
        out.bulk(b"keys");
        out.bulk(&s.describe_keys());
        out.bulk(b"channels");
        out.bulk(&s.describe_channels());
    };
    selector(out, u.root());
    out.bulk(b"selectors");
    out.array(u.extra_selectors().len());
    for s in u.extra_selectors() {
        out.map(3);
        selector(out, s);
    }
    Ok(())
}

fn deluser(ctx: &mut Ctx<'_>, names: &[&[u8]], out: &mut Reply) -> CmdResult {
    if names.iter().any(|n| *n == b"default") {
        return Err("ERR The 'default' user cannot be removed".into());
    }
    let removed = ctx.node.acl.modify(|users| {
        let removed: Vec<Vec<u8>> = names.iter().filter_map(|n| users.remove(*n).map(|u| u.name.clone())).collect();
        Ok::<_, CmdError>(removed)
    })?;
    kill_clients_of(ctx, &removed);
    out.int(removed.len() as i64);
    Ok(())
}

/// Disconnects the clients authenticated as any of `names`; the caller
/// itself after its reply.
fn kill_clients_of(ctx: &mut Ctx<'_>, names: &[Vec<u8>]) {
    if names.is_empty() {
        return;
    }
    let me = ctx.client.id();
    for info in ctx.node.clients.all() {
        if names.contains(&info.user.lock()) {
            if info.id == me {
                ctx.client.close_after_reply = true;
            } else {
                info.kill();
            }
        }
    }
}

fn cat(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    use crate::session::acl::{CATEGORIES, category_bit};
    if args.len() == 2 {
        out.array(CATEGORIES.len());
        for c in CATEGORIES {
            out.bulk(c.as_bytes());
        }
        return Ok(());
    }
    if args.len() > 3 {
        return Err(syntax(args));
    }
    let Some(bit) = category_bit(args[2]) else {
        return Err(format!("ERR Unknown category '{}'", lossy(args[2])).into());
    };
    let cat = &ctx.node.acl.catalog;
    let names: Vec<&str> = cat.entries.iter().filter(|e| e.categories & bit != 0).map(|e| e.name.as_str()).collect();
    out.array(names.len());
    for n in names {
        out.bulk(n.as_bytes());
    }
    Ok(())
}

/// Redis's reply to a subcommand given the wrong number of arguments
/// that its arity allows.
fn syntax(args: &[&[u8]]) -> CmdError {
    format!("ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.", lossy(args[1])).into()
}

fn genpass(args: &[&[u8]], out: &mut Reply) -> CmdResult {
    const BAD: &str = "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number \
                       up to 4096";
    let bits = match args.len() {
        2 => 256,
        3 => {
            let b = arg_i64(args[2])?;
            if !(1..=4096).contains(&b) {
                return Err(BAD.into());
            }
            b as usize
        }
        _ => return Err(syntax(args)),
    };
    let chars = bits.div_ceil(4);
    let mut bytes = vec![0u8; chars.div_ceil(2)];
    random_bytes(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    out.bulk(&hex.as_bytes()[..chars]);
    Ok(())
}

/// Secure random bytes (the kernel's), with a fallback that is at least
/// unpredictable across runs.
fn random_bytes(buf: &mut [u8]) {
    use std::io::Read;
    if let Ok(mut f) = std::fs::File::open("/dev/urandom")
        && f.read_exact(buf).is_ok()
    {
        return;
    }
    for chunk in buf.chunks_mut(8) {
        let r = crate::base::random::fast_rand().to_le_bytes();
        chunk.copy_from_slice(&r[..chunk.len()]);
    }
}

fn log(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let mut count = 10usize;
    match args.len() {
        2 => {}
        3 if eq_ic(args[2], "reset") => {
            ctx.node.acl.log_reset();
            out.ok();
            return Ok(());
        }
        3 => count = arg_i64(args[2])?.max(0) as usize,
        _ => return Err(syntax(args)),
    }
    let now = crate::store::now_ms();
    let entries = ctx.node.acl.log_entries(count);
    out.array(entries.len());
    for e in entries {
        out.map(7);
        out.bulk(b"count");
        out.int(e.count as i64);
        out.bulk(b"reason");
        out.bulk(e.reason.name().as_bytes());
        out.bulk(b"context");
        out.bulk(e.context.as_bytes());
        out.bulk(b"object");
        out.bulk(&e.object);
        out.bulk(b"username");
        out.bulk(&e.username);
        out.bulk(b"age-seconds");
        out.double(now.saturating_sub(e.ctime_ms) as f64 / 1000.0);
        out.bulk(b"client-info");
        out.bulk(e.client_info.as_bytes());
    }
    Ok(())
}

fn dryrun(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let Some(user) = ctx.node.acl.user(args[2]) else {
        return Err(format!("ERR User '{}' not found", lossy(args[2])).into());
    };
    let cmd = &args[3..];
    let Some(resolved) = ctx.node.table.resolve(cmd, usize::MAX) else {
        return Err(format!("ERR Command '{}' not found", lossy(cmd[0])).into());
    };
    let name = match catalog_id(&resolved) {
        Some(id) => ctx.node.acl.catalog.entries[id].name.clone(),
        None => return Err(format!("ERR Command '{}' not found", lossy(cmd[0])).into()),
    };
    if resolved.arity_error().is_some() {
        return Err(format!("ERR wrong number of arguments for '{name}' command").into());
    }
    match check_user(ctx.node, &user, &resolved) {
        Ok(()) => out.ok(),
        Err(d) => {
            let text = match d.denied {
                Denied::Command => format!("This user has no permissions to run the '{name}' command"),
                Denied::Key(p) => format!("This user has no permissions to access the '{}' key", lossy(cmd[p])),
                Denied::Channel(p) => {
                    format!("This user has no permissions to access the '{}' channel", lossy(cmd[p]))
                }
            };
            out.bulk(text.as_bytes());
        }
    }
    Ok(())
}

/// ACL SAVE: every user, one `user ...` line each, written atomically.
fn save_file(node: &Node) -> CmdResult {
    let Some(path) = &node.config.startup.aclfile else {
        return Err(NO_ACLFILE.into());
    };
    let mut text = Vec::new();
    for u in node.acl.snapshot().values() {
        text.extend_from_slice(&describe_line(node, u));
        text.push(b'\n');
    }
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let written = std::fs::write(&tmp, &text).and_then(|_| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return Err(
            "ERR There was an error trying to save the ACLs. Please check the server logs for more information".into(),
        );
    }
    Ok(())
}

/// ACL LOAD: replaces every user by the file's, or changes nothing when
/// any line is wrong. Clients of users that were replaced are disconnected
/// (the default user's keep their connection, as in Redis); true when
/// that includes the caller `me`, which goes after its reply.
fn load_file(node: &Node, me: u64) -> Result<bool, CmdError> {
    let Some(path) = &node.config.startup.aclfile else {
        return Err(NO_ACLFILE.into());
    };
    let text = std::fs::read(path).map_err(|e| {
        CmdError::from(format!("ERR Error loading ACLs, opening file '{}': {}", path.display(), io_reason(&e)))
    })?;
    let shown = path.display().to_string();
    let allchannels = node.config.runtime.acl_pubsub_allchannels.load(Relaxed);
    let cat = &node.acl.catalog;
    let mut users: BTreeMap<Vec<u8>, Arc<User>> = BTreeMap::new();
    // Redis 7.0's `ACLLoadFromFile`: every line is checked and every
    // problem reported; words are separated by single spaces.
    let mut errors = String::new();
    for (n, line) in text.split(|&c| c == b'\n').enumerate() {
        let lineno = n + 1;
        let line = trim(line, b" \t\r\n");
        if line.is_empty() {
            continue;
        }
        let words: Vec<&[u8]> = line.split(|&c| c == b' ').collect();
        if words[0] != b"user" || words.len() < 2 {
            errors.push_str(&format!("{shown}:{lineno} should start with user keyword followed by the username. "));
            continue;
        }
        let name = words[1];
        if crate::session::acl::has_spaces(name) {
            errors.push_str(&format!("'{shown}:{lineno}: username '{}' contains invalid characters. ", lossy(name)));
            continue;
        }
        if users.contains_key(name) {
            errors.push_str(&format!("WARNING: Duplicate user '{}' found on line {lineno}. ", lossy(name)));
            continue;
        }
        let merged = crate::session::acl::merge_selector_args(&words[2..]).unwrap_or_else(|_| {
            errors.push_str(&format!("{shown}:{lineno}: Unmatched parenthesis in selector definition."));
            Vec::new()
        });
        let mut u = User::new(name, cat, allchannels);
        let mut reported = false;
        for rule in &merged {
            let rule = trim(rule, b"\t\r\n");
            match u.apply(cat, rule, allchannels) {
                Ok(()) => {}
                // Unknown commands are named; of other errors only the first.
                Err(e @ crate::session::acl::RuleError::UnknownCommand) => errors.push_str(&format!(
                    "{shown}:{lineno}: Error in applying operation '{}': {}. ",
                    lossy(rule),
                    e.message()
                )),
                Err(e) if !reported => {
                    errors.push_str(&format!("{shown}:{lineno}: {}. ", e.message()));
                    reported = true;
                }
                Err(_) => {}
            }
        }
        users.insert(name.to_vec(), Arc::new(u));
    }
    if !errors.is_empty() {
        errors.push_str("WARNING: ACL errors detected, no change to the previously active ACL rules was performed");
        return Err(format!("ERR {errors}").into());
    }
    let default_missing = !users.contains_key(b"default".as_slice());
    let old = node.acl.modify(|table| {
        let old = std::mem::take(table);
        *table = users;
        if default_missing {
            table.insert(b"default".to_vec(), Arc::new(User::new_default(cat)));
        }
        Ok::<_, CmdError>(old)
    })?;
    let replaced: Vec<Vec<u8>> = old.keys().filter(|k| k.as_slice() != b"default").cloned().collect();
    let mut close_me = false;
    for info in node.clients.all() {
        if replaced.contains(&info.user.lock()) {
            if info.id == me {
                close_me = true;
            } else {
                info.kill();
            }
        }
    }
    publish_auth_required(node);
    Ok(close_me)
}

/// `bytes` without the leading and trailing bytes in `set` (sdstrim).
fn trim<'a>(bytes: &'a [u8], set: &[u8]) -> &'a [u8] {
    let start = bytes.iter().position(|b| !set.contains(b)).unwrap_or(bytes.len());
    let end = bytes.iter().rposition(|b| !set.contains(b)).map_or(start, |e| e + 1);
    &bytes[start..end]
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "No such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "Permission denied".into(),
        _ => e.to_string(),
    }
}
