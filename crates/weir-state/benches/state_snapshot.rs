//! Snapshot and restore throughput of keyed state: 1,000,000 keys to Parquet segments and back.
//!
//! Stresses `SegmentStore::begin_snapshot` + `PendingSnapshot::write` (one scan of a redb MVCC
//! view, one Parquet segment with a SHA-256 per (shard, state), each uploaded with one `put`)
//! and `SegmentStore::restore` (download, checksum, decode, one redb write transaction per
//! segment) into a fresh redb file. The object store is the local file system in a temporary
//! directory on the same disk as the redb files, as for a node with a local checkpoint
//! directory; `snapshot_in_memory` writes to `object_store::memory::InMemory` to separate
//! encoding from file I/O.
//!
//! Input: one `Value<u64>` state (`count`, value = the key's index) of one operator holding
//! 1,000,000 keys (`user-00000000`...) over 128 state shards from the stable key hash, committed
//! through the state API; subtask 0 owns every shard, so a snapshot is 128 segments. Throughput
//! is in bytes of state as the backend accounts it (key + stored value, `state_size`); the
//! Parquet bytes are printed too. Every snapshot asserts 128 segments holding 1,000,000 rows;
//! every restore asserts 1,000,000 entries loaded; the first restore is checked entry for entry
//! (size accounting equal to the original, sampled values read back through the API).
//!
//! Before the criterion group, one timed snapshot and restore print the times, MB/s and the
//! check against the target (a 1-million-key snapshot written in under 5 s on 2 cores).
//!
//! Run: `CARGO_TARGET_DIR=/var/tmp/weir-target cargo bench -p weir-state --bench state_snapshot`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use tempfile::TempDir;
use tokio::runtime::Runtime;
use weir_api::state::Value;
use weir_api::{
    Epoch, JobId, KeyedStateStore, OperatorId, StateDescriptor, StateShardId, SubtaskIndex,
};
use weir_plan::ShardAssignment;
use weir_state::{
    KeyedStateExt, ManualClock, RestoreOptions, RestoreReport, SegmentDescriptor, SegmentStore,
    SnapshotScope, StateBackend, StateSize,
};

/// Keys in the state.
const KEYS: usize = 1_000_000;
/// Keys per commit while loading the state.
const LOAD_BATCH: usize = 100_000;
const SHARDS: u32 = weir_plan::DEFAULT_STATE_SHARDS;
const JOB: &str = "bench";
const OPERATOR: &str = "counter";
const STATE: &str = "count";
/// The target: a 1-million-key snapshot written in under this on the 2-core machine.
const TARGET: Duration = Duration::from_secs(5);

fn descriptor() -> StateDescriptor<Value<u64>> {
    StateDescriptor::new(STATE)
}

fn key(u: usize) -> String {
    format!("user-{u:08}")
}

/// The loaded source state and what a snapshot of it must contain.
struct Source {
    _dir: TempDir,
    backend: StateBackend,
    size: StateSize,
    shards: Vec<u32>,
}

impl Source {
    fn load() -> Self {
        let dir = tempfile::tempdir().expect("a temp dir");
        let backend = StateBackend::open_redb(
            &dir.path().join("source.redb"),
            Arc::new(ManualClock::new(0)),
        )
        .expect("the state file opens");
        let names: Vec<String> = (0..KEYS).map(key).collect();
        let column: arrow::array::ArrayRef =
            Arc::new(arrow::array::StringArray::from_iter_values(&names));
        let shards = weir_plan::key_hash::shard_ids(&[column], SHARDS).expect("key hash");
        let mut store = backend.keyed_store(&JobId::new(JOB), &OperatorId::new(OPERATOR));
        for (u, name) in names.iter().enumerate() {
            store.set_current_key(name.as_bytes(), StateShardId(shards[u]));
            store
                .value_state(&descriptor())
                .and_then(|mut s| s.update(&(u as u64)))
                .expect("load");
            if (u + 1) % LOAD_BATCH == 0 {
                backend.commit().expect("load commit");
            }
        }
        backend.commit().expect("load commit");
        let size = backend
            .state_size(&JobId::new(JOB), &OperatorId::new(OPERATOR), STATE)
            .expect("size");
        assert_eq!(size.entries, KEYS as u64, "loaded entries");
        Self {
            _dir: dir,
            backend,
            size,
            shards,
        }
    }
}

fn scope() -> SnapshotScope {
    SnapshotScope {
        namespace: "bench".to_owned(),
        epoch: Epoch(1),
        job: JobId::new(JOB),
        operator: OperatorId::new(OPERATOR),
        subtask: SubtaskIndex(0),
        shards: ShardAssignment::contiguous(SHARDS, 1).expect("one subtask owns every shard"),
    }
}

/// Takes and writes one snapshot; checks it holds every key.
fn snapshot(
    runtime: &Runtime,
    segments: &SegmentStore,
    source: &StateBackend,
) -> Vec<SegmentDescriptor> {
    let pending = segments
        .begin_snapshot(source, scope())
        .expect("begin snapshot");
    let written = runtime.block_on(pending.write()).expect("snapshot write");
    assert_eq!(written.len(), SHARDS as usize, "one segment per shard");
    let rows: u64 = written.iter().map(|d| d.rows).sum();
    assert_eq!(rows, KEYS as u64, "snapshot rows");
    written
}

/// A fresh, empty backend to restore into.
fn fresh() -> (TempDir, StateBackend) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let backend = StateBackend::open_redb(
        &dir.path().join("restored.redb"),
        Arc::new(ManualClock::new(0)),
    )
    .expect("the restore target opens");
    (dir, backend)
}

fn restore(
    runtime: &Runtime,
    segments: &SegmentStore,
    written: &[SegmentDescriptor],
    target: &StateBackend,
) -> RestoreReport {
    let report = runtime
        .block_on(segments.restore(target, written, &RestoreOptions::new()))
        .expect("restore");
    assert_eq!(report.entries, KEYS as u64, "restored entries");
    report
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// One timed snapshot and restore with the target check and a full verification.
fn report(runtime: &Runtime, segments: &SegmentStore, source: &Source) -> Vec<SegmentDescriptor> {
    let started = Instant::now();
    let pending = segments
        .begin_snapshot(&source.backend, scope())
        .expect("begin snapshot");
    let begun = started.elapsed();
    let written = runtime.block_on(pending.write()).expect("snapshot write");
    let snap = started.elapsed();
    let parquet: u64 = written.iter().map(|d| d.bytes).sum();
    assert_eq!(written.iter().map(|d| d.rows).sum::<u64>(), KEYS as u64);

    let (_dir, target) = fresh();
    let started = Instant::now();
    let restored = restore(runtime, segments, &written, &target);
    let back = started.elapsed();

    let (job, op) = (JobId::new(JOB), OperatorId::new(OPERATOR));
    assert_eq!(
        target.state_size(&job, &op, STATE).expect("size"),
        source.size,
        "restored size accounting"
    );
    let mut store = target.keyed_store(&job, &op);
    for u in [0, 1, KEYS / 2, KEYS - 1] {
        store.set_current_key(key(u).as_bytes(), StateShardId(source.shards[u]));
        let got = store
            .value_state(&descriptor())
            .and_then(|mut s| s.value())
            .expect("read back");
        assert_eq!(got, Some(u as u64), "restored value of user {u}");
    }
    assert_eq!(restored.bytes, parquet, "restore read every segment byte");

    let state = mb(source.size.bytes);
    eprintln!(
        "\nstate_snapshot: {KEYS} keys, {SHARDS} shards, {state:.1} MB of state (key + stored \
         value), {:.1} MB of Parquet in {} segments",
        mb(parquet),
        written.len()
    );
    eprintln!(
        "  snapshot: begin {:.0} us, written in {:.2} s = {:.1} MB/s of state ({:.1} MB/s of \
         Parquet); target < {} s: {}",
        begun.as_secs_f64() * 1e6,
        snap.as_secs_f64(),
        state / snap.as_secs_f64(),
        mb(parquet) / snap.as_secs_f64(),
        TARGET.as_secs(),
        if snap < TARGET { "met" } else { "NOT met" }
    );
    eprintln!(
        "  restore:  {:.2} s = {:.1} MB/s of state ({:.1} MB/s of Parquet), {} entries\n",
        back.as_secs_f64(),
        state / back.as_secs_f64(),
        mb(parquet) / back.as_secs_f64(),
        restored.entries
    );
    written
}

fn state_snapshot(c: &mut Criterion) {
    let listing = std::env::args().any(|a| a == "--list");
    if listing {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let source = Source::load();
    let files = tempfile::tempdir().expect("a temp dir");
    let local: Arc<dyn ObjectStore> =
        Arc::new(LocalFileSystem::new_with_prefix(files.path()).expect("a local object store"));
    let segments = SegmentStore::new(local, ObjectPath::from("checkpoints"));
    let written = report(&runtime, &segments, &source);
    let in_memory = SegmentStore::new(Arc::new(InMemory::new()), ObjectPath::from("checkpoints"));

    let mut group = c.benchmark_group("state_snapshot");
    group
        .throughput(Throughput::Bytes(source.size.bytes))
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(15));
    // Every iteration rewrites the same epoch: the same files, replaced atomically.
    group.bench_function("snapshot_local_fs/1M_keys", |b| {
        b.iter(|| black_box(snapshot(&runtime, &segments, &source.backend)));
    });
    group.bench_function("snapshot_in_memory/1M_keys", |b| {
        b.iter(|| black_box(snapshot(&runtime, &in_memory, &source.backend)));
    });
    group.bench_function("restore_local_fs/1M_keys", |b| {
        b.iter_batched(
            fresh,
            |(dir, target)| {
                let report = restore(&runtime, &segments, &written, &target);
                (dir, target, report)
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

criterion_group!(benches, state_snapshot);
criterion_main!(benches);
