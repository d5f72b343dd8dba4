//! Retention over real object stores: newest N checkpoints, savepoints, orphans, in-flight
//! epochs, unreadable manifests and the epoch log.

use crate::test_support::*;
use crate::{CheckpointError, EpochRecord, EpochState, ExpectedCheckpoint};
use object_store::{ObjectStoreExt, PutPayload};
use weir_api::Epoch;

#[tokio::test]
async fn retention_keeps_the_newest_checkpoints_and_every_savepoint() -> TestResult {
    let (stores, _dir) = stores();
    let plan = plan();
    for (name, store) in stores {
        // 1 checkpoint, 2 savepoint, 3 orphan (a failed snapshot), 4-6 checkpoints, 7 in flight.
        checkpoint(&store, &full_manifest(&plan, 1)).await?;
        checkpoint(&store, &savepoint(&plan, 2, "v1")).await?;
        write_segments(&store, &full_manifest(&plan, 3)).await?;
        for epoch in 4..=6 {
            checkpoint(&store, &full_manifest(&plan, epoch)).await?;
        }
        write_segments(&store, &full_manifest(&plan, 7)).await?;
        // A segment of a retried snapshot that the manifest of 6 does not reference.
        let stray = "ckpt/checkpoint/bids-euro%2Fmain/6/stray/0/0/count.parquet";
        store
            .object_store()
            .put(
                &object_store::path::Path::parse(stray)?,
                PutPayload::from_static(b"x"),
            )
            .await?;
        let log = store.epoch_log();
        for epoch in 1..=7 {
            log.record(&EpochRecord::new(Epoch(epoch), EpochState::Created, epoch))
                .await?;
        }
        let before = all_objects(&store).await;

        let report = store.retain(2).await?;
        assert_eq!(report.kept, vec![Epoch(2), Epoch(5), Epoch(6)], "{name}");
        assert_eq!(
            report.deleted_checkpoints,
            vec![Epoch(1), Epoch(4)],
            "{name}"
        );
        assert_eq!(report.deleted_orphan_epochs, vec![Epoch(3)], "{name}");
        assert!(report.unreadable.is_empty());

        let after = all_objects(&store).await;
        let epoch_dir = |e: u64| format!("ckpt/checkpoint/bids-euro%2Fmain/{e}/");
        let log_record = |e: u64| format!("ckpt/checkpoint/bids-euro%2Fmain/log/{e}-CREATED.json");
        for gone in [1, 3, 4] {
            assert!(
                !after.iter().any(|p| p.starts_with(&epoch_dir(gone))),
                "{name}: {gone}"
            );
            assert!(!after.contains(&log_record(gone)), "{name}: log {gone}");
        }
        for kept in [2, 5, 6, 7] {
            let before_n = before
                .iter()
                .filter(|p| p.starts_with(&epoch_dir(kept)))
                .count();
            let after_n = after
                .iter()
                .filter(|p| p.starts_with(&epoch_dir(kept)))
                .count();
            let stray_n = usize::from(kept == 6);
            assert_eq!(
                after_n + stray_n,
                before_n,
                "{name}: epoch {kept} keeps its files"
            );
            assert!(after.contains(&log_record(kept)), "{name}: log {kept}");
        }
        assert!(
            !after.contains(&stray.to_owned()),
            "{name}: unreferenced segment"
        );
        let mut deleted: Vec<String> = before
            .iter()
            .filter(|p| !after.contains(p))
            .cloned()
            .collect();
        deleted.sort();
        assert_eq!(
            report.deleted_objects, deleted,
            "{name}: reports what it deleted"
        );

        // What is left still restores, and the savepoint still reads.
        let expected = ExpectedCheckpoint::from_plan(&plan);
        let latest = store.latest_durable(&expected).await?;
        assert_eq!(
            latest.manifest.as_ref().map(|m| m.epoch),
            Some(Epoch(6)),
            "{name}"
        );
        assert!(store.read_manifest(Epoch(2)).await?.is_savepoint());
        assert_eq!(
            store.list_epochs().await?,
            vec![Epoch(2), Epoch(5), Epoch(6)]
        );

        // Running it again deletes nothing.
        let again = store.retain(2).await?;
        assert!(again.deleted_objects.is_empty(), "{name}: {again:?}");
        assert_eq!(again.kept, report.kept);

        let err = store.retain(0).await.expect_err("keep 0");
        assert!(
            matches!(err, CheckpointError::InvalidArgument { .. }),
            "{err}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn unreadable_manifests_are_left_alone_and_do_not_count() -> TestResult {
    let (stores, _dir) = stores();
    let plan = plan();
    for (name, store) in stores {
        for epoch in 1..=3 {
            checkpoint(&store, &full_manifest(&plan, epoch)).await?;
        }
        let broken = store.manifest_location(Epoch(3));
        store
            .object_store()
            .put(
                &broken,
                PutPayload::from_static(b"{\"not\":\"a manifest\"}"),
            )
            .await?;

        let report = store.retain(1).await?;
        assert_eq!(
            report.kept,
            vec![Epoch(2)],
            "{name}: the newest readable one"
        );
        assert_eq!(report.deleted_checkpoints, vec![Epoch(1)]);
        assert_eq!(report.unreadable.len(), 1);
        assert_eq!(report.unreadable[0].0, Epoch(3));
        assert!(
            report.unreadable[0].1.contains("/3/manifest.json"),
            "{:?}",
            report.unreadable
        );
        let left = all_objects(&store).await;
        assert_eq!(
            left.iter()
                .filter(|p| p.starts_with("ckpt/checkpoint/bids-euro%2Fmain/3/"))
                .count(),
            5,
            "{name}: the manifest and its 4 segments stay"
        );
    }
    Ok(())
}
