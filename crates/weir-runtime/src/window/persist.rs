//! Window contents in keyed state: what a checkpoint sees of a window operator.
//!
//! Window operators aggregate in memory (vectorized accumulators) and bring keyed state up to
//! date with their windows on every checkpoint barrier, before the snapshot is taken; a new
//! instance restores them from there. Per state shard the operator keeps:
//!
//! - `window.groups` (value state): namespace = the window (`end`, `start` as order-preserving
//!   8-byte big-endian each, then one flag byte), key = the group's key columns in the state
//!   row codec, payload = the group's partial aggregate states in the row codec.
//! - event-time timers (`weir_state::TimerService`): one per (shard, window) at `end - 1` for
//!   an open window, at `end - 1 + allowed lateness` for a fired window kept for late updates.
//!   Restoring walks the timers in firing order to find the windows.
//! - `window.watermark` (value state): the operator's watermark, so a restored instance knows
//!   which windows already fired and never fires them twice.
//!
//! After each barrier the state is exactly the in-memory windows. Time windows write only what
//! changed since the previous barrier ([`WindowStore::persist_changes`]: the windows that got
//! rows, the removal of windows that are gone, moved timers); session windows rewrite their
//! state completely ([`WindowStore::persist_rows`]).

use super::config::WindowConfig;
use arrow::array::ArrayRef;
use arrow::compute::concat;
use arrow::datatypes::DataType;
use std::collections::{BTreeMap, BTreeSet};
use weir_api::state::{NamespaceRange, StateAddress};
use weir_api::{
    Error, EventTimeMs, KeyedStateStore, Result, StateKind, StateShardId, StateSpec, TaskContext,
};
use weir_plan::ShardAssignment;
use weir_plan::key_hash;
use weir_state::row_codec::{decode_rows, encode_rows};
use weir_state::timers::{TimerService, encode_timestamp};

const GROUPS: &str = "window.groups";
const WATERMARK: &str = "window.watermark";
/// Format of the encoded windows; bump on any change of the layout above.
const SCHEMA_VERSION: u32 = 1;

/// A window's bounds; orders by end, then start (the firing order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WindowId {
    /// Exclusive end, ms.
    pub end: i64,
    /// Inclusive start, ms.
    pub start: i64,
}

impl WindowId {
    /// The state namespace of this window with `flags`: 17 bytes that sort like `(end, start)`.
    fn namespace(self, flags: u8) -> [u8; 17] {
        let mut out = [0u8; 17];
        out[..8].copy_from_slice(&encode_timestamp(self.end));
        out[8..16].copy_from_slice(&encode_timestamp(self.start));
        out[16] = flags;
        out
    }

    fn from_namespace(ns: &[u8]) -> Result<(Self, u8)> {
        let corrupt = || Error::Internal(format!("corrupt window namespace of {} bytes", ns.len()));
        if ns.len() != 17 {
            return Err(corrupt());
        }
        let ts = |b: &[u8]| -> Result<i64> {
            let raw: [u8; 8] = b.try_into().map_err(|_| corrupt())?;
            Ok((u64::from_be_bytes(raw) ^ (1 << 63)) as i64)
        };
        Ok((
            WindowId {
                end: ts(&ns[..8])?,
                start: ts(&ns[8..16])?,
            },
            ns[16],
        ))
    }
}

/// Groups taken out of a [`GroupSpace`](super::GroupSpace): key columns and, per aggregate, its
/// partial-state columns; one row per group.
pub type GroupColumns = (Vec<ArrayRef>, Vec<Vec<ArrayRef>>);

/// Windows read back from keyed state, grouped by (window, flags).
#[derive(Debug, Default)]
pub struct RestoredWindows {
    /// The operator's watermark at the barrier (`i64::MIN` without state).
    pub watermark: i64,
    /// Per window and flags: key columns and partial states, one row per group.
    pub windows: BTreeMap<(WindowId, u8), GroupColumns>,
}

/// Groups ready to write: per group its encoded partial states, encoded key and state shard.
type EncodedGroups = (Vec<Vec<u8>>, Vec<Vec<u8>>, Vec<u32>);

/// What keyed state holds of one window of a time-window operator, so a barrier writes only
/// what changed.
#[derive(Debug, Default)]
struct Persisted {
    /// Shards holding groups of the window.
    shards: BTreeSet<u32>,
    /// The window's timer: its time and the shards it is registered in (`None`: none in state).
    timer: Option<(i64, BTreeSet<u32>)>,
}

/// The keyed state of one window operator instance.
pub struct WindowStore {
    store: Box<dyn KeyedStateStore>,
    shard_count: Option<u32>,
    owned: Vec<StateShardId>,
    timers: TimerService,
    /// The windows in state after the last [`WindowStore::persist_changes`] (time windows).
    persisted: BTreeMap<WindowId, Persisted>,
    /// The watermark in state after the last `persist_changes`.
    persisted_watermark: Option<i64>,
}

impl std::fmt::Debug for WindowStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowStore")
            .field("owned_shards", &self.owned.len())
            .finish()
    }
}

fn spec(name: &str) -> StateSpec {
    StateSpec {
        name: name.to_owned(),
        kind: StateKind::Value,
        schema_version: SCHEMA_VERSION,
        ttl_ms: None,
    }
}

fn codec_err(e: weir_state::StateError) -> Error {
    e.into()
}

impl WindowStore {
    /// The window state of the operator instance `ctx` describes.
    ///
    /// # Errors
    ///
    /// When the state backend cannot be opened or the states not registered.
    pub fn open(ctx: &TaskContext) -> Result<Self> {
        let mut store = ctx.keyed_state()?;
        store.register(&spec(GROUPS))?;
        store.register(&spec(WATERMARK))?;
        let owned = match ctx.state_shard_count {
            Some(count) => {
                let assignment = ShardAssignment::contiguous(count, ctx.parallelism)
                    .map_err(|m| Error::Internal(format!("{}: {m}", ctx.label())))?;
                assignment
                    .owners
                    .iter()
                    .filter(|r| r.subtask == ctx.subtask.0)
                    .flat_map(|r| r.first_shard..=r.last_shard)
                    .map(StateShardId)
                    .collect()
            }
            None => vec![StateShardId(0)],
        };
        Ok(Self {
            store,
            shard_count: ctx.state_shard_count,
            owned,
            timers: TimerService::event_time(),
            persisted: BTreeMap::new(),
            persisted_watermark: None,
        })
    }

    /// The state shard of each group key.
    fn shards(&self, keys: &[ArrayRef], rows: usize) -> Result<Vec<u32>> {
        match self.shard_count {
            Some(count) if !keys.is_empty() => key_hash::shard_ids(keys, count)
                .map_err(|e| Error::Internal(format!("hashing window keys: {e}"))),
            _ => Ok(vec![self.owned.first().map_or(0, |s| s.0); rows]),
        }
    }

    /// Brings the state of a time-window operator up to date at a barrier, writing only what
    /// changed since the previous one: the groups of `changed` windows (all their groups:
    /// a window's groups only ever grow), the removal of windows no longer `present` (fired
    /// and past their lateness), a timer per window and shard that moved (a window that fired
    /// is kept until `end - 1 + allowed lateness`), and the watermark. The state is then
    /// exactly the windows in memory, as a full rewrite would leave it.
    ///
    /// # Errors
    ///
    /// State and codec errors.
    pub fn persist_changes(
        &mut self,
        cfg: &WindowConfig,
        watermark: i64,
        changed: &[(WindowId, GroupColumns)],
        present: &BTreeSet<WindowId>,
    ) -> Result<()> {
        let gone: Vec<WindowId> = self
            .persisted
            .keys()
            .filter(|id| !present.contains(id))
            .copied()
            .collect();
        for id in gone {
            if let Some(p) = self.persisted.remove(&id) {
                self.remove_window(id, &p)?;
            }
        }
        for (id, (keys, states)) in changed {
            let rows = states
                .first()
                .and_then(|s| s.first())
                .map_or(0, |a| a.len());
            let shards = self.write_groups(*id, keys, states, rows)?;
            self.persisted.entry(*id).or_default().shards.extend(shards);
        }
        for id in present {
            let Some(p) = self.persisted.get_mut(id) else {
                continue; // no group was ever written: nothing to find it by
            };
            let fire = if id.end - 1 <= watermark {
                (id.end - 1).saturating_add(cfg.allowed_lateness)
            } else {
                id.end - 1
            };
            if p.timer
                .as_ref()
                .is_some_and(|(t, s)| *t == fire && *s == p.shards)
            {
                continue;
            }
            let ns = id.namespace(0);
            if let Some((old, shards)) = p.timer.take() {
                for shard in shards {
                    self.timers
                        .delete(self.store.as_mut(), old, StateShardId(shard), &[], &ns)?;
                }
            }
            for &shard in &p.shards {
                self.timers
                    .register(self.store.as_mut(), fire, StateShardId(shard), &[], &ns)?;
            }
            p.timer = Some((fire, p.shards.clone()));
        }
        if self.persisted_watermark != Some(watermark) {
            self.write_watermark(watermark)?;
            self.persisted_watermark = Some(watermark);
        }
        Ok(())
    }

    /// Removes a window's groups and timers.
    fn remove_window(&mut self, id: WindowId, p: &Persisted) -> Result<()> {
        let ns = id.namespace(0);
        let until = successor(&ns);
        for &shard in &p.shards {
            let shard = StateShardId(shard);
            let range = NamespaceRange::new(&ns, until.as_deref());
            for entry in self.store.scan(GROUPS, shard, range, None)? {
                if entry.namespace != ns {
                    continue;
                }
                let at = StateAddress {
                    shard,
                    namespace: &entry.namespace,
                    key: &entry.key,
                };
                self.store.remove_at(GROUPS, at, &entry.sub_key)?;
            }
        }
        if let Some((fire, shards)) = &p.timer {
            for &shard in shards {
                self.timers
                    .delete(self.store.as_mut(), *fire, StateShardId(shard), &[], &ns)?;
            }
        }
        Ok(())
    }

    /// Each group's encoded partial states, encoded key and state shard.
    fn encode_groups(
        &self,
        keys: &[ArrayRef],
        states: &[Vec<ArrayRef>],
        rows: usize,
    ) -> Result<EncodedGroups> {
        let flat: Vec<ArrayRef> = states.iter().flatten().cloned().collect();
        let payloads = encode_rows(&flat).map_err(codec_err)?;
        let key_bytes = if keys.is_empty() {
            vec![Vec::new(); rows]
        } else {
            encode_rows(keys).map_err(codec_err)?
        };
        Ok((payloads, key_bytes, self.shards(keys, rows)?))
    }

    /// Writes (overwrites) the groups of window `id`; returns the shards they went to.
    fn write_groups(
        &mut self,
        id: WindowId,
        keys: &[ArrayRef],
        states: &[Vec<ArrayRef>],
        rows: usize,
    ) -> Result<BTreeSet<u32>> {
        if rows == 0 {
            return Ok(BTreeSet::new());
        }
        let (payloads, key_bytes, shards) = self.encode_groups(keys, states, rows)?;
        let ns = id.namespace(0);
        for i in 0..rows {
            let at = StateAddress {
                shard: StateShardId(shards[i]),
                namespace: &ns,
                key: &key_bytes[i],
            };
            self.store.put_at(GROUPS, at, &[], &payloads[i])?;
        }
        Ok(shards.into_iter().collect())
    }

    /// Replaces the operator's state with one group per row: `ids[i]` is row i's window and
    /// flags (sessions), `keys` and `states` have one row per group.
    ///
    /// # Errors
    ///
    /// State and codec errors.
    pub fn persist_rows(
        &mut self,
        cfg: &WindowConfig,
        watermark: i64,
        ids: &[(WindowId, u8)],
        keys: &[ArrayRef],
        states: &[Vec<ArrayRef>],
    ) -> Result<()> {
        self.clear()?;
        self.write_rows(cfg, watermark, ids, keys, states)?;
        self.write_watermark(watermark)
    }

    /// Removes every group, timer and watermark of the owned shards.
    fn clear(&mut self) -> Result<()> {
        for &shard in &self.owned {
            for entry in self.store.scan(GROUPS, shard, NamespaceRange::ALL, None)? {
                let at = StateAddress {
                    shard,
                    namespace: &entry.namespace,
                    key: &entry.key,
                };
                self.store.remove_at(GROUPS, at, &entry.sub_key)?;
            }
            let at = StateAddress {
                shard,
                namespace: &[],
                key: &[],
            };
            self.store.remove_at(WATERMARK, at, &[])?;
        }
        self.timers
            .pop_due(self.store.as_mut(), &self.owned, i64::MAX)?;
        Ok(())
    }

    fn write_watermark(&mut self, watermark: i64) -> Result<()> {
        let bytes = watermark.to_be_bytes();
        for &shard in &self.owned {
            let at = StateAddress {
                shard,
                namespace: &[],
                key: &[],
            };
            self.store.put_at(WATERMARK, at, &[], &bytes)?;
        }
        Ok(())
    }

    fn write_rows(
        &mut self,
        cfg: &WindowConfig,
        watermark: i64,
        ids: &[(WindowId, u8)],
        keys: &[ArrayRef],
        states: &[Vec<ArrayRef>],
    ) -> Result<()> {
        let rows = ids.len();
        if rows == 0 {
            return Ok(());
        }
        let (payloads, key_bytes, shards) = self.encode_groups(keys, states, rows)?;
        let mut last_timer: Option<(WindowId, u8, u32)> = None;
        for i in 0..rows {
            let (id, flags) = ids[i];
            let ns = id.namespace(flags);
            let at = StateAddress {
                shard: StateShardId(shards[i]),
                namespace: &ns,
                key: &key_bytes[i],
            };
            self.store.put_at(GROUPS, at, &[], &payloads[i])?;
            if last_timer != Some((id, flags, shards[i])) {
                let fire = if id.end - 1 <= watermark {
                    (id.end - 1).saturating_add(cfg.allowed_lateness)
                } else {
                    id.end - 1
                };
                self.timers.register(
                    self.store.as_mut(),
                    fire,
                    StateShardId(shards[i]),
                    &[],
                    &ns,
                )?;
                last_timer = Some((id, flags, shards[i]));
            }
        }
        Ok(())
    }

    /// Reads the operator's windows back, in firing order of their timers.
    ///
    /// # Errors
    ///
    /// State errors, and corrupt entries that do not decode to the configured types.
    pub fn restore_windows(&mut self, cfg: &WindowConfig) -> Result<RestoredWindows> {
        let mut restored = RestoredWindows {
            watermark: EventTimeMs::MIN.0,
            windows: BTreeMap::new(),
        };
        let mut watermark: Option<i64> = None;
        for &shard in &self.owned {
            let at = StateAddress {
                shard,
                namespace: &[],
                key: &[],
            };
            if let Some(bytes) = self.store.get_at(WATERMARK, at, &[])? {
                let raw: [u8; 8] = bytes.as_slice().try_into().map_err(|_| {
                    Error::Internal(format!("corrupt window watermark in shard {}", shard.0))
                })?;
                let w = i64::from_be_bytes(raw);
                watermark = Some(watermark.map_or(w, |m: i64| m.min(w)));
            }
        }
        if let Some(w) = watermark {
            restored.watermark = w;
        }
        self.persisted_watermark = watermark;
        let key_types: Vec<DataType> = cfg
            .key_schema
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let state_types = cfg.aggregates.state_types();
        let widths = cfg.aggregates.state_widths();
        // The timers name every (shard, window); read each window's groups of that shard.
        // Per window: (key columns, flat state columns) read from each shard.
        type Chunk = (Vec<ArrayRef>, Vec<ArrayRef>);
        let mut parts: BTreeMap<(WindowId, u8), Vec<Chunk>> = BTreeMap::new();
        // Windows whose timers disagree on their time: their timers are set again at the next
        // barrier.
        let mut mismatched = BTreeSet::new();
        for timer in self
            .timers
            .pop_due(self.store.as_mut(), &self.owned, i64::MAX)?
        {
            let (id, flags) = WindowId::from_namespace(&timer.namespace)?;
            // The timer goes back into state, and the window is known to be there as it is: a
            // window that gets no rows before the next barrier need not be written again.
            self.timers.register(
                self.store.as_mut(),
                timer.timestamp_ms,
                timer.shard,
                &timer.key,
                &timer.namespace,
            )?;
            let p = self.persisted.entry(id).or_default();
            p.shards.insert(timer.shard.0);
            match &mut p.timer {
                None if !mismatched.contains(&id) => {
                    p.timer = Some((timer.timestamp_ms, BTreeSet::from([timer.shard.0])));
                }
                Some((ts, shards)) if *ts == timer.timestamp_ms => {
                    shards.insert(timer.shard.0);
                }
                _ => {
                    p.timer = None;
                    mismatched.insert(id);
                }
            }
            let ns = timer.namespace.clone();
            let until = successor(&ns);
            let range = NamespaceRange::new(&ns, until.as_deref());
            let entries: Vec<_> = self
                .store
                .scan(GROUPS, timer.shard, range, None)?
                .into_iter()
                .filter(|e| e.namespace == ns)
                .collect();
            if entries.is_empty() {
                continue;
            }
            let payloads: Vec<&[u8]> = entries.iter().map(|e| e.payload.as_slice()).collect();
            let flat = decode_rows(&state_types, &payloads).map_err(codec_err)?;
            let keys = if key_types.is_empty() {
                Vec::new()
            } else {
                let key_bytes: Vec<&[u8]> = entries.iter().map(|e| e.key.as_slice()).collect();
                decode_rows(&key_types, &key_bytes).map_err(codec_err)?
            };
            parts.entry((id, flags)).or_default().push((keys, flat));
        }
        for (id, chunks) in parts {
            let keys = concat_columns(chunks.iter().map(|c| c.0.as_slice()), key_types.len())?;
            let flat = concat_columns(chunks.iter().map(|c| c.1.as_slice()), state_types.len())?;
            let mut states = Vec::with_capacity(widths.len());
            let mut rest = flat.into_iter();
            for w in &widths {
                states.push(rest.by_ref().take(*w).collect());
            }
            restored.windows.insert(id, (keys, states));
        }
        Ok(restored)
    }
}

/// The smallest namespace of the same width after `ns` (`None` when `ns` is all `0xFF`): the
/// exclusive end of a scan of exactly `ns`.
fn successor(ns: &[u8]) -> Option<Vec<u8>> {
    let mut next = ns.to_vec();
    for byte in next.iter_mut().rev() {
        if *byte == u8::MAX {
            *byte = 0;
        } else {
            *byte += 1;
            return Some(next);
        }
    }
    None
}

/// Column-wise concatenation of chunks with `width` columns each.
fn concat_columns<'a>(
    chunks: impl Iterator<Item = &'a [ArrayRef]> + Clone,
    width: usize,
) -> Result<Vec<ArrayRef>> {
    (0..width)
        .map(|c| {
            let parts: Vec<&dyn arrow::array::Array> =
                chunks.clone().map(|chunk| chunk[c].as_ref()).collect();
            concat(&parts).map_err(|e| Error::arrow("restoring window groups", e))
        })
        .collect()
}
