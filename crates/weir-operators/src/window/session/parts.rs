//! Where session windows keep their partial states: immutable chunks of partial-state rows.
//!
//! DataFusion's group accumulators hand groups out only from the front or all at once, so one
//! session's state cannot be taken out of an accumulator shared with sessions still open.
//! Instead the rows of each batch are aggregated per session in a scratch group space that is
//! drained at once into a **chunk**: one row of partial states per session the batch touched.
//! A session holds the **parts** (chunk, row) it was given. Firing gathers the parts of the
//! due sessions (arrow's `interleave`) and merges them, touching nothing else, so a watermark
//! costs what fires, not what is open. A session with many parts has them combined into one,
//! and when most rows of the chunks are dead the live ones are rewritten, so memory stays
//! proportional to the open sessions.

use crate::window::aggregate::{AggregateSet, GroupSpace};
use arrow::array::{Array, ArrayRef};
use arrow::compute::interleave;
use arrow::datatypes::Schema;
use std::sync::Arc;
use weir_api::{Error, Result};

/// A part of a session's state: a chunk and the row in it.
pub(super) type Part = (u32, u32);

/// A session with more parts than this has them combined into one at the end of a batch
/// (smaller in unit tests, so that their small inputs combine parts often).
pub(super) const MAX_PARTS: usize = if cfg!(test) { 3 } else { 16 };

/// Chunks are rewritten when they hold more than this many rows and more than twice as many
/// as are live (smaller in unit tests, so that their small inputs rewrite chunks often).
const COMPACT_ROWS: usize = if cfg!(test) { 8 } else { 65_536 };

/// Partial states, one row per part: per aggregate, its state columns.
pub(super) type States = Vec<Vec<ArrayRef>>;

struct Chunk {
    states: States,
    rows: usize,
    live: usize,
}

/// The chunks of partial states of every session of one operator instance.
pub(super) struct PartStore {
    /// Partial-state columns per aggregate.
    widths: Vec<usize>,
    scratch: GroupSpace,
    chunks: Vec<Option<Chunk>>,
    free: Vec<u32>,
    /// Rows of every chunk, and the live ones among them.
    rows: usize,
    live: usize,
    /// Scratch for `gather`: the position of each chunk among the arrays of one gather.
    position: Vec<u32>,
}

impl PartStore {
    /// An empty store for the aggregates `set`.
    pub(super) fn new(set: Arc<AggregateSet>) -> Result<Self> {
        let scratch = GroupSpace::new(Arc::clone(&set), Arc::new(Schema::empty()))?;
        Ok(Self {
            widths: set.state_widths(),
            scratch,
            chunks: Vec::new(),
            free: Vec::new(),
            rows: 0,
            live: 0,
            position: Vec::new(),
        })
    }

    /// Aggregates rows into a new chunk: `args` (every aggregate's arguments) has one row per
    /// entry of `groups`, and every group of `0..total` gets at least one row. Row `g` of the
    /// chunk is group `g`'s partial state.
    pub(super) fn update(
        &mut self,
        groups: &[usize],
        total: usize,
        args: &[Vec<ArrayRef>],
    ) -> Result<u32> {
        self.scratch.update_indexed(groups, total, args)?;
        let (_, states) = self.scratch.drain()?;
        Ok(self.insert(states, total))
    }

    /// Stores `rows` rows of partial states as a new chunk, every row live.
    pub(super) fn insert(&mut self, states: States, rows: usize) -> u32 {
        let chunk = Chunk {
            states,
            rows,
            live: rows,
        };
        self.rows += rows;
        self.live += rows;
        match self.free.pop() {
            Some(id) => {
                self.chunks[id as usize] = Some(chunk);
                id
            }
            None => {
                self.chunks.push(Some(chunk));
                (self.chunks.len() - 1) as u32
            }
        }
    }

    /// Combines parts: the part `parts[i]` goes to group `groups[i]`, every group of
    /// `0..total` gets at least one part. Returns one row of partial states per group. The
    /// parts stay live (see [`release`](Self::release)).
    pub(super) fn combine(
        &mut self,
        parts: &[Part],
        groups: &[usize],
        total: usize,
    ) -> Result<States> {
        if parts.is_empty() {
            return Ok(self.scratch.drain()?.1);
        }
        let states = self.gather(parts)?;
        self.scratch.merge_indexed(groups, total, &states)?;
        let (_, merged) = self.scratch.drain()?;
        Ok(merged)
    }

    /// The partial states of `parts`, one row per part in their order.
    fn gather(&mut self, parts: &[Part]) -> Result<States> {
        self.position.resize(self.chunks.len(), u32::MAX);
        let mut order: Vec<&Chunk> = Vec::new();
        let mut ids: Vec<u32> = Vec::new();
        let mut indices: Vec<(usize, usize)> = Vec::with_capacity(parts.len());
        for &(chunk, row) in parts {
            let at = &mut self.position[chunk as usize];
            if *at == u32::MAX {
                let Some(c) = self.chunks[chunk as usize].as_ref() else {
                    return Err(Error::Internal(format!(
                        "session state part ({chunk}, {row}) refers to a freed chunk"
                    )));
                };
                *at = order.len() as u32;
                order.push(c);
                ids.push(chunk);
            }
            indices.push((*at as usize, row as usize));
        }
        for id in ids {
            self.position[id as usize] = u32::MAX;
        }
        let mut out = Vec::with_capacity(self.widths.len());
        for (a, &width) in self.widths.iter().enumerate() {
            let mut columns = Vec::with_capacity(width);
            for c in 0..width {
                let arrays: Vec<&dyn Array> =
                    order.iter().map(|ch| ch.states[a][c].as_ref()).collect();
                columns.push(
                    interleave(&arrays, &indices)
                        .map_err(|e| Error::arrow("gathering session states", e))?,
                );
            }
            out.push(columns);
        }
        Ok(out)
    }

    /// A part is no longer needed (its session fired, expired or was combined): a chunk with
    /// no live row left is dropped.
    pub(super) fn release(&mut self, (chunk, _): Part) {
        let Some(slot) = self.chunks.get_mut(chunk as usize) else {
            return;
        };
        let Some(c) = slot.as_mut() else {
            return;
        };
        c.live -= 1;
        self.live -= 1;
        if c.live == 0 {
            self.rows -= c.rows;
            *slot = None;
            self.free.push(chunk);
        }
    }

    /// Whether most rows held are dead: then the live parts should be rewritten.
    pub(super) fn wants_compaction(&self) -> bool {
        self.rows > COMPACT_ROWS && self.rows > 2 * self.live
    }
}
