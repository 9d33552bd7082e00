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
    // The default panic report spans several lines; in a pod the kubelet keeps the log's tail as
    // the termination message and the operator reports its last line: end with one that says it.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(no message)");
        let at = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("unnamed");
        tracing::error!("panic in thread {name} at {at}: {}", message.replace('\n', " "));
    }));
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
