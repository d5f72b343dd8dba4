//! Range lookups over a task's state: a redb range scan merged with the journal's range.

use crate::backend::Inner;
use crate::error::{StateError, StateResult};
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

/// The entries with keys in `[start, end)` (`end: None` unbounded), the journal's outcomes over
/// redb's, in key order, stopping after `limit` live entries. Entries dead at `now_ms` are not
/// live; their keys are reported in [`RangeLookup::expired`].
///
/// Both sides are read as ranges and merged as two sorted streams, so the cost is the entries in
/// the range up to the limit, not the size of the state.
pub(crate) fn lookup_range(
    inner: &mut Inner,
    start: &[u8],
    end: Option<&[u8]>,
    now_ms: u64,
    limit: Option<usize>,
) -> StateResult<RangeLookup> {
    let mut found = RangeLookup::default();
    if end.is_some_and(|end| end <= start) || limit == Some(0) {
        return Ok(found);
    }
    let mut committed = inner.committed_range(start, end)?;
    let mut next_committed = || -> StateResult<Option<(Vec<u8>, Vec<u8>)>> {
        match committed.next() {
            Some(Ok((k, v))) => Ok(Some((k.value().to_vec(), v.value().to_vec()))),
            Some(Err(e)) => Err(StateError::storage("scanning state", e)),
            None => Ok(None),
        }
    };
    let mut staged = inner.journal.range(start, end).peekable();
    let mut head = next_committed()?;
    loop {
        // Take the smaller key of the two heads; on a tie the journal's outcome wins.
        let take_committed = match (&head, staged.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some((committed_key, _)), Some((staged_key, _))) => {
                committed_key.as_slice() < staged_key.as_slice()
            }
        };
        let (key, stored) = if take_committed {
            let Some((key, stored)) = head.take() else {
                break;
            };
            head = next_committed()?;
            (key, Some(stored))
        } else {
            let Some((key, outcome)) = staged.next() else {
                break;
            };
            if head
                .as_ref()
                .is_some_and(|(committed_key, _)| committed_key == key)
            {
                head = next_committed()?;
            }
            let stored = match outcome {
                Staged::Put(stored) => Some(stored.clone()),
                Staged::Delete | Staged::Absent => None,
            };
            (key.clone(), stored)
        };
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
