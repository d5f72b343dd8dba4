//! Source watermarks through the runtime: per-split generation at batch-independent points from
//! a CSV file, the deep build's checks of the watermark column, and idle splits that stop
//! holding the downstream watermark back.

use arrow::array::{Array, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use weir::api::{
    Boundedness, ConnectorSpec, Operator, OperatorArgs, OperatorFactory, Output, PreparedOperator,
    PreparedSource, Result, SourceCapability, SourceFactory, SourceSplit, SplitBatch, SplitCursor,
    SplitReader, TaskContext, Watermark,
};
use weir::{Engine, JobSpec};

/// A watermark as the recorder saw it: after how many rows, whether the test source's slow
/// split was stalled at that moment, and whether the slow split's second row (`ts` 600) had
/// come through before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    rows: u64,
    watermark: i64,
    stalled: bool,
    after_600: bool,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// Plugin `recorder`: passes rows through and logs every watermark it receives.
struct RecorderFactory {
    log: Log,
    stalled: Arc<AtomicBool>,
}

#[derive(Debug)]
struct PreparedRecorder {
    schema: SchemaRef,
    log: Log,
    stalled: Arc<AtomicBool>,
}

struct Recorder {
    rows: u64,
    after_600: bool,
    log: Log,
    stalled: Arc<AtomicBool>,
}

impl OperatorFactory for RecorderFactory {
    fn prepare(&self, spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>> {
        Ok(Arc::new(PreparedRecorder {
            schema: spec.input_schemas[0].clone(),
            log: self.log.clone(),
            stalled: self.stalled.clone(),
        }))
    }
}

impl PreparedOperator for PreparedRecorder {
    fn output_schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn describe(&self) -> String {
        "recorder".into()
    }

    fn create(&self, _ctx: &TaskContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(Recorder {
            rows: 0,
            after_600: false,
            log: self.log.clone(),
            stalled: self.stalled.clone(),
        }))
    }
}

impl Operator for Recorder {
    fn process_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        self.rows += batch.num_rows() as u64;
        if let Some(ts) = batch
            .column_by_name("ts")
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
        {
            self.after_600 |= ts.iter().any(|t| t == Some(600));
        }
        out.emit(batch);
        Ok(())
    }

    fn process_watermark(&mut self, watermark: Watermark, out: &mut Output) -> Result<()> {
        let seen = Seen {
            rows: self.rows,
            watermark: watermark.0.0,
            stalled: self.stalled.load(Ordering::SeqCst),
            after_600: self.after_600,
        };
        self.log
            .lock()
            .map_err(|_| weir::api::Error::Internal("poisoned".into()))?
            .push(seen);
        out.emit_watermark(watermark);
        Ok(())
    }
}

fn engine_with_recorder() -> (Engine, Log, Arc<AtomicBool>) {
    let log: Log = Arc::default();
    let stalled = Arc::new(AtomicBool::new(false));
    let mut engine = Engine::new();
    engine.register_operator(
        "recorder",
        Arc::new(RecorderFactory {
            log: log.clone(),
            stalled: stalled.clone(),
        }),
    );
    (engine, log, stalled)
}

fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(future)
}

fn csv_spec(input: &Path, batch_size: usize, watermark: &str) -> JobSpec {
    csv_spec_typed(input, batch_size, watermark, "int64")
}

fn csv_spec_typed(input: &Path, batch_size: usize, watermark: &str, ts_type: &str) -> JobSpec {
    let yaml = format!(
        r#"
job: watermarks
sources:
  - name: events
    connector: file
    schema:
      - {{ name: ts, type: "{ts_type}" }}
      - {{ name: v, type: int64, nullable: false }}
    watermark: {watermark}
    options: {{ path: "{input}", format: csv, batch_size: {batch_size} }}
operators:
  - {{ name: rec, type: recorder, input: events }}
sinks:
  - {{ name: out, connector: blackhole, input: rec }}
"#,
        input = input.display(),
    );
    JobSpec::from_yaml_str(&yaml, "watermarks.yaml").expect("spec parses")
}

/// Runs the CSV job and returns `(rows, watermark)` in the order the recorder saw them.
fn run_csv(input: &Path, batch_size: usize, watermark: &str) -> Vec<(u64, i64)> {
    run_spec(csv_spec(input, batch_size, watermark))
}

fn run_spec(spec: JobSpec) -> Vec<(u64, i64)> {
    let (engine, log, _) = engine_with_recorder();
    let summary = block_on(engine.run(&spec, None)).expect("job runs");
    let rows = summary.metrics.sink_rows();
    let seen: Vec<(u64, i64)> = log
        .lock()
        .expect("lock")
        .iter()
        .map(|s| (s.rows, s.watermark))
        .collect();
    assert_eq!(seen.last().map(|s| s.0), Some(rows), "END after every row");
    seen
}

#[test]
fn watermarks_follow_the_rows_that_moved_them_whatever_the_batch_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    // ts, with a null (empty field) and late rows that never move the watermark.
    let ts = [
        "1000", "1500", "", "1200", "2100", "2300", "100", "3000", "2500", "5000",
    ];
    let mut text = String::from("ts,v\n");
    for (i, t) in ts.iter().enumerate() {
        text.push_str(&format!("{t},{i}\n"));
    }
    std::fs::write(dir.path().join("events.csv"), text).expect("write input");
    let watermark = "{ column: ts, max_out_of_orderness: 500ms, interval: 1s }";
    // max 1000 -> 499 (the first is emitted at once); max 1500 -> 999, only 500 above 499;
    // max 2100 -> 1599, 1100 above 499; max 3000 -> 2499, 900 above 1599; max 5000 -> 4499.
    let expected = vec![(1, 499), (5, 1599), (10, 4499), (10, i64::MAX)];
    for batch_size in [1, 3, 4, 8192] {
        assert_eq!(
            run_csv(dir.path(), batch_size, watermark),
            expected,
            "batch_size {batch_size}"
        );
    }
    // Every advance, with no out-of-orderness: the late 1200 and 100 do not move it.
    let every = vec![
        (1, 999),
        (2, 1499),
        (5, 2099),
        (6, 2299),
        (8, 2999),
        (10, 4999),
        (10, i64::MAX),
    ];
    for batch_size in [1, 7, 8192] {
        assert_eq!(
            run_csv(dir.path(), batch_size, "{ column: ts, interval: 0 }"),
            every,
            "batch_size {batch_size}"
        );
    }
}

#[test]
fn timestamp_columns_are_normalized_to_milliseconds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "ts,v\n1970-01-01T00:00:01.000500Z,0\n,1\n1970-01-01T00:00:03Z,2\n";
    std::fs::write(dir.path().join("events.csv"), text).expect("write input");
    // 1000.5 ms floors to 1000; the null passes through without moving anything.
    let spec = csv_spec_typed(
        dir.path(),
        1,
        "{ column: ts, interval: 0 }",
        "timestamp(us, UTC)",
    );
    assert_eq!(run_spec(spec), vec![(1, 999), (3, 2999), (3, i64::MAX)]);
}

#[test]
fn a_later_split_starting_lower_never_takes_the_watermark_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("a.csv"), "ts,v\n1000,0\n5000,1\n").expect("write a");
    std::fs::write(dir.path().join("b.csv"), "ts,v\n2000,2\n6000,3\n7000,4\n").expect("write b");
    // Splits are read one after the other at parallelism 1; b's 1999 is below a's 4999.
    let expected = vec![(1, 999), (2, 4999), (4, 5999), (5, 6999), (5, i64::MAX)];
    for batch_size in [1, 2, 8192] {
        assert_eq!(
            run_csv(dir.path(), batch_size, "{ column: ts, interval: 1 }"),
            expected,
            "batch_size {batch_size}"
        );
    }
}

#[test]
fn the_watermark_column_must_exist_and_be_an_event_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("e.csv"), "ts,name\n1,x\n").expect("write input");
    let yaml = |column: &str| {
        format!(
            r#"
job: bad
sources:
  - name: events
    connector: file
    watermark: {{ column: {column} }}
    options: {{ path: "{}", format: csv }}
sinks:
  - {{ name: out, connector: blackhole, input: events }}
"#,
            dir.path().display()
        )
    };
    let engine = Engine::new();
    for (column, wanted) in [
        ("tss", "`tss` is not a column of `events`"),
        ("name", "`name` has type Utf8"),
    ] {
        let spec = JobSpec::from_yaml_str(&yaml(column), "bad.yaml").expect("spec parses");
        let err = block_on(engine.prepare(&spec, Some("bad.yaml"))).expect_err("refused");
        let text = err.to_string();
        assert!(
            text.starts_with("bad.yaml: ") && text.contains("sources[0].watermark.column"),
            "{text}"
        );
        assert!(text.contains(wanted), "{text}");
        assert!(text.contains("ts Int64, name Utf8"), "{text}");
    }
}

/// Test source `stalling` with two splits: `fast` delivers one row every 50 ms at event times
/// 1000, 2000, ...; `slow` delivers one row at 500, then stalls for 1.5 s with `stalled` set,
/// then delivers 600 and ends.
struct StallingFactory {
    stalled: Arc<AtomicBool>,
}

#[derive(Debug)]
struct StallingSource {
    schema: SchemaRef,
    stalled: Arc<AtomicBool>,
}

struct StallingReader {
    schema: SchemaRef,
    fast: bool,
    read: u64,
    stalled: Arc<AtomicBool>,
}

const FAST_ROWS: u64 = 40;
const STALL: Duration = Duration::from_millis(1_500);

#[async_trait::async_trait]
impl SourceFactory for StallingFactory {
    async fn prepare(&self, _spec: ConnectorSpec<'_>) -> Result<Arc<dyn PreparedSource>> {
        Ok(Arc::new(StallingSource {
            schema: Arc::new(Schema::new(vec![Field::new("ts", DataType::Int64, false)])),
            stalled: self.stalled.clone(),
        }))
    }
}

#[async_trait::async_trait]
impl PreparedSource for StallingSource {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn capabilities(&self) -> Vec<SourceCapability> {
        vec![SourceCapability::BestEffort]
    }

    fn boundedness(&self) -> Boundedness {
        Boundedness::Bounded
    }

    fn describe(&self) -> String {
        "stalling test source".into()
    }

    async fn enumerate_splits(&self) -> Result<Vec<SourceSplit>> {
        Ok(["fast", "slow"]
            .into_iter()
            .map(|id| SourceSplit {
                id: id.into(),
                cursor: SplitCursor::default(),
                size_bytes: None,
                range: None,
            })
            .collect())
    }

    async fn open_split(
        &self,
        split: &SourceSplit,
        _ctx: &TaskContext,
    ) -> Result<Box<dyn SplitReader>> {
        Ok(Box::new(StallingReader {
            schema: self.schema.clone(),
            fast: split.id == "fast",
            read: 0,
            stalled: self.stalled.clone(),
        }))
    }
}

impl StallingReader {
    fn row(&self, ts: i64) -> Result<Option<SplitBatch>> {
        let data = RecordBatch::try_new(
            self.schema.clone(),
            vec![Arc::new(Int64Array::from(vec![ts]))],
        )
        .map_err(|e| weir::api::Error::arrow("test row", e))?;
        Ok(Some(SplitBatch {
            data,
            dead_letters: None,
            cursor: SplitCursor {
                next_record: self.read,
            },
            backlog: None,
        }))
    }
}

#[async_trait::async_trait]
impl SplitReader for StallingReader {
    async fn next_batch(&mut self) -> Result<Option<SplitBatch>> {
        self.read += 1;
        if self.fast {
            if self.read > FAST_ROWS {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            return self.row(self.read as i64 * 1_000);
        }
        match self.read {
            1 => self.row(500),
            2 => {
                self.stalled.store(true, Ordering::SeqCst);
                tokio::time::sleep(STALL).await;
                self.stalled.store(false, Ordering::SeqCst);
                self.row(600)
            }
            _ => Ok(None),
        }
    }
}

/// Runs the stalling source at parallelism 2 into one recorder; returns what it saw and how
/// often a source subtask paused for watermark alignment.
fn run_stalling(watermark: &str) -> (Vec<Seen>, u64) {
    run_stalling_at(watermark, 2)
}

/// [`run_stalling`] with the source at `parallelism`.
fn run_stalling_at(watermark: &str, parallelism: u32) -> (Vec<Seen>, u64) {
    let (mut engine, log, stalled) = engine_with_recorder();
    engine
        .registry_mut()
        .register_source("stalling", Arc::new(StallingFactory { stalled }));
    let yaml = format!(
        r#"
job: idle
sources:
  - name: events
    connector: stalling
    parallelism: {parallelism}
    watermark: {watermark}
operators:
  - {{ name: rec, type: recorder, input: events, parallelism: 1 }}
sinks:
  - {{ name: out, connector: blackhole, input: rec }}
"#
    );
    let spec = JobSpec::from_yaml_str(&yaml, "idle.yaml").expect("spec parses");
    let summary = block_on(engine.run(&spec, None)).expect("job runs");
    assert_eq!(summary.metrics.sink_rows(), FAST_ROWS + 2);
    let seen = log.lock().expect("lock").clone();
    assert_eq!(seen.last().map(|s| s.watermark), Some(i64::MAX));
    assert!(
        seen.windows(2).all(|w| w[0].watermark < w[1].watermark),
        "the watermark only moves forward: {seen:?}"
    );
    let pauses = summary
        .metrics
        .operator("events")
        .map_or(0, |o| o.alignment_pauses);
    (seen, pauses)
}

/// At parallelism 1 one subtask reads the fast split (1 s to 40 s), then the slow one (0.5 s,
/// 0.6 s). Under `lateness: split` (the default) the slow split holds the subtask's watermark
/// back from the start, so no watermark runs ahead of its rows; under `merged` the watermark
/// follows the fast split and the slow split's rows come behind it.
#[test]
fn a_split_still_to_read_holds_the_watermark_back_when_lateness_is_per_split() {
    let (split, _) = run_stalling_at("{ column: ts, interval: 1 }", 1);
    let marks: Vec<i64> = split.iter().map(|s| s.watermark).collect();
    assert_eq!(marks, vec![499, 599, i64::MAX], "{split:?}");
    let (merged, _) = run_stalling_at("{ column: ts, interval: 1, lateness: merged }", 1);
    assert_eq!(merged.first().map(|s| s.watermark), Some(999), "{merged:?}");
    assert!(
        merged.iter().any(|s| s.watermark == 39_999),
        "the fast split moved it: {merged:?}"
    );
}

/// The slow split's watermark after its first row is 499. With an idle timeout, the downstream
/// watermark follows the fast split past it while the slow split is stalled; without, it waits.
/// Idleness is processing time, so only what must happen within wide margins is asserted: the
/// stall (1.5 s) is more than seven idle timeouts long.
#[test]
fn an_idle_split_stops_holding_the_downstream_watermark_back() {
    let (idle, _) = run_stalling("{ column: ts, interval: 1, idle_timeout: 200ms }");
    assert!(
        idle.iter()
            .any(|s| s.stalled && !s.after_600 && s.watermark > 500),
        "past the slow split's 500 while it was stalled: {idle:?}"
    );

    let (held, pauses) = run_stalling("{ column: ts, interval: 1 }");
    assert_eq!(pauses, 0, "no alignment without max_drift");
    // Deterministic: nothing above 499 can pass before the slow split moves on.
    assert!(
        held.iter()
            .filter(|s| s.watermark > 499)
            .all(|s| s.after_600 && !s.stalled),
        "held at the slow split's 499 until it moved on: {held:?}"
    );
    assert!(
        held.iter()
            .any(|s| s.watermark > 500 && s.watermark < i64::MAX),
        "it advances once the slow split moves on: {held:?}"
    );
}

/// Watermark alignment: the fast split's subtask may run at most `max_drift` (1 s) ahead of the
/// slow one's 499, so it pauses after its row at 2000 (watermark 1999) until the slow split
/// moves on and ends. Deterministic: the fast reader cannot pass its second row while the slow
/// split's watermark is 499 (or none yet), whatever the scheduling.
#[test]
fn a_source_subtask_ahead_by_more_than_the_drift_waits_for_the_others() {
    let (aligned, pauses) = run_stalling("{ column: ts, interval: 1, max_drift: 1s }");
    assert!(pauses >= 1, "the fast subtask paused: {pauses}");
    let first_past = aligned
        .iter()
        .find(|s| s.watermark > 499)
        .expect("the watermark passes 499");
    assert!(
        first_past.after_600 && first_past.rows <= 4,
        "at most the fast split's rows 1000 and 2000 came before the slow split moved on: \
         {aligned:?}"
    );
}
