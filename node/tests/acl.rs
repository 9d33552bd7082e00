//! ACL: differential tests against redis-server (SETUSER rules and their
//! errors, GETUSER in RESP2 and RESP3, LIST, CAT, DRYRUN, LOG fields, AUTH,
//! HELLO AUTH, requirepass) and enforcement (NOPERM at dispatch, in MULTI
//! and EXEC, in scripts, pub/sub channels, disconnections on DELUSER and
//! on revoked channels, ACL SAVE / LOAD).

mod support;

use std::time::Duration;
use support::*;

/// Rules each tried on a fresh user: accepted or refused, the same way.
const RULES: &[&[&str]] = &[
    &[],
    &["on", ">p1", ">p2", "<p1"],
    &["on", "nopass"],
    &["on", "#5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"],
    &["!5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"],
    &["#abc"],
    &["!abc"],
    &["<nope"],
    &[">p", "resetpass"],
    &["~a*", "%R~b*", "%W~c*", "%RW~d*", "%rw~e*", "~a*"],
    &["%R~x", "%W~x"],
    &["%RW"],
    &["%~x"],
    &["%RR~x"],
    &["%X~a"],
    &["~a b"],
    &["allkeys", "~x"],
    &["~*", "resetkeys", "~y"],
    &["&ch*", "&ch*", "&other"],
    &["&a b"],
    &["allchannels", "&x"],
    &["&*"],
    &["+get", "+set", "-get"],
    &["+@all", "-config|get"],
    &["+@all", "-@admin"],
    &["-@all", "+@read", "+select|0"],
    &["+select|0", "+select|1", "-select"],
    &["allcommands", "nocommands", "+ping"],
    &["+config|get|x"],
    &["+config|"],
    &["+nosuch"],
    &["-select|0"],
    &["+@nosuch"],
    &["-@NOSUCH"],
    &["+GET", "+@READ"],
    &["bogus"],
    &["(+get ~x*)", "(+set %W~y* &c)"],
    &["(+get", "~x*)"],
    &["(+get", "x"],
    &["(+get ~x", "bad)"],
    &["(+nosuch)"],
    &["(+get)", "clearselectors"],
    &["on", ">p", "~k", "&c", "+get", "(+set)", "reset"],
    &["skip-sanitize-payload"],
    &["sanitize-payload"],
    &[""],
    &["(+get \"\")"],
    &["(\"unbalanced)"],
    &["+", "-", "+@", "%", "~", "&", "(", ")", "()", " () "],
    &["+"],
    &["%"],
    &["~", "&"],
    &["()"],
    &[" () "],
];

#[test]
fn setuser_rules_getuser_and_list_match_redis() {
    let mut d = Diff::new();
    for (i, rules) in RULES.iter().enumerate() {
        let name = format!("user{i}");
        let mut cmd = vec!["ACL", "SETUSER", name.as_str()];
        cmd.extend_from_slice(rules);
        d.exact(&cmd);
        d.exact(&["ACL", "GETUSER", &name]);
    }
    d.exact(&["ACL", "LIST"]);
    d.exact(&["ACL", "USERS"]);
    // Changes of an existing user are all-or-nothing.
    d.exact(&["ACL", "SETUSER", "user1", "+get", "+nosuch"]);
    d.exact(&["ACL", "GETUSER", "user1"]);
    d.exact(&["ACL", "GETUSER", "nosuch"]);
    d.exact(&["ACL", "GETUSER", "default"]);
    d.err(&["ACL", "SETUSER", "a b"]);
    d.err(&["ACL", "SETUSER", "a\0b"]);
    d.err(&["ACL", "SETUSER"]);
    d.err(&["ACL", "GETUSER"]);
    d.err(&["ACL", "GETUSER", "a", "b"]);
    d.finish();
}

#[test]
fn getuser_in_resp3_matches_redis() {
    let mut d = Diff::new_resp3();
    d.exact(&["ACL", "SETUSER", "u", "on", ">pw", "~a", "%R~b", "&c", "+get", "(+set ~x)", "(-@all %W~y)"]);
    d.exact(&["ACL", "GETUSER", "u"]);
    d.exact(&["ACL", "GETUSER", "default"]);
    d.exact(&["ACL", "GETUSER", "none"]);
    d.exact(&["ACL", "LIST"]);
    d.finish();
}

#[test]
fn other_subcommands_and_their_errors_match_redis() {
    let mut d = Diff::new();
    d.exact(&["ACL", "CAT"]);
    d.unordered(&["ACL", "CAT", "transaction"]);
    d.unordered(&["ACL", "CAT", "TRANSACTION"]);
    d.err(&["ACL", "CAT", "nosuch"]);
    d.err(&["ACL", "CAT", "a", "b"]);
    d.exact(&["ACL", "WHOAMI"]);
    d.err(&["ACL", "WHOAMI", "x"]);
    d.exact(&["ACL", "USERS"]);
    d.err(&["ACL", "DELUSER", "default"]);
    d.err(&["ACL", "DELUSER", "x", "default"]);
    d.exact(&["ACL", "DELUSER", "nosuch"]);
    d.exact(&["ACL", "SETUSER", "a"]);
    d.exact(&["ACL", "SETUSER", "b"]);
    d.exact(&["ACL", "DELUSER", "a", "b", "a", "c"]);
    d.exact(&["ACL", "USERS"]);
    for bits in ["0", "-1", "4097", "x", "99999999999999999999"] {
        d.err(&["ACL", "GENPASS", bits]);
    }
    d.err(&["ACL", "GENPASS", "1", "2"]);
    d.err(&["ACL", "LOG", "x"]);
    d.exact(&["ACL", "LOG", "-1"]);
    d.exact(&["ACL", "LOG", "RESET"]);
    d.exact(&["ACL", "LOG"]);
    d.err(&["ACL", "LOG", "1", "2"]);
    d.err(&["ACL", "SAVE"]);
    d.err(&["ACL", "LOAD"]);
    d.err(&["ACL", "nosuch"]);
    d.err(&["ACL"]);
    d.exact(&["ACL", "HELP"]);
    d.exact(&["ACL", "SETUSER", "dry", "+@all", "%R~read*", "%W~write*", "%RW~rw*", "&chan"]);
    for cmd in [
        &["GET", "read"][..],
        &["GET", "write"],
        &["SET", "write", "v"],
        &["SET", "read", "v"],
        &["SET", "write", "v", "GET"],
        &["SET", "write", "get"],
        &["SET", "write", "v", "EX", "get"],
        &["BITFIELD", "read", "GET", "u4", "0"],
        &["BITFIELD", "read", "GET", "u4", "0", "SET", "u4", "0", "1"],
        &["BITFIELD", "write", "INCRBY", "u4", "0", "1"],
        &["BITFIELD", "rw", "OVERFLOW", "SAT", "GET", "u4", "0"],
        &["LPUSH", "write", "v"],
        &["COPY", "read", "write"],
        &["COPY", "write", "read"],
        &["MGET", "rw", "read", "other"],
        &["PUBLISH", "chan", "m"],
        &["PUBLISH", "other", "m"],
        &["SUBSCRIBE", "chan", "other"],
        &["EXISTS", "read"],
        &["EXISTS", "nothing"],
        &["CONFIG", "GET", "x"],
        &["PING"],
    ] {
        let mut full = vec!["ACL", "DRYRUN", "dry"];
        full.extend_from_slice(cmd);
        d.exact(&full);
    }
    d.exact(&["ACL", "SETUSER", "dry", "-@all"]);
    d.exact(&["ACL", "DRYRUN", "dry", "set", "k", "v"]);
    d.exact(&["ACL", "DRYRUN", "dry", "config", "get", "x"]);
    d.err(&["ACL", "DRYRUN", "nouser", "get", "k"]);
    d.err(&["ACL", "DRYRUN", "dry", "nocommand", "k"]);
    d.err(&["ACL", "DRYRUN", "dry", "get"]);
    d.err(&["ACL", "DRYRUN", "dry"]);
    d.finish();
}

#[test]
fn genpass_lengths() {
    let server = Server::strata();
    let mut c = server.conn();
    for (bits, len) in [(None, 64), (Some("1"), 1), (Some("5"), 2), (Some("128"), 32), (Some("4096"), 1024)] {
        let mut cmd = vec!["ACL", "GENPASS"];
        cmd.extend(bits);
        let reply = c.cmd(&cmd);
        let text = reply.as_str().expect("a bulk").to_string();
        assert_eq!(text.len(), len, "{bits:?}");
        assert!(text.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()), "{text}");
    }
    assert_ne!(c.cmd(&["ACL", "GENPASS"]), c.cmd(&["ACL", "GENPASS"]));
}

/// A pair of servers with an admin connection each, for tests that need
/// several clients.
struct Pair {
    strata: Server,
    redis: Server,
}

impl Pair {
    fn new() -> Pair {
        Pair { strata: Server::strata(), redis: Server::redis() }
    }

    fn diff(&self) -> Diff {
        Diff::with_conns(self.strata.conn(), self.redis.conn())
    }
}

/// ACL LOG without what differs by nature (age, client details).
fn log_fields(f: &Frame) -> Vec<Vec<(String, Frame)>> {
    let entries = f.as_array().expect("ACL LOG is an array");
    entries
        .iter()
        .map(|e| {
            let kv = e.as_array().expect("an entry");
            kv.chunks(2)
                .map(|p| (p[0].as_str().unwrap().to_string(), p[1].clone()))
                .filter(|(k, _)| k != "age-seconds" && k != "client-info")
                .collect()
        })
        .collect()
}

fn same_log(d: &mut Diff) {
    same_log_n(d, &["ACL", "LOG"]);
}

fn same_log_n(d: &mut Diff, cmd: &[&str]) {
    d.check(cmd, |a, b| {
        let (la, lb) = (log_fields(a), log_fields(b));
        if la == lb { Ok(()) } else { Err(format!("log entries differ: {la:?} vs {lb:?}")) }
    });
}

#[test]
fn enforcement_errors_and_log_match_redis() {
    let p = Pair::new();
    let mut admin = p.diff();
    admin.exact(&["ACL", "SETUSER", "lu", "on", ">pw", "~k*", "+get", "+multi", "+exec", "+eval", "&c1", "+publish"]);
    admin.exact(&["SET", "zz", "1"]);
    let mut u = p.diff();
    u.err(&["AUTH", "lu", "bad"]);
    u.err(&["AUTH", "nosuch", "x"]);
    u.err(&["AUTH", "onlypass"]);
    u.err(&["AUTH", "a", "b", "c"]);
    u.exact(&["AUTH", "lu", "pw"]);
    u.err(&["ACL", "WHOAMI"]);
    u.err(&["GET", "x"]);
    u.exact(&["GET", "k1"]);
    u.err(&["SET", "k1", "v"]);
    u.err(&["PUBLISH", "c2", "m"]);
    u.exact(&["PUBLISH", "c1", "m"]);
    u.err(&["CONFIG", "GET", "maxmemory"]);
    u.err(&["EVAL", "return redis.call('get','zz')", "0"]);
    u.err(&["EVAL", "return redis.call('set','k1','1')", "0"]);
    u.exact(&["EVAL", "return redis.pcall('get','zz')", "0"]);
    u.exact(&["MULTI"]);
    u.err(&["GET", "zz"]);
    u.exact(&["GET", "k1"]);
    u.err(&["EXEC"]);
    same_log(&mut admin);
    // Repeated alike refusals are counted in one entry.
    u.err(&["GET", "x"]);
    u.err(&["GET", "x"]);
    same_log(&mut admin);
    same_log_n(&mut admin, &["ACL", "LOG", "2"]);
    admin.exact(&["ACL", "LOG", "RESET"]);
    admin.exact(&["ACL", "LOG"]);
    // Permissions changed between MULTI and EXEC.
    u.exact(&["MULTI"]);
    u.exact(&["GET", "k1"]);
    admin.exact(&["ACL", "SETUSER", "lu", "resetkeys"]);
    u.exact(&["EXEC"]);
    same_log(&mut admin);
    u.finish();
    admin.finish();
}

#[test]
fn hello_auth_requirepass_and_reset() {
    let p = Pair::new();
    let mut admin = p.diff();
    admin.exact(&["ACL", "SETUSER", "h", "on", ">hp", "+@all", "~*"]);
    let mut c = p.diff();
    c.err(&["HELLO", "2", "AUTH", "h", "wrong"]);
    c.check(&["HELLO", "2", "AUTH", "h", "hp", "SETNAME", "named"], |a, b| {
        if a.kind() == b.kind() && a.kind() == "array" { Ok(()) } else { Err("HELLO AUTH must succeed".into()) }
    });
    c.exact(&["ACL", "WHOAMI"]);
    c.exact(&["CLIENT", "GETNAME"]);
    c.exact(&["RESET"]);
    c.exact(&["ACL", "WHOAMI"]);
    admin.exact(&["CONFIG", "SET", "requirepass", "secret"]);
    admin.exact(&["ACL", "GETUSER", "default"]);
    admin.exact(&["ACL", "LIST"]);
    admin.exact(&["CONFIG", "GET", "requirepass"]);
    // The admin connection stays authenticated; a new one must AUTH.
    admin.exact(&["PING"]);
    let mut fresh = p.diff();
    fresh.err(&["PING"]);
    fresh.err(&["AUTH", "wrong"]);
    fresh.exact(&["AUTH", "secret"]);
    fresh.exact(&["PING"]);
    fresh.exact(&["RESET"]);
    fresh.err(&["PING"]);
    fresh.err(&["HELLO", "3"]);
    fresh.exact(&["AUTH", "default", "secret"]);
    fresh.exact(&["ACL", "WHOAMI"]);
    // ACL SETUSER default nopass lifts the requirement at once.
    admin.exact(&["ACL", "SETUSER", "default", "nopass"]);
    let mut later = p.diff();
    later.exact(&["PING"]);
    admin.exact(&["CONFIG", "SET", "requirepass", ""]);
    admin.exact(&["ACL", "GETUSER", "default"]);
    admin.err(&["AUTH", "x"]);
    later.finish();
    fresh.finish();
    c.finish();
    admin.finish();
}

fn wait_closed(conn: &mut RawConn) -> bool {
    conn.set_timeout(Some(Duration::from_secs(5)));
    wait_for(Duration::from_secs(5), || conn.is_closed())
}

#[test]
fn deluser_and_revoked_channels_disconnect_clients() {
    let server = Server::strata();
    let mut admin = server.conn();
    admin.ok(&["ACL", "SETUSER", "d", "on", ">p", "+@all", "~*", "&news*"]);
    let mut victim = server.conn();
    victim.ok(&["AUTH", "d", "p"]);
    let mut bystander = server.conn();
    assert_eq!(bystander.cmd(&["PING"]), Frame::simple("PONG"));
    let mut sub = server.conn();
    sub.ok(&["AUTH", "d", "p"]);
    sub.send(&["SUBSCRIBE", "news1"]);
    assert!(sub.read_frame().as_array().is_some());
    let mut psub = server.conn();
    psub.ok(&["AUTH", "d", "p"]);
    psub.send(&["PSUBSCRIBE", "news*"]);
    assert!(psub.read_frame().as_array().is_some());
    // PSUBSCRIBE patterns must appear literally.
    let mut other = server.conn();
    other.ok(&["AUTH", "d", "p"]);
    let refused = other.cmd(&["PSUBSCRIBE", "new*"]);
    assert!(refused.error_message().is_some_and(|m| m.contains("channels")), "{refused}");
    // Adding channels keeps subscribers; removing the pattern kills them.
    admin.ok(&["ACL", "SETUSER", "d", "&more"]);
    assert_eq!(sub.cmd(&["PING"]).as_array().map(|a| a.len()), Some(2));
    admin.ok(&["ACL", "SETUSER", "d", "resetchannels", "&news1"]);
    assert!(wait_closed(&mut psub), "the pattern subscriber is disconnected");
    assert_eq!(sub.cmd(&["PING"]).as_array().map(|a| a.len()), Some(2), "news1 is still allowed");
    assert_eq!(admin.cmd(&["ACL", "DELUSER", "d"]), Frame::int(1));
    assert!(wait_closed(&mut victim), "the deleted user's client is disconnected");
    assert!(wait_closed(&mut sub));
    assert_eq!(bystander.cmd(&["PING"]), Frame::simple("PONG"));
    // Losing allchannels kills subscribers too.
    admin.ok(&["ACL", "SETUSER", "all", "on", "nopass", "+@all", "allchannels"]);
    let mut wide = server.conn();
    wide.ok(&["AUTH", "all", "x"]);
    wide.send(&["PSUBSCRIBE", "foo"]);
    assert!(wide.read_frame().as_array().is_some());
    admin.ok(&["ACL", "SETUSER", "all", "resetchannels"]);
    assert!(wait_closed(&mut wide), "a subscriber that lost allchannels is disconnected");
    // Deleting one's own user: the reply arrives, then the connection closes.
    admin.ok(&["ACL", "SETUSER", "self", "on", "nopass", "+@all"]);
    let mut me = server.conn();
    me.ok(&["AUTH", "self", "any"]);
    assert_eq!(me.cmd(&["ACL", "DELUSER", "self"]), Frame::int(1));
    assert!(wait_closed(&mut me));
}

#[test]
fn client_list_and_kill_by_user() {
    let server = Server::strata();
    let mut admin = server.conn();
    admin.ok(&["ACL", "SETUSER", "k", "on", "nopass", "+@all"]);
    let mut c = server.conn();
    c.ok(&["AUTH", "k", "x"]);
    let info = c.cmd(&["CLIENT", "INFO"]);
    assert!(String::from_utf8_lossy(info.as_bytes().unwrap()).contains(" user=k "), "{info}");
    let err = admin.cmd(&["CLIENT", "KILL", "USER", "nosuch"]);
    assert_eq!(err.error_message(), Some("ERR No such user 'nosuch'"));
    assert_eq!(admin.cmd(&["CLIENT", "KILL", "USER", "k"]), Frame::int(1));
    assert!(wait_closed(&mut c));
}

#[test]
fn acl_save_and_load() {
    // The file must exist at start-up, as in Redis.
    let path = std::env::temp_dir().join(format!("strata-acl-test-{}.acl", std::process::id()));
    std::fs::write(&path, "user default on nopass ~* &* +@all\n").unwrap();
    let server = Server::strata_with(&["--aclfile", path.to_str().unwrap()]);
    let mut admin = server.conn();
    admin.ok(&["ACL", "SETUSER", "s", "on", ">pw", "~a*", "%R~b*", "&c", "+get", "(+set ~x)"]);
    admin.ok(&["ACL", "SAVE"]);
    let saved = std::fs::read_to_string(&path).unwrap();
    assert!(saved.contains("user default on nopass ~* &* +@all\n"), "{saved}");
    let line = saved.lines().find(|l| l.starts_with("user s ")).expect("user s saved");
    assert!(line.contains("~a* %R~b* resetchannels &c -@all +get (~x resetchannels -@all +set)"), "{line}");
    let mut s = server.conn();
    s.ok(&["AUTH", "s", "pw"]);
    let before = admin.cmd(&["ACL", "LIST"]);
    admin.ok(&["ACL", "SETUSER", "s", "reset"]);
    admin.ok(&["ACL", "SETUSER", "extra"]);
    admin.ok(&["ACL", "LOAD"]);
    assert_eq!(admin.cmd(&["ACL", "LIST"]), before);
    assert!(wait_closed(&mut s), "clients of reloaded users are disconnected");
    // A broken file changes nothing; every problem is reported as Redis does.
    std::fs::write(
        &path,
        "user default on nopass ~* &* +@all\nuser bad +nosuch\nuser worse (~x\nuser default on\nfoo bar\nuser \"a b\" on\n",
    )
    .unwrap();
    let err = admin.cmd(&["ACL", "LOAD"]);
    let p = path.display();
    let expected = format!(
        "ERR {p}:2: Error in applying operation '+nosuch': Unknown command or category name in ACL. {p}:3: Unmatched \
         parenthesis in selector definition.WARNING: Duplicate user 'default' found on line 4. {p}:5 should start \
         with user keyword followed by the username. {p}:6: Syntax error. WARNING: ACL errors detected, no change to \
         the previously active ACL rules was performed"
    );
    assert_eq!(err.error_message(), Some(expected.as_str()));
    assert_eq!(admin.cmd(&["ACL", "LIST"]), before);
    // Without the default user, the file gets a fresh one.
    std::fs::write(&path, "user x on nopass\n").unwrap();
    admin.ok(&["ACL", "LOAD"]);
    let list = admin.cmd(&["ACL", "LIST"]);
    assert_eq!(list, Frame::bulks(&["user default on nopass ~* &* +@all", "user x on nopass resetchannels -@all"]));
    let _ = std::fs::remove_file(&path);
}

#[test]
fn missing_aclfile_stops_the_start() {
    let path = std::env::temp_dir().join(format!("strata-acl-missing-{}.acl", std::process::id()));
    let port = free_port().to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_strata-node"))
        .args(["--port", &port, "--metrics-port", "0", "--aclfile", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("No such file or directory"));
}

#[test]
fn unrestricted_default_user_runs_everything() {
    let server = Server::strata();
    let mut c = server.conn();
    c.ok(&["SET", "k", "v"]);
    assert_eq!(c.cmd(&["ACL", "WHOAMI"]), Frame::bulk("default"));
    // Restricting the default user applies to connected clients at once.
    c.ok(&["ACL", "SETUSER", "default", "-set"]);
    let denied = c.cmd(&["SET", "k", "v"]);
    assert_eq!(denied.error_message(), Some("NOPERM this user has no permissions to run the 'set' command"));
    c.ok(&["ACL", "SETUSER", "default", "+set"]);
    c.ok(&["SET", "k", "v"]);
}

#[test]
fn selectors_and_key_access_match_redis() {
    let p = Pair::new();
    let mut admin = p.diff();
    admin.exact(&["ACL", "SETUSER", "sel", "on", "nopass", "(%R~read* +@all)", "(%W~write* +@all)"]);
    admin.exact(&["ACL", "SETUSER", "log", "on", "nopass", "+mget", "~key", "(+mget ~key ~otherkey)"]);
    admin.exact(&["SET", "readstr", "bar"]);
    let mut u = p.diff();
    u.exact(&["AUTH", "sel", "x"]);
    u.exact(&["LPUSH", "writelist", "10"]);
    u.err(&["GET", "writestr"]);
    u.err(&["LPUSH", "notwrite", "10"]);
    u.exact(&["GET", "readstr"]);
    u.err(&["SET", "readstr", "bar"]);
    u.err(&["COPY", "readstr", "writestr"]);
    u.exact(&["SELECT", "0"]);
    u.exact(&["AUTH", "log", "x"]);
    admin.exact(&["ACL", "LOG", "RESET"]);
    u.err(&["GET", "key"]);
    u.err(&["MGET", "otherkey", "someotherkey"]);
    u.err(&["MGET", "key", "otherkey", "someotherkey"]);
    same_log(&mut admin);
    // The first argument of a command without subcommands.
    admin.exact(&["ACL", "SETUSER", "db0", "on", "nopass", "-@all", "+select|0", "+acl"]);
    u.exact(&["AUTH", "db0", "x"]);
    u.exact(&["SELECT", "0"]);
    u.err(&["SELECT", "1"]);
    u.exact(&["ACL", "WHOAMI"]);
    u.finish();
    admin.finish();
}

#[test]
fn scripts_check_the_callers_permissions() {
    let p = Pair::new();
    let mut admin = p.diff();
    admin.exact(&["ACL", "SETUSER", "bob", "on", ">123", "+@scripting", "+set", "~x*"]);
    let mut u = p.diff();
    u.exact(&["AUTH", "bob", "123"]);
    u.exact(&["EVAL", "return redis.acl_check_cmd('set','xx',1)", "1", "xx"]);
    u.exact(&["EVAL", "return redis.acl_check_cmd('hset','xx','f',1)", "1", "xx"]);
    u.exact(&["EVAL", "return redis.acl_check_cmd('set','yy',1)", "0"]);
    u.err_prefix(&["EVAL", "return redis.acl_check_cmd('invalid-cmd','arg')", "0"]);
    u.exact(&["EVAL", "return redis.call('set','xa','1')", "1", "xa"]);
    u.exact(&["EVAL", "return redis.pcall('set','ya','1')", "0"]);
    u.exact(&["EVAL", "return redis.pcall('get','xa')", "0"]);
    u.finish();
    admin.finish();
}
