//! The Hub's error type; every variant maps to an HTTP status and the JSON error body.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use weir_control::{ApiError, ValidationError};

/// Everything the Hub can refuse or fail at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HubError {
    /// A malformed request: bad JSON, a missing or wrong field (400).
    #[error("{field}: {message}")]
    BadRequest {
        /// JSON path of the field (`$` for the whole body).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// An unknown job, version, upgrade or Agent (404).
    #[error("{field}: no {what} `{id}`")]
    NotFound {
        /// What was looked up.
        what: &'static str,
        /// The id asked for.
        id: String,
        /// The path parameter or field that named it.
        field: String,
    },
    /// The request does not fit the current state: a stale generation, a stale session or
    /// report sequence, a job in the wrong state, a taken name (409).
    #[error("{}{message}", field.as_deref().map(|f| format!("{f}: ")).unwrap_or_default())]
    Conflict {
        /// The field to blame, when there is one.
        field: Option<String>,
        /// What conflicts.
        message: String,
    },
    /// A missing or wrong bearer token (401).
    #[error("{0}")]
    Unauthorized(String),
    /// A token or credential that may not make this request (403).
    #[error("{0}")]
    Forbidden(String),
    /// A request body larger than the Hub accepts (413).
    #[error("the request body is larger than the {limit} bytes the Hub accepts")]
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// A request body that did not arrive in time (408).
    #[error("the request body did not arrive within {seconds} s")]
    Timeout {
        /// The time allowed, in seconds.
        seconds: u64,
    },
    /// The job does not validate (422).
    #[error("invalid job: {}", errors.iter().map(|e| e.message.as_str()).collect::<Vec<_>>().join("; "))]
    Invalid {
        /// The request field to blame: `spec.<path>` for a spec, `sql` for a script.
        field: String,
        /// Every error validation found.
        errors: Vec<ValidationError>,
    },
    /// The SQLite store failed.
    #[error("store: {context}: {source}")]
    Store {
        /// What the Hub was doing.
        context: String,
        /// What failed.
        #[source]
        source: rusqlite::Error,
    },
    /// The store's schema migrations failed.
    #[error("store migrations: {0}")]
    Migration(#[from] rusqlite_migration::Error),
    /// Writing or reading a job manifest in the job's checkpoint storage failed.
    #[error("checkpoint storage {storage}: {message}")]
    Storage {
        /// The storage, as its display name.
        storage: String,
        /// What failed.
        message: String,
    },
    /// Binding or serving the HTTP listener failed.
    #[error("{context}: {source}")]
    Io {
        /// What the Hub was doing.
        context: String,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
}

impl HubError {
    /// A 400 naming `field`.
    pub fn bad_request(field: impl Into<String>, message: impl Into<String>) -> Self {
        HubError::BadRequest {
            field: field.into(),
            message: message.into(),
        }
    }

    /// A 409 naming `field`.
    pub fn conflict(field: impl Into<String>, message: impl Into<String>) -> Self {
        HubError::Conflict {
            field: Some(field.into()),
            message: message.into(),
        }
    }

    /// A 404 for `what` `id`, named by `field`; an id longer than an excerpt is cut (a path
    /// may carry megabytes).
    pub fn not_found(what: &'static str, id: &str, field: &str) -> Self {
        HubError::NotFound {
            what,
            id: weir::api::excerpt(id).into_owned(),
            field: field.to_owned(),
        }
    }

    /// Wraps a SQLite error with what the Hub was doing.
    pub fn store(context: impl Into<String>) -> impl FnOnce(rusqlite::Error) -> Self {
        let context = context.into();
        move |source| HubError::Store { context, source }
    }

    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        match self {
            HubError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            HubError::NotFound { .. } => StatusCode::NOT_FOUND,
            HubError::Conflict { .. } => StatusCode::CONFLICT,
            HubError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            HubError::Forbidden(_) => StatusCode::FORBIDDEN,
            HubError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            HubError::Timeout { .. } => StatusCode::REQUEST_TIMEOUT,
            HubError::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            HubError::Store { .. }
            | HubError::Migration(_)
            | HubError::Storage { .. }
            | HubError::Io { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The JSON error body.
    pub fn body(&self) -> ApiError {
        match self {
            HubError::BadRequest { field, message } => ApiError::at(field, message),
            HubError::NotFound { what, id, field } => {
                ApiError::at(field, format!("no {what} `{id}`"))
            }
            HubError::Conflict { field, message } => ApiError {
                error: message.clone(),
                field: field.clone(),
            },
            HubError::Invalid { field, .. } => ApiError::at(field, self.to_string()),
            HubError::Unauthorized(message) | HubError::Forbidden(message) => {
                ApiError::at("Authorization", message)
            }
            _ => ApiError::new(self.to_string()),
        }
    }
}

impl IntoResponse for HubError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::error!("{self}");
        }
        let mut response = crate::json::json_response(status, &self.body());
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

/// Result with [`HubError`].
pub type Result<T, E = HubError> = std::result::Result<T, E>;
