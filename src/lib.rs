//! Weir: an Apache Arrow columnar streaming dataflow engine.
//!
//! This facade is what a Rust user depends on: it re-exports the plugin API, the plan pipeline
//! and the runtime, and [`Engine`] runs job specs in-process with the built-in operators and
//! connectors plus any plugin the user registers.
//!
//! ```no_run
//! # async fn demo() -> Result<(), weir::Error> {
//! let engine = weir::Engine::new();
//! let summary = engine.run_file(std::path::Path::new("examples/bids.yaml")).await?;
//! println!("{} rows written", summary.metrics.sink_rows());
//! # Ok(()) }
//! ```

use std::path::Path;
use std::sync::Arc;

pub use weir_api as api;
pub use weir_builtin as builtin;
pub use weir_checkpoint as checkpoint;
pub use weir_delta as delta;
pub use weir_file as file;
pub use weir_kafka as kafka;
pub use weir_operators as operators;
/// The DataFusion crate Weir plans SQL expressions with: build [`Engine::register_udf`]'s
/// functions with it (`weir::datafusion::logical_expr::create_udf`, `ScalarUDFImpl`).
pub use weir_operators::datafusion;
pub use weir_plan as plan;
pub use weir_runtime as runtime;
pub use weir_sql as sql;
pub use weir_state as state;

pub use weir_plan::{CompiledPlans, JobSpec};
pub use weir_runtime::{
    CheckpointLocation, CheckpointSummary, CheckpointTrigger, EpochStats, Error, PreparedJob,
    Registry, RestoreFrom, Result, RunOptions, RunSummary, RunningJob, SplitShare, TaskEpochStats,
};

/// An error of preparing a job compiled from SQL, placed where the script wrote what failed: a
/// deep-build error names a JSON path of the compiled spec (`sources[0].options.format`), which
/// `positions` ([`sql::SqlJob::positions`]) turns into the file's line and column and the words
/// of the script (`option 'format' of table `bids``). Other errors are returned as they are.
pub fn locate_sql_error(error: Error, positions: &sql::SpecPositions) -> Error {
    let Some(origin) = prepare_error_path(&error).and_then(|p| positions.locate(p)) else {
        return error;
    };
    let origin = origin.clone();
    let Error::Prepare { file, source, .. } = error else {
        return error;
    };
    let source = match source {
        api::Error::Config { message, .. } => api::Error::Config {
            path: origin.what.clone(),
            message,
        },
        other => other,
    };
    Error::Prepare {
        file: format!("{file}:{}", origin.position),
        path: origin.what.clone(),
        source,
    }
}

/// The JSON path of the spec field a deep-build error blames: an option's own path where the
/// error is about one (`sources[0].options.format`), else the node's; `None` for other errors.
pub fn prepare_error_path(error: &Error) -> Option<&str> {
    match error {
        Error::Prepare {
            source: api::Error::Config { path, .. },
            ..
        }
        | Error::Prepare { path, .. } => Some(path),
        _ => None,
    }
}

/// The registry with every built-in operator ([`Registry::with_builtin_operators`]) and
/// connector: sources `file`, `delta`, `kafka`, `upsert-kafka` and `datagen`, sinks `file`,
/// `delta`, `kafka`, `upsert-kafka` and `blackhole`.
pub fn default_registry() -> Registry {
    let mut r = Registry::with_builtin_operators();
    r.register_source("datagen", Arc::new(weir_builtin::DatagenSourceFactory));
    r.register_sink(
        "blackhole",
        Arc::new(weir_builtin::BlackholeSinkFactory::new()),
    );
    // One object store registry for the file source and sink, so that a URL (e.g. `memory://`)
    // names the same store on both sides.
    let stores: Arc<dyn object_store::registry::ObjectStoreRegistry> =
        Arc::new(object_store::registry::DefaultObjectStoreRegistry::new());
    r.register_source("kafka", Arc::new(weir_kafka::KafkaSourceFactory));
    r.register_sink("kafka", Arc::new(weir_kafka::KafkaSinkFactory));
    r.register_source(
        "upsert-kafka",
        Arc::new(weir_kafka::UpsertKafkaSourceFactory),
    );
    r.register_sink("upsert-kafka", Arc::new(weir_kafka::UpsertKafkaSinkFactory));
    r.register_source(
        "file",
        Arc::new(weir_file::FileSourceFactory::with_registry(stores.clone())),
    );
    r.register_sink(
        "file",
        Arc::new(weir_file::FileSinkFactory::with_registry(stores)),
    );
    r.register_source("delta", Arc::new(weir_delta::DeltaSourceFactory));
    r.register_sink("delta", Arc::new(weir_delta::DeltaSinkFactory));
    r
}

/// Runs jobs in this process: compile a spec, prepare it (the deep build behind `validate`),
/// start it.
#[derive(Debug, Clone)]
pub struct Engine {
    registry: Registry,
    /// Which environment variables `${env:NAME}` references in job options may read.
    env: api::secrets::EnvAccess,
}

impl Default for Engine {
    fn default() -> Self {
        Self::new()
    }
}

impl Engine {
    /// An engine with [`default_registry`].
    pub fn new() -> Self {
        Engine {
            registry: default_registry(),
            env: api::secrets::EnvAccess::All,
        }
    }

    /// The registry, to add plugin operators and connectors.
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// Sets which environment variables `${env:NAME}` references in connector and checkpoint
    /// options may read when a job is prepared (default: every variable of this process; see
    /// docs/job-spec.md, "Secrets from the environment"). A process that runs other people's
    /// jobs (an Agent) narrows it to the names it means to share; one that only validates them
    /// (the Hub) reads none.
    pub fn set_env_access(&mut self, access: api::secrets::EnvAccess) {
        self.env = access;
    }

    /// Registers a plugin operator under `name`, usable as `type: name` in job specs.
    pub fn register_operator(&mut self, name: &str, factory: Arc<dyn api::OperatorFactory>) {
        self.registry.register_operator(name, factory);
    }

    /// Registers a scalar function that SQL expressions can call: `filter` predicates,
    /// `project` expressions and sources' computed columns. It replaces a function of the same
    /// name, built-in ones included. Clones of the engine made before keep their functions.
    ///
    /// SQL lower-cases unquoted identifiers, so give the function a lower-case name.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use weir::datafusion::arrow::array::{AsArray, Int64Array};
    /// use weir::datafusion::arrow::datatypes::{DataType, Int64Type};
    /// use weir::datafusion::logical_expr::{ColumnarValue, Volatility, create_udf};
    ///
    /// let mut engine = weir::Engine::new();
    /// engine.register_udf(create_udf(
    ///     "twice",
    ///     vec![DataType::Int64],
    ///     DataType::Int64,
    ///     Volatility::Immutable,
    ///     Arc::new(|args: &[ColumnarValue]| {
    ///         let arrays = ColumnarValue::values_to_arrays(args)?;
    ///         let doubled: Int64Array = arrays[0]
    ///             .as_primitive::<Int64Type>()
    ///             .unary(|v| v.wrapping_mul(2));
    ///         Ok(ColumnarValue::Array(Arc::new(doubled)))
    ///     }),
    /// ));
    /// // Now `twice(price) > 100` works in a filter, a project or a computed column.
    /// ```
    pub fn register_udf(&mut self, udf: datafusion::logical_expr::ScalarUDF) {
        self.registry.register_udf(udf);
    }

    /// Compiles a SQL script (see docs/sql.md) into a job spec, planning with this engine's
    /// functions (built-in and registered with [`register_udf`](Self::register_udf)); `file`
    /// names the script in errors.
    ///
    /// # Errors
    /// [`sql::SqlError`] naming the file, line and column.
    pub async fn compile_sql(&self, sql: &str, file: &str) -> sql::Result<sql::SqlJob> {
        sql::SqlCompiler::with_session_state(self.registry.session_state())
            .compile(sql, file)
            .await
    }

    /// Compiles and prepares a spec without starting anything; `file` names it in errors.
    ///
    /// # Errors
    /// The first plan or prepare error, naming the offending field's JSON path.
    pub async fn prepare(&self, spec: &JobSpec, file: Option<&str>) -> Result<PreparedJob> {
        let plans = CompiledPlans::compile(spec, file)?;
        PreparedJob::prepare_with(
            plans,
            &self.registry,
            file.unwrap_or("<builder>"),
            weir_api::Reach::Full,
            &self.env,
        )
        .await
    }

    /// [`Engine::prepare`] for a run: when preparing fails on something a retry may cure (a
    /// broker or object store that cannot be reached yet) and the job checkpoints, it is tried
    /// again as a failed attempt of the running job would be: up to the job's `restart`
    /// attempts, after the same delays. `weir run` starts jobs this way, so a job started
    /// while its broker is down waits for it instead of failing at once.
    ///
    /// # Errors
    /// As [`Engine::prepare`]: the first error that is not retryable, or the last one.
    pub async fn prepare_retrying(
        &self,
        spec: &JobSpec,
        file: Option<&str>,
    ) -> Result<PreparedJob> {
        let policy = plan::RestartSpec::in_force(spec.checkpoint.is_some(), spec.restart);
        let mut failures = 0;
        loop {
            match self.prepare(spec, file).await {
                Err(e) if e.is_retryable() => match policy {
                    Some(p) if failures < p.attempts => {
                        failures += 1;
                        let delay = p.delay_before(failures);
                        tracing::warn!(
                            error = %e,
                            restart = failures,
                            of = p.attempts,
                            delay_ms = delay.0,
                            "preparing the job failed; trying again"
                        );
                        tokio::time::sleep(std::time::Duration::from_millis(delay.0)).await;
                    }
                    _ => return Err(e),
                },
                other => return other,
            }
        }
    }

    /// Compiles and prepares a spec touching nothing outside this process (no file, store or
    /// broker): what the Hub validates a distributed job with. The prepared job lists no
    /// splits; it is checked, not run.
    ///
    /// # Errors
    /// As [`Engine::prepare`]; also a source whose schema or format would have to be read
    /// from its input.
    pub async fn check_offline(&self, spec: &JobSpec, file: Option<&str>) -> Result<PreparedJob> {
        let plans = CompiledPlans::compile(spec, file)?;
        PreparedJob::prepare_with(
            plans,
            &self.registry,
            file.unwrap_or("<builder>"),
            weir_api::Reach::Offline,
            &self.env,
        )
        .await
    }

    /// Reads, compiles and prepares a spec file.
    ///
    /// # Errors
    /// As [`Engine::prepare`], plus syntax errors of the file.
    pub async fn prepare_file(&self, path: &Path) -> Result<PreparedJob> {
        let spec = JobSpec::from_file(path)?;
        self.prepare(&spec, Some(&path.display().to_string())).await
    }

    /// Starts a prepared job.
    ///
    /// # Errors
    /// When the source enumerators or operator instances fail to start.
    pub async fn start(&self, job: PreparedJob) -> Result<RunningJob> {
        weir_runtime::start(job).await
    }

    /// Starts a prepared job with explicit [`RunOptions`] (e.g. where keyed state lives).
    ///
    /// # Errors
    /// As [`Engine::start`].
    pub async fn start_with(&self, job: PreparedJob, options: RunOptions) -> Result<RunningJob> {
        weir_runtime::start_with(job, options).await
    }

    /// Runs a spec to its end.
    ///
    /// # Errors
    /// Any prepare error, or the root cause of a task failure.
    pub async fn run(&self, spec: &JobSpec, file: Option<&str>) -> Result<RunSummary> {
        let job = self.prepare(spec, file).await?;
        self.start(job).await?.wait().await
    }

    /// Runs a spec file to its end.
    ///
    /// # Errors
    /// As [`Engine::run`].
    pub async fn run_file(&self, path: &Path) -> Result<RunSummary> {
        let job = self.prepare_file(path).await?;
        self.start(job).await?.wait().await
    }
}
