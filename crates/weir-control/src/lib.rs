//! Weir's control plane on the wire: the bodies of the Hub's REST API, the Agent protocol (leases,
//! sessions, commands, reports with generation fencing), the job manifest the Hub publishes for a
//! job-level checkpoint, and [`HubClient`], which calls the Hub.
//!
//! Both sides share these types: the Hub (`weir-hub`) serves them and generates its OpenAPI
//! document from their [`utoipa::ToSchema`] derivations; the Agent and the `weir jobs` CLI call
//! the Hub through [`HubClient`]. Every body is JSON with camelCase field names.

mod agent;
mod client;
mod error;
mod jobs;
mod live;
mod manifest;

pub use agent::{
    AgentCapabilities, AgentEntry, AgentState, AllowedPlaces, AssignedLane, CHECKPOINT_PROTOCOL,
    Command, CommandAction, CommandOutcome, HeartbeatAck, LaneState, RUNTIME_VERSION,
    RegisterAgent, Registration, ReportAck, ReportBatch, ReportItem, Restore, STATE_BACKEND_REDB,
    STATE_BACKEND_REDIS, lane_job_id,
};
pub use client::HubClient;
pub use error::{ApiError, ControlError, Result};
pub use jobs::{
    Assignment, CheckpointAccepted, CheckpointKind, CheckpointRequest, DesiredState,
    DesiredStateChange, JobDetail, JobSummary, JobVersion, LANE_HISTORY, LaneRecord, ObservedPhase,
    ObservedState, RecoveryRecord, SavepointRequest, StateActions, SubmitJob, UpgradePreview,
    UpgradeRecord, UpgradeRequest, UpgradeState, ValidateRequest, ValidateResult, ValidationError,
};
pub use live::{
    CheckpointsView, HISTORY_SAMPLES, JobMetricsView, LaneCheckpoints, LaneMetrics, LaneReading,
    ManifestView, MetricsAck, MetricsHistory, MetricsPush, MetricsQuery, MetricsSample,
    OperatorReading, SplitReading, SubtaskSample, UiConfig, UiMode, retained_epochs,
};
pub use manifest::{JobManifest, JobManifestBody, MANIFEST_DIR};
