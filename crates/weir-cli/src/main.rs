//! `weir`: run, validate and plan jobs from the command line.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;
use weir::{Engine, JobSpec, RunSummary};

mod agent_cmd;
mod hub_cmd;
mod jobs_cmd;
mod local_ui;
mod plan_cmd;
mod secrets;
mod shutdown;
mod state_flags;
mod summary;

/// The process's allocator. jemalloc keeps per-thread caches, so the batches one subtask's thread
/// builds and another's drops do not contend for glibc malloc's arena locks (about a tenth of the
/// CPU of a windowed job at parallelism 2 went to that lock; see docs/performance.md).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Weir: an Apache Arrow columnar streaming dataflow engine.
#[derive(Debug, Parser)]
#[command(
    name = "weir",
    version,
    about = "Weir: an Apache Arrow columnar streaming dataflow engine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a job locally until its sources end, then print a summary.
    Run {
        /// The job spec (YAML or JSON).
        job: PathBuf,
        /// Override the job's default parallelism.
        #[arg(short, long)]
        parallelism: Option<u32>,
        /// Print the summary as JSON on stdout instead of a table.
        #[arg(long)]
        json: bool,
        /// Directory for the tasks' keyed-state files (default: a temporary directory removed
        /// when the job ends).
        #[arg(long)]
        state_dir: Option<PathBuf>,
        /// Directory for checkpoints (manifests, state segments, epoch log): a local
        /// directory, a file:// or an s3://bucket/prefix URL (reached with the job's
        /// `checkpoint.s3` options and the AWS environment variables); overrides the job's
        /// `checkpoint.dir`. The job must take checkpoints (`checkpoint.interval`).
        #[arg(long)]
        checkpoint_dir: Option<String>,
        /// Restore before reading input: `latest` (the newest durable checkpoint, or a fresh
        /// start when there is none), an epoch number, or a savepoint name.
        #[arg(long, value_name = "latest|EPOCH|SAVEPOINT")]
        restore: Option<weir::RestoreFrom>,
        /// Let a restore pass over durable epochs (a damaged newest checkpoint, an older epoch
        /// asked for) even when a sink cannot withdraw what it published for them: that output
        /// may then appear twice. Without it such a restore is refused. Sinks that can withdraw
        /// (the file sink) withdraw their output either way.
        #[arg(long)]
        accept_duplicates: bool,
        /// Serve the job's metrics for Prometheus at http://HOST:PORT/metrics while it runs
        /// (docs/observability.md); port 0 takes a free port, printed on stderr.
        #[arg(long, value_name = "HOST:PORT")]
        metrics_addr: Option<String>,
        /// Serve the workbench for this job at http://HOST:PORT/ (docs/workbench.md): its
        /// plan with live rates, its charts and checkpoints. The process keeps serving it after
        /// the job ends, until Ctrl-C.
        #[arg(long, value_name = "HOST:PORT")]
        ui: Option<String>,
        #[command(flatten)]
        evolution: plan_cmd::EvolutionFlags,
        #[command(flatten)]
        state: state_flags::StateFlags,
    },
    /// Check a job the way `run` would start it (types, options, schemas, edges), starting nothing.
    Validate {
        /// The job spec.
        job: PathBuf,
        /// Override the job's default parallelism.
        #[arg(short, long)]
        parallelism: Option<u32>,
    },
    /// Print every plan of a job (model, stream graph, job graph, partitioned, deployment) as
    /// JSON; `weir plan diff OLD NEW` says what a restore of OLD's checkpoint into NEW keeps.
    Plan(plan_cmd::PlanArgs),
    /// Run the Hub: the control plane of distributed jobs (REST API, Agent protocol); `weir hub
    /// token ...` manages its API tokens.
    Hub(hub_cmd::HubArgs),
    /// Run an Agent: the data plane of distributed jobs; runs the lanes a Hub assigns it.
    Agent(agent_cmd::AgentArgs),
    /// Manage distributed jobs on a Hub (prints JSON).
    Jobs {
        #[command(flatten)]
        hub: jobs_cmd::HubConnection,
        #[command(subcommand)]
        command: jobs_cmd::JobsCommand,
    },
    /// List the Agents registered with a Hub (prints JSON).
    Agents {
        #[command(flatten)]
        hub: jobs_cmd::HubConnection,
        #[command(subcommand)]
        command: jobs_cmd::AgentsCommand,
    },
}

/// The log filter without `RUST_LOG`: warnings, and for the long-running Hub and Agent also
/// what they do (registrations, lanes placed, started and stopped, leases).
fn default_log_filter(command: &Command) -> &'static str {
    match command {
        Command::Hub(_) | Command::Agent(_) => "warn,weir_hub=info,weir_agent=info",
        _ => "warn",
    }
}

fn main() {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_log_filter(&cli.command)));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colors for a terminal only: a log file or a pipe gets plain text.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    // Room for the deepest expression a job may hold, planned and evaluated on these threads.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(weir::plan::sql_depth::THREAD_STACK_BYTES)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the tokio runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = runtime.block_on(dispatch(cli)) {
        eprintln!("error: {}", error_chain(&e));
        std::process::exit(1);
    }
}

/// The error and its causes, leaving out causes whose text an outer message already includes.
fn error_chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
    }
    out
}

/// A job file: a YAML/JSON job spec, or a SQL script (`.sql`) compiled to one.
struct Loaded {
    spec: JobSpec,
    file: String,
    /// The script asked to EXPLAIN instead of running.
    explain: bool,
    /// The script, when the job was one.
    sql: Option<String>,
    /// Where the script wrote each source, sink and option (empty for a job spec).
    positions: weir::sql::SpecPositions,
}

async fn load(engine: &Engine, job: &Path, parallelism: Option<u32>) -> Result<Loaded> {
    let file = job.display().to_string();
    let is_sql = job
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("sql"));
    let (mut spec, explain, sql, positions) = if is_sql {
        let bytes = std::fs::read(job).with_context(|| format!("reading {file}"))?;
        let text = weir::sql::script_text(bytes, &file)?;
        let compiled = engine.compile_sql(&text, &file).await?;
        (
            compiled.spec,
            compiled.explain,
            Some(text),
            compiled.positions,
        )
    } else {
        (JobSpec::from_file(job)?, false, None, Default::default())
    };
    if parallelism.is_some() {
        spec.parallelism = parallelism;
    }
    Ok(Loaded {
        spec,
        file,
        explain,
        sql,
        positions,
    })
}

/// The stream model and the partitioned plan, as `EXPLAIN` prints them.
fn explain_text(plans: &weir::CompiledPlans) -> Result<String> {
    Ok(format!(
        "== stream model ==\n{}\n== partitioned plan ==\n{}",
        serde_json::to_string_pretty(&plans.model)?,
        serde_json::to_string_pretty(&plans.partitioned)?
    ))
}

async fn dispatch(cli: Cli) -> Result<()> {
    let engine = Engine::new();
    match cli.command {
        Command::Hub(args) => hub_cmd::run(args).await,
        Command::Agent(args) => agent_cmd::run(args).await,
        Command::Jobs { hub, command } => jobs_cmd::jobs(&hub, command).await,
        Command::Agents { hub, command } => jobs_cmd::agents(&hub, command).await,
        Command::Plan(args) => plan_cmd::plan_command(&engine, args).await,
        Command::Validate { job, parallelism } => {
            validate_command(&engine, &job, parallelism).await
        }
        Command::Run {
            job,
            parallelism,
            json,
            state_dir,
            checkpoint_dir,
            restore,
            accept_duplicates,
            metrics_addr,
            ui,
            evolution,
            state,
        } => {
            let args = RunArgs {
                evolution: evolution.actions()?,
                state,
                job,
                parallelism,
                json,
                state_dir,
                checkpoint_dir,
                restore,
                accept_duplicates,
                metrics_addr,
                ui,
            };
            run_command(&engine, args).await
        }
    }
}

/// Loads `job` and prepares it as `run` would (the deep build), an error of a SQL job located
/// in its script; returns the prepared job and the file's name.
async fn prepare_located(
    engine: &Engine,
    job: &Path,
    parallelism: Option<u32>,
) -> Result<(weir::PreparedJob, String)> {
    let Loaded {
        spec,
        file,
        positions,
        ..
    } = load(engine, job, parallelism).await?;
    let prepared = engine
        .prepare(&spec, Some(&file))
        .await
        .map_err(|e| weir::locate_sql_error(e, &positions))?;
    Ok((prepared, file))
}

/// `weir validate`: prepares the job as `run` would and prints its operators, starting nothing.
async fn validate_command(engine: &Engine, job: &Path, parallelism: Option<u32>) -> Result<()> {
    let (prepared, file) = prepare_located(engine, job, parallelism).await?;
    let plan = prepared.partitioned();
    let mut text = format!(
        "{file}: valid: {} operators in {} vertices, {} tasks",
        plan.vertices.iter().map(|v| v.chain.len()).sum::<usize>(),
        plan.vertices.len(),
        plan.checkpoint_ack_set.len()
    );
    for v in &plan.vertices {
        for node in &v.chain {
            let describe = prepared
                .nodes
                .get(&node.operator_id)
                .map(|n| n.describe())
                .unwrap_or_default();
            text.push_str(&format!(
                "\n  {} (x{}): {describe}",
                node.operator_id, v.parallelism
            ));
        }
    }
    print_stdout(&text)
}

/// The flags of `weir run` (see [`Command::Run`]).
struct RunArgs {
    job: PathBuf,
    parallelism: Option<u32>,
    json: bool,
    state_dir: Option<PathBuf>,
    checkpoint_dir: Option<String>,
    restore: Option<weir::RestoreFrom>,
    accept_duplicates: bool,
    metrics_addr: Option<String>,
    ui: Option<String>,
    evolution: weir::plan::evolution::EvolutionActions,
    state: state_flags::StateFlags,
}

/// A running job's workbench: the job it shows, the task sampling its rates and the server.
type Workbench = (
    std::sync::Arc<local_ui::LocalJob>,
    tokio::task::JoinHandle<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
);

/// `weir run`: prepares the job (or prints its plans for EXPLAIN), binds the metrics and
/// workbench addresses, runs it to its end and prints the summary.
async fn run_command(engine: &Engine, args: RunArgs) -> Result<()> {
    let Loaded {
        spec,
        file,
        explain,
        sql,
        positions,
    } = load(engine, &args.job, args.parallelism).await?;
    let prepared = engine
        .prepare_retrying(&spec, Some(&file))
        .await
        .map_err(|e| weir::locate_sql_error(e, &positions))?;
    if explain {
        print_stdout(&explain_text(&prepared.plans)?)?;
        return Ok(());
    }
    let checkpoint_storage = checkpoint_override(&prepared, args.checkpoint_dir.as_deref(), &file)?;
    // What the workbench shows, and its address bound before the job starts.
    let ui = match args.ui {
        Some(addr) => {
            Some(bind_workbench(&prepared, &spec, sql, checkpoint_storage.as_ref(), &addr).await?)
        }
        None => None,
    };
    let options = weir::RunOptions {
        state_dir: args.state_dir,
        checkpoint_storage,
        restore: args.restore,
        accept_duplicates: args.accept_duplicates,
        evolution: args.evolution,
        state: args.state.resolve(prepared.plans.state.as_ref())?,
    };
    let job_id = prepared.partitioned().job_id.to_string();
    // Bound before the job starts: a busy address is refused before anything runs.
    let metrics_listener = match &args.metrics_addr {
        Some(addr) => Some(
            weir_metrics::bind(addr)
                .await
                .context("starting the metrics endpoint")?,
        ),
        None => None,
    };
    let running = engine
        .start_with(prepared, options)
        .await
        .context("starting the job")?;
    // Kept until the job ends; dropping it stops the endpoint.
    let _metrics_server = match metrics_listener {
        Some(listener) => Some(serve_metrics(listener, job_id, &running)?),
        None => None,
    };
    let ui = match ui {
        Some((info, listener)) => Some(serve_workbench(info, listener, &running)?),
        None => None,
    };
    wait_and_report(running, ui, args.json).await
}

/// The checkpoint storage `--checkpoint-dir` names, if given, with the job's S3 options for an
/// s3:// directory; refused for a job that takes no checkpoints.
fn checkpoint_override(
    prepared: &weir::PreparedJob,
    checkpoint_dir: Option<&str>,
    file: &str,
) -> Result<Option<weir::CheckpointLocation>> {
    let checkpoint_storage = checkpoint_dir
        .map(|dir| {
            // The job's S3 options go with an s3:// directory only: a local override of a job
            // that checkpoints to S3 needs none.
            let s3 = prepared
                .plans
                .checkpoint
                .as_ref()
                .and_then(|c| c.s3.as_ref())
                .filter(|_| weir::api::is_s3_url(dir));
            weir::CheckpointLocation::from_dir_option(dir, s3)
        })
        .transpose()
        .context("opening the checkpoint directory")?;
    if checkpoint_storage.is_some() && prepared.plans.checkpoint.is_none() {
        anyhow::bail!(
            "{file}: --checkpoint-dir given, but the job takes no checkpoints: add a \
             `checkpoint` section (SQL: SET 'checkpoint.interval' = '1s')"
        );
    }
    Ok(checkpoint_storage)
}

/// What the workbench at `addr` shows of the job (its checkpoints read from the override or
/// the job's own directory), and its address bound before the job starts.
async fn bind_workbench(
    prepared: &weir::PreparedJob,
    spec: &JobSpec,
    sql: Option<String>,
    checkpoint_storage: Option<&weir::CheckpointLocation>,
    addr: &str,
) -> Result<(local_ui::LocalJobInfo, tokio::net::TcpListener)> {
    let storage = match (checkpoint_storage, &prepared.plans.checkpoint) {
        (Some(storage), _) => Some(storage.clone()),
        (None, Some(c)) => Some(
            // Resolved already, with every variable of this process.
            weir_hub::checkpoint_storage(c, &weir::api::secrets::EnvAccess::All)
                .context("opening the checkpoint directory")?,
        ),
        (None, None) => None,
    };
    let info = local_ui::LocalJobInfo::new(prepared, spec, sql, storage)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the workbench address {addr}"))?;
    Ok((info, listener))
}

/// Serves the running job's metrics on `listener` (printing its address), until the returned
/// server is dropped.
fn serve_metrics(
    listener: weir_metrics::MetricsListener,
    job_id: String,
    running: &weir::RunningJob,
) -> Result<weir_metrics::MetricsServer> {
    let handle = weir_metrics::JobHandle {
        job: job_id,
        metrics: running.metrics().clone(),
        checkpoints: running.checkpoint_probe(),
    };
    let server = listener
        .serve(std::sync::Arc::new(handle))
        .context("starting the metrics endpoint")?;
    eprintln!("metrics: http://{}/metrics", server.local_addr());
    Ok(server)
}

/// Starts serving the workbench of the running job on `listener`, with its rates sampled.
fn serve_workbench(
    info: local_ui::LocalJobInfo,
    listener: tokio::net::TcpListener,
    running: &weir::RunningJob,
) -> Result<Workbench> {
    let job = info.running(running);
    let sampler = job.spawn_sampler();
    let addr = listener.local_addr()?;
    let app = local_ui::router(job.clone());
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    eprintln!("workbench: http://{addr}/");
    Ok((job, sampler, server))
}

/// Waits for the job to end (a progress bar on a terminal) and prints its summary; with a
/// workbench, keeps serving it until Ctrl-C.
async fn wait_and_report(
    running: weir::RunningJob,
    ui: Option<Workbench>,
    json: bool,
) -> Result<()> {
    let progress = std::io::stderr()
        .is_terminal()
        .then(|| summary::Progress::start(running.metrics().clone()));
    let result = running.wait().await;
    if let Some(p) = progress {
        p.finish().await;
    }
    if let Some((job, sampler, server)) = ui {
        sampler.abort();
        job.ended(result.as_ref().err().map(ToString::to_string));
        report_run(&result, json)?;
        eprintln!("the job ended; the workbench stays up until Ctrl-C");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            served = server => { served??; }
        }
        result?;
        return Ok(());
    }
    report_run(&result, json)?;
    result?;
    Ok(())
}

/// Prints the summary of a run that ended well (an error is the caller's to return).
fn report_run(result: &weir::Result<RunSummary>, json: bool) -> Result<()> {
    if let Ok(summary) = result {
        let peak_rss = summary::peak_rss_bytes();
        if json {
            print_stdout(&summary::to_json(summary, peak_rss))?;
        } else {
            print_stdout(summary::render(summary, peak_rss).trim_end())?;
        }
    }
    Ok(())
}

/// Writes a line to stdout; a reader that went away (`weir plan | head`) is not an error.
fn print_stdout(text: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// How often the progress bar refreshes.
pub(crate) const PROGRESS_TICK: Duration = Duration::from_millis(100);
