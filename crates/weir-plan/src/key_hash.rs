//! The stable key hash: `stateShardId = stableHash(normalizedKey) mod stateShardCount`.
//!
//! The hash decides which state shard owns a key, and state shards outlive releases: a
//! checkpoint written by one version of Weir is restored by the next. The hash is therefore
//! **fixed forever**. It is defined here byte by byte, computed only with XXH64 (a published,
//! seedable, platform-independent function), and pinned by golden vectors in the tests. It does
//! not use Arrow's row format (whose bytes Arrow does not promise to keep across releases) nor
//! `ahash`/DataFusion hashing (randomly seeded per process).
//!
//! # Definition
//!
//! For a row with key columns `c_0 .. c_{k-1}`:
//!
//! ```text
//! h_0     = 0
//! h_{j+1} = XXH64(seed = h_j, data = enc(c_j[row]))
//! hash    = h_k
//! shard   = hash mod stateShardCount
//! ```
//!
//! Each XXH64 call covers exactly one value, so variable-length values need no length prefix.
//! Chaining through the seed makes column order significant: `(a, b)` and `(b, a)` differ.
//!
//! # Normalized value encoding `enc`
//!
//! One tag byte, then a payload; all integers little-endian.
//!
//! | Arrow type                                   | tag    | payload                                        |
//! |----------------------------------------------|--------|------------------------------------------------|
//! | any type, null slot (and `Null` type)        | `0x00` | none                                           |
//! | `Boolean`                                    | `0x01` | 1 byte: `0x00` false, `0x01` true              |
//! | `Int8/16/32/64`; `UInt8/16/32/64` <= i64::MAX| `0x02` | the value as `i64`, 8 bytes                    |
//! | `UInt64` > i64::MAX                          | `0x03` | the value as `u64`, 8 bytes                    |
//! | `Float16/32/64`                              | `0x04` | `f64` bits as `u64`, 8 bytes (see below)       |
//! | `Utf8`, `LargeUtf8`, `Utf8View`              | `0x05` | the UTF-8 bytes                                |
//! | `Binary`, `LargeBinary`, `BinaryView`, `FixedSizeBinary` | `0x06` | the bytes                          |
//! | `Date32` (days)                              | `0x10` | days as `i64`, 8 bytes                         |
//! | `Date64` (ms)                                | `0x11` | ms as `i64`, 8 bytes                           |
//! | `Timestamp(Second, any tz)`                  | `0x12` | stored `i64`, 8 bytes                          |
//! | `Timestamp(Millisecond, any tz)`             | `0x13` | stored `i64`, 8 bytes                          |
//! | `Timestamp(Microsecond, any tz)`             | `0x14` | stored `i64`, 8 bytes                          |
//! | `Timestamp(Nanosecond, any tz)`              | `0x15` | stored `i64`, 8 bytes                          |
//! | `Time32(Second)`                             | `0x16` | stored value as `i64`, 8 bytes                 |
//! | `Time32(Millisecond)`                        | `0x17` | stored value as `i64`, 8 bytes                 |
//! | `Time64(Microsecond)`                        | `0x18` | stored `i64`, 8 bytes                          |
//! | `Time64(Nanosecond)`                         | `0x19` | stored `i64`, 8 bytes                          |
//! | `Duration(Second/Milli/Micro/Nanosecond)`    | `0x1A`..`0x1D` | stored `i64`, 8 bytes                  |
//! | `Decimal32/64/128(p, s)`                     | `0x20` | unscaled value as `i128` (16 bytes), then `s` as 1 byte (`i8`) |
//! | `Decimal256(p, s)`                           | `0x21` | unscaled value as `i256` (32 bytes), then `s` as 1 byte (`i8`) |
//! | `Dictionary(_, V)`                           | as `V` | the referenced value (null key or null value: `0x00`) |
//!
//! Consequences, all deliberate:
//! - Integers hash by mathematical value: `Int32 42`, `Int64 42` and `UInt8 42` are the same key.
//! - Floats: every width is widened to `f64` (exact); `-0.0` is hashed as `0.0`; every NaN is
//!   hashed as the canonical quiet NaN `0x7FF8_0000_0000_0000`. `Float64 42.0` and `Int64 42`
//!   differ (different tags).
//! - The three string layouts are one key type, as are the binary layouts; a string and a binary
//!   with the same bytes differ.
//! - Temporal values are their stored integer tagged with their unit; the time zone of a
//!   timestamp is ignored (the stored value is a UTC instant). Different units differ, even when
//!   they denote the same instant: keys are expected to be typed consistently.
//! - Decimals hash the unscaled value with its scale (precision ignored): `1.0` (scale 1) and
//!   `1.00` (scale 2) differ.
//! - A dictionary column hashes like its values decoded.
//!
//! Any other type (lists, structs, maps, unions, intervals, run-end encoded, ...) is rejected with
//! [`Error::UnsupportedKeyType`]; [`check_key_type`] lets a planner reject it before running.
//!
//! # Cost
//!
//! Hashing is vectorized per column: one type dispatch per column, then a monomorphized loop
//! over the column's values slice (no per-row dynamic dispatch).

use crate::error::{Error, Result};
use arrow::array::{
    Array, ArrayRef, ArrowPrimitiveType, AsArray, GenericByteArray, GenericByteViewArray,
};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{
    ArrowNativeType, ByteArrayType, ByteViewType, DataType, Date32Type, Date64Type, Decimal32Type,
    Decimal64Type, Decimal128Type, Decimal256Type, DurationMicrosecondType,
    DurationMillisecondType, DurationNanosecondType, DurationSecondType, Float16Type, Float32Type,
    Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, Time32MillisecondType,
    Time32SecondType, Time64MicrosecondType, Time64NanosecondType, TimeUnit,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use twox_hash::XxHash64;
use weir_api::StateShardId;

/// Tag of a null slot.
const TAG_NULL: u8 = 0x00;
/// Tag of a boolean.
const TAG_BOOL: u8 = 0x01;
/// Tag of an integer that fits `i64`.
const TAG_INT: u8 = 0x02;
/// Tag of an unsigned integer above `i64::MAX`.
const TAG_UINT_HIGH: u8 = 0x03;
/// Tag of a float (widened to `f64`).
const TAG_FLOAT: u8 = 0x04;
/// Tag of a UTF-8 string.
const TAG_UTF8: u8 = 0x05;
/// Tag of a binary value.
const TAG_BINARY: u8 = 0x06;
const TAG_DATE32: u8 = 0x10;
const TAG_DATE64: u8 = 0x11;
const TAG_TIMESTAMP_S: u8 = 0x12;
const TAG_TIMESTAMP_MS: u8 = 0x13;
const TAG_TIMESTAMP_US: u8 = 0x14;
const TAG_TIMESTAMP_NS: u8 = 0x15;
const TAG_TIME32_S: u8 = 0x16;
const TAG_TIME32_MS: u8 = 0x17;
const TAG_TIME64_US: u8 = 0x18;
const TAG_TIME64_NS: u8 = 0x19;
const TAG_DURATION_S: u8 = 0x1A;
const TAG_DURATION_MS: u8 = 0x1B;
const TAG_DURATION_US: u8 = 0x1C;
const TAG_DURATION_NS: u8 = 0x1D;
/// Tag of a decimal up to 128 bits.
const TAG_DECIMAL128: u8 = 0x20;
/// Tag of a 256-bit decimal.
const TAG_DECIMAL256: u8 = 0x21;

/// The one NaN every float NaN is hashed as (the canonical quiet NaN).
const CANONICAL_NAN_BITS: u64 = 0x7FF8_0000_0000_0000;

/// Hashes each row of the key `columns` (in the given order) with the stable key hash.
///
/// Returns one hash per row. With no columns there are no rows to speak of and the result is
/// empty. Works on sliced arrays: a row's hash never depends on where it sits in a batch.
///
/// # Errors
/// [`Error::UnsupportedKeyType`] when a column's type has no defined encoding (the column is
/// named by its index, `#i`); [`Error::Spec`] when the columns differ in length.
pub fn hash_keys(columns: &[ArrayRef]) -> Result<Vec<u64>> {
    let Some(first) = columns.first() else {
        return Ok(Vec::new());
    };
    let rows = first.len();
    if let Some((index, column)) = columns.iter().enumerate().find(|(_, c)| c.len() != rows) {
        return Err(Error::Spec {
            file: "<key hash>".to_owned(),
            path: format!("key columns[{index}]"),
            message: format!(
                "key column #{index} has {} rows but key column #0 has {rows}; all key columns \
                 of a batch must have the same length",
                column.len()
            ),
        });
    }
    let mut hashes = vec![0_u64; rows];
    let mut scratch = Vec::new();
    for (index, column) in columns.iter().enumerate() {
        hash_column(column.as_ref(), &mut hashes, &mut scratch)
            .map_err(|data_type| unsupported(&format!("#{index}"), &data_type))?;
    }
    Ok(hashes)
}

/// Maps a key hash to its state shard: `hash mod shard_count`.
///
/// # Panics
/// When `shard_count` is 0; a keyed vertex always has at least one shard.
pub fn shard_of(hash: u64, shard_count: u32) -> StateShardId {
    assert!(
        shard_count > 0,
        "a keyed vertex has at least one state shard"
    );
    // The remainder is below `shard_count`, so it fits in u32.
    StateShardId((hash % u64::from(shard_count)) as u32)
}

/// The state shard of each row of the key `columns`: [`hash_keys`] then [`shard_of`].
///
/// # Errors
/// As [`hash_keys`]; also [`Error::Spec`] when `shard_count` is 0.
pub fn shard_ids(columns: &[ArrayRef], shard_count: u32) -> Result<Vec<u32>> {
    if shard_count == 0 {
        return Err(Error::Spec {
            file: "<key hash>".to_owned(),
            path: "stateShardCount".to_owned(),
            message: "the state shard count must be at least 1".to_owned(),
        });
    }
    let count = u64::from(shard_count);
    let hashes = hash_keys(columns)?;
    // The remainder is below `shard_count`, so it fits in u32.
    Ok(hashes.into_iter().map(|h| (h % count) as u32).collect())
}

/// Checks that `data_type` can be a key column, so planners can reject a job before it runs.
///
/// # Errors
/// [`Error::UnsupportedKeyType`] naming `column` when the type has no defined encoding.
pub fn check_key_type(column: &str, data_type: &DataType) -> Result<()> {
    if is_supported(data_type) {
        Ok(())
    } else {
        Err(unsupported(column, data_type))
    }
}

fn unsupported(column: &str, data_type: &DataType) -> Error {
    Error::UnsupportedKeyType {
        column: column.to_owned(),
        data_type: data_type.to_string(),
    }
}

fn is_supported(data_type: &DataType) -> bool {
    match data_type {
        DataType::Null
        | DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Float16
        | DataType::Float32
        | DataType::Float64
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_)
        | DataType::Date32
        | DataType::Date64
        | DataType::Timestamp(_, _)
        | DataType::Time32(TimeUnit::Second | TimeUnit::Millisecond)
        | DataType::Time64(TimeUnit::Microsecond | TimeUnit::Nanosecond)
        | DataType::Duration(_)
        | DataType::Decimal32(_, _)
        | DataType::Decimal64(_, _)
        | DataType::Decimal128(_, _)
        | DataType::Decimal256(_, _) => true,
        DataType::Dictionary(_, value) => is_supported(value),
        _ => false,
    }
}

/// Folds one column into the running `hashes`; on an unsupported type returns that type.
fn hash_column(
    array: &dyn Array,
    hashes: &mut [u64],
    scratch: &mut Vec<u8>,
) -> Result<(), DataType> {
    let nulls = array.logical_nulls();
    let nulls = nulls.as_ref();
    match array.data_type() {
        DataType::Null => {
            for h in hashes.iter_mut() {
                *h = XxHash64::oneshot(*h, &[TAG_NULL]);
            }
        }
        DataType::Boolean => {
            let values = array.as_boolean().values();
            fold_fixed(hashes, nulls, |i| [TAG_BOOL, u8::from(values.value(i))]);
        }
        DataType::Int8 => fold_int::<Int8Type>(array, hashes, nulls, TAG_INT, i64::from),
        DataType::Int16 => fold_int::<Int16Type>(array, hashes, nulls, TAG_INT, i64::from),
        DataType::Int32 => fold_int::<Int32Type>(array, hashes, nulls, TAG_INT, i64::from),
        DataType::Int64 => fold_int::<Int64Type>(array, hashes, nulls, TAG_INT, |v| v),
        DataType::UInt8 => fold_int::<UInt8Type>(array, hashes, nulls, TAG_INT, i64::from),
        DataType::UInt16 => fold_int::<UInt16Type>(array, hashes, nulls, TAG_INT, i64::from),
        DataType::UInt32 => fold_int::<UInt32Type>(array, hashes, nulls, TAG_INT, i64::from),
        DataType::UInt64 => {
            let values = array.as_primitive::<UInt64Type>().values();
            fold_fixed(hashes, nulls, |i| {
                let v = values[i];
                match i64::try_from(v) {
                    Ok(signed) => tagged8(TAG_INT, signed.to_le_bytes()),
                    Err(_) => tagged8(TAG_UINT_HIGH, v.to_le_bytes()),
                }
            });
        }
        DataType::Float16 => {
            let values = array.as_primitive::<Float16Type>().values();
            fold_fixed(hashes, nulls, |i| float_bytes(values[i].to_f64()));
        }
        DataType::Float32 => {
            let values = array.as_primitive::<Float32Type>().values();
            fold_fixed(hashes, nulls, |i| float_bytes(f64::from(values[i])));
        }
        DataType::Float64 => {
            let values = array.as_primitive::<Float64Type>().values();
            fold_fixed(hashes, nulls, |i| float_bytes(values[i]));
        }
        DataType::Utf8 => fold_bytes(array.as_string::<i32>(), hashes, nulls, scratch, TAG_UTF8),
        DataType::LargeUtf8 => {
            fold_bytes(array.as_string::<i64>(), hashes, nulls, scratch, TAG_UTF8)
        }
        DataType::Utf8View => fold_views(array.as_string_view(), hashes, nulls, scratch, TAG_UTF8),
        DataType::Binary => {
            fold_bytes(array.as_binary::<i32>(), hashes, nulls, scratch, TAG_BINARY)
        }
        DataType::LargeBinary => {
            fold_bytes(array.as_binary::<i64>(), hashes, nulls, scratch, TAG_BINARY)
        }
        DataType::BinaryView => {
            fold_views(array.as_binary_view(), hashes, nulls, scratch, TAG_BINARY)
        }
        DataType::FixedSizeBinary(_) => {
            let array = array.as_fixed_size_binary();
            fold_with_scratch(hashes, nulls, scratch, TAG_BINARY, |i| array.value(i));
        }
        DataType::Date32 => fold_int::<Date32Type>(array, hashes, nulls, TAG_DATE32, i64::from),
        DataType::Date64 => fold_int::<Date64Type>(array, hashes, nulls, TAG_DATE64, |v| v),
        DataType::Timestamp(unit, _) => match unit {
            TimeUnit::Second => {
                fold_int::<TimestampSecondType>(array, hashes, nulls, TAG_TIMESTAMP_S, |v| v)
            }
            TimeUnit::Millisecond => {
                fold_int::<TimestampMillisecondType>(array, hashes, nulls, TAG_TIMESTAMP_MS, |v| v)
            }
            TimeUnit::Microsecond => {
                fold_int::<TimestampMicrosecondType>(array, hashes, nulls, TAG_TIMESTAMP_US, |v| v)
            }
            TimeUnit::Nanosecond => {
                fold_int::<TimestampNanosecondType>(array, hashes, nulls, TAG_TIMESTAMP_NS, |v| v)
            }
        },
        DataType::Time32(TimeUnit::Second) => {
            fold_int::<Time32SecondType>(array, hashes, nulls, TAG_TIME32_S, i64::from)
        }
        DataType::Time32(TimeUnit::Millisecond) => {
            fold_int::<Time32MillisecondType>(array, hashes, nulls, TAG_TIME32_MS, i64::from)
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            fold_int::<Time64MicrosecondType>(array, hashes, nulls, TAG_TIME64_US, |v| v)
        }
        DataType::Time64(TimeUnit::Nanosecond) => {
            fold_int::<Time64NanosecondType>(array, hashes, nulls, TAG_TIME64_NS, |v| v)
        }
        DataType::Duration(unit) => match unit {
            TimeUnit::Second => {
                fold_int::<DurationSecondType>(array, hashes, nulls, TAG_DURATION_S, |v| v)
            }
            TimeUnit::Millisecond => {
                fold_int::<DurationMillisecondType>(array, hashes, nulls, TAG_DURATION_MS, |v| v)
            }
            TimeUnit::Microsecond => {
                fold_int::<DurationMicrosecondType>(array, hashes, nulls, TAG_DURATION_US, |v| v)
            }
            TimeUnit::Nanosecond => {
                fold_int::<DurationNanosecondType>(array, hashes, nulls, TAG_DURATION_NS, |v| v)
            }
        },
        DataType::Decimal32(_, scale) => {
            let values = array.as_primitive::<Decimal32Type>().values();
            fold_fixed(hashes, nulls, |i| {
                decimal_bytes(i128::from(values[i]), *scale)
            });
        }
        DataType::Decimal64(_, scale) => {
            let values = array.as_primitive::<Decimal64Type>().values();
            fold_fixed(hashes, nulls, |i| {
                decimal_bytes(i128::from(values[i]), *scale)
            });
        }
        DataType::Decimal128(_, scale) => {
            let values = array.as_primitive::<Decimal128Type>().values();
            fold_fixed(hashes, nulls, |i| decimal_bytes(values[i], *scale));
        }
        DataType::Decimal256(_, scale) => {
            let values = array.as_primitive::<Decimal256Type>().values();
            let scale = scale.to_le_bytes()[0];
            fold_fixed(hashes, nulls, |i| {
                let mut out = [0_u8; 34];
                out[0] = TAG_DECIMAL256;
                out[1..33].copy_from_slice(&values[i].to_le_bytes());
                out[33] = scale;
                out
            });
        }
        DataType::Dictionary(_, value_type) => {
            if !is_supported(value_type) {
                return Err(array.data_type().clone());
            }
            // Decoding keeps the definition simple ("hash like the values") and still hashes in
            // a typed loop; null keys and null values both decode to nulls.
            let decoded =
                arrow::compute::cast(array, value_type).map_err(|_| array.data_type().clone())?;
            hash_column(decoded.as_ref(), hashes, scratch)?;
        }
        other => return Err(other.clone()),
    }
    Ok(())
}

/// A tag byte followed by 8 payload bytes.
#[inline]
fn tagged8(tag: u8, payload: [u8; 8]) -> [u8; 9] {
    let mut out = [0_u8; 9];
    out[0] = tag;
    out[1..].copy_from_slice(&payload);
    out
}

/// The encoding of a float: widened to f64, `-0.0 -> 0.0`, every NaN -> the canonical NaN.
#[inline]
fn float_bytes(value: f64) -> [u8; 9] {
    let bits = if value.is_nan() {
        CANONICAL_NAN_BITS
    } else if value == 0.0 {
        0
    } else {
        value.to_bits()
    };
    tagged8(TAG_FLOAT, bits.to_le_bytes())
}

/// The encoding of a decimal up to 128 bits: tag, unscaled `i128`, scale.
#[inline]
fn decimal_bytes(unscaled: i128, scale: i8) -> [u8; 18] {
    let mut out = [0_u8; 18];
    out[0] = TAG_DECIMAL128;
    out[1..17].copy_from_slice(&unscaled.to_le_bytes());
    out[17] = scale.to_le_bytes()[0];
    out
}

/// Folds an integer-like primitive column whose values widen to `i64`.
#[inline]
fn fold_int<T: ArrowPrimitiveType>(
    array: &dyn Array,
    hashes: &mut [u64],
    nulls: Option<&NullBuffer>,
    tag: u8,
    widen: impl Fn(T::Native) -> i64,
) {
    let values = array.as_primitive::<T>().values();
    fold_fixed(hashes, nulls, |i| {
        tagged8(tag, widen(values[i]).to_le_bytes())
    });
}

/// The tight loop for fixed-width encodings: `encode(i)` gives row `i`'s tagged bytes.
#[inline]
fn fold_fixed<const N: usize>(
    hashes: &mut [u64],
    nulls: Option<&NullBuffer>,
    encode: impl Fn(usize) -> [u8; N],
) {
    match nulls.filter(|n| n.null_count() > 0) {
        None => {
            for (i, h) in hashes.iter_mut().enumerate() {
                *h = XxHash64::oneshot(*h, &encode(i));
            }
        }
        Some(nulls) => {
            for (i, h) in hashes.iter_mut().enumerate() {
                *h = if nulls.is_valid(i) {
                    XxHash64::oneshot(*h, &encode(i))
                } else {
                    XxHash64::oneshot(*h, &[TAG_NULL])
                };
            }
        }
    }
}

/// Folds an offset-based string or binary column, reading values straight from its buffers.
fn fold_bytes<T: ByteArrayType>(
    array: &GenericByteArray<T>,
    hashes: &mut [u64],
    nulls: Option<&NullBuffer>,
    scratch: &mut Vec<u8>,
    tag: u8,
) {
    let offsets = array.value_offsets();
    let data = array.values().as_slice();
    fold_with_scratch(hashes, nulls, scratch, tag, |i| {
        &data[offsets[i].as_usize()..offsets[i + 1].as_usize()]
    });
}

/// Folds a string or binary view column.
fn fold_views<T: ByteViewType + ?Sized>(
    array: &GenericByteViewArray<T>,
    hashes: &mut [u64],
    nulls: Option<&NullBuffer>,
    scratch: &mut Vec<u8>,
    tag: u8,
) {
    fold_with_scratch(hashes, nulls, scratch, tag, |i| array.value(i).as_ref());
}

/// The tight loop for variable-length encodings: the tag and `value(i)` are laid out in a reused
/// scratch buffer so each value is one `oneshot` call.
#[inline]
fn fold_with_scratch<'a>(
    hashes: &mut [u64],
    nulls: Option<&NullBuffer>,
    scratch: &mut Vec<u8>,
    tag: u8,
    value: impl Fn(usize) -> &'a [u8],
) {
    let nulls = nulls.filter(|n| n.null_count() > 0);
    for (i, h) in hashes.iter_mut().enumerate() {
        if nulls.is_some_and(|n| n.is_null(i)) {
            *h = XxHash64::oneshot(*h, &[TAG_NULL]);
            continue;
        }
        scratch.clear();
        scratch.push(tag);
        scratch.extend_from_slice(value(i));
        *h = XxHash64::oneshot(*h, scratch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        BinaryArray, BooleanArray, Date32Array, Decimal128Array, DictionaryArray, Float32Array,
        Float64Array, Int32Array, Int64Array, LargeStringArray, ListArray, StringArray,
        StringViewArray, TimestampMillisecondArray, TimestampNanosecondArray, UInt8Array,
        UInt64Array,
    };
    use proptest::prelude::*;
    use std::sync::Arc;

    fn col(array: impl Array + 'static) -> ArrayRef {
        Arc::new(array)
    }

    fn hashes(columns: &[ArrayRef]) -> Vec<u64> {
        hash_keys(columns).expect("supported key types")
    }

    // GOLDEN VECTORS (`GOLDEN` below). These values define where keys live in every checkpoint ever written.
    // They MUST NEVER CHANGE: a change here means state written by an earlier release would be
    // restored into the wrong shard. Add new vectors; never edit these.

    /// Prints every golden vector; used once to produce the literals below.
    #[test]
    #[ignore = "prints the golden vectors; run by hand when adding a new one"]
    fn print_golden_vectors() {
        for (name, columns) in golden_inputs() {
            let h = hashes(&columns);
            let s = shard_ids(&columns, 128).expect("supported");
            let h: Vec<String> = h.iter().map(|v| format!("0x{v:016x}")).collect();
            println!("{name}: [{}] {s:?}", h.join(", "));
        }
    }

    fn golden_inputs() -> Vec<(&'static str, Vec<ArrayRef>)> {
        vec![
            (
                "int64",
                vec![col(Int64Array::from(vec![0, 1, -1, 42, i64::MAX]))],
            ),
            (
                "utf8",
                vec![col(StringArray::from(vec!["", "a", "auction-7"]))],
            ),
            (
                "nulls",
                vec![
                    col(Int64Array::from(vec![None])),
                    col(StringArray::from(vec![None::<&str>])),
                ],
            ),
            (
                "float64",
                vec![col(Float64Array::from(vec![
                    0.0,
                    1.5,
                    f64::NAN,
                    f64::INFINITY,
                ]))],
            ),
            (
                "composite",
                vec![
                    col(Int64Array::from(vec![Some(7), Some(7), None])),
                    col(StringArray::from(vec![Some("auction-7"), None, Some("x")])),
                ],
            ),
            (
                "timestamp_ms",
                vec![col(TimestampMillisecondArray::from(vec![
                    0,
                    1_700_000_000_000,
                    -1,
                ])
                .with_timezone("UTC"))],
            ),
            ("boolean", vec![col(BooleanArray::from(vec![false, true]))]),
            ("date32", vec![col(Date32Array::from(vec![0, 19_723]))]),
            (
                "decimal128",
                vec![col(Decimal128Array::from(vec![12_345_i128, -1])
                    .with_precision_and_scale(10, 2)
                    .expect("valid decimal"))],
            ),
            (
                "binary",
                vec![col(BinaryArray::from(vec![&b"\x00\xff"[..]]))],
            ),
        ]
    }

    #[rustfmt::skip]
    const GOLDEN: &[(&str, &[u64], &[u32])] = &[
        ("int64", &[0xef03f80c2f2a1026, 0x7bc759f3a16fd092, 0x0c72a2d6abb7c8ff, 0x44c77c508883ad78, 0x281c3558d29bfe08], &[38, 18, 127, 120, 8]),
        ("utf8", &[0x50ff15a81340970f, 0x1127826d7350fda6, 0x9a42a42190c7327b], &[15, 38, 123]),
        ("nulls", &[0xbd9a9aeda93d6b77], &[119]),
        ("float64", &[0x078e4ab900e95271, 0xe61612a10904c397, 0x280308856b409770, 0x3abb146162aa1197], &[113, 23, 112, 23]),
        ("composite", &[0xd6d3d9561364c004, 0x1fdde34d636fb7be, 0x37fc7edf7095382a], &[4, 62, 42]),
        ("timestamp_ms", &[0x8a850cc149b8b4a3, 0xb03c1195b59ee758, 0xe81247edf817f8b8], &[35, 88, 56]),
        ("boolean", &[0xdd8f621dbf7f57f1, 0x52fc4823a13c997a], &[113, 122]),
        ("date32", &[0x26146667ead44fd9, 0xa223327e37368888], &[89, 8]),
        ("decimal128", &[0xbab9c2b3ca5367b8, 0xc4791f56268e31e6], &[56, 102]),
        ("binary", &[0xba3c8fa04d773d4c], &[76]),
    ];

    #[test]
    fn xxh64_itself_is_the_published_function() {
        // Reference values of XXH64 from the xxHash specification's test suite.
        assert_eq!(XxHash64::oneshot(0, b""), 0xef46_db37_51d8_e999);
        assert_eq!(XxHash64::oneshot(1, b""), 0xd5af_ba13_36a3_be4b);
    }

    #[test]
    fn golden_vectors_never_change() {
        let inputs = golden_inputs();
        assert_eq!(inputs.len(), GOLDEN.len());
        for ((name, columns), (golden_name, golden_hashes, golden_shards)) in
            inputs.iter().zip(GOLDEN)
        {
            assert_eq!(name, golden_name);
            assert_eq!(&hashes(columns), golden_hashes, "hashes of {name}");
            assert_eq!(
                &shard_ids(columns, 128).expect("supported"),
                golden_shards,
                "shards of {name}"
            );
            for (hash, shard) in golden_hashes.iter().zip(golden_shards.iter()) {
                assert_eq!(shard_of(*hash, 128), StateShardId(*shard));
            }
        }
    }

    #[test]
    fn integer_widths_hash_by_value() {
        let int64 = hashes(&[col(Int64Array::from(vec![42, -3]))]);
        assert_eq!(hashes(&[col(Int32Array::from(vec![42, -3]))]), int64);
        assert_eq!(hashes(&[col(UInt8Array::from(vec![42]))]), int64[..1]);
        assert_eq!(hashes(&[col(UInt64Array::from(vec![42]))]), int64[..1]);
        // Above i64::MAX an unsigned value has its own tag, so it cannot meet a negative i64.
        let high = hashes(&[col(UInt64Array::from(vec![u64::MAX]))]);
        assert_ne!(high, hashes(&[col(Int64Array::from(vec![-1]))]));
    }

    #[test]
    fn string_layouts_are_one_key_type() {
        let texts = vec![
            Some(""),
            Some("a"),
            None,
            Some("a string longer than twelve bytes"),
        ];
        let utf8 = hashes(&[col(StringArray::from(texts.clone()))]);
        assert_eq!(hashes(&[col(LargeStringArray::from(texts.clone()))]), utf8);
        assert_eq!(hashes(&[col(StringViewArray::from(texts.clone()))]), utf8);
        let dict: DictionaryArray<Int32Type> = texts.into_iter().collect();
        assert_eq!(hashes(&[col(dict)]), utf8);
        // A string and a binary with the same bytes are different keys.
        assert_ne!(
            hashes(&[col(BinaryArray::from(vec![&b"a"[..]]))]),
            utf8[1..2]
        );
    }

    #[test]
    fn floats_normalize_zero_and_nan() {
        let h = hashes(&[col(Float64Array::from(vec![
            0.0,
            -0.0,
            f64::NAN,
            -f64::NAN,
            f64::from_bits(0x7FF0_0000_0000_0001),
        ]))]);
        assert_eq!(h[0], h[1]);
        assert_eq!(h[2], h[3]);
        assert_eq!(h[2], h[4]);
        let f32s = hashes(&[col(Float32Array::from(vec![0.0, -0.0, f32::NAN, 1.5]))]);
        assert_eq!(f32s[..3], [h[0], h[1], h[2]]);
        assert_eq!(f32s[3], hashes(&[col(Float64Array::from(vec![1.5]))])[0]);
        // Floats and integers are different keys.
        assert_ne!(
            hashes(&[col(Float64Array::from(vec![42.0]))]),
            hashes(&[col(Int64Array::from(vec![42]))])
        );
    }

    #[test]
    fn null_differs_from_every_value_and_from_other_positions() {
        let h = hashes(&[col(Int64Array::from(vec![None, Some(0)]))]);
        assert_ne!(h[0], h[1]);
        let s = hashes(&[col(StringArray::from(vec![None, Some("")]))]);
        assert_ne!(s[0], s[1]);
        // A null hashes the same whatever the column type.
        assert_eq!(h[0], s[0]);
        // (null, "x") and ("x", null) are different keys.
        let a = hashes(&[
            col(StringArray::from(vec![None, Some("x")])),
            col(StringArray::from(vec![Some("x"), None])),
        ]);
        assert_ne!(a[0], a[1]);
    }

    #[test]
    fn timestamp_ignores_time_zone_but_not_unit() {
        let utc = hashes(&[col(
            TimestampMillisecondArray::from(vec![5]).with_timezone("UTC")
        )]);
        let paris = hashes(&[col(
            TimestampMillisecondArray::from(vec![5]).with_timezone("+01:00")
        )]);
        let naive = hashes(&[col(TimestampMillisecondArray::from(vec![5]))]);
        assert_eq!(utc, paris);
        assert_eq!(utc, naive);
        assert_ne!(utc, hashes(&[col(TimestampNanosecondArray::from(vec![5]))]));
        assert_ne!(utc, hashes(&[col(Int64Array::from(vec![5]))]));
    }

    #[test]
    fn unsupported_types_and_length_mismatch_are_errors() {
        let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![Some(1)])]);
        let err = hash_keys(&[col(Int64Array::from(vec![1])), col(list)]).expect_err("list");
        assert!(
            matches!(&err, Error::UnsupportedKeyType { column, .. } if column == "#1"),
            "{err}"
        );
        assert!(check_key_type("tags", &DataType::new_list(DataType::Int32, true)).is_err());
        assert!(check_key_type("id", &DataType::Int64).is_ok());
        assert!(
            check_key_type(
                "d",
                &DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8))
            )
            .is_ok()
        );

        let err = hash_keys(&[
            col(Int64Array::from(vec![1, 2])),
            col(Int64Array::from(vec![1])),
        ])
        .expect_err("lengths differ");
        assert!(err.to_string().contains("same length"), "{err}");
        assert!(shard_ids(&[col(Int64Array::from(vec![1]))], 0).is_err());
        assert_eq!(hash_keys(&[]).expect("no columns"), Vec::<u64>::new());
    }

    fn arb_row() -> impl Strategy<Value = (Option<i64>, Option<String>, Option<f64>)> {
        (
            proptest::option::of(any::<i64>()),
            proptest::option::of("[a-z]{0,20}"),
            proptest::option::of(any::<f64>()),
        )
    }

    fn columns_of(rows: &[(Option<i64>, Option<String>, Option<f64>)]) -> Vec<ArrayRef> {
        vec![
            col(Int64Array::from(
                rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            )),
            col(StringViewArray::from(
                rows.iter().map(|r| r.1.as_deref()).collect::<Vec<_>>(),
            )),
            col(Float64Array::from(
                rows.iter().map(|r| r.2).collect::<Vec<_>>(),
            )),
        ]
    }

    proptest! {
        #[test]
        fn hash_does_not_depend_on_batch_position(
            rows in proptest::collection::vec(arb_row(), 1..64),
            pick in any::<proptest::sample::Index>(),
        ) {
            let whole = hashes(&columns_of(&rows));
            let at = pick.index(rows.len());
            // The same row alone in its own batch.
            let alone = hashes(&columns_of(&rows[at..=at]));
            prop_assert_eq!(alone[0], whole[at]);
            // The same row as a slice of the big batch (non-zero offsets in the arrays).
            let sliced: Vec<ArrayRef> = columns_of(&rows)
                .iter()
                .map(|c| c.slice(at, rows.len() - at))
                .collect();
            prop_assert_eq!(&hashes(&sliced)[..], &whole[at..]);
        }

        #[test]
        fn column_order_matters(a in any::<i64>(), b in any::<i64>()) {
            prop_assume!(a != b);
            let ab = hashes(&[col(Int64Array::from(vec![a])), col(Int64Array::from(vec![b]))]);
            let ba = hashes(&[col(Int64Array::from(vec![b])), col(Int64Array::from(vec![a]))]);
            prop_assert_ne!(ab, ba);
        }

        #[test]
        fn shards_are_in_range(key in any::<i64>(), count in 1_u32..10_000) {
            let shards = shard_ids(&[col(Int64Array::from(vec![key]))], count)
                .expect("supported");
            prop_assert!(shards[0] < count);
        }
    }

    #[test]
    fn encoding_matches_the_documented_bytes() {
        // An independent restatement of the module doc, so the doc and the code cannot drift.
        let mut int42 = vec![TAG_INT];
        int42.extend_from_slice(&42_i64.to_le_bytes());
        assert_eq!(
            hashes(&[col(Int64Array::from(vec![42]))]),
            [XxHash64::oneshot(0, &int42)]
        );

        let text = XxHash64::oneshot(0, b"\x05auction-7");
        assert_eq!(hashes(&[col(StringArray::from(vec!["auction-7"]))]), [text]);

        let null = XxHash64::oneshot(0, &[0x00]);
        assert_eq!(hashes(&[col(Int64Array::from(vec![None]))]), [null]);

        // Composite: the second column is seeded with the first column's hash.
        let composite = XxHash64::oneshot(XxHash64::oneshot(0, &int42), b"\x05auction-7");
        assert_eq!(
            hashes(&[
                col(Int64Array::from(vec![42])),
                col(StringArray::from(vec!["auction-7"]))
            ]),
            [composite]
        );

        let mut float = vec![TAG_FLOAT];
        float.extend_from_slice(&1.5_f64.to_bits().to_le_bytes());
        assert_eq!(
            hashes(&[col(Float64Array::from(vec![1.5]))]),
            [XxHash64::oneshot(0, &float)]
        );
    }
}
