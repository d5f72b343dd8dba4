// The Metrics tab: uPlot charts of throughput, watermark lag behind the newest event time and
// late rows over the history the Hub keeps; a table of every operator now; the subtasks of one
// operator (`#/jobs/<id>/metrics/<operator>`: per lane and subtask its rows, backpressure and
// watermark); the sources' splits.

import uPlot from "./vendor/uPlot.esm.js";
import { h, patch, replace, table } from "./dom.js";
import { clock, count, dash, duration, eventTime, percent, rate } from "./format.js";
import { showLiveness } from "./liveness.js";
import { planGraph } from "./graph.js";
import {
  newestSample, operatorStats, pollMetrics, series, subtaskFigures, unavailable,
} from "./metrics-data.js";

const PALETTE = ["#2f6fde", "#e0712c", "#2ca25f", "#c0392b", "#8e44ad", "#16a085",
  "#d4ac0d", "#7f8c8d", "#d35400", "#1abc9c"];

const chartWidth = (container) => Math.max(container.clientWidth - 34, 240);

function chart(title, unit, values, xs, container, format, colors) {
  const ids = [...values.keys()];
  const opts = {
    title,
    width: chartWidth(container),
    height: 260,
    scales: { x: { time: true } },
    axes: [
      {
        // Whole seconds, as wall-clock times.
        incrs: [1, 2, 5, 10, 15, 30, 60, 120, 300, 600],
        values: (_u, ticks) => ticks.map((t) => clock(t * 1000)),
        space: 70,
      },
      { values: (_u, ticks) => ticks.map((t) => format(t)), size: 96 },
    ],
    series: [
      {},
      ...ids.map((id, i) => ({
        label: id,
        stroke: colors.get(id) || PALETTE[i % PALETTE.length],
        width: 2,
        spanGaps: true,
        value: (_u, v) => (v === null ? dash : format(v)),
      })),
    ],
    legend: { live: true },
  };
  const data = [xs, ...ids.map((id) => values.get(id))];
  const el = h("div", { class: "chart", "data-testid": `chart-${unit}`,
    dataset: { points: xs.length } });
  container.append(el);
  return { plot: new uPlot(opts, data, el), ids, unit };
}

const cell = (value, attrs = {}) => h("td", { class: "num", ...attrs }, value);

function operatorsTable(jobId, stats, selected) {
  if (stats.size === 0) return h("p", { class: "muted" }, "No samples yet: the job is not running.");
  return table(
    { class: "grid", id: "operator-metrics" },
    ["Operator", "Kind", "Subtasks", "Rows in", "Rows out", "Busy", "Backpressured",
      "Watermark (UTC)", "Newest event (UTC)", "Watermark lag"],
    [...stats].map(([id, s]) =>
      h("tr", { "data-testid": "operator-metrics-row", key: id, dataset: { operatorId: id },
        class: id === selected ? "selected" : null },
      h("td", { class: "mono" }, h("a", {
        href: `#/jobs/${encodeURIComponent(jobId)}/metrics/${encodeURIComponent(id)}`,
        title: "Show its subtasks", "data-testid": "operator-link" }, id)),
      h("td", {}, s.kind),
      cell(count(s.subtasks)),
      cell(rate(s.rowsIn)),
      cell(rate(s.rowsOut)),
      cell(percent(s.busy)),
      cell(percent(s.backpressure)),
      cell(eventTime(s.watermark)),
      cell(eventTime(s.newestEvent)),
      cell(duration(s.eventLag), { title: "behind the newest event time the sources read" })),
    ),
  );
}

/** The subtasks of `id`; task figures (busy, backpressure, watermark) are its chain head's. */
function subtasksView(jobId, id, figures, headOf) {
  const head = headOf.get(id) ?? id;
  const byTask = new Map(figures.filter((f) => f.operatorId === head)
    .map((f) => [`${f.lane}#${f.subtask}`, f]));
  const rows = figures.filter((f) => f.operatorId === id);
  return h(
    "div",
    { class: "card wide", id: "subtasks", "data-testid": "subtasks", dataset: { operatorId: id } },
    h("h2", {}, `Subtasks of ${id}`,
      h("a", { class: "close-link", href: `#/jobs/${encodeURIComponent(jobId)}/metrics` }, "close")),
    head !== id
      ? h("p", { class: "muted" }, `Busy, backpressure and watermark are those of its task, ` +
        `headed by ${head}.`)
      : null,
    rows.length === 0
      ? h("p", { class: "muted" }, "No figures of this operator: it is not running.")
      : table(
        { class: "grid", "data-testid": "subtask-table" },
        ["Lane", "Subtask", "Rows in", "Rows out", "Busy", "Backpressured", "Watermark (UTC)",
          "Newest event (UTC)", "Watermark lag"],
        rows.map((f) => {
          const t = byTask.get(`${f.lane}#${f.subtask}`) || f;
          return h("tr", { key: `${f.lane}#${f.subtask}`, "data-testid": "subtask-row" },
            cell(f.lane), cell(f.subtask), cell(rate(f.rowsIn)), cell(rate(f.rowsOut)),
            cell(percent(t.busy)), cell(percent(t.backpressure)), cell(eventTime(t.watermark)),
            cell(eventTime(f.newestEvent)), cell(duration(t.eventLag)));
        }),
      ),
  );
}

function splitsView(m) {
  const splits = (m.lanes || []).flatMap((l) => {
    const last = (l.samples || [])[l.samples.length - 1];
    return last ? (last.splits || []).map((sp) => ({ lane: l.lane, ...sp })) : [];
  });
  if (splits.length === 0) return null;
  return [
    h("h2", { class: "spaced" }, "Source splits"),
    table(
      { class: "grid", id: "split-metrics" },
      ["Lane", "Source", "Split", "Rows read", "Position", "Backlog"],
      splits.map((sp) =>
        h("tr", { key: `${sp.lane}#${sp.operatorId}#${sp.split}` },
          cell(sp.lane), h("td", { class: "mono" }, sp.operatorId),
          h("td", { class: "mono" }, sp.split), cell(count(sp.rowsRead)),
          cell(count(sp.position ?? null)), cell(count(sp.backlog ?? null)))),
    ),
  ];
}

export function renderMetrics(root, detail, _ctx, current, params) {
  const jobId = detail.job.jobId;
  const selected = params.operator || null;
  const headOf = new Map();
  for (const c of planGraph(detail.plans).chains) for (const op of c.chain) headOf.set(op, c.chain[0]);
  const status = h("div", { class: "graph-status muted", "data-testid": "metrics-status" });
  const charts = h("div", { class: "charts" });
  const subtasks = h("div", {});
  const summary = h("div", { class: "card wide" });
  charts.append(h("p", { class: "muted", "data-testid": "charts-waiting" },
    "The charts start after two samples (about two seconds of a running job)."));
  replace(root, status, subtasks, charts, summary);
  let plots = null;
  let shape = "";
  let last = null;
  const showStatus = () => showLiveness(status, newestSample(last),
    current().job.observed.phase, last ? last.lanes.length : 0);
  const resize = () => {
    for (const p of plots || []) p.plot.setSize({ width: chartWidth(charts), height: 260 });
  };
  window.addEventListener("resize", resize);
  const stop = pollMetrics(jobId, 1500, (m) => {
    last = m;
    showStatus();
    const stats = operatorStats(m);
    if (selected) patch(subtasks, subtasksView(jobId, selected, subtaskFigures(m), headOf));
    patch(summary, h("h2", {}, "Operators now"), operatorsTable(jobId, stats, selected),
      splitsView(m));
    const sr = series(m);
    const newShape = [sr.operators, [...sr.lag.keys()], [...sr.late.keys()]]
      .map((ids) => ids.join(",")).join("|");
    if (sr.xs.length < 2) return;
    if (!plots || newShape !== shape) {
      for (const p of plots || []) p.plot.destroy();
      charts.replaceChildren();
      shape = newShape;
      // One color per operator in every chart.
      const colors = new Map(sr.operators.map((id, i) => [id, PALETTE[i % PALETTE.length]]));
      plots = [chart("Throughput per operator", "rows", sr.rows, sr.xs, charts,
        (v) => rate(v), colors)];
      if (sr.lag.size > 0) {
        plots.push(chart("Watermark lag behind the newest event time read", "lag", sr.lag, sr.xs,
          charts, (v) => duration(v), colors));
      }
      if (sr.late.size > 0) {
        plots.push(chart("Late rows (dropped, routed or updated)", "late", sr.late,
          sr.xs, charts, (v) => rate(v), colors));
      }
      return;
    }
    for (const p of plots) {
      const values = { rows: sr.rows, lag: sr.lag, late: sr.late }[p.unit];
      p.plot.setData([sr.xs, ...p.ids.map((id) => values.get(id))]);
    }
    for (const p of plots) p.plot.root.parentElement.dataset.points = String(sr.xs.length);
  }, (e, failures) => {
    showStatus();
    if (failures > 1) return;
    const note = unavailable(e, "Metrics");
    if (note) replace(summary, note);
  });
  return () => {
    stop();
    window.removeEventListener("resize", resize);
  };
}
