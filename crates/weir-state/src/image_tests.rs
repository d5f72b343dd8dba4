//! Image segments: write and read back through a local directory, filtering by owned shards,
//! refusals (unowned rows, bad checksums, contradicting descriptors, keyed-state restores),
//! descriptor JSON and rescale by [`assign_segments`].

use crate::segment::{META_LAST_SHARD, META_SHARD, image_segment_path};
use crate::{
    ManualClock, RestoreOptions, SegmentDescriptor, SegmentStore, SnapshotScope, StateBackend,
    StateError, assign_segments,
};
use arrow::array::{Array, BinaryArray, UInt32Array};
use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use std::collections::BTreeMap;
use std::sync::Arc;
use weir_api::{
    Epoch, JobId, OperatorId, StateKind, StateRows, StateShardId, StateSpec, SubtaskIndex,
};
use weir_plan::{ShardAssignment, ShardRange};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn spec() -> StateSpec {
    StateSpec {
        name: "windows".to_owned(),
        kind: StateKind::Value,
        schema_version: 3,
        ttl_ms: None,
    }
}

fn scope(subtask: u32, shards: ShardAssignment) -> SnapshotScope {
    SnapshotScope {
        namespace: "ns".to_owned(),
        epoch: Epoch(7),
        job: JobId::new("job"),
        operator: OperatorId::new("win"),
        subtask: SubtaskIndex(subtask),
        shards,
    }
}

/// `n` rows spread over `shards` (row `i` in `shards[i % len]`), each with distinct bytes.
fn rows(n: usize, shards: &[u32]) -> StateRows {
    let shard: Vec<u32> = (0..n).map(|i| shards[i % shards.len()]).collect();
    let text = |prefix: &str| -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| format!("{prefix}-{i}").into_bytes())
            .collect()
    };
    let binary =
        |values: Vec<Vec<u8>>| BinaryArray::from_iter_values(values.iter().map(Vec::as_slice));
    StateRows {
        spec: spec(),
        shards: UInt32Array::from(shard),
        namespaces: binary(text("ns")),
        keys: binary(text("key")),
        payloads: binary(text("payload")),
    }
}

/// One row: shard, namespace, key, payload.
type Row = (u32, Vec<u8>, Vec<u8>, Vec<u8>);

/// The rows as tuples, in order.
fn tuples(rows: &StateRows) -> Vec<Row> {
    (0..rows.len())
        .map(|i| {
            (
                rows.shards.value(i),
                rows.namespaces.value(i).to_vec(),
                rows.keys.value(i).to_vec(),
                rows.payloads.value(i).to_vec(),
            )
        })
        .collect()
}

fn local() -> Result<(SegmentStore, tempfile::TempDir), Box<dyn std::error::Error>> {
    let root = tempfile::tempdir()?;
    let store: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new_with_prefix(root.path())?);
    Ok((SegmentStore::new(store, ObjectPath::from("base")), root))
}

fn shards(ids: impl IntoIterator<Item = u32>) -> Vec<StateShardId> {
    ids.into_iter().map(StateShardId).collect()
}

#[tokio::test]
async fn an_image_round_trips_through_a_local_directory() -> TestResult {
    let (store, root) = local()?;
    // Subtask 1 of 2 owns shards 4..=7; more rows than one encoding batch.
    let assignment = ShardAssignment::contiguous(8, 2)?;
    let written_rows = rows(70_000, &[5, 4, 7, 6, 5]);
    let d = store
        .write_image(&scope(1, assignment), written_rows.clone())
        .await?
        .ok_or("rows were written")?;
    assert_eq!(d.path, "checkpoint/ns/7/win/1/4-7/windows.parquet");
    let expected_path = image_segment_path(
        "ns",
        Epoch(7),
        &OperatorId::new("win"),
        SubtaskIndex(1),
        StateShardId(4),
        StateShardId(7),
        "windows",
    );
    assert_eq!(d.path, expected_path.to_string());
    assert_eq!(d.stable_path("ns", Epoch(7)), expected_path);
    assert!(d.is_image());
    assert_eq!(
        (d.shard, d.last_shard),
        (StateShardId(4), Some(StateShardId(7)))
    );
    assert_eq!(d.shard_range(), 4..=7);
    assert!(d.covers(4) && d.covers(7) && !d.covers(3) && !d.covers(8));
    assert_eq!(
        (d.rows, d.state_shard_count, d.schema_version),
        (70_000, 8, 3)
    );
    assert_eq!((d.subtask, d.state.as_str()), (SubtaskIndex(1), "windows"));
    let file = std::fs::read(root.path().join("base").join(&d.path))?;
    assert_eq!(file.len() as u64, d.bytes);
    assert_eq!(weir_plan::sha256_hex(&file), d.sha256);

    // The key-value metadata names the range.
    let bytes = store.fetch_verified(&d).await?;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)?;
    let kv: BTreeMap<String, Option<String>> = reader
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .into_iter()
        .flatten()
        .map(|e| (e.key.clone(), e.value.clone()))
        .collect();
    assert_eq!(kv.get(META_SHARD), Some(&Some("4".to_owned())));
    assert_eq!(kv.get(META_LAST_SHARD), Some(&Some("7".to_owned())));

    // All shards owned: the rows come back exactly, in order, with the spec.
    let back = store
        .read_image(std::slice::from_ref(&d), &shards(0..8))
        .await?;
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].spec, spec());
    assert_eq!(tuples(&back[0]), tuples(&written_rows));

    // Two of the shards: only their rows, still in order.
    let back = store
        .read_image(std::slice::from_ref(&d), &shards([6, 5, 6]))
        .await?;
    let want: Vec<_> = tuples(&written_rows)
        .into_iter()
        .filter(|r| r.0 == 5 || r.0 == 6)
        .collect();
    assert_eq!(want.len(), 42_000);
    assert_eq!(tuples(&back[0]), want);
    assert_eq!(back[0].keys.null_count(), 0);

    // None of its shards: one empty StateRows, still with the spec.
    let back = store.read_image(&[d], &shards(0..4)).await?;
    assert!(back[0].is_empty());
    assert_eq!(back[0].spec, spec());
    Ok(())
}

#[tokio::test]
async fn no_rows_write_no_segment() -> TestResult {
    let (store, root) = local()?;
    let written = store
        .write_image(&scope(0, ShardAssignment::contiguous(8, 2)?), rows(0, &[0]))
        .await?;
    assert_eq!(written, None);
    assert!(!root.path().join("base").exists(), "nothing was written");
    Ok(())
}

#[tokio::test]
async fn rows_of_shards_the_subtask_does_not_own_are_refused() -> TestResult {
    let (store, root) = local()?;
    let assignment = ShardAssignment::contiguous(8, 2)?;
    let err = store
        .write_image(&scope(0, assignment), rows(10, &[1, 2, 5]))
        .await
        .err()
        .ok_or("a misrouted row was written")?;
    let message = err.to_string();
    assert!(matches!(err, StateError::Corrupt { .. }), "{message}");
    for part in ["`win`", "`windows`", "shard 5", "does not own", "0..=3"] {
        assert!(message.contains(part), "{part} in {message}");
    }
    assert!(!root.path().join("base").exists(), "nothing was written");

    // A subtask whose shards are not one range cannot write one image segment.
    let split = ShardAssignment {
        hash_policy: assignment_policy(),
        state_shard_count: 8,
        owners: vec![
            ShardRange {
                subtask: 0,
                first_shard: 0,
                last_shard: 1,
            },
            ShardRange {
                subtask: 1,
                first_shard: 2,
                last_shard: 5,
            },
            ShardRange {
                subtask: 0,
                first_shard: 6,
                last_shard: 7,
            },
        ],
    };
    let err = store
        .write_image(&scope(0, split), rows(3, &[0]))
        .await
        .err()
        .ok_or("a split range was accepted")?;
    assert!(err.to_string().contains("contiguous"), "{err}");

    // Columns of different lengths are the operator's bug.
    let mut short = rows(3, &[0]);
    short.keys = short.keys.slice(0, 2);
    let err = store
        .write_image(&scope(0, ShardAssignment::contiguous(8, 2)?), short)
        .await
        .err()
        .ok_or("short column accepted")?;
    assert!(err.to_string().contains("2 keys"), "{err}");
    Ok(())
}

fn assignment_policy() -> String {
    ShardAssignment::contiguous(8, 2)
        .map(|a| a.hash_policy)
        .unwrap_or_default()
}

#[tokio::test]
async fn damaged_or_contradicting_segments_are_refused() -> TestResult {
    let (store, root) = local()?;
    let d = store
        .write_image(
            &scope(0, ShardAssignment::contiguous(8, 2)?),
            rows(100, &[0, 3]),
        )
        .await?
        .ok_or("written")?;
    let owned = shards(0..4);

    // The descriptor contradicts the file (the checksum still matches).
    let mut other_version = d.clone();
    other_version.schema_version = 4;
    let err = store
        .read_image(&[other_version], &owned)
        .await
        .err()
        .ok_or("schema version mismatch accepted")?;
    assert!(
        matches!(&err, StateError::Segment { path, .. } if *path == d.path),
        "{err}"
    );
    let mut fewer = d.clone();
    fewer.rows = 99;
    let err = store
        .read_image(&[fewer], &owned)
        .await
        .err()
        .ok_or("rows")?;
    assert!(err.to_string().contains("100 rows"), "{err}");

    // A per-shard descriptor of the image file: the file says it covers a range.
    let mut per_shard = d.clone();
    per_shard.last_shard = None;
    let err = store
        .restore(&backend(&root)?, &[per_shard], &RestoreOptions::new())
        .await
        .err()
        .ok_or("an image file restored into redb")?;
    assert!(err.to_string().contains("lastShard"), "{err}");

    // Flipped bytes on disk: a checksum error naming the file.
    let file = root.path().join("base").join(&d.path);
    let mut bytes = std::fs::read(&file)?;
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&file, bytes)?;
    let err = store
        .read_image(std::slice::from_ref(&d), &owned)
        .await
        .err()
        .ok_or("damaged file accepted")?;
    let message = err.to_string();
    assert!(matches!(err, StateError::Checksum { .. }), "{message}");
    assert!(
        message.contains(&d.path) && message.contains(&d.sha256),
        "{message}"
    );
    Ok(())
}

fn backend(root: &tempfile::TempDir) -> Result<StateBackend, Box<dyn std::error::Error>> {
    let clock = Arc::new(ManualClock::new(0));
    Ok(StateBackend::open_redb(
        &root.path().join("task.redb"),
        clock,
    )?)
}

#[tokio::test]
async fn keyed_state_restores_refuse_image_segments_and_back() -> TestResult {
    let (store, root) = local()?;
    let target = ShardAssignment::contiguous(8, 2)?;
    let image = store
        .write_image(&scope(0, target.clone()), rows(10, &[1]))
        .await?
        .ok_or("written")?;
    let b = backend(&root)?;
    let err = store
        .restore(&b, std::slice::from_ref(&image), &RestoreOptions::new())
        .await
        .err()
        .ok_or("image restored into redb")?;
    assert!(
        matches!(&err, StateError::Segment { path, message }
            if *path == image.path && message.contains("in-memory operator")),
        "{err}"
    );
    let hash: Arc<crate::KeyHashFn> = Arc::new(|_: &[u8]| Ok(0));
    let err = store
        .restore_rehashed(
            &b,
            &[image],
            &target,
            SubtaskIndex(0),
            hash,
            &RestoreOptions::new(),
        )
        .await
        .err()
        .ok_or("image re-keyed into redb")?;
    assert!(err.to_string().contains("in-memory operator"), "{err}");

    // The other way round: a per-shard descriptor is not an image.
    let per_shard = SegmentDescriptor {
        path: "checkpoint/ns/7/win/0/1/windows.parquet".to_owned(),
        operator: OperatorId::new("win"),
        subtask: SubtaskIndex(0),
        shard: StateShardId(1),
        last_shard: None,
        state: "windows".to_owned(),
        rows: 1,
        bytes: 1,
        sha256: "0".repeat(64),
        state_shard_count: 8,
        schema_version: 3,
    };
    let err = store
        .read_image(&[per_shard], &shards(0..8))
        .await
        .err()
        .ok_or("per-shard segment read as an image")?;
    assert!(err.to_string().contains("not an image segment"), "{err}");
    Ok(())
}

#[test]
fn descriptor_json_is_backward_compatible() -> TestResult {
    let old = r#"{"path":"checkpoint/ns/7/win/0/1/windows.parquet","operator":"win",
        "subtask":0,"shard":1,"state":"windows","rows":1,"bytes":10,"sha256":"ab",
        "stateShardCount":8,"schemaVersion":3}"#;
    let d: SegmentDescriptor = serde_json::from_str(old)?;
    assert_eq!(d.last_shard, None);
    assert!(!d.is_image());
    assert_eq!(d.shard_range(), 1..=1);
    // Written back without the new field: manifests of keyed state do not change.
    let json = serde_json::to_string(&d)?;
    assert!(!json.contains("lastShard"), "{json}");

    let image = SegmentDescriptor {
        path: "checkpoint/ns/7/win/0/0-3/windows.parquet".to_owned(),
        last_shard: Some(StateShardId(3)),
        shard: StateShardId(0),
        ..d
    };
    let json = serde_json::to_string(&image)?;
    assert!(json.contains("\"lastShard\":3"), "{json}");
    assert_eq!(serde_json::from_str::<SegmentDescriptor>(&json)?, image);
    Ok(())
}

#[tokio::test]
async fn images_written_at_two_subtasks_restore_at_three() -> TestResult {
    let (store, _root) = local()?;
    let before = ShardAssignment::contiguous(8, 2)?;
    let mut written = Vec::new();
    let mut all = Vec::new();
    for subtask in 0..2u32 {
        let owned: Vec<u32> = (subtask * 4..subtask * 4 + 4).collect();
        let mine = rows(1_000, &owned);
        all.extend(tuples(&mine));
        let d = store
            .write_image(&scope(subtask, before.clone()), mine)
            .await?
            .ok_or("written")?;
        written.push(d);
    }
    let after = ShardAssignment::contiguous(8, 3)?;
    let owners = after.owner_table();
    let plan = assign_segments(&written, &after)?;
    assert_eq!(plan.len(), 3);
    // Subtask 1 at parallelism 3 owns shards of both old subtasks: it reads both segments.
    let middle: Vec<u32> = (0..8).filter(|s| owners[*s as usize] == 1).collect();
    assert!(middle.contains(&3) && middle.contains(&4), "{middle:?}");
    assert_eq!(plan[1], written);
    // Every segment goes to every new owner of one of its shards, and only there.
    for (j, mine) in plan.iter().enumerate() {
        for d in &written {
            let owns_one = d.shard_range().any(|s| owners[s as usize] == j as u32);
            assert_eq!(mine.contains(d), owns_one, "subtask {j}, {}", d.path);
        }
    }
    let mut restored = Vec::new();
    for (j, mine) in plan.into_iter().enumerate() {
        let owned: Vec<StateShardId> = (0..8)
            .filter(|s| owners[*s as usize] == j as u32)
            .map(StateShardId)
            .collect();
        // As the runtime calls it: from a spawned task (the future is `Send`).
        let reader = store.clone();
        let back = tokio::spawn(async move { reader.read_image(&mine, &owned).await }).await??;
        for part in &back {
            for row in tuples(part) {
                assert_eq!(owners[row.0 as usize], j as u32, "row of another subtask");
                restored.push(row);
            }
        }
    }
    restored.sort();
    all.sort();
    assert_eq!(restored, all, "every row restored exactly once");
    Ok(())
}

fn image(subtask: u32, first: u32, last: u32, state: &str) -> SegmentDescriptor {
    SegmentDescriptor {
        path: format!("checkpoint/ns/7/win/{subtask}/{first}-{last}/{state}.parquet"),
        operator: OperatorId::new("win"),
        subtask: SubtaskIndex(subtask),
        shard: StateShardId(first),
        last_shard: Some(StateShardId(last)),
        state: state.to_owned(),
        rows: 1,
        bytes: 1,
        sha256: "0".repeat(64),
        state_shard_count: 8,
        schema_version: 3,
    }
}

#[tokio::test]
async fn overlapping_or_out_of_range_segments_are_refused() -> TestResult {
    let target = ShardAssignment::contiguous(8, 2)?;
    // Disjoint ranges and another state are fine.
    let fine = [
        image(0, 0, 3, "a"),
        image(1, 4, 7, "a"),
        image(0, 0, 3, "b"),
    ];
    assert_eq!(assign_segments(&fine, &target)?.concat().len(), 3);
    assert!(!fine[0].overlaps(&fine[1]) && !fine[0].overlaps(&fine[2]));

    let overlapping = [image(0, 0, 3, "a"), image(1, 3, 7, "a")];
    assert!(overlapping[0].overlaps(&overlapping[1]));
    let err = assign_segments(&overlapping, &target)
        .err()
        .ok_or("overlap accepted")?;
    assert!(
        matches!(&err, StateError::Segment { path, message }
            if *path == overlapping[1].path && message.contains(&overlapping[0].path)),
        "{err}"
    );
    // A per-shard segment inside an image's range overlaps it too.
    let mut keyed = image(0, 2, 2, "a");
    keyed.last_shard = None;
    keyed.path = "checkpoint/ns/7/win/0/2/a.parquet".to_owned();
    let mixed = [image(0, 0, 3, "a"), keyed.clone()];
    assert!(assign_segments(&mixed, &target).is_err());
    // Two per-shard segments of one shard keep their message.
    let err = assign_segments(&[keyed.clone(), keyed], &target)
        .err()
        .ok_or("duplicate accepted")?;
    assert!(err.to_string().contains("a second segment"), "{err}");

    let beyond = [image(1, 4, 8, "a")];
    let err = assign_segments(&beyond, &target).err().ok_or("beyond")?;
    assert!(err.to_string().contains("no owner among 8 shards"), "{err}");
    let backwards = [image(1, 5, 4, "a")];
    let err = assign_segments(&backwards, &target).err().ok_or("empty")?;
    assert!(err.to_string().contains("empty"), "{err}");

    // read_image refuses overlaps before downloading anything.
    let (store, _root) = local()?;
    let err = store
        .read_image(&overlapping, &shards(0..8))
        .await
        .err()
        .ok_or("overlap read")?;
    assert!(matches!(err, StateError::Segment { .. }), "{err}");
    Ok(())
}
