//! Building the job spec: declared tables become sources and sinks (their `WITH` options read
//! as connector options in `options`), `SET` options become job options, and the translator's
//! operators are collected in order.

use crate::ddl::TableDef;
use crate::error::{Here, Position, Result, did_you_mean};
use crate::positions::SpecPositions;
use arrow::datatypes::SchemaRef;
use std::collections::{BTreeMap, BTreeSet};
use weir_api::{DurationMs, S3Options, SemanticMode};
use weir_plan::JobSpec;

mod changes;
mod options;

pub(crate) use changes::TableChanges;
use options::{Role, connector_options, record_table};

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

/// A declared table with its full schema (physical then computed columns).
#[derive(Debug, Clone)]
pub(crate) struct Table {
    pub(crate) def: TableDef,
    pub(crate) schema: SchemaRef,
}

/// The job under construction.
#[derive(Debug, Default)]
pub(crate) struct JobBuilder {
    pub(crate) tables: BTreeMap<String, Table>,
    sources: BTreeSet<String>,
    source_specs: Vec<serde_json::Value>,
    /// Per source table, the columns (physical or computed) some query reads.
    read_columns: BTreeMap<String, BTreeSet<String>>,
    /// Every scan of a source table by a query: the table, and the `prune` conditions the
    /// filters right over it give (all rows the query keeps satisfy them).
    scans: Vec<(String, Vec<serde_json::Value>)>,
    operators: Vec<serde_json::Value>,
    sinks: Vec<serde_json::Value>,
    /// Where each source and sink node, and each of their options, was written.
    positions: SpecPositions,
    /// How many statements have inserted into each table so far.
    statements: BTreeMap<String, usize>,
}

/// The nodes a spec node reads: its `input` or `inputs`, each a name or `{"from": name}`.
fn node_inputs(node: &serde_json::Value) -> Vec<String> {
    let one = |v: &serde_json::Value| v.as_str().or_else(|| v["from"].as_str()).map(str::to_owned);
    match (&node["input"], &node["inputs"]) {
        (serde_json::Value::Null, serde_json::Value::Array(items)) => {
            items.iter().filter_map(one).collect()
        }
        (input, _) => one(input).into_iter().collect(),
    }
}

/// Replaces every node reference in `value` (a name, `{"from": name}`, or a list of them) that
/// `rename` renames.
fn rename_references(value: &mut serde_json::Value, rename: &dyn Fn(&str) -> Option<String>) {
    match value {
        serde_json::Value::String(reference) => {
            if let Some(new) = rename(reference) {
                *reference = new;
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                rename_references(item, rename);
            }
        }
        serde_json::Value::Object(map) => {
            if let Some(from) = map.get_mut("from") {
                rename_references(from, rename);
            }
        }
        _ => {}
    }
}

/// The physical columns a source must read for the columns `read` of `def`: those read, those
/// its computed columns and its watermark use (every computed column is evaluated at the
/// source), at least one; `None` when that is all of them. A computed column's expression is
/// scanned for words that name a column, so a function named like a column reads it too.
fn source_columns(def: &TableDef, read: &BTreeSet<String>) -> Option<Vec<String>> {
    let mut needed: BTreeSet<&str> = BTreeSet::new();
    let names = |text: &str| -> Vec<String> {
        let dialect = datafusion::sql::sqlparser::dialect::GenericDialect {};
        datafusion::sql::sqlparser::tokenizer::Tokenizer::new(&dialect, text)
            .tokenize()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|t| match t {
                datafusion::sql::sqlparser::tokenizer::Token::Word(w) => Some(w.value),
                _ => None,
            })
            .collect()
    };
    let mut used: Vec<String> = read.iter().cloned().collect();
    for (_, expression, _) in &def.computed {
        used.extend(names(expression));
    }
    if let Some(w) = &def.watermark {
        used.push(w.column.clone());
    }
    for c in &def.columns {
        if used.iter().any(|u| u.eq_ignore_ascii_case(&c.name)) {
            needed.insert(&c.name);
        }
    }
    if needed.len() == def.columns.len() {
        return None;
    }
    let mut columns: Vec<String> = def
        .columns
        .iter()
        .filter(|c| needed.contains(c.name.as_str()))
        .map(|c| c.name.clone())
        .collect();
    if columns.is_empty() {
        // `SELECT COUNT(*)` reads no column, but rows must still be read.
        columns.extend(def.columns.first().map(|c| c.name.clone()));
    }
    Some(columns)
}

fn option<'a>(table: &'a TableDef, key: &str) -> Option<&'a str> {
    table.options.get(key).map(|(v, _)| v.as_str())
}

/// Fills the `s3` options of a `file` node on an `s3://` path with the job's `SET 's3.*'`
/// options its table does not set itself.
fn with_job_s3(node: &serde_json::Value, job: &S3Options) -> serde_json::Value {
    let mut node = node.clone();
    let on_s3 = node["connector"] == "file"
        && node["options"]["path"]
            .as_str()
            .is_some_and(weir_api::is_s3_url);
    if !on_s3 || job.is_empty() {
        return node;
    }
    let mut merged = serde_json::to_value(job).unwrap_or_default();
    if let (Some(m), Some(own)) = (
        merged.as_object_mut(),
        node["options"]["s3"].as_object().cloned(),
    ) {
        m.extend(own);
    }
    node["options"]["s3"] = merged;
    node
}

impl JobBuilder {
    /// The source node of `table`, created on first use (a table read by several INSERTs is
    /// read once).
    pub(crate) fn source(&mut self, table: &str, here: &Here) -> Result<String> {
        if self.sources.contains(table) {
            return Ok(table.to_owned());
        }
        let t = self
            .tables
            .get(table)
            .ok_or_else(|| here.invalid(format!("no table `{table}`")))?;
        let def = &t.def;
        let (connector, options) = connector_options(def, Role::Read)?;
        let schema: Vec<serde_json::Value> = def
            .columns
            .iter()
            .map(|c| serde_json::json!({"name": c.name, "type": c.type_name, "nullable": c.nullable}))
            .collect();
        let mut source = serde_json::json!({
            "name": def.name,
            "connector": connector,
            "schema": schema,
            "options": options,
        });
        if !def.computed.is_empty() {
            source["computed"] = serde_json::json!(
                def.computed
                    .iter()
                    .map(|(name, expr, _)| serde_json::json!({"name": name, "expression": expr}))
                    .collect::<Vec<_>>()
            );
        }
        if let Some(w) = &def.watermark {
            // Flink's `ts - INTERVAL d` watermark is `max - d`; Weir's is `max - ooo - 1`.
            let ooo = w.delay_ms.saturating_sub(1);
            let mut watermark = serde_json::json!({
                "column": w.column,
                "max_out_of_orderness": ooo,
            });
            if let Some(v) = option(def, "watermark.interval") {
                watermark["interval"] = serde_json::json!(v);
            }
            if let Some(v) =
                option(def, "watermark.idle-timeout").or(option(def, "scan.watermark.idle-timeout"))
            {
                watermark["idle_timeout"] = serde_json::json!(v);
            }
            if let Some(v) = option(def, "watermark.alignment.max-drift")
                .or(option(def, "scan.watermark.alignment.max-drift"))
            {
                watermark["max_drift"] = serde_json::json!(v);
            }
            if let Some(v) =
                option(def, "watermark.lateness").or(option(def, "scan.watermark.lateness"))
            {
                watermark["lateness"] = serde_json::json!(v);
            }
            source["watermark"] = watermark;
        }
        record_table(
            &mut self.positions,
            &format!("sources[{}]", self.source_specs.len()),
            def,
            Role::Read,
        );
        self.source_specs.push(source);
        self.sources.insert(table.to_owned());
        Ok(table.to_owned())
    }

    /// Records that a query reads `columns` (physical or computed) of the source `table`.
    pub(crate) fn reads(&mut self, table: &str, columns: impl IntoIterator<Item = String>) {
        self.read_columns
            .entry(table.to_owned())
            .or_default()
            .extend(columns);
    }

    /// A new scan of the source `table` by a query, without conditions yet; its index.
    pub(crate) fn scan(&mut self, table: &str) -> usize {
        self.scans.push((table.to_owned(), Vec::new()));
        self.scans.len() - 1
    }

    /// Records that every row scan `scan` passes on satisfies `conditions` (`prune` JSON).
    pub(crate) fn scan_conditions(&mut self, scan: usize, conditions: Vec<serde_json::Value>) {
        if let Some((_, known)) = self.scans.get_mut(scan) {
            for c in conditions {
                if !known.contains(&c) {
                    known.push(c);
                }
            }
        }
    }

    /// The physical (declared, not computed, not metadata) column `name` of the table scan
    /// `scan` reads, with its type.
    pub(crate) fn physical_column(
        &self,
        scan: usize,
        name: &str,
    ) -> Option<(String, arrow::datatypes::DataType)> {
        let (table, _) = self.scans.get(scan)?;
        let def = &self.tables.get(table)?.def;
        def.columns
            .iter()
            .find(|c| c.name == name && c.metadata.is_none())
            .map(|c| (c.name.clone(), c.data_type.clone()))
    }

    /// The `prune` conditions of source `table`: those every scan of it has; none for a table
    /// with a watermark (a skipped row would not advance it), nor for connectors other than
    /// `filesystem` (the one that prunes; its schema is exactly the declared columns), nor for
    /// files declared CSV or JSON lines (only Parquet readers prune: the plan would carry
    /// conditions nobody uses).
    fn prune_conditions(&self, table: &Table) -> Vec<serde_json::Value> {
        let files =
            option(&table.def, "connector").is_some_and(|c| c.eq_ignore_ascii_case("filesystem"));
        let text = option(&table.def, "format").is_some_and(|f| {
            ["csv", "json", "jsonl", "ndjson"]
                .iter()
                .any(|t| f.eq_ignore_ascii_case(t))
        });
        if table.def.watermark.is_some() || !files || text {
            return Vec::new();
        }
        let scans: Vec<Vec<serde_json::Value>> = self
            .scans
            .iter()
            .filter(|(t, _)| t == &table.def.name)
            .map(|(_, c)| c.clone())
            .collect();
        crate::prune::common(&scans)
    }

    /// The column names an INSERT into `table` writes, in order.
    pub(crate) fn sink_columns(&self, table: &str, here: &Here) -> Result<Vec<String>> {
        let t = self
            .tables
            .get(table)
            .ok_or_else(|| here.invalid(format!("no table `{table}`")))?;
        if !t.def.computed.is_empty() {
            return Err(here.invalid(format!(
                "table `{table}` has computed columns and cannot be written to"
            )));
        }
        Ok(t.def.columns.iter().map(|c| c.name.clone()).collect())
    }

    /// The Arrow types of the columns an INSERT into `table` writes, as `arrow_cast` names them.
    pub(crate) fn sink_types(&self, table: &str, here: &Here) -> Result<Vec<String>> {
        let t = self
            .tables
            .get(table)
            .ok_or_else(|| here.invalid(format!("no table `{table}`")))?;
        Ok(t.def
            .columns
            .iter()
            .map(|c| c.data_type.to_string())
            .collect())
    }

    /// A sink node writing `input` to `table`.
    /// The name of the next statement inserting into `table` (its nodes' prefix): the table's
    /// name, then `{table}_2`, `{table}_3`, ... for further statements into it.
    pub(crate) fn statement_name(&mut self, table: &str) -> String {
        let n = self.statements.entry(table.to_owned()).or_default();
        *n += 1;
        if *n == 1 {
            table.to_owned()
        } else {
            format!("{table}_{n}")
        }
    }

    pub(crate) fn sink(&mut self, name: &str, table: &str, input: &str, here: &Here) -> Result<()> {
        let t = self
            .tables
            .get(table)
            .ok_or_else(|| here.invalid(format!("no table `{table}`")))?;
        let def = &t.def;
        let (connector, options) = connector_options(def, Role::Write)?;
        record_table(
            &mut self.positions,
            &format!("sinks[{}]", self.sinks.len()),
            def,
            Role::Write,
        );
        self.sinks.push(serde_json::json!({
            "name": name,
            "connector": connector,
            "input": input,
            "options": options,
        }));
        Ok(())
    }

    /// An operator node reading `input` (hash-partitioned on `hash` when given).
    pub(crate) fn operator(
        &mut self,
        name: &str,
        type_name: &str,
        input: &str,
        hash: Option<Vec<String>>,
        options: serde_json::Value,
    ) {
        let input = match hash {
            Some(keys) => serde_json::json!({"from": input, "partition": {"hash": keys}}),
            None => serde_json::json!(input),
        };
        self.operators.push(serde_json::json!({
            "name": name,
            "type": type_name,
            "input": input,
            "options": options,
        }));
    }

    /// Names the stateful operators among `statement` (the nodes one statement made) by what
    /// they are and what they read, not by a count: `{prefix}{type}_{lineage}`, where the
    /// lineage of a table's source is the table, a stateless node (`project`, `filter`,
    /// `union`) passes its inputs' lineages on, and a stateful one is its type followed by
    /// its inputs' lineages (sorted): `counts_window_bids`, `counts_window_window_bids`,
    /// `joined_interval_join_auctions_bids`. An operator's id is what a restore finds its
    /// state by (docs/fault-tolerance.md, "Changing a job"), so a filter or a projection added
    /// anywhere, or a statement added before, leaves it alone. A lineage longer than 48
    /// characters is its type and a hash of it; operators of one statement that would have
    /// the same name get `_2`, `_3`, ... in plan order. Every reference to a renamed node
    /// (inputs, side outputs `node.output`, sinks) follows.
    pub(crate) fn name_by_lineage(&mut self, prefix: &str, statement: &BTreeSet<String>) {
        const STATELESS: [&str; 3] = ["project", "filter", "union"];
        let mut lineage: BTreeMap<String, String> = BTreeMap::new();
        let mut renames: BTreeMap<String, String> = BTreeMap::new();
        let mut taken: BTreeSet<String> = self
            .operators
            .iter()
            .chain(&self.sinks)
            .filter_map(|n| n["name"].as_str().map(str::to_owned))
            .collect();
        for op in &self.operators {
            let (Some(name), Some(kind)) = (op["name"].as_str(), op["type"].as_str()) else {
                continue;
            };
            let mut read: Vec<String> = node_inputs(op)
                .iter()
                .map(|input| {
                    let node = input.split_once('.').map_or(input.as_str(), |(n, _)| n);
                    lineage
                        .get(node)
                        .cloned()
                        .unwrap_or_else(|| node.to_owned())
                })
                .collect();
            read.sort();
            read.dedup();
            let read = read.join("_");
            if STATELESS.contains(&kind) {
                lineage.insert(name.to_owned(), read);
                continue;
            }
            let own = format!("{kind}_{read}");
            lineage.insert(name.to_owned(), own.clone());
            if !statement.contains(name) {
                continue;
            }
            let base = if own.len() > 48 {
                let digest = weir_plan::sha256_hex(own.as_bytes());
                format!("{prefix}{kind}_{}", &digest[..8])
            } else {
                format!("{prefix}{own}")
            };
            let mut candidate = base.clone();
            let mut n = 1;
            while taken.contains(&candidate) {
                n += 1;
                candidate = format!("{base}_{n}");
            }
            taken.insert(candidate.clone());
            renames.insert(name.to_owned(), candidate);
        }
        if renames.is_empty() {
            return;
        }
        let rename = |reference: &str| -> Option<String> {
            let (node, output) = match reference.split_once('.') {
                Some((n, o)) => (n, Some(o)),
                None => (reference, None),
            };
            let new = renames.get(node)?;
            Some(output.map_or_else(|| new.clone(), |o| format!("{new}.{o}")))
        };
        for node in self.operators.iter_mut().chain(self.sinks.iter_mut()) {
            if let Some(new) = node["name"].as_str().and_then(|n| renames.get(n)) {
                node["name"] = serde_json::json!(new);
            }
            for field in ["input", "inputs"] {
                if let Some(references) = node.get_mut(field) {
                    rename_references(references, &rename);
                }
            }
        }
    }

    /// An operator of several inputs, each `(node, hash keys)`, in input order.
    pub(crate) fn operator_of_inputs(
        &mut self,
        name: &str,
        type_name: &str,
        inputs: &[(String, Vec<String>)],
        options: serde_json::Value,
    ) {
        let inputs: Vec<serde_json::Value> = inputs
            .iter()
            .map(|(from, keys)| serde_json::json!({"from": from, "partition": {"hash": keys}}))
            .collect();
        self.operators.push(serde_json::json!({
            "name": name,
            "type": type_name,
            "inputs": inputs,
            "options": options,
        }));
    }

    /// Whether reading table `table` ends: a file, a `datagen` table with a number of rows, a
    /// Kafka table with a `scan.bounded.mode`.
    pub(crate) fn bounded(&self, table: &str) -> bool {
        let Some(t) = self.tables.get(table) else {
            return false;
        };
        let def = &t.def;
        match option(def, "connector") {
            Some("filesystem" | "file") => true,
            Some("datagen") => option(def, "number-of-rows")
                .or(option(def, "rows"))
                .is_some(),
            Some("kafka") => option(def, "scan.bounded.mode").is_some_and(|m| m != "unbounded"),
            _ => false,
        }
    }

    /// The event-time column of table `table` (its `WATERMARK FOR` column), if it has one.
    pub(crate) fn rowtime(&self, table: &str) -> Option<String> {
        let def = &self.tables.get(table)?.def;
        def.watermark.as_ref().map(|w| w.column.clone())
    }

    /// A union of `inputs`.
    pub(crate) fn union(&mut self, name: &str, inputs: &[String]) {
        self.operators.push(serde_json::json!({
            "name": name,
            "type": "union",
            "inputs": inputs,
        }));
    }

    /// Pins operator `name` to `parallelism`.
    pub(crate) fn set_parallelism(&mut self, name: &str, parallelism: u32) {
        for op in &mut self.operators {
            if op["name"] == name {
                op["parallelism"] = serde_json::json!(parallelism);
            }
        }
    }

    /// The node operator `name` reads (its only input) and its type.
    pub(crate) fn operator_input(&self, name: &str) -> Option<(String, String)> {
        let op = self.operators.iter().find(|op| op["name"] == name)?;
        let input = op["input"]
            .as_str()
            .or_else(|| op["input"]["from"].as_str())?;
        Some((input.to_owned(), op["type"].as_str()?.to_owned()))
    }

    /// Makes operator `name` a `project` of `expressions` over the node it reads, unpartitioned.
    pub(crate) fn make_projection(&mut self, name: &str, expressions: Vec<String>) {
        for op in &mut self.operators {
            if op["name"] == name {
                let input = op["input"]
                    .as_str()
                    .or_else(|| op["input"]["from"].as_str())
                    .map(str::to_owned);
                op["type"] = serde_json::json!("project");
                op["input"] = serde_json::json!(input);
                op["options"] = serde_json::json!({ "expressions": expressions });
            }
        }
    }

    /// Sets option `key` of operator `name` to `value`.
    pub(crate) fn set_option(&mut self, name: &str, key: &str, value: serde_json::Value) {
        for op in &mut self.operators {
            if op["name"] == name {
                op["options"][key] = value.clone();
            }
        }
    }

    /// The job spec of everything translated, with the settings.
    /// Where each source and sink of the job, and each of their options, was written.
    pub(crate) fn positions(&self) -> &SpecPositions {
        &self.positions
    }

    pub(crate) fn build(&self, settings: &Settings, file: &str) -> Result<JobSpec> {
        let job = settings.job.clone().unwrap_or_else(|| {
            std::path::Path::new(file).file_stem().map_or_else(
                || "sql-job".to_owned(),
                |s| s.to_string_lossy().into_owned(),
            )
        });
        let with_s3 = |nodes: &[serde_json::Value]| -> Vec<serde_json::Value> {
            nodes.iter().map(|n| with_job_s3(n, &settings.s3)).collect()
        };
        let mut sources = with_s3(&self.source_specs);
        for source in &mut sources {
            let name = source["name"].as_str().unwrap_or_default().to_owned();
            let Some(table) = self.tables.get(&name) else {
                continue;
            };
            let prune = self.prune_conditions(table);
            if !prune.is_empty() {
                source["prune"] = serde_json::Value::Array(prune);
            }
            let Some(read) = self.read_columns.get(&name) else {
                continue;
            };
            if let Some(columns) = source_columns(&table.def, read) {
                source["columns"] = serde_json::json!(columns);
            }
        }
        let mut spec = serde_json::json!({
            "job": job,
            "sources": sources,
            "operators": self.operators,
            "sinks": with_s3(&self.sinks),
        });
        if let Some(p) = settings.parallelism {
            spec["parallelism"] = serde_json::json!(p);
        }
        if let Some(s) = settings.state_shards {
            spec["state_shards"] = serde_json::json!(s);
        }
        if let Some(c) = settings.channel_capacity {
            spec["channel_capacity"] = serde_json::json!(c);
        }
        if let Some(m) = settings.semantic_mode {
            spec["semantic_mode"] = serde_json::to_value(m).unwrap_or_default();
        }
        if settings.state_backend_at.is_some() {
            spec["state"] = serde_json::to_value(&settings.state_backend).unwrap_or_default();
        }
        if let Some(interval) = settings.checkpoint_interval {
            let mut checkpoint = serde_json::json!({ "interval": interval.0 });
            if let Some(dir) = &settings.checkpoint_dir {
                checkpoint["dir"] = serde_json::json!(dir);
            }
            // With no directory set, `weir run --checkpoint-dir s3://...` may still use them.
            let s3_dir = settings
                .checkpoint_dir
                .as_deref()
                .is_none_or(weir_api::is_s3_url);
            if s3_dir && !settings.s3.is_empty() {
                checkpoint["s3"] = serde_json::to_value(&settings.s3).unwrap_or_default();
            }
            if let Some(n) = settings.checkpoint_retain {
                checkpoint["retain"] = serde_json::json!(n);
            }
            if let Some(t) = settings.checkpoint_timeout {
                checkpoint["timeout"] = serde_json::json!(t.0);
            }
            if let Some(p) = settings.checkpoint_min_pause {
                checkpoint["min_pause"] = serde_json::json!(p.0);
            }
            spec["checkpoint"] = checkpoint;
            if settings.restart_attempts.is_some()
                || settings.restart_delay.is_some()
                || settings.restart_max_delay.is_some()
            {
                let mut restart = serde_json::json!({
                    "attempts": settings.restart_attempts.unwrap_or(weir_plan::DEFAULT_RESTART_ATTEMPTS),
                });
                if let Some(d) = settings.restart_delay {
                    restart["delay"] = serde_json::json!(d.0);
                }
                if let Some(d) = settings.restart_max_delay {
                    restart["max_delay"] = serde_json::json!(d.0);
                }
                spec["restart"] = restart;
            }
        }
        let text = spec.to_string();
        JobSpec::from_json_str(&text, file).map_err(|e| crate::error::SqlError::Invalid {
            file: file.to_owned(),
            position: Position { line: 1, column: 1 },
            message: format!("the translated job is not valid: {e}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
