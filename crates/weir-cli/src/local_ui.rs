//! `weir run --ui`: the workbench for the one job this process runs. It answers the read-only
//! part of the Hub's API for that job (its summary and detail, its recent counters, its
//! checkpoints and their manifests), from a sampler that reads the job's counters every second.

use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::routing::get;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use weir::CheckpointLocation;
use weir::plan::Plan;
use weir::runtime::{CheckpointProbe, JobMetrics};
use weir_agent::readings;
use weir_control::{
    CheckpointsView, DesiredState, JobDetail, JobMetricsView, JobSummary, JobVersion, LaneReading,
    ManifestView, MetricsHistory, MetricsQuery, ObservedPhase, ObservedState, UiConfig, UiMode,
};
use weir_hub::{HubError, Json};

/// How often the sampler reads the job's counters.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// The job a local workbench shows.
pub struct LocalJob {
    /// Its detail as the Hub would show it: one version, one lane, generation 0.
    detail: Mutex<JobDetail>,
    metrics: Arc<JobMetrics>,
    probe: CheckpointProbe,
    history: Mutex<MetricsHistory>,
    /// Where its checkpoints are, and their namespace.
    checkpoints: Option<(CheckpointLocation, String)>,
    /// Checkpoints its retention keeps.
    retain: usize,
}

/// What the workbench shows of a job before it runs.
pub struct LocalJobInfo {
    detail: JobDetail,
    checkpoints: Option<(CheckpointLocation, String)>,
    retain: usize,
}

impl LocalJobInfo {
    /// The job about to run: `spec`, prepared as `prepared`, written as `sql` when it was a
    /// script, checkpointing into `storage`.
    ///
    /// # Errors
    /// When the spec or the plans do not serialize.
    pub fn new(
        prepared: &weir::PreparedJob,
        spec: &weir::JobSpec,
        sql: Option<String>,
        storage: Option<CheckpointLocation>,
    ) -> anyhow::Result<Self> {
        let plan = prepared.partitioned();
        let job_id = plan.job_id.to_string();
        let now = weir_hub::rfc3339(readings::now_ms());
        let job = JobSummary {
            job_id: job_id.clone(),
            desired_state: DesiredState::Running,
            generation: 0,
            current_version: "local".into(),
            lanes: 1,
            observed: ObservedState {
                phase: ObservedPhase::Running,
                cause: None,
            },
            created_at: now.clone(),
            running_since: Some(now.clone()),
        };
        let version = JobVersion {
            version_id: "local".into(),
            job_id,
            number: 1,
            sql,
            spec: serde_json::to_value(spec)?,
            plan_fingerprint: plan.fingerprint(),
            state_format_version: weir::state::STATE_FORMAT_VERSION,
            lanes: 1,
            created_at: now,
        };
        Ok(LocalJobInfo {
            detail: JobDetail {
                job,
                version,
                plans: serde_json::from_str(&prepared.plans.to_json_pretty())?,
                assignments: vec![weir_control::Assignment {
                    lane: 0,
                    agent_id: None,
                    state: "running".into(),
                    cause: None,
                }],
                recovery_records: vec![],
                upgrades: vec![],
                lane_history: vec![],
            },
            checkpoints: storage
                .map(|storage| (storage, weir::runtime::checkpoint_namespace(plan))),
            retain: spec
                .checkpoint
                .as_ref()
                .and_then(|c| c.retain)
                .unwrap_or(weir::plan::DEFAULT_CHECKPOINT_RETAIN) as usize,
        })
    }

    /// The job, now running as `running`.
    pub fn running(self, running: &weir::RunningJob) -> Arc<LocalJob> {
        Arc::new(LocalJob {
            detail: Mutex::new(self.detail),
            metrics: running.metrics().clone(),
            probe: running.checkpoint_probe(),
            history: Mutex::default(),
            checkpoints: self.checkpoints,
            retain: self.retain,
        })
    }
}

impl LocalJob {
    fn detail(&self) -> std::sync::MutexGuard<'_, JobDetail> {
        self.detail.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn history(&self) -> std::sync::MutexGuard<'_, MetricsHistory> {
        self.history.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn job_id(&self) -> String {
        self.detail().job.job_id.clone()
    }

    /// Reads the counters once into the history.
    fn sample(&self) {
        let reading = LaneReading {
            job_id: self.job_id(),
            lane: 0,
            generation: 0,
            sample: readings::sample(&self.metrics),
            checkpoints: readings::checkpoint_summary(&self.probe),
            epochs: readings::epochs_since(&self.probe, None).1,
        };
        self.history().record(None, reading);
    }

    /// The job ended: `cause` is why it failed, `None` when it finished.
    pub fn ended(&self, cause: Option<String>) {
        self.sample();
        let mut detail = self.detail();
        let (phase, state) = match cause {
            None => (ObservedPhase::Finished, "finished"),
            Some(_) => (ObservedPhase::Failed, "failed"),
        };
        detail.job.observed = ObservedState {
            phase,
            cause: cause.clone(),
        };
        detail.job.desired_state = DesiredState::Stopped;
        detail.job.running_since = None;
        for a in &mut detail.assignments {
            a.state = state.into();
            a.cause.clone_from(&cause);
        }
    }

    /// Samples the counters every second until the task is aborted.
    pub fn spawn_sampler(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let job = Arc::clone(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(SAMPLE_EVERY);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                job.sample();
            }
        })
    }

    /// 404 unless `id` is this job.
    fn check(&self, id: &str) -> Result<(), HubError> {
        if id == self.job_id() {
            Ok(())
        } else {
            Err(HubError::not_found("job", id, "jobId"))
        }
    }
}

type Answer<T> = Result<Json<T>, HubError>;

async fn config(State(job): State<Arc<LocalJob>>) -> Json<UiConfig> {
    Json(UiConfig {
        mode: UiMode::Local,
        job_id: Some(job.job_id()),
    })
}

async fn list(State(job): State<Arc<LocalJob>>) -> Json<Vec<JobSummary>> {
    Json(vec![job.detail().job.clone()])
}

async fn summary(State(job): State<Arc<LocalJob>>, Path(id): Path<String>) -> Answer<JobSummary> {
    job.check(&id)?;
    Ok(Json(job.detail().job.clone()))
}

async fn detail(State(job): State<Arc<LocalJob>>, Path(id): Path<String>) -> Answer<JobDetail> {
    job.check(&id)?;
    Ok(Json(job.detail().clone()))
}

async fn metrics(
    State(job): State<Arc<LocalJob>>,
    Path(id): Path<String>,
    query: Result<Query<MetricsQuery>, QueryRejection>,
) -> Answer<JobMetricsView> {
    let query = weir_hub::query(query)?;
    job.check(&id)?;
    Ok(Json(job.history().metrics(&id, 0, &query)))
}

async fn checkpoints(
    State(job): State<Arc<LocalJob>>,
    Path(id): Path<String>,
) -> Answer<CheckpointsView> {
    job.check(&id)?;
    let lanes = job.history().checkpoints(&id, 0, job.retain);
    Ok(Json(CheckpointsView {
        job_id: id,
        records: vec![],
        lanes,
    }))
}

async fn epoch_manifest(
    State(job): State<Arc<LocalJob>>,
    Path((id, lane, epoch)): Path<(String, u32, u64)>,
) -> Answer<ManifestView> {
    job.check(&id)?;
    if lane != 0 {
        return Err(HubError::not_found("lane", &lane.to_string(), "lane"));
    }
    let (storage, namespace) = job.checkpoints.as_ref().ok_or_else(|| {
        HubError::not_found("checkpoint section", "checkpoint", "spec.checkpoint")
    })?;
    weir_hub::manifests::epoch_manifest(storage, namespace, epoch)
        .await
        .map(Json)
}

/// The local API over `job`, with the workbench's pages (`/`, `/ui/...`).
pub fn router(job: Arc<LocalJob>) -> Router {
    Router::new()
        .route("/api/v1/ui/config", get(config))
        .route("/api/v1/jobs", get(list))
        .route("/api/v1/jobs/{job_id}", get(summary))
        .route("/api/v1/jobs/{job_id}/detail", get(detail))
        .route("/api/v1/jobs/{job_id}/metrics", get(metrics))
        .route("/api/v1/jobs/{job_id}/checkpoints", get(checkpoints))
        .route(
            "/api/v1/jobs/{job_id}/lanes/{lane}/epochs/{epoch}/manifest",
            get(epoch_manifest),
        )
        .fallback(weir_hub::unknown_endpoint)
        .with_state(job)
        .merge(weir_ui::router())
        .layer(axum::middleware::from_fn(read_only))
}

/// Answers every request that would change something (any method but GET and HEAD) with 403
/// "read-only", whatever its path: a local run takes no commands.
async fn read_only(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::Method;
    use axum::response::IntoResponse;
    if request.method() == Method::GET || request.method() == Method::HEAD {
        return next.run(request).await;
    }
    HubError::Forbidden(format!(
        "read-only: `weir run --ui` shows the one job this process runs and takes no {}          request; submit the job to a Hub to change it",
        request.method()
    ))
    .into_response()
}
