//! The Agent protocol: registration (sessions and leases), heartbeats, the command outbox and
//! reports with per-session sequence numbers and generation fencing.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// The Weir version the Hub and the Agents are built from (the workspace version); an Agent
/// advertises it as `runtimeVersion` and the Hub places lanes only on Agents of its own.
pub const RUNTIME_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Version of the job-level checkpoint protocol this crate speaks (`checkpoint` commands,
/// `laneCheckpoint` reports, job manifests); an Agent advertises it in its capabilities and the
/// Hub refuses jobs for Agents speaking another.
pub const CHECKPOINT_PROTOCOL: u32 = 1;

/// Name of Weir's default keyed-state backend (embedded redb), as Agents list it in
/// `stateBackends` and job specs name it in `state.backend`. Every Agent offers it.
pub const STATE_BACKEND_REDB: &str = "redb";

/// Name of the Redis keyed-state backend, as Agents list it in `stateBackends` and job specs
/// name it in `state.backend`. An Agent offers it only when its operator says so (`weir agent
/// --state-backends redb,redis`): the state lives on a Redis server the Agent must reach.
pub const STATE_BACKEND_REDIS: &str = "redis";

/// The job id lane `lane` of `job` runs as (`<job>-lane-<i>`): it names the lane's checkpoint
/// namespace, its part files and its Kafka transactional ids.
pub fn lane_job_id(job: &str, lane: u32) -> String {
    format!("{job}-lane-{lane}")
}

/// What an Agent can run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentCapabilities {
    /// The Weir version of its runtime ([`RUNTIME_VERSION`]); must equal the Hub's.
    pub runtime_version: String,
    /// Keyed-state backends it offers, by their names in job specs ([`STATE_BACKEND_REDB`],
    /// always; [`STATE_BACKEND_REDIS`] when its operator enables it). The Hub places a job's
    /// lanes only on Agents that offer the job's `state.backend`.
    pub state_backends: Vec<String>,
    /// The checkpoint protocol it speaks ([`CHECKPOINT_PROTOCOL`]).
    pub checkpoint_protocol: u32,
    /// How many lanes it runs at most.
    pub slots: u32,
    /// The places its lanes may touch (`--allow-path`, `--allow-url`); absent: anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow: Option<AllowedPlaces>,
}

/// The path and URL prefixes an Agent's lanes may touch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AllowedPlaces {
    /// Local path prefixes (whole components).
    pub paths: Vec<String>,
    /// URL prefixes (`s3://bucket/in/`, `http://minio:9000`, `kafka://broker:9092`).
    pub urls: Vec<String>,
}

/// `POST /api/v1/agents/register`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegisterAgent {
    /// Stable id of the Agent (`[A-Za-z0-9_.-]`).
    pub agent_id: String,
    /// Id of this process's life: the same one again is a reconnect (the Agent keeps its lanes),
    /// a new one a restart (its lanes are placed anew).
    pub boot_id: String,
    /// The Agent's own secret, kept across its restarts (its credential file): the Hub binds the
    /// Agent id to the credential of its first registration and refuses another one.
    pub credential: String,
    /// What it can run.
    pub capabilities: AgentCapabilities,
}

/// The answer to a registration: a new session.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Registration {
    /// The session; reports carry it, and their `seq` starts at 0 in every session.
    pub session_id: String,
    /// The bearer token of the session's requests (`Authorization: Bearer <token>`).
    pub session_token: String,
    /// The lease lapses this long after the last heartbeat.
    pub lease_ttl_ms: u64,
    /// How often to heartbeat.
    pub heartbeat_interval_ms: u64,
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatAck {
    /// The session the lease belongs to.
    pub session_id: String,
    /// When the lease lapses without another heartbeat (Unix milliseconds).
    pub lease_expires_at_ms: i64,
}

/// Where a lane restores its state from when it starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum Restore {
    /// A fresh start: the job never ran.
    None,
    /// The lane's newest durable checkpoint (a fresh start when there is none).
    Latest,
    /// Exactly these epochs, by lane (a savepoint an upgrade starts from).
    LaneEpochs(BTreeMap<u32, u64>),
}

/// What an Agent is told to do, externally tagged on the wire: `{"run": {...}}`,
/// `{"stop": {...}}`, `{"checkpoint": {...}}` (an internally tagged enum could not carry the
/// integer keys of [`Restore::LaneEpochs`] through serde's buffering).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum CommandAction {
    /// Run these lanes of the job's version in this generation; lanes of the job the Agent runs
    /// in an older generation are replaced.
    #[serde(rename_all = "camelCase")]
    Run {
        /// The lanes to run.
        lanes: Vec<u32>,
        /// How many lanes the job has (`P`): lane `i` reads split `k` when `k mod P = i`.
        lane_count: u32,
        /// The version's compiled job spec (`weir_plan::JobSpec` as JSON).
        #[schema(value_type = Object)]
        spec: serde_json::Value,
        /// Where to restore from.
        restore: Restore,
        /// What a restore of a checkpoint of an older version of the job (the savepoint an
        /// upgrade starts from) may do beyond keeping state.
        #[serde(default, skip_serializing_if = "crate::StateActions::is_empty")]
        actions: crate::StateActions,
    },
    /// Stop these lanes.
    #[serde(rename_all = "camelCase")]
    Stop {
        /// The lanes to stop.
        lanes: Vec<u32>,
    },
    /// Take a checkpoint (or savepoint) of every lane of the job the Agent runs, and report
    /// each lane's durable epoch against `checkpointId`.
    #[serde(rename_all = "camelCase")]
    Checkpoint {
        /// The job-level checkpoint's id.
        checkpoint_id: String,
        /// The savepoint's name, for a savepoint.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        savepoint: Option<String>,
    },
}

/// One command of the outbox, delivered by `GET /api/v1/agents/{agent_id}/commands` until a
/// `commandResult` report acknowledges it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Command {
    /// The command's id, acknowledged by a `commandResult`.
    pub command_id: String,
    /// The job.
    pub job_id: String,
    /// The job version.
    pub version_id: String,
    /// The job generation the command belongs to; reports about it carry the same.
    pub generation: u64,
    /// What to do.
    pub action: CommandAction,
}

/// How a command went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum CommandOutcome {
    /// Done.
    Ok,
    /// Not done; for `run`, its lanes count as failed with this cause.
    #[serde(rename_all = "camelCase")]
    Failed {
        /// Why.
        cause: String,
    },
}

/// State of a lane as its Agent reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum LaneState {
    /// Preparing or restoring.
    Starting,
    /// Processing.
    Running,
    /// Stopped on request.
    Stopped,
    /// Its sources ended and it completed.
    Finished,
    /// It failed terminally (its restart attempts are spent).
    Failed,
}

impl LaneState {
    /// The name used on the wire and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            LaneState::Starting => "starting",
            LaneState::Running => "running",
            LaneState::Stopped => "stopped",
            LaneState::Finished => "finished",
            LaneState::Failed => "failed",
        }
    }
}

/// One item of a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum ReportItem {
    /// A command was carried out (or not): acknowledges it.
    #[serde(rename_all = "camelCase")]
    CommandResult {
        /// The command.
        command_id: String,
        /// Its job.
        job_id: String,
        /// The job version it was about (with the job, generation and command id, what ties a
        /// failure to what was asked).
        version_id: String,
        /// Its generation.
        generation: u64,
        /// How it went.
        outcome: CommandOutcome,
    },
    /// A lane's state changed.
    #[serde(rename_all = "camelCase")]
    LaneStatus {
        /// The job.
        job_id: String,
        /// The generation the lane runs in.
        generation: u64,
        /// The lane.
        lane: u32,
        /// Its state.
        state: LaneState,
        /// Why it failed or stopped.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<String>,
    },
    /// A lane took the durable epoch of a job-level checkpoint.
    #[serde(rename_all = "camelCase")]
    LaneCheckpoint {
        /// The job.
        job_id: String,
        /// The generation the lane runs in.
        generation: u64,
        /// The job-level checkpoint.
        checkpoint_id: String,
        /// The lane.
        lane: u32,
        /// Its durable epoch.
        epoch: u64,
    },
}

impl ReportItem {
    /// The job the item is about.
    pub fn job_id(&self) -> &str {
        match self {
            ReportItem::CommandResult { job_id, .. }
            | ReportItem::LaneStatus { job_id, .. }
            | ReportItem::LaneCheckpoint { job_id, .. } => job_id,
        }
    }

    /// The generation the item is about.
    pub fn generation(&self) -> u64 {
        match self {
            ReportItem::CommandResult { generation, .. }
            | ReportItem::LaneStatus { generation, .. }
            | ReportItem::LaneCheckpoint { generation, .. } => *generation,
        }
    }
}

/// `POST /api/v1/agents/{agent_id}/reports`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReportBatch {
    /// The session the report belongs to (an older session's report is refused).
    pub session_id: String,
    /// Exactly one more than the session's last accepted report (the first is 0).
    pub seq: u64,
    /// The items.
    pub reports: Vec<ReportItem>,
}

/// The answer to an accepted report.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReportAck {
    /// The report's `seq`, now the session's last accepted.
    pub seq: u64,
    /// Items applied.
    pub accepted: u32,
    /// Items refused because they are about an older generation of their job (or an unknown
    /// job, command or lane); counted, otherwise ignored.
    pub refused: u32,
}

/// Whether an Agent holds a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum AgentState {
    /// Its lease is current.
    Live,
    /// Its lease lapsed; its lanes were placed elsewhere.
    Expired,
}

/// A lane placed on an Agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AssignedLane {
    /// The job.
    pub job_id: String,
    /// The lane.
    pub lane: u32,
    /// The job's generation the placement belongs to.
    pub generation: u64,
    /// `pending` until the Agent reports, then the lane state it reported.
    pub state: String,
}

/// An Agent as `GET /api/v1/agents` lists it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentEntry {
    /// The Agent.
    pub agent_id: String,
    /// Its process's boot id.
    pub boot_id: String,
    /// Its current session.
    pub session_id: String,
    /// Live or expired.
    pub state: AgentState,
    /// What it can run.
    pub capabilities: AgentCapabilities,
    /// Lanes placed on it (current generations of all jobs).
    pub lanes: u32,
    /// Those lanes, by job.
    #[serde(default)]
    pub assigned: Vec<AssignedLane>,
    /// When its lease lapses or lapsed (RFC 3339).
    pub lease_expires_at: String,
    /// When it last registered (RFC 3339).
    pub registered_at: String,
    /// Report items refused for an old generation, over its life.
    pub refused_report_items: u64,
    /// Reports refused for a stale session or sequence number, over its life.
    pub refused_reports: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_reports_round_trip_through_json() {
        let command = Command {
            command_id: "c".into(),
            job_id: "j".into(),
            version_id: "j-v1".into(),
            generation: 4,
            action: CommandAction::Run {
                lanes: vec![0, 2],
                lane_count: 3,
                spec: serde_json::json!({"job": "j"}),
                restore: Restore::LaneEpochs(BTreeMap::from([(0, 5), (2, 6)])),
                actions: crate::StateActions {
                    drop_state: vec!["w".into()],
                    ..Default::default()
                },
            },
        };
        let text = serde_json::to_string(&command).unwrap();
        assert!(
            text.contains(r#""restore":{"laneEpochs":{"0":5,"2":6}}"#)
                && text.contains(r#""actions":{"dropState":["w"]}"#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<Command>(&text).unwrap(), command);
        for restore in [Restore::None, Restore::Latest] {
            let text = serde_json::to_string(&restore).unwrap();
            assert_eq!(serde_json::from_str::<Restore>(&text).unwrap(), restore);
        }
        let item = ReportItem::CommandResult {
            command_id: "c".into(),
            job_id: "j".into(),
            version_id: "v".into(),
            generation: 4,
            outcome: CommandOutcome::Failed {
                cause: "no slot".into(),
            },
        };
        let text = serde_json::to_string(&item).unwrap();
        assert!(text.starts_with(r#"{"kind":"commandResult""#), "{text}");
        assert_eq!(serde_json::from_str::<ReportItem>(&text).unwrap(), item);
    }
}
