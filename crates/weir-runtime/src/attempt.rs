//! One attempt of a job: fence older attempts and restore (with checkpoints), build every task
//! and the coordinator, run them to the end.

use crate::checkpoint::coordinator::{Coordinator, SinkHandle, update};
use crate::checkpoint::damage;
use crate::checkpoint::recovery::{self, RestorePlan, SplitResume};
use crate::checkpoint::{RestoreFrom, TaskCheckpointing, failpoint, sink_staging};
use crate::edge_writer::{Distribution, EdgeWriter};
use crate::error::{Error, Result};
use crate::event_time::SourceAlignment;
use crate::executor::Shared;
use crate::input_gate::{InputChannel, InputGate};
use crate::metrics::{JobMetrics, SubtaskMetrics};
use crate::partition::{HashPartitioner, RoundRobin};
use crate::prepare::{PreparedJob, PreparedNode};
use crate::schema_check::SchemaCheck;
use crate::split_assignment::{assign_splits, attempt_splits, waits_for_discovered_splits};
use crate::task::{ChainTask, Head, Link, SinkLink, SourceHead};
use crate::task_state::TaskState;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tracing::Instrument;
use weir_api::{
    ChannelId, OperatorId, SinkCapability, SourceSplit, StateRows, StateShardId, StreamMessage,
    SubtaskIndex, TaskContext, TaskId, VertexId,
};
use weir_checkpoint::{InputWatermark, TaskSnapshot};
use weir_plan::{NodeKind, PartitionPolicy, PlanEdge, PlanVertex};
use weir_state::SegmentDescriptor;

/// One run of the job's tasks (and coordinator), from a fresh start or a restore.
pub(crate) struct Attempt {
    tasks: Vec<ChainTask>,
    coordinator: Option<Coordinator>,
    state_dir: PathBuf,
    temporary_state: bool,
}

/// Creates the tasks of a new attempt: fences older attempts, restores, builds every task.
///
/// Boxed with an explicit `Send` bound: the supervisor calls it from a spawned task, and the
/// compiler cannot prove `Send` for the borrows inside an unboxed `async fn` there.
pub(crate) fn launch(
    shared: &Shared,
    restore: Option<RestoreFrom>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Attempt>> + Send + '_>> {
    Box::pin(launch_inner(shared, restore))
}

async fn launch_inner(shared: &Shared, restore: Option<RestoreFrom>) -> Result<Attempt> {
    let job = &shared.job;
    let plan = job.partitioned().clone();
    let (state_dir, temporary_state) = match &shared.options.state_dir {
        Some(dir) => (dir.clone(), false),
        None => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let dir = std::env::temp_dir().join(format!(
                "weir-state-{}-{}-{nanos}",
                plan.job_id,
                std::process::id()
            ));
            (dir, true)
        }
    };
    let capacity = job.plans.deployment.channel_capacity.max(1) as usize;
    let sinks = epoch_sinks(job);

    // Checkpointing: a new attempt, the manifest to restore, the coordinator's channels.
    let mut checkpointing = None;
    let mut restore_plan = None;
    if let Some(config) = &shared.config {
        // One span over the restore: the attempt and the epoch are recorded in it once known.
        let span = tracing::info_span!(
            "restore",
            job = %plan.job_id,
            attempt = tracing::field::Empty,
            epoch = tracing::field::Empty,
        );
        let setup = recovery::begin_attempt(
            &plan,
            config,
            restore.as_ref(),
            &sinks,
            shared.options.accept_duplicates,
        )
        .instrument(span)
        .await?;
        if let Some(s) = &shared.summary {
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
        restore_plan = setup.restored.clone().map(RestorePlan::new);
        let (trigger_tx, trigger_rx) = watch::channel(None);
        let (report_tx, report_rx) = mpsc::unbounded_channel();
        checkpointing = Some((
            config.clone(),
            setup,
            trigger_tx,
            trigger_rx,
            report_tx,
            report_rx,
        ));
    }

    // One bounded queue per channel.
    let mut senders: HashMap<ChannelId, mpsc::Sender<StreamMessage>> = HashMap::new();
    let mut receivers: HashMap<ChannelId, mpsc::Receiver<StreamMessage>> = HashMap::new();
    for edge in &plan.edges {
        for ch in &edge.channels {
            let (tx, rx) = mpsc::channel(capacity);
            senders.insert(ch.clone(), tx);
            receivers.insert(ch.clone(), rx);
        }
    }

    // Source subtasks without splits have nothing to read: they are not started, and their
    // channels start out ended. Waiting for them would make how far the watermark got when a
    // row arrives depend on how fast idle tasks start, not on the input.
    // A source that discovers splits may have found some in an earlier attempt of this run:
    // a restore lists them again, so their recorded cursors are restored.
    let listed = attempt_splits(job, restore_plan.is_some()).await?;
    let mut assigned: HashMap<VertexId, Vec<Vec<(SourceSplit, SplitResume)>>> = HashMap::new();
    let mut known_splits: HashMap<OperatorId, Arc<HashSet<String>>> = HashMap::new();
    let mut discovering: HashSet<VertexId> = HashSet::new();
    for vertex in &plan.vertices {
        let operator = &vertex.chain[0].operator_id;
        let Some(all) = listed.get(operator) else {
            continue;
        };
        // A source read as one stream is read by its first subtask, whole and in order.
        let one_stream = job.reads_as_one_stream(operator);
        let readers = if one_stream { 1 } else { vertex.parallelism };
        let mut per_subtask = match &restore_plan {
            Some(r) => r.splits_for(operator, all, readers)?,
            None => assign_splits(all.clone(), readers),
        };
        per_subtask.resize(vertex.parallelism as usize, Vec::new());
        assigned.insert(vertex.vertex_id.clone(), per_subtask);
        let mut known: HashSet<String> = all.iter().map(|s| s.id.clone()).collect();
        if let Some(before) = restore_plan
            .as_ref()
            .and_then(|r| r.finished_splits().remove(operator))
        {
            known.extend(before);
        }
        known_splits.insert(operator.clone(), Arc::new(known));
        if let Some(PreparedNode::Source(source)) = job.nodes.get(operator)
            && waits_for_discovered_splits(source.as_ref())
        {
            discovering.insert(vertex.vertex_id.clone());
        }
    }
    // A subtask of a source that discovers splits runs even without splits: it may be the one
    // to read a split found later.
    let mut finished: HashSet<(VertexId, u32)> = assigned
        .iter()
        .filter(|(vertex, _)| !discovering.contains(*vertex))
        .flat_map(|(vertex, per_subtask)| {
            per_subtask
                .iter()
                .enumerate()
                .filter(|(_, splits)| splits.is_empty())
                .map(|(subtask, _)| (vertex.clone(), subtask as u32))
        })
        .collect();
    // The segments every task restores, by (vertex, subtask).
    let mut to_restore: HashMap<(VertexId, u32), Vec<SegmentDescriptor>> = HashMap::new();
    if let Some(r) = &restore_plan {
        for vertex in &plan.vertices {
            for (subtask, segments) in r.segments_of(vertex)?.into_iter().enumerate() {
                if !segments.is_empty() {
                    to_restore.insert((vertex.vertex_id.clone(), subtask as u32), segments);
                }
            }
        }
    }
    // The same downstream (vertices come in topological order): a task whose every input
    // comes from a task that never runs has nothing to read either. Started, it would hold the
    // watermark of its downstream back until it got round to ending, so which rows are late
    // would depend on scheduling. A task with state to restore always runs.
    for vertex in &plan.vertices {
        if assigned.contains_key(&vertex.vertex_id) {
            continue;
        }
        for subtask in 0..vertex.parallelism {
            let inputs = plan.input_channels(&vertex.vertex_id, subtask);
            let idle = !inputs.is_empty()
                && inputs.iter().all(|(edge, ch)| {
                    finished.contains(&(edge.from_vertex.clone(), ch.upstream.0))
                });
            let key = (vertex.vertex_id.clone(), subtask);
            if idle && !to_restore.contains_key(&key) {
                finished.insert(key);
            }
        }
    }

    // Each task's state, restored from the checkpoint first: all tasks at once, each on its
    // own tokio task (decoding and loading use the blocking pool), before any task runs. Keyed
    // state goes into the task's redb file; the images of operators that keep their state in
    // memory are decoded for the operators to take when they are created.
    let mut states: HashMap<(VertexId, u32), Arc<TaskState>> = HashMap::new();
    let mut images: HashMap<(VertexId, u32), TaskImages> = HashMap::new();
    let mut restores = JoinSet::new();
    for vertex in &plan.vertices {
        for subtask in 0..vertex.parallelism {
            let key = (vertex.vertex_id.clone(), subtask);
            if finished.contains(&key) {
                continue;
            }
            let task_state = TaskState::new(
                state_dir.clone(),
                vertex.tasks[subtask as usize].clone(),
                !temporary_state,
            );
            if let Some((_, setup, ..)) = &checkpointing
                && let Some(segments) = to_restore.remove(&key)
            {
                let state = task_state.clone();
                let store = setup.segments.clone();
                let label = format!("{}[{subtask}/{}]", vertex.vertex_id, vertex.parallelism);
                let owned = owned_shards(vertex, subtask);
                restores.spawn(async move {
                    match restore_task(&state, &segments, &store, &owned).await {
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
            states.insert((vertex.vertex_id.clone(), subtask), task_state);
        }
    }
    let mut restored = 0;
    while let Some(joined) = restores.join_next().await {
        let joined = joined.map_err(|e| Error::Panic {
            task: "restore".into(),
            message: e.to_string(),
        })?;
        let (key, task_images) = match joined {
            Ok(done) => done,
            Err((segments, error)) => {
                return Err(match (&checkpointing, &restore_plan) {
                    (Some((config, setup, ..)), Some(r)) => {
                        damage::explain(config, &setup.store, &setup.expected, r, &segments, error)
                            .await
                    }
                    _ => error,
                });
            }
        };
        images.insert(key, task_images);
        restored += 1;
        if restored == 1 && !restores.is_empty() {
            failpoint("mid-restore");
        }
    }

    // Watermark alignment between the subtasks of each source that bounds the drift; subtasks
    // that never run hold nobody back.
    let alignments: HashMap<VertexId, Arc<SourceAlignment>> = plan
        .vertices
        .iter()
        .filter_map(|v| {
            let drift = v.chain[0].watermark.as_ref()?.max_drift?;
            // Alignment bounds the drift of a watermark some operator reads.
            if !job.watermark_is_read(&v.chain[0].operator_id) {
                return None;
            }
            let running: Vec<bool> = (0..v.parallelism)
                .map(|s| !finished.contains(&(v.vertex_id.clone(), s)))
                .collect();
            Some((
                v.vertex_id.clone(),
                Arc::new(SourceAlignment::new(drift, &running)),
            ))
        })
        .collect();

    let mut tasks = Vec::new();
    for vertex in &plan.vertices {
        let splits = assigned.get(&vertex.vertex_id);
        for subtask in 0..vertex.parallelism {
            let Some(task_state) = states.remove(&(vertex.vertex_id.clone(), subtask)) else {
                continue; // a source subtask without splits: never started
            };
            let task_cp = checkpointing
                .as_ref()
                .map(
                    |(_, setup, _, trigger_rx, report_tx, _)| TaskCheckpointing {
                        attempt: setup.attempt,
                        namespace: setup.store.namespace().to_owned(),
                        segments: setup.segments.clone(),
                        shards: vertex.shards.clone(),
                        reports: report_tx.clone(),
                        trigger: trigger_rx.clone(),
                        store: setup.store.clone(),
                    },
                );
            let task = build_task(
                job,
                vertex,
                subtask,
                task_state,
                splits.map(|s| s[subtask as usize].clone()),
                &plan.edges,
                &mut senders,
                &mut receivers,
                &shared.metrics,
                &finished,
                task_cp,
                images
                    .get(&(vertex.vertex_id.clone(), subtask))
                    .unwrap_or(&HashMap::new()),
                alignments.get(&vertex.vertex_id),
                known_splits
                    .get(&vertex.chain[0].operator_id)
                    .cloned()
                    .unwrap_or_default(),
            )
            .await?;
            tasks.push(task);
        }
    }
    // Every sender now lives in a task; dropping the map's leftovers (none) closes nothing early.
    drop(senders);

    let coordinator = checkpointing.map(|(config, setup, trigger_tx, _, _report_tx, report_rx)| {
        // Tasks that never run take part in every epoch with an empty snapshot.
        let never_started: HashMap<TaskId, TaskSnapshot> = plan
            .vertices
            .iter()
            .flat_map(|v| {
                (0..v.parallelism)
                    .filter(|s| finished.contains(&(v.vertex_id.clone(), *s)))
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
        Coordinator {
            config,
            store: setup.store,
            expected: setup.expected,
            attempt: setup.attempt,
            job_id: plan.job_id.clone(),
            next_epoch: setup.next_epoch,
            trigger: trigger_tx,
            reports: report_rx,
            live_sources,
            finished: never_started,
            discovered,
            finished_before: restore_plan
                .as_ref()
                .map(RestorePlan::finished_splits)
                .unwrap_or_default(),
            sinks: sinks.clone(),
            pending: BTreeMap::new(),
            requests: shared.requests.clone(),
            summary: shared.summary.clone().unwrap_or_default(),
            heads: crate::checkpoint::coordinator::task_heads(&plan),
        }
    });
    Ok(Attempt {
        tasks,
        coordinator,
        state_dir,
        temporary_state,
    })
}
impl Attempt {
    /// Runs every task and the coordinator to the end. The first root-cause error stops the
    /// other tasks; a bounded job with checkpoints succeeds only once its final epoch is
    /// committed.
    /// A kill (`killed` turns true) aborts every task and returns once they all stopped.
    pub(crate) async fn run(self, mut killed: watch::Receiver<bool>) -> Result<()> {
        let Attempt {
            tasks,
            coordinator,
            state_dir,
            temporary_state,
        } = self;
        let mut set = JoinSet::new();
        let mut labels = HashMap::new();
        for task in tasks {
            let label = task.label.clone();
            let handle = set.spawn(task.run());
            labels.insert(handle.id(), label);
        }
        let has_coordinator = coordinator.is_some();
        let coordinating = async move {
            match coordinator {
                Some(c) => {
                    let span = tracing::info_span!(
                        "checkpoints",
                        job = %c.job_id,
                        attempt = %c.attempt,
                    );
                    c.run().instrument(span).await
                }
                None => std::future::pending().await,
            }
        };
        tokio::pin!(coordinating);
        let mut coordinator_done = !has_coordinator;
        let mut first: Option<Error> = None;
        let mut kill_open = true;
        loop {
            tokio::select! {
                changed = killed.changed(), if kill_open => {
                    // A dropped `RunningJob` closes the channel: the job goes on unobserved.
                    if changed.is_err() {
                        kill_open = false;
                    } else if *killed.borrow() {
                        set.abort_all();
                        while set.join_next().await.is_some() {}
                        return Err(Error::Internal("the job was killed".into()));
                    }
                }
                joined = set.join_next(), if !set.is_empty() => {
                    let Some(joined) = joined else { continue };
                    let failure = match joined {
                        Ok(Ok(())) => None,
                        Ok(Err(e)) => Some(e),
                        Err(join) if join.is_cancelled() => None,
                        Err(join) => Some(Error::Panic {
                            task: labels.get(&join.id()).cloned().unwrap_or_default(),
                            message: panic_message(join),
                        }),
                    };
                    if let Some(e) = failure {
                        let replace = match &first {
                            None => true,
                            Some(f) => f.is_secondary() && !e.is_secondary(),
                        };
                        if first.is_none() {
                            // Stop every other task; their channel errors are secondary.
                            set.abort_all();
                        }
                        if replace {
                            first = Some(e);
                        }
                    }
                }
                result = &mut coordinating, if !coordinator_done => {
                    coordinator_done = true;
                    if let Err(e) = result
                        && first.is_none()
                    {
                        set.abort_all();
                        first = Some(e);
                    }
                }
            }
            if set.is_empty() && (coordinator_done || first.is_some()) {
                break;
            }
        }
        if temporary_state
            && let Err(e) = std::fs::remove_dir_all(&state_dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %state_dir.display(), error = %e, "removing the state directory failed");
        }
        match first {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// The restored images of one task's in-memory operators, by operator.
type TaskImages = HashMap<OperatorId, Arc<Vec<StateRows>>>;

/// Restores one task: keyed-state segments into its redb file, image segments decoded (only the
/// rows of `owned` shards) for its operators.
async fn restore_task(
    state: &TaskState,
    segments: &[SegmentDescriptor],
    store: &weir_state::SegmentStore,
    owned: &[StateShardId],
) -> weir_api::Result<TaskImages> {
    let (image, keyed): (Vec<SegmentDescriptor>, Vec<SegmentDescriptor>) =
        segments.iter().cloned().partition(|d| d.is_image());
    if !keyed.is_empty() {
        state.restore(&keyed, store).await?;
    }
    let mut by_operator: BTreeMap<OperatorId, Vec<SegmentDescriptor>> = BTreeMap::new();
    for d in image {
        by_operator.entry(d.operator.clone()).or_default().push(d);
    }
    let mut images = HashMap::new();
    for (operator, segments) in by_operator {
        let rows = store.read_image(&segments, owned).await?;
        images.insert(operator, Arc::new(rows));
    }
    Ok(images)
}

/// The state shards subtask `subtask` of `vertex` owns (shard 0 when the vertex is not keyed).
pub(crate) fn owned_shards(vertex: &PlanVertex, subtask: u32) -> Vec<StateShardId> {
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

/// The sink operators whose writers run in epoch mode (they stage and commit by epoch), with
/// their parallelism.
fn epoch_sinks(job: &PreparedJob) -> BTreeMap<OperatorId, SinkHandle> {
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
                    },
                )),
                _ => None,
            },
        )
        .collect()
}

/// Whether a sink stages or pre-commits by epoch.
fn commits_by_epoch(sink: &dyn weir_api::PreparedSink) -> bool {
    sink.capabilities().iter().any(|c| {
        matches!(
            c,
            SinkCapability::StagedAtomicCommit | SinkCapability::TwoPhaseCommit
        )
    })
}

fn panic_message(join: tokio::task::JoinError) -> String {
    match join.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "unknown panic".into()),
        Err(e) => e.to_string(),
    }
}

#[allow(clippy::too_many_arguments)]
async fn build_task(
    job: &PreparedJob,
    vertex: &PlanVertex,
    subtask: u32,
    task_state: Arc<TaskState>,
    splits: Option<Vec<(SourceSplit, SplitResume)>>,
    edges: &[PlanEdge],
    senders: &mut HashMap<ChannelId, mpsc::Sender<StreamMessage>>,
    receivers: &mut HashMap<ChannelId, mpsc::Receiver<StreamMessage>>,
    metrics: &Arc<JobMetrics>,
    finished: &HashSet<(VertexId, u32)>,
    checkpointing: Option<TaskCheckpointing>,
    images: &HashMap<OperatorId, Arc<Vec<StateRows>>>,
    alignment: Option<&Arc<SourceAlignment>>,
    known_splits: Arc<HashSet<String>>,
) -> Result<ChainTask> {
    let plan = job.partitioned();
    let ctx_of = |id: &weir_api::OperatorId| TaskContext {
        job_id: plan.job_id.clone(),
        operator_id: id.clone(),
        subtask: SubtaskIndex(subtask),
        parallelism: vertex.parallelism,
        state: Some(task_state.clone() as Arc<dyn weir_api::StateBackendHandle>),
        state_shard_count: vertex.shards.as_ref().map(|s| s.state_shard_count),
        dropped_rows: metrics.operator(id).dropped_rows(),
        late_routed_rows: metrics.subtask(id, subtask).late_routed_rows(),
        late_updated_rows: metrics.subtask(id, subtask).late_updated_rows(),
        restored_image: images.get(id).cloned(),
        staging: None,
    };

    // The task's times (idle, busy, backpressured) and input watermark count on its chain's
    // first operator.
    let head_metrics = match vertex.chain.first() {
        Some(n) => metrics.subtask(&n.operator_id, subtask),
        None => SubtaskMetrics::default(),
    };
    head_metrics.mark_head();
    // Writers for every edge leaving this vertex, from this subtask's channels.
    let mut writers = Vec::new();
    let mut writers_of: HashMap<(String, Option<String>), Vec<usize>> = HashMap::new();
    for edge in edges.iter().filter(|e| e.from_vertex == vertex.vertex_id) {
        let mine: Vec<&ChannelId> = edge
            .channels
            .iter()
            .filter(|c| c.upstream.0 == subtask)
            .collect();
        let mut by_downstream: Vec<&ChannelId> = mine.clone();
        by_downstream.sort_by_key(|c| c.downstream);
        let chan_senders = by_downstream
            .iter()
            .filter_map(|c| senders.remove(*c))
            .collect::<Vec<_>>();
        if chan_senders.len() != by_downstream.len() || chan_senders.is_empty() {
            return Err(Error::Task {
                task: format!("{}[{subtask}]", vertex.vertex_id),
                source: weir_api::Error::Internal(format!(
                    "edge {} has no channel from subtask {subtask}",
                    edge.edge_id
                )),
            });
        }
        let distribution = match &edge.policy {
            PartitionPolicy::Forward | PartitionPolicy::Singleton => Distribution::Single,
            PartitionPolicy::Union if chan_senders.len() == 1 => Distribution::Single,
            PartitionPolicy::Broadcast => Distribution::Broadcast,
            PartitionPolicy::Rebalance | PartitionPolicy::Union => Distribution::RoundRobin(
                RoundRobin::starting_at(chan_senders.len(), subtask as usize % chan_senders.len()),
            ),
            PartitionPolicy::Hash { keys, shards } => {
                let schema = &job.schemas[&(edge.from_operator.clone(), edge.from_output.clone())];
                let key_indices = keys
                    .iter()
                    .map(|k| schema.index_of(k))
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|e| Error::Task {
                        task: format!("{}[{subtask}]", vertex.vertex_id),
                        source: weir_api::Error::arrow("resolving hash keys", e),
                    })?;
                let p =
                    HashPartitioner::try_new(key_indices, shards.owner_table(), chan_senders.len())
                        .map_err(|source| Error::Task {
                            task: format!("{}[{subtask}]", vertex.vertex_id),
                            source,
                        })?;
                Distribution::Hash(p)
            }
        };
        writers_of
            .entry((edge.from_operator.to_string(), edge.from_output.clone()))
            .or_default()
            .push(writers.len());
        writers.push(EdgeWriter {
            distribution,
            senders: chan_senders,
            metrics: head_metrics.clone(),
        });
    }

    // Input gate from this subtask's input channels, in channel-index order.
    let gate_channels: Vec<InputChannel> = plan
        .input_channels(&vertex.vertex_id, subtask)
        .into_iter()
        .filter_map(|(edge, ch)| {
            receivers.remove(ch).map(|rx| {
                if finished.contains(&(edge.from_vertex.clone(), ch.upstream.0)) {
                    InputChannel::finished(rx, edge.to_input as usize).with_id(ch.clone())
                } else {
                    InputChannel::new(rx, edge.to_input as usize).with_id(ch.clone())
                }
            })
        })
        .collect();

    let mut head = None;
    let mut links = Vec::new();
    let mut sink = None;
    for node in &vertex.chain {
        let id = &node.operator_id;
        let ctx = ctx_of(id);
        let label = ctx.label();
        match (&node.kind, job.nodes.get(id)) {
            (NodeKind::Source, Some(PreparedNode::Source(source))) => {
                let one_stream = job.reads_as_one_stream(id);
                head = Some(Head::Source(Box::new(SourceHead {
                    source: source.clone(),
                    ctx,
                    splits: splits.clone().unwrap_or_default(),
                    metrics: metrics.subtask(id, subtask),
                    dead_letter_writers: writers_of
                        .get(&(id.to_string(), Some("dead_letter".into())))
                        .cloned()
                        .unwrap_or_default(),
                    watermark: node.watermark.clone(),
                    alignment: alignment.cloned(),
                    known_splits: known_splits.clone(),
                    share: job.split_share,
                    one_stream,
                    watermark_read: job.watermark_is_read(id),
                    decoders: if one_stream {
                        vertex.parallelism as usize
                    } else {
                        1
                    },
                })));
            }
            (NodeKind::Operator, Some(PreparedNode::Operator(prepared))) => {
                let op = prepared.create(&ctx).map_err(|source| Error::Task {
                    task: label.clone(),
                    source,
                })?;
                let side_writers = prepared
                    .side_outputs()
                    .iter()
                    .map(|s| {
                        writers_of
                            .get(&(id.to_string(), Some(s.name.clone())))
                            .cloned()
                            .unwrap_or_default()
                    })
                    .collect();
                links.push(Link {
                    op,
                    operator: id.clone(),
                    label,
                    metrics: metrics.subtask(id, subtask),
                    port_schemas: std::iter::once(prepared.output_schema())
                        .chain(prepared.side_outputs().iter().map(|s| s.schema.clone()))
                        .map(SchemaCheck::new)
                        .collect(),
                    side_writers,
                });
            }
            (NodeKind::Sink, Some(PreparedNode::Sink(prepared))) => {
                let ctx = TaskContext {
                    staging: checkpointing
                        .as_ref()
                        .map(|cp| sink_staging(&cp.store, id, SubtaskIndex(subtask))),
                    ..ctx
                };
                let mut writer =
                    prepared
                        .create_writer(&ctx)
                        .await
                        .map_err(|source| Error::Task {
                            task: label.clone(),
                            source,
                        })?;
                let epochs = checkpointing.is_some() && commits_by_epoch(prepared.as_ref());
                if epochs {
                    writer.begin_epochs().await.map_err(|source| Error::Task {
                        task: label.clone(),
                        source,
                    })?;
                }
                sink = Some(SinkLink {
                    writer,
                    operator_id: id.clone(),
                    epochs,
                    label,
                    metrics: metrics.subtask(id, subtask),
                });
            }
            _ => {
                return Err(Error::Task {
                    task: label,
                    source: weir_api::Error::Internal(format!("operator {id} was not prepared")),
                });
            }
        }
    }
    let tail = vertex.chain.last().map(|n| n.operator_id.to_string());
    let tail_writers = tail
        .and_then(|t| writers_of.get(&(t, None)).cloned())
        .unwrap_or_default();
    Ok(ChainTask {
        label: format!("{}[{subtask}/{}]", vertex.vertex_id, vertex.parallelism),
        head: head.unwrap_or_else(|| {
            let gate = InputGate::new(gate_channels);
            Head::Gate(
                if links.first().is_some_and(|l| l.op.reads_input_watermarks()) {
                    gate.with_input_watermarks()
                } else {
                    gate
                },
            )
        }),
        links,
        sink,
        tail_writers,
        writers,
        job_metrics: metrics.clone(),
        head_metrics,
        state: task_state,
        task_id: vertex.tasks[subtask as usize].clone(),
        operators: vertex.chain.iter().map(|n| n.operator_id.clone()).collect(),
        checkpointing,
        last_injected: None,
        flushed: false,
        snapshot_writes: Vec::new(),
    })
}
