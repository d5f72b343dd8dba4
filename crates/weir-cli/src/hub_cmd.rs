//! `weir hub`: runs the Hub, the control plane of distributed jobs; `weir hub token` manages
//! the API tokens users and tools present to it.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::time::Duration;
use weir_hub::{Role, Store};

/// Parses a positive duration such as `10s` or `500ms` (a lease TTL, a timeout).
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let d = weir::api::DurationMs::parse(text)?;
    if d.0 == 0 {
        return Err("the duration must be positive".into());
    }
    Ok(Duration::from_millis(d.0))
}

/// The options of `weir hub`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct HubArgs {
    #[command(subcommand)]
    command: Option<HubCommand>,
    #[command(flatten)]
    serve: ServeArgs,
}

/// `weir hub` subcommands.
#[derive(Debug, clap::Subcommand)]
enum HubCommand {
    /// Create, list and revoke the API tokens of users and tools (works on the store file,
    /// also while the Hub runs).
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
}

/// `weir hub token` subcommands.
#[derive(Debug, clap::Subcommand)]
enum TokenCommand {
    /// Create a token and print it (shown this once: the store keeps only its hash).
    Create {
        /// What it may do: viewer (read), operator (also start, stop, checkpoint, savepoint),
        /// admin (also validate, submit, upgrade, roll back).
        #[arg(long)]
        role: String,
        /// Who or what uses it (shown in listings and logs).
        #[arg(long, default_value = "cli")]
        name: String,
        /// The Hub's SQLite store.
        #[arg(long, default_value = "hub.sqlite")]
        db: PathBuf,
    },
    /// List the tokens (never the tokens themselves), as JSON.
    List {
        /// The Hub's SQLite store.
        #[arg(long, default_value = "hub.sqlite")]
        db: PathBuf,
    },
    /// Revoke a token by its id: requests carrying it are refused from then on.
    Revoke {
        /// The token's id (`weir hub token list`).
        token_id: String,
        /// The Hub's SQLite store.
        #[arg(long, default_value = "hub.sqlite")]
        db: PathBuf,
    },
}

/// The options of the Hub's server.
#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Address to listen on (only this machine by default; `0.0.0.0:7800` for every interface,
    /// with TLS).
    #[arg(long, default_value = "127.0.0.1:7800")]
    listen: String,
    /// The SQLite store (created if missing, readable by its owner only).
    #[arg(long, default_value = "hub.sqlite")]
    db: PathBuf,
    /// How long an Agent's lease lasts after its last heartbeat (`10s`, `500ms`).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    lease_ttl: Duration,
    /// A file holding the join token Agents register with (default: the `WEIR_JOIN_TOKEN`
    /// variable); without one, no Agent may register.
    #[arg(long, env = "WEIR_JOIN_TOKEN_FILE")]
    join_token_file: Option<PathBuf>,
    /// The Hub's TLS certificate chain (PEM): serve HTTPS. Needs `--tls-key`.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of `--tls-cert` (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// The largest request body accepted, in bytes (larger: 413).
    #[arg(long, default_value_t = weir_hub::ServeLimits::default().max_body_bytes)]
    max_body_bytes: usize,
    /// How long a client may take to send a request's headers (and a TLS handshake), and how
    /// long a kept connection may wait idle for its next request.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    header_timeout: Duration,
    /// How long a client may take to send a request's body (longer: 408).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    body_timeout: Duration,
    /// Connections served at once; more wait to be accepted.
    #[arg(long, default_value_t = weir_hub::ServeLimits::default().max_connections)]
    max_connections: usize,
    /// An environment variable of the Hub that `${env:NAME}` references in a job's
    /// `checkpoint` section may read (the Hub writes job manifests there); `PREFIX*` allows a
    /// prefix; repeat for several. Without it, no reference is read here.
    #[arg(long, value_name = "NAME")]
    allow_env: Vec<String>,
}

/// Runs `weir hub` or one of its subcommands.
pub(crate) async fn run(args: HubArgs) -> Result<()> {
    match args.command {
        None => serve(args.serve).await,
        Some(HubCommand::Token { command }) => token(command),
    }
}

/// Opens the store at `db` as `weir hub token` does: it must exist (a mistyped path is not a
/// new, empty Hub).
fn open_store(db: &Path) -> Result<Store> {
    if !db.exists() {
        bail!(
            "no Hub store at {} (start the Hub once, or give --db)",
            db.display()
        );
    }
    Store::open(db, 10_000).with_context(|| format!("opening the Hub store {}", db.display()))
}

fn token(command: TokenCommand) -> Result<()> {
    let now = weir_hub::now_ms();
    match command {
        TokenCommand::Create { role, name, db } => {
            let role = Role::parse(&role)?;
            let store = if db.exists() {
                open_store(&db)?
            } else {
                // The first token is usually made before the Hub's first start.
                Store::open(&db, 10_000)
                    .with_context(|| format!("creating the Hub store {}", db.display()))?
            };
            let (info, token) = store.create_token(&name, role, now)?;
            eprintln!(
                "created {} token {} ({}); it is shown this once:",
                info.role, info.token_id, info.name
            );
            crate::print_stdout(&token)
        }
        TokenCommand::List { db } => {
            let tokens = open_store(&db)?.list_tokens()?;
            crate::print_stdout(&serde_json::to_string_pretty(&tokens)?)
        }
        TokenCommand::Revoke { token_id, db } => {
            open_store(&db)?.revoke_token(&token_id, now)?;
            eprintln!("revoked token {token_id}");
            Ok(())
        }
    }
}

/// Opens the store and serves the API until the process is stopped.
async fn serve(args: ServeArgs) -> Result<()> {
    let join_token =
        crate::secrets::read_secret(args.join_token_file.as_deref(), "WEIR_JOIN_TOKEN")?;
    if join_token.is_none() {
        eprintln!(
            "warning: no join token (--join-token-file or WEIR_JOIN_TOKEN): no Agent can register"
        );
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(weir_hub::HubTls::from_pem_files(cert, key)?),
        _ => None,
    };
    let limits = weir_hub::ServeLimits {
        max_body_bytes: args.max_body_bytes,
        header_timeout: args.header_timeout,
        body_timeout: args.body_timeout,
        max_connections: args.max_connections,
    };
    let db = args.db;
    let hub = weir_hub::Hub::open(&weir_hub::HubConfig {
        db_path: db.clone(),
        lease_ttl: args.lease_ttl,
        limits,
        join_token,
        allow_env: weir::api::secrets::EnvAccess::Only(args.allow_env),
    })
    .with_context(|| format!("opening the Hub store {}", db.display()))?;
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    if tls.is_none() && !addr.ip().is_loopback() {
        eprintln!(
            "warning: serving plain HTTP on {addr}: tokens cross the network in clear; give --tls-cert and --tls-key"
        );
    }
    // Registered before the announcement, so a SIGTERM sent as soon as the Hub says it
    // listens stops it cleanly rather than by the signal's default action.
    let signal = crate::shutdown::shutdown_signal();
    eprintln!(
        "weir hub listening on {scheme}://{addr} (store {})",
        db.display()
    );
    tokio::select! {
        served = hub.serve(listener, tls) => served?,
        () = signal => eprintln!("weir hub stopped (signal)"),
    }
    Ok(())
}
