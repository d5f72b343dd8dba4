//! Handlers of the jobs endpoints.

use super::{ApiJson, Json};
use crate::Hub;
use crate::auth::{Admin, Operator, Viewer};
use crate::compile::{self, Source};
use crate::error::{HubError, Result};
use crate::store::now_ms;
use axum::extract::{Path, State};
use std::sync::Arc;
use weir_control::{
    ApiError, CheckpointAccepted, CheckpointKind, CheckpointRequest, DesiredStateChange, JobDetail,
    JobSummary, JobVersion, SavepointRequest, SubmitJob, UpgradePreview, UpgradeRecord,
    UpgradeRequest, ValidateRequest, ValidateResult,
};

/// Checks a job name: it is the job id and the prefix of its lanes' job ids.
fn check_name(name: &str, field: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'));
    if ok {
        Ok(())
    } else {
        Err(HubError::bad_request(
            field,
            format!(
                "`{}`: expected 1 to 64 characters of [A-Za-z0-9_-]",
                weir::api::excerpt(name)
            ),
        ))
    }
}

/// Exactly one of `sql` and `spec`.
fn source<'a>(sql: Option<&'a String>, spec: Option<&'a serde_json::Value>) -> Result<Source<'a>> {
    match (sql, spec) {
        (Some(sql), None) => Ok(Source::Sql(sql)),
        (None, Some(spec)) if spec.is_object() => Ok(Source::Spec(spec)),
        (None, Some(_)) => Err(HubError::bad_request("spec", "expected a JSON object")),
        (Some(_), Some(_)) => Err(HubError::bad_request(
            "spec",
            "give either `sql` or `spec`, not both",
        )),
        (None, None) => Err(HubError::bad_request("sql", "give `sql` or `spec`")),
    }
}

/// Compiles for storing: errors become a 422 naming the source field.
async fn compile_for_store(hub: &Hub, name: &str, source: Source<'_>) -> Result<compile::Compiled> {
    compile::compile(hub.engine(), name, source)
        .await
        .map_err(|errors| {
            let field = match (source, errors.iter().find_map(|e| e.path.as_deref())) {
                (Source::Spec(_), Some(path)) => format!("spec.{path}"),
                (s, _) => s.field().to_owned(),
            };
            HubError::Invalid { field, errors }
        })
}

/// Validates a job as a distributed job, storing nothing.
#[utoipa::path(post, path = "/api/v1/jobs/validate", tag = "jobs",
    security(("api_token" = [])),
    request_body = ValidateRequest,
    responses((status = 200, body = ValidateResult), (status = 400, body = ApiError)))]
pub(crate) async fn validate(
    State(hub): State<Arc<Hub>>,
    _caller: Admin,
    ApiJson(request): ApiJson<ValidateRequest>,
) -> Result<Json<ValidateResult>> {
    let name = request.name.as_deref().unwrap_or("job");
    check_name(name, "name")?;
    let source = source(request.sql.as_ref(), request.spec.as_ref())?;
    let compiled = compile::compile(hub.engine(), name, source).await;
    let agents = hub.with_store(|s| s.list_agents()).await?;
    let live: Vec<_> = agents
        .into_iter()
        .filter(|a| a.state == weir_control::AgentState::Live)
        .map(|a| (a.agent_id, a.capabilities))
        .collect();
    Ok(Json(compile::validate_result(
        compiled.as_ref().map_err(Vec::as_slice),
        &live,
    )))
}

/// Submits a new job (its first version); it starts when `desiredState` is running.
#[utoipa::path(post, path = "/api/v1/jobs", tag = "jobs",
    security(("api_token" = [])),
    request_body = SubmitJob,
    responses((status = 200, body = JobSummary), (status = 400, body = ApiError),
        (status = 409, body = ApiError), (status = 422, body = ApiError)))]
pub(crate) async fn submit(
    State(hub): State<Arc<Hub>>,
    _caller: Admin,
    ApiJson(request): ApiJson<SubmitJob>,
) -> Result<Json<JobSummary>> {
    check_name(&request.name, "name")?;
    let source = source(request.sql.as_ref(), request.spec.as_ref())?;
    let compiled = compile_for_store(&hub, &request.name, source).await?;
    hub.with_store(move |s| {
        s.submit(
            &request.name,
            &compiled,
            request.sql.as_deref(),
            request.spec.as_ref(),
            request.desired_state,
            now_ms(),
        )
    })
    .await
    .map(Json)
}

/// Lists every job.
#[utoipa::path(get, path = "/api/v1/jobs", tag = "jobs",
    security(("api_token" = [])),
    responses((status = 200, body = Vec<JobSummary>)))]
pub(crate) async fn list(
    State(hub): State<Arc<Hub>>,
    _caller: Viewer,
) -> Result<Json<Vec<JobSummary>>> {
    hub.with_store(|s| s.list_jobs()).await.map(Json)
}

/// One job's summary.
#[utoipa::path(get, path = "/api/v1/jobs/{job_id}", tag = "jobs",
    security(("api_token" = [])),
    params(("job_id" = String, Path, description = "The job")),
    responses((status = 200, body = JobSummary), (status = 404, body = ApiError)))]
pub(crate) async fn get_job(
    State(hub): State<Arc<Hub>>,
    _caller: Viewer,
    Path(job_id): Path<String>,
) -> Result<Json<JobSummary>> {
    hub.with_store(move |s| s.job(&job_id)).await.map(Json)
}

/// Everything about a job: plans, assignments, observed state, recovery records, upgrades.
#[utoipa::path(get, path = "/api/v1/jobs/{job_id}/detail", tag = "jobs",
    security(("api_token" = [])),
    params(("job_id" = String, Path, description = "The job")),
    responses((status = 200, body = JobDetail), (status = 404, body = ApiError)))]
pub(crate) async fn detail(
    State(hub): State<Arc<Hub>>,
    _caller: Viewer,
    Path(job_id): Path<String>,
) -> Result<Json<JobDetail>> {
    let mut detail = hub.with_store(move |s| s.detail(&job_id)).await?;
    redact_version(&mut detail.version);
    weir::api::secrets::redact_json(&mut detail.plans);
    Ok(Json(detail))
}

/// Hides the secrets of a version's script and spec: an answer never carries them (the Agents
/// get them in their commands).
fn redact_version(version: &mut JobVersion) {
    weir::api::secrets::redact_json(&mut version.spec);
    if let Some(sql) = &mut version.sql {
        *sql = weir::plan::sql_redact::redact_sql(sql);
    }
}

/// Every version of a job, oldest first.
#[utoipa::path(get, path = "/api/v1/jobs/{job_id}/versions", tag = "jobs",
    security(("api_token" = [])),
    params(("job_id" = String, Path, description = "The job")),
    responses((status = 200, body = Vec<JobVersion>), (status = 404, body = ApiError)))]
pub(crate) async fn versions(
    State(hub): State<Arc<Hub>>,
    _caller: Viewer,
    Path(job_id): Path<String>,
) -> Result<Json<Vec<JobVersion>>> {
    let mut versions = hub.with_store(move |s| s.versions(&job_id)).await?;
    versions.iter_mut().for_each(redact_version);
    Ok(Json(versions))
}

/// Changes the desired state in a new generation (conditional on `generation` when given).
#[utoipa::path(put, path = "/api/v1/jobs/{job_id}/desired-state", tag = "jobs",
    security(("api_token" = [])),
    params(("job_id" = String, Path, description = "The job")),
    request_body = DesiredStateChange,
    responses((status = 200, body = JobSummary), (status = 400, body = ApiError),
        (status = 404, body = ApiError), (status = 409, body = ApiError)))]
pub(crate) async fn desired_state(
    State(hub): State<Arc<Hub>>,
    _caller: Operator,
    Path(job_id): Path<String>,
    ApiJson(change): ApiJson<DesiredStateChange>,
) -> Result<Json<JobSummary>> {
    let job = hub
        .with_store(move |s| s.change_desired_state(&job_id, &change, now_ms()))
        .await?;
    tracing::info!(
        job = %job.job_id,
        desired = ?job.desired_state,
        generation = job.generation,
        "the job's desired state changed"
    );
    Ok(Json(job))
}

/// Asks the lanes for a job-level checkpoint.
#[utoipa::path(post, path = "/api/v1/jobs/{job_id}/checkpoints", tag = "jobs",
    security(("api_token" = [])),
    params(("job_id" = String, Path, description = "The job")),
    request_body = CheckpointRequest,
    responses((status = 200, body = CheckpointAccepted), (status = 404, body = ApiError),
        (status = 409, body = ApiError)))]
pub(crate) async fn checkpoint(
    State(hub): State<Arc<Hub>>,
    _caller: Operator,
    Path(job_id): Path<String>,
    ApiJson(_request): ApiJson<CheckpointRequest>,
) -> Result<Json<CheckpointAccepted>> {
    hub.with_store(move |s| {
        s.request_checkpoint(&job_id, CheckpointKind::Checkpoint, None, now_ms())
    })
    .await
    .map(Json)
}

/// Asks the lanes for a savepoint.
#[utoipa::path(post, path = "/api/v1/jobs/{job_id}/savepoints", tag = "jobs",
    security(("api_token" = [])),
    params(("job_id" = String, Path, description = "The job")),
    request_body = SavepointRequest,
    responses((status = 200, body = CheckpointAccepted), (status = 404, body = ApiError),
        (status = 409, body = ApiError)))]
pub(crate) async fn savepoint(
    State(hub): State<Arc<Hub>>,
    _caller: Operator,
    Path(job_id): Path<String>,
    ApiJson(request): ApiJson<SavepointRequest>,
) -> Result<Json<CheckpointAccepted>> {
    if let Some(name) = &request.name {
        check_name(name, "name")?;
    }
    hub.with_store(move |s| {
        s.request_checkpoint(
            &job_id,
            CheckpointKind::Savepoint,
            request.name.as_deref(),
            now_ms(),
        )
    })
    .await
    .map(Json)
}

/// Upgrades a stopped job to a new version that starts from a savepoint of the current one.
#[utoipa::path(post, path = "/api/v1/jobs/{job_id}/upgrades", tag = "jobs",
    security(("api_token" = [])),
    params(("job_id" = String, Path, description = "The job")),
    request_body = UpgradeRequest,
    responses((status = 200, body = UpgradeRecord), (status = 400, body = ApiError),
        (status = 404, body = ApiError), (status = 409, body = ApiError),
        (status = 422, body = ApiError)))]
pub(crate) async fn upgrade(
    State(hub): State<Arc<Hub>>,
    _caller: Admin,
    Path(job_id): Path<String>,
    ApiJson(request): ApiJson<UpgradeRequest>,
) -> Result<Json<UpgradeRecord>> {
    let compiled = compile_upgrade(&hub, &job_id, &request).await?;
    hub.with_store(move |s| s.upgrade(&job_id, &request, &compiled, now_ms()))
        .await
        .map(Json)
}

/// What an upgrade with this request would do with each operator's state (kept, started
/// empty, dropped, refused), changing nothing: the report to read before upgrading a job whose
/// logic changes.
#[utoipa::path(post, path = "/api/v1/jobs/{job_id}/upgrades/preview", tag = "jobs",
    security(("api_token" = [])),
    params(("job_id" = String, Path, description = "The job")),
    request_body = UpgradeRequest,
    responses((status = 200, body = UpgradePreview), (status = 400, body = ApiError),
        (status = 404, body = ApiError), (status = 409, body = ApiError),
        (status = 422, body = ApiError)))]
pub(crate) async fn preview_upgrade(
    State(hub): State<Arc<Hub>>,
    _caller: Admin,
    Path(job_id): Path<String>,
    ApiJson(request): ApiJson<UpgradeRequest>,
) -> Result<Json<UpgradePreview>> {
    let compiled = compile_upgrade(&hub, &job_id, &request).await?;
    hub.with_store(move |s| s.preview_upgrade(&job_id, &request, &compiled))
        .await
        .map(Json)
}

/// The new version of an upgrade request for job `job_id`, compiled; an unknown job is a 404
/// before any compiling.
async fn compile_upgrade(
    hub: &Arc<Hub>,
    job_id: &str,
    request: &UpgradeRequest,
) -> Result<crate::compile::Compiled> {
    let known = job_id.to_owned();
    hub.with_store(move |s| s.job(&known)).await?;
    let source = source(request.sql.as_ref(), request.spec.as_ref())?;
    compile_for_store(hub, job_id, source).await
}

/// Rolls back an upgrade: the version before it is current again.
#[utoipa::path(post, path = "/api/v1/jobs/{job_id}/upgrades/{upgrade_id}/rollback", tag = "jobs",
    security(("api_token" = [])),
    params(("job_id" = String, Path, description = "The job"),
        ("upgrade_id" = String, Path, description = "The upgrade")),
    responses((status = 200, body = UpgradeRecord), (status = 404, body = ApiError),
        (status = 409, body = ApiError)))]
pub(crate) async fn rollback(
    State(hub): State<Arc<Hub>>,
    _caller: Admin,
    Path((job_id, upgrade_id)): Path<(String, String)>,
) -> Result<Json<UpgradeRecord>> {
    hub.with_store(move |s| s.rollback(&job_id, &upgrade_id))
        .await
        .map(Json)
}
