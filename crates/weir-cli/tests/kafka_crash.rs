//! The Kafka round of the crash harness: `weir run` on a SQL job from a Kafka topic through a
//! filter and a projection into an exactly-once Kafka sink is SIGKILLed at every fail point of
//! the checkpoint and sink protocol and at random moments, and restarted with `--restore latest`
//! until its bounded input is done; a `read_committed` consumer must then see every expected
//! record of the output topic exactly once. A second test takes the broker away mid-run, a
//! third starts the job while the broker is down. Two more rounds kill jobs with state: Kafka
//! windows into Parquet, and Debezium change events aggregated without a window into an
//! upsert-kafka topic, whose table (each key's last record) must equal the totals of the
//! source's final table.
//!
//! The input is always the same (a fixed seed, produced to a real broker from
//! `weir_testkit::kafka` before the job starts); the kill schedule first asks for each fail point
//! once and is otherwise seeded from the clock unless `WEIR_CRASH_SEED` fixes it.
//! `WEIR_CRASH_KILLS` (default 12) is how many kills the test makes at least;
//! `scripts/crash-soak.sh KILLS kafka` runs it with hundreds.
#![cfg(unix)]

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use weir_testkit::kafka::KafkaBroker;
use weir_testkit::unique_name;

mod common;

use common::{
    Diff, Evidence, Job, Kill, Outcome, Rounds, Schedule, Weir, XorShift, clock_seed, env_u64,
    files_named,
};

/// Input records, spread over the input topic's partitions by key.
const RECORDS: u64 = 40_000;
const INPUT_PARTITIONS: i32 = 3;
const OUTPUT_PARTITIONS: i32 = 2;
const AUCTIONS: u64 = 100;
const BASE_MS: u64 = 1_700_000_000_000;
const INPUT_SEED: u64 = 0x5eed_cafe;
const DEFAULT_KILLS: u64 = 12;
/// Runs the test restarts after the broker came back, at most.
const MAX_RESTARTS_AFTER_OUTAGE: u32 = 5;
/// How long the broker stays away in the outage test.
const OUTAGE: Duration = Duration::from_secs(3);
/// What an output row holds, for failure messages.
const LEGEND: &str = "[id, auction, doubled price]";

/// The fail points this job reaches: every one but `mid-restore`, which is reached only between
/// the restores of two tasks' state segments, and this job keeps no state in segments (its
/// source offsets and the sink's pending epochs are in the manifest). `mid-recovery-commit`
/// (after a sink subtask's recovery commit, before the next one's) is reached by a run that
/// restores a manifest.
/// The fail points of the window job (Kafka into a staged Parquet sink, window state in
/// segments): all of them.
const WINDOW_FAIL_POINTS: [&str; 6] = [
    "after-pre-commit",
    "after-segments",
    "after-manifest",
    "mid-commit",
    "mid-restore",
    "mid-recovery-commit",
];
const JOB_FAIL_POINTS: [&str; 5] = [
    "after-pre-commit",
    "after-segments",
    "after-manifest",
    "mid-commit",
    "mid-recovery-commit",
];

/// One output record: id, auction, price * 2.
type Row = [i64; 3];

/// Held by each test while it runs: both start a broker JVM and many `weir` processes, and on a
/// small machine two at once make broker starts and random kills land far from where they should.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    // A test that failed holding the lock left nothing behind that the other depends on.
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn killed_and_restored_kafka_jobs_publish_every_record_exactly_once() {
    let _alone = one_at_a_time();
    let kills_wanted = env_u64("WEIR_CRASH_KILLS").unwrap_or(DEFAULT_KILLS);
    let seed = env_u64("WEIR_CRASH_SEED").unwrap_or_else(clock_seed);
    println!(
        "kafka crash harness: seed {seed} (set WEIR_CRASH_SEED={seed} to repeat the schedule)"
    );
    let broker = KafkaBroker::shared().expect("the Kafka test broker");
    let input = unique_name("kcrash-bids");
    broker
        .create_topic(&input, INPUT_PARTITIONS)
        .expect("create the input topic");
    let expected = produce_input(broker, &input);
    let evidence = Evidence::new();
    let work = evidence.path();

    // A run without kills: the test's idea of the output must be the job's.
    let clean = KafkaJob::create(broker, &work.join("clean"), &input);
    let started = Instant::now();
    let run = run_without_kills(&clean.job);
    let took = started.elapsed();
    let manifests = files_named(&clean.job.checkpoints, "manifest.json");
    println!(
        "kafka crash harness: the run without kills took {:.1} s, {} of {RECORDS} records pass \
         the filter, {manifests} checkpoint manifests kept",
        took.as_secs_f64(),
        expected.len()
    );
    assert!(
        manifests > 0,
        "the run without kills left no checkpoint manifest in {}\n{}",
        clean.job.checkpoints.display(),
        run.stderr()
    );
    if let Some(diff) = Diff::of(&expected, &clean.published(broker), LEGEND) {
        panic!("the run without kills published other records than expected:\n{diff}");
    }

    let mut rounds = Rounds::new(
        seed,
        kills_wanted,
        Schedule::covering(seed, &JOB_FAIL_POINTS),
    );
    while rounds.tally.kills() < kills_wanted {
        let round = rounds.done + 1;
        let kafka_job = KafkaJob::create(broker, &work.join(format!("round-{round}")), &input);
        rounds.run(&kafka_job.job, &|job| format!(", {}", job.restored_from()));
        let published = kafka_job.published(broker);
        if let Some(diff) = Diff::of(&expected, &published, LEGEND) {
            panic!(
                "round {round} (seed {seed}): the output topic {} holds {} missing and {} \
                 duplicated or unexpected records:\n{diff}\nkill sequence:\n{}",
                kafka_job.output,
                diff.missing_rows(),
                diff.extra_rows(),
                rounds.log.join("\n")
            );
        }
        println!(
            "kafka crash harness: round {round}: all {} records exactly once ({} kills so far)",
            expected.len(),
            rounds.tally.kills()
        );
        std::fs::remove_dir_all(&kafka_job.job.dir).expect("remove the round's directory");
    }
    // The schedule asks for every fail point before any random kill.
    rounds.assert_every_fail_point_reached(JOB_FAIL_POINTS.len() as u64);
    println!(
        "kafka crash harness: fail points reached {:?}",
        rounds.tally.reached
    );
    println!(
        "kafka crash harness: {} kills ({} at fail points, {} at random moments), {} rounds, {} \
         records checked per round",
        rounds.tally.kills(),
        rounds.tally.at_fail_points,
        rounds.tally.at_random,
        rounds.done,
        expected.len()
    );
}

#[test]
fn a_kafka_job_whose_broker_goes_away_publishes_every_record_exactly_once() {
    let _alone = one_at_a_time();
    let broker = KafkaBroker::start().expect("a private Kafka broker");
    let input = unique_name("kcrash-outage-bids");
    broker
        .create_topic(&input, INPUT_PARTITIONS)
        .expect("create the input topic");
    let expected = produce_input(&broker, &input);
    let evidence = Evidence::new();
    let kafka_job = KafkaJob::create(&broker, &evidence.path().join("outage"), &input);
    let job = &kafka_job.job;

    let started = Instant::now();
    let mut run = Weir::spawn(job, false, None);
    // The broker goes once the job has a durable checkpoint, while it still runs.
    while !any_manifest(&job.checkpoints) {
        assert!(
            !run.has_exited(),
            "the job ended before its first checkpoint: make the input larger\n{}",
            run.stderr()
        );
        assert!(
            started.elapsed() < common::RUN_TIMEOUT,
            "no checkpoint manifest in {:?}",
            common::RUN_TIMEOUT
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let stopping = started.elapsed();
    broker.stop().expect("stop the broker");
    let stopped = started.elapsed();
    let ended_while_away = run.has_exited();
    std::thread::sleep(OUTAGE);
    broker.restart().expect("restart the broker");
    let back = started.elapsed();
    println!(
        "kafka outage: broker stopped from {:.1} s to {:.1} s after the start, back at {:.1} s; \
         the job {} while the broker was away",
        stopping.as_secs_f64(),
        stopped.as_secs_f64(),
        back.as_secs_f64(),
        if ended_while_away {
            "ended"
        } else {
            "kept running"
        }
    );

    let mut restore = false;
    let mut log = Vec::new();
    for attempt in 0..=MAX_RESTARTS_AFTER_OUTAGE {
        if attempt > 0 {
            run = Weir::spawn(job, true, None);
        }
        let outcome = run.drive(&Kill::Never);
        let line = format!(
            "attempt {attempt}{}: {outcome} after {:.1} s",
            if restore { " (--restore latest)" } else { "" },
            started.elapsed().as_secs_f64()
        );
        println!("kafka outage: {line}");
        log.push(line);
        match outcome {
            Outcome::Finished => {
                println!(
                    "kafka outage: the job {} ({})",
                    if attempt == 0 {
                        "rode through the outage"
                    } else {
                        "failed and a restored run finished"
                    },
                    job.restored_from()
                );
                // What the run reported while the broker was away (its in-process restarts).
                for line in run.stderr().lines().filter(|l| l.contains(" WARN weir_")) {
                    println!("kafka outage: {line}");
                }
                break;
            }
            _ => {
                println!(
                    "kafka outage: the run's error:\n{}",
                    last_lines(&run.stderr(), 15)
                );
                log.push(run.stderr());
                assert!(
                    attempt < MAX_RESTARTS_AFTER_OUTAGE,
                    "no run finished in {} restarts after the outage:\n{}",
                    MAX_RESTARTS_AFTER_OUTAGE,
                    log.join("\n")
                );
                restore = true;
            }
        }
    }
    let published = kafka_job.published(&broker);
    if let Some(diff) = Diff::of(&expected, &published, LEGEND) {
        panic!(
            "after the outage the output topic {} holds {} missing and {} duplicated or \
             unexpected records:\n{diff}\nruns:\n{}",
            kafka_job.output,
            diff.missing_rows(),
            diff.extra_rows(),
            log.join("\n")
        );
    }
    println!(
        "kafka outage: all {} records exactly once after {:.1} s",
        expected.len(),
        started.elapsed().as_secs_f64()
    );
}

/// The broker is down when the job starts: preparing the job (listing the input's partitions)
/// fails, is tried again as a failed attempt of a running job would be, and once the broker is
/// back the run publishes every record exactly once, with no restart by hand.
#[test]
fn a_kafka_job_started_while_its_broker_is_down_waits_for_it_and_publishes_exactly_once() {
    let _alone = one_at_a_time();
    let broker = KafkaBroker::start().expect("a private Kafka broker");
    let input = unique_name("kcrash-down-bids");
    broker
        .create_topic(&input, INPUT_PARTITIONS)
        .expect("create the input topic");
    let expected = produce_input(&broker, &input);
    let evidence = Evidence::new();
    let kafka_job = KafkaJob::create_with(
        &broker,
        &evidence.path().join("down"),
        &input,
        // Enough restarts, 1 s apart at first, for a broker that takes seconds to come back.
        "SET 'restart.attempts' = '20';
SET 'restart.max-delay' = '4s';
",
    );
    broker.stop().expect("stop the broker");
    let started = Instant::now();
    let mut run = Weir::spawn(&kafka_job.job, false, None);
    let retried = run.wait_for_line("trying again", common::RUN_TIMEOUT);
    assert!(
        retried,
        "no retry reported while the broker was down:\n{}",
        run.stderr()
    );
    let first_failure = started.elapsed();
    broker.restart().expect("restart the broker");
    println!(
        "kafka down at start: the first attempt failed after {:.1} s; broker back at {:.1} s",
        first_failure.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    let outcome = run.drive(&Kill::Never);
    assert!(
        matches!(outcome, Outcome::Finished),
        "the run did not finish once the broker was back ({outcome}):\n{}",
        last_lines(&run.stderr(), 30)
    );
    let published = kafka_job.published(&broker);
    if let Some(diff) = Diff::of(&expected, &published, LEGEND) {
        panic!(
            "a run started while the broker was down published {} missing and {} duplicated \
             or unexpected records:\n{diff}",
            diff.missing_rows(),
            diff.extra_rows(),
        );
    }
    println!(
        "kafka down at start: all {} records exactly once after {:.1} s",
        expected.len(),
        started.elapsed().as_secs_f64()
    );
}

/// A job reading `input` into its own output topic and transactional ids.
/// Kafka into windows into Parquet: the bids counted per auction in 1 s event-time windows,
/// written by the staged file sink, with kills at random moments and at the fail points; every
/// round's Parquet rows must equal those of the run that never failed.
#[test]
fn killed_and_restored_kafka_window_jobs_publish_what_a_run_that_never_failed_published() {
    let _alone = one_at_a_time();
    let kills_wanted = (env_u64("WEIR_CRASH_KILLS").unwrap_or(DEFAULT_KILLS) / 2).max(4);
    let seed = env_u64("WEIR_CRASH_SEED").unwrap_or_else(clock_seed);
    println!("kafka window crash round: seed {seed}");
    let broker = KafkaBroker::shared().expect("the Kafka test broker");
    let input = unique_name("kcrash-window-bids");
    broker
        .create_topic(&input, INPUT_PARTITIONS)
        .expect("create the input topic");
    produce_input(broker, &input);
    let evidence = Evidence::new();
    let work = evidence.path();
    let window_job = |dir: &Path| {
        let servers = broker.bootstrap_servers();
        let out = dir.join("out");
        let sql = format!(
            "SET 'job.name' = 'kafka-window-crash';\n\
             SET 'parallelism' = '2';\n\
             SET 'checkpoint.interval' = '100ms';\n\
             CREATE TABLE bids (id BIGINT, auction BIGINT, price BIGINT, ts BIGINT,\n\
             \x20 et AS TO_TIMESTAMP_MILLIS(ts), WATERMARK FOR et AS et - INTERVAL '1' SECOND\n\
             ) WITH ('connector' = 'kafka', 'topic' = '{input}',\n\
             \x20 'properties.bootstrap.servers' = '{servers}', 'format' = 'json',\n\
             \x20 'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset');\n\
             CREATE TABLE out (auction BIGINT, window_start TIMESTAMP(3), bids BIGINT) WITH (\n\
             \x20 'connector' = 'filesystem', 'path' = '{}', 'format' = 'parquet');\n\
             INSERT INTO out SELECT auction, window_start, COUNT(*) AS bids\n\
             \x20 FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(et), INTERVAL '1' SECOND))\n\
             \x20 GROUP BY auction, window_start, window_end;\n",
            out.display()
        );
        (Job::create(dir, &sql), out)
    };

    let (clean, clean_out) = window_job(&work.join("clean"));
    run_without_kills(&clean);
    let expected: Vec<[i64; 3]> = common::published_parquet_rows(&clean_out);
    let counted: i64 = expected.iter().map(|r| r[2]).sum();
    assert_eq!(
        counted, RECORDS as i64,
        "the run without kills counted every bid once"
    );

    let mut rounds = Rounds::new(
        seed,
        kills_wanted,
        Schedule::covering(seed, &WINDOW_FAIL_POINTS),
    );
    while rounds.tally.kills() < kills_wanted {
        let round = rounds.done + 1;
        let (job, out) = window_job(&work.join(format!("round-{round}")));
        rounds.run(&job, &|job| format!(", {}", job.restored_from()));
        let published: Vec<[i64; 3]> = common::published_parquet_rows(&out);
        if let Some(diff) = Diff::of(&expected, &published, "[auction, window start, bids]") {
            panic!(
                "round {round} (seed {seed}): the Parquet output differs from the run that \
                 never failed:\n{diff}\nkill sequence:\n{}",
                rounds.log.join("\n")
            );
        }
        std::fs::remove_dir_all(&job.dir).expect("remove the round's directory");
    }
    println!(
        "kafka window crash round: {} kills ({} at fail points, {} at random moments), {} rounds, \
         {} window rows checked per round",
        rounds.tally.kills(),
        rounds.tally.at_fail_points,
        rounds.tally.at_random,
        rounds.done,
        expected.len()
    );
}

/// Rows of the Debezium round's source table.
const CDC_ROWS: u64 = 4_000;
/// Change events after the snapshot.
const CDC_CHANGES: u64 = 16_000;
const CDC_CATEGORIES: u64 = 12;

#[test]
fn killed_and_restored_debezium_aggregations_keep_the_upserted_topic_exact() {
    let _alone = one_at_a_time();
    let kills_wanted = (env_u64("WEIR_CRASH_KILLS").unwrap_or(DEFAULT_KILLS) / 2).max(4);
    let seed = env_u64("WEIR_CRASH_SEED").unwrap_or_else(clock_seed);
    println!("kafka debezium crash round: seed {seed}");
    let broker = KafkaBroker::shared().expect("the Kafka test broker");
    let input = unique_name("kcrash-cdc");
    broker
        .create_topic(&input, INPUT_PARTITIONS)
        .expect("create the input topic");
    let expected = produce_changes(broker, &input);
    let evidence = Evidence::new();
    let work = evidence.path();
    let cdc_job = |dir: &Path| {
        let servers = broker.bootstrap_servers();
        let output = unique_name("kcrash-totals");
        broker
            .create_topic(&output, OUTPUT_PARTITIONS)
            .expect("create the output topic");
        let prefix = unique_name("kcrash-cdc");
        let sql = format!(
            "SET 'job.name' = 'kafka-cdc-crash';\n\
             SET 'parallelism' = '2';\n\
             SET 'checkpoint.interval' = '100ms';\n\
             CREATE TABLE items (id BIGINT, category BIGINT, amount BIGINT) WITH (\n\
             \x20 'connector' = 'kafka', 'topic' = '{input}',\n\
             \x20 'properties.bootstrap.servers' = '{servers}', 'format' = 'debezium-json',\n\
             \x20 'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset');\n\
             CREATE TABLE totals (category BIGINT, n BIGINT, total BIGINT,\n\
             \x20 PRIMARY KEY (category) NOT ENFORCED) WITH (\n\
             \x20 'connector' = 'upsert-kafka', 'topic' = '{output}',\n\
             \x20 'properties.bootstrap.servers' = '{servers}', 'key.format' = 'json',\n\
             \x20 'value.format' = 'json', 'sink.delivery-guarantee' = 'exactly-once',\n\
             \x20 'sink.transactional-id-prefix' = '{prefix}');\n\
             INSERT INTO totals SELECT category, COUNT(*), SUM(amount) FROM items\n\
             \x20 GROUP BY category;\n"
        );
        (Job::create(dir, &sql), output)
    };
    let (clean, clean_out) = cdc_job(&work.join("clean"));
    run_without_kills(&clean);
    let legend = "[category, rows, total amount]";
    if let Some(diff) = Diff::of(&expected, &upserted(broker, &clean_out), legend) {
        panic!("the run without kills left another table than the final one's totals:\n{diff}");
    }
    let mut rounds = Rounds::new(
        seed,
        kills_wanted,
        Schedule::covering(seed, &WINDOW_FAIL_POINTS),
    );
    while rounds.tally.kills() < kills_wanted {
        let round = rounds.done + 1;
        let (job, output) = cdc_job(&work.join(format!("round-{round}")));
        rounds.run(&job, &|job| format!(", {}", job.restored_from()));
        if let Some(diff) = Diff::of(&expected, &upserted(broker, &output), legend) {
            panic!(
                "round {round} (seed {seed}): the upserted topic {output} differs from the \
                 totals of the final table:\n{diff}\nkill sequence:\n{}",
                rounds.log.join("\n")
            );
        }
        std::fs::remove_dir_all(&job.dir).expect("remove the round's directory");
    }
    println!(
        "kafka debezium crash round: {} kills ({} at fail points, {} at random moments), {} \
         rounds, {} categories checked per round",
        rounds.tally.kills(),
        rounds.tally.at_fail_points,
        rounds.tally.at_random,
        rounds.done,
        expected.len()
    );
}

/// Debezium events of a table of `CDC_ROWS` items: a snapshot, then updates (which may move
/// an item to another category), deletes and new items, keyed by item id. Returns the final
/// table's `[category, rows, total amount]`, sorted.
fn produce_changes(broker: &KafkaBroker, topic: &str) -> Vec<Row> {
    let producer: BaseProducer = broker
        .client_config()
        .set("linger.ms", "5")
        .create()
        .expect("a producer");
    let mut rng = XorShift::new(INPUT_SEED ^ 0xcdc);
    let mut table: std::collections::BTreeMap<u64, (u64, u64)> = Default::default();
    let row = |id: u64, (category, amount): (u64, u64)| {
        format!(r#"{{"id":{id},"category":{category},"amount":{amount}}}"#)
    };
    let send = |id: u64, value: Option<String>| {
        let key = id.to_string();
        let mut record = BaseRecord::to(topic).key(&key);
        if let Some(value) = &value {
            record = record.payload(value);
        }
        while let Err((_, back)) = producer.send(record) {
            record = back;
            producer.poll(Duration::from_millis(10));
        }
        producer.poll(Duration::ZERO);
    };
    for id in 0..CDC_ROWS {
        let item = (rng.below(CDC_CATEGORIES), 1 + rng.below(1_000));
        table.insert(id, item);
        send(
            id,
            Some(format!(
                r#"{{"before":null,"after":{},"op":"r"}}"#,
                row(id, item)
            )),
        );
    }
    for _ in 0..CDC_CHANGES {
        let id = rng.below(CDC_ROWS + CDC_ROWS / 4);
        match table.get(&id).copied() {
            Some(old) if rng.below(6) == 0 => {
                table.remove(&id);
                send(
                    id,
                    Some(format!(
                        r#"{{"before":{},"after":null,"op":"d"}}"#,
                        row(id, old)
                    )),
                );
                send(id, None);
            }
            Some(old) => {
                let new = (rng.below(CDC_CATEGORIES), 1 + rng.below(1_000));
                table.insert(id, new);
                send(
                    id,
                    Some(format!(
                        r#"{{"before":{},"after":{},"op":"u"}}"#,
                        row(id, old),
                        row(id, new)
                    )),
                );
            }
            None => {
                let new = (rng.below(CDC_CATEGORIES), 1 + rng.below(1_000));
                table.insert(id, new);
                send(
                    id,
                    Some(format!(
                        r#"{{"before":null,"after":{},"op":"c"}}"#,
                        row(id, new)
                    )),
                );
            }
        }
    }
    producer
        .flush(Duration::from_secs(60))
        .expect("flush the input");
    let mut totals: std::collections::BTreeMap<u64, (i64, i64)> = Default::default();
    for (category, amount) in table.values() {
        let t = totals.entry(*category).or_default();
        t.0 += 1;
        t.1 += *amount as i64;
    }
    totals
        .into_iter()
        .map(|(category, (n, total))| [category as i64, n, total])
        .collect()
}

/// The table an upsert topic holds (per key its last record, a tombstone deleting the key),
/// as `[category, n, total]` rows, sorted.
fn upserted(broker: &KafkaBroker, topic: &str) -> Vec<Row> {
    let mut table: std::collections::BTreeMap<Vec<u8>, Option<Vec<u8>>> = Default::default();
    for record in broker
        .read_committed(topic)
        .unwrap_or_else(|e| panic!("reading the output topic {topic}: {e}"))
    {
        table.insert(record.key.unwrap_or_default(), record.value);
    }
    let mut rows: Vec<Row> = table
        .into_values()
        .flatten()
        .map(|value| {
            let json: serde_json::Value = serde_json::from_slice(&value).expect("a JSON value");
            let field = |name: &str| json[name].as_i64().expect("an integer field");
            [field("category"), field("n"), field("total")]
        })
        .collect();
    rows.sort_unstable();
    rows
}

struct KafkaJob {
    job: Job,
    output: String,
}

impl KafkaJob {
    /// Creates the output topic and the job in `dir`: bids whose price is not a multiple of 4,
    /// with the price doubled, exactly once into the output topic.
    fn create(broker: &KafkaBroker, dir: &Path, input: &str) -> Self {
        Self::create_with(broker, dir, input, "")
    }

    /// [`KafkaJob::create`] with `settings` (`SET` statements) added to the script.
    fn create_with(broker: &KafkaBroker, dir: &Path, input: &str, settings: &str) -> Self {
        let output = unique_name("kcrash-out");
        broker
            .create_topic(&output, OUTPUT_PARTITIONS)
            .expect("create the output topic");
        let servers = broker.bootstrap_servers();
        let prefix = unique_name("kcrash");
        let sql = format!(
            "SET 'job.name' = 'kafka-crash';\n\
             SET 'parallelism' = '2';\n\
             SET 'checkpoint.interval' = '100ms';\n\
             {settings}\
             CREATE TABLE bids (id BIGINT, auction BIGINT, price BIGINT, ts BIGINT) WITH (\n\
             \x20 'connector' = 'kafka', 'topic' = '{input}',\n\
             \x20 'properties.bootstrap.servers' = '{servers}', 'format' = 'json',\n\
             \x20 'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset');\n\
             CREATE TABLE out (id BIGINT, auction BIGINT, doubled BIGINT) WITH (\n\
             \x20 'connector' = 'kafka', 'topic' = '{output}',\n\
             \x20 'properties.bootstrap.servers' = '{servers}', 'format' = 'json',\n\
             \x20 'sink.delivery-guarantee' = 'exactly-once',\n\
             \x20 'sink.transactional-id-prefix' = '{prefix}');\n\
             INSERT INTO out SELECT id, auction, price * 2 FROM bids WHERE price % 4 <> 0;\n"
        );
        KafkaJob {
            job: Job::create(dir, &sql),
            output,
        }
    }

    /// The committed records of the output topic, sorted.
    fn published(&self, broker: &KafkaBroker) -> Vec<Row> {
        let records = broker
            .read_committed(&self.output)
            .unwrap_or_else(|e| panic!("reading the output topic {}: {e}", self.output));
        let mut rows: Vec<Row> = records
            .iter()
            .map(|r| {
                let value = r.value.as_deref().unwrap_or_default();
                parse_row(value).unwrap_or_else(|| {
                    panic!(
                        "{} partition {} offset {}: not a JSON object with integer id, auction \
                         and doubled: {:?}",
                        self.output,
                        r.partition,
                        r.offset,
                        String::from_utf8_lossy(value)
                    )
                })
            })
            .collect();
        rows.sort_unstable();
        rows
    }
}

/// `{"id":..,"auction":..,"doubled":..}` as a row.
fn parse_row(value: &[u8]) -> Option<Row> {
    let json: serde_json::Value = serde_json::from_slice(value).ok()?;
    let field = |name: &str| json.get(name)?.as_i64();
    Some([field("id")?, field("auction")?, field("doubled")?])
}

/// Produces the bids as JSON records keyed by auction and returns the job's output computed
/// here, sorted.
fn produce_input(broker: &KafkaBroker, topic: &str) -> Vec<Row> {
    let producer: BaseProducer = broker
        .client_config()
        .set("linger.ms", "5")
        .create()
        .expect("a producer");
    let mut rng = XorShift::new(INPUT_SEED);
    let mut rows = Vec::new();
    for id in 0..RECORDS {
        let auction = 1_000 + rng.below(AUCTIONS);
        let price = 1 + rng.below(5_000);
        let value = format!(
            r#"{{"id":{id},"auction":{auction},"price":{price},"ts":{}}}"#,
            BASE_MS + id
        );
        let key = auction.to_string();
        let mut record = BaseRecord::to(topic).key(&key).payload(&value);
        // A full local queue is emptied by polling, then the record is sent again.
        while let Err((_, back)) = producer.send(record) {
            record = back;
            producer.poll(Duration::from_millis(10));
        }
        producer.poll(Duration::ZERO);
        if !price.is_multiple_of(4) {
            rows.push([id as i64, auction as i64, 2 * price as i64]);
        }
    }
    producer
        .flush(Duration::from_secs(60))
        .expect("flush the input");
    rows.sort_unstable();
    rows
}

/// Whether a `manifest.json` is anywhere under `dir`, read while a run may be changing it (a
/// directory that vanishes mid-walk is skipped).
fn any_manifest(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|entry| {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            any_manifest(&entry.path())
        } else {
            entry.file_name() == "manifest.json"
        }
    })
}

/// Runs `job` to its end without kills; fails the test when it does not finish.
fn run_without_kills(job: &Job) -> Weir {
    let mut run = Weir::spawn(job, false, None);
    match run.drive(&Kill::Never) {
        Outcome::Finished => run,
        other => panic!(
            "the run without kills did not finish: {other}\n{}",
            run.stderr()
        ),
    }
}

/// The last `n` lines of `text`.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
