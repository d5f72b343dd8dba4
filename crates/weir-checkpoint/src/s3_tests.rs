//! Checkpoint publication on a real S3-compatible server (moto, started by
//! `weir_testkit::s3`): manifests, create-if-absent under racing writers, attempt fencing.

use crate::test_support::*;
use crate::{CheckpointError, CheckpointStore, ExpectedCheckpoint, PublishOutcome};
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use std::collections::BTreeSet;
use std::sync::Arc;
use weir_api::{Epoch, S3Options};
use weir_testkit::s3 as server;

/// An S3 store on bucket `bucket` of the test server, with the options a user would give.
fn s3_store(bucket: &str) -> Arc<dyn ObjectStore> {
    let s3 = server::server().expect("the S3 test server");
    let options = S3Options {
        endpoint: Some(s3.endpoint().to_owned()),
        region: Some(server::REGION.to_owned()),
        access_key_id: Some(server::ACCESS_KEY_ID.to_owned()),
        secret_access_key: Some(server::SECRET_ACCESS_KEY.to_owned()),
        path_style: Some(true),
        ..S3Options::default()
    };
    let url = url::Url::parse(&format!("s3://{bucket}/")).expect("a URL");
    // No environment: the test does not depend on the developer's AWS variables.
    let (store, _) =
        object_store::parse_url_opts(&url, options.object_store_options(std::iter::empty()))
            .expect("an S3 store");
    Arc::from(store)
}

fn checkpoint_store(bucket: &str) -> CheckpointStore {
    CheckpointStore::try_new(s3_store(bucket), ObjectPath::from("ckpt"), NS).expect("a store")
}

#[tokio::test]
async fn manifests_publish_list_and_restore_on_s3() -> TestResult {
    let bucket = server::server()?.create_bucket("ckpt")?;
    let store = checkpoint_store(&bucket);
    let plan = plan();
    let expected = ExpectedCheckpoint::from_plan(&plan);
    let attempt = store.acquire_attempt().await?;
    for epoch in [1, 2, 10] {
        let mut m = full_manifest(&plan, epoch);
        m.attempt_id = attempt;
        write_segments(&store, &m).await?;
        assert_eq!(
            store.publish_manifest(&m, &expected).await?,
            PublishOutcome::Published
        );
        // A retry of the same manifest is a no-op; another manifest of the epoch conflicts.
        assert_eq!(
            store.publish_manifest(&m, &expected).await?,
            PublishOutcome::AlreadyPublished
        );
        let mut other = m.clone();
        other.created_at_ms += 1;
        let err = store
            .publish_manifest(&other, &expected)
            .await
            .expect_err("a second manifest of the epoch");
        assert!(matches!(err, CheckpointError::Conflict { .. }), "{err}");
    }
    assert_eq!(
        store.list_epochs().await?,
        vec![Epoch(1), Epoch(2), Epoch(10)]
    );
    let latest = store.latest_durable(&expected).await?;
    assert_eq!(latest.manifest.map(|m| m.epoch), Some(Epoch(10)));

    // A newer attempt (another store instance: another process) fences the first.
    let newer = checkpoint_store(&bucket).acquire_attempt().await?;
    assert!(newer > attempt);
    let mut stale = full_manifest(&plan, 11);
    stale.attempt_id = attempt;
    let err = store
        .publish_manifest(&stale, &expected)
        .await
        .expect_err("fenced");
    assert!(matches!(err, CheckpointError::Fenced { .. }), "{err}");
    Ok(())
}

/// Eight writers, each with its own client, race to publish different manifests of the same
/// epoch: exactly one wins in every round, and every writer reads back the winner's manifest.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_one_of_eight_racing_publishers_wins_on_s3() -> TestResult {
    const WRITERS: u64 = 8;
    let bucket = server::server()?.create_bucket("race")?;
    let plan = plan();
    let setup = checkpoint_store(&bucket);
    let attempt = setup.acquire_attempt().await?;
    for epoch in 1..=5 {
        let mut base = full_manifest(&plan, epoch);
        base.attempt_id = attempt;
        write_segments(&setup, &base).await?;
        let racers: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let store = checkpoint_store(&bucket);
                let mut m = base.clone();
                m.created_at_ms += writer;
                let expected = ExpectedCheckpoint::from_plan(&plan);
                tokio::spawn(async move {
                    let outcome = store.publish_manifest(&m, &expected).await;
                    (writer, outcome)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for racer in racers {
            let (writer, outcome) = racer.await?;
            match outcome {
                Ok(PublishOutcome::Published) => winners.push(writer),
                Err(CheckpointError::Conflict { .. }) => {}
                other => panic!("epoch {epoch}, writer {writer}: {other:?}"),
            }
        }
        assert_eq!(winners.len(), 1, "epoch {epoch}: winners {winners:?}");
        let published = setup.read_manifest(Epoch(epoch)).await?;
        assert_eq!(published.created_at_ms, base.created_at_ms + winners[0]);
    }
    Ok(())
}

/// Eight runs claiming an attempt at once each get a number of their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_attempt_claims_get_distinct_numbers_on_s3() -> TestResult {
    let bucket = server::server()?.create_bucket("attempts")?;
    let claims: Vec<_> = (0..8)
        .map(|_| {
            let store = checkpoint_store(&bucket);
            tokio::spawn(async move { store.acquire_attempt().await })
        })
        .collect();
    let mut numbers = BTreeSet::new();
    for claim in claims {
        assert!(numbers.insert(claim.await??), "a number claimed twice");
    }
    assert_eq!(numbers.len(), 8);
    Ok(())
}
