//! The flags of `weir run` that choose the keyed-state engine.

use anyhow::{Result, bail};
use clap::Args;
use weir::plan::{RedisStateSpec, StateBackendKind, StateBackendSpec};

/// `--state-backend` and `--redis-url`.
#[derive(Debug, Args, Default)]
pub(crate) struct StateFlags {
    /// Which engine holds keyed state: redb (one file per task, the default) or redis;
    /// overrides the job's `state.backend` (docs/state.md).
    #[arg(long, value_name = "redb|redis")]
    state_backend: Option<String>,
    /// The Redis server when the backend is redis: redis://[user@]host[:port][/db]; overrides
    /// the job's `state.redis.url` (its password comes from the job's `state.redis.password`).
    #[arg(long, env = "WEIR_REDIS_URL", value_name = "URL")]
    redis_url: Option<String>,
}

impl StateFlags {
    /// The engine the flags choose over the job's `state` section (`None`: the job's own).
    pub(crate) fn resolve(
        &self,
        job: Option<&StateBackendSpec>,
    ) -> Result<Option<StateBackendSpec>> {
        let Some(name) = &self.state_backend else {
            // A URL alone (perhaps from the environment) only names the server of a job that
            // keeps its state in Redis.
            return Ok(match (job, &self.redis_url) {
                (Some(spec), Some(url)) if spec.backend == StateBackendKind::Redis => {
                    Some(with_url(spec, url))
                }
                _ => None,
            });
        };
        let Some(backend) = StateBackendKind::parse(name) else {
            bail!("--state-backend {name}: expected redb or redis");
        };
        Ok(Some(match backend {
            StateBackendKind::Redb => StateBackendSpec::default(),
            StateBackendKind::Redis => {
                let job = job.cloned().unwrap_or_default();
                match (&self.redis_url, &job.redis) {
                    (Some(url), _) => with_url(&job, url),
                    (None, Some(_)) => StateBackendSpec {
                        backend: StateBackendKind::Redis,
                        ..job
                    },
                    (None, None) => bail!(
                        "--state-backend redis needs the server: --redis-url redis://HOST:PORT \
                         (or WEIR_REDIS_URL, or the job's `state.redis.url`)"
                    ),
                }
            }
        }))
    }
}

fn with_url(job: &StateBackendSpec, url: &str) -> StateBackendSpec {
    StateBackendSpec {
        backend: StateBackendKind::Redis,
        redis: Some(RedisStateSpec {
            url: url.to_owned(),
            prefix: job.redis.as_ref().and_then(|r| r.prefix.clone()),
            password: job.redis.as_ref().and_then(|r| r.password.clone()),
        }),
    }
}
