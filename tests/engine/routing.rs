//! HASH edges: with parallelism > 1 every key arrives only at the owner of its state shard.
//! The check runs through a plugin operator registered by name, as a Rust user would write one.

use arrow::array::{Array, Int64Array, RecordBatch};
use arrow::datatypes::SchemaRef;
use proptest::prelude::*;
use std::sync::{Arc, Mutex};
use weir::api::{
    Error, Operator, OperatorArgs, OperatorFactory, Output, PreparedOperator, Result, TaskContext,
};
use weir::plan::{Plan, ShardAssignment, key_hash};
use weir::{Engine, JobSpec};

type Seen = Arc<Mutex<Vec<(u32, i64)>>>;

/// Plugin: records (subtask, key) for every row of column `key`, passes batches on.
struct KeyRecorderFactory(Seen);

#[derive(Debug)]
struct PreparedRecorder {
    schema: SchemaRef,
    column: usize,
    seen: Seen,
}

struct Recorder {
    subtask: u32,
    column: usize,
    seen: Seen,
}

impl OperatorFactory for KeyRecorderFactory {
    fn prepare(&self, spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>> {
        let key = spec
            .options
            .get("key")
            .and_then(|k| k.as_str())
            .ok_or_else(|| Error::config(format!("{}.key", spec.options_path), "missing"))?;
        let schema = spec.input_schemas[0].clone();
        let column = schema
            .index_of(key)
            .map_err(|e| Error::config(format!("{}.key", spec.options_path), e.to_string()))?;
        Ok(Arc::new(PreparedRecorder {
            schema,
            column,
            seen: self.0.clone(),
        }))
    }
}

impl PreparedOperator for PreparedRecorder {
    fn output_schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn describe(&self) -> String {
        "key_recorder".into()
    }

    fn create(&self, ctx: &TaskContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(Recorder {
            subtask: ctx.subtask.0,
            column: self.column,
            seen: self.seen.clone(),
        }))
    }
}

impl Operator for Recorder {
    fn process_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        let keys = batch
            .column(self.column)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| Error::Internal("key column is not Int64".into()))?;
        let mut seen = self
            .seen
            .lock()
            .map_err(|_| Error::Internal("poisoned".into()))?;
        seen.extend(keys.iter().flatten().map(|k| (self.subtask, k)));
        drop(seen);
        out.emit(batch);
        Ok(())
    }
}

fn spec(rows: u64, parallelism: u32, shards: u32, seed: u64) -> JobSpec {
    JobSpec::from_yaml_str(
        &format!(
            r#"
job: routing
parallelism: {parallelism}
state_shards: {shards}
sources:
  - name: gen
    connector: datagen
    schema: [{{ name: k, type: int64, nullable: false }}, {{ name: v, type: string }}]
    options: {{ rows: {rows}, splits: {parallelism}, batch_size: 97, seed: {seed},
               fields: {{ k: {{ kind: random, min: -1000, max: 1000 }} }} }}
operators:
  - name: recorder
    type: key_recorder
    input: {{ from: gen, partition: {{ hash: [k] }} }}
    options: {{ key: k }}
sinks:
  - {{ name: sink, connector: blackhole, input: recorder }}
"#
        ),
        "routing.yaml",
    )
    .expect("spec parses")
}

fn run_and_check(rows: u64, parallelism: u32, shards: u32, seed: u64) {
    let seen: Seen = Arc::default();
    let mut engine = Engine::new();
    engine.register_operator("key_recorder", Arc::new(KeyRecorderFactory(seen.clone())));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("runtime");
    let summary = rt
        .block_on(engine.run(&spec(rows, parallelism, shards, seed), None))
        .expect("job runs");
    assert_eq!(summary.metrics.sink_rows(), rows);
    let owners = ShardAssignment::contiguous(shards, parallelism)
        .expect("valid")
        .owner_table();
    let seen = seen.lock().expect("lock");
    assert_eq!(
        seen.len() as u64,
        rows,
        "every row reached the recorder once"
    );
    for &(subtask, key) in seen.iter() {
        let keys: arrow::array::ArrayRef = Arc::new(Int64Array::from(vec![key]));
        let shard = key_hash::shard_ids(&[keys], shards).expect("hash")[0];
        assert_eq!(
            subtask, owners[shard as usize],
            "key {key} (shard {shard}) reached subtask {subtask}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]
    #[test]
    fn every_key_arrives_only_at_its_shard_owner(
        parallelism in 2u32..=4,
        shards in 4u32..=64,
        seed in any::<u64>(),
    ) {
        run_and_check(3_000, parallelism, shards, seed);
    }
}

#[test]
fn parallelism_four_routes_by_shard_owner() {
    run_and_check(20_000, 4, 128, 7);
}

#[test]
fn the_plan_records_the_hash_edge_and_its_owners() {
    let plans = weir::CompiledPlans::compile(&spec(10, 4, 8, 0), None).expect("compiles");
    let json = plans.partitioned.to_json();
    assert!(json.contains(r#""policy":"HASH""#), "{json}");
    assert!(json.contains(weir::plan::HASH_POLICY), "{json}");
}
