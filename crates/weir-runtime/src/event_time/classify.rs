//! Row classification against the watermark in force before each row (docs/event-time.md).
//!
//! The watermark in force before row `i` of an input is derived from the largest event time of
//! all rows before it on that input (a running prefix maximum) through
//! [`weir_api::watermark_for`]. It depends only on the rows and their order, never on where the
//! input was cut into batches, so a replay that fetches differently classifies identically.

use arrow::array::{Array, BooleanArray, Int64Array};
use arrow::buffer::BooleanBuffer;
use weir_api::{EventTimeMs, Watermark, watermark_for};

/// The event-time progress of one input: what classification needs to know from the rows
/// before a batch. Checkpoint it with the input's position so a replay resumes identically.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputTimeState {
    /// The largest non-null event time seen so far on the input; `None` before the first one.
    pub max_event_time: Option<EventTimeMs>,
    /// How far out of order (in ms) the input may deliver events.
    pub out_of_orderness_ms: u64,
}

impl InputTimeState {
    /// The state of an input that has seen no event yet.
    pub fn new(out_of_orderness_ms: u64) -> Self {
        Self {
            max_event_time: None,
            out_of_orderness_ms,
        }
    }

    /// The watermark in force after the rows seen so far; `None` before the first event time,
    /// when no row can be late.
    pub fn watermark(&self) -> Option<Watermark> {
        self.max_event_time
            .map(|max| watermark_for(max, self.out_of_orderness_ms))
    }
}

/// The classification of one batch's rows. The three masks are disjoint, cover every row, have
/// no nulls, and can be passed to arrow's `filter` / `filter_record_batch` kernels.
#[derive(Debug, Clone, PartialEq)]
pub struct Classification {
    /// Per row, the watermark in force before it (from the rows before it on the input); null
    /// where no event time had been seen yet.
    pub watermark_before: Int64Array,
    /// Rows whose event time is `<=` the watermark in force before them: hand them to the late
    /// policy at once.
    pub late: BooleanArray,
    /// Rows with an event time after the watermark in force before them.
    pub on_time: BooleanArray,
    /// Rows with a null event time: never held; late side output or dropped and counted.
    pub null_time: BooleanArray,
    /// The input's state after the batch: pass it to the next batch's classification.
    pub state_after: InputTimeState,
}

impl Classification {
    /// The watermark in force after the batch; `None` if the input has seen no event time yet.
    pub fn watermark_after(&self) -> Option<Watermark> {
        self.state_after.watermark()
    }
}

/// Classifies each row of a batch of normalized event times (see
/// [`event_times_ms`](super::event_times_ms)) against the watermark in force before it, given the
/// input's state before the batch.
///
/// A row is late when its event time is `<=` the watermark derived from the rows before it:
/// in a batch `[2100, 100]` with an out-of-orderness of 1000 the watermark before row 1 is 1099,
/// so 100 is late at once. A row never judges itself (the watermark before it excludes it), so
/// the first event of an input is never late. One pass over the values, no per-row allocation.
pub fn classify_rows(event_times: &Int64Array, before: InputTimeState) -> Classification {
    let len = event_times.len();
    let ooo = before.out_of_orderness_ms;
    let mut max = before.max_event_time.map(|m| m.0);
    let mut watermark = before.max_event_time.map(|m| watermark_for(m, ooo).0.0);

    let mut watermark_before = Vec::with_capacity(len);
    let mut late = Vec::with_capacity(len);
    let mut on_time = Vec::with_capacity(len);
    for (row, &time) in event_times.values().iter().enumerate() {
        watermark_before.push(watermark);
        if event_times.is_null(row) {
            late.push(false);
            on_time.push(false);
            continue;
        }
        let is_late = watermark.is_some_and(|w| time <= w);
        late.push(is_late);
        on_time.push(!is_late);
        if max.is_none_or(|m| time > m) {
            max = Some(time);
            watermark = Some(watermark_for(EventTimeMs(time), ooo).0.0);
        }
    }

    let null_time = match event_times.nulls() {
        Some(nulls) => BooleanArray::new(!nulls.inner(), None),
        None => BooleanArray::new(BooleanBuffer::new_unset(len), None),
    };
    Classification {
        watermark_before: Int64Array::from(watermark_before),
        late: BooleanArray::from(late),
        on_time: BooleanArray::from(on_time),
        null_time,
        state_after: InputTimeState {
            max_event_time: max.map(EventTimeMs),
            out_of_orderness_ms: ooo,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::ArrayRef;
    use arrow::compute::filter;
    use proptest::prelude::*;

    use super::*;

    fn bools(mask: &BooleanArray) -> Vec<bool> {
        mask.iter().map(|b| b.unwrap_or(false)).collect()
    }

    #[test]
    fn issue_example_late_at_once_within_one_batch() {
        let times = Int64Array::from(vec![2100, 100, 1100, 1099]);
        let c = classify_rows(&times, InputTimeState::new(1000));
        assert_eq!(bools(&c.late), vec![false, true, false, true]);
        assert_eq!(bools(&c.on_time), vec![true, false, true, false]);
        assert_eq!(
            c.watermark_before.iter().collect::<Vec<_>>(),
            vec![None, Some(1099), Some(1099), Some(1099)]
        );
        assert_eq!(c.watermark_after(), Some(Watermark(EventTimeMs(1099))));
        let column: ArrayRef = Arc::new(times);
        let late = filter(&column, &c.late).expect("filter late");
        assert_eq!(late.len(), 2);
    }

    #[test]
    fn nulls_are_their_own_class_and_do_not_move_the_watermark() {
        let times = Int64Array::from(vec![None, Some(10), None, Some(5)]);
        let c = classify_rows(&times, InputTimeState::new(0));
        assert_eq!(bools(&c.null_time), vec![true, false, true, false]);
        assert_eq!(bools(&c.late), vec![false, false, false, true]);
        assert_eq!(bools(&c.on_time), vec![false, true, false, false]);
        assert_eq!(c.state_after.max_event_time, Some(EventTimeMs(10)));
    }

    #[test]
    fn state_before_the_batch_is_honoured_and_min_time_is_not_late_on_a_fresh_input() {
        let fresh = classify_rows(&Int64Array::from(vec![i64::MIN]), InputTimeState::new(0));
        assert_eq!(bools(&fresh.on_time), vec![true]);
        let before = InputTimeState {
            max_event_time: Some(EventTimeMs(500)),
            out_of_orderness_ms: 100,
        };
        let c = classify_rows(&Int64Array::from(vec![399, 400, 10]), before);
        assert_eq!(bools(&c.late), vec![true, false, true]);
        assert_eq!(c.state_after, before);
    }

    /// Per-row results of a whole input, concatenated over its batches.
    #[derive(Debug, PartialEq, Default)]
    struct Concatenated {
        watermark_before: Vec<Option<i64>>,
        late: Vec<bool>,
        on_time: Vec<bool>,
        null_time: Vec<bool>,
        state_after: Option<InputTimeState>,
    }

    /// Classifies `times` cut into batches of `cut` rows, concatenating the per-row results.
    fn classify_cut(times: &[Option<i64>], ooo: u64, cut: usize) -> Concatenated {
        let mut state = InputTimeState::new(ooo);
        let mut out = Concatenated::default();
        for chunk in times.chunks(cut.max(1)) {
            let c = classify_rows(&Int64Array::from(chunk.to_vec()), state);
            out.watermark_before.extend(c.watermark_before.iter());
            out.late.extend(bools(&c.late));
            out.on_time.extend(bools(&c.on_time));
            out.null_time.extend(bools(&c.null_time));
            state = c.state_after;
        }
        out.state_after = Some(state);
        out
    }

    fn assert_cut_independent(times: &[Option<i64>], ooo: u64) {
        let whole = classify_cut(times, ooo, times.len());
        for cut in [1, 7, 1000, 65_536] {
            assert_eq!(classify_cut(times, ooo, cut), whole, "cut {cut}");
        }
    }

    #[test]
    fn large_input_is_batch_boundary_independent() {
        // A deterministic out-of-order stream long enough to span several 65,536-row batches.
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
        assert_cut_independent(&times, 1_500);
    }

    proptest! {
        #[test]
        fn classification_is_batch_boundary_independent(
            times in proptest::collection::vec(
                proptest::option::weighted(0.9, -5_000_i64..5_000), 0..2_000),
            ooo in prop_oneof![Just(0_u64), 0_u64..3_000, Just(u64::MAX)],
        ) {
            assert_cut_independent(&times, ooo);
        }

        #[test]
        fn late_means_at_or_below_the_prefix_maximum_watermark(
            times in proptest::collection::vec(
                proptest::option::weighted(0.9, i64::MIN..i64::MAX), 0..300),
            ooo in any::<u64>(),
        ) {
            // Reference: a plain scan that recomputes the prefix maximum for every row.
            let c = classify_rows(&Int64Array::from(times.clone()), InputTimeState::new(ooo));
            for (i, t) in times.iter().enumerate() {
                let prefix_max = times[..i].iter().flatten().max().copied();
                let wm = prefix_max.map(|m| watermark_for(EventTimeMs(m), ooo).0.0);
                prop_assert_eq!(c.watermark_before.iter().nth(i).flatten(), wm);
                let expect_late = matches!((t, wm), (Some(t), Some(w)) if *t <= w);
                prop_assert_eq!(c.late.value(i), expect_late);
                prop_assert_eq!(c.on_time.value(i), t.is_some() && !expect_late);
                prop_assert_eq!(c.null_time.value(i), t.is_none());
            }
        }
    }
}
