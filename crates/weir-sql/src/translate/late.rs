//! Late rows of a query under `SET 'late.policy'`: the `late` option of the operators that
//! judge rows against the watermark one by one (OVER, deduplication, window Top-N, interval
//! and window joins), and the sink that routed late rows go to (`SET 'late.sink'`).

use super::{Translator, quote};
use crate::error::Result;

/// The column routed late rows carry besides their own: why they were late.
const LATE_REASON: &str = "__weir_late_reason";

impl Translator<'_> {
    /// The `late` option of an operator other than a window, `what` (at the statement's
    /// `keyword`): `{policy: route}` under `'late.policy' = 'route'`, none under `drop`.
    ///
    /// # Errors
    /// `'late.policy' = 'update'`: only a window aggregation can correct a result it emitted.
    pub(super) fn row_late_option(
        &self,
        keyword: &str,
        what: &str,
    ) -> Result<Option<serde_json::Value>> {
        match self.settings.late_policy.as_deref() {
            Some("route") => Ok(Some(serde_json::json!({ "policy": "route" }))),
            Some("update") => Err(self.unsupported_at(
                keyword,
                &format!("'late.policy' = 'update' for {what}"),
                "only a window aggregation corrects results with late rows; SET 'late.policy' \
                 = 'route' (with 'late.sink') or 'drop' before this INSERT",
            )),
            _ => Ok(None),
        }
    }

    /// Writes the late rows of side output `output` (`node.name`) to the late table of
    /// `'late.sink'`, if one is set: each of its columns from the late rows' column of that
    /// name (`columns`: the name the table sees, then the late rows' column), and
    /// `__weir_late_reason`.
    ///
    /// # Errors
    /// A late table with a column the late rows lack; an unknown late table.
    pub(super) fn route_late(&mut self, output: &str, columns: &[(String, String)]) -> Result<()> {
        let Some(sink) = self.settings.late_sink.clone() else {
            return Ok(());
        };
        let wanted = self.job.sink_columns(&sink, self.here())?;
        let mut expressions = Vec::with_capacity(wanted.len());
        for column in &wanted {
            if column == LATE_REASON {
                expressions.push(quote(column));
                continue;
            }
            match columns.iter().find(|(name, _)| name == column) {
                Some((name, from)) if name == from => expressions.push(quote(name)),
                Some((name, from)) => {
                    expressions.push(format!("{} AS {}", quote(from), quote(name)))
                }
                None => {
                    let names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
                    return Err(self.here().invalid(format!(
                        "late rows of this query have the columns {} and {LATE_REASON}; the \
                         late table `{sink}` also wants `{column}`",
                        names.join(", ")
                    )));
                }
            }
        }
        let project = self.project(output, expressions);
        let name = self.next_name(&format!("{sink}_late"));
        self.job.sink(&name, &sink, &project, self.here())
    }
}

/// `columns` as they are named: the pairs [`Translator::route_late`] takes for rows whose
/// columns keep their names.
pub(super) fn same_names(columns: &[String]) -> Vec<(String, String)> {
    columns.iter().map(|c| (c.clone(), c.clone())).collect()
}
