//! Splitting batches by destination for the edges of a PartitionedPlan.
//!
//! A HASH edge routes each row by `key -> state shard -> owning subtask`:
//! [`HashPartitioner`] computes the stable shard of every row with [`weir_plan::key_hash`],
//! maps shards to their owners, buckets row indices per owner in one counting-sort pass and
//! gathers each bucket with Arrow's `take`. A REBALANCE edge uses [`RoundRobin`], which moves
//! whole batches.

use arrow::array::{ArrayRef, UInt32Array};
use arrow::compute::take_record_batch;
use arrow::datatypes::Schema;
use arrow::record_batch::RecordBatch;
use weir_api::{Error, Watermark, WatermarkMarks};
use weir_plan::key_hash;

/// Routes the rows of a batch to the downstream subtasks that own their keys' state shards.
///
/// Rows keep their input order within each output, so per-key order on the edge is preserved.
#[derive(Debug, Clone)]
pub struct HashPartitioner {
    /// Positions of the key columns in the input schema, in key order (order changes the hash).
    key_indices: Vec<usize>,
    /// `owner_of_shard[shard]` is the downstream subtask owning that shard; its length is the
    /// state shard count.
    owner_of_shard: Vec<u32>,
    /// Number of downstream subtasks.
    num_partitions: usize,
}

impl HashPartitioner {
    /// Creates a partitioner for the key columns `key_indices` over `owner_of_shard.len()` state
    /// shards, where `owner_of_shard[shard]` is the downstream subtask that owns `shard`.
    ///
    /// # Errors
    /// [`Error::Internal`] (the plan is inconsistent) when there are no key columns, no shards,
    /// more shards than `u32` can count, no partitions, or an owner is not below
    /// `num_partitions`.
    pub fn try_new(
        key_indices: Vec<usize>,
        owner_of_shard: Vec<u32>,
        num_partitions: usize,
    ) -> Result<Self, Error> {
        if key_indices.is_empty() {
            return Err(Error::Internal(
                "a HASH partitioner needs at least one key column".to_owned(),
            ));
        }
        if owner_of_shard.is_empty() || u32::try_from(owner_of_shard.len()).is_err() {
            return Err(Error::Internal(format!(
                "a HASH partitioner needs between 1 and {} state shards, got {}",
                u32::MAX,
                owner_of_shard.len()
            )));
        }
        if num_partitions == 0 {
            return Err(Error::Internal(
                "a HASH partitioner needs at least one downstream subtask".to_owned(),
            ));
        }
        if let Some((shard, owner)) = owner_of_shard
            .iter()
            .enumerate()
            .find(|(_, owner)| **owner as usize >= num_partitions)
        {
            return Err(Error::Internal(format!(
                "state shard {shard} is owned by subtask {owner}, but the downstream vertex has \
                 only {num_partitions} subtasks"
            )));
        }
        Ok(Self {
            key_indices,
            owner_of_shard,
            num_partitions,
        })
    }

    /// The state shard count (`owner_of_shard.len()`).
    pub fn shard_count(&self) -> u32 {
        // `try_new` checked that the length fits in u32.
        self.owner_of_shard.len() as u32
    }

    /// Number of downstream subtasks, the length of [`HashPartitioner::partition`]'s result.
    pub fn num_partitions(&self) -> usize {
        self.num_partitions
    }

    /// The key column positions, in key order.
    pub fn key_indices(&self) -> &[usize] {
        &self.key_indices
    }

    /// Checks that `schema` has every key column and that their types can be hashed, so a job
    /// fails at start rather than on its first batch.
    ///
    /// # Errors
    /// [`Error::Schema`] naming the missing or unsupported key column.
    pub fn check_schema(&self, schema: &Schema) -> Result<(), Error> {
        for &index in &self.key_indices {
            let field = schema.fields().get(index).ok_or_else(|| {
                Error::schema(
                    "HASH edge",
                    format!(
                        "key column #{index} does not exist: the input has {} columns",
                        schema.fields().len()
                    ),
                )
            })?;
            key_hash::check_key_type(field.name(), field.data_type())
                .map_err(|e| Error::schema("HASH edge", e.to_string()))?;
        }
        Ok(())
    }

    /// Splits `batch` into one batch per downstream subtask (`None` where no row goes).
    ///
    /// Row `r` goes to `owner_of_shard[shard_of(hash(keys of r))]`; rows keep their input order.
    ///
    /// # Errors
    /// [`Error::Schema`] when a key column is missing or has a type the stable hash does not
    /// define; [`Error::Arrow`] when gathering rows fails.
    pub fn partition(&self, batch: &RecordBatch) -> Result<Vec<Option<RecordBatch>>, Error> {
        if batch.num_rows() == 0 {
            return Ok(vec![None; self.num_partitions]);
        }
        let (owners, counts) = self.owners(batch)?;
        self.gather(batch, &owners, &counts)
    }

    /// [`HashPartitioner::partition`] of a batch inside which the watermark advances at
    /// `marks`: each part comes with the marks remapped to its rows (every part keeps every
    /// advance, so each downstream subtask sees the watermark move where the batch said).
    ///
    /// # Errors
    /// As [`HashPartitioner::partition`].
    pub fn partition_marked(
        &self,
        batch: &RecordBatch,
        marks: &WatermarkMarks,
    ) -> Result<Vec<(Option<RecordBatch>, WatermarkMarks)>, Error> {
        let mut remapped = vec![WatermarkMarks::new(); self.num_partitions];
        let push = |m: &mut WatermarkMarks, row: usize, split: bool, w: Watermark| {
            if split {
                m.push_split(row, w);
            } else {
                m.push(row, w);
            }
        };
        if batch.num_rows() == 0 {
            for (_, split, w) in marks.in_row_order() {
                remapped.iter_mut().for_each(|m| push(m, 0, split, w));
            }
            return Ok(vec![None; self.num_partitions]
                .into_iter()
                .zip(remapped)
                .collect());
        }
        let (owners, counts) = self.owners(batch)?;
        // Rows before each mark, per owner, in one pass over the owners.
        let mut before = vec![0_usize; self.num_partitions];
        let mut next_row = 0;
        for (row, split, w) in marks.in_row_order() {
            let row = row.min(owners.len());
            for &owner in &owners[next_row.min(row)..row] {
                before[owner as usize] += 1;
            }
            next_row = next_row.max(row);
            for (m, &b) in remapped.iter_mut().zip(&before) {
                push(m, b, split, w);
            }
        }
        let parts = self.gather(batch, &owners, &counts)?;
        Ok(parts.into_iter().zip(remapped).collect())
    }

    /// The owning subtask of every row of a non-empty batch, and how many rows each gets.
    fn owners(&self, batch: &RecordBatch) -> Result<(Vec<u32>, Vec<usize>), Error> {
        let keys = self
            .key_indices
            .iter()
            .map(|&index| {
                batch.columns().get(index).cloned().ok_or_else(|| {
                    Error::schema(
                        "HASH edge",
                        format!(
                            "key column #{index} does not exist: the batch has {} columns",
                            batch.num_columns()
                        ),
                    )
                })
            })
            .collect::<Result<Vec<ArrayRef>, Error>>()?;
        let shards = key_hash::shard_ids(&keys, self.shard_count())
            .map_err(|e| Error::schema("HASH edge", e.to_string()))?;

        // Owners per row, and how many rows each owner gets.
        let mut counts = vec![0_usize; self.num_partitions];
        let owners: Vec<u32> = shards
            .iter()
            .map(|&shard| {
                let owner = self.owner_of_shard[shard as usize];
                counts[owner as usize] += 1;
                owner
            })
            .collect();
        Ok((owners, counts))
    }

    /// Gathers the rows of each owner (`owners` per row, `counts` per owner) into its part.
    fn gather(
        &self,
        batch: &RecordBatch,
        owners: &[u32],
        counts: &[usize],
    ) -> Result<Vec<Option<RecordBatch>>, Error> {
        let mut out = vec![None; self.num_partitions];
        let rows = batch.num_rows();
        // Every row to one subtask (always so at parallelism 1): no copy needed.
        if let Some(only) = counts.iter().position(|&c| c == rows) {
            out[only] = Some(batch.clone());
            return Ok(out);
        }

        // Counting sort: offsets per owner, then one stable pass placing row indices.
        let mut next = Vec::with_capacity(self.num_partitions);
        let mut start = 0;
        for &count in counts {
            next.push(start);
            start += count;
        }
        let mut indices = vec![0_u32; rows];
        for (row, &owner) in owners.iter().enumerate() {
            let slot = &mut next[owner as usize];
            // `RecordBatch` row counts are far below u32::MAX in practice; `take` with u32
            // indices needs that anyway.
            indices[*slot] = u32::try_from(row).map_err(|_| {
                Error::Internal(format!("a batch of {rows} rows is too large to partition"))
            })?;
            *slot += 1;
        }
        let indices = UInt32Array::from(indices);
        let mut begin = 0;
        for (partition, &count) in counts.iter().enumerate() {
            if count == 0 {
                continue;
            }
            let slice = indices.slice(begin, count);
            begin += count;
            let part = take_record_batch(batch, &slice)
                .map_err(|e| Error::arrow("splitting a batch on a HASH edge", e))?;
            out[partition] = Some(part);
        }
        Ok(out)
    }
}

/// Batch-granular round robin over `n` outputs, for REBALANCE edges.
///
/// Whole batches move, so no rows are copied; consecutive batches go to consecutive outputs.
#[derive(Debug, Clone)]
pub struct RoundRobin {
    /// Number of outputs.
    n: usize,
    /// The output the next batch goes to.
    next: usize,
}

impl RoundRobin {
    /// Round robin over `n` outputs starting at output 0.
    ///
    /// # Panics
    /// When `n` is 0: an edge always has at least one downstream subtask.
    pub fn new(n: usize) -> Self {
        Self::starting_at(n, 0)
    }

    /// Round robin over `n` outputs starting at `start mod n`. Upstream subtask `i` starting at
    /// `i` spreads the first batches of all upstreams instead of sending them all to output 0.
    ///
    /// # Panics
    /// When `n` is 0.
    pub fn starting_at(n: usize, start: usize) -> Self {
        assert!(n > 0, "round robin needs at least one output");
        Self { n, next: start % n }
    }

    /// Number of outputs.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Always false: there is at least one output.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The output for the next batch; advances the rotation.
    pub fn next_output(&mut self) -> usize {
        let out = self.next;
        self.next = if out + 1 == self.n { 0 } else { out + 1 };
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Int64Type};
    use proptest::prelude::*;
    use std::sync::Arc;

    fn batch(keys: &[Option<i64>]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("key", DataType::Int64, true),
            Field::new("row", DataType::Int64, false),
            Field::new("label", DataType::Utf8, true),
        ]));
        let rows: Vec<i64> = (0..keys.len() as i64).collect();
        let labels: Vec<String> = rows.iter().map(|r| format!("row-{r}")).collect();
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(keys.to_vec())),
                Arc::new(Int64Array::from(rows)),
                Arc::new(StringArray::from(labels)),
            ],
        )
        .expect("valid batch")
    }

    /// The reference: the owner of one row computed row by row from the stable hash.
    fn expected_owner(key: Option<i64>, owner_of_shard: &[u32]) -> u32 {
        let column: ArrayRef = Arc::new(Int64Array::from(vec![key]));
        let shard = key_hash::shard_ids(&[column], owner_of_shard.len() as u32)
            .expect("int64 keys hash")[0];
        owner_of_shard[shard as usize]
    }

    fn check_split(keys: &[Option<i64>], owner_of_shard: &[u32], parallelism: usize) {
        let partitioner = HashPartitioner::try_new(vec![0], owner_of_shard.to_vec(), parallelism)
            .expect("valid partitioner");
        let input = batch(keys);
        let parts = partitioner.partition(&input).expect("partition");
        assert_eq!(parts.len(), parallelism);
        let mut seen = vec![false; keys.len()];
        for (subtask, part) in parts.iter().enumerate() {
            let Some(part) = part else { continue };
            assert!(part.num_rows() > 0, "empty outputs are None");
            assert_eq!(part.schema(), input.schema());
            let rows = part.column(1).as_primitive::<Int64Type>();
            let mut last = None;
            for (i, row) in rows.values().iter().enumerate() {
                let row = *row as usize;
                assert!(!seen[row], "row {row} emitted twice");
                seen[row] = true;
                assert!(last < Some(row), "input order kept");
                last = Some(row);
                assert_eq!(
                    expected_owner(keys[row], owner_of_shard) as usize,
                    subtask,
                    "row {row} went to the owner of its shard"
                );
                let key = part.column(0).as_primitive::<Int64Type>();
                assert_eq!(key.is_valid(i).then(|| key.value(i)), keys[row]);
                assert_eq!(
                    part.column(2).as_string::<i32>().value(i),
                    format!("row-{row}")
                );
            }
        }
        assert!(seen.iter().all(|s| *s), "every row lands somewhere");
    }

    #[test]
    fn splits_by_owner_with_nulls() {
        let keys: Vec<Option<i64>> = (0..200).map(|k| (k % 7 != 0).then_some(k % 13)).collect();
        check_split(&keys, &[0, 1, 2, 0, 1, 2, 0, 1], 3);
        // All nulls hash alike: one owner gets all of them.
        check_split(&[None, None, None], &[0, 1, 2, 3], 4);
    }

    #[test]
    fn marks_follow_each_part_to_the_rows_before_them() {
        let keys: Vec<Option<i64>> = (0..40).map(|k| Some(k % 5)).collect();
        let owner_of_shard = [0, 1, 2, 0, 1, 2, 0, 1];
        let partitioner =
            HashPartitioner::try_new(vec![0], owner_of_shard.to_vec(), 3).expect("valid");
        let input = batch(&keys);
        let mut marks = WatermarkMarks::new();
        for (row, w) in [(0, 5), (7, 10), (7, 11), (23, 20), (40, 30)] {
            marks.push(row, weir_api::Watermark(weir_api::EventTimeMs(w)));
        }
        let parts = partitioner
            .partition_marked(&input, &marks)
            .expect("partition");
        let plain = partitioner.partition(&input).expect("partition");
        for (subtask, ((part, part_marks), plain)) in parts.iter().zip(plain).enumerate() {
            assert_eq!(part, &plain, "the rows are what partition gives");
            let rows_of = |r: usize| {
                (0..r)
                    .filter(|&row| expected_owner(keys[row], &owner_of_shard) as usize == subtask)
                    .count()
            };
            let want: Vec<(usize, i64)> = [(0, 5), (7, 11), (23, 20), (40, 30)]
                .iter()
                .map(|&(r, w)| (rows_of(r), w))
                .fold(Vec::new(), |mut v: Vec<(usize, i64)>, (r, w)| {
                    match v.last_mut() {
                        Some(last) if last.0 == r => last.1 = w,
                        _ => v.push((r, w)),
                    }
                    v
                });
            let got: Vec<(usize, i64)> = part_marks.iter().map(|(r, w)| (r, w.0.0)).collect();
            assert_eq!(got, want, "subtask {subtask}");
        }
        let empty = partitioner
            .partition_marked(&batch(&[]), &marks)
            .expect("empty");
        assert!(
            empty
                .iter()
                .all(|(p, m)| p.is_none() && m.last() == marks.last())
        );
    }

    #[test]
    fn split_marks_follow_each_part_like_watermark_marks() {
        let keys: Vec<Option<i64>> = (0..40).map(|k| Some(k % 5)).collect();
        let owner_of_shard = [0, 1, 2, 0, 1, 2, 0, 1];
        let partitioner =
            HashPartitioner::try_new(vec![0], owner_of_shard.to_vec(), 3).expect("valid");
        let at = |w| weir_api::Watermark(weir_api::EventTimeMs(w));
        let mut marks = WatermarkMarks::new();
        marks.push(10, at(5));
        marks.push_split(3, at(7));
        marks.push_split(23, at(15));
        let parts = partitioner
            .partition_marked(&batch(&keys), &marks)
            .expect("partition");
        for (subtask, (_, part_marks)) in parts.iter().enumerate() {
            let rows_of = |r: usize| {
                (0..r)
                    .filter(|&row| expected_owner(keys[row], &owner_of_shard) as usize == subtask)
                    .count()
            };
            let splits: Vec<(usize, i64)> = part_marks.splits().map(|(r, w)| (r, w.0.0)).collect();
            assert_eq!(
                splits,
                [(rows_of(3), 7), (rows_of(23), 15)],
                "subtask {subtask}"
            );
            let got: Vec<(usize, i64)> = part_marks.iter().map(|(r, w)| (r, w.0.0)).collect();
            assert_eq!(got, [(rows_of(10), 5)], "subtask {subtask}");
        }
        let empty = partitioner
            .partition_marked(&batch(&[]), &marks)
            .expect("empty");
        assert!(empty.iter().all(|(_, m)| m.last_split() == Some(at(15))));
    }

    #[test]
    fn empty_batch_gives_no_output() {
        let partitioner = HashPartitioner::try_new(vec![0], vec![0, 1], 2).expect("valid");
        let parts = partitioner.partition(&batch(&[])).expect("partition");
        assert!(parts.iter().all(Option::is_none));
        assert_eq!(parts.len(), 2);
    }

    #[test]
    fn single_owner_passes_the_batch_through() {
        let partitioner = HashPartitioner::try_new(vec![0], vec![0; 16], 1).expect("valid");
        let input = batch(&[Some(1), Some(2), None]);
        let parts = partitioner.partition(&input).expect("partition");
        assert_eq!(parts, vec![Some(input)]);
    }

    #[test]
    fn rejects_inconsistent_plans_and_bad_keys() {
        assert!(HashPartitioner::try_new(vec![], vec![0], 1).is_err());
        assert!(HashPartitioner::try_new(vec![0], vec![], 1).is_err());
        assert!(HashPartitioner::try_new(vec![0], vec![0, 2], 2).is_err());
        assert!(HashPartitioner::try_new(vec![0], vec![0], 0).is_err());

        let missing = HashPartitioner::try_new(vec![5], vec![0, 1], 2).expect("valid");
        let err = missing
            .partition(&batch(&[Some(1)]))
            .expect_err("no column 5");
        assert!(err.to_string().contains("key column #5"), "{err}");
        assert!(missing.check_schema(&batch(&[]).schema()).is_err());

        let ok = HashPartitioner::try_new(vec![0, 2], vec![0, 1], 2).expect("valid");
        assert!(ok.check_schema(&batch(&[]).schema()).is_ok());
    }

    #[test]
    fn round_robin_rotates() {
        let mut rr = RoundRobin::new(3);
        let seq: Vec<usize> = (0..7).map(|_| rr.next_output()).collect();
        assert_eq!(seq, [0, 1, 2, 0, 1, 2, 0]);
        let mut rr = RoundRobin::starting_at(3, 5);
        assert_eq!(rr.next_output(), 2);
        assert_eq!(rr.next_output(), 0);
        let mut one = RoundRobin::new(1);
        assert_eq!((one.next_output(), one.next_output()), (0, 0));
    }

    proptest! {
        #[test]
        fn every_row_lands_once_at_its_owner(
            keys in proptest::collection::vec(proptest::option::weighted(0.9, -50_i64..50), 0..300),
            parallelism in 1_usize..=8,
            shard_count in 1_usize..=64,
            seed in any::<u32>(),
        ) {
            // Spread shards over subtasks in an irregular (but valid) way.
            let owner_of_shard: Vec<u32> = (0..shard_count)
                .map(|s| ((s as u32).wrapping_mul(2_654_435_761).wrapping_add(seed)) % parallelism as u32)
                .collect();
            check_split(&keys, &owner_of_shard, parallelism);
        }
    }
}
