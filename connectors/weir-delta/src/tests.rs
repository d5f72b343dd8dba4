//! The sink and source against real tables on the local file system (and, in `full`, on the
//! S3 test server): epochs as single commits, repeats recognised, schemas checked,
//! partitions, compaction, log checkpoints and reads of a version.

#![allow(clippy::unwrap_used)]

use crate::{DeltaSinkFactory, DeltaSourceFactory};
use arrow::array::{Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use serde_json::{Value, json};
use std::sync::Arc;
use weir_api::{
    BadRecordPolicy, ConnectorSpec, Epoch, OperatorId, PreparedSink, Reach, SinkFactory,
    SinkWriter, SourceFactory, SubtaskIndex, TaskContext,
};

pub(crate) fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("dt", DataType::Utf8, true),
    ]))
}

pub(crate) fn batch(ids: &[i64], dt: &str) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            Arc::new(StringArray::from(vec![dt; ids.len()])),
        ],
    )
    .unwrap()
}

pub(crate) async fn sink(
    options: Value,
    input: SchemaRef,
) -> weir_api::Result<Arc<dyn PreparedSink>> {
    DeltaSinkFactory
        .prepare(
            ConnectorSpec {
                operator_id: &OperatorId::new("lake"),
                options: &options,
                options_path: "sinks[0].options",
                schema: None,
                bad_records: BadRecordPolicy::Fail,
                reach: Reach::Full,
            },
            input,
        )
        .await
}

fn task(subtask: u32, parallelism: u32) -> TaskContext {
    TaskContext::new(
        "job".into(),
        "lake".into(),
        SubtaskIndex(subtask),
        parallelism,
    )
}

/// Two subtasks write `epochs` (each a list of id ranges per subtask, all rows in
/// partition `dt`), pre-commit each epoch, and the sink commits it as a whole.
async fn run_epochs(sink: &Arc<dyn PreparedSink>, epochs: &[[&[i64]; 2]], first: u64) {
    let mut writers: Vec<Box<dyn SinkWriter>> = Vec::new();
    for s in 0..2 {
        let mut w = sink.create_writer(&task(s, 2)).await.unwrap();
        w.begin_epochs().await.unwrap();
        writers.push(w);
    }
    for (i, epoch) in epochs.iter().enumerate() {
        let e = Epoch(first + i as u64);
        let mut values = Vec::new();
        for (s, ids) in epoch.iter().enumerate() {
            if !ids.is_empty() {
                let dt = if ids[0] % 2 == 0 {
                    "2026-12-02"
                } else {
                    "2026-12-03"
                };
                writers[s].write_batch(batch(ids, dt)).await.unwrap();
            }
            values.push(writers[s].pre_commit(e).await.unwrap());
        }
        sink.commit_epochs(&task(0, 2), &[(e, values)], false)
            .await
            .unwrap();
    }
}

/// Every row of the table's version (newest if `None`), read through the source, sorted.
pub(crate) async fn read(path: &str, version: Option<u64>, extra: Value) -> Vec<(i64, String)> {
    let mut options = json!({ "path": path });
    if let Some(v) = version {
        options["version"] = json!(v);
    }
    if let (Some(o), Some(e)) = (options.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    let source = DeltaSourceFactory
        .prepare(ConnectorSpec {
            operator_id: &OperatorId::new("src"),
            options: &options,
            options_path: "sources[0].options",
            schema: None,
            bad_records: BadRecordPolicy::Fail,
            reach: Reach::Full,
        })
        .await
        .unwrap();
    let mut rows = Vec::new();
    for split in source.enumerate_splits().await.unwrap() {
        let mut reader = source.open_split(&split, &task(0, 1)).await.unwrap();
        while let Some(b) = reader.next_batch().await.unwrap() {
            let ids = b.data.column_by_name("id").unwrap();
            let ids = ids.as_any().downcast_ref::<Int64Array>().unwrap();
            let dts = b.data.column_by_name("dt").unwrap();
            let dts = dts.as_any().downcast_ref::<StringArray>().unwrap();
            for i in 0..b.data.num_rows() {
                rows.push((ids.value(i), dts.value(i).to_owned()));
            }
        }
    }
    rows.sort();
    rows
}

pub(crate) fn expected(ids: impl IntoIterator<Item = i64>) -> Vec<(i64, String)> {
    let mut rows: Vec<_> = ids
        .into_iter()
        .map(|id| {
            let dt = if id % 2 == 0 {
                "2026-12-02"
            } else {
                "2026-12-03"
            };
            (id, dt.to_owned())
        })
        .collect();
    rows.sort();
    rows
}

/// The newest version of the table in `dir` (from the names of its commit files).
pub(crate) fn log_versions(dir: &std::path::Path) -> Vec<u64> {
    let mut versions: Vec<u64> = std::fs::read_dir(dir.join("_delta_log"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".json")?.parse().ok()
        })
        .collect();
    versions.sort_unstable();
    versions
}

#[tokio::test]
async fn each_epoch_of_all_subtasks_is_one_commit_and_a_repeat_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t").display().to_string();
    let sink = sink(json!({ "path": path }), schema()).await.unwrap();
    // Preparing creates nothing: the first writer does.
    assert!(!dir.path().join("t").exists());
    run_epochs(&sink, &[[&[0, 2], &[1]], [&[4], &[3, 5]]], 1).await;
    // Version 0 creates the table; one commit per epoch, both subtasks' files in it.
    assert_eq!(log_versions(&dir.path().join("t")), vec![0, 1, 2]);
    assert_eq!(read(&path, None, json!({})).await, expected(0..6));
    assert_eq!(read(&path, Some(1), json!({})).await, expected(0..3));

    // A recovery repeats epoch 2 with the values of its pre-commits: recognised by its
    // transaction id and passed over, with no new version.
    let mut w = sink.create_writer(&task(0, 2)).await.unwrap();
    w.begin_epochs().await.unwrap();
    w.write_batch(batch(&[100], "x")).await.unwrap();
    let again = w.pre_commit(Epoch(2)).await.unwrap();
    sink.commit_epochs(&task(0, 2), &[(Epoch(2), vec![again])], false)
        .await
        .unwrap();
    assert_eq!(log_versions(&dir.path().join("t")), vec![0, 1, 2]);
    assert_eq!(read(&path, None, json!({})).await, expected(0..6));

    // An epoch without rows commits nothing.
    run_epochs(&sink, &[[&[], &[]]], 3).await;
    assert_eq!(log_versions(&dir.path().join("t")), vec![0, 1, 2]);
}

#[tokio::test]
async fn without_checkpoints_each_writer_commits_its_rows_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t").display().to_string();
    let sink = sink(json!({ "path": path }), schema()).await.unwrap();
    for (s, ids) in [(0, vec![0, 2]), (1, vec![1, 3])] {
        let mut w = sink.create_writer(&task(s, 2)).await.unwrap();
        w.write_batch(batch(&ids, "")).await.unwrap();
        // Nothing is committed before the writer's end of input.
        assert_eq!(log_versions(&dir.path().join("t")).len(), 1 + s as usize);
        w.finish().await.unwrap();
    }
    let rows: Vec<i64> = read(&path, None, json!({}))
        .await
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(rows, vec![0, 1, 2, 3]);
}

#[tokio::test]
async fn another_sink_of_the_same_table_commits_on_its_own_transaction_id() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t").display().to_string();
    let sink = sink(json!({ "path": path }), schema()).await.unwrap();
    run_epochs(&sink, &[[&[0], &[1]]], 1).await;
    // A second job (another transaction id) at epoch 1 is not taken for a repeat.
    let other = TaskContext::new("job2".into(), "lake".into(), SubtaskIndex(0), 1);
    let mut w = sink.create_writer(&other).await.unwrap();
    w.begin_epochs().await.unwrap();
    w.write_batch(batch(&[2], "")).await.unwrap();
    let v = w.pre_commit(Epoch(1)).await.unwrap();
    sink.commit_epochs(&other, &[(Epoch(1), vec![v])], false)
        .await
        .unwrap();
    assert_eq!(read(&path, None, json!({})).await.len(), 3);
}

#[tokio::test]
async fn an_existing_table_of_another_schema_is_refused_naming_the_columns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t").display().to_string();
    let first = sink(json!({ "path": path }), schema()).await.unwrap();
    run_epochs(&first, &[[&[0], &[1]]], 1).await;
    let other = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("price", DataType::Float64, true),
    ]));
    let err = sink(json!({ "path": path }), other)
        .await
        .unwrap_err()
        .to_string();
    for part in [
        "sinks[0].options",
        "`id` is long in the table but string in the sink",
        "`price` is not a column of the table",
        "the table's column `dt` is missing",
    ] {
        assert!(err.contains(part), "{part} in {err}");
    }
}

#[tokio::test]
async fn a_partitioned_table_has_hive_directories_and_reads_back_its_partition_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t").display().to_string();
    let partitioned = sink(json!({ "path": path, "partition_by": ["dt"] }), schema())
        .await
        .unwrap();
    assert!(partitioned.describe().contains("partitioned by (dt)"));
    run_epochs(&partitioned, &[[&[0, 2], &[1]], [&[4], &[3]]], 1).await;
    for part in ["dt=2026-12-02", "dt=2026-12-03"] {
        let files = std::fs::read_dir(dir.path().join("t").join(part)).unwrap();
        assert!(files.count() >= 1, "{part}");
    }
    assert_eq!(read(&path, None, json!({})).await, expected(0..5));

    let err = sink(json!({ "path": path, "partition_by": ["day"] }), schema())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("partition_by[0]"), "{err}");
}

#[tokio::test]
async fn compaction_merges_small_files_without_changing_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t").display().to_string();
    let sink = sink(
        json!({ "path": path, "partition_by": ["dt"], "auto_compaction": true,
                "compaction_min_files": 4, "compaction_file_size": 1_000_000 }),
        schema(),
    )
    .await
    .unwrap();
    let ids: Vec<[Vec<i64>; 2]> = (0..6)
        .map(|e| [vec![4 * e, 4 * e + 2], vec![4 * e + 1, 4 * e + 3]])
        .collect();
    let epochs: Vec<[&[i64]; 2]> = ids.iter().map(|[a, b]| [&a[..], &b[..]]).collect();
    run_epochs(&sink, &epochs, 1).await;
    assert_eq!(read(&path, None, json!({})).await, expected(0..24));
    // Each partition got one file per subtask and epoch (12); compaction left far fewer.
    for part in ["dt=2026-12-02", "dt=2026-12-03"] {
        let live = live_files(&path, part).await;
        assert!(live < 6, "{part}: {live} live files");
    }
    // Compaction commits are Delta OPTIMIZE commits that change no data.
    let optimize: Vec<String> = log_versions(&dir.path().join("t"))
        .into_iter()
        .map(|v| {
            std::fs::read_to_string(dir.path().join(format!("t/_delta_log/{v:020}.json"))).unwrap()
        })
        .filter(|commit| commit.contains("\"operation\":\"OPTIMIZE\""))
        .collect();
    assert!(!optimize.is_empty());
    for commit in optimize {
        assert!(!commit.contains("\"dataChange\":true"), "{commit}");
        assert!(commit.contains("\"remove\""), "{commit}");
    }
}

/// The number of files of partition `part` in the newest version of the table at `path`.
async fn live_files(path: &str, part: &str) -> usize {
    let location = crate::table::TableLocation::resolve(path, None, "p").unwrap();
    let table = location.open(None).await.unwrap().unwrap();
    table
        .snapshot()
        .unwrap()
        .log_data()
        .iter()
        .filter(|f| f.path().starts_with(part))
        .count()
}

#[tokio::test]
async fn the_log_gets_a_checkpoint_every_interval_commits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t").display().to_string();
    let sink = sink(json!({ "path": path, "checkpoint_interval": 3 }), schema())
        .await
        .unwrap();
    let ids: Vec<[Vec<i64>; 2]> = (0..4).map(|e| [vec![2 * e], vec![2 * e + 1]]).collect();
    let epochs: Vec<[&[i64]; 2]> = ids.iter().map(|[a, b]| [&a[..], &b[..]]).collect();
    run_epochs(&sink, &epochs, 1).await;
    let last = std::fs::read_to_string(dir.path().join("t/_delta_log/_last_checkpoint")).unwrap();
    // Versions 0 (the table's creation) to 4; a checkpoint where version + 1 is a multiple of 3.
    assert!(last.contains("\"version\":2"), "{last}");
    assert_eq!(read(&path, None, json!({})).await, expected(0..8));
}

#[tokio::test]
async fn a_missing_table_is_a_located_error_for_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let options = json!({ "path": dir.path().join("none").display().to_string() });
    let err = DeltaSourceFactory
        .prepare(ConnectorSpec {
            operator_id: &OperatorId::new("src"),
            options: &options,
            options_path: "sources[0].options",
            schema: None,
            bad_records: BadRecordPolicy::Fail,
            reach: Reach::Full,
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("sources[0].options.path"), "{err}");
    assert!(err.to_string().contains("no Delta table"), "{err}");
}

/// Against the S3 test server (moto): commits are conditional puts, and the table reads back.
mod full {
    use super::*;

    #[tokio::test]
    async fn a_table_on_s3_commits_epochs_once() {
        let server = match weir_testkit::s3::server() {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        let bucket = server.create_bucket("delta").unwrap();
        let s3 = json!({
            "endpoint": server.endpoint(),
            "region": weir_testkit::s3::REGION,
            "access_key_id": weir_testkit::s3::ACCESS_KEY_ID,
            "secret_access_key": weir_testkit::s3::SECRET_ACCESS_KEY,
            "allow_http": true,
            "path_style": true,
        });
        let path = format!("s3://{bucket}/lake/t");
        let sink = sink(
            json!({ "path": path, "s3": s3, "partition_by": ["dt"] }),
            schema(),
        )
        .await
        .unwrap();
        run_epochs(&sink, &[[&[0, 2], &[1]], [&[4], &[3]]], 1).await;
        // A repeat of epoch 2 is recognised.
        run_epochs(&sink, &[[&[40], &[41]]], 2).await;
        assert_eq!(read(&path, None, json!({ "s3": s3 })).await, expected(0..5));
        assert_eq!(
            read(&path, Some(1), json!({ "s3": s3 })).await,
            expected(0..3)
        );
    }
}

/// Two committers that planned a compaction from the same version of the table (two lanes of a
/// job compacting after their epochs) merge the same small files: the second must not commit
/// its merge on top of the first, or every row of those files is in the table twice.
#[tokio::test]
async fn two_compactions_of_the_same_files_from_the_same_version_commit_only_one_merge() {
    use crate::compaction::{Compaction, compact};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t").display().to_string();
    let sink = sink(json!({ "path": path }), schema()).await.unwrap();
    let ids: Vec<[Vec<i64>; 2]> = (0..4).map(|e| [vec![2 * e], vec![2 * e + 1]]).collect();
    let epochs: Vec<[&[i64]; 2]> = ids.iter().map(|[a, b]| [&a[..], &b[..]]).collect();
    run_epochs(&sink, &epochs, 1).await;
    let location = crate::table::TableLocation::resolve(&path, None, "p").unwrap();
    // Both read the table before either commits.
    let first = location.open(None).await.unwrap().unwrap();
    let second = location.open(None).await.unwrap().unwrap();
    let policy = Compaction {
        target_size: 1_000_000,
        min_files: 4,
    };
    assert_eq!(compact(&first, &location, policy).await.unwrap(), 8);
    // The second finds its files merged away by the first: it commits nothing.
    assert_eq!(compact(&second, &location, policy).await.unwrap(), 0);
    assert_eq!(read(&path, None, json!({})).await, expected(0..8));
    assert_eq!(live_files(&path, "").await, 1);

    // A compaction whose version another writer took with an append (not touching its files)
    // is committed on the next version: its files are still live.
    let more: Vec<[Vec<i64>; 2]> = (4..8).map(|e| [vec![2 * e], vec![2 * e + 1]]).collect();
    let epochs: Vec<[&[i64]; 2]> = more.iter().map(|[a, b]| [&a[..], &b[..]]).collect();
    run_epochs(&sink, &epochs, 5).await;
    let stale = location.open(None).await.unwrap().unwrap();
    run_epochs(&sink, &[[&[16], &[17]]], 9).await;
    assert!(compact(&stale, &location, policy).await.unwrap() >= 4);
    assert_eq!(read(&path, None, json!({})).await, expected(0..18));
}

/// Writers that find no table and create it at the same moment (the subtasks of a sink, the
/// lanes of a job): one creates version 0, the others open it. None commits a second
/// `CREATE TABLE` (delta-rs retries a creation that lost version 0 on version 1, replacing the
/// table's metadata and id).
#[tokio::test]
async fn writers_creating_the_table_at_once_make_one_creation_commit() {
    let dir = tempfile::tempdir().unwrap();
    let location = crate::table::TableLocation::resolve(
        &dir.path().join("t").display().to_string(),
        None,
        "p",
    )
    .unwrap();
    let schema = crate::schema::delta_schema(&schema(), "p").unwrap();
    let create = || location.open_or_create(&schema, &[], 10);
    let (a, b, c) = tokio::join!(create(), create(), create());
    let ids: Vec<String> = [a, b, c]
        .into_iter()
        .map(|t| t.unwrap().snapshot().unwrap().metadata().id().to_owned())
        .collect();
    assert_eq!(log_versions(&dir.path().join("t")), vec![0]);
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
}
