//! Predicate pushdown into Parquet: which rows of a split may satisfy a [`SourcePredicate`],
//! from the column-chunk statistics of its row groups and, where the file has one, its page
//! index.
//!
//! A range of rows (a row group, a page) is ruled out only when one condition provably holds
//! for none of its rows:
//!
//! - every value is null (null count = row count): no comparison and no `IS NOT NULL` holds;
//! - `IS NULL` with a null count of 0;
//! - `=` and `IN` with every value outside `[min, max]`; `<` / `<=` with `min` at or above
//!   (above) the value; `>` / `>=` with `max` at or below (below) it; `<>` when `min` and `max`
//!   both equal the value and are exact (not truncated).
//!
//! Bounds are used as bounds: a truncated `min` (a prefix) is still at most every value and a
//! truncated `max` at least every value, as Parquet requires. A statistic that is missing, a
//! null count that is not written, a column the file lacks or stores as another type than the
//! source reads, a sort order the statistics were not written in: nothing is ruled out by that
//! condition. Floating point: NaN is greater than every number in the comparisons the job's
//! filter makes and Parquet leaves NaN out of `min`/`max`, so `>`, `>=` and `<>` rule nothing
//! out on float columns (only all-null ranges), a NaN bound is unknown, and a zero bound is
//! widened to `-0.0` (min) or `+0.0` (max).

// Lists of row ranges that hold one range (`vec![0..rows]`) are meant as lists.
#![allow(clippy::single_range_in_vec_init)]

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Float64Array, Scalar, UInt64Array};
use arrow::compute::cast;
use arrow::compute::kernels::cmp;
use arrow::datatypes::{DataType, Float64Type, Schema};
use arrow::error::ArrowError;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::basic::{ColumnOrder, SortOrder};
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, RowGroupMetaData};
use parquet::file::page_index::column_index::ColumnIndexMetaData;
use std::ops::Range;
use weir_api::{ColumnPredicate, PruneOp, SourcePredicate};

/// What pruning kept of a split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Kept {
    /// The rows that may satisfy the predicate, relative to the split's first row: sorted,
    /// disjoint, not adjacent.
    pub(crate) ranges: Vec<Range<u64>>,
    /// Row groups of the split ruled out whole.
    pub(crate) groups_skipped: usize,
    /// Rows ruled out inside the row groups kept (by the page index).
    pub(crate) page_rows_skipped: u64,
}

/// The rows of row groups `groups` of the file that may satisfy `predicate`. `file_schema` is
/// the file's Arrow schema (as the reader decodes it): a condition is used only where its
/// column has the literal's type there.
pub(crate) fn keep_ranges(
    predicate: &SourcePredicate,
    metadata: &ParquetMetaData,
    file_schema: &Schema,
    groups: Range<usize>,
) -> Kept {
    let all_groups: Vec<usize> = (0..metadata.num_row_groups()).collect();
    let group_rows: Vec<u64> = metadata.row_groups()[groups.clone()]
        .iter()
        .map(|g| u64::try_from(g.num_rows()).unwrap_or(0))
        .collect();
    let total: u64 = group_rows.iter().sum();
    let parquet_schema = metadata.file_metadata().schema_descr();
    let usable: Vec<(&ColumnPredicate, StatisticsConverter<'_>, usize)> = predicate
        .conditions()
        .iter()
        .filter_map(|c| {
            let field = file_schema.field_with_name(&c.column).ok()?;
            if field.data_type() != c.values.data_type() {
                return None;
            }
            let converter = StatisticsConverter::try_new(&c.column, file_schema, parquet_schema)
                .ok()?
                .with_missing_null_counts_as_zero(false);
            let column = converter.parquet_column_index()?;
            let expected = parquet_schema.column(column).sort_order();
            let ordered = match metadata.file_metadata().column_order(column) {
                ColumnOrder::TYPE_DEFINED_ORDER(order) => order == expected,
                ColumnOrder::UNDEFINED => expected == SortOrder::SIGNED,
                ColumnOrder::UNKNOWN => false,
            };
            (ordered && expected != SortOrder::UNDEFINED).then_some((c, converter, column))
        })
        .collect();
    if usable.is_empty() || total == 0 {
        return Kept {
            ranges: if total == 0 {
                Vec::new()
            } else {
                vec![0..total]
            },
            groups_skipped: 0,
            page_rows_skipped: 0,
        };
    }
    let metas = &metadata.row_groups()[groups.clone()];
    let mut group_may = vec![true; group_rows.len()];
    for (condition, converter, _) in &usable {
        let stats = group_stats(converter, metas, &group_rows);
        // Statistics that do not convert rule nothing out.
        let Ok(stats) = stats else { continue };
        if let Ok(may) = may_match(condition, &stats) {
            for (g, m) in group_may.iter_mut().zip(may) {
                *g &= m;
            }
        }
    }
    let mut kept = Kept {
        ranges: Vec::new(),
        groups_skipped: 0,
        page_rows_skipped: 0,
    };
    let mut start = 0;
    for (k, (&rows, may)) in group_rows.iter().zip(&group_may).enumerate() {
        let index = groups.start + k;
        if !may {
            kept.groups_skipped += 1;
        } else {
            let mut local = vec![0..rows];
            for (condition, converter, column) in &usable {
                if let Some(pages) =
                    page_ranges(condition, converter, *column, metadata, &all_groups[index])
                {
                    local = intersect(&local, &pages);
                }
            }
            let kept_rows: u64 = local.iter().map(|r| r.end - r.start).sum();
            kept.page_rows_skipped += rows - kept_rows;
            for r in local {
                push_range(&mut kept.ranges, start + r.start..start + r.end);
            }
        }
        start += rows;
    }
    kept
}

/// The row-group statistics of `converter`'s column in `metas`.
fn group_stats<'a>(
    converter: &StatisticsConverter<'a>,
    metas: &'a [RowGroupMetaData],
    rows: &[u64],
) -> Result<Chunks, ParquetError> {
    Ok(Chunks {
        mins: converter.row_group_mins(metas)?,
        maxes: converter.row_group_maxes(metas)?,
        nulls: converter.row_group_null_counts(metas)?,
        rows: rows.to_vec(),
        exact: Some((
            converter.row_group_is_min_value_exact(metas)?,
            converter.row_group_is_max_value_exact(metas)?,
        )),
    })
}

/// The rows of row group `group` whose pages of `column` may hold a row satisfying
/// `condition`; `None` when the page index does not tell.
fn page_ranges<'a>(
    condition: &ColumnPredicate,
    converter: &StatisticsConverter<'a>,
    column: usize,
    metadata: &'a ParquetMetaData,
    group: &'a usize,
) -> Option<Vec<Range<u64>>> {
    let (column_index, offset_index) = (metadata.column_index()?, metadata.offset_index()?);
    let index = column_index.get(*group)?.get(column)?;
    if matches!(index, ColumnIndexMetaData::NONE) {
        return None;
    }
    let locations = offset_index.get(*group)?.get(column)?.page_locations();
    let group_rows = u64::try_from(metadata.row_group(*group).num_rows()).ok()?;
    if locations.is_empty() || usize::try_from(index.num_pages()).ok()? != locations.len() {
        return None;
    }
    let mut bounds = Vec::with_capacity(locations.len());
    for (k, location) in locations.iter().enumerate() {
        let first = u64::try_from(location.first_row_index).ok()?;
        let end = match locations.get(k + 1) {
            Some(next) => u64::try_from(next.first_row_index).ok()?,
            None => group_rows,
        };
        if end < first || end > group_rows {
            return None;
        }
        bounds.push(first..end);
    }
    let groups = std::slice::from_ref(group);
    let stats = Chunks {
        mins: converter
            .data_page_mins(column_index, offset_index, groups)
            .ok()?,
        maxes: converter
            .data_page_maxes(column_index, offset_index, groups)
            .ok()?,
        nulls: converter
            .data_page_null_counts(column_index, offset_index, groups)
            .ok()?,
        rows: bounds.iter().map(|r| r.end - r.start).collect(),
        exact: None,
    };
    if stats.mins.len() != bounds.len() || stats.maxes.len() != bounds.len() {
        return None;
    }
    let may = may_match(condition, &stats).ok()?;
    let mut out = Vec::new();
    for (range, may) in bounds.into_iter().zip(may) {
        if may {
            push_range(&mut out, range);
        }
    }
    Some(out)
}

/// Statistics of consecutive row ranges (row groups or pages) of one column.
struct Chunks {
    /// Lower bounds (null: unknown).
    mins: ArrayRef,
    /// Upper bounds (null: unknown).
    maxes: ArrayRef,
    /// Null counts (null: unknown).
    nulls: UInt64Array,
    /// Rows per range.
    rows: Vec<u64>,
    /// Whether each min and max is the exact value (not truncated); `None`: unknown.
    exact: Option<(BooleanArray, BooleanArray)>,
}

/// Per range: whether some row of it may satisfy `condition`.
fn may_match(condition: &ColumnPredicate, stats: &Chunks) -> Result<Vec<bool>, ArrowError> {
    let n = stats.rows.len();
    let null_count = |i: usize| stats.nulls.is_valid(i).then(|| stats.nulls.value(i));
    let all_null: Vec<bool> = (0..n)
        .map(|i| null_count(i) == Some(stats.rows[i]))
        .collect();
    match condition.op {
        PruneOp::IsNull => return Ok((0..n).map(|i| null_count(i) != Some(0)).collect()),
        PruneOp::IsNotNull => return Ok(all_null.iter().map(|a| !a).collect()),
        _ => {}
    }
    let float = condition.values.data_type().is_floating();
    let (mins, maxes, values) = if float {
        (
            float_bounds(&stats.mins, true)?,
            float_bounds(&stats.maxes, false)?,
            cast(&condition.values, &DataType::Float64)?,
        )
    } else {
        (
            stats.mins.clone(),
            stats.maxes.clone(),
            condition.values.clone(),
        )
    };
    let values_nan = float
        && values
            .as_primitive::<Float64Type>()
            .iter()
            .any(|v| v.is_none_or(f64::is_nan));
    // Where a comparison of the bounds is true (false where a bound is unknown).
    let holds = |array: BooleanArray| -> Vec<bool> {
        (0..n)
            .map(|i| array.is_valid(i) && array.value(i))
            .collect()
    };
    let value = |k: usize| Scalar::new(values.slice(k, 1));
    let outside = |k: usize| -> Result<Vec<bool>, ArrowError> {
        let below = holds(cmp::gt(&mins, &value(k))?);
        let above = holds(cmp::lt(&maxes, &value(k))?);
        Ok(below.iter().zip(above).map(|(b, a)| *b || a).collect())
    };
    let ruled_out: Vec<bool> = if values_nan || values.is_empty() {
        vec![false; n]
    } else {
        match condition.op {
            PruneOp::Eq => outside(0)?,
            PruneOp::In => {
                let mut all = vec![true; n];
                for k in 0..values.len() {
                    for (a, o) in all.iter_mut().zip(outside(k)?) {
                        *a &= o;
                    }
                }
                all
            }
            PruneOp::Lt => holds(cmp::gt_eq(&mins, &value(0))?),
            PruneOp::LtEq => holds(cmp::gt(&mins, &value(0))?),
            // NaN satisfies these and is in no bound.
            PruneOp::Gt | PruneOp::GtEq | PruneOp::NotEq if float => vec![false; n],
            PruneOp::Gt => holds(cmp::lt_eq(&maxes, &value(0))?),
            PruneOp::GtEq => holds(cmp::lt(&maxes, &value(0))?),
            PruneOp::NotEq => match &stats.exact {
                Some((min_exact, max_exact)) => {
                    let low = holds(cmp::eq(&mins, &value(0))?);
                    let high = holds(cmp::eq(&maxes, &value(0))?);
                    (0..n)
                        .map(|i| {
                            low[i]
                                && high[i]
                                && min_exact.is_valid(i)
                                && min_exact.value(i)
                                && max_exact.is_valid(i)
                                && max_exact.value(i)
                        })
                        .collect()
                }
                None => vec![false; n],
            },
            PruneOp::IsNull | PruneOp::IsNotNull => vec![false; n],
        }
    };
    Ok((0..n).map(|i| !(all_null[i] || ruled_out[i])).collect())
}

/// Float bounds as `Float64`, NaN unknown, a zero widened to `-0.0` (`lower`) or `+0.0`.
fn float_bounds(bounds: &ArrayRef, lower: bool) -> Result<ArrayRef, ArrowError> {
    let wide = cast(bounds, &DataType::Float64)?;
    let out: Float64Array = wide
        .as_primitive::<Float64Type>()
        .iter()
        .map(|v| {
            v.and_then(|x| {
                if x.is_nan() {
                    None
                } else if x == 0.0 {
                    Some(if lower { -0.0 } else { 0.0 })
                } else {
                    Some(x)
                }
            })
        })
        .collect();
    Ok(std::sync::Arc::new(out))
}

/// Appends `range` to sorted, disjoint `ranges`, merging it with the last when they touch.
fn push_range(ranges: &mut Vec<Range<u64>>, range: Range<u64>) {
    if range.is_empty() {
        return;
    }
    match ranges.last_mut() {
        Some(last) if last.end >= range.start => last.end = last.end.max(range.end),
        _ => ranges.push(range),
    }
}

/// The rows in both sorted, disjoint lists of ranges.
pub(crate) fn intersect(a: &[Range<u64>], b: &[Range<u64>]) -> Vec<Range<u64>> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() && j < b.len() {
        let start = a[i].start.max(b[j].start);
        let end = a[i].end.min(b[j].end);
        push_range(&mut out, start..end);
        if a[i].end < b[j].end {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::intersect;

    #[test]
    fn intersections_of_row_ranges() {
        assert_eq!(
            intersect(&[0..10, 20..30], &[5..25, 28..40]),
            vec![5..10, 20..25, 28..30]
        );
        assert_eq!(intersect(&[0..10], &[10..20]), vec![]);
        assert_eq!(intersect(&[], &[0..5]), vec![]);
    }
}
