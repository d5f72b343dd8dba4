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

/// A 200 JSON answer: the Hub's, and `weir run --ui`'s, which answers the same API.
pub struct Json<T>(pub T);

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        json_response(StatusCode::OK, &self.0)
    }
}
