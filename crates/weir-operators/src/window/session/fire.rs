//! Firing session windows: the due sessions' parts gathered and combined, their results
//! emitted.

use super::SessionWindowOperator;
use crate::window::config::LatePolicyKind;
use crate::window::output::{result_batch_bounds, take_all};
use arrow::array::{ArrayRef, BooleanArray, Int64Array, UInt32Array};
use std::cmp::Reverse;
use weir_api::{Output, Result};

impl SessionWindowOperator {
    /// Emits the sessions `due` in `(end, start, key)` order, with the marker where a result
    /// was emitted before; keeps the ones still within their allowed lateness.
    pub(super) fn emit(&mut self, mut due: Vec<u32>, out: &mut Output) -> Result<()> {
        fn order(op: &SessionWindowOperator, sid: u32) -> Option<(i64, i64, &[u8])> {
            op.session(sid)
                .map(|s| (s.end, s.start, op.keys[s.key as usize].bytes.as_slice()))
        }
        due.sort_by(|&a, &b| order(self, a).cmp(&order(self, b)));
        // One merge for all of them: DataFusion takes a merge without nulls as having seen
        // every group below the total, so every group must get its parts in that one call.
        let mut parts = Vec::new();
        let mut groups = Vec::new();
        for (row, &sid) in due.iter().enumerate() {
            if let Some(s) = self.session(sid) {
                groups.extend(std::iter::repeat_n(row, s.parts.len()));
                parts.extend_from_slice(&s.parts);
            }
        }
        let states = self.parts.combine(&parts, &groups, due.len())?;
        for &part in &parts {
            self.parts.release(part);
        }

        // The results.
        let values = self.cfg.aggregates.evaluate_states(&states)?;
        let mut starts = Vec::with_capacity(due.len());
        let mut ends = Vec::with_capacity(due.len());
        let mut marker = Vec::with_capacity(due.len());
        let mut key_refs: Vec<&[u8]> = Vec::with_capacity(due.len());
        for &sid in &due {
            if let Some(s) = self.session(sid) {
                starts.push(s.start);
                ends.push(s.end);
                marker.push(Some(s.emitted));
                key_refs.push(&self.keys[s.key as usize].bytes);
            }
        }
        let keys = self.key_columns(&key_refs)?;
        out.emit(result_batch_bounds(
            &self.cfg,
            &keys,
            &Int64Array::from(starts),
            &Int64Array::from(ends),
            values,
            Some(BooleanArray::from(marker)),
        )?);

        // Kept (update policy, within allowed lateness) with their combined state, or gone.
        let keep = self.cfg.policy == LatePolicyKind::Update;
        let lateness = self.cfg.allowed_lateness;
        let wm = self.watermark;
        let mut kept_rows = Vec::new();
        let mut kept_sids = Vec::new();
        for (row, &sid) in due.iter().enumerate() {
            let Some(deadline) = self
                .session(sid)
                .map(|s| (s.end - 1).saturating_add(lateness))
            else {
                continue;
            };
            // Its parts were all released above.
            let entry = &mut self.arena[sid as usize];
            if let Some(s) = entry.session.as_mut() {
                s.parts.clear();
            }
            if keep && deadline > wm {
                if let Some(s) = entry.session.as_mut() {
                    s.emitted = true;
                    s.pending = false;
                }
                self.expiry.push(Reverse((deadline, sid, entry.generation)));
                kept_rows.push(row as u32);
                kept_sids.push(sid);
            } else {
                self.remove(sid);
            }
        }
        if !kept_sids.is_empty() {
            let idx = UInt32Array::from(kept_rows);
            let taken: Vec<Vec<ArrayRef>> = states
                .iter()
                .map(|s| take_all(s, &idx))
                .collect::<Result<_>>()?;
            self.attach(&kept_sids, taken);
        }
        Ok(())
    }
}
