//! Event-time and processing-time timers, kept as keyed state so checkpoints carry them.
//!
//! A window or CEP operator registers a timer per (key, window) and fires it when the watermark
//! (event time) or the wall clock (processing time) passes its timestamp. Timers must be
//! checkpointed: a window whose timers are lost after a restore never fires, and one whose timers are restored twice fires twice. Here a timer is an ordinary keyed-state
//! entry, so the journal, snapshot segments, restore and rescale by shard handle timers exactly
//! as they handle other state, with nothing timer-specific in the checkpoint path.
//!
//! # Layout
//!
//! A timer's fields map onto the key layout of [`crate::layout`] as follows:
//!
//! | timer field       | where it is stored                                                      |
//! |-------------------|-------------------------------------------------------------------------|
//! | timer domain      | the state name: [`EVENT_TIME_TIMERS`] or [`PROCESSING_TIME_TIMERS`]     |
//! | timestamp         | the key namespace: 8 bytes, [`encode_timestamp`]                        |
//! | key / stateShard  | the key and the shard components (the key's own shard)                  |
//! | namespace         | the sub-key: the timer's namespace bytes as given (e.g. an encoded window) |
//! | callback owner    | the job and operator components: the store belongs to one operator      |
//!
//! The stored payload is empty and timers have no TTL. Each domain is one state of kind
//! [`StateKind::Set`] with schema version 1, registered by the [`TimerService`] on first use,
//! so a snapshot writes one segment per (shard, domain): a timer segment.
//! The state names start with `__`, which is reserved for such service states.
//!
//! The timestamp is the `i64` in milliseconds with its sign bit flipped, big-endian. All
//! timestamps are 8 bytes wide, so the (length, bytes) order of namespaces is their numeric
//! order (negative times before positive): within a shard, due timers are the prefix of the
//! state's range, found with a range scan ([`weir_api::KeyedStateStore::scan`]).
//!
//! # Determinism
//!
//! Event-time timers fire at watermarks, which replay deterministically. Processing-time timers
//! use the same storage and API but fire at wall-clock time, which does not replay: after a
//! restore, timers whose time has passed fire on the first [`TimerService::pop_due`] with the
//! current clock. Use event time where results must be reproducible.

use crate::error::{StateError, StateResult};
use weir_api::state::NamespaceRange;
use weir_api::{KeyedStateStore, Result, StateAddress, StateKind, StateShardId, StateSpec};

/// The state that holds event-time timers.
pub const EVENT_TIME_TIMERS: &str = "__timers.event_time";
/// The state that holds processing-time timers.
pub const PROCESSING_TIME_TIMERS: &str = "__timers.processing_time";

/// Which clock a timer follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimerDomain {
    /// Fires when the watermark reaches the timestamp; replays deterministically.
    EventTime,
    /// Fires when the wall clock reaches the timestamp; not deterministic on replay.
    ProcessingTime,
}

impl TimerDomain {
    /// The reserved keyed state that stores this domain's timers.
    pub fn state_name(self) -> &'static str {
        match self {
            TimerDomain::EventTime => EVENT_TIME_TIMERS,
            TimerDomain::ProcessingTime => PROCESSING_TIME_TIMERS,
        }
    }
}

/// One timer. The derived order is the firing order of [`TimerService::pop_due`]: timestamp,
/// then shard, then key bytes, then namespace bytes (the domain is the same within a service).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Timer {
    /// The clock the timer follows.
    pub domain: TimerDomain,
    /// When it fires, in milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
    /// The state shard of `key`.
    pub shard: StateShardId,
    /// The key the timer belongs to.
    pub key: Vec<u8>,
    /// The timer's namespace, e.g. an encoded window; empty when the operator needs none.
    pub namespace: Vec<u8>,
}

/// Encodes a timestamp so that byte order is numeric order: the sign bit flipped, big-endian.
pub fn encode_timestamp(timestamp_ms: i64) -> [u8; 8] {
    (timestamp_ms.cast_unsigned() ^ (1 << 63)).to_be_bytes()
}

/// Decodes [`encode_timestamp`]'s bytes.
///
/// # Errors
///
/// [`StateError::Corrupt`] unless `bytes` is 8 bytes long.
pub fn decode_timestamp(bytes: &[u8]) -> StateResult<i64> {
    let raw: [u8; 8] = bytes.try_into().map_err(|_| {
        StateError::corrupt(format!(
            "a timer timestamp has {} bytes instead of 8",
            bytes.len()
        ))
    })?;
    Ok((u64::from_be_bytes(raw) ^ (1 << 63)).cast_signed())
}

/// Registers, deletes and fires the timers of one domain of one operator, through the
/// operator's keyed store.
///
/// The service holds no timers itself: they live in the store (staged in the journal, committed
/// with the batch, snapshotted per shard). Its methods address timers explicitly and never
/// change the store's current key or namespace. Cheap to create and clone; keep one per domain
/// in the operator.
///
/// ```
/// use std::sync::Arc;
/// use weir_api::{JobId, OperatorId, StateShardId};
/// use weir_state::timers::TimerService;
/// use weir_state::{ManualClock, StateBackend};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let backend = StateBackend::open_redb(&dir.path().join("t.redb"), Arc::new(ManualClock::new(0)))?;
/// let mut store = backend.keyed_store(&JobId::new("job"), &OperatorId::new("window"));
/// let timers = TimerService::event_time();
/// // The window [0, 10) of key "k" (shard 3) fires at 9.
/// timers.register(&mut store, 9, StateShardId(3), b"k", &10i64.to_be_bytes())?;
/// assert_eq!(timers.next_timestamp(&mut store, &[StateShardId(3)])?, Some(9));
/// assert!(timers.pop_due(&mut store, &[StateShardId(3)], 8)?.is_empty());
/// let fired = timers.pop_due(&mut store, &[StateShardId(3)], 9)?;
/// assert_eq!(fired.len(), 1);
/// assert_eq!(fired[0].key, b"k");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct TimerService {
    domain: TimerDomain,
    spec: StateSpec,
}

impl TimerService {
    /// A service for `domain`'s timers.
    pub fn new(domain: TimerDomain) -> Self {
        Self {
            domain,
            spec: StateSpec {
                name: domain.state_name().to_owned(),
                kind: StateKind::Set,
                schema_version: 1,
                ttl_ms: None,
            },
        }
    }

    /// A service for event-time timers.
    pub fn event_time() -> Self {
        Self::new(TimerDomain::EventTime)
    }

    /// A service for processing-time timers (wall clock; not deterministic on replay).
    pub fn processing_time() -> Self {
        Self::new(TimerDomain::ProcessingTime)
    }

    /// The service's domain.
    pub fn domain(&self) -> TimerDomain {
        self.domain
    }

    /// The spec of the reserved state this service registers (e.g. to expect it on restore).
    pub fn spec(&self) -> &StateSpec {
        &self.spec
    }

    /// Stages a timer. Registering the same (timestamp, shard, key, namespace) again is a
    /// no-op: a timer exists once.
    ///
    /// # Errors
    ///
    /// A schema error when the store holds the timer state with another kind or version.
    pub fn register<S: KeyedStateStore + ?Sized>(
        &self,
        store: &mut S,
        timestamp_ms: i64,
        shard: StateShardId,
        key: &[u8],
        namespace: &[u8],
    ) -> Result<()> {
        store.register(&self.spec)?;
        let ts = encode_timestamp(timestamp_ms);
        store.put_at(&self.spec.name, address(&ts, shard, key), namespace, &[])
    }

    /// Stages the deletion of a timer; returns whether it existed.
    ///
    /// # Errors
    ///
    /// As [`register`](Self::register).
    pub fn delete<S: KeyedStateStore + ?Sized>(
        &self,
        store: &mut S,
        timestamp_ms: i64,
        shard: StateShardId,
        key: &[u8],
        namespace: &[u8],
    ) -> Result<bool> {
        store.register(&self.spec)?;
        let ts = encode_timestamp(timestamp_ms);
        store.remove_at(&self.spec.name, address(&ts, shard, key), namespace)
    }

    /// Whether a timer is registered (staged registrations and deletions included).
    ///
    /// # Errors
    ///
    /// As [`register`](Self::register).
    pub fn contains<S: KeyedStateStore + ?Sized>(
        &self,
        store: &mut S,
        timestamp_ms: i64,
        shard: StateShardId,
        key: &[u8],
        namespace: &[u8],
    ) -> Result<bool> {
        store.register(&self.spec)?;
        let ts = encode_timestamp(timestamp_ms);
        Ok(store
            .get_at(&self.spec.name, address(&ts, shard, key), namespace)?
            .is_some())
    }

    /// Every timer of `shards` with a timestamp at or before `up_to_inclusive`, in
    /// (timestamp, shard, key, namespace) order, with their deletion staged.
    ///
    /// Pass the shards the subtask owns. Timers registered while handling the returned ones
    /// (at or before the bound) are not in this result: call again until it comes back empty
    /// if handlers may register such timers. The result is held in memory; see
    /// [`pop_due_limited`](Self::pop_due_limited) to fire in bounded chunks.
    ///
    /// # Errors
    ///
    /// A storage or schema error from the store; an internal error for a stored timer whose
    /// timestamp is not 8 bytes.
    pub fn pop_due<S: KeyedStateStore + ?Sized>(
        &self,
        store: &mut S,
        shards: &[StateShardId],
        up_to_inclusive: i64,
    ) -> Result<Vec<Timer>> {
        self.pop_due_limited(store, shards, up_to_inclusive, usize::MAX)
    }

    /// Like [`pop_due`](Self::pop_due), but returns (and deletes) only the first `max` due
    /// timers in firing order; call again for the rest.
    ///
    /// # Errors
    ///
    /// As [`pop_due`](Self::pop_due).
    pub fn pop_due_limited<S: KeyedStateStore + ?Sized>(
        &self,
        store: &mut S,
        shards: &[StateShardId],
        up_to_inclusive: i64,
        max: usize,
    ) -> Result<Vec<Timer>> {
        store.register(&self.spec)?;
        let mut shards = shards.to_vec();
        shards.sort_unstable();
        shards.dedup();
        let until = up_to_inclusive.checked_add(1).map(encode_timestamp);
        let range = NamespaceRange::new(&[], until.as_ref().map(|u| u.as_slice()));
        let limit = (max != usize::MAX).then_some(max);
        let mut due = Vec::new();
        for shard in shards {
            for entry in store.scan(&self.spec.name, shard, range, limit)? {
                due.push(Timer {
                    domain: self.domain,
                    timestamp_ms: decode_timestamp(&entry.namespace)?,
                    shard,
                    key: entry.key,
                    namespace: entry.sub_key,
                });
            }
        }
        // The first `max` overall are among the first `max` of each shard.
        due.sort_unstable();
        due.truncate(max);
        for timer in &due {
            let ts = encode_timestamp(timer.timestamp_ms);
            store.remove_at(
                &self.spec.name,
                address(&ts, timer.shard, &timer.key),
                &timer.namespace,
            )?;
        }
        Ok(due)
    }

    /// The earliest timestamp of any timer in `shards`, without removing anything: one
    /// single-entry range scan per shard.
    ///
    /// # Errors
    ///
    /// As [`pop_due`](Self::pop_due).
    pub fn next_timestamp<S: KeyedStateStore + ?Sized>(
        &self,
        store: &mut S,
        shards: &[StateShardId],
    ) -> Result<Option<i64>> {
        store.register(&self.spec)?;
        let mut earliest: Option<i64> = None;
        for &shard in shards {
            if let Some(first) = store
                .scan(&self.spec.name, shard, NamespaceRange::ALL, Some(1))?
                .first()
            {
                let ts = decode_timestamp(&first.namespace)?;
                earliest = Some(earliest.map_or(ts, |e| e.min(ts)));
            }
        }
        Ok(earliest)
    }
}

fn address<'a>(ts: &'a [u8; 8], shard: StateShardId, key: &'a [u8]) -> StateAddress<'a> {
    StateAddress {
        shard,
        namespace: ts,
        key,
    }
}

#[cfg(test)]
#[path = "timer_tests.rs"]
mod tests;
