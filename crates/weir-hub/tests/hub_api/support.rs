//! The harness of the Hub tests: a Hub served on 127.0.0.1, a job spec, Agent requests.

use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use weir_control::{
    AgentCapabilities, CHECKPOINT_PROTOCOL, Command, CommandAction, ControlError, DesiredState,
    DesiredStateChange, HubClient, JobSummary, LaneState, RegisterAgent, Registration, ReportAck,
    ReportBatch, ReportItem, Restore, STATE_BACKEND_REDB, SubmitJob,
};
use weir_hub::{Hub, HubConfig};

/// The join token of the tests' Hubs.
pub(crate) const JOIN_TOKEN: &str = "test-join-token-0123456789";

pub(crate) struct TestHub {
    pub(crate) hub: Arc<Hub>,
    /// A client with an admin token.
    pub(crate) client: HubClient,
    /// The admin token.
    pub(crate) admin: String,
    pub(crate) base: String,
    server: tokio::task::JoinHandle<()>,
    maintenance: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for TestHub {
    fn drop(&mut self) {
        self.server.abort();
        if let Some(m) = &self.maintenance {
            m.abort();
        }
    }
}

impl TestHub {
    /// A GET of `path` with the admin token.
    pub(crate) fn get(&self, path: &str) -> reqwest::RequestBuilder {
        reqwest::Client::new()
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.admin)
    }

    /// Registers Agent `agent` (boot `boot`) with `slots` slots: a new session.
    pub(crate) async fn register(&self, agent: &str, slots: u32) -> Registration {
        self.client
            .register(JOIN_TOKEN, &register_request(agent, "boot", slots))
            .await
            .expect("the hub registers the agent")
    }

    /// Registers Agent `agent` (boot `boot`) with `slots` slots, offering the keyed-state
    /// `backends` (`redb`, `redis`): a new session.
    pub(crate) async fn register_offering(
        &self,
        agent: &str,
        slots: u32,
        backends: &[&str],
    ) -> Registration {
        let mut request = register_request(agent, "boot", slots);
        request.capabilities.state_backends = backends.iter().map(|b| (*b).to_owned()).collect();
        self.client
            .register(JOIN_TOKEN, &request)
            .await
            .expect("the hub registers the agent")
    }

    /// Sets job `job`'s desired state unconditionally (whatever its generation).
    pub(crate) async fn set_desired(&self, job: &str, desired_state: DesiredState) -> JobSummary {
        self.client
            .set_desired_state(
                job,
                &DesiredStateChange {
                    desired_state,
                    generation: None,
                },
            )
            .await
            .expect("the hub changes the desired state")
    }
}

pub(crate) async fn start_hub(db: &Path, lease_ttl: Duration, maintain: bool) -> TestHub {
    let hub = Hub::open(&HubConfig {
        db_path: db.to_owned(),
        lease_ttl,
        limits: weir_hub::ServeLimits::default(),
        join_token: Some(JOIN_TOKEN.into()),
        allow_env: weir::api::secrets::EnvAccess::Only(vec![]),
    })
    .expect("the hub answers");
    let (_, admin) = hub
        .store()
        .create_token("tests", weir_hub::Role::Admin, 0)
        .expect("an admin token");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("the hub answers");
    let base = format!("http://{}", listener.local_addr().expect("the hub answers"));
    let router = hub.router();
    let server = tokio::spawn(async move {
        axum::serve(listener, router)
            .await
            .expect("the hub answers");
    });
    let maintenance = maintain.then(|| hub.spawn_maintenance());
    TestHub {
        client: HubClient::new(&base)
            .expect("the hub answers")
            .with_token(admin.clone()),
        admin,
        hub,
        base,
        server,
        maintenance,
    }
}

pub(crate) fn spec(dir: &Path, lanes: u32) -> Value {
    json!({
        "parallelism": lanes,
        "checkpoint": { "interval": "1h", "dir": dir.join("checkpoints").display().to_string() },
        "sources": [{
            "name": "bids", "connector": "datagen",
            "schema": [{ "name": "auction", "type": "int64" }],
            "options": { "rows": 10 }
        }],
        "sinks": [{ "name": "out", "connector": "blackhole", "input": "bids" }]
    })
}

/// [`spec`] with its keyed state on the Redis server at `url` (never reached: the Hub
/// connects to no job's server, and no Agent runs here).
pub(crate) fn redis_spec(dir: &Path, lanes: u32, url: &str) -> Value {
    let mut spec = spec(dir, lanes);
    spec["state"] = json!({ "backend": "redis", "redis": { "url": url } });
    spec
}

pub(crate) fn submit(name: &str, spec: Value, desired_state: DesiredState) -> SubmitJob {
    SubmitJob {
        name: name.into(),
        sql: None,
        spec: Some(spec),
        desired_state,
    }
}

pub(crate) fn register_request(agent: &str, boot: &str, slots: u32) -> RegisterAgent {
    RegisterAgent {
        agent_id: agent.into(),
        boot_id: boot.into(),
        credential: format!("credential-of-agent-{agent}"),
        capabilities: AgentCapabilities {
            runtime_version: weir_control::RUNTIME_VERSION.into(),
            state_backends: vec![STATE_BACKEND_REDB.into()],
            checkpoint_protocol: CHECKPOINT_PROTOCOL,
            slots,
            allow: None,
        },
    }
}

pub(crate) async fn report(
    client: &HubClient,
    agent: &str,
    reg: &Registration,
    seq: u64,
    reports: Vec<ReportItem>,
) -> Result<ReportAck, ControlError> {
    let batch = ReportBatch {
        session_id: reg.session_id.clone(),
        seq,
        reports,
    };
    client.report(agent, &reg.session_token, &batch).await
}

pub(crate) fn lane_status(job: &str, generation: u64, lane: u32, state: LaneState) -> ReportItem {
    ReportItem::LaneStatus {
        job_id: job.into(),
        generation,
        lane,
        state,
        cause: (state == LaneState::Failed).then(|| "disk full".to_owned()),
    }
}

/// Lanes of the job's current generation, by Agent.
pub(crate) async fn placement(client: &HubClient, job: &str) -> Vec<(u32, Option<String>, String)> {
    let detail = client.job_detail(job).await.expect("the hub answers");
    detail
        .assignments
        .into_iter()
        .map(|a| (a.lane, a.agent_id, a.state))
        .collect()
}

pub(crate) fn status(e: &ControlError) -> (u16, Option<String>) {
    match e {
        ControlError::Api { status, error, .. } => (*status, error.field.clone()),
        other => panic!("expected an API error, got {other}"),
    }
}

pub(crate) fn run_lanes(commands: &[Command], job: &str) -> Vec<(u64, Vec<u32>, Restore)> {
    commands
        .iter()
        .filter(|c| c.job_id == job)
        .filter_map(|c| match &c.action {
            CommandAction::Run { lanes, restore, .. } => {
                Some((c.generation, lanes.clone(), restore.clone()))
            }
            _ => None,
        })
        .collect()
}

/// A Hub over a fresh store in `dir`, with leases of a minute and no maintenance task: the tests
/// drive leases and checkpoints by hand.
pub(crate) async fn fresh_hub(dir: &Path) -> TestHub {
    start_hub(&dir.join("hub.sqlite"), Duration::from_secs(60), false).await
}

/// A Hub over a fresh store in `dir` (leases of `lease_ttl`, with the maintenance task when
/// `maintain`), Agents `a` and `b` with `slots` slots each, and job `bids` of two lanes submitted
/// running.
pub(crate) async fn two_agents_running_bids_with(
    dir: &Path,
    lease_ttl: Duration,
    maintain: bool,
    slots: u32,
) -> (TestHub, Registration, Registration) {
    let t = start_hub(&dir.join("hub.sqlite"), lease_ttl, maintain).await;
    let (a, b) = two_agents_running(&t, slots, spec(dir, 2)).await;
    (t, a, b)
}

/// Registers Agents `a` and `b` with `slots` slots each on `t` and submits `job` as job `bids`,
/// running.
pub(crate) async fn two_agents_running(
    t: &TestHub,
    slots: u32,
    job: Value,
) -> (Registration, Registration) {
    let a = t.register("a", slots).await;
    let b = t.register("b", slots).await;
    t.client
        .submit(&submit("bids", job, DesiredState::Running))
        .await
        .expect("submit");
    (a, b)
}

/// [`two_agents_running_bids_with`] leases of a minute, no maintenance task, one slot each:
/// lane 0 on `a`, lane 1 on `b`.
pub(crate) async fn two_agents_running_bids(dir: &Path) -> (TestHub, Registration, Registration) {
    two_agents_running_bids_with(dir, Duration::from_secs(60), false, 1).await
}
