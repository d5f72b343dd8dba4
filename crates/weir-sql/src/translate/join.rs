//! `a JOIN b ON a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL ... AND a.ts + INTERVAL ...`:
//! an interval join of two streams, as Flink plans it; and a window join, two window TVFs (or
//! window aggregations) joined on `window_start`, `window_end` and keys, which is an interval
//! join with bounds 0 on the window's time.
//!
//! DataFusion gives the equi-keys as the join's `on` pairs and everything else as its filter.
//! The filter's conjuncts that compare the two sides' time attributes, each maybe shifted by an
//! interval, become the bounds of `right.time - left.time` (`bounds`); what is left is the
//! join's `condition`, evaluated on each pair within the bounds (on an outer join it decides
//! which rows are padded, as in Flink). Without time bounds, a join with a bounded table is a
//! `table_join` and any other a `regular_join` (`operators`, which writes the three operators).

use super::{Changes, Stream, Translator, quote, unalias};
use crate::error::Result;
use datafusion::common::DFSchema;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::{Expr, ExprSchemable, Join, JoinType, LogicalPlan};

mod bounds;
mod operators;

impl Translator<'_> {
    /// Translates a join of two streams into an `interval_join` (also a window join), a
    /// `table_join` or a `regular_join` operator, and a filter after it of what of the
    /// condition the operator does not evaluate; a temporal join has a module of its own.
    pub(super) fn join(&mut self, join: &Join) -> Result<Stream> {
        if let Some(table) = self.temporal_ref(&join.right) {
            return self.temporal_join(join, table);
        }
        let kind = self.join_kind(join)?;
        let mut left = self.plan(&join.left)?;
        let mut right = self.plan(&join.right)?;
        // Updating inputs join only as a regular join: their rows are not final, so neither
        // time bounds nor a table read first say when a row is done.
        let updating = left.changes.is_updating() || right.changes.is_updating();
        let (left_keys, right_keys) = self.join_keys(join, &mut left, &mut right)?;
        let interval = bounds::interval(join, updating, &left, &right, &left_keys, &right_keys);
        let (how, mut residual) = self.join_how(join, kind, updating, interval)?;
        // Each side reaches the join with its plan's columns and what the join reads (computed
        // keys, a window time the query does not select) and nothing else, so columns another
        // query reads from the same source cannot collide; the right side's get names of their
        // own where the left has the same.
        let (left_time, right_time) = match &how {
            How::Interval(interval) => (Some(&interval.left_time), Some(&interval.right_time)),
            How::Table { .. } | How::Regular => (None, None),
        };
        let left_wanted = unique(left.columns.iter().chain(&left_keys).chain(left_time));
        let right_wanted = unique(right.columns.iter().chain(&right_keys).chain(right_time));
        let sides = self.join_sides(&mut left, &right, left_wanted, right_wanted);
        let renamed: Vec<String> = right.columns.iter().map(|c| sides.rename(c)).collect();
        let right_keys: Vec<String> = right_keys.iter().map(|c| sides.rename(c)).collect();
        let condition = self.join_condition(join, &how, &mut residual, &left, &renamed)?;
        if !residual.is_empty() && kind != "inner" {
            return Err(self.unsupported_at(
                "JOIN",
                "a condition other than keys on an outer, semi or anti join with a bounded table",
                "move it to a WHERE after the join, or into a subquery of one side",
            ));
        }
        let rowtimes = join_rowtimes(&how, kind, &sides);
        let regular = matches!(how, How::Regular);
        let inputs = [
            (left.node.clone(), left_keys),
            (sides.right_node.clone(), right_keys),
        ];
        let name = self.join_operator(how, kind, inputs, condition, &sides)?;
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
        self.residual_filter(join, stream, residual)
    }

    /// The operators' name of the join's type (`inner`, `left`, `right`, `full`, `semi`,
    /// `anti`); NOT IN over a subquery and other types are refused.
    fn join_kind(&self, join: &Join) -> Result<&'static str> {
        Ok(match join.join_type {
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
        })
    }

    /// The equi-keys of each side as physical columns: a column of the side, or an expression
    /// (DataFusion's coercion casts a key to the other's type) computed into a column of its own
    /// first, after the side's columns (its node is replaced). Keys of different types and a
    /// join without keys are refused.
    fn join_keys(
        &mut self,
        join: &Join,
        left: &mut Stream,
        right: &mut Stream,
    ) -> Result<(Vec<String>, Vec<String>)> {
        let (left_schema, right_schema) = (join.left.schema(), join.right.schema());
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
                (l, left_schema, &*left, &mut left_keys),
                (r, right_schema, &*right, &mut right_keys),
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
        for (side, stream) in [left, right].into_iter().enumerate() {
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
        Ok((left_keys, right_keys))
    }

    /// The rest of an interval or regular join's condition (taken out of `residual`) as SQL
    /// over the pair's columns, the left's and then the right's `renamed`: the operator's, it
    /// decides which pairs match, so on an outer join which rows are padded. After a join with
    /// a bounded table it stays in `residual`, a filter after the join, on an inner join only.
    fn join_condition(
        &self,
        join: &Join,
        how: &How,
        residual: &mut Vec<Expr>,
        left: &Stream,
        renamed: &[String],
    ) -> Result<Option<String>> {
        match how {
            How::Interval(_) | How::Regular if !residual.is_empty() => {
                let both = join
                    .left
                    .schema()
                    .join(join.right.schema())
                    .map_err(|e| self.here().invalid(e.to_string()))?;
                let pair = Stream {
                    node: String::new(),
                    columns: left.columns.iter().chain(renamed).cloned().collect(),
                    marker: false,
                    changes: Changes::InsertOnly,
                    scan: None,
                    rowtimes: Vec::new(),
                    window: None,
                };
                let predicate = std::mem::take(residual)
                    .into_iter()
                    .reduce(Expr::and)
                    .unwrap_or_else(|| datafusion::logical_expr::lit(true));
                Ok(Some(self.sql(&predicate, &both, &pair)?))
            }
            _ => Ok(None),
        }
    }

    /// A `filter` after the join `stream` of the conjuncts in `residual` (what of a table
    /// join's condition is not its keys), or the stream as it is when there are none.
    fn residual_filter(
        &mut self,
        join: &Join,
        stream: Stream,
        residual: Vec<Expr>,
    ) -> Result<Stream> {
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

/// The time attributes of a join's rows. An interval join's rows keep both times: a pair is
/// emitted with both at or after the output watermark (the operator holds it back by the
/// bounds' reach), so a window can follow. A window join's rows are results of their windows,
/// and a table join's stream rows are not checked against the watermark, so their output has
/// none (in Flink neither has).
fn join_rowtimes(how: &How, kind: &str, sides: &JoinSides) -> Vec<String> {
    match how {
        How::Interval(interval) if interval.window => Vec::new(),
        How::Interval(interval) if matches!(kind, "semi" | "anti") => {
            vec![interval.left_time.clone()]
        }
        How::Interval(interval) => vec![
            interval.left_time.clone(),
            sides.rename(&interval.right_time),
        ],
        How::Table { .. } | How::Regular => Vec::new(),
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
    /// An `interval_join` (also a window join).
    Interval(Interval),
    /// A `regular_join`: equal keys at any distance in time, all of both inputs kept.
    Regular,
    /// A `table_join` of a stream with a bounded table; `stream` is the stream's side (0
    /// left); `join` the operator's kind (`inner`, `left`: the stream's unmatched rows too,
    /// `semi`, `anti`).
    Table { stream: usize, join: &'static str },
}

/// An interval join's time columns (physical, the right's before the renaming) and the
/// bounds on `right.time - left.time`, in ms, both inclusive.
struct Interval {
    left_time: String,
    right_time: String,
    lower: i64,
    upper: i64,
    /// A window join: the times are the windows', the bounds make up for their difference.
    window: bool,
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
