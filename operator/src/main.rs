use clap::Parser;
use strata_operator::process::{Options, init_logging, run};

fn main() {
    let opts = Options::parse();
    init_logging(&opts);
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "strata-operator starting");
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("strata-operator: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(run(opts));
    // Don't wait for lingering watch connections.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    std::process::exit(code);
}
