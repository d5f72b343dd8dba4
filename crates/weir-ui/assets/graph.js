// The job's plan as a graph: one node per operator of the stream graph (kind, type,
// parallelism), operators chained into one task drawn inside a box, edges labelled with their
// partitioning. Laid out by dagre, drawn as SVG; every node shows rows/s, backpressure, its
// task's watermark and how far that is behind the newest event time read, refreshed every
// 1.5 s. A node (click, or Enter when focused) opens its subtasks in the Metrics tab.

import { Graph, layout } from "./vendor/dagre.esm.js";
import { h, replace, svg } from "./dom.js";
import { dash, duration, eventTime, percent, rate } from "./format.js";
import { showLiveness } from "./liveness.js";
import { newestSample, operatorStats, pollMetrics, unavailable } from "./metrics-data.js";

const NODE_W = 230;
const NODE_H = 108;

/** The operators, edges and chains of `plans` (what `weir plan` prints). */
export function planGraph(plans) {
  const stream = plans.streamGraph || {};
  const jobGraph = plans.jobGraph || {};
  const nodes = (stream.nodes || []).map((n) => ({
    id: n.operatorId,
    kind: n.kind,
    type: n.typeName,
    parallelism: n.resolvedParallelism ?? n.parallelism ?? null,
  }));
  const edges = (stream.edges || []).map((e) => ({
    id: e.edgeId,
    from: e.from,
    to: e.to,
    policy: e.policy,
    keys: e.keys || null,
  }));
  const chains = (jobGraph.vertices || []).map((v) => ({ id: v.vertexId, chain: v.chain || [],
    parallelism: v.parallelism }));
  return { nodes, edges, chains };
}

function edgeLabel(e) {
  const policy = (e.policy || "").toLowerCase();
  return e.keys && e.keys.length ? `${policy}(${e.keys.join(", ")})` : policy;
}

function pathOf(points) {
  if (!points || points.length === 0) return "";
  const [first, ...rest] = points;
  if (rest.length === 0) return `M${first.x},${first.y}`;
  // A smooth curve through dagre's points.
  let d = `M${first.x},${first.y}`;
  for (let i = 0; i < rest.length - 1; i += 1) {
    const p = rest[i];
    const q = rest[i + 1];
    d += ` Q${p.x},${p.y} ${(p.x + q.x) / 2},${(p.y + q.y) / 2}`;
  }
  const last = rest[rest.length - 1];
  return `${d} L${last.x},${last.y}`;
}

/**
 * Draws the plan into `container`; returns `update(stats)` for the node metrics. `open(id)`
 * is called when a node is clicked or activated by keyboard.
 */
export function drawPlan(container, plans, open) {
  const plan = planGraph(plans);
  const g = new Graph({ compound: true, multigraph: true });
  g.setGraph({ rankdir: "LR", nodesep: 40, ranksep: 90, marginx: 24, marginy: 24 });
  g.setDefaultEdgeLabel(() => ({}));
  const chainOf = new Map();
  for (const c of plan.chains) {
    if (c.chain.length > 1) {
      g.setNode(`chain:${c.id}`, { label: c.id, paddingTop: 28, paddingLeft: 14,
        paddingRight: 14, paddingBottom: 14 });
    }
    for (const op of c.chain) chainOf.set(op, c);
  }
  for (const n of plan.nodes) {
    g.setNode(n.id, { width: NODE_W, height: NODE_H });
    const c = chainOf.get(n.id);
    if (c && c.chain.length > 1) g.setParent(n.id, `chain:${c.id}`);
  }
  for (const e of plan.edges) {
    g.setEdge(e.from, e.to, { label: edgeLabel(e), width: edgeLabel(e).length * 7 + 12,
      height: 18, labelpos: "c" }, e.id);
  }
  layout(g);
  const size = g.graph();
  const width = Math.max(size.width || 0, 200);
  const height = Math.max(size.height || 0, 120);

  const root = svg("svg", {
    id: "plan-graph",
    "data-testid": "plan-graph",
    class: "plan-graph",
    viewBox: `0 0 ${width} ${height}`,
    width,
    height,
    role: "img",
    "aria-label": `Plan of ${plans.streamGraph ? plans.streamGraph.jobId : "the job"}`,
  });
  root.append(
    svg("defs", {},
      svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7,
        markerHeight: 7, orient: "auto-start-reverse" },
      svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow-head" }))),
  );
  for (const c of plan.chains.filter((c) => c.chain.length > 1)) {
    const b = g.node(`chain:${c.id}`);
    root.append(svg("g", { class: "chain", "data-testid": "graph-chain", "data-chain": c.id },
      svg("rect", { x: b.x - b.width / 2, y: b.y - b.height / 2, width: b.width,
        height: b.height, rx: 10 }),
      svg("text", { x: b.x - b.width / 2 + 12, y: b.y - b.height / 2 + 18, class: "chain-label" },
        `chained task · ${c.chain.length} operators · p=${c.parallelism}`)));
  }
  for (const e of g.edges()) {
    const data = g.edge(e);
    const group = svg("g", { class: "edge", "data-testid": "graph-edge", "data-from": e.v,
      "data-to": e.w },
    svg("path", { d: pathOf(data.points), "marker-end": "url(#arrow)" }));
    if (data.x !== undefined && data.label) {
      const w = data.width;
      group.append(
        svg("rect", { x: data.x - w / 2, y: data.y - 9, width: w, height: 18, rx: 9,
          class: "edge-label-bg" }),
        svg("text", { x: data.x, y: data.y + 4, class: "edge-label", "text-anchor": "middle" },
          data.label),
      );
    }
    root.append(group);
  }
  const cells = new Map();
  for (const n of plan.nodes) {
    const p = g.node(n.id);
    const x = p.x - NODE_W / 2;
    const y = p.y - NODE_H / 2;
    const metricsText = svg("text", { x: x + 12, y: y + 64, class: "node-metrics",
      "data-testid": "node-rate" }, dash);
    const healthText = svg("text", { x: x + 12, y: y + 80, class: "node-health",
      "data-testid": "node-health" }, `bp ${dash} · lag ${dash}`);
    const wmText = svg("text", { x: x + 12, y: y + 96, class: "node-health",
      "data-testid": "node-watermark" }, `wm ${dash}`);
    const bar = svg("rect", { x, y: y + NODE_H - 4, width: 0, height: 4, class: "bp-bar" });
    const title = svg("title", {}, n.id);
    const group = svg("g", {
      class: `node kind-${n.kind}`,
      "data-testid": "graph-node",
      "data-operator-id": n.id,
      "data-kind": n.kind,
      tabindex: 0,
      role: "button",
      "aria-label": `${n.id}: show its subtasks`,
      onclick: () => open(n.id),
      onkeydown: (e) => {
        if (e.key === "Enter" || e.key === " ") {
          e.preventDefault();
          open(n.id);
        }
      },
    },
    title,
    svg("rect", { x, y, width: NODE_W, height: NODE_H, rx: 8, class: "node-box" }),
    svg("rect", { x, y, width: 6, height: NODE_H, class: "node-stripe" }),
    svg("text", { x: x + 12, y: y + 20, class: "node-type" },
      `${n.type} · ${n.kind}`),
    svg("text", { x: x + NODE_W - 10, y: y + 20, class: "node-par", "text-anchor": "end" },
      `p=${n.parallelism ?? "?"}`),
    svg("text", { x: x + 12, y: y + 42, class: "node-id" }, clip(n.id, 26)),
    metricsText, healthText, wmText, bar);
    root.append(group);
    cells.set(n.id, { metricsText, healthText, wmText, bar, group, kind: n.kind });
  }
  replace(container, root);

  // Task-level figures (backpressure, watermark) are counted at the chain's head operator.
  const headOf = new Map();
  for (const c of plan.chains) for (const op of c.chain) headOf.set(op, c.chain[0]);
  return function update(stats) {
    for (const [id, cell] of cells) {
      const s = stats.get(id);
      const head = stats.get(headOf.get(id) ?? id) || s;
      if (!s) continue;
      cell.metricsText.textContent = rate(s.rows);
      const bp = head ? head.backpressure : null;
      const lag = head ? head.eventLag : null;
      cell.healthText.textContent = `bp ${percent(bp)} · lag ${duration(lag)}`;
      // Event times as UTC time of day; the full timestamp on hover (the node's title).
      const wm = head ? head.watermark : null;
      cell.wmText.textContent = cell.kind === "source"
        ? `newest event ${timeOfDay(s.newestEvent)}`
        : `wm ${timeOfDay(wm)}`;
      cell.group.querySelector("title").textContent = `${id}\nwatermark ${eventTime(wm)}` +
        `\nnewest event time read ${eventTime(cell.kind === "source" ? s.newestEvent : null)}`;
      cell.bar.setAttribute("width", String(Math.round(NODE_W * Math.min(bp ?? 0, 1))));
      cell.group.classList.toggle("backpressured", (bp ?? 0) > 0.5);
      cell.group.dataset.rowsPerSecond = String(Math.round(s.rows));
    }
  };
}

/** "HH:MM:SS.mmm" of an event time (UTC), the date left to the tooltip. */
function timeOfDay(ms) {
  const text = eventTime(ms);
  return text === dash ? dash : text.slice(11);
}

function clip(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

export function renderGraph(root, detail, _ctx, current) {
  const status = h("div", { class: "graph-status muted", "data-testid": "graph-status" },
    "Waiting for metrics…");
  const canvas = h("div", { class: "graph-canvas" });
  replace(root, h("div", { class: "graph-legend" },
    h("span", { class: "swatch kind-source" }), "source",
    h("span", { class: "swatch kind-operator" }), "operator",
    h("span", { class: "swatch kind-sink" }), "sink",
    h("span", { class: "muted" },
      " · boxes: operators chained into one task · edges: partitioning · bp: backpressured " +
      "time · wm: watermark (UTC) · lag: watermark behind the newest event time read · " +
      "click an operator for its subtasks"),
  ), canvas, status);
  let update;
  try {
    const jobId = encodeURIComponent(detail.job.jobId);
    update = drawPlan(canvas, detail.plans, (id) => {
      location.hash = `#/jobs/${jobId}/metrics/${encodeURIComponent(id)}`;
    });
  } catch (e) {
    replace(canvas, h("p", { class: "empty" }, `The plan cannot be drawn: ${e.message}`));
    return null;
  }
  let last = null;
  const showStatus = () => showLiveness(status, newestSample(last),
    current().job.observed.phase, last ? last.lanes.length : 0);
  return pollMetrics(detail.job.jobId, 1500, (m) => {
    last = m;
    update(operatorStats(m));
    showStatus();
  }, (e, failures) => {
    showStatus();
    if (failures > 1) return;
    const note = unavailable(e, "Metrics");
    if (note) replace(status, note);
  }, { history: false });
}
