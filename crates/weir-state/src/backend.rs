//! The redb backend: one database file per task, its tables, the journal commit and purging.

use crate::clock::StateClock;
use crate::committed_keys::CommittedKeys;
use crate::error::{StateError, StateResult};
use crate::journal::{Journal, Staged};
use crate::layout::{self, EntryKey};
use redb::{
    Database, Durability, ReadOnlyTable, ReadableDatabase, ReadableTable, TableDefinition,
    WriteTransaction,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use weir_api::{OperatorId, StateSpec, TaskId};

/// Bytes of committed mutations the journal holds before [`RedbStateBackend::commit`] writes
/// them to redb (keys, values and bookkeeping, approximately).
pub const JOURNAL_BUDGET: usize = 32 << 20;

/// The page cache of one task's state file. redb's own default is 1 GiB per database, a ceiling
/// a job reaches once per task that spills: a keyed vertex at parallelism 8 could hold 8 GiB of
/// cached pages. The cache earns its keep on the B-tree's interior pages, which every lookup
/// touches and which this holds many times over.
pub const STATE_CACHE_BYTES: usize = 64 << 20;

/// The state format version this build reads and writes; stored in every file.
pub const STATE_FORMAT_VERSION: u32 = 1;

/// Entry key (see [`crate::layout`]) -> expiry header and payload.
pub(crate) const ENTRIES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("weir_entries");
/// `(job, operator, state)` -> the registered [`StateSpec`] as JSON.
pub(crate) const REGISTRY: TableDefinition<&[u8], &[u8]> = TableDefinition::new("weir_registry");
/// `(job, operator, state)` -> `(entries, bytes)`.
pub(crate) const SIZES: TableDefinition<&[u8], (u64, u64)> = TableDefinition::new("weir_sizes");
/// `"format_version"` -> [`STATE_FORMAT_VERSION`].
const META: TableDefinition<&str, u32> = TableDefinition::new("weir_meta");
const FORMAT_KEY: &str = "format_version";

/// A migration: the stored payload of an old schema version -> the payload of the new version.
pub type Migration = Arc<MigrationFn>;

/// The function type behind a [`Migration`].
pub type MigrationFn = dyn Fn(&[u8]) -> Result<Vec<u8>, String> + Send + Sync;

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

pub(crate) type ReadTable = ReadOnlyTable<&'static [u8], &'static [u8]>;

/// Everything behind the backend's lock.
pub(crate) struct Inner {
    /// Shared so that [`RedbStateBackend::sync`] can wait on the disk without holding the lock.
    pub(crate) db: Arc<Database>,
    pub(crate) path: PathBuf,
    pub(crate) clock: Arc<dyn StateClock>,
    pub(crate) journal: Journal,
    migrations: HashMap<(String, String, u32), Migration>,
    /// A read transaction over committed data, reused until the next write to redb.
    read: Option<ReadTable>,
    /// A write transaction committed since the last durable commit.
    unsynced: bool,
    /// The key prefixes the entries table may hold: lookups of others skip redb.
    committed_keys: CommittedKeys,
}

/// The keyed-state backend of one task: one redb file, one journal shared by the task's
/// operators, and the registrations of their states.
///
/// Cloning is cheap and shares the same file and journal. The runtime calls [`commit`] when the
/// output of a batch is acknowledged and [`rollback`] when it fails.
///
/// Commits are not fsynced, and committed mutations wait in the journal until it outgrows
/// [`JOURNAL_BUDGET`] or a sync or snapshot needs them in redb: they are visible to every later
/// read and snapshot, and a crash loses them, which costs nothing because recovery never reads a task's file (it restores the
/// checkpoint's segments into a new one). [`sync`] makes everything committed durable; the
/// runtime calls it off the async workers at every checkpoint barrier and now and then
/// between, which also lets redb reuse the pages that earlier commits freed.
///
/// [`commit`]: RedbStateBackend::commit
/// [`rollback`]: RedbStateBackend::rollback
/// [`sync`]: RedbStateBackend::sync
#[derive(Clone)]
pub struct RedbStateBackend {
    inner: Arc<Mutex<Inner>>,
}

impl std::fmt::Debug for RedbStateBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("RedbStateBackend")
            .field("path", &inner.path)
            .field("staged", &inner.journal.pending_len())
            .field("journal_bytes", &inner.journal.bytes())
            .finish()
    }
}

/// The file of one task under a state directory: `{dir}/{job}/{pipeline}/{vertex}/{subtask}.redb`,
/// each id percent-encoded outside `[A-Za-z0-9._-]` so that ids never escape the directory.
pub fn task_state_file(state_dir: &Path, task: &TaskId) -> PathBuf {
    state_dir
        .join(path_safe(task.job.as_str()))
        .join(path_safe(task.pipeline.as_str()))
        .join(path_safe(task.vertex.as_str()))
        .join(format!("{}.redb", task.subtask.0))
}

fn path_safe(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && !out.is_empty()) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() { "%".to_owned() } else { out }
}

impl RedbStateBackend {
    /// Opens (or creates) the state file of `task` under `state_dir`, see [`task_state_file`].
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open), plus [`StateError::Io`] when the directory cannot be created.
    pub fn open_for_task(
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
        Self::open(&path, clock)
    }

    /// Opens (or creates) a state file and checks its format version.
    ///
    /// # Errors
    ///
    /// [`StateError::FormatVersion`] for a file of another format version;
    /// [`StateError::Storage`] when redb cannot open or initialize it.
    pub fn open(path: &Path, clock: Arc<dyn StateClock>) -> StateResult<Self> {
        let db = Database::builder()
            .set_cache_size(STATE_CACHE_BYTES)
            .create(path)
            .map_err(|e| StateError::storage(format!("opening {}", path.display()), e))?;
        let ctx = || format!("initializing {}", path.display());
        let txn = db
            .begin_write()
            .map_err(|e| StateError::storage(ctx(), e))?;
        {
            let mut meta = txn
                .open_table(META)
                .map_err(|e| StateError::storage(ctx(), e))?;
            let found = meta
                .get(FORMAT_KEY)
                .map_err(|e| StateError::storage(ctx(), e))?
                .map(|g| g.value());
            match found {
                Some(v) if v != STATE_FORMAT_VERSION => {
                    return Err(StateError::FormatVersion {
                        path: path.to_path_buf(),
                        found: v,
                        expected: STATE_FORMAT_VERSION,
                    });
                }
                Some(_) => {}
                None => {
                    meta.insert(FORMAT_KEY, STATE_FORMAT_VERSION)
                        .map_err(|e| StateError::storage(ctx(), e))?;
                }
            }
            txn.open_table(ENTRIES)
                .map_err(|e| StateError::storage(ctx(), e))?;
            txn.open_table(REGISTRY)
                .map_err(|e| StateError::storage(ctx(), e))?;
            txn.open_table(SIZES)
                .map_err(|e| StateError::storage(ctx(), e))?;
        }
        txn.commit().map_err(|e| StateError::storage(ctx(), e))?;
        let mut inner = Inner {
            db: Arc::new(db),
            path: path.to_path_buf(),
            clock,
            journal: Journal::default(),
            migrations: HashMap::new(),
            read: None,
            unsynced: false,
            committed_keys: CommittedKeys::new(),
        };
        // A file opened again may hold entries already.
        inner.rebuild_committed_keys()?;
        Ok(Self {
            inner: Arc::new(Mutex::new(inner)),
        })
    }

    /// Locks the shared state. A poisoned lock is taken over: the journal may then hold part of
    /// a batch, which the runtime rolls back when it handles the panic as a task failure.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Number of entry keys the batch in progress staged since the last commit.
    pub fn staged_len(&self) -> usize {
        self.lock().journal.pending_len()
    }

    /// Commits the batch in progress: its staged mutations become committed state, seen by
    /// every later read, read view and snapshot.
    ///
    /// Called by the runtime when the output of the batch that caused the mutations has been
    /// acknowledged downstream. Committed mutations wait in the journal and reach redb in one
    /// write transaction when the journal outgrows [`JOURNAL_BUDGET`], at the next
    /// [`sync`](Self::sync), or when a [`read_view`](Self::read_view) (a snapshot) is taken;
    /// an entry stored and removed in between never costs a redb write. Writes are not
    /// fsynced (redb's `Durability::None`): they are durable after the next sync.
    ///
    /// # Errors
    ///
    /// [`StateError::Storage`] when writing to redb fails; the journal is then kept, and the
    /// caller must [`rollback`](Self::rollback) (the task fails and replays from its last
    /// acknowledged cut).
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
        inner.unsynced || inner.journal.has_acknowledged()
    }

    /// Makes every commit so far durable: one empty redb write transaction with
    /// `Durability::Immediate` (an fsync), after which redb also reuses the pages freed by the
    /// commits before it. It blocks on the disk (milliseconds): call it off the async workers.
    /// The lock is not held meanwhile, so reads of committed state go on.
    ///
    /// # Errors
    ///
    /// [`StateError::Storage`] when redb fails; the commits stay committed but not durable.
    pub fn sync(&self) -> StateResult<()> {
        let db = {
            let mut inner = self.lock();
            inner.write_journal()?;
            if !inner.unsynced {
                return Ok(());
            }
            inner.unsynced = false;
            inner.db.clone()
        };
        let ctx = "making committed state durable";
        let result = db
            .begin_write()
            .map_err(|e| StateError::storage(ctx, e))
            .and_then(|txn| txn.commit().map_err(|e| StateError::storage(ctx, e)));
        if result.is_err() {
            self.lock().unsynced = true;
        }
        result
    }

    /// Drops the mutations the batch in progress staged: the state is exactly what the last
    /// commit left.
    pub fn rollback(&self) {
        self.lock().journal.rollback();
    }

    /// Removes every committed entry whose TTL deadline is at or before `now_ms`, in one write
    /// transaction, and returns how many were removed. The batch in progress's mutations are
    /// not touched.
    ///
    /// # Errors
    ///
    /// [`StateError::Storage`] when redb fails.
    pub fn purge_expired(&self, now_ms: u64) -> StateResult<u64> {
        let mut inner = self.lock();
        inner.write_journal()?;
        inner.read = None;
        let ctx = "purging expired state";
        let txn = inner.begin_write(ctx)?;
        let mut removed = 0u64;
        {
            let mut entries = open(&txn, ENTRIES)?;
            let mut expired = Vec::new();
            for item in entries.iter().map_err(|e| StateError::storage(ctx, e))? {
                let (k, v) = item.map_err(|e| StateError::storage(ctx, e))?;
                let (expiry, _) = layout::decode_stored(v.value())?;
                if layout::is_expired(expiry, now_ms) {
                    expired.push((k.value().to_vec(), v.value().len()));
                }
            }
            let mut deltas: HashMap<Vec<u8>, (i128, i128)> = HashMap::new();
            for (key, len) in expired {
                entries
                    .remove(key.as_slice())
                    .map_err(|e| StateError::storage(ctx, e))?;
                let delta = deltas.entry(entry_state_id(&key)?).or_default();
                delta.0 -= 1;
                delta.1 -= (key.len() + len) as i128;
                removed += 1;
            }
            apply_size_deltas(&txn, deltas)?;
        }
        txn.commit().map_err(|e| StateError::storage(ctx, e))?;
        Ok(removed)
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
        // A migration rewrites redb's entries: committed mutations must be there first.
        inner.write_journal()?;
        let id = layout::state_id_key(job, operator, &spec.name);
        let stored: Option<StateSpec> = match inner.committed_registry()?.get(id.as_slice()) {
            Ok(Some(g)) => Some(serde_json::from_slice(g.value()).map_err(|e| {
                StateError::corrupt(format!("registration of state `{}`: {e}", spec.name))
            })?),
            Ok(None) => None,
            Err(e) => return Err(StateError::storage("reading a state registration", e)),
        };
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
        }
        inner.read = None;
        let ctx = "registering a state";
        let txn = inner.begin_write(ctx)?;
        if let Some(stored) = &stored
            && stored.schema_version != spec.schema_version
        {
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
            migrate(
                &txn,
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
        let json = serde_json::to_vec(spec)
            .map_err(|e| StateError::corrupt(format!("encoding a registration: {e}")))?;
        open(&txn, REGISTRY)?
            .insert(id.as_slice(), json.as_slice())
            .map_err(|e| StateError::storage(ctx, e))?;
        txn.commit().map_err(|e| StateError::storage(ctx, e))
    }
}

impl Drop for Inner {
    /// Writes what was committed but is still in the journal, so the file holds every commit
    /// (the batch in progress's mutations are dropped, as a rollback would).
    fn drop(&mut self) {
        self.journal.rollback();
        if let Err(e) = self.write_journal() {
            tracing::warn!(path = %self.path.display(), error = %e,
                "writing committed state to redb on close failed");
        }
    }
}

impl Inner {
    /// Writes the journal's committed mutations to redb in one write transaction, with the size
    /// accounting; the batch in progress's mutations stay staged. On failure the journal is
    /// kept as it was.
    pub(crate) fn write_journal(&mut self) -> StateResult<()> {
        if !self.journal.has_acknowledged() {
            return Ok(());
        }
        let (staged, current) = self.journal.take_acknowledged();
        self.read = None;
        let result = (|| {
            let txn = self.begin_write("committing the journal")?;
            {
                let mut entries = open(&txn, ENTRIES)?;
                // The journal yields keys in order, so the entries of one (shard, state) come in
                // one run: decode a key only where a run starts, and sum the run's deltas.
                let mut runs: Vec<(Vec<u8>, (i128, i128))> = Vec::new();
                let mut run_prefix: Vec<u8> = Vec::new();
                for (key, outcome) in &staged {
                    if run_prefix.is_empty() || !key.starts_with(&run_prefix) {
                        let parts = EntryKey::decode(key)?;
                        run_prefix = layout::state_prefix(
                            parts.job,
                            parts.operator,
                            parts.shard,
                            parts.state,
                        );
                        runs.push((
                            layout::state_id_key(parts.job, parts.operator, parts.state),
                            (0, 0),
                        ));
                    }
                    let old = match outcome {
                        Staged::Put(stored) => {
                            self.committed_keys.add_entry(key);
                            entries.insert(key.as_slice(), stored.as_slice())
                        }
                        Staged::Delete => entries.remove(key.as_slice()),
                        Staged::Absent => continue,
                    }
                    .map_err(|e| StateError::storage("committing the journal", e))?
                    .map(|g| g.value().len());
                    let Some((_, delta)) = runs.last_mut() else {
                        return Err(StateError::corrupt("a journal run without a state"));
                    };
                    if let Some(old_len) = old {
                        delta.0 -= 1;
                        delta.1 -= (key.len() + old_len) as i128;
                    }
                    if let Staged::Put(stored) = outcome {
                        delta.0 += 1;
                        delta.1 += (key.len() + stored.len()) as i128;
                    }
                }
                let mut deltas: HashMap<Vec<u8>, (i128, i128)> = HashMap::new();
                for (id, (d_entries, d_bytes)) in runs {
                    let total = deltas.entry(id).or_default();
                    total.0 += d_entries;
                    total.1 += d_bytes;
                }
                apply_size_deltas(&txn, deltas)?;
            }
            txn.commit()
                .map_err(|e| StateError::storage("committing the journal", e))
        })();
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

    /// Sizes the filter of key prefixes afresh from the committed entries table.
    fn rebuild_committed_keys(&mut self) -> StateResult<()> {
        let ctx = "indexing the committed state keys";
        let table = self.committed_entries()?;
        let mut rebuild = CommittedKeys::rebuild();
        for item in table.iter().map_err(|e| StateError::storage(ctx, e))? {
            let (k, _) = item.map_err(|e| StateError::storage(ctx, e))?;
            rebuild.add(k.value());
        }
        self.committed_keys = rebuild.finish();
        Ok(())
    }

    /// A write transaction whose commit is not fsynced (see [`RedbStateBackend::sync`]).
    fn begin_write(&mut self, context: &str) -> StateResult<WriteTransaction> {
        let mut txn = self
            .db
            .begin_write()
            .map_err(|e| StateError::storage(context, e))?;
        txn.set_durability(Durability::None)
            .map_err(|e| StateError::storage(context, e))?;
        self.unsynced = true;
        Ok(txn)
    }

    /// The entries table of the cached read transaction over committed data.
    fn committed_entries(&mut self) -> StateResult<&ReadTable> {
        if self.read.is_none() {
            let txn = self
                .db
                .begin_read()
                .map_err(|e| StateError::storage("reading state", e))?;
            let table = txn
                .open_table(ENTRIES)
                .map_err(|e| StateError::storage("reading state", e))?;
            self.read = Some(table);
        }
        self.read
            .as_ref()
            .ok_or_else(|| StateError::corrupt("read table vanished"))
    }

    /// The committed registry table, through a fresh read transaction.
    fn committed_registry(&self) -> StateResult<ReadOnlyTable<&'static [u8], &'static [u8]>> {
        let txn = self
            .db
            .begin_read()
            .map_err(|e| StateError::storage("reading state registrations", e))?;
        txn.open_table(REGISTRY)
            .map_err(|e| StateError::storage("reading state registrations", e))
    }

    /// The stored value of an entry: the journal's outcome if the batch touched it, else redb's.
    pub(crate) fn lookup(&mut self, key: &[u8]) -> StateResult<Option<Vec<u8>>> {
        match self.journal.get(key) {
            Some(Staged::Put(stored)) => return Ok(Some(stored.clone())),
            Some(Staged::Delete | Staged::Absent) => return Ok(None),
            None => {}
        }
        if !self.committed_keys.may_hold_entry(key) {
            return Ok(None);
        }
        let table = self.committed_entries()?;
        let found = table
            .get(key)
            .map_err(|e| StateError::storage("reading state", e))?;
        Ok(found.map(|g| g.value().to_vec()))
    }

    /// Removes an entry; `true` when it held a live value. The removal of an entry that only
    /// the journal holds is staged as [`Staged::Absent`], which the next write skips: rows
    /// stored and removed between two writes never reach redb.
    pub(crate) fn remove(&mut self, key: Vec<u8>) -> StateResult<bool> {
        // Whether the entry held a live value, and whether redb holds one (when known).
        let (existed, in_redb) = match self.journal.get(&key) {
            Some(Staged::Delete | Staged::Absent) => return Ok(false),
            Some(Staged::Put(stored)) => (self.is_live(stored)?, None),
            None => match self.committed_get(&key)? {
                Some(stored) => (self.is_live(&stored)?, Some(true)),
                None => return Ok(false),
            },
        };
        let in_redb = match in_redb {
            Some(known) => known,
            None => self.committed_get(&key)?.is_some(),
        };
        let outcome = if in_redb {
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

    /// The stored value redb holds for an entry (committed data only).
    fn committed_get(&mut self, key: &[u8]) -> StateResult<Option<Vec<u8>>> {
        if !self.committed_keys.may_hold_entry(key) {
            return Ok(None);
        }
        let found = self
            .committed_entries()?
            .get(key)
            .map_err(|e| StateError::storage("reading state", e))?;
        Ok(found.map(|g| g.value().to_vec()))
    }

    /// A redb range over committed entries with keys in `[start, end)` (`end: None` unbounded);
    /// the caller ensures `start < end`. The range does not borrow `self`.
    pub(crate) fn committed_range(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> StateResult<redb::Range<'static, &'static [u8], &'static [u8]>> {
        let upper = end.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        self.committed_entries()?
            .range::<&[u8]>((std::ops::Bound::Included(start), upper))
            .map_err(|e| StateError::storage("scanning state", e))
    }

    /// Every `(entry key, stored value)` starting with `prefix`, a key prefix (state,
    /// namespace and key: [`layout::key_prefix`]), journal merged over redb.
    pub(crate) fn lookup_prefix(&mut self, prefix: &[u8]) -> StateResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut merged: std::collections::BTreeMap<Vec<u8>, Option<Vec<u8>>> =
            std::collections::BTreeMap::new();
        if self.committed_keys.may_hold(prefix) {
            let table = self.committed_entries()?;
            let range = table
                .range::<&[u8]>(prefix..)
                .map_err(|e| StateError::storage("scanning state", e))?;
            for item in range {
                let (k, v) = item.map_err(|e| StateError::storage("scanning state", e))?;
                if !k.value().starts_with(prefix) {
                    break;
                }
                merged.insert(k.value().to_vec(), Some(v.value().to_vec()));
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

fn open<'txn>(
    txn: &'txn WriteTransaction,
    def: TableDefinition<&'static [u8], &'static [u8]>,
) -> StateResult<redb::Table<'txn, &'static [u8], &'static [u8]>> {
    txn.open_table(def)
        .map_err(|e| StateError::storage("opening a state table", e))
}

/// The `(job, operator, state)` key of an entry key.
fn entry_state_id(key: &[u8]) -> StateResult<Vec<u8>> {
    let parts = EntryKey::decode(key)?;
    Ok(layout::state_id_key(parts.job, parts.operator, parts.state))
}

fn apply_size_deltas(
    txn: &WriteTransaction,
    deltas: HashMap<Vec<u8>, (i128, i128)>,
) -> StateResult<()> {
    let ctx = "updating state sizes";
    let mut sizes = txn
        .open_table(SIZES)
        .map_err(|e| StateError::storage(ctx, e))?;
    for (id, (d_entries, d_bytes)) in deltas {
        if d_entries == 0 && d_bytes == 0 {
            continue;
        }
        let (entries, bytes) = sizes
            .get(id.as_slice())
            .map_err(|e| StateError::storage(ctx, e))?
            .map(|g| g.value())
            .unwrap_or((0, 0));
        let new_entries = u64::try_from(i128::from(entries) + d_entries)
            .map_err(|_| StateError::corrupt("size accounting would go below zero entries"))?;
        let new_bytes = u64::try_from(i128::from(bytes) + d_bytes)
            .map_err(|_| StateError::corrupt("size accounting would go below zero bytes"))?;
        if new_entries == 0 {
            sizes
                .remove(id.as_slice())
                .map_err(|e| StateError::storage(ctx, e))?;
        } else {
            sizes
                .insert(id.as_slice(), (new_entries, new_bytes))
                .map_err(|e| StateError::storage(ctx, e))?;
        }
    }
    Ok(())
}

/// Rewrites every entry of `(job, operator, state)` with `migration`, keeping expiry deadlines.
fn migrate(
    txn: &WriteTransaction,
    job: &str,
    operator: &str,
    state: &str,
    from: u32,
    migration: &MigrationFn,
) -> StateResult<()> {
    let ctx = "migrating state";
    let prefix = layout::operator_prefix(job, operator);
    let mut entries = open(txn, ENTRIES)?;
    let mut rewritten = Vec::new();
    for item in entries
        .range::<&[u8]>(prefix.as_slice()..)
        .map_err(|e| StateError::storage(ctx, e))?
    {
        let (k, v) = item.map_err(|e| StateError::storage(ctx, e))?;
        if !k.value().starts_with(&prefix) {
            break;
        }
        if EntryKey::decode(k.value())?.state != state {
            continue;
        }
        let (expiry, payload) = layout::decode_stored(v.value())?;
        let new = migration(payload).map_err(|message| StateError::Migration {
            operator: operator.to_owned(),
            state: state.to_owned(),
            from,
            message,
        })?;
        rewritten.push((
            k.value().to_vec(),
            v.value().len(),
            layout::encode_stored(expiry, &new),
        ));
    }
    let mut d_bytes = 0i128;
    for (key, old_len, stored) in rewritten {
        d_bytes += stored.len() as i128 - old_len as i128;
        entries
            .insert(key.as_slice(), stored.as_slice())
            .map_err(|e| StateError::storage(ctx, e))?;
    }
    drop(entries);
    let mut deltas = HashMap::new();
    deltas.insert(layout::state_id_key(job, operator, state), (0, d_bytes));
    apply_size_deltas(txn, deltas)
}

/// Helpers of snapshot restore ([`crate::restore`]).
impl RedbStateBackend {
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
    /// stored values, all under that state's prefix) and registers `spec`, with the size
    /// accounting, in one write transaction. Returns the registration the backend held before
    /// when it differed from `spec`, so the caller can register it again (and migrate).
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
        inner.read = None;
        let ctx = "restoring a state segment";
        let id = layout::state_id_key(job, operator, &spec.name);
        let prefix = layout::state_prefix(job, operator, shard, &spec.name);
        let txn = inner.begin_write(ctx)?;
        let previous = {
            let mut registry = open(&txn, REGISTRY)?;
            let previous: Option<StateSpec> = registry
                .get(id.as_slice())
                .map_err(|e| StateError::storage(ctx, e))?
                .map(|g| serde_json::from_slice(g.value()))
                .transpose()
                .map_err(|e| StateError::corrupt(format!("state registration: {e}")))?;
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
            let json = serde_json::to_vec(spec)
                .map_err(|e| StateError::corrupt(format!("encoding a registration: {e}")))?;
            registry
                .insert(id.as_slice(), json.as_slice())
                .map_err(|e| StateError::storage(ctx, e))?;
            previous.filter(|p| p != spec)
        };
        {
            let mut table = open(&txn, ENTRIES)?;
            let (mut d_entries, mut d_bytes) = (0i128, 0i128);
            let mut old = Vec::new();
            for item in table
                .range::<&[u8]>(prefix.as_slice()..)
                .map_err(|e| StateError::storage(ctx, e))?
            {
                let (k, v) = item.map_err(|e| StateError::storage(ctx, e))?;
                if !k.value().starts_with(&prefix) {
                    break;
                }
                old.push(k.value().to_vec());
                d_entries -= 1;
                d_bytes -= (k.value().len() + v.value().len()) as i128;
            }
            for key in old {
                table
                    .remove(key.as_slice())
                    .map_err(|e| StateError::storage(ctx, e))?;
            }
            for (key, stored) in entries {
                inner.committed_keys.add_entry(key);
                if !key.starts_with(&prefix) {
                    return Err(StateError::corrupt(
                        "a restored entry lies outside its segment's state range",
                    ));
                }
                if let Some(replaced) = table
                    .insert(key.as_slice(), stored.as_slice())
                    .map_err(|e| StateError::storage(ctx, e))?
                {
                    d_entries -= 1;
                    d_bytes -= (key.len() + replaced.value().len()) as i128;
                }
                d_entries += 1;
                d_bytes += (key.len() + stored.len()) as i128;
            }
            drop(table);
            let mut deltas = HashMap::new();
            deltas.insert(id, (d_entries, d_bytes));
            apply_size_deltas(&txn, deltas)?;
        }
        txn.commit().map_err(|e| StateError::storage(ctx, e))?;
        inner.read = None;
        if inner.committed_keys.is_full() {
            inner.rebuild_committed_keys()?;
        }
        Ok(previous)
    }
}
