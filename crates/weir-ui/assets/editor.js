// The SQL editor: a textarea with a line-number gutter that marks the lines validation
// complains about. Tab indents; Esc releases the keyboard, so that the next Tab moves focus on
// (as in CodeMirror and Monaco); typing again, or leaving, gives Tab back to the editor.

import { h, replace } from "./dom.js";

/** Lines of the editor's text at which the caret is put for `line`/`column` (1-based). */
function offsetOf(text, line, column) {
  const lines = text.split("\n");
  let offset = 0;
  for (let i = 0; i < Math.min(line - 1, lines.length); i += 1) offset += lines[i].length + 1;
  const here = lines[Math.min(line - 1, lines.length - 1)] || "";
  return offset + Math.min(Math.max(column - 1, 0), here.length);
}

let hints = 0;

/**
 * A SQL editor. Returns `{root, textarea, value(), setValue(), mark(errors), goTo(line,
 * column)}`; `mark` highlights the lines of `errors` (`{line, message}`); `onInput()` is
 * called after every edit by the user.
 */
export function createEditor({ id, value = "", readOnly = false, rows = 22, onInput = null }) {
  hints += 1;
  const hintId = `editor-keys-${hints}`;
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
    "aria-describedby": readOnly ? null : hintId,
  });
  textarea.value = value;
  const hint = readOnly ? null : h("p", { id: hintId, class: "editor-keys muted",
    "data-testid": "editor-keys" }, "Tab indents. Esc, then Tab, moves to the next control.");
  const root = h("div", { class: "editor-wrap" },
    h("div", { class: `editor${readOnly ? " readonly" : ""}` }, gutter,
      h("div", { class: "editor-text" }, highlights, textarea)),
    hint);
  // After Esc, Tab leaves the editor instead of indenting.
  let released = false;
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
    if (onInput) onInput();
  });
  textarea.addEventListener("scroll", syncScroll);
  textarea.addEventListener("keydown", (e) => {
    if (readOnly) return;
    if (e.key === "Escape") {
      released = true;
      root.classList.add("released");
      return;
    }
    if (e.key === "Tab" && !released && !e.ctrlKey && !e.altKey && !e.metaKey) {
      e.preventDefault();
      textarea.setRangeText("  ", textarea.selectionStart, textarea.selectionEnd, "end");
      renderGutter();
      if (onInput) onInput();
      return;
    }
    if (e.key !== "Tab" && e.key !== "Shift") {
      released = false;
      root.classList.remove("released");
    }
  });
  textarea.addEventListener("blur", () => {
    released = false;
    root.classList.remove("released");
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
