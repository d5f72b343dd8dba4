//! A task's part of an epoch: barrier injection by source subtasks at a safe point, and the
//! snapshot every task takes at an aligned barrier (docs/fault-tolerance.md, "What happens at an
//! epoch").

use super::{ChainTask, SourceProgress};
use crate::checkpoint::recovery::StoredCursor;
use crate::checkpoint::{TaskAck, TaskCheckpointing, TaskReport, Trigger, failpoint};
use crate::error::{Error, Result};
use crate::event_time::SourceWatermarks;
use crate::metrics::SubtaskMetrics;
use std::time::Duration;
use weir_api::{Barrier, Epoch, OperatorId, StateImage, StreamMessage};
use weir_checkpoint::{InputWatermark, SinkTransaction, SourceSplitOffset, TaskSnapshot};
use weir_plan::{ShardAssignment, ShardRange};
use weir_state::{PendingSnapshot, SegmentDescriptor, SnapshotScope};

/// What a source subtask seals with its barrier: each unfinished split's next-to-read cursor
/// and event-time progress, and the splits it finished.
#[derive(Debug, Default)]
pub(crate) struct SourceCut {
    pub(crate) offsets: Vec<SourceSplitOffset>,
    pub(crate) finished: Vec<(OperatorId, String)>,
}

impl SourceCut {
    pub(crate) fn seal(
        progress: &SourceProgress,
        watermarks: Option<&SourceWatermarks>,
    ) -> Result<Self> {
        let mut cut = SourceCut::default();
        for p in &progress.splits {
            if p.finished {
                cut.finished
                    .push((progress.operator.clone(), p.split.id.clone()));
                continue;
            }
            let (max_event_time, emitted) = watermarks
                .map(|w| w.split_progress(&p.split.id))
                .unwrap_or_default();
            let cursor = serde_json::to_value(StoredCursor {
                next_record: p.split.cursor.next_record,
                max_event_time: max_event_time.map(|t| t.0),
            })
            .map_err(|e| Error::Internal(format!("encoding a split cursor: {e}")))?;
            cut.offsets.push(SourceSplitOffset {
                operator: progress.operator.clone(),
                subtask: progress.subtask,
                split: p.split.id.clone(),
                cursor,
                watermark: emitted.map(|w| w.0),
            });
        }
        Ok(cut)
    }
}

impl ChainTask {
    /// The counters of every operator of the chain, where its snapshot's state size goes.
    fn state_gauges(&self) -> Vec<(OperatorId, SubtaskMetrics)> {
        let mut gauges: Vec<(OperatorId, SubtaskMetrics)> = Vec::new();
        if let Some(head) = self.operators.first() {
            gauges.push((head.clone(), self.head_metrics.clone()));
        }
        let links = self
            .links
            .iter()
            .map(|l| (&l.operator, &l.metrics))
            .chain(self.sink.iter().map(|s| (&s.operator_id, &s.metrics)));
        for (operator, metrics) in links {
            if !gauges.iter().any(|(o, _)| o == operator) {
                gauges.push((operator.clone(), metrics.clone()));
            }
        }
        gauges
    }

    /// The newest trigger this source subtask has not injected yet, marked as seen.
    pub(crate) fn take_trigger(&mut self) -> Option<Trigger> {
        let cp = self.checkpointing.as_mut()?;
        let t = (*cp.trigger.borrow_and_update())?;
        (Some(t.epoch) > self.last_injected).then_some(t)
    }

    /// At a safe point of a source subtask: injects the pending epoch's barrier, if any.
    pub(crate) async fn inject_if_triggered(
        &mut self,
        progress: &SourceProgress,
        watermarks: Option<&SourceWatermarks>,
    ) -> Result<()> {
        let changed = self
            .checkpointing
            .as_ref()
            .is_some_and(|c| c.trigger.has_changed().unwrap_or(false));
        if !changed {
            return Ok(());
        }
        match self.take_trigger() {
            Some(t) if !t.is_final => {
                let cut = SourceCut::seal(progress, watermarks)?;
                self.inject(t, cut, Vec::new()).await
            }
            // The final epoch comes after every split is read (`await_final_epoch`).
            _ => Ok(()),
        }
    }

    /// Runs the epoch's barrier, with the cut it seals, through the chain from here.
    pub(crate) async fn inject(
        &mut self,
        trigger: Trigger,
        cut: SourceCut,
        input_watermarks: Vec<InputWatermark>,
    ) -> Result<()> {
        self.last_injected = Some(trigger.epoch);
        let barrier = Barrier {
            epoch: trigger.epoch,
            is_final: trigger.is_final,
        };
        // A task without input channels aligns nothing.
        self.checkpoint(barrier, cut, input_watermarks, Duration::ZERO)
            .await
    }

    /// The task's part of epoch `barrier.epoch`, at the aligned barrier: flush at the final
    /// barrier, let every operator write its state, commit the journal, pre-commit the sink,
    /// take the state view, forward the barrier, write the segments and acknowledge in the
    /// background, and make the local state file durable on the blocking pool. `alignment` is
    /// the time from the epoch's first barrier to its last at this task's input gate.
    pub(crate) async fn checkpoint(
        &mut self,
        barrier: Barrier,
        cut: SourceCut,
        input_watermarks: Vec<InputWatermark>,
        alignment: Duration,
    ) -> Result<()> {
        let Some(cp) = self.checkpointing.clone() else {
            return Err(self.internal(format!(
                "barrier {} reached a job that takes no checkpoints",
                barrier.epoch
            )));
        };
        if barrier.is_final && !self.flushed {
            self.flushed = true;
            self.call_every_link(|op, out| op.on_end_of_input(out))
                .await?;
        }
        self.call_every_link(|op, out| op.on_barrier(barrier, out))
            .await?;
        // Operators that keep their state in memory hand over an image of it, encoded later.
        let mut images = Vec::new();
        for link in &mut self.links {
            let image = link
                .op
                .snapshot_image(barrier)
                .map_err(|source| Error::Task {
                    task: link.label.clone(),
                    source,
                })?;
            if let Some(image) = image {
                images.push((link.operator.clone(), link.label.clone(), image));
            }
        }
        self.commit_state().await?;
        let mut sink_transactions = Vec::new();
        if let Some(sink) = self.sink.as_mut().filter(|s| s.epochs) {
            let pre_commit = sink
                .writer
                .pre_commit(barrier.epoch)
                .await
                .map_err(|source| Error::Task {
                    task: sink.label.clone(),
                    source,
                })?;
            sink_transactions.push(SinkTransaction {
                operator: sink.operator_id.clone(),
                subtask: self.task_id.subtask,
                epoch: barrier.epoch,
                pre_commit,
            });
            failpoint("after-pre-commit");
        } else if let Some(sink) = self.sink.as_mut() {
            sink.writer
                .flush_at_barrier(barrier.epoch)
                .await
                .map_err(|source| Error::Task {
                    task: sink.label.clone(),
                    source,
                })?;
        }
        // A vertex that is not keyed keeps its operators' state in shard 0 of its own.
        let shards = cp.shards.clone().unwrap_or_else(|| ShardAssignment {
            hash_policy: weir_plan::HASH_POLICY.to_owned(),
            state_shard_count: 1,
            owners: vec![ShardRange {
                subtask: self.task_id.subtask.0,
                first_shard: 0,
                last_shard: 0,
            }],
        });
        let scope_of = |operator: &OperatorId| SnapshotScope {
            namespace: cp.namespace.clone(),
            epoch: barrier.epoch,
            job: self.task_id.job.clone(),
            operator: operator.clone(),
            subtask: self.task_id.subtask,
            shards: shards.clone(),
        };
        let mut pending = Vec::new();
        if let Some(backend) = self.state.opened() {
            for operator in &self.operators {
                pending.push(
                    cp.segments
                        .begin_snapshot(backend, scope_of(operator))
                        .map_err(|source| Error::State {
                            context: format!(
                                "snapshotting {} at epoch {}",
                                self.label, barrier.epoch
                            ),
                            source,
                        })?,
                );
            }
        }
        let images: Vec<_> = images
            .into_iter()
            .map(|(operator, label, image)| (scope_of(&operator), label, image))
            .collect();
        for i in 0..self.writers.len() {
            self.send_control(i, StreamMessage::Barrier(barrier))
                .await?;
        }
        let mut ack = TaskAck {
            attempt: cp.attempt,
            epoch: barrier.epoch,
            snapshot: TaskSnapshot {
                task: self.task_id.clone(),
                segments: Vec::new(),
                input_watermarks,
            },
            source_offsets: cut.offsets,
            finished_splits: cut.finished,
            sink_transactions,
            alignment,
        };
        let label = self.label.clone();
        let gauges = self.state_gauges();
        // Finished handles are dropped as epochs go by; the last ones are awaited at the end.
        self.snapshot_writes.retain(|h| !h.is_finished());
        self.snapshot_writes.push(tokio::spawn(async move {
            let epoch = ack.epoch;
            let written = write_snapshots(&cp, pending, images, &label, epoch).await;
            match written {
                Ok(segments) => {
                    for (operator, metrics) in &gauges {
                        let (entries, bytes) = segments
                            .iter()
                            .filter(|d| &d.operator == operator)
                            .fold((0, 0), |(e, b), d| (e + d.rows, b + d.bytes));
                        metrics.set_state(entries, bytes);
                    }
                    ack.snapshot.segments = segments;
                    cp.report(TaskReport::Ack(Box::new(ack)));
                }
                Err(e) => cp.report(TaskReport::Failed(e)),
            }
        }));
        // The snapshot reads the committed state through its own view; the fsync that makes
        // the local file durable at the barrier runs meanwhile, off the async workers.
        self.sync_state().await
    }
}

/// Writes a task's snapshot of one epoch: the keyed-state segments of the redb view, then each
/// image, encoded on the blocking pool. Returns every segment written.
async fn write_snapshots(
    cp: &TaskCheckpointing,
    pending: Vec<PendingSnapshot>,
    images: Vec<(SnapshotScope, String, StateImage)>,
    label: &str,
    epoch: Epoch,
) -> Result<Vec<SegmentDescriptor>> {
    let state_error = |source| Error::State {
        context: format!("writing the state of {label} for epoch {epoch}"),
        source,
    };
    let mut segments = Vec::new();
    for snapshot in pending {
        segments.extend(snapshot.write().await.map_err(state_error)?);
    }
    for (scope, operator_label, image) in images {
        let rows = tokio::task::spawn_blocking(move || image.encode())
            .await
            .map_err(|e| Error::Panic {
                task: operator_label.clone(),
                message: e.to_string(),
            })?
            .map_err(|source| Error::Task {
                task: operator_label.clone(),
                source,
            })?;
        for state in rows {
            if let Some(d) = cp
                .segments
                .write_image(&scope, state)
                .await
                .map_err(state_error)?
            {
                segments.push(d);
            }
        }
    }
    Ok(segments)
}
