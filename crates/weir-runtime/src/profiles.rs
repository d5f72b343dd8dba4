//! The profile of every operator of a prepared job: whether it keeps state in a checkpoint and
//! what that state depends on. Every manifest records them, and a restore into a changed job
//! compares them with the job's own ([`weir_plan::evolution`]).

use crate::prepare::{PreparedJob, PreparedNode};
use weir_api::SinkCapability;
use weir_plan::evolution::OperatorProfile;
use weir_plan::{ModelNode, PlanVertex, canonicalize, sha256_hex};

impl PreparedJob {
    /// The profile of every operator, in the plan's vertex and chain order.
    pub fn profiles(&self) -> Vec<OperatorProfile> {
        self.partitioned()
            .vertices
            .iter()
            .flat_map(|v| v.chain.iter().map(move |node| self.profile(v, node)))
            .collect()
    }

    fn profile(&self, vertex: &PlanVertex, node: &ModelNode) -> OperatorProfile {
        let mut options = node.options.clone();
        if let (Some(PreparedNode::Operator(op)), Some(map)) =
            (self.nodes.get(&node.operator_id), options.as_object_mut())
        {
            for tuning in op.tuning_options() {
                map.remove(tuning);
            }
        }
        let (stateful, keys, delivery) = match self.nodes.get(&node.operator_id) {
            // Its read positions.
            Some(PreparedNode::Source(_)) => (true, Vec::new(), None),
            // Its transactions, when it commits by epoch.
            Some(PreparedNode::Sink(sink)) => {
                let capabilities = sink.capabilities();
                let by_epoch = capabilities.iter().any(|c| {
                    matches!(
                        c,
                        SinkCapability::TwoPhaseCommit
                            | SinkCapability::StagedAtomicCommit
                            | SinkCapability::OutboxEpochLog
                    )
                });
                (by_epoch, Vec::new(), delivery(&capabilities))
            }
            // Its keyed state.
            Some(PreparedNode::Operator(op)) => {
                let keys = op
                    .input_key_columns()
                    .or_else(|| op.key_columns().map(|k| vec![k]))
                    .unwrap_or_default();
                (!keys.is_empty(), keys, None)
            }
            None => (false, Vec::new(), None),
        };
        let shards = vertex.shards.as_ref().filter(|_| !keys.is_empty());
        // What its state means: its type, its options (but those that only tune how it runs)
        // and, for an operator, the types of the input columns its options name (a sink's transactions and a source's positions do
        // not depend on columns; a column the operator does not name, or whether a column may
        // hold nulls, does not change what it stores).
        let reads_columns = node.kind == weir_plan::NodeKind::Operator;
        let mut named = std::collections::BTreeSet::new();
        words(&options, &mut named);
        let inputs: Vec<Vec<String>> = node
            .inputs
            .iter()
            .filter(|_| reads_columns)
            .map(|input| {
                self.schemas
                    .get(&(input.node.clone(), input.output.clone()))
                    .map(|schema| {
                        schema
                            .fields()
                            .iter()
                            .filter(|f| named.contains(f.name().as_str()))
                            .map(|f| format!("{} {}", f.name(), f.data_type()))
                            .collect()
                    })
                    .unwrap_or_default()
            })
            .collect();
        let signature = serde_json::json!({
            "type": node.type_name,
            "options": canonicalize(options),
            "inputs": inputs,
        });
        OperatorProfile {
            operator_id: node.operator_id.clone(),
            kind: node.kind,
            type_name: node.type_name.clone(),
            stateful,
            keys,
            key_hash: shards.map(|s| s.hash_policy.clone()),
            state_shard_count: shards.map(|s| s.state_shard_count),
            state_signature: sha256_hex(signature.to_string().as_bytes()),
            delivery,
        }
    }
}

/// Every word (a run of letters, digits and `_`) of every string in `options`: the column names
/// it may refer to, also inside an expression.
fn words<'a>(options: &'a serde_json::Value, out: &mut std::collections::BTreeSet<&'a str>) {
    match options {
        serde_json::Value::String(text) => out.extend(
            text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .filter(|w| !w.is_empty()),
        ),
        serde_json::Value::Array(items) => items.iter().for_each(|v| words(v, out)),
        serde_json::Value::Object(map) => map.values().for_each(|v| words(v, out)),
        _ => {}
    }
}

/// A sink's delivery protocol: its strongest capability.
fn delivery(capabilities: &[SinkCapability]) -> Option<String> {
    const ORDER: [(SinkCapability, &str); 7] = [
        (SinkCapability::TwoPhaseCommit, "two-phase-commit"),
        (SinkCapability::StagedAtomicCommit, "staged-atomic-commit"),
        (SinkCapability::OutboxEpochLog, "outbox-epoch-log"),
        (SinkCapability::UpsertByKey, "upsert-by-key"),
        (SinkCapability::Idempotent, "idempotent"),
        (SinkCapability::AtLeastOnce, "at-least-once"),
        (SinkCapability::BestEffort, "best-effort"),
    ];
    ORDER
        .iter()
        .find(|(c, _)| capabilities.contains(c))
        .map(|(_, name)| (*name).to_owned())
}
