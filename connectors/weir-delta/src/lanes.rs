//! One Delta commit for the epochs of every lane of a distributed job.
//!
//! Each lane of a distributed job is a job of its own: it checkpoints, restores and numbers its
//! epochs by itself. When one of its epochs is durable, a lane does not commit it on its own:
//! it stages the epoch's files (their `add` actions) as
//! `_weir/lanes/<job's app id>/lane-<i>/<epoch>.json` in the table's directory, which Delta
//! readers pass over (a directory whose name starts with `_`). Then it reads what every lane
//! staged. Once every lane that has not ended staged an epoch the table does not hold yet, the
//! lane that sees it makes ONE Delta commit (a *round*) of every staged epoch of every lane:
//! in steady state one checkpoint of each lane, a job-level epoch. A lane writes before it
//! reads, so the last lane to stage a round sees the round complete; a lane that is down holds
//! the rounds back (its files and the others' wait, staged; none is lost) until it runs again.
//!
//! The commit carries a `txn` per lane in it (the lane's app id, its newest epoch in the
//! commit), so an epoch at or below its lane's transaction version is known to be committed
//! (a commit repeated after a crash, a staged file not yet removed), and a `txn` of the job's
//! app id whose version counts the rounds. Two lanes that both see a round complete race for
//! the log's next version: the commit is made only on the version whose transactions were
//! read (no retry on a later one), and the lane that loses reads the table again, where it
//! finds its epochs committed.
//!
//! A lane whose input ended (a bounded job) writes `lane-<i>/end.json`: the rounds after it no
//! longer wait for it. Staged epochs are removed once committed; a round whose staged epochs
//! hold no files commits nothing and removes them.

use crate::commit::{EpochFiles, TableCommitter};
use crate::compaction::lost_the_version;
use crate::table::TableLocation;
use deltalake_core::DeltaTable;
use deltalake_core::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake_core::kernel::{Action, Add, Transaction};
use deltalake_core::protocol::{DeltaOperation, OutputMode};
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use weir_api::failpoint::failpoint;
use weir_api::{Epoch, Lane, Result};

/// How often a round is read and tried again after another writer took the log's next version.
const MAX_ROUND_ATTEMPTS: u32 = 50;

/// The end marker's contents: the lane's last epoch (`None`: the lane committed none, it read
/// nothing).
#[derive(Debug, Serialize, Deserialize)]
struct LaneEnd {
    epoch: Option<u64>,
}

/// The commits of one sink in one lane of a distributed job.
pub(crate) struct LaneCommits<'a> {
    committer: &'a TableCommitter,
    lane: &'a Lane,
    /// The Delta transaction id of each lane's epochs, in lane order.
    lane_app_ids: Vec<String>,
    /// The Delta transaction id of the job's rounds.
    job_app_id: String,
    /// The job's staging directory in the table's directory.
    dir: Path,
}

/// What the lanes staged: each lane's epochs (with their objects) and the last epoch of each
/// lane that ended.
#[derive(Debug, Default)]
struct Staged {
    epochs: BTreeMap<u32, BTreeMap<u64, Path>>,
    ended: BTreeMap<u32, Option<u64>>,
}

impl<'a> LaneCommits<'a> {
    /// The commits of sink `app_id(job)` (`app_id` makes a job's transaction id) in `lane`.
    ///
    /// # Errors
    /// An external error when the table's path is no object path.
    pub(crate) fn new(
        committer: &'a TableCommitter,
        lane: &'a Lane,
        app_id: impl Fn(&str) -> String,
    ) -> Result<Self> {
        let job_app_id = app_id(lane.job.as_str());
        let dir = committer
            .location()
            .path()?
            .join("_weir")
            .join("lanes")
            .join(job_app_id.as_str());
        Ok(LaneCommits {
            committer,
            lane,
            lane_app_ids: lane.jobs.iter().map(|j| app_id(j.as_str())).collect(),
            job_app_id,
            dir,
        })
    }

    fn location(&self) -> &TableLocation {
        self.committer.location()
    }

    fn store(&self) -> &dyn ObjectStore {
        self.location().store().as_ref()
    }

    fn lane_dir(&self, lane: u32) -> Path {
        self.dir.clone().join(format!("lane-{lane}").as_str())
    }

    /// Stages this lane's `epochs` (each epoch's files), marks the lane ended when `last`, and
    /// commits a round when every lane is in it.
    ///
    /// # Errors
    /// External errors when staging, reading the table or committing fails.
    pub(crate) async fn commit(&self, epochs: &[(Epoch, Vec<Add>)], last: bool) -> Result<()> {
        for (epoch, adds) in epochs {
            let staged = EpochFiles {
                epoch: epoch.0,
                adds: adds.clone(),
            };
            let path = self
                .lane_dir(self.lane.index)
                .join(format!("{:020}.json", epoch.0).as_str());
            self.put(&path, &staged).await?;
        }
        failpoint("delta-lane-staged");
        if last {
            let path = self.lane_dir(self.lane.index).join("end.json");
            let epoch = epochs.last().map(|(epoch, _)| epoch.0);
            self.put(&path, &LaneEnd { epoch }).await?;
        }
        self.commit_round().await
    }

    /// Writes `value` as JSON at `path`, durably (a local file is synced).
    async fn put(&self, path: &Path, value: &impl Serialize) -> Result<()> {
        let bytes = serde_json::to_vec(value)
            .map_err(|e| weir_api::Error::Internal(format!("encoding a staged epoch: {e}")))?;
        self.store()
            .put(path, PutPayload::from(bytes))
            .await
            .map_err(|e| self.location().error(&format!("staging {path} in"), e))?;
        if let Some(dir) = self.location().local_dir() {
            let synced = weir_api::SinkStaging {
                store: self.location().store().clone(),
                dir: self.dir.clone(),
                local_root: Some(dir),
            };
            let table = self.location().path()?;
            let relative: Path = path
                .prefix_match(&table)
                .map(|parts| parts.collect())
                .unwrap_or_else(|| path.clone());
            tokio::task::spawn_blocking(move || synced.sync_local(&relative))
                .await
                .map_err(|e| weir_api::Error::Internal(format!("syncing a staged epoch: {e}")))??;
        }
        Ok(())
    }

    /// What every lane staged.
    async fn staged(&self) -> Result<Staged> {
        let listed: Vec<_> = self
            .store()
            .list(Some(&self.dir))
            .try_collect()
            .await
            .map_err(|e| self.location().error("listing the staged epochs of", e))?;
        let mut staged = Staged::default();
        for meta in listed {
            let mut parts = meta
                .location
                .prefix_match(&self.dir)
                .map(|p| p.map(|part| part.as_ref().to_owned()).collect::<Vec<_>>())
                .unwrap_or_default();
            let (Some(name), Some(lane)) = (parts.pop(), parts.pop()) else {
                continue;
            };
            let Some(lane) = lane
                .strip_prefix("lane-")
                .and_then(|l| l.parse::<u32>().ok())
            else {
                continue;
            };
            if name == "end.json" {
                if let Some(end) = self.read::<LaneEnd>(&meta.location).await? {
                    staged.ended.insert(lane, end.epoch);
                }
            } else if let Some(epoch) = name
                .strip_suffix(".json")
                .and_then(|e| e.parse::<u64>().ok())
            {
                staged
                    .epochs
                    .entry(lane)
                    .or_default()
                    .insert(epoch, meta.location);
            }
        }
        Ok(staged)
    }

    /// The staged object at `path`, or `None` when it is gone.
    async fn read<T: serde::de::DeserializeOwned>(&self, path: &Path) -> Result<Option<T>> {
        let failed = |e| self.location().error(&format!("reading {path} in"), e);
        let bytes = match self.store().get(path).await {
            Ok(got) => got.bytes().await.map_err(failed)?,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(failed(e)),
        };
        serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            self.location()
                .error(&format!("reading {path} (not a staged epoch) in"), e)
        })
    }

    /// Whether every lane that has not ended staged some epoch (committed or not): until then
    /// no round can be complete, and the table need not be read.
    fn may_be_complete(&self, staged: &Staged) -> bool {
        (0..self.lane_app_ids.len()).all(|lane| {
            let lane = u32::try_from(lane).unwrap_or(u32::MAX);
            staged.ended.contains_key(&lane) || staged.epochs.contains_key(&lane)
        })
    }

    /// Commits a round when every lane that has not ended staged an epoch the table does not
    /// hold; removes staged epochs the table holds.
    async fn commit_round(&self) -> Result<()> {
        let mut table: Option<DeltaTable> = None;
        for _ in 0..MAX_ROUND_ATTEMPTS {
            let staged = self.staged().await?;
            if staged.epochs.is_empty() || !self.may_be_complete(&staged) {
                // Nothing staged (every lane read nothing: there may be no table), or a lane
                // that has not ended staged nothing yet.
                return Ok(());
            }
            let table = match &mut table {
                Some(t) => {
                    t.update_state()
                        .await
                        .map_err(|e| self.location().error("reading", e))?;
                    t
                }
                None => table.insert(self.committer.newest().await?),
            };
            let mut round = Round::default();
            for (lane, app_id) in self.lane_app_ids.iter().enumerate() {
                let lane = u32::try_from(lane).unwrap_or(u32::MAX);
                let done = self.committer.transaction_version(table, app_id).await?;
                let epochs = staged.epochs.get(&lane).cloned().unwrap_or_default();
                let (old, new): (Vec<_>, Vec<_>) = epochs.into_iter().partition(|(epoch, _)| {
                    done.is_some_and(|d| i64::try_from(*epoch).unwrap_or(i64::MAX) <= d)
                });
                round.committed.extend(old.into_iter().map(|(_, p)| p));
                if new.is_empty() && !staged.ended.contains_key(&lane) {
                    // This lane has nothing new: the round is not complete.
                    round.waits_for = Some(lane);
                }
                if let Some((epoch, _)) = new.last() {
                    round.txns.push(Transaction::new(
                        app_id,
                        i64::try_from(*epoch).unwrap_or(i64::MAX),
                    ));
                }
                round.staged.extend(new.into_iter().map(|(_, p)| p));
            }
            if round.waits_for.is_some() || round.staged.is_empty() {
                self.remove(&round.committed).await;
                return Ok(());
            }
            let mut gone = false;
            for path in &round.staged {
                match self.read::<EpochFiles>(path).await? {
                    Some(files) => round.adds.extend(files.adds),
                    // Another lane removed it since the listing: it committed it (then the
                    // table holds it) or it held no files. Read both again.
                    None => gone = true,
                }
            }
            if gone {
                continue;
            }
            if round.adds.is_empty() {
                // Epochs without rows: nothing to commit, nothing to keep.
                self.remove(&round.staged).await;
                self.remove(&round.committed).await;
                return Ok(());
            }
            let done = self
                .committer
                .transaction_version(table, &self.job_app_id)
                .await?;
            let number = done.unwrap_or(0).saturating_add(1);
            if self.commit_on(table, &round, number).await? {
                failpoint("delta-after-commit");
                self.remove(&round.staged).await;
                self.remove(&round.committed).await;
                table
                    .update_state()
                    .await
                    .map_err(|e| self.location().error("reading", e))?;
                self.committer.compact_after_commit(table).await;
                self.committer.remember(table).await;
                return Ok(());
            }
            tracing::info!(table = %self.location().given(), "another writer took the log's next version; reading the table and the staged epochs again");
        }
        Err(self.location().error(
            "committing the lanes' epochs to",
            format!(
                "other writers took the log's next version {MAX_ROUND_ATTEMPTS} times in a row"
            ),
        ))
    }

    /// Commits `round` as round `number` on exactly the next version of `table`'s log. Returns
    /// `false` when another writer took that version first.
    async fn commit_on(&self, table: &DeltaTable, round: &Round, number: i64) -> Result<bool> {
        failpoint("delta-before-commit");
        let mut txns = round.txns.clone();
        txns.push(Transaction::new(&self.job_app_id, number));
        let properties = CommitProperties::default()
            .with_max_retries(0)
            .with_application_transactions(txns);
        let operation = DeltaOperation::StreamingUpdate {
            output_mode: OutputMode::Append,
            query_id: self.job_app_id.clone(),
            epoch_id: number,
        };
        let snapshot = table
            .snapshot()
            .map_err(|e| self.location().error("reading", e))?;
        let committed = CommitBuilder::from(properties)
            .with_actions(round.adds.iter().cloned().map(Action::Add).collect())
            .build(Some(snapshot), table.log_store(), operation)
            .await;
        match committed {
            Ok(finalized) => {
                tracing::debug!(table = %self.location().given(), round = number, version = finalized.version(), files = round.adds.len(), lanes = round.txns.len(), "committed the lanes' epochs to the Delta table");
                Ok(true)
            }
            Err(e) if lost_the_version(&e) => Ok(false),
            Err(e) => Err(self.location().error(
                &format!("committing round {number} of the lanes' epochs to"),
                e,
            )),
        }
    }

    /// Removes staged objects; one that stays is passed over later (its epoch is committed or
    /// holds no files).
    async fn remove(&self, paths: &[Path]) {
        for path in paths {
            match self.store().delete(path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => {
                    tracing::warn!(table = %self.location().given(), %path, error = %e, "removing a staged epoch failed; a later round removes it");
                }
            }
        }
    }
}

/// What one round commits.
#[derive(Debug, Default)]
struct Round {
    /// The staged epochs it commits.
    staged: Vec<Path>,
    /// Their files.
    adds: Vec<Add>,
    /// Each lane's newest epoch in it.
    txns: Vec<Transaction>,
    /// Staged epochs the table already holds.
    committed: Vec<Path>,
    /// A lane that has not ended and staged nothing new.
    waits_for: Option<u32>,
}
