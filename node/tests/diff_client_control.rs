//! CLIENT PAUSE / UNPAUSE / UNBLOCK: replies differential against
//! redis-server, and the cross-connection behaviour run on both servers
//! (strata with two workers, so the paused or blocked client and the one
//! releasing it are on different threads).

mod support;

use std::time::{Duration, Instant};
use support::*;

fn blocked_clients(conn: &mut RawConn) -> String {
    info_field(conn, "blocked_clients").unwrap_or_default()
}

#[test]
fn client_control_errors_match_redis() {
    let mut d = Diff::new();
    for cmd in [
        &["CLIENT", "PAUSE"][..],
        &["CLIENT", "PAUSE", "abc"],
        &["CLIENT", "PAUSE", "-1"],
        &["CLIENT", "PAUSE", "10", "foo"],
        &["CLIENT", "PAUSE", "abc", "foo"],
        &["CLIENT", "PAUSE", "10", "write", "extra"],
        &["CLIENT", "PAUSE", "0"],
        &["CLIENT", "UNPAUSE", "x"],
        &["CLIENT", "UNPAUSE"],
        &["CLIENT", "UNBLOCK"],
        &["CLIENT", "UNBLOCK", "abc"],
        &["CLIENT", "UNBLOCK", "1", "foo"],
        &["CLIENT", "UNBLOCK", "abc", "foo"],
        &["CLIENT", "UNBLOCK", "99999"],
        &["CLIENT", "UNBLOCK", "-5", "ERROR"],
        &["CLIENT", "UNBLOCK", "1", "timeout", "extra"],
        &["CLIENT", "NO-EVICT", "maybe"],
        &["CLIENT", "NO-EVICT", "on"],
        &["CLIENT", "NO-EVICT", "off"],
        &["COMMAND", "INFO", "CLIENT|PAUSE", "CLIENT|UNPAUSE", "CLIENT|UNBLOCK", "CLIENT|TRACKING", "CLIENT|CACHING"],
    ] {
        d.exact(cmd);
    }
    d.finish();
}

#[test]
fn pause_write_holds_writes_until_unpause() {
    for server in [Server::strata(), Server::redis()] {
        let name = server.name();
        let mut admin = server.conn();
        let mut writer = server.conn();
        let mut reader = server.conn();
        admin.ok(&["CLIENT", "PAUSE", "60000", "WRITE"]);
        // Reads, and errors found before running, are answered at once.
        assert_eq!(reader.cmd(&["GET", "k"]), Frame::Nil, "{name}");
        assert!(reader.cmd(&["SET", "k"]).is_error(), "{name}");
        writer.send(&["SET", "k", "v"]);
        assert!(wait_for(Duration::from_secs(5), || blocked_clients(&mut admin) == "1"), "{name}");
        let list = admin.cmd(&["CLIENT", "LIST"]);
        assert!(String::from_utf8_lossy(list.as_bytes().unwrap()).contains("flags=b "), "{name}");
        // PUBLISH may replicate: held back too.
        reader.send(&["PUBLISH", "ch", "m"]);
        assert!(wait_for(Duration::from_secs(5), || blocked_clients(&mut admin) == "2"), "{name}");
        admin.ok(&["CLIENT", "UNPAUSE"]);
        assert_eq!(writer.read_frame(), Frame::ok(), "{name}");
        assert_eq!(reader.read_frame(), Frame::int(0), "{name}");
        assert_eq!(admin.cmd(&["GET", "k"]), Frame::bulk("v"), "{name}");
        assert_eq!(blocked_clients(&mut admin), "0", "{name}");
    }
}

#[test]
fn pause_all_ends_at_its_timeout_and_multi_waits_at_exec() {
    for server in [Server::strata(), Server::redis()] {
        let name = server.name();
        let mut admin = server.conn();
        let mut other = server.conn();
        // A transaction queued before the pause runs at EXEC once writes resume.
        other.ok(&["MULTI"]);
        assert_eq!(other.cmd(&["SET", "t", "1"]), Frame::simple("QUEUED"));
        admin.ok(&["CLIENT", "PAUSE", "60000", "WRITE"]);
        other.send(&["EXEC"]);
        assert!(wait_for(Duration::from_secs(5), || blocked_clients(&mut admin) == "1"), "{name}");
        admin.ok(&["CLIENT", "UNPAUSE"]);
        assert_eq!(other.read_frame(), Frame::Array(vec![Frame::ok()]), "{name}");
        // ALL: even PING waits, until the timeout.
        let start = Instant::now();
        admin.ok(&["CLIENT", "PAUSE", "300", "ALL"]);
        assert_eq!(other.cmd(&["PING"]), Frame::simple("PONG"), "{name}");
        assert!(start.elapsed() >= Duration::from_millis(250), "{name}: {:?}", start.elapsed());
    }
}

#[test]
fn unblock_ends_a_blocked_command_on_another_worker() {
    for server in [Server::strata(), Server::redis()] {
        let name = server.name();
        let mut admin = server.conn();
        let mut blocked = server.conn();
        let id = blocked.cmd(&["CLIENT", "ID"]).as_int().unwrap().to_string();
        assert_eq!(admin.cmd(&["CLIENT", "UNBLOCK", &id]), Frame::int(0), "{name}");
        blocked.send(&["BLPOP", "nolist", "0"]);
        assert!(wait_for(Duration::from_secs(5), || blocked_clients(&mut admin) == "1"), "{name}");
        assert_eq!(admin.cmd(&["CLIENT", "UNBLOCK", &id]), Frame::int(1), "{name}");
        assert_eq!(blocked.read_frame(), Frame::NilArray, "{name}");
        assert_eq!(admin.cmd(&["CLIENT", "UNBLOCK", &id, "ERROR"]), Frame::int(0), "{name}");
        blocked.send(&["BLMOVE", "nolist", "dst", "LEFT", "RIGHT", "0"]);
        assert!(wait_for(Duration::from_secs(5), || blocked_clients(&mut admin) == "1"), "{name}");
        assert_eq!(admin.cmd(&["CLIENT", "UNBLOCK", &id, "ERROR"]), Frame::int(1), "{name}");
        assert_eq!(blocked.read_frame(), Frame::error("UNBLOCKED client unblocked via CLIENT UNBLOCK"), "{name}");
        // The list is not waited on any more: a push stays in it.
        admin.cmd(&["RPUSH", "nolist", "x"]);
        assert_eq!(admin.cmd(&["LLEN", "nolist"]), Frame::int(1), "{name}");
        assert_eq!(blocked.cmd(&["PING"]), Frame::simple("PONG"), "{name}");
    }
}

#[test]
fn expired_keys_are_kept_while_paused() {
    for server in [Server::strata(), Server::redis()] {
        let name = server.name();
        let mut c = server.conn();
        let expired = || info_field(&mut server.conn(), "expired_keys").unwrap_or_default();
        let before = expired();
        c.ok(&["SET", "foo", "bar", "PX", "30"]);
        c.ok(&["CLIENT", "PAUSE", "50000", "WRITE"]);
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(c.cmd(&["GET", "foo"]), Frame::Nil, "{name}");
        assert_eq!(expired(), before, "{name}");
        c.ok(&["CLIENT", "UNPAUSE"]);
        assert_eq!(c.cmd(&["GET", "foo"]), Frame::Nil, "{name}");
        let after: u64 = expired().parse().unwrap();
        assert_eq!(after, before.parse::<u64>().unwrap() + 1, "{name}");
    }
}

#[test]
fn client_reply_on_cancels_a_pending_skip() {
    let mut d = Diff::new();
    d.send_raw_both(b"CLIENT REPLY SKIP\r\nCLIENT REPLY ON\r\n");
    d.compare_next(Mode::Exact);
    d.send_raw_both(b"CLIENT REPLY SKIP\r\nPING skipped\r\nPING shown\r\n");
    d.compare_next(Mode::Exact);
    d.exact(&["PING"]);
    d.finish();
}
