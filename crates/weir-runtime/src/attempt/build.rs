//! Step 5 of an attempt: build each task that starts. A task is its vertex's chain of
//! operators (a source head or an input gate, the operators, a sink or edge writers), wired to
//! the channels of its subtask.

use super::TaskKey;
use super::channels::Channels;
use super::coordinate::commits_by_epoch;
use super::fence::CheckpointWiring;
use super::restore::TaskImages;
use super::splits::{SplitAssignment, source_alignments};
use crate::checkpoint::{TaskCheckpointing, sink_staging};
use crate::edge_writer::{Distribution, EdgeWriter};
use crate::error::{Error, Result};
use crate::event_time::SourceAlignment;
use crate::input_gate::{InputChannel, InputGate};
use crate::metrics::{JobMetrics, SubtaskMetrics};
use crate::partition::{HashPartitioner, RoundRobin};
use crate::prepare::{PreparedJob, PreparedNode};
use crate::run_context::RunContext;
use crate::schema_check::SchemaCheck;
use crate::task::{ChainParts, ChainTask, Head, Link, SinkLink, SourceHead};
use crate::task_state::TaskState;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use weir_api::{
    ChannelId, OperatorId, PreparedOperator, PreparedSink, PreparedSource, SubtaskIndex,
    TaskContext, VertexId,
};
use weir_plan::{ModelNode, NodeKind, PartitionPolicy, PlanEdge, PlanVertex};

/// Builds the tasks of one attempt from what every task shares.
pub(super) struct TaskBuilder<'a> {
    job: &'a PreparedJob,
    metrics: &'a Arc<JobMetrics>,
    never_started: &'a HashSet<TaskKey>,
    splits: &'a SplitAssignment,
    checkpoints: Option<&'a CheckpointWiring>,
    alignments: HashMap<VertexId, Arc<SourceAlignment>>,
}

/// One subtask of a vertex being built, with what is its own.
struct Subtask<'a> {
    vertex: &'a PlanVertex,
    index: u32,
    state: Arc<TaskState>,
    images: TaskImages,
    /// Its part in the attempt's epochs, when the job checkpoints.
    checkpointing: Option<TaskCheckpointing>,
}

impl Subtask<'_> {
    /// How errors name the subtask while it is built.
    fn name(&self) -> String {
        format!("{}[{}]", self.vertex.vertex_id, self.index)
    }
}

/// The edge writers of each output port of a chain's operators: (operator, side output or
/// `None` for the main output) to indices into the task's writers.
#[derive(Default)]
struct PortWriters(HashMap<(OperatorId, Option<String>), Vec<usize>>);

impl PortWriters {
    fn of(&self, operator: &OperatorId, port: Option<&str>) -> Vec<usize> {
        self.0
            .get(&(operator.clone(), port.map(str::to_owned)))
            .cloned()
            .unwrap_or_default()
    }
}

/// The head, operators and sink of a chain.
#[derive(Default)]
struct Chain {
    head: Option<Head>,
    links: Vec<Link>,
    sink: Option<SinkLink>,
}

impl<'a> TaskBuilder<'a> {
    pub(super) fn new(
        run: &'a RunContext,
        never_started: &'a HashSet<TaskKey>,
        splits: &'a SplitAssignment,
        checkpoints: Option<&'a CheckpointWiring>,
    ) -> Self {
        TaskBuilder {
            job: &run.job,
            metrics: &run.metrics,
            never_started,
            splits,
            checkpoints,
            alignments: source_alignments(&run.job, never_started),
        }
    }

    /// Builds subtask `subtask` of `vertex`, taking its channels' ends from `channels`.
    pub(super) async fn build(
        &self,
        channels: &mut Channels,
        vertex: &PlanVertex,
        subtask: u32,
        state: Arc<TaskState>,
        images: TaskImages,
    ) -> Result<ChainTask> {
        let task = Subtask {
            vertex,
            index: subtask,
            state,
            images,
            checkpointing: self.checkpoints.map(|w| w.for_task(vertex)),
        };
        // The task's times (idle, busy, backpressured) and input watermark count on its
        // chain's first operator.
        let head_metrics = match vertex.chain.first() {
            Some(n) => self.metrics.subtask(&n.operator_id, subtask),
            None => SubtaskMetrics::default(),
        };
        head_metrics.mark_head();
        let (writers, ports) = self.edge_writers(channels, &task, &head_metrics)?;
        let gate_channels = self.gate_channels(channels, &task);
        let mut chain = Chain::default();
        for node in &vertex.chain {
            self.add_to_chain(&mut chain, node, &task, &ports).await?;
        }
        let tail_writers = vertex
            .chain
            .last()
            .map(|n| ports.of(&n.operator_id, None))
            .unwrap_or_default();
        let head = chain.head.unwrap_or_else(|| {
            let gate = InputGate::new(gate_channels);
            Head::Gate(
                if chain
                    .links
                    .first()
                    .is_some_and(|l| l.op.reads_input_watermarks())
                {
                    gate.with_input_watermarks()
                } else {
                    gate
                },
            )
        });
        Ok(ChainTask::new(ChainParts {
            label: format!("{}[{subtask}/{}]", vertex.vertex_id, vertex.parallelism),
            head,
            links: chain.links,
            sink: chain.sink,
            tail_writers,
            writers,
            job_metrics: self.metrics.clone(),
            head_metrics,
            state: task.state,
            task_id: vertex.tasks[subtask as usize].clone(),
            operators: vertex.chain.iter().map(|n| n.operator_id.clone()).collect(),
            checkpointing: task.checkpointing,
        }))
    }

    /// The operator context of `operator` in `task`.
    fn context(&self, operator: &OperatorId, task: &Subtask<'_>) -> TaskContext {
        let vertex = task.vertex;
        let subtask = self.metrics.subtask(operator, task.index);
        TaskContext {
            job_id: self.job.partitioned().job_id.clone(),
            operator_id: operator.clone(),
            subtask: SubtaskIndex(task.index),
            parallelism: vertex.parallelism,
            state: Some(task.state.clone() as Arc<dyn weir_api::StateBackendHandle>),
            state_shard_count: vertex.shards.as_ref().map(|s| s.state_shard_count),
            dropped_rows: self.metrics.operator(operator).dropped_rows(),
            late_routed_rows: subtask.late_routed_rows(),
            late_updated_rows: subtask.late_updated_rows(),
            restored_image: task.images.get(operator).cloned(),
            staging: None,
            lane: self.job.lane.clone(),
        }
    }

    /// Writers for every edge leaving the task's vertex, from the task's channels in the order
    /// of their downstream subtasks.
    fn edge_writers(
        &self,
        channels: &mut Channels,
        task: &Subtask<'_>,
        metrics: &SubtaskMetrics,
    ) -> Result<(Vec<EdgeWriter>, PortWriters)> {
        let subtask = task.index;
        let mut writers = Vec::new();
        let mut ports = PortWriters::default();
        let edges = &self.job.partitioned().edges;
        for edge in edges
            .iter()
            .filter(|e| e.from_vertex == task.vertex.vertex_id)
        {
            let mut mine: Vec<&ChannelId> = edge
                .channels
                .iter()
                .filter(|c| c.upstream.0 == subtask)
                .collect();
            mine.sort_by_key(|c| c.downstream);
            let senders: Vec<_> = mine
                .iter()
                .filter_map(|c| channels.take_sender(c))
                .collect();
            if senders.len() != mine.len() || senders.is_empty() {
                return Err(internal(
                    task,
                    format!(
                        "edge {} has no channel from subtask {subtask}",
                        edge.edge_id
                    ),
                ));
            }
            let distribution = self.distribution(edge, senders.len(), task)?;
            ports
                .0
                .entry((edge.from_operator.clone(), edge.from_output.clone()))
                .or_default()
                .push(writers.len());
            writers.push(EdgeWriter {
                distribution,
                senders,
                metrics: metrics.clone(),
            });
        }
        Ok((writers, ports))
    }

    /// How `task` deals its output on `edge` out to `channels` channels.
    fn distribution(
        &self,
        edge: &PlanEdge,
        channels: usize,
        task: &Subtask<'_>,
    ) -> Result<Distribution> {
        Ok(match &edge.policy {
            PartitionPolicy::Forward | PartitionPolicy::Singleton => Distribution::Single,
            PartitionPolicy::Union if channels == 1 => Distribution::Single,
            PartitionPolicy::Broadcast => Distribution::Broadcast,
            PartitionPolicy::Rebalance | PartitionPolicy::Union => Distribution::RoundRobin(
                RoundRobin::starting_at(channels, task.index as usize % channels),
            ),
            PartitionPolicy::Hash { keys, shards } => {
                let schema =
                    &self.job.schemas[&(edge.from_operator.clone(), edge.from_output.clone())];
                let key_indices = keys
                    .iter()
                    .map(|k| schema.index_of(k))
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|e| Error::Task {
                        task: task.name(),
                        source: weir_api::Error::arrow("resolving hash keys", e),
                    })?;
                let p = HashPartitioner::try_new(key_indices, shards.owner_table(), channels)
                    .map_err(|source| Error::Task {
                        task: task.name(),
                        source,
                    })?;
                Distribution::Hash(p)
            }
        })
    }

    /// The task's input channels, in channel-index order; a channel from a task that never
    /// starts is ended from the start.
    fn gate_channels(&self, channels: &mut Channels, task: &Subtask<'_>) -> Vec<InputChannel> {
        self.job
            .partitioned()
            .input_channels(&task.vertex.vertex_id, task.index)
            .into_iter()
            .filter_map(|(edge, ch)| {
                channels.take_receiver(ch).map(|rx| {
                    let input = edge.to_input as usize;
                    let upstream = TaskKey::new(&edge.from_vertex, ch.upstream.0);
                    if self.never_started.contains(&upstream) {
                        InputChannel::finished(rx, input).with_id(ch.clone())
                    } else {
                        InputChannel::new(rx, input).with_id(ch.clone())
                    }
                })
            })
            .collect()
    }

    /// Adds `node`, prepared, to the chain: its head, one of its operators or its sink.
    async fn add_to_chain(
        &self,
        chain: &mut Chain,
        node: &ModelNode,
        task: &Subtask<'_>,
        ports: &PortWriters,
    ) -> Result<()> {
        let id = &node.operator_id;
        match (&node.kind, self.job.nodes.get(id)) {
            (NodeKind::Source, Some(PreparedNode::Source(source))) => {
                chain.head = Some(self.source_head(source, node, task, ports));
            }
            (NodeKind::Operator, Some(PreparedNode::Operator(prepared))) => {
                chain.links.push(self.link(prepared, id, task, ports)?);
            }
            (NodeKind::Sink, Some(PreparedNode::Sink(prepared))) => {
                chain.sink = Some(self.sink(prepared, id, task).await?);
            }
            _ => {
                return Err(Error::Task {
                    task: self.context(id, task).label(),
                    source: weir_api::Error::Internal(format!("operator {id} was not prepared")),
                });
            }
        }
        Ok(())
    }

    /// The head of a source subtask: the reader of its splits.
    fn source_head(
        &self,
        source: &Arc<dyn PreparedSource>,
        node: &ModelNode,
        task: &Subtask<'_>,
        ports: &PortWriters,
    ) -> Head {
        let id = &node.operator_id;
        let vertex = task.vertex;
        let one_stream = self.job.reads_as_one_stream(id);
        Head::Source(Box::new(SourceHead {
            source: source.clone(),
            ctx: self.context(id, task),
            splits: self.splits.of_subtask(&vertex.vertex_id, task.index),
            metrics: self.metrics.subtask(id, task.index),
            dead_letter_writers: ports.of(id, Some("dead_letter")),
            watermark: node.watermark.clone(),
            alignment: self.alignments.get(&vertex.vertex_id).cloned(),
            known_splits: self.splits.known(id),
            share: self.job.split_share,
            one_stream,
            watermark_read: self.job.watermark_is_read(id),
            decoders: if one_stream {
                vertex.parallelism as usize
            } else {
                1
            },
        }))
    }

    /// An operator of the chain, created from its prepared form.
    fn link(
        &self,
        prepared: &Arc<dyn PreparedOperator>,
        id: &OperatorId,
        task: &Subtask<'_>,
        ports: &PortWriters,
    ) -> Result<Link> {
        let ctx = self.context(id, task);
        let label = ctx.label();
        let op = prepared.create(&ctx).map_err(|source| Error::Task {
            task: label.clone(),
            source,
        })?;
        Ok(Link {
            op,
            operator: id.clone(),
            label,
            metrics: self.metrics.subtask(id, task.index),
            port_schemas: std::iter::once(prepared.output_schema())
                .chain(prepared.side_outputs().iter().map(|s| s.schema.clone()))
                .map(SchemaCheck::new)
                .collect(),
            side_writers: prepared
                .side_outputs()
                .iter()
                .map(|s| ports.of(id, Some(&s.name)))
                .collect(),
        })
    }

    /// The sink at the end of the chain; with checkpoints a sink that commits by epoch stages
    /// its output in the checkpoint store.
    async fn sink(
        &self,
        prepared: &Arc<dyn PreparedSink>,
        id: &OperatorId,
        task: &Subtask<'_>,
    ) -> Result<SinkLink> {
        let checkpointing = task.checkpointing.as_ref();
        let ctx = TaskContext {
            staging: checkpointing.map(|cp| sink_staging(&cp.store, id, SubtaskIndex(task.index))),
            ..self.context(id, task)
        };
        let label = ctx.label();
        let failed = |source| Error::Task {
            task: label.clone(),
            source,
        };
        let mut writer = prepared.create_writer(&ctx).await.map_err(failed)?;
        let epochs = checkpointing.is_some() && commits_by_epoch(prepared.as_ref());
        if epochs {
            writer.begin_epochs().await.map_err(failed)?;
        }
        Ok(SinkLink {
            writer,
            operator_id: id.clone(),
            epochs,
            label,
            metrics: self.metrics.subtask(id, task.index),
        })
    }
}

/// An internal error of building `task`: the plan and its channels disagree.
fn internal(task: &Subtask<'_>, message: String) -> Error {
    Error::Task {
        task: task.name(),
        source: weir_api::Error::Internal(message),
    }
}
