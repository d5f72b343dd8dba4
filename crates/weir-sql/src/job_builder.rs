//! Building the job spec: declared tables become sources and sinks (their `WITH` options read
//! as connector options in `options`), `SET` options become job options, and the translator's
//! operators are collected in order.

use crate::ddl::TableDef;
use crate::error::{Here, Position, Result};
use crate::positions::SpecPositions;
use arrow::datatypes::SchemaRef;
use std::collections::{BTreeMap, BTreeSet};
use weir_api::S3Options;
use weir_plan::JobSpec;

mod changes;
mod options;
mod settings;

pub(crate) use changes::TableChanges;
use options::{Role, connector_options, record_table};
pub(crate) use settings::Settings;

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

/// Fills the `s3` options of a `file` or `delta` node on an `s3://` path with the job's
/// `SET 's3.*'` options its table does not set itself.
fn with_job_s3(node: &serde_json::Value, job: &S3Options) -> serde_json::Value {
    let mut node = node.clone();
    let on_s3 = (node["connector"] == "file" || node["connector"] == "delta")
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
    /// `filesystem` (the one that prunes; its schema is exactly the declared columns). For
    /// files declared CSV or JSON lines only conditions on `PARTITIONED BY` columns (they skip
    /// partition directories; only Parquet readers prune by the other columns: the plan would
    /// carry conditions nobody uses).
    fn prune_conditions(&self, table: &Table) -> Vec<serde_json::Value> {
        let files =
            option(&table.def, "connector").is_some_and(|c| c.eq_ignore_ascii_case("filesystem"));
        let text = option(&table.def, "format").is_some_and(|f| {
            ["csv", "json", "jsonl", "ndjson"]
                .iter()
                .any(|t| f.eq_ignore_ascii_case(t))
        });
        let partitions: Vec<&str> = table
            .def
            .partitioned_by
            .iter()
            .flat_map(|(columns, _)| columns.iter().map(|(c, _)| c.as_str()))
            .collect();
        if table.def.watermark.is_some() || !files || (text && partitions.is_empty()) {
            return Vec::new();
        }
        let scans: Vec<Vec<serde_json::Value>> = self
            .scans
            .iter()
            .filter(|(t, _)| t == &table.def.name)
            .map(|(_, c)| c.clone())
            .collect();
        let mut common = crate::prune::common(&scans);
        if text {
            common.retain(|c| {
                c["column"]
                    .as_str()
                    .is_some_and(|column| partitions.contains(&column))
            });
        }
        common
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
