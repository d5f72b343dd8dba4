// Small DOM helpers: element creation without a framework, and `patch`, which brings a drawn
// region up to date in place (so that a refresh keeps focus, text selection and open details).

/**
 * Creates an element. `attrs` keys: `class`, `text`, `on<event>` (listeners), `dataset`
 * (object), `style` (string), `key` (identity of a list item for `patch`), anything else as
 * an attribute (skipped when null/false).
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** Creates an SVG element. */
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/**
 * Listeners go through `el.handlers` (one dispatcher per event type), so that `patch` can hand
 * a kept element the handlers of its newer drawing.
 */
function listen(el, type, fn) {
  if (!el.handlers) el.handlers = {};
  if (!el.handlers[type]) {
    el.addEventListener(type, (event) => el.handlers[type] && el.handlers[type](event));
  }
  el.handlers[type] = fn;
}

function setAttrs(el, attrs) {
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "text") el.textContent = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key === "key") el.dataset.key = String(value);
    else if (key.startsWith("on") && typeof value === "function") listen(el, key.slice(2), value);
    else if (key === "class" && el instanceof SVGElement) el.setAttribute("class", value);
    else if (key === "class") el.className = value;
    else if (key === "value" && "value" in el && !(el instanceof SVGElement)) el.value = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Removes every child of `el` and appends `children`. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/**
 * Makes `el`'s children look like `children` while keeping every node that can stay: a text
 * node or an element of the same tag (and `key`, when list items have one) is updated in
 * place, so the focused element keeps focus and selected text stays selected. The values of
 * form fields and the open state of `<details>` belong to the user and are kept.
 */
export function patch(el, ...children) {
  const next = document.createElement(el.tagName);
  append(next, children);
  morphChildren(el, next);
  return el;
}

const keyOf = (n) => (n.nodeType === Node.ELEMENT_NODE ? n.getAttribute("data-key") : null);

function sameKind(a, b) {
  return a.nodeType === b.nodeType && a.nodeName === b.nodeName && keyOf(a) === keyOf(b);
}

/** Whether the user has selected text that starts or ends in `node`. */
function selected(node) {
  const s = document.getSelection();
  return !!s && !s.isCollapsed && (s.anchorNode === node || s.focusNode === node);
}

function morph(from, to) {
  if (from.nodeType === Node.TEXT_NODE || from.nodeType === Node.COMMENT_NODE) {
    if (from.nodeValue !== to.nodeValue && !selected(from)) from.nodeValue = to.nodeValue;
    return;
  }
  for (const { name } of [...from.attributes]) {
    if (!to.hasAttribute(name) && !(name === "open" && from.nodeName === "DETAILS")) {
      from.removeAttribute(name);
    }
  }
  for (const { name, value } of [...to.attributes]) {
    if (from.getAttribute(name) !== value) from.setAttribute(name, value);
  }
  if (to.handlers) {
    for (const [type, fn] of Object.entries(to.handlers)) listen(from, type, fn);
  }
  if (from.nodeName === "INPUT" || from.nodeName === "TEXTAREA") return;
  if (from.nodeName === "SELECT") {
    const chosen = from.value;
    morphChildren(from, to);
    if ([...from.options].some((o) => o.value === chosen)) from.value = chosen;
    return;
  }
  morphChildren(from, to);
}

function morphChildren(from, to) {
  const keyed = new Map();
  for (const c of from.childNodes) if (keyOf(c) !== null) keyed.set(keyOf(c), c);
  let cur = from.firstChild;
  for (const n of [...to.childNodes]) {
    const k = keyOf(n);
    let match = null;
    if (k !== null) match = keyed.get(k) || null;
    else if (cur && sameKind(cur, n)) match = cur;
    if (match && sameKind(match, n)) {
      keyed.delete(k);
      if (match === cur) cur = cur.nextSibling;
      else from.insertBefore(match, cur);
      morph(match, n);
    } else {
      from.insertBefore(n, cur);
    }
  }
  while (cur) {
    const next = cur.nextSibling;
    from.removeChild(cur);
    cur = next;
  }
}

/**
 * A table in a box that scrolls sideways on a narrow screen: `columns` are header labels,
 * `rows` arrays of cells (nodes or text).
 */
export function table(attrs, columns, rows) {
  return h(
    "div",
    { class: "table-scroll" },
    h(
      "table",
      attrs,
      h("thead", {}, h("tr", {}, columns.map((c) => h("th", {}, c)))),
      h("tbody", {}, rows),
    ),
  );
}

/** A "label: value" pair of a definition grid. */
export function field(label, value, attrs = {}) {
  return [h("dt", {}, label), h("dd", attrs, value)];
}
