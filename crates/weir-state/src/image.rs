//! Image segments of in-memory operators: [`SegmentStore::write_image`] writes the
//! [`StateRows`] of one state of one subtask as one Parquet file covering every shard the
//! subtask owns, and [`SegmentStore::read_image`] reads such files back for a restoring
//! subtask, keeping the rows of the shards it owns. The file layout is documented in
//! [`crate::segment`].
//!
//! Image segments are never loaded into redb: the operator that handed the rows over gets them
//! back and rebuilds its own memory from them.

use crate::error::{StateError, StateResult};
use crate::restore::background;
use crate::segment::{
    BATCH_ROWS, FileMeta, SegmentDescriptor, SegmentHeader, check_disjoint, image_segment_path,
    parquet_error, writer_properties,
};
use crate::snapshot::{SegmentStore, SnapshotScope};
use arrow::array::{Array, ArrayRef, BinaryArray, BinaryBuilder, BooleanArray, UInt32Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::sync::Arc;
use weir_api::{StateRows, StateShardId};
use weir_plan::sha256_hex;

/// Image segments fetched and decoded at once by [`SegmentStore::read_image`].
const IMAGE_CONCURRENCY: usize = 4;

/// The Arrow schema of an image segment (see [`crate::segment`]).
fn image_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("shard", DataType::UInt32, false),
        Field::new("namespace", DataType::Binary, false),
        Field::new("key", DataType::Binary, false),
        Field::new("payload", DataType::Binary, false),
    ]))
}

impl SegmentStore {
    /// Writes the rows of one state of an in-memory operator as one image segment covering
    /// every shard `scope`'s subtask owns (a contiguous range `first..=last`), at
    /// [`image_segment_path`](crate::segment::image_segment_path), with one `put`; returns its
    /// descriptor, or `None` when there are no rows (no file is written). Encoding runs on a
    /// blocking thread, in batches of at most 64 Ki rows sliced from `rows` without copying.
    ///
    /// The descriptor goes into the task's snapshot like the per-shard ones; on a local file
    /// system, publishing the manifest `fsync`s every segment it references
    /// (`weir_checkpoint::CheckpointStore::with_local_root`), image segments included.
    ///
    /// # Errors
    ///
    /// [`StateError::Corrupt`] when the subtask owns no shard or owned shards that are not one
    /// contiguous range, when the four columns of `rows` differ in length or hold nulls, and
    /// when a row belongs to a shard the subtask does not own (a routing bug: the row would be
    /// lost on restore), naming the operator, state and shard; [`StateError::Segment`] when
    /// Parquet encoding fails; [`StateError::ObjectStore`] when the upload fails;
    /// [`StateError::Background`] when the encoding thread panics.
    pub async fn write_image(
        &self,
        scope: &SnapshotScope,
        rows: StateRows,
    ) -> StateResult<Option<SegmentDescriptor>> {
        let (first, last) = owned_range(scope)?;
        let header = SegmentHeader {
            namespace: scope.namespace.clone(),
            epoch: scope.epoch,
            job: scope.job.clone(),
            operator: scope.operator.clone(),
            subtask: scope.subtask,
            shard: first,
            state_shard_count: scope.shards.state_shard_count,
            spec: rows.spec.clone(),
        };
        let encoded = tokio::task::spawn_blocking(move || encode_image(header, last, &rows))
            .await
            .map_err(|e| background("encoding an image segment", e))??;
        let Some((path, bytes, descriptor)) = encoded else {
            return Ok(None);
        };
        self.put(&path, bytes).await?;
        Ok(Some(descriptor))
    }

    /// Reads image segments back for a subtask that owns the shards `owned`: one [`StateRows`]
    /// per segment, in the order of `segments`, with only the rows of owned shards (possibly
    /// none) and the state spec stored in the file. Each file's SHA-256 is verified as it is
    /// downloaded; four segments are fetched and decoded (on blocking threads) at a time.
    ///
    /// Pass the segments [`assign_segments`](crate::assign_segments) gives the subtask: an
    /// image segment written at another parallelism goes to every subtask owning one of its
    /// shards, and each keeps its own rows here.
    ///
    /// # Errors
    ///
    /// Before any download, [`StateError::Segment`] for a per-shard segment of keyed state
    /// (restored with [`restore`](Self::restore)), an empty shard range, or two segments of
    /// one (operator, state) covering a common shard. While reading:
    /// [`StateError::Checksum`] naming the file, [`StateError::ObjectStore`],
    /// [`StateError::FormatVersion`], [`StateError::Segment`] for an unreadable file or one
    /// that contradicts its descriptor (operator, shard range, state, `stateShardCount`,
    /// schema version, codec, row count, a row outside its shard range);
    /// [`StateError::Background`] when a decoding thread panics.
    pub async fn read_image(
        &self,
        segments: &[SegmentDescriptor],
        owned: &[StateShardId],
    ) -> StateResult<Vec<StateRows>> {
        if let Some(d) = segments.iter().find(|d| !d.is_image()) {
            return Err(StateError::Segment {
                path: d.path.clone(),
                message: "a per-shard segment of keyed state, not an image segment; it is \
                          restored into keyed state, not into an in-memory operator"
                    .to_owned(),
            });
        }
        check_disjoint(segments)?;
        let mut owned: Vec<u32> = owned.iter().map(|s| s.0).collect();
        owned.sort_unstable();
        owned.dedup();
        let owned: Arc<[u32]> = owned.into();
        // Owned descriptors: see `SegmentStore::restore`.
        futures::stream::iter(segments.to_vec())
            .map(|d| {
                let owned = Arc::clone(&owned);
                async move {
                    let bytes = self.fetch_verified(&d).await?;
                    tokio::task::spawn_blocking(move || decode_image(&d, bytes, &owned))
                        .await
                        .map_err(|e| background("decoding an image segment", e))?
                }
            })
            .buffered(IMAGE_CONCURRENCY)
            .try_collect()
            .await
    }
}

/// The first and last shard `scope`'s subtask owns, which must form one contiguous range.
fn owned_range(scope: &SnapshotScope) -> StateResult<(StateShardId, StateShardId)> {
    let mut owned = scope.owned_shards();
    owned.sort_unstable();
    owned.dedup();
    let (Some(&first), Some(&last)) = (owned.first(), owned.last()) else {
        return Err(StateError::corrupt(format!(
            "subtask {} of operator `{}` owns no state shard under stateShardCount {}, so it \
             cannot hold image rows",
            scope.subtask, scope.operator, scope.shards.state_shard_count
        )));
    };
    if u64::from(last.0 - first.0) + 1 != owned.len() as u64 {
        return Err(StateError::corrupt(format!(
            "subtask {} of operator `{}` owns shards between {} and {} that are not one \
             contiguous range; an image segment covers one range",
            scope.subtask, scope.operator, first.0, last.0
        )));
    }
    Ok((first, last))
}

/// Checks and encodes `rows` into the bytes of an image segment covering
/// `header.shard..=last`; `None` for no rows. Runs on a blocking thread.
fn encode_image(
    header: SegmentHeader,
    last: StateShardId,
    rows: &StateRows,
) -> StateResult<Option<(ObjectPath, Bytes, SegmentDescriptor)>> {
    let (operator, state, first) = (&header.operator, &header.spec.name, header.shard);
    let n = rows.len();
    let columns: [&dyn Array; 4] = [&rows.shards, &rows.namespaces, &rows.keys, &rows.payloads];
    if columns.iter().any(|c| c.len() != n) {
        return Err(StateError::corrupt(format!(
            "the image rows of state `{state}` of operator `{operator}` have {n} shards, {} \
             namespaces, {} keys and {} payloads",
            rows.namespaces.len(),
            rows.keys.len(),
            rows.payloads.len()
        )));
    }
    if columns.iter().any(|c| c.null_count() > 0) {
        return Err(StateError::corrupt(format!(
            "the image rows of state `{state}` of operator `{operator}` hold nulls; shards, \
             namespaces, keys and payloads are never null"
        )));
    }
    if n == 0 {
        return Ok(None);
    }
    let owned = first.0..=last.0;
    if let Some(bad) = rows.shards.values().iter().find(|s| !owned.contains(s)) {
        return Err(StateError::corrupt(format!(
            "subtask {} of operator `{operator}` hands an image row of state `{state}` in shard \
             {bad}, which it does not own (it owns shards {}..={} under stateShardCount {})",
            header.subtask, first.0, last.0, header.state_shard_count
        )));
    }
    let path = image_segment_path(
        &header.namespace,
        header.epoch,
        operator,
        header.subtask,
        first,
        last,
        state,
    );
    let props = writer_properties(&header, Some(last), &["key", "payload"])?;
    let schema = image_schema();
    let mut writer = ArrowWriter::try_new(Vec::new(), Arc::clone(&schema), Some(props))
        .map_err(|e| parquet_error(path.as_ref(), e))?;
    for offset in (0..n).step_by(BATCH_ROWS) {
        let len = BATCH_ROWS.min(n - offset);
        // Slices share the buffers of `rows`: nothing is copied before Parquet encodes.
        let columns: Vec<ArrayRef> = vec![
            Arc::new(rows.shards.slice(offset, len)),
            Arc::new(rows.namespaces.slice(offset, len)),
            Arc::new(rows.keys.slice(offset, len)),
            Arc::new(rows.payloads.slice(offset, len)),
        ];
        let batch = RecordBatch::try_new(Arc::clone(&schema), columns)
            .map_err(|e| parquet_error(path.as_ref(), e))?;
        writer
            .write(&batch)
            .map_err(|e| parquet_error(path.as_ref(), e))?;
    }
    let bytes = writer
        .into_inner()
        .map_err(|e| parquet_error(path.as_ref(), e))?;
    let descriptor = SegmentDescriptor {
        path: path.to_string(),
        operator: header.operator.clone(),
        subtask: header.subtask,
        shard: first,
        last_shard: Some(last),
        state: header.spec.name.clone(),
        rows: n as u64,
        bytes: bytes.len() as u64,
        sha256: sha256_hex(&bytes),
        state_shard_count: header.state_shard_count,
        schema_version: header.spec.schema_version,
    };
    Ok(Some((path, Bytes::from(bytes), descriptor)))
}

/// The columns of an image being read, batch by batch.
#[derive(Default)]
struct Columns {
    shards: Vec<UInt32Array>,
    namespaces: Vec<BinaryArray>,
    keys: Vec<BinaryArray>,
    payloads: Vec<BinaryArray>,
}

/// Decodes an image segment whose checksum was verified, checks it against `descriptor` and
/// keeps the rows of the shards in `owned` (sorted, without duplicates). Runs on a blocking
/// thread.
fn decode_image(
    descriptor: &SegmentDescriptor,
    bytes: Bytes,
    owned: &[u32],
) -> StateResult<StateRows> {
    let path = descriptor.path.as_str();
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| parquet_error(path, e))?;
    let meta = FileMeta::read(
        path,
        builder.metadata().file_metadata().key_value_metadata(),
    )?
    .check(path, descriptor)?;
    let range = descriptor.shard_range();
    let mine = {
        let lo = owned.partition_point(|s| s < range.start());
        let hi = owned.partition_point(|s| s <= range.end());
        &owned[lo..hi]
    };
    let all_mine = mine.len() as u64 == u64::from(range.end() - range.start()) + 1;
    let reader = builder
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| parquet_error(path, e))?;
    let mut total = 0u64;
    let mut kept = Columns::default();
    for batch in reader {
        let batch = batch.map_err(|e| parquet_error(path, e))?;
        total += batch.num_rows() as u64;
        let shards: UInt32Array = column(&batch, "shard", "UInt32", path)?;
        let namespaces: BinaryArray = column(&batch, "namespace", "Binary", path)?;
        let keys: BinaryArray = column(&batch, "key", "Binary", path)?;
        let payloads: BinaryArray = column(&batch, "payload", "Binary", path)?;
        if let Some(bad) = shards.values().iter().find(|s| !range.contains(s)) {
            return Err(parquet_error(
                path,
                format!(
                    "a row of shard {bad}, outside the segment's shards {}",
                    descriptor.shards_shown()
                ),
            ));
        }
        if all_mine {
            kept.shards.push(shards);
            kept.namespaces.push(namespaces);
            kept.keys.push(keys);
            kept.payloads.push(payloads);
        } else if !mine.is_empty() {
            let mask: BooleanArray = shards
                .values()
                .iter()
                .map(|s| Some(mine.binary_search(s).is_ok()))
                .collect();
            kept.shards.push(keep(&shards, &mask, path)?);
            kept.namespaces.push(keep(&namespaces, &mask, path)?);
            kept.keys.push(keep(&keys, &mask, path)?);
            kept.payloads.push(keep(&payloads, &mask, path)?);
        }
    }
    if total != descriptor.rows {
        return Err(parquet_error(
            path,
            format!(
                "file holds {total} rows, its descriptor says {}",
                descriptor.rows
            ),
        ));
    }
    let empty = || BinaryBuilder::new().finish();
    Ok(StateRows {
        spec: meta.spec,
        shards: concat(kept.shards, UInt32Array::from(Vec::<u32>::new()), path)?,
        namespaces: concat(kept.namespaces, empty(), path)?,
        keys: concat(kept.keys, empty(), path)?,
        payloads: concat(kept.payloads, empty(), path)?,
    })
}

/// The non-null column `name` of `batch` as a `T` (`what` names the type in errors).
fn column<T: Array + Clone + 'static>(
    batch: &RecordBatch,
    name: &str,
    what: &str,
    path: &str,
) -> StateResult<T> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .filter(|c| c.null_count() == 0)
        .cloned()
        .ok_or_else(|| parquet_error(path, format!("column `{name}` is not non-null {what}")))
}

/// `array` as the concrete array type `T` it was built as.
fn downcast<T: Array + Clone + 'static>(array: &ArrayRef, path: &str) -> StateResult<T> {
    array
        .as_any()
        .downcast_ref::<T>()
        .cloned()
        .ok_or_else(|| parquet_error(path, "a column changed its type while decoding"))
}

/// The rows of `array` where `mask` is true.
fn keep<T: Array + Clone + 'static>(array: &T, mask: &BooleanArray, path: &str) -> StateResult<T> {
    let kept = arrow::compute::filter(array, mask).map_err(|e| parquet_error(path, e))?;
    downcast(&kept, path)
}

/// One array of `parts` in order (`empty` when there are none); copies only for two or more.
fn concat<T: Array + Clone + 'static>(mut parts: Vec<T>, empty: T, path: &str) -> StateResult<T> {
    if parts.len() <= 1 {
        return Ok(parts.pop().unwrap_or(empty));
    }
    let refs: Vec<&dyn Array> = parts.iter().map(|a| a as &dyn Array).collect();
    let joined = arrow::compute::concat(&refs).map_err(|e| parquet_error(path, e))?;
    downcast(&joined, path)
}
