//! Step 4 of an attempt: every task's state, restored from the chosen epoch before any task
//! runs. All tasks restore at once, each on its own tokio task (decoding and loading use the
//! blocking pool). Keyed state goes into the task's engine (its redb file, or its shards in
//! Redis); the images of operators that
//! keep their state in memory are decoded for the operators to take when they are created.

use super::TaskKey;
use super::fence::CheckpointWiring;
use crate::checkpoint::damage;
use crate::checkpoint::failpoint;
use crate::checkpoint::recovery::RestorePlan;
use crate::error::{Error, Result};
use crate::task_state::{StatePlacement, TaskState};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use tokio::task::JoinSet;
use weir_api::{OperatorId, StateRows, StateShardId};
use weir_plan::{PartitionedPlan, PlanVertex};
use weir_state::SegmentDescriptor;

/// The restored images of one task's in-memory operators, by operator.
pub(super) type TaskImages = HashMap<OperatorId, Arc<Vec<StateRows>>>;

/// The state of every task that starts, restored.
pub(super) struct RestoredTasks {
    /// Each task's keyed state (empty when there was nothing to restore).
    pub(super) states: HashMap<TaskKey, Arc<TaskState>>,
    /// The decoded images of each task's in-memory operators.
    pub(super) images: HashMap<TaskKey, TaskImages>,
}

/// The segments every task restores from `restore`.
pub(super) fn segments_to_restore(
    plan: &PartitionedPlan,
    restore: Option<&RestorePlan>,
) -> Result<HashMap<TaskKey, Vec<SegmentDescriptor>>> {
    let mut to_restore = HashMap::new();
    if let Some(r) = restore {
        for vertex in &plan.vertices {
            for (subtask, segments) in r.segments_of(vertex)?.into_iter().enumerate() {
                if !segments.is_empty() {
                    to_restore.insert(TaskKey::new(&vertex.vertex_id, subtask as u32), segments);
                }
            }
        }
    }
    Ok(to_restore)
}

/// Opens the state of every task that starts and restores into it the segments
/// `to_restore` holds for it (what a task that never starts holds is not read). A restore that fails names the damaged segments when the
/// checkpoint store finds any.
pub(super) async fn restore_tasks(
    plan: &PartitionedPlan,
    placement: &StatePlacement,
    never_started: &HashSet<TaskKey>,
    mut to_restore: HashMap<TaskKey, Vec<SegmentDescriptor>>,
    wiring: Option<&CheckpointWiring>,
) -> Result<RestoredTasks> {
    let mut states = HashMap::new();
    let mut restores = JoinSet::new();
    // Operators the job renamed restore the state of their old id.
    let renames = Arc::new(
        wiring
            .and_then(|w| w.restore.as_ref())
            .map(|r| r.renames())
            .unwrap_or_default(),
    );
    for vertex in &plan.vertices {
        for subtask in 0..vertex.parallelism {
            let key = TaskKey::new(&vertex.vertex_id, subtask);
            if never_started.contains(&key) {
                continue;
            }
            let owned: Vec<(OperatorId, StateShardId)> = owned_shards(vertex, subtask)
                .into_iter()
                .flat_map(|shard| {
                    vertex
                        .chain
                        .iter()
                        .map(move |node| (node.operator_id.clone(), shard))
                })
                .collect();
            let task_state = TaskState::new(
                placement.clone(),
                vertex.tasks[subtask as usize].clone(),
                owned,
                vertex.shards.is_none() && vertex.parallelism > 1,
            );
            if let Some(wiring) = wiring
                && let Some(segments) = to_restore.remove(&key)
            {
                let state = task_state.clone();
                let store = wiring.setup.segments.clone();
                let label = format!("{}[{subtask}/{}]", vertex.vertex_id, vertex.parallelism);
                let owned = owned_shards(vertex, subtask);
                let key = key.clone();
                let renames = Arc::clone(&renames);
                restores.spawn(async move {
                    match restore_task(&state, &segments, &store, &owned, &renames).await {
                        Ok(images) => Ok((key, images)),
                        Err(source) => Err((
                            segments,
                            Error::Task {
                                task: label,
                                source,
                            },
                        )),
                    }
                });
            }
            states.insert(key, task_state);
        }
    }
    let mut images = HashMap::new();
    while let Some(joined) = restores.join_next().await {
        let joined = joined.map_err(|e| Error::Panic {
            task: "restore".into(),
            message: e.to_string(),
        })?;
        let (key, task_images) = match joined {
            Ok(done) => done,
            Err((segments, error)) => {
                return Err(match wiring {
                    Some(
                        w @ CheckpointWiring {
                            restore: Some(r), ..
                        },
                    ) => {
                        damage::explain(
                            &w.config,
                            &w.setup.store,
                            &w.setup.expected,
                            r,
                            &segments,
                            error,
                        )
                        .await
                    }
                    _ => error,
                });
            }
        };
        images.insert(key, task_images);
        if images.len() == 1 && !restores.is_empty() {
            failpoint("mid-restore");
        }
    }
    Ok(RestoredTasks { states, images })
}

/// Restores one task: keyed-state segments into its redb file, image segments decoded (only the
/// rows of `owned` shards) for its operators; the segments of an operator in `renames` (old ->
/// new) go to its new id.
async fn restore_task(
    state: &TaskState,
    segments: &[SegmentDescriptor],
    store: &weir_state::SegmentStore,
    owned: &[StateShardId],
    renames: &HashMap<OperatorId, OperatorId>,
) -> weir_api::Result<TaskImages> {
    let (image, keyed): (Vec<SegmentDescriptor>, Vec<SegmentDescriptor>) =
        segments.iter().cloned().partition(|d| d.is_image());
    if !keyed.is_empty() {
        state.restore(&keyed, store, renames).await?;
    }
    let mut by_operator: BTreeMap<OperatorId, Vec<SegmentDescriptor>> = BTreeMap::new();
    for d in image {
        let operator = renames.get(&d.operator).unwrap_or(&d.operator).clone();
        by_operator.entry(operator).or_default().push(d);
    }
    let mut images = HashMap::new();
    for (operator, segments) in by_operator {
        let rows = store.read_image(&segments, owned).await?;
        images.insert(operator, Arc::new(rows));
    }
    Ok(images)
}

/// The state shards subtask `subtask` of `vertex` owns (shard 0 when the vertex is not keyed).
fn owned_shards(vertex: &PlanVertex, subtask: u32) -> Vec<StateShardId> {
    match &vertex.shards {
        Some(shards) => shards
            .owners
            .iter()
            .filter(|r| r.subtask == subtask)
            .flat_map(|r| r.first_shard..=r.last_shard)
            .map(StateShardId)
            .collect(),
        None => vec![StateShardId(0)],
    }
}
