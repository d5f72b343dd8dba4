//! Column generators of the `datagen` source.
//!
//! Every value is a pure function of (seed, column name, column index, global row index): a
//! counter-based hash (wyrand's mix of `key + row * constant`) replaces a stateful random
//! generator, so any row range can be produced on its own and a split read from a cursor repeats
//! exactly what a full read gave. The per-column key comes from splitmix64 over the seed, the
//! column name and its index.
//!
//! Generation is column-wise: the column's type and pattern are resolved once when the source is
//! prepared ([`ColumnGenerator::try_new`]); [`ColumnGenerator::generate`] then does one dispatch
//! per column and batch and runs a tight loop that fills a typed buffer.

use arrow::array::{Array, ArrayRef, BooleanArray, PrimitiveArray, StringArray, StringBuilder};
use arrow::buffer::{BooleanBuffer, NullBuffer, ScalarBuffer};
use arrow::compute::nullif;
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Date32Type, Field, Float32Type, Float64Type, Int8Type, Int16Type,
    Int32Type, Int64Type, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use serde::Deserialize;
use std::sync::Arc;
use weir_api::{Error, Result};

/// How a column's values relate to the row index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FieldKind {
    /// Counts up by one per row from `min`, back to `min` past `max` or after `cardinality`
    /// values; without either, it wraps around at the end of the type's range.
    Sequence,
    /// A uniformly distributed hash of the row in `[min, max]` (or one of `cardinality` values).
    Random,
}

/// The `fields.<column>` options of a `datagen` source.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FieldOptions {
    /// `sequence` or `random`; the default depends on the type (see the module doc of `datagen`).
    pub(crate) kind: Option<FieldKind>,
    /// Smallest value: integers in the column's type, timestamps in milliseconds since the epoch,
    /// dates in days since the epoch, floats as a number.
    pub(crate) min: Option<serde_json::Number>,
    /// Largest value (inclusive for integers, timestamps and dates; exclusive for floats).
    pub(crate) max: Option<serde_json::Number>,
    /// Number of distinct values: strings are `<column>-<n>` with `n` in `0..cardinality`;
    /// numbers are `min + n` (floats: `cardinality` evenly spaced values in `[min, max)`).
    pub(crate) cardinality: Option<u64>,
    /// Share of rows that are null, in `[0, 1]`; the column must be nullable when it is above 0.
    pub(crate) null_fraction: Option<f64>,
}

/// Cardinalities up to this many string values are pre-built once and copied per row.
const STRING_TABLE_MAX: u64 = 1 << 16;
/// Default number of distinct values of a string column.
const DEFAULT_STRING_CARDINALITY: u64 = 1000;
/// 2020-01-01T00:00:00Z, start of the default range of random timestamps, in milliseconds.
const RANDOM_TIMESTAMP_MIN_MS: i128 = 1_577_836_800_000;
/// 2030-01-01T00:00:00Z, end (exclusive) of the default range of random timestamps.
const RANDOM_TIMESTAMP_END_MS: i128 = 1_893_456_000_000;
/// 2020-01-01 and 2030-01-01 (exclusive) in days since the epoch: default range of random dates.
const RANDOM_DATE_RANGE: (i128, i128) = (18_262, 21_915);

/// The splitmix64 increment (2^64 / golden ratio).
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The splitmix64 finaliser: a cheap bijective mix with good avalanche.
#[inline(always)]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// wyrand's state increment.
const WY_ADD: u64 = 0xA076_1D64_78BD_642F;
/// wyrand's mixing constant.
const WY_XOR: u64 = 0xE703_7ED1_A0B4_28DB;

/// The hash of `row` in the stream `key`: element `row` of wyrand seeded with `key`. One wide
/// multiply per value (splitmix64 needs two), and it passes PractRand.
#[inline(always)]
fn hash_at(key: u64, row: u64) -> u64 {
    let state = key.wrapping_add(row.wrapping_mul(WY_ADD));
    let product = u128::from(state) * u128::from(state ^ WY_XOR);
    (product >> 64) as u64 ^ product as u64
}

/// A uniform value in `0..span` from a 64-bit hash (Lemire's multiply-shift, no division).
#[inline(always)]
fn below(hash: u64, span: u64) -> u64 {
    ((u128::from(hash) * u128::from(span)) >> 64) as u64
}

/// A uniform float in `[0, 1)` from the top 53 bits of a hash.
#[inline(always)]
fn unit_f64(hash: u64) -> f64 {
    // Through i64 (exact below 2^53): a signed conversion is one instruction, an unsigned one is
    // a branchy sequence on x86-64.
    ((hash >> 11) as i64) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// FNV-1a: a stable (run- and platform-independent) hash of the column name.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xCBF2_9CE4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

/// Integer-backed Arrow types datagen can produce; timestamps keep their time zone.
#[derive(Debug, Clone)]
enum IntType {
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Date32,
    TimestampMs(Option<Arc<str>>),
    TimestampUs(Option<Arc<str>>),
    TimestampNs(Option<Arc<str>>),
}

impl IntType {
    /// Range of option values (`min`/`max`) the type accepts, in option units.
    fn bounds(&self) -> (i128, i128) {
        match self {
            IntType::Int8 => (i8::MIN.into(), i8::MAX.into()),
            IntType::Int16 => (i16::MIN.into(), i16::MAX.into()),
            IntType::Int32 | IntType::Date32 => (i32::MIN.into(), i32::MAX.into()),
            IntType::Int64 | IntType::TimestampMs(_) => (i64::MIN.into(), i64::MAX.into()),
            IntType::UInt8 => (0, u8::MAX.into()),
            IntType::UInt16 => (0, u16::MAX.into()),
            IntType::UInt32 => (0, u32::MAX.into()),
            IntType::UInt64 => (0, u64::MAX.into()),
            IntType::TimestampUs(_) | IntType::TimestampNs(_) => {
                let scale = i128::from(self.scale());
                (i128::from(i64::MIN) / scale, i128::from(i64::MAX) / scale)
            }
        }
    }

    /// Factor from option units (milliseconds for timestamps) to the stored unit.
    fn scale(&self) -> u64 {
        match self {
            IntType::TimestampUs(_) => 1_000,
            IntType::TimestampNs(_) => 1_000_000,
            _ => 1,
        }
    }

    /// Default inclusive range of `random` values when neither `min` nor `max` is set.
    fn random_default(&self) -> (i128, i128) {
        match self {
            IntType::Date32 => (RANDOM_DATE_RANGE.0, RANDOM_DATE_RANGE.1 - 1),
            IntType::TimestampMs(_) | IntType::TimestampUs(_) | IntType::TimestampNs(_) => {
                (RANDOM_TIMESTAMP_MIN_MS, RANDOM_TIMESTAMP_END_MS - 1)
            }
            _ => self.bounds(),
        }
    }
}

/// How integer-backed values are drawn; values are computed as `u64` bit patterns and truncated
/// to the column's width, which is exact because every value fits the type.
#[derive(Debug, Clone, Copy)]
enum IntPattern {
    /// `(lo + row mod span) * scale`, or `(lo + row) * scale` wrapping in the type without `span`.
    Sequence { lo: u64, span: Option<u64> },
    /// `(lo + uniform(0..span)) * scale`; `span == 0` stands for all 2^64 values.
    Random { lo: u64, span: u64 },
}

/// How float values are drawn.
#[derive(Debug, Clone, Copy)]
enum FloatPattern {
    /// `min + (row mod span)`, or `min + row` without `span`.
    Sequence { min: f64, span: Option<u64> },
    /// `min + uniform[0, 1) * width`.
    Random { min: f64, width: f64 },
    /// `min + uniform(0..levels) * step`.
    RandomLevels { min: f64, step: f64, levels: u64 },
}

/// The distinct values of a string column, `<column>-<n>`.
#[derive(Debug, Clone)]
enum StringValues {
    /// All values pre-built, value `n` at index `n`: rows copy from it without re-validating.
    Table(StringArray),
    /// Too many to pre-build: the prefix `<column>-`, digits appended per row.
    Format { prefix: String },
}

/// How the values of one column are produced, resolved from its type and options.
#[derive(Debug, Clone)]
enum Values {
    Int {
        ty: IntType,
        pattern: IntPattern,
    },
    Float {
        double: bool,
        pattern: FloatPattern,
    },
    Utf8 {
        kind: FieldKind,
        cardinality: u64,
        values: StringValues,
    },
    Boolean {
        kind: FieldKind,
    },
}

/// Produces one column of a datagen batch for any row range.
#[derive(Debug, Clone)]
pub(crate) struct ColumnGenerator {
    /// Hash stream of the values.
    key: u64,
    /// Hash stream and threshold (on the top 53 bits) of nulls; `None` when there are none.
    nulls: Option<(u64, u64)>,
    values: Values,
}

/// Context for option errors: the JSON path of `fields.<column>` and of the schema.
pub(crate) struct ColumnPaths<'a> {
    /// JSON path of this column's `fields` entry, e.g. `sources[0].options.fields.price`.
    pub(crate) field: &'a str,
    /// JSON path of the declared schema, e.g. `sources[0].schema`.
    pub(crate) schema: &'a str,
}

impl ColumnGenerator {
    /// Resolves the generator of column `index` (`field`) from its options.
    ///
    /// # Errors
    /// [`Error::Config`] naming the column when its type is unsupported, or naming the option
    /// (`fields.<column>.min`, ...) when an option does not fit the type.
    pub(crate) fn try_new(
        field: &Field,
        index: usize,
        seed: u64,
        options: Option<&FieldOptions>,
        paths: &ColumnPaths<'_>,
    ) -> Result<Self> {
        let default_options = FieldOptions::default();
        let options = options.unwrap_or(&default_options);
        let name = field.name();
        let at = |option: &str| format!("{}.{option}", paths.field);

        let key = mix(seed ^ mix(fnv1a(name.as_bytes()) ^ (index as u64).wrapping_mul(GOLDEN)));
        let nulls = match options.null_fraction {
            None => None,
            Some(f) if !(0.0..=1.0).contains(&f) => {
                return Err(Error::config(
                    at("null_fraction"),
                    format!("must be between 0 and 1, got {f}"),
                ));
            }
            Some(f) if f > 0.0 && !field.is_nullable() => {
                return Err(Error::config(
                    at("null_fraction"),
                    format!("column `{name}` is declared NOT NULL, so it cannot have nulls"),
                ));
            }
            Some(f) if f > 0.0 => Some((
                mix(key ^ 0x6E75_6C6C_6E75_6C6C),
                (f * (1u64 << 53) as f64) as u64,
            )),
            Some(_) => None,
        };
        if options.cardinality == Some(0) {
            return Err(Error::config(at("cardinality"), "must be at least 1"));
        }

        let int_type = match field.data_type() {
            DataType::Int8 => Some(IntType::Int8),
            DataType::Int16 => Some(IntType::Int16),
            DataType::Int32 => Some(IntType::Int32),
            DataType::Int64 => Some(IntType::Int64),
            DataType::UInt8 => Some(IntType::UInt8),
            DataType::UInt16 => Some(IntType::UInt16),
            DataType::UInt32 => Some(IntType::UInt32),
            DataType::UInt64 => Some(IntType::UInt64),
            DataType::Date32 => Some(IntType::Date32),
            DataType::Timestamp(TimeUnit::Millisecond, tz) => {
                Some(IntType::TimestampMs(tz.clone()))
            }
            DataType::Timestamp(TimeUnit::Microsecond, tz) => {
                Some(IntType::TimestampUs(tz.clone()))
            }
            DataType::Timestamp(TimeUnit::Nanosecond, tz) => Some(IntType::TimestampNs(tz.clone())),
            _ => None,
        };
        let values = if let Some(ty) = int_type {
            let pattern = int_pattern(&ty, options, &at)?;
            Values::Int { ty, pattern }
        } else {
            match field.data_type() {
                DataType::Float32 | DataType::Float64 => Values::Float {
                    double: matches!(field.data_type(), DataType::Float64),
                    pattern: float_pattern(options, &at)?,
                },
                DataType::Utf8 => {
                    reject_range(options, &at, "string")?;
                    let cardinality = options.cardinality.unwrap_or(DEFAULT_STRING_CARDINALITY);
                    Values::Utf8 {
                        kind: options.kind.unwrap_or(FieldKind::Sequence),
                        cardinality,
                        values: string_values(name, cardinality),
                    }
                }
                DataType::Boolean => {
                    reject_range(options, &at, "boolean")?;
                    if options.cardinality.is_some() {
                        return Err(Error::config(
                            at("cardinality"),
                            "a boolean column always has two values; remove `cardinality`",
                        ));
                    }
                    Values::Boolean {
                        kind: options.kind.unwrap_or(FieldKind::Random),
                    }
                }
                other => {
                    return Err(Error::config(
                        paths.schema,
                        format!(
                            "column `{name}` has type {other}, which datagen cannot generate; \
                             supported: Int8..Int64, UInt8..UInt64, Float32, Float64, Utf8, \
                             Boolean, Timestamp(ms/us/ns), Date32"
                        ),
                    ));
                }
            }
        };
        Ok(Self { key, nulls, values })
    }

    /// The longest value in bytes of a string column (`None` for other types); prepare checks
    /// that a batch of them fits Utf8's 32-bit offsets.
    pub(crate) fn max_string_len(&self) -> Option<usize> {
        match &self.values {
            Values::Utf8 {
                cardinality,
                values,
                ..
            } => Some(string_max_len(values, *cardinality)),
            _ => None,
        }
    }

    /// The column's values for global rows `start..start + len`.
    ///
    /// # Errors
    /// [`Error::Internal`] when `len` values of a string column could overflow 32-bit offsets,
    /// which prepare's batch size check rules out.
    pub(crate) fn generate(&self, start: u64, len: usize) -> Result<ArrayRef> {
        let nulls = self.nulls.map(|(key, threshold)| {
            NullBuffer::new(BooleanBuffer::collect_bool(len, |i| {
                (hash_at(key, start.wrapping_add(i as u64)) >> 11) >= threshold
            }))
        });
        let key = self.key;
        Ok(match &self.values {
            Values::Int { ty, pattern } => {
                let scale = ty.scale();
                macro_rules! ints {
                    ($t:ty, $native:ty) => {
                        Arc::new(PrimitiveArray::<$t>::new(
                            fill_ints(pattern, key, start, len, scale, |v| v as $native),
                            nulls,
                        ))
                    };
                }
                match ty {
                    IntType::Int8 => ints!(Int8Type, i8),
                    IntType::Int16 => ints!(Int16Type, i16),
                    IntType::Int32 => ints!(Int32Type, i32),
                    IntType::Int64 => ints!(Int64Type, i64),
                    IntType::UInt8 => ints!(UInt8Type, u8),
                    IntType::UInt16 => ints!(UInt16Type, u16),
                    IntType::UInt32 => ints!(UInt32Type, u32),
                    IntType::UInt64 => ints!(UInt64Type, u64),
                    IntType::Date32 => ints!(Date32Type, i32),
                    IntType::TimestampMs(tz) => timestamps::<TimestampMillisecondType>(
                        fill_ints(pattern, key, start, len, scale, |v| v as i64),
                        nulls,
                        tz,
                    ),
                    IntType::TimestampUs(tz) => timestamps::<TimestampMicrosecondType>(
                        fill_ints(pattern, key, start, len, scale, |v| v as i64),
                        nulls,
                        tz,
                    ),
                    IntType::TimestampNs(tz) => timestamps::<TimestampNanosecondType>(
                        fill_ints(pattern, key, start, len, scale, |v| v as i64),
                        nulls,
                        tz,
                    ),
                }
            }
            Values::Float {
                double: true,
                pattern,
            } => Arc::new(PrimitiveArray::<Float64Type>::new(
                fill_floats(pattern, key, start, len, |v| v),
                nulls,
            )),
            Values::Float {
                double: false,
                pattern,
            } => Arc::new(PrimitiveArray::<Float32Type>::new(
                fill_floats(pattern, key, start, len, |v| v as f32),
                nulls,
            )),
            Values::Utf8 {
                kind,
                cardinality,
                values,
            } => {
                let array = fill_strings(*kind, *cardinality, values, key, start, len)?;
                match nulls {
                    None => Arc::new(array),
                    // `nullif` only replaces the validity bitmap: the values are not re-validated.
                    Some(nulls) => nullif(&array, &BooleanArray::new(!nulls.inner(), None))
                        .map_err(|e| Error::arrow("adding nulls to a datagen string column", e))?,
                }
            }
            Values::Boolean { kind } => {
                let values = match kind {
                    FieldKind::Sequence => {
                        BooleanBuffer::collect_bool(len, |i| start.wrapping_add(i as u64) & 1 == 1)
                    }
                    FieldKind::Random => BooleanBuffer::collect_bool(len, |i| {
                        hash_at(key, start.wrapping_add(i as u64)) >> 63 == 1
                    }),
                };
                Arc::new(BooleanArray::new(values, nulls))
            }
        })
    }
}

/// A timestamp array with the declared time zone.
fn timestamps<T>(
    values: ScalarBuffer<i64>,
    nulls: Option<NullBuffer>,
    tz: &Option<Arc<str>>,
) -> ArrayRef
where
    T: ArrowPrimitiveType<Native = i64> + arrow::datatypes::ArrowTimestampType,
{
    Arc::new(PrimitiveArray::<T>::new(values, nulls).with_timezone_opt(tz.clone()))
}

/// Rejects `min` and `max` on a column type that has no numeric range.
fn reject_range(options: &FieldOptions, at: &impl Fn(&str) -> String, what: &str) -> Result<()> {
    for (name, value) in [("min", &options.min), ("max", &options.max)] {
        if value.is_some() {
            return Err(Error::config(
                at(name),
                format!("a {what} column has no numeric range; remove `{name}`"),
            ));
        }
    }
    Ok(())
}

/// Reads an integer option value and checks it against the type's range.
fn int_option(
    value: Option<&serde_json::Number>,
    bounds: (i128, i128),
    at: &impl Fn(&str) -> String,
    name: &str,
) -> Result<Option<i128>> {
    let Some(number) = value else {
        return Ok(None);
    };
    let parsed = number
        .as_i64()
        .map(i128::from)
        .or_else(|| number.as_u64().map(i128::from))
        .ok_or_else(|| Error::config(at(name), format!("must be an integer, got {number}")))?;
    if parsed < bounds.0 || parsed > bounds.1 {
        return Err(Error::config(
            at(name),
            format!(
                "{parsed} is outside the column's range {}..={}",
                bounds.0, bounds.1
            ),
        ));
    }
    Ok(Some(parsed))
}

/// Resolves the pattern of an integer, date or timestamp column.
fn int_pattern(
    ty: &IntType,
    options: &FieldOptions,
    at: &impl Fn(&str) -> String,
) -> Result<IntPattern> {
    let bounds = ty.bounds();
    let min = int_option(options.min.as_ref(), bounds, at, "min")?;
    let max = int_option(options.max.as_ref(), bounds, at, "max")?;
    if let (Some(min), Some(max)) = (min, max)
        && min > max
    {
        return Err(Error::config(
            at("max"),
            format!("{max} is below `min` {min}"),
        ));
    }
    if options.cardinality.is_some() && max.is_some() {
        return Err(Error::config(
            at("cardinality"),
            "set either `max` or `cardinality`, not both",
        ));
    }
    let kind = options.kind.unwrap_or(FieldKind::Sequence);
    let lo = match (kind, min, max) {
        (_, Some(min), _) => min,
        (FieldKind::Sequence, None, _) => 0,
        (FieldKind::Random, None, Some(_)) => bounds.0,
        (FieldKind::Random, None, None) if options.cardinality.is_some() => 0,
        (FieldKind::Random, None, None) => ty.random_default().0,
    };
    // Inclusive upper end; `None` only for an unbounded sequence.
    let hi = match (max, options.cardinality) {
        (Some(max), _) => Some(max),
        (None, Some(cardinality)) => Some(lo + i128::from(cardinality) - 1),
        (None, None) => match kind {
            FieldKind::Sequence => None,
            FieldKind::Random if min.is_some() => Some(bounds.1),
            FieldKind::Random => Some(ty.random_default().1),
        },
    };
    if let Some(hi) = hi
        && hi > bounds.1
    {
        return Err(Error::config(
            at("cardinality"),
            format!(
                "`min` + `cardinality` - 1 = {hi} exceeds the column's maximum {}",
                bounds.1
            ),
        ));
    }
    // Two's complement bits: wrapping u64 arithmetic on them is exact for every width.
    let lo_bits = lo as i64 as u64;
    // A span of 2^64 wraps to 0, which both patterns read as "every value".
    let span = hi.map(|hi| (hi - lo + 1) as u64);
    Ok(match kind {
        FieldKind::Sequence => IntPattern::Sequence {
            lo: lo_bits,
            span: span.filter(|s| *s != 0),
        },
        FieldKind::Random => IntPattern::Random {
            lo: lo_bits,
            span: span.unwrap_or(0),
        },
    })
}

/// Resolves the pattern of a float column.
fn float_pattern(options: &FieldOptions, at: &impl Fn(&str) -> String) -> Result<FloatPattern> {
    let float = |value: Option<&serde_json::Number>, name: &str| -> Result<Option<f64>> {
        value
            .map(|n| {
                n.as_f64().filter(|f| f.is_finite()).ok_or_else(|| {
                    Error::config(at(name), format!("must be a finite number, got {n}"))
                })
            })
            .transpose()
    };
    let min = float(options.min.as_ref(), "min")?;
    let max = float(options.max.as_ref(), "max")?;
    let kind = options.kind.unwrap_or(FieldKind::Random);
    Ok(match kind {
        FieldKind::Sequence => {
            if options.cardinality.is_some() && max.is_some() {
                return Err(Error::config(
                    at("cardinality"),
                    "set either `max` or `cardinality`, not both",
                ));
            }
            let min = min.unwrap_or(0.0);
            let span = match (max, options.cardinality) {
                (Some(max), _) if max <= min => {
                    return Err(Error::config(
                        at("max"),
                        format!("{max} is not above `min` {min}"),
                    ));
                }
                (Some(max), _) => Some((max - min).ceil().max(1.0) as u64),
                (None, cardinality) => cardinality,
            };
            FloatPattern::Sequence { min, span }
        }
        FieldKind::Random => {
            let (min, max) = match (min, max) {
                (None, None) => (0.0, 1000.0),
                (Some(min), None) => (min, min + 1000.0),
                (None, Some(max)) => (max - 1000.0, max),
                (Some(min), Some(max)) => (min, max),
            };
            if max < min {
                return Err(Error::config(
                    at("max"),
                    format!("{max} is below `min` {min}"),
                ));
            }
            match options.cardinality {
                Some(levels) => FloatPattern::RandomLevels {
                    min,
                    step: (max - min) / levels as f64,
                    levels,
                },
                None => FloatPattern::Random {
                    min,
                    width: max - min,
                },
            }
        }
    })
}

/// The longest of the `<column>-<n>` values in bytes.
fn string_max_len(values: &StringValues, cardinality: u64) -> usize {
    let prefix_len = match values {
        StringValues::Table(table) => return table.value(table.len() - 1).len(),
        StringValues::Format { prefix } => prefix.len(),
    };
    prefix_len + cardinality.saturating_sub(1).checked_ilog10().unwrap_or(0) as usize + 1
}

/// Pre-builds the `<column>-<n>` values when there are few enough of them.
fn string_values(name: &str, cardinality: u64) -> StringValues {
    let prefix = format!("{name}-");
    if cardinality > STRING_TABLE_MAX {
        return StringValues::Format { prefix };
    }
    StringValues::Table(StringArray::from_iter_values(
        (0..cardinality).map(|n| format!("{prefix}{n}")),
    ))
}

/// Appends the decimal digits of `n` without allocating (beyond `out`'s growth).
#[inline]
fn push_decimal(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend(digits[at..].iter().map(|d| char::from(*d)));
}

/// Fills `len` integer-backed values for rows `start..`; `cast` truncates the bits to the width.
#[inline(always)]
fn fill_ints<T: arrow::datatypes::ArrowNativeType>(
    pattern: &IntPattern,
    key: u64,
    start: u64,
    len: usize,
    scale: u64,
    cast: impl Fn(u64) -> T,
) -> ScalarBuffer<T> {
    let mut out: Vec<T> = Vec::with_capacity(len);
    let rows = start..start.wrapping_add(len as u64);
    match *pattern {
        IntPattern::Sequence { lo, span: None } => {
            out.extend(
                (0..len as u64)
                    .map(|i| cast(lo.wrapping_add(start.wrapping_add(i)).wrapping_mul(scale))),
            );
        }
        IntPattern::Sequence {
            lo,
            span: Some(span),
        } => {
            let mut offset = start % span;
            out.extend((0..len).map(|_| {
                let value = lo.wrapping_add(offset);
                offset += 1;
                if offset == span {
                    offset = 0;
                }
                cast(value.wrapping_mul(scale))
            }));
        }
        IntPattern::Random { lo, span: 0 } => {
            out.extend(
                rows.map(|row| cast(lo.wrapping_add(hash_at(key, row)).wrapping_mul(scale))),
            );
        }
        IntPattern::Random { lo, span } => {
            out.extend(rows.map(|row| {
                cast(
                    lo.wrapping_add(below(hash_at(key, row), span))
                        .wrapping_mul(scale),
                )
            }));
        }
    }
    ScalarBuffer::from(out)
}

/// Fills `len` float values for rows `start..`.
#[inline(always)]
fn fill_floats<T: arrow::datatypes::ArrowNativeType>(
    pattern: &FloatPattern,
    key: u64,
    start: u64,
    len: usize,
    cast: impl Fn(f64) -> T,
) -> ScalarBuffer<T> {
    let mut out: Vec<T> = Vec::with_capacity(len);
    let rows = start..start.wrapping_add(len as u64);
    match *pattern {
        FloatPattern::Sequence { min, span: None } => {
            out.extend(rows.map(|row| cast(min + row as f64)));
        }
        FloatPattern::Sequence {
            min,
            span: Some(span),
        } => {
            let mut offset = start % span;
            out.extend((0..len).map(|_| {
                let value = min + offset as f64;
                offset += 1;
                if offset == span {
                    offset = 0;
                }
                cast(value)
            }));
        }
        FloatPattern::Random { min, width } => {
            out.extend(rows.map(|row| cast(min + unit_f64(hash_at(key, row)) * width)));
        }
        FloatPattern::RandomLevels { min, step, levels } => {
            out.extend(rows.map(|row| cast(min + below(hash_at(key, row), levels) as f64 * step)));
        }
    }
    ScalarBuffer::from(out)
}

/// Builds `len` string values for rows `start..`, without nulls.
///
/// A builder appends `&str`s, so nothing is re-validated as UTF-8; sequences copy whole runs of
/// the table at once.
///
/// # Errors
/// [`Error::Internal`] when `len` values could overflow 32-bit offsets: prepare rejects such
/// batch sizes, which keeps the builder's overflow panic unreachable.
fn fill_strings(
    kind: FieldKind,
    cardinality: u64,
    values: &StringValues,
    key: u64,
    start: u64,
    len: usize,
) -> Result<StringArray> {
    let max_len = string_max_len(values, cardinality);
    let Some(capacity) = len
        .checked_mul(max_len)
        .filter(|total| *total <= i32::MAX as usize)
    else {
        return Err(Error::Internal(format!(
            "{len} datagen strings of up to {max_len} bytes exceed 32-bit offsets"
        )));
    };
    let mut builder = StringBuilder::with_capacity(len, capacity);
    let rows = start..start.wrapping_add(len as u64);
    match (values, kind) {
        (StringValues::Table(table), FieldKind::Sequence) => {
            // Consecutive rows are consecutive table entries: append whole runs at once.
            let mut n = (start % cardinality) as usize;
            let mut remaining = len;
            while remaining > 0 {
                let run = remaining.min(table.len() - n);
                builder
                    .append_array(&table.slice(n, run))
                    .map_err(|e| Error::arrow("appending datagen strings", e))?;
                remaining -= run;
                n = 0;
            }
        }
        (StringValues::Table(table), FieldKind::Random) => {
            for row in rows {
                builder.append_value(table.value(below(hash_at(key, row), cardinality) as usize));
            }
        }
        (StringValues::Format { prefix }, FieldKind::Sequence) => {
            let mut value = String::with_capacity(max_len);
            let mut n = start % cardinality;
            for _ in rows {
                value.clear();
                value.push_str(prefix);
                push_decimal(&mut value, n);
                builder.append_value(&value);
                n += 1;
                if n == cardinality {
                    n = 0;
                }
            }
        }
        (StringValues::Format { prefix }, FieldKind::Random) => {
            let mut value = String::with_capacity(max_len);
            for row in rows {
                value.clear();
                value.push_str(prefix);
                push_decimal(&mut value, below(hash_at(key, row), cardinality));
                builder.append_value(&value);
            }
        }
    }
    Ok(builder.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;
    use arrow::datatypes::{Int64Type, UInt64Type};

    fn generator(data_type: DataType, options: serde_json::Value) -> Result<ColumnGenerator> {
        let options: FieldOptions = serde_json::from_value(options).expect("valid options");
        let field = Field::new("c", data_type, true);
        let paths = ColumnPaths {
            field: "fields.c",
            schema: "schema",
        };
        ColumnGenerator::try_new(&field, 0, 9, Some(&options), &paths)
    }

    /// Generates rows `start..start + len` and, to check batch independence, the same rows as
    /// two batches split at every third row.
    fn rows(generator: &ColumnGenerator, start: u64, len: usize) -> ArrayRef {
        let whole = generator.generate(start, len).expect("generate");
        let cut = len / 3;
        let head = generator.generate(start, cut).expect("generate");
        let tail = generator
            .generate(start + cut as u64, len - cut)
            .expect("generate");
        let joined = arrow::compute::concat(&[head.as_ref(), tail.as_ref()]).expect("concat");
        assert_eq!(&joined, &whole, "batch boundaries must not change values");
        whole
    }

    #[test]
    fn push_decimal_writes_every_width() {
        for n in [0, 7, 10, 99, 1234, u64::MAX] {
            let mut out = String::from("x-");
            push_decimal(&mut out, n);
            assert_eq!(out, format!("x-{n}"));
        }
    }

    #[test]
    fn many_distinct_strings_are_formatted_per_row() {
        let sequence = generator(
            DataType::Utf8,
            serde_json::json!({"kind": "sequence", "cardinality": 1_000_000}),
        )
        .expect("valid");
        assert_eq!(sequence.max_string_len(), Some("c-999999".len()));
        let array = rows(&sequence, 999_998, 4);
        let values: Vec<&str> = array.as_string::<i32>().iter().flatten().collect();
        assert_eq!(values, ["c-999998", "c-999999", "c-0", "c-1"]);

        let random = generator(
            DataType::Utf8,
            serde_json::json!({"kind": "random", "cardinality": 100_000, "null_fraction": 0.5}),
        )
        .expect("valid");
        let array = rows(&random, 0, 1000);
        let strings = array.as_string::<i32>();
        assert!((350..650).contains(&strings.null_count()));
        for value in strings.iter().flatten() {
            let n: u64 = value
                .strip_prefix("c-")
                .and_then(|n| n.parse().ok())
                .expect("c-<n>");
            assert!(n < 100_000);
        }
    }

    #[test]
    fn full_64_bit_ranges_do_not_overflow() {
        let random =
            generator(DataType::UInt64, serde_json::json!({"kind": "random"})).expect("ok");
        let array = rows(&random, 0, 2000);
        let values = array.as_primitive::<UInt64Type>();
        assert!(values.values().iter().any(|v| *v > u64::MAX / 2));
        assert!(values.values().iter().any(|v| *v < u64::MAX / 2));

        let bounded = generator(
            DataType::Int64,
            serde_json::json!({"kind": "random", "min": i64::MIN, "max": i64::MAX}),
        )
        .expect("ok");
        let array = rows(&bounded, 0, 2000);
        let values = array.as_primitive::<Int64Type>();
        assert!(values.values().iter().any(|v| *v < 0));

        let near_end = generator(
            DataType::Int64,
            serde_json::json!({"kind": "sequence", "min": i64::MAX - 1}),
        )
        .expect("ok");
        let array = rows(&near_end, 0, 3);
        assert_eq!(
            array.as_primitive::<Int64Type>().values().as_ref(),
            &[i64::MAX - 1, i64::MAX, i64::MIN],
            "an unbounded sequence wraps around the type"
        );
    }

    #[test]
    fn negative_ranges_of_narrow_types() {
        let random = generator(
            DataType::Int8,
            serde_json::json!({"kind": "random", "min": -100, "max": -90}),
        )
        .expect("ok");
        let array = rows(&random, 5, 500);
        let values = array.as_primitive::<Int8Type>();
        assert!(values.values().iter().all(|v| (-100..=-90).contains(v)));
        let sequence = generator(
            DataType::Int16,
            serde_json::json!({"kind": "sequence", "min": -2, "max": 1}),
        )
        .expect("ok");
        let array = rows(&sequence, 0, 6);
        assert_eq!(
            array.as_primitive::<Int16Type>().values().as_ref(),
            &[-2, -1, 0, 1, -2, -1]
        );
    }

    #[test]
    fn float_levels_and_timestamp_bounds() {
        let levels = generator(
            DataType::Float64,
            serde_json::json!({"min": 1.0, "max": 2.0, "cardinality": 4}),
        )
        .expect("ok");
        let array = rows(&levels, 0, 400);
        let distinct: std::collections::BTreeSet<u64> = array
            .as_primitive::<Float64Type>()
            .values()
            .iter()
            .map(|v| v.to_bits())
            .collect();
        let expected: std::collections::BTreeSet<u64> = [1.0f64, 1.25, 1.5, 1.75]
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert_eq!(distinct, expected);

        let err = generator(
            DataType::Timestamp(TimeUnit::Nanosecond, None),
            serde_json::json!({"max": i64::MAX}),
        )
        .expect_err("ns timestamps hold about 292 years of milliseconds");
        assert!(err.to_string().contains("fields.c.max"), "{err}");
    }
}
