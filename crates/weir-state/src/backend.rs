//! The keyed-state backend of one task: the journal, TTL purging, registrations and
//! migrations over an engine that holds committed state (a redb file or a Redis namespace).

use crate::clock::StateClock;
use crate::committed_keys::CommittedKeys;
use crate::engine::{Engine, StateSize};
use crate::error::{StateError, StateResult};
use crate::journal::{Journal, Staged};
use crate::layout::{self, EntryKey};
use crate::redb_engine::{RedbEngine, task_state_file};
use crate::redis_engine::{RedisConfig, RedisEngine};
use crate::view::StateReadView;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use weir_api::{JobId, OperatorId, StateSpec, TaskId};

/// Bytes of committed mutations the journal holds before [`StateBackend::commit`] writes
/// them to the engine (keys, values and bookkeeping, approximately).
pub const JOURNAL_BUDGET: usize = 32 << 20;

/// A migration: the stored payload of an old schema version -> the payload of the new version.
pub type Migration = Arc<MigrationFn>;

/// The function type behind a [`Migration`].
pub type MigrationFn = dyn Fn(&[u8]) -> Result<Vec<u8>, String> + Send + Sync;

/// Everything behind the backend's lock.
pub(crate) struct Inner {
    pub(crate) engine: Box<dyn Engine>,
    pub(crate) clock: Arc<dyn StateClock>,
    pub(crate) journal: Journal,
    migrations: HashMap<(String, String, u32), Migration>,
    /// The key prefixes the engine may hold: lookups of others skip it.
    committed_keys: CommittedKeys,
}

/// The keyed-state backend of one task: an engine holding committed state (one redb file, or
/// the task's shards in a Redis namespace), one journal shared by the task's operators, and the
/// registrations of their states.
///
/// Cloning is cheap and shares the same engine and journal. The runtime calls [`commit`] when
/// the output of a batch is acknowledged and [`rollback`] when it fails.
///
/// Committed mutations wait in the journal until it outgrows [`JOURNAL_BUDGET`] or a sync or
/// snapshot needs them in the engine: they are visible to every later read and snapshot. A
/// crash loses them, which costs nothing because recovery never reads a task's engine as it
/// was (it restores the checkpoint's segments into cleared state). [`sync`] makes everything
/// committed durable where the engine can (redb: an fsync); the runtime calls it off the async
/// workers at every checkpoint barrier and now and then between.
///
/// [`commit`]: StateBackend::commit
/// [`rollback`]: StateBackend::rollback
/// [`sync`]: StateBackend::sync
#[derive(Clone)]
pub struct StateBackend {
    inner: Arc<Mutex<Inner>>,
}

impl std::fmt::Debug for StateBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("StateBackend")
            .field("engine", &inner.engine.describe())
            .field("staged", &inner.journal.pending_len())
            .field("journal_bytes", &inner.journal.bytes())
            .finish()
    }
}

impl StateBackend {
    /// Opens (or creates) the redb state file of `task` under `state_dir`, see
    /// [`task_state_file`].
    ///
    /// # Errors
    ///
    /// As [`open_redb`](Self::open_redb), plus [`StateError::Io`] when the directory cannot
    /// be created.
    pub fn open_redb_for_task(
        state_dir: &Path,
        task: &TaskId,
        clock: Arc<dyn StateClock>,
    ) -> StateResult<Self> {
        let path = task_state_file(state_dir, task);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| StateError::Io {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        Self::open_redb(&path, clock)
    }

    /// Opens (or creates) a redb state file and checks its format version.
    ///
    /// # Errors
    ///
    /// [`StateError::FormatVersion`] for a file of another format version;
    /// [`StateError::Storage`] when redb cannot open or initialize it.
    pub fn open_redb(path: &Path, clock: Arc<dyn StateClock>) -> StateResult<Self> {
        let backend = Self::with_engine(Box::new(RedbEngine::open(path)?), clock);
        // A file opened again may hold entries already.
        backend.lock().rebuild_committed_keys()?;
        Ok(backend)
    }

    /// Connects to the Redis server of `config` for the state of `job` in the `(operator,
    /// shard)` pairs a task owns, and clears their state there: a task starts from empty
    /// state (or from a restore), as it does on a fresh redb file. Other tasks of the job keep
    /// their shards in the same namespace; this backend's views read only its own.
    ///
    /// # Errors
    ///
    /// [`StateError::Redis`] when the server cannot be reached or refuses;
    /// [`StateError::FormatVersion`] when the job's namespace was written in another state
    /// format version.
    pub fn connect_redis(
        config: &RedisConfig,
        job: &JobId,
        owned: &[(OperatorId, weir_api::StateShardId)],
        clock: Arc<dyn StateClock>,
    ) -> StateResult<Self> {
        let engine = RedisEngine::connect(config, job, owned)?;
        Ok(Self::with_engine(Box::new(engine), clock))
    }

    fn with_engine(engine: Box<dyn Engine>, clock: Arc<dyn StateClock>) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner {
                engine,
                clock,
                journal: Journal::default(),
                migrations: HashMap::new(),
                committed_keys: CommittedKeys::new(),
            })),
        }
    }

    /// Locks the shared state. A poisoned lock is taken over: the journal may then hold part of
    /// a batch, which the runtime rolls back when it handles the panic as a task failure.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Where the committed state lives: a file path, or a Redis server and namespace.
    pub fn describe(&self) -> String {
        self.lock().engine.describe()
    }

    /// Number of entry keys the batch in progress staged since the last commit.
    pub fn staged_len(&self) -> usize {
        self.lock().journal.pending_len()
    }

    /// Commits the batch in progress: its staged mutations become committed state, seen by
    /// every later read, read view and snapshot.
    ///
    /// Called by the runtime when the output of the batch that caused the mutations has been
    /// acknowledged downstream. Committed mutations wait in the journal and reach the engine
    /// in one write (a redb write transaction, a Redis pipeline) when the journal outgrows
    /// [`JOURNAL_BUDGET`], at the next [`sync`](Self::sync), or when a
    /// [`read_view`](Self::read_view) (a snapshot) is taken; an entry stored and removed in
    /// between never costs a write. redb writes are not fsynced until the next sync.
    ///
    /// # Errors
    ///
    /// [`StateError::Storage`] or [`StateError::Redis`] when writing fails; the journal is
    /// then kept, and the caller must [`rollback`](Self::rollback) (the task fails and
    /// replays from its last acknowledged cut).
    pub fn commit(&self) -> StateResult<()> {
        let mut inner = self.lock();
        inner.journal.acknowledge();
        if inner.journal.bytes() >= JOURNAL_BUDGET {
            inner.write_journal()?;
        }
        Ok(())
    }

    /// Whether a commit happened since the last [`sync`](Self::sync).
    pub fn needs_sync(&self) -> bool {
        let inner = self.lock();
        inner.engine.needs_sync() || inner.journal.has_acknowledged()
    }

    /// Writes the journal's committed mutations to the engine and makes every commit so far
    /// durable where the engine can: for redb one empty write transaction with
    /// `Durability::Immediate` (an fsync), after which redb also reuses the pages freed by the
    /// commits before it. It may block on the disk (milliseconds): call it off the async
    /// workers. The lock is not held meanwhile, so reads of committed state go on.
    ///
    /// # Errors
    ///
    /// [`StateError::Storage`] or [`StateError::Redis`]; the commits stay committed.
    pub fn sync(&self) -> StateResult<()> {
        let finish = {
            let mut inner = self.lock();
            inner.write_journal()?;
            inner.engine.durable()?
        };
        match finish {
            Some(finish) => finish(),
            None => Ok(()),
        }
    }

    /// Drops the mutations the batch in progress staged: the state is exactly what the last
    /// commit left.
    pub fn rollback(&self) {
        self.lock().journal.rollback();
    }

    /// Removes every committed entry whose TTL deadline is at or before `now_ms` and returns
    /// how many were removed. The batch in progress's mutations are not touched. While a
    /// snapshot of a Redis backend is being read, nothing is removed (0): call again later.
    ///
    /// # Errors
    ///
    /// [`StateError::Storage`] or [`StateError::Redis`].
    pub fn purge_expired(&self, now_ms: u64) -> StateResult<u64> {
        let mut inner = self.lock();
        inner.write_journal()?;
        let view = inner.read_view()?;
        let mut expired = BTreeMap::new();
        for item in view.scan_everything()? {
            let (key, stored) = item?;
            if layout::is_expired(layout::decode_stored(&stored)?.0, now_ms) {
                expired.insert(key, Staged::Delete);
            }
        }
        drop(view);
        if expired.is_empty() || inner.engine.writes_paused() {
            return Ok(0);
        }
        inner.engine.apply(&expired)?;
        Ok(expired.len() as u64)
    }

    /// Registers a migration of `state` of `operator` from stored schema version `from_version`
    /// to whatever version the descriptor registered later asks for. The function receives the
    /// old payload and returns the new one; map keys and set elements are not migrated.
    pub fn register_migration(
        &self,
        operator: &OperatorId,
        state: &str,
        from_version: u32,
        migration: impl Fn(&[u8]) -> Result<Vec<u8>, String> + Send + Sync + 'static,
    ) {
        self.lock().migrations.insert(
            (operator.as_str().to_owned(), state.to_owned(), from_version),
            Arc::new(migration),
        );
    }

    /// Like [`register_migration`](Self::register_migration), with a function that returns the
    /// new typed value; it is encoded with the state codec.
    pub fn register_typed_migration<T: serde::Serialize>(
        &self,
        operator: &OperatorId,
        state: &str,
        from_version: u32,
        migration: impl Fn(&[u8]) -> Result<T, String> + Send + Sync + 'static,
    ) {
        let name = state.to_owned();
        self.register_migration(operator, state, from_version, move |old| {
            let value = migration(old)?;
            crate::codec::encode(&name, &value).map_err(|e| e.to_string())
        });
    }

    /// Registers `spec` for `(job, operator)`: stores it on first use, checks kind and schema
    /// version against the stored registration, and runs a registered migration when needed.
    pub(crate) fn register(&self, job: &str, operator: &str, spec: &StateSpec) -> StateResult<()> {
        let mut inner = self.lock();
        // A migration rewrites the engine's entries: committed mutations must be there first.
        inner.write_journal()?;
        let stored = inner.engine.registration(job, operator, &spec.name)?;
        if let Some(stored) = &stored {
            if stored.kind != spec.kind {
                return Err(StateError::KindMismatch {
                    operator: operator.to_owned(),
                    state: spec.name.clone(),
                    stored: stored.kind,
                    requested: spec.kind,
                });
            }
            if stored == spec {
                return Ok(());
            }
            if stored.schema_version != spec.schema_version {
                let key = (
                    operator.to_owned(),
                    spec.name.clone(),
                    stored.schema_version,
                );
                let Some(migration) = inner.migrations.get(&key).cloned() else {
                    return Err(StateError::SchemaVersion {
                        operator: operator.to_owned(),
                        state: spec.name.clone(),
                        stored: stored.schema_version,
                        requested: spec.schema_version,
                    });
                };
                inner.migrate(
                    job,
                    operator,
                    &spec.name,
                    stored.schema_version,
                    &*migration,
                )?;
                tracing::info!(
                    operator, state = %spec.name, from = stored.schema_version,
                    to = spec.schema_version, "migrated keyed state"
                );
            }
        }
        inner.engine.put_registration(job, operator, spec)
    }

    /// The backend clock's time; a snapshot leaves out entries dead at this instant.
    pub(crate) fn now_ms(&self) -> u64 {
        self.lock().clock.now_ms()
    }

    /// Whether a migration of `state` of `operator` from schema version `from` is registered.
    pub(crate) fn has_migration(&self, operator: &str, state: &str, from: u32) -> bool {
        self.lock()
            .migrations
            .contains_key(&(operator.to_owned(), state.to_owned(), from))
    }

    /// Replaces the committed entries of one state of one shard with `entries` (entry keys and
    /// stored values, all under that state's prefix) and registers `spec`. Returns the
    /// registration the backend held before when it differed from `spec`, so the caller can
    /// register it again (and migrate).
    pub(crate) fn load_state_shard(
        &self,
        job: &str,
        operator: &str,
        shard: weir_api::StateShardId,
        spec: &StateSpec,
        entries: &[(Vec<u8>, Vec<u8>)],
    ) -> StateResult<Option<StateSpec>> {
        let mut inner = self.lock();
        inner.write_journal()?;
        let prefix = layout::state_prefix(job, operator, shard, &spec.name);
        if entries.iter().any(|(key, _)| !key.starts_with(&prefix)) {
            return Err(StateError::corrupt(
                "a restored entry lies outside its segment's state range",
            ));
        }
        let previous = inner.engine.registration(job, operator, &spec.name)?;
        if let Some(previous) = &previous
            && previous.kind != spec.kind
        {
            return Err(StateError::KindMismatch {
                operator: operator.to_owned(),
                state: spec.name.clone(),
                stored: spec.kind,
                requested: previous.kind,
            });
        }
        inner.engine.put_registration(job, operator, spec)?;
        inner.engine.replace_state(&prefix, entries)?;
        for (key, _) in entries {
            inner.committed_keys.add_entry(key);
        }
        if inner.committed_keys.is_full() {
            inner.rebuild_committed_keys()?;
        }
        Ok(previous.filter(|p| p != spec))
    }
}

impl StateBackend {
    /// Entries and bytes of one state of one operator, over committed data.
    ///
    /// # Errors
    ///
    /// [`StateError::Storage`] or [`StateError::Redis`].
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
    /// With redb the view is a read transaction: an MVCC snapshot that does not block commits,
    /// which keep going while a snapshot writer iterates the view. With Redis, commits made
    /// while a view lives stay in the journal (reads see them there) and reach Redis when the
    /// last view is dropped. Either way the view sees every committed mutation and none of the
    /// batch in progress.
    ///
    /// # Errors
    ///
    /// [`StateError::Storage`] or [`StateError::Redis`].
    pub fn read_view(&self) -> StateResult<StateReadView> {
        self.lock().read_view()
    }
}

impl Drop for Inner {
    /// Writes what was committed but is still in the journal, so a file holds every commit
    /// (the batch in progress's mutations are dropped, as a rollback would). Redis is left as
    /// the last write left it: see [`Engine::flush_on_close`].
    fn drop(&mut self) {
        self.journal.rollback();
        if !self.engine.flush_on_close() {
            return;
        }
        if let Err(e) = self.write_journal() {
            tracing::warn!(engine = %self.engine.describe(), error = %e,
                "writing committed state on close failed");
        }
    }
}

impl Inner {
    /// Writes the journal's committed mutations to the engine in one write; the batch in
    /// progress's mutations stay staged. On failure the journal is kept as it was. While a
    /// read view needs the engine's data unchanged (Redis, during a snapshot), nothing is
    /// written: the journal keeps the outcomes, and reads keep seeing them there.
    pub(crate) fn write_journal(&mut self) -> StateResult<()> {
        if !self.journal.has_acknowledged() || self.engine.writes_paused() {
            return Ok(());
        }
        let (staged, current) = self.journal.take_acknowledged();
        for (key, outcome) in &staged {
            if matches!(outcome, Staged::Put(_)) {
                self.committed_keys.add_entry(key);
            }
        }
        let result = self.engine.apply(&staged);
        self.journal.restage(current);
        if result.is_err() {
            self.journal.restore(staged);
            return result;
        }
        if self.committed_keys.is_full() {
            self.rebuild_committed_keys()?;
        }
        Ok(())
    }

    /// A read view of committed state: the engine's view, with the journal's committed
    /// outcomes laid over it when the engine could not take them yet.
    pub(crate) fn read_view(&mut self) -> StateResult<StateReadView> {
        self.write_journal()?;
        let overlay = if self.journal.has_acknowledged() {
            self.journal.acknowledged()
        } else {
            BTreeMap::new()
        };
        let source = self.engine.view()?;
        Ok(StateReadView::new(source, overlay))
    }

    /// Sizes the filter of key prefixes afresh from the engine's committed entries.
    fn rebuild_committed_keys(&mut self) -> StateResult<()> {
        let view = self.engine.view()?;
        let mut rebuild = CommittedKeys::rebuild();
        for item in view.scan_all()? {
            let (key, _) = item?;
            rebuild.add(&key);
        }
        drop(view);
        self.committed_keys = rebuild.finish();
        Ok(())
    }

    /// Rewrites every entry of `(job, operator, state)` with `migration`, keeping expiry
    /// deadlines.
    fn migrate(
        &mut self,
        job: &str,
        operator: &str,
        state: &str,
        from: u32,
        migration: &MigrationFn,
    ) -> StateResult<()> {
        let view = self.read_view()?;
        let mut rewritten = BTreeMap::new();
        for item in view.scan_prefix(layout::operator_prefix(job, operator))? {
            let (key, stored) = item?;
            if EntryKey::decode(&key)?.state != state {
                continue;
            }
            let (expiry, payload) = layout::decode_stored(&stored)?;
            let new = migration(payload).map_err(|message| StateError::Migration {
                operator: operator.to_owned(),
                state: state.to_owned(),
                from,
                message,
            })?;
            rewritten.insert(key, Staged::Put(layout::encode_stored(expiry, &new)));
        }
        drop(view);
        self.engine.apply(&rewritten)
    }

    /// The stored value of an entry: the journal's outcome if the batch touched it, else the
    /// engine's.
    pub(crate) fn lookup(&mut self, key: &[u8]) -> StateResult<Option<Vec<u8>>> {
        match self.journal.get(key) {
            Some(Staged::Put(stored)) => return Ok(Some(stored.clone())),
            Some(Staged::Delete | Staged::Absent) => return Ok(None),
            None => {}
        }
        self.committed_get(key)
    }

    /// Removes an entry; `true` when it held a live value. The removal of an entry that only
    /// the journal holds is staged as [`Staged::Absent`], which the next write skips: rows
    /// stored and removed between two writes never reach the engine.
    pub(crate) fn remove(&mut self, key: Vec<u8>) -> StateResult<bool> {
        // Whether the entry held a live value, and whether the engine holds one (when known).
        let (existed, in_engine) = match self.journal.get(&key) {
            Some(Staged::Delete | Staged::Absent) => return Ok(false),
            Some(Staged::Put(stored)) => (self.is_live(stored)?, None),
            None => match self.committed_get(&key)? {
                Some(stored) => (self.is_live(&stored)?, Some(true)),
                None => return Ok(false),
            },
        };
        let in_engine = match in_engine {
            Some(known) => known,
            None => self.committed_get(&key)?.is_some(),
        };
        let outcome = if in_engine {
            Staged::Delete
        } else {
            Staged::Absent
        };
        self.journal.stage(key, outcome);
        Ok(existed)
    }

    /// Whether a stored value is not expired (the clock is read only for one with an expiry).
    fn is_live(&self, stored: &[u8]) -> StateResult<bool> {
        let expiry = layout::decode_stored(stored)?.0;
        Ok(expiry == 0 || !layout::is_expired(expiry, self.clock.now_ms()))
    }

    /// The stored value the engine holds for an entry (committed data only).
    fn committed_get(&mut self, key: &[u8]) -> StateResult<Option<Vec<u8>>> {
        if !self.committed_keys.may_hold_entry(key) {
            return Ok(None);
        }
        self.engine.get(key)
    }

    /// Every `(entry key, stored value)` starting with `prefix`, a key prefix (state,
    /// namespace and key: [`layout::key_prefix`]), journal merged over the engine.
    pub(crate) fn lookup_prefix(&mut self, prefix: &[u8]) -> StateResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut merged: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        if self.committed_keys.may_hold(prefix) {
            for (k, v) in self.engine.key_entries(prefix)? {
                merged.insert(k, Some(v));
            }
        }
        for (k, outcome) in self.journal.with_prefix(prefix) {
            let value = match outcome {
                Staged::Put(stored) => Some(stored.clone()),
                Staged::Delete | Staged::Absent => None,
            };
            merged.insert(k.clone(), value);
        }
        Ok(merged
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect())
    }
}
