//! Connection commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET, CLIENT.
//!
//! These act on the calling connection's own state (`Client`) and, for
//! CLIENT LIST/KILL, on the shared view of other clients (`ClientInfo`).

use super::args::{help, lossy, subcommand};
use super::{CmdError, CmdResult, CommandDef, Ctx, Keys, REDIS_VERSION, arg_i64, err, flags};
use crate::base::eq_ic;
use crate::protocol::Reply;
use crate::session::client::{Client, ClientInfo};
use crate::session::pause::PauseMode;
use crate::session::tracking::{check_prefixes, mode};
use crate::store::NUM_DBS;
use std::sync::atomic::Ordering::Relaxed;

/// Flags of commands a client may always send (before AUTH, inside MULTI, ...).
const ALWAYS: u32 = flags::NOSCRIPT | flags::LOADING | flags::STALE | flags::FAST | flags::NO_AUTH | flags::ALLOW_BUSY;

pub const COMMANDS: &[CommandDef] = &[
    CommandDef::new("ping", -1, flags::FAST | flags::PUBSUB_CTX, Keys::None, ping).acl("@fast @connection"),
    CommandDef::new("echo", 2, flags::LOADING | flags::STALE | flags::FAST, Keys::None, echo).acl("@fast @connection"),
    CommandDef::new("hello", -1, ALWAYS, Keys::None, hello).acl("@fast @connection"),
    CommandDef::new("auth", -2, ALWAYS, Keys::None, auth).acl("@fast @connection"),
    CommandDef::new("select", 2, flags::LOADING | flags::STALE | flags::FAST, Keys::None, select)
        .acl("@fast @connection"),
    CommandDef::new("quit", -1, ALWAYS | flags::NO_QUEUE | flags::PUBSUB_CTX, Keys::None, quit)
        .acl("@fast @connection"),
    CommandDef::new("reset", 1, ALWAYS | flags::NO_QUEUE | flags::PUBSUB_CTX, Keys::None, reset)
        .acl("@fast @connection"),
    CommandDef::new("client", -2, 0, Keys::None, client).acl("@slow").subs(CLIENT_SUBS),
];

fn ping(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    if args.len() > 2 {
        return Err(err::arity("ping").into());
    }
    // A RESP2 subscriber can only receive arrays, so Redis answers with one.
    if ctx.client.in_pubsub() && !ctx.client.resp3 {
        out.array(2);
        out.bulk(b"pong");
        out.bulk(args.get(1).copied().unwrap_or(b""));
        return Ok(());
    }
    match args.get(1) {
        Some(msg) => out.bulk(msg),
        None => out.simple("PONG"),
    }
    Ok(())
}

fn echo(_ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    out.bulk(args[1]);
    Ok(())
}

fn auth(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    if ctx.client.port == crate::session::client::PortKind::Admin {
        return admin_auth(ctx, args, out);
    }
    match args.len() {
        2 => {
            if ctx.node.acl.default_user().nopass {
                return Err("ERR AUTH <password> called without any password configured for the default user. \
                            Are you sure your configuration is correct?"
                    .into());
            }
            super::acl::authenticate(ctx, args[0], b"default", args[1])?;
        }
        3 => super::acl::authenticate(ctx, args[0], args[1], args[2])?,
        _ => return Err(err::SYNTAX.into()),
    }
    out.ok();
    Ok(())
}

/// AUTH on cluster mode's admin port: its own password, no users.
fn admin_auth(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let expected = ctx.node.cluster.as_ref().and_then(|c| c.admin_password.as_deref());
    match (expected, args) {
        (None, _) => {
            return Err("ERR AUTH <password> called without any password configured for the default user. \
                        Are you sure your configuration is correct?"
                .into());
        }
        (Some(p), [_, given]) if *given == p => ctx.client.authenticated = true,
        (Some(_), [_, _]) => return Err("WRONGPASS invalid username-password pair or user is disabled.".into()),
        _ => return Err(err::SYNTAX.into()),
    }
    out.ok();
    Ok(())
}

/// Redis accepts client names made of printable ASCII without spaces.
fn valid_client_attr(name: &[u8]) -> bool {
    name.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

const BAD_NAME: &str = "ERR Client names cannot contain spaces, newlines or special characters.";

fn set_name(client: &Client, name: &[u8]) {
    *client.info.name.lock() = if name.is_empty() { None } else { Some(name.to_vec()) };
}

fn hello(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let mut proto = None;
    let mut next = 1;
    if let Some(v) = args.get(1) {
        let v = crate::base::parse_i64(v)
            .ok_or(CmdError::from("ERR Protocol version is not an integer or out of range"))?;
        if !(2..=3).contains(&v) {
            return Err("NOPROTO unsupported protocol version".into());
        }
        proto = Some(v);
        next = 2;
    }
    let mut credentials = None;
    let mut name = None;
    while next < args.len() {
        let more = args.len() - 1 - next;
        let opt = args[next];
        if eq_ic(opt, "auth") && more >= 2 {
            credentials = Some((args[next + 1], args[next + 2]));
            next += 3;
        } else if eq_ic(opt, "setname") && more >= 1 {
            if !valid_client_attr(args[next + 1]) {
                return Err(BAD_NAME.into());
            }
            name = Some(args[next + 1]);
            next += 2;
        } else {
            return Err(format!("ERR Syntax error in HELLO option '{}'", lossy(opt)).into());
        }
    }
    if let Some((user, pass)) = credentials {
        super::acl::authenticate(ctx, args[0], user, pass)?;
    }
    if !ctx.client.authenticated {
        return Err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH \
                    <user> <pass> option can be used to authenticate the client and select the RESP protocol \
                    version at the same time"
            .into());
    }
    if let Some(name) = name {
        set_name(ctx.client, name);
    }
    if let Some(v) = proto {
        let resp3 = v == 3;
        ctx.client.resp3 = resp3;
        // The reply to HELLO itself already uses the new protocol.
        out.resp3 = resp3;
        ctx.client.info.resp.store(v as u8, Relaxed);
    }
    out.map(7);
    out.bulk(b"server");
    out.bulk(b"redis");
    out.bulk(b"version");
    out.bulk(REDIS_VERSION.as_bytes());
    out.bulk(b"proto");
    out.int(if ctx.client.resp3 { 3 } else { 2 });
    out.bulk(b"id");
    out.int(ctx.client.id() as i64);
    out.bulk(b"mode");
    out.bulk(b"standalone");
    out.bulk(b"role");
    out.bulk(b"master");
    out.bulk(b"modules");
    out.array(0);
    Ok(())
}

fn select(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let db = arg_i64(args[1])?;
    if ctx.node.cluster.is_some() && db != 0 {
        return Err("ERR SELECT is not allowed in cluster mode".into());
    }
    if db < 0 || db >= NUM_DBS as i64 {
        return Err("ERR DB index is out of range".into());
    }
    select_db(ctx, db as usize);
    out.ok();
    Ok(())
}

fn select_db(ctx: &mut Ctx<'_>, db: usize) {
    ctx.client.db = db;
    ctx.keys.db = db;
    ctx.client.info.db.store(db as u32, Relaxed);
}

fn quit(ctx: &mut Ctx<'_>, _args: &[&[u8]], out: &mut Reply) -> CmdResult {
    ctx.client.close_after_reply = true;
    out.ok();
    Ok(())
}

/// RESET: back to the state of a fresh connection.
fn reset(ctx: &mut Ctx<'_>, _args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let client = &mut *ctx.client;
    client.multi = None;
    client.multi_dirty = false;
    client.info.multi.store(u32::MAX, Relaxed);
    crate::commands::transactions::unwatch_all(ctx.node, client);
    ctx.node.pubsub.unsubscribe_all(client);
    if client.monitor {
        client.monitor = false;
        ctx.node.monitors.remove(client.info.id);
    }
    let broadcasting = ctx.node.tracking.disable(&client.info);
    ctx.node.ks.set_broadcasting(broadcasting);
    client.resp3 = false;
    out.resp3 = false;
    client.info.resp.store(2, Relaxed);
    *client.info.name.lock() = None;
    client.reply_off = false;
    client.reply_skip_next = false;
    client.no_evict = false;
    client.info.no_evict.store(false, Relaxed);
    client.no_touch = false;
    client.info.no_touch.store(false, Relaxed);
    // Back to the default user, authenticated only if it needs no password.
    let acl = &ctx.node.acl;
    let generation = acl.generation();
    client.set_user(acl.default_user(), generation);
    client.authenticated = !acl.auth_required();
    select_db(ctx, 0);
    out.simple("RESET");
    Ok(())
}

const CLIENT_SUBS: &[&str] = &[
    "id",
    "info",
    "list",
    "kill",
    "getname",
    "setname",
    "setinfo",
    "no-evict",
    "no-touch",
    "reply",
    "pause",
    "unpause",
    "unblock",
    "tracking",
    "caching",
    "getredir",
    "trackinginfo",
    "help",
];

const CLIENT_HELP: &[&str] = &[
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CACHING (YES|NO)",
    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
    "GETNAME",
    "    Return the name of the current connection.",
    "GETREDIR",
    "    Return the client ID we are redirecting to when tracking is enabled.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "UNPAUSE",
    "    Stop the current client pause, resuming traffic.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Suspend all, or just write, clients for <timeout> milliseconds.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "SETINFO <option> <value>",
    "    Set client meta attr. Options are:",
    "    * LIB-NAME: the client lib name.",
    "    * LIB-VER: the client lib version.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
    "         [OPTIN] [OPTOUT] [NOLOOP]",
    "    Control server assisted client side caching.",
    "TRACKINGINFO",
    "    Report tracking status for the current connection.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
    "NO-TOUCH (ON|OFF)",
    "    Will not touch LRU/LFU stats when this mode is on.",
    "HELP",
    "    Prints this help.",
];

fn client(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    match subcommand("client", CLIENT_SUBS, args)? {
        "id" => out.int(ctx.client.id() as i64),
        "info" => {
            let line = super::client_list::client_line(ctx.node, &ctx.client.info, Some("client|info"));
            out.verbatim(line.as_bytes());
        }
        "list" => client_list(ctx, args, out)?,
        "kill" => client_kill(ctx, args, out)?,
        "getname" => match ctx.client.info.name.lock().as_deref() {
            Some(name) => out.bulk(name),
            None => out.null(),
        },
        "setname" => {
            if !valid_client_attr(args[2]) {
                return Err(BAD_NAME.into());
            }
            set_name(ctx.client, args[2]);
            out.ok();
        }
        "setinfo" => client_setinfo(ctx, args, out)?,
        "no-evict" => {
            let on = on_off(args[2])?;
            ctx.client.no_evict = on;
            ctx.client.info.no_evict.store(on, Relaxed);
            out.ok();
        }
        "no-touch" => {
            let on = on_off(args[2])?;
            ctx.client.no_touch = on;
            ctx.client.info.no_touch.store(on, Relaxed);
            out.ok();
        }
        "reply" => client_reply(ctx, args[2], out)?,
        "pause" => client_pause(ctx, args, out)?,
        "unpause" => {
            ctx.node.pause.unpause();
            ctx.node.ks.pause_expiry(0);
            out.ok();
        }
        "unblock" => client_unblock(ctx, args, out)?,
        "tracking" => client_tracking(ctx, args, out)?,
        "caching" => client_caching(ctx, args[2], out)?,
        "getredir" => {
            let info = &ctx.client.info;
            if info.tracking.load(Relaxed) & mode::ON != 0 {
                out.int(info.redirect.load(Relaxed) as i64);
            } else {
                out.int(-1);
            }
        }
        "trackinginfo" => tracking_info(&ctx.client.info, out),
        _ => help(out, CLIENT_HELP),
    }
    Ok(())
}

/// Redis's reply to a subcommand given too many arguments.
fn sub_syntax(sub: &[u8]) -> CmdError {
    format!("ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.", lossy(sub)).into()
}

/// CLIENT PAUSE timeout-ms [WRITE|ALL]
fn client_pause(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    if args.len() > 4 {
        return Err(sub_syntax(args[1]));
    }
    let mode = match args.get(3) {
        None => PauseMode::All,
        Some(m) if eq_ic(m, "write") => PauseMode::Write,
        Some(m) if eq_ic(m, "all") => PauseMode::All,
        Some(_) => return Err("ERR CLIENT PAUSE mode must be WRITE or ALL".into()),
    };
    let timeout =
        crate::base::parse_i64(args[2]).ok_or(CmdError::from("ERR timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(err::TIMEOUT_NEG.into());
    }
    let now = crate::store::now_ms();
    if timeout > 0 {
        ctx.node.pause.pause(now.saturating_add(timeout as u64), mode, now);
        ctx.node.ks.pause_expiry(ctx.node.pause.end_ms());
    }
    out.ok();
    Ok(())
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: ends a blocking command (BLPOP & co.,
/// WAIT) of a client on any worker.
fn client_unblock(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    if args.len() > 4 {
        return Err(sub_syntax(args[1]));
    }
    let error = match args.get(3) {
        None => false,
        Some(r) if eq_ic(r, "timeout") => false,
        Some(r) if eq_ic(r, "error") => true,
        Some(_) => return Err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR".into()),
    };
    let id = arg_i64(args[2])?;
    let target = if id > 0 { ctx.node.clients.get(id as u64) } else { None };
    let waiter = target.and_then(|t| t.blocked_on.lock().clone());
    out.int(waiter.is_some_and(|w| w.unblock(error)) as i64);
    Ok(())
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN] [OPTOUT] [NOLOOP]
fn client_tracking(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let mut redirect: i64 = 0;
    let mut options = 0u32;
    let mut prefixes: Vec<&[u8]> = Vec::new();
    let mut j = 3;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = args[j];
        if eq_ic(opt, "redirect") && more > 0 {
            j += 1;
            if redirect != 0 {
                return Err("ERR A client can only redirect to a single other client".into());
            }
            redirect = arg_i64(args[j])?;
            if redirect <= 0 || ctx.node.clients.get(redirect as u64).is_none() {
                return Err("ERR The client ID you want redirect to does not exist".into());
            }
        } else if eq_ic(opt, "bcast") {
            options |= mode::BCAST;
        } else if eq_ic(opt, "optin") {
            options |= mode::OPTIN;
        } else if eq_ic(opt, "optout") {
            options |= mode::OPTOUT;
        } else if eq_ic(opt, "noloop") {
            options |= mode::NOLOOP;
        } else if eq_ic(opt, "prefix") && more > 0 {
            j += 1;
            prefixes.push(args[j]);
        } else {
            return Err(err::SYNTAX.into());
        }
        j += 1;
    }
    let info = ctx.client.info.clone();
    let tracking = &ctx.node.tracking;
    if eq_ic(args[2], "on") {
        let current = info.tracking.load(Relaxed);
        if options & mode::BCAST == 0 && !prefixes.is_empty() {
            return Err("ERR PREFIX option requires BCAST mode to be enabled".into());
        }
        if current & mode::ON != 0 && (current & mode::BCAST != 0) != (options & mode::BCAST != 0) {
            return Err("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and \
                        then re-enabling it with a different mode."
                .into());
        }
        if options & mode::BCAST != 0 && options & (mode::OPTIN | mode::OPTOUT) != 0 {
            return Err("ERR OPTIN and OPTOUT are not compatible with BCAST".into());
        }
        if options & mode::OPTIN != 0 && options & mode::OPTOUT != 0 {
            return Err("ERR You can't specify both OPTIN mode and OPTOUT mode".into());
        }
        if (options & mode::OPTIN != 0 && current & mode::OPTOUT != 0)
            || (options & mode::OPTOUT != 0 && current & mode::OPTIN != 0)
        {
            return Err("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and \
                        then re-enabling it with a different mode."
                .into());
        }
        if options & mode::BCAST != 0 {
            let existing = info.prefixes.lock().clone();
            if let Some((error, goes_on)) = check_prefixes(&existing, &prefixes) {
                if !goes_on {
                    return Err(error.into());
                }
                // Redis 7.0 replies with the error and then enables tracking anyway.
                out.error(&error);
            }
        }
        let broadcasting = tracking.enable(&info, redirect as u64, options, &prefixes);
        ctx.node.ks.set_broadcasting(broadcasting);
    } else if eq_ic(args[2], "off") {
        let broadcasting = tracking.disable(&info);
        ctx.node.ks.set_broadcasting(broadcasting);
    } else {
        return Err(err::SYNTAX.into());
    }
    out.ok();
    Ok(())
}

/// CLIENT CACHING YES|NO: whether the next command's keys are tracked.
fn client_caching(ctx: &mut Ctx<'_>, arg: &[u8], out: &mut Reply) -> CmdResult {
    let info = &ctx.client.info;
    let current = info.tracking.load(Relaxed);
    if current & mode::ON == 0 {
        return Err("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or \
                    OPTOUT mode enabled"
            .into());
    }
    if eq_ic(arg, "yes") {
        if current & mode::OPTIN == 0 {
            return Err("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.".into());
        }
    } else if eq_ic(arg, "no") {
        if current & mode::OPTOUT == 0 {
            return Err("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.".into());
        }
    } else {
        return Err(err::SYNTAX.into());
    }
    info.tracking.fetch_or(mode::CACHING, Relaxed);
    out.ok();
    Ok(())
}

/// CLIENT TRACKINGINFO: flags, redirect and prefixes, as Redis lists them.
fn tracking_info(info: &ClientInfo, out: &mut Reply) {
    let m = info.tracking.load(Relaxed);
    let mut flags = vec![if m & mode::ON != 0 { "on" } else { "off" }];
    if m & mode::BCAST != 0 {
        flags.push("bcast");
    }
    if m & mode::OPTIN != 0 {
        flags.push("optin");
        if m & mode::CACHING != 0 {
            flags.push("caching-yes");
        }
    }
    if m & mode::OPTOUT != 0 {
        flags.push("optout");
        if m & mode::CACHING != 0 {
            flags.push("caching-no");
        }
    }
    if m & mode::NOLOOP != 0 {
        flags.push("noloop");
    }
    if m & mode::BROKEN_REDIR != 0 {
        flags.push("broken_redirect");
    }
    out.map(3);
    out.bulk(b"flags");
    out.set(flags.len());
    for f in flags {
        out.bulk(f.as_bytes());
    }
    out.bulk(b"redirect");
    out.int(if m & mode::ON != 0 { info.redirect.load(Relaxed) as i64 } else { -1 });
    out.bulk(b"prefixes");
    let prefixes = info.prefixes.lock();
    out.array(prefixes.len());
    for p in prefixes.iter() {
        out.bulk(p);
    }
}

fn on_off(arg: &[u8]) -> Result<bool, CmdError> {
    if eq_ic(arg, "on") {
        Ok(true)
    } else if eq_ic(arg, "off") {
        Ok(false)
    } else {
        Err(err::SYNTAX.into())
    }
}

fn client_reply(ctx: &mut Ctx<'_>, mode: &[u8], out: &mut Reply) -> CmdResult {
    if eq_ic(mode, "on") {
        ctx.client.reply_off = false;
        ctx.client.reply_skip_next = false;
        // Also cancels a SKIP that applied to this very command.
        ctx.client.reply_always = true;
        out.ok();
    } else if eq_ic(mode, "off") {
        // No reply: from now on the connection discards replies.
        ctx.client.reply_off = true;
    } else if eq_ic(mode, "skip") {
        ctx.client.reply_skip_next = true;
    } else {
        return Err(err::SYNTAX.into());
    }
    Ok(())
}

fn client_setinfo(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let (attr, value) = (args[2], args[3]);
    let slot = if eq_ic(attr, "lib-name") {
        &ctx.client.info.lib_name
    } else if eq_ic(attr, "lib-ver") {
        &ctx.client.info.lib_ver
    } else {
        return Err(format!("ERR Unrecognized option '{}'", lossy(attr)).into());
    };
    if !valid_client_attr(value) {
        return Err(format!("ERR {} cannot contain spaces, newlines or special characters.", lossy(attr)).into());
    }
    *slot.lock() = if value.is_empty() { None } else { Some(value.to_vec()) };
    out.ok();
    Ok(())
}

/// Client types of CLIENT LIST/KILL TYPE.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ClientType {
    Normal,
    Pubsub,
    /// Replication links (master/replica/slave): this node never has any.
    Replication,
}

fn parse_client_type(arg: &[u8]) -> Result<ClientType, CmdError> {
    if eq_ic(arg, "normal") {
        Ok(ClientType::Normal)
    } else if eq_ic(arg, "pubsub") {
        Ok(ClientType::Pubsub)
    } else if eq_ic(arg, "master") || eq_ic(arg, "replica") || eq_ic(arg, "slave") {
        Ok(ClientType::Replication)
    } else {
        Err(format!("ERR Unknown client type '{}'", lossy(arg)).into())
    }
}

fn client_type(info: &ClientInfo) -> ClientType {
    if info.subs.load(Relaxed) + info.psubs.load(Relaxed) + info.ssubs.load(Relaxed) > 0 {
        ClientType::Pubsub
    } else {
        ClientType::Normal
    }
}

fn client_list(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let mut wanted_type = None;
    let mut wanted_ids: Option<Vec<i64>> = None;
    match args.len() {
        2 => {}
        4 if eq_ic(args[2], "type") => wanted_type = Some(parse_client_type(args[3])?),
        n if n >= 4 && eq_ic(args[2], "id") => {
            let ids = args[3..]
                .iter()
                .map(|a| crate::base::parse_i64(a).ok_or(CmdError::from("ERR Invalid client ID")))
                .collect::<Result<Vec<_>, _>>()?;
            wanted_ids = Some(ids);
        }
        _ => return Err(err::SYNTAX.into()),
    }
    let me = ctx.client.id();
    let mut text = String::new();
    for info in ctx.node.clients.all() {
        if wanted_type.is_some_and(|t| t != client_type(&info)) {
            continue;
        }
        if wanted_ids.as_ref().is_some_and(|ids| !ids.contains(&(info.id as i64))) {
            continue;
        }
        let running = (info.id == me).then_some("client|list");
        text.push_str(&super::client_list::client_line(ctx.node, &info, running));
    }
    out.verbatim(text.as_bytes());
    Ok(())
}

/// Filters of the new CLIENT KILL form; every given one must match.
#[derive(Default)]
struct KillFilter<'a> {
    id: Option<u64>,
    addr: Option<&'a [u8]>,
    laddr: Option<&'a [u8]>,
    ctype: Option<ClientType>,
    user: Option<&'a [u8]>,
    skip_me: bool,
}

impl KillFilter<'_> {
    fn matches(&self, info: &ClientInfo) -> bool {
        self.id.is_none_or(|id| id == info.id)
            && self.addr.is_none_or(|a| a == info.addr.as_bytes())
            && self.laddr.is_none_or(|a| a == info.laddr.as_bytes())
            && self.ctype.is_none_or(|t| t == client_type(info))
            && self.user.is_none_or(|u| u == info.user.lock().as_slice())
    }
}

fn client_kill(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let me = ctx.client.id();
    if args.len() == 3 {
        // Old form: CLIENT KILL addr:port, +OK or an error.
        let target = ctx.node.clients.all().into_iter().find(|c| c.addr.as_bytes() == args[2]);
        let Some(info) = target else {
            return Err("ERR No such client".into());
        };
        kill(ctx.client, me, &info);
        out.ok();
        return Ok(());
    }
    if args.len() % 2 != 0 {
        return Err(err::SYNTAX.into());
    }
    let mut filter = KillFilter { skip_me: true, ..Default::default() };
    for pair in args[2..].chunks(2) {
        let (opt, val) = (pair[0], pair[1]);
        if eq_ic(opt, "id") {
            match crate::base::parse_i64(val) {
                Some(id) if id > 0 => filter.id = Some(id as u64),
                _ => return Err("ERR client-id should be greater than 0".into()),
            }
        } else if eq_ic(opt, "type") {
            filter.ctype = Some(parse_client_type(val)?);
        } else if eq_ic(opt, "user") {
            if ctx.node.acl.user(val).is_none() {
                return Err(format!("ERR No such user '{}'", lossy(val)).into());
            }
            filter.user = Some(val);
        } else if eq_ic(opt, "addr") {
            filter.addr = Some(val);
        } else if eq_ic(opt, "laddr") {
            filter.laddr = Some(val);
        } else if eq_ic(opt, "skipme") {
            if eq_ic(val, "yes") {
                filter.skip_me = true;
            } else if eq_ic(val, "no") {
                filter.skip_me = false;
            } else {
                return Err(err::SYNTAX.into());
            }
        } else {
            return Err(err::SYNTAX.into());
        }
    }
    let mut killed = 0;
    for info in ctx.node.clients.all() {
        if !filter.matches(&info) || (filter.skip_me && info.id == me) {
            continue;
        }
        kill(ctx.client, me, &info);
        killed += 1;
    }
    out.int(killed);
    Ok(())
}

/// Kills a client; the caller itself is closed after its reply is written.
fn kill(caller: &mut Client, me: u64, target: &ClientInfo) {
    if target.id == me {
        caller.close_after_reply = true;
    } else {
        target.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_names() {
        assert!(valid_client_attr(b"worker-1"));
        assert!(valid_client_attr(b""));
        assert!(!valid_client_attr(b"a b"));
        assert!(!valid_client_attr(b"a\nb"));
        assert!(!valid_client_attr("é".as_bytes()));
    }
}
