//! The epoch log over real object stores, and what recovery reports from it.

use crate::test_support::*;
use crate::{
    CheckpointError, EpochLog, EpochRecord, EpochState, ExpectedCheckpoint, RecordOutcome,
};
use object_store::{ObjectStoreExt, PutPayload};
use weir_api::Epoch;

#[tokio::test]
async fn the_epoch_log_persists_transitions_and_refuses_illegal_ones() -> TestResult {
    let (stores, _dir) = stores();
    for (name, store) in stores {
        let log: EpochLog = store.epoch_log();
        assert_eq!(log.read().await?.next_epoch(), Epoch(0));
        let at = |e, s| EpochRecord::new(Epoch(e), s, 1_000 + e);
        for (e, s) in [
            (1, EpochState::Created),
            (1, EpochState::Durable),
            (1, EpochState::Committed),
            (2, EpochState::Created),
            (2, EpochState::Durable),
            (3, EpochState::Created),
        ] {
            assert_eq!(
                log.record(&at(e, s)).await?,
                RecordOutcome::Written,
                "{name}"
            );
        }
        let aborted = at(3, EpochState::Aborted).with_reason("task agg/1 failed");
        assert_eq!(log.record(&aborted).await?, RecordOutcome::Written);
        // A retry of a recorded transition keeps the first record.
        assert_eq!(
            log.record(&EpochRecord::new(Epoch(1), EpochState::Durable, 5))
                .await?,
            RecordOutcome::AlreadyRecorded(at(1, EpochState::Durable))
        );
        for (e, s) in [
            (2, EpochState::Aborted),   // durable epochs are never aborted
            (3, EpochState::Durable),   // nothing follows ABORTED
            (4, EpochState::Committed), // COMMITTED needs DURABLE
            (4, EpochState::Aligning),  // not persisted
        ] {
            let err = log.record(&at(e, s)).await.expect_err("illegal");
            assert!(
                matches!(err, CheckpointError::IllegalTransition { to, .. } if to == s),
                "{name}: {err}"
            );
        }
        let view = log.read().await?;
        assert_eq!(
            view.states().into_iter().collect::<Vec<_>>(),
            vec![
                (Epoch(1), EpochState::Committed),
                (Epoch(2), EpochState::Durable),
                (Epoch(3), EpochState::Aborted)
            ],
            "{name}"
        );
        assert_eq!(
            view.records()[&Epoch(3)][1].reason.as_deref(),
            Some("task agg/1 failed")
        );
        assert_eq!(view.uncommitted_durable(), vec![Epoch(2)]);
        assert_eq!(view.next_epoch(), Epoch(4));
        assert!(view.conflicts().is_empty());

        // A record whose content contradicts its name is corrupt, named by its path.
        let location = log.record_location(Epoch(9), EpochState::Created);
        let lie = serde_json::to_vec(&at(8, EpochState::Created))?;
        store
            .object_store()
            .put(&location, PutPayload::from(lie))
            .await?;
        let err = log.read().await.expect_err("corrupt record");
        assert!(
            err.to_string().contains("log/9-CREATED.json"),
            "{name}: {err}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn skipped_manifests_carry_what_the_epoch_log_says() -> TestResult {
    let (stores, _dir) = stores();
    let plan = plan();
    for (name, store) in stores {
        checkpoint(&store, &full_manifest(&plan, 1)).await?;
        let m2 = full_manifest(&plan, 2);
        checkpoint(&store, &m2).await?;
        let log = store.epoch_log();
        log.record(&EpochRecord::new(Epoch(2), EpochState::Durable, 1))
            .await?;
        log.record(&EpochRecord::new(Epoch(2), EpochState::Committed, 2))
            .await?;
        let first = m2.segments().next().expect("segment").path.clone();
        store
            .object_store()
            .delete(&full_path(&store, &first))
            .await?;

        let latest = store
            .latest_durable(&ExpectedCheckpoint::from_plan(&plan))
            .await?;
        assert_eq!(
            latest.manifest.as_ref().map(|m| m.epoch),
            Some(Epoch(1)),
            "{name}"
        );
        assert_eq!(latest.skipped[0].log_state, Some(EpochState::Committed));
        assert!(latest.may_repeat_output());
    }
    Ok(())
}
