//! Strata-only integration tests of the connection and server commands:
//! authentication, CLIENT LIST/KILL/REPLY, INFO fields, CONFIG SET with
//! eviction, CONFIG REWRITE, SHUTDOWN and QUIT.

mod support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

fn err_of(f: &Frame) -> &str {
    f.error_message().unwrap_or_else(|| panic!("expected an error, got {f}"))
}

fn text_of(f: &Frame) -> String {
    String::from_utf8_lossy(f.as_bytes().unwrap_or_else(|| panic!("expected a string, got {f}"))).into_owned()
}

/// `key=value` fields of one CLIENT LIST / CLIENT INFO line.
fn client_fields(line: &str) -> HashMap<String, String> {
    line.split(' ').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn client_lines(reply: &Frame) -> Vec<HashMap<String, String>> {
    text_of(reply).lines().map(client_fields).collect()
}

#[test]
fn requirepass_auth_and_hello() {
    let server = Server::strata_with(&["--requirepass", "s3cret"]);
    let mut c = server.conn();
    assert_eq!(err_of(&c.cmd(&["PING"])), "NOAUTH Authentication required.");
    assert_eq!(err_of(&c.cmd(&["GET", "k"])), "NOAUTH Authentication required.");
    assert_eq!(err_of(&c.cmd(&["AUTH", "wrong"])), "WRONGPASS invalid username-password pair or user is disabled.");
    assert_eq!(
        err_of(&c.cmd(&["AUTH", "bob", "s3cret"])),
        "WRONGPASS invalid username-password pair or user is disabled."
    );
    assert_eq!(c.cmd(&["PING"]).error_code(), Some("NOAUTH"));
    c.ok(&["AUTH", "s3cret"]);
    assert_eq!(c.cmd(&["PING"]), Frame::simple("PONG"));
    c.ok(&["AUTH", "default", "s3cret"]);

    // HELLO needs authentication, or authenticates itself.
    let mut h = server.conn();
    let e = h.cmd(&["HELLO", "3"]);
    assert!(err_of(&e).starts_with("NOAUTH HELLO must be called with the client already authenticated"), "{e}");
    assert_eq!(h.cmd(&["HELLO", "3", "AUTH", "default", "nope"]).error_code(), Some("WRONGPASS"));
    let reply = h.cmd(&["HELLO", "3", "AUTH", "default", "s3cret", "SETNAME", "h1"]);
    let Frame::Map(fields) = &reply else { panic!("HELLO 3 reply is not a map: {reply}") };
    assert!(fields.contains(&(Frame::bulk("proto"), Frame::int(3))), "{reply}");
    assert!(fields.contains(&(Frame::bulk("version"), Frame::bulk("7.0.15"))), "{reply}");
    assert_eq!(h.cmd(&["CLIENT", "GETNAME"]), Frame::bulk("h1"));
    // RESET de-authenticates when a password is set.
    assert_eq!(h.cmd(&["RESET"]), Frame::simple("RESET"));
    assert_eq!(h.cmd(&["PING"]).error_code(), Some("NOAUTH"));

    // Removing the password: new connections need no AUTH; existing ones stay.
    c.ok(&["CONFIG", "SET", "requirepass", ""]);
    let mut fresh = server.conn();
    assert_eq!(fresh.cmd(&["PING"]), Frame::simple("PONG"));
    let e = fresh.cmd(&["AUTH", "x"]);
    assert!(err_of(&e).starts_with("ERR AUTH <password> called without any password configured"), "{e}");
    // And setting one back requires it again for new connections.
    c.ok(&["CONFIG", "SET", "requirepass", "other"]);
    assert_eq!(c.cmd(&["CONFIG", "GET", "requirepass"]), Frame::bulks(&["requirepass", "other"]));
    assert_eq!(server.conn().cmd(&["PING"]).error_code(), Some("NOAUTH"));
    assert_eq!(fresh.cmd(&["PING"]), Frame::simple("PONG"));
}

#[test]
fn client_list_info_and_flags() {
    let server = Server::strata();
    let mut a = server.conn();
    let mut b = server.conn();
    a.ok(&["CLIENT", "SETNAME", "alpha"]);
    b.ok(&["CLIENT", "SETNAME", "beta"]);
    b.ok(&["SELECT", "3"]);
    let a_id = a.cmd(&["CLIENT", "ID"]).as_int().unwrap();
    let b_id = b.cmd(&["CLIENT", "ID"]).as_int().unwrap();
    assert_ne!(a_id, b_id);

    let list = a.cmd(&["CLIENT", "LIST"]);
    assert!(matches!(list, Frame::Bulk(_)), "RESP2 CLIENT LIST is a bulk string: {list}");
    assert!(text_of(&list).ends_with('\n'));
    let lines = client_lines(&list);
    assert_eq!(lines.len(), 2, "{list}");
    let find = |name: &str| lines.iter().find(|l| l["name"] == name).unwrap_or_else(|| panic!("{name} missing"));
    let (la, lb) = (find("alpha"), find("beta"));
    assert_eq!(la["id"], a_id.to_string());
    assert_eq!(lb["id"], b_id.to_string());
    assert_eq!(la["db"], "0");
    assert_eq!(lb["db"], "3");
    assert_eq!(la["cmd"], "client|list");
    assert_eq!(la["flags"], "N");
    for field in [
        "id",
        "addr",
        "laddr",
        "fd",
        "name",
        "age",
        "idle",
        "flags",
        "db",
        "sub",
        "psub",
        "ssub",
        "multi",
        "qbuf",
        "qbuf-free",
        "argv-mem",
        "multi-mem",
        "obl",
        "oll",
        "omem",
        "tot-mem",
        "events",
        "cmd",
        "user",
        "redir",
        "resp",
    ] {
        assert!(la.contains_key(field), "CLIENT LIST lacks {field}");
    }
    assert_eq!(la["user"], "default");
    assert_eq!(la["multi"], "-1");
    assert_eq!(la["resp"], "2");
    assert_eq!(la["laddr"], format!("127.0.0.1:{}", server.port()));

    // Filters.
    let only_b = client_lines(&a.cmd(&["CLIENT", "LIST", "ID", &b_id.to_string(), "999999"]));
    assert_eq!(only_b.len(), 1);
    assert_eq!(only_b[0]["name"], "beta");
    assert_eq!(client_lines(&a.cmd(&["CLIENT", "LIST", "TYPE", "normal"])).len(), 2);
    assert_eq!(client_lines(&a.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"])).len(), 0);
    let mut sub = server.conn();
    sub.send(&["SUBSCRIBE", "news"]);
    sub.read_frame();
    let pubsub = client_lines(&a.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]));
    assert_eq!(pubsub.len(), 1);
    assert_eq!(pubsub[0]["sub"], "1");
    assert_eq!(pubsub[0]["flags"], "P");
    assert_eq!(client_lines(&a.cmd(&["CLIENT", "LIST", "TYPE", "normal"])).len(), 2);

    // CLIENT INFO: the caller's own line, with its state.
    b.hello3();
    b.ok(&["CLIENT", "SETINFO", "LIB-NAME", "mylib"]);
    b.ok(&["CLIENT", "SETINFO", "lib-ver", "1.2.3"]);
    assert_eq!(b.cmd(&["CLIENT", "SETINFO", "lib-name", "a b"]).error_code(), Some("ERR"));
    assert_eq!(err_of(&b.cmd(&["CLIENT", "SETINFO", "color", "red"])), "ERR Unrecognized option 'color'");
    b.ok(&["CLIENT", "NO-EVICT", "on"]);
    b.ok(&["CLIENT", "NO-TOUCH", "on"]);
    let info = b.cmd(&["CLIENT", "INFO"]);
    let Frame::Verbatim { format, text } = &info else { panic!("RESP3 CLIENT INFO is verbatim: {info}") };
    assert_eq!(format, "txt");
    let me = client_fields(String::from_utf8_lossy(text).trim_end());
    assert_eq!(me["id"], b_id.to_string());
    assert_eq!(me["resp"], "3");
    assert_eq!(me["db"], "3");
    assert_eq!(me["lib-name"], "mylib");
    assert_eq!(me["lib-ver"], "1.2.3");
    assert_eq!(me["cmd"], "client|info");
    assert_eq!(me["flags"], "eT");
    // Another client sees the transaction in progress.
    b.ok(&["MULTI"]);
    assert_eq!(b.cmd(&["PING"]), Frame::simple("QUEUED"));
    let seen = client_lines(&a.cmd(&["CLIENT", "LIST", "ID", &b_id.to_string()]));
    assert_eq!((seen[0]["flags"].as_str(), seen[0]["multi"].as_str()), ("xeT", "1"));
    b.ok(&["DISCARD"]);
    b.ok(&["CLIENT", "NO-EVICT", "off"]);
    b.ok(&["CLIENT", "NO-TOUCH", "off"]);
    let me = client_fields(text_of(&b.cmd(&["CLIENT", "INFO"])).trim_end());
    assert_eq!(me["flags"], "N");
}

#[test]
fn client_kill_closes_connections() {
    let server = Server::strata();
    let mut admin = server.conn();
    let mut victim = server.conn();
    let mut other = server.conn();
    assert_eq!(victim.cmd(&["PING"]), Frame::simple("PONG"));
    // Registered before CLIENT LIST looks for it (a connect alone may still
    // be on its way to a worker).
    assert_eq!(other.cmd(&["PING"]), Frame::simple("PONG"));
    let victim_id = victim.cmd(&["CLIENT", "ID"]).as_int().unwrap();
    let admin_id = admin.cmd(&["CLIENT", "ID"]).as_int().unwrap();

    assert_eq!(admin.cmd(&["CLIENT", "KILL", "ID", &victim_id.to_string()]), Frame::int(1));
    victim.set_timeout(Some(Duration::from_secs(5)));
    assert!(victim.is_closed(), "killed client must be disconnected");
    assert!(wait_for(Duration::from_secs(5), || {
        !text_of(&admin.cmd(&["CLIENT", "LIST"])).contains(&format!("id={victim_id} "))
    }));
    // SKIPME yes (the default) spares the caller.
    assert_eq!(admin.cmd(&["CLIENT", "KILL", "ID", &admin_id.to_string()]), Frame::int(0));
    assert_eq!(admin.cmd(&["PING"]), Frame::simple("PONG"));

    // Old form: by address.
    let other_addr = client_lines(&admin.cmd(&["CLIENT", "LIST"]))
        .into_iter()
        .find(|l| l["id"] != admin_id.to_string())
        .map(|l| l["addr"].clone())
        .unwrap();
    admin.ok(&["CLIENT", "KILL", &other_addr]);
    other.set_timeout(Some(Duration::from_secs(5)));
    assert!(other.is_closed());
    assert_eq!(err_of(&admin.cmd(&["CLIENT", "KILL", &other_addr])), "ERR No such client");

    // SKIPME no: the caller gets its reply, then is closed too.
    let mut third = server.conn();
    third.cmd(&["PING"]);
    assert_eq!(admin.cmd(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "no"]), Frame::int(2));
    admin.set_timeout(Some(Duration::from_secs(5)));
    assert!(admin.is_closed());
    third.set_timeout(Some(Duration::from_secs(5)));
    assert!(third.is_closed());
    assert_eq!(server.conn().cmd(&["PING"]), Frame::simple("PONG"));
}

fn num(info: &HashMap<String, String>, field: &str) -> f64 {
    info.get(field)
        .unwrap_or_else(|| panic!("INFO lacks {field}"))
        .trim_end_matches('%')
        .parse()
        .unwrap_or_else(|_| panic!("INFO {field} is not a number: {}", info[field]))
}

#[test]
fn info_fields_and_counters() {
    let server = Server::strata();
    let mut c = server.conn();
    let raw = c.cmd(&["INFO"]);
    let text = text_of(&raw);
    assert!(text.starts_with("# Server\r\n"), "{text}");
    for header in
        ["# Clients\r\n", "# Memory\r\n", "# Persistence\r\n", "# Stats\r\n", "# Replication\r\n", "# CPU\r\n"]
    {
        assert!(text.contains(&format!("\r\n\r\n{header}")), "INFO lacks {header:?}");
    }
    assert!(!text.contains("# Commandstats"), "commandstats is not a default section");
    assert!(!text.replace("\r\n", "").contains('\n'), "INFO lines end with CRLF");

    let i = info(&mut c, None);
    for field in [
        "redis_version",
        "strata_version",
        "redis_mode",
        "os",
        "arch_bits",
        "process_id",
        "run_id",
        "tcp_port",
        "uptime_in_seconds",
        "uptime_in_days",
        "hz",
        "executable",
        "connected_clients",
        "blocked_clients",
        "maxclients",
        "used_memory",
        "used_memory_human",
        "used_memory_peak",
        "maxmemory",
        "maxmemory_human",
        "maxmemory_policy",
        "mem_fragmentation_ratio",
        "keyspace_hits",
        "keyspace_misses",
        "evicted_keys",
        "expired_keys",
        "total_connections_received",
        "total_commands_processed",
        "instantaneous_ops_per_sec",
        "rejected_connections",
        "total_net_input_bytes",
        "total_net_output_bytes",
        "loading",
        "rdb_changes_since_last_save",
        "aof_enabled",
        "role",
        "connected_slaves",
        "master_replid",
        "used_cpu_sys",
        "used_cpu_user",
        "cluster_enabled",
    ] {
        assert!(i.contains_key(field), "INFO lacks {field}");
    }
    assert_eq!(i["redis_version"], "7.0.15");
    assert!(!i["strata_version"].is_empty());
    assert_eq!(i["redis_mode"], "standalone");
    assert_eq!(i["arch_bits"], "64");
    assert_eq!(i["process_id"], server.pid().to_string());
    assert_eq!(i["tcp_port"], server.port().to_string());
    assert_eq!(i["run_id"].len(), 40);
    assert_eq!(i["role"], "master");
    assert_eq!(i["loading"], "0");
    assert_eq!(i["aof_enabled"], "0");
    assert_eq!(i["maxmemory"], "0");
    assert_eq!(i["maxmemory_policy"], "noeviction");
    assert_eq!(i["maxclients"], "10000");
    assert!(num(&i, "connected_clients") >= 1.0);
    assert!(num(&i, "used_memory") > 0.0);
    assert!(num(&i, "used_memory_peak") >= num(&i, "used_memory"));
    assert!(num(&i, "uptime_in_seconds") < 60.0);
    assert!(num(&i, "used_cpu_user") >= 0.0);
    assert!(num(&i, "total_connections_received") >= 1.0);
    assert!(i["used_memory_human"].ends_with('M') || i["used_memory_human"].ends_with('K'));

    // Counters move with traffic.
    let before = info(&mut c, None);
    c.ok(&["SET", "k1", "v"]);
    c.ok(&["SET", "k2", "v"]);
    c.cmd(&["SET", "k3", "v", "EX", "100"]);
    for _ in 0..3 {
        assert_eq!(c.cmd(&["GET", "k1"]), Frame::bulk("v"));
    }
    assert!(c.cmd(&["GET", "missing"]).is_null());
    let after = info(&mut c, None);
    assert_eq!(num(&after, "keyspace_hits") - num(&before, "keyspace_hits"), 3.0);
    assert_eq!(num(&after, "keyspace_misses") - num(&before, "keyspace_misses"), 1.0);
    assert!(num(&after, "total_commands_processed") >= num(&before, "total_commands_processed") + 7.0);
    assert!(num(&after, "total_net_input_bytes") > num(&before, "total_net_input_bytes"));

    // Keyspace agrees with DBSIZE, in every database.
    c.ok(&["SELECT", "2"]);
    c.ok(&["SET", "x", "1"]);
    let dbsize2 = c.cmd(&["DBSIZE"]).as_int().unwrap();
    c.ok(&["SELECT", "0"]);
    let dbsize0 = c.cmd(&["DBSIZE"]).as_int().unwrap();
    assert_eq!(dbsize0, 3);
    let ks = info(&mut c, Some("keyspace"));
    let db0 = &ks["db0"];
    assert!(db0.starts_with(&format!("keys={dbsize0},expires=1,avg_ttl=")), "{db0}");
    let avg_ttl: u64 = db0.rsplit('=').next().unwrap().parse().unwrap();
    assert!(avg_ttl > 90_000 && avg_ttl <= 100_000, "avg_ttl {avg_ttl}");
    assert_eq!(ks["db2"], format!("keys={dbsize2},expires=0,avg_ttl=0"));
    assert!(!ks.contains_key("db1"));

    // Command statistics, and CONFIG RESETSTAT.
    let stats = info(&mut c, Some("commandstats"));
    let get = &stats["cmdstat_get"];
    assert!(get.starts_with("calls=4,usec="), "{get}");
    assert!(get.contains(",usec_per_call=") && get.ends_with(",rejected_calls=0,failed_calls=0"), "{get}");
    assert!(info(&mut c, Some("all")).contains_key("cmdstat_get"));
    c.ok(&["CONFIG", "RESETSTAT"]);
    let stats = info(&mut c, Some("commandstats"));
    assert!(!stats.contains_key("cmdstat_get"), "{stats:?}");
    let i = info(&mut c, None);
    assert_eq!(num(&i, "keyspace_hits"), 0.0);
    assert!(num(&i, "total_commands_processed") <= 3.0);

    // Everything is there with "everything", in Redis's section order.
    let all = text_of(&c.cmd(&["INFO", "everything"]));
    let order = ["# Server", "# Clients", "# Memory", "# Stats", "# CPU", "# Commandstats", "# Keyspace"];
    let positions: Vec<usize> = order.iter().map(|h| all.find(h).unwrap_or_else(|| panic!("{h}"))).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
}

#[test]
fn config_set_maxmemory_evicts() {
    let server = Server::strata();
    let mut c = server.conn();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let empty = num(&info(&mut c, Some("memory")), "used_memory") as u64;
    let value = "x".repeat(1000);
    let cmds: Vec<Vec<String>> = (0..3000).map(|i| vec!["SET".into(), format!("key:{i}"), value.clone()]).collect();
    for chunk in cmds.chunks(500) {
        let refs: Vec<Vec<&str>> = chunk.iter().map(|c| c.iter().map(String::as_str).collect()).collect();
        let slices: Vec<&[&str]> = refs.iter().map(Vec::as_slice).collect();
        for reply in c.pipeline(&slices) {
            assert_eq!(reply, Frame::ok());
        }
    }
    assert_eq!(c.cmd(&["DBSIZE"]), Frame::int(3000));
    let used = num(&info(&mut c, Some("memory")), "used_memory") as u64;
    assert!(used > 3_000_000, "used_memory {used}");

    // noeviction: lowering the limit refuses writes instead of evicting.
    let limit = empty + (used - empty) / 2;
    c.ok(&["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    assert_eq!(c.cmd(&["DBSIZE"]), Frame::int(3000));
    let e = c.cmd(&["SET", "one-more", "v"]);
    assert_eq!(err_of(&e), "OOM command not allowed when used memory > 'maxmemory'.");

    // With an eviction policy the limit is enforced at once.
    c.ok(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    let mem = info(&mut c, Some("memory"));
    assert!(num(&mem, "used_memory") as u64 <= limit, "used {} > limit {limit}", mem["used_memory"]);
    assert_eq!(mem["maxmemory"], limit.to_string());
    assert_eq!(mem["maxmemory_policy"], "allkeys-lru");
    let left = c.cmd(&["DBSIZE"]).as_int().unwrap();
    // About half stays; how many exactly moves with what else the process
    // holds at that moment (a loaded CI machine left 466), so only "not
    // everything, not nothing" is asserted here.
    assert!(left < 3000 && left > 100, "{left} keys left");
    let evicted = num(&info(&mut c, Some("stats")), "evicted_keys") as i64;
    assert_eq!(evicted, 3000 - left);
    c.ok(&["SET", "one-more", "v"]);

    // An invalid policy is refused and lists the choices, Strata's included.
    let e = c.cmd(&["CONFIG", "SET", "maxmemory-policy", "bogus"]);
    assert_eq!(
        err_of(&e),
        "ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the \
         following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, \
         allkeys-random, noeviction, sieve"
    );
    c.ok(&["CONFIG", "SET", "maxmemory-policy", "SIEVE"]);
    assert_eq!(c.cmd(&["CONFIG", "GET", "maxmemory-policy"]), Frame::bulks(&["maxmemory-policy", "sieve"]));
    // Strata's immutable parameters.
    let e = c.cmd(&["CONFIG", "SET", "port", "1"]);
    assert_eq!(err_of(&e), "ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config");
    // ... which may be written back unchanged (what CONFIG GET * showed).
    let threads = c.cmd(&["CONFIG", "GET", "threads"]);
    let threads = threads.as_array().unwrap()[1].as_str().unwrap().to_string();
    c.ok(&["CONFIG", "SET", "threads", &threads, "maxmemory", "0"]);
    let e = c.cmd(&["CONFIG", "SET", "threads", "7"]);
    assert_eq!(
        err_of(&e),
        "ERR CONFIG SET failed (possibly related to argument 'threads') - can't set immutable config"
    );
}

/// A temporary directory for config files, removed on drop.
struct TmpDir(PathBuf);

impl TmpDir {
    fn new(tag: &str) -> TmpDir {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        let p = std::env::temp_dir().join(format!("strata-{tag}-{}-{nanos:x}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TmpDir(p)
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn config_rewrite_round_trip() {
    let dir = TmpDir::new("rewrite");
    let conf = dir.0.join("node.conf");
    std::fs::write(&conf, "# my node\nmaxmemory 10mb\ntimeout 5\n# a note\nmaxmemory 20mb\n").unwrap();
    let conf_arg = conf.to_str().unwrap();
    {
        let server = Server::strata_with(&["--config", conf_arg]);
        let mut c = server.conn();
        assert_eq!(c.cmd(&["CONFIG", "GET", "maxmemory"]), Frame::bulks(&["maxmemory", "10485760"]));
        assert_eq!(
            info(&mut c, Some("server"))["config_file"],
            std::fs::canonicalize(&conf).unwrap().display().to_string()
        );
        c.ok(&["CONFIG", "SET", "maxmemory", "64mb", "maxmemory-policy", "allkeys-lfu", "timeout", "30"]);
        c.ok(&["CONFIG", "SET", "requirepass", "pass word"]);
        c.ok(&["CONFIG", "REWRITE"]);
    }
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.starts_with("# my node\nmaxmemory 64mb\ntimeout 30\n# a note\n"), "{text}");
    assert_eq!(text.matches("maxmemory ").count(), 1, "{text}");
    assert!(text.contains("# Generated by CONFIG REWRITE\n"), "{text}");
    assert!(text.contains("\nmaxmemory-policy allkeys-lfu\n"), "{text}");
    assert!(text.contains("\nrequirepass \"pass word\"\n"), "{text}");

    // A new node started from the rewritten file has the new settings.
    let server = Server::strata_with(&["--config", conf_arg]);
    let mut c = server.conn();
    assert_eq!(c.cmd(&["PING"]).error_code(), Some("NOAUTH"));
    c.ok(&["AUTH", "pass word"]);
    let got = c.cmd(&["CONFIG", "GET", "maxmemory", "maxmemory-policy", "timeout"]);
    assert_eq!(
        got.sorted_pairs(),
        Frame::bulks(&["maxmemory", "67108864", "maxmemory-policy", "allkeys-lfu", "timeout", "30"]).sorted_pairs()
    );

    // Without a config file there is nothing to rewrite.
    let plain = Server::strata();
    let e = plain.conn().cmd(&["CONFIG", "REWRITE"]);
    assert_eq!(err_of(&e), "ERR The server is running without a config file");
}

#[test]
fn shutdown_exits_cleanly() {
    let port = free_port();
    let mut child = Command::new(STRATA_BIN)
        .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--threads", "2", "--metrics-port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn strata-node");
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut conn = None;
    assert!(wait_for(START_TIMEOUT, || {
        conn = RawConn::connect(addr).ok();
        conn.is_some()
    }));
    let mut c = conn.unwrap();
    let mut bystander = RawConn::connect(addr).unwrap();
    assert_eq!(bystander.cmd(&["PING"]), Frame::simple("PONG"));

    // Refusals first: inside MULTI, SAVE without persistence, bad options.
    c.ok(&["MULTI"]);
    assert_eq!(err_of(&c.cmd(&["SHUTDOWN"])), "ERR Command not allowed inside a transaction");
    c.cmd(&["DISCARD"]);
    assert_eq!(err_of(&c.cmd(&["SHUTDOWN", "SAVE"])), "ERR Errors trying to SHUTDOWN. Check logs.");
    assert_eq!(err_of(&c.cmd(&["SHUTDOWN", "NOSAVE", "SAVE"])), "ERR syntax error");
    assert_eq!(c.cmd(&["PING"]), Frame::simple("PONG"));

    // SHUTDOWN: no reply, the connection closes and the process exits 0.
    c.send(&["SHUTDOWN", "NOSAVE"]);
    assert!(c.is_closed(), "SHUTDOWN must close the connection without a reply");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("strata-node did not exit after SHUTDOWN");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit status {status}");
    bystander.set_timeout(Some(Duration::from_secs(2)));
    assert!(bystander.is_closed());
}

#[test]
fn quit_reset_and_reply_modes() {
    let server = Server::strata();
    let mut c = server.conn();
    // QUIT answers, then closes; nothing after it runs.
    c.send_raw(&[encode_command(&["QUIT"]), encode_command(&["SET", "after-quit", "1"])].concat());
    assert_eq!(c.read_frame(), Frame::ok());
    assert!(c.is_closed());
    let mut c = server.conn();
    assert!(c.cmd(&["GET", "after-quit"]).is_null());

    // RESET leaves MULTI, the database, the name and RESP3.
    c.ok(&["SELECT", "4"]);
    c.ok(&["CLIENT", "SETNAME", "r"]);
    c.hello3();
    c.ok(&["MULTI"]);
    assert_eq!(c.cmd(&["RESET"]), Frame::simple("RESET"));
    assert_eq!(err_of(&c.cmd(&["EXEC"])), "ERR EXEC without MULTI");
    assert!(matches!(c.cmd(&["CLIENT", "GETNAME"]), Frame::Nil), "RESP2 null after RESET");
    let me = client_fields(text_of(&c.cmd(&["CLIENT", "INFO"])).trim_end());
    assert_eq!((me["db"].as_str(), me["resp"].as_str(), me["name"].as_str()), ("0", "2", ""));

    // CLIENT REPLY OFF silences replies until ON.
    c.send(&["CLIENT", "REPLY", "OFF"]);
    c.send(&["SET", "silent", "1"]);
    c.send(&["PING"]);
    c.send(&["CLIENT", "REPLY", "ON"]);
    assert_eq!(c.read_frame(), Frame::ok());
    assert_eq!(c.cmd(&["GET", "silent"]), Frame::bulk("1"));
}

#[test]
fn client_reply_skip_skips_the_next_reply() {
    let server = Server::strata();
    let mut c = server.conn();
    c.send(&["CLIENT", "REPLY", "SKIP"]);
    c.send(&["SET", "skipped", "1"]);
    c.send(&["ECHO", "visible"]);
    assert_eq!(c.read_frame(), Frame::bulk("visible"));
}

#[test]
fn swapdb_wakes_blocked_clients_and_debug_sleep_blocks() {
    let server = Server::strata();
    let mut waiter = server.conn();
    let mut c = server.conn();
    waiter.send(&["BLPOP", "jobs", "5"]);
    assert!(wait_for(Duration::from_secs(5), || num(&info(&mut c, Some("clients")), "blocked_clients") == 1.0));
    c.ok(&["SELECT", "1"]);
    assert_eq!(c.cmd(&["RPUSH", "jobs", "j1"]), Frame::int(1));
    c.ok(&["SWAPDB", "0", "1"]);
    assert_eq!(waiter.read_frame(), Frame::bulks(&["jobs", "j1"]));
    assert_eq!(c.cmd(&["DBSIZE"]), Frame::int(0));

    let start = Instant::now();
    c.ok(&["DEBUG", "SLEEP", "0.2"]);
    assert!(start.elapsed() >= Duration::from_millis(200));
    let text = text_of(&c.cmd(&["DEBUG", "HELP"]).as_array().unwrap()[0]);
    assert!(text.starts_with("DEBUG <subcommand>"));
}

#[test]
fn memory_and_command_introspection() {
    let server = Server::strata();
    let mut c = server.conn();
    c.ok(&["SET", "small", "x"]);
    c.ok(&["SET", "big", &"y".repeat(10_000)]);
    let small = c.cmd(&["MEMORY", "USAGE", "small"]).as_int().unwrap();
    let big = c.cmd(&["MEMORY", "USAGE", "big"]).as_int().unwrap();
    assert!(big > small + 9_900, "{small} {big}");
    let stats = c.cmd(&["MEMORY", "STATS"]);
    let v = stats.as_array().unwrap();
    let field = |name: &str| v.chunks(2).find(|p| p[0].as_str() == Some(name)).map(|p| p[1].clone());
    assert_eq!(field("keys.count"), Some(Frame::int(2)));
    assert!(field("db.0").is_some());
    assert!(field("dataset.bytes").and_then(|f| f.as_int()).unwrap() >= big);

    // COMMAND COUNT is this node's own table, which COMMAND and LIST agree with.
    let count = c.cmd(&["COMMAND", "COUNT"]).as_int().unwrap();
    assert!(count > 20);
    assert_eq!(c.cmd(&["COMMAND"]).as_array().unwrap().len() as i64, count);
    let names = c.cmd(&["COMMAND", "LIST"]);
    let names: Vec<&str> = names.as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    for name in ["ping", "config", "config|set", "client|kill", "memory|usage", "info", "shutdown", "eval", "function"]
    {
        assert!(names.contains(&name), "COMMAND LIST lacks {name}");
    }
    for name in ["save", "bgsave"] {
        assert!(!names.contains(&name), "{name} must not be registered");
    }
    let docs = c.cmd(&["COMMAND", "DOCS", "client"]);
    let doc = docs.as_array().unwrap()[1].as_array().unwrap();
    let subs = doc.chunks(2).find(|p| p[0].as_str() == Some("subcommands")).map(|p| p[1].clone()).unwrap();
    assert!(subs.as_array().unwrap().iter().any(|f| f.as_str() == Some("client|kill")));
}

#[test]
fn server_commands_inside_exec() {
    // Inside EXEC the transaction holds the partition locks: whole-keyspace
    // and eviction-triggering commands must not deadlock or misbehave.
    let server = Server::strata();
    let mut c = server.conn();
    c.ok(&["MULTI"]);
    for cmd in [
        &["SET", "a", "1"][..],
        &["MEMORY", "USAGE", "a"],
        &["MEMORY", "STATS"],
        &["DBSIZE"],
        &["CONFIG", "SET", "maxmemory", "100mb"],
        &["DEBUG", "OBJECT", "a"],
        &["INFO", "keyspace"],
        &["SWAPDB", "0", "1"],
        &["DBSIZE"],
        &["FLUSHALL"],
    ] {
        assert_eq!(c.cmd(cmd), Frame::simple("QUEUED"));
    }
    let replies = c.cmd(&["EXEC"]);
    let r = replies.as_array().unwrap_or_else(|| panic!("EXEC: {replies}"));
    assert_eq!(r.len(), 10);
    assert_eq!(r[0], Frame::ok());
    assert!(r[1].as_int().unwrap() > 0);
    assert_eq!(r[2].kind(), "array");
    assert_eq!(r[3], Frame::int(1));
    assert_eq!(r[4], Frame::ok());
    assert!(r[5].as_str().unwrap().contains("encoding:int"), "{}", r[5]);
    assert!(r[6].as_str().unwrap().contains("db0:keys=1,"), "{}", r[6]);
    assert_eq!(r[7], Frame::ok());
    assert_eq!(r[8], Frame::int(0));
    assert_eq!(r[9], Frame::ok());
    assert_eq!(c.cmd(&["CONFIG", "GET", "maxmemory"]), Frame::bulks(&["maxmemory", "104857600"]));
    assert_eq!(c.cmd(&["DBSIZE"]), Frame::int(0));

    // Only some partitions locked: MEMORY STATS and a limit that calls for
    // eviction (which waits for the next command outside the transaction).
    c.ok(&["SET", "keep", "1"]);
    c.ok(&["MULTI"]);
    c.cmd(&["SET", "b", "1"]);
    c.cmd(&["MEMORY", "STATS"]);
    c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru", "maxmemory", "1"]);
    let replies = c.cmd(&["EXEC"]);
    let r = replies.as_array().unwrap_or_else(|| panic!("EXEC: {replies}"));
    assert_eq!((r[0].clone(), r[1].kind(), r[2].clone()), (Frame::ok(), "array", Frame::ok()));
    assert_eq!(r.len(), 3, "no eviction inside EXEC");
    // As Redis, the next command, even a read, evicts first.
    assert_eq!(c.cmd(&["DBSIZE"]), Frame::int(0), "the next command evicted everything it could");
    assert_eq!(c.cmd(&["SET", "c", "1"]).error_code(), Some("OOM"));
    c.ok(&["CONFIG", "SET", "maxmemory", "0", "maxmemory-policy", "noeviction"]);
}

#[test]
fn config_set_loglevel_changes_what_the_running_node_logs() {
    let server = Server::strata_with(&["--loglevel", "notice"]);
    let mut c = server.conn();
    // A protocol error is logged at debug level only.
    let provoke = || {
        let mut g = server.conn();
        g.send_raw(b"*1\r\n$x\r\n");
        assert!(g.read_frame().is_error());
    };
    provoke();
    assert_eq!(c.cmd(&["PING"]), Frame::simple("PONG"));
    assert!(!server.logs().contains("protocol error"), "debug line logged at notice");
    assert_eq!(c.cmd(&["CONFIG", "SET", "loglevel", "debug"]), Frame::ok());
    provoke();
    assert!(
        wait_for(Duration::from_secs(5), || server.logs().contains("protocol error")),
        "CONFIG SET loglevel debug did not reach the logger:\n{}",
        server.logs()
    );
}

#[test]
fn cluster_keyslot_answers_as_a_cluster_node_does() {
    let server = Server::strata();
    let mut c = server.conn();
    // Slots a Redis Cluster node reports for the same keys.
    assert_eq!(c.cmd(&["CLUSTER", "KEYSLOT", "foo"]), Frame::int(12182));
    assert_eq!(c.cmd(&["CLUSTER", "KEYSLOT", "somekey"]), Frame::int(11058));
    assert_eq!(c.cmd(&["CLUSTER", "KEYSLOT", "{user1000}.following"]), c.cmd(&["CLUSTER", "KEYSLOT", "user1000"]));
    // An empty first tag: the whole key decides, not "bar".
    assert_ne!(c.cmd(&["CLUSTER", "KEYSLOT", "foo{}{bar}"]), c.cmd(&["CLUSTER", "KEYSLOT", "bar"]));
    assert_eq!(c.cmd(&["CLUSTER", "KEYSLOT", "bar"]), Frame::int(5061));
    assert_eq!(
        c.cmd(&["CLUSTER", "KEYSLOT"]),
        Frame::error("ERR wrong number of arguments for 'cluster|keyslot' command")
    );
    // Not a cluster member: the rest is Redis's reply without cluster support.
    assert_eq!(c.cmd(&["CLUSTER", "INFO"]), Frame::error("ERR This instance has cluster support disabled"));
}
