//! The local executor: creates every channel of a PartitionedPlan, every subtask of every vertex,
//! and runs them on tokio until the job ends or one task fails.

use crate::checkpoint::coordinator::{
    CheckpointRequest, CheckpointSummary, Coordinator, SharedSummary, SinkHandle, update,
};
use crate::checkpoint::recovery::{self, RestorePlan, SplitResume};
use crate::checkpoint::{
    CheckpointConfig, CheckpointStorage, RestoreFrom, TaskCheckpointing, failpoint,
};
use crate::edge_writer::{Distribution, EdgeWriter};
use crate::error::{Error, Result};
use crate::input_gate::{InputChannel, InputGate};
use crate::metrics::{JobMetrics, MetricsSnapshot};
use crate::partition::{HashPartitioner, RoundRobin};
use crate::prepare::{PreparedJob, PreparedNode};
use crate::task::{ChainTask, Head, Link, SinkLink};
use crate::task_state::TaskState;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use weir_api::{
    ChannelId, Epoch, OperatorId, SemanticMode, SinkCapability, SourceSplit, StreamMessage,
    SubtaskIndex, TaskContext, TaskId, VertexId,
};
use weir_checkpoint::TaskSnapshot;
use weir_plan::{
    DEFAULT_CHECKPOINT_RETAIN, DEFAULT_CHECKPOINT_TIMEOUT, DEFAULT_RESTART_ATTEMPTS,
    DEFAULT_RESTART_DELAY,
};
use weir_plan::{NodeKind, PartitionPolicy, PlanEdge, PlanVertex};

/// What a finished job reports.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSummary {
    /// The job.
    pub job_id: String,
    /// Wall time from start to the last task's end.
    #[serde(serialize_with = "as_secs")]
    pub wall_time: Duration,
    /// Final counters (rows read again after a restore are counted again).
    pub metrics: MetricsSnapshot,
    /// The delivery guarantee in force (seed 000 §13).
    pub semantic_mode: SemanticMode,
    /// Checkpoint counters, when the job checkpoints.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<CheckpointSummary>,
}

fn as_secs<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// A job that is running; await [`RunningJob::wait`] for its end.
#[derive(Debug)]
pub struct RunningJob {
    metrics: Arc<JobMetrics>,
    checkpoints: Option<SharedSummary>,
    requests: Option<mpsc::Sender<CheckpointRequest>>,
    handle: tokio::task::JoinHandle<Result<JobSummary>>,
}

impl RunningJob {
    /// Live counters, for progress display.
    pub fn metrics(&self) -> &Arc<JobMetrics> {
        &self.metrics
    }

    /// Live checkpoint counters; `None` when the job takes no checkpoints.
    pub fn checkpoint_summary(&self) -> Option<CheckpointSummary> {
        self.checkpoints
            .as_ref()
            .and_then(|s| s.lock().ok().map(|s| s.clone()))
    }

    /// Takes a checkpoint now (after the one in flight, if any); returns its epoch once it is
    /// durable and committed.
    ///
    /// # Errors
    /// When the job takes no checkpoints, ended, or the epoch was aborted.
    pub async fn checkpoint(&self) -> Result<Epoch> {
        self.request(None).await
    }

    /// Takes a savepoint named `name`: a checkpoint retention never deletes, to restore with
    /// `RestoreFrom::Savepoint(name)`.
    ///
    /// # Errors
    /// As [`RunningJob::checkpoint`].
    pub async fn savepoint(&self, name: &str) -> Result<Epoch> {
        self.request(Some(Some(name.to_owned()))).await
    }

    async fn request(&self, savepoint: Option<Option<String>>) -> Result<Epoch> {
        let requests = self.requests.as_ref().ok_or_else(|| {
            Error::Internal("the job takes no checkpoints: add a `checkpoint` section".into())
        })?;
        let (reply, answer) = oneshot::channel();
        requests
            .send(CheckpointRequest { savepoint, reply })
            .await
            .map_err(|_| Error::Internal("the job has ended".into()))?;
        answer
            .await
            .map_err(|_| Error::Internal("the job ended before the checkpoint completed".into()))?
    }

    /// Whether the job has ended (successfully or not); [`RunningJob::wait`] returns at once then.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Stops the job at once, as a crash would: no flush, no commit, no cleanup. What was not
    /// durable is recovered by the next run's restore. For tests of recovery.
    pub fn kill(self) {
        self.handle.abort();
    }

    /// Waits for the job's end.
    ///
    /// # Errors
    /// The root cause when a task failed (secondary "channel closed" errors are not reported
    /// when a primary error exists) and no restart was left.
    pub async fn wait(self) -> Result<JobSummary> {
        match self.handle.await {
            Ok(result) => result,
            Err(e) => Err(Error::Panic {
                task: "job".into(),
                message: e.to_string(),
            }),
        }
    }
}

/// How a job runs on this machine.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Directory of the tasks' keyed-state files (one redb file per task). When `None`, a fresh
    /// directory under the system's temporary directory is used and removed when the job ends:
    /// state outlives a run only through checkpoints.
    pub state_dir: Option<PathBuf>,
    /// Where checkpoints go; overrides the job's `checkpoint.dir`. Only used when the job has a
    /// `checkpoint` section.
    pub checkpoint_storage: Option<CheckpointStorage>,
    /// The checkpoint to restore before reading any input.
    pub restore: Option<RestoreFrom>,
}

/// Starts a prepared job with default [`RunOptions`].
///
/// # Errors
/// As [`start_with`].
pub async fn start(job: PreparedJob) -> Result<RunningJob> {
    start_with(job, RunOptions::default()).await
}

/// Starts a prepared job on the current tokio runtime.
///
/// Every subtask of every vertex becomes one tokio task; each channel of the plan becomes one
/// bounded queue of `channel_capacity` messages. A job with a `checkpoint` section first
/// restores what `options.restore` asks for, takes epochs at its interval, and after a failure
/// restarts from its newest durable epoch as its `restart` policy allows.
///
/// # Errors
/// When the checkpoint storage or the checkpoint to restore is unusable, or an operator
/// instance or a sink writer cannot be created.
pub async fn start_with(job: PreparedJob, options: RunOptions) -> Result<RunningJob> {
    let job = Arc::new(job);
    let plan = job.partitioned();
    let metrics = Arc::new(JobMetrics::new(
        plan.vertices.iter().flat_map(|v| v.chain.iter()).map(|n| {
            let kind = match n.kind {
                NodeKind::Source => "source",
                NodeKind::Operator => "operator",
                NodeKind::Sink => "sink",
            };
            (n.operator_id.clone(), kind)
        }),
    ));
    for vertex in &plan.vertices {
        if let Some(all) = job.splits.get(&vertex.chain[0].operator_id) {
            metrics.add_splits(all.len(), all.iter().filter_map(|s| s.size_bytes).sum());
        }
    }
    let config = checkpoint_config(&job, &options)?;
    let summary: Option<SharedSummary> = config.as_ref().map(|_| SharedSummary::default());
    let (request_tx, request_rx) = mpsc::channel(16);
    let shared = Shared {
        job: job.clone(),
        options: options.clone(),
        config,
        metrics: metrics.clone(),
        summary: summary.clone(),
        requests: Arc::new(tokio::sync::Mutex::new(request_rx)),
    };
    let first = launch(&shared, options.restore.clone()).await?;
    let restart = job.plans.restart;
    let handle = tokio::spawn(supervise(shared, first, restart));
    Ok(RunningJob {
        metrics,
        requests: summary.as_ref().map(|_| request_tx),
        checkpoints: summary,
        handle,
    })
}

/// What every attempt of a job shares.
#[derive(Clone)]
struct Shared {
    job: Arc<PreparedJob>,
    options: RunOptions,
    config: Option<CheckpointConfig>,
    metrics: Arc<JobMetrics>,
    summary: Option<SharedSummary>,
    /// Manual checkpoint requests; the coordinator of the running attempt holds the lock.
    requests: Arc<tokio::sync::Mutex<mpsc::Receiver<CheckpointRequest>>>,
}

/// The job's checkpoint settings, resolved against the run options.
fn checkpoint_config(job: &PreparedJob, options: &RunOptions) -> Result<Option<CheckpointConfig>> {
    let Some(spec) = &job.plans.checkpoint else {
        if options.restore.is_some() {
            return Err(Error::Restore {
                message: "the job takes no checkpoints, so it cannot restore one: add a \
                          `checkpoint` section (SQL: SET 'checkpoint.interval' = '1s')"
                    .into(),
            });
        }
        return Ok(None);
    };
    let storage = match &options.checkpoint_storage {
        Some(s) => s.clone(),
        None => {
            let dir = spec.dir.as_deref().unwrap_or(DEFAULT_CHECKPOINT_DIR);
            CheckpointStorage::from_dir_option(dir).map_err(|source| Error::Prepare {
                file: job.file.clone(),
                path: "checkpoint.dir".into(),
                source,
            })?
        }
    };
    Ok(Some(CheckpointConfig {
        interval: Duration::from_millis(spec.interval.0),
        storage,
        retain: spec.retain.unwrap_or(DEFAULT_CHECKPOINT_RETAIN) as usize,
        timeout: Duration::from_millis(spec.timeout.unwrap_or(DEFAULT_CHECKPOINT_TIMEOUT).0),
    }))
}

/// The default checkpoint directory, relative to the working directory.
pub const DEFAULT_CHECKPOINT_DIR: &str = "weir-checkpoints";

/// Runs attempts until one succeeds or the restart policy is exhausted.
async fn supervise(
    shared: Shared,
    first: Attempt,
    restart: Option<weir_plan::RestartSpec>,
) -> Result<JobSummary> {
    let started = Instant::now();
    let attempts = match (&shared.config, restart) {
        (None, _) => 0,
        (Some(_), Some(r)) => r.attempts,
        (Some(_), None) => DEFAULT_RESTART_ATTEMPTS,
    };
    let delay = Duration::from_millis(
        restart
            .and_then(|r| r.delay)
            .unwrap_or(DEFAULT_RESTART_DELAY)
            .0,
    );
    let mut attempt = first;
    let mut restarts = 0;
    loop {
        match attempt.run().await {
            Ok(()) => {
                return Ok(JobSummary {
                    job_id: shared.job.partitioned().job_id.to_string(),
                    wall_time: started.elapsed(),
                    metrics: shared.metrics.snapshot(),
                    semantic_mode: shared.job.semantic_mode,
                    checkpoints: shared
                        .summary
                        .as_ref()
                        .and_then(|s| s.lock().ok().map(|s| s.clone())),
                });
            }
            Err(e) if restarts < attempts && !e.is_fenced() => {
                restarts += 1;
                tracing::warn!(error = %e, restart = restarts, of = attempts, "the job failed; restarting from its latest checkpoint");
                if let Some(s) = &shared.summary {
                    update(s, |s| s.restarts = restarts);
                }
                tokio::time::sleep(delay).await;
                attempt = launch(&shared, Some(RestoreFrom::Latest)).await?;
            }
            Err(e) => return Err(e),
        }
    }
}

/// One run of the job's tasks (and coordinator), from a fresh start or a restore.
struct Attempt {
    tasks: Vec<ChainTask>,
    coordinator: Option<Coordinator>,
    state_dir: PathBuf,
    temporary_state: bool,
}

/// Creates the tasks of a new attempt: fences older attempts, restores, builds every task.
///
/// Boxed with an explicit `Send` bound: the supervisor calls it from a spawned task, and the
/// compiler cannot prove `Send` for the borrows inside an unboxed `async fn` there.
fn launch(
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
    let capacity = plan.channel_capacity.max(1) as usize;
    let sinks = epoch_sinks(job);

    // Checkpointing: a new attempt, the manifest to restore, the coordinator's channels.
    let mut checkpointing = None;
    let mut restore_plan = None;
    if let Some(config) = &shared.config {
        let setup = recovery::begin_attempt(&plan, config, restore.as_ref(), &sinks).await?;
        if let Some(s) = &shared.summary {
            update(s, |s| {
                s.attempt = setup.attempt.0;
                s.restored_from = setup.restored.as_ref().map(|m| m.epoch.0);
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
    let mut assigned: HashMap<VertexId, Vec<Vec<(SourceSplit, SplitResume)>>> = HashMap::new();
    for vertex in &plan.vertices {
        let operator = &vertex.chain[0].operator_id;
        let Some(all) = job.splits.get(operator) else {
            continue;
        };
        let per_subtask = match &restore_plan {
            Some(r) => r.splits_for(operator, all, vertex.parallelism)?,
            None => assign_splits(all.clone(), vertex.parallelism),
        };
        assigned.insert(vertex.vertex_id.clone(), per_subtask);
    }
    let finished: HashSet<(VertexId, u32)> = assigned
        .iter()
        .flat_map(|(vertex, per_subtask)| {
            per_subtask
                .iter()
                .enumerate()
                .filter(|(_, splits)| splits.is_empty())
                .map(|(subtask, _)| (vertex.clone(), subtask as u32))
        })
        .collect();

    let mut tasks = Vec::new();
    let mut restored_any = false;
    for vertex in &plan.vertices {
        let splits = assigned.get(&vertex.vertex_id);
        for subtask in 0..vertex.parallelism {
            if finished.contains(&(vertex.vertex_id.clone(), subtask)) {
                continue;
            }
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
                    },
                );
            let task_state =
                TaskState::new(state_dir.clone(), vertex.tasks[subtask as usize].clone());
            if let (Some(r), Some(cp)) = (&restore_plan, &task_cp) {
                let segments = r.segments_for(vertex, subtask)?;
                if !segments.is_empty() {
                    if restored_any {
                        failpoint("mid-restore");
                    }
                    restored_any = true;
                    task_state
                        .restore(&segments, &cp.segments)
                        .await
                        .map_err(|source| Error::Task {
                            task: format!("{}[{subtask}/{}]", vertex.vertex_id, vertex.parallelism),
                            source,
                        })?;
                }
            }
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
                        (
                            task.clone(),
                            TaskSnapshot {
                                task,
                                segments: Vec::new(),
                                input_watermarks: Vec::new(),
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
        let discovered = job
            .splits
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
    async fn run(self) -> Result<()> {
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
                Some(c) => c.run().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(coordinating);
        let mut coordinator_done = !has_coordinator;
        let mut first: Option<Error> = None;
        loop {
            tokio::select! {
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

/// The enumerator's static assignment: split `i` (in enumeration order) to subtask `i mod p`.
fn assign_splits(
    splits: Vec<SourceSplit>,
    parallelism: u32,
) -> Vec<Vec<(SourceSplit, SplitResume)>> {
    let mut out = vec![Vec::new(); parallelism as usize];
    for (i, s) in splits.into_iter().enumerate() {
        out[i % parallelism as usize].push((s, SplitResume::default()));
    }
    out
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
    };

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
                head = Some(Head::Source {
                    source: source.clone(),
                    ctx,
                    splits: splits.clone().unwrap_or_default(),
                    metrics: metrics.operator(id),
                    dead_letter_writers: writers_of
                        .get(&(id.to_string(), Some("dead_letter".into())))
                        .cloned()
                        .unwrap_or_default(),
                    watermark: node.watermark.clone(),
                });
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
                    label,
                    metrics: metrics.operator(id),
                    output_schema: prepared.output_schema(),
                    side_writers,
                });
            }
            (NodeKind::Sink, Some(PreparedNode::Sink(prepared))) => {
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
                    metrics: metrics.operator(id),
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
        head: head.unwrap_or_else(|| Head::Gate(InputGate::new(gate_channels))),
        links,
        sink,
        tail_writers,
        writers,
        job_metrics: metrics.clone(),
        state: task_state,
        task_id: vertex.tasks[subtask as usize].clone(),
        operators: vertex.chain.iter().map(|n| n.operator_id.clone()).collect(),
        checkpointing,
        last_injected: None,
        flushed: false,
        snapshot_writes: Vec::new(),
    })
}
