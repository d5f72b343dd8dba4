//! Files per hour from the file sink at a 1 s checkpoint interval, with and without
//! `auto_compaction` (docs/performance.md, "File sink: files per hour").
//!
//! Drives one sink subtask through the epoch protocol as the runtime does (rows, `pre_commit`
//! each epoch, `commit_epoch` once it is "durable", `commit_final` at the end) with a fixed
//! number of bid rows per epoch, then lists the published files and reads their row counts
//! back. It measures the sink alone: no source, no checkpoint coordinator, no manifest writes.
//!
//! ```sh
//! cargo run --release -p weir-file --example rolling_files -- \
//!     rows_per_sec=10000 seconds=3600 compaction=on target=128MB interval='15 min' realtime=false
//! ```
//!
//! `realtime=true` holds each epoch to one second of wall time (a run of `seconds` seconds);
//! `realtime=false` writes the epochs back to back, which gives the same files as long as no
//! merge is due to `interval` (the only wall-clock rule).

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use weir_api::{
    BadRecordPolicy, ConnectorSpec, Epoch, OperatorId, Reach, SinkFactory, TaskContext,
};
use weir_file::FileSinkFactory;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("auction", DataType::Int64, false),
        Field::new("bidder", DataType::Int64, false),
        Field::new("price", DataType::Int64, false),
        Field::new("channel", DataType::Utf8, false),
        Field::new("ts", DataType::Int64, false),
    ]))
}

/// `rows` bids from row `start` on: pseudo-random auctions, bidders and prices, ts in ms.
fn bids(start: u64, rows: u64) -> Result<RecordBatch, arrow::error::ArrowError> {
    let mix = |i: u64, salt: u64| {
        let x = (i ^ salt).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (x ^ (x >> 29)) as i64 & i64::MAX
    };
    let ids = start..start + rows;
    let col = |salt: u64, modulo: i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(
            ids.clone().map(|i| mix(i, salt) % modulo),
        ))
    };
    let channels = ["apple", "google", "facebook", "baidu", "direct"];
    let channel: ArrayRef = Arc::new(StringArray::from_iter_values(
        ids.clone().map(|i| channels[(mix(i, 4) % 5) as usize]),
    ));
    let ts: ArrayRef = Arc::new(Int64Array::from_iter_values(ids.clone().map(|i| i as i64)));
    RecordBatch::try_new(
        schema(),
        vec![
            col(1, 10_000),
            col(2, 100_000),
            col(3, 1_000_000),
            channel,
            ts,
        ],
    )
}

fn arg<'a>(args: &'a BTreeMap<String, String>, key: &str, default: &'a str) -> &'a str {
    args.get(key).map_or(default, String::as_str)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: BTreeMap<String, String> = std::env::args()
        .skip(1)
        .filter_map(|a| a.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect();
    let rows_per_sec: u64 = arg(&args, "rows_per_sec", "10000").parse()?;
    let seconds: u64 = arg(&args, "seconds", "3600").parse()?;
    let compaction = arg(&args, "compaction", "on") == "on";
    let realtime = arg(&args, "realtime", "false") == "true";
    let target = arg(&args, "target", "128MB");
    let interval = arg(&args, "interval", "15 min");

    let dir = tempfile::tempdir_in(arg(&args, "dir", "/var/tmp"))?;
    let out = dir.path().join("out");
    let mut options = serde_json::json!({
        "path": out.display().to_string(),
        "format": "parquet",
        "bytes_per_file": target,
        "rollover_interval": interval,
    });
    if compaction {
        options["auto_compaction"] = serde_json::json!(true);
    }
    let operator = OperatorId::new("out");
    let sink = FileSinkFactory::new()
        .prepare(
            ConnectorSpec {
                operator_id: &operator,
                options: &options,
                options_path: "sinks[0].options",
                schema: None,
                bad_records: BadRecordPolicy::Fail,
                reach: Reach::Full,
            },
            schema(),
        )
        .await?;
    let task = TaskContext::new("bench".into(), "out".into(), Default::default(), 1);
    let mut writer = sink.create_writer(&task).await?;
    writer.begin_epochs().await?;

    let started = Instant::now();
    let mut max_commit = Duration::ZERO;
    let mut row = 0u64;
    let mut last = None;
    for epoch in 1..=seconds {
        let mut left = rows_per_sec;
        while left > 0 {
            let n = left.min(8192);
            writer.write_batch(bids(row, n)?).await?;
            row += n;
            left -= n;
        }
        let tx = writer.pre_commit(Epoch(epoch)).await?;
        if epoch == seconds {
            last = Some(tx);
            break;
        }
        let commit = Instant::now();
        sink.commit_epoch(&task, std::slice::from_ref(&tx)).await?;
        max_commit = max_commit.max(commit.elapsed());
        if realtime {
            let due = started + Duration::from_secs(epoch);
            tokio::time::sleep_until(due.into()).await;
        }
    }
    writer.finish().await?;
    if let Some(tx) = last {
        let commit = Instant::now();
        sink.commit_final(&task, &[tx]).await?;
        max_commit = max_commit.max(commit.elapsed());
    }
    let wall = started.elapsed();

    let mut sizes = Vec::new();
    let mut rows_back = 0i64;
    for entry in std::fs::read_dir(&out)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with('_') {
            continue;
        }
        sizes.push(entry.metadata()?.len());
        let file = std::fs::File::open(entry.path())?;
        let reader = parquet::file::serialized_reader::SerializedFileReader::new(file)?;
        use parquet::file::reader::FileReader;
        rows_back += reader.metadata().file_metadata().num_rows();
    }
    sizes.sort_unstable();
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let total: u64 = sizes.iter().sum();
    let per_hour = 3600.0 / seconds as f64;
    println!(
        "{{\"compaction\": {compaction}, \"rows_per_sec\": {rows_per_sec}, \"epochs\": {seconds}, \
         \"realtime\": {realtime}, \"files\": {}, \"files_per_hour\": {:.1}, \
         \"mib_per_hour\": {:.1}, \"file_mib_min\": {:.3}, \"file_mib_median\": {:.3}, \
         \"file_mib_max\": {:.3}, \"rows_written\": {row}, \"rows_read_back\": {rows_back}, \
         \"max_commit_ms\": {}, \"wall_secs\": {:.1}, \"left_in_staging\": {}}}",
        sizes.len(),
        sizes.len() as f64 * per_hour,
        mib(total) * per_hour,
        mib(sizes.first().copied().unwrap_or(0)),
        mib(sizes.get(sizes.len() / 2).copied().unwrap_or(0)),
        mib(sizes.last().copied().unwrap_or(0)),
        max_commit.as_millis(),
        wall.as_secs_f64(),
        out.join("_staging").exists() && walk_files(&out.join("_staging")).is_some_and(|n| n > 0),
    );
    if rows_back != row as i64 {
        return Err(format!("wrote {row} rows but read {rows_back} back").into());
    }
    Ok(())
}

/// Files below `dir`, recursively.
fn walk_files(dir: &std::path::Path) -> Option<usize> {
    let mut n = 0;
    for entry in std::fs::read_dir(dir).ok()? {
        let path = entry.ok()?.path();
        n += if path.is_dir() { walk_files(&path)? } else { 1 };
    }
    Some(n)
}
