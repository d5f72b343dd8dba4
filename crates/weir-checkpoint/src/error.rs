//! The one error enum of the checkpoint crate, its classification and its mapping into
//! [`weir_api::Error`].

use crate::layout;
use crate::lifecycle::AttemptId;
use crate::lifecycle::EpochState;
use crate::problem::ManifestProblem;
use std::fmt;
use weir_api::{Epoch, ErrorKind};

/// How many items an error message lists before it says how many more there are.
const LISTED: usize = 10;

/// Everything that can go wrong while writing, reading, validating or cleaning up checkpoints.
///
/// Every variant that concerns a stored object names its path (relative to the object store's
/// root, i.e. including the store's base path).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// The object store failed; `context` says what Weir was doing.
    #[error("object store error while {context} {path}: {source}")]
    ObjectStore {
        /// What Weir was doing, e.g. `publishing manifest`.
        context: String,
        /// The object path.
        path: String,
        /// object_store's error.
        #[source]
        source: Box<object_store::Error>,
    },
    /// No manifest exists for the epoch asked for.
    #[error("checkpoint manifest {path} does not exist")]
    ManifestNotFound {
        /// The manifest's path.
        path: String,
    },
    /// The stored manifest (or a log record) is not the canonical JSON Weir writes: truncated,
    /// reformatted, not JSON, an unknown field, a wrong type.
    #[error("checkpoint file {path} is corrupt: {message}")]
    Corrupt {
        /// The file's path.
        path: String,
        /// What does not fit.
        message: String,
    },
    /// The manifest's bytes do not hash to the checksum it records.
    #[error(
        "checkpoint manifest {path} fails its checksum: it records SHA-256 {recorded}, \
         its bytes hash to {computed}; the file was modified or damaged after it was written"
    )]
    Checksum {
        /// The manifest's path.
        path: String,
        /// The `checksum` field as stored.
        recorded: String,
        /// The SHA-256 computed from the stored bytes (rule in [`crate::manifest`]).
        computed: String,
    },
    /// The manifest was written in another manifest format version.
    #[error(
        "checkpoint manifest {path} has format version {found}, this Weir reads version \
         {expected}; use the matching Weir release"
    )]
    FormatVersion {
        /// The manifest's path.
        path: String,
        /// The stored `formatVersion`.
        found: u64,
        /// [`crate::MANIFEST_FORMAT_VERSION`].
        expected: u32,
    },
    /// The manifest does not describe a complete checkpoint of the expected plan.
    #[error("checkpoint manifest {path} {}: {}", verdict(problems), list(problems))]
    Invalid {
        /// The manifest's path.
        path: String,
        /// Every problem found, in a stable order.
        problems: Vec<ManifestProblem>,
    },
    /// Another manifest with different content is already published for the epoch.
    #[error(
        "checkpoint manifest {path} is already published with different content (fields that \
         differ: {}); an epoch is published once: is a second coordinator running?",
        differing.join(", ")
    )]
    Conflict {
        /// The manifest's path.
        path: String,
        /// The top-level fields whose values differ.
        differing: Vec<String>,
    },
    /// The manifest object of an epoch is damaged or gone, and so is the copy its DURABLE epoch
    /// log record carries.
    #[error("{primary}; its copy in the epoch log cannot be used either: {copy}")]
    CopyDamaged {
        /// What is wrong with the manifest object.
        primary: Box<CheckpointError>,
        /// What is wrong with the copy.
        copy: Box<CheckpointError>,
    },
    /// State segments a manifest references are missing or have another size.
    #[error("checkpoint manifest {manifest} is incomplete: {}", list(segments))]
    MissingSegments {
        /// The manifest's path.
        manifest: String,
        /// Every segment that is missing or has the wrong size.
        segments: Vec<SegmentIssue>,
    },
    /// A move of the epoch lifecycle that the lifecycle does not allow.
    #[error(
        "epoch {}: illegal lifecycle transition {} -> {to}",
        epoch.map_or_else(|| "?".to_owned(), |e| e.to_string()),
        from.map_or("(none)", |s| s.as_str())
    )]
    IllegalTransition {
        /// The epoch, where known.
        epoch: Option<Epoch>,
        /// The current state; `None` when nothing was recorded yet.
        from: Option<EpochState>,
        /// The state asked for.
        to: EpochState,
    },
    /// A caller passed an argument the operation cannot work with.
    #[error("invalid argument: {message}")]
    InvalidArgument {
        /// What is wrong and what would be accepted.
        message: String,
    },
    /// A newer attempt of the job exists: this attempt is a zombie and must stop. Nothing
    /// was written.
    #[error(
        "attempt {attempt} was superseded by attempt {current}: checkpoint namespace          `{namespace}` holds {}, so this attempt may not publish; a newer run of the job owns          the namespace and this one must stop",
        layout::attempt_path(namespace, *current)
    )]
    Fenced {
        /// The attempt that tried to act.
        attempt: AttemptId,
        /// The newest attempt in the namespace.
        current: AttemptId,
        /// The checkpoint namespace.
        namespace: String,
    },
    /// A file-system call on a local checkpoint directory failed (see
    /// [`CheckpointStore::with_local_root`](crate::CheckpointStore::with_local_root)).
    #[error("I/O error while {context} {path}: {source}")]
    Io {
        /// What Weir was doing, e.g. `syncing segment`.
        context: String,
        /// The file or directory.
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Serializing a manifest or a log record failed (a bug: the types are plain data).
    #[error("cannot encode {context}: {message}")]
    Encode {
        /// What was being encoded.
        context: String,
        /// serde_json's message.
        message: String,
    },
}

/// A state segment that a manifest references but the store does not hold as described.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentIssue {
    /// The segment's full object path.
    pub path: String,
    /// The size its descriptor records.
    pub expected_bytes: u64,
    /// The size found; `None` when the object does not exist.
    pub found_bytes: Option<u64>,
}

impl fmt::Display for SegmentIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.found_bytes {
            None => write!(f, "segment {} is missing", self.path),
            Some(found) => write!(
                f,
                "segment {} has {found} bytes, its descriptor records {}",
                self.path, self.expected_bytes
            ),
        }
    }
}

/// "does not fit this job" when every problem is an incompatibility, else "is invalid".
fn verdict(problems: &[ManifestProblem]) -> &'static str {
    if !problems.is_empty() && problems.iter().all(ManifestProblem::is_incompatibility) {
        "does not fit this job"
    } else {
        "is invalid"
    }
}

fn list<T: fmt::Display>(items: &[T]) -> String {
    let mut out: Vec<String> = items.iter().take(LISTED).map(ToString::to_string).collect();
    if items.len() > LISTED {
        out.push(format!("and {} more", items.len() - LISTED));
    }
    out.join("; ")
}

impl CheckpointError {
    /// Wraps an object_store error with what Weir was doing and the path.
    pub(crate) fn store(
        context: impl Into<String>,
        path: impl fmt::Display,
        source: object_store::Error,
    ) -> Self {
        CheckpointError::ObjectStore {
            context: context.into(),
            path: path.to_string(),
            source: Box::new(source),
        }
    }

    /// Shorthand for [`CheckpointError::Corrupt`].
    pub(crate) fn corrupt(path: impl fmt::Display, message: impl Into<String>) -> Self {
        CheckpointError::Corrupt {
            path: path.to_string(),
            message: message.into(),
        }
    }

    /// Who has to act: the user (a wrong plan or argument, a manifest of another release), an
    /// external system (the object store failed or holds damaged data), or Weir (a broken
    /// contract such as an illegal transition or two coordinators publishing one epoch).
    pub fn kind(&self) -> ErrorKind {
        match self {
            CheckpointError::ObjectStore { .. }
            | CheckpointError::Io { .. }
            | CheckpointError::Corrupt { .. }
            | CheckpointError::Checksum { .. }
            | CheckpointError::CopyDamaged { .. }
            | CheckpointError::MissingSegments { .. } => ErrorKind::External,
            CheckpointError::ManifestNotFound { .. }
            | CheckpointError::FormatVersion { .. }
            | CheckpointError::InvalidArgument { .. }
            // Two runs of one job: restarting the older one would fence the newer one.
            | CheckpointError::Fenced { .. } => ErrorKind::User,
            CheckpointError::Invalid { .. } if self.is_incompatible() => ErrorKind::User,
            CheckpointError::Invalid { .. }
            | CheckpointError::Conflict { .. }
            | CheckpointError::IllegalTransition { .. }
            | CheckpointError::Encode { .. } => ErrorKind::Internal,
        }
    }

    /// Whether retrying the same call may succeed: object store failures other than
    /// "not found", "already exists", a failed precondition, an invalid path or an
    /// unsupported operation. Local I/O errors are not: after a failed `fsync` the kernel may
    /// have dropped the dirty pages, so a second `fsync` can succeed without the data.
    pub fn is_retryable(&self) -> bool {
        match self {
            CheckpointError::ObjectStore { source, .. } => !matches!(
                **source,
                object_store::Error::NotFound { .. }
                    | object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. }
                    | object_store::Error::InvalidPath { .. }
                    | object_store::Error::NotImplemented { .. }
                    | object_store::Error::NotSupported { .. }
            ),
            _ => false,
        }
    }

    /// Whether the manifest belongs to another plan, job, pipeline or state format: recovery
    /// from it (or from any older manifest) must be refused rather than fall back.
    pub fn is_incompatible(&self) -> bool {
        match self {
            CheckpointError::Invalid { problems, .. } => {
                problems.iter().any(ManifestProblem::is_incompatibility)
            }
            _ => false,
        }
    }

    /// Whether this error says the manifest itself is unusable (gone, damaged, incomplete,
    /// invalid) as opposed to the store failing to answer, the plan being incompatible or the
    /// manifest being of another Weir release:
    /// [`CheckpointStore::latest_durable`](crate::CheckpointStore::latest_durable) falls back
    /// to an older manifest only for these.
    pub fn is_unusable_manifest(&self) -> bool {
        match self {
            CheckpointError::ManifestNotFound { .. }
            | CheckpointError::Corrupt { .. }
            | CheckpointError::Checksum { .. }
            | CheckpointError::CopyDamaged { .. }
            | CheckpointError::MissingSegments { .. } => true,
            CheckpointError::Invalid { .. } => !self.is_incompatible(),
            _ => false,
        }
    }
}

/// Result with [`CheckpointError`].
pub type CheckpointResult<T> = std::result::Result<T, CheckpointError>;

impl From<CheckpointError> for weir_api::Error {
    fn from(err: CheckpointError) -> Self {
        match err.kind() {
            ErrorKind::External => {
                let context = match &err {
                    CheckpointError::ObjectStore { context, path, .. }
                    | CheckpointError::Io { context, path, .. } => format!("{context} {path}"),
                    _ => "reading a checkpoint".to_owned(),
                };
                let retryable = err.is_retryable();
                weir_api::Error::external("checkpoint storage", context, &err, retryable)
            }
            ErrorKind::User => weir_api::Error::config("checkpoint", err.to_string()),
            ErrorKind::Internal => weir_api::Error::Internal(err.to_string()),
        }
    }
}
