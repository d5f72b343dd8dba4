//! Point-in-time views of committed state: the key index snapshots enumerate.

use crate::backend::{ENTRIES, REGISTRY, ReadTable, RedbStateBackend, SIZES, StateSize};
use crate::error::{StateError, StateResult};
use crate::layout::{self, EntryKey};
use redb::{ReadOnlyTable, ReadTransaction, ReadableDatabase};
use weir_api::{JobId, OperatorId, StateShardId, StateSpec};

impl RedbStateBackend {
    /// Entries and bytes of one state of one operator, over committed data.
    ///
    /// # Errors
    ///
    /// [`StateError::Storage`] when redb fails.
    pub fn state_size(
        &self,
        job: &JobId,
        operator: &OperatorId,
        state: &str,
    ) -> StateResult<StateSize> {
        let view = self.read_view()?;
        view.state_size(job, operator, state)
    }

    /// A point-in-time view of committed state for snapshots and inspection.
    ///
    /// The view is a redb read transaction: an MVCC snapshot that does not block commits, which
    /// keep going while a snapshot writer iterates the view. It sees every committed mutation
    /// (the journal's committed part is written to redb first) and none of the batch in
    /// progress.
    ///
    /// # Errors
    ///
    /// [`StateError::Storage`] when redb fails.
    pub fn read_view(&self) -> StateResult<StateReadView> {
        let mut inner = self.lock();
        inner.write_journal()?;
        let txn = inner
            .db
            .begin_read()
            .map_err(|e| StateError::storage("starting a read view", e))?;
        StateReadView::new(txn)
    }
}

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
    /// [`StateError::Corrupt`] when the key does not follow the layout.
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
/// It holds a redb read transaction: an MVCC snapshot. Commits made after the view was taken
/// are not visible in it, and they are not blocked by it, so a snapshot can be written from the
/// view off the hot path while the task keeps processing. Staged (uncommitted) mutations are
/// never visible. Keep views short-lived: redb cannot reuse pages a live view still sees.
pub struct StateReadView {
    txn: ReadTransaction,
    entries: ReadTable,
}

impl std::fmt::Debug for StateReadView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateReadView").finish_non_exhaustive()
    }
}

impl StateReadView {
    pub(crate) fn new(txn: ReadTransaction) -> StateResult<Self> {
        let entries = txn
            .open_table(ENTRIES)
            .map_err(|e| StateError::storage("opening a read view", e))?;
        Ok(Self { txn, entries })
    }

    /// Every committed entry of one shard of one operator, in key order (state by state).
    ///
    /// # Errors
    ///
    /// [`StateError::Storage`] when redb fails to start the range.
    pub fn scan(
        &self,
        job: &JobId,
        operator: &OperatorId,
        shard: StateShardId,
    ) -> StateResult<EntryScan> {
        EntryScan::new(
            &self.entries,
            layout::shard_prefix(job.as_str(), operator.as_str(), shard),
        )
    }

    /// Every committed entry of one operator, in key order: shard by shard, state by state.
    /// Snapshots use it so that an entry in a shard the subtask does not own is seen, not lost.
    pub(crate) fn scan_operator(
        &self,
        job: &JobId,
        operator: &OperatorId,
    ) -> StateResult<EntryScan> {
        EntryScan::new(
            &self.entries,
            layout::operator_prefix(job.as_str(), operator.as_str()),
        )
    }

    /// Every committed entry of one state in one shard of one operator: one snapshot segment.
    ///
    /// # Errors
    ///
    /// [`StateError::Storage`] when redb fails to start the range.
    pub fn scan_state(
        &self,
        job: &JobId,
        operator: &OperatorId,
        shard: StateShardId,
        state: &str,
    ) -> StateResult<EntryScan> {
        EntryScan::new(
            &self.entries,
            layout::state_prefix(job.as_str(), operator.as_str(), shard, state),
        )
    }

    /// The registered descriptors of one operator (kind, schema version, TTL), by state name.
    ///
    /// # Errors
    ///
    /// [`StateError::Storage`] when redb fails; [`StateError::Corrupt`] for an unreadable record.
    pub fn registered_states(
        &self,
        job: &JobId,
        operator: &OperatorId,
    ) -> StateResult<Vec<StateSpec>> {
        let ctx = "listing registered states";
        let table: ReadOnlyTable<&[u8], &[u8]> = self
            .txn
            .open_table(REGISTRY)
            .map_err(|e| StateError::storage(ctx, e))?;
        let prefix = layout::operator_prefix(job.as_str(), operator.as_str());
        let mut out = Vec::new();
        for item in table
            .range::<&[u8]>(prefix.as_slice()..)
            .map_err(|e| StateError::storage(ctx, e))?
        {
            let (k, v) = item.map_err(|e| StateError::storage(ctx, e))?;
            if !k.value().starts_with(&prefix) {
                break;
            }
            let spec = serde_json::from_slice(v.value())
                .map_err(|e| StateError::corrupt(format!("state registration: {e}")))?;
            out.push(spec);
        }
        Ok(out)
    }

    /// Entries and bytes of one state of one operator.
    ///
    /// # Errors
    ///
    /// [`StateError::Storage`] when redb fails.
    pub fn state_size(
        &self,
        job: &JobId,
        operator: &OperatorId,
        state: &str,
    ) -> StateResult<StateSize> {
        let ctx = "reading state sizes";
        let table = self
            .txn
            .open_table(SIZES)
            .map_err(|e| StateError::storage(ctx, e))?;
        let id = layout::state_id_key(job.as_str(), operator.as_str(), state);
        let found = table
            .get(id.as_slice())
            .map_err(|e| StateError::storage(ctx, e))?
            .map(|g| g.value());
        Ok(found
            .map(|(entries, bytes)| StateSize { entries, bytes })
            .unwrap_or_default())
    }
}

/// An iterator over the committed entries under one layout prefix; see [`StateReadView::scan`].
pub struct EntryScan {
    range: redb::Range<'static, &'static [u8], &'static [u8]>,
    prefix: Vec<u8>,
    done: bool,
}

impl std::fmt::Debug for EntryScan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EntryScan")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl EntryScan {
    fn new(table: &ReadTable, prefix: Vec<u8>) -> StateResult<Self> {
        let range = table
            .range::<&[u8]>(prefix.as_slice()..)
            .map_err(|e| StateError::storage("scanning state", e))?;
        Ok(Self {
            range,
            prefix,
            done: false,
        })
    }
}

impl Iterator for EntryScan {
    type Item = StateResult<RawEntry>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = match self.range.next()? {
            Ok(item) => item,
            Err(e) => {
                self.done = true;
                return Some(Err(StateError::storage("scanning state", e)));
            }
        };
        let (k, v) = item;
        if !k.value().starts_with(&self.prefix) {
            self.done = true;
            return None;
        }
        Some(
            layout::decode_stored(v.value()).map(|(expiry, payload)| RawEntry {
                key: k.value().to_vec(),
                payload: payload.to_vec(),
                expiry_ms: (expiry != 0).then_some(expiry),
            }),
        )
    }
}
