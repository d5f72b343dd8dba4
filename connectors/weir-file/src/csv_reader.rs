//! Reading one CSV file from a cursor.
//!
//! The fast path hands whole blocks to arrow's CSV decoder and emits its batches untouched. Only
//! when a chunk fails to decode does the slow path run on that chunk: [`scan_records`] locates
//! each record (line, field count, text), the chunk is decoded once more with every column as
//! text, and each column is cast to its declared type to find the failing cells; the remaining
//! rows are decoded with the declared types. So a bad record costs one chunk's extra work, and a
//! clean file never pays for locating records.

use crate::csv_record::{CsvRecord, CsvScan, count_lines, scan_records};
use crate::csv_unquoted::{Extent, UnquotedDecoder, extent};
use crate::object_bytes::ObjectBytes;
use crate::options::CsvSettings;
use crate::rejection::{Rejection, Rejections, null_in_non_nullable, raw_text};
use arrow::array::{Array, AsArray};
use arrow::compute::{CastOptions, cast_with_options, concat_batches};
use arrow::csv::reader::Decoder;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use std::sync::Arc;
use weir_api::{BadRecordPolicy, Error, Result, SplitBatch, SplitCursor, SplitReader};

/// Records skipped per scan when resuming at a cursor (bounds the scan's bookkeeping).
const SKIP_STEP: u64 = 64 * 1024;

/// How a fast-path attempt ended.
enum Fast {
    /// A clean batch.
    Batch(RecordBatch),
    /// The file is exhausted.
    End,
    /// The chunk has a bad record: run the slow path on it.
    Failed,
}

/// The columns of a CSV file: all of them by position, and the ones the job reads.
#[derive(Debug, Clone)]
pub(crate) struct CsvColumns {
    /// Every column of the file, in order.
    pub(crate) file: SchemaRef,
    /// The indices of the columns the job reads (ascending), when not all.
    pub(crate) read: Option<Arc<[usize]>>,
}

/// Reads the records of one CSV file.
#[derive(Debug)]
pub(crate) struct CsvSplitReader {
    input: String,
    /// The file, or a byte range of it; its pending bytes start at a record boundary on line
    /// `line`, counted from the start of the range.
    bytes: ObjectBytes,
    line: u64,
    /// Lines before the range, once an error needs the file's line numbers.
    line_base: u64,
    /// Whether no record of a range past the file's start has been read yet.
    at_range_start: bool,
    next_record: u64,
    /// Records to skip before the first batch (after the header), until done.
    pending_skip: Option<u64>,
    settings: CsvSettings,
    /// The file's columns as decoded: those the job does not read as nullable text, so that
    /// only the columns read can reject a record.
    schema: SchemaRef,
    /// The indices of the columns the job reads, when not all.
    projection: Option<Arc<[usize]>>,
    /// The schema with every column nullable text, for locating bad cells.
    text_schema: SchemaRef,
    batch_size: usize,
    decoder: Option<Decoder>,
    /// Decodes chunks of plain CSV without tokenizing unread fields, when the columns read
    /// have types it parses.
    unquoted: Option<UnquotedDecoder>,
    rejections: Rejections,
}

impl CsvSplitReader {
    /// A reader of `bytes` (the file `input`, or a byte range of it) that starts at data record
    /// `cursor.next_record` of the range.
    pub(crate) fn new(
        input: &str,
        bytes: ObjectBytes,
        settings: CsvSettings,
        columns: CsvColumns,
        batch_size: usize,
        policy: BadRecordPolicy,
        cursor: SplitCursor,
    ) -> Self {
        let CsvColumns { file, read } = columns;
        let schema = match &read {
            None => file,
            Some(read) => Arc::new(Schema::new(
                file.fields()
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        if read.contains(&i) {
                            Field::clone(f)
                        } else {
                            Field::new(f.name(), DataType::Utf8, true)
                        }
                    })
                    .collect::<Vec<_>>(),
            )),
        };
        let text_schema = Arc::new(Schema::new(
            schema
                .fields()
                .iter()
                .map(|f| Field::new(f.name(), DataType::Utf8, true))
                .collect::<Vec<_>>(),
        ));
        let unquoted = UnquotedDecoder::new(&schema, read.as_deref(), settings.delimiter);
        Self {
            input: input.to_owned(),
            at_range_start: bytes.begin() > 0 && cursor.next_record == 0,
            bytes,
            line: 1,
            line_base: 0,
            next_record: cursor.next_record,
            pending_skip: Some(cursor.next_record),
            settings,
            schema,
            projection: read,
            text_schema,
            batch_size,
            decoder: None,
            unquoted,
            rejections: Rejections::new(policy),
        }
    }

    fn decoder(&self, schema: &SchemaRef, batch_size: usize) -> Decoder {
        arrow::csv::ReaderBuilder::new(schema.clone())
            .with_header(false)
            .with_delimiter(self.settings.delimiter)
            .with_batch_size(batch_size)
            .build_decoder()
    }

    /// Locates up to `max` records from the start of the buffer, reading more as needed.
    async fn scan(&mut self, max: usize) -> Result<CsvScan> {
        let mut records = Vec::new();
        let (mut from, mut line) = (0, self.line);
        loop {
            let scan = scan_records(
                self.bytes.pending(),
                from,
                line,
                self.bytes.eof(),
                max - records.len(),
                self.settings.delimiter,
            );
            records.extend(scan.records);
            (from, line) = (scan.consumed, scan.line);
            if records.len() >= max || self.bytes.eof() {
                return Ok(CsvScan {
                    records,
                    consumed: from,
                    line,
                });
            }
            self.bytes.fill().await?;
        }
    }

    fn consume(&mut self, consumed: usize, line: u64) {
        self.bytes.consume(consumed);
        self.line = line;
    }

    /// Skips the header (checking its width) and the records before the cursor.
    async fn skip_start(&mut self, mut to_skip: u64) -> Result<()> {
        // Only the range at the start of the file holds the header.
        if self.settings.has_header && self.bytes.begin() == 0 {
            let scan = self.scan(1).await?;
            if let Some(header) = scan.records.first()
                && header.fields != self.schema.fields().len()
            {
                return Err(Error::schema(
                    &self.input,
                    format!(
                        "the header has {} fields but the schema has {}",
                        header.fields,
                        self.schema.fields().len()
                    ),
                ));
            }
            self.consume(scan.consumed, scan.line);
        }
        while to_skip > 0 {
            let step = to_skip.min(SKIP_STEP);
            let scan = self.scan(step as usize).await?;
            let found = scan.records.len() as u64;
            self.consume(scan.consumed, scan.line);
            to_skip -= found;
            if found < step {
                break;
            }
        }
        Ok(())
    }

    /// Decodes the next chunk of plain CSV ([`UnquotedDecoder`]), reading blocks until it
    /// holds a batch of records; `None` when the chunk is not plain (or no record is left),
    /// to be decoded by arrow's decoder instead.
    async fn unquoted_chunk(&mut self) -> Result<Option<RecordBatch>> {
        let Some(plain) = &self.unquoted else {
            return Ok(None);
        };
        let (end, records) = loop {
            match extent(self.bytes.pending(), self.batch_size, self.bytes.eof()) {
                Extent::Records { end, records } => break (end, records),
                Extent::NeedMore => self.bytes.fill().await?,
            }
        };
        if records == 0 {
            return Ok(None);
        }
        let text = &self.bytes.pending()[..end];
        let Some(batch) = plain.decode(text, records) else {
            return Ok(None);
        };
        if null_in_non_nullable(&batch).is_some() {
            return Ok(None);
        }
        // Every record ends with a line feed but perhaps the last (and no line is empty).
        let line = self.line + records as u64 - u64::from(!text.ends_with(b"\n"));
        self.consume(end, line);
        self.next_record += batch.num_rows() as u64;
        self.at_range_start = false;
        Ok(Some(batch))
    }

    /// Decodes the next chunk with the declared types, reading blocks until the batch is full.
    async fn fast_chunk(&mut self) -> Result<Fast> {
        // Whether the plain path declined a chunk: when arrow's decoder then decodes it cleanly,
        // the file is not plain (quotes, CRLF), and its later chunks go straight to arrow.
        let declined = match self.unquoted_chunk().await? {
            Some(batch) => return Ok(Fast::Batch(batch)),
            None => self.unquoted.is_some(),
        };
        let mut decoder = match self.decoder.take() {
            Some(decoder) => decoder,
            None => {
                let mut builder = arrow::csv::ReaderBuilder::new(self.schema.clone())
                    .with_header(false)
                    .with_delimiter(self.settings.delimiter)
                    .with_batch_size(self.batch_size);
                if let Some(read) = &self.projection {
                    builder = builder.with_projection(read.to_vec());
                }
                builder.build_decoder()
            }
        };
        let mut pos = 0;
        loop {
            if pos < self.bytes.pending().len() {
                match decoder.decode(&self.bytes.pending()[pos..]) {
                    Ok(0) if decoder.capacity() > 0 => return Ok(Fast::Failed),
                    Ok(n) => pos += n,
                    Err(_) => return Ok(Fast::Failed),
                }
                if decoder.capacity() == 0 {
                    break;
                }
                if pos < self.bytes.pending().len() {
                    continue;
                }
            }
            if self.bytes.eof() {
                if decoder.decode(&[]).is_err() {
                    return Ok(Fast::Failed);
                }
                self.check_range_end(self.bytes.pending().len()).await?;
                break;
            }
            self.bytes.fill().await?;
        }
        let batch = match decoder.flush() {
            Ok(Some(batch)) if null_in_non_nullable(&batch).is_none() => batch,
            Ok(None) => {
                let line = self.line + count_lines(&self.bytes.pending()[..pos]);
                self.consume(pos, line);
                return Ok(Fast::End);
            }
            Ok(Some(_)) | Err(_) => return Ok(Fast::Failed),
        };
        let line = self.line + count_lines(&self.bytes.pending()[..pos]);
        self.consume(pos, line);
        self.next_record += batch.num_rows() as u64;
        self.at_range_start = false;
        self.decoder = Some(decoder);
        if declined {
            self.unquoted = None;
        }
        Ok(Fast::Batch(batch))
    }

    /// Decodes the next chunk record by record where needed, rejecting the bad ones.
    async fn slow_chunk(&mut self) -> Result<Option<SplitBatch>> {
        tracing::debug!(input = %self.input, line = self.line, "locating bad CSV records");
        self.decoder = None;
        self.line_base = self.bytes.lines_before_begin().await?;
        let scan = self.scan(self.batch_size).await?;
        if scan.records.is_empty() {
            self.consume(scan.consumed, scan.line);
            return Ok(None);
        }
        if self.bytes.eof() && scan.consumed == self.bytes.pending().len() {
            self.check_range_end(scan.consumed).await?;
        }
        let (data, rejected) = self.decode_located(&scan.records)?;
        let data = match &self.projection {
            Some(read) => data
                .project(read)
                .map_err(|e| Error::arrow("dropping the columns the job does not read", e))?,
            None => data,
        };
        self.consume(scan.consumed, scan.line);
        self.next_record += scan.records.len() as u64;
        self.at_range_start = false;
        self.rejections.reject_all(rejected)?;
        Ok(Some(SplitBatch {
            data,
            dead_letters: self.rejections.take(),
            cursor: SplitCursor {
                next_record: self.next_record,
            },
            backlog: None,
        }))
    }

    /// The good rows of `records` and the rejections, in record order.
    fn decode_located(&self, records: &[CsvRecord]) -> Result<(RecordBatch, Vec<Rejection>)> {
        let width = self.schema.fields().len();
        let mut rejected: Vec<(usize, Rejection)> = Vec::new();
        let mut candidates = Vec::with_capacity(records.len());
        for (i, record) in records.iter().enumerate() {
            if record.fields == width {
                candidates.push(i);
            } else {
                let reason = format!("expected {width} fields, found {}", record.fields);
                rejected.push((i, self.rejection(record, None, reason)));
            }
        }
        let bad_cells = self.find_bad_cells(records, &candidates);
        let mut good = Vec::with_capacity(candidates.len());
        for (&i, bad) in candidates.iter().zip(bad_cells) {
            match bad {
                Some((column, reason)) => {
                    rejected.push((i, self.rejection(&records[i], Some(column), reason)));
                }
                None => good.push(i),
            }
        }
        let (batch, more) = self.decode_typed(records, &good)?;
        rejected.extend(more);
        rejected.sort_by_key(|(i, _)| *i);
        Ok((batch, rejected.into_iter().map(|(_, r)| r).collect()))
    }

    /// For each candidate record, the first column whose text does not fit its type, found by
    /// decoding all columns as text and casting them; all `None` when that is not possible.
    fn find_bad_cells(
        &self,
        records: &[CsvRecord],
        candidates: &[usize],
    ) -> Vec<Option<(usize, String)>> {
        let mut bad = vec![None; candidates.len()];
        if candidates.is_empty() {
            return bad;
        }
        let text = self.join(records, candidates);
        let mut decoder = self.decoder(&self.text_schema, candidates.len());
        let strings = match decode_all(&mut decoder, &text) {
            Ok(Some(batch)) if batch.num_rows() == candidates.len() => batch,
            _ => return bad,
        };
        let safe = CastOptions {
            safe: true,
            ..Default::default()
        };
        for (col, field) in self.schema.fields().iter().enumerate() {
            let Some(column) = strings.column(col).as_string_opt::<i32>() else {
                continue;
            };
            let converted = match field.data_type() {
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => None,
                other => cast_with_options(column, other, &safe).ok(),
            };
            for (row, slot) in bad.iter_mut().enumerate() {
                if slot.is_some() {
                    continue;
                }
                if column.is_null(row) {
                    if !field.is_nullable() {
                        *slot = Some((col, "empty value in a non-nullable column".to_owned()));
                    }
                } else if converted.as_ref().is_some_and(|c| c.is_null(row)) {
                    *slot = Some((
                        col,
                        format!(
                            "`{}` is not a valid {}",
                            weir_api::excerpt(column.value(row)),
                            field.data_type()
                        ),
                    ));
                }
            }
        }
        bad
    }

    /// Decodes `good` records with the declared types; records the parser still rejects (its
    /// rules differ from casting in corners) are found one at a time.
    fn decode_typed(
        &self,
        records: &[CsvRecord],
        good: &[usize],
    ) -> Result<(RecordBatch, Vec<(usize, Rejection)>)> {
        if good.is_empty() {
            return Ok((RecordBatch::new_empty(self.schema.clone()), Vec::new()));
        }
        let text = self.join(records, good);
        let mut decoder = self.decoder(&self.schema, good.len());
        if let Ok(Some(batch)) = decode_all(&mut decoder, &text)
            && batch.num_rows() == good.len()
            && null_in_non_nullable(&batch).is_none()
        {
            return Ok((batch, Vec::new()));
        }
        let mut batches = Vec::with_capacity(good.len());
        let mut rejected = Vec::new();
        for &i in good {
            let record = &records[i];
            let text = self.join(records, &[i]);
            let mut decoder = self.decoder(&self.schema, 1);
            match decode_all(&mut decoder, &text) {
                Ok(Some(batch)) => match null_in_non_nullable(&batch) {
                    None => batches.push(batch),
                    Some(col) => rejected.push((
                        i,
                        self.rejection(record, Some(col), "empty value in a non-nullable column"),
                    )),
                },
                Ok(None) => {}
                Err(e) => {
                    let (column, reason) = describe_parse_error(&e);
                    rejected.push((i, self.rejection(record, column, reason)));
                }
            }
        }
        let batch = concat_batches(&self.schema, &batches)
            .map_err(|e| Error::arrow(format!("assembling rows of `{}`", self.input), e))?;
        Ok((batch, rejected))
    }

    /// The text of the chosen records, each ended by a line feed.
    fn join(&self, records: &[CsvRecord], chosen: &[usize]) -> Vec<u8> {
        let mut text = Vec::new();
        for &i in chosen {
            text.extend_from_slice(&self.bytes.pending()[records[i].start..records[i].end]);
            text.push(b'\n');
        }
        text
    }

    fn rejection(
        &self,
        record: &CsvRecord,
        column: Option<usize>,
        reason: impl Into<String>,
    ) -> Rejection {
        let column = column.map(|c| self.schema.field(c).name().as_str());
        let raw = raw_text(&self.bytes.pending()[record.start..record.end]);
        let mut reason = reason.into();
        if self.at_range_start && record.start == 0 {
            reason.push_str(&format!(
                " (the first record of the byte range at {}: when a quoted field with a line \
                 break spans that point, the file cannot be read in ranges; set `split_size` \
                 to 0)",
                self.bytes.begin()
            ));
        }
        let line = record.line + self.line_base;
        Rejection::new(&self.input, Some(line), column, reason, Some(raw))
    }

    /// At the end of a range that stops inside the file, fails when the range's last line
    /// feed is inside a quoted field: the next range then starts inside a record, so the file
    /// cannot be read in byte ranges. `len` pending bytes, starting at a record, end the range.
    async fn check_range_end(&mut self, len: usize) -> Result<()> {
        let tail = &self.bytes.pending()[..len];
        if !self.bytes.ends_inside() || memchr::memchr(b'"', tail).is_none() {
            return Ok(());
        }
        let scan = scan_records(tail, 0, 0, false, usize::MAX, self.settings.delimiter);
        if scan.consumed == tail.len() {
            return Ok(());
        }
        let lines_in_tail = count_lines(tail);
        let line = self.bytes.lines_before_begin().await? + self.line + lines_in_tail - 1;
        Err(Error::schema(
            &self.input,
            format!(
                "a quoted field holds the line break that ends line {line}, where the file's \
                 byte range ending at byte {} stops, so the file cannot be read in byte \
                 ranges; set the source's `split_size` to 0 (SQL: 'split-size' = '0') to read \
                 it whole",
                self.bytes.end()
            ),
        ))
    }
}

#[async_trait::async_trait]
impl SplitReader for CsvSplitReader {
    async fn next_batch(&mut self) -> Result<Option<SplitBatch>> {
        if let Some(to_skip) = self.pending_skip.take() {
            self.skip_start(to_skip).await?;
        }
        match self.fast_chunk().await? {
            Fast::Batch(data) => Ok(Some(SplitBatch {
                data,
                dead_letters: None,
                cursor: SplitCursor {
                    next_record: self.next_record,
                },
                backlog: None,
            })),
            Fast::End => Ok(None),
            Fast::Failed => self.slow_chunk().await,
        }
    }
}

/// Decodes all of `text` (whole records) and flushes.
fn decode_all(decoder: &mut Decoder, text: &[u8]) -> Result<Option<RecordBatch>, ArrowError> {
    let mut pos = 0;
    while pos < text.len() {
        match decoder.decode(&text[pos..])? {
            0 => break,
            n => pos += n,
        }
    }
    decoder.decode(&[])?;
    decoder.flush()
}

/// The column and a short reason from arrow's CSV parse error
/// (`Error while parsing value 'x' as type 'T' for column N at line L. Row data: ...`).
fn describe_parse_error(err: &ArrowError) -> (Option<usize>, String) {
    let message = err.to_string();
    let between = |start: &str, end: &str| {
        let from = message.find(start)? + start.len();
        let len = message[from..].find(end)?;
        Some(&message[from..from + len])
    };
    let column = between(" for column ", " ").and_then(|c| c.parse().ok());
    match (
        between("parsing value '", "' as type '"),
        between("' as type '", "'"),
    ) {
        (Some(value), Some(ty)) => (
            column,
            format!("`{}` is not a valid {ty}", weir_api::excerpt(value)),
        ),
        _ => (column, message),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::test_support::{bad_record, prepare, read_all, read_split, write};
    use serde_json::json;

    fn schema(fields: &[(&str, DataType, bool)]) -> SchemaRef {
        Arc::new(Schema::new(
            fields
                .iter()
                .map(|(name, ty, nullable)| Field::new(*name, ty.clone(), *nullable))
                .collect::<Vec<_>>(),
        ))
    }

    fn id_price() -> SchemaRef {
        schema(&[
            ("id", DataType::Int64, false),
            ("price", DataType::Int64, true),
        ])
    }

    async fn fail_on(
        contents: &str,
        declared: SchemaRef,
    ) -> (String, Option<u64>, Option<String>, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "in.csv", contents);
        let source = prepare(
            json!({ "path": path }),
            Some(declared),
            BadRecordPolicy::Fail,
        )
        .await
        .unwrap();
        let err = read_all(&source).await.unwrap_err();
        let (input, line, column, message) = bad_record(err);
        assert_eq!(input, path);
        (input, line, column, message)
    }

    #[tokio::test]
    async fn a_bad_int_names_file_line_and_column() {
        let (_, line, column, message) = fail_on("id,price\n1,10\n2,abc\n3,30\n", id_price()).await;
        assert_eq!(line, Some(3));
        assert_eq!(column.as_deref(), Some("price"));
        assert_eq!(message, "`abc` is not a valid Int64");
    }

    #[tokio::test]
    async fn a_huge_bad_value_is_cut_in_the_message() {
        let text = format!("id,price\n1,{}\n", "x".repeat(16 << 10));
        let (_, line, _, message) = fail_on(&text, id_price()).await;
        assert_eq!(line, Some(2));
        assert!(message.len() < 400, "{} bytes", message.len());
        assert!(message.contains("more bytes)"), "{message}");
    }

    #[tokio::test]
    async fn a_wrong_field_count_names_the_line() {
        let (_, line, column, message) = fail_on("id,price\n1,10\n2\n", id_price()).await;
        assert_eq!((line, column), (Some(3), None));
        assert_eq!(message, "expected 2 fields, found 1");
        let (_, line, _, message) = fail_on("id,price\n1,10,7\n", id_price()).await;
        assert_eq!(line, Some(2));
        assert_eq!(message, "expected 2 fields, found 3");
    }

    /// A record that does not fit the source's buffer bound fails the read (also under the
    /// dead-letter policy: it cannot be read to its end without holding it), naming the file
    /// and where the unfinished text starts; CSV and JSON lines alike.
    #[tokio::test]
    async fn a_record_longer_than_the_buffer_bound_fails_naming_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let huge = "x".repeat(10_000);
        for (name, contents, schema) in [
            (
                "in.csv",
                format!("id,price\n1,10\n2,\"{huge}\"\n3,30\n"),
                schema(&[
                    ("id", DataType::Int64, false),
                    ("price", DataType::Utf8, true),
                ]),
            ),
            (
                "in.json",
                format!("{{\"id\":1}}\n{{\"id\":2,\"price\":\"{huge}\"}}\n"),
                schema(&[
                    ("id", DataType::Int64, false),
                    ("price", DataType::Utf8, true),
                ]),
            ),
        ] {
            let path = write(dir.path(), name, contents);
            for policy in [BadRecordPolicy::Fail, BadRecordPolicy::DeadLetter] {
                let source = prepare(
                    json!({ "path": path, "max_buffer_bytes": 4096 }),
                    Some(schema.clone()),
                    policy,
                )
                .await
                .unwrap();
                let (input, line, _, message) = bad_record(read_all(&source).await.unwrap_err());
                assert_eq!((input.as_str(), line), (path.as_str(), None));
                assert!(message.contains("max_buffer_bytes (4096)"), "{message}");
                assert!(message.starts_with("from byte "), "{message}");
            }
        }
    }

    #[tokio::test]
    async fn a_null_in_a_non_nullable_column_is_bad() {
        let (_, line, column, message) = fail_on("id,price\n1,10\n,20\n", id_price()).await;
        assert_eq!(line, Some(3));
        assert_eq!(column.as_deref(), Some("id"));
        assert!(message.contains("non-nullable"), "{message}");
    }

    #[tokio::test]
    async fn quoted_line_breaks_before_a_bad_row_keep_lines_exact() {
        let declared = schema(&[
            ("id", DataType::Int64, false),
            ("note", DataType::Utf8, true),
            ("price", DataType::Int64, true),
        ]);
        let lf = "id,note,price\n1,\"multi\nline\nnote\",10\n\n2,ok,abc\n";
        let (_, line, column, _) = fail_on(lf, declared.clone()).await;
        assert_eq!((line, column.as_deref()), (Some(6), Some("price")));
        let crlf = "id,note,price\r\n1,\"a\r\nb\",10\r\n2,ok,abc\r\n";
        let (_, line, _, _) = fail_on(crlf, declared).await;
        assert_eq!(line, Some(4));
    }

    #[tokio::test]
    async fn a_bad_row_after_clean_chunks_has_its_own_line() {
        let mut contents = String::from("id,price\n");
        for i in 0..20 {
            contents.push_str(&format!("{i},\"{i}\"\n"));
        }
        contents.push_str("20,x\n");
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "in.csv", &contents);
        let options = json!({ "path": path, "batch_size": 4 });
        let source = prepare(options.clone(), Some(id_price()), BadRecordPolicy::Fail)
            .await
            .unwrap();
        let (_, line, column, _) = bad_record(read_all(&source).await.unwrap_err());
        assert_eq!((line, column.as_deref()), (Some(22), Some("price")));
    }

    #[tokio::test]
    async fn plain_chunks_bad_records_and_quoted_chunks_read_alike() {
        // Plain chunks (the plain path), a bad record (arrow's decoder, then the slow path:
        // the plain path stays on), plain chunks again, then quoted ones (arrow's decoder,
        // after which the plain path is off), with the line numbers of dead letters exact.
        let mut contents = String::from("id,price\n1,10\n2,20\n3,x\n4,40\n5,50\n6,60\n");
        contents.push_str("7,\"70\"\n8,80\n9,z\n10,100\n");
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "in.csv", &contents);
        let source = prepare(
            json!({ "path": path, "batch_size": 2 }),
            Some(id_price()),
            BadRecordPolicy::DeadLetter,
        )
        .await
        .unwrap();
        let split = source.enumerate_splits().await.unwrap().remove(0);
        let read = read_split(&source, &split).await.unwrap();
        assert_eq!(
            read.rows,
            [
                "1|10", "2|20", "4|40", "5|50", "6|60", "7|70", "8|80", "10|100"
            ]
        );
        assert_eq!(
            read.dead_letters,
            [
                format!("{path}|4|price|`x` is not a valid Int64|3,x"),
                format!("{path}|10|price|`z` is not a valid Int64|9,z"),
            ]
        );
    }

    #[tokio::test]
    async fn dead_letters_keep_good_rows_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let contents =
            "id,price\r\n1,10\r\n2,abc\r\n3\r\n4,\"4\r\n0\"\r\n,5\r\n6,60\r\n7,70\r\n8,z\r\n9,90";
        let path = write(dir.path(), "in.csv", contents);
        let source = prepare(
            json!({ "path": path, "batch_size": 3 }),
            Some(id_price()),
            BadRecordPolicy::DeadLetter,
        )
        .await
        .unwrap();
        let split = source.enumerate_splits().await.unwrap().remove(0);
        let read = read_split(&source, &split).await.unwrap();
        assert_eq!(read.rows, ["1|10", "6|60", "7|70", "9|90"]);
        assert_eq!(
            read.dead_letters,
            [
                format!("{path}|3|price|`abc` is not a valid Int64|2,abc"),
                format!("{path}|4|∅|expected 2 fields, found 1|3"),
                format!("{path}|5|price|`4\r\n0` is not a valid Int64|4,\"4\r\n0\""),
                format!("{path}|7|id|empty value in a non-nullable column|,5"),
                format!("{path}|10|price|`z` is not a valid Int64|8,z"),
            ]
        );
        assert_eq!(read.cursors, [3, 6, 9]);

        // Resuming after the bad chunk counts the rejected records too.
        let mut resumed = split.clone();
        resumed.cursor.next_record = 4;
        let rest = read_split(&source, &resumed).await.unwrap();
        assert_eq!(rest.rows, ["6|60", "7|70", "9|90"]);
        assert_eq!(rest.dead_letters.len(), 2);
    }

    /// A file mixing clean rows, bad values, short rows, quoted line breaks and both line
    /// endings, read in tiny blocks and small batches, against lines computed while writing it.
    #[tokio::test]
    async fn mixed_input_matches_a_reference_at_every_cursor() {
        let mut contents = String::from("id,note,price\n");
        let mut line = 2;
        let mut good = Vec::new(); // (record index, rendered row)
        let mut bad = Vec::new(); // (record index, line)
        for i in 0..300u64 {
            let end = if i % 2 == 0 { "\r\n" } else { "\n" };
            if i % 37 == 5 {
                contents.push_str(&format!("{i},n,abc{end}"));
                bad.push((i, line));
            } else if i % 53 == 7 {
                contents.push_str(&format!("{i},n{end}"));
                bad.push((i, line));
            } else if i % 11 == 3 {
                contents.push_str(&format!("{i},\"x\ny\",{i}{end}"));
                good.push((i, format!("{i}|x\ny|{i}")));
                line += 1;
            } else {
                contents.push_str(&format!("{i},n,{i}{end}"));
                good.push((i, format!("{i}|n|{i}")));
            }
            line += 1;
        }
        let declared = schema(&[
            ("id", DataType::Int64, false),
            ("note", DataType::Utf8, true),
            ("price", DataType::Int64, true),
        ]);
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "mixed.csv", &contents);
        let options = json!({ "path": path, "batch_size": 16 });
        let source = prepare(
            options.clone(),
            Some(declared.clone()),
            BadRecordPolicy::DeadLetter,
        )
        .await
        .unwrap();
        let split = source.enumerate_splits().await.unwrap().remove(0);
        for start in (0..=300u64).step_by(17) {
            let mut resumed = split.clone();
            resumed.cursor.next_record = start;
            let read = read_split(&source, &resumed).await.unwrap();
            let rows: Vec<_> = good
                .iter()
                .filter(|(i, _)| *i >= start)
                .map(|(_, r)| r.clone())
                .collect();
            assert_eq!(read.rows, rows, "from {start}");
            let lines: Vec<String> = bad
                .iter()
                .filter(|(i, _)| *i >= start)
                .map(|(_, l)| l.to_string())
                .collect();
            let got: Vec<String> = read
                .dead_letters
                .iter()
                .map(|d| d.split('|').nth(1).unwrap().to_owned())
                .collect();
            assert_eq!(got, lines, "from {start}");
        }
        let source = prepare(options, Some(declared), BadRecordPolicy::Fail)
            .await
            .unwrap();
        let (_, line, _, _) = bad_record(read_all(&source).await.unwrap_err());
        assert_eq!(line, Some(bad[0].1));
    }

    #[tokio::test]
    async fn parser_rules_decide_when_casting_is_looser() {
        // Casting accepts `yes` as a boolean, the CSV parser does not: the parser wins.
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "b.csv", "id,flag\n1,true\n2,yes\nx,false\n");
        let declared = schema(&[
            ("id", DataType::Int64, true),
            ("flag", DataType::Boolean, true),
        ]);
        let source = prepare(
            json!({ "path": path }),
            Some(declared),
            BadRecordPolicy::DeadLetter,
        )
        .await
        .unwrap();
        let split = source.enumerate_splits().await.unwrap().remove(0);
        let read = read_split(&source, &split).await.unwrap();
        assert_eq!(read.rows, ["1|true"]);
        assert_eq!(
            read.dead_letters,
            [
                format!("{path}|3|flag|`yes` is not a valid Boolean|2,yes"),
                format!("{path}|4|id|`x` is not a valid Int64|x,false"),
            ]
        );
    }

    #[tokio::test]
    async fn a_header_of_the_wrong_width_is_a_schema_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "h.csv", "a,b,c\n1,2,3\n");
        let source = prepare(
            json!({ "path": path }),
            Some(id_price()),
            BadRecordPolicy::Fail,
        )
        .await
        .unwrap();
        let err = read_all(&source).await.unwrap_err();
        assert!(matches!(err, Error::Schema { .. }), "{err}");
    }
}
