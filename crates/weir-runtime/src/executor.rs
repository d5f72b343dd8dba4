//! The local executor: creates every channel of a PartitionedPlan, every subtask of every vertex,
//! and runs them on tokio until the job ends or one task fails.

use crate::edge_writer::{Distribution, EdgeWriter};
use crate::error::{Error, Result};
use crate::input_gate::{InputChannel, InputGate};
use crate::metrics::{JobMetrics, MetricsSnapshot};
use crate::partition::{HashPartitioner, RoundRobin};
use crate::prepare::{PreparedJob, PreparedNode};
use crate::task::{ChainTask, Head, Link, SinkLink};
use crate::task_state::TaskState;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use weir_api::{ChannelId, SourceSplit, StreamMessage, SubtaskIndex, TaskContext, VertexId};
use weir_plan::{NodeKind, PartitionPolicy, PlanEdge, PlanVertex};

/// What a finished job reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct JobSummary {
    /// The job.
    pub job_id: String,
    /// Wall time from start to the last task's end.
    #[serde(serialize_with = "as_secs")]
    pub wall_time: Duration,
    /// Final counters.
    pub metrics: MetricsSnapshot,
}

fn as_secs<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// A job that is running; await [`RunningJob::wait`] for its end.
#[derive(Debug)]
pub struct RunningJob {
    metrics: Arc<JobMetrics>,
    handle: tokio::task::JoinHandle<Result<JobSummary>>,
}

impl RunningJob {
    /// Live counters, for progress display.
    pub fn metrics(&self) -> &Arc<JobMetrics> {
        &self.metrics
    }

    /// Waits for the job's end.
    ///
    /// # Errors
    /// The root cause when a task failed (secondary "channel closed" errors are not reported
    /// when a primary error exists).
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
    /// until checkpoints exist, state does not outlive a run.
    pub state_dir: Option<PathBuf>,
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
/// bounded queue of `channel_capacity` messages.
///
/// # Errors
/// When an operator instance or a sink writer cannot be created.
pub async fn start_with(job: PreparedJob, options: RunOptions) -> Result<RunningJob> {
    let plan = job.partitioned().clone();
    let (state_dir, temporary_state) = match options.state_dir {
        Some(dir) => (dir, false),
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
    let capacity = plan.channel_capacity.max(1) as usize;

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
    let assigned: HashMap<VertexId, Vec<Vec<SourceSplit>>> = plan
        .vertices
        .iter()
        .filter_map(|vertex| {
            let all = job.splits.get(&vertex.chain[0].operator_id)?;
            metrics.add_splits(all.len(), all.iter().filter_map(|s| s.size_bytes).sum());
            Some((
                vertex.vertex_id.clone(),
                assign_splits(all.clone(), vertex.parallelism),
            ))
        })
        .collect();
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
    for vertex in &plan.vertices {
        let splits = assigned.get(&vertex.vertex_id);
        for subtask in 0..vertex.parallelism {
            if finished.contains(&(vertex.vertex_id.clone(), subtask)) {
                continue;
            }
            let task = build_task(
                &job,
                vertex,
                subtask,
                &state_dir,
                splits.as_ref().map(|s| s[subtask as usize].clone()),
                &plan.edges,
                &mut senders,
                &mut receivers,
                &metrics,
                &finished,
            )
            .await?;
            tasks.push(task);
        }
    }
    // Every sender now lives in a task; dropping the map's leftovers (none) closes nothing early.
    drop(senders);

    let job_id = plan.job_id.to_string();
    let live = metrics.clone();
    let handle = tokio::spawn(async move {
        let started = Instant::now();
        let mut set = JoinSet::new();
        let mut labels = HashMap::new();
        for task in tasks {
            let label = task.label.clone();
            let handle = set.spawn(task.run());
            labels.insert(handle.id(), label);
        }
        let mut first: Option<Error> = None;
        while let Some(joined) = set.join_next().await {
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
        if temporary_state
            && let Err(e) = std::fs::remove_dir_all(&state_dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %state_dir.display(), error = %e, "removing the state directory failed");
        }
        match first {
            Some(e) => Err(e),
            None => Ok(JobSummary {
                job_id,
                wall_time: started.elapsed(),
                metrics: live.snapshot(),
            }),
        }
    });
    Ok(RunningJob { metrics, handle })
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
fn assign_splits(splits: Vec<SourceSplit>, parallelism: u32) -> Vec<Vec<SourceSplit>> {
    let mut out = vec![Vec::new(); parallelism as usize];
    for (i, s) in splits.into_iter().enumerate() {
        out[i % parallelism as usize].push(s);
    }
    out
}

#[allow(clippy::too_many_arguments)]
async fn build_task(
    job: &PreparedJob,
    vertex: &PlanVertex,
    subtask: u32,
    state_dir: &std::path::Path,
    splits: Option<Vec<SourceSplit>>,
    edges: &[PlanEdge],
    senders: &mut HashMap<ChannelId, mpsc::Sender<StreamMessage>>,
    receivers: &mut HashMap<ChannelId, mpsc::Receiver<StreamMessage>>,
    metrics: &Arc<JobMetrics>,
    finished: &HashSet<(VertexId, u32)>,
) -> Result<ChainTask> {
    let plan = job.partitioned();
    let task_state = TaskState::new(
        state_dir.to_path_buf(),
        vertex.tasks[subtask as usize].clone(),
    );
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
                    InputChannel::finished(rx, edge.to_input as usize)
                } else {
                    InputChannel::new(rx, edge.to_input as usize)
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
                let writer = prepared
                    .create_writer(&ctx)
                    .await
                    .map_err(|source| Error::Task {
                        task: label.clone(),
                        source,
                    })?;
                sink = Some(SinkLink {
                    writer,
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
    })
}
