//! Window contents in checkpoints: the [`StateImage`] a window operator hands the runtime at a
//! barrier, and the windows it reads back from [`TaskContext::restored_image`].
//!
//! Windows aggregate in memory; at a barrier the operator takes its groups out (key columns and
//! partial aggregate states, one row per group), puts them back, and hands the columns to an
//! image. Encoding the rows and writing the segments happen in the background, after the
//! barrier was forwarded: nothing goes through keyed state on the task's thread. The image has
//! two states:
//!
//! - `window.groups`: one row per (window, group): namespace = the window (`end`, `start` as
//!   order-preserving 8-byte big-endian each, then one flag byte), key = the group's key
//!   columns in the state row codec, payload = the group's partial aggregate states in the row
//!   codec, shard = the state shard of the key.
//! - `window.watermark`: one row per owned state shard, payload = the operator's watermark
//!   (8 bytes big-endian), so a restored instance knows which windows already fired and never
//!   fires them twice. After a rescale, an instance takes the lowest watermark of its shards.
//!
//! A window's firing time follows from its bounds and the watermark, so no timers are stored.

use super::config::WindowConfig;
use arrow::array::{ArrayRef, BinaryArray, BinaryBuilder, UInt32Array};
use arrow::datatypes::DataType;
use std::collections::BTreeMap;
use weir_api::{
    Error, EventTimeMs, Result, StateImage, StateKind, StateRows, StateShardId, StateSpec,
    TaskContext,
};
use weir_plan::ShardAssignment;
use weir_plan::key_hash;
use weir_state::row_codec::{decode_rows, encode_rows};
use weir_state::timers::encode_timestamp;

const GROUPS: &str = "window.groups";
const WATERMARK: &str = "window.watermark";
/// Format of the encoded windows; bump on any change of the layout above.
const SCHEMA_VERSION: u32 = 2;
/// Width of an encoded window namespace.
const NAMESPACE_LEN: usize = 17;

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
    fn namespace(self, flags: u8) -> [u8; NAMESPACE_LEN] {
        let mut out = [0u8; NAMESPACE_LEN];
        out[..8].copy_from_slice(&encode_timestamp(self.end));
        out[8..16].copy_from_slice(&encode_timestamp(self.start));
        out[16] = flags;
        out
    }

    fn from_namespace(ns: &[u8]) -> Result<(Self, u8)> {
        let corrupt = || Error::Internal(format!("corrupt window namespace of {} bytes", ns.len()));
        if ns.len() != NAMESPACE_LEN {
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

/// Groups of an image: which window each row belongs to, and the rows.
#[derive(Debug)]
pub enum ImageWindows {
    /// Every row belongs to one window with these flags (time windows).
    One(WindowId, u8),
    /// Row `i` belongs to `ids[i]` (sessions).
    PerRow(Vec<(WindowId, u8)>),
}

/// Windows read back from a checkpoint, grouped by (window, flags).
#[derive(Debug, Default)]
pub struct RestoredWindows {
    /// The operator's watermark at the barrier (`i64::MIN` without state).
    pub watermark: i64,
    /// Per window and flags: key columns and partial states, one row per group.
    pub windows: BTreeMap<(WindowId, u8), GroupColumns>,
}

/// Where one window operator instance keeps its state in checkpoints: its shards, and how keys
/// map to them.
#[derive(Debug, Clone)]
pub struct WindowState {
    shard_count: Option<u32>,
    owned: Vec<StateShardId>,
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

/// The state shards the operator instance `ctx` describes owns: its range of the contiguous
/// assignment of the shard count over the parallelism (shard 0 without keyed state).
///
/// # Errors
///
/// When the assignment cannot be computed (a shard count below the parallelism).
pub(crate) fn owned_shards(ctx: &TaskContext) -> Result<Vec<StateShardId>> {
    let Some(count) = ctx.state_shard_count else {
        return Ok(vec![StateShardId(0)]);
    };
    let assignment = ShardAssignment::contiguous(count, ctx.parallelism)
        .map_err(|m| Error::Internal(format!("{}: {m}", ctx.label())))?;
    Ok(assignment
        .owners
        .iter()
        .filter(|r| r.subtask == ctx.subtask.0)
        .flat_map(|r| r.first_shard..=r.last_shard)
        .map(StateShardId)
        .collect())
}

impl WindowState {
    /// The state shards of the operator instance `ctx` describes.
    ///
    /// # Errors
    ///
    /// When the shard assignment cannot be computed (a shard count below the parallelism).
    pub fn new(ctx: &TaskContext) -> Result<Self> {
        Ok(Self {
            shard_count: ctx.state_shard_count,
            owned: owned_shards(ctx)?,
        })
    }

    /// The image of the operator's windows: `parts` are the groups (key columns and partial
    /// states) with their windows, `watermark` the operator's. Encoding happens when the
    /// runtime calls the image, off the task's thread.
    pub fn image(&self, watermark: i64, parts: Vec<(ImageWindows, GroupColumns)>) -> StateImage {
        let this = self.clone();
        StateImage::new(move || {
            Ok(vec![
                this.encode_groups(&parts)?,
                this.encode_watermark(watermark),
            ])
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

    fn encode_groups(&self, parts: &[(ImageWindows, GroupColumns)]) -> Result<StateRows> {
        let total: usize = parts.iter().map(|(_, g)| group_rows(g)).sum();
        let mut shards = Vec::with_capacity(total);
        let mut namespaces = BinaryBuilder::with_capacity(total, total * NAMESPACE_LEN);
        let mut keys = BinaryBuilder::with_capacity(total, total * 16);
        let mut payloads = BinaryBuilder::with_capacity(total, total * 32);
        for (windows, groups) in parts {
            let rows = group_rows(groups);
            let (key_cols, states) = groups;
            if rows == 0 {
                continue;
            }
            shards.extend(self.shards(key_cols, rows)?);
            match windows {
                ImageWindows::One(id, flags) => {
                    let ns = id.namespace(*flags);
                    for _ in 0..rows {
                        namespaces.append_value(ns);
                    }
                }
                ImageWindows::PerRow(ids) => {
                    if ids.len() != rows {
                        return Err(Error::Internal(format!(
                            "{} window ids for {rows} session groups",
                            ids.len()
                        )));
                    }
                    for (id, flags) in ids {
                        namespaces.append_value(id.namespace(*flags));
                    }
                }
            }
            if key_cols.is_empty() {
                for _ in 0..rows {
                    keys.append_value([]);
                }
            } else {
                for k in encode_rows(key_cols).map_err(codec_err)? {
                    keys.append_value(k);
                }
            }
            let flat: Vec<ArrayRef> = states.iter().flatten().cloned().collect();
            for p in encode_rows(&flat).map_err(codec_err)? {
                payloads.append_value(p);
            }
        }
        Ok(StateRows {
            spec: spec(GROUPS),
            shards: UInt32Array::from(shards),
            namespaces: namespaces.finish(),
            keys: keys.finish(),
            payloads: payloads.finish(),
        })
    }

    fn encode_watermark(&self, watermark: i64) -> StateRows {
        let n = self.owned.len();
        let empty = || BinaryArray::from_iter_values(std::iter::repeat_n([0u8; 0], n));
        StateRows {
            spec: spec(WATERMARK),
            shards: self.owned.iter().map(|s| s.0).collect(),
            namespaces: empty(),
            keys: empty(),
            payloads: BinaryArray::from_iter_values(std::iter::repeat_n(
                watermark.to_be_bytes(),
                n,
            )),
        }
    }

    /// The windows of the checkpoint `ctx` restores (none on a fresh start).
    ///
    /// # Errors
    ///
    /// Rows that do not decode to the configured key and state types, or an image of another
    /// layout.
    pub fn restore(ctx: &TaskContext, cfg: &WindowConfig) -> Result<RestoredWindows> {
        let mut restored = RestoredWindows {
            watermark: EventTimeMs::MIN.0,
            windows: BTreeMap::new(),
        };
        let Some(image) = ctx.restored_image.as_deref() else {
            return Ok(restored);
        };
        let key_types: Vec<DataType> = cfg
            .key_schema
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let state_types = cfg.aggregates.state_types();
        let widths = cfg.aggregates.state_widths();
        let mut watermark: Option<i64> = None;
        // Per window: (encoded keys, encoded states), borrowed from the image.
        type Encoded<'a> = (Vec<&'a [u8]>, Vec<&'a [u8]>);
        let mut windows: BTreeMap<&[u8], Encoded<'_>> = BTreeMap::new();
        for rows in image {
            if rows.spec.schema_version != SCHEMA_VERSION {
                return Err(Error::Internal(format!(
                    "{}: window state `{}` has schema version {}, this Weir reads {SCHEMA_VERSION}",
                    ctx.label(),
                    rows.spec.name,
                    rows.spec.schema_version
                )));
            }
            match rows.spec.name.as_str() {
                WATERMARK => {
                    for p in rows.payloads.iter().flatten() {
                        let raw: [u8; 8] = p.try_into().map_err(|_| {
                            Error::Internal(format!(
                                "{}: corrupt window watermark of {} bytes",
                                ctx.label(),
                                p.len()
                            ))
                        })?;
                        let w = i64::from_be_bytes(raw);
                        watermark = Some(watermark.map_or(w, |m| m.min(w)));
                    }
                }
                GROUPS => {
                    for i in 0..rows.len() {
                        let entry = windows.entry(rows.namespaces.value(i)).or_default();
                        entry.0.push(rows.keys.value(i));
                        entry.1.push(rows.payloads.value(i));
                    }
                }
                other => {
                    return Err(Error::Internal(format!(
                        "{}: unknown window state `{other}` in the checkpoint",
                        ctx.label()
                    )));
                }
            }
        }
        if let Some(w) = watermark {
            restored.watermark = w;
        }
        for (ns, (key_bytes, payloads)) in windows {
            let id = WindowId::from_namespace(ns)?;
            let flat = decode_rows(&state_types, &payloads).map_err(codec_err)?;
            let keys = if key_types.is_empty() {
                Vec::new()
            } else {
                decode_rows(&key_types, &key_bytes).map_err(codec_err)?
            };
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

/// Rows of taken-out groups.
fn group_rows((keys, states): &GroupColumns) -> usize {
    states
        .first()
        .and_then(|s| s.first())
        .or_else(|| keys.first())
        .map_or(0, |a| a.len())
}
