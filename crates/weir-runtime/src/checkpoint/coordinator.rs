//! The checkpoint coordinator of one attempt of a job: triggers one epoch at a time, collects the
//! tasks' acknowledgements, publishes the manifest, commits the sinks' transactions, and ends a
//! bounded job with its final epoch.

use super::epoch_stats::{EpochStats, TaskEpochStats, record_epoch};
pub(crate) use super::epoch_stats::{SharedSummary, update};
use super::{CheckpointConfig, TaskAck, TaskReport, Trigger, failpoint};
use crate::error::{Error, Result};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::Instrument;
use weir_api::{Epoch, OperatorId, PreparedSink, SubtaskIndex, TaskContext, TaskId};
use weir_checkpoint::{
    AttemptId, CheckpointStore, EnumeratorSnapshot, EpochKind, EpochManifest, EpochRecord,
    EpochState, ExpectedCheckpoint, SinkTransaction, TaskSnapshot, transition,
};

/// The head operator (the first of its chain) of every task of `plan`.
pub(crate) fn task_heads(plan: &weir_plan::PartitionedPlan) -> HashMap<TaskId, OperatorId> {
    plan.vertices
        .iter()
        .flat_map(|v| {
            let head = v.chain[0].operator_id.clone();
            v.tasks.iter().map(move |t| (t.clone(), head.clone()))
        })
        .collect()
}

/// A checkpoint or savepoint a user asked for, outside the interval.
#[derive(Debug)]
pub(crate) struct ManualCheckpoint {
    /// A checkpoint, or a savepoint (kept by retention).
    pub(crate) kind: EpochKind,
    /// Gets the epoch once it is durable.
    pub(crate) reply: oneshot::Sender<Result<Epoch>>,
}

/// A sink operator of the job, for commits.
#[derive(Debug, Clone)]
pub(crate) struct SinkHandle {
    pub(crate) sink: Arc<dyn PreparedSink>,
    pub(crate) parallelism: u32,
    /// The lane of a distributed job the run is, for the contexts of whole-epoch commits.
    pub(crate) lane: Option<Arc<weir_api::Lane>>,
}

/// Everything the coordinator works with.
pub(crate) struct Coordinator {
    pub(crate) config: CheckpointConfig,
    pub(crate) store: CheckpointStore,
    pub(crate) expected: ExpectedCheckpoint,
    pub(crate) attempt: AttemptId,
    pub(crate) job_id: weir_api::JobId,
    pub(crate) next_epoch: Epoch,
    pub(crate) trigger: watch::Sender<Option<Trigger>>,
    pub(crate) reports: mpsc::UnboundedReceiver<TaskReport>,
    /// Manual checkpoint requests, shared by the job's attempts.
    pub(crate) requests: Arc<tokio::sync::Mutex<mpsc::Receiver<ManualCheckpoint>>>,
    /// Source subtasks that run (those with splits).
    pub(crate) live_sources: HashSet<TaskId>,
    /// Tasks that ended (or never started), with the snapshot they take part with.
    pub(crate) finished: HashMap<TaskId, TaskSnapshot>,
    /// Every split each source operator's enumerator knows.
    pub(crate) discovered: BTreeMap<OperatorId, BTreeSet<String>>,
    /// Splits finished before the restored epoch: no task reads them, and every manifest of
    /// this attempt lists them as finished again.
    pub(crate) finished_before: BTreeMap<OperatorId, BTreeSet<String>>,
    /// Sink operators whose writers run in epoch mode.
    pub(crate) sinks: BTreeMap<OperatorId, SinkHandle>,
    /// Pre-committed transactions not yet committed, by (operator, subtask, epoch).
    pub(crate) pending: BTreeMap<(OperatorId, SubtaskIndex, Epoch), SinkTransaction>,
    pub(crate) summary: SharedSummary,
    /// The head operator of each task (the first of its chain), for the epoch history.
    pub(crate) heads: HashMap<TaskId, OperatorId>,
}

struct InFlight {
    epoch: Epoch,
    state: EpochState,
    kind: EpochKind,
    is_final: bool,
    started: Instant,
    created_at_ms: u64,
    acks: HashMap<TaskId, TaskAck>,
    /// Trigger to each acknowledgement, ms.
    ack_ms: HashMap<TaskId, u64>,
    replies: Vec<oneshot::Sender<Result<Epoch>>>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn elapsed_ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn checkpoint_error(context: &str, e: weir_checkpoint::CheckpointError) -> Error {
    Error::Checkpoint {
        context: context.to_owned(),
        source: e,
    }
}

impl Coordinator {
    /// Runs until the final epoch of a bounded job is committed (then `Ok`), or for ever for an
    /// unbounded one (the job's end aborts it). When every task is gone before the final epoch
    /// completes, a secondary error: a task failed.
    ///
    /// # Errors
    /// When a task's snapshot failed, the store refused a manifest for good (another attempt
    /// took over: fenced), or a sink commit failed.
    pub(crate) async fn run(mut self) -> Result<()> {
        let mut ticker = tokio::time::interval(self.config.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await; // the first tick is immediate: the first epoch waits one interval
        let mut in_flight: Option<InFlight> = None;
        let mut queued: Vec<ManualCheckpoint> = Vec::new();
        let mut exhausted: HashSet<TaskId> = HashSet::new();
        let mut requests_open = true;
        // The minimum pause: no periodic epoch starts before `not_before` (the end of the
        // previous epoch plus `min_pause`); a tick that comes earlier leaves the epoch `due`.
        let mut not_before = tokio::time::Instant::now();
        let mut due = false;
        let requests = self.requests.clone();
        let mut requests = requests.lock_owned().await;
        // A new attempt: what an earlier one had in flight or pending is gone (recovery
        // committed or discarded the pending transactions).
        update(&self.summary, |s| {
            s.pending_epochs = 0;
            s.pending_sink_transactions = 0;
        });
        loop {
            let all_exhausted = self.live_sources.iter().all(|t| exhausted.contains(t));
            if in_flight.is_none() {
                if all_exhausted {
                    in_flight = Some(self.trigger_epoch(EpochKind::Checkpoint, true, Vec::new()));
                } else if !queued.is_empty() {
                    let request = queued.remove(0);
                    in_flight = Some(self.trigger_epoch(request.kind, false, vec![request.reply]));
                }
            }
            if let Some(flight) = in_flight.as_mut()
                && self.complete(flight)
            {
                let flight = in_flight
                    .take()
                    .ok_or_else(|| Error::Internal("the epoch in flight vanished".to_owned()))?;
                let is_final = flight.is_final;
                let span =
                    tracing::info_span!("checkpoint", epoch = %flight.epoch, kind = ?flight.kind);
                self.finish_epoch(flight).instrument(span).await?;
                if is_final {
                    return Ok(());
                }
                not_before = tokio::time::Instant::now() + self.config.min_pause;
                continue;
            }
            let timeout = in_flight
                .as_ref()
                .map(|f| self.config.timeout.saturating_sub(f.started.elapsed()));
            tokio::select! {
                report = self.reports.recv() => {
                    let Some(report) = report else {
                        // Every task is gone and the final epoch did not complete: a task
                        // failed (the supervisor reports that error, this one is secondary).
                        return Err(Error::ChannelClosed {
                            task: "checkpoint coordinator".to_owned(),
                        });
                    };
                    match report {
                        TaskReport::Ack(ack) => self.on_ack(*ack, in_flight.as_mut()),
                        TaskReport::SourceExhausted(task) => {
                            exhausted.insert(task);
                        }
                        TaskReport::Finished(snapshot) => {
                            exhausted.insert(snapshot.task.clone());
                            self.finished.insert(snapshot.task.clone(), snapshot);
                        }
                        TaskReport::Failed(e) => return Err(e),
                    }
                }
                request = requests.recv(), if requests_open => match request {
                    Some(r) => queued.push(r),
                    None => requests_open = false,
                },
                _ = ticker.tick(), if in_flight.is_none() && !all_exhausted && !due => {
                    if tokio::time::Instant::now() >= not_before {
                        in_flight = Some(self.trigger_epoch(EpochKind::Checkpoint, false, Vec::new()));
                    } else {
                        due = true;
                    }
                }
                () = tokio::time::sleep_until(not_before), if due && in_flight.is_none() && !all_exhausted => {
                    due = false;
                    in_flight = Some(self.trigger_epoch(EpochKind::Checkpoint, false, Vec::new()));
                }
                _ = tokio::time::sleep(timeout.unwrap_or(Duration::MAX)), if timeout.is_some() => {
                    if let Some(flight) = in_flight.take() {
                        if flight.is_final {
                            return Err(Error::Internal(format!(
                                "the final epoch {} was not durable after {:?}",
                                flight.epoch, self.config.timeout
                            )));
                        }
                        self.abort(flight, "timed out").await;
                        not_before = tokio::time::Instant::now() + self.config.min_pause;
                    }
                }
            }
        }
    }

    fn trigger_epoch(
        &mut self,
        kind: EpochKind,
        is_final: bool,
        replies: Vec<oneshot::Sender<Result<Epoch>>>,
    ) -> InFlight {
        let epoch = self.next_epoch;
        self.next_epoch = Epoch(epoch.0 + 1);
        tracing::debug!(%epoch, is_final, "triggering checkpoint");
        self.trigger.send_replace(Some(Trigger { epoch, is_final }));
        update(&self.summary, |s| {
            s.triggered += 1;
            s.pending_epochs = 1;
        });
        InFlight {
            epoch,
            state: EpochState::Injecting,
            kind,
            is_final,
            started: Instant::now(),
            created_at_ms: now_ms(),
            acks: HashMap::new(),
            ack_ms: HashMap::new(),
            replies,
        }
    }

    fn on_ack(&mut self, ack: TaskAck, flight: Option<&mut InFlight>) {
        if ack.attempt != self.attempt {
            // Fencing: a report of another attempt never counts.
            tracing::warn!(
                task = %ack.snapshot.task,
                attempt = %ack.attempt,
                current = %self.attempt,
                "refused an acknowledgement of another attempt"
            );
            return;
        }
        match flight {
            Some(f) if f.epoch == ack.epoch => {
                if f.state == EpochState::Injecting {
                    f.state = EpochState::Aligning;
                }
                for t in &ack.sink_transactions {
                    self.pending
                        .insert((t.operator.clone(), t.subtask, t.epoch), t.clone());
                }
                let task = ack.snapshot.task.clone();
                f.ack_ms.insert(task.clone(), elapsed_ms(f.started));
                f.acks.insert(task, ack);
            }
            _ => {
                // A late acknowledgement of an aborted epoch: its sink pre-commit stays
                // pending and a later durable epoch subsumes it.
                for t in &ack.sink_transactions {
                    self.pending
                        .insert((t.operator.clone(), t.subtask, t.epoch), t.clone());
                }
            }
        }
        let pending = self.pending.len() as u64;
        update(&self.summary, |s| s.pending_sink_transactions = pending);
    }

    /// The epoch's history entry: with every task of the plan when it completed, with the
    /// tasks that acknowledged it when it was aborted.
    fn epoch_stats(&self, flight: &InFlight, cause: Option<String>) -> EpochStats {
        let completed = cause.is_none();
        let tasks: Vec<TaskEpochStats> = self
            .expected
            .tasks()
            .iter()
            .filter_map(|task| {
                let operator_id = self
                    .heads
                    .get(task)
                    .map_or_else(|| task.vertex.to_string(), ToString::to_string);
                let subtask = task.subtask.0;
                match flight.acks.get(task) {
                    Some(ack) => Some(TaskEpochStats {
                        operator_id,
                        subtask,
                        state_bytes: ack.snapshot.segments.iter().map(|d| d.bytes).sum(),
                        state_entries: Some(ack.snapshot.segments.iter().map(|d| d.rows).sum()),
                        alignment_ms: u64::try_from(ack.alignment.as_millis()).unwrap_or(u64::MAX),
                        ack_ms: flight.ack_ms.get(task).copied().unwrap_or(0),
                    }),
                    None if completed => Some(TaskEpochStats {
                        operator_id,
                        subtask,
                        state_bytes: 0,
                        state_entries: None,
                        alignment_ms: 0,
                        ack_ms: 0,
                    }),
                    None => None,
                }
            })
            .collect();
        let kind = match (&flight.kind, flight.is_final) {
            (_, true) => "final",
            (EpochKind::Savepoint { .. }, false) => "savepoint",
            (EpochKind::Checkpoint, false) => "checkpoint",
        };
        EpochStats {
            epoch: flight.epoch.0,
            kind: kind.to_owned(),
            status: if completed { "completed" } else { "aborted" }.to_owned(),
            cause,
            triggered_at_ms: i64::try_from(flight.created_at_ms).unwrap_or(i64::MAX),
            duration_ms: elapsed_ms(flight.started),
            state_bytes: tasks.iter().map(|t| t.state_bytes).sum(),
            tasks,
        }
    }

    /// Whether every task of the ACK set acknowledged the epoch or has ended.
    fn complete(&self, flight: &InFlight) -> bool {
        self.expected
            .tasks()
            .iter()
            .all(|t| flight.acks.contains_key(t) || self.finished.contains_key(t))
    }

    fn manifest(&self, flight: &InFlight) -> EpochManifest {
        let mut m =
            self.expected
                .manifest_template(self.store.namespace(), flight.epoch, self.attempt);
        m.kind = flight.kind.clone();
        m.created_at_ms = flight.created_at_ms;
        let mut finished_splits: BTreeMap<OperatorId, BTreeSet<String>> = BTreeMap::new();
        let mut assigned: BTreeMap<OperatorId, BTreeMap<String, SubtaskIndex>> = BTreeMap::new();
        for task in self.expected.tasks() {
            let snapshot = match flight.acks.get(task) {
                Some(ack) => {
                    m.source_offsets.extend(ack.source_offsets.iter().cloned());
                    for o in &ack.source_offsets {
                        assigned
                            .entry(o.operator.clone())
                            .or_default()
                            .insert(o.split.clone(), o.subtask);
                    }
                    for (op, split) in &ack.finished_splits {
                        finished_splits
                            .entry(op.clone())
                            .or_default()
                            .insert(split.clone());
                    }
                    ack.snapshot.clone()
                }
                None => self.finished[task].clone(),
            };
            m.task_snapshots.push(snapshot);
        }
        for (operator, discovered) in &self.discovered {
            let mut finished = finished_splits.remove(operator).unwrap_or_default();
            let mut discovered = discovered.clone();
            if let Some(before) = self.finished_before.get(operator) {
                finished.extend(before.iter().cloned());
                // A finished file may be gone by now; it stays discovered and finished.
                discovered.extend(before.iter().cloned());
            }
            let assigned = assigned.remove(operator).unwrap_or_default();
            // Splits found by partition discovery while the attempt ran are discovered too.
            discovered.extend(assigned.keys().cloned());
            discovered.extend(finished.iter().cloned());
            m.source_enumerator_snapshots.push(EnumeratorSnapshot {
                operator: operator.clone(),
                discovered,
                assigned,
                finished,
                discovery_cursor: None,
            });
        }
        m.sink_transactions = self
            .pending
            .values()
            .filter(|t| t.epoch <= flight.epoch)
            .cloned()
            .collect();
        m
    }

    /// Publishes the manifest, records DURABLE, commits the sinks, records COMMITTED and
    /// applies retention.
    async fn finish_epoch(&mut self, mut flight: InFlight) -> Result<()> {
        // Every task acknowledged: aligned, snapshotted and pre-committed (a task that ended
        // took part without aligning).
        for next in [
            EpochState::Aligning,
            EpochState::Snapshotting,
            EpochState::Precommitted,
        ] {
            if flight.state < next {
                flight.state = transition(flight.state, next)
                    .map_err(|e| checkpoint_error("epoch lifecycle", e))?;
            }
        }
        let mut manifest = self.manifest(&flight);
        failpoint("after-segments");
        manifest.durable_at_ms = now_ms();
        let published = self.store.publish_manifest(&manifest, &self.expected).await;
        if let Err(e) = published {
            if e.is_retryable() && !flight.is_final {
                let reason = format!("publishing the manifest failed: {e}");
                self.abort(flight, &reason).await;
                return Ok(());
            }
            let fenced = matches!(e, weir_checkpoint::CheckpointError::Fenced { .. });
            let stats = self.epoch_stats(
                &flight,
                Some(format!("publishing the manifest failed: {e}")),
            );
            record_epoch(&self.summary, stats);
            update(&self.summary, |s| {
                s.aborted += 1;
                s.pending_epochs = 0;
                s.fenced += u64::from(fenced);
            });
            return Err(checkpoint_error(
                &format!("publishing the manifest of epoch {}", flight.epoch),
                e,
            ));
        }
        flight.state = transition(flight.state, EpochState::Durable)
            .map_err(|e| checkpoint_error("epoch lifecycle", e))?;
        update(&self.summary, |s| s.pending_epochs = 0);
        let log = self.store.epoch_log();
        // The DURABLE record carries a second copy of the manifest: recovery reads it when
        // the manifest object is damaged.
        let record = EpochRecord::new(flight.epoch, EpochState::Durable, now_ms())
            .with_manifest(&manifest)
            .map_err(|e| checkpoint_error("recording a durable epoch", e))?;
        log.record(&record)
            .await
            .map_err(|e| checkpoint_error("recording a durable epoch", e))?;
        failpoint("after-manifest");
        self.commit(flight.epoch, flight.is_final).await?;
        flight.state = transition(flight.state, EpochState::Committed)
            .map_err(|e| checkpoint_error("epoch lifecycle", e))?;
        log.record(&EpochRecord::new(
            flight.epoch,
            EpochState::Committed,
            now_ms(),
        ))
        .await
        .map_err(|e| checkpoint_error("recording a committed epoch", e))?;
        if let Err(e) = self.store.retain(self.config.retain).await {
            tracing::warn!(error = %e, "checkpoint retention failed; it runs again after the next epoch");
        }
        let stats = self.epoch_stats(&flight, None);
        let duration = stats.duration_ms;
        record_epoch(&self.summary, stats);
        let bytes = manifest.segments().map(|d| d.bytes).sum();
        tracing::info!(epoch = %flight.epoch, duration_ms = duration, state_bytes = bytes, "checkpoint committed");
        update(&self.summary, |s| {
            s.completed += 1;
            s.last_durable_epoch = Some(flight.epoch.0);
            s.last_duration_ms = Some(duration);
            s.max_duration_ms = Some(s.max_duration_ms.unwrap_or(0).max(duration));
            s.last_state_bytes = Some(bytes);
            s.max_state_bytes = Some(s.max_state_bytes.unwrap_or(0).max(bytes));
        });
        for reply in flight.replies {
            let _ = reply.send(Ok(flight.epoch));
        }
        Ok(())
    }

    /// Commits every pending transaction up to `epoch` (subsuming earlier aborted epochs), in
    /// epoch order per sink subtask; `is_final` for the final epoch of a bounded job (the
    /// writers' last transactions, [`weir_api::PreparedSink::commit_final`]).
    async fn commit(&mut self, epoch: Epoch, is_final: bool) -> Result<()> {
        let mut by_subtask: BTreeMap<(OperatorId, SubtaskIndex), Vec<serde_json::Value>> =
            BTreeMap::new();
        let mut by_epoch: BTreeMap<OperatorId, BTreeMap<Epoch, Vec<serde_json::Value>>> =
            BTreeMap::new();
        // `pending` is ordered by (sink, subtask, epoch): an epoch's values come in subtask order.
        for ((op, subtask, e), t) in &self.pending {
            if *e > epoch {
                continue;
            }
            if commits_whole_epochs(&self.sinks, op) {
                by_epoch
                    .entry(op.clone())
                    .or_default()
                    .entry(*e)
                    .or_default()
                    .push(t.pre_commit.clone());
            } else {
                by_subtask
                    .entry((op.clone(), *subtask))
                    .or_default()
                    .push(t.pre_commit.clone());
            }
        }
        if is_final {
            // A sink that commits whole epochs learns that the input ended even when none of
            // its subtasks ran (a lane that reads nothing): the lanes' commits wait for it.
            for (operator, handle) in &self.sinks {
                if handle.sink.commits_whole_epochs() {
                    by_epoch.entry(operator.clone()).or_default();
                }
            }
        }
        let mut commits = 0;
        for ((operator, subtask), values) in by_subtask {
            if commits > 0 {
                failpoint("mid-commit");
            }
            commits += 1;
            commit_sink(
                &self.sinks,
                &self.store,
                &self.job_id,
                (&operator, &operator),
                subtask,
                &values,
                is_final,
            )
            .await?;
        }
        for (operator, epochs) in by_epoch {
            if commits > 0 {
                failpoint("mid-commit");
            }
            commits += 1;
            let epochs: Vec<_> = epochs.into_iter().collect();
            commit_sink_epochs(&self.sinks, &self.job_id, &operator, &epochs, is_final).await?;
        }
        if !self.pending.is_empty() {
            failpoint("mid-commit");
        }
        self.pending.retain(|(_, _, e), _| *e > epoch);
        let pending = self.pending.len() as u64;
        update(&self.summary, |s| s.pending_sink_transactions = pending);
        Ok(())
    }

    async fn abort(&mut self, flight: InFlight, reason: &str) {
        tracing::warn!(epoch = %flight.epoch, reason, "checkpoint aborted; its sink transactions wait for the next durable epoch");
        let record =
            EpochRecord::new(flight.epoch, EpochState::Aborted, now_ms()).with_reason(reason);
        if let Err(e) = self.store.epoch_log().record(&record).await {
            tracing::warn!(error = %e, "recording an aborted epoch failed");
        }
        record_epoch(
            &self.summary,
            self.epoch_stats(&flight, Some(reason.to_owned())),
        );
        update(&self.summary, |s| {
            s.aborted += 1;
            s.pending_epochs = 0;
        });
        for reply in flight.replies {
            let _ = reply.send(Err(Error::Internal(format!(
                "checkpoint {} aborted: {reason}",
                flight.epoch
            ))));
        }
    }
}

/// Publishes the pre-committed transactions `values` of one subtask of sink `operator`, staged
/// by the subtask of `staged_by` (the same id, but for a sink renamed by a changed job);
/// `last` when they are its writer's last ([`weir_api::PreparedSink::commit_final`]).
pub(crate) async fn commit_sink(
    sinks: &BTreeMap<OperatorId, SinkHandle>,
    store: &CheckpointStore,
    job_id: &weir_api::JobId,
    (operator, staged_by): (&OperatorId, &OperatorId),
    subtask: SubtaskIndex,
    values: &[serde_json::Value],
    last: bool,
) -> Result<()> {
    let handle = sinks.get(operator).ok_or_else(|| Error::Restore {
        message: format!(
            "the checkpoint holds transactions of sink `{operator}`, which this job does not \
             have or which no longer commits by epoch (the sink protocol changed)"
        ),
    })?;
    // The transactions name files in the staging area of the id that wrote them (another one
    // for a sink a changed job renamed).
    let ctx = TaskContext {
        staging: Some(super::sink_staging(store, staged_by, subtask)),
        ..TaskContext::new(
            job_id.clone(),
            staged_by.clone(),
            subtask,
            handle.parallelism.max(subtask.0 + 1),
        )
    };
    let committed = if last {
        handle.sink.commit_final(&ctx, values).await
    } else {
        handle.sink.commit_epoch(&ctx, values).await
    };
    committed.map_err(|source| Error::Task {
        task: ctx.label(),
        source,
    })
}

/// Whether sink `operator` publishes whole epochs at once
/// ([`weir_api::PreparedSink::commits_whole_epochs`]); `false` for an unknown sink, whose
/// transactions then fail in [`commit_sink`] with the reason.
pub(crate) fn commits_whole_epochs(
    sinks: &BTreeMap<OperatorId, SinkHandle>,
    operator: &OperatorId,
) -> bool {
    sinks
        .get(operator)
        .is_some_and(|h| h.sink.commits_whole_epochs())
}

/// Publishes whole epochs of sink `operator` (every subtask's values per epoch, epochs in
/// order) through [`weir_api::PreparedSink::commit_epochs`]; `last` when they end a bounded
/// job's input.
pub(crate) async fn commit_sink_epochs(
    sinks: &BTreeMap<OperatorId, SinkHandle>,
    job_id: &weir_api::JobId,
    operator: &OperatorId,
    epochs: &[(Epoch, Vec<serde_json::Value>)],
    last: bool,
) -> Result<()> {
    let Some(handle) = sinks.get(operator) else {
        return Err(Error::Restore {
            message: format!(
                "the checkpoint holds transactions of sink `{operator}`, which this job does not have"
            ),
        });
    };
    let ctx = TaskContext {
        lane: handle.lane.clone(),
        ..TaskContext::new(
            job_id.clone(),
            operator.clone(),
            SubtaskIndex(0),
            handle.parallelism,
        )
    };
    handle
        .sink
        .commit_epochs(&ctx, epochs, last)
        .await
        .map_err(|source| Error::Task {
            task: ctx.label(),
            source,
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::checkpoint::CheckpointLocation;
    use object_store::memory::InMemory;
    use object_store::path::Path as ObjectPath;

    fn coordinator(attempt: AttemptId) -> Coordinator {
        let spec = weir_plan::JobSpec::from_yaml_str(
            r#"
job: fenced
parallelism: 2
sources:
  - name: gen
    connector: datagen
    schema: [{ name: x, type: int64 }]
    options: { rows: 10 }
sinks: [{ name: out, connector: blackhole, input: gen }]
"#,
            "fenced.yaml",
        )
        .unwrap();
        let plan = weir_plan::CompiledPlans::compile(&spec, Some("fenced.yaml"))
            .unwrap()
            .partitioned;
        let storage =
            CheckpointLocation::object_store(Arc::new(InMemory::new()), ObjectPath::default());
        let store = CheckpointStore::try_new(storage.store.clone(), storage.base.clone(), "fenced")
            .unwrap();
        let (trigger, _) = watch::channel(None);
        let (_, reports) = mpsc::unbounded_channel();
        let (_, requests) = mpsc::channel(1);
        Coordinator {
            config: CheckpointConfig {
                interval: Duration::from_secs(3600),
                min_pause: Duration::ZERO,
                storage,
                retain: 1,
                timeout: Duration::from_secs(3600),
            },
            store,
            expected: ExpectedCheckpoint::from_plan(&plan),
            attempt,
            job_id: plan.job_id.clone(),
            next_epoch: Epoch(1),
            trigger,
            reports,
            requests: Arc::new(tokio::sync::Mutex::new(requests)),
            live_sources: HashSet::new(),
            finished: HashMap::new(),
            discovered: BTreeMap::new(),
            finished_before: BTreeMap::new(),
            sinks: BTreeMap::new(),
            pending: BTreeMap::new(),
            summary: SharedSummary::default(),
            heads: task_heads(&plan),
        }
    }

    fn ack(c: &Coordinator, attempt: AttemptId, epoch: Epoch) -> TaskAck {
        TaskAck {
            attempt,
            epoch,
            snapshot: TaskSnapshot {
                task: c.expected.tasks()[0].clone(),
                segments: Vec::new(),
                input_watermarks: Vec::new(),
            },
            source_offsets: Vec::new(),
            finished_splits: Vec::new(),
            sink_transactions: vec![SinkTransaction {
                operator: OperatorId::new("out"),
                subtask: SubtaskIndex(0),
                epoch,
                pre_commit: serde_json::json!({"epoch": epoch.0}),
            }],
            alignment: Duration::ZERO,
        }
    }

    #[test]
    fn an_acknowledgement_of_another_attempt_never_counts() {
        let mut c = coordinator(AttemptId(7));
        let mut flight = c.trigger_epoch(EpochKind::Checkpoint, false, Vec::new());
        // A stale attempt's acknowledgement, of the very epoch in flight: refused, and its
        // sink pre-commit is not taken into the pending transactions either.
        c.on_ack(ack(&c, AttemptId(6), flight.epoch), Some(&mut flight));
        assert!(flight.acks.is_empty());
        assert!(c.pending.is_empty());
        assert!(!c.complete(&flight));
        // The current attempt's counts.
        c.on_ack(ack(&c, AttemptId(7), flight.epoch), Some(&mut flight));
        assert_eq!(flight.acks.len(), 1);
        assert_eq!(c.pending.len(), 1);
    }

    #[test]
    fn an_epoch_completes_with_every_task_acknowledged_or_finished() {
        let mut c = coordinator(AttemptId(1));
        let mut flight = c.trigger_epoch(EpochKind::Checkpoint, false, Vec::new());
        let tasks = c.expected.tasks().to_vec();
        assert_eq!(tasks.len(), 2);
        c.on_ack(ack(&c, AttemptId(1), flight.epoch), Some(&mut flight));
        assert!(!c.complete(&flight));
        c.finished.insert(
            tasks[1].clone(),
            TaskSnapshot {
                task: tasks[1].clone(),
                segments: Vec::new(),
                input_watermarks: Vec::new(),
            },
        );
        assert!(c.complete(&flight));
        let manifest = c.manifest(&flight);
        assert_eq!(manifest.task_snapshots.len(), 2);
        assert_eq!(manifest.sink_transactions.len(), 1);
    }

    /// One task's acknowledgement without a sink transaction, with `segments`.
    fn task_ack(
        task: &TaskId,
        epoch: Epoch,
        segments: Vec<weir_state::SegmentDescriptor>,
    ) -> TaskAck {
        TaskAck {
            attempt: AttemptId(1),
            epoch,
            snapshot: TaskSnapshot {
                task: task.clone(),
                segments,
                input_watermarks: Vec::new(),
            },
            source_offsets: Vec::new(),
            finished_splits: Vec::new(),
            sink_transactions: Vec::new(),
            alignment: Duration::from_millis(4),
        }
    }

    #[tokio::test]
    async fn recent_epochs_hold_each_completed_and_aborted_epoch_with_its_tasks() {
        let mut c = coordinator(AttemptId(1));
        let probe = crate::CheckpointProbe(Some(c.summary.clone()));
        let tasks = c.expected.tasks().to_vec();
        assert_eq!(tasks.len(), 2);
        assert!(probe.recent_epochs().is_empty());

        // Epoch 1: both tasks acknowledge, it completes.
        let mut flight = c.trigger_epoch(EpochKind::Checkpoint, false, Vec::new());
        assert_eq!(probe.summary().map(|s| s.pending_epochs), Some(1));
        for t in &tasks {
            c.on_ack(task_ack(t, flight.epoch, Vec::new()), Some(&mut flight));
        }
        assert!(c.complete(&flight));
        c.finish_epoch(flight).await.unwrap();
        let epochs = probe.recent_epochs();
        assert_eq!(epochs.len(), 1);
        let first = &epochs[0];
        assert_eq!(
            (first.epoch, first.kind.as_str(), first.status.as_str()),
            (1, "checkpoint", "completed")
        );
        assert_eq!(first.cause, None);
        assert!(first.triggered_at_ms > 1_600_000_000_000, "{first:?}");
        assert_eq!(first.tasks.len(), 2);
        for (i, t) in first.tasks.iter().enumerate() {
            // The task's head operator: the source its chain starts with.
            assert_eq!(t.operator_id, "gen");
            assert_eq!(t.subtask, i as u32);
            assert_eq!(t.state_entries, Some(0));
            assert_eq!(t.alignment_ms, 4);
            assert!(t.ack_ms <= first.duration_ms, "{first:?}");
        }
        assert_eq!(probe.last_completed_epoch().as_ref(), Some(first));

        // Epoch 2: one task acknowledges with a segment, then the epoch times out.
        let mut flight = c.trigger_epoch(EpochKind::Checkpoint, false, Vec::new());
        let segment = weir_state::SegmentDescriptor {
            path: "checkpoint/fenced/2/gen/0/0/counts.parquet".into(),
            operator: OperatorId::new("gen"),
            subtask: SubtaskIndex(0),
            shard: weir_api::StateShardId(0),
            last_shard: None,
            state: "counts".into(),
            rows: 7,
            bytes: 1234,
            sha256: String::new(),
            state_shard_count: 1,
            schema_version: 1,
        };
        c.on_ack(
            task_ack(&tasks[0], flight.epoch, vec![segment]),
            Some(&mut flight),
        );
        c.abort(flight, "timed out").await;
        let epochs = probe.recent_epochs();
        assert_eq!(epochs.len(), 2);
        assert_eq!(epochs[0], *first, "oldest first");
        let aborted = &epochs[1];
        assert_eq!((aborted.epoch, aborted.status.as_str()), (2, "aborted"));
        assert_eq!(aborted.cause.as_deref(), Some("timed out"));
        assert_eq!(aborted.state_bytes, 1234);
        assert_eq!(aborted.tasks.len(), 1, "only the task that acknowledged");
        assert_eq!(aborted.tasks[0].state_entries, Some(7));
        assert_eq!(aborted.tasks[0].state_bytes, 1234);
        // The aborted epoch is not the last completed one.
        assert_eq!(probe.last_completed_epoch().as_ref(), Some(first));
        let summary = probe.summary().unwrap();
        assert_eq!(
            (summary.triggered, summary.completed, summary.aborted),
            (2, 1, 1)
        );
        assert_eq!(summary.pending_epochs, 0);
    }
}
