//! The accumulators of `group_aggregate`: one group's running aggregates, how rows add to and
//! retract from them, their results, and their bytes in keyed state.
//!
//! `COUNT`, `SUM` and `AVG` keep sums and counts and retract by subtraction. `MIN`, `MAX` and
//! the `DISTINCT` aggregates keep their values with a count each ([`super::ordered`]); on an
//! insert-only input `MIN` and `MAX` keep only the best value, since nothing can retract it.
//!
//! # State format, version 1
//!
//! ```text
//! u8 version (= 1) | i64 rows | per aggregate: u8 tag, then
//!   0 count:    i64
//!   1 integer:  i64 sum, i64 values
//!   2 float:    u64 IEEE bits of the sum, i64 values
//!   3 decimal:  i128 sum, i64 values
//!   4 values:   u32 n, then n times (u32 length, bytes, i64 count)
//! ```
//!
//! All numbers are little-endian. `rows` is the group's rows (inserts minus retractions): the
//! group exists while it is above zero.

use super::ordered::{self, Canonical};
use arrow::array::{
    Array, ArrayRef, AsArray, Decimal128Array, Float64Array, Int64Array, PrimitiveArray,
};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Decimal128Type, Float64Type, Int64Type};
use std::collections::BTreeMap;
use std::sync::Arc;
use weir_api::{Error, Result};

const VERSION: u8 = 1;

/// An aggregate function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Function {
    Count,
    Sum,
    Avg,
    Min,
    Max,
}

impl Function {
    /// The function named `name` (lower case), if it is one.
    pub(crate) fn named(name: &str) -> Option<Self> {
        Some(match name {
            "count" => Function::Count,
            "sum" => Function::Sum,
            "avg" => Function::Avg,
            "min" => Function::Min,
            "max" => Function::Max,
            _ => return None,
        })
    }
}

/// How an aggregate accumulates its column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Accumulation {
    /// Rows (`COUNT(*)`) or non-null values (`COUNT(x)`).
    Count,
    /// An integer sum and its values.
    Int,
    /// A float sum and its values.
    Float,
    /// A decimal sum and its values.
    Decimal,
    /// Every value with its count (`MIN`, `MAX`, `DISTINCT`).
    Values(Canonical),
}

/// One aggregate resolved against the operator's input.
#[derive(Debug, Clone)]
pub(crate) struct Aggregate {
    pub(crate) function: Function,
    /// The aggregated column; `None` for `COUNT(*)`.
    pub(crate) column: Option<usize>,
    pub(crate) accumulation: Accumulation,
    /// The result's type.
    pub(crate) output: DataType,
    /// Keep every value even of `MIN`/`MAX` (the input retracts).
    pub(crate) retracting: bool,
    /// For `AVG` of a decimal: what a sum is multiplied by to reach the result's scale.
    pub(crate) avg_scale: i128,
}

impl Aggregate {
    /// Resolves `function(column)` (`distinct` or not) over a column of type `input`
    /// (`None` for `COUNT(*)`); the error says why it cannot be computed.
    pub(crate) fn resolve(
        function: Function,
        column: Option<(usize, &DataType)>,
        distinct: bool,
        retracting: bool,
    ) -> std::result::Result<Self, String> {
        let Some((index, input)) = column else {
            if function != Function::Count || distinct {
                return Err("only COUNT counts rows without a column".into());
            }
            return Ok(Self {
                function,
                column: None,
                accumulation: Accumulation::Count,
                output: DataType::Int64,
                retracting,
                avg_scale: 1,
            });
        };
        let values = || {
            Canonical::of(input)
                .map(Accumulation::Values)
                .ok_or_else(|| format!("values of type {input} cannot be compared here"))
        };
        let numeric = || -> std::result::Result<(Accumulation, DataType), String> {
            Ok(match input {
                DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
                    (Accumulation::Int, DataType::Int64)
                }
                DataType::Float32 | DataType::Float64 => (Accumulation::Float, DataType::Float64),
                DataType::Decimal128(p, s) => (
                    Accumulation::Decimal,
                    DataType::Decimal128((*p + 10).min(38), *s),
                ),
                other => {
                    return Err(format!(
                        "SUM and AVG take signed integers, floats and decimals, not {other}"
                    ));
                }
            })
        };
        let mut avg_scale = 1;
        let (accumulation, output) = match function {
            Function::Count if distinct => (values()?, DataType::Int64),
            Function::Count => (Accumulation::Count, DataType::Int64),
            Function::Min | Function::Max => (values()?, input.clone()),
            Function::Sum | Function::Avg => {
                let (accumulation, sum_type) = numeric()?;
                let output = match (function, input) {
                    // As DataFusion (and a window's AVG): four more digits of scale,
                    // truncated.
                    (Function::Avg, DataType::Decimal128(p, s)) => {
                        let scale = (*s + 4).min(38);
                        avg_scale = 10_i128.pow(u32::try_from(scale - *s).unwrap_or(0));
                        DataType::Decimal128((*p + 4).min(38), scale)
                    }
                    (Function::Avg, _) => DataType::Float64,
                    _ => sum_type,
                };
                let accumulation = if distinct { values()? } else { accumulation };
                (accumulation, output)
            }
        };
        Ok(Self {
            function,
            column: Some(index),
            accumulation,
            output,
            retracting,
            avg_scale,
        })
    }

    /// A new, empty accumulator.
    pub(crate) fn empty(&self) -> Acc {
        match self.accumulation {
            Accumulation::Count => Acc::Count(0),
            Accumulation::Int => Acc::Int { sum: 0, n: 0 },
            Accumulation::Float => Acc::Float { sum: 0.0, n: 0 },
            Accumulation::Decimal => Acc::Decimal { sum: 0, n: 0 },
            Accumulation::Values(_) => Acc::Values(BTreeMap::new()),
        }
    }

    /// The aggregate's column of `batch`, cast once for the whole batch.
    pub(crate) fn input(&self, columns: &[ArrayRef]) -> Result<Input> {
        let Some(i) = self.column else {
            return Ok(Input::Rows);
        };
        let column = &columns[i];
        let cast_to = |t: &DataType| -> Result<ArrayRef> {
            cast(column, t).map_err(|e| Error::arrow("casting an aggregated column", e))
        };
        Ok(match self.accumulation {
            Accumulation::Count => Input::Valid(Arc::clone(column)),
            Accumulation::Int => Input::Int(cast_to(&DataType::Int64)?.as_primitive().clone()),
            Accumulation::Float => {
                Input::Float(cast_to(&DataType::Float64)?.as_primitive().clone())
            }
            Accumulation::Decimal => {
                Input::Decimal(column.as_primitive::<Decimal128Type>().clone())
            }
            Accumulation::Values(canonical) => Input::Keys(ordered::encode(column, canonical)?),
        })
    }

    /// The result of `acc`.
    pub(crate) fn result(&self, acc: &Acc) -> Result<OutValue> {
        let avg = self.function == Function::Avg;
        Ok(match acc {
            Acc::Count(n) => OutValue::Int(Some(*n)),
            Acc::Int { sum, n } if avg => {
                OutValue::Float((*n > 0).then(|| *sum as f64 / *n as f64))
            }
            Acc::Int { sum, n } => OutValue::Int((*n > 0).then_some(*sum)),
            Acc::Float { sum, n } if avg => OutValue::Float((*n > 0).then(|| sum / *n as f64)),
            Acc::Float { sum, n } => OutValue::Float((*n > 0).then_some(*sum)),
            Acc::Decimal { sum, n } if avg => self.decimal_avg(*sum, *n)?,
            Acc::Decimal { sum, n } => OutValue::Decimal((*n > 0).then_some(*sum)),
            Acc::Values(values) => match self.function {
                Function::Count => OutValue::Int(Some(values.len() as i64)),
                Function::Min => OutValue::Key(values.keys().next().cloned()),
                Function::Max => OutValue::Key(values.keys().next_back().cloned()),
                Function::Sum | Function::Avg => self.distinct_sum(values)?,
            },
        })
    }

    /// `AVG` of a decimal: `sum` of `n` values scaled to the result and divided, truncating;
    /// an error when the result does not fit its precision (as DataFusion's).
    fn decimal_avg(&self, sum: i128, n: i64) -> Result<OutValue> {
        if n <= 0 {
            return Ok(OutValue::Decimal(None));
        }
        let DataType::Decimal128(precision, _) = self.output else {
            return Err(Error::Internal("a decimal AVG of another type".into()));
        };
        sum.checked_mul(self.avg_scale)
            .map(|scaled| scaled / i128::from(n))
            .filter(|avg| avg.unsigned_abs() < 10_u128.pow(u32::from(precision)))
            .map(|avg| OutValue::Decimal(Some(avg)))
            .ok_or_else(|| Error::BadRecord {
                location: weir_api::RecordLocation {
                    input: "GROUP BY: AVG of a DECIMAL".into(),
                    line: None,
                    column: None,
                },
                message: format!(
                    "the average of {n} values summing to {sum} (unscaled) does not fit the \
                     result's DECIMAL({precision}, _)"
                ),
            })
    }

    /// `SUM(DISTINCT x)` or `AVG(DISTINCT x)` of the values kept.
    fn distinct_sum(&self, values: &BTreeMap<Vec<u8>, i64>) -> Result<OutValue> {
        let Accumulation::Values(canonical) = self.accumulation else {
            return Err(Error::Internal("a distinct sum without values".into()));
        };
        let n = values.len() as i64;
        let avg = self.function == Function::Avg;
        Ok(match canonical {
            Canonical::Int => {
                let mut sum = 0_i64;
                for key in values.keys() {
                    sum = sum.wrapping_add(ordered::int_value(key)?);
                }
                if avg {
                    OutValue::Float((n > 0).then(|| sum as f64 / n as f64))
                } else {
                    OutValue::Int((n > 0).then_some(sum))
                }
            }
            Canonical::Float => {
                let mut sum = 0.0_f64;
                for key in values.keys() {
                    sum += ordered::float_value(key)?;
                }
                OutValue::Float((n > 0).then(|| if avg { sum / n as f64 } else { sum }))
            }
            Canonical::Decimal(..) => {
                let mut sum = 0_i128;
                for key in values.keys() {
                    sum = sum.wrapping_add(ordered::decimal_value(key)?);
                }
                if avg {
                    self.decimal_avg(sum, n)?
                } else {
                    OutValue::Decimal((n > 0).then_some(sum))
                }
            }
            Canonical::Bytes => return Err(Error::Internal("a sum of strings".into())),
        })
    }

    /// The results `values` (one per emitted row) as a column of the output type.
    pub(crate) fn column(&self, values: &[OutValue]) -> Result<ArrayRef> {
        let column: ArrayRef = match (self.accumulation, &self.output) {
            (Accumulation::Values(canonical), _)
                if matches!(self.function, Function::Min | Function::Max) =>
            {
                let keys: Vec<Option<&[u8]>> = values
                    .iter()
                    .map(|v| match v {
                        OutValue::Key(k) => k.as_deref(),
                        _ => None,
                    })
                    .collect();
                return ordered::decode(&keys, canonical, &self.output);
            }
            (_, DataType::Int64) => {
                Arc::new(Int64Array::from_iter(values.iter().map(|v| match v {
                    OutValue::Int(v) => *v,
                    _ => None,
                })))
            }
            (_, DataType::Float64) => {
                Arc::new(Float64Array::from_iter(values.iter().map(|v| match v {
                    OutValue::Float(v) => *v,
                    _ => None,
                })))
            }
            (_, DataType::Decimal128(p, s)) => Arc::new(
                values
                    .iter()
                    .map(|v| match v {
                        OutValue::Decimal(v) => *v,
                        _ => None,
                    })
                    .collect::<Decimal128Array>()
                    .with_precision_and_scale(*p, *s)
                    .map_err(|e| Error::arrow("building decimal sums", e))?,
            ),
            (_, other) => {
                return Err(Error::Internal(format!(
                    "group aggregate result of type {other}"
                )));
            }
        };
        Ok(column)
    }
}

/// An aggregate's column of one batch, cast for accumulating.
pub(crate) enum Input {
    /// `COUNT(*)`: every row counts.
    Rows,
    /// `COUNT(x)`: the non-null values count.
    Valid(ArrayRef),
    Int(PrimitiveArray<Int64Type>),
    Float(PrimitiveArray<Float64Type>),
    Decimal(PrimitiveArray<Decimal128Type>),
    /// Ordered keys of the values.
    Keys(Vec<Option<Vec<u8>>>),
}

/// One aggregate's running state in one group.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Acc {
    Count(i64),
    Int { sum: i64, n: i64 },
    Float { sum: f64, n: i64 },
    Decimal { sum: i128, n: i64 },
    Values(BTreeMap<Vec<u8>, i64>),
}

impl Acc {
    /// Adds (`sign` 1) or retracts (`sign` -1) row `row` of `input`.
    pub(crate) fn apply(&mut self, agg: &Aggregate, input: &Input, row: usize, sign: i64) {
        match (self, input) {
            (Acc::Count(n), Input::Rows) => *n += sign,
            (Acc::Count(n), Input::Valid(column)) if column.is_valid(row) => *n += sign,
            (Acc::Int { sum, n }, Input::Int(values)) if values.is_valid(row) => {
                *sum = sum.wrapping_add(values.value(row).wrapping_mul(sign));
                *n += sign;
            }
            (Acc::Float { sum, n }, Input::Float(values)) if values.is_valid(row) => {
                *sum += values.value(row) * sign as f64;
                *n += sign;
            }
            (Acc::Decimal { sum, n }, Input::Decimal(values)) if values.is_valid(row) => {
                *sum = sum.wrapping_add(values.value(row).wrapping_mul(i128::from(sign)));
                *n += sign;
            }
            (Acc::Values(values), Input::Keys(keys)) => {
                let Some(key) = &keys[row] else {
                    return;
                };
                if sign > 0 {
                    *values.entry(key.clone()).or_insert(0) += sign;
                    if !agg.retracting && values.len() > 1 {
                        match agg.function {
                            Function::Min => {
                                values.pop_last();
                            }
                            Function::Max => {
                                values.pop_first();
                            }
                            _ => {}
                        }
                    }
                } else if let Some(count) = values.get_mut(key.as_slice()) {
                    *count += sign;
                    if *count <= 0 {
                        values.remove(key.as_slice());
                    }
                }
            }
            _ => {}
        }
    }

    /// Bytes of memory the accumulator takes, roughly.
    pub(crate) fn size(&self) -> usize {
        match self {
            Acc::Values(values) => values.keys().map(|k| k.len() + 48).sum::<usize>() + 24,
            _ => 32,
        }
    }
}

/// One result value of an aggregate, in its canonical type.
#[derive(Debug, Clone)]
pub(crate) enum OutValue {
    Int(Option<i64>),
    Float(Option<f64>),
    Decimal(Option<i128>),
    Key(Option<Vec<u8>>),
}

impl PartialEq for OutValue {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (OutValue::Int(a), OutValue::Int(b)) => a == b,
            (OutValue::Float(a), OutValue::Float(b)) => a.map(f64::to_bits) == b.map(f64::to_bits),
            (OutValue::Decimal(a), OutValue::Decimal(b)) => a == b,
            (OutValue::Key(a), OutValue::Key(b)) => a == b,
            _ => false,
        }
    }
}

/// One group's rows and accumulators.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Group {
    /// Inserted minus retracted rows: the group exists while this is above zero.
    pub(crate) rows: i64,
    pub(crate) accs: Vec<Acc>,
}

impl Group {
    /// A group with no rows.
    pub(crate) fn empty(aggregates: &[Aggregate]) -> Self {
        Self {
            rows: 0,
            accs: aggregates.iter().map(Aggregate::empty).collect(),
        }
    }

    /// The group's results, one per aggregate.
    pub(crate) fn results(&self, aggregates: &[Aggregate]) -> Result<Vec<OutValue>> {
        aggregates
            .iter()
            .zip(&self.accs)
            .map(|(agg, acc)| agg.result(acc))
            .collect()
    }

    /// Bytes of memory the group takes, roughly.
    pub(crate) fn size(&self) -> usize {
        16 + self.accs.iter().map(Acc::size).sum::<usize>()
    }

    /// The group's bytes in keyed state (format above).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(9 + self.accs.len() * 17);
        out.push(VERSION);
        out.extend_from_slice(&self.rows.to_le_bytes());
        for acc in &self.accs {
            match acc {
                Acc::Count(n) => {
                    out.push(0);
                    out.extend_from_slice(&n.to_le_bytes());
                }
                Acc::Int { sum, n } => {
                    out.push(1);
                    out.extend_from_slice(&sum.to_le_bytes());
                    out.extend_from_slice(&n.to_le_bytes());
                }
                Acc::Float { sum, n } => {
                    out.push(2);
                    out.extend_from_slice(&sum.to_bits().to_le_bytes());
                    out.extend_from_slice(&n.to_le_bytes());
                }
                Acc::Decimal { sum, n } => {
                    out.push(3);
                    out.extend_from_slice(&sum.to_le_bytes());
                    out.extend_from_slice(&n.to_le_bytes());
                }
                Acc::Values(values) => {
                    out.push(4);
                    out.extend_from_slice(&(values.len() as u32).to_le_bytes());
                    for (key, count) in values {
                        out.extend_from_slice(&(key.len() as u32).to_le_bytes());
                        out.extend_from_slice(key);
                        out.extend_from_slice(&count.to_le_bytes());
                    }
                }
            }
        }
        out
    }

    /// A group from its bytes in keyed state, checked against the aggregates.
    ///
    /// # Errors
    /// [`Error::Internal`] for bytes of another version or layout.
    pub(crate) fn decode(bytes: &[u8], aggregates: &[Aggregate]) -> Result<Self> {
        let mut at = Reader(bytes);
        if at.take(1)? != [VERSION] {
            return Err(corrupt("an unknown version"));
        }
        let rows = at.i64()?;
        let mut accs = Vec::with_capacity(aggregates.len());
        for agg in aggregates {
            let tag = at.take(1)?[0];
            let acc = match (tag, agg.accumulation) {
                (0, Accumulation::Count) => Acc::Count(at.i64()?),
                (1, Accumulation::Int) => Acc::Int {
                    sum: at.i64()?,
                    n: at.i64()?,
                },
                (2, Accumulation::Float) => Acc::Float {
                    sum: f64::from_bits(at.i64()? as u64),
                    n: at.i64()?,
                },
                (3, Accumulation::Decimal) => {
                    let sum = i128::from_le_bytes(
                        at.take(16)?
                            .try_into()
                            .map_err(|_| corrupt("a short sum"))?,
                    );
                    Acc::Decimal { sum, n: at.i64()? }
                }
                (4, Accumulation::Values(_)) => {
                    let n = at.u32()?;
                    let mut values = BTreeMap::new();
                    for _ in 0..n {
                        let len = at.u32()? as usize;
                        let key = at.take(len)?.to_vec();
                        values.insert(key, at.i64()?);
                    }
                    Acc::Values(values)
                }
                _ => return Err(corrupt("an accumulator of another aggregate")),
            };
            accs.push(acc);
        }
        if !at.0.is_empty() {
            return Err(corrupt("trailing bytes"));
        }
        Ok(Self { rows, accs })
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(corrupt("a truncated entry"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn i64(&mut self) -> Result<i64> {
        let bytes: [u8; 8] = self
            .take(8)?
            .try_into()
            .map_err(|_| corrupt("a short number"))?;
        Ok(i64::from_le_bytes(bytes))
    }

    fn u32(&mut self) -> Result<u32> {
        let bytes: [u8; 4] = self
            .take(4)?
            .try_into()
            .map_err(|_| corrupt("a short length"))?;
        Ok(u32::from_le_bytes(bytes))
    }
}

fn corrupt(what: &str) -> Error {
    Error::Internal(format!("group aggregate state: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aggs() -> Vec<Aggregate> {
        let resolve = |f, c: Option<(usize, &DataType)>, d| {
            Aggregate::resolve(f, c, d, true).expect("resolves")
        };
        vec![
            resolve(Function::Count, None, false),
            resolve(Function::Sum, Some((0, &DataType::Int32)), false),
            resolve(Function::Avg, Some((1, &DataType::Float32)), false),
            resolve(
                Function::Sum,
                Some((2, &DataType::Decimal128(10, 2))),
                false,
            ),
            resolve(Function::Max, Some((3, &DataType::Utf8)), false),
            resolve(Function::Count, Some((0, &DataType::Int32)), true),
        ]
    }

    #[test]
    fn groups_round_trip_through_their_bytes_and_refuse_damage() {
        let aggs = aggs();
        let mut group = Group::empty(&aggs);
        group.rows = 3;
        group.accs[0] = Acc::Count(3);
        group.accs[1] = Acc::Int { sum: -7, n: 2 };
        group.accs[2] = Acc::Float { sum: 1.5, n: 1 };
        group.accs[3] = Acc::Decimal { sum: 12345, n: 3 };
        group.accs[4] = Acc::Values(BTreeMap::from([(b"zz".to_vec(), 2), (b"a".to_vec(), 1)]));
        group.accs[5] = Acc::Values(BTreeMap::from([(ordered::int_key(4).to_vec(), 3)]));
        let bytes = group.encode();
        assert_eq!(Group::decode(&bytes, &aggs).expect("decodes"), group);
        assert!(Group::decode(&bytes[..bytes.len() - 1], &aggs).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Group::decode(&longer, &aggs).is_err());
        assert!(Group::decode(&bytes, &aggs[..2]).is_err());
    }

    #[test]
    fn results_follow_the_sums_and_values_and_a_retracted_max_falls_back() {
        let aggs = aggs();
        let mut group = Group::empty(&aggs);
        group.accs[4] = Acc::Values(BTreeMap::from([(b"b".to_vec(), 1), (b"c".to_vec(), 1)]));
        let results = group.results(&aggs).expect("results");
        assert_eq!(results[0], OutValue::Int(Some(0)));
        assert_eq!(
            results[1],
            OutValue::Int(None),
            "a sum of no values is null"
        );
        assert_eq!(results[2], OutValue::Float(None));
        assert_eq!(results[4], OutValue::Key(Some(b"c".to_vec())));
        let keys = Input::Keys(vec![Some(b"c".to_vec())]);
        group.accs[4].apply(&aggs[4], &keys, 0, -1);
        assert_eq!(
            aggs[4].result(&group.accs[4]).expect("max"),
            OutValue::Key(Some(b"b".to_vec()))
        );
    }

    #[test]
    fn unsupported_arguments_say_why() {
        let err = Aggregate::resolve(Function::Sum, Some((0, &DataType::Utf8)), false, false)
            .expect_err("a sum of strings");
        assert!(err.contains("SUM and AVG take"), "{err}");
    }

    #[test]
    fn a_decimal_average_has_four_more_digits_of_scale_and_truncates() {
        let decimal = DataType::Decimal128(10, 2);
        let avg =
            Aggregate::resolve(Function::Avg, Some((0, &decimal)), false, true).expect("resolves");
        assert_eq!(avg.output, DataType::Decimal128(14, 6));
        let values = Input::Decimal(Decimal128Array::from(vec![110, -225, 1]));
        let mut acc = avg.empty();
        for row in 0..3 {
            acc.apply(&avg, &values, row, 1);
        }
        // (1.10 - 2.25 + 0.01) / 3 = -0.38 exactly.
        assert_eq!(
            avg.result(&acc).expect("avg"),
            OutValue::Decimal(Some(-380_000))
        );
        acc.apply(&avg, &values, 2, -1);
        // (1.10 - 2.25) / 2 = -0.575.
        assert_eq!(
            avg.result(&acc).expect("avg"),
            OutValue::Decimal(Some(-575_000))
        );
        acc.apply(&avg, &values, 0, 1);
        // (2.20 - 2.25) / 3 = -0.0166666...: truncated toward zero.
        assert_eq!(
            avg.result(&acc).expect("avg"),
            OutValue::Decimal(Some(-16_666))
        );
        let distinct =
            Aggregate::resolve(Function::Avg, Some((0, &decimal)), true, true).expect("resolves");
        let keys = distinct.input(&[Arc::new(
            Decimal128Array::from(vec![110, 110, 20])
                .with_precision_and_scale(10, 2)
                .expect("decimal"),
        ) as ArrayRef]);
        let keys = keys.expect("keys");
        let mut acc = distinct.empty();
        for row in 0..3 {
            acc.apply(&distinct, &keys, row, 1);
        }
        // The distinct values 1.10 and 0.20: 0.65.
        assert_eq!(
            distinct.result(&acc).expect("avg"),
            OutValue::Decimal(Some(650_000))
        );
        let widest = Aggregate::resolve(
            Function::Avg,
            Some((0, &DataType::Decimal128(38, 0))),
            false,
            true,
        )
        .expect("resolves");
        let mut acc = widest.empty();
        let huge = Input::Decimal(Decimal128Array::from(vec![10_i128.pow(37)]));
        acc.apply(&widest, &huge, 0, 1);
        let err = widest.result(&acc).expect_err("does not fit");
        assert!(err.to_string().contains("AVG of a DECIMAL"), "{err}");
    }
}
