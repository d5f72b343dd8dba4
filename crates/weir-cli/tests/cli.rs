//! The `weir` binary, run as a user runs it: example job, plan fingerprints across processes,
//! validation errors, and backpressure bounding memory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use weir::plan::{CompiledPlans, JobSpec, Plan};

fn weir(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .current_dir(cwd)
        .env("RUST_LOG", "warn")
        .output()
        .expect("weir runs")
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

fn stdout_json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "weir failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

#[test]
fn the_bundled_example_runs_end_to_end() {
    let work = tempfile::tempdir().expect("tempdir");
    copy_dir(&repo_root().join("examples"), &work.path().join("examples"));
    let mut expensive = 0;
    for file in ["bids-0.csv", "bids-1.csv"] {
        let csv =
            std::fs::read_to_string(work.path().join("examples/data").join(file)).expect("csv");
        expensive += csv
            .lines()
            .skip(1)
            .filter(|l| l.split(',').nth(2).and_then(|p| p.parse::<i64>().ok()) > Some(1000))
            .count() as u64;
    }
    let out = weir(&["run", "examples/bids.yaml", "--json"], work.path());
    let summary = stdout_json(&out);
    assert_eq!(summary["source_rows"], 2000);
    assert_eq!(summary["sink_rows"], expensive);
    let parts: Vec<_> = std::fs::read_dir(work.path().join("out/bids-euro"))
        .expect("output directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    // Two input files, parallelism 2: each subtask reads one and writes its own part file.
    assert_eq!(parts.len(), 2, "{parts:?}");
    assert!(
        parts
            .iter()
            .all(|p| p.starts_with("part-") && p.ends_with(".parquet")),
        "{parts:?}"
    );
    // The table form is for people and names every operator.
    let table = weir(&["run", "examples/bids.yaml"], work.path());
    let text = String::from_utf8_lossy(&table.stdout);
    for op in ["bids", "expensive", "euro", "out", "rows/s"] {
        assert!(text.contains(op), "{text}");
    }
}

#[test]
fn plan_fingerprints_are_the_same_in_every_process() {
    let root = repo_root();
    let a = stdout_json(&weir(&["plan", "examples/bids.yaml"], &root));
    let b = stdout_json(&weir(&["plan", "examples/bids.yaml"], &root));
    assert_eq!(a, b);
    let spec = JobSpec::from_file(&root.join("examples/bids.yaml")).expect("spec");
    let here = CompiledPlans::compile(&spec, Some("elsewhere.yaml")).expect("compiles");
    assert_eq!(
        a["fingerprints"]["partitionedPlan"],
        here.partitioned.fingerprint()
    );
    assert_eq!(a["fingerprints"]["streamModel"], here.model.fingerprint());
    // The printed plan is the plan: it decodes and re-encodes to the same fingerprint.
    let printed =
        weir::plan::PartitionedPlan::from_json(&a["partitionedPlan"].to_string()).expect("decodes");
    assert_eq!(printed.fingerprint(), here.partitioned.fingerprint());
}

#[test]
fn validate_names_the_offending_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = dir.path().join("bad.yaml");
    std::fs::write(
        &spec,
        "job: bad\nsources:\n  - { name: s, connector: datagen, schema: [{ name: a, type: int64 }], options: { rows: 1 } }\n\
         operators:\n  - { name: f, type: no_such_plugin, input: s }\n\
         sinks:\n  - { name: o, connector: blackhole, input: f }\n",
    )
    .expect("write");
    let out = weir(&["validate", "bad.yaml"], dir.path());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.yaml: operators[0].type"), "{err}");
    assert!(err.contains("unknown operator `no_such_plugin`"), "{err}");
    let ok = weir(&["validate", "examples/bids.yaml"], &repo_root());
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
}

/// 4 million generated rows of six columns are about 240 MB of Arrow data. With bounded channels
/// and a sink throttled to 2 million rows/s, the generator is held back, so the process never
/// holds more than a few channels' worth of batches.
#[test]
fn backpressure_keeps_memory_bounded_behind_a_slow_sink() {
    const BOUND_BYTES: u64 = 180 * 1024 * 1024;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("slow.yaml"),
        r#"
job: backpressure
parallelism: 2
sources:
  - name: gen
    connector: datagen
    schema:
      - { name: auction, type: int64, nullable: false }
      - { name: bidder, type: int64 }
      - { name: price, type: float64 }
      - { name: channel, type: string }
      - { name: url, type: string }
      - { name: date_time, type: "timestamp(ms)" }
    options: { rows: 4000000, splits: 2 }
sinks:
  - name: slow
    connector: blackhole
    input: gen
    partition: rebalance
    options: { rows_per_second: 1000000 }
"#,
    )
    .expect("write");
    let summary = stdout_json(&weir(&["run", "slow.yaml", "--json"], dir.path()));
    assert_eq!(summary["sink_rows"], 4_000_000);
    let wall = summary["wall_time_secs"].as_f64().expect("wall time");
    assert!(
        wall >= 1.5,
        "the sink was throttled, so the producer had to wait ({wall} s)"
    );
    let peak = summary["peak_rss_bytes"]
        .as_u64()
        .expect("peak RSS on Linux");
    assert!(
        peak < BOUND_BYTES,
        "peak RSS {} MiB exceeds the bound {} MiB",
        peak / (1024 * 1024),
        BOUND_BYTES / (1024 * 1024)
    );
}

#[test]
fn the_sql_example_runs_and_explains() {
    let work = tempfile::tempdir().expect("tempdir");
    copy_dir(&repo_root().join("examples"), &work.path().join("examples"));
    let summary = stdout_json(&weir(&["run", "examples/bids.sql", "--json"], work.path()));
    assert_eq!(summary["source_rows"], 2000);
    let parts = std::fs::read_dir(work.path().join("out/bids-per-auction"))
        .expect("output directory")
        .count();
    assert!(parts >= 1, "no part files");
    // The same script compiles to the same plan in every process.
    let a = stdout_json(&weir(&["plan", "examples/bids.sql"], work.path()));
    let b = stdout_json(&weir(&["plan", "examples/bids.sql"], work.path()));
    assert_eq!(a["fingerprints"], b["fingerprints"]);
    // EXPLAIN prints the plans and runs nothing.
    let script = std::fs::read_to_string(work.path().join("examples/bids.sql")).expect("read");
    let explained = script.replace("INSERT INTO", "EXPLAIN INSERT INTO");
    std::fs::write(work.path().join("explain.sql"), explained).expect("write");
    std::fs::remove_dir_all(work.path().join("out")).expect("clean output");
    let out = weir(&["run", "explain.sql"], work.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("== stream model ==") && text.contains("== partitioned plan =="),
        "{text}"
    );
    assert!(text.contains("\"window\""), "{text}");
    assert!(
        !work.path().join("out").exists(),
        "EXPLAIN must not run the job"
    );
}

#[test]
fn sql_errors_name_file_line_and_column() {
    let work = tempfile::tempdir().expect("tempdir");
    let script = "CREATE TABLE t (a BIGINT, ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = 'x.csv', 'format' = 'csv');\n\
                  CREATE TABLE o (a BIGINT) WITH ('connector' = 'blackhole');\n\
                  INSERT INTO o\n  SELECT a FROM t\n  ORDER BY a;\n";
    std::fs::write(work.path().join("bad.sql"), script).expect("write");
    let out = weir(&["validate", "bad.sql"], work.path());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.sql:5:3") && err.contains("ORDER BY is not supported"),
        "{err}"
    );
}

#[test]
fn sql_options_read_env_references_where_the_job_runs() {
    let work = tempfile::tempdir().expect("tempdir");
    std::fs::write(work.path().join("in.csv"), "a\n1\n2\n3\n").expect("input");
    let script = "CREATE TABLE t (a BIGINT) WITH ('connector' = 'filesystem', \
                  'path' = '${env:WEIR_TEST_INPUT}', 'format' = 'csv');\n\
                  CREATE TABLE o (a BIGINT) WITH ('connector' = 'filesystem', \
                  'path' = '${env:WEIR_TEST_OUTPUT}', 'format' = 'csv');\n\
                  INSERT INTO o SELECT a * 10 FROM t;\n";
    std::fs::write(work.path().join("refs.sql"), script).expect("write");
    let run = |vars: &[(&str, &str)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_weir"));
        command
            .args(["run", "refs.sql", "--json"])
            .current_dir(work.path())
            .env("RUST_LOG", "warn")
            .env_remove("WEIR_TEST_INPUT")
            .env_remove("WEIR_TEST_OUTPUT");
        for (k, v) in vars {
            command.env(k, v);
        }
        command.output().expect("weir runs")
    };
    // Unset: an error at the option in the script, naming the variable, and nothing written.
    let out = run(&[("WEIR_TEST_INPUT", "in.csv")]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refs.sql:2:")
            && err.contains("option 'path' of table `o`")
            && err.contains("WEIR_TEST_OUTPUT is not set"),
        "{err}"
    );
    assert!(!work.path().join("out").exists());
    // Set: the job reads and writes where the variables say.
    let summary = stdout_json(&run(&[
        ("WEIR_TEST_INPUT", "in.csv"),
        ("WEIR_TEST_OUTPUT", "out"),
    ]));
    assert_eq!(summary["source_rows"], 3);
    let mut rows = Vec::new();
    for part in std::fs::read_dir(work.path().join("out")).expect("output directory") {
        let text = std::fs::read_to_string(part.expect("part").path()).expect("read part");
        rows.extend(text.lines().filter(|l| *l != "a").map(str::to_owned));
    }
    rows.sort();
    assert_eq!(rows, ["10", "20", "30"]);
}

#[test]
fn an_expression_of_20000_terms_is_a_located_error_not_an_abort() {
    let work = tempfile::tempdir().expect("tempdir");
    let script = format!(
        "CREATE TABLE t (a BIGINT) WITH ('connector' = 'filesystem', 'path' = 'x.csv', \
         'format' = 'csv');\n\
         CREATE TABLE o (a BIGINT) WITH ('connector' = 'blackhole');\n\
         INSERT INTO o SELECT a{} FROM t;\n",
        " + 1".repeat(20_000)
    );
    std::fs::write(work.path().join("deep.sql"), script).expect("write");
    let out = weir(&["validate", "deep.sql"], work.path());
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("deep.sql:3:") && err.contains("more than 1000 levels"),
        "{err}"
    );
    // The message names the place; it does not repeat the expression.
    assert!(err.len() < 1_000, "{} bytes: {err}", err.len());
}

#[test]
fn checkpoint_flags_are_checked_and_reported() {
    let work = tempfile::tempdir().expect("tempdir");
    copy_dir(&repo_root().join("examples"), &work.path().join("examples"));
    // The example takes no checkpoints: the flags are refused, saying what to add.
    let out = weir(
        &["run", "examples/bids.yaml", "--checkpoint-dir", "cp"],
        work.path(),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("takes no checkpoints"), "{err}");
    let out = weir(
        &["run", "examples/bids.yaml", "--restore", "latest"],
        work.path(),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot restore"), "{err}");

    // With checkpoints (a SQL SET), the summary reports the mode in force and the epochs; a
    // second run restores the final epoch of the first and publishes nothing new.
    let sql = std::fs::read_to_string(work.path().join("examples/bids.sql")).expect("sql");
    let sql = sql.replace(
        "SET 'parallelism' = '2';",
        "SET 'parallelism' = '2';\nSET 'checkpoint.interval' = '20ms';",
    );
    std::fs::write(work.path().join("job.sql"), sql).expect("write job");
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "job.sql", "--json", "--checkpoint-dir", "cp"];
        args.extend_from_slice(extra);
        stdout_json(&weir(&args, work.path()))
    };
    let first = run(&[]);
    assert_eq!(first["semantic_mode"], "STRICT_EXACTLY_ONCE");
    let completed = first["checkpoints"]["completed"]
        .as_u64()
        .expect("completed");
    assert!(completed >= 1, "{first}");
    let last = first["checkpoints"]["lastDurableEpoch"]
        .as_u64()
        .expect("epoch");
    let parts = |dir: &str| {
        std::fs::read_dir(work.path().join(dir))
            .expect("output")
            .filter_map(|e| {
                let name = e.expect("entry").file_name().to_string_lossy().into_owned();
                name.starts_with("part-").then_some(name)
            })
            .count()
    };
    let published = parts("out/bids-per-auction");
    assert!(published >= 2, "{published}");
    let second = run(&["--restore", "latest"]);
    assert_eq!(second["checkpoints"]["restoredFrom"], last, "{second}");
    assert_eq!(second["source_rows"], 0, "{second}");
    assert_eq!(parts("out/bids-per-auction"), published);
    let out = weir(
        &[
            "run",
            "job.sql",
            "--checkpoint-dir",
            "cp",
            "--restore",
            "999",
        ],
        work.path(),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("epoch 999"), "{err}");
}

/// Epochs with a manifest under `cp` (one checkpoint namespace), oldest first, with its directory.
fn checkpoint_epochs(cp: &Path) -> (PathBuf, Vec<u64>) {
    let namespace = std::fs::read_dir(cp.join("checkpoint"))
        .expect("checkpoint directory")
        .next()
        .expect("one namespace")
        .expect("entry")
        .path();
    let mut epochs: Vec<u64> = std::fs::read_dir(&namespace)
        .expect("namespace")
        .filter_map(|e| {
            let e = e.expect("entry");
            let epoch = e.file_name().to_string_lossy().parse().ok()?;
            e.path().join("manifest.json").exists().then_some(epoch)
        })
        .collect();
    epochs.sort_unstable();
    (namespace, epochs)
}

#[test]
fn a_restore_past_damaged_checkpoints_withdraws_their_output_and_says_so() {
    let work = tempfile::tempdir().expect("tempdir");
    copy_dir(&repo_root().join("examples"), &work.path().join("examples"));
    let sql = std::fs::read_to_string(work.path().join("examples/bids.sql")).expect("sql");
    let sql = sql.replace(
        "SET 'parallelism' = '2';",
        "SET 'parallelism' = '2';\nSET 'checkpoint.interval' = '20ms';",
    );
    std::fs::write(work.path().join("job.sql"), sql).expect("write job");
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "job.sql", "--json", "--checkpoint-dir", "cp"];
        args.extend_from_slice(extra);
        stdout_json(&weir(&args, work.path()))
    };
    let first = run(&[]);
    let out = work.path().join("out/bids-per-auction");
    let parts = || {
        let mut names: Vec<String> = std::fs::read_dir(&out)
            .expect("output")
            .filter_map(|e| {
                let name = e.expect("entry").file_name().to_string_lossy().into_owned();
                name.starts_with("part-").then_some(name)
            })
            .collect();
        names.sort();
        names
    };
    let published = parts();
    assert!(!published.is_empty());

    // Every manifest damaged, one copy damaged and the others gone: nothing can be restored.
    let (namespace, epochs) = checkpoint_epochs(&work.path().join("cp"));
    for epoch in &epochs {
        let manifest = namespace.join(format!("{epoch}/manifest.json"));
        let mut bytes = std::fs::read(&manifest).expect("manifest");
        bytes[40] ^= 0x01;
        std::fs::write(&manifest, bytes).expect("damage");
        std::fs::remove_file(namespace.join(format!("log/{epoch}-DURABLE.json")))
            .expect("remove the copy");
    }
    let second = run(&["--restore", "latest", "--accept-duplicates"]);
    let c = &second["checkpoints"];
    assert_eq!(c["restoredFrom"], serde_json::Value::Null, "{second}");
    assert_eq!(c["passedOverEpochs"], serde_json::json!(epochs), "{second}");
    assert_eq!(
        c["duplicatesAccepted"], false,
        "the file sink withdraws: {second}"
    );
    let withdrawn: Vec<String> = c["withdrawnFiles"]
        .as_array()
        .expect("withdrawn files")
        .iter()
        .map(|f| {
            Path::new(f.as_str().expect("a path"))
                .file_name()
                .expect("a file name")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(withdrawn, published, "{second}");
    // The replay from the beginning published every row once more, under new epochs' names.
    assert_eq!(second["sink_rows"], first["sink_rows"], "{second}");
    let now = parts();
    assert!(
        !now.is_empty() && now.iter().all(|p| !published.contains(p)),
        "{now:?}"
    );

    // The newest manifest damaged again, its copy intact: restored from the copy, which the
    // table summary says.
    let old = epochs.last().copied().unwrap_or(0);
    let (namespace, epochs) = checkpoint_epochs(&work.path().join("cp"));
    let newest = *epochs.last().expect("the second run's epochs");
    assert!(newest > old, "{epochs:?}");
    {
        let epoch = newest;
        let manifest = namespace.join(format!("{epoch}/manifest.json"));
        let mut bytes = std::fs::read(&manifest).expect("manifest");
        bytes[40] ^= 0x01;
        std::fs::write(&manifest, bytes).expect("damage");
    }
    let table = weir(
        &[
            "run",
            "job.sql",
            "--checkpoint-dir",
            "cp",
            "--restore",
            "latest",
        ],
        work.path(),
    );
    assert!(
        table.status.success(),
        "{}",
        String::from_utf8_lossy(&table.stderr)
    );
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains(
            "the manifest of the restored epoch was damaged; its copy in the epoch log was used"
        ),
        "{text}"
    );
}

/// A run's log lines carry the spans they happen in: the checkpoint coordinator's
/// (`checkpoints{job, attempt}` and `checkpoint{epoch, kind}`), and a restore's
/// (`restore{job, attempt, epoch}`), in plain text when stderr is not a terminal.
#[test]
fn log_lines_carry_the_checkpoint_and_restore_spans() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("job.yaml"),
        r#"
job: spans
checkpoint: { interval: 200ms }
sources:
  - name: gen
    connector: datagen
    schema:
      - { name: id, type: int64, nullable: false }
    options: { rows: 2000, batch_size: 500 }
sinks:
  - name: out
    connector: blackhole
    input: gen
    options: { rows_per_second: 4000 }
"#,
    )
    .expect("job written");
    let run = |extra: &[&str]| -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["run", "job.yaml", "--checkpoint-dir", "cp"])
            .args(extra)
            .current_dir(dir.path())
            .env("RUST_LOG", "weir_runtime=info")
            .output()
            .expect("weir runs");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        stderr
    };
    let first = run(&[]);
    assert!(!first.contains('\u{1b}'), "no colors in a pipe: {first}");
    let committed = first
        .lines()
        .filter(|l| l.contains("checkpoint committed"))
        .collect::<Vec<_>>();
    assert!(!committed.is_empty(), "{first}");
    for line in &committed {
        assert!(
            line.contains("checkpoints{job=spans attempt=1}:checkpoint{epoch="),
            "{line}"
        );
    }
    // The newest committed epoch is the one a restore of `latest` takes.
    let last_epoch = committed
        .iter()
        .filter_map(|l| {
            let rest = l.split(":checkpoint{epoch=").nth(1)?;
            rest.split(' ').next()?.parse::<u64>().ok()
        })
        .max()
        .expect("epoch numbers");
    let again = run(&["--restore", "latest"]);
    let restore = format!("restore{{job=spans attempt=2 epoch={last_epoch}}}");
    assert!(again.contains(&restore), "{restore} in {again}");
    assert!(
        again.contains("checkpoints{job=spans attempt=2}:checkpoint{epoch="),
        "{again}"
    );
}

/// `weir hub` says where it listens when it starts and that it stopped when SIGTERM (what
/// systemd sends) stops it, and exits cleanly.
#[cfg(unix)]
#[test]
fn the_hub_says_it_started_and_stopped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut hub = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["hub", "--listen", "127.0.0.1:0", "--db", "hub.sqlite"])
        .current_dir(dir.path())
        .env_remove("RUST_LOG")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("weir hub starts");
    let mut stderr = std::io::BufReader::new(hub.stderr.take().expect("stderr"));
    let mut said = String::new();
    while !said.contains("weir hub listening on") {
        let mut line = String::new();
        let read = std::io::BufRead::read_line(&mut stderr, &mut line).expect("stderr line");
        assert!(read > 0, "the Hub ended before it listened: {said}");
        said.push_str(&line);
    }
    let killed = Command::new("kill")
        .args(["-TERM", &hub.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).expect("stderr");
    let status = hub.wait().expect("the Hub ends");
    assert!(status.success(), "{status:?}: {said}{rest}");
    assert!(rest.contains("weir hub stopped"), "{said}{rest}");
}

#[test]
fn plan_diff_says_what_a_restore_keeps_and_refuses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tables = "CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP(3), \
        WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) \
        WITH ('connector' = 'datagen', 'number-of-rows' = '10');\n\
        CREATE TABLE counts (auction BIGINT, n BIGINT) WITH ('connector' = 'blackhole');\n";
    let window = "INSERT INTO counts SELECT auction, COUNT(*) FROM TABLE(TUMBLE(TABLE bids, \
        DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY auction, window_start, window_end;\n";
    let write = |name: &str, text: String| {
        std::fs::write(dir.path().join(name), text).expect("write script");
        name.to_owned()
    };
    let old = write("old.sql", format!("{tables}{window}"));
    let filtered = write(
        "filtered.sql",
        format!(
            "{tables}CREATE VIEW pricey AS SELECT * FROM bids WHERE price > 5;\n{}",
            window.replace("TABLE bids,", "TABLE pricey,")
        ),
    );
    let summed = write(
        "summed.sql",
        format!(
            "{}{}",
            tables.replace("n BIGINT)", "n BIGINT, total BIGINT)"),
            window.replace("COUNT(*)", "COUNT(*), SUM(price)")
        ),
    );

    // `weir plan diff OLD NEW`'s report, its exit status checked against `allowed`.
    let diff = |old: &str, new: &str, allowed: bool| -> String {
        let out = weir(&["plan", "diff", old, new], dir.path());
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            out.status.success(),
            allowed,
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };

    // A filter before the window: the window keeps its state.
    let text = diff(&old, &filtered, true);
    assert!(
        text.contains("keep   counts_window_bids [window]: state kept"),
        "{text}"
    );
    assert!(text.contains("add    counts_filter1 [filter]"), "{text}");

    // An aggregate added to the window: refused, naming the window and the rule's way out.
    let out = weir(&["plan", "diff", &old, &summed], dir.path());
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("REFUSE counts_window_bids [window]")
            && text.contains("--drop-state counts_window_bids"),
        "{text}"
    );
    assert!(
        err.contains("would be refused: `counts_window_bids`"),
        "{err}"
    );
    // ... and allowed with the state dropped, as JSON.
    let out = weir(
        &[
            "plan",
            "diff",
            &old,
            &summed,
            "--drop-state",
            "counts_window_bids",
            "--json",
        ],
        dir.path(),
    );
    let report = stdout_json(&out);
    let line = report["operators"]
        .as_array()
        .expect("operators")
        .iter()
        .find(|c| c["operatorId"] == "counts_window_bids")
        .expect("the window");
    assert_eq!(line["verdict"], "starts-empty", "{report}");

    // A second INSERT into the table: its window is new and starts empty only when allowed.
    let twice = write("twice.sql", format!("{tables}{window}{window}"));
    let text = diff(&old, &twice, false);
    assert!(
        text.contains("REFUSE counts_2_window_bids [window]: new and keeps state")
            && text.contains("keep   counts_window_bids [window]: state kept"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = weir(
        &["plan", "diff", &old, &twice, "--allow-new-state"],
        dir.path(),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("empty  counts_2_window_bids [window]"),
        "{text}"
    );

    // A buffer size only tunes how a GROUP BY runs: its state is kept.
    let group = "CREATE TABLE totals (auction BIGINT, n BIGINT) WITH ('connector' = 'blackhole');\n\
        INSERT INTO totals SELECT auction, COUNT(*) FROM bids GROUP BY auction;\n";
    let grouped = write("grouped.sql", format!("{tables}{group}"));
    let tuned = write(
        "tuned.sql",
        format!("SET 'state.buffer-size' = '64mb';\n{tables}{group}"),
    );
    let text = diff(&grouped, &tuned, true);
    assert!(
        text.lines()
            .any(|l| l.starts_with("keep") && l.contains("[group_aggregate]: state kept")),
        "{text}"
    );

    // A malformed action is refused before anything runs.
    let out = weir(
        &["run", &old, "--map-operator", "counts_window_bids"],
        dir.path(),
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("expected OLD=NEW"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
