//! An eventfd that a thread's async event loop waits on, for signals from
//! the kernel or other threads (an io_uring's completions).

use std::fs::File;
use std::io::{self, Read};
use std::sync::Arc;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// The waiting side of a non-blocking eventfd, registered with the
/// current tokio runtime.
pub struct LoopSignal {
    fd: AsyncFd<Arc<File>>,
}

impl LoopSignal {
    /// A new signal and the eventfd that fires it; inside a tokio runtime.
    pub fn new() -> io::Result<(LoopSignal, Arc<File>)> {
        let file = Arc::new(super::file::eventfd_nonblocking()?);
        // SAFETY: the AsyncFd owns a reference to the File, so the
        // descriptor stays open, and is never replaced, while registered.
        let fd = unsafe { AsyncFd::register_with_interest(file.clone(), Interest::READABLE) }?;
        Ok((LoopSignal { fd }, file))
    }

    /// Waits until the eventfd was written to, and resets it.
    pub async fn fired(&self) -> io::Result<()> {
        loop {
            let mut ready = self.fd.readable().await?;
            let mut count = [0u8; 8];
            match (&**self.fd.get_ref()).read(&mut count) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => ready.clear_ready(),
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn fires_once_per_burst_of_writes_and_waits_for_the_next() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (signal, fd) = LoopSignal::new().unwrap();
            let writer = fd.clone();
            std::thread::spawn(move || {
                for _ in 0..3 {
                    (&*writer).write_all(&1u64.to_ne_bytes()).unwrap();
                }
            })
            .join()
            .unwrap();
            signal.fired().await.unwrap();
            // The three writes were one count: nothing is left to fire.
            let again = tokio::time::timeout(std::time::Duration::from_millis(50), signal.fired()).await;
            assert!(again.is_err(), "a reset signal fired again");
            (&*fd).write_all(&1u64.to_ne_bytes()).unwrap();
            tokio::time::timeout(std::time::Duration::from_secs(5), signal.fired()).await.unwrap().unwrap();
        });
    }
}
