//! The event-time core of the operators that keep rows in keyed state until the watermark
//! passes their time and then emit what they computed of them (`dedup_first`, `window_top_n`,
//! `over_aggregate`): their state store, the watermarks a row is judged against, which shards
//! have rows due, and the watermark kept for a restore. Each operator keeps only its own logic:
//! what it stores per row, and what it emits for the rows that are due.

use crate::pending::PendingShards;
use crate::shard_progress::ShardProgress;
use weir_api::state::{NamespaceRange, ScannedEntry};
use weir_api::{KeyedStateStore, Result, StateAddress, StateShardId, TaskContext, Watermark};
use weir_state::timers::encode_timestamp;

/// Rows waiting in keyed state for the watermark, and the watermarks of one operator instance.
pub(crate) struct Waiting {
    /// The operator's keyed state.
    pub(crate) store: Box<dyn KeyedStateStore>,
    /// State shards of the job (what keys hash to).
    pub(crate) shard_count: u32,
    /// The map or value state whose namespaces are the waiting rows' times
    /// ([`encode_timestamp`]).
    state: &'static str,
    /// The operator's watermark, kept for a restore.
    progress: ShardProgress,
    /// The operator's input watermark: a row at or behind it is late.
    watermark: i64,
    /// The watermark emitted last.
    emitted: i64,
    /// The watermark of the split the next rows were read behind (`lateness: split`).
    split_watermark: i64,
    /// Shards holding rows not emitted yet.
    pending: PendingShards,
    /// Whether a restored watermark and the shards with rows were looked for.
    started: bool,
}

impl Waiting {
    /// The core of subtask `ctx` over `store` (with the operator's states registered), whose
    /// rows wait in `state`; its watermark is kept in the state named `progress`.
    ///
    /// # Errors
    /// State errors registering the progress state.
    pub(crate) fn new(
        ctx: &TaskContext,
        mut store: Box<dyn KeyedStateStore>,
        state: &'static str,
        progress: &'static str,
    ) -> Result<Self> {
        let progress = ShardProgress::new(ctx, store.as_mut(), progress)?;
        Ok(Self {
            store,
            shard_count: ctx.state_shard_count.unwrap_or(1),
            state,
            progress,
            watermark: i64::MIN,
            emitted: i64::MIN,
            split_watermark: i64::MIN,
            pending: PendingShards::default(),
            started: false,
        })
    }

    /// Finds the shards with waiting rows and a restored watermark, once.
    fn start(&mut self) -> Result<()> {
        if self.started {
            return Ok(());
        }
        self.started = true;
        self.pending = PendingShards::restored(
            self.progress
                .live_shards(self.store.as_mut(), &[self.state])?,
        );
        if let Some([w]) = self.progress.restore(self.store.as_mut())? {
            self.watermark = w;
        }
        Ok(())
    }

    /// The time at or behind which a row arriving now is late: the operator's watermark, or
    /// that of the row's split when it is ahead.
    ///
    /// # Errors
    /// State errors of a restore's first look.
    pub(crate) fn late_bound(&mut self) -> Result<i64> {
        self.start()?;
        Ok(self.watermark.max(self.split_watermark))
    }

    /// A row of time `time` now waits in `shard`.
    pub(crate) fn note(&mut self, shard: u32, time: i64) {
        self.pending.note(shard, time);
    }

    /// The rows that follow were read behind their split's watermark `watermark`.
    pub(crate) fn set_split_watermark(&mut self, watermark: Watermark) {
        self.split_watermark = watermark.0.0;
    }

    /// Keeps the watermark for a restore (at a barrier).
    ///
    /// # Errors
    /// State errors.
    pub(crate) fn save(&mut self) -> Result<()> {
        self.start()?;
        self.progress.save(self.store.as_mut(), &[self.watermark])
    }

    /// Advances to `watermark`: the rows at or behind it, one shard at a time, are removed
    /// from the state and handed to `fire` (with the store, for the operator's other states),
    /// in the order of their times. `false` when the watermark is not ahead of the one emitted
    /// last (nothing was done); else the caller emits what it computed, then the watermark.
    ///
    /// # Errors
    /// State errors, and those of `fire`.
    pub(crate) fn advance(
        &mut self,
        watermark: Watermark,
        mut fire: impl FnMut(&mut dyn KeyedStateStore, StateShardId, Vec<ScannedEntry>) -> Result<()>,
    ) -> Result<bool> {
        self.start()?;
        let w = watermark.0.0;
        if w <= self.emitted {
            return Ok(false);
        }
        self.watermark = self.watermark.max(w);
        let until = (w != i64::MAX).then(|| encode_timestamp(w.saturating_add(1)));
        for (shard, earliest) in self.pending.due(w) {
            let shard_id = StateShardId(shard);
            // The scan starts at the shard's earliest waiting row: the rows taken before
            // (removed, but perhaps still in redb behind the journal's tombstones) are skipped.
            let from = if earliest == i64::MIN {
                Vec::new()
            } else {
                encode_timestamp(earliest).to_vec()
            };
            let range = NamespaceRange::new(&from, until.as_ref().map(|u| &u[..]));
            let entries = self.store.scan(self.state, shard_id, range, None)?;
            for entry in &entries {
                let address = StateAddress {
                    shard: shard_id,
                    namespace: &entry.namespace,
                    key: &entry.key,
                };
                self.store.remove_at(self.state, address, &entry.sub_key)?;
            }
            if !entries.is_empty() {
                fire(self.store.as_mut(), shard_id, entries)?;
            }
            self.pending
                .refresh(self.store.as_mut(), self.state, shard, w)?;
        }
        self.emitted = w;
        Ok(true)
    }
}
