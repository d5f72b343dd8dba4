//! The HTTP API: routes, the JSON body extractor that names the offending field, and the
//! OpenAPI document generated from the handlers and the wire types.

mod agents;
mod jobs;
mod live;
mod metrics;

use crate::Hub;
use crate::error::HubError;
pub(crate) use crate::json::{Json, json_response};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use axum::routing::{get, post, put};
use serde::de::DeserializeOwned;
use std::sync::Arc;
use utoipa::OpenApi;

/// The OpenAPI document of the Hub, generated from its handlers and the `weir-control` types;
/// served at `GET /api/v1/openapi.json`.
#[derive(OpenApi)]
#[openapi(
    info(title = "Weir Hub", description = "Control plane of Weir's distributed jobs"),
    paths(
        jobs::validate,
        jobs::submit,
        jobs::list,
        jobs::get_job,
        jobs::detail,
        jobs::versions,
        jobs::desired_state,
        jobs::checkpoint,
        jobs::savepoint,
        jobs::upgrade,
        jobs::preview_upgrade,
        jobs::rollback,
        agents::list,
        agents::register,
        agents::heartbeat,
        agents::commands,
        agents::reports,
        live::push_metrics,
        live::ui_config,
        live::job_metrics,
        live::job_checkpoints,
        live::job_manifest,
        live::epoch_manifest,
        openapi_json,
    ),
    components(schemas(weir_control::JobManifest, weir_control::JobManifestBody)),
    modifiers(&BearerSchemes)
)]
pub struct ApiDoc;

/// Declares the bearer schemes the endpoints name: `api_token` (users and tools, created with
/// `weir hub token create`), `join_token` (an Agent's registration) and `session_token` (an
/// Agent's requests within its session).
struct BearerSchemes;

impl utoipa::Modify for BearerSchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        for name in ["api_token", "join_token", "session_token"] {
            components.add_security_scheme(
                name,
                SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
            );
        }
    }
}

/// The router over `hub`.
pub(crate) fn router(hub: Arc<Hub>) -> Router {
    Router::new()
        .route("/api/v1/jobs/validate", post(jobs::validate))
        .route("/api/v1/jobs", post(jobs::submit).get(jobs::list))
        .route("/api/v1/jobs/{job_id}", get(jobs::get_job))
        .route("/api/v1/jobs/{job_id}/detail", get(jobs::detail))
        .route("/api/v1/jobs/{job_id}/versions", get(jobs::versions))
        .route(
            "/api/v1/jobs/{job_id}/desired-state",
            put(jobs::desired_state),
        )
        .route(
            "/api/v1/jobs/{job_id}/checkpoints",
            post(jobs::checkpoint).get(live::job_checkpoints),
        )
        .route(
            "/api/v1/jobs/{job_id}/checkpoints/{checkpoint_id}/manifest",
            get(live::job_manifest),
        )
        .route(
            "/api/v1/jobs/{job_id}/lanes/{lane}/epochs/{epoch}/manifest",
            get(live::epoch_manifest),
        )
        .route("/api/v1/jobs/{job_id}/metrics", get(live::job_metrics))
        .route("/api/v1/ui/config", get(live::ui_config))
        .route("/api/v1/jobs/{job_id}/savepoints", post(jobs::savepoint))
        .route("/api/v1/jobs/{job_id}/upgrades", post(jobs::upgrade))
        .route(
            "/api/v1/jobs/{job_id}/upgrades/preview",
            post(jobs::preview_upgrade),
        )
        .route(
            "/api/v1/jobs/{job_id}/upgrades/{upgrade_id}/rollback",
            post(jobs::rollback),
        )
        .route("/api/v1/agents", get(agents::list))
        .route("/api/v1/agents/register", post(agents::register))
        .route(
            "/api/v1/agents/{agent_id}/heartbeat",
            post(agents::heartbeat),
        )
        .route("/api/v1/agents/{agent_id}/commands", get(agents::commands))
        .route("/api/v1/agents/{agent_id}/reports", post(agents::reports))
        .route(
            "/api/v1/agents/{agent_id}/metrics",
            post(live::push_metrics),
        )
        .route("/api/v1/openapi.json", get(openapi_json))
        .route("/metrics", get(metrics::metrics))
        .fallback(unknown_endpoint)
        // Bodies read in chunks stop at the limit too (413), not only announced ones.
        .layer(axum::extract::DefaultBodyLimit::max(
            hub.limits.max_body_bytes,
        ))
        .with_state(hub)
        .merge(weir_ui::router())
}

/// A JSON request body whose decoding errors name the offending field's JSON path (axum's own
/// rejection does not).
pub(crate) struct ApiJson<T>(pub T);

/// The field a serde "missing field" message names: the error's path is the object that lacks
/// it (for an unknown field, the path already ends with the field).
fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.split('`').next()
}

/// Decodes `bytes` as `T`, naming the field of the first error.
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, HubError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(HubError::bad_request("$", "expected a JSON body"));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        let message = inner.to_string();
        if inner.is_syntax() || inner.is_eof() {
            // Not JSON at all: the whole body is to blame (the message has line and column).
            return HubError::bad_request("$", message);
        }
        let base = if path == "." { String::new() } else { path };
        let field = match missing_field(&message) {
            Some(name) if base.is_empty() => name.to_owned(),
            Some(name) => format!("{base}.{name}"),
            None if base.is_empty() => "$".to_owned(),
            None => base,
        };
        HubError::bad_request(field, message)
    })
}

impl<T: DeserializeOwned> FromRequest<Arc<Hub>> for ApiJson<T> {
    type Rejection = HubError;

    /// Reads the body within the Hub's body timeout and size limit (408 and 413), then decodes
    /// it.
    async fn from_request(req: Request, hub: &Arc<Hub>) -> Result<Self, Self::Rejection> {
        let limits = hub.limits;
        // Refused on its announced length, before any of it is read.
        let announced = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if announced.is_some_and(|n| n > limits.max_body_bytes as u64) {
            return Err(HubError::TooLarge {
                limit: limits.max_body_bytes,
            });
        }
        let read = tokio::time::timeout(limits.body_timeout, Bytes::from_request(req, hub));
        let bytes = match read.await {
            Err(_) => {
                return Err(HubError::Timeout {
                    seconds: limits.body_timeout.as_secs(),
                });
            }
            Ok(Err(e)) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                return Err(HubError::TooLarge {
                    limit: limits.max_body_bytes,
                });
            }
            Ok(Err(e)) => {
                return Err(HubError::bad_request(
                    "$",
                    format!("cannot read the body: {e}"),
                ));
            }
            Ok(Ok(bytes)) => bytes,
        };
        decode(&bytes).map(ApiJson)
    }
}

/// A query string, or a 400 naming it.
///
/// # Errors
/// [`HubError::BadRequest`] with field `query` when it does not decode.
pub fn query<T>(
    query: Result<axum::extract::Query<T>, axum::extract::rejection::QueryRejection>,
) -> Result<T, HubError> {
    query
        .map(|axum::extract::Query(q)| q)
        .map_err(|e| HubError::bad_request("query", e.body_text()))
}

/// The bearer token of an Agent request.
pub(crate) fn bearer(headers: &HeaderMap) -> Result<String, HubError> {
    crate::auth::bearer_token(headers)
        .map(str::to_owned)
        .ok_or_else(|| {
            HubError::Unauthorized(
                "Authorization: expected `Bearer <sessionToken>` from the Agent's registration"
                    .into(),
            )
        })
}

/// The answer to a path no route takes: 404 naming it.
pub async fn unknown_endpoint(uri: axum::http::Uri) -> HubError {
    HubError::not_found("endpoint", uri.path(), "$")
}

/// `GET /api/v1/openapi.json`: this document.
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "meta",
    responses((status = 200, description = "The OpenAPI document", body = Object)))]
pub(crate) async fn openapi_json() -> Response {
    json_response(StatusCode::OK, &ApiDoc::openapi())
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_control::SubmitJob;

    fn field_of(body: &str) -> String {
        match decode::<SubmitJob>(body.as_bytes()) {
            Err(HubError::BadRequest { field, .. }) => field,
            other => panic!("expected a bad request, got {:?}", other.map(|s| s.name)),
        }
    }

    #[test]
    fn decoding_errors_name_the_field() {
        assert_eq!(field_of(r#"{"sql": "x"}"#), "name");
        assert_eq!(field_of(r#"{"name": "a", "sqll": "x"}"#), "sqll");
        assert_eq!(field_of(r#"{"name": 3}"#), "name");
        assert_eq!(
            field_of(r#"{"name": "a", "desiredState": "flying"}"#),
            "desiredState"
        );
        assert_eq!(field_of("{"), "$");
        assert_eq!(field_of(""), "$");
    }
}
