//! JSON answers: a body serialized with its status, or a 500 naming why it could not be.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// A JSON response with `status`.
pub(crate) fn json_response<T: Serialize>(status: StatusCode, body: &T) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "application/json")],
            format!(
                r#"{{"error":"encoding the answer: {}"}}"#,
                e.to_string().replace('"', "'")
            ),
        )
            .into_response(),
    }
}
