//! Validation of a manifest: on its own (one entry per task, segment and split; every segment in
//! its epoch directory), against the plan that publishes it (the exact checkpoint ACK set, the
//! plan fingerprint, shard counts, input channels, source and sink operators), and against a
//! plan that restores it, possibly at another parallelism (a rescale: the same logical
//! fingerprint, a manifest complete for its own parallelism).

use crate::error::{CheckpointError, CheckpointResult};
use crate::layout;
use crate::manifest::{AttemptId, EpochKind, EpochManifest, MANIFEST_FORMAT_VERSION};
use crate::problem::ManifestProblem;
use std::collections::{BTreeMap, BTreeSet};
use weir_api::{
    ChannelId, EdgeId, Epoch, JobId, OperatorId, PipelineId, SubtaskIndex, TaskId, VertexId,
};
use weir_plan::evolution::{EvolutionActions, EvolutionReport, OperatorProfile, compare};
use weir_plan::{NodeKind, PartitionedPlan, Plan, ShardAssignment};
use weir_state::segment::overlapping_segments;
use weir_state::{STATE_FORMAT_VERSION, SegmentDescriptor};

/// What the plan expects of a vertex.
#[derive(Debug, Clone)]
struct ExpectedVertex {
    /// The chain's head operator.
    head: Option<OperatorId>,
    parallelism: u32,
    operators: BTreeSet<OperatorId>,
    /// `stateShardCount` and the owner subtask of every shard, for keyed vertices.
    shards: Option<(u32, Vec<u32>)>,
    /// The input channels of every subtask.
    inputs: Vec<BTreeSet<ChannelId>>,
}

/// What a complete checkpoint of one [`PartitionedPlan`] must contain: built once per plan,
/// used to validate every manifest before it is published and before it is restored.
#[derive(Debug, Clone)]
pub struct ExpectedCheckpoint {
    job_id: JobId,
    pipeline_id: PipelineId,
    plan_fingerprint: String,
    logical_fingerprint: String,
    tasks: Vec<TaskId>,
    vertices: BTreeMap<VertexId, ExpectedVertex>,
    /// Every operator with its vertex and kind.
    operators: BTreeMap<OperatorId, (VertexId, NodeKind)>,
    /// The upstream vertex of every edge.
    edge_sources: BTreeMap<EdgeId, VertexId>,
    /// How the job may restore a checkpoint of a changed version of itself.
    evolution: Evolution,
}

/// The job's side of the rules of changing a job: its operators' profiles (written into its
/// manifests), what the user allows, and whether the job is exactly-once.
#[derive(Debug, Clone, Default)]
struct Evolution {
    profiles: Vec<OperatorProfile>,
    actions: EvolutionActions,
    exactly_once: bool,
}

impl ExpectedCheckpoint {
    /// Everything a checkpoint of `plan` must contain: its `checkpoint_ack_set` (one task per
    /// subtask of every vertex, in vertex order), its fingerprint, the shards of keyed vertices
    /// and the input channels of every subtask.
    pub fn from_plan(plan: &PartitionedPlan) -> Self {
        let mut vertices = BTreeMap::new();
        let mut operators = BTreeMap::new();
        for v in &plan.vertices {
            for node in &v.chain {
                operators.insert(node.operator_id.clone(), (v.vertex_id.clone(), node.kind));
            }
            let inputs = (0..v.parallelism)
                .map(|s| {
                    plan.input_channels(&v.vertex_id, s)
                        .into_iter()
                        .map(|(_, c)| c.clone())
                        .collect()
                })
                .collect();
            let expected = ExpectedVertex {
                head: v.chain.first().map(|n| n.operator_id.clone()),
                parallelism: v.parallelism,
                operators: v.chain.iter().map(|n| n.operator_id.clone()).collect(),
                shards: v
                    .shards
                    .as_ref()
                    .map(|s| (s.state_shard_count, s.owner_table())),
                inputs,
            };
            vertices.insert(v.vertex_id.clone(), expected);
        }
        Self {
            job_id: plan.job_id.clone(),
            pipeline_id: plan.pipeline_id.clone(),
            plan_fingerprint: plan.fingerprint(),
            logical_fingerprint: plan.logical_fingerprint(),
            tasks: plan.checkpoint_ack_set.clone(),
            vertices,
            operators,
            edge_sources: plan
                .edges
                .iter()
                .map(|e| (e.edge_id.clone(), e.from_vertex.clone()))
                .collect(),
            evolution: Evolution::default(),
        }
    }

    /// The same, for a job whose operators have `profiles` (recorded in every manifest it
    /// publishes), restoring with `actions` under the rules of changing a job
    /// ([`ExpectedCheckpoint::evolution_report`]); `exactly_once` when its semantic mode is.
    pub fn with_evolution(
        mut self,
        profiles: Vec<OperatorProfile>,
        actions: EvolutionActions,
        exactly_once: bool,
    ) -> Self {
        self.evolution = Evolution {
            profiles,
            actions,
            exactly_once,
        };
        self
    }

    /// The verdict per operator on restoring `manifest` into this job, when the rules of
    /// changing a job decide the restore: the job's logic differs from the checkpoint's. `None`
    /// when it restores the same logic (whole, whatever the actions: a restarted job restores
    /// its own checkpoints as they are), or when either side has no profiles (a manifest
    /// written before they existed restores only into the same logic).
    pub fn evolution_report(&self, manifest: &EpochManifest) -> Option<EvolutionReport> {
        let e = &self.evolution;
        if manifest.logical_fingerprint == self.logical_fingerprint
            || manifest.operators.is_empty()
            || e.profiles.is_empty()
        {
            return None;
        }
        Some(compare(
            &manifest.operators,
            &e.profiles,
            &e.actions,
            e.exactly_once,
        ))
    }

    /// The plan's fingerprint.
    pub fn plan_fingerprint(&self) -> &str {
        &self.plan_fingerprint
    }

    /// The plan's logical fingerprint (`PartitionedPlan::logical_fingerprint`).
    pub fn logical_fingerprint(&self) -> &str {
        &self.logical_fingerprint
    }

    /// The tasks that must each have exactly one snapshot.
    pub fn tasks(&self) -> &[TaskId] {
        &self.tasks
    }

    /// A manifest of this plan with no snapshots yet: identity, fingerprint, shard counts and
    /// versions filled in, kind checkpoint, times 0, an empty checksum. The coordinator adds
    /// one [`TaskSnapshot`](crate::TaskSnapshot) per task, the source and sink entries and the
    /// times, then publishes it.
    pub fn manifest_template(
        &self,
        namespace: impl Into<String>,
        epoch: Epoch,
        attempt: AttemptId,
    ) -> EpochManifest {
        EpochManifest {
            format_version: MANIFEST_FORMAT_VERSION,
            namespace: namespace.into(),
            epoch,
            job_id: self.job_id.clone(),
            pipeline_id: self.pipeline_id.clone(),
            plan_fingerprint: self.plan_fingerprint.clone(),
            logical_fingerprint: self.logical_fingerprint.clone(),
            kind: EpochKind::Checkpoint,
            attempt_id: attempt,
            state_format_version: STATE_FORMAT_VERSION,
            state_shard_counts: self.shard_counts(),
            operators: self.evolution.profiles.clone(),
            task_snapshots: Vec::new(),
            source_offsets: Vec::new(),
            source_enumerator_snapshots: Vec::new(),
            sink_transactions: Vec::new(),
            created_at_ms: 0,
            durable_at_ms: 0,
            checksum: String::new(),
        }
    }

    fn shard_counts(&self) -> BTreeMap<VertexId, u32> {
        self.vertices
            .iter()
            .filter_map(|(id, v)| v.shards.as_ref().map(|(count, _)| (id.clone(), *count)))
            .collect()
    }

    /// Every problem of `manifest` on its own ([`structural_problems`]) and against this plan:
    /// whether it is a complete checkpoint *of this plan*, which is what publishing asks.
    pub fn problems(&self, manifest: &EpochManifest) -> Vec<ManifestProblem> {
        let mut problems = structural_problems(manifest);
        let m = manifest;
        self.identity_problems(m, &mut problems);
        for (field, expected, found) in [
            (
                "planFingerprint",
                &self.plan_fingerprint,
                &m.plan_fingerprint,
            ),
            // Derived from the plan: a mismatch here means a writer's bug, not another plan.
            (
                "logicalFingerprint",
                &self.logical_fingerprint,
                &m.logical_fingerprint,
            ),
        ] {
            if expected != found {
                problems.push(ManifestProblem::mismatch(field, expected, found));
            }
        }
        self.shard_count_problems(m, &mut problems);
        self.task_set_problems(m, &mut problems);
        for snapshot in &m.task_snapshots {
            if let Some(vertex) = self.vertices.get(&snapshot.task.vertex) {
                let owners = vertex.shards.as_ref().map(|(c, o)| (*c, o.as_slice()));
                segment_problems(snapshot, vertex, owners, &mut problems);
                input_problems(snapshot, vertex, &mut problems);
            }
        }
        self.operator_problems(
            m,
            &|v| self.vertices.get(v).map_or(0, |x| x.parallelism),
            &mut problems,
        );
        problems
    }

    /// Refuses a manifest with any of [`ExpectedCheckpoint::problems`]; `path` names it in the
    /// error. This is the check before publishing.
    ///
    /// # Errors
    /// [`CheckpointError::Invalid`] with every problem found.
    pub fn validate(&self, manifest: &EpochManifest, path: &str) -> CheckpointResult<()> {
        invalid_if_any(path, self.problems(manifest))
    }

    /// Every reason this plan cannot restore from `manifest`; empty when it can.
    ///
    /// - Same plan fingerprint: exactly [`ExpectedCheckpoint::problems`].
    /// - Another plan fingerprint but the same logical fingerprint: the same job at another
    ///   parallelism (a rescale). Restorable when the manifest has no
    ///   [`structural_problems`]; `jobId`, `pipelineId`, `stateFormatVersion` and every
    ///   `stateShardCount` equal this plan's; and it is complete for *its own* parallelism:
    ///   the task snapshots of every vertex of this plan are subtasks `0..k` for some
    ///   `k >= 1`, without gaps, and none is of a vertex this plan does not have. Its
    ///   segments, offsets, enumerators and transactions are checked as for publication, but
    ///   against the checkpoint's parallelism `k` (shard owners are the contiguous ranges
    ///   `weir_plan::ShardAssignment::contiguous` gives at `k`). Input watermarks are not
    ///   checked: the channels were those of the old parallelism.
    /// - Another logical fingerprint, when this plan was given profiles
    ///   ([`ExpectedCheckpoint::with_evolution`]) and the manifest has them: the rules of changing
    ///   a job decide ([`ExpectedCheckpoint::evolution_report`]); each operator they refuse is a
    ///   [`ManifestProblem::Evolution`], besides structural problems and a differing `jobId`,
    ///   `pipelineId` or `stateFormatVersion`.
    /// - Another logical fingerprint otherwise: the job's logic changed. Reported in user terms, each
    ///   an incompatibility ([`ManifestProblem::is_incompatibility`]): operators in the
    ///   checkpoint that this plan lacks ([`ManifestProblem::OperatorNotInPlan`]), vertex
    ///   heads of this plan without tasks in the checkpoint
    ///   ([`ManifestProblem::OperatorNotInCheckpoint`]), differing shard counts
    ///   ([`ManifestProblem::StateShardCountChanged`]), differing `jobId`, `pipelineId` or
    ///   `stateFormatVersion`, and when none of these applies
    ///   [`ManifestProblem::LogicChanged`] with both logical fingerprints.
    pub fn restore_problems(&self, manifest: &EpochManifest) -> Vec<ManifestProblem> {
        if let Some(report) = self.evolution_report(manifest) {
            let mut problems = structural_problems(manifest);
            self.identity_problems(manifest, &mut problems);
            problems.extend(report.refusals().cloned().map(ManifestProblem::Evolution));
            return problems;
        }
        if manifest.plan_fingerprint == self.plan_fingerprint {
            self.problems(manifest)
        } else if manifest.logical_fingerprint == self.logical_fingerprint {
            self.rescale_problems(manifest)
        } else {
            self.logic_change_problems(manifest)
        }
    }

    /// Refuses a manifest this plan cannot restore from ([`ExpectedCheckpoint::restore_problems`]);
    /// `path` names it in the error.
    ///
    /// # Errors
    /// [`CheckpointError::Invalid`] with every problem found;
    /// [`CheckpointError::is_incompatible`] is true when the job's logic, ids or state format
    /// differ.
    pub fn validate_restore(&self, manifest: &EpochManifest, path: &str) -> CheckpointResult<()> {
        invalid_if_any(path, self.restore_problems(manifest))
    }

    /// `jobId`, `pipelineId` and `stateFormatVersion` mismatches.
    fn identity_problems(&self, m: &EpochManifest, out: &mut Vec<ManifestProblem>) {
        let identity = [
            ("jobId", self.job_id.to_string(), m.job_id.to_string()),
            (
                "pipelineId",
                self.pipeline_id.to_string(),
                m.pipeline_id.to_string(),
            ),
            (
                "stateFormatVersion",
                STATE_FORMAT_VERSION.to_string(),
                m.state_format_version.to_string(),
            ),
        ];
        for (field, expected, found) in identity {
            if expected != found {
                out.push(ManifestProblem::mismatch(field, expected, found));
            }
        }
    }

    /// The vertices whose `stateShardCount` differs, with this plan's and the manifest's count.
    fn shard_count_changes(&self, m: &EpochManifest) -> Vec<(VertexId, Option<u32>, Option<u32>)> {
        let counts = self.shard_counts();
        let vertices: BTreeSet<&VertexId> =
            counts.keys().chain(m.state_shard_counts.keys()).collect();
        vertices
            .into_iter()
            .map(|v| {
                (
                    v.clone(),
                    counts.get(v).copied(),
                    m.state_shard_counts.get(v).copied(),
                )
            })
            .filter(|(_, expected, found)| expected != found)
            .collect()
    }

    /// `stateShardCount.{vertex}` mismatches.
    fn shard_count_problems(&self, m: &EpochManifest, out: &mut Vec<ManifestProblem>) {
        let show = |c: Option<u32>| c.map_or("(none)".to_owned(), |c| c.to_string());
        for (v, expected, found) in self.shard_count_changes(m) {
            out.push(ManifestProblem::mismatch(
                format!("stateShardCount.{v}"),
                show(expected),
                show(found),
            ));
        }
    }

    /// [`ExpectedCheckpoint::restore_problems`] of a manifest of this job's logic at another
    /// parallelism.
    fn rescale_problems(&self, m: &EpochManifest) -> Vec<ManifestProblem> {
        let mut problems = structural_problems(m);
        self.identity_problems(m, &mut problems);
        self.shard_count_problems(m, &mut problems);
        let mut subtasks: BTreeMap<&VertexId, BTreeSet<u32>> = BTreeMap::new();
        for t in &m.task_snapshots {
            let ours = t.task.job == self.job_id && t.task.pipeline == self.pipeline_id;
            if ours && self.vertices.contains_key(&t.task.vertex) {
                subtasks
                    .entry(&t.task.vertex)
                    .or_default()
                    .insert(t.task.subtask.0);
            } else {
                problems.push(ManifestProblem::ExtraTask(t.task.clone()));
            }
        }
        // Input channels name their upstream subtask: a vertex had at least one more subtask
        // than the highest its consumers heard from, which catches a missing last subtask.
        let mut heard: BTreeMap<&VertexId, u32> = BTreeMap::new();
        for w in m.task_snapshots.iter().flat_map(|t| &t.input_watermarks) {
            if let Some(from) = self.edge_sources.get(&w.channel.edge) {
                let n = heard.entry(from).or_default();
                *n = (*n).max(w.channel.upstream.0.saturating_add(1));
            }
        }
        // The checkpoint's parallelism of every vertex: one past its highest subtask.
        let mut parallelism: BTreeMap<&VertexId, u32> = BTreeMap::new();
        let mut owners: BTreeMap<&VertexId, Vec<u32>> = BTreeMap::new();
        for (id, vertex) in &self.vertices {
            let found = subtasks.get(id);
            let k = found.and_then(|s| s.last()).map_or(0, |last| last + 1);
            let at_least = heard.get(id).copied().unwrap_or(0).max(k).max(1);
            for s in (0..at_least).filter(|s| !found.is_some_and(|f| f.contains(s))) {
                problems.push(ManifestProblem::MissingTask(TaskId {
                    job: self.job_id.clone(),
                    pipeline: self.pipeline_id.clone(),
                    vertex: id.clone(),
                    subtask: SubtaskIndex(s),
                }));
            }
            // Missing tasks are reported; the rest is checked at the parallelism they imply.
            parallelism.insert(id, at_least);
            if let Some((count, _)) = &vertex.shards {
                match ShardAssignment::contiguous(*count, at_least) {
                    Ok(a) => {
                        owners.insert(id, a.owner_table());
                    }
                    Err(message) => problems.push(ManifestProblem::entry(
                        format!("vertex {id}"),
                        format!("{at_least} subtasks in the checkpoint: {message}"),
                    )),
                }
            }
        }
        for snapshot in &m.task_snapshots {
            let id = &snapshot.task.vertex;
            if let Some(vertex) = self.vertices.get(id) {
                let shards = vertex.shards.as_ref().map(|(count, _)| *count);
                let table = owners.get(id).map(Vec::as_slice).unwrap_or_default();
                segment_problems(snapshot, vertex, shards.map(|c| (c, table)), &mut problems);
            }
        }
        self.operator_problems(
            m,
            &|v| parallelism.get(v).copied().unwrap_or(0),
            &mut problems,
        );
        problems
    }

    /// [`ExpectedCheckpoint::restore_problems`] of a manifest of another logical plan: what
    /// differs, in the user's terms.
    fn logic_change_problems(&self, m: &EpochManifest) -> Vec<ManifestProblem> {
        let mut problems = Vec::new();
        self.identity_problems(m, &mut problems);
        let identity_differs = !problems.is_empty();
        let in_checkpoint: BTreeSet<OperatorId> = m
            .task_snapshots
            .iter()
            .map(|t| OperatorId::new(t.task.vertex.as_str()))
            .chain(m.segments().map(|d| d.operator.clone()))
            .chain(m.source_offsets.iter().map(|o| o.operator.clone()))
            .chain(
                m.source_enumerator_snapshots
                    .iter()
                    .map(|e| e.operator.clone()),
            )
            .chain(m.sink_transactions.iter().map(|t| t.operator.clone()))
            .collect();
        problems.extend(
            in_checkpoint
                .into_iter()
                .filter(|op| !self.operators.contains_key(op))
                .map(ManifestProblem::OperatorNotInPlan),
        );
        let checkpoint_vertices: BTreeSet<&VertexId> =
            m.task_snapshots.iter().map(|t| &t.task.vertex).collect();
        problems.extend(
            self.vertices
                .iter()
                .filter(|(id, _)| !checkpoint_vertices.contains(id))
                .filter_map(|(_, v)| v.head.clone())
                .map(ManifestProblem::OperatorNotInCheckpoint),
        );
        // Vertices on one side only are reported as operators above.
        let in_both =
            |v: &VertexId| self.vertices.contains_key(v) && checkpoint_vertices.contains(v);
        problems.extend(
            self.shard_count_changes(m)
                .into_iter()
                .filter(|(vertex, _, _)| in_both(vertex))
                .map(
                    |(vertex, expected, found)| ManifestProblem::StateShardCountChanged {
                        vertex,
                        expected,
                        found,
                    },
                ),
        );
        if problems.is_empty() && !identity_differs {
            problems.push(ManifestProblem::LogicChanged {
                expected: self.logical_fingerprint.clone(),
                found: m.logical_fingerprint.clone(),
            });
        }
        problems
    }

    /// Missing and extra tasks (duplicates are structural).
    fn task_set_problems(&self, m: &EpochManifest, out: &mut Vec<ManifestProblem>) {
        let expected: BTreeSet<&TaskId> = self.tasks.iter().collect();
        let found: BTreeSet<&TaskId> = m.task_snapshots.iter().map(|t| &t.task).collect();
        out.extend(
            expected
                .difference(&found)
                .map(|t| ManifestProblem::MissingTask((*t).clone())),
        );
        out.extend(
            found
                .difference(&expected)
                .map(|t| ManifestProblem::ExtraTask((*t).clone())),
        );
    }

    /// Source offsets, enumerators and sink transactions name operators of the right kind and
    /// subtasks that exist at `parallelism` (of a vertex).
    fn operator_problems(
        &self,
        m: &EpochManifest,
        parallelism: &dyn Fn(&VertexId) -> u32,
        out: &mut Vec<ManifestProblem>,
    ) {
        let check = |entry: String,
                     operator: &OperatorId,
                     kind: NodeKind,
                     subtasks: &mut dyn Iterator<Item = u32>,
                     out: &mut Vec<ManifestProblem>| {
            match self.operators.get(operator) {
                Some((vertex, k)) if *k == kind => {
                    let parallelism = parallelism(vertex);
                    for s in subtasks.filter(|s| *s >= parallelism) {
                        out.push(ManifestProblem::entry(
                            &entry,
                            format!("subtask {s} does not exist (parallelism {parallelism})"),
                        ));
                    }
                }
                Some((_, k)) => out.push(ManifestProblem::entry(
                    entry,
                    format!("operator `{operator}` is a {k:?}, not a {kind:?}"),
                )),
                None => out.push(ManifestProblem::entry(
                    entry,
                    format!("operator `{operator}` is not in the plan"),
                )),
            }
        };
        for o in &m.source_offsets {
            let entry = format!("source offset ({}, {}, {})", o.operator, o.subtask, o.split);
            check(
                entry,
                &o.operator,
                NodeKind::Source,
                &mut std::iter::once(o.subtask.0),
                out,
            );
        }
        for e in &m.source_enumerator_snapshots {
            let entry = format!("source enumerator {}", e.operator);
            let mut owners = e.assigned.values().map(|s| s.0);
            check(entry, &e.operator, NodeKind::Source, &mut owners, out);
        }
        for t in &m.sink_transactions {
            let entry = format!(
                "sink transaction ({}, {}, epoch {})",
                t.operator, t.subtask, t.epoch
            );
            check(
                entry,
                &t.operator,
                NodeKind::Sink,
                &mut std::iter::once(t.subtask.0),
                out,
            );
        }
    }
}

/// Segments of one task against its vertex; `shards` is the vertex's `stateShardCount` and the
/// owner subtask of every shard, for keyed vertices: every shard a segment covers (all of an
/// image segment's range) must exist and be owned by the task's subtask.
fn segment_problems(
    snapshot: &crate::TaskSnapshot,
    vertex: &ExpectedVertex,
    shards: Option<(u32, &[u32])>,
    out: &mut Vec<ManifestProblem>,
) {
    let task = &snapshot.task;
    for d in &snapshot.segments {
        let entry = format!("segment {}", d.path);
        if d.subtask != task.subtask {
            out.push(ManifestProblem::entry(
                &entry,
                format!("written by subtask {}, listed under task {task}", d.subtask),
            ));
        }
        if !vertex.operators.contains(&d.operator) {
            out.push(ManifestProblem::entry(
                &entry,
                format!(
                    "operator `{}` is not in vertex `{}`",
                    d.operator, task.vertex
                ),
            ));
        }
        // Non-keyed vertices keep their state in shard 0 of a count the runtime picks.
        if let Some((count, owners)) = shards {
            if d.state_shard_count != count {
                out.push(ManifestProblem::entry(
                    &entry,
                    format!(
                        "stateShardCount {}, the plan has {count}",
                        d.state_shard_count
                    ),
                ));
            }
            shard_owner_problems(d, task.subtask, count, owners, &entry, out);
        }
    }
}

/// Every shard `d` covers exists among the `count` shards and is owned by `subtask`. An empty
/// range is structural ([`structural_problems`]).
fn shard_owner_problems(
    d: &SegmentDescriptor,
    subtask: SubtaskIndex,
    count: u32,
    owners: &[u32],
    entry: &str,
    out: &mut Vec<ManifestProblem>,
) {
    let range = d.shard_range();
    if range.is_empty() {
        return;
    }
    if !d.is_image() {
        match owners.get(d.shard.0 as usize) {
            None => out.push(ManifestProblem::entry(
                entry,
                format!(
                    "shard {} does not exist (stateShardCount {count})",
                    d.shard.0
                ),
            )),
            Some(&owner) if owner != subtask.0 => out.push(ManifestProblem::entry(
                entry,
                format!(
                    "shard {} is owned by subtask {owner}, not {subtask}",
                    d.shard.0
                ),
            )),
            Some(_) => {}
        }
        return;
    }
    let (first, last) = (*range.start(), *range.end());
    if last >= count || owners.len() <= last as usize {
        out.push(ManifestProblem::entry(
            entry,
            format!("shards {first}..={last} do not all exist (stateShardCount {count})"),
        ));
        return;
    }
    // Foreign shards as runs of one owner: `shards 4..=7 are owned by subtask 1`.
    let mut runs: Vec<(u32, u32, u32)> = Vec::new();
    for (shard, &owner) in (first..=last).zip(&owners[first as usize..=last as usize]) {
        if owner == subtask.0 {
            continue;
        }
        match runs.last_mut() {
            Some((_, end, o)) if *o == owner && *end + 1 == shard => *end = shard,
            _ => runs.push((shard, shard, owner)),
        }
    }
    if !runs.is_empty() {
        let runs: Vec<String> = runs
            .into_iter()
            .map(|(a, b, owner)| {
                if a == b {
                    format!("shard {a} is owned by subtask {owner}")
                } else {
                    format!("shards {a}..={b} are owned by subtask {owner}")
                }
            })
            .collect();
        out.push(ManifestProblem::entry(
            entry,
            format!(
                "covers shards {first}..={last}, but {}, not {subtask}",
                runs.join(", ")
            ),
        ));
    }
}

/// Input watermarks of one task against the input channels of its subtask in the plan.
fn input_problems(
    snapshot: &crate::TaskSnapshot,
    vertex: &ExpectedVertex,
    out: &mut Vec<ManifestProblem>,
) {
    let task = &snapshot.task;
    let Some(inputs) = vertex.inputs.get(task.subtask.0 as usize) else {
        return; // an extra task, reported already
    };
    let found: BTreeSet<&ChannelId> = snapshot
        .input_watermarks
        .iter()
        .map(|w| &w.channel)
        .collect();
    for missing in inputs.iter().filter(|c| !found.contains(c)) {
        out.push(ManifestProblem::entry(
            format!("task {task}"),
            format!("no watermark state for input channel {missing}"),
        ));
    }
    for extra in found.iter().filter(|c| !inputs.contains(c)) {
        out.push(ManifestProblem::entry(
            format!("task {task}"),
            format!("watermark state for {extra}, which is not one of its input channels"),
        ));
    }
}

/// [`CheckpointError::Invalid`] naming `path` if there is any problem.
pub(crate) fn invalid_if_any(path: &str, problems: Vec<ManifestProblem>) -> CheckpointResult<()> {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(CheckpointError::Invalid {
            path: path.to_owned(),
            problems,
        })
    }
}

/// Problems a manifest has on its own, without a plan: duplicate tasks, segments, channels,
/// splits, enumerators and sink transactions (per sink operator, subtask and epoch); segments
/// of one (operator, state) covering a common shard (two of one shard, or overlapping image
/// segment ranges) and image segments whose last shard is before their first; segment paths
/// that are not the stable state path in this manifest's epoch directory
/// (`weir_state::segment::segment_path`, or `image_segment_path` for image segments); enumerators
/// whose split sets contradict each other; sink transactions of an epoch after the manifest's.
pub fn structural_problems(m: &EpochManifest) -> Vec<ManifestProblem> {
    let mut out = Vec::new();
    let mut tasks: BTreeMap<&TaskId, usize> = BTreeMap::new();
    for t in &m.task_snapshots {
        *tasks.entry(&t.task).or_default() += 1;
    }
    out.extend(tasks.into_iter().filter(|(_, n)| *n > 1).map(|(t, count)| {
        ManifestProblem::DuplicateTask {
            task: t.clone(),
            count,
        }
    }));
    let mut paths = BTreeSet::new();
    for t in &m.task_snapshots {
        for d in &t.segments {
            let expected = d.stable_path(&m.namespace, m.epoch);
            if d.shard_range().is_empty() {
                out.push(ManifestProblem::entry(
                    format!("segment {}", d.path),
                    format!(
                        "its last shard {} is before its first shard {}",
                        d.last_shard.map_or(d.shard.0, |l| l.0),
                        d.shard.0
                    ),
                ));
            }
            if d.path != expected.as_ref() {
                out.push(ManifestProblem::entry(
                    format!("segment {}", d.path),
                    format!("its stable path in this epoch is {expected}"),
                ));
            }
            // A directory named like the manifest would collide with it on a file system.
            if d.operator.as_str() == layout::MANIFEST_FILE {
                out.push(ManifestProblem::entry(
                    format!("segment {}", d.path),
                    format!("operator id `{}` is reserved", layout::MANIFEST_FILE),
                ));
            }
            if !paths.insert(d.path.as_str()) {
                out.push(ManifestProblem::entry(
                    format!("segment {}", d.path),
                    "listed more than once",
                ));
            }
        }
        let mut channels = BTreeSet::new();
        for w in &t.input_watermarks {
            if !channels.insert(&w.channel) {
                out.push(ManifestProblem::entry(
                    format!("task {}", t.task),
                    format!("input channel {} listed more than once", w.channel),
                ));
            }
        }
    }
    // The same path twice is reported above; other overlaps would restore a shard twice.
    for (first, second) in overlapping_segments(m.segments()) {
        if first.path != second.path {
            out.push(ManifestProblem::entry(
                format!("segment {}", second.path),
                format!(
                    "covers a shard of operator `{}`, state `{}` that segment {} also covers",
                    second.operator, second.state, first.path
                ),
            ));
        }
    }
    let mut splits = BTreeMap::new();
    for o in &m.source_offsets {
        if let Some(first) = splits.insert((&o.operator, &o.split), o.subtask) {
            out.push(ManifestProblem::entry(
                format!("source offset ({}, {}, {})", o.operator, o.subtask, o.split),
                format!("split already has an offset (subtask {first})"),
            ));
        }
    }
    let mut enumerators = BTreeSet::new();
    for e in &m.source_enumerator_snapshots {
        let entry = format!("source enumerator {}", e.operator);
        if !enumerators.insert(&e.operator) {
            out.push(ManifestProblem::entry(&entry, "listed more than once"));
        }
        for split in e.assigned.keys().filter(|s| e.finished.contains(*s)) {
            out.push(ManifestProblem::entry(
                &entry,
                format!("split `{split}` is both assigned and finished"),
            ));
        }
        let undiscovered = e.assigned.keys().chain(&e.finished);
        for split in undiscovered.filter(|s| !e.discovered.contains(*s)) {
            out.push(ManifestProblem::entry(
                &entry,
                format!("split `{split}` is assigned or finished but not discovered"),
            ));
        }
    }
    let mut sinks = BTreeSet::new();
    for t in &m.sink_transactions {
        let entry = format!(
            "sink transaction ({}, {}, epoch {})",
            t.operator, t.subtask, t.epoch
        );
        if !sinks.insert((&t.operator, t.subtask, t.epoch)) {
            out.push(ManifestProblem::entry(&entry, "listed more than once"));
        }
        if t.epoch > m.epoch {
            out.push(ManifestProblem::entry(
                entry,
                format!(
                    "pre-committed in epoch {}, after this manifest's epoch {}",
                    t.epoch, m.epoch
                ),
            ));
        }
    }
    out
}
