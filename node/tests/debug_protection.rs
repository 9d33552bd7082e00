//! `enable-debug-command`: DEBUG is refused unless the setting allows the
//! client, with Redis's words, side by side with redis-server.

mod support;

use std::net::{IpAddr, UdpSocket};
use support::*;

/// The refusal redis-server 7.0.15 sends (checked against it below too).
const REFUSED: &str = "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you \
                       can run it from a local connection, otherwise you need to set this option in the \
                       configuration file, and then restart the server.";

#[test]
fn debug_is_refused_by_default_as_in_redis() {
    let strata = Server::strata_with(&["--enable-debug-command", "no"]);
    let mut d = Diff::with_servers(strata, Server::redis());
    for args in [&["DEBUG", "HELP"][..], &["DEBUG", "SLEEP", "0"], &["debug", "object", "k"], &["DEBUG", "nonsense"]] {
        let reply = d.err(args);
        assert_eq!(reply.error_message(), Some(REFUSED), "{args:?}");
    }
    // Arity comes first, as in Redis.
    d.err(&["DEBUG"]);
    // Inside MULTI the refusal dooms the transaction.
    d.exact(&["MULTI"]);
    d.err(&["DEBUG", "HELP"]);
    d.exact(&["SET", "k", "v"]);
    d.err(&["EXEC"]);
    d.exact(&["GET", "k"]);
    // The setting reads as Redis's and cannot change at run time.
    d.exact(&["CONFIG", "GET", "enable-debug-command"]);
    d.err(&["CONFIG", "SET", "enable-debug-command", "yes"]);
    // The flag protecting DEBUG is not one COMMAND INFO shows.
    d.exact(&["COMMAND", "INFO", "debug"]);
    d.finish();
}

#[test]
fn a_refusal_counts_as_a_rejected_call() {
    let server = Server::strata_with(&["--enable-debug-command", "no"]);
    let mut c = server.conn();
    assert_eq!(c.cmd(&["DEBUG", "ACTIVE-THREADS", "1"]).error_message(), Some(REFUSED));
    let stats = c.cmd(&["INFO", "commandstats"]);
    let stats = String::from_utf8_lossy(stats.as_bytes().unwrap());
    let line = stats.lines().find(|l| l.starts_with("cmdstat_debug:")).unwrap_or_else(|| panic!("{stats}"));
    assert!(line.contains("calls=0,") && line.contains("rejected_calls=1"), "{line}");
}

#[test]
fn debug_runs_with_yes() {
    let server = Server::strata_with(&["--enable-debug-command", "yes"]);
    let mut c = server.conn();
    assert_eq!(c.cmd(&["CONFIG", "GET", "enable-debug-command"]), Frame::bulks(&["enable-debug-command", "yes"]));
    assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0"]), Frame::ok());
    assert_eq!(c.cmd(&["SET", "k", "v"]), Frame::ok());
    assert!(c.cmd(&["DEBUG", "OBJECT", "k"]).as_str().is_some_and(|s| s.contains("encoding:")));
}

#[test]
fn bad_values_are_refused_at_start_up() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_strata-node"))
        .args(["--enable-debug-command", "maybe", "--port", "0", "--metrics-port", "0"])
        .output()
        .expect("running strata-node");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no, yes, local"), "{err}");
}

/// An address of this machine other than loopback, if it has one.
fn non_loopback_ip() -> Option<IpAddr> {
    // Connecting a UDP socket sends nothing; it only picks a source address.
    let s = UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[test]
fn local_allows_loopback_and_unix_socket_clients_only() {
    let local = ["--enable-debug-command", "local", "--bind", "0.0.0.0", "--unixsocket", "{dir}/s.sock"];
    let strata = Server::strata_with(&local);
    // Redis's protected mode would turn a remote client away before DEBUG.
    let redis = Server::redis_with(&[&local[..], &["--protected-mode", "no"]].concat());
    for server in [&strata, &redis] {
        let name = server.name();
        let mut tcp = RawConn::connect(("127.0.0.1", server.port())).unwrap();
        assert_eq!(tcp.cmd(&["DEBUG", "SLEEP", "0"]), Frame::ok(), "{name}: loopback refused");
        let mut unix = server.conn_unix();
        assert_eq!(unix.cmd(&["DEBUG", "SLEEP", "0"]), Frame::ok(), "{name}: Unix socket refused");
        assert_eq!(
            unix.cmd(&["CONFIG", "GET", "enable-debug-command"]),
            Frame::bulks(&["enable-debug-command", "local"]),
            "{name}"
        );
        match non_loopback_ip() {
            Some(ip) => {
                let mut remote = RawConn::connect((ip, server.port())).unwrap();
                assert_eq!(remote.cmd(&["DEBUG", "SLEEP", "0"]).error_message(), Some(REFUSED), "{name} from {ip}");
            }
            None => eprintln!("no non-loopback address: the refusal of remote clients is not checked"),
        }
    }
}
