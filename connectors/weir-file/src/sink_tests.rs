//! Tests of the file sink: part files, atomic publication, epoch transactions.

use super::*;
use crate::FileSourceFactory;
use crate::test_support::{ctx, prepare, read_all, render, spec};
use arrow::array::{ArrayRef, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use futures::TryStreamExt;
use object_store::ObjectStore;
use serde_json::json;
use weir_api::{BadRecordPolicy, SourceFactory};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
    ]))
}

fn batch(ids: std::ops::Range<i64>) -> RecordBatch {
    let names: StringArray = ids
        .clone()
        .map(|i| (i % 3 != 0).then(|| format!("n{i}")))
        .collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(ids)) as ArrayRef,
            Arc::new(names),
        ],
    )
    .unwrap()
}

async fn sink(
    factory: &FileSinkFactory,
    options: serde_json::Value,
) -> Result<Arc<dyn PreparedSink>> {
    let mut spec = spec(&options, None, BadRecordPolicy::Fail);
    spec.options_path = "sinks[0].options";
    factory.prepare(spec, schema()).await
}

/// File names in `dir`, sorted (the directory may not exist yet).
fn names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// What an object-store reader lists under `dir`.
async fn listed(dir: &std::path::Path) -> Vec<String> {
    let store = object_store::local::LocalFileSystem::new_with_prefix(dir).unwrap();
    let metas: Vec<_> = store.list(None).try_collect().await.unwrap();
    metas.into_iter().map(|m| m.location.to_string()).collect()
}

#[tokio::test]
async fn each_format_round_trips_through_rolling_part_files() {
    let expected = render(&batch(0..10));
    for (format, compression) in [("csv", None), ("json", None), ("parquet", Some("zstd"))] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let mut options =
            json!({ "path": out.display().to_string(), "format": format, "rows_per_file": 4 });
        if let Some(compression) = compression {
            options["compression"] = json!(compression);
        }
        let sink = sink(&FileSinkFactory::new(), options).await.unwrap();
        assert_eq!(sink.capabilities(), [SinkCapability::StagedAtomicCommit]);
        let mut writer = sink.create_writer(&ctx(1)).await.unwrap();
        writer.write_batch(batch(0..3)).await.unwrap();
        writer.write_batch(batch(3..3)).await.unwrap();
        writer.write_batch(batch(3..10)).await.unwrap();
        writer.finish().await.unwrap();

        let files = names(&out);
        assert_eq!(files.len(), 3, "{format}: {files:?}");
        let unique = &files[0]["part-00001-00000-".len()..files[0].len() - format.len() - 1];
        assert_eq!(unique.len(), 36, "{format}: {files:?}");
        for (seq, file) in files.iter().enumerate() {
            assert_eq!(*file, format!("part-00001-{seq:05}-{unique}.{format}"));
        }
        let source = prepare(
            json!({ "path": out.display().to_string() }),
            Some(schema()),
            BadRecordPolicy::Fail,
        )
        .await
        .unwrap();
        assert_eq!(read_all(&source).await.unwrap(), expected, "{format}");
    }
}

#[tokio::test]
async fn bytes_per_file_rolls_after_each_batch() {
    let dir = tempfile::tempdir().unwrap();
    let options =
        json!({ "path": dir.path().display().to_string(), "format": "csv", "bytes_per_file": 1 });
    let sink = sink(&FileSinkFactory::new(), options).await.unwrap();
    let mut writer = sink.create_writer(&ctx(0)).await.unwrap();
    writer.write_batch(batch(0..2)).await.unwrap();
    writer.write_batch(batch(2..5)).await.unwrap();
    writer.finish().await.unwrap();
    assert_eq!(names(dir.path()).len(), 2);
    let options = json!({ "path": dir.path().display().to_string() });
    let source = prepare(options, Some(schema()), BadRecordPolicy::Fail)
        .await
        .unwrap();
    assert_eq!(read_all(&source).await.unwrap(), render(&batch(0..5)));
}

#[tokio::test]
async fn unfinished_files_are_never_visible() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().display().to_string();
    // Tiny upload parts, so a file is staged as a multipart upload after the first batch.
    let factory = FileSinkFactory::new().with_upload_bytes(64);
    for format in ["json", "parquet"] {
        let options = json!({ "path": path, "format": format });
        let sink = sink(&factory, options).await.unwrap();

        let mut aborted = sink.create_writer(&ctx(0)).await.unwrap();
        aborted.write_batch(batch(0..50)).await.unwrap();
        aborted.write_batch(batch(50..100)).await.unwrap();
        if format == "json" {
            // Text formats upload per batch: the file is staged under a `#` name.
            assert!(
                names(dir.path()).iter().any(|n| n.contains('#')),
                "{format}"
            );
        }
        assert!(
            names(dir.path()).iter().all(|n| n.contains('#')),
            "{format}: {:?}",
            names(dir.path())
        );
        assert!(listed(dir.path()).await.is_empty(), "{format}");
        aborted.abort().await.unwrap();
        assert!(
            names(dir.path()).is_empty(),
            "{format}: {:?}",
            names(dir.path())
        );

        let mut dropped = sink.create_writer(&ctx(1)).await.unwrap();
        dropped.write_batch(batch(0..50)).await.unwrap();
        drop(dropped);
        assert!(
            names(dir.path()).iter().all(|n| n.contains('#')),
            "{format}"
        );
        assert!(listed(dir.path()).await.is_empty(), "{format}");
        let err = prepare(json!({ "path": path }), None, BadRecordPolicy::Fail)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no files match"), "{err}");

        let mut finished = sink.create_writer(&ctx(2)).await.unwrap();
        finished.write_batch(batch(0..50)).await.unwrap();
        finished.finish().await.unwrap();
        let visible = listed(dir.path()).await;
        assert_eq!(visible.len(), 1, "{format}: {visible:?}");
        assert!(visible[0].starts_with("part-00002-00000-"), "{visible:?}");
        std::fs::remove_file(dir.path().join(&visible[0])).unwrap();
    }
}

#[tokio::test]
async fn bad_sink_options_are_config_errors() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f.csv");
    std::fs::write(&file, "x").unwrap();
    let factory = FileSinkFactory::new();
    for (options, field) in [
        (
            json!({ "path": format!("{}/*.csv", dir.path().display()), "format": "csv" }),
            "path",
        ),
        (
            json!({ "path": file.display().to_string(), "format": "csv" }),
            "path",
        ),
        (
            json!({ "path": "out", "format": "json", "compression": "zstd" }),
            "compression",
        ),
        (
            json!({ "path": "out", "format": "json", "rows_per_file": 0 }),
            "rows_per_file",
        ),
        (json!({ "path": "out", "format": "avro" }), "format"),
    ] {
        let err = sink(&factory, options).await.unwrap_err();
        assert!(
            matches!(&err, Error::Config { path, .. } if path == &format!("sinks[0].options.{field}")),
            "{err}"
        );
    }
    let nested = Arc::new(Schema::new(vec![Field::new(
        "l",
        DataType::List(Arc::new(Field::new("item", DataType::Int32, true))),
        true,
    )]));
    let options = json!({ "path": "out", "format": "csv" });
    let err = factory
        .prepare(spec(&options, None, BadRecordPolicy::Fail), nested)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Schema { .. }), "{err}");
}

#[tokio::test]
async fn memory_round_trip_through_a_shared_registry() {
    let registry: Arc<dyn ObjectStoreRegistry> = Arc::new(DefaultObjectStoreRegistry::new());
    let options = json!({ "path": "memory:///out/", "format": "parquet" });
    let sink = sink(&FileSinkFactory::with_registry(registry.clone()), options)
        .await
        .unwrap();
    assert_eq!(sink.describe(), "file: parquet memory:///out/");
    let mut writer = sink.create_writer(&ctx(0)).await.unwrap();
    writer.write_batch(batch(0..5)).await.unwrap();
    writer.finish().await.unwrap();
    let options = json!({ "path": "memory:///out/" });
    let source = FileSourceFactory::with_registry(registry)
        .prepare(spec(&options, None, BadRecordPolicy::Fail))
        .await
        .unwrap();
    let splits = source.enumerate_splits().await.unwrap();
    assert_eq!(splits.len(), 1);
    assert!(
        splits[0].id.starts_with("memory:///out/part-00000-00000-"),
        "{}",
        splits[0].id
    );
    assert_eq!(read_all(&source).await.unwrap(), render(&batch(0..5)));
}

/// Published (visible) file names in `dir`.
fn published(dir: &std::path::Path) -> Vec<String> {
    names(dir)
        .into_iter()
        .filter(|n| !n.starts_with('_'))
        .collect()
}

/// Files below `dir` (recursively), relative to it.
fn all_files(dir: &std::path::Path) -> Vec<String> {
    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.push(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn final_names(tx: &serde_json::Value) -> Vec<String> {
    tx["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["final"].as_str().unwrap().to_owned())
        .collect()
}

/// Writes epochs 1 (rows 0..6, two files) and 2 (rows 6..9) and returns their pre-commits.
async fn two_epochs(sink: &Arc<dyn PreparedSink>) -> (serde_json::Value, serde_json::Value) {
    let mut writer = sink.create_writer(&ctx(1)).await.unwrap();
    writer.begin_epochs().await.unwrap();
    writer.write_batch(batch(0..6)).await.unwrap();
    let t1 = writer.pre_commit(Epoch(1)).await.unwrap();
    writer.write_batch(batch(6..9)).await.unwrap();
    let t2 = writer.pre_commit(Epoch(2)).await.unwrap();
    writer.finish().await.unwrap();
    (t1, t2)
}

#[tokio::test]
async fn epoch_transactions_publish_only_on_commit_and_idempotently() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let path = out.display().to_string();
    let options = json!({ "path": path, "format": "json", "rows_per_file": 4 });
    let sink = sink(&FileSinkFactory::new(), options).await.unwrap();
    let (t1, t2) = two_epochs(&sink).await;
    assert_eq!(t1["epoch"], 1);
    assert_eq!(t1["subtask"], 1);
    assert_eq!(
        final_names(&t1),
        [
            "part-0558a5b2-00001-e0000000001-00000.json",
            "part-0558a5b2-00001-e0000000001-00001.json"
        ]
    );
    assert_eq!(
        final_names(&t2),
        ["part-0558a5b2-00001-e0000000002-00000.json"]
    );
    for file in t1["files"].as_array().unwrap() {
        assert!(
            file["staged"]
                .as_str()
                .unwrap()
                .starts_with("_staging/0558a5b2-00001/"),
            "{file}"
        );
        assert!(file["size"].as_u64().unwrap() > 0, "{file}");
    }

    // Pre-committed is not visible: the source finds nothing.
    assert!(published(&out).is_empty(), "{:?}", names(&out));
    assert_eq!(all_files(&out).len(), 3, "{:?}", all_files(&out));
    let read = json!({ "path": path });
    let err = prepare(read.clone(), Some(schema()), BadRecordPolicy::Fail)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no files match"), "{err}");

    // Epoch 1 only, twice.
    for _ in 0..2 {
        sink.commit_epoch(&ctx(1), std::slice::from_ref(&t1))
            .await
            .unwrap();
        assert_eq!(published(&out), final_names(&t1));
        let source = prepare(read.clone(), Some(schema()), BadRecordPolicy::Fail)
            .await
            .unwrap();
        assert_eq!(read_all(&source).await.unwrap(), render(&batch(0..6)));
    }

    // Both epochs (epoch 1 again is a no-op), twice.
    for _ in 0..2 {
        sink.commit_epoch(&ctx(1), &[t1.clone(), t2.clone()])
            .await
            .unwrap();
        let mut expected = final_names(&t1);
        expected.extend(final_names(&t2));
        assert_eq!(published(&out), expected);
        assert!(!all_files(&out).iter().any(|f| f.starts_with("_staging")));
        let source = prepare(read.clone(), Some(schema()), BadRecordPolicy::Fail)
            .await
            .unwrap();
        assert_eq!(read_all(&source).await.unwrap(), render(&batch(0..9)));
    }

    // A later run stages epoch 3 and fails; recovery keeps only epoch 2 (already published).
    let mut writer = sink.create_writer(&ctx(1)).await.unwrap();
    writer.begin_epochs().await.unwrap();
    writer.write_batch(batch(9..12)).await.unwrap();
    let t3 = writer.pre_commit(Epoch(3)).await.unwrap();
    writer.write_batch(batch(12..13)).await.unwrap();
    drop(writer);
    assert!(
        all_files(&out)
            .iter()
            .any(|f| f.starts_with("_staging/0558a5b2-00001/"))
    );
    // Another subtask's staged files are not this subtask's to delete.
    let mut other = sink.create_writer(&ctx(0)).await.unwrap();
    other.begin_epochs().await.unwrap();
    other.write_batch(batch(0..1)).await.unwrap();
    let t_other = other.pre_commit(Epoch(3)).await.unwrap();
    // Nor are the staged files of another sink writing into the same directory, whose final
    // names differ from this sink's.
    let mut other_sink_ctx = ctx(1);
    other_sink_ctx.operator_id = "other-sink".into();
    let mut other_sink = sink.create_writer(&other_sink_ctx).await.unwrap();
    other_sink.begin_epochs().await.unwrap();
    other_sink.write_batch(batch(0..1)).await.unwrap();
    let t_other_sink = other_sink.pre_commit(Epoch(2)).await.unwrap();
    assert_ne!(final_names(&t_other_sink), final_names(&t2));
    sink.abort_uncommitted(&ctx(1), std::slice::from_ref(&t2))
        .await
        .unwrap();
    let staged_other_sink = t_other_sink["files"][0]["staged"].as_str().unwrap();
    assert!(
        all_files(&out).iter().any(|f| f == staged_other_sink),
        "another sink's staged file survives: {:?}",
        all_files(&out)
    );
    sink.abort_uncommitted(&other_sink_ctx, &[]).await.unwrap();
    let left = all_files(&out);
    assert!(!left.iter().any(|f| f == staged_other_sink), "{left:?}");
    assert!(
        !left
            .iter()
            .any(|f| f.starts_with("_staging/0558a5b2-00001/")),
        "{left:?}"
    );
    assert_eq!(
        left.iter()
            .filter(|f| f.starts_with("_staging/0558a5b2-00000/"))
            .count(),
        1,
        "{left:?}"
    );
    let err = sink
        .commit_epoch(&ctx(1), std::slice::from_ref(&t3))
        .await
        .unwrap_err();
    let staged = t3["files"][0]["staged"].as_str().unwrap();
    let text = err.to_string();
    assert!(
        text.contains(staged) && text.contains("part-0558a5b2-00001-e0000000003-00000.json"),
        "{text}"
    );
    // A transaction of another subtask is refused.
    let err = sink
        .commit_epoch(&ctx(1), std::slice::from_ref(&t_other))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Internal(_)), "{err}");
    let source = prepare(read, Some(schema()), BadRecordPolicy::Fail)
        .await
        .unwrap();
    assert_eq!(read_all(&source).await.unwrap(), render(&batch(0..9)));
}

#[tokio::test]
async fn epoch_file_names_are_deterministic() {
    let mut runs = Vec::new();
    for _ in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let options =
            json!({ "path": out.display().to_string(), "format": "parquet", "rows_per_file": 4 });
        let sink = sink(&FileSinkFactory::new(), options).await.unwrap();
        let (t1, t2) = two_epochs(&sink).await;
        sink.commit_epoch(&ctx(1), &[t1.clone(), t2.clone()])
            .await
            .unwrap();
        runs.push((final_names(&t1), final_names(&t2), published(&out)));
    }
    assert_eq!(runs[0], runs[1]);
    assert_eq!(runs[0].2.len(), 3);
}

#[tokio::test]
async fn epoch_mode_contract_errors() {
    let dir = tempfile::tempdir().unwrap();
    let options = json!({ "path": dir.path().display().to_string(), "format": "csv" });
    let sink = sink(&FileSinkFactory::new(), options).await.unwrap();
    // Nothing staged yet: recovery has nothing to delete.
    sink.abort_uncommitted(&ctx(5), &[]).await.unwrap();
    let mut writer = sink.create_writer(&ctx(0)).await.unwrap();
    assert!(writer.pre_commit(Epoch(1)).await.is_err());
    writer.write_batch(batch(0..2)).await.unwrap();
    assert!(writer.begin_epochs().await.is_err());
    writer.abort().await.unwrap();

    let mut writer = sink.create_writer(&ctx(0)).await.unwrap();
    writer.begin_epochs().await.unwrap();
    writer.write_batch(batch(0..2)).await.unwrap();
    writer.pre_commit(Epoch(4)).await.unwrap();
    assert!(writer.pre_commit(Epoch(4)).await.is_err());
    let empty = writer.pre_commit(Epoch(5)).await.unwrap();
    assert_eq!(empty["files"], json!([]));
    writer.write_batch(batch(2..3)).await.unwrap();
    let err = writer.finish().await.unwrap_err();
    assert!(err.to_string().contains("pre-commit"), "{err}");
    writer.abort().await.unwrap();
    assert!(published(dir.path()).is_empty());

    // A final file of another size in the way is an error, not a silent success.
    let mut writer = sink.create_writer(&ctx(0)).await.unwrap();
    writer.begin_epochs().await.unwrap();
    writer.write_batch(batch(0..2)).await.unwrap();
    let tx = writer.pre_commit(Epoch(7)).await.unwrap();
    std::fs::write(
        dir.path().join("part-0558a5b2-00000-e0000000007-00000.csv"),
        "x",
    )
    .unwrap();
    let err = sink.commit_epoch(&ctx(0), &[tx]).await.unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
}

#[tokio::test]
async fn epoch_transactions_on_an_object_store() {
    let registry: Arc<dyn ObjectStoreRegistry> = Arc::new(DefaultObjectStoreRegistry::new());
    let options = json!({ "path": "memory:///epochs/", "format": "parquet", "rows_per_file": 4 });
    let sink = sink(&FileSinkFactory::with_registry(registry.clone()), options)
        .await
        .unwrap();
    let (t1, t2) = two_epochs(&sink).await;
    let read = json!({ "path": "memory:///epochs/" });
    let source_factory = FileSourceFactory::with_registry(registry);
    let err = source_factory
        .prepare(spec(&read, None, BadRecordPolicy::Fail))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no files match"), "{err}");

    sink.commit_epoch(&ctx(1), std::slice::from_ref(&t1))
        .await
        .unwrap();
    sink.commit_epoch(&ctx(1), std::slice::from_ref(&t1))
        .await
        .unwrap();
    let source = source_factory
        .prepare(spec(&read, None, BadRecordPolicy::Fail))
        .await
        .unwrap();
    let splits = source.enumerate_splits().await.unwrap();
    assert_eq!(
        splits.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        [
            "memory:///epochs/part-0558a5b2-00001-e0000000001-00000.parquet",
            "memory:///epochs/part-0558a5b2-00001-e0000000001-00001.parquet"
        ]
    );
    assert_eq!(read_all(&source).await.unwrap(), render(&batch(0..6)));

    sink.commit_epoch(&ctx(1), &[t1.clone(), t2.clone()])
        .await
        .unwrap();
    let source = source_factory
        .prepare(spec(&read, None, BadRecordPolicy::Fail))
        .await
        .unwrap();
    assert_eq!(read_all(&source).await.unwrap(), render(&batch(0..9)));

    let mut writer = sink.create_writer(&ctx(1)).await.unwrap();
    writer.begin_epochs().await.unwrap();
    writer.write_batch(batch(9..12)).await.unwrap();
    let t3 = writer.pre_commit(Epoch(3)).await.unwrap();
    sink.abort_uncommitted(&ctx(1), &[t2]).await.unwrap();
    assert!(sink.commit_epoch(&ctx(1), &[t3]).await.is_err());
    let source = source_factory
        .prepare(spec(&read, None, BadRecordPolicy::Fail))
        .await
        .unwrap();
    assert_eq!(read_all(&source).await.unwrap(), render(&batch(0..9)));
}

#[tokio::test]
async fn withdrawal_deletes_the_published_files_of_later_epochs_of_this_sink_only() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let path = out.display().to_string();
    let options = json!({ "path": path, "format": "json", "rows_per_file": 4 });
    let sink = sink(&FileSinkFactory::new(), options).await.unwrap();
    assert!(sink.can_withdraw());
    // Subtask 1: epochs 1 (two files) and 2; subtask 0: epoch 3.
    let (t1, t2) = two_epochs(&sink).await;
    sink.commit_epoch(&ctx(1), &[t1.clone(), t2.clone()])
        .await
        .unwrap();
    let mut writer = sink.create_writer(&ctx(0)).await.unwrap();
    writer.begin_epochs().await.unwrap();
    writer.write_batch(batch(9..10)).await.unwrap();
    let t3 = writer.pre_commit(Epoch(3)).await.unwrap();
    sink.commit_epoch(&ctx(0), std::slice::from_ref(&t3))
        .await
        .unwrap();
    // Another sink's epoch 5 and a file written without checkpoints, in the same directory.
    let mut other_ctx = ctx(1);
    other_ctx.operator_id = "other-sink".into();
    let mut other = sink.create_writer(&other_ctx).await.unwrap();
    other.begin_epochs().await.unwrap();
    other.write_batch(batch(0..1)).await.unwrap();
    let t5 = other.pre_commit(Epoch(5)).await.unwrap();
    sink.commit_epoch(&other_ctx, std::slice::from_ref(&t5))
        .await
        .unwrap();
    std::fs::write(out.join("part-00000-00000-abc.json"), "{}\n").unwrap();
    std::fs::write(out.join("part-0558a5b2-00001-e00000002-00000.json"), "{}\n").unwrap();

    // Restoring epoch 1 from subtask 0's view withdraws every subtask's later files.
    let withdrawn = sink.withdraw_after(&ctx(0), Epoch(1)).await.unwrap();
    let mut expected: Vec<String> = final_names(&t2)
        .into_iter()
        .chain(final_names(&t3))
        .map(|n| format!("{}/{n}", out.display()))
        .collect();
    expected.sort();
    assert_eq!(withdrawn, expected);
    let mut left = final_names(&t1);
    left.extend(final_names(&t5));
    left.push("part-00000-00000-abc.json".into());
    // A name that only resembles a final name (a short epoch) is not this sink's.
    left.push("part-0558a5b2-00001-e00000002-00000.json".into());
    left.sort();
    assert_eq!(published(&out), left);
    // Again: nothing more to withdraw.
    assert!(
        sink.withdraw_after(&ctx(1), Epoch(1))
            .await
            .unwrap()
            .is_empty()
    );
    // Withdrawing after epoch 0 takes epoch 1 too; a directory that does not exist is empty.
    assert_eq!(
        sink.withdraw_after(&ctx(1), Epoch(0)).await.unwrap().len(),
        2
    );
    let missing =
        json!({ "path": dir.path().join("none").display().to_string(), "format": "json" });
    let empty = self::sink(&FileSinkFactory::new(), missing).await.unwrap();
    assert!(
        empty
            .withdraw_after(&ctx(0), Epoch(0))
            .await
            .unwrap()
            .is_empty()
    );
}

#[test]
fn final_names_parse_back_to_subtask_and_epoch() {
    let owner = SinkSubtask::of(&ctx(3));
    let name = owner.final_name(42, 7, "parquet");
    assert_eq!(owner.parse_final_name(&name), Some((3, 42)));
    let other = SinkSubtask::of(&ctx(1));
    // Any subtask of the same sink.
    assert_eq!(other.parse_final_name(&name), Some((3, 42)));
    // Numbers wider than their padding (a long-running job's epochs) parse too.
    let late = owner.final_name(12_345_678_901, 100_000, "csv");
    assert_eq!(owner.parse_final_name(&late), Some((3, 12_345_678_901)));
    for bad in [
        "part-0558a5b2-00003-e0000000042-00007",
        "part-0558a5b2-0003-e0000000042-00007.parquet",
        "part-0558a5b2-00003-e000000004x-00007.parquet",
        "part-ffffffff-00003-e0000000042-00007.parquet",
        "x-part-0558a5b2-00003-e0000000042-00007.parquet",
    ] {
        assert_eq!(owner.parse_final_name(bad), None, "{bad}");
    }
}

/// The full tier (docs/testing.md): against a real S3-compatible server.
mod full {
    use super::*;

    /// The staged Parquet sink and the source on a real S3-compatible server (moto, started by
    /// `weir_testkit::s3`): nothing is visible before the commit, commits are idempotent (the
    /// create-only multipart copy), the source reads the epochs back by URL and glob, and a
    /// withdrawal deletes the later epoch's files.
    #[tokio::test]
    async fn epoch_transactions_on_s3() {
        use weir_testkit::s3 as server;
        let s3 = server::server().expect("the S3 test server");
        let bucket = s3.create_bucket("file-sink").unwrap();
        let connection = json!({
            "endpoint": s3.endpoint(),
            "region": server::REGION,
            "access_key_id": server::ACCESS_KEY_ID,
            "secret_access_key": server::SECRET_ACCESS_KEY,
            "path_style": true,
        });
        let path = format!("s3://{bucket}/epochs/");
        let options =
            json!({ "path": path, "format": "parquet", "rows_per_file": 4, "s3": connection });
        let sink = sink(&FileSinkFactory::new(), options).await.unwrap();
        let (t1, t2) = two_epochs(&sink).await;
        let sources = FileSourceFactory::new();
        let read = |glob: &str| json!({ "path": format!("{path}{glob}"), "s3": connection });
        let err = sources
            .prepare(spec(&read(""), None, BadRecordPolicy::Fail))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no files match"), "{err}");

        sink.commit_epoch(&ctx(1), std::slice::from_ref(&t1))
            .await
            .unwrap();
        sink.commit_epoch(&ctx(1), std::slice::from_ref(&t1))
            .await
            .unwrap();
        let source = sources
            .prepare(spec(&read("*.parquet"), None, BadRecordPolicy::Fail))
            .await
            .unwrap();
        let splits = source.enumerate_splits().await.unwrap();
        let ids: Vec<String> = final_names(&t1)
            .iter()
            .map(|n| format!("{path}{n}"))
            .collect();
        assert_eq!(splits.iter().map(|s| s.id.clone()).collect::<Vec<_>>(), ids);
        assert_eq!(read_all(&source).await.unwrap(), render(&batch(0..6)));

        sink.commit_epoch(&ctx(1), &[t1.clone(), t2.clone()])
            .await
            .unwrap();
        let source = sources
            .prepare(spec(&read(""), None, BadRecordPolicy::Fail))
            .await
            .unwrap();
        assert_eq!(read_all(&source).await.unwrap(), render(&batch(0..9)));

        let withdrawn = sink.withdraw_after(&ctx(0), Epoch(1)).await.unwrap();
        let later: Vec<String> = final_names(&t2)
            .iter()
            .map(|n| format!("{path}{n}"))
            .collect();
        assert_eq!(withdrawn, later);
        let source = sources
            .prepare(spec(&read(""), None, BadRecordPolicy::Fail))
            .await
            .unwrap();
        assert_eq!(read_all(&source).await.unwrap(), render(&batch(0..6)));
    }
}
