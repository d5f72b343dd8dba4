//! Job options set with `SET 'key' = 'value'`: what each key means, how its value reads, and
//! the checks of combinations once the script is read.

use crate::error::{Here, Result, did_you_mean};
use weir_api::{DurationMs, S3Options, SemanticMode};

/// Job options set with `SET 'key' = 'value'`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Settings {
    pub(crate) job: Option<String>,
    pub(crate) parallelism: Option<u32>,
    pub(crate) state_shards: Option<u32>,
    pub(crate) channel_capacity: Option<u32>,
    pub(crate) semantic_mode: Option<SemanticMode>,
    pub(crate) late_policy: Option<String>,
    pub(crate) allowed_lateness: Option<DurationMs>,
    pub(crate) late_sink: Option<String>,
    /// `SET 'table.exec.state.ttl'`: how long the state of a key of an updating operator
    /// lives without being written or read; `None` (or 0): forever.
    pub(crate) state_ttl: Option<DurationMs>,
    /// `SET 'state.buffer-size'`: the memory one subtask of a stateful operator with a buffer
    /// (joins, OVER, GROUP BY) may hold before writing to keyed state; `None`: each
    /// operator's default.
    pub(crate) buffer_bytes: Option<u64>,
    pub(crate) watermark_interval: Option<DurationMs>,
    pub(crate) checkpoint_interval: Option<DurationMs>,
    pub(crate) checkpoint_dir: Option<String>,
    pub(crate) checkpoint_retain: Option<u32>,
    pub(crate) checkpoint_timeout: Option<DurationMs>,
    pub(crate) checkpoint_min_pause: Option<DurationMs>,
    pub(crate) restart_attempts: Option<u32>,
    pub(crate) restart_delay: Option<DurationMs>,
    /// `SET 'restart.max-delay'`: exponential backoff up to this.
    pub(crate) restart_max_delay: Option<DurationMs>,
    /// `SET 's3.*'`: the S3 options of an `s3://` checkpoint directory, and the defaults of
    /// every file table on `s3://` (a table's own `'s3.*'` options win, option by option).
    pub(crate) s3: S3Options,
    /// Where the first `SET 'checkpoint.*'` or `'restart.*'` was, for errors.
    pub(crate) checkpoint_at: Option<Here>,
    /// Where the last `SET 'late.*'` was, for errors about the combination.
    pub(crate) late_at: Option<Here>,
    /// `SET 'state.backend'`, `'state.redis.url'`, `'state.redis.prefix'`: the keyed-state
    /// engine (the job spec's `state` section).
    pub(crate) state_backend: weir_plan::StateBackendSpec,
    /// Where the first `SET 'state.backend'` or `'state.redis.*'` was, for errors.
    pub(crate) state_backend_at: Option<Here>,
}

/// The keys `SET` accepts, for error messages.
const KEYS: &str = "'job.name', 'parallelism', 'state.shards', 'channel.capacity', \
                    'semantic.mode', 'late.policy', 'late.allowed-lateness', 'late.sink', \
                    'table.exec.state.ttl', 'state.buffer-size', 'state.backend', \
                    'state.redis.url', 'state.redis.prefix', 'state.redis.password', \
                    'watermark.interval', 'checkpoint.interval', 'checkpoint.dir', \
                    'checkpoint.retain', 'checkpoint.timeout', 'checkpoint.min-pause', \
                    'restart.attempts', 'restart.max-delay', \
                    'restart.delay', 's3.endpoint', 's3.region', 's3.access-key', \
                    's3.secret-key', 's3.session-token', 's3.path.style.access', \
                    's3.allow-http'";

/// A memory size as Flink writes it: a whole number of bytes, or one followed by a unit
/// (`b`; `k`, `kb`; `m`, `mb`; `g`, `gb`; `t`, `tb`; powers of 1024, any case, spaces allowed).
fn memory_size(text: &str) -> std::result::Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" | "bytes" => 0,
        "k" | "kb" | "kibibytes" => 10,
        "m" | "mb" | "mebibytes" => 20,
        "g" | "gb" | "gibibytes" => 30,
        "t" | "tb" | "tebibytes" => 40,
        _ => {
            return Err(format!(
                "'{text}' is not a memory size (a whole number of bytes, or with a unit: \
                 '64mb', '1 gb')"
            ));
        }
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1_u64 << shift))
        .ok_or_else(|| {
            format!("'{text}' is not a memory size Weir can hold (a whole number below 2^64 bytes)")
        })
}

impl Settings {
    /// Applies `SET key = value`.
    pub(crate) fn set(&mut self, key: &str, value: &str, here: &Here) -> Result<()> {
        let number = |what: &str| {
            value.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
                here.invalid(format!(
                    "'{key}' is {what}, a whole number above 0, not '{value}'"
                ))
            })
        };
        let duration =
            || DurationMs::parse(value).map_err(|m| here.invalid(format!("'{key}': {m}")));
        let lower = key.to_ascii_lowercase();
        if lower.starts_with("late.") {
            self.late_at = Some(here.clone());
        }
        if self.checkpoint_at.is_none()
            && (lower.starts_with("checkpoint.")
                || lower.starts_with("restart")
                || lower.starts_with("execution.checkpointing.")
                || lower.starts_with("state.checkpoints."))
        {
            self.checkpoint_at = Some(here.clone());
        }
        match key.to_ascii_lowercase().as_str() {
            "job.name" | "pipeline.name" => self.job = Some(value.to_owned()),
            "parallelism" | "parallelism.default" => {
                self.parallelism = Some(number("the default parallelism")?);
            }
            "state.shards" => self.state_shards = Some(number("the number of state shards")?),
            "channel.capacity" => self.channel_capacity = Some(number("a channel capacity")?),
            "semantic.mode" => {
                let mode: SemanticMode = serde_json::from_value(serde_json::json!(
                    value.to_ascii_uppercase()
                ))
                .map_err(|_| {
                    here.invalid(format!(
                        "'semantic.mode' is STRICT_EXACTLY_ONCE, EFFECTIVELY_ONCE, \
                                 AT_LEAST_ONCE or BEST_EFFORT, not '{value}'"
                    ))
                })?;
                self.semantic_mode = Some(mode);
            }
            "late.policy" => {
                let policy = value.to_ascii_lowercase();
                if !["drop", "route", "update"].contains(&policy.as_str()) {
                    return Err(here.invalid(format!(
                        "'late.policy' is drop, route or update, not '{value}'"
                    )));
                }
                self.late_policy = Some(policy);
            }
            "late.allowed-lateness" | "late.allowed_lateness" => {
                self.allowed_lateness = Some(duration()?);
            }
            "late.sink" => self.late_sink = Some(value.to_lowercase()),
            "table.exec.state.ttl" | "state.ttl" => {
                self.state_ttl = Some(duration()?).filter(|d| d.0 > 0);
            }
            "state.buffer-size" => {
                self.buffer_bytes =
                    Some(memory_size(value).map_err(|m| here.invalid(format!("'{key}': {m}")))?);
            }
            "state.backend" | "state.redis.url" | "state.redis.prefix" | "state.redis.password" => {
                self.set_state_backend(&lower, value, here)?;
            }
            "watermark.interval" => self.watermark_interval = Some(duration()?),
            "checkpoint.interval" | "execution.checkpointing.interval" => {
                let d = duration()?;
                if d.0 == 0 {
                    return Err(here.invalid(format!("'{key}' must be at least 1ms")));
                }
                self.checkpoint_interval = Some(d);
            }
            "checkpoint.dir" | "state.checkpoints.dir" => {
                if value.is_empty() {
                    return Err(here.invalid(format!("'{key}' must not be empty")));
                }
                self.checkpoint_dir = Some(value.to_owned());
            }
            "checkpoint.retain" | "state.checkpoints.num-retained" => {
                self.checkpoint_retain = Some(number("the number of checkpoints kept")?);
            }
            "checkpoint.timeout" | "execution.checkpointing.timeout" => {
                self.checkpoint_timeout = Some(duration()?);
            }
            "checkpoint.min-pause" | "execution.checkpointing.min-pause" => {
                self.checkpoint_min_pause = Some(duration()?);
            }
            "restart.attempts" | "restart-strategy.fixed-delay.attempts" => {
                self.restart_attempts = Some(value.parse::<u32>().map_err(|_| {
                    here.invalid(format!("'{key}' is a whole number, not '{value}'"))
                })?);
            }
            "restart.delay"
            | "restart-strategy.fixed-delay.delay"
            | "restart-strategy.exponential-delay.initial-backoff" => {
                self.restart_delay = Some(duration()?);
            }
            "restart.max-delay" | "restart-strategy.exponential-delay.max-backoff" => {
                self.restart_max_delay = Some(duration()?);
            }
            s3 if s3.starts_with("s3.") => {
                self.s3.set_sql(key, value).map_err(|m| here.invalid(m))?;
            }
            _ => {
                let known = KEYS.split(", ").map(|k| k.trim_matches(['\'', ' ', '\\']));
                return Err(here.invalid(format!(
                    "unknown option '{key}'{}; known: {KEYS}",
                    did_you_mean(key, known)
                )));
            }
        }
        Ok(())
    }

    /// The `late` option of window operators.
    pub(crate) fn late_options(&self) -> serde_json::Value {
        let mut late = serde_json::json!({
            "policy": self.late_policy.clone().unwrap_or_else(|| "drop".to_owned()),
        });
        if let Some(lateness) = self.allowed_lateness {
            late["allowed_lateness"] = serde_json::json!(lateness.0);
        }
        late
    }

    /// `SET 'state.backend'` (`redb` or `redis`) and the Redis server's `'state.redis.url'`,
    /// `'state.redis.prefix'` and `'state.redis.password'`.
    fn set_state_backend(&mut self, key: &str, value: &str, here: &Here) -> Result<()> {
        self.state_backend_at.get_or_insert_with(|| here.clone());
        let redis = || weir_plan::RedisStateSpec {
            url: String::new(),
            prefix: None,
            password: None,
        };
        match key {
            "state.backend" => {
                self.state_backend.backend =
                    weir_plan::StateBackendKind::parse(value).ok_or_else(|| {
                        here.invalid(format!("'state.backend' is redb or redis, not '{value}'"))
                    })?;
            }
            "state.redis.url" => {
                self.state_backend.redis.get_or_insert_with(redis).url = value.to_owned();
            }
            "state.redis.password" => {
                self.state_backend.redis.get_or_insert_with(redis).password =
                    Some(value.to_owned());
            }
            _ => {
                self.state_backend.redis.get_or_insert_with(redis).prefix = Some(value.to_owned());
            }
        }
        Ok(())
    }

    /// Checks combinations of options once the script is read.
    pub(crate) fn check(&self, here: &Here) -> Result<()> {
        if let Some(at) = &self.state_backend_at {
            let state = &self.state_backend;
            let url = state.redis.as_ref().map(|r| r.url.as_str());
            match (state.backend, url) {
                (weir_plan::StateBackendKind::Redb, Some(_)) => {
                    return Err(at.invalid(
                        "'state.redis.*' options apply to SET 'state.backend' = 'redis'",
                    ));
                }
                (weir_plan::StateBackendKind::Redis, None | Some("")) => {
                    return Err(at.invalid(
                        "'state.backend' = 'redis' needs the server: SET 'state.redis.url' = \
                         'redis://HOST:PORT'",
                    ));
                }
                _ => {
                    state.validate("SET").map_err(|e| match e {
                        weir_plan::Error::Spec { path, message, .. } => {
                            at.invalid(format!("'{path}' {message}"))
                        }
                        other => at.invalid(other.to_string()),
                    })?;
                }
            }
        }
        let uses_checkpoints = self.checkpoint_dir.is_some()
            || self.checkpoint_retain.is_some()
            || self.checkpoint_timeout.is_some()
            || self.checkpoint_min_pause.is_some()
            || self.restart_attempts.is_some()
            || self.restart_delay.is_some();
        if uses_checkpoints && self.checkpoint_interval.is_none() {
            let at = self.checkpoint_at.as_ref().unwrap_or(here);
            return Err(at.invalid(
                "checkpoint and restart options need 'checkpoint.interval' (e.g. SET \
                 'checkpoint.interval' = '1s'): without it the job takes no checkpoints",
            ));
        }
        let here = self.late_at.as_ref().unwrap_or(here);
        match (self.late_policy.as_deref(), &self.late_sink) {
            (Some("route"), None) => Err(here.invalid(
                "'late.policy' = 'route' needs 'late.sink' = '<table>': the table that receives \
                 late rows (the input's columns plus __weir_late_reason)",
            )),
            (p, Some(_)) if p != Some("route") => {
                Err(here.invalid("'late.sink' is only used with 'late.policy' = 'route'"))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Position;

    fn here() -> Here {
        Here {
            file: "t.sql".into(),
            position: Position { line: 2, column: 5 },
        }
    }

    #[test]
    fn memory_sizes_read_as_flink_writes_them() {
        assert_eq!(memory_size("1024"), Ok(1024));
        assert_eq!(memory_size("64mb"), Ok(64 << 20));
        assert_eq!(memory_size("1 GB"), Ok(1 << 30));
        assert_eq!(memory_size("512k"), Ok(512 << 10));
        assert!(memory_size("lots").unwrap_err().contains("'64mb'"));
        assert!(memory_size("2mib").is_err());
        assert!(memory_size("99999999999tb").unwrap_err().contains("2^64"));
        let mut s = Settings::default();
        s.set("state.buffer-size", "256mb", &here()).unwrap();
        assert_eq!(s.buffer_bytes, Some(256 << 20));
        let err = s.set("state.buffer-size", "-1", &here()).unwrap_err();
        assert!(err.to_string().starts_with("t.sql:2:5:"), "{err}");
    }

    #[test]
    fn set_chooses_the_state_backend_and_names_what_is_missing() {
        let mut s = Settings::default();
        s.set("state.backend", "Redis", &here()).unwrap();
        let err = s.check(&here()).unwrap_err().to_string();
        assert!(
            err.starts_with("t.sql:2:5:") && err.contains("'state.redis.url'"),
            "{err}"
        );
        s.set("state.redis.url", "redis://127.0.0.1:6379/2", &here())
            .unwrap();
        s.set("state.redis.prefix", "team", &here()).unwrap();
        s.check(&here()).unwrap();
        assert_eq!(
            serde_json::to_value(&s.state_backend).unwrap(),
            serde_json::json!({"backend": "redis",
                "redis": {"url": "redis://127.0.0.1:6379/2", "prefix": "team"}})
        );
        let err = Settings::default()
            .set("state.backend", "rocksdb", &here())
            .unwrap_err()
            .to_string();
        assert!(err.contains("redb or redis"), "{err}");
        let mut bad = Settings::default();
        bad.set("state.backend", "redis", &here()).unwrap();
        bad.set("state.redis.url", "localhost:6379", &here())
            .unwrap();
        assert!(
            bad.check(&here())
                .unwrap_err()
                .to_string()
                .contains("redis:// URL")
        );
    }

    #[test]
    fn set_reads_job_options_and_refuses_the_rest() {
        let mut s = Settings::default();
        s.set("parallelism", "4", &here()).unwrap();
        s.set("state.shards", "64", &here()).unwrap();
        s.set("semantic.mode", "at_least_once", &here()).unwrap();
        s.set("late.policy", "update", &here()).unwrap();
        s.set("late.allowed-lateness", "5s", &here()).unwrap();
        assert_eq!(s.parallelism, Some(4));
        assert_eq!(s.state_shards, Some(64));
        assert_eq!(s.semantic_mode, Some(SemanticMode::AtLeastOnce));
        assert_eq!(
            s.late_options(),
            serde_json::json!({"policy": "update", "allowed_lateness": 5000})
        );
        s.check(&here()).unwrap();

        let err = |key: &str, value: &str| {
            Settings::default()
                .set(key, value, &here())
                .unwrap_err()
                .to_string()
        };
        assert!(err("parallelism", "0").starts_with("t.sql:2:5:"));
        assert!(err("semantic.mode", "sometimes").contains("AT_LEAST_ONCE"));
        assert!(err("checkpoint.interval", "0ms").contains("at least 1ms"));
        assert!(err("checkpoint.retain", "none").contains("whole number"));
        let mut cp = Settings::default();
        cp.set("checkpoint.dir", "/tmp/cp", &here()).unwrap();
        assert!(
            cp.check(&here())
                .unwrap_err()
                .to_string()
                .contains("'checkpoint.interval'")
        );
        cp.set("checkpoint.interval", "200ms", &here()).unwrap();
        cp.set("restart.attempts", "5", &here()).unwrap();
        cp.set("execution.checkpointing.min-pause", "500ms", &here())
            .unwrap();
        assert_eq!(cp.checkpoint_min_pause, Some(DurationMs(500)));
        cp.check(&here()).unwrap();
        assert_eq!(cp.checkpoint_interval, Some(DurationMs(200)));
        assert_eq!(cp.restart_attempts, Some(5));
        cp.set(
            "restart-strategy.exponential-delay.max-backoff",
            "1min",
            &here(),
        )
        .unwrap();
        assert_eq!(cp.restart_max_delay, Some(DurationMs(60_000)));
        assert!(err("wibble", "1").contains("known:"));
        let mut route = Settings::default();
        route.set("late.policy", "route", &here()).unwrap();
        assert!(
            route
                .check(&here())
                .unwrap_err()
                .to_string()
                .contains("late.sink")
        );
    }
}
