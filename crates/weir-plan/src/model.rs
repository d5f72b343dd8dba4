//! The StreamModel: canonical user intent, the one entry point of every front end.

use crate::error::{Error, Result};
use crate::fingerprint::{Plan, canonicalize, sha256_hex};
use crate::schema_spec::{FieldSpec, schema_from_fields};
use crate::spec::{
    BUILDER_ORIGIN, ComputedColumn, InputSpec, JobSpec, Lateness, PartitionSpec, WatermarkSpec,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use weir_api::{BadRecordPolicy, DurationMs, JobId, OperatorId, PipelineId, SemanticMode};

/// Default number of state shards of a keyed vertex.
pub const DEFAULT_STATE_SHARDS: u32 = 128;
/// Default capacity of a channel, in messages.
pub const DEFAULT_CHANNEL_CAPACITY: u32 = 16;
/// Largest parallelism a node may ask for.
pub const MAX_PARALLELISM: u32 = 1024;

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    /// Reads from an external system.
    Source,
    /// Transforms batches.
    Operator,
    /// Writes to an external system.
    Sink,
}

/// Where a node's operator id came from, strongest first (docs/architecture.md, "Stable ids").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdOrigin {
    /// The user's explicit `uid`.
    Uid,
    /// The node's canonical model path (its unique name).
    ModelPath,
    /// A hash of the node's structure (type, options, inputs) for unnamed nodes.
    StructuralHash,
}

/// One input of a model node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInput {
    /// The upstream node.
    pub node: OperatorId,
    /// The upstream side output, or `None` for its main output.
    pub output: Option<String>,
    /// Partitioning asked for, or `None` to let the planner choose.
    pub partition: Option<PartitionSpec>,
    /// JSON path of the `partition` field that asked for it (on the input or on the node), for
    /// error messages.
    pub partition_at: Option<String>,
}

/// One node of the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelNode {
    /// Stable operator id.
    pub operator_id: OperatorId,
    /// How the id was chosen.
    pub id_origin: IdOrigin,
    /// Source, operator or sink.
    pub kind: NodeKind,
    /// Connector or operator type name.
    pub type_name: String,
    /// Where the node is written in its spec (`operators[1]`), for error messages.
    pub origin: String,
    /// Explicit parallelism, or `None` for the job's.
    pub parallelism: Option<u32>,
    /// Declared schema (sources).
    pub schema: Option<Vec<FieldSpec>>,
    /// Unreadable-record policy (sources).
    pub bad_records: BadRecordPolicy,
    /// Inputs in input order.
    pub inputs: Vec<ModelInput>,
    /// Options, keys sorted.
    pub options: serde_json::Value,
    /// Event-time watermarks of a source, defaults applied; absent (not `null`) when the source
    /// has none, so plans of jobs without watermarks keep their fingerprints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watermark: Option<ModelWatermark>,
    /// Columns a source computes and appends to each batch it reads, in order; absent (not
    /// `[]`) when there are none, so plans of jobs without them keep their fingerprints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub computed: Vec<ComputedColumn>,
    /// The connector columns a source reads (before its computed columns); absent when it
    /// reads all, so plans of jobs that read all keep their fingerprints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub columns: Option<Vec<String>>,
    /// Conditions a source may skip input by (`prune`); absent when it has none, so plans of
    /// jobs without them keep their fingerprints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prune: Option<Vec<weir_api::PruneCondition>>,
}

/// A source's watermark generation with every default applied (from [`WatermarkSpec`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelWatermark {
    /// The event-time column.
    pub column: String,
    /// Bounded out-of-orderness, in ms.
    pub max_out_of_orderness: DurationMs,
    /// Processing time after which a silent split no longer holds the watermark back, in ms;
    /// `None`: never.
    pub idle_timeout: Option<DurationMs>,
    /// Emission granularity in event time, in ms.
    pub interval: DurationMs,
    /// Watermark alignment: how far a subtask's watermark may run ahead of the lowest of the
    /// source's running subtasks before it pauses, in ms; `None`: no alignment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_drift: Option<DurationMs>,
    /// Which watermark a row is late against; left out of plans when it is the default
    /// (`split`), so plans from before the option keep their fingerprints.
    #[serde(default, skip_serializing_if = "Lateness::is_default")]
    pub lateness: Lateness,
}

impl From<&WatermarkSpec> for ModelWatermark {
    fn from(spec: &WatermarkSpec) -> Self {
        ModelWatermark {
            column: spec.column.clone(),
            max_out_of_orderness: spec.max_out_of_orderness,
            idle_timeout: spec.idle_timeout,
            interval: spec.interval,
            max_drift: spec.max_drift,
            lateness: spec.lateness,
        }
    }
}

/// The canonical model of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamModel {
    /// The job.
    pub job_id: JobId,
    /// The pipeline lineage.
    pub pipeline_id: PipelineId,
    /// Default parallelism.
    pub parallelism: u32,
    /// State shards per keyed vertex.
    pub state_shard_count: u32,
    /// Channel capacity in messages.
    pub channel_capacity: u32,
    /// Required delivery guarantee, if declared.
    pub semantic_mode: Option<SemanticMode>,
    /// Nodes in declaration order: sources, operators, sinks.
    pub nodes: Vec<ModelNode>,
}

impl Plan for StreamModel {}

struct Draft<'a> {
    name: Option<&'a str>,
    uid: Option<&'a str>,
    kind: NodeKind,
    type_name: &'a str,
    origin: String,
    parallelism: Option<u32>,
    schema: Option<&'a Vec<FieldSpec>>,
    bad_records: BadRecordPolicy,
    watermark: Option<&'a WatermarkSpec>,
    computed: &'a [ComputedColumn],
    columns: Option<&'a [String]>,
    prune: Option<&'a [weir_api::PruneCondition]>,
    inputs: Vec<(String, &'a InputSpec)>,
    default_partition: Option<&'a PartitionSpec>,
    options: &'a serde_json::Value,
}

fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl StreamModel {
    /// Compiles a spec into the canonical model, checking everything that needs no registry and
    /// no I/O: names, ids, references, cycles, partitioning, parallelism.
    ///
    /// `file` names the spec in errors (`<builder>` when `None`).
    ///
    /// # Errors
    /// [`Error::Spec`] with the JSON path of the offending field, or [`Error::Cycle`].
    pub fn from_spec(spec: &JobSpec, file: Option<&str>) -> Result<StreamModel> {
        let file = file.unwrap_or(BUILDER_ORIGIN).to_owned();
        let err = |path: String, message: String| Error::Spec {
            file: file.clone(),
            path,
            message,
        };
        let job = spec
            .job
            .clone()
            .ok_or_else(|| err("job".into(), "a job id is required".into()))?;
        if !valid_id(&job) {
            return Err(err(
                "job".into(),
                format!("`{job}` is not a valid id (use letters, digits, `_`, `-`)"),
            ));
        }
        let pipeline = spec.pipeline.clone().unwrap_or_else(|| job.clone());
        if !valid_id(&pipeline) {
            return Err(err(
                "pipeline".into(),
                format!("`{pipeline}` is not a valid id (use letters, digits, `_`, `-`)"),
            ));
        }
        let parallelism = spec.parallelism.unwrap_or(1);
        check_parallelism(parallelism).map_err(|m| err("parallelism".into(), m))?;
        let state_shard_count = spec.state_shards.unwrap_or(DEFAULT_STATE_SHARDS);
        if !(1..=65_536).contains(&state_shard_count) {
            return Err(err(
                "state_shards".into(),
                format!("{state_shard_count} is out of range (1..=65536)"),
            ));
        }
        let channel_capacity = spec.channel_capacity.unwrap_or(DEFAULT_CHANNEL_CAPACITY);
        if channel_capacity == 0 {
            return Err(err("channel_capacity".into(), "must be at least 1".into()));
        }
        if spec.sources.is_empty() {
            return Err(err(
                "sources".into(),
                "a job needs at least one source".into(),
            ));
        }
        if spec.sinks.is_empty() {
            return Err(err("sinks".into(), "a job needs at least one sink".into()));
        }

        let drafts = drafts(spec);
        // Check names, uids and declared schemas; map names to draft indices.
        let mut by_name: HashMap<&str, usize> = HashMap::new();
        for (i, d) in drafts.iter().enumerate() {
            if let Some(name) = d.name {
                if !valid_id(name) {
                    return Err(err(
                        format!("{}.name", d.origin),
                        format!("`{name}` is not a valid name (use letters, digits, `_`, `-`)"),
                    ));
                }
                if let Some(prev) = by_name.insert(name, i) {
                    return Err(err(
                        format!("{}.name", d.origin),
                        format!("`{name}` is already the name of {}", drafts[prev].origin),
                    ));
                }
            }
            if let Some(uid) = d.uid
                && !valid_id(uid)
            {
                return Err(err(
                    format!("{}.uid", d.origin),
                    format!("`{uid}` is not a valid uid (use letters, digits, `_`, `-`)"),
                ));
            }
            if let Some(p) = d.parallelism {
                check_parallelism(p).map_err(|m| err(format!("{}.parallelism", d.origin), m))?;
            }
            if let Some(fields) = d.schema {
                schema_from_fields(fields)
                    .map_err(|(idx, m)| err(format!("{}.schema[{idx}].type", d.origin), m))?;
            }
            if let Some(w) = d.watermark {
                check_watermark(w).map_err(|(field, m)| {
                    err(format!("{}.watermark.{field}", d.origin), m.into())
                })?;
            }
            check_computed(d.computed)
                .map_err(|(field, m)| err(format!("{}.computed{field}", d.origin), m))?;
            if let Some(columns) = d.columns {
                check_columns(columns)
                    .map_err(|(field, m)| err(format!("{}.columns{field}", d.origin), m))?;
            }
            if let Some(prune) = d.prune {
                check_prune(prune, d.watermark.is_some())
                    .map_err(|(field, m)| err(format!("{}.prune{field}", d.origin), m))?;
            }
            if d.type_name.trim().is_empty() {
                let field = if d.kind == NodeKind::Operator {
                    "type"
                } else {
                    "connector"
                };
                return Err(err(
                    format!("{}.{field}", d.origin),
                    "must not be empty".into(),
                ));
            }
        }

        // Resolve input references to draft indices.
        let mut edges: Vec<Vec<(usize, Option<String>)>> = Vec::with_capacity(drafts.len());
        for d in &drafts {
            if d.kind == NodeKind::Source && !d.inputs.is_empty() {
                return Err(err(d.origin.clone(), "a source has no inputs".into()));
            }
            if d.kind != NodeKind::Source && d.inputs.is_empty() {
                return Err(err(
                    format!("{}.input", d.origin),
                    "needs an input (`input: <node>` or `inputs: [...]`)".into(),
                ));
            }
            let mut resolved = Vec::with_capacity(d.inputs.len());
            for (path, input) in &d.inputs {
                let reference = input.from();
                let (node, output) = match reference.split_once('.') {
                    Some((n, o)) => (n, Some(o.to_owned())),
                    None => (reference, None),
                };
                let Some(&idx) = by_name.get(node) else {
                    let known: Vec<&str> = {
                        let mut k: Vec<&str> = by_name.keys().copied().collect();
                        k.sort_unstable();
                        k
                    };
                    return Err(err(
                        path.clone(),
                        format!("no node is named `{node}` (known: {})", known.join(", ")),
                    ));
                };
                if drafts[idx].kind == NodeKind::Sink {
                    return Err(err(
                        path.clone(),
                        format!("`{node}` is a sink; sinks have no output"),
                    ));
                }
                if let Some(o) = &output
                    && !valid_id(o)
                {
                    return Err(err(
                        path.clone(),
                        format!("`{o}` is not a valid output name"),
                    ));
                }
                let partition = input.partition().or(d.default_partition);
                if let Some(PartitionSpec::Hash(keys)) = partition
                    && keys.is_empty()
                {
                    return Err(err(
                        path.clone(),
                        "hash partitioning needs at least one key column".into(),
                    ));
                }
                resolved.push((idx, output));
            }
            edges.push(resolved);
        }

        let order = topological_order(&drafts, &edges).map_err(|cycle| Error::Cycle {
            file: file.clone(),
            nodes: cycle
                .into_iter()
                .map(|i| drafts[i].name.unwrap_or(&drafts[i].origin).to_owned())
                .collect(),
        })?;

        // Every source and operator must feed something: output nobody reads would be dropped.
        for (i, d) in drafts.iter().enumerate() {
            let read = edges.iter().flatten().any(|(u, _)| *u == i);
            if d.kind != NodeKind::Sink && !read {
                return Err(err(
                    d.origin.clone(),
                    format!(
                        "nothing reads the output of `{}`; give it a consumer (a sink) or remove it",
                        d.name.unwrap_or(&d.origin)
                    ),
                ));
            }
        }

        // Assign operator ids in topological order so structural hashes can use upstream ids.
        let mut ids: Vec<Option<(OperatorId, IdOrigin)>> = vec![None; drafts.len()];
        for &i in &order {
            let d = &drafts[i];
            let id = if let Some(uid) = d.uid {
                (OperatorId::new(uid), IdOrigin::Uid)
            } else if let Some(name) = d.name {
                (OperatorId::new(name), IdOrigin::ModelPath)
            } else {
                let upstream: Vec<serde_json::Value> = edges[i]
                    .iter()
                    .zip(&d.inputs)
                    .map(|((u, o), (_, spec))| {
                        let uid = ids[*u].as_ref().map(|x| x.0.as_str()).unwrap_or("");
                        let from = match o {
                            Some(o) => format!("{uid}.{o}"),
                            None => uid.to_owned(),
                        };
                        serde_json::json!({
                            "from": from,
                            "partition": spec.partition().or(d.default_partition),
                        })
                    })
                    .collect();
                (structural_id(d, &upstream), IdOrigin::StructuralHash)
            };
            ids[i] = Some(id);
        }
        let ids: Vec<(OperatorId, IdOrigin)> = ids.into_iter().flatten().collect();
        let mut seen: BTreeMap<&OperatorId, usize> = BTreeMap::new();
        for (i, (id, _)) in ids.iter().enumerate() {
            if let Some(prev) = seen.insert(id, i) {
                return Err(err(
                    drafts[i].origin.clone(),
                    format!(
                        "operator id `{id}` is also the id of {}; give one of them a distinct `uid` or `name`",
                        drafts[prev].origin
                    ),
                ));
            }
        }

        let nodes = drafts
            .iter()
            .enumerate()
            .map(|(i, d)| ModelNode {
                operator_id: ids[i].0.clone(),
                id_origin: ids[i].1,
                kind: d.kind,
                type_name: d.type_name.to_owned(),
                origin: d.origin.clone(),
                parallelism: d.parallelism,
                schema: d.schema.cloned(),
                bad_records: d.bad_records,
                inputs: edges[i]
                    .iter()
                    .zip(&d.inputs)
                    .map(|((u, output), (path, spec))| ModelInput {
                        node: ids[*u].0.clone(),
                        output: output.clone(),
                        partition: spec.partition().or(d.default_partition).cloned(),
                        partition_at: if spec.partition().is_some() {
                            Some(format!("{path}.partition"))
                        } else {
                            d.default_partition
                                .map(|_| format!("{}.partition", d.origin))
                        },
                    })
                    .collect(),
                options: canonicalize(d.options.clone()),
                watermark: d.watermark.map(ModelWatermark::from),
                computed: d.computed.to_vec(),
                columns: d.columns.map(<[String]>::to_vec),
                prune: d.prune.map(<[weir_api::PruneCondition]>::to_vec),
            })
            .collect();

        Ok(StreamModel {
            job_id: JobId::new(job),
            pipeline_id: PipelineId::new(pipeline),
            parallelism,
            state_shard_count,
            channel_capacity,
            semantic_mode: spec.semantic_mode,
            nodes,
        })
    }

    /// The node with operator id `id`.
    pub fn node(&self, id: &OperatorId) -> Option<&ModelNode> {
        self.nodes.iter().find(|n| &n.operator_id == id)
    }
}

/// What the model can check of a watermark spec without the source's schema: the field that is
/// wrong and why. The column's existence and type are checked at the deep build.
fn check_watermark(w: &WatermarkSpec) -> std::result::Result<(), (&'static str, &'static str)> {
    if w.column.trim().is_empty() {
        return Err(("column", "must name the source's event-time column"));
    }
    if w.max_drift == Some(DurationMs(0)) {
        return Err((
            "max_drift",
            "must be more than 0 ms; leave it out for no watermark alignment",
        ));
    }
    if w.idle_timeout == Some(DurationMs(0)) {
        return Err((
            "idle_timeout",
            "must be more than 0 ms; leave it out to never mark a split idle",
        ));
    }
    Ok(())
}

/// A source's `columns`: at least one, none empty, none twice.
fn check_columns(columns: &[String]) -> std::result::Result<(), (String, String)> {
    if columns.is_empty() {
        return Err((
            String::new(),
            "must name at least one column (leave `columns` out to read all)".into(),
        ));
    }
    for (j, c) in columns.iter().enumerate() {
        if c.trim().is_empty() {
            return Err((format!("[{j}]"), "must not be empty".into()));
        }
        if let Some(first) = columns[..j].iter().position(|d| d == c) {
            return Err((format!("[{j}]"), format!("`{c}` is also columns[{first}]")));
        }
    }
    Ok(())
}

/// What the model can check of a source's `prune` without its schema: at least one condition,
/// each of the shape its operator takes, and no watermark on the source. The columns and the
/// values' types are checked at the deep build.
fn check_prune(
    prune: &[weir_api::PruneCondition],
    watermark: bool,
) -> std::result::Result<(), (String, String)> {
    if prune.is_empty() {
        return Err((
            String::new(),
            "must hold at least one condition (leave `prune` out not to prune)".into(),
        ));
    }
    if watermark {
        return Err((
            String::new(),
            "a source with a `watermark` is not pruned: rows in skipped input would never \
             reach its watermark generator, which could change which rows are late downstream; \
             leave `prune` out"
                .into(),
        ));
    }
    for (j, c) in prune.iter().enumerate() {
        c.check().map_err(|(field, m)| {
            let field = if field.is_empty() {
                format!("[{j}]")
            } else {
                format!("[{j}].{field}")
            };
            (field, m)
        })?;
    }
    Ok(())
}

/// What the model can check of computed columns without the source's schema: names present and
/// unique, expressions not blank. The field that is wrong (`[1].name`) and why. Clashes with the
/// connector's columns and the expressions themselves are checked at the deep build.
fn check_computed(columns: &[ComputedColumn]) -> std::result::Result<(), (String, String)> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (j, c) in columns.iter().enumerate() {
        if c.name.trim().is_empty() {
            return Err((format!("[{j}].name"), "must not be empty".into()));
        }
        if let Some(first) = seen.insert(c.name.as_str(), j) {
            return Err((
                format!("[{j}].name"),
                format!("`{}` is also the name of computed[{first}]", c.name),
            ));
        }
        if c.expression.trim().is_empty() {
            return Err((
                format!("[{j}].expression"),
                "must not be empty: give a SQL expression over the source's columns".into(),
            ));
        }
    }
    Ok(())
}

fn check_parallelism(p: u32) -> std::result::Result<(), String> {
    if (1..=MAX_PARALLELISM).contains(&p) {
        Ok(())
    } else {
        Err(format!("{p} is out of range (1..={MAX_PARALLELISM})"))
    }
}

fn drafts(spec: &JobSpec) -> Vec<Draft<'_>> {
    fn inputs<'a>(
        origin: &str,
        single: &'a Option<InputSpec>,
        many: &'a [InputSpec],
    ) -> Vec<(String, &'a InputSpec)> {
        let mut out: Vec<(String, &InputSpec)> = Vec::new();
        if let Some(i) = single {
            out.push((format!("{origin}.input"), i));
        }
        out.extend(
            many.iter()
                .enumerate()
                .map(|(k, i)| (format!("{origin}.inputs[{k}]"), i)),
        );
        out
    }
    let mut out = Vec::new();
    for (i, s) in spec.sources.iter().enumerate() {
        out.push(Draft {
            name: s.name.as_deref(),
            uid: s.uid.as_deref(),
            kind: NodeKind::Source,
            type_name: &s.connector,
            origin: format!("sources[{i}]"),
            parallelism: s.parallelism,
            schema: s.schema.as_ref(),
            bad_records: s.bad_records,
            watermark: s.watermark.as_ref(),
            computed: &s.computed,
            columns: s.columns.as_deref(),
            prune: s.prune.as_deref(),
            inputs: Vec::new(),
            default_partition: None,
            options: &s.options,
        });
    }
    for (i, o) in spec.operators.iter().enumerate() {
        let origin = format!("operators[{i}]");
        out.push(Draft {
            name: o.name.as_deref(),
            uid: o.uid.as_deref(),
            kind: NodeKind::Operator,
            type_name: &o.type_name,
            inputs: inputs(&origin, &o.input, &o.inputs),
            origin,
            parallelism: o.parallelism,
            schema: None,
            bad_records: BadRecordPolicy::Fail,
            watermark: None,
            computed: &[],
            columns: None,
            prune: None,
            default_partition: o.partition.as_ref(),
            options: &o.options,
        });
    }
    for (i, s) in spec.sinks.iter().enumerate() {
        let origin = format!("sinks[{i}]");
        out.push(Draft {
            name: s.name.as_deref(),
            uid: s.uid.as_deref(),
            kind: NodeKind::Sink,
            type_name: &s.connector,
            inputs: inputs(&origin, &s.input, &s.inputs),
            origin,
            parallelism: s.parallelism,
            schema: None,
            bad_records: BadRecordPolicy::Fail,
            watermark: None,
            computed: &[],
            columns: None,
            prune: None,
            default_partition: s.partition.as_ref(),
            options: &s.options,
        });
    }
    out
}

/// Hash of what the node is (kind, type, options, inputs and their partitioning), not of how
/// wide it runs: parallelism is left out so that a rescale keeps the id.
fn structural_id(d: &Draft<'_>, upstream: &[serde_json::Value]) -> OperatorId {
    let canonical = serde_json::json!({
        "kind": d.kind,
        "type": d.type_name,
        "options": canonicalize(d.options.clone()),
        "inputs": upstream,
    });
    let digest = sha256_hex(canonical.to_string().as_bytes());
    OperatorId::new(format!("h{}", &digest[..16]))
}

/// Kahn's algorithm, ties broken by declaration order; `Err` is a cycle (first node repeated).
fn topological_order(
    drafts: &[Draft<'_>],
    edges: &[Vec<(usize, Option<String>)>],
) -> std::result::Result<Vec<usize>, Vec<usize>> {
    let n = drafts.len();
    let mut indegree = vec![0usize; n];
    let mut downstream: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (to, ins) in edges.iter().enumerate() {
        for (from, _) in ins {
            indegree[to] += 1;
            downstream[*from].push(to);
        }
    }
    let mut ready: std::collections::BTreeSet<usize> =
        (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &d in &downstream[i] {
            indegree[d] -= 1;
            if indegree[d] == 0 {
                ready.insert(d);
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    // Walk backwards along inputs among the remaining nodes until a node repeats.
    let remaining: Vec<bool> = (0..n).map(|i| indegree[i] > 0).collect();
    let start = (0..n).find(|&i| remaining[i]).unwrap_or(0);
    let mut path = vec![start];
    let mut current = start;
    loop {
        let Some(&(next, _)) = edges[current].iter().find(|(u, _)| remaining[*u]) else {
            return Err(path);
        };
        if let Some(pos) = path.iter().position(|&p| p == next) {
            let mut cycle: Vec<usize> = path[pos..].to_vec();
            cycle.reverse();
            cycle.push(cycle[0]);
            return Err(cycle);
        }
        path.push(next);
        current = next;
    }
}

#[cfg(test)]
mod tests {
    use crate::spec::{ComputedColumn, JobSpec};
    use crate::{CompiledPlans, Plan, StreamModel};

    const YAML: &str = r#"
job: demo
sources:
  - name: bids
    connector: file
    schema: [{ name: date_time, type: int64 }]
    computed:
      - { name: ts, expression: "to_timestamp_millis(date_time)" }
      - { name: day, expression: "date_trunc('day', ts)" }
    watermark: { column: ts, max_out_of_orderness: 5s }
    options: { path: data/bids.csv, format: csv }
sinks: [{ name: out, connector: blackhole, input: bids }]
"#;

    #[test]
    fn computed_columns_parse_and_reach_the_model() {
        let spec = JobSpec::from_yaml_str(YAML, "c.yaml").expect("valid");
        assert_eq!(
            spec.sources[0].computed,
            vec![
                ComputedColumn::new("ts", "to_timestamp_millis(date_time)"),
                ComputedColumn::new("day", "date_trunc('day', ts)"),
            ]
        );
        let json = serde_json::to_string(&spec).expect("serializes");
        assert_eq!(
            JobSpec::from_json_str(&json, "c.json").expect("reads"),
            spec
        );

        let plans = CompiledPlans::compile(&spec, Some("c.yaml")).expect("plans");
        let node = serde_json::to_value(&plans.model.nodes[0]).expect("node");
        assert_eq!(
            node["computed"],
            serde_json::json!([
                { "name": "ts", "expression": "to_timestamp_millis(date_time)" },
                { "name": "day", "expression": "date_trunc('day', ts)" },
            ])
        );
        // The partitioned plan carries the full node to the runtime.
        assert_eq!(plans.partitioned.vertices[0].chain[0].computed.len(), 2);
    }

    #[test]
    fn no_computed_columns_means_no_key_and_the_same_fingerprint() {
        let spec = JobSpec::from_yaml_str(YAML, "c.yaml").expect("valid");
        let mut plain = spec.clone();
        plain.sources[0].computed.clear();
        plain.sources[0].watermark = None;
        let model = StreamModel::from_spec(&plain, Some("c.yaml")).expect("model");
        let node = serde_json::to_value(&model.nodes[0]).expect("node");
        assert!(node.get("computed").is_none(), "{node}");
        assert!(
            !serde_json::to_string(&plain)
                .expect("json")
                .contains("computed")
        );

        // Same fingerprint as a spec that never heard of `computed`.
        let yaml = YAML
            .lines()
            .filter(|l| {
                !l.contains("computed") && !l.contains("expression") && !l.contains("watermark")
            })
            .collect::<Vec<_>>()
            .join("\n");
        let old = JobSpec::from_yaml_str(&yaml, "c.yaml").expect("valid");
        let old = StreamModel::from_spec(&old, Some("c.yaml")).expect("model");
        assert_eq!(old.fingerprint(), model.fingerprint());
        let with = StreamModel::from_spec(&spec, Some("c.yaml")).expect("model");
        assert_ne!(with.fingerprint(), model.fingerprint());
        // The builder makes the same spec.
        let built = plain.sources[0]
            .clone()
            .with_computed("ts", "to_timestamp_millis(date_time)")
            .with_computed("day", "date_trunc('day', ts)");
        assert_eq!(built.computed, spec.sources[0].computed);
    }

    #[test]
    fn prune_conditions_reach_the_model_and_errors_name_their_field() {
        let yaml = |prune: &str, watermark: &str| {
            format!(
                "job: p\nsources:\n  - name: bids\n    connector: file\n{watermark}\
                 {prune}    options: {{ path: data/bids.parquet }}\n\
                 sinks: [{{ name: out, connector: blackhole, input: bids }}]\n"
            )
        };
        let good = "    prune:\n      - { column: price, op: \">\", value: 90000 }\n      \
                    - { column: url, op: is_null }\n";
        let spec = JobSpec::from_yaml_str(&yaml(good, ""), "p.yaml").expect("valid");
        let model = StreamModel::from_spec(&spec, Some("p.yaml")).expect("model");
        let node = serde_json::to_value(&model.nodes[0]).expect("node");
        assert_eq!(
            node["prune"],
            serde_json::json!([
                { "column": "price", "op": ">", "value": 90000 },
                { "column": "url", "op": "is_null" },
            ])
        );
        // Pruning skips only what filters drop: checkpoints restore under other conditions.
        let mut plain = spec.clone();
        plain.sources[0].prune = None;
        let plans = CompiledPlans::compile(&spec, Some("p.yaml")).expect("plans");
        let plain_plans = CompiledPlans::compile(&plain, Some("p.yaml")).expect("plans");
        assert_eq!(
            plans.partitioned.logical_fingerprint(),
            plain_plans.partitioned.logical_fingerprint()
        );
        assert!(
            serde_json::to_value(&plain_plans.model.nodes[0])
                .expect("node")
                .get("prune")
                .is_none()
        );
        for (prune, watermark, path, wanted) in [
            (
                "    prune: []\n",
                "",
                "sources[0].prune",
                "at least one condition",
            ),
            (
                good,
                "    watermark: { column: ts }\n",
                "sources[0].prune",
                "watermark generator",
            ),
            (
                "    prune: [{ column: a, op: \"=\" }]\n",
                "",
                "sources[0].prune[0].value",
                "`=` needs a value",
            ),
            (
                "    prune: [{ column: a, op: in, value: [1, [2]] }]\n",
                "",
                "sources[0].prune[0].value[1]",
                "must be a boolean, a number or a string",
            ),
            (
                "    prune: [{ column: '', op: is_null }]\n",
                "",
                "sources[0].prune[0].column",
                "must name a column",
            ),
        ] {
            let spec = JobSpec::from_yaml_str(&yaml(prune, watermark), "p.yaml").expect("parses");
            let err = StreamModel::from_spec(&spec, Some("p.yaml")).expect_err(prune);
            let text = err.to_string();
            assert!(text.contains(path) && text.contains(wanted), "{text}");
        }
        let err = JobSpec::from_yaml_str(
            &yaml("    prune: [{ column: a, op: like, value: x }]\n", ""),
            "p.yaml",
        )
        .expect_err("unknown op");
        assert!(err.to_string().contains("sources[0].prune[0].op"), "{err}");
    }

    #[test]
    fn computed_errors_name_their_field() {
        let with = |computed: &str| {
            YAML.replace(
                "      - { name: day, expression: \"date_trunc('day', ts)\" }",
                computed,
            )
        };
        for (computed, path, wanted) in [
            (
                "      - { name: ts, expression: date_time }",
                "sources[0].computed[1].name",
                "`ts` is also the name of computed[0]",
            ),
            (
                "      - { name: '', expression: date_time }",
                "sources[0].computed[1].name",
                "must not be empty",
            ),
            (
                "      - { name: d, expression: '  ' }",
                "sources[0].computed[1].expression",
                "must not be empty",
            ),
        ] {
            let spec = JobSpec::from_yaml_str(&with(computed), "c.yaml").expect("parses");
            let err = StreamModel::from_spec(&spec, Some("c.yaml")).expect_err(computed);
            let text = err.to_string();
            assert!(text.contains(path) && text.contains(wanted), "{text}");
        }
        let err = JobSpec::from_yaml_str(&with("      - { name: d, expr: x }"), "c.yaml")
            .expect_err("unknown field");
        assert!(err.to_string().contains("sources[0].computed[1]"), "{err}");
    }
}
