//! Watermark alignment between the subtasks of one source (as Flink's watermark alignment):
//! a subtask whose watermark is more than `max_drift` ahead of the lowest watermark of the
//! source's other running subtasks pauses reading until they catch up.
//!
//! Without it, one reader can run far ahead in event time (splits are handed out up front, and
//! nothing holds the faster reader back); a downstream window's watermark is the minimum of its
//! inputs, so it holds every window between the slowest and the fastest reader open, and its
//! state (and every checkpoint of it) grows with the gap.
//!
//! A subtask that never runs, reports itself idle or has read all its splits holds nobody back.
//! A paused subtask still injects checkpoint barriers (its reader is not in the middle of a
//! batch), so alignment never blocks an epoch.

use std::sync::atomic::{AtomicI64, Ordering};
use tokio::sync::watch;
use weir_api::DurationMs;

/// The published watermarks of one source's subtasks.
#[derive(Debug)]
pub(crate) struct SourceAlignment {
    max_drift: i64,
    /// Per subtask: its last emitted watermark; `i64::MIN` before the first, `i64::MAX` when it
    /// holds nobody back.
    watermarks: Vec<AtomicI64>,
    /// Bumped on every publication, so paused subtasks wake up.
    changed: watch::Sender<u64>,
}

impl SourceAlignment {
    /// Alignment within `max_drift` for subtasks of which `running[i]` says whether they run.
    pub(crate) fn new(max_drift: DurationMs, running: &[bool]) -> Self {
        SourceAlignment {
            max_drift: i64::try_from(max_drift.0).unwrap_or(i64::MAX),
            watermarks: running
                .iter()
                .map(|&r| AtomicI64::new(if r { i64::MIN } else { i64::MAX }))
                .collect(),
            changed: watch::Sender::new(0),
        }
    }

    /// Subtask `subtask` emitted `watermark`.
    pub(crate) fn publish(&self, subtask: u32, watermark: i64) {
        if let Some(slot) = self.watermarks.get(subtask as usize) {
            slot.store(watermark, Ordering::Release);
            self.changed.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Subtask `subtask` is idle or done: it holds nobody back until it publishes again.
    pub(crate) fn release(&self, subtask: u32) {
        self.publish(subtask, i64::MAX);
    }

    /// Whether `subtask` must pause: its watermark is more than the drift ahead of the lowest of
    /// the other subtasks.
    pub(crate) fn must_wait(&self, subtask: u32) -> bool {
        let Some(mine) = self.watermarks.get(subtask as usize) else {
            return false;
        };
        let mine = mine.load(Ordering::Acquire);
        if mine == i64::MAX {
            return false;
        }
        let lowest = self
            .watermarks
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != subtask as usize)
            .map(|(_, w)| w.load(Ordering::Acquire))
            .min()
            .unwrap_or(i64::MAX);
        mine > lowest.saturating_add(self.max_drift)
    }

    /// A receiver that sees every later publication (`changed().await`).
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subtask_ahead_waits_until_the_others_catch_up_or_stop() {
        let a = SourceAlignment::new(DurationMs(10), &[true, true, true]);
        // Nobody emitted yet: nobody is ahead.
        assert!(!a.must_wait(0));
        a.publish(0, 100);
        assert!(a.must_wait(0), "1 and 2 have no watermark yet");
        a.publish(1, 95);
        a.publish(2, 89);
        assert!(a.must_wait(0), "100 is 11 ahead of 89");
        assert!(!a.must_wait(1) && !a.must_wait(2));
        a.publish(2, 90);
        assert!(!a.must_wait(0), "exactly the drift is allowed");
        a.release(1);
        a.release(2);
        assert!(
            !a.must_wait(0),
            "idle or finished subtasks hold nobody back"
        );
    }

    #[test]
    fn subtasks_that_never_run_hold_nobody_back() {
        let a = SourceAlignment::new(DurationMs(10), &[true, false]);
        a.publish(0, 1_000);
        assert!(!a.must_wait(0));
    }

    #[tokio::test]
    async fn a_publication_wakes_a_paused_subtask() {
        let a = std::sync::Arc::new(SourceAlignment::new(DurationMs(10), &[true, true]));
        a.publish(0, 100);
        assert!(a.must_wait(0), "subtask 1 has no watermark yet");
        let mut rx = a.subscribe();
        rx.borrow_and_update();
        assert!(
            !rx.has_changed().expect("sender alive"),
            "nothing published yet"
        );
        let other = std::sync::Arc::clone(&a);
        let publisher = tokio::spawn(async move { other.publish(1, 95) });
        // The paused subtask wakes up, and then sees that it may read on.
        tokio::time::timeout(std::time::Duration::from_secs(10), rx.changed())
            .await
            .expect("the publication wakes the receiver within 10 s")
            .expect("sender alive");
        publisher.await.expect("publisher");
        assert!(!a.must_wait(0), "100 is within 10 of 95");
    }
}
