//! Where session windows keep their partial states: slots in buckets by session start.
//!
//! DataFusion's group accumulators can only hand out groups from the front (`EmitTo::First`)
//! or all at once, so a session's state cannot be taken out alone. Sessions therefore get
//! slots in a bucket chosen by their start time, in creation order: sessions that start close
//! together end close together, so firing the complete ones takes a short prefix of a few
//! buckets (live sessions caught in that prefix move to the end of their bucket). Firing costs
//! what fires, not what is open: with a watermark held back by a slow input, many sessions
//! wait, and a full pass over them at every watermark would make the operator quadratic.

use crate::window::aggregate::{AggregateSet, GroupSpace};
use arrow::array::ArrayRef;
use arrow::datatypes::Schema;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use weir_api::Result;

/// A slot: the bucket (session start divided by the bucket width) and the slot's number in
/// that bucket, counted from the bucket's creation.
pub(super) type Part = (i64, u64);

/// Slots taken out of a bucket: each slot's owner and the partial states, one row per slot.
pub(super) type Drained = (Vec<u32>, Vec<Vec<ArrayRef>>);

/// The owner of a slot whose session is gone (expired, or fired and not kept).
pub(super) const NO_OWNER: u32 = u32::MAX;

/// One bucket: a group space whose groups are the slots `base..base + owners.len()`.
struct Bucket {
    space: GroupSpace,
    /// Slots taken out from the front so far.
    base: u64,
    /// The session owning each slot still in the space.
    owners: VecDeque<u32>,
    /// Slots with an owner.
    live: usize,
}

/// Partial states of sessions in buckets by start time.
pub(super) struct SlotBuckets {
    set: Arc<AggregateSet>,
    width: i64,
    buckets: BTreeMap<i64, Bucket>,
}

impl SlotBuckets {
    /// Buckets for sessions with inactivity gap `gap` ms.
    pub(super) fn new(set: Arc<AggregateSet>, gap: i64) -> Self {
        Self {
            set,
            // A few gaps: sessions of one bucket end within a few gaps of each other when
            // the input is in order, and far-apart inputs land in different buckets.
            width: gap.saturating_mul(4).max(1),
            buckets: BTreeMap::new(),
        }
    }

    /// The bucket of a session starting at `start`.
    pub(super) fn bucket_of(&self, start: i64) -> i64 {
        start.div_euclid(self.width)
    }

    /// A new slot for session `owner` at the end of bucket `bucket`.
    pub(super) fn alloc(&mut self, bucket: i64, owner: u32) -> Result<Part> {
        let b = match self.buckets.entry(bucket) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => e.insert(Bucket {
                space: GroupSpace::new(Arc::clone(&self.set), Arc::new(Schema::empty()))?,
                base: 0,
                owners: VecDeque::new(),
                live: 0,
            }),
        };
        b.owners.push_back(owner);
        b.live += 1;
        Ok((bucket, b.base + b.owners.len() as u64 - 1))
    }

    /// The number of the first slot still in bucket `bucket` (0 for a bucket that is not).
    pub(super) fn base(&self, bucket: i64) -> u64 {
        self.buckets.get(&bucket).map_or(0, |b| b.base)
    }

    /// The group index of a slot in its bucket's space (valid until the bucket is drained).
    pub(super) fn group(&self, part: Part) -> usize {
        self.buckets
            .get(&part.0)
            .map_or(0, |b| (part.1 - b.base) as usize)
    }

    /// Gives the slot to another session (sessions merged).
    pub(super) fn set_owner(&mut self, part: Part, owner: u32) {
        if let Some(b) = self.buckets.get_mut(&part.0)
            && let Some(slot) = part
                .1
                .checked_sub(b.base)
                .and_then(|i| b.owners.get_mut(i as usize))
        {
            *slot = owner;
        }
    }

    /// Frees a slot of a session that is gone; an empty bucket is dropped.
    pub(super) fn release(&mut self, part: Part) {
        let Some(b) = self.buckets.get_mut(&part.0) else {
            return;
        };
        if let Some(slot) = part
            .1
            .checked_sub(b.base)
            .and_then(|i| b.owners.get_mut(i as usize))
            && *slot != NO_OWNER
        {
            *slot = NO_OWNER;
            b.live -= 1;
        }
        if b.live == 0 {
            self.buckets.remove(&part.0);
        }
    }

    /// Adds rows (one entry of `groups` per row, from [`group`](Self::group)) to bucket
    /// `bucket`.
    pub(super) fn update(
        &mut self,
        bucket: i64,
        groups: &[usize],
        args: &[Vec<ArrayRef>],
    ) -> Result<()> {
        if let Some(b) = self.buckets.get_mut(&bucket) {
            b.space.update_indexed(groups, b.owners.len(), args)?;
        }
        Ok(())
    }

    /// Merges partial states (one row per entry of `groups`) into slots of bucket `bucket`.
    pub(super) fn merge(
        &mut self,
        bucket: i64,
        groups: &[usize],
        states: &[Vec<ArrayRef>],
    ) -> Result<()> {
        if let Some(b) = self.buckets.get_mut(&bucket) {
            b.space.merge_indexed(groups, b.owners.len(), states)?;
        }
        Ok(())
    }

    /// Takes the slots of bucket `bucket` before slot `upto` out: their owners and partial
    /// states, one row per slot.
    pub(super) fn drain_prefix(&mut self, bucket: i64, upto: u64) -> Result<Drained> {
        let Some(b) = self.buckets.get_mut(&bucket) else {
            return Ok((Vec::new(), Vec::new()));
        };
        let n = upto.saturating_sub(b.base).min(b.owners.len() as u64) as usize;
        let states = b.space.drain_first(n)?;
        let owners: Vec<u32> = b.owners.drain(..n).collect();
        b.base += n as u64;
        b.live -= owners.iter().filter(|&&o| o != NO_OWNER).count();
        if b.live == 0 {
            self.buckets.remove(&bucket);
        }
        Ok((owners, states))
    }

    /// Takes every slot out of every bucket (for a snapshot): per bucket, owners and partial
    /// states. No bucket is left.
    pub(super) fn drain_all(&mut self) -> Result<Vec<Drained>> {
        let mut out = Vec::with_capacity(self.buckets.len());
        for (_, mut b) in std::mem::take(&mut self.buckets) {
            let n = b.owners.len();
            let states = b.space.drain_first(n)?;
            out.push((b.owners.into_iter().collect(), states));
        }
        Ok(out)
    }
}
