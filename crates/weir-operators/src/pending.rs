//! Which state shards hold rows waiting for the watermark, and from which time on, so an
//! operator that emits rows as the watermark passes them scans only the shards with something
//! due instead of every shard it owns on every advance.

use std::collections::{BTreeMap, BTreeSet};
use weir_api::state::NamespaceRange;
use weir_api::{KeyedStateStore, Result, StateShardId};
use weir_state::timers::{decode_timestamp, encode_timestamp};

/// Per shard, the earliest time of its waiting rows (namespaces are [`encode_timestamp`]s).
#[derive(Debug, Default)]
pub(crate) struct PendingShards {
    earliest: BTreeMap<u32, i64>,
}

impl PendingShards {
    /// Shards found holding waiting rows on a restore, earliest time not known yet (they are
    /// scanned at the next watermark).
    pub(crate) fn restored(shards: BTreeSet<u32>) -> Self {
        Self {
            earliest: shards.into_iter().map(|s| (s, i64::MIN)).collect(),
        }
    }

    /// A row of time `time` now waits in `shard`.
    pub(crate) fn note(&mut self, shard: u32, time: i64) {
        let e = self.earliest.entry(shard).or_insert(time);
        *e = (*e).min(time);
    }

    /// The shards whose earliest waiting row is at or behind `watermark`, each with that
    /// earliest time (`i64::MIN` when not known since a restore): nothing waits before it, so a
    /// scan can start there and skip the rows taken before.
    pub(crate) fn due(&self, watermark: i64) -> Vec<(u32, i64)> {
        self.earliest
            .iter()
            .filter(|(_, t)| **t <= watermark)
            .map(|(s, t)| (*s, *t))
            .collect()
    }

    /// After `shard`'s rows up to `watermark` were taken: finds its next waiting row's time in
    /// `state`, or forgets the shard when none waits.
    ///
    /// # Errors
    /// State errors, and a namespace that is not a time.
    pub(crate) fn refresh(
        &mut self,
        store: &mut dyn KeyedStateStore,
        state: &str,
        shard: u32,
        watermark: i64,
    ) -> Result<()> {
        if watermark == i64::MAX {
            self.earliest.remove(&shard);
            return Ok(());
        }
        let from = encode_timestamp(watermark.saturating_add(1));
        let next = store.scan(
            state,
            StateShardId(shard),
            NamespaceRange::new(&from, None),
            Some(1),
        )?;
        match next.first() {
            Some(entry) => {
                let time = decode_timestamp(&entry.namespace)
                    .map_err(|e| weir_api::Error::Internal(format!("{state}: {e}")))?;
                self.earliest.insert(shard, time);
            }
            None => {
                self.earliest.remove(&shard);
            }
        }
        Ok(())
    }
}
