//! Point-in-time views of committed state: the key index snapshots enumerate.

use crate::engine::{EntryIter, StateSize, ViewSource};
use crate::error::StateResult;
use crate::journal::Staged;
use crate::layout::{self, EntryKey};
use crate::merge::Merged;
use std::collections::BTreeMap;
use std::ops::Bound;
use weir_api::{JobId, OperatorId, StateShardId, StateSpec};

/// One committed entry as stored: the layout key, the payload and the TTL deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEntry {
    /// The entry key in the layout of [`crate::layout`]; parse it with [`EntryKey::decode`].
    pub key: Vec<u8>,
    /// The payload, encoded with the state codec (without the expiry header).
    pub payload: Vec<u8>,
    /// The TTL deadline in ms since the Unix epoch, if the state has a TTL.
    pub expiry_ms: Option<u64>,
}

impl RawEntry {
    /// The parsed components of [`key`](Self::key).
    ///
    /// # Errors
    ///
    /// [`crate::StateError::Corrupt`] when the key does not follow the layout.
    pub fn parts(&self) -> StateResult<EntryKey<'_>> {
        EntryKey::decode(&self.key)
    }

    /// Whether the entry's deadline has passed at `now_ms` (it would never be returned to an
    /// operator, and a snapshot may leave it out).
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expiry_ms
            .is_some_and(|e| layout::is_expired(e, now_ms))
    }
}

/// A point-in-time, read-only view of one task's committed state.
///
/// Commits made after the view was taken are not visible in it, and they are not blocked by
/// it, so a snapshot can be written from the view off the hot path while the task keeps
/// processing. Staged (uncommitted) mutations are never visible. Keep views short-lived: redb
/// cannot reuse pages a live view still sees, and a Redis backend keeps commits in memory
/// while one lives.
pub struct StateReadView {
    source: Box<dyn ViewSource>,
    /// Committed outcomes the engine had not taken when the view was made, laid over it.
    overlay: BTreeMap<Vec<u8>, Staged>,
}

impl std::fmt::Debug for StateReadView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateReadView")
            .field("overlay", &self.overlay.len())
            .finish_non_exhaustive()
    }
}

impl StateReadView {
    pub(crate) fn new(source: Box<dyn ViewSource>, overlay: BTreeMap<Vec<u8>, Staged>) -> Self {
        Self { source, overlay }
    }

    /// Every committed entry of one shard of one operator, in key order (state by state).
    ///
    /// # Errors
    ///
    /// [`crate::StateError::Storage`] or [`crate::StateError::Redis`] when the engine fails
    /// to start the scan.
    pub fn scan(
        &self,
        job: &JobId,
        operator: &OperatorId,
        shard: StateShardId,
    ) -> StateResult<EntryScan<'_>> {
        self.entries(layout::shard_prefix(job.as_str(), operator.as_str(), shard))
    }

    /// Every committed entry of one operator, in key order: shard by shard, state by state.
    /// Snapshots use it so that an entry in a shard the subtask does not own is seen, not lost.
    pub(crate) fn scan_operator(
        &self,
        job: &JobId,
        operator: &OperatorId,
    ) -> StateResult<EntryScan<'_>> {
        self.entries(layout::operator_prefix(job.as_str(), operator.as_str()))
    }

    /// Every committed entry of one state in one shard of one operator: one snapshot segment.
    ///
    /// # Errors
    ///
    /// [`crate::StateError::Storage`] or [`crate::StateError::Redis`] when the engine fails
    /// to start the scan.
    pub fn scan_state(
        &self,
        job: &JobId,
        operator: &OperatorId,
        shard: StateShardId,
        state: &str,
    ) -> StateResult<EntryScan<'_>> {
        self.entries(layout::state_prefix(
            job.as_str(),
            operator.as_str(),
            shard,
            state,
        ))
    }

    /// The registered descriptors of one operator (kind, schema version, TTL), by state name.
    ///
    /// # Errors
    ///
    /// [`crate::StateError::Storage`] or [`crate::StateError::Redis`] when the engine fails;
    /// [`crate::StateError::Corrupt`] for an unreadable record.
    pub fn registered_states(
        &self,
        job: &JobId,
        operator: &OperatorId,
    ) -> StateResult<Vec<StateSpec>> {
        self.source.registered_states(job, operator)
    }

    /// Entries and bytes of one state of one operator.
    ///
    /// # Errors
    ///
    /// [`crate::StateError::Storage`] or [`crate::StateError::Redis`] when the engine fails.
    pub fn state_size(
        &self,
        job: &JobId,
        operator: &OperatorId,
        state: &str,
    ) -> StateResult<StateSize> {
        if self.overlay.is_empty() {
            return self.source.state_size(job, operator, state);
        }
        // Committed outcomes wait over the engine: count the merged entries.
        size_of_state(
            self.scan_prefix(layout::operator_prefix(job.as_str(), operator.as_str()))?,
            state,
        )
    }

    fn entries(&self, prefix: Vec<u8>) -> StateResult<EntryScan<'_>> {
        Ok(EntryScan {
            inner: self.scan_prefix(prefix)?,
            done: false,
        })
    }

    /// `(entry key, stored value)` of every committed entry under `prefix`, in key order.
    pub(crate) fn scan_prefix(&self, prefix: Vec<u8>) -> StateResult<EntryIter<'_>> {
        let committed = self.source.scan(prefix.clone())?;
        Ok(self.laid_over(committed, prefix))
    }

    /// `(entry key, stored value)` of every committed entry of the engine, in key order.
    pub(crate) fn scan_everything(&self) -> StateResult<EntryIter<'_>> {
        let committed = self.source.scan_all()?;
        Ok(self.laid_over(committed, Vec::new()))
    }

    fn laid_over<'a>(&'a self, committed: EntryIter<'a>, prefix: Vec<u8>) -> EntryIter<'a> {
        if self.overlay.is_empty() {
            return committed;
        }
        let staged = self
            .overlay
            .range::<[u8], _>((Bound::Included(prefix.as_slice()), Bound::Unbounded))
            .take_while(move |(k, _)| k.starts_with(&prefix));
        Box::new(
            Merged::new(committed, staged)
                .filter_map(|item| item.map(|(k, v)| v.map(|v| (k, v))).transpose()),
        )
    }
}

/// Entries and bytes of `state` among an operator's `entries`, counted one by one.
pub(crate) fn size_of_state(entries: EntryIter<'_>, state: &str) -> StateResult<StateSize> {
    let mut size = StateSize::default();
    for item in entries {
        let (key, stored) = item?;
        if EntryKey::decode(&key)?.state == state {
            size.entries += 1;
            size.bytes += (key.len() + stored.len()) as u64;
        }
    }
    Ok(size)
}

/// An iterator over the committed entries under one layout prefix; see [`StateReadView::scan`].
pub struct EntryScan<'a> {
    inner: EntryIter<'a>,
    done: bool,
}

impl std::fmt::Debug for EntryScan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EntryScan").finish_non_exhaustive()
    }
}

impl Iterator for EntryScan<'_> {
    type Item = StateResult<RawEntry>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let (key, stored) = match self.inner.next()? {
            Ok(item) => item,
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        Some(
            layout::decode_stored(&stored).map(|(expiry, payload)| RawEntry {
                payload: payload.to_vec(),
                expiry_ms: (expiry != 0).then_some(expiry),
                key,
            }),
        )
    }
}
