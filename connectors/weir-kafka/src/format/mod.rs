//! Record formats of Kafka keys and values: decoding payloads into Arrow batches and encoding
//! rows into payloads.
//!
//! A table's columns come from three places: the message key (decoded with the key format), the
//! message value (decoded with the value format) and the message's metadata (topic, partition,
//! offset, ...). [`RecordLayout`] says which column comes from where; [`RecordDecoder`] turns a
//! slice of messages into one batch and [`RecordEncoder`] turns one batch into keys, values,
//! timestamps and headers to produce.

mod changelog;
mod decode;
mod encode;
mod metadata;

#[cfg(test)]
mod changelog_tests;
#[cfg(test)]
mod decode_tests;
#[cfg(test)]
mod encode_tests;
#[cfg(test)]
mod test_support;

pub(crate) use changelog::Changelog;
pub(crate) use decode::RecordDecoder;
pub(crate) use encode::{Encoded, RecordEncoder, RowHeaders};
pub(crate) use metadata::MetadataKey;

use arrow::datatypes::{DataType, Schema, SchemaRef};
use std::sync::Arc;
use weir_api::{Error, Result};

/// The format of a key or a value, as Flink's `format`, `key.format` and `value.format` options
/// name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// One JSON object per payload; fields are matched to columns by name.
    Json,
    /// One CSV record per payload, without a header; fields are matched to columns by position.
    /// An empty field is null, in every column type (as Flink's `csv.null-literal` set to the
    /// empty string), so an empty string does not survive a round trip.
    Csv {
        /// The field delimiter (Flink's `csv.field-delimiter`), one ASCII byte.
        delimiter: u8,
    },
    /// The payload itself, as the single column's Utf8 text or Binary bytes.
    Raw,
    /// Debezium's JSON change events (values only): `before`, `after` and `op`.
    DebeziumJson,
}

impl Format {
    /// Parses a format option's value (`json`, `csv`, `raw`); CSV gets the default delimiter `,`.
    ///
    /// # Errors
    /// [`Error::Config`] at `path` for any other value.
    pub(crate) fn parse(value: &str, path: &str) -> Result<Self> {
        match value {
            "json" => Ok(Format::Json),
            "csv" => Ok(Format::Csv { delimiter: b',' }),
            "raw" => Ok(Format::Raw),
            "debezium-json" => Ok(Format::DebeziumJson),
            other => Err(Error::config(
                path,
                format!(
                    "unknown or unsupported format `{other}` (use json, csv, raw or \
                     debezium-json)"
                ),
            )),
        }
    }

    /// This CSV format with the field delimiter given by Flink's `csv.field-delimiter` option:
    /// one ASCII character, or `\t` written as two characters.
    ///
    /// # Errors
    /// [`Error::Config`] at `path` when the format is not CSV or the delimiter is not one ASCII
    /// character other than a quote, CR or LF.
    pub(crate) fn with_field_delimiter(self, delimiter: &str, path: &str) -> Result<Self> {
        if !matches!(self, Format::Csv { .. }) {
            return Err(Error::config(
                path,
                format!(
                    "a field delimiter applies only to the csv format, not to {}",
                    self.name()
                ),
            ));
        }
        let byte = match delimiter.as_bytes() {
            b"\\t" => b'\t',
            [b] if b.is_ascii() && !matches!(b, b'"' | b'\r' | b'\n') => *b,
            _ => {
                return Err(Error::config(
                    path,
                    format!(
                        "invalid field delimiter `{delimiter}` (use one ASCII character other \
                         than a double quote, CR or LF, or `\\t`)"
                    ),
                ));
            }
        };
        Ok(Format::Csv { delimiter: byte })
    }

    /// The format's option value, for messages.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Csv { .. } => "csv",
            Format::Raw => "raw",
            Format::DebeziumJson => "debezium-json",
        }
    }
}

/// Where each column of a table comes from: the message key, the message value or the message
/// metadata. Indices are into the table schema; each column is in one list, except that a key
/// column may also be a value column (`value.fields-include` = ALL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordLayout {
    /// The key format, when the table has key columns.
    pub(crate) key_format: Option<Format>,
    /// The value format.
    pub(crate) value_format: Format,
    /// Columns decoded from (or encoded into) the key, in the key format's field order.
    pub(crate) key_columns: Vec<usize>,
    /// Columns decoded from (or encoded into) the value, in the value format's field order.
    pub(crate) value_columns: Vec<usize>,
    /// Columns that hold message metadata, with the metadata each holds.
    pub(crate) metadata: Vec<(usize, MetadataKey)>,
    /// An upsert topic (`upsert-kafka`): a record is its key's latest row, a tombstone deletes
    /// the key.
    pub(crate) upsert: bool,
    /// The prefix of the key columns' names that the key format's field names do not have
    /// (`key.fields-prefix`).
    pub(crate) key_prefix: String,
}

impl RecordLayout {
    /// Checks the layout against `schema`: every column in exactly one list (a key column may
    /// also be a value column), a key format exactly
    /// when there are key columns, raw parts with exactly one Utf8 or Binary column, CSV parts
    /// without nested types. `context` names the connector in errors (`kafka source`).
    ///
    /// # Errors
    /// [`Error::Schema`] naming the offending column.
    pub(crate) fn validate(&self, schema: &Schema, context: &str) -> Result<()> {
        let fields = schema.fields();
        let mut seen: Vec<Option<&'static str>> = vec![None; fields.len()];
        let lists = [
            ("key", self.key_columns.clone()),
            ("value", self.value_columns.clone()),
            (
                "metadata",
                self.metadata.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            ),
        ];
        for (list, indices) in &lists {
            for &i in indices {
                let Some(slot) = seen.get_mut(i) else {
                    return Err(Error::schema(
                        context,
                        format!(
                            "{list} column index {i} is out of range (the schema has {} columns)",
                            fields.len()
                        ),
                    ));
                };
                // A key column may also be a value column: Flink's `value.fields-include` =
                // ALL writes key columns into the value too.
                if let Some(other) = slot
                    && !(*other == "key" && *list == "value")
                {
                    return Err(Error::schema(
                        context,
                        format!(
                            "column `{}` is listed as a {other} column and as a {list} column",
                            fields[i].name()
                        ),
                    ));
                }
                *slot = Some(list);
            }
        }
        if let Some(i) = seen.iter().position(Option::is_none) {
            return Err(Error::schema(
                context,
                format!(
                    "column `{}` is neither a key, a value nor a metadata column",
                    fields[i].name()
                ),
            ));
        }
        match (self.key_format, self.key_columns.is_empty()) {
            (None, false) => {
                return Err(Error::schema(
                    context,
                    "key columns are declared but no key format is",
                ));
            }
            (Some(_), true) => {
                return Err(Error::schema(
                    context,
                    "a key format is declared but no key columns are",
                ));
            }
            _ => {}
        }
        if let Some(key_format) = self.key_format {
            if key_format == Format::DebeziumJson {
                return Err(Error::schema(
                    context,
                    "debezium-json is a value format; keys are json, csv or raw",
                ));
            }
            check_part(schema, context, "key", key_format, &self.key_columns)?;
        }
        if self.upsert && self.value_format == Format::DebeziumJson {
            return Err(Error::schema(
                context,
                "an upsert topic's values are rows (json, csv or raw), not debezium-json",
            ));
        }
        check_part(
            schema,
            context,
            "value",
            self.value_format,
            &self.value_columns,
        )
    }

    /// The schema of the columns of one part (`key` or `value`), in the part's order.
    pub(crate) fn part_schema(schema: &Schema, columns: &[usize]) -> SchemaRef {
        let fields: Vec<_> = columns.iter().map(|&i| schema.field(i).clone()).collect();
        Arc::new(Schema::new(fields))
    }

    /// The key part's schema: its columns under the key format's field names (without
    /// `key.fields-prefix`).
    pub(crate) fn key_schema(&self, schema: &Schema) -> SchemaRef {
        let fields: Vec<_> = self
            .key_columns
            .iter()
            .map(|&i| {
                let f = schema.field(i);
                let name = f.name().strip_prefix(&self.key_prefix).unwrap_or(f.name());
                f.clone().with_name(name)
            })
            .collect();
        Arc::new(Schema::new(fields))
    }

    /// How the topic's records are rows.
    pub(crate) fn changelog(&self) -> Changelog {
        if self.value_format == Format::DebeziumJson {
            Changelog::Debezium
        } else if self.upsert {
            Changelog::Upsert
        } else {
            Changelog::Inserts
        }
    }
}

/// Checks the columns of one part against its format.
fn check_part(
    schema: &Schema,
    context: &str,
    part: &str,
    format: Format,
    columns: &[usize],
) -> Result<()> {
    match format {
        Format::Raw => {
            let [column] = columns else {
                return Err(Error::schema(
                    context,
                    format!(
                        "the raw {part} format needs exactly one {part} column, found {}",
                        columns.len()
                    ),
                ));
            };
            let field = schema.field(*column);
            if !matches!(field.data_type(), DataType::Utf8 | DataType::Binary) {
                return Err(Error::schema(
                    context,
                    format!(
                        "column `{}` is the raw {part}, so it must be Utf8 or Binary, not {}",
                        field.name(),
                        field.data_type()
                    ),
                ));
            }
        }
        Format::Csv { .. } => {
            if let Some(field) = columns
                .iter()
                .map(|&i| schema.field(i))
                .find(|f| f.data_type().is_nested())
            {
                return Err(Error::schema(
                    context,
                    format!(
                        "column `{}` has the nested type {}, which the csv {part} format cannot hold",
                        field.name(),
                        field.data_type()
                    ),
                ));
            }
        }
        Format::Json | Format::DebeziumJson => {}
    }
    Ok(())
}

/// Which half of a message a column comes from, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// The message key.
    Key,
    /// The message value (payload).
    Value,
}

impl Part {
    /// `key` or `value`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Part::Key => "key",
            Part::Value => "value",
        }
    }
}
