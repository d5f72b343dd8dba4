//! Attempt fencing (docs/checkpoints.md) on any object store with create-if-absent: every run of a
//! job claims the next attempt number by creating `checkpoint/{namespace}/attempts/{n:020}`,
//! and an attempt may publish only while no newer attempt object exists.

use crate::error::{CheckpointError, CheckpointResult};
use crate::layout;
use crate::manifest::AttemptId;
use crate::store::CheckpointStore;
use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, PutMode, PutOptions, PutPayload};

/// How many times [`CheckpointStore::acquire_attempt`] tries the next number after losing a
/// race for one.
const ACQUIRE_TRIES: u64 = 16;

/// How many of the newest attempt objects retention keeps.
pub(crate) const KEPT_ATTEMPTS: usize = 16;

impl CheckpointStore {
    /// Claims a new attempt of the job: one past the newest attempt object in
    /// `checkpoint/{namespace}/attempts/` (1 when there is none), created create-if-absent.
    /// If another run created that number first, the next one is tried, up to 16 times. From
    /// then on every older attempt is fenced: [`CheckpointStore::check_attempt`] refuses it
    /// and [`CheckpointStore::publish_manifest`] will not publish its manifests.
    ///
    /// Call it before choosing the manifest to restore, so that an older attempt's manifest
    /// published while this one starts is either seen by the choice or refused.
    ///
    /// # Errors
    /// [`CheckpointError::ObjectStore`] when the store fails, when it has no create-if-absent
    /// (`NotImplemented`), or (`AlreadyExists`) when 16 numbers in a row were taken by
    /// concurrent runs.
    pub async fn acquire_attempt(&self) -> CheckpointResult<AttemptId> {
        let newest = self.attempts().await?.last().copied();
        let first = newest.map_or(1, |a| a.0.saturating_add(1));
        let mut last_error = None;
        for n in first..first.saturating_add(ACQUIRE_TRIES) {
            let attempt = AttemptId(n);
            let location = self.attempt_location(attempt);
            let opts = PutOptions {
                mode: PutMode::Create,
                ..PutOptions::default()
            };
            match self
                .object_store()
                .put_opts(&location, PutPayload::new(), opts)
                .await
            {
                Ok(_) => return Ok(attempt),
                Err(e @ object_store::Error::AlreadyExists { .. }) => {
                    last_error = Some(CheckpointError::store(
                        format!("acquiring attempt (tried {ACQUIRE_TRIES} numbers)"),
                        &location,
                        e,
                    ));
                }
                Err(e) => {
                    return Err(CheckpointError::store("acquiring attempt", &location, e));
                }
            }
        }
        Err(
            last_error.unwrap_or_else(|| CheckpointError::InvalidArgument {
                message: format!(
                    "no attempt number is left after {} in {}",
                    first.saturating_sub(1),
                    self.attempts_prefix()
                ),
            }),
        )
    }

    /// Refuses `attempt` when a newer attempt of the job exists (one LIST of the attempts
    /// directory). An attempt that was never acquired but is not older than the newest one
    /// passes, and so does any attempt when none was ever acquired.
    ///
    /// This is a check, not a lock: a put that passed it just before a newer attempt was
    /// acquired can still land. The newer attempt then either sees that manifest when it
    /// chooses where to restore from, or, when it publishes the same epoch itself, gets
    /// [`CheckpointError::Conflict`].
    ///
    /// # Errors
    /// [`CheckpointError::Fenced`] with the newest attempt; [`CheckpointError::ObjectStore`]
    /// when listing fails.
    pub async fn check_attempt(&self, attempt: AttemptId) -> CheckpointResult<()> {
        match self.attempts().await?.last() {
            Some(&current) if current > attempt => Err(CheckpointError::Fenced {
                attempt,
                current,
                namespace: self.namespace().to_owned(),
            }),
            _ => Ok(()),
        }
    }

    /// Every attempt object of the namespace, oldest first; other objects in the directory
    /// are ignored.
    pub(crate) async fn attempts(&self) -> CheckpointResult<Vec<AttemptId>> {
        let prefix = self.attempts_prefix();
        let objects: Vec<ObjectMeta> = self
            .object_store()
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(|e| CheckpointError::store("listing attempts under", &prefix, e))?;
        let mut attempts: Vec<AttemptId> = objects
            .iter()
            .filter_map(|m| {
                let relative = layout::strip_base(&prefix, &m.location)?;
                let mut parts = relative.parts();
                let name = parts.next()?;
                // Only direct children: `LocalFileSystem` staging files never show up.
                parts
                    .next()
                    .is_none()
                    .then(|| layout::parse_attempt_name(name.as_ref()))
                    .flatten()
            })
            .collect();
        attempts.sort();
        Ok(attempts)
    }

    /// The full object path of `attempt`'s object.
    pub(crate) fn attempt_location(&self, attempt: AttemptId) -> ObjectPath {
        layout::join(
            self.base(),
            &layout::attempt_path(self.namespace(), attempt),
        )
    }

    fn attempts_prefix(&self) -> ObjectPath {
        layout::join(self.base(), &layout::attempts_path(self.namespace()))
    }
}
