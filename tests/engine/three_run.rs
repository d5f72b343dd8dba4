//! The three-run recovery harness (docs/fault-tolerance.md, "Crash testing"), applied to every
//! example and every SQL golden (`sql/*.slt`) whose job succeeds and has queried results:
//!
//! 1. run to the end at parallelism 1, without checkpoints: the reference output;
//! 2. run at parallelism 2 with a checkpoint every millisecond, its sources held mid-input
//!    (see [`Hold`]), killed (as a crash: no flush, no commit) once an epoch taken while they
//!    were held is durable. The run has a tokio runtime of its own, shut down after the kill:
//!    that waits for every file write a task had handed to a blocking thread, so nothing of
//!    run (2) is still running when run (3) starts;
//! 3. restore the latest checkpoint at parallelism 3 into the same output directories and run
//!    to the end.
//!
//! The part files published in each sink's directory after (2)+(3) must hold the same rows as
//! after (1), as multisets, and nothing may be left staged. A changelog sink's changes are
//! applied first (`support::table_rows`): which changes an updating job emits may depend on
//! timing between its tasks, the table they leave may not.
//!
//! All three runs read their sources with the same options. A source without a `batch_size`
//! reads one row per batch in every run, so that the hold after the first batch cuts tiny
//! inputs after their first row; a golden that sets its own batch size keeps it, because its
//! watermarks advance per batch and its hand-computed results depend on it. Runs (2) and (3)
//! also use one-message channels (backpressure); that changes no result.
//!
//! A pipeline whose restored checkpoint was not strictly inside its input (every split read to
//! its end before the hold) fails the test: its recovery was not tested. Run with `--nocapture`
//! to see where each kill landed.

use crate::slt::{at_dir, golden, golden_files};
use crate::support::{read_published_parts, table_rows};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use weir::api::DurationMs;
use weir::api::arrow::datatypes::SchemaRef;
use weir::api::{
    Boundedness, ConnectorSpec, PreparedSource, SourceCapability, SourceFactory, SourceSplit,
    SplitBatch, SplitReader, TaskContext,
};
use weir::plan::{CheckpointSpec, StateBackendSpec};
use weir::{CheckpointLocation, Engine, JobSpec, RestoreFrom, RunOptions};

/// Rows per batch of a source that does not set `batch_size`.
const SMALL_BATCH: u64 = 1;
/// Time between checkpoints in runs (2) and (3).
const CHECKPOINT_INTERVAL: DurationMs = DurationMs(1);
/// Channel capacity in runs (2) and (3): backpressure keeps sources from racing through tiny
/// inputs before the first barrier.
const CHANNEL_CAPACITY: u32 = 1;
/// How long run (2) may take to hold its sources and make an epoch taken then durable.
const DURABLE_DEADLINE: Duration = Duration::from_secs(30);
/// Batches with rows each split reader of run (2) emits before it holds.
const HOLD_AFTER: u64 = 1;
/// Worker threads of run (2)'s own runtime.
const KILLED_RUN_THREADS: usize = 2;

/// A job under test: where its spec comes from.
enum Pipeline {
    /// A spec file; relative source paths are relative to the repository root and relative
    /// sink paths are rewritten into the run's directory.
    Yaml(PathBuf),
    /// A SQL script, with the same path rules as `Yaml`.
    Sql(PathBuf),
    /// A golden: its `WRITE FILE` inputs written and its job script compiled, with the
    /// runner's `$__TEST_DIR__` replaced by the run's directory.
    Golden {
        sql: String,
        inputs: Vec<(String, String)>,
    },
}

impl Pipeline {
    /// The job's spec for a run whose files live in `dir`, before any change of parallelism,
    /// checkpoints or batch size.
    async fn spec(&self, name: &str, dir: &Path) -> JobSpec {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut spec = match self {
            Pipeline::Yaml(path) => {
                JobSpec::from_file(&root.join(path)).unwrap_or_else(|e| panic!("{name}: spec: {e}"))
            }
            Pipeline::Sql(path) => {
                let text = std::fs::read_to_string(root.join(path)).expect("read script");
                compile(&text, name).await
            }
            Pipeline::Golden { sql, inputs } => {
                for (file, content) in inputs {
                    std::fs::write(at_dir(file, dir), content).expect("write input");
                }
                compile(&at_dir(sql, dir), name).await
            }
        };
        for source in &mut spec.sources {
            relocate(&mut source.options, root);
        }
        for sink in &mut spec.sinks {
            relocate(&mut sink.options, dir);
        }
        spec
    }
}

async fn compile(sql: &str, name: &str) -> JobSpec {
    Engine::new()
        .compile_sql(sql, name)
        .await
        .unwrap_or_else(|e| panic!("{name}: compile: {e}"))
        .spec
}

/// Makes a relative `path` option absolute under `base`.
fn relocate(options: &mut serde_json::Value, base: &Path) {
    if let Some(path) = options.get("path").and_then(|p| p.as_str())
        && Path::new(path).is_relative()
        && !path.contains("://")
    {
        options["path"] = serde_json::json!(base.join(path).display().to_string());
    }
}

/// Sink name -> output directory, for every sink that writes files.
fn outputs(spec: &JobSpec) -> BTreeMap<String, PathBuf> {
    spec.sinks
        .iter()
        .enumerate()
        .filter_map(|(i, sink)| {
            let path = sink.options.get("path")?.as_str()?;
            let name = sink.name.clone().unwrap_or_else(|| format!("sink {i}"));
            Some((name, PathBuf::from(path)))
        })
        .collect()
}

/// The same job at `parallelism`, every source without a batch size reading `SMALL_BATCH`
/// rows per batch.
fn at_parallelism(mut spec: JobSpec, parallelism: u32) -> JobSpec {
    spec.parallelism = Some(parallelism);
    for source in &mut spec.sources {
        if let Some(options) = source.options.as_object_mut() {
            options
                .entry("batch_size")
                .or_insert(serde_json::json!(SMALL_BATCH));
        }
    }
    spec
}

fn checkpointed(mut spec: JobSpec) -> JobSpec {
    spec.channel_capacity = Some(CHANNEL_CAPACITY);
    spec.checkpoint = Some(CheckpointSpec {
        interval: CHECKPOINT_INTERVAL,
        dir: None,
        retain: None,
        timeout: None,
        min_pause: None,
        s3: None,
    });
    spec
}

/// Run (1)'s output and how much it read.
struct Reference {
    /// Sink name -> its rows.
    outputs: BTreeMap<String, Vec<String>>,
    /// Rows read by every source.
    rows_read: u64,
}

/// What one attempt of runs (2) and (3) showed.
struct Attempt {
    /// The newest durable epoch when run (2) was killed; `None` when it ended first.
    killed_at: Option<u64>,
    /// The epoch run (3) restored.
    restored_from: Option<u64>,
    /// Rows the sources read in run (3).
    read_after_restore: u64,
    /// Differences from run (1).
    failures: Vec<String>,
}

impl Attempt {
    /// The restored checkpoint cut the input strictly inside: run (3) resumed mid-way.
    fn mid_way(&self, reference: &Reference) -> bool {
        self.killed_at.is_some()
            && self.read_after_restore > 0
            && self.read_after_restore < reference.rows_read
    }
}

fn run_options(checkpoints: &Path, state: &Path, restore: Option<RestoreFrom>) -> RunOptions {
    RunOptions {
        state: None,
        state_dir: Some(state.to_path_buf()),
        checkpoint_storage: Some(CheckpointLocation::local(checkpoints).expect("checkpoint dir")),
        restore,
        accept_duplicates: false,
        evolution: Default::default(),
    }
}

/// Run (1): to the end at parallelism 1, no checkpoints.
async fn reference(engine: &Engine, name: &str, pipeline: &Pipeline) -> Reference {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = at_parallelism(pipeline.spec(name, dir.path()).await, 1);
    let summary = engine
        .run(&spec, Some(name))
        .await
        .unwrap_or_else(|e| panic!("{name}: run (1): {e:#}"));
    Reference {
        outputs: outputs(&spec)
            .into_iter()
            .map(|(sink, out)| (sink, table_rows(&read_published_parts(&out))))
            .collect(),
        rows_read: summary.metrics.source_rows(),
    }
}

/// Runs (2) and (3) in fresh directories: parallelism 2 with every split reader held after
/// `hold_after` batches, killed once an epoch taken while held is durable, then parallelism 3 restored from the latest checkpoint to the end; compares the
/// published output with `reference`.
async fn kill_and_restore(
    engine: &Engine,
    name: &str,
    pipeline: &Pipeline,
    reference: &Reference,
    hold_after: u64,
    state: Option<&StateBackendSpec>,
) -> Attempt {
    let file = Some(name);
    let dir = tempfile::tempdir().expect("tempdir");
    let checkpoints = dir.path().join("_checkpoints");
    let mut spec = checkpointed(pipeline.spec(name, dir.path()).await);
    spec.state = state.cloned();

    let state = tempfile::tempdir().expect("tempdir");
    let killed = {
        let (spec, name) = (at_parallelism(spec.clone(), 2), name.to_owned());
        let (checkpoints, state) = (checkpoints.clone(), state.path().to_path_buf());
        tokio::task::spawn_blocking(move || {
            run_killed(&spec, &name, &checkpoints, &state, hold_after)
        })
        .await
    };
    let killed_at = match killed {
        Ok(killed_at) => killed_at,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => panic!("{name}: run (2): {e}"),
    };

    let state = tempfile::tempdir().expect("tempdir");
    let prepared = engine
        .prepare(&at_parallelism(spec.clone(), 3), file)
        .await
        .unwrap_or_else(|e| panic!("{name}: prepare (3): {e:#}"));
    let restored = engine
        .start_with(
            prepared,
            run_options(&checkpoints, state.path(), Some(RestoreFrom::Latest)),
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: restore (3): {e:#}"))
        .wait()
        .await
        .unwrap_or_else(|e| panic!("{name}: run (3): {e:#}"));
    let restored_from = restored.checkpoints.as_ref().and_then(|c| c.restored_from);
    assert!(
        restored_from >= killed_at && restored_from.is_some(),
        "{name}: run (3) restored {restored_from:?}, but epoch {killed_at:?} was durable"
    );

    let mut failures = Vec::new();
    for (sink, out) in outputs(&spec) {
        let got = table_rows(&read_published_parts(&out));
        let want = reference.outputs.get(&sink).cloned().unwrap_or_default();
        if got != want {
            failures.push(format!(
                "{name}: sink `{sink}`: killed at parallelism 2 with epoch {killed_at:?} \
                 durable, restored from epoch {restored_from:?} at parallelism 3: the output \
                 differs from the run at parallelism 1\n  missing: {:?}\n  extra:   {:?}",
                difference(&want, &got),
                difference(&got, &want),
            ));
        }
        let staged = staged_files(&out.join("_staging"));
        if !staged.is_empty() {
            failures.push(format!(
                "{name}: sink `{sink}` left staged files after its end: {staged:?}"
            ));
        }
    }
    Attempt {
        killed_at,
        restored_from,
        read_after_restore: restored.metrics.source_rows(),
        failures,
    }
}

/// Run (2) on a runtime of its own: `spec` with checkpoints in `checkpoints`, every split
/// reader held after `hold_after` batches, killed once two more epochs have completed since the
/// first reader was held and one is durable; returns that durable epoch, or `None` when the job
/// ended first (nothing was held). The second of those epochs was triggered after the hold, so
/// the held readers' cut is at the hold. The runtime is shut down before this returns, which
/// waits for the blocking threads (file writes) of the killed tasks.
fn run_killed(
    spec: &JobSpec,
    name: &str,
    checkpoints: &Path,
    state: &Path,
    hold_after: u64,
) -> Option<u64> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(KILLED_RUN_THREADS)
        .enable_all()
        .build()
        .expect("runtime of run (2)");
    let killed_at = runtime.block_on(async {
        let hold = Arc::new(Hold {
            after: hold_after,
            held: AtomicU64::new(0),
        });
        let mut engine = Engine::new();
        hold.wrap_sources(&mut engine);
        let prepared = engine
            .prepare(spec, Some(name))
            .await
            .unwrap_or_else(|e| panic!("{name}: prepare (2): {e:#}"));
        let job = engine
            .start_with(prepared, run_options(checkpoints, state, None))
            .await
            .unwrap_or_else(|e| panic!("{name}: start (2): {e:#}"));
        let started = Instant::now();
        let mut completed_at_hold = None;
        loop {
            let summary = job.checkpoint_summary().unwrap_or_default();
            if completed_at_hold.is_none() && hold.held.load(Ordering::Acquire) > 0 {
                completed_at_hold = Some(summary.completed);
            }
            if let Some(at_hold) = completed_at_hold
                && summary.completed >= at_hold + 2
                && summary.last_durable_epoch.is_some()
            {
                job.kill().await;
                break summary.last_durable_epoch;
            }
            if job.is_finished() {
                job.wait()
                    .await
                    .unwrap_or_else(|e| panic!("{name}: run (2): {e:#}"));
                break None;
            }
            assert!(
                started.elapsed() < DURABLE_DEADLINE,
                "{name}: run (2) neither ended nor made an epoch taken while its sources were \
                 held durable in {DURABLE_DEADLINE:?}"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    drop(runtime);
    killed_at
}

/// Where run (2)'s sources stop: every split reader emits its first `after` batches with rows,
/// then its next read never completes, until the kill. A source task injects checkpoint
/// barriers while a read is pending, so every epoch triggered after the hold cuts that split
/// right after those batches: inside the input whenever the split has more.
#[derive(Debug)]
struct Hold {
    /// Batches with rows each reader emits before it holds.
    after: u64,
    /// Readers holding now.
    held: AtomicU64,
}

impl Hold {
    /// Replaces every source connector of `engine` with one whose readers hold.
    fn wrap_sources(self: &Arc<Self>, engine: &mut Engine) {
        for connector in ["file", "datagen"] {
            let inner = Arc::clone(
                engine
                    .registry_mut()
                    .source(connector)
                    .unwrap_or_else(|| panic!("no `{connector}` source")),
            );
            let factory = HoldingFactory {
                inner,
                hold: Arc::clone(self),
            };
            engine
                .registry_mut()
                .register_source(connector, Arc::new(factory));
        }
    }
}

/// A source factory whose sources' readers hold (see [`Hold`]).
struct HoldingFactory {
    inner: Arc<dyn SourceFactory>,
    hold: Arc<Hold>,
}

#[async_trait::async_trait]
impl SourceFactory for HoldingFactory {
    async fn prepare(&self, spec: ConnectorSpec<'_>) -> weir::api::Result<Arc<dyn PreparedSource>> {
        Ok(Arc::new(HoldingSource {
            inner: self.inner.prepare(spec).await?,
            hold: Arc::clone(&self.hold),
        }))
    }
}

/// A prepared source whose readers hold (see [`Hold`]); everything else is the inner source's.
#[derive(Debug)]
struct HoldingSource {
    inner: Arc<dyn PreparedSource>,
    hold: Arc<Hold>,
}

#[async_trait::async_trait]
impl PreparedSource for HoldingSource {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }

    fn capabilities(&self) -> Vec<SourceCapability> {
        self.inner.capabilities()
    }

    fn boundedness(&self) -> Boundedness {
        self.inner.boundedness()
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    async fn enumerate_splits(&self) -> weir::api::Result<Vec<SourceSplit>> {
        self.inner.enumerate_splits().await
    }

    async fn open_split(
        &self,
        split: &SourceSplit,
        ctx: &TaskContext,
    ) -> weir::api::Result<Box<dyn SplitReader>> {
        Ok(Box::new(HoldingReader {
            inner: self.inner.open_split(split, ctx).await?,
            hold: Arc::clone(&self.hold),
            emitted: 0,
        }))
    }
}

/// A split reader that holds after `hold.after` batches with rows.
struct HoldingReader {
    inner: Box<dyn SplitReader>,
    hold: Arc<Hold>,
    emitted: u64,
}

#[async_trait::async_trait]
impl SplitReader for HoldingReader {
    async fn next_batch(&mut self) -> weir::api::Result<Option<SplitBatch>> {
        if self.emitted >= self.hold.after {
            self.hold.held.fetch_add(1, Ordering::AcqRel);
            std::future::pending::<()>().await;
        }
        let batch = self.inner.next_batch().await?;
        if batch.as_ref().is_some_and(|b| b.data.num_rows() > 0) {
            self.emitted += 1;
        }
        Ok(batch)
    }
}

/// The rows of sorted `a` not matched by a row of sorted `b` (multiset difference).
fn difference(a: &[String], b: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut b = b.iter().peekable();
    for row in a {
        while b.next_if(|r| *r < row).is_some() {}
        if b.next_if(|r| *r == row).is_none() {
            out.push(row.clone());
        }
    }
    out
}

/// Every file under `dir`, recursively.
fn staged_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            out.extend(staged_files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Runs every pipeline through the three runs, prints where each kill landed, and fails with
/// every difference found and every pipeline the kill did not cut strictly inside its input.
async fn check_all(pipelines: Vec<(String, Pipeline)>) {
    check_all_on(pipelines, None).await;
}

/// [`check_all`] with runs (2) and (3) keeping their keyed state in the engine of `state`
/// (run (1), the reference, keeps it in redb).
async fn check_all_on(pipelines: Vec<(String, Pipeline)>, state: Option<StateBackendSpec>) {
    let engine = Engine::new();
    let mut failures = Vec::new();
    let mut missed = Vec::new();
    for (name, pipeline) in &pipelines {
        let started = Instant::now();
        let reference = reference(&engine, name, pipeline).await;
        let attempt = kill_and_restore(
            &engine,
            name,
            pipeline,
            &reference,
            HOLD_AFTER,
            state.as_ref(),
        )
        .await;
        let mid_way = attempt.mid_way(&reference);
        println!(
            "three-run {name}: {} rows read; held after {HOLD_AFTER} batches, killed with epoch \
             {:?} durable, restored {:?}, {} rows read after it{} ({:.1?})",
            reference.rows_read,
            attempt.killed_at,
            attempt.restored_from,
            attempt.read_after_restore,
            if mid_way { " (mid-way)" } else { "" },
            started.elapsed()
        );
        failures.extend(attempt.failures);
        if !mid_way {
            missed.push(name.as_str());
        }
    }
    if !missed.is_empty() {
        failures.push(format!(
            "the restored checkpoint was not strictly inside the input of {missed:?}: their \
             recovery was not tested"
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_run_examples() {
    check_all(vec![
        (
            "bids.yaml".into(),
            Pipeline::Yaml("examples/bids.yaml".into()),
        ),
        ("bids.sql".into(), Pipeline::Sql("examples/bids.sql".into())),
    ])
    .await;
}

/// A golden's one job script and inputs as a pipeline, named by its file.
fn golden_pipeline(path: &Path, golden: crate::slt::Golden) -> (String, Pipeline) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let [sql] = <[String; 1]>::try_from(golden.jobs)
        .unwrap_or_else(|jobs| panic!("{name}: {} job scripts, not one", jobs.len()));
    (
        name,
        Pipeline::Golden {
            sql,
            inputs: golden.inputs,
        },
    )
}

/// The full tier (docs/testing.md): every golden with results through the three-run crash
/// harness takes over a minute.
mod full {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn three_run_sql_goldens() {
        let mut pipelines: Vec<(String, Pipeline)> = Vec::new();
        for path in golden_files() {
            let golden = golden(&path);
            if golden.queries == 0 || golden.fails {
                continue;
            }
            pipelines.push(golden_pipeline(&path, golden));
        }
        assert!(!pipelines.is_empty(), "no golden with results");
        check_all(pipelines).await;
    }

    /// The goldens of every kind of stateful operator through the three runs with their
    /// keyed state in a real Redis server (runs (2) and (3); run (1) on redb is the reference).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn three_run_stateful_goldens_on_redis() {
        // Without a server the test fails with the kit's message: it was not run.
        let server = weir_testkit::redis::RedisServer::start().unwrap_or_else(|e| panic!("{e}"));
        let stateful = [
            "dedup_last.slt",
            "group_by_retracting.slt",
            "interval_join.slt",
            "late_update.slt",
            "over.slt",
            "regular_join.slt",
            "session.slt",
            "temporal_join.slt",
            "top_n.slt",
            "tumble.slt",
            "window_top_n.slt",
        ];
        let mut pipelines: Vec<(String, Pipeline)> = Vec::new();
        for path in golden_files() {
            if stateful.iter().any(|name| path.ends_with(name)) {
                pipelines.push(golden_pipeline(&path, golden(&path)));
            }
        }
        assert_eq!(
            pipelines.len(),
            stateful.len(),
            "a stateful golden is missing"
        );
        check_all_on(pipelines, Some(StateBackendSpec::redis(server.url()))).await;
        // The runs kept their state there (a job's state stays in Redis after it ends).
        let keys = server.command(&["DBSIZE"]).expect("DBSIZE");
        let keys: u64 = keys.trim().trim_start_matches(':').parse().unwrap_or(0);
        assert!(keys > 20, "{keys} keys in Redis");
    }
}

/// A file with late rows (6%, up to a minute behind), cut into 64 KiB splits, through a tumbling
/// window that routes its late rows: killed at parallelism 2 and restored at 3, its output and
/// late rows equal the uninterrupted run's at parallelism 1 (the file is one stream, so which
/// rows are late does not depend on the parallelism or the restore).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_run_late_rows_over_a_split_file() {
    let bids = crate::determinism::bids();
    check_all(vec![(
        "late-rows-over-64-KiB-splits".into(),
        Pipeline::Golden {
            sql: crate::determinism::tumble_job(
                "$__TEST_DIR__",
                "$__TEST_DIR__",
                "csv",
                Some("65536"),
            ),
            inputs: vec![(
                "$__TEST_DIR__/bids.csv".into(),
                crate::determinism::csv_text(&bids),
            )],
        },
    )])
    .await;
}
