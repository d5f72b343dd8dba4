//! Three lanes of one job writing ONE Delta table on the S3 test server (moto): Kafka with 8
//! partitions -> tumbling windows -> Delta, at parallelism 3, with `auto-compaction` on and a
//! small `compaction.min-files`. Each lane stages its durable epochs; the lane that finds a
//! round complete commits every lane's epochs in one Delta commit, and lanes that find it at
//! once race for the log's version (on S3 each log entry is a conditional put). The Agents
//! are armed with fail points of that protocol (an epoch staged, before the round's commit,
//! after it, mid-compaction): each is SIGKILLed where it stops and an unarmed Agent takes its
//! place. A job-level checkpoint then leaves nothing with rows staged up to its epochs. At the
//! end the table, read by the Python `deltalake` reader, holds every closed window exactly
//! once with the counts the input gives, and every epoch commit is one round of all three
//! lanes: a `txn` per lane (its epochs rising from round to round) and one of the job counting
//! the rounds.

use super::cluster::{Cluster, Input, PARTITIONS, bucket_store};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use weir_control::{DesiredState, lane_job_id};
use weir_testkit::delta_readers::{DeltaS3, DeltaStorage, delta_python_history, delta_python_rows};
use weir_testkit::kafka::KafkaBroker;
use weir_testkit::s3 as server;
use weir_testkit::unique_name;

const LANES: u32 = 3;
/// Records produced at once, and the pause after each chunk.
const CHUNK: u64 = 1_000;
const PAUSE: std::time::Duration = std::time::Duration::from_millis(700);
/// The table's prefix in the bucket.
const TABLE: &str = "lake/bids_per_auction";
/// The fail points the first Agents are armed with (`WEIR_FAILPOINT`), one each.
const ARMED: [&str; 4] = [
    "delta-lane-staged@4",
    "delta-before-commit@1",
    "delta-after-commit@1",
    "delta-mid-compaction@1",
];
/// Records produced at least, and at most while an armed Agent has not stopped yet.
const AT_LEAST: u64 = 12_000;
const AT_MOST: u64 = 30_000;

/// The Agents, armed and not: kills an armed one once it stopped at its fail point and starts
/// an unarmed one in its place.
struct Agents {
    /// Armed Agents still running: id -> fail point.
    armed: BTreeMap<String, &'static str>,
    /// The fail points Agents stopped at.
    reached: Vec<&'static str>,
    started: usize,
}

impl Agents {
    fn start(cluster: &mut Cluster) -> Agents {
        let mut armed = BTreeMap::new();
        for (i, point) in ARMED.iter().enumerate() {
            let id = format!("agent-{i}");
            cluster.spawn_agent(&id, &[("WEIR_FAILPOINT", point)]);
            armed.insert(id, *point);
        }
        Agents {
            armed,
            reached: Vec::new(),
            started: ARMED.len(),
        }
    }

    /// SIGKILLs every armed Agent whose log says it reached its fail point, and starts an
    /// unarmed one for each.
    fn kill_stopped(&mut self, cluster: &mut Cluster) {
        let stopped: Vec<String> = self
            .armed
            .keys()
            .filter(|id| {
                std::fs::read_to_string(cluster.dir().join(format!("{id}.log")))
                    .is_ok_and(|log| log.contains("weir: failpoint"))
            })
            .cloned()
            .collect();
        for id in stopped {
            let point = self.armed.remove(&id).expect("armed");
            cluster.kill_agent(&id);
            eprintln!("{id} stopped at {point}: SIGKILLed");
            self.reached.push(point);
            let fresh = format!("agent-{}", self.started);
            self.started += 1;
            cluster.spawn_agent(&fresh, &[]);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_lanes_commit_rounds_to_one_delta_table_on_s3_exactly_once_through_kills() {
    let started = Instant::now();
    let broker = KafkaBroker::shared().expect("the Kafka test broker");
    let s3 = server::server().expect("the S3 test server");
    let bucket = s3.create_bucket("delta-lanes").expect("bucket");
    let topic = unique_name("bids-delta-lanes");
    broker.create_topic(&topic, PARTITIONS).expect("topic");
    let input = Input {
        before_flush: AT_MOST,
        after_flush: 0,
    };
    let mut cluster = Cluster::start(0, 3, "2s").await;
    let mut agents = Agents::start(&mut cluster);
    cluster.until_agents(ARMED.len()).await;
    let job = cluster
        .submit("bids-delta", job_sql(broker, &topic, s3, &bucket))
        .await;
    cluster.set_state(&job, DesiredState::Running).await;

    // Input in chunks that each close windows in every lane, until every armed Agent stopped
    // at its fail point (and at least AT_LEAST records).
    let mut produced = 0;
    while produced < AT_MOST && (produced < AT_LEAST || !agents.armed.is_empty()) {
        produce_in_chunks(&input, broker, &topic, produced..produced + CHUNK).await;
        produced += CHUNK;
        agents.kill_stopped(&mut cluster);
    }

    // A job-level checkpoint of every lane completes a round: every lane's rows up to its
    // epoch of the checkpoint are committed.
    let lane_epochs = job_level_checkpoint(&mut cluster, &mut agents, &job).await;
    let store = bucket_store(s3, &bucket);
    let uncommitted = uncommitted_rows(store.store.as_ref(), &job, &lane_epochs).await;
    assert!(
        uncommitted.is_empty(),
        "staged, not committed after the job-level checkpoint {lane_epochs:?}: {uncommitted:?}"
    );

    // A record that closes every window.
    input.produce_flush(broker, &topic, 1);
    let want = input.expected(0..produced);
    let uri = format!("s3://{bucket}/{TABLE}");
    let storage = DeltaStorage::S3(DeltaS3::for_server(s3));
    let deadline = Instant::now() + Duration::from_secs(240);
    let rows = loop {
        agents.kill_stopped(&mut cluster);
        let (uri, storage) = (uri.clone(), storage.clone());
        let read = tokio::task::spawn_blocking(move || delta_python_rows(&uri, None, &storage))
            .await
            .expect("the reader's thread");
        match read {
            Ok(read) => {
                let rows = windows(&read.rows);
                if rows.iter().filter(|(auction, ..)| *auction >= 0).count() >= want.len() {
                    break rows;
                }
            }
            // The kit's NOT RUN error (no Python) fails the test at once.
            Err(e) if e.to_string().contains("NOT RUN") => panic!("{e}"),
            Err(_) => {}
        }
        assert!(
            Instant::now() < deadline,
            "every window in the Delta table: not by the deadline (fail points reached: {:?})",
            agents.reached
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let mut got = BTreeMap::new();
    let mut repeated = Vec::new();
    for (auction, start, bids) in rows.into_iter().filter(|(a, ..)| *a >= 0) {
        if got.insert((auction, start), bids).is_some() {
            repeated.push((auction, start, bids));
        }
    }
    assert!(
        repeated.is_empty(),
        "windows in the Delta table twice: {} ({:?}...)",
        repeated.len(),
        &repeated[..repeated.len().min(10)]
    );
    assert_eq!(got, want, "every window once, with every bid counted once");

    // The commits: each epoch commit is a round of every lane, with the job's round number.
    let commits = log_commits(store.store.as_ref()).await;
    let lanes: Vec<String> = (0..LANES)
        .map(|lane| format!("weir-{}-", lane_job_id(&job, lane)))
        .collect();
    let mut epochs: BTreeMap<String, Vec<(i64, u64)>> = BTreeMap::new();
    let mut rounds: Vec<(i64, u64)> = Vec::new();
    let mut job_app_id = None;
    let mut compactions = 0;
    for (version, actions) in &commits {
        let info = actions
            .iter()
            .find_map(|a| a.get("commitInfo"))
            .unwrap_or_else(|| panic!("version {version} has no commitInfo"));
        let operation = info["operation"].as_str().unwrap_or_default();
        let txns: Vec<&Value> = actions.iter().filter_map(|a| a.get("txn")).collect();
        match operation {
            "CREATE TABLE" => assert_eq!(*version, 0),
            "OPTIMIZE" => {
                assert!(txns.is_empty(), "version {version}: {actions:?}");
                compactions += 1;
            }
            "STREAMING UPDATE" => {
                assert_eq!(
                    txns.len(),
                    1 + LANES as usize,
                    "version {version}: {actions:?}"
                );
                let mut in_round = BTreeSet::new();
                for txn in txns {
                    let app_id = txn["appId"].as_str().expect("appId").to_owned();
                    let number = txn["version"].as_i64().expect("txn version");
                    match lanes.iter().position(|prefix| app_id.starts_with(prefix)) {
                        Some(lane) => {
                            in_round.insert(lane);
                            epochs.entry(app_id).or_default().push((number, *version));
                        }
                        None => {
                            let known = job_app_id.get_or_insert_with(|| app_id.clone());
                            assert_eq!(*known, app_id, "version {version}: {actions:?}");
                            rounds.push((number, *version));
                        }
                    }
                }
                assert_eq!(
                    in_round.len(),
                    LANES as usize,
                    "version {version}: {actions:?}"
                );
            }
            other => panic!("version {version}: an unexpected {other} commit: {actions:?}"),
        }
    }
    let job_app_id = job_app_id.expect("a round was committed");
    assert!(
        job_app_id.starts_with(&format!("weir-{job}-")),
        "{job_app_id}"
    );
    // Rounds are numbered 1, 2, 3, ... in the log's order: none committed twice.
    let numbers: Vec<i64> = rounds.iter().map(|(n, _)| *n).collect();
    assert_eq!(numbers, (1..=rounds.len() as i64).collect::<Vec<_>>());
    assert_eq!(epochs.len(), LANES as usize, "{:?}", epochs.keys());
    for (app_id, list) in &epochs {
        for pair in list.windows(2) {
            assert!(
                pair[1].0 > pair[0].0,
                "{app_id}: epoch {} at version {} after epoch {} at version {}",
                pair[1].0,
                pair[1].1,
                pair[0].0,
                pair[0].1
            );
        }
    }
    // The Python reader sees each lane's newest epoch and the job's newest round.
    let mut ids: Vec<String> = epochs.keys().cloned().collect();
    ids.push(job_app_id.clone());
    let history = tokio::task::spawn_blocking({
        let (uri, storage, ids) = (uri.clone(), storage.clone(), ids.clone());
        move || {
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            delta_python_history(&uri, &ids, &storage)
        }
    })
    .await
    .expect("the reader's thread")
    .unwrap_or_else(|e| panic!("{e}"));
    for (app_id, list) in &epochs {
        let newest = list.last().map(|(e, _)| *e as u64);
        assert_eq!(history.app_version(app_id), newest, "{app_id}");
    }
    assert_eq!(
        history.app_version(&job_app_id),
        Some(rounds.len() as u64),
        "{job_app_id}"
    );
    // How often the lanes raced, as the Agents logged it: informative, the rows and commits
    // above are the proof.
    let mut raced: BTreeMap<&str, usize> = BTreeMap::new();
    for agent in 0..agents.started {
        let log = std::fs::read_to_string(cluster.dir().join(format!("agent-{agent}.log")))
            .unwrap_or_default();
        for said in [
            "another writer took the log's next version",
            "another writer compacted these files first",
            "compacting the Delta table failed",
        ] {
            *raced.entry(said).or_default() += log.matches(said).count();
        }
    }
    println!(
        "delta lanes: {} windows exactly once from {produced} records; {} commits: {} rounds \
         of {} lanes, {compactions} compactions; Agents stopped at {:?} and were SIGKILLed; \
         the Agents logged {raced:?}; {:.1} s",
        got.len(),
        commits.len(),
        rounds.len(),
        epochs.len(),
        agents.reached,
        started.elapsed().as_secs_f64()
    );
    assert!(
        agents.reached.len() >= 2,
        "fewer than two armed Agents reached their fail points: {:?}",
        agents.reached
    );
    // No stop: an armed Agent that never reached its fail point may still stop at it and
    // never report the lane stopped. Dropping the cluster kills every process by its PID.
}

/// A job-level checkpoint that every lane took: each lane's epoch. An armed Agent that stops at
/// its fail point meanwhile is killed and replaced, and the checkpoint asked for again once
/// the job runs.
async fn job_level_checkpoint(
    cluster: &mut Cluster,
    agents: &mut Agents,
    job: &str,
) -> BTreeMap<u32, u64> {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        assert!(
            Instant::now() < deadline,
            "no job-level checkpoint of every lane by the deadline"
        );
        agents.kill_stopped(cluster);
        let Ok(accepted) = cluster.client.checkpoint(job).await else {
            // Not running on placed lanes yet (a lane moves).
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        let asked = Instant::now();
        while asked.elapsed() < Duration::from_secs(20) {
            let d = cluster.detail(job).await;
            let epochs = d
                .recovery_records
                .iter()
                .find(|r| r.checkpoint_id == accepted.checkpoint_id)
                .map(|r| r.lane_epochs.clone())
                .filter(|epochs| epochs.len() == LANES as usize);
            if let Some(epochs) = epochs {
                return epochs;
            }
            agents.kill_stopped(cluster);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Records `range` in chunks of [`CHUNK`] (20 s of event time: two windows per auction),
/// [`PAUSE`] apart.
async fn produce_in_chunks(
    input: &Input,
    broker: &KafkaBroker,
    topic: &str,
    range: std::ops::Range<u64>,
) {
    let mut at = range.start;
    while at < range.end {
        let end = (at + CHUNK).min(range.end);
        input.produce(broker, topic, at..end);
        at = end;
        tokio::time::sleep(PAUSE).await;
    }
}

/// The job: Kafka -> tumbling 10 s windows per auction -> the Delta table `s3://<bucket>/lake/
/// bids_per_auction`, at 3 lanes, checkpointing every 300 ms, with auto-compaction.
fn job_sql(broker: &KafkaBroker, topic: &str, s3: &server::S3Server, bucket: &str) -> String {
    super::cluster::job_sql_into(
        (broker, topic),
        (s3, bucket),
        (LANES, 300),
        "bids-delta",
        &format!(
            "'connector' = 'delta', 'path' = 's3://{bucket}/{TABLE}', \
             'auto-compaction' = 'true', 'compaction.min-files' = '4'"
        ),
    )
}

/// (auction, window start ms, bids) of each row the reader printed.
fn windows(rows: &[Map<String, Value>]) -> Vec<(i64, i64, i64)> {
    rows.iter()
        .map(|r| {
            let int = |k: &str| r[k].as_i64().unwrap_or_else(|| panic!("{k}: {r:?}"));
            let start = r["window_start"]
                .as_str()
                .unwrap_or_else(|| panic!("{r:?}"));
            (int("auction"), timestamp_ms(start), int("bids"))
        })
        .collect()
}

/// `2023-11-14T22:13:20.000000` (with or without `Z`) in milliseconds since the epoch.
fn timestamp_ms(text: &str) -> i64 {
    fn bad<T>(text: &str) -> T {
        panic!("not a timestamp: {text}")
    }
    let (date, time) = (text.trim_end_matches('Z').split_once('T')).unwrap_or_else(|| bad(text));
    let num = |s: &str| s.parse::<i64>().unwrap_or_else(|_| bad(text));
    let d: Vec<i64> = date.split('-').map(num).collect();
    let (hms, fraction) = time.split_once('.').unwrap_or((time, "0"));
    let t: Vec<i64> = hms.split(':').map(num).collect();
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1])
    } else {
        (d[0], d[1])
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d[2] - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let millis = num(&format!("{fraction:0<9}")[..3]);
    (days * 86_400 + t[0] * 3_600 + t[1] * 60 + t[2]) * 1_000 + millis
}

/// The staged epochs of the lanes, at or below each lane's epoch in `upto`, that hold files
/// but are not in the table (their lane's `txn` version is below them): (lane, epoch).
async fn uncommitted_rows(
    store: &dyn object_store::ObjectStore,
    job: &str,
    upto: &BTreeMap<u32, u64>,
) -> Vec<(u32, u64)> {
    use futures::TryStreamExt;
    use object_store::ObjectStoreExt;
    let mut committed: BTreeMap<u32, i64> = BTreeMap::new();
    for (_, actions) in log_commits(store).await {
        for txn in actions.iter().filter_map(|a| a.get("txn")) {
            let app_id = txn["appId"].as_str().expect("appId");
            for lane in 0..LANES {
                if app_id.starts_with(&format!("weir-{}-", lane_job_id(job, lane))) {
                    let version = txn["version"].as_i64().expect("version");
                    let newest = committed.entry(lane).or_default();
                    *newest = (*newest).max(version);
                }
            }
        }
    }
    let staged = object_store::path::Path::from(format!("{TABLE}/_weir/lanes"));
    let listed: Vec<_> = store.list(Some(&staged)).try_collect().await.expect("list");
    let mut left = Vec::new();
    for meta in listed {
        let parts: Vec<String> = meta
            .location
            .parts()
            .map(|p| p.as_ref().to_owned())
            .collect();
        let [.., lane, file] = parts.as_slice() else {
            continue;
        };
        let (Some(lane), Some(epoch)) = (
            lane.strip_prefix("lane-")
                .and_then(|l| l.parse::<u32>().ok()),
            file.strip_suffix(".json")
                .and_then(|e| e.parse::<u64>().ok()),
        ) else {
            continue;
        };
        if upto.get(&lane).is_none_or(|&up| epoch > up)
            || committed.get(&lane).is_some_and(|&c| epoch as i64 <= c)
        {
            continue;
        }
        let Ok(got) = store.get(&meta.location).await else {
            continue; // removed since the listing: committed meanwhile
        };
        let staged: Value =
            serde_json::from_slice(&got.bytes().await.expect("body")).expect("json");
        if staged["adds"]
            .as_array()
            .is_some_and(|adds| !adds.is_empty())
        {
            left.push((lane, epoch));
        }
    }
    left
}

/// Every commit file of the table's log, by version, as its actions.
async fn log_commits(store: &dyn object_store::ObjectStore) -> Vec<(u64, Vec<Map<String, Value>>)> {
    use futures::TryStreamExt;
    use object_store::ObjectStoreExt;
    let log = object_store::path::Path::from(format!("{TABLE}/_delta_log"));
    let listed: Vec<_> = store.list(Some(&log)).try_collect().await.expect("list");
    let mut commits = Vec::new();
    for meta in listed {
        let Some(version) = meta
            .location
            .filename()
            .and_then(|f| f.strip_suffix(".json"))
            .and_then(|v| v.parse::<u64>().ok())
        else {
            continue;
        };
        let bytes = store
            .get(&meta.location)
            .await
            .expect("get")
            .bytes()
            .await
            .expect("body");
        let actions = String::from_utf8_lossy(&bytes)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).expect("a JSON action"))
            .collect();
        commits.push((version, actions));
    }
    commits.sort_by_key(|(v, _)| *v);
    commits
}
