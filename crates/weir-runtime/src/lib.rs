//! Weir's local runtime: prepares a job against a [`Registry`] of operators and connectors (the
//! deep build behind `weir validate`), then runs every subtask of its PartitionedPlan as a tokio
//! task, connected by bounded, ordered channels.
//!
//! Depends on `weir-api` and `weir-plan` only; connectors plug in through the registry.

mod attempt;
pub mod builtin;
pub mod checkpoint;
mod edge_writer;
mod error;
pub mod event_time;
mod executor;
mod input_gate;
mod metrics;
pub mod operators;
pub mod partition;
mod prepare;
mod registry;
mod task;
mod task_checkpoint;
mod task_state;
mod union;
pub mod window;

pub use checkpoint::coordinator::CheckpointSummary;
pub use checkpoint::{CheckpointConfig, CheckpointStorage, RestoreFrom};
pub use error::{Error, Result};
pub use executor::{DEFAULT_CHECKPOINT_DIR, JobSummary, RunOptions, RunningJob, start, start_with};
pub use metrics::{JobMetrics, MetricsSnapshot, OperatorSnapshot};
pub use prepare::{PreparedJob, PreparedNode};
pub use registry::Registry;
pub use union::UnionFactory;
