//! The one bounded-out-of-orderness watermark formula of the code base.
//!
//! Every place that turns "the largest event time seen" into a watermark calls
//! [`watermark_for`]; the formula appears nowhere else, so its boundary behaviour (the `- 1`
//! and the saturation) cannot drift between a source, an operator and a restore path.

use crate::{EventTimeMs, Watermark};

/// The watermark implied by the largest event time seen so far on an input that may deliver
/// events up to `out_of_orderness_ms` milliseconds out of order:
/// `max_event_time - out_of_orderness_ms - 1`, saturating at `i64::MIN` (never wrapping).
///
/// A watermark `w` means "no event with time `<= w` will come": with `max_event_time = 2100`
/// and an out-of-orderness of 1000 the watermark is 1099, so an event at 1100 is still on time
/// and one at 1099 is late. An out-of-orderness of 0 gives `max_event_time - 1`: an event equal
/// to the maximum seen is on time, any earlier one is late.
///
/// The result is the watermark *candidate*; keeping watermarks monotone (never going back) is
/// the caller's job, since it depends on what was emitted before.
pub fn watermark_for(max_event_time: EventTimeMs, out_of_orderness_ms: u64) -> Watermark {
    // i128 holds every i64 minus every u64 minus 1 exactly; clamp back into the i64 range.
    let exact = i128::from(max_event_time.0) - i128::from(out_of_orderness_ms) - 1;
    let saturated = i64::try_from(exact).unwrap_or(i64::MIN);
    Watermark(EventTimeMs(saturated))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wm(max: i64, ooo: u64) -> i64 {
        watermark_for(EventTimeMs(max), ooo).0.0
    }

    #[test]
    fn subtracts_out_of_orderness_and_one() {
        assert_eq!(wm(2100, 1000), 1099);
        assert_eq!(wm(0, 0), -1);
        assert_eq!(wm(0, 1000), -1001);
        assert_eq!(wm(-5, 10), -16);
    }

    #[test]
    fn saturates_at_i64_min() {
        assert_eq!(wm(i64::MIN, 0), i64::MIN);
        assert_eq!(wm(i64::MIN, 1000), i64::MIN);
        // Exactly reaching i64::MIN and one below it.
        assert_eq!(wm(i64::MIN + 1000, 999), i64::MIN);
        assert_eq!(wm(i64::MIN + 1000, 1000), i64::MIN);
        assert_eq!(wm(i64::MIN + 1001, 1000), i64::MIN);
        assert_eq!(wm(i64::MIN + 1002, 1000), i64::MIN + 1);
    }

    #[test]
    fn out_of_orderness_larger_than_i64_max_saturates() {
        assert_eq!(wm(0, u64::MAX), i64::MIN);
        assert_eq!(wm(i64::MAX, u64::MAX), i64::MIN);
        assert_eq!(wm(i64::MAX, i64::MAX as u64 + 1), -2);
        assert_eq!(wm(i64::MAX, i64::MAX as u64), -1);
    }

    #[test]
    fn max_event_time_does_not_overflow() {
        assert_eq!(wm(i64::MAX, 0), i64::MAX - 1);
        assert_eq!(wm(i64::MAX, 1), i64::MAX - 2);
    }
}
