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

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(backend: Option<&str>, url: Option<&str>) -> StateFlags {
        StateFlags {
            state_backend: backend.map(str::to_owned),
            redis_url: url.map(str::to_owned),
        }
    }

    #[test]
    fn flags_choose_over_the_job_and_keep_its_prefix_and_password() {
        let job = StateBackendSpec {
            backend: StateBackendKind::Redis,
            redis: Some(RedisStateSpec {
                url: "redis://job-host:6379".into(),
                prefix: Some("team".into()),
                password: Some("${env:PW}".into()),
            }),
        };
        // Nothing given: the job's own.
        assert_eq!(flags(None, None).resolve(Some(&job)).unwrap(), None);
        // A URL alone names the server of a Redis job, and nothing for a redb job.
        let moved = flags(None, Some("redis://other:6380"))
            .resolve(Some(&job))
            .unwrap()
            .unwrap();
        let redis = moved.redis.unwrap();
        assert_eq!(
            (
                redis.url.as_str(),
                redis.prefix.as_deref(),
                redis.password.as_deref()
            ),
            ("redis://other:6380", Some("team"), Some("${env:PW}"))
        );
        assert_eq!(flags(None, Some("redis://x")).resolve(None).unwrap(), None);
        // --state-backend redb wins over the job's Redis.
        assert_eq!(
            flags(Some("redb"), None).resolve(Some(&job)).unwrap(),
            Some(StateBackendSpec::default())
        );
        // --state-backend redis takes the job's server, or the flag's.
        assert_eq!(
            flags(Some("REDIS"), None).resolve(Some(&job)).unwrap(),
            Some(job.clone())
        );
        assert_eq!(
            flags(Some("redis"), Some("redis://h:1"))
                .resolve(None)
                .unwrap(),
            Some(StateBackendSpec::redis("redis://h:1"))
        );
        let e = flags(Some("redis"), None)
            .resolve(None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--redis-url"), "{e}");
        let e = flags(Some("rocksdb"), None)
            .resolve(None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("redb or redis"), "{e}");
    }
}
