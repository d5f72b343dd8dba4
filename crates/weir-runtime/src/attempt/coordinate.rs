//! Step 6 of an attempt, with checkpoints: its epoch coordinator (`checkpoint/coordinator.rs`),
//! which knows the tasks that never start, the splits listed and the sinks that commit by
//! epoch.

use super::TaskKey;
use super::fence::CheckpointWiring;
use crate::checkpoint::coordinator::{Coordinator, SinkHandle, task_heads};
use crate::prepare::{PreparedJob, PreparedNode};
use crate::run_context::RunContext;
use std::collections::{BTreeMap, HashMap, HashSet};
use weir_api::{OperatorId, SinkCapability, SourceSplit, TaskId};
use weir_checkpoint::{InputWatermark, TaskSnapshot};
use weir_plan::NodeKind;

/// The coordinator of the attempt `wiring` belongs to.
pub(super) fn coordinator(
    run: &RunContext,
    wiring: CheckpointWiring,
    never_started: &HashSet<TaskKey>,
    listed: &HashMap<OperatorId, Vec<SourceSplit>>,
    sinks: BTreeMap<OperatorId, SinkHandle>,
) -> Coordinator {
    let plan = run.job.partitioned();
    // Tasks that never run take part in every epoch with an empty snapshot.
    let never_started: HashMap<TaskId, TaskSnapshot> = plan
        .vertices
        .iter()
        .flat_map(|v| {
            (0..v.parallelism)
                .filter(|s| never_started.contains(&TaskKey::new(&v.vertex_id, *s)))
                .map(|s| {
                    let task = v.tasks[s as usize].clone();
                    let input_watermarks = plan
                        .input_channels(&v.vertex_id, s)
                        .into_iter()
                        .map(|(_, ch)| InputWatermark {
                            channel: ch.clone(),
                            watermark: None,
                            idle: false,
                            finished: true,
                        })
                        .collect();
                    (
                        task.clone(),
                        TaskSnapshot {
                            task,
                            segments: Vec::new(),
                            input_watermarks,
                        },
                    )
                })
        })
        .collect();
    let live_sources = plan
        .vertices
        .iter()
        .filter(|v| v.chain[0].kind == NodeKind::Source)
        .flat_map(|v| v.tasks.iter().cloned())
        .filter(|t| !never_started.contains_key(t))
        .collect();
    let discovered = listed
        .iter()
        .map(|(op, splits)| (op.clone(), splits.iter().map(|s| s.id.clone()).collect()))
        .collect();
    let CheckpointWiring {
        config,
        setup,
        restore,
        trigger,
        reports,
        ..
    } = wiring;
    Coordinator {
        config,
        store: setup.store,
        expected: setup.expected,
        attempt: setup.attempt,
        job_id: plan.job_id.clone(),
        next_epoch: setup.next_epoch,
        trigger,
        reports,
        live_sources,
        finished: never_started,
        discovered,
        finished_before: restore
            .as_ref()
            .map(|r| r.finished_splits())
            .unwrap_or_default(),
        sinks,
        pending: BTreeMap::new(),
        requests: run.requests.clone(),
        summary: run.summary.clone().unwrap_or_default(),
        heads: task_heads(plan),
    }
}

/// The sink operators whose writers run in epoch mode (they stage and commit by epoch), with
/// their parallelism.
pub(super) fn epoch_sinks(job: &PreparedJob) -> BTreeMap<OperatorId, SinkHandle> {
    if job.plans.checkpoint.is_none() {
        return BTreeMap::new();
    }
    job.partitioned()
        .vertices
        .iter()
        .flat_map(|v| v.chain.iter().map(move |n| (n, v.parallelism)))
        .filter_map(
            |(node, parallelism)| match job.nodes.get(&node.operator_id) {
                Some(PreparedNode::Sink(sink)) if commits_by_epoch(sink.as_ref()) => Some((
                    node.operator_id.clone(),
                    SinkHandle {
                        sink: sink.clone(),
                        parallelism,
                        lane: job.lane.clone(),
                    },
                )),
                _ => None,
            },
        )
        .collect()
}

/// Whether a sink stages or pre-commits by epoch.
pub(super) fn commits_by_epoch(sink: &dyn weir_api::PreparedSink) -> bool {
    sink.capabilities().iter().any(|c| {
        matches!(
            c,
            SinkCapability::StagedAtomicCommit | SinkCapability::TwoPhaseCommit
        )
    })
}
