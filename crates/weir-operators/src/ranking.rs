//! What the Top-N operators share: the `ORDER BY` options, the sort keys rows are ranked by,
//! the candidates of a batch per partition, and a partition's ranked rows in keyed state.
//!
//! A row's sort key is Arrow's row format of its `ORDER BY` columns (bytes compare in the
//! ranking's order); ties are broken by the row itself in Weir's row codec, so the ranking
//! never depends on arrival order.

use arrow::compute::SortOptions;
use arrow::datatypes::Schema;
use arrow::row::{RowConverter, Rows, SortField};
use serde::Deserialize;
use std::collections::HashMap;
use weir_api::{Error, Result};

/// One `ORDER BY` item.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SortColumn {
    /// The column.
    pub column: String,
    /// Largest first.
    #[serde(default)]
    pub descending: bool,
    /// Whether nulls come first; by default they count as larger than every value (last when
    /// ascending, first when descending), as in Flink and DataFusion.
    #[serde(default)]
    pub nulls_first: Option<bool>,
}

/// The largest N: one state entry holds a partition's N rows.
pub const MAX_LIMIT: u32 = 10_000;

/// One ranked row: its sort key and the row itself (weir's row codec), which breaks ties.
pub(crate) type Entry = (Vec<u8>, Vec<u8>);

/// The `order_by` options resolved against `input`: the sorted columns and their sort fields.
///
/// # Errors
/// [`Error::Config`] at `path` for an empty list, an unknown column or a type that cannot be
/// ranked.
pub(crate) fn sort_columns(
    input: &Schema,
    order_by: &[SortColumn],
    path: &str,
) -> Result<(Vec<usize>, Vec<SortField>)> {
    if order_by.is_empty() {
        return Err(Error::config(
            format!("{path}.order_by"),
            "name at least one column to rank the rows by",
        ));
    }
    let mut order = Vec::with_capacity(order_by.len());
    let mut fields = Vec::with_capacity(order_by.len());
    for (i, sort) in order_by.iter().enumerate() {
        let index = crate::expr::column_index(
            input,
            &sort.column,
            &format!("{path}.order_by[{i}].column"),
        )?;
        order.push(index);
        fields.push(SortField::new_with_options(
            input.field(index).data_type().clone(),
            SortOptions {
                descending: sort.descending,
                nulls_first: sort.nulls_first.unwrap_or(sort.descending),
            },
        ));
    }
    RowConverter::new(fields.clone()).map_err(|e| {
        Error::config(
            format!("{path}.order_by"),
            format!("cannot rank by these: {e}"),
        )
    })?;
    Ok((order, fields))
}

/// `limit` checked to be 1 to [`MAX_LIMIT`].
///
/// # Errors
/// [`Error::Config`] at `path.limit`.
pub(crate) fn check_limit(limit: u32, path: &str, per: &str) -> Result<usize> {
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(Error::config(
            format!("{path}.limit"),
            format!("keep 1 to {MAX_LIMIT} rows per {per}, not {limit}"),
        ));
    }
    Ok(limit as usize)
}

/// The rows of a batch that can still be among their partition's first `limit`, grouped by
/// partition (`group` of each row) in the order partitions first appear, each with the row
/// that named it: each group's own first `limit` and the rows that tie with its last.
pub(crate) fn candidates<K: std::hash::Hash + Eq + Copy>(
    rows: impl Iterator<Item = u32>,
    group: impl Fn(usize) -> K,
    sort: &Rows,
    limit: usize,
) -> Vec<(usize, Vec<u32>)> {
    let mut groups: HashMap<K, Vec<u32>> = HashMap::new();
    let mut first: Vec<(K, usize)> = Vec::new();
    for row in rows {
        let r = row as usize;
        let entry = groups.entry(group(r)).or_default();
        if entry.is_empty() {
            first.push((group(r), r));
        }
        entry.push(row);
    }
    let mut out = Vec::with_capacity(first.len());
    for (key, r) in first {
        let Some(mut rows) = groups.remove(&key) else {
            continue;
        };
        rows.sort_by(|&a, &b| sort.row(a as usize).cmp(&sort.row(b as usize)));
        if rows.len() > limit {
            let nth = sort.row(rows[limit - 1] as usize);
            let ties = rows[limit..]
                .iter()
                .take_while(|&&x| sort.row(x as usize) == nth)
                .count();
            rows.truncate(limit + ties);
        }
        out.push((r, rows));
    }
    out
}

/// A partition's ranked rows as one state payload: per entry, the sort key's and the row's
/// lengths (u32, little-endian) each before its bytes.
pub(crate) fn encode_entries(entries: &[Entry]) -> Vec<u8> {
    let size: usize = entries.iter().map(|(s, r)| 8 + s.len() + r.len()).sum();
    let mut out = Vec::with_capacity(size);
    for (sort, row) in entries {
        for part in [sort, row] {
            out.extend_from_slice(&(part.len() as u32).to_le_bytes());
            out.extend_from_slice(part);
        }
    }
    out
}

/// Reads [`encode_entries`]' payload back.
///
/// # Errors
/// [`Error::Internal`] for a cut or damaged payload.
pub(crate) fn decode_entries(mut payload: &[u8]) -> Result<Vec<Entry>> {
    let part = |payload: &mut &[u8]| -> Result<Vec<u8>> {
        let corrupt = || Error::Internal("top-N state: a corrupt top-N entry".into());
        let (len, rest) = payload.split_first_chunk::<4>().ok_or_else(corrupt)?;
        let len = u32::from_le_bytes(*len) as usize;
        if rest.len() < len {
            return Err(corrupt());
        }
        let (bytes, rest) = rest.split_at(len);
        *payload = rest;
        Ok(bytes.to_vec())
    };
    let mut entries = Vec::new();
    while !payload.is_empty() {
        let sort = part(&mut payload)?;
        let row = part(&mut payload)?;
        entries.push((sort, row));
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_a_cut_payload_is_an_error() {
        let entries: Vec<Entry> = vec![(vec![1, 2], vec![9]), (vec![], vec![7, 7, 7])];
        let payload = encode_entries(&entries);
        assert_eq!(decode_entries(&payload).unwrap(), entries);
        assert!(decode_entries(&payload[..payload.len() - 1]).is_err());
        assert!(decode_entries(&[]).unwrap().is_empty());
    }
}
