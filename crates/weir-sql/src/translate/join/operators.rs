//! Which operator a join runs as (`How`), and the operator itself: an `interval_join` where
//! the times are bounded, a `table_join` with a bounded table read in full first, else a
//! `regular_join`.

use super::{How, Interval, JoinSides};
use crate::error::Result;
use crate::translate::Translator;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{Expr, Join};

/// Each side's node and join keys as the join operator reads them, the left's first.
type Inputs = [(String, Vec<String>); 2];

impl Translator<'_> {
    /// How a join of `kind` runs, and the conjuncts of its filter left to evaluate on its
    /// pairs or after it: an interval join where `interval` bounds the times, a table join
    /// with a bounded input, else a regular join (refused for a semi or anti join).
    pub(super) fn join_how(
        &self,
        join: &Join,
        kind: &'static str,
        updating: bool,
        interval: Option<(Interval, Vec<Expr>)>,
    ) -> Result<(How, Vec<Expr>)> {
        // Every condition but the keys: a filter after a table join, which pairs match in a
        // regular join.
        let conjuncts = || -> Vec<Expr> {
            join.filter
                .as_ref()
                .map(|f| split_conjunction(f).into_iter().cloned().collect())
                .unwrap_or_default()
        };
        match interval {
            Some((interval, residual)) => Ok((How::Interval(interval), residual)),
            _ if !updating && (self.is_bounded(&join.right) || self.is_bounded(&join.left)) => {
                Ok((self.table_how(join, kind)?, conjuncts()))
            }
            _ if matches!(kind, "semi" | "anti") => Err(self.unsupported_at(
                "EXISTS",
                "EXISTS, NOT EXISTS or IN over a stream without a time bound",
                "a regular semi or anti join is not there yet; bound the times (an \
                 interval join) or filter by a bounded table",
            )),
            _ => Ok((How::Regular, conjuncts())),
        }
    }

    /// A join with a bounded table, read in full first. The table's unmatched rows are never
    /// final while the stream goes on, so it is a side that is not padded; of two bounded
    /// sides, the right one unless the join keeps its unmatched rows.
    fn table_how(&self, join: &Join, kind: &'static str) -> Result<How> {
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
        Ok(How::Table {
            stream: 1 - table,
            join: match kind {
                "semi" | "anti" => kind,
                "inner" => "inner",
                _ => "left",
            },
        })
    }

    /// Adds the join operator `how` says over `inputs`, with the pairs' `condition`; returns
    /// its name.
    pub(super) fn join_operator(
        &mut self,
        how: How,
        kind: &str,
        inputs: Inputs,
        condition: Option<String>,
        sides: &JoinSides,
    ) -> Result<String> {
        match how {
            How::Interval(interval) => {
                self.interval_join_operator(kind, inputs, interval, condition, sides)
            }
            How::Regular => Ok(self.regular_join_operator(kind, inputs, condition)),
            How::Table { stream, join } => Ok(self.table_join_operator(inputs, stream, join)),
        }
    }

    /// An `interval_join` on `interval`'s times and bounds; with late rows routed, each
    /// input's late rows go to the late sink under the names its own table gives them.
    fn interval_join_operator(
        &mut self,
        kind: &str,
        inputs: Inputs,
        interval: Interval,
        condition: Option<String>,
        sides: &JoinSides,
    ) -> Result<String> {
        let name = self.next_name("interval_join");
        let mut options = serde_json::json!({
            "join": kind,
            "left_keys": inputs[0].1,
            "right_keys": inputs[1].1,
            "left_time": interval.left_time,
            "right_time": sides.rename(&interval.right_time),
            "lower": interval.lower,
            "upper": interval.upper,
        });
        if let Some(condition) = condition {
            options["condition"] = serde_json::json!(condition);
        }
        self.add_buffer_bytes(&mut options);
        let late = self.row_late_option("JOIN", "a join")?;
        if let Some(late) = &late {
            options["late"] = late.clone();
        }
        self.job
            .operator_of_inputs(&name, "interval_join", &inputs, options);
        if late.is_some() {
            // Each input's late rows under the names its own table gives them.
            let left_columns = crate::translate::late::same_names(&sides.left_physical);
            self.route_late(&format!("{name}.late_left"), &left_columns)?;
            let right_columns: Vec<(String, String)> = sides
                .right_physical
                .iter()
                .cloned()
                .zip(sides.right_names.iter().cloned())
                .collect();
            self.route_late(&format!("{name}.late_right"), &right_columns)?;
        }
        Ok(name)
    }

    /// A `regular_join`: equal keys at any distance in time, its state kept for the state TTL.
    fn regular_join_operator(
        &mut self,
        kind: &str,
        inputs: Inputs,
        condition: Option<String>,
    ) -> String {
        let name = self.next_name("regular_join");
        let mut options = serde_json::json!({
            "join": kind,
            "left_keys": inputs[0].1,
            "right_keys": inputs[1].1,
        });
        self.add_state_ttl(&mut options);
        self.add_buffer_bytes(&mut options);
        if let Some(condition) = condition {
            options["condition"] = serde_json::json!(condition);
        }
        self.job
            .operator_of_inputs(&name, "regular_join", &inputs, options);
        name
    }

    /// A `table_join` of the stream on side `stream` (0 left) with the bounded table on the
    /// other, the stream its first input.
    fn table_join_operator(
        &mut self,
        mut inputs: Inputs,
        stream: usize,
        join: &'static str,
    ) -> String {
        let name = self.next_name("table_join");
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
}
