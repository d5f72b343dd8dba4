//! Split shares: how the lanes of a distributed job divide every source's splits.

use crate::error::{Error, Result};

/// One share of every source's splits, for one lane of a distributed job: `index` of `count`
/// (see [`SplitShare::contains`]). Lanes are independent runs of one job; a share decided by the
/// split's id alone (not by its position in a listing) keeps every split in exactly one lane
/// whatever order the splits are listed in and whenever partition discovery finds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SplitShare {
    index: u32,
    count: u32,
}

/// The XXH64 seed of [`SplitShare`]: another hash than the one that picks a discovered split's
/// subtask inside a lane, so that a lane's splits still spread over its own subtasks.
const SHARE_SEED: u64 = 0x6c61_6e65; // "lane"

impl SplitShare {
    /// Share `index` of `count`.
    ///
    /// # Errors
    /// [`Error::Internal`] when `count` is 0 or `index` is not below it.
    pub fn new(index: u32, count: u32) -> Result<Self> {
        if count == 0 || index >= count {
            return Err(Error::Internal(format!(
                "split share {index} of {count}: the index must be below a count of at least 1"
            )));
        }
        Ok(SplitShare { index, count })
    }

    /// The share's index.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// How many shares there are.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Whether the split with this id belongs to the share. An id that ends in a number after
    /// something else (Kafka's `topic/partition`, datagen's `datagen-<n>`) goes round robin by
    /// that number, from an offset hashed from the rest of the id, so that the numbered splits
    /// of one topic spread evenly; any other id goes by the hash of the whole id.
    pub fn contains(&self, split_id: &str) -> bool {
        let count = u64::from(self.count);
        let digits = split_id.len()
            - split_id
                .trim_end_matches(|c: char| c.is_ascii_digit())
                .len();
        let (prefix, number) = split_id.split_at(split_id.len() - digits);
        let lane = match number.parse::<u64>() {
            Ok(n) if !prefix.is_empty() => {
                let offset = twox_hash::XxHash64::oneshot(SHARE_SEED, prefix.as_bytes()) % count;
                (offset + n % count) % count
            }
            _ => twox_hash::XxHash64::oneshot(SHARE_SEED, split_id.as_bytes()) % count,
        };
        lane == u64::from(self.index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(ids: &[String], count: u32) -> Vec<usize> {
        let mut out: Vec<usize> = (0..count)
            .map(|l| {
                let share = SplitShare::new(l, count).expect("share");
                ids.iter().filter(|id| share.contains(id)).count()
            })
            .collect();
        out.sort_unstable();
        out
    }

    #[test]
    fn numbered_splits_spread_round_robin() {
        let partitions: Vec<String> = (0..8).map(|p| format!("bids/{p}")).collect();
        assert_eq!(counts(&partitions, 3), [2, 3, 3]);
        let generated: Vec<String> = (0..2).map(|i| format!("datagen-{i}")).collect();
        assert_eq!(counts(&generated, 2), [1, 1]);
        // Each split in exactly one share, also for ids without a number.
        for id in ["bids/7", "data/a.csv", "x", "a/99999999999999999999999"] {
            let owners = (0..5)
                .filter(|&l| SplitShare::new(l, 5).expect("share").contains(id))
                .count();
            assert_eq!(owners, 1, "{id}");
        }
    }
}
