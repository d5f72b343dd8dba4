//! Weir's plan pipeline (docs/architecture.md): [`JobSpec`] -> [`StreamModel`] -> [`StreamGraph`] ->
//! [`JobGraph`] -> [`PartitionedPlan`] -> [`DeploymentPlan`], plus the stable key hash that routes
//! keys to state shards.
//!
//! This crate does no I/O (except [`JobSpec::from_file`] reading the spec) and depends on no
//! runtime: every plan is plain data that serializes to canonical JSON, round-trips byte for
//! byte, and has a fingerprint ([`Plan::fingerprint`]).
//!
//! ```
//! use weir_plan::{JobSpec, CompiledPlans, Plan};
//! let spec = JobSpec::from_yaml_str(r#"
//! job: demo
//! parallelism: 2
//! sources:
//!   - name: bids
//!     connector: datagen
//!     schema: [{ name: auction, type: int64 }]
//!     options: { rows: 10 }
//! sinks: [{ name: out, connector: blackhole, input: bids }]
//! "#, "demo.yaml").unwrap();
//! let plans = CompiledPlans::compile(&spec, Some("demo.yaml")).unwrap();
//! assert_eq!(plans.partitioned.vertices.len(), 1); // source and sink are chained
//! assert_eq!(plans.partitioned.checkpoint_ack_set.len(), 2);
//! ```

mod deployment;
mod error;
pub mod evolution;
mod fingerprint;
mod job_graph;
pub mod key_hash;
mod model;
mod partitioned;
mod schema_spec;
mod spec;
mod spec_builder;
mod spec_env;
pub mod sql_constants;
pub mod sql_depth;
pub mod sql_guard;
pub mod sql_redact;
mod state_backend;
mod stream_graph;

pub use deployment::{DeploymentPlan, RuntimeNode, TaskAssignment, Transport};
pub use error::{Error, Result};
pub use fingerprint::{Plan, canonicalize, sha256_hex};
pub use job_graph::{JobEdge, JobGraph, JobVertex};
pub use model::{
    DEFAULT_CHANNEL_CAPACITY, DEFAULT_STATE_SHARDS, IdOrigin, MAX_PARALLELISM, ModelInput,
    ModelNode, ModelWatermark, NodeKind, StreamModel,
};
pub use partitioned::{
    HASH_POLICY, PartitionPolicy, PartitionedPlan, PlanEdge, PlanVertex, ShardAssignment,
    ShardRange,
};
pub use schema_spec::{FieldSpec, parse_type_name, schema_from_fields};
pub use spec::{
    CheckpointSpec, ComputedColumn, DEFAULT_CHECKPOINT_RETAIN, DEFAULT_CHECKPOINT_TIMEOUT,
    DEFAULT_RESTART_ATTEMPTS, DEFAULT_RESTART_DELAY, DEFAULT_WATERMARK_INTERVAL, InputSpec,
    JobSpec, Lateness, OperatorSpec, PartitionSpec, RestartSpec, SinkSpec, SourceSpec,
    WatermarkSpec,
};
pub use spec_builder::JobSpecBuilder;
pub use spec_env::{EnvLookup, process_env};
pub use state_backend::{RedisStateSpec, StateBackendKind, StateBackendSpec};
pub use stream_graph::{EdgePolicy, StreamEdge, StreamGraph, StreamNode};

use serde::Serialize;

/// Every plan of a job, compiled from one spec.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompiledPlans {
    /// Canonical user intent.
    pub model: StreamModel,
    /// Logical DAG.
    pub stream_graph: StreamGraph,
    /// Chained graph.
    pub job_graph: JobGraph,
    /// Subtasks, shards, channels, ACK set.
    pub partitioned: PartitionedPlan,
    /// Placement on the local node.
    pub deployment: DeploymentPlan,
    /// Checkpoint settings from the spec (not part of any plan or fingerprint).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<CheckpointSpec>,
    /// Restart policy from the spec (not part of any plan or fingerprint).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart: Option<RestartSpec>,
    /// The keyed-state engine from the spec (not part of any plan or fingerprint).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<StateBackendSpec>,
}

impl CompiledPlans {
    /// Runs the whole pipeline for a spec; `file` names the spec in errors.
    ///
    /// # Errors
    /// The first [`Error`] of any stage, with the JSON path of the offending field.
    pub fn compile(spec: &JobSpec, file: Option<&str>) -> Result<CompiledPlans> {
        let model = StreamModel::from_spec(spec, file)?;
        let origin = file.unwrap_or(spec::BUILDER_ORIGIN);
        let stream_graph = StreamGraph::from_model(&model, origin)?;
        let job_graph = JobGraph::from_stream_graph(&stream_graph)?;
        let partitioned = PartitionedPlan::from_job_graph(&job_graph, &stream_graph, origin)?;
        let deployment = DeploymentPlan::local(&partitioned);
        spec::check_execution(spec, origin)?;
        Ok(CompiledPlans {
            model,
            stream_graph,
            job_graph,
            partitioned,
            deployment,
            checkpoint: spec.checkpoint.clone(),
            restart: spec.restart,
            state: spec.state.clone(),
        })
    }

    /// All plans with their fingerprints, as one JSON document for `weir plan`; each plan keeps
    /// its canonical field order.
    pub fn to_json_pretty(&self) -> String {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Fingerprints {
            stream_model: String,
            stream_graph: String,
            job_graph: String,
            partitioned_plan: String,
            deployment_plan: String,
        }
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Document<'a> {
            fingerprints: Fingerprints,
            stream_model: &'a StreamModel,
            stream_graph: &'a StreamGraph,
            job_graph: &'a JobGraph,
            partitioned_plan: &'a PartitionedPlan,
            deployment_plan: &'a DeploymentPlan,
        }
        let doc = Document {
            fingerprints: Fingerprints {
                stream_model: self.model.fingerprint(),
                stream_graph: self.stream_graph.fingerprint(),
                job_graph: self.job_graph.fingerprint(),
                partitioned_plan: self.partitioned.fingerprint(),
                deployment_plan: self.deployment.fingerprint(),
            },
            stream_model: &self.model,
            stream_graph: &self.stream_graph,
            job_graph: &self.job_graph,
            partitioned_plan: &self.partitioned,
            deployment_plan: &self.deployment,
        };
        serde_json::to_string_pretty(&doc).unwrap_or_default()
    }
}

#[cfg(test)]
mod plan_tests;
