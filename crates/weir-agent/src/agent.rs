//! The Agent's loop: registers with the Hub, keeps its lease by heartbeat (in a task of its
//! own, so that starting a lane or a long checkpoint never lets the lease lapse), polls the
//! commands the Hub has for it, carries them out on its [`Lanes`] and reports what happened,
//! in order, with the session's sequence numbers.

use crate::error::{Error, Result};
use crate::lanes::{LaneEnd, LaneId, LaneProbes, Lanes};
use crate::readings;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, watch};
use tracing::Instrument;
use weir::api::Epoch;
use weir::plan::StateBackendKind;
use weir::plan::evolution::EvolutionActions;
use weir::{Engine, JobSpec, RestoreFrom, RunOptions};
use weir_control::{
    AgentCapabilities, CHECKPOINT_PROTOCOL, Command, CommandAction, CommandOutcome, ControlError,
    HubClient, LaneReading, LaneState, MetricsPush, RUNTIME_VERSION, RegisterAgent, Registration,
    ReportBatch, ReportItem, Restore, StateActions,
};

/// How an Agent runs.
#[derive(Clone)]
pub struct AgentConfig {
    /// The Hub's base URL (`http://127.0.0.1:7800`).
    pub hub: String,
    /// The Agent's stable id: the same across restarts of its process.
    pub agent_id: String,
    /// How many lanes it runs at most.
    pub slots: u32,
    /// How often it asks the Hub for commands.
    pub poll_interval: Duration,
    /// The Hub's join token, presented at registration.
    pub join_token: String,
    /// The Agent's own secret, kept across its restarts: the Hub binds the Agent id to it.
    pub credential: String,
    /// A PEM CA certificate to verify a Hub served over TLS with, and the path it was read
    /// from (besides the system's roots).
    pub ca_certificate: Option<(Vec<u8>, String)>,
    /// The places its lanes may touch (`None`: anywhere); sent to the Hub, which checks jobs
    /// against it at validation, and checked again before each lane starts.
    pub allow: Option<weir::api::AllowList>,
    /// The keyed-state backends it offers (`--state-backends`): sent to the Hub, which places
    /// only jobs of these backends on it, and checked again before each lane starts. redb is
    /// offered whether listed or not.
    pub state_backends: Vec<StateBackendKind>,
}

impl AgentConfig {
    /// The keyed-state backends it offers: [`AgentConfig::state_backends`] with redb, each
    /// once, in [`StateBackendKind::ALL`] order.
    pub fn offered_state_backends(&self) -> Vec<StateBackendKind> {
        StateBackendKind::ALL
            .into_iter()
            .filter(|k| *k == StateBackendKind::Redb || self.state_backends.contains(k))
            .collect()
    }
}

impl std::fmt::Debug for AgentConfig {
    /// Never prints the join token or the credential.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig")
            .field("hub", &self.hub)
            .field("agent_id", &self.agent_id)
            .field("slots", &self.slots)
            .field("state_backends", &self.state_backends)
            .field("poll_interval", &self.poll_interval)
            .field(
                "ca_certificate",
                &self.ca_certificate.as_ref().map(|c| &c.1),
            )
            .finish_non_exhaustive()
    }
}

/// A registration with the Hub: the session every request carries.
struct Session {
    registration: Registration,
    /// The `seq` of the next report.
    next_seq: u64,
}

/// The outcome of a job-level checkpoint command, from the task that took the lanes' epochs.
struct CheckpointDone {
    command: Command,
    checkpoint_id: String,
    results: Vec<(u32, std::result::Result<Epoch, String>)>,
}

/// The process's boot identity: a new one every time the process starts, so that the Hub
/// tells a restart (its lanes are gone) from a reconnect (they still run).
fn boot_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}-{nanos:x}", std::process::id())
}

/// Runs the Agent until `shutdown` turns true, then stops its lanes.
///
/// # Errors
/// [`Error::Hub`] when the Hub refuses the registration itself (bad id, incompatible
/// capabilities); a Hub that cannot be reached is retried for ever.
pub async fn run_agent(
    config: AgentConfig,
    engine: Engine,
    shutdown: watch::Receiver<bool>,
) -> Result<()> {
    run_agent_with_metrics(config, engine, shutdown, LaneProbes::default()).await
}

/// [`run_agent`], listing the lanes it runs in `metrics` while they run (for a metrics
/// exporter).
///
/// # Errors
/// As [`run_agent`].
pub async fn run_agent_with_metrics(
    config: AgentConfig,
    engine: Engine,
    mut shutdown: watch::Receiver<bool>,
    metrics: LaneProbes,
) -> Result<()> {
    let mut client = HubClient::new(&config.hub).map_err(Error::Hub)?;
    if let Some((pem, path)) = &config.ca_certificate {
        client = client.with_ca_certificate(pem, path).map_err(Error::Hub)?;
    }
    let state_backends = config.offered_state_backends();
    let register = RegisterAgent {
        agent_id: config.agent_id.clone(),
        boot_id: boot_id(),
        credential: config.credential.clone(),
        capabilities: AgentCapabilities {
            runtime_version: RUNTIME_VERSION.to_owned(),
            state_backends: state_backends.iter().map(|k| k.name().to_owned()).collect(),
            checkpoint_protocol: CHECKPOINT_PROTOCOL,
            slots: config.slots,
            allow: config.allow.as_ref().map(|a| weir_control::AllowedPlaces {
                paths: a.paths.iter().map(|p| p.display().to_string()).collect(),
                urls: a.urls.clone(),
            }),
        },
    };
    let mut lanes = Lanes::with_metrics(engine, metrics.clone())
        .with_allow_list(config.allow.clone())
        .with_state_backends(state_backends.clone());
    let mut agent = Agent {
        probes: metrics,
        client,
        config,
        register,
        pending: Vec::new(),
        handled: BTreeMap::new(),
        in_flight: HashSet::new(),
        checkpoints: mpsc::unbounded_channel(),
    };
    tracing::info!(
        agent = %agent.config.agent_id,
        hub = %agent.config.hub,
        slots = agent.config.slots,
        state_backends = ?state_backends.iter().map(|k| k.name()).collect::<Vec<_>>(),
        "Agent started"
    );
    let result = agent.run(&mut lanes, &mut shutdown).await;
    lanes.stop_all().await;
    tracing::info!(agent = %agent.config.agent_id, "Agent stopped");
    result
}

/// How often the Agent pushes its lanes' readings to the Hub.
const METRICS_PUSH_INTERVAL: Duration = Duration::from_secs(1);

/// The background tasks of one session; aborted when the session ends.
struct SessionTasks {
    heartbeat: tokio::task::JoinHandle<()>,
    metrics: tokio::task::JoinHandle<()>,
}

impl SessionTasks {
    fn abort(&self) {
        self.heartbeat.abort();
        self.metrics.abort();
    }
}

struct Agent {
    /// The running lanes' counters, pushed to the Hub every second for the workbench.
    probes: LaneProbes,
    client: HubClient,
    config: AgentConfig,
    register: RegisterAgent,
    /// Report items not yet accepted by the Hub, in order.
    pending: Vec<ReportItem>,
    /// Commands carried out whose result the Hub has not accepted yet: a command it delivers
    /// again meanwhile is acknowledged again, not carried out twice. Emptied as reports are
    /// accepted (the Hub never delivers an acknowledged command again).
    handled: BTreeMap<String, ReportItem>,
    /// Checkpoint commands whose lanes' epochs are still being taken: the Hub delivers them
    /// again until they are acknowledged, and they must not start a second time.
    in_flight: HashSet<String>,
    checkpoints: (
        mpsc::UnboundedSender<CheckpointDone>,
        mpsc::UnboundedReceiver<CheckpointDone>,
    ),
}

impl Agent {
    async fn run(&mut self, lanes: &mut Lanes, shutdown: &mut watch::Receiver<bool>) -> Result<()> {
        let Some(mut s) = self.connect(shutdown).await? else {
            return Ok(());
        };
        let (lost_tx, mut lost_rx) = mpsc::unbounded_channel();
        let mut tasks = self.spawn_session_tasks(&s, lost_tx.clone());
        let mut ticker = tokio::time::interval(self.config.poll_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.changed() => {
                    if *shutdown.borrow() {
                        tasks.abort();
                        return Ok(());
                    }
                }
                Some(()) = lost_rx.recv() => {
                    // The Hub no longer knows the session: it expired the lease and placed
                    // this Agent's lanes elsewhere, so they stop here (their sinks are fenced
                    // anyway). Register again; reports start at 0 in the new session, and
                    // what was not reported is about lanes of old generations.
                    tracing::warn!(
                        agent = %self.config.agent_id,
                        "lost the lease: the Hub no longer knows this session; stopping the \
                         lanes and registering again"
                    );
                    tasks.abort();
                    lanes.stop_all().await;
                    self.pending.clear();
                    let Some(new) = self.connect(shutdown).await? else { return Ok(()) };
                    s = new;
                    tasks = self.spawn_session_tasks(&s, lost_tx.clone());
                }
                Some(done) = self.checkpoints.1.recv() => self.checkpoint_done(done),
                _ = ticker.tick() => {
                    if let Err(e) = self.poll(lanes, &s).await {
                        if is_stale(&e) {
                            let _ = lost_tx.send(());
                        } else {
                            tracing::warn!(error = %e, "polling the Hub failed; trying again");
                        }
                    }
                    for (id, generation, end) in lanes.reap().await {
                        self.pending.push(lane_end(&id, generation, end));
                    }
                    if let Err(e) = self.flush(&mut s).await {
                        if is_stale(&e) {
                            let _ = lost_tx.send(());
                        } else {
                            tracing::warn!(error = %e, "reporting to the Hub failed; trying again");
                        }
                    }
                }
            }
        }
    }

    /// Registers (again), retrying until the Hub answers; `None` when shut down meanwhile.
    async fn connect(&self, shutdown: &mut watch::Receiver<bool>) -> Result<Option<Session>> {
        let mut delay = Duration::from_millis(100);
        loop {
            match self
                .client
                .register(&self.config.join_token, &self.register)
                .await
            {
                Ok(registration) => {
                    tracing::info!(agent = %self.register.agent_id, session = %registration.session_id, "registered with the Hub");
                    return Ok(Some(Session {
                        registration,
                        next_seq: 0,
                    }));
                }
                Err(e @ ControlError::Api { .. }) if e.status().is_some_and(|s| s < 500) => {
                    return Err(Error::Hub(e));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the Hub cannot be reached; registering again");
                }
            }
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                _ = shutdown.changed() => if *shutdown.borrow() { return Ok(None) },
            }
            delay = (delay * 2).min(Duration::from_secs(2));
        }
    }

    /// The tasks of a session: the heartbeat and the metrics push.
    fn spawn_session_tasks(&self, s: &Session, lost: mpsc::UnboundedSender<()>) -> SessionTasks {
        SessionTasks {
            heartbeat: self.spawn_heartbeat(s, lost),
            metrics: self.spawn_metrics_push(s),
        }
    }

    /// Pushes the running lanes' readings to the Hub every second (for the workbench; a failed
    /// push is only logged: the next one carries newer counters, and a refused session is the
    /// heartbeat's to notice). A lane's epoch history goes with a push only when it changed
    /// since the last push the Hub accepted.
    fn spawn_metrics_push(&self, s: &Session) -> tokio::task::JoinHandle<()> {
        let client = self.client.clone();
        let agent = self.register.agent_id.clone();
        let token = s.registration.session_token.clone();
        let probes = self.probes.clone();
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(METRICS_PUSH_INTERVAL);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // Per lane run (job, lane, generation): the epochs the Hub has.
            let mut sent: HashMap<(String, u32, u64), readings::EpochsMark> = HashMap::new();
            loop {
                ticker.tick().await;
                let mut marks = HashMap::new();
                let lanes: Vec<LaneReading> = probes
                    .lanes()
                    .iter()
                    .map(|probe| {
                        let key = (probe.id.job.clone(), probe.id.lane, probe.generation);
                        let (mark, epochs) =
                            readings::epochs_since(&probe.job.checkpoints, sent.get(&key));
                        marks.insert(key, mark);
                        LaneReading {
                            job_id: probe.id.job.clone(),
                            lane: probe.id.lane,
                            generation: probe.generation,
                            sample: readings::sample(&probe.job.metrics),
                            checkpoints: readings::checkpoint_summary(&probe.job.checkpoints),
                            epochs,
                        }
                    })
                    .collect();
                if lanes.is_empty() {
                    continue;
                }
                match client
                    .push_metrics(&agent, &token, &MetricsPush { lanes })
                    .await
                {
                    Ok(_) => sent = marks,
                    Err(e) => tracing::debug!(error = %e, "pushing the lanes' metrics failed"),
                }
            }
        })
    }

    /// Renews the lease every `heartbeatIntervalMs`; tells `lost` when the Hub refuses the
    /// session.
    fn spawn_heartbeat(
        &self,
        s: &Session,
        lost: mpsc::UnboundedSender<()>,
    ) -> tokio::task::JoinHandle<()> {
        let client = self.client.clone();
        let agent = self.register.agent_id.clone();
        let token = s.registration.session_token.clone();
        let every = Duration::from_millis(s.registration.heartbeat_interval_ms.max(10));
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(every);
            loop {
                ticker.tick().await;
                match client.heartbeat(&agent, &token).await {
                    Ok(_) => {}
                    Err(e) if is_stale(&e) => {
                        tracing::warn!(error = %e, "the Hub refused the session's heartbeat");
                        let _ = lost.send(());
                        return;
                    }
                    Err(e) => tracing::warn!(error = %e, "heartbeat failed; trying again"),
                }
            }
        })
    }

    /// Fetches the commands and carries them out in order.
    async fn poll(&mut self, lanes: &mut Lanes, s: &Session) -> weir_control::Result<()> {
        let commands = self
            .client
            .commands(&self.register.agent_id, &s.registration.session_token)
            .await?;
        for command in commands {
            if let Some(result) = self.handled.get(&command.command_id) {
                self.pending.push(result.clone());
                continue;
            }
            if self.in_flight.contains(&command.command_id) {
                continue;
            }
            self.carry_out(lanes, command).await;
        }
        Ok(())
    }

    /// Carries out `command` in a span with its correlation ids (command, job, version,
    /// generation), so that everything a `RUST_LOG` run prints about it is tied to it.
    async fn carry_out(&mut self, lanes: &mut Lanes, command: Command) {
        let span = tracing::info_span!(
            "command",
            command = %command.command_id,
            job = %command.job_id,
            version = %command.version_id,
            generation = command.generation,
            action = action_name(&command.action),
        );
        self.carry_out_in_span(lanes, command)
            .instrument(span)
            .await;
    }

    async fn carry_out_in_span(&mut self, lanes: &mut Lanes, command: Command) {
        let job = command.job_id.clone();
        let generation = command.generation;
        tracing::info!("carrying out a command");
        let outcome = match &command.action {
            CommandAction::Run {
                lanes: wanted,
                lane_count,
                spec,
                restore,
                actions,
            } => {
                self.run_lanes(
                    lanes,
                    &command,
                    (wanted, *lane_count),
                    spec,
                    (restore, actions),
                )
                .await
            }
            CommandAction::Stop { lanes: stop } => {
                for &lane in stop {
                    lanes.stop(&job, lane).await;
                    self.pending.push(ReportItem::LaneStatus {
                        job_id: job.clone(),
                        generation,
                        lane,
                        state: LaneState::Stopped,
                        cause: None,
                    });
                }
                CommandOutcome::Ok
            }
            CommandAction::Checkpoint {
                checkpoint_id,
                savepoint,
            } => {
                self.start_checkpoint(lanes, &command, checkpoint_id, savepoint.as_deref());
                // Acknowledged when every lane's epoch is in (`checkpoint_done`).
                return;
            }
        };
        self.acknowledge(&command, outcome);
    }

    /// Starts the `wanted` lanes (of `lane_count`) of a `run` command, restoring as `restore`
    /// says with its state actions; lanes of the job running here in an older generation that
    /// the command does not name are stopped (they were placed elsewhere), the ones it names
    /// keep running under the new generation.
    async fn run_lanes(
        &mut self,
        lanes: &mut Lanes,
        command: &Command,
        (wanted, lane_count): (&[u32], u32),
        spec: &serde_json::Value,
        (restore, actions): (&Restore, &StateActions),
    ) -> CommandOutcome {
        let job = &command.job_id;
        let generation = command.generation;
        let spec: JobSpec = match serde_json::from_value(spec.clone()) {
            Ok(spec) => spec,
            Err(e) => {
                return CommandOutcome::Failed {
                    cause: format!("the command's job spec does not parse: {e}"),
                };
            }
        };
        let wanted_set: HashSet<u32> = wanted.iter().copied().collect();
        for (id, running_generation) in lanes.running() {
            if id.job == *job && running_generation < generation && !wanted_set.contains(&id.lane) {
                lanes.stop(job, id.lane).await;
            }
        }
        let mut failures = Vec::new();
        for &lane in wanted {
            let id = LaneId {
                job: job.clone(),
                lane,
            };
            if lanes.adopt(&id, generation) {
                // Already running here: it carries on under the new generation.
                self.pending
                    .push(status(job, generation, lane, LaneState::Running, None));
                continue;
            }
            let options = RunOptions {
                state: None,
                restore: match restore {
                    Restore::None => None,
                    Restore::Latest => Some(RestoreFrom::Latest),
                    Restore::LaneEpochs(epochs) => {
                        epochs.get(&lane).map(|e| RestoreFrom::Epoch(Epoch(*e)))
                    }
                },
                evolution: EvolutionActions::from_names(
                    actions.allow_new_state,
                    &actions.drop_state,
                    &actions.map_operator,
                ),
                ..RunOptions::default()
            };
            match lanes
                .start(job, generation, &spec, (lane, lane_count), options)
                .await
            {
                Ok(()) => {
                    self.pending
                        .push(status(job, generation, lane, LaneState::Running, None));
                }
                Err(e) => {
                    let cause = e.to_string();
                    tracing::warn!(job, lane, error = %cause, "a lane did not start");
                    self.pending.push(status(
                        job,
                        generation,
                        lane,
                        LaneState::Failed,
                        Some(cause.clone()),
                    ));
                    failures.push(cause);
                }
            }
        }
        if failures.is_empty() {
            CommandOutcome::Ok
        } else {
            CommandOutcome::Failed {
                cause: failures.join("; "),
            }
        }
    }

    /// Takes the epochs of a job-level checkpoint in a task of its own: a lane's checkpoint
    /// may take long, and the loop must keep polling and reporting meanwhile.
    fn start_checkpoint(
        &mut self,
        lanes: &Lanes,
        command: &Command,
        checkpoint_id: &str,
        savepoint: Option<&str>,
    ) {
        let mut triggers = Vec::new();
        for (id, generation) in lanes.running() {
            if id.job == command.job_id && generation == command.generation {
                triggers.push((id.lane, lanes.checkpoint_trigger(&id.job, id.lane)));
            }
        }
        self.in_flight.insert(command.command_id.clone());
        let done = self.checkpoints.0.clone();
        let command = command.clone();
        let checkpoint_id = checkpoint_id.to_owned();
        let savepoint = savepoint.map(str::to_owned);
        let work = async move {
            let epochs = triggers.into_iter().map(|(lane, trigger)| {
                let savepoint = savepoint.clone();
                async move {
                    let epoch = match trigger {
                        Ok(t) => match &savepoint {
                            Some(name) => t.savepoint(name).await,
                            None => t.checkpoint().await,
                        }
                        .map_err(|e| e.to_string()),
                        Err(e) => Err(e.to_string()),
                    };
                    (lane, epoch)
                }
            });
            let results = futures::future::join_all(epochs).await;
            let _ = done.send(CheckpointDone {
                command,
                checkpoint_id,
                results,
            });
        };
        // In the command's span: the lanes' epochs are part of the command's story.
        tokio::spawn(work.in_current_span());
    }

    fn checkpoint_done(&mut self, done: CheckpointDone) {
        self.in_flight.remove(&done.command.command_id);
        let mut failures = Vec::new();
        for (lane, result) in done.results {
            match result {
                Ok(epoch) => self.pending.push(ReportItem::LaneCheckpoint {
                    job_id: done.command.job_id.clone(),
                    generation: done.command.generation,
                    checkpoint_id: done.checkpoint_id.clone(),
                    lane,
                    epoch: epoch.0,
                }),
                Err(e) => failures.push(format!("lane {lane}: {e}")),
            }
        }
        let outcome = if failures.is_empty() {
            CommandOutcome::Ok
        } else {
            CommandOutcome::Failed {
                cause: failures.join("; "),
            }
        };
        self.acknowledge(&done.command, outcome);
    }

    /// Reports `command`'s outcome (and remembers it, should the command come again).
    fn acknowledge(&mut self, command: &Command, outcome: CommandOutcome) {
        let item = ReportItem::CommandResult {
            command_id: command.command_id.clone(),
            job_id: command.job_id.clone(),
            version_id: command.version_id.clone(),
            generation: command.generation,
            outcome,
        };
        self.handled
            .insert(command.command_id.clone(), item.clone());
        self.pending.push(item);
    }

    /// Sends the pending report items as the session's next report.
    async fn flush(&mut self, s: &mut Session) -> weir_control::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let batch = ReportBatch {
            session_id: s.registration.session_id.clone(),
            seq: s.next_seq,
            reports: self.pending.clone(),
        };
        let ack = self
            .client
            .report(
                &self.register.agent_id,
                &s.registration.session_token,
                &batch,
            )
            .await?;
        if ack.refused > 0 {
            tracing::info!(
                refused = ack.refused,
                "the Hub refused report items of an older generation"
            );
        }
        s.next_seq += 1;
        // An acknowledged command is not delivered again: its remembered result can go.
        for item in self.pending.drain(..) {
            if let ReportItem::CommandResult { command_id, .. } = item {
                self.handled.remove(&command_id);
            }
        }
        Ok(())
    }
}

/// The name of a command's action, for logs.
fn action_name(action: &CommandAction) -> &'static str {
    match action {
        CommandAction::Run { .. } => "run",
        CommandAction::Stop { .. } => "stop",
        CommandAction::Checkpoint { .. } => "checkpoint",
    }
}

/// A lane's status item.
fn status(
    job: &str,
    generation: u64,
    lane: u32,
    state: LaneState,
    cause: Option<String>,
) -> ReportItem {
    ReportItem::LaneStatus {
        job_id: job.to_owned(),
        generation,
        lane,
        state,
        cause,
    }
}

/// The status item of a lane that ended by itself.
fn lane_end(id: &LaneId, generation: u64, end: LaneEnd) -> ReportItem {
    match end {
        LaneEnd::Finished => status(&id.job, generation, id.lane, LaneState::Finished, None),
        LaneEnd::Failed(cause) => {
            status(&id.job, generation, id.lane, LaneState::Failed, Some(cause))
        }
    }
}

/// Whether the Hub refused the request's session: it expired or was replaced (409), or the
/// Hub no longer knows the Agent or its token (404, 401). The Agent registers again.
fn is_stale(e: &ControlError) -> bool {
    matches!(e.status(), Some(401 | 404 | 409))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(state_backends: Vec<StateBackendKind>) -> AgentConfig {
        AgentConfig {
            hub: "http://127.0.0.1:7800".into(),
            agent_id: "a".into(),
            slots: 1,
            poll_interval: Duration::from_millis(200),
            join_token: "token".into(),
            credential: "credential".into(),
            ca_certificate: None,
            allow: None,
            state_backends,
        }
    }

    #[test]
    fn redb_is_always_offered_and_redis_only_when_listed() {
        use StateBackendKind::{Redb, Redis};
        assert_eq!(config(vec![]).offered_state_backends(), [Redb]);
        assert_eq!(config(vec![Redb]).offered_state_backends(), [Redb]);
        assert_eq!(config(vec![Redis]).offered_state_backends(), [Redb, Redis]);
        assert_eq!(
            config(vec![Redis, Redb, Redis]).offered_state_backends(),
            [Redb, Redis]
        );
    }
}
