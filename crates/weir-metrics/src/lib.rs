//! Prometheus exposition of Weir jobs' live metrics.
//!
//! The runtime records (atomics per operator subtask, the checkpoint coordinator's counters);
//! this crate reads them at scrape time and encodes them with `prometheus-client` in the
//! OpenMetrics text format. [`serve`] answers `GET /metrics` on an address of the caller's
//! choosing. Every metric, its labels and its unit are listed in docs/observability.md.

mod encode;

pub use encode::{JobHandle, JobSource, encode};

use axum::Router;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use std::net::SocketAddr;
use std::sync::Arc;

/// The media type of what `/metrics` answers.
pub const CONTENT_TYPE_OPENMETRICS: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Why the exporter could not start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The address could not be bound.
    #[error("binding the metrics address {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// A running `/metrics` endpoint; dropping it stops the server.
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl MetricsServer {
    /// The address it listens on (with the port the system chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The router answering `GET /metrics` with the jobs of `source`, for a caller that serves it.
pub fn router(source: Arc<dyn JobSource>) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let source = Arc::clone(&source);
            async move {
                let text = encode(source.as_ref());
                ([(CONTENT_TYPE, CONTENT_TYPE_OPENMETRICS)], text).into_response()
            }
        }),
    )
}

/// A bound address, not serving yet: bind before starting a job, so that a busy address is
/// refused before anything runs.
#[derive(Debug)]
pub struct MetricsListener(tokio::net::TcpListener);

impl MetricsListener {
    /// The address it is bound to (with the port the system chose for port 0).
    ///
    /// # Errors
    /// When the socket's address cannot be read.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.0.local_addr()
    }

    /// Serves [`router`] on it until the returned server is dropped.
    ///
    /// # Errors
    /// When the socket's address cannot be read.
    pub fn serve(self, source: Arc<dyn JobSource>) -> Result<MetricsServer, MetricsError> {
        let addr = self.0.local_addr().map_err(|source| MetricsError::Bind {
            addr: "the bound metrics address".into(),
            source,
        })?;
        let app = router(source);
        let listener = self.0;
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!(error = %e, "the metrics endpoint stopped");
            }
        });
        Ok(MetricsServer { addr, task })
    }
}

/// Binds `addr` (`HOST:PORT`).
///
/// # Errors
/// When the address cannot be bound.
pub async fn bind(addr: &str) -> Result<MetricsListener, MetricsError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map(MetricsListener)
        .map_err(|source| MetricsError::Bind {
            addr: addr.to_owned(),
            source,
        })
}

/// Binds `addr` (`HOST:PORT`) and serves [`router`] on it until the returned server is dropped.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve(addr: &str, source: Arc<dyn JobSource>) -> Result<MetricsServer, MetricsError> {
    bind(addr).await?.serve(source)
}

#[cfg(test)]
mod tests;
