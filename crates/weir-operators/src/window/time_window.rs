//! The running window operator for tumbling, sliding (hop) and cumulating windows.
//!
//! Each open window is one [`GroupSpace`]: a batch's rows are assigned to windows, each
//! window's rows are taken with one `take` per column and aggregated into the window's group
//! accumulators. A window `[start, end)` fires when the watermark reaches `end - 1`, in
//! `(end, start)` order. Under the update policy a fired window is kept until
//! `end - 1 + allowed_lateness` and late rows re-emit the corrected results of the keys they
//! touched.

use super::aggregate::GroupSpace;
use super::assign::assign_windows;
use super::config::{LatePolicyKind, WindowConfig};
use super::image::{ImageWindows, RestoredWindows, WindowId, WindowState};
use super::output::{result_batch, take_all};
use crate::event_time::event_times_ms;
use crate::late::LateRows;
use arrow::array::{ArrayRef, BooleanArray, RecordBatch, UInt32Array};
use datafusion::common::HashMap;
use std::collections::BTreeMap;
use std::sync::Arc;
use weir_api::{
    Barrier, Operator, Output, Result, StateImage, Watermark, WatermarkMarks, process_in_pieces,
};

/// Emptied group spaces kept for new windows: a drained key table keeps its capacity, so a
/// new window does not grow its table from scratch (rehashing took 12% of a tumble profile).
/// Bounded, because a window with millions of keys leaves a large table behind.
const SPACE_POOL: usize = 4;

/// A window operator instance (one subtask) for tumble, hop and cumulate windows.
#[derive(Debug)]
pub struct TimeWindowOperator {
    cfg: Arc<WindowConfig>,
    /// The operator's watermark: every window with `end - 1 <= watermark` has fired.
    watermark: i64,
    /// The watermark of their own split that the rows of the next batches were read behind
    /// (`i64::MIN`: none). A row is late when its window ends at or behind the larger of this
    /// and `watermark`.
    split_watermark: i64,
    /// Windows not fired yet, by `(end, start)`.
    open: BTreeMap<WindowId, GroupSpace>,
    /// Fired windows kept for late updates (policy update), by `(end, start)`.
    fired: BTreeMap<WindowId, GroupSpace>,
    late: LateRows,
    /// Where its windows go in checkpoints.
    state: WindowState,
    /// Emptied spaces of fired windows, for new ones.
    pool: Vec<GroupSpace>,
}

impl TimeWindowOperator {
    /// A new instance with the windows of `restored` (from a checkpoint; empty on a fresh
    /// start); `state` says where its windows go in checkpoints.
    ///
    /// # Errors
    ///
    /// Errors of merging the restored groups.
    pub fn new(
        cfg: Arc<WindowConfig>,
        late: LateRows,
        state: WindowState,
        restored: RestoredWindows,
    ) -> Result<Self> {
        let mut op = Self {
            watermark: restored.watermark,
            split_watermark: i64::MIN,
            open: BTreeMap::new(),
            fired: BTreeMap::new(),
            late,
            cfg,
            state,
            pool: Vec::new(),
        };
        for ((id, _flags), (keys, states)) in restored.windows {
            let mut space = op.new_space()?;
            space.merge(&keys, &states)?;
            if id.end - 1 <= op.watermark {
                op.fired.insert(id, space);
            } else {
                op.open.insert(id, space);
            }
        }
        Ok(op)
    }

    fn new_space(&mut self) -> Result<GroupSpace> {
        if let Some(space) = self.pool.pop() {
            return Ok(space);
        }
        GroupSpace::new(
            Arc::clone(&self.cfg.aggregates),
            Arc::clone(&self.cfg.key_schema),
        )
    }

    fn lateness_deadline(&self, id: WindowId) -> i64 {
        (id.end - 1).saturating_add(self.cfg.allowed_lateness)
    }

    /// Emits the results of every open window with `end - 1 <= watermark`, then drops fired
    /// windows past their lateness deadline.
    fn fire(&mut self, out: &mut Output) -> Result<()> {
        while let Some(entry) = self.open.first_entry() {
            let id = *entry.key();
            if id.end - 1 > self.watermark {
                break;
            }
            let mut space = entry.remove();
            let keep = self.cfg.policy == LatePolicyKind::Update
                && self.lateness_deadline(id) > self.watermark;
            let (keys, states) = space.drain()?;
            let values = self.cfg.aggregates.evaluate_states(&states)?;
            out.emit(result_batch(&self.cfg, &keys, id, values, None)?);
            if keep {
                space.merge(&keys, &states)?;
                self.fired.insert(id, space);
            } else if self.pool.len() < SPACE_POOL {
                self.pool.push(space);
            }
        }
        let watermark = self.watermark;
        let allowed = self.cfg.allowed_lateness;
        self.fired
            .retain(|id, _| (id.end - 1).saturating_add(allowed) > watermark);
        Ok(())
    }

    /// Adds late rows to fired window `id` (creating it when it had no row before) and emits
    /// the corrected results of the keys they touched: marked as updates where a result was
    /// emitted before, unmarked for keys seen for the first time.
    fn update_fired(
        &mut self,
        id: WindowId,
        keys: &[ArrayRef],
        args: &[Vec<ArrayRef>],
        out: &mut Output,
    ) -> Result<()> {
        if !self.fired.contains_key(&id) {
            let space = self.new_space()?;
            self.fired.insert(id, space);
        }
        let Some(space) = self.fired.get_mut(&id) else {
            return Ok(());
        };
        let before = space.len();
        let groups = space.update(keys, args)?.to_vec();
        let mut touched = vec![false; space.len()];
        for g in groups {
            touched[g] = true;
        }
        let (all_keys, states) = space.drain()?;
        let rows: UInt32Array = touched
            .iter()
            .enumerate()
            .filter(|(_, t)| **t)
            .map(|(i, _)| i as u32)
            .collect();
        let marker: BooleanArray = rows
            .values()
            .iter()
            .map(|&g| Some((g as usize) < before))
            .collect();
        let touched_keys = take_all(&all_keys, &rows)?;
        let touched_states: Vec<Vec<ArrayRef>> = states
            .iter()
            .map(|s| take_all(s, &rows))
            .collect::<Result<_>>()?;
        let values = self.cfg.aggregates.evaluate_states(&touched_states)?;
        out.emit(result_batch(
            &self.cfg,
            &touched_keys,
            id,
            values,
            Some(marker),
        )?);
        space.merge(&all_keys, &states)
    }
    /// Adds the rows of `batch` to their windows; a row is late when its window ends at or
    /// behind the operator's watermark, or `bounds[row]` (the watermark before it inside a
    /// batch with marks) when given.
    fn add_rows(
        &mut self,
        batch: RecordBatch,
        bounds: Option<&[i64]>,
        out: &mut Output,
    ) -> Result<()> {
        let times = event_times_ms(batch.column(self.cfg.time_index), &self.cfg.time_field)?;
        let assigned = assign_windows(self.cfg.kind, &times, &self.cfg.time_field)?;
        let rows = batch.num_rows();
        // Per row: has it a window that takes it (open, or fired within allowed lateness)?
        let mut taken = vec![false; rows];
        let mut to_open: Vec<(WindowId, Vec<u32>)> = Vec::new();
        let mut to_fired: Vec<(WindowId, Vec<u32>)> = Vec::new();
        // DataFusion's hash map (foldhash): std's SipHash took 28% of the hop profile here.
        let mut slot_of: HashMap<(WindowId, bool), usize> = HashMap::default();
        let mut last: Option<(WindowId, bool, usize)> = None;
        let update = self.cfg.policy == LatePolicyKind::Update;
        let split_watermark = self.split_watermark;
        let watermark = self.watermark;
        let late_bound_of = |row: u32| {
            bounds
                .and_then(|b| b.get(row as usize).copied())
                .unwrap_or(watermark)
                .max(split_watermark)
        };
        // Rows that go into a fired window (update policy): late rows that update a result.
        let mut updating = if update {
            vec![false; rows]
        } else {
            Vec::new()
        };
        for i in 0..assigned.len() {
            let id = WindowId {
                end: assigned.end[i],
                start: assigned.start[i],
            };
            let row = assigned.row[i];
            // Late against the row's own split, even when the window is still open here
            // because another split holds the operator's watermark back.
            let late_bound = late_bound_of(row);
            let on_time = id.end - 1 > late_bound;
            if !(on_time || update && self.lateness_deadline(id) > late_bound) {
                continue;
            }
            let is_open = id.end - 1 > self.watermark;
            taken[row as usize] = true;
            if !is_open {
                updating[row as usize] = true;
            }
            let slot = match last {
                Some((l, o, s)) if l == id && o == is_open => s,
                _ => {
                    let list = if is_open { &mut to_open } else { &mut to_fired };
                    let s = *slot_of.entry((id, is_open)).or_insert_with(|| {
                        list.push((id, Vec::new()));
                        list.len() - 1
                    });
                    last = Some((id, is_open, s));
                    s
                }
            };
            let list = if is_open { &mut to_open } else { &mut to_fired };
            list[slot].1.push(row);
        }

        let args = self.cfg.aggregates.arguments(&batch)?;
        let keys: Vec<ArrayRef> = self
            .cfg
            .key_indices
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        for (id, rows_of) in to_open {
            let (k, a) = take_rows(&keys, &args, rows_of, rows)?;
            if !self.open.contains_key(&id) {
                let space = self.new_space()?;
                self.open.insert(id, space);
            }
            if let Some(space) = self.open.get_mut(&id) {
                space.update(&k, &a)?;
            }
        }
        for (id, rows_of) in to_fired {
            let (k, a) = take_rows(&keys, &args, rows_of, rows)?;
            self.update_fired(id, &k, &a, out)?;
        }
        self.late
            .note_updated(updating.iter().filter(|u| **u).count());
        self.late.handle(&batch, &times, &taken, out)
    }
}

impl Operator for TimeWindowOperator {
    fn process_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        self.add_rows(batch, None, out)
    }

    /// With late rows dropped, the batch is handled whole: each row is judged against the
    /// watermark before it, and the windows its marks close fire after the batch. That is the
    /// result of handling it piece by piece: a row on time there goes into a window that is
    /// still open at the batch's start, and the windows fire in the same order. Updated and
    /// routed late rows are handled piece by piece, where their output order matters.
    fn process_marked_batch(
        &mut self,
        input: usize,
        batch: RecordBatch,
        marks: &WatermarkMarks,
        out: &mut Output,
    ) -> Result<()> {
        if marks.is_empty() {
            return self.process_batch(input, batch, out);
        }
        if self.cfg.policy != LatePolicyKind::Drop {
            return process_in_pieces(self, input, batch, marks, out);
        }
        // Each row's late bound: the watermark before it, or the split watermark before it
        // when that is ahead (`lateness: split`), as if the batch came in pieces.
        let rows = batch.num_rows();
        let mut bounds = vec![self.watermark; rows];
        for (row, w) in marks.iter() {
            if let Some(tail) = bounds.get_mut(row..) {
                tail.fill(w.0.0);
            }
        }
        let mut split = self.split_watermark;
        let mut start = 0;
        for (row, w) in marks
            .splits()
            .chain(std::iter::once((rows, Watermark::NONE)))
        {
            let end = row.clamp(start, rows);
            for bound in &mut bounds[start..end] {
                *bound = (*bound).max(split);
            }
            start = end;
            split = split.max(w.0.0);
        }
        self.add_rows(batch, Some(&bounds), out)?;
        if let Some(last) = marks.last_split() {
            self.split_watermark = last.0.0;
        }
        match marks.last() {
            Some(last) => self.process_watermark(last, out),
            None => Ok(()),
        }
    }

    fn process_watermark(&mut self, watermark: Watermark, out: &mut Output) -> Result<()> {
        if watermark.0.0 > self.watermark {
            self.watermark = watermark.0.0;
            self.fire(out)?;
        }
        out.emit_watermark(watermark);
        Ok(())
    }

    /// Kept, not forwarded: the rows this operator emits are results, not rows of a split.
    fn process_split_watermark(
        &mut self,
        _input: usize,
        watermark: Watermark,
        _out: &mut Output,
    ) -> Result<()> {
        self.split_watermark = watermark.0.0;
        Ok(())
    }

    fn snapshot_image(&mut self, _barrier: Barrier) -> Result<Option<StateImage>> {
        // Each window's groups are taken out and put back: the columns are the image (shared,
        // not copied), encoded and written in the background.
        let mut parts = Vec::with_capacity(self.open.len() + self.fired.len());
        for (id, space) in self.fired.iter_mut().chain(self.open.iter_mut()) {
            if space.is_empty() {
                continue;
            }
            let (keys, states) = space.drain()?;
            space.merge(&keys, &states)?;
            parts.push((ImageWindows::One(*id, 0), (keys, states)));
        }
        Ok(Some(self.state.image(self.watermark, parts)))
    }
}

/// The key and argument columns of the rows `rows_of` (ascending); no copy when they are all
/// `total` rows or one contiguous run of them (event time nearly in order: a window's rows in
/// a batch are mostly one run), which is sliced.
fn take_rows(
    keys: &[ArrayRef],
    args: &[Vec<ArrayRef>],
    rows_of: Vec<u32>,
    total: usize,
) -> Result<(Vec<ArrayRef>, Vec<Vec<ArrayRef>>)> {
    if rows_of.len() == total {
        return Ok((keys.to_vec(), args.to_vec()));
    }
    if let (Some(&first), Some(&last)) = (rows_of.first(), rows_of.last())
        && (last - first) as usize + 1 == rows_of.len()
    {
        let (offset, len) = (first as usize, rows_of.len());
        let slice = |cols: &[ArrayRef]| -> Vec<ArrayRef> {
            cols.iter().map(|c| c.slice(offset, len)).collect()
        };
        return Ok((slice(keys), args.iter().map(|a| slice(a)).collect()));
    }
    let idx = UInt32Array::from(rows_of);
    let k = take_all(keys, &idx)?;
    let a = args
        .iter()
        .map(|cols| take_all(cols, &idx))
        .collect::<Result<_>>()?;
    Ok((k, a))
}
