//! Validation of a manifest: on its own (one entry per task, segment and split; every segment in
//! its epoch directory) and against the plan it must restore (the exact checkpoint ACK set, the
//! plan fingerprint, shard counts, input channels, source and sink operators).

use crate::error::{CheckpointError, CheckpointResult};
use crate::layout;
use crate::manifest::{AttemptId, CheckpointKind, EpochManifest, MANIFEST_FORMAT_VERSION};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use weir_api::{ChannelId, Epoch, JobId, OperatorId, PipelineId, TaskId, VertexId};
use weir_plan::{NodeKind, PartitionedPlan, Plan};
use weir_state::STATE_FORMAT_VERSION;

/// Fields whose mismatch means the manifest belongs to another job, plan or state format:
/// recovery must be refused, not fall back to an older manifest (seed 000 §10.4).
const INCOMPATIBLE_FIELDS: [&str; 4] = [
    "jobId",
    "pipelineId",
    "planFingerprint",
    "stateFormatVersion",
];

/// One thing wrong with a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ManifestProblem {
    /// A field has another value than expected.
    Mismatch {
        /// The JSON field, e.g. `planFingerprint` or `stateShardCount.agg`.
        field: String,
        /// The expected value.
        expected: String,
        /// The value in the manifest.
        found: String,
    },
    /// A task of the plan's checkpoint ACK set has no snapshot.
    MissingTask(TaskId),
    /// A task has more than one snapshot.
    DuplicateTask {
        /// The task.
        task: TaskId,
        /// How many snapshots it has.
        count: usize,
    },
    /// A snapshot of a task the plan's checkpoint ACK set does not have.
    ExtraTask(TaskId),
    /// A segment, watermark, source offset, enumerator or sink entry is wrong.
    Entry {
        /// Which entry, e.g. `segment checkpoint/ns/7/agg/0/3/count.parquet`.
        entry: String,
        /// What is wrong with it.
        message: String,
    },
}

impl ManifestProblem {
    /// Whether the problem means "another job, plan or state format" rather than "damaged".
    pub fn is_incompatibility(&self) -> bool {
        matches!(self, ManifestProblem::Mismatch { field, .. }
            if INCOMPATIBLE_FIELDS.contains(&field.as_str()))
    }

    fn mismatch(
        field: impl Into<String>,
        expected: impl fmt::Display,
        found: impl fmt::Display,
    ) -> Self {
        ManifestProblem::Mismatch {
            field: field.into(),
            expected: expected.to_string(),
            found: found.to_string(),
        }
    }

    fn entry(entry: impl Into<String>, message: impl Into<String>) -> Self {
        ManifestProblem::Entry {
            entry: entry.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ManifestProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ManifestProblem::Mismatch {
                field,
                expected,
                found,
            } => write!(f, "{field} is `{found}`, expected `{expected}`"),
            ManifestProblem::MissingTask(task) => write!(f, "task {task} has no snapshot"),
            ManifestProblem::DuplicateTask { task, count } => {
                write!(f, "task {task} has {count} snapshots")
            }
            ManifestProblem::ExtraTask(task) => {
                write!(f, "task {task} is not in the plan's checkpoint ACK set")
            }
            ManifestProblem::Entry { entry, message } => write!(f, "{entry}: {message}"),
        }
    }
}

/// What the plan expects of a vertex.
#[derive(Debug, Clone)]
struct ExpectedVertex {
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
    tasks: Vec<TaskId>,
    vertices: BTreeMap<VertexId, ExpectedVertex>,
    /// Every operator with its vertex and kind.
    operators: BTreeMap<OperatorId, (VertexId, NodeKind)>,
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
            tasks: plan.checkpoint_ack_set.clone(),
            vertices,
            operators,
        }
    }

    /// The plan's fingerprint.
    pub fn plan_fingerprint(&self) -> &str {
        &self.plan_fingerprint
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
            kind: CheckpointKind::Checkpoint,
            attempt_id: attempt,
            state_format_version: STATE_FORMAT_VERSION,
            state_shard_counts: self.shard_counts(),
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

    /// Every problem of `manifest` on its own ([`structural_problems`]) and against this plan.
    pub fn problems(&self, manifest: &EpochManifest) -> Vec<ManifestProblem> {
        let mut problems = structural_problems(manifest);
        let m = manifest;
        let identity = [
            ("jobId", self.job_id.to_string(), m.job_id.to_string()),
            (
                "pipelineId",
                self.pipeline_id.to_string(),
                m.pipeline_id.to_string(),
            ),
            (
                "planFingerprint",
                self.plan_fingerprint.clone(),
                m.plan_fingerprint.clone(),
            ),
            (
                "stateFormatVersion",
                STATE_FORMAT_VERSION.to_string(),
                m.state_format_version.to_string(),
            ),
        ];
        for (field, expected, found) in identity {
            if expected != found {
                problems.push(ManifestProblem::mismatch(field, expected, found));
            }
        }
        let counts = self.shard_counts();
        let vertices: BTreeSet<&VertexId> =
            counts.keys().chain(m.state_shard_counts.keys()).collect();
        for v in vertices {
            let (expected, found) = (counts.get(v), m.state_shard_counts.get(v));
            if expected != found {
                let show = |c: Option<&u32>| c.map_or("(none)".to_owned(), u32::to_string);
                problems.push(ManifestProblem::mismatch(
                    format!("stateShardCount.{v}"),
                    show(expected),
                    show(found),
                ));
            }
        }
        self.task_set_problems(m, &mut problems);
        for snapshot in &m.task_snapshots {
            self.task_problems(snapshot, &mut problems);
        }
        self.operator_problems(m, &mut problems);
        problems
    }

    /// Refuses a manifest with any problem; `path` names it in the error.
    ///
    /// # Errors
    /// [`CheckpointError::Invalid`] with every problem found.
    pub fn validate(&self, manifest: &EpochManifest, path: &str) -> CheckpointResult<()> {
        invalid_if_any(path, self.problems(manifest))
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

    /// Segments and input watermarks of one task against its vertex.
    fn task_problems(&self, snapshot: &crate::TaskSnapshot, out: &mut Vec<ManifestProblem>) {
        let task = &snapshot.task;
        let Some(vertex) = self.vertices.get(&task.vertex) else {
            return; // an extra task, reported already
        };
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
            if let Some((count, owners)) = &vertex.shards {
                if d.state_shard_count != *count {
                    out.push(ManifestProblem::entry(
                        &entry,
                        format!(
                            "stateShardCount {}, the plan has {count}",
                            d.state_shard_count
                        ),
                    ));
                }
                match owners.get(d.shard.0 as usize) {
                    None => out.push(ManifestProblem::entry(
                        &entry,
                        format!(
                            "shard {} does not exist (stateShardCount {count})",
                            d.shard.0
                        ),
                    )),
                    Some(&owner) if owner != task.subtask.0 => out.push(ManifestProblem::entry(
                        &entry,
                        format!(
                            "shard {} is owned by subtask {owner}, not {}",
                            d.shard.0, task.subtask
                        ),
                    )),
                    Some(_) => {}
                }
            }
        }
        let Some(inputs) = vertex.inputs.get(task.subtask.0 as usize) else {
            return;
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

    /// Source offsets, enumerators and sink transactions name operators of the right kind and
    /// subtasks that exist.
    fn operator_problems(&self, m: &EpochManifest, out: &mut Vec<ManifestProblem>) {
        let check = |entry: String,
                     operator: &OperatorId,
                     kind: NodeKind,
                     subtasks: &mut dyn Iterator<Item = u32>,
                     out: &mut Vec<ManifestProblem>| {
            match self.operators.get(operator) {
                Some((vertex, k)) if *k == kind => {
                    let parallelism = self.vertices.get(vertex).map_or(0, |v| v.parallelism);
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
            let entry = format!("sink transaction ({}, {})", t.operator, t.subtask);
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
/// splits, enumerators and sink transactions; segment paths that are not the stable state path
/// in this manifest's epoch directory; enumerators whose split sets contradict each other.
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
            let expected = weir_state::segment::segment_path(
                &m.namespace,
                m.epoch,
                &d.operator,
                d.subtask,
                d.shard,
                &d.state,
            );
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
        if !sinks.insert((&t.operator, t.subtask)) {
            out.push(ManifestProblem::entry(
                format!("sink transaction ({}, {})", t.operator, t.subtask),
                "listed more than once",
            ));
        }
    }
    out
}
