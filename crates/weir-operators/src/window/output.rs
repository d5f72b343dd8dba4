//! What window operators emit: result batches (their late rows: [`crate::late`]).

use super::config::{LatePolicyKind, WindowConfig};
use super::image::WindowId;
use arrow::array::{
    Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, TimestampMillisecondArray, UInt32Array,
};
use arrow::compute::take;
use std::sync::Arc;
use weir_api::{Error, Result};

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
