//! The Hub over HTTP on 127.0.0.1: the real router, a real SQLite file, `HubClient` and raw
//! requests. Agents are played by the tests through the Agent protocol. One test binary (each
//! links DataFusion); its modules are under `hub_api/`.

#[path = "hub_api/agents.rs"]
mod agents;
#[path = "hub_api/checkpoints.rs"]
mod checkpoints;
#[path = "hub_api/live.rs"]
mod live;
#[path = "hub_api/metrics.rs"]
mod metrics;
#[path = "hub_api/support.rs"]
mod support;

use serde_json::{Value, json};
use std::time::Duration;
use support::*;
use weir_control::{DesiredState, DesiredStateChange, LaneState, ObservedPhase, ValidateRequest};

#[tokio::test]
async fn submit_validate_list_detail_and_versions() {
    let dir = tempfile::tempdir().unwrap();
    let t = fresh_hub(dir.path()).await;
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

    // The only live Agent runs another Weir: nothing can run the job.
    let mut other = register_request("old", "boot", 4);
    other.capabilities.runtime_version = "0.0.1".into();
    t.client.register(JOIN_TOKEN, &other).await.unwrap();
    let no_agent = t
        .client
        .validate(&ValidateRequest {
            name: Some("bids".into()),
            sql: None,
            spec: Some(spec(dir.path(), 2)),
        })
        .await
        .unwrap();
    assert!(!no_agent.valid);
    assert!(
        no_agent.errors[0]
            .message
            .contains("runtime version 0.0.1 is not the Hub's"),
        "{no_agent:?}"
    );

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
    // Every schema reference resolves.
    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    out.push(r.clone());
                }
                map.values().for_each(|v| refs(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(all.len() > 20, "{all:?}");
    for r in all {
        let name = r.trim_start_matches("#/components/schemas/");
        assert!(
            doc["components"]["schemas"][name].is_object(),
            "unresolved {r}"
        );
    }
}

#[tokio::test]
async fn malformed_bodies_and_unknown_ids_name_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let t = fresh_hub(dir.path()).await;
    let http = reqwest::Client::new();
    let send = |method: reqwest::Method, path: &str, body: Option<&str>| {
        let mut r = http.request(method, format!("{}{path}", t.base));
        // Users present their API token, Agents the join token; a heartbeat without its
        // session token is refused.
        if path.ends_with("/register") {
            r = r.bearer_auth(JOIN_TOKEN);
        } else if !path.ends_with("/heartbeat") {
            r = r.bearer_auth(&t.admin);
        }
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
                r#"{"agentId": "a", "bootId": "b", "credential": "0123456789abcdef", "capabilities": {"runtimeVersion": "x", "stateBackends": [], "checkpointProtocol": 1}}"#,
            ),
            400,
            "capabilities.slots",
        ),
        (Method::POST, "/api/v1/agents/nope/heartbeat", None, 401, ""),
        (
            Method::POST,
            "/api/v1/agents/register",
            Some(
                r#"{"agentId": "a/b", "bootId": "b", "credential": "0123456789abcdef", "capabilities": {"runtimeVersion": "x", "stateBackends": [], "checkpointProtocol": 1, "slots": 1}}"#,
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
    let t = fresh_hub(dir.path()).await;
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
async fn the_store_survives_a_reopen_with_nothing_lost() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hub.sqlite");
    let (jobs, detail, agents) = {
        let t = start_hub(&db, Duration::from_secs(60), false).await;
        let a = t.register("a", 2).await;
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

/// Set in the child process of the SIGKILL test: the SQLite file its Hub serves.
const CHILD_DB_ENV: &str = "WEIR_HUB_TEST_CHILD_DB";
const CHILD_READY: &str = "weir-hub-test-listening ";

/// Kills a Hub process with SIGKILL after it acknowledged writes, then opens its SQLite file
/// (WAL) again: every acknowledged write is there. The test runs itself as the Hub process:
/// with [`CHILD_DB_ENV`] set it serves a Hub until killed.
#[tokio::test]
async fn a_hub_killed_with_sigkill_loses_nothing_it_acknowledged() {
    if let Ok(db) = std::env::var(CHILD_DB_ENV) {
        let t = start_hub(std::path::Path::new(&db), Duration::from_secs(60), true).await;
        println!("{CHILD_READY}{}", t.base);
        std::future::pending::<()>().await;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hub.sqlite");
    // The child's Hub serves this store: a token made in it first is one the child accepts.
    let (_, admin) = weir_hub::Store::open(&db, 60_000)
        .unwrap()
        .create_token("parent", weir_hub::Role::Admin, 0)
        .unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_hub_killed_with_sigkill_loses_nothing_it_acknowledged",
            "--nocapture",
        ])
        .env(CHILD_DB_ENV, &db)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    // A failing assertion before the kill must not leave the child serving.
    struct KillOnDrop(std::process::Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = KillOnDrop(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if let Some(url) = line.strip_prefix(CHILD_READY) {
                let _ = tx.send(url.to_owned());
            }
        }
    });
    let url = rx.recv_timeout(Duration::from_secs(60)).unwrap();
    let client = weir_control::HubClient::new(&url)
        .unwrap()
        .with_token(admin);
    let agent = client
        .register(JOIN_TOKEN, &register_request("a", "boot", 2))
        .await
        .unwrap();
    client
        .submit(&submit("bids", spec(dir.path(), 2), DesiredState::Running))
        .await
        .unwrap();
    report(
        &client,
        "a",
        &agent,
        0,
        vec![lane_status("bids", 1, 0, LaneState::Running)],
    )
    .await
    .unwrap();
    let acknowledged = client
        .set_desired_state(
            "bids",
            &DesiredStateChange {
                desired_state: DesiredState::Stopped,
                generation: Some(1),
            },
        )
        .await
        .unwrap();
    let detail = serde_json::to_value(client.job_detail("bids").await.unwrap()).unwrap();
    let agents = serde_json::to_value(client.list_agents().await.unwrap()).unwrap();
    child.0.kill().unwrap(); // SIGKILL
    child.0.wait().unwrap();

    let t = start_hub(&db, Duration::from_secs(60), false).await;
    assert_eq!(
        t.client.get_job("bids").await.unwrap().generation,
        acknowledged.generation
    );
    assert_eq!(
        serde_json::to_value(t.client.job_detail("bids").await.unwrap()).unwrap(),
        detail
    );
    assert_eq!(
        serde_json::to_value(t.client.list_agents().await.unwrap()).unwrap(),
        agents
    );
    // The session survived too: its next report is seq 1, a replay of 0 is refused.
    let replay = report(&t.client, "a", &agent, 0, vec![]).await.unwrap_err();
    assert_eq!(status(&replay), (409, Some("seq".into())));
    report(&t.client, "a", &agent, 1, vec![]).await.unwrap();
}

/// Validation reads none of the job's files and reaches no other machine: a source on an S3
/// endpoint that is a listener of this test gets no connection, and a source that would infer
/// its schema from a local file is refused with a request to declare it, its content never in
/// the answer.
#[tokio::test]
async fn validation_touches_no_file_and_no_network() {
    let dir = tempfile::tempdir().unwrap();
    let t = fresh_hub(dir.path()).await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let s3 = json!({
        "endpoint": endpoint, "region": "us-east-1",
        "access_key_id": "AKIDEXAMPLE", "secret_access_key": "secret-of-the-test"
    });
    let mut job = spec(dir.path(), 1);
    job["sources"] = json!([{
        "name": "bids", "connector": "file",
        "schema": [{ "name": "auction", "type": "int64" }],
        "options": { "path": "s3://bucket/in/*.csv", "format": "csv", "s3": s3 }
    }]);
    job["sinks"] = json!([{
        "name": "out", "connector": "file", "input": "bids",
        "options": { "path": "s3://bucket/out", "format": "csv", "s3": s3 }
    }]);
    let valid = t
        .client
        .validate(&ValidateRequest {
            name: Some("remote".into()),
            sql: None,
            spec: Some(job),
        })
        .await
        .unwrap();
    assert!(valid.valid, "{valid:?}");
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the Hub connected to the job's endpoint: {other:?}"),
    }

    let secret_file = dir.path().join("secret.csv");
    std::fs::write(&secret_file, "root:x:0:0\n").unwrap();
    let mut job = spec(dir.path(), 1);
    job["sources"] = json!([{
        "name": "bids", "connector": "file",
        "options": { "path": secret_file.display().to_string() }
    }]);
    job["operators"] = json!([{
        "name": "f", "type": "filter", "input": "bids",
        "options": { "predicate": "missing > 1" }
    }]);
    job["sinks"][0]["input"] = json!("f");
    let refused = t
        .client
        .validate(&ValidateRequest {
            name: Some("local".into()),
            sql: None,
            spec: Some(job),
        })
        .await
        .unwrap();
    assert!(!refused.valid);
    let text = serde_json::to_string(&refused).unwrap();
    assert!(text.contains("declare the columns"), "{text}");
    assert!(
        !text.contains("root:x"),
        "the file's content came back: {text}"
    );
}

/// `${env:NAME}` references are the Agents' to read: the Hub validates a job whose variable it
/// does not have, keeps the reference as written in what it stores and shows, and refuses a
/// malformed one naming its path.
#[tokio::test]
async fn validation_reads_no_environment_variable_and_keeps_references() {
    let dir = tempfile::tempdir().unwrap();
    let t = fresh_hub(dir.path()).await;
    let reference = "${env:WEIR_HUB_TEST_VARIABLE_NOBODY_SETS}";
    let mut job = spec(dir.path(), 1);
    job["sinks"] = json!([{
        "name": "out", "connector": "file", "input": "bids",
        "options": { "path": reference, "format": "csv" }
    }]);
    let request = |job: Value| ValidateRequest {
        name: Some("refs".into()),
        sql: None,
        spec: Some(job),
    };
    let valid = t.client.validate(&request(job.clone())).await.unwrap();
    assert!(valid.valid, "{valid:?}");
    let summary = t
        .client
        .submit(&submit("refs", job.clone(), DesiredState::Stopped))
        .await
        .unwrap();
    let detail =
        serde_json::to_string(&t.client.job_detail(&summary.job_id).await.unwrap()).unwrap();
    assert!(detail.contains(reference), "{detail}");
    job["sinks"][0]["options"]["path"] = json!("${env:1-not-a-name}");
    let refused = t.client.validate(&request(job)).await.unwrap();
    assert!(!refused.valid, "{refused:?}");
    let text = serde_json::to_string(&refused).unwrap();
    assert!(
        text.contains("sinks[0].options.path") && text.contains("not an environment variable"),
        "{text}"
    );
}

/// An Agent's allow-lists are checked at validation: a job that writes outside them cannot run
/// on it (an error when it is the only live Agent), one inside them can.
#[tokio::test]
async fn validation_checks_the_live_agents_allow_lists() {
    let dir = tempfile::tempdir().unwrap();
    let t = fresh_hub(dir.path()).await;
    let mut narrow = register_request("narrow", "boot", 2);
    narrow.capabilities.allow = Some(weir_control::AllowedPlaces {
        paths: vec![dir.path().join("allowed").display().to_string()],
        urls: vec![],
    });
    t.client.register(JOIN_TOKEN, &narrow).await.unwrap();
    let mut job = spec(dir.path(), 1);
    job["checkpoint"]["dir"] = json!(dir.path().join("allowed/cp").display().to_string());
    job["sinks"] = json!([{
        "name": "out", "connector": "file", "input": "bids",
        "options": { "path": dir.path().join("elsewhere").display().to_string(), "format": "csv" }
    }]);
    let request = |job: Value| ValidateRequest {
        name: Some("places".into()),
        sql: None,
        spec: Some(job),
    };
    let refused = t.client.validate(&request(job.clone())).await.unwrap();
    assert!(!refused.valid, "{refused:?}");
    let text = serde_json::to_string(&refused).unwrap();
    assert!(
        text.contains("elsewhere") && text.contains("allow-lists"),
        "{text}"
    );
    job["sinks"][0]["options"]["path"] =
        json!(dir.path().join("allowed/out").display().to_string());
    let valid = t.client.validate(&request(job.clone())).await.unwrap();
    assert!(valid.valid, "{valid:?}");
    // Valid, with a word on the checkpoints: a local directory must be shared by every Agent
    // and the Hub; none at all means each Agent's own.
    assert!(
        valid.warnings.iter().any(|w| w.contains("is a local path")),
        "{valid:?}"
    );
    job["checkpoint"].as_object_mut().unwrap().remove("dir");
    let undirected = t.client.validate(&request(job)).await.unwrap();
    assert!(
        undirected
            .warnings
            .iter()
            .any(|w| w.contains("no `checkpoint.dir`")),
        "{undirected:?}"
    );
}

/// Lanes are placed only on Agents whose allow-lists take every place the job touches: with
/// only a refusing Agent live a lane waits, and it goes to an Agent that allows it once one
/// registers.
#[tokio::test]
async fn lanes_are_placed_only_where_the_allow_lists_take_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let t = fresh_hub(dir.path()).await;
    let mut narrow = register_request("narrow", "boot", 4);
    narrow.capabilities.allow = Some(weir_control::AllowedPlaces {
        paths: vec!["/nowhere".into()],
        urls: vec![],
    });
    t.client.register(JOIN_TOKEN, &narrow).await.unwrap();
    let mut job = spec(dir.path(), 1);
    job["sinks"] = json!([{
        "name": "out", "connector": "file", "input": "bids",
        "options": { "path": dir.path().join("out").display().to_string(), "format": "csv" }
    }]);
    t.client
        .submit(&submit("placed", job, DesiredState::Running))
        .await
        .unwrap();
    assert_eq!(
        placement(&t.client, "placed").await,
        [(0, None, "pending".to_owned())],
        "a lane waits rather than go where it is refused"
    );
    t.register("wide", 1).await;
    let on: Vec<_> = placement(&t.client, "placed")
        .await
        .into_iter()
        .map(|(_, agent, _)| agent)
        .collect();
    assert_eq!(on, [Some("wide".to_owned())]);
}

/// A SQL job's deep-build error is reported at the `CREATE TABLE` option that wrote it: line
/// and column of the script, the script's words in the message, the spec's JSON path as `path`.
#[tokio::test]
async fn a_sql_jobs_bad_option_is_reported_at_its_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let t = fresh_hub(dir.path()).await;
    let sql = "SET 'checkpoint.interval' = '1s';\n\
               CREATE TABLE t (a BIGINT) WITH ('connector' = 'filesystem', 'path' = 'in.csv', 'format' = 'xml');\n\
               CREATE TABLE o (a BIGINT) WITH ('connector' = 'blackhole');\n\
               INSERT INTO o SELECT a FROM t;\n";
    let refused = t
        .client
        .validate(&ValidateRequest {
            name: Some("bad-format".into()),
            sql: Some(sql.into()),
            spec: None,
        })
        .await
        .unwrap();
    assert!(!refused.valid, "{refused:?}");
    let error = &refused.errors[0];
    assert_eq!(
        (error.line, error.column),
        (Some(2), Some(80)),
        "{refused:?}"
    );
    assert_eq!(error.path.as_deref(), Some("sources[0].options.format"));
    assert!(
        error.message.contains("option 'format' of table `t`"),
        "{refused:?}"
    );
}
