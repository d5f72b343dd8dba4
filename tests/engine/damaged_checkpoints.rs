//! Damaged checkpoints on real files: a damaged newest manifest is restored from its copy in the
//! epoch log (no fallback); with the copy damaged too the restore falls back to the previous
//! epoch and the file sink withdraws the part files of the epochs passed over first, so the
//! output has no duplicate rows; a sink that cannot withdraw makes that fallback refuse to start
//! unless duplicates are accepted; a damaged state segment is refused as damage, naming the
//! file and the older epochs that could be restored.
//!
//! The job reads generated CSV into a tumbling window and writes Parquet; the reference is the
//! same job run once without checkpoints.

use crate::checkpoints::{self, assert_same_rows, start, walk};
use crate::support::Rng;
use arrow::datatypes::SchemaRef;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use weir::api::{
    ConnectorSpec, Epoch, PreparedSink, Result as ApiResult, SinkCapability, SinkFactory,
    SinkWriter, TaskContext,
};
use weir::{CheckpointLocation, Engine, JobSpec, RestoreFrom, RunOptions};

const ROWS: usize = 12_000;
const NAMESPACE: &str = "damaged";

fn write_input(dir: &Path) {
    let mut rng = Rng(11);
    let mut text = String::from("ts,k,v\n");
    for i in 0..ROWS {
        let ts = (i as u64) * 5 + rng.below(40);
        let k = rng.below(50);
        let v = rng.below(1000);
        text.push_str(&format!("{ts},k{k},{v}\n"));
    }
    std::fs::write(dir.join("in-0.csv"), text).expect("write input");
}

/// Tumbling 100 ms windows per key into Parquet in `dir/out` through sink connector `sink`;
/// with checkpoints every 5 ms when `checkpoints`, ten of them retained.
fn spec(dir: &Path, checkpoints: bool, sink: &str) -> JobSpec {
    let checkpoint = if checkpoints {
        "checkpoint: { interval: 5, retain: 10 }\n"
    } else {
        ""
    };
    let yaml = format!(
        r#"
job: {NAMESPACE}
parallelism: 2
state_shards: 16
{checkpoint}sources:
  - name: events
    connector: file
    schema:
      - {{ name: ts, type: int64, nullable: false }}
      - {{ name: k, type: string, nullable: false }}
      - {{ name: v, type: int64, nullable: false }}
    options: {{ path: "{input}", format: csv, batch_size: 16 }}
    watermark: {{ column: ts, max_out_of_orderness: 50, interval: 1 }}
operators:
  - name: w
    type: window
    input: {{ from: events, partition: {{ hash: [k] }} }}
    options:
      time_column: ts
      window: {{ type: tumble, size: 100 }}
      key_by: [k]
      aggregates:
        - {{ function: count, as: n }}
        - {{ function: sum, column: v, as: total }}
sinks:
  - name: out
    connector: {sink}
    input: w
    options: {{ path: "{out}", format: parquet }}
"#,
        input = dir.join("in-*.csv").display(),
        out = dir.join("out").display(),
    );
    JobSpec::from_yaml_str(&yaml, "damaged.yaml").expect("spec parses")
}

fn options(dir: &Path, restore: Option<RestoreFrom>, accept_duplicates: bool) -> RunOptions {
    RunOptions {
        state: None,
        state_dir: None,
        checkpoint_storage: Some(CheckpointLocation::local(&dir.join("cp")).expect("cp dir")),
        restore,
        accept_duplicates,
        evolution: Default::default(),
    }
}

/// The output of the job run once, without checkpoints.
async fn reference() -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    write_input(dir.path());
    Engine::new()
        .run(&spec(dir.path(), false, "file"), Some("reference.yaml"))
        .await
        .expect("reference run");
    let rows = published_rows(dir.path());
    assert!(rows.len() > 100, "the reference has output: {}", rows.len());
    rows
}

/// Runs the checkpointed job and kills it once `epochs` epochs are durable, or lets it end when
/// it gets there first (failing after a deadline).
async fn run_and_kill(engine: &Engine, dir: &Path, sink: &str, epochs: u64) {
    checkpoints::run_and_kill(
        engine,
        spec(dir, true, sink),
        options(dir, None, false),
        epochs,
    )
    .await;
}

/// The published rows of the job's output directory, one string per row, sorted.
fn published_rows(dir: &Path) -> Vec<String> {
    checkpoints::published_rows(&dir.join("out"))
}

fn namespace_dir(dir: &Path) -> PathBuf {
    dir.join("cp/checkpoint").join(NAMESPACE)
}

/// Epochs with a manifest, oldest first.
fn epochs(dir: &Path) -> Vec<u64> {
    let mut out: Vec<u64> = std::fs::read_dir(namespace_dir(dir))
        .expect("namespace directory")
        .filter_map(|e| {
            let e = e.expect("entry");
            let epoch = e.file_name().to_string_lossy().parse().ok()?;
            e.path().join("manifest.json").exists().then_some(epoch)
        })
        .collect();
    out.sort_unstable();
    out
}

fn manifest_file(dir: &Path, epoch: u64) -> PathBuf {
    namespace_dir(dir)
        .join(epoch.to_string())
        .join("manifest.json")
}

fn durable_record(dir: &Path, epoch: u64) -> PathBuf {
    namespace_dir(dir).join(format!("log/{epoch}-DURABLE.json"))
}

/// Flips one bit of byte `at` of `file`, as a disk or a person would.
fn flip(file: &Path, at: usize) {
    let mut bytes = std::fs::read(file).expect("read");
    bytes[at] ^= 0x01;
    std::fs::write(file, bytes).expect("write");
}

/// Damages the manifest copy in the DURABLE record of `epoch`: a byte inside the copied
/// manifest, so the record still reads as a record but the copy fails its checksum. An epoch
/// killed between its manifest and its record has no copy to damage.
fn damage_copy(dir: &Path, epoch: u64) {
    let record = durable_record(dir, epoch);
    if !record.exists() {
        return;
    }
    let text = std::fs::read_to_string(&record).expect("the DURABLE record");
    let copy = text
        .find("\"manifest\":\"")
        .expect("the record carries a copy");
    let at = copy + text[copy..].find(NAMESPACE).expect("namespace in the copy");
    flip(&record, at);
}

/// The epoch a published part file's name carries (`part-{sink}-{subtask}-e{epoch}-{seq}.{ext}`).
fn epoch_of(file: &Path) -> Option<u64> {
    let name = file.file_name()?.to_string_lossy().into_owned();
    if !name.starts_with("part-") {
        return None;
    }
    name.split('-')
        .find_map(|part| part.strip_prefix('e')?.parse::<u64>().ok())
}

/// The newest epoch with a manifest after which part files were published: damaging every
/// newer epoch makes a restore fall back past published output.
fn fallback_target(dir: &Path) -> u64 {
    let all = epochs(dir);
    *all.iter()
        .rev()
        .find(|e| !part_files_after(dir, **e).is_empty())
        .unwrap_or_else(|| panic!("no epoch in {all:?} is followed by published output"))
}

/// Published part files of `dir/out` whose name carries an epoch after `after`.
fn part_files_after(dir: &Path, after: u64) -> BTreeSet<String> {
    std::fs::read_dir(dir.join("out"))
        .expect("output directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| epoch_of(p).is_some_and(|e| e > after))
        .map(|p| p.display().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_damaged_newest_manifest_is_restored_from_its_copy() {
    let want = reference().await;
    let dir = tempfile::tempdir().expect("tempdir");
    write_input(dir.path());
    let engine = Engine::new();
    run_and_kill(&engine, dir.path(), "file", 3).await;
    // The newest epoch whose DURABLE record (with the copy) was written: a kill may land
    // between a manifest and its record, and an epoch in that state has no copy. Its manifest
    // is damaged, and so are those of newer epochs, which have no copy and are passed over.
    let all = epochs(dir.path());
    let newest = *all
        .iter()
        .rev()
        .find(|e| durable_record(dir.path(), **e).exists())
        .expect("a durable epoch with its record");
    let newer: Vec<u64> = all.iter().copied().filter(|e| *e > newest).collect();
    for epoch in all.iter().filter(|e| **e >= newest) {
        flip(&manifest_file(dir.path(), *epoch), 40);
    }

    let summary = start(
        &engine,
        &spec(dir.path(), true, "file"),
        options(dir.path(), Some(RestoreFrom::Latest), false),
    )
    .await
    .expect("restore starts")
    .wait()
    .await
    .expect("restored run");
    let c = summary.checkpoints.expect("checkpoint counters");
    assert_eq!(c.restored_from, Some(newest), "{c:?}");
    assert!(c.restored_from_copy, "{c:?}");
    // An epoch without its DURABLE record was never committed: nothing of it to withdraw.
    assert_eq!(c.passed_over_epochs, newer, "{c:?}");
    assert!(c.withdrawn_files.is_empty(), "{c:?}");
    assert_same_rows(&published_rows(dir.path()), &want, "published output");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_damaged_manifest_and_copy_fall_back_and_withdraw_the_passed_over_output() {
    let want = reference().await;
    for kill_after in [3, u64::MAX] {
        let dir = tempfile::tempdir().expect("tempdir");
        write_input(dir.path());
        let engine = Engine::new();
        // Killed after three durable epochs: the newest epoch is damaged. Run to its end
        // (u64::MAX): every epoch after the newest one followed by published output is
        // damaged, so that the fallback certainly passes over published files.
        run_and_kill(&engine, dir.path(), "file", kill_after).await;
        let all = epochs(dir.path());
        let newest = *all.last().expect("a durable epoch");
        assert!(all.len() >= 2, "two epochs to fall back between: {all:?}");
        let target = if kill_after == u64::MAX {
            fallback_target(dir.path())
        } else {
            all[all.len() - 2]
        };
        for epoch in all.iter().filter(|e| **e > target) {
            flip(&manifest_file(dir.path(), *epoch), 40);
            damage_copy(dir.path(), *epoch);
        }
        let before = part_files_after(dir.path(), 0);

        let summary = start(
            &engine,
            &spec(dir.path(), true, "file"),
            options(dir.path(), Some(RestoreFrom::Latest), false),
        )
        .await
        .expect("restore starts")
        .wait()
        .await
        .expect("restored run");
        let c = summary.checkpoints.expect("checkpoint counters");
        let restored = c.restored_from.expect("an older epoch was restored");
        assert!(restored < newest, "{c:?}");
        assert_eq!(restored, target, "{c:?}");
        assert!(!c.restored_from_copy, "{c:?}");
        assert_eq!(
            c.passed_over_epochs,
            all.iter()
                .copied()
                .filter(|e| *e > restored)
                .collect::<Vec<_>>(),
            "{c:?}"
        );
        // Exactly the files published for the epochs passed over were withdrawn.
        let expected: BTreeSet<String> = before
            .iter()
            .filter(|f| epoch_of(Path::new(f.as_str())).is_some_and(|e| e > restored))
            .cloned()
            .collect();
        let withdrawn: BTreeSet<String> = c.withdrawn_files.iter().cloned().collect();
        assert_eq!(withdrawn, expected, "kill after {kill_after}");
        if kill_after == u64::MAX {
            assert!(
                !withdrawn.is_empty(),
                "the passed-over epochs published files"
            );
        }
        // No duplicate rows versus the uninterrupted run.
        assert_same_rows(
            &published_rows(dir.path()),
            &want,
            &format!("kill after {kill_after}"),
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sink_that_cannot_withdraw_refuses_the_fallback_unless_duplicates_are_accepted() {
    let want = reference().await;
    let dir = tempfile::tempdir().expect("tempdir");
    write_input(dir.path());
    let mut engine = Engine::new();
    engine
        .registry_mut()
        .register_sink("keeping_file", Arc::new(KeepingFileFactory));
    run_and_kill(&engine, dir.path(), "keeping_file", u64::MAX).await;
    // Every epoch after the newest one followed by output: damaged, its copy gone.
    let target = fallback_target(dir.path());
    let passed: Vec<u64> = epochs(dir.path())
        .into_iter()
        .filter(|e| *e > target)
        .collect();
    for epoch in &passed {
        flip(&manifest_file(dir.path(), *epoch), 40);
        std::fs::remove_file(durable_record(dir.path(), *epoch)).expect("remove the copy");
    }
    let before = part_files_after(dir.path(), 0);

    let job = spec(dir.path(), true, "keeping_file");
    let err = start(
        &engine,
        &job,
        options(dir.path(), Some(RestoreFrom::Latest), false),
    )
    .await
    .expect_err("a fallback the sink cannot undo");
    let text = err.to_string();
    assert!(
        text.contains(&format!("from epoch {target}"))
            && text.contains(&format!(
                "durable epoch(s) {}",
                passed
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            && text.contains("`out`")
            && text.contains("cannot withdraw")
            && text.contains("--accept-duplicates"),
        "{text}"
    );
    assert_eq!(
        part_files_after(dir.path(), 0),
        before,
        "nothing was touched"
    );

    let summary = start(
        &engine,
        &job,
        options(dir.path(), Some(RestoreFrom::Latest), true),
    )
    .await
    .expect("duplicates accepted")
    .wait()
    .await
    .expect("restored run");
    let c = summary.checkpoints.expect("checkpoint counters");
    assert!(c.duplicates_accepted, "{c:?}");
    assert_eq!(c.passed_over_epochs, passed, "{c:?}");
    assert_eq!(c.restored_from, Some(target), "{c:?}");
    assert!(c.withdrawn_files.is_empty(), "{c:?}");
    let got = published_rows(dir.path());
    assert!(
        got.len() > want.len(),
        "the passed-over epoch's rows are there twice"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_damaged_state_segment_is_refused_as_damage_naming_the_file_and_older_epochs() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_input(dir.path());
    let engine = Engine::new();
    run_and_kill(&engine, dir.path(), "file", 3).await;
    let all = epochs(dir.path());
    // The newest epoch that holds window state.
    let (epoch, segment) = all
        .iter()
        .rev()
        .find_map(|e| {
            let found = walk(&namespace_dir(dir.path()).join(e.to_string()))
                .into_iter()
                .find(|p| p.extension().is_some_and(|x| x == "parquet"));
            found.map(|p| (*e, p))
        })
        .expect("an epoch with a state segment");
    let size = std::fs::metadata(&segment).expect("segment").len();
    flip(&segment, usize::try_from(size / 2).expect("size"));

    let err = start(
        &engine,
        &spec(dir.path(), true, "file"),
        options(dir.path(), Some(RestoreFrom::Epoch(Epoch(epoch))), false),
    )
    .await
    .expect_err("damaged state");
    let text = err.to_string();
    let file = segment
        .canonicalize()
        .expect("the segment's path")
        .display()
        .to_string();
    assert!(
        text.contains(&format!("the checkpoint of epoch {epoch}")) && text.contains("is damaged"),
        "{text}"
    );
    assert!(text.contains(&file), "names {file}: {text}");
    assert!(!text.contains("internal error"), "{text}");
    let older: Vec<u64> = all.iter().copied().filter(|e| *e < epoch).collect();
    if older.is_empty() {
        assert!(
            text.contains("no older checkpoint can be restored"),
            "{text}"
        );
    } else {
        // The epochs the message offers: every older one with an intact manifest (a kill in
        // the middle of retention may leave one more, restorable from its copy), none newer.
        let offered: Vec<u64> = text
            .split_once("could be restored: ")
            .and_then(|(_, rest)| rest.split_once(" (restore one with --restore <epoch>"))
            .map(|(list, _)| {
                list.trim_start_matches("epochs ")
                    .trim_start_matches("epoch ")
                    .split(", ")
                    .map(|e| e.parse().expect("an epoch number"))
                    .collect()
            })
            .unwrap_or_else(|| panic!("no list of older epochs: {text}"));
        assert!(
            older.iter().all(|e| offered.contains(e)) && offered.iter().all(|e| *e < epoch),
            "older {older:?}, offered {offered:?}: {text}"
        );
    }
}

/// The file sink without withdrawal, as a sink that cannot take back what it published
/// (a message queue) would be.
struct KeepingFileFactory;

#[async_trait::async_trait]
impl SinkFactory for KeepingFileFactory {
    async fn prepare(
        &self,
        spec: ConnectorSpec<'_>,
        input_schema: SchemaRef,
    ) -> ApiResult<Arc<dyn PreparedSink>> {
        let inner = weir::file::FileSinkFactory::new()
            .prepare(spec, input_schema)
            .await?;
        Ok(Arc::new(KeepingFile(inner)))
    }
}

#[derive(Debug)]
struct KeepingFile(Arc<dyn PreparedSink>);

#[async_trait::async_trait]
impl PreparedSink for KeepingFile {
    fn capabilities(&self) -> Vec<SinkCapability> {
        self.0.capabilities()
    }

    fn describe(&self) -> String {
        format!("keeping {}", self.0.describe())
    }

    async fn create_writer(&self, ctx: &TaskContext) -> ApiResult<Box<dyn SinkWriter>> {
        self.0.create_writer(ctx).await
    }

    async fn commit_epoch(
        &self,
        task: &TaskContext,
        transactions: &[serde_json::Value],
    ) -> ApiResult<()> {
        self.0.commit_epoch(task, transactions).await
    }

    async fn abort_uncommitted(
        &self,
        task: &TaskContext,
        keep: &[serde_json::Value],
    ) -> ApiResult<()> {
        self.0.abort_uncommitted(task, keep).await
    }
}
