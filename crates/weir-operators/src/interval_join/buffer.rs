//! The rows of one side of an interval join that arrived since its last flush, held in memory
//! as Arrow columns, by time bucket and key.
//!
//! Most rows of a join live shorter than a checkpoint interval: they arrive, are probed by the
//! other side's rows within the interval, and expire. Keeping them in memory until a checkpoint
//! barrier (or until the buffer outgrows its budget) spares each row a state write, a state
//! read per probe and a state removal. At a barrier the operator writes the buffered rows into
//! keyed state and empties the buffer, so a checkpoint holds every row and a restore finds them
//! there; a buffer never grows past the operator's memory budget.
//!
//! Rows are kept per time bucket (the width of the operator's state buckets): each bucket holds
//! the Arrow chunks of the rows that fell into it (a `take` of the arriving batch) and an index
//! from the encoded join key to the rows of that key. Eviction drops whole buckets.

use arrow::array::{Array, ArrayRef, UInt32Array};
use arrow::compute::{interleave, take};
use arrow::record_batch::RecordBatch;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;
use std::ops::RangeInclusive;
use twox_hash::XxHash64;
use weir_api::{Error, Result};

/// A fast hash for the encoded keys of the index (they come from the job's data, but a flood
/// of colliding keys only slows the one operator that holds them, like any skewed key).
type KeyHasher = BuildHasherDefault<XxHash64>;

/// Bytes a key entry of the index costs besides its key and rows (map slot, vector headers).
const KEY_OVERHEAD: usize = 64;

/// A buffered row: its chunk, its index in the chunk and its event time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RowRef {
    pub(super) chunk: u32,
    pub(super) row: u32,
    pub(super) time: i64,
}

/// The rows of one key in one bucket, and the state shard the key belongs to.
struct KeyRows {
    shard: u32,
    rows: Vec<RowRef>,
}

/// The rows of one bucket of one arriving batch, and which of them matched a row.
struct Chunk {
    batch: RecordBatch,
    matched: Vec<bool>,
}

/// The rows of one time bucket.
#[derive(Default)]
struct Bucket {
    chunks: Vec<u32>,
    keys: HashMap<Vec<u8>, KeyRows, KeyHasher>,
}

/// The rows an arriving batch hands to [`SideBuffer::insert`]: which rows of the batch, and
/// per row of the batch its encoded key, state shard, event time and whether it matched.
pub(super) struct Arrivals<'a> {
    pub(super) batch: &'a RecordBatch,
    pub(super) rows: &'a [u32],
    pub(super) keys: &'a [Vec<u8>],
    pub(super) shards: &'a [u32],
    pub(super) times: &'a [i64],
    pub(super) matched: &'a [bool],
}

/// One buffered row handed back by [`SideBuffer::drain`] for writing into keyed state.
pub(super) struct DrainedRow {
    pub(super) key: Vec<u8>,
    pub(super) shard: u32,
    pub(super) bucket: i64,
    pub(super) time: i64,
    /// Its index in the chunk's batch.
    pub(super) row: u32,
    pub(super) matched: bool,
}

/// One chunk handed back by [`SideBuffer::drain`]: its columns and its rows.
pub(super) struct DrainedChunk {
    pub(super) batch: RecordBatch,
    pub(super) rows: Vec<DrainedRow>,
}

/// The buffered rows of one side.
#[derive(Default)]
pub(super) struct SideBuffer {
    buckets: BTreeMap<i64, Bucket>,
    /// Chunks by id; `None` once evicted (its id is reused from `free`).
    chunks: Vec<Option<Chunk>>,
    free: Vec<u32>,
    /// An estimate of the memory the buffer holds.
    bytes: usize,
}

impl SideBuffer {
    /// An estimate of the memory the buffered rows take, in bytes.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether no row is buffered.
    pub(super) fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// Keeps `arrivals.rows`, each in the bucket `bucket_of` gives its time.
    pub(super) fn insert(
        &mut self,
        arrivals: &Arrivals<'_>,
        bucket_of: impl Fn(i64) -> i64,
    ) -> Result<()> {
        // The rows by bucket, in arrival order within each (a batch spans few buckets).
        let mut groups: Vec<(i64, Vec<u32>)> = Vec::new();
        for &row in arrivals.rows {
            let bucket = bucket_of(arrivals.times[row as usize]);
            match groups.iter_mut().find(|(b, _)| *b == bucket) {
                Some((_, rows)) => rows.push(row),
                None => groups.push((bucket, vec![row])),
            }
        }
        for (bucket, rows) in groups {
            let indices = UInt32Array::from(rows.clone());
            let columns = arrivals
                .batch
                .columns()
                .iter()
                .map(|c| take(c.as_ref(), &indices, None))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| Error::arrow("buffering interval join rows", e))?;
            let batch = RecordBatch::try_new(arrivals.batch.schema(), columns)
                .map_err(|e| Error::arrow("buffering interval join rows", e))?;
            let matched: Vec<bool> = rows.iter().map(|&r| arrivals.matched[r as usize]).collect();
            self.bytes += batch.get_array_memory_size() + matched.len();
            let chunk = self.add_chunk(Chunk { batch, matched });
            let entry = self.buckets.entry(bucket).or_default();
            entry.chunks.push(chunk);
            for (i, &row) in rows.iter().enumerate() {
                let r = row as usize;
                let at = RowRef {
                    chunk,
                    row: i as u32,
                    time: arrivals.times[r],
                };
                let key = &arrivals.keys[r];
                match entry.keys.get_mut(key.as_slice()) {
                    Some(rows) => rows.rows.push(at),
                    None => {
                        self.bytes += key.len() + KEY_OVERHEAD;
                        entry.keys.insert(
                            key.clone(),
                            KeyRows {
                                shard: arrivals.shards[r],
                                rows: vec![at],
                            },
                        );
                    }
                }
                self.bytes += std::mem::size_of::<RowRef>();
            }
        }
        Ok(())
    }

    fn add_chunk(&mut self, chunk: Chunk) -> u32 {
        match self.free.pop() {
            Some(id) => {
                self.chunks[id as usize] = Some(chunk);
                id
            }
            None => {
                self.chunks.push(Some(chunk));
                (self.chunks.len() - 1) as u32
            }
        }
    }

    /// Calls `found` with each buffered row of `key` in `buckets` whose time lies in
    /// `[lo, hi]`.
    pub(super) fn probe(
        &self,
        key: &[u8],
        buckets: RangeInclusive<i64>,
        (lo, hi): (i64, i64),
        mut found: impl FnMut(RowRef),
    ) {
        for entry in self.buckets.range(buckets).map(|(_, entry)| entry) {
            if let Some(rows) = entry.keys.get(key) {
                for &at in &rows.rows {
                    if at.time >= lo && at.time <= hi {
                        found(at);
                    }
                }
            }
        }
    }

    /// Marks a buffered row as matched; whether it was not before.
    pub(super) fn mark(&mut self, at: RowRef) -> bool {
        match self.chunks.get_mut(at.chunk as usize) {
            Some(Some(chunk)) => !std::mem::replace(&mut chunk.matched[at.row as usize], true),
            _ => false,
        }
    }

    /// The columns of the buffered rows `rows` (chunk, row in the chunk), in that order.
    pub(super) fn columns(
        &self,
        rows: impl IntoIterator<Item = (u32, u32)>,
    ) -> Result<Vec<ArrayRef>> {
        // The chunks the rows come from, numbered in order of first use.
        let mut sources: Vec<u32> = Vec::new();
        let mut positions: HashMap<u32, usize, KeyHasher> = HashMap::default();
        let indices: Vec<(usize, usize)> = rows
            .into_iter()
            .map(|(chunk, row)| {
                let source = *positions.entry(chunk).or_insert_with(|| {
                    sources.push(chunk);
                    sources.len() - 1
                });
                (source, row as usize)
            })
            .collect();
        let batches = sources
            .iter()
            .map(|&id| match self.chunks.get(id as usize) {
                Some(Some(chunk)) => Ok(&chunk.batch),
                _ => Err(Error::Internal(format!(
                    "interval join: buffered chunk {id} is gone"
                ))),
            })
            .collect::<Result<Vec<_>>>()?;
        let Some(first) = batches.first() else {
            return Err(Error::Internal(
                "interval join: columns of no buffered rows".into(),
            ));
        };
        (0..first.num_columns())
            .map(|c| {
                let arrays: Vec<&dyn Array> =
                    batches.iter().map(|b| b.column(c).as_ref()).collect();
                interleave(&arrays, &indices)
                    .map_err(|e| Error::arrow("gathering buffered join rows", e))
            })
            .collect()
    }

    /// Removes the buckets below `until` (every bucket with `None`); returns the columns of
    /// their rows that never matched when `unmatched` is asked for.
    pub(super) fn evict(
        &mut self,
        until: Option<i64>,
        unmatched: bool,
    ) -> Result<Option<Vec<ArrayRef>>> {
        let kept = match until {
            Some(until) => self.buckets.split_off(&until),
            None => BTreeMap::new(),
        };
        let gone = std::mem::replace(&mut self.buckets, kept);
        let mut pad: Vec<(u32, u32)> = Vec::new();
        let mut ids: Vec<u32> = Vec::new();
        for bucket in gone.into_values() {
            for (key, rows) in &bucket.keys {
                self.bytes = self.bytes.saturating_sub(
                    key.len() + KEY_OVERHEAD + rows.rows.len() * std::mem::size_of::<RowRef>(),
                );
            }
            ids.extend(bucket.chunks);
        }
        if unmatched {
            for &id in &ids {
                if let Some(Some(chunk)) = self.chunks.get(id as usize) {
                    pad.extend(
                        (0..chunk.matched.len() as u32)
                            .filter(|&row| !chunk.matched[row as usize])
                            .map(|row| (id, row)),
                    );
                }
            }
        }
        let columns = if pad.is_empty() {
            None
        } else {
            Some(self.columns(pad)?)
        };
        for id in ids {
            if let Some(chunk) = self.chunks.get_mut(id as usize).and_then(Option::take) {
                self.bytes = self
                    .bytes
                    .saturating_sub(chunk.batch.get_array_memory_size() + chunk.matched.len());
                self.free.push(id);
            }
        }
        if self.buckets.is_empty() {
            self.chunks.clear();
            self.free.clear();
            self.bytes = 0;
        }
        Ok(columns)
    }

    /// Empties the buffer, handing back every row with its chunk's columns.
    pub(super) fn drain(&mut self) -> Vec<DrainedChunk> {
        let mut drained: Vec<Option<DrainedChunk>> = Vec::new();
        drained.resize_with(self.chunks.len(), || None);
        for (bucket, entry) in std::mem::take(&mut self.buckets) {
            for (key, rows) in entry.keys {
                for at in rows.rows {
                    let Some(Some(chunk)) = self.chunks.get(at.chunk as usize) else {
                        continue;
                    };
                    drained[at.chunk as usize]
                        .get_or_insert_with(|| DrainedChunk {
                            batch: chunk.batch.clone(),
                            rows: Vec::new(),
                        })
                        .rows
                        .push(DrainedRow {
                            key: key.clone(),
                            shard: rows.shard,
                            bucket,
                            time: at.time,
                            row: at.row,
                            matched: chunk.matched[at.row as usize],
                        });
                }
            }
        }
        self.chunks.clear();
        self.free.clear();
        self.bytes = 0;
        drained.into_iter().flatten().collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};
    use std::sync::Arc;

    /// A batch of `(k, ts)` rows; keys are encoded as their little-endian bytes.
    fn arrive(buffer: &mut SideBuffer, rows: &[(i64, i64)], matched: &[bool]) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("ts", DataType::Int64, false),
        ]));
        let keys: Vec<i64> = rows.iter().map(|r| r.0).collect();
        let times: Vec<i64> = rows.iter().map(|r| r.1).collect();
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(keys.clone())),
                Arc::new(Int64Array::from(times.clone())),
            ],
        )
        .unwrap();
        let encoded: Vec<Vec<u8>> = keys.iter().map(|k| k.to_le_bytes().to_vec()).collect();
        let shards: Vec<u32> = keys.iter().map(|&k| k as u32 % 4).collect();
        let all: Vec<u32> = (0..rows.len() as u32).collect();
        let arrivals = Arrivals {
            batch: &batch,
            rows: &all,
            keys: &encoded,
            shards: &shards,
            times: &times,
            matched,
        };
        buffer.insert(&arrivals, |t| t.div_euclid(1000)).unwrap();
    }

    fn probe(buffer: &SideBuffer, key: i64, lo: i64, hi: i64) -> Vec<(i64, i64)> {
        let mut found = Vec::new();
        let buckets = lo.div_euclid(1000)..=hi.div_euclid(1000);
        buffer.probe(&key.to_le_bytes(), buckets, (lo, hi), |at| found.push(at));
        if found.is_empty() {
            return Vec::new();
        }
        let columns = buffer
            .columns(found.iter().map(|at| (at.chunk, at.row)))
            .unwrap();
        let k = columns[0].as_primitive::<Int64Type>();
        let t = columns[1].as_primitive::<Int64Type>();
        let mut rows: Vec<(i64, i64)> = (0..k.len()).map(|i| (k.value(i), t.value(i))).collect();
        rows.sort_unstable();
        rows
    }

    #[test]
    fn probes_find_the_rows_of_a_key_within_the_bounds_across_buckets_and_batches() {
        let mut b = SideBuffer::default();
        arrive(
            &mut b,
            &[(1, 900), (2, 950), (1, 1_500), (1, 2_999)],
            &[false; 4],
        );
        arrive(&mut b, &[(1, 1_200), (1, 4_000)], &[false; 2]);
        assert_eq!(
            probe(&b, 1, 900, 1_500),
            vec![(1, 900), (1, 1_200), (1, 1_500)]
        );
        assert_eq!(
            probe(&b, 1, 901, 2_999),
            vec![(1, 1_200), (1, 1_500), (1, 2_999)]
        );
        assert_eq!(probe(&b, 2, 0, 10_000), vec![(2, 950)]);
        assert!(probe(&b, 3, 0, 10_000).is_empty());
        assert!(b.bytes() > 0 && !b.is_empty());
    }

    #[test]
    fn eviction_drops_whole_buckets_and_returns_the_unmatched_rows() {
        let mut b = SideBuffer::default();
        arrive(
            &mut b,
            &[(1, 100), (2, 200), (1, 1_100)],
            &[false, true, false],
        );
        arrive(&mut b, &[(3, 300), (3, 2_100)], &[false; 2]);
        // Marking the row at 300 matched keeps it from being padded; a second mark is no news.
        let mut at = None;
        b.probe(&3_i64.to_le_bytes(), 0..=0, (0, 999), |r| at = Some(r));
        assert!(b.mark(at.unwrap()));
        assert!(!b.mark(at.unwrap()));
        let unmatched = b.evict(Some(1), true).unwrap().unwrap();
        let times = unmatched[1].as_primitive::<Int64Type>();
        assert_eq!(times.values().to_vec(), vec![100], "200 and 300 matched");
        assert!(probe(&b, 1, 0, 999).is_empty(), "bucket 0 is gone");
        assert_eq!(probe(&b, 1, 0, 5_000), vec![(1, 1_100)]);
        assert!(b.evict(Some(2), false).unwrap().is_none(), "not asked for");
        assert_eq!(probe(&b, 3, 0, 5_000), vec![(3, 2_100)]);
        assert!(b.evict(None, true).unwrap().is_some());
        assert!(b.is_empty());
        assert_eq!(b.bytes(), 0);
    }

    #[test]
    fn draining_hands_back_every_row_with_its_key_shard_bucket_and_flag() {
        let mut b = SideBuffer::default();
        arrive(
            &mut b,
            &[(5, 10), (6, 1_010), (5, 20)],
            &[true, false, false],
        );
        arrive(&mut b, &[(5, 1_500)], &[false]);
        let mut rows: Vec<(i64, i64, u32, i64, bool)> = b
            .drain()
            .iter()
            .flat_map(|chunk| {
                let times = chunk.batch.column(1).as_primitive::<Int64Type>().clone();
                chunk.rows.iter().map(move |r| {
                    assert_eq!(times.value(r.row as usize), r.time);
                    let key = i64::from_le_bytes(r.key.clone().try_into().unwrap());
                    (key, r.time, r.shard, r.bucket, r.matched)
                })
            })
            .collect();
        rows.sort_unstable();
        assert_eq!(
            rows,
            vec![
                (5, 10, 1, 0, true),
                (5, 20, 1, 0, false),
                (5, 1_500, 1, 1, false),
                (6, 1_010, 2, 1, false)
            ]
        );
        assert!(b.is_empty() && b.bytes() == 0);
        assert!(probe(&b, 5, 0, 5_000).is_empty());
    }
}
