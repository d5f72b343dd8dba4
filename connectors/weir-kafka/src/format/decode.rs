//! Decoding Kafka messages into one Arrow batch of the table schema.
//!
//! The fast path decodes the values of all messages with one decoder (one JSON decoder over the
//! payloads joined by line feeds, one CSV decoder likewise, or the payloads themselves for raw),
//! the keys likewise, and builds the metadata columns with Arrow builders. Only when that fails
//! does the slow path decode message by message to find the bad records, which then fail the read
//! or become dead letters.

use super::changelog::{self, Changelog};
use super::{Format, Part, RecordLayout};
use arrow::array::{Array, ArrayRef, BinaryArray, StringArray, UInt32Array, new_null_array};
use arrow::compute::{concat_batches, take};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use rdkafka::message::Message;
use std::sync::Arc;
use weir_api::limits::{MAX_JSON_DEPTH, json_depth_exceeds, json_too_deep_message};
use weir_api::{BadRecordPolicy, DeadLetterBuilder, Error, RecordLocation, Result};

/// The connector named in schema errors of the decoder.
const CONTEXT: &str = "kafka source";

/// What one call of [`RecordDecoder::decode`] gives: the rows of the good records, and the bad
/// records as dead letters when the policy says so.
#[derive(Debug, Clone)]
pub(crate) struct Decoded {
    /// The rows, in the table schema, in message order (tombstones of json and csv values
    /// skipped, bad records left out).
    pub(crate) data: RecordBatch,
    /// The bad records, in [`weir_api::dead_letter_schema`], under
    /// [`BadRecordPolicy::DeadLetter`]; `None` when there were none.
    pub(crate) dead_letters: Option<RecordBatch>,
}

/// Turns Kafka messages into rows of a table schema, following a [`RecordLayout`].
#[derive(Debug)]
pub(crate) struct RecordDecoder {
    /// The table schema of the decoded rows.
    schema: SchemaRef,
    /// The schema of the rows it gives: the table schema, plus the row kind column of a topic
    /// of changes (whose value columns are nullable on an upsert topic: a tombstone has none).
    output: SchemaRef,
    /// How records are rows.
    changelog: Changelog,
    /// The value columns' schema (what Debezium's `before` and `after` hold).
    value_schema: SchemaRef,
    /// Where each column comes from.
    layout: RecordLayout,
    /// The decoder of the key columns, when there are any.
    key: Option<PartDecoder>,
    /// The decoder of the value columns.
    value: PartDecoder,
    /// What to do with bad records.
    policy: BadRecordPolicy,
    /// Bad records of the current call, under [`BadRecordPolicy::DeadLetter`].
    dead_letters: DeadLetterBuilder,
}

impl RecordDecoder {
    /// A decoder of messages into rows of `schema`, laid out by `layout`, with bad records
    /// handled by `bad_records`.
    ///
    /// # Errors
    /// [`Error::Schema`] when the layout does not fit the schema, a metadata column has the wrong
    /// type, or a format cannot decode a column's type.
    pub(crate) fn new(
        schema: SchemaRef,
        layout: RecordLayout,
        bad_records: BadRecordPolicy,
    ) -> Result<Self> {
        layout.validate(&schema, CONTEXT)?;
        for (i, key) in &layout.metadata {
            key.check_field(schema.field(*i), CONTEXT)?;
        }
        let changelog = layout.changelog();
        let key = match layout.key_format {
            Some(format) => Some(PartDecoder::new(
                Part::Key,
                format,
                layout.key_schema(&schema),
            )?),
            None => None,
        };
        let output = Self::output_schema(&schema, &layout);
        let value_schema = RecordLayout::part_schema(&output, &layout.value_columns);
        let value = match changelog {
            Changelog::Debezium => PartDecoder::new(
                Part::Value,
                Format::Json,
                changelog::envelope_schema(&value_schema),
            )?,
            _ => PartDecoder::new(Part::Value, layout.value_format, value_schema.clone())?,
        };
        Ok(Self {
            output,
            changelog,
            value_schema,
            schema,
            layout,
            key,
            value,
            policy: bad_records,
            dead_letters: DeadLetterBuilder::new(),
        })
    }

    /// The schema of the rows a decoder of `schema` laid out by `layout` gives (see
    /// [`RecordDecoder::output`]).
    pub(crate) fn output_schema(schema: &SchemaRef, layout: &RecordLayout) -> SchemaRef {
        let changelog = layout.changelog();
        if changelog == Changelog::Inserts {
            return Arc::clone(schema);
        }
        let mut fields: Vec<Field> = schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let tombstoned = changelog == Changelog::Upsert
                    && !layout.key_columns.contains(&i)
                    && !layout.metadata.iter().any(|(m, _)| *m == i);
                f.as_ref()
                    .clone()
                    .with_nullable(f.is_nullable() || tombstoned)
            })
            .collect();
        fields.push(weir_api::changelog::row_kind_field());
        Arc::new(Schema::new(fields))
    }

    /// Decodes `messages` (all of one topic-partition or not) into rows.
    ///
    /// # Errors
    /// [`Error::BadRecord`] naming `topic/partition`, the offset and the reason for the first bad
    /// record under [`BadRecordPolicy::Fail`]; [`Error::Arrow`] when assembling the batch fails.
    pub(crate) fn decode<M: Message>(&mut self, messages: &[M]) -> Result<Decoded> {
        let skips_tombstones =
            self.value.format != Format::Raw && self.changelog != Changelog::Upsert;
        let rows: Vec<usize> = (0..messages.len())
            .filter(|&i| !skips_tombstones || messages[i].payload().is_some())
            .collect();
        let data = match self.decode_fast(messages, &rows)? {
            Some(data) => data,
            None => {
                tracing::debug!(messages = messages.len(), "locating bad Kafka records");
                self.decode_slowly(messages, &rows)?
            }
        };
        Ok(Decoded {
            data,
            dead_letters: self.dead_letters.finish(),
        })
    }

    /// Decodes `messages[rows]` in one go; `None` when any of them is bad (visible to the tests,
    /// which check that good records never take the slow path).
    pub(super) fn decode_fast<M: Message>(
        &self,
        messages: &[M],
        rows: &[usize],
    ) -> Result<Option<RecordBatch>> {
        let values: Vec<Option<&[u8]>> = rows.iter().map(|&i| messages[i].payload()).collect();
        let Some(values) = self.value.decode_all(&values) else {
            return Ok(None);
        };
        if self.changelog == Changelog::Debezium
            && changelog::expand(&values, &self.value_schema).is_err()
        {
            return Ok(None);
        }
        let keys = match &self.key {
            Some(decoder) => {
                let keys: Vec<Option<&[u8]>> = rows.iter().map(|&i| messages[i].key()).collect();
                match decoder.decode_all(&keys) {
                    Some(keys) => Some(keys),
                    None => return Ok(None),
                }
            }
            None => None,
        };
        let metadata_fits = self.layout.metadata.iter().all(|(col, key)| {
            let field = self.schema.field(*col);
            rows.iter()
                .all(|&i| key.problem(field, &messages[i]).is_none())
        });
        if !metadata_fits {
            return Ok(None);
        }
        self.assemble(messages, rows, keys.as_ref(), &values)
            .map(Some)
    }

    /// Decodes `messages[rows]` one at a time, rejecting the bad ones, and assembles the rest.
    fn decode_slowly<M: Message>(&mut self, messages: &[M], rows: &[usize]) -> Result<RecordBatch> {
        let mut good = Vec::with_capacity(rows.len());
        let mut values = Vec::with_capacity(rows.len());
        let mut keys = Vec::with_capacity(rows.len());
        for &i in rows {
            let message = &messages[i];
            match self.decode_one(message) {
                Ok((key, value)) => {
                    good.push(i);
                    values.push(value);
                    keys.extend(key);
                }
                Err((part, bad)) => self.reject(message, part, bad)?,
            }
        }
        let values = concat_batches(&self.value.schema, &values)
            .map_err(|e| Error::arrow("assembling decoded Kafka values", e))?;
        let keys = match &self.key {
            Some(decoder) => Some(
                concat_batches(&decoder.schema, &keys)
                    .map_err(|e| Error::arrow("assembling decoded Kafka keys", e))?,
            ),
            None => None,
        };
        self.assemble(messages, &good, keys.as_ref(), &values)
    }

    /// Decodes one message's value and key into one-row batches, or says what is wrong with it
    /// and in which part (a bad metadata column counts as the value's).
    fn decode_one<M: Message>(
        &self,
        message: &M,
    ) -> Result<(Option<RecordBatch>, RecordBatch), (Part, PayloadError)> {
        let offset = message.offset();
        let in_part = |part: Part| {
            move |e: PayloadError| {
                (
                    part,
                    PayloadError {
                        column: e.column,
                        reason: format!("the {} at offset {offset} {}", part.name(), e.reason),
                    },
                )
            }
        };
        let value = self
            .value
            .decode_one(message.payload())
            .map_err(in_part(Part::Value))?;
        if self.changelog == Changelog::Debezium
            && let Err((_, reason)) = changelog::expand(&value, &self.value_schema)
        {
            return Err(in_part(Part::Value)(PayloadError::new(None, reason)));
        }
        let key = match &self.key {
            Some(decoder) => Some(
                decoder
                    .decode_one(message.key())
                    .map_err(in_part(Part::Key))?,
            ),
            None => None,
        };
        for (col, key) in &self.layout.metadata {
            let field = self.schema.field(*col);
            if let Some(problem) = key.problem(field, message) {
                return Err((
                    Part::Value,
                    PayloadError {
                        column: Some(field.name().clone()),
                        reason: format!("the message at offset {offset} {problem}"),
                    },
                ));
            }
        }
        Ok((key, value))
    }

    /// Fails with the bad record under [`BadRecordPolicy::Fail`], or keeps it as a dead letter
    /// whose location is `topic/partition` with the offset as its line, and whose raw text is the
    /// bad part (the key when the key is bad, else the value) as lossy UTF-8.
    fn reject<M: Message>(&mut self, message: &M, part: Part, bad: PayloadError) -> Result<()> {
        let location = RecordLocation {
            input: format!("{}/{}", message.topic(), message.partition()),
            line: u64::try_from(message.offset()).ok(),
            column: bad.column,
        };
        match self.policy {
            BadRecordPolicy::Fail => Err(Error::BadRecord {
                location,
                message: bad.reason,
            }),
            BadRecordPolicy::DeadLetter => {
                let bytes = match part {
                    Part::Key => message.key(),
                    Part::Value => message.payload(),
                };
                let raw = bytes.map(|p| String::from_utf8_lossy(p).into_owned());
                self.dead_letters
                    .push(&location, &bad.reason, raw.as_deref());
                Ok(())
            }
        }
    }

    /// Puts the key, value and metadata columns of `messages[rows]` in table schema order (a
    /// key column that is also a value column from the key), with the rows' kinds on a topic
    /// of changes.
    fn assemble<M: Message>(
        &self,
        messages: &[M],
        rows: &[usize],
        keys: Option<&RecordBatch>,
        values: &RecordBatch,
    ) -> Result<RecordBatch> {
        let (rows, keys, values, kinds) = match self.changelog {
            Changelog::Inserts => (rows.to_vec(), keys.cloned(), values.clone(), None),
            Changelog::Upsert => {
                let kinds = rows
                    .iter()
                    .map(|&i| match messages[i].payload() {
                        Some(_) => weir_api::RowKind::UpdateAfter,
                        None => weir_api::RowKind::Delete,
                    })
                    .collect();
                (rows.to_vec(), keys.cloned(), values.clone(), Some(kinds))
            }
            Changelog::Debezium => {
                let (source, data, kinds) =
                    changelog::expand(values, &self.value_schema).map_err(|(_, reason)| {
                        Error::Internal(format!("a checked Debezium record {reason}"))
                    })?;
                let picks = UInt32Array::from_iter_values(source.iter().map(|&j| j as u32));
                let keys = keys
                    .map(|k| {
                        let columns = k
                            .columns()
                            .iter()
                            .map(|c| take(c.as_ref(), &picks, None))
                            .collect::<std::result::Result<Vec<_>, _>>()?;
                        RecordBatch::try_new(k.schema(), columns)
                    })
                    .transpose()
                    .map_err(|e| Error::arrow("repeating Kafka keys", e))?;
                let rows = source.iter().map(|&j| rows[j]).collect();
                (rows, keys, data, Some(kinds))
            }
        };
        let mut columns: Vec<Option<ArrayRef>> = vec![None; self.schema.fields().len()];
        for (j, &col) in self.layout.value_columns.iter().enumerate() {
            columns[col] = Some(values.column(j).clone());
        }
        if let Some(keys) = &keys {
            for (j, &col) in self.layout.key_columns.iter().enumerate() {
                columns[col] = Some(keys.column(j).clone());
            }
        }
        for (col, key) in &self.layout.metadata {
            columns[*col] = Some(key.column(self.schema.field(*col), messages, &rows)?);
        }
        let mut columns = columns
            .into_iter()
            .map(|c| c.ok_or_else(|| Error::Internal("a Kafka column was not decoded".into())))
            .collect::<Result<Vec<_>>>()?;
        if let Some(kinds) = kinds {
            columns.push(Arc::new(arrow::array::Int8Array::from_iter_values(
                kinds.into_iter().map(weir_api::RowKind::as_i8),
            )));
        }
        RecordBatch::try_new_with_options(
            self.output.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(rows.len())),
        )
        .map_err(|e| Error::arrow("assembling decoded Kafka records", e))
    }
}

/// Why one key or value is bad: the column where known, and what is wrong, said of the payload
/// (`is not valid json: ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct PayloadError {
    /// The column the problem is about, where it is about one.
    column: Option<String>,
    /// What is wrong.
    reason: String,
}

impl PayloadError {
    /// A problem about `column` (if any) with `reason`.
    fn new(column: Option<&Field>, reason: impl Into<String>) -> Self {
        Self {
            column: column.map(|f| f.name().clone()),
            reason: reason.into(),
        }
    }
}

/// Decodes the keys or the values of messages in one format into the part's columns.
#[derive(Debug)]
struct PartDecoder {
    /// The part's format.
    format: Format,
    /// The part's columns, in the format's field order.
    schema: SchemaRef,
}

impl PartDecoder {
    /// A decoder of `part` in `format` into `schema`.
    ///
    /// # Errors
    /// [`Error::Schema`] when the JSON decoder cannot decode one of the types.
    fn new(part: Part, format: Format, schema: SchemaRef) -> Result<Self> {
        if format == Format::Json {
            arrow::json::ReaderBuilder::new(schema.clone())
                .build_decoder()
                .map_err(|e| {
                    Error::schema(
                        CONTEXT,
                        format!(
                            "the json {} format cannot decode its columns: {e}",
                            part.name()
                        ),
                    )
                })?;
        }
        Ok(Self { format, schema })
    }

    /// Decodes all payloads in one go, a missing payload giving a row of nulls; `None` when any
    /// payload is bad.
    fn decode_all(&self, payloads: &[Option<&[u8]>]) -> Option<RecordBatch> {
        let batch = match self.format {
            Format::Raw => self.raw(payloads).ok()?,
            Format::Json | Format::DebeziumJson | Format::Csv { .. } => {
                let present: Vec<&[u8]> = payloads.iter().flatten().copied().collect();
                let batch = self.decode_many(&present).ok()?;
                if batch.num_rows() != present.len() {
                    return None;
                }
                if present.len() == payloads.len() {
                    batch
                } else {
                    with_null_rows(&batch, payloads).ok()?
                }
            }
        };
        null_in_non_nullable(&self.schema, &batch)
            .is_none()
            .then_some(batch)
    }

    /// Decodes one payload into a one-row batch, or says what is wrong with it.
    fn decode_one(&self, payload: Option<&[u8]>) -> Result<RecordBatch, PayloadError> {
        let batch = match (self.format, payload) {
            (Format::Raw, _) => self.raw(&[payload])?,
            (_, None) => null_row(&self.schema)?,
            (_, Some(payload)) => match self.decode_many(&[payload]) {
                Ok(batch) if batch.num_rows() == 1 => batch,
                Ok(batch) if batch.num_rows() == 0 => {
                    return Err(PayloadError::new(
                        None,
                        format!("holds no {} record", self.format.name()),
                    ));
                }
                Ok(_) => {
                    return Err(PayloadError::new(
                        None,
                        format!("holds more than one {} record", self.format.name()),
                    ));
                }
                Err(message) => return Err(self.explain(payload, message)),
            },
        };
        match null_in_non_nullable(&self.schema, &batch) {
            None => Ok(batch),
            Some(col) => {
                let field = self.schema.field(col);
                let reason = match payload {
                    None => format!("is missing and column `{}` is not nullable", field.name()),
                    Some(_) => format!(
                        "has no value for column `{}`, which is not nullable",
                        field.name()
                    ),
                };
                Err(PayloadError::new(Some(field), reason))
            }
        }
    }

    /// Decodes payloads of the json or csv format with one decoder. `Err` carries the
    /// decoder's message; a batch of more rows than payloads means some held several records.
    fn decode_many(&self, payloads: &[&[u8]]) -> Result<RecordBatch, String> {
        match self.format {
            Format::Json | Format::DebeziumJson => json_decode(&self.schema, payloads),
            Format::Csv { delimiter } => csv_decode(&self.schema, delimiter, None, payloads),
            Format::Raw => Err("raw payloads are not decoded".to_owned()),
        }
    }

    /// Finds what is wrong with a payload the decoder rejected: malformed or the first column
    /// that does not decode alone.
    fn explain(&self, payload: &[u8], message: String) -> PayloadError {
        let format = self.format.name();
        match self.format {
            Format::Json | Format::DebeziumJson => {
                if let Some(at) = json_depth_exceeds(payload, MAX_JSON_DEPTH) {
                    return PayloadError::new(
                        None,
                        format!("is bad: {}", json_too_deep_message(at)),
                    );
                }
                if let Err(e) = json_decode(&Arc::new(Schema::empty()), &[payload]) {
                    return PayloadError::new(None, format!("is not valid json: {e}"));
                }
                for field in self.schema.fields() {
                    let single = |nullable: bool| {
                        let field = field.as_ref().clone().with_nullable(nullable);
                        json_decode(&Arc::new(Schema::new(vec![field])), &[payload])
                    };
                    if let Err(e) = single(field.is_nullable()) {
                        return bad_column(field, e, single(true));
                    }
                }
            }
            Format::Csv { delimiter } => {
                let text = Arc::new(Schema::new(
                    self.schema
                        .fields()
                        .iter()
                        .map(|f| Field::new(f.name(), DataType::Utf8, true))
                        .collect::<Vec<_>>(),
                ));
                if let Err(e) = csv_decode(&text, delimiter, None, &[payload]) {
                    return PayloadError::new(None, format!("is not a valid csv record: {e}"));
                }
                for (i, field) in self.schema.fields().iter().enumerate() {
                    if let Err(e) = csv_decode(&self.schema, delimiter, Some(i), &[payload]) {
                        let mut fields: Vec<Field> = self
                            .schema
                            .fields()
                            .iter()
                            .map(|f| f.as_ref().clone())
                            .collect();
                        fields[i] = fields[i].clone().with_nullable(true);
                        let nullable = Arc::new(Schema::new(fields));
                        let alone = csv_decode(&nullable, delimiter, Some(i), &[payload]);
                        return bad_column(field, e, alone);
                    }
                }
            }
            Format::Raw => {}
        }
        PayloadError::new(None, format!("is not valid {format}: {message}"))
    }

    /// The payloads themselves as the single Utf8 or Binary column; `Err` for the first payload
    /// that is not valid UTF-8 in a Utf8 column.
    fn raw(&self, payloads: &[Option<&[u8]>]) -> Result<RecordBatch, PayloadError> {
        let field = self.schema.field(0);
        let bytes = BinaryArray::from_iter(payloads.iter().copied());
        let column: ArrayRef = if field.data_type() == &DataType::Utf8 {
            match StringArray::try_from_binary(bytes) {
                Ok(text) => Arc::new(text),
                Err(_) => {
                    let bad = payloads
                        .iter()
                        .flatten()
                        .find_map(|p| std::str::from_utf8(p).err());
                    let reason = match bad {
                        Some(e) => format!("is not valid UTF-8: {e}"),
                        None => "is not valid UTF-8".to_owned(),
                    };
                    return Err(PayloadError::new(Some(field), reason));
                }
            }
        } else {
            Arc::new(bytes)
        };
        nullable_batch(&self.schema, vec![column], payloads.len())
            .map_err(|e| PayloadError::new(Some(field), e))
    }
}

/// Why a column of a payload is bad, given the decoder's message and the column decoded alone as
/// nullable: missing when that gives a null, a bad value otherwise.
fn bad_column(
    field: &Field,
    message: String,
    as_nullable: Result<RecordBatch, String>,
) -> PayloadError {
    let missing = as_nullable.is_ok_and(|b| b.num_columns() == 1 && b.column(0).null_count() > 0);
    let reason = if missing {
        format!(
            "has no value for column `{}`, which is not nullable",
            field.name()
        )
    } else {
        format!("has a bad value for column `{}`: {message}", field.name())
    };
    PayloadError::new(Some(field), reason)
}

/// Decodes JSON payloads joined by line feeds with one arrow-json decoder.
fn json_decode(schema: &SchemaRef, payloads: &[&[u8]]) -> Result<RecordBatch, String> {
    // Arrow's decoder recurses over nesting: a deep payload must not reach it.
    if let Some(at) = payloads
        .iter()
        .find_map(|p| json_depth_exceeds(p, MAX_JSON_DEPTH))
    {
        return Err(json_too_deep_message(at));
    }
    let mut buf = Vec::with_capacity(payloads.iter().map(|p| p.len() + 1).sum());
    for payload in payloads {
        buf.extend_from_slice(payload);
        buf.push(b'\n');
    }
    let mut decoder = arrow::json::ReaderBuilder::new(schema.clone())
        .with_batch_size(payloads.len() + 1)
        .build_decoder()
        .map_err(|e| clean(&e))?;
    decoder.decode(&buf).map_err(|e| clean(&e))?;
    if decoder.has_partial_record() {
        return Err("incomplete JSON value".to_owned());
    }
    match decoder.flush().map_err(|e| clean(&e))? {
        Some(batch) => Ok(batch),
        None => Ok(RecordBatch::new_empty(schema.clone())),
    }
}

/// Decodes CSV payloads (without headers) joined by line feeds with one arrow-csv decoder, only
/// column `only` when given.
fn csv_decode(
    schema: &SchemaRef,
    delimiter: u8,
    only: Option<usize>,
    payloads: &[&[u8]],
) -> Result<RecordBatch, String> {
    let mut buf = Vec::with_capacity(payloads.iter().map(|p| p.len() + 1).sum());
    for payload in payloads {
        let payload = payload.strip_suffix(b"\n").unwrap_or(payload);
        let payload = payload.strip_suffix(b"\r").unwrap_or(payload);
        buf.extend_from_slice(payload);
        buf.push(b'\n');
    }
    let mut builder = arrow::csv::ReaderBuilder::new(schema.clone())
        .with_header(false)
        .with_delimiter(delimiter)
        .with_batch_size(payloads.len() + 1);
    if let Some(column) = only {
        builder = builder.with_projection(vec![column]);
    }
    let mut decoder = builder.build_decoder();
    let mut pos = 0;
    while pos < buf.len() {
        let read = decoder.decode(&buf[pos..]).map_err(|e| clean(&e))?;
        if read == 0 {
            break;
        }
        pos += read;
    }
    decoder.decode(&[]).map_err(|e| clean(&e))?;
    match decoder.flush().map_err(|e| clean(&e))? {
        Some(batch) => Ok(batch),
        None => Ok(RecordBatch::new_empty(match only {
            Some(column) => Arc::new(schema.project(&[column]).map_err(|e| clean(&e))?),
            None => schema.clone(),
        })),
    }
}

/// An Arrow error's message without the error kind's prefix.
fn clean(e: &arrow::error::ArrowError) -> String {
    let message = e.to_string();
    [
        "Json error: ",
        "Csv error: ",
        "Parser error: ",
        "Invalid argument error: ",
    ]
    .iter()
    .find_map(|prefix| message.strip_prefix(prefix))
    .map_or_else(|| message.clone(), str::to_owned)
}

/// `batch` (the rows of the present payloads) with a row of nulls for each missing payload.
fn with_null_rows(batch: &RecordBatch, payloads: &[Option<&[u8]>]) -> Result<RecordBatch, String> {
    let mut next = 0u32;
    let indices: UInt32Array = payloads
        .iter()
        .map(|p| {
            p.map(|_| {
                next += 1;
                next - 1
            })
        })
        .collect();
    let columns = batch
        .columns()
        .iter()
        .map(|c| take(c.as_ref(), &indices, None))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    nullable_batch(batch.schema_ref(), columns, payloads.len())
}

/// A one-row batch of nulls in `schema` (its columns made nullable).
fn null_row(schema: &SchemaRef) -> Result<RecordBatch, PayloadError> {
    let columns = schema
        .fields()
        .iter()
        .map(|f| new_null_array(f.data_type(), 1))
        .collect();
    nullable_batch(schema, columns, 1).map_err(|e| PayloadError::new(None, e))
}

/// A batch of `columns` in `schema` with every field made nullable, so that a null in a
/// non-nullable column can be found and reported (by [`null_in_non_nullable`]) instead of
/// failing here.
fn nullable_batch(
    schema: &SchemaRef,
    columns: Vec<ArrayRef>,
    rows: usize,
) -> Result<RecordBatch, String> {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )
    .map_err(|e| e.to_string())
}

/// The first column of `batch` that holds a null although its field in `declared` is not
/// nullable (decoders do not all enforce nullability, and null rows are built nullable).
fn null_in_non_nullable(declared: &Schema, batch: &RecordBatch) -> Option<usize> {
    declared
        .fields()
        .iter()
        .zip(batch.columns())
        .position(|(f, c)| !f.is_nullable() && c.null_count() > 0)
}
