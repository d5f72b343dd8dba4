//! `weir run --metrics-addr` scraped by a real Prometheus server (Debian's package, fetched by
//! weir-testkit) every second, and Prometheus' HTTP API queried for what it stored.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use weir_testkit::prometheus::PrometheusServer;

mod hub_auth;

/// Two subtasks, each reading one split of 20,000 rows in batches of 500; the sink holds each
/// subtask to 2,000 rows a second, so the job runs about five seconds. Checkpoints every 500 ms.
const JOB: &str = r#"
job: metrics-e2e
parallelism: 2
checkpoint: { interval: 500ms }
sources:
  - name: gen
    connector: datagen
    schema:
      - { name: id, type: int64, nullable: false }
    options: { rows: 40000, splits: 2, batch_size: 500 }
operators:
  - name: even
    type: filter
    input: gen
    options: { predicate: "id % 2 = 0" }
sinks:
  - name: out
    connector: blackhole
    input: even
    options: { rows_per_second: 2000 }
"#;

/// The `weir run` process; killed by its PID if the test fails before it ends.
struct Run(Child);

impl Drop for Run {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The samples of an instant query: each series' labels and value.
fn query(prometheus: &PrometheusServer, promql: &str) -> Vec<(Value, f64)> {
    let body = prometheus.query(promql).expect("Prometheus answers");
    let json: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(json["status"], "success", "{body}");
    json["data"]["result"]
        .as_array()
        .expect("a vector result")
        .iter()
        .map(|s| {
            let v = s["value"][1]
                .as_str()
                .expect("a value")
                .parse()
                .expect("a number");
            (s["metric"].clone(), v)
        })
        .collect()
}

fn scalar(prometheus: &PrometheusServer, promql: &str) -> Option<f64> {
    query(prometheus, promql).first().map(|(_, v)| *v)
}

#[test]
fn prometheus_scrapes_a_running_job() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = dir.path().join("job.yaml");
    std::fs::write(&job, JOB).expect("job written");
    let addr = format!("127.0.0.1:{}", free_port());
    let prometheus =
        PrometheusServer::start(std::slice::from_ref(&addr)).expect("a Prometheus server");

    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("run")
        .arg(&job)
        .arg("--json")
        .arg("--metrics-addr")
        .arg(&addr)
        .arg("--checkpoint-dir")
        .arg(dir.path().join("cp"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weir runs");
    let stderr = child.stderr.take().expect("stderr");
    let mut run = Run(child);
    let mut first = String::new();
    BufReader::new(stderr)
        .read_line(&mut first)
        .expect("stderr line");
    assert_eq!(first.trim(), format!("metrics: http://{addr}/metrics"));

    // While the job runs, Prometheus stores the source's rows per subtask, with the job's own
    // `job` label (honor_labels).
    let started = Instant::now();
    let mut series = Vec::new();
    while started.elapsed() < Duration::from_secs(30) {
        series = query(
            &prometheus,
            r#"weir_operator_rows_out_total{operator="gen"}"#,
        );
        if series.len() == 2 && series.iter().all(|(_, v)| *v > 0.0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        run.0.try_wait().expect("wait").is_none(),
        "the job ended before Prometheus stored a sample: make it longer"
    );
    assert_eq!(series.len(), 2, "{series:?}");
    for (labels, _) in &series {
        assert_eq!(labels["job"], "metrics-e2e", "{labels}");
        assert!(
            labels["subtask"] == "0" || labels["subtask"] == "1",
            "{labels}"
        );
    }

    let status = run.0.wait().expect("weir ends");
    let mut stdout = String::new();
    std::io::Read::read_to_string(run.0.stdout.as_mut().expect("stdout"), &mut stdout)
        .expect("stdout read");
    assert!(status.success(), "{status}: {stdout}");
    let summary: Value = serde_json::from_str(&stdout).expect("JSON summary");
    let source_rows = summary["source_rows"].as_f64().expect("source_rows");
    assert_eq!(source_rows, 40000.0, "{summary}");

    // The last scraped values, with the scrapes' time of the whole run in range.
    let last = |metric: &str, operator: &str| {
        scalar(
            &prometheus,
            &format!(
                r#"sum(max_over_time({metric}{{job="metrics-e2e",operator="{operator}"}}[5m]))"#
            ),
        )
        .unwrap_or_else(|| panic!("no {metric} of {operator}"))
    };
    let gen_out = last("weir_operator_rows_out_total", "gen");
    let even_in = last("weir_operator_rows_in_total", "even");
    let even_out = last("weir_operator_rows_out_total", "even");
    let sink_in = last("weir_operator_rows_in_total", "out");
    // Scraped while running: at most what the run read in all, and most of it (the job ran
    // about five seconds, scraped every second).
    assert!(gen_out > 0.0 && gen_out <= source_rows, "{gen_out}");
    assert!(gen_out >= source_rows / 2.0, "{gen_out} of {source_rows}");
    // Within one scrape, the filter saw what the source emitted, but for a batch in flight per
    // subtask; it passes the even half on, and the sink got that.
    assert!(
        gen_out - even_in <= 1000.0 && even_in <= gen_out,
        "{gen_out} {even_in}"
    );
    assert!(
        (even_in / 2.0 - even_out).abs() <= 500.0,
        "{even_in} {even_out}"
    );
    assert!((even_out - sink_in).abs() <= 500.0, "{even_out} {sink_in}");
    let bytes = last("weir_operator_bytes_out_total", "gen");
    assert!(
        bytes >= gen_out * 8.0,
        "{bytes} bytes for {gen_out} Int64 rows"
    );

    // Rows per second while it ran: about 4,000 rows a second from the throttled sinks.
    let rate = scalar(
        &prometheus,
        r#"max_over_time(sum(rate(weir_operator_rows_in_total{job="metrics-e2e",operator="out"}[3s]))[5m:1s])"#,
    )
    .expect("a rate");
    assert!(rate > 1000.0 && rate < 20000.0, "{rate} rows/s");

    // Checkpoints every 500 ms over about five seconds.
    let completed = scalar(
        &prometheus,
        r#"max_over_time(weir_checkpoint_completed_total{job="metrics-e2e"}[5m])"#,
    )
    .expect("checkpoint counter");
    assert!(completed >= 2.0, "{completed} epochs");
    let epoch = scalar(
        &prometheus,
        r#"max_over_time(weir_checkpoint_last_durable_epoch{job="metrics-e2e"}[5m])"#,
    )
    .expect("last durable epoch");
    assert!(epoch >= 1.0, "{epoch}");
    let splits = scalar(
        &prometheus,
        r#"max_over_time(weir_job_splits_assigned_total{job="metrics-e2e"}[5m])"#,
    );
    assert_eq!(splits, Some(2.0));
    // Each split's read position: at most its 20,000 rows, and past the start.
    let positions = query(
        &prometheus,
        r#"max_over_time(weir_source_split_position_records{job="metrics-e2e"}[5m])"#,
    );
    assert_eq!(positions.len(), 2, "{positions:?}");
    for (labels, position) in &positions {
        assert!(
            *position > 0.0 && *position <= 20000.0,
            "{labels} {position}"
        );
    }

    // Every epoch completed was triggered first; while one was in flight the pending-epochs
    // gauge showed it, and it never counts more than one.
    let triggered = scalar(
        &prometheus,
        r#"max_over_time(weir_checkpoint_triggered_total{job="metrics-e2e"}[5m])"#,
    )
    .expect("epochs triggered");
    assert!(
        triggered >= completed,
        "{triggered} triggered, {completed} completed"
    );
    let pending = query(
        &prometheus,
        r#"max_over_time(weir_checkpoint_pending_epochs{job="metrics-e2e"}[5m])"#,
    );
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert!((0.0..=1.0).contains(&pending[0].1), "{pending:?}");

    // The semantic mode in force, as the run's summary reports it.
    let modes = query(
        &prometheus,
        r#"last_over_time(weir_job_semantic_mode_info{job="metrics-e2e"}[5m])"#,
    );
    assert_eq!(modes.len(), 1, "{modes:?}");
    assert_eq!(modes[0].1, 1.0);
    assert_eq!(modes[0].0["mode"], summary["semantic_mode"], "{summary}");

    // The source tasks read and handed on rows: busy time, now counted for them too.
    let source_busy = last("weir_task_busy_seconds_total", "gen");
    assert!(source_busy > 0.0, "{source_busy}");
}

/// `GET http://{addr}{path}`: the status and the body; `None` while nothing listens there.
fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    http_get_with(addr, path, None)
}

/// [`http_get`] with a bearer token.
fn http_get_with(addr: &str, path: &str, token: Option<&str>) -> Option<(u16, String)> {
    let mut request = ureq::get(&format!("http://{addr}{path}")).timeout(Duration::from_secs(10));
    if let Some(token) = token {
        request = request.set("Authorization", &format!("Bearer {token}"));
    }
    let answer = match request.call() {
        Ok(answer) | Err(ureq::Error::Status(_, answer)) => answer,
        Err(ureq::Error::Transport(_)) => return None,
    };
    let status = answer.status();
    Some((status, answer.into_string().ok()?))
}

/// `GET http://{addr}{path}` as JSON, with its status.
fn get_json(addr: &str, path: &str) -> Option<(u16, Value)> {
    let (status, body) = http_get(addr, path)?;
    Some((status, serde_json::from_str(&body).ok()?))
}

/// The value of `series` (name and labels as written) in an exposition.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

fn spawn(args: &[&str], dir: &std::path::Path) -> Run {
    Run(Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("weir runs"))
}

/// Polls `check` every 100 ms for up to 60 s.
fn until<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(t) = check() {
            return t;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_serves_its_lanes_metrics_and_the_hub_its_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let hub_addr = format!("127.0.0.1:{}", free_port());
    let agent_addr = format!("127.0.0.1:{}", free_port());
    let weir = Path::new(env!("CARGO_BIN_EXE_weir"));
    let admin = hub_auth::create_token(weir, dir.path(), "admin");
    hub_auth::write_join_token(dir.path());
    let _hub = spawn(
        &[
            "hub",
            "--listen",
            &hub_addr,
            "--db",
            "hub.sqlite",
            "--join-token-file",
            hub_auth::JOIN_TOKEN_FILE,
        ],
        dir.path(),
    );
    let client = weir_control::HubClient::new(&format!("http://{hub_addr}"))
        .expect("client")
        .with_token(admin.clone());
    let hub_url = format!("http://{hub_addr}");
    let _agent = spawn(
        &[
            "agent",
            "--hub",
            &hub_url,
            "--id",
            "a",
            "--poll-ms",
            "50",
            "--metrics-addr",
            &agent_addr,
            "--join-token-file",
            hub_auth::JOIN_TOKEN_FILE,
        ],
        dir.path(),
    );
    let started = Instant::now();
    while client.list_agents().await.map_or(true, |a| a.is_empty()) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no Agent registered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // One lane of 20,000 rows, held to 4,000 rows a second by the sink: about 5 s.
    let spec = serde_json::json!({
        "parallelism": 1,
        "checkpoint": { "interval": "1s", "dir": dir.path().join("cp").display().to_string() },
        "sources": [{
            "name": "gen", "connector": "datagen",
            "schema": [{ "name": "id", "type": "int64", "nullable": false }],
            "options": { "rows": 20000, "batch_size": 500 }
        }],
        "sinks": [{
            "name": "out", "connector": "blackhole", "input": "gen",
            "options": { "rows_per_second": 4000 }
        }]
    });
    client
        .submit(&weir_control::SubmitJob {
            name: "m".into(),
            sql: None,
            spec: Some(spec),
            desired_state: weir_control::DesiredState::Running,
        })
        .await
        .expect("the Hub takes the job");

    // A lane is a job of its own: its rows under its lane job id, while it runs.
    let (agent_text, hub_text) = tokio::task::spawn_blocking(move || {
        let agent_text = until("the lane's rows in the Agent's metrics", || {
            let (status, body) = http_get(&agent_addr, "/metrics")?;
            assert_eq!(status, 200);
            let rows = sample(
                &body,
                r#"weir_operator_rows_out_total{job="m-lane-0",operator="gen",subtask="0"}"#,
            )?;
            (rows > 0.0).then_some(body)
        });
        let hub_text = until("the job running in the Hub's metrics", || {
            let (_, body) = http_get_with(&hub_addr, "/metrics", Some(&admin))?;
            (sample(&body, r#"weir_hub_jobs{phase="running"}"#)? == 1.0).then_some(body)
        });
        (agent_text, hub_text)
    })
    .await
    .expect("scrapes");
    assert!(
        agent_text
            .contains(r#"weir_operator_rows_in_total{job="m-lane-0",operator="out",subtask="0"}"#),
        "{agent_text}"
    );
    assert!(!agent_text.contains(r#"job="m""#), "{agent_text}");
    assert_eq!(
        sample(&hub_text, r#"weir_hub_agents{state="live"}"#),
        Some(1.0),
        "{hub_text}"
    );
}

#[test]
fn a_busy_metrics_address_is_refused_before_the_job_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = dir.path().join("job.yaml");
    std::fs::write(&job, JOB).expect("job written");
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("address").to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("run")
        .arg(&job)
        .arg("--metrics-addr")
        .arg(&addr)
        .arg("--checkpoint-dir")
        .arg(dir.path().join("cp"))
        .stdin(Stdio::null())
        .output()
        .expect("weir runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("binding the metrics address {addr}")),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no summary: the job did not run");
}

/// `weir run --ui`: the workbench's API for the local job while it runs (plan, counters,
/// checkpoints, manifests checked), and after it ended, until Ctrl-C.
#[test]
fn weir_run_ui_serves_the_local_jobs_workbench() {
    let dir = tempfile::tempdir().expect("tempdir");
    let job = dir.path().join("job.yaml");
    std::fs::write(&job, JOB.replace("metrics-e2e", "ui-e2e")).expect("job written");
    let cp = dir.path().join("cp");
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("run")
        .arg(&job)
        .arg("--json")
        .args(["--ui", "127.0.0.1:0", "--checkpoint-dir"])
        .arg(&cp)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weir runs");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let run = Run(child);
    let mut first = String::new();
    stderr.read_line(&mut first).expect("stderr line");
    let addr = first
        .trim()
        .strip_prefix("workbench: http://")
        .and_then(|a| a.strip_suffix('/'))
        .unwrap_or_else(|| panic!("the workbench's address first: {first}"))
        .to_owned();

    let (status, page) = http_get(&addr, "/").expect("the workbench answers");
    assert_eq!(status, 200);
    assert!(page.contains("<html"), "the workbench's page: {page}");
    let (_, config) = get_json(&addr, "/api/v1/ui/config").expect("the workbench answers");
    assert_eq!(config["mode"], "local", "{config}");
    assert_eq!(config["jobId"], "ui-e2e", "{config}");
    let (_, jobs) = get_json(&addr, "/api/v1/jobs").expect("jobs");
    assert_eq!(jobs[0]["observed"]["phase"], "running", "{jobs}");
    let (_, detail) = get_json(&addr, "/api/v1/jobs/ui-e2e/detail").expect("detail");
    assert!(
        detail["plans"].to_string().contains("\"even\""),
        "the plans name the operators: {detail}"
    );
    let (status, unknown) = get_json(&addr, "/api/v1/jobs/other/metrics").expect("404");
    assert_eq!((status, &unknown["field"]), (404, &json!("jobId")));
    // A request that would change the job, to a path the Hub serves and to one it does not, is
    // refused as read-only, not as a missing endpoint.
    for (method, path) in [
        ("PUT", "/api/v1/jobs/ui-e2e/desired-state"),
        ("POST", "/api/v1/jobs"),
        ("DELETE", "/api/v1/jobs/ui-e2e"),
    ] {
        let answer = match ureq::request(method, &format!("http://{addr}{path}"))
            .timeout(Duration::from_secs(10))
            .send_string("{}")
        {
            Ok(answer) | Err(ureq::Error::Status(_, answer)) => answer,
            Err(e) => panic!("{method} {path}: {e}"),
        };
        assert_eq!(answer.status(), 403, "{method} {path}");
        let body: Value = serde_json::from_str(&answer.into_string().expect("body")).expect("JSON");
        assert!(
            body["error"]
                .as_str()
                .is_some_and(|e| e.starts_with("read-only")),
            "{method} {path}: {body}"
        );
    }

    // The sampler's counters: the source's rows grow from sample to sample.
    until("two samples with rows", || {
        let (_, m) = get_json(&addr, "/api/v1/jobs/ui-e2e/metrics")?;
        let samples = m["lanes"][0]["samples"].as_array()?.clone();
        let rows = |s: &Value| -> u64 {
            s["subtasks"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|t| t["operatorId"] == "gen")
                .filter_map(|t| t["rowsOut"].as_u64())
                .sum()
        };
        let last = samples.last()?;
        (samples.len() >= 2 && rows(last) > rows(&samples[0])).then_some(())
    });

    // A completed epoch, with one row per task, and its manifest checked against its checksum.
    let epoch = until("a completed epoch", || {
        let (_, c) = get_json(&addr, "/api/v1/jobs/ui-e2e/checkpoints")?;
        let epochs = c["lanes"][0]["epochs"].as_array()?.clone();
        epochs.into_iter().find(|e| {
            e["status"] == "completed" && e["tasks"].as_array().is_some_and(|t| !t.is_empty())
        })
    });
    let number = epoch["epoch"].as_u64().expect("an epoch number");
    let path = format!("/api/v1/jobs/ui-e2e/lanes/0/epochs/{number}/manifest");
    let (status, manifest) = get_json(&addr, &path).expect("the manifest");
    assert_eq!(status, 200, "{manifest}");
    assert_eq!(manifest["verified"], true, "{manifest}");
    assert_eq!(manifest["manifest"]["epoch"], number, "{manifest}");
    let file = std::path::PathBuf::from(manifest["path"].as_str().expect("a path"));
    assert!(file.starts_with(&cp), "{}", file.display());
    // A manifest edited after the fact does not verify.
    let text = std::fs::read_to_string(&file).expect("the manifest file");
    let edited = text.replacen("\"epoch\":", "\"epoch\": ", 1);
    assert_ne!(edited, text);
    std::fs::write(&file, edited).expect("edited");
    let (_, manifest) = get_json(&addr, &path).expect("the manifest");
    assert_eq!(manifest["verified"], false, "{manifest}");

    // The job ends; the workbench stays and shows it finished until Ctrl-C.
    let mut line = String::new();
    while !line.contains("the workbench stays up") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).expect("stderr") > 0,
            "weir exited before saying the workbench stays"
        );
    }
    let (_, jobs) = get_json(&addr, "/api/v1/jobs").expect("jobs after the end");
    assert_eq!(jobs[0]["observed"]["phase"], "finished", "{jobs}");
    let pid = run.0.id().to_string();
    let interrupted = Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("kill runs");
    assert!(interrupted.success());
    let mut run = run;
    let status = run.0.wait().expect("weir ends");
    assert!(status.success(), "{status}");
}
