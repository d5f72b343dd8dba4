//! Encoding a batch of rows into Kafka keys, values, timestamps and headers.
//!
//! Each part is encoded for the whole batch at once: JSON and CSV with one arrow writer into one
//! buffer that is then cut into records (JSON lines never hold a raw line feed; CSV records end at
//! the first line feed outside quotes), raw as the column's own bytes.

use super::metadata::{headers, timestamps};
use super::{Format, MetadataKey, Part, RecordLayout};
use arrow::array::{Array, BinaryArray, StringArray, new_null_array};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use std::sync::Arc;
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
            Some(format) => Some(PartEncoder::new(
                Part::Key,
                format,
                layout.key_columns.clone(),
                &input_schema,
            )?),
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
            key,
            value,
            timestamp,
            headers,
        })
    }

    /// Encodes every row of `batch` (in the input schema) into a message's parts.
    ///
    /// # Errors
    /// [`Error::Internal`] when the batch does not have the input schema's columns;
    /// [`Error::Arrow`] when a writer fails on a value.
    pub(crate) fn encode(&mut self, batch: &RecordBatch) -> Result<Encoded> {
        if batch.num_columns() != self.schema.fields().len() {
            return Err(Error::Internal(format!(
                "the kafka sink got a batch of {} columns for a schema of {}",
                batch.num_columns(),
                self.schema.fields().len()
            )));
        }
        let keys = match &self.key {
            Some(key) => Some(key.encode(batch)?),
            None => None,
        };
        Ok(Encoded {
            keys,
            values: self.value.encode(batch)?,
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

/// Encodes the key or value columns of a batch in one format.
#[derive(Debug)]
struct PartEncoder {
    /// Whether this encodes keys or values.
    part: Part,
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
            format,
            columns,
        };
        if format == Format::Json && !encoder.columns.is_empty() {
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
            encoder.json(&probe).map_err(|e| {
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

    /// The part of every row of `batch`, one entry per row.
    fn encode(&self, batch: &RecordBatch) -> Result<BinaryArray> {
        let part = batch
            .project(&self.columns)
            .map_err(|e| Error::arrow(self.context(), e))?;
        let values = match self.format {
            Format::Json => self.json(&part)?,
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

    /// JSON lines of the whole batch, cut at the line feeds.
    fn json(&self, part: &RecordBatch) -> Result<BinaryArray> {
        if part.num_columns() == 0 {
            // The writer writes nothing for a batch without columns; each row is an empty object.
            return Ok(BinaryArray::from_iter_values(std::iter::repeat_n(
                b"{}",
                part.num_rows(),
            )));
        }
        let mut writer = arrow::json::LineDelimitedWriter::new(Vec::new());
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
