//! The DeploymentPlan: which node runs each task, over which transport. The runtime runs the
//! tasks it places on the local node and refuses a plan that places them anywhere else.

use crate::fingerprint::Plan;
use crate::partitioned::PartitionedPlan;
use serde::{Deserialize, Serialize};
use weir_api::{JobId, PipelineId, TaskId};

/// How tasks exchange batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// Bounded in-process queues (one process runs every task).
    LocalQueue,
}

/// A process that runs tasks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeNode {
    /// Node id (`local` for the single-process backend).
    pub node_id: String,
    /// Transport its tasks use.
    pub transport: Transport,
}

/// One task placed on a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskAssignment {
    /// The stable task.
    pub task: TaskId,
    /// Node that runs it.
    pub node_id: String,
}

/// The deployment plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentPlan {
    /// The job.
    pub job_id: JobId,
    /// The pipeline lineage.
    pub pipeline_id: PipelineId,
    /// Fingerprint of the PartitionedPlan deployed.
    pub partitioned_plan_fingerprint: String,
    /// Nodes.
    pub nodes: Vec<RuntimeNode>,
    /// Every task's node.
    pub assignments: Vec<TaskAssignment>,
    /// Capacity of each channel in messages.
    pub channel_capacity: u32,
}

impl Plan for DeploymentPlan {}

impl DeploymentPlan {
    /// Places every task on the single local node with in-process queues.
    pub fn local(plan: &PartitionedPlan) -> DeploymentPlan {
        DeploymentPlan {
            job_id: plan.job_id.clone(),
            pipeline_id: plan.pipeline_id.clone(),
            partitioned_plan_fingerprint: plan.fingerprint(),
            nodes: vec![RuntimeNode {
                node_id: "local".into(),
                transport: Transport::LocalQueue,
            }],
            assignments: plan
                .checkpoint_ack_set
                .iter()
                .map(|t| TaskAssignment {
                    task: t.clone(),
                    node_id: "local".into(),
                })
                .collect(),
            channel_capacity: plan.channel_capacity,
        }
    }
}
