//! Distributed jobs with real processes on 127.0.0.1: one `weir hub` and `weir agent`s, the
//! real Kafka broker and S3 server of the test kit (see `cluster/`).
//!
//! The proof: a SQL job (Kafka with 8 partitions -> tumbling window -> Parquet on S3) submitted
//! through the Hub's API at parallelism 3 (three lanes) over three Agents; one Agent is
//! SIGKILLed mid-run and the Hub is SIGKILLed and restarted; every closed window must be in the
//! output exactly once, with the counts the input gives. Then a savepoint, an upgrade refused
//! (its logic differs) and one accepted (started from the savepoint), and a rollback to the
//! first version (from the same savepoint, withdrawing the newer version's output): each time
//! every window exactly once.
//!
//! Security (see `security/`): tokens and roles, the join token, secrets, TLS, against a real
//! Hub process.
//!
//! The workbench (see `workbench/`): the same kind of Hub and Agent, driven from headless
//! Chromium through the web pages the Hub serves.
//!
//! The measurement (ignored; docs/performance.md, "Distributed jobs"): the same job on one
//! Agent and on three, from desired state running to the first and the last output, and from
//! an Agent's SIGKILL to the job running again.
#![cfg(unix)]

mod cluster;
#[path = "cluster/delta_lanes.rs"]
mod delta_lanes;
mod hub_auth;
mod security;
mod workbench;

use cluster::{
    AUCTIONS, Cluster, Input, PARTITIONS, assert_windows, bucket_store, closed_windows, job_sql,
    part_names,
};
use std::time::{Duration, Instant};
use weir_control::{
    DesiredState, ObservedPhase, SavepointRequest, UpgradeRequest, UpgradeState, ValidateRequest,
};
use weir_testkit::kafka::KafkaBroker;
use weir_testkit::s3 as server;
use weir_testkit::unique_name;

const LANES: u32 = 3;

/// A validate request whose expression is 20,000 operators deep gets a located error, one as
/// deep as allowed is valid (planned on the Hub's threads), a constant call that would build a
/// 1 GB string is refused, and the Hub keeps answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_answers_a_validate_request_too_deep_to_plan_with_an_error_and_lives() {
    let cluster = Cluster::start(0, 1, "2s").await;
    let checkpoints = tempfile::tempdir().expect("tempdir");
    let sql = |terms: usize| {
        format!(
            "SET 'checkpoint.interval' = '1s';\n\
             SET 'checkpoint.dir' = '{}';\n\
             CREATE TABLE t (a BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '10');\n\
             CREATE TABLE o (a BIGINT) WITH ('connector' = 'blackhole');\n\
             INSERT INTO o SELECT a{} FROM t;",
            checkpoints.path().display(),
            " + 1".repeat(terms)
        )
    };
    let validate = async |terms: usize| {
        cluster
            .client
            .validate(&ValidateRequest {
                name: Some("deep".into()),
                sql: Some(sql(terms)),
                spec: None,
            })
            .await
            .expect("the Hub answers")
    };
    let refused = validate(20_000).await;
    assert!(!refused.valid);
    let errors = format!("{:?}", refused.errors);
    assert!(errors.contains("more than 1000 levels"), "{errors}");
    let deepest = validate(999).await;
    assert!(deepest.valid, "{:?}", deepest.errors);
    // Planning folds constants: this call would have built a 1 GB string inside the Hub.
    let huge = cluster
        .client
        .validate(&ValidateRequest {
            name: Some("huge".into()),
            sql: Some(sql(0).replace("SELECT a FROM", "SELECT repeat('x', 1000000000) FROM")),
            spec: None,
        })
        .await
        .expect("the Hub answers");
    assert!(!huge.valid);
    let errors = format!("{:?}", huge.errors);
    assert!(
        errors.contains("repeat(...) asks for 1000000000"),
        "{errors}"
    );
    cluster
        .client
        .list_agents()
        .await
        .expect("the Hub still answers");
}

/// What the Hub answers on a raw connection that sent `request`: the status line, or `None`
/// when it closed the connection without an answer.
async fn status_line(stream: &mut tokio::net::TcpStream) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut answer = Vec::new();
    let mut buf = [0_u8; 4096];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
        }
        if answer.windows(2).any(|w| w == b"\r\n") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&answer);
    text.lines().next().map(str::to_owned)
}

/// A body over the limit gets 413 before it is sent; a client that stalls in its headers is
/// disconnected, one that stalls in its body gets 408; with more stalled connections than the
/// Hub serves at once, an API call still gets its answer once their header time is up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_bounds_bodies_and_stalled_connections_and_keeps_answering() {
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpStream;
    let cluster = Cluster::start_with(
        0,
        1,
        "2s",
        &[
            "--header-timeout",
            "1s",
            "--body-timeout",
            "1s",
            "--max-connections",
            "200",
        ],
    )
    .await;
    let addr = cluster.hub_addr();
    let token = cluster.admin_token.clone();
    let post = |length: usize| {
        format!(
            "POST /api/v1/jobs/validate HTTP/1.1\r\nHost: hub\r\nContent-Type: \
             application/json\r\nAuthorization: Bearer {token}\r\nContent-Length: \
             {length}\r\n\r\n"
        )
    };
    let within = |seconds: u64, what: &'static str| {
        move |r: Result<Option<String>, tokio::time::error::Elapsed>| {
            r.unwrap_or_else(|_| panic!("{what}: no answer within {seconds} s"))
        }
    };

    // 100 MB announced: refused with 413 after the headers, nothing more is read.
    let mut big = TcpStream::connect(addr).await.expect("connect");
    big.write_all(post(100 << 20).as_bytes())
        .await
        .expect("write");
    big.write_all(b"{\"sql\": \"").await.expect("write");
    let answer = tokio::time::timeout(Duration::from_secs(5), status_line(&mut big)).await;
    let answer = within(5, "the 100 MB body")(answer);
    assert_eq!(answer.as_deref(), Some("HTTP/1.1 413 Payload Too Large"));

    // Half a request line, then nothing: disconnected.
    let mut stalled = TcpStream::connect(addr).await.expect("connect");
    stalled
        .write_all(b"POST /api/v1/jobs/val")
        .await
        .expect("write");
    let answer = tokio::time::timeout(Duration::from_secs(10), status_line(&mut stalled)).await;
    let answer = within(10, "the stalled headers")(answer);
    assert!(
        answer.as_deref().is_none_or(|l| l.contains(" 408 ")),
        "{answer:?}"
    );

    // Headers, then 10 of the 100 bytes announced: 408.
    let mut slow = TcpStream::connect(addr).await.expect("connect");
    slow.write_all(post(100).as_bytes()).await.expect("write");
    slow.write_all(b"{\"sql\": \"").await.expect("write");
    let answer = tokio::time::timeout(Duration::from_secs(10), status_line(&mut slow)).await;
    let answer = within(10, "the stalled body")(answer);
    assert_eq!(answer.as_deref(), Some("HTTP/1.1 408 Request Timeout"));

    // 1,000 stalled connections, five times as many as the Hub serves at once.
    let mut held = Vec::new();
    for _ in 0..1_000 {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(b"GET /api/v1/ag").await.expect("write");
        held.push(s);
    }
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(30), cluster.client.list_agents())
        .await
        .expect("an API call answered within 30 s")
        .expect("the agent list");
    assert!(started.elapsed() < Duration::from_secs(30));
    drop(held);
}

/// The walk-through's job (examples/bids-lanes.sql), submitted to a Hub with two Agents from
/// the directory the docs start them in, finishes and writes what `weir run` writes of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_walk_through_job_runs_on_two_agents_as_it_runs_in_one_process() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let sql = std::fs::read_to_string(root.join("examples/bids-lanes.sql")).expect("example");
    let cluster = Cluster::start(2, 2, "5s").await;
    let local = tempfile::tempdir().expect("tempdir");
    for dir in [cluster.dir(), local.path()] {
        std::fs::create_dir_all(dir.join("examples/data")).expect("data dir");
        for file in ["bids-0.csv", "bids-1.csv"] {
            std::fs::copy(
                root.join("examples/data").join(file),
                dir.join("examples/data").join(file),
            )
            .expect("copy the bundled bids");
        }
    }
    std::fs::write(local.path().join("examples/bids-lanes.sql"), &sql).expect("write the job");
    let job = cluster.submit("bids-lanes", sql).await;
    cluster.request(&job, DesiredState::Running).await;
    cluster
        .until("the job finished", async |c| {
            let observed = c.detail(&job).await.job.observed;
            assert_ne!(observed.phase, ObservedPhase::Failed, "{observed:?}");
            (observed.phase == ObservedPhase::Finished).then_some(())
        })
        .await;

    let ran = std::process::Command::new(cluster.weir())
        .args(["run", "examples/bids-lanes.sql"])
        .current_dir(local.path())
        .env("RUST_LOG", "warn")
        .output()
        .expect("weir run");
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let rows = async |dir: &std::path::Path| {
        let store = object_store::local::LocalFileSystem::new_with_prefix(dir).expect("store");
        let mut rows = cluster::published(&store, "out/bids-lanes").await;
        rows.sort_unstable();
        rows
    };
    let distributed = rows(cluster.dir()).await;
    assert!(!distributed.is_empty(), "the lanes wrote no window");
    assert_eq!(distributed, rows(local.path()).await);

    // At their default log level the Hub and the Agents say what they did.
    let log = |name: &str| {
        std::fs::read_to_string(cluster.dir().join(format!("{name}.log"))).expect("log")
    };
    let (hub, agent) = (log("hub"), log("agent-0"));
    for said in [
        "an Agent registered",
        "the job's desired state changed",
        "lanes placed",
    ] {
        assert!(hub.contains(said), "the Hub's log lacks `{said}`:\n{hub}");
    }
    for said in ["Agent started", "registered with the Hub"] {
        assert!(
            agent.contains(said),
            "agent-0's log lacks `{said}`:\n{agent}"
        );
    }

    // A job the Hub refuses is named by its file.
    std::fs::write(
        cluster.dir().join("broken-job.sql"),
        "INSERT INTO nowhere SELEC 1;",
    )
    .expect("write");
    let refused = std::process::Command::new(cluster.weir())
        .args(["jobs", "submit", "broken-job.sql", "--hub"])
        .arg(format!("http://{}", cluster.hub_addr()))
        .env("WEIR_TOKEN", &cluster.admin_token)
        .env_remove("WEIR_TOKEN_FILE")
        .current_dir(cluster.dir())
        .output()
        .expect("weir jobs submit");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(stderr.contains("broken-job.sql"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_over_three_agents_survives_an_agent_kill_and_a_hub_restart_exactly_once() {
    let broker = KafkaBroker::shared().expect("the Kafka test broker");
    let s3 = server::server().expect("the S3 test server");
    let bucket = s3.create_bucket("lanes").expect("bucket");
    let topic = unique_name("bids-lanes");
    broker.create_topic(&topic, PARTITIONS).expect("topic");
    let input = Input {
        before_flush: 12_000,
        after_flush: 4_000,
    };
    let mut cluster = Cluster::start(3, 3, "2s").await;
    let client = cluster.client.clone();

    // Validate, submit stopped, inspect, then start: the flow the API documents.
    let sql = job_sql(broker, &topic, s3, &bucket, LANES, 300);
    let validated = client
        .validate(&ValidateRequest {
            name: Some("bids-lanes".into()),
            sql: Some(sql.clone()),
            spec: None,
        })
        .await
        .expect("validate");
    assert!(validated.valid, "{:?}", validated.errors);
    assert_eq!(validated.lanes, Some(LANES));
    let job = cluster.submit("bids-lanes", sql).await;
    assert_eq!(
        cluster.detail(&job).await.job.observed.phase,
        ObservedPhase::Stopped
    );
    cluster.set_state(&job, DesiredState::Running).await;

    // Half the input before the kill, and a job-level checkpoint over every lane.
    let half = input.before_flush / 2;
    input.produce(broker, &topic, 0..half);
    let accepted = client.checkpoint(&job).await.expect("checkpoint");
    cluster
        .until("a job-level checkpoint of every lane", async |c| {
            let d = c.detail(&job).await;
            d.recovery_records
                .iter()
                .find(|r| r.checkpoint_id == accepted.checkpoint_id)
                .map(|r| r.lane_epochs.len())
                .filter(|&n| n == LANES as usize)
        })
        .await;

    // SIGKILL the Agent with the most lanes; the others take them over.
    let victim = cluster.busiest_agent(&job).await;
    cluster.kill_agent(&victim);
    let killed_at = Instant::now();
    cluster.until_moved(&job, LANES, &victim).await;
    eprintln!(
        "the job ran again {:?} after the SIGKILL of {victim}",
        killed_at.elapsed()
    );

    // SIGKILL the Hub and start it again on the same database: nothing is lost.
    cluster.restart_hub();
    cluster
        .until("the restarted Hub knows the running job", async |c| {
            let d = c.client.job_detail(&job).await.ok()?;
            (d.job.observed.phase == ObservedPhase::Running).then_some(())
        })
        .await;

    // The rest of the input, then a record that closes every window.
    input.produce(broker, &topic, half..input.before_flush);
    input.produce_flush(broker, &topic, 1);
    let storage = bucket_store(s3, &bucket);
    let store = storage.store.as_ref();
    assert_windows(
        &cluster,
        store,
        "out",
        &input.expected(0..input.before_flush),
    )
    .await;

    // A savepoint, then upgrades started from it.
    let savepoint = client
        .savepoint(
            &job,
            &SavepointRequest {
                name: Some("before-v2".into()),
            },
        )
        .await
        .expect("savepoint");
    cluster
        .until("the savepoint of every lane", async |c| {
            let d = c.detail(&job).await;
            d.recovery_records
                .iter()
                .any(|r| {
                    r.checkpoint_id == savepoint.checkpoint_id
                        && r.lane_epochs.len() == LANES as usize
                })
                .then_some(())
        })
        .await;
    let at_savepoint = part_names(store, "out").await;
    cluster.set_state(&job, DesiredState::Stopped).await;
    // A new version whose logic differs cannot restore the savepoint: refused, the job stays.
    let other_logic =
        job_sql(broker, &topic, s3, &bucket, LANES, 300).replace("COUNT(*)", "COUNT(price)");
    let refused = client
        .upgrade(
            &job,
            &UpgradeRequest {
                sql: Some(other_logic),
                spec: None,
                savepoint_id: savepoint.checkpoint_id.clone(),
                actions: Default::default(),
            },
        )
        .await
        .expect_err("another logic");
    assert_eq!(refused.status(), Some(409), "{refused}");
    // A new version whose logic changes in a way that keeps the window's state: a filter
    // before it, which every bid passes (so the output is the first version's), and another
    // checkpoint interval. The preview says the window keeps its state; the lanes restore the
    // savepoint into it by the rules of changing a job.
    let filtered = job_sql(broker, &topic, s3, &bucket, LANES, 200)
        .replace(
            "INSERT INTO bids_per_auction",
            "CREATE VIEW priced AS SELECT * FROM bids WHERE price >= 0;\n\nINSERT INTO \
             bids_per_auction",
        )
        .replace("TUMBLE(TABLE bids,", "TUMBLE(TABLE priced,");
    let request = UpgradeRequest {
        sql: Some(filtered),
        spec: None,
        savepoint_id: savepoint.checkpoint_id.clone(),
        actions: Default::default(),
    };
    let preview = client
        .preview_upgrade(&job, &request)
        .await
        .expect("preview");
    let window = preview
        .operators
        .iter()
        .find(|c| c["typeName"] == "window")
        .expect("the window in the preview");
    assert!(
        preview.allowed && preview.logic_changed && window["verdict"] == "kept",
        "{preview:?}"
    );
    let upgrade = client.upgrade(&job, &request).await.expect("upgrade");
    assert_eq!(client.job_versions(&job).await.expect("versions").len(), 2);
    cluster.set_state(&job, DesiredState::Running).await;
    let total = input.before_flush + input.after_flush;
    input.produce(broker, &topic, input.before_flush..total);
    input.produce_flush(broker, &topic, 2);
    let all = input.expected(0..total);
    assert_windows(&cluster, store, "out", &all).await;
    let by_v2: Vec<String> = part_names(store, "out")
        .await
        .difference(&at_savepoint)
        .cloned()
        .collect();
    assert!(!by_v2.is_empty(), "the new version published part files");

    // Rollback: the first version again, from the same savepoint. The lanes pass over the
    // epochs the new version made durable and withdraw their output, then read the rest of the
    // input again: every window is still there exactly once.
    cluster.set_state(&job, DesiredState::Stopped).await;
    let rolled_back = client
        .rollback(&job, &upgrade.upgrade_id)
        .await
        .expect("rollback");
    assert_eq!(rolled_back.state, UpgradeState::RolledBack);
    cluster.set_state(&job, DesiredState::Running).await;
    cluster
        .until("the new version's output withdrawn", async |_| {
            let now = part_names(store, "out").await;
            by_v2.iter().all(|f| !now.contains(f)).then_some(())
        })
        .await;
    assert_windows(&cluster, store, "out", &all).await;
    cluster.set_state(&job, DesiredState::Stopped).await;
}

/// One measured run: a backlog of `records` in Kafka, the job started on `agents` Agents.
/// Returns seconds from desired state running to the first part file and to the last window,
/// and (with more than one Agent) from an Agent's SIGKILL to the job running again.
async fn measure(agents: usize, records: u64) -> (f64, f64, Option<f64>) {
    let broker = KafkaBroker::shared().expect("the Kafka test broker");
    let s3 = server::server().expect("the S3 test server");
    let bucket = s3.create_bucket("measure").expect("bucket");
    let topic = unique_name("bids-measure");
    broker.create_topic(&topic, PARTITIONS).expect("topic");
    let input = Input {
        before_flush: records,
        after_flush: 0,
    };
    input.produce(broker, &topic, 0..records);
    input.produce_flush(broker, &topic, 1);
    let cluster = Cluster::start(agents, LANES, "2s").await;
    let job = cluster
        .submit(
            "bids-lanes",
            job_sql(broker, &topic, s3, &bucket, LANES, 1000),
        )
        .await;
    let storage = bucket_store(s3, &bucket);
    let store = storage.store.as_ref();
    let started = Instant::now();
    cluster.request(&job, DesiredState::Running).await;
    cluster
        .until("the first part file", async |_| {
            (!part_names(store, "out").await.is_empty()).then_some(())
        })
        .await;
    let first = started.elapsed().as_secs_f64();
    let want = input.expected(0..records);
    let (got, repeated) = closed_windows(&cluster, store, "out", want.len()).await;
    let last = started.elapsed().as_secs_f64();
    assert!(repeated.is_empty() && got == want, "the output is exact");
    let mut cluster = cluster;
    let recovery = if agents > 1 {
        let victim = cluster.busiest_agent(&job).await;
        cluster.kill_agent(&victim);
        let killed = Instant::now();
        cluster.until_moved(&job, LANES, &victim).await;
        Some(killed.elapsed().as_secs_f64())
    } else {
        None
    };
    cluster.set_state(&job, DesiredState::Stopped).await;
    (first, last, recovery)
}

/// Run with a release build: `WEIR_BIN=target/release/weir cargo test --workspace --test
/// distributed -- --ignored --nocapture` (docs/performance.md, "Distributed jobs");
/// `WEIR_MEASURE_RECORDS` (default 400,000) and `WEIR_MEASURE_ROUNDS` (default 3) size it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run it by hand with a release build (docs/performance.md)"]
async fn measure_one_agent_against_three() {
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let records = env("WEIR_MEASURE_RECORDS", 400_000);
    let rounds = env("WEIR_MEASURE_ROUNDS", 3);
    println!(
        "{records} records ({AUCTIONS} auctions, 8 partitions), {LANES} lanes, leases of 2 s, \
         {rounds} rounds"
    );
    for round in 1..=rounds {
        for agents in [1, 3] {
            let (first, last, recovery) = measure(agents, records).await;
            println!(
                "round {round}, {agents} Agent(s): first output {first:.2} s, last window \
                 {last:.2} s ({:.0} records/s){}",
                records as f64 / last,
                recovery
                    .map(|r| format!(", running again {r:.2} s after an Agent's SIGKILL"))
                    .unwrap_or_default()
            );
        }
    }
}
