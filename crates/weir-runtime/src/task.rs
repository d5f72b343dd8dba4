//! One subtask of one vertex: a chain of operators driven by a source reader or an input gate,
//! ending in a sink or in edge writers. How a source subtask reads its splits is in
//! [`source_reading`]; its part of an epoch (barrier injection, snapshots) in [`checkpointing`].

mod checkpointing;
mod read_ahead;
mod source_reading;

pub(crate) use source_reading::{SourceHead, SourceProgress};

use crate::checkpoint::{TaskCheckpointing, TaskReport};
use crate::edge_writer::{EdgeWriter, SendError};
use crate::error::{Error, Result};
use crate::event_time::SourceWatermarks;
use crate::input_gate::{GateError, GateEvent, InputGate};
use crate::metrics::{JobMetrics, SubtaskMetrics};
use crate::schema_check::SchemaCheck;
use crate::task_state::TaskState;
use arrow::record_batch::RecordBatch;
use checkpointing::SourceCut;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;
use weir_api::{
    Emitted, Epoch, Operator, OperatorId, Output, SinkWriter, StreamMessage, TaskId, Watermark,
    WatermarkMarks,
};
use weir_checkpoint::{InputWatermark, TaskSnapshot};

/// What drives the chain.
pub(crate) enum Head {
    /// A source reading its assigned splits.
    Source(Box<SourceHead>),
    /// Input channels from upstream tasks.
    Gate(InputGate),
}

/// An operator in the chain.
pub(crate) struct Link {
    pub(crate) op: Box<dyn Operator>,
    pub(crate) operator: OperatorId,
    pub(crate) label: String,
    pub(crate) metrics: SubtaskMetrics,
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
    pub(crate) metrics: SubtaskMetrics,
}

/// What the attempt builds a subtask from (`attempt/build.rs`); [`ChainTask::new`] adds the
/// task's own running state.
pub(crate) struct ChainParts {
    /// How the task is named in errors and logs: `vertex[subtask/parallelism]`.
    pub(crate) label: String,
    pub(crate) head: Head,
    pub(crate) links: Vec<Link>,
    pub(crate) sink: Option<SinkLink>,
    /// Writers fed by the main output of the chain's last element (empty when it is a sink).
    pub(crate) tail_writers: Vec<usize>,
    pub(crate) writers: Vec<EdgeWriter>,
    pub(crate) job_metrics: Arc<JobMetrics>,
    /// The task's times and input watermark (counted on the chain's first operator).
    pub(crate) head_metrics: SubtaskMetrics,
    /// The chain's keyed state; its journal is committed after each input is fully handled.
    pub(crate) state: Arc<TaskState>,
    /// The task's stable identity.
    pub(crate) task_id: TaskId,
    /// Every operator of the chain, in chain order.
    pub(crate) operators: Vec<OperatorId>,
    /// Set when the job checkpoints.
    pub(crate) checkpointing: Option<TaskCheckpointing>,
}

/// A running subtask.
pub(crate) struct ChainTask {
    label: String,
    head: Head,
    links: Vec<Link>,
    sink: Option<SinkLink>,
    /// Writers fed by the main output of the chain's last element (empty when it is a sink).
    tail_writers: Vec<usize>,
    writers: Vec<EdgeWriter>,
    job_metrics: Arc<JobMetrics>,
    /// The task's times and input watermark (counted on the chain's first operator).
    head_metrics: SubtaskMetrics,
    /// The chain's keyed state; its journal is committed after each input is fully handled.
    state: Arc<TaskState>,
    /// The task's stable identity.
    task_id: TaskId,
    /// Every operator of the chain, in chain order.
    operators: Vec<OperatorId>,
    /// Set when the job checkpoints.
    checkpointing: Option<TaskCheckpointing>,
    /// The last epoch this source subtask injected.
    last_injected: Option<Epoch>,
    /// The links were flushed (`on_end_of_input`) at the final barrier.
    flushed: bool,
    /// Background writes of this task's snapshots; each ends with its acknowledgement.
    snapshot_writes: Vec<tokio::task::JoinHandle<()>>,
}

enum Item {
    Batch(usize, RecordBatch),
    /// A batch inside which the watermark advances.
    Marked(usize, RecordBatch, WatermarkMarks),
    Watermark(Watermark),
    /// The rows of the batches that follow on the input were read behind this split watermark.
    SplitWatermark(usize, Watermark),
    /// The watermark of one head input alone advanced (heads that read input watermarks).
    InputWatermark(usize, Watermark),
}

/// A batch of head input `input` inside which its own watermark advances at `input_marks` and
/// the gate's at `marks`, as the items that mean the same one at a time: runs of rows, then at
/// each mark the input's advance before the gate's, and the split watermark after both.
fn input_pieces(
    input: usize,
    batch: &RecordBatch,
    marks: &WatermarkMarks,
    input_marks: &WatermarkMarks,
) -> Vec<Item> {
    let mut cuts: Vec<(usize, u8, Watermark)> = input_marks
        .iter()
        .map(|(row, w)| (row, 0, w))
        .chain(marks.iter().map(|(row, w)| (row, 1, w)))
        .chain(marks.splits().map(|(row, w)| (row, 2, w)))
        .collect();
    cuts.sort_by_key(|(row, order, _)| (*row, *order));
    let mut items = Vec::with_capacity(2 * cuts.len() + 1);
    let mut start = 0;
    for (row, order, w) in cuts {
        let row = row.min(batch.num_rows());
        if row > start {
            items.push(Item::Batch(input, batch.slice(start, row - start)));
            start = row;
        }
        items.push(match order {
            0 => Item::InputWatermark(input, w),
            1 => Item::Watermark(w),
            _ => Item::SplitWatermark(input, w),
        });
    }
    if start < batch.num_rows() {
        items.push(Item::Batch(
            input,
            batch.slice(start, batch.num_rows() - start),
        ));
    }
    items
}

impl ChainTask {
    /// A subtask ready to run, built from its parts: nothing injected, flushed or written yet.
    pub(crate) fn new(parts: ChainParts) -> ChainTask {
        let ChainParts {
            label,
            head,
            links,
            sink,
            tail_writers,
            writers,
            job_metrics,
            head_metrics,
            state,
            task_id,
            operators,
            checkpointing,
        } = parts;
        ChainTask {
            label,
            head,
            links,
            sink,
            tail_writers,
            writers,
            job_metrics,
            head_metrics,
            state,
            task_id,
            operators,
            checkpointing,
            last_injected: None,
            flushed: false,
            snapshot_writes: Vec::new(),
        }
    }

    /// How the task is named in errors and logs.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

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
            Head::Source(head) => self.run_source(*head).await?,
            Head::Gate(mut gate) => loop {
                let waiting = Instant::now();
                let event = gate.next().await;
                let handling = Instant::now();
                self.head_metrics.add_idle(handling - waiting);
                match event {
                    Ok(GateEvent::Data {
                        input,
                        batch,
                        split_watermark,
                        marks,
                        input_marks,
                    }) => {
                        let blocked = self.head_metrics.backpressured_ns();
                        if let Some(w) = split_watermark {
                            self.drive(0, Item::SplitWatermark(input, w)).await?;
                        }
                        if let Some(last) = marks.last()
                            && last.0 != weir_api::EventTimeMs::MAX
                        {
                            self.head_metrics.set_watermark(last.0.0);
                        }
                        if input_marks.is_empty() {
                            if marks.is_empty() {
                                self.drive(0, Item::Batch(input, batch)).await?;
                            } else {
                                self.drive(0, Item::Marked(input, batch, marks)).await?;
                            }
                        } else {
                            for item in input_pieces(input, &batch, &marks, &input_marks) {
                                self.drive(0, item).await?;
                            }
                        }
                        self.commit_state().await?;
                        self.head_metrics.add_handling(handling.elapsed(), blocked);
                    }
                    Ok(GateEvent::InputWatermark { input, watermark }) => {
                        let blocked = self.head_metrics.backpressured_ns();
                        self.drive(0, Item::InputWatermark(input, watermark))
                            .await?;
                        self.commit_state().await?;
                        self.head_metrics.add_handling(handling.elapsed(), blocked);
                    }
                    Ok(GateEvent::Watermark(w)) => {
                        if w.0 != weir_api::EventTimeMs::MAX {
                            self.head_metrics.set_watermark(w.0.0);
                        }
                        let blocked = self.head_metrics.backpressured_ns();
                        self.drive(0, Item::Watermark(w)).await?;
                        self.commit_state().await?;
                        self.head_metrics.add_handling(handling.elapsed(), blocked);
                    }
                    Ok(GateEvent::Barrier(b)) => {
                        let inputs = gate.channel_states();
                        let alignment = gate.last_alignment();
                        self.checkpoint(b, SourceCut::default(), inputs, alignment)
                            .await?;
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
                    link.metrics.add_in(&batch);
                    link.op.process_batch(input, batch, &mut out)
                }
                Item::Marked(input, batch, marks) => {
                    link.metrics.add_in(&batch);
                    link.op.process_marked_batch(input, batch, &marks, &mut out)
                }
                Item::Watermark(w) => link.op.process_watermark(w, &mut out),
                Item::SplitWatermark(input, w) => {
                    link.op.process_split_watermark(input, w, &mut out)
                }
                Item::InputWatermark(input, w) => {
                    link.op.process_input_watermark(input, w, &mut out)
                }
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
                Emitted::MarkedData { batch, .. }
                    if !self.links[pos]
                        .port_schemas
                        .get_mut(0)
                        .is_none_or(|check| check.accepts(&batch.schema())) =>
                {
                    let label = &self.links[pos].label;
                    return Err(self.internal(format!(
                        "{label} emitted a batch whose schema differs from the schema it declared \
                         for its main output: {}",
                        batch.schema()
                    )));
                }
                Emitted::MarkedData { batch, marks } => {
                    let link = &self.links[pos];
                    link.metrics.add_out(&batch);
                    if let Some(w) = marks.last() {
                        self.send_to_side_outputs(pos, StreamMessage::Watermark(w))
                            .await?;
                    }
                    if let Some(w) = marks.last_split() {
                        self.send_to_side_outputs(pos, StreamMessage::SplitWatermark(w))
                            .await?;
                    }
                    queue.push_back((pos + 1, Item::Marked(0, batch, marks)));
                }
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
                    link.metrics.add_out(&batch);
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
                    self.send_to_side_outputs(pos, StreamMessage::Watermark(w))
                        .await?;
                    queue.push_back((pos + 1, Item::Watermark(w)));
                }
                Emitted::SplitWatermark(w) => {
                    self.send_to_side_outputs(pos, StreamMessage::SplitWatermark(w))
                        .await?;
                    queue.push_back((pos + 1, Item::SplitWatermark(0, w)));
                }
            }
        }
        Ok(())
    }

    /// Sends a control message to every side output of link `pos`.
    async fn send_to_side_outputs(&mut self, pos: usize, message: StreamMessage) -> Result<()> {
        let side: Vec<usize> = self.links[pos]
            .side_writers
            .iter()
            .flatten()
            .copied()
            .collect();
        for i in side {
            self.send_control(i, message.clone()).await?;
        }
        Ok(())
    }

    /// Delivers the chain's main output to the sink or the tail writers.
    async fn deliver_tail(&mut self, item: Item) -> Result<()> {
        // A sink judges no lateness: it takes the rows, then hears where the watermark went.
        let (item, watermark_after) = match item {
            Item::Marked(input, batch, marks) if self.sink.is_some() => {
                (Item::Batch(input, batch), marks.last())
            }
            item => (item, None),
        };
        match item {
            Item::Marked(_, batch, marks) => {
                for w in self.tail_writers.clone() {
                    let result = self.writers[w].send_marked(batch.clone(), &marks).await;
                    self.map_send(result)?;
                }
            }
            Item::Batch(_, batch) => {
                if let Some(sink) = self.sink.as_mut() {
                    if batch.num_rows() > 0 {
                        self.job_metrics.note_output();
                    }
                    sink.metrics.add_in(&batch);
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
                if let Some(sink) = self.sink.as_mut() {
                    sink.writer
                        .on_watermark(w)
                        .await
                        .map_err(|source| Error::Task {
                            task: sink.label.clone(),
                            source,
                        })?;
                }
                for i in self.tail_writers.clone() {
                    self.send_control(i, StreamMessage::Watermark(w)).await?;
                }
            }
            // A sink judges no lateness; channels carry it to the operators that do.
            Item::SplitWatermark(_, w) => {
                for i in self.tail_writers.clone() {
                    self.send_control(i, StreamMessage::SplitWatermark(w))
                        .await?;
                }
            }
            // Only a head operator reads its inputs' own watermarks; a chain without one has
            // nothing to tell.
            Item::InputWatermark(..) => {}
        }
        if let (Some(w), Some(sink)) = (watermark_after, self.sink.as_mut()) {
            sink.writer
                .on_watermark(w)
                .await
                .map_err(|source| Error::Task {
                    task: sink.label.clone(),
                    source,
                })?;
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
