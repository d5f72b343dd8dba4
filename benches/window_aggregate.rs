//! Throughput of keyed event-time window aggregation: the `window` operator alone, and a whole
//! `datagen -> window -> blackhole` job through `weir::Engine`.
//!
//! Workload: bid-like rows (Int64 `auction` uniform over 10,000 keys, Int64 `bidder`, Float64
//! `price` in [0, 1000), Timestamp(ms) `ts`), aggregated per auction over tumbling 10 s windows
//! with `count`, `sum(price)` and `max(price)`, late policy `drop`. Event time advances 1 ms per
//! row, as in `datagen` (so a window holds 10,000 rows over ~6,300 auctions); the operator-alone
//! input adds a jitter of up to 2 s below that, so rows arrive out of order, but never beyond
//! the 5 s out-of-orderness of the watermarks (no row is late, which every run asserts).
//!
//! - `window_operator/{tumble_10s,hop_10s_2s}/{1,2}`: `process_batch` of 65,536-row batches
//!   generated in memory before timing, each followed by `process_watermark(max ts - 5 s - 1)`
//!   so windows fire continuously, then the end-of-input watermark. At parallelism 2 the batches
//!   are hash-partitioned on `auction` (the engine's partitioner, 128 state shards) before
//!   timing and two operator instances run on two threads. Creating the operator is timed.
//! - `window_job/tumble_10s/{1,2}`: the job spec `examples/bench/window-tumble.yaml` (the same
//!   file `weir run` takes) at parallelism 1 and 2: datagen with event-time watermarks, a HASH
//!   edge on `auction`, the window, a blackhole sink. Planning the job is not timed.
//!
//! Throughput is in input rows. Every run checks its results: the `bids` counts of all emitted
//! window results add up to the input rows, no row was dropped, and the result row count equals
//! that of a reference run (and is the same at both parallelisms), so a broken bench cannot look
//! fast.
//!
//! Run: `CARGO_TARGET_DIR=/var/tmp/weir-target cargo bench --bench window_aggregate`.
//! `WEIR_BENCH_ROWS` overrides the rows of the operator-alone runs (default 10,000,000).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use arrow::array::{ArrayRef, AsArray, Float64Array, Int64Array, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use criterion::{
    BatchSize, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use weir::api::{
    Emitted, EventTimeMs, JobId, Operator, OperatorId, Output, PreparedOperator, SubtaskIndex,
    TaskContext, Watermark, watermark_for,
};
use weir::operators::window::{PreparedWindow, WindowConfig, WindowOptions};
use weir::plan::ShardAssignment;
use weir::runtime::partition::HashPartitioner;
use weir::{Engine, JobSpec, RunSummary};

/// Default input rows of an operator-alone run.
const DEFAULT_ROWS: usize = 10_000_000;
/// Rows per input batch of the operator-alone runs.
const BATCH_ROWS: usize = 65_536;
/// Distinct auctions (the window key).
const AUCTIONS: u64 = 10_000;
/// Event time of row 0: 2023-11-14T22:13:20Z, a multiple of 10 s.
const BASE_TS: i64 = 1_700_000_000_000;
/// Largest jitter subtracted from a row's event time (ms).
const JITTER_MS: u64 = 2_000;
/// Out-of-orderness the watermarks allow (ms): more than the jitter, so no row is late.
const OUT_OF_ORDERNESS_MS: u64 = 5_000;
/// State shards of a keyed vertex (the engine's default).
const SHARDS: u32 = 128;
/// The end-to-end job, as `weir run` takes it.
const JOB_FILE: &str = "examples/bench/window-tumble.yaml";
const JOB_YAML: &str = include_str!("../examples/bench/window-tumble.yaml");

/// A splitmix64 step: deterministic pseudo-random values without a `rand` dependency.
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn bid_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("auction", DataType::Int64, false),
        Field::new("bidder", DataType::Int64, false),
        Field::new("price", DataType::Float64, false),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        ),
    ]))
}

/// Rows `first..first + len` of the generated bid stream.
fn bid_batch(schema: &SchemaRef, first: usize, len: usize) -> RecordBatch {
    let rows = first as u64..(first + len) as u64;
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(
            rows.clone().map(|r| 1_000 + (mix(r) % AUCTIONS) as i64),
        )),
        Arc::new(Int64Array::from_iter_values(
            rows.clone().map(|r| (mix(r ^ 0xB1D) % 1_000_000) as i64),
        )),
        Arc::new(Float64Array::from_iter_values(
            rows.clone()
                .map(|r| (mix(r ^ 0x9E1) % 100_000) as f64 / 100.0),
        )),
        Arc::new(TimestampMillisecondArray::from_iter_values(rows.map(|r| {
            BASE_TS + r as i64 - (mix(r ^ 0x7157) % JITTER_MS) as i64
        }))),
    ];
    RecordBatch::try_new(Arc::clone(schema), columns).expect("the bid batch matches its schema")
}

/// One subtask's input: batches, each followed by the watermark `max ts so far - 5 s - 1`.
type Input = Vec<(RecordBatch, Watermark)>;

/// The whole stream in `BATCH_ROWS` batches with their watermarks.
fn generate(rows: usize) -> Input {
    let schema = bid_schema();
    let mut max_ts = i64::MIN;
    (0..rows)
        .step_by(BATCH_ROWS)
        .map(|first| {
            let batch = bid_batch(&schema, first, BATCH_ROWS.min(rows - first));
            let ts = batch
                .column(3)
                .as_primitive::<arrow::datatypes::TimestampMillisecondType>();
            max_ts = ts.values().iter().copied().fold(max_ts, i64::max);
            (
                batch,
                watermark_for(EventTimeMs(max_ts), OUT_OF_ORDERNESS_MS),
            )
        })
        .collect()
}

/// `input` hash-partitioned on `auction` into `parallelism` subtask inputs, as a HASH edge
/// routes it (every part keeps its batch's watermark).
fn partition(input: &Input, parallelism: u32) -> Vec<Input> {
    let owners = ShardAssignment::contiguous(SHARDS, parallelism)
        .expect("fewer subtasks than shards")
        .owner_table();
    let partitioner = HashPartitioner::try_new(vec![0], owners, parallelism as usize)
        .expect("a consistent partitioner");
    let mut parts = vec![Input::new(); parallelism as usize];
    for (batch, watermark) in input {
        let routed = partitioner.partition(batch).expect("partitioning succeeds");
        for (part, rows) in parts.iter_mut().zip(routed) {
            if let Some(rows) = rows {
                part.push((rows, *watermark));
            }
        }
    }
    parts
}

/// The window options of the job spec (`examples/bench/window-tumble.yaml`).
fn window_options(window: serde_json::Value) -> WindowOptions {
    serde_json::from_value(serde_json::json!({
        "time_column": "ts",
        "window": window,
        "key_by": ["auction"],
        "aggregates": [
            {"function": "count", "as": "bids"},
            {"function": "sum", "column": "price", "as": "total"},
            {"function": "max", "column": "price", "as": "max_price"},
        ],
        "late": {"policy": "drop"},
    }))
    .expect("the window options parse")
}

fn prepared_window(window: serde_json::Value) -> PreparedWindow {
    let cfg = WindowConfig::resolve(
        &window_options(window),
        &bid_schema(),
        "operators[0].options",
    )
    .expect("the window options resolve");
    PreparedWindow::new(cfg)
}

/// What one operator instance emitted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Tally {
    /// Result rows (one per key and window).
    results: u64,
    /// Sum of the `bids` counts: every input row once per window it belongs to.
    counted: u64,
    /// Rows dropped as late.
    dropped: u64,
}

impl Tally {
    fn absorb(&mut self, out: &mut Output) {
        for emitted in out.drain() {
            if let Emitted::Data { port: 0, batch } = emitted {
                self.results += batch.num_rows() as u64;
                let bids = batch
                    .column_by_name("bids")
                    .expect("a bids column")
                    .as_primitive::<Int64Type>();
                self.counted += bids.values().iter().map(|&n| n as u64).sum::<u64>();
            }
        }
    }

    fn add(self, other: Tally) -> Tally {
        Tally {
            results: self.results + other.results,
            counted: self.counted + other.counted,
            dropped: self.dropped + other.dropped,
        }
    }
}

/// Runs one operator instance (subtask `subtask` of `parallelism`) over `input` to the end.
fn drive(prepared: &PreparedWindow, subtask: u32, parallelism: u32, input: &Input) -> Tally {
    let mut ctx = TaskContext::new(
        JobId::new("window-bench"),
        OperatorId::new("per_auction"),
        SubtaskIndex(subtask),
        parallelism,
    );
    ctx.state_shard_count = Some(SHARDS);
    let dropped = Arc::clone(&ctx.dropped_rows);
    let mut op: Box<dyn Operator> = prepared.create(&ctx).expect("the window is created");
    let mut out = Output::new();
    let mut tally = Tally::default();
    for (batch, watermark) in input {
        op.process_batch(0, batch.clone(), &mut out)
            .expect("the window takes the batch");
        op.process_watermark(*watermark, &mut out)
            .expect("the window takes the watermark");
        tally.absorb(&mut out);
    }
    op.process_watermark(Watermark::END, &mut out)
        .expect("the window takes the final watermark");
    op.on_end_of_input(&mut out)
        .expect("the window ends its input");
    tally.absorb(&mut out);
    tally.dropped = dropped.load(Ordering::Relaxed);
    tally
}

/// Runs one instance per part, each on its own thread, and adds up what they emitted.
fn drive_all(prepared: &PreparedWindow, parts: &[Input]) -> Tally {
    let parallelism = parts.len() as u32;
    if parallelism == 1 {
        return drive(prepared, 0, 1, &parts[0]);
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = parts
            .iter()
            .enumerate()
            .map(|(i, part)| scope.spawn(move || drive(prepared, i as u32, parallelism, part)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a window thread does not panic"))
            .fold(Tally::default(), Tally::add)
    })
}

fn rows_per_run() -> usize {
    std::env::var("WEIR_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_ROWS)
}

fn window_operator(c: &mut Criterion) {
    let rows = rows_per_run();
    let input = generate(rows);
    let kinds = [
        (
            "tumble_10s",
            serde_json::json!({"type": "tumble", "size": "10s"}),
            1_u64,
        ),
        (
            "hop_10s_2s",
            serde_json::json!({"type": "hop", "size": "10s", "slide": "2s"}),
            5,
        ),
    ];
    let mut group = c.benchmark_group("window_operator");
    group
        .throughput(Throughput::Elements(rows as u64))
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(15));
    for (label, window, windows_per_row) in kinds {
        let prepared = prepared_window(window);
        let mut reference = None;
        for parallelism in [1_u32, 2] {
            let parts = if parallelism == 1 {
                vec![input.clone()]
            } else {
                partition(&input, parallelism)
            };
            let routed: usize = parts.iter().flatten().map(|(b, _)| b.num_rows()).sum();
            assert_eq!(routed, rows, "every row is routed once");
            // A reference run: every row counted once per window, none dropped, and the same
            // results at every parallelism.
            let tally = drive_all(&prepared, &parts);
            assert_eq!(tally.dropped, 0, "{label}: no row is late");
            assert_eq!(
                tally.counted,
                rows as u64 * windows_per_row,
                "{label}: every row counted in each of its windows"
            );
            let expected = *reference.get_or_insert(tally);
            assert_eq!(tally, expected, "{label}: parallelism changes no result");
            eprintln!(
                "{label} p={parallelism}: {} result rows for {rows} input rows",
                tally.results
            );
            group.bench_function(BenchmarkId::new(label, parallelism), |b| {
                b.iter(|| {
                    let tally = drive_all(&prepared, &parts);
                    assert_eq!(tally, expected, "{label}: the same results every run");
                    tally
                });
            });
        }
    }
    group.finish();
}

/// The job spec at `parallelism` (what `weir run -p N` does to it).
fn job_spec(parallelism: u32) -> JobSpec {
    let mut spec = JobSpec::from_yaml_str(JOB_YAML, JOB_FILE).expect("the bench job parses");
    spec.parallelism = Some(parallelism);
    spec
}

/// Checks a finished run: every source row was read, none dropped, `expected` results.
fn check_job(summary: &RunSummary, expected: u64) {
    let window = summary
        .metrics
        .operator("per_auction")
        .expect("the window's metrics");
    assert_eq!(
        window.rows_in,
        summary.metrics.source_rows(),
        "window input"
    );
    assert_eq!(window.dropped, 0, "no row is late");
    assert_eq!(summary.metrics.sink_rows(), expected, "window results");
}

fn window_job(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let engine = Engine::new();
    let run = |parallelism: u32| {
        runtime
            .block_on(engine.run(&job_spec(parallelism), Some(JOB_FILE)))
            .expect("the bench job runs")
    };
    let reference = run(1);
    let rows = reference.metrics.source_rows();
    let expected = reference.metrics.sink_rows();
    check_job(&reference, expected);
    check_job(&run(2), expected);
    eprintln!("window job: {expected} result rows for {rows} source rows");

    let mut group = c.benchmark_group("window_job");
    group
        .throughput(Throughput::Elements(rows))
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(20));
    for parallelism in [1_u32, 2] {
        let spec = job_spec(parallelism);
        group.bench_function(BenchmarkId::new("tumble_10s", parallelism), |b| {
            b.iter_batched(
                || {
                    runtime
                        .block_on(engine.prepare(&spec, Some(JOB_FILE)))
                        .expect("the bench job prepares")
                },
                |job| {
                    let summary = runtime
                        .block_on(async { engine.start(job).await?.wait().await })
                        .expect("the bench job runs");
                    assert_eq!(summary.metrics.source_rows(), rows, "source rows");
                    check_job(&summary, expected);
                    summary
                },
                BatchSize::PerIteration,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, window_operator, window_job);
criterion_main!(benches);
