//! State segments: the immutable Parquet files a snapshot writes, their stable paths, their
//! descriptors and checksums. There are two kinds:
//!
//! - **per-shard segments**, one per (operator, subtask, shard, state), written from redb by
//!   [`PendingSnapshot::write`](crate::PendingSnapshot::write) and restored into redb;
//! - **image segments**, one per (operator, subtask, state) covering every shard the subtask
//!   owns, written from the rows an in-memory operator hands over at a barrier
//!   ([`SegmentStore::write_image`](crate::SegmentStore::write_image)) and handed back to the
//!   operator on restore ([`SegmentStore::read_image`](crate::SegmentStore::read_image)).
//!
//! # Per-shard segments
//!
//! A segment holds the committed, unexpired entries of one state of one shard of one operator at
//! one epoch, at [`segment_path`]. Its rows are the parts of the entry key that vary inside that
//! (job, operator, shard, state) range, plus the payload and the TTL deadline:
//!
//! | column      | Arrow type        | meaning                                                 |
//! |-------------|-------------------|---------------------------------------------------------|
//! | `namespace` | `Binary` not null | the key namespace bytes (empty by default)              |
//! | `key`       | `Binary` not null | the operator's key bytes                                |
//! | `sub_key`   | `Binary` not null | the sub-key: empty, map key, list position, set element |
//! | `payload`   | `Binary` not null | the codec bytes exactly as stored (no expiry header)    |
//! | `expiry_ms` | `Int64` nullable  | absolute TTL deadline, ms since the Unix epoch; null = none |
//!
//! Job, operator, shard and state are constant per segment and live in the Parquet key-value
//! metadata (see the `META_*` constants), with the state's spec as JSON, the state format version
//! and the codec. The layout key of a row is `EntryKey { job, operator, shard, state, namespace,
//! key, sub_key }` ([`crate::layout`]), so restore rebuilds byte-identical keys and values.
//!
//! # Image segments
//!
//! An image segment holds the rows of one state of an in-memory operator (a
//! [`weir_api::StateRows`]) for *all* the shards one subtask owns, a contiguous range
//! `first..=last`, at [`image_segment_path`]. One file per subtask and state instead of one per
//! shard: a subtask owning 128 shards would otherwise write 128 tiny files per epoch. Its
//! descriptor has [`SegmentDescriptor::last_shard`] set. Columns:
//!
//! | column      | Arrow type        | meaning                                            |
//! |-------------|-------------------|----------------------------------------------------|
//! | `shard`     | `UInt32` not null | the state shard of the row's key, in `first..=last` |
//! | `namespace` | `Binary` not null | the row's namespace (e.g. the window)              |
//! | `key`       | `Binary` not null | the row's key (empty for operator-wide values)     |
//! | `payload`   | `Binary` not null | the row's value, in the operator's own encoding    |
//!
//! The key-value metadata is that of a per-shard segment, with [`META_SHARD`] the first shard,
//! plus [`META_LAST_SHARD`]. Rows are in the operator's order, not sorted by shard; a restoring
//! subtask keeps the rows of the shards it owns, so an image written at one parallelism restores
//! at another. Both kinds are Snappy-compressed without dictionaries on keys and payloads.

use crate::engine::STATE_FORMAT_VERSION;
use crate::error::{StateError, StateResult};
use crate::layout::{self, EntryKey};
use arrow::array::{Array, ArrayRef, BinaryArray, BinaryBuilder, Int64Array, Int64Builder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::sync::Arc;
use weir_api::{Epoch, JobId, OperatorId, StateShardId, StateSpec, SubtaskIndex};
use weir_plan::sha256_hex;

/// Metadata key: the state's [`StateSpec`] as JSON (`{"name","kind","schemaVersion","ttlMs"}`).
pub const META_SPEC: &str = "weir.state.spec";
/// Metadata key: the job id.
pub const META_JOB: &str = "weir.job";
/// Metadata key: the operator id.
pub const META_OPERATOR: &str = "weir.operator";
/// Metadata key: the subtask that wrote the segment (decimal).
pub const META_SUBTASK: &str = "weir.subtask";
/// Metadata key: the state shard (decimal); the first shard of an image segment.
pub const META_SHARD: &str = "weir.shard";
/// Metadata key: the last shard an image segment covers (decimal); absent in per-shard segments.
pub const META_LAST_SHARD: &str = "weir.lastShard";
/// Metadata key: the operator's `stateShardCount` when the segment was written (decimal).
pub const META_SHARD_COUNT: &str = "weir.stateShardCount";
/// Metadata key: the checkpoint epoch (decimal).
pub const META_EPOCH: &str = "weir.epoch";
/// Metadata key: the checkpoint namespace.
pub const META_NAMESPACE: &str = "weir.checkpointNamespace";
/// Metadata key: [`STATE_FORMAT_VERSION`] of the writer (decimal).
pub const META_FORMAT_VERSION: &str = "weir.stateFormatVersion";
/// Metadata key: the payload codec, always [`CODEC`].
pub const META_CODEC: &str = "weir.codec";
/// The payload codec named in every segment: a descriptor names its codec, so a reader of
/// another build knows how the payloads are encoded.
pub const CODEC: &str = "postcard-1";
/// File name suffix of a segment; the state name is percent-encoded before it.
pub const SEGMENT_SUFFIX: &str = ".parquet";

/// Rows per Arrow batch (and at most per Parquet page run) while encoding or decoding a segment.
pub(crate) const BATCH_ROWS: usize = 64 * 1024;

/// A written segment, as the epoch manifest records it.
///
/// Serialized as JSON with camelCase fields. `path` is relative to the base path of the
/// [`SegmentStore`](crate::SegmentStore) that wrote it, so a checkpoint directory can move.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SegmentDescriptor {
    /// The stable state path, `checkpoint/{namespace}/{epoch}/{operatorId}/{subtask}/{shard}/{state}.parquet`
    /// ([`segment_path`]; `{first}-{last}` instead of `{shard}` for an image segment:
    /// [`image_segment_path`]), each part percent-encoded by `object_store::path`.
    pub path: String,
    /// The operator whose state this is.
    pub operator: OperatorId,
    /// The subtask that wrote it.
    pub subtask: SubtaskIndex,
    /// The state shard; the first shard an image segment covers.
    pub shard: StateShardId,
    /// `None` for a per-shard segment; for an image segment the last shard it covers: it holds
    /// rows of shards `shard..=last_shard` (both inclusive). Absent from the JSON when `None`,
    /// so manifests without image segments are unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_shard: Option<StateShardId>,
    /// The state name.
    pub state: String,
    /// Number of entries (rows).
    pub rows: u64,
    /// Size of the Parquet file in bytes.
    pub bytes: u64,
    /// SHA-256 of the file bytes, lowercase hex.
    pub sha256: String,
    /// The operator's `stateShardCount` when written; restore refuses another count.
    pub state_shard_count: u32,
    /// The state's schema version when written; restore checks it before downloading.
    pub schema_version: u32,
}

impl SegmentDescriptor {
    /// Whether this is an image segment of an in-memory operator (restored into the operator
    /// with [`SegmentStore::read_image`](crate::SegmentStore::read_image)), not a per-shard
    /// segment of keyed state.
    pub fn is_image(&self) -> bool {
        self.last_shard.is_some()
    }

    /// The shards the segment covers, both ends inclusive: `shard..=shard` for a per-shard
    /// segment, `shard..=last_shard` for an image segment (empty if a malformed descriptor has
    /// its last shard before its first).
    pub fn shard_range(&self) -> RangeInclusive<u32> {
        self.shard.0..=self.last_shard.unwrap_or(self.shard).0
    }

    /// Whether the segment may hold rows of `shard`.
    pub fn covers(&self, shard: u32) -> bool {
        self.shard_range().contains(&shard)
    }

    /// Whether `self` and `other` hold the same state of the same operator for at least one
    /// common shard: two such segments in one checkpoint would restore a shard twice.
    pub fn overlaps(&self, other: &SegmentDescriptor) -> bool {
        let (a, b) = (self.shard_range(), other.shard_range());
        self.operator == other.operator
            && self.state == other.state
            && !a.is_empty()
            && !b.is_empty()
            && a.start() <= b.end()
            && b.start() <= a.end()
    }

    /// The stable state path this descriptor's segment has in `epoch` of `namespace`:
    /// [`segment_path`] or, for an image segment, [`image_segment_path`]. A manifest checks
    /// every `path` against it.
    pub fn stable_path(&self, namespace: &str, epoch: Epoch) -> ObjectPath {
        match self.last_shard {
            None => segment_path(
                namespace,
                epoch,
                &self.operator,
                self.subtask,
                self.shard,
                &self.state,
            ),
            Some(last) => image_segment_path(
                namespace,
                epoch,
                &self.operator,
                self.subtask,
                self.shard,
                last,
                &self.state,
            ),
        }
    }

    /// The shards for messages: `3` or `0..=7`.
    pub(crate) fn shards_shown(&self) -> String {
        match self.last_shard {
            None => self.shard.0.to_string(),
            Some(last) => format!("{}..={}", self.shard.0, last.0),
        }
    }
}

/// The pairs of segments that [overlap](SegmentDescriptor::overlaps): for every segment that
/// shares a shard of its (operator, state) with a segment before it in shard order, one pair
/// `(earlier, later)` (the earlier one being the overlapping segment reaching furthest).
/// Segments with a malformed range (last shard before the first) cover nothing and are skipped.
/// Among segments with the same range, input order decides which is the later one.
pub fn overlapping_segments<'a>(
    segments: impl IntoIterator<Item = &'a SegmentDescriptor>,
) -> Vec<(&'a SegmentDescriptor, &'a SegmentDescriptor)> {
    let mut groups: BTreeMap<(&OperatorId, &str), Vec<&SegmentDescriptor>> = BTreeMap::new();
    for d in segments {
        if !d.shard_range().is_empty() {
            groups.entry((&d.operator, &d.state)).or_default().push(d);
        }
    }
    let mut out = Vec::new();
    for mut group in groups.into_values() {
        // Stable: equal ranges keep their input order.
        group.sort_by_key(|d| (*d.shard_range().start(), *d.shard_range().end()));
        let mut widest: Option<&SegmentDescriptor> = None;
        for d in group {
            if let Some(w) = widest {
                if d.shard_range().start() <= w.shard_range().end() {
                    out.push((w, d));
                }
                if d.shard_range().end() <= w.shard_range().end() {
                    continue;
                }
            }
            widest = Some(d);
        }
    }
    out
}

/// Refuses malformed shard ranges and [overlapping](overlapping_segments) segments, naming the
/// later segment of the first overlapping pair.
pub(crate) fn check_disjoint(segments: &[SegmentDescriptor]) -> StateResult<()> {
    if let Some(d) = segments.iter().find(|d| d.shard_range().is_empty()) {
        return Err(StateError::Segment {
            path: d.path.clone(),
            message: format!("shard range {} is empty", d.shards_shown()),
        });
    }
    let Some((first, second)) = overlapping_segments(segments).into_iter().next() else {
        return Ok(());
    };
    let message = if !first.is_image() && !second.is_image() {
        format!(
            "a second segment of operator `{}`, shard {}, state `{}`",
            second.operator, second.shard.0, second.state
        )
    } else {
        format!(
            "covers shards {} of operator `{}`, state `{}`, which segment {} (shards {}) also \
             covers",
            second.shards_shown(),
            second.operator,
            second.state,
            first.path,
            first.shards_shown()
        )
    };
    Err(StateError::Segment {
        path: second.path.clone(),
        message,
    })
}

/// Where a segment goes and what it describes: the constant columns of its rows.
#[derive(Debug, Clone)]
pub(crate) struct SegmentHeader {
    pub(crate) namespace: String,
    pub(crate) epoch: Epoch,
    pub(crate) job: JobId,
    pub(crate) operator: OperatorId,
    pub(crate) subtask: SubtaskIndex,
    pub(crate) shard: StateShardId,
    pub(crate) state_shard_count: u32,
    pub(crate) spec: StateSpec,
}

/// The stable state path of a segment, relative to a store's base path.
pub fn segment_path(
    namespace: &str,
    epoch: Epoch,
    operator: &OperatorId,
    subtask: SubtaskIndex,
    shard: StateShardId,
    state: &str,
) -> ObjectPath {
    stable_path(
        namespace,
        epoch,
        operator,
        subtask,
        &shard.0.to_string(),
        state,
    )
}

/// The stable state path of an image segment covering shards `first..=last`, relative to a
/// store's base path: `checkpoint/{namespace}/{epoch}/{operator}/{subtask}/{first}-{last}/{state}.parquet`,
/// each part percent-encoded by `object_store::path` as in [`segment_path`]. The `-` keeps it
/// apart from every per-shard path, and it lies in the same epoch directory.
pub fn image_segment_path(
    namespace: &str,
    epoch: Epoch,
    operator: &OperatorId,
    subtask: SubtaskIndex,
    first: StateShardId,
    last: StateShardId,
    state: &str,
) -> ObjectPath {
    let shards = format!("{}-{}", first.0, last.0);
    stable_path(namespace, epoch, operator, subtask, &shards, state)
}

/// `checkpoint/{namespace}/{epoch}/{operator}/{subtask}/{shards}/{state}.parquet`.
fn stable_path(
    namespace: &str,
    epoch: Epoch,
    operator: &OperatorId,
    subtask: SubtaskIndex,
    shards: &str,
    state: &str,
) -> ObjectPath {
    let file = format!("{state}{SEGMENT_SUFFIX}");
    ObjectPath::from_iter([
        "checkpoint",
        namespace,
        &epoch.0.to_string(),
        operator.as_str(),
        &subtask.0.to_string(),
        shards,
        &file,
    ])
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("namespace", DataType::Binary, false),
        Field::new("key", DataType::Binary, false),
        Field::new("sub_key", DataType::Binary, false),
        Field::new("payload", DataType::Binary, false),
        Field::new("expiry_ms", DataType::Int64, true),
    ]))
}

pub(crate) fn parquet_error(path: &str, e: impl std::fmt::Display) -> StateError {
    StateError::Segment {
        path: path.to_owned(),
        message: e.to_string(),
    }
}

/// Writer properties of a segment: Snappy, the key-value metadata of `header` (with
/// [`META_LAST_SHARD`] for an image segment, `last` set) and no dictionary on the `plain`
/// columns.
pub(crate) fn writer_properties(
    header: &SegmentHeader,
    last: Option<StateShardId>,
    plain: &[&str],
) -> StateResult<WriterProperties> {
    let spec = serde_json::to_string(&header.spec)
        .map_err(|e| StateError::corrupt(format!("encoding a state spec: {e}")))?;
    let mut meta: Vec<KeyValue> = [
        (META_SPEC, spec),
        (META_JOB, header.job.to_string()),
        (META_OPERATOR, header.operator.to_string()),
        (META_SUBTASK, header.subtask.0.to_string()),
        (META_SHARD, header.shard.0.to_string()),
        (META_SHARD_COUNT, header.state_shard_count.to_string()),
        (META_EPOCH, header.epoch.0.to_string()),
        (META_NAMESPACE, header.namespace.clone()),
        (META_FORMAT_VERSION, STATE_FORMAT_VERSION.to_string()),
        (META_CODEC, CODEC.to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| KeyValue::new(k.to_owned(), v))
    .collect();
    if let Some(last) = last {
        meta.push(KeyValue::new(
            META_LAST_SHARD.to_owned(),
            last.0.to_string(),
        ));
    }
    // Keys, sub-keys and payloads are mostly distinct: dictionaries would only cost time.
    let mut props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_key_value_metadata(Some(meta));
    for column in plain {
        props = props.set_column_dictionary_enabled(ColumnPath::from(*column), false);
    }
    Ok(props.build())
}

/// Encodes one segment incrementally: rows in, Parquet bytes out.
pub(crate) struct SegmentEncoder {
    header: SegmentHeader,
    path: ObjectPath,
    writer: ArrowWriter<Vec<u8>>,
    namespace: BinaryBuilder,
    key: BinaryBuilder,
    sub_key: BinaryBuilder,
    payload: BinaryBuilder,
    expiry: Int64Builder,
    buffered: usize,
    rows: u64,
}

impl SegmentEncoder {
    pub(crate) fn try_new(header: SegmentHeader) -> StateResult<Self> {
        let path = segment_path(
            &header.namespace,
            header.epoch,
            &header.operator,
            header.subtask,
            header.shard,
            &header.spec.name,
        );
        let props = writer_properties(&header, None, &["key", "sub_key", "payload"])?;
        let writer = ArrowWriter::try_new(Vec::new(), schema(), Some(props))
            .map_err(|e| parquet_error(path.as_ref(), e))?;
        Ok(Self {
            header,
            path,
            writer,
            namespace: BinaryBuilder::new(),
            key: BinaryBuilder::new(),
            sub_key: BinaryBuilder::new(),
            payload: BinaryBuilder::new(),
            expiry: Int64Builder::new(),
            buffered: 0,
            rows: 0,
        })
    }

    pub(crate) fn header(&self) -> &SegmentHeader {
        &self.header
    }

    /// Appends one entry (the caller checked it belongs to this segment and is not expired).
    pub(crate) fn push(
        &mut self,
        parts: &EntryKey<'_>,
        payload: &[u8],
        expiry_ms: Option<u64>,
    ) -> StateResult<()> {
        let expiry = expiry_ms
            .map(|e| {
                i64::try_from(e).map_err(|_| {
                    StateError::corrupt(format!("TTL deadline {e} ms does not fit an Int64"))
                })
            })
            .transpose()?;
        self.namespace.append_value(parts.namespace);
        self.key.append_value(parts.key);
        self.sub_key.append_value(parts.sub_key);
        self.payload.append_value(payload);
        self.expiry.append_option(expiry);
        self.buffered += 1;
        self.rows += 1;
        if self.buffered >= BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> StateResult<()> {
        if self.buffered == 0 {
            return Ok(());
        }
        self.buffered = 0;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.namespace.finish()),
            Arc::new(self.key.finish()),
            Arc::new(self.sub_key.finish()),
            Arc::new(self.payload.finish()),
            Arc::new(self.expiry.finish()),
        ];
        let batch = RecordBatch::try_new(schema(), columns)
            .map_err(|e| parquet_error(self.path.as_ref(), e))?;
        self.writer
            .write(&batch)
            .map_err(|e| parquet_error(self.path.as_ref(), e))
    }

    /// Closes the file: its path, bytes and descriptor (with the checksum).
    pub(crate) fn finish(mut self) -> StateResult<(ObjectPath, Bytes, SegmentDescriptor)> {
        self.flush()?;
        let path = self.path.clone();
        let bytes = self
            .writer
            .into_inner()
            .map_err(|e| parquet_error(path.as_ref(), e))?;
        let descriptor = SegmentDescriptor {
            path: path.to_string(),
            operator: self.header.operator,
            subtask: self.header.subtask,
            shard: self.header.shard,
            last_shard: None,
            state: self.header.spec.name,
            rows: self.rows,
            bytes: bytes.len() as u64,
            sha256: sha256_hex(&bytes),
            state_shard_count: self.header.state_shard_count,
            schema_version: self.header.spec.schema_version,
        };
        Ok((path, Bytes::from(bytes), descriptor))
    }
}

/// What a segment file's key-value metadata says, its format version and codec checked.
#[derive(Debug)]
pub(crate) struct FileMeta {
    pub(crate) job: JobId,
    pub(crate) operator: OperatorId,
    pub(crate) shard: StateShardId,
    pub(crate) last_shard: Option<StateShardId>,
    pub(crate) state_shard_count: u32,
    pub(crate) spec: StateSpec,
}

impl FileMeta {
    /// Reads the metadata of the file at `path`; refuses another format version or codec.
    pub(crate) fn read(path: &str, kv: Option<&Vec<KeyValue>>) -> StateResult<Self> {
        let find = |key: &str| {
            kv.and_then(|kv| kv.iter().find(|e| e.key == key))
                .and_then(|e| e.value.as_deref())
        };
        let get = |key: &str| -> StateResult<&str> {
            find(key).ok_or_else(|| parquet_error(path, format!("metadata key `{key}` is missing")))
        };
        let parse = |key: &str, raw: &str| -> StateResult<u64> {
            raw.parse().map_err(|_| {
                parquet_error(path, format!("metadata `{key}` = `{raw}` is not a number"))
            })
        };
        let number = |key: &str| parse(key, get(key)?);
        let shard = |key: &str, raw: &str| -> StateResult<StateShardId> {
            u32::try_from(parse(key, raw)?)
                .map(StateShardId)
                .map_err(|_| parquet_error(path, "shard overflows"))
        };
        let format = number(META_FORMAT_VERSION)?;
        if format != u64::from(STATE_FORMAT_VERSION) {
            return Err(StateError::FormatVersion {
                path: path.into(),
                found: u32::try_from(format).unwrap_or(u32::MAX),
                expected: STATE_FORMAT_VERSION,
            });
        }
        if get(META_CODEC)? != CODEC {
            return Err(parquet_error(
                path,
                format!(
                    "payload codec `{}`, this Weir reads `{CODEC}`",
                    get(META_CODEC)?
                ),
            ));
        }
        let spec: StateSpec = serde_json::from_str(get(META_SPEC)?)
            .map_err(|e| parquet_error(path, format!("state spec: {e}")))?;
        Ok(Self {
            job: JobId::new(get(META_JOB)?),
            operator: OperatorId::new(get(META_OPERATOR)?),
            shard: shard(META_SHARD, get(META_SHARD)?)?,
            last_shard: find(META_LAST_SHARD)
                .map(|raw| shard(META_LAST_SHARD, raw))
                .transpose()?,
            state_shard_count: u32::try_from(number(META_SHARD_COUNT)?)
                .map_err(|_| parquet_error(path, "stateShardCount overflows"))?,
            spec,
        })
    }

    /// Refuses a file whose operator, shards, state, `stateShardCount` or schema version
    /// differ from its descriptor's (an image file described as a per-shard segment included).
    pub(crate) fn check(self, path: &str, descriptor: &SegmentDescriptor) -> StateResult<Self> {
        let found = (
            &self.operator,
            self.shard,
            self.last_shard,
            self.spec.name.as_str(),
            self.state_shard_count,
            self.spec.schema_version,
        );
        let described = (
            &descriptor.operator,
            descriptor.shard,
            descriptor.last_shard,
            descriptor.state.as_str(),
            descriptor.state_shard_count,
            descriptor.schema_version,
        );
        if found != described {
            return Err(parquet_error(
                path,
                format!(
                    "file holds (operator, shard, lastShard, state, stateShardCount, \
                     schemaVersion) = {found:?}, its descriptor says {described:?}"
                ),
            ));
        }
        Ok(self)
    }
}

/// A segment read back: its metadata and its entries as (layout key, stored value) pairs.
#[derive(Debug)]
pub(crate) struct DecodedSegment {
    pub(crate) job: JobId,
    pub(crate) operator: OperatorId,
    pub(crate) shard: StateShardId,
    pub(crate) spec: StateSpec,
    /// `(entry key, expiry header + payload)`, byte-identical to what redb held.
    pub(crate) entries: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Decodes a segment file after its checksum was verified, and checks it against `descriptor`;
/// its entries are keyed for operator `target` when given (a renamed operator), else for the
/// operator that wrote them.
pub(crate) fn decode_segment(
    descriptor: &SegmentDescriptor,
    bytes: Bytes,
    target: Option<&OperatorId>,
) -> StateResult<DecodedSegment> {
    let path = descriptor.path.as_str();
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| parquet_error(path, e))?;
    let FileMeta {
        job,
        operator,
        shard,
        spec,
        ..
    } = FileMeta::read(
        path,
        builder.metadata().file_metadata().key_value_metadata(),
    )?
    .check(path, descriptor)?;
    let operator = target.cloned().unwrap_or(operator);
    let reader = builder
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| parquet_error(path, e))?;
    let prefix = layout::state_prefix(job.as_str(), operator.as_str(), shard, &spec.name);
    let mut entries = Vec::with_capacity(usize::try_from(descriptor.rows).unwrap_or(0));
    for batch in reader {
        let batch = batch.map_err(|e| parquet_error(path, e))?;
        let binary = |name: &str| -> StateResult<&BinaryArray> {
            batch
                .column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<BinaryArray>())
                .filter(|c| c.null_count() == 0)
                .ok_or_else(|| {
                    parquet_error(path, format!("column `{name}` is not non-null Binary"))
                })
        };
        let (namespace, key, sub_key, payload) = (
            binary("namespace")?,
            binary("key")?,
            binary("sub_key")?,
            binary("payload")?,
        );
        let expiry = batch
            .column_by_name("expiry_ms")
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
            .ok_or_else(|| parquet_error(path, "column `expiry_ms` is not Int64"))?;
        for row in 0..batch.num_rows() {
            let expiry_ms = if expiry.is_null(row) {
                0
            } else {
                u64::try_from(expiry.value(row))
                    .ok()
                    .filter(|e| *e != 0)
                    .ok_or_else(|| {
                        parquet_error(path, format!("invalid expiry_ms {}", expiry.value(row)))
                    })?
            };
            let entry_key = layout::key_prefix(&prefix, namespace.value(row), key.value(row));
            let mut full = entry_key;
            full.extend_from_slice(sub_key.value(row));
            entries.push((full, layout::encode_stored(expiry_ms, payload.value(row))));
        }
    }
    if entries.len() as u64 != descriptor.rows {
        return Err(parquet_error(
            path,
            format!(
                "file holds {} rows, its descriptor says {}",
                entries.len(),
                descriptor.rows
            ),
        ));
    }
    Ok(DecodedSegment {
        job,
        operator,
        shard,
        spec,
        entries,
    })
}
