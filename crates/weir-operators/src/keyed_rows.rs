//! The keys of a batch's rows as keyed state holds them, for the operators that keep state per
//! key of their rows: each row's encoded key and state shard, and the rows of each key.

use arrow::array::ArrayRef;
use std::collections::HashMap;
use weir_api::{Error, Result};
use weir_plan::key_hash;
use weir_state::row_codec::encode_rows;

/// Per row of a batch: its encoded key (Weir's row codec) and the state shard it hashes to.
pub(crate) struct KeyedRows {
    pub(crate) keys: Vec<Vec<u8>>,
    pub(crate) shards: Vec<u32>,
}

impl KeyedRows {
    /// The keys of `columns` (the key columns of one batch) over `shard_count` shards; `what`
    /// names the operator's keys in errors.
    ///
    /// # Errors
    /// [`Error::Internal`] when a key column cannot be hashed or encoded.
    pub(crate) fn of(columns: &[ArrayRef], shard_count: u32, what: &str) -> Result<Self> {
        let shards = key_hash::shard_ids(columns, shard_count)
            .map_err(|e| Error::Internal(format!("hashing {what} keys: {e}")))?;
        let keys = encode_rows(columns)
            .map_err(|e| Error::Internal(format!("encoding {what} keys: {e}")))?;
        Ok(Self { keys, shards })
    }

    /// `rows` grouped by key, in the order the keys first appear: each key's first row and all
    /// its rows, in order.
    pub(crate) fn groups(&self, rows: impl Iterator<Item = usize>) -> Vec<(usize, Vec<usize>)> {
        let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
        let mut index: HashMap<&[u8], usize> = HashMap::new();
        for r in rows {
            let g = *index.entry(self.keys[r].as_slice()).or_insert_with(|| {
                groups.push((r, Vec::new()));
                groups.len() - 1
            });
            groups[g].1.push(r);
        }
        groups
    }
}
