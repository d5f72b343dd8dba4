//! Job-level checkpoints, job manifests, upgrades and rollbacks.

use crate::support::*;
use serde_json::json;
use weir_control::{
    CommandAction, CommandOutcome, DesiredState, JobManifest, LaneState, ObservedPhase,
    Registration, ReportItem, Restore, SavepointRequest, UpgradeRequest, UpgradeState,
};

/// Takes a job-level checkpoint or savepoint of job `bids` (lanes 0 on `a`, 1 on `b`) and
/// returns its id; `seq` is each Agent's next report sequence.
pub(crate) async fn checkpoint_both(
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
                    version_id: cmd.version_id.clone(),
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
    let (t, a, b) = two_agents_running_bids(dir.path()).await;
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
    let (t, a, b) = two_agents_running_bids(dir.path()).await;
    // A new version with the same logic (lanes restore a savepoint only into it): another
    // checkpoint interval. One with other logic is refused even for a stopped job.
    let mut v2 = spec(dir.path(), 2);
    v2["checkpoint"]["interval"] = json!("30m");
    let mut other_logic = spec(dir.path(), 2);
    other_logic["sources"][0]["options"]["rows"] = json!(20);
    let upgrade = |savepoint: &str| UpgradeRequest {
        sql: None,
        spec: Some(v2.clone()),
        savepoint_id: savepoint.into(),
        actions: Default::default(),
    };

    let checkpoint = checkpoint_both(&t, &a, &b, 0, false).await;
    let savepoint = checkpoint_both(&t, &a, &b, 1, true).await;
    let running = t
        .client
        .upgrade("bids", &upgrade(&savepoint))
        .await
        .unwrap_err();
    assert_eq!(status(&running), (409, Some("desiredState".into())));

    let stopped = t.set_desired("bids", DesiredState::Stopped).await;
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
    let logic = UpgradeRequest {
        sql: None,
        spec: Some(other_logic.clone()),
        savepoint_id: savepoint.clone(),
        actions: Default::default(),
    };
    let refused = t.client.upgrade("bids", &logic).await.unwrap_err();
    assert_eq!(status(&refused), (409, Some("spec".into())));
    assert!(refused.to_string().contains("logic"), "{refused}");
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
    t.set_desired("bids", DesiredState::Running).await;
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

    t.set_desired("bids", DesiredState::Stopped).await;
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

fn unix_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is past 1970");
    i64::try_from(since.as_millis()).expect("a 64-bit time")
}

/// Ids of the checkpoint commands the Agent has not acknowledged.
async fn checkpoint_ids(t: &TestHub, agent: &str, reg: &Registration) -> Vec<String> {
    let commands = t
        .client
        .commands(agent, &reg.session_token)
        .await
        .expect("commands");
    commands
        .into_iter()
        .filter_map(|c| match c.action {
            CommandAction::Checkpoint { checkpoint_id, .. } => Some(checkpoint_id),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn periodic_checkpoints_follow_the_interval_one_at_a_time_until_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let t = fresh_hub(dir.path()).await;
    let mut job = spec(dir.path(), 2);
    job["checkpoint"]["interval"] = json!("1s");
    job["checkpoint"]["timeout"] = json!("5s");
    let (a, b) = two_agents_running(&t, 1, job).await;
    let now = unix_ms();
    t.hub.maintain(now).unwrap();
    assert!(
        checkpoint_ids(&t, "a", &a).await.is_empty(),
        "no checkpoint while lanes start"
    );
    report(
        &t.client,
        "a",
        &a,
        0,
        vec![lane_status("bids", 1, 0, LaneState::Running)],
    )
    .await
    .unwrap();
    report(
        &t.client,
        "b",
        &b,
        0,
        vec![lane_status("bids", 1, 1, LaneState::Running)],
    )
    .await
    .unwrap();
    t.hub.maintain(now).unwrap();
    let first = checkpoint_ids(&t, "a", &a).await;
    assert_eq!(first.len(), 1);
    assert_eq!(checkpoint_ids(&t, "b", &b).await, first);
    // One in flight: no other before it completes or times out.
    t.hub.maintain(now + 3_000).unwrap();
    assert_eq!(checkpoint_ids(&t, "a", &a).await, first);
    t.hub.maintain(now + 6_000).unwrap();
    let after_timeout = checkpoint_ids(&t, "a", &a).await;
    assert_eq!(after_timeout.len(), 2, "the timed-out one is abandoned");
    assert_eq!(after_timeout[0], first[0]);
}

/// The full tier (docs/testing.md): against a real S3-compatible server.
mod full {
    use super::*;

    #[tokio::test]
    async fn a_job_manifest_goes_to_s3_when_the_checkpoint_dir_is_there() {
        use object_store::ObjectStoreExt;
        use weir_testkit::s3 as server;
        let s3 = server::server().expect("the S3 test server starts");
        let bucket = s3.create_bucket("hub").expect("a bucket");
        let options = weir::api::S3Options {
            endpoint: Some(s3.endpoint().to_owned()),
            region: Some(server::REGION.to_owned()),
            access_key_id: Some(server::ACCESS_KEY_ID.to_owned()),
            secret_access_key: Some(server::SECRET_ACCESS_KEY.to_owned()),
            path_style: Some(true),
            ..weir::api::S3Options::default()
        };
        let url = format!("s3://{bucket}/jobs");
        let dir = tempfile::tempdir().unwrap();
        let t = fresh_hub(dir.path()).await;
        let mut job = spec(dir.path(), 2);
        job["checkpoint"]["dir"] = json!(url);
        job["checkpoint"]["s3"] = serde_json::to_value(&options).unwrap();
        let (a, b) = two_agents_running(&t, 1, job).await;
        let id = checkpoint_both(&t, &a, &b, 0, false).await;
        let record = &t.client.job_detail("bids").await.unwrap().recovery_records[0];
        let relative = JobManifest::relative_path(&id);
        assert_eq!(record.manifest_path, format!("{url}/{relative}"));
        let storage = weir::CheckpointLocation::s3(&url, &options).unwrap();
        let location = relative
            .split('/')
            .fold(storage.base.clone(), |p, part| p.join(part));
        let bytes = storage
            .store
            .get(&location)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let manifest: JobManifest = serde_json::from_slice(&bytes).unwrap();
        assert!(manifest.verify());
        assert_eq!(manifest.checksum, record.checksum);
    }
}

#[tokio::test]
async fn an_upgrade_that_changes_the_logic_is_previewed_refused_then_accepted_with_actions() {
    let dir = tempfile::tempdir().unwrap();
    let (t, a, b) = two_agents_running_bids(dir.path()).await;
    let savepoint = checkpoint_both(&t, &a, &b, 0, true).await;
    t.set_desired("bids", DesiredState::Stopped).await;
    for (agent, reg, lane) in [("a", &a, 0), ("b", &b, 1)] {
        report(
            &t.client,
            agent,
            reg,
            1,
            vec![lane_status("bids", 2, lane, LaneState::Stopped)],
        )
        .await
        .unwrap();
    }
    // Another source option (its read positions would not fit) and a filter before the sink.
    let mut v2 = spec(dir.path(), 2);
    v2["sources"][0]["options"]["rows"] = json!(20);
    v2["operators"] = json!([{
        "name": "big", "type": "filter", "input": "bids",
        "options": { "predicate": "auction > 3" }
    }]);
    v2["sinks"][0]["input"] = json!("big");
    let mut request = UpgradeRequest {
        sql: None,
        spec: Some(v2),
        savepoint_id: savepoint.clone(),
        actions: Default::default(),
    };

    let preview = t.client.preview_upgrade("bids", &request).await.unwrap();
    assert!(preview.logic_changed && !preview.allowed, "{preview:?}");
    let verdict = |p: &weir_control::UpgradePreview, id: &str| {
        p.operators
            .iter()
            .find(|c| c["operatorId"] == id)
            .map(|c| c["verdict"].as_str().unwrap_or_default().to_owned())
    };
    assert_eq!(verdict(&preview, "bids").as_deref(), Some("refused"));
    assert_eq!(verdict(&preview, "big").as_deref(), Some("added"));
    let refused = t.client.upgrade("bids", &request).await.unwrap_err();
    assert_eq!(status(&refused), (409, Some("spec".into())));
    assert!(
        refused.to_string().contains("operator `bids` (datagen)"),
        "{refused}"
    );

    // Reading the source again from its start is what the user asks for.
    request.actions.drop_state = vec!["bids".into()];
    let preview = t.client.preview_upgrade("bids", &request).await.unwrap();
    assert!(preview.allowed, "{preview:?}");
    assert_eq!(verdict(&preview, "bids").as_deref(), Some("starts-empty"));
    let applied = t.client.upgrade("bids", &request).await.unwrap();
    assert_eq!(applied.state, UpgradeState::Applied);

    // The lanes are told the actions with the savepoint's epochs.
    t.set_desired("bids", DesiredState::Running).await;
    let commands = t.client.commands("a", &a.session_token).await.unwrap();
    let actions: Vec<&weir_control::StateActions> = commands
        .iter()
        .filter_map(|c| match &c.action {
            CommandAction::Run {
                restore: Restore::LaneEpochs(_),
                actions,
                ..
            } => Some(actions),
            _ => None,
        })
        .collect();
    assert_eq!(actions.len(), 1, "{commands:?}");
    assert_eq!(actions[0].drop_state, ["bids"]);
}
