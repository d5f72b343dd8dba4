//! The PartitionedPlan: the one source of parallelism, shards, edge channels and checkpoint ACKs.
//! The runtime executes it and never re-derives topology.

use crate::error::{Error, Result};
use crate::fingerprint::{Plan, sha256_hex};
use crate::job_graph::JobGraph;
use crate::model::{ModelNode, NodeKind};
use crate::schema_spec::FieldSpec;
use crate::spec::{ComputedColumn, PartitionSpec};
use crate::stream_graph::{EdgePolicy, StreamGraph};
use serde::{Deserialize, Serialize};
use weir_api::{
    BadRecordPolicy, ChannelId, EdgeId, JobId, OperatorId, PipelineId, SemanticMode, SubtaskIndex,
    TaskId, VertexId,
};

/// Name of the key hash rule; part of every HASH edge so a future rule cannot be mixed up with it.
pub const HASH_POLICY: &str = "xxh64-normalized-v1";

/// A contiguous range of state shards owned by one subtask (bounds inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardRange {
    /// Owning subtask.
    pub subtask: u32,
    /// First shard.
    pub first_shard: u32,
    /// Last shard.
    pub last_shard: u32,
}

/// The state shards of a keyed vertex and who owns them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardAssignment {
    /// Hash rule (see [`HASH_POLICY`]).
    pub hash_policy: String,
    /// Number of shards.
    pub state_shard_count: u32,
    /// Owner of every shard, as ranges in subtask order.
    pub owners: Vec<ShardRange>,
}

impl ShardAssignment {
    /// Shards split into `parallelism` contiguous ranges of near-equal size.
    ///
    /// # Errors
    /// When `parallelism` exceeds `state_shard_count` (a subtask would own nothing).
    pub fn contiguous(
        state_shard_count: u32,
        parallelism: u32,
    ) -> std::result::Result<Self, String> {
        if parallelism > state_shard_count {
            return Err(format!(
                "parallelism {parallelism} exceeds state_shards {state_shard_count}; raise state_shards"
            ));
        }
        let (count, p) = (u64::from(state_shard_count), u64::from(parallelism));
        let owners = (0..p)
            .map(|s| ShardRange {
                subtask: s as u32,
                first_shard: (s * count / p) as u32,
                last_shard: ((s + 1) * count / p - 1) as u32,
            })
            .collect();
        Ok(ShardAssignment {
            hash_policy: HASH_POLICY.to_owned(),
            state_shard_count,
            owners,
        })
    }

    /// Owner subtask of every shard, indexed by shard id.
    pub fn owner_table(&self) -> Vec<u32> {
        let mut table = vec![0; self.state_shard_count as usize];
        for r in &self.owners {
            for s in r.first_shard..=r.last_shard {
                if let Some(slot) = table.get_mut(s as usize) {
                    *slot = r.subtask;
                }
            }
        }
        table
    }
}

/// How an edge distributes rows, with everything the runtime needs to do it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE", tag = "policy")]
pub enum PartitionPolicy {
    /// Subtask i to subtask i.
    Forward,
    /// Key -> shard -> owner.
    Hash {
        /// Key columns.
        keys: Vec<String>,
        /// Shards and owners of the downstream vertex.
        shards: ShardAssignment,
    },
    /// Batch round-robin.
    Rebalance,
    /// Every batch to every subtask.
    Broadcast,
    /// One of several inputs of a node: subtask i to subtask i where parallelisms are equal,
    /// otherwise batches round-robin over every downstream subtask.
    Union,
    /// Everything to subtask 0.
    Singleton,
}

/// A vertex with its subtasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanVertex {
    /// Stable vertex id.
    pub vertex_id: VertexId,
    /// Operators in chain order, with their types and options.
    pub chain: Vec<ModelNode>,
    /// Number of subtasks.
    pub parallelism: u32,
    /// Stable task ids, one per subtask.
    pub tasks: Vec<TaskId>,
    /// Shards owned per subtask, when the vertex is keyed (fed by a HASH edge).
    pub shards: Option<ShardAssignment>,
}

/// An edge with its channels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanEdge {
    /// Stable edge id.
    pub edge_id: EdgeId,
    /// Upstream vertex.
    pub from_vertex: VertexId,
    /// Emitting operator inside it.
    pub from_operator: OperatorId,
    /// Its side output, `None` for main.
    pub from_output: Option<String>,
    /// Downstream vertex.
    pub to_vertex: VertexId,
    /// Input index at the downstream head operator.
    pub to_input: u32,
    /// Distribution.
    #[serde(flatten)]
    pub policy: PartitionPolicy,
    /// Every channel of the edge.
    pub channels: Vec<ChannelId>,
}

/// The partitioned plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PartitionedPlan {
    /// The job.
    pub job_id: JobId,
    /// The pipeline lineage.
    pub pipeline_id: PipelineId,
    /// Channel capacity in messages.
    pub channel_capacity: u32,
    /// Required delivery guarantee, if declared.
    pub semantic_mode: Option<SemanticMode>,
    /// Vertices in topological order.
    pub vertices: Vec<PlanVertex>,
    /// Edges.
    pub edges: Vec<PlanEdge>,
    /// Tasks that must acknowledge every checkpoint.
    pub checkpoint_ack_set: Vec<TaskId>,
}

impl Plan for PartitionedPlan {}

impl PartitionedPlan {
    /// Expands a job graph into subtasks, shard ownership and channels; `file` names the spec in
    /// errors.
    ///
    /// # Errors
    /// [`Error::Spec`] when a keyed vertex has more subtasks than state shards.
    pub fn from_job_graph(
        graph: &JobGraph,
        stream: &StreamGraph,
        file: &str,
    ) -> Result<PartitionedPlan> {
        let task = |vertex: &VertexId, subtask: u32| TaskId {
            job: graph.job_id.clone(),
            pipeline: graph.pipeline_id.clone(),
            vertex: vertex.clone(),
            subtask: SubtaskIndex(subtask),
        };
        let parallelism_of = |v: &VertexId| {
            graph
                .vertices
                .iter()
                .find(|x| &x.vertex_id == v)
                .map_or(1, |x| x.parallelism)
        };
        let mut vertices = Vec::with_capacity(graph.vertices.len());
        for v in &graph.vertices {
            let keyed = graph
                .edges
                .iter()
                .any(|e| e.to_vertex == v.vertex_id && matches!(e.policy, EdgePolicy::Hash { .. }));
            let shards = if keyed {
                let head = stream.node(&v.chain[0]).map(|n| n.node.origin.clone());
                Some(
                    ShardAssignment::contiguous(graph.state_shard_count, v.parallelism).map_err(
                        |message| Error::Spec {
                            file: file.to_owned(),
                            path: format!("{}.parallelism", head.unwrap_or_default()),
                            message,
                        },
                    )?,
                )
            } else {
                None
            };
            vertices.push(PlanVertex {
                vertex_id: v.vertex_id.clone(),
                chain: v
                    .chain
                    .iter()
                    .filter_map(|id| stream.node(id).map(|n| n.node.clone()))
                    .collect(),
                parallelism: v.parallelism,
                tasks: (0..v.parallelism).map(|s| task(&v.vertex_id, s)).collect(),
                shards,
            });
        }

        // Channel indices count per downstream subtask over its input edges in input order.
        let mut next_index: std::collections::HashMap<(VertexId, u32), u32> = Default::default();
        let mut ordered: Vec<&crate::job_graph::JobEdge> = graph.edges.iter().collect();
        ordered.sort_by_key(|e| {
            let vpos = graph
                .vertices
                .iter()
                .position(|v| v.vertex_id == e.to_vertex);
            (vpos, e.to_input)
        });
        let mut edges = Vec::with_capacity(ordered.len());
        for e in ordered {
            let (up, down) = (parallelism_of(&e.from_vertex), parallelism_of(&e.to_vertex));
            let pairs: Vec<(u32, u32)> = match e.policy {
                EdgePolicy::Forward => (0..up).map(|i| (i, i)).collect(),
                EdgePolicy::Union if up == down => (0..up).map(|i| (i, i)).collect(),
                EdgePolicy::Singleton => (0..up).map(|i| (i, 0)).collect(),
                EdgePolicy::Union
                | EdgePolicy::Hash { .. }
                | EdgePolicy::Rebalance
                | EdgePolicy::Broadcast => (0..up)
                    .flat_map(|i| (0..down).map(move |j| (i, j)))
                    .collect(),
            };
            let channels = pairs
                .into_iter()
                .map(|(i, j)| {
                    let slot = next_index.entry((e.to_vertex.clone(), j)).or_insert(0);
                    let channel_index = *slot;
                    *slot += 1;
                    ChannelId {
                        edge: e.edge_id.clone(),
                        upstream: SubtaskIndex(i),
                        downstream: SubtaskIndex(j),
                        channel_index,
                    }
                })
                .collect();
            let policy = match &e.policy {
                EdgePolicy::Forward => PartitionPolicy::Forward,
                EdgePolicy::Rebalance => PartitionPolicy::Rebalance,
                EdgePolicy::Broadcast => PartitionPolicy::Broadcast,
                EdgePolicy::Union => PartitionPolicy::Union,
                EdgePolicy::Singleton => PartitionPolicy::Singleton,
                EdgePolicy::Hash { keys } => PartitionPolicy::Hash {
                    keys: keys.clone(),
                    shards: vertices
                        .iter()
                        .find(|v| v.vertex_id == e.to_vertex)
                        .and_then(|v| v.shards.clone())
                        .ok_or_else(|| Error::Spec {
                            file: file.to_owned(),
                            path: e.edge_id.to_string(),
                            message: "hash edge into a vertex without shards".into(),
                        })?,
                },
            };
            edges.push(PlanEdge {
                edge_id: e.edge_id.clone(),
                from_vertex: e.from_vertex.clone(),
                from_operator: e.from_operator.clone(),
                from_output: e.from_output.clone(),
                to_vertex: e.to_vertex.clone(),
                to_input: e.to_input,
                policy,
                channels,
            });
        }
        let checkpoint_ack_set = vertices.iter().flat_map(|v| v.tasks.clone()).collect();
        Ok(PartitionedPlan {
            job_id: graph.job_id.clone(),
            pipeline_id: graph.pipeline_id.clone(),
            channel_capacity: graph.channel_capacity,
            semantic_mode: graph.semantic_mode,
            vertices,
            edges,
            checkpoint_ack_set,
        })
    }

    /// Lowercase hex SHA-256 of the canonical JSON of the plan's *logical* part: what a
    /// checkpoint's state depends on, without anything that depends on parallelism. Two plans
    /// of one job at different parallelism have equal logical fingerprints, so a checkpoint
    /// of one can be restored into the other (a rescale); [`Plan::fingerprint`] tells them
    /// apart.
    ///
    /// Kept: job and pipeline ids, the semantic mode, every vertex's id and chain (operator
    /// ids, kinds, types, schemas, bad-record policies, options, watermarks, computed columns
    /// and the inputs as the user wrote them: upstream node, side output, declared
    /// partitioning), its hash rule and `stateShardCount`; every edge's emitting operator,
    /// side output, downstream vertex, input index and partitioning (hash keys, hash rule and
    /// `stateShardCount` of a HASH edge).
    ///
    /// Left out: parallelism (of vertices and of model nodes), tasks, shard owner ranges,
    /// channels, edge ids, the checkpoint ACK set, the channel capacity, where nodes are
    /// written in the spec, and sources' `prune` conditions (pruning skips only input the
    /// job's filters drop anyway and keeps cursors, so a checkpoint restores under other
    /// conditions). FORWARD and REBALANCE edges are one kind here: where the user
    /// did not declare a partitioning the planner picks one of them from the parallelisms, and
    /// neither keeps state; a declared one is part of the inputs. Chains are kept, so a
    /// parallelism change that changes chaining (operators of different parallelism do not
    /// chain) changes the logical fingerprint too.
    pub fn logical_fingerprint(&self) -> String {
        let view = LogicalPlan {
            job_id: &self.job_id,
            pipeline_id: &self.pipeline_id,
            semantic_mode: self.semantic_mode,
            vertices: self
                .vertices
                .iter()
                .map(|v| LogicalVertex {
                    vertex_id: &v.vertex_id,
                    chain: v.chain.iter().map(LogicalNode::from).collect(),
                    shards: v.shards.as_ref().map(|s| LogicalShards {
                        hash_policy: &s.hash_policy,
                        state_shard_count: s.state_shard_count,
                    }),
                })
                .collect(),
            edges: self
                .edges
                .iter()
                .map(|e| LogicalEdge {
                    from_operator: &e.from_operator,
                    from_output: e.from_output.as_deref(),
                    to_vertex: &e.to_vertex,
                    to_input: e.to_input,
                    policy: LogicalPolicy::from(&e.policy),
                })
                .collect(),
        };
        // Serializing plain structs with string keys cannot fail.
        sha256_hex(&serde_json::to_vec(&view).unwrap_or_default())
    }

    /// The vertex with id `id`.
    pub fn vertex(&self, id: &VertexId) -> Option<&PlanVertex> {
        self.vertices.iter().find(|v| &v.vertex_id == id)
    }

    /// Input channels of subtask `subtask` of `vertex`, ordered by channel index.
    pub fn input_channels(&self, vertex: &VertexId, subtask: u32) -> Vec<(&PlanEdge, &ChannelId)> {
        let mut out: Vec<(&PlanEdge, &ChannelId)> = self
            .edges
            .iter()
            .filter(|e| &e.to_vertex == vertex)
            .flat_map(|e| e.channels.iter().map(move |c| (e, c)))
            .filter(|(_, c)| c.downstream.0 == subtask)
            .collect();
        out.sort_by_key(|(_, c)| c.channel_index);
        out
    }
}

/// The parallelism-free view of a [`PartitionedPlan`] that
/// [`PartitionedPlan::logical_fingerprint`] hashes; field order is the canonical order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LogicalPlan<'a> {
    job_id: &'a JobId,
    pipeline_id: &'a PipelineId,
    semantic_mode: Option<SemanticMode>,
    vertices: Vec<LogicalVertex<'a>>,
    edges: Vec<LogicalEdge<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LogicalVertex<'a> {
    vertex_id: &'a VertexId,
    chain: Vec<LogicalNode<'a>>,
    shards: Option<LogicalShards<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LogicalShards<'a> {
    hash_policy: &'a str,
    state_shard_count: u32,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LogicalNode<'a> {
    operator_id: &'a OperatorId,
    kind: NodeKind,
    type_name: &'a str,
    schema: Option<&'a [FieldSpec]>,
    bad_records: &'a BadRecordPolicy,
    inputs: Vec<LogicalInput<'a>>,
    options: &'a serde_json::Value,
    watermark: Option<&'a crate::model::ModelWatermark>,
    computed: &'a [ComputedColumn],
    #[serde(skip_serializing_if = "Option::is_none")]
    columns: Option<&'a [String]>,
}

impl<'a> From<&'a ModelNode> for LogicalNode<'a> {
    fn from(n: &'a ModelNode) -> Self {
        LogicalNode {
            operator_id: &n.operator_id,
            kind: n.kind,
            type_name: &n.type_name,
            schema: n.schema.as_deref(),
            bad_records: &n.bad_records,
            inputs: n
                .inputs
                .iter()
                .map(|i| LogicalInput {
                    node: &i.node,
                    output: i.output.as_deref(),
                    partition: i.partition.as_ref(),
                })
                .collect(),
            options: &n.options,
            watermark: n.watermark.as_ref(),
            computed: &n.computed,
            columns: n.columns.as_deref(),
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LogicalInput<'a> {
    node: &'a OperatorId,
    output: Option<&'a str>,
    partition: Option<&'a PartitionSpec>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LogicalEdge<'a> {
    from_operator: &'a OperatorId,
    from_output: Option<&'a str>,
    to_vertex: &'a VertexId,
    to_input: u32,
    #[serde(flatten)]
    policy: LogicalPolicy<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE", tag = "policy")]
enum LogicalPolicy<'a> {
    /// FORWARD or REBALANCE (see [`PartitionedPlan::logical_fingerprint`]).
    ForwardOrRebalance,
    #[serde(rename_all = "camelCase")]
    Hash {
        keys: &'a [String],
        hash_policy: &'a str,
        state_shard_count: u32,
    },
    Broadcast,
    Union,
    Singleton,
}

impl<'a> From<&'a PartitionPolicy> for LogicalPolicy<'a> {
    fn from(p: &'a PartitionPolicy) -> Self {
        match p {
            PartitionPolicy::Forward | PartitionPolicy::Rebalance => {
                LogicalPolicy::ForwardOrRebalance
            }
            PartitionPolicy::Hash { keys, shards } => LogicalPolicy::Hash {
                keys,
                hash_policy: &shards.hash_policy,
                state_shard_count: shards.state_shard_count,
            },
            PartitionPolicy::Broadcast => LogicalPolicy::Broadcast,
            PartitionPolicy::Union => LogicalPolicy::Union,
            PartitionPolicy::Singleton => LogicalPolicy::Singleton,
        }
    }
}
