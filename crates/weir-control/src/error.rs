//! The control crate's error type and the Hub's JSON error body.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The JSON body of every 4xx/5xx answer of the Hub: what is wrong and, when one field of the
/// request is to blame, its JSON path (`spec.sources[0].connector`, `generation`, `jobId`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiError {
    /// What went wrong, for people.
    pub error: String,
    /// JSON path of the offending field of the request (or path parameter), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl ApiError {
    /// An error naming no field.
    pub fn new(error: impl Into<String>) -> Self {
        ApiError {
            error: error.into(),
            field: None,
        }
    }

    /// An error naming the field at JSON path `field`.
    pub fn at(field: impl Into<String>, error: impl Into<String>) -> Self {
        ApiError {
            error: error.into(),
            field: Some(field.into()),
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{field}: {}", self.error),
            None => f.write_str(&self.error),
        }
    }
}

/// What can fail when calling the Hub with [`crate::HubClient`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// The Hub answered with an error status and its JSON error body.
    #[error("{method} {url}: HTTP {status}: {error}")]
    Api {
        /// The request's method.
        method: String,
        /// The request's URL.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// The Hub's error body (its raw text when it was not the JSON error body).
        error: ApiError,
    },
    /// The request did not reach the Hub or its answer did not arrive.
    #[error("{method} {url}: {source}")]
    Transport {
        /// The request's method.
        method: String,
        /// The request's URL.
        url: String,
        /// What failed.
        #[source]
        source: reqwest::Error,
    },
    /// The Hub's answer is not the JSON the endpoint promises.
    #[error("{method} {url}: unexpected answer: {source}")]
    Decode {
        /// The request's method.
        method: String,
        /// The request's URL.
        url: String,
        /// What did not decode.
        #[source]
        source: serde_json::Error,
    },
    /// The Hub's base URL cannot be used.
    #[error("invalid Hub URL `{url}`: {message}")]
    InvalidUrl {
        /// The URL given.
        url: String,
        /// Why it is refused.
        message: String,
    },
    /// The CA certificate to verify the Hub with cannot be used.
    #[error("CA certificate {path}: {message}")]
    Certificate {
        /// Where it was read from.
        path: String,
        /// Why it is refused.
        message: String,
    },
}

impl ControlError {
    /// The HTTP status of an [`ControlError::Api`] error (`None` for the others).
    pub fn status(&self) -> Option<u16> {
        match self {
            ControlError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// Result with [`ControlError`].
pub type Result<T, E = ControlError> = std::result::Result<T, E>;
