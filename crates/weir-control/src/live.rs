//! What a running job looks like while it runs, for the workbench: the samples of its lanes'
//! counters an Agent pushes to the Hub every second, the history the Hub (or `weir run --ui`)
//! keeps of them, and the views of a job's checkpoints and of one manifest.
//!
//! The counters of an operator subtask are typed here ([`SubtaskSample`], what the runtime's
//! `SubtaskSnapshot` holds): the history keeps hundreds of them per lane. A run's checkpoint
//! counters (`CheckpointSummary`) and its newest epochs' statistics (`EpochStats`), kept once
//! per lane, travel as the runtime's JSON objects ([`serde_json::Value`], camelCase); this crate
//! does not link the runtime.

use crate::jobs::RecoveryRecord;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use utoipa::ToSchema;

/// How many samples of a lane the history keeps: ten minutes at one a second.
pub const HISTORY_SAMPLES: usize = 600;

/// The most a lane's history holds, as JSON (its samples, checkpoint counters and epochs):
/// fewer samples than [`HISTORY_SAMPLES`] are kept for a lane whose samples are larger.
pub const HISTORY_LANE_BYTES: usize = 8 << 20;

/// The most the whole history holds, as JSON: past it, the oldest samples of the largest lanes
/// go first.
pub const HISTORY_TOTAL_BYTES: usize = 512 << 20;

/// The size of `value` as JSON, counted without building it.
fn json_size<T: Serialize>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing into a counter cannot fail; a value that does not serialize counts as what it
    // wrote so far.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// Rows read from one split of a source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SplitReading {
    /// The source operator.
    pub operator_id: String,
    /// The split (`topic/partition` for Kafka).
    pub split: String,
    /// Rows read from it so far in this run.
    pub rows_read: u64,
    /// Its cursor after the latest read: the index of the next record (Kafka: the next
    /// offset), once it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    /// Records between its cursor and its known end when it last reported, when it reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<u64>,
}

/// The counters of one operator subtask at one moment, cumulative over the lane's run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubtaskSample {
    /// The operator.
    pub operator_id: String,
    /// `source`, `operator` or `sink`.
    pub kind: String,
    /// The subtask's index.
    pub subtask: u32,
    /// Rows received (for sources: 0).
    pub rows_in: u64,
    /// Rows emitted on the main output (for sinks: 0).
    pub rows_out: u64,
    /// Batches received.
    pub batches_in: u64,
    /// Batches emitted on the main output.
    pub batches_out: u64,
    /// Arrow memory size of the batches received, bytes.
    pub bytes_in: u64,
    /// Arrow memory size of the batches emitted, bytes.
    pub bytes_out: u64,
    /// Whether the operator heads its task's chain: the task's times below count here.
    pub heads_task: bool,
    /// Of the task it heads: nanoseconds waiting for input.
    pub idle_ns: u64,
    /// Of the task it heads: nanoseconds handling input.
    pub busy_ns: u64,
    /// Of the task it heads: nanoseconds blocked on a full output channel.
    pub backpressured_ns: u64,
    /// Of the task it heads, with input channels: its input watermark (Unix ms), once one
    /// arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watermark_ms: Option<i64>,
    /// Of a source subtask with a watermark: the largest event time it read (Unix ms), once it
    /// read one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_event_time_ms: Option<i64>,
    /// Late rows a window routed to its side output.
    pub late_routed: u64,
    /// Late rows a window took into an already fired window (an updated result).
    pub late_updated: u64,
    /// Keyed-state entries at the task's newest checkpoint snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_entries: Option<u64>,
    /// Keyed-state bytes at the task's newest checkpoint snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_bytes: Option<u64>,
}

/// Counters an operator keeps for all its subtasks together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorReading {
    /// The operator.
    pub operator_id: String,
    /// Rows it dropped by policy so far in this run: late rows, rows without an event time.
    pub dropped: u64,
    /// Records a source sent to its dead-letter output so far in this run.
    pub dead_letters: u64,
}

/// The counters of one lane at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricsSample {
    /// When they were read (Unix ms).
    pub at_ms: i64,
    /// Per operator subtask: cumulative counters of this run of the lane.
    pub subtasks: Vec<SubtaskSample>,
    /// Per source split.
    pub splits: Vec<SplitReading>,
    /// Per operator, the counters not kept per subtask.
    #[serde(default)]
    pub operators: Vec<OperatorReading>,
}

/// What an Agent pushes for one lane it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LaneReading {
    /// The job.
    pub job_id: String,
    /// The lane.
    pub lane: u32,
    /// The generation the lane runs in; readings of another than the job's are dropped.
    pub generation: u64,
    /// The counters now.
    pub sample: MetricsSample,
    /// The run's checkpoint counters (the runtime's `CheckpointSummary`), once it checkpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub checkpoints: Option<serde_json::Value>,
    /// The run's newest epochs, oldest first (the runtime's `EpochStats`); absent when they
    /// did not change since the Agent's last accepted push (the Hub keeps those).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub epochs: Option<Vec<serde_json::Value>>,
}

/// `POST /api/v1/agents/{agent_id}/metrics`: readings of the lanes an Agent runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricsPush {
    /// One per running lane.
    pub lanes: Vec<LaneReading>,
}

/// The answer to a [`MetricsPush`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricsAck {
    /// Readings kept.
    pub accepted: u32,
    /// Readings dropped: of a lane the pushing Agent is not assigned in its job's current
    /// generation (an unknown job, another Agent's lane, an old generation).
    pub dropped: u32,
}

/// The samples of one lane, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LaneMetrics {
    /// The lane.
    pub lane: u32,
    /// The Agent that runs it (`None` for `weir run`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// About one a second, at most [`HISTORY_SAMPLES`].
    pub samples: Vec<MetricsSample>,
}

/// The query of `GET /api/v1/jobs/{job_id}/metrics`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct MetricsQuery {
    /// Only the samples taken after this time (Unix ms): what a client polling the endpoint
    /// has not seen yet. Without it, every sample kept.
    pub since: Option<i64>,
    /// At most this many samples per lane, the newest (`2` is enough for rates now).
    pub last: Option<usize>,
}

/// `GET /api/v1/jobs/{job_id}/metrics`: the recent counters of every lane of the job's current
/// generation. Counters are cumulative: a rate is the difference of two samples over their
/// time apart, summed over lanes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobMetricsView {
    /// The job.
    pub job_id: String,
    /// The generation the samples are of.
    pub generation: u64,
    /// Per lane, in lane order.
    pub lanes: Vec<LaneMetrics>,
}

/// The checkpoints of one lane's current run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LaneCheckpoints {
    /// The lane.
    pub lane: u32,
    /// The run's checkpoint counters (the runtime's `CheckpointSummary`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub summary: Option<serde_json::Value>,
    /// The run's newest epochs, oldest first (the runtime's `EpochStats`).
    #[schema(value_type = Vec<Object>)]
    pub epochs: Vec<serde_json::Value>,
    /// Of `epochs`, those whose manifest retention keeps, in epoch order: every completed
    /// savepoint and the newest `retain` completed checkpoints (see [`retained_epochs`]). The
    /// others' manifests were deleted (or, aborted, never written).
    #[serde(default)]
    pub retained: Vec<u64>,
}

/// The epochs of `epochs` (the runtime's `EpochStats` JSON, oldest first) whose manifests
/// checkpoint retention keeps when it keeps `retain` checkpoints: every completed savepoint and
/// the newest `retain` other completed epochs (a final epoch counts as a checkpoint). Retention
/// runs after each completed epoch and keeps the newest checkpoints of the namespace, and a
/// run's epochs are the newest ones, so this is what the storage holds once retention ran.
pub fn retained_epochs(epochs: &[serde_json::Value], retain: usize) -> Vec<u64> {
    let completed = epochs
        .iter()
        .filter(|e| e["status"] == "completed")
        .filter_map(|e| Some((e["epoch"].as_u64()?, e["kind"] == "savepoint")));
    let checkpoints: Vec<u64> = completed
        .clone()
        .filter(|(_, savepoint)| !savepoint)
        .map(|(epoch, _)| epoch)
        .collect();
    let newest = &checkpoints[checkpoints.len().saturating_sub(retain)..];
    let mut kept: Vec<u64> = completed
        .filter(|(epoch, savepoint)| *savepoint || newest.contains(epoch))
        .map(|(epoch, _)| epoch)
        .collect();
    kept.sort_unstable();
    kept
}

/// `GET /api/v1/jobs/{job_id}/checkpoints`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointsView {
    /// The job.
    pub job_id: String,
    /// Completed job-level checkpoints and savepoints, newest first (none for `weir run`).
    pub records: Vec<RecoveryRecord>,
    /// Per lane of the current generation, in lane order.
    pub lanes: Vec<LaneCheckpoints>,
}

/// A manifest read back from checkpoint storage, with its checksum checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManifestView {
    /// Where it is.
    pub path: String,
    /// The checksum it records.
    pub checksum: String,
    /// The checksum of its content, computed now.
    pub computed_checksum: String,
    /// Whether the two are equal.
    pub verified: bool,
    /// The manifest.
    #[schema(value_type = Object)]
    pub manifest: serde_json::Value,
}

/// Who serves the workbench.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum UiMode {
    /// The Hub: every job, every action.
    Hub,
    /// `weir run --ui`: one local job, read only.
    Local,
}

/// `GET /api/v1/ui/config`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UiConfig {
    /// Hub or local.
    pub mode: UiMode,
    /// The local job's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
}

/// One lane's history: its samples and its latest checkpoint readings.
#[derive(Debug, Clone, Default)]
struct LaneHistory {
    generation: u64,
    agent_id: Option<String>,
    /// Samples with their sizes as JSON.
    samples: VecDeque<(MetricsSample, usize)>,
    checkpoints: Option<serde_json::Value>,
    epochs: Vec<serde_json::Value>,
    /// The JSON size of everything above.
    bytes: usize,
}

impl LaneHistory {
    /// Drops the oldest sample; `false` when there is none.
    fn pop_oldest(&mut self) -> bool {
        match self.samples.pop_front() {
            Some((_, size)) => {
                self.bytes -= size;
                true
            }
            None => false,
        }
    }
}

/// The recent readings of every lane of every job, kept in memory (a restart of the Hub
/// starts them anew): what the workbench's charts, graph and checkpoints tab show.
#[derive(Debug, Default)]
pub struct MetricsHistory {
    lanes: BTreeMap<(String, u32), LaneHistory>,
    /// The JSON size of every lane's history.
    bytes: usize,
}

impl MetricsHistory {
    /// Adds a reading of a lane run by `agent_id`. A reading of a newer generation starts the
    /// lane's history anew (its counters started from zero); one of an older generation than
    /// the history's is dropped.
    pub fn record(&mut self, agent_id: Option<&str>, reading: LaneReading) {
        let lane = self
            .lanes
            .entry((reading.job_id, reading.lane))
            .or_default();
        if reading.generation < lane.generation {
            return;
        }
        let restarted = lane
            .samples
            .back()
            .is_some_and(|(last, _)| counters_went_back(last, &reading.sample));
        let before = lane.bytes;
        if reading.generation > lane.generation || restarted {
            lane.samples.clear();
            lane.epochs.clear();
            lane.bytes = 0;
        }
        lane.generation = reading.generation;
        lane.agent_id = agent_id.map(str::to_owned);
        if lane.samples.len() == HISTORY_SAMPLES {
            lane.pop_oldest();
        }
        let extra_before = json_size(&lane.checkpoints) + json_size(&lane.epochs);
        lane.checkpoints = reading.checkpoints;
        if let Some(epochs) = reading.epochs {
            lane.epochs = epochs;
        }
        let extra_after = json_size(&lane.checkpoints) + json_size(&lane.epochs);
        lane.bytes = lane.bytes + extra_after - extra_before.min(lane.bytes);
        let size = json_size(&reading.sample);
        lane.samples.push_back((reading.sample, size));
        lane.bytes += size;
        while lane.bytes > HISTORY_LANE_BYTES && lane.pop_oldest() {}
        let after = lane.bytes;
        self.bytes = self.bytes - before.min(self.bytes) + after;
        self.evict_to(HISTORY_TOTAL_BYTES);
    }

    /// Drops the oldest samples of the largest lanes until the history holds at most `limit`
    /// bytes (or has no sample left to drop).
    fn evict_to(&mut self, limit: usize) {
        while self.bytes > limit {
            let Some(largest) = self
                .lanes
                .values_mut()
                .filter(|l| !l.samples.is_empty())
                .max_by_key(|l| l.bytes)
            else {
                return;
            };
            let before = largest.bytes;
            largest.pop_oldest();
            self.bytes -= before - largest.bytes;
        }
    }

    /// The JSON size of everything the history holds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Forgets the lanes of `job` from generations before `generation`.
    pub fn retain_generation(&mut self, job_id: &str, generation: u64) {
        let mut freed = 0;
        self.lanes.retain(|(job, _), lane| {
            let keep = job != job_id || lane.generation >= generation;
            if !keep {
                freed += lane.bytes;
            }
            keep
        });
        self.bytes -= freed.min(self.bytes);
    }

    fn lanes_of<'a>(
        &'a self,
        job_id: &'a str,
        generation: u64,
    ) -> impl Iterator<Item = (u32, &'a LaneHistory)> + 'a {
        self.lanes
            .iter()
            .filter(move |((job, _), lane)| job == job_id && lane.generation == generation)
            .map(|((_, lane), history)| (*lane, history))
    }

    /// The samples of `job_id`'s lanes in `generation` that `query` asks for: those taken after
    /// `since` (a client that polls asks for what it has not seen), at most the `last` newest.
    pub fn metrics(&self, job_id: &str, generation: u64, query: &MetricsQuery) -> JobMetricsView {
        JobMetricsView {
            job_id: job_id.to_owned(),
            generation,
            lanes: self
                .lanes_of(job_id, generation)
                .map(|(lane, h)| LaneMetrics {
                    lane,
                    agent_id: h.agent_id.clone(),
                    samples: {
                        let newer = h
                            .samples
                            .iter()
                            .map(|(sample, _)| sample)
                            .filter(|s| query.since.is_none_or(|t| s.at_ms > t));
                        let skip = query
                            .last
                            .map_or(0, |last| newer.clone().count().saturating_sub(last));
                        newer.skip(skip).cloned().collect()
                    },
                })
                .collect(),
        }
    }

    /// The checkpoint readings of `job_id`'s lanes in `generation`, whose checkpoint retention
    /// keeps `retain` checkpoints.
    pub fn checkpoints(
        &self,
        job_id: &str,
        generation: u64,
        retain: usize,
    ) -> Vec<LaneCheckpoints> {
        self.lanes_of(job_id, generation)
            .map(|(lane, h)| LaneCheckpoints {
                lane,
                summary: h.checkpoints.clone(),
                retained: retained_epochs(&h.epochs, retain),
                epochs: h.epochs.clone(),
            })
            .collect()
    }
}

/// Whether a subtask's rows counters are below the previous sample's: the lane's job ran anew
/// (a restart within the generation) and a rate across the two would be negative.
fn counters_went_back(previous: &MetricsSample, next: &MetricsSample) -> bool {
    let total =
        |s: &MetricsSample| -> u64 { s.subtasks.iter().map(|t| t.rows_in + t.rows_out).sum() };
    total(next) < total(previous)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_history_is_bounded_in_bytes_per_lane_and_in_all() {
        // A lane whose samples are 1 MiB each keeps the newest 8 MiB of them.
        let mut history = MetricsHistory::default();
        let mut big = reading(1, 0, 0);
        big.sample.subtasks[0].operator_id = "x".repeat(1 << 20);
        for at in 0..20 {
            let mut r = big.clone();
            r.sample.at_ms = at;
            history.record(Some("a"), r);
        }
        let kept = history.metrics("j", 1, &MetricsQuery::default()).lanes[0]
            .samples
            .clone();
        assert!(kept.len() < 8 && kept.len() >= 6, "{}", kept.len());
        assert_eq!(kept.last().map(|s| s.at_ms), Some(19));
        assert!(history.bytes() <= HISTORY_LANE_BYTES, "{}", history.bytes());
        // Over a total bound, the largest lane gives up its oldest samples first.
        for lane in 2..4 {
            let mut r = reading(1, 100, 1);
            r.lane = lane;
            history.record(Some("a"), r);
        }
        let small = history.bytes() - history.lanes[&("j".to_owned(), 1)].bytes;
        history.evict_to(small + (3 << 20));
        assert!(history.bytes() <= small + (3 << 20));
        let view = history.metrics("j", 1, &MetricsQuery::default());
        assert!(
            view.lanes.iter().all(|l| !l.samples.is_empty()),
            "small lanes kept"
        );
        // Forgetting a generation frees its bytes.
        history.retain_generation("j", 2);
        assert_eq!(history.bytes(), 0);
    }

    fn reading(generation: u64, at_ms: i64, rows: u64) -> LaneReading {
        LaneReading {
            job_id: "j".into(),
            lane: 1,
            generation,
            sample: MetricsSample {
                at_ms,
                subtasks: vec![SubtaskSample {
                    operator_id: "w".into(),
                    kind: "operator".into(),
                    subtask: 0,
                    rows_in: rows,
                    rows_out: 0,
                    batches_in: 0,
                    batches_out: 0,
                    bytes_in: 0,
                    bytes_out: 0,
                    heads_task: true,
                    idle_ns: 0,
                    busy_ns: 0,
                    backpressured_ns: 0,
                    watermark_ms: None,
                    max_event_time_ms: None,
                    late_routed: 0,
                    late_updated: 0,
                    state_entries: None,
                    state_bytes: None,
                }],
                splits: vec![],
                operators: vec![],
            },
            checkpoints: Some(json!({"completed": at_ms})),
            epochs: Some(vec![json!({"epoch": at_ms})]),
        }
    }

    #[test]
    fn a_history_keeps_the_newest_samples_of_the_current_generation() {
        let mut h = MetricsHistory::default();
        for i in 0..(HISTORY_SAMPLES as i64 + 5) {
            h.record(Some("a1"), reading(3, i, i as u64));
        }
        let view = h.metrics("j", 3, &MetricsQuery::default());
        assert_eq!(view.lanes.len(), 1);
        let at = |query: MetricsQuery| -> Vec<i64> {
            let view = h.metrics("j", 3, &query);
            view.lanes[0].samples.iter().map(|s| s.at_ms).collect()
        };
        let n = HISTORY_SAMPLES as i64;
        let since = |since| MetricsQuery {
            since: Some(since),
            last: None,
        };
        assert_eq!(at(since(n + 2)), [n + 3, n + 4]);
        let last = |last| MetricsQuery {
            since: None,
            last: Some(last),
        };
        assert_eq!(at(last(2)), [n + 3, n + 4]);
        assert_eq!(at(last(1_000)).len(), HISTORY_SAMPLES);
        let samples = &view.lanes[0].samples;
        assert_eq!(samples.len(), HISTORY_SAMPLES);
        assert_eq!(samples[0].at_ms, 5);
        assert_eq!(view.lanes[0].agent_id.as_deref(), Some("a1"));
        // An older generation's reading is dropped, a newer one starts anew.
        h.record(Some("a2"), reading(2, 10_000, 1));
        assert_eq!(
            h.metrics("j", 3, &MetricsQuery::default()).lanes[0]
                .samples
                .len(),
            HISTORY_SAMPLES
        );
        h.record(Some("a2"), reading(4, 10_001, 1));
        assert!(h.metrics("j", 3, &MetricsQuery::default()).lanes.is_empty());
        let view = h.metrics("j", 4, &MetricsQuery::default());
        assert_eq!(view.lanes[0].samples.len(), 1);
        assert_eq!(
            h.checkpoints("j", 4, 3)[0].epochs,
            vec![json!({"epoch": 10_001})]
        );
    }

    #[test]
    fn a_reading_without_epochs_keeps_the_ones_the_lane_sent_before() {
        let mut h = MetricsHistory::default();
        h.record(None, reading(0, 1, 100));
        let mut unchanged = reading(0, 2, 200);
        unchanged.epochs = None;
        h.record(None, unchanged);
        assert_eq!(
            h.checkpoints("j", 0, 3)[0].epochs,
            vec![json!({"epoch": 1})]
        );
        // A new generation's lane starts without the old run's epochs.
        let mut next = reading(1, 3, 1);
        next.epochs = None;
        h.record(None, next);
        assert!(h.checkpoints("j", 1, 3)[0].epochs.is_empty());
    }

    #[test]
    fn counters_that_went_back_start_the_history_anew() {
        let mut h = MetricsHistory::default();
        h.record(None, reading(0, 1, 100));
        h.record(None, reading(0, 2, 200));
        h.record(None, reading(0, 3, 5));
        let samples = &h.metrics("j", 0, &MetricsQuery::default()).lanes[0].samples;
        assert_eq!(samples.len(), 1);
        assert_eq!(samples[0].at_ms, 3);
    }

    #[test]
    fn retention_keeps_every_savepoint_and_the_newest_completed_checkpoints() {
        let epoch = |n: u64, kind: &str, status: &str| json!({"epoch": n, "kind": kind, "status": status, "tasks": []});
        let epochs = vec![
            epoch(1, "checkpoint", "completed"),
            epoch(2, "savepoint", "completed"),
            epoch(3, "checkpoint", "completed"),
            epoch(4, "checkpoint", "aborted"),
            epoch(5, "checkpoint", "completed"),
            epoch(6, "savepoint", "aborted"),
            epoch(7, "final", "completed"),
        ];
        assert_eq!(retained_epochs(&epochs, 2), [2, 5, 7]);
        assert_eq!(retained_epochs(&epochs, 3), [2, 3, 5, 7]);
        assert_eq!(retained_epochs(&epochs, 10), [1, 2, 3, 5, 7]);
        assert!(retained_epochs(&[], 3).is_empty());
        let mut h = MetricsHistory::default();
        let mut r = reading(0, 1, 1);
        r.epochs = Some(epochs);
        h.record(None, r);
        assert_eq!(h.checkpoints("j", 0, 1)[0].retained, [2, 7]);
    }

    #[test]
    fn pushes_refuse_unknown_fields() {
        let text = r#"{"lanes": [], "extra": 1}"#;
        assert!(serde_json::from_str::<MetricsPush>(text).is_err());
        let text = serde_json::to_string(&MetricsPush {
            lanes: vec![reading(1, 2, 3)],
        })
        .unwrap();
        assert_eq!(
            serde_json::from_str::<MetricsPush>(&text).unwrap().lanes[0],
            reading(1, 2, 3)
        );
    }
}
