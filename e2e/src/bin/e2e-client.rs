//! The in-cluster half of the e2e tests (run as a Job; its exit code and last line are the
//! result). By default it writes `--keys` keys through one connection, reads them back and
//! checks every value; with `--flood N` it writes N distinct keys of `--value-size` bytes as fast
//! as it can instead (the memory tests: far more than the node's budget).
//!
//!     e2e-client --host demo.ns.svc --port 6379 --keys 10000 --prefix job
//!     e2e-client --host demo.ns.svc --port 6379 --flood 6000000 --value-size 24 --pipeline 16 --connections 4
//!
//! With `--read-back N` it GETs the N keys a flood wrote, `--rounds` times, and counts hits,
//! misses and wrong values; with `--ack-log SECONDS` it writes numbered keys for that long through
//! a node that may be killed meanwhile (reconnecting), and prints which writes were acknowledged.
//!
//!     e2e-client --host demo.ns.svc --read-back 400000 --value-size 1024 --pipeline 16 --connections 4 --rounds 2
//!     e2e-client --host demo.ns.svc --ack-log 30 --pipeline 8 --value-size 100 --prefix acked

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut host = "127.0.0.1".to_owned();
    let mut port = 6379u16;
    let mut keys = 10_000usize;
    let mut prefix = None;
    let mut flood = None;
    let mut value_size = 24usize;
    let mut pipeline = 16usize;
    let mut connections = 4usize;
    let mut read_back = None;
    let mut rounds = 1u32;
    let mut ack_log = None;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_default();
        let ok = match flag.as_str() {
            "--host" => {
                host = value;
                true
            }
            "--port" => value.parse().map(|v| port = v).is_ok(),
            "--keys" => value.parse().map(|v| keys = v).is_ok(),
            "--prefix" => {
                prefix = Some(value);
                true
            }
            "--flood" => value.parse().map(|v| flood = Some(v)).is_ok(),
            "--value-size" => value.parse().map(|v| value_size = v).is_ok(),
            "--pipeline" => value.parse().map(|v| pipeline = v).is_ok(),
            "--connections" => value.parse().map(|v| connections = v).is_ok(),
            "--read-back" => value.parse().map(|v| read_back = Some(v)).is_ok(),
            "--rounds" => value.parse().map(|v| rounds = v).is_ok(),
            "--ack-log" => value.parse().map(|v| ack_log = Some(v)).is_ok(),
            _ => false,
        };
        if !ok {
            eprintln!(
                "usage: e2e-client [--host H] [--port P] [--keys N] [--prefix P]\n       \
                 e2e-client [--host H] [--port P] --flood N [--value-size BYTES] [--pipeline P] [--connections C] \
                 [--prefix P]\n       \
                 e2e-client [--host H] [--port P] --read-back N [--value-size BYTES] [--pipeline P] [--connections C] \
                 [--rounds R] [--prefix P]\n       \
                 e2e-client [--host H] [--port P] --ack-log SECONDS [--pipeline P] [--value-size BYTES] [--prefix P]"
            );
            return ExitCode::from(2);
        }
    }
    if let Some(secs) = ack_log {
        let prefix = prefix.unwrap_or_else(|| "acked".to_owned());
        let log = strata_e2e::client::write_with_ack_log(
            &host,
            port,
            std::time::Duration::from_secs(secs),
            pipeline,
            value_size,
            &prefix,
            0,
            0,
        );
        // Never a failure: what was acknowledged is the result, the test judges it.
        println!("ok {}", log.render());
        return ExitCode::SUCCESS;
    }
    if let Some(n) = read_back {
        let prefix = prefix.unwrap_or_else(|| "key".to_owned());
        let result = strata_e2e::client::read_back(&host, port, n, value_size, pipeline, connections, &prefix, rounds);
        return match result {
            Ok(r) => {
                let secs = r.elapsed.as_secs_f64();
                println!(
                    "ok {} GETs in {secs:.1}s ({:.0}/s): {} hits, {} misses, {} wrong{}",
                    r.hits + r.misses + r.wrong,
                    (r.hits + r.misses + r.wrong) as f64 / secs.max(1e-9),
                    r.hits,
                    r.misses,
                    r.wrong,
                    r.first_wrong.map(|e| format!(" (first: {e})")).unwrap_or_default()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                println!("FAILED {e}");
                ExitCode::FAILURE
            }
        };
    }
    let result = match flood {
        Some(n) => {
            let prefix = prefix.unwrap_or_else(|| "key".to_owned());
            strata_e2e::client::flood(&host, port, n, value_size, pipeline, connections, &prefix).map(|r| {
                let secs = r.elapsed.as_secs_f64();
                format!(
                    "{} SETs of {value_size}-byte values in {secs:.1}s ({:.0}/s), {} error replies{}",
                    r.ok + r.errors,
                    (r.ok + r.errors) as f64 / secs.max(1e-9),
                    r.errors,
                    r.first_error.map(|e| format!(" (first: {e})")).unwrap_or_default()
                )
            })
        }
        None => strata_e2e::client::write_and_verify(&host, port, keys, &prefix.unwrap_or_else(|| "e2e".to_owned())),
    };
    match result {
        Ok(report) => {
            println!("ok {report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("FAILED {e}");
            ExitCode::FAILURE
        }
    }
}
