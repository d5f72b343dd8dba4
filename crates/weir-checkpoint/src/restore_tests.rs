//! Restoring: at the same plan, at another parallelism (a rescale), refused when the job's
//! logic changed; finding savepoints by name; sink transactions of several epochs.

use crate::test_support::*;
use crate::{
    CheckpointError, EpochManifest, ExpectedCheckpoint, ManifestProblem, SinkTransaction,
    structural_problems,
};
use object_store::{ObjectStoreExt, PutPayload};
use weir_api::{Epoch, OperatorId, SubtaskIndex, TaskId, VertexId};
use weir_plan::{NodeKind, PartitionedPlan};

fn at_parallelism(p: u32) -> PartitionedPlan {
    plan_of(&SPEC.replace("parallelism: 2", &format!("parallelism: {p}")))
}

fn restore_problems(plan: &PartitionedPlan, m: &EpochManifest) -> Vec<ManifestProblem> {
    ExpectedCheckpoint::from_plan(plan).restore_problems(m)
}

fn task(vertex: &str, subtask: u32) -> TaskId {
    let plan = plan();
    TaskId {
        job: plan.job_id.clone(),
        pipeline: plan.pipeline_id.clone(),
        vertex: VertexId::new(vertex),
        subtask: SubtaskIndex(subtask),
    }
}

#[test]
fn a_checkpoint_restores_at_another_parallelism() {
    let (p2, p3) = (plan(), at_parallelism(3));
    let (e2, e3) = (
        ExpectedCheckpoint::from_plan(&p2),
        ExpectedCheckpoint::from_plan(&p3),
    );
    assert_ne!(e2.plan_fingerprint(), e3.plan_fingerprint());
    assert_eq!(e2.logical_fingerprint(), e3.logical_fingerprint());
    assert_eq!(e2.logical_fingerprint(), p2.logical_fingerprint());

    let m2 = full_manifest(&p2, 4);
    assert_eq!(m2.logical_fingerprint, p2.logical_fingerprint());
    // Publishing needs the exact plan; restoring takes the rescale.
    assert!(!e3.problems(&m2).is_empty());
    assert_eq!(e3.restore_problems(&m2), vec![]);
    e3.validate_restore(&m2, "m").expect("rescale 2 -> 3");
    // And down again, 3 -> 1.
    let m3 = full_manifest(&p3, 5);
    assert_eq!(restore_problems(&at_parallelism(1), &m3), vec![]);
    // The same plan restores exactly what it publishes.
    assert_eq!(e2.restore_problems(&m2), e2.problems(&m2));
}

#[test]
fn a_rescaled_checkpoint_must_be_complete_for_its_own_parallelism() {
    let p2 = plan();
    let p3 = at_parallelism(3);
    let complete = full_manifest(&p2, 4);
    let position = |m: &EpochManifest, t: &TaskId| {
        m.task_snapshots
            .iter()
            .position(|s| &s.task == t)
            .expect("task")
    };

    // A gap: subtask 0 of the keyed vertex is missing, subtask 1 is there.
    let mut gap = complete.clone();
    let i = position(&gap, &task("agg", 0));
    gap.task_snapshots.remove(i);
    let p = restore_problems(&p3, &gap);
    assert_eq!(p, vec![ManifestProblem::MissingTask(task("agg", 0))]);
    assert!(!p.iter().any(ManifestProblem::is_incompatibility));

    // The last source subtask is missing: its consumers heard from it.
    let mut last = complete.clone();
    let i = position(&last, &task("bids", 1));
    last.task_snapshots.remove(i);
    assert_eq!(
        restore_problems(&p3, &last),
        vec![ManifestProblem::MissingTask(task("bids", 1))]
    );

    // A vertex without any task.
    let mut none = complete.clone();
    none.task_snapshots
        .retain(|t| t.task.vertex.as_str() != "bids");
    none.source_offsets.clear();
    none.source_enumerator_snapshots.clear();
    let p = restore_problems(&p3, &none);
    assert!(
        p.contains(&ManifestProblem::MissingTask(task("bids", 0))),
        "{p:?}"
    );

    // A task of a vertex the plan does not have.
    let mut stranger = complete.clone();
    let mut extra = stranger.task_snapshots[0].clone();
    extra.task.vertex = VertexId::new("ghost");
    extra.input_watermarks.clear();
    stranger.task_snapshots.push(extra.clone());
    assert_eq!(
        restore_problems(&p3, &stranger),
        vec![ManifestProblem::ExtraTask(extra.task)]
    );

    // Identity, shard counts and structure still count.
    let mut other_job = complete.clone();
    other_job.job_id = weir_api::JobId::new("other");
    let p = restore_problems(&p3, &other_job);
    assert!(p.iter().any(ManifestProblem::is_incompatibility), "{p:?}");
    let mut shards = complete.clone();
    shards.state_shard_counts.insert(VertexId::new("agg"), 8);
    let p = restore_problems(&p3, &shards);
    assert!(
        p.iter()
            .any(|p| p.to_string().contains("stateShardCount.agg is `8`")),
        "{p:?}"
    );
    let mut twice = complete.clone();
    twice
        .sink_transactions
        .push(twice.sink_transactions[0].clone());
    let p = restore_problems(&p3, &twice);
    assert!(
        p.iter()
            .any(|p| p.to_string().contains("listed more than once")),
        "{p:?}"
    );

    // Segments are checked against the checkpoint's own shard owners (2 subtasks: 0-1, 2-3).
    let mut moved = complete.clone();
    let i = position(&moved, &task("agg", 0));
    let segment = moved.task_snapshots[i].segments[0].clone();
    let mut wrong = segment.clone();
    wrong.shard = weir_api::StateShardId(3);
    wrong.path = weir_state::segment::segment_path(
        NS,
        moved.epoch,
        &wrong.operator,
        wrong.subtask,
        wrong.shard,
        &wrong.state,
    )
    .to_string();
    moved.task_snapshots[i].segments.push(wrong);
    let p = restore_problems(&p3, &moved);
    assert!(
        p.iter().any(|p| p
            .to_string()
            .contains("shard 3 is owned by subtask 1, not 0")),
        "{p:?}"
    );

    // A sink transaction of a subtask beyond the checkpoint's parallelism.
    let mut beyond = complete.clone();
    beyond.sink_transactions[1].subtask = SubtaskIndex(2);
    let p = restore_problems(&p3, &beyond);
    assert!(
        p.iter().any(|p| p
            .to_string()
            .contains("subtask 2 does not exist (parallelism 2)")),
        "{p:?}"
    );
}

#[test]
fn a_changed_logic_is_reported_in_the_users_terms() {
    let m = full_manifest(&plan(), 4);
    let logical = plan().logical_fingerprint();

    // Only options changed: nothing more specific to say than both fingerprints.
    let options = plan_of(&SPEC.replace("auction > 0", "auction > 1"));
    let p = restore_problems(&options, &m);
    assert_eq!(
        p,
        vec![ManifestProblem::LogicChanged {
            expected: options.logical_fingerprint(),
            found: logical.clone(),
        }]
    );
    let text = p[0].to_string();
    assert!(
        text.contains("the job's logic changed (options, keys or edges)")
            && text.contains(&logical)
            && text.contains(&options.logical_fingerprint()),
        "{text}"
    );

    // An operator renamed: the old one is not in the plan, the new one not in the checkpoint.
    let renamed = plan_of(
        &SPEC
            .replace("name: agg", "name: agg2")
            .replace("input: agg", "input: agg2"),
    );
    let p = restore_problems(&renamed, &m);
    assert_eq!(
        p,
        vec![
            ManifestProblem::OperatorNotInPlan(OperatorId::new("agg")),
            ManifestProblem::OperatorNotInCheckpoint(OperatorId::new("agg2")),
        ]
    );
    assert!(p[0].to_string().contains("operator `agg`"), "{}", p[0]);
    assert!(p[1].to_string().contains("operator `agg2`"), "{}", p[1]);

    // Another shard count, at another parallelism too.
    let resharded = plan_of(
        &SPEC
            .replace("state_shards: 4", "state_shards: 8")
            .replace("parallelism: 2", "parallelism: 3"),
    );
    let p = restore_problems(&resharded, &m);
    assert_eq!(
        p,
        vec![ManifestProblem::StateShardCountChanged {
            vertex: VertexId::new("agg"),
            expected: Some(8),
            found: Some(4),
        }]
    );
    assert!(
        p[0].to_string()
            .contains("stateShardCount of vertex `agg` is 4 in the checkpoint and 8 in this plan"),
        "{}",
        p[0]
    );
    for problem in [
        ManifestProblem::LogicChanged {
            expected: String::new(),
            found: String::new(),
        },
        ManifestProblem::OperatorNotInPlan(OperatorId::new("a")),
        ManifestProblem::OperatorNotInCheckpoint(OperatorId::new("a")),
        p[0].clone(),
    ] {
        assert!(problem.is_incompatibility(), "{problem}");
    }
}

#[tokio::test]
async fn latest_durable_restores_at_another_parallelism_and_refuses_another_logic() -> TestResult {
    let (stores, _dir) = stores();
    let p2 = plan();
    for (name, store) in stores {
        checkpoint(&store, &full_manifest(&p2, 1)).await?;
        checkpoint(&store, &full_manifest(&p2, 2)).await?;
        let e3 = ExpectedCheckpoint::from_plan(&at_parallelism(3));
        let latest = store.latest_durable(&e3).await?;
        assert_eq!(
            latest.manifest.as_ref().map(|m| m.epoch),
            Some(Epoch(2)),
            "{name}"
        );
        assert!(latest.skipped.is_empty(), "{name}");
        assert_eq!(store.restorable(Epoch(1), &e3).await?.epoch, Epoch(1));

        let other = ExpectedCheckpoint::from_plan(&plan_of(
            &SPEC
                .replace("parallelism: 2", "parallelism: 3")
                .replace("state_shards: 4", "state_shards: 8"),
        ));
        let err = store
            .latest_durable(&other)
            .await
            .expect_err("another shard count");
        assert!(
            err.is_incompatible() && !err.is_unusable_manifest(),
            "{name}: {err}"
        );
        assert!(
            err.to_string().contains("/2/manifest.json")
                && err.to_string().contains("stateShardCount of vertex `agg`"),
            "{err}"
        );
        let err = store
            .restorable(Epoch(1), &other)
            .await
            .expect_err("another shard count");
        assert!(err.to_string().contains("/1/manifest.json"), "{err}");
    }
    Ok(())
}

#[tokio::test]
async fn savepoints_are_found_by_name() -> TestResult {
    let (stores, _dir) = stores();
    let plan = plan();
    for (name, store) in stores {
        assert_eq!(store.find_savepoint("v1").await?, None, "{name}");
        checkpoint(&store, &full_manifest(&plan, 1)).await?;
        checkpoint(&store, &savepoint(&plan, 2, "v1")).await?;
        checkpoint(&store, &full_manifest(&plan, 3)).await?;
        checkpoint(&store, &savepoint(&plan, 4, "v1")).await?;
        checkpoint(&store, &savepoint(&plan, 5, "v2")).await?;
        checkpoint(&store, &full_manifest(&plan, 6)).await?;
        assert_eq!(store.find_savepoint("v1").await?, Some(Epoch(4)), "{name}");
        assert_eq!(store.find_savepoint("v2").await?, Some(Epoch(5)), "{name}");
        assert_eq!(store.find_savepoint("v3").await?, None, "{name}");

        // A damaged manifest is passed over.
        store
            .object_store()
            .put(
                &store.manifest_location(Epoch(4)),
                PutPayload::from_static(b"{}"),
            )
            .await?;
        assert_eq!(store.find_savepoint("v1").await?, Some(Epoch(2)), "{name}");
    }
    Ok(())
}

#[test]
fn a_sink_subtask_may_list_transactions_of_several_epochs() -> crate::test_support::TestResult {
    let plan = plan();
    let expected = ExpectedCheckpoint::from_plan(&plan);
    let sink = operator(&plan, NodeKind::Sink);
    let mut m = full_manifest(&plan, 5);
    // Epoch 4 was aborted while the job continued: its pre-commit is subsumed by epoch 5.
    m.sink_transactions.push(SinkTransaction {
        operator: sink.clone(),
        subtask: SubtaskIndex(0),
        epoch: Epoch(4),
        pre_commit: serde_json::json!({ "staged": ["out/.staging/4-0.parquet"] }),
    });
    assert_eq!(expected.problems(&m), vec![]);
    let text = String::from_utf8(m.to_json()?)?;
    assert!(
        text.contains(r#"{"operator":"out","subtask":0,"epoch":4,"preCommit":"#),
        "{text}"
    );

    let mut twice = m.clone();
    twice.sink_transactions.push(m.sink_transactions[2].clone());
    let p = structural_problems(&twice);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(
        p[0].to_string(),
        "sink transaction (out, 0, epoch 4): listed more than once"
    );

    let mut later = m.clone();
    later.sink_transactions[2].epoch = Epoch(6);
    let err = expected
        .validate(&later, "ckpt/5/manifest.json")
        .expect_err("a transaction of a later epoch");
    assert!(
        err.to_string().contains("ckpt/5/manifest.json")
            && err
                .to_string()
                .contains("pre-committed in epoch 6, after this manifest's epoch 5"),
        "{err}"
    );
    assert!(!err.is_incompatible());
    Ok(())
}

#[test]
fn a_wrong_logical_fingerprint_is_refused_on_publication() {
    let plan = plan();
    let mut m = full_manifest(&plan, 2);
    m.logical_fingerprint = "0".repeat(64);
    let err = ExpectedCheckpoint::from_plan(&plan)
        .validate(&m, "m")
        .expect_err("wrong logical fingerprint");
    assert!(
        matches!(&err, CheckpointError::Invalid { problems, .. }
            if problems.iter().any(|p| p.to_string().starts_with("logicalFingerprint is"))),
        "{err}"
    );
}
