//! What the workbench reads: metric pushes from the Agents, a job's recent counters and
//! checkpoints, manifests read back with their checksums checked, the Agents' lanes.

use crate::checkpoints::checkpoint_both;
use crate::support::*;
use serde_json::{Value, json};
use weir_control::{JobManifest, LaneReading, MetricsPush, MetricsSample};

fn reading(generation: u64, lane: u32, at_ms: i64, rows: u64) -> LaneReading {
    LaneReading {
        job_id: "bids".into(),
        lane,
        generation,
        sample: MetricsSample {
            at_ms,
            subtasks: vec![
                serde_json::from_value(json!({
                    "operatorId": "bids", "kind": "source", "subtask": 0,
                    "rowsIn": 0, "rowsOut": rows, "batchesIn": 0, "batchesOut": 1,
                    "bytesIn": 0, "bytesOut": 8 * rows, "headsTask": true,
                    "idleNs": 0, "busyNs": 1, "backpressuredNs": 0,
                    "lateRouted": 0, "lateUpdated": 0
                }))
                .expect("a subtask sample"),
            ],
            splits: vec![],
            operators: vec![],
        },
        checkpoints: Some(json!({"completed": 1})),
        epochs: Some(vec![json!({"epoch": 1, "status": "completed"})]),
    }
}

async fn get_json(t: &TestHub, path: &str) -> (u16, Value) {
    let response = t.get(path).send().await.expect("the hub answers");
    let status = response.status().as_u16();
    let body = response.bytes().await.expect("a body");
    (status, serde_json::from_slice(&body).expect("a JSON body"))
}

#[tokio::test]
async fn pushed_readings_of_the_current_generation_are_what_the_workbench_reads() {
    let dir = tempfile::tempdir().unwrap();
    let (t, a, b) = two_agents_running_bids(dir.path()).await;
    let generation = t.client.get_job("bids").await.unwrap().generation;
    let ack = t
        .client
        .push_metrics(
            "a",
            &a.session_token,
            &MetricsPush {
                lanes: vec![
                    reading(generation, 0, 1_000, 10),
                    reading(generation - 1, 0, 1_000, 10),
                ],
            },
        )
        .await
        .unwrap();
    assert_eq!((ack.accepted, ack.dropped), (1, 1));
    t.client
        .push_metrics(
            "a",
            &a.session_token,
            &MetricsPush {
                lanes: vec![reading(generation, 0, 2_000, 30)],
            },
        )
        .await
        .unwrap();
    // Another Agent's token is not this Agent's session.
    let refused = t
        .client
        .push_metrics(
            "b",
            &a.session_token,
            &MetricsPush {
                lanes: vec![reading(generation, 1, 1_000, 1)],
            },
        )
        .await
        .unwrap_err();
    assert_eq!(status(&refused).0, 409, "{refused}");

    let metrics = t.client.job_metrics("bids").await.unwrap();
    assert_eq!(metrics.generation, generation);
    assert_eq!(metrics.lanes.len(), 1);
    assert_eq!(metrics.lanes[0].agent_id.as_deref(), Some("a"));
    let at: Vec<i64> = metrics.lanes[0].samples.iter().map(|s| s.at_ms).collect();
    assert_eq!(at, [1_000, 2_000]);
    assert_eq!(metrics.lanes[0].samples[1].subtasks[0].rows_out, 30);
    // A poller asks only for what it has not seen; a bad query is refused naming it.
    let (_, newer) = get_json(&t, "/api/v1/jobs/bids/metrics?since=1000").await;
    assert_eq!(
        newer["lanes"][0]["samples"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(newer["lanes"][0]["samples"][0]["atMs"], 2000);
    let (_, newest) = get_json(&t, "/api/v1/jobs/bids/metrics?last=1").await;
    assert_eq!(
        newest["lanes"][0]["samples"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(newest["lanes"][0]["samples"][0]["atMs"], 2000);
    let (code, refused) = get_json(&t, "/api/v1/jobs/bids/metrics?since=soon").await;
    assert_eq!(
        (code, refused["field"].as_str()),
        (400, Some("query")),
        "{refused}"
    );

    let view = t.client.job_checkpoints("bids").await.unwrap();
    assert!(view.records.is_empty());
    assert_eq!(view.lanes[0].epochs[0]["status"], "completed");
    assert_eq!(view.lanes[0].summary, Some(json!({"completed": 1})));
    // The spec keeps the default 3 checkpoints: the one completed epoch is kept.
    assert_eq!(view.lanes[0].retained, [1]);

    // A job-level checkpoint appears with its manifest, checked; an edited one is not.
    let id = checkpoint_both(&t, &a, &b, 0, false).await;
    let view = t.client.job_checkpoints("bids").await.unwrap();
    assert_eq!(view.records[0].checkpoint_id, id);
    let path = format!("/api/v1/jobs/bids/checkpoints/{id}/manifest");
    let (code, manifest) = get_json(&t, &path).await;
    assert_eq!(code, 200, "{manifest}");
    assert_eq!(manifest["verified"], true, "{manifest}");
    assert_eq!(manifest["checksum"], json!(view.records[0].checksum));
    let file = dir
        .path()
        .join("checkpoints")
        .join(JobManifest::relative_path(&id));
    let mut edited: JobManifest = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    edited.body.lane_epochs.insert(0, 99);
    std::fs::write(&file, serde_json::to_vec(&edited).unwrap()).unwrap();
    let (_, manifest) = get_json(&t, &path).await;
    assert_eq!(manifest["verified"], false, "{manifest}");
    let (code, missing) = get_json(&t, "/api/v1/jobs/bids/checkpoints/nope/manifest").await;
    assert_eq!(
        (code, missing["field"].as_str()),
        (404, Some("checkpointId"))
    );
    let (code, _) = get_json(&t, "/api/v1/jobs/bids/lanes/0/epochs/7/manifest").await;
    assert_eq!(
        code, 404,
        "the lanes never ran here, so there is no epoch manifest"
    );

    // The Agents' lanes, and who serves the workbench.
    let agents = t.client.list_agents().await.unwrap();
    let lanes: Vec<(String, Vec<(String, u32)>)> = agents
        .iter()
        .map(|a| {
            let lanes = a
                .assigned
                .iter()
                .map(|l| (l.job_id.clone(), l.lane))
                .collect();
            (a.agent_id.clone(), lanes)
        })
        .collect();
    assert_eq!(
        lanes,
        [
            ("a".to_owned(), vec![("bids".to_owned(), 0)]),
            ("b".to_owned(), vec![("bids".to_owned(), 1)])
        ]
    );
    let (_, config) = get_json(&t, "/api/v1/ui/config").await;
    assert_eq!(config, json!({"mode": "hub"}));
}
