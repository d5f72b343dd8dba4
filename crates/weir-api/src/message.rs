//! What flows through a channel, in order: data, watermarks, barriers and end-of-input.

use crate::ids::{Epoch, EventTimeMs};
use arrow::record_batch::RecordBatch;

/// A watermark `w`: no event with time `<= w` will follow on this channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Watermark(pub EventTimeMs);

impl Watermark {
    /// The watermark sent when a bounded input ends: every window may fire.
    pub const END: Watermark = Watermark(EventTimeMs::MAX);
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
