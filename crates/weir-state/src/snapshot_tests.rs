//! Snapshot, restore, rescale and schema-evolution tests over real object stores (a local
//! directory and the in-memory store).

use crate::segment::{META_SPEC, segment_path};
use crate::{
    KeyedStateExt, ManualClock, RawEntry, RestoreOptions, SegmentDescriptor, SegmentStore,
    SnapshotScope, StateBackend, StateError, assign_segments,
};
use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use weir_api::state::{List, Map, Set, Value};
use weir_api::{
    Epoch, JobId, KeyedStateStore, OperatorId, StateDescriptor, StateShardId, SubtaskIndex,
};
use weir_plan::ShardAssignment;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const JOB: &str = "job";
const OP: &str = "op";

fn shard_of(key: &str, count: u32) -> u32 {
    let column: arrow::array::ArrayRef = Arc::new(arrow::array::StringArray::from(vec![key]));
    weir_plan::key_hash::shard_ids(&[column], count).expect("hash")[0]
}

fn hash_of(key: &[u8]) -> Result<u64, String> {
    let key = std::str::from_utf8(key).map_err(|e| e.to_string())?;
    let column: arrow::array::ArrayRef = Arc::new(arrow::array::StringArray::from(vec![key]));
    Ok(weir_plan::key_hash::hash_keys(&[column]).map_err(|e| e.to_string())?[0])
}

fn count_d() -> StateDescriptor<Value<u64>> {
    StateDescriptor::new("count")
        .with_schema_version(2)
        .with_ttl(Duration::from_secs(10))
}
fn prices_d() -> StateDescriptor<Map<String, i64>> {
    StateDescriptor::new("prices")
        .with_schema_version(3)
        .with_ttl(Duration::from_secs(10))
}
fn events_d() -> StateDescriptor<List<String>> {
    StateDescriptor::new("events").with_schema_version(2)
}
fn seen_d() -> StateDescriptor<Set<u64>> {
    StateDescriptor::new("seen")
        .with_schema_version(2)
        .with_ttl(Duration::from_secs(10))
}

fn backend(dir: &std::path::Path, name: &str, clock: &ManualClock) -> StateBackend {
    StateBackend::open_redb(&dir.join(name), Arc::new(clock.clone())).expect("open")
}

/// Writes all four kinds for `key` (its shard from the hash over `shards`).
fn write_key(b: &StateBackend, key: &str, n: u64, shards: u32) -> TestResult {
    let mut s = b.keyed_store(&JobId::new(JOB), &OperatorId::new(OP));
    s.set_current_key(key.as_bytes(), StateShardId(shard_of(key, shards)));
    s.value_state(&count_d())?.update(&n)?;
    s.map_state(&prices_d())?
        .put(&format!("p{n}"), &(n as i64 * 3))?;
    s.map_state(&prices_d())?.put(&"z".to_owned(), &-1)?;
    s.list_state(&events_d())?
        .add_all(&[format!("{key}-a"), format!("{key}-b")])?;
    s.set_state(&seen_d())?.insert(&n)?;
    s.set_state(&seen_d())?.insert(&(n + 1000))?;
    Ok(())
}

/// Every committed entry of the operator, all shards, minus those dead at `now_ms`.
fn live_entries(b: &StateBackend, shards: u32, now_ms: u64) -> Vec<RawEntry> {
    let view = b.read_view().expect("view");
    (0..shards)
        .flat_map(|s| {
            view.scan(&JobId::new(JOB), &OperatorId::new(OP), StateShardId(s))
                .expect("scan")
                .collect::<Result<Vec<_>, _>>()
                .expect("entries")
        })
        .filter(|e| !e.is_expired(now_ms))
        .collect()
}

fn scope(epoch: u64, subtask: u32, shards: ShardAssignment) -> SnapshotScope {
    SnapshotScope {
        namespace: "ns".to_owned(),
        epoch: Epoch(epoch),
        job: JobId::new(JOB),
        operator: OperatorId::new(OP),
        subtask: SubtaskIndex(subtask),
        shards,
    }
}

fn names() -> [&'static str; 4] {
    ["count", "events", "prices", "seen"]
}

async fn round_trip(store: Arc<dyn ObjectStore>, files: Option<&std::path::Path>) -> TestResult {
    let dir = tempfile::tempdir()?;
    let clock = ManualClock::new(1_000);
    let original = backend(dir.path(), "a.redb", &clock);
    write_key(&original, "stale", 0, 8)?;
    original.commit()?;
    clock.set(5_000);
    for i in 1..=60 {
        write_key(&original, &format!("key-{i}"), i, 8)?;
    }
    original.commit()?;
    // "stale" (deadline 11 000) is dead at 12 000; the others (15 000) are alive.
    clock.set(12_000);

    let segments = SegmentStore::new(store, ObjectPath::from("base"));
    let written = segments
        .begin_snapshot(&original, scope(7, 0, ShardAssignment::contiguous(8, 1)?))?
        .write()
        .await?;
    assert!(!written.is_empty());
    let rows: u64 = written.iter().map(|d| d.rows).sum();
    let expected = live_entries(&original, 8, 12_000);
    assert_eq!(rows, expected.len() as u64);
    // Only "stale"'s list entries (no TTL) outlive its deadline.
    let stale: Vec<_> = expected
        .iter()
        .filter_map(|e| {
            e.parts()
                .ok()
                .filter(|p| p.key == b"stale")
                .map(|p| p.state.to_owned())
        })
        .collect();
    assert_eq!(stale, ["events", "events"]);
    for d in &written {
        let path = segment_path("ns", Epoch(7), &d.operator, d.subtask, d.shard, &d.state);
        assert_eq!(d.path, path.to_string());
        assert_eq!(
            d.path,
            format!("checkpoint/ns/7/op/0/{}/{}.parquet", d.shard.0, d.state)
        );
        assert_eq!(d.sha256.len(), 64);
        if let Some(root) = files {
            let bytes = std::fs::read(root.join("base").join(&d.path))?;
            assert_eq!(bytes.len() as u64, d.bytes);
            assert_eq!(weir_plan::sha256_hex(&bytes), d.sha256);
        }
    }
    // The descriptor is manifest JSON with camelCase fields.
    let json = serde_json::to_string(&written[0])?;
    assert!(json.contains("\"stateShardCount\":8") && json.contains("\"sha256\":"));
    assert_eq!(
        serde_json::from_str::<SegmentDescriptor>(&json)?,
        written[0]
    );

    // Parquet metadata carries the spec.
    let bytes = segments.fetch_verified(&written[0]).await?;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)?;
    let kv = reader
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .cloned()
        .unwrap_or_default();
    let spec = kv
        .iter()
        .find(|k| k.key == META_SPEC)
        .and_then(|k| k.value.clone());
    assert!(spec.is_some_and(|s| s.contains("\"schemaVersion\"")));

    let restored = backend(dir.path(), "b.redb", &clock);
    let report = segments
        .restore(&restored, &written, &RestoreOptions::new())
        .await?;
    assert_eq!(report.entries, rows);
    assert_eq!(report.segments, written.len() as u64);
    assert_eq!(live_entries(&restored, 8, 12_000), expected);

    // Specs (kind, schema version, TTL) and size accounting come back exactly.
    original.purge_expired(12_000)?;
    let (job, op) = (JobId::new(JOB), OperatorId::new(OP));
    let (va, vb) = (original.read_view()?, restored.read_view()?);
    assert_eq!(
        va.registered_states(&job, &op)?,
        vb.registered_states(&job, &op)?
    );
    for name in names() {
        assert_eq!(
            original.state_size(&job, &op, name)?,
            restored.state_size(&job, &op, name)?
        );
    }

    // Through the API: same values, and TTL deadlines are absolute (dead after 15 000).
    let mut s = restored.keyed_store(&job, &op);
    s.set_current_key(b"key-7", StateShardId(shard_of("key-7", 8)));
    assert_eq!(s.value_state(&count_d())?.value()?, Some(7));
    assert_eq!(
        s.list_state(&events_d())?.get()?,
        vec!["key-7-a", "key-7-b"]
    );
    assert!(s.set_state(&seen_d())?.contains(&1007)?);
    assert_eq!(s.map_state(&prices_d())?.get(&"p7".to_owned())?, Some(21));
    restored.rollback();
    clock.set(15_000);
    assert_eq!(s.value_state(&count_d())?.value()?, None);
    assert_eq!(
        s.list_state(&events_d())?.get()?.len(),
        2,
        "no TTL on the list"
    );
    Ok(())
}

#[tokio::test]
async fn round_trip_local_file_system() -> TestResult {
    let root = tempfile::tempdir()?;
    let store: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new_with_prefix(root.path())?);
    round_trip(store, Some(root.path())).await
}

#[tokio::test]
async fn round_trip_in_memory() -> TestResult {
    round_trip(Arc::new(InMemory::new()), None).await
}

#[tokio::test]
async fn snapshot_view_ignores_later_commits_and_bad_checksums_are_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clock = ManualClock::new(1_000);
    let original = backend(dir.path(), "a.redb", &clock);
    write_key(&original, "k1", 1, 4)?;
    original.commit()?;
    let before = live_entries(&original, 4, 1_000);
    let segments = SegmentStore::new(Arc::new(InMemory::new()), ObjectPath::default());
    let pending =
        segments.begin_snapshot(&original, scope(1, 0, ShardAssignment::contiguous(4, 1)?))?;
    // Processing goes on after the barrier: these commits are not part of epoch 1.
    write_key(&original, "k1", 99, 4)?;
    write_key(&original, "k2", 2, 4)?;
    original.commit()?;
    let written = pending.write().await?;

    let restored = backend(dir.path(), "b.redb", &clock);
    segments
        .restore(&restored, &written, &RestoreOptions::new())
        .await?;
    assert_eq!(live_entries(&restored, 4, 1_000), before);

    let mut tampered = written.clone();
    tampered[0].sha256 = "00".repeat(32);
    let err = segments
        .restore(
            &backend(dir.path(), "c.redb", &clock),
            &tampered,
            &RestoreOptions::new(),
        )
        .await
        .err()
        .ok_or("tampered checksum accepted")?;
    let message = err.to_string();
    assert!(matches!(err, StateError::Checksum { .. }), "{message}");
    assert!(message.contains(&written[0].path) && message.contains(&written[0].sha256));
    assert!(message.contains(&"00".repeat(32)));
    Ok(())
}

/// Writes `keys` at parallelism `p` (each key only into the backend of its shard's owner),
/// snapshots every subtask and returns the descriptors and the expected value per key.
async fn snapshot_at(
    p: u32,
    shards: u32,
    keys: u64,
    segments: &SegmentStore,
    dir: &std::path::Path,
    clock: &ManualClock,
) -> Result<(Vec<SegmentDescriptor>, BTreeMap<String, u64>), Box<dyn std::error::Error>> {
    let assignment = ShardAssignment::contiguous(shards, p)?;
    let owners = assignment.owner_table();
    let backends: Vec<_> = (0..p)
        .map(|i| backend(dir, &format!("p{p}-{i}.redb"), clock))
        .collect();
    let mut expected = BTreeMap::new();
    for i in 0..keys {
        let key = format!("user-{i}");
        let owner = owners[shard_of(&key, shards) as usize] as usize;
        write_key(&backends[owner], &key, i, shards)?;
        expected.insert(key, i);
    }
    let mut all = Vec::new();
    for (i, b) in backends.iter().enumerate() {
        b.commit()?;
        let s = scope(3, i as u32, assignment.clone());
        all.extend(segments.begin_snapshot(b, s)?.write().await?);
    }
    Ok((all, expected))
}

/// Restores at parallelism `q` by moving whole segments and checks every key lands in exactly
/// one new subtask, the owner of its shard, with its value.
async fn rescale(p: u32, q: u32) -> TestResult {
    let dir = tempfile::tempdir()?;
    let clock = ManualClock::new(1_000);
    let segments = SegmentStore::new(Arc::new(InMemory::new()), ObjectPath::from("ckpt"));
    let (written, expected) = snapshot_at(p, 16, 400, &segments, dir.path(), &clock).await?;
    let target = ShardAssignment::contiguous(16, q)?;
    let owners = target.owner_table();
    let plan = assign_segments(&written, &target)?;
    assert_eq!(plan.len(), q as usize);
    assert_eq!(plan.iter().map(Vec::len).sum::<usize>(), written.len());
    let mut found: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for (j, mine) in plan.iter().enumerate() {
        assert!(mine.iter().all(|d| owners[d.shard.0 as usize] == j as u32));
        let b = backend(dir.path(), &format!("q{q}-{j}.redb"), &clock);
        segments.restore(&b, mine, &RestoreOptions::new()).await?;
        let mut s = b.keyed_store(&JobId::new(JOB), &OperatorId::new(OP));
        for (key, n) in &expected {
            let shard = shard_of(key, 16);
            s.set_current_key(key.as_bytes(), StateShardId(shard));
            if let Some(v) = s.value_state(&count_d())?.value()? {
                assert_eq!(v, *n);
                assert_eq!(
                    owners[shard as usize], j as u32,
                    "{key} in the wrong subtask"
                );
                assert_eq!(s.set_state(&seen_d())?.elements()?.len(), 2);
                assert_eq!(s.map_state(&prices_d())?.entries()?.len(), 2);
                found.entry(key.clone()).or_default().push(j as u32);
            }
        }
        b.rollback();
    }
    assert_eq!(found.len(), expected.len(), "keys lost");
    assert!(
        found.values().all(|owners| owners.len() == 1),
        "a key restored twice"
    );
    Ok(())
}

#[tokio::test]
async fn rescale_two_to_three_moves_whole_shards() -> TestResult {
    rescale(2, 3).await
}

#[tokio::test]
async fn rescale_three_to_one_moves_whole_shards() -> TestResult {
    rescale(3, 1).await
}

#[tokio::test]
async fn shard_count_change_is_refused_unless_migrated() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clock = ManualClock::new(1_000);
    let segments = SegmentStore::new(Arc::new(InMemory::new()), ObjectPath::default());
    let (written, expected) = snapshot_at(2, 16, 200, &segments, dir.path(), &clock).await?;
    let err = assign_segments(&written, &ShardAssignment::contiguous(8, 2)?)
        .err()
        .ok_or("changed shard count accepted")?;
    let message = err.to_string();
    assert!(matches!(
        err,
        StateError::ShardCountChanged {
            stored: 16,
            requested: 8,
            ..
        }
    ));
    assert!(message.contains("16") && message.contains('8') && message.contains("`op`"));

    // The explicit migration re-keys every row by its hash into the new shards.
    let target = ShardAssignment::contiguous(8, 2)?;
    let owners = target.owner_table();
    let mut total = 0;
    for j in 0..2u32 {
        let b = backend(dir.path(), &format!("m{j}.redb"), &clock);
        let report = segments
            .restore_rehashed(
                &b,
                &written,
                &target,
                SubtaskIndex(j),
                Arc::new(hash_of),
                &RestoreOptions::new(),
            )
            .await?;
        total += report.entries;
        let mut s = b.keyed_store(&JobId::new(JOB), &OperatorId::new(OP));
        for (key, n) in &expected {
            let shard = shard_of(key, 8);
            s.set_current_key(key.as_bytes(), StateShardId(shard));
            let mine = owners[shard as usize] == j;
            assert_eq!(
                s.value_state(&count_d())?.value()?,
                mine.then_some(*n),
                "{key}"
            );
        }
        b.rollback();
    }
    // value + 2 map + 2 list + 2 set entries per key.
    assert_eq!(total, expected.len() as u64 * 7);
    Ok(())
}

#[tokio::test]
async fn schema_version_change_needs_a_migration() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clock = ManualClock::new(1_000);
    let original = backend(dir.path(), "a.redb", &clock);
    write_key(&original, "k", 5, 4)?;
    original.commit()?;
    let segments = SegmentStore::new(Arc::new(InMemory::new()), ObjectPath::default());
    let written = segments
        .begin_snapshot(&original, scope(2, 0, ShardAssignment::contiguous(4, 1)?))?
        .write()
        .await?;
    let op = OperatorId::new(OP);
    let v3 = count_d().with_schema_version(3);
    let options = RestoreOptions::new().expect_state(&op, v3.spec().clone());

    let refused = backend(dir.path(), "b.redb", &clock);
    let err = segments
        .restore(&refused, &written, &options)
        .await
        .err()
        .ok_or("schema change accepted")?;
    assert!(matches!(
        &err,
        StateError::SchemaVersion { operator, state, stored: 2, requested: 3 }
            if operator == OP && state == "count"
    ));
    // Refused before anything was written.
    assert!(live_entries(&refused, 4, 1_000).is_empty());

    let migrated = backend(dir.path(), "c.redb", &clock);
    migrated.register_typed_migration(&op, "count", 2, |old| {
        crate::codec::decode::<u64>("count", old)
            .map(|v| v * 10)
            .map_err(|e| e.to_string())
    });
    segments.restore(&migrated, &written, &options).await?;
    let mut s = migrated.keyed_store(&JobId::new(JOB), &op);
    s.set_current_key(b"k", StateShardId(shard_of("k", 4)));
    assert_eq!(s.value_state(&v3)?.value()?, Some(50));
    // Other states kept their stored versions and still register.
    assert_eq!(s.set_state(&seen_d())?.elements()?.len(), 2);
    Ok(())
}

#[tokio::test]
async fn entries_of_a_shard_the_subtask_does_not_own_fail_the_snapshot() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clock = ManualClock::new(1_000);
    let b = backend(dir.path(), "a.redb", &clock);
    let assignment = ShardAssignment::contiguous(4, 2)?;
    let owners = assignment.owner_table();
    let key = (0..)
        .map(|i| format!("k{i}"))
        .find(|k| owners[shard_of(k, 4) as usize] == 1)
        .ok_or("no key")?;
    write_key(&b, &key, 1, 4)?;
    b.commit()?;
    let segments = SegmentStore::new(Arc::new(InMemory::new()), ObjectPath::default());
    let err = segments
        .begin_snapshot(&b, scope(1, 0, assignment))?
        .write()
        .await
        .err()
        .ok_or("misrouted entry snapshotted")?;
    assert!(err.to_string().contains("does not own"), "{err}");
    Ok(())
}
