//! CSV -> filter -> hash -> project -> Parquet, at parallelism 1 and 4, against rows computed
//! independently in the test.

use crate::support::{Rng, read_parquet_dir};
use arrow::array::{Array, Float64Array, Int64Array, StringArray};
use std::fmt::Write;
use std::path::Path;
use weir::{Engine, JobSpec};

const CHANNELS: [&str; 4] = ["web", "mobile", "partner", "api"];

/// One input row: auction, bidder, price, channel.
type Bid = (i64, i64, i64, &'static str);

fn write_inputs(dir: &Path, files: usize, rows: usize) -> Vec<Bid> {
    let mut rng = Rng(42);
    let mut all = Vec::new();
    for f in 0..files {
        let mut text = String::from("auction,bidder,price,channel\n");
        for _ in 0..rows {
            let bid = (
                1000 + rng.below(50) as i64,
                rng.below(500) as i64,
                rng.below(5000) as i64 - 100,
                CHANNELS[rng.below(4) as usize],
            );
            let _ = writeln!(text, "{},{},{},{}", bid.0, bid.1, bid.2, bid.3);
            all.push(bid);
        }
        std::fs::write(dir.join(format!("bids-{f}.csv")), text).expect("write input");
    }
    all
}

/// The expected output rows, computed without Weir: (auction, bidder, euro bits, CHANNEL).
fn expected(bids: &[Bid]) -> Vec<(i64, i64, u64, String)> {
    let mut rows: Vec<_> = bids
        .iter()
        .filter(|b| b.2 > 1000 && b.3 != "api")
        .map(|b| (b.0, b.1, (b.2 as f64 * 0.908).to_bits(), b.3.to_uppercase()))
        .collect();
    rows.sort();
    rows
}

fn spec(input: &Path, output: &Path, parallelism: u32) -> JobSpec {
    let yaml = format!(
        r#"
job: e2e
parallelism: {parallelism}
state_shards: 16
sources:
  - name: bids
    connector: file
    schema:
      - {{ name: auction, type: int64, nullable: false }}
      - {{ name: bidder, type: int64, nullable: false }}
      - {{ name: price, type: int64, nullable: false }}
      - {{ name: channel, type: string }}
    options: {{ path: "{input}", format: csv, batch_size: 100 }}
operators:
  - name: expensive
    type: filter
    input: bids
    options: {{ predicate: "price > 1000 AND channel <> 'api'" }}
  - name: euro
    type: project
    input: {{ from: expensive, partition: {{ hash: [auction] }} }}
    options: {{ expressions: ["auction", "bidder", "price * 0.908 AS euro", "upper(channel) AS channel"] }}
sinks:
  - name: out
    connector: file
    input: euro
    options: {{ path: "{output}", format: parquet }}
"#,
        input = input.display(),
        output = output.display()
    );
    JobSpec::from_yaml_str(&yaml, "e2e.yaml").expect("spec parses")
}

fn actual(dir: &Path) -> Vec<(i64, i64, u64, String)> {
    let mut rows = Vec::new();
    for batch in read_parquet_dir(dir) {
        let col = |name: &str| {
            batch
                .column(batch.schema().index_of(name).expect("column"))
                .clone()
        };
        let auction = col("auction");
        let auction = auction
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("int64");
        let bidder = col("bidder");
        let bidder = bidder.as_any().downcast_ref::<Int64Array>().expect("int64");
        let euro = col("euro");
        let euro = euro
            .as_any()
            .downcast_ref::<Float64Array>()
            .expect("float64 stays float64");
        let channel = col("channel");
        let channel = channel
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("utf8");
        for i in 0..batch.num_rows() {
            assert!(!euro.is_null(i));
            rows.push((
                auction.value(i),
                bidder.value(i),
                euro.value(i).to_bits(),
                channel.value(i).to_owned(),
            ));
        }
    }
    rows.sort();
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn csv_to_parquet_matches_independent_computation_at_parallelism_1_and_4() {
    let input = tempfile::tempdir().expect("tempdir");
    let bids = write_inputs(input.path(), 6, 700);
    let want = expected(&bids);
    assert!(want.len() > 1000, "the filter keeps a meaningful share");
    for parallelism in [1, 4] {
        let out = tempfile::tempdir().expect("tempdir");
        let summary = Engine::new()
            .run(
                &spec(input.path(), out.path(), parallelism),
                Some("e2e.yaml"),
            )
            .await
            .expect("job runs");
        assert_eq!(summary.metrics.source_rows(), bids.len() as u64);
        assert_eq!(summary.metrics.sink_rows(), want.len() as u64);
        assert_eq!(actual(out.path()), want, "parallelism {parallelism}");
    }
}

/// The file connector goes through object_store: one job writes Parquet to a `memory://` URL,
/// a second job of the same engine reads it back from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_store_urls_round_trip_between_jobs() {
    let input = tempfile::tempdir().expect("tempdir");
    let bids = write_inputs(input.path(), 2, 300);
    let engine = Engine::new();
    let write = format!(
        r#"
job: to-lake
parallelism: 2
sources:
  - {{ name: bids, connector: file, options: {{ path: "{}/*.csv", format: csv }} }}
sinks:
  - {{ name: lake, connector: file, input: bids, options: {{ path: "memory:///lake/bids/", format: parquet }} }}
"#,
        input.path().display()
    );
    let spec = JobSpec::from_yaml_str(&write, "to-lake.yaml").expect("parses");
    let summary = engine.run(&spec, None).await.expect("writes");
    assert_eq!(summary.metrics.sink_rows(), bids.len() as u64);

    let out = tempfile::tempdir().expect("tempdir");
    let read = format!(
        r#"
job: from-lake
sources:
  - {{ name: lake, connector: file, options: {{ path: "memory:///lake/bids/", format: parquet }} }}
sinks:
  - {{ name: out, connector: file, input: lake, options: {{ path: "{}", format: parquet }} }}
"#,
        out.path().display()
    );
    let spec = JobSpec::from_yaml_str(&read, "from-lake.yaml").expect("parses");
    let summary = engine.run(&spec, None).await.expect("reads");
    assert_eq!(summary.metrics.source_rows(), bids.len() as u64);
    let rows: usize = read_parquet_dir(out.path())
        .iter()
        .map(|b| b.num_rows())
        .sum();
    assert_eq!(rows, bids.len());
}

/// The runtime runs the DeploymentPlan it is given: every task on the local node. A plan that
/// places a task elsewhere, or deploys another partitioned plan, is refused before anything
/// starts, naming what does not fit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_plan_for_another_node_or_plan_is_refused() {
    let spec = JobSpec::from_yaml_str(
        r#"
job: placed
parallelism: 2
sources:
  - name: gen
    connector: datagen
    schema: [{ name: x, type: int64 }]
    options: { rows: 10 }
sinks: [{ name: out, connector: blackhole, input: gen }]
"#,
        "placed.yaml",
    )
    .expect("spec");
    let engine = Engine::new();

    let mut job = engine
        .prepare(&spec, Some("placed.yaml"))
        .await
        .expect("prepare");
    job.plans.deployment.assignments[1].node_id = "agent-7".into();
    let Err(err) = engine.start(job).await else {
        panic!("a task on another node is refused");
    };
    let message = err.to_string();
    assert!(
        message.contains("placed on node `agent-7`") && message.contains("placed/placed/gen/1"),
        "{message}"
    );

    let mut job = engine
        .prepare(&spec, Some("placed.yaml"))
        .await
        .expect("prepare");
    job.plans.deployment.assignments.pop();
    let Err(err) = engine.start(job).await else {
        panic!("an unplaced task is refused");
    };
    assert!(err.to_string().contains("is placed on no node"), "{err}");

    let mut job = engine
        .prepare(&spec, Some("placed.yaml"))
        .await
        .expect("prepare");
    job.plans.deployment.partitioned_plan_fingerprint = "0".repeat(64);
    let Err(err) = engine.start(job).await else {
        panic!("another plan's deployment is refused");
    };
    assert!(err.to_string().contains("not this job's"), "{err}");

    // The plan as compiled runs.
    let summary = engine.run(&spec, Some("placed.yaml")).await.expect("runs");
    assert_eq!(summary.metrics.sink_rows(), 10);
}
