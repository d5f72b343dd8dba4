//! Firing session windows: the due sessions' slots taken out of their buckets, their results
//! emitted, the live sessions caught in the drained prefixes given new slots.

use super::{SessionWindowOperator, slots::NO_OWNER, slots::Part};
use crate::window::aggregate::GroupSpace;
use crate::window::config::LatePolicyKind;
use crate::window::output::{result_batch_bounds, take_all};
use arrow::array::{ArrayRef, BooleanArray, Int64Array, UInt32Array};
use arrow::datatypes::Schema;
use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::sync::Arc;
use weir_api::{Error, Output, Result};

impl SessionWindowOperator {
    /// Emits the sessions `due` in `(end, start, key)` order, with the marker where a result
    /// was emitted before; keeps the ones still within their allowed lateness.
    pub(super) fn emit(&mut self, mut due: Vec<u32>, out: &mut Output) -> Result<()> {
        fn order(op: &SessionWindowOperator, sid: u32) -> Option<(i64, i64, &[u8])> {
            op.session(sid)
                .map(|s| (s.end, s.start, op.keys[s.key as usize].bytes.as_slice()))
        }
        due.sort_by(|&a, &b| order(self, a).cmp(&order(self, b)));
        for (row, &sid) in due.iter().enumerate() {
            self.arena[sid as usize].fire_row = row as u32;
        }
        // Take out every bucket's slots up to the last slot of a due session.
        let mut upto: BTreeMap<i64, u64> = BTreeMap::new();
        for &sid in &due {
            if let Some(s) = self.session(sid) {
                for &(bucket, slot) in &s.parts {
                    let u = upto.entry(bucket).or_default();
                    *u = (*u).max(slot + 1);
                }
            }
        }
        let mut fired =
            GroupSpace::new(Arc::clone(&self.cfg.aggregates), Arc::new(Schema::empty()))?;
        // One merge for all of them: DataFusion takes a merge without nulls as having seen
        // every group below the total, so every group must get its rows in that one call.
        let mut fire_states: Vec<Vec<Vec<ArrayRef>>> = Vec::new();
        let mut all_fire_groups: Vec<usize> = Vec::new();
        let mut carried_sids: Vec<u32> = Vec::new();
        let mut carried_states: Vec<Vec<Vec<ArrayRef>>> = Vec::new();
        for (&bucket, &end) in &upto {
            let (owners, states) = self.slots.drain_prefix(bucket, end)?;
            let (mut fire_rows, mut fire_groups) = (Vec::new(), Vec::new());
            let mut carry_rows = Vec::new();
            for (row, &owner) in owners.iter().enumerate() {
                if owner == NO_OWNER {
                    continue;
                }
                match self.arena[owner as usize].fire_row {
                    u32::MAX => {
                        carry_rows.push(row as u32);
                        carried_sids.push(owner);
                    }
                    g => {
                        fire_rows.push(row as u32);
                        fire_groups.push(g as usize);
                    }
                }
            }
            let idx = UInt32Array::from(fire_rows);
            fire_states.push(
                states
                    .iter()
                    .map(|s| take_all(s, &idx))
                    .collect::<Result<_>>()?,
            );
            all_fire_groups.extend(fire_groups);
            if !carry_rows.is_empty() {
                let idx = UInt32Array::from(carry_rows);
                carried_states.push(
                    states
                        .iter()
                        .map(|s| take_all(s, &idx))
                        .collect::<Result<_>>()?,
                );
            }
        }
        fired.merge_indexed(&all_fire_groups, due.len(), &concat_states(&fire_states)?)?;
        // Live sessions caught in a drained prefix: their drained slots become one new slot.
        let drained = |part: &Part| upto.get(&part.0).is_some_and(|&u| part.1 < u);
        for &sid in &carried_sids {
            if std::mem::replace(&mut self.arena[sid as usize].carried, true) {
                continue;
            }
            let Some(start) = self.session(sid).map(|s| s.start) else {
                continue;
            };
            let part = self.slots.alloc(self.slots.bucket_of(start), sid)?;
            if let Some(s) = self.arena[sid as usize].session.as_mut() {
                s.parts.retain(|p| !drained(p));
                s.parts.push(part);
                s.write = part;
            }
        }
        for &sid in &carried_sids {
            self.arena[sid as usize].carried = false;
        }
        if !carried_sids.is_empty() {
            let states = concat_states(&carried_states)?;
            self.merge_into_writes(&carried_sids, &states)?;
        }

        // The results.
        let (_, states) = fired.drain()?;
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

        // Kept (update policy, within allowed lateness) or gone.
        let keep = self.cfg.policy == LatePolicyKind::Update;
        let lateness = self.cfg.allowed_lateness;
        let wm = self.watermark;
        let mut kept_rows = Vec::new();
        let mut kept_sids = Vec::new();
        for &sid in &due {
            self.arena[sid as usize].fire_row = u32::MAX;
        }
        for (row, &sid) in due.iter().enumerate() {
            let Some(deadline) = self
                .session(sid)
                .map(|s| (s.end - 1).saturating_add(lateness))
            else {
                continue;
            };
            if keep && deadline > wm {
                let start = self.session(sid).map_or(0, |s| s.start);
                let part = self.slots.alloc(self.slots.bucket_of(start), sid)?;
                let entry = &mut self.arena[sid as usize];
                if let Some(s) = entry.session.as_mut() {
                    s.emitted = true;
                    s.pending = false;
                    s.parts = vec![part];
                    s.write = part;
                }
                self.expiry.push(Reverse((deadline, sid, entry.generation)));
                kept_rows.push(row as u32);
                kept_sids.push(sid);
            } else {
                // Its slots were all drained above.
                if let Some(s) = self.arena[sid as usize].session.as_mut() {
                    s.parts.clear();
                }
                self.remove(sid);
            }
        }
        if !kept_sids.is_empty() {
            let idx = UInt32Array::from(kept_rows);
            let taken: Vec<Vec<ArrayRef>> = states
                .iter()
                .map(|s| take_all(s, &idx))
                .collect::<Result<_>>()?;
            self.merge_into_writes(&kept_sids, &taken)?;
        }
        Ok(())
    }
}

/// The rows of several chunks of partial states, one after the other.
pub(super) fn concat_states(chunks: &[Vec<Vec<ArrayRef>>]) -> Result<Vec<Vec<ArrayRef>>> {
    if chunks.len() == 1 {
        return Ok(chunks[0].clone());
    }
    let Some(first) = chunks.first() else {
        return Ok(Vec::new());
    };
    first
        .iter()
        .enumerate()
        .map(|(a, cols)| {
            (0..cols.len())
                .map(|c| {
                    let parts: Vec<&dyn arrow::array::Array> =
                        chunks.iter().map(|ch| ch[a][c].as_ref()).collect();
                    arrow::compute::concat(&parts)
                        .map_err(|e| Error::arrow("joining session states", e))
                })
                .collect()
        })
        .collect()
}
