//! The output side of a task: one writer per outgoing edge, distributing batches over the edge's
//! channels by the edge's policy. Sends wait while a channel is full (backpressure).

use crate::partition::{HashPartitioner, RoundRobin};
use arrow::record_batch::RecordBatch;
use tokio::sync::mpsc;
use weir_api::StreamMessage;

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
}

/// The receiving task is gone.
#[derive(Debug)]
pub(crate) struct Disconnected;

impl EdgeWriter {
    /// Sends a batch according to the distribution.
    pub(crate) async fn send_batch(&mut self, batch: RecordBatch) -> Result<(), SendError> {
        match &mut self.distribution {
            Distribution::Single => send(&self.senders[0], StreamMessage::Data(batch)).await?,
            Distribution::RoundRobin(rr) => {
                let i = rr.next_output();
                send(&self.senders[i], StreamMessage::Data(batch)).await?;
            }
            Distribution::Broadcast => {
                for s in &self.senders {
                    send(s, StreamMessage::Data(batch.clone())).await?;
                }
            }
            Distribution::Hash(p) => {
                let parts = p.partition(&batch).map_err(SendError::Partition)?;
                for (i, part) in parts.into_iter().enumerate() {
                    if let Some(part) = part {
                        send(&self.senders[i], StreamMessage::Data(part)).await?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Sends a watermark, barrier or end-of-input to every channel.
    pub(crate) async fn send_to_all(&self, message: StreamMessage) -> Result<(), SendError> {
        for s in &self.senders {
            send(s, message.clone()).await?;
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

async fn send(
    sender: &mpsc::Sender<StreamMessage>,
    message: StreamMessage,
) -> Result<(), SendError> {
    sender
        .send(message)
        .await
        .map_err(|_| SendError::Disconnected(Disconnected))
}
