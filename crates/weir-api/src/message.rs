//! What flows through a channel, in order: data, watermarks, barriers and end-of-input.

use crate::ids::{Epoch, EventTimeMs};
use arrow::record_batch::RecordBatch;

/// A watermark `w`: no event with time `<= w` will follow on this channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Watermark(pub EventTimeMs);

impl Watermark {
    /// The watermark sent when a bounded input ends: every window may fire.
    pub const END: Watermark = Watermark(EventTimeMs::MAX);

    /// No watermark yet: nothing is behind it. The split watermark of rows that carry none.
    pub const NONE: Watermark = Watermark(EventTimeMs::MIN);
}

/// A checkpoint barrier: everything before it on a channel belongs to `epoch` or earlier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Barrier {
    /// The epoch the barrier closes.
    pub epoch: Epoch,
    /// The last epoch of a bounded job: every input has ended before it. Operators flush
    /// (`on_end_of_input` runs before `on_barrier`), so all their output belongs to this epoch;
    /// only end-of-input follows the barrier.
    pub is_final: bool,
}

impl Barrier {
    /// The barrier of a periodic (not final) epoch.
    pub fn new(epoch: Epoch) -> Self {
        Barrier {
            epoch,
            is_final: false,
        }
    }
}

/// Where the watermark advances inside a batch: `(row, watermark)` pairs, rows and watermarks
/// strictly increasing, each row in `0..=num_rows`.
///
/// A batch with marks `[(r1, w1), (r2, w2)]` means exactly what its rows `0..r1`, then
/// watermark `w1`, then rows `r1..r2`, then `w2`, then the rest would mean: a row is judged
/// against the last watermark before it. Marks let a source hand on whole batches where the
/// watermark advances every few hundred rows, instead of cutting them into slivers, while
/// which rows are late stays exactly what it is when each advance travels on its own.
///
/// A source whose rows are judged against their own split's watermark (`lateness: split`)
/// also marks where that split watermark moves ([`WatermarkMarks::push_split`]): `(row, w)`
/// means the rows from `row` on were read behind split watermark `w`, as a
/// [`StreamMessage::SplitWatermark`] before them would say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatermarkMarks {
    marks: Vec<(usize, Watermark)>,
    splits: Vec<(usize, Watermark)>,
}

impl WatermarkMarks {
    /// No marks: the watermark does not move inside the batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// The watermark advances to `watermark` before row `row`. A mark at (or, wrongly, before)
    /// the row of the last one replaces its watermark; a watermark not above the last one is no
    /// advance and is ignored.
    pub fn push(&mut self, row: usize, watermark: Watermark) {
        push_increasing(&mut self.marks, row, watermark);
    }

    /// The rows from `row` on were read behind split watermark `watermark`; the same rules as
    /// [`WatermarkMarks::push`].
    pub fn push_split(&mut self, row: usize, watermark: Watermark) {
        push_increasing(&mut self.splits, row, watermark);
    }

    /// Whether neither the watermark nor the split watermark moves inside the batch.
    pub fn is_empty(&self) -> bool {
        self.marks.is_empty() && self.splits.is_empty()
    }

    /// The split watermark advances, in order: `(row, watermark)`.
    pub fn splits(&self) -> impl ExactSizeIterator<Item = (usize, Watermark)> + '_ {
        self.splits.iter().copied()
    }

    /// The split watermark after the batch, when it moved inside it.
    pub fn last_split(&self) -> Option<Watermark> {
        self.splits.last().map(|(_, w)| *w)
    }

    /// The number of advances.
    pub fn len(&self) -> usize {
        self.marks.len()
    }

    /// The advances, in order: `(row, watermark)`.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (usize, Watermark)> + '_ {
        self.marks.iter().copied()
    }

    /// The watermark after the batch, when it advanced inside it.
    pub fn last(&self) -> Option<Watermark> {
        self.marks.last().map(|(_, w)| *w)
    }

    /// The same advances over the rows that remain after keeping some: `kept_before(r)` is how
    /// many rows before row `r` were kept. Advances that land on one row merge into the last.
    pub fn remap(&self, mut kept_before: impl FnMut(usize) -> usize) -> WatermarkMarks {
        let mut out = WatermarkMarks::new();
        for (row, w) in self.iter() {
            out.push(kept_before(row), w);
        }
        for (row, w) in self.splits() {
            out.push_split(kept_before(row), w);
        }
        out
    }

    /// Every advance in row order, `(row, is_split, watermark)`; at one row the watermark's
    /// before the split watermark's.
    pub fn in_row_order(&self) -> Vec<(usize, bool, Watermark)> {
        let mut all: Vec<(usize, bool, Watermark)> = self
            .iter()
            .map(|(row, w)| (row, false, w))
            .chain(self.splits().map(|(row, w)| (row, true, w)))
            .collect();
        all.sort_by_key(|(row, split, _)| (*row, *split));
        all
    }

    /// The batch cut at its marks, in order: runs of rows (zero-copy slices, never empty) and
    /// the watermarks between them; what the batch means, one piece at a time.
    pub fn pieces(&self, batch: &RecordBatch) -> Vec<Piece> {
        let mut pieces = Vec::with_capacity(2 * (self.marks.len() + self.splits.len()) + 1);
        let rows = batch.num_rows();
        let mut start = 0;
        for (row, split, w) in self.in_row_order() {
            let row = row.clamp(start, rows);
            if row > start {
                pieces.push(Piece::Rows(batch.slice(start, row - start)));
            }
            pieces.push(if split {
                Piece::SplitWatermark(w)
            } else {
                Piece::Watermark(w)
            });
            start = row;
        }
        if start < rows {
            pieces.push(Piece::Rows(batch.slice(start, rows - start)));
        }
        pieces
    }
}

/// One piece of a batch with [`WatermarkMarks`]: see [`WatermarkMarks::pieces`].
#[derive(Debug, Clone)]
pub enum Piece {
    /// Consecutive rows.
    Rows(RecordBatch),
    /// The watermark advanced.
    Watermark(Watermark),
    /// The rows that follow were read behind this split watermark.
    SplitWatermark(Watermark),
}

/// Appends `(row, watermark)` to increasing marks: a mark at (or, wrongly, before) the row of the
/// last one replaces its watermark; a watermark not above the last one is ignored.
fn push_increasing(marks: &mut Vec<(usize, Watermark)>, row: usize, watermark: Watermark) {
    match marks.last_mut() {
        Some((_, last)) if watermark <= *last => {}
        Some((last_row, last)) if row <= *last_row => *last = watermark,
        _ => marks.push((row, watermark)),
    }
}

/// One message on a channel. A channel delivers its messages in the order they were sent.
#[derive(Debug, Clone)]
pub enum StreamMessage {
    /// A batch of rows.
    Data(RecordBatch),
    /// A batch of rows inside which the sender's watermark advances (never empty marks).
    MarkedData(RecordBatch, WatermarkMarks),
    /// The sender's watermark advanced.
    Watermark(Watermark),
    /// The rows that follow on this channel, until the next such message, were read from their
    /// split when the split's own watermark stood at this (`i64::MIN`: no bound). Sent by a
    /// source whose watermark judges lateness per split (`lateness: split`, docs/event-time.md),
    /// so that an operator downstream treats a row as late exactly when it is behind the
    /// watermark of the split it came from, whatever the other splits did meanwhile.
    SplitWatermark(Watermark),
    /// A checkpoint barrier.
    Barrier(Barrier),
    /// The sender has no data for now: leave it out of the watermark minimum until its next
    /// data or watermark.
    ///
    /// Sent by a source whose splits all stopped delivering for their idle timeout, and by a task
    /// whose inputs are all idle, so that a silent input does not hold back event time for ever.
    /// Idleness is detected in processing time, so where it falls (and so which rows end up
    /// late) is not deterministic.
    Idle,
    /// The sender has no more messages; it is the last message of a channel.
    EndOfInput,
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use std::sync::Arc;

    fn at(t: i64) -> Watermark {
        Watermark(EventTimeMs(t))
    }

    #[test]
    fn marks_keep_rows_and_watermarks_increasing() {
        let mut m = WatermarkMarks::new();
        m.push(2, at(10));
        m.push(2, at(12));
        m.push(3, at(11));
        m.push(1, at(20));
        m.push(5, at(30));
        let got: Vec<(usize, i64)> = m.iter().map(|(r, w)| (r, w.0.0)).collect();
        assert_eq!(
            got,
            [(2, 20), (5, 30)],
            "same or earlier row: replaced; no advance: ignored"
        );
        assert_eq!(m.last(), Some(at(30)));
        let kept = m.remap(|row| row / 2);
        let got: Vec<(usize, i64)> = kept.iter().map(|(r, w)| (r, w.0.0)).collect();
        assert_eq!(got, [(1, 20), (2, 30)]);
    }

    /// The pieces of `batch` cut at `m`, as words.
    fn pieces_of(m: &WatermarkMarks, batch: &RecordBatch) -> Vec<String> {
        m.pieces(batch)
            .iter()
            .map(|p| match p {
                Piece::Rows(b) => format!("rows {}", b.num_rows()),
                Piece::Watermark(w) => format!("wm {}", w.0.0),
                Piece::SplitWatermark(w) => format!("split {}", w.0.0),
            })
            .collect()
    }

    #[test]
    fn pieces_are_the_rows_between_the_marks() {
        let batch =
            RecordBatch::try_from_iter([("x", Arc::new(Int64Array::from_iter_values(0..5)) as _)])
                .expect("batch");
        let mut m = WatermarkMarks::new();
        m.push(0, at(1));
        m.push(2, at(2));
        m.push(5, at(3));
        let shape = pieces_of(&m, &batch);
        assert_eq!(shape, ["wm 1", "rows 2", "wm 2", "rows 3", "wm 3"]);
        m.push_split(2, at(1));
        m.push_split(4, at(2));
        assert_eq!(m.last_split(), Some(at(2)));
        let shape = pieces_of(&m, &batch);
        assert_eq!(
            shape,
            [
                "wm 1", "rows 2", "wm 2", "split 1", "rows 2", "split 2", "rows 1", "wm 3"
            ]
        );
        let halved = m.remap(|row| row / 2);
        let splits: Vec<(usize, i64)> = halved.splits().map(|(r, w)| (r, w.0.0)).collect();
        assert_eq!(splits, [(1, 1), (2, 2)], "split marks are remapped too");
    }
}
