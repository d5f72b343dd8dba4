//! Live counters of a running job, read by the CLI's progress bar and summary and by the
//! Prometheus exporters above the runtime. Each operator subtask counts into its own atomics
//! ([`SubtaskMetrics`], resolved once when the task is built); an operator's totals are their sum.

use arrow::record_batch::RecordBatch;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use weir_api::{OperatorId, SemanticMode};

/// Counters of one operator subtask: plain atomics, added to on the per-batch path.
#[derive(Debug)]
pub(crate) struct SubtaskCounters {
    rows_in: AtomicU64,
    rows_out: AtomicU64,
    batches_in: AtomicU64,
    batches_out: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    /// Task times, counted on the chain's first operator: waiting for input, handling it
    /// (less backpressure), blocked on a full output channel; nanoseconds.
    idle_ns: AtomicU64,
    busy_ns: AtomicU64,
    backpressured_ns: AtomicU64,
    /// The task's current input watermark, ms; [`NO_WATERMARK`] before the first.
    watermark_ms: AtomicI64,
    /// Of a source subtask with a watermark: the largest event time it read, ms;
    /// [`NO_WATERMARK`] before the first.
    max_event_time_ms: AtomicI64,
    /// This operator heads a task's chain (the task times count here).
    heads_task: AtomicBool,
    /// Shared with the operator's `TaskContext::late_routed_rows` and `late_updated_rows`.
    late_routed: Arc<AtomicU64>,
    late_updated: Arc<AtomicU64>,
    /// The operator's state in the subtask's last snapshot: entries and segment bytes;
    /// [`NO_STATE`] before the first.
    state_entries: AtomicU64,
    state_bytes: AtomicU64,
}

/// The value of the state gauges before the subtask's first snapshot.
const NO_STATE: u64 = u64::MAX;

/// The value of a watermark gauge before any watermark arrived.
const NO_WATERMARK: i64 = i64::MIN;

impl Default for SubtaskCounters {
    fn default() -> Self {
        SubtaskCounters {
            rows_in: AtomicU64::new(0),
            rows_out: AtomicU64::new(0),
            batches_in: AtomicU64::new(0),
            batches_out: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            idle_ns: AtomicU64::new(0),
            busy_ns: AtomicU64::new(0),
            backpressured_ns: AtomicU64::new(0),
            watermark_ms: AtomicI64::new(NO_WATERMARK),
            max_event_time_ms: AtomicI64::new(NO_WATERMARK),
            heads_task: AtomicBool::new(false),
            late_routed: Arc::default(),
            late_updated: Arc::default(),
            state_entries: AtomicU64::new(NO_STATE),
            state_bytes: AtomicU64::new(NO_STATE),
        }
    }
}

/// What a task holds for one operator of its chain: its subtask's counters and the operator's
/// shared ones (dropped rows, dead letters, split counters).
#[derive(Debug, Clone, Default)]
pub(crate) struct SubtaskMetrics {
    operator: Arc<OperatorMetrics>,
    counters: Arc<SubtaskCounters>,
}

impl SubtaskMetrics {
    /// The subtask received `batch`.
    pub(crate) fn add_in(&self, batch: &RecordBatch) {
        let c = &self.counters;
        c.rows_in
            .fetch_add(batch.num_rows() as u64, Ordering::Relaxed);
        c.batches_in.fetch_add(1, Ordering::Relaxed);
        c.bytes_in
            .fetch_add(batch.get_array_memory_size() as u64, Ordering::Relaxed);
    }

    /// The subtask emitted `batch` on its main output.
    pub(crate) fn add_out(&self, batch: &RecordBatch) {
        let c = &self.counters;
        c.rows_out
            .fetch_add(batch.num_rows() as u64, Ordering::Relaxed);
        c.batches_out.fetch_add(1, Ordering::Relaxed);
        c.bytes_out
            .fetch_add(batch.get_array_memory_size() as u64, Ordering::Relaxed);
    }

    /// This operator heads the task's chain: the task's times count on it.
    pub(crate) fn mark_head(&self) {
        self.counters.heads_task.store(true, Ordering::Relaxed);
    }

    /// The task waited `d` for input.
    pub(crate) fn add_idle(&self, d: Duration) {
        self.counters.idle_ns.fetch_add(nanos(d), Ordering::Relaxed);
    }

    /// A source task waited for a read since `since`: that time, less the busy time counted
    /// meanwhile (the connector's polls, [`SubtaskMetrics::add_busy`]), is idle time.
    pub(crate) fn add_waited(&self, since: Instant, busy_before: u64) {
        let polled = self.busy_ns().saturating_sub(busy_before);
        self.counters.idle_ns.fetch_add(
            nanos(since.elapsed()).saturating_sub(polled),
            Ordering::Relaxed,
        );
    }

    /// The task worked for `d` (a source task: one poll of a connector's read).
    pub(crate) fn add_busy(&self, d: Duration) {
        self.counters.busy_ns.fetch_add(nanos(d), Ordering::Relaxed);
    }

    /// The busy counter now, for [`SubtaskMetrics::add_waited`].
    pub(crate) fn busy_ns(&self) -> u64 {
        self.counters.busy_ns.load(Ordering::Relaxed)
    }

    /// The counter the operator adds the late rows it routed to its side output to.
    pub(crate) fn late_routed_rows(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.counters.late_routed)
    }

    /// The counter the operator adds the late rows that updated a result to.
    pub(crate) fn late_updated_rows(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.counters.late_updated)
    }

    /// The subtask's snapshot of this operator's state held `entries` entries in `bytes` bytes
    /// of segments.
    pub(crate) fn set_state(&self, entries: u64, bytes: u64) {
        self.counters
            .state_entries
            .store(entries.min(NO_STATE - 1), Ordering::Relaxed);
        self.counters
            .state_bytes
            .store(bytes.min(NO_STATE - 1), Ordering::Relaxed);
    }

    /// The task handled input for `d`, time blocked on full output channels included: that
    /// share, counted by [`SubtaskMetrics::add_backpressured`] meanwhile, is not busy time.
    pub(crate) fn add_handling(&self, d: Duration, backpressured_before: u64) {
        let blocked = self.backpressured_ns().saturating_sub(backpressured_before);
        self.counters
            .busy_ns
            .fetch_add(nanos(d).saturating_sub(blocked), Ordering::Relaxed);
    }

    /// The backpressure counter now, for [`SubtaskMetrics::add_handling`].
    pub(crate) fn backpressured_ns(&self) -> u64 {
        self.counters.backpressured_ns.load(Ordering::Relaxed)
    }

    /// The task was blocked `d` on a full output channel.
    pub(crate) fn add_backpressured(&self, d: Duration) {
        self.counters
            .backpressured_ns
            .fetch_add(nanos(d), Ordering::Relaxed);
    }

    /// The task's input watermark advanced to `ms`.
    pub(crate) fn set_watermark(&self, ms: i64) {
        self.counters.watermark_ms.store(ms, Ordering::Relaxed);
    }

    /// A source subtask read rows of event times up to `ms`.
    pub(crate) fn note_event_time(&self, ms: i64) {
        self.counters
            .max_event_time_ms
            .fetch_max(ms, Ordering::Relaxed);
    }

    /// A source subtask paused for watermark alignment.
    pub(crate) fn add_alignment_pause(&self) {
        self.operator.add_alignment_pause();
    }

    pub(crate) fn add_dead_letters(&self, rows: usize) {
        self.operator.add_dead_letters(rows);
    }

    /// The counters of split `split` of this source (resolved when the split opens; a split
    /// read again after a restart counts on).
    pub(crate) fn split_counters(&self, split: &str) -> Arc<SplitCounters> {
        let mut splits = self
            .operator
            .splits
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Arc::clone(splits.entry(split.to_owned()).or_default())
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A [`SplitCounters`] value not known yet: no read, or no backlog reported.
const UNSET: u64 = u64::MAX;

/// Counters of one split of a source, counted by the subtask reading it.
#[derive(Debug)]
pub(crate) struct SplitCounters {
    /// Rows read from it.
    pub(crate) rows_read: AtomicU64,
    /// Its cursor after the latest read (the index of the next record to read: for Kafka, the
    /// next offset); [`UNSET`] before the first.
    pub(crate) position: AtomicU64,
    /// The records between its cursor and its known end at the latest read that reported it;
    /// [`UNSET`] while none did.
    pub(crate) backlog: AtomicU64,
}

impl Default for SplitCounters {
    fn default() -> Self {
        SplitCounters {
            rows_read: AtomicU64::new(0),
            position: AtomicU64::new(UNSET),
            backlog: AtomicU64::new(UNSET),
        }
    }
}

/// Counters of one operator: those of its subtasks, and those kept per operator.
#[derive(Debug, Default)]
pub struct OperatorMetrics {
    kind: &'static str,
    /// By subtask index; an entry outlives its task, so a restarted subtask counts on.
    subtasks: Mutex<BTreeMap<u32, Arc<SubtaskCounters>>>,
    dead_letters: AtomicU64,
    /// Shared with the operator's `TaskContext::dropped_rows`.
    dropped: Arc<AtomicU64>,
    alignment_pauses: AtomicU64,
    /// The counters of each split of a source, by split id (counted by the subtask reading it).
    splits: Mutex<BTreeMap<String, Arc<SplitCounters>>>,
}

impl OperatorMetrics {
    /// The counters of subtask `index`, created on first use.
    fn subtask(&self, index: u32) -> Arc<SubtaskCounters> {
        let mut subtasks = self.subtasks.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(subtasks.entry(index).or_default())
    }

    /// Every subtask's counters, in subtask order.
    fn subtask_snapshots(&self) -> Vec<(u32, SubtaskSnapshot)> {
        self.subtasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(&i, c)| {
                let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
                let state = |a: &AtomicU64| Some(load(a)).filter(|&v| v != NO_STATE);
                let snap = SubtaskSnapshot {
                    operator_id: String::new(),
                    kind: self.kind.to_owned(),
                    subtask: i,
                    rows_in: load(&c.rows_in),
                    rows_out: load(&c.rows_out),
                    batches_in: load(&c.batches_in),
                    batches_out: load(&c.batches_out),
                    bytes_in: load(&c.bytes_in),
                    bytes_out: load(&c.bytes_out),
                    heads_task: c.heads_task.load(Ordering::Relaxed),
                    idle_ns: load(&c.idle_ns),
                    busy_ns: load(&c.busy_ns),
                    backpressured_ns: load(&c.backpressured_ns),
                    watermark_ms: Some(c.watermark_ms.load(Ordering::Relaxed))
                        .filter(|&w| w != NO_WATERMARK),
                    max_event_time_ms: Some(c.max_event_time_ms.load(Ordering::Relaxed))
                        .filter(|&t| t != NO_WATERMARK),
                    late_routed: load(&c.late_routed),
                    late_updated: load(&c.late_updated),
                    state_entries: state(&c.state_entries),
                    state_bytes: state(&c.state_bytes),
                };
                (i, snap)
            })
            .collect()
    }

    /// The counter an operator adds the rows it dropped by policy to.
    pub(crate) fn dropped_rows(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.dropped)
    }

    /// A source subtask paused for watermark alignment.
    pub(crate) fn add_alignment_pause(&self) {
        self.alignment_pauses.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn add_dead_letters(&self, rows: usize) {
        self.dead_letters.fetch_add(rows as u64, Ordering::Relaxed);
    }

    /// The splits' values of `value` that are set ([`UNSET`] is not), in split id order.
    fn per_split<T>(
        &self,
        value: impl Fn(&SplitCounters) -> &AtomicU64,
        make: impl Fn(String, u64) -> T,
    ) -> Vec<T> {
        self.splits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(|(split, c)| {
                let v = value(c).load(Ordering::Relaxed);
                (v != UNSET).then(|| make(split.clone(), v))
            })
            .collect()
    }

    /// The cursor of every split read so far, in split id order.
    fn positions(&self) -> Vec<SplitPosition> {
        self.per_split(
            |c| &c.position,
            |split, next_record| SplitPosition { split, next_record },
        )
    }

    /// The latest backlog of every split that reported one, in split id order.
    fn lag(&self) -> Vec<SplitLag> {
        self.per_split(|c| &c.backlog, |split, backlog| SplitLag { split, backlog })
    }
}

/// Counters of the whole job.
#[derive(Debug, Default)]
pub struct JobMetrics {
    operators: BTreeMap<OperatorId, Arc<OperatorMetrics>>,
    /// The operators in pipeline order (sources first, each before what reads it), as the
    /// snapshot lists them.
    pipeline_order: Vec<OperatorId>,
    splits_total: AtomicU64,
    splits_done: AtomicU64,
    source_bytes_total: AtomicU64,
    source_bytes_done: AtomicU64,
    /// When the first row reached a sink.
    first_output: std::sync::OnceLock<std::time::Instant>,
    /// The delivery guarantee in force.
    semantic_mode: Option<SemanticMode>,
}

impl JobMetrics {
    /// A sink received rows: the first call marks the time of the job's first output.
    pub(crate) fn note_output(&self) {
        self.first_output.get_or_init(std::time::Instant::now);
    }

    /// The delivery guarantee in force (docs/fault-tolerance.md, "Semantic modes"); `None`
    /// for counters not made by starting a job.
    pub fn semantic_mode(&self) -> Option<SemanticMode> {
        self.semantic_mode
    }

    /// The same counters, for a job whose guarantee in force is `mode`.
    pub(crate) fn with_semantic_mode(self, mode: SemanticMode) -> Self {
        JobMetrics {
            semantic_mode: Some(mode),
            ..self
        }
    }

    /// When the first row reached a sink, if one did.
    pub fn first_output(&self) -> Option<std::time::Instant> {
        self.first_output.get().copied()
    }

    /// Counters for `operators`, given in pipeline order.
    pub(crate) fn new(operators: impl IntoIterator<Item = (OperatorId, &'static str)>) -> Self {
        let operators: Vec<(OperatorId, &'static str)> = operators.into_iter().collect();
        JobMetrics {
            pipeline_order: operators.iter().map(|(id, _)| id.clone()).collect(),
            operators: operators
                .into_iter()
                .map(|(id, kind)| {
                    let m = OperatorMetrics {
                        kind,
                        ..Default::default()
                    };
                    (id, Arc::new(m))
                })
                .collect(),
            ..Default::default()
        }
    }

    pub(crate) fn operator(&self, id: &OperatorId) -> Arc<OperatorMetrics> {
        self.operators.get(id).cloned().unwrap_or_default()
    }

    /// The counters a task keeps for subtask `subtask` of operator `id` (resolved once per task).
    pub(crate) fn subtask(&self, id: &OperatorId, subtask: u32) -> SubtaskMetrics {
        let operator = self.operator(id);
        let counters = operator.subtask(subtask);
        SubtaskMetrics { operator, counters }
    }

    /// Rows read per source split so far: `(operator, split, rows)`, in operator then split id
    /// order.
    pub fn split_rows(&self) -> Vec<(String, String, u64)> {
        self.operators
            .iter()
            .flat_map(|(id, m)| {
                let splits = m.splits.lock().unwrap_or_else(PoisonError::into_inner);
                splits
                    .iter()
                    .map(|(split, c)| {
                        let rows = c.rows_read.load(Ordering::Relaxed);
                        (id.to_string(), split.clone(), rows)
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The counters of every operator subtask that ran, in operator then subtask order.
    pub fn subtasks(&self) -> Vec<SubtaskSnapshot> {
        self.operators
            .iter()
            .flat_map(|(id, m)| {
                m.subtask_snapshots()
                    .into_iter()
                    .map(move |(_, s)| SubtaskSnapshot {
                        operator_id: id.to_string(),
                        ..s
                    })
            })
            .collect()
    }

    pub(crate) fn add_splits(&self, splits: usize, bytes: u64) {
        self.splits_total
            .fetch_add(splits as u64, Ordering::Relaxed);
        self.source_bytes_total.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn split_done(&self, bytes: u64) {
        self.splits_done.fetch_add(1, Ordering::Relaxed);
        self.source_bytes_done.fetch_add(bytes, Ordering::Relaxed);
    }

    /// A consistent-enough copy of every counter.
    pub fn snapshot(&self) -> MetricsSnapshot {
        MetricsSnapshot {
            splits_total: self.splits_total.load(Ordering::Relaxed),
            splits_done: self.splits_done.load(Ordering::Relaxed),
            source_bytes_total: self.source_bytes_total.load(Ordering::Relaxed),
            source_bytes_done: self.source_bytes_done.load(Ordering::Relaxed),
            operators: self
                .pipeline_order
                .iter()
                .filter_map(|id| self.operators.get(id).map(|m| (id, m)))
                .map(|(id, m)| {
                    let subtasks = m.subtask_snapshots();
                    let sum = |f: fn(&SubtaskSnapshot) -> u64| -> u64 {
                        subtasks.iter().map(|(_, s)| f(s)).sum()
                    };
                    OperatorSnapshot {
                        operator_id: id.to_string(),
                        kind: m.kind,
                        rows_in: sum(|s| s.rows_in),
                        rows_out: sum(|s| s.rows_out),
                        batches_in: sum(|s| s.batches_in),
                        dead_letters: m.dead_letters.load(Ordering::Relaxed),
                        dropped: m.dropped.load(Ordering::Relaxed),
                        alignment_pauses: m.alignment_pauses.load(Ordering::Relaxed),
                        lag: m.lag(),
                        positions: m.positions(),
                    }
                })
                .collect(),
        }
    }
}

/// Counters of one operator at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OperatorSnapshot {
    /// The operator.
    pub operator_id: String,
    /// `source`, `operator` or `sink`.
    pub kind: &'static str,
    /// Rows received (for sources: 0).
    pub rows_in: u64,
    /// Rows emitted on the main output (for sinks: 0).
    pub rows_out: u64,
    /// Batches received.
    pub batches_in: u64,
    /// Records sent to the dead-letter output (sources).
    pub dead_letters: u64,
    /// Rows the operator dropped by policy (late rows, null event times).
    pub dropped: u64,
    /// Times a subtask of this source paused because its watermark ran more than the allowed
    /// drift ahead of the others (watermark alignment).
    pub alignment_pauses: u64,
    /// Consumer lag of a source: the latest backlog of each split that reported one (records
    /// between its cursor and its known end), in split id order; empty for other operators.
    pub lag: Vec<SplitLag>,
    /// Read position of a source: the cursor of each split after its latest read, in split id
    /// order; empty for other operators.
    pub positions: Vec<SplitPosition>,
}

/// Counters of one operator subtask at one moment; they count on across restarts of the job's
/// tasks within this run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubtaskSnapshot {
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
    /// Arrow memory size of the batches emitted on the main output, bytes.
    pub bytes_out: u64,
    /// Whether this operator heads its task's chain (the task times below count here).
    pub heads_task: bool,
    /// Of the task whose chain this operator heads (else 0): nanoseconds waiting for input on
    /// its input channels; for a source task, waiting for its connector's reads (while the
    /// runtime is not polling them) and for watermark alignment.
    pub idle_ns: u64,
    /// Of the task whose chain this operator heads (else 0): nanoseconds handling input from its
    /// input channels, less the time blocked on full output channels; for a source task, its
    /// connector's reads being polled plus handing what they read down the chain, less the
    /// time blocked on full output channels.
    pub busy_ns: u64,
    /// Of the task whose chain this operator heads (else 0): nanoseconds blocked sending to a
    /// full output channel.
    pub backpressured_ns: u64,
    /// Of the task whose chain this operator heads and that has input channels: its current
    /// input watermark (ms), once one arrived.
    pub watermark_ms: Option<i64>,
    /// Of a source subtask with a watermark: the largest event time it read (ms), once it read
    /// one.
    pub max_event_time_ms: Option<i64>,
    /// Late rows routed to the operator's late side output (late policy `route`).
    pub late_routed: u64,
    /// Late rows that updated an emitted result (late policy `update`).
    pub late_updated: u64,
    /// Entries of the operator's state in the subtask's last checkpoint snapshot (rows of its
    /// state segments); `None` before the first snapshot or without checkpoints.
    pub state_entries: Option<u64>,
    /// Bytes of the state segments of that snapshot; `None` as for `state_entries`.
    pub state_bytes: Option<u64>,
}

/// Where one split of a source was read up to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SplitPosition {
    /// The split's id (`topic/partition`).
    pub split: String,
    /// The index of the next record to read: for Kafka, the partition's next offset; for a
    /// file, the number of records of the split read (or skipped on a restore).
    pub next_record: u64,
}

/// The latest backlog one split of a source reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SplitLag {
    /// The split's id (`topic/partition`).
    pub split: String,
    /// Records between the split's cursor and its known end when it last reported.
    pub backlog: u64,
}

/// Every counter of a job at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MetricsSnapshot {
    /// Splits assigned to source readers.
    pub splits_total: u64,
    /// Splits read to their end.
    pub splits_done: u64,
    /// Bytes of all splits, where sources know them.
    pub source_bytes_total: u64,
    /// Bytes of the splits read to their end.
    pub source_bytes_done: u64,
    /// Per operator, in pipeline order: sources first, each operator before what reads it.
    pub operators: Vec<OperatorSnapshot>,
}

impl MetricsSnapshot {
    /// Rows emitted by all sources.
    pub fn source_rows(&self) -> u64 {
        self.operators
            .iter()
            .filter(|o| o.kind == "source")
            .map(|o| o.rows_out)
            .sum()
    }

    /// Rows written by all sinks.
    pub fn sink_rows(&self) -> u64 {
        self.operators
            .iter()
            .filter(|o| o.kind == "sink")
            .map(|o| o.rows_in)
            .sum()
    }

    /// Counters of operator `id`.
    pub fn operator(&self, id: &str) -> Option<&OperatorSnapshot> {
        self.operators.iter().find(|o| o.operator_id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The snapshot (and so the run summary) lists operators in the order the job gives them,
    /// sources first, not by id.
    #[test]
    fn a_snapshot_lists_operators_in_pipeline_order() {
        let metrics = JobMetrics::new([
            (OperatorId::new("z_source"), "source"),
            (OperatorId::new("m_window"), "operator"),
            (OperatorId::new("a_sink"), "sink"),
        ]);
        let ids: Vec<String> = metrics
            .snapshot()
            .operators
            .into_iter()
            .map(|o| o.operator_id)
            .collect();
        assert_eq!(ids, ["z_source", "m_window", "a_sink"]);
    }
}
