//! The disk tier: the I/O engines, the segment log and its recovery, and
//! (for tests) a simulated disk that can crash.
//!
//! - [`io`]: the [`io::IoEngine`] trait (batches of aligned reads, writes
//!   and fdatasyncs completed through callbacks on engine threads; a sync
//!   waits for the ops before it in its batch), [`io::Volume`] (a directory
//!   of files, [`io::DirVolume`] probing O_DIRECT), [`engine::probe`] (io_uring
//!   or threads, with the reason) and [`io::run_blocking`] for recovery;
//!   on a worker thread, reads of the pending path are queued and handed
//!   to the engine once per pass of its event loop ([`io::defer_submissions`]);
//!   io_uring then gives the worker a ring of its own, whose completions the
//!   loop reaps ([`io::reap_loop`]).
//! - [`uring`] and [`pool`]: the two engines, passing one suite.
//! - [`record`]: the record format and the scan that validates, skips bad
//!   records and finds torn tails.
//! - [`segment`]: a segment file's name, header block and record
//!   addresses, and reading it a window at a time.
//! - [`log`]: [`log::SegmentLog`], segments, appends, flushes, reads by
//!   address, recycling.
//! - [`recovery`]: the scan of the segments at start-up (opening a log runs
//!   it), with its report and progress.
//!
//! - [`cold_log`]: the cold tier, a log of its own for values demoted from
//!   RAM at `maxmemory` (`store::cold` is the keyspace's side: cold entries,
//!   shared reads through the pending path, promotion under the partition
//!   lock only while the entry still points at the record read, so a newer
//!   write is never overwritten and a read of a recycled address is never
//!   used); its cleaner moves live records forward and recycles segments.
//!   The journal hook appends each mutation through the durability layer's
//!   group commit, which flushes.

#[cfg(test)]
mod admission_sim;
pub mod aio;
pub mod cleaning;
pub mod cold_log;
pub mod engine;
pub mod io;
pub mod log;
pub mod pool;
pub mod record;
pub mod recovery;
pub mod segment;
#[cfg(test)]
pub mod sim;
pub mod uring;

#[cfg(test)]
mod engine_tests {
    use super::engine::EngineChoice;
    use super::io::{DirVolume, suite};

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("strata-tier-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// The suite on `choice`, with and without O_DIRECT; skipped, saying
    /// why, where the kernel or a seccomp profile refuses the engine.
    fn passes_the_suite_where_available(choice: EngineChoice, name: &str) {
        let dir = scratch(name);
        let engine = match super::engine::probe(choice) {
            Ok((engine, _)) => engine,
            Err(e) => {
                eprintln!("{name} refused here ({e}): suite skipped");
                return;
            }
        };
        for direct in [true, false] {
            let _ = std::fs::remove_dir_all(&dir);
            let vol = DirVolume::open(&dir, direct).unwrap();
            suite::run_all(&*engine, &vol);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn pool_engine_passes_the_suite() {
        passes_the_suite_where_available(EngineChoice::Threads, "pool");
    }

    #[test]
    fn aio_engine_passes_the_suite_where_available() {
        passes_the_suite_where_available(EngineChoice::Aio, "aio");
    }

    #[test]
    fn uring_engine_passes_the_suite_where_available() {
        passes_the_suite_where_available(EngineChoice::IoUring, "uring");
    }

    /// The log on real files, through each engine, with O_DIRECT where the
    /// filesystem takes it: every offset and length it uses must be aligned.
    #[test]
    fn the_log_works_on_real_files_with_each_engine() {
        use super::log::{LogConfig, SegmentLog};
        use super::record::{Record, RecordKind};
        use std::sync::Arc;
        for choice in [EngineChoice::Threads, EngineChoice::Aio, EngineChoice::IoUring] {
            let Ok((engine, _)) = super::engine::probe(choice) else { continue };
            let dir = scratch(engine.name());
            let config = LogConfig { segment_size: 64 << 10, max_segments: 8, ..LogConfig::default() };
            let volume = Arc::new(DirVolume::open(&dir, true).unwrap());
            let (log, _) = SegmentLog::open(volume.clone(), engine.clone(), config.clone(), |_, _| {}).unwrap();
            let mut written = Vec::new();
            for i in 0..300u32 {
                let value = vec![i as u8; (i as usize * 53) % 3000];
                let key = i.to_be_bytes();
                let rec = Record { kind: RecordKind::Set, db: 1, key: &key, value: &value, expire_at_ms: 0, seq: 0 };
                let (seq, addr) = log.append(&rec).unwrap();
                written.push((Record { seq, ..rec }.to_owned(), addr));
                if i % 13 == 0 {
                    log.flush().unwrap();
                }
            }
            log.flush().unwrap();
            for (rec, addr) in written.iter().step_by(7) {
                assert_eq!(&log.read(*addr).unwrap(), rec, "{}", engine.name());
            }
            drop(log);
            let mut recovered = Vec::new();
            let (_, report) =
                SegmentLog::open(volume, engine.clone(), config, |r, a| recovered.push((r.to_owned(), a))).unwrap();
            assert_eq!(recovered, written, "{}", engine.name());
            assert!(report.segments > 3);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    #[test]
    fn auto_probe_gives_an_engine_and_a_reason() {
        let (engine, reason) = super::engine::probe(EngineChoice::Auto).unwrap();
        assert!(reason.starts_with(engine.name()), "{reason} vs {}", engine.name());
    }
}
