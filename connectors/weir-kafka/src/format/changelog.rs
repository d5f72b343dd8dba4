//! Topics whose records are changes: Debezium's envelope (`debezium-json`) and upsert topics
//! (`upsert-kafka`). docs/connectors/kafka.md ("Changes") has the user's view.
//!
//! - **Debezium**: a value is `{"before": {...}, "after": {...}, "op": ...}` (other fields, such
//!   as `source` and `ts_ms`, are ignored). `op` `c` (create) and `r` (a snapshot read) insert
//!   `after` (`+I`); `u` retracts `before` (`-U`) and inserts `after` (`+U`); `d` deletes
//!   `before` (`-D`). A tombstone (no value) after a delete is skipped.
//! - **Upsert**: a record with a value is the key's new row (`+U`, or `+I` the first time,
//!   which the reading job works out); a tombstone deletes the key (`-D`).

use arrow::array::{Array, ArrayRef, AsArray, UInt32Array};
use arrow::compute::{concat, take};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use std::sync::Arc;
use weir_api::changelog::RowKind;

/// How a topic's records are rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Changelog {
    /// Every record is a new row.
    Inserts,
    /// A record is its key's latest row; a tombstone deletes the key.
    Upsert,
    /// A record is a Debezium change event.
    Debezium,
}

/// The schema Debezium envelopes are decoded with: `before` and `after` of the value columns
/// (nullable, since either may be missing) and `op`.
pub(crate) fn envelope_schema(value: &Schema) -> SchemaRef {
    let fields: Fields = value
        .fields()
        .iter()
        .map(|f| Arc::new(f.as_ref().clone().with_nullable(true)))
        .collect();
    Arc::new(Schema::new(vec![
        Field::new("before", DataType::Struct(fields.clone()), true),
        Field::new("after", DataType::Struct(fields), true),
        Field::new("op", DataType::Utf8, true),
    ]))
}

/// The rows of decoded envelopes: per row, the envelope it came from; the value columns; the
/// kinds.
pub(crate) type Expanded = (Vec<usize>, RecordBatch, Vec<RowKind>);

/// The rows the decoded envelopes stand for: per row, the envelope it came from, then the
/// value columns (in `value`, the value part's schema) and the kinds. `Err` names the first bad
/// envelope and what is wrong with it (said of the record: `has op ...`).
pub(crate) fn expand(
    envelopes: &RecordBatch,
    value: &SchemaRef,
) -> Result<Expanded, (usize, String)> {
    let n = envelopes.num_rows();
    let internal = |e: String| (0, format!("could not be expanded: {e}"));
    let before = envelopes.column(0).as_struct();
    let after = envelopes.column(1).as_struct();
    let ops = envelopes.column(2).as_string::<i32>();
    let mut source = Vec::with_capacity(n);
    let mut picks: Vec<u32> = Vec::with_capacity(n);
    let mut kinds = Vec::with_capacity(n);
    for j in 0..n {
        let op = ops.is_valid(j).then(|| ops.value(j));
        let needs = |side: &str, present: bool| {
            if present {
                Ok(())
            } else {
                let hint = if side == "before" {
                    " (a PostgreSQL table needs REPLICA IDENTITY FULL for it)"
                } else {
                    ""
                };
                Err((
                    j,
                    format!("has op `{}` but no `{side}` row{hint}", op.unwrap_or("")),
                ))
            }
        };
        let mut push = |from_after: bool, kind: RowKind| {
            source.push(j);
            picks.push(if from_after { (n + j) as u32 } else { j as u32 });
            kinds.push(kind);
        };
        match op {
            Some("c" | "r") => {
                needs("after", after.is_valid(j))?;
                push(true, RowKind::Insert);
            }
            Some("u") => {
                needs("before", before.is_valid(j))?;
                needs("after", after.is_valid(j))?;
                push(false, RowKind::UpdateBefore);
                push(true, RowKind::UpdateAfter);
            }
            Some("d") => {
                needs("before", before.is_valid(j))?;
                push(false, RowKind::Delete);
            }
            other => {
                return Err((
                    j,
                    format!(
                        "has op {}; Debezium's are c, r, u and d",
                        other.map_or_else(|| "null".to_owned(), |o| format!("`{o}`"))
                    ),
                ));
            }
        }
    }
    let picks = UInt32Array::from(picks);
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(value.fields().len());
    for (i, field) in value.fields().iter().enumerate() {
        let both = concat(&[before.column(i).as_ref(), after.column(i).as_ref()])
            .map_err(|e| internal(e.to_string()))?;
        let column = take(both.as_ref(), &picks, None).map_err(|e| internal(e.to_string()))?;
        if !field.is_nullable()
            && let Some(row) = (0..column.len()).find(|&r| column.is_null(r))
        {
            return Err((
                source[row],
                format!(
                    "has no value for column `{}`, which is not nullable",
                    field.name()
                ),
            ));
        }
        columns.push(column);
    }
    let data = RecordBatch::try_new_with_options(
        Arc::clone(value),
        columns,
        &arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(source.len())),
    )
    .map_err(|e| internal(e.to_string()))?;
    Ok((source, data, kinds))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(lines: &[&str], value: &SchemaRef) -> RecordBatch {
        let mut decoder = arrow::json::ReaderBuilder::new(envelope_schema(value))
            .build_decoder()
            .expect("decoder");
        let text = lines.join("\n");
        decoder.decode(text.as_bytes()).expect("decodes");
        decoder.flush().expect("flush").expect("rows")
    }

    fn value() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
        ]))
    }

    #[test]
    fn every_op_becomes_its_rows() {
        let envelopes = decode(
            &[
                r#"{"before":null,"after":{"id":1,"name":"a"},"op":"r","source":{"db":"x"}}"#,
                r#"{"before":{"id":1,"name":"a"},"after":{"id":1,"name":"b"},"op":"u"}"#,
                r#"{"before":{"id":1,"name":"b"},"after":null,"op":"d","ts_ms":5}"#,
                r#"{"after":{"id":2,"name":null},"op":"c"}"#,
            ],
            &value(),
        );
        let (source, data, kinds) = expand(&envelopes, &value()).expect("expands");
        assert_eq!(source, [0, 1, 1, 2, 3]);
        use RowKind::*;
        assert_eq!(kinds, [Insert, UpdateBefore, UpdateAfter, Delete, Insert]);
        let names: Vec<Option<&str>> = data.column(1).as_string::<i32>().iter().collect();
        assert_eq!(names, [Some("a"), Some("a"), Some("b"), Some("b"), None]);
    }

    #[test]
    fn bad_envelopes_say_what_is_wrong() {
        let cases = [
            (r#"{"after":{"id":1},"op":"x"}"#, "has op `x`"),
            (
                r#"{"before":null,"after":{"id":1},"op":"u"}"#,
                "REPLICA IDENTITY FULL",
            ),
            (
                r#"{"after":{"name":"n"},"op":"c"}"#,
                "column `id`, which is not nullable",
            ),
            (r#"{"after":{"id":1}}"#, "has op null"),
        ];
        for (line, expected) in cases {
            let envelopes = decode(&[line], &value());
            let (row, reason) = expand(&envelopes, &value()).expect_err(line);
            assert_eq!(row, 0);
            assert!(reason.contains(expected), "{line}: {reason}");
        }
    }
}
