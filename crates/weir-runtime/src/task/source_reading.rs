//! How a source subtask reads its splits: one after another (files), or all at once, each
//! split's pending read raced against the others' (partitions of a log), with partition
//! discovery. Either way each split keeps its own watermark, cursor and backlog, and barriers
//! are injected at safe points: after a batch was handed on, or while waiting for input.

use super::read_ahead::ReadAhead;
use super::{ChainTask, Item};
use crate::checkpoint::Trigger;
use crate::checkpoint::recovery::SplitResume;
use crate::error::{Error, Result};
use crate::event_time::{SourceAlignment, SourceStep, SourceWatermarks};
use crate::metrics::{SplitCounters, SubtaskMetrics};
use crate::split_assignment::{discovered_split_owner, discovery_interval};
use crate::split_share::SplitShare;
use futures::stream::{FuturesUnordered, StreamExt};
use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use weir_api::{
    Boundedness, OperatorId, PreparedSource, SourceSplit, SplitBatch, SplitReader, StreamMessage,
    TaskContext, Watermark,
};
use weir_plan::ModelWatermark;

/// What a source subtask is built with.
pub(crate) struct SourceHead {
    pub(crate) source: Arc<dyn PreparedSource>,
    pub(crate) ctx: TaskContext,
    /// Assigned splits, each from its cursor, with its event-time progress when restored.
    pub(crate) splits: Vec<(SourceSplit, SplitResume)>,
    pub(crate) metrics: SubtaskMetrics,
    /// Writers of the source's `dead_letter` output.
    pub(crate) dead_letter_writers: Vec<usize>,
    /// Per-split event-time watermarks, when the source node declares them.
    pub(crate) watermark: Option<ModelWatermark>,
    /// Watermark alignment with the source's other subtasks, when the spec bounds the drift.
    pub(crate) alignment: Option<Arc<SourceAlignment>>,
    /// The id of every split the attempt knew at its start (every subtask's, and the ones
    /// finished before a restore): partition discovery takes only splits not among them.
    pub(crate) known_splits: Arc<HashSet<String>>,
    /// The lane's share of the splits, when the run is one lane of a distributed job:
    /// discovered splits outside it belong to other lanes.
    pub(crate) share: Option<SplitShare>,
    /// The splits are consecutive parts of one stream ([`PreparedSource::splits_are_one_stream`]
    /// with event time): one watermark over all of them, in order.
    pub(crate) one_stream: bool,
    /// How many splits are decoded side by side (the current one and those ahead of it): the
    /// parallelism for one stream; 1 otherwise (the task reads each split itself).
    pub(crate) decoders: usize,
    /// Whether an operator downstream reads the watermark
    /// ([`crate::PreparedJob::watermark_is_read`]); when none does, batches are not cut at it.
    pub(crate) watermark_read: bool,
}

/// A pending read of one split: the future owns the reader and hands it back with the result,
/// so a read is never dropped half-way and readers need not be cancel safe.
type PendingRead = Pin<
    Box<
        dyn Future<
                Output = (
                    usize,
                    Box<dyn SplitReader>,
                    weir_api::Result<Option<SplitBatch>>,
                ),
            > + Send,
    >,
>;

/// Starts the next read of split `index` of the progress; its polls count as busy time.
fn pending_read(
    index: usize,
    mut reader: Box<dyn SplitReader>,
    metrics: SubtaskMetrics,
) -> PendingRead {
    Box::pin(async move {
        let read = Polled {
            inner: reader.next_batch(),
            metrics: &metrics,
        }
        .await;
        (index, reader, read)
    })
}

/// A connector's read whose polls count as the source task's busy time: the time the connector
/// works on the task's thread (fetching, decoding), not the time its read waits for data.
struct Polled<'m, F> {
    inner: F,
    metrics: &'m SubtaskMetrics,
}

impl<F: Future + Unpin> Future for Polled<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<F::Output> {
        let this = self.get_mut();
        let started = Instant::now();
        let polled = Pin::new(&mut this.inner).poll(cx);
        this.metrics.add_busy(started.elapsed());
        polled
    }
}

impl ChainTask {
    /// Runs a source subtask: reads its splits, then drives the end-of-input watermark and
    /// takes part in the epochs still to come.
    pub(super) async fn run_source(&mut self, head: SourceHead) -> Result<()> {
        let SourceHead {
            source,
            ctx,
            splits,
            metrics,
            dead_letter_writers,
            watermark,
            alignment,
            known_splits,
            share,
            one_stream,
            decoders,
            watermark_read,
        } = head;
        let reading = SourceReading {
            source: &source,
            ctx: &ctx,
            metrics: &metrics,
            dead_letter_writers: &dead_letter_writers,
            alignment: alignment.as_deref(),
            known_splits: &known_splits,
            share,
            decoders,
        };
        let mut progress = SourceProgress::new(&ctx, &splits, &metrics);
        let mut generators = watermark.as_ref().map(|spec| {
            let mut w = SourceWatermarks::new(spec, one_stream);
            if !watermark_read {
                w = w.unread();
            }
            w.restore(&splits);
            w
        });
        if let Some(m) = generators.as_ref().and_then(SourceWatermarks::current) {
            reading.published(m); // restored progress
        }
        if source.reads_splits_concurrently() {
            self.read_concurrently(&reading, &mut progress, generators.as_mut())
                .await?;
        } else {
            self.read_source(&reading, &mut progress, generators.as_mut())
                .await?;
        }
        for &w in &dead_letter_writers {
            self.send_control(w, StreamMessage::Watermark(Watermark::END))
                .await?;
        }
        self.drive(0, Item::Watermark(Watermark::END)).await?;
        self.commit_state().await?;
        self.await_final_epoch(Some((&progress, generators.as_ref())), &[])
            .await
    }

    /// Reads every assigned split in turn and drives its rows down the chain. With watermarks,
    /// each batch is sliced at its split's watermark cut points and the source watermark (the
    /// minimum over open splits) is driven after the rows that moved it. With checkpoints, a
    /// pending epoch's barrier is injected at each safe point: after a batch was handed on, or
    /// while the reader waits for input.
    async fn read_source(
        &mut self,
        reading: &SourceReading<'_>,
        progress: &mut SourceProgress,
        mut watermarks: Option<&mut SourceWatermarks>,
    ) -> Result<()> {
        let clock = tokio::time::Instant::now();
        let now_ms = || u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX);
        // Lateness per split: every split the subtask will read holds its watermark back from
        // the start, so that the watermark never runs ahead of a split not read yet (whose
        // rows are late only against their own split's watermark).
        if let Some(w) = watermarks.as_deref_mut()
            && w.per_split_lateness()
        {
            for p in &progress.splits {
                w.open_split(&p.split.id, now_ms());
            }
        }
        let order: Vec<SourceSplit> = progress.splits.iter().map(|p| p.split.clone()).collect();
        let mut ahead = ReadAhead::new(reading.decoders);
        for (index, split) in order.iter().enumerate() {
            let mut reader = ahead
                .reader(reading.source, reading.ctx, &order, index)
                .await
                .map_err(|e| reading.fail(e))?;
            if let Some(w) = watermarks.as_deref_mut() {
                w.open_split(&split.id, now_ms());
            }
            loop {
                self.await_alignment(reading, progress, watermarks.as_deref())
                    .await?;
                let Some(read) = self
                    .next_read(
                        reading,
                        &mut reader,
                        watermarks.as_deref_mut(),
                        &now_ms,
                        progress,
                    )
                    .await
                    .map_err(|e| e.into_error(reading))?
                else {
                    break;
                };
                self.hand_on(
                    reading,
                    progress,
                    index,
                    read,
                    watermarks.as_deref_mut(),
                    now_ms(),
                )
                .await?;
                self.inject_if_triggered(progress, watermarks.as_deref())
                    .await?;
            }
            self.end_split(reading, progress, index, watermarks.as_deref_mut())
                .await?;
            // After the last split the end-of-input watermark goes first (the caller then
            // injects pending barriers): a cut in which every split is finished always follows
            // it, so downstream windows have fired before such a barrier.
            if index + 1 < progress.splits.len() {
                self.inject_if_triggered(progress, watermarks.as_deref())
                    .await?;
            }
        }
        reading.release();
        Ok(())
    }

    /// Reads every assigned split at the same time: each open split has one pending read, and
    /// whichever completes first is handed on (then that split's next read starts). The reads
    /// are raced against checkpoint triggers (the barrier is injected at once: nothing of a
    /// pending read was emitted, so the cut is exact), against the idle timeout (a tick one
    /// timeout after the last, whether data came or not: silent splits become idle, which may
    /// advance the source watermark, and when every open split is idle the downstream is told
    /// so) and against the discovery timer.
    ///
    /// A split whose read returns `None` is finished. The subtask ends when every split it reads
    /// ended, unless it discovers splits of an unbounded source: then it waits for new ones,
    /// idle towards its downstream while it reads none.
    async fn read_concurrently(
        &mut self,
        reading: &SourceReading<'_>,
        progress: &mut SourceProgress,
        mut watermarks: Option<&mut SourceWatermarks>,
    ) -> Result<()> {
        let clock = tokio::time::Instant::now();
        let now_ms = || u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut reads: FuturesUnordered<PendingRead> = FuturesUnordered::new();
        for index in 0..progress.splits.len() {
            let reader = self
                .open_split(
                    reading,
                    &progress.splits[index].split,
                    watermarks.as_deref_mut(),
                    now_ms(),
                )
                .await?;
            reads.push(pending_read(index, reader, reading.metrics.clone()));
        }
        let discovery = discovery_interval(reading.source.as_ref());
        let waits_for_new =
            discovery.is_some() && reading.source.boundedness() == Boundedness::Unbounded;
        let mut known: HashSet<String> = reading.known_splits.iter().cloned().collect();
        known.extend(progress.splits.iter().map(|p| p.split.id.clone()));
        let mut next_discovery = tokio::time::Instant::now() + discovery.unwrap_or_default();

        let idle_ms = watermarks
            .as_deref()
            .and_then(SourceWatermarks::idle_timeout_ms);
        // One millisecond past the timeout: a split is idle when silent for *longer* than it.
        let patience = Duration::from_millis(idle_ms.unwrap_or(0).saturating_add(1));
        let mut idle_tick = tokio::time::Instant::now() + patience;
        let mut trigger = self.checkpointing.as_ref().map(|c| c.trigger.clone());
        // Whether the downstream was told this subtask is idle because it reads no split.
        let mut idle_without_splits = false;
        loop {
            if reads.is_empty() {
                if !waits_for_new {
                    break;
                }
                if !idle_without_splits {
                    idle_without_splits = true;
                    reading.release();
                    self.send_idle().await?;
                }
            }
            self.await_alignment(reading, progress, watermarks.as_deref())
                .await?;
            let waiting = Instant::now();
            let busy = reading.metrics.busy_ns();
            tokio::select! {
                Some((index, reader, read)) = reads.next(), if !reads.is_empty() => {
                    reading.metrics.add_waited(waiting, busy);
                    match read.map_err(|e| reading.fail(e))? {
                        Some(read) => {
                            reads.push(pending_read(index, reader, reading.metrics.clone()));
                            self.hand_on(
                                reading,
                                progress,
                                index,
                                read,
                                watermarks.as_deref_mut(),
                                now_ms(),
                            )
                            .await?;
                        }
                        None => {
                            drop(reader);
                            self.end_split(reading, progress, index, watermarks.as_deref_mut())
                                .await?;
                            // As in sequential reading: after the last split the end-of-input
                            // watermark goes before any barrier.
                            if reads.is_empty() && !waits_for_new {
                                continue;
                            }
                        }
                    }
                    self.inject_if_triggered(progress, watermarks.as_deref())
                        .await?;
                }
                () = tokio::time::sleep_until(idle_tick), if idle_ms.is_some() => {
                    reading.metrics.add_waited(waiting, busy);
                    idle_tick = tokio::time::Instant::now() + patience;
                    if let Some(w) = watermarks.as_deref_mut() {
                        self.on_silence(reading, w, now_ms()).await?;
                    }
                }
                changed = wait_for_trigger(trigger.as_mut()), if trigger.is_some() => {
                    reading.metrics.add_waited(waiting, busy);
                    if changed.is_err() {
                        // The coordinator is gone: the job is ending; keep reading.
                        trigger = None;
                        continue;
                    }
                    self.inject_if_triggered(progress, watermarks.as_deref()).await?;
                }
                () = tokio::time::sleep_until(next_discovery), if discovery.is_some() => {
                    reading.metrics.add_waited(waiting, busy);
                    next_discovery = tokio::time::Instant::now() + discovery.unwrap_or_default();
                    let found = self
                        .discover(reading, progress, &mut known, watermarks.as_deref_mut(), now_ms())
                        .await?;
                    if !found.is_empty() {
                        idle_without_splits = false;
                    }
                    for (index, reader) in found {
                        reads.push(pending_read(index, reader, reading.metrics.clone()));
                    }
                }
            }
        }
        reading.release();
        Ok(())
    }

    /// Opens a reader for `split` at its cursor; with watermarks, the split holds the source
    /// watermark back from processing time `now_ms` on.
    async fn open_split(
        &mut self,
        reading: &SourceReading<'_>,
        split: &SourceSplit,
        watermarks: Option<&mut SourceWatermarks>,
        now_ms: u64,
    ) -> Result<Box<dyn SplitReader>> {
        let reader = reading
            .source
            .open_split(split, reading.ctx)
            .await
            .map_err(|e| reading.fail(e))?;
        if let Some(w) = watermarks {
            w.open_split(&split.id, now_ms);
        }
        Ok(reader)
    }

    /// Partition discovery: lists the source's splits and opens those that are new (neither
    /// known at the attempt's start nor found before) and taken by this subtask, each at the
    /// cursor the listing gives. They join the progress, so the next cut records them. Returns
    /// each opened split's index in the progress with its reader. A failed listing is logged
    /// and tried again at the next interval.
    async fn discover(
        &mut self,
        reading: &SourceReading<'_>,
        progress: &mut SourceProgress,
        known: &mut HashSet<String>,
        mut watermarks: Option<&mut SourceWatermarks>,
        now_ms: u64,
    ) -> Result<Vec<(usize, Box<dyn SplitReader>)>> {
        let listed = match reading.source.discover_splits().await {
            Ok(listed) => listed,
            Err(e) => {
                tracing::warn!(
                    task = %self.label,
                    error = %e,
                    "discovering splits failed; trying again at the next interval"
                );
                return Ok(Vec::new());
            }
        };
        let mut opened = Vec::new();
        for split in listed {
            if !known.insert(split.id.clone())
                || reading
                    .share
                    .is_some_and(|share| !share.contains(&split.id))
                || discovered_split_owner(&split.id, reading.ctx.parallelism)
                    != reading.ctx.subtask.0
            {
                continue;
            }
            tracing::info!(task = %self.label, split = %split.id, "discovered a new split");
            let reader = self
                .open_split(reading, &split, watermarks.as_deref_mut(), now_ms)
                .await?;
            self.job_metrics
                .add_splits(1, split.size_bytes.unwrap_or(0));
            opened.push((progress.splits.len(), reader));
            progress.splits.push(SplitProgress {
                counters: reading.metrics.split_counters(&split.id),
                split,
                finished: false,
            });
        }
        Ok(opened)
    }

    /// Hands on one read of split `index`: notes the split's backlog, hands on its dead letters,
    /// then its rows (with watermarks: sliced at the split's cut points, each followed by the
    /// source watermark where it advanced), commits the state and advances the split's cursor.
    async fn hand_on(
        &mut self,
        reading: &SourceReading<'_>,
        progress: &mut SourceProgress,
        index: usize,
        read: SplitBatch,
        watermarks: Option<&mut SourceWatermarks>,
        now_ms: u64,
    ) -> Result<()> {
        let handling = Instant::now();
        let blocked = reading.metrics.backpressured_ns();
        let split = &progress.splits[index];
        split
            .counters
            .position
            .store(read.cursor.next_record, Ordering::Relaxed);
        if let Some(backlog) = read.backlog {
            split.counters.backlog.store(backlog, Ordering::Relaxed);
        }
        if let Some(dead) = read.dead_letters
            && dead.num_rows() > 0
        {
            reading.metrics.add_dead_letters(dead.num_rows());
            for &w in reading.dead_letter_writers {
                self.send(w, dead.clone()).await?;
            }
        }
        let rows = read.data.num_rows();
        if rows > 0 {
            reading.metrics.add_out(&read.data);
            progress.splits[index]
                .counters
                .rows_read
                .fetch_add(rows as u64, Ordering::Relaxed);
        }
        match watermarks {
            Some(w) => {
                let steps = w
                    .on_batch(&progress.splits[index].split.id, read.data, now_ms)
                    .map_err(|e| reading.fail(e))?;
                if let Some(t) = w.max_event_time() {
                    reading.metrics.note_event_time(t.0);
                }
                for step in steps {
                    let item = match step {
                        SourceStep::Rows(batch) => Item::Batch(0, batch),
                        SourceStep::Marked(batch, marks) => {
                            if let Some(m) = marks.last() {
                                reading.published(m);
                            }
                            Item::Marked(0, batch, marks)
                        }
                        SourceStep::Watermark(m) => {
                            reading.published(m);
                            Item::Watermark(m)
                        }
                        SourceStep::SplitWatermark(m) => Item::SplitWatermark(0, m),
                    };
                    self.drive(0, item).await?;
                }
                self.commit_state().await?;
            }
            None if rows > 0 => {
                self.drive(0, Item::Batch(0, read.data)).await?;
                self.commit_state().await?;
            }
            None => {}
        }
        progress.splits[index].split.cursor = read.cursor;
        reading.metrics.add_handling(handling.elapsed(), blocked);
        Ok(())
    }

    /// Split `index` was read to its end: it no longer holds the source watermark back (which
    /// is driven if that advanced it) and the cut records it finished.
    async fn end_split(
        &mut self,
        reading: &SourceReading<'_>,
        progress: &mut SourceProgress,
        index: usize,
        watermarks: Option<&mut SourceWatermarks>,
    ) -> Result<()> {
        let split = &progress.splits[index].split;
        if let Some(m) = watermarks.and_then(|w| w.finish_split(&split.id)) {
            reading.published(m);
            self.drive(0, Item::Watermark(m)).await?;
            self.commit_state().await?;
        }
        self.job_metrics.split_done(split.size_bytes.unwrap_or(0));
        progress.splits[index].finished = true;
        Ok(())
    }

    /// No data for a while, at processing time `now_ms`: splits silent for longer than the idle
    /// timeout become idle, which may advance the source watermark (driven at once); when every
    /// open split is idle, the downstream is told so.
    async fn on_silence(
        &mut self,
        reading: &SourceReading<'_>,
        watermarks: &mut SourceWatermarks,
        now_ms: u64,
    ) -> Result<()> {
        let (advanced, idle) = watermarks.on_silence(now_ms);
        if let Some(m) = advanced {
            reading.published(m);
            self.drive(0, Item::Watermark(m)).await?;
            self.commit_state().await?;
        }
        if idle {
            reading.release();
            self.send_idle().await?;
        }
        Ok(())
    }

    /// Watermark alignment: while this subtask's watermark is more than the allowed drift ahead
    /// of the source's slowest running subtask, waits for the others to publish, still injecting
    /// the barriers of checkpoints triggered meanwhile (nothing is being read: a safe point).
    async fn await_alignment(
        &mut self,
        reading: &SourceReading<'_>,
        progress: &SourceProgress,
        watermarks: Option<&SourceWatermarks>,
    ) -> Result<()> {
        let Some(alignment) = reading.alignment else {
            return Ok(());
        };
        let subtask = reading.ctx.subtask.0;
        if !alignment.must_wait(subtask) {
            return Ok(());
        }
        reading.metrics.add_alignment_pause();
        let mut changes = alignment.subscribe();
        let mut trigger = self.checkpointing.as_ref().map(|c| c.trigger.clone());
        loop {
            changes.borrow_and_update();
            if !alignment.must_wait(subtask) {
                return Ok(());
            }
            let waiting = Instant::now();
            tokio::select! {
                changed = changes.changed() => {
                    reading.metrics.add_idle(waiting.elapsed());
                    if changed.is_err() {
                        return Ok(());
                    }
                }
                changed = wait_for_trigger(trigger.as_mut()), if trigger.is_some() => {
                    reading.metrics.add_idle(waiting.elapsed());
                    if changed.is_err() {
                        trigger = None;
                        continue;
                    }
                    self.inject_if_triggered(progress, watermarks).await?;
                }
            }
        }
    }

    /// The reader's next batch. Without idle timeout and checkpoints, just the read. Otherwise
    /// the read is raced against the time the split may stay silent (when it elapses, silent
    /// splits become idle, which may advance the source watermark, and when every open split
    /// is idle the downstream is told so) and against checkpoint triggers (the barrier is
    /// injected at once: nothing of the pending read was emitted, so the cut is exact). The
    /// pending read is kept, never dropped, so readers need not be cancel safe.
    ///
    /// Idleness is measured in processing time, so where it is declared is not deterministic.
    async fn next_read(
        &mut self,
        reading: &SourceReading<'_>,
        reader: &mut Box<dyn SplitReader>,
        mut watermarks: Option<&mut SourceWatermarks>,
        now_ms: &impl Fn() -> u64,
        progress: &SourceProgress,
    ) -> std::result::Result<Option<SplitBatch>, ReadError> {
        let idle_ms = watermarks
            .as_deref()
            .and_then(SourceWatermarks::idle_timeout_ms);
        let mut trigger = self.checkpointing.as_ref().map(|c| c.trigger.clone());
        let metrics = reading.metrics;
        let mut pending = Polled {
            inner: reader.next_batch(),
            metrics,
        };
        if idle_ms.is_none() && trigger.is_none() {
            let (waiting, busy) = (Instant::now(), metrics.busy_ns());
            let read = pending.await;
            metrics.add_waited(waiting, busy);
            return read.map_err(ReadError::Source);
        }
        // One millisecond past the timeout: a split is idle when silent for *longer* than it.
        let patience = Duration::from_millis(idle_ms.unwrap_or(0).saturating_add(1));
        let mut deadline = tokio::time::Instant::now() + patience;
        loop {
            let (waiting, busy) = (Instant::now(), metrics.busy_ns());
            tokio::select! {
                read = &mut pending => {
                    metrics.add_waited(waiting, busy);
                    return read.map_err(ReadError::Source);
                }
                () = tokio::time::sleep_until(deadline), if idle_ms.is_some() => {
                    metrics.add_waited(waiting, busy);
                    deadline += patience;
                    let Some(w) = watermarks.as_deref_mut() else { continue };
                    self.on_silence(reading, w, now_ms())
                        .await
                        .map_err(ReadError::Task)?;
                }
                changed = wait_for_trigger(trigger.as_mut()), if trigger.is_some() => {
                    metrics.add_waited(waiting, busy);
                    if changed.is_err() {
                        // The coordinator is gone: the job is ending; keep reading.
                        trigger = None;
                        continue;
                    }
                    self.inject_if_triggered(progress, watermarks.as_deref())
                        .await
                        .map_err(ReadError::Task)?;
                }
            }
        }
    }
}

/// Waits for the next trigger; `None` never resolves (the select arm is disabled then).
async fn wait_for_trigger(
    trigger: Option<&mut tokio::sync::watch::Receiver<Option<Trigger>>>,
) -> std::result::Result<(), tokio::sync::watch::error::RecvError> {
    match trigger {
        Some(t) => t.changed().await,
        None => std::future::pending().await,
    }
}

/// A source subtask's read position in each of its splits: the cut it seals with a barrier.
#[derive(Debug)]
pub(crate) struct SourceProgress {
    pub(crate) operator: OperatorId,
    pub(crate) subtask: weir_api::SubtaskIndex,
    /// The assigned splits in assignment order, then the discovered ones in discovery order.
    pub(crate) splits: Vec<SplitProgress>,
}

/// One split's read position.
#[derive(Debug)]
pub(crate) struct SplitProgress {
    /// The split, its cursor at the next record to read.
    pub(crate) split: SourceSplit,
    /// Read to its end.
    pub(crate) finished: bool,
    /// The split's counters in the job metrics (resolved once, when the split opens).
    pub(crate) counters: Arc<SplitCounters>,
}

impl SourceProgress {
    fn new(
        ctx: &TaskContext,
        splits: &[(SourceSplit, SplitResume)],
        metrics: &SubtaskMetrics,
    ) -> Self {
        SourceProgress {
            operator: ctx.operator_id.clone(),
            subtask: ctx.subtask,
            splits: splits
                .iter()
                .map(|(split, _)| SplitProgress {
                    split: split.clone(),
                    finished: false,
                    counters: metrics.split_counters(&split.id),
                })
                .collect(),
        }
    }
}

/// What a source task reads with, borrowed from its [`SourceHead`].
struct SourceReading<'a> {
    source: &'a Arc<dyn PreparedSource>,
    ctx: &'a TaskContext,
    metrics: &'a SubtaskMetrics,
    dead_letter_writers: &'a [usize],
    alignment: Option<&'a SourceAlignment>,
    known_splits: &'a HashSet<String>,
    share: Option<SplitShare>,
    decoders: usize,
}

impl SourceReading<'_> {
    /// Tells the source's other subtasks (watermark alignment) that this one emitted `m`.
    fn published(&self, m: Watermark) {
        if let Some(a) = self.alignment {
            a.publish(self.ctx.subtask.0, m.0.0);
        }
    }

    /// This subtask holds nobody back any more (idle, or done reading).
    fn release(&self) {
        if let Some(a) = self.alignment {
            a.release(self.ctx.subtask.0);
        }
    }

    /// A source error, attributed to the source operator.
    fn fail(&self, source: weir_api::Error) -> Error {
        Error::Task {
            task: self.ctx.label(),
            source,
        }
    }
}

/// Why the next read failed: the source itself, or the chain while handling idleness.
enum ReadError {
    Source(weir_api::Error),
    Task(Error),
}

impl ReadError {
    fn into_error(self, reading: &SourceReading<'_>) -> Error {
        match self {
            ReadError::Source(e) => reading.fail(e),
            ReadError::Task(e) => e,
        }
    }
}
