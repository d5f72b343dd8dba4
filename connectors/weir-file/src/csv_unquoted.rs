//! Decoding plain CSV without tokenizing the fields nobody reads.
//!
//! arrow's CSV decoder runs every byte of every record through its tokenizer and copies every
//! field, also those of the columns a job does not read. Most files need none of that
//! machinery: a chunk with no quote, no carriage return and no empty line is cut at line feeds
//! and delimiters directly, and only the fields of the columns read are parsed, with arrow's
//! own rules: an empty field is null, integers and floats go through
//! `arrow_cast::parse::Parser` (as arrow's decoder parses them), text is kept as it is (the
//! whole chunk must be UTF-8, as arrow's decoder requires). A chunk outside that (a quote, a
//! column type other than integers, floats and text, a record with another field count, a
//! value that does not parse) gives `None`, and the reader decodes it with arrow's decoder as
//! before: results, rejections and errors are the same either way.

use crate::text_numbers::{is_number, number_column};
use arrow::array::{ArrayRef, StringBuilder};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use std::sync::Arc;

/// Where the text of the next records ends.
pub(crate) enum Extent {
    /// `records` whole records end at byte `end` (the last one perhaps without a line feed,
    /// at the end of the input).
    Records { end: usize, records: usize },
    /// Fewer than the records asked for end in the text, and more text follows.
    NeedMore,
}

/// The byte extent of up to `max` records at the start of `text`; `eof`: no text follows.
pub(crate) fn extent(text: &[u8], max: usize, eof: bool) -> Extent {
    let mut records = 0;
    for at in memchr::memchr_iter(b'\n', text) {
        records += 1;
        if records == max {
            return Extent::Records {
                end: at + 1,
                records,
            };
        }
    }
    let tail = text.len() - text.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    if !eof {
        return Extent::NeedMore;
    }
    Extent::Records {
        end: text.len(),
        records: records + usize::from(tail > 0),
    }
}

/// Decodes chunks of unquoted CSV into the columns read.
#[derive(Debug)]
pub(crate) struct UnquotedDecoder {
    delimiter: u8,
    /// Columns of the file.
    fields: usize,
    /// The columns read, as (file column, type), in output order.
    columns: Vec<(usize, DataType)>,
    /// Per file column, whether it is read.
    wanted: Vec<bool>,
    /// The schema of the batches: the columns read.
    schema: SchemaRef,
}

impl UnquotedDecoder {
    /// A decoder of records with `file.fields().len()` fields into the columns `read` of
    /// `file` (all when `None`), or `None` when a column read has a type this decoder does not
    /// parse, or the delimiter is a quote, a line feed or a carriage return.
    pub(crate) fn new(file: &SchemaRef, read: Option<&[usize]>, delimiter: u8) -> Option<Self> {
        if matches!(delimiter, b'"' | b'\n' | b'\r') {
            return None;
        }
        let read: Vec<usize> = match read {
            Some(r) => r.to_vec(),
            None => (0..file.fields().len()).collect(),
        };
        let mut columns = Vec::with_capacity(read.len());
        for &i in &read {
            let data_type = file.field(i).data_type().clone();
            if !supported(&data_type) {
                return None;
            }
            columns.push((i, data_type));
        }
        let schema = Arc::new(file.project(&read).ok()?);
        let wanted = (0..file.fields().len())
            .map(|f| read.contains(&f))
            .collect();
        Some(Self {
            delimiter,
            fields: file.fields().len(),
            columns,
            wanted,
            schema,
        })
    }

    /// Decodes `records` records that make up all of `text`, or `None` when the text is not
    /// plain CSV of this shape or a value does not parse (see the module documentation).
    pub(crate) fn decode(&self, text: &[u8], records: usize) -> Option<RecordBatch> {
        if memchr::memchr(b'\r', text).is_some() {
            return None;
        }
        let text = std::str::from_utf8(text).ok()?;
        let bytes = text.as_bytes();
        // The byte range of every field read, per column, from one pass over the delimiters,
        // line feeds and quotes (a quote leaves the chunk to arrow's decoder).
        let mut ranges: Vec<Vec<(u32, u32)>> = self
            .wanted
            .iter()
            .map(|&w| Vec::with_capacity(if w { records } else { 0 }))
            .collect();
        let (mut field, mut from, mut line_start, mut found) = (0usize, 0usize, 0usize, 0usize);
        let mut push = |field: usize, from: usize, to: usize| -> Option<()> {
            if *self.wanted.get(field)? {
                ranges[field].push((u32::try_from(from).ok()?, u32::try_from(to).ok()?));
            }
            Some(())
        };
        for at in memchr::memchr3_iter(self.delimiter, b'\n', b'"', bytes) {
            if bytes[at] == b'"' {
                return None;
            }
            push(field, from, at)?;
            from = at + 1;
            if bytes[at] == b'\n' {
                if field + 1 != self.fields || at == line_start {
                    return None;
                }
                found += 1;
                field = 0;
                line_start = from;
            } else {
                field += 1;
            }
        }
        // The last record, when the text ends without a line feed.
        if from < bytes.len() || field > 0 {
            push(field, from, bytes.len())?;
            if field + 1 != self.fields {
                return None;
            }
            found += 1;
        }
        if found != records {
            return None;
        }
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(self.columns.len());
        for (file_column, data_type) in &self.columns {
            arrays.push(column(text, &ranges[*file_column], data_type)?);
        }
        RecordBatch::try_new(self.schema.clone(), arrays).ok()
    }
}

fn supported(data_type: &DataType) -> bool {
    is_number(data_type) || *data_type == DataType::Utf8
}

/// One column from its fields' byte ranges in `text`.
fn column(text: &str, ranges: &[(u32, u32)], data_type: &DataType) -> Option<ArrayRef> {
    if *data_type != DataType::Utf8 {
        // An empty field is null.
        return number_column(data_type, ranges.len(), |i| {
            let (a, b) = ranges[i];
            field(text, a, b).map(|s| (!s.is_empty()).then_some(s))
        });
    }
    let bytes: usize = ranges.iter().map(|&(a, b)| (b - a) as usize).sum();
    let mut builder = StringBuilder::with_capacity(ranges.len(), bytes);
    for &(a, b) in ranges {
        match field(text, a, b)? {
            "" => builder.append_null(),
            s => builder.append_value(s),
        }
    }
    Some(Arc::new(builder.finish()))
}

/// The field `a..b` of `text` (its bounds are next to ASCII delimiters and line feeds, so
/// they are character boundaries).
fn field(text: &str, a: u32, b: u32) -> Option<&str> {
    text.get(a as usize..b as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{Field, Schema};
    use proptest::prelude::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("b", DataType::Utf8, true),
            Field::new("c", DataType::Float64, true),
            Field::new("d", DataType::UInt8, true),
            Field::new("e", DataType::Utf8, true),
        ]))
    }

    /// What arrow's decoder makes of `text` (all records), or `None` when it fails.
    fn arrow_decode(text: &[u8], read: Option<&[usize]>, delimiter: u8) -> Option<RecordBatch> {
        let mut builder = arrow::csv::ReaderBuilder::new(schema())
            .with_header(false)
            .with_delimiter(delimiter)
            .with_batch_size(1 << 20);
        if let Some(r) = read {
            builder = builder.with_projection(r.to_vec());
        }
        let mut decoder = builder.build_decoder();
        let mut pos = 0;
        while pos < text.len() {
            match decoder.decode(&text[pos..]).ok()? {
                0 => break,
                n => pos += n,
            }
        }
        decoder.decode(&[]).ok()?;
        decoder.flush().ok()?
    }

    fn records(text: &[u8]) -> usize {
        match extent(text, usize::MAX, true) {
            Extent::Records { records, .. } => records,
            Extent::NeedMore => unreachable!("eof"),
        }
    }

    #[test]
    fn plain_records_decode_as_arrow_decodes_them() {
        let text = b"1,x,2.5,7,y\n-3,,1e3,,z\n,w,-0.0,255,\n";
        for read in [None, Some(&[0, 2][..]), Some(&[4][..]), Some(&[1, 3][..])] {
            let d = UnquotedDecoder::new(&schema(), read, b',').expect("supported");
            let got = d.decode(text, 3).expect("plain text");
            assert_eq!(Some(got), arrow_decode(text, read, b','), "{read:?}");
            let unterminated = &text[..text.len() - 1];
            let got = d
                .decode(unterminated, 3)
                .expect("the last line ends the text");
            assert_eq!(
                Some(got),
                arrow_decode(unterminated, read, b','),
                "{read:?}"
            );
        }
    }

    #[test]
    fn anything_else_is_left_to_arrow() {
        let d = UnquotedDecoder::new(&schema(), None, b',').expect("supported");
        for (text, why) in [
            (&b"1,\"x\",2,3,y\n"[..], "a quote"),
            (b"1,x,2,3,y\r\n", "a carriage return"),
            (b"1,x,2,3\n", "too few fields"),
            (b"1,x,2,3,y,9\n", "too many fields"),
            (b"1,x,2,3,y\n\n", "an empty line"),
            (b"one,x,2,3,y\n", "a value that does not parse"),
            (b"1,x,2,256,y\n", "an overflowing value"),
            (b"1,\xff,2,3,y\n", "text that is not UTF-8"),
        ] {
            assert!(d.decode(text, records(text)).is_none(), "{why}");
        }
        let mut times = (*schema()).clone().fields.to_vec();
        times[0] = Arc::new(Field::new("a", DataType::Date32, true));
        let times = Arc::new(Schema::new(times));
        assert!(UnquotedDecoder::new(&times, None, b',').is_none());
        assert!(UnquotedDecoder::new(&times, Some(&[1]), b',').is_some());
        assert!(UnquotedDecoder::new(&schema(), None, b'"').is_none());
    }

    #[test]
    fn the_extent_of_records_stops_at_the_asked_count_or_the_input() {
        let at = |text: &[u8], max, eof| match extent(text, max, eof) {
            Extent::Records { end, records } => Some((end, records)),
            Extent::NeedMore => None,
        };
        assert_eq!(at(b"a\nb\nc\n", 2, false), Some((4, 2)));
        assert_eq!(at(b"a\nb\nc", 5, false), None, "more text may follow");
        assert_eq!(
            at(b"a\nb\nc", 5, true),
            Some((5, 3)),
            "the last line ends the input"
        );
        assert_eq!(at(b"a\nb\n", 5, true), Some((4, 2)));
        assert_eq!(at(b"", 5, true), Some((0, 0)));
    }

    /// The full tier (docs/testing.md): Arrow's CSV reader on every generated case takes seconds
    /// in a debug build.
    mod full {
        use super::*;

        proptest! {
            #[test]
            fn decodes_what_arrow_decodes_or_leaves_it_to_arrow(
                rows in proptest::collection::vec(
                    (
                        proptest::option::of(-1000_i64..1000),
                        "[a-z ;]{0,4}",
                        proptest::option::of(-100.0_f64..100.0),
                        proptest::option::of(0_u16..300),
                        "[a-z0-9 ]{0,3}",
                    ),
                    1..40,
                ),
                delimiter in proptest::sample::select(vec![b',', b';', b'\t', b'|']),
                read in proptest::sample::select(vec![None, Some(vec![0]), Some(vec![1, 4]), Some(vec![0, 2, 3])]),
                unterminated in any::<bool>(),
            ) {
                let d = delimiter as char;
                let mut text = String::new();
                for (a, b, c, e, f) in &rows {
                    let show = |v: Option<String>| v.unwrap_or_default();
                    text.push_str(&format!(
                        "{}{d}{b}{d}{}{d}{}{d}{f}\n",
                        show(a.map(|v| v.to_string())),
                        show(c.map(|v| v.to_string())),
                        show(e.map(|v| v.to_string())),
                    ));
                }
                if unterminated {
                    text.pop();
                }
                let decoder = UnquotedDecoder::new(&schema(), read.as_deref(), delimiter)
                    .expect("supported");
                let text = text.as_bytes();
                if let Some(got) = decoder.decode(text, records(text)) {
                    prop_assert_eq!(Some(got), arrow_decode(text, read.as_deref(), delimiter));
                }
            }
        }
    }
}
