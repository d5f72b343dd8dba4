//! Late rows: rows at or behind the watermark when they arrive. Every event-time operator hands
//! them to its late policy here: dropped and counted, or routed to a side output with the
//! reason in a column of its own.
//!
//! Windows also know the policy `update` (their `late` option, [`crate::window`]); the
//! operators that keep rows until the watermark passes them (`over_aggregate`, `dedup_first`,
//! `window_top_n`, `interval_join`) take [`RowLateOptions`]: drop or route.

use arrow::array::{Array, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow::compute::filter_record_batch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use serde::Deserialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use weir_api::{Error, Output, Result, SideOutput, TaskContext};

/// Name of the column that says why a row went to the late side output (policy route).
pub const LATE_REASON: &str = "__weir_late_reason";
/// Reason of a row whose time (or window) the watermark had passed when it arrived.
pub const REASON_LATE: &str = "late";
/// Reason of a row without an event time.
pub const REASON_NULL_TIME: &str = "null event time";
/// Name of the side output holding late rows (policy route) of a single-input operator.
pub const LATE_OUTPUT: &str = "late";

/// What happens to the late rows of an operator that keeps rows until the watermark passes
/// them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowLatePolicy {
    /// Dropped and counted (`dropped` in the run's summary and metrics).
    #[default]
    Drop,
    /// Emitted on the late side output with a reason column, and counted as routed.
    Route,
}

/// `late: {policy: route}` of `over_aggregate`, `dedup_first`, `window_top_n` and
/// `interval_join`.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowLateOptions {
    /// The policy (default `drop`).
    #[serde(default)]
    pub policy: RowLatePolicy,
}

/// The schema of routed late rows: the input's columns, then [`LATE_REASON`].
pub fn late_schema(input: &Schema) -> SchemaRef {
    let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(LATE_REASON, DataType::Utf8, false));
    Arc::new(Schema::new(fields))
}

/// The schema of the late rows of an input with `input`'s columns when `policy` routes them.
pub fn routed_schema(policy: RowLatePolicy, input: &Schema) -> Option<SchemaRef> {
    (policy == RowLatePolicy::Route).then(|| late_schema(input))
}

/// The side output `name` of routed late rows of an input with `input`'s columns, when
/// `policy` routes them.
pub fn late_output(policy: RowLatePolicy, name: &str, input: &Schema) -> Option<SideOutput> {
    routed_schema(policy, input).map(|schema| SideOutput {
        name: name.to_owned(),
        schema,
    })
}

/// Hands late rows to the policy: the side output with a reason (route), or a count of dropped
/// rows; counts the late rows that updated a window's result (a window's policy update).
#[derive(Debug)]
pub struct LateRows {
    /// The routed rows' schema and side output index (policy route).
    route: Option<(SchemaRef, usize)>,
    dropped: Arc<AtomicU64>,
    routed: Arc<AtomicU64>,
    updated: Arc<AtomicU64>,
}

impl LateRows {
    /// Late rows counted in `ctx`'s dropped, routed and updated late-row counters; routed with
    /// `schema` to side output 0 when given one.
    pub fn new(route: Option<SchemaRef>, ctx: &TaskContext) -> Self {
        Self {
            route: route.map(|schema| (schema, 0)),
            dropped: Arc::clone(&ctx.dropped_rows),
            routed: Arc::clone(&ctx.late_routed_rows),
            updated: Arc::clone(&ctx.late_updated_rows),
        }
    }

    /// The same, routing to side output `index` instead (an operator with several inputs has
    /// one late output per input).
    pub fn at_output(mut self, index: usize) -> Self {
        if let Some((_, port)) = &mut self.route {
            *port = index;
        }
        self
    }

    /// `rows` late rows of one batch went into results already emitted (policy update).
    pub(crate) fn note_updated(&self, rows: usize) {
        if rows > 0 {
            self.updated.fetch_add(rows as u64, Ordering::Relaxed);
        }
    }

    /// Routes or drops the rows of `batch` with `taken[row] == false`: those with a null event
    /// time in `times` and those the watermark had passed.
    ///
    /// # Errors
    /// Arrow errors selecting the rows.
    pub(crate) fn handle(
        &self,
        batch: &RecordBatch,
        times: &Int64Array,
        taken: &[bool],
        out: &mut Output,
    ) -> Result<()> {
        let late = taken.iter().filter(|t| !**t).count();
        if late == 0 {
            return Ok(());
        }
        let Some((schema, port)) = &self.route else {
            self.dropped.fetch_add(late as u64, Ordering::Relaxed);
            return Ok(());
        };
        let mask: BooleanArray = taken.iter().map(|t| Some(!t)).collect();
        let rows = filter_record_batch(batch, &mask)
            .map_err(|e| Error::arrow("selecting late rows", e))?;
        let reasons: StringArray = taken
            .iter()
            .enumerate()
            .filter(|(_, t)| !**t)
            .map(|(i, _)| {
                Some(if times.is_null(i) {
                    REASON_NULL_TIME
                } else {
                    REASON_LATE
                })
            })
            .collect();
        let mut columns = rows.columns().to_vec();
        columns.push(Arc::new(reasons));
        let routed = RecordBatch::try_new(Arc::clone(schema), columns)
            .map_err(|e| Error::arrow("building late rows", e))?;
        out.emit_side(*port, routed);
        self.routed.fetch_add(late as u64, Ordering::Relaxed);
        Ok(())
    }
}
