//! Keyed state through the runtime: a plugin operator keeps a running count per key in the
//! task's redb state, behind a HASH edge, at parallelism 1 and 3.

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use weir::api::state::Value;
use weir::api::{
    ConnectorSpec, Error, JobId, KeyedStateStore, Operator, OperatorArgs, OperatorFactory,
    OperatorId, Output, PipelineId, PreparedOperator, PreparedSink, Result, SinkCapability,
    SinkFactory, SinkWriter, StateDescriptor, StateShardId, SubtaskIndex, TaskContext, TaskId,
    VertexId,
};
use weir::plan::key_hash;
use weir::state::KeyedStateExt;
use weir::{Engine, JobSpec};

type Finals = Arc<Mutex<HashMap<i64, u64>>>;

/// Plugin: for every row, count[k] += 1 in keyed state; emits (k, count) and records the last
/// count seen per key.
struct RunningCountFactory(Finals);

#[derive(Debug)]
struct PreparedRunningCount {
    schema: SchemaRef,
    finals: Finals,
}

struct RunningCount {
    store: Box<dyn KeyedStateStore>,
    shards: u32,
    schema: SchemaRef,
    finals: Finals,
    count: StateDescriptor<Value<u64>>,
}

impl OperatorFactory for RunningCountFactory {
    fn prepare(&self, _spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>> {
        Ok(Arc::new(PreparedRunningCount {
            schema: Arc::new(Schema::new(vec![
                Field::new("k", DataType::Int64, false),
                Field::new("count", DataType::UInt64, false),
            ])),
            finals: self.0.clone(),
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
            finals: self.finals.clone(),
            count: StateDescriptor::new("count"),
        }))
    }
}

impl Operator for RunningCount {
    fn process_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        let keys: ArrayRef = batch.column(0).clone();
        let shard_ids = key_hash::shard_ids(std::slice::from_ref(&keys), self.shards)
            .map_err(|e| Error::Internal(e.to_string()))?;
        let keys = keys
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| Error::Internal("k is Int64".into()))?;
        let mut counts = Vec::with_capacity(keys.len());
        for (i, shard) in shard_ids.iter().enumerate() {
            let k = keys.value(i);
            self.store
                .set_current_key(&k.to_le_bytes(), StateShardId(*shard));
            let mut state = self.store.value_state(&self.count)?;
            let n = state.value()?.unwrap_or(0) + 1;
            state.update(&n)?;
            counts.push(n);
        }
        let mut finals = self
            .finals
            .lock()
            .map_err(|_| Error::Internal("poisoned".into()))?;
        for (k, n) in keys.values().iter().zip(&counts) {
            let slot = finals.entry(*k).or_default();
            *slot = (*slot).max(*n);
        }
        drop(finals);
        let counts: ArrayRef = Arc::new(UInt64Array::from(counts));
        let batch =
            RecordBatch::try_new(self.schema.clone(), vec![batch.column(0).clone(), counts])
                .map_err(|e| Error::arrow("building output", e))?;
        out.emit(batch);
        Ok(())
    }
}

fn run(parallelism: u32, state_dir: Option<std::path::PathBuf>) -> (HashMap<i64, u64>, u64) {
    let finals: Finals = Arc::default();
    let mut engine = Engine::new();
    engine.register_operator(
        "running_count",
        Arc::new(RunningCountFactory(finals.clone())),
    );
    let summary = run_on(&engine, parallelism, "blackhole", state_dir).expect("job runs");
    let finals = finals.lock().expect("lock").clone();
    (finals, summary.metrics.sink_rows())
}

fn run_on(
    engine: &Engine,
    parallelism: u32,
    sink: &str,
    state_dir: Option<std::path::PathBuf>,
) -> weir::Result<weir::RunSummary> {
    let spec = JobSpec::from_yaml_str(
        &format!(
            r#"
job: counts
parallelism: {parallelism}
state_shards: 32
sources:
  - name: gen
    connector: datagen
    schema: [{{ name: k, type: int64, nullable: false }}]
    options: {{ rows: 5000, splits: {parallelism}, batch_size: 250,
               fields: {{ k: {{ kind: random, min: 0, max: 199 }} }} }}
operators:
  - name: counter
    type: running_count
    input: {{ from: gen, partition: {{ hash: [k] }} }}
sinks:
  - {{ name: sink, connector: {sink}, input: counter }}
"#
        ),
        "counts.yaml",
    )
    .expect("spec parses");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("runtime");
    rt.block_on(async {
        let job = engine.prepare(&spec, None).await?;
        engine
            .start_with(
                job,
                weir::RunOptions {
                    state_dir,
                    ..Default::default()
                },
            )
            .await?
            .wait()
            .await
    })
}

#[test]
fn running_counts_live_in_keyed_state_at_any_parallelism() {
    let (one, rows) = run(1, None);
    assert_eq!(rows, 5000);
    assert_eq!(
        one.values().sum::<u64>(),
        5000,
        "final count per key sums to the input"
    );
    let (three, _) = run(3, None);
    assert_eq!(one, three, "the same counts at parallelism 3");
}

#[test]
fn state_files_are_one_per_keyed_task_in_the_state_dir() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (counts, _) = run(2, Some(dir.path().to_path_buf()));
    assert_eq!(counts.values().sum::<u64>(), 5000);
    let mut files = Vec::new();
    let mut stack = vec![dir.path().to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    // Only the two counter subtasks hold state; the stateless source chain opens nothing.
    assert_eq!(files.len(), 2, "{files:?}");
}

/// Sink that accepts `ok_batches` batches, counting their rows, then fails.
struct FailingSinkFactory {
    ok_batches: usize,
    accepted: Arc<AtomicU64>,
}

#[derive(Debug)]
struct FailingSink {
    ok_batches: usize,
    accepted: Arc<AtomicU64>,
}

struct FailingWriter {
    left: usize,
    accepted: Arc<AtomicU64>,
}

#[async_trait::async_trait]
impl SinkFactory for FailingSinkFactory {
    async fn prepare(
        &self,
        _spec: ConnectorSpec<'_>,
        _input: SchemaRef,
    ) -> Result<Arc<dyn PreparedSink>> {
        Ok(Arc::new(FailingSink {
            ok_batches: self.ok_batches,
            accepted: self.accepted.clone(),
        }))
    }
}

#[async_trait::async_trait]
impl PreparedSink for FailingSink {
    fn capabilities(&self) -> Vec<SinkCapability> {
        vec![SinkCapability::AtLeastOnce]
    }

    fn describe(&self) -> String {
        "failing sink".into()
    }

    async fn create_writer(&self, _ctx: &TaskContext) -> Result<Box<dyn SinkWriter>> {
        Ok(Box::new(FailingWriter {
            left: self.ok_batches,
            accepted: self.accepted.clone(),
        }))
    }
}

#[async_trait::async_trait]
impl SinkWriter for FailingWriter {
    async fn write_batch(&mut self, batch: RecordBatch) -> Result<()> {
        if self.left == 0 {
            return Err(Error::external(
                "test sink",
                "writing",
                "injected failure",
                false,
            ));
        }
        self.left -= 1;
        self.accepted
            .fetch_add(batch.num_rows() as u64, Ordering::SeqCst);
        Ok(())
    }

    async fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// The journal in the runtime: when the sink fails on a batch, the mutations that batch caused
/// never reach redb, so the stored counts add up to exactly the rows the sink acknowledged.
#[test]
fn a_failing_sink_rolls_back_the_state_of_its_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let accepted = Arc::new(AtomicU64::new(0));
    let mut engine = Engine::new();
    engine.register_operator(
        "running_count",
        Arc::new(RunningCountFactory(Arc::default())),
    );
    engine.registry_mut().register_sink(
        "failing",
        Arc::new(FailingSinkFactory {
            ok_batches: 7,
            accepted: accepted.clone(),
        }),
    );
    let err =
        run_on(&engine, 1, "failing", Some(dir.path().to_path_buf())).expect_err("the sink fails");
    assert!(err.to_string().contains("injected failure"), "{err}");
    let acknowledged = accepted.load(Ordering::SeqCst);
    assert!(acknowledged > 0 && acknowledged < 5000, "{acknowledged}");

    let task = TaskId {
        job: JobId::new("counts"),
        pipeline: PipelineId::new("counts"),
        vertex: VertexId::new("counter"),
        subtask: SubtaskIndex(0),
    };
    let file = weir::state::task_state_file(dir.path(), &task);
    let backend = weir::state::StateBackend::open_redb(&file, Arc::new(weir::state::SystemClock))
        .expect("open the task's state file");
    let mut store = backend.keyed_store(&JobId::new("counts"), &OperatorId::new("counter"));
    let count = StateDescriptor::<Value<u64>>::new("count");
    let mut stored = 0;
    for k in 0i64..200 {
        let keys: ArrayRef = Arc::new(Int64Array::from(vec![k]));
        let shard = key_hash::shard_ids(&[keys], 32).expect("hash")[0];
        store.set_current_key(&k.to_le_bytes(), StateShardId(shard));
        stored += store
            .value_state(&count)
            .expect("state")
            .value()
            .expect("read")
            .unwrap_or(0);
    }
    assert_eq!(
        stored, acknowledged,
        "committed state = acknowledged output"
    );
}
