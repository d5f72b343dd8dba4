//! The Agent protocol: sessions, leases, report sequencing and fencing, observed state.

use crate::support::*;
use std::time::Duration;
use weir_control::{
    AgentState, CommandOutcome, DesiredState, LaneState, ObservedPhase, Registration, ReportItem,
    Restore,
};

#[tokio::test]
async fn registering_again_with_the_same_boot_keeps_lanes_and_a_new_boot_moves_them() {
    let dir = tempfile::tempdir().unwrap();
    let t = fresh_hub(dir.path()).await;
    let first = t
        .client
        .register(JOIN_TOKEN, &register_request("a", "boot-1", 4))
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
        .register(JOIN_TOKEN, &register_request("a", "boot-1", 4))
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
    // Acknowledged, it is not delivered again.
    let ack = report(
        &t.client,
        "a",
        &again,
        0,
        vec![ReportItem::CommandResult {
            command_id: redelivered[0].command_id.clone(),
            job_id: "bids".into(),
            version_id: redelivered[0].version_id.clone(),
            generation: 1,
            outcome: CommandOutcome::Ok,
        }],
    )
    .await
    .unwrap();
    assert_eq!(ack.accepted, 1);
    assert!(
        t.client
            .commands("a", &again.session_token)
            .await
            .unwrap()
            .is_empty()
    );
    let stale = t
        .client
        .heartbeat("a", &first.session_token)
        .await
        .unwrap_err();
    assert_eq!(status(&stale).0, 409);

    let restarted = t
        .client
        .register(JOIN_TOKEN, &register_request("a", "boot-2", 4))
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
    // Leases of 2 s: the set-up must end inside one, also on a loaded machine (600 ms did not
    // under a parallel benchmark).
    let (t, a, b) = two_agents_running_bids_with(dir.path(), Duration::from_secs(2), true, 2).await;
    assert_eq!(
        placement(&t.client, "bids").await,
        [
            (0, Some("a".into()), "pending".into()),
            (1, Some("b".into()), "pending".into())
        ]
    );
    // a heartbeats for three lease lengths; b stays silent.
    for _ in 0..60 {
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
    let t = fresh_hub(dir.path()).await;
    let old = t.register("a", 4).await;
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
    let new = t.register("a", 4).await;
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
    t.set_desired("bids", DesiredState::Stopped).await;
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
    let (t, a, b) = two_agents_running_bids(dir.path()).await;
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
    // The run started when the Hub sent the lanes; the failure is in the lane history.
    let detail = t.client.job_detail("bids").await.unwrap();
    assert!(detail.job.running_since.is_some(), "{:?}", detail.job);
    let failure = detail
        .lane_history
        .iter()
        .find(|r| r.lane == 1 && r.generation == 1)
        .expect("lane 1 of generation 1");
    assert_eq!(failure.state, "failed");
    assert_eq!(failure.cause.as_deref(), Some("disk full"));
    assert_eq!(failure.agent_id.as_deref(), Some("b"));
    // Stopped: no run; the next generation's lanes come first in the history, the failure
    // stays.
    let stopped = t.set_desired("bids", DesiredState::Stopped).await;
    assert_eq!(stopped.running_since, None);
    let history = t.client.job_detail("bids").await.unwrap().lane_history;
    assert!(
        history
            .first()
            .is_some_and(|r| r.generation == stopped.generation)
            && history
                .iter()
                .any(|r| r.generation == 1 && r.state == "failed"),
        "{history:?}"
    );
}

#[tokio::test]
async fn lanes_wait_for_a_slot_and_are_placed_when_an_agent_registers() {
    let dir = tempfile::tempdir().unwrap();
    let t = fresh_hub(dir.path()).await;
    t.client
        .submit(&submit("bids", spec(dir.path(), 2), DesiredState::Running))
        .await
        .unwrap();
    assert_eq!(
        placement(&t.client, "bids").await,
        [(0, None, "pending".into()), (1, None, "pending".into())]
    );
    let a = t.register("a", 1).await;
    assert_eq!(
        placement(&t.client, "bids").await,
        [
            (0, Some("a".into()), "pending".into()),
            (1, None, "pending".into())
        ],
        "never over an Agent's slots"
    );
    let commands = t.client.commands("a", &a.session_token).await.unwrap();
    assert_eq!(run_lanes(&commands, "bids"), [(1, vec![0], Restore::None)]);
    let b = t.register("b", 4).await;
    assert_eq!(
        placement(&t.client, "bids").await,
        [
            (0, Some("a".into()), "pending".into()),
            (1, Some("b".into()), "pending".into())
        ]
    );
    let commands = t.client.commands("b", &b.session_token).await.unwrap();
    assert_eq!(run_lanes(&commands, "bids"), [(1, vec![1], Restore::None)]);
    assert_eq!(t.client.get_job("bids").await.unwrap().generation, 1);
}

/// Agents declare the keyed-state backends they offer; a job's lanes go only to Agents that
/// offer its backend, and wait with the reason while none does.
#[tokio::test]
async fn a_redis_job_waits_for_an_agent_that_offers_redis() {
    let dir = tempfile::tempdir().unwrap();
    let t = fresh_hub(dir.path()).await;
    let redis = redis_spec(dir.path(), 2, "redis://127.0.0.1:6379/0");
    t.client
        .submit(&submit("bids", redis.clone(), DesiredState::Running))
        .await
        .unwrap();
    let redb_only = t.register_offering("redb-only", 4, &["redb"]).await;
    let offered = |agent: &str, agents: &[weir_control::AgentEntry]| {
        agents
            .iter()
            .find(|a| a.agent_id == agent)
            .map(|a| a.capabilities.state_backends.clone())
    };
    assert_eq!(
        offered("redb-only", &t.client.list_agents().await.unwrap()),
        Some(vec!["redb".to_owned()])
    );
    // The redb-only Agent gets nothing: both lanes wait, and say why.
    assert_eq!(
        placement(&t.client, "bids").await,
        [(0, None, "pending".into()), (1, None, "pending".into())]
    );
    let commands = t
        .client
        .commands("redb-only", &redb_only.session_token)
        .await
        .unwrap();
    assert!(run_lanes(&commands, "bids").is_empty(), "{commands:?}");
    let why = "no live Agent offers the `redis` state backend";
    let detail = t.client.job_detail("bids").await.unwrap();
    assert!(
        detail
            .assignments
            .iter()
            .all(|a| a.cause.as_deref().is_some_and(|c| c.starts_with(why))),
        "{:?}",
        detail.assignments
    );
    let observed = t.client.get_job("bids").await.unwrap().observed;
    assert_eq!(observed.phase, ObservedPhase::Converging);
    assert!(
        observed
            .cause
            .as_deref()
            .is_some_and(|c| c.starts_with(&format!("lane 0 waits for an Agent: {why}"))),
        "{observed:?}"
    );
    // Validation names the Agent that cannot run it, and that no live Agent can.
    let validated = t
        .client
        .validate(&weir_control::ValidateRequest {
            name: Some("bids2".into()),
            sql: None,
            spec: Some(redis),
        })
        .await
        .unwrap();
    assert!(!validated.valid, "{validated:?}");
    assert!(
        validated.warnings.iter().any(|w| w
            .starts_with("Agent `redb-only` cannot run it: it offers no `redis` state backend")),
        "{validated:?}"
    );

    // An Agent that offers redis takes both lanes; the wait causes are gone.
    let with_redis = t
        .register_offering("with-redis", 4, &["redb", "redis"])
        .await;
    assert_eq!(
        placement(&t.client, "bids").await,
        [
            (0, Some("with-redis".into()), "pending".into()),
            (1, Some("with-redis".into()), "pending".into())
        ]
    );
    let commands = t
        .client
        .commands("with-redis", &with_redis.session_token)
        .await
        .unwrap();
    assert_eq!(
        run_lanes(&commands, "bids"),
        [(1, vec![0, 1], Restore::None)]
    );
    let detail = t.client.job_detail("bids").await.unwrap();
    assert!(
        detail.assignments.iter().all(|a| a.cause.is_none()),
        "{:?}",
        detail.assignments
    );
    assert_eq!(detail.job.observed.cause, None);
    // A redb job goes to any Agent: here to the redb-only one, which holds fewer lanes.
    t.client
        .submit(&submit(
            "totals",
            spec(dir.path(), 2),
            DesiredState::Running,
        ))
        .await
        .unwrap();
    assert_eq!(
        placement(&t.client, "totals").await,
        [
            (0, Some("redb-only".into()), "pending".into()),
            (1, Some("redb-only".into()), "pending".into())
        ]
    );
}
