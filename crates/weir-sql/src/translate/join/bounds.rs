//! The time bounds of an interval join: a window join's (bounds 0 on the windows' time), or
//! those the join's filter sets on `right.time - left.time` with conjuncts that compare the two
//! sides' time attributes, each maybe shifted by an interval.

use super::{Interval, physical};
use crate::translate::{Bounds, Stream, unalias};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{BinaryExpr, Expr, Join, Operator};

/// Which side of the join a time attribute belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Left,
    Right,
}

/// The join as an interval join, with the conjuncts of its filter that are not its bounds,
/// when neither input updates and its times are bounded: a window join, or a join whose filter
/// bounds the difference of the two sides' time attributes from below and above.
pub(super) fn interval(
    join: &Join,
    updating: bool,
    left: &Stream,
    right: &Stream,
    left_keys: &[String],
    right_keys: &[String],
) -> Option<(Interval, Vec<Expr>)> {
    if updating {
        return None;
    }
    if let Some((left_time, right_time, offset)) = window_times(left, right, left_keys, right_keys)
    {
        let interval = Interval {
            left_time,
            right_time,
            lower: offset,
            upper: offset,
            window: true,
        };
        // What the ON clause says besides the keys and the windows is the pairs' condition.
        let residual = join
            .filter
            .as_ref()
            .map(|f| split_conjunction(f).into_iter().cloned().collect())
            .unwrap_or_default();
        return Some((interval, residual));
    }
    if left.rowtimes.is_empty() || right.rowtimes.is_empty() {
        return None;
    }
    time_bounds(join, left, right)
}

/// A window join: both sides windowed, their bounds among the equi-keys. Rows of one window
/// share their window time, so it is an interval join with bounds 0 on it, keyed by the window
/// and the keys, and a row is late once its window has ended. Returns each side's time and the
/// bound that makes up for their difference.
fn window_times(
    left: &Stream,
    right: &Stream,
    left_keys: &[String],
    right_keys: &[String],
) -> Option<(String, String, i64)> {
    match (&left.window, &right.window) {
        (Some(l), Some(r))
            if [(&l.start, &r.start), (&l.end, &r.end)]
                .iter()
                .all(|(a, b)| {
                    left_keys
                        .iter()
                        .zip(right_keys)
                        .any(|(x, y)| x == *a && y == *b)
                }) =>
        {
            // Each side's `window_time` (its end - 1 ms) where it still has it, else its
            // end: the bound on their difference makes up for it.
            let time = |b: &Bounds| match &b.time {
                Some(t) => (t.clone(), -1),
                None => (b.end.clone(), 0),
            };
            let ((lt, lo), (rt, ro)) = (time(l), time(r));
            Some((lt, rt, ro - lo))
        }
        _ => None,
    }
}

/// The time bounds the join's filter sets, and its other conjuncts (the residual condition),
/// when it bounds the difference from both sides. A side may have several time attributes (a
/// join's output): the first one a bound compares is the side's time, and a comparison of
/// another one is part of the residual condition.
fn time_bounds(join: &Join, left: &Stream, right: &Stream) -> Option<(Interval, Vec<Expr>)> {
    let (left_schema, right_schema) = (join.left.schema(), join.right.schema());
    let mut lower: Option<i64> = None;
    let mut upper: Option<i64> = None;
    let mut residual: Vec<Expr> = Vec::new();
    let mut used: [Option<String>; 2] = [None, None];
    if let Some(filter) = &join.filter {
        for conjunct in split_conjunction(filter) {
            let time_of = |e: &Expr| -> Option<(Side, i64, String)> {
                let (column, shift) = shifted_column(e)?;
                for (side, schema, stream) in [
                    (Side::Left, left_schema, left),
                    (Side::Right, right_schema, right),
                ] {
                    if schema.index_of_column(column).is_err() {
                        continue;
                    }
                    let p = physical(&Expr::Column(column.clone()), schema, stream)?;
                    let slot = &used[side as usize];
                    if stream.rowtimes.contains(&p) && slot.as_ref().is_none_or(|u| *u == p) {
                        return Some((side, shift, p));
                    }
                }
                None
            };
            match bound(conjunct, time_of) {
                Some((b, [l, r])) => {
                    used = [Some(l), Some(r)];
                    match b {
                        Bound::Lower(v) => lower = Some(lower.map_or(v, |l| l.max(v))),
                        Bound::Upper(v) => upper = Some(upper.map_or(v, |u| u.min(v))),
                    }
                }
                None => residual.push(conjunct.clone()),
            }
        }
    }
    match (used, lower, upper) {
        ([Some(left_time), Some(right_time)], Some(lower), Some(upper)) => {
            let interval = Interval {
                left_time,
                right_time,
                lower,
                upper,
                window: false,
            };
            Some((interval, residual))
        }
        _ => None,
    }
}

/// A bound on `right.time - left.time`, in ms, both inclusive.
enum Bound {
    Lower(i64),
    Upper(i64),
}

/// `conjunct` as a bound on `right.time - left.time`, and the physical time columns of the
/// left and right sides it compares, when it compares the two sides' time attributes
/// (`time_of` names the side, shift and column of an operand: a time column plus or minus an
/// interval).
fn bound(
    conjunct: &Expr,
    time_of: impl Fn(&Expr) -> Option<(Side, i64, String)>,
) -> Option<(Bound, [String; 2])> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = conjunct else {
        return None;
    };
    let (a_side, a_shift, a_column) = time_of(left)?;
    let (b_side, b_shift, b_column) = time_of(right)?;
    if a_side == b_side {
        return None;
    }
    // a + a_shift  op  b + b_shift  <=>  a - b  op  b_shift - a_shift
    let c = b_shift.checked_sub(a_shift)?;
    // As `right - left op' v`: flip when `a` is the left side.
    let (op, v, columns) = if a_side == Side::Right {
        (*op, c, [b_column, a_column])
    } else {
        (flip(*op)?, c.checked_neg()?, [a_column, b_column])
    };
    let bound = match op {
        Operator::GtEq => Bound::Lower(v),
        Operator::Gt => Bound::Lower(v.checked_add(1)?),
        Operator::LtEq => Bound::Upper(v),
        Operator::Lt => Bound::Upper(v.checked_sub(1)?),
        _ => return None,
    };
    Some((bound, columns))
}

/// `a op b` as `b op' a`.
fn flip(op: Operator) -> Option<Operator> {
    Some(match op {
        Operator::Gt => Operator::Lt,
        Operator::GtEq => Operator::LtEq,
        Operator::Lt => Operator::Gt,
        Operator::LtEq => Operator::GtEq,
        _ => return None,
    })
}

/// `column`, `column + interval` or `column - interval`, with the interval in ms.
fn shifted_column(e: &Expr) -> Option<(&datafusion::common::Column, i64)> {
    match unalias(e) {
        Expr::Column(c) => Some((c, 0)),
        Expr::Cast(cast) => shifted_column(&cast.expr),
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (c, base) = shifted_column(left)?;
            let ms = interval_ms(unalias(right))?;
            match op {
                Operator::Plus => Some((c, base.checked_add(ms)?)),
                Operator::Minus => Some((c, base.checked_sub(ms)?)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// An interval literal's length in ms (no months: their length varies).
fn interval_ms(e: &Expr) -> Option<i64> {
    let Expr::Literal(value, _) = e else {
        return None;
    };
    match value {
        ScalarValue::IntervalDayTime(Some(v)) => i64::from(v.days)
            .checked_mul(86_400_000)?
            .checked_add(i64::from(v.milliseconds)),
        ScalarValue::IntervalMonthDayNano(Some(v)) if v.months == 0 => {
            let nanos = i128::from(v.days) * 86_400_000_000_000 + i128::from(v.nanoseconds);
            (nanos % 1_000_000 == 0)
                .then(|| i64::try_from(nanos / 1_000_000).ok())
                .flatten()
        }
        ScalarValue::Int64(Some(v)) => Some(*v),
        _ => None,
    }
}
