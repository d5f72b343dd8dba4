//! Range lookups over a task's state: the engine's range merged with the journal's range.

use crate::backend::Inner;
use crate::error::StateResult;
use crate::layout;
use crate::merge::Merged;

/// What [`lookup_range`] found: live entries and the keys of expired ones.
#[derive(Debug, Default)]
pub(crate) struct RangeLookup {
    /// `(entry key, stored value)` of live entries, in key order.
    pub(crate) live: Vec<(Vec<u8>, Vec<u8>)>,
    /// Keys of entries found dead; the caller stages their removal.
    pub(crate) expired: Vec<Vec<u8>>,
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
