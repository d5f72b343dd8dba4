//! The exposition of a small job that ran to its end: names, types, labels and values.

use crate::{JobHandle, encode};
use std::collections::BTreeMap;
use std::sync::Arc;
use weir::{Engine, JobSpec};

const JOB: &str = r#"
job: metrics-test
parallelism: 2
sources:
  - name: gen
    connector: datagen
    schema:
      - { name: id, type: int64, nullable: false }
    options: { rows: 1000, splits: 2, batch_size: 100 }
operators:
  - name: even
    type: filter
    input: gen
    options: { predicate: "id % 2 = 0" }
sinks:
  - name: out
    connector: blackhole
    input: even
"#;

/// Two tasks per subtask (a rebalance edge), event time with watermarks, and a sink slow enough
/// (10,000 rows a second per subtask for 5,000 rows) that the sources wait on full channels.
const TWO_TASKS: &str = r#"
job: metrics-test
parallelism: 2
sources:
  - name: gen
    connector: datagen
    schema:
      - { name: id, type: int64, nullable: false }
      - { name: ts, type: "timestamp(ms)", nullable: false }
    options: { rows: 20000, splits: 2, batch_size: 100, fields: { ts: { min: 1700000000000 } } }
    watermark: { column: ts, max_out_of_orderness: 1s }
operators:
  - name: even
    type: filter
    input: { from: gen, partition: rebalance }
    options: { predicate: "id % 2 = 0" }
sinks:
  - name: out
    connector: blackhole
    input: even
    options: { rows_per_second: 10000 }
"#;

/// Runs the job to its end and encodes its metrics.
async fn exposition() -> String {
    run(JOB).await
}

/// Runs `yaml` to its end and encodes its metrics.
async fn run(yaml: &str) -> String {
    let engine = Engine::new();
    let spec = JobSpec::from_yaml_str(yaml, "metrics-test.yaml").expect("spec parses");
    let prepared = engine.prepare(&spec, None).await.expect("job prepares");
    let running = engine.start(prepared).await.expect("job starts");
    let handle = JobHandle {
        job: "metrics-test".into(),
        metrics: running.metrics().clone(),
        checkpoints: running.checkpoint_probe(),
    };
    running.wait().await.expect("job runs");
    encode(&handle)
}

/// Every sample of the exposition: series (name and labels, as written) to value.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("a sample line has a value");
            (series.to_owned(), value.parse().expect("a numeric value"))
        })
        .collect()
}

fn value(samples: &BTreeMap<String, f64>, name: &str, operator: &str, subtask: u32) -> f64 {
    let series =
        format!(r#"{name}{{job="metrics-test",operator="{operator}",subtask="{subtask}"}}"#);
    *samples
        .get(&series)
        .unwrap_or_else(|| panic!("no sample {series} in {samples:#?}"))
}

fn both(samples: &BTreeMap<String, f64>, name: &str, operator: &str) -> f64 {
    value(samples, name, operator, 0) + value(samples, name, operator, 1)
}

#[tokio::test]
async fn metrics_of_a_finished_job_count_rows_batches_and_bytes_per_subtask() {
    let text = exposition().await;
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert!(
        text.contains("# TYPE weir_operator_rows_out counter"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE weir_source_split_backlog_records gauge"),
        "{text}"
    );
    let s = samples(&text);
    assert_eq!(both(&s, "weir_operator_rows_out_total", "gen"), 1000.0);
    assert_eq!(both(&s, "weir_operator_batches_out_total", "gen"), 10.0);
    assert_eq!(both(&s, "weir_operator_rows_in_total", "even"), 1000.0);
    assert_eq!(both(&s, "weir_operator_batches_in_total", "even"), 10.0);
    assert_eq!(both(&s, "weir_operator_rows_out_total", "even"), 500.0);
    assert_eq!(both(&s, "weir_operator_rows_in_total", "out"), 500.0);
    assert_eq!(both(&s, "weir_operator_rows_in_total", "gen"), 0.0);
    // Each subtask read one split of 500 rows.
    assert_eq!(value(&s, "weir_operator_rows_out_total", "gen", 0), 500.0);
    assert_eq!(value(&s, "weir_operator_rows_out_total", "gen", 1), 500.0);
    // 100 Int64 values are at least 800 bytes of Arrow memory per batch.
    let gen_bytes = both(&s, "weir_operator_bytes_out_total", "gen");
    assert!(gen_bytes >= 8000.0, "{gen_bytes}");
    assert_eq!(both(&s, "weir_operator_bytes_in_total", "even"), gen_bytes);
    assert!(both(&s, "weir_operator_bytes_out_total", "even") > 0.0);
    assert_eq!(
        s[r#"weir_operator_dropped_rows_total{job="metrics-test",operator="even"}"#],
        0.0
    );
    assert_eq!(
        s[r#"weir_source_dead_letters_total{job="metrics-test",operator="gen"}"#],
        0.0
    );
    assert!(
        !s.contains_key(r#"weir_source_dead_letters_total{job="metrics-test",operator="out"}"#),
        "dead letters are a source's"
    );
    assert_eq!(
        s[r#"weir_job_splits_assigned_total{job="metrics-test"}"#],
        2.0
    );
    assert_eq!(s[r#"weir_job_splits_done_total{job="metrics-test"}"#], 2.0);
    // No checkpoints: no checkpoint samples, but the families are described.
    assert!(
        text.contains("# TYPE weir_checkpoint_completed counter"),
        "{text}"
    );
    assert!(
        !s.keys().any(|k| k.starts_with("weir_checkpoint_")),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_of_tasks_with_input_channels_count_their_times_and_watermark() {
    let text = run(TWO_TASKS).await;
    let s = samples(&text);
    // The chained source task: an operator heading no task has no task samples.
    assert!(
        !s.keys()
            .any(|k| k.contains(r#"operator="out""#) && k.starts_with("weir_task_")),
        "{text}"
    );
    // A source task sent 10,000 rows per subtask into channels a slow sink drains: mostly
    // blocked, and it read and handed on rows (busy) and waited for its reads (idle).
    let gen_blocked = both(&s, "weir_task_backpressured_seconds_total", "gen");
    assert!(gen_blocked > 0.1, "{gen_blocked} s blocked\n{text}");
    let gen_busy = both(&s, "weir_task_busy_seconds_total", "gen");
    assert!(gen_busy > 0.0, "{gen_busy}\n{text}");
    assert!(both(&s, "weir_task_idle_seconds_total", "gen") >= 0.0);
    // The filter's task read its channels: it waited for input and handled it; its sink held
    // it to 10,000 rows a second for 5,000 rows (0.5 s) per subtask.
    let idle = both(&s, "weir_task_idle_seconds_total", "even");
    let busy = both(&s, "weir_task_busy_seconds_total", "even");
    assert!(idle > 0.0, "{idle}");
    assert!(busy > 0.5, "{busy}");
    assert_eq!(
        both(&s, "weir_task_backpressured_seconds_total", "even"),
        0.0
    );
    // Its last watermark before the end of input: within the generated event times (the end of
    // input's watermark is not shown).
    for subtask in 0..2 {
        let wm = value(
            &s,
            "weir_task_input_watermark_milliseconds",
            "even",
            subtask,
        );
        assert!(
            (1_700_000_000_000.0 - 1000.0..1_700_000_020_000.0).contains(&wm),
            "{wm}"
        );
        let lag = value(&s, "weir_task_watermark_lag_seconds", "even", subtask);
        assert!(
            lag > 86_400.0,
            "event times of 2023 lag by more than a day: {lag}"
        );
    }
}

/// Windows that route and update late rows of randomly ordered event times, with checkpoints
/// into `{dir}`.
const LATE_ROWS: &str = r#"
job: metrics-test
parallelism: 1
checkpoint: { interval: 50ms, dir: "{dir}" }
sources:
  - name: gen
    connector: datagen
    schema:
      - { name: k, type: int64, nullable: false }
      - { name: ts, type: "timestamp(ms)", nullable: false }
    options:
      rows: 20000
      batch_size: 100
      fields:
        k: { kind: random, min: 0, cardinality: 4 }
        ts: { kind: random, min: 1700000000000, max: 1700000100000 }
    watermark: { column: ts, max_out_of_orderness: 1ms }
operators:
  - name: routed
    type: window
    input: gen
    options:
      time_column: ts
      window: { type: tumble, size: 1s }
      key_by: [k]
      aggregates: [{ function: count, as: n }]
      late: { policy: route }
  - name: updated
    type: window
    input: gen
    options:
      time_column: ts
      window: { type: tumble, size: 1s }
      key_by: [k]
      aggregates: [{ function: count, as: n }]
      late: { policy: update, allowed_lateness: 200s }
sinks:
  - { name: out, connector: blackhole, input: routed }
  - { name: late_out, connector: blackhole, input: routed.late }
  - { name: updates, connector: blackhole, input: updated }
"#;

#[tokio::test]
async fn metrics_of_late_rows_state_and_checkpoints() {
    let dir = std::env::temp_dir().join(format!(
        "weir-metrics-late-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    let yaml = LATE_ROWS.replace("{dir}", &dir.display().to_string());
    let engine = Engine::new();
    let spec = JobSpec::from_yaml_str(&yaml, "metrics-test.yaml").expect("spec parses");
    let prepared = engine.prepare(&spec, None).await.expect("job prepares");
    let running = engine.start(prepared).await.expect("job starts");
    let probe = running.checkpoint_probe();
    let handle = JobHandle {
        job: "metrics-test".into(),
        metrics: running.metrics().clone(),
        checkpoints: probe.clone(),
    };
    running.wait().await.expect("job runs");
    let text = encode(&handle);
    let _ = std::fs::remove_dir_all(&dir);
    let s = samples(&text);
    // Event times in random order: most rows come after their window fired.
    let routed = value(&s, "weir_operator_late_rows_routed_total", "routed", 0);
    assert!(routed > 1000.0, "{routed}\n{text}");
    assert_eq!(
        value(&s, "weir_operator_late_rows_updated_total", "routed", 0),
        0.0
    );
    let updated = value(&s, "weir_operator_late_rows_updated_total", "updated", 0);
    assert!(updated > 1000.0, "{updated}\n{text}");
    assert_eq!(
        value(&s, "weir_operator_late_rows_routed_total", "updated", 0),
        0.0
    );
    // The job ended with its final epoch: every operator's snapshot was taken, nothing is
    // pending, and no attempt was fenced in a fresh checkpoint directory.
    let job = |name: &str| {
        *s.get(&format!(r#"{name}{{job="metrics-test"}}"#))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
    };
    let triggered = job("weir_checkpoint_triggered_total");
    assert!(triggered >= 1.0, "{text}");
    assert_eq!(
        triggered,
        job("weir_checkpoint_completed_total") + job("weir_checkpoint_aborted_total")
    );
    assert_eq!(job("weir_checkpoint_pending_epochs"), 0.0);
    assert_eq!(job("weir_checkpoint_pending_sink_transactions"), 0.0);
    for which in ["older", "this"] {
        let series = format!(
            r#"weir_checkpoint_fenced_attempts_total{{job="metrics-test",fenced="{which}"}}"#
        );
        assert_eq!(s.get(&series), Some(&0.0), "{text}");
    }
    for operator in ["gen", "routed", "updated", "out"] {
        assert!(value(&s, "weir_operator_state_entries", operator, 0) >= 0.0);
        assert!(value(&s, "weir_operator_state_bytes", operator, 0) >= 0.0);
    }
    assert!(value(&s, "weir_task_checkpoint_alignment_seconds", "gen", 0) >= 0.0);
    assert!(value(&s, "weir_task_checkpoint_state_bytes", "gen", 0) >= 0.0);
    let modes: Vec<_> = s
        .iter()
        .filter(|(k, _)| k.starts_with(r#"weir_job_semantic_mode_info{job="metrics-test",mode=""#))
        .collect();
    assert_eq!(modes.len(), 1, "{text}");
    assert_eq!(*modes[0].1, 1.0);
    // The history ends with the final epoch, one entry per task.
    let epochs = probe.recent_epochs();
    let last = epochs.last().expect("an epoch");
    assert_eq!(
        (last.kind.as_str(), last.status.as_str()),
        ("final", "completed")
    );
    assert_eq!(epochs.len() as f64, triggered.min(50.0));
    assert!(!last.tasks.is_empty());
    assert!(last.tasks.iter().all(|t| t.ack_ms <= last.duration_ms));
}

#[tokio::test]
async fn metrics_endpoint_serves_the_exposition() {
    let engine = Engine::new();
    let spec = JobSpec::from_yaml_str(JOB, "metrics-test.yaml").expect("spec parses");
    let prepared = engine.prepare(&spec, None).await.expect("job prepares");
    let running = engine.start(prepared).await.expect("job starts");
    let handle = JobHandle {
        job: "metrics-test".into(),
        metrics: running.metrics().clone(),
        checkpoints: running.checkpoint_probe(),
    };
    running.wait().await.expect("job runs");
    let server = crate::serve("127.0.0.1:0", Arc::new(handle))
        .await
        .expect("binds");
    let addr = server.local_addr();
    let response = tokio::task::spawn_blocking(move || http_get(addr, "/metrics"))
        .await
        .expect("request task");
    let (head, body) = response.split_once("\r\n\r\n").expect("a response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text"),
        "{head}"
    );
    assert!(body.contains("weir_operator_rows_out_total"), "{body}");
    drop(server);
}

/// A plain HTTP/1.1 GET that reads until the server closes the connection.
fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connects");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("writes");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("reads");
    text
}

/// Every family the exposition describes, as queried (counters with `_total`), with its type.
fn described(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let (name, kind) = l.split_once(' ').expect("a type line names a type");
            let name = match kind {
                "counter" => format!("{name}_total"),
                _ => name.to_owned(),
            };
            (name, kind.to_owned())
        })
        .collect()
}

#[tokio::test]
async fn metrics_docs_list_every_exported_family_and_the_dashboard_uses_only_those() {
    let text = exposition().await;
    let exported = described(&text);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/observability.md")).expect("the doc");
    // The doc's tables: "| `name` | type | ..." (the Hub's are tested with the Hub).
    let documented: BTreeMap<String, String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `weir_"))
        .filter(|l| !l.starts_with("hub_"))
        .map(|l| {
            let mut cells = l.split('|');
            let name = format!(
                "weir_{}",
                cells.next().expect("a name").trim().trim_end_matches('`')
            );
            (name, cells.next().expect("a type").trim().to_owned())
        })
        .collect();
    assert_eq!(documented, exported);
    let dashboard =
        std::fs::read_to_string(root.join("docs/grafana/weir-job.json")).expect("the dashboard");
    let mut used = 0;
    for (i, _) in dashboard.match_indices("weir_") {
        let name: String = dashboard[i..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        assert!(exported.contains_key(&name), "the dashboard uses {name}");
        used += 1;
    }
    assert!(used > 10, "{used}");
}
