//! Distributed jobs with real processes on 127.0.0.1: one `weir hub` and three `weir agent`s,
//! the real Kafka broker and S3 server of the test kit. A SQL job (Kafka with 8 partitions ->
//! tumbling window -> Parquet on S3) is submitted through the Hub's API at parallelism 3 (three
//! lanes); one Agent is SIGKILLed mid-run and the Hub is SIGKILLed and restarted; every closed
//! window must be in the output exactly once, with the counts the input gives. Then a savepoint,
//! an upgrade to a version that writes elsewhere (started from it), and a rollback to the first
//! version (from the same savepoint): each writes every window of its input exactly once.
#![cfg(unix)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use weir_control::{
    DesiredState, DesiredStateChange, HubClient, JobDetail, ObservedPhase, SavepointRequest,
    SubmitJob, UpgradeRequest, UpgradeState, ValidateRequest,
};
use weir_testkit::kafka::KafkaBroker;
use weir_testkit::s3 as server;
use weir_testkit::unique_name;

/// Input partitions and lanes.
const PARTITIONS: i32 = 8;
const LANES: u32 = 3;
const AUCTIONS: u64 = 40;
/// Records produced before the Agent is killed, and after.
const FIRST: u64 = 6_000;
const SECOND: u64 = 6_000;
const BASE_MS: i64 = 1_700_000_000_000;
/// Event time between two records.
const STEP_MS: i64 = 20;
const WINDOW_MS: i64 = 10_000;
/// How long the Hub waits for a heartbeat before it expires an Agent's lease.
const LEASE: &str = "2s";
const DEADLINE: Duration = Duration::from_secs(120);

/// A process the test started; dropping it kills it (SIGKILL) and reaps it.
struct Proc {
    child: Child,
}

impl Proc {
    fn spawn(name: &str, args: &[&str], dir: &Path) -> Proc {
        let log = std::fs::File::create(dir.join(format!("{name}.log"))).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(args)
            .current_dir(dir)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        Proc { child }
    }

    /// SIGKILL, as a crash.
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The last lines of a process's log, for failure messages.
fn log_tail(dir: &Path, name: &str) -> String {
    let Ok(file) = std::fs::File::open(dir.join(format!("{name}.log"))) else {
        return String::new();
    };
    let lines: Vec<String> = BufReader::new(file).lines().map_while(Result::ok).collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address")
        .port()
}

fn hub(dir: &Path, port: u16) -> Proc {
    Proc::spawn(
        "hub",
        &[
            "hub",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--db",
            "hub.sqlite",
            "--lease-ttl",
            LEASE,
        ],
        dir,
    )
}

fn agent(dir: &Path, url: &str, id: &str) -> Proc {
    Proc::spawn(
        id,
        &[
            "agent",
            "--hub",
            url,
            "--id",
            id,
            "--slots",
            "3",
            "--poll-ms",
            "50",
        ],
        dir,
    )
}

/// Polls `check` until it gives a value, failing with `what` and the processes' logs after
/// [`DEADLINE`].
async fn until<T>(dir: &Path, what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if started.elapsed() > DEADLINE {
            let logs: Vec<String> = ["hub", "agent-0", "agent-1", "agent-2"]
                .iter()
                .map(|n| format!("--- {n}:\n{}", log_tail(dir, n)))
                .collect();
            panic!("{what}: not within {DEADLINE:?}\n{}", logs.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Records after the first flush (the upgrade's and the rollback's input).
const THIRD: u64 = 4_000;

/// The event time of record `i`: records `0..FIRST + SECOND` from `BASE_MS` on, then the first
/// flush, then the third part two windows after it, then the second flush.
fn event_time(i: u64) -> i64 {
    if i < FIRST + SECOND {
        BASE_MS + i as i64 * STEP_MS
    } else {
        flush_time(1) + 2 * WINDOW_MS + (i - FIRST - SECOND) as i64 * STEP_MS
    }
}

/// The event time of flush `n` (1 or 2): ten windows after the records before it.
fn flush_time(n: u32) -> i64 {
    let first = BASE_MS + (FIRST + SECOND) as i64 * STEP_MS + 10 * WINDOW_MS;
    match n {
        1 => first,
        _ => first + 2 * WINDOW_MS + THIRD as i64 * STEP_MS + 10 * WINDOW_MS,
    }
}

/// Produces records `from..to`: auction `i % AUCTIONS` as the key (so an auction stays in one
/// partition), event time [`event_time`].
fn produce(broker: &KafkaBroker, topic: &str, from: u64, to: u64) {
    let producer: BaseProducer = broker.client_config().create().expect("producer");
    for i in from..to {
        let auction = i % AUCTIONS;
        let ts = event_time(i);
        let value = format!(
            r#"{{"auction":{auction},"price":{},"date_time":{ts}}}"#,
            i % 997
        );
        let key = auction.to_string();
        producer
            .send(BaseRecord::to(topic).key(&key).payload(&value))
            .expect("queued");
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
}

/// Flush `n`: one record far ahead in event time on every partition (auction -1), so that every
/// partition's watermark passes every window of the records before it, and they all close.
fn produce_flush(broker: &KafkaBroker, topic: &str, n: u32) {
    let producer: BaseProducer = broker.client_config().create().expect("producer");
    let ts = flush_time(n);
    let value = format!(r#"{{"auction":-1,"price":0,"date_time":{ts}}}"#);
    for p in 0..PARTITIONS {
        producer
            .send(
                BaseRecord::<(), String>::to(topic)
                    .partition(p)
                    .payload(&value),
            )
            .expect("queued");
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
}

/// Bids per (auction, window start) of records `range`.
fn expected(range: std::ops::Range<u64>) -> BTreeMap<(i64, i64), i64> {
    let mut out = BTreeMap::new();
    for i in range {
        let ts = event_time(i);
        let start = ts - ts.rem_euclid(WINDOW_MS);
        *out.entry(((i % AUCTIONS) as i64, start)).or_insert(0) += 1;
    }
    out
}

/// The names of the published part files under `prefix`.
async fn part_names(
    store: &dyn object_store::ObjectStore,
    prefix: &str,
) -> std::collections::BTreeSet<String> {
    use futures::TryStreamExt;
    let listed: Vec<_> = store
        .list(Some(&object_store::path::Path::from(prefix)))
        .try_collect()
        .await
        .expect("list");
    listed
        .iter()
        .filter_map(|m| m.location.filename().map(str::to_owned))
        .filter(|f| f.starts_with("part-"))
        .collect()
}

/// The rows of every published part file under `prefix`: (auction, window start ms, bids).
async fn published(store: &dyn object_store::ObjectStore, prefix: &str) -> Vec<(i64, i64, i64)> {
    use arrow::array::{Array, Int64Array, TimestampMillisecondArray};
    use futures::TryStreamExt;
    use object_store::ObjectStoreExt;
    let listed: Vec<_> = store
        .list(Some(&object_store::path::Path::from(prefix)))
        .try_collect()
        .await
        .expect("list");
    let mut rows = Vec::new();
    for meta in listed.iter().filter(|m| {
        m.location
            .filename()
            .is_some_and(|f| f.starts_with("part-"))
    }) {
        let bytes = store
            .get(&meta.location)
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
            let col = |name: &str| batch.column_by_name(name).expect(name).clone();
            let auction = col("auction");
            let auction = auction.as_any().downcast_ref::<Int64Array>().expect("i64");
            let start = col("window_start");
            let start = start
                .as_any()
                .downcast_ref::<TimestampMillisecondArray>()
                .expect("timestamp(3)");
            let bids = col("bids");
            let bids = bids.as_any().downcast_ref::<Int64Array>().expect("i64");
            for r in 0..batch.num_rows() {
                rows.push((auction.value(r), start.value(r), bids.value(r)));
            }
        }
    }
    rows
}

/// The job, checkpointing every `interval_ms` (what the upgrade changes: a new version must
/// keep the job's logic to restore its savepoint).
fn sql_for(
    broker: &KafkaBroker,
    topic: &str,
    s3: &server::S3Server,
    bucket: &str,
    interval_ms: u64,
) -> String {
    format!(
        r#"
SET 'job.name' = 'bids-lanes';
SET 'parallelism' = '{LANES}';
SET 'checkpoint.interval' = '{interval_ms}ms';
SET 'checkpoint.dir' = 's3://{bucket}/checkpoints';
SET 's3.endpoint' = '{endpoint}';
SET 's3.region' = '{region}';
SET 's3.access-key' = '{access}';
SET 's3.secret-key' = '{secret}';
SET 's3.path.style.access' = 'true';

CREATE TABLE bids (
  auction BIGINT NOT NULL,
  price BIGINT NOT NULL,
  date_time BIGINT NOT NULL,
  ts AS TO_TIMESTAMP_MILLIS(date_time),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = '{topic}',
  'properties.bootstrap.servers' = '{servers}',
  'format' = 'json',
  'scan.startup.mode' = 'earliest-offset'
);

CREATE TABLE bids_per_auction (
  auction BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3), bids BIGINT
) WITH (
  'connector' = 'filesystem',
  'path' = 's3://{bucket}/out/',
  'format' = 'parquet'
);

INSERT INTO bids_per_auction
SELECT auction, window_start, window_end, COUNT(*)
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;
"#,
        servers = broker.bootstrap_servers(),
        endpoint = s3.endpoint(),
        region = server::REGION,
        access = server::ACCESS_KEY_ID,
        secret = server::SECRET_ACCESS_KEY,
    )
}

async fn detail(client: &HubClient, job: &str) -> JobDetail {
    client.job_detail(job).await.expect("job detail")
}

/// Waits until `prefix` holds as many closed windows (auction >= 0) as `want`, then checks that
/// they are exactly `want`, none twice.
async fn assert_windows(
    dir: &Path,
    store: &dyn object_store::ObjectStore,
    prefix: &str,
    want: &BTreeMap<(i64, i64), i64>,
) {
    let rows = until(dir, &format!("every window in {prefix}/"), async || {
        let rows = published(store, prefix).await;
        let closed = rows.iter().filter(|(auction, ..)| *auction >= 0).count();
        (closed >= want.len()).then_some(rows)
    })
    .await;
    let mut got: BTreeMap<(i64, i64), i64> = BTreeMap::new();
    let mut repeated = Vec::new();
    for (auction, start, bids) in rows.into_iter().filter(|(a, ..)| *a >= 0) {
        if got.insert((auction, start), bids).is_some() {
            repeated.push((auction, start));
        }
    }
    assert!(
        repeated.is_empty(),
        "{prefix}: windows published twice: {repeated:?}"
    );
    assert_eq!(
        &got, want,
        "{prefix}: every window once, with every bid counted once"
    );
}

/// Sets the job's desired state (based on its current generation) and waits for the observed
/// phase that follows.
async fn set_state(dir: &Path, client: &HubClient, job: &str, state: DesiredState) {
    let generation = detail(client, job).await.job.generation;
    client
        .set_desired_state(
            job,
            &DesiredStateChange {
                desired_state: state,
                generation: Some(generation),
            },
        )
        .await
        .expect("desired state");
    let phase = match state {
        DesiredState::Running => ObservedPhase::Running,
        DesiredState::Stopped => ObservedPhase::Stopped,
    };
    until(dir, &format!("the job is {phase:?}"), async || {
        (detail(client, job).await.job.observed.phase == phase).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_over_three_agents_survives_an_agent_kill_and_a_hub_restart_exactly_once() {
    let broker = KafkaBroker::shared().expect("the Kafka test broker");
    let s3 = server::server().expect("the S3 test server");
    let bucket = s3.create_bucket("lanes").expect("bucket");
    let topic = unique_name("bids-lanes");
    broker.create_topic(&topic, PARTITIONS).expect("topic");
    let dir = tempfile::tempdir().expect("tempdir");
    let dir = dir.path();

    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut hub_proc = Some(hub(dir, port));
    let client = HubClient::new(&url).expect("client");
    until(dir, "the Hub answers", async || {
        client.list_agents().await.ok()
    })
    .await;
    let mut agents: BTreeMap<String, Proc> = (0..3)
        .map(|i| {
            let id = format!("agent-{i}");
            (id.clone(), agent(dir, &url, &id))
        })
        .collect();
    until(dir, "three live Agents", async || {
        let listed = client.list_agents().await.ok()?;
        (listed.len() == 3).then_some(())
    })
    .await;

    // Validate, submit stopped, inspect, then start: the flow the API documents.
    let sql = sql_for(broker, &topic, s3, &bucket, 300);
    let validated = client
        .validate(&ValidateRequest {
            name: Some("bids-lanes".into()),
            sql: Some(sql.clone()),
            spec: None,
        })
        .await
        .expect("validate");
    assert!(validated.valid, "{:?}", validated.errors);
    assert_eq!(validated.lanes, Some(LANES));
    let submitted = client
        .submit(&SubmitJob {
            name: "bids-lanes".into(),
            sql: Some(sql),
            spec: None,
            desired_state: DesiredState::Stopped,
        })
        .await
        .expect("submit");
    let job = submitted.job_id.clone();
    assert_eq!(
        detail(&client, &job).await.job.observed.phase,
        ObservedPhase::Stopped
    );
    set_state(dir, &client, &job, DesiredState::Running).await;

    // Input before the kill, and a job-level checkpoint over every lane.
    produce(broker, &topic, 0, FIRST);
    let accepted = client.checkpoint(&job).await.expect("checkpoint");
    until(dir, "a job-level checkpoint of every lane", async || {
        let d = detail(&client, &job).await;
        d.recovery_records
            .iter()
            .find(|r| r.checkpoint_id == accepted.checkpoint_id)
            .map(|r| r.lane_epochs.len())
            .filter(|&n| n == LANES as usize)
    })
    .await;

    // SIGKILL the Agent with the most lanes; the others take them over.
    let d = detail(&client, &job).await;
    let mut per_agent: BTreeMap<String, usize> = BTreeMap::new();
    for a in &d.assignments {
        if let Some(agent) = &a.agent_id {
            *per_agent.entry(agent.clone()).or_default() += 1;
        }
    }
    let victim = per_agent
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(a, _)| a.clone())
        .expect("an Agent with lanes");
    agents.remove(&victim).expect("the victim runs").kill();
    let killed_at = Instant::now();
    until(dir, "the lanes run on the other Agents", async || {
        let d = detail(&client, &job).await;
        let moved = d.assignments.len() == LANES as usize
            && d.assignments
                .iter()
                .all(|a| a.agent_id.as_deref().is_some_and(|id| id != victim));
        (moved && d.job.observed.phase == ObservedPhase::Running).then_some(())
    })
    .await;
    eprintln!(
        "the job ran again {:?} after the SIGKILL of {victim}",
        killed_at.elapsed()
    );

    // SIGKILL the Hub and start it again on the same database: nothing is lost.
    hub_proc.take().expect("the Hub runs").kill();
    hub_proc = Some(hub(dir, port));
    until(dir, "the restarted Hub knows the running job", async || {
        let d = client.job_detail(&job).await.ok()?;
        (d.job.observed.phase == ObservedPhase::Running).then_some(())
    })
    .await;

    // The rest of the input, then a record that closes every window.
    produce(broker, &topic, FIRST, FIRST + SECOND);
    produce_flush(broker, &topic, 1);
    let storage = weir::CheckpointStorage::s3(
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
    let store = storage.store.as_ref();
    assert_windows(dir, store, "out", &expected(0..FIRST + SECOND)).await;

    // A savepoint, then an upgrade to a version that writes elsewhere, started from it.
    let savepoint = client
        .savepoint(
            &job,
            &SavepointRequest {
                name: Some("before-v2".into()),
            },
        )
        .await
        .expect("savepoint");
    until(dir, "the savepoint of every lane", async || {
        let d = detail(&client, &job).await;
        d.recovery_records
            .iter()
            .any(|r| {
                r.checkpoint_id == savepoint.checkpoint_id && r.lane_epochs.len() == LANES as usize
            })
            .then_some(())
    })
    .await;
    let at_savepoint = part_names(store, "out").await;
    set_state(dir, &client, &job, DesiredState::Stopped).await;
    // A new version whose logic differs cannot restore the savepoint: refused, the job stays.
    let refused = client
        .upgrade(
            &job,
            &UpgradeRequest {
                sql: Some(
                    sql_for(broker, &topic, s3, &bucket, 300).replace("COUNT(*)", "COUNT(price)"),
                ),
                spec: None,
                savepoint_id: savepoint.checkpoint_id.clone(),
            },
        )
        .await
        .expect_err("another logic");
    assert_eq!(refused.status(), Some(409), "{refused}");
    let upgrade = client
        .upgrade(
            &job,
            &UpgradeRequest {
                sql: Some(sql_for(broker, &topic, s3, &bucket, 200)),
                spec: None,
                savepoint_id: savepoint.checkpoint_id.clone(),
            },
        )
        .await
        .expect("upgrade");
    assert_eq!(client.job_versions(&job).await.expect("versions").len(), 2);
    set_state(dir, &client, &job, DesiredState::Running).await;
    produce(broker, &topic, FIRST + SECOND, FIRST + SECOND + THIRD);
    produce_flush(broker, &topic, 2);
    let all = expected(0..FIRST + SECOND + THIRD);
    assert_windows(dir, store, "out", &all).await;
    let by_v2: Vec<String> = part_names(store, "out")
        .await
        .difference(&at_savepoint)
        .cloned()
        .collect();
    assert!(!by_v2.is_empty(), "the new version published part files");

    // Rollback: the first version again, from the same savepoint. The lanes pass over the
    // epochs the new version made durable and withdraw their output, then read the third part
    // again: every window is still there exactly once.
    set_state(dir, &client, &job, DesiredState::Stopped).await;
    let rolled_back = client
        .rollback(&job, &upgrade.upgrade_id)
        .await
        .expect("rollback");
    assert_eq!(rolled_back.state, UpgradeState::RolledBack);
    set_state(dir, &client, &job, DesiredState::Running).await;
    until(dir, "the new version's output withdrawn", async || {
        let now = part_names(store, "out").await;
        by_v2.iter().all(|f| !now.contains(f)).then_some(())
    })
    .await;
    assert_windows(dir, store, "out", &all).await;
    set_state(dir, &client, &job, DesiredState::Stopped).await;
    drop(agents);
    drop(hub_proc);
}
