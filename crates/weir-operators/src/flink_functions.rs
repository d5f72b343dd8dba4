//! Flink SQL's scalar functions that DataFusion lacks, registered in every session the engine
//! plans with (SQL scripts, `filter`/`project` expressions, computed columns), so a Flink DDL
//! such as `ts AS TO_TIMESTAMP_LTZ(epoch_millis, 3)` runs unchanged.

use arrow::array::{AsArray, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Field, FieldRef, Int64Type, TimeUnit};
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    TypeSignature, Volatility,
};
use std::sync::Arc;

/// Every function of this module and of `flink_formats` (`TO_TIMESTAMP`, `DATE_FORMAT` and
/// `UNIX_TIMESTAMP` reading Java formats), ready to register.
pub fn flink_functions() -> Vec<Arc<ScalarUDF>> {
    let mut all = vec![
        Arc::new(ScalarUDF::new_from_impl(ToTimestampLtz::new())),
        Arc::new(ScalarUDF::new_from_impl(Hour::new())),
    ];
    all.extend(crate::flink_formats::format_functions());
    all
}

/// The time zone of a `TIMESTAMP_LTZ` value (an instant): Arrow's UTC timestamps.
const UTC: &str = "UTC";

/// `TO_TIMESTAMP_LTZ(numeric[, precision])`: epoch seconds (precision 0) or epoch
/// milliseconds (precision 3, the default) as a `TIMESTAMP_LTZ(3)`, Arrow's millisecond
/// timestamps in UTC. A value whose milliseconds do not fit 64 bits becomes null.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ToTimestampLtz {
    signature: Signature,
}

impl Default for ToTimestampLtz {
    fn default() -> Self {
        Self::new()
    }
}

impl ToTimestampLtz {
    /// The function, taking integers (coerced to BIGINT).
    pub fn new() -> Self {
        Self {
            signature: Signature::one_of(
                vec![
                    TypeSignature::Uniform(1, vec![DataType::Int64]),
                    TypeSignature::Uniform(2, vec![DataType::Int64]),
                ],
                Volatility::Immutable,
            ),
        }
    }
}

impl ScalarUDFImpl for ToTimestampLtz {
    fn name(&self) -> &str {
        "to_timestamp_ltz"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Timestamp(TimeUnit::Millisecond, Some(UTC.into())))
    }

    /// Checks the precision where the call is planned, so a bad one is a compile error.
    fn return_field_from_args(&self, args: ReturnFieldArgs<'_>) -> Result<FieldRef> {
        if args.arg_fields.len() > 1 {
            scale(args.scalar_arguments.get(1).copied().flatten())?;
        }
        Ok(Arc::new(Field::new(
            self.name(),
            self.return_type(&[])?,
            true,
        )))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let factor: i64 = match args.args.get(1) {
            None => 1,
            Some(ColumnarValue::Scalar(precision)) => scale(Some(precision))?,
            Some(ColumnarValue::Array(_)) => scale(None)?,
        };
        let millis = |v: i64| v.checked_mul(factor);
        match args.args.first() {
            Some(ColumnarValue::Array(values)) => {
                let values = values.as_primitive::<Int64Type>();
                let out: TimestampMillisecondArray = if factor == 1 {
                    values.reinterpret_cast()
                } else {
                    values.iter().map(|v| v.and_then(millis)).collect()
                };
                Ok(ColumnarValue::Array(Arc::new(out.with_timezone(UTC))))
            }
            Some(ColumnarValue::Scalar(ScalarValue::Int64(v))) => Ok(ColumnarValue::Scalar(
                ScalarValue::TimestampMillisecond(v.and_then(millis), Some(UTC.into())),
            )),
            Some(ColumnarValue::Scalar(other)) => {
                plan_err!(
                    "TO_TIMESTAMP_LTZ takes an integer, not {}",
                    other.data_type()
                )
            }
            None => plan_err!("TO_TIMESTAMP_LTZ takes a value and an optional precision"),
        }
    }
}

/// `HOUR(timestamp)`: the hour of the day (0 to 23) as a BIGINT, of a timestamp (in its time
/// zone; UTC for `TIMESTAMP_LTZ`) or a date (0), as Flink's `HOUR`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Hour {
    signature: Signature,
}

impl Default for Hour {
    fn default() -> Self {
        Self::new()
    }
}

impl Hour {
    /// The function, taking one timestamp or date.
    pub fn new() -> Self {
        Self {
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for Hour {
    fn name(&self) -> &str {
        "hour"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types.first() {
            Some(DataType::Timestamp(..) | DataType::Date32 | DataType::Date64) => {
                Ok(DataType::Int64)
            }
            Some(other) => plan_err!("HOUR takes a timestamp, not {other}"),
            None => plan_err!("HOUR takes a timestamp"),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [value] = args.args.as_slice() else {
            return plan_err!("HOUR takes one timestamp");
        };
        let array = value.to_array(args.number_rows)?;
        let hours = arrow::compute::kernels::temporal::date_part(
            array.as_ref(),
            arrow::compute::kernels::temporal::DatePart::Hour,
        )?;
        let hours = arrow::compute::cast(&hours, &DataType::Int64)?;
        Ok(match value {
            ColumnarValue::Scalar(_) => {
                ColumnarValue::Scalar(ScalarValue::try_from_array(hours.as_ref(), 0)?)
            }
            ColumnarValue::Array(_) => ColumnarValue::Array(hours),
        })
    }
}

/// What a value of `precision` is multiplied by to make milliseconds: 1000 for 0 (epoch
/// seconds), 1 for 3 (epoch milliseconds). `None`: not a literal.
fn scale(precision: Option<&ScalarValue>) -> Result<i64> {
    let value = precision.and_then(|p| p.cast_to(&DataType::Int64).ok());
    match value {
        Some(ScalarValue::Int64(Some(0))) => Ok(1000),
        Some(ScalarValue::Int64(Some(3))) => Ok(1),
        _ => {
            let shown = precision.map_or_else(|| "a column".to_owned(), ToString::to_string);
            plan_err!(
                "TO_TIMESTAMP_LTZ(value, precision): the precision is 0 (epoch seconds) or 3 \
                 (epoch milliseconds), not {shown}"
            )
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use arrow::array::{Array, ArrayRef, Int64Array};
    use datafusion::config::ConfigOptions;

    fn call(args: Vec<ColumnarValue>) -> Result<ColumnarValue> {
        let arg_fields = args
            .iter()
            .map(|a| Arc::new(Field::new("a", a.data_type(), true)))
            .collect();
        ToTimestampLtz::new().invoke_with_args(ScalarFunctionArgs {
            number_rows: 3,
            arg_fields,
            return_field: Arc::new(Field::new(
                "r",
                DataType::Timestamp(TimeUnit::Millisecond, Some(UTC.into())),
                true,
            )),
            config_options: Arc::new(ConfigOptions::default()),
            args,
        })
    }

    fn column(values: Vec<Option<i64>>) -> ColumnarValue {
        ColumnarValue::Array(Arc::new(Int64Array::from(values)) as ArrayRef)
    }

    fn millis(out: ColumnarValue) -> Vec<Option<i64>> {
        let ColumnarValue::Array(a) = out else {
            panic!("an array")
        };
        assert_eq!(
            a.data_type(),
            &DataType::Timestamp(TimeUnit::Millisecond, Some(UTC.into()))
        );
        a.as_primitive::<arrow::datatypes::TimestampMillisecondType>()
            .iter()
            .collect()
    }

    #[test]
    fn milliseconds_pass_and_seconds_are_scaled_overflow_is_null() {
        let values = vec![Some(1_500), None, Some(i64::MAX / 10)];
        let three = ColumnarValue::Scalar(ScalarValue::Int64(Some(3)));
        let zero = ColumnarValue::Scalar(ScalarValue::Int64(Some(0)));
        assert_eq!(
            millis(call(vec![column(values.clone()), three]).unwrap()),
            values
        );
        assert_eq!(millis(call(vec![column(values.clone())]).unwrap()), values);
        assert_eq!(
            millis(call(vec![column(values), zero]).unwrap()),
            vec![Some(1_500_000), None, None]
        );
    }

    #[test]
    fn hour_reads_the_hour_of_a_utc_timestamp() {
        let ts =
            TimestampMillisecondArray::from(vec![Some(11 * 3_600_000 + 59_999), None, Some(-1)])
                .with_timezone(UTC);
        let out = Hour::new()
            .invoke_with_args(ScalarFunctionArgs {
                number_rows: 3,
                arg_fields: vec![Arc::new(Field::new("t", ts.data_type().clone(), true))],
                return_field: Arc::new(Field::new("r", DataType::Int64, true)),
                config_options: Arc::new(ConfigOptions::default()),
                args: vec![ColumnarValue::Array(Arc::new(ts))],
            })
            .unwrap();
        let ColumnarValue::Array(a) = out else {
            panic!("an array")
        };
        let hours: Vec<Option<i64>> = a.as_primitive::<Int64Type>().iter().collect();
        assert_eq!(hours, [Some(11), None, Some(23)]);
        assert!(Hour::new().return_type(&[DataType::Utf8]).is_err());
        let date = arrow::array::Date32Array::from(vec![Some(20_000)]);
        let out = Hour::new()
            .invoke_with_args(ScalarFunctionArgs {
                number_rows: 1,
                arg_fields: vec![Arc::new(Field::new("d", DataType::Date32, true))],
                return_field: Arc::new(Field::new("r", DataType::Int64, true)),
                config_options: Arc::new(ConfigOptions::default()),
                args: vec![ColumnarValue::Array(Arc::new(date))],
            })
            .unwrap();
        let ColumnarValue::Array(a) = out else {
            panic!("an array")
        };
        assert_eq!(a.as_primitive::<Int64Type>().value(0), 0);
    }

    #[test]
    fn a_precision_other_than_0_or_3_is_refused() {
        let six = ColumnarValue::Scalar(ScalarValue::Int64(Some(6)));
        let err = call(vec![column(vec![Some(1)]), six]).unwrap_err();
        assert!(
            err.to_string()
                .contains("the precision is 0 (epoch seconds) or 3"),
            "{err}"
        );
    }
}
