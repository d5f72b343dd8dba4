//! The live checkpoint counters of a run and its per-epoch history, written by the coordinator
//! and read through [`CheckpointProbe`](crate::CheckpointProbe) (a metrics scrape, the web
//! workbench).

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Checkpoint counters of a run, reported in its summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointSummary {
    /// The attempt of the last run (a restart takes a new one).
    pub attempt: u64,
    /// Epochs made durable in this run.
    pub completed: u64,
    /// Epochs aborted in this run (timeouts, storage failures).
    pub aborted: u64,
    /// The newest durable epoch.
    pub last_durable_epoch: Option<u64>,
    /// Trigger to commit of the newest durable epoch, ms.
    pub last_duration_ms: Option<u64>,
    /// The longest trigger-to-commit time of the run, ms.
    pub max_duration_ms: Option<u64>,
    /// State segment bytes of the newest durable epoch.
    pub last_state_bytes: Option<u64>,
    /// The largest state of a durable epoch of the run, in segment bytes.
    pub max_state_bytes: Option<u64>,
    /// The epoch the run restored, if it restored one.
    pub restored_from: Option<u64>,
    /// Whether the restored epoch's manifest object was damaged or gone and its copy in the
    /// epoch log was restored instead.
    pub restored_from_copy: bool,
    /// Durable epochs newer than the restored one that a restore passed over (their
    /// checkpoints were damaged or incomplete, or an older epoch was asked for).
    pub passed_over_epochs: Vec<u64>,
    /// Published output of the passed-over epochs that sinks withdrew before the replay
    /// (for the file sink, the part files' paths).
    pub withdrawn_files: Vec<String>,
    /// Whether a restore passed over durable epochs although a sink could not withdraw their
    /// output, because the run accepted duplicates (`accept_duplicates`).
    pub duplicates_accepted: bool,
    /// Automatic restarts after failures.
    pub restarts: u32,
    /// Epochs triggered in this run (completed, aborted, or in flight).
    pub triggered: u64,
    /// Epochs triggered and not yet durable (at most 1: one epoch runs at a time).
    pub pending_epochs: u64,
    /// Sink transactions pre-committed and not yet committed.
    pub pending_sink_transactions: u64,
    /// Older attempts of the job that this run's attempts fenced as they started: one for each
    /// start that found an older attempt (a previous run, or this run's attempt before a
    /// restart).
    pub fenced_older_attempts: u64,
    /// Times an attempt of this run found itself fenced: a newer attempt had started, so its
    /// manifest was refused (the run then fails without restarting).
    pub fenced: u64,
}

/// How many epochs [`CheckpointProbe::recent_epochs`](crate::CheckpointProbe::recent_epochs)
/// keeps: the last ones of the run.
pub const EPOCH_HISTORY: usize = 50;

/// One epoch of the run that completed or was aborted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EpochStats {
    /// The epoch.
    pub epoch: u64,
    /// `checkpoint`, `savepoint` or `final` (the last epoch of a bounded job).
    pub kind: String,
    /// `completed` (durable and committed) or `aborted`.
    pub status: String,
    /// Why it was aborted (a timeout, a storage failure); `None` when it completed.
    pub cause: Option<String>,
    /// When it was triggered, ms since the Unix epoch.
    pub triggered_at_ms: i64,
    /// Trigger to commit (completed) or to abort, ms.
    pub duration_ms: u64,
    /// Bytes of the state segments of every task's snapshot.
    pub state_bytes: u64,
    /// Per task, in the plan's task order: every task of the epoch when it completed, the tasks
    /// that acknowledged it when it was aborted.
    pub tasks: Vec<TaskEpochStats>,
}

/// One task's part of an epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskEpochStats {
    /// The task's head operator (the first of its chain).
    pub operator_id: String,
    /// The task's subtask index.
    pub subtask: u32,
    /// Bytes of the state segments of the task's snapshot.
    pub state_bytes: u64,
    /// Entries (rows) of those segments; `None` when the task had ended before the epoch and
    /// took part without a snapshot.
    pub state_entries: Option<u64>,
    /// From the epoch's first barrier to its last at this task's input gate, ms; 0 for a task
    /// with one input channel or none (a source task).
    pub alignment_ms: u64,
    /// From the trigger to this task's acknowledgement (its snapshot written), ms; 0 for a task
    /// that had ended.
    pub ack_ms: u64,
}

/// The live checkpoint counters of a run and the history of its last [`EPOCH_HISTORY`] epochs.
#[derive(Debug, Default)]
pub(crate) struct LiveCheckpoints {
    pub(crate) summary: CheckpointSummary,
    pub(crate) epochs: VecDeque<EpochStats>,
}

/// Shared between the coordinators of a run's attempts and the probes that read them.
pub(crate) type SharedSummary = Arc<Mutex<LiveCheckpoints>>;

/// Updates the shared counters; a poisoned lock only loses statistics.
pub(crate) fn update(summary: &SharedSummary, f: impl FnOnce(&mut CheckpointSummary)) {
    if let Ok(mut s) = summary.lock() {
        f(&mut s.summary);
    }
}

/// Adds an epoch to the history, dropping the oldest beyond [`EPOCH_HISTORY`].
pub(crate) fn record_epoch(summary: &SharedSummary, stats: EpochStats) {
    if let Ok(mut s) = summary.lock() {
        while s.epochs.len() >= EPOCH_HISTORY {
            s.epochs.pop_front();
        }
        s.epochs.push_back(stats);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epoch(n: u64) -> EpochStats {
        EpochStats {
            epoch: n,
            kind: "checkpoint".into(),
            status: "completed".into(),
            cause: None,
            triggered_at_ms: 1_700_000_000_000,
            duration_ms: 12,
            state_bytes: 0,
            tasks: vec![TaskEpochStats {
                operator_id: "gen".into(),
                subtask: 0,
                state_bytes: 0,
                state_entries: Some(0),
                alignment_ms: 0,
                ack_ms: 3,
            }],
        }
    }

    #[test]
    fn the_history_keeps_the_last_epochs_oldest_first() {
        let shared = SharedSummary::default();
        for n in 1..=EPOCH_HISTORY as u64 + 7 {
            record_epoch(&shared, epoch(n));
        }
        let epochs: Vec<u64> = shared
            .lock()
            .map(|s| s.epochs.iter().map(|e| e.epoch).collect())
            .unwrap_or_default();
        assert_eq!(epochs.len(), EPOCH_HISTORY);
        assert_eq!(epochs.first(), Some(&8));
        assert_eq!(epochs.last(), Some(&(EPOCH_HISTORY as u64 + 7)));
    }

    #[test]
    fn epoch_stats_serialize_in_camel_case_and_read_back() {
        let e = epoch(3);
        let json = serde_json::to_value(&e).unwrap_or_default();
        assert_eq!(json["triggeredAtMs"], 1_700_000_000_000_i64);
        assert_eq!(json["tasks"][0]["operatorId"], "gen");
        assert_eq!(json["tasks"][0]["stateEntries"], 0);
        assert_eq!(json["tasks"][0]["ackMs"], 3);
        let back: EpochStats = serde_json::from_value(json).unwrap_or_else(|_| epoch(0));
        assert_eq!(back, e);
    }
}
