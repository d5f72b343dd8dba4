//! The Hub: the control plane of Weir's distributed jobs.
//!
//! It keeps the intent (jobs, immutable versions, desired state, generations) in SQLite
//! ([`Store`]), places each job's lanes on Agents that hold a lease, queues commands for them in
//! an outbox, aggregates their reports into an observed state per job, and publishes a job
//! manifest when every lane of a generation reported a job-level checkpoint. It runs no job
//! itself. Its REST API and the Agent protocol are served by [`Hub::router`]; the wire types are
//! in `weir-control`.

mod api;
mod auth;
mod compile;
mod error;
mod json;
pub mod manifests;
mod observed;
mod placement;
mod publish;
mod serve;
mod store;
mod tls;

pub use api::{ApiDoc, query, unknown_endpoint};
pub use auth::{Caller, Role, hash_secret, random_hex};
pub use error::{HubError, Result};
pub use json::Json;
pub use publish::storage_of as checkpoint_storage;
pub use serve::ServeLimits;
pub use store::{PublishTask, Store, TokenInfo, now_ms, rfc3339};
pub use tls::HubTls;
pub use weir_control::RUNTIME_VERSION;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How to run a Hub.
#[derive(Debug, Clone)]
pub struct HubConfig {
    /// The SQLite database (created if missing).
    pub db_path: PathBuf,
    /// How long an Agent's lease lasts after its last heartbeat.
    pub lease_ttl: Duration,
    /// Bounds on the connections and requests the API serves.
    pub limits: ServeLimits,
    /// The join token Agents register with (`None`: no Agent may register). The Hub keeps only
    /// its hash.
    pub join_token: Option<String>,
    /// Which of the Hub's environment variables `${env:NAME}` references in a job's
    /// `checkpoint` section may read: the Hub writes job manifests into that storage.
    pub allow_env: weir::api::secrets::EnvAccess,
}

/// A running Hub: the store, and the engine it validates jobs with.
#[derive(Debug)]
pub struct Hub {
    store: Store,
    engine: weir::Engine,
    /// The lanes' recent readings, pushed by the Agents (memory only).
    live: std::sync::Mutex<weir_control::MetricsHistory>,
    /// Bounds on the connections and requests the API serves.
    limits: ServeLimits,
    /// The hash of the join token Agents register with.
    join_token_hash: Option<String>,
    /// What `${env:NAME}` references in checkpoint sections may read here.
    env: weir::api::secrets::EnvAccess,
}

impl Hub {
    /// Opens the store of `config` (migrating it) and makes a Hub over it.
    ///
    /// # Errors
    /// As [`Store::open`].
    pub fn open(config: &HubConfig) -> Result<Arc<Hub>> {
        let ttl = i64::try_from(config.lease_ttl.as_millis()).unwrap_or(i64::MAX);
        Ok(Arc::new(Hub {
            store: Store::open(&config.db_path, ttl)?,
            engine: {
                // The Hub validates jobs it does not run: their references stay unread here.
                let mut engine = weir::Engine::new();
                engine.set_env_access(weir::api::secrets::EnvAccess::Unread);
                engine
            },
            live: std::sync::Mutex::default(),
            limits: config.limits,
            join_token_hash: config.join_token.as_deref().map(hash_secret),
            env: config.allow_env.clone(),
        }))
    }

    /// The intent store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Runs `f` on the store in tokio's blocking pool: a commit waits for its fsync
    /// (`synchronous=FULL`), which must not stall the tasks serving other requests.
    ///
    /// # Errors
    /// What `f` returns; [`HubError::Io`] when the blocking task panicked.
    pub async fn with_store<T, F>(self: &Arc<Self>, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T> + Send + 'static,
    {
        let hub = self.clone();
        tokio::task::spawn_blocking(move || f(&hub.store))
            .await
            .map_err(|e| HubError::Io {
                context: "running a store operation".into(),
                source: std::io::Error::other(e.to_string()),
            })?
    }

    /// The lanes' recent readings (a poisoned lock only held statistics).
    pub(crate) fn live(&self) -> std::sync::MutexGuard<'_, weir_control::MetricsHistory> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Checks the join token an Agent registers with.
    ///
    /// # Errors
    /// 401 without a token, 403 with a wrong one or when the Hub has no join token.
    pub(crate) fn check_join_token(&self, token: Option<&str>) -> Result<()> {
        let Some(expected) = &self.join_token_hash else {
            return Err(HubError::Forbidden(
                "this Hub was started without a join token (`weir hub --join-token-file`): no \
                 Agent may register"
                    .into(),
            ));
        };
        let Some(token) = token else {
            return Err(HubError::Unauthorized(
                "Authorization: an Agent registers with `Bearer <join token>` (`weir agent \
                 --join-token-file`)"
                    .into(),
            ));
        };
        if auth::same_secret(expected, &hash_secret(token)) {
            Ok(())
        } else {
            tracing::warn!("refused a registration: wrong join token");
            Err(HubError::Forbidden(
                "Authorization: not this Hub's join token".into(),
            ))
        }
    }

    /// The checkpoint storage of a job's `checkpoint` section, its `${env:NAME}` references
    /// read from the Hub's environment as `--allow-env` allows.
    ///
    /// # Errors
    /// [`HubError::Storage`] when a reference is refused or unset, or the directory cannot be
    /// opened.
    pub(crate) fn checkpoint_storage(
        &self,
        checkpoint: &weir::plan::CheckpointSpec,
    ) -> Result<weir::CheckpointLocation> {
        publish::storage_of(checkpoint, &self.env)
    }

    /// The engine jobs are validated with.
    pub fn engine(&self) -> &weir::Engine {
        &self.engine
    }

    /// The HTTP API: the jobs endpoints, the Agent protocol and the OpenAPI document.
    pub fn router(self: &Arc<Self>) -> axum::Router {
        api::router(self.clone())
    }

    /// Publishes the job manifests of completed job-level checkpoints: each is written into
    /// its job's checkpoint storage, then recorded as a recovery record. A manifest that cannot
    /// be written leaves its checkpoint abandoned (the previous record stays the valid one).
    pub async fn publish(self: &Arc<Self>, tasks: Vec<PublishTask>) {
        for task in tasks {
            let id = task.body.checkpoint_id.clone();
            let job = task.body.job_id.clone();
            let recorded = match publish::write_manifest(self, &task).await {
                Ok((path, checksum)) => {
                    self.with_store(move |s| s.record_recovery(&task, &path, &checksum))
                        .await
                }
                Err(e) => Err(e),
            };
            if let Err(e) = recorded {
                tracing::error!("job-level checkpoint {id} of job {job}: {e}");
                let abandon = id.clone();
                if let Err(e) = self
                    .with_store(move |s| s.abandon_checkpoint(&abandon))
                    .await
                {
                    tracing::error!("abandoning checkpoint {id}: {e}");
                }
            }
        }
    }

    /// One round of maintenance at `now` (Unix ms): expires lapsed leases (moving their lanes)
    /// and requests the periodic job-level checkpoints that are due.
    ///
    /// # Errors
    /// [`HubError::Store`].
    pub fn maintain(&self, now: i64) -> Result<()> {
        let expired = self.store.expire_leases(now)?;
        if !expired.is_empty() {
            tracing::warn!("leases lapsed: {}", expired.join(", "));
        }
        self.store.request_due_checkpoints(now)?;
        Ok(())
    }

    /// Runs [`Hub::maintain`] every quarter lease (at least every 50 ms) until the task is
    /// aborted.
    pub fn spawn_maintenance(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let hub = self.clone();
        let period = Duration::from_millis(
            u64::try_from(hub.store.lease_ttl_ms() / 4)
                .unwrap_or(1000)
                .max(50),
        );
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(period);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                let h = hub.clone();
                match tokio::task::spawn_blocking(move || h.maintain(store::now_ms())).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::error!("hub maintenance: {e}"),
                    Err(e) => tracing::error!("hub maintenance failed: {e}"),
                }
            }
        })
    }

    /// Serves the API on `listener` (over TLS when `tls` is given), with the maintenance
    /// task, until the process ends.
    ///
    /// # Errors
    /// [`HubError::Io`] when serving fails.
    pub async fn serve(
        self: Arc<Self>,
        listener: tokio::net::TcpListener,
        tls: Option<HubTls>,
    ) -> Result<()> {
        let maintenance = self.spawn_maintenance();
        let served = serve::serve(Arc::clone(&self), listener, tls).await;
        maintenance.abort();
        served
    }
}
