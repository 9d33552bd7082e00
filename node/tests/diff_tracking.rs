//! Client-side caching (CLIENT TRACKING and friends) and sharded pub/sub,
//! differential against redis-server where replies can be compared, and
//! run on both servers where they cannot (client ids differ). strata runs
//! with two workers, so the reader, the writer and the client redirected to
//! are served by different threads.

mod support;

use std::time::Duration;
use support::*;

fn push(items: Vec<Frame>) -> Frame {
    Frame::Push(items)
}

fn invalidate(keys: &[&str]) -> Frame {
    push(vec![Frame::bulk("invalidate"), Frame::bulks(keys)])
}

/// A RESP2 message on `__redis__:invalidate` carrying `keys`.
fn invalidate_message(keys: Frame) -> Frame {
    Frame::Array(vec![Frame::bulk("message"), Frame::bulk("__redis__:invalidate"), keys])
}

fn client_id(conn: &mut RawConn) -> String {
    conn.cmd(&["CLIENT", "ID"]).as_int().expect("CLIENT ID").to_string()
}

/// A connection subscribed to `__redis__:invalidate`, and its id.
fn redirect_target(server: &Server) -> (RawConn, String) {
    let mut conn = server.conn();
    let id = client_id(&mut conn);
    conn.send(&["SUBSCRIBE", "__redis__:invalidate"]);
    conn.read_frame();
    (conn, id)
}

/// The next frame, or None if nothing arrives within a short while.
fn maybe_frame(conn: &mut RawConn) -> Option<Frame> {
    conn.set_timeout(Some(Duration::from_millis(300)));
    let f = conn.try_read_frame().ok().flatten();
    conn.set_timeout(Some(Duration::from_secs(10)));
    f
}

#[test]
fn tracking_options_errors_and_info_match_redis() {
    for resp3 in [false, true] {
        let mut d = if resp3 { Diff::new_resp3() } else { Diff::new() };
        d.exact(&["CLIENT", "TRACKINGINFO"]);
        d.exact(&["CLIENT", "GETREDIR"]);
        d.exact(&["CLIENT", "CACHING", "yes"]);
        d.exact(&["CLIENT", "TRACKING", "maybe"]);
        d.exact(&["CLIENT", "TRACKING"]);
        d.exact(&["CLIENT", "TRACKING", "on", "FOO"]);
        d.exact(&["CLIENT", "TRACKING", "on", "PREFIX"]);
        d.exact(&["CLIENT", "TRACKING", "on", "PREFIX", "a"]);
        d.exact(&["CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"]);
        d.exact(&["CLIENT", "TRACKING", "on", "BCAST", "OPTIN"]);
        d.exact(&["CLIENT", "TRACKING", "on", "REDIRECT", "abc"]);
        d.exact(&["CLIENT", "TRACKING", "on", "REDIRECT", "999999"]);
        d.exact(&["CLIENT", "TRACKING", "on", "REDIRECT", "-3"]);
        d.exact(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "ab", "PREFIX", "a"]);
        d.exact(&["CLIENT", "TRACKINGINFO"]);
        d.exact(&["CLIENT", "TRACKING", "on", "OPTIN"]);
        d.exact(&["CLIENT", "TRACKINGINFO"]);
        d.exact(&["CLIENT", "GETREDIR"]);
        d.exact(&["CLIENT", "TRACKING", "on", "OPTOUT"]);
        d.exact(&["CLIENT", "TRACKING", "on", "BCAST"]);
        d.exact(&["CLIENT", "CACHING", "no"]);
        d.exact(&["CLIENT", "CACHING", "maybe"]);
        d.exact(&["CLIENT", "CACHING"]);
        d.exact(&["CLIENT", "CACHING", "yes"]);
        d.exact(&["CLIENT", "TRACKINGINFO"]);
        // CACHING lasts for one command.
        d.exact(&["GET", "k"]);
        d.exact(&["CLIENT", "TRACKINGINFO"]);
        d.exact(&["CLIENT", "TRACKING", "off", "BCAST"]);
        d.exact(&["CLIENT", "TRACKINGINFO"]);
        d.exact(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "foo", "PREFIX", "bar", "NOLOOP"]);
        d.exact(&["CLIENT", "TRACKINGINFO"]);
        d.exact(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "fo"]);
        d.exact(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "barb"]);
        d.exact(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "baz"]);
        d.exact(&["CLIENT", "TRACKINGINFO"]);
        d.exact(&["CLIENT", "TRACKING", "on"]);
        d.exact(&["CLIENT", "TRACKING", "off"]);
        d.exact(&["CLIENT", "TRACKING", "on", "BCAST"]);
        d.exact(&["CLIENT", "TRACKINGINFO"]);
        d.exact(&["RESET"]);
        d.exact(&["CLIENT", "TRACKINGINFO"]);
        d.finish();
    }
}

#[test]
fn resp3_invalidation_reaches_the_reader_from_another_worker() {
    for server in [Server::strata(), Server::redis()] {
        let name = server.name();
        let mut reader = server.conn();
        let mut writer = server.conn();
        reader.hello3();
        reader.ok(&["CLIENT", "TRACKING", "on"]);
        writer.ok(&["SET", "k1", "1"]);
        assert_eq!(reader.cmd(&["GET", "k1"]), Frame::bulk("1"));
        assert_eq!(reader.cmd(&["MGET", "k2", "k3"]), Frame::Array(vec![Frame::Null, Frame::Null]));
        writer.ok(&["SET", "k1", "2"]);
        assert_eq!(reader.read_frame(), invalidate(&["k1"]), "{name}");
        // Once invalidated, a key is not reported again until read again.
        writer.ok(&["SET", "k1", "3"]);
        writer.cmd(&["DEL", "k3"]);
        writer.ok(&["SET", "k3", "x"]);
        assert_eq!(reader.read_frame(), invalidate(&["k3"]), "{name}");
        // The reader's own write: the invalidation follows its reply.
        reader.cmd(&["GET", "k2"]);
        reader.send(&["SET", "k2", "v"]);
        assert_eq!(reader.read_frame(), Frame::ok(), "{name}");
        assert_eq!(reader.read_frame(), invalidate(&["k2"]), "{name}");
        // A transaction's invalidation comes after EXEC's reply.
        reader.cmd(&["GET", "k1"]);
        reader.ok(&["MULTI"]);
        reader.cmd(&["INCR", "k1"]);
        reader.send(&["EXEC"]);
        assert_eq!(reader.read_frame(), Frame::Array(vec![Frame::int(4)]), "{name}");
        assert_eq!(reader.read_frame(), invalidate(&["k1"]), "{name}");
        // FLUSHALL sends a null to every tracking client.
        writer.ok(&["FLUSHALL"]);
        assert_eq!(reader.read_frame(), push(vec![Frame::bulk("invalidate"), Frame::Null]), "{name}");
        // Tracking off: nothing more.
        reader.ok(&["CLIENT", "TRACKING", "off"]);
        reader.cmd(&["GET", "k1"]);
        writer.ok(&["SET", "k1", "5"]);
        assert_eq!(reader.cmd(&["PING"]), Frame::simple("PONG"), "{name}");
    }
}

#[test]
fn noloop_and_optin_optout() {
    for server in [Server::strata(), Server::redis()] {
        let name = server.name();
        let mut reader = server.conn();
        let mut writer = server.conn();
        reader.hello3();
        reader.ok(&["CLIENT", "TRACKING", "on", "NOLOOP"]);
        reader.cmd(&["MGET", "a", "b"]);
        reader.ok(&["SET", "a", "1"]);
        writer.ok(&["SET", "b", "1"]);
        assert_eq!(reader.read_frame(), invalidate(&["b"]), "{name}");
        reader.ok(&["CLIENT", "TRACKING", "off"]);
        reader.ok(&["CLIENT", "TRACKING", "on", "OPTIN"]);
        reader.cmd(&["GET", "c"]);
        reader.ok(&["CLIENT", "CACHING", "yes"]);
        reader.cmd(&["GET", "d"]);
        writer.ok(&["MSET", "c", "1", "d", "1"]);
        assert_eq!(reader.read_frame(), invalidate(&["d"]), "{name}");
        reader.ok(&["CLIENT", "TRACKING", "off"]);
        reader.ok(&["CLIENT", "TRACKING", "on", "OPTOUT"]);
        reader.ok(&["CLIENT", "CACHING", "no"]);
        reader.cmd(&["GET", "e"]);
        reader.cmd(&["GET", "f"]);
        writer.ok(&["MSET", "e", "1", "f", "1"]);
        assert_eq!(reader.read_frame(), invalidate(&["f"]), "{name}");
        assert_eq!(maybe_frame(&mut reader), None, "{name}");
    }
}

#[test]
fn resp2_redirect_to_a_subscriber_and_broadcast_prefixes() {
    for server in [Server::strata(), Server::redis()] {
        let name = server.name();
        let (mut target, target_id) = redirect_target(&server);
        let mut reader = server.conn();
        let mut writer = server.conn();
        reader.ok(&["CLIENT", "TRACKING", "on", "REDIRECT", &target_id]);
        assert_eq!(reader.cmd(&["CLIENT", "GETREDIR"]), Frame::int(target_id.parse().unwrap()));
        reader.cmd(&["GET", "x"]);
        writer.ok(&["SET", "x", "1"]);
        assert_eq!(target.read_frame(), invalidate_message(Frame::bulks(&["x"])), "{name}");
        reader.cmd(&["GET", "x"]);
        writer.ok(&["FLUSHDB"]);
        assert_eq!(target.read_frame(), invalidate_message(Frame::Nil), "{name}");
        // BCAST: one message per prefix per command, keys in order.
        reader.ok(&["CLIENT", "TRACKING", "off"]);
        reader.ok(&["CLIENT", "TRACKING", "on", "BCAST", "REDIRECT", &target_id, "PREFIX", "a:", "PREFIX", "b:"]);
        writer.ok(&["MSET", "b:2", "1", "a:2", "1", "a:1", "1", "c:1", "1"]);
        assert_eq!(target.read_frame(), invalidate_message(Frame::bulks(&["a:1", "a:2"])), "{name}");
        assert_eq!(target.read_frame(), invalidate_message(Frame::bulks(&["b:2"])), "{name}");
        // Keys expiring in the background are broadcast too.
        writer.ok(&["SET", "a:exp", "1", "PX", "1"]);
        assert_eq!(target.read_frame(), invalidate_message(Frame::bulks(&["a:exp"])), "{name}");
        let expired = target.read_frame();
        assert_eq!(expired, invalidate_message(Frame::bulks(&["a:exp"])), "{name}");
        let info = info(&mut writer, Some("stats"));
        assert_eq!(info.get("tracking_total_prefixes").map(String::as_str), Some("2"), "{name}");
    }
}

#[test]
fn broken_redirect_is_reported_to_a_resp3_client() {
    for server in [Server::strata(), Server::redis()] {
        let name = server.name();
        let (target, target_id) = redirect_target(&server);
        let mut reader = server.conn();
        let mut writer = server.conn();
        reader.hello3();
        reader.ok(&["CLIENT", "TRACKING", "on", "REDIRECT", &target_id]);
        reader.cmd(&["GET", "k"]);
        drop(target);
        assert!(wait_for(Duration::from_secs(5), || {
            let list = writer.cmd(&["CLIENT", "LIST"]);
            !String::from_utf8_lossy(list.as_bytes().unwrap_or_default()).contains(&format!("id={target_id} "))
        }));
        writer.ok(&["SET", "k", "2"]);
        assert_eq!(
            reader.read_frame(),
            push(vec![Frame::bulk("tracking-redir-broken"), Frame::int(target_id.parse().unwrap())]),
            "{name}"
        );
        let info = reader.cmd(&["CLIENT", "TRACKINGINFO"]);
        assert!(format!("{info}").contains("broken_redirect"), "{name}: {info}");
        let me = reader.cmd(&["CLIENT", "INFO"]);
        let me = String::from_utf8_lossy(me.as_bytes().unwrap_or_default()).into_owned();
        assert!(me.contains("flags=tR ") && me.contains(&format!("redir={target_id} ")), "{name}: {me}");
    }
}

#[test]
fn tracking_table_limit_invalidates_keys() {
    for server in [Server::strata(), Server::redis()] {
        let name = server.name();
        let (mut target, target_id) = redirect_target(&server);
        let mut reader = server.conn();
        reader.ok(&["CLIENT", "TRACKING", "on", "REDIRECT", &target_id]);
        for i in 0..150 {
            reader.cmd(&["GET", &format!("key{i}")]);
        }
        let mut admin = server.conn();
        assert_eq!(info_field(&mut admin, "tracking_total_keys").as_deref(), Some("150"), "{name}");
        admin.ok(&["CONFIG", "SET", "tracking-table-max-keys", "10"]);
        for _ in 0..140 {
            let f = target.read_frame();
            assert_eq!(f.as_array().map(|a| a.len()), Some(3), "{name}: {f}");
        }
        assert!(
            wait_for(Duration::from_secs(2), || info_field(&mut admin, "tracking_total_keys").as_deref() == Some("10"))
        );
        assert_eq!(info_field(&mut admin, "tracking_clients").as_deref(), Some("1"), "{name}");
    }
}

#[test]
fn sharded_pubsub_matches_redis() {
    for resp3 in [false, true] {
        let mut d = if resp3 { Diff::new_resp3() } else { Diff::new() };
        d.exact(&["SPUBLISH", "ch", "nobody"]);
        d.exact(&["SSUBSCRIBE", "ch", "ch2"]);
        d.compare_next(Mode::Exact);
        d.exact(&["SUBSCRIBE", "plain"]);
        if !resp3 {
            d.exact(&["GET", "x"]);
        }
        d.unordered(&["PUBSUB", "SHARDCHANNELS"]);
        d.exact(&["PUBSUB", "SHARDCHANNELS", "ch2*"]);
        d.exact(&["PUBSUB", "SHARDNUMSUB", "ch", "none"]);
        d.exact(&["PUBSUB", "NUMSUB", "ch"]);
        d.exact(&["SUNSUBSCRIBE", "ch"]);
        d.exact(&["SUNSUBSCRIBE"]);
        d.exact(&["SUNSUBSCRIBE"]);
        d.exact(&["UNSUBSCRIBE"]);
        d.exact(&["SPUBLISH", "ch"]);
        d.exact(&["SSUBSCRIBE"]);
        // Name, arity, flags, key range, ACL categories (key specs are not
        // kept by any command table here).
        d.check(&["COMMAND", "INFO", "SSUBSCRIBE", "SUNSUBSCRIBE", "SPUBLISH"], |a, b| {
            let head = |f: &Frame| -> Vec<Vec<Frame>> {
                f.as_array()
                    .unwrap_or_default()
                    .iter()
                    .map(|c| c.as_array().unwrap_or_default()[..7].to_vec())
                    .collect()
            };
            if head(a) == head(b) { Ok(()) } else { Err("COMMAND INFO differs".into()) }
        });
        d.exact(&["COMMAND", "GETKEYS", "SSUBSCRIBE", "a", "b"]);
        d.finish();
    }
}

#[test]
fn sharded_messages_cross_workers() {
    for server in [Server::strata(), Server::redis()] {
        let name = server.name();
        let mut sub2 = server.conn();
        let mut sub3 = server.conn();
        let mut publisher = server.conn();
        sub3.hello3();
        sub2.send(&["SSUBSCRIBE", "s"]);
        assert_eq!(sub2.read_frame(), Frame::Array(vec![Frame::bulk("ssubscribe"), Frame::bulk("s"), Frame::int(1)]));
        sub3.send(&["SSUBSCRIBE", "s"]);
        sub3.read_frame();
        assert_eq!(publisher.cmd(&["SPUBLISH", "s", "hi"]), Frame::int(2), "{name}");
        assert_eq!(publisher.cmd(&["PUBLISH", "s", "plain"]), Frame::int(0), "{name}");
        let parts = vec![Frame::bulk("smessage"), Frame::bulk("s"), Frame::bulk("hi")];
        assert_eq!(sub2.read_frame(), Frame::Array(parts.clone()), "{name}");
        assert_eq!(sub3.read_frame(), push(parts), "{name}");
        let list = publisher.cmd(&["CLIENT", "LIST"]);
        let list = String::from_utf8_lossy(list.as_bytes().unwrap_or_default()).into_owned();
        assert_eq!(list.matches("flags=P ").count(), 2, "{name}: {list}");
        assert_eq!(list.matches("ssub=1 ").count(), 2, "{name}: {list}");
        assert_eq!(info_field(&mut publisher, "pubsubshard_channels").as_deref(), Some("1"), "{name}");
    }
}

#[test]
fn scripts_track_their_declared_keys_once_they_read() {
    for server in [Server::strata(), Server::redis()] {
        let name = server.name();
        let mut reader = server.conn();
        let mut writer = server.conn();
        reader.hello3();
        reader.ok(&["CLIENT", "TRACKING", "on"]);
        // A script that reads nothing tracks nothing.
        reader.cmd(&["EVAL", "redis.call('set', 'k3{t}', 'bar')", "2", "k1{t}", "k2{t}"]);
        writer.ok(&["MSET", "k2{t}", "1", "k1{t}", "1"]);
        // One read: every declared key is tracked.
        reader.cmd(&["EVAL", "redis.call('get', 'k3{t}')", "2", "k1{t}", "k2{t}"]);
        writer.ok(&["MSET", "k2{t}", "2", "k1{t}", "2"]);
        assert_eq!(reader.read_frame(), invalidate(&["k2{t}"]), "{name}");
        assert_eq!(reader.read_frame(), invalidate(&["k1{t}"]), "{name}");
        // NOLOOP: the script's own write is not reported back.
        reader.ok(&["CLIENT", "TRACKING", "off"]);
        reader.ok(&["CLIENT", "TRACKING", "on", "NOLOOP"]);
        assert_eq!(reader.cmd(&["GET", "k1{t}"]), Frame::bulk("2"));
        reader.ok(&["EVAL", "return redis.call('set', 'k1{t}', '3')", "1", "k1{t}"]);
        assert_eq!(reader.cmd(&["GET", "k1{t}"]), Frame::bulk("3"), "{name}");
    }
}

#[test]
fn resp3_subscription_confirmations_survive_client_reply_off() {
    let mut d = Diff::new_resp3();
    d.send_raw_both(b"CLIENT REPLY OFF\r\nSET x 1\r\n");
    d.exact(&["SUBSCRIBE", "ch"]);
    d.exact(&["SSUBSCRIBE", "sch"]);
    d.exact(&["PSUBSCRIBE", "p*"]);
    d.exact(&["UNSUBSCRIBE", "ch"]);
    d.send_raw_both(b"GET x\r\nCLIENT REPLY ON\r\n");
    d.compare_next(Mode::Exact);
    d.exact(&["GET", "x"]);
    d.finish();
}
