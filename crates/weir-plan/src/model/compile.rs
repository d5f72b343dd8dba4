//! Compiling a job spec into the [`StreamModel`], in steps: the job's settings, each node's own
//! fields, its input references, the order (no cycles), that every output is read, the operator
//! ids, and the model nodes.

use super::{
    DEFAULT_CHANNEL_CAPACITY, DEFAULT_STATE_SHARDS, IdOrigin, MAX_PARALLELISM, ModelInput,
    ModelNode, ModelWatermark, NodeKind, StreamModel,
};
use crate::error::{Error, Result};
use crate::fingerprint::{canonicalize, sha256_hex};
use crate::schema_spec::{FieldSpec, schema_from_fields};
use crate::spec::{
    BUILDER_ORIGIN, ComputedColumn, InputSpec, JobSpec, PartitionSpec, WatermarkSpec,
};
use std::collections::{BTreeMap, HashMap};
use weir_api::{BadRecordPolicy, DurationMs, JobId, OperatorId, PipelineId};

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

/// Makes the errors of compiling one spec: each names the spec's file and a JSON path.
struct SpecErrors {
    file: String,
}

impl SpecErrors {
    fn at(&self, path: impl Into<String>, message: impl Into<String>) -> Error {
        Error::Spec {
            file: self.file.clone(),
            path: path.into(),
            message: message.into(),
        }
    }
}

/// The job-level settings of a spec, checked.
struct JobSettings {
    job: String,
    pipeline: String,
    parallelism: u32,
    state_shard_count: u32,
    channel_capacity: u32,
}

/// Each draft's inputs, resolved: (index of the upstream draft, its side output).
type Inputs = Vec<Vec<(usize, Option<String>)>>;

impl StreamModel {
    /// Compiles a spec into the canonical model, checking everything that needs no registry and
    /// no I/O: names, ids, references, cycles, partitioning, parallelism.
    ///
    /// `file` names the spec in errors (`<builder>` when `None`).
    ///
    /// # Errors
    /// [`Error::Spec`] with the JSON path of the offending field, or [`Error::Cycle`].
    pub fn from_spec(spec: &JobSpec, file: Option<&str>) -> Result<StreamModel> {
        let errors = SpecErrors {
            file: file.unwrap_or(BUILDER_ORIGIN).to_owned(),
        };
        let settings = job_settings(spec, &errors)?;
        let drafts = drafts(spec);
        let by_name = check_drafts(&drafts, &errors)?;
        let inputs = resolve_inputs(&drafts, &by_name, &errors)?;
        let order = topological_order(&drafts, &inputs).map_err(|cycle| Error::Cycle {
            file: errors.file.clone(),
            nodes: cycle
                .into_iter()
                .map(|i| drafts[i].name.unwrap_or(&drafts[i].origin).to_owned())
                .collect(),
        })?;
        check_every_output_read(&drafts, &inputs, &errors)?;
        let ids = operator_ids(&drafts, &inputs, &order, &errors)?;
        let nodes = drafts
            .iter()
            .zip(&inputs)
            .zip(&ids)
            .map(|((d, inputs), id)| model_node(d, inputs, id, &ids))
            .collect();
        Ok(StreamModel {
            job_id: JobId::new(settings.job),
            pipeline_id: PipelineId::new(settings.pipeline),
            parallelism: settings.parallelism,
            state_shard_count: settings.state_shard_count,
            channel_capacity: settings.channel_capacity,
            semantic_mode: spec.semantic_mode,
            nodes,
        })
    }
}

/// The job id, pipeline, parallelism, state shards and channel capacity of `spec`, and that it
/// has a source and a sink.
fn job_settings(spec: &JobSpec, errors: &SpecErrors) -> Result<JobSettings> {
    let job = spec
        .job
        .clone()
        .ok_or_else(|| errors.at("job", "a job id is required"))?;
    if !valid_id(&job) {
        return Err(errors.at(
            "job",
            format!("`{job}` is not a valid id (use letters, digits, `_`, `-`)"),
        ));
    }
    let pipeline = spec.pipeline.clone().unwrap_or_else(|| job.clone());
    if !valid_id(&pipeline) {
        return Err(errors.at(
            "pipeline",
            format!("`{pipeline}` is not a valid id (use letters, digits, `_`, `-`)"),
        ));
    }
    let parallelism = spec.parallelism.unwrap_or(1);
    check_parallelism(parallelism).map_err(|m| errors.at("parallelism", m))?;
    let state_shard_count = spec.state_shards.unwrap_or(DEFAULT_STATE_SHARDS);
    if !(1..=65_536).contains(&state_shard_count) {
        return Err(errors.at(
            "state_shards",
            format!("{state_shard_count} is out of range (1..=65536)"),
        ));
    }
    let channel_capacity = spec.channel_capacity.unwrap_or(DEFAULT_CHANNEL_CAPACITY);
    if channel_capacity == 0 {
        return Err(errors.at("channel_capacity", "must be at least 1"));
    }
    if spec.sources.is_empty() {
        return Err(errors.at("sources", "a job needs at least one source"));
    }
    if spec.sinks.is_empty() {
        return Err(errors.at("sinks", "a job needs at least one sink"));
    }
    Ok(JobSettings {
        job,
        pipeline,
        parallelism,
        state_shard_count,
        channel_capacity,
    })
}

/// Checks each node's name, uid, parallelism, schema, watermark, computed columns, column
/// list, prune conditions and type; returns the draft index of each name.
fn check_drafts<'a>(drafts: &[Draft<'a>], errors: &SpecErrors) -> Result<HashMap<&'a str, usize>> {
    let mut by_name: HashMap<&str, usize> = HashMap::new();
    for (i, d) in drafts.iter().enumerate() {
        let at = |field: &str| format!("{}.{field}", d.origin);
        if let Some(name) = d.name {
            if !valid_id(name) {
                return Err(errors.at(
                    at("name"),
                    format!("`{name}` is not a valid name (use letters, digits, `_`, `-`)"),
                ));
            }
            if let Some(prev) = by_name.insert(name, i) {
                return Err(errors.at(
                    at("name"),
                    format!("`{name}` is already the name of {}", drafts[prev].origin),
                ));
            }
        }
        if let Some(uid) = d.uid
            && !valid_id(uid)
        {
            return Err(errors.at(
                at("uid"),
                format!("`{uid}` is not a valid uid (use letters, digits, `_`, `-`)"),
            ));
        }
        if let Some(p) = d.parallelism {
            check_parallelism(p).map_err(|m| errors.at(at("parallelism"), m))?;
        }
        if let Some(fields) = d.schema {
            schema_from_fields(fields)
                .map_err(|(idx, m)| errors.at(at(&format!("schema[{idx}].type")), m))?;
        }
        if let Some(w) = d.watermark {
            check_watermark(w)
                .map_err(|(field, m)| errors.at(at(&format!("watermark.{field}")), m))?;
        }
        check_computed(d.computed)
            .map_err(|(field, m)| errors.at(format!("{}.computed{field}", d.origin), m))?;
        if let Some(columns) = d.columns {
            check_columns(columns)
                .map_err(|(field, m)| errors.at(format!("{}.columns{field}", d.origin), m))?;
        }
        if let Some(prune) = d.prune {
            check_prune(prune, d.watermark.is_some())
                .map_err(|(field, m)| errors.at(format!("{}.prune{field}", d.origin), m))?;
        }
        if d.type_name.trim().is_empty() {
            let field = if d.kind == NodeKind::Operator {
                "type"
            } else {
                "connector"
            };
            return Err(errors.at(at(field), "must not be empty"));
        }
    }
    Ok(by_name)
}

/// Resolves every input reference (`node` or `node.output`) to a draft index: sources have
/// none, everything else at least one, and no input reads a sink.
fn resolve_inputs(
    drafts: &[Draft<'_>],
    by_name: &HashMap<&str, usize>,
    errors: &SpecErrors,
) -> Result<Inputs> {
    let mut edges: Inputs = Vec::with_capacity(drafts.len());
    for d in drafts {
        if d.kind == NodeKind::Source && !d.inputs.is_empty() {
            return Err(errors.at(d.origin.clone(), "a source has no inputs"));
        }
        if d.kind != NodeKind::Source && d.inputs.is_empty() {
            return Err(errors.at(
                format!("{}.input", d.origin),
                "needs an input (`input: <node>` or `inputs: [...]`)",
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
                let mut known: Vec<&str> = by_name.keys().copied().collect();
                known.sort_unstable();
                return Err(errors.at(
                    path.clone(),
                    format!("no node is named `{node}` (known: {})", known.join(", ")),
                ));
            };
            if drafts[idx].kind == NodeKind::Sink {
                return Err(errors.at(
                    path.clone(),
                    format!("`{node}` is a sink; sinks have no output"),
                ));
            }
            if let Some(o) = &output
                && !valid_id(o)
            {
                return Err(errors.at(path.clone(), format!("`{o}` is not a valid output name")));
            }
            let partition = input.partition().or(d.default_partition);
            if let Some(PartitionSpec::Hash(keys)) = partition
                && keys.is_empty()
            {
                return Err(errors.at(
                    path.clone(),
                    "hash partitioning needs at least one key column",
                ));
            }
            resolved.push((idx, output));
        }
        edges.push(resolved);
    }
    Ok(edges)
}

/// Every source and operator must feed something: output nobody reads would be dropped.
fn check_every_output_read(
    drafts: &[Draft<'_>],
    inputs: &Inputs,
    errors: &SpecErrors,
) -> Result<()> {
    for (i, d) in drafts.iter().enumerate() {
        let read = inputs.iter().flatten().any(|(u, _)| *u == i);
        if d.kind != NodeKind::Sink && !read {
            return Err(errors.at(
                d.origin.clone(),
                format!(
                    "nothing reads the output of `{}`; give it a consumer (a sink) or remove it",
                    d.name.unwrap_or(&d.origin)
                ),
            ));
        }
    }
    Ok(())
}

/// Each draft's operator id: its uid, else its name, else a structural hash of what it is and
/// what it reads (assigned in topological order, so the hash can use upstream ids). Two nodes
/// may not share an id.
fn operator_ids(
    drafts: &[Draft<'_>],
    inputs: &Inputs,
    order: &[usize],
    errors: &SpecErrors,
) -> Result<Vec<(OperatorId, IdOrigin)>> {
    let mut ids: Vec<Option<(OperatorId, IdOrigin)>> = vec![None; drafts.len()];
    for &i in order {
        let d = &drafts[i];
        let id = if let Some(uid) = d.uid {
            (OperatorId::new(uid), IdOrigin::Uid)
        } else if let Some(name) = d.name {
            (OperatorId::new(name), IdOrigin::ModelPath)
        } else {
            let upstream: Vec<serde_json::Value> = inputs[i]
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
            return Err(errors.at(
                drafts[i].origin.clone(),
                format!(
                    "operator id `{id}` is also the id of {}; give one of them a distinct `uid` or `name`",
                    drafts[prev].origin
                ),
            ));
        }
    }
    Ok(ids)
}

/// The model node of draft `d`, whose inputs are `inputs` and id `id` (`ids`: every draft's).
fn model_node(
    d: &Draft<'_>,
    inputs: &[(usize, Option<String>)],
    id: &(OperatorId, IdOrigin),
    ids: &[(OperatorId, IdOrigin)],
) -> ModelNode {
    ModelNode {
        operator_id: id.0.clone(),
        id_origin: id.1,
        kind: d.kind,
        type_name: d.type_name.to_owned(),
        origin: d.origin.clone(),
        parallelism: d.parallelism,
        schema: d.schema.cloned(),
        bad_records: d.bad_records,
        inputs: inputs
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
