//! What a window table function windows: the rows of a declared table, read by its source, or
//! the rows of a view, translated like any other query. A view's `DESCRIPTOR` column must be
//! one of its time attributes (a table's rowtime, a window aggregation's `window_time`, an
//! interval join's times), as Flink requires: only there is no row behind the watermark, so
//! which rows are late depends on the input alone. That is how windows cascade (a window over
//! a window aggregation's `window_time`) and follow a join.

use super::{Translator, quote};
use crate::error::Result;
use crate::tvf::WindowTvfTable;
use arrow::datatypes::DataType;

/// The input of a window table function, in physical columns.
pub(super) struct WindowInput {
    /// The node whose rows are windowed.
    pub(super) node: String,
    /// Per column of the table or view, the physical column that holds it, and its type.
    pub(super) columns: Vec<(String, DataType)>,
    /// The physical time column (`DESCRIPTOR`).
    pub(super) time: String,
    /// The physical `PARTITION BY` columns (sessions).
    pub(super) partition_by: Vec<String>,
    /// The declared table, when the function reads one (not a view).
    pub(super) table: Option<String>,
}

impl WindowInput {
    /// The physical column names, in the table's or view's order.
    pub(super) fn names(&self) -> impl Iterator<Item = &String> {
        self.columns.iter().map(|(name, _)| name)
    }

    /// The type of physical column `name`.
    pub(super) fn column_type(&self, name: &str) -> Option<&DataType> {
        self.columns
            .iter()
            .find(|(c, _)| c == name)
            .map(|(_, data_type)| data_type)
    }
}

impl Translator<'_> {
    /// The input of `tvf`: its table's source, or its view translated.
    ///
    /// # Errors
    /// A view whose `DESCRIPTOR` column is not a time attribute, or whose rows are updating
    /// results; the errors of translating the view.
    pub(super) fn window_input(&mut self, tvf: &WindowTvfTable) -> Result<WindowInput> {
        let fields = &tvf.schema.fields()[..tvf.schema.fields().len().saturating_sub(3)];
        let Some(plan) = &tvf.view else {
            return Ok(WindowInput {
                node: self.job.source(&tvf.table, self.here())?,
                columns: fields
                    .iter()
                    .map(|f| (f.name().clone(), f.data_type().clone()))
                    .collect(),
                time: tvf.time_column.clone(),
                partition_by: tvf.partition_by.clone(),
                table: Some(tvf.table.clone()),
            });
        };
        let stream = self.plan(plan)?;
        if stream.marker {
            return Err(self.unsupported_at(
                &tvf.table,
                &format!("a window over `{}`, whose rows are updated", tvf.table),
                "a window aggregation under late.policy 'update' emits corrections, which a \
                 window cannot take; route or drop its late rows",
            ));
        }
        let physical = |name: &str| {
            fields
                .iter()
                .position(|f| f.name() == name)
                .and_then(|i| stream.columns.get(i).cloned())
        };
        if !physical(&tvf.time_column).is_some_and(|t| stream.rowtimes.contains(&t)) {
            return Err(self.unsupported_at(
                &tvf.time_column,
                &format!(
                    "DESCRIPTOR({}) over the view `{}`, where it is not a time attribute",
                    tvf.time_column, tvf.table
                ),
                "a window over a view needs one of its time attributes: a table's \
                     WATERMARK column, the window_time of a window aggregation grouped by it, \
                     or a time of an interval join, selected unchanged",
            ));
        }
        for c in &tvf.partition_by {
            if physical(c).is_none() {
                return Err(self.here().invalid(format!(
                    "PARTITION BY {c}: no such column in `{}`",
                    tvf.table
                )));
            }
        }
        // The view's rows under the view's column names, and nothing else: the physical
        // columns behind them may have other names (a renamed `window_start` keeps its own), and
        // the window adds `window_start` and `window_end` of its own.
        let expressions = fields
            .iter()
            .zip(&stream.columns)
            .map(|(f, c)| format!("{} AS {}", quote(c), quote(f.name())))
            .collect();
        let node = self.project(&stream.node, expressions);
        Ok(WindowInput {
            node,
            columns: fields
                .iter()
                .map(|f| (f.name().clone(), f.data_type().clone()))
                .collect(),
            time: tvf.time_column.clone(),
            partition_by: tvf.partition_by.clone(),
            table: None,
        })
    }
}
