//! The Hub as an attacker and a careless user meet it, as a real process: every call without a
//! token, with a wrong or revoked one, or with too weak a role is refused (401/403, a JSON
//! error); an Agent without the join token, or taking over another Agent's id, is refused;
//! secrets never come back; the store and the Agent's credential are owner-only files; over
//! TLS, a client that verifies the Hub's self-signed certificate gets in, one that does not is
//! refused.

use crate::cluster::{Cluster, Proc};
use crate::hub_auth;
use std::time::{Duration, Instant};
use weir_control::{
    AgentCapabilities, CHECKPOINT_PROTOCOL, ControlError, DesiredState, DesiredStateChange,
    HubClient, RegisterAgent, STATE_BACKEND_REDB, SubmitJob, ValidateRequest,
};

/// A job that validates without touching any storage, with an S3 secret in its script.
const SECRET: &str = "TOPSECRETVALUE-42";

fn job_with_a_secret() -> String {
    format!(
        "SET 'parallelism' = '1';
SET 'checkpoint.interval' = '1s';
SET 'checkpoint.dir' = 's3://bucket/cp';
SET 's3.endpoint' = 'http://127.0.0.1:1';
SET 's3.access-key' = 'AKIDEXAMPLE';
SET 's3.secret-key' = '{SECRET}';
CREATE TABLE g (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '10');
CREATE TABLE o (id BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO o SELECT id FROM g;
"
    )
}

fn status<T: std::fmt::Debug>(r: Result<T, ControlError>) -> u16 {
    match r {
        Err(e) => e.status().unwrap_or_else(|| panic!("no HTTP status: {e}")),
        Ok(v) => panic!("expected a refusal, got {v:?}"),
    }
}

fn register(id: &str, credential: &str) -> RegisterAgent {
    RegisterAgent {
        agent_id: id.into(),
        boot_id: "boot-x".into(),
        credential: credential.into(),
        capabilities: AgentCapabilities {
            runtime_version: weir_control::RUNTIME_VERSION.into(),
            state_backends: vec![STATE_BACKEND_REDB.into()],
            checkpoint_protocol: CHECKPOINT_PROTOCOL,
            slots: 1,
            allow: None,
        },
    }
}

#[cfg(unix)]
fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_role_gets_what_it_may_and_nothing_else_and_secrets_stay_hidden() {
    let cluster = Cluster::start(1, 1, "2s").await;
    let base = format!("http://{}", cluster.hub_addr());
    let dir = cluster.dir();
    let viewer_token = hub_auth::create_token(&cluster.weir(), dir, "viewer");
    let operator_token = hub_auth::create_token(&cluster.weir(), dir, "operator");
    let anonymous = HubClient::new(&base).expect("client");
    let wrong = anonymous.clone().with_token("weir_000000000000_nope");
    let viewer = anonymous.clone().with_token(viewer_token.clone());
    let operator = anonymous.clone().with_token(operator_token);
    let admin = &cluster.client;
    let submit = SubmitJob {
        name: "secret".into(),
        sql: Some(job_with_a_secret()),
        spec: None,
        desired_state: DesiredState::Stopped,
    };
    let validate = ValidateRequest {
        name: Some("secret".into()),
        sql: Some(job_with_a_secret()),
        spec: None,
    };
    let start = DesiredStateChange {
        desired_state: DesiredState::Running,
        generation: None,
    };

    // No token, a wrong one: 401 with a JSON error naming the header, on every user endpoint.
    for client in [&anonymous, &wrong] {
        assert_eq!(status(client.list_jobs().await), 401);
        assert_eq!(status(client.list_agents().await), 401);
        assert_eq!(status(client.validate(&validate).await), 401);
        assert_eq!(status(client.submit(&submit).await), 401);
        match client.job_metrics("secret").await {
            Err(ControlError::Api { status, error, .. }) => {
                assert_eq!(status, 401);
                assert_eq!(error.field.as_deref(), Some("Authorization"));
            }
            other => panic!("expected 401, got {other:?}"),
        }
    }
    let raw = reqwest::get(format!("{base}/metrics")).await.expect("GET");
    assert_eq!(raw.status().as_u16(), 401);
    assert_eq!(raw.headers()["www-authenticate"], "Bearer");
    // What needs no token: the pages of the workbench, its mode, the API's description.
    for path in ["/", "/api/v1/ui/config", "/api/v1/openapi.json"] {
        let page = reqwest::get(format!("{base}{path}")).await.expect("GET");
        assert_eq!(page.status().as_u16(), 200, "{path}");
    }

    // A viewer reads, and may change nothing.
    assert_eq!(status(viewer.submit(&submit).await), 403);
    assert_eq!(status(viewer.validate(&validate).await), 403);
    admin.submit(&submit).await.expect("an admin submits");
    assert!(viewer.list_jobs().await.expect("a viewer lists").len() == 1);
    viewer.job_detail("secret").await.expect("a viewer reads");
    assert_eq!(
        status(viewer.set_desired_state("secret", &start).await),
        403
    );
    assert_eq!(status(viewer.checkpoint("secret").await), 403);

    // An operator starts and stops, and may not submit, validate or upgrade.
    assert_eq!(status(operator.submit(&submit).await), 403);
    assert_eq!(status(operator.validate(&validate).await), 403);
    operator
        .set_desired_state("secret", &start)
        .await
        .expect("an operator starts a job");
    operator
        .set_desired_state(
            "secret",
            &DesiredStateChange {
                desired_state: DesiredState::Stopped,
                generation: None,
            },
        )
        .await
        .expect("an operator stops a job");

    // The secret never comes back: not in the versions' script, not in the detail.
    for text in [
        serde_json::to_string(&viewer.job_versions("secret").await.expect("versions"))
            .expect("JSON"),
        serde_json::to_string(&viewer.job_detail("secret").await.expect("detail")).expect("JSON"),
    ] {
        assert!(!text.contains(SECRET), "the secret came back: {text}");
        assert!(text.contains("******"), "{text}");
    }

    // A revoked token is refused from then on.
    let id = viewer_token
        .split('_')
        .nth(1)
        .expect("a token id")
        .to_owned();
    let revoked = std::process::Command::new(cluster.weir())
        .args(["hub", "token", "revoke", &id, "--db", "hub.sqlite"])
        .current_dir(dir)
        .output()
        .expect("weir hub token revoke");
    assert!(revoked.status.success(), "{revoked:?}");
    assert_eq!(status(viewer.list_jobs().await), 401);

    // Agents: no join token, a wrong one, and another credential for a registered id.
    let join = std::fs::read_to_string(dir.join(hub_auth::JOIN_TOKEN_FILE)).expect("join token");
    let join = join.trim();
    let newcomer = register("intruder", "a-credential-of-my-own");
    assert_eq!(status(anonymous.register("", &newcomer).await), 401);
    assert_eq!(
        status(anonymous.register("not-the-join-token", &newcomer).await),
        403
    );
    // An API token, even an admin's, is not the join token.
    assert_eq!(
        status(admin.register(&cluster.admin_token, &newcomer).await),
        403
    );
    let takeover = register("agent-0", "not-agent-0s-credential");
    assert_eq!(status(anonymous.register(join, &takeover).await), 403);
    assert!(
        cluster
            .client
            .list_agents()
            .await
            .expect("agents")
            .iter()
            .all(|a| a.agent_id != "intruder"),
        "an Agent without the join token was registered"
    );
    // The real Agent keeps its session: it still heartbeats (its lease stays live).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let agents = cluster.client.list_agents().await.expect("agents");
    assert_eq!(agents.len(), 1);
    assert_eq!(
        agents[0].state,
        weir_control::AgentState::Live,
        "{agents:?}"
    );

    // Owner-only files: the store (tokens' hashes, job secrets) and the Agent's credential.
    #[cfg(unix)]
    {
        assert_eq!(mode(&dir.join("hub.sqlite")), 0o600);
        assert_eq!(mode(&dir.join("hub.sqlite-wal")), 0o600);
        assert_eq!(mode(&dir.join("agent-0.credential")), 0o600);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_clients_and_agents_verify_the_hubs_self_signed_certificate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .expect("a self-signed certificate");
    std::fs::write(dir.path().join("hub.pem"), certified.cert.pem()).expect("cert");
    std::fs::write(
        dir.path().join("hub.key"),
        certified.key_pair.serialize_pem(),
    )
    .expect("key");
    let weir = std::path::PathBuf::from(env!("CARGO_BIN_EXE_weir"));
    let admin = hub_auth::create_token(&weir, dir.path(), "admin");
    hub_auth::write_join_token(dir.path());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address")
        .port();
    let listen = format!("127.0.0.1:{port}");
    let _hub = Proc::spawn(
        "hub",
        &[
            "hub",
            "--listen",
            &listen,
            "--db",
            "hub.sqlite",
            "--join-token-file",
            hub_auth::JOIN_TOKEN_FILE,
            "--tls-cert",
            "hub.pem",
            "--tls-key",
            "hub.key",
        ],
        dir.path(),
    );
    let url = format!("https://localhost:{port}");
    let pem = certified.cert.pem();
    let trusting = HubClient::new(&url)
        .expect("client")
        .with_token(admin.clone())
        .with_ca_certificate(pem.as_bytes(), "hub.pem")
        .expect("the CA");
    let started = Instant::now();
    while trusting.list_agents().await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the Hub did not answer over TLS: {:?}",
            trusting.list_agents().await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A client that does not trust the certificate is refused by its own TLS check; plain
    // HTTP to the TLS port gets no answer.
    let untrusting = HubClient::new(&url)
        .expect("client")
        .with_token(admin.clone());
    match untrusting.list_agents().await {
        Err(ControlError::Transport { .. }) => {}
        other => panic!("expected a TLS failure, got {other:?}"),
    }
    let plain = HubClient::new(&format!("http://127.0.0.1:{port}"))
        .expect("client")
        .with_token(admin);
    assert!(plain.list_agents().await.is_err());

    // An Agent given the CA registers over TLS.
    let _agent = Proc::spawn(
        "agent",
        &[
            "agent",
            "--hub",
            &url,
            "--id",
            "tls-agent",
            "--join-token-file",
            hub_auth::JOIN_TOKEN_FILE,
            "--ca-cert",
            "hub.pem",
        ],
        dir.path(),
    );
    let started = Instant::now();
    loop {
        let agents = trusting.list_agents().await.expect("agents");
        if agents.iter().any(|a| a.agent_id == "tls-agent") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the Agent did not register over TLS: {}",
            std::fs::read_to_string(dir.path().join("agent.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A thousand authenticated requests at once (each checks its token in the store) are all
/// answered, and an API call made while they run is too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_answers_a_thousand_concurrent_requests() {
    let cluster = Cluster::start(0, 1, "2s").await;
    let started = Instant::now();
    let calls: Vec<_> = (0..1_000)
        .map(|_| {
            // Clones share a pool of HTTP/1 connections, one request at a time on each: up to a
            // thousand connections, as many users would open.
            let client = cluster.client.clone();
            tokio::spawn(async move { client.list_jobs().await.map(|jobs| jobs.len()) })
        })
        .collect();
    let during = tokio::time::timeout(Duration::from_secs(60), cluster.client.list_agents())
        .await
        .expect("an API call answered within 60 s while a thousand run");
    during.expect("the agent list");
    let mut answered = 0;
    for call in calls {
        let listed = tokio::time::timeout(Duration::from_secs(120), call)
            .await
            .expect("every request answered within 120 s")
            .expect("the request's task");
        assert_eq!(listed.expect("200 with the jobs"), 0);
        answered += 1;
    }
    assert_eq!(answered, 1_000);
    eprintln!(
        "1,000 concurrent requests answered in {:?}",
        started.elapsed()
    );
}
