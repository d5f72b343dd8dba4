//! Range lookups over a task's state: the engine's range merged with the journal's range.

use crate::backend::Inner;
use crate::engine::EntryIter;
use crate::error::StateResult;
use crate::journal::Staged;
use crate::layout;

/// What [`lookup_range`] found: live entries and the keys of expired ones.
#[derive(Debug, Default)]
pub(crate) struct RangeLookup {
    /// `(entry key, stored value)` of live entries, in key order.
    pub(crate) live: Vec<(Vec<u8>, Vec<u8>)>,
    /// Keys of entries found dead; the caller stages their removal.
    pub(crate) expired: Vec<Vec<u8>>,
}

/// One key of a merge and its stored value (`None`: removed by a staged outcome).
pub(crate) type MergedEntry = (Vec<u8>, Option<Vec<u8>>);

/// Two sorted streams of entries merged by key: staged outcomes over committed values. Yields
/// every key once, with its stored value, or `None` where the staged outcome removed it.
pub(crate) struct Merged<'a, S: Iterator<Item = (&'a Vec<u8>, &'a Staged)>> {
    committed: EntryIter<'a>,
    head: Option<(Vec<u8>, Vec<u8>)>,
    staged: std::iter::Peekable<S>,
    started: bool,
}

impl<'a, S: Iterator<Item = (&'a Vec<u8>, &'a Staged)>> Merged<'a, S> {
    pub(crate) fn new(committed: EntryIter<'a>, staged: S) -> Self {
        Self {
            committed,
            head: None,
            staged: staged.peekable(),
            started: false,
        }
    }

    fn advance(&mut self) -> StateResult<()> {
        self.head = self.committed.next().transpose()?;
        Ok(())
    }

    fn step(&mut self) -> StateResult<Option<MergedEntry>> {
        if !self.started {
            self.started = true;
            self.advance()?;
        }
        // Take the smaller key of the two heads; on a tie the staged outcome wins.
        let take_committed = match (&self.head, self.staged.peek()) {
            (None, None) => return Ok(None),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some((committed_key, _)), Some((staged_key, _))) => {
                committed_key.as_slice() < staged_key.as_slice()
            }
        };
        if take_committed {
            let Some((key, stored)) = self.head.take() else {
                return Ok(None);
            };
            self.advance()?;
            return Ok(Some((key, Some(stored))));
        }
        let Some((key, outcome)) = self.staged.next() else {
            return Ok(None);
        };
        if self
            .head
            .as_ref()
            .is_some_and(|(committed_key, _)| committed_key == key)
        {
            self.advance()?;
        }
        let stored = match outcome {
            Staged::Put(stored) => Some(stored.clone()),
            Staged::Delete | Staged::Absent => None,
        };
        Ok(Some((key.clone(), stored)))
    }
}

impl<'a, S: Iterator<Item = (&'a Vec<u8>, &'a Staged)>> Iterator for Merged<'a, S> {
    type Item = StateResult<MergedEntry>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step().transpose()
    }
}

/// The entries of the state under `state_prefix` with keys in `[start, end)` (`end: None`:
/// to the end of the state), the journal's outcomes over the engine's, in key order, stopping
/// after `limit` live entries. Entries dead at `now_ms` are not live; their keys are reported
/// in [`RangeLookup::expired`].
///
/// Both sides are read as ranges and merged as two sorted streams, so the cost is the entries in
/// the range up to the limit, not the size of the state.
pub(crate) fn lookup_range(
    inner: &mut Inner,
    state_prefix: &[u8],
    start: &[u8],
    end: Option<&[u8]>,
    now_ms: u64,
    limit: Option<usize>,
) -> StateResult<RangeLookup> {
    let mut found = RangeLookup::default();
    if end.is_some_and(|end| end <= start) || limit == Some(0) {
        return Ok(found);
    }
    let committed = inner.engine.range(state_prefix, start, end)?;
    for item in Merged::new(committed, inner.journal.range(start, end)) {
        let (key, stored) = item?;
        let Some(stored) = stored else {
            continue;
        };
        if layout::is_expired(layout::decode_stored(&stored)?.0, now_ms) {
            found.expired.push(key);
            continue;
        }
        found.live.push((key, stored));
        if limit.is_some_and(|limit| found.live.len() >= limit) {
            break;
        }
    }
    Ok(found)
}
