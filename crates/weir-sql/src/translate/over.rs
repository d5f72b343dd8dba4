//! `agg(x) OVER (PARTITION BY k ORDER BY ts ROWS|RANGE BETWEEN ... PRECEDING AND CURRENT ROW)`,
//! Flink's OVER aggregation, as an `over_aggregate` operator: every row once, with its
//! aggregates, when the watermark passes its time.

use super::{Changes, Stream, Translator, unalias};
use crate::error::Result;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{
    Expr, Window, WindowFrame, WindowFrameBound, WindowFrameUnits, WindowFunctionDefinition,
};

/// Milliseconds per day.
const DAY_MS: i64 = 86_400_000;

impl Translator<'_> {
    /// Translates a window of OVER aggregates: one `over_aggregate` operator per distinct `OVER`
    /// clause, each over the one before (DataFusion puts aggregates of the same partitioning
    /// and order into one window whatever their frames).
    pub(super) fn over(&mut self, window: &Window) -> Result<Stream> {
        let input = self.final_rows(&window.input, "OVER", "an OVER aggregation")?;
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
        let base = self.next_name("over");
        type Clause<'c> = (
            &'c [Expr],
            &'c [datafusion::logical_expr::SortExpr],
            &'c WindowFrame,
        );
        // Each distinct OVER clause with its aggregates' specs.
        let mut clauses: Vec<(Clause<'_>, Vec<serde_json::Value>)> = Vec::new();
        let mut names = Vec::with_capacity(window.window_expr.len());
        for (i, e) in window.window_expr.iter().enumerate() {
            let Expr::WindowFunction(f) = unalias(e) else {
                return Err(self
                    .here()
                    .invalid(format!("unexpected OVER expression `{e}`")));
            };
            let function = match &f.fun {
                WindowFunctionDefinition::AggregateUDF(udf) => udf.name().to_ascii_lowercase(),
                WindowFunctionDefinition::WindowUDF(udf) => {
                    return Err(self.unsupported_at(
                        udf.name(),
                        &format!(
                            "{}() without a `WHERE rn <= N` filter",
                            udf.name().to_ascii_uppercase()
                        ),
                        "OVER computes COUNT, SUM, MIN, MAX and AVG; ROW_NUMBER() ranks rows for \
                         a deduplication or window Top-N filtered by WHERE rn <= N",
                    ));
                }
            };
            if !["count", "sum", "min", "max", "avg"].contains(&function.as_str()) {
                return Err(self.unsupported_at(
                    &function,
                    &format!("the OVER aggregate {function}"),
                    "OVER computes COUNT, SUM, MIN, MAX and AVG",
                ));
            }
            let p = &f.params;
            if p.distinct || p.filter.is_some() {
                return Err(self.unsupported_at(
                    "OVER",
                    "DISTINCT or FILTER in an OVER aggregate",
                    "aggregate a column computed with CASE WHEN in a subquery instead",
                ));
            }
            let column = match p.args.as_slice() {
                [] | [Expr::Literal(..)] if function == "count" => None,
                // DataFusion widens some arguments (AVG's to DOUBLE); the operator computes
                // integers in BIGINT and floating-point numbers in DOUBLE itself.
                [arg] => Some(physical(uncast(arg)).ok_or_else(|| {
                    self.unsupported_at(
                        &function,
                        &format!("{function} of an expression in OVER"),
                        "compute the expression as a column in a subquery first",
                    )
                })?),
                _ => {
                    return Err(self.unsupported_at(
                        &function,
                        &format!("{function} with several arguments"),
                        "aggregate one column",
                    ));
                }
            };
            let name = format!("__weir_{base}_{i}");
            let mut spec = serde_json::json!({ "function": function, "as": name });
            if let Some(column) = column {
                spec["column"] = serde_json::json!(column);
            }
            names.push(name);
            let clause: Clause<'_> = (&p.partition_by, &p.order_by, &p.window_frame);
            match clauses.iter_mut().find(|(c, _)| *c == clause) {
                Some((_, specs)) => specs.push(spec),
                None => clauses.push((clause, vec![spec])),
            }
        }
        let mut node = input.node.clone();
        for (n, ((partition, order, frame), aggregates)) in clauses.into_iter().enumerate() {
            let name = if n == 0 {
                base.clone()
            } else {
                self.next_name("over")
            };
            // Only the first operator can meet late rows: the others get rows it emitted
            // before the watermark passed them.
            let late_columns = (n == 0).then_some(input.columns.as_slice());
            node = self.over_operator(
                name,
                &node,
                (partition, order, frame),
                aggregates,
                &physical,
                (&input.rowtimes, late_columns),
            )?;
        }
        let mut columns = input.columns;
        columns.extend(names);
        Ok(Stream {
            node,
            columns,
            marker: false,
            changes: Changes::InsertOnly,
            scan: None,
            rowtimes: input.rowtimes,
            window: input.window,
        })
    }

    /// One `over_aggregate` node named `node` over `from`, computing `aggregates` over one OVER
    /// clause; its name.
    fn over_operator(
        &mut self,
        node: String,
        from: &str,
        (partition, order, frame): (&[Expr], &[datafusion::logical_expr::SortExpr], &WindowFrame),
        aggregates: Vec<serde_json::Value>,
        physical: &dyn Fn(&Expr) -> Option<String>,
        (rowtimes, late_columns): (&[String], Option<&[String]>),
    ) -> Result<String> {
        let keys = partition
            .iter()
            .map(physical)
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                self.unsupported_at(
                    "PARTITION",
                    "PARTITION BY an expression in OVER",
                    "partition by columns; compute the expression in a subquery first",
                )
            })?;
        let time = match order {
            [sort] if sort.asc => physical(&sort.expr),
            _ => None,
        }
        .filter(|t| rowtimes.contains(t))
        .ok_or_else(|| {
            self.unsupported_at(
                "ORDER",
                "an OVER window not ordered by the time attribute ascending",
                "ORDER BY the table's time attribute (its WATERMARK column) ASC, as Flink requires",
            )
        })?;
        let frame = self.frame(frame)?;
        let partition = (!keys.is_empty()).then(|| keys.clone());
        let mut options = serde_json::json!({
            "keys": keys,
            "time": time,
            "frame": frame,
            "aggregates": aggregates,
        });
        self.add_buffer_bytes(&mut options);
        let late = match late_columns {
            Some(columns) => self
                .row_late_option("OVER", "an OVER aggregation")?
                .map(|late| (late, columns)),
            None => None,
        };
        if let Some((late, _)) = &late {
            options["late"] = late.clone();
        }
        self.job
            .operator(&node, "over_aggregate", from, partition, options);
        if keys.is_empty() {
            self.job.set_parallelism(&node, 1);
        }
        if let Some((_, columns)) = late {
            self.route_late(&format!("{node}.late"), &super::late::same_names(columns))?;
        }
        Ok(node)
    }

    /// The operator's `frame` option for a SQL frame ending at the current row.
    fn frame(&self, frame: &WindowFrame) -> Result<serde_json::Value> {
        let refuse = |what: &str| {
            self.unsupported_at(
                "OVER",
                what,
                "OVER frames are ROWS or RANGE BETWEEN ... PRECEDING AND CURRENT ROW, as in Flink",
            )
        };
        if frame.end_bound != WindowFrameBound::CurrentRow {
            return Err(refuse("an OVER frame that does not end at the current row"));
        }
        let preceding = match &frame.start_bound {
            WindowFrameBound::Preceding(v) if v.is_null() => None,
            WindowFrameBound::Preceding(v) => Some(v.clone()),
            // `BETWEEN CURRENT ROW AND CURRENT ROW`: the row (and, for RANGE, its peers).
            WindowFrameBound::CurrentRow => Some(ScalarValue::Int64(Some(0))),
            WindowFrameBound::Following(_) => {
                return Err(refuse("an OVER frame that starts after the current row"));
            }
        };
        match frame.units {
            WindowFrameUnits::Rows => {
                let n = match preceding {
                    None => None,
                    Some(v) => Some(
                        v.cast_to(&arrow::datatypes::DataType::UInt64)
                            .ok()
                            .and_then(|v| match v {
                                ScalarValue::UInt64(n) => n,
                                _ => None,
                            })
                            .ok_or_else(|| refuse("a ROWS frame bound that is not a row count"))?,
                    ),
                };
                Ok(serde_json::json!({ "type": "rows", "preceding": n }))
            }
            WindowFrameUnits::Range => {
                let ms = match preceding {
                    None => None,
                    Some(v) => Some(interval_ms(&v).filter(|ms| *ms >= 0).ok_or_else(|| {
                        refuse(
                            "a RANGE frame bound other than an interval of days, \
                                     hours, minutes, seconds or milliseconds",
                        )
                    })?),
                };
                Ok(serde_json::json!({ "type": "range", "preceding": ms }))
            }
            WindowFrameUnits::Groups => Err(refuse("a GROUPS frame")),
        }
    }
}

/// The column under a numeric cast, or `e`.
fn uncast(e: &Expr) -> &Expr {
    match e {
        Expr::Cast(c)
            if c.field.data_type().is_numeric() && matches!(c.expr.as_ref(), Expr::Column(_)) =>
        {
            &c.expr
        }
        other => other,
    }
}

/// A RANGE bound as milliseconds: an interval without months, or a number (milliseconds of a
/// `BIGINT` time).
fn interval_ms(v: &ScalarValue) -> Option<i64> {
    match v {
        ScalarValue::IntervalDayTime(Some(i)) => {
            Some(i64::from(i.days) * DAY_MS + i64::from(i.milliseconds))
        }
        ScalarValue::IntervalMonthDayNano(Some(i)) if i.months == 0 => {
            Some(i64::from(i.days) * DAY_MS + i.nanoseconds / 1_000_000)
        }
        other => match other.cast_to(&arrow::datatypes::DataType::Int64).ok()? {
            ScalarValue::Int64(n) => n,
            _ => None,
        },
    }
}
