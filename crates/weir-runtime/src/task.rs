//! One subtask of one vertex: a chain of operators driven by a source reader or an input gate,
//! ending in a sink or in edge writers.

use crate::edge_writer::{EdgeWriter, SendError};
use crate::error::{Error, Result};
use crate::input_gate::{GateError, GateEvent, InputGate};
use crate::metrics::{JobMetrics, OperatorMetrics};
use crate::task_state::TaskState;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use std::collections::VecDeque;
use std::sync::Arc;
use weir_api::{
    Barrier, Emitted, Operator, Output, PreparedSource, SinkWriter, SourceSplit, StreamMessage,
    TaskContext, Watermark,
};

/// What drives the chain.
pub(crate) enum Head {
    /// A source reading its assigned splits.
    Source {
        source: Arc<dyn PreparedSource>,
        ctx: TaskContext,
        splits: Vec<SourceSplit>,
        metrics: Arc<OperatorMetrics>,
        /// Writers of the source's `dead_letter` output.
        dead_letter_writers: Vec<usize>,
    },
    /// Input channels from upstream tasks.
    Gate(InputGate),
}

/// An operator in the chain.
pub(crate) struct Link {
    pub(crate) op: Box<dyn Operator>,
    pub(crate) label: String,
    pub(crate) metrics: Arc<OperatorMetrics>,
    pub(crate) output_schema: SchemaRef,
    /// Writers per side output, in side-output order.
    pub(crate) side_writers: Vec<Vec<usize>>,
}

/// The sink at the end of the chain.
pub(crate) struct SinkLink {
    pub(crate) writer: Box<dyn SinkWriter>,
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
            } => {
                self.read_source(&source, &ctx, splits, &metrics, &dead_letter_writers)
                    .await?;
                for &w in &dead_letter_writers {
                    self.send_control(w, StreamMessage::Watermark(Watermark::END))
                        .await?;
                }
                self.drive(0, Item::Watermark(Watermark::END)).await?;
            }
            Head::Gate(mut gate) => loop {
                match gate.next().await {
                    Ok(GateEvent::Data { input, batch }) => {
                        self.drive(0, Item::Batch(input, batch)).await?;
                        self.commit_state()?;
                    }
                    Ok(GateEvent::Watermark(w)) => {
                        self.drive(0, Item::Watermark(w)).await?;
                        self.commit_state()?;
                    }
                    Ok(GateEvent::Barrier(b)) => {
                        self.on_barrier(b).await?;
                        self.commit_state()?;
                    }
                    Ok(GateEvent::End) => break,
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
        self.finish().await
    }

    /// Commits the state journal: the input just handled had its output handed on (to the sink
    /// or into the outgoing channels), so its mutations are acknowledged.
    fn commit_state(&self) -> Result<()> {
        self.state.commit().map_err(|source| Error::Task {
            task: self.label.clone(),
            source,
        })
    }

    fn internal(&self, message: String) -> Error {
        Error::Task {
            task: self.label.clone(),
            source: weir_api::Error::Internal(message),
        }
    }

    async fn read_source(
        &mut self,
        source: &Arc<dyn PreparedSource>,
        ctx: &TaskContext,
        splits: Vec<SourceSplit>,
        metrics: &Arc<OperatorMetrics>,
        dead_letter_writers: &[usize],
    ) -> Result<()> {
        let label = ctx.label();
        let fail = |source: weir_api::Error| Error::Task {
            task: label.clone(),
            source,
        };
        for split in splits {
            let mut reader = source.open_split(&split, ctx).await.map_err(fail)?;
            while let Some(read) = reader.next_batch().await.map_err(fail)? {
                if let Some(dead) = read.dead_letters
                    && dead.num_rows() > 0
                {
                    metrics.add_dead_letters(dead.num_rows());
                    for &w in dead_letter_writers {
                        self.send(w, dead.clone()).await?;
                    }
                }
                if read.data.num_rows() > 0 {
                    metrics.add_out(read.data.num_rows());
                    self.drive(0, Item::Batch(0, read.data)).await?;
                    self.commit_state()?;
                }
            }
            self.job_metrics.split_done(split.size_bytes.unwrap_or(0));
        }
        Ok(())
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
                Emitted::Data { port: 0, batch } => {
                    let link = &self.links[pos];
                    if cfg!(debug_assertions)
                        && batch.schema().fields() != link.output_schema.fields()
                    {
                        return Err(self.internal(format!(
                            "{} emitted a batch whose schema differs from its declared output schema",
                            link.label
                        )));
                    }
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

    async fn on_barrier(&mut self, barrier: Barrier) -> Result<()> {
        self.call_every_link(|op, out| op.on_barrier(barrier, out))
            .await?;
        for i in 0..self.writers.len() {
            self.send_control(i, StreamMessage::Barrier(barrier))
                .await?;
        }
        Ok(())
    }

    /// Calls `hook` on every link in chain order; what a link emits flows down the chain before
    /// the next link's hook runs, so each hook sees everything its upstream flushed.
    async fn call_every_link(
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

    /// End of input: flush every link in chain order, publish the sink, close every channel.
    async fn finish(&mut self) -> Result<()> {
        self.call_every_link(|op, out| op.on_end_of_input(out))
            .await?;
        self.commit_state()?;
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

    async fn send_control(&mut self, writer: usize, message: StreamMessage) -> Result<()> {
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
