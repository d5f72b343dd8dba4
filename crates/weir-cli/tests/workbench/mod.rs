//! The web workbench in a real browser: headless Chromium (the test kit's `browser`) against a
//! real `weir hub` and one `weir agent`. The flow a user follows: type a SQL job into the
//! editor with a mistake, validate and see the error at its line and column, fix it, validate,
//! submit stopped, inspect, start, watch the graph (one node per operator of the plan, live
//! rows/s) and the checkpoints tab fill, check an epoch's manifest, stop.
//!
//! Screenshots of each view go to `<target>/tmp/workbench-screenshots/`; docs/images/ holds
//! current copies (docs/workbench.md).

use crate::cluster::Cluster;
use fantoccini::elements::Element;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use weir_testkit::browser::Browser;

/// How long one step of the flow may take.
const STEP: Duration = Duration::from_secs(120);

/// The job: generated clicks counted per user in 10-second tumbling windows into CSV files,
/// checkpointing every second. A blackhole sink that takes 1,000 rows/s paces the source, whose
/// event time starts at `start_ms` and advances 1 ms a row: about as fast as the wall clock, so
/// that the watermark lag stays small. `from` is the table the blackhole reads: the deliberate
/// mistake names one that does not exist.
fn job_sql(dir: &Path, start_ms: i64, from: &str) -> String {
    format!(
        "SET 'parallelism' = '1';
SET 'checkpoint.interval' = '1s';
SET 'checkpoint.dir' = '{ckpt}';

CREATE TABLE clicks (
  user_id BIGINT,
  ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH (
  'connector' = 'datagen',
  'number-of-rows' = '1000000000',
  'batch-size' = '100',
  'fields.ts.min' = '{start_ms}',
  'fields.user_id.kind' = 'random',
  'fields.user_id.min' = '1',
  'fields.user_id.max' = '100'
);

CREATE TABLE counts (user_id BIGINT, window_start TIMESTAMP(3), clicks BIGINT) WITH (
  'connector' = 'filesystem',
  'path' = '{out}',
  'format' = 'csv'
);

CREATE TABLE pace (user_id BIGINT) WITH ('connector' = 'blackhole', 'rows-per-second' = '1000');

INSERT INTO counts
SELECT user_id, window_start, COUNT(*)
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY user_id, window_start, window_end;

INSERT INTO pace SELECT user_id FROM {from};
",
        ckpt = dir.join("checkpoints").display(),
        out = dir.join("out").display(),
    )
}

fn screenshots() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("workbench-screenshots")
}

/// The browser and what a failing step needs to say.
struct Page {
    browser: Browser,
    base: String,
}

impl Page {
    /// Evaluates the JavaScript expression `js` until it is truthy; fails the test after
    /// [`STEP`] with `what`, a screenshot and the page's console errors.
    async fn until(&self, what: &str, js: &str) -> serde_json::Value {
        let started = Instant::now();
        let script = format!("return ({js});");
        loop {
            let value = self
                .browser
                .client()
                .execute(&script, vec![])
                .await
                .unwrap_or(serde_json::Value::Null);
            let truthy = match &value {
                serde_json::Value::Null | serde_json::Value::Bool(false) => false,
                serde_json::Value::String(s) => !s.is_empty(),
                serde_json::Value::Number(n) => n.as_f64() != Some(0.0),
                _ => true,
            };
            if truthy {
                return value;
            }
            if started.elapsed() > STEP {
                self.fail(what).await;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn fail(&self, what: &str) -> ! {
        let shot = screenshots().join("failure.png");
        let _ = self.browser.screenshot(&shot).await;
        let errors = self.browser.console_errors().unwrap_or_default();
        panic!(
            "{what}: not within {STEP:?}; screenshot {}; console errors: {errors:?}",
            shot.display()
        );
    }

    async fn find(&self, selector: &str) -> Element {
        match self.browser.wait_for(selector, STEP).await {
            Ok(element) => element,
            Err(e) => self.fail(&format!("`{selector}`: {e}")).await,
        }
    }

    async fn click(&self, selector: &str) {
        self.until(
            &format!("`{selector}` enabled"),
            &format!(
                "(() => {{ const e = document.querySelector({selector:?}); \
                 return e && !e.disabled; }})()"
            ),
        )
        .await;
        self.find(selector).await.click().await.expect("click");
    }

    async fn shot(&self, name: &str) {
        // The top of the page, after the last refresh drew.
        self.browser
            .client()
            .execute(
                "window.scrollTo(0, 0); document.getElementById('toast').hidden = true;",
                vec![],
            )
            .await
            .expect("scroll");
        tokio::time::sleep(Duration::from_millis(400)).await;
        self.browser
            .screenshot(&screenshots().join(name))
            .await
            .expect("screenshot");
    }

    async fn go(&self, hash: &str) {
        self.browser
            .goto(&format!("{}/{hash}", self.base))
            .await
            .expect("navigate");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workbench_validates_submits_starts_shows_the_graph_and_checkpoints_and_stops() {
    let browser = Browser::start()
        .await
        .expect("the browser test needs headless Chromium");
    let cluster = Cluster::start(1, 2, "5s").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let page = Page {
        browser,
        base: cluster.client.base_url().trim_end_matches('/').to_owned(),
    };
    let _ = std::fs::remove_dir_all(screenshots());

    // The editor: a job with a mistake on its last line.
    page.go("#/new").await;
    let editor = page.find("#sql-editor").await;
    editor.clear().await.expect("clear the template");
    let start_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
        - 5_000;
    let bad = job_sql(dir.path(), start_ms, "clickz");
    editor.send_keys(&bad).await.expect("type the SQL");
    page.find("#job-name")
        .await
        .send_keys("clicks")
        .await
        .expect("name");
    page.click("#validate").await;
    page.until(
        "the validation fails",
        "document.querySelector('[data-testid=validation-result]')?.dataset.valid === 'false'",
    )
    .await;
    let line = bad.lines().count() as u64;
    let column = bad
        .lines()
        .last()
        .and_then(|l| l.find("clickz"))
        .expect("the mistake") as u64
        + 1;
    let error = page.find("[data-testid=validation-error]").await;
    let text = error.text().await.expect("error text");
    assert!(
        text.contains(&format!("line {line}, column {column}")) && text.contains("clickz"),
        "the error names its position: {text}"
    );
    assert_eq!(
        error.attr("data-line").await.expect("attr").as_deref(),
        Some(line.to_string().as_str())
    );
    page.until(
        "the gutter marks the line, the text the column",
        &format!(
            "document.querySelector('.gutter-line.error')?.dataset.line === '{line}' && \
             document.querySelector('[data-testid=error-marker]')"
        ),
    )
    .await;
    page.shot("editor-error.png").await;

    // Clicking the error puts the caret on the mistake: delete it and type the fix there.
    error.click().await.expect("click the error");
    let caret = page
        .until(
            "the caret at the error",
            "document.activeElement?.id === 'sql-editor' && document.activeElement.selectionStart",
        )
        .await;
    let offset = bad.rfind("clickz").expect("the mistake") as u64;
    assert_eq!(
        caret.as_u64(),
        Some(offset),
        "the caret is at line {line}, column {column}"
    );
    let delete = fantoccini::key::Key::Delete
        .to_string()
        .repeat("clickz".len());
    editor
        .send_keys(&format!("{delete}clicks"))
        .await
        .expect("fix the SQL");
    let fixed = job_sql(dir.path(), start_ms, "clicks");
    page.until(
        "the fixed SQL in the editor",
        &format!("document.querySelector('#sql-editor').value === {fixed:?}"),
    )
    .await;
    page.click("#validate").await;
    page.until(
        "the validation passes",
        "document.querySelector('[data-testid=validation-result]')?.dataset.valid === 'true'",
    )
    .await;

    // Submit stopped: the job's page, stopped, with its detail.
    page.click("#submit").await;
    page.until(
        "the job's page, stopped",
        "location.hash === '#/jobs/clicks' && \
         document.querySelector('#job-phase')?.dataset.phase === 'stopped'",
    )
    .await;
    page.find("#assignments-table, [data-testid=overview]")
        .await;
    let detail = cluster.detail("clicks").await;
    assert_eq!(
        detail.job.desired_state,
        weir_control::DesiredState::Stopped
    );

    // Start: running on the Agent.
    page.click("#action-start").await;
    page.until(
        "the job running",
        "document.querySelector('#job-phase')?.dataset.phase === 'running'",
    )
    .await;
    page.find("[data-testid=assignment-row]").await;
    page.shot("overview.png").await;
    page.go("#/jobs").await;
    page.until(
        "the job running in the list",
        "document.querySelector('[data-testid=job-row][data-job-id=clicks]')\
         ?.textContent.includes('running')",
    )
    .await;
    page.shot("jobs.png").await;
    page.go("#/jobs/clicks").await;

    // The graph: one node per operator of the plan, with live rows/s.
    let operators: Vec<String> = detail.plans["streamGraph"]["nodes"]
        .as_array()
        .expect("stream graph nodes")
        .iter()
        .map(|n| n["operatorId"].as_str().expect("operator id").to_owned())
        .collect();
    page.click("#tab-graph").await;
    let drawn = page
        .until(
            "the graph drawn",
            "(() => { const ids = Array.from(document.querySelectorAll('[data-testid=graph-node]'))\
             .map(n => n.dataset.operatorId); return ids.length ? ids : null; })()",
        )
        .await;
    let mut drawn: Vec<String> = serde_json::from_value(drawn).expect("ids");
    let mut want = operators.clone();
    drawn.sort();
    want.sort();
    assert_eq!(drawn, want, "one node per operator of the plan");
    page.until(
        "rows/s on the source's node",
        "Number(document.querySelector('[data-testid=graph-node][data-kind=source]')\
         ?.dataset.rowsPerSecond) > 0",
    )
    .await;
    page.shot("graph.png").await;

    // Checkpoints: the lane's completed epochs and the job-level checkpoints fill the tab; the
    // manifest of a job-level checkpoint, then of an epoch with its tasks, is shown with its
    // checksum verified.
    page.click("#tab-checkpoints").await;
    page.until(
        "completed checkpoints",
        "Number(document.querySelector('[data-testid=lane-completed]')?.textContent) > 0 && \
         document.querySelector('[data-testid=record-row]')",
    )
    .await;
    page.find("[data-testid=record-row]")
        .await
        .click()
        .await
        .expect("click the checkpoint");
    page.until(
        "the checkpoint's manifest verified",
        "document.querySelector('[data-testid=manifest]')?.dataset.verified === 'true'",
    )
    .await;
    page.find("[data-testid=epoch-row][data-status=completed]")
        .await
        .click()
        .await
        .expect("click the epoch");
    page.until(
        "the epoch's manifest verified, and its tasks",
        "document.querySelector('[data-testid=manifest]')?.dataset.verified === 'true' && \
         document.querySelector('[data-testid=manifest] h2')?.textContent.includes('epoch') && \
         document.querySelector('[data-testid=epoch-tasks]')",
    )
    .await;
    page.shot("checkpoints.png").await;

    // A savepoint, named: it joins the job-level records.
    page.click("#action-savepoint").await;
    page.find("#savepoint-name")
        .await
        .send_keys("before-v2")
        .await
        .expect("savepoint name");
    page.click("[data-testid=savepoint-confirm]").await;
    page.until(
        "the savepoint completed",
        "Array.from(document.querySelectorAll('[data-testid=record-row]'))\
         .some(r => r.textContent.includes('before-v2'))",
    )
    .await;

    // Metrics: the throughput and watermark lag charts, once they have some history.
    page.click("#tab-metrics").await;
    page.until(
        "ten seconds of throughput",
        "Number(document.querySelector('[data-testid=chart-rows]')?.dataset.points) >= 10",
    )
    .await;
    page.find("[data-testid=chart-lag] canvas").await;
    page.shot("metrics.png").await;

    // The Agents.
    page.go("#/agents").await;
    page.until(
        "the Agent with its lane",
        "document.querySelector('[data-testid=agent-row]')?.textContent.includes('clicks')",
    )
    .await;
    page.shot("agents.png").await;

    // Stop, from the job's page; then the jobs list.
    page.go("#/jobs/clicks").await;
    page.click("#action-stop").await;
    page.until(
        "the job stopped",
        "document.querySelector('#job-phase')?.dataset.phase === 'stopped' && \
         document.querySelector('#job-desired')?.textContent === 'stopped'",
    )
    .await;

    let errors = page.browser.console_errors().expect("console log");
    assert!(errors.is_empty(), "the page logged errors: {errors:?}");

    // Upgrade from the savepoint: another logic is refused with the Hub's error shown, the
    // same logic is version 2; then a rollback to version 1.
    page.click("#action-upgrade").await;
    page.until(
        "the savepoint offered",
        "document.querySelector('#upgrade-savepoint option')?.textContent.includes('before-v2')",
    )
    .await;
    page.browser
        .client()
        .execute(
            "const e = document.querySelector('#upgrade-sql'); \
             e.value = e.value.replace('COUNT(*)', 'COUNT(user_id)');",
            vec![],
        )
        .await
        .expect("edit the upgrade");
    page.click("[data-testid=upgrade-confirm]").await;
    let refused = page
        .until(
            "the refusal shown",
            "!document.querySelector('#api-error').hidden && \
             document.querySelector('#api-error').textContent",
        )
        .await;
    let refused = refused.as_str().unwrap_or_default().to_owned();
    assert!(
        refused.contains("409") && refused.contains("logic") && refused.contains("`sql`"),
        "the Hub's error, its status and field: {refused}"
    );
    page.browser
        .client()
        .execute(
            "const e = document.querySelector('#upgrade-sql'); \
             e.value = e.value.replace('COUNT(user_id)', 'COUNT(*)');",
            vec![],
        )
        .await
        .expect("undo the edit");
    page.click("[data-testid=upgrade-confirm]").await;
    page.until(
        "version 2",
        "document.querySelector('#job-version')?.textContent.startsWith('2 ')",
    )
    .await;
    page.click("#action-rollback").await;
    page.until(
        "version 1 again",
        "document.querySelector('#job-version')?.textContent.startsWith('1 ')",
    )
    .await;
    assert_eq!(
        cluster
            .client
            .job_versions("clicks")
            .await
            .expect("versions")
            .len(),
        2
    );

    page.go("#/jobs").await;
    page.until(
        "the job stopped in the list",
        "document.querySelector('[data-testid=job-row][data-job-id=clicks]')\
         ?.textContent.includes('stopped')",
    )
    .await;

    // Chrome logs every answer of 400 and above; the refused upgrade's 409 is the only one.
    let errors = page.browser.console_errors().expect("console log");
    assert!(
        errors
            .iter()
            .all(|e| e.contains("/api/v1/jobs/clicks/upgrades") && e.contains("409")),
        "the page logged errors: {errors:?}"
    );
    eprintln!("screenshots in {}", screenshots().display());
}
