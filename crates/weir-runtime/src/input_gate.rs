//! The input side of a task: its ordered input channels, merged fairly, with watermark merging
//! (minimum over live, non-idle channels) and barrier alignment.
//!
//! A channel whose sender declared itself idle ([`StreamMessage::Idle`]) is left out of the
//! watermark minimum until it delivers data or a watermark again. Idleness is decided by the
//! senders in processing time, so which watermarks the gate emits while a channel is idle is not
//! deterministic; the gate's watermark still never goes backwards.

use arrow::record_batch::RecordBatch;
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use weir_api::{Barrier, ChannelId, Epoch, EventTimeMs, StreamMessage, Watermark, WatermarkMarks};
use weir_checkpoint::InputWatermark;

/// One input channel of a task.
#[derive(Debug)]
pub(crate) struct InputChannel {
    rx: mpsc::Receiver<StreamMessage>,
    /// The channel's identity in the plan (for checkpoints); `None` in unit tests.
    id: Option<ChannelId>,
    /// Input index of the head operator this channel feeds.
    input: usize,
    watermark: EventTimeMs,
    /// The split watermark the rows that arrive next were read behind
    /// ([`StreamMessage::SplitWatermark`]); [`Watermark::NONE`] until the sender sends one.
    split_watermark: Watermark,
    ended: bool,
    /// The sender declared itself idle and has sent neither data nor a watermark since.
    idle: bool,
    /// Set while this channel delivered the barrier of the epoch being aligned.
    blocked_at: Option<Epoch>,
}

impl InputChannel {
    /// A channel whose sender never runs (a source subtask without splits): it has ended
    /// before the first poll and never holds the watermark back.
    pub(crate) fn finished(rx: mpsc::Receiver<StreamMessage>, input: usize) -> Self {
        let mut channel = Self::new(rx, input);
        channel.watermark = EventTimeMs::MAX;
        channel.ended = true;
        channel
    }

    pub(crate) fn new(rx: mpsc::Receiver<StreamMessage>, input: usize) -> Self {
        InputChannel {
            rx,
            id: None,
            input,
            watermark: EventTimeMs::MIN,
            split_watermark: Watermark::NONE,
            ended: false,
            idle: false,
            blocked_at: None,
        }
    }

    /// The same channel, named by its plan identity.
    pub(crate) fn with_id(mut self, id: ChannelId) -> Self {
        self.id = Some(id);
        self
    }
}

/// What the gate hands to the task, in order.
#[derive(Debug)]
pub(crate) enum GateEvent {
    /// A batch for head input `input`. `split_watermark` is set when its rows were read behind
    /// another split watermark than the batch the gate handed to this input before (the last
    /// one its channel delivered; [`Watermark::NONE`] when none): tell the head first.
    Data {
        input: usize,
        batch: RecordBatch,
        split_watermark: Option<Watermark>,
        /// Where the gate's watermark (the minimum over live channels) advances inside the
        /// batch; empty when it does not.
        marks: WatermarkMarks,
        /// Where the watermark of the batch's own input (the minimum over that input's live
        /// channels) advances inside it; always empty unless the gate reports input
        /// watermarks ([`InputGate::with_input_watermarks`]).
        input_marks: WatermarkMarks,
    },
    /// The watermark of head input `input` alone advanced (only from a gate that reports
    /// input watermarks); comes before the [`GateEvent::Watermark`] the same message caused.
    InputWatermark { input: usize, watermark: Watermark },
    /// The minimum watermark over live channels advanced.
    Watermark(Watermark),
    /// Every live channel delivered this barrier.
    Barrier(Barrier),
    /// Every live channel is idle now (reported once per time it happens): the task has no
    /// data for now and should tell its downstream the same.
    Idle,
    /// Every channel ended.
    End,
}

/// Why the gate cannot continue.
#[derive(Debug)]
pub(crate) enum GateError {
    /// A channel's sender went away without end-of-input: its task failed.
    Closed,
    /// An upstream broke the channel protocol (a bug).
    Protocol(String),
}

/// Merges a task's input channels.
#[derive(Debug)]
pub(crate) struct InputGate {
    channels: Vec<InputChannel>,
    next_poll: usize,
    watermark: EventTimeMs,
    aligning: Option<Barrier>,
    /// When the first barrier of the epoch being aligned arrived.
    aligning_since: Option<Instant>,
    /// First to last barrier of the last aligned epoch.
    last_alignment: Duration,
    finished: bool,
    /// Whether [`GateEvent::Idle`] was reported and no channel became active since.
    idle_reported: bool,
    /// Per head input, the split watermark of the batch handed to it last.
    split_watermarks: Vec<Watermark>,
    /// Per head input, its own watermark, when the head reads them
    /// ([`InputGate::with_input_watermarks`]); `None`: not tracked.
    input_watermarks: Option<Vec<EventTimeMs>>,
    /// Events one message caused beyond the one returned for it.
    pending: std::collections::VecDeque<GateEvent>,
}

impl InputGate {
    pub(crate) fn new(channels: Vec<InputChannel>) -> Self {
        InputGate {
            channels,
            next_poll: 0,
            watermark: EventTimeMs::MIN,
            aligning: None,
            aligning_since: None,
            last_alignment: Duration::ZERO,
            finished: false,
            idle_reported: false,
            split_watermarks: Vec::new(),
            input_watermarks: None,
            pending: std::collections::VecDeque::new(),
        }
    }

    /// The same gate, also reporting the watermark of each head input on its own: for a head
    /// operator with several inputs that judges each row against its own input's watermark
    /// (a join), so that which rows are late does not depend on how fast the other input runs.
    pub(crate) fn with_input_watermarks(mut self) -> Self {
        let inputs = self.channels.iter().map(|c| c.input + 1).max().unwrap_or(0);
        self.input_watermarks = Some(vec![EventTimeMs::MIN; inputs]);
        self
    }

    /// First to last barrier of the epoch whose [`GateEvent::Barrier`] was returned last (zero
    /// with one input channel).
    pub(crate) fn last_alignment(&self) -> Duration {
        self.last_alignment
    }

    /// The next event; after [`GateEvent::End`] it keeps returning `End`.
    pub(crate) async fn next(&mut self) -> Result<GateEvent, GateError> {
        if let Some(event) = self.pending.pop_front() {
            return Ok(event);
        }
        loop {
            if self.finished || self.channels.iter().all(|c| c.ended) {
                // The end of every input completes event time, even when no upstream said so:
                // channels of tasks that never ran (a restore after every split was read)
                // deliver no watermark, and windows still open must fire.
                if self.watermark < EventTimeMs::MAX {
                    self.watermark = EventTimeMs::MAX;
                    return Ok(GateEvent::Watermark(Watermark(EventTimeMs::MAX)));
                }
                self.finished = true;
                return Ok(GateEvent::End);
            }
            if !self.idle_reported && self.all_live_idle() {
                self.idle_reported = true;
                return Ok(GateEvent::Idle);
            }
            let (i, message) = std::future::poll_fn(|cx| {
                let n = self.channels.len();
                for k in 0..n {
                    let i = (self.next_poll + k) % n;
                    let ch = &mut self.channels[i];
                    if ch.ended || ch.blocked_at.is_some() {
                        continue;
                    }
                    if let Poll::Ready(m) = ch.rx.poll_recv(cx) {
                        self.next_poll = (i + 1) % n;
                        return Poll::Ready((i, m));
                    }
                }
                Poll::Pending
            })
            .await;
            let Some(message) = message else {
                return Err(GateError::Closed);
            };
            match message {
                StreamMessage::Data(batch) => return self.data(i, batch, &WatermarkMarks::new()),
                StreamMessage::MarkedData(batch, marks) => return self.data(i, batch, &marks),
                StreamMessage::SplitWatermark(w) => self.channels[i].split_watermark = w,
                StreamMessage::Watermark(Watermark(w)) => {
                    self.channel_watermark(i, w)?;
                    self.wake(i);
                    if let Some(event) = self.advances(i) {
                        return Ok(event);
                    }
                }
                StreamMessage::Idle => {
                    self.channels[i].idle = true;
                    if let Some(event) = self.advances(i) {
                        return Ok(event);
                    }
                }
                StreamMessage::Barrier(barrier) => {
                    match self.aligning {
                        Some(current) if current.epoch != barrier.epoch => {
                            return Err(GateError::Protocol(format!(
                                "barrier {} arrived on channel {i} while aligning barrier {}",
                                barrier.epoch, current.epoch
                            )));
                        }
                        Some(_) => {}
                        None => {
                            self.aligning = Some(barrier);
                            self.aligning_since = Some(Instant::now());
                        }
                    }
                    self.channels[i].blocked_at = Some(barrier.epoch);
                    if let Some(b) = self.complete_alignment() {
                        return Ok(GateEvent::Barrier(b));
                    }
                }
                StreamMessage::EndOfInput => {
                    self.channels[i].ended = true;
                    if let Some(b) = self.complete_alignment() {
                        // The advances the end caused follow the barrier.
                        if let Some(event) = self.advances(i) {
                            self.pending.push_front(event);
                        }
                        return Ok(GateEvent::Barrier(b));
                    }
                    if let Some(event) = self.advances(i) {
                        return Ok(event);
                    }
                }
            }
        }
    }

    /// Every named channel's watermark state, for a checkpoint (a manifest's
    /// `inputWatermarks`, docs/checkpoints.md).
    pub(crate) fn channel_states(&self) -> Vec<InputWatermark> {
        self.channels
            .iter()
            .filter_map(|c| {
                let id = c.id.clone()?;
                Some(InputWatermark {
                    channel: id,
                    watermark: (c.watermark != EventTimeMs::MIN).then_some(c.watermark),
                    idle: c.idle,
                    finished: c.ended,
                })
            })
            .collect()
    }

    /// A batch from channel `i`, inside which the channel's watermark advances at `marks`.
    fn data(
        &mut self,
        i: usize,
        batch: RecordBatch,
        marks: &WatermarkMarks,
    ) -> Result<GateEvent, GateError> {
        self.wake(i);
        let input = self.channels[i].input;
        let mut combined = WatermarkMarks::new();
        let mut input_marks = WatermarkMarks::new();
        for (row, Watermark(w)) in marks.iter() {
            self.channel_watermark(i, w)?;
            if let Some(m) = self.advance_input(input) {
                input_marks.push(row, m);
            }
            if let Some(m) = self.advance_watermark() {
                combined.push(row, m);
            }
        }
        // The split watermarks inside the batch are the channel's own: they pass unchanged,
        // and the last is what the channel's next rows are behind.
        for (row, w) in marks.splits() {
            combined.push_split(row, w);
        }
        let behind = self.channels[i].split_watermark;
        if self.split_watermarks.len() <= input {
            self.split_watermarks.resize(input + 1, Watermark::NONE);
        }
        let changed = std::mem::replace(&mut self.split_watermarks[input], behind);
        if let Some(last) = marks.last_split() {
            self.channels[i].split_watermark = last;
            self.split_watermarks[input] = last;
        }
        Ok(GateEvent::Data {
            input,
            batch,
            split_watermark: (changed != behind).then_some(behind),
            marks: combined,
            input_marks,
        })
    }

    /// What a change of channel `i`'s watermark, idleness or end caused, in order: the advance
    /// of its input's watermark (when reported), then of the gate's. The first is returned and
    /// the second, if both happened, waits in `pending`.
    fn advances(&mut self, i: usize) -> Option<GateEvent> {
        let input = self.channels[i].input;
        let own = self
            .advance_input(input)
            .map(|watermark| GateEvent::InputWatermark { input, watermark });
        let combined = self.advance_watermark().map(GateEvent::Watermark);
        match (own, combined) {
            (Some(own), Some(combined)) => {
                self.pending.push_back(combined);
                Some(own)
            }
            (own, combined) => own.or(combined),
        }
    }

    /// The minimum over head input `input`'s live, non-idle channels, if the gate reports input
    /// watermarks and it moved forward.
    fn advance_input(&mut self, input: usize) -> Option<Watermark> {
        let current = *self.input_watermarks.as_ref()?.get(input)?;
        let min = self
            .channels
            .iter()
            .filter(|c| c.input == input && !c.ended && !c.idle)
            .map(|c| c.watermark)
            .min()
            // Every channel of the input ended: nothing more comes on it.
            .or_else(|| {
                self.channels
                    .iter()
                    .filter(|c| c.input == input)
                    .all(|c| c.ended)
                    .then_some(EventTimeMs::MAX)
            })?;
        if min <= current {
            return None;
        }
        if let Some(slot) = self
            .input_watermarks
            .as_mut()
            .and_then(|w| w.get_mut(input))
        {
            *slot = min;
        }
        Some(Watermark(min))
    }

    /// Channel `i`'s watermark is `w` now; a watermark that goes back breaks the protocol.
    fn channel_watermark(&mut self, i: usize, w: EventTimeMs) -> Result<(), GateError> {
        let ch = &mut self.channels[i];
        if w < ch.watermark {
            return Err(GateError::Protocol(format!(
                "watermark went back on input channel {i}: {} after {}",
                w.0, ch.watermark.0
            )));
        }
        ch.watermark = w;
        Ok(())
    }

    /// Channel `i` delivered data or a watermark: it is active again.
    fn wake(&mut self, i: usize) {
        if self.channels[i].idle {
            self.channels[i].idle = false;
            self.idle_reported = false;
        }
    }

    /// Whether there is a live channel and every live channel is idle.
    fn all_live_idle(&self) -> bool {
        let mut live = self.channels.iter().filter(|c| !c.ended).peekable();
        live.peek().is_some() && live.all(|c| c.idle)
    }

    /// The minimum over live, non-idle channels, if it moved forward. With every live channel
    /// idle there is no minimum and the watermark stays where it is.
    fn advance_watermark(&mut self) -> Option<Watermark> {
        let min = self
            .channels
            .iter()
            .filter(|c| !c.ended && !c.idle)
            .map(|c| c.watermark)
            .min()?;
        (min > self.watermark).then(|| {
            self.watermark = min;
            Watermark(min)
        })
    }

    /// Releases every channel when all live channels delivered the barrier being aligned.
    fn complete_alignment(&mut self) -> Option<Barrier> {
        let barrier = self.aligning?;
        let aligned = self
            .channels
            .iter()
            .all(|c| c.ended || c.blocked_at == Some(barrier.epoch));
        if !aligned {
            return None;
        }
        for c in &mut self.channels {
            c.blocked_at = None;
        }
        self.aligning = None;
        self.last_alignment = self
            .aligning_since
            .take()
            .map_or(Duration::ZERO, |t| t.elapsed());
        Some(barrier)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use std::sync::Arc;

    fn batch(v: i64) -> RecordBatch {
        RecordBatch::try_from_iter([("x", Arc::new(Int64Array::from(vec![v])) as _)])
            .expect("batch")
    }

    fn gate(n: usize) -> (Vec<mpsc::Sender<StreamMessage>>, InputGate) {
        let mut txs = Vec::new();
        let mut chans = Vec::new();
        for i in 0..n {
            let (tx, rx) = mpsc::channel(8);
            txs.push(tx);
            chans.push(InputChannel::new(rx, i));
        }
        (txs, InputGate::new(chans))
    }

    fn value(e: &GateEvent) -> Option<i64> {
        match e {
            GateEvent::Data { batch, .. } => batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .map(|a| a.value(0)),
            _ => None,
        }
    }

    #[tokio::test]
    async fn a_batch_carries_its_channels_split_watermark_when_it_changes_for_the_input() {
        let (a, rx_a) = mpsc::channel(8);
        let (b, rx_b) = mpsc::channel(8);
        let mut g = InputGate::new(vec![InputChannel::new(rx_a, 0), InputChannel::new(rx_b, 0)]);
        let behind = |e: &GateEvent| match e {
            GateEvent::Data {
                split_watermark, ..
            } => split_watermark.map(|w| w.0.0),
            other => panic!("not data: {other:?}"),
        };
        let w100 = Watermark(EventTimeMs(100));
        a.send(StreamMessage::SplitWatermark(w100))
            .await
            .expect("send");
        let mut expect = Vec::new();
        for (tx, v, want) in [
            (&a, 1, Some(100)),
            (&a, 2, None),
            (&b, 3, Some(i64::MIN)),
            (&a, 4, Some(100)),
        ] {
            tx.send(StreamMessage::Data(batch(v))).await.expect("send");
            let e = g.next().await.expect("event");
            expect.push((value(&e), behind(&e), Some(v), want));
        }
        for (got_value, got, value, want) in expect {
            assert_eq!((got_value, got), (value, want));
        }
    }

    #[tokio::test]
    async fn split_marks_pass_unchanged_and_leave_their_channel_behind_the_last() {
        let (a, rx_a) = mpsc::channel(8);
        let (b, rx_b) = mpsc::channel(8);
        let mut g = InputGate::new(vec![InputChannel::new(rx_a, 0), InputChannel::new(rx_b, 0)]);
        let at = |t| Watermark(EventTimeMs(t));
        let mut marks = WatermarkMarks::new();
        marks.push_split(0, at(50));
        marks.push_split(1, at(70));
        a.send(StreamMessage::MarkedData(batch(1), marks))
            .await
            .expect("send");
        match g.next().await.expect("event") {
            GateEvent::Data {
                split_watermark,
                marks,
                ..
            } => {
                assert_eq!(split_watermark, None, "nothing was told before");
                let splits: Vec<(usize, i64)> = marks.splits().map(|(r, w)| (r, w.0.0)).collect();
                assert_eq!(
                    splits,
                    [(0, 50), (1, 70)],
                    "the channel's own marks, unchanged"
                );
                assert!(
                    marks.iter().next().is_none(),
                    "b holds the gate's watermark"
                );
            }
            other => panic!("not data: {other:?}"),
        }
        let told = |e: GateEvent| match e {
            GateEvent::Data {
                split_watermark, ..
            } => split_watermark.map(|w| w.0.0),
            other => panic!("not data: {other:?}"),
        };
        b.send(StreamMessage::Data(batch(2))).await.expect("send");
        assert_eq!(told(g.next().await.expect("b")), Some(i64::MIN));
        a.send(StreamMessage::Data(batch(3))).await.expect("send");
        assert_eq!(
            told(g.next().await.expect("a")),
            Some(70),
            "a's next rows are behind its last split mark"
        );
    }

    #[tokio::test]
    async fn a_gate_reporting_input_watermarks_tells_each_inputs_own_advance_first() {
        let (txs, g) = gate(2);
        let mut g = g.with_input_watermarks();
        let at = |t| Watermark(EventTimeMs(t));
        let input_wm = |e: Result<GateEvent, GateError>| match e {
            Ok(GateEvent::InputWatermark { input, watermark }) => Some((input, watermark.0.0)),
            _ => None,
        };
        txs[0]
            .send(StreamMessage::Watermark(at(10)))
            .await
            .expect("send");
        assert_eq!(input_wm(g.next().await), Some((0, 10)), "input 0 alone");
        txs[1]
            .send(StreamMessage::Watermark(at(5)))
            .await
            .expect("send");
        assert_eq!(input_wm(g.next().await), Some((1, 5)));
        assert_eq!(watermark_of(g.next().await), Some(5), "then the gate's");
        let mut marks = WatermarkMarks::new();
        marks.push(1, at(12));
        txs[0]
            .send(StreamMessage::MarkedData(batch(1), marks))
            .await
            .expect("send");
        let Ok(GateEvent::Data {
            marks, input_marks, ..
        }) = g.next().await
        else {
            panic!("the batch");
        };
        assert!(marks.is_empty(), "input 1 holds the gate at 5");
        let got: Vec<(usize, i64)> = input_marks.iter().map(|(r, w)| (r, w.0.0)).collect();
        assert_eq!(got, [(1, 12)]);
        txs[1].send(StreamMessage::EndOfInput).await.expect("send");
        assert_eq!(
            input_wm(g.next().await),
            Some((1, i64::MAX)),
            "input 1 ended"
        );
        assert_eq!(watermark_of(g.next().await), Some(12));
    }

    #[tokio::test]
    async fn watermark_is_the_minimum_of_live_channels() {
        let (txs, mut g) = gate(2);
        let wm = |t| StreamMessage::Watermark(Watermark(EventTimeMs(t)));
        txs[0].send(wm(10)).await.expect("send");
        txs[1].send(wm(5)).await.expect("send");
        assert!(matches!(
            g.next().await,
            Ok(GateEvent::Watermark(Watermark(EventTimeMs(5))))
        ));
        txs[1].send(wm(20)).await.expect("send");
        assert!(matches!(
            g.next().await,
            Ok(GateEvent::Watermark(Watermark(EventTimeMs(10))))
        ));
        txs[0].send(StreamMessage::EndOfInput).await.expect("send");
        // Channel 0 ended: the minimum over the live channel is 20.
        assert!(matches!(
            g.next().await,
            Ok(GateEvent::Watermark(Watermark(EventTimeMs(20))))
        ));
        txs[1].send(StreamMessage::EndOfInput).await.expect("send");
        assert_ends(&mut g).await;
    }

    #[tokio::test]
    async fn marks_inside_a_batch_become_advances_of_the_minimum() {
        let (txs, mut g) = gate(2);
        let at = |t| Watermark(EventTimeMs(t));
        txs[0]
            .send(StreamMessage::Watermark(at(15)))
            .await
            .expect("send");
        let mut marks = WatermarkMarks::new();
        for (row, w) in [(0, 5), (1, 10), (2, 20), (3, 30)] {
            marks.push(row, at(w));
        }
        txs[1]
            .send(StreamMessage::MarkedData(batch(7), marks))
            .await
            .expect("send");
        let Ok(GateEvent::Data { marks, .. }) = g.next().await else {
            panic!("the batch");
        };
        let got: Vec<(usize, i64)> = marks.iter().map(|(r, w)| (r, w.0.0)).collect();
        assert_eq!(
            got,
            [(0, 5), (1, 10), (2, 15)],
            "channel 0 holds the minimum at 15 from row 2 on"
        );
        let mut back = WatermarkMarks::new();
        back.push(0, at(25));
        txs[1]
            .send(StreamMessage::MarkedData(batch(8), back))
            .await
            .expect("send");
        assert!(
            matches!(g.next().await, Err(GateError::Protocol(_))),
            "a mark below the channel's watermark goes back"
        );
    }

    #[tokio::test]
    async fn a_watermark_going_back_is_a_protocol_error() {
        let (txs, mut g) = gate(1);
        txs[0]
            .send(StreamMessage::Watermark(Watermark(EventTimeMs(10))))
            .await
            .expect("send");
        txs[0]
            .send(StreamMessage::Watermark(Watermark(EventTimeMs(9))))
            .await
            .expect("send");
        assert!(g.next().await.is_ok());
        assert!(matches!(g.next().await, Err(GateError::Protocol(_))));
    }

    #[tokio::test]
    async fn barrier_blocks_a_channel_until_all_inputs_have_it() {
        let (txs, mut g) = gate(2);
        let barrier = StreamMessage::Barrier(Barrier::new(Epoch(1)));
        txs[0].send(barrier.clone()).await.expect("send");
        txs[0]
            .send(StreamMessage::Data(batch(100)))
            .await
            .expect("send");
        txs[1]
            .send(StreamMessage::Data(batch(1)))
            .await
            .expect("send");
        txs[1]
            .send(StreamMessage::Data(batch(2)))
            .await
            .expect("send");
        txs[1].send(barrier).await.expect("send");
        // Data after the barrier on channel 0 waits until channel 1 delivers its barrier.
        assert_eq!(value(&g.next().await.expect("event")), Some(1));
        assert_eq!(value(&g.next().await.expect("event")), Some(2));
        assert!(matches!(
            g.next().await,
            Ok(GateEvent::Barrier(Barrier {
                epoch: Epoch(1),
                is_final: false
            }))
        ));
        assert_eq!(value(&g.next().await.expect("event")), Some(100));
    }

    fn wm(t: i64) -> StreamMessage {
        StreamMessage::Watermark(Watermark(EventTimeMs(t)))
    }

    /// Every channel ended: the gate completes event time, then ends.
    async fn assert_ends(g: &mut InputGate) {
        assert_eq!(
            watermark_of(g.next().await),
            Some(i64::MAX),
            "the end completes event time"
        );
        assert!(matches!(g.next().await, Ok(GateEvent::End)));
    }

    fn watermark_of(e: Result<GateEvent, GateError>) -> Option<i64> {
        match e {
            Ok(GateEvent::Watermark(Watermark(EventTimeMs(t)))) => Some(t),
            _ => None,
        }
    }

    /// The gate's next event if one is ready without waiting; every message already queued is
    /// handled first.
    fn ready(g: &mut InputGate) -> Option<Result<GateEvent, GateError>> {
        futures::FutureExt::now_or_never(g.next())
    }

    #[tokio::test]
    async fn an_idle_channel_is_left_out_until_it_delivers_again() {
        let (txs, mut g) = gate(2);
        txs[0].send(wm(10)).await.expect("send");
        assert!(ready(&mut g).is_none(), "channel 1 holds back");
        txs[1].send(wm(5)).await.expect("send");
        assert_eq!(watermark_of(g.next().await), Some(5));
        txs[1].send(StreamMessage::Idle).await.expect("send");
        assert_eq!(watermark_of(g.next().await), Some(10), "idle 1 is left out");
        txs[0].send(wm(20)).await.expect("send");
        assert_eq!(watermark_of(g.next().await), Some(20));
        // Data wakes channel 1 with its old watermark 5: the gate holds at 20, never goes back.
        txs[1]
            .send(StreamMessage::Data(batch(7)))
            .await
            .expect("send");
        assert_eq!(value(&g.next().await.expect("event")), Some(7));
        txs[0].send(wm(30)).await.expect("send");
        assert!(ready(&mut g).is_none(), "min(30, 5) is below 20");
        txs[1].send(wm(25)).await.expect("send");
        assert_eq!(watermark_of(g.next().await), Some(25));
        // A watermark wakes an idle channel too.
        txs[1].send(StreamMessage::Idle).await.expect("send");
        assert_eq!(watermark_of(g.next().await), Some(30));
        txs[1].send(wm(26)).await.expect("send");
        assert!(ready(&mut g).is_none(), "26 holds the minimum below 30");
        txs[0].send(wm(40)).await.expect("send");
        assert!(ready(&mut g).is_none());
        txs[1].send(wm(35)).await.expect("send");
        assert_eq!(watermark_of(g.next().await), Some(35));
    }

    #[tokio::test]
    async fn when_every_live_channel_is_idle_the_watermark_stays_and_idle_is_reported_once() {
        let (txs, mut g) = gate(2);
        txs[0].send(wm(10)).await.expect("send");
        txs[1].send(wm(12)).await.expect("send");
        assert_eq!(watermark_of(g.next().await), Some(10));
        txs[0].send(StreamMessage::Idle).await.expect("send");
        assert_eq!(watermark_of(g.next().await), Some(12));
        txs[1].send(StreamMessage::Idle).await.expect("send");
        assert!(matches!(g.next().await, Ok(GateEvent::Idle)));
        // A repeated idle declaration reports nothing new; the watermark stays at 12.
        txs[1].send(StreamMessage::Idle).await.expect("send");
        assert!(ready(&mut g).is_none());
        txs[0].send(wm(50)).await.expect("send");
        assert_eq!(watermark_of(g.next().await), Some(50), "only 0 is active");
        txs[0].send(StreamMessage::Idle).await.expect("send");
        assert!(matches!(g.next().await, Ok(GateEvent::Idle)));
        txs[1].send(StreamMessage::EndOfInput).await.expect("send");
        txs[0].send(StreamMessage::EndOfInput).await.expect("send");
        assert_ends(&mut g).await;
    }

    #[tokio::test]
    async fn the_last_active_channel_ending_leaves_only_idle_ones() {
        let (txs, mut g) = gate(2);
        txs[0].send(StreamMessage::Idle).await.expect("send");
        assert!(ready(&mut g).is_none(), "channel 1 is still active");
        txs[1].send(wm(8)).await.expect("send");
        assert_eq!(watermark_of(g.next().await), Some(8));
        txs[1].send(StreamMessage::EndOfInput).await.expect("send");
        assert!(matches!(g.next().await, Ok(GateEvent::Idle)));
        txs[0].send(StreamMessage::EndOfInput).await.expect("send");
        assert_ends(&mut g).await;
    }

    #[tokio::test]
    async fn channels_of_tasks_that_never_ran_still_complete_event_time() {
        let (tx, rx) = mpsc::channel(4);
        let mut g = InputGate::new(vec![InputChannel::finished(rx, 0)]);
        assert_ends(&mut g).await;
        assert!(matches!(g.next().await, Ok(GateEvent::End)));
        drop(tx);
    }

    #[tokio::test]
    async fn a_dropped_sender_is_reported_as_closed() {
        let (txs, mut g) = gate(1);
        drop(txs);
        assert!(matches!(g.next().await, Err(GateError::Closed)));
    }
}
