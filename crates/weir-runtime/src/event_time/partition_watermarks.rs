//! Per source partition (or split) watermark tracking with idle detection.
//!
//! A source's watermark is the minimum over its active partitions. A partition that has had no
//! data for longer than the idle timeout stops holding it back and rejoins when data arrives.
//! The emitted watermark never goes backwards. Processing time is passed in by the caller (no
//! clock is read here); idle detection is therefore as non-deterministic as that clock, while
//! everything else depends only on the calls made.

use std::collections::BTreeMap;

use weir_api::Watermark;

/// One partition's progress.
#[derive(Debug, Clone, Copy)]
struct PartitionState {
    /// The partition's own watermark, monotone; `None` before its first event time.
    watermark: Option<Watermark>,
    /// Processing time (ms) of the partition's last data.
    last_active_ms: u64,
    /// Whether the partition has been idle longer than the timeout and no longer holds back.
    idle: bool,
}

/// The watermarks of a source's partitions or splits, keyed by `K` (a partition number, a split
/// id), and the source watermark derived from them.
#[derive(Debug, Clone)]
pub struct PartitionWatermarks<K: Ord> {
    idle_timeout_ms: Option<u64>,
    partitions: BTreeMap<K, PartitionState>,
    emitted: Option<Watermark>,
}

impl<K: Ord> PartitionWatermarks<K> {
    /// A tracker with no partitions. With `idle_timeout_ms = None` a partition is never idle:
    /// a silent partition holds the source watermark back for ever.
    pub fn new(idle_timeout_ms: Option<u64>) -> Self {
        Self {
            idle_timeout_ms,
            partitions: BTreeMap::new(),
            emitted: None,
        }
    }

    /// Resumes after a restore from `emitted`, the last watermark the source had emitted: the
    /// tracker will never emit anything lower.
    pub fn restore(&mut self, emitted: Watermark) {
        self.emitted = self.emitted.max(Some(emitted));
    }

    /// Registers an active partition with no data yet, as of processing time `now_ms`. Until it
    /// delivers an event time (or goes idle) it holds the source watermark back. Does nothing if
    /// the partition is already known.
    pub fn add_partition(&mut self, partition: K, now_ms: u64) {
        self.partitions.entry(partition).or_insert(PartitionState {
            watermark: None,
            last_active_ms: now_ms,
            idle: false,
        });
    }

    /// Removes a partition (its split finished or was reassigned): it no longer holds the source
    /// watermark back. Returns the newly emitted source watermark if it advanced.
    pub fn remove_partition(&mut self, partition: &K) -> Option<Watermark> {
        self.partitions.remove(partition);
        self.advance()
    }

    /// Records that `partition` delivered data at processing time `now_ms`, with its own
    /// watermark after that data (`None` if it has not seen an event time yet). An unknown
    /// partition is added; an idle one rejoins. A partition watermark lower than the one it
    /// already had is ignored (per-partition watermarks are monotone). Returns the newly emitted
    /// source watermark if it advanced.
    pub fn on_data(
        &mut self,
        partition: K,
        watermark: Option<Watermark>,
        now_ms: u64,
    ) -> Option<Watermark> {
        let state = self.partitions.entry(partition).or_insert(PartitionState {
            watermark: None,
            last_active_ms: now_ms,
            idle: false,
        });
        state.watermark = state.watermark.max(watermark);
        state.last_active_ms = state.last_active_ms.max(now_ms);
        state.idle = false;
        self.advance()
    }

    /// Marks every partition whose last data is more than the idle timeout before `now_ms` as
    /// idle, so it stops holding the source back. Returns the newly emitted source watermark if
    /// it advanced.
    pub fn on_processing_time(&mut self, now_ms: u64) -> Option<Watermark> {
        if let Some(timeout) = self.idle_timeout_ms {
            for state in self.partitions.values_mut() {
                if now_ms.saturating_sub(state.last_active_ms) > timeout {
                    state.idle = true;
                }
            }
        }
        self.advance()
    }

    /// The last emitted source watermark; `None` before the first one.
    pub fn current(&self) -> Option<Watermark> {
        self.emitted
    }

    /// Whether `partition` is known and currently idle.
    pub fn is_idle(&self, partition: &K) -> bool {
        self.partitions.get(partition).is_some_and(|s| s.idle)
    }

    /// Whether every known partition is idle (or there are none): the whole source is idle and
    /// should not hold back the operators downstream of it.
    pub fn all_idle(&self) -> bool {
        self.partitions.values().all(|s| s.idle)
    }

    /// The minimum over active partitions, if every active partition has a watermark and at
    /// least one is active; emitted only if it is higher than what was emitted before.
    fn advance(&mut self) -> Option<Watermark> {
        let mut active = self.partitions.values().filter(|s| !s.idle).peekable();
        active.peek()?;
        let mut candidate: Option<Watermark> = None;
        for state in active {
            let w = state.watermark?;
            candidate = Some(candidate.map_or(w, |c| c.min(w)));
        }
        let candidate = candidate?;
        if self.emitted.is_some_and(|e| candidate <= e) {
            return None;
        }
        self.emitted = Some(candidate);
        self.emitted
    }
}

#[cfg(test)]
mod tests {
    use weir_api::EventTimeMs;

    use super::*;

    fn w(t: i64) -> Watermark {
        Watermark(EventTimeMs(t))
    }

    #[test]
    fn source_watermark_is_the_minimum_over_partitions() {
        let mut p = PartitionWatermarks::new(None);
        p.add_partition(0, 0);
        p.add_partition(1, 0);
        assert_eq!(
            p.on_data(0, Some(w(100)), 1),
            None,
            "partition 1 holds back"
        );
        assert_eq!(p.on_data(1, Some(w(50)), 2), Some(w(50)));
        assert_eq!(p.on_data(1, Some(w(300)), 3), Some(w(100)));
        assert_eq!(p.on_data(0, Some(w(200)), 4), Some(w(200)));
        assert_eq!(p.current(), Some(w(200)));
    }

    #[test]
    fn partition_watermarks_are_monotone() {
        let mut p = PartitionWatermarks::new(None);
        assert_eq!(p.on_data("a", Some(w(100)), 0), Some(w(100)));
        assert_eq!(p.on_data("a", Some(w(40)), 1), None);
        assert_eq!(p.on_data("a", None, 2), None);
        assert_eq!(p.current(), Some(w(100)));
    }

    #[test]
    fn idle_partition_stops_holding_back_and_rejoins_without_going_back() {
        let mut p = PartitionWatermarks::new(Some(1_000));
        p.add_partition(1, 0);
        assert_eq!(p.on_data(0, Some(w(100)), 0), None);
        assert_eq!(p.on_data(1, Some(w(500)), 0), Some(w(100)));
        // Partition 0 is silent; exactly the timeout is not yet "longer than" it.
        assert_eq!(p.on_data(1, Some(w(900)), 1_000), None);
        assert_eq!(p.on_processing_time(1_000), None);
        assert!(!p.is_idle(&0));
        assert_eq!(p.on_processing_time(1_001), Some(w(900)));
        assert!(p.is_idle(&0) && !p.is_idle(&1));
        assert_eq!(p.on_data(1, Some(w(1_500)), 1_100), Some(w(1_500)));
        // Partition 0 rejoins with an older watermark: the source holds at 1500, never goes back.
        assert_eq!(p.on_data(0, Some(w(300)), 1_200), None);
        assert!(!p.is_idle(&0));
        assert_eq!(p.current(), Some(w(1_500)));
        assert_eq!(
            p.on_data(1, Some(w(3_000)), 1_300),
            None,
            "0 holds back again"
        );
        assert_eq!(p.on_data(0, Some(w(2_000)), 1_400), Some(w(2_000)));
    }

    #[test]
    fn partition_without_event_time_holds_back_until_idle() {
        let mut p = PartitionWatermarks::new(Some(10));
        p.add_partition(0, 0);
        assert_eq!(p.on_data(1, Some(w(7)), 5), None);
        assert_eq!(p.on_processing_time(10), None);
        assert_eq!(p.on_processing_time(11), Some(w(7)));
    }

    #[test]
    fn all_idle_emits_nothing_and_removal_releases() {
        let mut p = PartitionWatermarks::new(Some(10));
        p.on_data(0, Some(w(5)), 0);
        p.on_data(1, Some(w(9)), 0);
        assert_eq!(p.current(), Some(w(5)));
        assert_eq!(p.on_processing_time(100), None);
        assert!(p.all_idle());
        assert_eq!(p.current(), Some(w(5)));
        p.on_data(1, Some(w(20)), 101);
        assert_eq!(p.current(), Some(w(20)));
        p.on_data(0, Some(w(10)), 102);
        assert_eq!(p.remove_partition(&0), None, "20 already emitted");
        assert_eq!(p.on_data(1, Some(w(30)), 103), Some(w(30)));
    }

    #[test]
    fn never_goes_back_after_restore() {
        let mut p = PartitionWatermarks::new(None);
        p.restore(w(1_000));
        assert_eq!(p.on_data(0, Some(w(400)), 0), None);
        assert_eq!(p.current(), Some(w(1_000)));
        assert_eq!(p.on_data(0, Some(w(1_001)), 1), Some(w(1_001)));
    }
}
