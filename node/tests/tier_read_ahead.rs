//! Read-ahead of a pipeline's cold reads: when a request waits for the
//! disk, the reads of the requests behind it start too, and the device
//! serves them together. Replies still come in order, and each command sees
//! every write before it in the pipeline — a write further along is never
//! overtaken by an earlier read's promotion. With each I/O engine, against
//! the real binary and a real file system.

mod support;

use std::collections::HashMap;
use support::*;

fn field(conn: &mut RawConn, name: &str) -> u64 {
    info_field(conn, name).unwrap_or_else(|| panic!("INFO has no {name}")).parse().expect("a number")
}

fn value_of(i: usize, len: usize) -> String {
    let seed = format!("v{i}:");
    seed.repeat(len / seed.len() + 1)[..len].to_string()
}

/// A node with a cold tier whose `maxmemory` leaves `room` bytes above what
/// it holds empty, on the given I/O engine.
fn tiered(engine: &str, room: u64) -> Server {
    let server = Server::strata_with(&[
        "--maxmemory-policy",
        "allkeys-lru",
        "--max-disk",
        "256mb",
        "--dir",
        "{dir}",
        "--threads",
        "2",
        "--io-engine",
        engine,
    ]);
    let mut c = server.conn();
    let budget = field(&mut c, "used_memory") + room;
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", &budget.to_string()]), Frame::ok());
    server
}

/// Pipelined SETs of `key(i)` for i in 0..n, every reply checked.
fn fill(c: &mut RawConn, n: usize, key: impl Fn(usize) -> String, value: impl Fn(usize) -> String) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(200) {
        for &i in chunk {
            c.send(&["SET", &key(i), &value(i)]);
        }
        for &i in chunk {
            assert_eq!(c.read_frame(), Frame::ok(), "SET {}", key(i));
        }
    }
}

/// A small deterministic generator (xorshift).
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

fn bulk_or_nil(v: Option<&String>) -> Frame {
    v.map_or(Frame::Nil, Frame::bulk)
}

/// One pipeline of reads and writes of the same cold keys (strings and
/// counters), sent in one write; every reply checked against a model, in
/// order, then every key's final value.
fn mixed_pipeline_replies_in_order(engine: &str) {
    let server = tiered(engine, 4 << 20);
    let mut c = server.conn();
    let (strings, counters, len) = (600, 100, 700);
    let skey = |i: usize| format!("s:{i}");
    let ckey = |i: usize| format!("c:{i}");
    fill(&mut c, strings, skey, |i| value_of(i, len));
    fill(&mut c, counters, ckey, |i| (i * 1000).to_string());
    let mut model: HashMap<String, String> = (0..strings).map(|i| (skey(i), value_of(i, len))).collect();
    model.extend((0..counters).map(|i| (ckey(i), (i * 1000).to_string())));
    // Every value to disk: the pipeline's reads all need the device.
    assert!(matches!(c.cmd(&["DEBUG", "DEMOTE"]), Frame::Integer(_)));
    assert!(field(&mut c, "tier_disk_keys") as usize >= strings + counters - 10);
    let ahead_before = field(&mut c, "tier_read_ahead_reads");

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut sent: Vec<(Vec<String>, Frame)> = Vec::new();
    for n in 0..3000 {
        let s = skey(rng.below(strings));
        let k = ckey(rng.below(counters));
        let (args, expect): (Vec<String>, Frame) = match rng.below(10) {
            0..=3 => (vec!["GET".into(), s.clone()], bulk_or_nil(model.get(&s))),
            4 => {
                let v = format!("new{n}");
                model.insert(s.clone(), v.clone());
                (vec!["SET".into(), s, v], Frame::ok())
            }
            5 => {
                let v = model.entry(s.clone()).or_default();
                v.push_str(&format!("+{n}"));
                let l = v.len() as i64;
                (vec!["APPEND".into(), s, format!("+{n}")], Frame::int(l))
            }
            6 => {
                let gone = model.remove(&s).is_some() as i64;
                (vec!["DEL".into(), s], Frame::int(gone))
            }
            7 => {
                let v: i64 = model.get(&k).map_or(0, |v| v.parse().unwrap()) + 1;
                model.insert(k.clone(), v.to_string());
                (vec!["INCR".into(), k], Frame::int(v))
            }
            8 => {
                let t = skey(rng.below(strings));
                let expect = Frame::Array(vec![bulk_or_nil(model.get(&s)), bulk_or_nil(model.get(&t))]);
                (vec!["MGET".into(), s, t], expect)
            }
            _ => (vec!["STRLEN".into(), s.clone()], Frame::int(model.get(&s).map_or(0, |v| v.len() as i64))),
        };
        sent.push((args, expect));
    }
    let mut bytes = Vec::new();
    for (args, _) in &sent {
        bytes.extend(encode_command(args));
    }
    c.send_raw(&bytes);
    for (i, (args, expect)) in sent.iter().enumerate() {
        let got = c.read_frame();
        assert_eq!(&got, expect, "{engine}: reply {i} of the pipeline, to {args:?}");
    }
    let ahead = field(&mut c, "tier_read_ahead_reads") - ahead_before;
    let peak = field(&mut c, "tier_reads_in_flight_peak");
    assert!(ahead > 100, "{engine}: {ahead} reads started ahead of their requests");
    assert!(peak >= 8, "{engine}: at most {peak} device reads in flight at once");
    // Every key as the model says (read back cold again).
    assert!(matches!(c.cmd(&["DEBUG", "DEMOTE"]), Frame::Integer(_)));
    for (key, expect) in &model {
        assert_eq!(c.cmd(&["GET", key]), Frame::bulk(expect), "{engine}: final value of {key}");
    }
    assert_eq!(field(&mut c, "tier_read_errors"), 0);
}

#[test]
fn a_mixed_pipeline_over_cold_keys_replies_in_order_with_io_uring_or_its_fallback() {
    mixed_pipeline_replies_in_order("auto");
}

#[test]
fn a_mixed_pipeline_over_cold_keys_replies_in_order_with_aio() {
    mixed_pipeline_replies_in_order("aio");
}

#[test]
fn a_mixed_pipeline_over_cold_keys_replies_in_order_with_threads() {
    mixed_pipeline_replies_in_order("threads");
}

/// A SELECT in the pipeline ends look-ahead: the keys after it are another
/// database's, and must not be read (or answered) from the first one.
#[test]
fn look_ahead_stops_at_a_select_and_each_database_answers_for_itself() {
    let server = tiered("auto", 4 << 20);
    let mut c = server.conn();
    fill(&mut c, 300, |i| format!("k{i}"), |i| value_of(i, 600));
    assert_eq!(c.cmd(&["SELECT", "1"]), Frame::ok());
    fill(&mut c, 300, |i| format!("k{i}"), |i| format!("db1:{i}"));
    assert_eq!(c.cmd(&["SELECT", "0"]), Frame::ok());
    assert!(matches!(c.cmd(&["DEBUG", "DEMOTE"]), Frame::Integer(_)));
    let mut bytes = Vec::new();
    for i in 0..100 {
        bytes.extend(encode_command(&["GET", &format!("k{i}")]));
    }
    bytes.extend(encode_command(&["SELECT", "1"]));
    for i in 0..100 {
        bytes.extend(encode_command(&["GET", &format!("k{i}")]));
    }
    c.send_raw(&bytes);
    for i in 0..100 {
        assert_eq!(c.read_frame(), Frame::bulk(value_of(i, 600)), "db 0, k{i}");
    }
    assert_eq!(c.read_frame(), Frame::ok());
    for i in 0..100 {
        assert_eq!(c.read_frame(), Frame::bulk(format!("db1:{i}")), "db 1, k{i}");
    }
}
