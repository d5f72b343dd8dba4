//! Reading partitions: one consumer per source subtask, one partition queue per split.
//!
//! A subtask's splits share its consumer (one set of broker connections); each split reader
//! takes its partition's messages from the partition's own queue (librdkafka's
//! `rd_kafka_queue_get_partition`), split off before the partition is assigned so that none of
//! its messages reach the consumer's main queue. A background task serves the main queue
//! (errors, statistics); a message arriving there would mean a partition's records went past
//! its reader, so it marks the consumer broken and every reader fails (the job restarts from its
//! checkpoint; nothing is skipped).

use crate::client::{client_config, kafka_error};
use crate::format::RecordDecoder;
use crate::options::SourceOptions;
use futures::FutureExt;
use rdkafka::consumer::stream_consumer::StreamPartitionQueue;
use rdkafka::consumer::{Consumer, ConsumerContext, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::statistics::Statistics;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use weir_api::{Error, Result, SplitBatch, SplitCursor, SplitReader};

/// How often librdkafka reports statistics, from which each partition's end is read (lag).
const STATISTICS_INTERVAL_MS: &str = "1000";

/// The consumer context: keeps each partition's last stable offset from the statistics, for
/// the consumer lag of its split.
#[derive(Debug, Default)]
pub(crate) struct LagContext {
    ends: Mutex<HashMap<(String, i32), Arc<AtomicI64>>>,
}

impl LagContext {
    /// The shared cell of a partition's end offset (-1 until the first statistics).
    fn end_of(&self, topic: &str, partition: i32) -> Arc<AtomicI64> {
        let mut ends = self
            .ends
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        ends.entry((topic.to_owned(), partition))
            .or_insert_with(|| Arc::new(AtomicI64::new(-1)))
            .clone()
    }
}

impl ClientContext for LagContext {
    fn error(&self, error: KafkaError, reason: &str) {
        crate::client::report_error_event(&error, reason);
    }

    fn stats(&self, statistics: Statistics) {
        let ends = self
            .ends
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (name, topic) in &statistics.topics {
            for (id, p) in &topic.partitions {
                if let Some(cell) = ends.get(&(name.clone(), *id)) {
                    // The last stable offset is the end a read_committed consumer can reach.
                    let end = if p.ls_offset >= 0 {
                        p.ls_offset
                    } else {
                        p.hi_offset
                    };
                    if end >= 0 {
                        cell.store(end, Ordering::Relaxed);
                    }
                }
            }
        }
    }
}

impl ConsumerContext for LagContext {}

/// The consumer of one source subtask, shared by its split readers.
pub(crate) struct SubtaskConsumer {
    consumer: Arc<StreamConsumer<LagContext>>,
    servers: String,
    /// Set when a message reached the main queue: readers fail rather than skip it.
    broken: Arc<AtomicBool>,
    main_queue: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for SubtaskConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubtaskConsumer")
            .field("servers", &self.servers)
            .finish_non_exhaustive()
    }
}

impl Drop for SubtaskConsumer {
    fn drop(&mut self) {
        self.main_queue.abort();
    }
}

/// The live consumers of a source's subtasks in this process, by subtask: created by the first
/// split reader of a subtask, dropped with its last reader.
#[derive(Debug, Default)]
pub(crate) struct ConsumerPool {
    consumers: Mutex<HashMap<u32, Weak<SubtaskConsumer>>>,
}

impl ConsumerPool {
    /// The consumer of `subtask`, created when it has none.
    pub(crate) fn get_or_create(
        &self,
        subtask: u32,
        options: &SourceOptions,
        group: &str,
    ) -> Result<Arc<SubtaskConsumer>> {
        let mut consumers = self
            .consumers
            .lock()
            .map_err(|_| Error::Internal("kafka source: poisoned lock".into()))?;
        if let Some(c) = consumers.get(&subtask).and_then(Weak::upgrade) {
            return Ok(c);
        }
        let servers = options.bootstrap_servers.clone();
        let mut properties = options.properties.clone();
        properties
            .entry("auto.offset.reset".into())
            .or_insert_with(|| "earliest".into());
        properties
            .entry("enable.auto.commit".into())
            .or_insert_with(|| "false".into());
        properties
            .entry("isolation.level".into())
            .or_insert_with(|| "read_committed".into());
        let eof = if options.bounded() { "true" } else { "false" };
        let consumer: StreamConsumer<LagContext> = client_config(
            &servers,
            &properties,
            &[
                ("group.id", group),
                ("enable.partition.eof", eof),
                ("statistics.interval.ms", STATISTICS_INTERVAL_MS),
            ],
        )
        .create_with_context(LagContext::default())
        .map_err(|e| kafka_error("creating a consumer", &servers, &e))?;
        let consumer = Arc::new(consumer);
        let broken = Arc::new(AtomicBool::new(false));
        let main_queue = tokio::spawn(serve_main_queue(
            Arc::downgrade(&consumer),
            broken.clone(),
            servers.clone(),
        ));
        let shared = Arc::new(SubtaskConsumer {
            consumer,
            servers,
            broken,
            main_queue,
        });
        consumers.insert(subtask, Arc::downgrade(&shared));
        Ok(shared)
    }
}

/// Serves the consumer's main queue (errors and callbacks) until the consumer is dropped.
async fn serve_main_queue(
    consumer: Weak<StreamConsumer<LagContext>>,
    broken: Arc<AtomicBool>,
    servers: String,
) {
    loop {
        let Some(c) = consumer.upgrade() else { return };
        let event = c.recv().await;
        match event {
            Ok(m) => {
                tracing::error!(
                    topic = m.topic(),
                    partition = m.partition(),
                    offset = m.offset(),
                    "a kafka message reached the consumer's main queue instead of its partition's reader; the reader fails and the job restarts from its checkpoint"
                );
                broken.store(true, Ordering::Relaxed);
            }
            Err(e) => {
                tracing::warn!(servers = %servers, error = %e, "kafka consumer");
            }
        }
    }
}

/// Reads one partition from its cursor to its end (bounded) or forever.
pub(crate) struct KafkaSplitReader {
    queue: StreamPartitionQueue<LagContext>,
    shared: Arc<SubtaskConsumer>,
    topic: String,
    partition: i32,
    /// The next offset to read.
    next: i64,
    /// Exclusive end offset of a bounded split.
    end: Option<i64>,
    /// The partition's end as the statistics last reported it.
    known_end: Arc<AtomicI64>,
    decoder: RecordDecoder,
    batch_size: usize,
}

impl KafkaSplitReader {
    /// Splits off the partition's queue, then assigns the partition at `next`.
    pub(crate) fn open(
        shared: Arc<SubtaskConsumer>,
        topic: &str,
        partition: i32,
        next: i64,
        end: Option<i64>,
        decoder: RecordDecoder,
        batch_size: usize,
    ) -> Result<Self> {
        let servers = shared.servers.clone();
        let queue = shared
            .consumer
            .split_partition_queue(topic, partition)
            .ok_or_else(|| {
                Error::Internal(format!("no partition queue for {topic}/{partition}"))
            })?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Offset(next))
            .map_err(|e| kafka_error("building a partition list", &servers, &e))?;
        if end.is_none_or(|end| next < end) {
            shared
                .consumer
                .incremental_assign(&tpl)
                .map_err(|e| kafka_error(format!("assigning {topic}/{partition}"), &servers, &e))?;
        }
        let known_end = shared.consumer.context().end_of(topic, partition);
        Ok(KafkaSplitReader {
            queue,
            shared,
            topic: topic.to_owned(),
            partition,
            next,
            end,
            known_end,
            decoder,
            batch_size,
        })
    }

    fn error(&self, e: &KafkaError) -> Error {
        kafka_error(
            format!("reading {}/{}", self.topic, self.partition),
            &self.shared.servers,
            e,
        )
    }

    fn backlog(&self) -> Option<u64> {
        let end = self.end.or_else(|| {
            let known = self.known_end.load(Ordering::Relaxed);
            (known >= 0).then_some(known)
        })?;
        // The statistics may lag behind what was read already: then there is no backlog.
        u64::try_from(end.saturating_sub(self.next).max(0)).ok()
    }
}

impl Drop for KafkaSplitReader {
    fn drop(&mut self) {
        let mut tpl = TopicPartitionList::new();
        if tpl
            .add_partition(&self.topic, self.partition)
            .set_offset(Offset::Invalid)
            .is_ok()
        {
            // Best effort: the consumer may be going away too.
            let _ = self.shared.consumer.incremental_unassign(&tpl);
        }
    }
}

#[async_trait::async_trait]
impl SplitReader for KafkaSplitReader {
    async fn next_batch(&mut self) -> Result<Option<SplitBatch>> {
        loop {
            if self.end.is_some_and(|end| self.next >= end) {
                return Ok(None);
            }
            if self.shared.broken.load(Ordering::Relaxed) {
                return Err(Error::Internal(format!(
                    "the consumer of {}/{} received a message on its main queue",
                    self.topic, self.partition
                )));
            }
            let mut messages = Vec::new();
            let mut finished = false;
            let mut received = Some(self.queue.recv().await);
            while let Some(r) = received.take() {
                match r {
                    Ok(m) if self.end.is_some_and(|end| m.offset() >= end) => {
                        finished = true;
                        break;
                    }
                    Ok(m) => messages.push(m),
                    // The partition's end (its last stable offset) was reached, which is at or
                    // past the end fixed at the start.
                    Err(KafkaError::PartitionEOF(_)) if self.end.is_some() => {
                        finished = true;
                        break;
                    }
                    Err(KafkaError::PartitionEOF(_)) => {}
                    Err(e) => return Err(self.error(&e)),
                }
                if messages.len() >= self.batch_size {
                    break;
                }
                received = self.queue.recv().now_or_never();
            }
            let next_offset = messages.last().map(|m| m.offset() + 1);
            let decoded = match next_offset {
                Some(_) => Some(self.decoder.decode(&messages)?),
                None => None,
            };
            drop(messages);
            if let Some(n) = next_offset {
                self.next = n;
            }
            if finished && let Some(end) = self.end {
                self.next = self.next.max(end);
            }
            let Some(decoded) = decoded else {
                continue;
            };
            return Ok(Some(SplitBatch {
                data: decoded.data,
                dead_letters: decoded.dead_letters,
                cursor: SplitCursor {
                    next_record: u64::try_from(self.next).unwrap_or(0),
                },
                backlog: self.backlog(),
            }));
        }
    }
}
