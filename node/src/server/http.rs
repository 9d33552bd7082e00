//! A minimal HTTP/1.1 endpoint: `/metrics` (OpenMetrics text), `/healthz`
//! (liveness) and `/readyz` (readiness).
//!
//! Scrapers and probes send one small GET per connection, so this is a
//! one-request-per-connection server (`Connection: close`) on the acceptor's
//! runtime rather than a full HTTP stack: no extra dependencies, and every
//! connection is bounded in time, header size and number. Idle or trickling
//! connections cannot keep probes out: at the limit, a new connection takes
//! the place of the oldest one still waiting for its request.

use super::{AcceptErrors, Shared};
use crate::metrics::exposition;
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tracing::debug;

/// How long a client may take to send its request head: probes and
/// scrapers send it at once, and a slow one holds a connection no longer.
const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a client may take to accept our response.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest request head (request line and headers) accepted.
const MAX_HEAD: usize = 8 * 1024;
/// Connections open at once, which bounds the endpoint's descriptors and
/// memory (the open files budget reserves them).
pub(super) const MAX_CONNECTIONS: usize = 64;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

/// Binds `metrics_bind:metrics_port`, serves on the current runtime until
/// shutdown, and returns the bound address.
pub async fn start(shared: Arc<Shared>) -> std::io::Result<SocketAddr> {
    let sc = &shared.config.startup;
    // Accept "[::1]" as well as "::1".
    let host = sc.metrics_bind.trim_start_matches('[').trim_end_matches(']');
    let listener = TcpListener::bind((host, sc.metrics_port)).await?;
    let addr = listener.local_addr()?;
    let source = shared.clone();
    let registry = Arc::new(exposition::registry(Box::new(move || source.snapshot_with_keys())));
    tokio::spawn(serve(listener, shared, registry));
    Ok(addr)
}

/// The endpoint's connections: how many are open, and which of them still
/// wait for their request, oldest first (each with the means to close it).
#[derive(Default)]
struct Slots {
    open: usize,
    next_id: u64,
    waiting: BTreeMap<u64, oneshot::Sender<()>>,
}

/// A connection's place among the [`Slots`]; gives it back on drop.
struct Slot {
    id: u64,
    slots: Arc<Mutex<Slots>>,
    /// Resolves when a newer connection took its place.
    evicted: oneshot::Receiver<()>,
    /// Still counted once its request arrived (not evicted before).
    serving: bool,
}

impl Slot {
    /// A place for a new connection, closing the oldest waiting one if all
    /// are taken; None when every connection is past its request.
    fn admit(slots: &Arc<Mutex<Slots>>) -> Option<Slot> {
        let mut s = slots.lock();
        if s.open >= MAX_CONNECTIONS {
            // Dropping its sender wakes and closes it.
            s.waiting.pop_first()?;
            s.open -= 1;
        }
        s.open += 1;
        let id = s.next_id;
        s.next_id += 1;
        let (tx, evicted) = oneshot::channel();
        s.waiting.insert(id, tx);
        Some(Slot { id, slots: slots.clone(), evicted, serving: false })
    }

    /// The request arrived: no longer evictable.
    fn requested(&mut self) {
        self.serving = self.slots.lock().waiting.remove(&self.id).is_some();
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut s = self.slots.lock();
        // An evicted connection was uncounted when it was evicted.
        if s.waiting.remove(&self.id).is_some() || self.serving {
            s.open -= 1;
        }
    }
}

async fn serve(listener: TcpListener, shared: Arc<Shared>, registry: Arc<Registry>) {
    let mut shutdown = shared.shutdown.subscribe();
    let slots = Arc::new(Mutex::new(Slots::default()));
    let mut accept_errors = AcceptErrors::default();
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, peer)) => {
                    let Some(slot) = Slot::admit(&slots) else {
                        debug!(%peer, "metrics endpoint busy; closing connection");
                        continue;
                    };
                    let (shared, registry) = (shared.clone(), registry.clone());
                    tokio::spawn(async move { handle(stream, slot, &shared, &registry).await });
                    // Let the new connection read its request before more are
                    // accepted: a burst of connects must not evict it first.
                    tokio::task::yield_now().await;
                }
                Err(e) => accept_errors.failed("metrics endpoint", &e).await,
            },
            // Also fires if shutdown was requested before we subscribed, or
            // the sender is gone.
            _ = async { drop(shutdown.wait_for(|&stop| stop).await) } => break,
        }
    }
    debug!("metrics endpoint stopped");
}

/// Serves one request and closes the connection.
async fn handle(mut stream: TcpStream, mut slot: Slot, shared: &Shared, registry: &Registry) {
    let head = tokio::select! {
        head = tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream)) => head,
        _ = &mut slot.evicted => {
            debug!("metrics connection closed to make room for a newer one");
            return;
        }
    };
    slot.requested();
    let response = match head {
        Ok(Ok(Some(head))) => match parse_request(&head) {
            Ok(req) => route(&req, shared, registry),
            Err(status) => Response::error(status),
        },
        // Closed before sending anything (e.g. a TCP health check).
        Ok(Ok(None)) => return,
        Ok(Err(HeadError::TooLarge)) => Response::error(Status::HeaderTooLarge),
        Ok(Err(HeadError::Truncated)) => Response::error(Status::BadRequest),
        Ok(Err(HeadError::Io)) => return,
        Err(_) => Response::error(Status::Timeout),
    };
    let bytes = response.to_bytes();
    let write = async {
        stream.write_all(&bytes).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(WRITE_TIMEOUT, write).await;
}

enum HeadError {
    /// The head exceeds `MAX_HEAD`.
    TooLarge,
    /// The client closed the connection mid-head.
    Truncated,
    Io,
}

/// Reads up to the blank line ending the head; `None` if the client closed
/// without sending a byte. Bytes after the head (a body) are ignored.
async fn read_head(stream: &mut TcpStream) -> Result<Option<Vec<u8>>, HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await.map_err(|_| HeadError::Io)?;
        if n == 0 {
            return if buf.is_empty() { Ok(None) } else { Err(HeadError::Truncated) };
        }
        // Rescan a few bytes back: the terminator may straddle two reads.
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        match head_end(&buf[from..]) {
            Some(end) if from + end <= MAX_HEAD => {
                buf.truncate(from + end);
                return Ok(Some(buf));
            }
            Some(_) => return Err(HeadError::TooLarge),
            None => {}
        }
        if buf.len() >= MAX_HEAD {
            return Err(HeadError::TooLarge);
        }
    }
}

/// Length of the head including its terminating blank line, if complete.
/// Accepts bare `\n` line endings too, as lenient HTTP servers do.
fn head_end(buf: &[u8]) -> Option<usize> {
    (0..buf.len()).find_map(|i| {
        let rest = &buf[i..];
        if rest.starts_with(b"\r\n\r\n") {
            Some(i + 4)
        } else if rest.starts_with(b"\n\n") {
            Some(i + 2)
        } else if rest.starts_with(b"\n\r\n") {
            Some(i + 3)
        } else {
            None
        }
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Ok,
    BadRequest,
    NotFound,
    MethodNotAllowed,
    Timeout,
    HeaderTooLarge,
    Internal,
    Unavailable,
    VersionNotSupported,
}

impl Status {
    fn code_and_reason(self) -> (u16, &'static str) {
        match self {
            Status::Ok => (200, "OK"),
            Status::BadRequest => (400, "Bad Request"),
            Status::NotFound => (404, "Not Found"),
            Status::MethodNotAllowed => (405, "Method Not Allowed"),
            Status::Timeout => (408, "Request Timeout"),
            Status::HeaderTooLarge => (431, "Request Header Fields Too Large"),
            Status::Internal => (500, "Internal Server Error"),
            Status::Unavailable => (503, "Service Unavailable"),
            Status::VersionNotSupported => (505, "HTTP Version Not Supported"),
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
struct Request<'a> {
    head_only: bool,
    /// The path without its query string.
    path: &'a str,
}

/// Parses the request line; headers are not needed and are not interpreted.
fn parse_request(head: &[u8]) -> Result<Request<'_>, Status> {
    let line_end = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
    let line = std::str::from_utf8(&head[..line_end]).map_err(|_| Status::BadRequest)?;
    let line = line.strip_suffix('\r').unwrap_or(line);
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Status::BadRequest);
    };
    let is_token =
        |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !is_token(method) || target.is_empty() || !version.starts_with("HTTP/") {
        return Err(Status::BadRequest);
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(Status::VersionNotSupported);
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Err(Status::MethodNotAllowed),
    };
    let path = target.split_once('?').map_or(target, |(p, _)| p);
    Ok(Request { head_only, path })
}

/// The durability log's figures, before the exposition's `# EOF`.
fn durability_metrics(shared: &Shared, body: &mut String) {
    use std::fmt::Write;
    let Some(p) = &shared.persist else { return };
    let Some(at) = body.rfind("# EOF") else { return };
    body.truncate(at);
    let r = p.recovery.lock().clone();
    let engine = p.engine.lock().split(':').next().unwrap_or("").to_string();
    let mut g = |name: &str, kind: &str, help: &str, v: f64| {
        let sample = if kind == "counter" { format!("{name}_total") } else { name.to_string() };
        let _ = write!(body, "# HELP {name} {help}\n# TYPE {name} {kind}\n{sample} {v}\n");
    };
    g("strata_loading", "gauge", "1 while the durability log is replayed.", p.is_loading() as u8 as f64);
    g("strata_recovery_duration_seconds", "gauge", "Time the last replay of the log took.", r.duration_ms as f64 / 1e3);
    g("strata_recovery_records", "gauge", "Records replayed at start-up.", r.records as f64);
    g("strata_recovery_skipped_runs", "gauge", "Runs of bad records skipped at start-up.", r.bad_runs as f64);
    g("strata_recovery_skipped_bytes", "gauge", "Bytes of bad records skipped at start-up.", r.skipped_bytes as f64);
    g("strata_recovery_torn_bytes", "gauge", "Bytes of torn tail dropped at start-up.", r.torn_bytes as f64);
    g("strata_recovery_bad_values", "gauge", "Records whose value could not be decoded.", r.bad_values as f64);
    g("strata_log_compactions", "counter", "Log compactions.", p.compactions.load(Relaxed) as f64);
    if let Some([durable, appended, flushes, records, max_batch, us_total, _, segments]) = p.figures() {
        g("strata_log_segments", "gauge", "Segments of the log in use.", segments as f64);
        g(
            "strata_log_bytes",
            "gauge",
            "Disk the log's segments in use hold (each is preallocated whole).",
            (segments * p.segment_size()) as f64,
        );
        g(
            "strata_durability_lag_records",
            "gauge",
            "Records appended, not yet durable.",
            (appended - durable.min(appended)) as f64,
        );
        g("strata_log_fsyncs", "counter", "Flushes (write + fdatasync) of the log.", flushes as f64);
        g("strata_log_fsync_records", "counter", "Records made durable.", records as f64);
        g("strata_log_fsync_seconds", "counter", "Time spent in flushes.", us_total as f64 / 1e6);
        g("strata_group_commit_max_records", "gauge", "The most records one flush made durable.", max_batch as f64);
    }
    let _ = write!(
        body,
        "# HELP strata_io_engine The log's I/O engine.\n# TYPE strata_io_engine info\nstrata_io_engine_info{{engine=\"{engine}\"}} 1\n"
    );
    body.push_str("# EOF\n");
}

fn route(req: &Request<'_>, shared: &Shared, registry: &Registry) -> Response {
    let mut resp = match req.path {
        "/metrics" => {
            let mut body = String::with_capacity(16 * 1024);
            match prometheus_client::encoding::text::encode(&mut body, registry) {
                Ok(()) => {
                    durability_metrics(shared, &mut body);
                    Response::new(Status::Ok, OPENMETRICS, body)
                }
                Err(_) => Response::error(Status::Internal),
            }
        }
        "/healthz" => Response::new(Status::Ok, TEXT, "ok\n".into()),
        "/readyz" => {
            if shared.ready.load(Relaxed) && !shared.shutting_down.load(Relaxed) {
                Response::new(Status::Ok, TEXT, "ready\n".into())
            } else {
                Response::new(Status::Unavailable, TEXT, "not ready\n".into())
            }
        }
        _ => Response::error(Status::NotFound),
    };
    resp.head_only = req.head_only;
    resp
}

struct Response {
    status: Status,
    content_type: &'static str,
    body: String,
    /// HEAD: headers (with the GET's Content-Length) but no body.
    head_only: bool,
}

impl Response {
    fn new(status: Status, content_type: &'static str, body: String) -> Self {
        Response { status, content_type, body, head_only: false }
    }

    fn error(status: Status) -> Self {
        let (code, reason) = status.code_and_reason();
        Response::new(status, TEXT, format!("{code} {reason}\n"))
    }

    fn to_bytes(&self) -> Vec<u8> {
        let (code, reason) = self.status.code_and_reason();
        let allow = if self.status == Status::MethodNotAllowed { "Allow: GET, HEAD\r\n" } else { "" };
        let head = format!(
            "HTTP/1.1 {code} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n\
             {allow}Connection: close\r\n\r\n",
            self.content_type,
            self.body.len()
        );
        let mut out = head.into_bytes();
        if !self.head_only {
            out.extend_from_slice(self.body.as_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_connection_takes_the_place_of_the_oldest_waiting_one() {
        let slots = Arc::new(Mutex::new(Slots::default()));
        let mut held: Vec<Slot> = (0..MAX_CONNECTIONS).map(|_| Slot::admit(&slots).unwrap()).collect();
        held[1].requested();
        let newest = Slot::admit(&slots).unwrap();
        assert!(held[0].evicted.try_recv().is_err_and(|e| e == oneshot::error::TryRecvError::Closed));
        assert!(held[2].evicted.try_recv().is_err_and(|e| e == oneshot::error::TryRecvError::Empty));
        // Connections past their request are never evicted: the oldest
        // waiting one (held[2]) goes next.
        let next = Slot::admit(&slots).unwrap();
        assert!(held[2].evicted.try_recv().is_err_and(|e| e == oneshot::error::TryRecvError::Closed));
        assert_eq!(slots.lock().open, MAX_CONNECTIONS);
        drop(newest);
        drop(next);
        held.drain(..3);
        assert_eq!(slots.lock().open, MAX_CONNECTIONS - 3);
        for s in &mut held {
            s.requested();
        }
        assert_eq!(slots.lock().waiting.len(), 0);
        let extra: Vec<Slot> = (0..3).map(|_| Slot::admit(&slots).unwrap()).collect();
        for mut s in extra {
            s.requested();
            held.push(s);
        }
        assert!(Slot::admit(&slots).is_none(), "all past their request: the newcomer is refused");
        held.clear();
        assert_eq!(slots.lock().open, 0);
    }

    #[test]
    fn head_end_finds_the_blank_line() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nbody"), Some(27));
        assert_eq!(head_end(b"GET / HTTP/1.1\nHost: x\n\n"), Some(24));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: x\r\n"), None);
        assert_eq!(head_end(b""), None);
    }

    #[test]
    fn parses_get_and_head() {
        assert_eq!(parse_request(b"GET /metrics HTTP/1.1\r\n\r\n"), Ok(Request { head_only: false, path: "/metrics" }));
        assert_eq!(
            parse_request(b"HEAD /readyz?x=1 HTTP/1.0\r\n\r\n"),
            Ok(Request { head_only: true, path: "/readyz" })
        );
    }

    #[test]
    fn rejects_bad_requests() {
        assert_eq!(parse_request(b"POST /metrics HTTP/1.1\r\n\r\n"), Err(Status::MethodNotAllowed));
        assert_eq!(parse_request(b"get /metrics HTTP/1.1\r\n\r\n"), Err(Status::MethodNotAllowed));
        assert_eq!(parse_request(b"GET /metrics HTTP/2.0\r\n\r\n"), Err(Status::VersionNotSupported));
        for bad in [
            &b"GET /metrics\r\n\r\n"[..],
            b"GET  /metrics HTTP/1.1\r\n\r\n",
            b"GET /metrics HTTP/1.1 extra\r\n\r\n",
            b"GET /metrics FTP/1.1\r\n\r\n",
            b"G(T /metrics HTTP/1.1\r\n\r\n",
            b"\xff\xfe /metrics HTTP/1.1\r\n\r\n",
            b"\r\n\r\n",
            b"",
        ] {
            assert_eq!(parse_request(bad), Err(Status::BadRequest), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn head_response_keeps_length_but_drops_body() {
        let mut r = Response::new(Status::Ok, TEXT, "ready\n".into());
        r.head_only = true;
        let text = String::from_utf8(r.to_bytes()).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(text.contains("Content-Length: 6\r\n"));
        assert!(text.ends_with("\r\n\r\n"));
    }

    #[test]
    fn method_not_allowed_names_the_allowed_methods() {
        let text = String::from_utf8(Response::error(Status::MethodNotAllowed).to_bytes()).unwrap();
        assert!(text.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"));
        assert!(text.contains("Allow: GET, HEAD\r\n"));
    }
}
