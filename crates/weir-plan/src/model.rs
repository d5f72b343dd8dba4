//! The StreamModel: canonical user intent, the one entry point of every front end. A job spec
//! becomes one in [`compile`] (`StreamModel::from_spec`).

mod compile;

use crate::fingerprint::Plan;
use crate::schema_spec::FieldSpec;
use crate::spec::{ComputedColumn, Lateness, PartitionSpec, WatermarkSpec};
use serde::{Deserialize, Serialize};
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

impl StreamModel {
    /// The node with operator id `id`.
    pub fn node(&self, id: &OperatorId) -> Option<&ModelNode> {
        self.nodes.iter().find(|n| &n.operator_id == id)
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
