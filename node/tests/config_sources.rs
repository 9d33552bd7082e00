//! Where a setting comes from: defaults < config file < STRATA_* environment
//! variables < command-line flags, checked on the real binary.

mod support;
use support::*;

use std::process::{Command, Stdio};

/// A config file in a fresh directory, removed on drop.
struct ConfFile(std::path::PathBuf);

impl ConfFile {
    fn new(text: &str) -> ConfFile {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("strata-conf-sources-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("node.conf");
        std::fs::write(&path, text).unwrap();
        ConfFile(path)
    }

    fn arg(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for ConfFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
    }
}

/// Runs a node that must refuse its settings; returns what it printed.
fn refused(conf: &ConfFile, env: &[(&str, &str)], args: &[&str]) -> String {
    let out = Command::new(STRATA_BIN)
        .args(["--config", conf.arg()])
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run strata-node");
    assert_eq!(out.status.code(), Some(2), "the node should have refused to start");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn env_var_beats_file_directive_and_flag_beats_env_var() {
    let conf = ConfFile::new("maxmemory-policy allkeys-lru\n");
    let err = refused(&conf, &[("STRATA_MAXMEMORY_POLICY", "from-env")], &[]);
    assert!(err.contains("invalid maxmemory-policy 'from-env'"), "{err}");
    let err = refused(&conf, &[("STRATA_MAXMEMORY_POLICY", "from-env")], &["--maxmemory-policy", "from-flag"]);
    assert!(err.contains("invalid maxmemory-policy 'from-flag'"), "{err}");
    // An environment variable hides a bad file value (the node then stops at the bad port).
    let conf = ConfFile::new("maxmemory-policy from-file\n");
    let err = refused(&conf, &[("STRATA_MAXMEMORY_POLICY", "allkeys-lru"), ("STRATA_PORT", "bad")], &[]);
    assert!(err.contains("invalid port 'bad'") && !err.contains("from-file"), "{err}");
}

#[test]
fn running_node_reports_the_winning_source() {
    let conf = ConfFile::new("maxmemory 10mb\ntimeout 5\nmaxclients 100\n");
    let server = Server::strata_with_env(
        &["--config", conf.arg(), "--threads", "1", "--maxclients", "300"],
        &[("STRATA_MAXMEMORY", "20mb"), ("STRATA_MAXCLIENTS", "200")],
    );
    let mut c = server.conn();
    let got = c.cmd(&["CONFIG", "GET", "maxmemory", "timeout", "maxclients"]).sorted_pairs();
    let want = Frame::bulks(&["maxmemory", "20971520", "timeout", "5", "maxclients", "300"]).sorted_pairs();
    assert_eq!(got, want, "env over file, flag over env, file over default");
}
