//! Tests of the sink's rolling policy and compaction: small epochs merged into few files with
//! exactly the same rows, repeated commits and recovery at every crash point, withdrawals.

use super::*;
use crate::FileSinkFactory;
use crate::carry::Carry;
use crate::test_support::{ctx, prepare, read_all, render, spec};
use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use weir_api::{BadRecordPolicy, Epoch, PreparedSink, SinkFactory};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
    ]))
}

/// Rows with the given ids, in the given (possibly shuffled) order.
fn batch(ids: &[i64]) -> RecordBatch {
    let names: StringArray = ids
        .iter()
        .map(|i| (i % 3 != 0).then(|| format!("n{i}")))
        .collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef,
            Arc::new(names),
        ],
    )
    .unwrap()
}

/// The ids of epoch `e` (1-based): ten rows, out of order, with two late rows of the previous
/// epoch's range arriving in this one.
fn epoch_ids(e: i64) -> Vec<i64> {
    let base = e * 100;
    let mut ids: Vec<i64> = (0..8).map(|i| base + (i * 5) % 8).collect();
    ids.extend([base - 50, base - 49]);
    ids
}

async fn sink(options: Value) -> weir_api::Result<Arc<dyn PreparedSink>> {
    let mut spec = spec(&options, None, BadRecordPolicy::Fail);
    spec.options_path = "sinks[0].options";
    FileSinkFactory::new().prepare(spec, schema()).await
}

fn compacting(out: &Path, target: u64) -> Value {
    json!({
        "path": out.display().to_string(),
        "format": "parquet",
        "auto_compaction": true,
        "compaction_file_size": target,
    })
}

/// Published (visible) file names in `dir`, sorted.
fn published(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('_'))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Files below `dir/_staging`, recursively.
fn staged(dir: &Path) -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push(path.display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(&dir.join("_staging"), &mut out);
    out
}

/// The rows the file source reads from `dir`, sorted.
async fn rows(dir: &Path) -> Vec<String> {
    let source = prepare(
        json!({ "path": dir.display().to_string() }),
        Some(schema()),
        BadRecordPolicy::Fail,
    )
    .await
    .unwrap();
    let mut rows = read_all(&source).await.unwrap();
    rows.sort();
    rows
}

/// The rows of epochs `epochs`, sorted.
fn expected(epochs: std::ops::RangeInclusive<i64>) -> Vec<String> {
    let mut rows: Vec<String> = epochs.flat_map(|e| render(&batch(&epoch_ids(e)))).collect();
    rows.sort();
    rows
}

/// Writes epochs `epochs` with a new writer of subtask 0 and returns their pre-commits.
async fn write_epochs(
    sink: &Arc<dyn PreparedSink>,
    epochs: std::ops::RangeInclusive<i64>,
) -> Vec<Value> {
    let mut writer = sink.create_writer(&ctx(0)).await.unwrap();
    writer.begin_epochs().await.unwrap();
    let mut txs = Vec::new();
    for e in epochs {
        writer.write_batch(batch(&epoch_ids(e))).await.unwrap();
        txs.push(writer.pre_commit(Epoch(e as u64)).await.unwrap());
    }
    writer.finish().await.unwrap();
    txs
}

fn merges(tx: &Value) -> bool {
    tx["compaction"]["merge"].as_bool().unwrap_or(false)
}

/// Commits each transaction as the coordinator does, the last as a final epoch.
async fn commit_all(sink: &Arc<dyn PreparedSink>, txs: &[Value]) {
    let (last, rest) = txs.split_last().unwrap();
    for tx in rest {
        sink.commit_epoch(&ctx(0), std::slice::from_ref(tx))
            .await
            .unwrap();
    }
    sink.commit_final(&ctx(0), std::slice::from_ref(last))
        .await
        .unwrap();
}

/// The size of one epoch's small file, to aim compaction at a few epochs.
async fn one_epoch_bytes() -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(compacting(dir.path(), 1 << 30)).await.unwrap();
    let txs = write_epochs(&sink, 1..=1).await;
    txs[0]["compaction"]["files"][0]["size"].as_u64().unwrap()
}

/// A target that `epochs` small files of about `size` bytes reach, and one fewer do not.
fn aim(size: u64, epochs: u64) -> u64 {
    size * epochs - size / 4
}

#[tokio::test]
async fn many_small_epochs_merge_into_few_files_with_exactly_the_same_rows() {
    let size = one_epoch_bytes().await;
    // Without compaction: one file per epoch.
    let plain = tempfile::tempdir().unwrap();
    let options = json!({ "path": plain.path().display().to_string(), "format": "parquet" });
    let sink_plain = sink(options).await.unwrap();
    let txs = write_epochs(&sink_plain, 1..=30).await;
    commit_all(&sink_plain, &txs).await;
    assert_eq!(published(plain.path()).len(), 30);

    let dir = tempfile::tempdir().unwrap();
    let sink = sink(compacting(dir.path(), aim(size, 4))).await.unwrap();
    let txs = write_epochs(&sink, 1..=30).await;
    // Nothing is published before the first merge, and carries grow until it.
    let first_merge = txs.iter().position(merges).unwrap();
    assert!(first_merge >= 2, "{first_merge}");
    for tx in &txs[..first_merge] {
        sink.commit_epoch(&ctx(0), std::slice::from_ref(tx))
            .await
            .unwrap();
        assert_eq!(tx["files"], json!([]));
    }
    assert!(published(dir.path()).is_empty());
    commit_all(&sink, &txs[first_merge..]).await;
    let files = published(dir.path());
    assert!(files.len() <= 30 / 3, "{files:?}");
    assert!(
        files[0].starts_with("part-0558a5b2-00000-e") && files[0].contains("-m0000000001."),
        "{files:?}"
    );
    for file in &files {
        assert!(
            merged_range(&SinkSubtask::of(&ctx(0)), file).is_some(),
            "{file}"
        );
    }
    assert_eq!(rows(dir.path()).await, expected(1..=30));
    assert_eq!(rows(plain.path()).await, expected(1..=30));
    assert!(staged(dir.path()).is_empty(), "{:?}", staged(dir.path()));
}

#[tokio::test]
async fn files_of_the_target_size_are_published_as_they_are() {
    let size = one_epoch_bytes().await;
    let dir = tempfile::tempdir().unwrap();
    // A file of at least half the target is not merged again.
    let sink = sink(compacting(dir.path(), size)).await.unwrap();
    let txs = write_epochs(&sink, 1..=3).await;
    for tx in &txs {
        assert_eq!(tx["files"].as_array().unwrap().len(), 1, "{tx}");
        assert!(tx.get("compaction").is_none(), "{tx}");
    }
    commit_all(&sink, &txs).await;
    assert_eq!(published(dir.path()).len(), 3);
    assert_eq!(rows(dir.path()).await, expected(1..=3));
}

#[tokio::test]
async fn repeated_commits_at_every_crash_point_lose_and_repeat_nothing() {
    let size = one_epoch_bytes().await;
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(compacting(dir.path(), aim(size, 3))).await.unwrap();
    let txs = write_epochs(&sink, 1..=3).await;
    assert!(merges(&txs[2]), "{}", txs[2]);
    let carry: Carry = serde_json::from_value(txs[2]["compaction"].clone()).unwrap();
    assert_eq!(carry.files.len(), 3);
    let inputs: Vec<(std::path::PathBuf, Vec<u8>)> = carry
        .files
        .iter()
        .map(|f| {
            let path = dir.path().join(&f.staged);
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();

    // Crash after the merged file was written into staging, before it was published: a
    // half-written leftover there is overwritten by the repeated merge.
    let merging = dir.path().join(&carry.merging);
    std::fs::create_dir_all(merging.parent().unwrap()).unwrap();
    std::fs::write(&merging, b"PAR1 torn").unwrap();
    // The two epochs before carry their files on: committing them publishes nothing.
    sink.commit_epoch(&ctx(0), &txs[..2]).await.unwrap();
    assert!(published(dir.path()).is_empty());
    sink.commit_epoch(&ctx(0), &txs).await.unwrap();
    assert_eq!(
        published(dir.path()),
        std::slice::from_ref(&carry.final_name)
    );
    assert_eq!(rows(dir.path()).await, expected(1..=3));
    assert!(staged(dir.path()).is_empty(), "{:?}", staged(dir.path()));

    // Crash after the publication, before the inputs were deleted: the repeat (a commit or a
    // recovery's final commit) only deletes them.
    for (path, bytes) in &inputs {
        std::fs::write(path, bytes).unwrap();
    }
    sink.commit_epoch(&ctx(0), &txs[2..]).await.unwrap();
    assert!(staged(dir.path()).is_empty());
    for (path, bytes) in &inputs[1..] {
        std::fs::write(path, bytes).unwrap();
    }
    sink.commit_final(&ctx(0), &txs[2..]).await.unwrap();
    sink.abort_uncommitted(&ctx(0), &[]).await.unwrap();
    assert_eq!(
        published(dir.path()),
        std::slice::from_ref(&carry.final_name)
    );
    assert_eq!(rows(dir.path()).await, expected(1..=3));

    // An input gone while the merged file does not exist is lost output: an error, not a
    // silently smaller file.
    std::fs::remove_file(dir.path().join(&carry.final_name)).unwrap();
    let err = sink.commit_epoch(&ctx(0), &txs[2..]).await.unwrap_err();
    assert!(err.to_string().contains("is gone"), "{err}");
}

#[tokio::test]
async fn recovery_publishes_what_the_restored_epoch_carried() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(compacting(dir.path(), 1 << 30)).await.unwrap();
    // Epochs 1..3 durable and committed (carried on), epoch 4 pre-committed only; then the
    // job dies.
    let mut writer = sink.create_writer(&ctx(0)).await.unwrap();
    writer.begin_epochs().await.unwrap();
    let mut txs = Vec::new();
    for e in 1..=4 {
        writer.write_batch(batch(&epoch_ids(e))).await.unwrap();
        txs.push(writer.pre_commit(Epoch(e as u64)).await.unwrap());
    }
    writer.write_batch(batch(&epoch_ids(5))).await.unwrap();
    drop(writer);
    for tx in &txs[..3] {
        assert!(!merges(tx));
        sink.commit_epoch(&ctx(0), std::slice::from_ref(tx))
            .await
            .unwrap();
    }
    assert!(published(dir.path()).is_empty());
    // A cleanup that keeps epoch 3 keeps every file it carries (those of epochs 1..3).
    sink.abort_uncommitted(&ctx(0), &txs[2..3]).await.unwrap();
    assert_eq!(staged(dir.path()).len(), 3, "{:?}", staged(dir.path()));
    // Recovery from epoch 3, as the runtime runs it, twice (a crash during the first).
    for _ in 0..2 {
        sink.commit_final(&ctx(0), &txs[2..3]).await.unwrap();
        sink.abort_uncommitted(&ctx(0), &[]).await.unwrap();
        assert_eq!(
            published(dir.path()),
            ["part-0558a5b2-00000-e0000000003-m0000000001.parquet"]
        );
        assert_eq!(rows(dir.path()).await, expected(1..=3));
        assert!(staged(dir.path()).is_empty());
    }
    // The restored run replays epochs 4 and 5; the final epoch publishes what it carried.
    let mut writer = sink.create_writer(&ctx(0)).await.unwrap();
    writer.begin_epochs().await.unwrap();
    let mut replay = Vec::new();
    for e in 4..=5 {
        writer.write_batch(batch(&epoch_ids(e))).await.unwrap();
        replay.push(writer.pre_commit(Epoch(e as u64)).await.unwrap());
    }
    writer.finish().await.unwrap();
    // The final epoch subsumes the aborted epoch 4: both come in one call.
    sink.commit_final(&ctx(0), &replay).await.unwrap();
    assert_eq!(rows(dir.path()).await, expected(1..=5));
    assert_eq!(published(dir.path()).len(), 2);
}

#[tokio::test]
async fn a_restore_from_an_older_epoch_gives_the_rows_of_an_uninterrupted_run() {
    let size = one_epoch_bytes().await;
    // The uninterrupted run.
    let whole = tempfile::tempdir().unwrap();
    let sink_whole = sink(compacting(whole.path(), aim(size, 3))).await.unwrap();
    let txs = write_epochs(&sink_whole, 1..=8).await;
    commit_all(&sink_whole, &txs).await;
    let want = rows(whole.path()).await;
    assert_eq!(want, expected(1..=8));
    let merged: Vec<usize> = (0..txs.len()).filter(|&i| merges(&txs[i])).collect();
    assert_eq!(merged, [2, 5], "epochs 3 and 6 merge three epochs each");

    // The same run, committed to epoch 8, restored from epoch 6 (8's files withdrawn).
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(compacting(dir.path(), aim(size, 3))).await.unwrap();
    let txs = write_epochs(&sink, 1..=8).await;
    commit_all(&sink, &txs).await;
    assert!(sink.can_withdraw());
    // Epoch 4 or 5 lies inside the merged file of epochs 4..6: refused, nothing withdrawn.
    for inside in [4, 5] {
        let err = sink
            .withdraw_after(&ctx(1), Epoch(inside))
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("epochs 4 to 6") && text.contains("restore epoch 6 or later"),
            "{text}"
        );
    }
    assert_eq!(rows(dir.path()).await, want);
    let withdrawn = sink.withdraw_after(&ctx(1), Epoch(6)).await.unwrap();
    assert_eq!(withdrawn.len(), 1, "{withdrawn:?}");
    assert!(withdrawn[0].ends_with("-e0000000008-m0000000007.parquet"));
    sink.commit_final(&ctx(0), &txs[5..6]).await.unwrap();
    sink.abort_uncommitted(&ctx(0), &[]).await.unwrap();
    assert_eq!(rows(dir.path()).await, expected(1..=6));
    // The replay of epochs 7 and 8.
    let mut writer = sink.create_writer(&ctx(0)).await.unwrap();
    writer.begin_epochs().await.unwrap();
    let mut replay = Vec::new();
    for e in 7..=8 {
        writer.write_batch(batch(&epoch_ids(e))).await.unwrap();
        replay.push(writer.pre_commit(Epoch(e as u64)).await.unwrap());
    }
    commit_all(&sink, &replay).await;
    assert_eq!(rows(dir.path()).await, want);
    assert_eq!(published(dir.path()), published(whole.path()));
    // Restoring from before the first merged file withdraws everything.
    assert_eq!(
        sink.withdraw_after(&ctx(0), Epoch(0)).await.unwrap().len(),
        3
    );
    assert!(published(dir.path()).is_empty());
}

#[tokio::test]
async fn carried_files_merge_once_the_rollover_interval_passes() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = compacting(dir.path(), 1 << 30);
    options["rollover_interval"] = json!("40ms");
    let sink = sink(options).await.unwrap();
    let mut writer = sink.create_writer(&ctx(0)).await.unwrap();
    writer.begin_epochs().await.unwrap();
    writer.write_batch(batch(&epoch_ids(1))).await.unwrap();
    let t1 = writer.pre_commit(Epoch(1)).await.unwrap();
    assert!(!merges(&t1));
    tokio::time::sleep(std::time::Duration::from_millis(60)).await;
    writer.write_batch(batch(&epoch_ids(2))).await.unwrap();
    let t2 = writer.pre_commit(Epoch(2)).await.unwrap();
    assert!(merges(&t2), "{t2}");
    // An epoch with nothing carried has no carry.
    let t3 = writer.pre_commit(Epoch(3)).await.unwrap();
    assert!(t3.get("compaction").is_none(), "{t3}");
    sink.commit_epoch(&ctx(0), &[t1, t2, t3]).await.unwrap();
    assert_eq!(published(dir.path()).len(), 1);
    assert_eq!(rows(dir.path()).await, expected(1..=2));
}

#[tokio::test]
async fn the_rollover_interval_rolls_open_part_files() {
    let dir = tempfile::tempdir().unwrap();
    let options = json!({
        "path": dir.path().display().to_string(),
        "format": "json",
        "rollover_interval": "30 ms",
        "bytes_per_file": "1GB",
    });
    let sink = sink(options).await.unwrap();
    let mut writer = sink.create_writer(&ctx(0)).await.unwrap();
    writer.write_batch(batch(&[1, 2])).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    writer.write_batch(batch(&[3])).await.unwrap();
    writer.write_batch(batch(&[4])).await.unwrap();
    writer.finish().await.unwrap();
    let files = published(dir.path());
    assert!((2..=3).contains(&files.len()), "{files:?}");
}

#[tokio::test]
async fn rolling_and_compaction_options_are_checked_at_their_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().display().to_string();
    for (options, field, message) in [
        (
            json!({ "path": path, "format": "csv", "auto_compaction": true }),
            "auto_compaction",
            "Parquet files only",
        ),
        (
            json!({ "path": path, "format": "parquet", "compaction_file_size": "1MB" }),
            "compaction_file_size",
            "auto-compaction",
        ),
        (
            json!({ "path": path, "format": "parquet", "auto_compaction": true,
                    "compaction_file_size": 0 }),
            "compaction_file_size",
            "at least 1 byte",
        ),
        (
            json!({ "path": path, "format": "parquet", "auto_compaction": true,
                    "partition_by": ["name"] }),
            "auto_compaction",
            "unpartitioned sink only",
        ),
        (
            json!({ "path": path, "format": "parquet", "rollover_interval": "0s" }),
            "rollover_interval",
            "at least 1ms",
        ),
    ] {
        let err = sink(options).await.unwrap_err();
        assert!(
            matches!(&err, weir_api::Error::Config { path, .. }
                if path == &format!("sinks[0].options.{field}")),
            "{err}"
        );
        assert!(err.to_string().contains(message), "{err}");
    }
    let err = sink(json!({ "path": path, "format": "parquet", "bytes_per_file": "12 parsecs" }))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("sinks[0].options") && text.contains("bytes_per_file"),
        "{text}"
    );
    let options: crate::FileSinkOptions = weir_api::decode_options(
        &json!({ "path": "out", "format": "parquet", "bytes_per_file": "128MB",
                 "auto_compaction": true, "rollover_interval": "15 min" }),
        "s",
    )
    .unwrap();
    assert_eq!(options.bytes_per_file, 128 << 20);
    assert_eq!(options.rollover_interval, Some(DurationMs(15 * 60_000)));
}

#[test]
fn merged_names_parse_back_to_their_epoch_range() {
    let owner = SinkSubtask::of(&ctx(2));
    let name = owner.merged_name(7, 42, "parquet");
    assert_eq!(name, "part-0558a5b2-00002-e0000000042-m0000000007.parquet");
    assert_eq!(owner.parse_final_name(&name), Some((2, 42)));
    assert_eq!(merged_range(&owner, &name), Some((7, 42)));
    assert_eq!(
        merged_range(&owner, &owner.final_name(42, 0, "parquet")),
        None
    );
    assert_eq!(
        merged_range(&owner, "part-0558a5b2-00002-e0000000042-mx.parquet"),
        None
    );
}
