//! Split shares: how the lanes of a distributed job divide every source's splits.

use crate::error::{Error, Result};

/// One share of every source's splits, for one lane of a distributed job: the splits whose id
/// hashes (XXH64 with its own seed) to `index` modulo `count`. Lanes are independent runs of one
/// job; a share by id (not by listing position) keeps every split in exactly one lane whatever
/// order the splits are listed in and whenever partition discovery finds them.
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

    /// Whether the split with this id belongs to the share.
    pub fn contains(&self, split_id: &str) -> bool {
        let hash = twox_hash::XxHash64::oneshot(SHARE_SEED, split_id.as_bytes());
        hash % u64::from(self.count) == u64::from(self.index)
    }
}
