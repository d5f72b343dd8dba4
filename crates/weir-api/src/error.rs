//! The error type every plugin, connector and built-in operator returns.

use arrow::error::ArrowError;
use std::fmt;

/// Who has to act on an error: the job's author, an external system's operator, or Weir's developers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad job spec, bad SQL, bad input record, bad option: retrying the same input fails again.
    User,
    /// A storage system, broker or file system failed; a retry may help.
    External,
    /// A bug in Weir or a plugin broke a contract.
    Internal,
}

/// Where a bad record came from: the file (or topic/partition) and, where known, line and column.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecordLocation {
    /// File path or URL, or another name of the input (`topic/partition`).
    pub input: String,
    /// 1-based line number in the file, where the format has lines.
    pub line: Option<u64>,
    /// Column (field) name, where the error is about one field.
    pub column: Option<String>,
}

impl fmt::Display for RecordLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.input)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(column) = &self.column {
            write!(f, " (column `{column}`)")?;
        }
        Ok(())
    }
}

/// The one error enum of the API crate; operators, sources and sinks return it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An option of a job spec node is missing or invalid; `path` is its JSON path in the spec.
    #[error("invalid configuration at {path}: {message}")]
    Config {
        /// JSON path of the offending field, e.g. `operators[1].options.predicate`.
        path: String,
        /// What is wrong and what would be accepted.
        message: String,
    },
    /// A schema does not fit: a missing column, a wrong type, an unsupported type.
    #[error("schema error in {context}: {message}")]
    Schema {
        /// The operator, connector or file whose schema is wrong.
        context: String,
        /// What is wrong.
        message: String,
    },
    /// A SQL expression (filter predicate, projection) does not parse or plan.
    #[error("invalid expression at {path}: `{expression}`: {message}")]
    Expression {
        /// JSON path of the option that holds the expression.
        path: String,
        /// The expression text as written.
        expression: String,
        /// Parser or planner message, with the position in the expression where known.
        message: String,
    },
    /// An input record is malformed or a value does not fit its declared type.
    #[error("bad record at {location}: {message}")]
    BadRecord {
        /// File, line and column of the record.
        location: RecordLocation,
        /// What is wrong with it.
        message: String,
    },
    /// An external system (file system, object store, broker) failed.
    #[error("{system} error while {context}: {message}")]
    External {
        /// The system that failed, e.g. `object store`, `kafka`.
        system: String,
        /// What Weir was doing.
        context: String,
        /// The system's message.
        message: String,
        /// Whether retrying the same call may succeed.
        retryable: bool,
    },
    /// An Arrow kernel failed.
    #[error("arrow error while {context}: {source}")]
    Arrow {
        /// What Weir was doing.
        context: String,
        /// The kernel's error.
        #[source]
        source: ArrowError,
    },
    /// A plugin operator failed with its own error.
    #[error("plugin operator `{operator}` failed: {source}")]
    Plugin {
        /// The plugin's registered name or operator id.
        operator: String,
        /// The plugin's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A contract inside Weir was broken.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// Classifies the error for restart policies and for messages to the user.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Config { .. }
            | Error::Schema { .. }
            | Error::Expression { .. }
            | Error::BadRecord { .. }
            | Error::Plugin { .. } => ErrorKind::User,
            Error::External { .. } => ErrorKind::External,
            Error::Arrow { .. } | Error::Internal(_) => ErrorKind::Internal,
        }
    }

    /// Whether retrying the same work may succeed (only some external failures).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::External {
                retryable: true,
                ..
            }
        )
    }

    /// Shorthand for [`Error::Config`].
    pub fn config(path: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Config {
            path: path.into(),
            message: message.into(),
        }
    }

    /// Shorthand for [`Error::Schema`].
    pub fn schema(context: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Schema {
            context: context.into(),
            message: message.into(),
        }
    }

    /// Wraps an Arrow error with what Weir was doing when it happened.
    pub fn arrow(context: impl Into<String>, source: ArrowError) -> Self {
        Error::Arrow {
            context: context.into(),
            source,
        }
    }

    /// Shorthand for [`Error::External`].
    pub fn external(
        system: impl Into<String>,
        context: impl Into<String>,
        message: impl fmt::Display,
        retryable: bool,
    ) -> Self {
        Error::External {
            system: system.into(),
            context: context.into(),
            message: message.to_string(),
            retryable,
        }
    }
}

/// Result with the API crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The longest part of a user's value that messages quote ([`excerpt`]).
pub const EXCERPT_CHARS: usize = 200;

/// `value` as an error message quotes it: whole when short, else its first [`EXCERPT_CHARS`]
/// characters and how much was left out, so that a huge bad value (a 100 MB field, a generated
/// expression) does not make a huge message.
pub fn excerpt(value: &str) -> std::borrow::Cow<'_, str> {
    match value.char_indices().nth(EXCERPT_CHARS) {
        None => std::borrow::Cow::Borrowed(value),
        Some((end, _)) => std::borrow::Cow::Owned(format!(
            "{}... ({} more bytes)",
            &value[..end],
            value.len() - end
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_record_names_file_line_and_column() {
        let err = Error::BadRecord {
            location: RecordLocation {
                input: "data/bids.csv".into(),
                line: Some(17),
                column: Some("price".into()),
            },
            message: "`abc` is not a valid Int64".into(),
        };
        assert_eq!(
            err.to_string(),
            "bad record at data/bids.csv:17 (column `price`): `abc` is not a valid Int64"
        );
        assert_eq!(err.kind(), ErrorKind::User);
        assert!(!err.is_retryable());
    }

    #[test]
    fn external_errors_carry_retryability() {
        let err = Error::external("object store", "listing s3://b/x", "timeout", true);
        assert_eq!(err.kind(), ErrorKind::External);
        assert!(err.is_retryable());
    }

    #[test]
    fn excerpts_cut_long_values_on_a_character_boundary() {
        assert_eq!(super::excerpt("short"), "short");
        let long = "é".repeat(300);
        let cut = super::excerpt(&long);
        assert!(cut.starts_with(&"é".repeat(super::EXCERPT_CHARS)), "{cut}");
        assert!(cut.ends_with("... (200 more bytes)"), "{cut}");
    }
}
