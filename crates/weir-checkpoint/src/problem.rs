//! What can be wrong with a manifest, in words a user can act on.

use std::fmt;
use weir_api::{OperatorId, TaskId, VertexId};

/// Fields whose mismatch means the manifest belongs to another job, plan or state format:
/// recovery must be refused, not fall back to an older manifest (an older one would be as
/// foreign as this one).
const INCOMPATIBLE_FIELDS: [&str; 4] = [
    "jobId",
    "pipelineId",
    "planFingerprint",
    "stateFormatVersion",
];

/// One thing wrong with a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ManifestProblem {
    /// A field has another value than expected.
    Mismatch {
        /// The JSON field, e.g. `planFingerprint` or `stateShardCount.agg`.
        field: String,
        /// The expected value.
        expected: String,
        /// The value in the manifest.
        found: String,
    },
    /// A task of the plan's checkpoint ACK set has no snapshot.
    MissingTask(TaskId),
    /// A task has more than one snapshot.
    DuplicateTask {
        /// The task.
        task: TaskId,
        /// How many snapshots it has.
        count: usize,
    },
    /// A snapshot of a task the plan's checkpoint ACK set does not have.
    ExtraTask(TaskId),
    /// A segment, watermark, source offset, enumerator or sink entry is wrong.
    Entry {
        /// Which entry, e.g. `segment checkpoint/ns/7/agg/0/3/count.parquet`.
        entry: String,
        /// What is wrong with it.
        message: String,
    },
    /// The checkpoint was taken by a job with another logic and has state, tasks, offsets or
    /// transactions of an operator this plan does not have (removed, or its id changed).
    OperatorNotInPlan(OperatorId),
    /// The checkpoint was taken by a job with another logic and has no task for this vertex
    /// head operator (added, its id changed, or chained differently).
    OperatorNotInCheckpoint(OperatorId),
    /// The checkpoint was taken by a job with another logic and another `stateShardCount` for
    /// a vertex (`None`: the vertex is not keyed there). Keyed state cannot be re-sharded.
    StateShardCountChanged {
        /// The vertex.
        vertex: VertexId,
        /// This plan's count.
        expected: Option<u32>,
        /// The checkpoint's count.
        found: Option<u32>,
    },
    /// The checkpoint was taken by a job with another logic, and nothing more specific can be
    /// said from the manifest: an operator's options, a key or an edge changed.
    LogicChanged {
        /// This plan's logical fingerprint.
        expected: String,
        /// The checkpoint's logical fingerprint.
        found: String,
    },
    /// The job changed in a way the rules of changing a job refuse without an explicit
    /// action (`weir_plan::evolution`): one operator and why.
    Evolution(weir_plan::evolution::OperatorChange),
}

impl ManifestProblem {
    /// Whether the problem means "another job, plan or state format" rather than "damaged".
    pub fn is_incompatibility(&self) -> bool {
        match self {
            ManifestProblem::Mismatch { field, .. } => {
                INCOMPATIBLE_FIELDS.contains(&field.as_str())
            }
            ManifestProblem::OperatorNotInPlan(_)
            | ManifestProblem::OperatorNotInCheckpoint(_)
            | ManifestProblem::StateShardCountChanged { .. }
            | ManifestProblem::LogicChanged { .. }
            | ManifestProblem::Evolution(_) => true,
            ManifestProblem::MissingTask(_)
            | ManifestProblem::DuplicateTask { .. }
            | ManifestProblem::ExtraTask(_)
            | ManifestProblem::Entry { .. } => false,
        }
    }

    pub(crate) fn mismatch(
        field: impl Into<String>,
        expected: impl fmt::Display,
        found: impl fmt::Display,
    ) -> Self {
        ManifestProblem::Mismatch {
            field: field.into(),
            expected: expected.to_string(),
            found: found.to_string(),
        }
    }

    pub(crate) fn entry(entry: impl Into<String>, message: impl Into<String>) -> Self {
        ManifestProblem::Entry {
            entry: entry.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ManifestProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ManifestProblem::Mismatch {
                field,
                expected,
                found,
            } => write!(f, "{field} is `{found}`, expected `{expected}`"),
            ManifestProblem::MissingTask(task) => write!(f, "task {task} has no snapshot"),
            ManifestProblem::DuplicateTask { task, count } => {
                write!(f, "task {task} has {count} snapshots")
            }
            ManifestProblem::ExtraTask(task) => {
                write!(f, "task {task} is not in the plan's checkpoint ACK set")
            }
            ManifestProblem::Entry { entry, message } => write!(f, "{entry}: {message}"),
            ManifestProblem::OperatorNotInPlan(op) => write!(
                f,
                "operator `{op}` has state, tasks, offsets or transactions in the checkpoint \
                 but is not in this plan (removed, or its id changed)"
            ),
            ManifestProblem::OperatorNotInCheckpoint(op) => write!(
                f,
                "operator `{op}` of this plan has no task in the checkpoint (added, its id \
                 changed, or it is chained differently)"
            ),
            ManifestProblem::StateShardCountChanged {
                vertex,
                expected,
                found,
            } => {
                let show = |c: &Option<u32>| c.map_or("not keyed".to_owned(), |c| c.to_string());
                write!(
                    f,
                    "stateShardCount of vertex `{vertex}` is {} in the checkpoint and {} in \
                     this plan; keyed state cannot be re-sharded",
                    show(found),
                    show(expected)
                )
            }
            ManifestProblem::LogicChanged { expected, found } => write!(
                f,
                "the job's logic changed (options, keys or edges): the checkpoint's logical \
                 fingerprint is {found}, this plan's is {expected}"
            ),
            ManifestProblem::Evolution(change) => {
                let rule = match &change.verdict {
                    weir_plan::evolution::Verdict::Refused { rule } => rule.says(),
                    _ => "allowed",
                };
                write!(
                    f,
                    "operator `{}` ({}): {} (rule: {rule})",
                    change.operator_id, change.type_name, change.detail
                )
            }
        }
    }
}
