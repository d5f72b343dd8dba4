//! A SQL job on a real S3-compatible server (moto, started by `weir_testkit::s3`): CSV read
//! from `s3://`, Parquet written to `s3://` through epoch commits, checkpoints in `s3://`
//! (`SET 'checkpoint.dir'` and `SET 's3.*'`), then a restore from the latest checkpoint there.

use crate::support::{Rng, format_rows};
use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::sync::Arc;
use weir::api::S3Options;
use weir::{CheckpointLocation, Engine, RestoreFrom, RunOptions};
use weir_testkit::s3 as server;

const ROWS: u64 = 3_000;

/// The test server's options, as the SQL script sets them.
fn options(s3: &server::S3Server) -> S3Options {
    S3Options {
        endpoint: Some(s3.endpoint().to_owned()),
        region: Some(server::REGION.to_owned()),
        access_key_id: Some(server::ACCESS_KEY_ID.to_owned()),
        secret_access_key: Some(server::SECRET_ACCESS_KEY.to_owned()),
        path_style: Some(true),
        ..S3Options::default()
    }
}

/// Every object below `prefix` of the bucket, sorted.
async fn objects(store: &dyn ObjectStore, prefix: &str) -> Vec<String> {
    let prefix = ObjectPath::from(prefix);
    let mut names: Vec<String> = store
        .list(Some(&prefix))
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .expect("lists");
    names.sort();
    names
}

/// The rows of the published part files directly below `out/`.
async fn published_rows(store: &dyn ObjectStore) -> Vec<String> {
    let mut batches = Vec::new();
    for name in objects(store, "out").await {
        if !name.trim_start_matches("out/").starts_with("part-") {
            continue;
        }
        let bytes = store
            .get(&ObjectPath::from(name.as_str()))
            .await
            .expect("get")
            .bytes()
            .await
            .expect("body");
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap_or_else(|e| panic!("{name}: not Parquet: {e}"))
            .build()
            .expect("reader");
        batches.extend(reader.map(|b| b.expect("batch")));
    }
    format_rows(&batches)
}

#[tokio::test]
async fn a_sql_job_reads_writes_and_checkpoints_on_s3() {
    let s3 = server::server().expect("the S3 test server");
    let bucket = s3.create_bucket("engine").expect("bucket");
    let connection = options(s3);
    let storage = CheckpointLocation::s3(&format!("s3://{bucket}/"), &connection).expect("store");
    let store: Arc<dyn ObjectStore> = storage.store.clone();

    let mut rng = Rng(11);
    let mut csv = String::from("id,k,v\n");
    let mut want = Vec::new();
    for id in 0..ROWS {
        let (k, v) = (rng.below(20), rng.below(1000));
        csv.push_str(&format!("{id},k{k},{v}\n"));
        if v >= 500 {
            want.push(format!("{id} | k{k} | {}", v * 2));
        }
    }
    want.sort();
    for (i, chunk) in csv
        .lines()
        .skip(1)
        .collect::<Vec<_>>()
        .chunks(1_000)
        .enumerate()
    {
        let body = format!("id,k,v\n{}\n", chunk.join("\n"));
        store
            .put(
                &ObjectPath::from(format!("in/part-{i}.csv")),
                PutPayload::from(body),
            )
            .await
            .expect("upload input");
    }

    let set = |key: &str, value: &Option<String>| {
        value
            .as_ref()
            .map(|v| format!("SET '{key}' = '{v}';\n"))
            .unwrap_or_default()
    };
    let sql = format!(
        "SET 'job.name' = 's3-job';\n\
         SET 'parallelism' = '2';\n\
         SET 'checkpoint.interval' = '50ms';\n\
         SET 'checkpoint.dir' = 's3://{bucket}/cp';\n\
         {endpoint}{region}{key}{secret}\
         SET 's3.path.style.access' = 'true';\n\
         CREATE TABLE events (id BIGINT NOT NULL, k STRING NOT NULL, v BIGINT NOT NULL) WITH (\n\
           'connector' = 'filesystem', 'path' = 's3://{bucket}/in/*.csv', 'format' = 'csv',\n\
           'batch-size' = '64');\n\
         CREATE TABLE out (id BIGINT NOT NULL, k STRING NOT NULL, v2 BIGINT NOT NULL) WITH (\n\
           'connector' = 'filesystem', 'path' = 's3://{bucket}/out/', 'format' = 'parquet',\n\
           'sink.rows-per-file' = '200');\n\
         INSERT INTO out SELECT id, k, v * 2 FROM events WHERE v >= 500;",
        endpoint = set("s3.endpoint", &connection.endpoint),
        region = set("s3.region", &connection.region),
        key = set("s3.access-key", &connection.access_key_id),
        secret = set("s3.secret-key", &connection.secret_access_key),
    );
    let engine = Engine::new();
    let job = engine.compile_sql(&sql, "s3.sql").await.expect("compiles");
    let run = |restore: Option<RestoreFrom>| {
        let engine = &engine;
        let spec = job.spec.clone();
        async move {
            let prepared = engine
                .prepare(&spec, Some("s3.sql"))
                .await
                .expect("prepares");
            // No checkpoint storage here: the job's own `checkpoint.dir` and `s3.*` are used.
            let options = RunOptions {
                restore,
                ..RunOptions::default()
            };
            engine
                .start_with(prepared, options)
                .await
                .expect("starts")
                .wait()
                .await
                .expect("runs")
        }
    };
    let summary = run(None).await;
    let counters = summary.checkpoints.expect("checkpoint counters");
    assert!(counters.completed >= 1, "{counters:?}");
    assert_eq!(published_rows(store.as_ref()).await, want);
    assert!(
        objects(store.as_ref(), "out/_staging").await.is_empty(),
        "everything staged was published"
    );
    let manifests: Vec<String> = objects(store.as_ref(), "cp")
        .await
        .into_iter()
        .filter(|n| n.ends_with("/manifest.json"))
        .collect();
    assert!(!manifests.is_empty(), "manifests in s3://{bucket}/cp");

    // Restoring the last checkpoint from S3 finds every split read: nothing is published twice.
    let summary = run(Some(RestoreFrom::Latest)).await;
    let restored = summary.checkpoints.expect("counters").restored_from;
    assert!(restored.is_some(), "restored from a checkpoint on S3");
    assert_eq!(published_rows(store.as_ref()).await, want);
}
