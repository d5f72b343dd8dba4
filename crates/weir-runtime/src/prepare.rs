//! The deep build: every node of a plan prepared against the registry, schemas resolved along
//! the edges, hash keys and semantic mode checked. `weir validate` runs exactly this.

use crate::error::{Error, Result};
use crate::registry::Registry;
use crate::split_share::SplitShare;
use arrow::datatypes::{DataType, SchemaRef};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use weir_api::secrets::{EnvAccess, resolve_env_json};
use weir_api::{
    ConnectorSpec, OperatorArgs, OperatorId, PreparedOperator, PreparedSink, PreparedSource, Reach,
    SemanticMode, SinkCapability, SourceCapability, SourceSplit, Touch, dead_letter_schema,
};
use weir_plan::{
    CompiledPlans, ModelNode, NodeKind, PartitionPolicy, PartitionedPlan, schema_from_fields,
};

/// A prepared node of any kind.
#[derive(Debug, Clone)]
pub enum PreparedNode {
    /// A source.
    Source(Arc<dyn PreparedSource>),
    /// An operator.
    Operator(Arc<dyn PreparedOperator>),
    /// A sink.
    Sink(Arc<dyn PreparedSink>),
}

impl PreparedNode {
    /// One line describing the node, for plan output.
    pub fn describe(&self) -> String {
        match self {
            PreparedNode::Source(s) => s.describe(),
            PreparedNode::Operator(o) => o.describe(),
            PreparedNode::Sink(s) => s.describe(),
        }
    }
}

/// A job whose every node is prepared: ready to run, or to report as valid.
#[derive(Debug, Clone)]
pub struct PreparedJob {
    /// The plans it was built from.
    pub plans: CompiledPlans,
    /// The spec file, for error messages.
    pub file: String,
    /// Prepared nodes by operator id.
    pub nodes: HashMap<OperatorId, PreparedNode>,
    /// Output schemas by (operator id, side output or `None` for main).
    pub schemas: HashMap<(OperatorId, Option<String>), SchemaRef>,
    /// Every source's splits, listed once by its enumerator at prepare time.
    pub splits: HashMap<OperatorId, Vec<SourceSplit>>,
    /// The delivery guarantee in force: the declared mode, or the strongest the connectors and
    /// checkpointing can give (reported in the run summary).
    pub semantic_mode: SemanticMode,
    /// The share of the splits this run reads when it is one lane of a distributed job (`None`:
    /// every split). Set with [`PreparedJob::with_split_share`].
    pub split_share: Option<SplitShare>,
    /// Which lane of a distributed job this run is (`None`: the whole job runs here), for
    /// sinks that publish the epochs of every lane together. Set with [`PreparedJob::with_lane`].
    pub lane: Option<Arc<weir_api::Lane>>,
}

impl PreparedJob {
    /// Prepares every node of `plans` in topological order.
    ///
    /// # Errors
    /// [`Error::UnknownType`] for unregistered types, [`Error::Prepare`] naming the node's JSON
    /// path for bad options, schemas, keys or an impossible semantic mode.
    pub async fn prepare(plans: CompiledPlans, registry: &Registry, file: &str) -> Result<Self> {
        Self::prepare_with(plans, registry, file, Reach::Full, &EnvAccess::All).await
    }

    /// [`PreparedJob::prepare`] reaching only as far as `reach` allows: with
    /// [`Reach::Offline`] the connectors touch no file, store or broker and no source lists its
    /// splits (the job's `splits` stay empty: it is checked, not run). The `${env:NAME}`
    /// references of connector options and of the checkpoint and state sections are read as
    /// `env` allows; the plans keep the references (their fingerprints never hold a secret),
    /// the connectors, `plans.checkpoint` and `plans.state` get the values.
    ///
    /// # Errors
    /// As [`PreparedJob::prepare`]; offline, also a source whose schema or format would have
    /// to be read from its input; a malformed, refused or unset reference.
    pub async fn prepare_with(
        mut plans: CompiledPlans,
        registry: &Registry,
        file: &str,
        reach: Reach,
        env: &EnvAccess,
    ) -> Result<Self> {
        let section = |path: &str| {
            let file = file.to_owned();
            let path = path.to_owned();
            move |source| Error::Prepare { file, path, source }
        };
        if let Some(checkpoint) = &plans.checkpoint {
            plans.checkpoint = Some(
                checkpoint
                    .resolve_env(env, &weir_plan::process_env)
                    .map_err(section("checkpoint"))?,
            );
        }
        if let Some(state) = &plans.state {
            plans.state = Some(
                state
                    .resolve_env(env, &weir_plan::process_env)
                    .map_err(section("state"))?,
            );
        }
        let mut job = PreparedJob {
            plans,
            file: file.to_owned(),
            nodes: HashMap::new(),
            schemas: HashMap::new(),
            splits: HashMap::new(),
            semantic_mode: SemanticMode::BestEffort,
            split_share: None,
            lane: None,
        };
        let nodes: Vec<ModelNode> = job
            .plans
            .partitioned
            .vertices
            .iter()
            .flat_map(|v| v.chain.iter().cloned())
            .collect();
        for node in &nodes {
            job.prepare_node(node, registry, reach, env).await?;
        }
        job.check_hash_keys()?;
        job.check_keyed_operators()?;
        job.check_side_outputs_consumed(&nodes)?;
        job.semantic_mode = job.check_semantic_mode(&nodes)?;
        Ok(job)
    }

    /// Makes this run one lane of a distributed job: its sources read only the splits of
    /// `share`, those listed now and those partition discovery finds later.
    ///
    /// A source read as one stream ([`PreparedJob::reads_as_one_stream`]) goes whole to the
    /// one lane whose share holds its operator id: its rows must meet one watermark in order.
    #[must_use]
    pub fn with_split_share(mut self, share: SplitShare) -> Self {
        let one_stream: HashSet<OperatorId> = self
            .splits
            .keys()
            .filter(|op| self.reads_as_one_stream(op))
            .cloned()
            .collect();
        for (operator, splits) in &mut self.splits {
            if one_stream.contains(operator) {
                if !share.contains(operator.as_str()) {
                    splits.clear();
                }
            } else {
                splits.retain(|s| share.contains(&s.id));
            }
        }
        self.split_share = Some(share);
        self
    }

    /// Makes this run lane `lane.index` of the distributed job `lane.job` for its sinks: their
    /// commits see the [`weir_api::Lane`] (with [`PreparedJob::with_split_share`] for its
    /// sources' share).
    #[must_use]
    pub fn with_lane(mut self, lane: weir_api::Lane) -> Self {
        self.lane = Some(Arc::new(lane));
        self
    }

    /// Whether source `operator` is read as one ordered stream: its splits are parts of one
    /// input ([`weir_api::PreparedSource::splits_are_one_stream`]), it declares event time and
    /// an operator downstream of it reads event time
    /// ([`weir_api::PreparedOperator::reads_event_time`]). One subtask then hands on every row
    /// in split order under one watermark (later splits are decoded ahead side by side).
    /// Otherwise the order of rows changes no result, and the splits are shared out among the
    /// subtasks as usual.
    pub fn reads_as_one_stream(&self, operator: &OperatorId) -> bool {
        let Some(PreparedNode::Source(source)) = self.nodes.get(operator) else {
            return false;
        };
        source.splits_are_one_stream()
            && self
                .plan_nodes()
                .any(|n| &n.operator_id == operator && n.watermark.is_some())
            && self.watermark_is_read(operator)
    }

    /// Whether an operator downstream of source `operator` (reached along the plan's edges)
    /// reads event time ([`weir_api::PreparedOperator::reads_event_time`]). When none does, the
    /// source's watermark changes no result: its batches are not cut where it advances, and it
    /// is not aligned across subtasks.
    pub fn watermark_is_read(&self, operator: &OperatorId) -> bool {
        let mut seen: HashSet<&OperatorId> = HashSet::from([operator]);
        let mut frontier = vec![operator];
        while let Some(from) = frontier.pop() {
            for node in self.plan_nodes() {
                if !node.inputs.iter().any(|i| &i.node == from) || !seen.insert(&node.operator_id) {
                    continue;
                }
                if let Some(PreparedNode::Operator(op)) = self.nodes.get(&node.operator_id)
                    && op.reads_event_time()
                {
                    return true;
                }
                frontier.push(&node.operator_id);
            }
        }
        false
    }

    /// Every place the job's sources and sinks touch and, given the job's `checkpoint`
    /// section, where its checkpoints go (the directory, or the URL and its S3 endpoint),
    /// sorted: what allow-lists are checked against, before any I/O.
    pub fn touches(&self, checkpoint: Option<&weir_plan::CheckpointSpec>) -> Vec<Touch> {
        let mut out: Vec<Touch> = self
            .nodes
            .values()
            .flat_map(|node| match node {
                PreparedNode::Source(s) => s.touches(),
                PreparedNode::Sink(s) => s.touches(),
                PreparedNode::Operator(_) => Vec::new(),
            })
            .collect();
        if let Some(dir) = checkpoint.and_then(|c| c.dir.as_deref()) {
            if dir.contains("://") {
                out.push(Touch::Url(dir.to_owned()));
                let endpoint = checkpoint
                    .and_then(|c| c.s3.as_ref())
                    .and_then(|s3| s3.endpoint.clone())
                    .or_else(|| std::env::var("AWS_ENDPOINT").ok());
                out.extend(endpoint.map(Touch::Url));
            } else {
                let cwd = std::env::current_dir().unwrap_or_default();
                out.push(Touch::local(std::path::Path::new(dir), &cwd));
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// Every node of the partitioned plan.
    fn plan_nodes(&self) -> impl Iterator<Item = &ModelNode> {
        self.plans
            .partitioned
            .vertices
            .iter()
            .flat_map(|v| v.chain.iter())
    }

    fn prepare_error(&self, path: String, source: weir_api::Error) -> Error {
        Error::Prepare {
            file: self.file.clone(),
            path,
            source,
        }
    }

    /// Prepares `node` against the registry with its inputs' schemas (prepared before it),
    /// and records it and the schemas of its outputs.
    async fn prepare_node(
        &mut self,
        node: &ModelNode,
        registry: &Registry,
        reach: Reach,
        env: &EnvAccess,
    ) -> Result<()> {
        let options_path = format!("{}.options", node.origin);
        // A connector gets its options with their `${env:NAME}` references read; the plan
        // keeps them as written.
        let mut options = node.options.clone();
        if matches!(node.kind, NodeKind::Source | NodeKind::Sink) {
            resolve_env_json(&mut options, &options_path, env, &weir_plan::process_env)
                .map_err(|e| self.prepare_error(node.origin.clone(), e))?;
        }
        let id = node.operator_id.clone();
        let input_schemas = self.input_schemas(node)?;
        let connector_spec = ConnectorSpec {
            operator_id: &id,
            options: &options,
            options_path: &options_path,
            schema: self.declared_schema(node)?,
            bad_records: node.bad_records,
            reach,
        };
        let prepared = match node.kind {
            NodeKind::Source => self.prepare_source(node, registry, connector_spec).await?,
            NodeKind::Operator => {
                self.prepare_operator(node, registry, &options_path, &input_schemas)?
            }
            NodeKind::Sink => {
                self.prepare_sink(node, registry, connector_spec, &input_schemas)
                    .await?
            }
        };
        self.nodes.insert(id, prepared);
        Ok(())
    }

    /// The schemas of `node`'s inputs, in order: each the output of a node prepared before it.
    fn input_schemas(&self, node: &ModelNode) -> Result<Vec<SchemaRef>> {
        node.inputs
            .iter()
            .enumerate()
            .map(|(k, input)| {
                self.schemas
                    .get(&(input.node.clone(), input.output.clone()))
                    .cloned()
                    .ok_or_else(|| {
                        let output = input.output.as_deref().unwrap_or("main");
                        self.prepare_error(
                            format!("{}.inputs[{k}]", node.origin),
                            weir_api::Error::config(
                                format!("{}.inputs[{k}]", node.origin),
                                format!("`{}` has no output named `{output}`", input.node),
                            ),
                        )
                    })
            })
            .collect()
    }

    /// The schema `node` declares (a connector's `schema`), if any, checked field by field.
    fn declared_schema(&self, node: &ModelNode) -> Result<Option<SchemaRef>> {
        let Some(fields) = &node.schema else {
            return Ok(None);
        };
        let schema = schema_from_fields(fields).map_err(|(i, m)| {
            self.prepare_error(
                format!("{}.schema[{i}]", node.origin),
                weir_api::Error::config(format!("{}.schema[{i}]", node.origin), m),
            )
        })?;
        Ok(Some(schema))
    }

    /// The error for `node`'s type missing from the registry: its `kind`, the spec `field`
    /// naming it, and the names the registry knows.
    fn unknown_type(
        &self,
        node: &ModelNode,
        kind: &'static str,
        field: &str,
        known: Vec<String>,
    ) -> Error {
        Error::UnknownType {
            file: self.file.clone(),
            path: format!("{}.{field}", node.origin),
            kind,
            name: node.type_name.clone(),
            known,
        }
    }

    /// Prepares source `node`: its connector wrapped with predicate pushdown, the columns
    /// read and the computed columns; lists its splits when `reach` allows, checks its
    /// watermark column and records its schemas (with a dead-letter output if it has one).
    async fn prepare_source(
        &mut self,
        node: &ModelNode,
        registry: &Registry,
        spec: ConnectorSpec<'_>,
    ) -> Result<PreparedNode> {
        let (id, reach) = (spec.operator_id, spec.reach);
        let factory = registry.source(&node.type_name).ok_or_else(|| {
            self.unknown_type(
                node,
                "source connector",
                "connector",
                registry.source_names(),
            )
        })?;
        let source = factory
            .prepare(spec)
            .await
            .map_err(|e| self.prepare_error(node.origin.clone(), e))?;
        // Predicate pushdown, before projection: the conditions name columns of the
        // connector's whole schema, which the job need not read. The model refuses it on a
        // source with a watermark.
        let source = match &node.prune {
            Some(conditions) if node.watermark.is_none() => {
                weir_operators::with_prune(source, conditions, &node.origin)
                    .map_err(|(path, e)| self.prepare_error(path, e))?
            }
            _ => source,
        };
        // The columns the job reads: the connector decodes only those where it can.
        let source = match &node.columns {
            Some(columns) => weir_operators::with_columns(source, columns, &node.origin)
                .map_err(|(path, e)| self.prepare_error(path, e))?,
            None => source,
        };
        // Computed columns extend the source's schema before anything downstream (the
        // watermark column check included) sees it.
        let source = weir_operators::with_computed_columns(
            source,
            &node.computed,
            &node.origin,
            id,
            &registry.expr_compiler(),
        )
        .map_err(|(path, e)| self.prepare_error(path, e))?;
        if reach == Reach::Full {
            let splits = source
                .enumerate_splits()
                .await
                .map_err(|e| self.prepare_error(node.origin.clone(), e))?;
            self.splits.insert(id.clone(), splits);
        }
        self.check_watermark_column(node, &source.schema())?;
        self.schemas.insert((id.clone(), None), source.schema());
        if node.bad_records == weir_api::BadRecordPolicy::DeadLetter {
            self.schemas.insert(
                (id.clone(), Some("dead_letter".into())),
                dead_letter_schema(),
            );
        }
        Ok(PreparedNode::Source(source))
    }

    /// Prepares operator `node` over `input_schemas` (an updating input only where it accepts
    /// changes) and records the schemas of its main and side outputs.
    fn prepare_operator(
        &mut self,
        node: &ModelNode,
        registry: &Registry,
        options_path: &str,
        input_schemas: &[SchemaRef],
    ) -> Result<PreparedNode> {
        let id = &node.operator_id;
        let factory = registry.operator(&node.type_name).ok_or_else(|| {
            self.unknown_type(node, "operator", "type", registry.operator_names())
        })?;
        let op = factory
            .prepare(&OperatorArgs {
                operator_id: id,
                options: &node.options,
                options_path,
                input_schemas,
            })
            .map_err(|e| self.prepare_error(node.origin.clone(), e))?;
        if !op.accepts_changes()
            && let Some(k) = input_schemas
                .iter()
                .position(|s| weir_api::changelog::row_kind_index(s).is_some())
        {
            return Err(self.prepare_error(
                format!("{}.inputs[{k}]", node.origin),
                weir_api::Error::config(
                    format!("{}.inputs[{k}]", node.origin),
                    format!(
                        "`{id}` ({}) reads an updating stream (its rows insert, \
                         retract and replace results), which this operator cannot \
                         take: it would count retractions as new rows",
                        node.type_name
                    ),
                ),
            ));
        }
        self.schemas.insert((id.clone(), None), op.output_schema());
        for side in op.side_outputs() {
            self.schemas
                .insert((id.clone(), Some(side.name)), side.schema);
        }
        Ok(PreparedNode::Operator(op))
    }

    /// Prepares sink `node` over its one input schema (every input's must be the same); an
    /// updating input only where the sink writes changes.
    async fn prepare_sink(
        &self,
        node: &ModelNode,
        registry: &Registry,
        spec: ConnectorSpec<'_>,
        input_schemas: &[SchemaRef],
    ) -> Result<PreparedNode> {
        let id = spec.operator_id;
        let factory = registry.sink(&node.type_name).ok_or_else(|| {
            self.unknown_type(node, "sink connector", "connector", registry.sink_names())
        })?;
        let input_schema = self.sink_input_schema(node, input_schemas)?;
        let updating = weir_api::changelog::row_kind_index(&input_schema).is_some();
        let sink = factory
            .prepare(spec, input_schema)
            .await
            .map_err(|e| self.prepare_error(node.origin.clone(), e))?;
        if updating && !sink.accepts_changes() {
            return Err(self.prepare_error(
                node.origin.clone(),
                weir_api::Error::config(
                    &node.origin,
                    format!(
                        "sink `{id}` ({}) writes only inserts, but its input is an \
                         updating stream (its rows insert, retract and replace \
                         results); write it with a changelog format \
                         (`debezium-json`, `changelog-json`)",
                        sink.describe()
                    ),
                ),
            ));
        }
        Ok(PreparedNode::Sink(sink))
    }

    /// The one schema sink `node` writes: that of its inputs, which must all be the same.
    fn sink_input_schema(
        &self,
        node: &ModelNode,
        input_schemas: &[SchemaRef],
    ) -> Result<SchemaRef> {
        let id = &node.operator_id;
        match input_schemas {
            [one] => Ok(one.clone()),
            [first, rest @ ..] => {
                if let Some(k) = rest.iter().position(|s| s.fields() != first.fields()) {
                    return Err(self.prepare_error(
                        format!("{}.inputs[{}]", node.origin, k + 1),
                        weir_api::Error::schema(
                            format!("sink `{id}`"),
                            "all inputs of a sink must have the same schema",
                        ),
                    ));
                }
                Ok(first.clone())
            }
            [] => Err(self.prepare_error(
                node.origin.clone(),
                weir_api::Error::config(&node.origin, "a sink needs an input"),
            )),
        }
    }

    /// A source's watermark column must be one of its columns and an event time: `Int64`
    /// milliseconds or a `Timestamp` of any unit and zone.
    fn check_watermark_column(&self, node: &ModelNode, schema: &SchemaRef) -> Result<()> {
        let Some(watermark) = &node.watermark else {
            return Ok(());
        };
        let path = format!("{}.watermark.column", node.origin);
        let column = &watermark.column;
        let columns = || {
            schema
                .fields()
                .iter()
                .map(|f| format!("{} {}", f.name(), f.data_type()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let message = match schema.field_with_name(column) {
            Err(_) => format!(
                "`{column}` is not a column of `{}` (columns: {})",
                node.operator_id,
                columns()
            ),
            Ok(field)
                if !matches!(field.data_type(), DataType::Int64 | DataType::Timestamp(..)) =>
            {
                format!(
                    "`{column}` has type {}, but an event-time column must be Int64 \
                     (milliseconds) or Timestamp (columns: {})",
                    field.data_type(),
                    columns()
                )
            }
            Ok(_) => return Ok(()),
        };
        Err(self.prepare_error(path.clone(), weir_api::Error::config(path, message)))
    }

    fn origin_of(&self, id: &OperatorId) -> String {
        self.plans
            .model
            .node(id)
            .map(|n| n.origin.clone())
            .unwrap_or_else(|| id.to_string())
    }

    fn check_hash_keys(&self) -> Result<()> {
        for edge in &self.plans.partitioned.edges {
            let PartitionPolicy::Hash { keys, .. } = &edge.policy else {
                continue;
            };
            let schema = &self.schemas[&(edge.from_operator.clone(), edge.from_output.clone())];
            let head = self
                .plans
                .partitioned
                .vertex(&edge.to_vertex)
                .and_then(|v| v.chain.first());
            let path = head
                .and_then(|n| n.inputs.get(edge.to_input as usize))
                .and_then(|i| i.partition_at.clone())
                .or_else(|| head.map(|n| format!("{}.partition", n.origin)))
                .unwrap_or_default();
            for key in keys {
                let path = path.clone();
                let field = schema.field_with_name(key).map_err(|_| {
                    let columns: Vec<&str> =
                        schema.fields().iter().map(|f| f.name().as_str()).collect();
                    self.prepare_error(
                        path.clone(),
                        weir_api::Error::config(
                            &path,
                            format!(
                                "hash key `{key}` is not a column of `{}` (columns: {})",
                                edge.from_operator,
                                columns.join(", ")
                            ),
                        ),
                    )
                })?;
                weir_plan::key_hash::check_key_type(field.name(), field.data_type()).map_err(
                    |e| {
                        self.prepare_error(
                            path.clone(),
                            weir_api::Error::config(&path, e.to_string()),
                        )
                    },
                )?;
            }
        }
        Ok(())
    }

    /// Operators that key their state by columns get their rows by a hash exchange on exactly
    /// those columns when they run in parallel, so each key lives in one subtask and in the
    /// state shard the exchange routed it by.
    fn check_keyed_operators(&self) -> Result<()> {
        for vertex in &self.plans.partitioned.vertices {
            for (pos, node) in vertex.chain.iter().enumerate() {
                let Some(PreparedNode::Operator(op)) = self.nodes.get(&node.operator_id) else {
                    continue;
                };
                let Some(per_input) = op.input_key_columns() else {
                    continue;
                };
                let keys_of = |input: u32| {
                    per_input
                        .get(input as usize)
                        .or_else(|| per_input.first())
                        .cloned()
                        .unwrap_or_default()
                };
                let keys = keys_of(0);
                if vertex.parallelism <= 1 {
                    continue;
                }
                let path = format!("{}.input", node.origin);
                let fail = |message: String| {
                    self.prepare_error(path.clone(), weir_api::Error::config(&path, message))
                };
                if keys.is_empty() {
                    return Err(fail(format!(
                        "`{}` has no key, so it runs at parallelism 1, not {}; set \
                         `parallelism: 1` on it or give it keys",
                        node.operator_id, vertex.parallelism
                    )));
                }
                let hashed_on = self
                    .plans
                    .partitioned
                    .edges
                    .iter()
                    .filter(|e| e.to_vertex == vertex.vertex_id && pos == 0)
                    .map(|e| {
                        let hash = match &e.policy {
                            PartitionPolicy::Hash { keys, .. } => Some(keys.clone()),
                            _ => None,
                        };
                        (keys_of(e.to_input), hash)
                    })
                    .collect::<Vec<_>>();
                let wrong = hashed_on
                    .iter()
                    .find(|(want, hash)| hash.as_deref() != Some(want.as_slice()));
                if hashed_on.is_empty() || wrong.is_some() {
                    let want = wrong.map_or(keys, |(want, _)| want.clone());
                    return Err(fail(format!(
                        "`{}` keeps state per key [{}] at parallelism {}, so its input must be \
                         hash-partitioned on exactly those columns: \
                         `input: {{from: ..., partition: {{hash: [{}]}}}}`",
                        node.operator_id,
                        want.join(", "),
                        vertex.parallelism,
                        want.join(", ")
                    )));
                }
            }
        }
        Ok(())
    }

    fn check_side_outputs_consumed(&self, nodes: &[ModelNode]) -> Result<()> {
        for node in nodes {
            if let Some(PreparedNode::Operator(op)) = self.nodes.get(&node.operator_id) {
                for side in op.side_outputs() {
                    let consumed = self.plans.partitioned.edges.iter().any(|e| {
                        e.from_operator == node.operator_id
                            && e.from_output.as_deref() == Some(side.name.as_str())
                    });
                    if !consumed {
                        let path = node.origin.clone();
                        return Err(self.prepare_error(
                            path.clone(),
                            weir_api::Error::config(
                                path,
                                format!(
                                    "writes the side output `{}.{}`, but no node reads it; add \
                                     a sink with `input: {}.{}`",
                                    node.operator_id, side.name, node.operator_id, side.name
                                ),
                            ),
                        ));
                    }
                }
            }
            if node.kind == NodeKind::Source
                && node.bad_records == weir_api::BadRecordPolicy::DeadLetter
            {
                let consumed = self.plans.partitioned.edges.iter().any(|e| {
                    e.from_operator == node.operator_id
                        && e.from_output.as_deref() == Some("dead_letter")
                });
                if !consumed {
                    let path = format!("{}.bad_records", node.origin);
                    return Err(self.prepare_error(
                        path.clone(),
                        weir_api::Error::config(
                            path,
                            format!(
                                "is dead_letter, but no node reads `{}.dead_letter`; add a sink \
                                 with `input: {}.dead_letter` so rejected records are kept",
                                node.operator_id, node.operator_id
                            ),
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Checks the declared semantic mode against the connectors and checkpointing
    /// (docs/fault-tolerance.md, "Semantic modes") and returns the mode in force: the declared one, or the strongest the job can give.
    fn check_semantic_mode(&self, nodes: &[ModelNode]) -> Result<SemanticMode> {
        let checkpoints = self.plans.checkpoint.is_some();
        let Some(mode) = self.plans.model.semantic_mode else {
            return Ok(self.strongest_mode(nodes));
        };
        if mode < SemanticMode::AtLeastOnce && !checkpoints {
            // Without epochs a failed run is rerun from the start while output published
            // before the failure stays: nothing stronger than at-least-once can be promised.
            return Err(self.prepare_error(
                "semantic_mode".into(),
                weir_api::Error::config(
                    "semantic_mode",
                    format!(
                        "{} needs epoch checkpoints: add a `checkpoint` section (SQL: SET \
                         'checkpoint.interval' = '1s'), or declare AT_LEAST_ONCE or BEST_EFFORT",
                        mode_name(mode)
                    ),
                ),
            ));
        }
        if let Some((node, reason)) = self.falls_short(mode, nodes) {
            let path = self.origin_of(&node.operator_id);
            return Err(self.prepare_error(
                path.clone(),
                weir_api::Error::config(
                    path,
                    format!(
                        "the job's semantic_mode is {}, but `{}` {reason}",
                        mode_name(mode),
                        node.operator_id
                    ),
                ),
            ));
        }
        Ok(mode)
    }

    /// The first connector that cannot give `mode`, and why.
    fn falls_short<'n>(
        &self,
        mode: SemanticMode,
        nodes: &'n [ModelNode],
    ) -> Option<(&'n ModelNode, String)> {
        nodes.iter().find_map(|node| {
            let reason = match &self.nodes[&node.operator_id] {
                PreparedNode::Source(s) => source_falls_short(mode, &s.capabilities()),
                PreparedNode::Sink(s) => sink_falls_short(mode, &s.capabilities()),
                PreparedNode::Operator(_) => None,
            };
            reason.map(|r| (node, r))
        })
    }

    /// The strongest mode every connector of the job can give, with or without checkpoints.
    fn strongest_mode(&self, nodes: &[ModelNode]) -> SemanticMode {
        let candidates: &[SemanticMode] = if self.plans.checkpoint.is_some() {
            &[
                SemanticMode::StrictExactlyOnce,
                SemanticMode::EffectivelyOnce,
                SemanticMode::AtLeastOnce,
            ]
        } else {
            &[SemanticMode::AtLeastOnce]
        };
        candidates
            .iter()
            .copied()
            .find(|&mode| self.falls_short(mode, nodes).is_none())
            .unwrap_or(SemanticMode::BestEffort)
    }

    /// The partitioned plan.
    pub fn partitioned(&self) -> &PartitionedPlan {
        &self.plans.partitioned
    }
}

/// A mode as spelled in job specs (`AT_LEAST_ONCE`).
fn mode_name(mode: SemanticMode) -> String {
    serde_json::to_value(mode)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{mode:?}"))
}

/// Capabilities as spelled in plans (`REPLAYABLE, AT_LEAST_ONCE`).
fn names<T: serde::Serialize>(caps: &[T]) -> String {
    let names: Vec<String> = caps
        .iter()
        .filter_map(|c| serde_json::to_value(c).ok())
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    if names.is_empty() {
        "no guarantee".into()
    } else {
        names.join(", ")
    }
}

fn source_falls_short(mode: SemanticMode, caps: &[SourceCapability]) -> Option<String> {
    use SourceCapability::*;
    let ok = match mode {
        SemanticMode::StrictExactlyOnce | SemanticMode::EffectivelyOnce => {
            caps.contains(&Replayable) || caps.contains(&TransactionalRead)
        }
        SemanticMode::AtLeastOnce => {
            caps.contains(&Replayable)
                || caps.contains(&TransactionalRead)
                || caps.contains(&AtLeastOnce)
        }
        SemanticMode::BestEffort => true,
    };
    (!ok).then(|| format!("is a source that only offers {}", names(caps)))
}

fn sink_falls_short(mode: SemanticMode, caps: &[SinkCapability]) -> Option<String> {
    use SinkCapability::*;
    let ok = match mode {
        SemanticMode::StrictExactlyOnce => {
            caps.contains(&TwoPhaseCommit) || caps.contains(&StagedAtomicCommit)
        }
        SemanticMode::EffectivelyOnce => caps.iter().any(|c| {
            matches!(
                c,
                TwoPhaseCommit | StagedAtomicCommit | OutboxEpochLog | Idempotent | UpsertByKey
            )
        }),
        SemanticMode::AtLeastOnce => caps.iter().any(|c| *c != BestEffort),
        SemanticMode::BestEffort => true,
    };
    (!ok).then(|| format!("is a sink that only offers {}", names(caps)))
}
