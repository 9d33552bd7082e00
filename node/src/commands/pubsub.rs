//! Pub/sub: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH,
//! PUBSUB, and the sharded kind (SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH), whose
//! channels name a slot as keys do (cluster mode is never on here, so no
//! CROSSSLOT check applies).
//!
//! The hub maps channels and patterns to subscribers' shared `ClientInfo`.
//! PUBLISH encodes the message once per protocol version and hands it to
//! each subscriber's connection task through an unbounded channel; bytes in
//! flight are counted per client, and a subscriber that stops reading past
//! the pub/sub output limit is disconnected (Redis's
//! `client-output-buffer-limit pubsub`), so a slow reader cannot make the
//! server hold unbounded memory.

use super::{CmdResult, CommandDef, Ctx, Keys, flags};
use crate::base::glob_match;
use crate::protocol::Reply;
use crate::session::client::Client;
use crate::session::pubsub::encode;
use crate::session::pubsub::{Hub, SubscriptionMap, set_counts};
use std::collections::HashSet;

const PS: u32 = flags::PUBSUB | flags::NOSCRIPT | flags::LOADING | flags::STALE;

pub const COMMANDS: &[CommandDef] = &[
    CommandDef::new("subscribe", -2, PS | flags::PUBSUB_CTX, Keys::None, subscribe).acl("@pubsub @slow"),
    CommandDef::new("unsubscribe", -1, PS | flags::PUBSUB_CTX, Keys::None, unsubscribe).acl("@pubsub @slow"),
    CommandDef::new("psubscribe", -2, PS | flags::PUBSUB_CTX, Keys::None, psubscribe).acl("@pubsub @slow"),
    CommandDef::new("punsubscribe", -1, PS | flags::PUBSUB_CTX, Keys::None, punsubscribe).acl("@pubsub @slow"),
    // Scripts may PUBLISH (Redis: no noscript flag); read-only ones may not.
    CommandDef::new(
        "publish",
        3,
        flags::PUBSUB | flags::LOADING | flags::STALE | flags::FAST | flags::MAY_REPLICATE,
        Keys::None,
        publish,
    )
    .acl("@pubsub @fast"),
    CommandDef::new("pubsub", -2, flags::LOADING | flags::STALE, Keys::None, pubsub).acl("@slow").subs(PUBSUB_SUBS),
    CommandDef::new("ssubscribe", -2, PS | flags::PUBSUB_CTX, Keys::Range(1, -1, 1), ssubscribe).acl("@pubsub @slow"),
    CommandDef::new("sunsubscribe", -1, PS | flags::PUBSUB_CTX, Keys::Range(1, -1, 1), sunsubscribe)
        .acl("@pubsub @slow"),
    CommandDef::new(
        "spublish",
        3,
        flags::PUBSUB | flags::LOADING | flags::STALE | flags::FAST,
        Keys::Range(1, 1, 1),
        spublish,
    )
    .acl("@pubsub @fast"),
];

const PUBSUB_SUBS: &[&str] = &["channels", "numsub", "numpat", "shardchannels", "shardnumsub", "help"];

/// Writes a subscription confirmation: [kind, name-or-nil, count] as a push.
fn confirm(out: &mut Reply, kind: &str, name: Option<&[u8]>, count: usize) {
    out.push(3);
    out.bulk_str(kind);
    match name {
        Some(n) => out.bulk(n),
        None => out.null(),
    }
    out.int(count as i64);
}

/// Channels or patterns: where one kind of subscription is kept, and the
/// names its confirmations carry.
struct Kind {
    subscribe: &'static str,
    unsubscribe: &'static str,
    hub: fn(&Hub) -> &SubscriptionMap,
    client: fn(&mut Client) -> &mut HashSet<Vec<u8>>,
    /// The count confirmations carry: channels and patterns together, shard
    /// channels on their own (as Redis 7.0 counts them).
    count: fn(&Client) -> usize,
}

const CHANNELS: Kind = Kind {
    subscribe: "subscribe",
    unsubscribe: "unsubscribe",
    hub: |h| &h.channels,
    client: |c| &mut c.channels,
    count: Client::subscription_count,
};

const PATTERNS: Kind = Kind {
    subscribe: "psubscribe",
    unsubscribe: "punsubscribe",
    hub: |h| &h.patterns,
    client: |c| &mut c.patterns,
    count: Client::subscription_count,
};

const SHARD_CHANNELS: Kind = Kind {
    subscribe: "ssubscribe",
    unsubscribe: "sunsubscribe",
    hub: |h| &h.shard_channels,
    client: |c| &mut c.shard_channels,
    count: |c| c.shard_channels.len(),
};

fn ssubscribe(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    subscribe_to(ctx, &args[1..], out, &SHARD_CHANNELS)
}

fn sunsubscribe(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    unsubscribe_from(ctx, &args[1..], out, &SHARD_CHANNELS)
}

fn subscribe(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    subscribe_to(ctx, &args[1..], out, &CHANNELS)
}

fn psubscribe(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    subscribe_to(ctx, &args[1..], out, &PATTERNS)
}

fn unsubscribe(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    unsubscribe_from(ctx, &args[1..], out, &CHANNELS)
}

fn punsubscribe(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    unsubscribe_from(ctx, &args[1..], out, &PATTERNS)
}

fn subscribe_to(ctx: &mut Ctx<'_>, names: &[&[u8]], out: &mut Reply, kind: &Kind) -> CmdResult {
    // Confirmations are pushes in Redis 7.0, in RESP2 too: CLIENT REPLY
    // OFF/SKIP does not hold them back.
    ctx.client.reply_always = true;
    let hub = (kind.hub)(&ctx.node.pubsub);
    for name in names {
        if (kind.client)(ctx.client).insert(name.to_vec()) {
            hub.write().entry(name.to_vec()).or_default().insert(ctx.client.id(), ctx.client.info.clone());
        }
        confirm(out, kind.subscribe, Some(name), (kind.count)(ctx.client));
    }
    set_counts(ctx.client);
    Ok(())
}

/// Drops the named subscriptions, or every one of this kind when none is named.
fn unsubscribe_from(ctx: &mut Ctx<'_>, names: &[&[u8]], out: &mut Reply, kind: &Kind) -> CmdResult {
    ctx.client.reply_always = true;
    let names: Vec<Vec<u8>> = if names.is_empty() {
        (kind.client)(ctx.client).iter().cloned().collect()
    } else {
        names.iter().map(|n| n.to_vec()).collect()
    };
    if names.is_empty() {
        confirm(out, kind.unsubscribe, None, (kind.count)(ctx.client));
    }
    for name in names {
        if (kind.client)(ctx.client).remove(&name) {
            Hub::remove((kind.hub)(&ctx.node.pubsub), &name, ctx.client.id());
        }
        confirm(out, kind.unsubscribe, Some(&name), (kind.count)(ctx.client));
    }
    set_counts(ctx.client);
    Ok(())
}

fn publish(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let (channel, message) = (args[1], args[2]);
    let mut self_msgs = Reply::new(out.resp3);
    let receivers = ctx.node.pubsub.publish(channel, message, Some((ctx.client.id(), &mut self_msgs)));
    // A PUBLISH another node passed on (admin port) is not passed on again.
    if ctx.node.cluster.is_some() && ctx.client.port != crate::session::client::PortKind::Admin {
        ctx.server.broadcast_publish(channel, message);
    }
    out.raw(&self_msgs.buf);
    out.int(receivers as i64);
    Ok(())
}

fn spublish(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let (channel, message) = (args[1], args[2]);
    let node = ctx.node;
    let mut receivers = 0i64;
    let mut self_msgs = Reply::new(out.resp3);
    {
        let channels = node.pubsub.shard_channels.read();
        if let Some(subs) = channels.get(channel) {
            let msg = encode(&[b"smessage", channel, message]);
            for sub in subs.values() {
                node.pubsub.deliver(sub, &msg, Some((ctx.client.id(), &mut self_msgs)));
                receivers += 1;
            }
        }
    }
    out.raw(&self_msgs.buf);
    out.int(receivers);
    Ok(())
}

/// PUBSUB CHANNELS / SHARDCHANNELS: active names matching an optional pattern.
fn list_channels(map: &SubscriptionMap, pattern: Option<&[u8]>, out: &mut Reply) {
    let channels = map.read();
    let names: Vec<&Vec<u8>> = channels.keys().filter(|c| pattern.is_none_or(|p| glob_match(p, c, false))).collect();
    out.array(names.len());
    for n in names {
        out.bulk(n);
    }
}

/// PUBSUB NUMSUB / SHARDNUMSUB: subscribers per named channel, as a flat
/// array in RESP3 too (Redis 7.0; 7.2 made NUMSUB a map).
fn count_subscribers(map: &SubscriptionMap, names: &[&[u8]], out: &mut Reply) {
    let channels = map.read();
    out.array(names.len() * 2);
    for ch in names {
        out.bulk(ch);
        out.int(channels.get(*ch).map_or(0, |s| s.len()) as i64);
    }
}

fn pubsub(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let hub = &ctx.node.pubsub;
    match super::args::subcommand("pubsub", PUBSUB_SUBS, args)? {
        "channels" => list_channels(&hub.channels, args.get(2).copied(), out),
        "shardchannels" => list_channels(&hub.shard_channels, args.get(2).copied(), out),
        "numsub" => count_subscribers(&hub.channels, &args[2..], out),
        "shardnumsub" => count_subscribers(&hub.shard_channels, &args[2..], out),
        "numpat" => out.int(hub.num_patterns() as i64),
        _ => {
            let lines = [
                "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "CHANNELS [<pattern>]",
                "    Return the currently active channels matching a <pattern> (default: '*').",
                "NUMPAT",
                "    Return number of subscriptions to patterns.",
                "NUMSUB [<channel> ...]",
                "    Return the number of subscribers for the specified channels, excluding",
                "    pattern subscriptions(default: no channels).",
                "SHARDCHANNELS [<pattern>]",
                "    Return the currently active shard level channels matching a <pattern> (default: '*').",
                "SHARDNUMSUB [<shardchannel> ...]",
                "    Return the number of subscribers for the specified shard level channel(s)",
                "HELP",
                "    Print this help.",
            ];
            out.array(lines.len());
            for l in lines {
                out.simple(l);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_encode_per_protocol() {
        let m = encode(&[b"message", b"ch", b"hi"]);
        assert_eq!(m.resp2, b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
        assert_eq!(m.resp3, b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
    }
}
