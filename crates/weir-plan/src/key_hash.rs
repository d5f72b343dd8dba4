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
//!
//! Fixed-width encodings shorter than 32 bytes (the 9-byte `tag + 8 bytes` of integers, floats
//! and temporal values, the 1-byte null, the 2-byte boolean, the 18-byte decimal) skip the
//! general XXH64 entry point: `xxh64_tagged8` and `xxh64_short` evaluate XXH64's short-input
//! branch (`len < 32`: no stripes, only the tail rounds and the avalanche) straight from
//! registers. They compute the same function, byte for byte; the tests compare them with
//! `XxHash64::oneshot` on every supported fixed-width type.

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
// Zeroing by `resize` is the point here (see the comment on `hashes`), not an oversight.
#[allow(clippy::slow_vector_initialization)]
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
    // Zeroed by writing, not by `calloc`: a large calloc'd buffer can come back as the
    // kernel's shared zero page, and the fold's read-then-write of each hash then costs a
    // copy-on-write fault per page with a TLB shootdown across every core (a fifth of a
    // windowed job's time when batches are large).
    let mut hashes = Vec::with_capacity(rows);
    hashes.resize(rows, 0_u64);
    let mut scratch = Vec::new();
    for (index, column) in columns.iter().enumerate() {
        hash_column::<true>(column.as_ref(), &mut hashes, &mut scratch)
            .map_err(|data_type| unsupported(&format!("#{index}"), &data_type))?;
    }
    Ok(hashes)
}

/// [`hash_keys`] through the general `XxHash64::oneshot` on every encoded value (no register
/// fast path): the reference the fast path is tested against.
#[cfg(test)]
fn hash_keys_reference(columns: &[ArrayRef]) -> Result<Vec<u64>> {
    let rows = columns.first().map_or(0, |c| c.len());
    let mut hashes = vec![0_u64; rows];
    let mut scratch = Vec::new();
    for (index, column) in columns.iter().enumerate() {
        hash_column::<false>(column.as_ref(), &mut hashes, &mut scratch)
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

/// Whether the key hash has an encoding for `data_type` (`weir_api::supports`, keys).
fn is_supported(data_type: &DataType) -> bool {
    weir_api::supports(data_type, weir_api::ColumnUse::Key)
}

/// Folds one column into the running `hashes`; on an unsupported type returns that type.
///
/// `FAST` selects the register XXH64 of short fixed-width encodings; `false` is the reference
/// path (encode to bytes, then `XxHash64::oneshot`), kept for the tests.
fn hash_column<const FAST: bool>(
    array: &dyn Array,
    hashes: &mut [u64],
    scratch: &mut Vec<u8>,
) -> Result<(), DataType> {
    let nulls = array.logical_nulls();
    let nulls = nulls.as_ref();
    match array.data_type() {
        DataType::Null => {
            for h in hashes.iter_mut() {
                *h = hash_null::<FAST>(*h);
            }
        }
        DataType::Boolean => {
            let values = array.as_boolean().values();
            fold_fixed::<FAST, _>(hashes, nulls, |i| [TAG_BOOL, u8::from(values.value(i))]);
        }
        DataType::Int8 => fold_int::<FAST, Int8Type>(array, hashes, nulls, TAG_INT, i64::from),
        DataType::Int16 => fold_int::<FAST, Int16Type>(array, hashes, nulls, TAG_INT, i64::from),
        DataType::Int32 => fold_int::<FAST, Int32Type>(array, hashes, nulls, TAG_INT, i64::from),
        DataType::Int64 => fold_int::<FAST, Int64Type>(array, hashes, nulls, TAG_INT, |v| v),
        DataType::UInt8 => fold_int::<FAST, UInt8Type>(array, hashes, nulls, TAG_INT, i64::from),
        DataType::UInt16 => fold_int::<FAST, UInt16Type>(array, hashes, nulls, TAG_INT, i64::from),
        DataType::UInt32 => fold_int::<FAST, UInt32Type>(array, hashes, nulls, TAG_INT, i64::from),
        DataType::UInt64 => {
            let values = array.as_primitive::<UInt64Type>().values();
            // `v` as little-endian `u64` bytes equals `v as i64` as little-endian `i64` bytes.
            fold_tagged8::<FAST>(hashes, nulls, |i| {
                let v = values[i];
                let tag = if i64::try_from(v).is_ok() {
                    TAG_INT
                } else {
                    TAG_UINT_HIGH
                };
                (tag, v)
            });
        }
        DataType::Float16 => {
            let values = array.as_primitive::<Float16Type>().values();
            fold_tagged8::<FAST>(hashes, nulls, |i| float_payload(values[i].to_f64()));
        }
        DataType::Float32 => {
            let values = array.as_primitive::<Float32Type>().values();
            fold_tagged8::<FAST>(hashes, nulls, |i| float_payload(f64::from(values[i])));
        }
        DataType::Float64 => {
            let values = array.as_primitive::<Float64Type>().values();
            fold_tagged8::<FAST>(hashes, nulls, |i| float_payload(values[i]));
        }
        DataType::Utf8 => {
            fold_bytes::<FAST, _>(array.as_string::<i32>(), hashes, nulls, scratch, TAG_UTF8)
        }
        DataType::LargeUtf8 => {
            fold_bytes::<FAST, _>(array.as_string::<i64>(), hashes, nulls, scratch, TAG_UTF8)
        }
        DataType::Utf8View => {
            fold_views::<FAST, _>(array.as_string_view(), hashes, nulls, scratch, TAG_UTF8)
        }
        DataType::Binary => {
            fold_bytes::<FAST, _>(array.as_binary::<i32>(), hashes, nulls, scratch, TAG_BINARY)
        }
        DataType::LargeBinary => {
            fold_bytes::<FAST, _>(array.as_binary::<i64>(), hashes, nulls, scratch, TAG_BINARY)
        }
        DataType::BinaryView => {
            fold_views::<FAST, _>(array.as_binary_view(), hashes, nulls, scratch, TAG_BINARY)
        }
        DataType::FixedSizeBinary(_) => {
            let array = array.as_fixed_size_binary();
            fold_with_scratch::<FAST>(hashes, nulls, scratch, TAG_BINARY, |i| array.value(i));
        }
        DataType::Date32 => {
            fold_int::<FAST, Date32Type>(array, hashes, nulls, TAG_DATE32, i64::from)
        }
        DataType::Date64 => fold_int::<FAST, Date64Type>(array, hashes, nulls, TAG_DATE64, |v| v),
        DataType::Timestamp(unit, _) => match unit {
            TimeUnit::Second => {
                fold_int::<FAST, TimestampSecondType>(array, hashes, nulls, TAG_TIMESTAMP_S, |v| v)
            }
            TimeUnit::Millisecond => fold_int::<FAST, TimestampMillisecondType>(
                array,
                hashes,
                nulls,
                TAG_TIMESTAMP_MS,
                |v| v,
            ),
            TimeUnit::Microsecond => fold_int::<FAST, TimestampMicrosecondType>(
                array,
                hashes,
                nulls,
                TAG_TIMESTAMP_US,
                |v| v,
            ),
            TimeUnit::Nanosecond => fold_int::<FAST, TimestampNanosecondType>(
                array,
                hashes,
                nulls,
                TAG_TIMESTAMP_NS,
                |v| v,
            ),
        },
        DataType::Time32(TimeUnit::Second) => {
            fold_int::<FAST, Time32SecondType>(array, hashes, nulls, TAG_TIME32_S, i64::from)
        }
        DataType::Time32(TimeUnit::Millisecond) => {
            fold_int::<FAST, Time32MillisecondType>(array, hashes, nulls, TAG_TIME32_MS, i64::from)
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            fold_int::<FAST, Time64MicrosecondType>(array, hashes, nulls, TAG_TIME64_US, |v| v)
        }
        DataType::Time64(TimeUnit::Nanosecond) => {
            fold_int::<FAST, Time64NanosecondType>(array, hashes, nulls, TAG_TIME64_NS, |v| v)
        }
        DataType::Duration(unit) => match unit {
            TimeUnit::Second => {
                fold_int::<FAST, DurationSecondType>(array, hashes, nulls, TAG_DURATION_S, |v| v)
            }
            TimeUnit::Millisecond => fold_int::<FAST, DurationMillisecondType>(
                array,
                hashes,
                nulls,
                TAG_DURATION_MS,
                |v| v,
            ),
            TimeUnit::Microsecond => fold_int::<FAST, DurationMicrosecondType>(
                array,
                hashes,
                nulls,
                TAG_DURATION_US,
                |v| v,
            ),
            TimeUnit::Nanosecond => fold_int::<FAST, DurationNanosecondType>(
                array,
                hashes,
                nulls,
                TAG_DURATION_NS,
                |v| v,
            ),
        },
        DataType::Decimal32(_, scale) => {
            let values = array.as_primitive::<Decimal32Type>().values();
            fold_fixed::<FAST, _>(hashes, nulls, |i| {
                decimal_bytes(i128::from(values[i]), *scale)
            });
        }
        DataType::Decimal64(_, scale) => {
            let values = array.as_primitive::<Decimal64Type>().values();
            fold_fixed::<FAST, _>(hashes, nulls, |i| {
                decimal_bytes(i128::from(values[i]), *scale)
            });
        }
        DataType::Decimal128(_, scale) => {
            let values = array.as_primitive::<Decimal128Type>().values();
            fold_fixed::<FAST, _>(hashes, nulls, |i| decimal_bytes(values[i], *scale));
        }
        DataType::Decimal256(_, scale) => {
            let values = array.as_primitive::<Decimal256Type>().values();
            let scale = scale.to_le_bytes()[0];
            fold_fixed::<FAST, _>(hashes, nulls, |i| {
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
            hash_column::<FAST>(decoded.as_ref(), hashes, scratch)?;
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

/// The encoding of a float as (tag, payload): widened to f64, `-0.0 -> 0.0`, every NaN -> the
/// canonical NaN.
#[inline]
fn float_payload(value: f64) -> (u8, u64) {
    let bits = if value.is_nan() {
        CANONICAL_NAN_BITS
    } else if value == 0.0 {
        0
    } else {
        value.to_bits()
    };
    (TAG_FLOAT, bits)
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
fn fold_int<const FAST: bool, T: ArrowPrimitiveType>(
    array: &dyn Array,
    hashes: &mut [u64],
    nulls: Option<&NullBuffer>,
    tag: u8,
    widen: impl Fn(T::Native) -> i64,
) {
    let values = array.as_primitive::<T>().values();
    // The two's complement bits of the `i64`: the same little-endian bytes.
    fold_tagged8::<FAST>(hashes, nulls, |i| (tag, widen(values[i]) as u64));
}

/// The hash of a null slot (`[TAG_NULL]`) chained onto `seed`.
#[inline(always)]
fn hash_null<const FAST: bool>(seed: u64) -> u64 {
    if FAST {
        xxh64_short(seed, &[TAG_NULL])
    } else {
        XxHash64::oneshot(seed, &[TAG_NULL])
    }
}

/// The tight loop for the 9-byte encodings: `encode(i)` gives row `i`'s tag and the 8 payload
/// bytes as a little-endian `u64`.
#[inline]
fn fold_tagged8<const FAST: bool>(
    hashes: &mut [u64],
    nulls: Option<&NullBuffer>,
    encode: impl Fn(usize) -> (u8, u64),
) {
    let hash = |seed: u64, (tag, payload): (u8, u64)| {
        if FAST {
            xxh64_tagged8(seed, tag, payload)
        } else {
            XxHash64::oneshot(seed, &tagged8(tag, payload.to_le_bytes()))
        }
    };
    match nulls.filter(|n| n.null_count() > 0) {
        None => {
            for (i, h) in hashes.iter_mut().enumerate() {
                *h = hash(*h, encode(i));
            }
        }
        Some(nulls) => {
            for (i, h) in hashes.iter_mut().enumerate() {
                *h = if nulls.is_valid(i) {
                    hash(*h, encode(i))
                } else {
                    hash_null::<FAST>(*h)
                };
            }
        }
    }
}

/// The tight loop for the other fixed-width encodings: `encode(i)` gives row `i`'s tagged bytes.
#[inline]
fn fold_fixed<const FAST: bool, const N: usize>(
    hashes: &mut [u64],
    nulls: Option<&NullBuffer>,
    encode: impl Fn(usize) -> [u8; N],
) {
    let hash = |seed: u64, bytes: &[u8; N]| {
        if FAST && N < 32 {
            xxh64_short(seed, bytes)
        } else {
            XxHash64::oneshot(seed, bytes)
        }
    };
    match nulls.filter(|n| n.null_count() > 0) {
        None => {
            for (i, h) in hashes.iter_mut().enumerate() {
                *h = hash(*h, &encode(i));
            }
        }
        Some(nulls) => {
            for (i, h) in hashes.iter_mut().enumerate() {
                *h = if nulls.is_valid(i) {
                    hash(*h, &encode(i))
                } else {
                    hash_null::<FAST>(*h)
                };
            }
        }
    }
}

// XXH64's primes (xxHash specification, section "XXH64").
const PRIME64_1: u64 = 0x9E37_79B1_85EB_CA87;
const PRIME64_2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const PRIME64_3: u64 = 0x1656_67B1_9E37_79F9;
const PRIME64_4: u64 = 0x85EB_CA77_C2B2_AE63;
const PRIME64_5: u64 = 0x27D4_EB2F_1656_67C5;

/// XXH64's consumption of one 8-byte lane of the tail (`round(0, lane)`, then the merge step).
#[inline(always)]
fn xxh64_tail8(acc: u64, lane: u64) -> u64 {
    let k1 = lane
        .wrapping_mul(PRIME64_2)
        .rotate_left(31)
        .wrapping_mul(PRIME64_1);
    (acc ^ k1)
        .rotate_left(27)
        .wrapping_mul(PRIME64_1)
        .wrapping_add(PRIME64_4)
}

/// XXH64's consumption of one tail byte.
#[inline(always)]
fn xxh64_tail1(acc: u64, byte: u8) -> u64 {
    (acc ^ u64::from(byte).wrapping_mul(PRIME64_5))
        .rotate_left(11)
        .wrapping_mul(PRIME64_1)
}

/// XXH64's final avalanche.
#[inline(always)]
fn xxh64_avalanche(mut acc: u64) -> u64 {
    acc ^= acc >> 33;
    acc = acc.wrapping_mul(PRIME64_2);
    acc ^= acc >> 29;
    acc = acc.wrapping_mul(PRIME64_3);
    acc ^ (acc >> 32)
}

/// `XXH64(seed, data)` for `data.len() < 32`: the specification's short-input branch (the
/// accumulator starts at `seed + PRIME64_5 + len`; 8-byte lanes, one 4-byte lane, then single
/// bytes; avalanche). With `N` a constant the loops unroll to straight-line code.
#[inline(always)]
fn xxh64_short<const N: usize>(seed: u64, data: &[u8; N]) -> u64 {
    debug_assert!(
        N < 32,
        "only the short-input branch of XXH64 is implemented"
    );
    let mut acc = seed.wrapping_add(PRIME64_5).wrapping_add(N as u64);
    let mut rest: &[u8] = data;
    while let Some((lane, tail)) = rest.split_first_chunk::<8>() {
        acc = xxh64_tail8(acc, u64::from_le_bytes(*lane));
        rest = tail;
    }
    if let Some((lane, tail)) = rest.split_first_chunk::<4>() {
        acc ^= u64::from(u32::from_le_bytes(*lane)).wrapping_mul(PRIME64_1);
        acc = acc
            .rotate_left(23)
            .wrapping_mul(PRIME64_2)
            .wrapping_add(PRIME64_3);
        rest = tail;
    }
    for &byte in rest {
        acc = xxh64_tail1(acc, byte);
    }
    xxh64_avalanche(acc)
}

/// `XXH64(seed, [tag, payload as 8 little-endian bytes])` from registers: the 9-byte input is
/// one 8-byte lane (`tag` then the low 7 payload bytes) and one tail byte (the payload's top
/// byte).
#[inline(always)]
fn xxh64_tagged8(seed: u64, tag: u8, payload: u64) -> u64 {
    let acc = seed.wrapping_add(PRIME64_5).wrapping_add(9);
    let acc = xxh64_tail8(acc, u64::from(tag) | (payload << 8));
    let acc = xxh64_tail1(acc, payload.to_le_bytes()[7]);
    xxh64_avalanche(acc)
}

/// Folds an offset-based string or binary column, reading values straight from its buffers.
fn fold_bytes<const FAST: bool, T: ByteArrayType>(
    array: &GenericByteArray<T>,
    hashes: &mut [u64],
    nulls: Option<&NullBuffer>,
    scratch: &mut Vec<u8>,
    tag: u8,
) {
    let offsets = array.value_offsets();
    let data = array.values().as_slice();
    fold_with_scratch::<FAST>(hashes, nulls, scratch, tag, |i| {
        &data[offsets[i].as_usize()..offsets[i + 1].as_usize()]
    });
}

/// Folds a string or binary view column.
fn fold_views<const FAST: bool, T: ByteViewType + ?Sized>(
    array: &GenericByteViewArray<T>,
    hashes: &mut [u64],
    nulls: Option<&NullBuffer>,
    scratch: &mut Vec<u8>,
    tag: u8,
) {
    fold_with_scratch::<FAST>(hashes, nulls, scratch, tag, |i| array.value(i).as_ref());
}

/// The tight loop for variable-length encodings: the tag and `value(i)` are laid out in a reused
/// scratch buffer so each value is one `oneshot` call.
#[inline]
fn fold_with_scratch<'a, const FAST: bool>(
    hashes: &mut [u64],
    nulls: Option<&NullBuffer>,
    scratch: &mut Vec<u8>,
    tag: u8,
    value: impl Fn(usize) -> &'a [u8],
) {
    let nulls = nulls.filter(|n| n.null_count() > 0);
    for (i, h) in hashes.iter_mut().enumerate() {
        if nulls.is_some_and(|n| n.is_null(i)) {
            *h = hash_null::<FAST>(*h);
            continue;
        }
        scratch.clear();
        scratch.push(tag);
        scratch.extend_from_slice(value(i));
        *h = XxHash64::oneshot(*h, scratch);
    }
}

#[cfg(test)]
#[path = "key_hash_tests.rs"]
mod tests;
