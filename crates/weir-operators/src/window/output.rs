//! What window operators emit: result batches and late rows.

use super::config::{LatePolicyKind, REASON_LATE, REASON_NULL_TIME, WindowConfig};
use super::image::WindowId;
use arrow::array::{
    Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
    UInt32Array,
};
use arrow::compute::{filter_record_batch, take};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use weir_api::{Error, Output, Result, TaskContext};

/// `take` of every column by the same indices.
pub(crate) fn take_all(columns: &[ArrayRef], rows: &UInt32Array) -> Result<Vec<ArrayRef>> {
    columns
        .iter()
        .map(|c| take(c.as_ref(), rows, None).map_err(|e| Error::arrow("selecting window rows", e)))
        .collect()
}

/// One result row per group: keys, the window bounds, the aggregate values and, under the
/// update policy, the marker (`None`: all false, a first result).
pub(crate) fn result_batch(
    cfg: &WindowConfig,
    keys: &[ArrayRef],
    window: WindowId,
    values: Vec<ArrayRef>,
    marker: Option<BooleanArray>,
) -> Result<RecordBatch> {
    let rows = values
        .first()
        .map(|v| v.len())
        .or_else(|| keys.first().map(|k| k.len()))
        .unwrap_or(0);
    result_batch_bounds(
        cfg,
        keys,
        &Int64Array::from(vec![window.start; rows]),
        &Int64Array::from(vec![window.end; rows]),
        values,
        marker,
    )
}

/// Like [`result_batch`], with per-row window bounds (sessions).
pub(crate) fn result_batch_bounds(
    cfg: &WindowConfig,
    keys: &[ArrayRef],
    starts: &Int64Array,
    ends: &Int64Array,
    values: Vec<ArrayRef>,
    marker: Option<BooleanArray>,
) -> Result<RecordBatch> {
    let rows = starts.len();
    let bound = |a: &Int64Array| -> ArrayRef {
        Arc::new(
            TimestampMillisecondArray::new(a.values().clone(), None)
                .with_timezone_opt(cfg.time_zone.clone()),
        )
    };
    let mut columns: Vec<ArrayRef> = keys.to_vec();
    columns.push(bound(starts));
    columns.push(bound(ends));
    columns.extend(values);
    if cfg.policy == LatePolicyKind::Update {
        let marker = marker.unwrap_or_else(|| BooleanArray::from(vec![false; rows]));
        columns.push(Arc::new(marker));
    }
    RecordBatch::try_new(Arc::clone(&cfg.output_schema), columns)
        .map_err(|e| Error::arrow("building a window result", e))
}

/// Hands rows no window took to the late policy: the side output with a reason (route), or a
/// count of dropped rows (drop, update); counts the late rows that updated a result (update).
#[derive(Debug)]
pub struct LateRows {
    route: Option<Arc<arrow::datatypes::Schema>>,
    dropped: Arc<AtomicU64>,
    routed: Arc<AtomicU64>,
    updated: Arc<AtomicU64>,
}

impl LateRows {
    /// Late rows of an operator with `cfg`, counted in `ctx`'s dropped, routed and updated
    /// late-row counters.
    pub fn new(cfg: &WindowConfig, ctx: &TaskContext) -> Self {
        Self {
            route: (cfg.policy == LatePolicyKind::Route).then(|| Arc::clone(&cfg.late_schema)),
            dropped: Arc::clone(&ctx.dropped_rows),
            routed: Arc::clone(&ctx.late_routed_rows),
            updated: Arc::clone(&ctx.late_updated_rows),
        }
    }

    /// `rows` late rows of one batch went into results already emitted (update policy).
    pub(crate) fn note_updated(&self, rows: usize) {
        if rows > 0 {
            self.updated.fetch_add(rows as u64, Ordering::Relaxed);
        }
    }

    /// Routes or drops the rows of `batch` with `taken[row] == false`: those with a null event
    /// time and those whose every window had closed.
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
        let Some(schema) = &self.route else {
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
        out.emit_side(0, routed);
        self.routed.fetch_add(late as u64, Ordering::Relaxed);
        Ok(())
    }
}
