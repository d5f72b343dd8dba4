//! The StreamGraph: the logical DAG with resolved parallelism and edge policies.

use crate::error::{Error, Result};
use crate::fingerprint::Plan;
use crate::model::{ModelNode, NodeKind, StreamModel};
use crate::spec::PartitionSpec;
use serde::{Deserialize, Serialize};
use weir_api::{EdgeId, JobId, OperatorId, PipelineId, SemanticMode};

/// How rows travel along an edge, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE", tag = "policy")]
pub enum EdgePolicy {
    /// Upstream subtask i to downstream subtask i; parallelisms are equal.
    Forward,
    /// Rows by key -> state shard -> owner subtask.
    Hash {
        /// Key columns, in order.
        keys: Vec<String>,
    },
    /// Batches round-robin over all downstream subtasks.
    Rebalance,
    /// Every batch to every downstream subtask.
    Broadcast,
    /// One of several inputs merged into a node: pointwise where parallelisms are equal,
    /// otherwise round-robin over every downstream subtask.
    Union,
    /// Everything to downstream subtask 0 (downstream parallelism is 1).
    Singleton,
}

/// A node of the stream graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamNode {
    /// The model node (id, type, options, origin).
    #[serde(flatten)]
    pub node: ModelNode,
    /// Resolved parallelism.
    pub resolved_parallelism: u32,
}

/// An edge of the stream graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamEdge {
    /// Stable edge id: `{from}[.{output}]->{to}#{input}`.
    pub edge_id: EdgeId,
    /// Upstream operator.
    pub from: OperatorId,
    /// Upstream side output, `None` for the main output.
    pub from_output: Option<String>,
    /// Downstream operator.
    pub to: OperatorId,
    /// Input index at the downstream operator.
    pub to_input: u32,
    /// Resolved policy.
    #[serde(flatten)]
    pub policy: EdgePolicy,
}

/// The logical DAG, nodes in topological order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamGraph {
    /// The job.
    pub job_id: JobId,
    /// The pipeline lineage.
    pub pipeline_id: PipelineId,
    /// State shards per keyed vertex.
    pub state_shard_count: u32,
    /// Channel capacity in messages.
    pub channel_capacity: u32,
    /// Required delivery guarantee, if declared.
    pub semantic_mode: Option<SemanticMode>,
    /// Nodes in topological order.
    pub nodes: Vec<StreamNode>,
    /// Edges in order of their downstream node, then input index.
    pub edges: Vec<StreamEdge>,
}

impl Plan for StreamGraph {}

impl StreamGraph {
    /// Resolves parallelism and edge policies of a model.
    ///
    /// Parallelism: the node's own, else the job's; a node fed by a SINGLETON edge has 1.
    /// Policies: as asked; otherwise UNION for nodes with several inputs, FORWARD where
    /// parallelisms are equal, REBALANCE where they differ.
    ///
    /// `file` names the spec in errors.
    ///
    /// # Errors
    /// [`Error::Spec`] for FORWARD between unequal parallelisms or SINGLETON into a node with an
    /// explicit parallelism above 1.
    pub fn from_model(model: &StreamModel, file: &str) -> Result<StreamGraph> {
        let err = |path: String, message: String| Error::Spec {
            file: file.to_owned(),
            path,
            message,
        };
        let order = topological(model);
        let mut parallelism: Vec<u32> = vec![0; model.nodes.len()];
        let index_of = |id: &OperatorId| model.nodes.iter().position(|n| &n.operator_id == id);
        for &i in &order {
            let n = &model.nodes[i];
            let singleton = n
                .inputs
                .iter()
                .any(|inp| inp.partition == Some(PartitionSpec::Singleton));
            parallelism[i] = match (singleton, n.parallelism) {
                (true, Some(p)) if p > 1 => {
                    return Err(err(
                        format!("{}.parallelism", n.origin),
                        format!("is {p}, but a singleton input needs parallelism 1"),
                    ));
                }
                (true, _) => 1,
                (false, Some(p)) => p,
                (false, None) => model.parallelism,
            };
        }
        let mut edges = Vec::new();
        for &i in &order {
            let n = &model.nodes[i];
            for (k, input) in n.inputs.iter().enumerate() {
                let Some(u) = index_of(&input.node) else {
                    return Err(err(
                        format!("{}.inputs[{k}]", n.origin),
                        format!("unknown node `{}`", input.node),
                    ));
                };
                let (up, down) = (parallelism[u], parallelism[i]);
                let policy = match &input.partition {
                    Some(PartitionSpec::Forward) => {
                        if up != down {
                            return Err(err(
                                input
                                    .partition_at
                                    .clone()
                                    .unwrap_or_else(|| format!("{}.partition", n.origin)),
                                format!(
                                    "forward needs equal parallelism, but `{}` has {up} and `{}` has {down}",
                                    input.node, n.operator_id
                                ),
                            ));
                        }
                        EdgePolicy::Forward
                    }
                    Some(PartitionSpec::Hash(keys)) => EdgePolicy::Hash { keys: keys.clone() },
                    Some(PartitionSpec::Rebalance) => EdgePolicy::Rebalance,
                    Some(PartitionSpec::Broadcast) => EdgePolicy::Broadcast,
                    Some(PartitionSpec::Singleton) => EdgePolicy::Singleton,
                    None if n.inputs.len() > 1 => EdgePolicy::Union,
                    None if up == down => EdgePolicy::Forward,
                    None => EdgePolicy::Rebalance,
                };
                let edge_id = match &input.output {
                    Some(o) => format!("{}.{o}->{}#{k}", input.node, n.operator_id),
                    None => format!("{}->{}#{k}", input.node, n.operator_id),
                };
                edges.push(StreamEdge {
                    edge_id: EdgeId::new(edge_id),
                    from: input.node.clone(),
                    from_output: input.output.clone(),
                    to: n.operator_id.clone(),
                    to_input: k as u32,
                    policy,
                });
            }
        }
        let nodes = order
            .iter()
            .map(|&i| StreamNode {
                node: model.nodes[i].clone(),
                resolved_parallelism: parallelism[i],
            })
            .collect();
        Ok(StreamGraph {
            job_id: model.job_id.clone(),
            pipeline_id: model.pipeline_id.clone(),
            state_shard_count: model.state_shard_count,
            channel_capacity: model.channel_capacity,
            semantic_mode: model.semantic_mode,
            nodes,
            edges,
        })
    }

    /// The node with operator id `id`.
    pub fn node(&self, id: &OperatorId) -> Option<&StreamNode> {
        self.nodes.iter().find(|n| &n.node.operator_id == id)
    }

    /// Edges leaving `id`.
    pub fn outputs_of<'a>(&'a self, id: &'a OperatorId) -> impl Iterator<Item = &'a StreamEdge> {
        self.edges.iter().filter(move |e| &e.from == id)
    }

    /// Edges entering `id`.
    pub fn inputs_of<'a>(&'a self, id: &'a OperatorId) -> impl Iterator<Item = &'a StreamEdge> {
        self.edges.iter().filter(move |e| &e.to == id)
    }
}

/// Topological order of a validated model (the model checked acyclicity), ties by declaration.
fn topological(model: &StreamModel) -> Vec<usize> {
    let n = model.nodes.len();
    let mut placed = vec![false; n];
    let mut order = Vec::with_capacity(n);
    while order.len() < n {
        let before = order.len();
        for i in 0..n {
            if placed[i] {
                continue;
            }
            let ready = model.nodes[i].inputs.iter().all(|inp| {
                model
                    .nodes
                    .iter()
                    .position(|m| m.operator_id == inp.node)
                    .is_none_or(|u| placed[u])
            });
            if ready {
                placed[i] = true;
                order.push(i);
                break;
            }
        }
        if order.len() == before {
            // Only reachable for a hand-edited cyclic model: keep the rest in declaration order.
            order.extend((0..n).filter(|&i| !placed[i]));
        }
    }
    order
}

/// Whether a node kind may be the head of a chain continuing into `to`.
pub(crate) fn chainable(from: &StreamNode, to: &StreamNode) -> bool {
    to.node.kind != NodeKind::Source && from.node.kind != NodeKind::Sink
}
