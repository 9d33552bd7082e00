//! strata-tracesim: hit ratios of Strata's eviction policies on cache traces.
//!
//! Runs the node's own policy code (`strata_node::policy`) over a trace, one
//! table per run (one partition, one database), and prints a Markdown table:
//! per trace and cache size, the hit ratio of each policy, and Bélády's
//! clairvoyant optimum as a reference.
//!
//! Cache sizes are fractions of the trace's footprint: unique objects, or
//! unique bytes with `--by bytes` (default: bytes for oracleGeneral, which
//! has sizes, objects otherwise). Traces carry no usable wall time, so the
//! policy clock advances one second per `--requests-per-sec` requests; LRU
//! scores and LFU decay (one step per idle minute) run on that clock.

use clap::{Parser, ValueEnum};
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;
use strata_node::policy::PolicyKind;
use strata_node::policy::sim::{By, Capacity, SimOptions, belady, next_uses, simulate_with};
use strata_node::policy::trace::{Format, Request, footprint};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ByArg {
    Objects,
    Bytes,
}

#[derive(Parser, Debug)]
#[command(name = "strata-tracesim", about = "Hit ratios of Strata's eviction policies on cache traces")]
struct Args {
    /// `all` (allkeys-lru, allkeys-lfu, allkeys-random, sieve) or a comma-separated list of
    /// maxmemory-policy names.
    #[arg(long, default_value = "all")]
    policy: String,
    /// Cache sizes as fractions of the trace's unique objects (or bytes).
    #[arg(long, default_value = "0.001,0.01,0.1", value_delimiter = ',')]
    sizes: Vec<f64>,
    /// maxmemory-samples for the sampled policies.
    #[arg(long, default_value_t = 5)]
    samples: usize,
    /// What the capacity counts (default: bytes for oracleGeneral, objects otherwise).
    #[arg(long, value_enum)]
    by: Option<ByArg>,
    /// Requests per second of the policy clock.
    #[arg(long, default_value_t = 1000)]
    requests_per_sec: u64,
    /// Use only the first N requests of each trace.
    #[arg(long)]
    max_requests: Option<usize>,
    /// Skip the Bélády (OPT) column.
    #[arg(long)]
    no_opt: bool,
    /// Seed for sampling and LFU counter increments.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Trace files: *.oracleGeneral.bin, *.lis, *.lis.zst, or text (one key per line).
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// The policies worth comparing on traces without TTLs.
const DEFAULT_POLICIES: &[PolicyKind] =
    &[PolicyKind::AllKeysLru, PolicyKind::AllKeysLfu, PolicyKind::AllKeysRandom, PolicyKind::Sieve];

fn parse_policies(arg: &str) -> Result<Vec<PolicyKind>, String> {
    if arg.eq_ignore_ascii_case("all") {
        return Ok(DEFAULT_POLICIES.to_vec());
    }
    arg.split(',')
        .map(|name| PolicyKind::parse(name.trim()).ok_or_else(|| format!("unknown policy '{name}'")))
        .collect()
}

fn load(path: &Path) -> io::Result<(Format, Vec<Request>)> {
    let (format, zstd) = Format::of_path(path);
    let file = BufReader::with_capacity(1 << 20, File::open(path)?);
    let reader: Box<dyn Read> = if zstd {
        let decoder = ruzstd::decoding::StreamingDecoder::new(file)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("zstd: {e}")))?;
        Box::new(decoder)
    } else {
        Box::new(file)
    };
    Ok((format, format.read(reader)?))
}

fn main() {
    let args = Args::parse();
    let policies = parse_policies(&args.policy).unwrap_or_else(|e| {
        eprintln!("strata-tracesim: {e}");
        std::process::exit(2);
    });
    let opts = SimOptions {
        samples: args.samples,
        requests_per_sec: args.requests_per_sec,
        seed: args.seed,
        ..Default::default()
    };

    let mut header = "| trace | size | capacity |".to_string();
    let mut rule = "|---|---:|---:|".to_string();
    for p in &policies {
        header += &format!(" {p} |");
        rule += "---:|";
    }
    if !args.no_opt {
        header += " OPT (Bélády) |";
        rule += "---:|";
    }
    println!("{header}\n{rule}");

    for path in &args.files {
        let started = Instant::now();
        let (format, mut trace) = match load(path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("strata-tracesim: {}: {e}", path.display());
                std::process::exit(1);
            }
        };
        if let Some(max) = args.max_requests {
            trace.truncate(max);
        }
        let by = match args.by {
            Some(ByArg::Bytes) => By::Bytes,
            Some(ByArg::Objects) => By::Objects,
            None if format == Format::OracleGeneral => By::Bytes,
            None => By::Objects,
        };
        let fp = footprint(&trace);
        let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into());
        eprintln!(
            "{name}: {} requests, {} objects, {} bytes, loaded in {:.1?}",
            trace.len(),
            fp.objects,
            fp.bytes,
            started.elapsed()
        );
        let next = (!args.no_opt).then(|| next_uses(&trace));
        for &fraction in &args.sizes {
            let whole = match by {
                By::Objects => fp.objects,
                By::Bytes => fp.bytes,
            };
            let capacity = Capacity { limit: ((whole as f64 * fraction).round() as u64).max(1), by };
            let unit = match by {
                By::Objects => "objects",
                By::Bytes => "bytes",
            };
            let mut row = format!("| {name} | {fraction} | {} {unit} |", capacity.limit);
            for &p in &policies {
                let t0 = Instant::now();
                let stats = simulate_with(p, trace.iter().copied(), capacity, &opts);
                eprintln!("  {fraction} {p}: {:.4} in {:.1?}", stats.hit_ratio, t0.elapsed());
                row += &format!(" {:.4} |", stats.hit_ratio);
            }
            if let Some(next) = &next {
                let t0 = Instant::now();
                let stats = belady(&trace, next, capacity);
                eprintln!("  {fraction} OPT: {:.4} in {:.1?}", stats.hit_ratio, t0.elapsed());
                row += &format!(" {:.4} |", stats.hit_ratio);
            }
            println!("{row}");
        }
    }
}
