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

/// One message on a channel. A channel delivers its messages in the order they were sent.
#[derive(Debug, Clone)]
pub enum StreamMessage {
    /// A batch of rows.
    Data(RecordBatch),
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
