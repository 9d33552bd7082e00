//! The operator's HTTP endpoint: `/metrics` (Prometheus text format), `/healthz` (the process
//! is alive) and `/readyz` (it reached the API server and, if leading, runs the controller).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::metrics::Metrics;

/// What the probes report.
#[derive(Default)]
pub struct Health {
    /// Set once the API server answered; cleared on shutdown.
    pub ready: AtomicBool,
    /// Cleared when a component died and the process should be restarted.
    pub alive: AtomicBool,
}

impl Health {
    pub fn new() -> Self {
        Self { ready: AtomicBool::new(false), alive: AtomicBool::new(true) }
    }
}

/// Binds `addr` (so a taken port fails start-up, not later) and returns the serving task.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
) -> std::io::Result<impl Future<Output = ()>> {
    let listener = TcpListener::bind(addr).await?;
    tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
    Ok(async move {
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(conn) => conn,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed on the metrics port");
                    continue;
                }
            };
            let (metrics, health) = (metrics.clone(), health.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let reply = respond(&req, &metrics, &health);
                    async move { Ok::<_, Infallible>(reply) }
                });
                // Scrapers and probes that hang up early are not worth a log line.
                let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    })
}

fn respond(req: &Request<Incoming>, metrics: &Metrics, health: &Health) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
    }
    match req.uri().path() {
        "/metrics" => Response::builder()
            .header("content-type", "application/openmetrics-text; version=1.0.0; charset=utf-8")
            .body(Full::new(Bytes::from(metrics.encode())))
            .expect("static headers are valid"),
        "/healthz" | "/livez" => probe(health.alive.load(Ordering::Relaxed)),
        "/readyz" => probe(health.ready.load(Ordering::Relaxed) && health.alive.load(Ordering::Relaxed)),
        _ => text(StatusCode::NOT_FOUND, "not found: try /metrics, /healthz or /readyz\n"),
    }
}

fn probe(ok: bool) -> Response<Full<Bytes>> {
    if ok { text(StatusCode::OK, "ok\n") } else { text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n") }
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .expect("static headers are valid")
}

/// Where the endpoint listens when `--metrics-bind-address` is unset.
pub const DEFAULT_BIND: &str = "0.0.0.0:8080";

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get(addr: SocketAddr, path: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn probes_follow_health_and_metrics_encode() {
        let metrics = Arc::new(Metrics::new());
        let health = Arc::new(Health::new());
        // A port the kernel just handed out and released: free unless something races us.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        tokio::spawn(serve(addr, metrics.clone(), health.clone()).await.unwrap());
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 503"));
        health.ready.store(true, Ordering::Relaxed);
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 200"));
        assert!(get(addr, "/healthz").await.starts_with("HTTP/1.1 200"));
        health.alive.store(false, Ordering::Relaxed);
        assert!(get(addr, "/healthz").await.starts_with("HTTP/1.1 503"));
        metrics.reconcile_started();
        let body = get(addr, "/metrics").await;
        assert!(body.contains("strata_operator_reconciliations_total 1"), "{body}");
        assert!(get(addr, "/nope").await.starts_with("HTTP/1.1 404"));
    }
}
