//! The output side of a task: one writer per outgoing edge, distributing batches over the edge's
//! channels by the edge's policy. Sends wait while a channel is full (backpressure).

use crate::metrics::SubtaskMetrics;
use crate::partition::{HashPartitioner, RoundRobin};
use arrow::record_batch::RecordBatch;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use weir_api::{StreamMessage, WatermarkMarks};

/// How a writer picks channels.
#[derive(Debug)]
pub(crate) enum Distribution {
    /// Exactly one channel (FORWARD, UNION, SINGLETON).
    Single,
    /// Rows by key to the shard owner; senders indexed by downstream subtask.
    Hash(HashPartitioner),
    /// Whole batches round-robin.
    RoundRobin(RoundRobin),
    /// Every batch to every channel.
    Broadcast,
}

/// The sending half of one edge for one upstream subtask.
#[derive(Debug)]
pub(crate) struct EdgeWriter {
    pub(crate) distribution: Distribution,
    /// Senders; for HASH, index = downstream subtask.
    pub(crate) senders: Vec<mpsc::Sender<StreamMessage>>,
    /// Where the task counts the time it is blocked on a full channel.
    pub(crate) metrics: SubtaskMetrics,
}

/// The receiving task is gone.
#[derive(Debug)]
pub(crate) struct Disconnected;

impl EdgeWriter {
    /// Sends a batch according to the distribution.
    pub(crate) async fn send_batch(&mut self, batch: RecordBatch) -> Result<(), SendError> {
        match &mut self.distribution {
            Distribution::Single => {
                send(&self.metrics, &self.senders[0], StreamMessage::Data(batch)).await?
            }
            Distribution::RoundRobin(rr) => {
                let i = rr.next_output();
                send(&self.metrics, &self.senders[i], StreamMessage::Data(batch)).await?;
            }
            Distribution::Broadcast => {
                for s in &self.senders {
                    send(&self.metrics, s, StreamMessage::Data(batch.clone())).await?;
                }
            }
            Distribution::Hash(p) => {
                let parts = p.partition(&batch).map_err(SendError::Partition)?;
                for (i, part) in parts.into_iter().enumerate() {
                    if let Some(part) = part {
                        send(&self.metrics, &self.senders[i], StreamMessage::Data(part)).await?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Sends a batch inside which the watermark (or the split watermark) advances at `marks`:
    /// every channel gets the rows meant for it with the marks remapped to them, and a channel
    /// that gets no rows gets the last watermark and the last split watermark alone.
    pub(crate) async fn send_marked(
        &mut self,
        batch: RecordBatch,
        marks: &WatermarkMarks,
    ) -> Result<(), SendError> {
        if marks.is_empty() {
            return self.send_batch(batch).await;
        }
        let marked = |batch, marks: WatermarkMarks| {
            if marks.is_empty() {
                StreamMessage::Data(batch)
            } else {
                StreamMessage::MarkedData(batch, marks)
            }
        };
        // What a channel without rows is told: where the watermarks stand after the batch.
        let without_rows: Vec<StreamMessage> = marks
            .last()
            .map(StreamMessage::Watermark)
            .into_iter()
            .chain(marks.last_split().map(StreamMessage::SplitWatermark))
            .collect();
        match &mut self.distribution {
            Distribution::Single => {
                send(
                    &self.metrics,
                    &self.senders[0],
                    marked(batch, marks.clone()),
                )
                .await?
            }
            Distribution::RoundRobin(rr) => {
                let chosen = rr.next_output();
                for (i, s) in self.senders.iter().enumerate() {
                    if i == chosen {
                        send(&self.metrics, s, marked(batch.clone(), marks.clone())).await?;
                    } else {
                        for message in &without_rows {
                            send(&self.metrics, s, message.clone()).await?;
                        }
                    }
                }
            }
            Distribution::Broadcast => {
                for s in &self.senders {
                    send(&self.metrics, s, marked(batch.clone(), marks.clone())).await?;
                }
            }
            Distribution::Hash(p) => {
                let parts = p
                    .partition_marked(&batch, marks)
                    .map_err(SendError::Partition)?;
                for (i, (part, marks)) in parts.into_iter().enumerate() {
                    match part {
                        Some(part) => {
                            send(&self.metrics, &self.senders[i], marked(part, marks)).await?;
                        }
                        None => {
                            for message in &without_rows {
                                send(&self.metrics, &self.senders[i], message.clone()).await?;
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Sends a watermark, barrier or end-of-input to every channel.
    pub(crate) async fn send_to_all(&self, message: StreamMessage) -> Result<(), SendError> {
        for s in &self.senders {
            send(&self.metrics, s, message.clone()).await?;
        }
        Ok(())
    }
}

/// Why a send failed.
#[derive(Debug)]
pub(crate) enum SendError {
    /// The receiving task is gone.
    Disconnected(Disconnected),
    /// Partitioning the batch failed.
    Partition(weir_api::Error),
}

/// Sends `message`; only a send that finds the channel full reads the clock, and the time it
/// then waits is counted as backpressure.
async fn send(
    metrics: &SubtaskMetrics,
    sender: &mpsc::Sender<StreamMessage>,
    message: StreamMessage,
) -> Result<(), SendError> {
    match sender.try_send(message) {
        Ok(()) => Ok(()),
        Err(TrySendError::Closed(_)) => Err(SendError::Disconnected(Disconnected)),
        Err(TrySendError::Full(message)) => {
            let blocked = std::time::Instant::now();
            let sent = sender.send(message).await;
            metrics.add_backpressured(blocked.elapsed());
            sent.map_err(|_| SendError::Disconnected(Disconnected))
        }
    }
}
