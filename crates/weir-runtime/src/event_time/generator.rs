//! Per-split watermark generation whose emission points do not depend on batch boundaries.
//!
//! A split's watermark after row `i` is [`weir_api::watermark_for`] of the largest event time
//! of rows `0..=i` (the running prefix maximum, as in [`classify_rows`](super::classify_rows)).
//! It is *emitted* right after the first row that moves it at least `interval` past the last
//! emitted one. Both the candidate and the decision depend only on the split's rows and their
//! order, so the same rows read in batches of 1 or of 65,536 rows emit the same watermarks after
//! the same rows, and a replay sees the same watermark sequence.

use arrow::array::{Array, Int64Array};
use weir_api::{EventTimeMs, Watermark, watermark_for};

use super::InputTimeState;

/// Rows whose maximum is taken at once before looking at them one by one
/// ([`WatermarkGenerator::cuts`]).
const SCAN_CHUNK: usize = 64;

/// A point inside a batch where a split's watermark is emitted: after rows `..row_end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatermarkCut {
    /// Exclusive end of the rows that come before the watermark; at least 1, at most the
    /// batch's length. Rows from `row_end` on follow the watermark.
    pub row_end: usize,
    /// The split's watermark, emitted after those rows; higher than every earlier cut's.
    pub watermark: Watermark,
}

/// Generates one split's watermarks from its event times, batch after batch.
///
/// The state is the split's prefix maximum event time and the last watermark emitted; keep it
/// with the split's position so a resumed split emits as an uninterrupted one would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatermarkGenerator {
    time: InputTimeState,
    interval_ms: u64,
    emitted: Option<Watermark>,
}

impl WatermarkGenerator {
    /// A generator for a split that has seen nothing yet. `interval_ms` is the emission
    /// granularity in event time: a watermark is emitted when it advanced by at least that much
    /// over the last one emitted; 0 and 1 both mean on every advance. The first watermark is
    /// emitted as soon as the split has one (after its first non-null event time).
    pub fn new(out_of_orderness_ms: u64, interval_ms: u64) -> Self {
        Self::resume(InputTimeState::new(out_of_orderness_ms), interval_ms, None)
    }

    /// A generator that continues from a split's saved progress: its prefix maximum (with the
    /// out-of-orderness) and the last watermark it emitted.
    pub fn resume(time: InputTimeState, interval_ms: u64, emitted: Option<Watermark>) -> Self {
        Self {
            time,
            interval_ms,
            emitted,
        }
    }

    /// The split's prefix maximum and out-of-orderness after the rows seen so far.
    pub fn time_state(&self) -> InputTimeState {
        self.time
    }

    /// The last watermark emitted for the split; `None` before the first.
    pub fn emitted(&self) -> Option<Watermark> {
        self.emitted
    }

    /// Advances past the split's next batch of normalized event times without finding cut
    /// points: for a source whose watermark no operator reads, which hands each batch on whole.
    /// The prefix maximum takes the batch's largest time (one vectorized pass), and the
    /// watermark it implies is emitted when it is above the last one emitted; returns it then.
    pub fn advance(&mut self, event_times: &Int64Array) -> Option<Watermark> {
        let batch_max = arrow::compute::max(event_times)?;
        let max = self
            .time
            .max_event_time
            .map_or(batch_max, |m| m.0.max(batch_max));
        self.time.max_event_time = Some(EventTimeMs(max));
        let candidate = watermark_for(EventTimeMs(max), self.time.out_of_orderness_ms);
        if self.emitted.is_some_and(|e| e >= candidate) {
            return None;
        }
        self.emitted = Some(candidate);
        Some(candidate)
    }

    /// The cut points of the split's next batch of normalized event times (see
    /// [`event_times_ms`](super::event_times_ms)), in row order, and the state advanced past
    /// the batch.
    ///
    /// A cut follows row `i` when the watermark of the prefix maximum through row `i` is at
    /// least `interval` above the last emitted watermark (or is the split's first). A null
    /// event time never moves the watermark. An event time at or below the maximum seen does
    /// not either, and a watermark saturated at `i64::MIN` only moves once the maximum climbs
    /// out of the saturation. One pass over the values; the only allocation is the result.
    pub fn cuts(&mut self, event_times: &Int64Array) -> Vec<WatermarkCut> {
        let step = i128::from(self.interval_ms.max(1));
        let mut emitter = Emitter {
            cuts: Vec::new(),
            ooo: self.time.out_of_orderness_ms,
            step,
            threshold: self.emitted.map(|w| i128::from(w.0.0) + step),
        };
        let mut max = self.time.max_event_time.map(|m| m.0);
        let values = event_times.values();
        match event_times.nulls().filter(|n| n.null_count() > 0) {
            None => {
                // Chunk by chunk: a chunk whose largest time moves the watermark less than the
                // interval (the watermark is monotone in the time) holds no cut, so only its
                // maximum is kept; the others are scanned row by row. The branch-free maximum
                // vectorizes, and most chunks of nearly ordered times are of the first kind.
                for (chunk_index, chunk) in values.chunks(SCAN_CHUNK).enumerate() {
                    let chunk_max = chunk.iter().copied().fold(i64::MIN, i64::max);
                    if let Some(m) = max
                        && !emitter.may_cut(m, chunk_max)
                    {
                        max = Some(m.max(chunk_max));
                        continue;
                    }
                    let first = chunk_index * SCAN_CHUNK;
                    for (offset, &time) in chunk.iter().enumerate() {
                        if max.is_none_or(|m| time > m) {
                            max = Some(time);
                            emitter.on_new_max(first + offset, time);
                        }
                    }
                }
            }
            Some(nulls) => {
                for (row, &time) in values.iter().enumerate() {
                    if nulls.is_valid(row) && max.is_none_or(|m| time > m) {
                        max = Some(time);
                        emitter.on_new_max(row, time);
                    }
                }
            }
        }
        let cuts = emitter.cuts;
        self.time.max_event_time = max.map(EventTimeMs);
        if let Some(last) = cuts.last() {
            self.emitted = Some(last.watermark);
        }
        cuts
    }
}

/// The cuts of one batch as its new maxima come: a maximum is cut after when its watermark
/// reaches the threshold, which then moves one interval above it.
struct Emitter {
    cuts: Vec<WatermarkCut>,
    ooo: u64,
    step: i128,
    /// The lowest watermark that is emitted next; `None`: any (nothing emitted yet).
    threshold: Option<i128>,
}

impl Emitter {
    /// Row `row` raised the maximum to `time`.
    fn on_new_max(&mut self, row: usize, time: i64) {
        let candidate = watermark_for(EventTimeMs(time), self.ooo);
        if self
            .threshold
            .is_none_or(|t| i128::from(candidate.0.0) >= t)
        {
            self.threshold = Some(i128::from(candidate.0.0) + self.step);
            self.cuts.push(WatermarkCut {
                row_end: row + 1,
                watermark: candidate,
            });
        }
    }

    /// Whether rows whose largest time is `chunk_max`, after the maximum `max`, may hold a
    /// cut: only a new maximum whose watermark reaches the threshold is cut after.
    fn may_cut(&self, max: i64, chunk_max: i64) -> bool {
        chunk_max > max
            && self.threshold.is_none_or(|t| {
                i128::from(watermark_for(EventTimeMs(chunk_max), self.ooo).0.0) >= t
            })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn w(t: i64) -> Watermark {
        Watermark(EventTimeMs(t))
    }

    /// `(row_end, watermark)` pairs of one batch.
    fn cut_pairs(g: &mut WatermarkGenerator, times: Vec<Option<i64>>) -> Vec<(usize, i64)> {
        g.cuts(&Int64Array::from(times))
            .iter()
            .map(|c| (c.row_end, c.watermark.0.0))
            .collect()
    }

    #[test]
    fn advancing_without_cuts_takes_the_batch_maximum_and_skips_nulls() {
        let mut g = WatermarkGenerator::new(1000, 200);
        assert_eq!(g.advance(&Int64Array::from(vec![None, None])), None);
        assert_eq!(g.emitted(), None);
        let times = Int64Array::from(vec![Some(2100), None, Some(100), Some(2150)]);
        assert_eq!(
            g.advance(&times),
            Some(w(1149)),
            "not stepped by the interval"
        );
        assert_eq!(g.advance(&Int64Array::from(vec![Some(900)])), None);
        assert_eq!(g.time_state().max_event_time, Some(EventTimeMs(2150)));
        assert_eq!(
            g.advance(&Int64Array::from(vec![Some(2151)])),
            Some(w(1150))
        );
        // A resumed generator never goes back below what it emitted.
        let mut r = WatermarkGenerator::resume(g.time_state(), 200, Some(w(5000)));
        assert_eq!(r.advance(&Int64Array::from(vec![Some(3000)])), None);
        assert_eq!(r.emitted(), Some(w(5000)));
    }

    #[test]
    fn issue_example_cuts_after_the_first_row() {
        let mut g = WatermarkGenerator::new(1000, 200);
        assert_eq!(
            cut_pairs(&mut g, vec![Some(2100), Some(100)]),
            vec![(1, 1099)]
        );
        assert_eq!(g.emitted(), Some(w(1099)));
        assert_eq!(g.time_state().max_event_time, Some(EventTimeMs(2100)));
    }

    #[test]
    fn interval_zero_and_one_cut_on_every_advance() {
        let times = vec![Some(10), Some(11), Some(11), Some(12), Some(5), Some(13)];
        for interval in [0, 1] {
            let mut g = WatermarkGenerator::new(0, interval);
            assert_eq!(
                cut_pairs(&mut g, times.clone()),
                vec![(1, 9), (2, 10), (4, 11), (6, 12)],
                "interval {interval}"
            );
        }
    }

    #[test]
    fn interval_200_cuts_when_the_watermark_moved_by_at_least_200() {
        let mut g = WatermarkGenerator::new(0, 200);
        let times = [0, 100, 199, 200, 399, 400, 450].map(Some).to_vec();
        assert_eq!(cut_pairs(&mut g, times), vec![(1, -1), (4, 199), (6, 399)]);
        // The state carries over: 598 is 199 above 399, 600 is 200 above.
        assert_eq!(cut_pairs(&mut g, vec![Some(599)]), vec![]);
        assert_eq!(
            cut_pairs(&mut g, vec![Some(600), Some(601)]),
            vec![(1, 599)]
        );
    }

    #[test]
    fn nulls_never_move_the_watermark() {
        let mut g = WatermarkGenerator::new(0, 1);
        assert_eq!(cut_pairs(&mut g, vec![None, None]), vec![]);
        assert_eq!(g.emitted(), None);
        assert_eq!(
            cut_pairs(&mut g, vec![None, None, Some(5), None, Some(7)]),
            vec![(3, 4), (5, 6)]
        );
        assert_eq!(cut_pairs(&mut g, vec![]), vec![]);
    }

    #[test]
    fn saturation_at_i64_min_emits_once_until_the_maximum_climbs_out() {
        let mut g = WatermarkGenerator::new(1000, 1);
        let times = vec![Some(i64::MIN), Some(i64::MIN + 5), Some(i64::MIN + 1001)];
        assert_eq!(cut_pairs(&mut g, times), vec![(1, i64::MIN)]);
        assert_eq!(
            cut_pairs(&mut g, vec![Some(i64::MIN + 1002)]),
            vec![(1, i64::MIN + 1)]
        );
        let mut g = WatermarkGenerator::new(u64::MAX, 0);
        assert_eq!(
            cut_pairs(&mut g, vec![Some(0), Some(i64::MAX)]),
            vec![(1, i64::MIN)]
        );
    }

    #[test]
    fn extreme_event_times_and_intervals_do_not_overflow() {
        let mut g = WatermarkGenerator::new(0, u64::MAX);
        assert_eq!(
            cut_pairs(&mut g, vec![Some(i64::MIN), Some(i64::MAX)]),
            vec![(1, i64::MIN)]
        );
        let mut g = WatermarkGenerator::new(0, 1);
        assert_eq!(
            cut_pairs(&mut g, vec![Some(i64::MAX - 1), Some(i64::MAX)]),
            vec![(1, i64::MAX - 2), (2, i64::MAX - 1)]
        );
    }

    #[test]
    fn resume_continues_from_saved_progress() {
        let mut whole = WatermarkGenerator::new(10, 50);
        let first = cut_pairs(&mut whole, vec![Some(100), Some(120), Some(170)]);
        assert_eq!(first, vec![(1, 89), (3, 159)]);
        let mut resumed = WatermarkGenerator::resume(whole.time_state(), 50, whole.emitted());
        assert_eq!(resumed, whole);
        assert_eq!(
            cut_pairs(&mut resumed, vec![Some(219), Some(220)]),
            vec![(2, 209)]
        );
    }

    /// `(global row end, watermark)` of `times` cut into batches of `batch` rows.
    fn global_cuts(
        times: &[Option<i64>],
        ooo: u64,
        interval: u64,
        batch: usize,
    ) -> Vec<(usize, i64)> {
        let mut g = WatermarkGenerator::new(ooo, interval);
        let mut out = Vec::new();
        let mut offset = 0;
        for chunk in times.chunks(batch.max(1)) {
            for c in g.cuts(&Int64Array::from(chunk.to_vec())) {
                out.push((offset + c.row_end, c.watermark.0.0));
            }
            offset += chunk.len();
        }
        out
    }

    /// Reference: a plain scan that recomputes the prefix maximum for every row.
    fn reference_cuts(times: &[Option<i64>], ooo: u64, interval: u64) -> Vec<(usize, i64)> {
        let mut out: Vec<(usize, i64)> = Vec::new();
        for i in 0..times.len() {
            let Some(max) = times[..=i].iter().flatten().max() else {
                continue;
            };
            let candidate = watermark_for(EventTimeMs(*max), ooo).0.0;
            let due = match out.last() {
                None => true,
                Some(&(_, last)) => {
                    i128::from(candidate) - i128::from(last) >= i128::from(interval.max(1))
                }
            };
            if due {
                out.push((i + 1, candidate));
            }
        }
        out
    }

    fn assert_cut_independent(times: &[Option<i64>], ooo: u64, interval: u64) {
        let whole = global_cuts(times, ooo, interval, times.len());
        for batch in [1, 7, 1000, 65_536] {
            assert_eq!(
                global_cuts(times, ooo, interval, batch),
                whole,
                "batches of {batch}"
            );
        }
    }

    #[test]
    fn large_input_is_batch_boundary_independent() {
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        let times: Vec<Option<i64>> = (0..150_000_i64)
            .map(|i| {
                seed = seed
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let jitter = (seed >> 33) as i64 % 3_000;
                (!seed.is_multiple_of(97)).then_some(i * 10 - jitter - 1_000_000)
            })
            .collect();
        assert_cut_independent(&times, 1_500, 200);
        assert!(global_cuts(&times, 1_500, 200, 65_536).len() > 1_000);
    }

    proptest! {
        #[test]
        fn cuts_are_batch_boundary_independent(
            times in proptest::collection::vec(
                proptest::option::weighted(0.9, -5_000_i64..5_000), 0..2_000),
            ooo in prop_oneof![Just(0_u64), 0_u64..3_000, Just(u64::MAX)],
            interval in prop_oneof![Just(0_u64), Just(1_u64), Just(200_u64), 0_u64..5_000],
        ) {
            assert_cut_independent(&times, ooo, interval);
        }

        /// Long, mostly ascending inputs: chunks that reach the next cut and chunks that do
        /// not, each batch boundary anywhere.
        #[test]
        fn long_nearly_ordered_inputs_match_the_reference(
            steps in proptest::collection::vec(
                proptest::option::weighted(0.97, prop_oneof![4 => 0_i64..20, 1 => -3_000_i64..0]),
                0..1_500),
            ooo in 0_u64..2_000,
            interval in prop_oneof![Just(0_u64), Just(200_u64), 0_u64..3_000],
            batch in 1_usize..400,
        ) {
            let mut at = 0_i64;
            let times: Vec<Option<i64>> = steps
                .iter()
                .map(|s| s.map(|d| { at += d; at }))
                .collect();
            prop_assert_eq!(
                global_cuts(&times, ooo, interval, batch),
                reference_cuts(&times, ooo, interval)
            );
        }

        #[test]
        fn cuts_match_the_reference_at_any_magnitude(
            times in proptest::collection::vec(
                proptest::option::weighted(0.9, prop_oneof![
                    any::<i64>(), -5_000_i64..5_000, Just(i64::MIN), Just(i64::MAX)]), 0..200),
            ooo in any::<u64>(),
            interval in prop_oneof![Just(0_u64), Just(1_u64), 0_u64..3_000, any::<u64>()],
        ) {
            prop_assert_eq!(
                global_cuts(&times, ooo, interval, 3),
                reference_cuts(&times, ooo, interval)
            );
        }
    }
}
