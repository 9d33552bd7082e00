//! The node's log output: text or JSON on stderr, at a Redis log level that
//! CONFIG SET loglevel changes while running.

use std::sync::OnceLock;
use tracing_subscriber::EnvFilter;

type Reload = Box<dyn Fn(EnvFilter) -> Result<(), String> + Send + Sync>;

/// Swaps the running logger's filter; set once by [`init`].
static RELOAD: OnceLock<Reload> = OnceLock::new();

/// Redis level names mapped onto tracing's.
fn filter_for(level: &str) -> EnvFilter {
    EnvFilter::new(match level {
        "debug" | "verbose" => "debug",
        "notice" => "info",
        "warning" => "warn",
        other => other,
    })
}

/// Installs the global logger. `STRATA_LOG` (tracing's filter syntax) wins
/// over `level` at start-up.
pub fn init(level: &str, format: &str) {
    let filter = EnvFilter::try_from_env("STRATA_LOG").unwrap_or_else(|_| filter_for(level));
    let builder = tracing_subscriber::fmt().with_writer(std::io::stderr);
    if format == "json" {
        let builder = builder.json().with_env_filter(filter).with_filter_reloading();
        let handle = builder.reload_handle();
        let _ = RELOAD.set(Box::new(move |f| handle.reload(f).map_err(|e| e.to_string())));
        builder.init();
    } else {
        let builder = builder.with_env_filter(filter).with_filter_reloading();
        let handle = builder.reload_handle();
        let _ = RELOAD.set(Box::new(move |f| handle.reload(f).map_err(|e| e.to_string())));
        builder.init();
    }
}

/// Applies a Redis log level (`debug`, `verbose`, `notice`, `warning`) to
/// the running logger. A no-op when no logger was installed (tests).
pub fn set_level(level: &str) {
    if let Some(reload) = RELOAD.get()
        && let Err(e) = reload(filter_for(level))
    {
        tracing::warn!("could not change the log level: {e}");
    }
}
