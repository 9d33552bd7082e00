use clap::Parser;
use strata_node::config::{Cli, Config};
use tracing_subscriber::EnvFilter;

fn init_logging(level: &str, format: &str) {
    // Redis level names map onto tracing's.
    let level = match level {
        "debug" => "debug",
        "verbose" => "debug",
        "notice" => "info",
        "warning" => "warn",
        other => other,
    };
    let filter = EnvFilter::try_from_env("STRATA_LOG").unwrap_or_else(|_| EnvFilter::new(level));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn main() {
    let cli = Cli::parse();
    let config = match Config::from_cli(cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("strata-node: {e}");
            std::process::exit(2);
        }
    };
    init_logging(&config.runtime.loglevel.read().clone(), &config.startup.log_format);
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "strata-node starting");
    if config.startup.durability != "none" {
        tracing::warn!(
            durability = config.startup.durability,
            "this build keeps data in RAM only: writes are not persisted until the disk tier lands; \
             running as durability none"
        );
    }
    let shared = strata_node::server::build_shared(config);
    std::process::exit(strata_node::server::run(shared));
}
