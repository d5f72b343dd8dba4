//! SQL jobs on a real Kafka broker (`weir_testkit::kafka`, one per test binary): bounded reads
//! with metadata columns, exactly-once Kafka-to-Kafka through checkpoints and a restore,
//! at-least-once, windows into Parquet, and a clear error when the broker cannot be reached.

use crate::support::{format_rows, read_published_parts};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use std::collections::BTreeMap;
use std::time::Duration;
use weir::{CheckpointLocation, Engine, RestoreFrom, RunOptions, RunSummary};
use weir_testkit::kafka::KafkaBroker;
use weir_testkit::unique_name;

/// Bids as JSON into `topic`, `n` of them over its partitions by key; event times 10 ms apart.
fn produce_bids(broker: &KafkaBroker, topic: &str, n: u64) {
    let producer: BaseProducer = broker.client_config().create().expect("producer");
    for i in 0..n {
        let value = format!(
            r#"{{"id":{i},"auction":{},"price":{},"ts":{}}}"#,
            i % 7,
            i % 100,
            1_700_000_000_000u64 + i * 10
        );
        let key = format!("a{}", i % 7);
        loop {
            match producer.send(BaseRecord::to(topic).key(&key).payload(&value)) {
                Ok(()) => break,
                Err((_, _)) => {
                    producer.poll(Duration::from_millis(10));
                }
            }
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
}

/// Runs `sql` to its end with checkpoints in `checkpoints`.
pub(crate) async fn run_sql(
    sql: &str,
    checkpoints: &std::path::Path,
    restore: Option<RestoreFrom>,
) -> RunSummary {
    let engine = Engine::new();
    let job = engine
        .compile_sql(sql, "kafka.sql")
        .await
        .expect("compiles");
    let prepared = engine
        .prepare(&job.spec, Some("kafka.sql"))
        .await
        .expect("prepares");
    let options = RunOptions {
        checkpoint_storage: Some(CheckpointLocation::local(checkpoints).expect("storage")),
        restore,
        ..RunOptions::default()
    };
    engine
        .start_with(prepared, options)
        .await
        .expect("starts")
        .wait()
        .await
        .expect("runs")
}

fn values(broker: &KafkaBroker, topic: &str) -> Vec<String> {
    let mut out: Vec<String> = broker
        .read_committed(topic)
        .expect("reads")
        .into_iter()
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
        .collect();
    out.sort();
    out
}

fn kafka_to_kafka_sql(
    servers: &str,
    input: &str,
    output: &str,
    guarantee: &str,
    prefix: &str,
) -> String {
    format!(
        "SET 'job.name' = 'k2k';\n\
         SET 'parallelism' = '2';\n\
         SET 'checkpoint.interval' = '50ms';\n\
         CREATE TABLE bids (id BIGINT, auction BIGINT, price BIGINT,\n\
           part INT METADATA FROM 'partition' VIRTUAL,\n\
           kts TIMESTAMP(3) METADATA FROM 'timestamp' VIRTUAL\n\
         ) WITH ('connector' = 'kafka', 'topic' = '{input}',\n\
           'properties.bootstrap.servers' = '{servers}', 'format' = 'json',\n\
           'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset',\n\
           'scan.batch-size' = '50');\n\
         CREATE TABLE out (id BIGINT, price BIGINT, part INT) WITH ('connector' = 'kafka',\n\
           'topic' = '{output}', 'properties.bootstrap.servers' = '{servers}',\n\
           'format' = 'json', 'sink.delivery-guarantee' = '{guarantee}',\n\
           'sink.transactional-id-prefix' = '{prefix}');\n\
         INSERT INTO out SELECT id, price, part FROM bids WHERE price >= 50 AND kts IS NOT NULL;"
    )
}

/// The JSON the sink writes for every bid with a price of at least 50.
fn expected(n: u64, partition_of: &BTreeMap<u64, i32>) -> Vec<String> {
    let mut want: Vec<String> = (0..n)
        .filter(|i| i % 100 >= 50)
        .map(|i| {
            format!(
                r#"{{"id":{i},"price":{},"part":{}}}"#,
                i % 100,
                partition_of[&i]
            )
        })
        .collect();
    want.sort();
    want
}

/// Which partition each bid landed in (librdkafka's default partitioner hashes the key).
fn partitions_of(broker: &KafkaBroker, topic: &str) -> BTreeMap<u64, i32> {
    broker
        .read_committed(topic)
        .expect("reads input")
        .into_iter()
        .map(|r| {
            let v: serde_json::Value =
                serde_json::from_slice(r.value.as_deref().unwrap_or_default()).expect("json");
            (v["id"].as_u64().expect("id"), r.partition)
        })
        .collect()
}

/// A Kafka-to-Kafka job over fresh topics (`partitions` in, `out_partitions` out) with `n`
/// bids produced, its SQL with sink guarantee `guarantee`, and the values it must write.
struct KafkaToKafka {
    broker: &'static KafkaBroker,
    output: String,
    sql: String,
    want: Vec<String>,
    dir: tempfile::TempDir,
}

fn kafka_to_kafka(partitions: i32, out_partitions: i32, n: u64, guarantee: &str) -> KafkaToKafka {
    let broker = KafkaBroker::shared().expect("the Kafka test broker");
    let (input, output) = (unique_name("bids"), unique_name("out"));
    broker
        .create_topic(&input, partitions)
        .expect("input topic");
    broker
        .create_topic(&output, out_partitions)
        .expect("output topic");
    produce_bids(broker, &input, n);
    let want = expected(n, &partitions_of(broker, &input));
    let sql = kafka_to_kafka_sql(
        &broker.bootstrap_servers(),
        &input,
        &output,
        guarantee,
        &unique_name("eo"),
    );
    KafkaToKafka {
        broker,
        output,
        sql,
        want,
        dir: tempfile::tempdir().expect("tmp"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_kafka_to_kafka_with_checkpoints_and_a_restore() {
    let job = kafka_to_kafka(3, 2, 2_000, "exactly-once");
    let summary = run_sql(&job.sql, job.dir.path(), None).await;
    assert!(summary.checkpoints.expect("counters").completed >= 1);
    assert_eq!(values(job.broker, &job.output), job.want);
    assert_eq!(summary.metrics.sink_rows(), job.want.len() as u64);

    // A restore from the last checkpoint finds every partition read to its end: nothing more.
    let summary = run_sql(&job.sql, job.dir.path(), Some(RestoreFrom::Latest)).await;
    let restored = summary.checkpoints.expect("counters").restored_from;
    assert!(restored.is_some());
    assert_eq!(
        values(job.broker, &job.output),
        job.want,
        "nothing written twice"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_least_once_writes_every_record() {
    let job = kafka_to_kafka(2, 1, 500, "at-least-once");
    run_sql(&job.sql, job.dir.path(), None).await;
    assert_eq!(values(job.broker, &job.output), job.want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_windows_into_parquet() {
    let broker = KafkaBroker::shared().expect("the Kafka test broker");
    let input = unique_name("bids");
    broker.create_topic(&input, 3).expect("input topic");
    let n = 3_000;
    produce_bids(broker, &input, n);
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("out");
    let sql = format!(
        "SET 'job.name' = 'k2p';\n\
         SET 'parallelism' = '2';\n\
         SET 'checkpoint.interval' = '50ms';\n\
         CREATE TABLE bids (id BIGINT, auction BIGINT, price BIGINT, ts BIGINT,\n\
           et AS TO_TIMESTAMP_MILLIS(ts),\n\
           WATERMARK FOR et AS et - INTERVAL '60' SECOND\n\
         ) WITH ('connector' = 'kafka', 'topic' = '{input}',\n\
           'properties.bootstrap.servers' = '{servers}', 'format' = 'json',\n\
           'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset');\n\
         CREATE TABLE out (auction BIGINT, window_start TIMESTAMP(3), bids BIGINT) WITH (\n\
           'connector' = 'filesystem', 'path' = '{out}', 'format' = 'parquet');\n\
         INSERT INTO out SELECT auction, window_start, COUNT(*) AS bids\n\
           FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(et), INTERVAL '10' SECOND))\n\
           GROUP BY auction, window_start, window_end;",
        servers = broker.bootstrap_servers(),
        out = out.display(),
    );
    run_sql(&sql, &dir.path().join("cp"), None).await;
    let rows = format_rows(&read_published_parts(&out));
    // 10 s windows hold 1,000 bids (10 ms apart), spread over 7 auctions by id: per auction,
    // the counts of its windows in time order.
    let want: Vec<(u64, Vec<u64>)> = (0..7u64)
        .map(|a| {
            let counts = (0..n / 1_000)
                .map(|w| (w * 1_000..(w + 1) * 1_000).filter(|i| i % 7 == a).count() as u64)
                .collect();
            (a, counts)
        })
        .collect();
    // Rows are `auction | window_start | bids`; ISO window starts sort in time order.
    let mut parsed: Vec<(u64, String, u64)> = rows
        .iter()
        .map(|r| {
            let f: Vec<&str> = r.split(" | ").collect();
            assert_eq!(f.len(), 3, "{r}");
            (
                f[0].parse().expect("auction"),
                f[1].to_owned(),
                f[2].parse().expect("bids"),
            )
        })
        .collect();
    parsed.sort();
    let got: Vec<(u64, Vec<u64>)> = (0..7u64)
        .map(|a| {
            let counts = parsed
                .iter()
                .filter(|(auction, _, _)| *auction == a)
                .map(|(_, _, c)| *c)
                .collect();
            (a, counts)
        })
        .collect();
    assert_eq!(got, want, "{rows:?}");
    assert_eq!(parsed.len(), 7 * (n / 1_000) as usize, "{rows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_cannot_be_reached_is_named() {
    // A port that nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let sql = format!(
        "CREATE TABLE bids (id BIGINT) WITH ('connector' = 'kafka', 'topic' = 'bids',\n\
           'properties.bootstrap.servers' = '127.0.0.1:{port}', 'format' = 'json',\n\
           'scan.startup.mode' = 'earliest-offset');\n\
         CREATE TABLE out (id BIGINT) WITH ('connector' = 'blackhole');\n\
         INSERT INTO out SELECT id FROM bids;"
    );
    let engine = Engine::new();
    let job = engine
        .compile_sql(&sql, "down.sql")
        .await
        .expect("compiles");
    let err = engine
        .prepare(&job.spec, Some("down.sql"))
        .await
        .expect_err("no broker");
    let message = err.to_string();
    assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
    assert!(message.contains("bids"), "{message}");
}

/// An example of `examples/` against the test broker and S3 server: `n` bids (5 auctions,
/// event times 50 ms apart) in a fresh topic, and the example's addresses, topic and bucket
/// replaced by the test's.
fn example_sql(
    file: &str,
    broker: &KafkaBroker,
    s3: &weir_testkit::s3::S3Server,
    bucket: &str,
    n: u64,
) -> String {
    let topic = unique_name("bids");
    broker.create_topic(&topic, 2).expect("topic");
    let producer: BaseProducer = broker.client_config().create().expect("producer");
    for i in 0..n {
        let value = format!(
            r#"{{"auction":{},"bidder":{i},"price":{},"date_time":{}}}"#,
            i % 5,
            i % 300,
            1_700_000_000_000u64 + i * 50
        );
        producer
            .send(BaseRecord::<(), String>::to(&topic).payload(&value))
            .expect("queued");
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples")
            .join(file),
    )
    .expect("the example")
    .replace("127.0.0.1:9092", &broker.bootstrap_servers())
    .replace("http://127.0.0.1:9000", s3.endpoint())
    .replace("weir-example", bucket)
    .replace("'topic' = 'bids'", &format!("'topic' = '{topic}'"))
}

/// Runs an example's `sql` in process to its end, as `weir run` does; it must have taken a
/// checkpoint.
async fn run_checkpointed_example(sql: &str) {
    let engine = Engine::new();
    let job = engine
        .compile_sql(sql, "example.sql")
        .await
        .expect("compiles");
    let prepared = engine
        .prepare(&job.spec, Some("example.sql"))
        .await
        .expect("prepares");
    let summary = engine
        .start_with(prepared, RunOptions::default())
        .await
        .expect("starts")
        .wait()
        .await
        .expect("runs");
    assert!(summary.checkpoints.expect("counters").completed >= 1);
}

/// `examples/kafka-bids-to-s3.sql` as the README runs it, against the test broker and the test
/// S3 server (their addresses, a fresh topic and bucket substituted into the script).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kafka_to_s3_example_runs() {
    use futures::TryStreamExt;
    use object_store::ObjectStoreExt;
    use weir_testkit::s3 as server;

    let broker = KafkaBroker::shared().expect("the Kafka test broker");
    let s3 = server::server().expect("the S3 test server");
    let bucket = s3.create_bucket("example").expect("bucket");
    let n = 1_000u64;
    let sql = example_sql("kafka-bids-to-s3.sql", broker, s3, &bucket, n);
    run_checkpointed_example(&sql).await;

    let storage = CheckpointLocation::s3(
        &format!("s3://{bucket}/"),
        &weir::api::S3Options {
            endpoint: Some(s3.endpoint().to_owned()),
            region: Some(server::REGION.to_owned()),
            access_key_id: Some(server::ACCESS_KEY_ID.to_owned()),
            secret_access_key: Some(server::SECRET_ACCESS_KEY.to_owned()),
            path_style: Some(true),
            ..Default::default()
        },
    )
    .expect("store");
    let parts: Vec<_> = storage
        .store
        .list(Some(&object_store::path::Path::from("bids-per-auction")))
        .try_collect()
        .await
        .expect("lists");
    let mut total = 0u64;
    for part in parts.iter().filter(|m| {
        m.location
            .filename()
            .is_some_and(|f| f.starts_with("part-"))
    }) {
        let bytes = storage
            .store
            .get(&part.location)
            .await
            .expect("get")
            .bytes()
            .await
            .expect("body");
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
            .expect("parquet")
            .build()
            .expect("reader");
        for batch in reader {
            let batch = batch.expect("batch");
            let bids = batch
                .column_by_name("bids")
                .expect("bids column")
                .as_any()
                .downcast_ref::<arrow::array::Int64Array>()
                .expect("int64");
            total += bids.iter().flatten().map(|b| b as u64).sum::<u64>();
        }
    }
    assert_eq!(total, n, "every bid counted once, in Parquet on S3");
}

/// `examples/kafka-bids-to-delta.sql` as the README runs it, against the test broker and S3
/// server, its Delta table then read by the Python `deltalake` package: every bid counted once,
/// partitioned by each window's day and hour as the example computes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kafka_to_delta_example_runs() {
    use weir_testkit::delta_readers::{DeltaS3, DeltaStorage, delta_python_rows};
    use weir_testkit::s3 as server;

    let broker = KafkaBroker::shared().expect("the Kafka test broker");
    let s3 = server::server().expect("the S3 test server");
    let bucket = s3.create_bucket("example").expect("bucket");
    let n = 1_000u64;
    let sql = example_sql("kafka-bids-to-delta.sql", broker, s3, &bucket, n);
    run_checkpointed_example(&sql).await;

    let table = format!("s3://{bucket}/bids-per-auction");
    let storage = DeltaStorage::S3(DeltaS3::for_server(s3));
    let read = tokio::task::spawn_blocking(move || delta_python_rows(&table, None, &storage))
        .await
        .expect("joins")
        .expect("the Python deltalake reader reads the table");
    let total: u64 = read.column("bids").iter().filter_map(|b| b.as_u64()).sum();
    assert_eq!(total, n, "every bid counted once, in the Delta table on S3");
    assert_eq!(read.partition_columns, ["dt", "hour"]);
    // Event times 1_700_000_000_000 ms + 50 ms x 1,000: 2023-11-14 22:13:20 to 22:14:10 UTC.
    for row in &read.rows {
        assert_eq!(row["dt"], "2023-11-14", "{row:?}");
        assert_eq!(row["hour"], 22, "{row:?}");
    }
}
