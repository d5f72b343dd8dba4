//! The end-of-run summary table and the live progress bar.

use indicatif::{ProgressBar, ProgressStyle};
use std::fmt::Write;
use std::sync::Arc;
use weir::RunSummary;
use weir::runtime::JobMetrics;

/// Peak resident memory of this process in bytes (Linux `VmHWM`), if known.
pub(crate) fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The summary as JSON (for scripts and tests).
pub(crate) fn to_json(summary: &RunSummary, peak_rss: Option<u64>) -> String {
    let secs = summary.wall_time.as_secs_f64();
    let rows = summary.metrics.source_rows();
    serde_json::json!({
        "job": summary.job_id,
        "wall_time_secs": secs,
        "source_rows": rows,
        "sink_rows": summary.metrics.sink_rows(),
        "rows_per_sec": if secs > 0.0 { rows as f64 / secs } else { 0.0 },
        "peak_rss_bytes": peak_rss,
        "semantic_mode": summary.semantic_mode,
        "first_output_secs": summary.first_output.map(|d| d.as_secs_f64()),
        "checkpoints": summary.checkpoints,
        "operators": summary.metrics.operators,
    })
    .to_string()
}

/// The summary as a table for people.
pub(crate) fn render(summary: &RunSummary, peak_rss: Option<u64>) -> String {
    let secs = summary.wall_time.as_secs_f64();
    let rows = summary.metrics.source_rows();
    let mut s = String::new();
    let _ = writeln!(s, "job {} finished in {:.3} s", summary.job_id, secs);
    let _ = writeln!(
        s,
        "{:<24} {:>14} {:>14} {:>12} {:>10}",
        "operator", "rows in", "rows out", "dead letters", "dropped"
    );
    for o in &summary.metrics.operators {
        let _ = writeln!(
            s,
            "{:<24} {:>14} {:>14} {:>12} {:>10}",
            o.operator_id, o.rows_in, o.rows_out, o.dead_letters, o.dropped
        );
    }
    let _ = write!(s, "{}", render_lag(&summary.metrics.operators));
    let rate = if secs > 0.0 { rows as f64 / secs } else { 0.0 };
    let _ = writeln!(s, "source rows: {rows} ({rate:.0} rows/s)");
    let mode = serde_json::to_value(summary.semantic_mode)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let _ = writeln!(s, "semantic mode: {mode}");
    if let Some(c) = &summary.checkpoints {
        let restored = c
            .restored_from
            .map_or(String::new(), |e| format!(", restored from epoch {e}"));
        let last = match (c.last_durable_epoch, c.last_duration_ms) {
            (Some(e), Some(ms)) => format!(", last epoch {e} took {ms} ms"),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "checkpoints: {} completed, {} aborted{last}{restored} (attempt {}, {} restarts)",
            c.completed, c.aborted, c.attempt, c.restarts
        );
        if c.restored_from_copy {
            let _ = writeln!(
                s,
                "restore: the manifest of the restored epoch was damaged; its copy in the epoch \
                 log was used"
            );
        }
        if !c.passed_over_epochs.is_empty() {
            let epochs = c
                .passed_over_epochs
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            let duplicates = if c.duplicates_accepted {
                "; duplicates accepted for sinks that cannot withdraw"
            } else {
                ""
            };
            let _ = writeln!(
                s,
                "restore: passed over durable epoch(s) {epochs}; withdrew {} published file(s) \
                 of them before the replay{duplicates}",
                c.withdrawn_files.len()
            );
            for file in &c.withdrawn_files {
                let _ = writeln!(s, "  withdrawn: {file}");
            }
        }
    }
    if let Some(rss) = peak_rss {
        let _ = writeln!(s, "peak memory: {:.1} MiB", rss as f64 / (1024.0 * 1024.0));
    }
    s
}

/// One line per source whose splits reported a backlog, e.g.
/// `source bids: lag bids/0=0 bids/1=12`; nothing for the others.
fn render_lag(operators: &[weir::runtime::OperatorSnapshot]) -> String {
    let mut s = String::new();
    for o in operators.iter().filter(|o| !o.lag.is_empty()) {
        let _ = write!(s, "source {}: lag", o.operator_id);
        for l in &o.lag {
            let _ = write!(s, " {}={}", l.split, l.backlog);
        }
        s.push('\n');
    }
    s
}

/// A progress bar over the sources' splits (by bytes where known), refreshed from live metrics.
pub(crate) struct Progress {
    stop: tokio::sync::oneshot::Sender<()>,
    handle: tokio::task::JoinHandle<()>,
}

impl Progress {
    pub(crate) fn start(metrics: Arc<JobMetrics>) -> Self {
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let handle = tokio::spawn(async move {
            let bar = ProgressBar::new(0);
            let style = ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] [{bar:30}] {percent:>3}% {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            loop {
                let snap = metrics.snapshot();
                let (done, total) = if snap.source_bytes_total > 0 {
                    (snap.source_bytes_done, snap.source_bytes_total)
                } else {
                    (snap.splits_done, snap.splits_total)
                };
                bar.set_length(total.max(1));
                bar.set_position(done);
                let rows = snap.source_rows();
                bar.set_message(format!(
                    "{}/{} splits, {rows} rows read",
                    snap.splits_done, snap.splits_total
                ));
                tokio::select! {
                    _ = &mut stopped => break,
                    _ = tokio::time::sleep(crate::PROGRESS_TICK) => {}
                }
            }
            bar.finish_and_clear();
        });
        Progress { stop, handle }
    }

    pub(crate) async fn finish(self) {
        let _ = self.stop.send(());
        let _ = self.handle.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir::runtime::{OperatorSnapshot, SplitLag};

    fn operator(id: &str, kind: &'static str, lag: &[(&str, u64)]) -> OperatorSnapshot {
        OperatorSnapshot {
            operator_id: id.into(),
            kind,
            rows_in: 0,
            rows_out: 0,
            batches_in: 0,
            dead_letters: 0,
            dropped: 0,
            alignment_pauses: 0,
            lag: lag
                .iter()
                .map(|(split, backlog)| SplitLag {
                    split: (*split).into(),
                    backlog: *backlog,
                })
                .collect(),
            positions: vec![],
        }
    }

    #[test]
    fn lag_is_shown_only_for_sources_whose_splits_reported_it() {
        let operators = [
            operator("bids", "source", &[("bids/0", 0), ("bids/1", 12)]),
            operator("files", "source", &[]),
            operator("out", "sink", &[]),
        ];
        assert_eq!(
            render_lag(&operators),
            "source bids: lag bids/0=0 bids/1=12\n"
        );
    }
}
