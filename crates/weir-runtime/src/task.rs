//! One subtask of one vertex: a chain of operators driven by a source reader or an input gate,
//! ending in a sink or in edge writers.

use crate::checkpoint::recovery::SplitResume;
use crate::checkpoint::{TaskCheckpointing, TaskReport, Trigger};
use crate::edge_writer::{EdgeWriter, SendError};
use crate::error::{Error, Result};
use crate::event_time::{SourceAlignment, SourceStep, SourceWatermarks};
use crate::input_gate::{GateError, GateEvent, InputGate};
use crate::metrics::{JobMetrics, OperatorMetrics};
use crate::schema_check::SchemaCheck;
use crate::task_checkpoint::SourceCut;
use crate::task_state::TaskState;
use arrow::record_batch::RecordBatch;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use weir_api::{
    Emitted, Epoch, Operator, OperatorId, Output, PreparedSource, SinkWriter, SourceSplit,
    SplitBatch, SplitReader, StreamMessage, TaskContext, TaskId, Watermark,
};
use weir_checkpoint::{InputWatermark, TaskSnapshot};
use weir_plan::ModelWatermark;

/// What drives the chain.
pub(crate) enum Head {
    /// A source reading its assigned splits.
    Source {
        source: Arc<dyn PreparedSource>,
        ctx: TaskContext,
        /// Assigned splits, each from its cursor, with its event-time progress when restored.
        splits: Vec<(SourceSplit, SplitResume)>,
        metrics: Arc<OperatorMetrics>,
        /// Writers of the source's `dead_letter` output.
        dead_letter_writers: Vec<usize>,
        /// Per-split event-time watermarks, when the source node declares them.
        watermark: Option<ModelWatermark>,
        /// Watermark alignment with the source's other subtasks, when the spec bounds the drift.
        alignment: Option<Arc<SourceAlignment>>,
    },
    /// Input channels from upstream tasks.
    Gate(InputGate),
}

/// An operator in the chain.
pub(crate) struct Link {
    pub(crate) op: Box<dyn Operator>,
    pub(crate) operator: OperatorId,
    pub(crate) label: String,
    pub(crate) metrics: Arc<OperatorMetrics>,
    /// The declared schema of each output port: the main output, then the side outputs in
    /// side-output order.
    pub(crate) port_schemas: Vec<SchemaCheck>,
    /// Writers per side output, in side-output order.
    pub(crate) side_writers: Vec<Vec<usize>>,
}

/// The sink at the end of the chain.
pub(crate) struct SinkLink {
    pub(crate) writer: Box<dyn SinkWriter>,
    pub(crate) operator_id: OperatorId,
    /// The writer runs in epoch mode: rows become visible only through epoch commits.
    pub(crate) epochs: bool,
    pub(crate) label: String,
    pub(crate) metrics: Arc<OperatorMetrics>,
}

/// A running subtask.
pub(crate) struct ChainTask {
    pub(crate) label: String,
    pub(crate) head: Head,
    pub(crate) links: Vec<Link>,
    pub(crate) sink: Option<SinkLink>,
    /// Writers fed by the main output of the chain's last element (empty when it is a sink).
    pub(crate) tail_writers: Vec<usize>,
    pub(crate) writers: Vec<EdgeWriter>,
    pub(crate) job_metrics: Arc<JobMetrics>,
    /// The chain's keyed state; its journal is committed after each input is fully handled.
    pub(crate) state: Arc<TaskState>,
    /// The task's stable identity.
    pub(crate) task_id: TaskId,
    /// Every operator of the chain, in chain order.
    pub(crate) operators: Vec<OperatorId>,
    /// Set when the job checkpoints.
    pub(crate) checkpointing: Option<TaskCheckpointing>,
    /// The last epoch this source subtask injected.
    pub(crate) last_injected: Option<Epoch>,
    /// The links were flushed (`on_end_of_input`) at the final barrier.
    pub(crate) flushed: bool,
    /// Background writes of this task's snapshots; each ends with its acknowledgement.
    pub(crate) snapshot_writes: Vec<tokio::task::JoinHandle<()>>,
}

enum Item {
    Batch(usize, RecordBatch),
    Watermark(Watermark),
}

impl ChainTask {
    /// Runs the subtask to its end; on failure, the sink's staged output is aborted.
    pub(crate) async fn run(mut self) -> Result<()> {
        let result = self.run_inner().await;
        if result.is_err() {
            // Mutations of the input whose output did not get through never reach the backend.
            self.state.rollback();
        }
        if result.is_err()
            && let Some(sink) = self.sink.as_mut()
            && let Err(e) = sink.writer.abort().await
        {
            tracing::warn!(task = %sink.label, error = %e, "aborting the sink failed");
        }
        result
    }

    async fn run_inner(&mut self) -> Result<()> {
        match std::mem::replace(&mut self.head, Head::Gate(InputGate::new(Vec::new()))) {
            Head::Source {
                source,
                ctx,
                splits,
                metrics,
                dead_letter_writers,
                watermark,
                alignment,
            } => {
                let reading = SourceReading {
                    source: &source,
                    ctx: &ctx,
                    metrics: &metrics,
                    dead_letter_writers: &dead_letter_writers,
                    alignment: alignment.as_deref(),
                };
                let mut progress = SourceProgress::new(&ctx, &splits);
                let mut generators = watermark.as_ref().map(|spec| {
                    let mut w = SourceWatermarks::new(spec);
                    w.restore(&splits);
                    w
                });
                self.read_source(&reading, &mut progress, generators.as_mut())
                    .await?;
                for &w in &dead_letter_writers {
                    self.send_control(w, StreamMessage::Watermark(Watermark::END))
                        .await?;
                }
                self.drive(0, Item::Watermark(Watermark::END)).await?;
                self.commit_state().await?;
                self.await_final_epoch(Some((&progress, generators.as_ref())), &[])
                    .await?;
            }
            Head::Gate(mut gate) => loop {
                let event = gate.next().await;
                match event {
                    Ok(GateEvent::Data { input, batch }) => {
                        self.drive(0, Item::Batch(input, batch)).await?;
                        self.commit_state().await?;
                    }
                    Ok(GateEvent::Watermark(w)) => {
                        self.drive(0, Item::Watermark(w)).await?;
                        self.commit_state().await?;
                    }
                    Ok(GateEvent::Barrier(b)) => {
                        let inputs = gate.channel_states();
                        self.checkpoint(b, SourceCut::default(), inputs).await?;
                    }
                    Ok(GateEvent::Idle) => self.send_idle().await?,
                    Ok(GateEvent::End) => {
                        let inputs = gate.channel_states();
                        if self.checkpointing.is_some() && !self.flushed {
                            // Every input came from a task that never ran (restored after all
                            // input was read): no barrier will arrive, so this task brings the
                            // job's remaining epochs, the final one last, to its downstream.
                            self.await_final_epoch(None, &inputs).await?;
                        }
                        self.finish().await?;
                        self.report_finished(inputs).await;
                        return Ok(());
                    }
                    Err(GateError::Closed) => {
                        return Err(Error::ChannelClosed {
                            task: self.label.clone(),
                        });
                    }
                    Err(GateError::Protocol(m)) => {
                        return Err(self.internal(m));
                    }
                }
            },
        }
        self.finish().await?;
        self.report_finished(Vec::new()).await;
        Ok(())
    }

    /// Tells the coordinator this task ended: it takes part in later epochs without state.
    /// Sent after the acknowledgements of its snapshots, so an epoch it took part in counts
    /// its snapshot, not this one.
    async fn report_finished(&mut self, input_watermarks: Vec<InputWatermark>) {
        for write in self.snapshot_writes.drain(..) {
            let _ = write.await;
        }
        if let Some(cp) = &self.checkpointing {
            cp.report(TaskReport::Finished(TaskSnapshot {
                task: self.task_id.clone(),
                segments: Vec::new(),
                input_watermarks,
            }));
        }
    }

    /// Commits the state journal: the input just handled had its output handed on (to the sink
    /// or into the outgoing channels), so its mutations are acknowledged. The commit is not
    /// fsynced; when no barrier made the state durable for a while, this does (off the async
    /// workers).
    pub(crate) async fn commit_state(&mut self) -> Result<()> {
        let task_error = |source| Error::Task {
            task: self.label.clone(),
            source,
        };
        self.state.commit().map_err(task_error)?;
        self.state.sync_if_due().await.map_err(task_error)
    }

    /// Makes every state commit so far durable, on the blocking pool (at barriers, and at the
    /// end of input when the state file outlives the job).
    pub(crate) async fn sync_state(&mut self) -> Result<()> {
        self.state.sync().await.map_err(|source| Error::Task {
            task: self.label.clone(),
            source,
        })
    }

    pub(crate) fn internal(&self, message: String) -> Error {
        Error::Task {
            task: self.label.clone(),
            source: weir_api::Error::Internal(message),
        }
    }

    /// Reads every assigned split in turn and drives its rows down the chain. With watermarks,
    /// each batch is sliced at its split's watermark cut points and the source watermark (the
    /// minimum over open splits) is driven after the rows that moved it. With checkpoints, a
    /// pending epoch's barrier is injected at each safe point: after a batch was handed on, or
    /// while the reader waits for input.
    async fn read_source(
        &mut self,
        reading: &SourceReading<'_>,
        progress: &mut SourceProgress,
        mut watermarks: Option<&mut SourceWatermarks>,
    ) -> Result<()> {
        let clock = tokio::time::Instant::now();
        let now_ms = || u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX);
        if let Some(m) = watermarks.as_deref().and_then(SourceWatermarks::current) {
            reading.published(m); // restored progress
        }
        for index in 0..progress.splits.len() {
            let split = progress.splits[index].split.clone();
            let mut reader = reading
                .source
                .open_split(&split, reading.ctx)
                .await
                .map_err(|e| reading.fail(e))?;
            if let Some(w) = watermarks.as_deref_mut() {
                w.open_split(&split.id, now_ms());
            }
            loop {
                self.await_alignment(reading, progress, watermarks.as_deref())
                    .await?;
                let Some(read) = self
                    .next_read(
                        reading,
                        &mut reader,
                        watermarks.as_deref_mut(),
                        &now_ms,
                        progress,
                    )
                    .await
                    .map_err(|e| e.into_error(reading))?
                else {
                    break;
                };
                if let Some(dead) = read.dead_letters
                    && dead.num_rows() > 0
                {
                    reading.metrics.add_dead_letters(dead.num_rows());
                    for &w in reading.dead_letter_writers {
                        self.send(w, dead.clone()).await?;
                    }
                }
                let rows = read.data.num_rows();
                match watermarks.as_deref_mut() {
                    Some(w) => {
                        let steps = w
                            .on_batch(&split.id, read.data, now_ms())
                            .map_err(|e| reading.fail(e))?;
                        reading.metrics.add_out(rows);
                        for step in steps {
                            let item = match step {
                                SourceStep::Rows(batch) => Item::Batch(0, batch),
                                SourceStep::Watermark(m) => {
                                    reading.published(m);
                                    Item::Watermark(m)
                                }
                            };
                            self.drive(0, item).await?;
                        }
                        self.commit_state().await?;
                    }
                    None if rows > 0 => {
                        reading.metrics.add_out(rows);
                        self.drive(0, Item::Batch(0, read.data)).await?;
                        self.commit_state().await?;
                    }
                    None => {}
                }
                progress.splits[index].split.cursor = read.cursor;
                self.inject_if_triggered(progress, watermarks.as_deref())
                    .await?;
            }
            if let Some(m) = watermarks
                .as_deref_mut()
                .and_then(|w| w.finish_split(&split.id))
            {
                reading.published(m);
                self.drive(0, Item::Watermark(m)).await?;
                self.commit_state().await?;
            }
            progress.splits[index].finished = true;
            self.job_metrics.split_done(split.size_bytes.unwrap_or(0));
            // After the last split the end-of-input watermark goes first (the caller then
            // injects pending barriers): a cut in which every split is finished always follows
            // it, so downstream windows have fired before such a barrier.
            if index + 1 < progress.splits.len() {
                self.inject_if_triggered(progress, watermarks.as_deref())
                    .await?;
            }
        }
        reading.release();
        Ok(())
    }

    /// Watermark alignment: while this subtask's watermark is more than the allowed drift ahead
    /// of the source's slowest running subtask, waits for the others to publish, still injecting
    /// the barriers of checkpoints triggered meanwhile (nothing is being read: a safe point).
    async fn await_alignment(
        &mut self,
        reading: &SourceReading<'_>,
        progress: &SourceProgress,
        watermarks: Option<&SourceWatermarks>,
    ) -> Result<()> {
        let Some(alignment) = reading.alignment else {
            return Ok(());
        };
        let subtask = reading.ctx.subtask.0;
        if !alignment.must_wait(subtask) {
            return Ok(());
        }
        reading.metrics.add_alignment_pause();
        let mut changes = alignment.subscribe();
        let mut trigger = self.checkpointing.as_ref().map(|c| c.trigger.clone());
        loop {
            changes.borrow_and_update();
            if !alignment.must_wait(subtask) {
                return Ok(());
            }
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                }
                changed = wait_for_trigger(trigger.as_mut()), if trigger.is_some() => {
                    if changed.is_err() {
                        trigger = None;
                        continue;
                    }
                    self.inject_if_triggered(progress, watermarks).await?;
                }
            }
        }
    }

    /// The reader's next batch. Without idle timeout and checkpoints, just the read. Otherwise
    /// the read is raced against the time the split may stay silent (when it elapses, silent
    /// splits become idle, which may advance the source watermark, and when every open split
    /// is idle the downstream is told so) and against checkpoint triggers (the barrier is
    /// injected at once: nothing of the pending read was emitted, so the cut is exact). The
    /// pending read is kept, never dropped, so readers need not be cancel safe.
    ///
    /// Idleness is measured in processing time, so where it is declared is not deterministic.
    async fn next_read(
        &mut self,
        reading: &SourceReading<'_>,
        reader: &mut Box<dyn SplitReader>,
        mut watermarks: Option<&mut SourceWatermarks>,
        now_ms: &impl Fn() -> u64,
        progress: &SourceProgress,
    ) -> std::result::Result<Option<SplitBatch>, ReadError> {
        let idle_ms = watermarks
            .as_deref()
            .and_then(SourceWatermarks::idle_timeout_ms);
        let mut trigger = self.checkpointing.as_ref().map(|c| c.trigger.clone());
        if idle_ms.is_none() && trigger.is_none() {
            return reader.next_batch().await.map_err(ReadError::Source);
        }
        // One millisecond past the timeout: a split is idle when silent for *longer* than it.
        let patience = Duration::from_millis(idle_ms.unwrap_or(0).saturating_add(1));
        let mut deadline = tokio::time::Instant::now() + patience;
        let mut pending = reader.next_batch();
        loop {
            tokio::select! {
                read = &mut pending => return read.map_err(ReadError::Source),
                () = tokio::time::sleep_until(deadline), if idle_ms.is_some() => {
                    deadline += patience;
                    let Some(w) = watermarks.as_deref_mut() else { continue };
                    let (advanced, idle) = w.on_silence(now_ms());
                    if let Some(m) = advanced {
                        reading.published(m);
                        self.drive(0, Item::Watermark(m))
                            .await
                            .map_err(ReadError::Task)?;
                        self.commit_state().await.map_err(ReadError::Task)?;
                    }
                    if idle {
                        reading.release();
                        self.send_idle().await.map_err(ReadError::Task)?;
                    }
                }
                changed = wait_for_trigger(trigger.as_mut()), if trigger.is_some() => {
                    if changed.is_err() {
                        // The coordinator is gone: the job is ending; keep reading.
                        trigger = None;
                        continue;
                    }
                    self.inject_if_triggered(progress, watermarks.as_deref())
                        .await
                        .map_err(ReadError::Task)?;
                }
            }
        }
    }

    /// After the end of the input: takes part in every epoch still triggered, injecting each
    /// barrier itself, until the final one. `source` is the source subtask's progress (its cut);
    /// `inputs` the ended input channels of a task whose upstream never ran.
    async fn await_final_epoch(
        &mut self,
        source: Option<(&SourceProgress, Option<&SourceWatermarks>)>,
        inputs: &[InputWatermark],
    ) -> Result<()> {
        let Some(cp) = self.checkpointing.clone() else {
            return Ok(());
        };
        cp.report(TaskReport::SourceExhausted(self.task_id.clone()));
        let mut trigger = cp.trigger.clone();
        loop {
            if let Some(t) = self.take_trigger() {
                let cut = match source {
                    Some((progress, watermarks)) => SourceCut::seal(progress, watermarks)?,
                    None => SourceCut::default(),
                };
                self.inject(t, cut, inputs.to_vec()).await?;
                if t.is_final {
                    return Ok(());
                }
            }
            if trigger.changed().await.is_err() {
                return Ok(());
            }
        }
    }

    /// Pushes an item through the chain from link `start`, in emission order.
    async fn drive(&mut self, start: usize, item: Item) -> Result<()> {
        let mut queue = VecDeque::from([(start, item)]);
        while let Some((pos, item)) = queue.pop_front() {
            if pos == self.links.len() {
                self.deliver_tail(item).await?;
                continue;
            }
            let mut out = Output::new();
            let link = &mut self.links[pos];
            let result = match item {
                Item::Batch(input, batch) => {
                    link.metrics.add_in(batch.num_rows());
                    link.op.process_batch(input, batch, &mut out)
                }
                Item::Watermark(w) => link.op.process_watermark(w, &mut out),
            };
            result.map_err(|source| Error::Task {
                task: link.label.clone(),
                source,
            })?;
            self.route(pos, &mut out, &mut queue).await?;
        }
        Ok(())
    }

    /// Routes what link `pos` emitted: main output to the next link, side outputs to writers.
    async fn route(
        &mut self,
        pos: usize,
        out: &mut Output,
        queue: &mut VecDeque<(usize, Item)>,
    ) -> Result<()> {
        let emitted: Vec<Emitted> = out.drain().collect();
        for e in emitted {
            match e {
                Emitted::Data { port, batch }
                    if !self.links[pos]
                        .port_schemas
                        .get_mut(port)
                        .is_none_or(|check| check.accepts(&batch.schema())) =>
                {
                    let label = &self.links[pos].label;
                    let output = match port {
                        0 => "main output".to_owned(),
                        _ => format!("side output {}", port - 1),
                    };
                    return Err(self.internal(format!(
                        "{label} emitted a batch whose schema differs from the schema it declared \
                         for its {output}: {}",
                        batch.schema()
                    )));
                }
                Emitted::Data { port: 0, batch } => {
                    let link = &self.links[pos];
                    link.metrics.add_out(batch.num_rows());
                    queue.push_back((pos + 1, Item::Batch(0, batch)));
                }
                Emitted::Data { port, batch } => {
                    let writers = self.links[pos]
                        .side_writers
                        .get(port - 1)
                        .cloned()
                        .ok_or_else(|| {
                            self.internal(format!(
                                "{} emitted on side output {} which it did not declare",
                                self.links[pos].label,
                                port - 1
                            ))
                        })?;
                    for w in writers {
                        self.send(w, batch.clone()).await?;
                    }
                }
                Emitted::Watermark(w) => {
                    let side: Vec<usize> = self.links[pos]
                        .side_writers
                        .iter()
                        .flatten()
                        .copied()
                        .collect();
                    for i in side {
                        self.send_control(i, StreamMessage::Watermark(w)).await?;
                    }
                    queue.push_back((pos + 1, Item::Watermark(w)));
                }
            }
        }
        Ok(())
    }

    /// Delivers the chain's main output to the sink or the tail writers.
    async fn deliver_tail(&mut self, item: Item) -> Result<()> {
        match item {
            Item::Batch(_, batch) => {
                if let Some(sink) = self.sink.as_mut() {
                    if batch.num_rows() > 0 {
                        self.job_metrics.note_output();
                    }
                    sink.metrics.add_in(batch.num_rows());
                    sink.writer
                        .write_batch(batch)
                        .await
                        .map_err(|source| Error::Task {
                            task: sink.label.clone(),
                            source,
                        })?;
                } else {
                    for w in self.tail_writers.clone() {
                        self.send(w, batch.clone()).await?;
                    }
                }
            }
            Item::Watermark(w) => {
                for i in self.tail_writers.clone() {
                    self.send_control(i, StreamMessage::Watermark(w)).await?;
                }
            }
        }
        Ok(())
    }

    /// Tells every channel that carries the chain's watermarks (the tail writers and the links'
    /// side outputs) that this task has no data for now.
    async fn send_idle(&mut self) -> Result<()> {
        let mut writers = self.tail_writers.clone();
        writers.extend(
            self.links
                .iter()
                .flat_map(|l| l.side_writers.iter().flatten()),
        );
        for w in writers {
            self.send_control(w, StreamMessage::Idle).await?;
        }
        Ok(())
    }

    /// Calls `hook` on every link in chain order; what a link emits flows down the chain before
    /// the next link's hook runs, so each hook sees everything its upstream flushed.
    pub(crate) async fn call_every_link(
        &mut self,
        hook: impl Fn(&mut dyn Operator, &mut Output) -> weir_api::Result<()>,
    ) -> Result<()> {
        for pos in 0..self.links.len() {
            let mut out = Output::new();
            let link = &mut self.links[pos];
            hook(link.op.as_mut(), &mut out).map_err(|source| Error::Task {
                task: link.label.clone(),
                source,
            })?;
            let mut queue = VecDeque::new();
            self.route(pos, &mut out, &mut queue).await?;
            for (p, item) in queue {
                self.drive(p, item).await?;
            }
        }
        Ok(())
    }

    /// End of input: flush every link in chain order (unless the final barrier did), publish the
    /// sink (in epoch mode, everything was committed through epochs), close every channel.
    async fn finish(&mut self) -> Result<()> {
        if !self.flushed {
            self.call_every_link(|op, out| op.on_end_of_input(out))
                .await?;
        }
        self.commit_state().await?;
        if self.state.kept() {
            self.sync_state().await?;
        }
        if let Some(sink) = self.sink.as_mut() {
            sink.writer.finish().await.map_err(|source| Error::Task {
                task: sink.label.clone(),
                source,
            })?;
        }
        for i in 0..self.writers.len() {
            self.send_control(i, StreamMessage::EndOfInput).await?;
        }
        Ok(())
    }

    async fn send(&mut self, writer: usize, batch: RecordBatch) -> Result<()> {
        let result = self.writers[writer].send_batch(batch).await;
        self.map_send(result)
    }

    pub(crate) async fn send_control(
        &mut self,
        writer: usize,
        message: StreamMessage,
    ) -> Result<()> {
        let result = self.writers[writer].send_to_all(message).await;
        self.map_send(result)
    }

    fn map_send(&self, result: std::result::Result<(), SendError>) -> Result<()> {
        result.map_err(|e| match e {
            SendError::Disconnected(_) => Error::ChannelClosed {
                task: self.label.clone(),
            },
            SendError::Partition(source) => Error::Task {
                task: self.label.clone(),
                source,
            },
        })
    }
}

/// Waits for the next trigger; `None` never resolves (the select arm is disabled then).
async fn wait_for_trigger(
    trigger: Option<&mut tokio::sync::watch::Receiver<Option<Trigger>>>,
) -> std::result::Result<(), tokio::sync::watch::error::RecvError> {
    match trigger {
        Some(t) => t.changed().await,
        None => std::future::pending().await,
    }
}

/// A source subtask's read position in each of its splits: the cut it seals with a barrier.
#[derive(Debug)]
pub(crate) struct SourceProgress {
    pub(crate) operator: OperatorId,
    pub(crate) subtask: weir_api::SubtaskIndex,
    pub(crate) splits: Vec<SplitProgress>,
}

/// One split's read position.
#[derive(Debug)]
pub(crate) struct SplitProgress {
    /// The split, its cursor at the next record to read.
    pub(crate) split: SourceSplit,
    /// Read to its end.
    pub(crate) finished: bool,
}

impl SourceProgress {
    fn new(ctx: &TaskContext, splits: &[(SourceSplit, SplitResume)]) -> Self {
        SourceProgress {
            operator: ctx.operator_id.clone(),
            subtask: ctx.subtask,
            splits: splits
                .iter()
                .map(|(split, _)| SplitProgress {
                    split: split.clone(),
                    finished: false,
                })
                .collect(),
        }
    }
}

/// What a source task reads with, borrowed from its [`Head::Source`].
struct SourceReading<'a> {
    source: &'a Arc<dyn PreparedSource>,
    ctx: &'a TaskContext,
    metrics: &'a Arc<OperatorMetrics>,
    dead_letter_writers: &'a [usize],
    alignment: Option<&'a SourceAlignment>,
}

impl SourceReading<'_> {
    /// Tells the source's other subtasks (watermark alignment) that this one emitted `m`.
    fn published(&self, m: Watermark) {
        if let Some(a) = self.alignment {
            a.publish(self.ctx.subtask.0, m.0.0);
        }
    }

    /// This subtask holds nobody back any more (idle, or done reading).
    fn release(&self) {
        if let Some(a) = self.alignment {
            a.release(self.ctx.subtask.0);
        }
    }
}

impl SourceReading<'_> {
    /// A source error, attributed to the source operator.
    fn fail(&self, source: weir_api::Error) -> Error {
        Error::Task {
            task: self.ctx.label(),
            source,
        }
    }
}

/// Why the next read failed: the source itself, or the chain while handling idleness.
enum ReadError {
    Source(weir_api::Error),
    Task(Error),
}

impl ReadError {
    fn into_error(self, reading: &SourceReading<'_>) -> Error {
        match self {
            ReadError::Source(e) => reading.fail(e),
            ReadError::Task(e) => e,
        }
    }
}
