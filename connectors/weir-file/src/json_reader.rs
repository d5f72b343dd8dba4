//! Reading one JSON-lines file from a cursor.
//!
//! A chunk is up to `batch_size` non-blank lines. The fast path decodes the whole chunk: as
//! flat objects of plain values ([`crate::json_flat`]) while the file's chunks are such, else
//! with arrow's JSON decoder; when that fails, the slow path decodes the chunk's lines one at a
//! time and, for each bad line, finds the offending field by decoding it alone.

use crate::json_flat::FlatDecoder;
use crate::object_bytes::ObjectBytes;
use crate::rejection::{Rejection, Rejections, null_in_non_nullable, raw_text};
use arrow::compute::concat_batches;
use arrow::datatypes::{Schema, SchemaRef};
use arrow::json::reader::Decoder;
use arrow::record_batch::RecordBatch;
use std::sync::Arc;
use weir_api::excerpt;
use weir_api::limits::{MAX_JSON_DEPTH, json_depth_exceeds, json_too_deep_message};
use weir_api::{BadRecordPolicy, Error, Result, SplitBatch, SplitCursor, SplitReader};

/// Lines skipped per scan when resuming at a cursor.
const SKIP_STEP: usize = 64 * 1024;

/// One non-blank line located in a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JsonLine {
    /// Offset of the line's first byte.
    pub(crate) start: usize,
    /// Offset of its line feed (or the end of the file).
    pub(crate) end: usize,
    /// 1-based line number.
    pub(crate) line: u64,
}

/// Non-blank lines found by [`scan_lines`], where scanning stopped, and the line number there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JsonScan {
    pub(crate) lines: Vec<JsonLine>,
    pub(crate) consumed: usize,
    pub(crate) line: u64,
}

/// Finds up to `max` non-blank lines in `buf[from..]`, where `buf[from]` is on line `line`; an
/// unterminated last line counts only when `eof` is set.
pub(crate) fn scan_lines(buf: &[u8], from: usize, line: u64, eof: bool, max: usize) -> JsonScan {
    scan_lines_after(buf, from, from, line, eof, max)
}

/// [`scan_lines`] when `buf[from..searched]` is known to hold no line feed (a line that did not
/// end in the bytes read so far): the search goes on where it stopped, so a line longer than
/// many blocks is searched once, not once per block.
fn scan_lines_after(
    buf: &[u8],
    from: usize,
    searched: usize,
    line: u64,
    eof: bool,
    max: usize,
) -> JsonScan {
    let mut lines = Vec::new();
    let (mut pos, mut line) = (from, line);
    while lines.len() < max && pos < buf.len() {
        let resume = searched.clamp(pos, buf.len());
        let end = match memchr::memchr(b'\n', &buf[resume..]) {
            Some(len) => resume + len,
            None if eof => buf.len(),
            None => break,
        };
        if !buf[pos..end].iter().all(u8::is_ascii_whitespace) {
            lines.push(JsonLine {
                start: pos,
                end,
                line,
            });
        }
        line += 1;
        pos = (end + 1).min(buf.len());
    }
    JsonScan {
        lines,
        consumed: pos,
        line,
    }
}

/// Reads the records of one JSON-lines file.
#[derive(Debug)]
pub(crate) struct JsonSplitReader {
    input: String,
    /// The file, or a byte range of it; its pending bytes start line `line`, counted from the
    /// start of the range.
    bytes: ObjectBytes,
    line: u64,
    next_record: u64,
    pending_skip: Option<u64>,
    schema: SchemaRef,
    batch_size: usize,
    decoder: Option<Decoder>,
    /// The flat-object decoder, while the file's chunks are flat: `None` once arrow's decoder
    /// took a chunk it declined (the file has nested values or escapes), or when the schema
    /// has a type it does not parse.
    flat: Option<FlatDecoder>,
    rejections: Rejections,
}

impl JsonSplitReader {
    /// A reader of `bytes` (the file `input`, or a byte range of it) that starts at record
    /// `cursor.next_record` of the range.
    pub(crate) fn new(
        input: &str,
        bytes: ObjectBytes,
        schema: SchemaRef,
        batch_size: usize,
        policy: BadRecordPolicy,
        cursor: SplitCursor,
    ) -> Self {
        let flat = FlatDecoder::new(&schema);
        Self {
            input: input.to_owned(),
            bytes,
            line: 1,
            next_record: cursor.next_record,
            pending_skip: Some(cursor.next_record),
            schema,
            flat,
            batch_size,
            decoder: None,
            rejections: Rejections::new(policy),
        }
    }

    async fn scan(&mut self, max: usize) -> Result<JsonScan> {
        let mut lines = Vec::new();
        let (mut from, mut line, mut searched) = (0, self.line, 0);
        loop {
            let scan = scan_lines_after(
                self.bytes.pending(),
                from,
                searched,
                line,
                self.bytes.eof(),
                max - lines.len(),
            );
            lines.extend(scan.lines);
            (from, line) = (scan.consumed, scan.line);
            // Everything read was searched: what follows `from` is a line without its end.
            searched = self.bytes.pending().len();
            if lines.len() >= max || self.bytes.eof() {
                return Ok(JsonScan {
                    lines,
                    consumed: from,
                    line,
                });
            }
            self.bytes.fill().await?;
        }
    }

    fn consume(&mut self, scan: &JsonScan) {
        self.bytes.consume(scan.consumed);
        self.line = scan.line;
    }

    /// Decodes a chunk in one go; `None` when any line in it is bad.
    fn decode_fast(&mut self, chunk_end: usize, lines: &[JsonLine]) -> Result<Option<RecordBatch>> {
        if let Some(flat) = &self.flat {
            let spans = lines.iter().map(|l| l.start..l.end);
            match flat.decode(&self.bytes.pending()[..chunk_end], spans) {
                Some(batch) if null_in_non_nullable(&batch).is_none() => return Ok(Some(batch)),
                Some(_) => return Ok(None),
                None => {}
            }
        }
        let batch = self.decode_with_arrow(chunk_end, lines)?;
        if batch.is_some() {
            // Arrow decodes what the flat decoder declined: the file is not flat.
            self.flat = None;
        }
        Ok(batch)
    }

    /// Decodes a chunk with arrow's decoder; `None` when any line in it is bad (a line nested
    /// too deep for arrow's decoder, which recurses over nesting, never reaches it).
    fn decode_with_arrow(
        &mut self,
        chunk_end: usize,
        lines: &[JsonLine],
    ) -> Result<Option<RecordBatch>> {
        let pending = self.bytes.pending();
        if lines
            .iter()
            .any(|l| json_depth_exceeds(&pending[l.start..l.end], MAX_JSON_DEPTH).is_some())
        {
            return Ok(None);
        }
        let mut decoder = match self.decoder.take() {
            Some(decoder) => decoder,
            None => json_decoder(&self.schema, self.batch_size)?,
        };
        let chunk = &self.bytes.pending()[..chunk_end];
        match decoder.decode(chunk) {
            Ok(n) if n == chunk.len() && !decoder.has_partial_record() => {}
            _ => return Ok(None),
        }
        match decoder.flush() {
            Ok(Some(batch))
                if batch.num_rows() == lines.len() && null_in_non_nullable(&batch).is_none() =>
            {
                self.decoder = Some(decoder);
                Ok(Some(batch))
            }
            _ => Ok(None),
        }
    }

    /// Decodes a chunk line by line, rejecting the bad lines.
    /// `line_base` lines come before the range.
    fn decode_slowly(
        &self,
        lines: &[JsonLine],
        line_base: u64,
    ) -> Result<(RecordBatch, Vec<Rejection>)> {
        let mut batches = Vec::with_capacity(lines.len());
        let mut rejected = Vec::new();
        for line in lines {
            let text = &self.bytes.pending()[line.start..line.end];
            match decode_line(&self.schema, text)? {
                Ok(batch) => batches.push(batch),
                Err((column, reason)) => rejected.push(Rejection::new(
                    &self.input,
                    Some(line.line + line_base),
                    column.as_deref(),
                    reason,
                    Some(raw_text(text)),
                )),
            }
        }
        let batch = concat_batches(&self.schema, &batches)
            .map_err(|e| Error::arrow(format!("assembling rows of `{}`", self.input), e))?;
        Ok((batch, rejected))
    }
}

#[async_trait::async_trait]
impl SplitReader for JsonSplitReader {
    async fn next_batch(&mut self) -> Result<Option<SplitBatch>> {
        if let Some(mut to_skip) = self.pending_skip.take() {
            while to_skip > 0 {
                let step = to_skip.min(SKIP_STEP as u64) as usize;
                let scan = self.scan(step).await?;
                self.consume(&scan);
                to_skip -= scan.lines.len() as u64;
                if scan.lines.len() < step {
                    break;
                }
            }
        }
        let scan = self.scan(self.batch_size).await?;
        if scan.lines.is_empty() {
            self.consume(&scan);
            return Ok(None);
        }
        let (data, rejected) = match self.decode_fast(scan.consumed, &scan.lines)? {
            Some(batch) => (batch, Vec::new()),
            None => {
                tracing::debug!(input = %self.input, line = self.line, "locating bad JSON lines");
                let line_base = self.bytes.lines_before_begin().await?;
                self.decode_slowly(&scan.lines, line_base)?
            }
        };
        self.consume(&scan);
        self.next_record += scan.lines.len() as u64;
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
}

fn json_decoder(schema: &SchemaRef, batch_size: usize) -> Result<Decoder> {
    arrow::json::ReaderBuilder::new(schema.clone())
        .with_batch_size(batch_size)
        .build_decoder()
        .map_err(|e| Error::schema("json reader", e.to_string()))
}

/// Why one line is bad: the column where known, and the reason.
type LineError = (Option<String>, String);

/// Decodes one line into a one-row batch, or says what is wrong with it.
fn decode_line(schema: &SchemaRef, text: &[u8]) -> Result<Result<RecordBatch, LineError>> {
    if let Some(at) = json_depth_exceeds(text, MAX_JSON_DEPTH) {
        return Ok(Err((None, json_too_deep_message(at))));
    }
    let mut decoder = json_decoder(schema, 1)?;
    let arrow_reason = match decoder.decode(text) {
        Ok(n) if text[n..].iter().any(|b| !b.is_ascii_whitespace()) => {
            "more than one JSON value on the line".to_owned()
        }
        Ok(_) if decoder.has_partial_record() => "incomplete JSON value".to_owned(),
        Ok(_) => match decoder.flush() {
            Ok(Some(batch)) => match null_in_non_nullable(&batch) {
                None => return Ok(Ok(batch)),
                Some(col) => {
                    return Ok(Err((
                        Some(schema.field(col).name().clone()),
                        "missing or null value in a non-nullable column".to_owned(),
                    )));
                }
            },
            Ok(None) => "no JSON value on the line".to_owned(),
            Err(e) => e.to_string(),
        },
        Err(e) => e.to_string(),
    };
    Ok(Err(
        explain_line(schema, text)?.unwrap_or((None, arrow_reason))
    ))
}

/// Finds what is wrong with a line the decoder rejected: malformed JSON, not an object, or the
/// first field that does not fit its column (decoded alone). `None` when no single cause shows.
fn explain_line(schema: &SchemaRef, text: &[u8]) -> Result<Option<LineError>> {
    let malformed = |e: serde_json::Error| {
        let message = e.to_string();
        let message = message
            .split(" at line ")
            .next()
            .unwrap_or(&message)
            .to_owned();
        Some((
            None,
            format!("malformed JSON at character {}: {message}", e.column()),
        ))
    };
    let mut values = serde_json::Deserializer::from_slice(text).into_iter::<serde_json::Value>();
    let value = match values.next() {
        Some(Ok(value)) => value,
        Some(Err(e)) => return Ok(malformed(e)),
        None => return Ok(Some((None, "no JSON value on the line".to_owned()))),
    };
    match values.next() {
        None => {}
        Some(Ok(_)) => {
            return Ok(Some((
                None,
                "more than one JSON value on the line".to_owned(),
            )));
        }
        Some(Err(e)) => return Ok(malformed(e)),
    }
    let serde_json::Value::Object(object) = value else {
        return Ok(Some((
            None,
            format!(
                "expected a JSON object, found `{}`",
                excerpt(&value.to_string())
            ),
        )));
    };
    for field in schema.fields() {
        let value = object.get(field.name());
        match value {
            None | Some(serde_json::Value::Null) => {
                if !field.is_nullable() {
                    return Ok(Some((
                        Some(field.name().clone()),
                        "missing or null value in a non-nullable column".to_owned(),
                    )));
                }
            }
            Some(value) => {
                let single = Arc::new(Schema::new(vec![field.clone()]));
                let mut one = serde_json::Map::new();
                one.insert(field.name().clone(), value.clone());
                let text = serde_json::Value::Object(one).to_string();
                let mut decoder = json_decoder(&single, 1)?;
                let fits = decoder.decode(text.as_bytes()).is_ok()
                    && matches!(decoder.flush(), Ok(Some(_)));
                if !fits {
                    return Ok(Some((
                        Some(field.name().clone()),
                        format!(
                            "`{}` is not a valid {}",
                            excerpt(&value.to_string()),
                            field.data_type()
                        ),
                    )));
                }
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::test_support::{bad_record, prepare, read_all, read_split, write};
    use arrow::datatypes::{DataType, Field};
    use serde_json::json;

    fn user_n() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("user", DataType::Utf8, false),
            Field::new("n", DataType::Int64, true),
        ]))
    }

    /// `contents` as `dir/in.json` of `user_n`, read in batches of `batch_size` lines with dead
    /// letters: the file's path and what was read.
    async fn read_with_dead_letters(
        dir: &std::path::Path,
        contents: &str,
        batch_size: usize,
    ) -> (String, crate::test_support::SplitRead) {
        let path = write(dir, "in.json", contents);
        let source = prepare(
            json!({ "path": path, "batch_size": batch_size }),
            Some(user_n()),
            BadRecordPolicy::DeadLetter,
        )
        .await
        .unwrap();
        let split = source.enumerate_splits().await.unwrap().remove(0);
        (path, read_split(&source, &split).await.unwrap())
    }

    async fn fail_on(contents: &str) -> (Option<u64>, Option<String>, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "in.json", contents);
        let source = prepare(
            json!({ "path": path }),
            Some(user_n()),
            BadRecordPolicy::Fail,
        )
        .await
        .unwrap();
        let (input, line, column, message) = bad_record(read_all(&source).await.unwrap_err());
        assert_eq!(input, path);
        (line, column, message)
    }

    #[tokio::test]
    async fn a_malformed_line_names_its_line() {
        let (line, column, message) =
            fail_on("{\"user\":\"a\"}\n\n{\"user\":\n{\"user\":\"c\"}\n").await;
        assert_eq!((line, column), (Some(3), None));
        assert!(message.starts_with("malformed JSON"), "{message}");
    }

    #[tokio::test]
    async fn a_type_mismatch_names_the_field() {
        let (line, column, message) =
            fail_on("{\"user\":\"a\",\"n\":1}\r\n{\"user\":\"b\",\"n\":\"many\"}\r\n").await;
        assert_eq!((line, column.as_deref()), (Some(2), Some("n")));
        assert_eq!(message, "`\"many\"` is not a valid Int64");
    }

    #[tokio::test]
    async fn a_missing_non_nullable_field_is_bad() {
        let (line, column, message) = fail_on("{\"n\":1}\n").await;
        assert_eq!((line, column.as_deref()), (Some(1), Some("user")));
        assert!(message.contains("non-nullable"), "{message}");
        let (line, _, message) = fail_on("{\"user\":\"a\"} {\"user\":\"b\"}\n").await;
        assert_eq!(line, Some(1));
        assert_eq!(message, "more than one JSON value on the line");
        let (_, _, message) = fail_on("[1,2]\n").await;
        assert!(message.starts_with("expected a JSON object"), "{message}");
    }

    #[tokio::test]
    async fn dead_letters_keep_good_rows_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let contents = "{\"user\":\"a\",\"n\":1}\n\
                        {\"user\":\"b\",\"n\":true}\n\
                        \n\
                        {\"user\":\"c\"}\n\
                        {\"user\":\n\
                        {\"n\":5}\n\
                        {\"user\":\"f\",\"n\":6}";
        let (path, read) = read_with_dead_letters(dir.path(), contents, 2).await;
        assert_eq!(read.rows, ["a|1", "c|∅", "f|6"]);
        let lines: Vec<&str> = read
            .dead_letters
            .iter()
            .map(|d| d.split('|').nth(1).unwrap())
            .collect();
        assert_eq!(lines, ["2", "5", "6"]);
        assert_eq!(
            read.dead_letters[0],
            format!("{path}|2|n|`true` is not a valid Int64|{{\"user\":\"b\",\"n\":true}}")
        );
        assert_eq!(read.cursors, [2, 4, 6]);
    }

    /// 50,000 levels overflowed the stack of arrow's decoder (its error formatting recurses);
    /// now such a line is a bad record like any other, nested lines within the limit still read.
    #[tokio::test]
    async fn a_line_nested_too_deep_is_a_dead_letter_not_a_stack_overflow() {
        let dir = tempfile::tempdir().unwrap();
        let deep = format!("{{\"n\":{}1{}}}", "[".repeat(50_000), "]".repeat(50_000));
        let within = format!(
            "{{\"user\":\"c\",\"n\":3,\"x\":{}1{}}}",
            "[".repeat(998),
            "]".repeat(998)
        );
        let contents = format!("{{\"user\":\"a\",\"n\":1}}\n{deep}\n{within}\n");
        let (_, read) = read_with_dead_letters(dir.path(), &contents, 8).await;
        assert_eq!(read.rows, ["a|1", "c|3"]);
        assert_eq!(read.dead_letters.len(), 1);
        let fields: Vec<&str> = read.dead_letters[0].splitn(5, '|').collect();
        assert_eq!(fields[1], "2");
        assert_eq!(
            fields[3],
            "the JSON value nests objects and arrays more than 1000 levels deep (at character \
             1005)"
        );
        // Under the fail policy, the job stops naming the line.
        let (line, _, message) = fail_on(&contents).await;
        assert_eq!(line, Some(2));
        assert!(message.contains("more than 1000 levels"), "{message}");
    }

    #[tokio::test]
    async fn flat_and_nested_chunks_read_alike() {
        let dir = tempfile::tempdir().unwrap();
        let contents = "{\"user\":\"a\",\"n\":1}\n\
                        {\"n\":2, \"user\":\"b\", \"skip\": 0.5}\n\
                        {\"user\":\"c\\\"q\",\"n\":3,\"x\":{\"y\":[1]}}\n\
                        {\"user\":\"d\",\"n\":null}\n\
                        {\"user\":\"e\",\"n\":5}\n";
        let path = write(dir.path(), "in.json", contents);
        let source = prepare(
            json!({ "path": path, "batch_size": 2 }),
            Some(user_n()),
            BadRecordPolicy::Fail,
        )
        .await
        .unwrap();
        let split = source.enumerate_splits().await.unwrap().remove(0);
        let read = read_split(&source, &split).await.unwrap();
        assert_eq!(read.rows, ["a|1", "b|2", "c\"q|3", "d|∅", "e|5"]);
        assert_eq!(read.cursors, [2, 4, 5]);
    }

    #[test]
    fn scans_non_blank_lines_with_their_numbers() {
        let text = b"{\"a\":1}\r\n\n  \n{\"a\":2}\n{\"a\":3}";
        let scan = scan_lines(text, 0, 1, false, 10);
        assert_eq!(
            scan.lines.iter().map(|l| l.line).collect::<Vec<_>>(),
            [1, 4]
        );
        assert_eq!(scan.line, 5);
        let rest = scan_lines(text, scan.consumed, scan.line, true, 10);
        assert_eq!(rest.lines.len(), 1);
        assert_eq!(rest.lines[0].line, 5);
        assert_eq!(rest.consumed, text.len());
    }
}
