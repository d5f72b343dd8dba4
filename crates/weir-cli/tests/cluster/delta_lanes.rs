//! Three lanes of one job writing ONE Delta table on the S3 test server (moto): Kafka with 8
//! partitions -> tumbling windows -> Delta, at parallelism 3 over three Agents, with
//! `auto-compaction` on and a small `compaction.min-files`, so that the lanes' epoch commits
//! and their compactions race for the table's versions (Delta's optimistic concurrency; on S3
//! each log entry is a conditional put). One Agent is SIGKILLed mid-run and its lanes move.
//! At the end the table, read by the Python `deltalake` reader, holds every closed window
//! exactly once with the counts the input gives, and every epoch commit carries the
//! transaction id of the lane that made it (each lane has a job id of its own), each epoch of
//! a lane in one commit at most.

use super::cluster::{Cluster, Input, PARTITIONS, bucket_store};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_lanes_commit_to_one_delta_table_on_s3_exactly_once_through_an_agent_kill() {
    let started = Instant::now();
    let broker = KafkaBroker::shared().expect("the Kafka test broker");
    let s3 = server::server().expect("the S3 test server");
    let bucket = s3.create_bucket("delta-lanes").expect("bucket");
    let topic = unique_name("bids-delta-lanes");
    broker.create_topic(&topic, PARTITIONS).expect("topic");
    let input = Input {
        before_flush: 12_000,
        after_flush: 0,
    };
    let mut cluster = Cluster::start(3, 3, "2s").await;
    let job = cluster
        .submit("bids-delta", job_sql(broker, &topic, s3, &bucket))
        .await;
    cluster.set_state(&job, DesiredState::Running).await;

    // Half the input, in chunks that each close windows in every lane, so the lanes commit
    // epochs (and compact) at the same moments, then a job-level checkpoint over every lane.
    let half = input.before_flush / 2;
    produce_in_chunks(&input, broker, &topic, 0..half).await;
    let accepted = cluster.client.checkpoint(&job).await.expect("checkpoint");
    cluster
        .until("a job-level checkpoint of every lane", async |c| {
            let d = c.detail(&job).await;
            d.recovery_records
                .iter()
                .find(|r| r.checkpoint_id == accepted.checkpoint_id)
                .map(|r| r.lane_epochs.len())
                .filter(|&n| n == LANES as usize)
        })
        .await;

    // SIGKILL the Agent with the most lanes; the others take them over.
    let victim = cluster.busiest_agent(&job).await;
    cluster.kill_agent(&victim);
    let killed_at = Instant::now();
    cluster.until_moved(&job, LANES, &victim).await;
    eprintln!(
        "the job ran again {:?} after the SIGKILL of {victim}",
        killed_at.elapsed()
    );

    // The rest of the input, then a record that closes every window.
    produce_in_chunks(&input, broker, &topic, half..input.before_flush).await;
    input.produce_flush(broker, &topic, 1);
    let want = input.expected(0..input.before_flush);
    let uri = format!("s3://{bucket}/{TABLE}");
    let storage = DeltaStorage::S3(DeltaS3::for_server(s3));
    let rows = cluster
        .until("every window in the Delta table", async |_| {
            let (uri, storage) = (uri.clone(), storage.clone());
            let read = tokio::task::spawn_blocking(move || delta_python_rows(&uri, None, &storage))
                .await
                .expect("the reader's thread");
            let read = match read {
                Ok(read) => read,
                // No table yet; the kit's NOT RUN error (no Python) fails the test at once.
                Err(e) if e.to_string().contains("NOT RUN") => panic!("{e}"),
                Err(_) => return None,
            };
            let rows = windows(&read.rows);
            (rows.iter().filter(|(auction, ..)| *auction >= 0).count() >= want.len())
                .then_some(rows)
        })
        .await;
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

    // The commits: one txn per epoch commit, of the lane that made it.
    let storage_store = bucket_store(s3, &bucket);
    let commits = log_commits(storage_store.store.as_ref()).await;
    let lanes: Vec<String> = (0..LANES)
        .map(|lane| format!("weir-{}-", lane_job_id(&job, lane)))
        .collect();
    let mut epochs: BTreeMap<String, Vec<(i64, u64)>> = BTreeMap::new();
    let (mut updates, mut compactions) = (0, 0);
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
                assert_eq!(txns.len(), 1, "version {version}: {actions:?}");
                let app_id = txns[0]["appId"].as_str().expect("appId").to_owned();
                assert!(
                    lanes.iter().any(|prefix| app_id.starts_with(prefix)),
                    "version {version}: {app_id} is no lane's ({lanes:?})"
                );
                let epoch = txns[0]["version"].as_i64().expect("txn version");
                epochs.entry(app_id).or_default().push((epoch, *version));
                updates += 1;
            }
            other => panic!("version {version}: an unexpected {other} commit: {actions:?}"),
        }
    }
    assert_eq!(
        epochs.len(),
        LANES as usize,
        "each lane commits with a transaction id of its own: {:?}",
        epochs.keys().collect::<Vec<_>>()
    );
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
    let ids: Vec<&str> = epochs.keys().map(String::as_str).collect();
    let history = tokio::task::spawn_blocking({
        let (uri, storage, ids) = (
            uri.clone(),
            storage.clone(),
            ids.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(),
        );
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
    let distinct: BTreeSet<u64> = commits.iter().map(|(v, _)| *v).collect();
    assert_eq!(distinct.len(), commits.len());
    // How often the lanes raced, as the Agents logged it (delta-rs's warnings, the sink's
    // messages): informative, the rows above are the proof.
    let mut raced: BTreeMap<&str, usize> = BTreeMap::new();
    for agent in 0..3 {
        let log = std::fs::read_to_string(cluster.dir().join(format!("agent-{agent}.log")))
            .unwrap_or_default();
        for said in [
            "table updated during transaction",
            "version already exists",
            "conflict detected",
            "another writer compacted these files first",
            "compacting the Delta table failed",
        ] {
            *raced.entry(said).or_default() += log.matches(said).count();
        }
    }
    println!(
        "delta lanes: {} windows exactly once; {} commits: {updates} epoch commits of {} lanes \
         ({:?} each), {compactions} compactions; the Agents logged {raced:?}; {:.1} s",
        got.len(),
        commits.len(),
        epochs.len(),
        epochs.values().map(Vec::len).collect::<Vec<_>>(),
        started.elapsed().as_secs_f64()
    );
    cluster.set_state(&job, DesiredState::Stopped).await;
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
