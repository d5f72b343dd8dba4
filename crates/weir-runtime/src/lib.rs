//! Weir's local runtime: runs every subtask of a PartitionedPlan as a tokio task, connected by
//! bounded ordered channels; hosts the built-in operators and connectors.

pub mod builtin;
pub mod operators;
pub mod partition;
