//! Step 1 of an attempt, with checkpoints: fence older attempts, choose the epoch to restore
//! (`checkpoint/recovery.rs` does both), record what the restore did in the run's summary, and
//! open the channels between the coordinator and the tasks.

use crate::checkpoint::coordinator::{SinkHandle, update};
use crate::checkpoint::recovery::{self, AttemptSetup, RestorePlan};
use crate::checkpoint::{CheckpointConfig, RestoreFrom, TaskCheckpointing, TaskReport, Trigger};
use crate::error::Result;
use crate::run_context::RunContext;
use std::collections::BTreeMap;
use tokio::sync::{mpsc, watch};
use tracing::Instrument;
use weir_api::OperatorId;
use weir_checkpoint::ExpectedCheckpoint;
use weir_plan::PlanVertex;

/// How an attempt with checkpoints is wired: its setup, the epoch it restores, and both ends of
/// the channels between the coordinator and the tasks.
pub(super) struct CheckpointWiring {
    pub(super) config: CheckpointConfig,
    pub(super) setup: AttemptSetup,
    /// The epoch this attempt restores, if any.
    pub(super) restore: Option<RestorePlan>,
    /// The coordinator's end of the triggers to the sources.
    pub(super) trigger: watch::Sender<Option<Trigger>>,
    /// The coordinator's end of the tasks' reports.
    pub(super) reports: mpsc::UnboundedReceiver<TaskReport>,
    /// The tasks' end of the triggers.
    triggers: watch::Receiver<Option<Trigger>>,
    /// The tasks' end of the reports.
    report_to: mpsc::UnboundedSender<TaskReport>,
}

impl CheckpointWiring {
    /// What one task of `vertex` needs to take part in this attempt's epochs.
    pub(super) fn for_task(&self, vertex: &PlanVertex) -> TaskCheckpointing {
        TaskCheckpointing {
            attempt: self.setup.attempt,
            namespace: self.setup.store.namespace().to_owned(),
            segments: self.setup.segments.clone(),
            shards: vertex.shards.clone(),
            reports: self.report_to.clone(),
            trigger: self.triggers.clone(),
            store: self.setup.store.clone(),
        }
    }
}

/// Fences older attempts and chooses what to restore; `None` when the job takes no
/// checkpoints.
pub(super) async fn begin(
    run: &RunContext,
    restore: Option<&RestoreFrom>,
    sinks: &BTreeMap<OperatorId, SinkHandle>,
) -> Result<Option<CheckpointWiring>> {
    let Some(config) = &run.config else {
        return Ok(None);
    };
    let plan = run.job.partitioned();
    // One span over the restore: the attempt and the epoch are recorded in it once known.
    let span = tracing::info_span!(
        "restore",
        job = %plan.job_id,
        attempt = tracing::field::Empty,
        epoch = tracing::field::Empty,
    );
    let expected = ExpectedCheckpoint::from_plan(plan).with_evolution(
        run.job.profiles(),
        run.options.evolution.clone(),
        run.job.semantic_mode == weir_api::SemanticMode::StrictExactlyOnce,
    );
    let setup = recovery::begin_attempt(
        plan,
        expected,
        config,
        restore,
        sinks,
        run.options.accept_duplicates,
    )
    .instrument(span)
    .await?;
    if let Some(s) = &run.summary {
        let report = &setup.report;
        update(s, |s| {
            s.attempt = setup.attempt.0;
            // Attempt numbers start at 1: a higher one was claimed past an older attempt,
            // which it fenced.
            s.fenced_older_attempts += u64::from(setup.attempt.0 > 1);
            s.restored_from = setup.restored.as_ref().map(|m| m.epoch.0);
            s.restored_from_copy |= report.from_copy;
            s.passed_over_epochs
                .extend(report.passed_over.iter().map(|e| e.0));
            s.withdrawn_files.extend(report.withdrawn.iter().cloned());
            s.duplicates_accepted |= report.duplicates_accepted;
        });
    }
    let (trigger, triggers) = watch::channel(None);
    let (report_to, reports) = mpsc::unbounded_channel();
    Ok(Some(CheckpointWiring {
        config: config.clone(),
        restore: setup
            .restored
            .clone()
            .map(|m| RestorePlan::new(m, setup.evolution.as_ref())),
        setup,
        trigger,
        reports,
        triggers,
        report_to,
    }))
}
