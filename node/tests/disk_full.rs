//! A full volume: ENOSPC from a real filesystem (a small tmpfs mounted for
//! the test, part of it taken by a ballast file), not from the tier's own
//! budget. A journaling node refuses writes with MISCONF (saying the disk is
//! full and what to do), keeps serving reads, is not stopped; killed while
//! full it restarts (no crash loop) with every acknowledged write; once the
//! ballast is deleted it accepts writes again without a restart. The cold
//! tier (durability none) on a full volume evicts instead of demoting, and
//! never answers a read with a wrong value or an error.
//!
//! Mounting needs root (CAP_SYS_ADMIN): elsewhere the tests print why they
//! are skipped and pass.

mod support;

use std::path::PathBuf;
use std::time::Duration;
use support::*;

/// A tmpfs of a few MiB, unmounted and removed on drop.
struct SmallFs {
    dir: PathBuf,
}

impl SmallFs {
    /// A tmpfs of `mib` MiB with a `ballast_mib` MiB file in it; Err: why not.
    fn mount(name: &str, mib: u64, ballast_mib: u64) -> Result<SmallFs, String> {
        let dir = std::env::temp_dir().join(format!("strata-full-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(&dir)
            .output()
            .map_err(|e| format!("running mount: {e}"))?;
        if !out.status.success() {
            let _ = std::fs::remove_dir(&dir);
            return Err(format!("mount -t tmpfs: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        let fs = SmallFs { dir };
        let ballast = std::fs::File::create(fs.ballast()).map_err(|e| e.to_string())?;
        // Written, not sparse: tmpfs counts only pages that hold data.
        let chunk = vec![0xA5u8; 1 << 20];
        for _ in 0..ballast_mib {
            std::io::Write::write_all(&mut &ballast, &chunk).map_err(|e| format!("writing the ballast: {e}"))?;
        }
        Ok(fs)
    }

    fn ballast(&self) -> PathBuf {
        self.dir.join("ballast")
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.dir).status();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A small filesystem, or None after printing why the test is skipped.
fn small_fs(name: &str, mib: u64, ballast_mib: u64) -> Option<SmallFs> {
    match SmallFs::mount(name, mib, ballast_mib) {
        Ok(fs) => Some(fs),
        Err(e) => {
            eprintln!("SKIPPED {name}: a small filesystem cannot be mounted here ({e}); run as root to test ENOSPC");
            None
        }
    }
}

fn value(i: usize) -> String {
    format!("{i:08}-{}", "v".repeat(1000))
}

/// SETs `full:<i>` from `from` on, 100 per round trip, until `stop_after`
/// error replies (or `max` keys): the numbers acknowledged and the first error.
fn write_until_refused(conn: &mut RawConn, from: usize, max: usize, stop_after: usize) -> (Vec<usize>, Option<String>) {
    let mut acked = Vec::new();
    let (mut errors, mut first) = (0, None);
    let mut i = from;
    while errors < stop_after && i < from + max {
        let batch: Vec<(String, String)> = (i..i + 100).map(|n| (format!("full:{n}"), value(n))).collect();
        for (k, v) in &batch {
            conn.send(&["SET", k.as_str(), v.as_str()]);
        }
        for n in i..i + 100 {
            let reply = conn.read_frame();
            match reply.error_message() {
                None => acked.push(n),
                Some(e) => {
                    errors += 1;
                    first.get_or_insert_with(|| e.to_owned());
                }
            }
        }
        i += 100;
    }
    (acked, first)
}

/// The acknowledged keys whose value is not there.
fn missing(conn: &mut RawConn, acked: &[usize]) -> Vec<usize> {
    let mut out = Vec::new();
    for chunk in acked.chunks(200) {
        let mut args = vec!["MGET".to_owned()];
        args.extend(chunk.iter().map(|n| format!("full:{n}")));
        let reply = conn.cmd(&args);
        let values = reply.as_array().unwrap_or_else(|| panic!("MGET: {reply:?}"));
        for (n, v) in chunk.iter().zip(values) {
            if v.as_bytes() != Some(value(*n).as_bytes()) {
                out.push(*n);
            }
        }
    }
    out
}

/// 4 MiB segments (the log zero-fills each): a 24 MiB tmpfs with 8 MiB of
/// ballast holds three of them and the cold tier's spare.
const SEGMENT: &str = "4194304";

fn start(fs: &SmallFs, mode: &str, extra: &[&str]) -> Server {
    let data = fs.data();
    let mut args = vec!["--dir", &data, "--durability", mode];
    args.extend_from_slice(extra);
    let mut server = Server::strata_with_env(&args, &[("STRATA_SEGMENT_SIZE", SEGMENT)]);
    // Loaded once data commands stop getting -LOADING; a node that stops
    // meanwhile fails with its log.
    let loaded = wait_for(Duration::from_secs(20), || {
        let Ok(mut c) = RawConn::connect(server.addr()) else { return false };
        c.try_send(&["EXISTS", "probe"]).is_ok() && matches!(c.try_read_frame(), Ok(Some(f)) if !f.is_error())
    });
    assert!(loaded && server.is_running(), "the node did not load its log in 20 s\n{}", server.logs());
    server
}

fn full_volume_round(mode: &str, extra: &[&str]) {
    let name = format!("{mode}{}", if extra.is_empty() { "" } else { "-tier" });
    let Some(fs) = small_fs(&name, 24, 8) else { return };
    let mut node = start(&fs, mode, extra);
    let mut c = node.conn();
    let (acked, error) = write_until_refused(&mut c, 0, 200_000, 50);
    let error = error.unwrap_or_default();
    eprintln!("{name}: {} writes acknowledged, then {error:?}", acked.len());
    assert!(acked.len() > 2000, "{name}: only {} writes before the volume was full\n{}", acked.len(), node.logs());
    assert!(
        error.starts_with("MISCONF") && error.contains("No space left on device") && error.contains("free space"),
        "{name}: the refusal says the disk is full and what to do: {error:?}"
    );
    assert!(node.is_running(), "{name}: the node stopped on a full volume\n{}", node.logs());
    assert_eq!(missing(&mut c, &acked), Vec::<usize>::new(), "{name}: reads on a full volume");
    assert!(c.cmd(&["DBSIZE"]).as_int().is_some_and(|n| n as usize >= acked.len()));

    // Killed while full: it starts again, every acknowledged key there,
    // writes still refused.
    std::thread::sleep(Duration::from_millis(100));
    node.kill();
    let mut node = start(&fs, mode, extra);
    let mut c = node.conn();
    assert_eq!(missing(&mut c, &acked), Vec::<usize>::new(), "{name}: after a restart on a full volume");
    let refused = c.cmd(&["SET", "probe", "x"]);
    assert!(
        refused.error_message().is_some_and(|e| e.starts_with("MISCONF")),
        "{name}: a write after a restart on a full volume: {refused:?}"
    );
    assert!(c.cmd(&["GET", "probe"]).is_null(), "{name}: a refused write changed nothing");

    // Space returns: writes are accepted again, without a restart.
    std::fs::remove_file(fs.ballast()).unwrap();
    let accepted = wait_for(Duration::from_secs(10), || c.cmd(&["SET", "probe", "y"]).error_message().is_none());
    assert!(accepted, "{name}: writes still refused 10 s after space returned\n{}", node.logs());
    let (more, error) = write_until_refused(&mut c, 1_000_000, 2000, 1);
    assert_eq!((more.len(), error), (2000, None), "{name}: writes after space returned");
    assert!(node.is_running());

    // Killed again: everything acknowledged before and after is there.
    std::thread::sleep(Duration::from_millis(100));
    node.kill();
    let node = start(&fs, mode, extra);
    let mut c = node.conn();
    let all: Vec<usize> = acked.iter().chain(&more).copied().collect();
    assert_eq!(missing(&mut c, &all), Vec::<usize>::new(), "{name}: after space returned and a restart");
    assert_eq!(c.cmd(&["GET", "probe"]).as_bytes(), Some(&b"y"[..]));
}

#[test]
fn a_full_volume_refuses_sync_writes_and_recovers() {
    full_volume_round("sync", &[]);
}

#[test]
fn a_full_volume_refuses_periodic_writes_and_recovers() {
    full_volume_round("periodic", &[]);
}

/// The log and the cold tier on one full volume (the operator's layout for
/// a durable cluster with storage).
#[test]
fn a_full_volume_refuses_sync_writes_with_a_cold_tier_beside_the_log() {
    // maxmemory well above the data: a replay into a small budget is issue 21's item 2, not this.
    full_volume_round("sync", &["--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru", "--max-disk", "64mb"]);
}

/// durability none with a cold tier larger than the volume: the tier's
/// segments stop fitting; demotion stops, values at the limit are evicted
/// (the tier is a cache), no read answers a wrong value or an error, and
/// the node runs on. Once space returns the tier takes values again.
#[test]
fn a_full_volume_under_the_cold_tier_evicts_and_recovers() {
    let Some(fs) = small_fs("cold", 32, 16) else { return };
    let data = fs.data();
    let args = ["--dir", &data, "--maxmemory", "24mb", "--maxmemory-policy", "allkeys-lru", "--max-disk", "256mb"];
    let mut node = Server::strata_with(&args);
    let mut c = node.conn();
    let (acked, error) = write_until_refused(&mut c, 0, 60_000, 1);
    assert_eq!((acked.len(), error), (60_000, None), "writes evict rather than fail\n{}", node.logs());
    assert!(node.is_running());
    let gone = missing(&mut c, &acked);
    // Whatever is read is the value written (a miss is an eviction).
    for chunk in acked.chunks(200) {
        let mut a = vec!["MGET".to_owned()];
        a.extend(chunk.iter().map(|n| format!("full:{n}")));
        let reply = c.cmd(&a);
        for (n, v) in chunk.iter().zip(reply.as_array().expect("MGET")) {
            assert!(v.is_null() || v.as_bytes() == Some(value(*n).as_bytes()), "full:{n} = {v:?}");
        }
    }
    let kept = acked.len() - gone.len();
    eprintln!(
        "cold tier on a full volume: {kept} of {} keys kept (RAM and the part of the tier that fit)",
        acked.len()
    );
    let disk = |c: &mut RawConn| -> u64 { info(c, Some("tier"))["tier_disk_bytes"].parse().expect("tier_disk_bytes") };
    let full = disk(&mut c);
    assert!(full > 0 && full <= 16 << 20, "the tier holds what fit on the volume: {full} bytes");
    assert!(!node.logs().contains("the key is lost"), "a demoted value was lost\n{}", node.logs());

    // Space returns: the tier takes values again, without a restart.
    std::fs::remove_file(fs.ballast()).unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let (again, error) = write_until_refused(&mut c, 100_000, 30_000, 1);
    assert_eq!((again.len(), error), (30_000, None));
    let grown = disk(&mut c);
    eprintln!("after space returned: the tier holds {grown} bytes (was {full})");
    assert!(grown > full, "the tier took no more values once space returned\n{}", node.logs());
    assert!(node.is_running());
}
