//! HTTP endpoint for /metrics, /healthz, /readyz (being written).

use crate::server::Shared;
use std::net::SocketAddr;
use std::sync::Arc;

pub async fn start(shared: Arc<Shared>) -> std::io::Result<SocketAddr> {
    let sc = &shared.config.startup;
    let l = tokio::net::TcpListener::bind((sc.metrics_bind.as_str(), sc.metrics_port)).await?;
    l.local_addr()
}
