//! MONITOR, and feeding it: after a command runs (so a redacted password
//! never shows and SELECT shows its new database), its arguments go to
//! every monitoring client, as Redis 7.0 does — except admin commands,
//! which Redis hides, and commands refused before they ran (unknown,
//! arity, auth, ACL). A script command is shown when it starts, then each
//! of its `redis.call`s as `lua`; EXEC after the commands it ran.

use super::{CmdResult, CommandDef, Ctx, Keys, Node, flags};
use crate::protocol::Reply;
use crate::session::client::Client;
use crate::session::monitor::{Origin, format_line};

pub const COMMANDS: &[CommandDef] = &[CommandDef::new(
    "monitor",
    1,
    flags::ADMIN | flags::NOSCRIPT | flags::LOADING | flags::STALE,
    Keys::None,
    monitor,
)
.acl("@admin @slow @dangerous")];

fn monitor(ctx: &mut Ctx<'_>, _args: &[&[u8]], out: &mut Reply) -> CmdResult {
    if ctx.in_exec {
        // EXEC expects a reply per command, which a monitor never gives.
        return Err("ERR MONITOR isn't allowed for DENY BLOCKING client".into());
    }
    // A second MONITOR is ignored, without a reply, as in Redis.
    if !ctx.client.monitor {
        ctx.client.monitor = true;
        ctx.node.monitors.add(ctx.client.info.clone());
        out.ok();
    }
    Ok(())
}

/// Shows `args`, just run by `client` (by its script when `lua`), to the
/// monitors. Callers check `monitors.active()` first.
pub fn feed(node: &Node, client: &Client, args: &[&[u8]], lua: bool) {
    let unix_us =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64);
    let addr = client.info.addr.as_str();
    let socket = node.config.startup.unixsocket.as_ref().map(|p| p.to_string_lossy());
    let origin = match &socket {
        _ if lua => Origin::Lua,
        // A Unix-socket peer is shown as its path (`path:0`), never an IP.
        Some(path) if addr.starts_with('/') => Origin::Unix(path),
        _ => Origin::Peer(addr),
    };
    let redacted = super::slowlog::redacted_args(args);
    node.monitors.feed(&format_line(unix_us, client.db, origin, args, &redacted));
}

/// What a monitoring client may not run: commands on keys (Redis treats a
/// monitor as a replica).
pub const REFUSED: &str = "ERR Replica can't interact with the keyspace";

/// Whether a monitoring client is refused a command with these flags.
pub fn refuses(command_flags: u32) -> bool {
    command_flags & (flags::READONLY | flags::WRITE | flags::MAY_REPLICATE) != 0
}
