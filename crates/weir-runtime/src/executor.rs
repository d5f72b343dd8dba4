//! The local executor: runs a PartitionedPlan's attempts on tokio (each attempt, built by
//! `attempt/`, creates the channels and the subtasks of every vertex) until the job ends,
//! restarting from the last checkpoint after a failure where the job allows it.

use crate::attempt::{Attempt, launch};
use crate::checkpoint::coordinator::ManualCheckpoint;
use crate::checkpoint::epoch_stats::EpochStats;
use crate::checkpoint::epoch_stats::{CheckpointSummary, SharedSummary, update};
use crate::checkpoint::{CheckpointConfig, CheckpointLocation, RestoreFrom};
use crate::error::{Error, Result};
use crate::metrics::{JobMetrics, MetricsSnapshot};
use crate::prepare::PreparedJob;
use crate::run_context::{RunContext, RunOptions};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};
use weir_api::{Epoch, SemanticMode};
use weir_checkpoint::EpochKind;
use weir_plan::{DEFAULT_CHECKPOINT_RETAIN, DEFAULT_CHECKPOINT_TIMEOUT};
use weir_plan::{NodeKind, Plan, Transport};

/// What a finished job reports.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    /// The job.
    pub job_id: String,
    /// Wall time from start to the last task's end.
    #[serde(serialize_with = "as_secs")]
    pub wall_time: Duration,
    /// Final counters (rows read again after a restore are counted again).
    pub metrics: MetricsSnapshot,
    /// The delivery guarantee in force (docs/fault-tolerance.md, "Semantic modes").
    pub semantic_mode: SemanticMode,
    /// Checkpoint counters, when the job checkpoints.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<CheckpointSummary>,
    /// From the start of this run (before any restore) to the first row reaching a sink;
    /// `None` when no row did. For a run started with `--restore`, the restart-to-first-output
    /// time.
    #[serde(serialize_with = "as_opt_secs")]
    pub first_output: Option<Duration>,
}

fn as_opt_secs<S: serde::Serializer>(
    d: &Option<Duration>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

fn as_secs<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Reads a running job's live checkpoint counters ([`RunningJob::checkpoint_probe`]).
#[derive(Debug, Clone)]
pub struct CheckpointProbe(pub(crate) Option<SharedSummary>);

impl CheckpointProbe {
    /// The counters now; `None` when the job takes no checkpoints.
    pub fn summary(&self) -> Option<CheckpointSummary> {
        self.0
            .as_ref()
            .and_then(|s| s.lock().ok().map(|s| s.summary.clone()))
    }

    /// The last epochs of the run that completed or were aborted, oldest first: at most
    /// [`EPOCH_HISTORY`](crate::EPOCH_HISTORY), across the run's restarts. Empty when the job
    /// takes no checkpoints.
    pub fn recent_epochs(&self) -> Vec<EpochStats> {
        self.0
            .as_ref()
            .and_then(|s| s.lock().ok().map(|s| s.epochs.iter().cloned().collect()))
            .unwrap_or_default()
    }

    /// The newest epoch of the run that completed, if one did.
    pub fn last_completed_epoch(&self) -> Option<EpochStats> {
        self.0.as_ref().and_then(|s| {
            s.lock().ok().and_then(|s| {
                s.epochs
                    .iter()
                    .rev()
                    .find(|e| e.status == "completed")
                    .cloned()
            })
        })
    }
}

/// A job that is running; await [`RunningJob::wait`] for its end.
#[derive(Debug)]
pub struct RunningJob {
    metrics: Arc<JobMetrics>,
    checkpoints: Option<SharedSummary>,
    requests: Option<mpsc::Sender<ManualCheckpoint>>,
    kill: watch::Sender<bool>,
    handle: tokio::task::JoinHandle<Result<RunSummary>>,
}

impl RunningJob {
    /// Live counters, for progress display.
    pub fn metrics(&self) -> &Arc<JobMetrics> {
        &self.metrics
    }

    /// A handle that reads the live checkpoint counters from another task while
    /// [`RunningJob::wait`] holds the job (a metrics exporter's scrape).
    pub fn checkpoint_probe(&self) -> CheckpointProbe {
        CheckpointProbe(self.checkpoints.clone())
    }

    /// Live checkpoint counters; `None` when the job takes no checkpoints.
    pub fn checkpoint_summary(&self) -> Option<CheckpointSummary> {
        self.checkpoints
            .as_ref()
            .and_then(|s| s.lock().ok().map(|s| s.summary.clone()))
    }

    /// Takes a checkpoint now (after the one in flight, if any); returns its epoch once it is
    /// durable and committed.
    ///
    /// # Errors
    /// When the job takes no checkpoints, ended, or the epoch was aborted.
    pub async fn checkpoint(&self) -> Result<Epoch> {
        self.checkpoint_trigger()?.checkpoint().await
    }

    /// Takes a savepoint named `name`: a checkpoint retention never deletes, to restore with
    /// `RestoreFrom::Savepoint(name)`.
    ///
    /// # Errors
    /// A name that `--restore` would read otherwise (empty, a number, `latest`); as
    /// [`RunningJob::checkpoint`].
    pub async fn savepoint(&self, name: &str) -> Result<Epoch> {
        self.checkpoint_trigger()?.savepoint(name).await
    }

    /// A handle that takes checkpoints and savepoints of this job from another task, so that a
    /// long checkpoint need not hold the [`RunningJob`] (an Agent keeps polling and can still
    /// kill the job meanwhile).
    ///
    /// # Errors
    /// When the job takes no checkpoints.
    pub fn checkpoint_trigger(&self) -> Result<CheckpointTrigger> {
        let requests = self.requests.clone().ok_or_else(|| {
            Error::Internal("the job takes no checkpoints: add a `checkpoint` section".into())
        })?;
        Ok(CheckpointTrigger { requests })
    }

    /// Whether the job has ended (successfully or not); [`RunningJob::wait`] returns at once then.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Stops the job at once, as a crash would: no flush, no commit, no cleanup; returns once
    /// every task has stopped. What was not durable is recovered by the next run's restore. For
    /// tests of recovery in one process (a file write already handed to a blocking thread may
    /// still land: a real process kill stops those too).
    pub async fn kill(self) {
        let _ = self.kill.send(true);
        let _ = self.handle.await;
    }

    /// Waits for the job's end.
    ///
    /// # Errors
    /// The root cause when a task failed (secondary "channel closed" errors are not reported
    /// when a primary error exists) and no restart was left.
    pub async fn wait(self) -> Result<RunSummary> {
        match self.handle.await {
            Ok(result) => result,
            Err(e) => Err(Error::Panic {
                task: "job".into(),
                message: e.to_string(),
            }),
        }
    }
}

/// Takes checkpoints and savepoints of a running job; cheap to clone, usable after the job
/// ended (its requests then fail).
#[derive(Debug, Clone)]
pub struct CheckpointTrigger {
    requests: mpsc::Sender<ManualCheckpoint>,
}

impl CheckpointTrigger {
    /// As [`RunningJob::checkpoint`].
    ///
    /// # Errors
    /// When the job ended or the epoch was aborted.
    pub async fn checkpoint(&self) -> Result<Epoch> {
        self.request(EpochKind::Checkpoint).await
    }

    /// As [`RunningJob::savepoint`].
    ///
    /// # Errors
    /// As [`RunningJob::savepoint`].
    pub async fn savepoint(&self, name: &str) -> Result<Epoch> {
        // `--restore` reads digits as an epoch and `latest` as the newest checkpoint.
        if name.is_empty() || name.parse::<u64>().is_ok() || name.eq_ignore_ascii_case("latest") {
            return Err(Error::Restore {
                message: format!(
                    "`{name}` cannot name a savepoint: use a name that is not empty, not a \
                     number and not `latest`"
                ),
            });
        }
        self.request(EpochKind::Savepoint {
            name: Some(name.to_owned()),
        })
        .await
    }

    async fn request(&self, kind: EpochKind) -> Result<Epoch> {
        let (reply, answer) = oneshot::channel();
        self.requests
            .send(ManualCheckpoint { kind, reply })
            .await
            .map_err(|_| Error::Internal("the job has ended".into()))?;
        answer
            .await
            .map_err(|_| Error::Internal("the job ended before the checkpoint completed".into()))?
    }
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
    let started = Instant::now();
    check_deployment(&job)?;
    let job = Arc::new(job);
    let plan = job.partitioned();
    let metrics = Arc::new(
        JobMetrics::new(plan.vertices.iter().flat_map(|v| v.chain.iter()).map(|n| {
            let kind = match n.kind {
                NodeKind::Source => "source",
                NodeKind::Operator => "operator",
                NodeKind::Sink => "sink",
            };
            (n.operator_id.clone(), kind)
        }))
        .with_semantic_mode(job.semantic_mode),
    );
    for vertex in &plan.vertices {
        if let Some(all) = job.splits.get(&vertex.chain[0].operator_id) {
            metrics.add_splits(all.len(), all.iter().filter_map(|s| s.size_bytes).sum());
        }
    }
    let config = checkpoint_config(&job, &options)?;
    let summary: Option<SharedSummary> = config.as_ref().map(|_| SharedSummary::default());
    let (request_tx, request_rx) = mpsc::channel(16);
    let (kill, kill_rx) = watch::channel(false);
    let run = RunContext {
        job: job.clone(),
        options: options.clone(),
        config,
        metrics: metrics.clone(),
        summary: summary.clone(),
        requests: Arc::new(tokio::sync::Mutex::new(request_rx)),
        killed: kill_rx,
    };
    let first = match launch(&run, options.restore.clone()).await {
        // A start that failed for a passing reason (a broker not reachable yet, a store that
        // timed out) is retried like a failed attempt when the job can restore; any other
        // failure (a bad spec, an unusable checkpoint) is the caller's at once.
        Err(e) if !(run.config.is_some() && e.is_retryable()) => return Err(e),
        first => first,
    };
    let restart = job.plans.restart;
    let handle = tokio::spawn(supervise(run, first, restart, started));
    Ok(RunningJob {
        metrics,
        requests: summary.as_ref().map(|_| request_tx),
        checkpoints: summary,
        kill,
        handle,
    })
}

/// The node this runtime runs: every task in one process, over in-process queues.
const LOCAL_NODE: &str = "local";

/// Checks that the job's DeploymentPlan is the one this process can run: it deploys the job's
/// PartitionedPlan (same fingerprint), places every task of it exactly once, and on the local
/// node with in-process queues. The channels are then sized by its `channelCapacity`.
fn check_deployment(job: &PreparedJob) -> Result<()> {
    let deployment = &job.plans.deployment;
    let plan = job.partitioned();
    let refuse = |message: String| Err(Error::Deployment { message });
    let fingerprint = plan.fingerprint();
    if deployment.partitioned_plan_fingerprint != fingerprint {
        return refuse(format!(
            "it deploys partitioned plan {}, not this job's {fingerprint}",
            deployment.partitioned_plan_fingerprint
        ));
    }
    for node in &deployment.nodes {
        if node.node_id != LOCAL_NODE || node.transport != Transport::LocalQueue {
            return refuse(format!(
                "node `{}` with transport {:?}: this process runs only node `{LOCAL_NODE}` with \
                 in-process queues",
                node.node_id, node.transport
            ));
        }
    }
    let mut placed = HashSet::new();
    for assignment in &deployment.assignments {
        if assignment.node_id != LOCAL_NODE {
            return refuse(format!(
                "task {} is placed on node `{}`; this process runs only node `{LOCAL_NODE}`",
                assignment.task, assignment.node_id
            ));
        }
        if !placed.insert(&assignment.task) {
            return refuse(format!("task {} is placed twice", assignment.task));
        }
    }
    if let Some(missing) = plan.checkpoint_ack_set.iter().find(|t| !placed.contains(t)) {
        return refuse(format!("task {missing} of the plan is placed on no node"));
    }
    if placed.len() != plan.checkpoint_ack_set.len() {
        return refuse("it places tasks the partitioned plan does not have".into());
    }
    Ok(())
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
            // A spec without `dir` may carry S3 options for `--checkpoint-dir s3://...`.
            let s3 = spec.s3.as_ref().filter(|_| weir_api::is_s3_url(dir));
            CheckpointLocation::from_dir_option(dir, s3).map_err(|source| Error::Prepare {
                file: job.file.clone(),
                path: "checkpoint.dir".into(),
                source,
            })?
        }
    };
    Ok(Some(CheckpointConfig {
        interval: Duration::from_millis(spec.interval.0),
        min_pause: Duration::from_millis(spec.min_pause.map_or(0, |d| d.0)),
        storage,
        retain: spec.retain.unwrap_or(DEFAULT_CHECKPOINT_RETAIN) as usize,
        timeout: Duration::from_millis(spec.timeout.unwrap_or(DEFAULT_CHECKPOINT_TIMEOUT).0),
    }))
}

/// The default checkpoint directory, relative to the working directory.
pub const DEFAULT_CHECKPOINT_DIR: &str = "weir-checkpoints";

/// Runs attempts until one succeeds or the restart policy is exhausted. A launch that fails
/// counts as a failed attempt; until one attempt launched, a retry restores what the job was
/// started with (a savepoint asked for stays the restore point), later the newest epoch.
async fn supervise(
    run: RunContext,
    first: Result<Attempt>,
    restart: Option<weir_plan::RestartSpec>,
    job_started: Instant,
) -> Result<RunSummary> {
    let started = Instant::now();
    let policy = weir_plan::RestartSpec::in_force(run.config.is_some(), restart);
    let attempts = policy.map_or(0, |p| p.attempts);
    let mut restore = run.options.restore.clone();
    let mut attempt = first;
    let mut restarts = 0;
    loop {
        let outcome = match attempt {
            Ok(running) => {
                restore = Some(RestoreFrom::Latest);
                running.run(run.killed.clone()).await
            }
            Err(e) => Err(e),
        };
        match outcome {
            Ok(()) => {
                return Ok(RunSummary {
                    job_id: run.job.partitioned().job_id.to_string(),
                    wall_time: started.elapsed(),
                    metrics: run.metrics.snapshot(),
                    semantic_mode: run.job.semantic_mode,
                    checkpoints: run
                        .summary
                        .as_ref()
                        .and_then(|s| s.lock().ok().map(|s| s.summary.clone())),
                    first_output: run
                        .metrics
                        .first_output()
                        .map(|t| t.saturating_duration_since(job_started)),
                });
            }
            Err(e) if restarts < attempts && !e.is_fenced() && !*run.killed.borrow() => {
                restarts += 1;
                tracing::warn!(error = %e, restart = restarts, of = attempts, "the job failed; restarting from its latest checkpoint");
                if let Some(s) = &run.summary {
                    update(s, |s| s.restarts = restarts);
                }
                let delay = policy.map_or(0, |p| p.delay_before(restarts).0);
                tokio::time::sleep(Duration::from_millis(delay)).await;
                attempt = launch(&run, restore.clone()).await;
            }
            Err(e) => return Err(e),
        }
    }
}
