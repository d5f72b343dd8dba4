//! The `state` section of a job spec: which engine holds the job's keyed state.
//!
//! Like `checkpoint`, it is execution configuration: it is part of no plan and no fingerprint,
//! so a job can move between redb and Redis and still restore its checkpoints (the segments
//! are the same either way).

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// The `state` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateBackendSpec {
    /// The engine: `redb` (the default) or `redis`.
    #[serde(default)]
    pub backend: StateBackendKind,
    /// The Redis server of `backend: redis`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis: Option<RedisStateSpec>,
}

/// The engine that holds keyed state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StateBackendKind {
    /// One embedded redb file per task, in the run's state directory.
    #[default]
    Redb,
    /// A Redis server: the tasks' shards under the job's namespace.
    Redis,
}

impl StateBackendKind {
    /// Every kind, by its name in specs, SQL and the CLI.
    pub const ALL: [StateBackendKind; 2] = [StateBackendKind::Redb, StateBackendKind::Redis];

    /// The name in specs, SQL and the CLI.
    pub fn name(self) -> &'static str {
        match self {
            StateBackendKind::Redb => "redb",
            StateBackendKind::Redis => "redis",
        }
    }

    /// The kind of a name, case-insensitively.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name.trim()))
    }
}

impl std::fmt::Display for StateBackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where Redis state lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisStateSpec {
    /// `redis://[user@]host[:port][/db]`, without a password.
    pub url: String,
    /// The first component of every key (default `weir`); jobs are kept apart by their ids
    /// under it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The server's password (`AUTH`), usually a `${env:NAME}` reference: a secret, hidden
    /// wherever the job is shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

impl StateBackendSpec {
    /// The section of a job that keeps state in Redis at `url`.
    pub fn redis(url: impl Into<String>) -> Self {
        Self {
            backend: StateBackendKind::Redis,
            redis: Some(RedisStateSpec {
                url: url.into(),
                prefix: None,
                password: None,
            }),
        }
    }

    /// Checks the section; errors name the field (`state.redis.url`) in `file`.
    ///
    /// # Errors
    /// [`Error::Spec`] for a Redis backend without a `redis://` URL, or Redis settings given
    /// to the redb backend.
    pub fn validate(&self, file: &str) -> Result<()> {
        let err = |path: &str, message: String| Error::Spec {
            file: file.to_owned(),
            path: path.to_owned(),
            message,
        };
        match (self.backend, &self.redis) {
            (StateBackendKind::Redb, Some(_)) => Err(err(
                "state.redis",
                "Redis settings apply to `backend: redis`; the backend is redb".to_owned(),
            )),
            (StateBackendKind::Redis, None) => Err(err(
                "state.redis.url",
                "`backend: redis` needs the server, e.g. `redis: {url: redis://127.0.0.1:6379}`"
                    .to_owned(),
            )),
            (StateBackendKind::Redis, Some(redis)) => {
                let Some(rest) = redis.url.strip_prefix("redis://") else {
                    return Err(err(
                        "state.redis.url",
                        format!(
                            "`{}` is not a redis:// URL (redis://[user@]host[:port][/db])",
                            weir_api::excerpt(&redis.url)
                        ),
                    ));
                };
                let authority = rest.split('/').next().unwrap_or_default();
                if authority
                    .rsplit_once('@')
                    .is_some_and(|(user, _)| user.contains(':'))
                {
                    return Err(err(
                        "state.redis.url",
                        "holds a password: give it as `state.redis.password` (it may be \
                         `${env:NAME}`), which is kept out of the job's text and hidden where \
                         the job is shown"
                            .to_owned(),
                    ));
                }
                if redis.prefix.as_deref().is_some_and(str::is_empty) {
                    return Err(err("state.redis.prefix", "must not be empty".to_owned()));
                }
                Ok(())
            }
            (StateBackendKind::Redb, None) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_reads_from_yaml_and_names_its_bad_fields() {
        let spec: StateBackendSpec =
            serde_yaml::from_str("backend: redis\nredis: {url: 'redis://127.0.0.1:6379/0'}")
                .expect("yaml");
        assert_eq!(spec, StateBackendSpec::redis("redis://127.0.0.1:6379/0"));
        assert!(spec.validate("job.yaml").is_ok());
        let missing = StateBackendSpec {
            backend: StateBackendKind::Redis,
            redis: None,
        };
        let e = missing
            .validate("job.yaml")
            .expect_err("no url")
            .to_string();
        assert!(e.starts_with("job.yaml: state.redis.url:"), "{e}");
        let e = StateBackendSpec::redis("http://x")
            .validate("job.yaml")
            .expect_err("scheme")
            .to_string();
        assert!(e.contains("not a redis:// URL"), "{e}");
        let e = StateBackendSpec::redis("redis://user:hunter2@host:6379")
            .validate("job.yaml")
            .expect_err("password in the URL")
            .to_string();
        assert!(
            e.contains("state.redis.password") && !e.contains("hunter2"),
            "{e}"
        );
        assert!(serde_yaml::from_str::<StateBackendSpec>("backend: rocksdb").is_err());
        assert_eq!(
            StateBackendKind::parse(" Redis "),
            Some(StateBackendKind::Redis)
        );
    }
}
