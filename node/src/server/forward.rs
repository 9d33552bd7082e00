//! Forwarding for plain clients in cluster mode: a command for a slot
//! another node serves is sent to that node's admin port and its reply
//! relayed byte for byte.
//!
//! Each worker keeps one link per (owner, RESP version): a connection with
//! a writer task and a reader task, so that every connection of the worker
//! shares it and requests are pipelined (sent as they come, replies matched
//! in order). A blocking command gets a connection of its own, so that its
//! wait holds up nobody else's commands.
//!
//! With `tls-cluster`, links speak TLS (the configuration is taken when a
//! link opens, so a reloaded certificate serves the next link).

use crate::cluster::link::{LinkTls, server_name};
use crate::protocol::frame::reply_len;
use std::cell::RefCell;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// One request for the owner: the bytes of `replies` commands; the reply
/// relayed is the last one (a transaction's EXEC), or the only one.
pub struct Job {
    pub bytes: Vec<u8>,
    pub replies: usize,
    pub done: Done,
}

/// A request's outcome: its reply, with the request given back (to send it
/// again if the owner answered MOVED while a topology change was under way).
pub struct Relayed {
    pub reply: Vec<u8>,
    pub request: Vec<u8>,
    pub replies: usize,
}

/// A request the owner did not answer (the link failed), given back so it
/// can be sent again once the owner is back (a pod restart).
pub struct Failed {
    pub error: String,
    pub request: Vec<u8>,
    pub replies: usize,
    /// Written to the link before it failed: the owner may have run it.
    pub sent: bool,
}

type Done = oneshot::Sender<Result<Relayed, Failed>>;

/// What the reader expects, in the order requests were written.
struct Expect {
    request: Vec<u8>,
    replies: usize,
    done: Done,
}

/// A link's inbox: its writer task takes jobs from it.
type LinkTx = mpsc::UnboundedSender<Job>;

thread_local! {
    /// This worker's links by owner address: RESP2 and RESP3.
    static LINKS: RefCell<HashMap<Arc<str>, [Option<LinkTx>; 2]>> = RefCell::new(HashMap::new());
}

/// How a link introduces itself to the owner's admin port.
#[derive(Clone, Copy)]
pub struct Hello<'a> {
    pub password: Option<&'a [u8]>,
    pub resp3: bool,
    /// The cluster's TLS for links (None, or holding None: plain TCP).
    pub tls: Option<&'a LinkTls>,
}

/// A `Hello` a task can keep.
#[derive(Clone)]
struct Greeting {
    password: Option<Vec<u8>>,
    resp3: bool,
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl Hello<'_> {
    fn owned(&self) -> Greeting {
        Greeting {
            password: self.password.map(<[u8]>::to_vec),
            resp3: self.resp3,
            tls: self.tls.and_then(LinkTls::get),
        }
    }
}

/// A link's connection: plain TCP, or TLS over it.
enum Conn {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

type ReadHalf = Box<dyn AsyncRead + Unpin + Send>;
type WriteHalf = Box<dyn AsyncWrite + Unpin + Send>;

impl Conn {
    /// Reader and writer for two tasks (a plain socket splits without a lock).
    fn split(self) -> (ReadHalf, WriteHalf) {
        match self {
            Conn::Plain(s) => {
                let (r, w) = s.into_split();
                (Box::new(r), Box::new(w))
            }
            Conn::Tls(s) => {
                let (r, w) = tokio::io::split(s);
                (Box::new(r), Box::new(w))
            }
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// Encodes a command as a RESP array of bulk strings (appended to `out`).
pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    let mut r = crate::protocol::Reply { buf: std::mem::take(out), resp3: false };
    r.array(args.len());
    for a in args {
        r.bulk(a);
    }
    *out = r.buf;
}

/// The owner's reply, once it comes.
pub type Pending = oneshot::Receiver<Result<Relayed, Failed>>;

/// The reply of a request `send` queued.
pub async fn settle(pending: Pending) -> Result<Relayed, Failed> {
    pending
        .await
        .unwrap_or_else(|_| Err(Failed { error: "link closed".into(), request: Vec::new(), replies: 0, sent: true }))
}

impl Job {
    fn fail(self, error: String) {
        let _ = self.done.send(Err(Failed { error, request: self.bytes, replies: self.replies, sent: false }));
    }
}

/// Queues `bytes` for `addr` on this worker's link (call on a worker's
/// runtime); the reply comes through the returned receiver.
pub fn send(addr: &Arc<str>, hello: Hello<'_>, bytes: Vec<u8>, replies: usize, dedicated: bool) -> Pending {
    let (done, rx) = oneshot::channel();
    let job = Job { bytes, replies, done };
    if dedicated {
        tokio::spawn(serve_one(addr.to_string(), hello.owned(), job));
        return rx;
    }
    let failed = LINKS.with_borrow_mut(|links| {
        let slot = match links.get_mut(&**addr) {
            Some(pair) => &mut pair[hello.resp3 as usize],
            None => &mut links.entry(addr.clone()).or_default()[hello.resp3 as usize],
        };
        let tx = slot.get_or_insert_with(|| open_link(addr.to_string(), hello.owned()));
        match tx.send(job) {
            Ok(()) => None,
            // The link died (its owner restarted): a new one.
            Err(mpsc::error::SendError(job)) => {
                let tx = open_link(addr.to_string(), hello.owned());
                let sent = tx.send(job);
                *slot = Some(tx);
                sent.err().map(|e| e.0)
            }
        }
    });
    if let Some(job) = failed {
        job.fail("link closed".into());
    }
    rx
}

fn open_link(addr: String, hello: Greeting) -> LinkTx {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(run_link(addr, hello, rx));
    tx
}

/// Connects, authenticates and switches protocol; the greeting replies are
/// read and checked here.
async fn connect(addr: &str, hello: &Greeting) -> Result<(Conn, Vec<u8>), String> {
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| format!("connecting to {addr} timed out"))?
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let mut stream = match &hello.tls {
        None => Conn::Plain(tcp),
        Some(config) => {
            let handshake = tokio_rustls::TlsConnector::from(config.clone()).connect(server_name(addr)?, tcp);
            let tls = tokio::time::timeout(CONNECT_TIMEOUT, handshake)
                .await
                .map_err(|_| format!("TLS handshake with {addr} timed out"))?
                .map_err(|e| format!("TLS handshake with {addr}: {e}"))?;
            Conn::Tls(Box::new(tls))
        }
    };
    let mut greeting = Vec::new();
    let mut expected = 0;
    if let Some(p) = &hello.password {
        encode(&mut greeting, &[b"AUTH", p]);
        expected += 1;
    }
    if hello.resp3 {
        encode(&mut greeting, &[b"HELLO", b"3"]);
        expected += 1;
    }
    let mut buf = Vec::new();
    if expected > 0 {
        // Flushed: TLS may hold what it encrypted until asked.
        write_flushed(&mut stream, &greeting).await.map_err(|e| format!("{addr}: {e}"))?;
        for _ in 0..expected {
            let reply = read_reply(&mut stream, &mut buf, addr).await?;
            if reply.first() == Some(&b'-') {
                return Err(format!("{addr} refused the link: {}", String::from_utf8_lossy(&reply).trim_end()));
            }
        }
    }
    Ok((stream, buf))
}

async fn write_flushed<W: AsyncWrite + Unpin>(stream: &mut W, bytes: &[u8]) -> std::io::Result<()> {
    stream.write_all(bytes).await?;
    stream.flush().await
}

/// Reads one reply from `stream` (bytes left over stay in `buf`).
async fn read_reply<R: AsyncReadExt + Unpin>(stream: &mut R, buf: &mut Vec<u8>, addr: &str) -> Result<Vec<u8>, String> {
    loop {
        match reply_len(buf) {
            Ok(Some(n)) => return Ok(buf.drain(..n).collect()),
            Ok(None) => {}
            Err(e) => return Err(format!("{addr}: {e}")),
        }
        buf.reserve(16 * 1024);
        match stream.read_buf(buf).await {
            Ok(0) => return Err(format!("{addr} closed the connection")),
            Ok(_) => {}
            Err(e) => return Err(format!("{addr}: {e}")),
        }
    }
}

/// Reads `replies` replies and keeps the last.
async fn read_replies<R: AsyncReadExt + Unpin>(
    stream: &mut R,
    buf: &mut Vec<u8>,
    addr: &str,
    replies: usize,
) -> Result<Vec<u8>, String> {
    let mut last = Vec::new();
    for _ in 0..replies {
        last = read_reply(stream, buf, addr).await?;
    }
    Ok(last)
}

async fn run_link(addr: String, hello: Greeting, mut jobs: mpsc::UnboundedReceiver<Job>) {
    let (stream, mut buf) = match connect(&addr, &hello).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("forwarding link: {e}");
            // Everything queued meanwhile fails; the next command opens a new link.
            jobs.close();
            while let Some(job) = jobs.recv().await {
                job.fail(e.clone());
            }
            return;
        }
    };
    let (mut reader, mut writer) = stream.split();
    let (expect_tx, mut expect_rx) = mpsc::unbounded_channel::<Expect>();
    let reader_addr = addr.clone();
    let read_side = tokio::spawn(async move {
        while let Some(e) = expect_rx.recv().await {
            match read_replies(&mut reader, &mut buf, &reader_addr, e.replies).await {
                Ok(reply) => {
                    let _ = e.done.send(Ok(Relayed { reply, request: e.request, replies: e.replies }));
                }
                Err(err) => {
                    let failed = |e: Expect| {
                        let failed = Failed { error: err.clone(), request: e.request, replies: e.replies, sent: true };
                        let _ = e.done.send(Err(failed));
                    };
                    failed(e);
                    expect_rx.close();
                    while let Some(e) = expect_rx.recv().await {
                        failed(e);
                    }
                    return;
                }
            }
        }
    });
    let mut out = Vec::new();
    while let Some(job) = jobs.recv().await {
        // Everything queued goes out in one write.
        out.clear();
        let mut batch = vec![job];
        while let Ok(more) = jobs.try_recv() {
            batch.push(more);
        }
        let mut gone = false;
        for job in batch {
            if gone {
                job.fail(format!("link to {addr} closed"));
                continue;
            }
            out.extend_from_slice(&job.bytes);
            // The reader stopped (the owner closed the link): this request
            // and the rest go back to be sent again.
            if let Err(mpsc::error::SendError(e)) =
                expect_tx.send(Expect { request: job.bytes, replies: job.replies, done: job.done })
            {
                let _ = e.done.send(Err(Failed {
                    error: format!("link to {addr} closed"),
                    request: e.request,
                    replies: e.replies,
                    sent: false,
                }));
                gone = true;
            }
        }
        if gone {
            break;
        }
        if let Err(e) = write_flushed(&mut writer, &out).await {
            tracing::warn!("forwarding link to {addr}: {e}");
            break;
        }
    }
    // Replies still owed are read (or failed) by the reader.
    drop(expect_tx);
    jobs.close();
    while let Ok(job) = jobs.try_recv() {
        job.fail(format!("link to {addr} closed"));
    }
    let _ = read_side.await;
}

/// A blocking command on a connection of its own, closed after the reply.
async fn serve_one(addr: String, hello: Greeting, job: Job) {
    let Job { bytes, replies, mut done } = job;
    let work = async {
        let (mut stream, mut buf) = connect(&addr, &hello).await?;
        write_flushed(&mut stream, &bytes).await.map_err(|e| format!("{addr}: {e}"))?;
        read_replies(&mut stream, &mut buf, &addr, replies).await
    };
    tokio::select! {
        result = work => {
            let _ = done.send(match result {
                Ok(reply) => Ok(Relayed { reply, request: bytes, replies }),
                Err(error) => Err(Failed { error, request: bytes, replies, sent: true }),
            });
        }
        // The client left: closing this connection ends the wait there too.
        _ = done.closed() => {}
    }
}
