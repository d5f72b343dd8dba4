//! Locating CSV records in bytes: where each record starts and ends, on which line, with how many
//! fields.
//!
//! The arrow CSV decoder does not report where records are, so the slow path (a chunk that failed
//! to decode), header handling and resuming at a cursor use this scanner. It follows the same
//! rules as the `csv_core` tokenizer arrow uses (double-quote quoting with `""` escapes, CR, LF
//! and CRLF terminators, empty lines skipped), so both agree on record boundaries. Lines are
//! counted by LF, so line numbers are exact for LF and CRLF files, also when a quoted field holds
//! line breaks.

/// The quote character (not configurable, as in RFC 4180).
const QUOTE: u8 = b'"';

/// One CSV record located in a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CsvRecord {
    /// Offset of the record's first byte.
    pub(crate) start: usize,
    /// Offset just past its last byte, before the terminator.
    pub(crate) end: usize,
    /// 1-based line the record starts on.
    pub(crate) line: u64,
    /// Number of fields.
    pub(crate) fields: usize,
}

/// The result of [`scan_records`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CsvScan {
    /// The complete records found, in order.
    pub(crate) records: Vec<CsvRecord>,
    /// Offset where scanning stopped: after the last complete record (and any empty lines after
    /// it), so that scanning can resume there once more bytes arrive.
    pub(crate) consumed: usize,
    /// The line number at `consumed`.
    pub(crate) line: u64,
}

#[derive(Clone, Copy)]
enum State {
    StartField,
    InField,
    InQuotes,
    QuoteInQuotes,
}

/// Finds up to `max` complete records in `buf[from..]`, where `buf[from]` is on line `line`.
///
/// A record that runs to the end of `buf` is complete only when `eof` is set; otherwise scanning
/// stops before it.
pub(crate) fn scan_records(
    buf: &[u8],
    from: usize,
    line: u64,
    eof: bool,
    max: usize,
    delimiter: u8,
) -> CsvScan {
    let mut records = Vec::new();
    let mut pos = from;
    let mut line = line;
    while records.len() < max && pos < buf.len() {
        match buf[pos] {
            b'\n' => {
                line += 1;
                pos += 1;
                continue;
            }
            b'\r' => {
                pos += 1;
                continue;
            }
            _ => {}
        }
        let start = pos;
        let start_line = line;
        let mut fields = 1;
        let mut state = State::StartField;
        let mut end = None;
        let mut i = pos;
        while i < buf.len() {
            let byte = buf[i];
            let terminator = byte == b'\n' || byte == b'\r';
            state = match state {
                State::StartField | State::InField | State::QuoteInQuotes if terminator => {
                    end = Some(i);
                    break;
                }
                State::StartField if byte == QUOTE => State::InQuotes,
                State::StartField | State::InField | State::QuoteInQuotes if byte == delimiter => {
                    fields += 1;
                    State::StartField
                }
                State::QuoteInQuotes if byte == QUOTE => State::InQuotes,
                State::StartField | State::InField | State::QuoteInQuotes => State::InField,
                State::InQuotes if byte == QUOTE => State::QuoteInQuotes,
                State::InQuotes => {
                    if byte == b'\n' {
                        line += 1;
                    }
                    State::InQuotes
                }
            };
            i += 1;
        }
        match end {
            Some(end) => {
                records.push(CsvRecord {
                    start,
                    end,
                    line: start_line,
                    fields,
                });
                pos = end;
            }
            None if eof => {
                records.push(CsvRecord {
                    start,
                    end: buf.len(),
                    line: start_line,
                    fields,
                });
                pos = buf.len();
            }
            None => {
                line = start_line;
                break;
            }
        }
    }
    // Step over the last record's terminator and any empty lines, so the next scan (or decoder)
    // starts at a record.
    while pos < buf.len() && records.len() == max {
        match buf[pos] {
            b'\n' => line += 1,
            b'\r' => {}
            _ => break,
        }
        pos += 1;
    }
    CsvScan {
        records,
        consumed: pos,
        line,
    }
}

/// Number of line feeds in `bytes`: how many lines a chunk of the file spans.
pub(crate) fn count_lines(bytes: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', bytes).count() as u64
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn lines_and_fields(text: &str) -> Vec<(u64, usize, String)> {
        let scan = scan_records(text.as_bytes(), 0, 1, true, usize::MAX, b',');
        assert_eq!(scan.consumed, text.len());
        scan.records
            .iter()
            .map(|r| (r.line, r.fields, text[r.start..r.end].to_owned()))
            .collect()
    }

    #[test]
    fn counts_lines_inside_quotes_and_skips_empty_lines() {
        let text = "a,b\n1,\"x\ny\"\n\n2,\"q\"\"\"\r\n3,z";
        assert_eq!(
            lines_and_fields(text),
            [
                (1, 2, "a,b".to_owned()),
                (2, 2, "1,\"x\ny\"".to_owned()),
                (5, 2, "2,\"q\"\"\"".to_owned()),
                (6, 2, "3,z".to_owned()),
            ]
        );
    }

    #[test]
    fn delimiters_in_quotes_do_not_split_fields() {
        assert_eq!(
            lines_and_fields("\"a,b\",c,\"\"\n,\n"),
            [(1, 3, "\"a,b\",c,\"\"".to_owned()), (2, 2, ",".to_owned())]
        );
    }

    #[test]
    fn stops_before_an_incomplete_record_and_resumes() {
        let text = b"1,2\n3,\"4\n5\"\n6,7";
        let first = scan_records(text, 0, 1, false, 10, b',');
        assert_eq!(first.records.len(), 2);
        assert_eq!(first.consumed, 12);
        assert_eq!(first.line, 4);
        let rest = scan_records(text, first.consumed, first.line, true, 10, b',');
        assert_eq!(rest.records.len(), 1);
        assert_eq!(rest.records[0].line, 4);
        // An unterminated quote at the end of the available bytes is incomplete too.
        let partial = scan_records(b"1,\"abc\n", 0, 1, false, 10, b',');
        assert!(partial.records.is_empty());
        assert_eq!((partial.consumed, partial.line), (0, 1));
    }

    #[test]
    fn max_bounds_the_records_and_steps_over_terminators() {
        let scan = scan_records(b"1\r\n2\r\n3\r\n", 0, 1, true, 2, b';');
        assert_eq!(scan.records.len(), 2);
        assert_eq!((scan.consumed, scan.line), (6, 3));
        assert_eq!(count_lines(b"a\nb\r\nc"), 2);
    }
}
