//! End-to-end throughput of a stateful plugin pipeline through `weir::Engine`: keyed state in
//! the task's redb file (the default) or in Redis, committed after every input batch.
//!
//! The job: a `datagen` source of one Int64 column `k` (a sequence over 100,000 keys, so every
//! key comes back every 100,000 rows), a HASH edge on `k`, a plugin operator that keeps a running
//! count per key in keyed state (`Value<u64>`: one get and one put per row, as in
//! docs/plugins.md) and emits `(k, count)`, and a `blackhole` sink. Run at source batch sizes
//! 1,024 and 8,192 rows (one state commit per input batch of the keyed task) and parallelism 1
//! and 2. Throughput is in source rows. Every run checks that the sink got every row and that
//! each of the 100,000 keys reached its final count (rows / 100,000) exactly once, so a run that
//! lost or repeated state cannot look fast.
//!
//! The Redis variant (`redis_batch_*`) is the same job with `state: {backend: redis}` pointing at
//! a `redis-server` this bench starts (`weir_testkit::redis::RedisServer`: Debian's package,
//! fetched once, no persistence). The server is flushed before each run, outside the timed
//! part, so a run does not time clearing the previous run's keys. Where no server can be had
//! the bench prints `NOT RUN: ...` and measures redb only. The task's journal reaches Redis when
//! the task syncs (every 5 s of commits, and at the end of input); a get of a key the journal
//! no longer holds is then one round trip. A run shorter than 5 s therefore writes Redis once
//! and never reads it per key: raise `WEIR_BENCH_ROWS` to see runs that sync mid-way.
//!
//! Before the criterion group, an interleaved pass runs each case on redb and on Redis in turn
//! ([`RATIO_ROUNDS`] times, or `WEIR_BENCH_RATIO_ROUNDS`), and prints the median rows/s of each,
//! the Redis/redb ratio and the Redis commands and read events per run (`INFO commandstats`,
//! `INFO stats`). Set `WEIR_BENCH_RATIO=0` to skip it; a filter that matches no benchmark
//! (`-- ratio_pass_only`) runs only this pass.
//!
//! Run: `CARGO_TARGET_DIR=/var/tmp/weir-target cargo bench --bench keyed_pipeline`.
//! `WEIR_BENCH_ROWS` overrides the rows per run (default 2,000,000; a multiple of 100,000).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use weir::api::state::Value;
use weir::api::{
    Error, KeyedStateStore, Operator, OperatorArgs, OperatorFactory, Output, PreparedOperator,
    Result, StateDescriptor, StateShardId, TaskContext,
};
use weir::plan::{StateBackendSpec, key_hash};
use weir::state::KeyedStateExt;
use weir::{Engine, JobSpec};
use weir_testkit::redis::RedisServer;

/// Distinct keys of the source's sequence.
const KEYS: u64 = 100_000;
/// Default source rows per run.
const DEFAULT_ROWS: u64 = 2_000_000;
/// Runs per case and backend in the interleaved ratio pass (`WEIR_BENCH_RATIO_ROUNDS`
/// overrides it).
const RATIO_ROUNDS: usize = 3;
/// Source batch sizes and parallelisms of the cases.
const CASES: [(u32, u32); 4] = [(1024, 1), (1024, 2), (8192, 1), (8192, 2)];

/// The plugin: count[k] += 1 per row, in keyed state. `finals` counts rows whose count reached
/// `final_count`, which happens once per key when every key has been seen `final_count` times.
struct RunningCountFactory {
    final_count: u64,
    finals: Arc<AtomicU64>,
}

#[derive(Debug)]
struct PreparedRunningCount {
    schema: SchemaRef,
    final_count: u64,
    finals: Arc<AtomicU64>,
}

struct RunningCount {
    store: Box<dyn KeyedStateStore>,
    shards: u32,
    schema: SchemaRef,
    count: StateDescriptor<Value<u64>>,
    final_count: u64,
    finals: Arc<AtomicU64>,
}

impl OperatorFactory for RunningCountFactory {
    fn prepare(&self, _spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>> {
        Ok(Arc::new(PreparedRunningCount {
            schema: Arc::new(Schema::new(vec![
                Field::new("k", DataType::Int64, false),
                Field::new("count", DataType::UInt64, false),
            ])),
            final_count: self.final_count,
            finals: self.finals.clone(),
        }))
    }
}

impl PreparedOperator for PreparedRunningCount {
    fn output_schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn describe(&self) -> String {
        "running_count".into()
    }

    fn create(&self, ctx: &TaskContext) -> Result<Box<dyn Operator>> {
        let shards = ctx
            .state_shard_count
            .ok_or_else(|| Error::config("partition", "running_count needs a hash input"))?;
        Ok(Box::new(RunningCount {
            store: ctx.keyed_state()?,
            shards,
            schema: self.schema.clone(),
            count: StateDescriptor::new("count"),
            final_count: self.final_count,
            finals: self.finals.clone(),
        }))
    }
}

impl Operator for RunningCount {
    fn process_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        let column: ArrayRef = batch.column(0).clone();
        let shard_ids = key_hash::shard_ids(std::slice::from_ref(&column), self.shards)
            .map_err(|e| Error::Internal(e.to_string()))?;
        let keys = column
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| Error::Internal("k is Int64".into()))?;
        let mut counts = Vec::with_capacity(keys.len());
        let mut finals = 0;
        for (k, shard) in keys.values().iter().zip(shard_ids.iter()) {
            self.store
                .set_current_key(&k.to_le_bytes(), StateShardId(*shard));
            let mut state = self.store.value_state(&self.count)?;
            let n = state.value()?.unwrap_or(0) + 1;
            state.update(&n)?;
            finals += u64::from(n == self.final_count);
            counts.push(n);
        }
        self.finals.fetch_add(finals, Ordering::Relaxed);
        let counts: ArrayRef = Arc::new(UInt64Array::from(counts));
        let batch = RecordBatch::try_new(self.schema.clone(), vec![column, counts])
            .map_err(|e| Error::arrow("building output", e))?;
        out.emit(batch);
        Ok(())
    }
}

fn spec(rows: u64, parallelism: u32, batch_size: u32) -> JobSpec {
    let yaml = format!(
        r#"job: keyed-bench
parallelism: {parallelism}
state_shards: 128
sources:
  - name: gen
    connector: datagen
    schema: [{{ name: k, type: int64, nullable: false }}]
    options:
      rows: {rows}
      splits: {parallelism}
      batch_size: {batch_size}
      fields: {{ k: {{ kind: sequence, cardinality: {KEYS} }} }}
operators:
  - name: counter
    type: running_count
    input: {{ from: gen, partition: {{ hash: [k] }} }}
sinks:
  - {{ name: out, connector: blackhole, input: counter }}
"#
    );
    JobSpec::from_yaml_str(&yaml, "keyed_pipeline.yaml").expect("the bench spec parses")
}

fn rows_per_run() -> u64 {
    let rows = std::env::var("WEIR_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_ROWS);
    assert!(
        rows >= KEYS && rows.is_multiple_of(KEYS),
        "WEIR_BENCH_ROWS must be a multiple of {KEYS}"
    );
    rows
}

/// Calls of `GET` and `EVALSHA` (`INFO commandstats`; commands a script runs count under their
/// own names) and read events on client sockets (`total_reads_processed` of `INFO stats`: about
/// one per round trip, several for a large pipeline).
fn redis_calls(server: &RedisServer) -> [u64; 3] {
    let field = |section: &str, prefix: &str| -> u64 {
        let info = server.command(&["INFO", section]).expect("INFO");
        info.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    };
    [
        field("commandstats", "cmdstat_get:calls="),
        field("commandstats", "cmdstat_evalsha:calls="),
        field("stats", "total_reads_processed:"),
    ]
}

/// What one run needs: the engine with the plugin, a runtime, the check counter.
struct Bench {
    rows: u64,
    runtime: tokio::runtime::Runtime,
    engine: Engine,
    finals: Arc<AtomicU64>,
    redis: Option<RedisServer>,
}

impl Bench {
    fn new() -> Self {
        let rows = rows_per_run();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let finals = Arc::new(AtomicU64::new(0));
        let mut engine = Engine::new();
        engine.register_operator(
            "running_count",
            Arc::new(RunningCountFactory {
                final_count: rows / KEYS,
                finals: finals.clone(),
            }),
        );
        let redis = match RedisServer::start() {
            Ok(server) => Some(server),
            Err(e) => {
                eprintln!("NOT RUN: the Redis variant of keyed_pipeline (no redis-server): {e}");
                None
            }
        };
        Self {
            rows,
            runtime,
            engine,
            finals,
            redis,
        }
    }

    /// The job of one case, with its state in Redis when `redis` (and a server is up).
    fn spec(&self, batch_size: u32, parallelism: u32, redis: bool) -> Option<JobSpec> {
        let mut spec = spec(self.rows, parallelism, batch_size);
        if redis {
            spec.state = Some(StateBackendSpec::redis(self.redis.as_ref()?.url()));
        }
        Some(spec)
    }

    /// Runs the job once and checks it; returns the run's time. A Redis server is flushed
    /// first, untimed.
    fn run(&self, spec: &JobSpec) -> Duration {
        if let Some(server) = &self.redis
            && spec.state.is_some()
        {
            let reply = server.command(&["FLUSHALL"]).expect("FLUSHALL");
            assert!(reply.starts_with("+OK"), "FLUSHALL: {reply}");
        }
        self.finals.store(0, Ordering::Relaxed);
        let started = Instant::now();
        let summary = self
            .runtime
            .block_on(self.engine.run(spec, None))
            .expect("the bench job runs");
        let elapsed = started.elapsed();
        assert_eq!(summary.metrics.source_rows(), self.rows, "source rows");
        assert_eq!(summary.metrics.sink_rows(), self.rows, "sink rows");
        assert_eq!(
            self.finals.load(Ordering::Relaxed),
            KEYS,
            "every key reached its final count once"
        );
        elapsed
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Interleaved pass: each case on redb, then on Redis, [`RATIO_ROUNDS`] times; median rows/s
/// and the Redis/redb ratio.
fn ratio_report(bench: &Bench) {
    let rows = bench.rows;
    let rounds = std::env::var("WEIR_BENCH_RATIO_ROUNDS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(RATIO_ROUNDS);
    eprintln!(
        "\nkeyed_pipeline ratio pass: {rows} rows over {KEYS} keys per run, median of {rounds} interleaved runs"
    );
    eprintln!(
        "{:>6} {:>4} {:>12} {:>12} {:>11} {:>10} {:>12} {:>12}",
        "batch",
        "par",
        "redb rows/s",
        "redis rows/s",
        "redis/redb",
        "GET/run",
        "EVALSHA/run",
        "reads/run"
    );
    for (batch_size, parallelism) in CASES {
        let redb = bench
            .spec(batch_size, parallelism, false)
            .expect("a redb spec");
        let redis = bench.spec(batch_size, parallelism, true);
        let (mut redb_times, mut redis_times) = (Vec::new(), Vec::new());
        let mut calls = [0_u64; 3];
        for _ in 0..rounds {
            redb_times.push(bench.run(&redb));
            if let (Some(spec), Some(server)) = (&redis, &bench.redis) {
                let before = redis_calls(server);
                redis_times.push(bench.run(spec));
                let after = redis_calls(server);
                for (total, (a, b)) in calls.iter_mut().zip(after.iter().zip(before)) {
                    *total += a.saturating_sub(b);
                }
            }
        }
        let per_sec = |t: Duration| rows as f64 / t.as_secs_f64();
        let redb_rate = per_sec(median(redb_times));
        if redis_times.is_empty() {
            eprintln!(
                "{batch_size:>6} {parallelism:>4} {redb_rate:>12.0} NOT RUN: Redis (no redis-server)"
            );
            continue;
        }
        let redis_rate = per_sec(median(redis_times));
        let per_run = |n: u64| n as f64 / rounds as f64;
        eprintln!(
            "{batch_size:>6} {parallelism:>4} {redb_rate:>12.0} {redis_rate:>12.0} {:>10.0}% {:>10.0} {:>12.0} {:>12.0}",
            redis_rate / redb_rate * 100.0,
            per_run(calls[0]),
            per_run(calls[1]),
            per_run(calls[2]),
        );
    }
    eprintln!();
}

fn keyed_pipeline(c: &mut Criterion) {
    let bench = Bench::new();
    let listing = std::env::args().any(|a| a == "--list" || a == "--test");
    if !listing && std::env::var("WEIR_BENCH_RATIO").as_deref() != Ok("0") {
        ratio_report(&bench);
    }
    let mut group = c.benchmark_group("keyed_pipeline");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(30));
    group.throughput(Throughput::Elements(bench.rows));
    for redis in [false, true] {
        for (batch_size, parallelism) in CASES {
            let Some(spec) = bench.spec(batch_size, parallelism, redis) else {
                continue;
            };
            let name = if redis { "redis_batch" } else { "batch" };
            let id = BenchmarkId::new(format!("{name}_{batch_size}"), parallelism);
            group.bench_with_input(id, &spec, |b, spec| {
                b.iter_custom(|iters| (0..iters).map(|_| bench.run(spec)).sum());
            });
        }
    }
    group.finish();
}

criterion_group!(benches, keyed_pipeline);
criterion_main!(benches);
