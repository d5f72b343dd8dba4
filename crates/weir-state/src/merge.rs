//! Two sorted streams of state entries merged by key: the journal's staged outcomes over an
//! engine's committed values (range lookups), or a view's overlay over its engine.

use crate::engine::EntryIter;
use crate::error::StateResult;
use crate::journal::Staged;

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
