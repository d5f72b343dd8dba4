//! What holds a task's committed state: the seam between the backend's journal, TTL and
//! registrations (one implementation, [`crate::StateBackend`]) and the store underneath (a redb
//! file, [`crate::redb_engine`], or a Redis namespace, [`crate::redis_engine`]).
//!
//! Engines speak the one key layout of [`crate::layout`] and store the one stored-value format
//! (expiry header and payload), so what one engine wrote reads identically through the other.

use crate::error::{StateError, StateResult};
use crate::journal::Staged;
use std::collections::BTreeMap;
use weir_api::{JobId, OperatorId, StateSpec};

/// The state format version this build reads and writes; stored in every file.
pub const STATE_FORMAT_VERSION: u32 = 1;

/// Entries and bytes of one `(operator, state)`, counted over committed data.
///
/// `bytes` counts every entry's key and stored value (the 8-byte expiry header included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StateSize {
    /// Number of entries (values; map, list and set items).
    pub entries: u64,
    /// Key plus stored value bytes of those entries.
    pub bytes: u64,
}

/// Committed `(entry key, stored value)` pairs, in key order.
pub(crate) type EntryIter<'a> =
    Box<dyn Iterator<Item = StateResult<(Vec<u8>, Vec<u8>)>> + Send + 'a>;

/// A function that makes earlier writes durable, run without the backend's lock.
pub(crate) type SyncFn = Box<dyn FnOnce() -> StateResult<()> + Send>;

/// The store of committed state under one task's backend.
///
/// Keys and values are those of [`crate::layout`]; an engine never interprets a payload.
pub(crate) trait Engine: Send {
    /// Where the state lives, for messages (a file path, a Redis URL and namespace).
    fn describe(&self) -> String;

    /// The stored value of one entry.
    fn get(&mut self, key: &[u8]) -> StateResult<Option<Vec<u8>>>;

    /// Every entry of one key: those whose entry key starts with `key_prefix` (a
    /// [`crate::layout::key_prefix`]), in key order.
    fn key_entries(&mut self, key_prefix: &[u8]) -> StateResult<Vec<(Vec<u8>, Vec<u8>)>>;

    /// The entries of the state under `state_prefix` with keys in `[start, end)` (`end: None`:
    /// to the end of that state), in key order. `start` starts with `state_prefix`.
    fn range<'a>(
        &'a mut self,
        state_prefix: &[u8],
        start: &[u8],
        end: Option<&[u8]>,
    ) -> StateResult<EntryIter<'a>>;

    /// Writes committed outcomes (in key order) and keeps size accounting.
    fn apply(&mut self, staged: &BTreeMap<Vec<u8>, Staged>) -> StateResult<()>;

    /// The registration of one state.
    fn registration(
        &mut self,
        job: &str,
        operator: &str,
        state: &str,
    ) -> StateResult<Option<StateSpec>>;

    /// Stores the registration of one state.
    fn put_registration(&mut self, job: &str, operator: &str, spec: &StateSpec) -> StateResult<()>;

    /// Replaces every entry under `state_prefix` (one state of one shard) with `entries`.
    fn replace_state(
        &mut self,
        state_prefix: &[u8],
        entries: &[(Vec<u8>, Vec<u8>)],
    ) -> StateResult<()>;

    /// A point-in-time view of committed state.
    fn view(&mut self) -> StateResult<Box<dyn ViewSource>>;

    /// Whether writes were made since the last [`durable`](Self::durable) point.
    fn needs_sync(&self) -> bool;

    /// Starts making every write so far durable; the returned function finishes it without the
    /// backend's lock. `None` when nothing is left to do.
    fn durable(&mut self) -> StateResult<Option<SyncFn>>;

    /// Whether the backend writes the journal's committed outcomes when it is dropped. A file
    /// keeps every commit; a shared server does not take writes from a task that is going
    /// away (a new attempt may already be restoring its shards; a task that ends normally
    /// syncs before).
    fn flush_on_close(&self) -> bool {
        true
    }

    /// Whether a live view needs the committed data to stay as it is, so the journal must keep
    /// committed outcomes instead of writing them.
    fn writes_paused(&self) -> bool {
        false
    }
}

/// A point-in-time, read-only view of one engine's committed state.
pub(crate) trait ViewSource: Send {
    /// Every committed entry whose key starts with `prefix` (an operator, shard or state
    /// prefix of [`crate::layout`]), in key order.
    fn scan(&self, prefix: Vec<u8>) -> StateResult<EntryIter<'_>>;

    /// The registered descriptors of one operator.
    fn registered_states(&self, job: &JobId, operator: &OperatorId) -> StateResult<Vec<StateSpec>>;

    /// Entries and bytes of one state of one operator.
    fn state_size(&self, job: &JobId, operator: &OperatorId, state: &str)
    -> StateResult<StateSize>;

    /// Every committed entry of the job (or, for a file, every entry), in key order: for
    /// purging and for indexing committed keys.
    fn scan_all(&self) -> StateResult<EntryIter<'_>>;
}

/// A registration as engines store it (JSON), read back; `state` names it in errors.
pub(crate) fn decode_spec(json: &[u8], state: &str) -> StateResult<StateSpec> {
    serde_json::from_slice(json)
        .map_err(|e| StateError::corrupt(format!("registration of state `{state}`: {e}")))
}

/// A registration as engines store it (JSON).
pub(crate) fn encode_spec(spec: &StateSpec) -> StateResult<Vec<u8>> {
    serde_json::to_vec(spec)
        .map_err(|e| StateError::corrupt(format!("encoding a registration: {e}")))
}
