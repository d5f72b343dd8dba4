//! Built-in stateless operators, evaluated with DataFusion physical expressions on whole batches.
//!
//! - [`FilterFactory`] (`filter`): keeps rows whose SQL predicate is true.
//! - [`ProjectFactory`] (`project`): computes output columns from SQL expressions.
//!
//! Both plan their SQL once, in [`weir_api::OperatorFactory::prepare`], with a DataFusion session
//! (dialect, type coercion, simplification and the full scalar function registry). Each subtask's
//! operator then only evaluates the shared physical expressions on every batch; nothing is
//! re-planned per batch. Errors name the option's JSON path and the expression text, with
//! DataFusion's message (which carries the position of a parse error).
//!
//! Sources' computed columns (`sources[i].computed`) are planned and evaluated the same way.
//! Scalar functions registered with `Registry::register_udf` can be called from all of them.

mod computed;
mod expr;
pub(crate) use computed::with_computed_columns;
pub(crate) use expr::{ExprCompiler, SharedSession, single_input};
mod filter;
mod project;

/// The DataFusion crate the expressions are planned with, so that user scalar functions
/// ([`ScalarUDF`](datafusion::logical_expr::ScalarUDF), for `Registry::register_udf`) are built
/// against the same version.
pub use datafusion;
pub use filter::FilterFactory;
pub use project::ProjectFactory;
