//! Manifests with image segments (one file per subtask and state of an in-memory operator):
//! validation, rescale, durable publication on a local file system and retention.

use crate::test_support::*;
use crate::{
    CheckpointError, CheckpointStore, EpochManifest, ExpectedCheckpoint, PublishOutcome,
    structural_problems,
};
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStoreExt, PutPayload};
use std::sync::Arc;
use weir_api::arrow::array::{BinaryArray, UInt32Array};
use weir_api::{Epoch, JobId, StateKind, StateRows, StateShardId, StateSpec, SubtaskIndex};
use weir_plan::{NodeKind, PartitionedPlan, ShardAssignment};
use weir_state::segment::image_segment_path;
use weir_state::{SegmentDescriptor, SegmentStore, SnapshotScope, assign_segments};

fn at_parallelism(p: u32) -> PartitionedPlan {
    plan_of(&SPEC.replace("parallelism: 2", &format!("parallelism: {p}")))
}

/// An image segment of `agg`'s state `windows` at its stable path.
fn image(epoch: Epoch, subtask: u32, first: u32, last: u32) -> SegmentDescriptor {
    let operator = operator(&plan(), NodeKind::Operator);
    let path = image_segment_path(
        NS,
        epoch,
        &operator,
        SubtaskIndex(subtask),
        StateShardId(first),
        StateShardId(last),
        "windows",
    );
    SegmentDescriptor {
        path: path.to_string(),
        operator,
        subtask: SubtaskIndex(subtask),
        shard: StateShardId(first),
        last_shard: Some(StateShardId(last)),
        state: "windows".to_owned(),
        rows: 10,
        bytes: 200 + u64::from(subtask),
        sha256: "0".repeat(64),
        state_shard_count: 4,
        schema_version: 1,
    }
}

/// [`full_manifest`] with the keyed tasks' per-shard segments replaced by one image segment
/// each, covering the shards the task owns.
fn image_manifest(plan: &PartitionedPlan, epoch: u64) -> EpochManifest {
    let mut m = full_manifest(plan, epoch);
    for t in &mut m.task_snapshots {
        let first = t.segments.iter().map(|d| d.shard.0).min();
        let last = t.segments.iter().map(|d| d.shard.0).max();
        if let (Some(first), Some(last)) = (first, last) {
            t.segments = vec![image(m.epoch, t.task.subtask.0, first, last)];
        }
    }
    m
}

/// The index of the task snapshot of keyed subtask `subtask`.
fn keyed(m: &EpochManifest, subtask: u32) -> usize {
    m.task_snapshots
        .iter()
        .position(|t| !t.segments.is_empty() && t.task.subtask.0 == subtask)
        .expect("a keyed task")
}

fn problems_of(m: &EpochManifest) -> Vec<String> {
    ExpectedCheckpoint::from_plan(&plan())
        .problems(m)
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn a_manifest_with_image_segments_is_valid_and_rescales() -> Result<(), Box<dyn std::error::Error>>
{
    let m = image_manifest(&plan(), 3);
    assert_eq!(
        m.segments().count(),
        2,
        "one image segment per keyed subtask"
    );
    assert!(m.segments().all(SegmentDescriptor::is_image));
    assert_eq!(problems_of(&m), Vec::<String>::new());
    assert_eq!(structural_problems(&m), vec![]);
    // `lastShard` survives the manifest's canonical JSON and its checksum.
    let back = EpochManifest::from_json(&m.to_json()?, "m")?;
    assert_eq!(
        back.segments().collect::<Vec<_>>(),
        m.segments().collect::<Vec<_>>()
    );
    // At parallelism 3 the checkpoint is checked against its own owners (0-1, 2-3).
    let p3 = ExpectedCheckpoint::from_plan(&at_parallelism(3));
    assert_eq!(p3.restore_problems(&m), vec![]);
    Ok(())
}

#[test]
fn image_segments_that_do_not_fit_are_reported() {
    let complete = image_manifest(&plan(), 3);
    let epoch = complete.epoch;
    let (s0, s1) = (keyed(&complete, 0), keyed(&complete, 1));
    type Breaker = Box<dyn Fn(&mut EpochManifest)>;
    let cases: Vec<(Vec<&str>, Breaker)> = vec![
        (
            // Subtask 0 claims shard 2, which subtask 1 owns (and covers too).
            vec![
                "covers shards 0..=2, but shard 2 is owned by subtask 1, not 0",
                "segment checkpoint/bids-euro%2Fmain/3/agg/1/2-3/windows.parquet: covers a shard of \
                 operator `agg`, state `windows` that segment \
                 checkpoint/bids-euro%2Fmain/3/agg/0/0-2/windows.parquet also covers",
            ],
            Box::new(move |m| m.task_snapshots[s0].segments = vec![image(epoch, 0, 0, 2)]),
        ),
        (
            vec!["covers shards 2..=3, but shards 2..=3 are owned by subtask 1, not 0"],
            Box::new(move |m| {
                m.task_snapshots[s0].segments = vec![image(epoch, 0, 2, 3)];
                m.task_snapshots[s1].segments.clear();
            }),
        ),
        (
            vec![
                "its stable path in this epoch is checkpoint/bids-euro%2Fmain/3/agg/0/0-1/windows.parquet",
            ],
            Box::new(move |m| {
                let d = &mut m.task_snapshots[s0].segments[0];
                d.path = "checkpoint/bids-euro%2Fmain/3/agg/0/0/windows.parquet".into();
            }),
        ),
        (
            vec!["shards 2..=4 do not all exist (stateShardCount 4)"],
            Box::new(move |m| m.task_snapshots[s1].segments = vec![image(epoch, 1, 2, 4)]),
        ),
        (
            vec!["its last shard 2 is before its first shard 3"],
            Box::new(move |m| m.task_snapshots[s1].segments = vec![image(epoch, 1, 3, 2)]),
        ),
        (
            // Two images of one state in one task, with overlapping ranges.
            vec!["windows.parquet also covers"],
            Box::new(move |m| m.task_snapshots[s0].segments.push(image(epoch, 0, 1, 1))),
        ),
        (
            // A per-shard segment of the same state inside the image's range.
            vec!["also covers"],
            Box::new(move |m| {
                let mut d = image(epoch, 1, 3, 3);
                d.last_shard = None;
                d.path = weir_state::segment::segment_path(
                    NS,
                    epoch,
                    &d.operator,
                    d.subtask,
                    d.shard,
                    &d.state,
                )
                .to_string();
                m.task_snapshots[s1].segments.push(d);
            }),
        ),
    ];
    for (expected, break_it) in cases {
        let mut m = complete.clone();
        break_it(&mut m);
        let found = problems_of(&m);
        for e in expected {
            assert!(found.iter().any(|p| p.contains(e)), "`{e}` in {found:#?}");
        }
    }
}

/// A checkpoint store on a `LocalFileSystem` that knows its root, and a segment store on the
/// same directory and base.
fn local() -> (CheckpointStore, SegmentStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = Arc::new(LocalFileSystem::new_with_prefix(dir.path()).expect("local store"));
    let store = CheckpointStore::try_new(fs.clone(), ObjectPath::from("ckpt"), NS)
        .expect("namespace")
        .with_local_root(dir.path().to_path_buf());
    let segments = SegmentStore::new(fs, ObjectPath::from("ckpt"));
    (store, segments, dir)
}

fn rows(shards: &[u32]) -> StateRows {
    let bytes = |p: &str| {
        BinaryArray::from_iter_values(shards.iter().map(|s| format!("{p}{s}").into_bytes()))
    };
    StateRows {
        spec: StateSpec {
            name: "windows".to_owned(),
            kind: StateKind::Value,
            schema_version: 1,
            ttl_ms: None,
        },
        shards: UInt32Array::from(shards.to_vec()),
        namespaces: bytes("w"),
        keys: bytes("k"),
        payloads: bytes("v"),
    }
}

#[tokio::test]
async fn written_images_publish_durably_and_restore_at_another_parallelism() -> TestResult {
    let (store, segments, dir) = local();
    let plan = plan();
    let shards: ShardAssignment = plan
        .vertices
        .iter()
        .find_map(|v| v.shards.clone())
        .ok_or("a keyed vertex")?;
    let mut m = full_manifest(&plan, 5);
    for subtask in 0..2u32 {
        let scope = SnapshotScope {
            namespace: NS.to_owned(),
            epoch: m.epoch,
            job: JobId::new(plan.job_id.as_str()),
            operator: operator(&plan, NodeKind::Operator),
            subtask: SubtaskIndex(subtask),
            shards: shards.clone(),
        };
        let mine = [subtask * 2, subtask * 2 + 1, subtask * 2];
        let d = segments
            .write_image(&scope, rows(&mine))
            .await?
            .ok_or("written")?;
        let i = keyed(&m, subtask);
        m.task_snapshots[i].segments = vec![d];
    }
    let expected = ExpectedCheckpoint::from_plan(&plan);
    // Publication syncs the image files (they exist, so it succeeds) and the manifest.
    assert_eq!(
        store.publish_manifest(&m, &expected).await?,
        PublishOutcome::Published
    );
    let p3 = ExpectedCheckpoint::from_plan(&at_parallelism(3));
    let latest = store.latest_durable(&p3).await?;
    let restored = latest.manifest.ok_or("restorable at parallelism 3")?;
    let images: Vec<SegmentDescriptor> = restored.segments().cloned().collect();
    let target = ShardAssignment::contiguous(4, 3)?;
    let owners = target.owner_table();
    let mut all = Vec::new();
    for (j, mine) in assign_segments(&images, &target)?.into_iter().enumerate() {
        let owned: Vec<StateShardId> = (0..4)
            .filter(|s| owners[*s as usize] == j as u32)
            .map(StateShardId)
            .collect();
        for part in segments.read_image(&mine, &owned).await? {
            all.extend(part.shards.values().iter().copied());
        }
    }
    all.sort_unstable();
    assert_eq!(all, vec![0, 0, 1, 2, 2, 3], "every row once");

    // A missing image file stops a later publication before anything is written.
    let mut next = m.clone();
    next.epoch = Epoch(6);
    for t in &mut next.task_snapshots {
        for d in &mut t.segments {
            d.path = image_segment_path(
                NS,
                next.epoch,
                &d.operator,
                d.subtask,
                d.shard,
                d.last_shard.ok_or("an image")?,
                &d.state,
            )
            .to_string();
        }
    }
    let gone = next.segments().nth(1).ok_or("two images")?.path.clone();
    for d in next.segments().filter(|d| d.path != gone) {
        let bytes = vec![0u8; usize::try_from(d.bytes)?];
        store
            .object_store()
            .put(&full_path(&store, &d.path), PutPayload::from(bytes))
            .await?;
    }
    let err = store
        .publish_manifest(&next, &expected)
        .await
        .err()
        .ok_or("published without an image file")?;
    let file = crate::local_sync::file_path(dir.path(), &full_path(&store, &gone));
    assert!(
        matches!(&err, CheckpointError::Io { context, path, .. }
            if context == "syncing segment" && *path == file.display().to_string()),
        "{err}"
    );
    assert_eq!(store.list_epochs().await?, vec![Epoch(5)]);
    Ok(())
}

#[tokio::test]
async fn retention_deletes_image_segments_with_their_epochs() -> TestResult {
    let (stores, _dir) = stores();
    let plan = plan();
    for (name, store) in stores {
        for epoch in 1..=3 {
            checkpoint(&store, &image_manifest(&plan, epoch)).await?;
        }
        // An image segment of a retried snapshot that the manifest of 3 does not reference.
        let stray = image(Epoch(3), 0, 0, 0);
        store
            .object_store()
            .put(
                &full_path(&store, &stray.path),
                PutPayload::from_static(b"x"),
            )
            .await?;
        let report = store.retain(1).await?;
        assert_eq!(report.kept, vec![Epoch(3)], "{name}");
        let after = all_objects(&store).await;
        for epoch in [1, 2] {
            let dir = format!("ckpt/checkpoint/bids-euro%2Fmain/{epoch}/");
            assert!(
                !after.iter().any(|p| p.starts_with(&dir)),
                "{name}: {epoch}"
            );
        }
        let kept = image_manifest(&plan, 3);
        for d in kept.segments() {
            let path = full_path(&store, &d.path).to_string();
            assert!(after.contains(&path), "{name}: {path}");
        }
        let stray_path = full_path(&store, &stray.path).to_string();
        assert!(!after.contains(&stray_path), "{name}: stray image kept");
        assert!(report.deleted_objects.contains(&stray_path), "{name}");
    }
    Ok(())
}
