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
//! The envelopes are built by [`weir_api::changelog`] (shared with the Kafka sink); the
//! JSON-lines writer then encodes them.

use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use serde::{Deserialize, Serialize};
use weir_api::Result;
use weir_api::changelog;

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
        match self {
            Envelope::Debezium => changelog::debezium_schema(input),
            Envelope::Changelog => changelog::changelog_json_schema(input),
        }
    }

    /// `batch` (of the input schema) in the envelope `schema` ([`Envelope::schema`]).
    ///
    /// # Errors
    /// Arrow errors building the columns; a schema error for a broken row kind column.
    pub(crate) fn wrap(self, batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
        match self {
            Envelope::Debezium => changelog::debezium_envelope(batch, schema),
            Envelope::Changelog => changelog::changelog_json_envelope(batch, schema),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int8Array, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field};
    use std::sync::Arc;

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
