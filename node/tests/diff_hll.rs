//! Differential tests (strata vs redis) for HyperLogLog: PFADD, PFCOUNT
//! (single key and union), PFMERGE, PFDEBUG, PFSELFTEST, the exact HLL
//! string bytes (sparse and dense, promotion at hll-sparse-max-bytes),
//! values moved between the servers with GET/SET, and corrupted strings.

mod support;

use support::*;

fn pfadd_many(d: &mut Diff, key: &str, prefix: &str, n: usize, batch: usize) {
    let elems: Vec<String> = (0..n).map(|i| format!("{prefix}{i}")).collect();
    for chunk in elems.chunks(batch) {
        let mut cmd = vec!["PFADD", key];
        cmd.extend(chunk.iter().map(|s| s.as_str()));
        d.exact(&cmd);
    }
}

#[test]
fn pfadd_pfcount_and_exact_bytes() {
    for resp3 in [false, true] {
        let mut d = if resp3 { Diff::new_resp3() } else { Diff::new() };
        d.exact(&["PFADD", "h"]);
        d.exact(&["PFADD", "h"]);
        d.exact(&["GET", "h"]);
        d.exact(&["PFCOUNT", "h"]);
        d.exact(&["PFADD", "h", "a", "b", "c", "a"]);
        d.exact(&["PFADD", "h", "a"]);
        d.exact(&["PFCOUNT", "h"]);
        // The cached cardinality is written into the string.
        d.exact(&["GET", "h"]);
        d.exact(&[b"PFADD".as_slice(), b"h", b"", b"\x00\xff\r\n", b"binary \x01"]);
        d.exact(&["GET", "h"]);
        d.exact(&["PFDEBUG", "ENCODING", "h"]);
        d.exact(&["PFDEBUG", "DECODE", "h"]);
        d.exact(&["PFCOUNT", "nosuch"]);
        d.exact(&["PFCOUNT", "h", "nosuch"]);
        // Grows sparse, then dense at the default 3000-byte limit.
        for (i, n) in [10, 100, 1000, 5000].into_iter().enumerate() {
            let key = format!("g{i}");
            pfadd_many(&mut d, &key, "el", n, 100);
            d.exact(&["PFCOUNT", &key]);
            d.exact(&["PFDEBUG", "ENCODING", &key]);
            d.exact(&["GET", &key]);
        }
        d.exact(&["PFCOUNT", "g0", "g1", "g2", "g3", "h"]);
        d.exact(&["TTL", "h"]);
        d.exact(&["EXPIRE", "h", "1000"]);
        d.exact(&["PFADD", "h", "new-element"]);
        d.exact(&["TTL", "h"]);
        d.finish();
    }
}

#[test]
fn pfmerge_and_pfdebug() {
    let mut d = Diff::new();
    pfadd_many(&mut d, "a", "x", 50, 50);
    pfadd_many(&mut d, "b", "y", 3000, 300);
    pfadd_many(&mut d, "c", "x", 80, 80);
    d.exact(&["PFMERGE", "m", "a", "c"]);
    d.exact(&["GET", "m"]);
    d.exact(&["PFCOUNT", "m"]);
    d.exact(&["PFDEBUG", "ENCODING", "m"]);
    d.exact(&["PFMERGE", "m2", "a", "b", "nosuch"]);
    d.exact(&["GET", "m2"]);
    d.exact(&["PFDEBUG", "ENCODING", "m2"]);
    d.exact(&["PFMERGE", "a", "c"]);
    d.exact(&["GET", "a"]);
    d.exact(&["PFMERGE", "empty"]);
    d.exact(&["GET", "empty"]);
    d.exact(&["PFMERGE", "empty2", "nosuch"]);
    d.exact(&["GET", "empty2"]);
    d.exact(&["PFDEBUG", "GETREG", "c"]);
    d.exact(&["PFDEBUG", "ENCODING", "c"]);
    d.exact(&["PFDEBUG", "TODENSE", "c"]);
    d.exact(&["PFDEBUG", "TODENSE", "c"]);
    d.exact(&["GET", "c"]);
    d.exact(&["PFDEBUG", "DECODE", "c"]);
    d.exact(&["PFDEBUG", "GETREG", "nosuch"]);
    d.exact(&["PFDEBUG", "NOPE", "nosuch"]);
    d.exact(&["PFDEBUG", "NOPE", "c"]);
    d.exact(&["PFDEBUG", "GETREG"]);
    d.exact(&["PFSELFTEST"]);
    d.exact(&["PFSELFTEST", "x"]);
    // Wrong types and strings that are not HLLs.
    d.exact(&["SET", "str", "hello"]);
    d.exact(&["SET", "int", "12345"]);
    d.exact(&["LPUSH", "list", "x"]);
    for key in ["str", "int", "list"] {
        d.exact(&["PFADD", key, "a"]);
        d.exact(&["PFCOUNT", key]);
        d.exact(&["PFCOUNT", "a", key]);
        d.exact(&["PFMERGE", "m", key]);
        d.exact(&["PFMERGE", key, "a"]);
        d.exact(&["PFDEBUG", "GETREG", key]);
    }
    d.exact(&["GET", "str"]);
    d.exact(&["PFADD"]);
    d.exact(&["PFCOUNT"]);
    d.exact(&["PFMERGE"]);
    d.finish();
}

#[test]
fn sparse_limit_follows_config() {
    let mut d = Diff::new();
    for limit in ["0", "30", "200", "1000"] {
        d.exact(&["CONFIG", "SET", "hll-sparse-max-bytes", limit]);
        let key = format!("k{limit}");
        pfadd_many(&mut d, &key, "v", 150, 7);
        d.exact(&["PFDEBUG", "ENCODING", &key]);
        d.exact(&["GET", &key]);
        d.exact(&["PFCOUNT", &key]);
        d.exact(&["PFMERGE", "merged", &key]);
        d.exact(&["GET", "merged"]);
    }
    d.exact(&["CONFIG", "GET", "hll-sparse-max-bytes"]);
    d.finish();
}

/// HLL strings made on one server give the same counts, merges and
/// updates on the other.
#[test]
fn hll_strings_move_between_servers() {
    let mut d = Diff::new();
    let mut rng = Rng::new(7);
    for (i, n) in [3usize, 200, 900, 20_000].into_iter().enumerate() {
        let key = format!("src{i}");
        let elems: Vec<String> = (0..n).map(|_| format!("e{}", rng.next() % 1_000_000)).collect();
        for chunk in elems.chunks(500) {
            let mut cmd = vec!["PFADD", key.as_str()];
            cmd.extend(chunk.iter().map(|s| s.as_str()));
            d.exact(&cmd);
        }
        // Redis's bytes into strata, strata's into redis, under new names.
        let from_redis = d.redis().cmd(&["GET", key.as_str()]).as_bytes().expect("an HLL string").to_vec();
        let from_strata = d.strata().cmd(&["GET", key.as_str()]).as_bytes().expect("an HLL string").to_vec();
        assert_eq!(from_redis, from_strata, "the HLL bytes of {key}");
        let (rkey, skey) = (format!("from-redis{i}"), format!("from-strata{i}"));
        assert!(!d.strata().cmd(&[b"SET".as_slice(), rkey.as_bytes(), &from_redis]).is_error());
        assert!(!d.redis().cmd(&[b"SET".as_slice(), rkey.as_bytes(), &from_redis]).is_error());
        assert!(!d.redis().cmd(&[b"SET".as_slice(), skey.as_bytes(), &from_strata]).is_error());
        assert!(!d.strata().cmd(&[b"SET".as_slice(), skey.as_bytes(), &from_strata]).is_error());
        // Stale cache: both recompute.
        d.exact(&["PFADD", &rkey, "one-more", "and-another"]);
        d.exact(&["PFCOUNT", &rkey]);
        d.exact(&["PFCOUNT", &skey]);
        d.exact(&["PFCOUNT", &rkey, &skey]);
        d.exact(&["GET", &rkey]);
        d.exact(&["PFMERGE", &skey, &rkey]);
        d.exact(&["GET", &skey]);
    }
    d.finish();
}

/// Corrupted HLL strings get Redis's errors (or the same answers where
/// Redis does not notice), never a crash.
#[test]
fn corrupted_hll_strings() {
    let mut d = Diff::new();
    pfadd_many(&mut d, "sparse", "s", 40, 40);
    pfadd_many(&mut d, "dense", "d", 3000, 500);
    let sparse = d.redis().cmd(&["GET", "sparse"]).as_bytes().unwrap().to_vec();
    let dense = d.redis().cmd(&["GET", "dense"]).as_bytes().unwrap().to_vec();
    let mut cases: Vec<Vec<u8>> = vec![
        b"HYLL".to_vec(),
        b"HYLL\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00".to_vec(),
        b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80".to_vec(),
        b"HYLL\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x7f\xff".to_vec(),
        b"HYLX\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x7f\xff".to_vec(),
        // Sparse opcodes covering too few, then too many, registers.
        b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xfe".to_vec(),
        b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff\x80".to_vec(),
        b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff\x7f\xff".to_vec(),
        // An XZERO cut short.
        b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f".to_vec(),
        dense[..dense.len() - 1].to_vec(),
        [dense.as_slice(), b"x"].concat(),
    ];
    let mut rng = Rng::new(42);
    for _ in 0..40 {
        let mut v = sparse.clone();
        let flips = 1 + (rng.next() % 3) as usize;
        for _ in 0..flips {
            let at = 16 + (rng.next() as usize) % (v.len() - 16);
            v[at] = rng.next() as u8;
        }
        // Mark the cache stale so PFCOUNT decodes the registers.
        v[15] |= 0x80;
        cases.push(v);
    }
    for _ in 0..10 {
        let mut v = dense.clone();
        let at = 16 + (rng.next() as usize) % (v.len() - 16);
        v[at] = rng.next() as u8;
        v[15] |= 0x80;
        cases.push(v);
    }
    for (i, bad) in cases.iter().enumerate() {
        let key = format!("bad{i}");
        assert!(!d.strata().cmd(&[b"SET".as_slice(), key.as_bytes(), bad]).is_error());
        assert!(!d.redis().cmd(&[b"SET".as_slice(), key.as_bytes(), bad]).is_error());
        d.exact(&["PFCOUNT", &key]);
        d.exact(&["PFCOUNT", &key, "sparse"]);
        d.exact(&["PFDEBUG", "ENCODING", &key]);
        d.exact(&["PFMERGE", "target", &key]);
        d.exact(&["PFADD", &key, "a", "b", "c", "d", "e", "f", "g"]);
        d.exact(&["GET", &key]);
        d.exact(&["PFDEBUG", "GETREG", &key]);
    }
    d.finish();
}
