//! The aggregate calls of a `GROUP BY` (windowed or not) as operator options: each call's
//! function, its argument (computed by a projection before the operator where it is not a
//! column) and its output name.

use super::{Translator, is_simple_name, unalias};
use crate::error::Result;
use datafusion::logical_expr::{Aggregate, Expr};

/// The aggregates of one `GROUP BY`, ready for a `window` or `group_aggregate` operator.
pub(super) struct AggregateCalls {
    /// One `{function, column, distinct, as}` option per call.
    pub(super) specs: Vec<serde_json::Value>,
    /// The arguments to compute before the operator: `(name, expression)`.
    pub(super) args: Vec<(String, Expr)>,
    /// The output column of each call.
    pub(super) names: Vec<String>,
}

impl Translator<'_> {
    /// The aggregate calls of `agg`, whose input columns are the expressions `exprs`;
    /// `float32` says which columns are FLOAT (a window sums them as FLOAT, as Flink does),
    /// `windowed` whether the aggregation is a window's (for the error texts).
    pub(super) fn aggregate_calls(
        &self,
        agg: &Aggregate,
        exprs: &[Expr],
        float32: &dyn Fn(&str) -> bool,
        windowed: bool,
    ) -> Result<AggregateCalls> {
        let in_schema = agg.input.schema();
        let mut specs = Vec::new();
        let mut args: Vec<(String, Expr)> = Vec::new();
        let mut names: Vec<String> = Vec::new();
        for (a, field) in agg
            .aggr_expr
            .iter()
            .zip(agg.schema.fields().iter().skip(agg.group_expr.len()))
        {
            let Expr::AggregateFunction(f) = unalias(a) else {
                return Err(self.here().invalid(format!("unexpected aggregate `{a}`")));
            };
            let function = f.func.name().to_ascii_lowercase();
            if !["count", "sum", "min", "max", "avg"].contains(&function.as_str()) {
                return Err(self.unsupported_at(
                    f.func.name(),
                    &format!("the aggregate {}", f.func.name()),
                    if windowed {
                        "windows compute COUNT, SUM, MIN, MAX and AVG (and COUNT(DISTINCT) of \
                     integers)"
                    } else {
                        "GROUP BY computes COUNT, SUM, MIN, MAX and AVG, each DISTINCT or not"
                    },
                ));
            }
            if !f.params.order_by.is_empty() {
                return Err(self.unsupported_at(
                    f.func.name(),
                    "an aggregate with ORDER BY",
                    "aggregates do not depend on the order of their rows here",
                ));
            }
            // `agg(x) FILTER (WHERE c)` is `agg(CASE WHEN c THEN x END)`: every window
            // aggregate skips nulls, so the rows where `c` is not true count for nothing.
            let filtered = |arg: Expr| -> Result<Expr> {
                match &f.params.filter {
                    Some(c) => datafusion::logical_expr::when(c.as_ref().clone(), arg)
                        .end()
                        .map_err(|e| self.here().invalid(e.to_string())),
                    None => Ok(arg),
                }
            };
            let alias = if is_simple_name(field.name()) {
                field.name().clone()
            } else {
                format!("_a{}", specs.len())
            };
            let star = datafusion::logical_expr::lit(1_i64);
            let column = match f.params.args.as_slice() {
                [Expr::Literal(..)] | []
                    if function == "count" && !f.params.distinct && f.params.filter.is_none() =>
                {
                    None
                }
                [] if function == "count" => {
                    let name = format!("__arg{}", args.len());
                    args.push((
                        name.clone(),
                        self.substitute(&filtered(star)?, in_schema, exprs)?,
                    ));
                    Some(name)
                }
                [arg] => {
                    let arg = if f.params.filter.is_some()
                        && function == "count"
                        && !f.params.distinct
                        && matches!(arg, Expr::Literal(..))
                    {
                        star
                    } else {
                        arg.clone()
                    };
                    let mut e = self.substitute(&filtered(arg)?, in_schema, exprs)?;
                    // DataFusion widens SUM's FLOAT argument to DOUBLE; the window operator adds
                    // FLOATs up in DOUBLE itself and returns FLOAT, as Flink does.
                    if function == "sum"
                        && let Expr::Cast(cast) = &e
                        && let Expr::Column(c) = cast.expr.as_ref()
                        && float32(&c.name)
                    {
                        e = cast.expr.as_ref().clone();
                    }
                    let name = format!("__arg{}", args.len());
                    args.push((name.clone(), e));
                    Some(name)
                }
                _ => {
                    return Err(self.unsupported_at(
                        f.func.name(),
                        &format!("{} with several arguments", f.func.name()),
                        "aggregate one column",
                    ));
                }
            };
            let mut spec = serde_json::json!({ "function": function, "as": alias });
            if let Some(column) = column {
                spec["column"] = serde_json::json!(column);
            }
            if f.params.distinct {
                spec["distinct"] = serde_json::json!(true);
            }
            specs.push(spec);
            names.push(alias);
        }
        Ok(AggregateCalls { specs, args, names })
    }
}
