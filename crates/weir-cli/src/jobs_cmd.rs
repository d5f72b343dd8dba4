//! `weir jobs ...` and `weir agents list`: the Hub's API from the command line, printing JSON.

use anyhow::{Context, Result};
use clap::Subcommand;
use serde::Serialize;
use std::path::{Path, PathBuf};
use weir_control::{
    DesiredState, DesiredStateChange, HubClient, SavepointRequest, SubmitJob, UpgradeRequest,
};

/// The Hub URL when neither `--hub` nor `WEIR_HUB` names one.
pub(crate) const DEFAULT_HUB: &str = "http://127.0.0.1:7800";

/// `weir jobs` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum JobsCommand {
    /// Submit a job (a `.sql` script or a YAML/JSON job spec) as a new distributed job.
    Submit {
        /// The job file.
        job: PathBuf,
        /// The job's name (default: the spec's `job`, else the file's stem).
        #[arg(long)]
        name: Option<String>,
        /// Start it at once (default: stored stopped).
        #[arg(long)]
        start: bool,
    },
    /// List the jobs.
    List,
    /// Show one job's summary.
    Get {
        /// The job.
        job_id: String,
    },
    /// Show everything about a job: plans, assignments, recovery records, upgrades.
    Detail {
        /// The job.
        job_id: String,
    },
    /// Set a job's desired state to running.
    Start {
        /// The job.
        job_id: String,
        /// Apply only if this is still the job's generation.
        #[arg(long)]
        generation: Option<u64>,
    },
    /// Set a job's desired state to stopped.
    Stop {
        /// The job.
        job_id: String,
        /// Apply only if this is still the job's generation.
        #[arg(long)]
        generation: Option<u64>,
    },
    /// Ask a running job's lanes for a savepoint.
    Savepoint {
        /// The job.
        job_id: String,
        /// The savepoint's name (default: its id).
        #[arg(long)]
        name: Option<String>,
    },
    /// Upgrade a stopped job to a new version that starts from a savepoint.
    Upgrade {
        /// The job.
        job_id: String,
        /// The new version's file (`.sql` or a job spec).
        job: PathBuf,
        /// The savepoint of the current version to start from.
        #[arg(long)]
        savepoint: String,
        /// Print what the upgrade would do with each operator's state, changing nothing.
        #[arg(long)]
        preview: bool,
        #[command(flatten)]
        evolution: crate::plan_cmd::EvolutionFlags,
    },
    /// Roll back an upgrade: the version before it is current again.
    Rollback {
        /// The job.
        job_id: String,
        /// The upgrade.
        upgrade_id: String,
    },
}

/// `weir agents` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum AgentsCommand {
    /// List the Agents with their leases and lanes.
    List,
}

/// How the CLI reaches a Hub: its URL, the API token it presents, the CA it verifies it with.
#[derive(Debug, clap::Args)]
pub(crate) struct HubConnection {
    /// The Hub's URL (default: `WEIR_HUB`, else http://127.0.0.1:7800).
    #[arg(long, global = true)]
    hub: Option<String>,
    /// A file holding the API token to present (`weir hub token create`); default: the
    /// `WEIR_TOKEN_FILE` file, else the `WEIR_TOKEN` variable.
    #[arg(long, global = true, env = "WEIR_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    /// A PEM CA certificate to verify a Hub served over TLS with (a self-signed or private-CA
    /// certificate), besides the system's roots.
    #[arg(long, global = true, env = "WEIR_CA_CERT")]
    ca_cert: Option<PathBuf>,
}

impl HubConnection {
    /// The client of `--hub`, else `WEIR_HUB`, else [`DEFAULT_HUB`], with the token and CA.
    pub(crate) fn client(&self) -> Result<HubClient> {
        let url = match &self.hub {
            Some(url) => url.clone(),
            None => std::env::var("WEIR_HUB").unwrap_or_else(|_| DEFAULT_HUB.to_owned()),
        };
        let mut client = HubClient::new(&url)?;
        if let Some(token) = crate::secrets::read_secret(self.token_file.as_deref(), "WEIR_TOKEN")?
        {
            client = client.with_token(token);
        }
        if let Some((pem, path)) = crate::secrets::ca_certificate(self.ca_cert.as_deref())? {
            client = client.with_ca_certificate(&pem, &path)?;
        }
        Ok(client)
    }
}

/// A job file as the API takes it: `sql` for a `.sql` script, else the spec as JSON.
fn source(path: &Path) -> Result<(Option<String>, Option<serde_json::Value>, Option<String>)> {
    let file = path.display().to_string();
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("sql"))
    {
        let bytes = std::fs::read(path).with_context(|| format!("reading {file}"))?;
        let sql = weir::sql::script_text(bytes, &file)?;
        return Ok((Some(sql), None, None));
    }
    let spec = weir::JobSpec::from_file(path)?;
    let name = spec.job.clone();
    let value = serde_json::to_value(&spec).with_context(|| format!("encoding {file}"))?;
    Ok((None, Some(value), name))
}

fn stem(path: &Path) -> Option<String> {
    path.file_stem()
        .map(|s| s.to_string_lossy().replace(['.', ' '], "-"))
}

fn print<T: Serialize>(value: &T) -> Result<()> {
    crate::print_stdout(&serde_json::to_string_pretty(value)?)
}

/// Runs a `weir jobs` subcommand.
pub(crate) async fn jobs(hub: &HubConnection, command: JobsCommand) -> Result<()> {
    let client = hub.client()?;
    match command {
        JobsCommand::Submit { job, name, start } => {
            let (sql, spec, spec_name) = source(&job)?;
            let name = name
                .or(spec_name)
                .or_else(|| stem(&job))
                .context("name the job with --name")?;
            let desired_state = if start {
                DesiredState::Running
            } else {
                DesiredState::Stopped
            };
            print(
                &client
                    .submit(&SubmitJob {
                        name,
                        sql,
                        spec,
                        desired_state,
                    })
                    .await
                    .with_context(|| format!("the Hub refused {}", job.display()))?,
            )
        }
        JobsCommand::List => print(&client.list_jobs().await?),
        JobsCommand::Get { job_id } => print(&client.get_job(&job_id).await?),
        JobsCommand::Detail { job_id } => print(&client.job_detail(&job_id).await?),
        JobsCommand::Start { job_id, generation } => {
            let change = DesiredStateChange {
                desired_state: DesiredState::Running,
                generation,
            };
            print(&client.set_desired_state(&job_id, &change).await?)
        }
        JobsCommand::Stop { job_id, generation } => {
            let change = DesiredStateChange {
                desired_state: DesiredState::Stopped,
                generation,
            };
            print(&client.set_desired_state(&job_id, &change).await?)
        }
        JobsCommand::Savepoint { job_id, name } => print(
            &client
                .savepoint(&job_id, &SavepointRequest { name })
                .await?,
        ),
        JobsCommand::Upgrade {
            job_id,
            job,
            savepoint,
            preview,
            evolution,
        } => {
            let (sql, spec, _) = source(&job)?;
            let request = UpgradeRequest {
                sql,
                spec,
                savepoint_id: savepoint,
                actions: evolution.state_actions()?,
            };
            if preview {
                return print(&client.preview_upgrade(&job_id, &request).await?);
            }
            print(
                &client
                    .upgrade(&job_id, &request)
                    .await
                    .with_context(|| format!("the Hub refused {} as an upgrade", job.display()))?,
            )
        }
        JobsCommand::Rollback { job_id, upgrade_id } => {
            print(&client.rollback(&job_id, &upgrade_id).await?)
        }
    }
}

/// Runs a `weir agents` subcommand.
pub(crate) async fn agents(hub: &HubConnection, command: AgentsCommand) -> Result<()> {
    let client = hub.client()?;
    match command {
        AgentsCommand::List => print(&client.list_agents().await?),
    }
}
