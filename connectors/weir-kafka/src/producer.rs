//! Producing encoded rows: the producer context that keeps delivery failures, and the loop
//! that hands records to librdkafka, waiting while its queue is full.

use crate::format::{Encoded, RecordEncoder};
use crate::options::Partitioner;
use arrow::array::Array;
use arrow::record_batch::RecordBatch;
use rdkafka::ClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, ProducerContext, ThreadedProducer};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use weir_api::{Error, Result};

/// How long to wait before handing a record to a full producer queue again.
const QUEUE_FULL_PAUSE: Duration = Duration::from_millis(2);

/// Keeps the first delivery failure, reported at the next flush.
#[derive(Debug, Default)]
pub(crate) struct DeliveryContext {
    first_error: Mutex<Option<String>>,
}

impl DeliveryContext {
    /// The first delivery failure since the last call, if any.
    pub(crate) fn take_error(&self) -> Option<String> {
        self.first_error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

impl ClientContext for DeliveryContext {}

impl ProducerContext for DeliveryContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: Self::DeliveryOpaque) {
        if let Err((e, _)) = result {
            let mut first = self
                .first_error
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            first.get_or_insert_with(|| e.to_string());
        }
    }
}

/// The producer every Kafka sink uses.
pub(crate) type Producer = ThreadedProducer<DeliveryContext>;

/// Where rows of one writer go: the topic and how partitions are chosen.
#[derive(Debug)]
pub(crate) struct Target {
    pub(crate) topic: String,
    pub(crate) partitioner: Partitioner,
    /// The topic's partition count (for `fixed` and `round-robin`).
    pub(crate) partitions: i32,
    /// The writing subtask (for `fixed`).
    pub(crate) subtask: u32,
    pub(crate) next: AtomicUsize,
}

impl Target {
    fn partition(&self) -> Option<i32> {
        let count = self.partitions.max(1);
        match self.partitioner {
            Partitioner::Default => None,
            Partitioner::Fixed => Some(i32::try_from(self.subtask).unwrap_or(0) % count),
            Partitioner::RoundRobin => {
                let n = self.next.fetch_add(1, Ordering::Relaxed);
                Some(i32::try_from(n % usize::try_from(count).unwrap_or(1)).unwrap_or(0))
            }
        }
    }
}

/// Encodes `batch` and hands every row to `producer`.
pub(crate) async fn produce_batch(
    producer: &Producer,
    encoder: &mut RecordEncoder,
    target: &Target,
    batch: &RecordBatch,
) -> Result<usize> {
    if batch.num_rows() == 0 {
        return Ok(0);
    }
    let encoded = encoder.encode(batch)?;
    produce_encoded(producer, target, &encoded).await
}

/// Hands every encoded record to `producer`, in order.
async fn produce_encoded(producer: &Producer, target: &Target, encoded: &Encoded) -> Result<usize> {
    let rows = encoded.values.len();
    for row in 0..rows {
        let headers = encoded.headers.as_ref().map(|h| {
            let mut out = OwnedHeaders::new();
            for (name, value) in &h[row] {
                out = out.insert(Header {
                    key: name,
                    value: value.as_deref(),
                });
            }
            out
        });
        loop {
            let mut record: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(&target.topic);
            if encoded.values.is_valid(row) {
                record = record.payload(encoded.values.value(row));
            }
            if let Some(keys) = &encoded.keys
                && keys.is_valid(row)
            {
                record = record.key(keys.value(row));
            }
            if let Some(p) = target.partition() {
                record = record.partition(p);
            }
            if let Some(ts) = encoded.timestamps.as_ref().and_then(|t| t[row]) {
                record = record.timestamp(ts);
            }
            if let Some(h) = &headers {
                record = record.headers(h.clone());
            }
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    tokio::time::sleep(QUEUE_FULL_PAUSE).await;
                }
                Err((e, _)) => {
                    return Err(Error::external(
                        "kafka",
                        format!("producing to topic `{}`", target.topic),
                        e,
                        true,
                    ));
                }
            }
        }
    }
    Ok(rows)
}
