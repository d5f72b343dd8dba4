//! The Kafka source against a real broker, through its public API: every `scan.startup.mode`,
//! the `timestamp` and `specific-offsets` bounded modes, partition discovery, and bad records
//! sent to the dead-letter output. Each test has its own topics and groups, and checks the exact
//! partition, offset, value and timestamp of every record read.

use arrow::array::{
    Array, Int32Array, Int64Array, StringArray, TimestampMillisecondArray, UInt64Array,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use weir_api::{
    BadRecordPolicy, ConnectorSpec, Error, JobId, OperatorId, PreparedSource, SourceFactory,
    SourceSplit, SplitCursor, SplitReader, SubtaskIndex, TaskContext,
};
use weir_kafka::KafkaSourceFactory;
use weir_testkit::kafka::KafkaBroker;
use weir_testkit::unique_name;

/// How long a test waits for records that must arrive before it fails.
const PATIENCE: Duration = Duration::from_secs(60);

fn broker() -> &'static KafkaBroker {
    KafkaBroker::shared().expect("the Kafka test broker")
}

/// A new topic of `partitions` partitions.
fn topic(partitions: i32) -> String {
    let topic = unique_name("src");
    broker().create_topic(&topic, partitions).expect("topic");
    topic
}

/// A time a day ago, in whole seconds: message timestamps around it are in the broker's range.
fn base_time() -> i64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis();
    (i64::try_from(now).expect("ms") - 86_400_000) / 1000 * 1000
}

/// One record to produce: its partition, its value and a message timestamp when given.
struct Out {
    partition: i32,
    value: String,
    timestamp: Option<i64>,
}

/// A record `{"id": id}`.
fn json(partition: i32, id: i64, timestamp: Option<i64>) -> Out {
    Out {
        partition,
        value: format!(r#"{{"id":{id}}}"#),
        timestamp,
    }
}

/// A record of partition 0 whose value is `value`.
fn text(value: &str) -> Out {
    Out {
        partition: 0,
        value: value.to_owned(),
        timestamp: None,
    }
}

/// Produces `records` in order, one at a time, each to its partition.
async fn produce(topic: &str, records: &[Out]) {
    let producer: FutureProducer = broker()
        .client_config()
        .set("enable.idempotence", "true")
        .create()
        .expect("producer");
    for r in records {
        let mut record = FutureRecord::<(), str>::to(topic)
            .partition(r.partition)
            .payload(&r.value);
        if let Some(ts) = r.timestamp {
            record = record.timestamp(ts);
        }
        let delivered = producer
            .send(record, PATIENCE)
            .await
            .map_err(|(e, _)| e)
            .expect("delivered");
        assert_eq!(delivered.partition, r.partition);
    }
}

/// Produces a tombstone (a message without a value) to partition 0.
async fn produce_tombstone(topic: &str) -> i64 {
    let producer: FutureProducer = broker().client_config().create().expect("producer");
    producer
        .send(
            FutureRecord::<str, ()>::to(topic).partition(0).key("gone"),
            PATIENCE,
        )
        .await
        .map_err(|(e, _)| e)
        .expect("delivered")
        .offset
}

/// The table every source test reads: the value's `id`, and the message's partition, offset and
/// timestamp.
fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("p", DataType::Int32, false),
        Field::new("o", DataType::Int64, false),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        ),
    ]))
}

/// The options of a json source of `topic` with the metadata columns, plus `extra`.
fn options(topic: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut options = serde_json::json!({
        "topic": topic,
        "properties.bootstrap.servers": broker().bootstrap_servers(),
        "format": "json",
        "metadata": {"p": "partition", "o": "offset", "ts": "timestamp"},
    });
    for (k, v) in extra.as_object().expect("an object") {
        options[k] = v.clone();
    }
    options
}

async fn prepare(options: &serde_json::Value, policy: BadRecordPolicy) -> Arc<dyn PreparedSource> {
    KafkaSourceFactory
        .prepare(ConnectorSpec {
            operator_id: &OperatorId::new(unique_name("source")),
            options,
            options_path: "sources[0].options",
            schema: Some(schema()),
            bad_records: policy,
            reach: weir_api::Reach::Full,
        })
        .await
        .expect("prepares")
}

fn ctx() -> TaskContext {
    TaskContext::new(
        JobId::new("job"),
        OperatorId::new("source"),
        SubtaskIndex(0),
        1,
    )
}

/// One row read: `(partition, offset, id, timestamp)`.
type Row = (i32, i64, i64, Option<i64>);

fn rows_of(batch: &arrow::record_batch::RecordBatch) -> Vec<Row> {
    let col = |i: usize| batch.column(i).as_any();
    let id = col(0).downcast_ref::<Int64Array>().expect("id");
    let p = col(1).downcast_ref::<Int32Array>().expect("p");
    let o = col(2).downcast_ref::<Int64Array>().expect("o");
    let ts = col(3)
        .downcast_ref::<TimestampMillisecondArray>()
        .expect("ts");
    (0..batch.num_rows())
        .map(|r| {
            (
                p.value(r),
                o.value(r),
                id.value(r),
                ts.is_valid(r).then(|| ts.value(r)),
            )
        })
        .collect()
}

/// Reads a bounded reader to its end.
async fn read_to_end(reader: &mut Box<dyn SplitReader>) -> Vec<Row> {
    let mut rows = Vec::new();
    let read = async {
        while let Some(batch) = reader.next_batch().await.expect("reads") {
            rows.extend(rows_of(&batch.data));
        }
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .expect("the split ends");
    rows
}

/// Reads every split of a bounded source to its end; rows in partition and offset order.
async fn read_bounded(source: &Arc<dyn PreparedSource>) -> Vec<Row> {
    let splits = source.enumerate_splits().await.expect("splits");
    read_splits(source, &splits).await
}

async fn read_splits(source: &Arc<dyn PreparedSource>, splits: &[SourceSplit]) -> Vec<Row> {
    let mut rows = Vec::new();
    for split in splits {
        let mut reader = source.open_split(split, &ctx()).await.expect("opens");
        rows.extend(read_to_end(&mut reader).await);
    }
    rows.sort_unstable();
    rows
}

/// Reads an unbounded reader until it has given `n` rows.
async fn read_n(reader: &mut Box<dyn SplitReader>, n: usize) -> Vec<Row> {
    let mut rows = Vec::new();
    let read = async {
        while rows.len() < n {
            let batch = reader
                .next_batch()
                .await
                .expect("reads")
                .expect("unbounded");
            rows.extend(rows_of(&batch.data));
        }
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .expect("the records arrive");
    rows
}

/// The cursors of `splits` by split id.
fn cursors(splits: &[SourceSplit]) -> Vec<(String, u64)> {
    splits
        .iter()
        .map(|s| (s.id.clone(), s.cursor.next_record))
        .collect()
}

/// Rows `(partition, offset, id)` without timestamps.
fn untimed(rows: &[Row]) -> Vec<(i32, i64, i64)> {
    rows.iter().map(|&(p, o, id, _)| (p, o, id)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn earliest_offset_reads_every_partition_of_every_topic_from_its_start() {
    let (first, second) = (topic(2), topic(1));
    produce(
        &first,
        &[json(0, 1, None), json(1, 2, None), json(0, 3, None)],
    )
    .await;
    produce(&second, &[json(0, 4, None)]).await;
    let source = prepare(
        &options(
            &format!("{first};{second}"),
            serde_json::json!({"scan.startup.mode": "earliest-offset",
                "scan.bounded.mode": "latest-offset"}),
        ),
        BadRecordPolicy::Fail,
    )
    .await;
    let splits = source.enumerate_splits().await.expect("splits");
    // In topic, then partition order.
    assert_eq!(
        cursors(&splits),
        [
            (format!("{first}/0"), 0),
            (format!("{first}/1"), 0),
            (format!("{second}/0"), 0)
        ]
    );
    let rows = read_splits(&source, &splits).await;
    assert_eq!(untimed(&rows), [(0, 0, 1), (0, 0, 4), (0, 1, 3), (1, 0, 2)]);
    assert!(rows.iter().all(|r| r.3.is_some()), "{rows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latest_offset_reads_only_what_is_produced_after_the_start() {
    let topic = topic(2);
    produce(
        &topic,
        &[json(0, 1, None), json(0, 2, None), json(1, 3, None)],
    )
    .await;
    let source = prepare(
        &options(
            &topic,
            serde_json::json!({"scan.startup.mode": "latest-offset",
                "scan.topic-partition-discovery.interval": "0"}),
        ),
        BadRecordPolicy::Fail,
    )
    .await;
    let splits = source.enumerate_splits().await.expect("splits");
    assert_eq!(
        cursors(&splits),
        [(format!("{topic}/0"), 2), (format!("{topic}/1"), 1)]
    );
    let mut readers = Vec::new();
    for split in &splits {
        readers.push(source.open_split(split, &ctx()).await.expect("opens"));
    }
    produce(
        &topic,
        &[json(0, 10, None), json(1, 11, None), json(0, 12, None)],
    )
    .await;
    assert_eq!(
        untimed(&read_n(&mut readers[0], 2).await),
        [(0, 2, 10), (0, 3, 12)]
    );
    assert_eq!(untimed(&read_n(&mut readers[1], 1).await), [(1, 1, 11)]);
}

/// Commits `offsets` (partition, next offset) for `group` as a plain consumer would.
fn commit(group: &str, topic: &str, offsets: &[(i32, i64)]) {
    let consumer: BaseConsumer = broker()
        .client_config()
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for &(p, o) in offsets {
        tpl.add_partition_offset(topic, p, Offset::Offset(o))
            .expect("offset");
    }
    consumer.commit(&tpl, CommitMode::Sync).expect("commits");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_offsets_start_at_the_committed_offsets() {
    let topic = topic(2);
    let records: Vec<_> = (0..4)
        .map(|i| json(0, i, None))
        .chain((10..13).map(|i| json(1, i, None)))
        .collect();
    produce(&topic, &records).await;
    let group = unique_name("group");
    commit(&group, &topic, &[(0, 3), (1, 1)]);
    // group-offsets is the default mode.
    let source = prepare(
        &options(
            &topic,
            serde_json::json!({"properties.group.id": group,
                "scan.bounded.mode": "latest-offset"}),
        ),
        BadRecordPolicy::Fail,
    )
    .await;
    assert_eq!(
        untimed(&read_bounded(&source).await),
        [(0, 3, 3), (1, 1, 11), (1, 2, 12)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_offsets_without_a_commit_follow_auto_offset_reset_or_fail() {
    let topic = topic(2);
    produce(
        &topic,
        &[
            json(0, 0, None),
            json(0, 1, None),
            json(1, 10, None),
            json(1, 11, None),
        ],
    )
    .await;
    let group = unique_name("group");
    commit(&group, &topic, &[(0, 1)]);
    let with = |reset: Option<&str>| {
        let mut extra = serde_json::json!({"properties.group.id": group,
            "scan.startup.mode": "group-offsets", "scan.bounded.mode": "latest-offset"});
        if let Some(reset) = reset {
            extra["properties.auto.offset.reset"] = reset.into();
        }
        options(&topic, extra)
    };

    // Partition 1 has no committed offset and nothing says where to start: the job fails.
    let source = prepare(&with(None), BadRecordPolicy::Fail).await;
    let err = source
        .enumerate_splits()
        .await
        .expect_err("no offset for partition 1");
    let message = err.to_string();
    assert!(matches!(err, Error::Config { .. }), "{err:?}");
    assert!(message.contains(&format!("{topic}/1")), "{message}");
    assert!(message.contains(&group), "{message}");
    assert!(
        message.contains("properties.auto.offset.reset"),
        "{message}"
    );

    let source = prepare(&with(Some("earliest")), BadRecordPolicy::Fail).await;
    assert_eq!(
        untimed(&read_bounded(&source).await),
        [(0, 1, 1), (1, 0, 10), (1, 1, 11)]
    );
    let source = prepare(&with(Some("latest")), BadRecordPolicy::Fail).await;
    let splits = source.enumerate_splits().await.expect("splits");
    assert_eq!(
        cursors(&splits),
        [(format!("{topic}/0"), 1), (format!("{topic}/1"), 2)]
    );
    assert_eq!(untimed(&read_splits(&source, &splits).await), [(0, 1, 1)]);

    // Refused when the options are read: only earliest and latest are starts.
    let err = KafkaSourceFactory
        .prepare(ConnectorSpec {
            operator_id: &OperatorId::new("source"),
            options: &with(Some("none")),
            options_path: "sources[0].options",
            schema: Some(schema()),
            bad_records: BadRecordPolicy::Fail,
            reach: weir_api::Reach::Full,
        })
        .await
        .expect_err("refused");
    assert!(
        err.to_string()
            .contains("sources[0].options.'properties.auto.offset.reset'"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamp_starts_at_the_first_record_at_or_after_it() {
    let topic = topic(2);
    let t = base_time();
    produce(
        &topic,
        &[
            json(0, 0, Some(t + 1000)),
            json(0, 1, Some(t + 2000)),
            json(0, 2, Some(t + 3000)),
            json(0, 3, Some(t + 2500)),
            json(1, 10, Some(t + 1000)),
            json(1, 11, Some(t + 1999)),
        ],
    )
    .await;
    let at = |ts: i64| {
        options(
            &topic,
            serde_json::json!({"scan.startup.mode": "timestamp",
                "scan.startup.timestamp-millis": ts, "scan.bounded.mode": "latest-offset"}),
        )
    };
    // Exactly a record's timestamp: that record is the first; partition 1 has nothing that late
    // and starts at its end.
    let source = prepare(&at(t + 2000), BadRecordPolicy::Fail).await;
    let splits = source.enumerate_splits().await.expect("splits");
    assert_eq!(
        cursors(&splits),
        [(format!("{topic}/0"), 1), (format!("{topic}/1"), 2)]
    );
    assert_eq!(
        read_splits(&source, &splits).await,
        [
            (0, 1, 1, Some(t + 2000)),
            (0, 2, 2, Some(t + 3000)),
            (0, 3, 3, Some(t + 2500))
        ]
    );
    // Between two timestamps: the first record after it, in offset order (later records with
    // earlier timestamps are read too).
    let source = prepare(&at(t + 1001), BadRecordPolicy::Fail).await;
    assert_eq!(
        untimed(&read_bounded(&source).await),
        [(0, 1, 1), (0, 2, 2), (0, 3, 3), (1, 1, 11)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn specific_offsets_start_there_and_other_partitions_at_their_start() {
    let topic = topic(3);
    let records: Vec<_> = (0..3)
        .flat_map(|p| (0..4).map(move |i| json(p, i64::from(p) * 10 + i, None)))
        .collect();
    produce(&topic, &records).await;
    let source = prepare(
        &options(
            &topic,
            serde_json::json!({"scan.startup.mode": "specific-offsets",
                "scan.startup.specific-offsets": "partition:0,offset:2;partition:2,offset:3",
                "scan.bounded.mode": "latest-offset"}),
        ),
        BadRecordPolicy::Fail,
    )
    .await;
    assert_eq!(
        untimed(&read_bounded(&source).await),
        [
            (0, 2, 2),
            (0, 3, 3),
            (1, 0, 10),
            (1, 1, 11),
            (1, 2, 12),
            (1, 3, 13),
            (2, 3, 23)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_timestamp_ends_at_the_first_record_at_that_time() {
    let topic = topic(2);
    let t = base_time();
    produce(
        &topic,
        &[
            json(0, 0, Some(t + 1000)),
            json(0, 1, Some(t + 2000)),
            json(0, 2, Some(t + 3000)),
            json(0, 3, Some(t + 3001)),
            json(0, 4, Some(t + 1500)),
            json(1, 10, Some(t + 1000)),
            json(1, 11, Some(t + 2000)),
        ],
    )
    .await;
    let source = prepare(
        &options(
            &topic,
            serde_json::json!({"scan.startup.mode": "earliest-offset",
                "scan.bounded.mode": "timestamp", "scan.bounded.timestamp-millis": t + 3000}),
        ),
        BadRecordPolicy::Fail,
    )
    .await;
    let splits = source.enumerate_splits().await.expect("splits");
    // Written after the start: partition 1 ended at its end then, so this is not read.
    produce(&topic, &[json(1, 12, Some(t + 1000))]).await;
    // As in Flink, the end is the first offset whose timestamp is at or after the bound
    // (exclusive): the record at the bound is not read, nor anything after it, earlier
    // timestamps included.
    assert_eq!(
        read_splits(&source, &splits).await,
        [
            (0, 0, 0, Some(t + 1000)),
            (0, 1, 1, Some(t + 2000)),
            (1, 0, 10, Some(t + 1000)),
            (1, 1, 11, Some(t + 2000))
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_specific_offsets_end_before_them_and_other_partitions_at_their_end() {
    let topic = topic(3);
    let records: Vec<_> = (0..3)
        .flat_map(|p| (0..4).map(move |i| json(p, i64::from(p) * 10 + i, None)))
        .collect();
    produce(&topic, &records).await;
    let source = prepare(
        &options(
            &topic,
            serde_json::json!({"scan.startup.mode": "earliest-offset",
                "scan.bounded.mode": "specific-offsets",
                "scan.bounded.specific-offsets": "partition:0,offset:2;partition:2,offset:0"}),
        ),
        BadRecordPolicy::Fail,
    )
    .await;
    let splits = source.enumerate_splits().await.expect("splits");
    produce(&topic, &[json(1, 14, None), json(0, 4, None)]).await;
    assert_eq!(
        untimed(&read_splits(&source, &splits).await),
        [
            (0, 0, 0),
            (0, 1, 1),
            (1, 0, 10),
            (1, 1, 11),
            (1, 2, 12),
            (1, 3, 13)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovered_partitions_are_read_from_their_start() {
    let topic = topic(1);
    produce(&topic, &[json(0, 0, None)]).await;
    let source = prepare(
        &options(
            &topic,
            serde_json::json!({"scan.startup.mode": "latest-offset",
                "scan.topic-partition-discovery.interval": "200ms"}),
        ),
        BadRecordPolicy::Fail,
    )
    .await;
    assert_eq!(
        source.discovery_interval(),
        Some(Duration::from_millis(200))
    );
    let splits = source.enumerate_splits().await.expect("splits");
    assert_eq!(cursors(&splits), [(format!("{topic}/0"), 1)]);
    let mut first = source.open_split(&splits[0], &ctx()).await.expect("opens");

    broker()
        .create_partitions(&topic, 3)
        .expect("grows the topic");
    let discovered = tokio::time::timeout(PATIENCE, async {
        loop {
            let splits = source.discover_splits().await.expect("discovers");
            if splits.len() == 3 {
                return splits;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the new partitions are listed");
    // New partitions start at offset 0 (what is listed for the known one is not used: the job
    // keeps its own cursor of a split it knows).
    assert_eq!(
        cursors(&discovered)[1..],
        [(format!("{topic}/1"), 0), (format!("{topic}/2"), 0)]
    );
    // Records written to a new partition before its reader opens are read.
    produce(
        &topic,
        &[json(2, 20, None), json(2, 21, None), json(0, 1, None)],
    )
    .await;
    let mut third = source
        .open_split(&discovered[2], &ctx())
        .await
        .expect("opens");
    produce(&topic, &[json(2, 22, None)]).await;
    assert_eq!(
        untimed(&read_n(&mut third, 3).await),
        [(2, 0, 20), (2, 1, 21), (2, 2, 22)]
    );
    assert_eq!(untimed(&read_n(&mut first, 1).await), [(0, 1, 1)]);

    // A bounded source does not discover.
    let bounded = prepare(
        &options(
            &topic,
            serde_json::json!({"scan.startup.mode": "earliest-offset",
                "scan.bounded.mode": "latest-offset",
                "scan.topic-partition-discovery.interval": "200ms"}),
        ),
        BadRecordPolicy::Fail,
    )
    .await;
    assert_eq!(bounded.discovery_interval(), None);
}

/// The records of the dead-letter tests: good, bad and tombstones in partition 0.
async fn produce_bad_records(topic: &str) {
    produce(
        topic,
        &[
            text(r#"{"id":1}"#),
            text("not json"),
            text(r#"{"id":3}"#),
            text(r#"{"id":"four"}"#),
        ],
    )
    .await;
    assert_eq!(produce_tombstone(topic).await, 4);
    produce(topic, &[text(r#"{"name":"no id"}"#), text(r#"{"id":7}"#)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_records_go_to_the_dead_letter_output_with_their_position() {
    let topic = topic(1);
    produce_bad_records(&topic).await;
    let opts = options(
        &topic,
        serde_json::json!({"scan.startup.mode": "earliest-offset",
            "scan.bounded.mode": "latest-offset"}),
    );
    let source = prepare(&opts, BadRecordPolicy::DeadLetter).await;
    let splits = source.enumerate_splits().await.expect("splits");
    let mut reader = source.open_split(&splits[0], &ctx()).await.expect("opens");
    let mut rows = Vec::new();
    let mut dead = Vec::new();
    let mut cursor = SplitCursor::default();
    let read = async {
        while let Some(batch) = reader.next_batch().await.expect("reads past bad records") {
            rows.extend(untimed(&rows_of(&batch.data)));
            cursor = batch.cursor;
            if let Some(d) = batch.dead_letters {
                assert_eq!(d.schema(), weir_api::dead_letter_schema());
                let utf8 = |i: usize| {
                    d.column(i)
                        .as_any()
                        .downcast_ref::<StringArray>()
                        .expect("utf8")
                };
                let line = d
                    .column(1)
                    .as_any()
                    .downcast_ref::<UInt64Array>()
                    .expect("line");
                for r in 0..d.num_rows() {
                    dead.push((
                        utf8(0).value(r).to_owned(),
                        line.value(r),
                        utf8(2).is_valid(r).then(|| utf8(2).value(r).to_owned()),
                        utf8(3).value(r).to_owned(),
                        utf8(4).value(r).to_owned(),
                    ));
                }
            }
        }
    };
    tokio::time::timeout(PATIENCE, read).await.expect("ends");
    // The good records, the tombstone skipped.
    assert_eq!(rows, [(0, 0, 1), (0, 2, 3), (0, 6, 7)]);
    assert_eq!(cursor.next_record, 7);
    let input = format!("{topic}/0");
    let found: Vec<_> = dead
        .iter()
        .map(|(i, l, c, _, raw)| (i.as_str(), *l, c.as_deref(), raw.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (input.as_str(), 1, None, "not json"),
            (input.as_str(), 3, Some("id"), r#"{"id":"four"}"#),
            (input.as_str(), 5, Some("id"), r#"{"name":"no id"}"#),
        ]
    );
    assert!(
        dead[0].3.contains("at offset 1") && dead[0].3.contains("not valid json"),
        "{dead:?}"
    );
    assert!(dead[1].3.contains("at offset 3"), "{dead:?}");
    assert!(
        dead[2].3.contains("at offset 5") && dead[2].3.contains("not nullable"),
        "{dead:?}"
    );

    // Under the fail policy the first bad record fails the read, naming where it is.
    let source = prepare(&opts, BadRecordPolicy::Fail).await;
    let splits = source.enumerate_splits().await.expect("splits");
    let mut reader = source.open_split(&splits[0], &ctx()).await.expect("opens");
    let err = tokio::time::timeout(PATIENCE, async {
        loop {
            match reader.next_batch().await {
                Ok(Some(_)) => {}
                Ok(None) => panic!("the bad records were not noticed"),
                Err(e) => return e,
            }
        }
    })
    .await
    .expect("fails");
    match err {
        Error::BadRecord { location, message } => {
            assert_eq!(location.input, input);
            assert_eq!(location.line, Some(1));
            assert!(message.contains("not valid json"), "{message}");
        }
        other => panic!("expected a bad record error, got {other:?}"),
    }
}
