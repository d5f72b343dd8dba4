//! What an OVER aggregation keeps per partition between rows: the rows of the frame still
//! needed (their times and argument values) for a bounded frame, or running accumulators for an
//! unbounded one; and how the aggregates are folded over them.
//!
//! Values are `i64` for integers and times, and the bits of an `f64` for floating-point
//! numbers ([`Kind`]); sums wrap on overflow as Flink's `BIGINT` does, never panicking.

use std::collections::VecDeque;
use weir_api::{Error, Result};

/// How an aggregate's values are added and compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `i64` values (integers, times as milliseconds).
    Int,
    /// `f64` values, stored as their bits.
    Float,
}

/// An aggregate function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Function {
    /// `COUNT(*)`: rows.
    CountRows,
    /// `COUNT(x)`: non-null values.
    Count,
    Sum,
    Min,
    Max,
    Avg,
}

/// One aggregate's running state over a set of values.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Acc {
    rows: i64,
    count: i64,
    /// `i64` sum, or the bits of an `f64` sum.
    sum: i64,
    min: Option<i64>,
    max: Option<i64>,
}

/// Bytes of one encoded [`Acc`].
const ACC_BYTES: usize = 8 * 3 + 9 * 2;

impl Acc {
    /// Adds one row's value (`None`: null).
    pub(crate) fn add(&mut self, kind: Kind, value: Option<i64>) {
        self.rows += 1;
        let Some(v) = value else { return };
        self.count += 1;
        match kind {
            Kind::Int => {
                self.sum = self.sum.wrapping_add(v);
                self.min = Some(self.min.map_or(v, |m| m.min(v)));
                self.max = Some(self.max.map_or(v, |m| m.max(v)));
            }
            Kind::Float => {
                let f = f64::from_bits(v as u64);
                let sum = if self.count == 1 {
                    f
                } else {
                    f64::from_bits(self.sum as u64) + f
                };
                self.sum = sum.to_bits() as i64;
                let pick = |old: Option<i64>, better: std::cmp::Ordering| match old {
                    Some(m) if f64::from_bits(m as u64).total_cmp(&f) != better => Some(m),
                    _ => Some(v),
                };
                self.min = pick(self.min, std::cmp::Ordering::Greater);
                self.max = pick(self.max, std::cmp::Ordering::Less);
            }
        }
    }

    /// The aggregate's value: an `i64` (counts, integer sums, minimums and maximums), or an
    /// `f64`'s bits (float sums, minimums, maximums, every average); `None` without values.
    pub(crate) fn result(&self, function: Function, kind: Kind) -> Option<i64> {
        match function {
            Function::CountRows => Some(self.rows),
            Function::Count => Some(self.count),
            _ if self.count == 0 => None,
            Function::Sum => Some(self.sum),
            Function::Min => self.min,
            Function::Max => self.max,
            Function::Avg => {
                let sum = match kind {
                    Kind::Int => self.sum as f64,
                    Kind::Float => f64::from_bits(self.sum as u64),
                };
                Some((sum / self.count as f64).to_bits() as i64)
            }
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        for v in [self.rows, self.count, self.sum] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [self.min, self.max] {
            out.push(u8::from(v.is_some()));
            out.extend_from_slice(&v.unwrap_or(0).to_le_bytes());
        }
    }

    fn decode(bytes: &mut &[u8]) -> Result<Self> {
        let rows = take_i64(bytes)?;
        let count = take_i64(bytes)?;
        let sum = take_i64(bytes)?;
        let mut optional = || -> Result<Option<i64>> {
            let (&flag, rest) = bytes.split_first().ok_or_else(corrupt)?;
            *bytes = rest;
            let v = take_i64(bytes)?;
            Ok((flag == 1).then_some(v))
        };
        let min = optional()?;
        let max = optional()?;
        Ok(Self {
            rows,
            count,
            sum,
            min,
            max,
        })
    }
}

/// A partition's state between rows.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum History {
    /// Bounded frames: the rows still needed, oldest first, each its time and one value per
    /// aggregate.
    Rows(VecDeque<(i64, Vec<Option<i64>>)>),
    /// Unbounded frames: one accumulator per aggregate over every row so far.
    Running(Vec<Acc>),
}

impl History {
    /// The state of a partition without rows yet.
    pub(crate) fn empty(bounded: bool, aggregates: usize) -> Self {
        if bounded {
            History::Rows(VecDeque::new())
        } else {
            History::Running(vec![Acc::default(); aggregates])
        }
    }

    /// The state payload.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            History::Rows(rows) => {
                out.push(0);
                out.extend_from_slice(&(rows.len() as u64).to_le_bytes());
                for (ts, values) in rows {
                    out.extend_from_slice(&ts.to_le_bytes());
                    for v in values {
                        out.push(u8::from(v.is_some()));
                        out.extend_from_slice(&v.unwrap_or(0).to_le_bytes());
                    }
                }
            }
            History::Running(accs) => {
                out.push(1);
                out.reserve(accs.len() * ACC_BYTES);
                for acc in accs {
                    acc.encode(&mut out);
                }
            }
        }
        out
    }

    /// Reads [`History::encode`]'s payload of a partition with `aggregates` aggregates.
    pub(crate) fn decode(mut bytes: &[u8], aggregates: usize) -> Result<Self> {
        let (&tag, rest) = bytes.split_first().ok_or_else(corrupt)?;
        bytes = rest;
        match tag {
            0 => {
                let n = take_i64(&mut bytes)? as u64;
                // Each row takes at least 8 bytes: a corrupt count cannot allocate much.
                if n > (bytes.len() / 8) as u64 {
                    return Err(corrupt());
                }
                let mut rows = VecDeque::with_capacity(n as usize);
                for _ in 0..n {
                    let ts = take_i64(&mut bytes)?;
                    let mut values = Vec::with_capacity(aggregates);
                    for _ in 0..aggregates {
                        let (&flag, rest) = bytes.split_first().ok_or_else(corrupt)?;
                        bytes = rest;
                        let v = take_i64(&mut bytes)?;
                        values.push((flag == 1).then_some(v));
                    }
                    rows.push_back((ts, values));
                }
                Ok(History::Rows(rows))
            }
            1 => (0..aggregates)
                .map(|_| Acc::decode(&mut bytes))
                .collect::<Result<Vec<_>>>()
                .map(History::Running),
            _ => Err(corrupt()),
        }
    }
}

fn take_i64(bytes: &mut &[u8]) -> Result<i64> {
    let (v, rest) = bytes.split_first_chunk::<8>().ok_or_else(corrupt)?;
    *bytes = rest;
    Ok(i64::from_le_bytes(*v))
}

fn corrupt() -> Error {
    Error::Internal("over aggregation state: a corrupt entry".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float(v: f64) -> Option<i64> {
        Some(v.to_bits() as i64)
    }

    #[test]
    fn integer_aggregates_skip_nulls_and_sums_wrap() {
        let mut acc = Acc::default();
        for v in [Some(3), None, Some(-5), Some(i64::MAX)] {
            acc.add(Kind::Int, v);
        }
        assert_eq!(acc.result(Function::CountRows, Kind::Int), Some(4));
        assert_eq!(acc.result(Function::Count, Kind::Int), Some(3));
        assert_eq!(
            acc.result(Function::Sum, Kind::Int),
            Some(i64::MAX.wrapping_add(-2))
        );
        assert_eq!(acc.result(Function::Min, Kind::Int), Some(-5));
        assert_eq!(acc.result(Function::Max, Kind::Int), Some(i64::MAX));
        let empty = Acc::default();
        assert_eq!(empty.result(Function::Sum, Kind::Int), None);
        assert_eq!(empty.result(Function::Count, Kind::Int), Some(0));
    }

    #[test]
    fn float_aggregates() {
        let mut acc = Acc::default();
        for v in [1.5, -2.0, 4.0] {
            acc.add(Kind::Float, float(v));
        }
        let f = |r: Option<i64>| f64::from_bits(r.unwrap() as u64);
        assert_eq!(f(acc.result(Function::Sum, Kind::Float)), 3.5);
        assert_eq!(f(acc.result(Function::Min, Kind::Float)), -2.0);
        assert_eq!(f(acc.result(Function::Max, Kind::Float)), 4.0);
        assert_eq!(f(acc.result(Function::Avg, Kind::Float)), 3.5 / 3.0);
    }

    #[test]
    fn histories_round_trip_and_cut_payloads_are_errors() {
        let rows = History::Rows(VecDeque::from(vec![
            (5, vec![Some(1), None]),
            (7, vec![None, Some(-3)]),
        ]));
        let mut acc = Acc::default();
        acc.add(Kind::Int, Some(9));
        let running = History::Running(vec![acc, Acc::default()]);
        for h in [rows, running] {
            let bytes = h.encode();
            assert_eq!(History::decode(&bytes, 2).unwrap(), h);
            assert!(History::decode(&bytes[..bytes.len() - 1], 2).is_err());
        }
        assert!(History::decode(&[0, 255, 255, 255, 255, 255, 255, 255, 127], 1).is_err());
    }
}
