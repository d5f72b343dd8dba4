//! The execution-local journal: mutations staged by one input batch, not yet in redb.
//!
//! The journal is an ordered map from entry key to the staged outcome. Reads consult it before
//! redb (read-your-writes); [`crate::RedbStateBackend::commit`] writes it to redb in one write
//! transaction; [`crate::RedbStateBackend::rollback`] drops it. A key staged twice keeps only the
//! last outcome, so a commit applies each key once whatever the batch did to it.

use std::collections::BTreeMap;
use std::ops::Bound;

/// What a batch did to one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Staged {
    /// The entry's new stored value (expiry header and payload).
    Put(Vec<u8>),
    /// The entry was removed.
    Delete,
}

/// Staged mutations in entry-key order.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    staged: BTreeMap<Vec<u8>, Staged>,
}

impl Journal {
    /// Stages an outcome, replacing any earlier one for the same key.
    pub(crate) fn stage(&mut self, key: Vec<u8>, outcome: Staged) {
        self.staged.insert(key, outcome);
    }

    /// The staged outcome of a key, if the batch touched it.
    pub(crate) fn get(&self, key: &[u8]) -> Option<&Staged> {
        self.staged.get(key)
    }

    /// Staged outcomes of every key starting with `prefix`, in key order.
    pub(crate) fn with_prefix<'a>(
        &'a self,
        prefix: &'a [u8],
    ) -> impl Iterator<Item = (&'a Vec<u8>, &'a Staged)> + 'a {
        self.staged
            .range::<[u8], _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(move |(k, _)| k.starts_with(prefix))
    }

    /// Staged outcomes of every key in `[start, end)` (`end: None` unbounded), in key order.
    /// The caller ensures `start < end`.
    pub(crate) fn range<'a>(
        &'a self,
        start: &'a [u8],
        end: Option<&'a [u8]>,
    ) -> impl Iterator<Item = (&'a Vec<u8>, &'a Staged)> + 'a {
        let end = end.map_or(Bound::Unbounded, Bound::Excluded);
        self.staged.range::<[u8], _>((Bound::Included(start), end))
    }

    /// Number of staged keys.
    pub(crate) fn len(&self) -> usize {
        self.staged.len()
    }

    /// Takes every staged outcome, leaving the journal empty.
    pub(crate) fn take(&mut self) -> BTreeMap<Vec<u8>, Staged> {
        std::mem::take(&mut self.staged)
    }

    /// Puts outcomes back after a failed commit, so the caller can still roll back or retry.
    pub(crate) fn restore(&mut self, staged: BTreeMap<Vec<u8>, Staged>) {
        self.staged = staged;
    }

    /// Drops every staged outcome.
    pub(crate) fn clear(&mut self) {
        self.staged.clear();
    }
}
