//! Weir's runtime: prepares a job against a [`Registry`] of operators and connectors (the deep
//! build behind `weir validate`), then runs every subtask of its PartitionedPlan as a tokio task,
//! connected by bounded, ordered channels through input gates that merge watermarks and align
//! barriers. With checkpoints on, the coordinator runs epochs and recovery restores a job from
//! its newest durable one (docs/fault-tolerance.md).
//!
//! Depends on `weir-api`, `weir-plan`, `weir-state` (each task's keyed state), `weir-checkpoint`
//! (manifests, fencing, the epoch log) and `weir-operators` (the built-in operators the
//! registry starts with). Connectors plug in through the registry; this crate depends on none.

mod attempt;
pub mod checkpoint;
#[cfg(test)]
mod concurrent_splits_tests;
mod edge_writer;
mod error;
pub mod event_time;
mod executor;
mod input_gate;
mod metrics;
pub mod partition;
mod prepare;
mod profiles;
mod registry;
mod run_context;
mod schema_check;
mod split_assignment;
mod split_share;
mod task;
mod task_state;

pub use checkpoint::epoch_stats::CheckpointSummary;
pub use checkpoint::epoch_stats::{EPOCH_HISTORY, EpochStats, TaskEpochStats};
pub use checkpoint::recovery::namespace as checkpoint_namespace;
pub use checkpoint::{CheckpointConfig, CheckpointLocation, RestoreFrom};
pub use error::{Error, Result};
pub use executor::{
    CheckpointProbe, CheckpointTrigger, DEFAULT_CHECKPOINT_DIR, RunSummary, RunningJob, start,
    start_with,
};
pub use metrics::{
    JobMetrics, MetricsSnapshot, OperatorSnapshot, SplitLag, SplitPosition, SubtaskSnapshot,
};
pub use prepare::{PreparedJob, PreparedNode};
pub use registry::Registry;
pub use run_context::RunOptions;
pub use split_share::SplitShare;
