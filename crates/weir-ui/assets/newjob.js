// The New job view: a name, the SQL editor, Validate (nothing stored) and Submit stopped. A
// verdict of Validate is cleared by the next edit: it was about another script.

import { ApiError, paths, post } from "./api.js";
import { h, replace } from "./dom.js";
import { clearError, showError, toast } from "./notices.js";
import { createEditor } from "./editor.js";

/**
 * The list of validation errors under an editor; clicking one (or Enter on it) puts the caret
 * at its line and column.
 */
export function renderValidation(container, editor, result) {
  if (result.valid) {
    const details = [
      result.lanes ? `${result.lanes} lane${result.lanes === 1 ? "" : "s"}` : null,
      result.planFingerprint ? `plan ${result.planFingerprint.slice(0, 12)}…` : null,
    ].filter(Boolean);
    replace(
      container,
      h(
        "div",
        { class: "validation ok", "data-testid": "validation-result", dataset: { valid: "true" } },
        h("strong", {}, "Valid"),
        details.length ? ` — ${details.join(", ")}` : "",
      ),
      (result.warnings || []).map((w) =>
        h("div", { class: "validation warning", "data-testid": "validation-warning" }, w),
      ),
    );
    editor.mark([]);
    return;
  }
  const errors = result.errors || [];
  editor.mark(errors);
  replace(
    container,
    h(
      "div",
      { class: "validation bad", "data-testid": "validation-result", dataset: { valid: "false" } },
      h("strong", {}, `${errors.length} error${errors.length === 1 ? "" : "s"}`),
      h(
        "ul",
        { class: "errors" },
        errors.map((e) =>
          h(
            "li",
            {
              class: e.line ? "clickable" : null,
              tabindex: e.line ? 0 : null,
              role: e.line ? "button" : null,
              onkeydown: (k) => {
                if (e.line && k.key === "Enter") editor.goTo(e.line, e.column);
              },
              "data-testid": "validation-error",
              dataset: { line: e.line ?? "", column: e.column ?? "" },
              title: e.line ? "Go to this position" : null,
              onclick: () => e.line && editor.goTo(e.line, e.column),
            },
            e.line
              ? h("span", { class: "position" }, `line ${e.line}${e.column ? `, column ${e.column}` : ""}`)
              : null,
            e.path ? h("span", { class: "position" }, e.path) : null,
            h("span", { class: "message" }, e.message),
          ),
        ),
      ),
    ),
    (result.warnings || []).map((w) =>
      h("div", { class: "validation warning", "data-testid": "validation-warning" }, w),
    ),
  );
}

const TEMPLATE = `-- Generated clicks counted per user and minute, written as CSV files. The blackhole
-- table takes 1,000 rows/s and so paces the generator (backpressure).
SET 'parallelism' = '1';
SET 'checkpoint.interval' = '1s';

CREATE TABLE clicks (
  user_id BIGINT,
  ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH (
  'connector' = 'datagen',
  'number-of-rows' = '1000000000',
  'batch-size' = '100',
  'fields.user_id.kind' = 'random',
  'fields.user_id.min' = '1',
  'fields.user_id.max' = '100'
);

CREATE TABLE counts (user_id BIGINT, window_start TIMESTAMP(3), clicks BIGINT) WITH (
  'connector' = 'filesystem',
  'path' = '/tmp/weir-counts',
  'format' = 'csv'
);

CREATE TABLE pace (user_id BIGINT) WITH ('connector' = 'blackhole', 'rows-per-second' = '1000');

INSERT INTO counts
SELECT user_id, window_start, COUNT(*)
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
GROUP BY user_id, window_start, window_end;

INSERT INTO pace SELECT user_id FROM clicks;
`;

export function renderNewJob(root) {
  const result = h("div", { id: "validation", "data-testid": "validation", "aria-live": "polite" });
  const editor = createEditor({
    id: "sql-editor",
    value: TEMPLATE,
    onInput: () => {
      // The verdict was about the script before the edit.
      if (result.firstChild && !result.querySelector("[data-testid=validation-stale]")) {
        replace(result, h("p", { class: "muted", "data-testid": "validation-stale" },
          "Edited since the last validation: validate again."));
      }
    },
  });
  const name = h("input", {
    id: "job-name",
    "data-testid": "job-name",
    type: "text",
    placeholder: "my-job",
    pattern: "[A-Za-z0-9_-]{1,64}",
    autocomplete: "off",
    spellcheck: "false",
  });
  const validate = h("button", { id: "validate", "data-testid": "validate" }, "Validate");
  const submit = h(
    "button",
    { id: "submit", "data-testid": "submit", class: "primary" },
    "Submit stopped",
  );
  const nameError = h("div", { class: "field-error", "data-testid": "name-error", hidden: true });

  function busy(on) {
    validate.disabled = on;
    submit.disabled = on;
  }

  function fieldError(e) {
    // An error about the name goes next to it; any other in the banner.
    if (e instanceof ApiError && e.field === "name") {
      nameError.textContent = e.message;
      nameError.hidden = false;
      name.focus();
      return true;
    }
    return false;
  }

  validate.addEventListener("click", async () => {
    clearError();
    nameError.hidden = true;
    busy(true);
    try {
      const body = { sql: editor.value() };
      if (name.value.trim()) body.name = name.value.trim();
      renderValidation(result, editor, await post(paths.validate, body));
    } catch (e) {
      if (!fieldError(e)) showError(e, "Validate");
    } finally {
      busy(false);
    }
  });

  submit.addEventListener("click", async () => {
    clearError();
    nameError.hidden = true;
    const jobName = name.value.trim();
    if (!jobName) {
      nameError.textContent = "Give the job a name: 1 to 64 characters of [A-Za-z0-9_-].";
      nameError.hidden = false;
      name.focus();
      return;
    }
    busy(true);
    try {
      const job = await post(paths.jobs, {
        name: jobName,
        sql: editor.value(),
        desiredState: "stopped",
      });
      toast(`Submitted ${job.jobId} (stopped)`);
      location.hash = `#/jobs/${encodeURIComponent(job.jobId)}`;
    } catch (e) {
      // A 422 carries the engine's errors as a message; validate shows them at their lines.
      if (!fieldError(e)) showError(e, "Submit");
      if (e instanceof ApiError && e.status === 422) {
        try {
          renderValidation(result, editor, await post(paths.validate, { sql: editor.value() }));
        } catch {
          // The banner already says what is wrong.
        }
      }
    } finally {
      busy(false);
    }
  });

  replace(
    root,
    h("div", { class: "page-head" }, h("h1", {}, "New job")),
    h(
      "div",
      { class: "form-row" },
      h("label", { for: "job-name" }, "Name"),
      name,
      nameError,
    ),
    editor.root,
    h("div", { class: "actions" }, validate, submit,
      h("span", { class: "muted" }, "The job is stored stopped: inspect it, then start it.")),
    result,
  );
  return null;
}
