//! Step 3 of an attempt: assign each source's splits to its subtasks (restored cursors on a
//! restore) and find the tasks that never start: source subtasks without splits, and tasks
//! whose every input comes from tasks that never start, unless they have state to restore.

use super::TaskKey;
use crate::checkpoint::recovery::{RestorePlan, SplitResume};
use crate::error::Result;
use crate::event_time::SourceAlignment;
use crate::prepare::{PreparedJob, PreparedNode};
use crate::split_assignment::{assign_splits, attempt_splits, waits_for_discovered_splits};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use weir_api::{OperatorId, SourceSplit, VertexId};
use weir_plan::PartitionedPlan;
use weir_state::SegmentDescriptor;

/// The splits each source subtask reads in this attempt.
pub(super) struct SplitAssignment {
    /// Every split each source operator lists in this attempt.
    pub(super) listed: HashMap<OperatorId, Vec<SourceSplit>>,
    /// Each source vertex's splits, per subtask, with where to resume each.
    per_subtask: HashMap<VertexId, Vec<Vec<(SourceSplit, SplitResume)>>>,
    /// The split ids each source operator knows (listed now or finished before the restored
    /// epoch): a discovered split is new only when it is not among them.
    known: HashMap<OperatorId, Arc<HashSet<String>>>,
    /// Source vertices that discover splits while they run.
    discovering: HashSet<VertexId>,
}

impl SplitAssignment {
    /// Lists every source's splits (again, on a restore: a source that discovers splits may
    /// have found some in an earlier attempt of this run) and deals them out; a restore gives
    /// each split back to the subtask that owns its recorded cursor.
    pub(super) async fn of(
        job: &PreparedJob,
        restore: Option<&RestorePlan>,
    ) -> Result<SplitAssignment> {
        let plan = job.partitioned();
        let listed = attempt_splits(job, restore.is_some()).await?;
        let mut per_subtask = HashMap::new();
        let mut known = HashMap::new();
        let mut discovering = HashSet::new();
        for vertex in &plan.vertices {
            let operator = &vertex.chain[0].operator_id;
            let Some(all) = listed.get(operator) else {
                continue;
            };
            // A source read as one stream is read by its first subtask, whole and in order.
            let readers = if job.reads_as_one_stream(operator) {
                1
            } else {
                vertex.parallelism
            };
            let mut splits = match restore {
                Some(r) => r.splits_for(operator, all, readers)?,
                None => assign_splits(all.clone(), readers),
            };
            splits.resize(vertex.parallelism as usize, Vec::new());
            per_subtask.insert(vertex.vertex_id.clone(), splits);
            let mut ids: HashSet<String> = all.iter().map(|s| s.id.clone()).collect();
            if let Some(before) = restore.and_then(|r| r.finished_splits().remove(operator)) {
                ids.extend(before);
            }
            known.insert(operator.clone(), Arc::new(ids));
            if let Some(PreparedNode::Source(source)) = job.nodes.get(operator)
                && waits_for_discovered_splits(source.as_ref())
            {
                discovering.insert(vertex.vertex_id.clone());
            }
        }
        Ok(SplitAssignment {
            listed,
            per_subtask,
            known,
            discovering,
        })
    }

    /// The splits subtask `subtask` of source vertex `vertex` reads (none for other vertices).
    pub(super) fn of_subtask(
        &self,
        vertex: &VertexId,
        subtask: u32,
    ) -> Vec<(SourceSplit, SplitResume)> {
        self.per_subtask
            .get(vertex)
            .and_then(|s| s.get(subtask as usize))
            .cloned()
            .unwrap_or_default()
    }

    /// The split ids `operator` knows.
    pub(super) fn known(&self, operator: &OperatorId) -> Arc<HashSet<String>> {
        self.known.get(operator).cloned().unwrap_or_default()
    }

    /// The tasks that never start. Source subtasks without splits have nothing to read, and
    /// their channels start out ended: waiting for them would make how far the watermark got
    /// when a row arrives depend on how fast idle tasks start, not on the input. A subtask of
    /// a source that discovers splits runs even without splits: it may be the one to read a
    /// split found later. Downstream the same (vertices come in topological order): a task
    /// whose every input comes from a task that never runs has nothing to read either, and
    /// started it would hold the watermark of its downstream back until it got round to
    /// ending. A task with state to restore always runs.
    pub(super) fn never_started(
        &self,
        plan: &PartitionedPlan,
        to_restore: &HashMap<TaskKey, Vec<SegmentDescriptor>>,
    ) -> HashSet<TaskKey> {
        let mut never: HashSet<TaskKey> = self
            .per_subtask
            .iter()
            .filter(|(vertex, _)| !self.discovering.contains(*vertex))
            .flat_map(|(vertex, per_subtask)| {
                per_subtask
                    .iter()
                    .enumerate()
                    .filter(|(_, splits)| splits.is_empty())
                    .map(|(subtask, _)| TaskKey::new(vertex, subtask as u32))
            })
            .collect();
        for vertex in &plan.vertices {
            if self.per_subtask.contains_key(&vertex.vertex_id) {
                continue;
            }
            for subtask in 0..vertex.parallelism {
                let inputs = plan.input_channels(&vertex.vertex_id, subtask);
                let idle = !inputs.is_empty()
                    && inputs.iter().all(|(edge, ch)| {
                        never.contains(&TaskKey::new(&edge.from_vertex, ch.upstream.0))
                    });
                let key = TaskKey::new(&vertex.vertex_id, subtask);
                if idle && !to_restore.contains_key(&key) {
                    never.insert(key);
                }
            }
        }
        never
    }
}

/// Watermark alignment between the subtasks of each source that bounds the drift of a
/// watermark some operator reads; subtasks that never start hold nobody back.
pub(super) fn source_alignments(
    job: &PreparedJob,
    never_started: &HashSet<TaskKey>,
) -> HashMap<VertexId, Arc<SourceAlignment>> {
    job.partitioned()
        .vertices
        .iter()
        .filter_map(|v| {
            let drift = v.chain[0].watermark.as_ref()?.max_drift?;
            if !job.watermark_is_read(&v.chain[0].operator_id) {
                return None;
            }
            let running: Vec<bool> = (0..v.parallelism)
                .map(|s| !never_started.contains(&TaskKey::new(&v.vertex_id, s)))
                .collect();
            Some((
                v.vertex_id.clone(),
                Arc::new(SourceAlignment::new(drift, &running)),
            ))
        })
        .collect()
}
