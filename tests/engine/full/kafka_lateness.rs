//! Lateness per split over a real Kafka topic (`weir_testkit::kafka`): eight partitions, each
//! with its own auctions, its own stretch of event time and 6% late rows, read by a tumbling
//! window that routes its late rows. With the default `lateness: split`, a row is late exactly
//! when it is behind its own partition's watermark, so the output and the late rows are the
//! same at parallelism 1, 2 and 4, over three lanes, and after a kill and a restore at another
//! parallelism, and equal to a reference that reads each partition in order by itself.

use crate::checkpoints::{kill_after_epochs, options, published_rows};
use crate::determinism::{Bid, sequential_tumble_rows, tumble_query};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use std::path::Path;
use std::time::Duration;
use weir::{Engine, JobSpec, RestoreFrom, SplitShare};
use weir_testkit::kafka::KafkaBroker;
use weir_testkit::unique_name;

/// Partitions of the topic.
const PARTITIONS: i32 = 8;
/// Bids per partition.
const PER_PARTITION: usize = 2_500;
/// Lanes of the distributed run.
const LANES: u32 = 3;

/// Partition `p`'s bids, in the order they are produced: auctions `p`, `p + 8`, ...; event
/// time from its own start (partitions 20 s apart, so they are far apart in event time and a
/// merged watermark would depend on how their reads interleave), 20 ms a bid, up to 3 s out of
/// order, 6% late by 10 to 60 s.
fn partition_bids(p: i32) -> Vec<Bid> {
    let mut rng = crate::support::Rng(100 + p as u64);
    let start = 1_700_000_000_000 + i64::from(p) * 20_000;
    (0..PER_PARTITION)
        .map(|i| {
            let on_time = start + i as i64 * 20 - rng.below(3_000) as i64;
            let ts = if rng.below(100) < 6 {
                on_time - 10_000 - rng.below(50_000) as i64
            } else {
                on_time
            };
            let auction = i64::from(p) + 8 * rng.below(5) as i64;
            (auction, 1 + rng.below(10_000) as i64, ts)
        })
        .collect()
}

fn produce(broker: &KafkaBroker, topic: &str) {
    let producer: BaseProducer = broker.client_config().create().expect("producer");
    for p in 0..PARTITIONS {
        for (auction, price, ts) in partition_bids(p) {
            let value = format!(r#"{{"auction":{auction},"price":{price},"ts":{ts}}}"#);
            loop {
                match producer.send(BaseRecord::<(), _>::to(topic).partition(p).payload(&value)) {
                    Ok(()) => break,
                    Err(_) => {
                        producer.poll(Duration::from_millis(10));
                    }
                }
            }
            producer.poll(Duration::ZERO);
        }
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
}

/// The job under id `job`: 10 s tumbling COUNT/SUM/MAX per auction, late rows routed, at
/// `parallelism`, checkpointing every 20 ms, writing under `out`.
async fn job(servers: &str, topic: &str, out: &Path, job: &str, parallelism: u32) -> JobSpec {
    let sql = format!(
        "SET 'job.name' = '{job}';\n\
         SET 'parallelism' = '{parallelism}';\n\
         SET 'checkpoint.interval' = '20ms';\n\
         CREATE TABLE bids (auction BIGINT NOT NULL, price BIGINT NOT NULL, ts BIGINT NOT NULL,\n\
           WATERMARK FOR ts AS ts - INTERVAL '5' SECOND\n\
         ) WITH ('connector' = 'kafka', 'topic' = '{topic}',\n\
           'properties.bootstrap.servers' = '{servers}', 'format' = 'json',\n\
           'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset',\n\
           'scan.batch-size' = '25');\n{}",
        tumble_query(&out.display().to_string()),
    );
    Engine::new()
        .compile_sql(&sql, "kafka-lateness.sql")
        .await
        .expect("compiles")
        .spec
}

/// The published output and late rows under `out`.
fn answer(out: &Path) -> (Vec<String>, Vec<String>) {
    (
        published_rows(&out.join("tumble")),
        published_rows(&out.join("late")),
    )
}

/// Runs `spec` to its end (restoring the latest checkpoint in `checkpoints` when `restore`),
/// as lane `share` when given.
async fn run(spec: &JobSpec, checkpoints: &Path, restore: bool, share: Option<SplitShare>) {
    let engine = Engine::new();
    let mut prepared = engine
        .prepare(spec, Some("kafka-lateness.sql"))
        .await
        .expect("prepares");
    if let Some(share) = share {
        prepared = prepared.with_split_share(share);
    }
    let summary = engine
        .start_with(
            prepared,
            options(checkpoints, restore.then_some(RestoreFrom::Latest)),
        )
        .await
        .expect("starts")
        .wait()
        .await
        .expect("runs");
    if restore {
        let restored = summary.checkpoints.expect("counters").restored_from;
        assert!(restored.is_some(), "the run restored a checkpoint");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_rows_over_partitions_do_not_depend_on_parallelism_lanes_or_restores() {
    let broker = KafkaBroker::shared().expect("the Kafka test broker");
    let topic = unique_name("late-bids");
    broker.create_topic(&topic, PARTITIONS).expect("topic");
    produce(broker, &topic);
    let servers = broker.bootstrap_servers();

    let dir = tempfile::tempdir().expect("tempdir");
    let mut answers = Vec::new();
    for parallelism in [1, 2, 4] {
        let out = dir.path().join(format!("p{parallelism}"));
        let spec = job(
            &servers,
            &topic,
            &out,
            &format!("kl-p{parallelism}"),
            parallelism,
        )
        .await;
        run(&spec, &out.join("cp"), false, None).await;
        answers.push((format!("parallelism {parallelism}"), answer(&out)));
    }

    // Three lanes, each its own job reading its share of the partitions, into one output.
    let lanes = dir.path().join("lanes");
    for lane in 0..LANES {
        let spec = job(&servers, &topic, &lanes, &format!("kl-lane-{lane}"), 1).await;
        let share = SplitShare::new(lane, LANES).expect("share");
        run(&spec, &lanes.join("cp"), false, Some(share)).await;
    }
    answers.push(("3 lanes".into(), answer(&lanes)));

    // Killed at parallelism 2 after its first durable epoch, restored at parallelism 3.
    let killed = dir.path().join("killed");
    let spec = job(&servers, &topic, &killed, "kl-killed", 2).await;
    let engine = Engine::new();
    let running = engine
        .start_with(
            engine
                .prepare(&spec, Some("kafka-lateness.sql"))
                .await
                .expect("prepares"),
            options(&killed.join("cp"), None),
        )
        .await
        .expect("starts");
    assert!(
        kill_after_epochs(running, 1).await,
        "the run was killed part way"
    );
    let spec = job(&servers, &topic, &killed, "kl-killed", 3).await;
    run(&spec, &killed.join("cp"), true, None).await;
    answers.push(("killed at 2, restored at 3".into(), answer(&killed)));

    // The reference: each partition read in order by itself.
    let reference = sequential_tumble_rows(
        (0..PARTITIONS).map(partition_bids),
        &dir.path().join("p1/tumble"),
    );
    let (tumble, late) = &answers[0].1;
    assert_eq!(tumble, &reference.0, "parallelism 1 equals the reference");
    assert_eq!(late.len(), reference.1, "late rows of the reference");
    for (name, got) in &answers[1..] {
        assert!(
            got == &answers[0].1,
            "{name}: {} rows and {} late rows, expected {} and {}",
            got.0.len(),
            got.1.len(),
            tumble.len(),
            late.len()
        );
    }
}
