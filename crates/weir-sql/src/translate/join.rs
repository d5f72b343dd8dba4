//! `a JOIN b ON a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL ... AND a.ts + INTERVAL ...`:
//! an interval join of two streams, as Flink plans it; and a window join, two window TVFs (or
//! window aggregations) joined on `window_start`, `window_end` and keys, which is an interval
//! join with bounds 0 on the window's time.
//!
//! DataFusion gives the equi-keys as the join's `on` pairs and everything else as its filter.
//! The filter's conjuncts that compare the two sides' time attributes, each maybe shifted by an
//! interval, become the bounds of `right.time - left.time`; what is left is the join's
//! `condition`, evaluated on each pair within the bounds (on an outer join it decides which
//! rows are padded, as in Flink).

use super::{Changes, Stream, Translator, quote, unalias};
use crate::error::Result;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{
    BinaryExpr, Expr, ExprSchemable, Join, JoinType, LogicalPlan, Operator,
};

/// Which side of the join a time attribute belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Left,
    Right,
}

impl Translator<'_> {
    /// Translates a join of two streams into an `interval_join` operator.
    pub(super) fn join(&mut self, join: &Join) -> Result<Stream> {
        if let Some(table) = self.temporal_ref(&join.right) {
            return self.temporal_join(join, table);
        }
        let kind = match join.join_type {
            JoinType::Inner => "inner",
            JoinType::Left => "left",
            JoinType::Right => "right",
            JoinType::Full => "full",
            JoinType::LeftAnti if join.null_aware => {
                return Err(self.unsupported_at(
                    "NOT",
                    "NOT IN over a subquery",
                    "NOT IN is false for every row once the subquery yields a NULL; write NOT \
                     EXISTS with the condition inside the subquery",
                ));
            }
            JoinType::LeftSemi => "semi",
            JoinType::LeftAnti => "anti",
            other => {
                return Err(self.unsupported_at(
                    "JOIN",
                    &format!("a {other} join"),
                    "streams are joined INNER, LEFT, RIGHT or FULL OUTER, or filtered by \
                     EXISTS, NOT EXISTS or IN over another stream",
                ));
            }
        };
        let mut left = self.plan(&join.left)?;
        let mut right = self.plan(&join.right)?;
        // Updating inputs join only as a regular join: their rows are not final, so neither
        // time bounds nor a table read first say when a row is done.
        let updating = left.changes.is_updating() || right.changes.is_updating();
        let (left_schema, right_schema) = (join.left.schema(), join.right.schema());
        // Equi-keys: a column of each side, or an expression (DataFusion's coercion casts a
        // key to the other's type) computed into a column of its own first.
        let mut left_keys = Vec::new();
        let mut right_keys = Vec::new();
        let mut computed: [Vec<String>; 2] = [Vec::new(), Vec::new()];
        for (j, (l, r)) in join.on.iter().enumerate() {
            let (lt, rt) = (
                l.get_type(left_schema)
                    .map_err(|e| self.here().invalid(e.to_string()))?,
                r.get_type(right_schema)
                    .map_err(|e| self.here().invalid(e.to_string()))?,
            );
            if lt != rt {
                return Err(self.here().invalid(format!(
                    "join keys `{l}` ({lt}) and `{r}` ({rt}) have different types: CAST one \
                     to the other's in a subquery"
                )));
            }
            for (side, (e, schema, stream, keys)) in [
                (l, left_schema, &left, &mut left_keys),
                (r, right_schema, &right, &mut right_keys),
            ]
            .into_iter()
            .enumerate()
            {
                match physical(unalias(e), schema, stream) {
                    Some(column) => keys.push(column),
                    None => {
                        let name = format!("__weir_{}key{j}", ["l", "r"][side]);
                        let text = self.sql(unalias(e), schema, stream)?;
                        computed[side].push(format!("{text} AS {}", quote(&name)));
                        keys.push(name);
                    }
                }
            }
        }
        // The computed keys ride along after each side's columns.
        for (side, stream) in [&mut left, &mut right].into_iter().enumerate() {
            if computed[side].is_empty() {
                continue;
            }
            let mut expressions: Vec<String> = stream.columns.iter().map(|c| quote(c)).collect();
            expressions.append(&mut computed[side]);
            stream.node = self.project(&stream.node, expressions);
            stream.scan = None;
        }
        if left_keys.is_empty() {
            return Err(self.unsupported_at(
                "JOIN",
                "a join without an equality of keys",
                "join streams on equal keys (a.k = b.k) and a time bound",
            ));
        }
        // A window join: both sides windowed, their bounds among the equi-keys. Rows of one
        // window share their window time, so it is an interval join with bounds 0 on it, keyed
        // by the window and the keys, and a row is late once its window has ended.
        let window_times = match (&left.window, &right.window) {
            (Some(l), Some(r))
                if [(&l.start, &r.start), (&l.end, &r.end)]
                    .iter()
                    .all(|(a, b)| {
                        left_keys
                            .iter()
                            .zip(&right_keys)
                            .any(|(x, y)| x == *a && y == *b)
                    }) =>
            {
                // Each side's `window_time` (its end - 1 ms) where it still has it, else its
                // end: the bound on their difference makes up for it.
                let time = |b: &super::Bounds| match &b.time {
                    Some(t) => (t.clone(), -1),
                    None => (b.end.clone(), 0),
                };
                let ((lt, lo), (rt, ro)) = (time(l), time(r));
                Some((lt, rt, ro - lo))
            }
            _ => None,
        };
        let mut lower: Option<i64> = None;
        let mut upper: Option<i64> = None;
        let mut residual: Vec<Expr> = Vec::new();
        let window_join = window_times.is_some();
        let times = if updating {
            None
        } else if let Some((l, r, offset)) = window_times {
            lower = Some(offset);
            upper = Some(offset);
            Some((l, r))
        } else if !left.rowtimes.is_empty() && !right.rowtimes.is_empty() {
            // Time bounds and the residual condition. A side may have several time attributes
            // (a join's output): the first one a bound compares is the side's time, and a
            // comparison of another one is part of the residual condition.
            let mut used: [Option<String>; 2] = [None, None];
            if let Some(filter) = &join.filter {
                for conjunct in split_conjunction(filter) {
                    let time_of = |e: &Expr| -> Option<(Side, i64, String)> {
                        let (column, shift) = shifted_column(e)?;
                        for (side, schema, stream) in [
                            (Side::Left, left_schema, &left),
                            (Side::Right, right_schema, &right),
                        ] {
                            if schema.index_of_column(column).is_err() {
                                continue;
                            }
                            let p = physical(&Expr::Column(column.clone()), schema, stream)?;
                            let slot = &used[side as usize];
                            if stream.rowtimes.contains(&p) && slot.as_ref().is_none_or(|u| *u == p)
                            {
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
            match used {
                [Some(l), Some(r)] => Some((l, r)),
                _ => None,
            }
        } else {
            None
        };
        let how = match (times, lower, upper) {
            (Some((left_time, right_time)), Some(lower), Some(upper)) => How::Interval {
                left_time,
                right_time,
                lower,
                upper,
            },
            _ if !updating && (self.is_bounded(&join.right) || self.is_bounded(&join.left)) => {
                // A bounded table, read in full first: every condition but the keys is a
                // filter after the join. The table's unmatched rows are never final while the
                // stream goes on, so it is a side that is not padded; of two bounded sides, the
                // right one unless the join keeps its unmatched rows.
                residual = join
                    .filter
                    .as_ref()
                    .map(|f| split_conjunction(f).into_iter().cloned().collect())
                    .unwrap_or_default();
                let bounded = [self.is_bounded(&join.left), self.is_bounded(&join.right)];
                let table = match kind {
                    "semi" | "anti" if bounded[1] => 1,
                    "semi" | "anti" => {
                        return Err(self.unsupported_at(
                            "EXISTS",
                            "a semi or anti join of a bounded table with a stream",
                            "a table row's match may come with any later stream row; filter the \
                             stream by the table instead (the table in the subquery)",
                        ));
                    }
                    "inner" if bounded[1] => 1,
                    "inner" | "right" if bounded[0] => 0,
                    "left" if bounded[1] => 1,
                    _ => {
                        return Err(self.unsupported_at(
                            "JOIN",
                            "an outer join that keeps a bounded table's unmatched rows",
                            "a table row without a match so far may match a stream row still \
                             to come; keep the stream's unmatched rows (the stream's side \
                             outer) or join INNER",
                        ));
                    }
                };
                How::Table {
                    stream: 1 - table,
                    join: match kind {
                        "semi" | "anti" => kind,
                        "inner" => "inner",
                        _ => "left",
                    },
                }
            }
            _ if matches!(kind, "semi" | "anti") => {
                return Err(self.unsupported_at(
                    "EXISTS",
                    "EXISTS, NOT EXISTS or IN over a stream without a time bound",
                    "a regular semi or anti join is not there yet; bound the times (an \
                     interval join) or filter by a bounded table",
                ));
            }
            _ => {
                // A regular join: every condition but the keys decides which pairs match.
                residual = join
                    .filter
                    .as_ref()
                    .map(|f| split_conjunction(f).into_iter().cloned().collect())
                    .unwrap_or_default();
                How::Regular
            }
        };
        // Each side reaches the join with its plan's columns and what the join reads (computed
        // keys, a window time the query does not select) and nothing else, so columns another
        // query reads from the same source cannot collide; the right side's get names of their
        // own where the left has the same.
        let (left_time, right_time) = match &how {
            How::Interval {
                left_time,
                right_time,
                ..
            } => (Some(left_time), Some(right_time)),
            How::Table { .. } | How::Regular => (None, None),
        };
        let left_wanted = unique(left.columns.iter().chain(&left_keys).chain(left_time));
        let right_wanted = unique(right.columns.iter().chain(&right_keys).chain(right_time));
        let sides = self.join_sides(&mut left, &right, left_wanted, right_wanted);
        let (left_physical, right_physical, right_names, right_node) = (
            &sides.left_physical,
            &sides.right_physical,
            &sides.right_names,
            sides.right_node.clone(),
        );
        let rename = |c: &String| sides.rename(c);
        let renamed: Vec<String> = right.columns.iter().map(rename).collect();
        let right_keys: Vec<String> = right_keys.iter().map(rename).collect();
        // The rest of an interval join's condition is the operator's: it decides which pairs
        // match, so on an outer join which rows are padded. After a join with a bounded table
        // it is a filter, on an inner join only.
        let condition = match &how {
            How::Interval { .. } | How::Regular if !residual.is_empty() => {
                let both = left_schema
                    .join(right_schema)
                    .map_err(|e| self.here().invalid(e.to_string()))?;
                let pair = Stream {
                    node: String::new(),
                    columns: left.columns.iter().chain(&renamed).cloned().collect(),
                    marker: false,
                    changes: Changes::InsertOnly,
                    scan: None,
                    rowtimes: Vec::new(),
                    window: None,
                };
                let predicate = std::mem::take(&mut residual)
                    .into_iter()
                    .reduce(Expr::and)
                    .unwrap_or_else(|| datafusion::logical_expr::lit(true));
                Some(self.sql(&predicate, &both, &pair)?)
            }
            _ => None,
        };
        if !residual.is_empty() && kind != "inner" {
            return Err(self.unsupported_at(
                "JOIN",
                "a condition other than keys on an outer, semi or anti join with a bounded table",
                "move it to a WHERE after the join, or into a subquery of one side",
            ));
        }
        // An interval join's rows keep both times as time attributes: a pair is emitted
        // with both at or after the output watermark (the operator holds it back by the
        // bounds' reach), so a window can follow. A window join's rows are results of their
        // windows, and a table join's stream rows are not checked against the watermark, so
        // their output has none (in Flink neither has).
        let rowtimes: Vec<String> = match &how {
            How::Interval { .. } if window_join => Vec::new(),
            How::Interval { .. } if matches!(kind, "semi" | "anti") => {
                left_time.into_iter().cloned().collect()
            }
            How::Interval { .. } => left_time
                .into_iter()
                .cloned()
                .chain(right_time.map(rename))
                .collect(),
            How::Table { .. } | How::Regular => Vec::new(),
        };
        let regular = matches!(how, How::Regular);
        let name = match how {
            How::Interval {
                left_time,
                right_time,
                lower,
                upper,
            } => {
                let name = self.next_name("interval_join");
                let mut options = serde_json::json!({
                    "join": kind,
                    "left_keys": left_keys,
                    "right_keys": right_keys,
                    "left_time": left_time,
                    "right_time": rename(&right_time),
                    "lower": lower,
                    "upper": upper,
                });
                if let Some(condition) = condition {
                    options["condition"] = serde_json::json!(condition);
                }
                self.add_buffer_bytes(&mut options);
                let late = self.row_late_option("JOIN", "a join")?;
                if let Some(late) = &late {
                    options["late"] = late.clone();
                }
                self.job.operator_of_inputs(
                    &name,
                    "interval_join",
                    &[
                        (left.node.clone(), left_keys.clone()),
                        (right_node, right_keys.clone()),
                    ],
                    options,
                );
                if late.is_some() {
                    // Each input's late rows under the names its own table gives them.
                    let left_columns = super::late::same_names(left_physical);
                    self.route_late(&format!("{name}.late_left"), &left_columns)?;
                    let right_columns: Vec<(String, String)> = right_physical
                        .iter()
                        .cloned()
                        .zip(right_names.iter().cloned())
                        .collect();
                    self.route_late(&format!("{name}.late_right"), &right_columns)?;
                }
                name
            }
            How::Regular => {
                let name = self.next_name("regular_join");
                let mut options = serde_json::json!({
                    "join": kind,
                    "left_keys": left_keys,
                    "right_keys": right_keys,
                });
                self.add_state_ttl(&mut options);
                self.add_buffer_bytes(&mut options);
                if let Some(condition) = condition {
                    options["condition"] = serde_json::json!(condition);
                }
                self.job.operator_of_inputs(
                    &name,
                    "regular_join",
                    &[
                        (left.node.clone(), left_keys.clone()),
                        (right_node, right_keys.clone()),
                    ],
                    options,
                );
                name
            }
            How::Table { stream, join } => {
                let name = self.next_name("table_join");
                let mut inputs = [
                    (left.node.clone(), left_keys.clone()),
                    (right_node, right_keys.clone()),
                ];
                if stream == 1 {
                    inputs.swap(0, 1);
                }
                let [(_, stream_keys), (_, table_keys)] = &inputs;
                let options = serde_json::json!({
                    "join": join,
                    "stream_keys": stream_keys,
                    "table_keys": table_keys,
                });
                self.job
                    .operator_of_inputs(&name, "table_join", &inputs, options);
                name
            }
        };
        let mut columns = left.columns.clone();
        if !matches!(kind, "semi" | "anti") {
            columns.extend(renamed);
        }
        // A regular join's results change unless both inputs are final and it is INNER: an
        // outer join's padded rows are retracted when a match comes.
        let changes = if regular && (updating || kind != "inner") {
            Changes::Updating {
                key: None,
                since: super::Since::new("JOIN", "a regular join"),
            }
        } else {
            Changes::InsertOnly
        };
        let stream = Stream {
            node: name,
            columns,
            marker: false,
            changes,
            scan: None,
            rowtimes,
            window: None,
        };
        if residual.is_empty() {
            return Ok(stream);
        }
        let predicate = residual
            .into_iter()
            .reduce(Expr::and)
            .unwrap_or_else(|| datafusion::logical_expr::lit(true));
        let text = self.sql(&predicate, &join.schema, &stream)?;
        let node = self.next_name("filter");
        self.job.operator(
            &node,
            "filter",
            &stream.node,
            None,
            serde_json::json!({ "predicate": text }),
        );
        Ok(Stream { node, ..stream })
    }
}

/// The two inputs of a join as the operator reads them: each side's physical columns (what it
/// selects and what the join reads), the right's under names of their own where the left has
/// the same, and the node of the right's renaming projection.
pub(super) struct JoinSides {
    pub(super) left_physical: Vec<String>,
    pub(super) right_physical: Vec<String>,
    pub(super) right_names: Vec<String>,
    pub(super) right_node: String,
}

impl JoinSides {
    /// The name a physical column of the right side has after the renaming.
    pub(super) fn rename(&self, c: &String) -> String {
        self.right_physical
            .iter()
            .position(|x| x == c)
            .map_or_else(|| c.clone(), |i| self.right_names[i].clone())
    }
}

impl Translator<'_> {
    /// Projects `left` to `left_physical` (its node is replaced) and `right` to
    /// `right_physical` under names unique against the left's, so that columns another query
    /// reads from the same source cannot collide.
    pub(super) fn join_sides(
        &mut self,
        left: &mut Stream,
        right: &Stream,
        left_physical: Vec<String>,
        right_physical: Vec<String>,
    ) -> JoinSides {
        let expressions = left_physical.iter().map(|c| quote(c)).collect();
        left.node = self.project(&left.node, expressions);
        let right_names: Vec<String> = right_physical
            .iter()
            .map(|c| {
                let mut name = c.clone();
                while left_physical.contains(&name) {
                    name = format!("{name}_r");
                }
                name
            })
            .collect();
        let expressions: Vec<String> = right_physical
            .iter()
            .zip(&right_names)
            .map(|(from, to)| format!("{} AS {}", quote(from), quote(to)))
            .collect();
        let right_node = self.project(&right.node, expressions);
        JoinSides {
            left_physical,
            right_physical,
            right_names,
            right_node,
        }
    }
}

impl Translator<'_> {
    /// Whether every table `plan` reads is bounded (and no window TVF is among them).
    fn is_bounded(&self, plan: &LogicalPlan) -> bool {
        let mut bounded = true;
        let _ = plan.apply(|node| {
            if let LogicalPlan::TableScan(scan) = node {
                let table = scan.table_name.table();
                let plain = source_as_provider(&scan.source).is_ok_and(|p| {
                    (p.as_ref() as &dyn std::any::Any)
                        .downcast_ref::<crate::tvf::StreamTable>()
                        .is_some()
                });
                bounded &= plain && self.job.bounded(table);
            }
            Ok(TreeNodeRecursion::Continue)
        });
        bounded
    }
}

/// How a join runs.
enum How {
    /// An `interval_join` (also a window join) on these time columns and bounds.
    Interval {
        left_time: String,
        right_time: String,
        lower: i64,
        upper: i64,
    },
    /// A `regular_join`: equal keys at any distance in time, all of both inputs kept.
    Regular,
    /// A `table_join` of a stream with a bounded table; `stream` is the stream's side (0
    /// left); `join` the operator's kind (`inner`, `left`: the stream's unmatched rows too,
    /// `semi`, `anti`).
    Table { stream: usize, join: &'static str },
}

/// `columns` without repeats, in their order.
pub(super) fn unique<'a>(columns: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in columns {
        if !out.contains(c) {
            out.push(c.clone());
        }
    }
    out
}

/// The physical column of `stream` a plan column of `schema` names.
pub(super) fn physical(expr: &Expr, schema: &DFSchema, stream: &Stream) -> Option<String> {
    let Expr::Column(c) = expr else { return None };
    let i = schema.index_of_column(c).ok()?;
    stream.columns.get(i).cloned()
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
