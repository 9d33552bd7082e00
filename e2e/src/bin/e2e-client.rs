//! Writes `--keys` keys through one connection, reads them back and checks every value: the
//! in-cluster half of the e2e tests (run as a Job; its exit code and last line are the result).
//!
//!     e2e-client --host demo.ns.svc --port 6379 --keys 10000 --prefix job

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut host = "127.0.0.1".to_owned();
    let mut port = 6379u16;
    let mut keys = 10_000usize;
    let mut prefix = "e2e".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_default();
        match flag.as_str() {
            "--host" => host = value,
            "--port" => port = value.parse().unwrap_or(port),
            "--keys" => keys = value.parse().unwrap_or(keys),
            "--prefix" => prefix = value,
            _ => {
                eprintln!("usage: e2e-client [--host H] [--port P] [--keys N] [--prefix P]");
                return ExitCode::from(2);
            }
        }
    }
    match strata_e2e::client::write_and_verify(&host, port, keys, &prefix) {
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
