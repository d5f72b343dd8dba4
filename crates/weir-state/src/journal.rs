//! The journal: mutations not yet written to the engine (redb or Redis), both those of the batch in progress and
//! those of acknowledged batches waiting for the next write.
//!
//! The journal is an ordered map from entry key to the staged outcome. Reads consult it before
//! redb (read-your-writes). [`crate::StateBackend::commit`] acknowledges the batch in
//! progress: its outcomes become committed state, but they reach redb only when the journal
//! outgrows its budget, at a sync or when a read view is taken, in one write transaction. Rows
//! that an operator stores and removes between two writes (most rows of an event-time operator
//! whose watermark follows closely) so never cost a redb write. A key staged twice keeps only
//! the last outcome, so a write applies each key once.
//!
//! [`crate::StateBackend::rollback`] drops the outcomes of the batch in progress only: an
//! undo log keeps, for every key the batch touched first, the outcome it had before (or none).

use std::collections::BTreeMap;
use std::collections::btree_map::Entry as MapEntry;
use std::ops::Bound;

/// What a batch did to one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Staged {
    /// The entry's new stored value (expiry header and payload).
    Put(Vec<u8>),
    /// The entry was removed, and redb may hold a value to remove.
    Delete,
    /// The entry was removed and redb holds no value for it: a write skips it, so an entry
    /// stored and removed between two writes never reaches redb.
    Absent,
}

impl Staged {
    /// Bytes the outcome holds.
    fn len(&self) -> usize {
        match self {
            Staged::Put(v) => v.len(),
            Staged::Delete | Staged::Absent => 0,
        }
    }
}

/// Outcomes of the batch in progress, taken out of the journal around a write.
pub(crate) type Outcomes = Vec<(Vec<u8>, Staged)>;

/// One staged outcome and the batch that staged it.
#[derive(Debug)]
struct Slot {
    outcome: Staged,
    batch: u64,
}

/// Bytes counted per staged key besides its key and value: the map node's share and the two
/// allocations' headers.
const ENTRY_OVERHEAD: usize = 64;

/// Staged mutations in entry-key order.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    staged: BTreeMap<Vec<u8>, Slot>,
    /// The batch in progress; outcomes of earlier batches are acknowledged.
    batch: u64,
    /// For each key the batch in progress touched first: its outcome before (`None`: no
    /// outcome staged, redb's value stands).
    undo: Vec<(Vec<u8>, Option<Staged>)>,
    /// Keys the batch in progress staged [`Staged::Absent`] for, to drop at its
    /// acknowledgement.
    absent: Vec<Vec<u8>>,
    /// Approximate bytes held: keys, values and [`ENTRY_OVERHEAD`] per key.
    bytes: usize,
}

impl Journal {
    /// Stages an outcome of the batch in progress, replacing any earlier one for the key.
    pub(crate) fn stage(&mut self, key: Vec<u8>, outcome: Staged) {
        let added = outcome.len();
        if outcome == Staged::Absent {
            self.absent.push(key.clone());
        }
        match self.staged.entry(key) {
            MapEntry::Vacant(v) => {
                self.bytes += v.key().len() + added + ENTRY_OVERHEAD;
                self.undo.push((v.key().clone(), None));
                v.insert(Slot {
                    outcome,
                    batch: self.batch,
                });
            }
            MapEntry::Occupied(mut o) => {
                let batch = self.batch;
                let old = std::mem::replace(o.get_mut(), Slot { outcome, batch });
                self.bytes = self.bytes.saturating_sub(old.outcome.len()) + added;
                if old.batch != batch {
                    self.undo.push((o.key().clone(), Some(old.outcome)));
                }
            }
        }
    }

    /// The staged outcome of a key, if a batch since the last write touched it.
    pub(crate) fn get(&self, key: &[u8]) -> Option<&Staged> {
        self.staged.get(key).map(|s| &s.outcome)
    }

    /// Staged outcomes of every key starting with `prefix`, in key order.
    pub(crate) fn with_prefix<'a>(
        &'a self,
        prefix: &'a [u8],
    ) -> impl Iterator<Item = (&'a Vec<u8>, &'a Staged)> + 'a {
        self.staged
            .range::<[u8], _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(move |(k, _)| k.starts_with(prefix))
            .map(|(k, s)| (k, &s.outcome))
    }

    /// Staged outcomes of every key in `[start, end)` (`end: None` unbounded), in key order.
    /// The caller ensures `start < end`.
    pub(crate) fn range<'a>(
        &'a self,
        start: &'a [u8],
        end: Option<&'a [u8]>,
    ) -> impl Iterator<Item = (&'a Vec<u8>, &'a Staged)> + 'a {
        let end = end.map_or(Bound::Unbounded, Bound::Excluded);
        self.staged
            .range::<[u8], _>((Bound::Included(start), end))
            .map(|(k, s)| (k, &s.outcome))
    }

    /// Number of keys the batch in progress touched.
    pub(crate) fn pending_len(&self) -> usize {
        self.undo.len()
    }

    /// Approximate bytes the journal holds.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether acknowledged outcomes wait to be written to redb.
    pub(crate) fn has_acknowledged(&self) -> bool {
        self.staged.len() > self.undo.len() || self.undo.iter().any(|(_, prev)| prev.is_some())
    }

    /// The acknowledged outcomes as of the last acknowledgement, copied: what a read view
    /// taken while the engine's committed data must stay unchanged lays over that data.
    pub(crate) fn acknowledged(&self) -> BTreeMap<Vec<u8>, Staged> {
        let before: std::collections::HashMap<&[u8], &Option<Staged>> = self
            .undo
            .iter()
            .map(|(key, prev)| (key.as_slice(), prev))
            .collect();
        let mut out = BTreeMap::new();
        for (key, slot) in &self.staged {
            match before.get(key.as_slice()) {
                None => {
                    out.insert(key.clone(), slot.outcome.clone());
                }
                Some(Some(prev)) => {
                    out.insert(key.clone(), prev.clone());
                }
                Some(None) => {}
            }
        }
        out
    }

    /// Acknowledges the batch in progress: its outcomes can no longer be rolled back. Its
    /// [`Staged::Absent`] outcomes are dropped: with redb holding no value, no outcome says
    /// the same, and scans no longer step over them.
    pub(crate) fn acknowledge(&mut self) {
        self.undo.clear();
        for key in std::mem::take(&mut self.absent) {
            if let MapEntry::Occupied(o) = self.staged.entry(key)
                && o.get().outcome == Staged::Absent
            {
                let (key, _) = o.remove_entry();
                self.bytes = self.bytes.saturating_sub(key.len() + ENTRY_OVERHEAD);
            }
        }
        self.batch = self.batch.wrapping_add(1);
    }

    /// Drops the outcomes of the batch in progress, restoring those they replaced.
    pub(crate) fn rollback(&mut self) {
        self.take_current();
    }

    /// Takes the acknowledged outcomes out, to be written to redb: every key's outcome as of
    /// the last acknowledged batch. The batch in progress's outcomes are returned apart;
    /// [`restage`](Self::restage) puts them back after the write, so that a rollback still
    /// drops them.
    pub(crate) fn take_acknowledged(&mut self) -> (BTreeMap<Vec<u8>, Staged>, Outcomes) {
        let current = self.take_current();
        self.bytes = 0;
        let acknowledged = std::mem::take(&mut self.staged)
            .into_iter()
            .map(|(k, s)| (k, s.outcome))
            .collect();
        (acknowledged, current)
    }

    /// Stages again the batch in progress's outcomes that [`take_acknowledged`] returned.
    /// An [`Staged::Absent`] becomes a [`Staged::Delete`]: the write may have given redb a
    /// value for the key.
    ///
    /// [`take_acknowledged`]: Self::take_acknowledged
    pub(crate) fn restage(&mut self, current: Outcomes) {
        for (key, outcome) in current {
            let outcome = match outcome {
                Staged::Absent => Staged::Delete,
                other => other,
            };
            self.stage(key, outcome);
        }
    }

    /// Puts acknowledged outcomes back after a failed write, under the batch in progress's
    /// outcomes staged since (which win, and whose undo then restores these).
    pub(crate) fn restore(&mut self, acknowledged: BTreeMap<Vec<u8>, Staged>) {
        let current = self.take_current();
        let before = self.batch.wrapping_sub(1);
        for (key, outcome) in acknowledged {
            self.bytes += key.len() + outcome.len() + ENTRY_OVERHEAD;
            self.staged.insert(
                key,
                Slot {
                    outcome,
                    batch: before,
                },
            );
        }
        self.restage(current);
    }

    /// Takes the batch in progress's outcomes out (with their undo), leaving only acknowledged
    /// ones.
    fn take_current(&mut self) -> Outcomes {
        self.absent.clear();
        let mut current = Vec::with_capacity(self.undo.len());
        for (key, prev) in std::mem::take(&mut self.undo) {
            if let Some(slot) = self.staged.remove(&key) {
                self.bytes = self
                    .bytes
                    .saturating_sub(key.len() + slot.outcome.len() + ENTRY_OVERHEAD);
                current.push((key.clone(), slot.outcome));
            }
            if let Some(prev) = prev {
                self.bytes += key.len() + prev.len() + ENTRY_OVERHEAD;
                self.staged.insert(
                    key,
                    Slot {
                        outcome: prev,
                        batch: self.batch.wrapping_sub(1),
                    },
                );
            }
        }
        current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(v: &[u8]) -> Staged {
        Staged::Put(v.to_vec())
    }

    fn contents(j: &Journal) -> Vec<(Vec<u8>, Staged)> {
        j.range(b"", None)
            .map(|(k, s)| (k.clone(), s.clone()))
            .collect()
    }

    #[test]
    fn rollback_drops_only_the_batch_in_progress() {
        let mut j = Journal::default();
        j.stage(b"a".to_vec(), put(b"1"));
        j.stage(b"b".to_vec(), put(b"2"));
        j.acknowledge();
        assert!(j.has_acknowledged());
        j.stage(b"a".to_vec(), Staged::Delete);
        j.stage(b"a".to_vec(), put(b"3"));
        j.stage(b"c".to_vec(), put(b"4"));
        assert_eq!(j.pending_len(), 2);
        j.rollback();
        assert_eq!(
            contents(&j),
            vec![(b"a".to_vec(), put(b"1")), (b"b".to_vec(), put(b"2"))]
        );
        assert_eq!(j.pending_len(), 0);
        assert_eq!(j.bytes(), 2 * (2 + ENTRY_OVERHEAD));
    }

    #[test]
    fn a_write_takes_acknowledged_outcomes_and_keeps_the_batch_in_progress() {
        let mut j = Journal::default();
        j.stage(b"a".to_vec(), put(b"1"));
        j.stage(b"b".to_vec(), put(b"2"));
        j.acknowledge();
        j.stage(b"a".to_vec(), put(b"9"));
        j.stage(b"c".to_vec(), Staged::Delete);
        let (acked, current) = j.take_acknowledged();
        assert_eq!(
            acked.into_iter().collect::<Vec<_>>(),
            vec![(b"a".to_vec(), put(b"1")), (b"b".to_vec(), put(b"2"))]
        );
        j.restage(current);
        assert!(!j.has_acknowledged());
        assert_eq!(
            contents(&j),
            vec![(b"a".to_vec(), put(b"9")), (b"c".to_vec(), Staged::Delete)]
        );
        // After the write, a rollback leaves redb's (the acknowledged) values.
        j.rollback();
        assert!(contents(&j).is_empty());
        assert_eq!(j.bytes(), 0);
    }

    #[test]
    fn an_absent_outcome_is_undone_by_rollback_and_becomes_a_delete_across_a_write() {
        let mut j = Journal::default();
        j.stage(b"a".to_vec(), put(b"1"));
        j.acknowledge();
        j.stage(b"a".to_vec(), Staged::Absent);
        j.rollback();
        assert_eq!(contents(&j), vec![(b"a".to_vec(), put(b"1"))]);
        j.stage(b"a".to_vec(), Staged::Absent);
        let (acked, current) = j.take_acknowledged();
        assert_eq!(
            acked.into_iter().collect::<Vec<_>>(),
            vec![(b"a".to_vec(), put(b"1"))]
        );
        j.restage(current);
        // redb now holds "1": the removal must reach it.
        assert_eq!(contents(&j), vec![(b"a".to_vec(), Staged::Delete)]);
        j.acknowledge();
        assert!(j.has_acknowledged());
        // An acknowledged absence is no outcome at all.
        j.stage(b"b".to_vec(), put(b"2"));
        j.acknowledge();
        j.stage(b"b".to_vec(), Staged::Absent);
        j.acknowledge();
        assert_eq!(contents(&j), vec![(b"a".to_vec(), Staged::Delete)]);
        assert_eq!(j.bytes(), 1 + ENTRY_OVERHEAD);
    }

    #[test]
    fn a_failed_write_restores_the_acknowledged_outcomes() {
        let mut j = Journal::default();
        j.stage(b"a".to_vec(), put(b"1"));
        j.acknowledge();
        j.stage(b"a".to_vec(), put(b"2"));
        let (acked, current) = j.take_acknowledged();
        j.restage(current);
        j.restore(acked);
        assert_eq!(contents(&j), vec![(b"a".to_vec(), put(b"2"))]);
        j.rollback();
        assert_eq!(contents(&j), vec![(b"a".to_vec(), put(b"1"))]);
        j.acknowledge();
        assert!(j.has_acknowledged());
    }
}
