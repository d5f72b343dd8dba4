//! Values of `MIN`, `MAX` and `DISTINCT` aggregates as byte strings that sort like the values.
//!
//! A group's values are kept in a `BTreeMap` keyed by these bytes, with a count per value, so
//! the smallest and largest are its first and last keys and a retracted value is found and
//! removed exactly. Each supported Arrow type is first cast to one of four canonical types, and
//! cast back for the output:
//!
//! | canonical  | Arrow types                                              | bytes |
//! |------------|----------------------------------------------------------|-------|
//! | `Int64`    | signed integers, booleans, dates, times, timestamps, durations | 8 bytes big-endian, sign bit flipped |
//! | `Float64`  | `Float32`, `Float64`                                      | 8 bytes big-endian of the IEEE bits, ordered as `f64::total_cmp` |
//! | `Decimal128` | `Decimal128`                                           | 16 bytes big-endian, sign bit flipped |
//! | `Binary`   | strings and binaries                                      | the bytes themselves |
//!
//! The format is Weir's own and is kept in keyed state, so it does not change without a new
//! accumulator version (see `accumulator.rs`).

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, Decimal128Array, Float64Array, Int64Array,
};
use arrow::compute::{can_cast_types, cast};
use arrow::datatypes::{DataType, Decimal128Type, Float64Type, Int64Type};
use std::sync::Arc;
use weir_api::{Error, Result};

/// The canonical type a value is kept as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Canonical {
    /// Integers and everything stored as one.
    Int,
    /// Floating point.
    Float,
    /// A `Decimal128` of the input's precision and scale.
    Decimal(u8, i8),
    /// Strings and binaries.
    Bytes,
}

impl Canonical {
    /// The canonical type of `data_type`, `None` when values of it cannot be ordered here.
    pub(crate) fn of(data_type: &DataType) -> Option<Self> {
        let canonical = match data_type {
            DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Boolean
            | DataType::Date32
            | DataType::Date64
            | DataType::Time32(_)
            | DataType::Time64(_)
            | DataType::Timestamp(..)
            | DataType::Duration(_) => Canonical::Int,
            DataType::Float32 | DataType::Float64 => Canonical::Float,
            DataType::Decimal128(p, s) => Canonical::Decimal(*p, *s),
            DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView => Canonical::Bytes,
            _ => return None,
        };
        let arrow = canonical.arrow_type();
        (can_cast_types(data_type, &arrow) && can_cast_types(&arrow, data_type))
            .then_some(canonical)
    }

    /// The Arrow type of the canonical values.
    pub(crate) fn arrow_type(self) -> DataType {
        match self {
            Canonical::Int => DataType::Int64,
            Canonical::Float => DataType::Float64,
            Canonical::Decimal(p, s) => DataType::Decimal128(p, s),
            Canonical::Bytes => DataType::Binary,
        }
    }
}

/// The ordered bytes of each value of `column` (`None` for a null).
///
/// # Errors
/// Arrow errors when the column cannot be cast to `canonical`.
pub(crate) fn encode(column: &ArrayRef, canonical: Canonical) -> Result<Vec<Option<Vec<u8>>>> {
    let values = cast(column, &canonical.arrow_type())
        .map_err(|e| Error::arrow("casting aggregated values", e))?;
    let out = match canonical {
        Canonical::Int => values
            .as_primitive::<Int64Type>()
            .iter()
            .map(|v| v.map(|v| int_key(v).to_vec()))
            .collect(),
        Canonical::Float => values
            .as_primitive::<Float64Type>()
            .iter()
            .map(|v| v.map(|v| float_key(v).to_vec()))
            .collect(),
        Canonical::Decimal(..) => values
            .as_primitive::<Decimal128Type>()
            .iter()
            .map(|v| v.map(|v| decimal_key(v).to_vec()))
            .collect(),
        Canonical::Bytes => values
            .as_binary::<i32>()
            .iter()
            .map(|v| v.map(<[u8]>::to_vec))
            .collect(),
    };
    Ok(out)
}

/// The values of `keys` (`None` for null) as an array of `data_type`.
///
/// # Errors
/// [`Error::Internal`] for bytes that are no value of `canonical`; Arrow errors casting back.
pub(crate) fn decode(
    keys: &[Option<&[u8]>],
    canonical: Canonical,
    data_type: &DataType,
) -> Result<ArrayRef> {
    let values: ArrayRef = match canonical {
        Canonical::Int => Arc::new(
            keys.iter()
                .map(|k| k.map(int_value).transpose())
                .collect::<Result<Int64Array>>()?,
        ),
        Canonical::Float => Arc::new(
            keys.iter()
                .map(|k| k.map(float_value).transpose())
                .collect::<Result<Float64Array>>()?,
        ),
        Canonical::Decimal(p, s) => Arc::new(
            keys.iter()
                .map(|k| k.map(decimal_value).transpose())
                .collect::<Result<Decimal128Array>>()?
                .with_precision_and_scale(p, s)
                .map_err(|e| Error::arrow("rebuilding decimal values", e))?,
        ),
        Canonical::Bytes => Arc::new(keys.iter().copied().collect::<BinaryArray>()),
    };
    if values.data_type() == data_type {
        return Ok(values);
    }
    cast(&values, data_type).map_err(|e| Error::arrow("casting aggregate results", e))
}

/// The ordered key of an integer.
pub(crate) fn int_key(v: i64) -> [u8; 8] {
    ((v as u64) ^ (1 << 63)).to_be_bytes()
}

/// The integer of an ordered key.
pub(crate) fn int_value(key: &[u8]) -> Result<i64> {
    let bytes: [u8; 8] = key.try_into().map_err(|_| corrupt("integer"))?;
    Ok((u64::from_be_bytes(bytes) ^ (1 << 63)) as i64)
}

/// The ordered key of a float: `f64::total_cmp` order.
pub(crate) fn float_key(v: f64) -> [u8; 8] {
    let bits = v.to_bits();
    let ordered = if bits >> 63 == 1 {
        !bits
    } else {
        bits ^ (1 << 63)
    };
    ordered.to_be_bytes()
}

/// The float of an ordered key.
pub(crate) fn float_value(key: &[u8]) -> Result<f64> {
    let bytes: [u8; 8] = key.try_into().map_err(|_| corrupt("float"))?;
    let ordered = u64::from_be_bytes(bytes);
    let bits = if ordered >> 63 == 1 {
        ordered ^ (1 << 63)
    } else {
        !ordered
    };
    Ok(f64::from_bits(bits))
}

/// The ordered key of a decimal's unscaled value.
pub(crate) fn decimal_key(v: i128) -> [u8; 16] {
    ((v as u128) ^ (1 << 127)).to_be_bytes()
}

/// The unscaled decimal of an ordered key.
pub(crate) fn decimal_value(key: &[u8]) -> Result<i128> {
    let bytes: [u8; 16] = key.try_into().map_err(|_| corrupt("decimal"))?;
    Ok((u128::from_be_bytes(bytes) ^ (1 << 127)) as i128)
}

fn corrupt(what: &str) -> Error {
    Error::Internal(format!("group aggregate state: a corrupt {what} value"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{StringArray, TimestampMillisecondArray};

    #[test]
    fn keys_sort_like_their_values() {
        let ints = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        let keys: Vec<[u8; 8]> = ints.iter().map(|&v| int_key(v)).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        let floats = [
            f64::NEG_INFINITY,
            -2.5,
            -0.0,
            0.0,
            1e-300,
            3.0,
            f64::INFINITY,
        ];
        let keys: Vec<[u8; 8]> = floats.iter().map(|&v| float_key(v)).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        for v in floats {
            assert_eq!(
                float_value(&float_key(v)).expect("float").to_bits(),
                v.to_bits()
            );
        }
        let decimals = [i128::MIN, -1, 0, 1, i128::MAX];
        let keys: Vec<[u8; 16]> = decimals.iter().map(|&v| decimal_key(v)).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        for v in decimals {
            assert_eq!(decimal_value(&decimal_key(v)).expect("decimal"), v);
        }
    }

    #[test]
    fn values_round_trip_through_their_canonical_type() {
        let times: ArrayRef = Arc::new(
            TimestampMillisecondArray::from(vec![Some(5), None, Some(-3)]).with_timezone("UTC"),
        );
        let strings: ArrayRef = Arc::new(StringArray::from(vec![Some("b"), Some("a"), None]));
        for column in [times, strings] {
            let canonical = Canonical::of(column.data_type()).expect("supported");
            let keys = encode(&column, canonical).expect("encodes");
            let refs: Vec<Option<&[u8]>> = keys.iter().map(|k| k.as_deref()).collect();
            let back = decode(&refs, canonical, column.data_type()).expect("decodes");
            assert_eq!(&back, &column);
        }
        assert_eq!(Canonical::of(&DataType::Null), None);
    }
}
