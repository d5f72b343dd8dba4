//! End-to-end throughput of a stateful plugin pipeline through `weir::Engine`: keyed state in
//! the task's redb file, committed after every input batch.
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
//! Run: `CARGO_TARGET_DIR=/var/tmp/weir-target cargo bench --bench keyed_pipeline`.
//! `WEIR_BENCH_ROWS` overrides the rows per run (default 2,000,000; a multiple of 100,000).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

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
use weir::plan::key_hash;
use weir::state::KeyedStateExt;
use weir::{Engine, JobSpec};

/// Distinct keys of the source's sequence.
const KEYS: u64 = 100_000;
/// Default source rows per run.
const DEFAULT_ROWS: u64 = 2_000_000;

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

fn keyed_pipeline(c: &mut Criterion) {
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

    let mut group = c.benchmark_group("keyed_pipeline");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(30));
    group.throughput(Throughput::Elements(rows));
    for batch_size in [1024_u32, 8192] {
        for parallelism in [1_u32, 2] {
            let spec = spec(rows, parallelism, batch_size);
            let id = BenchmarkId::new(format!("batch_{batch_size}"), parallelism);
            group.bench_with_input(id, &spec, |b, spec| {
                b.iter(|| {
                    finals.store(0, Ordering::Relaxed);
                    let summary = runtime
                        .block_on(engine.run(spec, None))
                        .expect("the bench job runs");
                    assert_eq!(summary.metrics.source_rows(), rows, "source rows");
                    assert_eq!(summary.metrics.sink_rows(), rows, "sink rows");
                    assert_eq!(
                        finals.load(Ordering::Relaxed),
                        KEYS,
                        "every key reached its final count once"
                    );
                });
            });
        }
    }
    group.finish();
}

criterion_group!(benches, keyed_pipeline);
criterion_main!(benches);
