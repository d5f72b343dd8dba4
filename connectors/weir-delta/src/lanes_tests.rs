//! The lanes of a distributed job committing to one table on the local file system: one
//! commit per round of every lane's epochs, repeats and empty rounds, lanes that end, and
//! lanes that find a round complete at the same moment.

#![allow(clippy::unwrap_used)]

use crate::tests::{batch, expected, log_versions, read, schema, sink};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use weir_api::{Epoch, JobId, Lane, PreparedSink, SinkWriter, SubtaskIndex, TaskContext};

const LANES: u32 = 3;

/// The context of lane `lane`'s commits (and writer): job `job-lane-<lane>` of `job`.
fn lane_task(lane: u32) -> TaskContext {
    lane_of("job", lane)
}

/// The context of lane `lane` of distributed job `job` (its job id `<job>-lane-<lane>`).
fn lane_of(job: &str, lane: u32) -> TaskContext {
    TaskContext {
        lane: Some(Arc::new(Lane {
            job: JobId::new(job),
            index: lane,
            jobs: (0..LANES)
                .map(|l| JobId::new(format!("{job}-lane-{l}")))
                .collect(),
        })),
        ..TaskContext::new(
            JobId::new(format!("{job}-lane-{lane}")),
            "lake".into(),
            SubtaskIndex(0),
            1,
        )
    }
}

/// One lane: its writer (a lane runs each operator once).
struct LaneRun {
    lane: u32,
    writer: Box<dyn SinkWriter>,
}

impl LaneRun {
    async fn start(sink: &Arc<dyn PreparedSink>, lane: u32) -> LaneRun {
        let mut writer = sink.create_writer(&lane_task(lane)).await.unwrap();
        writer.begin_epochs().await.unwrap();
        LaneRun { lane, writer }
    }

    /// Writes `ids` as epoch `epoch`, pre-commits it and, as the lane's checkpoint coordinator
    /// does once the epoch is durable, commits it (`last` for the lane's final epoch).
    async fn epoch(&mut self, sink: &Arc<dyn PreparedSink>, epoch: u64, ids: &[i64], last: bool) {
        let value = self.pre_commit(epoch, ids).await;
        sink.commit_epochs(&lane_task(self.lane), &[(Epoch(epoch), vec![value])], last)
            .await
            .unwrap();
    }

    async fn pre_commit(&mut self, epoch: u64, ids: &[i64]) -> Value {
        if !ids.is_empty() {
            let dt = if ids[0] % 2 == 0 {
                "2026-12-02"
            } else {
                "2026-12-03"
            };
            self.writer.write_batch(batch(ids, dt)).await.unwrap();
        }
        self.writer.pre_commit(Epoch(epoch)).await.unwrap()
    }
}

/// The `txn` actions of commit `version` of the table in `dir`: app id -> version.
fn txns(dir: &std::path::Path, version: u64) -> BTreeMap<String, i64> {
    let text = std::fs::read_to_string(dir.join(format!("_delta_log/{version:020}.json"))).unwrap();
    text.lines()
        .filter_map(|line| {
            let action: Value = serde_json::from_str(line).unwrap();
            let txn = action.get("txn")?;
            Some((
                txn["appId"].as_str().unwrap().to_owned(),
                txn["version"].as_i64().unwrap(),
            ))
        })
        .collect()
}

fn lane_txns(round: i64, epochs: &[(u32, i64)]) -> BTreeMap<String, i64> {
    let mut want: BTreeMap<String, i64> = epochs
        .iter()
        .map(|(lane, epoch)| (format!("weir-job-lane-{lane}-lake"), *epoch))
        .collect();
    want.insert("weir-job-lake".into(), round);
    want
}

/// What is left staged for the lanes' commits.
fn staged(table: &std::path::Path) -> Vec<String> {
    let dir = table.join("_weir/lanes/weir-job-lake");
    let mut left = Vec::new();
    for lane in std::fs::read_dir(&dir).into_iter().flatten() {
        let lane = lane.unwrap();
        for file in std::fs::read_dir(lane.path()).unwrap() {
            let name = file.unwrap().file_name().into_string().unwrap();
            left.push(format!("{}/{name}", lane.file_name().to_string_lossy()));
        }
    }
    left.sort();
    left
}

/// A table in a temporary directory and a sink of it.
struct Setup {
    _dir: tempfile::TempDir,
    table: std::path::PathBuf,
    path: String,
    sink: Arc<dyn PreparedSink>,
}

impl Setup {
    async fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("t");
        let path = table.display().to_string();
        let sink = sink(json!({ "path": path }), schema()).await.unwrap();
        Setup {
            _dir: dir,
            table,
            path,
            sink,
        }
    }

    /// Every lane, started.
    async fn lanes(&self) -> Vec<LaneRun> {
        let mut lanes = Vec::new();
        for lane in 0..LANES {
            lanes.push(LaneRun::start(&self.sink, lane).await);
        }
        lanes
    }
}

#[tokio::test]
async fn every_lanes_epochs_are_one_commit_per_round() {
    let setup = Setup::new().await;
    let (table, path, sink, mut lanes) =
        (&setup.table, &setup.path, &setup.sink, setup.lanes().await);

    // Round 1: nothing is committed until the last lane staged its epoch; then one commit of
    // all three, with each lane's transaction and the job's round.
    lanes[0].epoch(sink, 1, &[0], false).await;
    lanes[1].epoch(sink, 1, &[1], false).await;
    assert_eq!(log_versions(table), vec![0]);
    lanes[2].epoch(sink, 1, &[2], false).await;
    assert_eq!(log_versions(table), vec![0, 1]);
    assert_eq!(txns(table, 1), lane_txns(1, &[(0, 1), (1, 1), (2, 1)]));
    assert_eq!(read(path, None, json!({})).await, expected(0..3));
    assert!(staged(table).is_empty(), "{:?}", staged(table));

    // Round 2: a faster lane brings two epochs, the others one each (lane 1's last).
    lanes[0].epoch(sink, 2, &[3], false).await;
    lanes[0].epoch(sink, 3, &[4], false).await;
    lanes[2].epoch(sink, 2, &[], false).await;
    assert_eq!(log_versions(table), vec![0, 1]);
    lanes[1].epoch(sink, 2, &[5], false).await;
    assert_eq!(log_versions(table), vec![0, 1, 2]);
    assert_eq!(txns(table, 2), lane_txns(2, &[(0, 3), (1, 2), (2, 2)]));

    // A recovery of lane 1 repeats epoch 2 with its pre-commit: recognised, nothing new.
    let mut again = LaneRun::start(sink, 1).await;
    let value = again.pre_commit(2, &[5]).await;
    sink.commit_epochs(&lane_task(1), &[(Epoch(2), vec![value])], false)
        .await
        .unwrap();
    assert_eq!(log_versions(table), vec![0, 1, 2]);
    // Staged again, it stays until the next round finds it committed.
    assert_eq!(staged(table), vec!["lane-1/00000000000000000002.json"]);

    // A round without rows commits nothing and leaves nothing staged.
    lanes[0].epoch(sink, 4, &[], false).await;
    lanes[1].epoch(sink, 3, &[], false).await;
    lanes[2].epoch(sink, 3, &[], false).await;
    assert_eq!(log_versions(table), vec![0, 1, 2]);
    assert!(staged(table).is_empty(), "{:?}", staged(table));

    // Lane 2's input ends: its last epoch waits for the round; the rounds after it no
    // longer wait for lane 2.
    lanes[2].epoch(sink, 4, &[6], true).await;
    lanes[0].epoch(sink, 5, &[7], false).await;
    assert_eq!(log_versions(table), vec![0, 1, 2]);
    lanes[1].epoch(sink, 4, &[8], false).await;
    assert_eq!(txns(table, 3), lane_txns(3, &[(0, 5), (1, 4), (2, 4)]));
    lanes[0].epoch(sink, 6, &[9], false).await;
    lanes[1].epoch(sink, 5, &[10], true).await;
    assert_eq!(log_versions(table), vec![0, 1, 2, 3, 4]);
    assert_eq!(txns(table, 4), lane_txns(4, &[(0, 6), (1, 5)]));
    assert_eq!(staged(table), vec!["lane-1/end.json", "lane-2/end.json"]);
    // Lane 0 ends last: its final epoch is committed at once.
    lanes[0].epoch(sink, 7, &[11], true).await;
    assert_eq!(txns(table, 5), lane_txns(5, &[(0, 7)]));
    assert_eq!(read(path, None, json!({})).await, expected(0..12));
    // Each version a reader sees holds whole rounds.
    assert_eq!(read(path, Some(2), json!({})).await, expected(0..6));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lanes_that_find_a_round_complete_at_once_commit_it_once() {
    let setup = Setup::new().await;
    let (table, path, sink, mut lanes) =
        (&setup.table, &setup.path, &setup.sink, setup.lanes().await);
    const ROUNDS: u64 = 12;
    let mut next = 0_i64;
    for epoch in 1..=ROUNDS {
        // Every lane stages and looks at the same moment: several may see the round complete.
        let mut work = Vec::new();
        for lane in lanes.iter_mut() {
            let ids = [next];
            next += 1;
            let sink = sink.clone();
            work.push(async move { lane.epoch(&sink, epoch, &ids, epoch == ROUNDS).await });
        }
        futures::future::join_all(work).await;
        // The round is one commit, however many lanes raced for it.
        assert_eq!(
            log_versions(table).len() as u64,
            1 + epoch,
            "round {epoch}: {:?}",
            log_versions(table)
        );
        let want: Vec<(u32, i64)> = (0..LANES).map(|l| (l, epoch as i64)).collect();
        assert_eq!(txns(table, epoch), lane_txns(epoch as i64, &want));
    }
    assert_eq!(read(path, None, json!({})).await, expected(0..next));
}

#[tokio::test]
async fn lanes_that_read_nothing_end_without_holding_the_rounds_back() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let path = table.display().to_string();
    let sink = sink(json!({ "path": path }), schema()).await.unwrap();
    // Every lane reads nothing: no writer ever ran, there is no table, and nothing fails.
    for lane in 0..LANES {
        sink.commit_epochs(&lane_task(lane), &[], true)
            .await
            .unwrap();
    }
    assert!(!table.join("_delta_log").exists());

    // A second job's lanes: 0 and 1 read nothing and end; lane 2 commits alone.
    let other = |lane: u32| lane_of("job2", lane);
    sink.commit_epochs(&other(0), &[], true).await.unwrap();
    let mut writer = sink.create_writer(&other(2)).await.unwrap();
    writer.begin_epochs().await.unwrap();
    writer
        .write_batch(batch(&[0, 2], "2026-12-02"))
        .await
        .unwrap();
    let value = writer.pre_commit(Epoch(1)).await.unwrap();
    sink.commit_epochs(&other(2), &[(Epoch(1), vec![value])], false)
        .await
        .unwrap();
    // Lane 1 has neither staged nor ended: the round waits for it.
    assert_eq!(log_versions(&table), vec![0]);
    sink.commit_epochs(&other(1), &[], true).await.unwrap();
    assert_eq!(log_versions(&table), vec![0, 1]);
    let mut want = BTreeMap::from([("weir-job2-lake".to_owned(), 1)]);
    want.insert("weir-job2-lane-2-lake".to_owned(), 1);
    assert_eq!(txns(&table, 1), want);
    assert_eq!(read(&path, None, json!({})).await, expected([0, 2]));
}
