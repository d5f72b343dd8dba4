//! Row kinds of updating streams: how a row says it inserts, retracts or replaces a result.
//!
//! An insert-only stream (every source, filter, window, interval join...) carries no kind: all
//! its rows are inserts. An updating stream (a `GROUP BY` without a window, for instance) carries
//! one more column, [`ROW_KIND_COLUMN`], an `Int8` that is never null, with one [`RowKind`] per
//! row, as Flink's `RowKind` (`+I`, `-U`, `+U`, `-D`). `project` keeps the column even when no
//! expression names it, and `filter` keeps every column, so a change cannot lose its kind on the
//! way to a sink; a sink that cannot write changes refuses a schema that has the column.
//! docs/architecture.md explains the choice.

use arrow::array::{Array, ArrayRef, BooleanArray, Int8Array, StringArray, StructArray};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use std::sync::Arc;

/// The column of an updating stream that holds each row's [`RowKind`] (`Int8`, never null).
pub const ROW_KIND_COLUMN: &str = "__weir_row_kind";

/// What a row of an updating stream does to the result it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i8)]
pub enum RowKind {
    /// A new result row (`+I`).
    Insert = 0,
    /// The previous version of a result row that is being replaced (`-U`).
    UpdateBefore = 1,
    /// The new version of a result row that replaced the row before it (`+U`).
    UpdateAfter = 2,
    /// A result row that no longer exists (`-D`).
    Delete = 3,
}

impl RowKind {
    /// Every kind, by its byte value.
    pub const ALL: [RowKind; 4] = [
        RowKind::Insert,
        RowKind::UpdateBefore,
        RowKind::UpdateAfter,
        RowKind::Delete,
    ];

    /// The kind stored as `value` in [`ROW_KIND_COLUMN`], `None` for a byte no kind has.
    pub fn from_i8(value: i8) -> Option<Self> {
        Self::ALL.get(usize::try_from(value).ok()?).copied()
    }

    /// The kind's byte in [`ROW_KIND_COLUMN`].
    pub fn as_i8(self) -> i8 {
        self as i8
    }

    /// Flink's short string: `+I`, `-U`, `+U` or `-D`.
    pub fn short_string(self) -> &'static str {
        match self {
            RowKind::Insert => "+I",
            RowKind::UpdateBefore => "-U",
            RowKind::UpdateAfter => "+U",
            RowKind::Delete => "-D",
        }
    }

    /// Whether the row adds to the result (`+I`, `+U`) rather than takes a row away.
    pub fn is_addition(self) -> bool {
        matches!(self, RowKind::Insert | RowKind::UpdateAfter)
    }
}

/// The field of [`ROW_KIND_COLUMN`].
pub fn row_kind_field() -> Field {
    Field::new(ROW_KIND_COLUMN, DataType::Int8, false)
}

/// The index of [`ROW_KIND_COLUMN`] in `schema`, `None` on an insert-only stream.
pub fn row_kind_index(schema: &Schema) -> Option<usize> {
    schema.index_of(ROW_KIND_COLUMN).ok()
}

/// The row kinds of `batch`, `None` when it is insert-only (it has no [`ROW_KIND_COLUMN`]).
///
/// # Errors
///
/// [`crate::Error::Schema`] when the column is not a non-null `Int8` column.
pub fn row_kinds(batch: &RecordBatch) -> crate::Result<Option<&Int8Array>> {
    let Some(i) = row_kind_index(&batch.schema()) else {
        return Ok(None);
    };
    let column = batch.column(i);
    match column.as_any().downcast_ref::<Int8Array>() {
        Some(kinds) if kinds.null_count() == 0 => Ok(Some(kinds)),
        _ => Err(crate::Error::schema(
            ROW_KIND_COLUMN,
            format!(
                "the row kind column is {} with {} nulls; it must be a non-null Int8",
                column.data_type(),
                column.null_count()
            ),
        )),
    }
}

/// The fields of `input` without its row kind column: what a change is about.
pub fn data_fields(input: &Schema) -> Fields {
    input
        .fields()
        .iter()
        .filter(|f| f.name() != ROW_KIND_COLUMN)
        .cloned()
        .collect()
}

/// The schema of Debezium's envelope for rows of `input`: `before` and `after` (structs of the
/// data columns) and `op`.
pub fn debezium_schema(input: &Schema) -> SchemaRef {
    let data = DataType::Struct(data_fields(input));
    Arc::new(Schema::new(vec![
        Field::new("before", data.clone(), true),
        Field::new("after", data, true),
        Field::new("op", DataType::Utf8, false),
    ]))
}

/// The schema of Flink CDC's `changelog-json` for rows of `input`: `data` and `op`.
pub fn changelog_json_schema(input: &Schema) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("data", DataType::Struct(data_fields(input)), false),
        Field::new("op", DataType::Utf8, false),
    ]))
}

/// The kind of every row of `batch` (all inserts on an insert-only batch).
///
/// # Errors
/// [`crate::Error::Schema`] for a broken row kind column or a byte that is no kind.
pub fn kinds_of(batch: &RecordBatch) -> crate::Result<Vec<RowKind>> {
    match row_kinds(batch)? {
        None => Ok(vec![RowKind::Insert; batch.num_rows()]),
        Some(kinds) => kinds
            .values()
            .iter()
            .map(|&v| {
                RowKind::from_i8(v).ok_or_else(|| {
                    crate::Error::schema(
                        ROW_KIND_COLUMN,
                        format!("row kind {v} is none of +I, -U, +U, -D"),
                    )
                })
            })
            .collect(),
    }
}

/// The data columns of `batch` as one struct array, null where `nulls` says.
fn data_struct(batch: &RecordBatch, nulls: Option<NullBuffer>) -> crate::Result<ArrayRef> {
    let input = batch.schema();
    let columns: Vec<ArrayRef> = input
        .fields()
        .iter()
        .zip(batch.columns())
        .filter(|(f, _)| f.name() != ROW_KIND_COLUMN)
        .map(|(_, c)| Arc::clone(c))
        .collect();
    Ok(Arc::new(
        StructArray::try_new_with_length(data_fields(&input), columns, nulls, batch.num_rows())
            .map_err(|e| crate::Error::arrow("building a changelog row", e))?,
    ))
}

/// `batch` in Debezium's envelope ([`debezium_schema`]), as Flink's `debezium-json` writes it:
/// an insert or update-after is `{before: null, after: row, op: "c"}`, an update-before or
/// delete `{before: row, after: null, op: "d"}`.
///
/// # Errors
/// Arrow errors building the columns; a schema error for a broken row kind column.
pub fn debezium_envelope(batch: &RecordBatch, schema: &SchemaRef) -> crate::Result<RecordBatch> {
    let additions: BooleanArray = kinds_of(batch)?
        .into_iter()
        .map(|k| Some(k.is_addition()))
        .collect();
    let ops: StringArray = additions
        .iter()
        .map(|a| Some(if a == Some(true) { "c" } else { "d" }))
        .collect();
    let after = NullBuffer::new(additions.values().clone());
    let before = NullBuffer::new(!additions.values());
    let columns = vec![
        data_struct(batch, Some(before))?,
        data_struct(batch, Some(after))?,
        Arc::new(ops) as ArrayRef,
    ];
    RecordBatch::try_new(Arc::clone(schema), columns)
        .map_err(|e| crate::Error::arrow("assembling a debezium batch", e))
}

/// `batch` in Flink CDC's `changelog-json` envelope ([`changelog_json_schema`]):
/// `{data: row, op: "+I" | "-U" | "+U" | "-D"}`.
///
/// # Errors
/// Arrow errors building the columns; a schema error for a broken row kind column.
pub fn changelog_json_envelope(
    batch: &RecordBatch,
    schema: &SchemaRef,
) -> crate::Result<RecordBatch> {
    let ops: StringArray = kinds_of(batch)?
        .into_iter()
        .map(|k| Some(k.short_string()))
        .collect();
    let columns = vec![data_struct(batch, None)?, Arc::new(ops) as ArrayRef];
    RecordBatch::try_new(Arc::clone(schema), columns)
        .map_err(|e| crate::Error::arrow("assembling a changelog-json batch", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn kinds_round_trip_through_their_byte() {
        for kind in RowKind::ALL {
            assert_eq!(RowKind::from_i8(kind.as_i8()), Some(kind));
        }
        assert_eq!(RowKind::from_i8(4), None);
        assert_eq!(RowKind::from_i8(-1), None);
        let shorts: Vec<&str> = RowKind::ALL.iter().map(|k| k.short_string()).collect();
        assert_eq!(shorts, ["+I", "-U", "+U", "-D"]);
    }

    #[test]
    fn a_batch_without_the_column_is_insert_only_and_a_nullable_one_is_refused() {
        let plain = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("a", DataType::Int8, false)])),
            vec![Arc::new(Int8Array::from(vec![1_i8]))],
        )
        .expect("batch");
        assert!(row_kinds(&plain).expect("plain").is_none());
        let nullable = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new(
                ROW_KIND_COLUMN,
                DataType::Int8,
                true,
            )])),
            vec![Arc::new(Int8Array::from(vec![Some(0_i8), None]))],
        )
        .expect("batch");
        assert!(row_kinds(&nullable).is_err());
    }
}
