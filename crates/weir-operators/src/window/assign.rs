//! Window assigners: which windows `[start, end)` contain an event time.
//!
//! Bounds are computed with `rem_euclid`, so negative event times floor like positive ones
//! (`-1` is in the tumbling window `[-10, 0)` of size 10), and a window's end never wraps: an
//! event time too close to `i64::MAX` for its window is an error naming the row.

use arrow::array::{Array, Int64Array};
use weir_api::{Error, RecordLocation, Result};

/// The most windows one row may belong to (sliding and cumulating windows), so a typo like a
/// 1 ms slide on a day-long window is refused instead of exhausting memory.
pub const MAX_WINDOWS_PER_ROW: i64 = 10_000;

/// How a window operator cuts event time into windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowKind {
    /// Fixed, non-overlapping windows of `size` ms aligned to the epoch.
    Tumble {
        /// Window length in ms (> 0).
        size: i64,
    },
    /// Windows of `size` ms starting every `slide` ms; any pair, also non-divisible ones.
    Hop {
        /// Window length in ms (> 0).
        size: i64,
        /// Distance between window starts in ms (> 0).
        slide: i64,
    },
    /// Flink's CUMULATE: within each `max_size` window aligned to the epoch, the windows
    /// `[base, base + step)`, `[base, base + 2 step)`, ... `[base, base + max_size)`.
    Cumulate {
        /// Growth of the window in ms (> 0, divides `max_size`).
        step: i64,
        /// Size of the outer window in ms.
        max_size: i64,
    },
    /// Per key, a row opens `[ts, ts + gap)` and merges with every session it touches.
    Session {
        /// Inactivity gap in ms (> 0).
        gap: i64,
    },
}

impl WindowKind {
    /// Checks the sizes: positive, and for cumulate a step that divides the maximum size.
    ///
    /// # Errors
    ///
    /// A message naming the parameter that is wrong.
    pub fn validate(&self) -> std::result::Result<(), String> {
        let positive = |name: &str, v: i64| {
            if v > 0 {
                Ok(())
            } else {
                Err(format!("{name} must be greater than 0, got {v} ms"))
            }
        };
        match *self {
            WindowKind::Tumble { size } => positive("size", size),
            WindowKind::Hop { size, slide } => {
                positive("size", size)?;
                positive("slide", slide)?;
                let per_row = size.div_euclid(slide) + 1;
                if per_row > MAX_WINDOWS_PER_ROW {
                    return Err(format!(
                        "size {size} ms / slide {slide} ms puts each row in up to {per_row} \
                         windows; at most {MAX_WINDOWS_PER_ROW} are supported (use a larger \
                         slide)"
                    ));
                }
                Ok(())
            }
            WindowKind::Cumulate { step, max_size } => {
                positive("step", step)?;
                positive("max_size", max_size)?;
                if max_size % step != 0 {
                    return Err(format!(
                        "max_size ({max_size} ms) must be a multiple of step ({step} ms)"
                    ));
                }
                if max_size / step > MAX_WINDOWS_PER_ROW {
                    return Err(format!(
                        "max_size {max_size} ms / step {step} ms gives {} windows per row; at \
                         most {MAX_WINDOWS_PER_ROW} are supported (use a larger step)",
                        max_size / step
                    ));
                }
                Ok(())
            }
            WindowKind::Session { gap } => positive("gap", gap),
        }
    }

    /// The most windows one event time can belong to (1 for tumble and session).
    pub fn max_windows_per_row(&self) -> usize {
        let n = match *self {
            WindowKind::Tumble { .. } | WindowKind::Session { .. } => 1,
            WindowKind::Hop { size, slide } => size.div_euclid(slide) + 1,
            WindowKind::Cumulate { step, max_size } => max_size / step,
        };
        usize::try_from(n).unwrap_or(usize::MAX)
    }
}

/// The windows of a batch's rows, one entry per (row, window) pair, rows in ascending order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Assigned {
    /// Row index in the batch.
    pub row: Vec<u32>,
    /// Window start (inclusive), ms.
    pub start: Vec<i64>,
    /// Window end (exclusive), ms.
    pub end: Vec<i64>,
}

impl Assigned {
    fn push(&mut self, row: usize, start: i64, end: i64) {
        // Batches are far below u32::MAX rows (the caller checks).
        self.row.push(row as u32);
        self.start.push(start);
        self.end.push(end);
    }

    /// Number of (row, window) pairs.
    pub fn len(&self) -> usize {
        self.row.len()
    }

    /// Whether no row got a window.
    pub fn is_empty(&self) -> bool {
        self.row.is_empty()
    }
}

fn overflow(field: &str, row: usize, ts: i64) -> Error {
    Error::BadRecord {
        location: RecordLocation {
            input: format!("event-time column, row {row}"),
            line: None,
            column: Some(field.to_owned()),
        },
        message: format!(
            "event time {ts} ms in row {row} of field `{field}` is too close to the end of \
             time: its window end does not fit in 64-bit milliseconds"
        ),
    }
}

/// Assigns every non-null event time to its windows (tumble, hop, cumulate). Null rows get no
/// window; the caller hands them to the late policy. Session windows are assigned per key by
/// the session operator, not here.
///
/// # Errors
///
/// [`Error::BadRecord`] naming `field` and the row when a window end overflows `i64`, and
/// [`Error::Internal`] if called for session windows or with more than `u32::MAX` rows.
pub fn assign_windows(kind: WindowKind, times: &Int64Array, field: &str) -> Result<Assigned> {
    if u32::try_from(times.len()).is_err() {
        return Err(Error::Internal(format!(
            "a batch of {} rows is too large to window",
            times.len()
        )));
    }
    let mut out = Assigned::default();
    let capacity = times.len() * kind.max_windows_per_row().min(64);
    out.row.reserve(capacity);
    out.start.reserve(capacity);
    out.end.reserve(capacity);
    let valid = |row: usize| times.is_valid(row);
    let values = times.values();
    match kind {
        WindowKind::Tumble { size } => {
            for (row, &ts) in values.iter().enumerate() {
                if !valid(row) {
                    continue;
                }
                let start = ts - ts.rem_euclid(size);
                let end = start
                    .checked_add(size)
                    .ok_or_else(|| overflow(field, row, ts))?;
                out.push(row, start, end);
            }
        }
        WindowKind::Hop { size, slide } => {
            for (row, &ts) in values.iter().enumerate() {
                if !valid(row) {
                    continue;
                }
                // Every start s = k * slide with s <= ts < s + size, latest first.
                let mut start = ts - ts.rem_euclid(slide);
                let lowest = ts.saturating_sub(size);
                while start > lowest {
                    let end = start
                        .checked_add(size)
                        .ok_or_else(|| overflow(field, row, ts))?;
                    out.push(row, start, end);
                    match start.checked_sub(slide) {
                        Some(s) => start = s,
                        None => break,
                    }
                }
            }
        }
        WindowKind::Cumulate { step, max_size } => {
            for (row, &ts) in values.iter().enumerate() {
                if !valid(row) {
                    continue;
                }
                let base = ts - ts.rem_euclid(max_size);
                let last = base
                    .checked_add(max_size)
                    .ok_or_else(|| overflow(field, row, ts))?;
                // The smallest step end after ts; every later step end up to the outer end.
                let mut end = base + ((ts - base) / step + 1) * step;
                while end <= last {
                    out.push(row, base, end);
                    end += step;
                }
            }
        }
        WindowKind::Session { .. } => {
            return Err(Error::Internal(
                "session windows are assigned per key by the session operator".into(),
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn windows(kind: WindowKind, ts: i64) -> Vec<(i64, i64)> {
        let a = assign_windows(kind, &Int64Array::from(vec![ts]), "ts").unwrap();
        let mut w: Vec<_> = a.start.into_iter().zip(a.end).collect();
        w.sort_unstable();
        w
    }

    /// Every window `[s, s + size)` with `s` a multiple of `slide` containing `ts`, by brute
    /// force over a range of starts.
    fn hop_reference(size: i64, slide: i64, ts: i64) -> Vec<(i64, i64)> {
        let first = (ts - size - 2 * slide).div_euclid(slide) * slide;
        (0..)
            .map(|k| first + k * slide)
            .take_while(|s| *s <= ts)
            .filter(|s| *s <= ts && ts < s + size)
            .map(|s| (s, s + size))
            .collect()
    }

    #[test]
    fn tumble_floors_negative_times_and_boundaries() {
        let k = WindowKind::Tumble { size: 10 };
        assert_eq!(windows(k, 0), vec![(0, 10)]);
        assert_eq!(windows(k, 9), vec![(0, 10)]);
        assert_eq!(windows(k, 10), vec![(10, 20)]);
        assert_eq!(windows(k, -1), vec![(-10, 0)]);
        assert_eq!(windows(k, -10), vec![(-10, 0)]);
        assert_eq!(windows(k, -11), vec![(-20, -10)]);
    }

    #[test]
    fn hop_non_divisible_enumerates_every_start() {
        let k = WindowKind::Hop { size: 5, slide: 2 };
        assert_eq!(windows(k, 4), vec![(0, 5), (2, 7), (4, 9)]);
        assert_eq!(windows(k, 5), vec![(2, 7), (4, 9)]);
        assert_eq!(windows(k, -1), vec![(-4, 1), (-2, 3)]);
        for size in 1..12 {
            for slide in 1..12 {
                for ts in -30..30 {
                    let k = WindowKind::Hop { size, slide };
                    assert_eq!(
                        windows(k, ts),
                        hop_reference(size, slide, ts),
                        "{k:?} ts {ts}"
                    );
                }
            }
        }
    }

    #[test]
    fn cumulate_emits_each_growing_window() {
        let k = WindowKind::Cumulate {
            step: 2,
            max_size: 6,
        };
        assert_eq!(windows(k, 0), vec![(0, 2), (0, 4), (0, 6)]);
        assert_eq!(windows(k, 3), vec![(0, 4), (0, 6)]);
        assert_eq!(windows(k, 5), vec![(0, 6)]);
        assert_eq!(windows(k, 6), vec![(6, 8), (6, 10), (6, 12)]);
        assert_eq!(windows(k, -1), vec![(-6, 0)]);
    }

    #[test]
    fn nulls_get_no_window_and_overflow_names_the_row() {
        let times = Int64Array::from(vec![Some(1), None, Some(12)]);
        let a = assign_windows(WindowKind::Tumble { size: 10 }, &times, "ts").unwrap();
        assert_eq!(a.row, vec![0, 2]);
        let times = Int64Array::from(vec![0, i64::MAX - 1]);
        let err = assign_windows(WindowKind::Tumble { size: 10 }, &times, "ts").unwrap_err();
        assert!(err.to_string().contains("row 1"), "{err}");
        assert!(err.to_string().contains("`ts`"), "{err}");
        let err = assign_windows(WindowKind::Session { gap: 5 }, &times, "ts").unwrap_err();
        assert!(matches!(err, Error::Internal(_)));
    }

    #[test]
    fn validation_names_the_parameter() {
        assert!(
            WindowKind::Tumble { size: 0 }
                .validate()
                .unwrap_err()
                .contains("size")
        );
        assert!(
            WindowKind::Cumulate {
                step: 3,
                max_size: 10
            }
            .validate()
            .unwrap_err()
            .contains("multiple")
        );
        assert!(WindowKind::Hop { size: 5, slide: 2 }.validate().is_ok());
        let err = WindowKind::Hop {
            size: 86_400_000,
            slide: 1,
        }
        .validate()
        .unwrap_err();
        assert!(err.contains("larger slide"), "{err}");
    }
}
