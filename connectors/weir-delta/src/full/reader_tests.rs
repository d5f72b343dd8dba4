//! Tables Weir writes, read by real Delta readers: the Python `deltalake` package (delta-rs)
//! and Apache Spark with delta-spark, at every version, on the local file system and on the
//! S3 test server. The readers come from the test kit (installed and cached on first use; a
//! machine without Python, Java or Maven fails these tests with a NOT RUN message).

#![allow(clippy::unwrap_used)]

use crate::DeltaSinkFactory;
use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use weir_api::{
    BadRecordPolicy, ConnectorSpec, Epoch, OperatorId, Reach, SinkFactory, SinkWriter,
    SubtaskIndex, TaskContext,
};
use weir_testkit::delta_readers::{
    DeltaS3, DeltaStorage, delta_python_history, delta_python_rows, delta_spark_reads,
};

/// 2026-12-02T11:00:00Z in milliseconds.
const BASE_MS: i64 = 1_796_209_200_000;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("price", DataType::Float64, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        Field::new("dt", DataType::Utf8, true),
    ]))
}

/// Row `id`: its partition alternates between two days; its time is `id` seconds after
/// [`BASE_MS`].
fn rows(ids: &[i64]) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            Arc::new(Float64Array::from(
                ids.iter().map(|i| *i as f64 * 0.5).collect::<Vec<_>>(),
            )),
            Arc::new(TimestampMillisecondArray::from(
                ids.iter().map(|i| BASE_MS + i * 1000).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                ids.iter()
                    .map(|i| {
                        if i % 2 == 0 {
                            "2026-12-02"
                        } else {
                            "2026-12-03"
                        }
                    })
                    .collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap()
}

/// What a reader must show for the rows with `ids`: the Python reader's normalised JSON.
fn expected(ids: impl IntoIterator<Item = i64>) -> Vec<(i64, f64, String, String)> {
    let mut out: Vec<_> = ids
        .into_iter()
        .map(|i| {
            let secs = BASE_MS / 1000 + i;
            let ts = chrono_free_iso(secs);
            let dt = if i % 2 == 0 {
                "2026-12-02"
            } else {
                "2026-12-03"
            };
            (i, i as f64 * 0.5, ts, dt.to_owned())
        })
        .collect();
    out.sort_by_key(|a| a.0);
    out
}

/// `secs` after the Unix epoch as `YYYY-MM-DDTHH:MM:SS.000000Z` (a Delta `timestamp`, which a
/// `TIMESTAMP(3)` column becomes), for times on 2026-12-02/03.
fn chrono_free_iso(secs: i64) -> String {
    let day_start = BASE_MS / 1000 - 11 * 3600; // 2026-12-02T00:00:00Z
    let in_day = secs - day_start;
    let (day, rest) = (in_day / 86_400, in_day % 86_400);
    format!(
        "2026-12-0{}T{:02}:{:02}:{:02}.000000Z",
        2 + day,
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// A read's rows as comparable tuples, sorted by id.
fn seen(rows: &[Map<String, Value>]) -> Vec<(i64, f64, String, String)> {
    let mut out: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r["id"].as_i64().unwrap(),
                r["price"].as_f64().unwrap(),
                r["ts"].as_str().unwrap().to_owned(),
                r["dt"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    out.sort_by_key(|a| a.0);
    out
}

/// Writes five epochs of two subtasks into a table partitioned by `dt`, with compaction
/// merging every 4 small files and a log checkpoint every 4 commits; returns the ids each epoch
/// wrote, in epoch order.
async fn write_table(path: &str, s3: Option<Value>) -> Vec<Vec<i64>> {
    let mut options = json!({
        "path": path, "partition_by": ["dt"], "auto_compaction": true,
        "compaction_min_files": 4, "checkpoint_interval": 4,
    });
    if let Some(s3) = s3 {
        options["s3"] = s3;
    }
    let sink = DeltaSinkFactory
        .prepare(
            ConnectorSpec {
                operator_id: &OperatorId::new("lake"),
                options: &options,
                options_path: "sinks[0].options",
                schema: None,
                bad_records: BadRecordPolicy::Fail,
                reach: Reach::Full,
            },
            schema(),
        )
        .await
        .unwrap();
    let task = |s| TaskContext::new("readers".into(), "lake".into(), SubtaskIndex(s), 2);
    let mut writers: Vec<Box<dyn SinkWriter>> = Vec::new();
    for s in 0..2 {
        let mut w = sink.create_writer(&task(s)).await.unwrap();
        w.begin_epochs().await.unwrap();
        writers.push(w);
    }
    let mut epochs = Vec::new();
    for epoch in 1..=5_i64 {
        let mut values = Vec::new();
        let mut ids_of_epoch = Vec::new();
        for (s, writer) in writers.iter_mut().enumerate() {
            let ids: Vec<i64> = (0..3).map(|k| epoch * 100 + s as i64 * 10 + k).collect();
            writer.write_batch(rows(&ids)).await.unwrap();
            ids_of_epoch.extend(ids);
            values.push(writer.pre_commit(Epoch(epoch as u64)).await.unwrap());
        }
        sink.commit_epochs(&task(0), &[(Epoch(epoch as u64), values)], false)
            .await
            .unwrap();
        epochs.push(ids_of_epoch);
    }
    epochs
}

/// Checks every version of the table at `uri` with both readers: version 0 is empty, each
/// STREAMING UPDATE commit adds its epoch's rows, each OPTIMIZE commit changes no row; the
/// Spark reader sees at every version exactly what the Python reader sees.
fn check_every_version(uri: &str, epochs: &[Vec<i64>], storage: &DeltaStorage) {
    let history = delta_python_history(uri, &["weir-readers-lake"], storage).unwrap();
    assert_eq!(
        history.app_version("weir-readers-lake"),
        Some(epochs.len() as u64),
        "the txn of the sink is its last epoch"
    );
    let mut commits = history.commits.clone();
    commits.sort_by_key(|c| c.version);
    let operations: Vec<&str> = commits
        .iter()
        .map(|c| c.operation.as_deref().unwrap_or(""))
        .collect();
    assert!(
        operations.contains(&"OPTIMIZE"),
        "compaction committed: {operations:?}"
    );
    let mut visible: Vec<i64> = Vec::new();
    let mut next_epoch = 0;
    let mut python = Vec::new();
    for commit in &commits {
        match commit.operation.as_deref() {
            Some("STREAMING UPDATE") => {
                visible.extend(&epochs[next_epoch]);
                next_epoch += 1;
            }
            Some("OPTIMIZE") | Some("CREATE TABLE") => {}
            other => panic!("unexpected commit {other:?} at version {}", commit.version),
        }
        let read = delta_python_rows(uri, Some(commit.version), storage).unwrap();
        assert_eq!(read.version, commit.version);
        assert_eq!(read.partition_columns, vec!["dt".to_owned()]);
        assert_eq!(read.column_names(), vec!["id", "price", "ts", "dt"]);
        assert_eq!(read.schema[2].data_type, json!("timestamp"));
        assert_eq!(
            seen(&read.rows),
            expected(visible.iter().copied()),
            "version {}",
            commit.version
        );
        python.push(read);
    }
    assert_eq!(next_epoch, epochs.len(), "one commit per epoch");
    let versions: Vec<u64> = commits.iter().map(|c| c.version).collect();
    let spark = delta_spark_reads(uri, &versions, storage).unwrap();
    assert_eq!(spark.len(), python.len());
    for (s, p) in spark.iter().zip(&python) {
        assert_eq!(s.version, p.version);
        assert_eq!(
            s.rows, p.rows,
            "Spark and Python differ at version {}",
            p.version
        );
        assert_eq!(s.partition_columns, p.partition_columns);
    }
}

#[tokio::test]
async fn python_and_spark_read_every_version_of_a_local_table_weir_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bids").display().to_string();
    let epochs = write_table(&path, None).await;
    let uri = format!("file://{path}");
    tokio::task::spawn_blocking(move || check_every_version(&uri, &epochs, &DeltaStorage::Local))
        .await
        .unwrap();
}

#[tokio::test]
async fn python_and_spark_read_every_version_of_a_table_weir_wrote_on_s3() {
    let server = weir_testkit::s3::server().unwrap();
    let bucket = server.create_bucket("readers").unwrap();
    let s3 = json!({
        "endpoint": server.endpoint(),
        "region": weir_testkit::s3::REGION,
        "access_key_id": weir_testkit::s3::ACCESS_KEY_ID,
        "secret_access_key": weir_testkit::s3::SECRET_ACCESS_KEY,
        "allow_http": true,
        "path_style": true,
    });
    let uri = format!("s3://{bucket}/lake/bids");
    let epochs = write_table(&uri, Some(s3)).await;
    let storage = DeltaStorage::S3(DeltaS3::for_server(server));
    tokio::task::spawn_blocking(move || check_every_version(&uri, &epochs, &storage))
        .await
        .unwrap();
}
