// The SQL editor (a textarea with a line-number gutter that marks the lines validation
// complains about) and the New job view: validate, then submit stopped.

import { ApiError, paths, post } from "./api.js";
import { h, replace } from "./dom.js";
import { clearError, showError, toast } from "./notices.js";

/** Lines of the editor's text at which the caret is put for `line`/`column` (1-based). */
function offsetOf(text, line, column) {
  const lines = text.split("\n");
  let offset = 0;
  for (let i = 0; i < Math.min(line - 1, lines.length); i += 1) offset += lines[i].length + 1;
  const here = lines[Math.min(line - 1, lines.length - 1)] || "";
  return offset + Math.min(Math.max(column - 1, 0), here.length);
}

/**
 * A SQL editor in `container`. Returns `{textarea, value(), setValue(), mark(errors),
 * goTo(line, column)}`; `mark` highlights the lines of `errors` (`{line, message}`).
 */
export function createEditor({ id, value = "", readOnly = false, rows = 22 }) {
  const gutter = h("div", { class: "gutter", "aria-hidden": "true", "data-testid": "gutter" });
  const highlights = h("div", { class: "line-highlights", "aria-hidden": "true" });
  const textarea = h("textarea", {
    id,
    class: "code",
    spellcheck: "false",
    autocomplete: "off",
    autocapitalize: "off",
    wrap: "off",
    rows,
    readonly: readOnly,
    "data-testid": id,
    "aria-label": "SQL script",
  });
  textarea.value = value;
  const root = h("div", { class: `editor${readOnly ? " readonly" : ""}` }, gutter,
    h("div", { class: "editor-text" }, highlights, textarea));
  let marked = new Map();
  // The first error column of each marked line.
  let columns = new Map();

  function lineHeight() {
    return parseFloat(getComputedStyle(textarea).lineHeight) || 18;
  }

  function renderGutter() {
    const count = textarea.value.split("\n").length;
    const lines = [];
    for (let i = 1; i <= count; i += 1) {
      const message = marked.get(i);
      lines.push(
        h(
          "div",
          {
            class: message ? "gutter-line error" : "gutter-line",
            "data-testid": "gutter-line",
            dataset: { line: i },
            title: message || null,
          },
          message ? "●" : "",
          String(i),
        ),
      );
    }
    replace(gutter, lines);
    syncScroll();
  }

  function charWidth() {
    const ctx = (charWidth.canvas ||= document.createElement("canvas")).getContext("2d");
    ctx.font = getComputedStyle(textarea).font;
    return ctx.measureText("M").width || 8;
  }

  function renderHighlights() {
    const lh = lineHeight();
    const style = getComputedStyle(textarea);
    const padTop = parseFloat(style.paddingTop) || 0;
    const padLeft = parseFloat(style.paddingLeft) || 0;
    const cw = charWidth();
    const lines = textarea.value.split("\n");
    replace(
      highlights,
      [...marked.keys()].map((line) => {
        const top = padTop + (line - 1) * lh - textarea.scrollTop;
        const column = columns.get(line);
        // A squiggle under the token the error points at.
        const text = lines[line - 1] || "";
        const token = column ? (text.slice(column - 1).match(/^[\w.$"'`]+/) || [" "])[0] : null;
        return [
          h("div", { class: "line-highlight", style: `top:${top}px;height:${lh}px` }),
          token
            ? h("div", {
              class: "col-marker",
              "data-testid": "error-marker",
              style: `top:${top + lh - 3}px;left:${padLeft + (column - 1) * cw -
                textarea.scrollLeft}px;width:${Math.max(token.length, 1) * cw}px`,
            })
            : null,
        ];
      }),
    );
  }

  function syncScroll() {
    gutter.scrollTop = textarea.scrollTop;
    renderHighlights();
  }

  textarea.addEventListener("input", () => {
    if (marked.size) {
      marked = new Map();
      columns = new Map();
    }
    renderGutter();
  });
  textarea.addEventListener("scroll", syncScroll);
  textarea.addEventListener("keydown", (e) => {
    if (e.key === "Tab" && !readOnly) {
      e.preventDefault();
      textarea.setRangeText("  ", textarea.selectionStart, textarea.selectionEnd, "end");
      renderGutter();
    }
  });
  requestAnimationFrame(renderGutter);
  renderGutter();

  return {
    root,
    textarea,
    value: () => textarea.value,
    setValue(text) {
      textarea.value = text;
      marked = new Map();
      columns = new Map();
      renderGutter();
    },
    mark(errors) {
      marked = new Map();
      columns = new Map();
      for (const e of errors) {
        if (e.line) {
          const previous = marked.get(e.line);
          marked.set(e.line, previous ? `${previous}\n${e.message}` : e.message);
          if (e.column && !columns.has(e.line)) columns.set(e.line, e.column);
        }
      }
      renderGutter();
    },
    goTo(line, column) {
      const offset = offsetOf(textarea.value, line, column || 1);
      textarea.focus();
      textarea.setSelectionRange(offset, offset);
      const lh = lineHeight();
      textarea.scrollTop = Math.max(0, (line - 1) * lh - textarea.clientHeight / 3);
      syncScroll();
    },
  };
}

/**
 * The list of validation errors under an editor; clicking one puts the caret at its line and
 * column.
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
  const editor = createEditor({ id: "sql-editor", value: TEMPLATE });
  const name = h("input", {
    id: "job-name",
    "data-testid": "job-name",
    type: "text",
    placeholder: "my-job",
    pattern: "[A-Za-z0-9_-]{1,64}",
    autocomplete: "off",
    spellcheck: "false",
  });
  const result = h("div", { id: "validation", "data-testid": "validation" });
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
