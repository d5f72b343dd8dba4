//! Handlers of the Agent endpoints: registration, heartbeats, the command outbox, reports.

use super::{ApiJson, Json, bearer};
use crate::Hub;
use crate::auth::Viewer;
use crate::error::Result;
use crate::store::now_ms;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use std::sync::Arc;
use weir_control::{
    AgentEntry, ApiError, Command, HeartbeatAck, RegisterAgent, Registration, ReportAck,
    ReportBatch,
};

/// Lists every Agent.
#[utoipa::path(get, path = "/api/v1/agents", tag = "agents",
    security(("api_token" = [])),
    responses((status = 200, body = Vec<AgentEntry>)))]
pub(crate) async fn list(
    State(hub): State<Arc<Hub>>,
    _caller: Viewer,
) -> Result<Json<Vec<AgentEntry>>> {
    hub.with_store(|s| s.list_agents()).await.map(Json)
}

/// Registers an Agent: a new session and lease. The request carries the Hub's join token.
#[utoipa::path(post, path = "/api/v1/agents/register", tag = "agents",
    security(("join_token" = [])),
    request_body = RegisterAgent,
    responses((status = 200, body = Registration), (status = 400, body = ApiError),
        (status = 401, body = ApiError), (status = 403, body = ApiError)))]
pub(crate) async fn register(
    State(hub): State<Arc<Hub>>,
    headers: HeaderMap,
    ApiJson(request): ApiJson<RegisterAgent>,
) -> Result<Json<Registration>> {
    hub.check_join_token(crate::auth::bearer_token(&headers))?;
    let agent = request.agent_id.clone();
    let registration = hub
        .with_store(move |s| s.register(&request, now_ms()))
        .await?;
    tracing::info!(agent, session = %registration.session_id, "an Agent registered");
    Ok(Json(registration))
}

/// Renews the lease of the session the bearer token names.
#[utoipa::path(post, path = "/api/v1/agents/{agent_id}/heartbeat", tag = "agents",
    params(("agent_id" = String, Path, description = "The Agent")),
    security(("session_token" = [])),
    responses((status = 200, body = HeartbeatAck), (status = 401, body = ApiError),
        (status = 404, body = ApiError), (status = 409, body = ApiError)))]
pub(crate) async fn heartbeat(
    State(hub): State<Arc<Hub>>,
    Path(agent_id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<HeartbeatAck>> {
    let token = bearer(&headers)?;
    hub.with_store(move |s| s.heartbeat(&agent_id, &token, now_ms()))
        .await
        .map(Json)
}

/// Claims the Agent's unacknowledged commands.
#[utoipa::path(get, path = "/api/v1/agents/{agent_id}/commands", tag = "agents",
    params(("agent_id" = String, Path, description = "The Agent")),
    security(("session_token" = [])),
    responses((status = 200, body = Vec<Command>), (status = 401, body = ApiError),
        (status = 404, body = ApiError), (status = 409, body = ApiError)))]
pub(crate) async fn commands(
    State(hub): State<Arc<Hub>>,
    Path(agent_id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<Vec<Command>>> {
    let token = bearer(&headers)?;
    hub.with_store(move |s| s.claim_commands(&agent_id, &token, now_ms()))
        .await
        .map(Json)
}

/// Applies a report; publishes the job manifests it completes before answering.
#[utoipa::path(post, path = "/api/v1/agents/{agent_id}/reports", tag = "agents",
    params(("agent_id" = String, Path, description = "The Agent")),
    security(("session_token" = [])),
    request_body = ReportBatch,
    responses((status = 200, body = ReportAck), (status = 400, body = ApiError),
        (status = 401, body = ApiError), (status = 404, body = ApiError),
        (status = 409, body = ApiError)))]
pub(crate) async fn reports(
    State(hub): State<Arc<Hub>>,
    Path(agent_id): Path<String>,
    headers: HeaderMap,
    ApiJson(batch): ApiJson<ReportBatch>,
) -> Result<Json<ReportAck>> {
    let token = bearer(&headers)?;
    let (ack, publish) = hub
        .with_store(move |s| s.apply_report(&agent_id, &token, &batch, now_ms()))
        .await?;
    hub.publish(publish).await;
    Ok(Json(ack))
}
