//! Attempt fencing and durable publication on a local file system.

use crate::local_sync::file_path;
use crate::test_support::*;
use crate::{AttemptId, CheckpointError, CheckpointStore, ExpectedCheckpoint, PublishOutcome};
use object_store::local::LocalFileSystem;
use std::sync::Arc;
use weir_api::{Epoch, ErrorKind};

fn expected() -> ExpectedCheckpoint {
    ExpectedCheckpoint::from_plan(&plan())
}

#[tokio::test]
async fn a_newer_attempt_fences_the_older_one() -> TestResult {
    let (stores, _dir) = stores();
    let plan = plan();
    for (name, store) in stores {
        // Nothing acquired yet: any attempt may publish.
        store.check_attempt(AttemptId(0)).await?;
        let first = store.acquire_attempt().await?;
        assert_eq!(first, AttemptId(1), "{name}");
        store.check_attempt(first).await?;
        let second = store.acquire_attempt().await?;
        assert_eq!(second, AttemptId(2), "{name}");
        store.check_attempt(second).await?;

        let err = store.check_attempt(first).await.expect_err("superseded");
        assert!(
            matches!(&err, CheckpointError::Fenced { attempt, current, namespace }
                if *attempt == first && *current == second && namespace == NS),
            "{name}: {err}"
        );
        assert_eq!(err.kind(), ErrorKind::User);
        assert!(!err.is_retryable());

        // The old attempt cannot publish, and nothing is written.
        let mut stale = full_manifest(&plan, 1);
        stale.attempt_id = first;
        write_segments(&store, &stale).await?;
        let before = all_objects(&store).await;
        let err = store
            .publish_manifest(&stale, &expected())
            .await
            .expect_err("fenced");
        let text = err.to_string();
        assert!(
            text.starts_with("attempt 1 was superseded by attempt 2: ")
                && text.contains("checkpoint/bids-euro%2Fmain/attempts/00000000000000000002"),
            "{name}: {text}"
        );
        assert_eq!(all_objects(&store).await, before, "{name}");
        assert_eq!(store.list_epochs().await?, vec![], "{name}");

        // The new one can.
        let mut fresh = stale.clone();
        fresh.attempt_id = second;
        assert_eq!(
            store.publish_manifest(&fresh, &expected()).await?,
            PublishOutcome::Published,
            "{name}"
        );
        assert_eq!(store.list_epochs().await?, vec![Epoch(1)], "{name}");
    }
    Ok(())
}

#[tokio::test]
async fn retention_keeps_the_newest_attempts() -> TestResult {
    let (stores, _dir) = stores();
    let plan = plan();
    for (name, store) in stores {
        for n in 1..=20 {
            assert_eq!(store.acquire_attempt().await?, AttemptId(n), "{name}");
        }
        let mut m = full_manifest(&plan, 1);
        m.attempt_id = AttemptId(20);
        checkpoint(&store, &m).await?;
        let report = store.retain(1).await?;
        let attempts = |objects: &[String]| -> Vec<String> {
            objects
                .iter()
                .filter(|p| p.contains("/attempts/"))
                .cloned()
                .collect()
        };
        let deleted = attempts(&report.deleted_objects);
        assert_eq!(deleted.len(), 4, "{name}: {deleted:?}");
        assert!(
            deleted[0].ends_with("/attempts/00000000000000000001")
                && deleted[3].ends_with("/attempts/00000000000000000004"),
            "{name}: {deleted:?}"
        );
        assert_eq!(attempts(&all_objects(&store).await).len(), 16, "{name}");
        assert_eq!(report.kept, vec![Epoch(1)], "{name}");
        // The newest attempt is kept, so fencing still holds and numbers go on.
        assert!(store.check_attempt(AttemptId(19)).await.is_err(), "{name}");
        assert_eq!(store.acquire_attempt().await?, AttemptId(21), "{name}");
    }
    Ok(())
}

/// A checkpoint store on a `LocalFileSystem` that knows its root.
fn local_store() -> (CheckpointStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = LocalFileSystem::new_with_prefix(dir.path()).expect("local store");
    let store = CheckpointStore::try_new(Arc::new(fs), object_store::path::Path::from("ckpt"), NS)
        .expect("namespace")
        .with_local_root(dir.path().to_path_buf());
    (store, dir)
}

#[tokio::test]
async fn publishing_through_a_local_root_syncs_segments_and_manifest() -> TestResult {
    let (store, dir) = local_store();
    assert_eq!(store.local_root(), Some(dir.path()));
    let m = full_manifest(&plan(), 3);
    write_segments(&store, &m).await?;
    assert_eq!(
        store.publish_manifest(&m, &expected()).await?,
        PublishOutcome::Published
    );
    // The files synced are the files LocalFileSystem wrote (the namespace's `/` is `%2F`).
    let manifest_file = file_path(dir.path(), &store.manifest_location(Epoch(3)));
    assert_eq!(
        manifest_file,
        dir.path()
            .join("ckpt/checkpoint/bids-euro%2Fmain/3/manifest.json")
    );
    assert_eq!(
        std::fs::read(&manifest_file)?,
        m.to_json()?,
        "the manifest is where the sync looked"
    );
    for d in m.segments() {
        let file = file_path(dir.path(), &full_path(&store, &d.path));
        assert_eq!(std::fs::metadata(&file)?.len(), d.bytes);
    }
    // A retry syncs again and changes nothing.
    assert_eq!(
        store.publish_manifest(&m, &expected()).await?,
        PublishOutcome::AlreadyPublished
    );
    assert_eq!(
        store
            .latest_durable(&expected())
            .await?
            .manifest
            .map(|m| m.epoch),
        Some(Epoch(3))
    );
    Ok(())
}

#[tokio::test]
async fn a_missing_segment_file_stops_a_local_publication() -> TestResult {
    let (store, dir) = local_store();
    let m = full_manifest(&plan(), 4);
    write_segments(&store, &m).await?;
    let gone = m.segments().nth(1).expect("a segment").path.clone();
    let file = file_path(dir.path(), &full_path(&store, &gone));
    std::fs::remove_file(&file)?;

    let err = store
        .publish_manifest(&m, &expected())
        .await
        .expect_err("a segment is missing");
    assert!(
        matches!(&err, CheckpointError::Io { context, path, source }
            if context == "syncing segment"
                && path == &file.display().to_string()
                && source.kind() == std::io::ErrorKind::NotFound),
        "{err}"
    );
    assert!(
        err.to_string().contains(&file.display().to_string()),
        "{err}"
    );
    assert_eq!(err.kind(), ErrorKind::External);
    assert_eq!(store.list_epochs().await?, vec![], "nothing was published");

    // Without the local root the same store publishes without looking.
    let plain =
        CheckpointStore::try_new(Arc::clone(store.object_store()), store.base().clone(), NS)?;
    assert_eq!(
        plain.publish_manifest(&m, &expected()).await?,
        PublishOutcome::Published
    );
    Ok(())
}
