//! `weir agent`: runs an Agent, the data plane of distributed jobs, until it is interrupted.

use anyhow::{Context, Result};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The options of `weir agent`.
#[derive(Debug, clap::Args)]
pub struct AgentArgs {
    /// The Hub's URL.
    #[arg(long, env = "WEIR_HUB", default_value = "http://127.0.0.1:7800")]
    hub: String,
    /// The Agent's stable id (`[A-Za-z0-9_.-]`): the same across restarts of this machine's
    /// Agent, so that the Hub tells a restart from a new Agent.
    #[arg(long)]
    id: String,
    /// How many lanes it runs at most.
    #[arg(long, default_value_t = 4)]
    slots: u32,
    /// How often it asks the Hub for commands, in milliseconds.
    #[arg(long, default_value_t = 200)]
    poll_ms: u64,
    /// Serve the metrics of the lanes it runs for Prometheus at http://HOST:PORT/metrics (the
    /// `job` label is the lane's job id, `<job>-lane-<i>`; docs/observability.md); port 0 takes
    /// a free port, printed on stderr.
    #[arg(long, value_name = "HOST:PORT")]
    metrics_addr: Option<String>,
    /// A file holding the Hub's join token (default: the `WEIR_JOIN_TOKEN` variable).
    #[arg(long, env = "WEIR_JOIN_TOKEN_FILE")]
    join_token_file: Option<PathBuf>,
    /// The Agent's credential file: created (0600) at its first start, presented at every
    /// registration; the Hub binds the Agent id to it (default: `<id>.credential` in the
    /// current directory).
    #[arg(long)]
    credential_file: Option<PathBuf>,
    /// A PEM CA certificate to verify a Hub served over TLS with (a self-signed or private-CA
    /// certificate), besides the system's roots.
    #[arg(long, env = "WEIR_CA_CERT")]
    ca_cert: Option<PathBuf>,
    /// A local path prefix its lanes may read or write (repeat for several). With any
    /// `--allow-path` or `--allow-url`, a lane touching anything else is refused before it
    /// reads or writes, and the Hub warns at validation; without either, lanes may touch
    /// anything this user may.
    #[arg(long, value_name = "PATH")]
    allow_path: Vec<PathBuf>,
    /// A URL prefix its lanes may reach (`s3://bucket/in/`, `http://minio:9000`,
    /// `kafka://broker:9092`; repeat for several); see `--allow-path`.
    #[arg(long, value_name = "URL")]
    allow_url: Vec<String>,
    /// The keyed-state backends this Agent offers, comma-separated or repeated: `redb` (the
    /// embedded default, always offered) and `redis`. The Hub places a job's lanes only on
    /// Agents that offer its `state.backend`; offer `redis` only where the Redis servers of
    /// the jobs are reachable (`--state-backends redb,redis`).
    #[arg(
        long,
        value_name = "BACKEND,...",
        value_delimiter = ',',
        default_value = "redb",
        value_parser = parse_state_backend
    )]
    state_backends: Vec<weir::plan::StateBackendKind>,
    /// An environment variable of this Agent that `${env:NAME}` references in its lanes'
    /// options may read (`KAFKA_PASSWORD`; `PREFIX*` allows a prefix; repeat for several).
    /// Without it, a lane with a reference is refused: the Agent's own secrets stay its own.
    #[arg(long, value_name = "NAME")]
    allow_env: Vec<String>,
}

/// Runs the Agent until Ctrl-C or SIGTERM, then stops its lanes (their checkpoints stay; the
/// Hub places them again when the lease lapses).
pub async fn run(args: AgentArgs) -> Result<()> {
    let join_token =
        crate::secrets::read_secret(args.join_token_file.as_deref(), "WEIR_JOIN_TOKEN")?.context(
            "no join token: give --join-token-file or WEIR_JOIN_TOKEN (the Hub's \
                 --join-token-file)",
        )?;
    let credential_file = args
        .credential_file
        .unwrap_or_else(|| PathBuf::from(format!("{}.credential", args.id)));
    let config = weir_agent::AgentConfig {
        hub: args.hub,
        credential: crate::secrets::agent_credential(&credential_file)?,
        agent_id: args.id,
        slots: args.slots,
        poll_interval: Duration::from_millis(args.poll_ms.max(1)),
        join_token,
        ca_certificate: crate::secrets::ca_certificate(args.ca_cert.as_deref())?,
        allow: allow_list(args.allow_path, args.allow_url)?,
        state_backends: args.state_backends,
    };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let signal = crate::shutdown::shutdown_signal();
    tokio::spawn(async move {
        signal.await;
        let _ = stop.send(true);
    });
    let lanes = weir_agent::LaneProbes::default();
    // Kept until the Agent stops; dropping it stops the endpoint.
    let _metrics_server = match args.metrics_addr {
        Some(addr) => {
            let server = weir_metrics::serve(&addr, Arc::new(lanes.clone()))
                .await
                .context("starting the metrics endpoint")?;
            eprintln!("metrics: http://{}/metrics", server.local_addr());
            Some(server)
        }
        None => None,
    };
    let mut engine = weir::Engine::new();
    engine.set_env_access(weir::api::secrets::EnvAccess::Only(args.allow_env));
    weir_agent::run_agent_with_metrics(config, engine, stopped, lanes)
        .await
        .context("the Agent stopped")
}

/// A backend of `--state-backends`, by its name in job specs.
fn parse_state_backend(name: &str) -> std::result::Result<weir::plan::StateBackendKind, String> {
    weir::plan::StateBackendKind::parse(name).ok_or_else(|| {
        let known: Vec<_> = weir::plan::StateBackendKind::ALL
            .iter()
            .map(|k| k.name())
            .collect();
        format!(
            "`{}` is no state backend (known: {})",
            name.trim(),
            known.join(", ")
        )
    })
}

/// The allow-lists of `--allow-path` and `--allow-url` (`None` when neither is given); paths
/// are made absolute with `.` and `..` resolved, as the places lanes touch are.
fn allow_list(paths: Vec<PathBuf>, urls: Vec<String>) -> Result<Option<weir::api::AllowList>> {
    if paths.is_empty() && urls.is_empty() {
        return Ok(None);
    }
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let paths = paths
        .iter()
        .map(|p| match weir::api::Touch::local(p, &cwd) {
            weir::api::Touch::Path(p) => p,
            weir::api::Touch::Url(u) => PathBuf::from(u),
        })
        .collect();
    Ok(Some(weir::api::AllowList { paths, urls }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use weir::plan::StateBackendKind::{Redb, Redis};

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        agent: AgentArgs,
    }

    fn backends(args: &[&str]) -> std::result::Result<Vec<weir::plan::StateBackendKind>, String> {
        Cli::try_parse_from(["weir", "--id", "a"].iter().chain(args))
            .map(|cli| cli.agent.state_backends)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn state_backends_default_to_redb_and_take_a_list() {
        assert_eq!(backends(&[]).unwrap(), [Redb]);
        assert_eq!(
            backends(&["--state-backends", "redb,redis"]).unwrap(),
            [Redb, Redis]
        );
        assert_eq!(
            backends(&["--state-backends", "Redis", "--state-backends", "redb"]).unwrap(),
            [Redis, Redb]
        );
        let e = backends(&["--state-backends", "rocksdb"]).unwrap_err();
        assert!(
            e.contains("`rocksdb` is no state backend (known: redb, redis)"),
            "{e}"
        );
    }
}
