//! A durable node filled to its memory limit and killed (-9) restarts on
//! its unchanged configuration with every write it acknowledged, under
//! every policy, with and without a disk tier, in `periodic` and `sync`.
//! (The replay used to need more memory than the running node had held:
//! a node at its limit crash-looped with every acknowledged write
//! unreachable.) Against the real binary and a real file system.

mod support;

use std::time::Duration;
use support::crash::wait_loaded;
use support::*;

const MAXMEMORY: &str = "32mb";
const RAM: usize = 32 << 20;
const VALUE: usize = 1000;

fn value_of(i: usize) -> String {
    let seed = format!("v{i}:");
    seed.repeat(VALUE / seed.len() + 1)[..VALUE].to_string()
}

fn args<'a>(dir: &'a DataDir, policy: &'a str, tier: bool, mode: &'a str) -> Vec<&'a str> {
    let mut a = vec!["--dir", dir.path(), "--durability", mode, "--maxmemory", MAXMEMORY, "--maxmemory-policy", policy];
    if tier {
        a.extend(["--max-disk", "1gb"]);
    }
    a
}

/// Pipelined SETs of new keys until `target` keys or a run of refusals
/// (OOM): the keys acknowledged, in order, and the refusals.
fn fill(server: &Server, target: usize) -> (Vec<usize>, usize) {
    let mut c = server.conn();
    let (mut acked, mut refused, mut i) = (Vec::new(), 0, 0);
    while i < target && refused < 300 {
        let chunk: Vec<usize> = (i..(i + 100).min(target)).collect();
        for &k in &chunk {
            c.send(&["SET", &format!("key:{k}"), &value_of(k)]);
        }
        for &k in &chunk {
            match c.read_frame() {
                f if f == Frame::ok() => acked.push(k),
                Frame::Error(e) if e.starts_with("OOM") => refused += 1,
                other => panic!("SET key:{k}: {other:?}"),
            }
        }
        i += chunk.len();
    }
    (acked, refused)
}

/// Fills a node, kills it, restarts it on the same configuration and
/// checks what came back. `may_discard`: the policy may have evicted keys
/// for good (an evicting policy without a tier); every key still there
/// must hold its value then, and otherwise every acknowledged key must be.
fn scenario(policy: &str, tier: bool, mode: &str) {
    let name = format!("{policy}-{}-{mode}", if tier { "tier" } else { "ram" });
    let dir = DataDir::new(&format!("limit-{name}"));
    let a = args(&dir, policy, tier, mode);
    let mut server = Server::strata_with(&a);
    wait_loaded(&server, Duration::from_secs(30));
    // Three times RAM: past the limit whatever the policy.
    let (acked, refused) = fill(&server, 3 * RAM / VALUE);
    if mode == "periodic" {
        // The last fsync interval (10 ms) may be lost to a kill: let it pass.
        std::thread::sleep(Duration::from_millis(200));
    }
    let held = server.conn().cmd(&["DBSIZE"]).as_int().unwrap();
    server.kill();

    let server = Server::strata_with(&a);
    wait_loaded(&server, Duration::from_secs(60));
    let mut c = server.conn();
    let back = c.cmd(&["DBSIZE"]).as_int().unwrap();
    let may_discard = !tier && policy.starts_with("allkeys");
    let mut missing = 0;
    for chunk in acked.chunks(200) {
        for &k in chunk {
            c.send(&["GET", &format!("key:{k}")]);
        }
        for &k in chunk {
            match c.read_frame() {
                Frame::Bulk(v) => assert_eq!(v, value_of(k).as_bytes(), "{name}: key:{k} came back with another value"),
                f if f.is_null() => missing += 1,
                other => panic!("{name}: GET key:{k}: {other:?}"),
            }
        }
    }
    println!(
        "{name}: {} acknowledged, {refused} refused, {held} held at the kill, {back} after the restart, {missing} \
         acknowledged missing",
        acked.len()
    );
    assert!(acked.len() > 1000, "{name}: only {} writes acknowledged", acked.len());
    if may_discard {
        assert!(back > 1000 && back as usize <= acked.len(), "{name}: {back} keys after the restart");
    } else {
        assert_eq!(missing, 0, "{name}: acknowledged writes lost across the restart\n{}", server.logs());
        assert_eq!(back as usize, acked.len(), "{name}: keys after the restart");
    }
}

fn both_modes(policy: &str, tier: bool) {
    for mode in ["sync", "periodic"] {
        scenario(policy, tier, mode);
    }
}

#[test]
fn noeviction_without_a_tier() {
    both_modes("noeviction", false);
}

#[test]
fn noeviction_with_a_tier() {
    both_modes("noeviction", true);
}

#[test]
fn volatile_lru_without_a_tier() {
    both_modes("volatile-lru", false);
}

#[test]
fn volatile_lru_with_a_tier() {
    both_modes("volatile-lru", true);
}

#[test]
fn allkeys_lru_without_a_tier() {
    both_modes("allkeys-lru", false);
}

#[test]
fn allkeys_lru_with_a_tier() {
    both_modes("allkeys-lru", true);
}
