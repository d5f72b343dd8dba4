//! Tests of the whole plan pipeline: round trips, fingerprints, ids, channels, validation.

use crate::*;

const SPEC: &str = r#"
job: bids-euro
parallelism: 2
state_shards: 8
sources:
  - name: bids
    connector: file
    bad_records: dead_letter
    schema:
      - { name: auction, type: int64, nullable: false }
      - { name: price, type: float64 }
    options: { path: data/bids.csv, format: csv }
operators:
  - name: expensive
    type: filter
    input: bids
    options: { predicate: "price > 1000" }
  - name: euro
    type: project
    input: { from: expensive, partition: { hash: [auction] } }
    parallelism: 4
    options: { expressions: ["auction", "price * 0.908 AS euro"] }
sinks:
  - name: out
    connector: file
    input: euro
    parallelism: 4
    options: { format: parquet, path: out/ }
  - name: rejects
    connector: file
    input: bids.dead_letter
    parallelism: 1
    options: { path: rejects/, format: json }
"#;

fn compile(text: &str) -> Result<CompiledPlans> {
    let spec = JobSpec::from_yaml_str(text, "job.yaml")?;
    CompiledPlans::compile(&spec, Some("job.yaml"))
}

fn round_trip<P: Plan + PartialEq + std::fmt::Debug>(plan: &P) {
    let json = plan.to_json();
    let back = P::from_json(&json).expect("decodes");
    assert_eq!(&back, plan);
    assert_eq!(back.to_json(), json, "byte-for-byte round trip");
    let pretty = P::from_json(&plan.to_json_pretty()).expect("pretty decodes");
    assert_eq!(pretty.to_json(), json);
}

#[test]
fn every_plan_round_trips_byte_for_byte() {
    let plans = compile(SPEC).expect("compiles");
    round_trip(&plans.model);
    round_trip(&plans.stream_graph);
    round_trip(&plans.job_graph);
    round_trip(&plans.partitioned);
    round_trip(&plans.deployment);
}

/// The fingerprint of a fixed spec is pinned: it is what another process computes for the same
/// spec. A deliberate change of the plan format changes it; update the literal then.
#[test]
fn fingerprint_golden() {
    let plans = compile(SPEC).expect("compiles");
    assert_eq!(
        plans.partitioned.fingerprint(),
        "6234f19338a90853154eb9ed78f4b16d4f92d942410e0e650a2b3b2437853f50",
        "{}",
        plans.partitioned.to_json_pretty()
    );
    assert_eq!(
        plans.model.fingerprint(),
        "2b235567eeba7338572cd92a7af58c5f0992aec2a6631efa83541d7cda8fbcd4"
    );
}

/// The logical fingerprint of the same spec is pinned like [`fingerprint_golden`]; it must not
/// move when only parallelism does, so a deliberate change of it breaks restoring every
/// checkpoint taken before at another parallelism.
#[test]
fn logical_fingerprint_golden() {
    let plans = compile(SPEC).expect("compiles");
    assert_eq!(
        plans.partitioned.logical_fingerprint(),
        "22472137f8ad958b849053d271f74fd905ab68f3f2fc30ddb92b7fb97a6e7e6f"
    );
}

/// Replaces `from` (which must occur) by `to` in `text`.
fn edit(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "`{from}` is not in the spec");
    text.replace(from, to)
}

#[test]
fn logical_fingerprint_ignores_parallelism() {
    let base = compile(SPEC).expect("compiles").partitioned;
    let rescaled = [
        edit(
            SPEC,
            "parallelism: 2\nstate_shards",
            "parallelism: 3\nstate_shards",
        ),
        edit(
            SPEC,
            "parallelism: 2\nstate_shards",
            "parallelism: 1\nstate_shards",
        ),
        // The keyed chain and its sink together, from 4 to 3 subtasks.
        edit(SPEC, "    parallelism: 4\n", "    parallelism: 3\n"),
        // A rebalanced side output that becomes forward at equal parallelism.
        edit(SPEC, "    parallelism: 1\n", "    parallelism: 2\n"),
    ];
    for text in rescaled {
        let other = compile(&text).expect("compiles").partitioned;
        assert_ne!(other.fingerprint(), base.fingerprint(), "{text}");
        assert_ne!(other.checkpoint_ack_set, base.checkpoint_ack_set, "{text}");
        assert_eq!(
            other.logical_fingerprint(),
            base.logical_fingerprint(),
            "{text}"
        );
    }
    // Nor does the channel capacity.
    let mut wider = base.clone();
    wider.channel_capacity += 1;
    assert_eq!(wider.logical_fingerprint(), base.logical_fingerprint());
}

#[test]
fn logical_fingerprint_follows_the_logic() {
    let base = compile(SPEC).expect("compiles").partitioned;
    let changed = [
        ("options", edit(SPEC, "price > 1000", "price > 1001")),
        (
            "operator id",
            edit(
                SPEC,
                "name: expensive\n",
                "name: expensive\n    uid: filter-v2\n",
            ),
        ),
        ("hash key", edit(SPEC, "hash: [auction]", "hash: [price]")),
        (
            "stateShardCount",
            edit(SPEC, "state_shards: 8", "state_shards: 16"),
        ),
        (
            "partitioning",
            edit(
                SPEC,
                "{ from: expensive, partition: { hash: [auction] } }",
                "{ from: expensive, partition: rebalance }",
            ),
        ),
        (
            "watermark",
            edit(
                SPEC,
                "    bad_records: dead_letter\n",
                "    bad_records: dead_letter\n    watermark: { column: auction, max_out_of_orderness: 1s }\n",
            ),
        ),
    ];
    let mut seen = std::collections::BTreeSet::from([base.logical_fingerprint()]);
    for (what, text) in changed {
        let other = compile(&text).expect("compiles").partitioned;
        assert!(
            seen.insert(other.logical_fingerprint()),
            "changing the {what} must change the logical fingerprint"
        );
    }
}

#[test]
fn option_key_order_does_not_change_the_fingerprint() {
    let a = compile(SPEC).expect("compiles");
    let b = compile(&SPEC.replace(
        "{ format: parquet, path: out/ }",
        "{ path: out/, format: parquet }",
    ))
    .expect("compiles");
    assert_eq!(a.partitioned.fingerprint(), b.partitioned.fingerprint());
}

#[test]
fn chaining_and_channels() {
    let plans = compile(SPEC).expect("compiles");
    let p = &plans.partitioned;
    let chains: Vec<Vec<&str>> = p
        .vertices
        .iter()
        .map(|v| v.chain.iter().map(|n| n.operator_id.as_str()).collect())
        .collect();
    // bids has two consumers (expensive and rejects), so it does not chain; euro -> out chains.
    assert_eq!(
        chains,
        vec![
            vec!["bids"],
            vec!["expensive"],
            vec!["euro", "out"],
            vec!["rejects"]
        ]
    );
    let hash = p
        .edges
        .iter()
        .find(|e| e.to_vertex.as_str() == "euro")
        .expect("hash edge");
    assert_eq!(hash.channels.len(), 2 * 4);
    let PartitionPolicy::Hash { keys, shards } = &hash.policy else {
        panic!("expected a hash edge");
    };
    assert_eq!(keys, &vec!["auction".to_owned()]);
    assert_eq!(shards.owner_table(), vec![0, 0, 1, 1, 2, 2, 3, 3]);
    // Each of the 4 downstream subtasks has 2 inputs, indexed 0 and 1.
    for s in 0..4 {
        let idx: Vec<u32> = p
            .input_channels(&hash.to_vertex, s)
            .iter()
            .map(|(_, c)| c.channel_index)
            .collect();
        assert_eq!(idx, vec![0, 1]);
    }
    let side = p
        .edges
        .iter()
        .find(|e| e.from_output.as_deref() == Some("dead_letter"))
        .expect("dead-letter edge");
    assert_eq!(side.policy, PartitionPolicy::Rebalance);
    assert_eq!(p.checkpoint_ack_set.len(), 2 + 2 + 4 + 1);
    // Sinks with parallelism 4 after the 4-way project chain: 2 + 2 + 4 + 1 tasks.
    assert_eq!(
        plans.deployment.assignments.len(),
        p.checkpoint_ack_set.len()
    );
}

#[test]
fn adding_an_unrelated_operator_keeps_every_operator_id() {
    // An unnamed sink gets a structural-hash id; it must survive the addition too.
    let with_unnamed = SPEC.replace(
        "  - name: rejects\n",
        "  - connector: blackhole\n    input: euro\n  - name: rejects\n",
    );
    let before = compile(&with_unnamed).expect("compiles");
    let after = compile(&with_unnamed.replace(
        "sinks:\n",
        "  - name: audit\n    type: filter\n    input: bids\n    options: { predicate: \"price < 0\" }\n\
         sinks:\n  - name: audit_out\n    connector: blackhole\n    input: audit\n",
    ))
    .expect("compiles");
    assert_eq!(after.model.nodes.len(), before.model.nodes.len() + 2);
    let hashed: Vec<_> = before
        .model
        .nodes
        .iter()
        .filter(|n| n.id_origin == IdOrigin::StructuralHash)
        .collect();
    assert_eq!(hashed.len(), 1);
    assert!(hashed[0].operator_id.as_str().starts_with('h'));
    for node in &before.model.nodes {
        let same = after
            .model
            .node(&node.operator_id)
            .unwrap_or_else(|| panic!("{} lost its id", node.operator_id));
        assert_eq!(same.type_name, node.type_name);
        assert_eq!(same.id_origin, node.id_origin);
    }
    // The structural id is the same in every compilation.
    let again = compile(&with_unnamed).expect("compiles");
    assert_eq!(before.model.fingerprint(), again.model.fingerprint());
}

#[test]
fn uid_wins_over_name() {
    let plans = compile(&SPEC.replace(
        "  - name: expensive\n",
        "  - name: expensive\n    uid: filter-v1\n",
    ))
    .expect("compiles");
    let node = plans
        .model
        .nodes
        .iter()
        .find(|n| n.origin == "operators[0]")
        .expect("node");
    assert_eq!(node.operator_id.as_str(), "filter-v1");
    assert_eq!(node.id_origin, IdOrigin::Uid);
}

fn spec_error(text: &str) -> (String, String) {
    match compile(text) {
        Err(Error::Spec { path, message, .. }) => (path, message),
        Err(other) => panic!("expected a spec error, got {other}"),
        Ok(_) => panic!("expected a spec error"),
    }
}

#[test]
fn missing_input_names_the_field() {
    let (path, message) = spec_error(&SPEC.replace("input: euro", "input: eur"));
    assert_eq!(path, "sinks[0].input");
    assert!(message.contains("no node is named `eur`"), "{message}");
}

#[test]
fn cycles_are_refused() {
    let text = r#"
job: c
sources: [{ name: s, connector: datagen }]
operators:
  - { name: a, type: union, inputs: [s, b] }
  - { name: b, type: filter, input: a }
sinks: [{ name: o, connector: blackhole, input: b }]
"#;
    let err = compile(text).unwrap_err();
    let Error::Cycle { nodes, .. } = &err else {
        panic!("expected a cycle, got {err}");
    };
    assert_eq!(nodes.first(), nodes.last());
    assert!(nodes.contains(&"a".to_owned()) && nodes.contains(&"b".to_owned()));
    assert!(err.to_string().contains("cycle"), "{err}");
}

#[test]
fn duplicate_names_and_bad_ids() {
    let (path, _) = spec_error(&SPEC.replace("name: euro", "name: expensive"));
    assert_eq!(path, "operators[1].name");
    let (path, _) = spec_error(&SPEC.replace("name: euro", "name: eu.ro"));
    assert_eq!(path, "operators[1].name");
    let (path, message) = spec_error(&SPEC.replace("type: int64", "type: int65"));
    assert_eq!(path, "sources[0].schema[0].type");
    assert!(message.contains("int65"), "{message}");
}

#[test]
fn forward_between_unequal_parallelism_is_refused() {
    let text = SPEC.replace(
        "    parallelism: 4\n    options: { format",
        "    partition: forward\n    parallelism: 3\n    options: { format",
    );
    let (path, message) = spec_error(&text);
    assert_eq!(path, "sinks[0].partition");
    assert!(
        message.contains("forward needs equal parallelism"),
        "{message}"
    );
}

#[test]
fn keyed_parallelism_above_shards_is_refused() {
    let (path, message) = spec_error(&SPEC.replace("state_shards: 8", "state_shards: 2"));
    assert_eq!(path, "operators[1].parallelism");
    assert!(message.contains("exceeds state_shards"), "{message}");
}

#[test]
fn singleton_forces_parallelism_one() {
    let plans = compile(&SPEC.replace(
        "    parallelism: 4\n    options: { format",
        "    partition: singleton\n    options: { format",
    ))
    .expect("compiles");
    let out = plans
        .partitioned
        .vertices
        .iter()
        .find(|v| v.vertex_id.as_str() == "out")
        .expect("own vertex");
    assert_eq!(out.parallelism, 1);
}

#[test]
fn output_nobody_reads_is_refused() {
    let (path, message) = spec_error(&SPEC.replace(
        "sinks:\n",
        "  - name: orphan\n    type: filter\n    input: bids\n    options: { predicate: \"price > 0\" }\nsinks:\n",
    ));
    assert_eq!(path, "operators[2]");
    assert!(
        message.contains("nothing reads the output of `orphan`"),
        "{message}"
    );
}

#[test]
fn union_of_unequal_parallelism_reaches_every_subtask() {
    let text = r#"
job: u
parallelism: 2
sources:
  - { name: a, connector: datagen, parallelism: 1 }
  - { name: b, connector: datagen }
operators:
  - { name: both, type: union, inputs: [a, b] }
sinks:
  - { name: o, connector: blackhole, input: both }
"#;
    let plans = compile(text).expect("compiles");
    let edges = &plans.partitioned.edges;
    let from_a = edges
        .iter()
        .find(|e| e.from_vertex.as_str() == "a")
        .expect("a");
    let from_b = edges
        .iter()
        .find(|e| e.from_vertex.as_str() == "b")
        .expect("b");
    assert_eq!(from_a.policy, PartitionPolicy::Union);
    // Parallelism 1 -> 2: round-robin over both subtasks; 2 -> 2: pointwise.
    assert_eq!(from_a.channels.len(), 2);
    assert_eq!(from_b.channels.len(), 2);
    assert!(from_b.channels.iter().all(|c| c.upstream == c.downstream));
}

#[test]
fn a_partition_written_on_an_input_is_reported_there() {
    let text = SPEC.replace(
        "    input: euro\n    parallelism: 4\n",
        "    input: { from: euro, partition: forward }\n    parallelism: 3\n",
    );
    let (path, message) = spec_error(&text);
    assert_eq!(path, "sinks[0].input.partition");
    assert!(
        message.contains("forward needs equal parallelism"),
        "{message}"
    );
}
