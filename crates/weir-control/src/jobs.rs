//! Bodies of the jobs API: submit, validate, desired state, summaries and details, versions,
//! checkpoints and savepoints, upgrades and rollbacks.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// What a job should be doing; the Hub converges the Agents towards it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum DesiredState {
    /// No lane runs.
    #[default]
    Stopped,
    /// Every lane runs on some Agent.
    Running,
}

impl DesiredState {
    /// The name used on the wire and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            DesiredState::Stopped => "stopped",
            DesiredState::Running => "running",
        }
    }
}

/// `POST /api/v1/jobs`: a new job from a SQL script or a job spec (exactly one of the two).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubmitJob {
    /// The job's name, also its id (`[A-Za-z0-9_-]`, at most 64 characters); lane `i` runs as
    /// job `<name>-lane-<i>`.
    pub name: String,
    /// A SQL script (docs/sql.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sql: Option<String>,
    /// A job spec (docs/job-spec.md) as a JSON object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub spec: Option<serde_json::Value>,
    /// What the job should do once stored (default `stopped`).
    #[serde(default)]
    pub desired_state: DesiredState,
}

/// `POST /api/v1/jobs/validate`: check a SQL script or job spec as a distributed job, storing
/// nothing.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValidateRequest {
    /// The name the job would get (default `job`); it names the script in error messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A SQL script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sql: Option<String>,
    /// A job spec as a JSON object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub spec: Option<serde_json::Value>,
}

/// One problem validation found, located the way the engine locates it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValidationError {
    /// The engine's message.
    pub message: String,
    /// JSON path of the offending field of the spec (`sources[0].options.path`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// 1-based line in the SQL script or spec text, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// 1-based column in the SQL script or spec text, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<u64>,
}

/// The answer of validate: valid or not, and what the job would run as.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValidateResult {
    /// No error was found.
    pub valid: bool,
    /// Lanes the job runs as (its default parallelism), when it compiled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes: Option<u32>,
    /// Fingerprint of the partitioned plan, when it compiled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_fingerprint: Option<String>,
    /// What is wrong (empty when valid).
    pub errors: Vec<ValidationError>,
    /// What does not make the job invalid but keeps it from running now (no live Agent,
    /// an Agent whose capabilities do not fit).
    pub warnings: Vec<String>,
}

/// `PUT /api/v1/jobs/{job_id}/desired-state`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DesiredStateChange {
    /// The new desired state.
    pub desired_state: DesiredState,
    /// When given, the change applies only if this is still the job's generation (else 409):
    /// of two clients that read the same generation, one wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
}

/// How far a job is from its desired state, aggregated over the lanes of its current generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum ObservedPhase {
    /// Every lane reports running (or finished, with one still running).
    Running,
    /// Every lane is stopped (or the job never ran).
    Stopped,
    /// Every lane finished: its sources ended.
    Finished,
    /// A lane has not reported the desired state yet (being placed, starting, stopping, or on
    /// an Agent whose lease lapsed and being moved).
    Converging,
    /// A lane failed terminally; `cause` names it.
    Failed,
}

/// The observed state of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedState {
    /// The phase.
    pub phase: ObservedPhase,
    /// The root cause when failed: the first failed lane, its Agent and its message. While
    /// converging, why the first lane that waits for an Agent is not placed (`lane 0 waits
    /// for an Agent: no live Agent offers the `redis` state backend`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
}

/// A job as `GET /api/v1/jobs` and `GET /api/v1/jobs/{job_id}` show it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobSummary {
    /// The job's id (its name).
    pub job_id: String,
    /// What it should do.
    pub desired_state: DesiredState,
    /// The generation: bumped by every change of desired state and every re-placement; reports
    /// and conditional writes of an older one are refused.
    pub generation: u64,
    /// The id of the version it runs (or would run).
    pub current_version: String,
    /// Lanes of the current version.
    pub lanes: u32,
    /// What the lanes report.
    pub observed: ObservedState,
    /// Creation time (RFC 3339).
    pub created_at: String,
    /// When the Hub first sent a lane of the current generation to an Agent to run (RFC
    /// 3339): the start of the current run, which a new generation (a start, a
    /// re-placement) begins anew. `None` while the job is stopped or no lane was sent yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_since: Option<String>,
}

/// One immutable version of a job: its source and what it compiled to.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobVersion {
    /// The version's id.
    pub version_id: String,
    /// The job.
    pub job_id: String,
    /// 1 for the submitted version, then one more per upgrade.
    pub number: u32,
    /// The SQL script it was written as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sql: Option<String>,
    /// The compiled job spec (what the Agents build each lane from).
    #[schema(value_type = Object)]
    pub spec: serde_json::Value,
    /// Fingerprint of the partitioned plan.
    pub plan_fingerprint: String,
    /// Keyed-state format version the version writes.
    pub state_format_version: u32,
    /// Lanes (the spec's default parallelism).
    pub lanes: u32,
    /// Creation time (RFC 3339).
    pub created_at: String,
}

/// Where a lane of the current generation runs and what its Agent reported.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Assignment {
    /// The lane.
    pub lane: u32,
    /// The Agent it is placed on (`None`: waiting for an Agent that can take it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// `pending` until the Agent reports, then the lane state it reported.
    pub state: String,
    /// Why it failed or stopped, when reported; for a lane waiting for an Agent, why no
    /// Agent takes it (no live Agent, none offers the job's state backend, none's allow-lists
    /// take the job, no free slot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
}

/// A lane of one generation as the Hub last recorded it: the history of where a job ran, which
/// lanes failed and why, and the generations that followed (a start, a stop, a re-placement).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LaneRecord {
    /// The generation.
    pub generation: u64,
    /// The lane.
    pub lane: u32,
    /// The Agent it was placed on (`None`: it waited for a free slot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The last state recorded (`pending`, `starting`, `running`, `stopped`, `finished`,
    /// `failed`, `lost`).
    pub state: String,
    /// Why it failed or stopped, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// When that state was recorded (RFC 3339).
    pub updated_at: String,
}

/// Kind of a job-level checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum CheckpointKind {
    /// A checkpoint (periodic or requested): the newest one is what lanes restore after a move.
    Checkpoint,
    /// A named savepoint: an upgrade starts the new version from one.
    Savepoint,
}

impl CheckpointKind {
    /// The name used on the wire and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckpointKind::Checkpoint => "checkpoint",
            CheckpointKind::Savepoint => "savepoint",
        }
    }
}

/// A completed job-level checkpoint or savepoint: every lane of one generation reported its
/// durable epoch, and the job manifest is published.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecoveryRecord {
    /// The checkpoint's id (a savepoint's id, for upgrades).
    pub checkpoint_id: String,
    /// Checkpoint or savepoint.
    pub kind: CheckpointKind,
    /// The savepoint's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub savepoint_name: Option<String>,
    /// The version the lanes ran.
    pub version_id: String,
    /// The generation the lanes ran in.
    pub generation: u64,
    /// Keyed-state format version of the lanes' state.
    pub state_format_version: u32,
    /// Durable epoch of each lane.
    pub lane_epochs: BTreeMap<u32, u64>,
    /// Where the manifest is, in the job's checkpoint storage.
    pub manifest_path: String,
    /// SHA-256 of the manifest's canonical body.
    pub checksum: String,
    /// When the Hub asked for it (RFC 3339).
    pub created_at: String,
    /// When the last lane reported (RFC 3339).
    pub completed_at: String,
}

/// State of an upgrade.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum UpgradeState {
    /// The new version is current.
    Applied,
    /// Rolled back: the version before it is current again.
    RolledBack,
}

/// An upgrade, as recorded by the Hub.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeRecord {
    /// The upgrade's id.
    pub upgrade_id: String,
    /// The job.
    pub job_id: String,
    /// The version before.
    pub from_version: String,
    /// The version it made current.
    pub to_version: String,
    /// The savepoint the new version starts from.
    pub savepoint_id: String,
    /// Applied or rolled back.
    pub state: UpgradeState,
    /// When (RFC 3339).
    pub created_at: String,
}

/// `GET /api/v1/jobs/{job_id}/detail`: everything the Hub knows about a job.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobDetail {
    /// The summary.
    pub job: JobSummary,
    /// The current version.
    pub version: JobVersion,
    /// Every plan of the current version, with fingerprints (what `weir plan` prints).
    #[schema(value_type = Object)]
    pub plans: serde_json::Value,
    /// The lanes of the current generation.
    pub assignments: Vec<Assignment>,
    /// Completed job-level checkpoints and savepoints, newest first.
    pub recovery_records: Vec<RecoveryRecord>,
    /// Upgrades, newest first.
    pub upgrades: Vec<UpgradeRecord>,
    /// The lanes of the newest generations (at most [`LANE_HISTORY`] records), newest
    /// generation first: the job's starts, stops, failures and re-placements.
    #[serde(default)]
    pub lane_history: Vec<LaneRecord>,
}

/// How many lane records [`JobDetail::lane_history`] holds at most.
pub const LANE_HISTORY: usize = 100;

/// `POST /api/v1/jobs/{job_id}/checkpoints` (the body may be empty: `{}`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CheckpointRequest {}

/// `POST /api/v1/jobs/{job_id}/savepoints`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SavepointRequest {
    /// The savepoint's name (default: its id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// The answer to a checkpoint or savepoint request: the Agents were asked; it completes when
/// every lane reports (see the job's recovery records).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointAccepted {
    /// The id the lanes report against, and the recovery record's id once complete.
    pub checkpoint_id: String,
    /// Checkpoint or savepoint.
    pub kind: CheckpointKind,
    /// The generation whose lanes must report.
    pub generation: u64,
    /// Lanes that must report.
    pub lanes: u32,
}

/// `POST /api/v1/jobs/{job_id}/upgrades`: a new version (SQL or spec) started from a savepoint.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpgradeRequest {
    /// The new version as a SQL script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sql: Option<String>,
    /// The new version as a job spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub spec: Option<serde_json::Value>,
    /// A completed savepoint of the current version.
    pub savepoint_id: String,
    /// What the restore into the new version may do beyond keeping state, when the new
    /// version changes the job's logic.
    #[serde(default, skip_serializing_if = "StateActions::is_empty")]
    pub actions: StateActions,
}

/// What a restore into a changed job may do beyond keeping state (docs/fault-tolerance.md,
/// "Changing a job"): the `--allow-new-state`, `--drop-state` and `--map-operator` of
/// `weir run`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StateActions {
    /// Stateful operators the savepoint does not have may start empty.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_new_state: bool,
    /// Operators whose state in the savepoint is dropped (removed, or started empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drop_state: Vec<String>,
    /// The savepoint's operators that have another id in the new version, old -> new.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub map_operator: std::collections::BTreeMap<String, String>,
}

impl StateActions {
    /// Whether no action is given.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// `POST /api/v1/jobs/{job_id}/upgrades/preview`: what an upgrade with the same request would
/// do with each operator's state, changing nothing.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpgradePreview {
    /// Whether the upgrade would be accepted as far as the job's state goes.
    pub allowed: bool,
    /// Whether the new version changes the job's logic (else its state restores whole).
    pub logic_changed: bool,
    /// One line per operator: `operatorId`, `typeName`, `verdict` (`kept`, `stateless`,
    /// `added`, `removed`, `starts-empty`, `dropped`, `refused`), `rule` (refused ones),
    /// `was` (mapped ones) and `detail`; empty when the logic is the same.
    #[schema(value_type = Vec<Object>)]
    pub operators: Vec<serde_json::Value>,
}
