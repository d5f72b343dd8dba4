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

mod expr;
pub(crate) use expr::single_input;
mod filter;
mod project;

pub use filter::FilterFactory;
pub use project::ProjectFactory;
