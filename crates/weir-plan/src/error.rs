//! The plan crate's error type.

/// Everything that can go wrong while reading a job spec or compiling plans.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The spec file is not valid YAML/JSON.
    #[error("{file}:{line}:{column}: {message}")]
    Syntax {
        /// The spec file.
        file: String,
        /// 1-based line of the error (0 when unknown).
        line: usize,
        /// 1-based column of the error (0 when unknown).
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// A field of the spec is invalid; `path` is its JSON path (`operators[1].input`).
    #[error("{file}: {path}: {message}")]
    Spec {
        /// The spec file (or `<builder>` for models built in Rust).
        file: String,
        /// JSON path of the offending field.
        path: String,
        /// What is wrong and what would be accepted.
        message: String,
    },
    /// The graph has a cycle through the named nodes.
    #[error("{file}: the job graph has a cycle: {}", nodes.join(" -> "))]
    Cycle {
        /// The spec file.
        file: String,
        /// Nodes on the cycle, first repeated at the end.
        nodes: Vec<String>,
    },
    /// A key column has a type the stable hash does not define.
    #[error("key column `{column}` has type {data_type}, which cannot be used as a key")]
    UnsupportedKeyType {
        /// The column's name (or index).
        column: String,
        /// Its Arrow type.
        data_type: String,
    },
    /// A plan's JSON does not decode.
    #[error("invalid plan JSON: {0}")]
    PlanJson(#[from] serde_json::Error),
}

/// Result with the plan crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
