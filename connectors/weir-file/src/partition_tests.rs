//! Partitioned tables: the sink writes Hive-style directories without the partition columns,
//! with exactly-once epochs and partition commits; the source reads them back typed and skips
//! the directories a predicate rules out.

#![allow(clippy::unwrap_used)]

use crate::test_support::{ctx, prepare, read_all, spec};
use crate::{FileSinkFactory, FileSourceFactory};
use arrow::array::{ArrayRef, Int32Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use serde_json::json;
use std::sync::Arc;
use weir_api::{
    BadRecordPolicy, Epoch, PreparedSink, PreparedSource, PruneCondition, SinkFactory,
    SourceFactory, SourcePredicate, Watermark,
};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("dt", DataType::Utf8, true),
        Field::new("hour", DataType::Int32, true),
    ]))
}

/// Rows `(id, dt, hour)`.
fn rows(rows: &[(i64, Option<&str>, i32)]) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))) as ArrayRef,
            Arc::new(StringArray::from_iter(rows.iter().map(|r| r.1))),
            Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.2))),
        ],
    )
    .unwrap()
}

async fn sink(options: serde_json::Value) -> weir_api::Result<Arc<dyn PreparedSink>> {
    let mut spec = spec(&options, None, BadRecordPolicy::Fail);
    spec.options_path = "sinks[0].options";
    FileSinkFactory::new().prepare(spec, schema()).await
}

/// Files below `dir` (not staged ones), relative to it, sorted.
fn files(dir: &std::path::Path) -> Vec<String> {
    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let relative = path.strip_prefix(root).unwrap().display().to_string();
                if !relative.starts_with("_staging") {
                    out.push(relative);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The partition directories of `files` that hold a file named `name`.
fn with(files: &[String], name: &str) -> Vec<String> {
    files
        .iter()
        .filter_map(|f| f.strip_suffix(&format!("/{name}")).map(str::to_owned))
        .collect()
}

async fn source(path: &std::path::Path, format: &str) -> Arc<dyn PreparedSource> {
    prepare(
        json!({ "path": path.display().to_string(), "format": format, "partition_by": ["dt", "hour"] }),
        Some(schema()),
        BadRecordPolicy::Fail,
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn rows_go_to_hive_directories_without_their_partition_columns_and_read_back() {
    for format in ["csv", "json", "parquet"] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let sink = sink(json!({
            "path": out.display().to_string(), "format": format, "partition_by": ["dt", "hour"],
            "rows_per_file": 2, "max_open_partitions": 2,
        }))
        .await
        .unwrap();
        let mut writer = sink.create_writer(&ctx(0)).await.unwrap();
        // Out of order, late (hour 10 after 11), a value to escape and a null.
        writer
            .write_batch(rows(&[
                (1, Some("2026-12-02"), 11),
                (2, Some("2026-12-02"), 10),
                (3, Some("a/b"), 1),
                (4, Some("2026-12-02"), 11),
                (5, None, 0),
            ]))
            .await
            .unwrap();
        writer
            .write_batch(rows(&[
                (6, Some("2026-12-02"), 11),
                (7, Some("2026-12-02"), 10),
            ]))
            .await
            .unwrap();
        writer.finish().await.unwrap();
        let written = files(&out);
        let mut dirs: Vec<String> = written
            .iter()
            .map(|f| f.rsplit_once('/').unwrap().0.to_owned())
            .collect();
        dirs.dedup();
        assert_eq!(
            dirs,
            [
                "dt=2026-12-02/hour=10",
                "dt=2026-12-02/hour=11",
                "dt=__HIVE_DEFAULT_PARTITION__/hour=0",
                "dt=a%2Fb/hour=1",
            ],
            "{format}"
        );
        // Three rows of hour 11 roll into two files (2 rows per file).
        assert_eq!(
            written.iter().filter(|f| f.contains("hour=11/")).count(),
            2,
            "{format}"
        );
        if format == "csv" {
            let text = std::fs::read_to_string(out.join(&written[0])).unwrap();
            assert_eq!(
                text.lines().next(),
                Some("id"),
                "no partition columns in files"
            );
        }
        let source = source(&out, format).await;
        assert_eq!(source.schema(), schema());
        let mut all = read_all(&source).await.unwrap();
        all.sort();
        assert_eq!(
            all,
            [
                "1|2026-12-02|11",
                "2|2026-12-02|10",
                "3|a/b|1",
                "4|2026-12-02|11",
                "5|∅|0",
                "6|2026-12-02|11",
                "7|2026-12-02|10",
            ],
            "{format}"
        );
        // A WHERE on the partition columns skips the other directories' files.
        let predicate = SourcePredicate::resolve(
            &[
                PruneCondition {
                    column: "dt".into(),
                    op: weir_api::PruneOp::Eq,
                    value: Some(json!("2026-12-02")),
                },
                PruneCondition {
                    column: "hour".into(),
                    op: weir_api::PruneOp::GtEq,
                    value: Some(json!(11)),
                },
            ],
            &schema(),
        )
        .unwrap();
        let pruned = source.prune(&predicate).unwrap();
        assert_eq!(
            pruned.enumerate_splits().await.unwrap().len(),
            2,
            "{format}"
        );
        assert!(
            pruned.describe().contains("partition directories"),
            "{format}"
        );
        let mut kept = read_all(&pruned).await.unwrap();
        kept.sort();
        assert_eq!(
            kept,
            ["1|2026-12-02|11", "4|2026-12-02|11", "6|2026-12-02|11"]
        );
        // Projection: a partition column alone, and with a file column.
        let hours = pruned.project(&[2]).unwrap();
        assert_eq!(read_all(&hours).await.unwrap(), ["11", "11", "11"]);
        let ids = source.project(&[0, 2]).unwrap();
        assert_eq!(read_all(&ids).await.unwrap().len(), 7);
    }
}

#[tokio::test]
async fn partition_options_are_checked_with_their_paths() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().display().to_string();
    let err = sink(json!({ "path": path, "format": "csv", "partition_by": ["day"] }))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("sinks[0].options.partition_by[0]"),
        "{err}"
    );
    assert!(err.to_string().contains("`day`"), "{err}");
    let err =
        sink(json!({ "path": path, "format": "csv", "partition_commit_policy": "success-file" }))
            .await
            .unwrap_err();
    assert!(err.to_string().contains("partition_by"), "{err}");
    let err = sink(json!({
        "path": path, "format": "csv", "partition_by": ["dt"],
        "partition_commit_policy": "success-file", "partition_commit_trigger": "partition-time",
        "partition_time_pattern": "$day",
    }))
    .await
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("sinks[0].options.partition_time_pattern"),
        "{err}"
    );
    // A directory value that is not of the column's type names the file.
    std::fs::create_dir_all(dir.path().join("in/dt=x/hour=noon")).unwrap();
    std::fs::write(dir.path().join("in/dt=x/hour=noon/a.csv"), "id\n1\n").unwrap();
    let source = source(&dir.path().join("in"), "csv").await;
    let err = read_all(&source).await.unwrap_err();
    assert!(err.to_string().contains("hour=noon/a.csv"), "{err}");
}

/// Epoch mode with partition-time commits: files are published by epoch, each partition's
/// success file only once the watermark passed its time plus the delay and the epoch of its last
/// files is committed; commits repeat harmlessly; withdrawal finds files in partitions.
#[tokio::test]
async fn epochs_publish_partitions_and_commit_them_by_partition_time() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let sink = sink(json!({
        "path": out.display().to_string(), "format": "json", "partition_by": ["dt", "hour"],
        "partition_commit_policy": "success-file", "partition_commit_trigger": "partition-time",
        "partition_commit_delay": "1 h", "partition_time_pattern": "$dt $hour:00:00",
    }))
    .await
    .unwrap();
    assert!(
        sink.describe()
            .ends_with("; partitioned by dt, hour; commits partitions with _SUCCESS")
    );
    let hour = |h: i64| h * 3_600_000 + 1_796_169_600_000; // 2026-12-02 00:00 UTC + h hours
    let mut writer = sink.create_writer(&ctx(0)).await.unwrap();
    writer.begin_epochs().await.unwrap();
    writer
        .write_batch(rows(&[
            (1, Some("2026-12-02"), 10),
            (2, Some("2026-12-02"), 11),
        ]))
        .await
        .unwrap();
    writer
        .on_watermark(Watermark(weir_api::EventTimeMs(hour(11))))
        .await
        .unwrap();
    let t1 = writer.pre_commit(Epoch(1)).await.unwrap();
    // Hour 10 + 1 h delay <= watermark 11:00: committed with epoch 1; hour 11 waits.
    assert_eq!(t1["partitions"], json!(["dt=2026-12-02/hour=10"]));
    assert_eq!(t1["pending"], json!(["dt=2026-12-02/hour=11"]));
    assert!(files(&out).is_empty(), "nothing visible before the commit");
    sink.commit_epoch(&ctx(0), std::slice::from_ref(&t1))
        .await
        .unwrap();
    let after1 = files(&out);
    assert_eq!(with(&after1, "_SUCCESS"), ["dt=2026-12-02/hour=10"]);
    // A late row for hour 10 re-opens it; the final watermark commits everything.
    writer
        .write_batch(rows(&[
            (3, Some("2026-12-02"), 10),
            (4, Some("2026-12-02"), 12),
        ]))
        .await
        .unwrap();
    writer.on_watermark(Watermark::END).await.unwrap();
    let t2 = writer.pre_commit(Epoch(2)).await.unwrap();
    writer.finish().await.unwrap();
    assert_eq!(
        t2["partitions"],
        json!([
            "dt=2026-12-02/hour=10",
            "dt=2026-12-02/hour=11",
            "dt=2026-12-02/hour=12"
        ])
    );
    // A replay of both commits (recovery) is harmless.
    for _ in 0..2 {
        sink.commit_epoch(&ctx(0), &[t1.clone(), t2.clone()])
            .await
            .unwrap();
    }
    let after2 = files(&out);
    assert_eq!(with(&after2, "_SUCCESS").len(), 3);
    let data: Vec<&String> = after2.iter().filter(|f| !f.ends_with("_SUCCESS")).collect();
    assert_eq!(data.len(), 4, "{after2:?}");
    let source = source(&out, "json").await;
    let mut all = read_all(&source).await.unwrap();
    all.sort();
    assert_eq!(
        all,
        [
            "1|2026-12-02|10",
            "2|2026-12-02|11",
            "3|2026-12-02|10",
            "4|2026-12-02|12"
        ]
    );
    // Withdrawing epoch 2 finds its files in their partition directories.
    let withdrawn = sink.withdraw_after(&ctx(0), Epoch(1)).await.unwrap();
    assert_eq!(withdrawn.len(), 2, "{withdrawn:?}");
    assert!(
        withdrawn
            .iter()
            .all(|w| w.contains("/dt=2026-12-02/hour=1"))
    );
    assert_eq!(read_all(&source).await.unwrap().len(), 2);
    sink.abort_uncommitted(&ctx(0), &[]).await.unwrap();
}

/// A writer created after a recovery commit adopts the partitions the restored epoch left
/// pending, so the end of input commits them although no row reaches them again.
#[tokio::test]
async fn a_restored_run_commits_the_partitions_left_pending() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let options = json!({
        "path": out.display().to_string(), "format": "json", "partition_by": ["dt", "hour"],
        "partition_commit_policy": "success-file", "partition_commit_trigger": "process-time",
        "partition_commit_delay": "1 h", "partition_success_file_name": "_DONE",
    });
    let first = sink(options.clone()).await.unwrap();
    let mut writer = first.create_writer(&ctx(1)).await.unwrap();
    writer.begin_epochs().await.unwrap();
    writer
        .write_batch(rows(&[(1, Some("d"), 1)]))
        .await
        .unwrap();
    let t1 = writer.pre_commit(Epoch(1)).await.unwrap();
    assert_eq!(t1["pending"], json!(["dt=d/hour=1"]));
    drop(writer); // the run fails

    let second = sink(options).await.unwrap();
    second
        .commit_epoch(&ctx(1), std::slice::from_ref(&t1))
        .await
        .unwrap();
    second.abort_uncommitted(&ctx(1), &[]).await.unwrap();
    let mut writer = second.create_writer(&ctx(1)).await.unwrap();
    writer.begin_epochs().await.unwrap();
    writer
        .write_batch(rows(&[(2, Some("e"), 2)]))
        .await
        .unwrap();
    writer.on_watermark(Watermark::END).await.unwrap();
    let t2 = writer.pre_commit(Epoch(2)).await.unwrap();
    second
        .commit_epoch(&ctx(1), std::slice::from_ref(&t2))
        .await
        .unwrap();
    assert_eq!(with(&files(&out), "_DONE"), ["dt=d/hour=1", "dt=e/hour=2"]);
}

#[tokio::test]
async fn without_checkpoints_finish_commits_every_partition() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let sink = sink(json!({
        "path": out.display().to_string(), "format": "parquet", "partition_by": ["dt"],
        "partition_commit_policy": "success-file", "max_open_partitions": 1,
    }))
    .await
    .unwrap();
    let mut writer = sink.create_writer(&ctx(0)).await.unwrap();
    // One open partition at a time: alternating partitions roll files.
    for i in 0..4 {
        let dt = if i % 2 == 0 { "a" } else { "b" };
        writer.write_batch(rows(&[(i, Some(dt), 0)])).await.unwrap();
    }
    writer.finish().await.unwrap();
    let written = files(&out);
    assert_eq!(with(&written, "_SUCCESS"), ["dt=a", "dt=b"]);
    assert_eq!(written.len(), 6, "{written:?}");
    let source = FileSourceFactory::new()
        .prepare(spec(
            &json!({ "path": out.display().to_string(), "partition_by": ["dt"] }),
            None,
            BadRecordPolicy::Fail,
        ))
        .await
        .unwrap();
    // Inferred: the partition column is a string after the files' columns.
    assert_eq!(source.schema().field(2).name(), "dt");
    assert_eq!(read_all(&source).await.unwrap().len(), 4);
}

#[tokio::test]
async fn partition_values_are_typed_by_the_declared_schema() {
    let dir = tempfile::tempdir().unwrap();
    crate::test_support::write(dir.path(), "t/day=2026-12-02/n=7/a.csv", "id\n1\n2\n");
    crate::test_support::write(dir.path(), "t/day=2026-12-03/n=-1/b.csv", "id\n3\n");
    let declared = Arc::new(Schema::new(vec![
        Field::new("day", DataType::Date32, false),
        Field::new("id", DataType::Int64, false),
        Field::new("n", DataType::Int64, false),
    ]));
    let source = prepare(
        json!({ "path": dir.path().join("t").display().to_string(), "format": "csv",
                "partition_by": ["day", "n"] }),
        Some(declared.clone()),
        BadRecordPolicy::Fail,
    )
    .await
    .unwrap();
    assert_eq!(source.schema(), declared);
    assert_eq!(
        read_all(&source).await.unwrap(),
        ["2026-12-02|1|7", "2026-12-02|2|7", "2026-12-03|3|-1"]
    );
    let predicate = SourcePredicate::resolve(
        &[PruneCondition {
            column: "day".into(),
            op: weir_api::PruneOp::Gt,
            value: Some(json!("2026-12-02")),
        }],
        &declared,
    )
    .unwrap();
    let pruned = source.prune(&predicate).unwrap();
    assert_eq!(read_all(&pruned).await.unwrap(), ["2026-12-03|3|-1"]);
}
