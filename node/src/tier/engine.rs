//! Choosing the I/O engine: io_uring where the kernel and the container's
//! seccomp profile allow it, else the thread pool with the workers' reads
//! by Linux AIO, else the thread pool alone (`--io-engine`). Apart from
//! `io.rs`, which every engine implements, so none imports another.

use super::io::IoEngine;
use std::io;
use std::sync::Arc;

/// Which engine to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineChoice {
    /// io_uring when the kernel and seccomp allow it, else aio, else threads.
    Auto,
    IoUring,
    /// The thread pool, with the reads workers submit by Linux AIO.
    Aio,
    Threads,
}

/// Threads of the pool engine: the reads it keeps on the device at once
/// (a pipeline's read-ahead issues up to 128), so more than the cores; they
/// sleep in pread.
pub const POOL_THREADS: usize = 16;

/// Picks an engine: with `Auto`, io_uring unless `io_uring_setup` is
/// refused (EPERM/ENOSYS under the container runtimes' default seccomp
/// profile), then the thread pool with the reason.
pub fn probe(choice: EngineChoice) -> io::Result<(Arc<dyn IoEngine>, String)> {
    match choice {
        EngineChoice::Threads => {
            Ok((Arc::new(super::pool::PoolEngine::new(POOL_THREADS)), "threads: chosen".to_string()))
        }
        EngineChoice::IoUring => match super::uring::UringEngine::new() {
            Ok(e) => Ok((Arc::new(e), "io_uring: chosen".to_string())),
            // Say why and what to do: the usual cause is a container's seccomp profile.
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!(
                    "io-engine uring: io_uring is refused ({e}); container runtimes' default seccomp profiles \
                     (Kubernetes RuntimeDefault on containerd >= 2.0, Docker >= 25) and the sysctl \
                     kernel.io_uring_disabled refuse it; use --io-engine auto (falls back to threads) or threads"
                ),
            )),
        },
        EngineChoice::Aio => match super::aio::probe() {
            Ok(()) => Ok((Arc::new(super::pool::PoolEngine::with_aio(POOL_THREADS)), "aio: chosen".to_string())),
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!("io-engine aio: Linux AIO is refused ({e}); use --io-engine auto or threads"),
            )),
        },
        EngineChoice::Auto => match super::uring::UringEngine::new() {
            Ok(e) => Ok((Arc::new(e), "io_uring: available".to_string())),
            Err(e) => match super::aio::probe() {
                Ok(()) => Ok((
                    Arc::new(super::pool::PoolEngine::with_aio(POOL_THREADS)),
                    format!("aio: io_uring refused ({e})"),
                )),
                Err(a) => Ok((
                    Arc::new(super::pool::PoolEngine::new(POOL_THREADS)),
                    format!("threads: io_uring refused ({e}), AIO refused ({a})"),
                )),
            },
        },
    }
}
