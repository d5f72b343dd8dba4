//! Rows that wait in memory for the watermark, by time, for the operators that hold arriving
//! rows between checkpoint barriers instead of writing each into keyed state (OVER
//! aggregations, temporal joins): what arrived, and what a watermark makes due, by state shard.

use std::collections::BTreeMap;

/// Bytes an entry costs besides its key and row (map slots, vector headers).
const ENTRY_OVERHEAD: usize = 64;

/// A row the watermark passed, from memory or from state: its time, partition key, encoded
/// row, and how many identical rows arrived.
pub(crate) struct DueRow {
    pub(crate) time: i64,
    pub(crate) key: Vec<u8>,
    pub(crate) row: Vec<u8>,
    pub(crate) count: u32,
}

/// Sorts one shard's due rows into the order they are aggregated in: time, then partition key,
/// then the encoded row (so rows of one time are taken in an order that does not depend on
/// their arrival, nor on whether they waited in memory or in state).
pub(crate) fn sort_due(rows: &mut [DueRow]) {
    rows.sort_unstable_by(|a, b| (a.time, &a.key, &a.row).cmp(&(b.time, &b.key, &b.row)));
}

/// One row waiting in memory.
pub(crate) struct Arrived {
    pub(crate) shard: u32,
    pub(crate) key: Vec<u8>,
    pub(crate) row: Vec<u8>,
}

/// The rows that arrived since the last flush and wait for the watermark, by time.
#[derive(Default)]
pub(crate) struct PendingRows {
    by_time: BTreeMap<i64, Vec<Arrived>>,
    bytes: usize,
}

impl PendingRows {
    /// An estimate of the memory the rows take, in bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Keeps a row of time `time`.
    pub(crate) fn push(&mut self, time: i64, row: Arrived) {
        self.bytes += row.key.len() + row.row.len() + ENTRY_OVERHEAD;
        self.by_time.entry(time).or_default().push(row);
    }

    /// Takes the rows at or behind `watermark`, by shard.
    pub(crate) fn take_through(&mut self, watermark: i64) -> BTreeMap<u32, Vec<DueRow>> {
        let kept = match watermark.checked_add(1) {
            Some(after) => self.by_time.split_off(&after),
            None => BTreeMap::new(),
        };
        let due = std::mem::replace(&mut self.by_time, kept);
        let mut by_shard: BTreeMap<u32, Vec<DueRow>> = BTreeMap::new();
        for (time, rows) in due {
            for w in rows {
                self.bytes = self
                    .bytes
                    .saturating_sub(w.key.len() + w.row.len() + ENTRY_OVERHEAD);
                by_shard.entry(w.shard).or_default().push(DueRow {
                    time,
                    key: w.key,
                    row: w.row,
                    count: 1,
                });
            }
        }
        if self.by_time.is_empty() {
            self.bytes = 0;
        }
        by_shard
    }

    /// Takes every row, with its time.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = (i64, Arrived)> {
        self.bytes = 0;
        std::mem::take(&mut self.by_time)
            .into_iter()
            .flat_map(|(time, rows)| rows.into_iter().map(move |w| (time, w)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrived(shard: u32, key: &[u8], row: &[u8]) -> Arrived {
        Arrived {
            shard,
            key: key.to_vec(),
            row: row.to_vec(),
        }
    }

    #[test]
    fn rows_are_taken_through_the_watermark_by_shard_and_the_rest_stays() {
        let mut p = PendingRows::default();
        p.push(30, arrived(1, b"a", b"r3"));
        p.push(10, arrived(1, b"a", b"r1"));
        p.push(20, arrived(2, b"b", b"r2"));
        p.push(10, arrived(2, b"b", b"r0"));
        assert!(p.bytes() > 0);
        let due = p.take_through(20);
        let times = |rows: &[DueRow]| rows.iter().map(|r| r.time).collect::<Vec<_>>();
        assert_eq!(due.keys().copied().collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(times(&due[&1]), vec![10]);
        assert_eq!(times(&due[&2]), vec![10, 20]);
        assert!(due.values().flatten().all(|r| r.count == 1));
        let rest: Vec<(i64, Vec<u8>)> = p.drain().map(|(t, a)| (t, a.row)).collect();
        assert_eq!(rest, vec![(30, b"r3".to_vec())]);
        assert_eq!(p.bytes(), 0);
        p.push(i64::MAX, arrived(0, b"", b"x"));
        assert_eq!(
            p.take_through(i64::MAX).len(),
            1,
            "the final watermark takes all"
        );
    }

    #[test]
    fn due_rows_sort_by_time_key_and_row_whatever_their_arrival() {
        let row = |time: i64, key: &[u8], row: &[u8]| DueRow {
            time,
            key: key.to_vec(),
            row: row.to_vec(),
            count: 1,
        };
        let mut rows = vec![
            row(5, b"b", b"1"),
            row(5, b"a", b"2"),
            row(4, b"z", b"9"),
            row(5, b"a", b"1"),
        ];
        sort_due(&mut rows);
        let order: Vec<(i64, &[u8], &[u8])> = rows
            .iter()
            .map(|r| (r.time, r.key.as_slice(), r.row.as_slice()))
            .collect();
        assert_eq!(
            order,
            vec![
                (4, &b"z"[..], &b"9"[..]),
                (5, b"a", b"1"),
                (5, b"a", b"2"),
                (5, b"b", b"1")
            ]
        );
    }
}
