//! A task's part of an epoch: barrier injection by source subtasks at a safe point, and the
//! snapshot every task takes at an aligned barrier (seed 000 §5.3–§5.5).

use crate::checkpoint::recovery::StoredCursor;
use crate::checkpoint::{TaskAck, TaskReport, Trigger, failpoint};
use crate::error::{Error, Result};
use crate::event_time::SourceWatermarks;
use crate::task::{ChainTask, SourceProgress};
use weir_api::{Barrier, OperatorId, StreamMessage};
use weir_checkpoint::{InputWatermark, SinkTransaction, SourceSplitOffset, TaskSnapshot};
use weir_plan::{ShardAssignment, ShardRange};
use weir_state::SnapshotScope;

/// What a source subtask seals with its barrier: each unfinished split's next-to-read cursor
/// and event-time progress, and the splits it finished.
#[derive(Debug, Default)]
pub(crate) struct SourceCut {
    pub(crate) offsets: Vec<SourceSplitOffset>,
    pub(crate) finished: Vec<(OperatorId, String)>,
}

impl SourceCut {
    fn seal(progress: &SourceProgress, watermarks: Option<&SourceWatermarks>) -> Result<Self> {
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
            Some(t) if !t.is_final => self.inject(t, progress, watermarks).await,
            // The final epoch comes after every split is read (`await_final_epoch`).
            _ => Ok(()),
        }
    }

    /// Seals the cut of this source subtask and runs the epoch's barrier through the chain.
    pub(crate) async fn inject(
        &mut self,
        trigger: Trigger,
        progress: &SourceProgress,
        watermarks: Option<&SourceWatermarks>,
    ) -> Result<()> {
        self.last_injected = Some(trigger.epoch);
        let cut = SourceCut::seal(progress, watermarks)?;
        let barrier = Barrier {
            epoch: trigger.epoch,
            is_final: trigger.is_final,
        };
        self.checkpoint(barrier, cut, Vec::new()).await
    }

    /// The task's part of epoch `barrier.epoch`, at the aligned barrier: flush at the final
    /// barrier, let every operator write its state, commit the journal, pre-commit the sink,
    /// take the state view, forward the barrier, then write the segments and acknowledge in the
    /// background.
    pub(crate) async fn checkpoint(
        &mut self,
        barrier: Barrier,
        cut: SourceCut,
        input_watermarks: Vec<InputWatermark>,
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
        self.commit_state()?;
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
        }
        let mut pending = Vec::new();
        if let Some(backend) = self.state.opened() {
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
            for operator in &self.operators {
                let scope = SnapshotScope {
                    namespace: cp.namespace.clone(),
                    epoch: barrier.epoch,
                    job: self.task_id.job.clone(),
                    operator: operator.clone(),
                    subtask: self.task_id.subtask,
                    shards: shards.clone(),
                };
                pending.push(
                    cp.segments
                        .begin_snapshot(backend, scope)
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
        };
        let label = self.label.clone();
        // Finished handles are dropped as epochs go by; the last ones are awaited at the end.
        self.snapshot_writes.retain(|h| !h.is_finished());
        self.snapshot_writes.push(tokio::spawn(async move {
            for snapshot in pending {
                match snapshot.write().await {
                    Ok(segments) => ack.snapshot.segments.extend(segments),
                    Err(source) => {
                        cp.report(TaskReport::Failed(Error::State {
                            context: format!(
                                "writing the state of {label} for epoch {}",
                                ack.epoch
                            ),
                            source,
                        }));
                        return;
                    }
                }
            }
            cp.report(TaskReport::Ack(Box::new(ack)));
        }));
        Ok(())
    }
}
