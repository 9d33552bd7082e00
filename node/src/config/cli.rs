//! The command line, built from the parameter table: a `--name` flag per
//! parameter, each also read from its `STRATA_NAME` environment variable
//! (clap lets the flag win), listed in `--help` under its group with its
//! default.

use super::params::{PARAMS, Param};
use clap::parser::ValueSource;
use clap::{Arg, ArgMatches, Command};
use std::ffi::OsString;
use std::path::PathBuf;

const ABOUT: &str = "strata-node: a Redis-compatible cache node that uses every core.";

const LONG_ABOUT: &str = "strata-node: a Redis-compatible cache node that uses every core.

Runs standalone (defaults: 127.0.0.1:6379, data under ./data) or as a pod managed by the Strata operator. Every \
option can also be set in a redis.conf-style file (`--config FILE`, e.g. `maxmemory 1gb`) or through an environment \
variable (`STRATA_PORT=6380`).";

/// `--help` headings, in the order they are listed.
const GROUPS: &[&str] =
    &["Network", "Clients", "Security", "Memory", "Threads", "Logging", "Storage", "Cluster", "Metrics"];

/// The `--config` argument's id.
const CONFIG_FILE: &str = "config";

/// strata-node's command line.
pub fn command() -> Command {
    let config = Arg::new(CONFIG_FILE)
        .long("config")
        .short('c')
        .env("STRATA_CONFIG")
        .value_name("FILE")
        .value_parser(clap::value_parser!(PathBuf))
        .help("Config file in redis.conf syntax (`directive value` per line).");
    // clap lists headings in the order their first argument comes.
    let mut params: Vec<&Param> = PARAMS.iter().collect();
    params.sort_by_key(|p| GROUPS.iter().position(|g| *g == p.group).unwrap_or(GROUPS.len()));
    params.into_iter().fold(
        Command::new("strata-node").version(env!("CARGO_PKG_VERSION")).about(ABOUT).long_about(LONG_ABOUT).arg(config),
        |cmd, p| cmd.arg(param_arg(p)),
    )
}

fn param_arg(p: &Param) -> Arg {
    let arg = Arg::new(p.name)
        .long(p.flag())
        .env(p.env_var())
        .value_name(p.kind.value_name())
        .help(p.help)
        .help_heading(p.group)
        .hide_env_values(p.secret)
        // `--slowlog-log-slower-than -1`: a negative number is a value.
        .allow_negative_numbers(true);
    match p.default {
        Some(default) => arg.default_value(default),
        None => arg,
    }
}

/// The parsed command line and environment.
pub struct Cli {
    matches: ArgMatches,
}

impl Cli {
    /// Parses the process's arguments; exits with usage on errors, `--help`
    /// and `--version`.
    pub fn parse() -> Cli {
        Cli { matches: command().get_matches() }
    }

    pub fn parse_from<I, T>(args: I) -> Cli
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        Cli { matches: command().get_matches_from(args) }
    }

    pub fn try_parse_from<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        Ok(Cli { matches: command().try_get_matches_from(args)? })
    }

    pub fn config_file(&self) -> Option<PathBuf> {
        self.matches.get_one::<PathBuf>(CONFIG_FILE).cloned()
    }

    /// The value a flag or environment variable gave, not clap's default
    /// (a config file overrides that).
    pub fn given(&self, p: &Param) -> Option<&str> {
        match self.matches.value_source(p.name) {
            Some(ValueSource::CommandLine | ValueSource::EnvVariable) => {
                self.matches.get_one::<String>(p.name).map(String::as_str)
            }
            _ => None,
        }
    }
}
