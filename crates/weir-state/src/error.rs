//! The one error enum of the state crate, and its mapping into [`weir_api::Error`].

use std::path::PathBuf;

/// Everything that can go wrong in keyed state.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// redb failed (I/O, corruption, a full disk); `context` says what Weir was doing.
    #[error("state storage error while {context}: {source}")]
    Storage {
        /// What Weir was doing, e.g. `committing the journal`.
        context: String,
        /// redb's error.
        #[source]
        source: Box<redb::Error>,
    },
    /// Redis failed (connection lost, refused, a command or script error); `context` says
    /// what Weir was doing. The task fails and restarts from its last checkpoint.
    #[error("Redis state error at {server} while {context}: {source}")]
    Redis {
        /// The server, without credentials.
        server: String,
        /// What Weir was doing, e.g. `committing the journal`.
        context: String,
        /// The Redis client's error.
        #[source]
        source: Box<redis::RedisError>,
    },
    /// Creating the state directory failed.
    #[error("cannot create state directory {path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file was written with another state format version; Weir refuses to guess.
    #[error(
        "state file {path} has format version {found}, this Weir reads version {expected}; \
         restore the state from a snapshot or use the matching Weir release"
    )]
    FormatVersion {
        /// The database file.
        path: PathBuf,
        /// The version stored in the file.
        found: u32,
        /// The version this build reads and writes.
        expected: u32,
    },
    /// A descriptor's schema version differs from the stored one and no migration is registered.
    #[error(
        "state `{state}` of operator `{operator}` is stored with schema version {stored}, \
         the descriptor asks for version {requested}; register a migration from version \
         {stored} or keep the old version"
    )]
    SchemaVersion {
        /// The operator id.
        operator: String,
        /// The state name.
        state: String,
        /// The stored version.
        stored: u32,
        /// The descriptor's version.
        requested: u32,
    },
    /// A descriptor's kind (value/map/list/set) differs from the stored registration.
    #[error(
        "state `{state}` of operator `{operator}` is stored as a {stored} state, \
         the descriptor declares a {requested} state"
    )]
    KindMismatch {
        /// The operator id.
        operator: String,
        /// The state name.
        state: String,
        /// The stored kind.
        stored: weir_api::StateKind,
        /// The descriptor's kind.
        requested: weir_api::StateKind,
    },
    /// A registered migration function failed on a stored value.
    #[error(
        "migration of state `{state}` of operator `{operator}` from schema version {from} failed: {message}"
    )]
    Migration {
        /// The operator id.
        operator: String,
        /// The state name.
        state: String,
        /// The version migrated from.
        from: u32,
        /// The migration's message.
        message: String,
    },
    /// A value could not be encoded or decoded with the state codec.
    #[error("codec error in state `{state}`: {message}")]
    Codec {
        /// The state name.
        state: String,
        /// postcard's message.
        message: String,
    },
    /// A state was accessed before it was registered.
    #[error("state `{state}` of operator `{operator}` is used before it is registered")]
    UnknownState {
        /// The operator id.
        operator: String,
        /// The state name.
        state: String,
    },
    /// A state was accessed before `set_current_key`.
    #[error("operator `{operator}` accessed keyed state without a current key")]
    NoCurrentKey {
        /// The operator id.
        operator: String,
    },
    /// A stored key or value does not have the documented layout.
    #[error("corrupt state entry: {message}")]
    Corrupt {
        /// What does not fit the layout.
        message: String,
    },
    /// A snapshot segment cannot be written or read, or does not match its descriptor.
    #[error("state segment {path}: {message}")]
    Segment {
        /// The segment's state path.
        path: String,
        /// What is wrong (Parquet's message, a missing metadata key, a mismatch).
        message: String,
    },
    /// A segment's bytes do not have the SHA-256 its descriptor records.
    #[error("state segment {path} has SHA-256 {actual}, its descriptor records {expected}")]
    Checksum {
        /// The segment's state path.
        path: String,
        /// The checksum in the descriptor.
        expected: String,
        /// The checksum of the bytes read.
        actual: String,
    },
    /// The object store failed to write or read a segment.
    #[error("object store error while {context} {path}: {source}")]
    ObjectStore {
        /// What Weir was doing, e.g. `writing segment`.
        context: String,
        /// The object path.
        path: String,
        /// object_store's error.
        #[source]
        source: Box<object_store::Error>,
    },
    /// Snapshots were taken with another `stateShardCount` than the plan restoring them.
    #[error(
        "state of operator `{operator}` was snapshotted with stateShardCount {stored}, the plan \
         restores it with stateShardCount {requested}; keep the shard count or ask for a \
         shard-count migration (re-keying by a key hash)"
    )]
    ShardCountChanged {
        /// The operator id.
        operator: String,
        /// The count the segments were written with.
        stored: u32,
        /// The count of the restoring plan.
        requested: u32,
    },
    /// The row codec ([`crate::row_codec`]) does not cover an Arrow data type.
    #[error(
        "the state row codec cannot store Arrow type {data_type}; it stores nulls, booleans, \
         integers, floats, decimals, dates, times, timestamps, durations, intervals, strings, \
         binaries, lists, structs and dictionaries of those"
    )]
    UnsupportedRowType {
        /// The Arrow data type, as Arrow displays it.
        data_type: String,
    },
    /// The row codec was given columns it cannot encode together, or a value too large for
    /// its length fields.
    #[error("state row codec: {message}")]
    RowCodec {
        /// What does not fit.
        message: String,
    },
    /// A background task of a snapshot or restore panicked or was cancelled.
    #[error("background task failed while {context}: {message}")]
    Background {
        /// What the task was doing.
        context: String,
        /// The join error.
        message: String,
    },
}

impl StateError {
    /// Wraps any redb error with what Weir was doing.
    pub(crate) fn storage(context: impl Into<String>, source: impl Into<redb::Error>) -> Self {
        StateError::Storage {
            context: context.into(),
            source: Box::new(source.into()),
        }
    }

    /// Shorthand for [`StateError::Corrupt`].
    pub(crate) fn corrupt(message: impl Into<String>) -> Self {
        StateError::Corrupt {
            message: message.into(),
        }
    }
}

/// Result with [`StateError`].
pub type StateResult<T> = std::result::Result<T, StateError>;

impl From<StateError> for weir_api::Error {
    fn from(err: StateError) -> Self {
        match &err {
            StateError::Storage { context, .. } => {
                weir_api::Error::external("state storage (redb)", context.clone(), &err, false)
            }
            StateError::Redis { context, .. } => {
                weir_api::Error::external("state storage (Redis)", context.clone(), &err, true)
            }
            StateError::ObjectStore { context, .. } => {
                weir_api::Error::external("object store", context.clone(), &err, true)
            }
            StateError::Io { path, .. } => weir_api::Error::external(
                "file system",
                format!("creating state directory {}", path.display()),
                &err,
                false,
            ),
            StateError::FormatVersion { .. }
            | StateError::SchemaVersion { .. }
            | StateError::KindMismatch { .. }
            | StateError::Migration { .. }
            | StateError::ShardCountChanged { .. }
            | StateError::UnsupportedRowType { .. } => {
                weir_api::Error::schema("keyed state", err.to_string())
            }
            StateError::Codec { .. }
            | StateError::UnknownState { .. }
            | StateError::NoCurrentKey { .. }
            | StateError::Corrupt { .. }
            | StateError::Segment { .. }
            | StateError::Checksum { .. }
            | StateError::RowCodec { .. }
            | StateError::Background { .. } => weir_api::Error::Internal(err.to_string()),
        }
    }
}
