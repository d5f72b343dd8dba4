//! Epoch checkpoints through whole jobs: exactly-once output through epoch commits, kills and
//! restores (also at another parallelism), savepoints, automatic restart after a task failure,
//! fencing of a superseded attempt, refused incompatible restores and semantic modes.
//!
//! Every job reads generated CSV (event times increasing with jitter inside the watermark's
//! out-of-orderness, so no row is late wherever a cut falls) into a tumbling window and writes
//! Parquet. The reference is the same job run once without checkpoints.

use crate::support::{Rng, format_rows, read_published_parts};
use arrow::array::RecordBatch;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use weir::api::{
    Operator, OperatorArgs, OperatorFactory, Output, PreparedOperator, Result as ApiResult,
    TaskContext,
};
use weir::{CheckpointLocation, Engine, JobSpec, RestoreFrom, RunOptions};

pub(crate) const ROWS: usize = 6_000;

/// Writes the input: one CSV file of `ts,k,v`, 50 keys, ts in ms. One file: a subtask reads
/// its splits one after another, so with several files the rows that are late would depend on
/// the parallelism.
fn write_input(dir: &Path) {
    write_rows(dir, &input_rows(7));
}

/// `ROWS` rows of `ts,k,v` from `seed`: 50 keys, ts in ms increasing with jitter under the
/// watermark's 50 ms (no row is late), v below 1000.
pub(crate) fn input_rows(seed: u64) -> Vec<String> {
    let mut rng = Rng(seed);
    (0..ROWS)
        .map(|i| {
            let ts = (i as u64) * 5 + rng.below(40);
            let k = rng.below(50);
            let v = rng.below(1000);
            format!("{ts},k{k},{v}")
        })
        .collect()
}

/// Writes `rows` under a `ts,k,v` header as `dir/in-0.csv`.
pub(crate) fn write_rows(dir: &Path, rows: &[String]) {
    let text = format!("ts,k,v\n{}\n", rows.join("\n"));
    std::fs::write(dir.join("in-0.csv"), text).expect("write input");
}

/// The job: tumbling 100 ms windows per key, count and sum, to Parquet in `dir/out`.
/// `checkpoint` adds a checkpoint section with that interval in ms; `extra_operator` puts a
/// plugin operator of that type between the window and the sink.
pub(crate) fn spec(
    dir: &Path,
    parallelism: u32,
    checkpoint: Option<u64>,
    window_ms: u64,
    extra_operator: Option<&str>,
) -> JobSpec {
    let checkpoint = checkpoint
        .map(|ms| format!("checkpoint: {{ interval: {ms} }}\n"))
        .unwrap_or_default();
    let (extra, sink_input) = match extra_operator {
        Some(t) => (
            format!("  - name: extra\n    type: {t}\n    input: w\n"),
            "extra",
        ),
        None => (String::new(), "w"),
    };
    let yaml = format!(
        r#"
job: checkpointed
parallelism: {parallelism}
state_shards: 16
{checkpoint}sources:
  - name: events
    connector: file
    schema:
      - {{ name: ts, type: int64, nullable: false }}
      - {{ name: k, type: string, nullable: false }}
      - {{ name: v, type: int64, nullable: false }}
    options: {{ path: "{input}", format: csv, batch_size: 16 }}
    watermark: {{ column: ts, max_out_of_orderness: 50, interval: 1 }}
operators:
  - name: w
    type: window
    input: {{ from: events, partition: {{ hash: [k] }} }}
    options:
      time_column: ts
      window: {{ type: tumble, size: {window_ms} }}
      key_by: [k]
      aggregates:
        - {{ function: count, as: n }}
        - {{ function: sum, column: v, as: total }}
{extra}sinks:
  - name: out
    connector: file
    input: {sink_input}
    options: {{ path: "{out}", format: parquet }}
"#,
        input = dir.join("in-*.csv").display(),
        out = dir.join("out").display(),
    );
    JobSpec::from_yaml_str(&yaml, "checkpointed.yaml").expect("spec parses")
}

pub(crate) fn options(checkpoints: &Path, restore: Option<RestoreFrom>) -> RunOptions {
    RunOptions {
        state: None,
        state_dir: None,
        checkpoint_storage: Some(CheckpointLocation::local(checkpoints).expect("checkpoint dir")),
        restore,
        accept_duplicates: false,
        evolution: Default::default(),
    }
}

/// The published rows of `dir` (part files directly in it, never `_staging`), one string per
/// row, sorted.
pub(crate) fn published_rows(dir: &Path) -> Vec<String> {
    format_rows(&read_published_parts(dir))
}

/// The end of a kill-and-restore test: at least one run was killed part way, the last run
/// restored a checkpoint, and `out` holds exactly the rows `want`.
pub(crate) fn assert_killed_restored_and_published(
    killed: usize,
    summary: weir::RunSummary,
    out: &Path,
    want: &[String],
) {
    assert!(killed >= 1, "at least one run was killed part way");
    assert!(
        summary
            .checkpoints
            .expect("counters")
            .restored_from
            .is_some(),
        "the last run restored a checkpoint"
    );
    assert_same_rows(&published_rows(out), want, "published output");
}

/// Fails with the rows missing from and repeated in `got`, not both lists.
pub(crate) fn assert_same_rows(got: &[String], want: &[String], what: &str) {
    if got == want {
        return;
    }
    let mut missing = want.to_vec();
    let mut extra = Vec::new();
    for row in got {
        match missing.iter().position(|r| r == row) {
            Some(i) => {
                missing.swap_remove(i);
            }
            None => extra.push(row.clone()),
        }
    }
    missing.sort();
    extra.sort();
    panic!(
        "{what}: {} rows, want {}; {} missing (first: {:?}), {} extra (first: {:?})",
        got.len(),
        want.len(),
        missing.len(),
        missing.iter().take(5).collect::<Vec<_>>(),
        extra.len(),
        extra.iter().take(5).collect::<Vec<_>>()
    );
}

/// The output of the job run once, without checkpoints.
async fn reference(window_ms: u64) -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    write_input(dir.path());
    Engine::new()
        .run(
            &spec(dir.path(), 1, None, window_ms, None),
            Some("reference.yaml"),
        )
        .await
        .expect("reference run");
    let rows = published_rows(&dir.path().join("out"));
    assert!(rows.len() > 100, "the reference has output: {}", rows.len());
    rows
}

/// Prepares and starts `job`.
pub(crate) async fn start(
    engine: &Engine,
    job: &JobSpec,
    options: RunOptions,
) -> weir::Result<weir::RunningJob> {
    let prepared = engine.prepare(job, Some("job.yaml")).await?;
    engine.start_with(prepared, options).await
}

/// Starts `job`, expecting it to start, and waits for its end.
async fn run_to_end(
    engine: &Engine,
    job: &JobSpec,
    options: RunOptions,
) -> weir::Result<weir::RunSummary> {
    start(engine, job, options)
        .await
        .expect("start")
        .wait()
        .await
}

/// How long [`run_and_kill`] waits for its epochs (or the job's end) before failing.
const KILL_DEADLINE: Duration = Duration::from_secs(60);

/// Starts `job` and kills it once `epochs` epochs are durable (or lets it end first); returns
/// whether it was killed. Fails when neither happens within `KILL_DEADLINE`.
pub(crate) async fn run_and_kill(
    engine: &Engine,
    job: JobSpec,
    options: RunOptions,
    epochs: u64,
) -> bool {
    let running = start(engine, &job, options).await.expect("start");
    kill_after_epochs(running, epochs).await
}

/// Kills `running` once `epochs` epochs are durable (or lets it end first); returns whether it
/// was killed. Fails when neither happens within `KILL_DEADLINE`.
pub(crate) async fn kill_after_epochs(running: weir::RunningJob, epochs: u64) -> bool {
    let started = std::time::Instant::now();
    loop {
        let durable = running
            .checkpoint_summary()
            .and_then(|s| s.last_durable_epoch)
            .unwrap_or(0);
        if durable >= epochs {
            running.kill().await;
            return true;
        }
        if running.is_finished() {
            running.wait().await.expect("the job ended by itself");
            return false;
        }
        assert!(
            started.elapsed() < KILL_DEADLINE,
            "the job neither made {epochs} epochs durable nor ended within {KILL_DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn checkpointed_run_commits_exactly_the_output_through_epochs() {
    let want = reference(100).await;
    let dir = tempfile::tempdir().expect("tempdir");
    write_input(dir.path());
    let engine = Engine::new();
    let job = spec(dir.path(), 2, Some(5), 100, None);
    let summary = run_to_end(&engine, &job, options(&dir.path().join("cp"), None))
        .await
        .expect("run");
    assert_same_rows(
        &published_rows(&dir.path().join("out")),
        &want,
        "published output",
    );
    let checkpoints = summary.checkpoints.expect("checkpoint counters");
    assert!(checkpoints.completed >= 2, "{checkpoints:?}");
    assert_eq!(
        summary.semantic_mode,
        weir::api::SemanticMode::StrictExactlyOnce
    );
    // Everything staged was published: nothing is left in the staging directories.
    let staged: Vec<_> = walk(&dir.path().join("out/_staging"));
    assert!(staged.is_empty(), "left in staging: {staged:?}");
    // The epoch log holds DURABLE and COMMITTED for the last epoch.
    let storage = CheckpointLocation::local(&dir.path().join("cp")).expect("storage");
    let store =
        weir::checkpoint::CheckpointStore::try_new(storage.store, storage.base, "checkpointed")
            .expect("store");
    let log = store.epoch_log().read().await.expect("epoch log");
    let last = weir::api::Epoch(checkpoints.last_durable_epoch.expect("an epoch"));
    assert_eq!(
        log.state_of(last),
        Some(weir::checkpoint::EpochState::Committed),
        "{:?}",
        log.records().get(&last)
    );
    let recorded: Vec<_> = log.records()[&last].iter().map(|r| r.state).collect();
    assert!(
        recorded.contains(&weir::checkpoint::EpochState::Durable),
        "{recorded:?}"
    );
}

pub(crate) fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries {
        let path = e.expect("entry").path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_runs_restored_at_other_parallelisms_lose_and_repeat_nothing() {
    let want = reference(100).await;
    let dir = tempfile::tempdir().expect("tempdir");
    write_input(dir.path());
    let engine = Engine::new();
    let cp = dir.path().join("cp");
    // Killed at parallelism 2 after two durable epochs, killed again at 3, finished at 1.
    let mut killed = 0;
    for (parallelism, restore) in [(2, None), (3, Some(RestoreFrom::Latest))] {
        let job = spec(dir.path(), parallelism, Some(5), 100, None);
        if run_and_kill(&engine, job, options(&cp, restore), 2).await {
            killed += 1;
        }
    }
    let job = spec(dir.path(), 1, Some(5), 100, None);
    let summary = run_to_end(&engine, &job, options(&cp, Some(RestoreFrom::Latest)))
        .await
        .expect("restored run");
    assert_killed_restored_and_published(killed, summary, &dir.path().join("out"), &want);
}

/// `job` with its input file read in byte ranges of 4 KiB (the input is about 75 KiB).
fn in_byte_ranges(mut job: JobSpec) -> JobSpec {
    job.sources[0].options["split_size"] = serde_json::json!(4096);
    job
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_file_read_in_byte_ranges_killed_and_restored_at_other_parallelisms_loses_and_repeats_nothing()
 {
    let want = reference(100).await;
    let dir = tempfile::tempdir().expect("tempdir");
    write_input(dir.path());
    let engine = Engine::new();
    let cp = dir.path().join("cp");
    // The same kills as above; the ranges are split across subtasks, and the ones being read at
    // a checkpoint resume at their cursors under another parallelism.
    let mut killed = 0;
    for (parallelism, restore) in [(2, None), (3, Some(RestoreFrom::Latest))] {
        let job = in_byte_ranges(spec(dir.path(), parallelism, Some(5), 100, None));
        if run_and_kill(&engine, job, options(&cp, restore), 2).await {
            killed += 1;
        }
    }
    let job = in_byte_ranges(spec(dir.path(), 1, Some(5), 100, None));
    let summary = run_to_end(&engine, &job, options(&cp, Some(RestoreFrom::Latest)))
        .await
        .expect("restored run");
    assert_killed_restored_and_published(killed, summary, &dir.path().join("out"), &want);
    // Without kills or checkpoints, at parallelism 2: the same rows.
    let dir = tempfile::tempdir().expect("tempdir");
    write_input(dir.path());
    let job = in_byte_ranges(spec(dir.path(), 2, None, 100, None));
    let summary = run_to_end(&engine, &job, RunOptions::default())
        .await
        .expect("run");
    assert_same_rows(
        &published_rows(&dir.path().join("out")),
        &want,
        "published output at parallelism 2",
    );
    assert_eq!(summary.metrics.source_rows(), ROWS as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_savepoint_is_restored_by_name() {
    let want = reference(100).await;
    let dir = tempfile::tempdir().expect("tempdir");
    write_input(dir.path());
    let engine = Engine::new();
    let cp = dir.path().join("cp");
    // A long interval: only the savepoint is taken before the kill.
    let job = spec(dir.path(), 2, Some(60_000), 100, None);
    let running = start(&engine, &job, options(&cp, None))
        .await
        .expect("start");
    let err = running
        .savepoint("42")
        .await
        .expect_err("a number is an epoch");
    assert!(err.to_string().contains("cannot name a savepoint"), "{err}");
    let epoch = running
        .savepoint("before-upgrade")
        .await
        .expect("savepoint");
    running.kill().await;
    let job = spec(dir.path(), 2, Some(60_000), 100, None);
    let summary = run_to_end(
        &engine,
        &job,
        options(&cp, Some(RestoreFrom::Savepoint("before-upgrade".into()))),
    )
    .await
    .expect("restored run");
    assert_eq!(
        summary.checkpoints.expect("counters").restored_from,
        Some(epoch.0)
    );
    assert_same_rows(
        &published_rows(&dir.path().join("out")),
        &want,
        "published output",
    );

    // An unknown savepoint is refused, naming it.
    let err = start(
        &engine,
        &job,
        options(&cp, Some(RestoreFrom::Savepoint("nope".into()))),
    )
    .await
    .expect_err("no such savepoint");
    assert!(
        err.to_string().contains("no savepoint named `nope`"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_incompatible_restore_is_refused_with_what_differs() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_input(dir.path());
    let engine = Engine::new();
    let cp = dir.path().join("cp");
    let job = spec(dir.path(), 2, Some(5), 100, None);
    run_to_end(&engine, &job, options(&cp, None))
        .await
        .expect("first run");
    // Another window size is another job logic.
    let changed = spec(dir.path(), 2, Some(5), 200, None);
    let err = start(&engine, &changed, options(&cp, Some(RestoreFrom::Latest)))
        .await
        .expect_err("refused");
    let text = err.to_string();
    assert!(
        text.contains("operator `w` (window): its options or input columns changed"),
        "{text}"
    );
    // Another number of state shards would route keys to other shards.
    let mut reshard = spec(dir.path(), 2, Some(5), 100, None);
    reshard.state_shards = Some(8);
    let err = start(&engine, &reshard, options(&cp, Some(RestoreFrom::Latest)))
        .await
        .expect_err("refused");
    let text = err.to_string();
    assert!(
        text.contains("keyed by (k) with 16 shards, now by (k) with 8"),
        "{text}"
    );
    // Restoring a job that takes no checkpoints is refused before anything starts.
    let plain = spec(dir.path(), 2, None, 100, None);
    let err = start(&engine, &plain, options(&cp, Some(RestoreFrom::Latest)))
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("takes no checkpoints"), "{err}");
}

/// Plugin: passes batches through; fails once, at its `FAIL_AT`-th batch, while `ARMED`.
struct FailOnce;
static ARMED: AtomicBool = AtomicBool::new(true);
static BATCHES: AtomicU64 = AtomicU64::new(0);
const FAIL_AT: u64 = 40;

/// A test plugin's prepared form: its input schema, and how it opens an instance.
struct PreparedPlugin {
    schema: arrow::datatypes::SchemaRef,
    name: &'static str,
    open: fn() -> ApiResult<Box<dyn Operator>>,
}

impl std::fmt::Debug for PreparedPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl PreparedOperator for PreparedPlugin {
    fn output_schema(&self) -> arrow::datatypes::SchemaRef {
        self.schema.clone()
    }
    fn describe(&self) -> String {
        self.name.into()
    }
    fn create(&self, _ctx: &TaskContext) -> ApiResult<Box<dyn Operator>> {
        (self.open)()
    }
}

struct FailOnceOp;

impl OperatorFactory for FailOnce {
    fn prepare(&self, spec: &OperatorArgs<'_>) -> ApiResult<Arc<dyn PreparedOperator>> {
        Ok(Arc::new(PreparedPlugin {
            schema: spec.input_schemas[0].clone(),
            name: "fail_once",
            open: || Ok(Box::new(FailOnceOp)),
        }))
    }
}

impl Operator for FailOnceOp {
    fn process_batch(
        &mut self,
        _input: usize,
        batch: RecordBatch,
        out: &mut Output,
    ) -> ApiResult<()> {
        if BATCHES.fetch_add(1, Ordering::SeqCst) + 1 == FAIL_AT
            && ARMED.swap(false, Ordering::SeqCst)
        {
            return Err(weir::api::Error::Internal("injected failure".into()));
        }
        out.emit(batch);
        Ok(())
    }
}

/// The checkpointed job with plugin `name` between its window and its sink, restarted up to
/// `attempts` times 10 ms apart: its restarts, after checking its published output against a
/// run that never failed.
async fn restarts_with_exact_output(
    name: &str,
    factory: Arc<dyn OperatorFactory>,
    attempts: u32,
) -> u32 {
    let want = reference(100).await;
    let dir = tempfile::tempdir().expect("tempdir");
    write_input(dir.path());
    let mut engine = Engine::new();
    engine.register_operator(name, factory);
    let mut job = spec(dir.path(), 2, Some(5), 100, Some(name));
    job.restart = Some(weir::plan::RestartSpec {
        attempts,
        delay: Some(weir::api::DurationMs(10)),
        max_delay: Some(weir::api::DurationMs(40)),
    });
    let summary = run_to_end(&engine, &job, options(&dir.path().join("cp"), None))
        .await
        .expect("the restarted run succeeds");
    assert_same_rows(
        &published_rows(&dir.path().join("out")),
        &want,
        "published output",
    );
    summary.checkpoints.expect("counters").restarts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_task_restarts_from_the_latest_checkpoint() {
    let restarts = restarts_with_exact_output("fail_once", Arc::new(FailOnce), 2).await;
    assert!(!ARMED.load(Ordering::SeqCst), "the failure was injected");
    assert_eq!(restarts, 1);
}

/// Plugin: passes batches through; its first `OPEN_FAILURES` instances fail to open with an
/// error that says retrying may succeed (as a broker that is not reachable yet does).
struct FailToOpen;
static OPEN_FAILURES_LEFT: AtomicU64 = AtomicU64::new(OPEN_FAILURES);
const OPEN_FAILURES: u64 = 2;

struct PassOp;

impl OperatorFactory for FailToOpen {
    fn prepare(&self, spec: &OperatorArgs<'_>) -> ApiResult<Arc<dyn PreparedOperator>> {
        Ok(Arc::new(PreparedPlugin {
            schema: spec.input_schemas[0].clone(),
            name: "fail_to_open",
            open: open_unless_failing,
        }))
    }
}

/// A [`PassOp`], or the retryable failure while `OPEN_FAILURES_LEFT` is above 0.
fn open_unless_failing() -> ApiResult<Box<dyn Operator>> {
    let failed = OPEN_FAILURES_LEFT
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    if failed {
        return Err(weir::api::Error::external(
            "test operator",
            "opening",
            "the service is not reachable yet",
            true,
        ));
    }
    Ok(Box::new(PassOp))
}

impl Operator for PassOp {
    fn process_batch(
        &mut self,
        _input: usize,
        batch: RecordBatch,
        out: &mut Output,
    ) -> ApiResult<()> {
        out.emit(batch);
        Ok(())
    }
}

/// A start that fails for a passing reason (the first attempt, then its first restart, cannot
/// open a task) is retried like a failed attempt, within the restart policy, and the output is
/// exact; an Exactly-once Kafka sink whose broker is away while a restart opens it is the case
/// this is for.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_start_that_fails_for_a_passing_reason_is_retried() {
    let restarts = restarts_with_exact_output("fail_to_open", Arc::new(FailToOpen), 3).await;
    assert_eq!(OPEN_FAILURES_LEFT.load(Ordering::SeqCst), 0);
    assert_eq!(restarts, OPEN_FAILURES as u32);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_superseded_attempt_is_fenced_and_publishes_nothing_more() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_input(dir.path());
    let engine = Engine::new();
    let cp = dir.path().join("cp");
    let job = spec(dir.path(), 2, Some(5), 100, None);
    let running = start(&engine, &job, options(&cp, None))
        .await
        .expect("start");
    // Another process takes over the job's checkpoints: a newer attempt.
    let storage = CheckpointLocation::local(&cp).expect("storage");
    let store =
        weir::checkpoint::CheckpointStore::try_new(storage.store, storage.base, "checkpointed")
            .expect("store");
    let newer = store.acquire_attempt().await.expect("newer attempt");
    let err = running
        .wait()
        .await
        .expect_err("the stale attempt is fenced");
    let text = err.to_string();
    assert!(text.contains("superseded"), "{text}");
    assert!(text.contains(&format!("attempt {newer}")), "{text}");
    // Nothing of an epoch after the takeover was published: every published file belongs to
    // an epoch whose manifest exists.
    let epochs = store.list_epochs().await.expect("epochs");
    for file in walk(&dir.path().join("out")) {
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        if let Some(rest) = name.strip_prefix("part-") {
            let epoch: u64 = rest[7..17].parse().expect("epoch in name");
            assert!(
                epochs.iter().any(|e| e.0 == epoch),
                "{name} was published without a durable manifest"
            );
        }
    }
}

#[tokio::test]
async fn a_declared_mode_the_job_cannot_give_is_refused_naming_the_connector() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_input(dir.path());
    let engine = Engine::new();
    let mut strict = spec(dir.path(), 1, None, 100, None);
    strict.semantic_mode = Some(weir::api::SemanticMode::StrictExactlyOnce);
    let err = engine
        .prepare(&strict, Some("job.yaml"))
        .await
        .expect_err("no checkpoints");
    assert!(err.to_string().contains("needs epoch checkpoints"), "{err}");

    let yaml = format!(
        r#"
job: strict_blackhole
semantic_mode: STRICT_EXACTLY_ONCE
checkpoint: {{ interval: 1s }}
sources:
  - name: events
    connector: file
    schema: [{{ name: ts, type: int64 }}]
    options: {{ path: "{}", format: csv }}
sinks: [{{ name: nowhere, connector: blackhole, input: events }}]
"#,
        dir.path().join("in-*.csv").display()
    );
    let job = JobSpec::from_yaml_str(&yaml, "strict.yaml").expect("spec");
    let err = engine
        .prepare(&job, Some("strict.yaml"))
        .await
        .expect_err("blackhole is only idempotent");
    let text = err.to_string();
    assert!(
        text.contains("sinks[0]") && text.contains("nowhere"),
        "{text}"
    );

    // Without a declared mode the strongest one is in force: at-least-once without checkpoints.
    let plain = spec(dir.path(), 1, None, 100, None);
    let prepared = engine
        .prepare(&plain, Some("job.yaml"))
        .await
        .expect("prepare");
    assert_eq!(prepared.semantic_mode, weir::api::SemanticMode::AtLeastOnce);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_minimum_pause_spaces_periodic_epochs() {
    let want = reference(100).await;
    let dir = tempfile::tempdir().expect("tempdir");
    write_input(dir.path());
    let engine = Engine::new();
    // A trigger every millisecond, but a minute's pause after each epoch: besides the final
    // epoch, at most the first periodic one runs (without the pause there are dozens).
    let mut job = spec(dir.path(), 2, Some(1), 100, None);
    if let Some(c) = job.checkpoint.as_mut() {
        c.min_pause = Some(weir::api::DurationMs(60_000));
    }
    let summary = run_to_end(&engine, &job, options(&dir.path().join("cp"), None))
        .await
        .expect("run");
    let checkpoints = summary.checkpoints.expect("counters");
    assert!((1..=2).contains(&checkpoints.completed), "{checkpoints:?}");
    assert_same_rows(
        &published_rows(&dir.path().join("out")),
        &want,
        "published output",
    );
}
