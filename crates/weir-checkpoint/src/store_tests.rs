//! Manifests, publication, reading, validation, fallback and the epoch log over real object
//! stores: a local directory and the in-memory store.

use crate::test_support::*;
use crate::{
    CheckpointError, EpochKind, EpochManifest, ExpectedCheckpoint, ManifestProblem, PublishOutcome,
    TaskSnapshot,
};
use object_store::{ObjectStoreExt, PutPayload};
use weir_api::{Epoch, SubtaskIndex};
use weir_plan::NodeKind;

fn expected() -> ExpectedCheckpoint {
    ExpectedCheckpoint::from_plan(&plan())
}

fn problems(err: &CheckpointError) -> Vec<ManifestProblem> {
    match err {
        CheckpointError::Invalid { problems, .. } => problems.clone(),
        other => panic!("expected Invalid, got {other}"),
    }
}

#[test]
fn the_fixture_is_a_complete_checkpoint_of_its_plan() {
    let plan = plan();
    assert_eq!(plan.checkpoint_ack_set.len(), 4);
    let m = full_manifest(&plan, 7);
    assert_eq!(expected().problems(&m), vec![]);
    assert_eq!(m.segments().count(), 4, "one segment per shard");
    assert_eq!(
        m.task_snapshots
            .iter()
            .map(|t| t.input_watermarks.len())
            .sum::<usize>(),
        4,
        "two input channels per keyed subtask"
    );
}

#[test]
fn canonical_json_round_trips_and_follows_the_documented_checksum_rule() -> TestResult {
    let m = full_manifest(&plan(), 7);
    let bytes = m.to_json()?;
    let text = std::str::from_utf8(&bytes)?;
    assert!(
        !text.contains('\n') && !text.contains(": "),
        "compact: {text}"
    );
    assert!(text.starts_with(r#"{"formatVersion":3,"namespace":"bids-euro/main","epoch":7,"#));
    assert!(text.contains(r#""kind":{"type":"checkpoint"}"#), "{text}");
    assert!(
        text.contains(r#""cursor":{"a":1.5,"nextRecord":70}"#),
        "keys sorted: {text}"
    );
    assert!(text.contains(r#""stateShardCount":{"#), "{text}");

    // The rule of the docs, done by hand: blank the 64 digits, hash, compare.
    let checksum = m.compute_checksum()?;
    let tail = format!(r#","checksum":"{checksum}"}}"#);
    assert!(text.ends_with(&tail), "checksum is the last field: {text}");
    let blank = format!(r#"{},"checksum":""}}"#, &text[..text.len() - tail.len()]);
    let digest = weir_plan::sha256_hex(blank.as_bytes());
    assert_eq!(digest, checksum);

    let back = EpochManifest::from_json(&bytes, "m.json")?;
    let mut sealed = m.clone();
    sealed.checksum = checksum;
    assert_eq!(back, sealed);
    assert_eq!(back.to_json()?, bytes, "byte-for-byte round trip");
    // The checksum a manifest carries does not change what it encodes to.
    assert_eq!(sealed.to_json()?, bytes);
    Ok(())
}

#[test]
fn savepoints_serialize_with_their_name_and_unknown_fields_are_refused() -> TestResult {
    let m = savepoint(&plan(), 3, "before-upgrade");
    let text = String::from_utf8(m.to_json()?)?;
    assert!(
        text.contains(r#""kind":{"type":"savepoint","name":"before-upgrade"}"#),
        "{text}"
    );
    assert!(EpochManifest::from_json(text.as_bytes(), "m")?.is_savepoint());

    // A field this release does not know, with a valid checksum: refused as corrupt.
    let mut value: serde_json::Value = serde_json::from_str(&text)?;
    value["kind"]["extra"] = serde_json::json!(1);
    let reencoded = reseal(&value);
    let err = EpochManifest::from_json(&reencoded, "x/manifest.json").expect_err("unknown field");
    assert!(matches!(err, CheckpointError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("x/manifest.json"), "{err}");

    // Another format version is reported as such.
    value["kind"] = serde_json::json!({"type": "checkpoint"});
    value["formatVersion"] = serde_json::json!(1);
    let reencoded = reseal(&value);
    let err = EpochManifest::from_json(&reencoded, "m").expect_err("version 1");
    assert!(
        matches!(
            err,
            CheckpointError::FormatVersion {
                found: 1,
                expected: 3,
                ..
            }
        ),
        "{err}"
    );
    Ok(())
}

/// Re-encodes hand-edited manifest JSON with `checksum` last and a valid checksum.
fn reseal(value: &serde_json::Value) -> Vec<u8> {
    let mut value = value.clone();
    value.as_object_mut().expect("object").remove("checksum");
    let text = serde_json::to_string(&value).expect("encodes");
    let body = text.strip_suffix('}').expect("object");
    let digest = weir_plan::sha256_hex(format!(r#"{body},"checksum":""}}"#).as_bytes());
    format!(r#"{body},"checksum":"{digest}"}}"#).into_bytes()
}

#[tokio::test]
async fn publish_list_read_and_choose_round_trip() -> TestResult {
    let (stores, _dir) = stores();
    let plan = plan();
    for (name, store) in stores {
        assert_eq!(store.list_epochs().await?, vec![], "{name}");
        let latest = store.latest_durable(&expected()).await?;
        assert!(
            latest.manifest.is_none() && latest.skipped.is_empty(),
            "{name}"
        );

        for epoch in [1, 2, 10] {
            checkpoint(&store, &full_manifest(&plan, epoch)).await?;
        }
        // An epoch directory without a manifest (in flight) is not an epoch yet.
        write_segments(&store, &full_manifest(&plan, 11)).await?;
        assert_eq!(
            store.list_epochs().await?,
            vec![Epoch(1), Epoch(2), Epoch(10)],
            "{name}: numeric order, not lexical"
        );
        let back = store.read_manifest(Epoch(10)).await?;
        let mut original = full_manifest(&plan, 10);
        original.checksum = original.compute_checksum()?;
        assert_eq!(back, original, "{name}");

        let latest = store.latest_durable(&expected()).await?;
        assert_eq!(
            latest.manifest.as_ref().map(|m| m.epoch),
            Some(Epoch(10)),
            "{name}"
        );
        assert!(!latest.may_repeat_output(), "{name}");

        let err = store.read_manifest(Epoch(5)).await.expect_err("absent");
        assert!(
            matches!(&err, CheckpointError::ManifestNotFound { path } if path == "ckpt/checkpoint/bids-euro%2Fmain/5/manifest.json"),
            "{name}: {err}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_tampered_manifest_is_refused_naming_the_file_and_recovery_falls_back() -> TestResult {
    let (stores, dir) = stores();
    let plan = plan();
    for (name, store) in stores {
        checkpoint(&store, &full_manifest(&plan, 1)).await?;
        checkpoint(&store, &full_manifest(&plan, 2)).await?;
        let location = store.manifest_location(Epoch(2));
        let mut bytes = store
            .object_store()
            .get(&location)
            .await?
            .bytes()
            .await?
            .to_vec();
        bytes[40] ^= 0x01; // inside `"namespace":"bids-euro/main"`
        if name == "local" {
            // Damage the file itself, as a disk or a person would.
            let file = dir
                .path()
                .join("ckpt/checkpoint/bids-euro%2Fmain/2/manifest.json");
            std::fs::write(&file, &bytes)?;
        } else {
            store
                .object_store()
                .put(&location, PutPayload::from(bytes))
                .await?;
        }

        let err = store.read_manifest(Epoch(2)).await.expect_err("tampered");
        assert!(
            matches!(err, CheckpointError::Checksum { .. }),
            "{name}: {err}"
        );
        assert!(
            err.to_string()
                .contains("ckpt/checkpoint/bids-euro%2Fmain/2/manifest.json"),
            "{name}: {err}"
        );

        let latest = store.latest_durable(&expected()).await?;
        assert_eq!(
            latest.manifest.as_ref().map(|m| m.epoch),
            Some(Epoch(1)),
            "{name}"
        );
        assert_eq!(latest.skipped.len(), 1, "{name}");
        assert_eq!(latest.skipped[0].epoch, Epoch(2));
        assert!(matches!(
            latest.skipped[0].reason,
            CheckpointError::Checksum { .. }
        ));
        assert!(latest.may_repeat_output());

        // A truncated manifest is corrupt, and skipped the same way.
        let truncated = store.manifest_location(Epoch(1));
        let mut bytes = store
            .object_store()
            .get(&truncated)
            .await?
            .bytes()
            .await?
            .to_vec();
        bytes.truncate(bytes.len() / 2);
        store
            .object_store()
            .put(&truncated, PutPayload::from(bytes))
            .await?;
        let latest = store.latest_durable(&expected()).await?;
        assert!(latest.manifest.is_none(), "{name}");
        assert_eq!(latest.skipped.len(), 2);
        assert!(matches!(
            latest.skipped[1].reason,
            CheckpointError::Corrupt { .. }
        ));
    }
    Ok(())
}

#[tokio::test]
async fn missing_or_resized_segments_make_a_manifest_incomplete() -> TestResult {
    let (stores, _dir) = stores();
    let plan = plan();
    for (name, store) in stores {
        checkpoint(&store, &full_manifest(&plan, 4)).await?;
        let m5 = full_manifest(&plan, 5);
        checkpoint(&store, &m5).await?;
        let mut segments = m5.segments();
        let gone = segments.next().expect("segment").path.clone();
        let resized = segments.next().expect("segment").path.clone();
        let os = store.object_store();
        os.delete(&full_path(&store, &gone)).await?;
        os.put(&full_path(&store, &resized), PutPayload::from(vec![0u8; 3]))
            .await?;

        let err = store.verify_segments(&m5).await.expect_err("incomplete");
        let CheckpointError::MissingSegments { manifest, segments } = &err else {
            panic!("{name}: {err}");
        };
        assert!(manifest.ends_with("/5/manifest.json"), "{manifest}");
        assert_eq!(segments.len(), 2, "{name}: {err}");
        assert!(
            err.to_string()
                .contains(&format!("segment ckpt/{gone} is missing")),
            "{err}"
        );
        assert!(err.to_string().contains("has 3 bytes"), "{err}");

        let latest = store.latest_durable(&expected()).await?;
        assert_eq!(
            latest.manifest.as_ref().map(|m| m.epoch),
            Some(Epoch(4)),
            "{name}"
        );
        assert!(matches!(
            latest.skipped[0].reason,
            CheckpointError::MissingSegments { .. }
        ));
    }
    Ok(())
}

#[test]
fn missing_extra_and_duplicate_task_entries_are_refused() {
    let plan = plan();
    let expected = expected();
    let complete = full_manifest(&plan, 3);

    let mut missing = complete.clone();
    let dropped = missing.task_snapshots.remove(1).task;
    let err = expected
        .validate(&missing, "ckpt/m.json")
        .expect_err("missing task");
    assert_eq!(
        problems(&err),
        vec![ManifestProblem::MissingTask(dropped.clone())]
    );
    assert!(err.to_string().contains("ckpt/m.json"), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("task {dropped} has no snapshot")),
        "{err}"
    );

    let mut duplicate = complete.clone();
    duplicate
        .task_snapshots
        .push(complete.task_snapshots[0].clone());
    let p = problems(&expected.validate(&duplicate, "m").expect_err("duplicate"));
    assert!(
        p.contains(&ManifestProblem::DuplicateTask {
            task: complete.task_snapshots[0].task.clone(),
            count: 2
        }),
        "{p:?}"
    );

    let mut extra = complete.clone();
    let mut stranger = complete.task_snapshots[0].clone();
    stranger.task.subtask = SubtaskIndex(9);
    stranger.segments.clear();
    stranger.input_watermarks.clear();
    extra.task_snapshots.push(stranger.clone());
    let p = problems(&expected.validate(&extra, "m").expect_err("extra"));
    assert_eq!(p, vec![ManifestProblem::ExtraTask(stranger.task)]);
    assert!(
        !CheckpointError::Invalid {
            path: "m".into(),
            problems: p
        }
        .is_incompatible()
    );
}

#[test]
fn entries_that_do_not_fit_the_plan_are_refused() {
    let plan = plan();
    let expected = expected();
    let complete = full_manifest(&plan, 3);
    let keyed = complete
        .task_snapshots
        .iter()
        .position(|t| !t.segments.is_empty())
        .expect("a keyed task");

    type Breaker = Box<dyn Fn(&mut EpochManifest)>;
    let cases: Vec<(&str, Breaker)> = vec![
        (
            "owned by subtask",
            Box::new(move |m| {
                // A shard of the other subtask, at its stable path.
                let other = m.task_snapshots[keyed + 1].segments[0].clone();
                let mut d = other;
                d.subtask = m.task_snapshots[keyed].task.subtask;
                d.path = weir_state::segment::segment_path(
                    NS,
                    m.epoch,
                    &d.operator,
                    d.subtask,
                    d.shard,
                    &d.state,
                )
                .to_string();
                m.task_snapshots[keyed].segments.push(d);
            }),
        ),
        (
            "its stable path in this epoch",
            Box::new(move |m| {
                m.task_snapshots[keyed].segments[0].path =
                    "checkpoint/elsewhere/3/x.parquet".into();
            }),
        ),
        (
            "stateShardCount 8, the plan has 4",
            Box::new(move |m| {
                m.task_snapshots[keyed].segments[0].state_shard_count = 8;
            }),
        ),
        (
            "no watermark state for input channel",
            Box::new(move |m| {
                m.task_snapshots[keyed].input_watermarks.pop();
            }),
        ),
        (
            "listed more than once",
            Box::new(move |m| {
                let w = m.task_snapshots[keyed].input_watermarks[0].clone();
                m.task_snapshots[keyed].input_watermarks.push(w);
            }),
        ),
        (
            "split already has an offset",
            Box::new(|m| {
                let mut o = m.source_offsets[0].clone();
                o.subtask = SubtaskIndex(1);
                m.source_offsets.push(o);
            }),
        ),
        (
            "subtask 5 does not exist (parallelism 2)",
            Box::new(|m| {
                m.sink_transactions[0].subtask = SubtaskIndex(5);
            }),
        ),
        (
            "is a Source, not a Sink",
            Box::new(|m| {
                m.sink_transactions[0].operator = m.source_offsets[0].operator.clone();
            }),
        ),
        (
            "both assigned and finished",
            Box::new(|m| {
                m.source_enumerator_snapshots[0]
                    .finished
                    .insert("file:///in-0.csv".into());
            }),
        ),
        (
            "stateShardCount.",
            Box::new(|m| {
                m.state_shard_counts.clear();
            }),
        ),
    ];
    for (message, break_it) in cases {
        let mut m = complete.clone();
        break_it(&mut m);
        let err = expected.validate(&m, "m").expect_err(message);
        assert!(
            err.to_string().contains(message),
            "expected `{message}` in: {err}"
        );
    }
}

#[tokio::test]
async fn a_manifest_of_another_plan_is_refused_without_falling_back() -> TestResult {
    let (stores, _dir) = stores();
    let plan = plan();
    let other = plan_of(&SPEC.replace("auction > 0", "auction > 1"));
    let other_expected = ExpectedCheckpoint::from_plan(&other);
    assert_ne!(
        other_expected.plan_fingerprint(),
        expected().plan_fingerprint()
    );
    for (name, store) in stores {
        // Publishing against the wrong plan writes nothing.
        let m = full_manifest(&plan, 1);
        let err = store
            .publish_manifest(&m, &other_expected)
            .await
            .expect_err("fingerprint differs");
        assert!(err.is_incompatible(), "{name}: {err}");
        assert!(err.to_string().contains("planFingerprint is"), "{err}");
        assert_eq!(store.list_epochs().await?, vec![]);

        checkpoint(&store, &m).await?;
        let err = store
            .latest_durable(&other_expected)
            .await
            .expect_err("recovery must refuse another plan");
        assert!(
            err.is_incompatible() && !err.is_unusable_manifest(),
            "{name}: {err}"
        );
        assert!(err.to_string().contains("/1/manifest.json"), "{err}");
    }
    Ok(())
}

#[tokio::test]
async fn a_manifest_of_another_format_version_stops_recovery() -> TestResult {
    let (stores, _dir) = stores();
    let plan = plan();
    for (name, store) in stores {
        checkpoint(&store, &full_manifest(&plan, 1)).await?;
        let m2 = full_manifest(&plan, 2);
        checkpoint(&store, &m2).await?;
        let mut value: serde_json::Value = serde_json::from_slice(&m2.to_json()?)?;
        value["formatVersion"] = serde_json::json!(4);
        store
            .object_store()
            .put(
                &store.manifest_location(Epoch(2)),
                PutPayload::from(reseal(&value)),
            )
            .await?;
        let err = store
            .latest_durable(&expected())
            .await
            .expect_err("newer release");
        assert!(
            matches!(err, CheckpointError::FormatVersion { found: 4, .. }),
            "{name}: {err}"
        );
        // Retention leaves it alone.
        let report = store.retain(1).await?;
        assert_eq!(report.kept, vec![Epoch(1)], "{name}");
        assert_eq!(report.unreadable.len(), 1, "{name}");
    }
    Ok(())
}

#[tokio::test]
async fn publishing_twice_is_a_no_op_only_with_identical_content() -> TestResult {
    let (stores, _dir) = stores();
    let plan = plan();
    for (name, store) in stores {
        let m = full_manifest(&plan, 6);
        write_segments(&store, &m).await?;
        assert_eq!(
            store.publish_manifest(&m, &expected()).await?,
            PublishOutcome::Published
        );
        assert_eq!(
            store.publish_manifest(&m, &expected()).await?,
            PublishOutcome::AlreadyPublished,
            "{name}"
        );
        let mut changed = m.clone();
        changed.durable_at_ms += 1;
        changed.attempt_id.0 += 1;
        let err = store
            .publish_manifest(&changed, &expected())
            .await
            .expect_err("different content");
        assert!(
            matches!(&err, CheckpointError::Conflict { differing, .. }
                if differing == &["`attemptId`", "`checksum`", "`durableAtMs`"]),
            "{name}: {err}"
        );
        assert!(err.to_string().contains("/6/manifest.json"), "{err}");
        let mut original = m.clone();
        original.checksum = m.compute_checksum()?;
        assert_eq!(
            store.read_manifest(Epoch(6)).await?,
            original,
            "{name}: unchanged"
        );

        // A manifest of another namespace is refused before anything is written.
        let mut foreign = full_manifest(&plan, 8);
        foreign.namespace = "other".into();
        let err = store
            .publish_manifest(&foreign, &expected())
            .await
            .expect_err("namespace");
        assert!(err.to_string().contains("namespace is `other`"), "{err}");
    }
    Ok(())
}

/// Real segments from `weir-state` go into a manifest, which is published, chosen for recovery
/// and restored from: the two crates share one layout.
#[tokio::test]
async fn weir_state_segments_round_trip_through_a_manifest() -> TestResult {
    use std::sync::Arc;
    use weir_api::state::Value;
    use weir_api::{JobId, KeyedStateStore, StateDescriptor, StateShardId};
    use weir_state::{
        KeyedStateExt, ManualClock, RestoreOptions, SegmentStore, SnapshotScope, StateBackend,
    };

    let (stores, dir) = stores();
    let plan = plan();
    let expected = expected();
    let agg = operator(&plan, NodeKind::Operator);
    let keyed = plan
        .vertices
        .iter()
        .find(|v| v.shards.is_some())
        .expect("keyed vertex");
    let shards = keyed.shards.clone().expect("shards");
    let owners = shards.owner_table();
    let count = StateDescriptor::<Value<u64>>::new("count");
    for (name, store) in stores {
        let segments = SegmentStore::new(Arc::clone(store.object_store()), store.base().clone());
        let mut m = expected.manifest_template(NS, Epoch(12), crate::AttemptId(1));
        let mut backends = Vec::new();
        for task in &keyed.tasks {
            let clock = ManualClock::new(0);
            let file = dir.path().join(format!("{name}-{}.redb", task.subtask));
            let backend = StateBackend::open_redb(&file, Arc::new(clock))?;
            let mut kv = backend.keyed_store(&plan.job_id, &agg);
            for shard in (0..4).filter(|s| owners[*s as usize] == task.subtask.0) {
                kv.set_current_key(format!("k{shard}").as_bytes(), StateShardId(shard));
                kv.value_state(&count)?.update(&u64::from(shard * 10))?;
            }
            backend.commit()?;
            let pending = segments.begin_snapshot(
                &backend,
                SnapshotScope {
                    namespace: NS.to_owned(),
                    epoch: Epoch(12),
                    job: JobId::new(plan.job_id.as_str()),
                    operator: agg.clone(),
                    subtask: task.subtask,
                    shards: shards.clone(),
                },
            )?;
            let written = pending.write().await?;
            backends.push(backend);
            let input_watermarks = full_manifest(&plan, 12)
                .task_snapshots
                .into_iter()
                .find(|t| &t.task == task)
                .expect("task")
                .input_watermarks;
            m.task_snapshots.push(TaskSnapshot {
                task: task.clone(),
                segments: written,
                input_watermarks,
            });
        }
        for v in plan.vertices.iter().filter(|v| v.shards.is_none()) {
            m.task_snapshots
                .extend(v.tasks.iter().map(|t| TaskSnapshot {
                    task: t.clone(),
                    segments: vec![],
                    input_watermarks: vec![],
                }));
        }
        assert_eq!(m.kind, EpochKind::Checkpoint);
        store.publish_manifest(&m, &expected).await?;

        let chosen = store
            .latest_durable(&expected)
            .await?
            .manifest
            .expect("a durable manifest");
        let task = &chosen.task_snapshots[0];
        let fresh = StateBackend::open_redb(
            &dir.path().join(format!("{name}-restored.redb")),
            Arc::new(ManualClock::new(0)),
        )?;
        segments
            .restore(&fresh, &task.segments, &RestoreOptions::new())
            .await?;
        let mut kv = fresh.keyed_store(&plan.job_id, &agg);
        let shard = owners
            .iter()
            .position(|o| *o == task.task.subtask.0)
            .expect("owned") as u32;
        kv.set_current_key(format!("k{shard}").as_bytes(), StateShardId(shard));
        assert_eq!(
            kv.value_state(&count)?.value()?,
            Some(u64::from(shard * 10)),
            "{name}"
        );
    }
    Ok(())
}
