//! The Hub over HTTP on 127.0.0.1: the real router, a real SQLite file, [`HubClient`] and raw
//! requests. Agents are played by the tests through the Agent protocol.

use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use weir_control::{
    AgentCapabilities, AgentState, CHECKPOINT_PROTOCOL, Command, CommandAction, CommandOutcome,
    ControlError, DesiredState, DesiredStateChange, HubClient, JobManifest, LaneState,
    ObservedPhase, RegisterAgent, Registration, ReportAck, ReportBatch, ReportItem, Restore,
    STATE_BACKEND_REDB, SavepointRequest, SubmitJob, UpgradeRequest, UpgradeState, ValidateRequest,
};
use weir_hub::{Hub, HubConfig};

struct TestHub {
    hub: Arc<Hub>,
    client: HubClient,
    base: String,
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

async fn start_hub(db: &Path, lease_ttl: Duration, maintain: bool) -> TestHub {
    let hub = Hub::open(&HubConfig {
        db_path: db.to_owned(),
        lease_ttl,
    })
    .expect("the hub answers");
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
        client: HubClient::new(&base).expect("the hub answers"),
        hub,
        base,
        server,
        maintenance,
    }
}

fn spec(dir: &Path, lanes: u32) -> Value {
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

fn submit(name: &str, spec: Value, desired_state: DesiredState) -> SubmitJob {
    SubmitJob {
        name: name.into(),
        sql: None,
        spec: Some(spec),
        desired_state,
    }
}

fn register_request(agent: &str, boot: &str, slots: u32) -> RegisterAgent {
    RegisterAgent {
        agent_id: agent.into(),
        boot_id: boot.into(),
        capabilities: AgentCapabilities {
            runtime_version: weir_hub::RUNTIME_VERSION.into(),
            state_backends: vec![STATE_BACKEND_REDB.into()],
            checkpoint_protocol: CHECKPOINT_PROTOCOL,
            slots,
        },
    }
}

async fn report(
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

fn lane_status(job: &str, generation: u64, lane: u32, state: LaneState) -> ReportItem {
    ReportItem::LaneStatus {
        job_id: job.into(),
        generation,
        lane,
        state,
        cause: (state == LaneState::Failed).then(|| "disk full".to_owned()),
    }
}

/// Lanes of the job's current generation, by Agent.
async fn placement(client: &HubClient, job: &str) -> Vec<(u32, Option<String>, String)> {
    let detail = client.job_detail(job).await.expect("the hub answers");
    detail
        .assignments
        .into_iter()
        .map(|a| (a.lane, a.agent_id, a.state))
        .collect()
}

fn status(e: &ControlError) -> (u16, Option<String>) {
    match e {
        ControlError::Api { status, error, .. } => (*status, error.field.clone()),
        other => panic!("expected an API error, got {other}"),
    }
}

fn run_lanes(commands: &[Command], job: &str) -> Vec<(u64, Vec<u32>, Restore)> {
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

#[tokio::test]
async fn submit_validate_list_detail_and_versions() {
    let dir = tempfile::tempdir().unwrap();
    let t = start_hub(
        &dir.path().join("hub.sqlite"),
        Duration::from_secs(60),
        false,
    )
    .await;
    let valid = t
        .client
        .validate(&ValidateRequest {
            name: Some("bids".into()),
            sql: None,
            spec: Some(spec(dir.path(), 2)),
        })
        .await
        .unwrap();
    assert!(valid.valid, "{valid:?}");
    assert_eq!(valid.lanes, Some(2));
    assert!(
        valid.warnings.iter().any(|w| w.contains("no live Agent")),
        "{valid:?}"
    );

    let mut no_checkpoint = spec(dir.path(), 2);
    no_checkpoint.as_object_mut().unwrap().remove("checkpoint");
    let refused = t
        .client
        .validate(&ValidateRequest {
            name: None,
            sql: None,
            spec: Some(no_checkpoint),
        })
        .await
        .unwrap();
    assert!(!refused.valid);
    assert_eq!(
        refused.errors[0].path.as_deref(),
        Some("checkpoint"),
        "{refused:?}"
    );

    let bad_sql = t
        .client
        .validate(&ValidateRequest {
            name: None,
            sql: Some("SELECT FROM WHERE;\n".into()),
            spec: None,
        })
        .await
        .unwrap();
    assert!(!bad_sql.valid);
    assert_eq!(bad_sql.errors[0].line, Some(1), "{bad_sql:?}");
    assert!(bad_sql.errors[0].column.is_some());

    let summary = t
        .client
        .submit(&submit("bids", spec(dir.path(), 2), DesiredState::Stopped))
        .await
        .unwrap();
    assert_eq!(summary.job_id, "bids");
    assert_eq!(summary.generation, 0);
    assert_eq!(summary.lanes, 2);
    assert_eq!(summary.observed.phase, ObservedPhase::Stopped);
    let again = t
        .client
        .submit(&submit("bids", spec(dir.path(), 2), DesiredState::Stopped))
        .await
        .unwrap_err();
    assert_eq!(status(&again), (409, Some("name".into())));

    let mut unknown = spec(dir.path(), 2);
    unknown["sources"][0]["connector"] = json!("nope");
    let invalid = t
        .client
        .submit(&submit("other", unknown, DesiredState::Stopped))
        .await
        .unwrap_err();
    assert_eq!(
        status(&invalid),
        (422, Some("spec.sources[0].connector".into()))
    );

    let jobs = t.client.list_jobs().await.unwrap();
    assert_eq!(
        jobs.iter().map(|j| j.job_id.as_str()).collect::<Vec<_>>(),
        ["bids"]
    );
    let detail = t.client.job_detail("bids").await.unwrap();
    assert_eq!(detail.version.version_id, summary.current_version);
    assert_eq!(detail.version.spec["job"], json!("bids"));
    assert!(
        detail.plans["fingerprints"]["partitionedPlan"].is_string(),
        "{}",
        detail.plans
    );
    assert!(detail.assignments.is_empty());
    let versions = t.client.job_versions("bids").await.unwrap();
    assert_eq!(versions.len(), 1);
    assert_eq!(
        versions[0].plan_fingerprint,
        detail.version.plan_fingerprint
    );

    let doc = t.client.openapi().await.unwrap();
    for path in [
        "/api/v1/jobs/{job_id}/desired-state",
        "/api/v1/agents/{agent_id}/reports",
    ] {
        assert!(
            doc["paths"][path].is_object(),
            "{path} missing from the OpenAPI document"
        );
    }
    assert!(doc["components"]["schemas"]["ReportItem"].is_object());
}

#[tokio::test]
async fn malformed_bodies_and_unknown_ids_name_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let t = start_hub(
        &dir.path().join("hub.sqlite"),
        Duration::from_secs(60),
        false,
    )
    .await;
    let http = reqwest::Client::new();
    let send = |method: reqwest::Method, path: &str, body: Option<&str>| {
        let mut r = http.request(method, format!("{}{path}", t.base));
        if let Some(b) = body {
            r = r
                .header("content-type", "application/json")
                .body(b.to_owned());
        }
        async move {
            let response = r.send().await.unwrap();
            let code = response.status().as_u16();
            let body: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
            (code, body["field"].as_str().map(str::to_owned), body)
        }
    };
    use reqwest::Method;
    let cases: Vec<(Method, &str, Option<&str>, u16, &str)> = vec![
        (
            Method::POST,
            "/api/v1/jobs",
            Some(r#"{"name": 5, "sql": "x"}"#),
            400,
            "name",
        ),
        (
            Method::POST,
            "/api/v1/jobs",
            Some(r#"{"sql": "x"}"#),
            400,
            "name",
        ),
        (
            Method::POST,
            "/api/v1/jobs",
            Some(r#"{"name": "a", "sql": "x", "extra": 1}"#),
            400,
            "extra",
        ),
        (
            Method::POST,
            "/api/v1/jobs",
            Some(r#"{"name": "a b", "sql": "x"}"#),
            400,
            "name",
        ),
        (
            Method::POST,
            "/api/v1/jobs",
            Some(r#"{"name": "a"}"#),
            400,
            "sql",
        ),
        (Method::POST, "/api/v1/jobs", Some("{"), 400, "$"),
        (Method::POST, "/api/v1/jobs", None, 400, "$"),
        (Method::GET, "/api/v1/jobs/nope", None, 404, "jobId"),
        (Method::GET, "/api/v1/jobs/nope/detail", None, 404, "jobId"),
        (
            Method::PUT,
            "/api/v1/jobs/nope/desired-state",
            Some(r#"{"desiredState": "running"}"#),
            404,
            "jobId",
        ),
        (
            Method::PUT,
            "/api/v1/jobs/nope/desired-state",
            Some(r#"{"desiredState": "flying"}"#),
            400,
            "desiredState",
        ),
        (
            Method::POST,
            "/api/v1/agents/register",
            Some(
                r#"{"agentId": "a", "bootId": "b", "capabilities": {"runtimeVersion": "x", "stateBackends": [], "checkpointProtocol": 1}}"#,
            ),
            400,
            "capabilities.slots",
        ),
        (Method::POST, "/api/v1/agents/nope/heartbeat", None, 401, ""),
        (
            Method::POST,
            "/api/v1/agents/register",
            Some(
                r#"{"agentId": "a/b", "bootId": "b", "capabilities": {"runtimeVersion": "x", "stateBackends": [], "checkpointProtocol": 1, "slots": 1}}"#,
            ),
            400,
            "agentId",
        ),
        (Method::GET, "/api/v1/nothing-here", None, 404, "$"),
    ];
    for (method, path, body, code, field) in cases {
        let (got_code, got_field, raw) = send(method.clone(), path, body).await;
        assert_eq!(got_code, code, "{method} {path} {body:?}: {raw}");
        assert!(raw["error"].is_string(), "{raw}");
        if !field.is_empty() {
            assert_eq!(
                got_field.as_deref(),
                Some(field),
                "{method} {path} {body:?}: {raw}"
            );
        }
    }
    let unknown_agent = http
        .post(format!("{}/api/v1/agents/nope/heartbeat", t.base))
        .bearer_auth("t")
        .send()
        .await
        .unwrap();
    assert_eq!(unknown_agent.status().as_u16(), 404);
}

#[tokio::test]
async fn concurrent_desired_state_changes_resolve_by_generation() {
    let dir = tempfile::tempdir().unwrap();
    let t = start_hub(
        &dir.path().join("hub.sqlite"),
        Duration::from_secs(60),
        false,
    )
    .await;
    t.client
        .submit(&submit("bids", spec(dir.path(), 2), DesiredState::Stopped))
        .await
        .unwrap();
    let change = |d| DesiredStateChange {
        desired_state: d,
        generation: Some(0),
    };
    let (start, stop) = (change(DesiredState::Running), change(DesiredState::Stopped));
    let (a, b) = tokio::join!(
        t.client.set_desired_state("bids", &start),
        t.client.set_desired_state("bids", &stop),
    );
    let (won, lost) = match (a, b) {
        (Ok(w), Err(l)) | (Err(l), Ok(w)) => (w, l),
        other => panic!("expected one winner and one 409: {other:?}"),
    };
    assert_eq!(won.generation, 1);
    assert_eq!(status(&lost), (409, Some("generation".into())));
    assert_eq!(t.client.get_job("bids").await.unwrap().generation, 1);
}

#[tokio::test]
async fn registering_again_with_the_same_boot_keeps_lanes_and_a_new_boot_moves_them() {
    let dir = tempfile::tempdir().unwrap();
    let t = start_hub(
        &dir.path().join("hub.sqlite"),
        Duration::from_secs(60),
        false,
    )
    .await;
    let first = t
        .client
        .register(&register_request("a", "boot-1", 4))
        .await
        .unwrap();
    t.client
        .submit(&submit("bids", spec(dir.path(), 2), DesiredState::Running))
        .await
        .unwrap();
    let commands = t.client.commands("a", &first.session_token).await.unwrap();
    assert_eq!(
        run_lanes(&commands, "bids"),
        [(1, vec![0, 1], Restore::None)]
    );

    let again = t
        .client
        .register(&register_request("a", "boot-1", 4))
        .await
        .unwrap();
    assert_ne!(again.session_id, first.session_id);
    let job = t.client.get_job("bids").await.unwrap();
    assert_eq!(job.generation, 1, "a reconnect keeps the generation");
    assert_eq!(
        placement(&t.client, "bids").await,
        [
            (0, Some("a".into()), "pending".into()),
            (1, Some("a".into()), "pending".into())
        ]
    );
    // The unacknowledged run is delivered again to the new session; the old token is stale.
    let redelivered = t.client.commands("a", &again.session_token).await.unwrap();
    assert_eq!(
        run_lanes(&redelivered, "bids"),
        [(1, vec![0, 1], Restore::None)]
    );
    let stale = t
        .client
        .heartbeat("a", &first.session_token)
        .await
        .unwrap_err();
    assert_eq!(status(&stale).0, 409);

    let restarted = t
        .client
        .register(&register_request("a", "boot-2", 4))
        .await
        .unwrap();
    let job = t.client.get_job("bids").await.unwrap();
    assert_eq!(
        job.generation, 2,
        "a restart re-places the lanes in a new generation"
    );
    let commands = t
        .client
        .commands("a", &restarted.session_token)
        .await
        .unwrap();
    assert_eq!(
        run_lanes(&commands, "bids"),
        [(2, vec![0, 1], Restore::Latest)]
    );
    let agents = t.client.list_agents().await.unwrap();
    assert_eq!(agents.len(), 1);
    assert_eq!(agents[0].boot_id, "boot-2");
    assert_eq!(agents[0].lanes, 2);
}

#[tokio::test]
async fn heartbeats_keep_the_lease_and_missing_ones_expire_it_and_move_lanes() {
    let dir = tempfile::tempdir().unwrap();
    let t = start_hub(
        &dir.path().join("hub.sqlite"),
        Duration::from_millis(600),
        true,
    )
    .await;
    let a = t
        .client
        .register(&register_request("a", "boot", 2))
        .await
        .unwrap();
    let b = t
        .client
        .register(&register_request("b", "boot", 2))
        .await
        .unwrap();
    t.client
        .submit(&submit("bids", spec(dir.path(), 2), DesiredState::Running))
        .await
        .unwrap();
    assert_eq!(
        placement(&t.client, "bids").await,
        [
            (0, Some("a".into()), "pending".into()),
            (1, Some("b".into()), "pending".into())
        ]
    );
    // a heartbeats for three lease lengths; b stays silent.
    for _ in 0..18 {
        t.client.heartbeat("a", &a.session_token).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let agents = t.client.list_agents().await.unwrap();
    let state = |id: &str| agents.iter().find(|e| e.agent_id == id).unwrap().state;
    assert_eq!(state("a"), AgentState::Live);
    assert_eq!(state("b"), AgentState::Expired);
    let job = t.client.get_job("bids").await.unwrap();
    assert_eq!(job.generation, 2);
    assert_eq!(
        placement(&t.client, "bids").await,
        [
            (0, Some("a".into()), "pending".into()),
            (1, Some("a".into()), "pending".into())
        ]
    );
    let commands = t.client.commands("a", &a.session_token).await.unwrap();
    assert_eq!(
        run_lanes(&commands, "bids"),
        [(2, vec![0, 1], Restore::Latest)]
    );
    // The expired Agent is fenced: its heartbeats and reports are refused.
    assert_eq!(
        status(&t.client.heartbeat("b", &b.session_token).await.unwrap_err()).0,
        409
    );
    let refused = report(
        &t.client,
        "b",
        &b,
        0,
        vec![lane_status("bids", 2, 1, LaneState::Running)],
    )
    .await
    .unwrap_err();
    assert_eq!(status(&refused).0, 409);
    assert_eq!(placement(&t.client, "bids").await[1].2, "pending");
}

#[tokio::test]
async fn old_sessions_and_seq_gaps_are_refused_without_changing_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let t = start_hub(
        &dir.path().join("hub.sqlite"),
        Duration::from_secs(60),
        false,
    )
    .await;
    let old = t
        .client
        .register(&register_request("a", "boot", 4))
        .await
        .unwrap();
    t.client
        .submit(&submit("bids", spec(dir.path(), 2), DesiredState::Running))
        .await
        .unwrap();
    report(
        &t.client,
        "a",
        &old,
        0,
        vec![lane_status("bids", 1, 0, LaneState::Starting)],
    )
    .await
    .unwrap();
    let new = t
        .client
        .register(&register_request("a", "boot", 4))
        .await
        .unwrap();
    let ack = report(
        &t.client,
        "a",
        &new,
        0,
        vec![
            lane_status("bids", 1, 0, LaneState::Running),
            lane_status("bids", 1, 1, LaneState::Running),
        ],
    )
    .await
    .unwrap();
    assert_eq!((ack.accepted, ack.refused), (2, 0));
    let before = placement(&t.client, "bids").await;
    assert_eq!(
        t.client.get_job("bids").await.unwrap().observed.phase,
        ObservedPhase::Running
    );

    // The old session's report (its token, or its id with the new token) changes nothing.
    let stale = report(
        &t.client,
        "a",
        &old,
        1,
        vec![lane_status("bids", 1, 0, LaneState::Failed)],
    )
    .await
    .unwrap_err();
    assert_eq!(status(&stale).0, 409);
    let mixed = Registration {
        session_token: new.session_token.clone(),
        ..old.clone()
    };
    let stale = report(
        &t.client,
        "a",
        &mixed,
        1,
        vec![lane_status("bids", 1, 0, LaneState::Failed)],
    )
    .await
    .unwrap_err();
    assert_eq!(status(&stale), (409, Some("sessionId".into())));
    // A gap or a replay in the sequence is refused too.
    for seq in [0, 2] {
        let gap = report(
            &t.client,
            "a",
            &new,
            seq,
            vec![lane_status("bids", 1, 0, LaneState::Failed)],
        )
        .await
        .unwrap_err();
        assert_eq!(status(&gap), (409, Some("seq".into())));
    }
    assert_eq!(placement(&t.client, "bids").await, before);
    assert_eq!(
        t.client.get_job("bids").await.unwrap().observed.phase,
        ObservedPhase::Running
    );

    // An item of an older generation is refused alone (counted), the rest applies.
    t.client
        .set_desired_state(
            "bids",
            &DesiredStateChange {
                desired_state: DesiredState::Stopped,
                generation: None,
            },
        )
        .await
        .unwrap();
    let ack = report(
        &t.client,
        "a",
        &new,
        1,
        vec![
            lane_status("bids", 1, 0, LaneState::Failed),
            lane_status("bids", 2, 0, LaneState::Stopped),
        ],
    )
    .await
    .unwrap();
    assert_eq!((ack.seq, ack.accepted, ack.refused), (1, 1, 1));
    let agents = t.client.list_agents().await.unwrap();
    assert_eq!(agents[0].refused_report_items, 1);
    assert_eq!(agents[0].refused_reports, 4);
    assert_eq!(
        placement(&t.client, "bids").await,
        [
            (0, Some("a".into()), "stopped".into()),
            (1, Some("a".into()), "pending".into())
        ]
    );
}

#[tokio::test]
async fn the_observed_state_aggregates_every_lane() {
    let dir = tempfile::tempdir().unwrap();
    let t = start_hub(
        &dir.path().join("hub.sqlite"),
        Duration::from_secs(60),
        false,
    )
    .await;
    let a = t
        .client
        .register(&register_request("a", "boot", 1))
        .await
        .unwrap();
    let b = t
        .client
        .register(&register_request("b", "boot", 1))
        .await
        .unwrap();
    t.client
        .submit(&submit("bids", spec(dir.path(), 2), DesiredState::Running))
        .await
        .unwrap();
    let phase = || async { t.client.get_job("bids").await.unwrap().observed };
    assert_eq!(phase().await.phase, ObservedPhase::Converging);
    report(
        &t.client,
        "a",
        &a,
        0,
        vec![lane_status("bids", 1, 0, LaneState::Running)],
    )
    .await
    .unwrap();
    assert_eq!(
        phase().await.phase,
        ObservedPhase::Converging,
        "lane 1 is still pending"
    );
    report(
        &t.client,
        "b",
        &b,
        0,
        vec![lane_status("bids", 1, 1, LaneState::Running)],
    )
    .await
    .unwrap();
    assert_eq!(phase().await.phase, ObservedPhase::Running);
    // A lane reported by the wrong Agent is refused.
    let ack = report(
        &t.client,
        "a",
        &a,
        1,
        vec![lane_status("bids", 1, 1, LaneState::Failed)],
    )
    .await
    .unwrap();
    assert_eq!(ack.refused, 1);
    assert_eq!(phase().await.phase, ObservedPhase::Running);
    report(
        &t.client,
        "b",
        &b,
        1,
        vec![lane_status("bids", 1, 1, LaneState::Failed)],
    )
    .await
    .unwrap();
    let failed = phase().await;
    assert_eq!(failed.phase, ObservedPhase::Failed);
    assert_eq!(failed.cause.as_deref(), Some("lane 1 on `b`: disk full"));
    assert_eq!(
        placement(&t.client, "bids").await[0].2,
        "running",
        "the healthy lane stays visible"
    );
}

/// Takes a job-level checkpoint or savepoint of job `bids` (lanes 0 on `a`, 1 on `b`) and
/// returns its id; `seq` is each Agent's next report sequence.
async fn checkpoint_both(
    t: &TestHub,
    a: &Registration,
    b: &Registration,
    seq: u64,
    savepoint: bool,
) -> String {
    let accepted = if savepoint {
        t.client
            .savepoint(
                "bids",
                &SavepointRequest {
                    name: Some("before-upgrade".into()),
                },
            )
            .await
            .expect("the hub answers")
    } else {
        t.client.checkpoint("bids").await.expect("the hub answers")
    };
    let generation = accepted.generation;
    for (agent, reg, lane) in [("a", a, 0), ("b", b, 1)] {
        let commands = t
            .client
            .commands(agent, &reg.session_token)
            .await
            .expect("the hub answers");
        let cmd = commands
            .iter()
            .find(|c| matches!(&c.action, CommandAction::Checkpoint { checkpoint_id, .. } if *checkpoint_id == accepted.checkpoint_id))
            .expect("a checkpoint command");
        report(
            &t.client,
            agent,
            reg,
            seq,
            vec![
                ReportItem::CommandResult {
                    command_id: cmd.command_id.clone(),
                    job_id: "bids".into(),
                    generation,
                    outcome: CommandOutcome::Ok,
                },
                ReportItem::LaneCheckpoint {
                    job_id: "bids".into(),
                    generation,
                    checkpoint_id: accepted.checkpoint_id.clone(),
                    lane,
                    epoch: 7 + u64::from(lane),
                },
            ],
        )
        .await
        .expect("the hub answers");
        let records = t
            .client
            .job_detail("bids")
            .await
            .expect("the hub answers")
            .recovery_records;
        let complete = records
            .iter()
            .any(|r| r.checkpoint_id == accepted.checkpoint_id);
        assert_eq!(
            complete,
            lane == 1,
            "published only once every lane reported"
        );
    }
    accepted.checkpoint_id
}

#[tokio::test]
async fn a_job_manifest_is_published_only_when_every_lane_reported() {
    let dir = tempfile::tempdir().unwrap();
    let t = start_hub(
        &dir.path().join("hub.sqlite"),
        Duration::from_secs(60),
        false,
    )
    .await;
    let a = t
        .client
        .register(&register_request("a", "boot", 1))
        .await
        .unwrap();
    let b = t
        .client
        .register(&register_request("b", "boot", 1))
        .await
        .unwrap();
    t.client
        .submit(&submit("bids", spec(dir.path(), 2), DesiredState::Running))
        .await
        .unwrap();
    let id = checkpoint_both(&t, &a, &b, 0, false).await;
    let detail = t.client.job_detail("bids").await.unwrap();
    let record = &detail.recovery_records[0];
    assert_eq!(record.checkpoint_id, id);
    assert_eq!(
        record
            .lane_epochs
            .iter()
            .map(|(l, e)| (*l, *e))
            .collect::<Vec<_>>(),
        [(0, 7), (1, 8)]
    );
    let path = dir
        .path()
        .join("checkpoints")
        .join(JobManifest::relative_path(&id));
    assert_eq!(record.manifest_path, path.display().to_string());
    let manifest: JobManifest = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert!(manifest.verify());
    assert_eq!(manifest.checksum, record.checksum);
    assert_eq!(manifest.body.generation, 1);
    assert_eq!(manifest.body.version_id, detail.version.version_id);
}

#[tokio::test]
async fn upgrades_need_a_stopped_job_and_a_savepoint_and_roll_back() {
    let dir = tempfile::tempdir().unwrap();
    let t = start_hub(
        &dir.path().join("hub.sqlite"),
        Duration::from_secs(60),
        false,
    )
    .await;
    let a = t
        .client
        .register(&register_request("a", "boot", 1))
        .await
        .unwrap();
    let b = t
        .client
        .register(&register_request("b", "boot", 1))
        .await
        .unwrap();
    t.client
        .submit(&submit("bids", spec(dir.path(), 2), DesiredState::Running))
        .await
        .unwrap();
    let mut v2 = spec(dir.path(), 2);
    v2["sources"][0]["options"]["rows"] = json!(20);
    let upgrade = |savepoint: &str| UpgradeRequest {
        sql: None,
        spec: Some(v2.clone()),
        savepoint_id: savepoint.into(),
    };

    let checkpoint = checkpoint_both(&t, &a, &b, 0, false).await;
    let savepoint = checkpoint_both(&t, &a, &b, 1, true).await;
    let running = t
        .client
        .upgrade("bids", &upgrade(&savepoint))
        .await
        .unwrap_err();
    assert_eq!(status(&running), (409, Some("desiredState".into())));

    let stopped = t
        .client
        .set_desired_state(
            "bids",
            &DesiredStateChange {
                desired_state: DesiredState::Stopped,
                generation: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(stopped.observed.phase, ObservedPhase::Converging);
    let not_converged = t
        .client
        .upgrade("bids", &upgrade(&savepoint))
        .await
        .unwrap_err();
    assert_eq!(status(&not_converged), (409, Some("desiredState".into())));
    report(
        &t.client,
        "a",
        &a,
        2,
        vec![lane_status("bids", 2, 0, LaneState::Stopped)],
    )
    .await
    .unwrap();
    report(
        &t.client,
        "b",
        &b,
        2,
        vec![lane_status("bids", 2, 1, LaneState::Stopped)],
    )
    .await
    .unwrap();
    assert_eq!(
        t.client.get_job("bids").await.unwrap().observed.phase,
        ObservedPhase::Stopped
    );

    for missing in ["nope", checkpoint.as_str()] {
        let refused = t
            .client
            .upgrade("bids", &upgrade(missing))
            .await
            .unwrap_err();
        assert_eq!(
            status(&refused),
            (409, Some("savepointId".into())),
            "{missing}"
        );
    }
    let mut wider = upgrade(&savepoint);
    wider.spec.as_mut().unwrap()["parallelism"] = json!(3);
    assert_eq!(
        status(&t.client.upgrade("bids", &wider).await.unwrap_err()),
        (409, Some("spec.parallelism".into()))
    );
    let mut broken = upgrade(&savepoint);
    broken.spec.as_mut().unwrap()["sinks"][0]["input"] = json!("nothing");
    assert_eq!(
        status(&t.client.upgrade("bids", &broken).await.unwrap_err()).0,
        422
    );
    assert_eq!(
        t.client.job_versions("bids").await.unwrap().len(),
        1,
        "failures leave the old version"
    );

    let applied = t
        .client
        .upgrade("bids", &upgrade(&savepoint))
        .await
        .unwrap();
    assert_eq!(applied.state, UpgradeState::Applied);
    let job = t.client.get_job("bids").await.unwrap();
    assert_eq!(job.current_version, applied.to_version);
    assert_eq!(t.client.job_versions("bids").await.unwrap().len(), 2);

    // The next start restores the savepoint's lane epochs.
    t.client
        .set_desired_state(
            "bids",
            &DesiredStateChange {
                desired_state: DesiredState::Running,
                generation: None,
            },
        )
        .await
        .unwrap();
    let commands = t.client.commands("a", &a.session_token).await.unwrap();
    let runs = run_lanes(&commands, "bids");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(
        runs[0].2,
        Restore::LaneEpochs([(0, 7), (1, 8)].into_iter().collect())
    );
    let rollback_running = t
        .client
        .rollback("bids", &applied.upgrade_id)
        .await
        .unwrap_err();
    assert_eq!(status(&rollback_running).0, 409);

    t.client
        .set_desired_state(
            "bids",
            &DesiredStateChange {
                desired_state: DesiredState::Stopped,
                generation: None,
            },
        )
        .await
        .unwrap();
    report(
        &t.client,
        "a",
        &a,
        3,
        vec![lane_status("bids", 4, 0, LaneState::Stopped)],
    )
    .await
    .unwrap();
    report(
        &t.client,
        "b",
        &b,
        3,
        vec![lane_status("bids", 4, 1, LaneState::Stopped)],
    )
    .await
    .unwrap();
    let rolled = t
        .client
        .rollback("bids", &applied.upgrade_id)
        .await
        .unwrap();
    assert_eq!(rolled.state, UpgradeState::RolledBack);
    let detail = t.client.job_detail("bids").await.unwrap();
    assert_eq!(detail.job.current_version, applied.from_version);
    assert_eq!(detail.upgrades[0].state, UpgradeState::RolledBack);
    assert_eq!(
        status(&t.client.rollback("bids", "nope").await.unwrap_err()),
        (404, Some("upgradeId".into()))
    );
}

#[tokio::test]
async fn the_store_survives_a_reopen_with_nothing_lost() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hub.sqlite");
    let (jobs, detail, agents) = {
        let t = start_hub(&db, Duration::from_secs(60), false).await;
        let a = t
            .client
            .register(&register_request("a", "boot", 2))
            .await
            .unwrap();
        t.client
            .submit(&submit("bids", spec(dir.path(), 2), DesiredState::Running))
            .await
            .unwrap();
        report(
            &t.client,
            "a",
            &a,
            0,
            vec![lane_status("bids", 1, 0, LaneState::Running)],
        )
        .await
        .unwrap();
        let out = (
            serde_json::to_value(t.client.list_jobs().await.unwrap()).unwrap(),
            serde_json::to_value(t.client.job_detail("bids").await.unwrap()).unwrap(),
            serde_json::to_value(t.client.list_agents().await.unwrap()).unwrap(),
        );
        drop(t);
        out
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let t = start_hub(&db, Duration::from_secs(60), false).await;
    assert_eq!(
        serde_json::to_value(t.client.list_jobs().await.unwrap()).unwrap(),
        jobs
    );
    assert_eq!(
        serde_json::to_value(t.client.job_detail("bids").await.unwrap()).unwrap(),
        detail
    );
    assert_eq!(
        serde_json::to_value(t.client.list_agents().await.unwrap()).unwrap(),
        agents
    );
    drop(t.hub.clone());
}
