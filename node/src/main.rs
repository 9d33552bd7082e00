#![deny(unsafe_code)]

use strata_node::config::{Cli, Config};

fn main() {
    let cli = Cli::parse();
    let config = match Config::from_cli(cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("strata-node: {e}");
            std::process::exit(2);
        }
    };
    strata_node::config::logging::init(&config.runtime.loglevel.read().clone(), &config.startup.log_format);
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "strata-node starting");
    let shared = match strata_node::server::build_shared(config) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("{e}");
            std::process::exit(1);
        }
    };
    std::process::exit(strata_node::server::run(shared));
}
