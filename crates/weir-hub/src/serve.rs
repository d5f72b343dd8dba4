//! The Hub's listener: HTTP/1 connections with bounds, so that no client can hold the Hub.
//!
//! Over TLS, the handshake has [`ServeLimits::header_timeout`] too. A client has
//! [`ServeLimits::header_timeout`] to send a request's headers (also while a kept
//! connection waits for its next request); the router itself bounds bodies (size and time,
//! whoever serves it); at most
//! [`ServeLimits::max_connections`] connections are served at once, the next ones waiting in the
//! listen queue. Without these, stalled connections stayed open forever and enough of them
//! locked every Agent's heartbeat out.

use crate::{Hub, HubError, Result};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Bounds on the connections and requests the Hub serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeLimits {
    /// The largest request body accepted; a larger one gets 413.
    pub max_body_bytes: usize,
    /// How long a client may take to send a request's headers, and how long a kept connection
    /// may stay idle before its next request.
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body (408 after it).
    pub body_timeout: Duration,
    /// Connections served at once.
    pub max_connections: usize,
}

impl Default for ServeLimits {
    /// 16 MiB bodies (a job's SQL or spec is far smaller), 10 s for headers, 30 s for bodies,
    /// 1,024 connections.
    fn default() -> Self {
        ServeLimits {
            max_body_bytes: 16 << 20,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_connections: 1_024,
        }
    }
}

/// Serves `hub`'s router on `listener` within `hub`'s limits, over TLS when `tls` is given,
/// until the listener fails.
pub(crate) async fn serve(
    hub: Arc<Hub>,
    listener: TcpListener,
    tls: Option<crate::HubTls>,
) -> Result<()> {
    let limits = hub.limits;
    let router = hub.router();
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    loop {
        // A slot first: past the bound, connections wait in the kernel's listen queue.
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return Ok(());
        };
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) if is_transient(&e) => {
                // Out of file descriptors or a connection reset before it was accepted: the
                // listener itself is fine; wait a little instead of spinning.
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            Err(source) => {
                return Err(HubError::Io {
                    context: "accepting a connection".into(),
                    source,
                });
            }
        };
        let service = TowerToHyperService::new(router.clone());
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => serve_connection(stream, service, limits, peer).await,
                Some(tls) => {
                    // The handshake gets the time a request's headers get.
                    let handshake =
                        tokio::time::timeout(limits.header_timeout, tls.acceptor().accept(stream));
                    match handshake.await {
                        Ok(Ok(stream)) => serve_connection(stream, service, limits, peer).await,
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "a TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "a TLS handshake timed out"),
                    }
                }
            }
            drop(slot);
        });
    }
}

/// Serves the requests of one connection until it ends.
async fn serve_connection<S>(
    stream: S,
    service: TowerToHyperService<axum::Router>,
    limits: ServeLimits,
    peer: std::net::SocketAddr,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .serve_connection(TokioIo::new(stream), service);
    if let Err(e) = connection.await {
        tracing::debug!(%peer, error = %e, "a connection ended with an error");
    }
}

/// Accept errors that concern one connection or a passing shortage, not the listener.
fn is_transient(e: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        e.kind(),
        ErrorKind::ConnectionAborted
            | ErrorKind::ConnectionReset
            | ErrorKind::Interrupted
            | ErrorKind::WouldBlock
    ) || matches!(e.raw_os_error(), Some(23 | 24 | 105 | 12)) // ENFILE, EMFILE, ENOBUFS, ENOMEM
}
