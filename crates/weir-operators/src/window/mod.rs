//! The `window` operator: event-time windows (tumble, hop, cumulate, session) with vectorized
//! aggregates and late-data policies. See docs/windows.md for the user's view.

mod aggregate;
mod assign;
mod config;
mod image;
mod output;
mod session;
mod time_window;

#[cfg(test)]
mod marks_tests;
#[cfg(test)]
mod reference_tests;
#[cfg(test)]
mod tests;

pub use crate::late::LateRows;
pub use aggregate::{AggregateSet, GroupSpace};
pub use assign::{Assigned, WindowKind, assign_windows};
pub use config::{
    AggregateOption, LATE_OUTPUT, LATE_REASON, LateOptions, LatePolicyKind, REASON_LATE,
    REASON_NULL_TIME, UPDATE_MARKER, WindowConfig, WindowOptions, WindowSpec,
};
pub(crate) use image::owned_shards;
pub use image::{ImageWindows, RestoredWindows, WindowId, WindowState};
pub use session::SessionWindowOperator;
pub use time_window::TimeWindowOperator;

use arrow::datatypes::SchemaRef;
use std::sync::Arc;
use weir_api::{
    Error, Operator, OperatorArgs, OperatorFactory, PreparedOperator, Result, SideOutput,
    TaskContext, decode_options,
};

/// Creates `window` operators from job-spec options.
#[derive(Debug, Default, Clone, Copy)]
pub struct WindowFactory;

impl OperatorFactory for WindowFactory {
    fn prepare(&self, spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>> {
        let options: WindowOptions = decode_options(spec.options, spec.options_path)?;
        let input = crate::expr::single_input("window", spec.operator_id, spec.input_schemas)?;
        let cfg = WindowConfig::resolve(&options, &input, spec.options_path)?;
        Ok(Arc::new(PreparedWindow::new(cfg)))
    }
}

/// A window operator resolved against its input, ready to create instances.
#[derive(Debug)]
pub struct PreparedWindow {
    cfg: Arc<WindowConfig>,
}

impl PreparedWindow {
    /// Wraps a resolved configuration (the SQL front end builds one directly).
    pub fn new(cfg: WindowConfig) -> Self {
        Self { cfg: Arc::new(cfg) }
    }
}

impl PreparedOperator for PreparedWindow {
    fn output_schema(&self) -> SchemaRef {
        Arc::clone(&self.cfg.output_schema)
    }

    fn side_outputs(&self) -> Vec<SideOutput> {
        if self.cfg.policy == LatePolicyKind::Route {
            vec![SideOutput {
                name: LATE_OUTPUT.to_owned(),
                schema: Arc::clone(&self.cfg.late_schema),
            }]
        } else {
            Vec::new()
        }
    }

    fn describe(&self) -> String {
        format!(
            "window {:?} keys {:?} late {:?}",
            self.cfg.kind,
            self.cfg
                .key_schema
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect::<Vec<_>>(),
            self.cfg.policy
        )
    }

    fn key_columns(&self) -> Option<Vec<String>> {
        Some(
            self.cfg
                .key_schema
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect(),
        )
    }

    fn create(&self, ctx: &TaskContext) -> Result<Box<dyn Operator>> {
        let keyed = ctx.state_shard_count.is_some();
        if ctx.parallelism > 1 && !keyed {
            let keys: Vec<&str> = self
                .cfg
                .key_schema
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect();
            return Err(Error::config(
                format!("operator `{}`", ctx.operator_id),
                if keys.is_empty() {
                    format!(
                        "a window without key_by runs at parallelism 1, not {}",
                        ctx.parallelism
                    )
                } else {
                    format!(
                        "a keyed window at parallelism {} needs its input hash-partitioned on \
                         its keys: `input: {{from: ..., partition: {{hash: [{}]}}}}`",
                        ctx.parallelism,
                        keys.join(", ")
                    )
                },
            ));
        }
        let state = WindowState::new(ctx)?;
        let restored = WindowState::restore(ctx, &self.cfg)?;
        let route =
            (self.cfg.policy == LatePolicyKind::Route).then(|| Arc::clone(&self.cfg.late_schema));
        let late = LateRows::new(route, ctx);
        Ok(match self.cfg.kind {
            WindowKind::Session { gap } => Box::new(SessionWindowOperator::new(
                Arc::clone(&self.cfg),
                gap,
                late,
                state,
                restored,
            )?),
            _ => Box::new(TimeWindowOperator::new(
                Arc::clone(&self.cfg),
                late,
                state,
                restored,
            )?),
        })
    }
}
