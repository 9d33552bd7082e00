//! MULTI/EXEC/WATCH and pub/sub, differential against redis-server, plus
//! cross-connection behaviour (WATCH invalidation, message delivery).

mod support;

use support::*;

#[test]
fn multi_exec_discard_errors() {
    let mut d = Diff::new();
    d.exact(&["MULTI"]);
    d.exact(&["SET", "a", "1"]);
    d.exact(&["INCR", "a"]);
    d.exact(&["LPUSH", "a", "x"]); // wrong type at EXEC time: an error inside the reply
    d.exact(&["GET", "a"]);
    d.exact(&["EXEC"]);
    d.err(&["EXEC"]);
    d.err(&["DISCARD"]);
    d.exact(&["MULTI"]);
    d.err(&["MULTI"]);
    d.exact(&["SET", "b", "2"]);
    d.exact(&["DISCARD"]);
    d.exact(&["GET", "b"]);
    // Queue-time errors abort the whole transaction.
    d.exact(&["MULTI"]);
    d.exact(&["SET", "c", "3"]);
    d.err(&["NOSUCHCMD", "x"]);
    d.err(&["GET"]);
    d.err(&["EXEC"]);
    d.exact(&["GET", "c"]);
    // WATCH inside MULTI is refused but does not abort.
    d.exact(&["MULTI"]);
    d.err(&["WATCH", "a"]);
    d.exact(&["INCR", "a"]);
    d.exact(&["EXEC"]);
    d.exact(&["MULTI"]);
    d.exact(&["EXEC"]);
    d.finish();
}

#[test]
fn multi_exec_resp3_and_select() {
    let mut d = Diff::new_resp3();
    d.exact(&["MULTI"]);
    d.exact(&["SET", "k", "v"]);
    d.exact(&["SELECT", "3"]);
    d.exact(&["SET", "k", "in3"]);
    d.exact(&["GET", "k"]);
    d.exact(&["DBSIZE"]);
    d.exact(&["EXEC"]);
    d.exact(&["GET", "k"]);
    d.exact(&["SELECT", "0"]);
    d.exact(&["GET", "k"]);
    d.exact(&["FLUSHALL"]);
    d.finish();
}

#[test]
fn watch_aborts_when_another_client_writes() {
    for server in [Server::strata(), Server::redis()] {
        let mut a = server.conn();
        let mut b = server.conn();
        assert_eq!(a.cmd(&["SET", "w", "1"]), Frame::ok());
        assert_eq!(a.cmd(&["WATCH", "w"]), Frame::ok());
        assert_eq!(b.cmd(&["SET", "w", "2"]), Frame::ok());
        assert_eq!(a.cmd(&["MULTI"]), Frame::ok());
        assert_eq!(a.cmd(&["SET", "w", "3"]), Frame::simple("QUEUED"));
        assert_eq!(a.cmd(&["EXEC"]), Frame::NilArray, "{}", server.name());
        assert_eq!(a.cmd(&["GET", "w"]), Frame::bulk("2"));
        // Untouched watch: EXEC runs.
        assert_eq!(a.cmd(&["WATCH", "w", "other"]), Frame::ok());
        assert_eq!(b.cmd(&["SET", "unrelated", "x"]), Frame::ok());
        assert_eq!(a.cmd(&["MULTI"]), Frame::ok());
        a.cmd(&["SET", "w", "4"]);
        assert_eq!(a.cmd(&["EXEC"]), Frame::Array(vec![Frame::ok()]), "{}", server.name());
        // UNWATCH forgets.
        assert_eq!(a.cmd(&["WATCH", "w"]), Frame::ok());
        assert_eq!(a.cmd(&["UNWATCH"]), Frame::ok());
        b.cmd(&["SET", "w", "5"]);
        a.cmd(&["MULTI"]);
        a.cmd(&["GET", "w"]);
        assert_eq!(a.cmd(&["EXEC"]), Frame::Array(vec![Frame::bulk("5")]));
        // Deleting a watched key counts as a modification.
        assert_eq!(a.cmd(&["WATCH", "w"]), Frame::ok());
        b.cmd(&["DEL", "w"]);
        a.cmd(&["MULTI"]);
        a.cmd(&["SET", "w", "6"]);
        assert_eq!(a.cmd(&["EXEC"]), Frame::NilArray);
        // FLUSHALL touches every watched key.
        a.cmd(&["SET", "w", "1"]);
        assert_eq!(a.cmd(&["WATCH", "w"]), Frame::ok());
        b.cmd(&["FLUSHALL"]);
        a.cmd(&["MULTI"]);
        a.cmd(&["SET", "w", "7"]);
        assert_eq!(a.cmd(&["EXEC"]), Frame::NilArray, "{}", server.name());
    }
}

#[test]
fn pubsub_differential_resp2() {
    let mut d = Diff::new();
    d.exact(&["PUBLISH", "nobody", "x"]);
    d.exact(&["SUBSCRIBE", "c1", "c2"]);
    d.compare_next(Mode::Exact);
    d.err(&["GET", "x"]);
    d.exact(&["PING"]);
    d.exact(&["PING", "hi"]);
    d.exact(&["PSUBSCRIBE", "news.*"]);
    d.exact(&["UNSUBSCRIBE", "c1"]);
    d.exact(&["PUNSUBSCRIBE"]);
    d.exact(&["UNSUBSCRIBE"]);
    d.exact(&["UNSUBSCRIBE"]);
    d.exact(&["PUBSUB", "NUMPAT"]);
    d.exact(&["PUBSUB", "NUMSUB", "c1", "zz"]);
    d.exact(&["PUBSUB", "CHANNELS"]);
    d.err(&["PUBSUB", "NOPE"]);
    d.finish();
}

#[test]
fn pubsub_delivers_across_connections_and_protocols() {
    for server in [Server::strata_with(&["--threads", "2"]), Server::redis()] {
        let mut sub2 = server.conn();
        let mut sub3 = server.conn();
        let mut psub = server.conn();
        let mut publisher = server.conn();
        sub3.hello3();
        sub2.send(&["SUBSCRIBE", "news"]);
        assert_eq!(sub2.read_frame(), Frame::Array(vec![Frame::bulk("subscribe"), Frame::bulk("news"), Frame::int(1)]));
        sub3.send(&["SUBSCRIBE", "news"]);
        assert_eq!(sub3.read_frame(), Frame::Push(vec![Frame::bulk("subscribe"), Frame::bulk("news"), Frame::int(1)]));
        psub.send(&["PSUBSCRIBE", "n*"]);
        psub.read_frame();
        assert_eq!(publisher.cmd(&["PUBLISH", "news", "hello"]), Frame::int(3), "{}", server.name());
        assert_eq!(
            sub2.read_frame(),
            Frame::Array(vec![Frame::bulk("message"), Frame::bulk("news"), Frame::bulk("hello")])
        );
        assert_eq!(
            sub3.read_frame(),
            Frame::Push(vec![Frame::bulk("message"), Frame::bulk("news"), Frame::bulk("hello")])
        );
        assert_eq!(
            psub.read_frame(),
            Frame::Array(vec![Frame::bulk("pmessage"), Frame::bulk("n*"), Frame::bulk("news"), Frame::bulk("hello")])
        );
        // RESP3 clients may run normal commands while subscribed.
        assert_eq!(sub3.cmd(&["SET", "k", "v"]), Frame::ok());
        // Disconnected subscribers stop counting.
        drop(sub2);
        assert!(
            wait_for(std::time::Duration::from_secs(5), || publisher.cmd(&["PUBLISH", "news", "x"]) == Frame::int(2))
        );
    }
}
