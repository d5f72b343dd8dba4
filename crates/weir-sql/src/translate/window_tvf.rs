//! `SELECT ... FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), ...))` without a `GROUP BY`: the
//! table's rows, each once per window it belongs to, with `window_start`, `window_end` and
//! `window_time`, as a `window_tvf` operator. What follows decides what the windows mean (a
//! window Top-N, [`super::rank`]).

use super::{Bounds, Changes, Stream, Translator};
use crate::error::Result;
use crate::tvf::WindowTvfTable;
use datafusion::logical_expr::TableScan;

/// The columns a window table function adds to its input's.
const WINDOW_COLUMNS: [&str; 3] = ["window_start", "window_end", "window_time"];

impl Translator<'_> {
    /// Translates the scan of a window TVF that no aggregation consumed.
    pub(super) fn window_tvf(&mut self, scan: &TableScan, tvf: &WindowTvfTable) -> Result<Stream> {
        if !tvf.partition_by.is_empty() || tvf.window["type"] == "session" {
            return Err(self.unsupported_at(
                "SESSION",
                "a SESSION window table function without GROUP BY",
                "a session's bounds depend on the other rows of its key: aggregate over it \
                 with GROUP BY window_start, window_end",
            ));
        }
        let input = self.window_input(tvf)?;
        let all: Vec<String> = input
            .names()
            .cloned()
            .chain(WINDOW_COLUMNS.map(str::to_owned))
            .collect();
        let columns: Vec<String> = match &scan.projection {
            Some(indices) => indices.iter().map(|&i| all[i].clone()).collect(),
            None => all.clone(),
        };
        if let Some(table) = &input.table {
            let read = input
                .names()
                .filter(|c| columns.contains(c))
                .cloned()
                .chain([input.time.clone()]);
            self.job.reads(table, read.collect::<Vec<_>>());
            // Nothing of the table is skipped: filters above see the windowed rows.
            self.job.scan(table);
        }
        let node = self.next_name("window_tvf");
        self.job.operator(
            &node,
            "window_tvf",
            &input.node,
            None,
            serde_json::json!({ "time_column": input.time, "window": tvf.window }),
        );
        Ok(Stream {
            node,
            columns,
            marker: false,
            changes: Changes::InsertOnly,
            scan: None,
            rowtimes: Vec::new(),
            window: Some(Bounds::assigned()),
        })
    }
}
