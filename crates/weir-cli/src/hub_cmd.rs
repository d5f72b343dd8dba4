//! `weir hub`: runs the Hub, the control plane of distributed jobs.

use anyhow::{Context, Result};
use std::path::PathBuf;
use std::time::Duration;

/// Parses a positive duration such as `10s` or `500ms` (a lease TTL, a timeout).
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let d = weir::api::DurationMs::parse(text)?;
    if d.0 == 0 {
        return Err("the duration must be positive".into());
    }
    Ok(Duration::from_millis(d.0))
}

/// Opens the store and serves the API on `listen` within `limits` until the process is
/// stopped.
pub(crate) async fn run(
    listen: &str,
    db: PathBuf,
    lease_ttl: Duration,
    limits: weir_hub::ServeLimits,
) -> Result<()> {
    let hub = weir_hub::Hub::open(&weir_hub::HubConfig {
        db_path: db.clone(),
        lease_ttl,
        limits,
    })
    .with_context(|| format!("opening the Hub store {}", db.display()))?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    eprintln!(
        "weir hub listening on http://{addr} (store {})",
        db.display()
    );
    hub.serve(listener).await?;
    Ok(())
}
