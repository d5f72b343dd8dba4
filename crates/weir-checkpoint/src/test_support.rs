//! Fixtures of the tests: a plan with a source, a keyed operator and a sink, complete manifests
//! of it, and the two object stores every test runs against.

use crate::{
    AttemptId, CheckpointStore, EnumeratorSnapshot, EpochKind, EpochManifest, ExpectedCheckpoint,
    InputWatermark, SinkTransaction, SourceSplitOffset, TaskSnapshot,
};
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use weir_api::{Epoch, EventTimeMs, OperatorId, StateShardId, SubtaskIndex};
use weir_plan::{CompiledPlans, JobSpec, NodeKind, PartitionedPlan};
use weir_state::SegmentDescriptor;

pub(crate) type TestResult = Result<(), Box<dyn std::error::Error>>;

pub(crate) const NS: &str = "bids-euro/main";

/// Source `bids` (2 subtasks) -> hash -> keyed `agg` chained with sink `out` (2 subtasks, 4
/// shards): 4 tasks, the keyed ones with 2 input channels each.
pub(crate) const SPEC: &str = r#"
job: bids-euro
parallelism: 2
state_shards: 4
sources:
  - name: bids
    connector: file
    schema: [{ name: auction, type: int64 }]
    options: { path: in.csv, format: csv }
operators:
  - name: agg
    type: filter
    input: { from: bids, partition: { hash: [auction] } }
    options: { predicate: "auction > 0" }
sinks:
  - name: out
    connector: file
    input: agg
    options: { path: out/, format: parquet }
"#;

pub(crate) fn plan_of(spec: &str) -> PartitionedPlan {
    let spec = JobSpec::from_yaml_str(spec, "job.yaml").expect("spec parses");
    CompiledPlans::compile(&spec, Some("job.yaml"))
        .expect("compiles")
        .partitioned
}

pub(crate) fn plan() -> PartitionedPlan {
    plan_of(SPEC)
}

/// The operator of `kind` in `plan`.
pub(crate) fn operator(plan: &PartitionedPlan, kind: NodeKind) -> OperatorId {
    plan.vertices
        .iter()
        .flat_map(|v| &v.chain)
        .find(|n| n.kind == kind && (kind != NodeKind::Operator || n.type_name == "filter"))
        .map(|n| n.operator_id.clone())
        .expect("operator of that kind")
}

/// A complete manifest of `plan` at `epoch`: one snapshot per task with a segment per owned
/// shard of the keyed vertex (sizes 100 + shard), the watermark of every input channel, an
/// offset per source subtask, the enumerator and a transaction per sink subtask.
pub(crate) fn full_manifest(plan: &PartitionedPlan, epoch: u64) -> EpochManifest {
    let expected = ExpectedCheckpoint::from_plan(plan);
    let mut m = expected.manifest_template(NS, Epoch(epoch), AttemptId(3));
    let agg = operator(plan, NodeKind::Operator);
    for v in &plan.vertices {
        for task in &v.tasks {
            let s = task.subtask;
            let segments = v
                .shards
                .iter()
                .flat_map(|shards| {
                    let owners = shards.owner_table();
                    let count = shards.state_shard_count;
                    let agg = agg.clone();
                    (0..count)
                        .filter(move |shard| owners[*shard as usize] == s.0)
                        .map(move |shard| descriptor(epoch, &agg, s, shard, count))
                })
                .collect();
            let input_watermarks = plan
                .input_channels(&v.vertex_id, s.0)
                .into_iter()
                .map(|(_, c)| InputWatermark {
                    channel: c.clone(),
                    watermark: Some(EventTimeMs(1_000 * epoch as i64)),
                    idle: false,
                    finished: false,
                })
                .collect();
            m.task_snapshots.push(TaskSnapshot {
                task: task.clone(),
                segments,
                input_watermarks,
            });
        }
    }
    let source = operator(plan, NodeKind::Source);
    m.source_offsets = (0..2)
        .map(|s| SourceSplitOffset {
            operator: source.clone(),
            subtask: SubtaskIndex(s),
            split: format!("file:///in-{s}.csv"),
            cursor: serde_json::json!({ "nextRecord": epoch * 10 + u64::from(s), "a": 1.5 }),
            watermark: Some(EventTimeMs(999)),
        })
        .collect();
    m.source_enumerator_snapshots = vec![EnumeratorSnapshot {
        operator: source,
        discovered: BTreeSet::from(["file:///in-0.csv".into(), "file:///in-1.csv".into()]),
        assigned: BTreeMap::from([
            ("file:///in-0.csv".into(), SubtaskIndex(0)),
            ("file:///in-1.csv".into(), SubtaskIndex(1)),
        ]),
        finished: BTreeSet::new(),
        discovery_cursor: Some(serde_json::json!({ "listed": true })),
    }];
    m.sink_transactions = (0..2)
        .map(|s| SinkTransaction {
            operator: operator(plan, NodeKind::Sink),
            subtask: SubtaskIndex(s),
            epoch: Epoch(epoch),
            pre_commit: serde_json::json!({ "staged": [format!("out/.staging/{epoch}-{s}.parquet")] }),
        })
        .collect();
    m.created_at_ms = 1_700_000_000_000 + epoch;
    m.durable_at_ms = 1_700_000_000_500 + epoch;
    m
}

pub(crate) fn savepoint(plan: &PartitionedPlan, epoch: u64, name: &str) -> EpochManifest {
    let mut m = full_manifest(plan, epoch);
    m.kind = EpochKind::Savepoint {
        name: Some(name.to_owned()),
    };
    m
}

fn descriptor(
    epoch: u64,
    operator: &OperatorId,
    subtask: SubtaskIndex,
    shard: u32,
    count: u32,
) -> SegmentDescriptor {
    let path = weir_state::segment::segment_path(
        NS,
        Epoch(epoch),
        operator,
        subtask,
        StateShardId(shard),
        "count",
    );
    SegmentDescriptor {
        path: path.to_string(),
        operator: operator.clone(),
        subtask,
        shard: StateShardId(shard),
        last_shard: None,
        state: "count".to_owned(),
        rows: 1,
        bytes: 100 + u64::from(shard),
        sha256: "0".repeat(64),
        state_shard_count: count,
        schema_version: 1,
    }
}

/// Writes an object of the recorded size for every segment of `m` (what the tasks would have
/// uploaded before the manifest is published).
pub(crate) async fn write_segments(store: &CheckpointStore, m: &EpochManifest) -> TestResult {
    for d in m.segments() {
        let location = full_path(store, &d.path);
        let size = usize::try_from(d.bytes)?;
        store
            .object_store()
            .put(&location, PutPayload::from(vec![7u8; size]))
            .await?;
    }
    Ok(())
}

/// The full path of a path relative to the store's base (already percent-encoded).
pub(crate) fn full_path(store: &CheckpointStore, relative: &str) -> ObjectPath {
    let relative = ObjectPath::parse(relative).expect("a valid path");
    ObjectPath::from_iter(store.base().parts().chain(relative.parts()))
}

/// Publishes `m` after writing its segments.
pub(crate) async fn checkpoint(store: &CheckpointStore, m: &EpochManifest) -> TestResult {
    write_segments(store, m).await?;
    let expected = ExpectedCheckpoint::from_plan(&plan());
    store.publish_manifest(m, &expected).await?;
    Ok(())
}

/// A checkpoint store on the in-memory store and one on a local directory (kept alive by the
/// returned guard), both under base path `ckpt`.
pub(crate) fn stores() -> (Vec<(&'static str, CheckpointStore)>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let local: Arc<dyn ObjectStore> = Arc::new(
        LocalFileSystem::new_with_prefix(dir.path())
            .expect("local store")
            .with_automatic_cleanup(true),
    );
    let memory: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let base = ObjectPath::from("ckpt");
    let make = |s: Arc<dyn ObjectStore>| {
        CheckpointStore::try_new(s, base.clone(), NS).expect("namespace is not empty")
    };
    (vec![("memory", make(memory)), ("local", make(local))], dir)
}

/// Every object path under the store's base, sorted.
pub(crate) async fn all_objects(store: &CheckpointStore) -> Vec<String> {
    use futures::TryStreamExt;
    let mut out: Vec<String> = store
        .object_store()
        .list(Some(store.base()))
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .expect("lists");
    out.sort();
    out
}
