//! Handlers of what the workbench watches: the Agents' metric pushes, a job's recent counters,
//! its checkpoints, and manifests read back with their checksums checked.

use super::{ApiJson, Json, bearer};
use crate::Hub;
use crate::auth::Viewer;
use crate::error::{HubError, Result};
use crate::manifests;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use std::sync::Arc;
use weir::CheckpointLocation;
use weir::plan::JobSpec;
use weir_control::{
    ApiError, CheckpointsView, JobMetricsView, ManifestView, MetricsAck, MetricsPush, MetricsQuery,
    UiConfig, UiMode,
};

/// The checkpoint storage of a version; 404 when the version takes no checkpoints.
fn storage_of(hub: &Hub, spec: &JobSpec) -> Result<CheckpointLocation> {
    let checkpoint = spec.checkpoint.as_ref().ok_or_else(|| {
        HubError::not_found("checkpoint section", "checkpoint", "spec.checkpoint")
    })?;
    hub.checkpoint_storage(checkpoint)
}

/// The checkpoint namespace of lane `lane`: what the runtime derives from the lane's job id and
/// the spec's pipeline (`weir::runtime::checkpoint_namespace`).
fn lane_namespace(spec: &JobSpec, job_id: &str, lane: u32) -> String {
    let lane_job = weir_control::lane_job_id(job_id, lane);
    match spec.pipeline.as_deref() {
        Some(pipeline) if pipeline != lane_job => format!("{lane_job}.{pipeline}"),
        _ => lane_job,
    }
}

/// Who serves the workbench: the Hub.
#[utoipa::path(get, path = "/api/v1/ui/config", tag = "workbench",
    responses((status = 200, body = UiConfig)))]
pub(crate) async fn ui_config() -> Json<UiConfig> {
    Json(UiConfig {
        mode: UiMode::Hub,
        job_id: None,
    })
}

/// Takes the readings of the lanes an Agent runs; readings of a lane it is not assigned in its
/// job's current generation (another Agent's lane, an old generation) are dropped.
#[utoipa::path(post, path = "/api/v1/agents/{agent_id}/metrics", tag = "agents",
    params(("agent_id" = String, Path, description = "The Agent")),
    security(("session_token" = [])),
    request_body = MetricsPush,
    responses((status = 200, body = MetricsAck), (status = 400, body = ApiError),
        (status = 401, body = ApiError), (status = 404, body = ApiError),
        (status = 409, body = ApiError)))]
pub(crate) async fn push_metrics(
    State(hub): State<Arc<Hub>>,
    Path(agent_id): Path<String>,
    headers: HeaderMap,
    ApiJson(push): ApiJson<MetricsPush>,
) -> Result<Json<MetricsAck>> {
    let token = bearer(&headers)?;
    let agent = agent_id.clone();
    let lanes = hub
        .with_store(move |s| {
            s.check_session(&agent, &token)?;
            s.lanes_of_agent(&agent)
        })
        .await?;
    let mut ack = MetricsAck {
        accepted: 0,
        dropped: 0,
    };
    let mut history = hub.live();
    for reading in push.lanes {
        let key = (reading.job_id.clone(), reading.lane, reading.generation);
        if lanes.contains(&key) {
            history.record(Some(&agent_id), reading);
            history.retain_generation(&key.0, key.2);
            ack.accepted += 1;
        } else {
            ack.dropped += 1;
        }
    }
    Ok(Json(ack))
}

/// The recent counters of every lane of the job's current generation (kept in the Hub's
/// memory, about ten minutes of them).
#[utoipa::path(get, path = "/api/v1/jobs/{job_id}/metrics", tag = "workbench",
    security(("api_token" = [])),
    params(("job_id" = String, Path, description = "The job"), MetricsQuery),
    responses((status = 200, body = JobMetricsView), (status = 400, body = ApiError),
        (status = 404, body = ApiError)))]
pub(crate) async fn job_metrics(
    State(hub): State<Arc<Hub>>,
    _caller: Viewer,
    Path(job_id): Path<String>,
    query: Result<Query<MetricsQuery>, QueryRejection>,
) -> Result<Json<JobMetricsView>> {
    let query = super::query(query)?;
    let id = job_id.clone();
    let generation = hub.with_store(move |s| s.generation(&id)).await?;
    Ok(Json(hub.live().metrics(&job_id, generation, &query)))
}

/// The job's completed job-level checkpoints and, per lane of its current generation, the
/// newest epochs with their per-task statistics and which of them retention keeps (by the
/// current version's `checkpoint.retain`).
#[utoipa::path(get, path = "/api/v1/jobs/{job_id}/checkpoints", tag = "workbench",
    security(("api_token" = [])),
    params(("job_id" = String, Path, description = "The job")),
    responses((status = 200, body = CheckpointsView), (status = 404, body = ApiError)))]
pub(crate) async fn job_checkpoints(
    State(hub): State<Arc<Hub>>,
    _caller: Viewer,
    Path(job_id): Path<String>,
) -> Result<Json<CheckpointsView>> {
    let id = job_id.clone();
    let (generation, records, spec) = hub
        .with_store(move |s| {
            let (generation, records) = s.recovery_records(&id)?;
            let (_, spec) = s.version_spec(&id, None)?;
            Ok((generation, records, spec))
        })
        .await?;
    let retain = spec
        .checkpoint
        .as_ref()
        .and_then(|c| c.retain)
        .unwrap_or(weir::plan::DEFAULT_CHECKPOINT_RETAIN);
    let lanes = hub.live().checkpoints(&job_id, generation, retain as usize);
    Ok(Json(CheckpointsView {
        job_id,
        records,
        lanes,
    }))
}

/// The job manifest of a completed job-level checkpoint, read from the job's checkpoint
/// storage, with its checksum checked.
#[utoipa::path(get, path = "/api/v1/jobs/{job_id}/checkpoints/{checkpoint_id}/manifest",
    tag = "workbench",
    security(("api_token" = [])),
    params(("job_id" = String, Path, description = "The job"),
        ("checkpoint_id" = String, Path, description = "The job-level checkpoint")),
    responses((status = 200, body = ManifestView), (status = 404, body = ApiError),
        (status = 500, body = ApiError)))]
pub(crate) async fn job_manifest(
    State(hub): State<Arc<Hub>>,
    _caller: Viewer,
    Path((job_id, checkpoint_id)): Path<(String, String)>,
) -> Result<Json<ManifestView>> {
    let (id, wanted) = (job_id.clone(), checkpoint_id.clone());
    let spec = hub
        .with_store(move |s| {
            let (_, records) = s.recovery_records(&id)?;
            let record = records
                .into_iter()
                .find(|r| r.checkpoint_id == wanted)
                .ok_or_else(|| HubError::not_found("checkpoint", &wanted, "checkpointId"))?;
            s.version_spec(&id, Some(&record.version_id))
                .map(|(_, spec)| spec)
        })
        .await?;
    let storage = storage_of(&hub, &spec)?;
    manifests::job_manifest(&storage, &checkpoint_id)
        .await
        .map(Json)
}

/// The manifest of one epoch of one lane of the job's current version, read from the job's
/// checkpoint storage, with its checksum checked.
#[utoipa::path(get, path = "/api/v1/jobs/{job_id}/lanes/{lane}/epochs/{epoch}/manifest",
    tag = "workbench",
    security(("api_token" = [])),
    params(("job_id" = String, Path, description = "The job"),
        ("lane" = u32, Path, description = "The lane"),
        ("epoch" = u64, Path, description = "The epoch")),
    responses((status = 200, body = ManifestView), (status = 404, body = ApiError),
        (status = 500, body = ApiError)))]
pub(crate) async fn epoch_manifest(
    State(hub): State<Arc<Hub>>,
    _caller: Viewer,
    Path((job_id, lane, epoch)): Path<(String, u32, u64)>,
) -> Result<Json<ManifestView>> {
    let id = job_id.clone();
    let (_, spec) = hub.with_store(move |s| s.version_spec(&id, None)).await?;
    let storage = storage_of(&hub, &spec)?;
    let namespace = lane_namespace(&spec, &job_id, lane);
    manifests::epoch_manifest(&storage, &namespace, epoch)
        .await
        .map(Json)
}
