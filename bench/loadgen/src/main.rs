//! strata-loadgen: memtier_benchmark's workload shape, for comparing
//! strata-node with redis-server (and Strata's durability modes and tiers)
//! under the same load. Threads each run an event loop of clients; each
//! client sends pipelines of SET/GET in a set:get ratio over keys drawn
//! sequentially, uniformly or by Zipf, optionally rate-limited, and
//! records every request's latency (from its pipeline's send to its
//! reply). Prints ops/s, hits/misses and p50/p99/p99.9 per command.

mod histogram;
mod keys;

use clap::Parser;
use histogram::Histogram;
use keys::{KeyGen, Pattern, Rng};
use std::io::Write as _;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Parser, Debug, Clone)]
#[command(
    version,
    about = "A memtier_benchmark-style load generator for Redis-protocol servers",
    long_about = "Runs --threads x --clients connections against one server. Each client sends \
                  pipelines of --pipeline requests, SETs and GETs in the --ratio set:get order, \
                  over keys '<prefix><n>' with n drawn from [--key-minimum, --key-maximum] by \
                  --key-pattern, for --requests per client or --test-time seconds, at most \
                  --rate-limit requests/s per client. Prints throughput, GET hits and misses, and \
                  latency percentiles (each request timed from its pipeline's send to its reply).\n\n\
                  Example (Swytch's published shape): strata-loadgen -s 127.0.0.1 -p 6379 -t 4 -c 50 \
                  --ratio 1:10 --key-pattern zipf --zipf-exp 0.99 --key-maximum 100000 -d 256 --test-time 30"
)]
struct Args {
    /// Server host.
    #[arg(short = 's', long, default_value = "127.0.0.1")]
    server: String,
    /// Server port.
    #[arg(short = 'p', long, default_value_t = 6379)]
    port: u16,
    /// Threads, each with its own event loop.
    #[arg(short = 't', long, default_value_t = 4)]
    threads: u64,
    /// Connections per thread.
    #[arg(short = 'c', long, default_value_t = 50)]
    clients: u64,
    /// Requests in flight per connection.
    #[arg(long, default_value_t = 1)]
    pipeline: u64,
    /// SET:GET ratio, e.g. 1:10, 1:0 (writes only), 0:1 (reads only).
    #[arg(long, default_value = "1:10")]
    ratio: String,
    /// sequential (S), uniform (R) or zipf (Z).
    #[arg(long, default_value = "uniform")]
    key_pattern: String,
    /// Zipf exponent (with --key-pattern zipf).
    #[arg(long, default_value_t = 0.99)]
    zipf_exp: f64,
    #[arg(long, default_value_t = 0)]
    key_minimum: u64,
    #[arg(long, default_value_t = 10_000_000)]
    key_maximum: u64,
    #[arg(long, default_value = "memtier-")]
    key_prefix: String,
    /// Value size in bytes.
    #[arg(short = 'd', long, default_value_t = 32)]
    data_size: usize,
    /// Requests per client (ignored with --test-time).
    #[arg(short = 'n', long, default_value_t = 10_000)]
    requests: u64,
    /// Run for this many seconds instead of a request count.
    #[arg(long)]
    test_time: Option<u64>,
    /// Requests per second per client (0: as fast as replies come).
    #[arg(long, default_value_t = 0)]
    rate_limit: u64,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json_out_file: Option<std::path::PathBuf>,
}

#[derive(Default, Clone)]
struct Stats {
    sets: Histogram,
    gets: Histogram,
    hits: u64,
    misses: u64,
    errors: u64,
    bytes_out: u64,
    bytes_in: u64,
}

impl Stats {
    fn merge(&mut self, o: &Stats) {
        self.sets.merge(&o.sets);
        self.gets.merge(&o.gets);
        self.hits += o.hits;
        self.misses += o.misses;
        self.errors += o.errors;
        self.bytes_out += o.bytes_out;
        self.bytes_in += o.bytes_in;
    }
}

fn parse_ratio(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s.split_once(':').ok_or("--ratio takes SET:GET, e.g. 1:10")?;
    let (a, b) = (a.parse::<u64>().map_err(|e| e.to_string())?, b.parse::<u64>().map_err(|e| e.to_string())?);
    if a + b == 0 {
        return Err("--ratio 0:0 sends nothing".into());
    }
    Ok((a, b))
}

fn parse_pattern(s: &str, exp: f64) -> Result<Pattern, String> {
    match s.to_ascii_lowercase().as_str() {
        "sequential" | "s" => Ok(Pattern::Sequential),
        "uniform" | "random" | "r" => Ok(Pattern::Uniform),
        "zipf" | "z" if exp > 0.0 => Ok(Pattern::Zipf(exp)),
        "zipf" | "z" => Err("--zipf-exp must be > 0".into()),
        other => Err(format!("unknown --key-pattern {other}: sequential, uniform or zipf")),
    }
}

fn main() {
    let args = Args::parse();
    let run = || -> Result<(), String> {
        let ratio = parse_ratio(&args.ratio)?;
        let pattern = parse_pattern(&args.key_pattern, args.zipf_exp)?;
        if args.key_maximum < args.key_minimum {
            return Err("--key-maximum is below --key-minimum".into());
        }
        let addr = format!("{}:{}", args.server, args.port);
        std::net::TcpStream::connect(&addr).map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        let started = Instant::now();
        let threads: Vec<_> = (0..args.threads)
            .map(|t| {
                let args = args.clone();
                let addr = addr.clone();
                std::thread::spawn(move || run_thread(&args, &addr, t, ratio, pattern))
            })
            .collect();
        let mut total = Stats::default();
        for t in threads {
            total.merge(&t.join().map_err(|_| "a client thread panicked")??);
        }
        report(&args, &total, started.elapsed());
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("strata-loadgen: {e}");
        std::process::exit(1);
    }
}

fn run_thread(args: &Args, addr: &str, thread: u64, ratio: (u64, u64), pattern: Pattern) -> Result<Stats, String> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    // The thread's clients share its one event loop, as memtier's do.
    tokio::task::LocalSet::new().block_on(&rt, async {
        let deadline = args.test_time.map(|s| Instant::now() + Duration::from_secs(s));
        let clients: Vec<_> = (0..args.clients)
            .map(|c| {
                let id = thread * args.clients + c;
                let (args, addr) = (args.clone(), addr.to_owned());
                tokio::task::spawn_local(async move { run_client(&args, &addr, id, ratio, pattern, deadline).await })
            })
            .collect();
        let mut stats = Stats::default();
        for c in clients {
            stats.merge(&c.await.map_err(|e| e.to_string())??);
        }
        Ok(stats)
    })
}

async fn run_client(
    args: &Args,
    addr: &str,
    id: u64,
    ratio: (u64, u64),
    pattern: Pattern,
    deadline: Option<Instant>,
) -> Result<Stats, String> {
    let mut stream = TcpStream::connect(addr).await.map_err(|e| format!("connect {addr}: {e}"))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let clients = args.threads * args.clients;
    let mut rng = Rng::new(0x5EED ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut keys = KeyGen::new(pattern, args.key_minimum, args.key_maximum, id, clients);
    let value = vec![b'x'; args.data_size];
    let mut stats = Stats::default();
    let (mut out, mut kinds) = (Vec::new(), Vec::new());
    let mut reader = Reader::default();
    let mut op = 0u64;
    let mut sent = 0u64;
    let interval =
        (args.rate_limit > 0).then(|| Duration::from_secs_f64(args.pipeline as f64 / args.rate_limit as f64));
    let mut next_send = tokio::time::Instant::now();
    loop {
        match deadline {
            Some(d) if Instant::now() >= d => break,
            None if sent >= args.requests => break,
            _ => {}
        }
        if let Some(i) = interval {
            tokio::time::sleep_until(next_send).await;
            next_send += i;
        }
        out.clear();
        kinds.clear();
        let batch = if deadline.is_some() { args.pipeline } else { args.pipeline.min(args.requests - sent) };
        for _ in 0..batch {
            let is_set = op % (ratio.0 + ratio.1) < ratio.0;
            op += 1;
            let key = format!("{}{}", args.key_prefix, keys.next(&mut rng));
            if is_set {
                encode(&mut out, &[b"SET", key.as_bytes(), &value]);
            } else {
                encode(&mut out, &[b"GET", key.as_bytes()]);
            }
            kinds.push(is_set);
        }
        let t0 = Instant::now();
        stream.write_all(&out).await.map_err(|e| format!("write: {e}"))?;
        stats.bytes_out += out.len() as u64;
        for &is_set in &kinds {
            let reply = reader.next(&mut stream).await?;
            let ns = t0.elapsed().as_nanos() as u64;
            match reply {
                Reply::Error => stats.errors += 1,
                Reply::Nil => stats.misses += 1,
                Reply::Bulk if !is_set => stats.hits += 1,
                _ => {}
            }
            if is_set { stats.sets.record(ns) } else { stats.gets.record(ns) }
        }
        sent += batch;
    }
    stats.bytes_in = reader.consumed;
    Ok(stats)
}

fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    let _ = write!(out, "*{}\r\n", args.len());
    for a in args {
        let _ = write!(out, "${}\r\n", a.len());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

#[derive(Debug, PartialEq)]
enum Reply {
    Status,
    Error,
    Integer,
    Bulk,
    Nil,
}

/// Reads one top-level reply at a time (the replies SET and GET get).
#[derive(Default)]
struct Reader {
    buf: Vec<u8>,
    start: usize,
    consumed: u64,
}

impl Reader {
    async fn next(&mut self, stream: &mut TcpStream) -> Result<Reply, String> {
        loop {
            if let Some((reply, len)) = parse(&self.buf[self.start..])? {
                self.start += len;
                self.consumed += len as u64;
                if self.start == self.buf.len() {
                    (self.start, self.buf) = (0, std::mem::take(&mut self.buf));
                    self.buf.clear();
                }
                return Ok(reply);
            }
            if self.start > 0 {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            let mut chunk = [0u8; 64 * 1024];
            let n = stream.read(&mut chunk).await.map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("the server closed the connection".into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// One reply at the start of `b`, and its length; None if incomplete.
fn parse(b: &[u8]) -> Result<Option<(Reply, usize)>, String> {
    let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else { return Ok(None) };
    let line = &b[1..eol];
    let reply = match b[0] {
        b'+' => Reply::Status,
        b'-' => Reply::Error,
        b':' => Reply::Integer,
        b'$' => {
            let n: i64 = std::str::from_utf8(line).ok().and_then(|s| s.parse().ok()).ok_or("bad bulk length")?;
            if n < 0 {
                return Ok(Some((Reply::Nil, eol + 2)));
            }
            let end = eol + 2 + n as usize + 2;
            return Ok((b.len() >= end).then_some((Reply::Bulk, end)));
        }
        b'_' => Reply::Nil,
        other => return Err(format!("unexpected reply type {:?}", other as char)),
    };
    Ok(Some((reply, eol + 2)))
}

fn report(args: &Args, s: &Stats, elapsed: Duration) {
    let secs = elapsed.as_secs_f64();
    let ms = |ns: u64| ns as f64 / 1e6;
    println!(
        "strata-loadgen {}:{}  {} threads x {} clients, pipeline {}, ratio {}, {} keys [{}, {}], {} B values, {:.1} s",
        args.server,
        args.port,
        args.threads,
        args.clients,
        args.pipeline,
        args.ratio,
        args.key_pattern,
        args.key_minimum,
        args.key_maximum,
        args.data_size,
        secs
    );
    println!(
        "{:<7}{:>12}{:>12}{:>12}{:>10}{:>10}{:>11}",
        "Type", "Ops/sec", "Hits/sec", "Misses/sec", "p50 ms", "p99 ms", "p99.9 ms"
    );
    let mut all = s.sets.clone();
    all.merge(&s.gets);
    let rows = [
        ("Sets", &s.sets, None),
        ("Gets", &s.gets, Some((s.hits, s.misses))),
        ("Totals", &all, Some((s.hits, s.misses))),
    ];
    for (name, h, hm) in rows {
        let (hits, misses) = hm.map_or((String::from("-"), String::from("-")), |(h, m)| {
            (format!("{:.0}", h as f64 / secs), format!("{:.0}", m as f64 / secs))
        });
        println!(
            "{:<7}{:>12.0}{:>12}{:>12}{:>10.3}{:>10.3}{:>11.3}",
            name,
            h.count() as f64 / secs,
            hits,
            misses,
            ms(h.quantile(0.5)),
            ms(h.quantile(0.99)),
            ms(h.quantile(0.999))
        );
    }
    if s.errors > 0 {
        println!("errors: {}", s.errors);
    }
    if let Some(path) = &args.json_out_file {
        let row = |h: &Histogram| {
            format!(
                "{{\"ops_per_sec\":{:.1},\"p50_ms\":{:.4},\"p99_ms\":{:.4},\"p999_ms\":{:.4}}}",
                h.count() as f64 / secs,
                ms(h.quantile(0.5)),
                ms(h.quantile(0.99)),
                ms(h.quantile(0.999))
            )
        };
        let json = format!(
            "{{\"seconds\":{secs:.3},\"sets\":{},\"gets\":{},\"totals\":{},\"hits\":{},\"misses\":{},\"errors\":{}}}\n",
            row(&s.sets),
            row(&s.gets),
            row(&all),
            s.hits,
            s.misses,
            s.errors
        );
        if let Err(e) = std::fs::write(path, json) {
            eprintln!("strata-loadgen: cannot write {}: {e}", path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse_whole_or_not_at_all() {
        assert_eq!(parse(b"+OK\r\n").unwrap(), Some((Reply::Status, 5)));
        assert_eq!(parse(b"$-1\r\n").unwrap(), Some((Reply::Nil, 5)));
        assert_eq!(parse(b"$3\r\nabc\r\n+OK").unwrap(), Some((Reply::Bulk, 9)));
        assert_eq!(parse(b"$3\r\nab").unwrap(), None);
        assert_eq!(parse(b"-ERR x\r\n").unwrap(), Some((Reply::Error, 8)));
        assert!(parse(b"*1\r\n").is_err());
    }

    #[test]
    fn ratios_and_patterns_parse() {
        assert_eq!(parse_ratio("1:10"), Ok((1, 10)));
        assert!(parse_ratio("0:0").is_err());
        assert_eq!(parse_pattern("Z", 0.99), Ok(Pattern::Zipf(0.99)));
        assert!(parse_pattern("zipf", 0.0).is_err());
    }
}
