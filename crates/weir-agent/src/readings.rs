//! A running job's counters as the workbench reads them: one [`MetricsSample`] of its operator
//! subtasks and source splits, and its checkpoint counters and newest epochs as JSON. The Agent
//! pushes them to the Hub for its lanes; `weir run --ui` keeps them for its one job.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};
use weir::runtime::{CheckpointProbe, JobMetrics, SubtaskSnapshot};
use weir_control::{MetricsSample, OperatorReading, SplitReading, SubtaskSample};

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The counters of `metrics` now.
pub fn sample(metrics: &JobMetrics) -> MetricsSample {
    let at_ms = now_ms();
    let snapshot = metrics.snapshot();
    let backlogs: HashMap<(&str, &str), u64> = snapshot
        .operators
        .iter()
        .flat_map(|o| {
            o.lag
                .iter()
                .map(|l| ((o.operator_id.as_str(), l.split.as_str()), l.backlog))
        })
        .collect();
    let positions: HashMap<(&str, &str), u64> = snapshot
        .operators
        .iter()
        .flat_map(|o| {
            o.positions
                .iter()
                .map(|p| ((o.operator_id.as_str(), p.split.as_str()), p.next_record))
        })
        .collect();
    let splits = metrics
        .split_rows()
        .into_iter()
        .map(|(operator_id, split, rows_read)| SplitReading {
            backlog: backlogs
                .get(&(operator_id.as_str(), split.as_str()))
                .copied(),
            position: positions
                .get(&(operator_id.as_str(), split.as_str()))
                .copied(),
            operator_id,
            split,
            rows_read,
        })
        .collect();
    let operators = snapshot
        .operators
        .iter()
        .map(|o| OperatorReading {
            operator_id: o.operator_id.clone(),
            dropped: o.dropped,
            dead_letters: o.dead_letters,
        })
        .collect();
    MetricsSample {
        at_ms,
        operators,
        subtasks: metrics.subtasks().into_iter().map(subtask_sample).collect(),
        splits,
    }
}

/// The wire form of a subtask's counters. Both sides are named field by field, without `..`:
/// a field added to the runtime's snapshot or to the wire form alone does not compile here.
fn subtask_sample(s: SubtaskSnapshot) -> SubtaskSample {
    let SubtaskSnapshot {
        operator_id,
        kind,
        subtask,
        rows_in,
        rows_out,
        batches_in,
        batches_out,
        bytes_in,
        bytes_out,
        heads_task,
        idle_ns,
        busy_ns,
        backpressured_ns,
        watermark_ms,
        max_event_time_ms,
        late_routed,
        late_updated,
        state_entries,
        state_bytes,
    } = s;
    SubtaskSample {
        operator_id,
        kind,
        subtask,
        rows_in,
        rows_out,
        batches_in,
        batches_out,
        bytes_in,
        bytes_out,
        heads_task,
        idle_ns,
        busy_ns,
        backpressured_ns,
        watermark_ms,
        max_event_time_ms,
        late_routed,
        late_updated,
        state_entries,
        state_bytes,
    }
}

/// The checkpoint counters of a run as JSON; `None` when it takes no checkpoints.
pub fn checkpoint_summary(probe: &CheckpointProbe) -> Option<serde_json::Value> {
    probe.summary().and_then(|s| serde_json::to_value(s).ok())
}

/// What of a run's epochs was handed on last: how many, and the newest with its status. The
/// history changes only when an epoch is triggered, completes or aborts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochsMark(Option<(usize, u64, String)>);

/// The run's newest epochs, oldest first, as JSON, and their mark; the epochs are `None` when
/// their mark equals `sent` (they did not change since they were handed on).
pub fn epochs_since(
    probe: &CheckpointProbe,
    sent: Option<&EpochsMark>,
) -> (EpochsMark, Option<Vec<serde_json::Value>>) {
    let epochs = probe.recent_epochs();
    let mark = EpochsMark(
        epochs
            .last()
            .map(|e| (epochs.len(), e.epoch, e.status.clone())),
    );
    if sent == Some(&mark) {
        return (mark, None);
    }
    let json = epochs
        .iter()
        .filter_map(|e| serde_json::to_value(e).ok())
        .collect();
    (mark, Some(json))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire form says what the runtime's snapshot says, field for field and under the same
    /// JSON names, so the workbench reads a lane's counters as `weir run --ui` shows them.
    #[test]
    fn a_subtask_sample_carries_every_field_of_the_snapshot() {
        let snapshot = SubtaskSnapshot {
            operator_id: "window".into(),
            kind: "operator".into(),
            subtask: 3,
            rows_in: 1,
            rows_out: 2,
            batches_in: 3,
            batches_out: 4,
            bytes_in: 5,
            bytes_out: 6,
            heads_task: true,
            idle_ns: 7,
            busy_ns: 8,
            backpressured_ns: 9,
            watermark_ms: Some(10),
            max_event_time_ms: Some(11),
            late_routed: 12,
            late_updated: 13,
            state_entries: Some(14),
            state_bytes: Some(15),
        };
        let runtime = serde_json::to_value(&snapshot).expect("snapshot as JSON");
        let wire = serde_json::to_value(subtask_sample(snapshot)).expect("sample as JSON");
        assert_eq!(wire, runtime);
    }
}
