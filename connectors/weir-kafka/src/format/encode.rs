//! Encoding a batch of rows into Kafka keys, values, timestamps and headers.
//!
//! Each part is encoded for the whole batch at once: JSON and CSV with one arrow writer into one
//! buffer that is then cut into records (JSON lines never hold a raw line feed; CSV records end at
//! the first line feed outside quotes), raw as the column's own bytes.

use super::metadata::{headers, timestamps};
use super::{Changelog, Format, MetadataKey, Part, RecordLayout};
use arrow::array::{Array, BinaryArray, BooleanArray, Int8Array, StringArray, new_null_array};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use std::sync::Arc;
use weir_api::RowKind;
use weir_api::changelog::{kinds_of, row_kind_index};
use weir_api::{Error, Result};

/// The connector named in schema errors of the encoder.
const CONTEXT: &str = "kafka sink";

/// The headers of one message: names with their values (a header may have no value).
pub(crate) type RowHeaders = Vec<(String, Option<Vec<u8>>)>;

/// What one call of [`RecordEncoder::encode`] gives, one entry per row of the batch.
#[derive(Debug, Clone)]
pub(crate) struct Encoded {
    /// The message keys, when the layout has a key format (a null key for a null raw key).
    pub(crate) keys: Option<BinaryArray>,
    /// The message values (null for a null raw value: a tombstone).
    pub(crate) values: BinaryArray,
    /// The message timestamps in milliseconds since the epoch, when a column holds the
    /// `timestamp` metadata (null: let Kafka assign one).
    pub(crate) timestamps: Option<Vec<Option<i64>>>,
    /// The message headers, when a column holds the `headers` metadata.
    pub(crate) headers: Option<Vec<RowHeaders>>,
}

/// Turns batches of a sink's input schema into Kafka messages, following a [`RecordLayout`].
#[derive(Debug)]
pub(crate) struct RecordEncoder {
    /// The sink's input schema.
    schema: SchemaRef,
    /// The input's row kind column, when it is updating.
    kinds: Option<usize>,
    /// How changes are written.
    changelog: Changelog,
    /// The encoder of the key columns, when the layout has a key format.
    key: Option<PartEncoder>,
    /// The encoder of the value columns.
    value: PartEncoder,
    /// The column of the `timestamp` metadata, if any.
    timestamp: Option<usize>,
    /// The column of the `headers` metadata, if any.
    headers: Option<usize>,
}

impl RecordEncoder {
    /// An encoder of rows of `input_schema`, laid out by `layout`.
    ///
    /// # Errors
    /// [`Error::Schema`] when the layout does not fit the schema, a metadata column is read-only
    /// (only `headers` and `timestamp` can be written), appears twice or has the wrong type, or a
    /// format cannot encode a column's type.
    pub(crate) fn new(input_schema: SchemaRef, layout: RecordLayout) -> Result<Self> {
        let kinds = row_kind_index(&input_schema);
        let input_schema = data_schema(&input_schema);
        layout.validate(&input_schema, CONTEXT)?;
        let mut timestamp = None;
        let mut headers = None;
        for &(col, key) in &layout.metadata {
            let field = input_schema.field(col);
            if !key.writable() {
                return Err(Error::schema(
                    CONTEXT,
                    format!(
                        "column `{}` holds the Kafka metadata `{}`, which is read-only: a sink \
                         writes only `headers` and `timestamp`",
                        field.name(),
                        key.name()
                    ),
                ));
            }
            key.check_field(field, CONTEXT)?;
            let slot = match key {
                MetadataKey::Timestamp => &mut timestamp,
                _ => &mut headers,
            };
            if let Some(other) = slot.replace(col) {
                return Err(Error::schema(
                    CONTEXT,
                    format!(
                        "columns `{}` and `{}` both hold the Kafka metadata `{}`",
                        input_schema.field(other).name(),
                        field.name(),
                        key.name()
                    ),
                ));
            }
        }
        let key = match layout.key_format {
            Some(format) => Some(
                PartEncoder::new(Part::Key, format, layout.key_columns.clone(), &input_schema)?
                    .with_names(layout.key_schema(&input_schema)),
            ),
            None => None,
        };
        let value = PartEncoder::new(
            Part::Value,
            layout.value_format,
            layout.value_columns.clone(),
            &input_schema,
        )?;
        Ok(Self {
            schema: input_schema,
            kinds,
            changelog: layout.changelog(),
            key,
            value,
            timestamp,
            headers,
        })
    }

    /// Encodes the rows of `batch` (in the input schema) into messages' parts: every row, but
    /// on an upsert topic an update-before is left out (the update-after that follows replaces
    /// the key's row) and a delete is the key with no value (a tombstone).
    ///
    /// # Errors
    /// [`Error::Internal`] when the batch does not have the input schema's columns;
    /// [`Error::Arrow`] when a writer fails on a value.
    pub(crate) fn encode(&mut self, batch: &RecordBatch) -> Result<Encoded> {
        let expected = self.schema.fields().len() + usize::from(self.kinds.is_some());
        if batch.num_columns() != expected {
            return Err(Error::Internal(format!(
                "the kafka sink got a batch of {} columns for a schema of {expected}",
                batch.num_columns(),
            )));
        }
        let mut kinds = kinds_of(batch)?;
        let mut batch = match self.kinds {
            Some(k) => {
                let mut columns = batch.columns().to_vec();
                columns.remove(k);
                RecordBatch::try_new(self.schema.clone(), columns)
                    .map_err(|e| Error::arrow("separating row kinds", e))?
            }
            None => batch.clone(),
        };
        if self.changelog == Changelog::Upsert && kinds.contains(&RowKind::UpdateBefore) {
            let keep: BooleanArray = kinds
                .iter()
                .map(|k| Some(*k != RowKind::UpdateBefore))
                .collect();
            batch = arrow::compute::filter_record_batch(&batch, &keep)
                .map_err(|e| Error::arrow("leaving out update-befores", e))?;
            kinds.retain(|k| *k != RowKind::UpdateBefore);
        }
        let keys = match &self.key {
            Some(key) => Some(key.encode(&batch)?),
            None => None,
        };
        let values = match self.changelog {
            Changelog::Debezium => self.value.debezium(&batch, &kinds)?,
            Changelog::Upsert if kinds.contains(&RowKind::Delete) => {
                let values = self.value.encode(&batch)?;
                let present: NullBuffer = kinds.iter().map(|k| *k != RowKind::Delete).collect();
                let (offsets, bytes, _) = values.into_parts();
                BinaryArray::try_new(offsets, bytes, Some(present))
                    .map_err(|e| Error::arrow("writing tombstones", e))?
            }
            _ => self.value.encode(&batch)?,
        };
        Ok(Encoded {
            keys,
            values,
            timestamps: self
                .timestamp
                .map(|col| timestamps(batch.column(col).as_ref()))
                .transpose()?,
            headers: self
                .headers
                .map(|col| headers(batch.column(col).as_ref()))
                .transpose()?,
        })
    }
}

/// `schema` without its row kind column.
fn data_schema(schema: &SchemaRef) -> SchemaRef {
    match row_kind_index(schema) {
        Some(_) => Arc::new(Schema::new(weir_api::changelog::data_fields(schema))),
        None => Arc::clone(schema),
    }
}

/// Encodes the key or value columns of a batch in one format.
#[derive(Debug)]
struct PartEncoder {
    /// Whether this encodes keys or values.
    part: Part,
    /// The part's field names when they differ from the columns' (`key.fields-prefix`).
    names: Option<SchemaRef>,
    /// The part's format.
    format: Format,
    /// The part's columns in the input schema, in the format's field order.
    columns: Vec<usize>,
}

impl PartEncoder {
    /// An encoder of `columns` of `schema` as `part` in `format`.
    ///
    /// # Errors
    /// [`Error::Schema`] when the JSON writer cannot encode one of the columns' types.
    fn new(part: Part, format: Format, columns: Vec<usize>, schema: &SchemaRef) -> Result<Self> {
        let encoder = Self {
            part,
            names: None,
            format,
            columns,
        };
        if matches!(format, Format::Json | Format::DebeziumJson) && !encoder.columns.is_empty() {
            // A row of nulls makes the writer build its encoders, which refuse unknown types.
            let fields: Vec<Field> = encoder
                .columns
                .iter()
                .map(|&i| schema.field(i).clone().with_nullable(true))
                .collect();
            let nulls = fields
                .iter()
                .map(|f| new_null_array(f.data_type(), 1))
                .collect();
            let probe = RecordBatch::try_new(Arc::new(Schema::new(fields)), nulls)
                .map_err(|e| Error::arrow(encoder.context(), e))?;
            encoder.json(&probe, false).map_err(|e| {
                Error::schema(
                    CONTEXT,
                    format!(
                        "the json {} format cannot encode its columns: {e}",
                        part.name()
                    ),
                )
            })?;
        }
        Ok(encoder)
    }

    /// This encoder writing its columns under the field names of `names`.
    fn with_names(mut self, names: SchemaRef) -> Self {
        self.names = Some(names);
        self
    }

    /// The part's columns of `batch`, under the part's field names.
    fn part(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let part = batch
            .project(&self.columns)
            .map_err(|e| Error::arrow(self.context(), e))?;
        match &self.names {
            Some(names) => RecordBatch::try_new(Arc::clone(names), part.columns().to_vec())
                .map_err(|e| Error::arrow(self.context(), e)),
            None => Ok(part),
        }
    }

    /// Every row of `batch` with its kind in Debezium's envelope, as JSON.
    fn debezium(&self, batch: &RecordBatch, kinds: &[RowKind]) -> Result<BinaryArray> {
        let part = self.part(batch)?;
        let mut fields: Vec<Field> = part
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(weir_api::changelog::row_kind_field());
        let mut columns = part.columns().to_vec();
        columns.push(Arc::new(Int8Array::from_iter_values(
            kinds.iter().map(|k| k.as_i8()),
        )));
        let with_kinds = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
            .map_err(|e| Error::arrow(self.context(), e))?;
        let envelope = weir_api::changelog::debezium_envelope(
            &with_kinds,
            &weir_api::changelog::debezium_schema(&with_kinds.schema()),
        )?;
        self.json(&envelope, true)
    }

    /// The part of every row of `batch`, one entry per row.
    fn encode(&self, batch: &RecordBatch) -> Result<BinaryArray> {
        let part = self.part(batch)?;
        let values = match self.format {
            Format::Json | Format::DebeziumJson => self.json(&part, false)?,
            Format::Csv { delimiter } => self.csv(&part, delimiter)?,
            Format::Raw => return self.raw(part.column(0).as_ref()),
        };
        if values.len() != batch.num_rows() {
            return Err(Error::Internal(format!(
                "{} gave {} records for {} rows",
                self.context(),
                values.len(),
                batch.num_rows()
            )));
        }
        Ok(values)
    }

    /// What the encoder is doing, for errors.
    fn context(&self) -> String {
        format!(
            "encoding Kafka {}s as {}",
            self.part.name(),
            self.format.name()
        )
    }

    /// JSON lines of the whole batch, cut at the line feeds; null fields written as `null`
    /// with `explicit_nulls`, left out otherwise.
    fn json(&self, part: &RecordBatch, explicit_nulls: bool) -> Result<BinaryArray> {
        if part.num_columns() == 0 {
            // The writer writes nothing for a batch without columns; each row is an empty object.
            return Ok(BinaryArray::from_iter_values(std::iter::repeat_n(
                b"{}",
                part.num_rows(),
            )));
        }
        let mut writer = arrow::json::WriterBuilder::new()
            .with_explicit_nulls(explicit_nulls)
            .build::<_, arrow::json::writer::LineDelimited>(Vec::new());
        writer
            .write(part)
            .and_then(|()| writer.finish())
            .map_err(|e| Error::arrow(self.context(), e))?;
        let mut buf = writer.into_inner();
        let mut ends = Vec::with_capacity(part.num_rows());
        for (pos, _) in buf.iter().enumerate().filter(|(_, b)| **b == b'\n') {
            // Line feeds before this one are removed below.
            ends.push(pos - ends.len());
        }
        buf.retain(|&b| b != b'\n');
        self.records(buf, &ends)
    }

    /// CSV records of the whole batch, cut at the line feeds outside quotes.
    fn csv(&self, part: &RecordBatch, delimiter: u8) -> Result<BinaryArray> {
        let mut writer = arrow::csv::WriterBuilder::new()
            .with_header(false)
            .with_delimiter(delimiter)
            .build(Vec::new());
        writer
            .write(part)
            .map_err(|e| Error::arrow(self.context(), e))?;
        let buf = writer.into_inner();
        // Quotes are doubled inside quoted fields, so counting them tells inside from outside.
        let mut quoted = false;
        let mut record_ends = Vec::with_capacity(part.num_rows());
        for (pos, &b) in buf.iter().enumerate() {
            match b {
                b'"' => quoted = !quoted,
                b'\n' if !quoted => record_ends.push(pos),
                _ => {}
            }
        }
        let mut values = Vec::with_capacity(buf.len());
        let mut ends = Vec::with_capacity(record_ends.len());
        let mut start = 0;
        for end in record_ends {
            values.extend_from_slice(&buf[start..end]);
            ends.push(values.len());
            start = end + 1;
        }
        self.records(values, &ends)
    }

    /// A binary array of `values` cut at `ends` (exclusive end offsets of the records).
    fn records(&self, values: Vec<u8>, ends: &[usize]) -> Result<BinaryArray> {
        let too_big = || {
            Error::Internal(format!(
                "{}: more than 2 GiB of records in one batch",
                self.context()
            ))
        };
        let mut offsets = Vec::with_capacity(ends.len() + 1);
        offsets.push(0i32);
        for &end in ends {
            offsets.push(i32::try_from(end).map_err(|_| too_big())?);
        }
        BinaryArray::try_new(OffsetBuffer::new(offsets.into()), values.into(), None)
            .map_err(|e| Error::arrow(self.context(), e))
    }

    /// The raw column's own bytes.
    fn raw(&self, column: &dyn Array) -> Result<BinaryArray> {
        match column.data_type() {
            DataType::Utf8 => column
                .as_any()
                .downcast_ref::<StringArray>()
                .map(|text| BinaryArray::from(text.clone())),
            DataType::Binary => column.as_any().downcast_ref::<BinaryArray>().cloned(),
            _ => None,
        }
        .ok_or_else(|| {
            Error::Internal(format!(
                "{}: the column is not Utf8 or Binary",
                self.context()
            ))
        })
    }
}
