//! Session windows in checkpoints: every session one row of the image, and back.

use super::{FLAG_EMITTED, SessionWindowOperator};
use crate::window::image::{ImageWindows, RestoredWindows, WindowId};
use std::cmp::Reverse;
use weir_api::{Error, Result, StateImage};

impl SessionWindowOperator {
    /// Rebuilds the sessions of a checkpoint image.
    pub(super) fn restore(&mut self, restored: RestoredWindows) -> Result<()> {
        for ((id, flags), (keys, states)) in restored.windows {
            let rows = match states.first().and_then(|s| s.first()) {
                Some(any) if keys.is_empty() => vec![Vec::new(); any.len()],
                _ if keys.is_empty() => Vec::new(),
                _ => {
                    let rows = self.encode_keys(&keys)?;
                    rows.iter().map(|r| r.as_ref().to_vec()).collect()
                }
            };
            let mut sids = Vec::with_capacity(rows.len());
            for key in rows {
                let kid = self.key_id(&key);
                let sid = self.new_session(kid, id.start, id.end);
                let pending = id.end - 1 > self.watermark;
                if let Some(s) = self.session_mut(sid) {
                    s.emitted = flags & FLAG_EMITTED != 0;
                    s.pending = pending;
                }
                sids.push(sid);
            }
            self.attach(&sids, states);
            let lateness = self.cfg.allowed_lateness;
            for sid in sids {
                self.queue(sid);
                // Fired and kept for late rows: dropped when its allowed lateness has passed.
                if let Some(entry) = self.arena.get(sid as usize)
                    && let Some(s) = entry.session.as_ref()
                    && !s.pending
                {
                    let deadline = (s.end - 1).saturating_add(lateness);
                    self.expiry.push(Reverse((deadline, sid, entry.generation)));
                }
            }
        }
        Ok(())
    }

    /// Every session as one row (keys, bounds, flags, partial states) for a checkpoint.
    pub(super) fn snapshot(&mut self) -> Result<StateImage> {
        // The columns are encoded and written in the background.
        let mut entries: Vec<(WindowId, u8, u32)> = Vec::new();
        for (sid, entry) in self.arena.iter().enumerate() {
            if let Some(s) = entry.session.as_ref() {
                let flags = if s.emitted { FLAG_EMITTED } else { 0 };
                entries.push((
                    WindowId {
                        end: s.end,
                        start: s.start,
                    },
                    flags,
                    sid as u32,
                ));
            }
        }
        entries.sort_unstable_by(|a, b| {
            let key = |sid: u32| {
                self.session(sid)
                    .map_or(&[][..], |s| self.keys[s.key as usize].bytes.as_slice())
            };
            (a.0, a.1, key(a.2)).cmp(&(b.0, b.1, key(b.2)))
        });
        // Every session's parts are combined into one row per session (the image), which
        // stays the session's only part.
        let sids: Vec<u32> = entries.iter().map(|e| e.2).collect();
        let (owners, states) = self.compact(&sids)?;
        if owners.len() != sids.len() {
            return Err(Error::Internal(format!(
                "{} of {} sessions have no partial state to snapshot",
                sids.len() - owners.len(),
                sids.len()
            )));
        }
        let key_refs: Vec<&[u8]> = sids
            .iter()
            .map(|&sid| {
                self.session(sid)
                    .map_or(&[][..], |s| self.keys[s.key as usize].bytes.as_slice())
            })
            .collect();
        let keys = self.key_columns(&key_refs)?;
        let ids: Vec<(WindowId, u8)> = entries.iter().map(|e| (e.0, e.1)).collect();
        let parts = vec![(ImageWindows::PerRow(ids), (keys, states))];
        Ok(self.state.image(self.watermark, parts))
    }
}
