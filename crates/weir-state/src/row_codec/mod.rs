//! A stable row codec for Arrow values: group keys and accumulator states in keyed state.
//!
//! Operators that keep Arrow values in keyed state (the group key of an aggregation, the
//! partial state of a DataFusion accumulator) need bytes that a later Weir reads back the same
//! way. Arrow's row format does not promise that, so this format is Weir's own, pinned here
//! byte by byte and by golden tests; a change needs a new [`ROW_CODEC_VERSION`].
//!
//! # Format, version 1
//!
//! [`encode_rows`] turns N columns into one byte string per row:
//!
//! ```text
//! u8 version (= ROW_CODEC_VERSION) | value of column 0 | value of column 1 | ...
//! ```
//!
//! Rows are not self-describing: [`decode_rows`] needs the same data types in the same order.
//! Time units, time zones, decimal precision and scale, and field names come from those types,
//! never from the bytes. A value is a flag byte, `0` for null (nothing follows) or `1` for
//! valid, followed for a valid value by:
//!
//! | Arrow type                                                          | bytes after the flag |
//! |---------------------------------------------------------------------|----------------------|
//! | `Null`                                                              | never valid: always the single byte `0` |
//! | `Boolean`                                                           | 1 byte: `0` false, `1` true |
//! | `Int8`, `UInt8`                                                     | 1 byte |
//! | `Int16`, `UInt16`, `Float16`                                        | 2 bytes little-endian |
//! | `Int32`, `UInt32`, `Float32`, `Date32`, `Time32(_)`, `Interval(YearMonth)`, `Decimal32` | 4 bytes little-endian |
//! | `Int64`, `UInt64`, `Float64`, `Date64`, `Time64(_)`, `Timestamp(_, _)`, `Duration(_)`, `Decimal64` | 8 bytes little-endian |
//! | `Interval(DayTime)`                                                 | `i32` days, `i32` milliseconds, each little-endian |
//! | `Interval(MonthDayNano)`                                            | `i32` months, `i32` days, `i64` nanoseconds, each little-endian |
//! | `Decimal128`                                                        | 16 bytes little-endian two's complement |
//! | `Decimal256`                                                        | 32 bytes little-endian two's complement |
//! | `Utf8`, `LargeUtf8`, `Utf8View`, `Binary`, `LargeBinary`, `BinaryView` | `u32` little-endian length, then the bytes (UTF-8 for strings) |
//! | `FixedSizeBinary(w)`                                                | the `w` bytes |
//! | `List(T)`, `LargeList(T)`                                           | `u32` little-endian element count `n`, then `n` values of `T`, each with its own flag |
//! | `Struct(f1, ..., fk)`                                               | the values of `f1` to `fk` in field order |
//! | `Dictionary(K, V)`                                                  | the value of `V`; decoding builds a new dictionary |
//!
//! Floats are stored as their IEEE bit patterns, so NaN payloads and `-0.0` round-trip. Integers
//! are two's complement. Other types (`Map`, `Union`, `RunEndEncoded`, `FixedSizeList`, list
//! views) are refused with [`StateError::UnsupportedRowType`].
//!
//! Example: the row `(Int32 5, Utf8 "ab", Float64 null)` is
//! `01 | 01 05000000 | 01 02000000 6162 | 00`.
//!
//! Encoding works column by column: each column is downcast once and its values are appended to
//! every row's buffer in a loop. Decoding likewise builds one typed builder per column.

use crate::error::{StateError, StateResult};
use arrow::array::{ArrayRef, ArrowPrimitiveType};
use arrow::buffer::NullBuffer;
use arrow::datatypes::*;

/// The version of the row format; the first byte of every encoded row.
pub const ROW_CODEC_VERSION: u8 = 1;

const NULL: u8 = 0;
const VALID: u8 = 1;

/// Encodes `columns` (all of one length) into one byte string per row, in the format above.
///
/// With no columns there is no row count to go by, and the result is empty.
///
/// # Errors
///
/// [`StateError::UnsupportedRowType`] naming the first type the format does not cover;
/// [`StateError::RowCodec`] when the columns differ in length or a value or list is longer than
/// `u32::MAX`.
pub fn encode_rows(columns: &[ArrayRef]) -> StateResult<Vec<Vec<u8>>> {
    let Some(first) = columns.first() else {
        return Ok(Vec::new());
    };
    let len = first.len();
    if let Some((i, c)) = columns.iter().enumerate().find(|(_, c)| c.len() != len) {
        return Err(row_error(format!(
            "column {i} has {} rows, column 0 has {len}",
            c.len()
        )));
    }
    // Each row's buffer is sized once, from the columns' average encoded width, so encoding
    // rarely grows it.
    let width = 1 + columns.iter().map(average_width).sum::<usize>();
    let mut rows: Vec<Vec<u8>> = (0..len)
        .map(|_| {
            let mut row = Vec::with_capacity(width);
            row.push(ROW_CODEC_VERSION);
            row
        })
        .collect();
    let mut sinks: Vec<&mut Vec<u8>> = rows.iter_mut().collect();
    for column in columns {
        encode::encode_column(column.as_ref(), &mut sinks)?;
    }
    Ok(rows)
}

/// About how many bytes a value of `column` takes encoded, on average (a guess for types
/// other than fixed-width ones and strings).
fn average_width(column: &ArrayRef) -> usize {
    use arrow::array::AsArray;
    let len = column.len().max(1);
    match column.data_type() {
        DataType::Utf8 => column.as_string_opt::<i32>().map_or(16, |a| {
            let offsets = a.value_offsets();
            let bytes =
                offsets.last().copied().unwrap_or(0) - offsets.first().copied().unwrap_or(0);
            5 + usize::try_from(bytes).unwrap_or(0) / len
        }),
        dt => 1 + dt.primitive_width().unwrap_or(15),
    }
}

/// Decodes rows written by [`encode_rows`] into one array per type, of exactly those types.
///
/// # Errors
///
/// [`StateError::Corrupt`] when a row is truncated, has trailing bytes, another version, an
/// invalid flag or boolean, or strings that are not UTF-8; [`StateError::UnsupportedRowType`]
/// for a type the format does not cover.
pub fn decode_rows(types: &[DataType], rows: &[&[u8]]) -> StateResult<Vec<ArrayRef>> {
    let mut cursors: Vec<&[u8]> = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        match row.split_first() {
            Some((&ROW_CODEC_VERSION, rest)) => cursors.push(rest),
            Some((version, _)) => {
                return Err(StateError::corrupt(format!(
                    "row {i} has row codec version {version}, this Weir reads version \
                     {ROW_CODEC_VERSION}"
                )));
            }
            None => return Err(StateError::corrupt(format!("row {i} is empty"))),
        }
    }
    let mut columns = Vec::with_capacity(types.len());
    for (c, data_type) in types.iter().enumerate() {
        let mut decoder = decode::decoder_for(data_type)?;
        decoder.read_rows(&mut cursors).map_err(|e| match e {
            StateError::Corrupt { message } => {
                StateError::corrupt(format!("column {c} ({data_type}): {message}"))
            }
            other => other,
        })?;
        columns.push(decoder.finish()?);
    }
    if let Some((i, rest)) = cursors.iter().enumerate().find(|(_, c)| !c.is_empty()) {
        return Err(StateError::corrupt(format!(
            "row {i} has {} bytes left after its {} values",
            rest.len(),
            types.len()
        )));
    }
    Ok(columns)
}

fn row_error(message: impl Into<String>) -> StateError {
    StateError::RowCodec {
        message: message.into(),
    }
}

fn unsupported(data_type: &DataType) -> StateError {
    StateError::UnsupportedRowType {
        data_type: data_type.to_string(),
    }
}

/// An array whose data type promises a layout it does not have.
fn mismatch(data_type: &DataType) -> StateError {
    row_error(format!(
        "an array of type {data_type} is not the Arrow array of that type"
    ))
}

fn is_valid(nulls: Option<&NullBuffer>, i: usize) -> bool {
    nulls.is_none_or(|n| n.is_valid(i))
}

fn push_len(out: &mut Vec<u8>, len: usize, what: &str) -> StateResult<()> {
    let len =
        u32::try_from(len).map_err(|_| row_error(format!("a {what} of {len} exceeds u32::MAX")))?;
    out.extend_from_slice(&len.to_le_bytes());
    Ok(())
}

/// Fixed-width values as little-endian bytes.
trait LeBytes: Sized + Copy + Default {
    fn put_le(self, out: &mut Vec<u8>);
    fn read_le(cursor: &mut &[u8]) -> Option<Self>;
}

/// `f16` (from the `half` crate) is only reachable through arrow's primitive type. Its values
/// are encoded through their `u16` bit patterns: reinterpreting the buffer keeps every bit.
type F16 = <Float16Type as ArrowPrimitiveType>::Native;

macro_rules! le_bytes {
    ($($t:ty: $n:literal),* $(,)?) => {$(
        impl LeBytes for $t {
            fn put_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn read_le(cursor: &mut &[u8]) -> Option<Self> {
                let (head, tail) = cursor.split_first_chunk::<$n>()?;
                *cursor = tail;
                Some(<$t>::from_le_bytes(*head))
            }
        }
    )*};
}

le_bytes!(
    i8: 1, i16: 2, i32: 4, i64: 8, i128: 16, i256: 32,
    u8: 1, u16: 2, u32: 4, u64: 8, f32: 4, f64: 8,
);

impl LeBytes for IntervalDayTime {
    fn put_le(self, out: &mut Vec<u8>) {
        self.days.put_le(out);
        self.milliseconds.put_le(out);
    }
    fn read_le(cursor: &mut &[u8]) -> Option<Self> {
        Some(IntervalDayTime::new(
            i32::read_le(cursor)?,
            i32::read_le(cursor)?,
        ))
    }
}

impl LeBytes for IntervalMonthDayNano {
    fn put_le(self, out: &mut Vec<u8>) {
        self.months.put_le(out);
        self.days.put_le(out);
        self.nanoseconds.put_le(out);
    }
    fn read_le(cursor: &mut &[u8]) -> Option<Self> {
        Some(IntervalMonthDayNano::new(
            i32::read_le(cursor)?,
            i32::read_le(cursor)?,
            i64::read_le(cursor)?,
        ))
    }
}

/// Calls `$f::<ArrowType>($args)` for the primitive type matching `$dt`, else evaluates
/// `$other`.
macro_rules! with_primitive {
    ($dt:expr, $f:ident, ($($args:expr),*), $other:expr) => {
        match $dt {
            DataType::Int8 => $f::<Int8Type>($($args),*),
            DataType::Int16 => $f::<Int16Type>($($args),*),
            DataType::Int32 => $f::<Int32Type>($($args),*),
            DataType::Int64 => $f::<Int64Type>($($args),*),
            DataType::UInt8 => $f::<UInt8Type>($($args),*),
            DataType::UInt16 => $f::<UInt16Type>($($args),*),
            DataType::UInt32 => $f::<UInt32Type>($($args),*),
            DataType::UInt64 => $f::<UInt64Type>($($args),*),
            DataType::Float32 => $f::<Float32Type>($($args),*),
            DataType::Float64 => $f::<Float64Type>($($args),*),
            DataType::Date32 => $f::<Date32Type>($($args),*),
            DataType::Date64 => $f::<Date64Type>($($args),*),
            DataType::Time32(TimeUnit::Second) => $f::<Time32SecondType>($($args),*),
            DataType::Time32(TimeUnit::Millisecond) => $f::<Time32MillisecondType>($($args),*),
            DataType::Time64(TimeUnit::Microsecond) => $f::<Time64MicrosecondType>($($args),*),
            DataType::Time64(TimeUnit::Nanosecond) => $f::<Time64NanosecondType>($($args),*),
            DataType::Timestamp(TimeUnit::Second, _) => $f::<TimestampSecondType>($($args),*),
            DataType::Timestamp(TimeUnit::Millisecond, _) => {
                $f::<TimestampMillisecondType>($($args),*)
            }
            DataType::Timestamp(TimeUnit::Microsecond, _) => {
                $f::<TimestampMicrosecondType>($($args),*)
            }
            DataType::Timestamp(TimeUnit::Nanosecond, _) => {
                $f::<TimestampNanosecondType>($($args),*)
            }
            DataType::Duration(TimeUnit::Second) => $f::<DurationSecondType>($($args),*),
            DataType::Duration(TimeUnit::Millisecond) => {
                $f::<DurationMillisecondType>($($args),*)
            }
            DataType::Duration(TimeUnit::Microsecond) => {
                $f::<DurationMicrosecondType>($($args),*)
            }
            DataType::Duration(TimeUnit::Nanosecond) => $f::<DurationNanosecondType>($($args),*),
            DataType::Interval(IntervalUnit::YearMonth) => {
                $f::<IntervalYearMonthType>($($args),*)
            }
            DataType::Interval(IntervalUnit::DayTime) => $f::<IntervalDayTimeType>($($args),*),
            DataType::Interval(IntervalUnit::MonthDayNano) => {
                $f::<IntervalMonthDayNanoType>($($args),*)
            }
            DataType::Decimal32(_, _) => $f::<Decimal32Type>($($args),*),
            DataType::Decimal64(_, _) => $f::<Decimal64Type>($($args),*),
            DataType::Decimal128(_, _) => $f::<Decimal128Type>($($args),*),
            DataType::Decimal256(_, _) => $f::<Decimal256Type>($($args),*),
            _ => $other,
        }
    };
}

mod decode;
mod encode;

#[cfg(test)]
mod tests;
