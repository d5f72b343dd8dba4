//! The keyed-state API every stateful operator uses: descriptors and the byte-level store trait.
//!
//! Weir has exactly one state API, one key layout and one value codec (docs/state.md). This module
//! holds the parts that need no storage engine and no codec:
//!
//! - [`StateDescriptor`]: a state's name, kind, schema version and optional TTL, typed by a
//!   marker ([`Value`], [`Map`], [`List`], [`Set`]) so a handle of the wrong kind cannot be asked
//!   for.
//! - [`KeyedStateStore`]: the object-safe, byte-level store an operator receives. It is scoped to
//!   the operator's current key (and key namespace) and moves raw bytes; explicitly addressed
//!   access ([`StateAddress`]) and a cross-key [`scan`](KeyedStateStore::scan) over a range of
//!   namespaces ([`NamespaceRange`]) serve timers and windows.
//!
//! The typed handles (`ValueState<T>`, `MapState<K, V>`, ...) that encode values with the one
//! codec live in the `weir-state` crate (`weir_state::KeyedStateExt`), because the codec is an
//! implementation choice this crate must not carry. The default backend, on embedded redb, is
//! there too; nothing here depends on it.

use crate::error::Result;
use crate::ids::StateShardId;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

/// The four kinds of keyed state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StateKind {
    /// One value per key.
    Value,
    /// A map per key: map keys to values.
    Map,
    /// An ordered list of values per key.
    List,
    /// A set of elements per key.
    Set,
}

impl fmt::Display for StateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StateKind::Value => "value",
            StateKind::Map => "map",
            StateKind::List => "list",
            StateKind::Set => "set",
        })
    }
}

/// The untyped part of a descriptor: what the backend registers and a snapshot records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateSpec {
    /// State name, unique within one operator.
    pub name: String,
    /// Which of the four kinds the state is.
    pub kind: StateKind,
    /// Version of the value's schema; a stored state with another version needs a migration.
    pub schema_version: u32,
    /// Time to live of each entry, refreshed on every read or write (sliding expiry); `None`
    /// keeps entries until they are removed.
    pub ttl_ms: Option<u64>,
}

/// Marker of a value state holding one `T` per key.
#[derive(Debug)]
pub struct Value<T>(PhantomData<fn() -> T>);
/// Marker of a map state holding a map `K -> V` per key.
#[derive(Debug)]
pub struct Map<K, V>(PhantomData<fn() -> (K, V)>);
/// Marker of a list state holding an ordered list of `T` per key.
#[derive(Debug)]
pub struct List<T>(PhantomData<fn() -> T>);
/// Marker of a set state holding a set of `T` per key.
#[derive(Debug)]
pub struct Set<T>(PhantomData<fn() -> T>);

/// Implemented by the four state markers; ties a marker to its [`StateKind`].
pub trait StateType {
    /// The kind a descriptor of this marker registers.
    const KIND: StateKind;
}

impl<T> StateType for Value<T> {
    const KIND: StateKind = StateKind::Value;
}
impl<K, V> StateType for Map<K, V> {
    const KIND: StateKind = StateKind::Map;
}
impl<T> StateType for List<T> {
    const KIND: StateKind = StateKind::List;
}
impl<T> StateType for Set<T> {
    const KIND: StateKind = StateKind::Set;
}

/// A typed state descriptor: `StateDescriptor::<Value<u64>>::new("count")`.
///
/// The marker type parameter fixes the kind and the Rust types of the state; the schema version
/// (default 1) and the TTL (default none) are set with the builder methods. Descriptors are cheap
/// to clone and are usually kept in a `static` or in the operator.
pub struct StateDescriptor<S> {
    spec: StateSpec,
    marker: PhantomData<fn() -> S>,
}

impl<S: StateType> StateDescriptor<S> {
    /// A descriptor of schema version 1 without TTL.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            spec: StateSpec {
                name: name.into(),
                kind: S::KIND,
                schema_version: 1,
                ttl_ms: None,
            },
            marker: PhantomData,
        }
    }

    /// Sets the schema version of the value type; bump it whenever the encoded form changes.
    pub fn with_schema_version(mut self, version: u32) -> Self {
        self.spec.schema_version = version;
        self
    }

    /// Sets a sliding time to live: an entry expires `ttl` after its last read or write.
    /// Sub-millisecond parts are rounded up to whole milliseconds.
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        let ms = ttl.as_millis() + u128::from(!ttl.subsec_nanos().is_multiple_of(1_000_000));
        self.spec.ttl_ms = Some(u64::try_from(ms).unwrap_or(u64::MAX));
        self
    }
}

impl<S> StateDescriptor<S> {
    /// The untyped spec the backend registers.
    pub fn spec(&self) -> &StateSpec {
        &self.spec
    }

    /// The state's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }
}

impl<S> Clone for StateDescriptor<S> {
    fn clone(&self) -> Self {
        Self {
            spec: self.spec.clone(),
            marker: PhantomData,
        }
    }
}

impl<S> fmt::Debug for StateDescriptor<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateDescriptor")
            .field("spec", &self.spec)
            .finish()
    }
}

/// The byte-level keyed state of one operator instance, scoped to its current key.
///
/// Every entry lives under `(job, operator, state shard, state name, key namespace, key)` plus,
/// for map/list/set states, a sub-key (the encoded map key, list position or set element). The
/// job and operator are fixed when the store is created; the operator sets the key and shard per
/// record. Operators normally use the typed handles of `weir_state::KeyedStateExt` instead of
/// these methods.
///
/// Contract:
/// - A state MUST be registered with [`register`](Self::register) before it is read or written;
///   otherwise the calls fail with an internal error.
/// - [`set_current_key`](Self::set_current_key) MUST be called before any access to the current
///   key; the shard MUST be the key's `weir_plan::key_hash` shard (also in a [`StateAddress`]),
///   or a snapshot and a rescale put the key in the wrong subtask. The `*_at` methods and
///   [`scan`](Self::scan) address entries explicitly and leave the current key alone.
/// - Writes are staged in the task's journal and are committed only when the runtime commits
///   the batch (its output was handed on); reads see staged writes (read-your-writes). What
///   survives a crash is what the last checkpoint captured, not the local store.
/// - An entry whose TTL has passed is never returned.
///
/// # Errors
///
/// Every fallible method returns [`crate::Error`]: an external error when storage fails, a schema
/// error when a descriptor conflicts with the stored one, an internal error on a broken contract.
pub trait KeyedStateStore: Send {
    /// Sets the key (its bytes, e.g. the Arrow row-format or normalized key) and its state shard.
    fn set_current_key(&mut self, key: &[u8], shard: StateShardId);

    /// Sets the key namespace (e.g. an encoded window); the default namespace is empty.
    fn set_current_namespace(&mut self, namespace: &[u8]);

    /// Registers a state, checking its kind and schema version against the stored registration.
    ///
    /// # Errors
    ///
    /// A schema error naming operator, state and both versions when the stored schema version
    /// differs and no migration is registered, or when the kind differs.
    fn register(&mut self, spec: &StateSpec) -> Result<()>;

    /// The payload of one entry of the current key; `sub_key` is empty for value states.
    fn get(&mut self, state: &str, sub_key: &[u8]) -> Result<Option<Vec<u8>>>;

    /// Stages a put of one entry of the current key.
    fn put(&mut self, state: &str, sub_key: &[u8], payload: &[u8]) -> Result<()>;

    /// Stages the removal of one entry of the current key; returns whether a live entry existed.
    fn remove(&mut self, state: &str, sub_key: &[u8]) -> Result<bool>;

    /// Every live `(sub_key, payload)` entry of the current key, in ascending sub-key byte order.
    fn entries(&mut self, state: &str) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;

    /// Stages the removal of every entry of the current key in this state.
    fn clear(&mut self, state: &str) -> Result<()>;

    /// The payload of one entry at an explicit address, like [`get`](Self::get) but without
    /// touching the current key and namespace (services such as timers write on behalf of
    /// keys other than the record's).
    fn get_at(
        &mut self,
        state: &str,
        at: StateAddress<'_>,
        sub_key: &[u8],
    ) -> Result<Option<Vec<u8>>>;

    /// Stages a put of one entry at an explicit address; the current key and namespace are
    /// unchanged.
    fn put_at(
        &mut self,
        state: &str,
        at: StateAddress<'_>,
        sub_key: &[u8],
        payload: &[u8],
    ) -> Result<()>;

    /// Stages the removal of one entry at an explicit address; returns whether a live entry
    /// existed. The current key and namespace are unchanged.
    fn remove_at(&mut self, state: &str, at: StateAddress<'_>, sub_key: &[u8]) -> Result<bool>;

    /// Every live entry of one registered state in one shard whose namespace lies in
    /// `namespaces`, across all keys, in layout order: by namespace, then key, then sub-key,
    /// where namespace and key compare by `(length, bytes)` (see [`NamespaceRange`]) and the
    /// sub-key by bytes.
    ///
    /// Staged writes and removals of the batch are included (read-your-writes). Expired entries
    /// are skipped and their removal is staged; live entries of a state with a TTL get a new
    /// deadline, as every read does. At most `limit` entries are returned when it is set (the
    /// scan stops there, so `Some(1)` is a cheap "first entry"). The current key and namespace
    /// are unchanged, and no current key is needed.
    ///
    /// Implementations MUST read only the key range of the requested namespaces (a range scan,
    /// not a pass over the whole state), because operators call this on every watermark.
    fn scan(
        &mut self,
        state: &str,
        shard: StateShardId,
        namespaces: NamespaceRange<'_>,
        limit: Option<usize>,
    ) -> Result<Vec<ScannedEntry>>;
}

/// The address of one key's entries independent of the store's current key: shard, key
/// namespace and key. Used by [`KeyedStateStore::get_at`], [`put_at`](KeyedStateStore::put_at)
/// and [`remove_at`](KeyedStateStore::remove_at).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateAddress<'a> {
    /// The key's state shard (its `weir_plan::key_hash` shard).
    pub shard: StateShardId,
    /// The key namespace (empty by default).
    pub namespace: &'a [u8],
    /// The key's bytes.
    pub key: &'a [u8],
}

/// A half-open range `[from, until)` of key namespaces for [`KeyedStateStore::scan`];
/// `until: None` is unbounded.
///
/// Namespaces compare by `(length, bytes)`, not by bytes alone, because the key layout stores
/// each namespace behind a `u32` big-endian length prefix: every 2-byte namespace sorts before
/// every 3-byte one. Namespaces of one fixed width therefore compare as plain bytes, so
/// fixed-width order-preserving encodings (e.g. an 8-byte big-endian timestamp with its sign
/// bit flipped) scan in numeric order. The empty namespace is the smallest of all.
///
/// ```
/// use weir_api::state::NamespaceRange;
///
/// let range = NamespaceRange::new(&[0, 5], Some(&[1, 0]));
/// assert!(range.contains(&[0, 9]));
/// assert!(!range.contains(&[1, 0]));
/// // A 1-byte namespace is below every 2-byte one, whatever its bytes.
/// assert!(!range.contains(&[0xFF]));
/// assert!(NamespaceRange::ALL.contains(&[]));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamespaceRange<'a> {
    /// Inclusive lower bound.
    pub from: &'a [u8],
    /// Exclusive upper bound; `None` for no upper bound.
    pub until: Option<&'a [u8]>,
}

impl<'a> NamespaceRange<'a> {
    /// Every namespace.
    pub const ALL: NamespaceRange<'static> = NamespaceRange {
        from: &[],
        until: None,
    };

    /// `[from, until)`; `until: None` is unbounded.
    pub fn new(from: &'a [u8], until: Option<&'a [u8]>) -> Self {
        Self { from, until }
    }

    /// Whether `namespace` lies in the range, in `(length, bytes)` order.
    pub fn contains(&self, namespace: &[u8]) -> bool {
        let key = (namespace.len(), namespace);
        key >= (self.from.len(), self.from)
            && self.until.is_none_or(|until| key < (until.len(), until))
    }
}

/// One entry found by [`KeyedStateStore::scan`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ScannedEntry {
    /// The entry's key namespace.
    pub namespace: Vec<u8>,
    /// The entry's key.
    pub key: Vec<u8>,
    /// The sub-key: empty for value states; the encoded map key, list position (u64 BE) or
    /// encoded set element otherwise.
    pub sub_key: Vec<u8>,
    /// The payload as [`KeyedStateStore::get`] returns it.
    pub payload: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_kind_comes_from_the_marker() {
        let d = StateDescriptor::<Map<String, u64>>::new("m")
            .with_schema_version(3)
            .with_ttl(Duration::from_micros(1500));
        assert_eq!(d.spec().kind, StateKind::Map);
        assert_eq!(d.spec().schema_version, 3);
        assert_eq!(d.spec().ttl_ms, Some(2));
        assert_eq!(
            serde_json::to_string(d.spec()).ok().as_deref(),
            Some(r#"{"name":"m","kind":"map","schemaVersion":3,"ttlMs":2}"#)
        );
    }
}
