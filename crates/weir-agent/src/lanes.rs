//! The lanes an Agent runs, each a job of its own in this process.
//!
//! Lane `i` of a job with `count` lanes is the job's spec with id `<job>-lane-<i>` and
//! parallelism 1, whose sources read share `i` of the splits ([`weir::SplitShare`]). Its own job
//! id gives it its own checkpoint namespace (so it restores, and is fenced, on its own), its
//! own keyed state, and sink output of its own (part file names and Kafka transactional ids are
//! derived from the job id).

use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use weir::plan::StateBackendKind;
use weir::{CheckpointTrigger, Engine, JobSpec, RunOptions, RunningJob, SplitShare};
pub use weir_control::lane_job_id;
use weir_metrics::{JobHandle, JobSource};

/// One lane of one distributed job.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LaneId {
    /// The distributed job's id.
    pub job: String,
    /// The lane's index.
    pub lane: u32,
}

/// The spec lane `lane` of `job` runs: `spec` with the lane's job id and parallelism 1 on every
/// node (a lane is one subtask of each operator; lanes spread over Agents, not subtasks).
pub fn lane_spec(spec: &JobSpec, job: &str, lane: u32) -> JobSpec {
    let mut lane_spec = spec.clone();
    lane_spec.job = Some(lane_job_id(job, lane));
    lane_spec.parallelism = Some(1);
    for source in &mut lane_spec.sources {
        source.parallelism = None;
    }
    for operator in &mut lane_spec.operators {
        operator.parallelism = None;
    }
    for sink in &mut lane_spec.sinks {
        sink.parallelism = None;
    }
    lane_spec
}

/// How a lane ended by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaneEnd {
    /// Its sources ended and its final checkpoint was committed.
    Finished,
    /// It failed for good (after the restarts its spec allows), with the root cause.
    Failed(String),
}

struct Lane {
    generation: u64,
    running: RunningJob,
}

/// The live counters of one running lane, for a metrics exporter.
#[derive(Debug, Clone)]
pub struct LaneProbe {
    /// The lane.
    pub id: LaneId,
    /// The generation it runs in.
    pub generation: u64,
    /// The lane's own job id (`<job>-lane-<i>`, the exporter's `job` label), its live counters
    /// and its checkpoint counters, as the metrics exporter reads them.
    pub job: JobHandle,
}

/// The lanes running in an Agent, shared with whoever exports their metrics: [`Lanes`] adds a
/// lane when it starts it and removes it when it stops or ends.
#[derive(Debug, Clone, Default)]
pub struct LaneProbes(Arc<Mutex<BTreeMap<LaneId, LaneProbe>>>);

/// The exporter lists each running lane under its own job id.
impl JobSource for LaneProbes {
    fn jobs(&self) -> Vec<JobHandle> {
        self.lanes().into_iter().map(|l| l.job).collect()
    }
}

impl LaneProbes {
    /// The lanes running now, in lane id order.
    pub fn lanes(&self) -> Vec<LaneProbe> {
        self.lock().values().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<LaneId, LaneProbe>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The lanes running in this process.
pub struct Lanes {
    engine: Engine,
    running: BTreeMap<LaneId, Lane>,
    metrics: LaneProbes,
    /// The places lanes may touch (`None`: anywhere).
    allow: Option<weir::api::AllowList>,
    /// The keyed-state backends lanes may run on (what the Agent declared to the Hub).
    state_backends: Vec<StateBackendKind>,
}

impl std::fmt::Debug for Lanes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lanes")
            .field("running", &self.running.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Lanes {
    /// No lanes yet; lanes are prepared against `engine`'s registry.
    pub fn new(engine: Engine) -> Self {
        Self::with_metrics(engine, LaneProbes::default())
    }

    /// No lanes yet; the lanes it runs are listed in `metrics` while they run.
    pub fn with_metrics(engine: Engine, metrics: LaneProbes) -> Self {
        Lanes {
            engine,
            running: BTreeMap::new(),
            metrics,
            allow: None,
            state_backends: StateBackendKind::ALL.to_vec(),
        }
    }

    /// These lanes, refusing any whose job touches a place outside `allow` (checked before the
    /// lane reads or writes anything).
    #[must_use]
    pub fn with_allow_list(mut self, allow: Option<weir::api::AllowList>) -> Self {
        self.allow = allow;
        self
    }

    /// These lanes, refusing any whose job keeps its keyed state in a backend other than
    /// `backends` (default: every backend of this build). The Hub places lanes only on Agents
    /// that declare their job's backend; this catches a Hub that did not.
    #[must_use]
    pub fn with_state_backends(mut self, backends: Vec<StateBackendKind>) -> Self {
        self.state_backends = backends;
        self
    }

    /// Removes lane `id` from the running lanes and from the metrics.
    fn take(&mut self, id: &LaneId) -> Option<Lane> {
        self.metrics.lock().remove(id);
        self.running.remove(id)
    }

    /// Starts lane `lane` of the `count` lanes of `job` for `generation`: prepares the lane's
    /// spec (the same deep build as `weir validate`), restricts its sources to the lane's share
    /// of the splits and starts it with `options` (what to restore, where checkpoints go). A
    /// lane of the job already running here is killed first: the newer generation replaces it.
    ///
    /// # Errors
    /// [`Error::LaneOutOfRange`] when `lane >= count`; [`Error::Lane`] when the lane cannot be
    /// prepared or started (e.g. its checkpoint cannot be restored).
    pub async fn start(
        &mut self,
        job: &str,
        generation: u64,
        spec: &JobSpec,
        (lane, count): (u32, u32),
        options: RunOptions,
    ) -> Result<()> {
        let lane_error = |source| Error::Lane {
            job: job.to_owned(),
            lane,
            source,
        };
        if lane >= count {
            return Err(Error::LaneOutOfRange {
                job: job.to_owned(),
                lane,
                count,
            });
        }
        let backend = spec
            .state
            .as_ref()
            .map_or(StateBackendKind::Redb, |s| s.backend);
        if !self.state_backends.contains(&backend) {
            tracing::warn!(job, lane, %backend, "refused a lane of a state backend not offered");
            return Err(Error::StateBackendNotOffered {
                job: job.to_owned(),
                lane,
                backend,
            });
        }
        let id = LaneId {
            job: job.to_owned(),
            lane,
        };
        if let Some(old) = self.take(&id) {
            tracing::info!(
                job,
                lane,
                old = old.generation,
                new = generation,
                "replacing a lane of an older generation"
            );
            old.running.kill().await;
        }
        let share = SplitShare::new(lane, count).map_err(lane_error)?;
        let file = format!("{job} (lane {lane} of {count})");
        let spec = lane_spec(spec, job, lane);
        if let Some(allow) = &self.allow {
            // What the lane would touch, known without I/O, checked before it touches any (its
            // `${env:NAME}` references read, as this Agent allows).
            let checked = self
                .engine
                .check_offline(&spec, Some(&file))
                .await
                .map_err(lane_error)?;
            let touches = checked.touches(checked.plans.checkpoint.as_ref());
            if let Some(refused) = allow.first_refused(&touches) {
                tracing::warn!(job, lane, %refused, "refused a lane outside the allow-lists");
                return Err(Error::NotAllowed {
                    job: job.to_owned(),
                    lane,
                    touch: refused.to_string(),
                });
            }
        }
        let prepared = self
            .engine
            .prepare(&spec, Some(&file))
            .await
            .map_err(lane_error)?
            .with_split_share(share)
            .with_lane(weir::api::Lane {
                job: weir::api::JobId::new(job.to_owned()),
                index: lane,
                jobs: (0..count)
                    .map(|i| weir::api::JobId::new(lane_job_id(job, i)))
                    .collect(),
            });
        let running = self
            .engine
            .start_with(prepared, options)
            .await
            .map_err(lane_error)?;
        tracing::info!(job, lane, count, generation, "lane started");
        self.metrics.lock().insert(
            id.clone(),
            LaneProbe {
                id: id.clone(),
                generation,
                job: JobHandle {
                    job: lane_job_id(job, lane),
                    metrics: running.metrics().clone(),
                    checkpoints: running.checkpoint_probe(),
                },
            },
        );
        self.running.insert(
            id,
            Lane {
                generation,
                running,
            },
        );
        Ok(())
    }

    /// Kills lane `lane` of `job` as a crash would (what was not durable is recovered by the
    /// lane's next restore); returns whether it was running here.
    pub async fn stop(&mut self, job: &str, lane: u32) -> bool {
        let id = LaneId {
            job: job.to_owned(),
            lane,
        };
        match self.take(&id) {
            Some(l) => {
                l.running.kill().await;
                tracing::info!(job, lane, generation = l.generation, "lane stopped");
                true
            }
            None => false,
        }
    }

    /// Kills every lane (the Agent is shutting down).
    pub async fn stop_all(&mut self) {
        self.metrics.lock().clear();
        for (id, l) in std::mem::take(&mut self.running) {
            l.running.kill().await;
            tracing::info!(job = %id.job, lane = id.lane, "lane stopped");
        }
    }

    /// The lanes running here, with their generations.
    pub fn running(&self) -> Vec<(LaneId, u64)> {
        self.running
            .iter()
            .map(|(id, l)| (id.clone(), l.generation))
            .collect()
    }

    /// Lets a lane running here carry on under `generation` (a new placement that keeps it on
    /// this Agent); returns whether it runs here.
    pub fn adopt(&mut self, id: &LaneId, generation: u64) -> bool {
        match self.running.get_mut(id) {
            Some(l) => {
                l.generation = l.generation.max(generation);
                true
            }
            None => false,
        }
    }

    /// A handle that takes checkpoints and savepoints of lane `lane` of `job` from another task
    /// (a long checkpoint must not stop the Agent's heartbeats and polling).
    ///
    /// # Errors
    /// [`Error::NoSuchLane`] when the lane does not run here; [`Error::Lane`] when it takes no
    /// checkpoints.
    pub fn checkpoint_trigger(&self, job: &str, lane: u32) -> Result<CheckpointTrigger> {
        let id = LaneId {
            job: job.to_owned(),
            lane,
        };
        let l = self.running.get(&id).ok_or_else(|| Error::NoSuchLane {
            job: job.to_owned(),
            lane,
        })?;
        l.running
            .checkpoint_trigger()
            .map_err(|source| Error::Lane {
                job: job.to_owned(),
                lane,
                source,
            })
    }

    /// The lanes that ended by themselves since the last call, with their generations and how
    /// they ended; they no longer run here.
    pub async fn reap(&mut self) -> Vec<(LaneId, u64, LaneEnd)> {
        let ended: Vec<LaneId> = self
            .running
            .iter()
            .filter(|(_, l)| l.running.is_finished())
            .map(|(id, _)| id.clone())
            .collect();
        let mut out = Vec::with_capacity(ended.len());
        for id in ended {
            let Some(l) = self.take(&id) else {
                continue;
            };
            let end = match l.running.wait().await {
                Ok(_) => LaneEnd::Finished,
                Err(e) => LaneEnd::Failed(e.to_string()),
            };
            tracing::info!(job = %id.job, lane = id.lane, ?end, "lane ended");
            out.push((id, l.generation, end));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    const SPEC: &str = r#"
job: totals
parallelism: 3
checkpoint: { interval: 10, dir: "CHECKPOINT_DIR" }
sources:
  - name: events
    connector: file
    parallelism: 2
    schema:
      - { name: k, type: string, nullable: false }
      - { name: v, type: int64, nullable: false }
    options: { path: "IN", format: csv }
operators:
  - { name: big, type: filter, input: events, parallelism: 2, options: { predicate: "v >= 0" } }
sinks:
  - { name: out, connector: file, input: big, options: { path: "OUT", format: csv } }
"#;

    fn spec(dir: &std::path::Path) -> JobSpec {
        let yaml = SPEC
            .replace("CHECKPOINT_DIR", &dir.join("cp").display().to_string())
            .replace("IN", &dir.join("in-*.csv").display().to_string())
            .replace("OUT", &dir.join("out").display().to_string());
        JobSpec::from_yaml_str(&yaml, "totals.yaml").expect("spec parses")
    }

    #[test]
    fn a_lane_is_the_job_at_parallelism_one_under_its_own_id() {
        let dir = tempfile::tempdir().expect("tempdir");
        let lane = lane_spec(&spec(dir.path()), "totals", 2);
        assert_eq!(lane.job.as_deref(), Some("totals-lane-2"));
        assert_eq!(lane.parallelism, Some(1));
        assert!(lane.sources.iter().all(|s| s.parallelism.is_none()));
        assert!(lane.operators.iter().all(|o| o.parallelism.is_none()));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lane_of_a_state_backend_the_agent_does_not_offer_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("in-0.csv"), "k,v\na,1\n").expect("input");
        let mut spec = spec(dir.path());
        // A server nobody listens on: the lane is refused before it would connect.
        spec.state = Some(weir::plan::StateBackendSpec::redis("redis://127.0.0.1:1"));
        let mut lanes = Lanes::new(Engine::new()).with_state_backends(vec![StateBackendKind::Redb]);
        let err = lanes
            .start("totals", 1, &spec, (0, 1), RunOptions::default())
            .await
            .expect_err("redis is not offered");
        assert!(
            matches!(
                err,
                Error::StateBackendNotOffered {
                    backend: StateBackendKind::Redis,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("`redis` state backend"), "{err}");
        assert!(lanes.running().is_empty());
        assert!(!dir.path().join("out").exists(), "the refused lane wrote");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lane_outside_the_allow_lists_is_refused_before_it_touches_anything() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("in-0.csv"), "k,v\na,1\n").expect("input");
        let spec = spec(dir.path());
        let only = |paths: Vec<std::path::PathBuf>| {
            Some(weir::api::AllowList {
                paths,
                urls: vec![],
            })
        };
        let mut lanes = Lanes::new(Engine::new()).with_allow_list(only(vec!["/nowhere".into()]));
        let err = lanes
            .start("totals", 1, &spec, (0, 1), RunOptions::default())
            .await
            .expect_err("outside the allow-list");
        assert!(matches!(err, Error::NotAllowed { .. }), "{err}");
        // The directory the source lists is what it touches first.
        let listed = dir.path().display().to_string();
        assert!(err.to_string().contains(&format!("`{listed}`")), "{err}");
        assert!(!dir.path().join("out").exists(), "the refused lane wrote");
        // The input allowed, the output not: refused all the same.
        let mut lanes =
            Lanes::new(Engine::new()).with_allow_list(only(vec![dir.path().join("in-0.csv")]));
        let err = lanes
            .start("totals", 1, &spec, (0, 1), RunOptions::default())
            .await
            .expect_err("the output is outside");
        assert!(matches!(err, Error::NotAllowed { .. }), "{err}");
        // Everything under the directory allowed: the lane runs.
        let mut lanes = Lanes::new(Engine::new()).with_allow_list(only(vec![dir.path().into()]));
        lanes
            .start("totals", 1, &spec, (0, 1), RunOptions::default())
            .await
            .expect("an allowed lane starts");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn env_references_are_read_as_the_agent_allows_and_checked_by_the_allow_lists() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut spec = spec(dir.path());
        // Cargo sets this variable for every test process.
        let var = "CARGO_MANIFEST_DIR";
        let value = std::env::var(var).expect("cargo sets CARGO_MANIFEST_DIR");
        spec.sources[0].options["path"] = format!("${{env:{var}}}").into();
        // An Agent that allows no variable refuses the lane.
        let mut engine = Engine::new();
        engine.set_env_access(weir::api::secrets::EnvAccess::Only(vec![]));
        let mut lanes = Lanes::new(engine);
        let err = lanes
            .start("totals", 0, &spec, (0, 1), RunOptions::default())
            .await
            .expect_err("no variable allowed");
        let text = err.to_string();
        assert!(
            text.contains("sources[0].options.path") && text.contains("--allow-env"),
            "{text}"
        );
        // Allowed, the value is what the allow-lists check: the variable's directory, refused.
        let mut engine = Engine::new();
        engine.set_env_access(weir::api::secrets::EnvAccess::Only(vec!["CARGO_*".into()]));
        let mut lanes = Lanes::new(engine).with_allow_list(Some(weir::api::AllowList {
            paths: vec![dir.path().into()],
            urls: vec![],
        }));
        let err = lanes
            .start("totals", 0, &spec, (0, 1), RunOptions::default())
            .await
            .expect_err("the variable's directory is outside the allow-list");
        assert!(matches!(err, Error::NotAllowed { .. }), "{err}");
        assert!(err.to_string().contains(&value), "{err}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lanes_read_disjoint_shares_and_together_read_everything() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut want = Vec::new();
        for f in 0..8 {
            let mut text = String::from("k,v\n");
            for i in 0..20 {
                text.push_str(&format!("f{f},{i}\n"));
                want.push(format!("f{f},{i}"));
            }
            std::fs::write(dir.path().join(format!("in-{f}.csv")), text).expect("input");
        }
        let spec = spec(dir.path());
        let metrics = LaneProbes::default();
        let mut lanes = Lanes::with_metrics(Engine::new(), metrics.clone());
        let options = || RunOptions {
            checkpoint_storage: Some(
                weir::CheckpointLocation::local(&dir.path().join("cp")).expect("storage"),
            ),
            ..RunOptions::default()
        };
        let err = lanes
            .start("totals", 1, &spec, (3, 3), options())
            .await
            .expect_err("lane 3 of 3");
        assert!(matches!(err, Error::LaneOutOfRange { .. }), "{err}");
        for lane in 0..3 {
            lanes
                .start("totals", 1, &spec, (lane, 3), options())
                .await
                .expect("lane starts");
        }
        assert_eq!(lanes.running().len(), 3);
        // The metrics list each running lane under its own job id.
        let probes = metrics.lanes();
        let ids: Vec<&str> = probes.iter().map(|p| p.job.job.as_str()).collect();
        assert_eq!(ids, ["totals-lane-0", "totals-lane-1", "totals-lane-2"]);
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut ended = Vec::new();
        while ended.len() < 3 {
            assert!(Instant::now() < deadline, "lanes ended: {ended:?}");
            ended.extend(lanes.reap().await);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            ended
                .iter()
                .all(|(_, g, e)| *g == 1 && *e == LaneEnd::Finished),
            "{ended:?}"
        );
        assert!(lanes.running().is_empty());
        assert!(metrics.lanes().is_empty(), "ended lanes leave the metrics");
        let read: u64 = probes
            .iter()
            .map(|p| p.job.metrics.snapshot().source_rows())
            .sum();
        assert_eq!(
            read, 160,
            "the lanes' counters together count every row once"
        );
        let mut got = Vec::new();
        for entry in std::fs::read_dir(dir.path().join("out")).expect("out") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "csv") {
                let text = std::fs::read_to_string(&path).expect("part");
                got.extend(text.lines().skip(1).map(str::to_owned));
            }
        }
        got.sort();
        want.sort();
        assert_eq!(
            got, want,
            "every row once, from the three lanes' part files"
        );
    }
}
