//! The Kafka sink's at-least-once and none writers against a real broker, through the public
//! API: message keys from key fields, headers and timestamps from metadata columns, the three
//! partitioners, and both delivery guarantees writing every record. Each test reads its topic
//! back with a plain consumer and compares partitions, keys, values, headers and timestamps; the
//! key and metadata tests also read it with a Kafka source of the same layout, which must give
//! the written rows back.

use arrow::array::{
    Array, ArrayRef, BinaryBuilder, Int64Array, MapBuilder, RecordBatch, StringArray,
    StringBuilder, TimestampMillisecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message, Timestamp};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use weir_api::{
    BadRecordPolicy, ConnectorSpec, Epoch, JobId, OperatorId, PreparedSink, SinkCapability,
    SinkFactory, SourceFactory, SubtaskIndex, TaskContext,
};
use weir_kafka::{KafkaSinkFactory, KafkaSourceFactory};
use weir_testkit::kafka::KafkaBroker;
use weir_testkit::unique_name;

/// How long reading a topic back may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(60);

fn broker() -> &'static KafkaBroker {
    KafkaBroker::shared().expect("the Kafka test broker")
}

/// A new topic of `partitions` partitions.
fn topic(partitions: i32) -> String {
    let topic = unique_name("sink");
    broker().create_topic(&topic, partitions).expect("topic");
    topic
}

/// One message read back.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Read {
    partition: i32,
    offset: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    timestamp: Timestamp,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

/// Every message of `topic`, in partition and offset order.
fn read_back(topic: &str) -> Vec<Read> {
    let consumer: BaseConsumer = broker()
        .client_config()
        .set("group.id", unique_name("sink-reader"))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .expect("consumer");
    let metadata = consumer
        .fetch_metadata(Some(topic), PATIENCE)
        .expect("metadata");
    let partitions: Vec<i32> = metadata.topics()[0]
        .partitions()
        .iter()
        .map(|p| p.id())
        .collect();
    let mut tpl = TopicPartitionList::new();
    for p in &partitions {
        tpl.add_partition_offset(topic, *p, Offset::Beginning)
            .expect("offset");
    }
    consumer.assign(&tpl).expect("assigns");
    let mut at_end = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    while at_end.len() < partitions.len() {
        assert!(Instant::now() < deadline, "{topic} not read to its end");
        match consumer.poll(Duration::from_millis(200)) {
            None => {}
            Some(Ok(m)) => out.push(Read {
                partition: m.partition(),
                offset: m.offset(),
                key: m.key().map(<[u8]>::to_vec),
                value: m.payload().map(<[u8]>::to_vec),
                timestamp: m.timestamp(),
                headers: m
                    .headers()
                    .map(|h| {
                        h.iter()
                            .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
                            .collect()
                    })
                    .unwrap_or_default(),
            }),
            Some(Err(KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            Some(Err(e)) => panic!("reading {topic}: {e}"),
        }
    }
    out.sort_by_key(|r| (r.partition, r.offset));
    out
}

/// A message's key and value.
type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// The keys and values of `reads`.
fn keys_and_values(reads: &[Read]) -> Vec<KeyValue<'_>> {
    reads
        .iter()
        .map(|r| (r.key.as_deref(), r.value.as_deref()))
        .collect()
}

/// The values of `reads` as text, with their partitions.
fn values(reads: &[Read]) -> Vec<(i32, String)> {
    reads
        .iter()
        .map(|r| {
            let value = r.value.as_deref().expect("a value");
            (
                r.partition,
                String::from_utf8(value.to_vec()).expect("utf8"),
            )
        })
        .collect()
}

/// A sink of `schema` writing `topic` with `extra` options.
async fn sink(topic: &str, schema: &SchemaRef, extra: serde_json::Value) -> Arc<dyn PreparedSink> {
    let mut options = serde_json::json!({
        "topic": topic,
        "properties.bootstrap.servers": broker().bootstrap_servers(),
        "format": "json",
    });
    for (k, v) in extra.as_object().expect("an object") {
        options[k] = v.clone();
    }
    KafkaSinkFactory
        .prepare(
            ConnectorSpec {
                operator_id: &OperatorId::new("out"),
                options: &options,
                options_path: "sinks[0].options",
                schema: None,
                bad_records: BadRecordPolicy::Fail,
                reach: weir_api::Reach::Full,
            },
            schema.clone(),
        )
        .await
        .expect("prepares")
}

/// Every row of `topic` read by a bounded Kafka source of `schema` with `extra` options, one
/// batch per partition in partition order.
async fn read_with_source(
    topic: &str,
    schema: &SchemaRef,
    extra: serde_json::Value,
) -> Vec<RecordBatch> {
    let mut options = serde_json::json!({
        "topic": topic,
        "properties.bootstrap.servers": broker().bootstrap_servers(),
        "format": "json",
        "scan.startup.mode": "earliest-offset",
        "scan.bounded.mode": "latest-offset",
    });
    for (k, v) in extra.as_object().expect("an object") {
        options[k] = v.clone();
    }
    let source = KafkaSourceFactory
        .prepare(ConnectorSpec {
            operator_id: &OperatorId::new(unique_name("in")),
            options: &options,
            options_path: "sources[0].options",
            schema: Some(schema.clone()),
            bad_records: BadRecordPolicy::Fail,
            reach: weir_api::Reach::Full,
        })
        .await
        .expect("prepares");
    let mut out = Vec::new();
    for split in source.enumerate_splits().await.expect("splits") {
        let mut reader = source.open_split(&split, &ctx(0, 1)).await.expect("opens");
        let mut batches = Vec::new();
        let read = async {
            while let Some(b) = reader.next_batch().await.expect("reads") {
                batches.push(b.data);
            }
        };
        tokio::time::timeout(PATIENCE, read).await.expect("ends");
        out.push(arrow::compute::concat_batches(schema, &batches).expect("concat"));
    }
    out
}

/// The context of sink subtask `subtask` of `parallelism`, without checkpoint staging.
fn ctx(subtask: u32, parallelism: u32) -> TaskContext {
    TaskContext::new(
        JobId::new("job"),
        OperatorId::new("out"),
        SubtaskIndex(subtask),
        parallelism,
    )
}

/// `id` (Int64) and `name` (Utf8) columns.
fn id_name_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("v", DataType::Int64, true),
    ]))
}

fn id_name_batch(ids: &[i64], names: &[Option<&str>]) -> RecordBatch {
    RecordBatch::try_new(
        id_name_schema(),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            Arc::new(StringArray::from(names.to_vec())),
            Arc::new(Int64Array::from_iter_values(ids.iter().map(|i| i * 10))),
        ],
    )
    .expect("batch")
}

/// Writes `batches` with subtask `subtask` of `parallelism` and finishes.
async fn write(
    sink: &Arc<dyn PreparedSink>,
    subtask: u32,
    parallelism: u32,
    batches: Vec<RecordBatch>,
) {
    let mut writer = sink
        .create_writer(&ctx(subtask, parallelism))
        .await
        .expect("writer");
    for b in batches {
        writer.write_batch(b).await.expect("writes");
    }
    writer.finish().await.expect("finishes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_key_fields_make_the_key_and_except_key_leaves_them_out_of_the_value() {
    let topic = topic(1);
    let schema = id_name_schema();
    let sink = sink(
        &topic,
        &schema,
        serde_json::json!({"key.format": "json", "key.fields": "name;id",
            "value.fields-include": "EXCEPT_KEY"}),
    )
    .await;
    write(
        &sink,
        0,
        1,
        vec![id_name_batch(&[1, 2], &[Some("a"), None])],
    )
    .await;
    let reads = read_back(&topic);
    let pairs = keys_and_values(&reads);
    // The key's fields in `key.fields` order; a null field is left out as in every json value.
    assert_eq!(
        pairs,
        [
            (
                Some(&br#"{"name":"a","id":1}"#[..]),
                Some(&br#"{"v":10}"#[..])
            ),
            (Some(&br#"{"id":2}"#[..]), Some(&br#"{"v":20}"#[..])),
        ]
    );
    // A source of the same layout takes `id` and `name` from the key, `v` from the value.
    let read = read_with_source(
        &topic,
        &schema,
        serde_json::json!({"key.format": "json", "key.fields": "name;id",
            "value.fields-include": "EXCEPT_KEY"}),
    )
    .await;
    assert_eq!(read, [id_name_batch(&[1, 2], &[Some("a"), None])]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_key_is_the_column_bytes_and_all_keeps_it_in_the_value() {
    let topic = topic(1);
    let schema = id_name_schema();
    let sink = sink(
        &topic,
        &schema,
        serde_json::json!({"key.format": "raw", "key.fields": "name"}),
    )
    .await;
    write(
        &sink,
        0,
        1,
        vec![id_name_batch(&[1, 2, 3], &[Some("k1"), None, Some("")])],
    )
    .await;
    let reads = read_back(&topic);
    let pairs = keys_and_values(&reads);
    // A null raw key is no key; an empty string is an empty key.
    assert_eq!(
        pairs,
        [
            (
                Some(&b"k1"[..]),
                Some(&br#"{"id":1,"name":"k1","v":10}"#[..])
            ),
            (None, Some(&br#"{"id":2,"v":20}"#[..])),
            (Some(&b""[..]), Some(&br#"{"id":3,"name":"","v":30}"#[..])),
        ]
    );
}

/// The headers of one row: `(name, value)` pairs.
type HeaderRow<'a> = &'a [(&'a str, Option<&'a [u8]>)];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_and_timestamps_come_from_their_columns() {
    let topic = topic(1);
    let mut headers = MapBuilder::new(None, StringBuilder::new(), BinaryBuilder::new());
    let rows: [HeaderRow<'_>; 3] = [
        &[
            ("trace", Some(b"t-1")),
            ("flag", None),
            ("bin", Some(b"\x00\xff")),
        ],
        &[],
        &[("trace", Some(b"t-3"))],
    ];
    for row in rows {
        for (name, value) in row {
            headers.keys().append_value(name);
            headers.values().append_option(*value);
        }
        headers.append(true).expect("a map row");
    }
    let headers: ArrayRef = Arc::new(headers.finish());
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        ),
        Field::new("h", headers.data_type().clone(), true),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(vec![1, 2, 3])),
            Arc::new(
                TimestampMillisecondArray::from(vec![Some(1_600_000_000_123), None, Some(5)])
                    .with_timezone("UTC"),
            ),
            headers,
        ],
    )
    .expect("batch");
    let sink = sink(
        &topic,
        &schema,
        serde_json::json!({"metadata": {"ts": "timestamp", "h": "headers"}}),
    )
    .await;
    let before = now_ms();
    write(&sink, 0, 1, vec![batch.clone()]).await;
    let after = now_ms();
    let written = batch;
    let reads = read_back(&topic);
    assert_eq!(
        values(&reads),
        [
            (0, r#"{"id":1}"#.to_owned()),
            (0, r#"{"id":2}"#.to_owned()),
            (0, r#"{"id":3}"#.to_owned())
        ]
    );
    let header = |name: &str, value: Option<&[u8]>| (name.to_owned(), value.map(<[u8]>::to_vec));
    assert_eq!(
        reads[0].headers,
        [
            header("trace", Some(b"t-1")),
            header("flag", None),
            header("bin", Some(b"\x00\xff"))
        ]
    );
    assert_eq!(reads[1].headers, []);
    assert_eq!(reads[2].headers, [header("trace", Some(b"t-3"))]);
    assert_eq!(reads[0].timestamp, Timestamp::CreateTime(1_600_000_000_123));
    assert_eq!(reads[2].timestamp, Timestamp::CreateTime(5));
    // A null timestamp lets the producer stamp the record when it is written.
    match reads[1].timestamp {
        Timestamp::CreateTime(t) => assert!(
            (before..=after).contains(&t),
            "{t} not in {before}..={after}"
        ),
        other => panic!("expected a create time, got {other:?}"),
    }
    // A source with the same metadata columns gives the written rows back, the stamped time in
    // place of the null.
    let read = read_with_source(
        &topic,
        &schema,
        serde_json::json!({"metadata": {"ts": "timestamp", "h": "headers"}}),
    )
    .await;
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].column(0), written.column(0));
    assert_eq!(read[0].column(2), written.column(2));
    let ts = read[0]
        .column(1)
        .as_any()
        .downcast_ref::<TimestampMillisecondArray>()
        .expect("ts");
    let stamped = reads[1].timestamp.to_millis();
    assert_eq!(
        ts.iter().collect::<Vec<_>>(),
        [Some(1_600_000_000_123), stamped, Some(5)]
    );
    assert_eq!(ts.null_count(), 0);
}

fn now_ms() -> i64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis();
    i64::try_from(now).expect("ms")
}

/// Rows whose key is `name` = `k{i % 12}`, raw.
fn keyed_batch(ids: std::ops::Range<i64>) -> RecordBatch {
    let names: Vec<String> = ids.clone().map(|i| format!("k{}", i % 12)).collect();
    let names: Vec<Option<&str>> = names.iter().map(|n| Some(n.as_str())).collect();
    let ids: Vec<i64> = ids.collect();
    id_name_batch(&ids, &names)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_partitioner_places_keys_as_librdkafka_does() {
    let topic = topic(3);
    let schema = id_name_schema();
    let sink = sink(
        &topic,
        &schema,
        serde_json::json!({"key.format": "raw", "key.fields": "name",
            "sink.partitioner": "default"}),
    )
    .await;
    write(&sink, 0, 1, vec![keyed_batch(0..24), keyed_batch(24..36)]).await;
    let reads = read_back(&topic);
    assert_eq!(reads.len(), 36);
    // Where a plain producer with librdkafka's default partitioner puts each key.
    let reference = self::topic(3);
    let producer: FutureProducer = broker().client_config().create().expect("producer");
    let mut expected = std::collections::BTreeMap::new();
    for k in 0..12 {
        let key = format!("k{k}");
        let delivered = producer
            .send(
                FutureRecord::<str, str>::to(&reference)
                    .key(&key)
                    .payload("x"),
                PATIENCE,
            )
            .await
            .map_err(|(e, _)| e)
            .expect("delivered");
        expected.insert(key.into_bytes(), delivered.partition);
    }
    for r in &reads {
        let key = r.key.clone().expect("a key");
        assert_eq!(Some(&r.partition), expected.get(&key), "{r:?}");
    }
    let used: std::collections::BTreeSet<i32> = reads.iter().map(|r| r.partition).collect();
    assert!(used.len() > 1, "12 keys all in one partition: {used:?}");
    // Each partition holds its keys' rows in the order they were written.
    for p in used {
        let ids: Vec<i64> = reads
            .iter()
            .filter(|r| r.partition == p)
            .map(id_of)
            .collect();
        assert!(ids.is_sorted(), "partition {p}: {ids:?}");
    }
}

/// The `id` of a json value.
fn id_of(r: &Read) -> i64 {
    let v: serde_json::Value =
        serde_json::from_slice(r.value.as_deref().expect("value")).expect("json");
    v["id"].as_i64().expect("id")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fixed_partitioner_writes_subtask_i_to_partition_i_mod_n() {
    let topic = topic(3);
    let schema = id_name_schema();
    let sink = sink(
        &topic,
        &schema,
        serde_json::json!({"key.format": "raw", "key.fields": "name",
            "sink.partitioner": "fixed"}),
    )
    .await;
    // Subtasks 1 and 4 of 5 on 3 partitions: partitions 1 and 1; subtask 2: partition 2.
    write(&sink, 1, 5, vec![keyed_batch(0..5)]).await;
    write(&sink, 4, 5, vec![keyed_batch(100..103)]).await;
    write(&sink, 2, 5, vec![keyed_batch(200..202)]).await;
    let reads = read_back(&topic);
    let placed: Vec<(i32, i64, i64)> = reads
        .iter()
        .map(|r| (r.partition, r.offset, id_of(r)))
        .collect();
    assert_eq!(
        placed,
        [
            (1, 0, 0),
            (1, 1, 1),
            (1, 2, 2),
            (1, 3, 3),
            (1, 4, 4),
            (1, 5, 100),
            (1, 6, 101),
            (1, 7, 102),
            (2, 0, 200),
            (2, 1, 201)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_round_robin_partitioner_takes_the_partitions_in_turn() {
    let topic = topic(3);
    let schema = id_name_schema();
    let sink = sink(
        &topic,
        &schema,
        serde_json::json!({"key.format": "raw", "key.fields": "name",
            "sink.partitioner": "round-robin"}),
    )
    .await;
    // The turn goes on across batches.
    write(&sink, 0, 1, vec![keyed_batch(0..4), keyed_batch(4..8)]).await;
    let reads = read_back(&topic);
    let placed: Vec<(i32, i64, i64)> = reads
        .iter()
        .map(|r| (r.partition, r.offset, id_of(r)))
        .collect();
    assert_eq!(
        placed,
        [
            (0, 0, 0),
            (0, 1, 3),
            (0, 2, 6),
            (1, 0, 1),
            (1, 1, 4),
            (1, 2, 7),
            (2, 0, 2),
            (2, 1, 5)
        ]
    );
}

/// The ids of `topic` in partition and offset order.
fn ids(topic: &str) -> Vec<i64> {
    read_back(topic).iter().map(id_of).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_least_once_has_every_record_in_kafka_at_each_barrier() {
    let topic = topic(1);
    let schema = id_name_schema();
    let sink = sink(
        &topic,
        &schema,
        serde_json::json!({"sink.delivery-guarantee": "at-least-once"}),
    )
    .await;
    assert_eq!(sink.capabilities(), [SinkCapability::AtLeastOnce]);
    let mut writer = sink.create_writer(&ctx(0, 1)).await.expect("writer");
    writer
        .write_batch(keyed_batch(0..500))
        .await
        .expect("writes");
    writer
        .write_batch(keyed_batch(500..1000))
        .await
        .expect("writes");
    writer.flush_at_barrier(Epoch(1)).await.expect("flushes");
    // Delivered when the barrier passed, before the writer finishes.
    assert_eq!(ids(&topic), (0..1000).collect::<Vec<_>>());
    writer
        .write_batch(keyed_batch(1000..1200))
        .await
        .expect("writes");
    writer.flush_at_barrier(Epoch(2)).await.expect("flushes");
    assert_eq!(ids(&topic), (0..1200).collect::<Vec<_>>());
    writer
        .write_batch(keyed_batch(1200..1300))
        .await
        .expect("writes");
    writer.finish().await.expect("finishes");
    assert_eq!(ids(&topic), (0..1300).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn none_writes_every_record_by_the_end() {
    let topic = topic(2);
    let schema = id_name_schema();
    let sink = sink(
        &topic,
        &schema,
        serde_json::json!({"sink.delivery-guarantee": "none",
            "sink.partitioner": "round-robin"}),
    )
    .await;
    assert_eq!(sink.capabilities(), [SinkCapability::BestEffort]);
    let mut writer = sink.create_writer(&ctx(0, 1)).await.expect("writer");
    for start in (0..2000).step_by(250) {
        writer
            .write_batch(keyed_batch(start..start + 250))
            .await
            .expect("writes");
        writer.flush_at_barrier(Epoch(1)).await.expect("barrier");
    }
    writer.finish().await.expect("finishes");
    let reads = read_back(&topic);
    let even: Vec<i64> = reads
        .iter()
        .filter(|r| r.partition == 0)
        .map(id_of)
        .collect();
    let odd: Vec<i64> = reads
        .iter()
        .filter(|r| r.partition == 1)
        .map(id_of)
        .collect();
    assert_eq!(even, (0..2000).step_by(2).collect::<Vec<_>>());
    assert_eq!(odd, (1..2000).step_by(2).collect::<Vec<_>>());
}
