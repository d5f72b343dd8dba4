//! Changelog formats of the file sink: how the rows of an updating stream (docs/sql.md,
//! "Updating results") are written as JSON lines, each row with its kind.
//!
//! - `debezium`, SQL's `'format' = 'debezium-json'`, as Flink writes it: an insert or update-after
//!   is `{"before":null,"after":{...},"op":"c"}`, an update-before or delete is
//!   `{"before":{...},"after":null,"op":"d"}`.
//! - `changelog`, SQL's `'format' = 'changelog-json'`, the format of Flink CDC's
//!   `flink-format-changelog-json`: `{"data":{...},"op":"+I"}` with `op` one of `+I`, `-U`, `+U`,
//!   `-D`, so that updates stay apart from inserts and deletes.
//!
//! The envelope is built with Arrow kernels over the whole batch (a struct column and a string
//! column picked by kind); the JSON-lines writer then encodes it.

use arrow::array::{ArrayRef, BooleanArray, StringArray, StructArray};
use arrow::buffer::NullBuffer;
use arrow::compute::kernels::cmp::eq;
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use weir_api::changelog::{RowKind, row_kind_index, row_kinds};
use weir_api::{Error, Result};

/// A changelog format of the file sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Envelope {
    /// Debezium's `before`/`after`/`op` (`c` or `d`), as Flink's `debezium-json` writes it.
    Debezium,
    /// `data` and `op` (`+I`, `-U`, `+U`, `-D`), as Flink CDC's `changelog-json`.
    Changelog,
}

impl Envelope {
    /// SQL's name of the format.
    pub fn sql_name(self) -> &'static str {
        match self {
            Envelope::Debezium => "debezium-json",
            Envelope::Changelog => "changelog-json",
        }
    }

    /// The schema written for an input of schema `input` (its row kind column becomes `op`).
    pub(crate) fn schema(self, input: &Schema) -> SchemaRef {
        let data = DataType::Struct(data_fields(input));
        let op = Field::new("op", DataType::Utf8, false);
        Arc::new(Schema::new(match self {
            Envelope::Debezium => vec![
                Field::new("before", data.clone(), true),
                Field::new("after", data, true),
                op,
            ],
            Envelope::Changelog => vec![Field::new("data", data, false), op],
        }))
    }

    /// `batch` (of the input schema) in the envelope `schema` ([`Envelope::schema`]).
    ///
    /// # Errors
    /// Arrow errors building the columns; a schema error for a broken row kind column.
    pub(crate) fn wrap(self, batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
        let input = batch.schema();
        let fields = data_fields(&input);
        let columns: Vec<ArrayRef> = match row_kind_index(&input) {
            Some(k) => batch
                .columns()
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != k)
                .map(|(_, c)| Arc::clone(c))
                .collect(),
            None => batch.columns().to_vec(),
        };
        let n = batch.num_rows();
        let data = |nulls: Option<NullBuffer>| -> Result<ArrayRef> {
            Ok(Arc::new(
                StructArray::try_new_with_length(fields.clone(), columns.clone(), nulls, n)
                    .map_err(|e| Error::arrow("building a changelog row", e))?,
            ))
        };
        let kinds = row_kinds(batch)?;
        let kind_of = |row: usize| -> Result<RowKind> {
            match kinds {
                None => Ok(RowKind::Insert),
                Some(kinds) => RowKind::from_i8(kinds.value(row)).ok_or_else(|| {
                    Error::schema(
                        weir_api::ROW_KIND_COLUMN,
                        format!("row kind {} is none of +I, -U, +U, -D", kinds.value(row)),
                    )
                }),
            }
        };
        let out: Vec<ArrayRef> = match self {
            Envelope::Changelog => {
                let ops = (0..n)
                    .map(|row| kind_of(row).map(|k| Some(k.short_string())))
                    .collect::<Result<StringArray>>()?;
                vec![data(None)?, Arc::new(ops)]
            }
            Envelope::Debezium => {
                let additions = (0..n)
                    .map(|row| kind_of(row).map(|k| Some(k.is_addition())))
                    .collect::<Result<BooleanArray>>()?;
                let ops: StringArray = additions
                    .iter()
                    .map(|a| Some(if a == Some(true) { "c" } else { "d" }))
                    .collect();
                let removals = eq(&additions, &BooleanArray::new_scalar(false))
                    .map_err(|e| Error::arrow("picking debezium rows", e))?;
                let after = NullBuffer::new(additions.values().clone());
                let before = NullBuffer::new(removals.values().clone());
                vec![data(Some(before))?, data(Some(after))?, Arc::new(ops)]
            }
        };
        RecordBatch::try_new(Arc::clone(schema), out)
            .map_err(|e| Error::arrow("assembling a changelog batch", e))
    }
}

/// The fields of `input` without its row kind column.
fn data_fields(input: &Schema) -> Fields {
    input
        .fields()
        .iter()
        .filter(|f| f.name() != weir_api::ROW_KIND_COLUMN)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int8Array, Int64Array};

    fn updating() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, false),
            Field::new("n", DataType::Int64, true),
            weir_api::changelog::row_kind_field(),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["a", "a", "a", "b"])),
                Arc::new(Int64Array::from(vec![Some(1), Some(1), None, Some(3)])),
                Arc::new(Int8Array::from(vec![0_i8, 1, 2, 3])),
            ],
        )
        .expect("batch")
    }

    fn json(batch: &RecordBatch) -> String {
        let mut writer = arrow::json::WriterBuilder::new()
            .with_explicit_nulls(true)
            .build::<_, arrow::json::writer::LineDelimited>(Vec::new());
        writer.write(batch).expect("writes");
        writer.finish().expect("finishes");
        String::from_utf8(writer.into_inner()).expect("utf-8")
    }

    #[test]
    fn changelog_json_names_every_kind() {
        let batch = updating();
        let schema = Envelope::Changelog.schema(&batch.schema());
        let wrapped = Envelope::Changelog.wrap(&batch, &schema).expect("wraps");
        assert_eq!(
            json(&wrapped),
            "{\"data\":{\"k\":\"a\",\"n\":1},\"op\":\"+I\"}\n\
             {\"data\":{\"k\":\"a\",\"n\":1},\"op\":\"-U\"}\n\
             {\"data\":{\"k\":\"a\",\"n\":null},\"op\":\"+U\"}\n\
             {\"data\":{\"k\":\"b\",\"n\":3},\"op\":\"-D\"}\n"
        );
    }

    #[test]
    fn debezium_json_writes_additions_after_and_removals_before() {
        let batch = updating();
        let schema = Envelope::Debezium.schema(&batch.schema());
        let wrapped = Envelope::Debezium.wrap(&batch, &schema).expect("wraps");
        assert_eq!(
            json(&wrapped),
            "{\"before\":null,\"after\":{\"k\":\"a\",\"n\":1},\"op\":\"c\"}\n\
             {\"before\":{\"k\":\"a\",\"n\":1},\"after\":null,\"op\":\"d\"}\n\
             {\"before\":null,\"after\":{\"k\":\"a\",\"n\":null},\"op\":\"c\"}\n\
             {\"before\":{\"k\":\"b\",\"n\":3},\"after\":null,\"op\":\"d\"}\n"
        );
    }
}
