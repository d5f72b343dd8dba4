//! The second copy of every manifest in its DURABLE epoch log record: recovery reads it when the
//! manifest object is damaged or gone, and falls back only when the copy is unusable too; and
//! finding the segments whose bytes are damaged.

use crate::test_support::*;
use crate::{CheckpointError, CheckpointStore, EpochRecord, EpochState, ExpectedCheckpoint};
use object_store::{ObjectStoreExt, PutPayload};
use weir_api::Epoch;

fn expected() -> ExpectedCheckpoint {
    ExpectedCheckpoint::from_plan(&plan())
}

/// Publishes the manifest of `epoch` and records DURABLE with its copy, as the coordinator does.
async fn durable(store: &CheckpointStore, epoch: u64) -> TestResult {
    let m = full_manifest(&plan(), epoch);
    checkpoint(store, &m).await?;
    let record = EpochRecord::new(Epoch(epoch), EpochState::Durable, 1).with_manifest(&m)?;
    store.epoch_log().record(&record).await?;
    Ok(())
}

/// Flips one bit of the byte at `at` of the object at `location`.
async fn flip(
    store: &CheckpointStore,
    location: &object_store::path::Path,
    at: usize,
) -> TestResult {
    let mut bytes = store
        .object_store()
        .get(location)
        .await?
        .bytes()
        .await?
        .to_vec();
    bytes[at] ^= 0x01;
    store
        .object_store()
        .put(location, PutPayload::from(bytes))
        .await?;
    Ok(())
}

#[tokio::test]
async fn a_damaged_manifest_is_restored_from_its_copy_without_falling_back() -> TestResult {
    let (stores, _dir) = stores();
    for (name, store) in stores {
        durable(&store, 1).await?;
        durable(&store, 2).await?;
        let published = store.read_manifest(Epoch(2)).await?;
        // The copy is the manifest's exact bytes.
        let (copy, path) = store
            .epoch_log()
            .manifest_copy(Epoch(2))
            .await?
            .expect("copy");
        assert_eq!(copy.as_bytes(), &published.to_json()?[..], "{name}");
        assert!(path.ends_with("log/2-DURABLE.json"), "{name}: {path}");

        flip(&store, &store.manifest_location(Epoch(2)), 40).await?;
        assert!(matches!(
            store.read_manifest(Epoch(2)).await,
            Err(CheckpointError::Checksum { .. })
        ));
        let latest = store.latest_durable(&expected()).await?;
        assert_eq!(latest.manifest.as_ref(), Some(&published), "{name}");
        assert!(latest.skipped.is_empty(), "{name}");
        assert!(!latest.may_repeat_output(), "{name}");
        assert!(
            matches!(
                latest.manifest_damage,
                Some(CheckpointError::Checksum { .. })
            ),
            "{name}: {:?}",
            latest.manifest_damage
        );
        // A chosen epoch too.
        let point = store.restore_point(Epoch(2), &expected()).await?;
        assert_eq!(point.manifest, published, "{name}");
        assert!(point.manifest_damage.is_some(), "{name}");

        // A manifest object that is gone altogether: an explicit restore still finds the copy.
        store
            .object_store()
            .delete(&store.manifest_location(Epoch(2)))
            .await?;
        let point = store.restore_point(Epoch(2), &expected()).await?;
        assert!(
            matches!(
                point.manifest_damage,
                Some(CheckpointError::ManifestNotFound { .. })
            ),
            "{name}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_damaged_manifest_and_copy_fall_back_naming_both() -> TestResult {
    let (stores, _dir) = stores();
    for (name, store) in stores {
        durable(&store, 1).await?;
        durable(&store, 2).await?;
        flip(&store, &store.manifest_location(Epoch(2)), 40).await?;
        // A byte of the manifest inside the record's JSON string: the record still parses,
        // the copy fails its checksum.
        let record = store
            .epoch_log()
            .record_location(Epoch(2), EpochState::Durable);
        let text = String::from_utf8(
            store
                .object_store()
                .get(&record)
                .await?
                .bytes()
                .await?
                .to_vec(),
        )?;
        let at = text.find("bids-euro/main").expect("namespace in the copy") + 1;
        flip(&store, &record, at).await?;

        let latest = store.latest_durable(&expected()).await?;
        assert_eq!(
            latest.manifest.as_ref().map(|m| m.epoch),
            Some(Epoch(1)),
            "{name}"
        );
        assert!(latest.manifest_damage.is_none(), "{name}");
        assert_eq!(latest.skipped.len(), 1, "{name}");
        let reason = latest.skipped[0].reason.to_string();
        assert!(
            matches!(
                latest.skipped[0].reason,
                CheckpointError::CopyDamaged { .. }
            ),
            "{name}: {reason}"
        );
        assert!(
            reason.contains("2/manifest.json") && reason.contains("log/2-DURABLE.json"),
            "{name}: {reason}"
        );
        assert!(latest.may_repeat_output(), "{name}");
        let err = store
            .restorable(Epoch(2), &expected())
            .await
            .expect_err("both copies damaged");
        assert!(err.is_unusable_manifest(), "{name}: {err}");
    }
    Ok(())
}

#[tokio::test]
async fn a_manifest_without_a_copy_falls_back_as_before() -> TestResult {
    let (stores, _dir) = stores();
    for (name, store) in stores {
        durable(&store, 1).await?;
        // Epoch 2's DURABLE record was never written (a crash right after the manifest).
        checkpoint(&store, &full_manifest(&plan(), 2)).await?;
        flip(&store, &store.manifest_location(Epoch(2)), 40).await?;
        let latest = store.latest_durable(&expected()).await?;
        assert_eq!(latest.manifest.map(|m| m.epoch), Some(Epoch(1)), "{name}");
        assert!(matches!(
            latest.skipped[0].reason,
            CheckpointError::Checksum { .. }
        ));
    }
    Ok(())
}

#[tokio::test]
async fn records_without_a_copy_read_back_and_records_with_one_round_trip() -> TestResult {
    let plain = br#"{"formatVersion":1,"epoch":3,"state":"DURABLE","atMs":5,"reason":null}"#;
    let record: EpochRecord = serde_json::from_slice(plain)?;
    assert_eq!(record, EpochRecord::new(Epoch(3), EpochState::Durable, 5));
    // Without a copy the record's bytes are what they always were.
    assert_eq!(serde_json::to_vec(&record)?, plain.to_vec());
    let m = full_manifest(&plan(), 3);
    let with = record.with_manifest(&m)?;
    let back: EpochRecord = serde_json::from_slice(&serde_json::to_vec(&with)?)?;
    assert_eq!(
        back.manifest.as_deref().map(str::as_bytes),
        Some(&m.to_json()?[..])
    );
    Ok(())
}

#[tokio::test]
async fn damaged_segments_are_found_by_their_checksums() -> TestResult {
    let (stores, _dir) = stores();
    for (name, store) in stores {
        let mut m = full_manifest(&plan(), 4);
        // Segments whose recorded checksum is that of the bytes written_segments writes.
        for t in &mut m.task_snapshots {
            for d in &mut t.segments {
                let size = usize::try_from(d.bytes)?;
                d.sha256 = weir_plan::sha256_hex(&vec![7u8; size]);
            }
        }
        write_segments(&store, &m).await?;
        let segments: Vec<_> = m.segments().cloned().collect();
        assert!(segments.len() >= 2, "{name}");
        assert_eq!(store.damaged_segments(&segments).await?, vec![], "{name}");
        let target = full_path(&store, &segments[1].path);
        flip(&store, &target, 0).await?;
        let damaged = store.damaged_segments(&segments).await?;
        assert_eq!(damaged.len(), 1, "{name}");
        assert_eq!(damaged[0].path, target.to_string(), "{name}");
        assert_eq!(damaged[0].relative_path, segments[1].path, "{name}");
        assert_eq!(damaged[0].recorded, segments[1].sha256, "{name}");
        assert!(
            damaged[0]
                .actual
                .as_ref()
                .is_some_and(|a| a != &segments[1].sha256)
        );
        store.object_store().delete(&target).await?;
        let damaged = store.damaged_segments(&segments).await?;
        assert_eq!(damaged[0].actual, None, "{name}");
    }
    Ok(())
}

#[tokio::test]
async fn a_durable_epoch_whose_manifest_object_is_gone_is_found_through_the_log() -> TestResult {
    let (stores, _dir) = stores();
    for (name, store) in stores {
        durable(&store, 1).await?;
        durable(&store, 2).await?;
        store
            .object_store()
            .delete(&store.manifest_location(Epoch(2)))
            .await?;
        assert_eq!(store.list_epochs().await?, vec![Epoch(1)], "{name}");
        assert_eq!(
            store.published_epochs().await?,
            vec![Epoch(1), Epoch(2)],
            "{name}"
        );
        let latest = store.latest_durable(&expected()).await?;
        assert_eq!(latest.manifest.map(|m| m.epoch), Some(Epoch(2)), "{name}");
        assert!(matches!(
            latest.manifest_damage,
            Some(CheckpointError::ManifestNotFound { .. })
        ));
        // Without the copy as well, the epoch is passed over, not forgotten.
        store
            .object_store()
            .delete(
                &store
                    .epoch_log()
                    .record_location(Epoch(2), EpochState::Durable),
            )
            .await?;
        let record = EpochRecord::new(Epoch(2), EpochState::Durable, 1);
        store.epoch_log().record(&record).await?;
        let latest = store.latest_durable(&expected()).await?;
        assert_eq!(latest.manifest.map(|m| m.epoch), Some(Epoch(1)), "{name}");
        assert_eq!(latest.skipped.len(), 1, "{name}");
        assert_eq!(latest.skipped[0].epoch, Epoch(2), "{name}");
        assert!(matches!(
            latest.skipped[0].reason,
            CheckpointError::ManifestNotFound { .. }
        ));
    }
    Ok(())
}

#[tokio::test]
async fn a_damaged_savepoint_is_found_by_name_through_its_copy() -> TestResult {
    let (stores, _dir) = stores();
    for (name, store) in stores {
        durable(&store, 1).await?;
        let m = savepoint(&plan(), 2, "before-upgrade");
        checkpoint(&store, &m).await?;
        let record = EpochRecord::new(Epoch(2), EpochState::Durable, 1).with_manifest(&m)?;
        store.epoch_log().record(&record).await?;
        flip(&store, &store.manifest_location(Epoch(2)), 40).await?;
        assert_eq!(
            store.find_savepoint("before-upgrade").await?,
            Some(Epoch(2)),
            "{name}"
        );
        // Without the copy its name is unknown.
        store
            .object_store()
            .delete(
                &store
                    .epoch_log()
                    .record_location(Epoch(2), EpochState::Durable),
            )
            .await?;
        assert_eq!(
            store.find_savepoint("before-upgrade").await?,
            None,
            "{name}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn retention_counts_a_damaged_manifest_with_an_intact_copy() -> TestResult {
    let (stores, _dir) = stores();
    for (name, store) in stores {
        for epoch in 1..=3 {
            durable(&store, epoch).await?;
        }
        flip(&store, &store.manifest_location(Epoch(2)), 40).await?;
        let report = store.retain(2).await?;
        assert!(report.unreadable.is_empty(), "{name}: {report:?}");
        assert_eq!(report.kept, vec![Epoch(2), Epoch(3)], "{name}");
        assert_eq!(report.deleted_checkpoints, vec![Epoch(1)], "{name}");
        // Kept objects of epoch 2 are its manifest and the segments its copy references.
        let point = store.restore_point(Epoch(2), &expected()).await?;
        assert!(point.manifest_damage.is_some(), "{name}");
    }
    Ok(())
}
