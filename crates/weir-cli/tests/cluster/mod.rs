//! A Hub and Agents as real processes on 127.0.0.1, the input they read from the test kit's
//! Kafka broker and the output they write to its S3 server: what `distributed.rs` shares
//! between its proof test and its measurement.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use weir_control::{
    DesiredState, DesiredStateChange, HubClient, JobDetail, ObservedPhase, SubmitJob,
};
use weir_testkit::kafka::KafkaBroker;
use weir_testkit::s3 as server;

/// Partitions of the input topic.
pub const PARTITIONS: i32 = 8;
/// Auctions of the input: the record key, so that an auction stays in one partition.
pub const AUCTIONS: u64 = 40;
const BASE_MS: i64 = 1_700_000_000_000;
/// Event time between two records.
const STEP_MS: i64 = 20;
const WINDOW_MS: i64 = 10_000;
/// How long [`Cluster::until`] waits.
const DEADLINE: Duration = Duration::from_secs(180);

/// The `weir` binary the processes run: `WEIR_BIN` (e.g. a release build, for measurements),
/// else the one cargo built for this test.
fn weir_bin() -> PathBuf {
    std::env::var_os("WEIR_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_weir")), PathBuf::from)
}

/// A process the test started; dropping it kills it (SIGKILL) and reaps it.
pub struct Proc {
    child: Child,
}

impl Proc {
    /// Starts `weir <args>` in `dir`, its stderr in `<dir>/<name>.log`, logging at the default
    /// level a user gets (no `RUST_LOG`).
    pub fn spawn(name: &str, args: &[&str], dir: &Path) -> Proc {
        Self::spawn_with_env(name, args, dir, &[])
    }

    /// [`Proc::spawn`] with more environment variables (a fail point to arm).
    pub fn spawn_with_env(name: &str, args: &[&str], dir: &Path, env: &[(&str, &str)]) -> Proc {
        let log = std::fs::File::create(dir.join(format!("{name}.log"))).expect("log file");
        let child = Command::new(weir_bin())
            .args(args)
            .envs(env.iter().copied())
            .current_dir(dir)
            .env_remove("RUST_LOG")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        Proc { child }
    }

    /// SIGKILL, as a crash.
    pub fn kill(mut self) {
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

/// One Hub and some Agents, their logs in a temporary directory.
pub struct Cluster {
    dir: tempfile::TempDir,
    port: u16,
    lease: String,
    /// The slots of each Agent.
    slots: u32,
    hub: Option<Proc>,
    /// Options of `weir hub` beyond the listener, store and lease.
    hub_args: Vec<String>,
    /// The Agents that run, by id.
    pub agents: BTreeMap<String, Proc>,
    /// Every Agent id started, for the logs of a failure.
    names: Vec<String>,
    /// A client of the Hub, with an admin token.
    pub client: HubClient,
    /// The admin token of [`Cluster::client`].
    pub admin_token: String,
}

impl Cluster {
    /// Starts a Hub (leases of `lease`) and `agents` Agents of `slots` slots each, and waits
    /// until the Hub lists them.
    pub async fn start(agents: usize, slots: u32, lease: &str) -> Cluster {
        Self::start_with(agents, slots, lease, &[]).await
    }

    /// [`Cluster::start`] with more options for `weir hub`.
    pub async fn start_with(agents: usize, slots: u32, lease: &str, hub_args: &[&str]) -> Cluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("address")
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let admin_token = crate::hub_auth::create_token(&weir_bin(), dir.path(), "admin");
        crate::hub_auth::write_join_token(dir.path());
        let mut cluster = Cluster {
            dir,
            port,
            lease: lease.to_owned(),
            slots,
            hub: None,
            hub_args: hub_args.iter().map(|a| (*a).to_owned()).collect(),
            agents: BTreeMap::new(),
            names: Vec::new(),
            client: HubClient::new(&url)
                .expect("client")
                .with_token(admin_token.clone()),
            admin_token,
        };
        cluster.start_hub();
        cluster
            .until("the Hub answers", async |c| {
                c.client.list_agents().await.ok()
            })
            .await;
        for i in 0..agents {
            cluster.spawn_agent(&format!("agent-{i}"), &[]);
        }
        cluster.until_agents(agents).await;
        cluster
    }

    /// Starts Agent `id` with `env` added to its environment (its log in `<dir>/<id>.log`);
    /// [`Cluster::until_agents`] waits for it to register.
    pub fn spawn_agent(&mut self, id: &str, env: &[(&str, &str)]) {
        let url = format!("http://127.0.0.1:{}", self.port);
        let slots = self.slots.to_string();
        let args = [
            "agent",
            "--hub",
            url.as_str(),
            "--id",
            id,
            "--slots",
            &slots,
            "--poll-ms",
            "50",
            "--join-token-file",
            crate::hub_auth::JOIN_TOKEN_FILE,
        ];
        let proc = Proc::spawn_with_env(id, &args, self.dir.path(), env);
        self.agents.insert(id.to_owned(), proc);
        self.names.push(id.to_owned());
    }

    /// Waits until the Hub lists `n` Agents.
    pub async fn until_agents(&self, n: usize) {
        self.until("every Agent registered", async |c| {
            let listed = c.client.list_agents().await.ok()?;
            (listed.len() == n).then_some(())
        })
        .await;
    }

    fn start_hub(&mut self) {
        let listen = format!("127.0.0.1:{}", self.port);
        let mut args = vec![
            "hub",
            "--listen",
            listen.as_str(),
            "--db",
            "hub.sqlite",
            "--lease-ttl",
            self.lease.as_str(),
            "--join-token-file",
            crate::hub_auth::JOIN_TOKEN_FILE,
        ];
        args.extend(self.hub_args.iter().map(String::as_str));
        self.hub = Some(Proc::spawn("hub", &args, self.dir.path()));
    }

    /// The directory of the Hub's store and the processes' logs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The `weir` binary the processes run.
    pub fn weir(&self) -> PathBuf {
        weir_bin()
    }

    /// The Hub's address.
    pub fn hub_addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// SIGKILLs the Hub and starts it again on the same database.
    pub fn restart_hub(&mut self) {
        if let Some(hub) = self.hub.take() {
            hub.kill();
        }
        self.start_hub();
    }

    /// SIGKILLs Agent `id`.
    pub fn kill_agent(&mut self, id: &str) {
        self.agents.remove(id).expect("the Agent runs").kill();
    }

    /// Polls `check` until it gives a value, failing with `what` and the ends of the
    /// processes' logs after a while.
    pub async fn until<T>(&self, what: &str, mut check: impl AsyncFnMut(&Self) -> Option<T>) -> T {
        let started = Instant::now();
        loop {
            if let Some(v) = check(self).await {
                return v;
            }
            if started.elapsed() > DEADLINE {
                let logs: Vec<String> = std::iter::once("hub")
                    .chain(self.names.iter().map(String::as_str))
                    .map(|n| format!("--- {n}:\n{}", self.log_tail(n)))
                    .collect();
                panic!("{what}: not within {DEADLINE:?}\n{}", logs.join("\n"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn log_tail(&self, name: &str) -> String {
        let Ok(file) = std::fs::File::open(self.dir.path().join(format!("{name}.log"))) else {
            return String::new();
        };
        let lines: Vec<String> = BufReader::new(file).lines().map_while(Result::ok).collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// The job's detail.
    pub async fn detail(&self, job: &str) -> JobDetail {
        self.client.job_detail(job).await.expect("job detail")
    }

    /// Submits `sql` as job `name`, stopped; returns the job id.
    pub async fn submit(&self, name: &str, sql: String) -> String {
        self.client
            .submit(&SubmitJob {
                name: name.into(),
                sql: Some(sql),
                spec: None,
                desired_state: DesiredState::Stopped,
            })
            .await
            .expect("submit")
            .job_id
    }

    /// Sets the job's desired state, based on its current generation.
    pub async fn request(&self, job: &str, state: DesiredState) {
        let generation = self.detail(job).await.job.generation;
        self.client
            .set_desired_state(
                job,
                &DesiredStateChange {
                    desired_state: state,
                    generation: Some(generation),
                },
            )
            .await
            .expect("desired state");
    }

    /// [`Cluster::request`], then waits for the observed phase that follows.
    pub async fn set_state(&self, job: &str, state: DesiredState) {
        self.request(job, state).await;
        let phase = match state {
            DesiredState::Running => ObservedPhase::Running,
            DesiredState::Stopped => ObservedPhase::Stopped,
        };
        self.until(&format!("the job is {phase:?}"), async |c| {
            (c.detail(job).await.job.observed.phase == phase).then_some(())
        })
        .await;
    }

    /// The Agent that runs most lanes of `job`.
    pub async fn busiest_agent(&self, job: &str) -> String {
        let mut per_agent: BTreeMap<String, usize> = BTreeMap::new();
        for a in &self.detail(job).await.assignments {
            if let Some(agent) = &a.agent_id {
                *per_agent.entry(agent.clone()).or_default() += 1;
            }
        }
        per_agent
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(a, _)| a.clone())
            .expect("an Agent with lanes")
    }

    /// Waits until every one of the job's `lanes` runs on an Agent other than `gone` and the
    /// job is observed running.
    pub async fn until_moved(&self, job: &str, lanes: u32, gone: &str) {
        self.until("the lanes run on the other Agents", async |c| {
            let d = c.detail(job).await;
            let moved = d.assignments.len() == lanes as usize
                && d.assignments
                    .iter()
                    .all(|a| a.agent_id.as_deref().is_some_and(|id| id != gone));
            (moved && d.job.observed.phase == ObservedPhase::Running).then_some(())
        })
        .await;
    }
}

/// The input: records `0..before_flush`, flush 1, records `before_flush..before_flush +
/// after_flush` two windows after it, flush 2. Record `i` is auction `i % AUCTIONS` (its key).
#[derive(Debug, Clone, Copy)]
pub struct Input {
    /// Records before the first flush.
    pub before_flush: u64,
    /// Records between the first flush and the second.
    pub after_flush: u64,
}

impl Input {
    /// The event time of record `i`.
    pub fn event_time(&self, i: u64) -> i64 {
        if i < self.before_flush {
            BASE_MS + i as i64 * STEP_MS
        } else {
            self.flush_time(1) + 2 * WINDOW_MS + (i - self.before_flush) as i64 * STEP_MS
        }
    }

    /// The event time of flush `n` (1 or 2): ten windows after the records before it.
    pub fn flush_time(&self, n: u32) -> i64 {
        let first = BASE_MS + self.before_flush as i64 * STEP_MS + 10 * WINDOW_MS;
        match n {
            1 => first,
            _ => first + 2 * WINDOW_MS + self.after_flush as i64 * STEP_MS + 10 * WINDOW_MS,
        }
    }

    /// Produces records `range` to `topic`, keyed by auction.
    pub fn produce(&self, broker: &KafkaBroker, topic: &str, range: std::ops::Range<u64>) {
        let producer: BaseProducer = broker.client_config().create().expect("producer");
        for i in range {
            let auction = i % AUCTIONS;
            let ts = self.event_time(i);
            let value = format!(
                r#"{{"auction":{auction},"price":{},"date_time":{ts}}}"#,
                i % 997
            );
            let key = auction.to_string();
            loop {
                match producer.send(BaseRecord::to(topic).key(&key).payload(&value)) {
                    Ok(()) => break,
                    // A full queue: let it drain.
                    Err(_) => {
                        producer.poll(Duration::from_millis(10));
                    }
                }
            }
            producer.poll(Duration::ZERO);
        }
        producer.flush(Duration::from_secs(60)).expect("flush");
    }

    /// Flush `n`: one record far ahead in event time on every partition (auction -1), so that
    /// every partition's watermark passes every window of the records before it.
    pub fn produce_flush(&self, broker: &KafkaBroker, topic: &str, n: u32) {
        let producer: BaseProducer = broker.client_config().create().expect("producer");
        let value = format!(
            r#"{{"auction":-1,"price":0,"date_time":{}}}"#,
            self.flush_time(n)
        );
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
    pub fn expected(&self, range: std::ops::Range<u64>) -> BTreeMap<(i64, i64), i64> {
        let mut out = BTreeMap::new();
        for i in range {
            let ts = self.event_time(i);
            let start = ts - ts.rem_euclid(WINDOW_MS);
            *out.entry(((i % AUCTIONS) as i64, start)).or_insert(0) += 1;
        }
        out
    }
}

/// The job: Kafka -> tumbling 10 s windows per auction -> Parquet in `s3://<bucket>/out/`, at
/// `lanes` lanes, checkpointing every `interval_ms`.
pub fn job_sql(
    broker: &KafkaBroker,
    topic: &str,
    s3: &server::S3Server,
    bucket: &str,
    lanes: u32,
    interval_ms: u64,
) -> String {
    job_sql_into(
        (broker, topic),
        (s3, bucket),
        (lanes, interval_ms),
        "bids-lanes",
        &format!("'connector' = 'filesystem', 'path' = 's3://{bucket}/out/', 'format' = 'parquet'"),
    )
}

/// The job of [`job_sql`], named `name`, writing the table whose `WITH` options are `sink`
/// (the job's `SET 's3.*'` options reach it).
pub fn job_sql_into(
    (broker, topic): (&KafkaBroker, &str),
    (s3, bucket): (&server::S3Server, &str),
    (lanes, interval_ms): (u32, u64),
    name: &str,
    sink: &str,
) -> String {
    format!(
        r#"
SET 'job.name' = '{name}';
SET 'parallelism' = '{lanes}';
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
) WITH ({sink});

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

/// The test S3 server's bucket as an object store.
pub fn bucket_store(s3: &server::S3Server, bucket: &str) -> weir::CheckpointLocation {
    weir::CheckpointLocation::s3(
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
    .expect("store")
}

/// The names of the published part files under `prefix`.
pub async fn part_names(store: &dyn object_store::ObjectStore, prefix: &str) -> BTreeSet<String> {
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
pub async fn published(
    store: &dyn object_store::ObjectStore,
    prefix: &str,
) -> Vec<(i64, i64, i64)> {
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

/// The closed windows (auction >= 0) under `prefix` once there are as many as `want`, each
/// with the windows published more than once.
pub async fn closed_windows(
    cluster: &Cluster,
    store: &dyn object_store::ObjectStore,
    prefix: &str,
    want: usize,
) -> (BTreeMap<(i64, i64), i64>, Vec<(i64, i64)>) {
    let rows = cluster
        .until(&format!("every window in {prefix}/"), async |_| {
            let rows = published(store, prefix).await;
            let closed = rows.iter().filter(|(auction, ..)| *auction >= 0).count();
            (closed >= want).then_some(rows)
        })
        .await;
    let mut got = BTreeMap::new();
    let mut repeated = Vec::new();
    for (auction, start, bids) in rows.into_iter().filter(|(a, ..)| *a >= 0) {
        if got.insert((auction, start), bids).is_some() {
            repeated.push((auction, start));
        }
    }
    (got, repeated)
}

/// Waits until `prefix` holds as many closed windows as `want`, then checks that they are
/// exactly `want`, none twice.
pub async fn assert_windows(
    cluster: &Cluster,
    store: &dyn object_store::ObjectStore,
    prefix: &str,
    want: &BTreeMap<(i64, i64), i64>,
) {
    let (got, repeated) = closed_windows(cluster, store, prefix, want.len()).await;
    assert!(
        repeated.is_empty(),
        "{prefix}: windows published twice: {repeated:?}"
    );
    assert_eq!(
        &got, want,
        "{prefix}: every window once, with every bid counted once"
    );
}
