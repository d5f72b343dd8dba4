//! Source and sink capabilities and the job's semantic mode (docs/fault-tolerance.md, "Semantic
//! modes").

use serde::{Deserialize, Serialize};

/// What a source can promise about replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SourceCapability {
    /// Can re-read from a recorded position and gives the same records again.
    Replayable,
    /// Reads only committed data of a transactional system.
    TransactionalRead,
    /// May deliver a record more than once after a failure.
    AtLeastOnce,
    /// No delivery guarantee.
    BestEffort,
}

/// What a sink can promise about commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SinkCapability {
    /// Pre-commits per epoch and commits after the checkpoint is durable.
    TwoPhaseCommit,
    /// Stages output and publishes it atomically at commit.
    StagedAtomicCommit,
    /// Writes an epoch log that readers use to skip uncommitted output.
    OutboxEpochLog,
    /// Writing the same record twice has the effect of writing it once.
    Idempotent,
    /// Upserts by key, so replays overwrite.
    UpsertByKey,
    /// May write a record more than once after a failure.
    AtLeastOnce,
    /// No delivery guarantee.
    BestEffort,
}

/// The delivery guarantee a job declares and reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SemanticMode {
    /// Every record affects the output exactly once, with transactional commits.
    StrictExactlyOnce,
    /// Exactly-once effect through idempotent or upserting sinks.
    EffectivelyOnce,
    /// No record is lost; some may be duplicated after a failure.
    AtLeastOnce,
    /// No guarantee.
    BestEffort,
}

/// Whether a source ends by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Boundedness {
    /// Reads a finite input and then ends (files).
    Bounded,
    /// Runs until stopped (Kafka).
    Unbounded,
}
