//! Validation of a job as a distributed job: the deep build of `weir validate` without any I/O
//! (options, declared schemas and formats, every operator, keys, semantics; no file, store or
//! broker is touched, so a request cannot make the Hub read its files or reach another
//! machine), the distributed checks, and the registered Agents' capabilities.

use weir::plan::{CheckpointSpec, Plan, StateBackendKind};
use weir::{Engine, JobSpec};
use weir_control::{
    AgentCapabilities, CHECKPOINT_PROTOCOL, RUNTIME_VERSION, STATE_BACKEND_REDB, ValidateResult,
    ValidationError,
};

/// A job version compiled and prepared, ready to store.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The compiled spec, its job id set to the job's.
    pub spec: JobSpec,
    /// Every plan, as `weir plan` prints them.
    pub plans_json: serde_json::Value,
    /// Fingerprint of the partitioned plan.
    pub plan_fingerprint: String,
    /// Fingerprint of the job's logic (options, keys, edges; not parallelism): a lane restores
    /// a checkpoint only into the same logic.
    pub logical_fingerprint: String,
    /// Lanes: the spec's default parallelism.
    pub lanes: u32,
    /// The checkpoint section (a distributed job has one).
    pub checkpoint: CheckpointSpec,
    /// Every place the job touches (sources, sinks, checkpoints), for the Agents' allow-lists.
    pub touches: Vec<weir::api::Touch>,
    /// What may not work as the user expects, though the job is valid.
    pub warnings: Vec<String>,
    /// Every operator's profile: what an upgrade from or to this version compares.
    pub profiles: Vec<weir::plan::evolution::OperatorProfile>,
    /// Whether the job is strictly exactly-once (a sink's delivery may not change then).
    pub strict: bool,
}

/// Warnings about where a distributed job's checkpoints go: lanes move between Agents and the
/// Hub writes the job manifests, so every one of them must reach the same storage.
fn checkpoint_warnings(checkpoint: &CheckpointSpec) -> Vec<String> {
    match checkpoint.dir.as_deref() {
        None => vec![
            "no `checkpoint.dir`: each Agent checkpoints into its own working directory, so a \
             lane that moves to another Agent starts without its state and the Hub cannot \
             publish job manifests; set it to storage every Agent and the Hub reach (SET \
             'checkpoint.dir' = 's3://bucket/checkpoints')"
                .to_owned(),
        ],
        Some(dir) if !dir.contains("://") || dir.starts_with("file://") => vec![format!(
            "`checkpoint.dir` `{dir}` is a local path: every Agent and the Hub must see the same \
             directory there (a shared mount), or lanes that move lose their state; an object \
             store (s3://...) is shared by construction"
        )],
        Some(_) => Vec::new(),
    }
}

/// Where a job's text comes from.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// A SQL script.
    Sql(&'a str),
    /// A job spec as JSON.
    Spec(&'a serde_json::Value),
}

impl Source<'_> {
    /// The request field that holds the source, to name in errors.
    pub fn field(&self) -> &'static str {
        match self {
            Source::Sql(_) => "sql",
            Source::Spec(_) => "spec",
        }
    }
}

fn plan_error(e: &weir::plan::Error) -> ValidationError {
    let mut v = ValidationError {
        message: e.to_string(),
        path: None,
        line: None,
        column: None,
    };
    match e {
        weir::plan::Error::Syntax { line, column, .. } => {
            v.line = Some(*line as u64);
            v.column = Some(*column as u64);
        }
        weir::plan::Error::Spec { path, .. } => v.path = Some(path.clone()),
        _ => {}
    }
    v
}

fn runtime_error(e: &weir::Error) -> ValidationError {
    match e {
        weir::Error::Plan(p) => plan_error(p),
        weir::Error::UnknownType { path, .. } | weir::Error::Prepare { path, .. } => {
            ValidationError {
                message: e.to_string(),
                path: Some(path.clone()),
                line: None,
                column: None,
            }
        }
        _ => ValidationError {
            message: e.to_string(),
            path: None,
            line: None,
            column: None,
        },
    }
}

/// [`runtime_error`] of a job compiled from SQL: the message names the script's line, column
/// and words ([`weir::locate_sql_error`]), and so do `line` and `column`; `path` stays the
/// compiled spec's JSON path.
fn sql_runtime_error(e: weir::Error, positions: &weir::sql::SpecPositions) -> ValidationError {
    let path = weir::prepare_error_path(&e).map(str::to_owned);
    let at = path
        .as_deref()
        .and_then(|p| positions.locate(p))
        .map(|o| o.position);
    let mut v = runtime_error(&weir::locate_sql_error(e, positions));
    if let Some(at) = at {
        v.path = path;
        v.line = Some(at.line);
        v.column = Some(at.column);
    }
    v
}

fn sql_error(e: &weir::sql::SqlError) -> ValidationError {
    let position = match e {
        weir::sql::SqlError::Syntax { position, .. }
        | weir::sql::SqlError::Unsupported { position, .. }
        | weir::sql::SqlError::Invalid { position, .. } => Some(*position),
        _ => None,
    };
    ValidationError {
        message: e.to_string(),
        path: None,
        line: position.map(|p| p.line),
        column: position.map(|p| p.column),
    }
}

fn error_at(path: &str, message: String) -> ValidationError {
    ValidationError {
        message,
        path: Some(path.to_owned()),
        line: None,
        column: None,
    }
}

/// Compiles and prepares `source` as job `name`, then applies the distributed checks.
///
/// # Errors
/// Every problem found, located as the engine locates it.
pub async fn compile(
    engine: &Engine,
    name: &str,
    source: Source<'_>,
) -> Result<Compiled, Vec<ValidationError>> {
    let (mut spec, file, positions) = match source {
        Source::Sql(text) => {
            let file = format!("{name}.sql");
            let job = engine
                .compile_sql(text, &file)
                .await
                .map_err(|e| vec![sql_error(&e)])?;
            if job.explain {
                return Err(vec![ValidationError {
                    message: format!(
                        "{file}: the script asks to EXPLAIN; a job the Hub runs must INSERT"
                    ),
                    path: None,
                    line: None,
                    column: None,
                }]);
            }
            (job.spec, file, job.positions)
        }
        Source::Spec(value) => {
            let file = format!("{name}.json");
            let text = serde_json::to_string(value).map_err(|e| {
                vec![ValidationError {
                    message: e.to_string(),
                    path: None,
                    line: None,
                    column: None,
                }]
            })?;
            let spec = JobSpec::from_json_str(&text, &file).map_err(|e| vec![plan_error(&e)])?;
            (spec, file, Default::default())
        }
    };
    spec.job = Some(name.to_owned());
    // Checked, not run: the Hub touches none of the job's files, stores or brokers on behalf
    // of a request (the Agents prepare it fully when its lanes start).
    let prepared = engine
        .check_offline(&spec, Some(&file))
        .await
        .map_err(|e| vec![sql_runtime_error(e, &positions)])?;
    let mut errors = Vec::new();
    let checkpoint = match &spec.checkpoint {
        Some(c) => Some(c.clone()),
        None => {
            errors.push(error_at(
                "checkpoint",
                format!(
                    "{file}: a distributed job needs a `checkpoint` section: its lanes restart \
                     from their checkpoints when they move, and the Hub writes the job \
                     manifests into `checkpoint.dir` (SQL: SET 'checkpoint.interval' = '1s')"
                ),
            ));
            None
        }
    };
    let lanes = spec.parallelism.unwrap_or(1);
    let plans_json = serde_json::from_str(&prepared.plans.to_json_pretty()).map_err(|e| {
        vec![ValidationError {
            message: format!("the plans do not serialize: {e}"),
            path: None,
            line: None,
            column: None,
        }]
    })?;
    match checkpoint {
        Some(checkpoint) if errors.is_empty() => Ok(Compiled {
            touches: prepared.touches(Some(&checkpoint)),
            warnings: checkpoint_warnings(&checkpoint),
            plan_fingerprint: prepared.plans.partitioned.fingerprint(),
            logical_fingerprint: prepared.plans.partitioned.logical_fingerprint(),
            profiles: prepared.profiles(),
            strict: prepared.semantic_mode == weir::api::SemanticMode::StrictExactlyOnce,
            spec,
            plans_json,
            lanes,
            checkpoint,
        }),
        _ => Err(errors),
    }
}

/// Why an Agent with `capabilities` cannot run this Hub's jobs (empty: it can).
pub fn incompatibilities(capabilities: &AgentCapabilities) -> Vec<String> {
    let mut out = Vec::new();
    if capabilities.runtime_version != RUNTIME_VERSION {
        out.push(format!(
            "runtime version {} is not the Hub's {RUNTIME_VERSION}",
            capabilities.runtime_version
        ));
    }
    if !capabilities
        .state_backends
        .iter()
        .any(|b| b == STATE_BACKEND_REDB)
    {
        out.push(format!(
            "it offers no `{STATE_BACKEND_REDB}` state backend (offers: {})",
            capabilities.state_backends.join(", ")
        ));
    }
    if capabilities.checkpoint_protocol != CHECKPOINT_PROTOCOL {
        out.push(format!(
            "checkpoint protocol {} is not the Hub's {CHECKPOINT_PROTOCOL}",
            capabilities.checkpoint_protocol
        ));
    }
    if capabilities.slots == 0 {
        out.push("it has no slot".into());
    }
    out
}

/// The keyed-state backend `spec`'s lanes run on: its `state.backend` (absent: redb).
pub fn state_backend_of(spec: &JobSpec) -> StateBackendKind {
    spec.state
        .as_ref()
        .map_or(StateBackendKind::Redb, |s| s.backend)
}

/// Whether an Agent with `capabilities` offers the keyed-state `backend` (names compared as
/// job specs read them, case-insensitively).
pub fn offers_state_backend(capabilities: &AgentCapabilities, backend: StateBackendKind) -> bool {
    capabilities
        .state_backends
        .iter()
        .any(|b| StateBackendKind::parse(b) == Some(backend))
}

/// `touches` as the store keeps them: local paths and URLs apart.
pub fn places_of(touches: &[weir::api::Touch]) -> weir_control::AllowedPlaces {
    let mut places = weir_control::AllowedPlaces::default();
    for touch in touches {
        match touch {
            weir::api::Touch::Path(p) => places.paths.push(p.display().to_string()),
            weir::api::Touch::Url(u) => places.urls.push(u.clone()),
        }
    }
    places
}

/// What [`places_of`] made, as touches again.
pub fn touches_of(places: &weir_control::AllowedPlaces) -> Vec<weir::api::Touch> {
    places
        .paths
        .iter()
        .map(|p| weir::api::Touch::Path(p.into()))
        .chain(places.urls.iter().map(|u| weir::api::Touch::Url(u.clone())))
        .collect()
}

/// The first of `touches` outside the allow-lists of an Agent with `capabilities`.
pub fn refused_touch<'a>(
    capabilities: &AgentCapabilities,
    touches: &'a [weir::api::Touch],
) -> Option<&'a weir::api::Touch> {
    let allow = capabilities.allow.as_ref()?;
    weir::api::AllowList {
        paths: allow.paths.iter().map(std::path::PathBuf::from).collect(),
        urls: allow.urls.clone(),
    }
    .first_refused(touches)
}

/// The validate answer for a compiled (or refused) job, given the live Agents.
pub fn validate_result(
    compiled: Result<&Compiled, &[ValidationError]>,
    live_agents: &[(String, AgentCapabilities)],
) -> ValidateResult {
    let mut warnings = Vec::new();
    let mut errors = Vec::new();
    let mut usable_slots = 0u64;
    let touches = compiled.map(|c| c.touches.as_slice()).unwrap_or_default();
    let backend = compiled.ok().map(|c| state_backend_of(&c.spec));
    for (agent, caps) in live_agents {
        let mut problems = incompatibilities(caps);
        if let Some(backend) = backend
            && !offers_state_backend(caps, backend)
        {
            problems.push(format!(
                "it offers no `{backend}` state backend (offers: {}; `weir agent \
                 --state-backends redb,{backend}`)",
                caps.state_backends.join(", ")
            ));
        }
        if let Some(refused) = refused_touch(caps, touches) {
            problems.push(format!("`{refused}` is outside its allow-lists"));
        }
        if problems.is_empty() {
            usable_slots += u64::from(caps.slots);
        } else {
            warnings.push(format!(
                "Agent `{agent}` cannot run it: {}",
                problems.join("; ")
            ));
        }
    }
    if live_agents.is_empty() {
        warnings.push("no live Agent: the job waits for one to register".into());
    } else if usable_slots == 0 {
        errors.push(ValidationError {
            message: format!("no live Agent can run this job: {}", warnings.join("; ")),
            path: None,
            line: None,
            column: None,
        });
    }
    match compiled {
        Ok(c) => {
            warnings.extend(c.warnings.iter().cloned());
            if usable_slots > 0 && usable_slots < u64::from(c.lanes) {
                warnings.push(format!(
                    "{} lanes but {usable_slots} slots on the live Agents: some lanes wait for a slot",
                    c.lanes
                ));
            }
            ValidateResult {
                valid: errors.is_empty(),
                lanes: Some(c.lanes),
                plan_fingerprint: Some(c.plan_fingerprint.clone()),
                errors,
                warnings,
            }
        }
        Err(e) => {
            let mut all = e.to_vec();
            all.extend(errors);
            ValidateResult {
                valid: false,
                lanes: None,
                plan_fingerprint: None,
                errors: all,
                warnings,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps() -> AgentCapabilities {
        AgentCapabilities {
            runtime_version: RUNTIME_VERSION.into(),
            state_backends: vec![STATE_BACKEND_REDB.into()],
            checkpoint_protocol: CHECKPOINT_PROTOCOL,
            slots: 2,
            allow: None,
        }
    }

    #[test]
    fn every_capability_that_does_not_fit_is_named() {
        assert!(incompatibilities(&caps()).is_empty());
        let wrong = AgentCapabilities {
            runtime_version: "0.0.0".into(),
            state_backends: vec!["rocksdb".into()],
            checkpoint_protocol: CHECKPOINT_PROTOCOL + 1,
            slots: 0,
            allow: None,
        };
        let problems = incompatibilities(&wrong);
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems[1].contains("offers: rocksdb"));
    }

    #[test]
    fn one_fitting_agent_is_enough_and_others_only_warn() {
        let errors: &[ValidationError] = &[];
        let mut old = caps();
        old.runtime_version = "0.0.0".into();
        let agents = [("a".to_owned(), old.clone()), ("b".to_owned(), caps())];
        let result = validate_result(Err(errors), &agents[..1]);
        assert!(!result.valid);
        assert!(result.errors[0].message.contains("no live Agent can run"));
        let result = validate_result(Err(errors), &agents);
        assert!(result.errors.is_empty());
        assert_eq!(result.warnings.len(), 1);
        assert!(result.warnings[0].starts_with("Agent `a` cannot run it"));
    }
}
