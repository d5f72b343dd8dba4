//! Weir's local runtime: prepares a job against a [`Registry`] of operators and connectors (the
//! deep build behind `weir validate`), then runs every subtask of its PartitionedPlan as a tokio
//! task, connected by bounded, ordered channels.
//!
//! Depends on `weir-api` and `weir-plan` only; connectors plug in through the registry.

pub mod builtin;
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
mod task_state;
mod union;
pub mod window;

pub use error::{Error, Result};
pub use executor::{JobSummary, RunOptions, RunningJob, start, start_with};
pub use metrics::{JobMetrics, MetricsSnapshot, OperatorSnapshot};
pub use prepare::{PreparedJob, PreparedNode};
pub use registry::Registry;
pub use union::UnionFactory;
