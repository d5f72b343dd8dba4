//! Decoding flat JSON lines without building arrow's tape of every field.
//!
//! arrow's JSON decoder tokenizes every value of every object into its tape, also the values of
//! the fields a job does not read, and then builds the columns from the tape. Most JSON-lines
//! files are flat objects of plain values; for a chunk of those, one pass over each line finds
//! the value of every column read, and only those values are parsed, with arrow's own rules:
//! integers and floats through `arrow_cast::parse::Parser`, text kept as it is, `null` or a
//! missing field null. A chunk outside that shape gives `None` and the reader decodes it with
//! arrow's decoder as before, so results, rejections and errors are the same either way: a
//! nested value, an escape in a string, a repeated field, a number that
//! is not plain JSON grammar, a value whose JSON type is not its column's (arrow may coerce
//! it), a column type other than integers, floats, booleans and text, text that is not UTF-8.

use crate::text_numbers::{is_number, number_column};
use arrow::array::{ArrayRef, BooleanBuilder, StringBuilder};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use std::ops::Range;
use std::sync::Arc;

/// The most columns a flat decoder reads (one bit each for repeated-field detection).
const MAX_COLUMNS: usize = 64;

/// One field's value in a line: where it is in the chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value {
    /// `null`, or the field is missing.
    Null,
    /// A string's contents (without the quotes), no escapes.
    Text(u32, u32),
    /// A number in JSON grammar; `integer`: without fraction or exponent.
    Number { from: u32, to: u32, integer: bool },
    /// `true` or `false`.
    Bool(bool),
}

/// Decodes chunks of flat JSON lines into the columns of a schema.
#[derive(Debug)]
pub(crate) struct FlatDecoder {
    schema: SchemaRef,
    /// Each column's name, in schema order.
    names: Vec<Box<[u8]>>,
}

impl FlatDecoder {
    /// A decoder into `schema`, or `None` when a column has a type this decoder does not parse
    /// or there are more than 64 columns.
    pub(crate) fn new(schema: &SchemaRef) -> Option<Self> {
        if schema.fields().len() > MAX_COLUMNS
            || !schema.fields().iter().all(|f| supported(f.data_type()))
        {
            return None;
        }
        Some(Self {
            schema: schema.clone(),
            names: schema
                .fields()
                .iter()
                .map(|f| f.name().as_bytes().into())
                .collect(),
        })
    }

    /// Decodes the non-blank lines of `chunk` at `lines` (the byte ranges the reader's line
    /// scan found, each without its line feed), or `None` when the chunk is not flat JSON of
    /// this shape or a value does not parse (see the module documentation).
    pub(crate) fn decode(
        &self,
        chunk: &[u8],
        lines: impl ExactSizeIterator<Item = Range<usize>>,
    ) -> Option<RecordBatch> {
        let text = std::str::from_utf8(chunk).ok()?;
        let bytes = text.as_bytes();
        u32::try_from(bytes.len()).ok()?;
        let mut values: Vec<Vec<Value>> = self
            .names
            .iter()
            .map(|_| Vec::with_capacity(lines.len()))
            .collect();
        let mut row = vec![Value::Null; self.names.len()];
        for line in lines {
            let end = line.end.min(bytes.len());
            let first = skip_space(bytes, line.start.min(end), end);
            if first == end {
                return None;
            }
            row.fill(Value::Null);
            self.line(bytes, first, end, &mut row)?;
            for (column, value) in values.iter_mut().zip(&row) {
                column.push(*value);
            }
        }
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(values.len());
        for (field, values) in self.schema.fields().iter().zip(&values) {
            arrays.push(column(text, values, field.data_type())?);
        }
        RecordBatch::try_new(self.schema.clone(), arrays).ok()
    }

    /// The column named `key`: lengths and first bytes first, which settle most keys.
    fn column_of(&self, key: &[u8]) -> Option<usize> {
        self.names
            .iter()
            .position(|n| n.len() == key.len() && n.first() == key.first() && **n == *key)
    }

    /// Reads the object at `bytes[p..end]` (a line without its line feed, from its first
    /// non-space byte) into `row`.
    fn line(&self, bytes: &[u8], mut p: usize, end: usize, row: &mut [Value]) -> Option<()> {
        if bytes[p] != b'{' {
            return None;
        }
        p = skip_space(bytes, p + 1, end);
        let mut seen: u64 = 0;
        if bytes.get(p) == Some(&b'}') {
            p += 1;
        } else {
            loop {
                if p >= end || bytes[p] != b'"' {
                    return None;
                }
                let key_end = string_end(bytes, p + 1, end)?;
                let key = &bytes[p + 1..key_end];
                p = skip_space(bytes, key_end + 1, end);
                if p >= end || bytes[p] != b':' {
                    return None;
                }
                p = skip_space(bytes, p + 1, end);
                let (value, next) = value(bytes, p, end)?;
                if let Some(c) = self.column_of(key) {
                    if seen & (1 << c) != 0 {
                        return None;
                    }
                    seen |= 1 << c;
                    row[c] = value;
                }
                p = skip_space(bytes, next, end);
                match bytes.get(p) {
                    Some(b',') if p < end => p = skip_space(bytes, p + 1, end),
                    Some(b'}') if p < end => {
                        p += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        (skip_space(bytes, p, end) == end).then_some(())
    }
}

/// The first position at or after `p` (below `end`) that is not JSON white space.
fn skip_space(bytes: &[u8], mut p: usize, end: usize) -> usize {
    while p < end && matches!(bytes[p], b' ' | b'\t' | b'\r') {
        p += 1;
    }
    p
}

/// The position of the quote that ends the string whose contents start at `p`; `None` for an
/// escape or no end before `end`. (arrow's decoder keeps control characters in strings as they
/// are, and so does this.) The first bytes are looked at one by one: most strings of JSON lines
/// are short, where a call to `memchr` costs more than it saves.
fn string_end(bytes: &[u8], p: usize, end: usize) -> Option<usize> {
    const SHORT: usize = 16;
    let head = end.min(p + SHORT);
    for (i, &b) in bytes[p..head].iter().enumerate() {
        match b {
            b'"' => return Some(p + i),
            b'\\' => return None,
            _ => {}
        }
    }
    let at = head + memchr::memchr2(b'"', b'\\', &bytes[head..end])?;
    (bytes[at] == b'"').then_some(at)
}

/// The value starting at `bytes[p]`, and the position after it.
fn value(bytes: &[u8], p: usize, end: usize) -> Option<(Value, usize)> {
    let pos = |at: usize| u32::try_from(at).ok();
    match *bytes.get(p).filter(|_| p < end)? {
        b'"' => {
            let to = string_end(bytes, p + 1, end)?;
            Some((Value::Text(pos(p + 1)?, pos(to)?), to + 1))
        }
        b'-' | b'0'..=b'9' => {
            let (to, integer) = number_end(bytes, p, end)?;
            Some((
                Value::Number {
                    from: pos(p)?,
                    to: pos(to)?,
                    integer,
                },
                to,
            ))
        }
        _ => [
            (&b"true"[..], Value::Bool(true)),
            (b"false", Value::Bool(false)),
            (b"null", Value::Null),
        ]
        .into_iter()
        .find(|(word, _)| bytes[p..end].starts_with(word))
        .map(|(word, v)| (v, p + word.len())),
    }
}

/// The end of the number in JSON grammar starting at `p`
/// (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`), and whether it is an integer.
fn number_end(bytes: &[u8], mut p: usize, end: usize) -> Option<(usize, bool)> {
    let digits = |mut p: usize| {
        let from = p;
        while p < end && bytes[p].is_ascii_digit() {
            p += 1;
        }
        (p > from).then_some(p)
    };
    if bytes[p] == b'-' {
        p += 1;
    }
    let int_start = p;
    p = digits(p)?;
    if bytes[int_start] == b'0' && p > int_start + 1 {
        return None;
    }
    let mut integer = true;
    if p < end && bytes[p] == b'.' {
        p = digits(p + 1)?;
        integer = false;
    }
    if p < end && matches!(bytes[p], b'e' | b'E') {
        p += 1;
        if p < end && matches!(bytes[p], b'+' | b'-') {
            p += 1;
        }
        p = digits(p)?;
        integer = false;
    }
    Some((p, integer))
}

fn supported(data_type: &DataType) -> bool {
    is_number(data_type) || matches!(data_type, DataType::Boolean | DataType::Utf8)
}

/// One column from its values in `text`.
fn column(text: &str, values: &[Value], data_type: &DataType) -> Option<ArrayRef> {
    match data_type {
        DataType::Boolean => {
            let mut builder = BooleanBuilder::with_capacity(values.len());
            for v in values {
                match v {
                    Value::Null => builder.append_null(),
                    Value::Bool(b) => builder.append_value(*b),
                    _ => return None,
                }
            }
            Some(Arc::new(builder.finish()))
        }
        DataType::Utf8 => {
            let bytes: usize = values
                .iter()
                .map(|v| match v {
                    Value::Text(a, b) => (b - a) as usize,
                    _ => 0,
                })
                .sum();
            let mut builder = StringBuilder::with_capacity(values.len(), bytes);
            for v in values {
                match v {
                    Value::Null => builder.append_null(),
                    Value::Text(a, b) => builder.append_value(slice(text, *a, *b)?),
                    _ => return None,
                }
            }
            Some(Arc::new(builder.finish()))
        }
        // Integer columns take plain JSON integers only (arrow's own decoder handles the rest).
        numbers => {
            let floats = matches!(numbers, DataType::Float32 | DataType::Float64);
            number_column(numbers, values.len(), |i| match values[i] {
                Value::Null => Some(None),
                Value::Number { from, to, integer } if integer || floats => {
                    slice(text, from, to).map(Some)
                }
                _ => None,
            })
        }
    }
}

/// The text `a..b` (its bounds are next to ASCII quotes and delimiters, so they are character
/// boundaries).
fn slice(text: &str, a: u32, b: u32) -> Option<&str> {
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
            Field::new("e", DataType::Boolean, true),
        ]))
    }

    /// What arrow's decoder makes of `text`, or `None` when it fails.
    fn arrow_decode(text: &[u8], schema: &SchemaRef) -> Option<RecordBatch> {
        let mut decoder = arrow::json::ReaderBuilder::new(schema.clone())
            .with_batch_size(1 << 20)
            .build_decoder()
            .ok()?;
        let n = decoder.decode(text).ok()?;
        (n == text.len() && !decoder.has_partial_record()).then_some(())?;
        decoder.flush().ok()?
    }

    /// The non-blank lines of `text`, as the reader's line scan finds them.
    fn lines(text: &[u8]) -> std::vec::IntoIter<Range<usize>> {
        crate::json_reader::scan_lines(text, 0, 1, true, usize::MAX)
            .lines
            .iter()
            .map(|l| l.start..l.end)
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn flat_lines_decode_as_arrow_decodes_them() {
        let text = br#"{"a": 1, "b": "x", "c": 2.5, "d": 7, "e": true, "zz": [1, {"q": 2}]}
 {"e":false,"d":null,"c":-1e3,"b":"y z","a":-3}

{"a":null , "b" : "" , "c":0, "other": "\u00e9"}
{}
{"c": 1.5E-2, "x": {"nested": true}}"#;
        // The nested and escaped values are of fields nobody reads; they still make the
        // chunk arrow's.
        let d = FlatDecoder::new(&schema()).expect("supported");
        assert!(d.decode(text, lines(text)).is_none());
        let flat = br#"{"a": 1, "b": "x", "c": 2.5, "d": 7, "e": true, "zz": [1]}"#;
        assert!(d.decode(flat, lines(flat)).is_none(), "an array");
        let flat = r#"{"a": 1, "b": "x", "c": 2.5, "d": 7, "e": true, "zz": 12}
 {"e":false,"d":null,"c":-1e3,"b":"y z","a":-3}

{"a":null , "b" : "tab	and a long text after it" , "c":0, "other": "café"}
{}
{"c": 1.5E-2, "x": 0.5}
"#
        .as_bytes();
        let got = d.decode(flat, lines(flat)).expect("flat lines");
        assert_eq!(Some(got), arrow_decode(flat, &schema()));
    }

    #[test]
    fn anything_else_is_left_to_arrow() {
        let d = FlatDecoder::new(&schema()).expect("supported");
        for (text, why) in [
            (&br#"{"a": "1"}"#[..], "a string for an integer"),
            (br#"{"b": 1}"#, "a number for text"),
            (br#"{"a": 1.0}"#, "a fraction for an integer"),
            (br#"{"a": 01}"#, "a leading zero"),
            (br#"{"a": 1, "a": 2}"#, "a repeated field"),
            (br#"{"b": "a\"b"}"#, "an escape"),
            (br#"{"d": 256}"#, "an overflowing value"),
            (br#"{"e": 1}"#, "a number for a boolean"),
            (br#"[1, 2]"#, "not an object"),
            (br#"{"a": 1} x"#, "text after the object"),
            (br#"{"a": 1,}"#, "a trailing comma"),
            (br#"{"a" 1}"#, "no colon"),
            (br#"{"a": tru}"#, "a bad literal"),
            (br#"{"a": 1"#, "an unterminated object"),
            (b"{\"b\": \"\xff\"}", "text that is not UTF-8"),
        ] {
            assert!(d.decode(text, lines(text)).is_none(), "{why}");
        }
        assert!(
            d.decode(b"{}\n  ", [0..2, 3..5].into_iter()).is_none(),
            "a line that is blank"
        );
        let times = Arc::new(Schema::new(vec![Field::new("t", DataType::Date32, true)]));
        assert!(FlatDecoder::new(&times).is_none());
    }

    proptest! {
        #[test]
        fn decodes_what_arrow_decodes_or_leaves_it_to_arrow(
            rows in proptest::collection::vec(
                (
                    proptest::option::of(-1000_i64..1000),
                    proptest::option::of("[a-z é:,{}\\[]{0,40}"),
                    proptest::option::of(-100.0_f64..100.0),
                    proptest::option::of(0_u16..256),
                    proptest::option::of(any::<bool>()),
                    any::<u8>(),
                ),
                1..30,
            ),
        ) {
            let mut text = String::new();
            for (a, b, c, d, e, shape) in &rows {
                let mut fields = Vec::new();
                let json = |v: serde_json::Value| v.to_string();
                // Each field is present, null, or missing, by the bits of `shape`.
                let mut put = |name: &str, bit: u8, v: Option<serde_json::Value>| {
                    match (shape >> bit) & 3 {
                        0 => {}
                        1 => fields.push(format!("\"{name}\":null")),
                        _ => fields.push(format!(
                            "\"{name}\": {}",
                            v.map_or("null".to_owned(), json)
                        )),
                    }
                };
                put("a", 0, a.map(Into::into));
                put("b", 2, b.clone().map(Into::into));
                put("c", 4, c.map(Into::into));
                put("d", 6, d.map(Into::into));
                if let Some(e) = e {
                    fields.push(format!("\"e\":{e}"));
                }
                text.push_str(&format!("{{{}}}\n", fields.join(", ")));
            }
            let d = FlatDecoder::new(&schema()).expect("supported");
            let text = text.as_bytes();
            let got = d.decode(text, lines(text));
            prop_assert!(got.is_some(), "flat lines: {}", String::from_utf8_lossy(text));
            prop_assert_eq!(got, arrow_decode(text, &schema()));
        }
    }
}
