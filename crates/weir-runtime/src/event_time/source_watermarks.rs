//! The watermarks of one source subtask: a [`WatermarkGenerator`] per open split, merged by a
//! [`PartitionWatermarks`] keyed by split id, with idle detection.
//!
//! Everything here is driven by the calls made and the processing times passed in; the task
//! that owns it reads the clock. Idle detection is therefore exactly as non-deterministic as
//! that clock: when a silent split is declared idle depends on scheduling, not on the data.

use std::collections::HashMap;

use arrow::record_batch::RecordBatch;
use weir_api::{Error, EventTimeMs, Watermark, WatermarkMarks};

use crate::checkpoint::recovery::SplitResume;
use weir_plan::{Lateness, ModelWatermark};

use super::{InputTimeState, PartitionWatermarks, WatermarkGenerator, event_times_ms};

/// What a source subtask drives downstream for one batch read, in order.
#[derive(Debug, Clone)]
pub(crate) enum SourceStep {
    /// Consecutive rows of the batch: a zero-copy slice, never empty.
    Rows(RecordBatch),
    /// The whole batch (never empty), inside which the source watermark advances at the marks.
    Marked(RecordBatch, WatermarkMarks),
    /// The source watermark advanced to this.
    Watermark(Watermark),
    /// The rows that follow were read behind this watermark of their own split (sources with
    /// `lateness: split`); sent only when it changes.
    SplitWatermark(Watermark),
}

/// The key of the one stream of a source whose splits are parts of one ordered input.
const ONE_STREAM: &str = "";

/// Per-split watermark generation and merging for one source subtask.
#[derive(Debug)]
pub(crate) struct SourceWatermarks {
    spec: ModelWatermark,
    /// The splits are consecutive parts of one stream: one generator over all of them, in the
    /// order they are read, and a split that ends does not end the stream.
    one_stream: bool,
    /// The split watermark last sent ahead of rows (`lateness: split`); `None`: none yet.
    marker: Option<Watermark>,
    splits: HashMap<String, WatermarkGenerator>,
    partitions: PartitionWatermarks<String>,
    /// Whether the subtask reported itself idle and no split delivered data since.
    idle_reported: bool,
    /// Whether an operator downstream reads the watermark. When none does, batches are not
    /// cut where it advances: each goes whole, followed by the watermark of the largest event
    /// time so far (still reported in metrics and checkpoints, but not stepped by the
    /// interval), and no split watermarks are sent.
    read: bool,
}

impl SourceWatermarks {
    /// Watermarks as the source node's spec says; no split is open yet. With `one_stream`, the
    /// splits are parts of one stream, read in order.
    pub(crate) fn new(spec: &ModelWatermark, one_stream: bool) -> Self {
        SourceWatermarks {
            spec: spec.clone(),
            one_stream,
            marker: None,
            splits: HashMap::new(),
            partitions: PartitionWatermarks::new(spec.idle_timeout.map(|d| d.0)),
            idle_reported: false,
            read: true,
        }
    }

    /// The same watermarks for a source whose watermark no operator downstream reads: its
    /// batches go whole, each followed by the watermark it reached.
    pub(crate) fn unread(mut self) -> Self {
        self.read = false;
        self
    }

    /// Continues the splits of a restored checkpoint: each split with recorded progress gets
    /// its generator back (prefix maximum and last emitted watermark), so it emits after the
    /// same rows as an uninterrupted run. The source watermark restarts at the lowest of the
    /// splits' watermarks (conservative: never above what the uninterrupted run emitted).
    ///
    /// Parts of one stream all recorded the stream's progress: the first part still to read
    /// (the one being read at the cut) gives it back.
    pub(crate) fn restore(&mut self, splits: &[(weir_api::SourceSplit, SplitResume)]) {
        let mut floor: Option<Watermark> = None;
        let mut complete = !splits.is_empty();
        let splits = if self.one_stream {
            &splits[..splits.len().min(1)]
        } else {
            splits
        };
        for (split, resume) in splits {
            if resume.max_event_time.is_none() && resume.emitted.is_none() {
                complete = false;
                continue;
            }
            let time = InputTimeState {
                max_event_time: resume.max_event_time,
                out_of_orderness_ms: self.spec.max_out_of_orderness.0,
            };
            self.splits.insert(
                self.key(&split.id).to_owned(),
                WatermarkGenerator::resume(time, self.spec.interval.0, resume.emitted),
            );
            match resume.emitted {
                Some(w) => floor = Some(floor.map_or(w, |f| f.min(w))),
                None => complete = false,
            }
        }
        if complete && let Some(w) = floor {
            self.partitions.restore(w);
        }
    }

    /// A split's event-time progress for a checkpoint cut: its largest event time and its last
    /// emitted watermark (`None`s before its first event time).
    pub(crate) fn split_progress(&self, split: &str) -> (Option<EventTimeMs>, Option<Watermark>) {
        self.splits.get(self.key(split)).map_or((None, None), |g| {
            (g.time_state().max_event_time, g.emitted())
        })
    }

    /// The largest event time read from any split so far (after a restore: including the
    /// restored splits' progress); `None` before the first.
    pub(crate) fn max_event_time(&self) -> Option<EventTimeMs> {
        self.splits
            .values()
            .filter_map(|g| g.time_state().max_event_time)
            .max()
    }

    /// The source watermark emitted last (after a restore: the restored floor).
    pub(crate) fn current(&self) -> Option<Watermark> {
        self.partitions.current()
    }

    /// How long a split may stay silent before it is idle, in ms; `None`: never idle.
    pub(crate) fn idle_timeout_ms(&self) -> Option<u64> {
        self.spec.idle_timeout.map(|d| d.0)
    }

    /// A split was opened at processing time `now_ms`: it holds the source watermark back until
    /// it has an event time or goes idle.
    pub(crate) fn open_split(&mut self, split: &str, now_ms: u64) {
        let key = self.key(split).to_owned();
        self.splits.entry(key.clone()).or_insert_with(|| {
            WatermarkGenerator::new(self.spec.max_out_of_orderness.0, self.spec.interval.0)
        });
        self.partitions.add_partition(key, now_ms);
    }

    /// Whether a row is late against the watermark of its own split (`lateness: split`): the
    /// source then sends [`SourceStep::SplitWatermark`] ahead of rows.
    pub(crate) fn per_split_lateness(&self) -> bool {
        self.read && self.spec.lateness == Lateness::Split
    }

    /// The generator and partition key of `split`: its id, or the one stream's.
    fn key<'a>(&self, split: &'a str) -> &'a str {
        if self.one_stream { ONE_STREAM } else { split }
    }

    /// Splits `batch`, read from `split` at processing time `now_ms`, at the split's watermark
    /// cut points. Returns what to drive, in order: slices of the batch, each followed by the
    /// source watermark (the minimum over active splits) where it advanced. Rows with a null
    /// event time pass through. A batch without rows still marks the split active.
    ///
    /// # Errors
    ///
    /// A schema error when the batch has no such column or it is not an event time, and a bad
    /// record when a timestamp in seconds overflows milliseconds.
    pub(crate) fn on_batch(
        &mut self,
        split: &str,
        batch: RecordBatch,
        now_ms: u64,
    ) -> Result<Vec<SourceStep>, Error> {
        self.idle_reported = false;
        let column = batch.column_by_name(&self.spec.column).ok_or_else(|| {
            Error::schema(
                format!("event-time field `{}`", self.spec.column),
                "the source's batch has no such column",
            )
        })?;
        let times = event_times_ms(column, &self.spec.column)?;
        let key = self.key(split).to_owned();
        let generator = self.splits.entry(key.clone()).or_insert_with(|| {
            WatermarkGenerator::new(self.spec.max_out_of_orderness.0, self.spec.interval.0)
        });
        if !self.read {
            // Nothing downstream reads it: no cut points, only where the batch took it.
            let advanced = generator.advance(&times);
            let mut steps = Vec::with_capacity(3);
            if let Some(w) = self.partitions.on_data(key.clone(), None, now_ms) {
                steps.push(SourceStep::Watermark(w));
            }
            let reached = advanced.and_then(|a| self.partitions.on_data(key, Some(a), now_ms));
            if batch.num_rows() > 0 {
                steps.push(SourceStep::Rows(batch));
            }
            steps.extend(reached.map(SourceStep::Watermark));
            return Ok(steps);
        }
        // The split's own watermark before the batch: what its first rows are late against.
        let behind = generator.emitted().unwrap_or(Watermark::NONE);
        let cuts = generator.cuts(&times);
        let mut steps = Vec::with_capacity(3 * cuts.len() + 3);
        // Activity first: a split rejoining after idleness holds the minimum again, and the
        // others' progress it no longer blocks (when all were idle) goes out before its rows.
        if let Some(w) = self.partitions.on_data(key.clone(), None, now_ms) {
            steps.push(SourceStep::Watermark(w));
        }
        if !self.per_split_lateness() {
            // One message: each row is judged against the watermark before it all the same.
            let mut marks = WatermarkMarks::new();
            for cut in cuts {
                if let Some(w) = self
                    .partitions
                    .on_data(key.clone(), Some(cut.watermark), now_ms)
                {
                    marks.push(cut.row_end, w);
                }
            }
            if batch.num_rows() == 0 {
                steps.extend(marks.last().map(SourceStep::Watermark));
            } else if marks.is_empty() {
                steps.push(SourceStep::Rows(batch));
            } else {
                steps.push(SourceStep::Marked(batch, marks));
            }
            return Ok(steps);
        }
        // One message as well: the marks also say where the split's own watermark moves, so
        // each row is still judged against the split watermark before it.
        let rows = batch.num_rows();
        let mut marks = WatermarkMarks::new();
        for cut in cuts {
            if cut.row_end < rows {
                marks.push_split(cut.row_end, cut.watermark);
            }
            if let Some(w) = self
                .partitions
                .on_data(key.clone(), Some(cut.watermark), now_ms)
            {
                marks.push(cut.row_end, w);
            }
        }
        if rows == 0 {
            steps.extend(marks.last().map(SourceStep::Watermark));
            return Ok(steps);
        }
        if self.marker != Some(behind) {
            self.marker = Some(behind);
            steps.push(SourceStep::SplitWatermark(behind));
        }
        if let Some(last) = marks.last_split() {
            self.marker = Some(last);
        }
        steps.push(if marks.is_empty() {
            SourceStep::Rows(batch)
        } else {
            SourceStep::Marked(batch, marks)
        });
        Ok(steps)
    }

    /// `split` ended: it no longer holds the source back. Returns the source watermark if that
    /// made it advance. A part of one stream ends nothing: the stream ends with the source's
    /// input.
    pub(crate) fn finish_split(&mut self, split: &str) -> Option<Watermark> {
        if self.one_stream {
            return None;
        }
        self.splits.remove(split);
        self.partitions.remove_partition(&split.to_owned())
    }

    /// No data arrived until processing time `now_ms`: splits silent for longer than the idle
    /// timeout become idle. Returns the source watermark if it advanced, and whether every open
    /// split is now idle and that was not reported yet (then tell downstream the subtask is
    /// idle).
    pub(crate) fn on_silence(&mut self, now_ms: u64) -> (Option<Watermark>, bool) {
        let advanced = self.partitions.on_processing_time(now_ms);
        let any_open = !self.splits.is_empty();
        let report = any_open && self.partitions.all_idle() && !self.idle_reported;
        if report {
            self.idle_reported = true;
        }
        (advanced, report)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use weir_api::{DurationMs, EventTimeMs};

    use super::*;

    fn spec(ooo: u64, interval: u64, idle: Option<u64>) -> ModelWatermark {
        ModelWatermark {
            column: "ts".into(),
            max_out_of_orderness: DurationMs(ooo),
            idle_timeout: idle.map(DurationMs),
            interval: DurationMs(interval),
            max_drift: None,
            lateness: Lateness::Merged,
        }
    }

    fn batch(times: Vec<Option<i64>>) -> RecordBatch {
        let ts: ArrayRef = Arc::new(Int64Array::from(times));
        RecordBatch::try_from_iter([("ts", ts)]).expect("batch")
    }

    /// Each step as `Ok(rows)` or `Err(watermark)`, of a source with `lateness: merged`, which
    /// sends no split watermark.
    /// A batch with marks means its pieces.
    fn shape(steps: &[SourceStep]) -> Vec<Result<usize, i64>> {
        unmarked(steps)
            .iter()
            .map(|s| match s {
                SourceStep::Rows(b) => Ok(b.num_rows()),
                SourceStep::Watermark(w) => Err(w.0.0),
                SourceStep::SplitWatermark(w) => {
                    panic!("merged lateness sent split watermark {w:?}")
                }
                SourceStep::Marked(..) => unreachable!("unmarked"),
            })
            .collect()
    }

    /// The steps with each batch with marks cut into its pieces.
    fn unmarked(steps: &[SourceStep]) -> Vec<SourceStep> {
        steps
            .iter()
            .flat_map(|s| match s {
                SourceStep::Marked(b, marks) => marks
                    .pieces(b)
                    .into_iter()
                    .map(|p| match p {
                        weir_api::Piece::Rows(r) => SourceStep::Rows(r),
                        weir_api::Piece::Watermark(w) => SourceStep::Watermark(w),
                        weir_api::Piece::SplitWatermark(w) => SourceStep::SplitWatermark(w),
                    })
                    .collect(),
                s => vec![s.clone()],
            })
            .collect()
    }

    /// Each step as text: `rows n`, `wm w`, `split w`, `marked n at r:w,...`.
    fn steps_text(steps: &[SourceStep]) -> Vec<String> {
        steps
            .iter()
            .map(|s| match s {
                SourceStep::Rows(b) => format!("rows {}", b.num_rows()),
                SourceStep::Watermark(w) => format!("wm {}", w.0.0),
                SourceStep::SplitWatermark(w) => format!("split {}", w.0.0),
                SourceStep::Marked(b, marks) => format!(
                    "marked {} at {}",
                    b.num_rows(),
                    marks
                        .iter()
                        .map(|(r, w)| format!("{r}:{}", w.0.0))
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            })
            .collect()
    }

    #[test]
    fn a_batch_goes_whole_with_marks_where_the_watermark_advances() {
        let mut s = SourceWatermarks::new(&spec(1000, 200, None), false);
        s.open_split("a", 0);
        let steps = s
            .on_batch(
                "a",
                batch(vec![Some(2100), Some(100), None, Some(2500), Some(2400)]),
                0,
            )
            .expect("marked");
        assert_eq!(steps_text(&steps), ["marked 5 at 1:1099,4:1499"]);
        let steps = s.on_batch("a", batch(vec![Some(2450)]), 0).expect("rows");
        assert_eq!(steps_text(&steps), ["rows 1"], "no advance: no marks");
    }

    #[test]
    fn rows_follow_the_watermark_of_their_own_split_when_lateness_is_per_split() {
        let mut per_split = spec(0, 1, None);
        per_split.lateness = Lateness::Split;
        let mut s = SourceWatermarks::new(&per_split, false);
        s.open_split("a", 0);
        s.open_split("b", 0);
        let steps = s
            .on_batch("a", batch(vec![Some(100), Some(50), Some(200)]), 0)
            .expect("a");
        assert_eq!(
            steps_text(&steps),
            ["split -9223372036854775808", "marked 3 at "],
            "one message: the split watermark moves inside the batch"
        );
        assert_eq!(
            steps_text(&unmarked(&steps)),
            ["split -9223372036854775808", "rows 1", "split 99", "rows 2"],
            "b holds the source watermark back; a's own watermark moves after 100 and 200"
        );
        let steps = s.on_batch("b", batch(vec![Some(10)]), 0).expect("b");
        assert_eq!(
            steps_text(&unmarked(&steps)),
            ["split -9223372036854775808", "rows 1", "wm 9"],
            "b's rows were read behind b's watermark, not a's"
        );
        let steps = s.on_batch("a", batch(vec![Some(300)]), 0).expect("a");
        assert_eq!(steps_text(&steps), ["split 199", "rows 1"]);
    }

    #[test]
    fn a_watermark_no_operator_reads_leaves_batches_whole() {
        let mut per_split = spec(0, 1, None);
        per_split.lateness = Lateness::Split;
        let mut s = SourceWatermarks::new(&per_split, false).unread();
        assert!(!s.per_split_lateness(), "nobody judges rows late");
        s.open_split("a", 0);
        let steps = s
            .on_batch(
                "a",
                batch(vec![Some(100), Some(50), Some(200), Some(150)]),
                0,
            )
            .expect("a");
        assert_eq!(
            steps_text(&steps),
            ["rows 4", "wm 199"],
            "the batch goes whole, then the watermark its rows reached"
        );
        let steps = s.on_batch("a", batch(vec![Some(120)]), 0).expect("a");
        assert_eq!(steps_text(&steps), ["rows 1"], "no advance, no watermark");
        assert_eq!(s.current().map(|w| w.0.0), Some(199));
    }

    #[test]
    fn parts_of_one_stream_share_one_watermark_across_their_ends() {
        let mut s = SourceWatermarks::new(&spec(0, 1, None), true);
        s.open_split("f#0-10", 0);
        let steps = s
            .on_batch("f#0-10", batch(vec![Some(100)]), 0)
            .expect("part 1");
        assert_eq!(shape(&steps), vec![Ok(1), Err(99)]);
        assert_eq!(s.finish_split("f#0-10"), None, "the stream goes on");
        s.open_split("f#10-20", 0);
        // The next part continues the prefix maximum: 50 is behind 99, 150 moves it.
        let steps = s
            .on_batch("f#10-20", batch(vec![Some(50), Some(150)]), 0)
            .expect("part 2");
        assert_eq!(shape(&steps), vec![Ok(2), Err(149)]);
        assert_eq!(
            s.split_progress("f#10-20"),
            (Some(EventTimeMs(150)), Some(Watermark(EventTimeMs(149))))
        );
    }

    #[test]
    fn a_batch_is_sliced_at_the_cut_points() {
        let mut s = SourceWatermarks::new(&spec(1000, 200, None), false);
        s.open_split("a", 0);
        let pieces = s
            .on_batch("a", batch(vec![Some(2100), Some(100), None]), 0)
            .expect("pieces");
        assert_eq!(shape(&pieces), vec![Ok(1), Err(1099), Ok(2)]);
        let pieces = s
            .on_batch("a", batch(vec![Some(2200), Some(2300)]), 1)
            .expect("pieces");
        assert_eq!(shape(&pieces), vec![Ok(2), Err(1299)]);
        assert!(s.on_batch("a", batch(vec![]), 2).expect("empty").is_empty());
    }

    #[test]
    fn the_source_watermark_is_the_minimum_over_open_splits() {
        let mut s = SourceWatermarks::new(&spec(0, 1, None), false);
        s.open_split("a", 0);
        s.open_split("b", 0);
        let pieces = s.on_batch("a", batch(vec![Some(100)]), 0).expect("a");
        assert_eq!(shape(&pieces), vec![Ok(1)], "b holds back");
        let pieces = s.on_batch("b", batch(vec![Some(50)]), 0).expect("b");
        assert_eq!(shape(&pieces), vec![Ok(1), Err(49)]);
        assert_eq!(s.finish_split("b"), Some(Watermark(EventTimeMs(99))));
        // A new split starting lower never takes the source watermark back.
        s.open_split("c", 0);
        let pieces = s.on_batch("c", batch(vec![Some(10)]), 0).expect("c");
        assert_eq!(shape(&pieces), vec![Ok(1)]);
    }

    #[test]
    fn a_silent_split_goes_idle_once_and_data_wakes_it() {
        let mut s = SourceWatermarks::new(&spec(0, 1, Some(100)), false);
        assert_eq!(s.on_silence(1_000), (None, false), "no split open");
        s.open_split("a", 0);
        s.open_split("b", 0);
        s.on_batch("a", batch(vec![Some(300)]), 0).expect("a");
        s.on_batch("b", batch(vec![Some(500)]), 50).expect("b");
        assert_eq!(s.on_silence(100), (None, false));
        assert_eq!(
            s.on_silence(101),
            (Some(Watermark(EventTimeMs(499))), false),
            "a is idle, b still active"
        );
        assert_eq!(s.on_silence(151), (None, true), "both idle: report once");
        assert_eq!(s.on_silence(500), (None, false));
        s.on_batch("b", batch(vec![Some(900)]), 600).expect("b");
        assert_eq!(s.on_silence(800), (None, true), "idle again after data");
    }

    #[test]
    fn a_split_waking_up_releases_what_others_reached_before_its_rows() {
        let mut s = SourceWatermarks::new(&spec(0, 1, Some(10)), false);
        s.open_split("a", 0);
        s.open_split("b", 0);
        s.on_batch("a", batch(vec![Some(500)]), 0).expect("a");
        s.on_batch("b", batch(vec![Some(300)]), 0).expect("b");
        assert_eq!(s.on_silence(100), (None, true));
        let steps = s.on_batch("a", batch(vec![Some(400)]), 200).expect("a");
        assert_eq!(shape(&steps), vec![Err(499), Ok(1)]);
    }

    #[test]
    fn a_missing_or_wrong_column_is_an_error() {
        let mut s = SourceWatermarks::new(&spec(0, 1, None), false);
        let other: ArrayRef = Arc::new(Int64Array::from(vec![1]));
        let no_ts = RecordBatch::try_from_iter([("x", other)]).expect("batch");
        assert!(s.on_batch("a", no_ts, 0).is_err());
        let text: ArrayRef = Arc::new(StringArray::from(vec!["1"]));
        let text_ts = RecordBatch::try_from_iter([("ts", text)]).expect("batch");
        let err = s.on_batch("a", text_ts, 0).expect_err("utf8");
        assert!(err.to_string().contains("`ts`"), "{err}");
    }
}
