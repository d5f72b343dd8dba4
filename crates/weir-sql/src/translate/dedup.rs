//! `SELECT ... FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts) AS rn FROM t)
//! WHERE rn = 1`: the first row of each key in event-time order, Flink's deduplication keeping
//! the first row, as a `dedup_first` operator. Its output is insert-only: a key's first row is
//! emitted once the watermark passes it.

use super::{Stream, Translator, unalias};
use crate::error::Result;
use datafusion::common::{Column, ScalarValue};
use datafusion::logical_expr::{BinaryExpr, Expr, Filter, LogicalPlan, Operator, Window};

/// The column the `dedup_first` operator adds: the row number, always 1.
const ROW_NUMBER: &str = "__weir_row_number";

impl Translator<'_> {
    /// Whether `filter` keeps the rows whose `ROW_NUMBER()` (over a window of the rows below
    /// it, through projections) is 1; marks that window for [`Translator::dedup`] when it does.
    ///
    /// # Errors
    /// A `ROW_NUMBER()` kept up to a number above 1 (Top-N) or ordered by a time descending
    /// (the last row): both would update results.
    pub(super) fn is_first_row(&mut self, filter: &Filter) -> Result<bool> {
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
            Operator::Eq | Operator::LtEq => n,
            Operator::Lt => n - 1,
            _ => return Ok(false),
        };
        if kept != 1 {
            return Err(self.unsupported_at(
                "ROW_NUMBER",
                "ROW_NUMBER() kept up to a number other than 1 (Top-N) without a window",
                "the current top rows change as rows arrive, which needs updating results; \
                 keep the first row (= 1)",
            ));
        }
        self.first_row = Some(std::ptr::from_ref(window));
        Ok(true)
    }

    /// Translates the marked `ROW_NUMBER()` window into a `dedup_first` operator.
    pub(super) fn dedup(&mut self, window: &Window) -> Result<Stream> {
        self.first_row = None;
        let [Expr::WindowFunction(f)] = window.window_expr.as_slice() else {
            return Err(self.unsupported_at(
                "OVER",
                "ROW_NUMBER() beside other OVER functions",
                "compute ROW_NUMBER() alone in its subquery",
            ));
        };
        let params = &f.params;
        let input = self.plan(&window.input)?;
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
                "deduplicate per key: PARTITION BY the key columns",
            )
        })?;
        let time = match params.order_by.as_slice() {
            [sort] if sort.asc => physical(&sort.expr),
            [sort] if !sort.asc => {
                return Err(self.unsupported_at(
                    "DESC",
                    "keeping the last row (ORDER BY ... DESC)",
                    "the last row of a key changes as rows arrive, which needs updating results; \
                     keep the first row (ORDER BY the time attribute ASC)",
                ));
            }
            _ => None,
        };
        let time = time
            .filter(|t| input.rowtime.as_ref() == Some(t))
            .ok_or_else(|| {
                self.unsupported_at(
                    "ORDER",
                    "ROW_NUMBER() not ordered by the time attribute",
                    "order by the table's time attribute (its WATERMARK column) ascending",
                )
            })?;
        let node = self.next_name("dedup_first");
        self.job.operator(
            &node,
            "dedup_first",
            &input.node,
            Some(keys.clone()),
            serde_json::json!({ "keys": keys, "time": time, "row_number": ROW_NUMBER }),
        );
        let mut columns = input.columns;
        columns.push(ROW_NUMBER.to_owned());
        Ok(Stream {
            node,
            columns,
            marker: false,
            scan: None,
            rowtime: input.rowtime,
        })
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
