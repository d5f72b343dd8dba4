//! `SELECT ... FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...) AS rn FROM t)
//! WHERE rn <= N`, Flink's Top-N and deduplication, where their results are final when
//! emitted (insert-only):
//!
//! - partitioned by the window bounds of a window table function or a window aggregation:
//!   Window Top-N (and, with N = 1, Window Deduplication), a `window_top_n` operator that
//!   emits each window's first N rows once the watermark passes the window's end;
//! - partitioned by keys, `rn = 1`, ordered by the time attribute ascending: deduplication
//!   keeping the first row, a `dedup_first` operator that emits a key's first row once the
//!   watermark passes it.
//!
//! - otherwise (Top-N without a window, and deduplication keeping the last row: N = 1 ordered
//!   by the time attribute descending): a `top_n` operator, whose results update as rows
//!   arrive. Its row number is computed only where the query reads it: a projection that
//!   drops it turns it off ([`Translator::unnumbered`]), and the operator then emits rows
//!   entering and leaving the first N instead of every shifted position.

use super::{Changes, Stream, Translator, unalias};
use crate::error::Result;
use datafusion::common::{Column, ScalarValue};
use datafusion::logical_expr::{BinaryExpr, Expr, Filter, LogicalPlan, Operator, Window};

/// The column the rank operators add: the row number.
pub(super) const ROW_NUMBER: &str = "__weir_row_number";

/// The largest N of a window Top-N (the `window_top_n` operator's limit: it keeps a window's N
/// rows in one state entry).
const MAX_TOP_N: u32 = 10_000;

impl Translator<'_> {
    /// Whether `filter` keeps the rows whose `ROW_NUMBER()` (over a window of the rows below
    /// it, through projections) is at most some N; marks that window for [`Translator::rank`]
    /// when it does.
    ///
    /// # Errors
    /// A filter that keeps no row, or rows from a number above 1 on.
    pub(super) fn is_row_number_filter(&mut self, filter: &Filter) -> Result<bool> {
        let Expr::BinaryExpr(BinaryExpr { left, op, right }) = &filter.predicate else {
            return Ok(false);
        };
        let (column, op, n) = match (unalias(left), unalias(right)) {
            (Expr::Column(c), Expr::Literal(v, _)) => (c, *op, v),
            (Expr::Literal(v, _), Expr::Column(c)) => (c, flip(*op), v),
            _ => return Ok(false),
        };
        let Some(n) = as_i64(n) else { return Ok(false) };
        let Some(window) = window_of(filter.input.as_ref(), column) else {
            return Ok(false);
        };
        let kept = match op {
            Operator::Eq if n == 1 => 1,
            Operator::LtEq => n,
            Operator::Lt => n.saturating_sub(1),
            _ => {
                return Err(self.unsupported_at(
                    "ROW_NUMBER",
                    "a ROW_NUMBER() filter other than `<= N`, `< N` or `= 1`",
                    "keep the first rows: WHERE rn <= N",
                ));
            }
        };
        if kept < 1 {
            return Err(self.unsupported_at(
                "ROW_NUMBER",
                "a ROW_NUMBER() filter that keeps no row",
                "keep the first rows: WHERE rn <= N with N at least 1",
            ));
        }
        self.row_number = Some((std::ptr::from_ref(window), kept));
        Ok(true)
    }

    /// Translates the marked `ROW_NUMBER()` window into a `window_top_n` or `dedup_first`
    /// operator.
    pub(super) fn rank(&mut self, window: &Window) -> Result<Stream> {
        let kept = self.row_number.take().map_or(1, |(_, n)| n);
        let [Expr::WindowFunction(f)] = window.window_expr.as_slice() else {
            return Err(self.unsupported_at(
                "OVER",
                "ROW_NUMBER() beside other OVER functions",
                "compute ROW_NUMBER() alone in its subquery",
            ));
        };
        let params = &f.params;
        let input = self.final_rows(&window.input, "ROW_NUMBER", "ROW_NUMBER()")?;
        let in_schema = window.input.schema();
        let physical = |e: &Expr| -> Option<String> {
            let Expr::Column(c) = unalias(e) else {
                return None;
            };
            input
                .columns
                .get(in_schema.index_of_column(c).ok()?)
                .cloned()
        };
        let keys: Option<Vec<String>> = params.partition_by.iter().map(physical).collect();
        let keys = keys.filter(|k| !k.is_empty()).ok_or_else(|| {
            self.unsupported_at(
                "PARTITION",
                "ROW_NUMBER() without PARTITION BY columns",
                "rank per window or key: PARTITION BY window_start, window_end (after a window \
                 table function or window aggregation) or the key columns",
            )
        })?;
        let windowed = input
            .window
            .as_ref()
            .filter(|w| keys.contains(&w.start) && keys.contains(&w.end))
            .cloned();
        if let Some(bounds) = windowed {
            if input.marker {
                return Err(self.unsupported_at(
                    "ROW_NUMBER",
                    "a Top-N over a window aggregation whose late policy is `update`",
                    "late corrections would change the ranking after it was emitted; use the \
                     `drop` or `route` late policy",
                ));
            }
            let order: Vec<(Option<String>, &datafusion::logical_expr::SortExpr)> = params
                .order_by
                .iter()
                .map(|sort| (physical(&sort.expr), sort))
                .collect();
            let order_by = self.order_by_options(&order)?;
            let limit = u32::try_from(kept)
                .ok()
                .filter(|n| *n <= MAX_TOP_N)
                .ok_or_else(|| {
                    self.unsupported_at(
                        "ROW_NUMBER",
                        &format!("a Top-{kept}"),
                        &format!("keep at most {} rows per window", MAX_TOP_N),
                    )
                })?;
            let node = self.next_name("window_top_n");
            let mut options = serde_json::json!({
                "keys": keys,
                "window_end": bounds.end,
                "order_by": order_by,
                "limit": limit,
                "row_number": ROW_NUMBER,
            });
            // After a window aggregation no row is late (the window routed or dropped them);
            // after a window table function a row whose window had ended is.
            let late = match bounds.time {
                Some(_) => self.row_late_option("ROW_NUMBER", "a window Top-N")?,
                None => None,
            };
            if let Some(late) = &late {
                options["late"] = late.clone();
            }
            self.job.operator(
                &node,
                "window_top_n",
                &input.node,
                Some(keys.clone()),
                options,
            );
            if late.is_some() {
                let columns = super::late::same_names(&input.columns);
                self.route_late(&format!("{node}.late"), &columns)?;
            }
            let mut columns = input.columns;
            columns.push(ROW_NUMBER.to_owned());
            return Ok(Stream {
                node,
                columns,
                marker: false,
                changes: Changes::InsertOnly,
                scan: None,
                rowtimes: Vec::new(),
                window: Some(bounds),
            });
        }
        let time = match params.order_by.as_slice() {
            [sort] if sort.asc && kept == 1 => {
                physical(&sort.expr).filter(|t| input.rowtimes.contains(t))
            }
            _ => None,
        };
        let Some(time) = time else {
            let order: Vec<(Option<String>, &datafusion::logical_expr::SortExpr)> = params
                .order_by
                .iter()
                .map(|sort| (physical(&sort.expr), sort))
                .collect();
            return self.current_top_n(input, keys, &order, kept);
        };
        let node = self.next_name("dedup_first");
        let mut options =
            serde_json::json!({ "keys": keys, "time": time, "row_number": ROW_NUMBER });
        let late = self.row_late_option("ROW_NUMBER", "a deduplication")?;
        if let Some(late) = &late {
            options["late"] = late.clone();
        }
        self.job.operator(
            &node,
            "dedup_first",
            &input.node,
            Some(keys.clone()),
            options,
        );
        if late.is_some() {
            let columns = super::late::same_names(&input.columns);
            self.route_late(&format!("{node}.late"), &columns)?;
        }
        let mut columns = input.columns;
        columns.push(ROW_NUMBER.to_owned());
        Ok(Stream {
            node,
            columns,
            marker: false,
            changes: Changes::InsertOnly,
            scan: None,
            rowtimes: input.rowtimes,
            window: None,
        })
    }
}

impl Translator<'_> {
    /// `ROW_NUMBER() OVER (PARTITION BY keys ORDER BY ...) <= kept` over all rows so far: a
    /// `top_n` operator, whose results update.
    fn current_top_n(
        &mut self,
        input: Stream,
        keys: Vec<String>,
        order: &[(Option<String>, &datafusion::logical_expr::SortExpr)],
        kept: i64,
    ) -> Result<Stream> {
        let order_by = self.order_by_options(order)?;
        let limit = u32::try_from(kept)
            .ok()
            .filter(|n| *n <= MAX_TOP_N)
            .ok_or_else(|| {
                self.unsupported_at(
                    "ROW_NUMBER",
                    &format!("a Top-{kept}"),
                    &format!("keep at most {MAX_TOP_N} rows per key"),
                )
            })?;
        let node = self.next_name("top_n");
        let mut options = serde_json::json!({
            "keys": keys,
            "order_by": order_by,
            "limit": limit,
            "row_number": ROW_NUMBER,
        });
        self.add_state_ttl(&mut options);
        self.job
            .operator(&node, "top_n", &input.node, Some(keys.clone()), options);
        self.numbered.push(node.clone());
        let mut columns = input.columns.clone();
        columns.push(ROW_NUMBER.to_owned());
        let mut key = keys;
        if limit > 1 {
            key.push(ROW_NUMBER.to_owned());
        }
        // The last row of each key by its time attribute is a versioned view, as in Flink:
        // each row a version of its key from its time on (a temporal join can read it).
        let rowtimes = match order {
            [(Some(time), sort)] if limit == 1 && !sort.asc && input.rowtimes.contains(time) => {
                self.versioned_views
                    .push((node.clone(), input.columns.clone()));
                vec![time.clone()]
            }
            _ => Vec::new(),
        };
        Ok(Stream {
            node,
            columns,
            marker: false,
            changes: Changes::Updating {
                key: Some(key),
                since: super::Since::new("ROW_NUMBER", "a Top-N without a window"),
            },
            scan: None,
            rowtimes,
            window: None,
        })
    }

    /// The `order_by` options of a rank operator: each `ORDER BY` item's column (`None` for an
    /// expression, refused), direction and nulls; at least one.
    fn order_by_options(
        &self,
        order: &[(Option<String>, &datafusion::logical_expr::SortExpr)],
    ) -> Result<Vec<serde_json::Value>> {
        let mut order_by = Vec::with_capacity(order.len());
        for (column, sort) in order {
            let column = column.clone().ok_or_else(|| {
                self.unsupported_at(
                    "ORDER",
                    "ORDER BY an expression in ROW_NUMBER()",
                    "order by columns; compute the expression in a subquery first",
                )
            })?;
            order_by.push(serde_json::json!({
                "column": column,
                "descending": !sort.asc,
                "nulls_first": sort.nulls_first,
            }));
        }
        if order_by.is_empty() {
            return Err(self.unsupported_at(
                "OVER",
                "ROW_NUMBER() without ORDER BY",
                "say which rows come first: ORDER BY a column",
            ));
        }
        Ok(order_by)
    }

    /// Turns off the row number of `top_n` operator `node` when `reads` (the physical columns
    /// a projection over it reads, as SQL text or names) does not mention it: the operator then
    /// emits only rows entering and leaving, not every shifted position.
    pub(super) fn unnumbered<'t>(&mut self, node: &str, reads: impl IntoIterator<Item = &'t str>) {
        if !self.numbered.iter().any(|n| n == node) {
            return;
        }
        if reads.into_iter().any(|text| text.contains(ROW_NUMBER)) {
            return;
        }
        self.job
            .set_option(node, "row_number", serde_json::Value::Null);
        self.numbered.retain(|n| n != node);
    }
}

/// The `ROW_NUMBER()` window whose output `column` (of `plan`'s schema) is, through
/// projections and aliases that pass it on.
fn window_of<'a>(plan: &'a LogicalPlan, column: &Column) -> Option<&'a Window> {
    let i = plan.schema().index_of_column(column).ok()?;
    match plan {
        LogicalPlan::Projection(p) => match unalias(p.expr.get(i)?) {
            Expr::Column(c) => window_of(&p.input, c),
            _ => None,
        },
        LogicalPlan::SubqueryAlias(a) => {
            let (qualifier, field) = a.input.schema().qualified_field(i);
            window_of(&a.input, &Column::from((qualifier, field)))
        }
        LogicalPlan::Window(w) => {
            let base = w.input.schema().fields().len();
            let Expr::WindowFunction(f) = w.window_expr.get(i.checked_sub(base)?)? else {
                return None;
            };
            f.fun.name().eq_ignore_ascii_case("row_number").then_some(w)
        }
        _ => None,
    }
}

fn flip(op: Operator) -> Operator {
    match op {
        Operator::Gt => Operator::Lt,
        Operator::GtEq => Operator::LtEq,
        Operator::Lt => Operator::Gt,
        Operator::LtEq => Operator::GtEq,
        other => other,
    }
}

fn as_i64(v: &ScalarValue) -> Option<i64> {
    match v.cast_to(&arrow::datatypes::DataType::Int64).ok()? {
        ScalarValue::Int64(Some(n)) => Some(n),
        _ => None,
    }
}
