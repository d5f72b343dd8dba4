//! End-to-end throughput of a stateless pipeline through `weir::Engine`, source to sink.
//!
//! Stresses the whole local runtime on one chained vertex per subtask: a `datagen` source of a
//! 6-column bid schema (Int64 auction, Int64 bidder, Float64 price, Utf8 channel of 4 values,
//! Utf8 url of 1000 values, Timestamp(ms) date_time), a `filter` (`price > 100`, keeps ~90%), a
//! `project` (`auction, bidder, price * 0.908 AS euro, channel, date_time`) and a `blackhole`
//! sink, at parallelism 1 and 2 (`splits` = parallelism, so every subtask reads). Two shorter
//! chains, source -> sink and source -> filter -> sink, split the cost per stage. Throughput is
//! in source rows. Every run asserts the source row count and the sink row count (the filtered
//! count, taken from a reference run and checked against the expected ~90% and across
//! parallelisms), so a broken pipeline cannot look fast.
//!
//! A `cpu_capacity` group first spins a fixed integer-hash loop on 1 and on 2 threads: on a
//! shared VM two vCPUs do not always give twice the compute, and the ratio of its two figures
//! bounds the speedup parallelism 2 can show on the run's machine.
//!
//! Run: `CARGO_TARGET_DIR=/var/tmp/weir-target cargo bench --bench stateless_pipeline`.
//! `WEIR_BENCH_ROWS` overrides the rows per run (default 50,000,000).

use std::time::Duration;

use criterion::{
    BatchSize, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use tokio::runtime::Runtime;
use weir::{Engine, JobSpec, RunSummary};

/// Default source rows per run: 0.5 to 2 s of work per run on the 2-core reference machine.
const DEFAULT_ROWS: u64 = 50_000_000;
/// Rows per source batch (datagen's default).
const BATCH_SIZE: u32 = 8192;

/// The chain after the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stages {
    /// source -> blackhole: generation and the runtime alone.
    SourceOnly,
    /// source -> filter -> blackhole.
    Filter,
    /// source -> filter -> project -> blackhole: the pipeline the target is about.
    FilterProject,
}

impl Stages {
    fn label(self) -> &'static str {
        match self {
            Stages::SourceOnly => "source_sink",
            Stages::Filter => "source_filter_sink",
            Stages::FilterProject => "source_filter_project_sink",
        }
    }
}

/// The job spec, as a user would write it (it runs unchanged with `weir run --json`).
fn spec_yaml(rows: u64, parallelism: u32, stages: Stages) -> String {
    let operators = match stages {
        Stages::SourceOnly => "operators: []\n",
        Stages::Filter => {
            r#"operators:
  - name: expensive
    type: filter
    input: bids
    options: { predicate: "price > 100" }
"#
        }
        Stages::FilterProject => {
            r#"operators:
  - name: expensive
    type: filter
    input: bids
    options: { predicate: "price > 100" }
  - name: euro
    type: project
    input: expensive
    options:
      expressions: [auction, bidder, "price * 0.908 AS euro", channel, date_time]
"#
        }
    };
    let sink_input = match stages {
        Stages::SourceOnly => "bids",
        Stages::Filter => "expensive",
        Stages::FilterProject => "euro",
    };
    format!(
        r#"job: stateless-bench
parallelism: {parallelism}
sources:
  - name: bids
    connector: datagen
    schema:
      - {{ name: auction, type: int64, nullable: false }}
      - {{ name: bidder, type: int64, nullable: false }}
      - {{ name: price, type: float64, nullable: false }}
      - {{ name: channel, type: string, nullable: false }}
      - {{ name: url, type: string, nullable: false }}
      - {{ name: date_time, type: "timestamp(ms)", nullable: false }}
    options:
      rows: {rows}
      splits: {parallelism}
      batch_size: {BATCH_SIZE}
      seed: 42
      fields:
        auction: {{ kind: random, min: 1000, max: 11000 }}
        bidder: {{ kind: random, min: 0, max: 999999 }}
        price: {{ kind: random, min: 0, max: 1000 }}
        channel: {{ kind: random, cardinality: 4 }}
        url: {{ kind: random, cardinality: 1000 }}
{operators}sinks:
  - name: out
    connector: blackhole
    input: {sink_input}
"#
    )
}

fn spec(rows: u64, parallelism: u32, stages: Stages) -> JobSpec {
    JobSpec::from_yaml_str(
        &spec_yaml(rows, parallelism, stages),
        "stateless_pipeline.yaml",
    )
    .expect("the bench spec parses")
}

/// Runs `spec` to its end; preparing (planning the SQL expressions) is part of the run.
fn run(runtime: &Runtime, engine: &Engine, spec: &JobSpec) -> RunSummary {
    runtime
        .block_on(engine.run(spec, None))
        .expect("the bench job runs")
}

/// Checks a finished run: every source row was read and the sink got `expected_sink` rows.
fn check(summary: &RunSummary, rows: u64, expected_sink: u64) {
    assert_eq!(summary.metrics.source_rows(), rows, "source rows");
    assert_eq!(summary.metrics.sink_rows(), expected_sink, "sink rows");
}

fn rows_per_run() -> u64 {
    std::env::var("WEIR_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_ROWS)
}

/// Hash steps per thread and iteration of the capacity probe (about 20-40 ms of one core).
const SPIN_STEPS: u64 = 20_000_000;

/// A dependent chain of splitmix64 steps: pure integer work that neither allocates nor touches
/// memory, so it measures the cores alone.
fn spin(seed: u64) -> u64 {
    (0..SPIN_STEPS).fold(seed, |x, i| {
        let mut z = (x ^ i).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    })
}

fn cpu_capacity(c: &mut Criterion) {
    let mut group = c.benchmark_group("cpu_capacity");
    group.sample_size(10);
    for threads in [1_u64, 2] {
        group.throughput(Throughput::Elements(SPIN_STEPS * threads));
        group.bench_function(BenchmarkId::new("spin_threads", threads), |b| {
            b.iter(|| {
                std::thread::scope(|scope| {
                    let spinners: Vec<_> = (0..threads)
                        .map(|t| scope.spawn(move || spin(std::hint::black_box(t))))
                        .collect();
                    let results: Vec<u64> = spinners
                        .into_iter()
                        .map(|s| s.join().expect("a spinner does not panic"))
                        .collect();
                    assert_eq!(results.len() as u64, threads);
                    results
                })
            });
        });
    }
    group.finish();
}

fn stateless_pipeline(c: &mut Criterion) {
    let rows = rows_per_run();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let engine = Engine::new();

    // Reference counts. Every datagen value is a function of (seed, column, global row), so the
    // filtered count is the same at every parallelism; check that, and that the filter keeps the
    // ~90% of uniform prices in [0, 1000) above 100.
    let filtered = run(&runtime, &engine, &spec(rows, 1, Stages::Filter))
        .metrics
        .sink_rows();
    let expected = rows as f64 * 0.9;
    assert!(
        (filtered as f64 - expected).abs() <= expected * 0.01,
        "the filter kept {filtered} of {rows} rows, expected about {expected}"
    );
    let at_two = run(&runtime, &engine, &spec(rows, 2, Stages::FilterProject));
    check(&at_two, rows, filtered);
    eprintln!("reference run: `price > 100` kept {filtered} of {rows} source rows");

    let mut group = c.benchmark_group("stateless_pipeline");
    group
        .throughput(Throughput::Elements(rows))
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(20));
    for stages in [Stages::SourceOnly, Stages::Filter, Stages::FilterProject] {
        let expected_sink = if stages == Stages::SourceOnly {
            rows
        } else {
            filtered
        };
        for parallelism in [1_u32, 2] {
            let spec = spec(rows, parallelism, stages);
            group.bench_function(BenchmarkId::new(stages.label(), parallelism), |b| {
                // Planning the job (DataFusion expression planning) is set-up, not throughput.
                b.iter_batched(
                    || {
                        runtime
                            .block_on(engine.prepare(&spec, None))
                            .expect("the bench job prepares")
                    },
                    |job| {
                        let summary = runtime
                            .block_on(async { engine.start(job).await?.wait().await })
                            .expect("the bench job runs");
                        check(&summary, rows, expected_sink);
                        summary
                    },
                    BatchSize::PerIteration,
                );
            });
        }
    }
    group.finish();
}

criterion_group!(benches, cpu_capacity, stateless_pipeline);
criterion_main!(benches);
