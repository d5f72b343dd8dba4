//! The `interval_join` operator: rows of two inputs with equal keys whose event times lie
//! within bounds of each other (`right.time - left.time` in `[lower, upper]`), as Flink's
//! interval join; inner, left, right and full outer. See docs/sql.md for the user's view.
//!
//! Each row is judged against the watermark of its own input (and its split's): a row at or
//! behind it is late and dropped (counted), so which rows join does not depend on how far the
//! other input has got. Every other row is matched against the other side's rows kept in
//! keyed state, and kept itself until the operator's watermark (the lower of both inputs')
//! passes its bound; then an unmatched row of an outer side is emitted padded with nulls.
//! The output watermark stays behind the input's by the bounds' reach (and, with padding,
//! two time buckets), so no row emitted later is behind it.

mod buffer;
mod config;
mod occupancy;
mod operator;

pub use config::{IntervalJoinConfig, IntervalJoinOptions, JoinKind, LATE_LEFT, LATE_RIGHT};
pub use operator::IntervalJoinOperator;

use crate::expr::{ExprCompiler, SharedSession};
use arrow::datatypes::SchemaRef;
use std::sync::Arc;
use weir_api::{
    Operator, OperatorArgs, OperatorFactory, PreparedOperator, Result, SideOutput, TaskContext,
};

/// Creates `interval_join` operators from job-spec options.
#[derive(Debug, Default)]
pub struct IntervalJoinFactory {
    /// Plans the join's `condition`.
    compiler: ExprCompiler,
}

impl IntervalJoinFactory {
    /// A factory planning conditions with a session shared with its registry, so that they
    /// see the scalar functions registered there.
    pub fn shared(session: SharedSession) -> Self {
        Self {
            compiler: ExprCompiler::shared(session),
        }
    }
}

impl OperatorFactory for IntervalJoinFactory {
    fn prepare(&self, spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>> {
        Ok(Arc::new(PreparedIntervalJoin {
            cfg: Arc::new(IntervalJoinConfig::resolve(spec, &self.compiler)?),
        }))
    }
}

/// An interval join resolved against its inputs.
#[derive(Debug)]
pub struct PreparedIntervalJoin {
    cfg: Arc<IntervalJoinConfig>,
}

impl PreparedOperator for PreparedIntervalJoin {
    /// Its buffer decides when rows reach keyed state, not what keyed state holds.
    fn tuning_options(&self) -> Vec<&'static str> {
        vec!["buffer_bytes"]
    }

    fn output_schema(&self) -> SchemaRef {
        Arc::clone(&self.cfg.output)
    }

    fn side_outputs(&self) -> Vec<SideOutput> {
        let late = |name: &str, side: usize| {
            crate::late::late_output(self.cfg.late, name, &self.cfg.inputs[side])
        };
        late(LATE_LEFT, 0)
            .into_iter()
            .chain(late(LATE_RIGHT, 1))
            .collect()
    }

    fn describe(&self) -> String {
        format!(
            "interval_join ({:?}): [{}] = [{}], right - left in [{} ms, {} ms]",
            self.cfg.join,
            self.cfg.key_names[0].join(", "),
            self.cfg.key_names[1].join(", "),
            self.cfg.lower,
            self.cfg.upper
        )
    }

    fn key_columns(&self) -> Option<Vec<String>> {
        Some(self.cfg.key_names[0].clone())
    }

    fn input_key_columns(&self) -> Option<Vec<Vec<String>>> {
        Some(self.cfg.key_names.to_vec())
    }

    fn create(&self, ctx: &TaskContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(IntervalJoinOperator::new(
            Arc::clone(&self.cfg),
            ctx,
        )?))
    }
}
