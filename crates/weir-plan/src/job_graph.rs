//! The JobGraph: operators chained into vertices that each run as one task per subtask.

use crate::error::Result;
use crate::fingerprint::Plan;
use crate::stream_graph::{EdgePolicy, StreamGraph, chainable};
use serde::{Deserialize, Serialize};
use weir_api::{EdgeId, JobId, OperatorId, PipelineId, SemanticMode, VertexId};

/// A chain of operators run by one task per subtask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobVertex {
    /// Stable vertex id: the chain head's operator id.
    pub vertex_id: VertexId,
    /// Operators in chain order; each one's main output feeds the next.
    pub chain: Vec<OperatorId>,
    /// Parallelism shared by the whole chain.
    pub parallelism: u32,
}

/// An edge between two vertices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobEdge {
    /// The stream edge's id.
    pub edge_id: EdgeId,
    /// Upstream vertex.
    pub from_vertex: VertexId,
    /// Operator inside the upstream vertex that emits onto the edge.
    pub from_operator: OperatorId,
    /// Its side output, `None` for the main output.
    pub from_output: Option<String>,
    /// Downstream vertex (its head operator receives the edge).
    pub to_vertex: VertexId,
    /// Input index at the downstream head operator.
    pub to_input: u32,
    /// Policy.
    #[serde(flatten)]
    pub policy: EdgePolicy,
}

/// The chained job graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobGraph {
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
    /// Vertices in topological order.
    pub vertices: Vec<JobVertex>,
    /// Edges between vertices.
    pub edges: Vec<JobEdge>,
}

impl Plan for JobGraph {}

impl JobGraph {
    /// Chains operators: `a -> b` share a vertex when the edge is FORWARD from `a`'s main output,
    /// it is `a`'s only outgoing edge and `b`'s only input, and `b` is not a source.
    ///
    /// # Errors
    /// None today; kept fallible so later chaining rules can refuse graphs.
    pub fn from_stream_graph(graph: &StreamGraph) -> Result<JobGraph> {
        let chains_into = |from: &OperatorId| -> Option<OperatorId> {
            let mut outs = graph.outputs_of(from);
            let edge = outs.next()?;
            if outs.next().is_some() || edge.from_output.is_some() {
                return None;
            }
            if edge.policy != EdgePolicy::Forward || graph.inputs_of(&edge.to).count() != 1 {
                return None;
            }
            let (a, b) = (graph.node(from)?, graph.node(&edge.to)?);
            (chainable(a, b) && a.resolved_parallelism == b.resolved_parallelism)
                .then(|| edge.to.clone())
        };
        let mut vertex_of: std::collections::HashMap<OperatorId, VertexId> = Default::default();
        let mut vertices = Vec::new();
        for node in &graph.nodes {
            let id = &node.node.operator_id;
            if vertex_of.contains_key(id) {
                continue;
            }
            let vertex_id = VertexId::new(id.as_str());
            let mut chain = vec![id.clone()];
            let mut current = id.clone();
            while let Some(next) = chains_into(&current) {
                chain.push(next.clone());
                current = next;
            }
            for op in &chain {
                vertex_of.insert(op.clone(), vertex_id.clone());
            }
            vertices.push(JobVertex {
                vertex_id,
                chain,
                parallelism: node.resolved_parallelism,
            });
        }
        let edges = graph
            .edges
            .iter()
            .filter_map(|e| {
                let from_vertex = vertex_of.get(&e.from)?;
                let to_vertex = vertex_of.get(&e.to)?;
                (from_vertex != to_vertex).then(|| JobEdge {
                    edge_id: e.edge_id.clone(),
                    from_vertex: from_vertex.clone(),
                    from_operator: e.from.clone(),
                    from_output: e.from_output.clone(),
                    to_vertex: to_vertex.clone(),
                    to_input: e.to_input,
                    policy: e.policy.clone(),
                })
            })
            .collect();
        Ok(JobGraph {
            job_id: graph.job_id.clone(),
            pipeline_id: graph.pipeline_id.clone(),
            state_shard_count: graph.state_shard_count,
            channel_capacity: graph.channel_capacity,
            semantic_mode: graph.semantic_mode,
            vertices,
            edges,
        })
    }
}
