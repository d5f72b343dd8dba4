//! The Kafka source: topic-partitions are splits, resolved to concrete start (and, when
//! bounded, end) offsets when the job starts.

use crate::client::{METADATA_TIMEOUT, blocking, client_config, kafka_error};
use crate::format::RecordLayout;
use crate::options::{RawOptions, SOURCE_OPTIONS, SourceOptions, StartFrom, StartReset, StopAt};
use crate::reader::{ConsumerPool, KafkaSplitReader};
use arrow::datatypes::SchemaRef;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use weir_api::{
    BadRecordPolicy, Boundedness, ConnectorSpec, Error, OperatorId, PreparedSource, Result,
    SourceCapability, SourceFactory, SourceSplit, SplitCursor, SplitReader, TaskContext,
};

/// Prepares `kafka` sources (docs/connectors/kafka.md).
#[derive(Debug, Default, Clone, Copy)]
pub struct KafkaSourceFactory;

/// Prepares `upsert-kafka` sources: a record is its key's latest row, a tombstone deletes the
/// key (docs/connectors/kafka.md, "Changes").
#[derive(Debug, Default, Clone, Copy)]
pub struct UpsertKafkaSourceFactory;

#[async_trait::async_trait]
impl SourceFactory for KafkaSourceFactory {
    async fn prepare(&self, spec: ConnectorSpec<'_>) -> Result<Arc<dyn PreparedSource>> {
        prepare(spec, false)
    }
}

#[async_trait::async_trait]
impl SourceFactory for UpsertKafkaSourceFactory {
    async fn prepare(&self, spec: ConnectorSpec<'_>) -> Result<Arc<dyn PreparedSource>> {
        prepare(spec, true)
    }
}

/// A Kafka source of `spec`, an upsert topic's with `upsert`.
fn prepare(spec: ConnectorSpec<'_>, upsert: bool) -> Result<Arc<dyn PreparedSource>> {
    // An upsert topic is read from its start unless told otherwise, as Flink's upsert-kafka
    // reads it: the table is every key's latest record.
    let mut options = spec.options.clone();
    if upsert
        && let Some(object) = options.as_object_mut()
        && !object.contains_key("scan.startup.mode")
    {
        object.insert(
            "scan.startup.mode".to_owned(),
            serde_json::json!("earliest-offset"),
        );
    }
    let raw = RawOptions::parse(&options, spec.options_path, SOURCE_OPTIONS)?;
    let options = SourceOptions::parse(&raw)?;
    let schema = spec.schema.clone().ok_or_else(|| {
        Error::config(
            spec.options_path.trim_end_matches(".options"),
            "a kafka source needs a declared schema (`schema:` in a job spec, the columns of \
             CREATE TABLE in SQL)",
        )
    })?;
    let layout = raw.layout(&schema, false, upsert)?;
    // Builds a decoder once, so that a layout that does not fit the schema fails now.
    crate::format::RecordDecoder::new(schema.clone(), layout.clone(), spec.bad_records)?;
    let output = crate::format::RecordDecoder::output_schema(&schema, &layout);
    Ok(Arc::new(KafkaSource {
        operator: spec.operator_id.clone(),
        options: Arc::new(options),
        schema,
        output,
        layout,
        bad_records: spec.bad_records,
        ends: Mutex::new(HashMap::new()),
        consumers: ConsumerPool::default(),
    }))
}

/// A prepared Kafka source, shared by its subtasks.
#[derive(Debug)]
pub(crate) struct KafkaSource {
    operator: OperatorId,
    options: Arc<SourceOptions>,
    /// The table's declared columns.
    schema: SchemaRef,
    /// The rows' schema: the declared one, with the row kind column on a topic of changes.
    output: SchemaRef,
    layout: RecordLayout,
    bad_records: BadRecordPolicy,
    /// Exclusive end offset of every split of a bounded source, by split id, resolved when the
    /// splits were first listed (the job's start).
    ends: Mutex<HashMap<String, i64>>,
    /// The consumer of each subtask of this process, shared by its split readers.
    consumers: ConsumerPool,
}

/// One partition as listed: its start and (bounded) end offsets.
struct ListedPartition {
    topic: String,
    partition: i32,
    start: i64,
    end: Option<i64>,
}

/// The split id of a topic-partition: `topic/partition` (topic names never contain `/`).
pub(crate) fn split_id(topic: &str, partition: i32) -> String {
    format!("{topic}/{partition}")
}

/// The topic and partition of a split id.
pub(crate) fn parse_split_id(id: &str) -> Result<(String, i32)> {
    id.rsplit_once('/')
        .and_then(|(t, p)| Some((t.to_owned(), p.parse().ok()?)))
        .ok_or_else(|| Error::Internal(format!("`{id}` is not a kafka split id (topic/partition)")))
}

impl KafkaSource {
    fn group_id(&self) -> String {
        self.options
            .group_id
            .clone()
            .unwrap_or_else(|| format!("weir-{}", self.operator))
    }

    /// Lists every partition of the topics with offsets resolved: `resolve` false gives each
    /// the earliest offset (partition discovery) and no end.
    async fn list(&self, resolve: bool) -> Result<Vec<ListedPartition>> {
        let options = self.options.clone();
        let group = self.group_id();
        blocking("listing kafka partitions", move || {
            list_partitions(&options, &group, resolve)
        })
        .await
    }
}

/// The blocking part of [`KafkaSource::list`].
fn list_partitions(
    options: &SourceOptions,
    group: &str,
    resolve: bool,
) -> Result<Vec<ListedPartition>> {
    let servers = &options.bootstrap_servers;
    let consumer: BaseConsumer = client_config(
        servers,
        &options.properties,
        &[("group.id", group), ("enable.auto.commit", "false")],
    )
    .create()
    .map_err(|e| kafka_error("creating a consumer", servers, &e))?;
    let mut out = Vec::new();
    for topic in &options.topics {
        let metadata = consumer
            .fetch_metadata(Some(topic), METADATA_TIMEOUT)
            .map_err(|e| {
                kafka_error(
                    format!("listing the partitions of topic `{topic}`"),
                    servers,
                    &e,
                )
            })?;
        let Some(t) = metadata.topics().iter().find(|t| t.name() == topic) else {
            return Err(Error::config(
                "topic",
                format!("topic `{topic}` is not known to the cluster at {servers}"),
            ));
        };
        if let Some(err) = t.error() {
            let code = rdkafka::error::RDKafkaErrorCode::from(err);
            return Err(Error::external(
                "kafka",
                format!("listing the partitions of topic `{topic}` (bootstrap servers {servers})"),
                format!("{code} (does the topic exist?)"),
                false,
            ));
        }
        let mut partitions: Vec<i32> = t.partitions().iter().map(|p| p.id()).collect();
        partitions.sort_unstable();
        if !resolve {
            out.extend(partitions.into_iter().map(|partition| ListedPartition {
                topic: topic.clone(),
                partition,
                start: 0,
                end: None,
            }));
            continue;
        }
        let mut listed = Vec::new();
        for partition in partitions {
            let (low, high) = consumer
                .fetch_watermarks(topic, partition, METADATA_TIMEOUT)
                .map_err(|e| {
                    kafka_error(
                        format!("reading the offsets of {topic}/{partition}"),
                        servers,
                        &e,
                    )
                })?;
            listed.push((partition, low, high));
        }
        let starts = start_offsets(&consumer, options, topic, &listed)?;
        let ends = end_offsets(&consumer, options, topic, &listed)?;
        for (((partition, low, _), start), end) in listed.iter().zip(starts).zip(ends) {
            out.push(ListedPartition {
                topic: topic.clone(),
                partition: *partition,
                start: start.max(*low),
                end,
            });
        }
    }
    Ok(out)
}

/// The offsets of the first record at or after `ts` per partition; `None` past the end.
fn offsets_for_time(
    consumer: &BaseConsumer,
    servers: &str,
    topic: &str,
    listed: &[(i32, i64, i64)],
    ts: i64,
) -> Result<Vec<Option<i64>>> {
    let mut tpl = TopicPartitionList::new();
    for (p, _, _) in listed {
        tpl.add_partition_offset(topic, *p, Offset::Offset(ts))
            .map_err(|e| kafka_error("building a partition list", servers, &e))?;
    }
    let found = consumer
        .offsets_for_times(tpl, METADATA_TIMEOUT)
        .map_err(|e| {
            kafka_error(
                format!("looking up offsets by time in `{topic}`"),
                servers,
                &e,
            )
        })?;
    Ok(listed
        .iter()
        .map(|(p, _, _)| {
            found
                .find_partition(topic, *p)
                .and_then(|e| match e.offset() {
                    Offset::Offset(o) => Some(o),
                    _ => None,
                })
        })
        .collect())
}

/// Where each partition (`(partition, low, high)`) starts.
fn start_offsets(
    consumer: &BaseConsumer,
    options: &SourceOptions,
    topic: &str,
    listed: &[(i32, i64, i64)],
) -> Result<Vec<i64>> {
    let servers = &options.bootstrap_servers;
    Ok(match &options.start {
        StartFrom::Earliest => listed.iter().map(|(_, low, _)| *low).collect(),
        StartFrom::Latest => listed.iter().map(|(_, _, high)| *high).collect(),
        StartFrom::Specific(map) => listed
            .iter()
            .map(|(p, low, _)| map.get(p).copied().unwrap_or(*low))
            .collect(),
        StartFrom::Timestamp(ts) => offsets_for_time(consumer, servers, topic, listed, *ts)?
            .into_iter()
            .zip(listed)
            .map(|(o, (_, _, high))| o.unwrap_or(*high))
            .collect(),
        StartFrom::GroupOffsets { reset } => {
            let mut tpl = TopicPartitionList::new();
            for (p, _, _) in listed {
                tpl.add_partition(topic, *p);
            }
            let committed = consumer
                .committed_offsets(tpl, METADATA_TIMEOUT)
                .map_err(|e| {
                    kafka_error(
                        format!("reading the group's offsets of `{topic}`"),
                        servers,
                        &e,
                    )
                })?;
            let mut out = Vec::new();
            for (p, low, high) in listed {
                let offset = committed
                    .find_partition(topic, *p)
                    .and_then(|e| match e.offset() {
                        Offset::Offset(o) => Some(o),
                        _ => None,
                    });
                out.push(match (offset, reset) {
                    (Some(o), _) => o,
                    (None, Some(StartReset::Earliest)) => *low,
                    (None, Some(StartReset::Latest)) => *high,
                    (None, None) => {
                        return Err(Error::config(
                            "scan.startup.mode",
                            format!(
                                "the consumer group `{}` has no committed offset for {topic}/{p}; \
                                 set 'properties.auto.offset.reset' (earliest or latest) or \
                                 another 'scan.startup.mode'",
                                options.group_id.as_deref().unwrap_or_default()
                            ),
                        ));
                    }
                });
            }
            out
        }
    })
}

/// Where each partition ends, for a bounded source (`None` for an unbounded one).
fn end_offsets(
    consumer: &BaseConsumer,
    options: &SourceOptions,
    topic: &str,
    listed: &[(i32, i64, i64)],
) -> Result<Vec<Option<i64>>> {
    let servers = &options.bootstrap_servers;
    Ok(match &options.stop {
        StopAt::Unbounded => vec![None; listed.len()],
        StopAt::Latest => listed.iter().map(|(_, _, high)| Some(*high)).collect(),
        StopAt::Specific(map) => listed
            .iter()
            .map(|(p, _, high)| Some(map.get(p).copied().unwrap_or(*high)))
            .collect(),
        StopAt::Timestamp(ts) => offsets_for_time(consumer, servers, topic, listed, *ts)?
            .into_iter()
            .zip(listed)
            .map(|(o, (_, _, high))| Some(o.unwrap_or(*high)))
            .collect(),
    })
}

#[async_trait::async_trait]
impl PreparedSource for KafkaSource {
    fn schema(&self) -> SchemaRef {
        self.output.clone()
    }

    fn touches(&self) -> Vec<weir_api::Touch> {
        crate::client::broker_touches(&self.options.bootstrap_servers)
    }

    fn capabilities(&self) -> Vec<SourceCapability> {
        let mut caps = vec![SourceCapability::Replayable];
        if self.options.read_committed {
            caps.push(SourceCapability::TransactionalRead);
        }
        caps
    }

    fn boundedness(&self) -> Boundedness {
        if self.options.bounded() {
            Boundedness::Bounded
        } else {
            Boundedness::Unbounded
        }
    }

    fn describe(&self) -> String {
        format!(
            "kafka: {} at {}",
            self.options.topics.join(";"),
            self.options.bootstrap_servers
        )
    }

    async fn enumerate_splits(&self) -> Result<Vec<SourceSplit>> {
        let listed = self.list(true).await?;
        let mut ends = self
            .ends
            .lock()
            .map_err(|_| Error::Internal("kafka source: poisoned lock".into()))?;
        let mut splits = Vec::with_capacity(listed.len());
        for p in listed {
            let id = split_id(&p.topic, p.partition);
            if let Some(end) = p.end {
                // The first listing fixes the end: a restart in the same job keeps it.
                ends.entry(id.clone()).or_insert(end);
            }
            splits.push(SourceSplit {
                id,
                cursor: SplitCursor {
                    next_record: u64::try_from(p.start).unwrap_or(0),
                },
                size_bytes: None,
                range: None,
            });
        }
        Ok(splits)
    }

    async fn open_split(
        &self,
        split: &SourceSplit,
        ctx: &TaskContext,
    ) -> Result<Box<dyn SplitReader>> {
        let (topic, partition) = parse_split_id(&split.id)?;
        let end = if self.options.bounded() {
            let ends = self
                .ends
                .lock()
                .map_err(|_| Error::Internal("kafka source: poisoned lock".into()))?;
            // A partition that appeared after the start of a bounded job has nothing to read.
            Some(ends.get(&split.id).copied().unwrap_or(0))
        } else {
            None
        };
        let consumer =
            self.consumers
                .get_or_create(ctx.subtask.0, &self.options, &self.group_id())?;
        let decoder = crate::format::RecordDecoder::new(
            self.schema.clone(),
            self.layout.clone(),
            self.bad_records,
        )?;
        let reader = KafkaSplitReader::open(
            consumer,
            &topic,
            partition,
            i64::try_from(split.cursor.next_record).unwrap_or(i64::MAX),
            end,
            decoder,
            self.options.batch_size,
        )?;
        Ok(Box::new(reader))
    }

    fn reads_splits_concurrently(&self) -> bool {
        true
    }

    fn discovery_interval(&self) -> Option<Duration> {
        if self.options.bounded() {
            None
        } else {
            self.options.discovery
        }
    }

    async fn discover_splits(&self) -> Result<Vec<SourceSplit>> {
        // New partitions are read from their earliest offset, as Flink does.
        Ok(self
            .list(false)
            .await?
            .into_iter()
            .map(|p| SourceSplit {
                id: split_id(&p.topic, p.partition),
                cursor: SplitCursor { next_record: 0 },
                size_bytes: None,
                range: None,
            })
            .collect())
    }
}
