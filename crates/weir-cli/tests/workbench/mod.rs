//! The web workbench in a real browser: headless Chromium (the test kit's `browser`) against a
//! real `weir hub` and one `weir agent`. The flow a user follows: type a SQL job into the
//! editor with a mistake, validate and see the error at its line and column, fix it, validate,
//! submit stopped, inspect, start, watch the graph (one node per operator of the plan, live
//! rows/s) and the checkpoints tab fill, check an epoch's manifest, stop. Along the way: the
//! editor used by keyboard (Tab indents, Esc then Tab moves on, Validate by Enter), a verdict
//! cleared by an edit, refreshes that keep focus and selected text, every page at a phone's
//! width (390 px) without a page wider than the screen, and the subtasks of an operator.
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

    /// Waits for the token form (focused, labelled, a password field), types `token` and Enter,
    /// and waits until the page stored it and hid the form.
    async fn sign_in(&self, token: &str) {
        self.until(
            "the token form, focused, with its label",
            "document.activeElement?.id === 'token-input' && \
             document.activeElement.type === 'password' && \
             document.querySelector('label[for=token-input]')?.textContent === 'Access token'",
        )
        .await;
        self.find("#token-input")
            .await
            .send_keys(&format!("{token}{}", fantoccini::key::Key::Enter))
            .await
            .expect("type the token");
        self.until(
            "signed in: the token stored, the form hidden",
            &format!(
                "sessionStorage.getItem('weir.token') === {token:?} && \
                 document.querySelector('#sign-in').hidden"
            ),
        )
        .await;
    }

    /// Runs `js` (statements) in the page; its `return` value.
    async fn run(&self, js: &str) -> serde_json::Value {
        self.browser
            .client()
            .execute(js, vec![])
            .await
            .unwrap_or_else(|e| panic!("running `{js}`: {e}"))
    }

    /// Sets the page's viewport to `width` x `height` CSS pixels: the window's frame added, and
    /// corrected by what the first try gave (the frame's size depends on the window's).
    async fn viewport(&self, width: u32, height: u32) {
        for _ in 0..3 {
            let sizes: (i64, i64, i64, i64) = serde_json::from_value(
                self.run(
                    "return [window.outerWidth, window.outerHeight, \
                     window.innerWidth, window.innerHeight];",
                )
                .await,
            )
            .expect("window sizes");
            let (outer_w, outer_h, inner_w, inner_h) = sizes;
            if (inner_w, inner_h) == (i64::from(width), i64::from(height)) {
                return;
            }
            let w = outer_w + i64::from(width) - inner_w;
            let h = outer_h + i64::from(height) - inner_h;
            self.browser
                .client()
                .set_window_size(w as u32, h as u32)
                .await
                .expect("window size");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        self.until(
            &format!("a viewport of {width}x{height}"),
            &format!("window.innerWidth === {width} && window.innerHeight === {height}"),
        )
        .await;
    }

    /// Asserts that the page is no wider than the viewport (tables scroll in their boxes).
    async fn fits(&self, what: &str) {
        // After the view drew its data (the caller waited for it) and one more refresh.
        tokio::time::sleep(Duration::from_millis(600)).await;
        let sizes = self
            .run(
                "return [document.documentElement.scrollWidth, window.innerWidth, \
                 Array.from(document.querySelectorAll('body *')).filter(e => \
                 e.getBoundingClientRect().right > window.innerWidth + 1 && \
                 !e.closest('.table-scroll, .graph-canvas, .u-legend')).slice(0, 5)\
                 .map(e => e.tagName + '.' + e.className + '#' + e.id)];",
            )
            .await;
        let (scroll, inner): (u64, u64) = (
            sizes[0].as_u64().expect("scrollWidth"),
            sizes[1].as_u64().expect("innerWidth"),
        );
        assert!(
            scroll <= 390 && inner == 390,
            "{what}: the page is {scroll} px wide in a {inner} px viewport; too wide: {}",
            sizes[2]
        );
    }

    /// Waits until `predicate` holds, `ms` later checks it still does (two page refreshes).
    async fn holds(&self, what: &str, predicate: &str, ms: u64) {
        self.until(what, predicate).await;
        tokio::time::sleep(Duration::from_millis(ms)).await;
        let still = self.run(&format!("return !!({predicate});")).await;
        assert_eq!(
            still,
            serde_json::Value::Bool(true),
            "{what}, {ms} ms later"
        );
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

    // The Hub asks for a token: the first call without one gets 401 and the page its token
    // form (focused, labelled); the admin token typed with Enter signs in.
    page.go("#/jobs").await;
    page.sign_in(&cluster.admin_token).await;

    // The editor by keyboard: Tab indents; Esc, then Tab, moves on to Validate, which Enter
    // presses; the next Tab reaches Submit.
    page.go("#/new").await;
    let editor = page.find("#sql-editor").await;
    editor.clear().await.expect("clear the template");
    use fantoccini::key::Key;
    editor
        .send_keys(&format!("SELEC{}", Key::Tab))
        .await
        .expect("type and Tab");
    page.until(
        "Tab indents in the editor",
        "document.activeElement?.id === 'sql-editor' && \
         document.activeElement.value === 'SELEC  '",
    )
    .await;
    editor
        .send_keys(&format!("{}{}", Key::Escape, Key::Tab))
        .await
        .expect("Esc, Tab");
    page.until(
        "Esc then Tab moves the focus to Validate",
        "document.activeElement?.id === 'validate'",
    )
    .await;
    let validate = page.find("#validate").await;
    validate
        .send_keys(&Key::Enter.to_string())
        .await
        .expect("Enter on Validate");
    page.until(
        "the validation by keyboard",
        "document.querySelector('[data-testid=validation-result]')?.dataset.valid === 'false'",
    )
    .await;
    validate
        .send_keys(&Key::Tab.to_string())
        .await
        .expect("Tab to Submit");
    page.until(
        "Tab reaches Submit",
        "document.activeElement?.id === 'submit'",
    )
    .await;

    // The editor: a job with a mistake on its last line.
    editor.clear().await.expect("clear the editor");
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
    // An edit clears the verdict: it was about the script before.
    editor.send_keys(" ").await.expect("edit after validating");
    page.until(
        "the verdict cleared by the edit",
        "!document.querySelector('[data-testid=validation-result]') && \
         document.querySelector('[data-testid=validation-stale]')",
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
    page.until(
        "the job's throughput and uptime in the list",
        "/rows\\/s$/.test(document.querySelector('[data-testid=job-row][data-job-id=clicks] \
         [data-testid=job-throughput]')?.textContent) && \
         document.querySelector('[data-testid=job-uptime]')?.textContent !== '—'",
    )
    .await;
    // A refresh (every 2 s) keeps the focus on the job's link.
    page.run("document.querySelector('[data-testid=job-row] a').focus();")
        .await;
    page.holds(
        "the job's link keeps the focus",
        "document.activeElement === document.querySelector('[data-testid=job-row] a') && \
         document.activeElement.isConnected",
        4_500,
    )
    .await;
    page.go("#/jobs/clicks").await;
    page.find("[data-testid=restart-history] [data-testid=history-row]")
        .await;
    // The job's page redraws its actions every 2 s: the focused Stop button stays focused.
    page.until(
        "Stop enabled",
        "document.querySelector('#action-stop') && !document.querySelector('#action-stop').disabled",
    )
    .await;
    page.run("document.querySelector('#action-stop').focus();")
        .await;
    page.holds(
        "Stop keeps the focus",
        "document.activeElement?.id === 'action-stop' && document.activeElement.isConnected",
        4_500,
    )
    .await;

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
    page.until(
        "the manifest in view",
        "(() => { const r = document.querySelector('[data-testid=manifest]')\
         ?.getBoundingClientRect(); return r && r.top < window.innerHeight && r.bottom > 0; })()",
    )
    .await;
    page.shot("checkpoints.png").await;
    // Selected text (a checksum in the records, redrawn every 2 s) stays selected.
    let chosen = page
        .run(
            "const cell = document.querySelector('[data-testid=record-row] td[title]'); \
             const range = document.createRange(); range.selectNodeContents(cell); \
             const s = document.getSelection(); s.removeAllRanges(); s.addRange(range); \
             return s.toString();",
        )
        .await;
    let chosen = chosen.as_str().expect("selected text").to_owned();
    assert!(!chosen.is_empty(), "a checksum selected");
    page.holds(
        "the selected checksum stays selected",
        &format!(
            "document.getSelection().toString() === {chosen:?} && \
             document.getSelection().anchorNode.isConnected"
        ),
        4_500,
    )
    .await;
    page.run("document.getSelection().removeAllRanges();").await;

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
    page.until(
        "the window's watermark, a timestamp, and its lag behind the newest event time",
        "Array.from(document.querySelectorAll('[data-testid=operator-metrics-row]'))\
         .some(r => / UTC$/.test(r.cells[7].textContent) && r.cells[9].textContent !== '—')",
    )
    .await;
    page.shot("metrics.png").await;

    // An operator's subtasks, from its node in the graph (by keyboard).
    page.click("#tab-graph").await;
    let source = page
        .find("[data-testid=graph-node][data-kind=source]")
        .await;
    let source_id = source
        .attr("data-operator-id")
        .await
        .expect("attr")
        .expect("operator id");
    page.run("document.querySelector('[data-testid=graph-node][data-kind=source]').focus();")
        .await;
    source
        .send_keys(&Key::Enter.to_string())
        .await
        .expect("Enter on the node");
    page.until(
        "the source's subtasks with rows/s and newest event time",
        &format!(
            "document.querySelector('[data-testid=subtasks]')?.dataset.operatorId === {source_id:?} && \
             Array.from(document.querySelectorAll('[data-testid=subtask-row]'))\
             .some(r => /rows\\/s$/.test(r.cells[3].textContent) && /UTC/.test(r.cells[7].textContent))"
        ),
    )
    .await;

    // At a phone's width, every page fits the screen.
    page.viewport(390, 844).await;
    for (hash, ready) in [
        ("#/jobs", "[data-testid=job-row]"),
        ("#/new", "#sql-editor"),
        ("#/agents", "[data-testid=agent-row]"),
        ("#/jobs/clicks", "[data-testid=history-row]"),
        ("#/jobs/clicks/graph", "[data-testid=graph-node]"),
        (
            "#/jobs/clicks/metrics",
            "[data-testid=operator-metrics-row]",
        ),
        ("#/jobs/clicks/checkpoints", "[data-testid=epoch-row]"),
        ("#/jobs/clicks/sql", "#version-sql"),
    ] {
        page.go(hash).await;
        page.find(ready).await;
        page.fits(hash).await;
    }
    page.go("#/jobs/clicks").await;
    page.find("[data-testid=history-row]").await;
    page.shot("phone.png").await;
    page.viewport(1440, 900).await;

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

    // The browser logs the 401 that asked for the token at the start as a failed load; nothing
    // else.
    let errors: Vec<String> = page
        .browser
        .console_errors()
        .expect("console log")
        .into_iter()
        .filter(|e| {
            !e.contains(
                "/api/v1/jobs - Failed to load resource: the server responded with a status of 401",
            )
        })
        .collect();
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
    // The preview says which operator's state stops it, and what dropping it would do.
    page.click("[data-testid=upgrade-preview]").await;
    let refusing = page
        .until(
            "the preview's refused window",
            "document.querySelector('#upgrade-report [data-allowed=false]') && \
             document.querySelector('#upgrade-report tr[data-verdict=refused]')?.textContent",
        )
        .await;
    let refusing = refusing.as_str().unwrap_or_default().to_owned();
    assert!(refusing.contains("window"), "{refusing}");
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

    // Signing out forgets the token: the Hub refuses the next call (401) and the form asks
    // again; a viewer's token reads but may not start; the admin's reads the list again.
    page.click("#sign-out").await;
    page.until(
        "signed out: the token forgotten, the form asking",
        "sessionStorage.getItem('weir.token') === null && \
         !document.querySelector('#sign-in').hidden",
    )
    .await;
    // A viewer's token reads, and its Start is refused with the role named (403).
    let viewer = crate::hub_auth::create_token(&cluster.weir(), cluster.dir(), "viewer");
    page.sign_in(&viewer).await;
    page.go("#/jobs/clicks").await;
    page.click("#action-start").await;
    page.until(
        "a viewer's Start refused, the role named",
        "document.querySelector('[data-testid=api-error-message]')?.textContent\
         .startsWith(\"HTTP 403: your token's role (viewer/operator/admin) may not start or \
         stop jobs\")",
    )
    .await;
    page.click("#sign-out").await;
    page.until(
        "signed out again, the form asking",
        "sessionStorage.getItem('weir.token') === null && \
         !document.querySelector('#sign-in').hidden",
    )
    .await;
    page.go("#/jobs").await;
    page.sign_in(&cluster.admin_token).await;
    page.until(
        "the list read again with the token, Sign out offered",
        "document.querySelector('[data-testid=job-row][data-job-id=clicks]') && \
         !document.querySelector('#sign-out').hidden",
    )
    .await;

    // The graph of the stopped job says so; when the Hub cannot be reached (the page's fetch
    // made to fail), the top bar and the graph say since when.
    page.go("#/jobs/clicks/graph").await;
    page.until(
        "the graph says the job stopped",
        "document.querySelector('[data-testid=graph-status]')?.dataset.state === 'ended' && \
         document.querySelector('[data-testid=graph-status]').textContent.startsWith('Job stopped')",
    )
    .await;
    page.run("window.fetch = () => Promise.reject(new TypeError('Failed to fetch'));")
        .await;
    page.until(
        "the Hub unreachable, in the top bar and the graph",
        "!document.querySelector('#conn').hidden && \
         document.querySelector('#conn').textContent.startsWith('Hub unreachable since ') && \
         document.querySelector('[data-testid=graph-status]')?.dataset.state === 'unreachable'",
    )
    .await;
    page.go("#/jobs").await;
    page.browser
        .client()
        .refresh()
        .await
        .expect("reload with the real fetch");
    page.find("[data-testid=job-row]").await;

    // Chrome logs every answer of 400 and above: the refused upgrade's 409, the 401s that
    // asked for the token (at the start and after each sign-out) and the viewer's 403 are the
    // only ones.
    let errors = page.browser.console_errors().expect("console log");
    assert!(
        errors.iter().all(
            |e| (e.contains("/api/v1/jobs/clicks/upgrades") && e.contains("409"))
                || e.contains("status of 401")
                || (e.contains("/api/v1/jobs/clicks/desired-state") && e.contains("403"))
        ),
        "the page logged errors: {errors:?}"
    );
    eprintln!("screenshots in {}", screenshots().display());
}
