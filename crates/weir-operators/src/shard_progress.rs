//! An operator's own progress (its watermarks) kept in keyed state under every state shard the
//! instance owns, so a restore finds it whatever the parallelism: after a rescale, an instance
//! takes the lowest value over its shards (never ahead of any instance before it).

use std::collections::BTreeSet;
use weir_api::state::{NamespaceRange, StateDescriptor, Value};
use weir_api::{Error, KeyedStateStore, Result, StateShardId, TaskContext};

/// Where an operator instance keeps its progress values: one entry per owned shard.
#[derive(Debug)]
pub(crate) struct ShardProgress {
    state: &'static str,
    owned: Vec<StateShardId>,
}

impl ShardProgress {
    /// Registers `state` in `store` for the instance `ctx` describes.
    ///
    /// # Errors
    /// When the state cannot be registered or the owned shards cannot be computed.
    pub(crate) fn new(
        ctx: &TaskContext,
        store: &mut dyn KeyedStateStore,
        state: &'static str,
    ) -> Result<Self> {
        store.register(StateDescriptor::<Value<Vec<u8>>>::new(state).spec())?;
        Ok(Self {
            state,
            owned: crate::window::owned_shards(ctx)?,
        })
    }

    /// Writes `values` under every owned shard (on a barrier).
    ///
    /// # Errors
    /// State errors.
    pub(crate) fn save(&self, store: &mut dyn KeyedStateStore, values: &[i64]) -> Result<()> {
        let payload: Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
        for &shard in &self.owned {
            store.set_current_key(&[], shard);
            store.set_current_namespace(&[]);
            store.put(self.state, &[], &payload)?;
        }
        Ok(())
    }

    /// The lowest of each of `N` values over the owned shards; `None` when none was saved
    /// (a fresh start).
    ///
    /// # Errors
    /// State errors, or an entry that does not hold `N` values.
    pub(crate) fn restore<const N: usize>(
        &self,
        store: &mut dyn KeyedStateStore,
    ) -> Result<Option<[i64; N]>> {
        let mut lowest: Option<[i64; N]> = None;
        for &shard in &self.owned {
            for entry in store.scan(self.state, shard, NamespaceRange::ALL, Some(1))? {
                if entry.payload.len() != 8 * N {
                    return Err(Error::Internal(format!(
                        "{}: {} bytes, not {}",
                        self.state,
                        entry.payload.len(),
                        8 * N
                    )));
                }
                let mut values = [0_i64; N];
                for (value, chunk) in values.iter_mut().zip(entry.payload.chunks_exact(8)) {
                    let mut bytes = [0_u8; 8];
                    bytes.copy_from_slice(chunk);
                    *value = i64::from_be_bytes(bytes);
                }
                lowest = Some(match lowest {
                    None => values,
                    Some(low) => std::array::from_fn(|i| low[i].min(values[i])),
                });
            }
        }
        Ok(lowest)
    }

    /// The owned shards holding an entry of any of `states`.
    ///
    /// # Errors
    /// State errors.
    pub(crate) fn live_shards(
        &self,
        store: &mut dyn KeyedStateStore,
        states: &[&str],
    ) -> Result<BTreeSet<u32>> {
        let mut live = BTreeSet::new();
        for &shard in &self.owned {
            for state in states {
                if !store
                    .scan(state, shard, NamespaceRange::ALL, Some(1))?
                    .is_empty()
                {
                    live.insert(shard.0);
                }
            }
        }
        Ok(live)
    }
}
