//! Power loss on a real file system: the node's `--dir` is a FUSE file
//! system (tests/powerfs) that keeps written-but-not-fsynced data in
//! memory only. Clients write under load and log every acknowledged write;
//! then the power is cut (kill -9 the node, drop every unsynced byte and
//! name), the file system is remounted and the node restarted on it:
//! `sync` must have lost no acknowledged write, `periodic` and `write-back`
//! only writes their back-pressure bound allows. The rounds and the check
//! are tests/support/crash.rs's, shared with tests/durability.rs.
//!
//! `STRATA_DUR_TEST_BROKEN=1` runs the node with sync replies that do not
//! wait for the fsync (`STRATA_TEST_ACK_BEFORE_FSYNC=1`): the sync test
//! must then fail, which shows it can.
//!
//! Needs /dev/fuse and the right to mount (root): without them the tests
//! say plainly that they skipped.

mod powerfs;
mod support;

use powerfs::PowerFs;
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::crash::{self, Crash, Outcome, crash_rounds};
use support::*;

/// A mount point, removed at the end.
struct MountPoint(PathBuf);
impl MountPoint {
    fn new(name: &str) -> MountPoint {
        let p = std::env::temp_dir().join(format!("strata-power-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        MountPoint(p)
    }
}
impl Drop for MountPoint {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Why the power-loss tests cannot run here, if they cannot.
fn unavailable(at: &Path) -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse does not exist (load the fuse module, or give the container the device)".into());
    }
    match PowerFs::new().mount(at) {
        Ok(m) => {
            drop(m);
            None
        }
        Err(e) => {
            Some(format!("cannot mount a FUSE file system at {}: {e} (needs root or CAP_SYS_ADMIN)", at.display()))
        }
    }
}

/// kill -9, then a power cut: the file system drops every byte and name
/// not fsynced, and is mounted again.
struct PowerCut<'a> {
    mnt: &'a MountPoint,
    fs: PowerFs,
    mounted: Option<powerfs::Mounted>,
    mode: &'a str,
    extra: &'a [&'a str],
}

impl Crash for PowerCut<'_> {
    const WHAT: &'static str = "cut";

    fn start(&mut self) -> Server {
        let mut args = vec!["--dir", self.mnt.0.to_str().unwrap(), "--durability", self.mode];
        args.extend_from_slice(self.extra);
        crash::start_durable(&args, &[("STRATA_SEGMENT_SIZE", "1048576")], Duration::from_secs(30))
    }

    fn run_for(&self, round: usize) -> Duration {
        Duration::from_millis(300 + (round as u64 * 53) % 300)
    }

    fn after_kill(&mut self) {
        // Requests the dead node had in flight are served before the cut.
        std::thread::sleep(Duration::from_millis(100));
        self.fs.power_cut();
        drop(self.mounted.take());
        self.mounted = Some(self.fs.mount(&self.mnt.0).expect("remount after the power cut"));
    }
}

/// [`crash_rounds`] with a power cut as the crash; None (and a line saying
/// why) where this machine cannot mount the file system.
fn power_cut_rounds(mode: &'static str, extra: &[&str], rounds: usize, hold: Duration) -> Option<Outcome> {
    let mnt = MountPoint::new(mode);
    if let Some(why) = unavailable(&mnt.0) {
        eprintln!("SKIPPED: the power-loss test did not run: {why}");
        return None;
    }
    let fs = PowerFs::new();
    let mounted = Some(fs.mount(&mnt.0).expect("mount"));
    let mut cut = PowerCut { mnt: &mnt, fs, mounted, mode, extra };
    let out = crash_rounds(&mut cut, mode, rounds, hold);
    let (fsyncs, cuts) = cut.fs.counters();
    eprintln!("{mode}: {cuts} power cuts, {fsyncs} fsyncs, {out:?}");
    drop(cut);
    Some(out)
}

#[test]
fn sync_loses_no_acknowledged_write_at_a_power_cut() {
    let Some(o) = power_cut_rounds("sync", &[], 6, Duration::ZERO) else { return };
    assert!(o.acked > 500, "too little load to mean anything: {}", o.acked);
    assert_eq!((o.lost, o.phantom), (0, 0), "sync lost acknowledged writes at a power cut");
}

#[test]
fn periodic_loses_at_most_its_window_at_a_power_cut() {
    // Replies are held once the oldest write not yet durable is two 10 ms
    // intervals old.
    let hold = Duration::from_millis(2 * 10);
    let Some(o) = power_cut_rounds("periodic", &["--fsync-interval", "10ms"], 6, hold) else { return };
    assert!(o.acked > 500, "too little load to mean anything: {}", o.acked);
    assert_eq!((o.broken, o.phantom), (0, 0), "periodic acknowledged writes it later lost past its bound");
}

#[test]
fn write_back_loses_at_most_its_max_lag_at_a_power_cut() {
    // write-back-max-lag bounds the age of the oldest write not yet durable
    // at any acknowledgement.
    let hold = Duration::from_millis(100);
    let Some(o) = power_cut_rounds("write-back", &["--write-back-max-lag", "100ms"], 4, hold) else { return };
    assert!(o.acked > 500, "too little load to mean anything: {}", o.acked);
    assert!(o.lost > 0, "write-back lost nothing: the cut did not drop unsynced writes");
    assert_eq!((o.broken, o.phantom), (0, 0), "write-back acknowledged writes it later lost past its max lag");
}
