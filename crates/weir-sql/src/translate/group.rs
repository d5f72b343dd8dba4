//! `GROUP BY` without a window, and `SELECT DISTINCT`: a `group_aggregate` operator, whose
//! results update as rows arrive ([`Changes::Updating`], keyed by the group keys).

use super::{Changes, Since, Stream, Translator, is_simple_name, quote, unalias};
use crate::error::Result;
use datafusion::common::Column;
use datafusion::logical_expr::{Aggregate, Expr, LogicalPlan};

impl Translator<'_> {
    /// `SELECT keys, aggregates FROM input GROUP BY keys` over any stream.
    pub(super) fn group_aggregate(&mut self, agg: &Aggregate) -> Result<Stream> {
        let input = self.plan(&agg.input)?;
        let in_schema = agg.input.schema();
        // Each plan column of the input as an expression over its physical column.
        let exprs: Vec<Expr> = input
            .columns
            .iter()
            .map(|c| Expr::Column(Column::new_unqualified(c.clone())))
            .collect();
        let mut keys: Vec<(String, Expr)> = Vec::new();
        for (i, (g, field)) in agg.group_expr.iter().zip(agg.schema.fields()).enumerate() {
            if matches!(unalias(g), Expr::GroupingSet(_)) {
                return Err(self.unsupported_at(
                    "GROUP",
                    "GROUPING SETS, ROLLUP and CUBE",
                    "group by one list of columns",
                ));
            }
            let e = self.substitute(unalias(g), in_schema, &exprs)?;
            let name =
                if is_simple_name(field.name()) && !keys.iter().any(|(n, _)| n == field.name()) {
                    field.name().clone()
                } else {
                    format!("_k{i}")
                };
            keys.push((name, e));
        }
        let calls = self.aggregate_calls(agg, &exprs, &|_| false, false)?;
        let mut specs = calls.specs;
        let mut columns: Vec<String> = keys.iter().map(|(n, _)| n.clone()).collect();
        if let Some(clash) = calls.names.iter().find(|n| columns.contains(n)) {
            return Err(self.here().invalid(format!(
                "the aggregate `{clash}` has the name of a grouping column; rename it with AS"
            )));
        }
        columns.extend(calls.names);
        let plain = |name: &str, e: &Expr| matches!(e, Expr::Column(c) if c.name == name);
        let needs_project = keys.iter().chain(&calls.args).any(|(n, e)| !plain(n, e));
        let mut node = input.node.clone();
        if needs_project {
            // Keys and arguments under their own names; the row kinds of an updating input
            // pass through the projection by themselves.
            let mut expressions = Vec::with_capacity(keys.len() + calls.args.len());
            for (name, e) in keys.iter().chain(&calls.args) {
                expressions.push(format!("{} AS {}", self.sql_over(e)?, quote(name)));
            }
            node = self.project(&node, expressions);
        } else {
            for spec in &mut specs {
                if let Some(arg) = spec.get("column").and_then(|c| c.as_str())
                    && let Some((_, Expr::Column(c))) = calls.args.iter().find(|(n, _)| n == arg)
                {
                    spec["column"] = serde_json::json!(c.name);
                }
            }
        }
        let key_names: Vec<String> = keys.iter().map(|(n, _)| n.clone()).collect();
        let name = self.next_name("group");
        let mut options = serde_json::json!({ "key_by": key_names, "aggregates": specs });
        self.add_state_ttl(&mut options);
        self.add_buffer_bytes(&mut options);
        let partition = (!key_names.is_empty()).then(|| key_names.clone());
        self.job
            .operator(&name, "group_aggregate", &node, partition, options);
        if key_names.is_empty() {
            self.job.set_parallelism(&name, 1);
        }
        // DataFusion plans `SELECT DISTINCT` as a GROUP BY of every column.
        let since = if agg.aggr_expr.is_empty() && self.stmt.find_word("GROUP").is_none() {
            Since::new("DISTINCT", "SELECT DISTINCT")
        } else {
            Since::new("GROUP", "a GROUP BY without a window")
        };
        Ok(Stream {
            node: name,
            columns,
            marker: false,
            changes: Changes::Updating {
                key: Some(key_names),
                since,
            },
            scan: None,
            rowtimes: Vec::new(),
            window: None,
        })
    }

    /// `SELECT DISTINCT columns FROM input`: the distinct rows, each inserted once and deleted
    /// when an updating input retracts its last copy.
    pub(super) fn distinct(&mut self, input: &LogicalPlan) -> Result<Stream> {
        let stream = self.plan(input)?;
        let mut keys: Vec<String> = Vec::with_capacity(stream.columns.len());
        let mut expressions = Vec::with_capacity(stream.columns.len());
        for (i, (c, field)) in stream
            .columns
            .iter()
            .zip(input.schema().fields())
            .enumerate()
        {
            let name = if is_simple_name(field.name()) && !keys.contains(field.name()) {
                field.name().clone()
            } else {
                format!("_k{i}")
            };
            expressions.push(format!("{} AS {}", quote(c), quote(&name)));
            keys.push(name);
        }
        let node = self.project(&stream.node, expressions);
        let name = self.next_name("distinct");
        let mut options = serde_json::json!({ "key_by": keys, "aggregates": [] });
        self.add_state_ttl(&mut options);
        self.add_buffer_bytes(&mut options);
        self.job
            .operator(&name, "group_aggregate", &node, Some(keys.clone()), options);
        Ok(Stream {
            node: name,
            columns: keys.clone(),
            marker: false,
            changes: Changes::Updating {
                key: Some(keys),
                since: Since::new("DISTINCT", "SELECT DISTINCT"),
            },
            scan: None,
            rowtimes: Vec::new(),
            window: None,
        })
    }

    /// The stream of `plan`, refused when its rows update: `construct` (at the first `word`)
    /// takes only final rows.
    pub(super) fn final_rows(
        &mut self,
        plan: &LogicalPlan,
        word: &str,
        construct: &str,
    ) -> Result<Stream> {
        let stream = self.plan(plan)?;
        if let Changes::Updating { since, .. } = &stream.changes {
            return Err(self.unsupported_at(
                word,
                &format!("{construct} over updating results"),
                &format!(
                    "the results of {} change as rows arrive, and {construct} takes only \
                     final rows; apply it before the aggregation, or aggregate over a window",
                    since.what
                ),
            ));
        }
        Ok(stream)
    }
}
