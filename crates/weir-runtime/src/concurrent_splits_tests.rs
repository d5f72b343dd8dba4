//! Sources that read their splits concurrently, through whole jobs: every split delivers while
//! another never ends, the checkpoint cut records every split's cursor, an idle split does not
//! hold the watermark back, partition discovery hands a new split to exactly one subtask, each
//! split's backlog shows in the metrics, and a bounded source without splits ends its job.
//!
//! The test source `chan` reads each split from a channel the test feeds, so the test decides
//! what each split delivers and when; waits are for what the job did, with timeouts only as
//! deadlines.

use crate::{
    CheckpointLocation, PreparedJob, Registry, RestoreFrom, RunOptions, RunningJob, SplitShare,
};
use arrow::array::{Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use weir_api::{
    Boundedness, ConnectorSpec, Operator, OperatorArgs, OperatorFactory, Output, PreparedOperator,
    PreparedSink, PreparedSource, Result, SinkCapability, SinkFactory, SinkWriter,
    SourceCapability, SourceFactory, SourceSplit, SplitBatch, SplitCursor, SplitReader,
    TaskContext, Watermark,
};
use weir_plan::{CompiledPlans, JobSpec};

/// How long any single expectation may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(20);

/// What the test sends a split: rows with these event times (and the backlog the split
/// reports with them), or its end.
enum Feed {
    Rows(Vec<i64>, Option<u64>),
    End,
}

/// The splits of the `chan` source: the listing enumeration and discovery return, each split's
/// channel, and who opened which split at which cursor.
#[derive(Default)]
struct Splits {
    listed: Mutex<Vec<String>>,
    senders: Mutex<HashMap<String, mpsc::UnboundedSender<Feed>>>,
    receivers: Mutex<HashMap<String, mpsc::UnboundedReceiver<Feed>>>,
    /// (split, subtask, cursor) of every `open_split`.
    opened: Mutex<Vec<(String, u32, u64)>>,
}

impl Splits {
    fn with(ids: &[&str]) -> Arc<Self> {
        let splits = Arc::new(Splits::default());
        for id in ids {
            splits.add(id);
        }
        splits
    }

    /// Lists a new split (enumeration and discovery return it from now on).
    fn add(&self, id: &str) {
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&self.senders).insert(id.to_owned(), tx);
        lock(&self.receivers).insert(id.to_owned(), rx);
        lock(&self.listed).push(id.to_owned());
    }

    fn feed(&self, id: &str, feed: Feed) {
        let sent = lock(&self.senders)
            .get(id)
            .expect("a listed split")
            .send(feed);
        assert!(sent.is_ok(), "the reader of split {id} is gone");
    }

    fn opened(&self) -> Vec<(String, u32, u64)> {
        lock(&self.opened).clone()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("split", DataType::Utf8, false),
        Field::new("ts", DataType::Int64, false),
    ]))
}

/// Source `chan`: reads its splits concurrently, discovers them when `discovery` is set.
#[derive(Debug)]
struct ChanSource {
    splits: Arc<Splits>,
    discovery: Option<Duration>,
    /// Whether the source is bounded (its splits end; the job ends when they have).
    bounded: bool,
}

impl std::fmt::Debug for Splits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(lock(&self.listed).iter()).finish()
    }
}

struct ChanFactory(Arc<ChanSource>);

#[async_trait::async_trait]
impl SourceFactory for ChanFactory {
    async fn prepare(&self, _spec: ConnectorSpec<'_>) -> Result<Arc<dyn PreparedSource>> {
        Ok(self.0.clone())
    }
}

#[async_trait::async_trait]
impl PreparedSource for ChanSource {
    fn schema(&self) -> SchemaRef {
        schema()
    }

    fn capabilities(&self) -> Vec<SourceCapability> {
        vec![SourceCapability::Replayable]
    }

    fn boundedness(&self) -> Boundedness {
        if self.bounded {
            Boundedness::Bounded
        } else {
            Boundedness::Unbounded
        }
    }

    fn describe(&self) -> String {
        "chan test source".into()
    }

    async fn enumerate_splits(&self) -> Result<Vec<SourceSplit>> {
        Ok(lock(&self.splits.listed)
            .iter()
            .map(|id| SourceSplit {
                id: id.clone(),
                cursor: SplitCursor::default(),
                size_bytes: None,
                range: None,
            })
            .collect())
    }

    async fn open_split(
        &self,
        split: &SourceSplit,
        ctx: &TaskContext,
    ) -> Result<Box<dyn SplitReader>> {
        lock(&self.splits.opened).push((split.id.clone(), ctx.subtask.0, split.cursor.next_record));
        let feed = lock(&self.splits.receivers)
            .remove(&split.id)
            .ok_or_else(|| weir_api::Error::Internal(format!("split {} opened twice", split.id)))?;
        Ok(Box::new(ChanReader {
            id: split.id.clone(),
            feed,
            next: split.cursor.next_record,
        }))
    }

    fn reads_splits_concurrently(&self) -> bool {
        true
    }

    fn discovery_interval(&self) -> Option<Duration> {
        self.discovery
    }
}

struct ChanReader {
    id: String,
    feed: mpsc::UnboundedReceiver<Feed>,
    next: u64,
}

#[async_trait::async_trait]
impl SplitReader for ChanReader {
    async fn next_batch(&mut self) -> Result<Option<SplitBatch>> {
        let Some(Feed::Rows(times, backlog)) = self.feed.recv().await else {
            return Ok(None);
        };
        self.next += times.len() as u64;
        let data = RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(StringArray::from(vec![self.id.as_str(); times.len()])),
                Arc::new(Int64Array::from(times)),
            ],
        )
        .map_err(|e| weir_api::Error::arrow("test rows", e))?;
        Ok(Some(SplitBatch {
            data,
            dead_letters: None,
            cursor: SplitCursor {
                next_record: self.next,
            },
            backlog,
        }))
    }
}

/// What the recorder saw: every row as (split, event time), every watermark.
#[derive(Debug, Default, Clone)]
struct Seen {
    rows: Vec<(String, i64)>,
    watermarks: Vec<i64>,
}

impl Seen {
    fn rows_of(&self, split: &str) -> Vec<i64> {
        self.rows
            .iter()
            .filter(|(s, _)| s == split)
            .map(|(_, t)| *t)
            .collect()
    }
}

/// Operator `recorder`: passes rows through and publishes what it saw.
struct RecorderFactory(watch::Sender<Seen>);

#[derive(Debug)]
struct PreparedRecorder(watch::Sender<Seen>);

struct Recorder(watch::Sender<Seen>);

impl OperatorFactory for RecorderFactory {
    fn prepare(&self, _spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>> {
        Ok(Arc::new(PreparedRecorder(self.0.clone())))
    }
}

impl PreparedOperator for PreparedRecorder {
    fn output_schema(&self) -> SchemaRef {
        schema()
    }

    fn describe(&self) -> String {
        "recorder".into()
    }

    fn create(&self, _ctx: &TaskContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(Recorder(self.0.clone())))
    }
}

impl Operator for Recorder {
    fn process_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        let bad = || weir_api::Error::Internal("unexpected recorder input".into());
        let splits = batch
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(bad)?;
        let times = batch
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(bad)?;
        self.0.send_modify(|seen| {
            for i in 0..batch.num_rows() {
                seen.rows.push((splits.value(i).to_owned(), times.value(i)));
            }
        });
        out.emit(batch);
        Ok(())
    }

    fn process_watermark(&mut self, watermark: Watermark, out: &mut Output) -> Result<()> {
        self.0
            .send_modify(|seen| seen.watermarks.push(watermark.0.0));
        out.emit_watermark(watermark);
        Ok(())
    }
}

/// Sink `discard`.
struct DiscardFactory;

#[derive(Debug)]
struct Discard;

#[async_trait::async_trait]
impl SinkFactory for DiscardFactory {
    async fn prepare(
        &self,
        _spec: ConnectorSpec<'_>,
        _input_schema: SchemaRef,
    ) -> Result<Arc<dyn PreparedSink>> {
        Ok(Arc::new(Discard))
    }
}

#[async_trait::async_trait]
impl PreparedSink for Discard {
    fn capabilities(&self) -> Vec<SinkCapability> {
        vec![SinkCapability::AtLeastOnce]
    }

    fn describe(&self) -> String {
        "discard".into()
    }

    async fn create_writer(&self, _ctx: &TaskContext) -> Result<Box<dyn SinkWriter>> {
        Ok(Box::new(Discard))
    }
}

#[async_trait::async_trait]
impl SinkWriter for Discard {
    async fn write_batch(&mut self, _batch: RecordBatch) -> Result<()> {
        Ok(())
    }

    async fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// A running job of source `chan` (`parallelism` subtasks, with the `watermark` spec if any,
/// checkpointing into `checkpoints` if set) into the recorder; returns the job and what the
/// recorder sees.
async fn start(
    source: ChanSource,
    parallelism: u32,
    watermark: Option<&str>,
    checkpoints: Option<&Path>,
) -> (RunningJob, watch::Receiver<Seen>) {
    start_with(source, parallelism, watermark, checkpoints, None, None).await
}

/// [`start`], restoring from `restore`, as the lane that reads `share` of the splits if given.
async fn start_with(
    source: ChanSource,
    parallelism: u32,
    watermark: Option<&str>,
    checkpoints: Option<&Path>,
    restore: Option<RestoreFrom>,
    share: Option<SplitShare>,
) -> (RunningJob, watch::Receiver<Seen>) {
    let (seen_tx, seen) = watch::channel(Seen::default());
    let mut registry = Registry::with_builtin_operators();
    registry.register_source("chan", Arc::new(ChanFactory(Arc::new(source))));
    registry.register_operator("recorder", Arc::new(RecorderFactory(seen_tx)));
    registry.register_sink("discard", Arc::new(DiscardFactory));
    let checkpoint = if checkpoints.is_some() {
        "checkpoint: { interval: 3600000 }\n"
    } else {
        ""
    };
    let watermark = watermark
        .map(|w| format!("    watermark: {w}\n"))
        .unwrap_or_default();
    let yaml = format!(
        r#"
job: concurrent
{checkpoint}sources:
  - name: events
    connector: chan
    parallelism: {parallelism}
{watermark}operators:
  - {{ name: rec, type: recorder, input: events, parallelism: 1 }}
sinks:
  - {{ name: out, connector: discard, input: rec }}
"#
    );
    let spec = JobSpec::from_yaml_str(&yaml, "concurrent.yaml").expect("spec parses");
    let plans = CompiledPlans::compile(&spec, Some("concurrent.yaml")).expect("plans");
    let mut job = PreparedJob::prepare(plans, &registry, "concurrent.yaml")
        .await
        .expect("job prepares");
    if let Some(share) = share {
        job = job.with_split_share(share);
    }
    let options = RunOptions {
        state: None,
        state_dir: None,
        checkpoint_storage: checkpoints
            .map(|dir| CheckpointLocation::local(dir).expect("checkpoint storage")),
        restore,
        accept_duplicates: false,
        evolution: Default::default(),
    };
    let running = crate::start_with(job, options).await.expect("job starts");
    (running, seen)
}

/// Waits until what the recorder saw satisfies `done`.
async fn until(seen: &mut watch::Receiver<Seen>, what: &str, done: impl FnMut(&Seen) -> bool) {
    let waited = tokio::time::timeout(DEADLINE, seen.wait_for(done))
        .await
        .map(|r| r.is_ok());
    assert_eq!(
        waited,
        Ok(true),
        "waiting for {what}; the recorder saw {:?}",
        *seen.borrow()
    );
}

/// Each split's cursor after its latest read, as the job's metrics show it.
fn positions(job: &RunningJob) -> Vec<(String, u64)> {
    job.metrics()
        .snapshot()
        .operator("events")
        .map(|o| {
            o.positions
                .iter()
                .map(|p| (p.split.clone(), p.next_record))
                .collect()
        })
        .unwrap_or_default()
}

fn lag(job: &RunningJob) -> Vec<(String, u64)> {
    job.metrics()
        .snapshot()
        .operator("events")
        .map(|o| o.lag.iter().map(|l| (l.split.clone(), l.backlog)).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_split_delivers_while_another_never_ends_and_backlogs_show() {
    let splits = Splits::with(&["a", "b"]);
    let source = ChanSource {
        splits: splits.clone(),
        discovery: None,
        bounded: false,
    };
    let (job, mut seen) = start(source, 1, None, None).await;
    // `a` delivers nothing yet: reading one split after another would wait for it forever.
    splits.feed("b", Feed::Rows(vec![1, 2, 3], Some(7)));
    until(&mut seen, "b's rows", |s| s.rows_of("b") == [1, 2, 3]).await;
    splits.feed("a", Feed::Rows(vec![10], Some(0)));
    until(&mut seen, "a's row", |s| s.rows_of("a") == [10]).await;
    assert_eq!(lag(&job), [("a".into(), 0), ("b".into(), 7)]);
    splits.feed("b", Feed::Rows(vec![4], Some(6)));
    until(&mut seen, "b's next row", |s| s.rows_of("b").len() == 4).await;
    assert_eq!(lag(&job), [("a".into(), 0), ("b".into(), 6)]);
    assert_eq!(positions(&job), [("a".into(), 1), ("b".into(), 4)]);

    // A split that ends is finished; the subtask ends when every split ended.
    splits.feed("a", Feed::End);
    splits.feed("b", Feed::Rows(vec![5], None));
    splits.feed("b", Feed::End);
    let summary = tokio::time::timeout(DEADLINE, job.wait())
        .await
        .expect("the job ends when every split ended")
        .expect("the job succeeds");
    assert_eq!(summary.metrics.source_rows(), 6);
    assert_eq!(summary.metrics.splits_done, 2);
    let lag = &summary.metrics.operator("events").expect("source").lag;
    assert_eq!(lag.len(), 2, "one entry per split: {lag:?}");
    assert_eq!(seen.borrow().rows.len(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_cut_records_every_splits_cursor() {
    let dir = tempfile::tempdir().expect("temp dir");
    let splits = Splits::with(&["a", "b", "c"]);
    let source = ChanSource {
        splits: splits.clone(),
        discovery: None,
        bounded: false,
    };
    let (job, mut seen) = start(source, 1, None, Some(dir.path())).await;
    splits.feed("a", Feed::Rows(vec![1, 2], None));
    splits.feed("b", Feed::Rows(vec![3, 4, 5], None));
    until(&mut seen, "five rows", |s| s.rows.len() == 5).await;
    // `c` has delivered nothing and its read is pending: the barrier goes in meanwhile.
    let epoch = tokio::time::timeout(DEADLINE, job.checkpoint())
        .await
        .expect("the checkpoint completes in time")
        .expect("the checkpoint succeeds");

    let storage = CheckpointLocation::local(dir.path()).expect("storage");
    let store =
        weir_checkpoint::CheckpointStore::try_new(storage.store, storage.base, "concurrent")
            .expect("store");
    let manifest = store.read_manifest(epoch).await.expect("manifest");
    let mut cursors: Vec<(String, serde_json::Value)> = manifest
        .source_offsets
        .iter()
        .map(|o| (o.split.clone(), o.cursor["next_record"].clone()))
        .collect();
    cursors.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(
        cursors,
        [
            ("a".to_owned(), serde_json::json!(2)),
            ("b".to_owned(), serde_json::json!(3)),
            ("c".to_owned(), serde_json::json!(0)),
        ]
    );
    for id in ["a", "b", "c"] {
        splits.feed(id, Feed::End);
    }
    tokio::time::timeout(DEADLINE, job.wait())
        .await
        .expect("the job ends")
        .expect("the job succeeds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_split_does_not_hold_the_watermark_back() {
    let splits = Splits::with(&["a", "b"]);
    let source = ChanSource {
        splits: splits.clone(),
        discovery: None,
        bounded: false,
    };
    let watermark = "{ column: ts, interval: 1, idle_timeout: 20ms }";
    let (job, mut seen) = start(source, 1, Some(watermark), None).await;
    splits.feed("a", Feed::Rows(vec![1_000], None));
    splits.feed("b", Feed::Rows(vec![5_000], None));
    until(&mut seen, "both rows", |s| s.rows.len() == 2).await;
    // `a` stays silent; `b` keeps delivering, each row once the previous one came through. While
    // `a` is active the watermark stays below its 1000; once it is idle, `b` alone moves it.
    let mut next = 5_001;
    let passed = tokio::time::timeout(DEADLINE, async {
        loop {
            if seen.borrow().watermarks.iter().any(|&w| w >= 4_999) {
                return;
            }
            let rows = seen.borrow().rows.len();
            splits.feed("b", Feed::Rows(vec![next], None));
            seen.wait_for(|s| s.rows.len() > rows)
                .await
                .expect("the recorder is alive");
            next += 1;
        }
    })
    .await;
    assert!(
        passed.is_ok(),
        "the watermark passed the silent split: {:?}",
        seen.borrow().watermarks
    );
    assert_eq!(seen.borrow().rows_of("a"), [1_000], "nothing more from a");
    splits.feed("a", Feed::End);
    splits.feed("b", Feed::End);
    tokio::time::timeout(DEADLINE, job.wait())
        .await
        .expect("the job ends")
        .expect("the job succeeds");
    let watermarks = seen.borrow().watermarks.clone();
    assert!(
        watermarks.windows(2).all(|w| w[0] < w[1]),
        "the watermark only moves forward: {watermarks:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_that_appears_later_is_read_by_exactly_one_subtask() {
    let splits = Splits::with(&["s0", "s1"]);
    let source = ChanSource {
        splits: splits.clone(),
        discovery: Some(Duration::from_millis(5)),
        bounded: false,
    };
    let (job, mut seen) = start(source, 2, None, None).await;
    splits.feed("s0", Feed::Rows(vec![1], None));
    splits.feed("s1", Feed::Rows(vec![2], None));
    until(&mut seen, "the first rows", |s| s.rows.len() == 2).await;

    splits.add("late");
    // Fed before it is opened: the rows wait in the split's channel.
    splits.feed("late", Feed::Rows(vec![42, 43], Some(1)));
    until(&mut seen, "the discovered split's rows", |s| {
        s.rows_of("late") == [42, 43]
    })
    .await;
    splits.feed("s0", Feed::Rows(vec![3], None));
    until(&mut seen, "s0 after the discovery", |s| {
        s.rows_of("s0").len() == 2
    })
    .await;

    let owner = u32::try_from(twox_hash::XxHash64::oneshot(0, b"late") % 2).expect("small");
    let opened = splits.opened();
    let late: Vec<_> = opened.iter().filter(|(id, ..)| id == "late").collect();
    assert_eq!(late, [&("late".to_owned(), owner, 0)], "{opened:?}");
    assert_eq!(opened.len(), 3, "{opened:?}");
    assert_eq!(seen.borrow().rows_of("late"), [42, 43], "read once");
    assert!(lag(&job).contains(&("late".into(), 1)));
    assert_eq!(job.metrics().snapshot().splits_total, 3);
    job.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discovered_split_recorded_in_a_checkpoint_resumes_at_its_cursor() {
    let dir = tempfile::tempdir().expect("temp dir");
    let splits = Splits::with(&["s0"]);
    let source = ChanSource {
        splits: splits.clone(),
        discovery: Some(Duration::from_millis(5)),
        bounded: false,
    };
    let (job, mut seen) = start(source, 1, None, Some(dir.path())).await;
    splits.add("late");
    splits.feed("late", Feed::Rows(vec![1, 2, 3], None));
    until(&mut seen, "the discovered split's rows", |s| {
        s.rows_of("late") == [1, 2, 3]
    })
    .await;
    let epoch = tokio::time::timeout(DEADLINE, job.checkpoint())
        .await
        .expect("the checkpoint completes in time")
        .expect("the checkpoint succeeds");
    job.kill().await;

    // A new run restores the checkpoint: the source lists the split it had discovered.
    let splits = Splits::with(&["s0", "late"]);
    let source = ChanSource {
        splits: splits.clone(),
        discovery: Some(Duration::from_millis(5)),
        bounded: false,
    };
    let (job, mut seen) = start_with(
        source,
        1,
        None,
        Some(dir.path()),
        Some(RestoreFrom::Epoch(epoch)),
        None,
    )
    .await;
    splits.feed("late", Feed::Rows(vec![4], None));
    until(&mut seen, "the resumed split's row", |s| {
        s.rows_of("late") == [4]
    })
    .await;
    let opened = splits.opened();
    assert!(opened.contains(&("late".to_owned(), 0, 3)), "{opened:?}");
    job.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lanes_read_only_their_share_of_listed_and_discovered_splits() {
    let listed = ["a", "b", "c", "d", "e", "f"];
    let discovered = ["g", "h", "i", "j", "k", "l"];
    let splits = Splits::with(&listed);
    let mut lanes = Vec::new();
    for lane in 0..2 {
        let share = SplitShare::new(lane, 2).expect("share");
        let source = ChanSource {
            splits: splits.clone(),
            discovery: Some(Duration::from_millis(5)),
            bounded: false,
        };
        let (job, seen) = start_with(source, 1, None, None, None, Some(share)).await;
        lanes.push((share, job, seen));
    }
    for id in discovered {
        splits.add(id);
    }
    let all: Vec<&str> = listed.iter().chain(&discovered).copied().collect();
    for (value, id) in all.iter().enumerate() {
        splits.feed(id, Feed::Rows(vec![value as i64], None));
    }
    for (share, _, seen) in &mut lanes {
        let mine: Vec<&str> = all
            .iter()
            .copied()
            .filter(|id| share.contains(id))
            .collect();
        until(seen, "the lane's splits", |s| {
            mine.iter().all(|id| s.rows_of(id).len() == 1)
        })
        .await;
    }
    // Every split was opened once, by the lane whose share holds it, and read by it alone.
    let opened = splits.opened();
    assert_eq!(opened.len(), all.len(), "{opened:?}");
    for (value, id) in all.iter().enumerate() {
        let readers: Vec<u32> = lanes
            .iter()
            .filter(|(_, _, seen)| seen.borrow().rows_of(id) == [value as i64])
            .map(|(share, ..)| share.index())
            .collect();
        let owner: Vec<u32> = lanes
            .iter()
            .filter(|(share, ..)| share.contains(id))
            .map(|(share, ..)| share.index())
            .collect();
        assert_eq!(readers, owner, "split {id}");
    }
    for (_, job, _) in lanes {
        job.kill().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_source_without_splits_ends_the_job() {
    for checkpoints in [false, true] {
        let dir = tempfile::tempdir().expect("tmp");
        let source = ChanSource {
            splits: Splits::with(&[]),
            discovery: None,
            bounded: true,
        };
        let (job, seen) = start(source, 2, None, checkpoints.then_some(dir.path())).await;
        let ended = tokio::time::timeout(DEADLINE, job.wait()).await;
        ended
            .unwrap_or_else(|_| panic!("the job did not end (checkpoints: {checkpoints})"))
            .expect("the job succeeds");
        assert!(seen.borrow().rows.is_empty());
    }
}
