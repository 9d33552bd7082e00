//! A client socket (TCP or Unix) registered with the worker's event loop for
//! read readiness only.
//!
//! Why not tokio's TcpStream/UnixStream: they register every socket for
//! write readiness too, so each time a client reads a reply, the kernel
//! walks our epoll callback and may wake the worker for an event nobody
//! waits for. Measured with `perf record` on redis-benchmark, that callback
//! (`unix_write_space`) cost the *client* about 11 % more CPU against us
//! than against Redis, which watches writability only while a reply is
//! stuck. We do the same: replies are written directly, and only a write
//! that would block registers write interest until the socket drains.
//!
//! A socket from `tls-port` carries a rustls session: reads decrypt, writes
//! encrypt, on the connection's own worker. rustls buffers both ways, so a
//! read or write cancelled by `select!` loses nothing: what it had not sent
//! goes out with the next read or write.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

pub struct ClientSocket {
    /// None only after a failed re-registration (the connection is then done).
    fd: Option<AsyncFd<OwnedFd>>,
    tls: Option<Box<rustls::ServerConnection>>,
    /// Close with a reset, not an orderly shutdown: a peer that spoke no
    /// TLS at all on a TLS port (as Redis, whose OpenSSL resets it).
    reset_on_close: bool,
}

/// A TLS session that failed (a bad handshake, a corrupt record): the
/// error's kind is InvalidData, its inner error this.
#[derive(Debug)]
pub struct TlsFailure {
    pub during_handshake: bool,
    pub error: rustls::Error,
}

impl std::fmt::Display for TlsFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let when = if self.during_handshake { "TLS handshake failed" } else { "TLS error" };
        write!(f, "{when}: {}", self.error)
    }
}

impl std::error::Error for TlsFailure {}

/// The raw socket as rustls's reader and writer.
struct Raw(RawFd);

impl io::Read for Raw {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: reading into a valid, writable slice from a socket we own.
        let n = unsafe { libc::read(self.0, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
    }
}

impl io::Write for Raw {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        raw_write(self.0, data)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Registers `fd` with the current runtime's event loop.
fn register(fd: OwnedFd, interest: Interest) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: an OwnedFd is a valid, open descriptor that keeps returning the
    // same number from as_raw_fd until it is dropped or taken back out.
    unsafe { AsyncFd::register_with_interest(fd, interest) }.map_err(io::Error::from)
}

fn lost() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "socket no longer registered")
}

impl ClientSocket {
    /// Registers a non-blocking socket with the current worker's event loop.
    /// `tls`: the session of a `tls-port` client (its handshake happens
    /// as the first reads and writes go).
    pub fn new(fd: OwnedFd, tls: Option<Box<rustls::ServerConnection>>) -> io::Result<Self> {
        Ok(ClientSocket { fd: Some(register(fd, Interest::READABLE)?), tls, reset_on_close: false })
    }

    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    fn registered(&self) -> io::Result<&AsyncFd<OwnedFd>> {
        self.fd.as_ref().ok_or_else(lost)
    }

    /// Waits for input, lets `make_room` give `buf` spare capacity (so a
    /// connection waiting for input needs no buffer), then reads what is
    /// available into it; `Ok(0)` at end of stream.
    pub async fn read_buf(&mut self, buf: &mut Vec<u8>, make_room: impl Fn(&mut Vec<u8>)) -> io::Result<usize> {
        if self.tls.is_some() {
            return self.read_tls(buf, make_room).await;
        }
        let afd = self.registered()?;
        loop {
            let mut guard = afd.readable().await?;
            make_room(buf);
            if buf.capacity() == buf.len() {
                buf.reserve(4096);
            }
            let spare = buf.spare_capacity_mut();
            let want = spare.len();
            // SAFETY: reading into the vector's spare capacity, within its length.
            let n = unsafe { libc::read(afd.as_raw_fd(), spare.as_mut_ptr().cast(), want) };
            if n >= 0 {
                let n = n as usize;
                // SAFETY: the kernel initialised the first `n` spare bytes.
                unsafe { buf.set_len(buf.len() + n) };
                if n < want {
                    // Drained: the next edge says when more arrives, which
                    // saves a read that would only say EAGAIN.
                    guard.clear_ready();
                }
                return Ok(n);
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::WouldBlock => guard.clear_ready(),
                io::ErrorKind::Interrupted => {}
                _ => return Err(err),
            }
        }
    }

    /// Writes all of `data`: directly while the socket takes it, waiting
    /// for write readiness only when it is full. `data` is advanced as it
    /// goes, so a caller that stops waiting knows what is left.
    pub async fn write_all(&mut self, data: &mut &[u8]) -> io::Result<()> {
        if self.tls.is_some() {
            return self.write_tls(data).await;
        }
        let fd = self.registered()?.as_raw_fd();
        while !data.is_empty() {
            match raw_write(fd, data) {
                Ok(n) => *data = &data[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return self.write_when_writable(data).await,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// A slow reader: watch writability until the rest is written, then go
    /// back to read interest only. Re-registering costs four epoll_ctl
    /// calls, paid only under back-pressure.
    /// Cancelling it (CLIENT KILL while stuck) leaves write interest on,
    /// which costs nothing but a spurious wake-up or two.
    async fn write_when_writable(&mut self, data: &mut &[u8]) -> io::Result<()> {
        self.reregister(Interest::READABLE | Interest::WRITABLE)?;
        let result = async {
            let afd = self.registered()?;
            while !data.is_empty() {
                let mut guard = afd.writable().await?;
                match guard.try_io(|afd| raw_write(afd.as_raw_fd(), data)) {
                    Ok(Ok(n)) => *data = &data[n..],
                    Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                    Ok(Err(e)) => return Err(e),
                    // Readiness was stale and is now cleared: wait again.
                    Err(_would_block) => {}
                }
            }
            Ok(())
        }
        .await;
        self.reregister(Interest::READABLE)?;
        result
    }

    /// Registers again with other interests. Readiness present at that
    /// moment is reported at once by the new registration, so nothing is missed.
    fn reregister(&mut self, interest: Interest) -> io::Result<()> {
        let fd = self.fd.take().ok_or_else(lost)?.into_inner();
        self.fd = Some(register(fd, interest)?);
        Ok(())
    }

    /// TLS: decrypts what has arrived into `buf`, reading ciphertext (and
    /// answering the handshake) until some plaintext or the end comes.
    async fn read_tls(&mut self, buf: &mut Vec<u8>, make_room: impl Fn(&mut Vec<u8>)) -> io::Result<usize> {
        loop {
            // Handshake messages, alerts and session tickets go out first.
            self.send_tls().await?;
            let tls = self.tls.as_mut().expect("a TLS socket");
            let during_handshake = tls.is_handshaking();
            let state = match tls.process_new_packets() {
                Ok(state) => state,
                Err(error) => {
                    // Bytes that are no TLS record at all (plain text, HTTP): reset
                    // the connection, as Redis does; a TLS peer is told why (the
                    // alert rustls queued), best effort.
                    use rustls::InvalidMessage::{InvalidContentType, UnknownProtocolVersion};
                    let not_tls =
                        matches!(error, rustls::Error::InvalidMessage(InvalidContentType | UnknownProtocolVersion));
                    if during_handshake && not_tls {
                        self.reset_on_close = true;
                    } else if let Some(afd) = &self.fd {
                        let _ = tls.write_tls(&mut Raw(afd.as_raw_fd()));
                    }
                    return Err(io::Error::new(io::ErrorKind::InvalidData, TlsFailure { during_handshake, error }));
                }
            };
            let available = state.plaintext_bytes_to_read();
            if available > 0 {
                make_room(buf);
                let start = buf.len();
                let want = available.min((buf.capacity() - start).max(4096));
                buf.resize(start + want, 0);
                let n = match io::Read::read(&mut tls.reader(), &mut buf[start..]) {
                    Ok(n) => n,
                    Err(e) => {
                        buf.truncate(start);
                        return Err(e);
                    }
                };
                buf.truncate(start + n);
                return Ok(n);
            }
            if state.peer_has_closed() {
                return Ok(0);
            }
            let afd = self.fd.as_ref().ok_or_else(lost)?;
            let mut guard = afd.readable().await?;
            match tls.read_tls(&mut Raw(afd.as_raw_fd())) {
                Ok(0) => return Ok(0),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => guard.clear_ready(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// TLS: encrypts all of `data` (rustls takes it in pieces up to its
    /// buffer limit) and sends the records.
    async fn write_tls(&mut self, data: &mut &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let tls = self.tls.as_mut().expect("a TLS socket");
            let n = io::Write::write(&mut tls.writer(), data)?;
            if n == 0 && !tls.wants_write() {
                // rustls's buffer is full with nothing it can send (before the
                // handshake ends): waiting would spin.
                return Err(io::Error::new(io::ErrorKind::WouldBlock, "TLS output buffer full before the handshake"));
            }
            *data = &data[n..];
            self.send_tls().await?;
        }
        self.send_tls().await
    }

    /// TLS: sends the records rustls has ready, waiting for room when the
    /// socket is full.
    async fn send_tls(&mut self) -> io::Result<()> {
        loop {
            let fd = self.registered()?.as_raw_fd();
            let tls = self.tls.as_mut().expect("a TLS socket");
            if !tls.wants_write() {
                return Ok(());
            }
            match tls.write_tls(&mut Raw(fd)) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait_writable().await?,
                Err(e) => return Err(e),
            }
        }
    }

    /// Waits until the socket takes more (watching writability meanwhile).
    async fn wait_writable(&mut self) -> io::Result<()> {
        self.reregister(Interest::READABLE | Interest::WRITABLE)?;
        let result = async {
            let mut guard = self.registered()?.writable().await?;
            guard.clear_ready();
            Ok(())
        }
        .await;
        self.reregister(Interest::READABLE)?;
        result
    }

    /// Half-closes the write side, so the peer sees the end of our replies
    /// (after a TLS close_notify, sent if the socket takes it at once).
    pub fn shutdown_write(&mut self) {
        if self.reset_on_close {
            if let Some(afd) = &self.fd {
                let linger = libc::linger { l_onoff: 1, l_linger: 0 };
                // SAFETY: setsockopt on a socket we own with a correctly sized linger struct;
                // closing it then sends a reset instead of a FIN.
                unsafe {
                    libc::setsockopt(
                        afd.as_raw_fd(),
                        libc::SOL_SOCKET,
                        libc::SO_LINGER,
                        &linger as *const libc::linger as *const libc::c_void,
                        std::mem::size_of::<libc::linger>() as libc::socklen_t,
                    )
                };
            }
            return;
        }
        if let (Some(tls), Some(afd)) = (self.tls.as_mut(), &self.fd) {
            tls.send_close_notify();
            let _ = tls.write_tls(&mut Raw(afd.as_raw_fd()));
        }
        if let Some(afd) = &self.fd {
            // SAFETY: shutdown on a socket fd we own; failure is harmless here.
            unsafe { libc::shutdown(afd.as_raw_fd(), libc::SHUT_WR) };
        }
    }

    /// Takes the socket (and its TLS session) out of this worker's event
    /// loop, to move it to another.
    pub fn detach(mut self) -> io::Result<(OwnedFd, Option<Box<rustls::ServerConnection>>)> {
        Ok((self.fd.take().ok_or_else(lost)?.into_inner(), self.tls.take()))
    }
}

fn raw_write(fd: RawFd, data: &[u8]) -> io::Result<usize> {
    // send, not write: MSG_NOSIGNAL turns a vanished peer into EPIPE, never SIGPIPE.
    // SAFETY: sending from a valid slice on a socket we own.
    let n = unsafe { libc::send(fd, data.as_ptr().cast(), data.len(), libc::MSG_NOSIGNAL) };
    if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
}

/// Turns on TCP keepalive probes every `secs` seconds (0 = leave off).
pub fn set_keepalive(s: &std::net::TcpStream, secs: u64) {
    if secs == 0 {
        return;
    }
    let fd = s.as_raw_fd();
    let on: libc::c_int = 1;
    let idle = secs.min(i32::MAX as u64) as libc::c_int;
    let intvl = (idle / 3).max(1);
    // SAFETY: setsockopt on a valid socket fd with correctly sized int options.
    unsafe {
        let sz = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, &on as *const _ as *const _, sz);
        libc::setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, &idle as *const _ as *const _, sz);
        libc::setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, &intvl as *const _ as *const _, sz);
    }
}
