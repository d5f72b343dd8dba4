//! The built-in operators a job is built from, and the expression planning they share.
//!
//! - [`FilterFactory`] (`filter`): keeps rows whose SQL predicate is true.
//! - [`ProjectFactory`] (`project`): computes output columns from SQL expressions.
//! - [`UnionFactory`] (`union`): merges inputs of the same columns into one stream.
//! - [`interval_join::IntervalJoinFactory`] (`interval_join`): rows of two inputs with equal
//!   keys and event times within bounds of each other, inner or outer.
//! - [`over::OverFactory`] (`over_aggregate`): aggregates over each row's preceding rows of its
//!   partition in event-time order (SQL's `OVER` windows).
//! - [`table_join::TableJoinFactory`] (`table_join`): a stream joined on keys with a bounded
//!   table read in full first.
//! - [`group_aggregate::GroupAggregateFactory`] (`group_aggregate`): aggregates per key
//!   without a window; its results are updating rows (`+I`, `-U`, `+U`, `-D`).
//! - [`dedup::DedupFactory`] (`dedup_first`): the first row of each key in event-time order.
//! - [`window_tvf::WindowTvfFactory`] (`window_tvf`): each row once per tumbling, sliding or
//!   cumulating window it belongs to, with the window's bounds.
//! - [`window_top_n::WindowTopNFactory`] (`window_top_n`): the first N rows of each window and
//!   key in a given order, emitted when the window ends.
//! - [`temporal_join::TemporalJoinFactory`] (`temporal_join`): each row of a stream with the
//!   version of a versioned table current at its event time.
//! - [`top_n::CurrentTopNFactory`] (`top_n`): the current first N rows of each key, as
//!   updating rows.
//! - [`upsert_normalize::UpsertNormalizeFactory`] (`upsert_normalize`): an upsert stream made
//!   a full changelog (`-U` before every `+U`, whole rows in `-D`).
//! - [`window::WindowFactory`] (`window`): event-time windows with vectorized aggregates and
//!   late-data policies (docs/windows.md).
//! - [`with_computed_columns`]: sources' computed columns (`sources[i].computed`).
//! - [`with_columns`]: the columns a source reads (`sources[i].columns`).
//! - [`with_prune`]: the conditions a source may skip input by (`sources[i].prune`).
//!
//! `filter`, `project` and computed columns plan their SQL once, in
//! [`weir_api::OperatorFactory::prepare`], with a DataFusion session (dialect, type coercion,
//! simplification and the full scalar function registry). Each subtask's operator then only
//! evaluates the shared physical expressions on every batch; nothing is re-planned per batch.
//! Errors name the option's JSON path and the expression text, with DataFusion's message (which
//! carries the position of a parse error). Scalar functions registered with the runtime's
//! `Registry::register_udf` can be called from all of them, as can Flink's functions that
//! DataFusion lacks ([`flink_functions`]).
//!
//! This crate stands on `weir-api`, `weir-plan` and `weir-state` (the windows' state images) and
//! DataFusion; it knows nothing of tasks, channels or checkpoints, which are the runtime's.

mod computed;
pub mod dedup;
pub mod event_time;
mod expr;
mod filter;
mod flink_formats;
mod flink_functions;
pub mod group_aggregate;
pub mod interval_join;
mod keyed_rows;
pub mod late;
mod mapped_source;
pub mod over;
mod pending;
mod pending_rows;
mod project;
mod ranking;
pub mod regular_join;
mod shard_progress;
mod source_columns;
mod source_prune;
pub mod table_join;
pub mod temporal_join;
#[cfg(test)]
mod test_state;
pub mod top_n;
mod ttl;
mod union;
pub mod upsert_normalize;
mod waiting;
pub mod window;
pub mod window_top_n;
pub mod window_tvf;

pub use computed::with_computed_columns;
/// The DataFusion crate the expressions are planned with, so that user scalar functions
/// ([`ScalarUDF`](datafusion::logical_expr::ScalarUDF), for `Registry::register_udf`) are built
/// against the same version.
pub use datafusion;
pub use expr::{ExprCompiler, SharedSession};
pub use filter::FilterFactory;
pub use flink_functions::{ToTimestampLtz, flink_functions};
pub use project::ProjectFactory;
pub use source_columns::with_columns;
pub use source_prune::with_prune;
pub use union::UnionFactory;
