//! Starting an attempt of a checkpointing job (docs/fault-tolerance.md, "Recovery"): fence older
//! attempts, pick the manifest to restore, withdraw the output of durable epochs the restore
//! passes over, finish its sink commits, delete uncommitted staged output, and tell every task
//! what it restores (state segments, split cursors).

use super::coordinator::{SinkHandle, commit_sink};
use super::failpoint;
use super::{CheckpointConfig, RestoreFrom};
use crate::error::{Error, Result};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use weir_api::{
    Epoch, EventTimeMs, OperatorId, SourceSplit, SplitCursor, SubtaskIndex, TaskContext, Watermark,
};
use weir_checkpoint::{
    AttemptId, CheckpointStore, EpochManifest, EpochRecord, EpochState, ExpectedCheckpoint,
};
use weir_plan::evolution::{EvolutionReport, Verdict};
use weir_plan::{PartitionedPlan, PlanVertex};
use weir_state::{SegmentDescriptor, SegmentStore};

/// The checkpoint namespace of a plan: derived from job and pipeline ids (docs/checkpoints.md,
/// "Storage layout").
pub fn namespace(plan: &PartitionedPlan) -> String {
    if plan.job_id.as_str() == plan.pipeline_id.as_str() {
        plan.job_id.to_string()
    } else {
        format!("{}.{}", plan.job_id, plan.pipeline_id)
    }
}

fn store_error(context: impl Into<String>, e: weir_checkpoint::CheckpointError) -> Error {
    Error::Checkpoint {
        context: context.into(),
        source: e,
    }
}

/// What an attempt starts from.
#[derive(Debug)]
pub(crate) struct AttemptSetup {
    pub(crate) attempt: AttemptId,
    pub(crate) store: CheckpointStore,
    pub(crate) segments: SegmentStore,
    pub(crate) expected: ExpectedCheckpoint,
    pub(crate) restored: Option<EpochManifest>,
    /// The verdict on each operator when the restored checkpoint is of a changed job.
    pub(crate) evolution: Option<EvolutionReport>,
    pub(crate) next_epoch: Epoch,
    /// What the restore repaired, passed over and withdrew.
    pub(crate) report: RecoveryReport,
}

/// What a restore did besides loading its epoch, for the run's summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RecoveryReport {
    /// The restored manifest came from its copy in the epoch log.
    pub(crate) from_copy: bool,
    /// Durable epochs newer than the restored one.
    pub(crate) passed_over: Vec<Epoch>,
    /// What sinks withdrew of the passed-over epochs' output.
    pub(crate) withdrawn: Vec<String>,
    /// Durable epochs were passed over with a sink that cannot withdraw, as the run allowed.
    pub(crate) duplicates_accepted: bool,
}

/// Fences older attempts, chooses the manifest `restore` asks for, withdraws the published
/// output of the durable epochs after it (refusing when a sink cannot withdraw and
/// `accept_duplicates` is not set), completes the commits of that manifest's sink transactions
/// and deletes every other staged transaction.
///
/// # Errors
/// When the store fails, the requested checkpoint does not exist or does not fit the plan (the
/// message says what differs), a sink cannot withdraw the output of passed-over epochs, or a
/// sink commit, withdrawal or cleanup fails.
pub(crate) async fn begin_attempt(
    plan: &PartitionedPlan,
    expected: ExpectedCheckpoint,
    config: &CheckpointConfig,
    restore: Option<&RestoreFrom>,
    sinks: &BTreeMap<OperatorId, SinkHandle>,
    accept_duplicates: bool,
) -> Result<AttemptSetup> {
    let storage = &config.storage;
    let mut store =
        CheckpointStore::try_new(storage.store.clone(), storage.base.clone(), namespace(plan))
            .map_err(|e| store_error("opening the checkpoint storage", e))?;
    if let Some(root) = &storage.local_root {
        store = store.with_local_root(root.clone());
    }
    let segments = SegmentStore::new(storage.store.clone(), storage.base.clone());
    let attempt = store
        .acquire_attempt()
        .await
        .map_err(|e| store_error("starting a new attempt", e))?;
    tracing::Span::current().record("attempt", tracing::field::display(attempt));
    // `listed`: when choosing the manifest listed the epochs, the newest of them, so that the
    // next epoch number needs no second listing.
    let mut from_copy = None;
    // The durable epochs newer than the restored one, when choosing it found them already.
    let mut passed_over = None;
    let (restored, listed) = match restore {
        None => (None, None),
        Some(RestoreFrom::Latest) => {
            let latest = store.latest_durable(&expected).await.map_err(|e| {
                store_error(
                    format!("finding the latest checkpoint in {}", storage.display),
                    e,
                )
            })?;
            for s in &latest.skipped {
                tracing::warn!(epoch = %s.epoch, path = %s.path, reason = %s.reason, "passed over a checkpoint that cannot be restored");
            }
            if latest.manifest.is_some() && latest.may_repeat_output() {
                tracing::warn!(
                    "restoring an older checkpoint than the newest published one: output committed after it may be repeated"
                );
            }
            if latest.manifest.is_none() {
                tracing::warn!(storage = %storage.display, "no checkpoint to restore: starting from the beginning");
            }
            from_copy = latest.manifest_damage;
            // `latest_durable` walked every published epoch from the newest down to the chosen
            // one: those it skipped are exactly the newer ones.
            passed_over = Some(latest.skipped.iter().map(|s| s.epoch).collect::<Vec<_>>());
            // Every epoch newer than the chosen one was passed over, so the newest listed is
            // the first skipped one, or the chosen one.
            let newest = latest
                .skipped
                .iter()
                .map(|s| s.epoch)
                .chain(latest.manifest.as_ref().map(|m| m.epoch))
                .max();
            (latest.manifest, Some(newest))
        }
        Some(RestoreFrom::Epoch(epoch)) => {
            let point = store
                .restore_point(*epoch, &expected)
                .await
                .map_err(|e| store_error(format!("restoring epoch {epoch}"), e))?;
            from_copy = point.manifest_damage;
            (Some(point.manifest), None)
        }
        Some(RestoreFrom::Savepoint(name)) => {
            let epoch = store
                .find_savepoint(name)
                .await
                .map_err(|e| store_error(format!("finding savepoint `{name}`"), e))?
                .ok_or_else(|| Error::Restore {
                    message: format!(
                        "no savepoint named `{name}` in {} (namespace `{}`)",
                        storage.display,
                        store.namespace()
                    ),
                })?;
            let point = store
                .restore_point(epoch, &expected)
                .await
                .map_err(|e| store_error(format!("restoring savepoint `{name}`"), e))?;
            from_copy = point.manifest_damage;
            (Some(point.manifest), None)
        }
    };
    if let (Some(damage), Some(m)) = (&from_copy, &restored) {
        tracing::warn!(epoch = %m.epoch, damage = %damage, "the manifest is damaged; restoring its copy from the epoch log");
    }
    let next_epoch = next_epoch(&store, listed).await?;
    let mut report = RecoveryReport {
        from_copy: from_copy.is_some(),
        ..RecoveryReport::default()
    };
    if restore.is_some() {
        let after = restored.as_ref().map_or(Epoch(0), |m| m.epoch);
        let mut newer = match passed_over {
            Some(skipped) => skipped,
            None => store
                .published_epochs()
                .await
                .map_err(|e| store_error("listing checkpoints", e))?
                .into_iter()
                .filter(|e| *e > after)
                .collect(),
        };
        newer.sort();
        report.passed_over = newer;
        if !report.passed_over.is_empty() {
            withdraw(
                plan,
                &storage.display,
                after,
                sinks,
                accept_duplicates,
                &mut report,
            )
            .await?;
        }
    }
    let evolution = restored.as_ref().and_then(|m| expected.evolution_report(m));
    if let Some(report) = &evolution {
        for change in &report.operators {
            tracing::info!(operator = %change.operator_id, verdict = ?change.verdict, "{}", change.detail);
        }
    }
    let renames = renames(evolution.as_ref().map(EvolutionReport::restored).as_ref());
    // Sinks removed from the job with their state dropped leave their transactions behind.
    let dropped: HashSet<OperatorId> = evolution
        .iter()
        .flat_map(|r| &r.operators)
        .filter(|c| c.verdict == Verdict::Dropped)
        .map(|c| c.operator_id.clone())
        .collect();
    recover_sinks(plan, &store, restored.as_ref(), sinks, (&renames, &dropped)).await?;
    if let Some(m) = &restored {
        tracing::Span::current().record("epoch", tracing::field::display(m.epoch));
        tracing::info!(epoch = %m.epoch, attempt = %attempt, "restoring checkpoint");
    }
    Ok(AttemptSetup {
        attempt,
        store,
        segments,
        expected,
        restored,
        evolution,
        next_epoch,
        report,
    })
}

/// Before the replay from epoch `after`: every epoch sink withdraws what it published for the
/// passed-over epochs in `report`, or, when a sink cannot, the restore is refused unless
/// `accept_duplicates`. Nothing is withdrawn when the restore is refused.
async fn withdraw(
    plan: &PartitionedPlan,
    storage: &str,
    after: Epoch,
    sinks: &BTreeMap<OperatorId, SinkHandle>,
    accept_duplicates: bool,
    report: &mut RecoveryReport,
) -> Result<()> {
    let passed_over = report
        .passed_over
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let unable: Vec<&OperatorId> = sinks
        .iter()
        .filter(|(_, h)| !h.sink.can_withdraw())
        .map(|(op, _)| op)
        .collect();
    if !unable.is_empty() {
        let names = unable
            .iter()
            .map(|op| format!("`{op}`"))
            .collect::<Vec<_>>()
            .join(", ");
        if !accept_duplicates {
            let from = if after.0 == 0 {
                "the beginning".to_owned()
            } else {
                format!("epoch {after}")
            };
            return Err(Error::Restore {
                message: format!(
                    "restoring from {from} passes over durable epoch(s) {passed_over} in \
                     {storage}, whose output sink(s) {names} may already have published and \
                     cannot withdraw: the replay would publish it again. Repair or restore a \
                     newer checkpoint, or accept duplicate output with --accept-duplicates \
                     (RunOptions::accept_duplicates)"
                ),
            });
        }
        tracing::warn!(sinks = %names, epochs = %passed_over, "passing over durable epochs whose output these sinks cannot withdraw: it may be published twice (duplicates accepted)");
        report.duplicates_accepted = true;
    }
    for (operator, handle) in sinks.iter().filter(|(_, h)| h.sink.can_withdraw()) {
        let ctx = TaskContext::new(
            plan.job_id.clone(),
            operator.clone(),
            SubtaskIndex(0),
            handle.parallelism.max(1),
        );
        let withdrawn = handle
            .sink
            .withdraw_after(&ctx, after)
            .await
            .map_err(|source| Error::Task {
                task: ctx.label(),
                source,
            })?;
        tracing::warn!(sink = %operator, epochs = %passed_over, files = withdrawn.len(), "withdrew the published output of passed-over epochs before the replay");
        report.withdrawn.extend(withdrawn);
    }
    Ok(())
}

/// One past every epoch the namespace has used (manifests and log records). `listed` is the
/// newest epoch with a manifest when the caller listed them already (`Some(None)`: none).
async fn next_epoch(store: &CheckpointStore, listed: Option<Option<Epoch>>) -> Result<Epoch> {
    let newest = match listed {
        Some(newest) => newest,
        None => store
            .list_epochs()
            .await
            .map_err(|e| store_error("listing checkpoints", e))?
            .last()
            .copied(),
    };
    let log = store
        .epoch_log()
        .read()
        .await
        .map_err(|e| store_error("reading the epoch log", e))?;
    let after_manifests = newest.map_or(1, |e| e.0 + 1);
    Ok(Epoch(after_manifests.max(log.next_epoch().0).max(1)))
}

/// The operators of `restored` (old -> new) that go to another id.
fn renames(restored: Option<&BTreeMap<OperatorId, OperatorId>>) -> HashMap<OperatorId, OperatorId> {
    restored
        .into_iter()
        .flatten()
        .filter(|(from, to)| from != to)
        .map(|(from, to)| (from.clone(), to.clone()))
        .collect()
}

/// Publishes the restored manifest's pending transactions (idempotent) and deletes every other
/// staged file of every epoch-mode sink subtask, of this parallelism and the manifest's. A sink
/// the job renamed (`renames`, old -> new) publishes its transactions under its new id; those
/// of a sink removed with its state dropped (`dropped`) are left alone, with a warning.
async fn recover_sinks(
    plan: &PartitionedPlan,
    store: &CheckpointStore,
    manifest: Option<&EpochManifest>,
    sinks: &BTreeMap<OperatorId, SinkHandle>,
    (renames, dropped): (&HashMap<OperatorId, OperatorId>, &HashSet<OperatorId>),
) -> Result<()> {
    let mut by_subtask: BTreeMap<(OperatorId, SubtaskIndex), Vec<(Epoch, serde_json::Value)>> =
        BTreeMap::new();
    if let Some(m) = manifest {
        for t in &m.sink_transactions {
            if dropped.contains(&t.operator) {
                tracing::warn!(sink = %t.operator, epoch = %t.epoch, subtask = %t.subtask, "the sink was removed with its state dropped: its transaction of the restored epoch is not finished again (it was published when the epoch became durable, unless the job stopped in between)");
                continue;
            }
            by_subtask
                .entry((t.operator.clone(), t.subtask))
                .or_default()
                .push((t.epoch, t.pre_commit.clone()));
        }
    }
    for ((operator, subtask), mut values) in by_subtask.clone() {
        let renamed = renames.get(&operator).unwrap_or(&operator);
        if super::coordinator::commits_whole_epochs(sinks, renamed) {
            continue;
        }
        values.sort_by_key(|(e, _)| *e);
        let values: Vec<serde_json::Value> = values.into_iter().map(|(_, v)| v).collect();
        commit_sink(
            sinks,
            store,
            &plan.job_id,
            (renamed, &operator),
            subtask,
            &values,
            true,
        )
        .await?;
        // After a sink subtask's recovery commit, before the next one's.
        failpoint("mid-recovery-commit");
    }
    // Sinks that publish whole epochs: every subtask's values of an epoch in one commit.
    let mut by_epoch: BTreeMap<
        OperatorId,
        BTreeMap<Epoch, Vec<(SubtaskIndex, serde_json::Value)>>,
    > = BTreeMap::new();
    for ((operator, subtask), values) in &by_subtask {
        let renamed = renames.get(operator).unwrap_or(operator);
        if super::coordinator::commits_whole_epochs(sinks, renamed) {
            for (epoch, value) in values {
                by_epoch
                    .entry(renamed.clone())
                    .or_default()
                    .entry(*epoch)
                    .or_default()
                    .push((*subtask, value.clone()));
            }
        }
    }
    for (operator, epochs) in by_epoch {
        let epochs: Vec<(Epoch, Vec<serde_json::Value>)> = epochs
            .into_iter()
            .map(|(epoch, mut values)| {
                values.sort_by_key(|(subtask, _)| *subtask);
                (epoch, values.into_iter().map(|(_, v)| v).collect())
            })
            .collect();
        super::coordinator::commit_sink_epochs(sinks, &plan.job_id, &operator, &epochs, false)
            .await?;
        failpoint("mid-recovery-commit");
    }
    for (operator, handle) in sinks {
        let recorded = by_subtask
            .keys()
            .filter(|(op, _)| op == operator)
            .map(|(_, s)| s.0 + 1)
            .max()
            .unwrap_or(0);
        for subtask in 0..handle.parallelism.max(recorded) {
            let ctx = TaskContext {
                staging: Some(super::sink_staging(store, operator, SubtaskIndex(subtask))),
                ..TaskContext::new(
                    plan.job_id.clone(),
                    operator.clone(),
                    SubtaskIndex(subtask),
                    handle.parallelism.max(subtask + 1),
                )
            };
            handle
                .sink
                .abort_uncommitted(&ctx, &[])
                .await
                .map_err(|source| Error::Task {
                    task: ctx.label(),
                    source,
                })?;
        }
    }
    if let Some(m) = manifest {
        let log = store.epoch_log();
        let failed = |e| store_error(format!("recording epoch {} as committed", m.epoch), e);
        let durable = EpochRecord::new(m.epoch, EpochState::Durable, m.durable_at_ms)
            .with_manifest(m)
            .map_err(failed)?;
        let committed = EpochRecord::new(m.epoch, EpochState::Committed, m.durable_at_ms);
        for record in [durable, committed] {
            log.record(&record).await.map_err(failed)?;
        }
    }
    Ok(())
}

/// Where a restored split's event time stood at the cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct SplitResume {
    /// The largest event time the split had delivered.
    pub(crate) max_event_time: Option<EventTimeMs>,
    /// The split's last emitted watermark.
    pub(crate) emitted: Option<Watermark>,
}

/// The cursor JSON of a split in a manifest: the connector's cursor plus the split's event-time
/// progress, so a resumed split emits watermarks as an uninterrupted one would.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StoredCursor {
    /// The next record to read (exclusive cut).
    pub(crate) next_record: u64,
    /// The largest event time delivered so far, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) max_event_time: Option<i64>,
}

/// What the tasks of an attempt restore from a manifest.
#[derive(Debug, Clone)]
pub(crate) struct RestorePlan {
    manifest: EpochManifest,
    /// For a restore into a changed job: every checkpoint operator whose state is restored,
    /// with the job operator it goes to (old -> new); `None`: every operator restores its own.
    restored: Option<BTreeMap<OperatorId, OperatorId>>,
}

impl RestorePlan {
    /// What to restore of `manifest`; `evolution` is the verdict on each operator when the job
    /// changed since the checkpoint.
    pub(crate) fn new(manifest: EpochManifest, evolution: Option<&EvolutionReport>) -> Self {
        RestorePlan {
            manifest,
            restored: evolution.map(EvolutionReport::restored),
        }
    }

    /// The checkpoint's operator whose state operator `operator` of the job restores, `None`
    /// for one that starts empty.
    fn restores_from<'a>(&'a self, operator: &'a OperatorId) -> Option<&'a OperatorId> {
        match &self.restored {
            None => Some(operator),
            Some(map) => map
                .iter()
                .find(|(_, to)| *to == operator)
                .map(|(from, _)| from),
        }
    }

    /// The job's id of the checkpoint's operator `from`, `None` when its state is not restored.
    fn restored_as<'a>(&'a self, from: &'a OperatorId) -> Option<&'a OperatorId> {
        match &self.restored {
            None => Some(from),
            Some(map) => map.get(from),
        }
    }

    /// The checkpoint's operators restored under another id, old -> new.
    pub(crate) fn renames(&self) -> HashMap<OperatorId, OperatorId> {
        renames(self.restored.as_ref())
    }

    /// The restored epoch.
    pub(crate) fn epoch(&self) -> Epoch {
        self.manifest.epoch
    }

    /// Splits every source's enumerator had finished at the restored epoch: they are read no
    /// more, and every later manifest must still list them as finished.
    pub(crate) fn finished_splits(&self) -> BTreeMap<OperatorId, BTreeSet<String>> {
        self.manifest
            .source_enumerator_snapshots
            .iter()
            .filter_map(|e| Some((self.restored_as(&e.operator)?.clone(), e.finished.clone())))
            .collect()
    }

    /// The segments each subtask of `vertex` loads, indexed by subtask: for a keyed vertex, the
    /// segments of the shards it owns now, whatever parallelism wrote them.
    ///
    /// # Errors
    /// When a segment's shard count differs from the plan's or a shard has no owner.
    pub(crate) fn segments_of(&self, vertex: &PlanVertex) -> Result<Vec<Vec<SegmentDescriptor>>> {
        let operators: HashSet<&OperatorId> = vertex
            .chain
            .iter()
            .filter_map(|n| self.restores_from(&n.operator_id))
            .collect();
        let mine: Vec<SegmentDescriptor> = self
            .manifest
            .segments()
            .filter(|d| operators.contains(&d.operator))
            .cloned()
            .collect();
        match &vertex.shards {
            Some(shards) => {
                let mut per_subtask =
                    weir_state::assign_segments(&mine, shards).map_err(|e| Error::State {
                        context: format!("assigning the state of {} to subtasks", vertex.vertex_id),
                        source: e,
                    })?;
                per_subtask.resize(vertex.parallelism as usize, Vec::new());
                Ok(per_subtask)
            }
            None => {
                // State of a vertex that is not keyed belongs to its subtask: it can only come
                // back at a parallelism that still has that subtask.
                if let Some(d) = mine.iter().find(|d| d.subtask.0 >= vertex.parallelism) {
                    return Err(Error::Restore {
                        message: format!(
                            "operator `{}` is not keyed and kept state in subtask {} at epoch \
                             {}; at parallelism {} that state has no subtask to go to",
                            d.operator, d.subtask, self.manifest.epoch, vertex.parallelism
                        ),
                    });
                }
                let mut per_subtask = vec![Vec::new(); vertex.parallelism as usize];
                for d in mine {
                    per_subtask[d.subtask.0 as usize].push(d);
                }
                Ok(per_subtask)
            }
        }
    }

    /// The splits of source `operator` still to read, assigned to `parallelism` subtasks (in
    /// enumeration order, `i mod p` over the unfinished ones), each from its recorded cursor.
    /// Splits listed now that the checkpoint did not know start from the beginning.
    ///
    /// # Errors
    /// [`Error::Restore`] when a split the checkpoint still had to read is no longer listed, or
    /// a cursor cannot be read.
    pub(crate) fn splits_for(
        &self,
        operator: &OperatorId,
        listed: &[SourceSplit],
        parallelism: u32,
    ) -> Result<Vec<Vec<(SourceSplit, SplitResume)>>> {
        // A source that starts empty reads every split from the beginning.
        let from = self.restores_from(operator);
        let enumerator = self
            .manifest
            .source_enumerator_snapshots
            .iter()
            .find(|e| Some(&e.operator) == from);
        let offsets: HashMap<&str, &weir_checkpoint::SourceSplitOffset> = self
            .manifest
            .source_offsets
            .iter()
            .filter(|o| Some(&o.operator) == from)
            .map(|o| (o.split.as_str(), o))
            .collect();
        let listed_ids: HashSet<&str> = listed.iter().map(|s| s.id.as_str()).collect();
        if let Some(missing) = offsets.keys().find(|id| !listed_ids.contains(**id)) {
            return Err(Error::Restore {
                message: format!(
                    "source `{operator}`: split `{missing}` was still being read at epoch {}, \
                     but it is no longer listed (deleted or renamed input)",
                    self.manifest.epoch
                ),
            });
        }
        let mut out = vec![Vec::new(); parallelism as usize];
        let mut next = 0usize;
        for split in listed {
            if enumerator.is_some_and(|e| e.finished.contains(&split.id)) {
                continue;
            }
            let mut split = split.clone();
            let mut resume = SplitResume::default();
            if let Some(o) = offsets.get(split.id.as_str()) {
                let stored: StoredCursor =
                    serde_json::from_value(o.cursor.clone()).map_err(|e| Error::Restore {
                        message: format!(
                            "source `{operator}`: the cursor of split `{}` in epoch {} cannot \
                             be read: {e}",
                            split.id, self.manifest.epoch
                        ),
                    })?;
                split.cursor = SplitCursor {
                    next_record: stored.next_record,
                };
                resume = SplitResume {
                    max_event_time: stored.max_event_time.map(EventTimeMs),
                    emitted: o.watermark.map(Watermark),
                };
            }
            out[next % parallelism as usize].push((split, resume));
            next += 1;
        }
        Ok(out)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A manifest of epoch 4 of source `events`: split `late` (found by partition discovery in
    /// the run that took it) at offset 7 with watermark 900 on subtask 1, split `s0` at offset
    /// 3, split `done` finished.
    fn manifest() -> EpochManifest {
        let offset = |split: &str, subtask: u32, next: u64, watermark: Option<i64>| {
            serde_json::json!({
                "operator": "events", "subtask": subtask, "split": split,
                "cursor": { "next_record": next, "max_event_time": watermark.map(|w| w + 1) },
                "watermark": watermark,
            })
        };
        serde_json::from_value(serde_json::json!({
            "formatVersion": 1, "namespace": "ns", "epoch": 4, "jobId": "job",
            "pipelineId": "job", "planFingerprint": "", "logicalFingerprint": "",
            "kind": { "type": "checkpoint" }, "attemptId": 1, "stateFormatVersion": 1,
            "stateShardCount": {}, "taskSnapshots": [],
            "sourceOffsets": [offset("s0", 0, 3, None), offset("late", 1, 7, Some(900))],
            "sourceEnumeratorSnapshots": [{
                "operator": "events",
                "discovered": ["s0", "late", "done"],
                "assigned": { "s0": 0, "late": 1 },
                "finished": ["done"],
                "discoveryCursor": null,
            }],
            "sinkTransactions": [], "createdAtMs": 0, "durableAtMs": 0, "checksum": "",
        }))
        .unwrap()
    }

    fn split(id: &str) -> SourceSplit {
        SourceSplit {
            id: id.into(),
            cursor: SplitCursor::default(),
            size_bytes: None,
            range: None,
        }
    }

    #[test]
    fn a_discovered_split_in_the_cut_resumes_at_its_cursor() {
        let plan = RestorePlan::new(manifest(), None);
        // The restore lists the discovered split again (after the enumerated ones).
        let listed = [split("s0"), split("done"), split("late"), split("newer")];
        let per_subtask = plan
            .splits_for(&OperatorId::new("events"), &listed, 2)
            .unwrap();
        let ids = |s: &[(SourceSplit, SplitResume)]| {
            s.iter()
                .map(|(split, _)| (split.id.clone(), split.cursor.next_record))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ids(&per_subtask[0]),
            [("s0".into(), 3), ("newer".into(), 0)]
        );
        assert_eq!(ids(&per_subtask[1]), [("late".to_owned(), 7)]);
        assert_eq!(
            per_subtask[1][0].1,
            SplitResume {
                max_event_time: Some(EventTimeMs(901)),
                emitted: Some(Watermark(EventTimeMs(900))),
            }
        );
    }

    #[test]
    fn a_discovered_split_the_restore_does_not_list_is_an_error() {
        let plan = RestorePlan::new(manifest(), None);
        let err = plan
            .splits_for(&OperatorId::new("events"), &[split("s0")], 2)
            .unwrap_err();
        assert!(err.to_string().contains("split `late`"), "{err}");
    }
}
