//! `GET /metrics`: jobs by phase, Agents by lease state, the outbox and refused reports, as the
//! store holds them at the scrape.

use super::support::*;
use weir_control::{DesiredState, LaneState};

/// The value of `series` (name and labels as written) in the exposition.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
        .parse()
        .expect("a number")
}

async fn scrape(t: &TestHub) -> String {
    let response = t.get("/metrics").send().await.expect("the hub answers");
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    response.text().await.expect("a body")
}

#[tokio::test]
async fn metrics_show_jobs_agents_the_outbox_and_refused_reports() {
    let dir = tempfile::tempdir().unwrap();
    let t = fresh_hub(dir.path()).await;
    let empty = scrape(&t).await;
    assert!(empty.ends_with("# EOF\n"), "{empty}");
    assert_eq!(sample(&empty, r#"weir_hub_jobs{phase="running"}"#), 0.0);
    assert_eq!(sample(&empty, r#"weir_hub_agents{state="live"}"#), 0.0);

    let old = t.register("a", 4).await;
    t.client
        .submit(&submit("bids", spec(dir.path(), 2), DesiredState::Running))
        .await
        .unwrap();
    let submitted = scrape(&t).await;
    assert_eq!(sample(&submitted, r#"weir_hub_agents{state="live"}"#), 1.0);
    assert_eq!(
        sample(&submitted, r#"weir_hub_agents{state="expired"}"#),
        0.0
    );
    assert_eq!(
        sample(&submitted, r#"weir_hub_jobs{phase="converging"}"#),
        1.0
    );
    let pending = sample(&submitted, r#"weir_hub_outbox_commands{state="pending"}"#);
    assert!(pending >= 1.0, "{submitted}");
    assert_eq!(
        sample(&submitted, r#"weir_hub_outbox_commands{state="claimed"}"#),
        0.0
    );

    // The Agent claims its commands: they stay in the outbox, claimed, until acknowledged.
    let commands = t.client.commands("a", &old.session_token).await.unwrap();
    let claimed = scrape(&t).await;
    assert_eq!(
        sample(&claimed, r#"weir_hub_outbox_commands{state="pending"}"#),
        0.0
    );
    assert_eq!(
        sample(&claimed, r#"weir_hub_outbox_commands{state="claimed"}"#),
        commands.len() as f64
    );

    // A report of a session that registered again is refused and counted.
    t.register("a", 4).await;
    let stale = report(
        &t.client,
        "a",
        &old,
        0,
        vec![lane_status("bids", 1, 0, LaneState::Running)],
    )
    .await
    .unwrap_err();
    assert_eq!(status(&stale).0, 409);
    let refused = scrape(&t).await;
    assert_eq!(
        sample(&refused, r#"weir_hub_refused_reports_total{agent="a"}"#),
        1.0
    );
    assert_eq!(
        sample(
            &refused,
            r#"weir_hub_refused_report_items_total{agent="a"}"#
        ),
        0.0
    );

    // docs/observability.md lists exactly these families, with their types.
    let exported: Vec<(String, String)> = refused
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let (name, kind) = l.split_once(' ').expect("a type");
            let name = match kind {
                "counter" => format!("{name}_total"),
                _ => name.to_owned(),
            };
            (name, kind.to_owned())
        })
        .collect();
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/observability.md"),
    )
    .expect("the doc");
    let documented: Vec<(String, String)> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `weir_hub_"))
        .map(|l| {
            let mut cells = l.split('|');
            let name = cells.next().expect("a name").trim().trim_end_matches('`');
            let kind = cells.next().expect("a type").trim().to_owned();
            (format!("weir_hub_{name}"), kind)
        })
        .collect();
    assert_eq!(documented, exported);
}
