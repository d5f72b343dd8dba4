//! Weir's keyed state: the one key layout, the one value codec, and two engines under one
//! backend: embedded [redb] (the default) and Redis, with the journal, TTL, size accounting and
//! schema versions.
//!
//! This crate owns:
//! - the key layout ([`layout`]) and the value codec ([`codec`], postcard);
//! - [`StateBackend`]: one task's state, the execution-local journal
//!   ([`StateBackend::commit`] / [`StateBackend::rollback`]; committed mutations are written to
//!   the engine in bulk, up to [`JOURNAL_BUDGET`] at a time), TTL purging, size accounting and
//!   schema migrations, over an engine: one redb file per task with a stored format version
//!   ([`StateBackend::open_redb`]), or the task's shards in a Redis namespace
//!   ([`StateBackend::connect_redis`], key layout in docs/state.md);
//! - [`OperatorStore`]: one operator's [`weir_api::KeyedStateStore`];
//! - the typed handles ([`KeyedStateExt`]: [`ValueState`], [`MapState`], [`ListState`],
//!   [`SetState`]);
//! - [`StateReadView`]: point-in-time enumeration of committed state per (operator, shard, state),
//!   the key index snapshots use;
//! - [`timers`]: event-time and processing-time timers stored as keyed state
//!   ([`timers::TimerService`]), so snapshots, restore and rescale carry them;
//! - [`row_codec`]: Weir's own stable byte format for Arrow values (group keys, accumulator
//!   states) kept in keyed state;
//! - snapshots ([`SegmentStore`]): one Parquet segment per (operator, subtask, shard, state) in
//!   an object store, with a SHA-256 each ([`SegmentDescriptor`]); restore into a fresh backend;
//!   rescale by moving whole shards ([`assign_segments`]);
//! - image segments of in-memory operators: the [`weir_api::StateRows`] of one state of one
//!   subtask, all its shards in one Parquet file ([`SegmentStore::write_image`]), read back
//!   for the shards a restoring subtask owns ([`SegmentStore::read_image`]).
//!
//! Among Weir crates it depends on `weir-api` and `weir-plan` (shard ownership for snapshots and
//! rescale). It must not depend on the runtime, on a transport, on connectors or on DataFusion.
//! The API traits live in `weir-api`; nothing there depends on redb.
//!
//! ```
//! use std::sync::Arc;
//! use weir_api::state::{Map, Value};
//! use weir_api::{JobId, KeyedStateStore, OperatorId, StateDescriptor, StateShardId};
//! use weir_state::{KeyedStateExt, ManualClock, StateBackend};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let backend = StateBackend::open_redb(&dir.path().join("task.redb"), Arc::new(ManualClock::new(0)))?;
//! let mut store = backend.keyed_store(&JobId::new("job"), &OperatorId::new("count"));
//! let count = StateDescriptor::<Value<u64>>::new("count");
//! let last = StateDescriptor::<Map<String, i64>>::new("last");
//!
//! store.set_current_key(b"alice", StateShardId(7));
//! let n = store.value_state(&count)?.value()?.unwrap_or(0);
//! store.value_state(&count)?.update(&(n + 1))?;
//! store.map_state(&last)?.put(&"price".to_owned(), &42)?;
//! backend.commit()?; // the batch's output was acknowledged downstream
//!
//! assert_eq!(store.value_state(&count)?.value()?, Some(1));
//! # Ok(())
//! # }
//! ```

mod backend;
mod clock;
pub mod codec;
mod committed_keys;
mod engine;
mod error;
mod handle;
mod image;
mod journal;
pub mod layout;
mod merge;
mod redb_engine;
mod redis_engine;
mod rescale;
mod restore;
pub mod row_codec;
mod scan;
pub mod segment;
mod snapshot;
mod store;
pub mod timers;
mod view;

pub use backend::{JOURNAL_BUDGET, Migration, MigrationFn, StateBackend};
pub use clock::{ManualClock, StateClock, SystemClock};
pub use engine::{STATE_FORMAT_VERSION, StateSize};
pub use error::{StateError, StateResult};
pub use handle::{KeyedStateExt, ListState, MapState, SetState, ValueState};
pub use layout::EntryKey;
pub use redb_engine::{STATE_CACHE_BYTES, task_state_file};
pub use redis_engine::{DEFAULT_REDIS_PREFIX, RedisConfig};
pub use rescale::{KeyHashFn, assign_segments};
pub use restore::{RestoreOptions, RestoreReport};
pub use row_codec::{ROW_CODEC_VERSION, decode_rows, encode_rows};
pub use segment::SegmentDescriptor;
pub use snapshot::{PendingSnapshot, SegmentStore, SnapshotScope};
pub use store::OperatorStore;
pub use timers::{
    EVENT_TIME_TIMERS, PROCESSING_TIME_TIMERS, Timer, TimerDomain, TimerService, decode_timestamp,
    encode_timestamp,
};
pub use view::{EntryScan, RawEntry, StateReadView};

#[cfg(test)]
mod image_tests;
#[cfg(test)]
mod redis_tests;
#[cfg(test)]
mod scan_tests;
#[cfg(test)]
mod snapshot_tests;
#[cfg(test)]
mod tests;
