//! `GROUP BY window_start, window_end, keys` over a window table function: one `window`
//! operator, in steps: find the function under the aggregate ([`WindowTvfBelow`]), read its
//! input ([`Translator::window_scan`]), carry the filters and projections between the two
//! ([`Translator::between_tvf_and_aggregate`]), resolve the GROUP BY ([`WindowGroupBy`]),
//! plan the operator (with a projection before it where keys or arguments are computed) and
//! shape its results ([`Translator::window_results`]).

use super::window_input::WindowInput;
use super::{
    Bounds, Changes, Stream, Translator, UPDATE_MARKER, VIRTUAL, column_name, is_simple_name, late,
    quote, unalias,
};
use crate::error::Result;
use crate::tvf::WindowTvfTable;
use datafusion::common::Column;
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::{Aggregate, Expr, LogicalPlan, TableScan};
use std::any::Any;

/// The window table function an aggregate reads, and the filters and projections between them
/// (top down).
struct WindowTvfBelow<'a> {
    scan: &'a TableScan,
    table: WindowTvfTable,
    between: Vec<&'a LogicalPlan>,
}

/// The GROUP BY of a window aggregation: the keys, and which window bounds it names.
struct WindowGroupBy {
    /// (output name, expression over the table's rows) of each key.
    keys: Vec<(String, Expr)>,
    /// The output columns of the GROUP BY items, in their order.
    out_columns: Vec<String>,
    has_start: bool,
    has_end: bool,
    /// `window_time` is grouped by: computed after the window.
    has_time: bool,
}

impl Translator<'_> {
    /// `GROUP BY window_start, window_end, keys` over a window TVF -> one `window` operator;
    /// any other aggregate is a `group_aggregate`.
    pub(super) fn window_aggregate(&mut self, agg: &Aggregate) -> Result<Stream> {
        let Some(below) = self.window_tvf_below(agg)? else {
            return self.group_aggregate(agg);
        };
        let tvf_table = &below.table;
        let input = self.window_input(tvf_table)?;
        let columns = self.window_scan(&input, below.scan);
        let mut stream = Stream {
            node: input.node.clone(),
            columns: columns.clone(),
            marker: false,
            changes: Changes::InsertOnly,
            scan: None,
            rowtimes: Vec::new(),
            window: None,
        };
        // Each plan column as an expression over the table's rows.
        let exprs = self.between_tvf_and_aggregate(&below.between, &columns, &mut stream)?;
        let group_by = self.window_group_by(agg, &exprs, &input)?;

        // Aggregates.
        let float32 =
            |name: &str| input.column_type(name) == Some(&arrow::datatypes::DataType::Float32);
        let calls = self.aggregate_calls(agg, &exprs, &float32, true)?;
        let mut aggregates = calls.specs;
        let args = calls.args;
        let mut out_columns = group_by.out_columns;
        out_columns.extend(calls.names);
        if aggregates.is_empty() {
            // Windows of groups alone (`GROUP BY window_start, window_end, k` selecting no
            // aggregate, or whose aggregates nothing reads): the window counts, and the count
            // is a physical column no plan column names.
            aggregates.push(serde_json::json!({ "function": "count", "as": "__weir_rows" }));
        }
        let keys = group_by.keys;
        // A project before the window where keys or arguments are computed; without one, the
        // aggregates read the table's columns directly.
        let time_column = input.time.clone();
        let plain = |e: &Expr| matches!(e, Expr::Column(c) if !c.name.starts_with(VIRTUAL));
        let needs_project = args.iter().any(|(_, e)| !plain(e))
            || keys
                .iter()
                .any(|(name, e)| !plain(e) || column_name(e) != *name);
        let key_names: Vec<String> = keys.iter().map(|(n, _)| n.clone()).collect();
        let mut table_columns: Vec<String> = Vec::new();
        for c in input.names() {
            if !table_columns.contains(c) {
                table_columns.push(c.clone());
            }
        }
        let window_input = if needs_project {
            let routed = self.settings.late_sink.is_some();
            let mut expressions: Vec<String> = Vec::new();
            let mut names: Vec<String> = Vec::new();
            if routed {
                // Late rows keep the table's columns, so the late table can read them.
                for c in &table_columns {
                    expressions.push(quote(c));
                    names.push(c.clone());
                }
            }
            for (name, e) in keys.iter().chain(&args) {
                if names.contains(name) {
                    if column_name(e) == *name {
                        continue;
                    }
                    return Err(self.here().invalid(format!(
                        "the computed key `{name}` has the name of a column of `{}`; \
                         rename it with AS",
                        tvf_table.table
                    )));
                }
                expressions.push(format!("{} AS {}", self.sql_over(e)?, quote(name)));
                names.push(name.clone());
            }
            if !names.contains(&time_column) {
                expressions.push(quote(&time_column));
                names.push(time_column.clone());
            }
            stream.node = self.project(&stream.node, expressions);
            names
        } else {
            // Aggregate the columns themselves.
            let by_name: std::collections::HashMap<String, String> = args
                .iter()
                .map(|(name, e)| (name.clone(), column_name(e)))
                .collect();
            for spec in &mut aggregates {
                if let Some(column) = spec.get("column").and_then(|c| c.as_str())
                    && let Some(real) = by_name.get(column)
                {
                    spec["column"] = serde_json::json!(real);
                }
            }
            table_columns
        };
        let node = self.next_name("window");
        let options = serde_json::json!({
            "time_column": time_column,
            "window": tvf_table.window,
            "key_by": key_names,
            "aggregates": aggregates,
            "late": self.settings.late_options(),
        });
        let partition = (!key_names.is_empty()).then(|| key_names.clone());
        self.job
            .operator(&node, "window", &stream.node, partition, options);
        if key_names.is_empty() {
            self.job.set_parallelism(&node, 1);
        }
        // The late table's columns, by name, from the window's input and the reason.
        self.route_late(&format!("{node}.late"), &late::same_names(&window_input))?;
        Ok(self.window_results(node, out_columns, group_by.has_time))
    }

    /// The window table function under `agg`, through filters, projections and aliases;
    /// `None` when the aggregate reads anything else.
    fn window_tvf_below<'a>(&self, agg: &'a Aggregate) -> Result<Option<WindowTvfBelow<'a>>> {
        let mut between: Vec<&LogicalPlan> = Vec::new();
        let mut at = agg.input.as_ref();
        loop {
            match at {
                LogicalPlan::Filter(f) => {
                    between.push(at);
                    at = &f.input;
                }
                LogicalPlan::Projection(p) => {
                    between.push(at);
                    at = &p.input;
                }
                LogicalPlan::SubqueryAlias(a) => at = &a.input,
                LogicalPlan::TableScan(scan) => {
                    let provider = source_as_provider(&scan.source)
                        .map_err(|e| self.here().invalid(e.to_string()))?;
                    let any = provider.as_ref() as &dyn Any;
                    return Ok(any
                        .downcast_ref::<WindowTvfTable>()
                        .map(|table| WindowTvfBelow {
                            scan,
                            table: table.clone(),
                            between,
                        }));
                }
                _ => return Ok(None),
            }
        }
    }

    /// The columns of the window function's scan: the input's, then the (not yet existing)
    /// window bounds, as far as the scan projects them. A declared table learns which of its
    /// columns the query reads.
    fn window_scan(&mut self, input: &WindowInput, scan: &TableScan) -> Vec<String> {
        let all: Vec<String> = input
            .names()
            .cloned()
            .chain(["window_start", "window_end", "window_time"].map(|c| format!("{VIRTUAL}{c}")))
            .collect();
        let columns: Vec<String> = match &scan.projection {
            Some(indices) => indices.iter().map(|&i| all[i].clone()).collect(),
            None => all,
        };
        if let Some(table) = &input.table {
            // The table's columns the query reads, and the window's time and partition
            // columns.
            let read = columns
                .iter()
                .filter(|c| !c.starts_with(VIRTUAL))
                .cloned()
                .chain([input.time.clone()])
                .chain(input.partition_by.iter().cloned());
            self.job.reads(table, read.collect::<Vec<_>>());
            // A scan whose filters stay unknown to the source: nothing of the table is skipped.
            self.job.scan(table);
        }
        columns
    }

    /// The filters and projections between the window function and the aggregate (`between`,
    /// top down): filters become filter operators on the table's rows after `stream`;
    /// projections are substituted into the expressions. Returns each plan column of the
    /// aggregate's input as an expression over the table's rows.
    fn between_tvf_and_aggregate(
        &mut self,
        between: &[&LogicalPlan],
        columns: &[String],
        stream: &mut Stream,
    ) -> Result<Vec<Expr>> {
        let mut exprs: Vec<Expr> = columns
            .iter()
            .map(|c| Expr::Column(Column::new_unqualified(c.clone())))
            .collect();
        for node in between.iter().rev() {
            match node {
                LogicalPlan::Filter(f) => {
                    let predicate = self.substitute(&f.predicate, f.input.schema(), &exprs)?;
                    let text = self.sql_over(&predicate)?;
                    let name = self.next_name("filter");
                    self.job.operator(
                        &name,
                        "filter",
                        &stream.node,
                        None,
                        serde_json::json!({ "predicate": text }),
                    );
                    stream.node = name;
                }
                LogicalPlan::Projection(p) => {
                    exprs = p
                        .expr
                        .iter()
                        .map(|e| self.substitute(unalias(e), p.input.schema(), &exprs))
                        .collect::<Result<Vec<_>>>()?;
                }
                _ => {}
            }
        }
        Ok(exprs)
    }

    /// The GROUP BY of a window aggregation: the window bounds (both `window_start` and
    /// `window_end` are required, as in Flink) and the keys, which must be the session's
    /// `PARTITION BY` columns when it has them.
    fn window_group_by(
        &self,
        agg: &Aggregate,
        exprs: &[Expr],
        input: &WindowInput,
    ) -> Result<WindowGroupBy> {
        let in_schema = agg.input.schema();
        let mut group_by = WindowGroupBy {
            keys: Vec::new(),
            out_columns: Vec::new(),
            has_start: false,
            has_end: false,
            has_time: false,
        };
        for (g, field) in agg.group_expr.iter().zip(agg.schema.fields()) {
            let Expr::Column(c) = unalias(g) else {
                return Err(self.unsupported_at(
                    "GROUP",
                    "a GROUP BY expression",
                    "group by columns; compute expressions in a subquery first",
                ));
            };
            let i = in_schema
                .index_of_column(c)
                .map_err(|e| self.here().invalid(e.to_string()))?;
            let e = exprs[i].clone();
            let bound = match &e {
                Expr::Column(col) => col.name.strip_prefix(VIRTUAL),
                _ => None,
            };
            match bound {
                Some("window_start") => group_by.has_start = true,
                Some("window_end") => group_by.has_end = true,
                // `window_end - 1 ms`: computed after the window, a time attribute of its
                // results.
                Some("window_time") => group_by.has_time = true,
                _ => {
                    let name = if is_simple_name(field.name()) {
                        field.name().clone()
                    } else {
                        format!("_k{}", group_by.keys.len())
                    };
                    group_by.out_columns.push(name.clone());
                    group_by.keys.push((name, e));
                    continue;
                }
            }
            group_by
                .out_columns
                .push(bound.unwrap_or_default().to_owned());
        }
        if !(group_by.has_start && group_by.has_end) {
            return Err(self.unsupported_at(
                "GROUP",
                "a window TVF grouped without window_start and window_end",
                "GROUP BY window_start, window_end (and keys), as in Flink",
            ));
        }
        if !input.partition_by.is_empty() {
            let mut partition = input.partition_by.clone();
            partition.sort();
            let mut key_columns: Vec<String> = group_by
                .keys
                .iter()
                .map(|(_, e)| match e {
                    Expr::Column(c) => c.name.clone(),
                    other => other.to_string(),
                })
                .collect();
            key_columns.sort();
            if partition != key_columns {
                return Err(self.unsupported_at(
                    "PARTITION",
                    "SESSION PARTITION BY columns that differ from the GROUP BY keys",
                    "partition the session by exactly the grouping keys",
                ));
            }
        }
        Ok(group_by)
    }

    /// The window operator `node`'s results as the plan's columns (the GROUP BY items in their
    /// order, then the aggregates), with `window_time` computed after it when grouped by.
    fn window_results(&mut self, node: String, out_columns: Vec<String>, has_time: bool) -> Stream {
        let marker = self.settings.late_policy.as_deref() == Some("update");
        if !has_time {
            return Stream {
                node,
                columns: out_columns,
                marker,
                changes: Changes::InsertOnly,
                scan: None,
                rowtimes: Vec::new(),
                window: Some(Bounds::aggregated()),
            };
        }
        // A window's results are emitted before the watermark that closed it passes on, so
        // none is behind the watermark at its `window_time`: a time attribute.
        let mut expressions: Vec<String> = out_columns
            .iter()
            .filter(|c| *c != "window_time")
            .map(|c| quote(c))
            .collect();
        expressions.push("window_end - INTERVAL '1 millisecond' AS window_time".to_owned());
        if marker {
            expressions.push(UPDATE_MARKER.to_owned());
        }
        let node = self.project(&node, expressions);
        Stream {
            node,
            columns: out_columns,
            marker,
            changes: Changes::InsertOnly,
            scan: None,
            rowtimes: if marker {
                Vec::new()
            } else {
                vec!["window_time".to_owned()]
            },
            window: Some(Bounds::assigned()),
        }
    }
}
