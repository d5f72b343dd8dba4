//! The two small types every part of the checkpoint crate names: the attempt of a job run and
//! where an epoch is in its lifecycle. They depend on nothing else here, so the error, layout,
//! log and manifest modules can all use them without importing one another.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One run of a job: a restart gets a new attempt id, so output and reports of an older attempt
/// can be told apart and fenced: see
/// [`CheckpointStore::acquire_attempt`](crate::CheckpointStore::acquire_attempt).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct AttemptId(pub u64);

impl fmt::Display for AttemptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Where an epoch is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EpochState {
    /// The coordinator allocated the epoch id and its set of expected acknowledgements.
    Created,
    /// Source readers inject barrier N at a safe point.
    Injecting,
    /// Multi-input tasks wait for barrier N on every input channel.
    Aligning,
    /// Tasks write their state snapshots.
    Snapshotting,
    /// Sinks pre-committed the epoch's transactions.
    Precommitted,
    /// The manifest and every segment are persisted: recovery can start from this epoch.
    Durable,
    /// Sinks committed (or can retry committing) the epoch's transactions.
    Committed,
    /// The epoch will never become durable.
    Aborted,
}

impl EpochState {
    /// Every state, in lifecycle order.
    pub const ALL: [EpochState; 8] = [
        EpochState::Created,
        EpochState::Injecting,
        EpochState::Aligning,
        EpochState::Snapshotting,
        EpochState::Precommitted,
        EpochState::Durable,
        EpochState::Committed,
        EpochState::Aborted,
    ];

    /// The name used in JSON and in log record file names, e.g. `DURABLE`.
    pub fn as_str(self) -> &'static str {
        match self {
            EpochState::Created => "CREATED",
            EpochState::Injecting => "INJECTING",
            EpochState::Aligning => "ALIGNING",
            EpochState::Snapshotting => "SNAPSHOTTING",
            EpochState::Precommitted => "PRECOMMITTED",
            EpochState::Durable => "DURABLE",
            EpochState::Committed => "COMMITTED",
            EpochState::Aborted => "ABORTED",
        }
    }

    /// Whether no transition leaves this state.
    pub fn is_terminal(self) -> bool {
        matches!(self, EpochState::Committed | EpochState::Aborted)
    }

    /// Whether the state is written to the epoch log.
    pub fn is_persisted(self) -> bool {
        matches!(
            self,
            EpochState::Created | EpochState::Durable | EpochState::Committed | EpochState::Aborted
        )
    }

    /// Whether `self -> to` is one legal step of the lifecycle.
    pub fn can_transition_to(self, to: EpochState) -> bool {
        use EpochState::*;
        matches!(
            (self, to),
            (Created, Injecting)
                | (Injecting, Aligning)
                | (Aligning, Snapshotting)
                | (Snapshotting, Precommitted)
                | (Precommitted, Durable)
                | (Durable, Committed)
                | (
                    Created | Injecting | Aligning | Snapshotting | Precommitted,
                    Aborted
                )
        )
    }
}

impl fmt::Display for EpochState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
