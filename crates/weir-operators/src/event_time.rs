//! Normalization of an event-time column to Int64 milliseconds since the Unix epoch.

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, PrimitiveArray};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Int64Type, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use weir_api::{Error, RecordLocation};

/// Normalizes an event-time column to milliseconds since the Unix epoch.
///
/// Accepted types: `Int64` (already milliseconds) and `Timestamp` in seconds, milliseconds,
/// microseconds or nanoseconds, with or without a time zone (a timestamp is an instant; the
/// zone only affects how it is displayed). Microseconds and nanoseconds are floored with
/// `div_euclid`, so a negative time rounds down (`-1 us` becomes `-1 ms`), the same rule window
/// bounds use. Null rows stay null. Milliseconds and `Int64` are reinterpreted without copying.
///
/// # Errors
///
/// - [`Error::Schema`] naming `field_name` and its type when the column has any other type.
/// - [`Error::BadRecord`] naming `field_name` and the row when a value in seconds does not fit
///   in `i64` milliseconds; values are never wrapped silently.
pub fn event_times_ms(column: &ArrayRef, field_name: &str) -> Result<Int64Array, Error> {
    match column.data_type() {
        DataType::Int64 => Ok(column.as_primitive::<Int64Type>().clone()),
        DataType::Timestamp(TimeUnit::Millisecond, _) => Ok(column
            .as_primitive::<TimestampMillisecondType>()
            .reinterpret_cast::<Int64Type>()),
        DataType::Timestamp(TimeUnit::Second, _) => {
            seconds_to_ms(column.as_primitive::<TimestampSecondType>(), field_name)
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => Ok(column
            .as_primitive::<TimestampMicrosecondType>()
            .unary(|v| v.div_euclid(1_000))),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => Ok(column
            .as_primitive::<TimestampNanosecondType>()
            .unary(|v| v.div_euclid(1_000_000))),
        other => Err(Error::schema(
            format!("event-time field `{field_name}`"),
            format!(
                "type {other} is not an event time; expected Int64 milliseconds or \
                 Timestamp(s|ms|us|ns)"
            ),
        )),
    }
}

/// Seconds to milliseconds: one scan for an overflowing valid row (to name it), then a
/// vectorized multiply that cannot overflow any more. Null slots may hold any value and are
/// not checked.
fn seconds_to_ms<T>(seconds: &PrimitiveArray<T>, field_name: &str) -> Result<Int64Array, Error>
where
    T: ArrowPrimitiveType<Native = i64>,
{
    let overflowing = seconds
        .values()
        .iter()
        .enumerate()
        .find(|(row, v)| seconds.is_valid(*row) && v.checked_mul(1_000).is_none());
    if let Some((row, value)) = overflowing {
        return Err(Error::BadRecord {
            location: RecordLocation {
                input: format!("event-time column, row {row}"),
                line: None,
                column: Some(field_name.to_string()),
            },
            message: format!(
                "event time {value} s in row {row} of field `{field_name}` overflows i64 \
                 milliseconds"
            ),
        });
    }
    // No valid row overflows; wrapping only touches null slots, whose values are meaningless.
    Ok(seconds.unary(|v| v.wrapping_mul(1_000)))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{
        Float64Array, TimestampMicrosecondArray, TimestampMillisecondArray,
        TimestampNanosecondArray, TimestampSecondArray,
    };

    use super::*;

    fn normalize(column: ArrayRef) -> Result<Vec<Option<i64>>, Error> {
        Ok(event_times_ms(&column, "ts")?.iter().collect())
    }

    #[test]
    fn int64_and_milliseconds_pass_through_with_nulls() {
        let ints: ArrayRef = Arc::new(Int64Array::from(vec![Some(5), None, Some(-7)]));
        assert_eq!(
            normalize(ints).expect("int64"),
            vec![Some(5), None, Some(-7)]
        );
        let ms: ArrayRef = Arc::new(
            TimestampMillisecondArray::from(vec![Some(1), None, Some(i64::MIN)])
                .with_timezone("+02:00"),
        );
        assert_eq!(
            normalize(ms).expect("ms"),
            vec![Some(1), None, Some(i64::MIN)]
        );
    }

    #[test]
    fn seconds_scale_up_and_overflow_names_field_and_row() {
        let s: ArrayRef = Arc::new(TimestampSecondArray::from(vec![Some(2), None, Some(-3)]));
        assert_eq!(
            normalize(s).expect("seconds"),
            vec![Some(2_000), None, Some(-3_000)]
        );
        let edge = i64::MAX / 1_000;
        let s: ArrayRef = Arc::new(TimestampSecondArray::from(vec![edge, -edge]));
        assert_eq!(
            normalize(s).expect("edge"),
            vec![Some(edge * 1_000), Some(-edge * 1_000)]
        );
        let s: ArrayRef = Arc::new(TimestampSecondArray::from(vec![0, 1, edge + 1]));
        let err = normalize(s).expect_err("overflow");
        let text = err.to_string();
        assert!(matches!(err, Error::BadRecord { .. }), "{text}");
        assert!(text.contains("`ts`") && text.contains("row 2"), "{text}");
        let s: ArrayRef = Arc::new(TimestampSecondArray::from(vec![i64::MIN]).with_timezone("UTC"));
        assert!(normalize(s).is_err());
    }

    #[test]
    fn sub_millisecond_units_floor_towards_negative_infinity() {
        let us: ArrayRef = Arc::new(TimestampMicrosecondArray::from(vec![
            Some(1_999),
            Some(-1),
            Some(-1_000),
            Some(-1_001),
            None,
        ]));
        assert_eq!(
            normalize(us).expect("us"),
            vec![Some(1), Some(-1), Some(-1), Some(-2), None]
        );
        let ns: ArrayRef = Arc::new(
            TimestampNanosecondArray::from(vec![Some(2_500_000), Some(-1), Some(i64::MIN)])
                .with_timezone("UTC"),
        );
        assert_eq!(
            normalize(ns).expect("ns"),
            vec![Some(2), Some(-1), Some(i64::MIN.div_euclid(1_000_000))]
        );
    }

    #[test]
    fn other_types_are_schema_errors_naming_field_and_type() {
        let f: ArrayRef = Arc::new(Float64Array::from(vec![1.0]));
        let err = normalize(f).expect_err("float");
        let text = err.to_string();
        assert!(matches!(err, Error::Schema { .. }), "{text}");
        assert!(text.contains("`ts`") && text.contains("Float64"), "{text}");
    }
}
