//! The redb engine: one database file per task, its tables and their size accounting.

use crate::engine::{
    Engine, EntryIter, STATE_FORMAT_VERSION, StateSize, SyncFn, ViewSource, decode_spec,
    encode_spec,
};
use crate::error::{StateError, StateResult};
use crate::journal::Staged;
use crate::layout::{self, EntryKey};
use redb::{
    Database, Durability, ReadOnlyTable, ReadTransaction, ReadableDatabase, ReadableTable,
    TableDefinition, WriteTransaction,
};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use weir_api::{JobId, OperatorId, StateSpec, TaskId};

/// Entry key (see [`crate::layout`]) -> expiry header and payload.
const ENTRIES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("weir_entries");
/// `(job, operator, state)` -> the registered [`StateSpec`] as JSON.
const REGISTRY: TableDefinition<&[u8], &[u8]> = TableDefinition::new("weir_registry");
/// `(job, operator, state)` -> `(entries, bytes)`.
const SIZES: TableDefinition<&[u8], (u64, u64)> = TableDefinition::new("weir_sizes");
/// `"format_version"` -> [`STATE_FORMAT_VERSION`].
const META: TableDefinition<&str, u32> = TableDefinition::new("weir_meta");
const FORMAT_KEY: &str = "format_version";

/// The page cache of one task's state file. redb's own default is 1 GiB per database, a ceiling
/// a job reaches once per task that spills: a keyed vertex at parallelism 8 could hold 8 GiB of
/// cached pages. The cache earns its keep on the B-tree's interior pages, which every lookup
/// touches and which this holds many times over.
pub const STATE_CACHE_BYTES: usize = 64 << 20;

type ReadTable = ReadOnlyTable<&'static [u8], &'static [u8]>;

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

/// One task's state file.
pub(crate) struct RedbEngine {
    /// Shared so that a sync can wait on the disk without holding the backend's lock.
    db: Arc<Database>,
    path: PathBuf,
    /// A read transaction over committed data, reused until the next write to redb.
    read: Option<ReadTable>,
    /// A write transaction committed since the last durable commit.
    unsynced: bool,
}

impl RedbEngine {
    /// Opens (or creates) a state file and checks its format version.
    pub(crate) fn open(path: &Path) -> StateResult<Self> {
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
            for def in [ENTRIES, REGISTRY] {
                txn.open_table(def)
                    .map_err(|e| StateError::storage(ctx(), e))?;
            }
            txn.open_table(SIZES)
                .map_err(|e| StateError::storage(ctx(), e))?;
        }
        txn.commit().map_err(|e| StateError::storage(ctx(), e))?;
        Ok(Self {
            db: Arc::new(db),
            path: path.to_path_buf(),
            read: None,
            unsynced: false,
        })
    }

    /// A write transaction whose commit is not fsynced (see [`Engine::durable`]).
    fn begin_write(&mut self, context: &str) -> StateResult<WriteTransaction> {
        self.read = None;
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
}

/// A range over a redb table as [`EntryIter`] items, stopping where keys leave `prefix`.
fn entries_under(
    range: redb::Range<'static, &'static [u8], &'static [u8]>,
    prefix: Vec<u8>,
) -> EntryIter<'static> {
    Box::new(
        range
            .map(|item| {
                item.map(|(k, v)| (k.value().to_vec(), v.value().to_vec()))
                    .map_err(|e| StateError::storage("scanning state", e))
            })
            .take_while(move |item| item.as_ref().map_or(true, |(k, _)| k.starts_with(&prefix))),
    )
}

impl Engine for RedbEngine {
    fn describe(&self) -> String {
        self.path.display().to_string()
    }

    fn get(&mut self, key: &[u8]) -> StateResult<Option<Vec<u8>>> {
        let found = self
            .committed_entries()?
            .get(key)
            .map_err(|e| StateError::storage("reading state", e))?;
        Ok(found.map(|g| g.value().to_vec()))
    }

    fn key_entries(&mut self, key_prefix: &[u8]) -> StateResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let range = self
            .committed_entries()?
            .range::<&[u8]>(key_prefix..)
            .map_err(|e| StateError::storage("scanning state", e))?;
        entries_under(range, key_prefix.to_vec()).collect()
    }

    fn range<'a>(
        &'a mut self,
        state_prefix: &[u8],
        start: &[u8],
        end: Option<&[u8]>,
    ) -> StateResult<EntryIter<'a>> {
        let upper = end.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        let range = self
            .committed_entries()?
            .range::<&[u8]>((std::ops::Bound::Included(start), upper))
            .map_err(|e| StateError::storage("scanning state", e))?;
        Ok(entries_under(range, state_prefix.to_vec()))
    }

    fn apply(&mut self, staged: &BTreeMap<Vec<u8>, Staged>) -> StateResult<()> {
        let ctx = "committing the journal";
        let txn = self.begin_write(ctx)?;
        {
            let mut entries = open(&txn, ENTRIES)?;
            // The journal yields keys in order, so the entries of one (shard, state) come in
            // one run: decode a key only where a run starts, and sum the run's deltas.
            let mut runs: Vec<(Vec<u8>, (i128, i128))> = Vec::new();
            let mut run_prefix: Vec<u8> = Vec::new();
            for (key, outcome) in staged {
                if run_prefix.is_empty() || !key.starts_with(&run_prefix) {
                    let parts = EntryKey::decode(key)?;
                    run_prefix =
                        layout::state_prefix(parts.job, parts.operator, parts.shard, parts.state);
                    runs.push((
                        layout::state_id_key(parts.job, parts.operator, parts.state),
                        (0, 0),
                    ));
                }
                let old = match outcome {
                    Staged::Put(stored) => entries.insert(key.as_slice(), stored.as_slice()),
                    Staged::Delete => entries.remove(key.as_slice()),
                    Staged::Absent => continue,
                }
                .map_err(|e| StateError::storage(ctx, e))?
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
        txn.commit().map_err(|e| StateError::storage(ctx, e))
    }

    fn registration(
        &mut self,
        job: &str,
        operator: &str,
        state: &str,
    ) -> StateResult<Option<StateSpec>> {
        let ctx = "reading a state registration";
        let txn = self
            .db
            .begin_read()
            .map_err(|e| StateError::storage(ctx, e))?;
        let table = txn
            .open_table(REGISTRY)
            .map_err(|e| StateError::storage(ctx, e))?;
        let id = layout::state_id_key(job, operator, state);
        let found = table
            .get(id.as_slice())
            .map_err(|e| StateError::storage(ctx, e))?;
        found.map(|g| decode_spec(g.value(), state)).transpose()
    }

    fn put_registration(&mut self, job: &str, operator: &str, spec: &StateSpec) -> StateResult<()> {
        let ctx = "registering a state";
        let id = layout::state_id_key(job, operator, &spec.name);
        let json = encode_spec(spec)?;
        let txn = self.begin_write(ctx)?;
        open(&txn, REGISTRY)?
            .insert(id.as_slice(), json.as_slice())
            .map_err(|e| StateError::storage(ctx, e))?;
        txn.commit().map_err(|e| StateError::storage(ctx, e))
    }

    fn replace_state(
        &mut self,
        state_prefix: &[u8],
        entries: &[(Vec<u8>, Vec<u8>)],
    ) -> StateResult<()> {
        let ctx = "restoring a state segment";
        let id = state_id_of_prefix(state_prefix)?;
        let txn = self.begin_write(ctx)?;
        {
            let mut table = open(&txn, ENTRIES)?;
            let (mut d_entries, mut d_bytes) = (0i128, 0i128);
            let mut old = Vec::new();
            for item in table
                .range::<&[u8]>(state_prefix..)
                .map_err(|e| StateError::storage(ctx, e))?
            {
                let (k, v) = item.map_err(|e| StateError::storage(ctx, e))?;
                if !k.value().starts_with(state_prefix) {
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
        txn.commit().map_err(|e| StateError::storage(ctx, e))
    }

    fn view(&mut self) -> StateResult<Box<dyn ViewSource>> {
        let txn = self
            .db
            .begin_read()
            .map_err(|e| StateError::storage("starting a read view", e))?;
        Ok(Box::new(RedbView::new(txn)?))
    }

    fn needs_sync(&self) -> bool {
        self.unsynced
    }

    fn durable(&mut self) -> StateResult<Option<SyncFn>> {
        if !self.unsynced {
            return Ok(None);
        }
        self.unsynced = false;
        let db = Arc::clone(&self.db);
        Ok(Some(Box::new(move || {
            let ctx = "making committed state durable";
            db.begin_write()
                .map_err(|e| StateError::storage(ctx, e))
                .and_then(|txn| txn.commit().map_err(|e| StateError::storage(ctx, e)))
        })))
    }
}

/// The `(job, operator, state)` key of a state prefix (`job | operator | shard | state`).
fn state_id_of_prefix(state_prefix: &[u8]) -> StateResult<Vec<u8>> {
    let (job, operator, _, state) = layout::decode_state_prefix(state_prefix)?;
    Ok(layout::state_id_key(job, operator, state))
}

fn open<'txn>(
    txn: &'txn WriteTransaction,
    def: TableDefinition<&'static [u8], &'static [u8]>,
) -> StateResult<redb::Table<'txn, &'static [u8], &'static [u8]>> {
    txn.open_table(def)
        .map_err(|e| StateError::storage("opening a state table", e))
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

/// A redb read transaction: an MVCC snapshot that does not block commits.
struct RedbView {
    txn: ReadTransaction,
    entries: ReadTable,
}

impl RedbView {
    fn new(txn: ReadTransaction) -> StateResult<Self> {
        let entries = txn
            .open_table(ENTRIES)
            .map_err(|e| StateError::storage("opening a read view", e))?;
        Ok(Self { txn, entries })
    }
}

impl ViewSource for RedbView {
    fn scan(&self, prefix: Vec<u8>) -> StateResult<EntryIter<'_>> {
        let range = self
            .entries
            .range::<&[u8]>(prefix.as_slice()..)
            .map_err(|e| StateError::storage("scanning state", e))?;
        Ok(entries_under(range, prefix))
    }

    fn registered_states(&self, job: &JobId, operator: &OperatorId) -> StateResult<Vec<StateSpec>> {
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
            out.push(decode_spec(v.value(), "")?);
        }
        Ok(out)
    }

    fn state_size(
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

    fn scan_all(&self) -> StateResult<EntryIter<'_>> {
        self.scan(Vec::new())
    }
}
