//! A blocking link to another node's admin port, for a migration's thread:
//! commands go out pipelined in batches, replies come back in order. (The
//! workers' forwarding links are async, in `server::forward`; a migration
//! runs on a thread of its own and waits on its peer, so it blocks.)
//!
//! With `tls-cluster`, links speak TLS: [`LinkTls`] holds the client side's
//! configuration, which the server swaps when its certificates reload.

use crate::protocol::frame::reply_len;
use parking_lot::RwLock;
use rustls::pki_types::ServerName;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// The TLS configuration of links to other nodes' admin ports: None
/// without `tls-cluster`. Read once per link opened, never per command.
#[derive(Default)]
pub struct LinkTls(RwLock<Option<Arc<rustls::ClientConfig>>>);

impl LinkTls {
    pub fn get(&self) -> Option<Arc<rustls::ClientConfig>> {
        self.0.read().clone()
    }

    pub fn set(&self, config: Arc<rustls::ClientConfig>) {
        *self.0.write() = Some(config);
    }
}

/// The name a TLS link gives for `addr` (`host:port`, `[v6]:port`): what
/// SNI carries. (Peers are checked against the CA, not by name, as Redis's
/// cluster bus does: topologies name nodes by IP as often as by host.)
pub fn server_name(addr: &str) -> Result<ServerName<'static>, String> {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).map_err(|e| format!("{addr}: not a host name for TLS: {e}"))
}

/// A link's connection: plain TCP, or TLS over it.
enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// One reply: Ok(the raw RESP bytes) or Err(an error reply's text).
pub type Reply = Result<Vec<u8>, String>;

pub struct Link {
    addr: String,
    stream: Stream,
    buf: Vec<u8>,
    out: Vec<u8>,
}

impl Link {
    /// Connects to `addr` (`host:port`), over TLS when `tls` is given, and
    /// authenticates with the admin password when there is one; every later
    /// read waits `timeout` at most.
    pub fn connect(
        addr: &str,
        password: Option<&[u8]>,
        tls: Option<Arc<rustls::ClientConfig>>,
        timeout: Duration,
    ) -> Result<Link, String> {
        use std::net::ToSocketAddrs;
        let sock = addr
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {addr}: {e}"))?
            .next()
            .ok_or_else(|| format!("cannot resolve {addr}"))?;
        let stream =
            TcpStream::connect_timeout(&sock, timeout).map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        let _ = stream.set_nodelay(true);
        stream.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
        stream.set_write_timeout(Some(timeout)).map_err(|e| e.to_string())?;
        let stream = match tls {
            None => Stream::Plain(stream),
            Some(config) => {
                let session = rustls::ClientConnection::new(config, server_name(addr)?)
                    .map_err(|e| format!("{addr}: cannot start TLS: {e}"))?;
                let mut tls = rustls::StreamOwned::new(session, stream);
                // The handshake now, so a refused certificate reads as such.
                while tls.conn.is_handshaking() {
                    tls.conn.complete_io(&mut tls.sock).map_err(|e| format!("{addr}: TLS handshake: {e}"))?;
                }
                Stream::Tls(Box::new(tls))
            }
        };
        let mut link = Link { addr: addr.to_string(), stream, buf: Vec::new(), out: Vec::new() };
        if let Some(p) = password {
            link.call(&[b"AUTH", p])?.map_err(|e| format!("{addr} refused the link: {e}"))?;
        }
        Ok(link)
    }

    /// Queues one command (sent by `flush`).
    pub fn queue(&mut self, args: &[&[u8]]) {
        self.out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            self.out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            self.out.extend_from_slice(a);
            self.out.extend_from_slice(b"\r\n");
        }
    }

    pub fn queued_bytes(&self) -> usize {
        self.out.len()
    }

    /// What its buffers hold allocated (they keep their capacity between
    /// batches).
    pub fn buffer_capacity(&self) -> usize {
        self.out.capacity() + self.buf.capacity()
    }

    /// Sends what is queued.
    pub fn flush(&mut self) -> Result<(), String> {
        // (A TLS stream may hold records back until flushed.)
        let r = self.stream.write_all(&self.out).and_then(|()| self.stream.flush());
        let r = r.map_err(|e| format!("{}: {e}", self.addr));
        self.out.clear();
        r
    }

    /// The next reply. The outer error: the link failed (closed, timed out,
    /// not RESP); the inner one: the peer answered with an error.
    pub fn read(&mut self) -> Result<Reply, String> {
        loop {
            match reply_len(&self.buf) {
                Ok(Some(n)) => {
                    let raw: Vec<u8> = self.buf.drain(..n).collect();
                    return Ok(match raw.first() {
                        Some(b'-') => Err(String::from_utf8_lossy(&raw[1..]).trim_end().to_string()),
                        _ => Ok(raw),
                    });
                }
                Ok(None) => {}
                Err(e) => return Err(format!("{}: {e}", self.addr)),
            }
            let mut chunk = [0u8; 16 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(format!("{} closed the link", self.addr)),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("{}: {e}", self.addr)),
            }
        }
    }

    /// Sends one command and waits for its reply.
    pub fn call(&mut self, args: &[&[u8]]) -> Result<Reply, String> {
        self.queue(args);
        self.flush()?;
        self.read()
    }
}

/// A bulk or simple-string reply's text (`+OK` → "OK", `$2\r\nhi` → "hi").
pub fn text(raw: &[u8]) -> String {
    let s = String::from_utf8_lossy(raw);
    match raw.first() {
        Some(b'+') => s[1..].trim_end().to_string(),
        Some(b'$') => s.split_once("\r\n").map(|(_, rest)| rest.trim_end().to_string()).unwrap_or_default(),
        _ => s.trim_end().to_string(),
    }
}

/// The bulk strings of a flat array reply (`*N` of `$` items).
pub fn bulks(raw: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = raw;
    // Skip the array header, then take each `$len\r\n<bytes>\r\n`.
    if let Some(p) = rest.windows(2).position(|w| w == b"\r\n") {
        rest = &rest[p + 2..];
    }
    while let Some(p) = rest.windows(2).position(|w| w == b"\r\n") {
        let head = &rest[..p];
        let len: usize = std::str::from_utf8(&head[1..]).ok().and_then(|n| n.parse().ok()).unwrap_or(0);
        let start = p + 2;
        if rest.len() < start + len + 2 {
            break;
        }
        out.push(String::from_utf8_lossy(&rest[start..start + len]).into_owned());
        rest = &rest[start + len + 2..];
    }
    out
}
