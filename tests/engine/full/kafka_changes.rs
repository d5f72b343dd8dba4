//! Changes through a real Kafka broker (`weir_testkit::kafka`): an upsert topic read as a
//! changelog (updates and tombstones) and aggregated into an upsert topic, and Debezium change
//! events (snapshot reads, creates, updates, deletes) aggregated likewise, both exactly once
//! with checkpoints and a restore. Each output topic, read `read_committed` and materialized key
//! by key (the last value of a key; a tombstone deletes it), must equal the aggregation of the
//! final input table computed here; so must an upsert topic the broker has compacted (older
//! values and tombstones gone, offsets with gaps). Another test joins a Kafka stream with an
//! upsert topic with a watermark as the versioned side of a temporal join, and one writes an
//! aggregation as Debezium events whose replay must leave the final table.

use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use std::collections::BTreeMap;
use std::time::Duration;
use weir::{Engine, RestoreFrom, RunSummary};
use weir_testkit::kafka::KafkaBroker;
use weir_testkit::unique_name;

/// Sends `(key, value)` records to `topic` (a `None` value is a tombstone).
fn produce(broker: &KafkaBroker, topic: &str, records: &[(String, Option<String>)]) {
    let producer: BaseProducer = broker.client_config().create().expect("producer");
    for (key, value) in records {
        loop {
            let mut record = BaseRecord::to(topic).key(key);
            if let Some(value) = value {
                record = record.payload(value);
            }
            match producer.send(record) {
                Ok(()) => break,
                Err(_) => {
                    producer.poll(Duration::from_millis(10));
                }
            }
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
}

/// Runs `sql` to its end with checkpoints in `dir`, restoring the latest one with `restore`.
async fn run(sql: &str, dir: &std::path::Path, restore: bool) -> RunSummary {
    super::kafka::run_sql(sql, dir, restore.then_some(RestoreFrom::Latest)).await
}

/// The table an upsert topic holds: per key, its last value unless a tombstone followed.
fn materialized(broker: &KafkaBroker, topic: &str) -> BTreeMap<String, String> {
    let mut table = BTreeMap::new();
    for record in broker.read_committed(topic).expect("reads") {
        let key = String::from_utf8(record.key.expect("a key")).expect("utf-8");
        match record.value {
            Some(v) => {
                table.insert(key, String::from_utf8(v).expect("utf-8"));
            }
            None => {
                table.remove(&key);
            }
        }
    }
    table
}

/// The SQL of a job reading `source_ddl`'s table `t` and writing per-bucket counts and sums
/// into the upsert topic `output`.
fn job_sql(servers: &str, source_ddl: &str, output: &str) -> String {
    format!(
        "SET 'parallelism' = '2';\n\
         SET 'checkpoint.interval' = '30ms';\n\
         {source_ddl}\n\
         CREATE TABLE totals (bucket BIGINT, n BIGINT, total BIGINT,\n\
           PRIMARY KEY (bucket) NOT ENFORCED\n\
         ) WITH ('connector' = 'upsert-kafka', 'topic' = '{output}',\n\
           'properties.bootstrap.servers' = '{servers}', 'key.format' = 'json',\n\
           'value.format' = 'json', 'sink.delivery-guarantee' = 'exactly-once',\n\
           'sink.transactional-id-prefix' = '{}');\n\
         INSERT INTO totals SELECT score % 4, COUNT(*), SUM(score) FROM t GROUP BY score % 4;",
        unique_name("changes")
    )
}

/// What the output topic must hold for the final table `rows` (id -> score).
fn expected(rows: &BTreeMap<i64, i64>) -> BTreeMap<String, String> {
    let mut buckets: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    for score in rows.values() {
        let b = buckets.entry(score % 4).or_default();
        b.0 += 1;
        b.1 += score;
    }
    buckets
        .into_iter()
        .map(|(bucket, (n, total))| {
            (
                format!(r#"{{"bucket":{bucket}}}"#),
                format!(r#"{{"bucket":{bucket},"n":{n},"total":{total}}}"#),
            )
        })
        .collect()
}

/// Four rounds of changes to 60 users keyed `{"id":n}`: the first 50 updated every round, every
/// seventh of them deleted in the third round (a tombstone) and half of those re-created in the
/// fourth, the last 10 written once; and the final table (id -> score).
#[allow(clippy::type_complexity)]
fn user_rounds() -> (Vec<Vec<(String, Option<String>)>>, BTreeMap<i64, i64>) {
    let mut final_rows: BTreeMap<i64, i64> = BTreeMap::new();
    let mut rounds = Vec::new();
    for round in 0..4_i64 {
        let mut records = Vec::new();
        for id in 0..60_i64 {
            let key = format!(r#"{{"id":{id}}}"#);
            if round > 0 && id >= 50 {
                continue;
            }
            if round == 2 && id % 7 == 0 {
                records.push((key, None));
                final_rows.remove(&id);
                continue;
            }
            if round == 3 && id % 14 == 0 {
                continue;
            }
            let score = (id * 31 + round * 17) % 50;
            records.push((key, Some(format!(r#"{{"name":"u{id}","score":{score}}}"#))));
            final_rows.insert(id, score);
        }
        rounds.push(records);
    }
    (rounds, final_rows)
}

/// Runs `sql` (with checkpoints) and checks that upsert topic `output` holds `want`; then
/// restores its last checkpoint, which must write nothing more.
async fn run_then_restore(
    broker: &KafkaBroker,
    sql: &str,
    output: &str,
    want: &BTreeMap<String, String>,
) {
    let dir = tempfile::tempdir().expect("tmp");
    let summary = run(sql, dir.path(), false).await;
    assert!(summary.checkpoints.expect("counters").completed >= 1);
    assert_eq!(&materialized(broker, output), want);
    let before = broker.read_committed(output).expect("reads").len();
    run(sql, dir.path(), true).await;
    assert_eq!(broker.read_committed(output).expect("reads").len(), before);
    assert_eq!(&materialized(broker, output), want);
}

/// The upsert-kafka table `t` over `topic`, read from its start to its end.
fn users_ddl(servers: &str, topic: &str) -> String {
    format!(
        "CREATE TABLE t (id BIGINT, name STRING, score BIGINT, PRIMARY KEY (id) NOT ENFORCED)\n\
         WITH ('connector' = 'upsert-kafka', 'topic' = '{topic}',\n\
           'properties.bootstrap.servers' = '{servers}', 'key.format' = 'json',\n\
           'value.format' = 'json', 'value.fields-include' = 'EXCEPT_KEY',\n\
           'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset',\n\
           'scan.batch-size' = '16');"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upsert_topic_aggregated_into_an_upsert_topic_keeps_every_key_exact() {
    let broker = KafkaBroker::shared().expect("the Kafka test broker");
    let (input, output) = (unique_name("users"), unique_name("totals"));
    broker.create_topic(&input, 3).expect("input topic");
    broker.create_topic(&output, 2).expect("output topic");
    let (rounds, final_rows) = user_rounds();
    let records: Vec<_> = rounds.into_iter().flatten().collect();
    produce(broker, &input, &records);
    let servers = broker.bootstrap_servers();
    let sql = job_sql(&servers, &users_ddl(&servers, &input), &output);
    run_then_restore(broker, &sql, &output, &expected(&final_rows)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_upsert_topic_reads_as_the_table_it_keeps() {
    let broker = KafkaBroker::shared().expect("the Kafka test broker");
    let (input, output) = (unique_name("compacted"), unique_name("totals"));
    // Segments roll 100 ms after their first record, and the cleaner compacts any of them at
    // once and drops tombstones as soon as it has seen them.
    broker
        .create_topic_with(
            &input,
            2,
            &[
                ("cleanup.policy", "compact"),
                ("segment.ms", "100"),
                ("min.cleanable.dirty.ratio", "0.001"),
                ("min.compaction.lag.ms", "0"),
                ("delete.retention.ms", "0"),
            ],
        )
        .expect("input topic");
    broker.create_topic(&output, 2).expect("output topic");
    let (rounds, final_rows) = user_rounds();
    let written: usize = rounds.iter().map(Vec::len).sum();
    // One round per segment: the first three rounds can be compacted (the last segment, being
    // written, never is).
    for round in &rounds {
        produce(broker, &input, round);
        std::thread::sleep(Duration::from_millis(400));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let kept = loop {
        let kept = broker.read_committed(&input).expect("reads");
        if kept.len() < written {
            break kept;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the broker did not compact {input} within 60 s ({written} records kept)"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    // Compaction leaves gaps in the offsets the source must read across.
    let gaps = kept
        .windows(2)
        .filter(|w| w[0].partition == w[1].partition && w[1].offset > w[0].offset + 1)
        .count();
    assert!(
        gaps > 0,
        "{} records kept of {written}, without gaps",
        kept.len()
    );
    let servers = broker.bootstrap_servers();
    let sql = job_sql(&servers, &users_ddl(&servers, &input), &output);
    let dir = tempfile::tempdir().expect("tmp");
    run(&sql, dir.path(), false).await;
    assert_eq!(materialized(broker, &output), expected(&final_rows));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aggregation_written_as_debezium_events_replays_to_the_final_table() {
    let broker = KafkaBroker::shared().expect("the Kafka test broker");
    let (input, output) = (unique_name("users"), unique_name("events"));
    broker.create_topic(&input, 2).expect("input topic");
    broker.create_topic(&output, 2).expect("output topic");
    let (rounds, final_rows) = user_rounds();
    produce(broker, &input, &rounds.concat());
    let servers = broker.bootstrap_servers();
    let sql = format!(
        "SET 'parallelism' = '2';\n\
         SET 'checkpoint.interval' = '30ms';\n\
         {}\n\
         CREATE TABLE totals (bucket BIGINT, n BIGINT, total BIGINT)\n\
         WITH ('connector' = 'kafka', 'topic' = '{output}',\n\
           'properties.bootstrap.servers' = '{servers}', 'format' = 'debezium-json',\n\
           'sink.delivery-guarantee' = 'exactly-once',\n\
           'sink.transactional-id-prefix' = '{}');\n\
         INSERT INTO totals SELECT score % 4, COUNT(*), SUM(score) FROM t GROUP BY score % 4;",
        users_ddl(&servers, &input),
        unique_name("debezium-out")
    );
    let dir = tempfile::tempdir().expect("tmp");
    run(&sql, dir.path(), false).await;
    // `c` adds its `after` and `d` takes its `before` away: summed over every committed event
    // (in any order, as partitions interleave), each final row must be left once.
    let mut table: BTreeMap<String, i64> = BTreeMap::new();
    for record in broker.read_committed(&output).expect("reads") {
        let event: serde_json::Value =
            serde_json::from_slice(&record.value.expect("a value")).expect("json");
        let (row, sign) = match event["op"].as_str() {
            Some("c") => (&event["after"], 1),
            Some("d") => (&event["before"], -1),
            other => panic!("an event with op {other:?}: {event}"),
        };
        *table.entry(row.to_string()).or_default() += sign;
    }
    table.retain(|_, n| *n != 0);
    let want: BTreeMap<String, i64> = expected(&final_rows)
        .into_values()
        .map(|row| (row, 1))
        .collect();
    assert_eq!(table, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debezium_events_aggregated_into_an_upsert_topic_equal_the_final_table() {
    let broker = KafkaBroker::shared().expect("the Kafka test broker");
    let (input, output) = (unique_name("cdc"), unique_name("totals"));
    broker.create_topic(&input, 2).expect("input topic");
    broker.create_topic(&output, 2).expect("output topic");
    // A snapshot of 40 rows, then updates, deletes and new rows, as Debezium writes them
    // (with its `source` block and a tombstone after each delete).
    let mut table: BTreeMap<i64, i64> = BTreeMap::new();
    let mut records: Vec<(String, Option<String>)> = Vec::new();
    let row = |id: i64, score: i64| format!(r#"{{"id":{id},"score":{score}}}"#);
    let source = r#""source":{"connector":"postgresql","db":"shop","table":"t"},"ts_ms":1"#;
    for id in 0..40_i64 {
        let score = id * 7 % 23;
        records.push((
            format!("{id}"),
            Some(format!(
                r#"{{"before":null,"after":{},"op":"r",{source}}}"#,
                row(id, score)
            )),
        ));
        table.insert(id, score);
    }
    for step in 0..120_i64 {
        let id = step * 13 % 50;
        let event = match table.get(&id).copied() {
            Some(old) if step % 5 == 0 => {
                table.remove(&id);
                records.push((
                    format!("{id}"),
                    Some(format!(
                        r#"{{"before":{},"after":null,"op":"d",{source}}}"#,
                        row(id, old)
                    )),
                ));
                None
            }
            Some(old) => {
                let new = (old + step) % 37;
                table.insert(id, new);
                Some(format!(
                    r#"{{"before":{},"after":{},"op":"u",{source}}}"#,
                    row(id, old),
                    row(id, new)
                ))
            }
            None => {
                table.insert(id, step % 19);
                Some(format!(
                    r#"{{"before":null,"after":{},"op":"c",{source}}}"#,
                    row(id, step % 19)
                ))
            }
        };
        // Debezium keys its events by the row's key, so a key's events stay in order.
        records.push((format!("{id}"), event));
    }
    produce(broker, &input, &records);
    let servers = broker.bootstrap_servers();
    let ddl = format!(
        "CREATE TABLE t (id BIGINT, score BIGINT)\n\
         WITH ('connector' = 'kafka', 'topic' = '{input}',\n\
           'properties.bootstrap.servers' = '{servers}', 'format' = 'debezium-json',\n\
           'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset',\n\
           'scan.batch-size' = '16');"
    );
    let sql = job_sql(&servers, &ddl, &output);
    run_then_restore(broker, &sql, &output, &expected(&table)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_join_the_rate_an_upsert_topic_held_at_their_time() {
    let broker = KafkaBroker::shared().expect("the Kafka test broker");
    let (rates, orders) = (unique_name("rates"), unique_name("orders"));
    broker.create_topic(&rates, 2).expect("rates topic");
    broker.create_topic(&orders, 2).expect("orders topic");
    // Rates per currency: a version every 100 ms of event time; gbp deleted for a while
    // (tombstones) and then back.
    let mut versions: BTreeMap<String, Vec<(i64, Option<i64>)>> = BTreeMap::new();
    let mut records = Vec::new();
    for step in 0..40_i64 {
        for (c, currency) in ["eur", "usd", "gbp"].iter().enumerate() {
            let ts = step * 100 + c as i64;
            let key = format!(r#"{{"currency":"{currency}"}}"#);
            let rate = if *currency == "gbp" && (10..15).contains(&step) {
                None
            } else {
                Some(100 + step * 3 + c as i64)
            };
            let history = versions.entry(currency.to_string()).or_default();
            match rate {
                Some(_) => history.push((ts, rate)),
                // A delete is dated by the deleted row's time, as in Flink: the key's last
                // version becomes a deletion; a delete of a deleted key changes nothing.
                None => {
                    if let Some(last) = history.last_mut() {
                        last.1 = None;
                    }
                }
            }
            let value = rate.map(|r| format!(r#"{{"rate":{r},"ts":{ts}}}"#));
            records.push((key, value));
        }
    }
    produce(broker, &rates, &records);
    // Orders: one every 7 ms of event time, spread over the currencies, all in order.
    let mut order_records = Vec::new();
    let mut want = Vec::new();
    for id in 0..500_i64 {
        let ts = 50 + id * 7;
        let currency = ["eur", "usd", "gbp"][(id % 3) as usize];
        order_records.push((
            format!("{id}"),
            Some(format!(
                r#"{{"id":{id},"currency":"{currency}","ts":{ts}}}"#
            )),
        ));
        // The version at or before the order's time; a tombstone there (or none) joins nothing.
        let rate = versions[currency]
            .iter()
            .rev()
            .find(|(t, _)| *t <= ts)
            .and_then(|(_, r)| *r);
        if let Some(rate) = rate {
            want.push(format!("{id} {currency} {rate}"));
        }
    }
    produce(broker, &orders, &order_records);
    let servers = broker.bootstrap_servers();
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("priced");
    let sql = format!(
        "SET 'parallelism' = '2';\n\
         CREATE TABLE rates (currency STRING NOT NULL, rate BIGINT, ts BIGINT,\n\
           et AS TO_TIMESTAMP_MILLIS(ts), WATERMARK FOR et AS et - INTERVAL '0.2' SECOND,\n\
           PRIMARY KEY (currency) NOT ENFORCED)\n\
         WITH ('connector' = 'upsert-kafka', 'topic' = '{rates}',\n\
           'properties.bootstrap.servers' = '{servers}', 'key.format' = 'json',\n\
           'value.format' = 'json', 'value.fields-include' = 'EXCEPT_KEY',\n\
           'scan.bounded.mode' = 'latest-offset', 'scan.batch-size' = '7');\n\
         CREATE TABLE orders (id BIGINT, currency STRING NOT NULL, ts BIGINT,\n\
           et AS TO_TIMESTAMP_MILLIS(ts), WATERMARK FOR et AS et - INTERVAL '0.2' SECOND)\n\
         WITH ('connector' = 'kafka', 'topic' = '{orders}',\n\
           'properties.bootstrap.servers' = '{servers}', 'format' = 'json',\n\
           'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset',\n\
           'scan.batch-size' = '11');\n\
         CREATE TABLE priced (id BIGINT, currency STRING, rate BIGINT)\n\
         WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'parquet');\n\
         INSERT INTO priced SELECT o.id, o.currency, r.rate FROM orders AS o\n\
         JOIN rates FOR SYSTEM_TIME AS OF o.et AS r ON o.currency = r.currency;",
        out.display()
    );
    let engine = Engine::new();
    let job = engine
        .compile_sql(&sql, "temporal.sql")
        .await
        .expect("compiles");
    engine
        .run(&job.spec, Some("temporal.sql"))
        .await
        .expect("runs");
    let mut got: Vec<String> = crate::support::format_rows(&crate::support::read_parquet_dir(&out))
        .into_iter()
        .map(|r| r.replace(" | ", " "))
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
}
