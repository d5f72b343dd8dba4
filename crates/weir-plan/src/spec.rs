//! The job spec: the YAML/JSON file format users write (the Rust builder is in `spec_builder`).
//!
//! Both front ends produce the same [`JobSpec`] value, which [`crate::StreamModel::from_spec`]
//! compiles; there is no second path into the model.

use crate::error::{Error, Result};
use crate::schema_spec::FieldSpec;
use serde::{Deserialize, Serialize};
use std::path::Path;
use weir_api::{BadRecordPolicy, DurationMs, S3Options, SemanticMode};

/// A whole job as written in a spec file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// Job id, stable across restarts (`[A-Za-z0-9_-]`). Defaults to the file's stem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// Pipeline lineage id; defaults to the job id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<String>,
    /// Default parallelism of every node (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<u32>,
    /// Number of logical state shards of every keyed vertex (default 128); fixed for the job's life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_shards: Option<u32>,
    /// Capacity of each channel in messages (default 16); a full channel blocks its producer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_capacity: Option<u32>,
    /// The delivery guarantee the job requires; validation refuses connectors that cannot give it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semantic_mode: Option<SemanticMode>,
    /// Epoch checkpoints; absent: the job takes none (and cannot restart from one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<CheckpointSpec>,
    /// How often the job restarts by itself from its latest checkpoint after a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<RestartSpec>,
    /// Which engine holds keyed state (absent: redb); part of no plan or fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<crate::StateBackendSpec>,
    /// Sources.
    #[serde(default)]
    pub sources: Vec<SourceSpec>,
    /// Operators between sources and sinks.
    #[serde(default)]
    pub operators: Vec<OperatorSpec>,
    /// Sinks.
    #[serde(default)]
    pub sinks: Vec<SinkSpec>,
}

/// The `checkpoint` section: when and where the job takes epoch checkpoints. It is execution
/// configuration, not part of the job's logic: it does not change any plan fingerprint, so a job
/// can change its interval or storage and still restore its checkpoints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointSpec {
    /// Time between the start of one epoch and the trigger of the next (`"1s"`, `"200ms"`).
    pub interval: DurationMs,
    /// Where manifests, state segments and the epoch log go: a local directory, a `file://`
    /// URL or an `s3://bucket/prefix` URL (a Rust user can pass any other store through the
    /// runtime's `RunOptions`). Default: `weir-checkpoints` in the working
    /// directory. `weir run --checkpoint-dir` overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    /// How to reach the server of an `s3://` checkpoint directory (endpoint, region,
    /// credentials, path style); unset fields come from the AWS environment variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3Options>,
    /// Durable checkpoints kept per namespace (default 3); savepoints are never deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retain: Option<u32>,
    /// An epoch not durable after this long is aborted (default 10 minutes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<DurationMs>,
    /// Least time between the end of one epoch and the start of the next periodic one
    /// (default 0): a job whose epochs take longer than `interval` still gets time to work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_pause: Option<DurationMs>,
}

/// Default number of durable checkpoints retention keeps.
pub const DEFAULT_CHECKPOINT_RETAIN: u32 = 3;
/// Default time after which an epoch that is not durable is aborted.
pub const DEFAULT_CHECKPOINT_TIMEOUT: DurationMs = DurationMs(600_000);

/// The `restart` section: the bounded restart policy (global restart from the
/// newest durable epoch). Only a job with checkpoints restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestartSpec {
    /// Restarts allowed after failures before the job fails for good (default 3; 0: never).
    pub attempts: u32,
    /// Wait before each restart (default 1 s); with `max_delay`, before the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<DurationMs>,
    /// Exponential backoff: each further restart waits twice as long as the one before, up to
    /// this (as Flink's exponential-delay strategy does), so that a system that stays down is
    /// not hammered; absent: every restart waits `delay`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_delay: Option<DurationMs>,
}

impl RestartSpec {
    /// The policy in force for a job that declares `declared`: none unless it checkpoints,
    /// otherwise the declared one or [`DEFAULT_RESTART_ATTEMPTS`] attempts
    /// [`DEFAULT_RESTART_DELAY`] apart.
    pub fn in_force(checkpoints: bool, declared: Option<RestartSpec>) -> Option<RestartSpec> {
        checkpoints.then(|| {
            declared.unwrap_or(RestartSpec {
                attempts: DEFAULT_RESTART_ATTEMPTS,
                delay: None,
                max_delay: None,
            })
        })
    }

    /// The wait before restart number `n` (1-based).
    pub fn delay_before(&self, n: u32) -> DurationMs {
        let first = self.delay.unwrap_or(DEFAULT_RESTART_DELAY);
        match self.max_delay {
            None => first,
            Some(max) => {
                let doubled = first
                    .0
                    .saturating_mul(1u64.checked_shl(n.saturating_sub(1)).unwrap_or(u64::MAX));
                DurationMs(doubled.min(max.0))
            }
        }
    }
}

/// Default restarts of a job with checkpoints.
pub const DEFAULT_RESTART_ATTEMPTS: u32 = 3;
/// Default wait before a restart.
pub const DEFAULT_RESTART_DELAY: DurationMs = DurationMs(1_000);

/// Checks the `checkpoint` and `restart` sections; errors name the field's JSON path.
pub(crate) fn check_execution(spec: &JobSpec, file: &str) -> Result<()> {
    let err = |path: &str, message: &str| Error::Spec {
        file: file.to_owned(),
        path: path.to_owned(),
        message: message.to_owned(),
    };
    if let Some(c) = &spec.checkpoint {
        if c.interval.0 == 0 {
            return Err(err("checkpoint.interval", "must be at least 1ms"));
        }
        if c.retain == Some(0) {
            return Err(err("checkpoint.retain", "must keep at least 1 checkpoint"));
        }
        if c.timeout.is_some_and(|t| t.0 == 0) {
            return Err(err("checkpoint.timeout", "must be at least 1ms"));
        }
        if c.dir.as_deref().is_some_and(str::is_empty) {
            return Err(err("checkpoint.dir", "must not be empty"));
        }
        if let Some(s3) = &c.s3 {
            if let Some(dir) = c.dir.as_deref().filter(|d| !weir_api::is_s3_url(d)) {
                return Err(err(
                    "checkpoint.s3",
                    &format!("S3 options apply to an s3:// directory, but `dir` is `{dir}`"),
                ));
            }
            s3.validate("checkpoint.s3").map_err(|e| match e {
                weir_api::Error::Config { path, message } => Error::Spec {
                    file: file.to_owned(),
                    path,
                    message,
                },
                other => Error::Spec {
                    file: file.to_owned(),
                    path: "checkpoint.s3".to_owned(),
                    message: other.to_string(),
                },
            })?;
        }
    }
    if let Some(state) = &spec.state {
        state.validate(file)?;
    }
    if spec.restart.is_some() && spec.checkpoint.is_none() {
        return Err(err(
            "restart",
            "a job restarts from its latest checkpoint: add a `checkpoint` section",
        ));
    }
    if let Some(r) = &spec.restart
        && let Some(max) = r.max_delay
        && max.0 < r.delay.unwrap_or(DEFAULT_RESTART_DELAY).0
    {
        return Err(err(
            "restart.max_delay",
            "must be at least `delay` (the wait before the first restart, 1 s by default)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod restart_tests {
    use super::*;

    #[test]
    fn restarts_back_off_exponentially_up_to_the_maximum() {
        let fixed = RestartSpec {
            attempts: 5,
            delay: Some(DurationMs(500)),
            max_delay: None,
        };
        assert_eq!(fixed.delay_before(1), DurationMs(500));
        assert_eq!(fixed.delay_before(4), DurationMs(500));
        let backoff = RestartSpec {
            max_delay: Some(DurationMs(3_000)),
            ..fixed
        };
        let waits: Vec<u64> = (1..=5).map(|n| backoff.delay_before(n).0).collect();
        assert_eq!(waits, [500, 1_000, 2_000, 3_000, 3_000]);
        assert_eq!(backoff.delay_before(u32::MAX), DurationMs(3_000));
    }
}

/// A source node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceSpec {
    /// Node name, unique in the job; other nodes use it as input. Without a name (Rust builder
    /// only) the operator id is a structural hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Explicit stable operator id; wins over the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Connector type (`file`, `datagen`, ...).
    pub connector: String,
    /// Parallelism of this node (default: the job's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<u32>,
    /// Declared columns; when absent the connector infers them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Vec<FieldSpec>>,
    /// The columns of the connector's (declared or inferred) schema the job reads, by name;
    /// the source emits only these, in schema order, followed by its computed columns, and
    /// connectors that can decode only them (CSV, JSON lines, Parquet files) do. Absent: all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub columns: Option<Vec<String>>,
    /// Predicate pushdown: conditions on the connector's columns, all of which the rows the
    /// job keeps satisfy (it filters them after the source anyway), so that a connector that
    /// can (Parquet files) skips input no row of which can satisfy them. Absent: no pruning.
    /// Refused together with `watermark` (a skipped row would not advance the watermark).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prune: Option<Vec<weir_api::PruneCondition>>,
    /// What to do with unreadable records (`fail` or `dead_letter`).
    #[serde(default, skip_serializing_if = "is_default_policy")]
    pub bad_records: BadRecordPolicy,
    /// Event-time watermarks generated per split from one of the source's columns; without it
    /// the source emits only the final watermark when its input ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watermark: Option<WatermarkSpec>,
    /// Columns computed from SQL expressions and appended to every batch the connector reads,
    /// in order, before watermarks are generated (so `watermark.column` may name one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub computed: Vec<ComputedColumn>,
    /// Connector options.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub options: serde_json::Value,
}

/// A source column computed from the connector's columns: `ts AS to_timestamp_millis(date_time)`
/// in SQL DDL terms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComputedColumn {
    /// The new column's name; it must not be the name of another column of the source.
    pub name: String,
    /// A row-by-row SQL expression (DataFusion syntax, without `AS`) over the source's declared
    /// or inferred columns and the computed columns before this one.
    pub expression: String,
}

impl ComputedColumn {
    /// The column `name` computed as `expression`.
    pub fn new(name: &str, expression: &str) -> Self {
        ComputedColumn {
            name: name.to_owned(),
            expression: expression.to_owned(),
        }
    }
}

/// Emission granularity of source watermarks when `interval` is not set: 200 ms of event time.
pub const DEFAULT_WATERMARK_INTERVAL: DurationMs = DurationMs(200);

/// How a source derives watermarks from an event-time column (docs/event-time.md).
///
/// Each split's watermark is `max event time seen - max_out_of_orderness - 1`
/// ([`weir_api::watermark_for`]); the source's is the minimum over its active splits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatermarkSpec {
    /// The event-time column: `Int64` milliseconds or a `Timestamp` of any unit and zone.
    pub column: String,
    /// How far out of order events may arrive (default 0: only the maximum seen is on time).
    #[serde(default)]
    pub max_out_of_orderness: DurationMs,
    /// A split that delivers nothing for this long (processing time) stops holding the
    /// watermark back until its next data. Absent: a silent split holds it back for ever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<DurationMs>,
    /// Emission granularity in event time: a split's watermark is emitted when it advanced by
    /// at least this much since the last one emitted (default 200 ms; 0 or 1: on every advance).
    #[serde(default = "default_watermark_interval")]
    pub interval: DurationMs,
    /// Watermark alignment: a source subtask whose watermark is more than this ahead of the
    /// lowest watermark of the source's other running subtasks pauses reading until they catch
    /// up, so that downstream windows do not hold state for the gap. Absent: no alignment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_drift: Option<DurationMs>,
    /// Which watermark a row is late against: its own split's (the default, so that results do
    /// not depend on how the reads of several splits interleave) or the operator's merged one
    /// (Flink's rule).
    #[serde(default, skip_serializing_if = "Lateness::is_default")]
    pub lateness: Lateness,
}

/// Which watermark decides that a row is late (docs/event-time.md#lateness-per-split).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lateness {
    /// A row is late when it is behind the watermark of the split it was read from (or behind
    /// the operator's watermark, which never runs ahead of it). Which rows are late then
    /// depends only on each split's own rows, never on how fast the other splits were read.
    #[default]
    Split,
    /// A row is late when it is behind the operator's watermark: the minimum over all splits
    /// and inputs, as in Flink. With several splits read at once, which rows are late depends
    /// on how the reads interleave.
    Merged,
}

impl Lateness {
    /// Whether this is the default ([`Lateness::Split`]), which plans leave out.
    pub fn is_default(&self) -> bool {
        *self == Lateness::Split
    }
}

fn default_watermark_interval() -> DurationMs {
    DEFAULT_WATERMARK_INTERVAL
}

impl WatermarkSpec {
    /// Watermarks from `column` with no out-of-orderness, no idle timeout and the default
    /// interval.
    pub fn new(column: &str) -> Self {
        WatermarkSpec {
            column: column.to_owned(),
            max_out_of_orderness: DurationMs(0),
            idle_timeout: None,
            interval: DEFAULT_WATERMARK_INTERVAL,
            max_drift: None,
            lateness: Lateness::Split,
        }
    }

    /// Sets which watermark decides that a row is late.
    pub fn lateness(mut self, lateness: Lateness) -> Self {
        self.lateness = lateness;
        self
    }

    /// Sets how far out of order events may arrive.
    pub fn max_out_of_orderness(mut self, duration: DurationMs) -> Self {
        self.max_out_of_orderness = duration;
        self
    }

    /// Sets the watermark alignment bound between the source's subtasks.
    pub fn max_drift(mut self, duration: DurationMs) -> Self {
        self.max_drift = Some(duration);
        self
    }

    /// Sets the idle timeout of a split.
    pub fn idle_timeout(mut self, duration: DurationMs) -> Self {
        self.idle_timeout = Some(duration);
        self
    }

    /// Sets the emission granularity in event time.
    pub fn interval(mut self, duration: DurationMs) -> Self {
        self.interval = duration;
        self
    }
}

fn is_default_policy(p: &BadRecordPolicy) -> bool {
    *p == BadRecordPolicy::Fail
}

/// An operator node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorSpec {
    /// Node name, unique in the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Explicit stable operator id; wins over the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Operator type: a built-in (`filter`, `project`, `union`) or a registered plugin's name.
    #[serde(rename = "type")]
    pub type_name: String,
    /// The single input (shorthand for `inputs: [x]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<InputSpec>,
    /// Inputs, in input order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputSpec>,
    /// How rows reach this node from every input that does not say otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<PartitionSpec>,
    /// Parallelism of this node (default: the job's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<u32>,
    /// Operator options.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub options: serde_json::Value,
}

/// A sink node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkSpec {
    /// Node name, unique in the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Explicit stable operator id; wins over the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Connector type (`file`, `blackhole`, ...).
    pub connector: String,
    /// The single input (shorthand for `inputs: [x]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<InputSpec>,
    /// Inputs; several are unioned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputSpec>,
    /// How rows reach this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<PartitionSpec>,
    /// Parallelism of this node (default: the job's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<u32>,
    /// Connector options.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub options: serde_json::Value,
}

/// A reference to an upstream node: `name`, `name.side_output`, or `{from, partition}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum InputSpec {
    /// `name` or `name.side_output`.
    Name(String),
    /// Input with its own partitioning.
    Detailed {
        /// `name` or `name.side_output`.
        from: String,
        /// How rows of this input are distributed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        partition: Option<PartitionSpec>,
    },
}

/// The object form of an input, read field by field so errors name the bad field.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DetailedInput {
    from: String,
    #[serde(default)]
    partition: Option<PartitionSpec>,
}

impl<'de> Deserialize<'de> for InputSpec {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = InputSpec;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a node name, `node.output`, or `{ from: node, partition: ... }`")
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<InputSpec, E> {
                Ok(InputSpec::Name(v.to_owned()))
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> std::result::Result<InputSpec, A::Error> {
                let d =
                    DetailedInput::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(InputSpec::Detailed {
                    from: d.from,
                    partition: d.partition,
                })
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl InputSpec {
    /// The referenced `name` or `name.side_output`.
    pub fn from(&self) -> &str {
        match self {
            InputSpec::Name(n) => n,
            InputSpec::Detailed { from, .. } => from,
        }
    }

    /// The partitioning given on this input, if any.
    pub fn partition(&self) -> Option<&PartitionSpec> {
        match self {
            InputSpec::Name(_) => None,
            InputSpec::Detailed { partition, .. } => partition.as_ref(),
        }
    }
}

/// How rows travel along an edge, as written in a spec: `forward`, `rebalance`, `broadcast`,
/// `singleton`, or `{ hash: [key, ...] }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", try_from = "PartitionRepr")]
pub enum PartitionSpec {
    /// Subtask i sends to subtask i (equal parallelism).
    Forward,
    /// Batches round-robin over all downstream subtasks.
    Rebalance,
    /// Every batch to every downstream subtask.
    Broadcast,
    /// Everything to one downstream subtask (forces parallelism 1).
    Singleton,
    /// Rows by key: key -> state shard -> owner subtask.
    Hash(Vec<String>),
}

/// The accepted spellings of a [`PartitionSpec`]; YAML parsers differ in how they read
/// externally tagged enums, so the map form is read explicitly.
#[derive(Deserialize)]
#[serde(untagged)]
enum PartitionRepr {
    Name(String),
    Hash { hash: Vec<String> },
}

impl TryFrom<PartitionRepr> for PartitionSpec {
    type Error = String;

    fn try_from(repr: PartitionRepr) -> std::result::Result<Self, String> {
        match repr {
            PartitionRepr::Hash { hash } => Ok(PartitionSpec::Hash(hash)),
            PartitionRepr::Name(name) => match name.as_str() {
                "forward" => Ok(PartitionSpec::Forward),
                "rebalance" => Ok(PartitionSpec::Rebalance),
                "broadcast" => Ok(PartitionSpec::Broadcast),
                "singleton" => Ok(PartitionSpec::Singleton),
                other => Err(format!(
                    "unknown partitioning `{other}` (use forward, rebalance, broadcast, \
                     singleton or {{ hash: [columns] }})"
                )),
            },
        }
    }
}

/// Where a spec came from, for error messages.
pub(crate) const BUILDER_ORIGIN: &str = "<builder>";

impl JobSpec {
    /// Reads a spec file; `.json` is JSON, anything else YAML (YAML is a superset of JSON).
    ///
    /// # Errors
    /// [`Error::Syntax`] with line and column for malformed files, [`Error::Spec`] with the JSON
    /// path of a field of the wrong shape.
    pub fn from_file(path: &Path) -> Result<JobSpec> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| Error::Spec {
            file: file.clone(),
            path: "$".into(),
            message: format!("cannot read the file: {e}"),
        })?;
        let mut spec = if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        {
            Self::from_json_str(&text, &file)?
        } else {
            Self::from_yaml_str(&text, &file)?
        };
        if spec.job.is_none() {
            spec.job = path
                .file_stem()
                .map(|s| s.to_string_lossy().replace(['.', ' '], "-"));
        }
        Ok(spec)
    }

    /// Parses YAML text; `file` names the source in errors.
    ///
    /// # Errors
    /// As [`JobSpec::from_file`].
    pub fn from_yaml_str(text: &str, file: &str) -> Result<JobSpec> {
        let de = serde_yaml::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|err| {
            let path = err.path().to_string();
            let inner = err.into_inner();
            let message = inner.to_string();
            // serde_yaml prefixes errors about a value with that value's path; scanner errors have none.
            let semantic = path != "."
                && message
                    .split_once(": ")
                    .is_some_and(|(head, _)| path.starts_with(head));
            match inner.location() {
                Some(loc) if !semantic => Error::Syntax {
                    file: file.to_owned(),
                    line: loc.line(),
                    column: loc.column(),
                    message,
                },
                _ => Error::Spec {
                    file: file.to_owned(),
                    path: display_path(&path),
                    // serde_yaml starts the message with a path of its own; ours is in `path`.
                    message: message
                        .split_once(": ")
                        .filter(|(head, _)| path.starts_with(head))
                        .map_or(message.clone(), |(_, rest)| rest.to_owned()),
                },
            }
        })
    }

    /// Parses JSON text; `file` names the source in errors.
    ///
    /// # Errors
    /// As [`JobSpec::from_file`].
    pub fn from_json_str(text: &str, file: &str) -> Result<JobSpec> {
        let mut de = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(&mut de).map_err(|err| {
            let path = err.path().to_string();
            let inner = err.into_inner();
            if inner.is_syntax() || inner.is_eof() || path == "." {
                Error::Syntax {
                    file: file.to_owned(),
                    line: inner.line(),
                    column: inner.column(),
                    message: inner.to_string(),
                }
            } else {
                Error::Spec {
                    file: file.to_owned(),
                    path: display_path(&path),
                    message: inner.to_string(),
                }
            }
        })
    }
}

fn display_path(path: &str) -> String {
    if path == "." {
        "$".to_owned()
    } else {
        path.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = r#"
job: demo
parallelism: 2
sources:
  - name: bids
    connector: file
    options: { path: data/bids.csv, format: csv }
operators:
  - name: expensive
    type: filter
    input: bids
    options: { predicate: "price > 1000" }
  - name: by_auction
    type: project
    input: { from: expensive, partition: { hash: [auction] } }
    options: { expressions: ["auction", "price * 0.908 AS euro"] }
sinks:
  - name: out
    connector: file
    input: by_auction
    options: { path: out/, format: parquet }
"#;

    #[test]
    fn parses_yaml() {
        let spec = JobSpec::from_yaml_str(YAML, "demo.yaml").expect("valid");
        assert_eq!(spec.parallelism, Some(2));
        assert_eq!(spec.operators.len(), 2);
        assert_eq!(
            spec.operators[1].input.as_ref().and_then(|i| i.partition()),
            Some(&PartitionSpec::Hash(vec!["auction".into()]))
        );
    }

    #[test]
    fn partition_is_read_on_nodes_and_inputs() {
        let yaml = YAML.replace(
            "    input: { from: expensive, partition: { hash: [auction] } }",
            "    input: expensive\n    partition: { hash: [auction] }",
        );
        let spec = JobSpec::from_yaml_str(&yaml, "demo.yaml").expect("valid");
        assert_eq!(
            spec.operators[1].partition,
            Some(PartitionSpec::Hash(vec!["auction".into()]))
        );
        let block = YAML.replace(
            "    input: { from: expensive, partition: { hash: [auction] } }",
            "    input: expensive\n    partition:\n      hash:\n        - auction",
        );
        let spec = JobSpec::from_yaml_str(&block, "demo.yaml").expect("valid");
        assert!(matches!(
            spec.operators[1].partition,
            Some(PartitionSpec::Hash(_))
        ));
        for bad in [
            YAML.replace("partition: { hash: [auction] }", "partition: shuffle"),
            yaml.replace("partition: { hash: [auction] }", "partition: shuffle"),
        ] {
            let err = JobSpec::from_yaml_str(&bad, "demo.yaml").unwrap_err();
            assert!(
                err.to_string().contains("unknown partitioning `shuffle`"),
                "{err}"
            );
            assert!(err.to_string().contains("operators[1]"), "{err}");
        }
        // Serialized specs read back the same.
        let json = serde_json::to_string(&spec).expect("serializes");
        assert_eq!(
            JobSpec::from_json_str(&json, "x.json").expect("reads"),
            spec
        );
    }

    #[test]
    fn watermark_spec_parses_with_defaults_and_durations() {
        let yaml = YAML.replace(
            "    connector: file\n    options: { path: data/bids.csv",
            "    connector: file\n    watermark: { column: ts, max_out_of_orderness: 5s, \
             idle_timeout: 250ms, max_drift: 30s }\n    options: { path: data/bids.csv",
        );
        let spec = JobSpec::from_yaml_str(&yaml, "demo.yaml").expect("valid");
        let w = spec.sources[0].watermark.clone().expect("watermark");
        assert_eq!(
            w,
            WatermarkSpec::new("ts")
                .max_out_of_orderness(DurationMs(5_000))
                .idle_timeout(DurationMs(250))
                .max_drift(DurationMs(30_000))
        );
        assert_eq!(w.interval, DEFAULT_WATERMARK_INTERVAL);
        let json = serde_json::to_string(&spec).expect("serializes");
        assert_eq!(
            JobSpec::from_json_str(&json, "x.json").expect("reads"),
            spec
        );

        let model = crate::StreamModel::from_spec(&spec, Some("demo.yaml")).expect("model");
        let node = serde_json::to_value(&model.nodes[0]).expect("node");
        assert_eq!(
            node["watermark"],
            serde_json::json!({
                "column": "ts", "maxOutOfOrderness": 5000, "idleTimeout": 250, "interval": 200,
                "maxDrift": 30000
            })
        );
        // A node without watermarks has no `watermark` key at all (fingerprints stay).
        assert!(
            serde_json::to_value(&model.nodes[1])
                .expect("node")
                .get("watermark")
                .is_none()
        );
    }

    #[test]
    fn watermark_spec_errors_name_their_field() {
        let with = |w: &str| {
            YAML.replace(
                "    connector: file\n    options: { path: data/bids.csv",
                &format!(
                    "    connector: file\n    watermark: {w}\n    options: {{ path: data/bids.csv"
                ),
            )
        };
        for (w, path, wanted) in [
            (
                "{ column: ts, interval: 2x }",
                "sources[0].watermark.interval",
                "invalid duration",
            ),
            (
                "{ column: ts, lateness: 1s }",
                "sources[0].watermark",
                "lateness",
            ),
            (
                "{ max_out_of_orderness: 1s }",
                "sources[0].watermark",
                "column",
            ),
        ] {
            let err = JobSpec::from_yaml_str(&with(w), "demo.yaml").expect_err(w);
            let text = err.to_string();
            assert!(text.contains(path) && text.contains(wanted), "{w}: {text}");
        }
        for (w, path) in [
            ("{ column: '' }", "sources[0].watermark.column"),
            (
                "{ column: ts, idle_timeout: 0 }",
                "sources[0].watermark.idle_timeout",
            ),
            (
                "{ column: ts, max_drift: 0 }",
                "sources[0].watermark.max_drift",
            ),
        ] {
            let spec = JobSpec::from_yaml_str(&with(w), "demo.yaml").expect("parses");
            let err = crate::StreamModel::from_spec(&spec, Some("demo.yaml")).expect_err(w);
            assert!(err.to_string().contains(path), "{w}: {err}");
        }
    }

    #[test]
    fn watermarks_are_part_of_the_fingerprint() {
        use crate::Plan;
        let plain = JobSpec::builder("wm")
            .source(SourceSpec::new(
                "gen",
                "datagen",
                serde_json::json!({ "rows": 1 }),
            ))
            .sink(SinkSpec::new(
                "out",
                "blackhole",
                "gen",
                serde_json::Value::Null,
            ))
            .build();
        let mut with = plain.clone();
        with.sources[0] = with.sources[0]
            .clone()
            .with_watermark(WatermarkSpec::new("ts").interval(DurationMs(1)));
        let model = |s: &JobSpec| crate::StreamModel::from_spec(s, None).expect("model");
        let (a, b) = (model(&plain), model(&with));
        assert_ne!(a.fingerprint(), b.fingerprint());
        assert_eq!(a.nodes[0].operator_id, b.nodes[0].operator_id);
        assert_eq!(
            b.nodes[0].watermark.as_ref().map(|w| w.interval),
            Some(DurationMs(1))
        );
    }

    #[test]
    fn wrong_field_names_its_path() {
        let bad = YAML.replace("type: filter", "typ: filter");
        let err = JobSpec::from_yaml_str(&bad, "demo.yaml").unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("demo.yaml: operators[0]"), "{msg}");
        assert!(msg.contains("typ"), "{msg}");
    }

    #[test]
    fn checkpoint_s3_options_are_checked_with_their_path() {
        let with = |section: &str| {
            let yaml = format!("{YAML}checkpoint:\n{section}");
            let spec = JobSpec::from_yaml_str(&yaml, "demo.yaml").expect("parses");
            check_execution(&spec, "demo.yaml").map(|()| spec)
        };
        let ok = with(
            "  interval: 1s\n  dir: s3://bucket/cp\n  s3:\n    endpoint: http://127.0.0.1:9000\n    \
             access_key_id: k\n    secret_access_key: s\n    path_style: true\n",
        )
        .expect("valid");
        let s3 = ok.checkpoint.and_then(|c| c.s3).expect("s3 options");
        assert_eq!(s3.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        let err = with("  interval: 1s\n  dir: /tmp/cp\n  s3: { region: eu-west-1 }\n")
            .expect_err("s3 options without an s3 dir");
        assert!(
            matches!(&err, Error::Spec { path, .. } if path == "checkpoint.s3"),
            "{err}"
        );
        let err = with("  interval: 1s\n  s3: { access_key_id: k }\n").expect_err("no secret");
        assert!(
            matches!(&err, Error::Spec { path, .. } if path == "checkpoint.s3.secret_access_key"),
            "{err}"
        );
        let err = JobSpec::from_yaml_str(
            &format!("{YAML}checkpoint: {{ interval: 1s, s3: {{ endpont: x }} }}\n"),
            "demo.yaml",
        )
        .expect_err("unknown field");
        assert!(err.to_string().contains("checkpoint.s3"), "{err}");
    }

    #[test]
    fn wrong_type_names_its_path() {
        let bad = YAML.replace("parallelism: 2", "parallelism: two");
        let err = JobSpec::from_yaml_str(&bad, "demo.yaml").unwrap_err();
        assert!(err.to_string().contains("parallelism"), "{err}");
    }

    #[test]
    fn yaml_syntax_error_names_line() {
        let err =
            JobSpec::from_yaml_str("job: demo\nsources: 'unterminated\n", "x.yaml").unwrap_err();
        assert!(
            matches!(err, Error::Syntax { line, .. } if line >= 1),
            "{err:?}"
        );
    }

    #[test]
    fn json_error_names_path_and_syntax_line() {
        let err =
            JobSpec::from_json_str(r#"{"sources": [{"connector": 5}]}"#, "j.json").unwrap_err();
        assert!(err.to_string().contains("sources[0].connector"), "{err}");
        let err = JobSpec::from_json_str("{\n  \"job\": \n", "j.json").unwrap_err();
        assert!(matches!(err, Error::Syntax { line: 3, .. }), "{err:?}");
    }
}
