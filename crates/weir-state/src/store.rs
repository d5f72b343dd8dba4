//! The keyed store of one operator instance on the redb backend.

use crate::backend::StateBackend;
use crate::error::{StateError, StateResult};
use crate::journal::Staged;
use crate::layout;
use crate::scan;
use weir_api::{
    JobId, KeyedStateStore, NamespaceRange, OperatorId, ScannedEntry, StateAddress, StateShardId,
    StateSpec,
};

impl StateBackend {
    /// The keyed store of one operator of one job; stores share this backend's journal.
    pub fn keyed_store(&self, job: &JobId, operator: &OperatorId) -> OperatorStore {
        OperatorStore::new(self.clone(), job.as_str(), operator.as_str())
    }
}

/// One operator's keyed state in a task's [`StateBackend`]; implements [`KeyedStateStore`].
///
/// Reads see the task's staged mutations; writes are staged in the task's journal and reach redb
/// on [`StateBackend::commit`]. TTL is sliding: every read or write of a live entry of a
/// state with a TTL stages a new deadline `now + ttl`; an entry found expired is reported absent
/// and its removal is staged.
#[derive(Debug)]
pub struct OperatorStore {
    backend: StateBackend,
    job: String,
    operator: String,
    shard: StateShardId,
    namespace: Vec<u8>,
    key: Option<Vec<u8>>,
    /// Registered states: an operator has a few, so a scan beats hashing the name.
    states: Vec<StateSpec>,
    /// The entry-key prefix of the last state accessed for the current key and namespace: a
    /// get followed by a put of the same state builds it once.
    prefix_cache: Option<(String, Vec<u8>)>,
}

impl OperatorStore {
    pub(crate) fn new(backend: StateBackend, job: &str, operator: &str) -> Self {
        Self {
            backend,
            job: job.to_owned(),
            operator: operator.to_owned(),
            shard: StateShardId(0),
            namespace: Vec::new(),
            key: None,
            states: Vec::new(),
            prefix_cache: None,
        }
    }

    /// The backend (task file and journal) this store writes to.
    pub fn backend(&self) -> &StateBackend {
        &self.backend
    }

    /// The TTL of a registered state, or an error for an unregistered one.
    fn ttl_of(&self, state: &str) -> StateResult<Option<u64>> {
        self.states
            .iter()
            .find(|spec| spec.name == state)
            .map(|spec| spec.ttl_ms)
            .ok_or_else(|| StateError::UnknownState {
                operator: self.operator.clone(),
                state: state.to_owned(),
            })
    }

    /// The layout prefix of the current key in `state` (append a sub-key for an entry key).
    fn current_prefix(&mut self, state: &str) -> StateResult<&[u8]> {
        let cached = self
            .prefix_cache
            .as_ref()
            .is_some_and(|(cached_state, _)| cached_state == state);
        if !cached {
            let key = self
                .key
                .as_deref()
                .ok_or_else(|| StateError::NoCurrentKey {
                    operator: self.operator.clone(),
                })?;
            let state_prefix = layout::state_prefix(&self.job, &self.operator, self.shard, state);
            let prefix = layout::key_prefix(&state_prefix, &self.namespace, key);
            self.prefix_cache = Some((state.to_owned(), prefix));
        }
        match &self.prefix_cache {
            Some((_, prefix)) => Ok(prefix),
            None => Err(StateError::corrupt("the current key's prefix was not kept")),
        }
    }

    /// The entry key of `sub_key` of the current key in `state`, in one allocation.
    fn current_entry_key(&mut self, state: &str, sub_key: &[u8]) -> StateResult<Vec<u8>> {
        let prefix = self.current_prefix(state)?;
        let mut entry_key = Vec::with_capacity(prefix.len() + sub_key.len());
        entry_key.extend_from_slice(prefix);
        entry_key.extend_from_slice(sub_key);
        Ok(entry_key)
    }

    /// The entry key of `sub_key` at an explicit address in `state`.
    fn entry_key_at(&self, state: &str, at: StateAddress<'_>, sub_key: &[u8]) -> Vec<u8> {
        layout::EntryKey {
            job: &self.job,
            operator: &self.operator,
            shard: at.shard,
            state,
            namespace: at.namespace,
            key: at.key,
            sub_key,
        }
        .encode()
    }

    fn get_impl(&mut self, state: &str, sub_key: &[u8]) -> StateResult<Option<Vec<u8>>> {
        let ttl = self.ttl_of(state)?;
        let entry_key = self.current_entry_key(state, sub_key)?;
        self.get_entry(ttl, entry_key)
    }

    fn get_at_impl(
        &mut self,
        state: &str,
        at: StateAddress<'_>,
        sub_key: &[u8],
    ) -> StateResult<Option<Vec<u8>>> {
        let ttl = self.ttl_of(state)?;
        let entry_key = self.entry_key_at(state, at, sub_key);
        self.get_entry(ttl, entry_key)
    }

    fn get_entry(&mut self, ttl: Option<u64>, entry_key: Vec<u8>) -> StateResult<Option<Vec<u8>>> {
        let mut inner = self.backend.lock();
        let Some(stored) = inner.lookup(&entry_key)? else {
            return Ok(None);
        };
        let (expiry, payload) = layout::decode_stored(&stored)?;
        // The clock is read only where an expiry is involved.
        let now = if expiry != 0 || ttl.is_some() {
            inner.clock.now_ms()
        } else {
            0
        };
        if layout::is_expired(expiry, now) {
            inner.journal.stage(entry_key, Staged::Delete);
            return Ok(None);
        }
        let payload = payload.to_vec();
        if let Some(ttl) = ttl {
            let refreshed = layout::encode_stored(now.saturating_add(ttl), &payload);
            inner.journal.stage(entry_key, Staged::Put(refreshed));
        }
        Ok(Some(payload))
    }

    fn put_impl(&mut self, state: &str, sub_key: &[u8], payload: &[u8]) -> StateResult<()> {
        let ttl = self.ttl_of(state)?;
        let entry_key = self.current_entry_key(state, sub_key)?;
        self.put_entry(ttl, entry_key, payload);
        Ok(())
    }

    fn put_at_impl(
        &mut self,
        state: &str,
        at: StateAddress<'_>,
        sub_key: &[u8],
        payload: &[u8],
    ) -> StateResult<()> {
        let ttl = self.ttl_of(state)?;
        let entry_key = self.entry_key_at(state, at, sub_key);
        self.put_entry(ttl, entry_key, payload);
        Ok(())
    }

    fn put_entry(&mut self, ttl: Option<u64>, entry_key: Vec<u8>, payload: &[u8]) {
        let mut inner = self.backend.lock();
        let expiry = ttl.map_or(0, |ttl| inner.clock.now_ms().saturating_add(ttl));
        inner.journal.stage(
            entry_key,
            Staged::Put(layout::encode_stored(expiry, payload)),
        );
    }

    fn remove_impl(&mut self, state: &str, sub_key: &[u8]) -> StateResult<bool> {
        self.ttl_of(state)?;
        let entry_key = self.current_entry_key(state, sub_key)?;
        self.remove_entry(entry_key)
    }

    fn remove_at_impl(
        &mut self,
        state: &str,
        at: StateAddress<'_>,
        sub_key: &[u8],
    ) -> StateResult<bool> {
        self.ttl_of(state)?;
        let entry_key = self.entry_key_at(state, at, sub_key);
        self.remove_entry(entry_key)
    }

    fn remove_entry(&mut self, entry_key: Vec<u8>) -> StateResult<bool> {
        self.backend.lock().remove(entry_key)
    }

    fn entries_impl(&mut self, state: &str) -> StateResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let ttl = self.ttl_of(state)?;
        let prefix = self.current_prefix(state)?.to_vec();
        let mut inner = self.backend.lock();
        let now = inner.clock.now_ms();
        let mut out = Vec::new();
        for (entry_key, stored) in inner.lookup_prefix(&prefix)? {
            let (expiry, payload) = layout::decode_stored(&stored)?;
            let sub_key = entry_key[prefix.len()..].to_vec();
            if layout::is_expired(expiry, now) {
                inner.journal.stage(entry_key, Staged::Delete);
                continue;
            }
            if let Some(ttl) = ttl {
                let refreshed = layout::encode_stored(now.saturating_add(ttl), payload);
                inner.journal.stage(entry_key, Staged::Put(refreshed));
            }
            out.push((sub_key, payload.to_vec()));
        }
        Ok(out)
    }

    fn scan_impl(
        &mut self,
        state: &str,
        shard: StateShardId,
        namespaces: NamespaceRange<'_>,
        limit: Option<usize>,
    ) -> StateResult<Vec<ScannedEntry>> {
        let ttl = self.ttl_of(state)?;
        let prefix = layout::state_prefix(&self.job, &self.operator, shard, state);
        let start = layout::namespace_bound(&prefix, namespaces.from);
        let end = match namespaces.until {
            Some(until) => Some(layout::namespace_bound(&prefix, until)),
            None => layout::prefix_successor(&prefix),
        };
        let mut inner = self.backend.lock();
        let now = inner.clock.now_ms();
        let found = scan::lookup_range(&mut inner, &prefix, &start, end.as_deref(), now, limit)?;
        for key in found.expired {
            inner.journal.stage(key, Staged::Delete);
        }
        let mut out = Vec::with_capacity(found.live.len());
        for (entry_key, stored) in found.live {
            let (_, payload) = layout::decode_stored(&stored)?;
            let rest = entry_key.get(prefix.len()..).ok_or_else(|| {
                StateError::corrupt("a scanned entry key is shorter than its state prefix")
            })?;
            let (namespace, key, sub_key) = layout::split_after_state(rest)?;
            out.push(ScannedEntry {
                namespace: namespace.to_vec(),
                key: key.to_vec(),
                sub_key: sub_key.to_vec(),
                payload: payload.to_vec(),
            });
            if let Some(ttl) = ttl {
                let refreshed = layout::encode_stored(now.saturating_add(ttl), payload);
                inner.journal.stage(entry_key, Staged::Put(refreshed));
            }
        }
        Ok(out)
    }

    fn clear_impl(&mut self, state: &str) -> StateResult<()> {
        self.ttl_of(state)?;
        let prefix = self.current_prefix(state)?.to_vec();
        let mut inner = self.backend.lock();
        for (entry_key, _) in inner.lookup_prefix(&prefix)? {
            // A delete where redb holds the entry, nothing where only the journal did.
            inner.remove(entry_key)?;
        }
        Ok(())
    }

    fn register_impl(&mut self, spec: &StateSpec) -> StateResult<()> {
        if self.states.iter().any(|s| s == spec) {
            return Ok(());
        }
        self.backend.register(&self.job, &self.operator, spec)?;
        self.states.retain(|s| s.name != spec.name);
        self.states.push(spec.clone());
        Ok(())
    }
}

impl KeyedStateStore for OperatorStore {
    fn set_current_key(&mut self, key: &[u8], shard: StateShardId) {
        self.prefix_cache = None;
        match &mut self.key {
            Some(current) => {
                current.clear();
                current.extend_from_slice(key);
            }
            None => self.key = Some(key.to_vec()),
        }
        self.shard = shard;
    }

    fn set_current_namespace(&mut self, namespace: &[u8]) {
        self.prefix_cache = None;
        self.namespace.clear();
        self.namespace.extend_from_slice(namespace);
    }

    fn register(&mut self, spec: &StateSpec) -> weir_api::Result<()> {
        Ok(self.register_impl(spec)?)
    }

    fn get(&mut self, state: &str, sub_key: &[u8]) -> weir_api::Result<Option<Vec<u8>>> {
        Ok(self.get_impl(state, sub_key)?)
    }

    fn put(&mut self, state: &str, sub_key: &[u8], payload: &[u8]) -> weir_api::Result<()> {
        Ok(self.put_impl(state, sub_key, payload)?)
    }

    fn remove(&mut self, state: &str, sub_key: &[u8]) -> weir_api::Result<bool> {
        Ok(self.remove_impl(state, sub_key)?)
    }

    fn entries(&mut self, state: &str) -> weir_api::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        Ok(self.entries_impl(state)?)
    }

    fn clear(&mut self, state: &str) -> weir_api::Result<()> {
        Ok(self.clear_impl(state)?)
    }

    fn get_at(
        &mut self,
        state: &str,
        at: StateAddress<'_>,
        sub_key: &[u8],
    ) -> weir_api::Result<Option<Vec<u8>>> {
        Ok(self.get_at_impl(state, at, sub_key)?)
    }

    fn put_at(
        &mut self,
        state: &str,
        at: StateAddress<'_>,
        sub_key: &[u8],
        payload: &[u8],
    ) -> weir_api::Result<()> {
        Ok(self.put_at_impl(state, at, sub_key, payload)?)
    }

    fn remove_at(
        &mut self,
        state: &str,
        at: StateAddress<'_>,
        sub_key: &[u8],
    ) -> weir_api::Result<bool> {
        Ok(self.remove_at_impl(state, at, sub_key)?)
    }

    fn scan(
        &mut self,
        state: &str,
        shard: StateShardId,
        namespaces: NamespaceRange<'_>,
        limit: Option<usize>,
    ) -> weir_api::Result<Vec<ScannedEntry>> {
        Ok(self.scan_impl(state, shard, namespaces, limit)?)
    }
}
