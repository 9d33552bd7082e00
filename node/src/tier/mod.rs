//! The disk tier: the I/O engines, the segment log and its recovery, and
//! (for tests) a simulated disk that can crash.
//!
//! Wiring, for the keyspace: an entry whose value is on disk keeps the
//! [`log::RecordAddr`] returned by [`log::SegmentLog::append`]; demotion
//! appends the value (or finds it already logged) and drops the RAM copy
//! once [`log::SegmentLog::durable_seq`] covers its sequence number;
//! promotion reads it back with [`log::SegmentLog::read`] (asynchronously,
//! through the pending path). The journal hook appends each mutation and
//! the durability layer calls [`log::SegmentLog::flush`].

pub mod io;
pub mod log;
pub mod pool;
pub mod record;
#[cfg(test)]
pub mod sim;
pub mod uring;

#[cfg(test)]
mod engine_tests {
    use super::io::{DirVolume, EngineChoice, suite};

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("strata-tier-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn pool_engine_passes_the_suite() {
        let dir = scratch("pool");
        for direct in [true, false] {
            let _ = std::fs::remove_dir_all(&dir);
            let vol = DirVolume::open(&dir, direct).unwrap();
            let (engine, _) = super::io::probe(EngineChoice::Threads).unwrap();
            suite::run_all(&*engine, &vol);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn uring_engine_passes_the_suite_where_available() {
        let dir = scratch("uring");
        let engine = match super::io::probe(EngineChoice::IoUring) {
            Ok((engine, _)) => engine,
            Err(e) => {
                eprintln!("io_uring refused here ({e}): suite skipped");
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
    fn auto_probe_gives_an_engine_and_a_reason() {
        let (engine, reason) = super::io::probe(EngineChoice::Auto).unwrap();
        assert!(reason.starts_with(engine.name()), "{reason} vs {}", engine.name());
    }
}
