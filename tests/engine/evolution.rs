//! Changing a job and keeping its state: a savepoint of one version of a job restored into
//! another, under the rules of docs/fault-tolerance.md ("Changing a job"). A filter added
//! before a window keeps the window's state; an aggregate added to a window is refused until
//! its state is dropped; a renamed window keeps its state through a mapping; a new window
//! starts empty only when allowed.
//!
//! The input is the checkpoint tests' (one CSV file, no row late wherever a cut falls). Each
//! test takes a savepoint of the first version while it runs, kills it, and restores the
//! savepoint into the second version.

use crate::checkpoints::{
    self, ROWS, assert_same_rows, options, published_rows, start, walk, write_rows,
};
use std::path::Path;
use weir::plan::evolution::EvolutionActions;
use weir::{Engine, JobSpec, RestoreFrom, RunOptions};

/// The checkpoint tests' input, from another seed.
fn input_rows() -> Vec<String> {
    checkpoints::input_rows(11)
}

/// One version of the job: `filter` (a predicate) before the window, the window's `name` and
/// extra aggregates, and optionally a second window with a sink of its own.
#[derive(Clone, Copy, Default)]
struct Version<'a> {
    filter: Option<&'a str>,
    window: &'a str,
    extra_aggregate: bool,
    second_window: bool,
    /// The file sink's name; `None`: neither the window nor its sink (only the paced one).
    sink: Option<&'a str>,
}

fn spec(dir: &Path, v: Version<'_>) -> JobSpec {
    let (filter, window_input) = match v.filter {
        Some(predicate) => (
            format!(
                "  - {{ name: f, type: filter, input: events, options: {{ predicate: \"{predicate}\" }} }}\n"
            ),
            "f",
        ),
        None => (String::new(), "events"),
    };
    let extra = if v.extra_aggregate {
        "        - { function: max, column: v, as: top }\n"
    } else {
        ""
    };
    let (second, second_sink) = if v.second_window {
        (
            "  - name: w_b\n    type: window\n    input: { from: events, partition: { hash: [k] } }\n    \
             options:\n      time_column: ts\n      window: { type: tumble, size: 300 }\n      \
             key_by: [k]\n      aggregates:\n        - { function: min, column: v, as: low }\n"
                .to_owned(),
            format!(
                "  - {{ name: out_b, connector: file, input: w_b, options: {{ path: \"{}\", format: parquet }} }}\n",
                dir.join("out_b").display()
            ),
        )
    } else {
        (String::new(), String::new())
    };
    let (window, sink) = match v.sink {
        Some(sink) => (
            format!(
                "{filter}  - name: {w}\n    type: window\n    input: {{ from: {window_input}, \
                 partition: {{ hash: [k] }} }}\n    options:\n      time_column: ts\n      \
                 window: {{ type: tumble, size: 100 }}\n      key_by: [k]\n      aggregates:\n        \
                 - {{ function: count, as: n }}\n        - {{ function: sum, column: v, as: total }}\n\
                 {extra}{second}",
                w = v.window
            ),
            format!(
                "  - name: {sink}\n    connector: file\n    input: {w}\n    options: \
                 {{ path: \"{out}\", format: parquet }}\n",
                w = v.window,
                out = dir.join("out").display()
            ),
        ),
        None => (format!("{filter}{second}"), String::new()),
    };
    let operators = if window.is_empty() {
        String::new()
    } else {
        format!("operators:\n{window}")
    };
    let yaml = format!(
        r#"
job: evolving
parallelism: 2
state_shards: 16
checkpoint: {{ interval: 60000 }}
sources:
  - name: events
    connector: file
    schema:
      - {{ name: ts, type: int64, nullable: false }}
      - {{ name: k, type: string, nullable: false }}
      - {{ name: v, type: int64, nullable: false }}
    options: {{ path: "{input}", format: csv, batch_size: 16 }}
    watermark: {{ column: ts, max_out_of_orderness: 50, interval: 1 }}
{operators}sinks:
{sink}  - {{ name: pace, connector: blackhole, input: events, options: {{ rows_per_second: 20000 }} }}
{second_sink}"#,
        input = dir.join("in-0.csv").display(),
    );
    JobSpec::from_yaml_str(&yaml, "evolving.yaml").expect("spec parses")
}

fn restoring(cp: &Path, actions: EvolutionActions) -> RunOptions {
    RunOptions {
        evolution: actions,
        ..options(cp, Some(RestoreFrom::Savepoint("upgrade".into())))
    }
}

/// The error of restoring savepoint `upgrade` in `cp` into `job` without any action.
async fn refusal(engine: &Engine, job: &JobSpec, cp: &Path) -> weir::Error {
    start(engine, job, restoring(cp, EvolutionActions::default()))
        .await
        .expect_err("refused")
}

/// Restores into `job` as `options` say (it must start: `what` says why it may) and runs it to
/// its end.
async fn restore_run(engine: &Engine, job: &JobSpec, options: RunOptions, what: &str) {
    let summary = start(engine, job, options)
        .await
        .expect(what)
        .wait()
        .await
        .expect("restored run");
    let restored = summary.checkpoints.as_ref().and_then(|c| c.restored_from);
    assert!(restored.is_some(), "{what}: the run restored no checkpoint");
}

/// The actions that drop the state of `operators`.
fn dropping(operators: &[&str]) -> EvolutionActions {
    EvolutionActions {
        drop_state: operators
            .iter()
            .map(|o| weir::api::OperatorId::new(*o))
            .collect(),
        ..Default::default()
    }
}

/// Runs `first` over the input in `dir`, takes savepoint `upgrade` once a third of the input
/// is read (a paced blackhole sink holds the source back) and kills it; returns the savepoint's
/// read position in the input (records read).
async fn savepoint_of(engine: &Engine, dir: &Path, first: &JobSpec) -> u64 {
    let running = start(engine, first, options(&dir.join("cp"), None))
        .await
        .expect("start");
    let started = std::time::Instant::now();
    while running.metrics().snapshot().source_rows() < (ROWS / 3) as u64 {
        assert!(!running.is_finished(), "the job ended before the savepoint");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "a third of the input was not read within 60 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let epoch = running.savepoint("upgrade").await.expect("savepoint");
    running.kill().await;
    let manifest = walk(&dir.join("cp"))
        .into_iter()
        .find(|p| {
            p.ends_with(format!("{}/manifest.json", epoch.0))
                && p.to_string_lossy().contains("/checkpoint/")
        })
        .expect("the savepoint's manifest");
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest).expect("read manifest")).expect("json");
    let offsets = m["sourceOffsets"].as_array().expect("offsets");
    assert_eq!(offsets.len(), 1, "one split: {offsets:?}");
    offsets[0]["cursor"]["next_record"]
        .as_u64()
        .expect("next_record")
}

/// The rows the job of `version` publishes over `rows`, run once without a restore.
async fn reference(engine: &Engine, rows: &[String], version: Version<'_>) -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    write_rows(dir.path(), rows);
    let job = spec(dir.path(), version);
    start(engine, &job, options(&dir.path().join("cp"), None))
        .await
        .expect("start")
        .wait()
        .await
        .expect("reference run");
    published_rows(&dir.path().join("out"))
}

const V1: Version<'static> = Version {
    filter: None,
    window: "w",
    extra_aggregate: false,
    second_window: false,
    sink: Some("out"),
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_filter_added_before_a_window_keeps_the_window_state() {
    let engine = Engine::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let rows = input_rows();
    write_rows(dir.path(), &rows);
    let cut = savepoint_of(&engine, dir.path(), &spec(dir.path(), V1)).await;
    let filtered = Version {
        filter: Some("v < 500"),
        ..V1
    };
    restore_run(
        &engine,
        &spec(dir.path(), filtered),
        restoring(&dir.path().join("cp"), EvolutionActions::default()),
        "a filter before a window restores without any action",
    )
    .await;
    // The same as a job that read the rows before the cut unfiltered and the rest filtered:
    // the window's rows of before the savepoint were kept.
    let cut = usize::try_from(cut).expect("cut");
    assert!(
        cut > 0 && cut < ROWS,
        "the savepoint fell inside the input: {cut}"
    );
    let expected_input: Vec<String> = rows[..cut]
        .iter()
        .cloned()
        .chain(
            rows[cut..]
                .iter()
                .filter(|r| {
                    let v: u64 = r
                        .rsplit(',')
                        .next()
                        .and_then(|v| v.parse().ok())
                        .expect("v");
                    v < 500
                })
                .cloned(),
        )
        .collect();
    let want = reference(&engine, &expected_input, V1).await;
    assert_same_rows(
        &published_rows(&dir.path().join("out")),
        &want,
        "published output",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_aggregate_added_to_a_window_is_refused_until_its_state_is_dropped() {
    let engine = Engine::new();
    let dir = tempfile::tempdir().expect("tempdir");
    write_rows(dir.path(), &input_rows());
    savepoint_of(&engine, dir.path(), &spec(dir.path(), V1)).await;
    let wider = spec(
        dir.path(),
        Version {
            extra_aggregate: true,
            ..V1
        },
    );
    let cp = dir.path().join("cp");
    let err = refusal(&engine, &wider, &cp).await;
    let text = err.to_string();
    assert!(
        text.contains("does not fit this job: operator `w` (window)")
            && text.contains("what a state means may not change")
            && text.contains("--drop-state w"),
        "{text}"
    );
    let drop = dropping(&["w"]);
    restore_run(
        &engine,
        &wider,
        restoring(&cp, drop),
        "starts with the window's state dropped",
    )
    .await;
    // Windows that close after the restore carry the new aggregate: one more column.
    let published = published_rows(&dir.path().join("out"));
    let widths: std::collections::BTreeSet<usize> =
        published.iter().map(|r| r.split(" | ").count()).collect();
    assert_eq!(widths.len(), 2, "rows of both versions: {widths:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_renamed_window_keeps_its_state_through_a_mapping() {
    let engine = Engine::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let rows = input_rows();
    write_rows(dir.path(), &rows);
    savepoint_of(&engine, dir.path(), &spec(dir.path(), V1)).await;
    let renamed = spec(
        dir.path(),
        Version {
            window: "per_key",
            ..V1
        },
    );
    let cp = dir.path().join("cp");
    let err = refusal(&engine, &renamed, &cp).await;
    let text = err.to_string();
    assert!(
        text.contains("operator `per_key` (window): new and keeps state")
            && text.contains("operator `w` (window): removed")
            && text.contains("--map-operator w=NEW")
            && text.contains("(rule: a stateful operator removed needs its state dropped)"),
        "{text}"
    );
    let map = EvolutionActions {
        map_operator: [("w".into(), "per_key".into())].into(),
        ..Default::default()
    };
    restore_run(
        &engine,
        &renamed,
        restoring(&cp, map),
        "starts with the state mapped",
    )
    .await;
    let want = reference(&engine, &rows, V1).await;
    assert_same_rows(
        &published_rows(&dir.path().join("out")),
        &want,
        "published output",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_window_starts_empty_only_when_allowed() {
    let engine = Engine::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let rows = input_rows();
    write_rows(dir.path(), &rows);
    savepoint_of(&engine, dir.path(), &spec(dir.path(), V1)).await;
    let two = spec(
        dir.path(),
        Version {
            second_window: true,
            ..V1
        },
    );
    let cp = dir.path().join("cp");
    let err = refusal(&engine, &two, &cp).await;
    let text = err.to_string();
    assert!(
        text.contains("operator `w_b` (window): new and keeps state; --allow-new-state")
            && text.contains("(rule: a stateful operator added starts empty only when allowed)"),
        "{text}"
    );
    let allow = EvolutionActions {
        allow_new_state: true,
        ..Default::default()
    };
    restore_run(
        &engine,
        &two,
        restoring(&cp, allow),
        "starts with the new window empty",
    )
    .await;
    // The first window's output is whole; the new one saw only the rows after the cut.
    let want = reference(&engine, &rows, V1).await;
    assert_same_rows(
        &published_rows(&dir.path().join("out")),
        &want,
        "published output",
    );
    let second = published_rows(&dir.path().join("out_b"));
    assert!(!second.is_empty(), "the new window wrote rows");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_renamed_sink_finishes_its_transactions_and_a_removed_one_leaves_them() {
    let engine = Engine::new();
    let rows = input_rows();
    let want = reference(&engine, &rows, V1).await;
    // Renamed with a mapping: the same output, every row once.
    let dir = tempfile::tempdir().expect("tempdir");
    write_rows(dir.path(), &rows);
    savepoint_of(&engine, dir.path(), &spec(dir.path(), V1)).await;
    let renamed = spec(
        dir.path(),
        Version {
            sink: Some("results"),
            ..V1
        },
    );
    let map = EvolutionActions {
        map_operator: [("out".into(), "results".into())].into(),
        ..Default::default()
    };
    restore_run(
        &engine,
        &renamed,
        restoring(&dir.path().join("cp"), map),
        "starts with the sink mapped",
    )
    .await;
    assert_same_rows(
        &published_rows(&dir.path().join("out")),
        &want,
        "published output",
    );

    // Removed with the window: refused until both are dropped, then the job runs without them.
    let dir = tempfile::tempdir().expect("tempdir");
    write_rows(dir.path(), &rows);
    savepoint_of(&engine, dir.path(), &spec(dir.path(), V1)).await;
    let without = spec(dir.path(), Version { sink: None, ..V1 });
    let cp = dir.path().join("cp");
    let err = refusal(&engine, &without, &cp).await;
    assert!(
        err.to_string().contains("operator `out` (file): removed"),
        "{err}"
    );
    let drop = dropping(&["w", "out"]);
    restore_run(
        &engine,
        &without,
        restoring(&cp, drop),
        "starts without the window and its sink",
    )
    .await;
}
