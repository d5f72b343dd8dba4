//! The runtime crate's error type.

use weir_api::ErrorKind;

/// Everything that can fail while preparing or running a job.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The spec did not compile into plans.
    #[error(transparent)]
    Plan(#[from] weir_plan::Error),
    /// A node's type or connector is not registered.
    #[error("{file}: {path}: unknown {kind} `{name}` (known: {})", known.join(", "))]
    UnknownType {
        /// The spec file.
        file: String,
        /// JSON path of the `type`/`connector` field.
        path: String,
        /// `operator`, `source connector` or `sink connector`.
        kind: &'static str,
        /// The name asked for.
        name: String,
        /// Registered names.
        known: Vec<String>,
    },
    /// A node failed the deep build (options, schemas, edges, semantic mode).
    #[error("{file}: {}", located(path, source))]
    Prepare {
        /// The spec file.
        file: String,
        /// JSON path of the node (or its field) that failed.
        path: String,
        /// What failed.
        #[source]
        source: weir_api::Error,
    },
    /// A task failed while running.
    #[error("task {task} failed: {source}")]
    Task {
        /// `operator[subtask/parallelism]` of the failing operator.
        task: String,
        /// What failed.
        #[source]
        source: weir_api::Error,
    },
    /// A task panicked; this is a bug in Weir or in a plugin.
    #[error("task {task} panicked: {message}")]
    Panic {
        /// The task's vertex and subtask.
        task: String,
        /// The panic payload.
        message: String,
    },
    /// A channel closed while its peer still needed it: a downstream or upstream task stopped.
    #[error("task {task}: a channel closed because another task stopped")]
    ChannelClosed {
        /// The task that noticed.
        task: String,
    },
    /// The checkpoint storage failed or refused (a corrupt or incompatible manifest, a newer
    /// attempt that fenced this one).
    #[error("{context}: {source}")]
    Checkpoint {
        /// What the runtime was doing.
        context: String,
        /// What failed.
        #[source]
        source: weir_checkpoint::CheckpointError,
    },
    /// Keyed state could not be snapshotted or restored.
    #[error("{context}: {source}")]
    State {
        /// What the runtime was doing.
        context: String,
        /// What failed.
        #[source]
        source: weir_state::StateError,
    },
    /// The checkpoint a restore chose is damaged: a state segment's bytes are not the ones its
    /// manifest records, or it is gone.
    #[error(
        "cannot restore: the checkpoint of epoch {epoch} in {storage} is damaged: {damage}; {}",
        older_advice(older)
    )]
    DamagedCheckpoint {
        /// The damaged epoch.
        epoch: weir_api::Epoch,
        /// The checkpoint storage, as the user named it.
        storage: String,
        /// Every damaged segment, naming its file.
        damage: String,
        /// Older epochs that pass the checks a restore makes before loading state.
        older: Vec<weir_api::Epoch>,
    },
    /// A restore was refused: the checkpoint does not fit the job.
    #[error("cannot restore: {message}")]
    Restore {
        /// What differs or is missing.
        message: String,
    },
    /// The deployment plan does not place the job on this process: it belongs to another
    /// partitioned plan, or puts a task on a node or transport this runtime does not run.
    #[error("cannot run the deployment plan: {message}")]
    Deployment {
        /// What does not fit.
        message: String,
    },
    /// A broken invariant of the runtime (a bug).
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// Who has to act on the error (see [`weir_api::ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Plan(_) | Error::UnknownType { .. } => ErrorKind::User,
            Error::Prepare { source, .. } | Error::Task { source, .. } => source.kind(),
            Error::Panic { .. } | Error::ChannelClosed { .. } | Error::Internal(_) => {
                ErrorKind::Internal
            }
            Error::Restore { .. } | Error::Deployment { .. } => ErrorKind::User,
            Error::DamagedCheckpoint { .. } => ErrorKind::External,
            Error::Checkpoint { source, .. } if source.is_incompatible() => ErrorKind::User,
            Error::Checkpoint { .. } | Error::State { .. } => ErrorKind::External,
        }
    }

    /// Whether the same work may succeed if tried again (an unreachable broker or store), as
    /// the connector or the checkpoint store that failed says; a user error never is.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Prepare { source, .. } | Error::Task { source, .. } => source.is_retryable(),
            Error::Checkpoint { source, .. } => source.is_retryable(),
            _ => false,
        }
    }

    /// Whether a newer attempt of the job took over: restarting would fence that one in turn.
    pub fn is_fenced(&self) -> bool {
        matches!(
            self,
            Error::Checkpoint {
                source: weir_checkpoint::CheckpointError::Fenced { .. },
                ..
            }
        )
    }

    /// Whether the error only follows from another task's failure.
    pub(crate) fn is_secondary(&self) -> bool {
        matches!(self, Error::ChannelClosed { .. })
    }
}

/// The message of a prepare error: errors that carry their own JSON path (config, expression)
/// are shown as they are, others after the node's path.
fn located(path: &str, source: &weir_api::Error) -> String {
    match source {
        weir_api::Error::Config { .. } | weir_api::Error::Expression { .. } => source.to_string(),
        _ => format!("{path}: {source}"),
    }
}

/// Result with the runtime crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a user can do about a damaged checkpoint, given the older epochs that could be restored.
fn older_advice(older: &[weir_api::Epoch]) -> String {
    if older.is_empty() {
        return "no older checkpoint can be restored: start without --restore to run the job \
                from the beginning"
            .to_owned();
    }
    let list = older
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let noun = if older.len() == 1 { "epoch" } else { "epochs" };
    format!(
        "older checkpoints that could be restored: {noun} {list} (restore one with --restore \
         <epoch>; the output that sinks published for later epochs is withdrawn first)"
    )
}
