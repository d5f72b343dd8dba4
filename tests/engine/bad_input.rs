//! Bad input: malformed records name file, line and column or go to a dead-letter sink; bad specs
//! fail validation with the JSON path of the offending field.

use crate::support::read_parquet_dir;
use std::path::Path;
use weir::{Engine, JobSpec};

const CSV: &str = "auction,price\n1,100\n2,200\n3,abc\n4,400\n";

fn job(input: &Path, out: &Path, rejects: Option<&Path>) -> String {
    let dead = rejects.map_or(String::new(), |r| {
        format!(
            "  - {{ name: rejects, connector: file, input: bids.dead_letter, options: {{ path: \"{}\", format: json }} }}\n",
            r.display()
        )
    });
    format!(
        r#"
job: bad
sources:
  - name: bids
    connector: file
    {policy}
    schema: [{{ name: auction, type: int64 }}, {{ name: price, type: int64 }}]
    options: {{ path: "{input}", format: csv }}
sinks:
  - {{ name: out, connector: file, input: bids, options: {{ path: "{out}", format: parquet }} }}
{dead}"#,
        policy = if rejects.is_some() {
            "bad_records: dead_letter"
        } else {
            ""
        },
        input = input.display(),
        out = out.display(),
    )
}

async fn run(yaml: &str) -> Result<weir::RunSummary, weir::Error> {
    let spec = JobSpec::from_yaml_str(yaml, "bad.yaml").expect("spec parses");
    Engine::new().run(&spec, Some("bad.yaml")).await
}

#[tokio::test]
async fn a_malformed_value_fails_the_job_naming_file_line_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("bids.csv");
    std::fs::write(&input, CSV).expect("write");
    let err = run(&job(&input, &dir.path().join("out"), None))
        .await
        .expect_err("bad value fails");
    let msg = err.to_string();
    assert!(msg.contains("bids.csv:4"), "{msg}");
    assert!(msg.contains("price"), "{msg}");
    assert!(msg.contains("abc"), "{msg}");
}

#[tokio::test]
async fn dead_letter_policy_keeps_good_rows_and_routes_the_bad_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("bids.csv");
    std::fs::write(&input, CSV).expect("write");
    let (out, rejects) = (dir.path().join("out"), dir.path().join("rejects"));
    let summary = run(&job(&input, &out, Some(&rejects)))
        .await
        .expect("job runs");
    let rows: usize = read_parquet_dir(&out).iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, 3, "the three good rows");
    assert_eq!(
        summary.metrics.operator("bids").map(|o| o.dead_letters),
        Some(1)
    );
    let rejected: Vec<serde_json::Value> = std::fs::read_dir(&rejects)
        .expect("rejects dir")
        .flat_map(|e| {
            let text = std::fs::read_to_string(e.expect("entry").path()).expect("read");
            text.lines()
                .map(|l| serde_json::from_str(l).expect("json line"))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0]["line"], 4);
    assert_eq!(rejected[0]["column"], "price");
    assert!(
        rejected[0]["input"]
            .as_str()
            .is_some_and(|s| s.ends_with("bids.csv"))
    );
    assert_eq!(rejected[0]["raw"], "3,abc");
}

async fn validation_error(yaml: &str) -> String {
    let spec = match JobSpec::from_yaml_str(yaml, "v.yaml") {
        Ok(spec) => spec,
        Err(e) => return e.to_string(),
    };
    match Engine::new().prepare(&spec, Some("v.yaml")).await {
        Ok(_) => panic!("expected a validation error for:\n{yaml}"),
        Err(e) => e.to_string(),
    }
}

const BASE: &str = r#"
job: v
sources:
  - { name: gen, connector: datagen, schema: [{ name: price, type: int64 }], options: { rows: 10 } }
operators:
  - { name: f, type: filter, input: gen, options: { predicate: "price > 1" } }
sinks:
  - { name: out, connector: blackhole, input: f }
"#;

#[tokio::test]
async fn validation_names_the_offending_field() {
    let cases = [
        (
            "type: filter",
            "type: filtr",
            "operators[0].type",
            "unknown operator `filtr`",
        ),
        (
            "type: filter",
            "type: my_plugin",
            "operators[0].type",
            "unknown operator `my_plugin`",
        ),
        (
            "connector: datagen",
            "connector: kafkaa",
            "sources[0].connector",
            "unknown source connector `kafkaa`",
        ),
        (
            "connector: blackhole",
            "connector: s3",
            "sinks[0].connector",
            "unknown sink connector `s3`",
        ),
        (
            "input: f }",
            "input: g }",
            "sinks[0].input",
            "no node is named `g`",
        ),
        (
            "price > 1",
            "pric > 1",
            "operators[0].options.predicate",
            "pric",
        ),
        (
            "rows: 10",
            "rows: ten",
            "sources[0].options.rows",
            "invalid",
        ),
    ];
    for (from, to, path, message) in cases {
        let yaml = BASE.replace(from, to);
        let err = validation_error(&yaml).await;
        assert!(err.contains(path), "`{to}`: expected path {path} in: {err}");
        assert!(
            err.contains(message),
            "`{to}`: expected `{message}` in: {err}"
        );
        assert!(
            err.contains("v.yaml"),
            "the error names the spec file: {err}"
        );
    }
}

#[tokio::test]
async fn cycles_and_unread_dead_letters_are_refused() {
    let cycle = BASE.replace(
        "input: gen, options",
        "inputs: [gen, g2], options",
    )
    .replace(
        "sinks:",
        "  - { name: g2, type: filter, input: f, options: { predicate: \"price > 2\" } }\nsinks:",
    );
    let err = validation_error(&cycle).await;
    assert!(err.contains("cycle"), "{err}");
    let unread = BASE.replace(
        "connector: datagen,",
        "connector: datagen, bad_records: dead_letter,",
    );
    let err = validation_error(&unread).await;
    assert!(err.contains("sources[0].bad_records"), "{err}");
    assert!(err.contains("gen.dead_letter"), "{err}");
}

#[tokio::test]
async fn hash_keys_must_be_columns() {
    let yaml = BASE.replace(
        "input: gen, options",
        "input: { from: gen, partition: { hash: [nope] } }, options",
    );
    let err = validation_error(&yaml).await;
    assert!(err.contains("operators[0].input.partition"), "{err}");
    assert!(err.contains("`nope`"), "{err}");
    let node_level = BASE.replace(
        "input: gen, options",
        "input: gen, partition: { hash: [nope] }, options",
    );
    let err = validation_error(&node_level).await;
    assert!(err.contains("operators[0].partition"), "{err}");
}

#[tokio::test]
async fn a_semantic_mode_the_runtime_cannot_give_is_refused() {
    let strict = format!("semantic_mode: STRICT_EXACTLY_ONCE\n{BASE}");
    let err = validation_error(&strict).await;
    assert!(err.contains("semantic_mode"), "{err}");
    assert!(err.contains("STRICT_EXACTLY_ONCE"), "{err}");
    let spec = JobSpec::from_yaml_str(&format!("semantic_mode: AT_LEAST_ONCE\n{BASE}"), "v.yaml")
        .expect("parses");
    Engine::new()
        .prepare(&spec, Some("v.yaml"))
        .await
        .expect("datagen and blackhole give at-least-once");
}
