//! The epoch lifecycle and the persisted epoch log (docs/checkpoints.md, "Epoch lifecycle and
//! the epoch log").
//!
//! ```text
//! CREATED -> INJECTING -> ALIGNING -> SNAPSHOTTING -> PRECOMMITTED -> DURABLE -> COMMITTED
//!    \___________\___________\____________\______________\
//!                                                          -> ABORTED   (from any state before DURABLE)
//! ```
//!
//! A phase with nothing to do (no multi-input task to align, no two-phase sink) is passed
//! through, not skipped, so the sequence is the same for every job. An epoch is DURABLE once
//! its manifest is published; from then on it can only be COMMITTED: a durable epoch's sink
//! transactions must never be aborted, so DURABLE -> ABORTED is refused: no state after
//! DURABLE can lead to ABORTED.
//!
//! Object stores cannot append, so the log is one small immutable object per persisted
//! transition, `checkpoint/{namespace}/log/{epoch}-{STATE}.json`, written with create-if-absent.
//! Persisted are CREATED (so a new coordinator never reuses an epoch id), DURABLE, COMMITTED and
//! ABORTED; the phases in between live only in the coordinator's memory. [`EpochLog::read`]
//! rebuilds the log from a listing. A DURABLE record may carry a second copy of the epoch's
//! manifest ([`EpochRecord::manifest`]), which recovery reads when the manifest object is
//! damaged or gone ([`EpochLog::manifest_copy`]).

use crate::error::{CheckpointError, CheckpointResult};
use crate::layout;
use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use weir_api::Epoch;

/// The format of a log record (`formatVersion`).
pub const LOG_FORMAT_VERSION: u32 = 1;

pub use crate::lifecycle::EpochState;

/// One step of the lifecycle: `to` if `from -> to` is legal.
///
/// # Errors
/// [`CheckpointError::IllegalTransition`] otherwise (including `from == to`).
pub fn transition(from: EpochState, to: EpochState) -> CheckpointResult<EpochState> {
    if from.can_transition_to(to) {
        Ok(to)
    } else {
        Err(CheckpointError::IllegalTransition {
            epoch: None,
            from: Some(from),
            to,
        })
    }
}

/// Whether the log may record `to` for an epoch whose furthest recorded state is `current`.
///
/// The steps in between are not persisted, so this is reachability, with one extra rule:
/// COMMITTED needs a recorded DURABLE (a commit may only follow a durable manifest).
fn may_record(current: Option<EpochState>, to: EpochState) -> bool {
    match (current, to) {
        (_, EpochState::Committed) => current == Some(EpochState::Durable),
        (None, _) => to.is_persisted(),
        (Some(from), _) => to.is_persisted() && reachable(from, to),
    }
}

/// Whether `to` follows `from` after one or more legal steps.
fn reachable(from: EpochState, to: EpochState) -> bool {
    let mut frontier = vec![from];
    let mut seen = Vec::new();
    while let Some(s) = frontier.pop() {
        for next in EpochState::ALL
            .into_iter()
            .filter(|n| s.can_transition_to(*n))
        {
            if next == to {
                return true;
            }
            if !seen.contains(&next) {
                seen.push(next);
                frontier.push(next);
            }
        }
    }
    false
}

/// One persisted transition: the content of `log/{epoch}-{STATE}.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EpochRecord {
    /// [`LOG_FORMAT_VERSION`].
    pub format_version: u32,
    /// The epoch.
    pub epoch: Epoch,
    /// The state it reached.
    pub state: EpochState,
    /// When, in ms since the Unix epoch.
    pub at_ms: u64,
    /// Why, for ABORTED (a task failure, a timeout); `None` otherwise.
    pub reason: Option<String>,
    /// For DURABLE: the exact stored bytes of the epoch's manifest (they are UTF-8 JSON), a
    /// second copy that recovery uses when the manifest object fails its checksum or is gone.
    /// Left out of the JSON when `None` (records of other states, records written without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
}

impl EpochRecord {
    /// A record of `epoch` reaching `state` at `at_ms`, without a reason.
    pub fn new(epoch: Epoch, state: EpochState, at_ms: u64) -> Self {
        Self {
            format_version: LOG_FORMAT_VERSION,
            epoch,
            state,
            at_ms,
            reason: None,
            manifest: None,
        }
    }

    /// The same record carrying a copy of the epoch's manifest: the bytes
    /// [`EpochManifest::to_json`](crate::EpochManifest::to_json) stores (for DURABLE).
    ///
    /// # Errors
    /// [`CheckpointError::Encode`] if the manifest cannot be encoded (it can).
    pub fn with_manifest(mut self, manifest: &crate::EpochManifest) -> CheckpointResult<Self> {
        let bytes = manifest.to_json()?;
        let text = String::from_utf8(bytes).map_err(|e| CheckpointError::Encode {
            context: format!("the manifest copy of epoch {}", manifest.epoch),
            message: e.to_string(),
        })?;
        self.manifest = Some(text);
        Ok(self)
    }

    /// The same record with a reason (for ABORTED).
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }
}

/// What [`EpochLog::record`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordOutcome {
    /// The record was written.
    Written,
    /// The transition was already recorded (a retry): the stored record, left unchanged.
    AlreadyRecorded(EpochRecord),
}

/// The epoch log as rebuilt from its records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EpochLogView {
    records: BTreeMap<Epoch, Vec<EpochRecord>>,
}

impl EpochLogView {
    /// Every record, by epoch, each epoch's in lifecycle order.
    pub fn records(&self) -> &BTreeMap<Epoch, Vec<EpochRecord>> {
        &self.records
    }

    /// The furthest recorded state of `epoch`. When racing writers recorded both DURABLE (or
    /// COMMITTED) and ABORTED, the durable side wins: DURABLE is only recorded after the
    /// manifest was published, and a published manifest makes the epoch durable.
    pub fn state_of(&self, epoch: Epoch) -> Option<EpochState> {
        let records = self.records.get(&epoch)?;
        let has = |s: EpochState| records.iter().any(|r| r.state == s);
        [
            EpochState::Committed,
            EpochState::Durable,
            EpochState::Aborted,
            EpochState::Created,
        ]
        .into_iter()
        .find(|s| has(*s))
    }

    /// The furthest recorded state of every epoch.
    pub fn states(&self) -> BTreeMap<Epoch, EpochState> {
        self.records
            .keys()
            .filter_map(|e| self.state_of(*e).map(|s| (*e, s)))
            .collect()
    }

    /// Epochs with both a durable-side record and ABORTED: evidence of two coordinators.
    pub fn conflicts(&self) -> Vec<Epoch> {
        self.records
            .iter()
            .filter(|(_, rs)| {
                rs.iter().any(|r| r.state == EpochState::Aborted)
                    && rs
                        .iter()
                        .any(|r| matches!(r.state, EpochState::Durable | EpochState::Committed))
            })
            .map(|(e, _)| *e)
            .collect()
    }

    /// Durable epochs whose commit is not recorded: recovery retries their sink commits.
    pub fn uncommitted_durable(&self) -> Vec<Epoch> {
        self.states()
            .into_iter()
            .filter(|(_, s)| *s == EpochState::Durable)
            .map(|(e, _)| e)
            .collect()
    }

    /// The first epoch id never used: one past the newest recorded epoch (0 for an empty log).
    pub fn next_epoch(&self) -> Epoch {
        self.records
            .keys()
            .next_back()
            .map_or(Epoch(0), |e| Epoch(e.0.saturating_add(1)))
    }
}

/// The persisted epoch log of one checkpoint namespace.
#[derive(Debug, Clone)]
pub struct EpochLog {
    store: Arc<dyn ObjectStore>,
    base: ObjectPath,
    namespace: String,
}

impl EpochLog {
    pub(crate) fn new(store: Arc<dyn ObjectStore>, base: ObjectPath, namespace: String) -> Self {
        Self {
            store,
            base,
            namespace,
        }
    }

    /// The full object path of the record of `epoch` reaching `state`.
    pub fn record_location(&self, epoch: Epoch, state: EpochState) -> ObjectPath {
        layout::join(
            &self.base,
            &layout::log_record_path(&self.namespace, epoch, state),
        )
    }

    /// Persists a transition, create-if-absent. Recording a transition that is already
    /// recorded is a no-op ([`RecordOutcome::AlreadyRecorded`]), so a retry is safe.
    ///
    /// The check against the epoch's recorded state and the write are two requests: writers
    /// that race (two coordinators) can both succeed; [`EpochLogView::conflicts`] shows it and
    /// fencing, not this log, has to prevent it.
    ///
    /// # Errors
    /// [`CheckpointError::IllegalTransition`] for a state that is not persisted or does not
    /// follow the epoch's recorded state (COMMITTED needs DURABLE; nothing follows COMMITTED or
    /// ABORTED; DURABLE cannot become ABORTED); [`CheckpointError::ObjectStore`] when the store
    /// fails.
    pub async fn record(&self, record: &EpochRecord) -> CheckpointResult<RecordOutcome> {
        let location = self.record_location(record.epoch, record.state);
        let current = self.read_epoch(record.epoch).await?;
        if let Some(existing) = current.iter().find(|r| r.state == record.state) {
            return Ok(RecordOutcome::AlreadyRecorded(existing.clone()));
        }
        let view = EpochLogView {
            records: BTreeMap::from([(record.epoch, current)]),
        };
        let from = view.state_of(record.epoch);
        if !may_record(from, record.state) {
            return Err(CheckpointError::IllegalTransition {
                epoch: Some(record.epoch),
                from,
                to: record.state,
            });
        }
        let bytes = serde_json::to_vec(record).map_err(|e| CheckpointError::Encode {
            context: format!("epoch log record {location}"),
            message: e.to_string(),
        })?;
        let opts = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        match self
            .store
            .put_opts(&location, PutPayload::from(bytes), opts)
            .await
        {
            Ok(_) => Ok(RecordOutcome::Written),
            Err(object_store::Error::AlreadyExists { .. }) => {
                let existing = self.read_record(&location).await?;
                Ok(RecordOutcome::AlreadyRecorded(existing))
            }
            Err(e) => Err(CheckpointError::store(
                "writing epoch log record",
                &location,
                e,
            )),
        }
    }

    /// Rebuilds the whole log from a listing of its records.
    ///
    /// # Errors
    /// [`CheckpointError::Corrupt`] naming a record whose content is not a record or does not
    /// match its file name; [`CheckpointError::ObjectStore`] when the store fails.
    pub async fn read(&self) -> CheckpointResult<EpochLogView> {
        let objects = self.list().await?;
        let mut view = EpochLogView::default();
        for meta in objects {
            // Anything else in the log directory is not Weir's: leave it alone.
            let name = meta.location.filename().unwrap_or_default();
            if layout::parse_log_record_name(name).is_none() {
                continue;
            }
            let record = self.read_record(&meta.location).await?;
            view.records.entry(record.epoch).or_default().push(record);
        }
        for records in view.records.values_mut() {
            records.sort_by_key(|r| r.state);
        }
        Ok(view)
    }

    /// The epochs that have a DURABLE record, from one listing (no record is read), oldest
    /// first.
    ///
    /// # Errors
    /// [`CheckpointError::ObjectStore`] when the store fails.
    pub async fn durable_epochs(&self) -> CheckpointResult<Vec<Epoch>> {
        let objects = self.list().await?;
        let mut epochs: Vec<Epoch> = objects
            .iter()
            .filter_map(|m| {
                m.location
                    .filename()
                    .and_then(layout::parse_log_record_name)
            })
            .filter(|(_, state)| *state == EpochState::Durable)
            .map(|(epoch, _)| epoch)
            .collect();
        epochs.sort();
        Ok(epochs)
    }

    /// Every object under the log directory, from one listing.
    async fn list(&self) -> CheckpointResult<Vec<object_store::ObjectMeta>> {
        let prefix = layout::join(&self.base, &layout::log_path(&self.namespace));
        self.store
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(|e| CheckpointError::store("listing the epoch log", &prefix, e))
    }

    /// The records of one epoch (at most one per persisted state), in lifecycle order.
    async fn read_epoch(&self, epoch: Epoch) -> CheckpointResult<Vec<EpochRecord>> {
        let mut records = Vec::new();
        for state in EpochState::ALL.into_iter().filter(|s| s.is_persisted()) {
            let location = self.record_location(epoch, state);
            match self.store.get(&location).await {
                Ok(result) => {
                    let bytes = result.bytes().await.map_err(|e| {
                        CheckpointError::store("reading epoch log record", &location, e)
                    })?;
                    records.push(parse_record(&bytes, &location)?);
                }
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => {
                    return Err(CheckpointError::store(
                        "reading epoch log record",
                        &location,
                        e,
                    ));
                }
            }
        }
        Ok(records)
    }

    /// The manifest copy the DURABLE record of `epoch` carries, with the record's path (for
    /// messages); `None` when there is no DURABLE record or it carries no copy.
    ///
    /// # Errors
    /// [`CheckpointError::Corrupt`] when the record cannot be read as a record;
    /// [`CheckpointError::ObjectStore`] when the store fails.
    pub async fn manifest_copy(&self, epoch: Epoch) -> CheckpointResult<Option<(String, String)>> {
        let location = self.record_location(epoch, EpochState::Durable);
        match self.store.get(&location).await {
            Ok(result) => {
                let bytes = result.bytes().await.map_err(|e| {
                    CheckpointError::store("reading epoch log record", &location, e)
                })?;
                let record = parse_record(&bytes, &location)?;
                Ok(record.manifest.map(|m| (m, location.to_string())))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(CheckpointError::store(
                "reading epoch log record",
                &location,
                e,
            )),
        }
    }

    async fn read_record(&self, location: &ObjectPath) -> CheckpointResult<EpochRecord> {
        let bytes = async { self.store.get(location).await?.bytes().await }
            .await
            .map_err(|e| CheckpointError::store("reading epoch log record", location, e))?;
        parse_record(&bytes, location)
    }
}

/// Parses a record and checks it against its file name.
fn parse_record(bytes: &[u8], location: &ObjectPath) -> CheckpointResult<EpochRecord> {
    let record: EpochRecord = serde_json::from_slice(bytes)
        .map_err(|e| CheckpointError::corrupt(location, format!("not an epoch log record: {e}")))?;
    if record.format_version != LOG_FORMAT_VERSION {
        return Err(CheckpointError::corrupt(
            location,
            format!(
                "log record format version {}, this Weir reads {LOG_FORMAT_VERSION}",
                record.format_version
            ),
        ));
    }
    let named = location.filename().and_then(layout::parse_log_record_name);
    if named != Some((record.epoch, record.state)) {
        return Err(CheckpointError::corrupt(
            location,
            format!(
                "the file name does not match its content (epoch {}, state {})",
                record.epoch, record.state
            ),
        ));
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use EpochState::*;

    /// The whole transition table: every (from, to) pair, legal or not.
    #[test]
    fn lifecycle_transition_table() {
        let legal = [
            (Created, Injecting),
            (Injecting, Aligning),
            (Aligning, Snapshotting),
            (Snapshotting, Precommitted),
            (Precommitted, Durable),
            (Durable, Committed),
            (Created, Aborted),
            (Injecting, Aborted),
            (Aligning, Aborted),
            (Snapshotting, Aborted),
            (Precommitted, Aborted),
        ];
        for from in EpochState::ALL {
            for to in EpochState::ALL {
                let expected = legal.contains(&(from, to));
                assert_eq!(from.can_transition_to(to), expected, "{from} -> {to}");
                match transition(from, to) {
                    Ok(s) => {
                        assert!(expected, "{from} -> {to} must be refused");
                        assert_eq!(s, to);
                    }
                    Err(e) => {
                        assert!(!expected, "{from} -> {to} must be allowed");
                        assert!(e.to_string().contains(&format!("{from} -> {to}")), "{e}");
                    }
                }
            }
        }
        assert!(Committed.is_terminal() && Aborted.is_terminal());
        assert!(EpochState::ALL.iter().filter(|s| s.is_terminal()).count() == 2);
    }

    #[test]
    fn log_records_follow_the_lifecycle_through_persisted_states() {
        let table = [
            (None, Created, true),
            (None, Durable, true),
            (None, Aborted, true),
            (None, Committed, false),
            (None, Snapshotting, false),
            (Some(Created), Durable, true),
            (Some(Created), Aborted, true),
            (Some(Created), Committed, false),
            (Some(Durable), Committed, true),
            (Some(Durable), Aborted, false),
            (Some(Durable), Created, false),
            (Some(Committed), Aborted, false),
            (Some(Aborted), Durable, false),
            (Some(Aborted), Created, false),
        ];
        for (from, to, allowed) in table {
            assert_eq!(may_record(from, to), allowed, "{from:?} -> {to}");
        }
    }

    #[test]
    fn states_serialize_as_their_names() {
        for s in EpochState::ALL {
            assert_eq!(
                serde_json::to_string(&s).expect("encodes"),
                format!("\"{}\"", s.as_str())
            );
        }
    }
}
