// Small DOM helpers: element creation without a framework.

/**
 * Creates an element. `attrs` keys: `class`, `text`, `on<event>` (listeners), `dataset`
 * (object), `style` (string), anything else as an attribute (skipped when null/false).
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

function setAttrs(el, attrs) {
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "text") el.textContent = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "class" && el instanceof SVGElement) el.setAttribute("class", value);
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

/** A table: `columns` are header labels, `rows` arrays of cells (nodes or text). */
export function table(attrs, columns, rows) {
  return h(
    "table",
    attrs,
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", {}, c)))),
    h("tbody", {}, rows),
  );
}

/** A "label: value" pair of a definition grid. */
export function field(label, value, attrs = {}) {
  return [h("dt", {}, label), h("dd", attrs, value)];
}
